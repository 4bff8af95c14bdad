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
//! - WebSocket upgrades offering QMux (`crate::websocket`), handed to the cores.
//! - `GET /announced[/PREFIX]` and `GET /fetch/NAMESPACE/TRACK`: the side doors (`side`).
//!
//! Only GET and HEAD; every other path is 404. One thread accepts; each connection gets its
//! own short-lived thread. What one client may cost is bounded in number and in time
//! ([`Limits`]): connections at once in all and per client address (`slots`), one deadline
//! for the TLS handshake and the whole request head together, one for the whole answer (a
//! least rate it must be read at), one for the linger after it. The answer is the only one on
//! its connection (`Connection: close`). An upgraded WebSocket leaves the listener at once:
//! the core that adopts it counts it against its own limit. Nothing a client sends can panic:
//! parsing is over a bounded byte buffer with no indexing that can fail.

mod http;
mod side;
mod slots;
#[cfg(test)]
mod tests;

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use runtime::StreamTls;

pub use http::{hex_lower, respond, Response};
use slots::{Refused, Slots};

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
    /// When set, `GET /announced` and `GET /fetch/…` are answered by asking the cores
    /// (`side`).
    pub side_door: Option<crate::host::side_door::SideDoor>,
    /// The relay's keys when requests need tokens (`auth` other than `open`): the side doors
    /// need one too.
    pub auth: Option<auth::KeyRing>,
    /// With `auth = "http"`: the platform's service decides the side doors' requests.
    pub admission: Option<crate::host::admission::Admission>,
}

/// Bounds on what clients may cost.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Connections served at once, every client together; one more is answered 503.
    pub max_connections: usize,
    /// Connections one client (an IPv4 address, an IPv6 /64) may have served at once; one
    /// more is answered 429.
    pub max_per_client: usize,
    /// Bytes of the request line and headers; a longer head is answered 431.
    pub max_head_bytes: usize,
    /// How long the TLS handshake and the whole request head together may take, from accept.
    pub head_timeout: Duration,
    /// The least rate, in bytes a second, at which a client must read its answer: the answer
    /// must be written within `head_timeout` plus its length at this rate.
    pub min_send_rate: u64,
    /// After the answer, how long the client's last bytes are read (and dropped) before the
    /// connection closes, at most, and how many.
    pub linger: Duration,
    pub linger_bytes: usize,
}

impl Limits {
    /// Limits sized from this machine: 256 connections a core (at least 256, at most 4,096),
    /// and no more than a quarter of the process's file descriptors; a sixteenth of them per
    /// client (at least 16).
    pub fn for_this_machine() -> Limits {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let mut max = (cores * 256).clamp(256, 4096);
        if let Some(files) = runtime::udp::open_files_limit() {
            max = max.min(usize::try_from(files / 4).unwrap_or(usize::MAX)).max(16);
        }
        Limits { max_connections: max, max_per_client: (max / 16).max(16), ..Limits::default() }
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_connections: 256,
            max_per_client: 16,
            max_head_bytes: 8 * 1024,
            head_timeout: Duration::from_secs(5),
            // The bundle (about 600 KB) then has 80 s: a 2G link's 8 KB/s is enough.
            min_send_rate: 8 * 1024,
            linger: Duration::from_secs(2),
            linger_bytes: 64 * 1024,
        }
    }
}

/// The listener's counters, for the metrics endpoint.
#[derive(Debug, Default)]
pub struct WebStats {
    /// Connections served (answered, upgraded or timed out).
    pub accepted: AtomicU64,
    /// Connections refused because every slot was taken (503).
    pub refused_full: AtomicU64,
    /// Connections refused because their client's share was taken (429).
    pub refused_client: AtomicU64,
    /// Connections closed because the handshake, the head or the answer missed its deadline.
    pub timed_out: AtomicU64,
    /// WebSocket connections handed to the cores.
    pub upgraded: AtomicU64,
}

