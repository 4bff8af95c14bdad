//! Runs the relay on the cores: one [`RelayShard`] per core, shared by that core's
//! connections (`Rc<RefCell<_>>`: one thread, no lock). Each connection's `on_io` moves bytes
//! between quiche and its session ([`Pump`]) and lets the shard handle the session's events;
//! the shard's writes into other sessions wake those connections, and its messages for other
//! cores travel over the mesh as they are ([`RelayMsg`], the shard app's message type).
//!
//! Upstream links: the relay's [`LinkSlots`] decide when and where to connect, retry and
//! close; this glue executes their commands (DNS on a short-lived thread, `Connect`, closing
//! a session), feeds back what happened, and keeps the links alive.

pub mod admission;
pub mod events;
pub mod redis_client;
pub mod side_door;

use std::cell::RefCell;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use tracing::{info, warn};

use self::events::{Hooks, Record, SessionInfo, SessionTotals};
use self::redis_client::{DirEvent, DirRequest, DirectoryPort};
use crate::config::{Config, Parent};
use moqt::{Pump, WebTransportAccept, WebTransportConn};
use relay::alias::AliasKey;
use relay::directory::DirectoryAsk;
use relay::link_slot::{CloseReason, LinkCommand, LinkSlots};
use relay::RelayMsg;
use relay::{ConnId, Input, PathState, RelayConfig, RelayShard, RelayStats};
use runtime::app::DiscardApp;
use runtime::{
    AppFactory, ConnApp, ConnHandle, Connect, QuicConnection, ShardApp, ShardId, ShardOutput, StreamRequest,
    Transport,
};
use session::{Session, SessionCode, SessionConfig};
use wire::model::{Role, SetupOptions};
use wire::Version;

/// One core's relay state sizes, published after every turn (read by tests and metrics;
/// relaxed atomics, written only by their core).
#[derive(Debug, Default)]
pub struct RelayGauges {
    pub sessions: AtomicU64,
    /// Tracks this core owns.
    pub tracks: AtomicU64,
    /// Downstream subscriptions on this core's sessions.
    pub subscriptions: AtomicU64,
    /// Upstream subscriptions (SUBSCRIBEs sent, PUBLISHes accepted) on this core's sessions.
    pub upstreams: AtomicU64,
    /// Upstream links of this core that are set up.
    pub links_up: AtomicU64,
    /// Namespaces announced by this core's sessions.
    pub namespaces: AtomicU64,
    /// The core's `RelayStats` counters, copied after every turn (in the order of
    /// `RelayStats::COUNTERS`).
    pub counters: [AtomicU64; RelayStats::N],
    pub cache_bytes: AtomicU64,
    /// Relay-added delay (µs), merged in by the core about once a second (the only lock,
    /// taken off the data path).
    pub latency: std::sync::Mutex<Option<hdrhistogram::Histogram<u64>>>,
}

impl RelayGauges {
    /// (sessions, tracks, subscriptions, upstreams).
    pub fn read(&self) -> (u64, u64, u64, u64) {
        let g = |a: &AtomicU64| a.load(Ordering::Relaxed);
        (g(&self.sessions), g(&self.tracks), g(&self.subscriptions), g(&self.upstreams))
    }

    /// The counters, in the order of `RelayStats::COUNTERS`.
    pub fn counters(&self) -> [u64; RelayStats::N] {
        std::array::from_fn(|i| self.counters[i].load(Ordering::Relaxed))
    }
}

/// How often a core looks for the answer of a host name being resolved.
const RESOLVE_POLL: Duration = Duration::from_millis(10);
/// Keep-alive of an idle link (well under its QUIC idle timeout, `tls::LINK_IDLE_TIMEOUT`).
const LINK_KEEPALIVE: Duration = Duration::from_secs(1);

/// How often the relay shard is told the wall clock (`Input::WallClock`), so that a
/// step of the system clock reaches token expiry within this.
const WALL_CLOCK_EVERY: Duration = Duration::from_secs(10);

