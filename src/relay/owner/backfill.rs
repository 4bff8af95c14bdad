//! The owner's side of a subscription's backfill (`OwnerMsg::Backfill`, ARCHITECTURE.md
//! "Aggregation and state"): the cached objects of its window, after an upstream fetch of what
//! lies before the cache when the publisher was not asked for it already.

use crate::msg::ConnId;
use std::cmp::Reverse;

use super::fetch::{before, DEFAULT_FILL_WAIT};
use super::{Answer, Owner, Source, UpstreamFetch};
use crate::cache::CachedObject;
use crate::cx::Cx;
use crate::msg::{FanoutMsg, UpFetchMsg, UpFetchStart};
use wire::model::{Location, RequestId, TrackAlias};

/// A subscription that wants the cached objects of its window (`OwnerMsg::Backfill`).
#[derive(Debug, Clone, Copy)]
pub(super) struct Backfill {
    pub(super) from: usize,
    pub(super) conn: ConnId,
    pub(super) rid: RequestId,
    pub(super) start: Location,
    pub(super) end: Option<Location>,
}

impl Owner {
    /// The cached objects of `alias` from `start` through `end` (or the Largest Location) for
    /// subscription `rid` of session `conn` on core `from`, with the upstream streams open
    /// toward that core. What the cache no longer holds (evicted, expired, or before the relay
    /// joined) is not there: a subscription carries no gap marker.
    /// What lies before the cache's first object (the relay joined the track later, or evicted
    /// it) is fetched upstream first (as for a FETCH, within the default FILL_TIMEOUT), unless
    /// the track's upstream SUBSCRIBE itself asked the publisher for it (`Track::asked`).
    pub(crate) fn backfill(
        &mut self,
        cx: &mut Cx,
        alias: TrackAlias,
        from: usize,
        (conn, rid): (ConnId, RequestId),
        (start, end): (Location, Option<Location>),
    ) {
        let b = Backfill { from, conn, rid, start, end };
        self.cache.expire(alias, cx.now);
        let Some(t) = self.tracks.get(&alias) else { return self.backfill_answer(cx, alias, b, Vec::new()) };
        let Some(largest) = t.info.largest else { return self.backfill_answer(cx, alias, b, Vec::new()) };
        let known = self.cache.track(alias).map(|c| c.known_from());
        let established = matches!(t.source, Source::Subscribed { .. } | Source::Published { .. });
        let asked = matches!(t.source, Source::Subscribed { .. }) && t.asked.covers(start);
        let gap = match known {
            _ if asked || !established || start > largest => None,
            None => Some(end.map_or(largest, |e| e.min(largest))),
            Some(k) if start < k => before(k).map(|l| end.map_or(l, |e| e.min(l))),
            Some(_) => None,
        };
        let Some(gap) = gap.filter(|&g| g >= start) else {
            return self.backfill_answer(cx, alias, b, Vec::new());
        };
        let (publisher, track) = (t.source.publisher(), t.name.clone());
        let id = self.next_fetch;
        self.next_fetch += 1;
        self.fetch_deadlines.push(Reverse((cx.now + DEFAULT_FILL_WAIT, id)));
        let answer = Answer::Backfill(b);
        self.fetching
            .insert(id, UpstreamFetch { alias, publisher, answer, gap, upstream: Vec::new(), bytes: 0 });
        cx.send(
            publisher.core,
            UpFetchMsg::Start(UpFetchStart { alias, id, track, publisher, start, end: gap }),
        );
    }

    /// Answers backfill `b`: `fetched` (objects from upstream, before the cache's first),
    /// then the cached objects of its window, as of now; and the upstream streams open
    /// toward its core.
    pub(super) fn backfill_answer(
        &mut self,
        cx: &mut Cx,
        alias: TrackAlias,
        b: Backfill,
        fetched: Vec<(Location, CachedObject)>,
    ) {
        let (mut objects, mut open) = (Vec::new(), Vec::new());
        if let Some(t) = self.tracks.get(&alias) {
            let cache = self.cache.track(alias);
            let known = cache.map(|c| c.known_from());
            objects.extend(fetched.into_iter().filter(|(at, _)| known.is_none_or(|k| *at < k)));
            if let (Some(c), Some(largest)) = (cache, t.info.largest) {
                let end = b.end.map_or(largest, |e| e.min(largest));
                objects.extend(c.range(b.start.max(c.known_from()), end, false, cx.now));
            }
            for (key, (header, subgroup, _)) in &t.streams {
                if let Some(sg) = subgroup.filter(|_| !t.shed.is_shed(b.from, *key)) {
                    open.push((*key, header.group_id, sg));
                }
            }
        }
        let (conn, rid) = (b.conn, b.rid);
        cx.send(b.from, FanoutMsg::Backfill { alias, conn, rid, objects, open });
    }
}
