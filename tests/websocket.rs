//! MoQT over QMux over a WebSocket end to end: the relay's TCP port (the web listener, at the
//! QUIC port's number) upgrades `ws://` and `wss://` requests offering `qmux-VV.moqt-NN` and
//! hands the connection to a core, which serves the same MoQT session as over QUIC
//! (ARCHITECTURE.md, "Transports"). A publisher on one transport reaches subscribers on the
//! other in every draft; bad upgrades get their HTTP status; hostile bytes after the upgrade
//! close that connection only.

#![allow(clippy::unwrap_used)]

#[path = "support/live.rs"]
mod live;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::{Duration, Instant};

use bytes::Bytes;
use moq_edge::client::Fleet;
use moq_edge::client::{Publisher, Relay, Subscriber};
use moq_edge::host::{RelayFactory, RelayGauges};
use moq_edge::relay::{RelayConfig, RelayStats};
use moq_edge::runtime::{self, RuntimeConfig, ServerHandle};
use moq_edge::session::SessionConfig;
use moq_edge::websocket::WebSocketSink;
use moq_edge::wire::model::FullTrackName;
use moq_edge::wire::Version;

use live::{deadline, GROUPS, PER_GROUP};

/// A relay on two cores with its web listener (WebSocket upgrades on) at the same port.
fn relay() -> ServerHandle {
    relay_with_gauges().0
}

fn relay_with_gauges() -> (ServerHandle, Arc<[RelayGauges]>) {
    let mut rc = RuntimeConfig::new(([127, 0, 0, 1], 0).into(), 2);
    rc.pin = false;
    let config = RelayConfig { linger: Duration::from_millis(50), ..RelayConfig::default() };
    let factory = RelayFactory::new(config, SessionConfig::default(), &[5; 32]);
    let gauges = factory.gauges();
    let server = runtime::start(rc, Arc::new(factory)).expect("relay starts");
    let reloader = server.tls_reloader();
    let sha = reloader.identity().sha256;
    let sources = moq_edge::web::Sources {
        certificate: Arc::new(move || sha),
        https: Some(Arc::new(move || reloader.https_context())),
        websocket: Some(WebSocketSink::new(server.stream_acceptor(), &Version::ALL)),
        side_door: None,
        auth: None,
        admission: None,
    };
    moq_edge::web::serve(server.local_addr(), sources).expect("web listener");
    (server, gauges)
}

fn track(name: &str) -> FullTrackName {
    live::track("ws", name)
}

/// A distinct payload per object, some larger than a QMux record.
fn payload(group: u64, object: u64) -> Bytes {
    let mut p = format!("g{group}o{object}:").into_bytes();
    p.resize(20 + (object as usize * 9733) % 40_000, b'a' + (group % 26) as u8);
    Bytes::from(p)
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Via {
    Quic,
    Ws,
    Wss,
}

fn relay_at(addr: SocketAddr, via: Via) -> Relay {
    match via {
        Via::Quic => Relay::from(addr),
        Via::Ws => Relay::websocket(addr, "/moq", false),
        Via::Wss => Relay::websocket(addr, "/moq", true),
    }
}

/// Every draft, a publisher and two subscribers on different transports (QUIC, `ws://`,
/// `wss://`): every object arrives whole, once and in order within its group.
#[test]
fn publisher_and_subscribers_over_websocket_in_every_draft() {
    let server = relay();
    let addr = server.local_addr();
    let pairs = [(Via::Quic, Via::Ws), (Via::Ws, Via::Quic), (Via::Wss, Via::Wss), (Via::Quic, Via::Wss)];
    for version in Version::ALL {
        for (pv, sv) in pairs {
            let what = format!("{version:?} {pv:?}→{sv:?}");
            let t = track(&format!("{version:?}-{pv:?}-{sv:?}"));
            let (publisher, go) = live::publish(relay_at(addr, pv), version, t.clone(), false, payload);
            let mut subs: Vec<_> = (0..2)
                .map(|_| Subscriber::connect(relay_at(addr, sv), version, deadline()).unwrap())
                .collect();
            let ids: Vec<_> =
                subs.iter_mut().map(|s| s.subscribe(t.clone(), None, deadline()).unwrap()).collect();
            go.send(()).unwrap();
            for (s, id) in subs.iter_mut().zip(&ids) {
                let want = (GROUPS * PER_GROUP) as usize;
                let end = deadline();
                while s.received(*id).len() < want {
                    assert!(Instant::now() < end, "{what}: {} objects", s.received(*id).len());
                    s.pump(Instant::now() + Duration::from_millis(10)).unwrap();
                }
                // Each group's objects in order, once, with their bytes (groups are separate
                // streams: one may overtake another).
                let mut next = [0u64; GROUPS as usize];
                for r in s.received(*id) {
                    let g = r.group as usize;
                    assert_eq!(r.object, next[g], "{what}: group {g} in order");
                    assert_eq!(r.payload, payload(r.group, r.object), "{what}: bytes of {g}/{}", r.object);
                    next[g] += 1;
                }
            }
            publisher.join().unwrap();
        }
    }
    server.shutdown().unwrap();
}

/// What the relay answers a raw upgrade request (its status line).
fn upgrade_status(addr: SocketAddr, request: &str) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(request.as_bytes()).unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 1024];
    while !got.windows(4).any(|w| w == b"\r\n\r\n") {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
    }
    String::from_utf8_lossy(&got).lines().next().unwrap_or_default().to_string()
}

