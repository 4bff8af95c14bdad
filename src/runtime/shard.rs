//! One core's event loop (ARCHITECTURE.md, "One core's turn"): receive a batch → route by
//! connection ID (another core's packet goes over the mesh, an unknown Initial is accepted, an unknown short-header
//! packet gets a stateless reset) → feed quiche → run the connection's application → drain the
//! mesh → fire due timers → write GSO trains → arm one timer for the earliest deadline → wait
//! for the socket, the doorbell or that timer. The clock is read once per turn.

use crate::QuicConnection;
use ahash::HashMap;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::future::Future;
use std::net::SocketAddr;
use std::os::unix::io::{AsRawFd, RawFd};
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use futures_lite::future;
use quiche::ConnectionId;
use tracing::{debug, info, warn};

use super::app::{AppFactory, ConnApp, ConnHandle, Connect, ShardApp, ShardOutput};
use super::cid::{self, CidGenerator, ResetKey, ShardId, CID_LEN};
use super::mesh::{Doorbell, MeshEndpoint};
use super::retry::RetryTokens;
use super::stats::{ShardReport, ShardStats};
use super::udp::{self, RecvBatch, SendBatch, Train, MAX_GSO_SEGMENTS};
use super::{RetryPolicy, RuntimeConfig};

mod conns;
mod output;
mod state;
mod tcp;

use state::{AppSide, ConnTable, Handshakes, LoadState, MeshSide, QuicSetup, UdpPort, Wakeups};

/// A receive lag beyond this is taken for a wall-clock step, not a queue (see
/// `Shard::note_receive_lag`).
const MAX_RECEIVE_LAG: Duration = Duration::from_secs(60);

/// Where a core is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Serving,
    /// Shutdown asked; the application told its sessions; serving until `until`.
    Draining {
        until: Instant,
    },
    /// Every connection was closed; waiting for the closes to go out, until `until`.
    Closing {
        until: Instant,
    },
}

impl Phase {
    fn deadline(self) -> Option<Instant> {
        match self {
            Phase::Serving => None,
            Phase::Draining { until } | Phase::Closing { until } => Some(until),
        }
    }
}

/// A wait kept across turns.
type Pending<T> = Pin<Box<dyn Future<Output = T>>>;

/// What ended a core's wait.
enum Woke {
    Socket,
    Bell((Doorbell, std::io::Result<()>)),
    Timer,
    Tcp,
}

/// A QUIC datagram handed from the core that received it to the core that owns its connection.
pub(crate) struct Forwarded {
    pub data: Vec<u8>,
    pub from: SocketAddr,
}

/// What travels between cores: QUIC packets that arrived at the wrong core, and the
/// application's own messages, `M` (the relay's).
pub(crate) enum MeshMsg<M> {
    Packet(Forwarded),
    /// With what it weighs in bytes (the application says: [`ShardOutput::messages`]).
    App(M, usize),
}

impl<M> MeshMsg<M> {
    /// Its weight in the mesh's byte count ([`super::mesh::Mesh::with_weight`]).
    pub(crate) fn weight(&self) -> usize {
        match self {
            MeshMsg::Packet(p) => p.data.len(),
            MeshMsg::App(_, bytes) => *bytes,
        }
    }
}

/// Datagrams handled per turn before the loop lets the other stages run.
const RECV_BUDGET: usize = 256;
/// Receive coalescing holds only while a hold gathers at least this many datagrams on
/// average (by the last second's rate): below it, a sleep would cost about what it saves.
const RECV_COALESCE_MIN_BATCH: u64 = 4;
/// Mesh messages handled per turn.
const MESH_BUDGET: usize = 256;
/// Messages waiting in overflow for one destination (beyond its full queue) past which the
/// destination counts as backed up (`ShardApp::set_mesh_backlog`).
const MESH_CONGESTED: usize = 1024;
/// Largest QUIC packet we write (fits a 1500-byte MTU path with IPv6 and UDP headers).
const MAX_DATAGRAM: usize = 1452;
/// Trains are sent once this many bytes are queued (or [`udp::SEND_BATCH`] trains, or the
/// turn's connections are all written). The buffer holds one more whole train beyond it.
const BATCH_FLUSH_BYTES: usize = 256 * 1024;
/// While draining, how often a core checks whether every core's connections are gone.
const DRAIN_POLL: Duration = Duration::from_millis(100);
/// A packet whose release time is this close is sent now.
const PACING_GRANULARITY: Duration = Duration::from_millis(1);

