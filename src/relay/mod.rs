//! `relay`: per-shard relay state (ARCHITECTURE.md, "The relay layer"). One [`RelayShard`]
//! per core holds that core's sessions and the roles, each in its own file, each receiving
//! its own message enum (`msg.rs`):
//!
//! - `ingest.rs` (publisher side): PUBLISH_NAMESPACE, upstream SUBSCRIBEs the relay sends,
//!   PUBLISHes it accepts, and upstream data streams, mapped from the publisher's Track Alias
//!   to the relay's.
//! - `owner.rs` (track owner, `alias % cores`): one entry per track with its single upstream
//!   subscription, the set of cores that have subscribers, the open upstream streams and the
//!   largest location; it aggregates subscriptions and forwards each object once per core.
//!   A type of its own (`owner::Owner`), called with a `Cx`.
//! - `fanout.rs` (subscriber side): downstream subscriptions, their filters, and one
//!   downstream subgroup stream per upstream stream per subscription.
//!
//! The shard never does I/O and takes no lock: it writes into sans-IO [`Session`]s, names the
//! sessions it wrote to ([`RelayShard::take_woken`]), and returns messages for other cores
//! ([`RelayShard::take_outbox`]). Messages to itself are handled in the same turn.

pub mod alias;
mod cache;
mod discovery;
mod fanout;
mod fetch;
mod ingest;
pub mod link_slot;
pub mod links;
mod malformed;
pub mod msg;
pub mod namespaces;
mod owner;
mod upfetch;

use crate::hash::{HashMap, HashSet};
use std::collections::VecDeque;
use std::time::{Duration, Instant};

use bytes::Bytes;
use tracing::debug;

use self::alias::AliasKey;
use self::msg::{DiscoveryMsg, Epoch, FanoutMsg, IngestMsg, NamespaceMsg, OwnerMsg, RelayMsg, SessionRef};
use self::namespaces::{NamespaceTable, Via};
use crate::auth::{self, Denied, Right, SessionAuth};
use crate::session::SessionCode;
use crate::session::{DataObject, Event, Session};
use crate::wire::model::{GoAway, Message, Parameters, RequestId, RequestUpdate};
use crate::wire::RequestErrorCode;

/// The right a request needs, on which namespace (a joining FETCH has the right of the
/// subscription it joins; responses and updates need none).
fn needs_right(
    msg: &Message,
) -> Option<(RequestId, &Parameters, &crate::wire::model::TrackNamespace, Right)> {
    use crate::wire::model::FetchKind;
    Some(match msg {
        Message::PublishNamespace(m) => (m.request_id, &m.params, &m.namespace, Right::Publish),
        Message::Publish(m) => (m.request_id, &m.params, &m.track.namespace, Right::Publish),
        Message::Subscribe(m) | Message::TrackStatus(m) => {
            (m.request_id, &m.params, &m.track.namespace, Right::Subscribe)
        }
        Message::Fetch(m) => match &m.kind {
            FetchKind::Standalone { track } => (m.request_id, &m.params, &track.namespace, Right::Subscribe),
            _ => return None,
        },
        Message::SubscribeNamespace(m) => (m.request_id, &m.params, &m.prefix, Right::Subscribe),
        Message::SubscribeTracks(m) => (m.request_id, &m.params, &m.prefix, Right::Subscribe),
        _ => return None,
    })
}

/// A request was refused (and answered, or its session closed).
#[derive(Debug)]
struct Refused;

