//! What the HTTP side doors read of a core (`GET /announced`, `GET /fetch`; README.md "HTTP
//! side doors"): the namespaces this relay can serve, and a group of a track from the cache.
//! The host asks between turns, for a request on the web listener's thread; nothing here
//! changes state.

use std::time::Instant;

use bytes::Bytes;
use wire::model::{FullTrackName, Location, TrackNamespace, LAST_OBJECT};

use crate::RelayShard;

impl RelayShard {
    /// The namespaces at or below `prefix` this relay can serve: those discovery reports
    /// (announced here, at the parent relay, or elsewhere in the cluster), and those of this
    /// core's sessions' PUBLISHes (each core knows only its own: ask every core).
    pub fn namespaces_under(&self, prefix: &TrackNamespace) -> Vec<TrackNamespace> {
        let mut out = self.namespaces.distinct_under(prefix);
        for namespace in self.ingest.published_namespaces() {
            if namespace.starts_with(prefix) && !out.contains(namespace) {
                out.push(namespace.clone());
            }
        }
        out
    }

    /// The core whose cache holds `track` (its owner).
    pub fn owner_core(&self, track: &FullTrackName) -> usize {
        crate::alias::owner(self.key.alias(track), self.cores)
    }

    /// Group `group` of `track` (the newest cached when `None`) as this core's cache holds
    /// it, objects in order: its number and their payloads. `None` when this core does not
    /// cache the track or that group (or every object of it expired).
    pub fn cached_group(
        &self,
        track: &FullTrackName,
        group: Option<u64>,
        now: Instant,
    ) -> Option<(u64, Vec<Bytes>)> {
        let cache = self.owner.cache.track(self.key.alias(track))?;
        let g = group.or_else(|| cache.latest_group())?;
        let objects = cache.range(Location::new(g, 0), Location::new(g, LAST_OBJECT), false, now);
        (!objects.is_empty()).then(|| (g, objects.into_iter().map(|(_, o)| o.payload).collect()))
    }
}
