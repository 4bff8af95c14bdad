//! Slow and silent peers against the relay binary (ARCHITECTURE.md, "What a peer can grow"),
//! while an honest viewer watches over QUIC and an honest browser fetches the certificate's
//! hash from another address:
//!
//! - on the TCP port: a request head dripped a byte a second, a TLS handshake dripped the same
//!   way, a client that keeps dripping after its answer, and hundreds of silent connections
//!   from one address: each is closed by its deadline or refused beyond its address's share,
//!   and the honest client is answered every time;
//! - a MoQT client that floods requests and never reads the answers on its control stream
//!   (draft-14 and draft-16, over raw QUIC, WebTransport and QMux over WebSocket): closed
//!   with CONTROL_MESSAGE_TIMEOUT, the relay's memory bounded.
//!
//! The relay runs as a process so that its resident memory is its own
//! (`process_resident_memory_bytes` on its metrics endpoint).
#![allow(clippy::unwrap_used)]

#[path = "support/process.rs"]
mod process;

use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpStream};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use bytes::Bytes;
use moq_edge::client::{ClientError, MoqtClient, Publisher, Relay, Subscriber};
use moq_edge::session::StreamId;
use moq_edge::wire::model::{FullTrackName, Message, RequestId, SetupOptions, Subscribe, TrackNamespace};
use moq_edge::wire::Version;
use process::{free_tcp, free_udp, get, metric, wait_for, Proc};

/// CONTROL_MESSAGE_TIMEOUT (draft-14 and draft-16 §13.1.1).
const CONTROL_MESSAGE_TIMEOUT: u64 = 0x11;

fn deadline() -> Instant {
    Instant::now() + Duration::from_secs(60)
}

struct Edge {
    _proc: Proc,
    addr: SocketAddr,
    metrics: u16,
}

impl Edge {
    fn start() -> Edge {
        let (port, metrics) = (free_udp(), free_tcp());
        let proc = Proc(
            Command::new(env!("CARGO_BIN_EXE_moq-edge"))
                .args(["--listen", &format!("127.0.0.1:{port}"), "--cores", "2"])
                .args(["--metrics", &format!("127.0.0.1:{metrics}")])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("moq-edge starts"),
        );
        wait_for("the metrics endpoint", Duration::from_secs(30), || {
            get(metrics, "/healthz").is_some_and(|r| r.starts_with("HTTP/1.1 200"))
        });
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        wait_for("the web listener", Duration::from_secs(30), || TcpStream::connect(addr).is_ok());
        Edge { _proc: proc, addr, metrics }
    }

    fn rss(&self) -> u64 {
        let text = get(self.metrics, "/metrics").expect("metrics");
        text.lines()
            .find_map(|l| l.strip_prefix("process_resident_memory_bytes "))
            .and_then(|v| v.trim().parse().ok())
            .expect("process_resident_memory_bytes")
    }
}

/// A publisher and a subscriber over QUIC on one track, each on its own thread: once the
/// subscriber is in, a group of one object every 20 ms until `stop`, every one of which must
/// arrive. Returns (groups sent, objects received).
fn honest_viewer(addr: SocketAddr, stop: Arc<AtomicBool>) -> thread::JoinHandle<(u64, usize)> {
    let t =
        FullTrackName { namespace: TrackNamespace::from_strs(&["honest"]), name: Bytes::from_static(b"v") };
    let (subscribed, sent) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicU64::new(0)));
    let mut p = Publisher::connect(Relay::from(addr), Version::Draft16, deadline()).unwrap();
    p.add_track(t.clone());
    p.announce(t.namespace.clone(), deadline()).unwrap();
    let publisher = {
        let (t, subscribed, sent, stop) = (t.clone(), subscribed.clone(), sent.clone(), stop.clone());
        thread::spawn(move || {
            let mut group = 0;
            while !stop.load(Ordering::Relaxed) {
                if subscribed.load(Ordering::Relaxed) {
                    p.send_group(&t, group, &[Bytes::from(vec![group as u8; 1000])]).unwrap();
                    group += 1;
                    sent.store(group, Ordering::Relaxed);
                }
                p.pump(Instant::now() + Duration::from_millis(20)).unwrap();
            }
            p.pump(Instant::now() + Duration::from_millis(500)).unwrap();
        })
    };
    thread::spawn(move || {
        let mut s = Subscriber::connect(Relay::from(addr), Version::Draft22, deadline()).unwrap();
        let id = s.subscribe(t, None, deadline()).unwrap();
        subscribed.store(true, Ordering::Relaxed);
        while !stop.load(Ordering::Relaxed) {
            s.pump(Instant::now() + Duration::from_millis(20)).unwrap();
        }
        publisher.join().unwrap();
        let want = sent.load(Ordering::Relaxed);
        let end = deadline();
        while (s.received(id).len() as u64) < want && Instant::now() < end {
            s.pump(Instant::now() + Duration::from_millis(10)).unwrap();
        }
        (want, s.received(id).len())
    })
}