impl WebStats {
    fn add(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

/// A running listener: its address and counters.
pub struct Listener {
    pub addr: SocketAddr,
    pub stats: Arc<WebStats>,
}

/// Binds `addr` (TCP) and serves on a thread named `web` with [`Limits::for_this_machine`].
pub fn serve(addr: SocketAddr, sources: Sources) -> io::Result<Listener> {
    serve_with(addr, sources, Limits::for_this_machine())
}

/// [`serve`] with other limits (tests).
pub fn serve_with(addr: SocketAddr, sources: Sources, limits: Limits) -> io::Result<Listener> {
    let listener = TcpListener::bind(addr)?;
    let local = listener.local_addr()?;
    let slots = Slots::new(limits.max_connections, limits.max_per_client);
    let stats = Arc::new(WebStats::default());
    let counters = stats.clone();
    std::thread::Builder::new().name("web".into()).spawn(move || {
        for stream in listener.incoming() {
            match stream {
                Ok(stream) => accept(stream, &sources, limits, &slots, &counters),
                Err(e) => {
                    tracing::debug!(error = %e, "web accept");
                    // Out of file descriptors, say: let connections close before trying again.
                    std::thread::sleep(Duration::from_millis(10));
                }
            }
        }
    })?;
    Ok(Listener { addr: local, stats })
}

/// A connection thread's stack: what parsing a head and a TLS handshake need, with room to
/// spare (the default 2 MiB, times thousands of slow connections, is address space for nothing).
const CONNECTION_STACK: usize = 512 * 1024;

fn accept(stream: TcpStream, sources: &Sources, limits: Limits, slots: &Arc<Slots>, stats: &Arc<WebStats>) {
    let accepted_at = Instant::now();
    let taken = stream.peer_addr().map_err(|_| Refused::Full).and_then(|peer| slots.take(peer.ip()));
    let slot = match taken {
        Ok(slot) => slot,
        Err(why) => return refuse(stream, why, stats),
    };
    WebStats::add(&stats.accepted);
    let (sources, stats) = (sources.clone(), stats.clone());
    let spawned =
        std::thread::Builder::new().name("web-conn".into()).stack_size(CONNECTION_STACK).spawn(move || {
            let _slot = slot;
            match serve_connection(stream, &sources, limits, accepted_at, &stats) {
                Err(e) if e.kind() == io::ErrorKind::TimedOut || e.kind() == io::ErrorKind::WouldBlock => {
                    WebStats::add(&stats.timed_out);
                    tracing::debug!(error = %e, "web connection past its deadline");
                }
                Err(e) => tracing::debug!(error = %e, "web request"),
                Ok(()) => {}
            }
        });
    if let Err(e) = spawned {
        // The closure (and its slot) was dropped with the error.
        tracing::warn!(error = %e, "web: no thread for a connection");
    }
}

/// Answers a connection there is no slot for, without blocking the accepting thread on it.
fn refuse(mut stream: TcpStream, why: Refused, stats: &WebStats) {
    let response = match why {
        Refused::Full => {
            WebStats::add(&stats.refused_full);
            Response::text(503, "too many connections\n")
        }
        Refused::ClientFull => {
            WebStats::add(&stats.refused_client);
            Response::text(429, "too many connections from this address\n")
        }
    };
    let _ = stream.set_nonblocking(true);
    let _ = stream.write_all(&response.with("Retry-After", "1").bytes(false));
}

/// A byte stream over one TCP connection, plain or TLS, whose every read and write ends by a
/// deadline (`TimedOut` once it has passed).
trait Conn: Read + Write {
    fn set_deadline(&mut self, at: Instant);
}

/// A plain TCP connection under a deadline.
struct Plain {
    tcp: TcpStream,
    deadline: Instant,
}

impl Plain {
    /// What is left before the deadline; an error once it has passed.
    fn left(&self) -> io::Result<Duration> {
        match self.deadline.saturating_duration_since(Instant::now()) {
            d if d.is_zero() => Err(io::Error::new(io::ErrorKind::TimedOut, "past the deadline")),
            d => Ok(d),
        }
    }
}

impl Read for Plain {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.tcp.set_read_timeout(Some(self.left()?))?;
        self.tcp.read(buf)
    }
}

impl Write for Plain {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.tcp.set_write_timeout(Some(self.left()?))?;
        self.tcp.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.tcp.flush()
    }
}

impl Conn for Plain {
    fn set_deadline(&mut self, at: Instant) {
        self.deadline = at;
    }
}

