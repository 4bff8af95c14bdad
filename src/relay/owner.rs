//! The track owner: the shard `alias % cores` keeps one entry per track with
//! its upstream (one subscription, or the PUBLISHes of its publishers, merged: `merge.rs`),
//! the cores that have subscribers, the upstream streams that are open and the largest
//! location seen. It aggregates: the first subscriber anywhere
//! makes it subscribe upstream; later ones are answered from its state; the upstream ends a
//! linger after the last subscriber leaves. Every object is forwarded once per subscriber
//! core, in the order it arrived (one FIFO queue per core pair).

use ahash::HashMap;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::{Duration, Instant};

use bytes::Bytes;

use crate::PublishForward;

use super::cache::{Cache, CachedObject};
use super::handover::{Handover, Move};
use super::malformed::Shape;
use super::merge::Merge;
use super::msg::{
    Data, DiscoveryMsg, Epoch, FanoutMsg, FetchAsk, FetchBound, FetchData, FetchStart, IngestMsg, OwnerMsg,
    Piece, SessionRef, StreamKey, TrackInfo, UpFetchMsg, UpStart,
};
use super::namespaces::Requester;
use super::shed::{Gate, Shed};
use super::Cx;

mod backfill;
use backfill::Backfill;
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
    statuses: Vec<(usize, u64, RequestId)>,
    /// Cores whose subscriptions are all paused (FORWARD 0).
    paused: Vec<usize>,
    /// The Forward State asked of a SUBSCRIBE upstream (a PUBLISH keeps its in `Source`).
    forward: bool,
    /// Every core was told the track is available (its upstream is Established).
    available: bool,
    /// What its objects promised so far (malformed track detection).
    shape: Shape,
    /// Who asked first (the loop rules when the upstream is chosen again).
    who: Requester,
    /// The upstream link went away: subscribers are kept while the relay subscribes again.
    lost: Option<Lost>,
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
    /// Our outstanding NEW_GROUP_REQUEST upstream: its value and the Largest Group when it
    /// was sent; it stands until the Largest Group grows past that (draft-22 §9.20.19).
    new_group: Option<(u64, Option<u64>)>,
    /// A NEW_GROUP_REQUEST that arrived while the upstream SUBSCRIBE was already on its way
    /// (the largest such value): sent by the usual rules once the track is Established.
    new_group_waiting: Option<u64>,
    /// Where the source's upstream SUBSCRIBE started (what the publisher sends live).
    asked: UpStart,
}

/// A track whose upstream link was lost (`OwnerMsg::UpstreamLost`).
#[derive(Debug, Clone, Copy)]
struct Lost {
    /// Subscribers get PUBLISH_DONE if no upstream is Established by then.
    until: Instant,
    /// When to try routing and subscribing again.
    retry_at: Instant,
}

/// How long subscribers of a track whose upstream link was lost wait for it to come back.
pub const UPSTREAM_LOST_GRACE: Duration = Duration::from_secs(30);
/// Between attempts to subscribe such a track again.
const UPSTREAM_RETRY: Duration = Duration::from_millis(500);