/// A TCP connection to `addr` from loopback address `from` (Linux answers all of 127/8), so
/// that one test plays several clients.
fn connect_from(from: Ipv4Addr, addr: SocketAddr) -> TcpStream {
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    socket.bind(&SocketAddr::new(IpAddr::V4(from), 0).into()).unwrap();
    socket.connect(&addr.into()).unwrap();
    let s = TcpStream::from(socket);
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s
}

/// GET /certificate.sha256 from `from`: the status line.
fn certificate_from(from: Ipv4Addr, addr: SocketAddr) -> String {
    let mut s = connect_from(from, addr);
    s.write_all(b"GET /certificate.sha256 HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    String::from_utf8_lossy(&out).lines().next().unwrap_or_default().to_string()
}

/// Writes `opening`, then one byte a second (every 500 ms `after_answer`) for up to 12 s;
/// how long until the relay closed the connection: its end of the stream (the relay's answer
/// ends with one, so after the answer it takes a write that fails, the relay having reset or
/// closed its socket).
fn drip(from: Ipv4Addr, addr: SocketAddr, opening: &'static [u8], after_answer: bool) -> Duration {
    let mut s = connect_from(from, addr);
    s.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
    s.write_all(opening).unwrap();
    let start = Instant::now();
    let mut next = start;
    let mut buf = [0u8; 4096];
    let mut answered = false;
    let mut eof = false;
    while start.elapsed() < Duration::from_secs(12) {
        if eof {
            thread::sleep(Duration::from_millis(100));
        } else {
            match s.read(&mut buf) {
                Ok(0) if !after_answer => {
                    assert!(!answered, "closed by its deadline, not answered");
                    return start.elapsed();
                }
                Ok(0) => eof = true,
                Ok(_) => answered = true,
                Err(e)
                    if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
                Err(_) => return start.elapsed(),
            }
        }
        if Instant::now() >= next {
            next += if after_answer { Duration::from_millis(500) } else { Duration::from_secs(1) };
            if s.write_all(b"a").is_err() {
                assert!(!after_answer || answered, "the request was answered first");
                return start.elapsed();
            }
        }
    }
    start.elapsed()
}

/// The slow TCP clients, all at once, while another address fetches the certificate's hash.
fn tcp_attacks(edge: &Edge) {
    let addr = edge.addr;
    // A TLS record header (handshake, 512 bytes) whose body then comes a byte a second.
    let drips: [(&str, &'static [u8], bool, Duration); 3] = [
        ("slow request head", b"GET / HTTP/1.1\r\nHost: x\r\nX-Slow: ", false, Duration::from_secs(8)),
        ("slow TLS handshake", &[0x16, 0x03, 0x01, 0x02, 0x00], false, Duration::from_secs(8)),
        (
            "drip after the answer",
            b"GET /certificate.sha256 HTTP/1.1\r\nHost: x\r\n\r\n",
            true,
            Duration::from_secs(5),
        ),
    ];
    // Each from its own address, so that they are not refused for the silent ones' share.
    let dripping: Vec<_> = drips
        .into_iter()
        .zip(3u8..)
        .map(|((what, opening, after, bound), host)| {
            thread::spawn(move || {
                let took = drip(Ipv4Addr::new(127, 0, 0, host), addr, opening, after);
                assert!(took < bound, "{what}: open for {took:?}");
                eprintln!("slow_peers: {what}: closed after {took:?}");
            })
        })
        .collect();
    // 300 silent connections from one address: its share is taken, the rest refused 429.
    let greedy = Ipv4Addr::new(127, 0, 0, 1);
    let held: Vec<TcpStream> = (0..300).map(|_| connect_from(greedy, addr)).collect();
    let honest = Ipv4Addr::new(127, 0, 0, 2);
    for _ in 0..20 {
        assert_eq!(certificate_from(honest, addr), "HTTP/1.1 200 OK", "the honest client is served");
        thread::sleep(Duration::from_millis(100));
    }
    eprintln!("slow_peers: an honest client on another address: 20 of 20 answered 200 meanwhile");
    let mut refused = 0;
    for mut s in held {
        s.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
        let mut buf = [0u8; 64];
        if matches!(s.read(&mut buf), Ok(n) if buf[..n].starts_with(b"HTTP/1.1 429 ")) {
            refused += 1;
        }
    }
    eprintln!("slow_peers: 300 silent connections from one address: {refused} refused 429");
    assert!(refused >= 200, "{refused} of 300 refused");
    for t in dripping {
        t.join().unwrap();
    }
    let refused_metric = get(edge.metrics, "/metrics")
        .and_then(|t| {
            t.lines()
                .find_map(|l| {
                    l.strip_prefix("moq_edge_web_connections_total{outcome=\"refused_client_share\"} ")
                })
                .and_then(|v| v.trim().parse::<u64>().ok())
        })
        .unwrap_or(0);
    assert!(refused_metric >= refused, "the metric counts them");
}

/// SUBSCRIBE `id` for a track nobody publishes, as `version` encodes it.
fn subscribe(version: Version, id: u64, out: &mut Vec<u8>) {
    let track =
        FullTrackName { namespace: TrackNamespace::from_strs(&["nobody"]), name: Bytes::from_static(b"x") };
    let m = Message::Subscribe(Subscribe { request_id: RequestId(id), track, ..Default::default() });
    version.encode_message(&m, out).unwrap();
}

/// Sets up over `relay` at `version`, stops reading the control stream, and sends SUBSCRIBEs
/// (their Request IDs within the window the relay keeps sliding) until the relay closes the
/// session. Returns the close code and how many SUBSCRIBEs went.
fn control_flood(relay: Relay, version: Version) -> (u64, u64) {
    let mut c = MoqtClient::connect(relay, version, SetupOptions::default(), deadline()).unwrap();
    c.pump_mut().pause_reading(StreamId(0));
    let mut next = 0u64;
    loop {
        assert!(next < 2 * 400_000, "{version:?}: still open after {} SUBSCRIBEs", next / 2);
        let mut batch = Vec::new();
        for _ in 0..500 {
            subscribe(version, next, &mut batch);
            next += 2;
        }
        c.pump_mut().queue_raw(StreamId(0), batch.into());
        match c.until(Instant::now() + Duration::from_millis(20), |_| false) {
            Err(ClientError::Deadline) => continue,
            Err(ClientError::Session { code, .. }) => return (code, next / 2),
            Err(e) => match e.peer_error() {
                Some(close) => return (close.error_code, next / 2),
                None => panic!("{version:?}: {e}"),
            },
            Ok(_) => unreachable!("no event is wanted"),
        }
    }
}

#[test]
fn slow_and_silent_peers_are_closed_and_the_honest_are_served() {
    let edge = Edge::start();
    let stop = Arc::new(AtomicBool::new(false));
    let viewer = honest_viewer(edge.addr, stop.clone());
    let before = edge.rss();

    tcp_attacks(&edge);

    let relays = [
        ("raw QUIC", Relay::from(edge.addr)),
        ("WebTransport", Relay::webtransport(edge.addr, "/moq")),
        ("QMux over WebSocket", Relay::websocket(edge.addr, "/moq", false)),
    ];
    for (how, relay) in relays {
        for version in [Version::Draft14, Version::Draft16] {
            let start = Instant::now();
            let (code, sent) = control_flood(relay.clone(), version);
            eprintln!(
                "slow_peers: {how} {version:?}: control stream not read, closed after {sent} SUBSCRIBEs \
                 and {:?} (code {code:#x}); relay RSS {} MiB",
                start.elapsed(),
                edge.rss() >> 20
            );
            assert_eq!(code, CONTROL_MESSAGE_TIMEOUT, "{how} {version:?}");
        }
    }
    let closed = get(edge.metrics, "/metrics").unwrap_or_default();
    assert!(
        closed.contains("moq_edge_sessions_closed_total{core=\"all\",reason=\"control_not_read\"} 6"),
        "six sessions counted:\n{closed}"
    );
    let after = edge.rss();
    eprintln!("slow_peers: relay RSS {} MiB before, {} MiB after", before >> 20, after >> 20);
    assert!(after < before + (64 << 20), "RSS {before} -> {after}");

    stop.store(true, Ordering::Relaxed);
    let (sent, received) = viewer.join().unwrap();
    assert!(sent > 50, "the honest publisher sent {sent} groups");
    assert_eq!(received as u64, sent, "the honest viewer got every object throughout");
    eprintln!("slow_peers: the honest QUIC viewer: {received} of {sent} objects throughout");
    assert!(metric(edge.metrics, "moq_edge_sessions").is_some());
}
