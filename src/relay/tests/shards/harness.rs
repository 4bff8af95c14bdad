//! A whole relay without QUIC: `N` [`RelayShard`]s (one per simulated core), client
//! [`Session`]s attached to them, and a simulated clock. Bytes move between each client and
//! its relay-side session as [`Transmit`]s; shard-to-shard messages travel through one FIFO
//! queue per (source, destination) pair, the mesh's guarantee, delivered one message per
//! pair per round so pairs interleave. Everything is deterministic: no threads, no sleeps.
//!
//! The harness also checks the contract a runtime relies on: a relay-side session the shard
//! wrote to outside its own turn is named by `take_woken` (a session with output at quiet time
//! that was never woken fails the run), and the shard never sends a mesh message to itself.
#![allow(dead_code, clippy::unwrap_used)]

use relay::Input;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::{Duration, Instant};

use bytes::Bytes;
use relay::alias::{self, AliasKey};
use relay::RelayMsg;
use relay::{ConnId, RelayConfig, RelayShard};
use session::{DataObject, Event, Session, SessionConfig, StreamId, Transmit};
use wire::model::{
    FullTrackName, Message, RequestId, Role, SetupOptions, SubgroupHeader, SubgroupObject, TrackAlias,
};
use wire::Version;

use crate::support::session::{deliver, Split};

/// The key every shard of the simulated relay shares.
pub const SECRET: [u8; 32] = [0x5A; 32];

/// Index of a client in [`Relay::clients`].
pub type ClientId = usize;

/// One simulated client connection: its own session, and where it is attached.
pub struct Client {
    pub version: Version,
    pub core: usize,
    /// The relay's name for the connection (unique per core only: ids repeat across cores).
    pub conn: ConnId,
    pub session: Session,
    /// Events of the client session not yet taken.
    pub events: Vec<Event>,
    /// The code the relay-side session closed the connection with.
    pub closed_by_relay: Option<u64>,
    /// The code the client session closed the connection with (a relay bug in these tests).
    pub closed_by_client: Option<u64>,
    /// The connection is gone (`remove_session` was called).
    pub gone: bool,
    /// Every transmit the relay-side session made for this client, as it made them.
    pub relay_sent: Vec<Transmit>,
    /// A parent's: the relay's SUBSCRIBE_NAMESPACEs up the link, answered REQUEST_OK by the
    /// harness when the link came up (`link_with`).
    pub discovery: Vec<wire::model::SubscribeNamespace>,
}

/// The simulated relay and its clients.
pub struct Relay {
    pub now: Instant,
    pub shards: Vec<RelayShard>,
    pub clients: Vec<Client>,
    key: AliasKey,
    mesh: BTreeMap<(usize, usize), VecDeque<RelayMsg>>,
    /// Per (source, destination): the weight of what waits in `mesh`, as the runtime counts it.
    mesh_bytes: BTreeMap<(usize, usize), usize>,
    /// Pairs whose destination takes nothing (a core that is stuck): see [`Relay::stall`].
    stalled: BTreeSet<(usize, usize)>,
    /// Pairs the runtime would call backed up (queue full, overflow past its mark).
    congested: BTreeSet<(usize, usize)>,
    next_conn: Vec<u64>,
    /// Mesh messages delivered so far.
    pub mesh_delivered: usize,
    /// What the relay's sessions send in SETUP.
    server_setup: SetupOptions,
}

impl Relay {
    pub fn new(cores: usize) -> Relay {
        Relay::with_config(cores, RelayConfig::default())
    }

    pub fn with_config(cores: usize, config: RelayConfig) -> Relay {
        let now = Instant::now();
        let shards = (0..cores)
            .map(|core| {
                RelayShard::new(core, cores, config.clone(), AliasKey::new(&SECRET), now, auth::unix_now())
            })
            .collect();
        Relay {
            now,
            shards,
            clients: Vec::new(),
            key: AliasKey::new(&SECRET),
            mesh: BTreeMap::new(),
            mesh_bytes: BTreeMap::new(),
            stalled: BTreeSet::new(),
            congested: BTreeSet::new(),
            next_conn: vec![0; cores],
            mesh_delivered: 0,
            server_setup: config.server_setup(),
        }
    }

    pub fn cores(&self) -> usize {
        self.shards.len()
    }

    /// The relay's Track Alias for `track`.
    pub fn alias(&self, track: &FullTrackName) -> TrackAlias {
        self.key.alias(track)
    }

    /// The core that owns `track`.
    pub fn owner(&self, track: &FullTrackName) -> usize {
        alias::owner(self.alias(track), self.cores())
    }

