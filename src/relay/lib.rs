//! `relay`: per-shard relay state (ARCHITECTURE.md, "The relay layer"). One [`RelayShard`]
//! per core holds that core's sessions and one value of each role type. Each role has its
//! own state, its own message enum (`msg.rs`) and its own file, and is called with the
//! shard's `Cx` (`cx.rs`: core, clock, configuration, namespace table, mail, counters); the
//! roles that talk to peers also get the core's `Sessions` (`sessions.rs`). A role never
//! touches another role's state: it sends it a message (`Cx::send`), or the shard passes one
//! role a read-only view of another (discovery asks the fan-out whether a session already subscribes).
//!
//! - `ingest.rs` (`Ingest`, publisher side): PUBLISH_NAMESPACE, upstream SUBSCRIBEs the relay
//!   sends, PUBLISHes it accepts, and upstream data streams, mapped from the publisher's Track
//!   Alias to the relay's.
//! - `upfetch.rs` (`UpFetches`): the relay's FETCHes to a publisher for what its cache lacks.
//! - `config.rs` (`RelayConfig`) and `admit.rs` (what a request passes before a role sees it:
//!   its right, admission under load, what a REQUEST_UPDATE may change).
//! - `owner.rs` (`Owner`, track owner, `alias % cores`): one entry per track with its single
//!   upstream subscription, the set of cores that have subscribers, the open upstream streams
//!   and the largest location; it aggregates subscriptions and forwards each object once per
//!   core. It never sees a session.
//! - `fanout.rs` and `fetch.rs` (`Fanout`, subscriber side): downstream subscriptions, their
//!   filters, one downstream subgroup stream per upstream stream per subscription, and the
//!   FETCHes of this core's sessions.
//! - `discovery.rs` (`Discovery`): SUBSCRIBE_NAMESPACE / SUBSCRIBE_TRACKS and the relay's
//!   PUBLISHes to namespace subscribers.
//! - `links.rs` (`Links`): the upstream links on this core, their routes and the
//!   announcements forwarded up them (`link_slot.rs` is the runtime's per-link state machine).
//!
//! The shard only routes: a peer's event goes to the role that holds its request (one lookup
//! in the request registry of `sessions.rs`), a message to the role it names. An object
//! crosses each role once: ingest → owner → fan-out. The shard never does I/O, reads no clock
//! and takes no lock but one (a request that needs a token reads `auth::KeyRing` under its
//! read lock): it writes into sans-IO [`Session`]s, names the sessions it wrote to
//! ([`RelayShard::take_woken`]), and returns messages for other cores
//! ([`RelayShard::take_outbox`]). Messages to itself are handled in the same turn.
//!
//! # Design notes (the decisions are in ARCHITECTURE.md, "The relay layer")
//!
//! - Objects: ingest gives each upstream stream a `StreamKey`, rewrites its header to the relay's
//!   alias (HMAC-SHA256 of the full track name) and sends `StreamOpen`, the objects and `StreamEnd`
//!   to the owner; the owner drops messages of a replaced upstream (`Epoch`), keeps the open
//!   streams and largest location, and sends each object once per subscriber core. The mesh never
//!   drops a relay message, so `shed.rs` bounds what a core queues toward another on both object
//!   hops: to a backed-up core (or one with half of `mesh_queue_mib` waiting) no new stream goes;
//!   an object past the limit resets its stream there; control messages always go.
//! - Upstream start: a subscriber's absolute start goes up as AbsoluteStart, none as unfiltered,
//!   a relative start as that (unfiltered to draft-16/18 publishers), the live filters as Largest
//!   Object; held SUBSCRIBEs take the widest; re-subscriptions stay at Largest Object. Later
//!   subscribers on a core already receiving the track are answered locally, except while the
//!   upstream is lost (they wait for the new SUBSCRIBE_OK, draft-22 §7).
//! - Backfill (`fanout/backfill.rs`, `owner/backfill.rs`): the fan-out takes no live object for
//!   the subscription until the owner's answer, which travels the same FIFO queue as the live
//!   objects; what lies before the cache is fetched upstream first (within FILL_TIMEOUT, 2 s)
//!   unless the upstream SUBSCRIBE asked for it already. Not for draft-22 FILL_PARAMETERS, nor for
//!   an unfiltered or next-object/next-group start (draft-22 §3.3.1).
//! - Slow subscribers: streams the `Pump` sheds or expires are attributed to subscriptions (the
//!   last 64 streams of each); `too_far_behind_streams` (4) within 10 s ends one TOO_FAR_BEHIND,
//!   except streams lost while the core is behind (over its admission threshold, or 2 s after its
//!   input waited 25 ms, `RelayConfig::behind_lag`), while the path is `PathState::Stalled`,
//!   within the freshness budget after a stream got through whole (`streams_finished`), or behind
//!   a newer group of a descending subscription. Ending them then turned overload into no
//!   delivery at all (bench/README.md "Overload").
//! - Freshness: each object's deadline is its kernel receive time (`Input::ReceiveLag`) plus
//!   `max_lag_ms`, or the subscriber's smaller delivery timeout; a late object is not sent and
//!   the `Pump` resets streams whose bytes expire while queued.
//! - Cache: eviction takes a track's oldest group in the order groups were created across the
//!   shard, never its latest; `known_from` is where the cache holds everything received; a FETCH
//!   before it gets End of Unknown Range, or an upstream FETCH (Unknown on failure, Timed-Out at
//!   FILL_TIMEOUT, at most 32 MiB held). Joining FETCH and fill ranges end at the subscription's
//!   Largest Location. The owner holds FETCH and TRACK_STATUS while the upstream is Pending.
//! - Merged publishers (`merge.rs`): one lane per subgroup named by its first publisher stream;
//!   an object goes down when its ID is past the last forwarded; a lane ends with its last
//!   publisher stream; datagrams once per Location. A cached object binds only publishers that
//!   fed the track with its source (`CachedObject::from`).
//! - Links: a lost link resets its streams downstream and tells owners `UpstreamLost`; the track
//!   goes `TrackState::Lost` and is re-routed every 500 ms and at once when a covering namespace
//!   appears. A parent's GOAWAY gives `UpstreamMoved`: groups the old subscription started come
//!   from it, later ones from the new (`handover.rs`); a GOAWAY within 30 s of connecting waits
//!   out the backoff; a slot keeps at most two replaced links.
//! - Authorization: `SessionAuth::authorize` returns until when a request is authorized; a
//!   subscription keeps it (`LocalSub::until`) and the fan-out's expiry heap ends it. Token
//!   aliases live in a per-session cache bounded by the MAX_AUTH_TOKEN_CACHE_SIZE advertised
//!   (4096 bytes).

