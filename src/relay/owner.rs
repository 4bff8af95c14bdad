//! The track owner: the shard `alias % cores` keeps one entry per track with
//! its upstream (one subscription, or the PUBLISHes of its publishers, merged: `merge.rs`),
//! the cores that have subscribers, the upstream streams that are open and the largest
//! location seen. It aggregates: the first subscriber anywhere
//! makes it subscribe upstream; later ones are answered from its state; the upstream ends a
//! linger after the last subscriber leaves. Every object is forwarded once per subscriber
//! core, in the order it arrived (one FIFO queue per core pair).
//!
//! This file holds the state (`Track`, `Owner`), the message dispatch and the timers; each
//! concern is a file under `owner/`: `subscribe.rs` (subscribers and the shared upstream
//! subscription), `publish.rs` (PUBLISH, several publishers merged), `upstream.rs` (the
//! upstream's answers, loss and end), `moves.rs` (moving to a new upstream without a gap),
//! `rendezvous.rs` (requests held for a publisher or the directory), `data.rs` (objects in:
//! checked, cached, forwarded), `fetch.rs` (FETCH and TRACK_STATUS, upstream fetches) and
//! `backfill.rs` (a late subscriber's start from the cache or upstream).
use ahash::HashMap;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::{Duration, Instant};

use bytes::Bytes;

use crate::config::PublishForward;

use super::cache::{Cache, CachedObject};
use super::handover::{Handover, Move};
use super::malformed::Shape;
use super::merge::Merge;
use super::msg::{
    ConnId, Data, DiscoveryMsg, Epoch, FanoutMsg, FetchAsk, FetchBound, FetchData, FetchStart, IngestMsg,
    OwnerMsg, Piece, SessionRef, StreamKey, TrackInfo, UpFetchMsg, UpFetchStart, UpStart,
};
use super::namespaces::Requester;
use super::shed::{Gate, Shed};
use crate::cx::Cx;

mod backfill;
mod data;
mod fetch;
mod moves;
mod publish;
mod rendezvous;
mod subscribe;
mod upstream;

use backfill::Backfill;
use fetch::{Answer, UpstreamFetch};
use rendezvous::Held;
use wire::model::{
    FullTrackName, Location, ObjectStatus, RangeEnd, RequestId, SubgroupHeader, SubgroupId, TrackAlias,
};
use wire::{DoneStatus, RequestErrorCode, ResetCode};

/// Publishers of one track kept at once (draft-22 §7.3 lets a relay refuse more); one more
/// is refused with EXCESSIVE_LOAD.
const MAX_PUBLISHERS: usize = 8;

/// Publisher priority of an object whose header says DEFAULT_PRIORITY (draft-22 §5.1: the
/// track's; the relay does not track it yet) when it is cached for a fetch stream.
const DEFAULT_PRIORITY: u8 = 128;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Source {
    /// SUBSCRIBE sent upstream, no answer yet.
    Pending { publisher: SessionRef, epoch: Epoch },
    /// Upstream SUBSCRIBE answered with SUBSCRIBE_OK.
    Subscribed { publisher: SessionRef, epoch: Epoch },
    /// A PUBLISH the relay accepted; `forward` is the Forward State it asked for.
    Published { publisher: SessionRef, epoch: Epoch, forward: bool },
}

impl Source {
    fn epoch(self) -> Epoch {
        match self {
            Source::Pending { epoch, .. }
            | Source::Subscribed { epoch, .. }
            | Source::Published { epoch, .. } => epoch,
        }
    }

    fn publisher(self) -> SessionRef {
        match self {
            Source::Pending { publisher, .. }
            | Source::Subscribed { publisher, .. }
            | Source::Published { publisher, .. } => publisher,
        }
    }
}

