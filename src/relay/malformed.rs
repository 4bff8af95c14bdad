//! Malformed track detection on the owner (draft-22 §12.1, draft-16 "Malformed Tracks"): what
//! a track's objects have promised so far (final objects of subgroups, groups and the track,
//! each subgroup's priority), and the checks an arriving object or stream end must pass. The
//! owner ends a track that fails one (PUBLISH_DONE MALFORMED_TRACK) and never caches or
//! forwards the object that failed it.

use std::collections::BTreeMap;

use ahash::HashMap;

use super::cache::CachedObject;
use super::msg::{Data, StreamKey};
use wire::model::{Location, ObjectStatus, SubgroupHeader};

/// Groups behind the largest one whose promises are kept (older ones are forgotten, so the
/// state stays bounded; objects that old are rare and then go unchecked).
const KEEP_GROUPS: u64 = 64;

/// One track's promises.
#[derive(Debug, Default)]
pub(crate) struct Shape {
    /// Last object of each finished subgroup: (group, subgroup) → Object ID.
    subgroup_final: BTreeMap<(u64, u64), u64>,
    /// Publisher priority of each subgroup seen.
    subgroup_priority: BTreeMap<(u64, u64), u8>,
    /// Last object of each ended group.
    group_final: BTreeMap<u64, u64>,
    /// END_OF_TRACK, once seen.
    track_final: Option<Location>,
    /// The last Object ID on each open upstream stream.
    last_on_stream: HashMap<StreamKey, u64>,
}

impl Shape {
    /// Checks `data` against what the track promised and records what it promises. `header`
    /// and `subgroup` are the stream's (for stream data), `cached` the object already held
    /// at its Location. `Err` says why the track is malformed.
    pub(crate) fn check(
        &mut self,
        data: &Data,
        stream: Option<(&SubgroupHeader, u64)>,
        cached: Option<&CachedObject>,
    ) -> Result<(), &'static str> {
        match data {
            Data::StreamOpen { .. } => Ok(()),
            Data::Object { key, object, payload, .. } => {
                let Some((h, subgroup)) = stream else { return Ok(()) };
                let at = Location::new(h.group_id, object.object_id);
                let priority = h.publisher_priority.unwrap_or(128);
                if *self.subgroup_priority.entry((h.group_id, subgroup)).or_insert(priority) != priority {
                    return Err("a subgroup with two publisher priorities");
                }
                if self.subgroup_final.get(&(h.group_id, subgroup)).is_some_and(|&f| object.object_id > f) {
                    return Err("an object after the end of its subgroup");
                }
                self.check_location(at)?;
                if let Some(c) = cached {
                    if c.subgroup.is_none() {
                        return Err("an object sent both as a datagram and on a stream");
                    }
                    if c.payload != *payload {
                        return Err("an object received twice with different payloads");
                    }
                }
                match object.status {
                    ObjectStatus::EndOfGroup => self.end_group(at),
                    ObjectStatus::EndOfTrack => self.track_final = Some(at),
                    _ => {}
                }
                self.last_on_stream.insert(*key, object.object_id);
                self.forget_old(h.group_id);
                Ok(())
            }
            Data::StreamEnd { key, reset } => {
                let last = self.last_on_stream.remove(key);
                let (Some((h, subgroup)), Some(last), None) = (stream, last, reset) else { return Ok(()) };
                match self.subgroup_final.insert((h.group_id, subgroup), last) {
                    Some(f) if f != last => return Err("one subgroup ended at two different objects"),
                    _ => {}
                }
                if h.end_of_group {
                    self.end_group(Location::new(h.group_id, last));
                }
                Ok(())
            }
            Data::Datagram { header, payload, .. } => {
                let at = Location::new(header.group_id, header.object_id);
                self.check_location(at)?;
                if let Some(c) = cached {
                    if c.subgroup.is_some() {
                        return Err("an object sent both on a stream and as a datagram");
                    }
                    if c.payload != *payload {
                        return Err("an object received twice with different payloads");
                    }
                }
                if header.end_of_group {
                    self.end_group(at);
                }
                self.forget_old(header.group_id);
                Ok(())
            }
        }
    }

    /// Past the end of its group, or of the track.
    fn check_location(&self, at: Location) -> Result<(), &'static str> {
        if self.group_final.get(&at.group).is_some_and(|&f| at.object > f) {
            return Err("an object after the end of its group");
        }
        if self.track_final.is_some_and(|f| at > f) {
            return Err("an object after the end of the track");
        }
        Ok(())
    }

    fn end_group(&mut self, last: Location) {
        let f = self.group_final.entry(last.group).or_insert(last.object);
        *f = (*f).min(last.object);
    }

    fn forget_old(&mut self, group: u64) {
        let Some(keep) = group.checked_sub(KEEP_GROUPS) else { return };
        if self.group_final.first_key_value().is_some_and(|(&g, _)| g < keep) {
            self.group_final = self.group_final.split_off(&keep);
        }
        if self.subgroup_final.first_key_value().is_some_and(|(&(g, _), _)| g < keep) {
            self.subgroup_final = self.subgroup_final.split_off(&(keep, 0));
        }
        if self.subgroup_priority.first_key_value().is_some_and(|(&(g, _), _)| g < keep) {
            self.subgroup_priority = self.subgroup_priority.split_off(&(keep, 0));
        }
    }
}