#![warn(missing_docs, unreachable_pub)]

pub mod admission;
pub mod alias;
mod cache;
mod config;
mod cx;
pub mod directory;
mod discovery;
mod fanout;
mod fetch;
mod handover;
mod ingest;
mod input;
pub mod link_slot;
pub mod links;
mod malformed;
mod merge;
mod msg;
mod namespaces;
mod owner;
mod sessions;
mod shed;
mod stats;
mod upfetch;

use std::time::Instant;

use bytes::Bytes;
use tracing::debug;

use self::admission::{Admissions, AdmitAsk};
use self::alias::AliasKey;
pub use self::config::{over_admission_threshold, PublishForward, RelayConfig};
use self::cx::Cx;
pub use self::cx::BEHIND_WINDOW;
pub use self::fanout::PathState;
use self::fanout::StreamLoss;
pub use self::input::Input;
pub use self::msg::ConnId;
pub use self::msg::RelayMsg;
use self::msg::{DiscoveryMsg, IngestMsg, Msg, NamespaceMsg, OwnerMsg};
use self::namespaces::Via;
use self::sessions::{Holder, Sessions};
pub use self::stats::{latency_histogram, CounterDef, RelayStats};
use auth::{Denied, Right};
use session::SessionCode;
use session::{DataObject, Event, Session, StreamId};
use wire::model::{FullTrackName, GoAway, Message, Parameters, RequestId, RequestUpdate, TrackNamespace};
use wire::RequestErrorCode;

mod admit;
mod side_door;
mod upward;

use self::admit::{discovery_right, needs_right, range_filtered, update_allows, Refused, UpdateError};

/// One core's relay state (see the module header).
#[derive(Debug)]
pub struct RelayShard {
    /// What the roles share: the core, its clock, configuration, namespaces, mail, counters.
    cx: Cx,
    sessions: Sessions,
    owner: owner::Owner,
    ingest: ingest::Ingest,
    fanout: fanout::Fanout,
    discovery: discovery::Discovery,
    upfetch: upfetch::UpFetches,
    links: links::Links,
    /// Sessions held for the platform's verdict (`admission.rs`).
    admissions: admission::Admissions,
    /// When the links' next timer is due, as of their last tick.
    links_due: Option<Instant>,
}