impl Conn for StreamTls {
    fn set_deadline(&mut self, at: Instant) {
        StreamTls::set_deadline(self, at);
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
/// configured, plain HTTP otherwise. The handshake and the head share one deadline.
fn serve_connection(
    tcp: TcpStream,
    sources: &Sources,
    limits: Limits,
    accepted_at: Instant,
    stats: &WebStats,
) -> io::Result<()> {
    let deadline = accepted_at + limits.head_timeout;
    tcp.set_read_timeout(Some(limits.head_timeout))?;
    let mut first = [0u8; 1];
    let tls = match &sources.https {
        Some(ctx) if tcp.peek(&mut first)? == 1 && first[0] == TLS_HANDSHAKE => ctx(),
        _ => None,
    };
    let Some(ctx) = tls else {
        let mut plain = Plain { tcp, deadline };
        match answer(&mut plain, sources, limits)? {
            Outcome::Answered => linger(plain.tcp, limits),
            Outcome::Upgraded(accepted, early) => hand_over(sources, plain.tcp, None, accepted, early, stats),
        }
        return Ok(());
    };
    let mut stream = StreamTls::accept(&ctx, tcp, deadline)?;
    match answer(&mut stream, sources, limits)? {
        Outcome::Answered => {
            let _ = stream.close(); // close_notify, written to the socket while attached
            if let Some(tcp) = stream.detach() {
                linger(tcp, limits);
            }
        }
        Outcome::Upgraded(accepted, early) => {
            if let Some(tcp) = stream.detach() {
                hand_over(sources, tcp, Some(stream), accepted, early, stats);
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
    stats: &WebStats,
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
    } else {
        WebStats::add(&stats.upgraded);
    }
}

/// Reads one request head (by the connection's deadline) and answers it (by a deadline of
/// its own, from its length); the caller then closes the connection.
fn answer<S: Conn>(stream: &mut S, sources: &Sources, limits: Limits) -> io::Result<Outcome> {
    let mut buf = vec![0u8; limits.max_head_bytes];
    let mut len = 0;
    let head = loop {
        if let Some(end) = head_end(&buf[..len]) {
            break Head::Complete(end);
        }
        if len == buf.len() {
            break Head::TooLarge;
        }
        let n = stream.read(&mut buf[len..])?;
        if n == 0 {
            break Head::Truncated(len);
        }
        len += n;
    };
    let (response, is_head) = match head {
        Head::Complete(end) if has_bare_lf(&buf[..end]) => {
            (Response::text(400, "request lines must end with CRLF (RFC 9112 §2.2)\n"), false)
        }
        Head::Complete(end) => match websocket_upgrade(&buf[..end], sources) {
            Some(Ok(accepted)) => {
                stream.set_deadline(Instant::now() + limits.head_timeout);
                stream.write_all(&accepted.response)?;
                stream.flush()?;
                return Ok(Outcome::Upgraded(accepted, buf[end..len].to_vec()));
            }
            Some(Err(refused)) => (refused, false),
            None => respond(&buf[..end], sources),
        },
        Head::TooLarge => (Response::text(431, "request head too large\n"), false),
        Head::Truncated(0) => return Ok(Outcome::Answered),
        Head::Truncated(_) => (Response::text(400, "incomplete request\n"), false),
    };
    let body: &[u8] = if is_head { &[] } else { &response.body };
    let head = response.head();
    let bytes = (head.len() + body.len()) as u64;
    let send_time = Duration::from_secs_f64(bytes as f64 / limits.min_send_rate.max(1) as f64);
    stream.set_deadline(Instant::now() + limits.head_timeout + send_time);
    stream.write_all(&head)?;
    stream.write_all(body)?;
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

/// Closes our side, then reads (and drops) what the client still sends, up to
/// [`Limits::linger_bytes`] and until [`Limits::linger`] has passed, before closing: a socket
/// closed with unread bytes sends a reset, which can destroy the answer before the client
/// reads it (RFC 9112 §9.6). The bound is on the whole linger, not on each read, so a client
/// dripping a byte at a time cannot stretch it.
fn linger(tcp: TcpStream, limits: Limits) {
    let _ = tcp.shutdown(std::net::Shutdown::Write);
    let mut plain = Plain { tcp, deadline: Instant::now() + limits.linger };
    let mut sink = [0u8; 4096];
    let mut left = limits.linger_bytes;
    while left > 0 {
        match plain.read(&mut sink) {
            Ok(0) | Err(_) => break,
            Ok(n) => left = left.saturating_sub(n),
        }
    }
}

enum Head {
    /// The head ends at this offset (past its blank line).
    Complete(usize),
    TooLarge,
    Truncated(usize),
}

/// Where a request head ends (just past the empty line that ends it), once it has arrived. An
/// empty line is CRLF, or a bare LF (which [`answer`] refuses rather than waiting for a CRLF
/// that may never come).
fn head_end(buf: &[u8]) -> Option<usize> {
    let mut line_start = 0;
    for (i, b) in buf.iter().enumerate() {
        if *b != b'\n' {
            continue;
        }
        let line = &buf[line_start..i];
        if line.is_empty() || line == b"\r" {
            return Some(i + 1);
        }
        line_start = i + 1;
    }
    None
}

/// Whether some line of `head` ends with a LF not preceded by CR.
fn has_bare_lf(head: &[u8]) -> bool {
    head.iter().enumerate().any(|(i, b)| *b == b'\n' && (i == 0 || head[i - 1] != b'\r'))
}