/// Serves the relay on every connection.
#[derive(Debug, Clone)]
pub struct RelayFactory {
    pub relay: RelayConfig,
    pub session: SessionConfig,
    key: AliasKey,
    gauges: Arc<[RelayGauges]>,
    /// The MoQT drafts offered to clients (upstream links offer every draft).
    pub drafts: Vec<Version>,
    /// Parent relays; link `i` lives on core `i % cores`.
    pub upstreams: Vec<Parent>,
    /// The namespace directory's end for each core (each core takes its own), and the token
    /// sent on the links it leads to.
    pub directory: Option<(redis_client::Ports, Option<String>)>,
    /// Where draining sends clients when no `goaway_uri` is configured: the least loaded
    /// sibling the directory names (set before the drain starts).
    pub drain_to: Arc<std::sync::Mutex<Option<String>>>,
    /// The event hooks, when configured (`RelayConfig::events` must say so too).
    pub events: Option<Hooks>,
    /// The HTTP side doors' queries, each core's end (see [`RelayFactory::side_door`]).
    side_door: Option<side_door::Ports>,
    /// Admission by the platform's service (`auth = "http"`), and each core's end of it.
    pub admission: Option<(admission::Admission, admission::Ports)>,
}

impl Config {
    /// The relay's view of this configuration.
    pub fn relay(&self) -> RelayConfig {
        RelayConfig {
            auth: self.auth.clone(),
            linger: self.linger,
            publish_forward: self.publish_forward,
            max_backlog: self.max_backlog,
            max_lag: self.max_lag,
            max_unsent: self.max_unsent,
            mesh_queue: self.mesh_queue,
            cache_budget: self.cache / self.cores,
            goaway_uri: bytes::Bytes::from(self.goaway_uri.clone()),
            admission_busy_pct: self.admission_busy_pct,
            directory: self.directory.is_some(),
            events: self.events.is_some(),
            admission: self.admission.is_some(),
            ..RelayConfig::default()
        }
    }
}

/// Cores a relay can have (connection IDs carry the core in one byte).
const MAX_CORES: usize = 256;

impl RelayFactory {
    /// `secret` keys the Track Alias hash (the same on every core of this relay).
    pub fn new(relay: RelayConfig, session: SessionConfig, secret: &[u8; 32]) -> Self {
        let gauges: Arc<[RelayGauges]> = (0..MAX_CORES).map(|_| RelayGauges::default()).collect();
        RelayFactory {
            relay,
            session,
            key: AliasKey::new(secret),
            gauges,
            drafts: Version::ALL.to_vec(),
            upstreams: Vec::new(),
            directory: None,
            drain_to: Arc::default(),
            events: None,
            side_door: None,
            admission: None,
        }
    }

    /// Per-core state sizes (index = core; cores beyond the server's stay zero).
    /// The HTTP side doors' end for the web listener (`GET /announced`, `GET /fetch`), for a
    /// relay of `cores` cores; its cores answer once they run.
    pub fn side_door(&mut self, cores: usize) -> side_door::SideDoor {
        let (door, ports) = side_door::new(cores, self.key.clone());
        self.side_door = Some(ports);
        door
    }

    pub fn gauges(&self) -> Arc<[RelayGauges]> {
        self.gauges.clone()
    }
}

impl AppFactory for RelayFactory {
    type Shard = RelayHost;

    fn alpns(&self) -> Vec<String> {
        moqt::server_alpns(&self.drafts)
    }

    /// Upstream links speak MoQT over raw QUIC, any draft.
    fn outbound_alpns(&self) -> Vec<String> {
        moqt::draft_alpns(&Version::ALL)
    }

    fn shard_app(&self, shard: ShardId, cores: usize) -> RelayHost {
        let now = Instant::now();
        let relay = RelayShard::new(
            shard.index(),
            cores,
            self.relay.clone(),
            self.key.clone(),
            now,
            auth::unix_now(),
        );
        let host = Host {
            relay,
            new: NewSession {
                config: self.session.clone(),
                setup: self.relay.server_setup(),
                drafts: self.drafts.clone(),
                backlog: self.relay.max_backlog,
                unsent: self.relay.max_unsent,
            },
            draining: false,
            buf: vec![0u8; 65_536],
            now,
            woken: Vec::new(),
            gauges: self.gauges.clone(),
            core: shard.index(),
            links: LinkSlots::new(&self.upstreams, shard.index(), cores, now),
            resolving: Vec::new(),
            link_commands: Vec::new(),
            ping_at: now + LINK_KEEPALIVE,
            directory: self.directory.as_ref().and_then(|(ports, token)| {
                let port = ports.lock().ok()?.get_mut(shard.index())?.take()?;
                Some((port, token.clone()))
            }),
            drain_to: self.drain_to.clone(),
            latency_at: now,
            wall_at: now + WALL_CLOCK_EVERY,
            events: self.events.clone(),
            sessions_served: 0,
            side_door: self
                .side_door
                .as_ref()
                .and_then(|ports| ports.lock().ok()?.get_mut(shard.index())?.take()),
            admission: self.admission.as_ref().and_then(|(service, ports)| {
                let answers = ports.lock().ok()?.get_mut(shard.index())?.take()?;
                Some(Admitting {
                    service: service.clone(),
                    answers,
                    asked: Default::default(),
                    due: Default::default(),
                })
            }),
        };
        RelayHost(Rc::new(RefCell::new(host)))
    }
}

