//! The seam between the runtime and what runs on a connection. The runtime owns the quiche
//! connection and calls the application after every batch of I/O; the application reads and
//! writes streams and datagrams. The runtime knows connections by the ALPN they chose, and
//! nothing of what they speak: the MoQT relay (and WebTransport under it) is one application
//! above it; tests and benchmarks bring their own.

use crate::QuicConnection;
use crate::ShardId;

/// One connection's application, living on the connection's core.
pub trait ConnApp {
    /// After packets for this connection were processed (and once when the handshake
    /// completes): read readable streams and datagrams, write what is due. Called on the
    /// connection's core only.
    fn on_io(&mut self, conn: &mut QuicConnection);

    /// The connection closed (by either side or by idle timeout). Default: nothing.
    fn on_closed(&mut self, _conn: &QuicConnection) {}

    /// `on_io` for a connection over TCP ([`crate::StreamHandoff`]): its QMux state instead of
    /// quiche's. Default: nothing (an application that serves QUIC only).
    fn on_stream_io(&mut self, _conn: &mut qmux::Connection) {}

    /// `on_closed` for a connection over TCP. Default: nothing.
    fn on_stream_closed(&mut self, _conn: &qmux::Connection) {}

    /// An accepted connection's setup deadline (`RuntimeConfig::setup_timeout` after it was
    /// accepted), given once when the application is made; the core calls `on_io` once more
    /// when it passes, and the application closes the connection if its setup is not done.
    /// Default: ignored.
    fn set_setup_deadline(&mut self, _at: std::time::Instant) {}
}

/// The application on every core: shared by the cores, it builds each core's [`ShardApp`] and
/// names the ALPNs the server speaks.
pub trait AppFactory: Send + Sync + 'static {
    /// Each core's application state.
    type Shard: ShardApp;

    /// The ALPNs the server offers in TLS, in order of preference. A connection reaches the
    /// application only once its handshake chose one of them.
    fn alpns(&self) -> Vec<String>;

    /// The ALPNs offered by the connections the application opens ([`Connect`]). Default:
    /// none (an application that opens no connections).
    fn outbound_alpns(&self) -> Vec<String> {
        Vec::new()
    }

    /// Builds core `shard`'s application state, on that core (of `cores`).
    fn shard_app(&self, shard: ShardId, cores: usize) -> Self::Shard;
}

/// A connection as its core names it to the application: slot and generation, so a handle
/// to a closed connection never reaches the slot's next tenant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConnHandle(pub u64);

/// What a [`ShardApp`] asks of its core after a turn; `M` is its cross-core message.
pub struct ShardOutput<M> {
    /// Messages for other cores' applications, `(core, message, bytes)`, in order per core.
    /// Never dropped by the mesh. `bytes` is what the message weighs (the payloads it holds,
    /// and itself): the mesh counts it until the other core takes the message
    /// ([`ShardApp::set_mesh_backlog`]).
    pub messages: Vec<(usize, M, usize)>,
    /// Connections whose output changed outside their own `on_io` (fan-out): the core runs
    /// their `on_io` again this turn.
    pub wake: Vec<ConnHandle>,
    /// The application's earliest deadline ([`ShardApp::poll`] is called again by then).
    pub deadline: Option<std::time::Instant>,
    /// Connections to open from this core (to upstream servers).
    pub connect: Vec<Connect>,
}

impl<M> Default for ShardOutput<M> {
    fn default() -> Self {
        ShardOutput { messages: Vec::new(), wake: Vec::new(), deadline: None, connect: Vec::new() }
    }
}

/// A QUIC connection the application asks its core to open. When the handshake completes the
/// core calls [`ShardApp::new_outbound`] with `tag`; when it fails, [`ShardApp::connect_failed`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Connect {
    /// The application's name for it, given back with the connection (`new_outbound`).
    pub tag: u64,
    /// The address to connect to.
    pub peer: std::net::SocketAddr,
    /// TLS server name (SNI, and the name the certificate is checked against).
    pub server_name: Option<String>,
}

