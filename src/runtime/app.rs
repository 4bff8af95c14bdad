//! The seam between the runtime and what runs on a connection. The runtime owns the quiche
//! connection and calls the application after every batch of I/O; the application reads and
//! writes streams and datagrams. The MoQT session (issue 4) is one such application; tests and
//! benchmarks bring their own.

use crate::runtime::QuicConnection;
use crate::runtime::ShardId;
use crate::wire::Version;

/// One connection's application, living on the connection's core.
pub trait ConnApp {
    /// After packets for this connection were processed (and once when the handshake
    /// completes): read readable streams and datagrams, write what is due. Called on the
    /// connection's core only.
    fn on_io(&mut self, conn: &mut QuicConnection);

    /// The connection closed (by either side or by idle timeout). Default: nothing.
    fn on_closed(&mut self, _conn: &QuicConnection) {}

    /// An accepted connection's setup deadline (`RuntimeConfig::setup_timeout` after it was
    /// accepted), given once when the application is made; the core calls `on_io` once more
    /// when it passes. A MoQT session not ready by then closes with CONTROL_MESSAGE_TIMEOUT.
    /// Default: ignored.
    fn set_setup_deadline(&mut self, _at: std::time::Instant) {}
}

/// Makes one [`ConnApp`] per established connection. Shared by all cores.
pub trait AppFactory: Send + Sync + 'static {
    /// A connection on `shard` finished its handshake and chose `version` by ALPN.
    /// Used when [`AppFactory::shard_app`] returns `None`.
    fn new_connection(&self, shard: ShardId, version: Version) -> Box<dyn ConnApp>;

    /// A connection with ALPN `h3` whose WebTransport session was accepted, speaking
    /// `version` (its WT-Protocol) inside it. Default: the session over raw QUIC, for
    /// applications that read bytes without caring how they are framed.
    fn new_webtransport(&self, shard: ShardId, version: Version, _wt: WebTransportConn) -> Box<dyn ConnApp> {
        self.new_connection(shard, version)
    }

    /// Per-core application state (the relay shard), built on its core. When present, the
    /// core asks it for connections and feeds it the messages other cores sent.
    fn shard_app(&self, _shard: ShardId, _cores: usize) -> Option<Box<dyn ShardApp>> {
        None
    }
}

/// An accepted WebTransport session and the HTTP/3 bytes of its exchange not yet written,
/// handed to the application that runs MoQT inside it ([`crate::runtime::Pump::with_webtransport`]).
pub struct WebTransportConn {
    pub wt: crate::webtransport::WebTransport,
    pub h3: std::collections::VecDeque<(u64, bytes::Bytes, bool)>,
}

/// A connection as its core names it to the application: slot and generation, so a handle
/// to a closed connection never reaches the slot's next tenant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConnHandle(pub u64);

/// An opaque message from one core's application to another's, carried by the mesh.
pub type AppMessage = Box<dyn std::any::Any + Send>;

/// What a [`ShardApp`] asks of its core after a turn.
#[derive(Default)]
pub struct ShardOutput {
    /// Messages for other cores' applications, `(core, message, bytes)`, in order per core.
    /// Never dropped by the mesh. `bytes` is what the message weighs (the payloads it holds,
    /// and itself): the mesh counts it until the other core takes the message
    /// ([`ShardApp::set_mesh_backlog`]).
    pub messages: Vec<(usize, AppMessage, usize)>,
    /// Connections whose output changed outside their own `on_io` (fan-out): the core runs
    /// their `on_io` again this turn.
    pub wake: Vec<ConnHandle>,
    /// The application's earliest deadline ([`ShardApp::poll`] is called again by then).
    pub deadline: Option<std::time::Instant>,
    /// Connections to open from this core (to upstream servers).
    pub connect: Vec<Connect>,
}

/// A QUIC connection the application asks its core to open. When the handshake completes the
/// core calls [`ShardApp::new_outbound`] with `tag`; when it fails, [`ShardApp::connect_failed`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Connect {
    pub tag: u64,
    pub peer: std::net::SocketAddr,
    /// TLS server name (SNI, and the name the certificate is checked against).
    pub server_name: Option<String>,
}