    /// A new client connection on `core`, set up (SETUP exchanged) and quiet.
    pub fn connect(&mut self, core: usize, version: Version) -> ClientId {
        let id = self.connect_with(core, version, SetupOptions::default());
        assert!(self.clients[id].session.is_ready(), "client {id} is not set up");
        let ev = self.take_events(id);
        assert!(matches!(ev.as_slice(), [Event::Ready { .. }]), "client {id}: {ev:?}");
        id
    }

    /// A new client connection on `core` whose SETUP carries `setup`; its events are left
    /// for the caller (the relay may refuse the session).
    pub fn connect_with(&mut self, core: usize, version: Version, setup: SetupOptions) -> ClientId {
        self.next_conn[core] += 1;
        let conn = ConnId(self.next_conn[core]);
        let server = Session::new(version, Role::Server, SessionConfig::default(), self.server_setup.clone());
        self.shards[core].handle(self.now, Input::Session(conn, server));
        let session = Session::new(version, Role::Client, SessionConfig::default(), setup);
        let id = self.push_client(version, core, conn, session);
        self.run_until_quiet();
        id
    }

    /// Adds the test's end of a connection (relay-side session `conn` on `core`).
    fn push_client(&mut self, version: Version, core: usize, conn: ConnId, session: Session) -> ClientId {
        self.clients.push(Client {
            version,
            core,
            conn,
            session,
            events: Vec::new(),
            closed_by_relay: None,
            closed_by_client: None,
            gone: false,
            relay_sent: Vec::new(),
            discovery: Vec::new(),
        });
        self.clients.len() - 1
    }

    /// An upstream link of the relay on `core` serving `routes`; the returned client plays the
    /// parent relay (a server session whose SETUP carries `parent_setup`). Set up and quiet.
    pub fn connect_link(
        &mut self,
        core: usize,
        version: Version,
        routes: Vec<wire::model::TrackNamespace>,
        parent_setup: SetupOptions,
    ) -> ClientId {
        self.link_with(core, version, routes, parent_setup, (None, false))
    }

    /// Like [`Relay::connect_link`], to a relay the namespace directory named (not a parent:
    /// local announcements do not go up it).
    pub fn connect_directory_link(
        &mut self,
        core: usize,
        version: Version,
        parent_setup: SetupOptions,
    ) -> ClientId {
        self.link_with(core, version, Vec::new(), parent_setup, (None, true))
    }

    /// Like [`Relay::connect_link`], as the replacement of link `old` (on the same core),
    /// whose parent sent GOAWAY.
    pub fn replace_link(
        &mut self,
        old: ClientId,
        routes: Vec<wire::model::TrackNamespace>,
        parent_setup: SetupOptions,
    ) -> ClientId {
        let (core, version, conn) =
            (self.clients[old].core, self.clients[old].version, self.clients[old].conn);
        self.link_with(core, version, routes, parent_setup, (Some(conn), false))
    }

    fn link_with(
        &mut self,
        core: usize,
        version: Version,
        routes: Vec<wire::model::TrackNamespace>,
        parent_setup: SetupOptions,
        (replaces, directory): (Option<ConnId>, bool),
    ) -> ClientId {
        self.next_conn[core] += 1;
        let conn = ConnId(self.next_conn[core]);
        let setup = self.shards[core].config().link_setup(None);
        let relay_side = Session::new(version, Role::Client, SessionConfig::default(), setup);
        let link = Input::Link { conn, session: relay_side, routes, replaces, directory };
        self.shards[core].handle(self.now, link);
        let session = Session::new(version, Role::Server, SessionConfig::default(), parent_setup);
        let id = self.push_client(version, core, conn, session);
        self.flush_relay_session(core, conn);
        self.run_until_quiet();
        // The parent answers the link's SUBSCRIBE_NAMESPACEs (one per route) and keeps them;
        // the other events stay for the test.
        for event in self.take_events(id) {
            match event {
                Event::Message(Message::SubscribeNamespace(m)) => {
                    let ok = wire::model::RequestOk { request_id: m.request_id, ..Default::default() };
                    self.send(id, Message::RequestOk(ok));
                    self.clients[id].discovery.push(m);
                }
                e => self.clients[id].events.push(e),
            }
        }
        self.run_until_quiet();
        id
    }

    pub fn send(&mut self, c: ClientId, msg: Message) {
        self.clients[c].session.send(msg).unwrap();
    }

    /// A fresh Request ID of client `c`.
    pub fn next_request_id(&mut self, c: ClientId) -> RequestId {
        self.clients[c].session.next_request_id().unwrap()
    }

    pub fn session(&mut self, c: ClientId) -> &mut Session {
        &mut self.clients[c].session
    }

    /// The client's events since the last call.
    pub fn take_events(&mut self, c: ClientId) -> Vec<Event> {
        std::mem::take(&mut self.clients[c].events)
    }

    /// Takes the client's queued transmits without delivering them (to reorder them).
    pub fn capture(&mut self, c: ClientId) -> Vec<Transmit> {
        std::iter::from_fn(|| self.clients[c].session.poll_transmit()).collect()
    }

