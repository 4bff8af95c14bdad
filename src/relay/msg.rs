//! What relay shards tell each other over the mesh. Every message names a track by its
//! relay-assigned Track Alias; the owner shard of that alias (`alias % cores`) holds the
//! track's state. Each (source, destination) core pair is one FIFO queue, so messages about
//! one upstream stream arrive in the order they were sent.

use std::time::{Duration, Instant};

use bytes::Bytes;

use super::cache::CachedObject;
use wire::model::{
    DatagramHeader, FullTrackName, GroupOrder, Location, LocationFilter, Properties, RangeEnd, RequestId,
    SubgroupHeader, SubgroupObject, TrackAlias, TrackNamespace,
};
use wire::{DoneStatus, RequestErrorCode, ResetCode};

/// A connection's session on its core, as the relay names it: the runtime's handle of the
/// connection (its slot and generation on the core), so that a key never mixes with a Request
/// ID, a stream ID or a Track Alias.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct ConnId(pub u64);

impl std::fmt::Display for ConnId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// A session on some core (the relay's name for a connection: core and per-core id).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SessionRef {
    pub core: usize,
    pub conn: ConnId,
}

impl SessionRef {
    /// Who "announced" a namespace that another relay of the cluster registered in the
    /// namespace directory (`namespaces::Via::Remote`): no session.
    pub const REMOTE: SessionRef = SessionRef { core: usize::MAX, conn: ConnId(u64::MAX) };
}

/// One upstream data stream, named by the ingest core and a per-core sequence number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct StreamKey {
    pub core: usize,
    pub seq: u64,
}

/// Identifies one upstream subscription (one SUBSCRIBE the relay sent, or one PUBLISH it
/// accepted). Unique across cores: the core that made it in the top bits.
pub(crate) type Epoch = u64;

/// What the owner learned from an upstream that became Established.
#[derive(Debug, Clone, Default)]
pub struct TrackInfo {
    pub largest: Option<Location>,
    pub properties: Properties,
    pub group_order: Option<GroupOrder>,
}

/// Where an upstream SUBSCRIBE starts: what its first subscriber asked for, made open-ended
/// (the one upstream serves every later subscriber too). The relay asks upstream for at least
/// what a subscriber asked of it: a subscriber with an absolute start before the publisher's
/// Largest Object, or without a filter, gets those objects (draft-16 and draft-18 §5.1.2:
/// "The specified Start Location MAY be less than the Largest Object observed at the
/// publisher"), which the Largest Object filter would leave behind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum UpStart {
    /// The Largest Object filter: from the publisher's next object (a live join).
    #[default]
    Next,
    /// From this Location on (AbsoluteStart).
    At(Location),
    /// The Largest Group's start, `n` groups back (draft-22 RelativeStart).
    GroupsBack(u64),
    /// No filter: every object the publisher still has.
    All,
}

impl UpStart {
    /// Whether a subscription asking from `start` gets it from the publisher (live, after the
    /// SUBSCRIBE_OK): an absolute start at or before it, or everything.
    pub fn covers(self, start: Location) -> bool {
        match self {
            UpStart::All => true,
            UpStart::At(s) => s <= start,
            UpStart::Next | UpStart::GroupsBack(_) => false,
        }
    }

    /// What a subscriber with `filter` needs from upstream.
    pub fn of(filter: Option<LocationFilter>) -> UpStart {
        match filter {
            None | Some(LocationFilter::None) => UpStart::All,
            Some(LocationFilter::NextObject) | Some(LocationFilter::RelativeStart { groups_back: 0 }) => {
                UpStart::Next
            }
            Some(LocationFilter::RelativeStart { groups_back }) => UpStart::GroupsBack(groups_back),
            Some(
                LocationFilter::AbsoluteStart { start }
                | LocationFilter::AbsoluteStartGroupEnd { start, .. }
                | LocationFilter::AbsoluteRange { start, .. },
            ) if start == Location::default() => UpStart::All,
            Some(
                LocationFilter::AbsoluteStart { start }
                | LocationFilter::AbsoluteStartGroupEnd { start, .. }
                | LocationFilter::AbsoluteRange { start, .. },
            ) => UpStart::At(start),
        }
    }

