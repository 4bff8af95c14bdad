//! The subscriber side of a shard: downstream subscriptions of its sessions, grouped by the
//! relay's Track Alias. The first local subscription of a track asks the owner; later ones
//! on a core that already receives the track are answered at once from local state. Each
//! upstream stream becomes one downstream subgroup stream per subscription, opened at the
//! first object that passes the subscription's filter; objects are written in the order they
//! arrive, payloads shared, never copied.

use crate::msg::ConnId;
use ahash::HashMap;

mod backfill;
mod data;
mod ends;
mod subs;

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::time::{Duration, Instant};

use bytes::Bytes;
use tracing::debug;

use super::discovery::Accepted;
use super::fetch::{fetch_range, Fetches};
use super::msg::{
    Data, FanoutMsg, FetchAsk, FetchBound, FetchStart, OwnerMsg, StreamKey, TrackInfo, UpStart,
};
use super::sessions::{Holder, Sessions};
use crate::admit::{update_allows, UpdateError};
use crate::cache::CachedObject;
use crate::cx::unheeded;
use crate::cx::Cx;
use auth::{Denied, Right};
use data::{datagram_out, object_out, stream_end};
use ends::Losses;
use session::{data_urgency, SessionCode, StreamId};
use subs::{PerSession, Subs};
use wire::model::property_type as pt;
use wire::model::{
    FullTrackName, Location, LocationFilter, Message, Parameters, Properties, RequestId, RequestUpdate,
    SubgroupHeader, Subscribe, SubscribeOk, TrackAlias,
};
use wire::{DoneStatus, RequestErrorCode, ResetCode};

#[derive(Debug)]
struct LocalSub {
    conn: ConnId,
    rid: RequestId,
    /// Made by the relay's PUBLISH to a namespace subscriber (no SUBSCRIBE_OK to send).
    pushed: bool,
    /// SUBSCRIBER_PRIORITY (lower first; 128 when absent).
    priority: u8,
    /// GROUP_ORDER Descending: newer groups' streams go first among equals.
    descending: bool,
    /// The subscriber asked for a group order; if not, the track's is used once known
    /// (draft-22 §5.1: the publisher's DEFAULT_PUBLISHER_GROUP_ORDER).
    order_asked: bool,
    filter: Option<LocationFilter>,
    /// First and last Location delivered (set when Established).
    start: Location,
    end: Option<Location>,
    forward: bool,
    established: bool,
    /// Data streams opened for this subscription (PUBLISH_DONE Stream Count).
    streams: u64,
    /// The upstream subgroups it is being sent, and their downstream streams.
    open: Vec<(StreamKey, Down)>,
    /// What it lost and got through, for TOO_FAR_BEHIND (`fanout/ends.rs`).
    losses: Losses,
    /// The Largest Location when it became Established (joining FETCHes end there).
    largest_at_start: Option<Location>,
    /// Joining FETCHes (draft-16) that arrived before SUBSCRIBE_OK.
    joins: Vec<Join>,
    /// draft-22 FILL_PARAMETERS: a fill fetch stream when it becomes Established.
    fill: Option<Box<Parameters>>,
    /// The subscriber's delivery timeouts (draft-22 OBJECT_ / SUBGROUP_DELIVERY_TIMEOUT,
    /// draft-16 DELIVERY_TIMEOUT as the object one); `None`: not set, or 0.
    timeouts: Timeouts,
    /// When its authorization (token) runs out: SUBSCRIBE_OK says so in EXPIRES, and the
    /// relay ends it then (PUBLISH_DONE EXPIRED) unless REQUEST_UPDATE brings a newer token.
    until: Option<Instant>,
    /// The owner's cached objects of its window are on their way ([`Fanout::backfill`]):
    /// until they arrive, objects that arrive live are in them, or follow them.
    backfilling: bool,
}

impl LocalSub {
    /// Whether an object at `at` goes to this subscription now: forwarding, Established, and
    /// inside its filter's window.
    fn wants(&self, at: Location) -> bool {
        self.forward
            && self.established
            && !self.backfilling
            && at >= self.start
            && self.end.is_none_or(|e| at <= e)
    }

    /// Whether it is sent the cached objects of its window that arrived before it became
    /// Established: a start at or before the Largest Location, absolute (draft-16 and
    /// draft-18 §5.1.2: the Start Location "MAY be less than the Largest Object observed at
    /// the publisher"; draft-22 §3.3.1: such a filter "is always valid") or a number of
    /// groups back from the largest (draft-22 §9.20.9 RelativeStart: the groups it names are
    /// past ones, and "only objects with Locations within the inclusive range pass",
    /// §3.3.1), unless draft-22 FILL_PARAMETERS asks for them on a fill fetch stream
    /// instead. Without a filter, or from the next object or group, it takes what arrives from
    /// now on.
    fn wants_backfill(&self, largest: Option<Location>) -> bool {
        let past = matches!(
            self.filter,
            Some(
                LocationFilter::AbsoluteStart { .. }
                    | LocationFilter::AbsoluteStartGroupEnd { .. }
                    | LocationFilter::AbsoluteRange { .. }
                    | LocationFilter::RelativeStart { groups_back: 1.. }
            )
        );
        past && self.forward && self.fill.is_none() && largest.is_some_and(|l| self.start <= l)
    }
}

