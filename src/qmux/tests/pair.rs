//! A client and a server back to back: streams both ways, flow control, resets, datagrams,
//! pings, idle timeout and close, for every version and framing, with the bytes delivered in
//! one piece and byte by byte.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use super::{small_config, FRAMINGS, VERSIONS};
use crate::{Connection, Error, Framing, Role, Shutdown, Version};

pub(crate) struct Pair {
    pub(crate) c: Connection,
    pub(crate) s: Connection,
    pub(crate) now: Instant,
    /// Deliver byte by byte instead of in one piece.
    bytewise: bool,
}

impl Pair {
    pub(crate) fn new(version: Version, framing: Framing, bytewise: bool) -> Self {
        let now = Instant::now();
        let config = small_config();
        let c = Connection::new(version, framing, Role::Client, &config, now);
        let s = Connection::new(version, framing, Role::Server, &config, now);
        let mut p = Pair { c, s, now, bytewise };
        p.shuttle();
        assert!(p.c.is_established() && p.s.is_established());
        p
    }

    /// Moves output both ways until neither side has any. Returns whether anything moved.
    pub(crate) fn shuttle(&mut self) -> bool {
        let mut moved = false;
        loop {
            let a = Self::pass(&mut self.c, &mut self.s, self.now, self.bytewise);
            let b = Self::pass(&mut self.s, &mut self.c, self.now, self.bytewise);
            if !a && !b {
                return moved;
            }
            moved = true;
        }
    }

    fn pass(from: &mut Connection, to: &mut Connection, now: Instant, bytewise: bool) -> bool {
        let mut moved = false;
        // Odd sizes, so that output is cut anywhere.
        while let Some(b) = from.take_output(7001) {
            moved = true;
            if bytewise {
                for byte in b.iter() {
                    let _ = to.recv(std::slice::from_ref(byte), now);
                }
            } else {
                let _ = to.recv(&b, now);
            }
        }
        moved
    }
}

/// One side's application: streams to send, and what it received.
#[derive(Default)]
struct App {
    sends: Vec<(u64, Vec<u8>, usize, bool)>,
    got: HashMap<u64, (Vec<u8>, bool)>,
    resets: HashMap<u64, u64>,
}

impl App {
    fn send(&mut self, id: u64, data: Vec<u8>) {
        self.sends.push((id, data, 0, false));
    }

    /// Sends what credit allows; streams the peer has not opened yet wait.
    fn step(&mut self, conn: &mut Connection) {
        for (id, data, pos, done) in self.sends.iter_mut().filter(|s| !s.3) {
            match conn.stream_send(*id, &data[*pos..], true) {
                Ok(n) => {
                    *pos += n;
                    *done = *pos == data.len() && conn.stream_capacity(*id).map_or(true, |c| c == 0);
                }
                Err(Error::Done) | Err(Error::InvalidStreamState(_)) | Err(Error::StreamLimit) => {}
                Err(e) => panic!("stream_send({id}): {e:?}"),
            }
        }
        let mut buf = [0u8; 5000];
        while let Some(id) = conn.stream_readable_next() {
            loop {
                match conn.stream_recv(id, &mut buf) {
                    Ok((n, fin)) => {
                        let e = self.got.entry(id).or_default();
                        e.0.extend_from_slice(&buf[..n]);
                        e.1 |= fin;
                        if fin {
                            break;
                        }
                    }
                    Err(Error::StreamReset(code)) => {
                        self.resets.insert(id, code);
                        break;
                    }
                    Err(Error::Done) => break,
                    Err(e) => panic!("stream_recv({id}): {e:?}"),
                }
            }
        }
    }

    fn all_sent(&self) -> bool {
        self.sends.iter().all(|s| s.3)
    }
}

fn pattern(seed: u8, len: usize) -> Vec<u8> {
    (0..len).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)).collect()
}