/// Application state owned by one core, shared by that core's connections.
pub trait ShardApp {
    /// A connection finished its handshake with `version`.
    fn new_connection(&mut self, conn: ConnHandle, version: Version) -> Box<dyn ConnApp>;
    /// A connection whose WebTransport session was accepted, speaking `version` inside it
    /// (see [`AppFactory::new_webtransport`]).
    fn new_webtransport(
        &mut self,
        conn: ConnHandle,
        version: Version,
        _wt: WebTransportConn,
    ) -> Box<dyn ConnApp> {
        self.new_connection(conn, version)
    }
    /// The core's clock reading for the turn that starts (the only one it takes).
    fn begin_turn(&mut self, _now: std::time::Instant) {}
    /// How long the oldest datagram read this turn waited in the socket before the core read
    /// it (zero when nothing was read, or the kernel gives no receive timestamps); told every
    /// turn, before the turn's connections are serviced.
    fn set_receive_lag(&mut self, _lag: std::time::Duration) {}
    /// The core's busy share of the last second, in percent (`load::LoadMeter`); told when
    /// a window completes, at the start of a turn.
    fn set_load(&mut self, _busy_pct: u8) {}
    /// This core's mesh queues by destination core (index: core), at the start of every turn:
    /// whether the queue is backed up (its messages wait in this core's memory),
    /// and the bytes handed to that core that it has not taken yet.
    fn set_mesh_backlog(&mut self, _congested: &[bool], _bytes: &[usize]) {}
    /// A connection this core opened for [`Connect`] `tag` finished its handshake.
    fn new_outbound(&mut self, conn: ConnHandle, version: Version, _tag: u64) -> Box<dyn ConnApp> {
        self.new_connection(conn, version)
    }
    /// A [`Connect`] failed before its handshake completed (no route, refused, timed out,
    /// certificate not trusted), or the core has no client configuration.
    fn connect_failed(&mut self, _tag: u64, _why: &str) {}
    /// A message another core's application sent (`from` is that core).
    fn on_message(&mut self, from: usize, msg: AppMessage);
    /// Called once per turn after connections were serviced, and when its deadline passes.
    /// `now` is the turn's clock reading.
    fn poll(&mut self, now: std::time::Instant, out: &mut ShardOutput);
    /// The server is shutting down gracefully: tell every session (a MoQT relay sends GOAWAY
    /// with `timeout`). The core keeps serving until the sessions close or `timeout` passes,
    /// then closes what is left with GOAWAY_TIMEOUT.
    fn drain(&mut self, _now: std::time::Instant, _timeout: std::time::Duration) {}
}

/// Reads and discards everything; keeps connections open until they idle out. What `make run`
/// serves until the MoQT session exists.
#[derive(Debug, Default, Clone, Copy)]
pub struct DiscardApp;

impl ConnApp for DiscardApp {
    fn on_io(&mut self, conn: &mut QuicConnection) {
        let mut buf = [0u8; 4096];
        while let Some(id) = conn.stream_readable_next() {
            while let Ok((_, _fin)) = conn.stream_recv(id, &mut buf) {}
        }
        while conn.dgram_recv(&mut buf).is_ok() {}
    }
}

impl AppFactory for DiscardApp {
    fn new_connection(&self, _shard: ShardId, _version: Version) -> Box<dyn ConnApp> {
        Box::new(DiscardApp)
    }
}

/// Echoes every stream back on the same stream, FIN included (tests).
#[derive(Debug, Default)]
pub struct EchoApp {
    pending: std::collections::HashMap<u64, (Vec<u8>, bool)>,
}

impl ConnApp for EchoApp {
    fn on_io(&mut self, conn: &mut QuicConnection) {
        let mut buf = [0u8; 16384];
        while let Some(id) = conn.stream_readable_next() {
            while let Ok((n, fin)) = conn.stream_recv(id, &mut buf) {
                let entry = self.pending.entry(id).or_default();
                entry.0.extend_from_slice(&buf[..n]);
                entry.1 |= fin;
            }
        }
        self.pending.retain(|&id, (data, fin)| {
            match conn.stream_send(id, data, *fin) {
                Ok(n) => {
                    data.drain(..n);
                }
                Err(quiche::Error::Done) => {}
                Err(_) => return false,
            }
            !data.is_empty()
        });
    }
}

/// Factory for [`EchoApp`].
#[derive(Debug, Default, Clone, Copy)]
pub struct EchoFactory;

impl AppFactory for EchoFactory {
    fn new_connection(&self, _shard: ShardId, _version: Version) -> Box<dyn ConnApp> {
        Box::new(EchoApp::default())
    }
}