/// What each new session of a core gets: its configuration, the SETUP options it sends, the
/// drafts a WebTransport client may choose, and its pump's limits.
struct NewSession {
    config: SessionConfig,
    /// The SETUP options every session the relay accepts sends.
    setup: SetupOptions,
    /// The drafts a WebTransport client may choose.
    drafts: Vec<Version>,
    /// Bytes a session may queue beyond QUIC flow control (see `Pump::with_backlog_limit`).
    backlog: usize,
    /// Subgroup bytes a connection's quiche may hold unsent (see `Pump::with_unsent_limit`).
    unsent: usize,
}

impl NewSession {
    /// A session of `version` playing `role`, sending `setup`.
    fn session(&self, version: Version, role: Role, setup: SetupOptions) -> Session {
        Session::new(version, role, self.config.clone(), setup)
    }

    /// A pump with the configured limits.
    fn pump(&self) -> Pump {
        Pump::with_backlog_limit(self.backlog).with_unsent_limit(self.unsent)
    }
}

struct Host {
    relay: RelayShard,
    /// What each new session gets.
    new: NewSession,
    /// The server is draining: each connection asks its WebTransport peer to drain too.
    draining: bool,
    /// Receive scratch buffer shared by the core's connections.
    buf: Vec<u8>,
    now: Instant,
    woken: Vec<ConnId>,
    gauges: Arc<[RelayGauges]>,
    core: usize,
    /// This core's upstream links.
    links: LinkSlots,
    /// Host names being resolved for a link slot, and where each answer comes.
    resolving: Vec<(u64, mpsc::Receiver<Result<SocketAddr, String>>)>,
    /// The link slots' commands not executed yet.
    link_commands: Vec<LinkCommand>,
    /// When idle links are next woken for a keep-alive.
    ping_at: Instant,
    /// This core's end of the namespace directory, and the token for the links it leads to.
    directory: Option<(DirectoryPort, Option<String>)>,
    drain_to: Arc<std::sync::Mutex<Option<String>>>,
    /// When the latency samples are next merged into the shared histogram.
    latency_at: Instant,
    /// When the relay is next told the wall clock.
    wall_at: Instant,
    events: Option<Hooks>,
    /// Sessions this core has served (accepted, not links): the event hooks' session numbers.
    sessions_served: u64,
    /// This core's end of the HTTP side doors.
    side_door: Option<mpsc::Receiver<side_door::Query>>,
    /// This core's end of the admission by the platform's service.
    admission: Option<Admitting>,
}

/// A core's sessions before the platform's service: what each asked, and when each is asked
/// again (revalidation).
struct Admitting {
    service: admission::Admission,
    answers: mpsc::Receiver<admission::Answer>,
    asked: ahash::HashMap<ConnId, relay::admission::AdmitAsk>,
    due: std::collections::BinaryHeap<std::cmp::Reverse<(Instant, ConnId)>>,
}

impl Admitting {
    /// Asks about the sessions the relay holds, hands it the verdicts that came, and asks
    /// again about those whose answer's time is up. Returns when next to look.
    fn run(&mut self, relay: &mut RelayShard, core: usize, now: Instant) -> Option<Instant> {
        for ask in relay.take_admissions() {
            self.service.ask(core, &ask);
            self.asked.insert(ask.conn, ask);
        }
        while let Ok((conn, verdict, ttl)) = self.answers.try_recv() {
            if !self.asked.contains_key(&conn) {
                continue; // closed meanwhile
            }
            if matches!(verdict, relay::admission::Verdict::Allow(_)) {
                self.due.push(std::cmp::Reverse((now + ttl, conn)));
            } else {
                self.asked.remove(&conn);
            }
            relay.handle(now, Input::Admitted { conn, verdict });
        }
        while let Some(&std::cmp::Reverse((at, conn))) = self.due.peek() {
            if at > now {
                break;
            }
            self.due.pop();
            if let Some(ask) = self.asked.get(&conn) {
                self.service.ask(core, ask);
            }
        }
        self.due.peek().map(|r| r.0 .0)
    }
}