struct Conn {
    quic: QuicConnection,
    app: Option<Box<dyn ConnApp>>,
    /// Every DCID under which packets for this connection arrive (ours, and the client's
    /// original DCID for retransmitted Initials), to unregister on close.
    cids: Vec<ConnectionId<'static>>,
    /// The deadline currently in the timer heap for this connection.
    scheduled: Option<Instant>,
    /// Do not send before this instant (pacing).
    paced_until: Option<Instant>,
    /// Send coalescing (`RuntimeConfig::send_coalesce`): what this connection has to send
    /// waits until then.
    flush_at: Option<Instant>,
    handshake_counted: bool,
    dirty: bool,
    /// Generation of this slot, part of the connection's [`ConnHandle`].
    gen: u32,
    /// A connection this core opened ([`Connect`]): the application's tag.
    outbound: Option<u64>,
    /// An accepted connection: by when its application must have completed its own setup
    /// (`RuntimeConfig::setup_timeout` after the turn that accepted it); cleared once passed.
    setup_deadline: Option<Instant>,
    /// `setup_deadline` was set (or the connection is outbound and has none).
    setup_armed: bool,
}

impl Conn {
    /// Its earliest deadline: quiche's timer, pacing, the setup timeout or a held send.
    fn next_deadline(&self) -> Option<Instant> {
        [self.quic.timeout_instant(), self.paced_until, self.setup_deadline, self.flush_at]
            .into_iter()
            .flatten()
            .min()
    }
}

/// Everything one core owns (its parts: `shard/state.rs`).
pub(crate) struct Shard<A: ShardApp> {
    id: ShardId,
    udp: UdpPort,
    wake: Wakeups,
    quic: QuicSetup,
    rc: RuntimeConfig,
    handshakes: Handshakes,
    table: ConnTable,
    timers: BinaryHeap<Reverse<(Instant, usize)>>,
    /// Connections with something to write this turn.
    dirty: Vec<usize>,
    mesh: MeshSide<A::Msg>,
    app: AppSide<A>,
    load: LoadState,
    /// Send with GSO (turned off if the kernel refuses it).
    gso: bool,
    stats: Arc<[ShardStats]>,
    recv: RecvBatch,
    /// This turn's outgoing trains, all connections together.
    batch: SendBatch,
    shutdown: Arc<AtomicBool>,
    /// Connections over TCP handed to this core, and those it serves.
    handoff: Arc<crossbeam_queue::ArrayQueue<crate::StreamHandoff>>,
    tcp: tcp::TcpConns,
}

/// What `Shard::new` needs beyond the config.
pub(crate) struct ShardParts<F: AppFactory> {
    pub id: ShardId,
    pub socket: socket2::Socket,
    pub quic_config: quiche::Config,
    pub client_config: quiche::Config,
    pub tls_swap: Arc<super::server::TlsSwap>,
    pub mesh: MeshEndpoint<MeshMsg<<F::Shard as ShardApp>::Msg>>,
    pub app: Arc<F>,
    pub secret: [u8; 32],
    pub stats: Arc<[ShardStats]>,
    pub shutdown: Arc<AtomicBool>,
    pub gro: bool,
    pub handoff: Arc<crossbeam_queue::ArrayQueue<crate::StreamHandoff>>,
}