impl RelayShard {
    /// The shard of core `core` of `cores`, starting at `now` of its clock, when the wall
    /// clock reads `unix_secs` (Unix seconds; see `Input::WallClock`).
    pub fn new(
        core: usize,
        cores: usize,
        config: RelayConfig,
        key: AliasKey,
        now: Instant,
        unix_secs: u64,
    ) -> Self {
        let cache_budget = config.cache_budget;
        RelayShard {
            cx: Cx::new(core, cores, config, key, now, unix_secs),
            sessions: Sessions::default(),
            owner: owner::Owner::new(cache_budget),
            ingest: ingest::Ingest::default(),
            fanout: fanout::Fanout::default(),
            discovery: discovery::Discovery::default(),
            upfetch: upfetch::UpFetches::default(),
            links: links::Links::default(),
            admissions: admission::Admissions::default(),
            links_due: None,
        }
    }

    /// Whether the core is over its admission threshold.
    pub fn over_load(&self) -> bool {
        over_admission_threshold(self.cx.load.busy_pct, self.cx.config.admission_busy_pct)
    }

    /// `Input::GoAway`.
    fn go_away(&mut self, timeout_ms: u64, sibling: Option<&str>) {
        if self.cx.goaway.is_some() {
            return;
        }
        let uri = match (self.cx.config.goaway_uri.is_empty(), sibling) {
            (true, Some(s)) => Bytes::from(s.to_string()),
            _ => self.cx.config.goaway_uri.clone(),
        };
        let goaway = GoAway { new_session_uri: uri, timeout_ms, request_id: None };
        let ready = self.sessions.downstream_ready();
        self.cx.goaway = Some(goaway);
        for conn in ready {
            self.send_goaway(conn);
        }
    }

    fn send_goaway(&mut self, conn: ConnId) {
        let Some(goaway) = self.cx.goaway.clone() else { return };
        if self.sessions.is_link(conn) {
            return; // GOAWAY goes from server to client; a link's parent is our server
        }
        if let Some(s) = self.sessions.get_mut(conn) {
            if let Err(e) = s.go_away(goaway) {
                debug!(%conn, error = %e, "GOAWAY not sent");
            }
        }
    }

    /// Subscriptions this core has visited on behalf of one session's streams or close, so
    /// far: each visit is to one of that session's subscriptions (tests and profiling; see
    /// ARCHITECTURE.md, "Aggregation and state").
    pub fn subscription_visits(&self) -> u64 {
        self.fanout.visits()
    }

    /// Upstream subscriptions this core's timers looked at, ever: those whose timer (a held
    /// PUBLISH_DONE, a renewal) came due, never every upstream at every tick.
    pub fn upstream_visits(&self) -> u64 {
        self.ingest.visits()
    }

    /// `Input::Shed` and `Input::Expired`: they count toward TOO_FAR_BEHIND
    /// (`Fanout::streams_lost`).
    fn streams_lost(&mut self, conn: ConnId, streams: &[StreamId], how: StreamLoss, path: PathState) {
        let resets = match how {
            StreamLoss::Backlog => &mut self.cx.stats.backlog_resets,
            StreamLoss::Lag => &mut self.cx.stats.lag_resets,
        };
        *resets += streams.len() as u64;
        self.fanout.streams_lost(&mut self.cx, &mut self.sessions, conn, streams, (how, path));
    }

    /// `Input::Session`.
    fn add_session(&mut self, conn: ConnId, mut session: Session) {
        session.set_log_id(self.cx.core, conn.0);
        self.sessions.insert(conn, session);
    }

    /// The shard's counters (the metrics endpoint reads them).
    pub fn stats(&self) -> &RelayStats {
        &self.cx.stats
    }

    /// The shard's counters, for the host's own (`control_not_read`) and to reset the
    /// latency histogram once read.
    pub fn stats_mut(&mut self) -> &mut RelayStats {
        &mut self.cx.stats
    }

    /// The shard's configuration.
    pub fn config(&self) -> &RelayConfig {
        &self.cx.config
    }

    /// Session `conn`, in its own turn (the runtime flushes it afterwards).
    pub fn session_mut(&mut self, conn: ConnId) -> Option<&mut Session> {
        self.sessions.in_turn(conn)
    }

    /// Sessions on this core.
    pub fn session_count(&self) -> usize {
        self.sessions.len()
    }

    /// Tracks this shard owns, downstream subscriptions and FETCHes in progress, and
    /// upstream subscriptions and FETCHes on it (for tests and metrics: all zero when nothing
    /// is relayed).
    pub fn state_counts(&self) -> (usize, usize, usize) {
        (
            self.owner.len(),
            self.fanout.len() + self.fanout.fetches_len(),
            self.ingest.len() + self.upfetch.len(),
        )
    }

    /// Namespaces announced (PUBLISH_NAMESPACE) by sessions of this core: local publishers'
    /// broadcasts, and those downstream relays forward.
    pub fn namespaces_announced(&self) -> usize {
        self.ingest.announced()
    }

