//! The web listener: plain HTTP/1.1 over TCP, by default on the same address and port as the
//! QUIC listener, serving what a browser needs to watch a track (ARCHITECTURE.md, "Web
//! listener"):
//!
//! - `GET /`: the watch page (`web/src/index.html`), with its bundle `/watch.js` and
//!   `/watch.css` and `/LICENSES.txt` (the bundled packages' licences). They are built from
//!   `web/` by `make web` and committed in `web/dist/`, which this module embeds, so building
//!   the relay needs no Node.js.
//! - `GET /certificate.sha256`: the SHA-256 of the certificate new QUIC connections get, as
//!   64 lowercase hex digits, read on every request (so it follows reloads). A page passes it
//!   to WebTransport's `serverCertificateHashes` to trust the relay's self-signed certificate.
//!
//! Only GET and HEAD; every other path is 404. One thread accepts; each connection gets its
//! own short-lived thread, at most [`Limits::max_connections`] at once (beyond that a
//! connection is answered 503 and closed). A request head is at most
//! [`Limits::max_head_bytes`] and must arrive within [`Limits::read_timeout`]; the answer is
//! the only one on its connection (`Connection: close`). Nothing a client sends can panic:
//! parsing is over a bounded byte buffer with no indexing that can fail.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use runtime::StreamTls;

/// The built page (`web/dist/`, see the module header).
const INDEX_HTML: &[u8] = include_bytes!("../web/dist/index.html");
const WATCH_JS: &[u8] = include_bytes!("../web/dist/watch.js");
const WATCH_CSS: &[u8] = include_bytes!("../web/dist/watch.css");
const LICENSES: &[u8] = include_bytes!("../web/dist/LICENSES.txt");

/// The page's scripts, styles and connections come from its own origin, except WebTransport
/// sessions, which go to an `https:` URL (the relay's UDP port, or a `relay=` of the query),
/// and the WebSocket a player falls back to without WebTransport (`wss:`, the same port).
const CSP: &str = "default-src 'self'; connect-src 'self' https: wss:; img-src 'self' data:; object-src 'none'; base-uri 'none'; frame-ancestors 'none'";

/// The SHA-256 of the certificate the relay serves now (read on every request).
pub type CertificateHash = Arc<dyn Fn() -> [u8; 32] + Send + Sync>;

/// A TLS context with the relay's identity in force, made per connection (it follows reloads).
pub type HttpsContext = Arc<dyn Fn() -> Option<boring::ssl::SslContext> + Send + Sync>;

/// What the listener reads.
#[derive(Clone)]
pub struct Sources {
    pub certificate: CertificateHash,
    /// When set, a connection that opens with a TLS record (a ClientHello) is served HTTPS
    /// with this context; plain HTTP is still answered on the same port.
    pub https: Option<HttpsContext>,
    /// When set, a WebSocket upgrade offering QMux is accepted and the connection handed to
    /// the cores (`crate::websocket`).
    pub websocket: Option<crate::websocket::WebSocketSink>,
}

/// Bounds on what one client may cost.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Connections served at once; one more is answered 503 and closed.
    pub max_connections: usize,
    /// Bytes of the request line and headers; a longer head is answered 431.
    pub max_head_bytes: usize,
    /// How long the whole head may take to arrive (each read waits at most this long).
    pub read_timeout: Duration,
    /// How long one write of the answer may block.
    pub write_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_connections: 64,
            max_head_bytes: 8 * 1024,
            read_timeout: Duration::from_secs(5),
            write_timeout: Duration::from_secs(5),
        }
    }
}

/// Binds `addr` (TCP) and serves on a thread named `web` with the default [`Limits`].
/// Returns the bound address.
pub fn serve(addr: SocketAddr, sources: Sources) -> io::Result<SocketAddr> {
    serve_with(addr, sources, Limits::default())
}

/// [`serve`] with other limits (tests).
pub fn serve_with(addr: SocketAddr, sources: Sources, limits: Limits) -> io::Result<SocketAddr> {
    let listener = TcpListener::bind(addr)?;
    let local = listener.local_addr()?;
    let active = Arc::new(AtomicUsize::new(0));
    std::thread::Builder::new().name("web".into()).spawn(move || {
        for stream in listener.incoming() {
            match stream {
                Ok(stream) => accept(stream, &sources, limits, &active),
                Err(e) => tracing::debug!(error = %e, "web accept"),
            }
        }
    })?;
    Ok(local)
}