    /// Delivers one transmit of client `c` to its relay-side session and lets the shard
    /// handle the session's events (what one `on_io` of the runtime does).
    pub fn deliver_to_relay(&mut self, c: ClientId, t: &Transmit) {
        let (core, conn) = (self.clients[c].core, self.clients[c].conn);
        if self.clients[c].gone {
            return;
        }
        if let Transmit::Close { code, .. } = t {
            // The client closed the connection: the relay's side goes too.
            self.clients[c].closed_by_client = Some(*code);
            self.disconnect(c);
            return;
        }
        let now = self.now;
        let Some(s) = self.shards[core].session_mut(conn) else { return };
        deliver(s, t, Split::Whole);
        self.shards[core].handle(now, Input::Events(conn));
        self.flush_relay_session(core, conn);
    }

    /// The connection of client `c` is gone (the runtime's `on_closed`).
    pub fn disconnect(&mut self, c: ClientId) {
        let (core, conn) = (self.clients[c].core, self.clients[c].conn);
        self.clients[c].gone = true;
        let now = self.now;
        self.shards[core].handle(now, Input::Gone(conn));
    }

    /// Advances the clock, runs every shard's timers, then runs until quiet.
    pub fn advance(&mut self, by: Duration) {
        self.now += by;
        let now = self.now;
        for shard in &mut self.shards {
            shard.handle(now, Input::Timers);
        }
        self.run_until_quiet();
    }

    /// `state_counts()` of every shard.
    pub fn state_counts(&self) -> Vec<(usize, usize, usize)> {
        self.shards.iter().map(RelayShard::state_counts).collect()
    }

    /// Asserts that no shard holds any track, subscription or upstream.
    pub fn assert_idle(&self) {
        assert_eq!(self.state_counts(), vec![(0, 0, 0); self.cores()], "relay state left behind");
    }

    /// Moves bytes both ways, handles events, delivers mesh messages, until nothing moves.
    pub fn run_until_quiet(&mut self) {
        for _ in 0..100_000 {
            let mut moved = false;
            // Clients → relay.
            for c in 0..self.clients.len() {
                let out = self.capture(c);
                moved |= !out.is_empty();
                for t in &out {
                    self.deliver_to_relay(c, t);
                }
            }
            // One round of the mesh: one message per (source, destination) pair.
            moved |= self.mesh_round();
            // Relay → clients: the sessions the shards woke.
            for core in 0..self.shards.len() {
                let mut woken = Vec::new();
                self.shards[core].take_woken(&mut woken);
                for conn in woken {
                    // A woken connection's turn reads its session first, as the host's does
                    // (a session the platform just admitted has events waiting): what that
                    // does may need another round.
                    let now = self.now;
                    moved |= self.shards[core].has_events(conn);
                    self.shards[core].handle(now, Input::Events(conn));
                    self.flush_relay_session(core, conn);
                }
            }
            for c in &mut self.clients {
                c.events.extend(std::iter::from_fn(|| c.session.poll_event()));
            }
            moved |= self.mesh.iter().any(|(k, q)| !q.is_empty() && !self.stalled.contains(k));
            if !moved {
                self.check_quiet();
                return;
            }
        }
        panic!("the relay never went quiet");
    }

    /// Collects every shard's outbox into the mesh queues, then delivers one message from each
    /// non-empty (source, destination) queue that is not stalled. True when anything was
    /// delivered.
    fn mesh_round(&mut self) -> bool {
        self.collect_outboxes();
        let pairs: Vec<(usize, usize)> = self
            .mesh
            .iter()
            .filter(|(k, q)| !q.is_empty() && !self.stalled.contains(k))
            .map(|(k, _)| *k)
            .collect();
        let now = self.now;
        for (src, dst) in &pairs {
            let Some(msg) = self.mesh.get_mut(&(*src, *dst)).and_then(VecDeque::pop_front) else { continue };
            if let Some(b) = self.mesh_bytes.get_mut(&(*src, *dst)) {
                *b -= msg.weight();
            }
            self.tell_backlog(*src);
            self.shards[*dst].handle(now, Input::Message(msg));
            self.mesh_delivered += 1;
            self.collect_outboxes();
        }
        !pairs.is_empty()
    }

    fn collect_outboxes(&mut self) {
        for src in 0..self.shards.len() {
            let mut out = Vec::new();
            self.shards[src].take_outbox(&mut out);
            for (dst, msg, weight) in out {
                assert!(dst < self.shards.len(), "mesh message for core {dst}");
                assert_ne!(dst, src, "core {src} sent a mesh message to itself: {msg:?}");
                *self.mesh_bytes.entry((src, dst)).or_default() += weight;
                self.mesh.entry((src, dst)).or_default().push_back(msg);
            }
            self.tell_backlog(src);
        }
    }

