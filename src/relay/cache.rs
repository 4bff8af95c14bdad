//! The object cache of one shard: the owner shard of a track keeps the objects
//! it forwards, so late joiners and FETCH are served from the edge. Payloads are the same
//! `Bytes` the fan-out sends (shared, not copied).
//!
//! The shard has one byte budget for all its tracks. Past it, whole groups are evicted oldest
//! first, in the order groups were created across the shard's tracks (for a live track the
//! order they stop being used; a FETCH that re-reads an old group does not renew it), and
//! always a track's oldest group, so a track's cache is one contiguous run of groups with no
//! holes. The latest group of each track is never evicted, so a joiner can always get the
//! current group. Status objects (end of group / track) are not cached.
//!
//! What a track's cache cannot vouch for is recorded: the relay may have started receiving
//! mid-group, and evicted groups are gone. [`TrackCache::known_from`] is the first Location
//! from which the cache holds everything the relay received; a FETCH marks what lies before
//! it as an Unknown range rather than letting the gap read as "does not exist".

use std::collections::{BTreeMap, VecDeque};
use std::time::Instant;

use bytes::Bytes;

use ahash::HashMap;
use wire::model::{Location, Properties, TrackAlias};

/// Bytes counted per cached object beyond its payload (headers, map entries).
const OBJECT_OVERHEAD: usize = 64;

/// One cached object.
#[derive(Debug, Clone)]
pub struct CachedObject {
    /// `None`: arrived as a datagram.
    pub subgroup: Option<u64>,
    pub priority: u8,
    pub properties: Properties,
    pub payload: Bytes,
    /// Not served after this (the track's MAX_CACHE_DURATION from when it was received).
    pub expires: Option<Instant>,
    /// The upstream (`msg::Epoch`) it came from; `None` for an upstream FETCH's pieces, which
    /// are not cached.
    pub from: Option<u64>,
}

impl CachedObject {
    fn expired(&self, now: Instant) -> bool {
        self.expires.is_some_and(|t| t <= now)
    }

    fn cost(&self) -> usize {
        self.payload.len() + self.properties.len() * 16 + OBJECT_OVERHEAD
    }
}

#[derive(Debug, Default)]
struct Group {
    objects: BTreeMap<u64, CachedObject>,
    bytes: usize,
}

/// One track's cached groups.
#[derive(Debug)]
pub(crate) struct TrackCache {
    groups: BTreeMap<u64, Group>,
    /// The first object cached; groups below `evicted_below` were evicted; objects through
    /// `expired_through` expired (MAX_CACHE_DURATION).
    first: Location,
    evicted_below: u64,
    expired_through: Option<Location>,
}

impl TrackCache {
    fn new(first: Location) -> Self {
        TrackCache { groups: BTreeMap::new(), first, evicted_below: 0, expired_through: None }
    }

    /// From here on the cache holds every object the relay received for the track.
    pub(crate) fn known_from(&self) -> Location {
        let after_expired =
            self.expired_through.map_or(Location::default(), |l| Location::new(l.group, l.object + 1));
        self.first.max(Location::new(self.evicted_below, 0)).max(after_expired)
    }

    /// The newest group cached.
    pub(crate) fn latest_group(&self) -> Option<u64> {
        self.groups.keys().next_back().copied()
    }

    /// The largest cached object of group `group`.
    pub(crate) fn last_in_group(&self, group: u64) -> Option<Location> {
        let g = self.groups.get(&group)?;
        g.objects.keys().next_back().map(|&o| Location::new(group, o))
    }

    /// Cached objects from `start` through `end` (inclusive), groups ascending or descending,
    /// objects ascending within a group; none that expired by `now`.
    pub(crate) fn range(
        &self,
        start: Location,
        end: Location,
        descending: bool,
        now: Instant,
    ) -> Vec<(Location, CachedObject)> {
        let mut out = Vec::new();
        if end < start {
            return out;
        }
        let mut take = |g: u64, group: &Group| {
            let lo = if g == start.group { start.object } else { 0 };
            let hi = if g == end.group { end.object } else { u64::MAX };
            if lo <= hi {
                let live = group.objects.range(lo..=hi).filter(|(_, obj)| !obj.expired(now));
                out.extend(live.map(|(&o, obj)| (Location::new(g, o), obj.clone())));
            }
        };
        let groups = self.groups.range(start.group..=end.group);
        if descending {
            groups.rev().for_each(|(&g, group)| take(g, group));
        } else {
            groups.for_each(|(&g, group)| take(g, group));
        }
        out
    }
}

