//! What a subscriber thread counts: per subscription, which sequence numbers arrived (lost,
//! duplicated) and whether objects of one subgroup stream arrived in order; per thread,
//! delivered objects and bytes in the measurement window and latency histograms.

use std::collections::BTreeMap;

use hdrhistogram::Histogram;
use moq_edge::client::stamp::read_stamp;
use moq_edge::client::Received;

/// Which sequence numbers a subscription is accountable for.
#[derive(Debug, Clone, Copy)]
pub enum Expect {
    /// Every sequence number in `lo..end` (a subscription present for the whole window).
    Window { lo: u64, end: u64 },
    /// From the first to the last one that arrived (a subscriber that joined or left
    /// while the track ran): only holes in between count as lost.
    Observed,
}

/// One subscription's arrivals.
#[derive(Debug)]
pub struct SubCheck {
    expect: Expect,
    /// One bit per sequence number `0..total`.
    seen: Vec<u64>,
    unique: u64,
    first: Option<u64>,
    last: Option<u64>,
    pub duplicated: u64,
    pub reordered: u64,
    /// Objects without a readable stamp (not ours, or cut short).
    pub malformed: u64,
    /// (group, subgroup) → the last Object ID received on that stream.
    streams: BTreeMap<(u64, u64), u64>,
}

/// Subgroup streams remembered per subscription for the order check; older ones are
/// forgotten (their objects have long arrived).
const STREAMS_KEPT: usize = 64;

impl SubCheck {
    /// `total`: sequence numbers the publisher will send (`0..total`).
    pub fn new(expect: Expect, total: u64) -> Self {
        SubCheck {
            expect,
            seen: vec![0; total.div_ceil(64) as usize],
            unique: 0,
            first: None,
            last: None,
            duplicated: 0,
            reordered: 0,
            malformed: 0,
            streams: BTreeMap::new(),
        }
    }

    /// Records one arrival; returns its stamp's (sequence number, send time in µs).
    pub fn record(&mut self, r: &Received) -> Option<(u64, u64)> {
        let Some(stamp) = read_stamp(&r.payload) else {
            self.malformed += 1;
            return None;
        };
        if !r.via_datagram {
            let key = (r.group, r.subgroup);
            match self.streams.get_mut(&key) {
                Some(last) if r.object <= *last => self.reordered += 1,
                Some(last) => *last = r.object,
                None => {
                    self.streams.insert(key, r.object);
                    if self.streams.len() > STREAMS_KEPT {
                        self.streams.pop_first();
                    }
                }
            }
        }
        let seq = stamp.seq;
        let (word, bit) = ((seq / 64) as usize, 1u64 << (seq % 64));
        match self.seen.get_mut(word) {
            Some(w) if *w & bit != 0 => self.duplicated += 1,
            Some(w) => {
                *w |= bit;
                self.unique += 1;
                self.first = Some(self.first.map_or(seq, |f| f.min(seq)));
                self.last = Some(self.last.map_or(seq, |l| l.max(seq)));
            }
            None => self.malformed += 1,
        }
        Some((seq, stamp.micros))
    }

    /// Whether `seq` falls in the window this subscription is judged on.
    pub fn in_window(&self, seq: u64) -> bool {
        match self.expect {
            Expect::Window { lo, end } => (lo..end).contains(&seq),
            Expect::Observed => true,
        }
    }

    /// (expected, lost): sequence numbers it should have had, and those that never came.
    pub fn expected_lost(&self) -> (u64, u64) {
        let (lo, end) = match self.expect {
            Expect::Window { lo, end } => (lo, end),
            Expect::Observed => match (self.first, self.last) {
                (Some(f), Some(l)) => (f, l + 1),
                _ => return (0, 0),
            },
        };
        let got =
            (lo..end).filter(|&s| self.seen.get((s / 64) as usize).is_some_and(|w| w & (1 << (s % 64)) != 0));
        let expected = end.saturating_sub(lo);
        (expected, expected - got.count() as u64)
    }
}

/// Latency histogram in microseconds, 1 µs to 100 s, 3 significant digits.
pub fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 100_000_000, 3).unwrap_or_else(|_| unreachable!("valid bounds"))
}