    /// The start that covers both `self` and `other` (for SUBSCRIBEs held together). An
    /// absolute start and a relative one cannot be compared before the Largest Object is
    /// known: then everything.
    pub fn wider(self, other: UpStart) -> UpStart {
        use UpStart::*;
        match (self, other) {
            (All, _) | (_, All) => All,
            (Next, x) | (x, Next) => x,
            (At(a), At(b)) => At(a.min(b)),
            (GroupsBack(a), GroupsBack(b)) => GroupsBack(a.max(b)),
            _ => All,
        }
    }

    /// The filter of the upstream SUBSCRIBE (`None`: unfiltered).
    pub fn filter(self) -> Option<LocationFilter> {
        match self {
            UpStart::Next => Some(LocationFilter::NextObject),
            UpStart::At(start) => Some(LocationFilter::AbsoluteStart { start }),
            UpStart::GroupsBack(groups_back) => Some(LocationFilter::RelativeStart { groups_back }),
            UpStart::All => None,
        }
    }
}

/// A message between relay shards, as the runtime's mesh carries it: opaque outside the relay
/// (`Msg` inside), with its weight in the mesh's per-pair byte count.
#[derive(Debug)]
pub struct RelayMsg(pub(crate) Msg);

/// What a [`RelayMsg`] holds: one enum per role that receives it, so the shard only routes
/// (`RelayShard::dispatch`) and each role handles its own.
#[derive(Debug)]
pub(crate) enum Msg {
    Owner(OwnerMsg),
    Fanout(FanoutMsg),
    Ingest(IngestMsg),
    UpFetch(UpFetchMsg),
    Namespace(NamespaceMsg),
    Discovery(DiscoveryMsg),
}

impl RelayMsg {
    /// What the message costs in the mesh's per-pair byte count (`RelayConfig::mesh_queue`):
    /// the message itself and the payloads it holds.
    pub fn weight(&self) -> usize {
        let payload = match &self.0 {
            Msg::Owner(OwnerMsg::Upstream { data, .. }) | Msg::Fanout(FanoutMsg::Downstream { data, .. }) => {
                match data {
                    Data::Object { payload, .. } | Data::Datagram { payload, .. } => payload.len(),
                    Data::StreamOpen { .. } | Data::StreamEnd { .. } => 0,
                }
            }
            Msg::Owner(OwnerMsg::UpstreamFetchItem { piece, .. }) => piece.payload_len(),
            Msg::Fanout(FanoutMsg::FetchAnswer { answer: Ok(data), .. }) => {
                data.pieces.iter().map(Piece::payload_len).sum()
            }
            Msg::Fanout(FanoutMsg::Backfill { objects, .. }) => {
                objects.iter().map(|(_, o)| o.payload.len()).sum()
            }
            _ => 0,
        };
        Self::data_weight(payload)
    }

    /// The weight of a message carrying `payload` bytes.
    pub fn data_weight(payload: usize) -> usize {
        std::mem::size_of::<RelayMsg>() + payload
    }
}

impl From<OwnerMsg> for RelayMsg {
    fn from(m: OwnerMsg) -> Self {
        RelayMsg(Msg::Owner(m))
    }
}

impl From<FanoutMsg> for RelayMsg {
    fn from(m: FanoutMsg) -> Self {
        RelayMsg(Msg::Fanout(m))
    }
}

impl From<IngestMsg> for RelayMsg {
    fn from(m: IngestMsg) -> Self {
        RelayMsg(Msg::Ingest(m))
    }
}

impl From<UpFetchMsg> for RelayMsg {
    fn from(m: UpFetchMsg) -> Self {
        RelayMsg(Msg::UpFetch(m))
    }
}

impl From<NamespaceMsg> for RelayMsg {
    fn from(m: NamespaceMsg) -> Self {
        RelayMsg(Msg::Namespace(m))
    }
}

impl From<DiscoveryMsg> for RelayMsg {
    fn from(m: DiscoveryMsg) -> Self {
        RelayMsg(Msg::Discovery(m))
    }
}