/// Why a REQUEST_UPDATE was not applied.
#[derive(Debug)]
pub(crate) enum UpdateError {
    /// A parameter not valid for the request: the session is closed (PROTOCOL_VIOLATION).
    Invalid(&'static str),
    /// REQUEST_ERROR with this code (a subscription is then ended with UPDATE_FAILED).
    Refused(RequestErrorCode, &'static str),
}

/// The request `msg` starts, when it carries range filters (SUBSCRIBE, FETCH,
/// SUBSCRIBE_TRACKS; draft-22 §3.3.2).
fn range_filtered(msg: &Message) -> Option<RequestId> {
    let (rid, params) = match msg {
        Message::Subscribe(m) => (m.request_id, &m.params),
        Message::Fetch(m) => (m.request_id, &m.params),
        Message::SubscribeTracks(m) => (m.request_id, &m.params),
        _ => return None,
    };
    params.range_filters.iter().any(|f| f.set.is_some()).then_some(rid)
}

/// Checks that `params` carries only parameters named in `allowed` (draft-22 §9.5 lists
/// them per request kind; draft-16 requests take the same subsets).
pub(crate) fn update_allows(params: &Parameters, allowed: &[&str]) -> Result<(), UpdateError> {
    let present: [(&str, bool); 16] = [
        ("AUTHORIZATION_TOKEN", !params.auth_tokens.is_empty()),
        ("OBJECT_DELIVERY_TIMEOUT", params.object_delivery_timeout.is_some()),
        ("RENDEZVOUS_TIMEOUT", params.rendezvous_timeout.is_some()),
        ("SUBGROUP_DELIVERY_TIMEOUT", params.subgroup_delivery_timeout.is_some()),
        ("EXPIRES", params.expires.is_some()),
        ("LARGEST_OBJECT", params.largest_object.is_some()),
        ("FILL_TIMEOUT", params.fill_timeout.is_some()),
        ("FORWARD", params.forward.is_some()),
        ("SUBSCRIBER_PRIORITY", params.subscriber_priority.is_some()),
        ("LOCATION_FILTER", params.location_filter.is_some()),
        ("GROUP_ORDER", params.group_order.is_some()),
        ("FILL_PARAMETERS", params.fill_parameters.is_some()),
        ("RANGE_FILTER", !params.range_filters.is_empty()),
        ("NEW_GROUP_REQUEST", params.new_group_request.is_some()),
        ("TRACK_NAMESPACE_PREFIX", params.track_namespace_prefix.is_some()),
        ("INCLUDE_PROPERTIES", params.include_properties.is_some()),
    ];
    match present.iter().find(|(name, on)| *on && !allowed.contains(name)) {
        Some(_) => Err(UpdateError::Invalid("a parameter this request cannot take")),
        None => Ok(()),
    }
}

/// Relay limits and timers.
#[derive(Debug, Clone)]
pub struct RelayConfig {
    /// How long an upstream subscription outlives its last downstream subscriber (a quick
    /// re-subscribe reuses it).
    pub linger: Duration,
    /// How long a PUBLISH_DONE from upstream waits for the data streams it counts before it
    /// is passed on anyway.
    pub done_wait: Duration,
    /// Whether a publisher's PUBLISH is asked for objects at once or only while someone is
    /// subscribed.
    pub publish_forward: crate::config::PublishForward,
    /// PUBLISH_NAMESPACE per session.
    pub max_namespaces_per_session: usize,
    /// Namespaces (SUBSCRIBE_NAMESPACE) or tracks (PUBLISH offers) one namespace subscription
    /// may match when it is made; past it, NAMESPACE_TOO_LARGE (draft-22; draft-16 has no
    /// such code: EXCESSIVE_LOAD).
    pub max_namespace_matches: usize,
    /// Downstream subscriptions and upstream PUBLISHes per session.
    pub max_subscriptions_per_session: usize,
    /// Tracks owned by one shard.
    pub max_tracks_per_shard: usize,
    /// Bytes a session may have queued beyond what QUIC flow control takes; past it its oldest
    /// subgroup streams are reset (CANCELLED) until half of it remains.
    pub max_backlog: usize,
    /// Bytes of objects this shard caches for late joiners and FETCH (0: none).
    pub cache_budget: usize,
    /// GOAWAY's New Session URI when the relay drains (empty: clients reconnect to the URI
    /// they used).
    pub goaway_uri: Bytes,
    /// A subscription that loses this many subgroup streams to its session's backlog within
    /// 10 s is ended with PUBLISH_DONE TOO_FAR_BEHIND.
    pub too_far_behind_streams: u32,
    /// The longest a SUBSCRIBE is held for a publisher to appear (draft-22
    /// RENDEZVOUS_TIMEOUT asks; the relay may shorten it).
    pub max_rendezvous: Duration,
    /// Token keys: `Some` requires a token for every request (`crate::auth`); `None` is open
    /// mode (tokens are ignored).
    pub auth: Option<std::sync::Arc<auth::Keys>>,
    /// MAX_AUTH_TOKEN_CACHE_SIZE the relay offers when tokens are required (bytes per session).
    pub auth_cache: usize,
    /// This relay's node ID (random per process), named in every SETUP to detect routing
    /// loops between relays (`links`).
    pub node_id: u64,
}

impl RelayConfig {
    /// The SETUP options the relay's sessions send.
    pub fn server_setup(&self) -> crate::wire::model::SetupOptions {
        crate::wire::model::SetupOptions {
            max_auth_token_cache_size: self.auth.as_ref().map(|_| self.auth_cache as u64),
            implementation: Some(links::implementation(self.node_id)),
            ..Default::default()
        }
    }

    /// The SETUP options of the relay's upstream links: its node ID, and `token` (if any).
    pub fn link_setup(&self, token: Option<&str>) -> crate::wire::model::SetupOptions {
        let auth_tokens = token
            .map(|t| crate::wire::model::AuthToken::UseValue {
                token_type: 0,
                value: Bytes::from(t.to_string()),
            })
            .into_iter()
            .collect();
        crate::wire::model::SetupOptions {
            implementation: Some(links::implementation(self.node_id)),
            auth_tokens,
            ..Default::default()
        }
    }
}

impl Default for RelayConfig {
    fn default() -> Self {
        RelayConfig {
            linger: Duration::from_secs(2),
            done_wait: Duration::from_secs(2),
            publish_forward: crate::config::PublishForward::Always,
            max_namespaces_per_session: 256,
            max_namespace_matches: 10_000,
            max_subscriptions_per_session: 1024,
            max_tracks_per_shard: 100_000,
            max_backlog: 1 << 20,
            cache_budget: 64 << 20,
            goaway_uri: Bytes::new(),
            too_far_behind_streams: 4,
            max_rendezvous: Duration::from_secs(30),
            auth: None,
            auth_cache: 4096,
            node_id: random_node_id(),
        }
    }
}

/// One core's relay counters: plain integers written by its core only (the host copies them
/// into the metrics' atomics once per turn; nothing on the data path takes a lock or an
/// atomic for them).
#[derive(Debug, Clone)]
pub struct RelayStats {
    /// Objects (and datagrams) received from publishers and upstream links, and their
    /// payload bytes.
    pub objects_in: u64,
    pub bytes_in: u64,
    /// Objects (and datagrams) written to subscriber sessions, and their payload bytes.
    pub objects_out: u64,
    pub bytes_out: u64,
    /// FETCHes answered wholly from the cache, and those that needed the upstream.
    pub fetch_hits: u64,
    pub fetch_misses: u64,
    /// Subscriber streams reset (or objects dropped) for DELIVERY_TIMEOUT.
    pub delivery_timeouts: u64,
    /// Tracks this core owns that moved to a replacement upstream link (a parent's GOAWAY).
    pub tracks_moved: u64,
    /// Tracks this core owns that ended as malformed (draft-22 §12.1).
    pub malformed_tracks: u64,
    /// Relay-added delay: from an object's arrival at its ingest core to its write at a
    /// subscriber core (before QUIC), in microseconds; one sample per object per core.
    pub latency: hdrhistogram::Histogram<u64>,
}

impl Default for RelayStats {
    fn default() -> Self {
        RelayStats {
            objects_in: 0,
            bytes_in: 0,
            objects_out: 0,
            bytes_out: 0,
            fetch_hits: 0,
            fetch_misses: 0,
            delivery_timeouts: 0,
            tracks_moved: 0,
            malformed_tracks: 0,
            latency: latency_histogram(),
        }
    }
}

/// An empty histogram of 1 µs .. 60 s at 3 significant digits (about 40 KiB).
pub fn latency_histogram() -> hdrhistogram::Histogram<u64> {
    hdrhistogram::Histogram::new_with_bounds(1, 60_000_000, 3).unwrap_or_else(|_| {
        // The bounds above are valid; this branch is unreachable in practice.
        hdrhistogram::Histogram::new(3).unwrap_or_else(|_| unreachable!("3 significant digits is valid"))
    })
}

/// A random node ID (a relay's identity between relays).
fn random_node_id() -> u64 {
    let mut b = [0u8; 8];
    // The CSPRNG does not fail on supported platforms; a zero ID would still work (it only
    // has to differ from the parents' and children's).
    let _ = ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut b);
    u64::from_le_bytes(b)
}

/// Sessions the shard wrote to outside their own turn.
#[derive(Debug, Default)]
struct Woken {
    list: Vec<u64>,
    set: HashSet<u64>,
}

impl Woken {
    fn add(&mut self, conn: u64) {
        if self.set.insert(conn) {
            self.list.push(conn);
        }
    }
}

/// Messages this shard sends: to itself (handled in the same turn) or to other cores.
#[derive(Debug)]
struct Mail {
    core: usize,
    local: VecDeque<RelayMsg>,
    outbox: Vec<(usize, RelayMsg)>,
}

impl Mail {
    fn send(&mut self, dst: usize, msg: impl Into<RelayMsg>) {
        let msg = msg.into();
        if dst == self.core {
            self.local.push_back(msg);
        } else {
            self.outbox.push((dst, msg));
        }
    }
}

/// What the roles of one core share during one call: where they run, the shard's clock,
/// the configuration, the namespace table, the outgoing mail and the counters. A role that
/// takes a `Cx` touches no other role's state: it talks to them through `send`.
pub(super) struct Cx<'a> {
    pub core: usize,
    pub cores: usize,
    pub now: Instant,
    /// The relay is draining (GOAWAY sent): nothing lingers.
    pub draining: bool,
    pub config: &'a RelayConfig,
    pub namespaces: &'a NamespaceTable,
    pub stats: &'a mut RelayStats,
    mail: &'a mut Mail,
    next_epoch: &'a mut u64,
}