/// Counts a connection while it is served.
struct Slot(Arc<AtomicUsize>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

fn accept(mut stream: TcpStream, sources: &Sources, limits: Limits, active: &Arc<AtomicUsize>) {
    if active.fetch_add(1, Ordering::AcqRel) >= limits.max_connections {
        active.fetch_sub(1, Ordering::AcqRel);
        // Never block the accepting thread on a client: one try, then close.
        let _ = stream.set_nonblocking(true);
        let _ = stream.write_all(&Response::text(503, "too many connections\n").bytes(false));
        return;
    }
    let slot = Slot(active.clone());
    let sources = sources.clone();
    let spawned = std::thread::Builder::new().name("web-conn".into()).spawn(move || {
        let _slot = slot;
        if let Err(e) = serve_connection(stream, &sources, limits) {
            tracing::debug!(error = %e, "web request");
        }
    });
    if let Err(e) = spawned {
        // The closure (and its slot) was dropped with the error.
        tracing::warn!(error = %e, "web: no thread for a connection");
    }
}

/// A byte stream over one TCP connection: plain, or TLS on it.
trait Conn: Read + Write {
    fn set_read_timeout(&self, t: Duration) -> io::Result<()>;
}

impl Conn for TcpStream {
    fn set_read_timeout(&self, t: Duration) -> io::Result<()> {
        TcpStream::set_read_timeout(self, Some(t))
    }
}

impl Conn for StreamTls {
    fn set_read_timeout(&self, t: Duration) -> io::Result<()> {
        match self.socket() {
            Some(s) => s.set_read_timeout(Some(t)),
            None => Err(io::ErrorKind::NotConnected.into()),
        }
    }
}

/// What became of a connection's request.
enum Outcome {
    /// Answered: the connection closes.
    Answered,
    /// A WebSocket upgrade was accepted (its `101` written): the connection goes to a core,
    /// with the bytes that followed the request.
    Upgraded(crate::websocket::Accepted, Vec<u8>),
}

/// The first byte of a TLS handshake record (RFC 8446 §5.1); no HTTP request starts with it.
const TLS_HANDSHAKE: u8 = 0x16;

/// Serves one connection: TLS when it opens with a handshake record and an HTTPS context is
/// configured, plain HTTP otherwise. The TLS handshake counts against the read deadline.
fn serve_connection(stream: TcpStream, sources: &Sources, limits: Limits) -> io::Result<()> {
    stream.set_read_timeout(Some(limits.read_timeout))?;
    stream.set_write_timeout(Some(limits.write_timeout))?;
    let deadline = std::time::Instant::now() + limits.read_timeout;
    let mut first = [0u8; 1];
    let tls = match &sources.https {
        Some(ctx) if stream.peek(&mut first)? == 1 && first[0] == TLS_HANDSHAKE => ctx(),
        _ => None,
    };
    let Some(ctx) = tls else {
        let mut stream = stream;
        match answer(&mut stream, sources, limits, deadline)? {
            Outcome::Answered => linger(stream),
            Outcome::Upgraded(accepted, early) => hand_over(sources, stream, None, accepted, early),
        }
        return Ok(());
    };
    let mut stream = StreamTls::accept(&ctx, stream)?;
    match answer(&mut stream, sources, limits, deadline)? {
        Outcome::Answered => {
            let _ = stream.close(); // close_notify, written to the socket while attached
            if let Some(tcp) = stream.detach() {
                linger(tcp);
            }
        }
        Outcome::Upgraded(accepted, early) => {
            if let Some(tcp) = stream.detach() {
                hand_over(sources, tcp, Some(stream), accepted, early);
            }
        }
    }
    Ok(())
}

/// Gives an upgraded connection to the cores (closed when every core's queue is full).
fn hand_over(
    sources: &Sources,
    socket: TcpStream,
    tls: Option<StreamTls>,
    accepted: crate::websocket::Accepted,
    early: Vec<u8>,
) {
    let Some(sink) = &sources.websocket else { return };
    let _ = socket.set_read_timeout(None);
    let _ = socket.set_write_timeout(None);
    let handoff = runtime::StreamHandoff {
        socket,
        tls,
        version: accepted.version,
        framing: qmux::Framing::WebSocket,
        request: accepted.request,
        early,
    };
    if sink.acceptor.adopt(handoff).is_err() {
        tracing::warn!("WebSocket connection closed: every core's queue of new connections is full");
    }
}

/// Reads one request head and answers it; the caller then closes the connection.
fn answer<S: Conn>(
    stream: &mut S,
    sources: &Sources,
    limits: Limits,
    deadline: std::time::Instant,
) -> io::Result<Outcome> {
    let mut buf = vec![0u8; limits.max_head_bytes];
    let mut len = 0;
    let head = loop {
        if head_end(&buf[..len]).is_some() {
            break Head::Complete(len);
        }
        if len == buf.len() {
            break Head::TooLarge;
        }
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return Err(io::Error::new(io::ErrorKind::TimedOut, "request head too slow"));
        }
        stream.set_read_timeout(left)?;
        let n = stream.read(&mut buf[len..])?;
        if n == 0 {
            break Head::Truncated(len);
        }
        len += n;
    };
    let (response, is_head) = match head {
        Head::Complete(len) => {
            let end = head_end(&buf[..len]).map_or(len, |at| at + 4);
            match websocket_upgrade(&buf[..end], sources) {
                Some(Ok(accepted)) => {
                    stream.write_all(&accepted.response)?;
                    stream.flush()?;
                    return Ok(Outcome::Upgraded(accepted, buf[end..len].to_vec()));
                }
                Some(Err(refused)) => (refused, false),
                None => respond(&buf[..len], sources),
            }
        }
        Head::TooLarge => (Response::text(431, "request head too large\n"), false),
        Head::Truncated(0) => return Ok(Outcome::Answered),
        Head::Truncated(_) => (Response::text(400, "incomplete request\n"), false),
    };
    stream.write_all(&response.bytes(is_head))?;
    stream.flush()?;
    Ok(Outcome::Answered)
}

