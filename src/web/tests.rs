//! The listener over real TCP: HTTPS and HTTP on one port, bounded heads, and what a slow or
//! greedy client can hold (each deadline is on the whole, not on each read; the per-client
//! share keeps other clients served).
#![allow(clippy::unwrap_used)]

use super::*;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Mutex;

pub(super) fn sources(hash: [u8; 32]) -> (Sources, Arc<Mutex<[u8; 32]>>) {
    let current = Arc::new(Mutex::new(hash));
    let read = current.clone();
    (
        Sources {
            certificate: Arc::new(move || *read.lock().unwrap()),
            https: None,
            websocket: None,
            side_door: None,
            auth: None,
            admission: None,
        },
        current,
    )
}

fn https_sources() -> (Sources, [u8; 32]) {
    let mut rc = runtime::RuntimeConfig::new(([127, 0, 0, 1], 0).into(), 1);
    rc.tls = runtime::TlsSource::SelfSigned;
    let material = Arc::new(runtime::tls::load_identity(&rc).unwrap());
    let sha = material.identity().sha256;
    let https: HttpsContext = Arc::new(move || material.https_context().ok());
    (
        Sources {
            certificate: Arc::new(move || sha),
            https: Some(https),
            websocket: None,
            side_door: None,
            auth: None,
            admission: None,
        },
        sha,
    )
}

fn listen(sources: Sources, limits: Limits) -> Listener {
    serve_with("127.0.0.1:0".parse().unwrap(), sources, limits).unwrap()
}

/// A connection to `addr` from loopback address `from` (Linux answers all of 127/8), so that
/// one test can play several clients.
fn connect_from(from: Ipv4Addr, addr: SocketAddr) -> TcpStream {
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    socket.bind(&SocketAddr::new(IpAddr::V4(from), 0).into()).unwrap();
    socket.connect(&addr.into()).unwrap();
    let s = TcpStream::from(socket);
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s
}