    /// Tells core `src` what the runtime would: its queues backed up, and the bytes waiting.
    fn tell_backlog(&mut self, src: usize) {
        let cores = self.shards.len();
        let congested: Vec<bool> = (0..cores).map(|dst| self.congested.contains(&(src, dst))).collect();
        let bytes: Vec<usize> =
            (0..cores).map(|dst| self.mesh_bytes.get(&(src, dst)).copied().unwrap_or(0)).collect();
        self.shards[src].handle(self.now, Input::MeshBacklog { congested: &congested, bytes: &bytes });
    }

    /// Core `dst` takes nothing more from core `src` (`true`) or catches up (`false`): what
    /// `src` sends waits, and counts toward its mesh limit.
    pub fn stall(&mut self, src: usize, dst: usize, on: bool) {
        if on {
            self.stalled.insert((src, dst));
        } else {
            self.stalled.remove(&(src, dst));
        }
    }

    /// The weight (`RelayMsg::weight`) core `src` has queued toward `dst`, not taken yet.
    pub fn mesh_queued(&self, src: usize, dst: usize) -> usize {
        self.mesh_bytes.get(&(src, dst)).copied().unwrap_or(0)
    }

    /// The runtime says core `src`'s queue to `dst` is backed up (`true`) or no longer.
    pub fn set_congested(&mut self, src: usize, dst: usize, on: bool) {
        if on {
            self.congested.insert((src, dst));
        } else {
            self.congested.remove(&(src, dst));
        }
        self.tell_backlog(src);
    }

    /// Writes the relay-side session's output into its client; a Close ends the connection
    /// (the runtime then calls `remove_session`).
    fn flush_relay_session(&mut self, core: usize, conn: ConnId) {
        let Some(c) = self.clients.iter().position(|c| c.core == core && c.conn == conn) else { return };
        let Some(s) = self.shards[core].session_mut(conn) else { return };
        let out: Vec<Transmit> = std::iter::from_fn(|| s.poll_transmit()).collect();
        let mut closed = None;
        for t in &out {
            if let Transmit::Close { code, .. } = t {
                closed = Some(*code);
                break;
            }
            deliver(&mut self.clients[c].session, t, Split::Whole);
        }
        self.clients[c].relay_sent.extend(out);
        if let Some(code) = closed {
            self.clients[c].closed_by_relay = Some(code);
            self.disconnect(c);
        }
    }

    /// At quiet: no relay-side session has output or events nobody was told about.
    fn check_quiet(&mut self) {
        for c in &self.clients {
            if c.gone {
                continue;
            }
            let waiting = self.shards[c.core].has_events(c.conn);
            assert!(!waiting, "core {} conn {}: events left unhandled", c.core, c.conn);
            let Some(s) = self.shards[c.core].session_mut(c.conn) else { continue };
            if let Some(t) = s.poll_transmit() {
                panic!("core {} conn {}: output without a wake-up: {t:?}", c.core, c.conn);
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Reading client events
// ---------------------------------------------------------------------------------------------

/// The control messages among `events`.
pub fn messages(events: &[Event]) -> Vec<Message> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Message(m) => Some(m.clone()),
            _ => None,
        })
        .collect()
}

/// One data stream as a client saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeenStream {
    pub stream: StreamId,
    pub request_id: RequestId,
    pub header: SubgroupHeader,
    pub objects: Vec<(SubgroupObject, Bytes)>,
    /// `None` while open; `Some(None)` after FIN; `Some(Some(code))` after a reset.
    pub end: Option<Option<u64>>,
}

/// The subgroup streams among `events`, in the order they opened.
pub fn streams(events: &[Event]) -> Vec<SeenStream> {
    let mut out: Vec<SeenStream> = Vec::new();
    for e in events {
        match e {
            Event::Object {
                stream,
                request_id,
                object: DataObject::Subgroup { header, object },
                payload,
            } => match out.iter_mut().find(|s| s.stream == *stream && s.end.is_none()) {
                Some(s) => {
                    assert_eq!(s.header, *header, "header changed on stream {stream}");
                    assert_eq!(s.request_id, *request_id);
                    s.objects.push((object.clone(), payload.clone()));
                }
                None => out.push(SeenStream {
                    stream: *stream,
                    request_id: *request_id,
                    header: *header,
                    objects: vec![(object.clone(), payload.clone())],
                    end: None,
                }),
            },
            Event::DataStreamEnd { stream, reset } => {
                let s = out
                    .iter_mut()
                    .find(|s| s.stream == *stream && s.end.is_none())
                    .unwrap_or_else(|| panic!("end of unknown stream {stream}"));
                s.end = Some(*reset);
            }
            _ => {}
        }
    }
    out
}