impl Cx<'_> {
    pub fn send(&mut self, dst: usize, msg: impl Into<RelayMsg>) {
        self.mail.send(dst, msg);
    }

    /// A new upstream subscription ID, unique across cores.
    pub fn new_epoch(&mut self) -> Epoch {
        *self.next_epoch += 1;
        epoch(self.core, *self.next_epoch)
    }
}

/// Upstream subscription `seq` of core `core` (the core in the top bits).
fn epoch(core: usize, seq: u64) -> Epoch {
    (core as u64) << 48 | seq
}

/// Looks up session `conn` and notes that it has output.
fn session<'a>(
    sessions: &'a mut HashMap<u64, Session>,
    woken: &mut Woken,
    conn: u64,
) -> Option<&'a mut Session> {
    let s = sessions.get_mut(&conn)?;
    woken.add(conn);
    Some(s)
}

/// One core's relay state (see the module header).
#[derive(Debug)]
pub struct RelayShard {
    core: usize,
    cores: usize,
    config: RelayConfig,
    key: AliasKey,
    sessions: HashMap<u64, Session>,
    namespaces: NamespaceTable,
    owner: owner::Owner,
    ingest: ingest::Ingest,
    fanout: fanout::Fanout,
    discovery: discovery::Discovery,
    fetches: fetch::Fetches,
    upfetch: upfetch::UpFetches,
    mail: Mail,
    woken: Woken,
    next_epoch: u64,
    now: Instant,
    /// Set once the relay drains: the GOAWAY every session gets (sessions set up later too).
    goaway: Option<GoAway>,
    /// Sessions' tokens (when tokens are required).
    auth: HashMap<u64, SessionAuth>,
    links: links::Links,
    /// Counters for the metrics endpoint.
    pub stats: RelayStats,
}

