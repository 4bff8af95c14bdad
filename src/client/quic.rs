//! A synchronous QUIC client driver: quiche over plain non-blocking `std::net::UdpSocket`s,
//! one socket per connection (so each connection has its own source port, as real clients
//! do), any number of connections driven from one thread by [`drive_many`].
//!
//! The driver loop is: let the caller make progress on every connection (a `step` closure,
//! usually an [`Exchange`]), send what quiche has queued, block in `poll(2)` until a socket is
//! readable or the earliest quiche timer or the caller's deadline is due, feed received
//! datagrams to their connections, fire expired timers, repeat. It never sleeps.
//!
//! This is test and benchmark infrastructure that the MoQT client builds on; it is written to
//! be read, not to be the fastest possible client.

use runtime::QuicConnection;
use std::io;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use ring::rand::{SecureRandom, SystemRandom};

/// Largest datagram read (and written) in one call.
pub(crate) const BUF_LEN: usize = 65_536;
/// Receive buffer asked of the kernel for each socket: bulk downloads burst faster than one
/// client thread reads. The kernel caps it at `net.core.rmem_max`.
const SOCKET_RCVBUF: usize = 8 << 20;
/// Length of the connection IDs this client issues.
const SCID_LEN: usize = 16;
/// Sockets kept after a migration or rebinding, besides the active one, so that packets
/// still in flight to the old port are not lost.
const KEPT_OLD_SOCKETS: usize = 2;
/// Datagrams read from one socket per driver turn, so that a fast sender cannot keep the
/// driver from sending ACKs (or serving other connections).
const RECV_BUDGET: usize = 256;
/// Bytes read from a stream per `stream_recv` call.
const READ_CHUNK: usize = 16_384;
/// Server name sent in the TLS ClientHello (certificates are not verified by these clients
/// unless the caller's config says so).
const SERVER_NAME: &str = "localhost";