/// One track on its owner core.
///
/// Its upstream's life is one state, [`TrackState`]: Starting → Live, and Lost (with whether
/// it had been announced) → back when an upstream is Established again, or ended after
/// [`UPSTREAM_LOST_GRACE`]. What else varies is independent of that and of each other, so
/// each is its own typed field rather than a product folded into one enum (which would need
/// every combination: a Lost track can be idle, merging and mid-move at once):
/// - where the objects come from: `source` (Pending / Subscribed / Published) and `extra`;
/// - whether anyone wants it: `idle_since` (`Some` while nobody does: the linger);
/// - a move to another source under way: `handover.moving`;
/// - several publishers merged: `merge` (`Some` while more than one feeds it);
/// - what the upstream was asked: `forward`, `asked`, `new_group`.
#[derive(Debug)]
struct Track {
    name: FullTrackName,
    source: Source,
    /// Cores with Established subscribers (each gets every object once).
    cores: Vec<usize>,
    /// Cores waiting for the upstream to become Established.
    waiting: Vec<usize>,
    /// Upstream subgroup streams open now, with their headers (for cores that join) and
    /// Subgroup IDs (known at the first object when the header says "first object").
    /// With the last Object ID forwarded on each (where several publishers' streams merge).
    streams: HashMap<StreamKey, (SubgroupHeader, Option<u64>, Option<u64>)>,
    info: TrackInfo,
    /// Since when nobody wants the track (linger).
    idle_since: Option<Instant>,
    /// FETCHes waiting for the upstream to be Established (the End Location is not known).
    fetches: Vec<FetchAsk>,
    /// TRACK_STATUS requests waiting for the same: (core, session, request).
    statuses: Vec<(usize, ConnId, RequestId)>,
    /// Cores whose subscriptions are all paused (FORWARD 0).
    paused: Vec<usize>,
    /// The Forward State asked of a SUBSCRIBE upstream (a PUBLISH keeps its in `Source`).
    forward: bool,
    /// What its objects promised so far (malformed track detection).
    shape: Shape,
    /// Who asked first (the loop rules when the upstream is chosen again).
    who: Requester,
    /// Whether its upstream is Established and announced, or lost and being sought again.
    state: TrackState,
    /// Moves between sources without a gap (a parent's GOAWAY).
    handover: Handover,
    /// Further accepted PUBLISHes of the track (draft-22 §7.3): their objects are merged with
    /// the source's (`merge`); when the source ends, the first of them takes its place.
    extra: Vec<Source>,
    /// While several publishers feed the track (and until their last merged subgroup ends).
    merge: Option<Box<Merge>>,
    /// Streams not forwarded (further) to a subscriber core because the mesh to it was
    /// backed up or full (`shed.rs`).
    shed: Shed,
    /// Our NEW_GROUP_REQUESTs upstream.
    new_group: NewGroupAsk,
    /// Where the source's upstream SUBSCRIBE started (what the publisher sends live).
    asked: UpStart,
}

/// A track's NEW_GROUP_REQUESTs upstream (draft-22 §9.20.19).
#[derive(Debug, Default)]
struct NewGroupAsk {
    /// The outstanding one: its value and the Largest Group when it was sent; it stands
    /// until the Largest Group grows past that.
    sent: Option<(u64, Option<u64>)>,
    /// One that arrived while the upstream SUBSCRIBE was already on its way (the largest such
    /// value): sent by the usual rules once the track is Established.
    waiting: Option<u64>,
}

/// What a new upstream subscription serves: the track, the cores whose SUBSCRIBEs wait for
/// it, who asked first (the loop rules), and the first subscribers' NEW_GROUP_REQUEST and
/// start.
struct Wanted {
    track: FullTrackName,
    waiting: Vec<usize>,
    who: Requester,
    new_group: Option<u64>,
    start: UpStart,
}

/// Where a track's upstream stands, as its subscribers see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TrackState {
    /// Not Established yet: the first upstream SUBSCRIBE (or the PUBLISH) is on its way, and
    /// subscribers wait.
    Starting,
    /// Established, and every core was told the track is available (`TrackAvailable`).
    Live,
    /// Its upstream link went away: subscribers are kept while the relay subscribes again.
    /// `announced`: the cores had been told it was available.
    Lost { lost: LostUpstream, announced: bool },
}

impl TrackState {
    /// Every core was told the track is available.
    fn announced(self) -> bool {
        matches!(self, TrackState::Live | TrackState::Lost { announced: true, .. })
    }

    /// The cores are being told the track is available.
    fn mark_announced(&mut self) {
        match self {
            TrackState::Starting => *self = TrackState::Live,
            TrackState::Lost { announced, .. } => *announced = true,
            TrackState::Live => {}
        }
    }

    fn lost(&self) -> Option<&LostUpstream> {
        match self {
            TrackState::Lost { lost, .. } => Some(lost),
            _ => None,
        }
    }

    fn lost_mut(&mut self) -> Option<&mut LostUpstream> {
        match self {
            TrackState::Lost { lost, .. } => Some(lost),
            _ => None,
        }
    }

    /// The upstream link went away (`lost` says until when subscribers wait).
    fn set_lost(&mut self, lost: LostUpstream) {
        *self = TrackState::Lost { lost, announced: self.announced() };
    }