impl<A: ShardApp> Shard<A> {
    /// Builds the shard inside its executor (glommio objects are thread-local).
    pub(crate) fn new<F: AppFactory<Shard = A>>(
        rc: &RuntimeConfig,
        mut parts: ShardParts<F>,
    ) -> std::io::Result<Self> {
        let local = parts.socket.local_addr()?.as_socket().unwrap_or(rc.listen);
        let fd = parts.socket.as_raw_fd();
        let socket = Rc::new(glommio::net::UdpSocket::from(parts.socket));
        let read_end =
            parts.mesh.take_doorbell().ok_or_else(|| std::io::Error::other("mesh doorbell already taken"))?;
        let doorbell = Doorbell::new(read_end)?;
        debug!(shard = parts.id.0, gro = parts.gro, "shard socket ready");
        let shard_app = parts.app.shard_app(parts.id, rc.cores);
        Ok(Shard {
            id: parts.id,
            udp: UdpPort { socket, fd, local },
            wake: Wakeups { readable: None, doorbell: Some(doorbell), ringing: None },
            quic: QuicSetup {
                server: parts.quic_config,
                client: parts.client_config,
                swap: parts.tls_swap,
                generation: 0,
            },
            rc: rc.clone(),
            handshakes: Handshakes {
                cids: CidGenerator::new(),
                rng: ring::rand::SystemRandom::new(),
                reset: ResetKey::new(&parts.secret),
                retry_tokens: RetryTokens::new(&parts.secret),
            },
            table: ConnTable { conns: Vec::new(), free: Vec::new(), by_cid: HashMap::default(), next_gen: 0 },
            timers: BinaryHeap::new(),
            dirty: Vec::new(),
            mesh: MeshSide {
                endpoint: parts.mesh,
                inbound: Vec::with_capacity(MESH_BUDGET),
                congested: Vec::new(),
                bytes: Vec::new(),
            },
            app: AppSide { shard: shard_app, out: ShardOutput::default(), deadline: None },
            load: LoadState {
                meter: super::load::LoadMeter::new(Instant::now(), super::load::LOAD_WINDOW),
                busy: false,
                oldest_rx_ns: 0,
                coalescing: !rc.send_coalesce.is_zero() && rc.coalesce_busy_pct == 0,
                recv_holding: false,
                window_datagrams: 0,
                turn_datagrams: 0,
            },
            gso: rc.gso,
            stats: parts.stats,
            recv: RecvBatch::new(),
            batch: SendBatch::new(BATCH_FLUSH_BYTES + MAX_GSO_SEGMENTS * MAX_DATAGRAM),
            shutdown: parts.shutdown,
            handoff: parts.handoff,
            tcp: tcp::TcpConns::default(),
        })
    }

    /// Takes a reloaded TLS identity for new connections (see `TlsReloader`).
    fn reload_tls(&mut self) {
        let generation = self.quic.swap.generation.load(Ordering::Acquire);
        if generation == self.quic.generation {
            return;
        }
        self.quic.generation = generation;
        let material = match self.quic.swap.material.lock() {
            Ok(m) => m.clone(),
            Err(_) => return,
        };
        match material.map(|m| m.server_config(&self.rc, &self.quic.swap.alpns)) {
            Some(Ok(config)) => {
                self.quic.server = config;
                info!(shard = self.id.0, "TLS identity reloaded");
            }
            Some(Err(e)) => warn!(shard = self.id.0, error = %e, "reloaded TLS identity refused"),
            None => {}
        }
    }

    fn stats(&self) -> &ShardStats {
        &self.stats[self.id.index()]
    }

    /// Runs until shutdown has been requested and every connection is closed (or the drain
    /// timeout passed). Returns the core's report.
    pub(crate) async fn run(mut self) -> ShardReport {
        let mut phase = Phase::Serving;
        ShardStats::set(&self.stats().admission_busy_pct, u64::from(self.rc.admission_busy_pct));
        loop {
            let now = Instant::now();
            ShardStats::add(&self.stats().turns, 1);
            self.begin_turn(now);
            phase = match self.shutdown_step(phase, now) {
                Some(next) => next,
                None => break,
            };
            let more_input = self.receive();
            self.note_receive_lag();
            let more_mesh = self.drain_mesh();
            let refusing = self.shutdown.load(Ordering::Acquire);
            let app = (&mut self.app.shard, &self.rc, self.id);
            self.tcp.adopt(&self.handoff, refusing, app, now);
            self.fire_timers(now);
            self.service_dirty(now).await;
            self.tcp.service(now);
            let woke = self.poll_app(now);
            self.mesh.endpoint.flush();
            if more_input || more_mesh || woke {
                future::yield_now().await;
                continue;
            }
            self.end_turn(now, phase).await;
        }
        info!(shard = self.id.0, connections = self.table.by_cid.len(), "shard stopped");
        ShardReport { cpu: udp::thread_cpu_time() }
    }