/// A WebSocket upgrade's answer, when the head is one and upgrades are served here.
fn websocket_upgrade(head: &[u8], sources: &Sources) -> Option<Result<crate::websocket::Accepted, Response>> {
    let sink = sources.websocket.as_ref()?;
    let line = head.split(|b| *b == b'\r').next()?;
    let target = std::str::from_utf8(line).ok()?.split(' ').nth(1)?;
    crate::websocket::upgrade(head, target, sink)
}

/// Closes our side, then reads (and drops) what the client still sends, up to 64 KiB and for
/// at most 2 s, before closing: a socket closed with unread bytes sends a reset, which can
/// destroy the answer before the client reads it (RFC 9112 §9.6).
fn linger(mut stream: TcpStream) {
    let _ = stream.shutdown(std::net::Shutdown::Write);
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    let mut sink = [0u8; 4096];
    let mut left: usize = 64 * 1024;
    while left > 0 {
        match stream.read(&mut sink) {
            Ok(0) | Err(_) => break,
            Ok(n) => left = left.saturating_sub(n),
        }
    }
}

enum Head {
    Complete(usize),
    TooLarge,
    Truncated(usize),
}

/// Where the blank line that ends a request head starts, if it has arrived.
fn head_end(buf: &[u8]) -> Option<usize> {
    buf.windows(4).position(|w| w == b"\r\n\r\n")
}

/// One answer: status, type, extra headers, body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    pub status: u16,
    pub content_type: &'static str,
    pub headers: Vec<(&'static str, &'static str)>,
    pub body: Vec<u8>,
}

impl Response {
    fn new(status: u16, content_type: &'static str, body: Vec<u8>) -> Self {
        Response { status, content_type, headers: Vec::new(), body }
    }

    pub(crate) fn text(status: u16, body: &str) -> Self {
        Response::new(status, "text/plain; charset=utf-8", body.as_bytes().to_vec())
    }

    pub(crate) fn with(mut self, name: &'static str, value: &'static str) -> Self {
        self.headers.push((name, value));
        self
    }

    /// The response as bytes on the wire; a HEAD answer has the headers (with the length the
    /// body would have) and no body (RFC 9110 §9.3.2).
    pub fn bytes(&self, head_only: bool) -> Vec<u8> {
        let mut out = format!(
            "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nX-Content-Type-Options: nosniff\r\nConnection: close\r\n",
            self.status,
            reason(self.status),
            self.content_type,
            self.body.len()
        )
        .into_bytes();
        for (name, value) in &self.headers {
            out.extend_from_slice(format!("{name}: {value}\r\n").as_bytes());
        }
        out.extend_from_slice(b"\r\n");
        if !head_only {
            out.extend_from_slice(&self.body);
        }
        out
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        426 => "Upgrade Required",
        431 => "Request Header Fields Too Large",
        503 => "Service Unavailable",
        _ => "Error",
    }
}