/// Messages to a track's owner core (`alias % cores`): from subscriber cores (subscribe, forward, unsubscribe, FETCH, TRACK_STATUS) and from the ingest core of its upstream (answers, data, the end).
#[derive(Debug)]
pub enum OwnerMsg {
    /// Subscription `rid` of session `conn` on core `from` starts at or before the Largest
    /// Location it was given: the cached objects from `start` (through `end`) it was not sent
    /// live, answered with `FanoutMsg::Backfill`.
    Backfill {
        alias: TrackAlias,
        from: usize,
        conn: ConnId,
        rid: RequestId,
        start: Location,
        end: Option<Location>,
    },
    /// The first local subscription of `alias` on core `from`; `rendezvous` is how long it
    /// may wait for a publisher to appear (draft-22 RENDEZVOUS_TIMEOUT; zero: not at all).
    Subscribe {
        alias: TrackAlias,
        track: FullTrackName,
        from: usize,
        rendezvous: Duration,
        who: super::namespaces::Requester,
        /// The subscription's NEW_GROUP_REQUEST (draft-22 §9.20.19), for the upstream SUBSCRIBE.
        new_group: Option<u64>,
        /// Where the subscription starts, for a new upstream SUBSCRIBE.
        start: UpStart,
    },
    /// A core is about to offer `alias` to namespace subscribers (PUBLISH): the owner tells it
    /// the Largest Object the PUBLISH must carry (`DiscoveryMsg::Largest`).
    Largest {
        alias: TrackAlias,
        from: usize,
    },
    /// A subscriber asked for a new group (NEW_GROUP_REQUEST in SUBSCRIBE or REQUEST_UPDATE,
    /// draft-22 §9.20.19 "Relay Handling").
    NewGroup {
        alias: TrackAlias,
        value: u64,
    },
    /// Every local subscription of `alias` on core `from` is paused (FORWARD 0), or one no
    /// longer is.
    Forward {
        alias: TrackAlias,
        from: usize,
        forward: bool,
    },
    /// The last local subscription of `alias` on core `from` ended.
    Unsubscribe {
        alias: TrackAlias,
        from: usize,
    },
    UpstreamOk {
        alias: TrackAlias,
        epoch: Epoch,
        info: TrackInfo,
    },
    UpstreamError {
        alias: TrackAlias,
        epoch: Epoch,
        code: RequestErrorCode,
        reason: Bytes,
    },
    /// PUBLISH_DONE from upstream (after its streams ended), or the publisher went away.
    /// The upstream link that fed `epoch` is gone (its connection closed): the owner keeps
    /// the subscribers and subscribes again once the link is back.
    UpstreamLost {
        alias: TrackAlias,
        epoch: Epoch,
    },
    /// Upstream link `from`'s parent is going away and the link's replacement is up: the
    /// owner moves the link's tracks (make before break).
    UpstreamMoved {
        from: SessionRef,
    },
    UpstreamDone {
        alias: TrackAlias,
        epoch: Epoch,
        status: DoneStatus,
        reason: Bytes,
    },
    /// A publisher sent PUBLISH for `track`.
    Published {
        alias: TrackAlias,
        track: FullTrackName,
        publisher: SessionRef,
        epoch: Epoch,
        info: TrackInfo,
    },
    /// Subscriber core → owner: objects of `track` from the cache.
    Fetch {
        alias: TrackAlias,
        track: FullTrackName,
        ask: FetchAsk,
        who: super::namespaces::Requester,
    },
    /// Publisher's core → owner: the next item of upstream fetch `id`.
    UpstreamFetchItem {
        alias: TrackAlias,
        id: u64,
        piece: Piece,
    },
    /// Upstream fetch `id` ended: `complete` when its stream ended with FIN (else it was
    /// refused, reset, or its session went away).
    UpstreamFetchDone {
        alias: TrackAlias,
        id: u64,
        complete: bool,
    },
    /// Subscriber core → owner.
    Status {
        alias: TrackAlias,
        track: FullTrackName,
        from: usize,
        conn: ConnId,
        rid: RequestId,
        who: super::namespaces::Requester,
    },
    /// Ingest core → owner, for upstream subscription `epoch`.
    Upstream {
        alias: TrackAlias,
        epoch: Epoch,
        data: Data,
    },
}