impl Host {
    /// Hands the relay what the namespace directory said (answers, routes for this core's
    /// links, namespaces of other relays) and the directory what the relay asks.
    fn run_directory(&mut self) {
        let now = self.now;
        let Some((port, token)) = &self.directory else {
            // No directory thread (none configured, or it is gone): every lookup is a miss.
            for ask in self.relay.take_directory() {
                if let DirectoryAsk::Lookup(namespace) = ask {
                    self.relay.handle(now, Input::DirectoryAnswer { namespace: &namespace, found: false });
                }
            }
            return;
        };
        while let Ok(event) = port.rx.try_recv() {
            match event {
                DirEvent::Answer { namespace, found } => {
                    self.relay.handle(now, Input::DirectoryAnswer { namespace: &namespace, found })
                }
                DirEvent::Remote { namespace, on } => {
                    self.relay.handle(now, Input::RemoteNamespace { namespace, on })
                }
                DirEvent::Route { url, prefix, on } => {
                    match self.links.directory_route(&url, &prefix, on, token.as_deref(), now) {
                        Ok(Some(conn)) => self.relay.handle(now, Input::LinkRoute { conn, prefix, on }),
                        Ok(None) => {}
                        Err(why) => {
                            warn!(relay = %url, why, "directory names a relay URL that is not moqt://HOST:PORT")
                        }
                    }
                }
            }
        }
        for ask in self.relay.take_directory() {
            let req = match ask {
                DirectoryAsk::Register(n) => DirRequest::Register(n),
                DirectoryAsk::Unregister(n) => DirRequest::Unregister(n),
                DirectoryAsk::Lookup(namespace) => DirRequest::Lookup { core: self.core, namespace },
                DirectoryAsk::Watch { prefix, on } => DirRequest::Watch { prefix, on },
            };
            if port.tx.send(req).is_err() {
                // The directory thread is gone (it never stops while the relay runs): from
                // here on every lookup is a miss (those of this turn time out).
                warn!("namespace directory thread gone");
                self.directory = None;
                return;
            }
        }
    }

    /// Feeds the link slots what happened since the last turn (their parents' GOAWAYs, the
    /// answers of host names being resolved) and lets them start what is due.
    fn run_links(&mut self, out: &mut ShardOutput<RelayMsg>) {
        let now = self.now;
        for (conn, uri) in self.relay.take_link_goaways() {
            self.links.goaway(conn, &uri, now, &mut self.link_commands);
        }
        let mut i = 0;
        while i < self.resolving.len() {
            let result = match self.resolving[i].1.try_recv() {
                Err(mpsc::TryRecvError::Empty) => {
                    i += 1;
                    continue;
                }
                Ok(r) => r,
                Err(mpsc::TryRecvError::Disconnected) => Err("the resolver thread failed".to_string()),
            };
            let (tag, _) = self.resolving.remove(i);
            self.links.resolved(tag, result, now, &mut self.link_commands);
        }
        self.links.tick(now, &mut self.link_commands);
        self.link_commands(out);
    }

    /// Executes the link slots' commands. A host name is resolved on a short-lived thread (a
    /// slow or failing DNS answer never blocks the core; the core looks for the answer every
    /// [`RESOLVE_POLL`]).
    fn link_commands(&mut self, out: &mut ShardOutput<RelayMsg>) {
        while !self.link_commands.is_empty() {
            for cmd in std::mem::take(&mut self.link_commands) {
                match cmd {
                    LinkCommand::Connect { slot, peer, server_name } => {
                        out.connect.push(Connect { tag: slot, peer, server_name: Some(server_name) });
                    }
                    LinkCommand::Resolve { slot, host, port } => {
                        let (tx, rx) = mpsc::channel();
                        let spawned =
                            std::thread::Builder::new().name("moq-edge-resolve".into()).spawn(move || {
                                use std::net::ToSocketAddrs;
                                let answer =
                                    match (host.as_str(), port).to_socket_addrs().map(|mut a| a.next()) {
                                        Ok(Some(peer)) => Ok(peer),
                                        Ok(None) => Err("the host name has no address".to_string()),
                                        Err(e) => Err(format!("resolving the host name: {e}")),
                                    };
                                let _ = tx.send(answer);
                            });
                        match spawned {
                            Ok(_) => self.resolving.push((slot, rx)),
                            Err(e) => {
                                let why = Err(format!("no resolver thread: {e}"));
                                self.links.resolved(slot, why, self.now, &mut self.link_commands);
                            }
                        }
                    }
                    LinkCommand::Close { slot, conn, why } => {
                        if self.relay.close_link(conn) && why == CloseReason::MovedOut {
                            if let Some(s) = self.links.get(slot) {
                                info!(upstream = %s.upstream().url, "tracks moved off the old upstream link: closed");
                            }
                        }
                    }
                }
            }
        }
    }