fn exchange(version: Version, framing: Framing, bytewise: bool) {
    let mut p = Pair::new(version, framing, bytewise);
    let (mut ca, mut sa) = (App::default(), App::default());
    // Far beyond the 64 KiB connection and 20 KiB stream windows: credit has to flow.
    let big = if bytewise { 150_000 } else { 400_000 };
    ca.send(0, pattern(1, big));
    ca.send(2, pattern(2, 30_000));
    ca.send(4, pattern(3, 0));
    ca.send(6, pattern(4, 25_000));
    ca.send(1, pattern(10, 10));
    sa.send(0, pattern(5, 70_000));
    sa.send(4, pattern(9, 100));
    sa.send(1, pattern(6, big / 2));
    sa.send(3, pattern(7, 12_345));
    // More streams than the initial limit of 4: MAX_STREAMS must flow as streams finish.
    for i in 0..6u64 {
        sa.send(7 + 4 * i, pattern(8 + i as u8, 3000));
    }
    for round in 0.. {
        assert!(round < 20_000, "no progress");
        ca.step(&mut p.c);
        sa.step(&mut p.s);
        let moved = p.shuttle();
        let done = |a: &App, expect: usize| a.all_sent() && a.got.values().filter(|g| g.1).count() == expect;
        if !moved && done(&ca, 10) && done(&sa, 5) {
            break;
        }
    }
    let check = |a: &App, id: u64, data: Vec<u8>| {
        let (got, fin) = &a.got[&id];
        assert!(*fin, "{version:?} {framing:?} stream {id} without FIN");
        assert!(
            got == &data,
            "{version:?} {framing:?} stream {id}: {} bytes, want {}",
            got.len(),
            data.len()
        );
    };
    check(&sa, 0, pattern(1, big));
    check(&sa, 2, pattern(2, 30_000));
    check(&sa, 4, pattern(3, 0));
    check(&sa, 6, pattern(4, 25_000));
    check(&sa, 1, pattern(10, 10));
    check(&ca, 0, pattern(5, 70_000));
    check(&ca, 4, pattern(9, 100));
    check(&ca, 1, pattern(6, big / 2));
    check(&ca, 3, pattern(7, 12_345));
    for i in 0..6u64 {
        check(&ca, 7 + 4 * i, pattern(8 + i as u8, 3000));
    }
    // Done both ways and taken from the output: gone ("delivered").
    for id in [0u64, 2, 4, 6] {
        assert_eq!(
            p.c.stream_capacity(id),
            Err(Error::InvalidStreamState(id)),
            "{version:?} {framing:?} {id}"
        );
    }
    assert!(p.c.local_error().is_none() && p.s.local_error().is_none() && !p.c.is_closed());
    let left = |c: &Connection| c.streams.map.keys().copied().collect::<Vec<_>>();
    assert!(
        p.c.streams.map.is_empty() && p.s.streams.map.is_empty(),
        "left over: {:?} {:?}",
        left(&p.c),
        left(&p.s)
    );
}

#[test]
fn exchange_in_one_piece() {
    for v in VERSIONS {
        for f in FRAMINGS {
            exchange(v, f, false);
        }
    }
}

#[test]
fn exchange_byte_by_byte() {
    for v in VERSIONS {
        for f in FRAMINGS {
            exchange(v, f, true);
        }
    }
}

fn resets(version: Version, framing: Framing, bytewise: bool) {
    let mut p = Pair::new(version, framing, bytewise);
    // RESET_STREAM: the client gives up on its bidi stream 0 mid-way.
    assert_eq!(p.c.stream_send(0, b"partial", false), Ok(7));
    p.c.stream_shutdown(0, Shutdown::Write, 7).expect("reset");
    p.shuttle();
    assert_eq!(p.s.stream_readable_next(), Some(0));
    let mut buf = [0u8; 64];
    assert_eq!(p.s.stream_recv(0, &mut buf), Err(Error::StreamReset(7)));
    // STOP_SENDING: the server stops the client's uni stream 2; the client's sends then fail.
    assert_eq!(p.c.stream_send(2, b"hello", false), Ok(5));
    p.shuttle();
    p.s.stream_shutdown(2, Shutdown::Read, 9).expect("stop");
    p.shuttle();
    assert_eq!(p.c.stream_send(2, b"more", false), Err(Error::StreamStopped(9)));
    // The client answered with RESET_STREAM: the server's side of stream 2 is gone.
    assert_eq!(p.s.stream_recv(2, &mut buf), Err(Error::InvalidStreamState(2)));
    assert!(p.s.local_error().is_none() && p.c.local_error().is_none());
}

#[test]
fn reset_and_stop_sending() {
    for v in VERSIONS {
        for f in FRAMINGS {
            resets(v, f, false);
            resets(v, f, true);
        }
    }
}

#[test]
fn datagrams() {
    for v in VERSIONS {
        for f in FRAMINGS {
            let mut p = Pair::new(v, f, false);
            if v == Version::Qmux00 {
                assert_eq!(p.c.dgram_max_writable_len(), None);
                assert_eq!(p.c.dgram_send(b"x"), Err(Error::InvalidState));
                continue;
            }
            let max = p.c.dgram_max_writable_len().expect("datagrams on");
            assert!(max > 16000 && max < 16382, "{max}");
            p.c.dgram_send(b"ping").expect("send");
            p.s.dgram_send(&vec![7u8; max]).expect("send max");
            assert_eq!(p.s.dgram_send(&vec![7u8; max + 1]), Err(Error::BufferTooShort));
            p.shuttle();
            let mut buf = vec![0u8; 20000];
            assert_eq!(p.s.dgram_recv(&mut buf), Ok(4));
            assert_eq!(&buf[..4], b"ping");
            assert_eq!(p.c.dgram_recv(&mut buf), Ok(max));
            assert_eq!(p.c.dgram_recv(&mut buf), Err(Error::Done));
        }
    }
}