/// A request over a socket, and what comes back.
fn exchange_from(from: Ipv4Addr, addr: SocketAddr, request: &[u8]) -> String {
    let mut s = connect_from(from, addr);
    if !request.is_empty() {
        s.write_all(request).unwrap();
        s.shutdown(std::net::Shutdown::Write).unwrap();
    }
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

fn exchange(addr: SocketAddr, request: &[u8]) -> String {
    exchange_from(Ipv4Addr::LOCALHOST, addr, request)
}

/// Reads until the server closes (or resets); how long that took from `since`.
fn closed_after(s: &mut TcpStream, since: Instant) -> Duration {
    let mut buf = [0u8; 4096];
    while matches!(s.read(&mut buf), Ok(n) if n > 0) {}
    since.elapsed()
}

/// With an HTTPS context, the same port answers HTTPS (TLS detected from the first byte)
/// and plain HTTP; the certificate is the relay's identity.
#[test]
fn https_and_http_on_one_port() {
    let (src, sha) = https_sources();
    let addr = listen(src, Limits::default()).addr;

    let mut connector = boring::ssl::SslConnector::builder(boring::ssl::SslMethod::tls()).unwrap();
    connector.set_verify(boring::ssl::SslVerifyMode::NONE);
    let tcp = TcpStream::connect(addr).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut tls = connector.build().connect("localhost", tcp).unwrap();
    let peer = tls.ssl().peer_certificate().unwrap().to_der().unwrap();
    assert_eq!(
        ring::digest::digest(&ring::digest::SHA256, &peer).as_ref(),
        &sha[..],
        "the relay's certificate"
    );
    tls.write_all(b"GET /certificate.sha256 HTTP/1.1\r\nHost: localhost\r\n\r\n").unwrap();
    let mut out = Vec::new();
    let _ = tls.read_to_end(&mut out);
    let out = String::from_utf8_lossy(&out);
    assert!(out.starts_with("HTTP/1.1 200 OK\r\n"), "{out}");
    assert!(out.ends_with(&hex_lower(&sha)), "{out}");

    let plain = exchange(addr, b"GET /certificate.sha256 HTTP/1.1\r\n\r\n");
    assert!(plain.starts_with("HTTP/1.1 200 OK\r\n") && plain.ends_with(&hex_lower(&sha)), "{plain}");
}

#[test]
fn over_tcp_with_bounded_heads_and_connections() {
    let limits = Limits { max_head_bytes: 256, head_timeout: Duration::from_secs(60), ..Limits::default() };
    let addr = listen(sources([1; 32]).0, limits).addr;
    let ok = exchange(addr, b"GET /certificate.sha256 HTTP/1.1\r\nHost: x\r\n\r\n");
    assert!(ok.starts_with("HTTP/1.1 200 OK\r\n"), "{ok}");
    assert!(ok.ends_with(&"01".repeat(32)), "{ok}");
    let big = format!("GET / HTTP/1.1\r\nX: {}\r\n\r\n", "a".repeat(300));
    assert!(exchange(addr, big.as_bytes()).starts_with("HTTP/1.1 431 "));
    let cut = exchange(addr, b"GET / HTTP/1.1\r\nHost");
    assert!(cut.starts_with("HTTP/1.1 400 "), "{cut}");
    // A head whose lines end with a bare LF is refused, not left waiting for a CRLF.
    let lf = exchange(addr, b"GET / HTTP/1.1\nHost: x\n\n");
    assert!(lf.starts_with("HTTP/1.1 400 ") && lf.contains("CRLF"), "{lf}");

    // A listener of two slots (its own: a connection above may not have released its slot
    // yet when the client has its answer), from two clients. Two connections that send
    // nothing hold both (the server accepts in order, so by the time it takes the third, the
    // first two are being served). The third sends nothing either, so that closing it leaves
    // no unread bytes (which would reset it).
    let limits = Limits { max_connections: 2, max_per_client: 2, ..limits };
    let listener = listen(sources([1; 32]).0, limits);
    let idle: Vec<TcpStream> = [Ipv4Addr::new(127, 0, 0, 1), Ipv4Addr::new(127, 0, 0, 2)]
        .map(|a| connect_from(a, listener.addr))
        .into();
    let refused = exchange_from(Ipv4Addr::new(127, 0, 0, 3), listener.addr, b"");
    assert!(refused.starts_with("HTTP/1.1 503 ") && refused.contains("Retry-After: 1\r\n"), "{refused}");
    assert_eq!(listener.stats.refused_full.load(Ordering::Relaxed), 1);
    drop(idle);
}

/// A head that arrives a byte at a time, each byte within any per-read timeout, is still cut
/// off when the whole head's deadline passes; so is a TLS handshake dripped the same way.
#[test]
fn slow_heads_and_handshakes_are_closed_at_one_deadline() {
    let (src, _) = https_sources();
    let limits = Limits { head_timeout: Duration::from_millis(1500), ..Limits::default() };
    let listener = listen(src, limits);
    let addr = listener.addr;
    // A TLS record header (handshake, TLS 1.0 record version, 512 bytes), then its body one
    // byte at a time.
    let drips: [(&str, &[u8]); 2] = [
        ("plain head", b"GET / HTTP/1.1\r\nHost: x\r\nX-Slow: "),
        ("TLS handshake", &[0x16, 0x03, 0x01, 0x02, 0x00]),
    ];
    let threads: Vec<_> = drips
        .into_iter()
        .map(|(what, opening)| {
            std::thread::spawn(move || {
                let mut s = TcpStream::connect(addr).unwrap();
                let start = Instant::now();
                s.write_all(opening).unwrap();
                // 300 ms a byte: far inside any per-read timeout, for up to 6 s.
                for _ in 0..20 {
                    std::thread::sleep(Duration::from_millis(300));
                    if s.write_all(b"a").is_err() {
                        break;
                    }
                }
                let took = closed_after(&mut s, start);
                assert!(took < Duration::from_secs(4), "{what}: open for {took:?}");
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    // Counted once the connection's thread is done (just after it closed the socket).
    let end = Instant::now() + Duration::from_secs(5);
    while listener.stats.timed_out.load(Ordering::Relaxed) < 2 {
        assert!(Instant::now() < end, "both counted as past their deadline");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// After its answer, a client that keeps dripping bytes is closed when the linger ends.
#[test]
fn post_answer_drip_is_closed_when_the_linger_ends() {
    let limits = Limits { linger: Duration::from_millis(800), ..Limits::default() };
    let addr = listen(sources([2; 32]).0, limits).addr;
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_millis(100))).unwrap();
    s.write_all(b"GET /certificate.sha256 HTTP/1.1\r\n\r\n").unwrap();
    let start = Instant::now();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let closed = loop {
        assert!(start.elapsed() < Duration::from_secs(5), "still open after {:?}", start.elapsed());
        match s.read(&mut buf) {
            Ok(0) => break start.elapsed(),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {
                let _ = s.write_all(b"x");
            }
            Err(_) => break start.elapsed(),
        }
    };
    assert!(String::from_utf8_lossy(&got).starts_with("HTTP/1.1 200 OK"));
    assert!(closed < Duration::from_secs(3), "closed after {closed:?}");
}

/// One address holding every connection it can (each sending nothing) takes its share and is
/// answered 429 beyond it; another address is served throughout.
#[test]
fn one_client_holding_slow_connections_leaves_room_for_others() {
    let limits = Limits {
        max_connections: 64,
        max_per_client: 8,
        head_timeout: Duration::from_secs(60),
        ..Limits::default()
    };
    let listener = listen(sources([3; 32]).0, limits);
    let greedy = Ipv4Addr::new(127, 0, 0, 1);
    let held: Vec<TcpStream> = (0..8).map(|_| connect_from(greedy, listener.addr)).collect();
    // The listener takes connections in order: once an honest request has been answered, the
    // greedy ones opened before it hold their slots.
    let honest = Ipv4Addr::new(127, 0, 0, 9);
    assert!(exchange_from(honest, listener.addr, b"GET /certificate.sha256 HTTP/1.1\r\n\r\n")
        .starts_with("HTTP/1.1 200"));
    let mut refused = 0;
    for _ in 0..50 {
        let more = exchange_from(greedy, listener.addr, b"");
        if more.starts_with("HTTP/1.1 429 ") {
            refused += 1;
        }
        let answer = exchange_from(honest, listener.addr, b"GET /certificate.sha256 HTTP/1.1\r\n\r\n");
        assert!(answer.starts_with("HTTP/1.1 200 OK") && answer.ends_with(&"03".repeat(32)), "{answer}");
    }
    assert_eq!(refused, 50, "the greedy address is refused beyond its share");
    assert_eq!(listener.stats.refused_client.load(Ordering::Relaxed), 50);
    drop(held);
}