    /// An upstream is Established again; true when the track had lost its upstream.
    fn recovered(&mut self) -> bool {
        match *self {
            TrackState::Lost { announced, .. } => {
                *self = if announced { TrackState::Live } else { TrackState::Starting };
                true
            }
            _ => false,
        }
    }
}

/// A track whose upstream link was lost (`OwnerMsg::UpstreamLost`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct LostUpstream {
    /// Subscribers get PUBLISH_DONE if no upstream is Established by then.
    until: Instant,
    /// When to try routing and subscribing again.
    retry_at: Instant,
    /// A SUBSCRIBE is on its way: its answer decides what follows (a namespace appearing
    /// meanwhile does not send another, which the parent would refuse as a duplicate).
    asking: bool,
}

/// How long subscribers of a track whose upstream link was lost wait for it to come back.
pub(crate) const UPSTREAM_LOST_GRACE: Duration = Duration::from_secs(30);
/// Between attempts to subscribe such a track again.
const UPSTREAM_RETRY: Duration = Duration::from_millis(500);

impl Track {
    /// Whether its PUBLISH is to forward: someone is subscribed or waiting, or the policy
    /// takes every PUBLISH at once (`publish_forward = always`).
    fn wants_publish(&self, cx: &Cx) -> bool {
        !self.cores.is_empty() || !self.waiting.is_empty() || always_forward(cx)
    }

    fn new(name: FullTrackName, source: Source, waiting: Vec<usize>, info: TrackInfo) -> Self {
        Track {
            name,
            source,
            cores: Vec::new(),
            waiting,
            streams: HashMap::default(),
            info,
            idle_since: None,
            fetches: Vec::new(),
            statuses: Vec::new(),
            paused: Vec::new(),
            forward: true,
            shape: Shape::default(),
            who: Requester::default(),
            state: TrackState::Starting,
            handover: Handover::default(),
            extra: Vec::new(),
            merge: None,
            shed: Shed::default(),
            new_group: NewGroupAsk::default(),
            asked: UpStart::Next,
        }
    }

    /// The move failed (its subscription refused, ended or lost): the track stays with its
    /// source.
    fn abandon_move(&mut self) {
        self.handover.abandon(self.source.epoch());
    }

    /// Forgets further publisher `epoch` (it ended or went away); false when it is not one.
    fn drop_extra(&mut self, epoch: Epoch) -> bool {
        let Some(i) = self.extra.iter().position(|s| s.epoch() == epoch) else { return false };
        self.extra.remove(i);
        true
    }

    /// The source ended: the first further publisher takes its place (false when there is
    /// none). Its streams were merged all along, so nothing is cut. The old source's
    /// stream-level promises end with it (as when a newer PUBLISH replaces a source).
    fn promote(&mut self) -> bool {
        if self.extra.is_empty() {
            return false;
        }
        self.source = self.extra.remove(0);
        self.shape = Shape::default();
        true
    }

    /// Whether upstream `epoch` feeds the track now: its source, a further publisher, or
    /// the one it is moving to.
    fn feeds(&self, epoch: Epoch) -> bool {
        self.source.epoch() == epoch
            || self.extra.iter().any(|s| s.epoch() == epoch)
            || self.handover.moving.as_ref().is_some_and(|m| m.epoch == epoch)
    }
}

#[derive(Debug)]
pub(crate) struct Owner {
    tracks: HashMap<TrackAlias, Track>,
    held: HashMap<TrackAlias, Held>,
    /// Rendezvous deadlines, checked lazily against `Held::until`.
    held_until: BinaryHeap<Reverse<(Instant, u64)>>,
    /// Linger deadlines, checked lazily against `idle_since`.
    idle: BinaryHeap<Reverse<(Instant, u64)>>,
    /// Objects of the tracks this shard owns.
    pub(super) cache: Cache,
    /// FETCHes waiting for an upstream fetch, by id, and their FILL_TIMEOUT deadlines.
    fetching: HashMap<u64, UpstreamFetch>,
    fetch_deadlines: BinaryHeap<Reverse<(Instant, u64)>>,
    next_fetch: u64,
    /// When to look at tracks whose upstream link was lost (`TrackState::Lost`), checked lazily.
    lost: BinaryHeap<Reverse<(Instant, u64)>>,
    /// When to try again to move tracks whose new parent refused them (`Track::move_from`).
    moves: BinaryHeap<Reverse<(Instant, u64)>>,
}