/// Application state owned by one core, shared by that core's connections. It makes each
/// connection's [`ConnApp`], and talks to the other cores' with messages of type `Msg`, carried
/// by the mesh as they are (no boxing, no downcast).
pub trait ShardApp: 'static {
    /// What this application sends to its counterparts on other cores.
    type Msg: Send + 'static;

    /// An accepted connection finished its handshake with ALPN `alpn` (one of
    /// [`AppFactory::alpns`]).
    fn new_connection(&mut self, conn: ConnHandle, alpn: &[u8]) -> Box<dyn ConnApp>;
    /// A connection over TCP ([`crate::StreamHandoff`]) was handed to this core; `request`
    /// names its application protocol (one of [`AppFactory::alpns`]), authority and path.
    /// Default: as [`ShardApp::new_connection`] with that protocol.
    fn new_stream_connection(
        &mut self,
        conn: ConnHandle,
        request: &crate::StreamRequest,
    ) -> Box<dyn ConnApp> {
        self.new_connection(conn, request.alpn.as_bytes())
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
    /// A connection this core opened for [`Connect`] `tag` finished its handshake with ALPN
    /// `alpn` (one of [`AppFactory::outbound_alpns`]).
    fn new_outbound(&mut self, conn: ConnHandle, alpn: &[u8], _tag: u64) -> Box<dyn ConnApp> {
        self.new_connection(conn, alpn)
    }
    /// A [`Connect`] failed before its handshake completed (no route, refused, timed out,
    /// certificate not trusted), or the core has no client configuration.
    fn connect_failed(&mut self, _tag: u64, _why: &str) {}
    /// A message another core's application sent (`from` is that core). Default: dropped.
    fn on_message(&mut self, _from: usize, _msg: Self::Msg) {}
    /// Called once per turn after connections were serviced, and when its deadline passes.
    /// `now` is the turn's clock reading. Default: nothing to do.
    fn poll(&mut self, _now: std::time::Instant, _out: &mut ShardOutput<Self::Msg>) {}
    /// The server is shutting down gracefully: tell every session (a relay asks its peers to
    /// move elsewhere within `timeout`). The core keeps serving until the sessions close or `timeout` passes,
    /// then closes what is left with [`ShardApp::drain_close`].
    fn drain(&mut self, _now: std::time::Instant, _timeout: std::time::Duration) {}
    /// The application error code and reason that close the connections left when a drain's
    /// timeout passes. Default: 0, "shutting down".
    fn drain_close(&self) -> (u64, &'static [u8]) {
        (0x0, b"shutting down")
    }
}

/// Reads and discards everything; keeps connections open until they idle out.
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

/// An application with no per-core state: each connection's [`ConnApp`] is made from its ALPN
/// alone (tests, benchmarks). Serves `alpns`; opens no connections.
pub struct PerConnection<F> {
    alpns: Vec<String>,
    make: std::sync::Arc<F>,
}

impl<F> Clone for PerConnection<F> {
    fn clone(&self) -> Self {
        PerConnection { alpns: self.alpns.clone(), make: self.make.clone() }
    }
}

impl<F: Fn(&[u8]) -> Box<dyn ConnApp> + Send + Sync + 'static> PerConnection<F> {
    /// Offers `alpns`; `make` makes each connection's application from its ALPN.
    pub fn new(alpns: Vec<String>, make: F) -> Self {
        PerConnection { alpns, make: std::sync::Arc::new(make) }
    }
}

impl<F: Fn(&[u8]) -> Box<dyn ConnApp> + Send + Sync + 'static> AppFactory for PerConnection<F> {
    type Shard = PerConnection<F>;

    fn alpns(&self) -> Vec<String> {
        self.alpns.clone()
    }

    fn shard_app(&self, _shard: ShardId, _cores: usize) -> Self {
        self.clone()
    }
}

impl<F: Fn(&[u8]) -> Box<dyn ConnApp> + Send + Sync + 'static> ShardApp for PerConnection<F> {
    type Msg = ();

    fn new_connection(&mut self, _conn: ConnHandle, alpn: &[u8]) -> Box<dyn ConnApp> {
        (self.make)(alpn)
    }
}
