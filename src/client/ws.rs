//! A synchronous client of MoQT over QMux over WebSocket (`ws://` and `wss://`): the TCP
//! connection, TLS for `wss://` (the certificate is not checked, as for the QUIC client: a
//! test and bench tool), the HTTP/1.1 upgrade (RFC 6455 §4.1) offering `qmux-VV.<alpn>`, then
//! the QMux state ([`qmux::Connection`]) driven from this thread.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::io::AsRawFd;
use std::time::{Duration, Instant};

use boring::ssl::{SslConnector, SslMethod, SslStream, SslVerifyMode};

use super::quic::ClientError;

/// The QMux versions a client offers, most preferred first.
pub const OFFERED: [qmux::Version; 3] = [qmux::Version::Qmux01, qmux::Version::Qmux02, qmux::Version::Qmux00];

/// Longest upgrade answer read.
const MAX_ANSWER: usize = 8 * 1024;

enum Io {
    Plain(TcpStream),
    Tls(Box<SslStream<TcpStream>>),
}

impl Io {
    fn tcp(&self) -> &TcpStream {
        match self {
            Io::Plain(s) => s,
            Io::Tls(s) => s.get_ref(),
        }
    }
}

impl Read for Io {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Io::Plain(s) => s.read(buf),
            Io::Tls(s) => s.read(buf),
        }
    }
}

impl Write for Io {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Io::Plain(s) => s.write(buf),
            Io::Tls(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Io::Plain(s) => s.flush(),
            Io::Tls(s) => s.flush(),
        }
    }
}

/// One MoQT-over-QMux connection.
pub struct WsConn {
    io: Io,
    pub(crate) qmux: qmux::Connection,
    /// The application protocol the server chose (`moqt-18`).
    alpn: String,
    buf: Vec<u8>,
}

/// A `ws://` or `wss://` URL's parts: TLS, the Host header, the path with its query.
pub fn split_url(url: &str) -> Option<(bool, &str, &str)> {
    let (tls, rest) = match url.split_once("://")? {
        ("ws", rest) => (false, rest),
        ("wss", rest) => (true, rest),
        _ => return None,
    };
    let at = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, path) = rest.split_at(at);
    Some((tls, authority, if path.is_empty() { "/" } else { path }))
}

impl WsConn {
    /// Connects to `addr` for `url`, upgrades offering `alpns` (most preferred first) over
    /// [`OFFERED`], and starts QMux.
    pub fn connect(
        addr: SocketAddr,
        url: &str,
        alpns: &[&str],
        deadline: Instant,
    ) -> Result<WsConn, ClientError> {
        let bad = || ClientError::Config(anyhow::anyhow!("{url}: not a ws:// or wss:// URL"));
        let (tls, authority, path) = split_url(url).ok_or_else(bad)?;
        let left = deadline.saturating_duration_since(Instant::now()).max(Duration::from_millis(1));
        let tcp = TcpStream::connect_timeout(&addr, left)?;
        tcp.set_nodelay(true)?;
        tcp.set_read_timeout(Some(left))?;
        let mut io = match tls {
            false => Io::Plain(tcp),
            true => {
                let mut builder = SslConnector::builder(SslMethod::tls()).map_err(io::Error::other)?;
                builder.set_verify(SslVerifyMode::NONE);
                let host = authority.rsplit_once(':').map_or(authority, |(h, _)| h);
                let host = host.trim_start_matches('[').trim_end_matches(']');
                let ssl =
                    builder.build().connect(host, tcp).map_err(|e| io::Error::other(format!("TLS: {e}")))?;
                Io::Tls(Box::new(ssl))
            }
        };
        let key = qmux::upgrade::random_key();
        let offer = qmux::upgrade::offer(alpns, &OFFERED).join(", ");
        let request = format!(
            "GET {path} HTTP/1.1\r\nHost: {authority}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: {offer}\r\n\r\n"
        );
        io.write_all(request.as_bytes())?;
        io.flush()?;
        let (head, early) = read_answer(&mut io)?;
        let (version, alpn) = check_answer(&head, &key)?;
        let now = Instant::now();
        let mut qmux = qmux::Connection::new(
            version,
            qmux::Framing::WebSocket,
            qmux::Role::Client,
            &qmux::Config::default(),
            now,
        );
        if !early.is_empty() {
            let _ = qmux.recv(&early, now);
        }
        // From here on the socket is read when poll(2) says so, and written until it blocks.
        io.tcp().set_nonblocking(true)?;
        Ok(WsConn { io, qmux, alpn, buf: vec![0u8; 64 * 1024] })
    }

    /// The application protocol the server chose.
    pub fn alpn(&self) -> &str {
        &self.alpn
    }

    /// The QMux connection.
    pub fn qmux(&self) -> &qmux::Connection {
        &self.qmux
    }

    /// Drives the connection until `until` returns `true`, the connection closes (an error)
    /// or `deadline` passes ([`ClientError::Deadline`]). `until` runs at the start and after
    /// every read or timer.
    pub fn drive(
        &mut self,
        deadline: Instant,
        mut until: impl FnMut(&mut qmux::Connection) -> Result<bool, ClientError>,
    ) -> Result<(), ClientError> {
        drive_many(std::slice::from_mut(self), deadline, |_, c| until(c)).map_err(|e| match e {
            ClientError::Conn { source, .. } => *source,
            e => e,
        })
    }