/// Object and subgroup delivery timeouts (draft-22 §5.2); `None` is "no timeout".
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Timeouts {
    object: Option<Duration>,
    subgroup: Option<Duration>,
}

impl Timeouts {
    fn from_params(p: &Parameters) -> Timeouts {
        let ms = |v: Option<u64>| v.filter(|&v| v > 0).map(Duration::from_millis);
        Timeouts { object: ms(p.object_delivery_timeout), subgroup: ms(p.subgroup_delivery_timeout) }
    }

    /// The publisher's: each value from `first` (the properties of a subgroup's first object)
    /// when it carries one, else from the track's properties. The track's MAX_CACHE_DURATION
    /// (draft-22 §10.3: no object is forwarded once it is older) bounds the object timeout.
    fn from_properties(track: &Properties, first: Option<&Properties>) -> Timeouts {
        let get = |ty: u64| {
            first
                .and_then(|p| p.int(ty))
                .or_else(|| track.int(ty))
                .filter(|&v| v > 0)
                .map(Duration::from_millis)
        };
        let max_age = super::owner::max_cache_duration(track).filter(|d| !d.is_zero());
        Timeouts {
            object: smaller(get(pt::OBJECT_DELIVERY_TIMEOUT), max_age),
            subgroup: get(pt::SUBGROUP_DELIVERY_TIMEOUT),
        }
    }

    /// The effective values: the smaller of the two where both are set.
    fn with(self, other: Timeouts) -> Timeouts {
        Timeouts {
            object: smaller(self.object, other.object),
            subgroup: smaller(self.subgroup, other.subgroup),
        }
    }
}

/// The smaller of two optional timeouts (`None`: not set).
fn smaller(a: Option<Duration>, b: Option<Duration>) -> Option<Duration> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// Whether a session's path was delivering when its streams were lost (the host tells, from
/// its transport's acknowledgements: `moqt::Pump::path_state`). Losses on a path that has
/// delivered nothing for a while (an outage: a tunnel, a Wi-Fi handover) do not count toward
/// TOO_FAR_BEHIND: the freshness budget drops what went stale meanwhile, and when the path
/// comes back the subscriber resumes at the live edge. A slow path that keeps delivering less
/// than the track needs does count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathState {
    /// The peer acknowledged data recently.
    Delivering,
    /// Nothing acknowledged for a while.
    Stalled,
}

/// How a subscriber's streams were lost in its session's transport ([`Fanout::streams_lost`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum StreamLoss {
    /// Shed from a backlog over its limit.
    Backlog,
    /// Reset because an object's time ran out before QUIC took it.
    Lag,
}

/// What a subscription has for one upstream subgroup it was sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Down {
    /// Our downstream stream, open.
    Open(StreamId),
    /// Its delivery timed out: no stream is (re)opened for the rest of it (draft-22 §5.2).
    TimedOut,
}

impl Down {
    fn stream(self) -> Option<StreamId> {
        match self {
            Down::Open(id) => Some(id),
            Down::TimedOut => None,
        }
    }
}

/// A draft-16 Joining FETCH (§9.16 "Joining Fetch Range Calculation").
#[derive(Debug, Clone, Copy)]
pub(super) struct Join {
    pub rid: RequestId,
    /// Relative (Joining Start groups before the Largest) or absolute (from that group).
    pub relative: bool,
    pub start: u64,
    pub descending: bool,
}

/// How a subscription came to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum By {
    /// The peer's SUBSCRIBE (answered with SUBSCRIBE_OK).
    Subscribe,
    /// The peer accepted the relay's PUBLISH (nothing more to answer).
    AcceptedPublish,
}

/// A subscription asked for: of `track`, with `params`, authorized until `until`.
struct Asked<'a> {
    track: FullTrackName,
    params: &'a Parameters,
    until: Option<Instant>,
    by: By,
}

/// Why the relay ends a subscription ([`Fanout::end_sub`]): the reset code of its open
/// streams, the PUBLISH_DONE status and reason.
#[derive(Debug, Clone, Copy)]
enum Ending {
    /// Its authorization ran out.
    Expired,
    /// A REQUEST_UPDATE of it failed.
    UpdateFailed,
    /// It kept losing streams to its session's backlog.
    TooFarBehind,
}