    /// The earliest link deadline (a reconnection, a keep-alive, a look for a DNS answer).
    fn links_deadline(&self) -> Option<Instant> {
        let resolving = (!self.resolving.is_empty()).then(|| self.now + RESOLVE_POLL);
        let ping = self.links.has_links().then_some(self.ping_at);
        [self.links.next_deadline(), ping, resolving].into_iter().flatten().min()
    }

    /// Keep-alives of the links (replaced ones too), and closing replaced links whose tracks
    /// have all moved.
    fn links_keepalive(&mut self, out: &mut ShardOutput<RelayMsg>) {
        let mut moved_out = Vec::new();
        for slot in self.links.iter() {
            out.wake.extend(slot.conn().map(handle));
            for &old in slot.replaced() {
                if self.relay.link_moved_out(old) {
                    moved_out.push(old);
                }
                out.wake.push(handle(old));
            }
        }
        for conn in moved_out {
            self.links.carries_nothing(conn, &mut self.link_commands);
        }
        // Links to relays the directory no longer routes anything to close once idle.
        for conn in self.links.unrouted() {
            if self.relay.link_idle(conn) && self.relay.close_link(conn) {
                info!(%conn, "link to a relay the directory no longer names: closed");
                self.links.retire(conn);
            }
        }
        self.link_commands(out);
    }
}

/// The relay's name for a connection the runtime handed over, and back.
fn id(conn: ConnHandle) -> ConnId {
    ConnId(conn.0)
}

fn handle(conn: ConnId) -> ConnHandle {
    ConnHandle(conn.0)
}

/// One core's relay application: the host, shared with that core's connections.
pub struct RelayHost(Rc<RefCell<Host>>);

impl RelayHost {
    /// A MoQT session of `version` on accepted connection `conn`, over raw QUIC or inside the
    /// accepted WebTransport session `wt`.
    fn serve(
        host: &Rc<RefCell<Host>>,
        conn: ConnHandle,
        version: Version,
        wt: Option<WebTransportConn>,
        transport: &'static str,
    ) -> Box<dyn ConnApp> {
        let h = &mut *host.borrow_mut();
        let mut session = h.new.session(version, Role::Server, h.new.setup.clone());
        let mut pump = h.new.pump();
        if let Some(wt) = wt {
            if let Some(accepted) = wt.wt.accepted() {
                session.set_transport_setup(moqt::setup_from_url(accepted));
            }
            pump = pump.with_webtransport(wt);
        }
        h.relay.handle(h.now, Input::Session(id(conn), session));
        h.sessions_served += 1;
        let serial = h.sessions_served;
        let hook = h.events.as_ref().map(|_| Hook {
            info: SessionInfo { core: h.core, serial, transport, draft: version.number(), peer: None },
            since: h.now,
            opened: false,
        });
        Box::new(RelayConn { key: id(conn), host: host.clone(), pump, link: None, drained: false, hook })
    }
}

impl ShardApp for RelayHost {
    type Msg = RelayMsg;

    fn new_connection(&mut self, conn: ConnHandle, alpn: &[u8]) -> Box<dyn ConnApp> {
        match Version::from_alpn(alpn) {
            Some(version) => RelayHost::serve(&self.0, conn, version, None, "quic"),
            // `h3`, the only other ALPN offered: MoQT inside WebTransport.
            None => {
                let host = self.0.clone();
                let drafts = self.0.borrow().new.drafts.clone();
                Box::new(WebTransportAccept::new(
                    &drafts,
                    webtransport::Limits::default(),
                    move |version, wt| RelayHost::serve(&host, conn, version, Some(wt), "webtransport"),
                ))
            }
        }
    }

