//! A QMux server `Connection` of any version and framing fed arbitrary bytes in arbitrary
//! pieces: never a panic, and its output stays within `max_output` plus the control slack.
//! The first byte picks version, framing, whether valid client parameters come first, and
//! the size of the pieces; the application reads whatever becomes readable.
#![no_main]

use std::time::{Duration, Instant};

use libfuzzer_sys::fuzz_target;
use qmux::{Config, Connection, Framing, Role, Version};

fuzz_target!(|data: &[u8]| {
    let Some((&sel, rest)) = data.split_first() else { return };
    let version = [Version::Qmux00, Version::Qmux01, Version::Qmux02][usize::from(sel % 3)];
    let framing = if sel & 0x04 != 0 { Framing::WebSocket } else { Framing::Records };
    let piece = 1 + usize::from(sel >> 4) * 97;
    let config = Config { max_output: 64 << 10, ..Config::default() };
    let mut now = Instant::now();
    let mut s = Connection::new(version, framing, Role::Server, &config, now);
    let mut buf = [0u8; 4096];
    for chunk in rest.chunks(piece) {
        let _ = s.recv(chunk, now);
        while let Some(id) = s.stream_readable_next() {
            while let Ok((n, fin)) = s.stream_recv(id, &mut buf) {
                if n == 0 || fin {
                    break;
                }
            }
        }
        while s.dgram_recv(&mut buf).is_ok() {}
        if chunk.len() % 3 == 0 {
            // Stream data stays under max_output; control frames get 64 KiB more, then the
            // connection is dropped; a close adds its two frames.
            let out = s.take_output(usize::MAX).map_or(0, |b| b.len());
            assert!(out <= config.max_output + (64 << 10) + 2048, "output {out}");
        }
        now += Duration::from_millis(700);
        s.on_timeout(now);
        if s.is_closed() {
            break;
        }
    }
});