    /// Reads what the socket has (without waiting) into QMux. True when anything came.
    fn receive(&mut self) -> Result<bool, ClientError> {
        let mut got = false;
        loop {
            match self.io.read(&mut self.buf) {
                Ok(0) => {
                    self.qmux.recv_eof(Instant::now());
                    return Ok(true);
                }
                Ok(n) => {
                    got = true;
                    let _ = self.qmux.recv(&self.buf[..n], Instant::now());
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(got),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// Writes everything QMux has queued, waiting for the socket when it is full.
    fn flush(&mut self) -> Result<(), ClientError> {
        while let Some(bytes) = self.qmux.take_output(64 * 1024) {
            let mut at = 0;
            while at < bytes.len() {
                match self.io.write(&bytes[at..]) {
                    Ok(n) => at += n,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        let fd = self.io.tcp().as_raw_fd();
                        let mut fds = [libc::pollfd { fd, events: libc::POLLOUT, revents: 0 }];
                        runtime::udp::wait_readable(&mut fds, Duration::from_millis(100))?;
                    }
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(e.into()),
                }
            }
        }
        Ok(())
    }

    /// Why the connection is closed, once it is.
    pub fn close_error(&self) -> Option<ClientError> {
        if !self.qmux.is_closed() {
            return None;
        }
        let as_quiche = |e: &qmux::ConnectionError| quiche::ConnectionError {
            is_app: e.is_app,
            error_code: e.error_code,
            reason: e.reason.clone(),
        };
        Some(match (self.qmux.peer_error(), self.qmux.local_error()) {
            (Some(e), _) => ClientError::PeerClosed(as_quiche(e)),
            (None, Some(e)) => ClientError::LocalClosed(as_quiche(e)),
            _ if self.qmux.is_timed_out() => ClientError::IdleTimeout,
            _ => ClientError::Closed,
        })
    }

    /// Closes with application error 0 and writes the close.
    pub fn close(&mut self) -> Result<(), ClientError> {
        let _ = self.qmux.close(true, 0, b"");
        self.flush()
    }
}

/// Drives all `conns` from this thread until `step(i, qmux)` has returned `true` once for each
/// (as [`super::drive_many`] does for QUIC connections): `step` runs at the start and after
/// every read or timer of a connection not done yet; done connections keep being read and
/// their timers fired until the call returns. A connection that closes before it is done
/// fails the call ([`ClientError::Conn`] names it), as does `deadline`.
pub fn drive_many(
    conns: &mut [WsConn],
    deadline: Instant,
    mut step: impl FnMut(usize, &mut qmux::Connection) -> Result<bool, ClientError>,
) -> Result<(), ClientError> {
    super::drive::drive(conns, deadline, &mut [], |i, c| step(i, &mut c.qmux))
}

impl super::drive::Polled for WsConn {
    fn close_error(&self) -> Option<ClientError> {
        WsConn::close_error(self)
    }

    fn send(&mut self, _buf: &mut [u8]) -> Result<(), ClientError> {
        self.flush()
    }

    fn timeout(&self) -> Option<Instant> {
        self.qmux.timeout_instant()
    }

    fn sockets(&self, out: &mut Vec<std::os::fd::RawFd>) {
        out.push(self.io.tcp().as_raw_fd());
    }

    fn receive(&mut self, _k: usize, _buf: &mut [u8]) -> Result<(), ClientError> {
        WsConn::receive(self).map(|_| ())
    }

    fn on_timer(&mut self, now: Instant) -> bool {
        let due = self.qmux.timeout_instant().is_some_and(|t| t <= now);
        if due {
            self.qmux.on_timeout(now);
        }
        due
    }

    fn buffered(&self) -> bool {
        matches!(&self.io, Io::Tls(s) if s.ssl().pending() > 0)
    }
}

/// Reads the upgrade answer's head; returns it and the bytes after it.
fn read_answer(io: &mut Io) -> Result<(String, Vec<u8>), ClientError> {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        if let Some(at) = got.windows(4).position(|w| w == b"\r\n\r\n") {
            let early = got.split_off(at + 4);
            return Ok((String::from_utf8_lossy(&got).into_owned(), early));
        }
        if got.len() > MAX_ANSWER {
            return Err(ClientError::Refused { code: 0, reason: "upgrade answer too long".into() });
        }
        let n = io.read(&mut buf)?;
        if n == 0 {
            return Err(ClientError::Closed);
        }
        got.extend_from_slice(&buf[..n]);
    }
}

/// The QMux version and application protocol a `101` chose; a refusal (its status as the
/// code) or a bad answer is an error.
fn check_answer(head: &str, key: &str) -> Result<(qmux::Version, String), ClientError> {
    let status: u16 = head.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    let header = |name: &str| {
        head.split("\r\n").skip(1).find_map(|l| {
            let (n, v) = l.split_once(':')?;
            n.trim().eq_ignore_ascii_case(name).then(|| v.trim().to_string())
        })
    };
    if status != 101 {
        let reason = format!("WebSocket upgrade answered {}", head.lines().next().unwrap_or_default());
        return Err(ClientError::Refused { code: u64::from(status), reason });
    }
    let refused = |reason: &str| ClientError::Refused { code: 101, reason: reason.to_string() };
    if header("sec-websocket-accept").as_deref() != Some(qmux::upgrade::accept_key(key).as_str()) {
        return Err(refused("bad Sec-WebSocket-Accept"));
    }
    let protocol = header("sec-websocket-protocol").ok_or_else(|| refused("no subprotocol chosen"))?;
    match qmux::upgrade::parse_subprotocol(&protocol) {
        Some((version, Some(alpn))) => Ok((version, alpn.to_string())),
        _ => Err(refused("the server chose no QMux MoQT subprotocol")),
    }
}