/// The caches of every track one shard owns, under one byte budget.
#[derive(Debug)]
pub(crate) struct Cache {
    budget: usize,
    bytes: usize,
    tracks: HashMap<TrackAlias, TrackCache>,
    /// One entry per group created, in creation order; entries of removed tracks are skipped
    /// lazily and compacted when they outnumber the live groups.
    clock: VecDeque<(TrackAlias, u64)>,
    groups: usize,
}

impl Cache {
    pub(crate) fn new(budget: usize) -> Self {
        Cache { budget, bytes: 0, tracks: HashMap::default(), clock: VecDeque::new(), groups: 0 }
    }

    /// Bytes cached now.
    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }

    pub(crate) fn track(&self, alias: TrackAlias) -> Option<&TrackCache> {
        self.tracks.get(&alias)
    }

    /// The cached object at `at` of track `alias`.
    pub(crate) fn get(&self, alias: TrackAlias, at: Location) -> Option<&CachedObject> {
        self.tracks.get(&alias)?.groups.get(&at.group)?.objects.get(&at.object)
    }

    #[cfg(test)]
    /// Stores one object (a repeat of a cached Location is ignored), then evicts down to the
    /// budget. With a budget of 0 nothing is cached.
    pub(crate) fn insert(&mut self, alias: TrackAlias, at: Location, object: CachedObject) {
        self.insert_or_replace(alias, at, object, |_| false);
    }

    /// Caches `object` at `at`; an object already there stays, unless `replace` says it goes
    /// (then `object` takes its place).
    pub(crate) fn insert_or_replace(
        &mut self,
        alias: TrackAlias,
        at: Location,
        object: CachedObject,
        replace: impl FnOnce(&CachedObject) -> bool,
    ) {
        if self.budget == 0 {
            return;
        }
        let t = self.tracks.entry(alias).or_insert_with(|| TrackCache::new(at));
        let group = t.groups.entry(at.group).or_insert_with(|| {
            self.clock.push_back((alias, at.group));
            self.groups += 1;
            Group::default()
        });
        if let Some(old) = group.objects.get(&at.object) {
            if !replace(old) {
                return;
            }
            let old = old.cost();
            group.bytes -= old;
            self.bytes -= old;
        }
        let cost = object.cost();
        group.objects.insert(at.object, object);
        group.bytes += cost;
        self.bytes += cost;
        self.evict();
    }

    /// Drops a track's objects past their MAX_CACHE_DURATION, oldest Location first: what
    /// they were becomes unknown ([`TrackCache::known_from`] moves past them). Objects expire
    /// in the order they arrived, which for a live track is Location order; one that expired
    /// behind a younger one is no longer served either ([`TrackCache::range`]).
    pub(crate) fn expire(&mut self, alias: TrackAlias, now: Instant) {
        let Some(t) = self.tracks.get_mut(&alias) else { return };
        while let Some(mut entry) = t.groups.first_entry() {
            let g = *entry.key();
            let group = entry.get_mut();
            while let Some(first) = group.objects.first_entry() {
                if !first.get().expired(now) {
                    return;
                }
                let o = *first.key();
                let cost = first.remove().cost();
                group.bytes -= cost;
                self.bytes -= cost;
                t.expired_through = Some(Location::new(g, o));
            }
            entry.remove();
            self.groups -= 1;
        }
    }

    /// Forgets a track's cache (the track is gone).
    pub(crate) fn remove_track(&mut self, alias: TrackAlias) {
        if let Some(t) = self.tracks.remove(&alias) {
            for g in t.groups.values() {
                self.bytes -= g.bytes;
            }
            self.groups -= t.groups.len();
        }
        self.compact();
    }

    fn compact(&mut self) {
        if self.clock.len() > 2 * self.groups + 64 {
            let tracks = &self.tracks;
            self.clock.retain(|(a, g)| tracks.get(a).is_some_and(|t| t.groups.contains_key(g)));
        }
    }

    /// Takes an entry off the front: its track loses its oldest group, unless that is the
    /// track's only (latest) group, which goes to the back. Each entry is looked at once.
    fn evict(&mut self) {
        let mut steps = self.clock.len();
        while self.bytes > self.budget && steps > 0 {
            steps -= 1;
            let Some((alias, g)) = self.clock.pop_front() else { break };
            let Some(t) = self.tracks.get_mut(&alias) else { continue };
            if t.groups.len() <= 1 {
                self.clock.push_back((alias, g));
                continue;
            }
            let Some((oldest, group)) = t.groups.pop_first() else { continue };
            t.evicted_below = t.evicted_below.max(oldest + 1);
            self.bytes -= group.bytes;
            self.groups -= 1;
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn obj(len: usize) -> CachedObject {
        CachedObject {
            subgroup: Some(0),
            priority: 1,
            properties: Properties::new(),
            payload: Bytes::from(vec![7u8; len]),
            expires: None,
            from: None,
        }
    }

    fn locs(v: &[(Location, CachedObject)]) -> Vec<(u64, u64)> {
        v.iter().map(|(l, _)| (l.group, l.object)).collect()
    }

    #[test]
    fn ranges_are_inclusive_and_ordered() {
        let mut c = Cache::new(1 << 20);
        let a = TrackAlias(1);
        for g in 0..3 {
            for o in 0..3 {
                c.insert(a, Location::new(g, o), obj(10));
            }
        }
        let t = c.track(a).unwrap();
        assert_eq!(t.known_from(), Location::new(0, 0));
        assert_eq!(t.last_in_group(1), Some(Location::new(1, 2)));
        assert_eq!(
            locs(&t.range(Location::new(0, 2), Location::new(1, 1), false, Instant::now())),
            [(0, 2), (1, 0), (1, 1)]
        );
        assert_eq!(
            locs(&t.range(Location::new(1, 1), Location::new(2, 0), true, Instant::now())),
            [(2, 0), (1, 1), (1, 2)],
            "groups descending, objects ascending"
        );
        assert!(t.range(Location::new(2, 1), Location::new(2, 0), false, Instant::now()).is_empty());
    }

    #[test]
    fn eviction_keeps_the_budget_and_each_tracks_latest_group() {
        let per = 1000 + OBJECT_OVERHEAD;
        let mut c = Cache::new(5 * per);
        let (a, b) = (TrackAlias(1), TrackAlias(2));
        for g in 0..4 {
            c.insert(a, Location::new(g, 0), obj(1000));
            c.insert(b, Location::new(g, 0), obj(1000));
            assert!(c.bytes() <= 5 * per);
        }
        for t in [a, b] {
            let groups: Vec<u64> = c.track(t).unwrap().groups.keys().copied().collect();
            assert_eq!(groups.last(), Some(&3));
            assert!(groups.windows(2).all(|w| w[1] == w[0] + 1), "no holes: {groups:?}");
            assert_eq!(c.track(t).unwrap().known_from(), Location::new(groups[0], 0));
        }
        c.remove_track(a);
        c.remove_track(b);
        assert_eq!(c.bytes(), 0);
        assert_eq!(c.groups, 0);
    }

    /// MAX_CACHE_DURATION: objects are not served past their expiry, and what expired is
    /// unknown from then on (the cache no longer vouches for it).
    #[test]
    fn expired_objects_are_dropped_oldest_first_and_become_unknown() {
        let t0 = Instant::now();
        let mut c = Cache::new(1 << 20);
        let a = TrackAlias(1);
        for (i, (g, o)) in [(0, 0), (0, 1), (1, 0), (1, 1)].into_iter().enumerate() {
            let expires = Some(t0 + std::time::Duration::from_millis(100 * (i as u64 + 1)));
            c.insert(a, Location::new(g, o), CachedObject { expires, ..obj(10) });
        }
        let all = (Location::new(0, 0), Location::new(1, 1));
        let later = t0 + std::time::Duration::from_millis(250);
        assert_eq!(locs(&c.track(a).unwrap().range(all.0, all.1, false, later)), [(1, 0), (1, 1)]);
        c.expire(a, later);
        let t = c.track(a).unwrap();
        assert_eq!(t.known_from(), Location::new(0, 2), "group 0 expired: unknown now");
        assert_eq!(locs(&t.range(all.0, all.1, false, later)), [(1, 0), (1, 1)]);
        c.expire(a, t0 + std::time::Duration::from_secs(1));
        assert_eq!(c.bytes(), 0);
        assert_eq!(c.track(a).unwrap().known_from(), Location::new(1, 2));
    }

    #[test]
    fn a_cache_joined_mid_group_vouches_only_from_there() {
        let mut c = Cache::new(1 << 20);
        let a = TrackAlias(1);
        c.insert(a, Location::new(5, 3), obj(1));
        c.insert(a, Location::new(5, 1), obj(1));
        assert_eq!(c.track(a).unwrap().known_from(), Location::new(5, 3));
    }

    #[test]
    fn one_group_larger_than_the_budget_is_kept_while_latest() {
        let mut c = Cache::new(100);
        let a = TrackAlias(1);
        c.insert(a, Location::new(0, 0), obj(1000));
        c.insert(a, Location::new(0, 0), obj(5));
        assert_eq!(
            c.track(a).unwrap().range(Location::new(0, 0), Location::new(0, 9), false, Instant::now()).len(),
            1
        );
        c.insert(a, Location::new(1, 0), obj(1000));
        assert_eq!(c.track(a).unwrap().known_from(), Location::new(1, 0), "the older group went");
        let mut none = Cache::new(0);
        none.insert(a, Location::new(0, 0), obj(1));
        assert!(none.track(a).is_none());
    }
}