impl Owner {
    pub(crate) fn new(cache_budget: usize) -> Self {
        Owner {
            tracks: HashMap::default(),
            held: HashMap::default(),
            held_until: BinaryHeap::new(),
            idle: BinaryHeap::new(),
            cache: Cache::new(cache_budget),
            fetching: HashMap::default(),
            fetch_deadlines: BinaryHeap::new(),
            next_fetch: 0,
            lost: BinaryHeap::new(),
            moves: BinaryHeap::new(),
        }
    }

    /// Tracks, SUBSCRIBEs held for a publisher, and FETCHes waiting for an upstream fetch.
    pub(crate) fn len(&self) -> usize {
        self.tracks.len() + self.held.len() + self.fetching.len()
    }

    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        [&self.idle, &self.held_until, &self.fetch_deadlines, &self.lost, &self.moves]
            .into_iter()
            .filter_map(|h| h.peek().map(|Reverse((at, _))| *at))
            .min()
    }
}

/// The next entry of a deadline heap that is due at `now`, taken off it (callers check the
/// entry against the state it names: stale entries are skipped there).
fn pop_due(heap: &mut BinaryHeap<Reverse<(Instant, u64)>>, now: Instant) -> Option<u64> {
    let &Reverse((at, id)) = heap.peek()?;
    (at <= now).then(|| {
        heap.pop();
        id
    })
}

fn max_location(a: Option<Location>, b: Location) -> Location {
    match a {
        Some(a) if a > b => a,
        _ => b,
    }
}

impl Owner {
    /// A message for the owner role.
    pub(super) fn on_msg(&mut self, cx: &mut Cx, msg: OwnerMsg) {
        use OwnerMsg as M;
        match msg {
            M::Subscribe { alias, track, from, rendezvous, who, new_group, start } => {
                // A new upstream SUBSCRIBE carries the value; a track already here gets it by
                // the rules for later requests.
                let existed = self.tracks.contains_key(&alias);
                let first = if existed { None } else { new_group };
                self.subscribe(cx, alias, track, (from, rendezvous, who), first, start);
                if let Some(value) = new_group.filter(|_| existed) {
                    self.new_group(cx, alias, value);
                }
            }
            M::NewGroup { alias, value } => self.new_group(cx, alias, value),
            M::Backfill { alias, from, conn, rid, start, end } => {
                self.backfill(cx, alias, from, (conn, rid), (start, end))
            }
            M::Largest { alias, from } => {
                let largest = self.tracks.get(&alias).and_then(|t| t.info.largest);
                cx.send(from, DiscoveryMsg::Largest { alias, largest });
            }
            M::Unsubscribe { alias, from } => self.unsubscribe(cx, alias, from),
            M::Forward { alias, from, forward } => self.forward(cx, alias, from, forward),
            M::UpstreamOk { alias, epoch, info } => self.upstream_ok(cx, alias, epoch, info),
            M::UpstreamError { alias, epoch, code, reason } => {
                self.upstream_error(cx, alias, epoch, code, reason)
            }
            M::UpstreamLost { alias, epoch } => self.upstream_lost(cx, alias, epoch),
            M::UpstreamMoved { from } => self.upstream_moved(cx, from),
            M::UpstreamDone { alias, epoch, status, reason } => {
                self.upstream_done(cx, alias, epoch, status, reason)
            }
            M::Published { alias, track, publisher, epoch, info } => {
                self.published(cx, alias, track, publisher, epoch, info)
            }
            M::Upstream { alias, epoch, data } => self.data(cx, alias, epoch, data),
            M::Fetch { alias, track, ask, who } => self.fetch(cx, alias, track, ask, who),
            M::Status { alias, track, from, conn, rid, who } => {
                self.status(cx, alias, track, (from, conn, rid), who)
            }
            M::UpstreamFetchItem { alias: _, id, piece } => self.upstream_fetch_item(cx, id, piece),
            M::UpstreamFetchDone { alias: _, id, complete } => {
                let rest = (!complete).then_some(wire::model::RangeEnd::Unknown);
                self.upstream_fetch_done(cx, id, rest)
            }
        }
    }