impl Ending {
    fn codes(self) -> (ResetCode, DoneStatus, &'static [u8]) {
        match self {
            Ending::Expired => (ResetCode::ExpiredAuthToken, DoneStatus::Expired, b"authorization expired"),
            Ending::UpdateFailed => (ResetCode::Cancelled, DoneStatus::UpdateFailed, b"update failed"),
            Ending::TooFarBehind => (ResetCode::TooFarBehind, DoneStatus::TooFarBehind, b"too far behind"),
        }
    }
}

/// A joining FETCH's range: from its Joining Start through the subscription's Largest
/// Location at SUBSCRIBE_OK.
fn join_ask(
    core: usize,
    conn: ConnId,
    j: Join,
    largest: Option<Location>,
    priority: u8,
) -> Result<FetchAsk, &'static str> {
    let l = largest.ok_or("no objects published yet")?;
    let start = if j.relative {
        Location::new(l.group.saturating_sub(j.start), 0)
    } else {
        Location::new(j.start, 0)
    };
    if start > l {
        return Err("the joining start is after the largest object");
    }
    let (end, cap) = (FetchBound::Object(l), Some(l));
    Ok(FetchAsk {
        from: core,
        conn,
        rid: j.rid,
        start: FetchStart::At(start),
        end,
        descending: j.descending,
        cap,
        fill: false,
        fill_timeout: None,
        priority,
    })
}

/// A draft-22 fill fetch stream's range (§3.4) for subscription `sub` with FILL_PARAMETERS
/// `fill`, named by Request ID `rid` (the SUBSCRIBE's, or a REQUEST_UPDATE's); `None` when
/// it selects nothing or the subscription is paused.
fn fill_ask(
    core: usize,
    sub: &LocalSub,
    fill: &Parameters,
    rid: RequestId,
    largest: Option<Location>,
) -> Option<FetchAsk> {
    let l = largest?;
    let (start, end) = fetch_range(fill.location_filter.or(sub.filter))?;
    let start = match start {
        FetchStart::At(s) => s,
        FetchStart::GroupsBack(n) => Location::new((l.group + 1).saturating_sub(n), 0),
    };
    if start > l || !sub.forward {
        return None;
    }
    let descending = fill.group_order == Some(wire::model::GroupOrder::Descending);
    let start = FetchStart::At(start);
    let fill_timeout = fill.fill_timeout.map(Duration::from_millis);
    Some(FetchAsk {
        from: core,
        conn: sub.conn,
        rid,
        start,
        end,
        descending,
        cap: Some(l),
        fill: true,
        fill_timeout,
        priority: sub.priority,
    })
}

/// EXPIRES for a subscription authorized until `until` (at least 1: 0 means "never").
fn expires_ms(until: Option<Instant>, now: Instant) -> Option<u64> {
    until.map(|t| u64::try_from(t.saturating_duration_since(now).as_millis()).unwrap_or(u64::MAX).max(1))
}

/// SUBSCRIBER_PRIORITY and publisher priority when absent (the middle of the range).
pub(super) const DEFAULT_PRIORITY: u8 = 128;

/// The track's group order is descending: its GROUP_ORDER (draft-16 SUBSCRIBE_OK, PUBLISH), else
/// its DEFAULT_PUBLISHER_GROUP_ORDER property (draft-22 §13).
fn track_descending(info: &TrackInfo) -> bool {
    let property = info.properties.int(wire::model::property_type::DEFAULT_PUBLISHER_GROUP_ORDER);
    let order = info.group_order.or_else(|| property.and_then(wire::model::GroupOrder::from_code));
    order == Some(wire::model::GroupOrder::Descending)
}

/// The publisher priority of an object whose header carries none: the track's
/// DEFAULT_PUBLISHER_PRIORITY property, else the middle of the range (draft-22 §5.1, §13).
pub(super) fn default_publisher_priority(properties: &wire::model::Properties) -> u8 {
    properties
        .int(wire::model::property_type::DEFAULT_PUBLISHER_PRIORITY)
        .and_then(|p| u8::try_from(p).ok())
        .unwrap_or(DEFAULT_PRIORITY)
}

/// The longest a PUBLISH_DONE waits for the subgroup streams it counts to be acknowledged by
/// the subscriber (or reset) before it goes anyway.
const PUBLISH_DONE_HOLD: Duration = Duration::from_millis(500);
/// A subscription that loses `too_far_behind_streams` streams to shedding within this window
/// is ended TOO_FAR_BEHIND; one that loses fewer starts a new window afterwards.
const SHED_WINDOW: Duration = Duration::from_secs(10);
/// How recently a stream of a subscription must have got through whole for its losses not to
/// count toward TOO_FAR_BEHIND, when the relay has no freshness budget (`max_lag`) to use.
const THIN_PATH_PROGRESS: Duration = Duration::from_secs(2);

#[derive(Debug)]
struct FanStream {
    header: SubgroupHeader,
    /// Objects seen on it here (a stream joined later is not "first object").
    objects: u64,
    /// The publisher's delivery timeouts for this subgroup (its first object's properties,
    /// else the track's).
    timeouts: Timeouts,
}