fn upgrade_request(protocol: &str, version: &str) -> String {
    format!(
        "GET /moq HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: {version}\r\nSec-WebSocket-Protocol: {protocol}\r\n\r\n"
    )
}

/// The relay's choice among what the client offers, and its refusals: no QMux MoQT
/// subprotocol is 400, another WebSocket version 426; the accepted answer carries the
/// RFC 6455 §4.2.2 key.
#[test]
fn upgrades_choose_by_the_relays_preference_and_refuse_what_does_not_fit() {
    let server = relay();
    let addr = server.local_addr();
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(
        upgrade_request("qmux-00.moqt-16, qmux-01.moqt-18, qmux-01.moqt-16, webtransport", "13").as_bytes(),
    )
    .unwrap();
    let mut got = vec![0u8; 1024];
    let n = s.read(&mut got).unwrap();
    let head = String::from_utf8_lossy(&got[..n]).to_string();
    assert!(head.starts_with("HTTP/1.1 101"), "{head}");
    assert!(head.contains("Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo="), "{head}");
    // Drafts in the relay's order (22, 20, 18, 16), then QMux -01 before -00.
    assert!(head.contains("Sec-WebSocket-Protocol: qmux-01.moqt-18\r\n"), "{head}");
    assert!(upgrade_status(addr, &upgrade_request("qmux-01.moq-lite-03, qmux-01, webtransport", "13"))
        .contains(" 400 "));
    assert!(upgrade_status(addr, &upgrade_request("qmux-01.moqt-18", "8")).contains(" 426 "));
    server.shutdown().unwrap();
}

/// Hostile bytes after a good upgrade (a text message, an oversized record, a frame before
/// the transport parameters, garbage, an unmasked frame, data beyond flow control, silence
/// where SETUP should be) and an upgrade request that never ends (slowloris) close that
/// connection within seconds; a subscriber on another connection keeps being served.
#[test]
fn hostile_websocket_peers_are_closed_and_harm_no_one_else() {
    let server = relay();
    let addr = server.local_addr();
    let t = track("hostile");
    let (publisher, go) =
        live::publish(relay_at(addr, Via::Quic), Version::Draft22, t.clone(), false, payload);
    let mut good = Subscriber::connect(relay_at(addr, Via::Ws), Version::Draft22, deadline()).unwrap();
    let id = good.subscribe(t.clone(), None, deadline()).unwrap();
    // Client frames are masked (RFC 6455 §5.3); the key is zero so the payload reads as is.
    let frame = |opcode: u8, payload: &[u8]| {
        let mut f = vec![0x80 | opcode];
        match payload.len() {
            n if n < 126 => f.push(0x80 | n as u8),
            n if n < 65536 => {
                f.push(0x80 | 126);
                f.extend_from_slice(&(n as u16).to_be_bytes());
            }
            n => {
                f.push(0x80 | 127);
                f.extend_from_slice(&(n as u64).to_be_bytes());
            }
        }
        f.extend_from_slice(&[0, 0, 0, 0]);
        f.extend_from_slice(payload);
        f
    };
    // QX_TRANSPORT_PARAMETERS (draft-ietf-quic-qmux-01 §4.2) with no parameters.
    let params = frame(0x2, &[0xff, 0x51, 0x53, 0x30, 0x0d, 0x0a, 0x0d, 0x0a, 0x00]);
    let hostile: Vec<(&str, Vec<u8>)> = vec![
        ("text message", frame(0x1, b"hello")),
        ("oversized record", frame(0x2, &vec![0u8; 200_000])),
        ("STREAM before transport parameters", frame(0x2, &[0x0f, 0x00, 0x00, 0x01, b'x'])),
        ("garbage", vec![0xff; 64]),
        ("unmasked frame", vec![0x82, 0x01, 0x00]),
        // Empty transport parameters (every limit zero), then 1 byte at offset 4 MiB on the
        // client's first bidirectional stream: beyond the relay's stream and connection
        // credit (FLOW_CONTROL_ERROR).
        (
            "data beyond flow control",
            [params.clone(), frame(0x2, &[0x0e, 0x00, 0x80, 0x40, 0x00, 0x00, 0x01, b'x'])].concat(),
        ),
        // Transport parameters, then nothing: no SETUP within the setup timeout.
        ("silent after the upgrade", params.clone()),
    ];
    for (what, bytes) in hostile {
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s.write_all(upgrade_request("qmux-01.moqt-22", "13").as_bytes()).unwrap();
        let _ = s.write_all(&bytes);
        let start = Instant::now();
        let mut buf = vec![0u8; 65536];
        let closed = loop {
            match s.read(&mut buf) {
                Ok(0) => break true,
                Ok(_) => continue,
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break true,
                Err(_) => break false,
            }
        };
        assert!(closed, "{what}: the relay closes the connection");
        assert!(start.elapsed() < Duration::from_secs(10), "{what}: closed in time");
    }
    // A request head that never ends: the web listener gives it 5 s.
    let mut slow = TcpStream::connect(addr).unwrap();
    slow.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
    slow.write_all(b"GET /moq HTTP/1.1\r\nUpgrade: websocket\r\n").unwrap();
    let start = Instant::now();
    let mut buf = [0u8; 1024];
    while matches!(slow.read(&mut buf), Ok(n) if n > 0) {}
    assert!(start.elapsed() < Duration::from_secs(10), "slowloris: closed in time");
    go.send(()).unwrap();
    let want = (GROUPS * PER_GROUP) as usize;
    let end = deadline();
    while good.received(id).len() < want {
        assert!(Instant::now() < end, "the good subscriber got {} objects", good.received(id).len());
        good.pump(Instant::now() + Duration::from_millis(10)).unwrap();
    }
    publisher.join().unwrap();
    server.shutdown().unwrap();
}