/// Messages from a track's owner to a core with its subscribers (or that asked it something).
#[derive(Debug)]
pub enum FanoutMsg {
    /// Owner → the core that asked (`OwnerMsg::Backfill`): the cached objects of the
    /// subscription's window, in Location order, as of when the owner answered (every object
    /// forwarded after that follows this message on the same queue); and the track's upstream
    /// subgroup streams still open toward that core, by (group, subgroup), whose later objects
    /// continue the subscription's streams.
    Backfill {
        alias: TrackAlias,
        conn: ConnId,
        rid: RequestId,
        objects: Vec<(Location, CachedObject)>,
        /// (stream, group, subgroup).
        open: Vec<(StreamKey, u64, u64)>,
    },
    /// The upstream is Established: core `to` is in the track's fan-out set from now on.
    /// `open` are the upstream streams already open (objects continue on them).
    SubscribeOk {
        alias: TrackAlias,
        info: TrackInfo,
        open: Vec<(StreamKey, SubgroupHeader)>,
    },
    SubscribeError {
        alias: TrackAlias,
        code: RequestErrorCode,
        reason: Bytes,
    },
    /// The track's upstream was lost (its link closed): subscriptions already Established
    /// stay, new ones wait for the next `SubscribeOk` (draft-22 §7: SUBSCRIBE_OK only with
    /// an Established upstream).
    UpstreamLost {
        alias: TrackAlias,
    },
    /// The track ended upstream: every subscription ends with PUBLISH_DONE `status`.
    TrackDone {
        alias: TrackAlias,
        status: DoneStatus,
        reason: Bytes,
    },
    /// Owner → the asking core.
    FetchAnswer {
        alias: TrackAlias,
        conn: ConnId,
        rid: RequestId,
        fill: bool,
        answer: Result<FetchData, (RequestErrorCode, Bytes)>,
    },
    /// Owner → the asking core: what a SUBSCRIBE_OK would carry, or an error.
    StatusAnswer {
        conn: ConnId,
        rid: RequestId,
        answer: Result<TrackInfo, (RequestErrorCode, Bytes)>,
    },
    /// Owner → a core with subscribers of `alias`.
    Downstream {
        alias: TrackAlias,
        data: Data,
    },
}

/// Messages to the core of a publisher or upstream link session: what to ask upstream, and
/// the answers to its announcements and PUBLISHes.
#[derive(Debug)]
pub enum IngestMsg {
    /// A core applied announcement `rid` of session `conn` (on the core this goes to): once
    /// every core has, the publisher gets REQUEST_OK, so a SUBSCRIBE it prompts finds the
    /// namespace on whichever core it arrives.
    NamespaceKnown { conn: ConnId, rid: RequestId },
    /// SUBSCRIBE `track` upstream on session `publisher`.
    UpstreamSubscribe {
        alias: TrackAlias,
        track: FullTrackName,
        publisher: SessionRef,
        epoch: Epoch,
        /// NEW_GROUP_REQUEST to include (a subscriber asked for it before the track was
        /// Established).
        new_group: Option<u64>,
        /// Where it starts ([`UpStart::Next`] but for a track's first subscribers).
        start: UpStart,
    },
    /// REQUEST_UPDATE NEW_GROUP_REQUEST `value` of upstream `epoch`.
    NewGroup { alias: TrackAlias, epoch: Epoch, value: u64 },
    /// Nobody wants the track any more: end upstream subscription `epoch`.
    UpstreamStop { alias: TrackAlias, epoch: Epoch },
    /// Change the Forward State of upstream `epoch` (REQUEST_UPDATE), or answer an accepted
    /// PUBLISH (PUBLISH_OK) that is still waiting.
    PublishForward { alias: TrackAlias, epoch: Epoch, forward: bool },
    /// The owner cannot take this PUBLISH.
    PublishRefused { alias: TrackAlias, epoch: Epoch, code: RequestErrorCode, reason: Bytes },
}