    /// Whether session `conn` has events the relay would read now: none while it waits for
    /// the platform (they stay in it).
    pub fn has_events(&mut self, conn: ConnId) -> bool {
        !Admissions::holds(&self.cx, &self.sessions, conn)
            && self.sessions.in_turn(conn).is_some_and(|s| s.has_events())
    }

    /// The sessions to ask the platform about since the last call (`admission.rs`).
    pub fn take_admissions(&mut self) -> Vec<AdmitAsk> {
        self.admissions.take()
    }

    /// The namespaces at or below `prefix` this relay can serve (`GET /announced`): those
    /// discovery reports (announced here, at the parent relay, or elsewhere in the cluster),
    /// and those of this core's sessions' PUBLISHes (each core knows only its own: ask every
    /// core).
    pub fn namespaces_under(&self, prefix: &TrackNamespace) -> Vec<TrackNamespace> {
        side_door::namespaces_under(&self.cx, &self.ingest, prefix)
    }

    /// The core whose cache holds `track` (its owner).
    pub fn owner_core(&self, track: &FullTrackName) -> usize {
        alias::owner(self.cx.key.alias(track), self.cx.cores)
    }

    /// Group `group` of `track` (the newest cached when `None`) as this core's cache holds
    /// it, objects in order: its number and their payloads (`GET /fetch`). `None` when this
    /// core does not cache the track or that group (or every object of it expired).
    pub fn cached_group(
        &self,
        track: &FullTrackName,
        group: Option<u64>,
        now: Instant,
    ) -> Option<(u64, Vec<Bytes>)> {
        side_door::cached_group(&self.owner.cache, self.cx.key.alias(track), group, now)
    }

    /// Bytes of objects this shard caches.
    pub fn cache_bytes(&self) -> usize {
        self.owner.cache.bytes()
    }

    /// Handles every queued event of session `conn`, then the messages this shard sent
    /// itself.
    fn read_events(&mut self, conn: ConnId) {
        loop {
            if Admissions::holds(&self.cx, &self.sessions, conn) {
                break; // its events wait for the platform's verdict (`admission.rs`)
            }
            let Some(event) = self.sessions.in_turn(conn).and_then(Session::poll_event) else { break };
            self.on_event(conn, event);
        }
    }

    /// `Input::Gone`.
    fn remove_session(&mut self, conn: ConnId) {
        if !self.sessions.remove(conn) {
            return;
        }
        debug!(core = self.cx.core, %conn, "connection gone");
        let (cx, sessions) = (&mut self.cx, &mut self.sessions);
        self.fanout.session_closed(cx, sessions, conn);
        self.discovery.session_closed(conn);
        self.upfetch.session_closed(cx, conn);
        self.ingest.session_closed(cx, sessions, conn);
        self.links.session_closed(cx, conn);
        self.sessions.forget_peer(conn);
    }

    /// What the host tells the relay, at `now` of the shard's clock (`input.rs`); then the
    /// messages the relay sent itself meanwhile are handled.
    pub fn handle(&mut self, now: Instant, input: Input<'_>) {
        self.cx.now = now;
        match input {
            Input::Session(conn, session) => self.add_session(conn, session),
            Input::Link { conn, session, routes, replaces, directory } => {
                self.add_link(conn, session, routes, replaces, directory)
            }
            Input::Events(conn) => self.read_events(conn),
            Input::Gone(conn) => self.remove_session(conn),
            Input::Message(msg) => self.dispatch(msg),
            Input::Timers => self.timers(),
            Input::Shed { conn, streams, path } => {
                self.streams_lost(conn, streams, StreamLoss::Backlog, path)
            }
            Input::Expired { conn, streams, path } => self.streams_lost(conn, streams, StreamLoss::Lag, path),
            Input::Finished { conn, streams } => self.fanout.streams_finished(now, conn, streams),
            Input::Admitted { conn, verdict } => {
                Admissions::verdict(&self.cx, &mut self.sessions, conn, verdict)
            }
            Input::DirectoryAnswer { namespace, found } => self.directory_answer(namespace, found),
            Input::RemoteNamespace { namespace, on } => self.remote_namespace(namespace, on),
            Input::LinkRoute { conn, prefix, on } => self.link_route(conn, prefix, on),
            Input::GoAway { timeout_ms, sibling } => self.go_away(timeout_ms, sibling),
            Input::WallClock(unix_secs) => self.cx.set_wall_clock(now, unix_secs),
            Input::ReceiveLag(lag) => {
                self.cx.load.receive_lag = lag;
                if lag >= self.cx.config.behind_lag {
                    self.cx.load.behind_at = Some(now);
                }
            }
            Input::MeshBacklog { congested, bytes } => self.cx.mail.set_backlog(congested, bytes),
            Input::Load(busy_pct) => self.cx.load.busy_pct = busy_pct,
        }
        self.run_local();
    }

