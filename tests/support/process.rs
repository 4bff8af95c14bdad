//! Helpers for tests that run the binaries as processes: a child killed on drop, free
//! loopback ports, a minimal HTTP GET for the metrics endpoint, the request a test's own
//! HTTP receiver gets, polling with a timeout.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream, UdpSocket};
use std::process::Child;
use std::time::{Duration, Instant};

/// A child process killed when dropped (a failing test leaves no relay behind).
pub struct Proc(pub Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A loopback port free for UDP and for TCP: the relay serves QUIC on it and, by default, its
/// web listener on the same TCP port (README.md, "Watching in a browser").
pub fn free_udp() -> u16 {
    for _ in 0..100 {
        let udp = UdpSocket::bind("127.0.0.1:0").expect("a free UDP port");
        let port = udp.local_addr().expect("its address").port();
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no loopback port free for both UDP and TCP")
}

pub fn free_tcp() -> u16 {
    TcpListener::bind("127.0.0.1:0").and_then(|s| s.local_addr()).map(|a| a.port()).expect("a free TCP port")
}

/// GET `path` from the HTTP endpoint on `port`; `None` while nothing answers.
pub fn get(port: u16, path: &str) -> Option<String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(s, "GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    Some(out)
}

/// The `core="all"` sample of metric `name` on the metrics endpoint `port`.
pub fn metric(port: u16, name: &str) -> Option<u64> {
    let text = get(port, "/metrics")?;
    let prefix = format!("{name}{{core=\"all\"}} ");
    text.lines().find_map(|l| l.strip_prefix(&prefix)).and_then(|v| v.trim().parse().ok())
}

/// Polls `f` every 100 ms until it holds; panics naming `what` after `timeout`.
pub fn wait_for(what: &str, timeout: Duration, mut f: impl FnMut() -> bool) {
    let end = Instant::now() + timeout;
    while !f() {
        assert!(Instant::now() < end, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// One request on `stream` (a test's own HTTP server): its request line and its body (the
/// length its Content-Length gives). The caller writes the answer on `stream`.
pub fn read_request(stream: &TcpStream) -> std::io::Result<(String, Vec<u8>)> {
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    let mut r = BufReader::new(stream.try_clone()?);
    let (mut request, mut line, mut length) = (String::new(), String::new(), 0usize);
    r.read_line(&mut request)?;
    loop {
        line.clear();
        r.read_line(&mut line)?;
        if line.trim().is_empty() {
            break;
        }
        if let Some((k, v)) = line.split_once(':') {
            if k.eq_ignore_ascii_case("content-length") {
                length = v.trim().parse().unwrap_or(0);
            }
        }
    }
    let mut body = vec![0u8; length];
    r.read_exact(&mut body)?;
    Ok((request, body))
}
