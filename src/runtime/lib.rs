//! `runtime`: the thread-per-core QUIC server. One glommio executor per core, each with its
//! own SO_REUSEPORT UDP socket, its own quiche connections (which never leave it), its own
//! timers, and its end of the cross-core mesh. This is the only layer that touches glommio,
//! sockets and crossbeam, and the one that owns quiche's connections and drives their timers
//! (the `moqt` crate above writes into them); it makes no protocol decisions (those belong to the
//! application it drives, [`AppFactory`]: the relay, or a test or benchmark application), and
//! knows a connection only by the ALPN it chose.

pub mod app;
pub mod cid;
pub mod load;
pub mod mesh;
pub mod retry;
mod server;
mod shard;
mod stats;
mod stream_tls;
mod streams;
pub mod testing;
pub mod tls;
mod transport;
pub mod udp;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

pub use app::{AppFactory, ConnApp, ConnHandle, Connect, ShardApp, ShardOutput};
pub use cid::ShardId;
pub use retry::RetryPolicy;
pub use server::{start, ServerHandle, ShutdownTrigger, TlsReloader};
pub use stats::{ShardReport, ShardStats};
pub use stream_tls::StreamTls;
pub use streams::{StreamAcceptor, StreamHandoff, StreamRequest};
pub use transport::Transport;

/// Stream data handed to quiche as shared byte slices rather than copied into buffers of its
/// own: an application may give many connections the same bytes (the relay's `Pump` writes
/// each object with `stream_send_zc`), so a fan-out to N subscribers costs N
/// reference counts instead of N allocations and copies, and the bytes quiche keeps for
/// retransmission are the object's, once (ARCHITECTURE.md, "How an object travels").
#[derive(Debug, Clone, Copy, Default)]
pub struct SharedBufs;

impl quiche::BufFactory for SharedBufs {
    type Buf = bytes::Bytes;
    type DgramBuf = Vec<u8>;

    fn buf_from_slice(buf: &[u8]) -> bytes::Bytes {
        bytes::Bytes::copy_from_slice(buf)
    }

    fn dgram_buf_from_slice(buf: &[u8]) -> Vec<u8> {
        buf.to_vec()
    }
}

/// A QUIC connection of this crate (server, upstream link or client): quiche's, with
/// [`SharedBufs`].
pub type QuicConnection = quiche::Connection<SharedBufs>;

/// Where the TLS identity comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TlsSource {
    /// PEM certificate chain and private key files.
    Files { cert: PathBuf, key: PathBuf },
    /// A self-signed ECDSA P-256 certificate for `localhost` and the listen address, valid for
    /// 14 days, generated at start.
    SelfSigned,
}

/// Everything the runtime needs (the `moq-edge` binary builds it from its configuration).
#[derive(Debug, Clone)]
pub struct RuntimeConfig {
    pub listen: SocketAddr,
    /// Executors (and sockets). Each is pinned to one CPU when `pin` is set.
    pub cores: usize,
    pub pin: bool,
    pub tls: TlsSource,
    /// QUIC idle timeout.
    pub idle_timeout: Duration,
    /// An accepted connection whose application has not completed its own setup this long
    /// after it was accepted is closed (the application is told the deadline).
    pub setup_timeout: Duration,
    /// Connections one core accepts before refusing new ones.
    pub max_connections_per_core: usize,
    /// Admission under load: a core busier than this percentage of the last second
    /// (`load::LoadMeter`) refuses new connections and tells its application
    /// ([`app::ShardApp::set_load`]); 0 (or 100): never.
    pub admission_busy_pct: u8,
    /// quiche congestion control name: "bbr2" (default), "cubic", "reno", ...
    pub congestion_control: String,
    /// Batch sends with UDP_SEGMENT (falls back to plain sends when the kernel refuses).
    pub gso: bool,
    /// While the core was busy at least `coalesce_busy_pct` of the last second, a
    /// connection's packets wait up to this long after it first had something to send, so
    /// that several leave in one GSO train (fewer sends at the cost of this much delay);
    /// zero: every turn sends what it has.
    pub send_coalesce: Duration,
    /// See `send_coalesce` (default 50; 0: whenever `send_coalesce` is set).
    pub coalesce_busy_pct: u8,
    /// Receive coalescing: while the last second brought datagrams fast enough that this long
    /// gathers four or more on average, a turn that read any is followed by a sleep until this
    /// long after it began (none if it took that long; until the next timer, if sooner)
    /// instead of a wait for the socket, so the next turn reads, services and sends for many
    /// datagrams at once rather than one at a time (ARCHITECTURE.md, "One core's turn").
    /// Zero: every datagram wakes the core at once.
    pub recv_coalesce: Duration,
    /// Attach the reuseport BPF program that steers short-header packets to their core.
    pub steering: bool,
    pub retry: RetryPolicy,
    /// Key for stateless reset tokens and retry tokens; random when `None`. A fleet that shares
    /// it can reset connections of a restarted node.
    pub secret: Option<[u8; 32]>,
    /// How long shutdown waits for connections to close.
    pub drain_timeout: Duration,
    /// Graceful shutdown: how long sessions are served after the application was asked to
    /// drain ([`app::ShardApp::drain`]) before the rest are closed with
    /// [`app::ShardApp::drain_close`]. Zero: close at once.
    pub drain_grace: Duration,
    /// How connections this server opens (to upstream servers) check the peer's certificate.
    pub upstream_tls: UpstreamTls,
    /// When set, every QUIC connection writes a qlog file (`<dir>/<connection id>.sqlog`).
    pub qlog_dir: Option<PathBuf>,
}

/// Certificate checks of outbound connections.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UpstreamTls {
    /// PEM bundle of trusted CAs; `None`: the system's default trust store.
    pub ca: Option<PathBuf>,
    /// Skip the check (labs and tests only).
    pub insecure: bool,
}

impl RuntimeConfig {
    /// Defaults for everything but the address and core count.
    pub fn new(listen: SocketAddr, cores: usize) -> Self {
        RuntimeConfig {
            listen,
            cores,
            pin: true,
            tls: TlsSource::SelfSigned,
            idle_timeout: Duration::from_secs(30),
            setup_timeout: Duration::from_secs(5),
            max_connections_per_core: 10_000,
            admission_busy_pct: 0,
            congestion_control: "bbr2".to_string(),
            gso: true,
            send_coalesce: Duration::ZERO,
            coalesce_busy_pct: 50,
            recv_coalesce: Duration::ZERO,
            steering: true,
            retry: RetryPolicy::Auto { pending_handshakes: 1024 },
            secret: None,
            drain_timeout: Duration::from_secs(3),
            drain_grace: Duration::ZERO,
            upstream_tls: UpstreamTls::default(),
            qlog_dir: None,
        }
    }
}