impl IngestMsg {
    /// SUBSCRIBE `track` upstream from its publisher's next object (a track subscribed again,
    /// or for a FETCH or TRACK_STATUS): no NEW_GROUP_REQUEST, the Largest Object filter.
    pub fn subscribe_live(
        alias: TrackAlias,
        track: FullTrackName,
        publisher: SessionRef,
        epoch: Epoch,
    ) -> Self {
        IngestMsg::UpstreamSubscribe { alias, track, publisher, epoch, new_group: None, start: UpStart::Next }
    }
}

/// FETCH `start..=end` of `track` upstream on session `publisher`, for the owner's pending
/// fetch `id`.
#[derive(Debug)]
pub struct UpFetchStart {
    pub alias: TrackAlias,
    pub id: u64,
    pub track: FullTrackName,
    pub publisher: SessionRef,
    pub start: Location,
    pub end: Location,
}

/// Messages to the upstream fetch role on the core of a publisher or upstream link session.
#[derive(Debug)]
pub enum UpFetchMsg {
    /// FETCH the range of a track upstream, for the owner's pending fetch.
    Start(UpFetchStart),
    /// Upstream fetch `id` is no longer wanted (FILL_TIMEOUT).
    Cancel { id: u64, publisher: SessionRef },
}

/// The namespace table, replicated to every core.
#[derive(Debug)]
pub enum NamespaceMsg {
    /// PUBLISH_NAMESPACE `rid` of `publisher`; every core answers [`IngestMsg::NamespaceKnown`].
    NamespaceAnnounced {
        namespace: TrackNamespace,
        publisher: SessionRef,
        rid: RequestId,
        via: super::namespaces::Via,
    },
    NamespaceWithdrawn {
        namespace: TrackNamespace,
        publisher: SessionRef,
    },
}

/// Tracks with an Established upstream, replicated to every core: namespace subscribers that asked for PUBLISH get one for each.
#[derive(Debug)]
pub enum DiscoveryMsg {
    /// Namespace subscribers that asked for PUBLISH get one for it.
    TrackAvailable {
        alias: TrackAlias,
        track: FullTrackName,
        properties: Properties,
    },
    TrackGone {
        alias: TrackAlias,
    },
    /// The owner's Largest Object of `alias`, for the PUBLISHes waiting to be offered.
    Largest {
        alias: TrackAlias,
        largest: Option<Location>,
    },
}

/// Objects and stream events of one track, as they travel between cores.
#[derive(Debug, Clone)]
pub enum Data {
    /// An upstream subgroup stream began (its header carries the relay's alias).
    StreamOpen {
        key: StreamKey,
        header: SubgroupHeader,
    },
    Object {
        key: StreamKey,
        object: SubgroupObject,
        payload: Bytes,
        /// When the ingest core received it (delivery timeouts count from here).
        received: Instant,
    },
    /// The upstream stream ended: FIN (`reset == None`) or reset with a code.
    StreamEnd {
        key: StreamKey,
        reset: Option<ResetCode>,
    },
    Datagram {
        header: DatagramHeader,
        payload: Bytes,
        received: Instant,
    },
}

/// Where a FETCH range starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FetchStart {
    At(Location),
    /// `{Largest.Group + 1 - groups_back, 0}` (a relative Location filter).
    GroupsBack(u64),
}

/// Where a FETCH range ends (inclusive).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FetchBound {
    Object(Location),
    /// Through the end of this group.
    Group(u64),
    /// Through the Largest Object.
    Largest,
}

/// A FETCH (or fill) a subscriber core asks the owner to answer.
#[derive(Debug, Clone)]
pub struct FetchAsk {
    pub from: usize,
    pub conn: ConnId,
    /// The FETCH's Request ID (for a fill: the SUBSCRIBE's).
    pub rid: RequestId,
    pub start: FetchStart,
    pub end: FetchBound,
    pub descending: bool,
    /// The end never goes past this (a joining FETCH or fill ends where its subscription's
    /// Largest Location was, so the two are contiguous and do not overlap).
    pub cap: Option<Location>,
    /// A draft-22 fill fetch stream: no FETCH_OK.
    pub fill: bool,
    /// FILL_TIMEOUT (draft-22 §9.20.5): how long objects the cache lacks may be waited for
    /// from upstream (`None`: the relay's default; zero: not at all).
    pub fill_timeout: Option<Duration>,
    /// The subscriber priority its stream is sent at (the FETCH's SUBSCRIBER_PRIORITY, or
    /// its subscription's for a joining FETCH or fill; draft-22 §5.1).
    pub priority: u8,
}