#[derive(Debug)]
struct SubTrack {
    track: FullTrackName,
    /// The owner answered: objects flow to this core.
    live: bool,
    /// The owner lost the upstream (a link closed) and subscribes again: new subscriptions
    /// wait for its next answer rather than get SUBSCRIBE_OK with a stale Largest Object.
    lost: bool,
    info: TrackInfo,
    /// The publisher's delivery timeouts from the Track Properties (a subgroup's first object
    /// may override them).
    timeouts: Timeouts,
    subs: Subs,
    streams: HashMap<StreamKey, FanStream>,
    /// What the owner was last told: some subscription here forwards (FORWARD 1).
    forwarding: bool,
}

#[derive(Debug, Default)]
pub(crate) struct Fanout {
    tracks: HashMap<TrackAlias, SubTrack>,
    by_req: HashMap<(ConnId, RequestId), TrackAlias>,
    per_session: PerSession,
    /// Subscriptions visited on behalf of one session's streams or close (tests and
    /// profiling: each is one of that session's, never another's).
    visits: u64,
    /// Subscriptions' `until`, soonest first; an entry whose subscription is gone or was
    /// extended is skipped when it comes due.
    expiries: BinaryHeap<Reverse<(Instant, ConnId, RequestId)>>,
    /// FETCHes waiting for their owner's answer (`fetch.rs`).
    pub(super) fetches: Fetches,
}

impl Fanout {
    pub(crate) fn len(&self) -> usize {
        self.by_req.len()
    }

    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        self.expiries.peek().map(|Reverse((t, _, _))| *t)
    }

    /// FETCHes (and fill streams) waiting for their answer.
    pub(crate) fn fetches_len(&self) -> usize {
        self.fetches.len()
    }

    /// The owner's cached `objects` for subscription `rid` of session `conn`, if it still
    /// waits for them (`fanout/backfill.rs`; `open`: upstream streams still open, with their
    /// group and subgroup).
    pub(crate) fn backfill(
        &mut self,
        cx: &mut Cx,
        sessions: &mut Sessions,
        alias: TrackAlias,
        (conn, rid): (ConnId, RequestId),
        objects: Vec<(Location, CachedObject)>,
        open: Vec<(StreamKey, u64, u64)>,
    ) {
        let Some(st) = self.tracks.get_mut(&alias) else { return };
        let Some(sub) = st.subs.get_mut(conn, rid).filter(|s| s.backfilling) else { return };
        sub.backfilling = false;
        let Some(s) = sessions.get_mut(conn) else { return };
        sub.backfill(cx, s, alias, objects, open);
    }

    /// A message for the subscriber side of this core.
    pub(super) fn on_msg(&mut self, cx: &mut Cx, sessions: &mut Sessions, msg: FanoutMsg) {
        use FanoutMsg as M;
        match msg {
            M::Downstream { alias, data } => self.data(cx, sessions, alias, data),
            M::SubscribeOk { alias, info, open } => self.subscribe_ok(cx, sessions, alias, info, open),
            M::SubscribeError { alias, code, reason } => self.subscribe_error(sessions, alias, code, reason),
            M::UpstreamLost { alias } => self.upstream_lost(alias),
            M::TrackDone { alias, status, reason } => {
                self.track_done(cx.now, sessions, alias, status, reason)
            }
            M::StatusAnswer { conn, rid, answer } => status_answer(sessions, conn, rid, answer),
            M::Backfill { alias, conn, rid, objects, open } => {
                self.backfill(cx, sessions, alias, (conn, rid), objects, open)
            }
            M::FetchAnswer { alias: _, conn, rid, fill, answer } => {
                self.fetch_answer(sessions, conn, rid, fill, answer)
            }
        }
    }
}

/// The owner's answer to TRACK_STATUS: REQUEST_OK with LARGEST_OBJECT (and the Track
/// Properties where the draft carries them); the request then ends.
fn status_answer(
    sessions: &mut Sessions,
    conn: ConnId,
    rid: RequestId,
    answer: Result<TrackInfo, (RequestErrorCode, Bytes)>,
) {
    let info = match answer {
        Ok(info) => info,
        Err((code, reason)) => {
            return sessions.answer_error(conn, rid, code, &String::from_utf8_lossy(&reason), true)
        }
    };
    let Some(s) = sessions.get_mut(conn) else { return };
    if let Err(e) = s.track_status_ok(rid, info.largest, info.properties) {
        debug!(%conn, error = %e, "TRACK_STATUS answer not sent");
    }
}