    /// Lingering tracks whose time is up: an upstream SUBSCRIBE ends, an accepted PUBLISH is
    /// paused (FORWARD 0) and kept until its publisher ends it.
    pub(super) fn tick(&mut self, cx: &mut Cx) {
        self.rendezvous_expired(cx);
        self.fetch_timeouts(cx);
        self.lost_tick(cx);
        self.moves_tick(cx);
        let linger = self.linger(cx);
        while let Some(alias) = pop_due(&mut self.idle, cx.now) {
            let alias = TrackAlias(alias);
            let Some(t) = self.tracks.get_mut(&alias) else { continue };
            let due = t.idle_since.is_some_and(|s| s + linger <= cx.now);
            if !due || !t.cores.is_empty() || !t.waiting.is_empty() {
                continue;
            }
            t.idle_since = None;
            match t.source {
                Source::Published { .. } if always_forward(cx) => {}
                Source::Published { .. } => {
                    for s in std::iter::once(&mut t.source).chain(&mut t.extra) {
                        if let Source::Published { publisher, epoch, forward: forward @ true } = s {
                            *forward = false;
                            let msg = IngestMsg::PublishForward { alias, epoch: *epoch, forward: false };
                            cx.send(publisher.core, msg);
                        }
                    }
                }
                Source::Pending { publisher, epoch } | Source::Subscribed { publisher, epoch } => {
                    self.remove(
                        cx,
                        alias,
                        RequestErrorCode::DoesNotExist,
                        &Bytes::from_static(b"the track ended"),
                    );
                    cx.send(publisher.core, IngestMsg::UpstreamStop { alias, epoch });
                }
            }
        }
    }
}

/// "The rest of the group" as an Object ID, in every draft (`wire::model::LAST_OBJECT`).
pub(super) use wire::model::LAST_OBJECT;

/// Our NEW_GROUP_REQUEST (`outstanding`) is no longer outstanding once the Largest Group grew
/// past what it was when we sent it (draft-22 §9.20.19).
fn new_group_seen(outstanding: &mut Option<(u64, Option<u64>)>, largest: Option<Location>) {
    if let (Some((_, at)), Some(largest)) = (*outstanding, largest) {
        if at.is_none_or(|g| largest.group > g) {
            *outstanding = None;
        }
    }
}

/// `publish_forward = always`: a PUBLISH forwards whether or not anyone is subscribed.
fn always_forward(cx: &Cx) -> bool {
    cx.config.publish_forward == PublishForward::Always
}

/// The track's DYNAMIC_GROUPS property is 1 (draft-22 §13: its publisher starts a new group
/// when asked).
fn dynamic_groups(properties: &wire::model::Properties) -> bool {
    properties.int(wire::model::property_type::DYNAMIC_GROUPS) == Some(1)
}

/// The track's MAX_CACHE_DURATION (draft-22 §10.3, draft-16 Track Extension 0x04): how long
/// after it was received an object may still be served from the cache (0: not at all).
pub(super) fn max_cache_duration(properties: &wire::model::Properties) -> Option<Duration> {
    properties.int(wire::model::property_type::MAX_CACHE_DURATION).map(Duration::from_millis)
}

/// Runs the malformed-track checks of `data` on track `t` (its stream's header and Subgroup ID,
/// the object already cached at its Location).
fn check_shape(t: &mut Track, cache: &Cache, alias: TrackAlias, data: &Data) -> Result<(), &'static str> {
    let stream = match data {
        Data::Object { key, object, .. } => {
            t.streams.get(key).map(|(h, sg, _)| (*h, sg.unwrap_or(object.object_id)))
        }
        Data::StreamEnd { key, .. } => t.streams.get(key).map(|(h, sg, _)| (*h, sg.unwrap_or(0))),
        _ => None,
    };
    let at = match data {
        Data::Object { object, .. } => stream.map(|(h, _)| Location::new(h.group_id, object.object_id)),
        Data::Datagram { header, .. } => Some(Location::new(header.group_id, header.object_id)),
        _ => None,
    };
    // An object cached from a publisher that no longer feeds the track does not bind the
    // ones that do (see `cache_put`).
    let cached = at.and_then(|at| cache.get(alias, at)).filter(|c| c.from.is_some_and(|e| t.feeds(e)));
    t.shape.check(data, stream.as_ref().map(|(h, sg)| (h, *sg)), cached)
}

/// Caches `object` at `at`. One already there from a publisher that no longer feeds the
/// track (it ended or went away, and another carried the track on) is replaced: a publisher
/// that lost its state and publishes the track again may reuse its Locations (draft-22 §2.5:
/// it "risks colliding with previously published Objects"), and a test client that publishes
/// one track name in successive tests does; only publishers feeding the track together are
/// held to each other's objects (§12.1, §7.3).
fn cache_put(cache: &mut Cache, t: &Track, alias: TrackAlias, at: Location, object: CachedObject) {
    cache.insert_or_replace(alias, at, object, |c| c.from.is_none_or(|e| !t.feeds(e)));
}