    fn new_stream_connection(&mut self, conn: ConnHandle, request: &StreamRequest) -> Box<dyn ConnApp> {
        let Some(version) = Version::from_alpn(request.alpn.as_bytes()) else {
            return Box::new(DiscardApp);
        };
        let app = RelayHost::serve(&self.0, conn, version, None, "websocket");
        if let Some(session) = self.0.borrow_mut().relay.session_mut(id(conn)) {
            session.set_transport_setup(moqt::setup_from_request(&request.authority, &request.path));
        }
        app
    }

    fn new_outbound(&mut self, conn: ConnHandle, alpn: &[u8], tag: u64) -> Box<dyn ConnApp> {
        let host = &mut *self.0.borrow_mut();
        let now = host.now;
        // Only MoQT ALPNs are offered upstream.
        let (Some(version), Some(slot)) =
            (Version::from_alpn(alpn), host.links.connected(tag, id(conn), now))
        else {
            return Box::new(DiscardApp);
        };
        let upstream = slot.upstream();
        info!(upstream = %upstream.url, version = ?version, "upstream link connected");
        let setup = host.relay.config().link_setup(upstream.token.as_deref());
        let session = host.new.session(version, Role::Client, setup);
        let (routes, replaces) = (upstream.routes.clone(), slot.replaced().last().copied());
        let directory = slot.is_directory();
        let link = Input::Link { conn: id(conn), session, routes, replaces, directory };
        host.relay.handle(now, link);
        let pump = host.new.pump();
        let link = Some(now);
        Box::new(RelayConn { key: id(conn), host: self.0.clone(), pump, link, drained: false, hook: None })
    }

    fn connect_failed(&mut self, tag: u64, why: &str) {
        let host = &mut *self.0.borrow_mut();
        let now = host.now;
        host.links.connect_failed(tag, why, now);
    }

    fn begin_turn(&mut self, now: Instant) {
        self.0.borrow_mut().now = now;
    }

    fn set_load(&mut self, busy_pct: u8) {
        let host = &mut *self.0.borrow_mut();
        host.relay.handle(host.now, Input::Load(busy_pct));
        if let Some((port, _)) = &host.directory {
            let sessions = host.relay.session_count() as u64;
            // Err: the directory thread is gone (it logs why); the load goes unreported.
            if port.tx.send(DirRequest::Load { core: host.core, busy_pct, sessions }).is_err() {
                tracing::debug!(core = host.core, "directory gone: load not reported");
            }
        }
    }

    fn set_receive_lag(&mut self, lag: Duration) {
        let host = &mut *self.0.borrow_mut();
        host.relay.handle(host.now, Input::ReceiveLag(lag));
    }

    fn set_mesh_backlog(&mut self, congested: &[bool], bytes: &[usize]) {
        let host = &mut *self.0.borrow_mut();
        host.relay.handle(host.now, Input::MeshBacklog { congested, bytes });
    }

    fn on_message(&mut self, _from: usize, msg: RelayMsg) {
        let mut host = self.0.borrow_mut();
        let now = host.now;
        host.relay.handle(now, Input::Message(msg));
    }