/// The answer to a whole request head (request line, headers, blank line), and whether it is
/// a HEAD request. Only the request line matters: `METHOD SP TARGET SP HTTP/1.x`.
pub fn respond(head: &[u8], sources: &Sources) -> (Response, bool) {
    let line_end = head.windows(2).position(|w| w == b"\r\n").unwrap_or(head.len());
    let line = head.get(..line_end).unwrap_or_default();
    let mut parts = line.split(|b| *b == b' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return (Response::text(400, "bad request line\n"), false);
    };
    if !version.starts_with(b"HTTP/1.") || !target.starts_with(b"/") {
        return (Response::text(400, "bad request line\n"), false);
    }
    let is_head = match method {
        b"GET" => false,
        b"HEAD" => true,
        _ => return (Response::text(405, "GET or HEAD only\n").with("Allow", "GET, HEAD"), false),
    };
    let path = target.split(|b| *b == b'?' || *b == b'#').next().unwrap_or_default();
    let response = match path {
        b"/" | b"/index.html" => Response::new(200, "text/html; charset=utf-8", INDEX_HTML.to_vec())
            .with("Cache-Control", "no-cache")
            .with("Content-Security-Policy", CSP),
        b"/watch.js" => Response::new(200, "text/javascript; charset=utf-8", WATCH_JS.to_vec())
            .with("Cache-Control", "no-cache"),
        b"/watch.css" => Response::new(200, "text/css; charset=utf-8", WATCH_CSS.to_vec())
            .with("Cache-Control", "no-cache"),
        b"/LICENSES.txt" => Response::new(200, "text/plain; charset=utf-8", LICENSES.to_vec()),
        b"/certificate.sha256" => {
            Response::new(200, "text/plain; charset=utf-8", hex_lower(&(sources.certificate)()).into_bytes())
                .with("Cache-Control", "no-store")
                // A page served elsewhere (a development server, another relay) may pin this
                // relay's certificate too; the digest is public (the TLS handshake sends it).
                .with("Access-Control-Allow-Origin", "*")
        }
        _ => Response::text(404, "not found\n"),
    };
    (response, is_head)
}