    /// The start of a turn at `now`: the application is told the time, and, when a load
    /// window completes, the load (admission, send coalescing and the receive hold follow
    /// it); the mesh backlog; a reloaded TLS identity.
    fn begin_turn(&mut self, now: Instant) {
        self.app.shard.begin_turn(now);
        if let Some(pct) = self.load.meter.turn(now) {
            self.load.busy = super::load::over_threshold(pct, self.rc.admission_busy_pct);
            self.load.coalescing = !self.rc.send_coalesce.is_zero() && pct >= self.rc.coalesce_busy_pct;
            self.load.recv_holding =
                holds_gather_a_batch(std::mem::take(&mut self.load.window_datagrams), self.rc.recv_coalesce);
            ShardStats::set(&self.stats().busy_pct, u64::from(pct));
            self.app.shard.set_load(pct);
        }
        self.note_mesh_backlog();
        self.reload_tls();
    }

    /// Graceful shutdown, one turn's step: the phase to continue in, or `None` when the core
    /// is done.
    fn shutdown_step(&mut self, mut phase: Phase, now: Instant) -> Option<Phase> {
        if phase == Phase::Serving && self.shutdown.load(Ordering::Acquire) {
            phase = match self.rc.drain_grace.is_zero() {
                false => {
                    self.app.shard.drain(now, self.rc.drain_grace);
                    Phase::Draining { until: now + self.rc.drain_grace }
                }
                true => {
                    self.close_all(0x0, b"server shutting down");
                    Phase::Closing { until: now + self.rc.drain_timeout }
                }
            };
        }
        // Done once every connection has sent (or received) its CONNECTION_CLOSE: the
        // draining period that follows needs no more packets from us.
        let closed = |c: &Conn| c.quic.is_closed() || c.quic.is_draining();
        let quiet = phase != Phase::Serving
            && self.table.conns.iter().flatten().all(|c| closed(c))
            && self.tcp.is_empty();
        // Connections this core opened (to upstream servers) serve the accepted ones until
        // those are gone; then they close.
        let clients_gone = phase != Phase::Serving
            && self.table.conns.iter().flatten().all(|c| c.outbound.is_some() || closed(c));
        // While draining, a core without connections keeps running until every core has
        // none: the others' applications may still need this core's.
        let all_cores_quiet =
            || self.stats.iter().all(|s| ShardStats::get(&s.connections) == ShardStats::get(&s.outbound));
        match phase {
            Phase::Serving => {}
            Phase::Draining { .. } if quiet && all_cores_quiet() => return None,
            Phase::Draining { .. } if clients_gone && all_cores_quiet() => {
                for idx in 0..self.table.conns.len() {
                    if let Some(conn) = self.table.conns[idx].as_mut().filter(|c| c.outbound.is_some()) {
                        let _ = conn.quic.close(true, 0x0, b"server shutting down");
                        mark_dirty(&mut self.dirty, conn, idx);
                    }
                }
                phase = Phase::Closing { until: now + self.rc.drain_timeout };
            }
            Phase::Draining { until } if now >= until => {
                let (code, reason) = self.app.shard.drain_close();
                self.close_all(code, reason);
                phase = Phase::Closing { until: now + self.rc.drain_timeout };
            }
            Phase::Draining { .. } => {}
            Phase::Closing { until } if quiet || now >= until => return None,
            Phase::Closing { .. } => {}
        }
        Some(phase)
    }