    /// `Input::Timers`: each role's due timers.
    fn timers(&mut self) {
        let (cx, sessions) = (&mut self.cx, &mut self.sessions);
        self.owner.tick(cx);
        self.ingest.tick(cx, sessions);
        self.fanout.tick(cx, sessions);
        self.links_due = self.links.tick(cx);
    }

    /// When the relay's next timer is due (`Input::Timers` then), as of the last call.
    pub fn poll_timeout(&self) -> Option<Instant> {
        [self.owner.next_deadline(), self.ingest.next_deadline(), self.fanout.next_deadline(), self.links_due]
            .into_iter()
            .flatten()
            .min()
    }

    /// Messages for other cores, in order: (core, message, its weight, `RelayMsg::weight`).
    pub fn take_outbox(&mut self, out: &mut Vec<(usize, RelayMsg, usize)>) {
        self.cx.mail.take_outbox(out);
    }

    /// Sessions written to since the last call.
    pub fn take_woken(&mut self, out: &mut Vec<ConnId>) {
        self.sessions.take_woken(out);
    }

    fn run_local(&mut self) {
        while let Some(msg) = self.cx.mail.next_local() {
            self.dispatch(msg);
        }
    }

    /// Routes a message to the role it is for.
    fn dispatch(&mut self, msg: RelayMsg) {
        let (cx, sessions) = (&mut self.cx, &mut self.sessions);
        match msg.0 {
            Msg::Owner(m) => self.owner.on_msg(cx, m),
            Msg::Fanout(m) => self.fanout.on_msg(cx, sessions, m),
            Msg::Ingest(m) => self.ingest.on_msg(cx, sessions, m),
            Msg::UpFetch(m) => self.upfetch.on_msg(cx, sessions, m),
            Msg::Namespace(m) => self.on_namespace_msg(m),
            Msg::Discovery(m) => match m {
                DiscoveryMsg::TrackAvailable { alias, track, properties } => {
                    self.discovery.track(cx, &self.fanout, alias, track, properties)
                }
                DiscoveryMsg::TrackGone { alias } => self.discovery.track_gone(alias),
                DiscoveryMsg::Largest { alias, largest } => {
                    self.discovery.largest(cx, sessions, &self.fanout, alias, largest)
                }
            },
        }
    }

    /// The namespace table changed: every role that follows it hears (discovery, links, the
    /// owner's held SUBSCRIBEs).
    fn on_namespace_msg(&mut self, msg: NamespaceMsg) {
        match msg {
            NamespaceMsg::NamespaceAnnounced { namespace, publisher, rid, via } => {
                let known = self.cx.namespaces.insert(namespace.clone(), publisher, via);
                let (cx, sessions) = (&mut self.cx, &mut self.sessions);
                if known {
                    self.discovery.changed(sessions, &namespace, true);
                }
                let held = match via {
                    Via::Announced { node } => {
                        if publisher.core == cx.core && !sessions.is_link(publisher.conn) {
                            cx.directory.announced(&namespace, publisher.conn);
                        }
                        self.links.announced(cx, sessions, &namespace, publisher, node, Some(rid))
                    }
                    Via::Upstream { .. } if publisher.core == cx.core => {
                        self.links.forward_all(cx, sessions, publisher.conn);
                        false
                    }
                    Via::Upstream { .. } | Via::Remote => false,
                    // Nothing to confirm: the parent said it, no session here asked.
                    Via::Parent => true,
                };
                self.owner.rendezvous(cx, &namespace);
                if matches!(via, Via::Upstream { .. }) {
                    // A route now better than what some tracks come from (a namespace that
                    // moved to another relay): they move to it, make before break.
                    self.owner.route_added(cx, &namespace, publisher);
                }
                if !held {
                    cx.send(publisher.core, IngestMsg::NamespaceKnown { conn: publisher.conn, rid });
                }
            }
            NamespaceMsg::NamespaceWithdrawn { namespace, publisher } => {
                let gone = self.cx.namespaces.remove(&namespace, publisher);
                let (cx, sessions) = (&mut self.cx, &mut self.sessions);
                if publisher.core == cx.core {
                    cx.directory.withdrawn(&namespace, publisher.conn);
                }
                if gone {
                    self.discovery.changed(sessions, &namespace, false);
                }
                self.links.withdrawn(cx, sessions, &namespace, publisher);
            }
        }
    }