/// Lowercase hex, no separators.
pub fn hex_lower(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(char::from(DIGITS[usize::from(b >> 4)]));
        s.push(char::from(DIGITS[usize::from(b & 0xf)]));
    }
    s
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::sync::Mutex;

    fn sources(hash: [u8; 32]) -> (Sources, Arc<Mutex<[u8; 32]>>) {
        let current = Arc::new(Mutex::new(hash));
        let read = current.clone();
        (
            Sources { certificate: Arc::new(move || *read.lock().unwrap()), https: None, websocket: None },
            current,
        )
    }

    fn get(head: &str) -> (Response, bool) {
        respond(head.as_bytes(), &sources([0xab; 32]).0)
    }

    #[test]
    fn routes_and_methods() {
        let (r, head) = get("GET / HTTP/1.1\r\nHost: x\r\n\r\n");
        assert_eq!((r.status, r.content_type, head), (200, "text/html; charset=utf-8", false));
        assert!(r.body.starts_with(b"<!doctype html>"));
        assert!(r.headers.iter().any(|(n, _)| *n == "Content-Security-Policy"));
        assert_eq!(get("GET /?namespace=live&track=video HTTP/1.1\r\n\r\n").0.body, INDEX_HTML);
        assert_eq!(get("GET /index.html HTTP/1.0\r\n\r\n").0.status, 200);
        let js = get("GET /watch.js HTTP/1.1\r\n\r\n").0;
        assert_eq!((js.status, js.content_type), (200, "text/javascript; charset=utf-8"));
        assert_eq!(js.body, WATCH_JS);
        assert_eq!(get("GET /watch.css HTTP/1.1\r\n\r\n").0.content_type, "text/css; charset=utf-8");
        assert!(get("GET /LICENSES.txt HTTP/1.1\r\n\r\n").0.body.starts_with(b"Packages bundled"));
        for missing in ["/nope", "/watch.js/", "//", "/certificate.sha256x", "/../Cargo.toml"] {
            assert_eq!(get(&format!("GET {missing} HTTP/1.1\r\n\r\n")).0.status, 404, "{missing}");
        }
        let post = get("POST / HTTP/1.1\r\nContent-Length: 0\r\n\r\n").0;
        assert_eq!(post.status, 405);
        assert!(post.headers.contains(&("Allow", "GET, HEAD")));
        for bad in ["", "GET\r\n\r\n", "GET /\r\n\r\n", "GET / HTTP/2\r\n\r\n", "GET x HTTP/1.1\r\n\r\n"] {
            assert_eq!(get(bad).0.status, 400, "{bad:?}");
        }
        assert_eq!(get("GET  / HTTP/1.1\r\n\r\n").0.status, 400, "two spaces");
    }

    #[test]
    fn head_has_the_length_and_no_body() {
        let (r, head) = get("HEAD /watch.js HTTP/1.1\r\n\r\n");
        assert!(head);
        let wire = String::from_utf8(r.bytes(true)).unwrap();
        assert!(wire.contains(&format!("Content-Length: {}\r\n", WATCH_JS.len())), "{wire}");
        assert!(wire.ends_with("\r\n\r\n"), "{wire}");
    }

    #[test]
    fn certificate_hash_is_lowercase_hex_and_follows_the_source() {
        let (src, current) = sources([0xab; 32]);
        let r = respond(b"GET /certificate.sha256 HTTP/1.1\r\n\r\n", &src).0;
        assert_eq!(r.status, 200);
        assert_eq!(r.body, "ab".repeat(32).into_bytes());
        assert!(r.headers.contains(&("Cache-Control", "no-store")));
        let mut next = [0u8; 32];
        next[0] = 0x0f;
        next[31] = 0xf0;
        *current.lock().unwrap() = next;
        let r = respond(b"GET /certificate.sha256 HTTP/1.1\r\n\r\n", &src).0;
        assert_eq!(String::from_utf8(r.body).unwrap(), format!("0f{}f0", "00".repeat(30)));
        assert_eq!(hex_lower(&[0x00, 0x9a, 0xff]), "009aff");
    }

    /// With an HTTPS context, the same port answers HTTPS (TLS detected from the first byte)
    /// and plain HTTP; the certificate is the relay's identity.
    #[test]
    fn https_and_http_on_one_port() {
        let mut rc = runtime::RuntimeConfig::new(([127, 0, 0, 1], 0).into(), 1);
        rc.tls = runtime::TlsSource::SelfSigned;
        let material = Arc::new(runtime::tls::load_identity(&rc).unwrap());
        let sha = material.identity().sha256;
        let m = material.clone();
        let https: HttpsContext = Arc::new(move || m.https_context().ok());
        let src = Sources { certificate: Arc::new(move || sha), https: Some(https), websocket: None };
        let addr = serve_with("127.0.0.1:0".parse().unwrap(), src, Limits::default()).unwrap();

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

    /// A request over a socket, and what comes back.
    fn exchange(addr: SocketAddr, request: &[u8]) -> String {
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        if !request.is_empty() {
            s.write_all(request).unwrap();
            s.shutdown(std::net::Shutdown::Write).unwrap();
        }
        let mut out = Vec::new();
        let _ = s.read_to_end(&mut out);
        String::from_utf8_lossy(&out).into_owned()
    }

    #[test]
    fn over_tcp_with_bounded_heads_and_connections() {
        let limits =
            Limits { max_head_bytes: 256, read_timeout: Duration::from_secs(60), ..Limits::default() };
        let addr = serve_with("127.0.0.1:0".parse().unwrap(), sources([1; 32]).0, limits).unwrap();
        let ok = exchange(addr, b"GET /certificate.sha256 HTTP/1.1\r\nHost: x\r\n\r\n");
        assert!(ok.starts_with("HTTP/1.1 200 OK\r\n"), "{ok}");
        assert!(ok.ends_with(&"01".repeat(32)), "{ok}");
        let big = format!("GET / HTTP/1.1\r\nX: {}\r\n\r\n", "a".repeat(300));
        assert!(exchange(addr, big.as_bytes()).starts_with("HTTP/1.1 431 "));
        let cut = exchange(addr, b"GET / HTTP/1.1\r\nHost");
        assert!(cut.starts_with("HTTP/1.1 400 "), "{cut}");

        // A listener of two slots (its own: a connection above may not have released its slot
        // yet when the client has its answer). Two connections that send nothing hold both
        // (the server accepts in order, so by the time it takes the third, the first two are
        // being served). The third sends nothing either, so that closing it leaves no unread
        // bytes (which would reset it).
        let limits = Limits { max_connections: 2, ..limits };
        let addr = serve_with("127.0.0.1:0".parse().unwrap(), sources([1; 32]).0, limits).unwrap();
        let idle: Vec<TcpStream> = (0..2).map(|_| TcpStream::connect(addr).unwrap()).collect();
        let refused = exchange(addr, b"");
        assert!(refused.starts_with("HTTP/1.1 503 "), "{refused}");
        drop(idle);
    }

    proptest! {
        #[test]
        fn any_head_gets_an_answer(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            let (r, _) = respond(&bytes, &sources([7; 32]).0);
            prop_assert!([200, 400, 404, 405].contains(&r.status));
        }

        #[test]
        fn any_path_gets_an_answer(path in "/[ -~]{0,64}") {
            let (r, _) = respond(format!("GET {path} HTTP/1.1\r\n\r\n").as_bytes(), &sources([7; 32]).0);
            prop_assert!([200, 400, 404].contains(&r.status));
        }
    }
}
