//! A subscription that starts before the Largest Location it was given is sent what the
//! owner's cache holds of its window, before anything that arrives live: the owner answers
//! on the same FIFO queue that carries the track's objects to this core, so every object it
//! forwarded before answering is in the answer, and every one after follows it.

use bytes::Bytes;
use tracing::debug;

use super::{Down, LocalSub};
use crate::cache::CachedObject;
use crate::cx::Cx;
use crate::msg::StreamKey;
use ahash::HashMap;
use session::{data_urgency, Session, StreamId};
use wire::model::{Location, ObjectStatus, SubgroupHeader, SubgroupId, SubgroupObject, TrackAlias};

impl LocalSub {
    /// The owner's cached `objects` for this subscription, to be sent on session `s`: one
    /// downstream subgroup stream per (group, subgroup), objects in order. A subgroup whose
    /// upstream stream is still open (`open`: stream, group, subgroup) keeps its downstream
    /// stream open, and its later objects continue it; the others are finished. Objects that
    /// came as datagrams are not sent again.
    pub(super) fn backfill(
        &mut self,
        cx: &mut Cx,
        s: &mut Session,
        alias: TrackAlias,
        objects: Vec<(Location, CachedObject)>,
        open: Vec<(StreamKey, u64, u64)>,
    ) {
        let conn = self.conn;
        let sub = self;
        let mut streams: HashMap<(u64, u64), StreamId> = HashMap::default();
        let mut order = Vec::new();
        for (at, o) in objects {
            let Some(subgroup) = o.subgroup else { continue };
            if at < sub.start || sub.end.is_some_and(|e| at > e) {
                continue;
            }
            let id = match streams.get(&(at.group, subgroup)) {
                Some(&id) => id,
                None => {
                    let header = SubgroupHeader {
                        track_alias: alias,
                        group_id: at.group,
                        subgroup_id: SubgroupId::Explicit(subgroup),
                        publisher_priority: Some(o.priority),
                        has_properties: true,
                        end_of_group: false,
                        first_object: false,
                    };
                    let id = match s.open_subgroup(&header) {
                        Ok(id) => id,
                        Err(e) => {
                            debug!(%conn, error = %e, "backfill stream not opened");
                            continue;
                        }
                    };
                    let _ =
                        s.set_priority_ordered(id, data_urgency(sub.priority, o.priority), sub.descending);
                    sub.streams += 1;
                    sub.losses.recent.push(id, at.group);
                    streams.insert((at.group, subgroup), id);
                    order.push((at.group, subgroup));
                    id
                }
            };
            let payload: Bytes = o.payload;
            let object = SubgroupObject {
                object_id: at.object,
                properties: o.properties,
                payload_len: payload.len() as u64,
                status: ObjectStatus::Normal,
            };
            let len = payload.len() as u64;
            match s.send_object_until(id, &object, payload, None) {
                Ok(()) => {
                    cx.stats.objects_out += 1;
                    cx.stats.bytes_out += len;
                }
                Err(e) => debug!(%conn, error = %e, "backfill object not sent"),
            }
        }
        for key in order {
            let id = streams[&key];
            match open.iter().find(|(_, g, sg)| (*g, *sg) == key) {
                Some((upstream, ..)) => sub.open.push((*upstream, Down::Open(id))),
                None => {
                    if let Err(e) = s.finish_data_stream(id) {
                        debug!(%conn, error = %e, "backfill stream not finished");
                    }
                }
            }
        }
        debug!(%conn, rid = sub.rid.0, alias = alias.0, streams = streams.len(), "backfill sent");
    }
}