    /// The end of a turn that began at `now` and left nothing to do at once: sleep for the
    /// receive hold, or wait for input, the doorbell or the next deadline.
    async fn end_turn(&mut self, now: Instant, phase: Phase) {
        // Draining: look again every DRAIN_POLL whether every core is quiet yet.
        let wake_by = match phase {
            Phase::Draining { until } => Some(until.min(now + DRAIN_POLL)),
            other => other.deadline(),
        };
        // The turn's work ends here: a second clock reading, for the load meter and the
        // receive hold only.
        let end = Instant::now();
        self.load.meter.wait(end);
        let read = std::mem::take(&mut self.load.turn_datagrams);
        if self.load.recv_holding && read > 0 && phase == Phase::Serving {
            // Receive coalescing: the next datagrams gather until `recv_coalesce` after
            // this turn began (a turn that took that long already let them gather: no
            // sleep), or until the next timer if sooner, rather than waking for each.
            let until = self
                .next_wake(None)
                .map_or(now + self.rc.recv_coalesce, |t| t.min(now + self.rc.recv_coalesce));
            if until > end {
                glommio::timer::sleep(until - end).await;
            }
            return;
        }
        self.wait(now, wake_by).await;
    }

    /// Sleeps until the socket is readable, the doorbell rings, or the earliest timer is due.
    /// `now` is the turn's clock reading (the only one): a timer may fire up to one turn late,
    /// never early.
    async fn wait(&mut self, now: Instant, drain_deadline: Option<Instant>) {
        let next = self.next_wake(drain_deadline);
        let socket = self.udp.socket.clone();
        let readable = self.wake.readable.get_or_insert_with(|| {
            Box::pin(async move {
                // peek_from, not peek: glommio's peek requires a connected socket.
                let mut peek = [0u8; 1];
                let _ = socket.peek_from(&mut peek).await;
            })
        });
        if self.wake.ringing.is_none() {
            if let Some(mut bell) = self.wake.doorbell.take() {
                self.wake.ringing = Some(Box::pin(async move {
                    let rung = bell.wait().await;
                    (bell, rung)
                }));
            }
        }
        let ringing = &mut self.wake.ringing;
        let sleep = async {
            match next {
                Some(at) => glommio::timer::sleep(at.saturating_duration_since(now)).await,
                None => future::pending::<()>().await,
            }
            Woke::Timer
        };
        let rung = async {
            match ringing.as_mut() {
                Some(f) => Woke::Bell(f.as_mut().await),
                None => future::pending().await,
            }
        };
        let streams = self.tcp.ready.signal.clone().wait();
        let woke = future::or(
            async {
                readable.as_mut().await;
                Woke::Socket
            },
            future::or(
                rung,
                future::or(sleep, async {
                    streams.await;
                    Woke::Tcp
                }),
            ),
        )
        .await;
        match woke {
            Woke::Socket => self.wake.readable = None,
            Woke::Bell((bell, rung)) => {
                self.wake.ringing = None;
                // The doorbell's write ends live as long as the server, so an error cannot
                // come from a peer; should one happen, wait on the socket and timers only.
                if rung.is_ok() {
                    self.wake.doorbell = Some(bell);
                }
            }
            Woke::Timer | Woke::Tcp => {}
        }
    }

