//! What the HTTP side doors read of a core (`GET /announced`, `GET /fetch`; README.md "HTTP
//! side doors"): the namespaces this relay can serve, and a group of a track from the cache.
//! The host asks between turns, for a request on the web listener's thread; nothing here
//! changes state.

use std::time::Instant;

use bytes::Bytes;
use wire::model::{Location, TrackAlias, TrackNamespace, LAST_OBJECT};

use crate::cache::Cache;
use crate::cx::Cx;
use crate::ingest::Ingest;

/// The namespaces at or below `prefix` that discovery reports, and those of this core's
/// sessions' PUBLISHes.
pub(crate) fn namespaces_under(cx: &Cx, ingest: &Ingest, prefix: &TrackNamespace) -> Vec<TrackNamespace> {
    let mut out = cx.namespaces.distinct_under(prefix);
    for namespace in ingest.published_namespaces() {
        if namespace.starts_with(prefix) && !out.contains(namespace) {
            out.push(namespace.clone());
        }
    }
    out
}

/// Group `group` of track `alias` (the newest cached when `None`) from `cache`: its number
/// and its objects' payloads in order.
pub(crate) fn cached_group(
    cache: &Cache,
    alias: TrackAlias,
    group: Option<u64>,
    now: Instant,
) -> Option<(u64, Vec<Bytes>)> {
    let cache = cache.track(alias)?;
    let g = group.or_else(|| cache.latest_group())?;
    let objects = cache.range(Location::new(g, 0), Location::new(g, LAST_OBJECT), false, now);
    (!objects.is_empty()).then(|| (g, objects.into_iter().map(|(_, o)| o.payload).collect()))
}