/// What one thread counted; merged into the run's totals.
#[derive(Debug)]
pub struct Tally {
    /// Objects and payload bytes received inside the measurement window (by receive time).
    pub delivered_objects: u64,
    pub delivered_bytes: u64,
    pub expected: u64,
    pub lost: u64,
    pub duplicated: u64,
    pub reordered: u64,
    pub malformed: u64,
    /// Publish → receive, for objects sent inside the window.
    pub latency: Histogram<u64>,
    /// SUBSCRIBE sent → first object (churn and late-join scenarios).
    pub join: Histogram<u64>,
    /// SUBSCRIBE sent → SUBSCRIBE_OK.
    pub subscribe_ok: Histogram<u64>,
    /// Late joiners: objects of the group in progress that they did not get (the first
    /// Object ID received), summed.
    pub missed_in_group: u64,
    pub joins: u64,
    pub sessions: u64,
    pub subscribe_errors: u64,
    pub resets: u64,
    /// Subscriber connections stalled after the warm-up (`--stall`): not counted above.
    pub stalled: u64,
}

impl Default for Tally {
    fn default() -> Self {
        Tally {
            delivered_objects: 0,
            delivered_bytes: 0,
            expected: 0,
            lost: 0,
            duplicated: 0,
            reordered: 0,
            malformed: 0,
            latency: histogram(),
            join: histogram(),
            subscribe_ok: histogram(),
            missed_in_group: 0,
            joins: 0,
            sessions: 0,
            subscribe_errors: 0,
            stalled: 0,
            resets: 0,
        }
    }
}

impl Tally {
    /// Adds a finished subscription's counts.
    pub fn close(&mut self, c: &SubCheck) {
        let (expected, lost) = c.expected_lost();
        self.expected += expected;
        self.lost += lost;
        self.duplicated += c.duplicated;
        self.reordered += c.reordered;
        self.malformed += c.malformed;
    }

    pub fn merge(&mut self, o: &Tally) {
        self.delivered_objects += o.delivered_objects;
        self.delivered_bytes += o.delivered_bytes;
        self.expected += o.expected;
        self.lost += o.lost;
        self.duplicated += o.duplicated;
        self.reordered += o.reordered;
        self.malformed += o.malformed;
        // Same bounds on both sides: adding cannot fail.
        let _ = self.latency.add(&o.latency);
        let _ = self.join.add(&o.join);
        let _ = self.subscribe_ok.add(&o.subscribe_ok);
        self.missed_in_group += o.missed_in_group;
        self.joins += o.joins;
        self.sessions += o.sessions;
        self.subscribe_errors += o.subscribe_errors;
        self.resets += o.resets;
        self.stalled += o.stalled;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use moq_edge::client::stamp::stamped;

    fn obj(seq: u64, group: u64, object: u64) -> Received {
        Received { group, subgroup: 0, object, payload: stamped(seq, 1, 32), via_datagram: false }
    }

    #[test]
    fn counts_lost_duplicated_and_reordered() {
        let mut c = SubCheck::new(Expect::Window { lo: 2, end: 8 }, 10);
        for (seq, g, o) in [(0, 0, 0), (2, 0, 2), (3, 1, 0), (3, 1, 0), (5, 1, 2), (4, 1, 1), (7, 2, 1)] {
            c.record(&obj(seq, g, o));
        }
        // 6 missing; 3 twice; object 1 of group 1 after object 2 of the same stream.
        assert_eq!(c.expected_lost(), (6, 1));
        assert_eq!((c.duplicated, c.reordered, c.unique), (1, 2, 6));
        let mut bad = Received { payload: Bytes::from_static(b"short"), ..obj(0, 0, 0) };
        assert_eq!(c.record(&bad), None);
        bad.payload = stamped(1000, 1, 32);
        assert!(c.record(&bad).is_some());
        assert_eq!(c.malformed, 2);
    }

    #[test]
    fn observed_counts_holes_between_first_and_last() {
        let mut c = SubCheck::new(Expect::Observed, 100);
        assert_eq!(c.expected_lost(), (0, 0));
        for seq in [40, 41, 43, 44] {
            c.record(&obj(seq, seq / 10, seq % 10));
        }
        assert_eq!(c.expected_lost(), (5, 1));
    }

    #[test]
    fn tallies_merge() {
        let mut a = Tally::default();
        let mut b = Tally { delivered_objects: 3, lost: 1, ..Tally::default() };
        b.latency.record(100).unwrap_or_else(|_| unreachable!());
        a.merge(&b);
        a.merge(&b);
        assert_eq!((a.delivered_objects, a.lost, a.latency.len()), (6, 2, 2));
    }
}
