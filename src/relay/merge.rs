//! Several publishers of one track, merged (draft-22 §7.3 Multiple Publishers: "Relays MUST
//! handle Objects for the same Track from multiple publishers and forward them to matching
//! `Established` subscriptions. The Relay SHOULD attempt to deduplicate Objects before
//! forwarding"). The owner keeps every accepted PUBLISH of a track and passes what each
//! sends through one [`Merge`]:
//!
//! - Each subgroup (group, subgroup ID) is one lane with one downstream stream: the first
//!   publisher stream of the subgroup to open names it; the others' streams of the same subgroup
//!   join the lane and are never opened downstream.
//! - An object goes down the lane when its Object ID is past the last one forwarded there, so
//!   each object is forwarded once and a stream's objects stay in increasing order (a stream
//!   is never reordered, draft-22 §7.4); a copy, or an object behind what another publisher
//!   already delivered, is dropped.
//! - A lane ends when its last publisher stream ends: with FIN if any of them ended with FIN,
//!   else with the last reset. A publisher stream of a subgroup whose lane already ended is
//!   dropped whole (the subgroup was delivered).
//! - Datagrams are forwarded once per Location.
//!
//! What is remembered of ended lanes and delivered datagrams is bounded ([`REMEMBERED`]).

use std::collections::VecDeque;

use ahash::{HashMap, HashSet};
use wire::model::SubgroupId;

use super::msg::{Data, StreamKey};

/// Ended lanes and delivered datagram Locations remembered, each (oldest forgotten first).
const REMEMBERED: usize = 1024;

/// A subgroup: (group, subgroup ID).
type LaneId = (u64, u64);

#[derive(Debug)]
struct Lane {
    /// The downstream stream: the first publisher stream of the subgroup.
    key: StreamKey,
    /// The last Object ID forwarded.
    last: Option<u64>,
    /// Publisher streams of the subgroup still open.
    members: HashSet<StreamKey>,
    /// One of them ended with FIN.
    fin: bool,
}

/// A bounded set remembered in arrival order.
#[derive(Debug, Default)]
struct Recent {
    order: VecDeque<LaneId>,
    set: HashSet<LaneId>,
}

impl Recent {
    fn contains(&self, id: &LaneId) -> bool {
        self.set.contains(id)
    }

    /// Remembers `id`; false when it was already there.
    fn insert(&mut self, id: LaneId) -> bool {
        if !self.set.insert(id) {
            return false;
        }
        self.order.push_back(id);
        if self.order.len() > REMEMBERED {
            if let Some(old) = self.order.pop_front() {
                self.set.remove(&old);
            }
        }
        true
    }
}

/// One track's merge of its publishers' data (see the module header).
#[derive(Debug, Default)]
pub(super) struct Merge {
    lanes: HashMap<LaneId, Lane>,
    by_stream: HashMap<StreamKey, LaneId>,
    /// Publisher streams not forwarded at all (their subgroup's lane had ended).
    dropped: HashSet<StreamKey>,
    ended: Recent,
    datagrams: Recent,
}

/// The subgroup ID a header names, when it names one (the ingest core makes a "first
/// object" ID explicit before the owner sees it).
fn subgroup(id: SubgroupId) -> Option<u64> {
    match id {
        SubgroupId::Zero => Some(0),
        SubgroupId::Explicit(id) => Some(id),
        SubgroupId::FirstObject => None,
    }
}

impl Merge {
    /// A merge starting while one publisher's streams are open: `open` gives each, with its
    /// group, subgroup and the last Object ID forwarded on it.
    pub(crate) fn new(open: impl Iterator<Item = (StreamKey, u64, Option<u64>, Option<u64>)>) -> Self {
        let mut m = Merge::default();
        for (key, group, sub, last) in open {
            let Some(sub) = sub else { continue };
            let lane = Lane { key, last, members: [key].into_iter().collect(), fin: false };
            m.lanes.insert((group, sub), lane);
            m.by_stream.insert(key, (group, sub));
        }
        m
    }

    /// Whether no lane is open (with one publisher left, the merge can go).
    pub(crate) fn is_idle(&self) -> bool {
        self.lanes.is_empty() && self.dropped.is_empty()
    }

    /// What of `data` goes downstream, and under which stream. `merging`: several publishers
    /// feed the track now; when not, new streams pass as they are and only the lanes still
    /// open are finished.
    pub(crate) fn admit(&mut self, data: Data, merging: bool) -> Option<Data> {
        match data {
            Data::StreamOpen { key, header } => {
                let Some(id) = subgroup(header.subgroup_id).map(|s| (header.group_id, s)) else {
                    return Some(Data::StreamOpen { key, header });
                };
                if let Some(lane) = self.lanes.get_mut(&id) {
                    lane.members.insert(key);
                    self.by_stream.insert(key, id);
                    return None;
                }
                if self.ended.contains(&id) {
                    self.dropped.insert(key);
                    return None;
                }
                if merging {
                    let lane = Lane { key, last: None, members: [key].into_iter().collect(), fin: false };
                    self.lanes.insert(id, lane);
                    self.by_stream.insert(key, id);
                }
                Some(Data::StreamOpen { key, header })
            }
            Data::Object { key, object, payload, received } => {
                if self.dropped.contains(&key) {
                    return None;
                }
                let Some(lane) = self.by_stream.get(&key).and_then(|id| self.lanes.get_mut(id)) else {
                    return Some(Data::Object { key, object, payload, received });
                };
                if lane.last.is_some_and(|last| object.object_id <= last) {
                    return None; // a copy, or behind what another publisher delivered
                }
                lane.last = Some(object.object_id);
                Some(Data::Object { key: lane.key, object, payload, received })
            }
            Data::StreamEnd { key, reset } => {
                if self.dropped.remove(&key) {
                    return None;
                }
                let Some(id) = self.by_stream.remove(&key) else {
                    return Some(Data::StreamEnd { key, reset });
                };
                let lane = self.lanes.get_mut(&id)?;
                lane.members.remove(&key);
                lane.fin |= reset.is_none();
                if !lane.members.is_empty() {
                    return None;
                }
                let lane = self.lanes.remove(&id)?;
                self.ended.insert(id);
                Some(Data::StreamEnd { key: lane.key, reset: if lane.fin { None } else { reset } })
            }
            Data::Datagram { header, payload, received } => {
                if merging && !self.datagrams.insert((header.group_id, header.object_id)) {
                    return None;
                }
                Some(Data::Datagram { header, payload, received })
            }
        }
    }
}