/// Why a client operation failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// A socket call failed.
    #[error("i/o: {0}")]
    Io(#[from] io::Error),
    /// quiche refused a call.
    #[error("quic: {0}")]
    Quic(#[from] quiche::Error),
    /// The client's setup was unusable (TLS, an address, a URL).
    #[error(transparent)]
    Config(#[from] anyhow::Error),
    /// No random bytes for a connection ID.
    #[error("the system random generator failed")]
    Random,
    /// The peer closed the connection (a refused handshake shows up here, with the TLS alert
    /// as `0x100 + alert`, e.g. `0x178` for `no_application_protocol`).
    #[error("closed by peer: {}", describe(.0))]
    PeerClosed(quiche::ConnectionError),
    /// This side closed the connection (a local protocol or TLS error, or [`QuicConn::close`]).
    #[error("closed locally: {}", describe(.0))]
    LocalClosed(quiche::ConnectionError),
    /// The connection was idle too long.
    #[error("idle timeout")]
    IdleTimeout,
    /// The connection is closed.
    #[error("connection closed")]
    Closed,
    /// What was awaited did not happen in time.
    #[error("deadline passed")]
    Deadline,
    /// The MoQT session closed (or refused a message): the session termination code, if any.
    #[error("moqt session: {reason} (code {code:#x})")]
    Session {
        /// The session termination code.
        code: u64,
        /// The reason.
        reason: String,
    },
    /// A session command was refused locally (not ready, blocked by MAX_REQUEST_ID, ...).
    #[error("moqt: {0}")]
    Command(#[from] session::SessionError),
    /// The peer answered a request with REQUEST_ERROR (or refused it otherwise).
    #[error("request refused: {reason} (error code {code:#x})")]
    Refused {
        /// The error code.
        code: u64,
        /// The reason phrase.
        reason: String,
    },
    /// A failure of one connection among several driven by [`drive_many`].
    #[error("connection {index}: {source}")]
    Conn {
        /// Which connection.
        index: usize,
        /// Its failure.
        source: Box<ClientError>,
    },
}

impl ClientError {
    /// The error itself, without the [`ClientError::Conn`] wrapper.
    pub fn root(&self) -> &ClientError {
        match self {
            ClientError::Conn { source, .. } => source.root(),
            e => e,
        }
    }

    /// The peer's CONNECTION_CLOSE, when that is what ended the connection.
    pub fn peer_error(&self) -> Option<&quiche::ConnectionError> {
        match self.root() {
            ClientError::PeerClosed(e) => Some(e),
            _ => None,
        }
    }

    pub(crate) fn at(self, index: usize) -> ClientError {
        match self {
            e @ (ClientError::Conn { .. } | ClientError::Deadline) => e,
            e => ClientError::Conn { index, source: Box::new(e) },
        }
    }

    fn unwrap_conn(self) -> ClientError {
        match self {
            ClientError::Conn { source, .. } => *source,
            e => e,
        }
    }
}

fn describe(e: &quiche::ConnectionError) -> String {
    format!(
        "{} error 0x{:x} {:?}",
        if e.is_app { "application" } else { "transport" },
        e.error_code,
        String::from_utf8_lossy(&e.reason)
    )
}

/// A UDP socket of a connection, its address, and the local address quiche knows its path
/// by (the same, except after [`QuicConn::rebind`]).
#[derive(Debug)]
struct Bound {
    socket: UdpSocket,
    local: SocketAddr,
    path_addr: SocketAddr,
}

/// A non-blocking UDP socket with a large receive buffer, on an ephemeral port, able to
/// reach `peer` (the loopback address for a loopback peer, the wildcard otherwise).
fn bind_for(peer: SocketAddr) -> io::Result<Bound> {
    let ip = match peer {
        p if p.ip().is_loopback() => p.ip(),
        SocketAddr::V4(_) => Ipv4Addr::UNSPECIFIED.into(),
        SocketAddr::V6(_) => Ipv6Addr::UNSPECIFIED.into(),
    };
    let socket = socket2::Socket::new(
        socket2::Domain::for_address(peer),
        socket2::Type::DGRAM,
        Some(socket2::Protocol::UDP),
    )?;
    // Best effort: a smaller buffer only costs throughput.
    let _ = socket.set_recv_buffer_size(SOCKET_RCVBUF);
    socket.bind(&SocketAddr::new(ip, 0).into())?;
    socket.set_nonblocking(true)?;
    let socket: UdpSocket = socket.into();
    let local = socket.local_addr()?;
    Ok(Bound { socket, local, path_addr: local })
}

fn random_bytes<const N: usize>() -> Result<[u8; N], ClientError> {
    let mut out = [0u8; N];
    SystemRandom::new().fill(&mut out).map_err(|_| ClientError::Random)?;
    Ok(out)
}

/// One client connection and its socket(s).
pub struct QuicConn {
    conn: QuicConnection,
    peer: SocketAddr,
    /// The active socket first, then up to [`KEPT_OLD_SOCKETS`] previous ones.
    sockets: Vec<Bound>,
    next_bidi: u64,
    /// Sequence number of the server connection ID the active path uses.
    dcid_seq: u64,
    /// Acknowledge every this many packets received (`None`: at every write, quiche's way).
    ack_every: Option<u32>,
    /// Packets received since the last write, and when they must be acknowledged by.
    unacked: u32,
    ack_due: Option<Instant>,
    /// quiche's timer fired since the last write: what it queued goes now.
    timer_fired: bool,
}

/// How long an acknowledgement may wait for a second packet with `ack_every`: RFC 9000's
/// default max_ack_delay, which quiche advertises (so the sender's RTT samples allow for it).
pub const ACK_DELAY: Duration = Duration::from_millis(25);

impl std::fmt::Debug for QuicConn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QuicConn")
            .field("trace_id", &self.conn.trace_id())
            .field("local", &self.local_addr())
            .field("peer", &self.peer)
            .finish()
    }
}

impl QuicConn {
    /// Starts a handshake with `peer` offering the one ALPN `alpn`, without verifying the
    /// server's certificate. Returns once the first Initial is sent; see [`Self::handshake`].
    /// Builds a quiche config each time (which loads the system trust store); use
    /// [`Self::connect_with`] and one config for many connections.
    pub fn connect(peer: SocketAddr, alpn: &str) -> Result<Self, ClientError> {
        let mut config = runtime::tls::client_config(&[alpn], false)?;
        Self::connect_with(peer, &mut config)
    }

    /// Starts a handshake with `peer` using the caller's quiche configuration.
    pub fn connect_with(peer: SocketAddr, config: &mut quiche::Config) -> Result<Self, ClientError> {
        let bound = bind_for(peer)?;
        let scid = random_bytes::<SCID_LEN>()?;
        let scid = quiche::ConnectionId::from_ref(&scid);
        let conn =
            quiche::connect_with_buffer_factory(Some(SERVER_NAME), &scid, bound.path_addr, peer, config)?;
        let mut this = QuicConn {
            conn,
            peer,
            sockets: vec![bound],
            next_bidi: 0,
            dcid_seq: 0,
            ack_every: None,
            unacked: 0,
            ack_due: None,
            timer_fired: false,
        };
        this.flush(&mut vec![0u8; BUF_LEN])?;
        Ok(this)
    }

    /// The quiche connection, to read and write streams directly.
    pub fn conn(&self) -> &QuicConnection {
        &self.conn
    }

    /// The quiche connection, to read and write streams directly.
    pub fn conn_mut(&mut self) -> &mut QuicConnection {
        &mut self.conn
    }

    /// The address of the socket packets are sent from now.
    pub fn local_addr(&self) -> SocketAddr {
        // `sockets` is never empty: built with one, and `use_socket` only adds to the front.
        self.sockets.first().map_or(self.peer, |b| b.local)
    }

    /// The negotiated ALPN (empty before the handshake completes).
    pub fn alpn(&self) -> &[u8] {
        self.conn.application_proto()
    }

    /// The ID of the next client-initiated bidirectional stream (0, 4, 8, ...).
    pub fn next_bidi_stream(&mut self) -> u64 {
        let id = self.next_bidi;
        self.next_bidi += 4;
        id
    }

    /// Why the connection ended, or `None` while it is open (or draining without an error).
    pub fn close_error(&self) -> Option<ClientError> {
        if let Some(e) = self.conn.peer_error() {
            return Some(ClientError::PeerClosed(e.clone()));
        }
        if !self.conn.is_closed() {
            return None;
        }
        Some(if let Some(e) = self.conn.local_error() {
            ClientError::LocalClosed(e.clone())
        } else if self.conn.is_timed_out() {
            ClientError::IdleTimeout
        } else {
            ClientError::Closed
        })
    }

    /// Drives this connection until `until` returns `true`, the connection closes (an error),
    /// or `deadline` passes ([`ClientError::Deadline`]).
    pub fn drive(
        &mut self,
        deadline: Instant,
        mut until: impl FnMut(&mut QuicConn) -> Result<bool, ClientError>,
    ) -> Result<(), ClientError> {
        drive_many(std::slice::from_mut(self), deadline, |_, c| until(c)).map_err(ClientError::unwrap_conn)
    }

    /// Completes the handshake. A refused one (unknown ALPN, bad token) is
    /// [`ClientError::PeerClosed`] with the server's error.
    pub fn handshake(&mut self, deadline: Instant) -> Result<(), ClientError> {
        self.drive(deadline, |c| Ok(c.conn.is_established()))
    }

    /// Opens the next bidirectional stream, sends `data` with FIN and returns everything the
    /// server sent back on it, up to its FIN.
    pub fn request(&mut self, data: &[u8], deadline: Instant) -> Result<Vec<u8>, ClientError> {
        let mut exchange = Exchange::new(self.next_bidi_stream(), data);
        self.drive(deadline, |c| exchange.progress(&mut c.conn))?;
        Ok(exchange.into_reply())
    }

    /// Like [`Self::request`], but counts the reply's bytes instead of keeping them (a bulk
    /// download). Returns the byte count.
    pub fn download(&mut self, request: &[u8], deadline: Instant) -> Result<u64, ClientError> {
        let mut exchange = Exchange::discarding(self.next_bidi_stream(), request);
        self.drive(deadline, |c| exchange.progress(&mut c.conn))?;
        Ok(exchange.received())
    }

    /// Moves the connection to a new local socket (a new source port) with QUIC connection
    /// migration: first waits (driving the connection, until `deadline`) for a spare
    /// connection ID from the server, then quiche switches to it, probes the new path and
    /// sends from it, and the connection ID of the old path is retired (so that the server
    /// can issue a replacement). Returns the new local address.
    ///
    /// quiche 0.30 gives the next new connection ID to the abandoned path (it fills every path
    /// that lacks one), and frees old paths only when it needs room, so a connection can move
    /// about as many times as it holds spare IDs: once, against a server with
    /// `active_connection_id_limit` 2.
    pub fn migrate(&mut self, deadline: Instant) -> Result<SocketAddr, ClientError> {
        self.drive(deadline, |c| Ok(c.conn.available_dcids() > 0))?;
        let bound = bind_for(self.peer)?;
        let addr = bound.local;
        let seq = self.conn.migrate_source(addr)?;
        let old = std::mem::replace(&mut self.dcid_seq, seq);
        if old != seq {
            self.conn.retire_dcid(old)?;
        }
        self.use_socket(bound);
        Ok(addr)
    }

    /// Simulates a NAT rebinding: packets go out from a new socket (a new source port) while
    /// quiche, unaware, keeps its path and connection IDs; the server sees the same
    /// connection ID from a new address. Needs nothing from the server. Returns the new
    /// source address.
    pub fn rebind(&mut self) -> Result<SocketAddr, ClientError> {
        let mut bound = bind_for(self.peer)?;
        let addr = bound.local;
        if let Some(active) = self.sockets.first() {
            bound.path_addr = active.path_addr;
        }
        self.use_socket(bound);
        Ok(addr)
    }

    /// Sends CONNECTION_CLOSE (application error 0) without waiting for the peer.
    pub fn close(&mut self) -> Result<(), ClientError> {
        match self.conn.close(true, 0, b"") {
            Ok(()) | Err(quiche::Error::Done) => {}
            Err(e) => return Err(e.into()),
        }
        self.flush(&mut vec![0u8; BUF_LEN])
    }

    fn use_socket(&mut self, bound: Bound) {
        self.sockets.insert(0, bound);
        self.sockets.truncate(1 + KEPT_OLD_SOCKETS);
    }

    /// Offers the server spare connection IDs (needed for it to follow a migration).
    fn offer_scids(&mut self) -> Result<(), ClientError> {
        while self.conn.is_established() && self.conn.scids_left() > 0 {
            let cid = random_bytes::<SCID_LEN>()?;
            let token = u128::from_be_bytes(random_bytes::<16>()?);
            self.conn.new_scid(&quiche::ConnectionId::from_ref(&cid), token, true)?;
        }
        Ok(())
    }

    /// Acknowledges every `n` packets received (or after [`ACK_DELAY`]) instead of at every
    /// write, as RFC 9000 §13.2.2 recommends for two and browsers do for more: quiche sends an
    /// ACK at any write after a packet arrived, so a receiver that writes after each read
    /// acknowledges every packet, and its sender processes one ACK per packet. (A load
    /// generator's choice: what it writes itself may then wait up to [`ACK_DELAY`] too.)
    pub fn set_ack_every(&mut self, n: Option<u32>) {
        self.ack_every = n.filter(|&n| n > 1);
    }

    /// Whether a write now would only acknowledge packets that can wait (`ack_every`).
    fn ack_can_wait(&self, now: Instant) -> bool {
        self.ack_every.is_some_and(|n| self.unacked < n)
            && self.unacked > 0
            && !self.timer_fired
            && self.conn.is_established()
            && self.ack_due.is_some_and(|due| now < due)
    }

    /// Sends everything quiche has queued, each packet from the socket of its path.
    fn flush(&mut self, buf: &mut [u8]) -> Result<(), ClientError> {
        (self.unacked, self.ack_due, self.timer_fired) = (0, None, false);
        loop {
            let (n, info) = match self.conn.send(buf) {
                Ok(v) => v,
                Err(quiche::Error::Done) => return Ok(()),
                Err(e) => return Err(e.into()),
            };
            // A path whose socket is gone: the packet is lost, as on a real network.
            let Some(bound) = self.sockets.iter().find(|b| b.path_addr == info.from) else {
                continue;
            };
            match bound.socket.send_to(&buf[..n], info.to) {
                Ok(_) => {}
                // A full socket buffer loses the packet; quiche recovers as from any loss.
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// Feeds quiche the datagrams waiting on socket `index`, up to [`RECV_BUDGET`].
    fn receive(&mut self, index: usize, buf: &mut [u8]) -> Result<(), ClientError> {
        let Some(bound) = self.sockets.get(index) else {
            return Ok(());
        };
        for _ in 0..RECV_BUDGET {
            let (n, from) = match bound.socket.recv_from(buf) {
                Ok(v) => v,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                // An ICMP error for an earlier datagram; nothing to read.
                Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => return Ok(()),
                Err(e) => return Err(e.into()),
            };
            let info = quiche::RecvInfo { from, to: bound.path_addr };
            // quiche drops what it cannot use (undecryptable, stale, after close); so do we.
            if self.conn.recv(&mut buf[..n], info).is_ok() && self.ack_every.is_some() {
                self.unacked += 1;
                self.ack_due.get_or_insert_with(|| Instant::now() + ACK_DELAY);
            }
        }
        Ok(())
    }

    /// Fires quiche's timer if it is due (or the acknowledgement's); `true` if it was.
    fn on_timer(&mut self, now: Instant) -> bool {
        let due = self.conn.timeout_instant().is_some_and(|t| t <= now);
        if due {
            self.conn.on_timeout();
            self.timer_fired = true;
        }
        due || self.ack_due.is_some_and(|t| t <= now)
    }
}

/// Drives all `conns` from this thread until `step(i, conn)` has returned `true` once for
/// every connection. `step` is called once at the start and then after every batch of I/O
/// (datagrams in, timer fired) of a connection that is not done yet; it reads and writes
/// streams. Finished connections keep being serviced (ACKs, timers) until the call returns.
/// Fails when a connection that is not done closes (the error carries its index) or when
/// `deadline` passes; a deadline already past still reads the sockets once (without waiting),
/// fires due timers and steps what that brought before failing.
pub fn drive_many<F>(conns: &mut [QuicConn], deadline: Instant, step: F) -> Result<(), ClientError>
where
    F: FnMut(usize, &mut QuicConn) -> Result<bool, ClientError>,
{
    super::drive::drive(conns, deadline, &mut vec![0u8; BUF_LEN], step)
}

impl super::drive::Polled for QuicConn {
    fn close_error(&self) -> Option<ClientError> {
        QuicConn::close_error(self)
    }

    fn send(&mut self, buf: &mut [u8]) -> Result<(), ClientError> {
        if self.ack_can_wait(Instant::now()) {
            return Ok(());
        }
        self.offer_scids()?;
        self.flush(buf)
    }

    fn timeout(&self) -> Option<Instant> {
        match (self.conn.timeout_instant(), self.ack_due) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn sockets(&self, out: &mut Vec<std::os::fd::RawFd>) {
        out.extend(self.sockets.iter().map(|b| b.socket.as_raw_fd()));
    }

    fn receive(&mut self, k: usize, buf: &mut [u8]) -> Result<(), ClientError> {
        QuicConn::receive(self, k, buf)
    }

    fn on_timer(&mut self, now: Instant) -> bool {
        QuicConn::on_timer(self, now)
    }
}

/// One request/response on a client bidirectional stream: send the request with FIN, then
/// read the reply up to its FIN, keeping it ([`Exchange::new`]) or only counting it
/// ([`Exchange::discarding`], for bulk downloads). Call [`Exchange::progress`] from a
/// [`drive_many`] step.
#[derive(Debug)]
pub struct Exchange {
    stream_id: u64,
    request: Vec<u8>,
    sent: usize,
    fin_sent: bool,
    keep: bool,
    reply: Vec<u8>,
    received: u64,
    finished: bool,
}

impl Exchange {
    /// An exchange that keeps the reply.
    pub fn new(stream_id: u64, request: impl Into<Vec<u8>>) -> Self {
        Exchange {
            stream_id,
            request: request.into(),
            sent: 0,
            fin_sent: false,
            keep: true,
            reply: Vec::new(),
            received: 0,
            finished: false,
        }
    }

    /// An exchange that only counts the reply's bytes.
    pub fn discarding(stream_id: u64, request: impl Into<Vec<u8>>) -> Self {
        Exchange { keep: false, reply: vec![0u8; BUF_LEN], ..Exchange::new(stream_id, request) }
    }

    /// Writes what stream capacity allows, reads what has arrived; `true` once the reply's
    /// FIN has been read. Does nothing before the handshake completes.
    pub fn progress(&mut self, conn: &mut QuicConnection) -> Result<bool, ClientError> {
        if !conn.is_established() || self.finished {
            return Ok(self.finished);
        }
        if !self.fin_sent {
            match conn.stream_send(self.stream_id, &self.request[self.sent..], true) {
                Ok(n) => {
                    self.sent += n;
                    self.fin_sent = self.sent == self.request.len();
                }
                Err(quiche::Error::Done) => {}
                Err(e) => return Err(e.into()),
            }
        }
        while !self.finished {
            let read = if self.keep {
                let len = self.reply.len();
                self.reply.resize(len + READ_CHUNK, 0);
                let read = conn.stream_recv(self.stream_id, &mut self.reply[len..]);
                self.reply.truncate(len + read.as_ref().map_or(0, |&(n, _)| n));
                read
            } else {
                conn.stream_recv(self.stream_id, &mut self.reply)
            };
            match read {
                Ok((n, fin)) => {
                    self.received += n as u64;
                    self.finished = fin;
                }
                // Nothing readable yet (or the stream does not exist on the peer's side yet).
                Err(quiche::Error::Done) | Err(quiche::Error::InvalidStreamState(_)) => break,
                Err(e) => return Err(e.into()),
            }
        }
        Ok(self.finished)
    }

    /// Whether the reply's FIN has been read.
    pub fn is_finished(&self) -> bool {
        self.finished
    }

    /// Reply bytes received so far.
    pub fn received(&self) -> u64 {
        self.received
    }

    /// The reply (empty for a discarding exchange).
    pub fn reply(&self) -> &[u8] {
        if self.keep {
            &self.reply
        } else {
            &[]
        }
    }

    /// The reply, by value (empty for a discarding exchange).
    pub fn into_reply(self) -> Vec<u8> {
        if self.keep {
            self.reply
        } else {
            Vec::new()
        }
    }
}

/// Sends one raw UDP datagram to `peer` from a fresh socket and returns the first datagram
/// that comes back from `peer`, or [`ClientError::Deadline`]. For probing a server with
/// hand-made packets (stateless resets, version negotiation).
pub fn raw_exchange(peer: SocketAddr, datagram: &[u8], deadline: Instant) -> Result<Vec<u8>, ClientError> {
    let bound = bind_for(peer)?;
    bound.socket.set_nonblocking(false)?;
    bound.socket.send_to(datagram, peer)?;
    let mut buf = vec![0u8; BUF_LEN];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(ClientError::Deadline);
        }
        bound.socket.set_read_timeout(Some(left))?;
        match bound.socket.recv_from(&mut buf) {
            Ok((n, from)) if from == peer => {
                buf.truncate(n);
                return Ok(buf);
            }
            Ok(_) => {}
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn raw_exchange_returns_the_reply_from_the_peer() -> Result<(), Box<dyn std::error::Error>> {
        let server = UdpSocket::bind("127.0.0.1:0")?;
        let peer = server.local_addr()?;
        let echo = std::thread::spawn(move || -> io::Result<()> {
            let mut buf = [0u8; 64];
            let (n, from) = server.recv_from(&mut buf)?;
            buf[..n].reverse();
            server.send_to(&buf[..n], from)?;
            Ok(())
        });
        let reply = raw_exchange(peer, b"abc", Instant::now() + Duration::from_secs(10))?;
        assert_eq!(reply, b"cba");
        echo.join().map_err(|_| "echo thread panicked")??;
        Ok(())
    }

    #[test]
    fn raw_exchange_times_out_without_reply() -> Result<(), Box<dyn std::error::Error>> {
        let silent = UdpSocket::bind("127.0.0.1:0")?;
        let err = raw_exchange(silent.local_addr()?, b"x", Instant::now() + Duration::from_millis(50));
        assert!(matches!(err, Err(ClientError::Deadline)), "{err:?}");
        Ok(())
    }

    #[test]
    fn conn_errors_are_unwrapped_to_their_root() {
        let e = ClientError::IdleTimeout.at(3);
        assert!(matches!(e, ClientError::Conn { index: 3, .. }));
        assert!(matches!(e.root(), ClientError::IdleTimeout));
        assert!(matches!(ClientError::Deadline.at(1), ClientError::Deadline));
        let closed = quiche::ConnectionError { is_app: false, error_code: 0x178, reason: vec![] };
        assert_eq!(ClientError::PeerClosed(closed).at(0).peer_error().map(|e| e.error_code), Some(0x178));
    }
}