    fn drain(&mut self, now: Instant, timeout: std::time::Duration) {
        let host = &mut *self.0.borrow_mut();
        host.now = now;
        let sibling = host.drain_to.lock().ok().and_then(|s| s.clone());
        let timeout_ms = u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX);
        host.relay.handle(now, Input::GoAway { timeout_ms, sibling: sibling.as_deref() });
        // Each WebTransport connection passes it on at its next turn (GOAWAY wakes them all).
        host.draining = true;
    }

    /// Sessions still open when the drain's time is up close with GOAWAY_TIMEOUT.
    fn drain_close(&self) -> (u64, &'static [u8]) {
        (SessionCode::GoawayTimeout.code(), b"GOAWAY_TIMEOUT")
    }

    fn poll(&mut self, now: Instant, out: &mut ShardOutput<RelayMsg>) {
        let host = &mut *self.0.borrow_mut();
        host.now = now;
        if now >= host.wall_at {
            // The relay reads no clock: it measures token expiry against this.
            host.wall_at = now + WALL_CLOCK_EVERY;
            host.relay.handle(now, Input::WallClock(auth::unix_now()));
        }
        host.run_directory();
        if let Some(port) = &host.side_door {
            side_door::answer(port, &host.relay, now);
        }
        let revalidate_at = match &mut host.admission {
            Some(a) => a.run(&mut host.relay, host.core, now),
            None => None,
        };
        if let Some(hooks) = &host.events {
            for e in host.relay.take_events() {
                hooks.record(Record::Relay(e));
            }
        }
        host.relay.handle(now, Input::Timers);
        out.deadline = [host.relay.poll_timeout(), revalidate_at].into_iter().flatten().min();
        if !host.links.is_empty() {
            host.run_links(out);
            if now >= host.ping_at {
                host.ping_at = now + LINK_KEEPALIVE;
                host.links_keepalive(out);
            }
            out.deadline = [out.deadline, host.links_deadline()].into_iter().flatten().min();
        }
        host.relay.take_outbox(&mut out.messages);
        host.relay.take_woken(&mut host.woken);
        out.wake.extend(host.woken.drain(..).map(handle));
        if let Some(g) = host.gauges.get(host.core) {
            let (tracks, subscriptions, upstreams) = host.relay.state_counts();
            let set = |a: &AtomicU64, v: u64| a.store(v, Ordering::Relaxed);
            set(&g.sessions, host.relay.session_count() as u64);
            set(&g.tracks, tracks as u64);
            set(&g.subscriptions, subscriptions as u64);
            set(&g.upstreams, upstreams as u64);
            set(&g.links_up, host.relay.links_up() as u64);
            set(&g.namespaces, host.relay.namespaces_announced() as u64);
            for (a, v) in g.counters.iter().zip(host.relay.stats().values()) {
                set(a, v);
            }
            set(&g.cache_bytes, host.relay.cache_bytes() as u64);
            if now >= host.latency_at && !host.relay.stats().latency.is_empty() {
                host.latency_at = now + Duration::from_secs(1);
                if let Ok(mut shared) = g.latency.lock() {
                    let h = shared.get_or_insert_with(relay::latency_histogram);
                    // Both come from `relay::latency_histogram`: same bounds, so this cannot
                    // fail; a failure would lose this second's samples, so it is said.
                    if let Err(e) = h.add(&host.relay.stats().latency) {
                        warn!(error = %e, "latency samples not merged");
                    }
                    host.relay.stats_mut().latency.reset();
                }
            }
        }
    }
}

/// One connection of the relay: its key in the shard (whose relay holds its session), and
/// what moves its bytes.
struct RelayConn {
    key: ConnId,
    host: Rc<RefCell<Host>>,
    /// The glue between quiche and the session (its queues, WebTransport, holds).
    pump: Pump,
    /// This connection passed the server's drain on to its WebTransport peer.
    drained: bool,
    /// An upstream link: when it last sent a keep-alive.
    link: Option<Instant>,
    /// A session the event hooks report (not a link), when hooks are configured.
    hook: Option<Hook>,
}

/// What the event hooks say of a session: who it is, since when, and whether its opening
/// was told (at its first I/O, which knows the peer's address).
struct Hook {
    info: SessionInfo,
    since: Instant,
    opened: bool,
}

impl ConnApp for RelayConn {
    fn set_setup_deadline(&mut self, at: Instant) {
        if let Some(session) = self.host.borrow_mut().relay.session_mut(self.key) {
            session.set_setup_deadline(at);
        }
    }

    fn on_io(&mut self, conn: &mut QuicConnection) {
        let now = self.host.borrow().now;
        if self.link.is_some_and(|last| now.duration_since(last) >= LINK_KEEPALIVE) {
            let _ = conn.send_ack_eliciting(); // a PING: keeps the parent's idle timer alive
            self.link = Some(now);
        }
        if self.hook.as_ref().is_some_and(|h| !h.opened) {
            self.opened(conn.path_stats().next().map(|p| p.peer_addr));
        }
        self.io(conn);
    }

    fn on_stream_io(&mut self, conn: &mut qmux::Connection) {
        if self.hook.as_ref().is_some_and(|h| !h.opened) {
            self.opened(None);
        }
        self.io(conn);
    }

