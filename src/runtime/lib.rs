//! `runtime`: the thread-per-core QUIC server. One glommio executor per core, each with its
//! own SO_REUSEPORT UDP socket, its own quiche connections (which never leave it), its own
//! timers, and its end of the cross-core mesh. This is the only layer that touches glommio,
//! sockets and crossbeam, and the one that owns quiche's connections and drives their timers
//! (the `moqt` crate above writes into them); it makes no protocol decisions (those belong to the
//! application it drives, [`AppFactory`]: the relay, or a test or benchmark application), and
//! knows a connection only by the ALPN it chose.
//!
//! # One core's turn
//!
//! Read the clock once; drain the socket with `recvmmsg` (16 datagrams a call, GRO
//! super-datagrams split by segment size, 256 a turn at most; a short read ends the drain); route
//! each datagram; drain the mesh (256 messages a turn); fire due timers; run the application of
//! every connection touched and build its output as GSO trains into one per-core batch, sent with
//! one `sendmmsg` per 64 trains; flush the mesh (one doorbell ring per destination); then sleep
//! until the socket is readable, the doorbell rings or the earliest timer is due. The socket and
//! doorbell waits are io_uring operations kept armed across turns (the io_uring share in
//! `perf record` fell from 13% to 7%). A second clock reading just before waiting feeds only the
//! load meter (`load.rs`), which reports each second's busy share to the application.
//!
//! Receive coalescing (`recv_coalesce_us`, 500 µs): a fanned-out object comes back as one ACK per
//! subscriber, and a core that woke for each paid a whole turn per ACK. While the last second's
//! datagram rate means a hold gathers four or more, a turn that read datagrams is followed by a
//! plain sleep until `recv_coalesce_us` after it began; a turn that read nothing goes back to the
//! event-driven wait. Cost: at most that much latency; timers are not delayed.
//!
//! Routing: a packet whose Destination Connection ID names another core (byte 0 of our 16-byte
//! CIDs) goes over the mesh, except Initials. An unknown Initial is accepted or answered with a
//! Retry (`RetryPolicy`); an unknown short-header packet gets a stateless reset (RFC 9000 §10.3,
//! token HMAC-SHA256 of the CID); anything else is dropped and counted.
//!
//! # UDP and steering
//!
//! glommio's `UdpSocket` has no control messages, so neither GSO nor GRO goes through it: the
//! core awaits a one-byte MSG_PEEK receive for readiness, then drains the non-blocking socket
//! with `recvmmsg` and writes GSO trains with `sendmsg` itself. On `EAGAIN` a train goes datagram
//! by datagram through glommio's `send_to`; on `EIO`/`EINVAL` GSO is turned off for good. Cores
//! bind in shard order, so a socket's index in the reuseport group is its shard; a classic BPF
//! program returns the first DCID byte for short-header packets and an out-of-range index for
//! long-header ones (the kernel's 4-tuple hash then keeps a handshake on one core). Without the
//! program the receiving core hands the packet over the mesh.
//!
//! # Timers and pacing
//!
//! One binary heap per core, at most one live entry per connection (the earliest of quiche's
//! timeout, its pacing release and its setup deadline); an entry whose deadline moved is skipped
//! when popped, and a connection whose quiche timer moved later is re-queued, not serviced.
//! Nothing scans all connections. quiche's `SendInfo.at` is honoured at 1 ms granularity
//! (`PACING_GRANULARITY`): packets released within it go now; the first one released later goes
//! too, and the connection waits until its release time. A packet that looks paced by the turn's
//! reading is judged again by a fresh reading, since a long fan-out turn made connections look
//! paced when quiche asked for nothing. Trains are not cut at `send_quantum` (with bbr2 two
//! packets; every train leaves in the same `sendmmsg`, so cutting paced nothing). Send coalescing
//! (`send_coalesce_us`, off by default) holds a connection's output while the core is at least
//! half busy so that several turns leave as one train: CPU per byte against latency.
//!
//! # The mesh
//!
//! One bounded `crossbeam_queue::ArrayQueue` per ordered (source, destination) pair: FIFO, single
//! producer, single consumer. Each core has a doorbell (a Unix stream pair) and a `rung` flag; one
//! flush rings each marked destination at most once, and the consumer clears its flag before
//! draining, so a message pushed after a drain always rings. A full queue drops datagrams
//! (counted) but never application messages: they wait in the sender's per-destination overflow,
//! in order. The bytes handed over and not yet taken are counted per pair
//! (`MeshEndpoint::queued_bytes`) so the application can bound them.
//!
//! # Connections out, shutdown, reload, placement
//!
//! The application asks for connections (`ShardOutput::connect`); they leave from the listen
//! socket with a CID carrying the core, tagged with 7 random bytes and 8 of HMAC
//! (`ResetKey::outbound_cid`) so a core that receives the parent's Initial hands it to the
//! right core. The handshake's end is `ShardApp::new_outbound`, a failure
//! `ShardApp::connect_failed`. Shutdown: stop accepting, close every connection with NO_ERROR,
//! keep turning until the closes are sent or 3 s pass. `ServerHandle::tls_reloader` loads the
//! PEM files again (SIGHUP, or a 2 s file watcher) and publishes them with a generation number
//! each core checks once per turn; a bad file keeps the old identity. Executor i is pinned to
//! the i-th CPU of the process's affinity mask. glommio's locked memory per executor is
//! `min(1 MiB, RLIMIT_MEMLOCK / 2 / cores)`, at least 64 KiB; when io_uring cannot start, `start`
//! says so. A client whose address changes twice loses its connection: quiche keeps two paths
//! (`active_connection_id_limit`) and the runtime does not retire old CIDs yet.

#![warn(missing_docs, unreachable_pub)]

pub mod app;
pub mod cid;
pub mod load;
pub mod mesh;
pub mod retry;
mod server;
mod shard;
mod stats;
mod stream_tls;
mod tcp;
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
pub use tcp::{StreamAcceptor, StreamHandoff, StreamRequest};
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
    Files {
        /// The certificate chain (PEM).
        cert: PathBuf,
        /// The private key (PEM).
        key: PathBuf,
    },
    /// A self-signed ECDSA P-256 certificate for `localhost` and the listen address, valid for
    /// 14 days, generated at start.
    SelfSigned,
}

/// Everything the runtime needs (the `moq-edge` binary builds it from its configuration).
#[derive(Debug, Clone)]
pub struct RuntimeConfig {
    /// The UDP address every core's socket binds (SO_REUSEPORT).
    pub listen: SocketAddr,
    /// Executors (and sockets). Each is pinned to one CPU when `pin` is set.
    pub cores: usize,
    /// Pin each executor to one CPU.
    pub pin: bool,
    /// The TLS identity.
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
    /// When new connections must prove their address (stateless retry).
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