#[test]
fn qx_ping_keeps_alive_and_idle_closes() {
    for v in VERSIONS {
        for f in FRAMINGS {
            let mut p = Pair::new(v, f, false);
            // Nothing to send: QX_PING (-01/-02) once a sixth of the idle timeout passes with
            // nothing sent; the peer answers, so nobody times out.
            for _ in 0..40 {
                p.now += Duration::from_secs(2);
                p.c.on_timeout(p.now);
                p.s.on_timeout(p.now);
                p.shuttle();
            }
            if v == Version::Qmux00 && f == Framing::Records {
                // -00 has no QX_PING and TCP has no WebSocket Ping: the idle timeout ends it.
                assert!(p.c.is_timed_out() && p.c.is_closed(), "{v:?} {f:?}");
                continue;
            }
            assert!(!p.c.is_closed() && !p.s.is_closed(), "{v:?} {f:?} closed while pinging");
            assert!(p.c.timeout_instant().is_some());
            // The peer goes silent: idle timeout after 30 s without input.
            p.now += Duration::from_secs(31);
            p.c.on_timeout(p.now);
            assert!(p.c.is_timed_out() && p.c.is_closed() && !p.c.has_output(), "{v:?} {f:?}");
        }
    }
}

#[test]
fn websocket_ping_is_answered() {
    let mut p = Pair::new(Version::Qmux00, Framing::WebSocket, false);
    p.now += Duration::from_secs(5);
    p.s.on_timeout(p.now);
    let ping = p.s.take_output(usize::MAX).expect("ping");
    assert_eq!(&ping[..], &[0x89, 0x00]);
    p.c.recv(&ping, p.now).expect("recv ping");
    let pong = p.c.take_output(usize::MAX).expect("pong");
    assert_eq!(pong[0], 0x8a);
    assert_eq!(pong[1], 0x80, "masked, empty");
    p.s.recv(&pong, p.now).expect("recv pong");
}

#[test]
fn app_close_reaches_the_peer() {
    for v in VERSIONS {
        for f in FRAMINGS {
            for bytewise in [false, true] {
                let mut p = Pair::new(v, f, bytewise);
                p.c.close(true, 0x42, b"bye").expect("close");
                assert_eq!(p.c.close(true, 1, b""), Err(Error::Done));
                assert!(!p.c.is_closed(), "closed before its close frames left");
                p.shuttle();
                assert!(p.c.is_closed());
                let e = p.s.peer_error().expect("peer error");
                assert!(e.is_app && e.error_code == 0x42 && e.reason == b"bye", "{e:?}");
                assert!(p.s.is_closed());
                assert_eq!(p.s.stream_send(1, b"x", false), Err(Error::Closed));
            }
        }
    }
}

#[test]
fn transport_close_is_not_app() {
    let mut p = Pair::new(Version::Qmux01, Framing::WebSocket, false);
    p.s.close(false, crate::code::PROTOCOL_VIOLATION, b"").expect("close");
    p.shuttle();
    let e = p.c.peer_error().expect("peer error");
    assert!(!e.is_app && e.error_code == crate::code::PROTOCOL_VIOLATION);
}

#[test]
fn eof_closes() {
    let mut p = Pair::new(Version::Qmux01, Framing::Records, false);
    p.s.recv_eof(p.now);
    assert!(p.s.is_closed() && p.s.peer_error().is_none());
    assert_eq!(p.s.recv(b"x", p.now), Err(Error::Closed));
}

#[test]
fn capacity_is_what_send_takes() {
    for v in VERSIONS {
        for f in FRAMINGS {
            let mut p = Pair::new(v, f, false);
            // Opening by sending nothing.
            assert_eq!(p.c.stream_send(0, b"", false), Ok(0));
            let cap = p.c.stream_capacity(0).expect("open");
            assert_eq!(cap, 20 << 10, "{v:?} {f:?}: the peer's stream window");
            assert_eq!(p.c.stream_send(0, &vec![1; cap + 1000], false), Ok(cap));
            assert_eq!(p.c.stream_capacity(0), Ok(0));
            assert_eq!(p.c.stream_send(0, b"x", false), Err(Error::Done));
            // The output bound: uni streams fill max_output (48 KiB) before their windows.
            let mut total = 0;
            for id in [2u64, 6, 10] {
                let cap = p.c.stream_capacity(id).unwrap_or_else(|_| {
                    p.c.stream_send(id, b"", false).expect("open");
                    p.c.stream_capacity(id).expect("open")
                });
                assert_eq!(
                    p.c.stream_send(id, &vec![2; 30 << 10], false).unwrap_or(0),
                    cap,
                    "{v:?} {f:?} {id}"
                );
                total += cap;
            }
            assert!(p.c.out.len() <= small_config().max_output, "{v:?} {f:?}");
            assert!(total < 3 * (20 << 10));
            p.shuttle();
            // Room again once the output drains: a new stream gets the connection credit left.
            assert_eq!(p.c.stream_send(14, b"", false), Ok(0));
            let left = (64 << 10) - (20 << 10) - total;
            assert_eq!(p.c.stream_capacity(14), Ok(left), "{v:?} {f:?}");
        }
    }
}