/// Where a subscription starts and ends, given the largest Location known when it becomes
/// Established (draft-22 §9.20.9 LOCATION_FILTER; draft-16 filter types map onto it).
fn window(filter: Option<LocationFilter>, largest: Option<Location>) -> (Location, Option<Location>) {
    let next =
        largest.map(|l| Location { group: l.group, object: l.object.saturating_add(1) }).unwrap_or_default();
    match filter {
        // No filter: unfiltered (draft-16 SUBSCRIPTION FILTER: "If omitted from SUBSCRIBE or
        // PUBLISH_OK, the subscription is unfiltered"; draft-22 §3.3.1 "Subscriptions without
        // a filter pass all Objects"): every object that arrives passes, an earlier group's too.
        None | Some(LocationFilter::None) => (Location::default(), None),
        Some(LocationFilter::NextObject) => (next, None),
        Some(LocationFilter::RelativeStart { groups_back }) => {
            let group = largest.map_or(0, |l| l.group.saturating_add(1).saturating_sub(groups_back));
            (Location { group, object: 0 }, None)
        }
        Some(LocationFilter::AbsoluteStart { start }) => (start, None),
        Some(LocationFilter::AbsoluteStartGroupEnd { start, end_group }) => {
            (start, Some(Location { group: end_group, object: u64::MAX }))
        }
        Some(LocationFilter::AbsoluteRange { start, end }) => (start, Some(end)),
    }
}

/// A Location filter that selects nothing: a range that ends before it starts.
fn filter_is_empty(f: LocationFilter) -> bool {
    match f {
        LocationFilter::AbsoluteRange { start, end } => end < start,
        LocationFilter::AbsoluteStartGroupEnd { start, end_group } => end_group < start.group,
        _ => false,
    }
}

/// A REQUEST_UPDATE's new tokens: the subscription is authorized again, until they expire
/// (`None`: no tokens, or no expiry).
fn renewed_auth(
    cx: &Cx,
    sessions: &mut Sessions,
    conn: ConnId,
    params: &Parameters,
    namespace: &wire::model::TrackNamespace,
) -> Result<Option<Instant>, UpdateError> {
    if params.auth_tokens.is_empty() {
        return Ok(None);
    }
    match sessions.check_auth(cx, conn, params, namespace, Right::Subscribe) {
        Ok(until) => Ok(until),
        Err(Denied::Request(code, why)) => Err(UpdateError::Refused(code, why)),
        Err(Denied::Session(code, why)) => {
            if let Some(s) = sessions.get_mut(conn) {
                s.close(code, why);
            }
            Err(UpdateError::Refused(RequestErrorCode::InternalError, why))
        }
    }
}

/// A subscription's new SUBSCRIBER_PRIORITY moves the streams already open too (draft-22
/// §5.1), not only new ones.
fn reprioritize(
    session: Option<&mut session::Session>,
    sub: &LocalSub,
    streams: &HashMap<StreamKey, FanStream>,
    properties: &Properties,
) {
    let Some(s) = session else { return };
    let default_publisher = default_publisher_priority(properties);
    for (key, id) in sub.open.iter().filter_map(|(k, d)| Some((k, d.stream()?))) {
        let publisher =
            streams.get(key).and_then(|fs| fs.header.publisher_priority).unwrap_or(default_publisher);
        unheeded(
            s.set_priority_ordered(id, data_urgency(sub.priority, publisher), sub.descending),
            "priority",
        );
    }
}

impl Fanout {
    /// SUBSCRIBE `m`, authorized `until` (token mode).
    pub(super) fn subscribe(
        &mut self,
        cx: &mut Cx,
        sessions: &mut Sessions,
        conn: ConnId,
        m: Subscribe,
        until: Option<Instant>,
    ) {
        let asked = Asked { track: m.track, params: &m.params, until, by: By::Subscribe };
        self.add(cx, sessions, conn, m.request_id, asked);
    }

    /// A namespace subscriber accepted the relay's PUBLISH `rid` of `track` (PUBLISH_OK): a
    /// subscription like a SUBSCRIBE's, with no SUBSCRIBE_OK.
    pub(super) fn accepted_publish(
        &mut self,
        cx: &mut Cx,
        sessions: &mut Sessions,
        conn: ConnId,
        rid: RequestId,
        a: Accepted,
    ) {
        let asked = Asked { track: a.track, params: &a.params, until: a.until, by: By::AcceptedPublish };
        self.add(cx, sessions, conn, rid, asked);
    }

    /// Whether session `conn` has a subscription of `alias` on this core.
    pub(super) fn session_has(&self, conn: ConnId, alias: TrackAlias) -> bool {
        self.tracks.get(&alias).is_some_and(|st| st.subs.iter().any(|s| s.conn == conn))
    }