/// One item of a FETCH answer, in stream order.
#[derive(Debug, Clone)]
pub enum Piece {
    Object(Location, CachedObject),
    /// Every Location after the previous piece, through this one, is of this kind.
    Gap(RangeEnd, Location),
}

impl Piece {
    fn payload_len(&self) -> usize {
        match self {
            Piece::Object(_, o) => o.payload.len(),
            Piece::Gap(..) => 0,
        }
    }
}

/// The owner's answer: the range resolved against the Largest Object, and the cached objects
/// in it.
#[derive(Debug, Clone)]
pub struct FetchData {
    /// Inclusive end of the response.
    pub end: Location,
    /// The request asked through the end of this group and the response covers it (draft-16
    /// writes it as `{group + 1, 0}`).
    pub whole_group: Option<u64>,
    pub properties: Properties,
    /// Groups in descending order (objects ascending within each).
    pub descending: bool,
    /// Objects, and ranges the relay can vouch no object for (unknown, timed out).
    pub pieces: Vec<Piece>,
}

#[cfg(test)]
mod tests {
    use super::UpStart;
    use wire::model::{Location, LocationFilter as F};

    /// What a subscriber's filter asks upstream: absolute starts and windows as their start
    /// ({0, 0} and no filter: everything), the live filters as the next object, a relative
    /// start of several groups as itself.
    #[test]
    fn the_upstream_start_of_each_filter() {
        let at = Location::new;
        let cases = [
            (None, UpStart::All),
            (Some(F::None), UpStart::All),
            (Some(F::AbsoluteStart { start: at(0, 0) }), UpStart::All),
            (Some(F::AbsoluteStart { start: at(3, 1) }), UpStart::At(at(3, 1))),
            (Some(F::AbsoluteStartGroupEnd { start: at(2, 0), end_group: 9 }), UpStart::At(at(2, 0))),
            (Some(F::AbsoluteRange { start: at(2, 5), end: at(4, 0) }), UpStart::At(at(2, 5))),
            (Some(F::NextObject), UpStart::Next),
            (Some(F::RelativeStart { groups_back: 0 }), UpStart::Next),
            (Some(F::RelativeStart { groups_back: 3 }), UpStart::GroupsBack(3)),
        ];
        for (filter, want) in cases {
            assert_eq!(UpStart::of(filter), want, "{filter:?}");
        }
        assert_eq!(UpStart::All.filter(), None, "everything: unfiltered");
        assert_eq!(UpStart::At(at(3, 1)).filter(), Some(F::AbsoluteStart { start: at(3, 1) }));
        assert_eq!(UpStart::Next.filter(), Some(F::NextObject));
    }

    /// SUBSCRIBEs held together ask for the widest start; an absolute and a relative start
    /// cannot be compared before the Largest Object is known, so they ask for everything.
    #[test]
    fn held_subscribes_ask_for_the_widest_start() {
        let at = Location::new;
        assert_eq!(UpStart::Next.wider(UpStart::At(at(5, 0))), UpStart::At(at(5, 0)));
        assert_eq!(UpStart::At(at(5, 0)).wider(UpStart::At(at(2, 7))), UpStart::At(at(2, 7)));
        assert_eq!(UpStart::GroupsBack(1).wider(UpStart::GroupsBack(4)), UpStart::GroupsBack(4));
        assert_eq!(UpStart::GroupsBack(1).wider(UpStart::At(at(9, 0))), UpStart::All);
        assert_eq!(UpStart::All.wider(UpStart::Next), UpStart::All);
        assert!(UpStart::At(at(2, 0)).covers(at(2, 0)) && UpStart::At(at(2, 0)).covers(at(3, 0)));
        assert!(!UpStart::At(at(2, 1)).covers(at(2, 0)));
        assert!(UpStart::All.covers(at(0, 0)) && !UpStart::Next.covers(at(9, 9)));
    }
}