/// A WebSocket viewer that stops reading loses whole subgroup streams to the relay's backlog
/// rule, as a QUIC one does (the relay's QMux state takes no more once its output is full, so
/// the bytes wait in the session's bounded queue), and the two viewers beside it on the same
/// relay get every object, whole and in order within its subgroup.
#[test]
fn a_stalled_websocket_viewer_loses_whole_subgroups_and_slows_no_one() {
    const STALL_GROUPS: u64 = 150;
    const OBJECTS: u64 = 10;
    let (server, gauges) = relay_with_gauges();
    let addr = server.local_addr();
    let t = track("stalled");
    let mut p = Publisher::connect(addr, Version::Draft22, deadline()).unwrap();
    p.add_track(t.clone());
    p.announce(t.namespace.clone(), deadline()).unwrap();
    let mut fleet = Fleet::subscribers(relay_at(addr, Via::Ws), Version::Draft22, 3, deadline()).unwrap();
    let ids = thread::scope(|scope| {
        let (done_tx, done) = mpsc::channel();
        let p = &mut p;
        scope.spawn(move || {
            while done.try_recv().is_err() {
                p.pump(Instant::now() + Duration::from_millis(5)).unwrap();
            }
        });
        let ids = fleet.subscribe_all(&t, None, deadline()).unwrap();
        done_tx.send(()).unwrap();
        ids
    });
    fleet.stall(0);
    let body = |g: u64, o: u64| {
        let mut b = format!("g{g}o{o}:").into_bytes();
        b.resize(10_000, b'a' + (g % 26) as u8);
        Bytes::from(b)
    };
    thread::scope(|scope| {
        let p = &mut p;
        scope.spawn(move || {
            for g in 0..STALL_GROUPS {
                let objects: Vec<Bytes> = (0..OBJECTS).map(|o| body(g, o)).collect();
                p.send_group(&t, g, &objects).unwrap();
                p.pump(Instant::now() + Duration::from_millis(2)).unwrap();
            }
            p.pump(Instant::now() + Duration::from_millis(500)).unwrap();
        });
        let want = (STALL_GROUPS * OBJECTS) as usize;
        let end = deadline();
        while fleet.received_counts(&ids)[1..].iter().any(|n| *n < want) {
            assert!(Instant::now() < end, "the reading viewers got {:?}", fleet.received_counts(&ids));
            fleet.pump(Instant::now() + Duration::from_millis(10)).unwrap();
        }
    });
    // Each subgroup's objects whole, once and in order (subgroups are separate streams: one
    // may overtake another).
    for (i, id) in ids.iter().enumerate().skip(1) {
        let mut next = vec![0u64; STALL_GROUPS as usize];
        for r in fleet.core(i).unwrap().received(*id) {
            let g = r.group as usize;
            assert_eq!(r.object, next[g], "viewer {i}: group {g} in order, each object once");
            assert_eq!(r.payload, body(r.group, r.object), "viewer {i}: bytes of {g}/{}", r.object);
            next[g] += 1;
        }
        assert!(next.iter().all(|n| *n == OBJECTS), "viewer {i}: every object");
    }
    let backlog = RelayStats::COUNTERS.iter().position(|c| c.label == "reason=\"backlog\"").unwrap();
    let shed: u64 = gauges.iter().map(|g| g.counters()[backlog]).sum();
    assert!(shed > 0, "the stalled viewer's subgroups were reset by the backlog rule");
    server.shutdown().unwrap();
}