impl RelayShard {
    pub fn new(core: usize, cores: usize, config: RelayConfig, key: AliasKey, now: Instant) -> Self {
        let cache_budget = config.cache_budget;
        RelayShard {
            core,
            cores,
            config,
            key,
            sessions: HashMap::default(),
            namespaces: NamespaceTable::default(),
            owner: owner::Owner::new(cache_budget),
            ingest: ingest::Ingest::default(),
            fanout: fanout::Fanout::default(),
            discovery: discovery::Discovery::default(),
            fetches: fetch::Fetches::default(),
            upfetch: upfetch::UpFetches::default(),
            mail: Mail { core, local: VecDeque::new(), outbox: Vec::new() },
            woken: Woken::default(),
            next_epoch: 0,
            now,
            goaway: None,
            auth: HashMap::default(),
            links: links::Links::default(),
            stats: RelayStats::default(),
        }
    }

    /// The relay is going away (graceful shutdown): every session gets GOAWAY with the
    /// configured New Session URI and `timeout_ms` (draft-22 carries it; draft-16's GOAWAY has
    /// no timeout field), and so does every session set up from now on. Nothing else changes:
    /// subscriptions keep flowing until the sessions close or the core's time is up.
    pub fn go_away(&mut self, timeout_ms: u64) {
        if self.goaway.is_some() {
            return;
        }
        let goaway = GoAway { new_session_uri: self.config.goaway_uri.clone(), timeout_ms, request_id: None };
        let ready: Vec<u64> = self
            .sessions
            .iter()
            .filter(|(c, s)| s.is_ready() && !self.links.is_link(**c))
            .map(|(c, _)| *c)
            .collect();
        self.goaway = Some(goaway);
        for conn in ready {
            self.send_goaway(conn);
        }
    }

    fn send_goaway(&mut self, conn: u64) {
        let Some(goaway) = self.goaway.clone() else { return };
        if self.is_link(conn) {
            return; // GOAWAY goes from server to client; a link's parent is our server
        }
        if let Some(s) = session(&mut self.sessions, &mut self.woken, conn) {
            if let Err(e) = s.go_away(goaway) {
                debug!(conn, error = %e, "GOAWAY not sent");
            }
        }
    }

    /// Session `conn`'s transport reset these data streams of ours to shed a backlog the
    /// subscriber was not taking; a subscription that keeps losing streams this way is ended
    /// with TOO_FAR_BEHIND.
    pub fn streams_shed(&mut self, conn: u64, streams: &[u64], now: Instant) {
        self.now = now;
        self.fanout_streams_shed(conn, streams);
        self.run_local();
    }

    /// A new session on this core, named `conn` (unique on this core).
    pub fn add_session(&mut self, conn: u64, session: Session) {
        self.sessions.insert(conn, session);
    }

    /// The shard's configuration.
    pub fn config(&self) -> &RelayConfig {
        &self.config
    }

    pub fn session_mut(&mut self, conn: u64) -> Option<&mut Session> {
        self.sessions.get_mut(&conn)
    }

    /// Sessions on this core.
    pub fn session_count(&self) -> usize {
        self.sessions.len()
    }

    /// Tracks this shard owns, downstream subscriptions and FETCHes in progress, and
    /// upstream subscriptions and FETCHes on it (for tests and metrics: all zero when nothing
    /// is relayed).
    pub fn state_counts(&self) -> (usize, usize, usize) {
        (self.owner.len(), self.fanout.len() + self.fetches.len(), self.ingest.len() + self.upfetch.len())
    }

    /// Bytes of objects this shard caches.
    pub fn cache_bytes(&self) -> usize {
        self.owner.cache.bytes()
    }

    /// Handles every queued event of session `conn`, then the messages this shard sent
    /// itself.
    pub fn handle_events(&mut self, conn: u64, now: Instant) {
        self.now = now;
        loop {
            let Some(event) = self.sessions.get_mut(&conn).and_then(Session::poll_event) else { break };
            self.on_event(conn, event);
        }
        self.run_local();
    }