    /// The earliest of the next timer, the application's deadline and `drain_deadline`.
    fn next_wake(&self, drain_deadline: Option<Instant>) -> Option<Instant> {
        [
            self.timers.peek().map(|Reverse((at, _))| *at),
            self.app.deadline,
            drain_deadline,
            self.tcp.next_deadline(),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// Drains the socket (up to the per-turn budget). True when the budget ran out first.
    fn receive(&mut self) -> bool {
        // The batch is moved out while its datagrams are handled, so they can be passed to
        // `&mut self` methods in place (quiche decrypts in place; nothing is copied).
        let mut batch = std::mem::replace(&mut self.recv, RecvBatch::empty());
        let mut handled = 0;
        let exhausted = loop {
            if handled >= RECV_BUDGET {
                break true;
            }
            let n = match batch.recv(self.udp.fd) {
                Ok(0) => break false,
                Ok(n) => n,
                Err(e) => {
                    warn!(shard = self.id.0, error = %e, "recvmmsg failed");
                    break false;
                }
            };
            ShardStats::add(&self.stats().recv_batches, 1);
            for i in 0..n {
                let Some((r, buf)) = batch.get(i) else { continue };
                if r.rx_ns != 0 && (self.load.oldest_rx_ns == 0 || r.rx_ns < self.load.oldest_rx_ns) {
                    self.load.oldest_rx_ns = r.rx_ns;
                }
                // A GRO super-datagram carries several packets of `segment` bytes each.
                for packet in buf.chunks_mut(r.segment) {
                    self.handle_datagram(packet, r.from);
                    handled += 1;
                }
            }
            // A short batch emptied the socket: another call would only return nothing (what
            // arrives meanwhile wakes the next wait).
            if n < udp::RECV_BATCH {
                break false;
            }
        };
        self.recv = batch;
        self.load.turn_datagrams += handled;
        self.load.window_datagrams += handled as u64;
        exhausted
    }

    /// Tells the application how long the oldest datagram of this turn waited in the socket
    /// before the core read it (the kernel's receive timestamp against the wall clock): input
    /// that queued there while the core was busy is older than the turn's clock says.
    fn note_receive_lag(&mut self) {
        let oldest = std::mem::take(&mut self.load.oldest_rx_ns);
        let lag = match oldest {
            0 => Duration::ZERO,
            ns => {
                let now = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default();
                // A step of the wall clock between the two readings could make it negative or
                // huge: neither is a queue.
                now.checked_sub(Duration::from_nanos(ns))
                    .filter(|l| *l <= MAX_RECEIVE_LAG)
                    .unwrap_or_default()
            }
        };
        self.app.shard.set_receive_lag(lag);
    }

    /// Handles what other cores sent: datagrams they received for our connections, and
    /// application messages. True when the budget ran out first.
    fn drain_mesh(&mut self) -> bool {
        let mut inbound = std::mem::take(&mut self.mesh.inbound);
        let n = self.mesh.endpoint.drain(MESH_BUDGET, |src, msg| inbound.push((src, msg)));
        self.stats().mesh_backlog.store(n as u64, Ordering::Relaxed);
        for (src, m) in inbound.drain(..) {
            match m {
                MeshMsg::Packet(mut p) => {
                    ShardStats::add(&self.stats().forwarded_in, 1);
                    self.handle_owned(&mut p.data, p.from);
                }
                MeshMsg::App(msg, _) => self.app.shard.on_message(src, msg),
            }
        }
        self.mesh.inbound = inbound;
        n >= MESH_BUDGET
    }

    /// Tells the application about this core's mesh queues, every turn: which destinations
    /// are backed up (past [`MESH_CONGESTED`] messages waiting in overflow, its queue full: the
    /// destination is behind, and what waits is memory of this core), and the bytes queued
    /// toward each (the application adds what it sends during the turn, so it is told afresh
    /// each turn). The relay stops opening new streams to a backed-up core and keeps the
    /// bytes under its per-pair limit.
    fn note_mesh_backlog(&mut self) {
        let cores = self.mesh.endpoint.cores();
        if self.mesh.congested.len() != cores {
            self.mesh.congested = vec![false; cores];
            self.mesh.bytes = vec![0; cores];
        }
        let mut total = 0;
        for (dst, (c, b)) in self.mesh.congested.iter_mut().zip(self.mesh.bytes.iter_mut()).enumerate() {
            (*c, *b) =
                (self.mesh.endpoint.overflow_to(dst) > MESH_CONGESTED, self.mesh.endpoint.queued_bytes(dst));
            if dst != self.mesh.endpoint.core() {
                total += *b;
            }
        }
        self.app.shard.set_mesh_backlog(&self.mesh.congested, &self.mesh.bytes);
        if let Some(s) = self.stats.get(self.id.index()) {
            s.mesh_queued_bytes.store(total as u64, Ordering::Relaxed);
        }
    }

    /// Lets the per-core application act on the turn (its messages to other cores, the
    /// connections it wrote to, its next deadline). True when it woke connections, which are
    /// then serviced before the core waits again.
    fn poll_app(&mut self, now: Instant) -> bool {
        self.app.shard.poll(now, &mut self.app.out);
        self.app.deadline = self.app.out.deadline.take();
        for (dst, msg, bytes) in self.app.out.messages.drain(..) {
            if self.mesh.endpoint.send(dst, MeshMsg::App(msg, bytes)).is_err() {
                warn!(shard = self.id.0, dst, "application message for a core that does not exist");
            }
        }
        let connects = std::mem::take(&mut self.app.out.connect);
        // A new connection's first flight goes out in the next turn, which must come at once.
        let mut woke = !connects.is_empty();
        for c in connects {
            self.connect(c);
        }
        for ConnHandle(h) in self.app.out.wake.drain(..) {
            let (idx, gen) = ((h & 0xFFFF_FFFF) as usize, (h >> 32) as u32);
            if h & tcp::STREAM_BIT != 0 {
                self.tcp.wake(idx & !(tcp::STREAM_BIT as usize), gen);
                woke = true;
                continue;
            }
            if let Some(conn) = self.table.conns.get_mut(idx).and_then(Option::as_mut) {
                if conn.gen == gen {
                    mark_dirty(&mut self.dirty, conn, idx);
                    woke = true;
                }
            }
        }
        woke
    }

    /// Pops due timers; a connection whose deadline moved later is re-queued.
    fn fire_timers(&mut self, now: Instant) {
        while let Some(&Reverse((at, idx))) = self.timers.peek() {
            if at > now {
                break;
            }
            self.timers.pop();
            let Some(conn) = self.table.conns.get_mut(idx).and_then(Option::as_mut) else { continue };
            if conn.scheduled != Some(at) {
                continue; // stale entry
            }
            conn.scheduled = None;
            let due = |t: Option<Instant>| t.is_some_and(|t| t <= now);
            let timeout = due(conn.quic.timeout_instant());
            if !(timeout || due(conn.paced_until) || due(conn.setup_deadline) || due(conn.flush_at)) {
                // The deadline moved later since this entry was queued (an ACK re-armed
                // quiche's timer): nothing is due, so no service and no write; wait for the
                // new deadline instead.
                if let Some(at) = conn.next_deadline() {
                    conn.scheduled = Some(at);
                    self.timers.push(Reverse((at, idx)));
                }
                continue;
            }
            if due(conn.paced_until) {
                conn.paced_until = None;
                ShardStats::add(&self.stats[self.id.index()].pacing_releases, 1);
            }
            if timeout {
                conn.quic.on_timeout();
            }
            mark_dirty(&mut self.dirty, conn, idx);
        }
    }
}

/// Receive coalescing pays while a hold of `hold` gathers [`RECV_COALESCE_MIN_BATCH`]
/// datagrams or more at the rate of the last load window (`datagrams` in about a second).
fn holds_gather_a_batch(datagrams: u64, hold: Duration) -> bool {
    !hold.is_zero()
        && u128::from(datagrams) * hold.as_micros()
            >= u128::from(RECV_COALESCE_MIN_BATCH) * super::load::LOAD_WINDOW.as_micros()
}

fn mark_dirty(dirty: &mut Vec<usize>, conn: &mut Conn, idx: usize) {
    if !conn.dirty {
        conn.dirty = true;
        dirty.push(idx);
    }
}

/// Lowercase hex of `bytes` (qlog file names).
fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_receive_hold_applies_only_where_it_gathers_a_batch() {
        let us = Duration::from_micros;
        // 500 µs gathers 4 at 8,000 datagrams a second.
        assert!(holds_gather_a_batch(8_000, us(500)));
        assert!(!holds_gather_a_batch(7_999, us(500)));
        assert!(holds_gather_a_batch(100_000, us(500)));
        // A longer hold pays at a lower rate; off is off whatever the rate.
        assert!(holds_gather_a_batch(1_000, us(5_000)));
        assert!(!holds_gather_a_batch(u64::MAX, Duration::ZERO));
        assert!(!holds_gather_a_batch(0, us(5_000)));
    }
}