    fn add(&mut self, cx: &mut Cx, sessions: &mut Sessions, conn: ConnId, rid: RequestId, asked: Asked<'_>) {
        let Asked { track, params, until, by } = asked;
        let alias = cx.key.alias(&track);
        if by == By::Subscribe && self.session_has(conn, alias) {
            // The relay already publishes this Track to the session (a SUBSCRIBE, or a PUBLISH
            // it accepted). draft-16 and draft-18 allow one subscription per Track; draft-22
            // §3.1 allows several, but the relay keeps one per Track and session (the Track
            // Alias is the track's, and a shared alias is more than some subscribers handle).
            let code = match sessions.get(conn).map(|s| s.one_subscription_per_track()) {
                Some(false) => RequestErrorCode::NotSupported,
                _ => RequestErrorCode::DuplicateSubscription,
            };
            return sessions.answer_error(conn, rid, code, "already subscribed to this track", true);
        }
        if self.per_session.count(conn) >= cx.config.max_subscriptions_per_session {
            // EXCESSIVE_LOAD (draft-22 §15.7.1 and the code point draft-16 and 18 peers are
            // sent); draft-14's table has nothing closer than INTERNAL_ERROR.
            let code = RequestErrorCode::ExcessiveLoad;
            return sessions.answer_error(conn, rid, code, "too many subscriptions", true);
        }
        self.per_session.add(conn, rid, alias);
        self.by_req.insert((conn, rid), alias);
        sessions.register(conn, rid, Holder::Subscription);
        let sub = LocalSub {
            conn,
            rid,
            pushed: by == By::AcceptedPublish,
            priority: params.subscriber_priority.unwrap_or(DEFAULT_PRIORITY),
            descending: params.group_order == Some(wire::model::GroupOrder::Descending),
            order_asked: params.group_order.is_some(),
            filter: params.location_filter,
            start: Location::default(),
            end: None,
            forward: params.forward.unwrap_or(true),
            established: false,
            streams: 0,
            open: Vec::new(),
            losses: Losses::default(),
            largest_at_start: None,
            joins: Vec::new(),
            fill: params.fill_parameters.clone(),
            timeouts: Timeouts::from_params(params),
            until,
            backfilling: false,
        };
        if let Some(t) = until {
            self.expiries.push(Reverse((t, conn, rid)));
        }
        match self.tracks.get_mut(&alias) {
            Some(st) => {
                st.subs.push(sub);
                if st.live && !st.lost {
                    self.establish(cx, sessions, alias);
                }
                self.sync_forward(cx, alias);
                if let Some(value) = params.new_group_request {
                    cx.send(cx.owner_of(alias), OwnerMsg::NewGroup { alias, value });
                }
            }
            None => {
                let st = SubTrack {
                    track: track.clone(),
                    forwarding: true,
                    live: false,
                    lost: false,
                    info: TrackInfo::default(),
                    timeouts: Timeouts::default(),
                    subs: Subs::one(sub),
                    streams: HashMap::default(),
                };
                self.tracks.insert(alias, st);
                let (from, who) = (cx.core, sessions.requester(conn));
                let rendezvous = Duration::from_millis(params.rendezvous_timeout.unwrap_or(0));
                let new_group = params.new_group_request;
                let start = UpStart::of(params.location_filter);
                let msg = OwnerMsg::Subscribe { alias, track, from, rendezvous, who, new_group, start };
                cx.send(cx.owner_of(alias), msg);
            }
        }
    }