    /// The connection under session `conn` is gone: forget the session and everything it
    /// had (subscriptions end upstream, its tracks end downstream).
    pub fn remove_session(&mut self, conn: u64, now: Instant) {
        self.now = now;
        if self.sessions.remove(&conn).is_none() {
            return;
        }
        self.fanout_session_closed(conn);
        self.discovery_session_closed(conn);
        self.fetch_session_closed(conn);
        self.upfetch_session_closed(conn);
        self.auth.remove(&conn);
        self.ingest_session_closed(conn);
        self.links_session_closed(conn);
        self.run_local();
    }

    /// A message from the relay shard on core `from`.
    pub fn on_message(&mut self, _from: usize, msg: RelayMsg, now: Instant) {
        self.now = now;
        self.dispatch(msg);
        self.run_local();
    }

    /// Timers (linger, held PUBLISH_DONE). Returns the next deadline.
    pub fn tick(&mut self, now: Instant) -> Option<Instant> {
        self.now = now;
        self.with_owner(|owner, cx| owner.tick(cx));
        self.ingest_tick();
        self.fanout_tick();
        let links = self.links_tick();
        self.run_local();
        [self.owner.next_deadline(), self.ingest.next_deadline(), self.fanout.next_deadline(), links]
            .into_iter()
            .flatten()
            .min()
    }

    /// Messages for other cores, in order.
    pub fn take_outbox(&mut self, out: &mut Vec<(usize, RelayMsg)>) {
        out.append(&mut self.mail.outbox);
    }

    /// Sessions written to since the last call.
    pub fn take_woken(&mut self, out: &mut Vec<u64>) {
        self.woken.set.clear();
        out.append(&mut self.woken.list);
    }

    // -----------------------------------------------------------------------------------------

    fn send(&mut self, dst: usize, msg: impl Into<RelayMsg>) {
        self.mail.send(dst, msg);
    }

    fn owner_of(&self, alias: crate::wire::model::TrackAlias) -> usize {
        alias::owner(alias, self.cores)
    }

    fn new_epoch(&mut self) -> Epoch {
        self.next_epoch += 1;
        epoch(self.core, self.next_epoch)
    }