impl Track {
    /// Whether its PUBLISH is to forward: someone is subscribed or waiting, or the policy
    /// takes every PUBLISH at once (`publish_forward = always`).
    fn wants_publish(&self, cx: &Cx<'_>) -> bool {
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
            available: false,
            shape: Shape::default(),
            who: Requester::default(),
            lost: None,
            handover: Handover::default(),
            extra: Vec::new(),
            merge: None,
            shed: Shed::default(),
            new_group: None,
            new_group_waiting: None,
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

/// Requests for a track no publisher serves yet, held for one to appear: SUBSCRIBEs that
/// asked to wait (draft-22 RENDEZVOUS_TIMEOUT), and while the namespace directory is asked
/// (`directory.rs`), SUBSCRIBEs, FETCHes and TRACK_STATUSes.
#[derive(Debug)]
struct Held {
    name: FullTrackName,
    /// Cores whose SUBSCRIBEs wait.
    waiting: Vec<usize>,
    until: Instant,
    who: Requester,
    /// The largest NEW_GROUP_REQUEST of the held SUBSCRIBEs: it goes upstream once a
    /// publisher appears (draft-22 §9.20.19).
    new_group: Option<u64>,
    /// Where the upstream SUBSCRIBE starts: wide enough for every held SUBSCRIBE.
    start: UpStart,
    /// A SUBSCRIBE asked to wait for a publisher: time up is TIMEOUT, and a directory miss
    /// leaves the SUBSCRIBEs held (otherwise both are DOES_NOT_EXIST, as without a
    /// directory).
    rendezvous: bool,
    /// The directory is being asked about the track's namespace.
    lookup: bool,
    fetches: Vec<FetchAsk>,
    /// TRACK_STATUS requests: (core, session, request).
    statuses: Vec<(usize, u64, RequestId)>,
}

impl Held {
    fn new(name: FullTrackName, until: Instant, who: Requester) -> Self {
        let (waiting, fetches, statuses) = (Vec::new(), Vec::new(), Vec::new());
        Held {
            name,
            waiting,
            until,
            who,
            new_group: None,
            start: UpStart::Next,
            rendezvous: false,
            lookup: false,
            fetches,
            statuses,
        }
    }
}

#[derive(Debug)]
pub struct Owner {
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
    /// When to look at tracks whose upstream link was lost (`Track::lost`), checked lazily.
    lost: BinaryHeap<Reverse<(Instant, u64)>>,
    /// When to try again to move tracks whose new parent refused them (`Track::move_from`).
    moves: BinaryHeap<Reverse<(Instant, u64)>>,
}

impl Owner {
    pub fn new(cache_budget: usize) -> Self {
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
    pub fn len(&self) -> usize {
        self.tracks.len() + self.held.len() + self.fetching.len()
    }

    pub fn next_deadline(&self) -> Option<Instant> {
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
    pub(super) fn on_msg(&mut self, cx: &mut Cx<'_>, msg: OwnerMsg) {
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

    /// How long a track nobody wants keeps its upstream: none while the relay drains (no new
    /// subscriber is coming, and the upstream's end lets the parent's drain finish).
    fn linger(&self, cx: &Cx<'_>) -> Duration {
        if cx.draining {
            Duration::ZERO
        } else {
            cx.config.linger
        }
    }

    fn set_idle(&mut self, cx: &mut Cx<'_>, alias: TrackAlias) {
        let Some(t) = self.tracks.get_mut(&alias) else { return };
        if t.cores.is_empty() && t.waiting.is_empty() && t.idle_since.is_none() {
            t.idle_since = Some(cx.now);
            self.idle.push(Reverse((cx.now + self.linger(cx), alias.0)));
        }
    }

    /// Answers every waiting core: the upstream is Established.
    fn release_waiting(&mut self, cx: &mut Cx<'_>, alias: TrackAlias) {
        let Some(t) = self.tracks.get_mut(&alias) else { return };
        let waiting = std::mem::take(&mut t.waiting);
        let info = t.info.clone();
        let open: Vec<_> = t.streams.iter().map(|(k, (h, _, _))| (*k, *h)).collect();
        for core in waiting {
            if !t.cores.contains(&core) {
                t.cores.push(core);
            }
            let msg = FanoutMsg::SubscribeOk { alias, info: info.clone(), open: open.clone() };
            cx.send(core, msg);
        }
    }

    /// The first subscription of `alias` on core `from`. `new_group`: its NEW_GROUP_REQUEST,
    /// included in a new upstream SUBSCRIBE or sent to an Established one (draft-22 §9.20.19).
    /// `start`: where it starts, for a new upstream SUBSCRIBE (see [`UpStart`]).
    pub(super) fn subscribe(
        &mut self,
        cx: &mut Cx<'_>,
        alias: TrackAlias,
        track: FullTrackName,
        (from, rendezvous, who): (usize, Duration, Requester),
        new_group: Option<u64>,
        start: UpStart,
    ) {
        if let Some(h) = self.held.get_mut(&alias) {
            if h.name == track && !h.waiting.contains(&from) {
                h.waiting.push(from);
            }
            if h.name == track {
                h.new_group = h.new_group.max(new_group);
                h.start = h.start.wider(start);
                if !rendezvous.is_zero() && !h.rendezvous {
                    h.rendezvous = true;
                    let until = cx.now + rendezvous.min(cx.config.max_rendezvous);
                    if until > h.until {
                        h.until = until;
                        self.held_until.push(Reverse((until, alias.0)));
                    }
                }
            }
            return;
        }
        if let Some(t) = self.tracks.get_mut(&alias) {
            if t.name != track {
                let reason = Bytes::from_static(b"track alias collision");
                return cx.send(
                    from,
                    FanoutMsg::SubscribeError { alias, code: RequestErrorCode::InternalError, reason },
                );
            }
            t.idle_since = None;
            if !t.waiting.contains(&from) && !t.cores.contains(&from) {
                t.waiting.push(from);
            }
            t.paused.retain(|&c| c != from);
            match t.source {
                Source::Pending { .. } => {}
                Source::Subscribed { .. } => {
                    self.release_waiting(cx, alias);
                    self.sync_forward(cx, alias);
                }
                Source::Published { publisher, epoch, forward } => {
                    if !forward {
                        t.source = Source::Published { publisher, epoch, forward: true };
                        cx.send(publisher.core, IngestMsg::PublishForward { alias, epoch, forward: true });
                    }
                    self.release_waiting(cx, alias);
                    self.sync_forward(cx, alias); // further publishers resume too
                }
            }
            return;
        }
        if self.tracks.len() >= cx.config.max_tracks_per_shard {
            let reason = Bytes::from_static(b"relay track limit reached");
            return cx.send(
                from,
                FanoutMsg::SubscribeError { alias, code: RequestErrorCode::InternalError, reason },
            );
        }
        let Some(publisher) = cx.namespaces.route(&track.namespace, who) else {
            let lookup = cx.directory.resolves(who) && cx.directory.lookup(&track.namespace);
            if !rendezvous.is_zero() || lookup {
                // Hold it until a publisher appears (PUBLISH_NAMESPACE, PUBLISH, or a route
                // the directory leads to) or time is up.
                let wait = if rendezvous.is_zero() {
                    Duration::ZERO
                } else {
                    rendezvous.min(cx.config.max_rendezvous)
                };
                let wait = if lookup { wait.max(super::directory::DIRECTORY_WAIT) } else { wait };
                let mut held = Held::new(track, cx.now + wait, who);
                (held.waiting, held.new_group, held.start) = (vec![from], new_group, start);
                (held.rendezvous, held.lookup) = (!rendezvous.is_zero(), lookup);
                self.hold(alias, held);
                return;
            }
            let reason = Bytes::from_static(b"no publisher for this track");
            return cx.send(
                from,
                FanoutMsg::SubscribeError { alias, code: RequestErrorCode::DoesNotExist, reason },
            );
        };
        self.start_upstream(cx, alias, track, publisher, vec![from], who, (new_group, start));
    }

    /// A new track: SUBSCRIBE upstream to `publisher` and every other announcer, with the
    /// first subscribers' NEW_GROUP_REQUEST and start (`first`).
    #[allow(clippy::too_many_arguments)]
    fn start_upstream(
        &mut self,
        cx: &mut Cx<'_>,
        alias: TrackAlias,
        track: FullTrackName,
        publisher: SessionRef,
        waiting: Vec<usize>,
        who: Requester,
        (new_group, start): (Option<u64>, UpStart),
    ) {
        let epoch = cx.new_epoch();
        let source = Source::Pending { publisher, epoch };
        let mut t = Track::new(track.clone(), source, waiting, TrackInfo::default());
        t.who = who;
        // Outstanding until the Largest Group increases (draft-22 §9.20.19).
        t.new_group = new_group.map(|v| (v, None));
        t.asked = start;
        // Every other publisher of the namespace too (draft-22 §7.6), merged (`merge.rs`).
        let others = cx.namespaces.other_announcers(&track.namespace, publisher);
        for other in others.into_iter().take(MAX_PUBLISHERS - 1) {
            let epoch = cx.new_epoch();
            t.extra.push(Source::Pending { publisher: other, epoch });
            let (track, publisher) = (track.clone(), other);
            cx.send(
                other.core,
                IngestMsg::UpstreamSubscribe { alias, track, publisher, epoch, new_group: None, start },
            );
        }
        if !t.extra.is_empty() {
            t.merge = Some(Box::default());
        }
        self.tracks.insert(alias, t);
        let msg = IngestMsg::UpstreamSubscribe { alias, track, publisher, epoch, new_group, start };
        cx.send(publisher.core, msg);
    }

    /// NEW_GROUP_REQUEST `value` from a subscriber of `alias` (draft-22 §9.20.19, "Relay
    /// Handling"): sent upstream in a REQUEST_UPDATE when the track is Established, supports
    /// dynamic groups, the value is 0 or beyond the Largest Group, and no request of ours
    /// with a greater or equal value is outstanding. One not yet Established got the value in
    /// its SUBSCRIBE if it was the first; later ones are covered by that SUBSCRIBE's answer.
    pub(super) fn new_group(&mut self, cx: &mut Cx<'_>, alias: TrackAlias, value: u64) {
        if let Some(h) = self.held.get_mut(&alias) {
            // Held for a publisher: the largest value goes in its upstream SUBSCRIBE.
            h.new_group = h.new_group.max(Some(value));
            return;
        }
        let Some(t) = self.tracks.get_mut(&alias) else { return };
        if matches!(t.source, Source::Pending { .. }) {
            // Its SUBSCRIBE is already on its way: this one waits for the answer.
            t.new_group_waiting = Some(t.new_group_waiting.map_or(value, |w| w.max(value)));
            return;
        }
        if !dynamic_groups(&t.info.properties) {
            return;
        }
        let largest = t.info.largest.map(|l| l.group);
        if value != 0 && largest.is_some_and(|g| value <= g) {
            return;
        }
        if t.new_group.is_some_and(|(outstanding, _)| outstanding >= value) {
            return;
        }
        t.new_group = Some((value, largest));
        let (core, epoch) = (t.source.publisher().core, t.source.epoch());
        cx.send(core, IngestMsg::NewGroup { alias, epoch, value });
    }

    /// `namespace` was announced: held SUBSCRIBEs it can serve go upstream now.
    pub(super) fn rendezvous(&mut self, cx: &mut Cx<'_>, namespace: &wire::model::TrackNamespace) {
        // Tracks waiting for a lost upstream link under `namespace` try again at once.
        // (Only scanned while some track is lost: the heap is empty otherwise.)
        let now = cx.now;
        let mut again = Vec::new();
        let tracks = if self.lost.is_empty() { None } else { Some(self.tracks.iter_mut()) };
        for (alias, t) in tracks.into_iter().flatten().filter(|(_, t)| t.lost.is_some()) {
            if let Some(l) = t.lost.as_mut().filter(|_| t.name.namespace.starts_with(namespace)) {
                if l.retry_at > now {
                    l.retry_at = now;
                    again.push(Reverse((now, alias.0)));
                }
            }
        }
        self.lost.extend(again);
        if self.held.is_empty() {
            return;
        }
        let ready: Vec<TrackAlias> = self
            .held
            .iter()
            .filter(|(_, h)| h.name.namespace.starts_with(namespace))
            .map(|(a, _)| *a)
            .collect();
        for alias in ready {
            let Some(h) = self.held.remove(&alias) else { continue };
            let Some(publisher) = cx.namespaces.route(&h.name.namespace, h.who) else {
                self.held.insert(alias, h);
                continue;
            };
            self.start_upstream(cx, alias, h.name, publisher, h.waiting, h.who, (h.new_group, h.start));
            if let Some(t) = self.tracks.get_mut(&alias) {
                t.fetches.extend(h.fetches);
                t.statuses.extend(h.statuses);
            }
        }
    }

    /// The namespace directory knows no relay serving `namespace`: what was held only for
    /// that answer gets the answer it would have had without a directory (DOES_NOT_EXIST);
    /// SUBSCRIBEs that asked to wait for a publisher go on waiting.
    pub(super) fn directory_miss(&mut self, cx: &mut Cx<'_>, namespace: &wire::model::TrackNamespace) {
        let missed: Vec<TrackAlias> = self
            .held
            .iter()
            .filter(|(_, h)| h.lookup && h.name.namespace == *namespace)
            .map(|(a, _)| *a)
            .collect();
        for alias in missed {
            let Some(h) = self.held.get_mut(&alias) else { continue };
            h.lookup = false;
            let (fetches, statuses) = (std::mem::take(&mut h.fetches), std::mem::take(&mut h.statuses));
            let waiting = if h.rendezvous { Vec::new() } else { std::mem::take(&mut h.waiting) };
            if h.waiting.is_empty() {
                self.held.remove(&alias);
            }
            self.held_gone(cx, alias, waiting, fetches, statuses, RequestErrorCode::DoesNotExist);
        }
    }

    /// Answers held requests that found no publisher: SUBSCRIBEs of cores `waiting` with
    /// `code`, FETCHes and TRACK_STATUSes with DOES_NOT_EXIST.
    fn held_gone(
        &mut self,
        cx: &mut Cx<'_>,
        alias: TrackAlias,
        waiting: Vec<usize>,
        fetches: Vec<FetchAsk>,
        statuses: Vec<(usize, u64, RequestId)>,
        code: RequestErrorCode,
    ) {
        let reason = match code {
            RequestErrorCode::Timeout => Bytes::from_static(b"no publisher appeared in time"),
            _ => Bytes::from_static(b"no publisher for this track"),
        };
        for core in waiting {
            cx.send(core, FanoutMsg::SubscribeError { alias, code, reason: reason.clone() });
        }
        for ask in fetches {
            self.fetch_error(cx, alias, &ask, RequestErrorCode::DoesNotExist, reason.clone());
        }
        for (core, conn, rid) in statuses {
            let answer = Err((RequestErrorCode::DoesNotExist, reason.clone()));
            cx.send(core, FanoutMsg::StatusAnswer { conn, rid, answer });
        }
    }

    /// Upstream route `via` (a link) to `prefix` appeared: tracks under it that come from
    /// another link, and for which it is now the best route (a namespace the directory says
    /// moved to another relay, or a longer prefix), move to it without a gap (see
    /// [`Move`]).
    pub(super) fn route_added(
        &mut self,
        cx: &mut Cx<'_>,
        prefix: &wire::model::TrackNamespace,
        via: SessionRef,
    ) {
        let movable: Vec<(TrackAlias, SessionRef)> = self
            .tracks
            .iter()
            .filter(|(_, t)| {
                matches!(t.source, Source::Subscribed { .. })
                    && t.handover.moving.is_none()
                    && t.lost.is_none()
                    && t.extra.is_empty()
                    && t.source.publisher() != via
                    && t.name.namespace.starts_with(prefix)
                    && cx.namespaces.route(&t.name.namespace, t.who) == Some(via)
            })
            .map(|(a, t)| (*a, t.source.publisher()))
            .collect();
        for (alias, from) in movable {
            self.move_track(cx, alias, from);
        }
    }

    /// Held SUBSCRIBEs whose rendezvous time is up: REQUEST_ERROR TIMEOUT.
    fn rendezvous_expired(&mut self, cx: &mut Cx<'_>) {
        while let Some(alias) = pop_due(&mut self.held_until, cx.now) {
            let alias = TrackAlias(alias);
            if self.held.get(&alias).is_none_or(|h| h.until > cx.now) {
                continue;
            }
            let Some(h) = self.held.remove(&alias) else { continue };
            let code = if h.rendezvous { RequestErrorCode::Timeout } else { RequestErrorCode::DoesNotExist };
            self.held_gone(cx, alias, h.waiting, h.fetches, h.statuses, code);
        }
    }

    pub(super) fn unsubscribe(&mut self, cx: &mut Cx<'_>, alias: TrackAlias, from: usize) {
        if let Some(h) = self.held.get_mut(&alias) {
            h.waiting.retain(|&c| c != from);
            // FETCHes and TRACK_STATUSes held with it still wait for their answer.
            if h.waiting.is_empty() && h.fetches.is_empty() && h.statuses.is_empty() {
                self.held.remove(&alias);
            }
            return;
        }
        let Some(t) = self.tracks.get_mut(&alias) else { return };
        t.cores.retain(|&c| c != from);
        t.waiting.retain(|&c| c != from);
        t.paused.retain(|&c| c != from);
        self.set_idle(cx, alias);
        self.sync_forward(cx, alias);
    }

    /// Core `from` paused or resumed all its subscriptions of `alias`.
    pub(super) fn forward(&mut self, cx: &mut Cx<'_>, alias: TrackAlias, from: usize, forward: bool) {
        let Some(t) = self.tracks.get_mut(&alias) else { return };
        t.paused.retain(|&c| c != from);
        if !forward {
            t.paused.push(from);
        }
        self.sync_forward(cx, alias);
    }

    /// The upstream forwards objects while any core with subscribers has one not paused, and
    /// is paused (REQUEST_UPDATE FORWARD 0) while every one is. With no subscribers at all
    /// the linger decides instead.
    fn sync_forward(&mut self, cx: &mut Cx<'_>, alias: TrackAlias) {
        let Some(t) = self.tracks.get_mut(&alias) else { return };
        if t.cores.is_empty() && t.waiting.is_empty() {
            return;
        }
        let wanted = t.cores.iter().chain(&t.waiting).any(|c| !t.paused.contains(c));
        // A PUBLISH under the `always` policy keeps forwarding: the relay caches the track.
        let always = always_forward(cx);
        // Further publishers (all PUBLISHes) follow the same rule as a PUBLISH source.
        for s in &mut t.extra {
            if let Source::Published { publisher, epoch, forward } = s {
                if *forward != (wanted || always) {
                    *forward = wanted || always;
                    let msg = IngestMsg::PublishForward { alias, epoch: *epoch, forward: *forward };
                    cx.send(publisher.core, msg);
                }
            }
        }
        let wanted = wanted || (always && matches!(t.source, Source::Published { .. }));
        let epoch = t.source.epoch();
        let publisher = t.source.publisher();
        match &mut t.source {
            Source::Pending { .. } => return,
            Source::Published { forward, .. } if *forward != wanted => *forward = wanted,
            Source::Subscribed { .. } if t.forward != wanted => t.forward = wanted,
            _ => return,
        }
        if let Some(m) = t.handover.moving.as_ref().filter(|m| m.ok) {
            let (core, epoch) = (m.publisher.core, m.epoch);
            cx.send(core, IngestMsg::PublishForward { alias, epoch, forward: wanted });
        }
        if matches!(t.source, Source::Subscribed { .. }) {
            // The other publishers subscribed to follow the same Forward State.
            for s in t.extra.iter().filter(|s| matches!(s, Source::Subscribed { .. })) {
                let msg = IngestMsg::PublishForward { alias, epoch: s.epoch(), forward: wanted };
                cx.send(s.publisher().core, msg);
            }
        }
        cx.send(publisher.core, IngestMsg::PublishForward { alias, epoch, forward: wanted });
    }

    /// The parent of upstream link `from` is going away and the link's replacement is up
    /// (its routes in the namespace table): every track this shard has from `from` moves to
    /// what the routes now name. A SUBSCRIBE not answered yet is simply sent again there; an
    /// Established one gets a second subscription, and moves at a group boundary (see
    /// [`Move`]) while the old one still delivers.
    pub(super) fn upstream_moved(&mut self, cx: &mut Cx<'_>, from: SessionRef) {
        let on_link: Vec<TrackAlias> = self
            .tracks
            .iter()
            .filter(|(_, t)| t.source.publisher() == from && t.handover.moving.is_none() && t.lost.is_none())
            .map(|(a, _)| *a)
            .collect();
        for alias in on_link {
            self.move_track(cx, alias, from);
        }
    }

    fn move_track(&mut self, cx: &mut Cx<'_>, alias: TrackAlias, from: SessionRef) {
        let Some(t) = self.tracks.get(&alias) else { return };
        let (old, track) = (t.source, t.name.clone());
        let Some(publisher) = cx.namespaces.route(&track.namespace, t.who).filter(|p| *p != from) else {
            return; // no other way to the track: it stays until the old link closes
        };
        let epoch = cx.new_epoch();
        let Some(t) = self.tracks.get_mut(&alias) else { return };
        match old {
            Source::Subscribed { .. } => {
                t.handover.from = Some(from);
                t.handover.moving = Some(Move::subscription(publisher, epoch));
            }
            Source::Pending { .. } => {
                t.source = Source::Pending { publisher, epoch };
                t.asked = UpStart::Next;
                cx.send(old.publisher().core, IngestMsg::UpstreamStop { alias, epoch: old.epoch() });
            }
            Source::Published { .. } => return,
        }
        cx.send(publisher.core, IngestMsg::subscribe_live(alias, track, publisher, epoch));
    }

    /// Tracks whose move was refused try again while they are still on the old link (its
    /// parent may not have heard of the track yet: its publisher is moving too).
    fn moves_tick(&mut self, cx: &mut Cx<'_>) {
        while let Some(alias) = pop_due(&mut self.moves, cx.now) {
            let alias = TrackAlias(alias);
            let Some(t) = self.tracks.get(&alias) else { continue };
            match t.handover.from {
                Some(from)
                    if t.handover.moving.is_none() && t.lost.is_none() && t.source.publisher() == from =>
                {
                    self.move_track(cx, alias, from)
                }
                _ => {}
            }
        }
    }

    /// The track's move is complete: the new subscription is its source. `stop_old`: the
    /// old subscription is still there (its streams all ended) and is cancelled; otherwise
    /// it is gone (its link closed, or it ended), and if no group came from the new one yet,
    /// the first is the one after the last group forwarded.
    fn move_finish(&mut self, cx: &mut Cx<'_>, alias: TrackAlias, stop_old: bool) {
        let Some(t) = self.tracks.get_mut(&alias) else { return };
        let old = t.source;
        let Some((m, cut)) = t.handover.finish(old.epoch()) else { return };
        let (publisher, epoch) = (m.publisher, m.epoch);
        t.source = match m.ok {
            true => Source::Subscribed { publisher, epoch },
            false => Source::Pending { publisher, epoch },
        };
        t.asked = UpStart::Next;
        tracing::debug!(alias = alias.0, cut, "track moved to its new upstream");
        cx.stats.tracks_moved += 1;
        if stop_old {
            cx.send(old.publisher().core, IngestMsg::UpstreamStop { alias, epoch: old.epoch() });
        }
    }

    pub(super) fn upstream_ok(&mut self, cx: &mut Cx<'_>, alias: TrackAlias, epoch: Epoch, info: TrackInfo) {
        let Some(t) = self.tracks.get_mut(&alias) else { return };
        if let Some(i) = t.extra.iter().position(|s| s.epoch() == epoch) {
            let Source::Pending { publisher, epoch } = t.extra[i] else { return };
            if matches!(t.source, Source::Pending { .. }) {
                // The first publisher to answer makes the track Established: it becomes the
                // source, the one asked first waits among the others.
                t.extra[i] = std::mem::replace(&mut t.source, Source::Pending { publisher, epoch });
            } else {
                t.extra[i] = Source::Subscribed { publisher, epoch };
                if let Some(l) = info.largest {
                    t.info.largest = Some(max_location(t.info.largest, l));
                }
                if !t.forward {
                    cx.send(publisher.core, IngestMsg::PublishForward { alias, epoch, forward: false });
                }
                return;
            }
        }
        if let Some(m) = t.handover.moving.as_mut().filter(|m| m.epoch == epoch) {
            m.ok = true;
            if let Some(l) = info.largest {
                t.info.largest = Some(max_location(t.info.largest, l));
            }
            if !t.forward {
                let publisher = m.publisher;
                cx.send(publisher.core, IngestMsg::PublishForward { alias, epoch, forward: false });
            }
            return;
        }
        let Source::Pending { publisher, epoch: e } = t.source else { return };
        if e != epoch {
            return;
        }
        t.source = Source::Subscribed { publisher, epoch };
        let was_lost = t.lost.take().is_some();
        t.info.properties = info.properties;
        t.info.group_order = info.group_order;
        if let Some(l) = info.largest {
            t.info.largest = Some(max_location(t.info.largest, l));
        }
        if was_lost {
            // Established again: the cores that kept their subscribers answer the ones that
            // arrived meanwhile.
            for &core in &t.cores {
                cx.send(core, FanoutMsg::SubscribeOk { alias, info: t.info.clone(), open: Vec::new() });
            }
        }
        let waiting_new_group = t.new_group_waiting.take();
        self.release_waiting(cx, alias);
        self.set_idle(cx, alias);
        self.answer_waiting_fetches(cx, alias);
        self.announce(cx, alias);
        if let Some(value) = waiting_new_group {
            self.new_group(cx, alias, value);
        }
    }

    /// Tells every core that `alias` has an Established upstream (once).
    fn announce(&mut self, cx: &mut Cx<'_>, alias: TrackAlias) {
        let Some(t) = self.tracks.get_mut(&alias) else { return };
        if t.available {
            return;
        }
        t.available = true;
        let (track, properties) = (t.name.clone(), t.info.properties.clone());
        for core in 0..cx.cores {
            let msg =
                DiscoveryMsg::TrackAvailable { alias, track: track.clone(), properties: properties.clone() };
            cx.send(core, msg);
        }
    }

    /// Removes track `alias` and its cache; FETCHes still waiting for it get `code`.
    fn remove(
        &mut self,
        cx: &mut Cx<'_>,
        alias: TrackAlias,
        code: RequestErrorCode,
        reason: &Bytes,
    ) -> Option<Track> {
        let mut t = self.tracks.remove(&alias)?;
        self.cache.remove_track(alias);
        if let Some(m) = t.handover.moving.take() {
            cx.send(m.publisher.core, IngestMsg::UpstreamStop { alias, epoch: m.epoch });
        }
        for s in std::mem::take(&mut t.extra) {
            cx.send(s.publisher().core, IngestMsg::UpstreamStop { alias, epoch: s.epoch() });
        }
        if t.available {
            for core in 0..cx.cores {
                cx.send(core, DiscoveryMsg::TrackGone { alias });
            }
        }
        for ask in std::mem::take(&mut t.fetches) {
            self.fetch_error(cx, alias, &ask, code, reason.clone());
        }
        for (core, conn, rid) in std::mem::take(&mut t.statuses) {
            cx.send(core, FanoutMsg::StatusAnswer { conn, rid, answer: Err((code, reason.clone())) });
        }
        Some(t)
    }

    pub(super) fn upstream_error(
        &mut self,
        cx: &mut Cx<'_>,
        alias: TrackAlias,
        epoch: Epoch,
        code: RequestErrorCode,
        reason: Bytes,
    ) {
        let Some(t) = self.tracks.get_mut(&alias) else { return };
        if t.drop_extra(epoch) {
            return;
        }
        if t.handover.moving.as_ref().is_some_and(|m| m.epoch == epoch) {
            // The new parent does not have the track (yet): it stays with the old one, and
            // tries again soon (or comes back through the lost-link path if that closes).
            t.abandon_move();
            return self.moves.push(Reverse((cx.now + UPSTREAM_RETRY, alias.0)));
        }
        if !matches!(t.source, Source::Pending { epoch: e, .. } if e == epoch) {
            return;
        }
        if t.promote() {
            return; // another publisher of the namespace may have the track
        }
        if let Some(l) = t.lost.as_mut().filter(|l| l.until > cx.now) {
            // Subscribing again after a lost link: the parent may not know the track yet
            // (its publisher reconnecting too); try again until the grace period ends.
            l.retry_at = cx.now + UPSTREAM_RETRY;
            let next = Reverse((l.retry_at, alias.0));
            self.lost.push(next);
            return;
        }
        let Some(t) = self.remove(cx, alias, code, &reason) else { return };
        for core in t.cores {
            cx.send(
                core,
                FanoutMsg::TrackDone { alias, status: DoneStatus::InternalError, reason: reason.clone() },
            );
        }
        for core in t.waiting {
            cx.send(core, FanoutMsg::SubscribeError { alias, code, reason: reason.clone() });
        }
    }

    /// The track is malformed (draft-22 §12.1): every subscription ends with PUBLISH_DONE
    /// MALFORMED_TRACK, waiting SUBSCRIBEs and FETCHes get it as an error, the upstream is
    /// stopped and the cache dropped.
    fn malformed(&mut self, cx: &mut Cx<'_>, alias: TrackAlias, why: &'static str) {
        tracing::info!(alias = alias.0, why, "malformed track");
        let reason = Bytes::from(format!("malformed track: {why}"));
        let Some(t) = self.remove(cx, alias, RequestErrorCode::MalformedTrack, &reason) else { return };
        cx.stats.malformed_tracks += 1;
        let (publisher, epoch) = (t.source.publisher(), t.source.epoch());
        cx.send(publisher.core, IngestMsg::UpstreamStop { alias, epoch });
        for core in t.cores {
            cx.send(
                core,
                FanoutMsg::TrackDone { alias, status: DoneStatus::MalformedTrack, reason: reason.clone() },
            );
        }
        for core in t.waiting {
            cx.send(
                core,
                FanoutMsg::SubscribeError {
                    alias,
                    code: RequestErrorCode::MalformedTrack,
                    reason: reason.clone(),
                },
            );
        }
    }

    /// The upstream link that fed the track closed. Its open streams were already reset
    /// downstream (ingest sent their ends); subscribers stay while the relay routes and
    /// subscribes again (when the link, or another, is back), for up to
    /// [`UPSTREAM_LOST_GRACE`]; new subscribers wait for that SUBSCRIBE_OK.
    pub(super) fn upstream_lost(&mut self, cx: &mut Cx<'_>, alias: TrackAlias, epoch: Epoch) {
        let Some(t) = self.tracks.get_mut(&alias) else { return };
        if t.drop_extra(epoch) {
            return;
        }
        if t.handover.moving.as_ref().is_some_and(|m| m.epoch == epoch) {
            return t.abandon_move();
        }
        if t.source.epoch() != epoch {
            return;
        }
        if t.handover.moving.is_some() {
            // The old link closed first: the track is the new subscription's from here.
            return self.move_finish(cx, alias, false);
        }
        if t.promote() {
            return; // another publisher of the track carries on
        }
        if t.cores.is_empty() && t.waiting.is_empty() {
            let reason = Bytes::from_static(b"the upstream relay went away");
            return self.upstream_done(cx, alias, epoch, DoneStatus::InternalError, reason);
        }
        t.source = Source::Pending { publisher: t.source.publisher(), epoch };
        t.streams.clear();
        for &core in &t.cores {
            cx.send(core, FanoutMsg::UpstreamLost { alias });
        }
        let until = cx.now + UPSTREAM_LOST_GRACE;
        t.lost = Some(Lost { until, retry_at: cx.now + UPSTREAM_RETRY });
        self.lost.push(Reverse((cx.now + UPSTREAM_RETRY, alias.0)));
    }

    /// Lost tracks: subscribe again when due; end them when the grace period is over. The
    /// heap holds one entry per scheduled look at a track (stale ones are skipped).
    fn lost_tick(&mut self, cx: &mut Cx<'_>) {
        let now = cx.now;
        while let Some(alias) = pop_due(&mut self.lost, now) {
            let alias = TrackAlias(alias);
            let Some((lost, name, who)) =
                self.tracks.get(&alias).and_then(|t| t.lost.map(|l| (l, t.name.clone(), t.who)))
            else {
                continue;
            };
            if lost.until <= now {
                let reason = Bytes::from_static(b"the upstream relay is unreachable");
                let Some(t) = self.remove(cx, alias, RequestErrorCode::InternalError, &reason) else {
                    continue;
                };
                for core in t.cores {
                    let status = DoneStatus::InternalError;
                    cx.send(core, FanoutMsg::TrackDone { alias, status, reason: reason.clone() });
                }
                for core in t.waiting {
                    let code = RequestErrorCode::InternalError;
                    cx.send(core, FanoutMsg::SubscribeError { alias, code, reason: reason.clone() });
                }
                continue;
            }
            if lost.retry_at > now {
                continue; // a stale entry: the track has a later one
            }
            let publisher = cx.namespaces.route(&name.namespace, who);
            let epoch = cx.new_epoch();
            let Some(t) = self.tracks.get_mut(&alias) else { continue };
            let Some(l) = t.lost.as_mut() else { continue };
            match publisher {
                Some(publisher) => {
                    // The answer (UpstreamOk / UpstreamError) decides what follows; the grace
                    // period still ends the track if none comes.
                    l.retry_at = lost.until;
                    t.source = Source::Pending { publisher, epoch };
                    t.asked = UpStart::Next;
                    self.lost.push(Reverse((lost.until, alias.0)));
                    let track = name;
                    cx.send(publisher.core, IngestMsg::subscribe_live(alias, track, publisher, epoch));
                }
                None => {
                    l.retry_at = now + UPSTREAM_RETRY;
                    self.lost.push(Reverse((now + UPSTREAM_RETRY, alias.0)));
                    // Another relay of the cluster may serve it now: the route the directory
                    // gives wakes the track (`rendezvous`).
                    if cx.directory.resolves(who) {
                        cx.directory.lookup(&name.namespace);
                    }
                }
            }
        }
    }

    pub(super) fn upstream_done(
        &mut self,
        cx: &mut Cx<'_>,
        alias: TrackAlias,
        epoch: Epoch,
        status: DoneStatus,
        reason: Bytes,
    ) {
        let Some(t) = self.tracks.get_mut(&alias) else { return };
        if t.drop_extra(epoch) {
            return; // one of several publishers: the others go on
        }
        if t.handover.moving.as_ref().is_some_and(|m| m.epoch == epoch) {
            return t.abandon_move();
        }
        if t.source.epoch() != epoch {
            return;
        }
        if t.handover.moving.is_some() {
            // The old upstream ended it (its relay going away): the new one carries on, and
            // ends the track if it ends too.
            return self.move_finish(cx, alias, false);
        }
        if t.promote() {
            return; // another publisher of the track carries on
        }
        let Some(t) = self.remove(cx, alias, RequestErrorCode::DoesNotExist, &reason) else { return };
        for core in t.cores {
            cx.send(core, FanoutMsg::TrackDone { alias, status, reason: reason.clone() });
        }
        for core in t.waiting {
            let reason = Bytes::from_static(b"the track ended upstream");
            cx.send(core, FanoutMsg::SubscribeError { alias, code: RequestErrorCode::DoesNotExist, reason });
        }
    }

    /// A PUBLISH for `track`: it becomes (or replaces) the track's upstream, and its
    /// PUBLISH_OK asks for objects at once (`publish_forward = always`) or only when someone
    /// is subscribed (`on-demand`).
    pub(super) fn published(
        &mut self,
        cx: &mut Cx<'_>,
        alias: TrackAlias,
        track: FullTrackName,
        publisher: SessionRef,
        epoch: Epoch,
        info: TrackInfo,
    ) {
        let existing = self.tracks.get(&alias).map(|t| (t.name == track, t.source));
        match existing {
            Some((false, _)) => {
                let reason = Bytes::from_static(b"track alias collision");
                cx.send(
                    publisher.core,
                    IngestMsg::PublishRefused { alias, epoch, code: RequestErrorCode::InternalError, reason },
                );
            }
            Some((true, old))
                if self.tracks.get(&alias).is_some_and(|t| t.handover.moving.is_none())
                    && !matches!(old, Source::Pending { .. }) =>
            {
                // Another publisher of a live track (draft-22 §7.3: redundant publishers, a
                // publisher reconnecting or moving to this relay, §7.6.1): both are kept, and
                // what they send is merged (`merge.rs`): each object once, each subgroup on one
                // downstream stream. When one ends, the track goes on with the others; viewers
                // see no gap and no object twice.
                let Some(t) = self.tracks.get_mut(&alias) else { return };
                if t.extra.len() + 1 >= MAX_PUBLISHERS {
                    let reason = Bytes::from_static(b"too many publishers of this track");
                    let code = RequestErrorCode::ExcessiveLoad;
                    return cx.send(publisher.core, IngestMsg::PublishRefused { alias, epoch, code, reason });
                }
                if t.merge.is_none() {
                    let open = t.streams.iter().map(|(k, (h, sub, last))| (*k, h.group_id, *sub, *last));
                    t.merge = Some(Box::new(Merge::new(open)));
                }
                if let Some(l) = info.largest {
                    t.info.largest = Some(max_location(t.info.largest, l));
                }
                let forward = t.wants_publish(cx);
                t.extra.push(Source::Published { publisher, epoch, forward });
                cx.send(publisher.core, IngestMsg::PublishForward { alias, epoch, forward });
            }
            Some((true, old)) => {
                // A move is already under way, or the old source is not Established: the
                // newest source wins; the old upstream ends, its open streams end here.
                cx.send(old.publisher().core, IngestMsg::UpstreamStop { alias, epoch: old.epoch() });
                let Some(t) = self.tracks.get_mut(&alias) else { return };
                let moving = t.handover.replace();
                let ended: Vec<StreamKey> = t.streams.drain().map(|(k, _)| k).collect();
                let newer = !t.fetches.is_empty();
                let cores = t.cores.clone();
                let wants = t.wants_publish(cx);
                t.source = Source::Published { publisher, epoch, forward: wants };
                // The old publisher's stream-level promises end with its streams (the cache,
                // and with it one payload per object, stays).
                t.shape = Shape::default();
                t.info.properties = info.properties;
                t.info.group_order = info.group_order;
                if let Some(l) = info.largest {
                    t.info.largest = Some(max_location(t.info.largest, l));
                }
                for key in ended {
                    for &core in &cores {
                        let data = Data::StreamEnd { key, reset: Some(ResetCode::Cancelled) };
                        let msg = FanoutMsg::Downstream { alias, data };
                        cx.send(core, msg);
                    }
                }
                if let Some(m) = moving {
                    cx.send(m.publisher.core, IngestMsg::UpstreamStop { alias, epoch: m.epoch });
                }
                cx.send(publisher.core, IngestMsg::PublishForward { alias, epoch, forward: wants });
                self.release_waiting(cx, alias);
                if newer {
                    self.answer_waiting_fetches(cx, alias);
                }
                self.announce(cx, alias);
            }
            None => {
                if self.tracks.len() >= cx.config.max_tracks_per_shard {
                    let reason = Bytes::from_static(b"relay track limit reached");
                    let msg = IngestMsg::PublishRefused {
                        alias,
                        epoch,
                        code: RequestErrorCode::InternalError,
                        reason,
                    };
                    return cx.send(publisher.core, msg);
                }
                // A SUBSCRIBE held for this track is served by the PUBLISH.
                let (waiting, held_new_group) = match self.held.remove(&alias) {
                    Some(h) if h.name == track => (h.waiting, h.new_group),
                    _ => (Vec::new(), None),
                };
                let forward = !waiting.is_empty() || always_forward(cx);
                let source = Source::Published { publisher, epoch, forward };
                self.tracks.insert(alias, Track::new(track, source, waiting, info));
                cx.send(publisher.core, IngestMsg::PublishForward { alias, epoch, forward });
                self.release_waiting(cx, alias);
                self.announce(cx, alias);
                if let Some(value) = held_new_group {
                    // A held SUBSCRIBE's request, by the rules for an Established track.
                    self.new_group(cx, alias, value);
                }
            }
        }
    }

    /// Upstream data for `alias`: remembered (open streams, largest location) and sent once
    /// to every core with subscribers.
    pub(super) fn data(&mut self, cx: &mut Cx<'_>, alias: TrackAlias, epoch: Epoch, data: Data) {
        let Some(t) = self.tracks.get_mut(&alias) else { return };
        let from_move = t.handover.moving.as_ref().is_some_and(|m| m.epoch == epoch);
        let from_extra = t.extra.iter().any(|s| s.epoch() == epoch);
        if t.source.epoch() != epoch && !from_move && !from_extra {
            return; // a replaced or stopped upstream
        }
        if !from_extra && !t.handover.admit(t.source.epoch(), from_move, &data) {
            return;
        }
        let data = match t.merge.as_mut() {
            Some(m) => {
                let Some(data) = m.admit(data, !t.extra.is_empty()) else { return };
                if t.extra.is_empty() && m.is_idle() {
                    t.merge = None; // one publisher again, its merged subgroups all ended
                }
                data
            }
            None => data,
        };
        if let Err(why) = check_shape(t, &self.cache, alias, &data) {
            return self.malformed(cx, alias, why);
        }
        match &data {
            Data::StreamOpen { key, header } => {
                let subgroup = match header.subgroup_id {
                    SubgroupId::Zero => Some(0),
                    SubgroupId::Explicit(id) => Some(id),
                    SubgroupId::FirstObject => None,
                };
                t.streams.insert(*key, (*header, subgroup, None));
            }
            Data::Object { key, object, payload, received } => {
                if let Some((h, subgroup, last)) = t.streams.get_mut(key) {
                    *last = Some(object.object_id);
                    let at = Location { group: h.group_id, object: object.object_id };
                    t.info.largest = Some(max_location(t.info.largest, at));
                    new_group_seen(&mut t.new_group, t.info.largest);
                    let subgroup = *subgroup.get_or_insert(object.object_id);
                    let max_age = max_cache_duration(&t.info.properties);
                    if object.status == ObjectStatus::Normal && max_age != Some(Duration::ZERO) {
                        let cached = CachedObject {
                            subgroup: Some(subgroup),
                            priority: h.publisher_priority.unwrap_or(DEFAULT_PRIORITY),
                            properties: object.properties.clone(),
                            payload: payload.clone(),
                            expires: max_age.map(|d| *received + d),
                            from: Some(epoch),
                        };
                        cache_put(&mut self.cache, t, alias, at, cached);
                    }
                }
            }
            Data::StreamEnd { key, .. } => {
                t.streams.remove(key);
            }
            Data::Datagram { header, payload, received } => {
                let at = Location { group: header.group_id, object: header.object_id };
                t.info.largest = Some(max_location(t.info.largest, at));
                new_group_seen(&mut t.new_group, t.info.largest);
                let max_age = max_cache_duration(&t.info.properties);
                if header.status.is_none() && max_age != Some(Duration::ZERO) {
                    let cached = CachedObject {
                        subgroup: None,
                        priority: header.publisher_priority.unwrap_or(DEFAULT_PRIORITY),
                        properties: header.properties.clone(),
                        payload: payload.clone(),
                        expires: max_age.map(|d| *received + d),
                        from: Some(epoch),
                    };
                    cache_put(&mut self.cache, t, alias, at, cached);
                }
            }
        }
        let n = t.cores.len();
        let ended = match &data {
            Data::StreamEnd { key, .. } => Some(*key),
            _ => None,
        };
        let mut data = Some(data);
        for i in 0..n {
            let core = t.cores[i];
            let Some(d) = data.as_ref() else { break };
            let data = match t.shed.gate(cx, core, d) {
                Gate::Drop => continue,
                Gate::Instead(reset) => reset,
                // One message per core; the last takes the original (payloads are shared).
                Gate::Forward => match if i + 1 == n { data.take() } else { data.clone() } {
                    Some(data) => data,
                    None => break,
                },
            };
            cx.send(core, FanoutMsg::Downstream { alias, data });
        }
        if let Some(key) = ended {
            // Also toward cores that left the track while the stream was shed to them.
            t.shed.forget(key);
        }
        if t.handover.old_source_done(t.streams.keys()) {
            // The old source's last forwarded stream ended: the move is complete.
            self.move_finish(cx, alias, true);
        }
    }

    /// Lingering tracks whose time is up: an upstream SUBSCRIBE ends, an accepted PUBLISH is
    /// paused (FORWARD 0) and kept until its publisher ends it.
    pub(super) fn tick(&mut self, cx: &mut Cx<'_>) {
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

/// The largest Object ID a draft-16 varint can carry (draft-22's are wider): "the rest of
/// the group" in an End of Range marker.
pub(super) const LAST_OBJECT: u64 = (1 << 62) - 1;

/// The Location just before `l`.
fn before(l: Location) -> Option<Location> {
    match (l.group, l.object) {
        (_, o) if o > 0 => Some(Location::new(l.group, o - 1)),
        (0, _) => None,
        (g, _) => Some(Location::new(g - 1, LAST_OBJECT)),
    }
}

impl Owner {
    /// A FETCH (or fill) of `track`, owned here: answered from the cache once the End Location
    /// is known (draft-16 §9.16 "FETCH_OK MUST NOT be sent until the End Location is known";
    /// draft-22 §3.2), i.e. once the upstream is Established.
    pub(super) fn fetch(
        &mut self,
        cx: &mut Cx<'_>,
        alias: TrackAlias,
        track: FullTrackName,
        ask: FetchAsk,
        who: Requester,
    ) {
        let full = self.tracks.len() >= cx.config.max_tracks_per_shard;
        match self.tracks.get_mut(&alias) {
            Some(t) if t.name != track => self.fetch_error(
                cx,
                alias,
                &ask,
                RequestErrorCode::InternalError,
                Bytes::from_static(b"alias collision"),
            ),
            Some(t) if matches!(t.source, Source::Pending { .. }) => t.fetches.push(ask),
            Some(_) => self.answer_fetch(cx, alias, ask),
            None if full => {
                let reason = Bytes::from_static(b"relay track limit reached");
                self.fetch_error(cx, alias, &ask, RequestErrorCode::InternalError, reason)
            }
            None => {
                // Not relayed now: subscribe it upstream like a SUBSCRIBE would (the End
                // Location comes with SUBSCRIBE_OK); then what the empty cache lacks is
                // fetched upstream. The subscription lingers and ends, or serves a
                // subscriber that follows.
                let Some(publisher) = cx.namespaces.route(&track.namespace, who) else {
                    if let Some(h) = self.hold_for_directory(cx, alias, &track, who) {
                        return h.fetches.push(ask);
                    }
                    let reason = Bytes::from_static(b"no publisher for this track");
                    return self.fetch_error(cx, alias, &ask, RequestErrorCode::DoesNotExist, reason);
                };
                let epoch = cx.new_epoch();
                let source = Source::Pending { publisher, epoch };
                let mut t = Track::new(track.clone(), source, Vec::new(), TrackInfo::default());
                t.fetches.push(ask);
                t.who = who;
                self.tracks.insert(alias, t);
                cx.send(publisher.core, IngestMsg::subscribe_live(alias, track, publisher, epoch));
            }
        }
    }

    /// Where a FETCH or TRACK_STATUS for `track`, which nothing here serves, waits: with the
    /// requests already held for it, or while the namespace directory is asked. `None`:
    /// it is answered now.
    fn hold_for_directory(
        &mut self,
        cx: &mut Cx<'_>,
        alias: TrackAlias,
        track: &FullTrackName,
        who: Requester,
    ) -> Option<&mut Held> {
        if self.held.get(&alias).is_some_and(|h| h.name == *track && h.lookup) {
            return self.held.get_mut(&alias);
        }
        if self.held.contains_key(&alias)
            || !cx.directory.resolves(who)
            || !cx.directory.lookup(&track.namespace)
        {
            return None;
        }
        let mut held = Held::new(track.clone(), cx.now + super::directory::DIRECTORY_WAIT, who);
        held.lookup = true;
        Some(self.hold(alias, held))
    }

    /// Holds requests for `alias` until `held.until` at the latest (`rendezvous_expired`).
    fn hold(&mut self, alias: TrackAlias, held: Held) -> &mut Held {
        self.held_until.push(Reverse((held.until, alias.0)));
        self.held.entry(alias).or_insert(held)
    }

    /// The upstream became Established: answer the FETCHes and TRACK_STATUSes that waited.
    fn answer_waiting_fetches(&mut self, cx: &mut Cx<'_>, alias: TrackAlias) {
        let Some(t) = self.tracks.get_mut(&alias) else { return };
        let info = t.info.clone();
        for (core, conn, rid) in std::mem::take(&mut t.statuses) {
            cx.send(core, FanoutMsg::StatusAnswer { conn, rid, answer: Ok(info.clone()) });
        }
        let Some(t) = self.tracks.get_mut(&alias) else { return };
        for ask in std::mem::take(&mut t.fetches) {
            self.answer_fetch(cx, alias, ask);
        }
    }

    /// TRACK_STATUS (draft-16 §9.18, draft-22 §9.13): answered with what a SUBSCRIBE_OK would
    /// carry. A track the relay does not relay now is subscribed upstream like a SUBSCRIBE
    /// would be (the subscription then lingers and ends, or serves a subscriber that follows).
    pub(super) fn status(
        &mut self,
        cx: &mut Cx<'_>,
        alias: TrackAlias,
        track: FullTrackName,
        (from, conn, rid): (usize, u64, RequestId),
        who: Requester,
    ) {
        let fail = |code: RequestErrorCode, reason: &'static [u8]| FanoutMsg::StatusAnswer {
            conn,
            rid,
            answer: Err((code, Bytes::from_static(reason))),
        };
        let full = self.tracks.len() >= cx.config.max_tracks_per_shard;
        match self.tracks.get_mut(&alias) {
            Some(t) if t.name != track => {
                cx.send(from, fail(RequestErrorCode::InternalError, b"track alias collision"))
            }
            Some(t) if matches!(t.source, Source::Pending { .. }) => t.statuses.push((from, conn, rid)),
            Some(t) => {
                let answer = Ok(t.info.clone());
                cx.send(from, FanoutMsg::StatusAnswer { conn, rid, answer });
            }
            None if full => {
                cx.send(from, fail(RequestErrorCode::InternalError, b"relay track limit reached"))
            }
            None => {
                let Some(publisher) = cx.namespaces.route(&track.namespace, who) else {
                    if let Some(h) = self.hold_for_directory(cx, alias, &track, who) {
                        return h.statuses.push((from, conn, rid));
                    }
                    return cx
                        .send(from, fail(RequestErrorCode::DoesNotExist, b"no publisher for this track"));
                };
                let epoch = cx.new_epoch();
                let mut t = Track::new(
                    track.clone(),
                    Source::Pending { publisher, epoch },
                    Vec::new(),
                    TrackInfo::default(),
                );
                t.statuses.push((from, conn, rid));
                t.who = who;
                self.tracks.insert(alias, t);
                cx.send(publisher.core, IngestMsg::subscribe_live(alias, track, publisher, epoch));
            }
        }
    }

    fn fetch_error(
        &mut self,
        cx: &mut Cx<'_>,
        alias: TrackAlias,
        ask: &FetchAsk,
        code: RequestErrorCode,
        reason: Bytes,
    ) {
        let msg = FanoutMsg::FetchAnswer {
            alias,
            conn: ask.conn,
            rid: ask.rid,
            fill: ask.fill,
            answer: Err((code, reason)),
        };
        cx.send(ask.from, msg);
    }

    /// Resolves the range against the Largest Object (draft-16 FETCH_OK End Location rules,
    /// draft-22 §9.12) and collects the cached objects in it. What the cache cannot vouch
    /// for (before [`TrackCache::known_from`](super::cache::TrackCache::known_from)) is
    /// reported as unknown; ranges are ascending-only for that marker.
    fn answer_fetch(&mut self, cx: &mut Cx<'_>, alias: TrackAlias, ask: FetchAsk) {
        self.cache.expire(alias, cx.now);
        let Some(t) = self.tracks.get(&alias) else { return };
        let Some(largest) = t.info.largest else {
            let reason = Bytes::from_static(b"no objects published yet");
            return self.fetch_error(cx, alias, &ask, RequestErrorCode::InvalidRange, reason);
        };
        let start = match ask.start {
            FetchStart::At(l) => l,
            FetchStart::GroupsBack(n) => Location::new((largest.group + 1).saturating_sub(n), 0),
        };
        let cache = self.cache.track(alias);
        let (mut end, mut whole_group) = match ask.end {
            FetchBound::Largest => (largest, None),
            FetchBound::Object(e) => (e.min(largest), None),
            FetchBound::Group(g) if g < largest.group => {
                (cache.and_then(|c| c.last_in_group(g)).unwrap_or(Location::new(g, 0)), Some(g))
            }
            FetchBound::Group(_) => (largest, None),
        };
        if let Some(cap) = ask.cap.filter(|&c| c < end) {
            (end, whole_group) = (cap, None);
        }
        if start > largest || end < start {
            let reason = Bytes::from_static(b"the range is empty or after the largest object");
            return self.fetch_error(cx, alias, &ask, RequestErrorCode::InvalidRange, reason);
        }
        let known = cache.map(|c| c.known_from());
        let unknown_until = match known {
            _ if ask.descending => None,
            None => Some(end),
            Some(k) if start < k => before(k).map(|b| b.min(end)),
            Some(_) => None,
        };
        let from = known.map_or(start, |k| k.max(start));
        let cached: Vec<Piece> = match cache {
            Some(c) if from <= end => c.range(from, end, ask.descending, cx.now),
            _ => Vec::new(),
        }
        .into_iter()
        .map(|(at, o)| Piece::Object(at, o))
        .collect();
        let data = FetchData {
            end,
            whole_group,
            properties: t.info.properties.clone(),
            descending: ask.descending,
            pieces: Vec::new(),
        };
        let Some(gap) = unknown_until else {
            cx.stats.fetch_hits += 1;
            return self.fetch_reply(cx, alias, ask, FetchData { pieces: cached, ..data });
        };
        cx.stats.fetch_misses += 1;
        // What the cache lacks is fetched upstream (draft-22 §3.2.3), within FILL_TIMEOUT.
        let wait = ask.fill_timeout.unwrap_or(DEFAULT_FILL_WAIT).min(MAX_FILL_WAIT);
        let established = matches!(t.source, Source::Subscribed { .. } | Source::Published { .. });
        if !established || wait.is_zero() {
            let kind = if wait.is_zero() { RangeEnd::TimedOut } else { RangeEnd::Unknown };
            let pieces = std::iter::once(Piece::Gap(kind, gap)).chain(cached).collect();
            return self.fetch_reply(cx, alias, ask, FetchData { pieces, ..data });
        }
        let (publisher, track) = (t.source.publisher(), t.name.clone());
        let id = self.next_fetch;
        self.next_fetch += 1;
        let deadline = cx.now + wait;
        self.fetch_deadlines.push(Reverse((deadline, id)));
        let answer = Answer::Fetch { ask, data, cached };
        let pending = UpstreamFetch { alias, publisher, answer, gap, upstream: Vec::new(), bytes: 0 };
        self.fetching.insert(id, pending);
        let msg = UpFetchMsg::Start { alias, id, track, publisher, start, end: gap };
        cx.send(publisher.core, msg);
    }

    /// Sends the answer of a FETCH to the core that asked.
    fn fetch_reply(&mut self, cx: &mut Cx<'_>, alias: TrackAlias, ask: FetchAsk, data: FetchData) {
        let msg =
            FanoutMsg::FetchAnswer { alias, conn: ask.conn, rid: ask.rid, fill: ask.fill, answer: Ok(data) };
        cx.send(ask.from, msg);
    }

    /// The next item of upstream fetch `id`; past [`MAX_UPSTREAM_FETCH_BYTES`] the fetch is
    /// answered with what it has (the rest unknown).
    pub(super) fn upstream_fetch_item(&mut self, cx: &mut Cx<'_>, id: u64, piece: Piece) {
        let Some(f) = self.fetching.get_mut(&id) else { return };
        let at = match &piece {
            Piece::Object(at, o) => {
                f.bytes += o.payload.len();
                *at
            }
            Piece::Gap(_, at) => *at,
        };
        if at <= f.gap {
            f.upstream.push(piece);
        }
        if f.bytes > MAX_UPSTREAM_FETCH_BYTES {
            let publisher = f.publisher;
            cx.send(publisher.core, UpFetchMsg::Cancel { id, publisher });
            self.upstream_fetch_done(cx, id, Some(RangeEnd::Unknown));
        }
    }

    /// Upstream fetch `id` is over: complete (`None`), or not (the rest of its range is a gap
    /// of kind `rest`: unknown when it failed, timed out when FILL_TIMEOUT ran out). The
    /// FETCH is answered: what came from upstream, the gap, then what the cache holds.
    pub(super) fn upstream_fetch_done(&mut self, cx: &mut Cx<'_>, id: u64, rest: Option<RangeEnd>) {
        let Some(f) = self.fetching.remove(&id) else { return };
        let mut pieces = f.upstream;
        if let Some(kind) = rest {
            let last = pieces.last().map(|p| match p {
                Piece::Object(at, _) | Piece::Gap(_, at) => *at,
            });
            if last.is_none_or(|l| l < f.gap) {
                pieces.push(Piece::Gap(kind, f.gap));
            }
        }
        match f.answer {
            Answer::Fetch { ask, data, cached } => {
                pieces.extend(cached);
                self.fetch_reply(cx, f.alias, ask, FetchData { pieces, ..data });
            }
            Answer::Backfill(b) => {
                let fetched = pieces
                    .into_iter()
                    .filter_map(|p| match p {
                        Piece::Object(at, o) => Some((at, o)),
                        Piece::Gap(..) => None,
                    })
                    .collect();
                self.backfill_answer(cx, f.alias, b, fetched);
            }
        }
    }

    /// Upstream fetches whose FILL_TIMEOUT ran out.
    fn fetch_timeouts(&mut self, cx: &mut Cx<'_>) {
        while let Some(id) = pop_due(&mut self.fetch_deadlines, cx.now) {
            let Some(publisher) = self.fetching.get(&id).map(|f| f.publisher) else { continue };
            cx.send(publisher.core, UpFetchMsg::Cancel { id, publisher });
            self.upstream_fetch_done(cx, id, Some(RangeEnd::TimedOut));
        }
    }
}

/// How long a FETCH waits for objects fetched upstream when it names no FILL_TIMEOUT, and the
/// most it may wait when it does.
const DEFAULT_FILL_WAIT: Duration = Duration::from_secs(2);
const MAX_FILL_WAIT: Duration = Duration::from_secs(10);
/// Payload bytes one upstream fetch may bring (the answer is held until it is complete).
const MAX_UPSTREAM_FETCH_BYTES: usize = 32 << 20;

/// A FETCH waiting for the objects its owner's cache lacks.
#[derive(Debug)]
pub(super) struct UpstreamFetch {
    alias: TrackAlias,
    publisher: SessionRef,
    /// Who waits for it.
    answer: Answer,
    /// The upstream fetch covers the range's start through this Location.
    gap: Location,
    upstream: Vec<Piece>,
    bytes: usize,
}

/// What an upstream fetch completes.
#[derive(Debug)]
enum Answer {
    /// A FETCH: its answer without its pieces yet, and what the cache holds of the rest of
    /// the range.
    Fetch { ask: FetchAsk, data: FetchData, cached: Vec<Piece> },
    /// A subscription's backfill ([`Owner::backfill`]): the cache is read when the fetch is
    /// over, so the answer still holds every object forwarded before it.
    Backfill(Backfill),
}

/// The track's MAX_CACHE_DURATION (draft-22 §10.3, draft-16 Track Extension 0x04): how long
/// after it was received an object may still be served from the cache (0: not at all).
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
fn always_forward(cx: &Cx<'_>) -> bool {
    cx.config.publish_forward == PublishForward::Always
}

/// The track's DYNAMIC_GROUPS property is 1 (draft-22 §13: its publisher starts a new group
/// when asked).
fn dynamic_groups(properties: &wire::model::Properties) -> bool {
    properties.int(wire::model::property_type::DYNAMIC_GROUPS) == Some(1)
}

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