    fn on_stream_closed(&mut self, conn: &qmux::Connection) {
        let stats = conn.stats();
        let close = conn.peer_error().map(|e| (e, true)).or(conn.local_error().map(|e| (e, false)));
        let close = close
            .map(|(e, by_peer)| (e.error_code, String::from_utf8_lossy(&e.reason).into_owned(), by_peer));
        self.closed(stats.recv_bytes, stats.sent_bytes, close);
        let host = &mut *self.host.borrow_mut();
        let now = host.now;
        host.relay.handle(now, Input::Gone(self.key));
        if let Some(a) = &mut host.admission {
            a.asked.remove(&self.key);
        }
    }

    fn on_closed(&mut self, conn: &QuicConnection) {
        if self.hook.is_some() {
            let (bytes_in, bytes_out) =
                conn.path_stats().fold((0, 0), |(i, o), p| (i + p.recv_bytes, o + p.sent_bytes));
            let close = conn.peer_error().map(|e| (e, true)).or(conn.local_error().map(|e| (e, false)));
            let close = close
                .map(|(e, by_peer)| (e.error_code, String::from_utf8_lossy(&e.reason).into_owned(), by_peer));
            self.closed(bytes_in, bytes_out, close);
        }
        let host = &mut *self.host.borrow_mut();
        let now = host.now;
        host.relay.handle(now, Input::Gone(self.key));
        if let Some(a) = &mut host.admission {
            a.asked.remove(&self.key);
        }
        if self.link.is_some() {
            let why = match conn.peer_error().or(conn.local_error()) {
                Some(e) => {
                    format!("closed (code {:#x}): {}", e.error_code, String::from_utf8_lossy(&e.reason))
                }
                None if conn.is_timed_out() => "idle timeout".to_string(),
                None => "closed".to_string(),
            };
            host.links.closed(self.key, &why, now);
        }
    }
}

impl RelayConn {
    /// The event hooks hear that this session opened.
    fn opened(&mut self, peer: Option<SocketAddr>) {
        let (Some(hook), Some(hooks)) = (&mut self.hook, &self.host.borrow().events) else { return };
        hook.opened = true;
        hook.info.peer = peer;
        hooks.record(Record::SessionOpen(hook.info.clone()));
    }

    /// The event hooks hear that this session closed, with its totals (if its opening was
    /// told: a connection that never carried a byte of the session is not reported).
    fn closed(&mut self, bytes_in: u64, bytes_out: u64, close: Option<(u64, String, bool)>) {
        let host = &mut *self.host.borrow_mut();
        let (Some(hook), Some(hooks)) = (self.hook.take(), &host.events) else { return };
        if !hook.opened {
            return;
        }
        let mut info = hook.info;
        if let Some(s) = host.relay.session_mut(self.key) {
            info.draft = s.version().number();
        }
        let seconds = host.now.saturating_duration_since(hook.since).as_secs_f64();
        hooks.record(Record::SessionClose(info, SessionTotals { seconds, bytes_in, bytes_out, close }));
    }

    /// Reads what arrived, lets the relay act on it, writes what it has: the same over QUIC
    /// and over QMux.
    fn io(&mut self, conn: &mut impl Transport) {
        let host = &mut *self.host.borrow_mut();
        let key = self.key;
        let now = host.now;
        if let Some(session) = host.relay.session_mut(key) {
            session.on_timeout(now);
        }
        if host.draining && !self.drained {
            self.drained = true;
            self.pump.drain_webtransport();
        }
        if let Some(session) = host.relay.session_mut(key) {
            self.pump.read(conn, session, &mut host.buf);
        }
        loop {
            host.relay.handle(now, Input::Events(key));
            let Some(session) = host.relay.session_mut(key) else { break };
            let written = self.pump.write(conn, session, now);
            if written.control_piled {
                host.relay.stats_mut().control_not_read += 1;
            }
            // Writing can surface events (STOP_SENDING seen by stream_send) and shed streams
            // from an over-long backlog (which may end subscriptions: PUBLISH_DONE to write).
            if !written.finished.is_empty() {
                host.relay.handle(now, Input::Finished { conn: key, streams: &written.finished });
            }
            if !written.shed.is_empty() || !written.expired.is_empty() {
                let path =
                    if self.pump.path_stalled(now) { PathState::Stalled } else { PathState::Delivering };
                if !written.shed.is_empty() {
                    host.relay.handle(now, Input::Shed { conn: key, streams: &written.shed, path });
                }
                if !written.expired.is_empty() {
                    host.relay.handle(now, Input::Expired { conn: key, streams: &written.expired, path });
                }
                continue;
            }
            if !host.relay.has_events(key) {
                break;
            }
        }
    }
}