    /// Runs `f` on the owner role with the shard's shared context.
    fn with_owner<T>(&mut self, f: impl FnOnce(&mut owner::Owner, &mut Cx<'_>) -> T) -> T {
        let mut cx = Cx {
            core: self.core,
            cores: self.cores,
            now: self.now,
            draining: self.goaway.is_some(),
            config: &self.config,
            namespaces: &self.namespaces,
            stats: &mut self.stats,
            mail: &mut self.mail,
            next_epoch: &mut self.next_epoch,
        };
        f(&mut self.owner, &mut cx)
    }

    fn me(&self, conn: u64) -> SessionRef {
        SessionRef { core: self.core, conn }
    }

    fn run_local(&mut self) {
        while let Some(msg) = self.mail.local.pop_front() {
            self.dispatch(msg);
        }
    }

    /// Routes a message to the role it is for.
    fn dispatch(&mut self, msg: RelayMsg) {
        match msg {
            RelayMsg::Owner(m) => self.on_owner_msg(m),
            RelayMsg::Fanout(m) => self.on_fanout_msg(m),
            RelayMsg::Ingest(m) => self.on_ingest_msg(m),
            RelayMsg::Namespace(m) => self.on_namespace_msg(m),
            RelayMsg::Discovery(m) => self.on_discovery_msg(m),
        }
    }

    fn on_owner_msg(&mut self, msg: OwnerMsg) {
        self.with_owner(|owner, cx| owner.on_msg(cx, msg));
    }

    fn on_fanout_msg(&mut self, msg: FanoutMsg) {
        use FanoutMsg as M;
        match msg {
            M::Downstream { alias, data } => self.fanout_data(alias, data),
            M::SubscribeOk { alias, info, open } => self.fanout_subscribe_ok(alias, info, open),
            M::SubscribeError { alias, code, reason } => self.fanout_subscribe_error(alias, code, reason),
            M::UpstreamLost { alias } => self.fanout_upstream_lost(alias),
            M::TrackDone { alias, status, reason } => self.fanout_track_done(alias, status, reason),
            M::StatusAnswer { conn, rid, answer } => self.status_answer(conn, rid, answer),
            M::FetchAnswer { alias: _, conn, rid, fill, answer } => {
                self.fetch_answer(conn, rid, fill, answer)
            }
        }
    }

    fn on_ingest_msg(&mut self, msg: IngestMsg) {
        use IngestMsg as M;
        match msg {
            M::UpstreamSubscribe { alias, track, publisher, epoch, new_group } => {
                self.ingest_upstream_subscribe(alias, track, publisher, epoch, new_group)
            }
            M::NewGroup { alias: _, epoch, value } => self.ingest_new_group(epoch, value),
            M::UpstreamStop { alias: _, epoch } => self.ingest_upstream_stop(epoch),
            M::PublishForward { alias: _, epoch, forward } => self.ingest_publish_forward(epoch, forward),
            M::PublishRefused { alias: _, epoch, code, reason } => {
                self.ingest_publish_refused(epoch, code, reason)
            }
            M::NamespaceKnown { conn, rid } => self.ingest_namespace_known(conn, rid),
            M::UpstreamFetch { alias, id, track, publisher, start, end } => {
                self.upfetch_start(alias, id, track, publisher, start, end)
            }
            M::UpstreamFetchCancel { id, publisher } => self.upfetch_cancel(publisher.conn, id),
        }
    }

    /// The namespace table changed: every role that follows it hears (discovery, links, the
    /// owner's held SUBSCRIBEs).
    fn on_namespace_msg(&mut self, msg: NamespaceMsg) {
        match msg {
            NamespaceMsg::NamespaceAnnounced { namespace, publisher, rid, via } => {
                if self.namespaces.insert(namespace.clone(), publisher, via) {
                    self.discovery_changed(&namespace, true);
                }
                let held = match via {
                    Via::Announced { node } => self.links_announced(&namespace, publisher, node, Some(rid)),
                    Via::Upstream { .. } if publisher.core == self.core => {
                        self.links_forward_all(publisher.conn);
                        false
                    }
                    Via::Upstream { .. } => false,
                };
                self.with_owner(|owner, cx| owner.rendezvous(cx, &namespace));
                if !held {
                    self.send(publisher.core, IngestMsg::NamespaceKnown { conn: publisher.conn, rid });
                }
            }
            NamespaceMsg::NamespaceWithdrawn { namespace, publisher } => {
                if self.namespaces.remove(&namespace, publisher) {
                    self.discovery_changed(&namespace, false);
                }
                self.links_withdrawn(&namespace, publisher);
            }
        }
    }

    fn on_discovery_msg(&mut self, msg: DiscoveryMsg) {
        match msg {
            DiscoveryMsg::TrackAvailable { alias, track, properties } => {
                self.discovery_track(alias, track, properties)
            }
            DiscoveryMsg::TrackGone { alias } => self.discovery_track_gone(alias),
            DiscoveryMsg::Largest { alias, largest } => self.discovery_largest(alias, largest),
        }
    }

    fn on_event(&mut self, conn: u64, event: Event) {
        match event {
            Event::Ready { peer } => {
                if !self.is_link(conn) {
                    self.auth_setup(conn, &peer.auth_tokens);
                }
                self.links_ready(conn, &peer);
                self.send_goaway(conn)
            }
            Event::RequestMessage { .. } => {}
            Event::Message(msg) => self.on_control(conn, msg),
            Event::Cancelled { request_id } => self.on_cancelled(conn, request_id),
            Event::Object {
                stream,
                request_id,
                object: DataObject::Subgroup { header, object },
                payload,
            } => self.ingest_object(conn, stream, request_id, header, object, payload),
            // Fetch streams: answers to the relay's upstream FETCHes.
            Event::Object { stream, request_id, object, payload } => {
                self.upfetch_item(conn, stream, request_id, object, payload)
            }
            Event::DataStreamEnd { stream, reset } => {
                if !self.upfetch_stream_end(conn, stream, reset) {
                    self.ingest_stream_end(conn, stream, reset)
                }
            }
            Event::Datagram { request_id, header, payload } => {
                self.ingest_datagram(conn, request_id, header, payload)
            }
            Event::Closed { code, reason } => {
                debug!(conn, code, %reason, "session closed");
            }
        }
    }

    fn on_control(&mut self, conn: u64, msg: Message) {
        // Range filters (draft-22 §3.3.2) are allowed only up to our MAX_FILTER_RANGES, which
        // this relay does not offer (0): refused INVALID_FILTER, never accepted and ignored.
        if let Some(rid) = range_filtered(&msg) {
            return self.answer_error(
                conn,
                rid,
                RequestErrorCode::InvalidFilter,
                "range filters are not supported",
                true,
            );
        }
        // Until when the request is authorized (token mode): a subscription ends then.
        let mut until = None;
        if let Some((rid, params, namespace, right)) = needs_right(&msg) {
            match self.authorized(conn, rid, params, namespace, right) {
                Ok(t) => until = t,
                Err(Refused) => return,
            }
        }
        match msg {
            Message::PublishNamespace(m) => self.ingest_publish_namespace(conn, m),
            Message::PublishNamespaceDone(rid) => self.ingest_withdraw_namespace(conn, rid),
            Message::Subscribe(m) => self.fanout_subscribe(conn, m, until),
            Message::Unsubscribe(rid) => self.fanout_unsubscribe(conn, rid),
            Message::SubscribeOk(m) => self.ingest_subscribe_ok(conn, m),
            Message::RequestError(m) if self.discovery.is_push(conn, m.request_id) => {
                self.discovery_publish_refused(conn, m.request_id)
            }
            Message::RequestError(m) if self.links_answer(conn, m.request_id, Some(&m.reason)) => {}
            Message::RequestOk(m) if self.links_answer(conn, m.request_id, None) => {}
            Message::RequestError(m) if self.upfetch.has(conn, m.request_id) => {
                self.upfetch_refused(conn, m.request_id)
            }
            Message::RequestError(m) => self.ingest_request_error(conn, m),
            Message::Publish(m) => self.ingest_publish(conn, m),
            Message::PublishDone(m) => self.ingest_publish_done(conn, m),
            Message::TrackStatus(m) => {
                let alias = self.key.alias(&m.track);
                let (from, rid, who) = (self.core, m.request_id, self.requester(conn));
                let msg = OwnerMsg::Status { alias, track: m.track, from, conn, rid, who };
                self.send(self.owner_of(alias), msg);
            }
            Message::Fetch(m) => self.fetch_request(conn, m),
            Message::FetchCancel(rid) => self.fetch_cancel(conn, rid),
            Message::SubscribeNamespace(m) => self.discovery_subscribe(conn, m, until),
            Message::SubscribeTracks(m) => self.discovery_subscribe_tracks(conn, m, until),
            Message::PublishOk(m) => self.discovery_publish_ok(conn, m.request_id, &m.params),
            Message::RequestOk(m) if self.discovery.is_push(conn, m.request_id) => {
                self.discovery_publish_ok(conn, m.request_id, &m.params)
            }
            // An answer to one of the relay's REQUEST_UPDATEs upstream.
            Message::RequestOk(m) => self.ingest_update_answered(conn, m.request_id),
            Message::RequestUpdate(m) => self.on_request_update(conn, m),
            Message::GoAway(m) if self.is_link(conn) => self.links_goaway(conn, m.new_session_uri),
            // Responses to our REQUEST_UPDATE, GOAWAY, and what only a relay sends.
            _ => {}
        }
    }

    fn on_cancelled(&mut self, conn: u64, rid: RequestId) {
        if self.fanout.has(conn, rid) {
            self.fanout_unsubscribe(conn, rid);
        } else if self.discovery.has(conn, rid) {
            self.discovery_cancelled(conn, rid);
        } else if self.discovery.is_push(conn, rid) {
            self.discovery_publish_refused(conn, rid);
        } else if self.fetches.has(conn, rid) {
            self.fetch_cancel(conn, rid);
        } else if self.ingest.has_namespace(conn, rid) {
            self.ingest_withdraw_namespace(conn, rid);
        } else {
            self.ingest_cancelled(conn, rid);
        }
    }

    /// REQUEST_UPDATE (draft-16 §9.11, draft-22 §9.5) of a request of session `conn`:
    /// exactly one REQUEST_OK or REQUEST_ERROR. The relay answers at once, so no update is
    /// ever outstanding here (draft-22 MAX_REQUEST_UPDATES cannot be exceeded).
    fn on_request_update(&mut self, conn: u64, m: RequestUpdate) {
        let existing = m.existing_request_id;
        let Some(answer_rid) = self.sessions.get(&conn).map(|s| s.update_answer_id(&m)) else { return };
        let mut old_prefix = None;
        let result = if self.fanout.has(conn, existing) {
            self.fanout_update(conn, &m)
        } else if self.discovery.has(conn, existing) {
            self.discovery_update(conn, existing, &m.params).map(|old| {
                old_prefix = old;
                Parameters::default()
            })
        } else if let Some(ns) = self.ingest.published(conn, existing).cloned() {
            // The publisher updating its own PUBLISH (draft-22 §9.5, draft-16 §9.11): a new
            // token, which must grant what the PUBLISH does.
            update_allows(&m.params, &["AUTHORIZATION_TOKEN"]).and_then(|_| {
                match self.check_auth(conn, &m.params, &ns, Right::Publish) {
                    Ok(_) => Ok(Parameters::default()),
                    Err(Denied::Request(code, _)) => {
                        Err(UpdateError::Refused(code, "the token does not grant it"))
                    }
                    Err(Denied::Session(..)) => Err(UpdateError::Invalid("a token that cannot be used")),
                }
            })
        } else if self.fetches.has(conn, existing) || self.ingest.has_namespace(conn, existing) {
            update_allows(&m.params, &["AUTHORIZATION_TOKEN", "SUBSCRIBER_PRIORITY"])
                .map(|_| Parameters::default())
        } else {
            // A request the session knows (it checked) that is over, or one this relay took
            // no state for: nothing to update.
            Err(UpdateError::Refused(RequestErrorCode::DoesNotExist, "the request is no longer active"))
        };
        match result {
            Ok(params) => {
                self.answer_ok(conn, answer_rid, params);
                if let Some(old) = old_prefix {
                    self.discovery_updated(conn, existing, &old);
                }
            }
            Err(UpdateError::Invalid(what)) => {
                if let Some(s) = session(&mut self.sessions, &mut self.woken, conn) {
                    s.close(SessionCode::ProtocolViolation, format!("REQUEST_UPDATE: {what}"));
                }
            }
            Err(UpdateError::Refused(code, reason)) => {
                if self.fanout.has(conn, existing) {
                    self.answer_error(conn, answer_rid, code, reason, false);
                    self.fanout_update_failed(conn, existing);
                } else if self.discovery.has(conn, existing) {
                    // draft-22 §9.5.1: a failed namespace update closes the request stream.
                    self.answer_error(conn, answer_rid, code, reason, true);
                    self.discovery_cancelled(conn, existing);
                } else {
                    self.answer_error(conn, answer_rid, code, reason, false);
                }
            }
        }
    }

    /// The owner's answer to TRACK_STATUS: REQUEST_OK with LARGEST_OBJECT (and the Track
    /// Properties where the draft carries them); the request then ends.
    fn status_answer(
        &mut self,
        conn: u64,
        rid: RequestId,
        answer: Result<msg::TrackInfo, (RequestErrorCode, Bytes)>,
    ) {
        let info = match answer {
            Ok(info) => info,
            Err((code, reason)) => {
                return self.answer_error(conn, rid, code, &String::from_utf8_lossy(&reason), true)
            }
        };
        let Some(s) = session(&mut self.sessions, &mut self.woken, conn) else { return };
        if let Err(e) = s.track_status_ok(rid, info.largest, info.properties) {
            debug!(conn, error = %e, "TRACK_STATUS answer not sent");
        }
    }

    /// The SETUP's tokens authorize the whole session; a bad one closes it.
    fn auth_setup(&mut self, conn: u64, tokens: &[crate::wire::model::AuthToken]) {
        let Some(keys) = self.config.auth.clone() else { return };
        match SessionAuth::from_setup(&keys, tokens, self.config.auth_cache, auth::unix_now()) {
            Ok(a) => {
                self.auth.insert(conn, a);
            }
            Err(denied) => {
                let (code, why) = match denied {
                    Denied::Session(code, why) => (code, why),
                    Denied::Request(_, why) => (SessionCode::MalformedAuthToken, why),
                };
                if let Some(s) = session(&mut self.sessions, &mut self.woken, conn) {
                    s.close(code, why);
                }
            }
        }
    }

    /// Whether session `conn` may make request `rid` needing `right` on `namespace`: always
    /// in open mode (`Ok(None)`); otherwise a token (SETUP's or the request's) must grant it,
    /// and `Ok(Some(t))` says until when (the shard's clock). Answers REQUEST_ERROR
    /// (UNAUTHORIZED, MALFORMED_AUTH_TOKEN, EXPIRED_AUTH_TOKEN) or closes the session (token
    /// alias misuse) when not.
    fn authorized(
        &mut self,
        conn: u64,
        rid: RequestId,
        params: &Parameters,
        namespace: &crate::wire::model::TrackNamespace,
        right: Right,
    ) -> Result<Option<Instant>, Refused> {
        if self.is_link(conn) {
            return Ok(None); // our configured parent: trusted like the configuration
        }
        match self.check_auth(conn, params, namespace, right) {
            Ok(until) => Ok(until),
            Err(Denied::Request(code, why)) => {
                self.answer_error(conn, rid, code, why, true);
                Err(Refused)
            }
            Err(Denied::Session(code, why)) => {
                if let Some(s) = session(&mut self.sessions, &mut self.woken, conn) {
                    s.close(code, why);
                }
                Err(Refused)
            }
        }
    }

    /// [`RelayShard::authorized`] without the answer.
    fn check_auth(
        &mut self,
        conn: u64,
        params: &Parameters,
        namespace: &crate::wire::model::TrackNamespace,
        right: Right,
    ) -> Result<Option<Instant>, Denied> {
        let Some(keys) = self.config.auth.clone() else { return Ok(None) };
        let a = self.auth.entry(conn).or_default();
        let now = auth::unix_now();
        let until = a.authorize(&keys, &params.auth_tokens, namespace, right, self.config.auth_cache, now)?;
        Ok(Some(self.now + Duration::from_secs(until.saturating_sub(now))))
    }

    /// REQUEST_OK for request `rid` of session `conn`; false when it could not be sent.
    fn answer_ok(&mut self, conn: u64, rid: RequestId, params: Parameters) -> bool {
        let Some(s) = session(&mut self.sessions, &mut self.woken, conn) else { return false };
        let ok = Message::RequestOk(crate::wire::model::RequestOk {
            request_id: rid,
            params,
            track_properties: Default::default(),
        });
        match s.send(ok) {
            Ok(()) => true,
            Err(e) => {
                debug!(conn, error = %e, "REQUEST_OK not sent");
                false
            }
        }
    }

    /// REQUEST_ERROR `code` for request `rid` of session `conn`; `end`: the request is over
    /// (its stream ends where it has one).
    fn answer_error(&mut self, conn: u64, rid: RequestId, code: RequestErrorCode, reason: &str, end: bool) {
        let Some(s) = session(&mut self.sessions, &mut self.woken, conn) else { return };
        if let Err(e) = s.request_error(rid, code, reason) {
            debug!(conn, error = %e, "REQUEST_ERROR not sent");
        }
        if end {
            let _ = s.end_request(rid);
        }
    }
}