    fn on_event(&mut self, conn: ConnId, event: Event) {
        let (cx, sessions) = (&mut self.cx, &mut self.sessions);
        match event {
            Event::Ready { peer } if cx.config.admission && !sessions.is_link(conn) => {
                self.admissions.hold(sessions, conn, &peer);
                self.send_goaway(conn)
            }
            Event::Ready { peer } => {
                if !sessions.is_link(conn) {
                    sessions.auth_setup(cx, conn, &peer.auth_tokens);
                }
                if let Some(up) = self.links.ready(cx, sessions, conn, &peer) {
                    for (rid, namespace) in up.routes {
                        self.ingest.add_route(sessions, conn, rid, namespace);
                    }
                    if let Some(old) = up.replaces {
                        self.link_replaced(old);
                    }
                }
                self.send_goaway(conn)
            }
            Event::RequestMessage { request_id, message } => {
                let (namespace, on) = match &message {
                    Message::Namespace(suffix) => {
                        (self.links.parent_namespace(conn, request_id, suffix), true)
                    }
                    Message::NamespaceDone(suffix) => {
                        (self.links.parent_namespace(conn, request_id, suffix), false)
                    }
                    _ => (None, false),
                };
                if let Some(namespace) = namespace {
                    self.ingest.parent_namespace(cx, conn, request_id, namespace, on);
                }
            }
            Event::Message(msg) => {
                // Every request and answer a peer sends (the relay's own: `Session::send`).
                debug!(core = self.cx.core, %conn, ?msg, "message in");
                self.on_control(conn, msg)
            }
            Event::Cancelled { request_id } => {
                debug!(core = self.cx.core, %conn, rid = request_id.0, "request cancelled by the peer");
                self.on_cancelled(conn, request_id)
            }
            Event::Object { stream, request_id, object: object @ DataObject::Subgroup { .. }, payload } => {
                self.ingest.object(cx, conn, stream, request_id, object, payload)
            }
            // Fetch streams: answers to the relay's upstream FETCHes.
            Event::Object { stream, request_id, object, payload } => {
                self.upfetch.item(cx, conn, stream, request_id, object, payload)
            }
            Event::DataStreamEnd { stream, reset } => {
                if !self.upfetch.stream_end(cx, sessions, conn, stream, reset) {
                    self.ingest.stream_end(cx, sessions, conn, stream, reset)
                }
            }
            Event::Datagram { request_id, header, payload } => {
                self.ingest.datagram(cx, conn, request_id, header, payload)
            }
            Event::Closed { code, reason } => {
                debug!(core = self.cx.core, %conn, code, %reason, "session closed");
            }
        }
    }

    /// Link `old`'s replacement is up (its routes announced to every core before this): the
    /// old routes are withdrawn, and every owner moves the old link's tracks (make before
    /// break: the old link closes once none is left on it, [`RelayShard::link_moved_out`]).
    /// Again when a replacement that failed is itself replaced.
    fn link_replaced(&mut self, old: ConnId) {
        let (cx, sessions) = (&mut self.cx, &mut self.sessions);
        let Some(routes) = self.links.mark_moved(old) else { return };
        for rid in routes {
            self.ingest.withdraw_namespace(cx, sessions, old, rid);
        }
        let from = cx.me(old);
        for core in 0..cx.cores {
            cx.send(core, OwnerMsg::UpstreamMoved { from });
        }
    }

