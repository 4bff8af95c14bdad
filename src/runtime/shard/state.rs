//! The parts of a core's state, by concern: its UDP socket, what wakes it, its QUIC
//! configurations, what it needs to accept a connection, its connection table, its
//! application, its side of the mesh, and its load (which decides admission and coalescing).
//! Each is owned by the [`Shard`](super::Shard); the turn's code in the other files reaches
//! them by name.

use super::*;

/// The core's UDP socket.
pub(super) struct UdpPort {
    pub socket: Rc<glommio::net::UdpSocket>,
    /// Its descriptor, for the system calls glommio does not make (GSO trains, GRO batches).
    pub fd: RawFd,
    /// The address it is bound to.
    pub local: SocketAddr,
}

/// What ends a core's wait besides its timer.
pub(super) struct Wakeups {
    /// The wait for the socket to become readable. It lives across turns: a turn that the
    /// timer or the doorbell ends leaves it armed instead of cancelling and re-arming it.
    pub readable: Option<Pending<()>>,
    /// The doorbell while no wait on it is armed, and the armed wait (which owns it).
    pub doorbell: Option<Doorbell>,
    pub ringing: Option<Pending<(Doorbell, std::io::Result<()>)>>,
}

/// The QUIC configurations of the core's connections, and the TLS identity they carry.
pub(super) struct QuicSetup {
    /// For connections this core accepts.
    pub server: quiche::Config,
    /// For connections this core opens (to upstream relays).
    pub client: quiche::Config,
    /// A reloaded TLS identity, and the generation this core uses.
    pub swap: Arc<crate::server::TlsSwap>,
    pub generation: u64,
}

/// What a new connection needs: connection IDs, the stateless reset key, retry tokens.
pub(super) struct Handshakes {
    pub cids: CidGenerator,
    pub rng: ring::rand::SystemRandom,
    pub reset: ResetKey,
    pub retry_tokens: RetryTokens,
}

/// The core's connections: a slab of them, by connection ID.
pub(super) struct ConnTable {
    /// Boxed: a connection is large (quiche's state), and growing the slab then moves
    /// pointers, not connections.
    pub conns: Vec<Option<Box<Conn>>>,
    /// Free slots of `conns`.
    pub free: Vec<usize>,
    pub by_cid: HashMap<ConnectionId<'static>, usize>,
    /// The generation of the next connection (a handle names its slot and generation).
    pub next_gen: u32,
}

/// The per-core application and what it asked for.
pub(super) struct AppSide<A: ShardApp> {
    pub shard: A,
    pub out: ShardOutput<A::Msg>,
    pub deadline: Option<Instant>,
}

/// This core's side of the mesh between cores.
pub(super) struct MeshSide<M> {
    pub endpoint: MeshEndpoint<MeshMsg<M>>,
    /// Reused buffer for one turn's mesh messages.
    pub inbound: Vec<(usize, MeshMsg<M>)>,
    /// Per destination core: this core's queue to it is backed up past [`MESH_CONGESTED`]
    /// messages in overflow (told to the application every turn it changes).
    pub congested: Vec<bool>,
    /// Bytes queued toward each core (buffer for `note_mesh_backlog`).
    pub bytes: Vec<usize>,
}

/// How busy the core is, and what follows from it.
pub(super) struct LoadState {
    /// How busy this core is (ARCHITECTURE.md, "Admission under load").
    pub meter: crate::load::LoadMeter,
    /// Over the admission threshold in the last complete window: new connections refused.
    pub busy: bool,
    /// The kernel's receive time of the oldest datagram read this turn (0: none).
    pub oldest_rx_ns: u64,
    /// Whether `RuntimeConfig::send_coalesce` applies now (the core was busy).
    pub coalescing: bool,
    /// Whether `RuntimeConfig::recv_coalesce` applies now (the last second's datagram rate:
    /// `holds_gather_a_batch`).
    pub recv_holding: bool,
    /// Datagrams read in the current load window, and in the current turn.
    pub window_datagrams: u64,
    pub turn_datagrams: usize,
}