    /// Sends SUBSCRIBE_OK to every subscription of `alias` not yet Established, then asks
    /// for their joining FETCHes and fill streams.
    fn establish(&mut self, cx: &mut Cx, sessions: &mut Sessions, alias: TrackAlias) {
        let Some(st) = self.tracks.get_mut(&alias) else { return };
        let mut asks: Vec<(ConnId, RequestId, Result<FetchAsk, &'static str>)> = Vec::new();
        let track_descending = track_descending(&st.info);
        for sub in st.subs.iter_mut().filter(|s| !s.established) {
            sub.established = true;
            sub.largest_at_start = st.info.largest;
            if !sub.order_asked {
                sub.descending = track_descending;
            }
            for j in sub.joins.drain(..) {
                let ask = join_ask(cx.core, sub.conn, j, st.info.largest, sub.priority);
                asks.push((sub.conn, j.rid, ask));
            }
            if let Some(ask) =
                sub.fill.as_deref().and_then(|f| fill_ask(cx.core, sub, f, sub.rid, st.info.largest))
            {
                asks.push((sub.conn, sub.rid, Ok(ask)));
            }
            (sub.start, sub.end) = window(sub.filter, st.info.largest);
            if sub.wants_backfill(st.info.largest) {
                sub.backfilling = true;
                let (from, conn, rid, start, end) = (cx.core, sub.conn, sub.rid, sub.start, sub.end);
                cx.send(cx.owner_of(alias), OwnerMsg::Backfill { alias, from, conn, rid, start, end });
            }
            if sub.pushed {
                continue;
            }
            let Some(s) = sessions.get_mut(sub.conn) else { continue };
            let ok = Message::SubscribeOk(SubscribeOk {
                request_id: sub.rid,
                track_alias: alias,
                // GROUP_ORDER may not appear in SUBSCRIBE_OK (either draft): the encoder would
                // refuse the whole message.
                params: Parameters {
                    largest_object: st.info.largest,
                    expires: expires_ms(sub.until, cx.now),
                    ..Parameters::default()
                },
                track_properties: st.info.properties.clone(),
            });
            if let Err(e) = s.send(ok) {
                debug!(conn = %sub.conn, error = %e, "SUBSCRIBE_OK not sent");
            }
        }
        let track = st.track.clone();
        for (conn, rid, ask) in asks {
            match ask {
                Ok(ask) => self.fetch_ask(cx, sessions, alias, track.clone(), ask),
                Err(reason) => {
                    self.fetch_fail(sessions, conn, rid, false, RequestErrorCode::InvalidRange, reason)
                }
            }
        }
        self.sync_forward(cx, alias);
    }

    /// Tells the owner when this core's subscriptions of `alias` become all paused, or one of
    /// them forwards again (the owner pauses or resumes the upstream accordingly).
    fn sync_forward(&mut self, cx: &mut Cx, alias: TrackAlias) {
        let Some(st) = self.tracks.get_mut(&alias) else { return };
        let forwarding = st.subs.iter().any(|s| s.forward);
        if !st.live || st.subs.is_empty() || forwarding == st.forwarding {
            return;
        }
        st.forwarding = forwarding;
        let from = cx.core;
        cx.send(cx.owner_of(alias), OwnerMsg::Forward { alias, from, forward: forwarding });
    }

    /// A draft-16 Joining FETCH `rid` of subscription `joined`: answered once the
    /// subscription is Established (its Largest Location fixes the range).
    pub(super) fn join(
        &mut self,
        cx: &mut Cx,
        sessions: &mut Sessions,
        conn: ConnId,
        joined: RequestId,
        join: Join,
    ) {
        let rid = join.rid;
        let sub = self.by_req.get(&(conn, joined)).and_then(|alias| {
            let st = self.tracks.get_mut(alias)?;
            let i = st.subs.position(conn, joined)?;
            Some((*alias, st.track.clone(), &mut st.subs[i]))
        });
        let Some((alias, track, sub)) = sub else {
            let reason = "no subscription with that Request ID";
            return sessions.answer_error(conn, rid, RequestErrorCode::InvalidJoiningRequestId, reason, true);
        };
        if !matches!(sub.filter, None | Some(LocationFilter::NextObject)) {
            // draft-16 §9.16: only a subscription with the Largest Object filter can be joined.
            if let Some(s) = sessions.get_mut(conn) {
                s.close(SessionCode::ProtocolViolation, "joining FETCH of a subscription with a filter");
            }
            return;
        }
        if !sub.established {
            sub.joins.push(join);
            return self.fetch_hold(sessions, conn, rid);
        }
        match join_ask(cx.core, conn, join, sub.largest_at_start, sub.priority) {
            Ok(ask) => self.fetch_ask(cx, sessions, alias, track, ask),
            Err(reason) => sessions.answer_error(conn, rid, RequestErrorCode::InvalidRange, reason, true),
        }
    }

    pub(super) fn subscribe_ok(
        &mut self,
        cx: &mut Cx,
        sessions: &mut Sessions,
        alias: TrackAlias,
        info: TrackInfo,
        open: Vec<(StreamKey, SubgroupHeader)>,
    ) {
        let Some(st) = self.tracks.get_mut(&alias) else { return };
        if st.subs.is_empty() {
            // Every subscriber left while this core's SUBSCRIBE was unanswered (see
            // `Fanout::unsubscribe`): now it can end.
            self.tracks.remove(&alias);
            let from = cx.core;
            return cx.send(cx.owner_of(alias), OwnerMsg::Unsubscribe { alias, from });
        }
        st.live = true;
        st.lost = false;
        st.info = info;
        st.timeouts = Timeouts::from_properties(&st.info.properties, None);
        let timeouts = st.timeouts;
        for (key, header) in open {
            // Joined mid-stream: the next object is not the stream's first.
            st.streams.insert(key, FanStream { header, objects: 1, timeouts });
        }
        self.establish(cx, sessions, alias);
    }

    pub(super) fn subscribe_error(
        &mut self,
        sessions: &mut Sessions,
        alias: TrackAlias,
        code: RequestErrorCode,
        reason: Bytes,
    ) {
        let Some(st) = self.tracks.remove(&alias) else { return };
        let reason = String::from_utf8_lossy(&reason).into_owned();
        for sub in st.subs {
            self.forget_sub(sessions, sub.conn, sub.rid);
            sessions.answer_error(sub.conn, sub.rid, code, &reason, true);
            for j in sub.joins {
                self.fetch_fail(sessions, sub.conn, j.rid, false, code, &reason);
            }
        }
    }

    /// How many subscriptions session `conn` has here.
    pub(super) fn subscriptions(&self, conn: ConnId) -> usize {
        self.per_session.count(conn)
    }

    /// Subscriptions visited so far on behalf of one session's streams or close (see
    /// `visits`).
    pub(crate) fn visits(&self) -> u64 {
        self.visits
    }

    /// REQUEST_UPDATE of a subscription: parameters present replace the old ones, the rest
    /// stay. A new Location filter applies to objects not yet sent; FORWARD pauses or resumes
    /// delivery; FILL_PARAMETERS opens a fill fetch stream named by the update's Request ID.
    /// AUTHORIZATION_TOKEN extends an expiring subscription to the new token's expiry.
    /// Returns the REQUEST_OK's parameters: the Largest Location (the subscriber can FETCH a
    /// gap) and EXPIRES.
    pub(super) fn update(
        &mut self,
        cx: &mut Cx,
        sessions: &mut Sessions,
        conn: ConnId,
        m: &RequestUpdate,
    ) -> Result<Parameters, UpdateError> {
        update_allows(
            &m.params,
            &[
                "AUTHORIZATION_TOKEN",
                "OBJECT_DELIVERY_TIMEOUT",
                "SUBGROUP_DELIVERY_TIMEOUT",
                "FORWARD",
                "SUBSCRIBER_PRIORITY",
                "LOCATION_FILTER",
                "FILL_PARAMETERS",
                "RANGE_FILTER",
                "NEW_GROUP_REQUEST",
            ],
        )?;
        if m.params.range_filters.iter().any(|f| f.set.is_some()) {
            // Our MAX_FILTER_RANGES is 0 (draft-22 §3.3.2): refused, never ignored.
            return Err(UpdateError::Refused(
                RequestErrorCode::InvalidFilter,
                "range filters are not supported",
            ));
        }
        let rid = m.existing_request_id;
        let alias = *self.by_req.get(&(conn, rid)).ok_or(UpdateError::Invalid("no such subscription"))?;
        let namespace = self.tracks.get(&alias).map(|st| st.track.namespace.clone());
        let namespace = namespace.ok_or(UpdateError::Invalid("no such subscription"))?;
        let renewed = renewed_auth(cx, sessions, conn, &m.params, &namespace)?;
        let st = self.tracks.get_mut(&alias).ok_or(UpdateError::Invalid("no such subscription"))?;
        let sub = st
            .subs
            .iter_mut()
            .find(|s| s.conn == conn && s.rid == rid)
            .ok_or(UpdateError::Invalid("no such subscription"))?;
        if let Some(f) = m.params.location_filter {
            if filter_is_empty(f) {
                return Err(UpdateError::Refused(RequestErrorCode::InvalidRange, "the new range is empty"));
            }
            sub.filter = Some(f);
            if sub.established {
                (sub.start, sub.end) = window(sub.filter, st.info.largest);
            }
        }
        if let Some(forward) = m.params.forward {
            sub.forward = forward;
        }
        if let Some(priority) = m.params.subscriber_priority {
            sub.priority = priority;
            reprioritize(sessions.get_mut(conn), sub, &st.streams, &st.info.properties);
        }
        // Delivery timeouts: for objects and subgroups forwarded from now on.
        let t = Timeouts::from_params(&m.params);
        if m.params.object_delivery_timeout.is_some() {
            sub.timeouts.object = t.object;
        }
        if m.params.subgroup_delivery_timeout.is_some() {
            sub.timeouts.subgroup = t.subgroup;
        }
        if let Some(t) = renewed {
            sub.until = Some(t);
            self.expiries.push(Reverse((t, conn, rid)));
        }
        let expires = expires_ms(sub.until, cx.now);
        let largest = st.info.largest;
        let fill = match (&m.params.fill_parameters, sub.established) {
            (Some(fill), true) => fill_ask(cx.core, sub, fill, m.request_id, largest),
            _ => None,
        };
        let track = st.track.clone();
        if let Some(ask) = fill {
            self.fetch_ask(cx, sessions, alias, track, ask);
        }
        self.sync_forward(cx, alias);
        if let Some(value) = m.params.new_group_request {
            cx.send(cx.owner_of(alias), OwnerMsg::NewGroup { alias, value });
        }
        Ok(Parameters { largest_object: largest, expires, ..Parameters::default() })
    }

    /// Objects and stream events from the owner, written to every subscription they pass.
    pub(super) fn data(&mut self, cx: &mut Cx, sessions: &mut Sessions, alias: TrackAlias, data: Data) {
        let Some(st) = self.tracks.get_mut(&alias) else { return };
        if !st.live {
            return;
        }
        match data {
            Data::StreamOpen { key, header } => {
                st.streams.insert(key, FanStream { header, objects: 0, timeouts: st.timeouts });
            }
            Data::Object { key, object, payload, received } => {
                object_out(cx, sessions, st, key, &object, payload, received)
            }
            Data::StreamEnd { key, reset } => stream_end(cx, sessions, st, key, reset),
            Data::Datagram { header, payload, received } => {
                datagram_out(cx, sessions, st, &header, &payload, received)
            }
        }
    }
}