    fn on_control(&mut self, conn: ConnId, msg: Message) {
        // Range filters (draft-22 §3.3.2) are allowed only up to our MAX_FILTER_RANGES, which
        // this relay does not offer (0): refused INVALID_FILTER, never accepted and ignored.
        if let Some(rid) = range_filtered(&msg) {
            let reason = "range filters are not supported";
            return self.sessions.answer_error(conn, rid, RequestErrorCode::InvalidFilter, reason, true);
        }
        // Admission under load: a core over its budget takes no new subscription or FETCH
        // (REQUEST_ERROR EXCESSIVE_LOAD, draft-22 §15.7.1); what it serves goes on, and so do
        // publishers' requests and answers, which bring data rather than ask for it.
        if let Some(rid) = self.admission_refused(&msg) {
            let reason = "relay over its load budget";
            return self.sessions.answer_error(conn, rid, RequestErrorCode::ExcessiveLoad, reason, true);
        }
        // Until when the request is authorized (token mode): a subscription ends then.
        let mut until = None;
        if let Some((rid, params, namespace, right)) = needs_right(&msg) {
            match self.authorized(conn, rid, params, namespace, right) {
                Ok(t) => until = t,
                Err(Refused) => return,
            }
        }
        let mut scope = auth::Scope::All;
        if let Some((rid, params, prefix)) = discovery_right(&msg) {
            match self.authorized_discovery(conn, rid, params, prefix) {
                Ok(Some((t, s))) => (until, scope) = (Some(t), s),
                Ok(None) => {}
                Err(Refused) => return,
            }
        }
        let (cx, sessions) = (&mut self.cx, &mut self.sessions);
        match msg {
            Message::PublishNamespace(m) => self.ingest.publish_namespace(cx, sessions, conn, m),
            Message::PublishNamespaceDone(rid) => self.ingest.withdraw_namespace(cx, sessions, conn, rid),
            Message::Subscribe(m) => self.fanout.subscribe(cx, sessions, conn, m, until),
            Message::Unsubscribe(rid) => self.fanout.unsubscribe(cx, sessions, conn, rid),
            Message::SubscribeOk(m) => self.ingest.subscribe_ok(cx, sessions, conn, m),
            // Answers to the relay's own requests go to the role that made the request.
            Message::RequestError(m) => match sessions.role(conn, m.request_id) {
                Some(Holder::Offer) => self.discovery.publish_refused(sessions, conn, m.request_id),
                Some(Holder::Forwarded) => self.links.answer(cx, conn, m.request_id, Some(&m.reason)),
                Some(Holder::UpFetch) => self.upfetch.refused(cx, sessions, conn, m.request_id),
                Some(Holder::Discovering) => self.links.discovery_ended(sessions, conn, m.request_id),
                _ => self.ingest.request_error(cx, sessions, conn, m),
            },
            Message::RequestOk(m) => match sessions.role(conn, m.request_id) {
                Some(Holder::Forwarded) => self.links.answer(cx, conn, m.request_id, None),
                Some(Holder::Offer) => self.publish_accepted(conn, m.request_id, &m.params),
                Some(Holder::Discovering) => {}
                // An answer to one of the relay's REQUEST_UPDATEs upstream.
                _ => self.ingest.update_answered(sessions, conn, m.request_id),
            },
            Message::Publish(m) => self.ingest.publish(cx, sessions, conn, m),
            Message::PublishDone(m) => self.ingest.publish_done(cx, sessions, conn, m),
            Message::TrackStatus(m) => {
                let alias = cx.key.alias(&m.track);
                let (from, rid, who) = (cx.core, m.request_id, sessions.requester(conn));
                let msg = OwnerMsg::Status { alias, track: m.track, from, conn, rid, who };
                cx.send(cx.owner_of(alias), msg);
            }
            Message::Fetch(m) => self.fanout.fetch_request(cx, sessions, conn, m),
            Message::FetchCancel(rid) => self.fanout.fetch_cancel(sessions, conn, rid),
            Message::SubscribeNamespace(m) => {
                self.discovery.subscribe(cx, sessions, &self.fanout, conn, m, (until, scope))
            }
            Message::SubscribeTracks(m) => {
                self.discovery.subscribe_tracks(cx, sessions, &self.fanout, conn, m, (until, scope))
            }
            Message::PublishOk(m) => self.publish_accepted(conn, m.request_id, &m.params),
            Message::RequestUpdate(m) => self.on_request_update(conn, m),
            Message::GoAway(m) if sessions.is_link(conn) => self.links.goaway(conn, m.new_session_uri),
            // Responses to our REQUEST_UPDATE, GOAWAY, and what only a relay sends.
            _ => {}
        }
    }

    /// A namespace subscriber accepted the relay's PUBLISH `rid`: it becomes a subscription.
    fn publish_accepted(&mut self, conn: ConnId, rid: RequestId, params: &Parameters) {
        let (cx, sessions) = (&mut self.cx, &mut self.sessions);
        if let Some(a) = self.discovery.publish_ok(sessions, conn, rid, params) {
            self.fanout.accepted_publish(cx, sessions, conn, rid, a);
        }
    }

    /// The peer cancelled request `rid` (draft-16: UNSUBSCRIBE-like stream ends; draft-22: a
    /// reset or STOP_SENDING of its request stream).
    fn on_cancelled(&mut self, conn: ConnId, rid: RequestId) {
        let (cx, sessions) = (&mut self.cx, &mut self.sessions);
        match sessions.role(conn, rid) {
            Some(Holder::Subscription) => self.fanout.unsubscribe(cx, sessions, conn, rid),
            Some(Holder::NamespaceSub) => self.discovery.cancelled(sessions, conn, rid),
            Some(Holder::Offer) => self.discovery.publish_refused(sessions, conn, rid),
            Some(Holder::Fetch) => self.fanout.fetch_cancel(sessions, conn, rid),
            Some(Holder::Namespace) => self.ingest.withdraw_namespace(cx, sessions, conn, rid),
            Some(Holder::Discovering) => self.links.discovery_ended(sessions, conn, rid),
            _ => self.ingest.cancelled(cx, sessions, conn, rid),
        }
    }

    /// REQUEST_UPDATE (draft-16 §9.11, draft-22 §9.5) of a request of session `conn`:
    /// exactly one REQUEST_OK or REQUEST_ERROR. The relay answers at once, so no update is
    /// ever outstanding here (draft-22 MAX_REQUEST_UPDATES cannot be exceeded).
    fn on_request_update(&mut self, conn: ConnId, m: RequestUpdate) {
        let existing = m.existing_request_id;
        let Some(answer_rid) = self.sessions.get(conn).map(|s| s.update_answer_id(&m)) else { return };
        let role = self.sessions.role(conn, existing);
        let (cx, sessions) = (&mut self.cx, &mut self.sessions);
        let mut old_prefix = None;
        let result = match role {
            Some(Holder::Subscription) => self.fanout.update(cx, sessions, conn, &m),
            Some(Holder::NamespaceSub) => discovery_update_scope(cx, sessions, conn, &m.params)
                .and_then(|scope| self.discovery.update(conn, existing, &m.params, scope))
                .map(|old| {
                    old_prefix = old;
                    Parameters::default()
                }),
            Some(Holder::Upstream) => match self.ingest.published(conn, existing).cloned() {
                // The publisher updating its own PUBLISH (draft-22 §9.5, draft-16 §9.11): a new
                // token, which must grant what the PUBLISH does.
                Some(ns) => update_allows(&m.params, &["AUTHORIZATION_TOKEN"]).and_then(|_| {
                    match sessions.check_auth(cx, conn, &m.params, &ns, Right::Publish) {
                        Ok(_) => Ok(Parameters::default()),
                        Err(Denied::Request(code, _)) => {
                            Err(UpdateError::Refused(code, "the token does not grant it"))
                        }
                        Err(Denied::Session(..)) => Err(UpdateError::Invalid("a token that cannot be used")),
                    }
                }),
                None => {
                    Err(UpdateError::Refused(RequestErrorCode::DoesNotExist, "not a request it may update"))
                }
            },
            Some(Holder::Fetch | Holder::Namespace) => {
                update_allows(&m.params, &["AUTHORIZATION_TOKEN", "SUBSCRIBER_PRIORITY"])
                    .map(|_| Parameters::default())
            }
            // A request the session knows (it checked) that is over, or one this relay took
            // no state for: nothing to update.
            _ => Err(UpdateError::Refused(RequestErrorCode::DoesNotExist, "the request is no longer active")),
        };
        match result {
            Ok(params) => {
                sessions.answer_ok(conn, answer_rid, params);
                if let Some(old) = old_prefix {
                    self.discovery.updated(cx, sessions, conn, existing, &old);
                }
            }
            Err(UpdateError::Invalid(what)) => {
                sessions.close(conn, SessionCode::ProtocolViolation, format!("REQUEST_UPDATE: {what}"));
            }
            Err(UpdateError::Refused(code, reason)) => match role {
                Some(Holder::Subscription) => {
                    sessions.answer_error(conn, answer_rid, code, reason, false);
                    self.fanout.update_failed(cx, sessions, conn, existing);
                }
                Some(Holder::NamespaceSub) => {
                    // draft-22 §9.5.1: a failed namespace update closes the request stream.
                    sessions.answer_error(conn, answer_rid, code, reason, true);
                    self.discovery.cancelled(sessions, conn, existing);
                }
                _ => sessions.answer_error(conn, answer_rid, code, reason, false),
            },
        }
    }
}

/// What a namespace subscription whose prefix an update changes may see from then on, in
/// token mode: the new prefix is authorized like a new SUBSCRIBE_NAMESPACE, with the SETUP's
/// tokens and the update's own (`Sessions::check_discovery`); `None` when nothing changes
/// (no new prefix, open mode, or an upstream link).
fn discovery_update_scope(
    cx: &Cx,
    sessions: &mut Sessions,
    conn: ConnId,
    params: &Parameters,
) -> Result<Option<auth::Scope>, UpdateError> {
    let Some(prefix) = &params.track_namespace_prefix else { return Ok(None) };
    if sessions.is_link(conn) {
        return Ok(None);
    }
    match sessions.check_discovery(cx, conn, params, prefix) {
        Ok(checked) => Ok(checked.map(|(_, scope)| scope)),
        Err(Denied::Request(code, why)) => Err(UpdateError::Refused(code, why)),
        Err(Denied::Session(..)) => Err(UpdateError::Invalid("a token that cannot be used")),
    }
}
