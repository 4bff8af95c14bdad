//! The sans-IO impairment model: one [`Link`] per direction, fed datagrams with their arrival
//! time, yields them at their release time.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, VecDeque};
use std::time::{Duration, Instant};

use crate::rng::Rng;

/// Gilbert–Elliott bursty loss: a two-state Markov chain stepped once per packet.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GilbertElliott {
    /// Probability of moving from the good state to the bad one, per packet.
    pub p: f64,
    /// Probability of moving from the bad state back to the good one, per packet.
    pub r: f64,
    /// Loss probability while in the good state.
    pub loss_good: f64,
    /// Loss probability while in the bad state.
    pub loss_bad: f64,
}

impl GilbertElliott {
    /// The long-run loss rate: the chain spends p/(p+r) of the packets in the bad state, so
    /// loss = r/(p+r) * loss_good + p/(p+r) * loss_bad.
    pub fn stationary_loss(&self) -> f64 {
        if self.p + self.r <= 0.0 {
            return self.loss_good; // never leaves the good state it starts in
        }
        let bad = self.p / (self.p + self.r);
        (1.0 - bad) * self.loss_good + bad * self.loss_bad
    }
}

/// How the jitter is drawn in [0, jitter].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum JitterDist {
    /// Uniform in [0, jitter]; mean jitter/2.
    #[default]
    Uniform,
    /// Bell-shaped in [0, jitter] (the mean of four uniforms, Irwin–Hall); mean jitter/2.
    Normal,
}

/// One direction's impairments at one moment. `Settings::default()` forwards untouched.
#[derive(Clone, Debug, PartialEq)]
pub struct Settings {
    /// Drops everything (counted as [`Cause::Outage`]).
    pub outage: bool,
    /// Independent random loss probability, applied after the Gilbert–Elliott chain.
    pub loss: f64,
    /// Bursty loss, if any.
    pub ge: Option<GilbertElliott>,
    /// Fixed one-way delay.
    pub delay: Duration,
    /// Extra delay drawn in [0, jitter] per packet.
    pub jitter: Duration,
    pub jitter_dist: JitterDist,
    /// If false (the default), jitter never reorders: a packet is never released before the
    /// one that arrived before it (its delay is raised to that one's release time instead).
    pub jitter_reorders: bool,
    /// Probability that a packet is held back by `reorder_delay` more (so that later packets
    /// overtake it), whatever `jitter_reorders` says.
    pub reorder: f64,
    pub reorder_delay: Duration,
    /// Probability that a packet is delivered twice (the copy right after the original).
    pub dup: f64,
    /// Bottleneck rate in bits/s; 0 is unlimited (no queue either).
    pub rate_bps: u64,
    /// The bottleneck's queue in bytes (the packet being serialized included); a packet that
    /// does not fit is dropped ([`Cause::Queue`]).
    pub queue_bytes: usize,
}

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            outage: false,
            loss: 0.0,
            ge: None,
            delay: Duration::ZERO,
            jitter: Duration::ZERO,
            jitter_dist: JitterDist::Uniform,
            jitter_reorders: false,
            reorder: 0.0,
            reorder_delay: Duration::from_millis(10),
            dup: 0.0,
            rate_bps: 0,
            queue_bytes: 64_000,
        }
    }
}

/// From `at` after the link's start, the link behaves as `settings`.
#[derive(Clone, Debug, PartialEq)]
pub struct Phase {
    pub at: Duration,
    pub settings: Settings,
}

/// Settings over time: `base` until the first phase, then each phase from its `at` on.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Schedule {
    pub base: Settings,
    /// Sorted by `at` ([`Schedule::new`] sorts them).
    pub phases: Vec<Phase>,
}

impl Schedule {
    pub fn new(base: Settings, mut phases: Vec<Phase>) -> Schedule {
        phases.sort_by_key(|p| p.at);
        Schedule { base, phases }
    }

    /// Fixed settings, no phases.
    pub fn constant(settings: Settings) -> Schedule {
        Schedule { base: settings, phases: Vec::new() }
    }

    /// The settings in force `offset` after the start.
    pub fn at(&self, offset: Duration) -> &Settings {
        match self.phases.iter().rposition(|p| p.at <= offset) {
            Some(i) => &self.phases[i].settings,
            None => &self.base,
        }
    }
}

/// Why a packet was dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cause {
    /// Independent random loss (`Settings::loss`).
    Random,
    /// Gilbert–Elliott loss.
    Burst,
    /// The bottleneck queue was full.
    Queue,
    /// An outage phase.
    Outage,
}

/// What [`Link::push`] decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fate {
    Dropped(Cause),
    /// Released at `release`; `duplicated`: a copy follows it at the same time.
    Scheduled {
        release: Instant,
        duplicated: bool,
    },
}

/// Counters of one link.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    pub packets_in: u64,
    pub bytes_in: u64,
    pub dropped_random: u64,
    pub dropped_burst: u64,
    pub dropped_queue: u64,
    pub dropped_outage: u64,
    /// Copies added by duplication.
    pub duplicated: u64,
    /// Packets handed out by [`Link::poll`] (copies included).
    pub delivered: u64,
    pub bytes_delivered: u64,
}

impl Stats {
    pub fn dropped(&self) -> u64 {
        self.dropped_random + self.dropped_burst + self.dropped_queue + self.dropped_outage
    }

    /// Adds `other`'s counters to these.
    pub fn add(&mut self, other: &Stats) {
        self.packets_in += other.packets_in;
        self.bytes_in += other.bytes_in;
        self.dropped_random += other.dropped_random;
        self.dropped_burst += other.dropped_burst;
        self.dropped_queue += other.dropped_queue;
        self.dropped_outage += other.dropped_outage;
        self.duplicated += other.duplicated;
        self.delivered += other.delivered;
        self.bytes_delivered += other.bytes_delivered;
    }

    /// One JSON object, e.g. `{"in":10,"bytes_in":1200,"dropped":{...},...}`.
    pub fn to_json(&self) -> String {
        format!(
            "{{\"in\":{},\"bytes_in\":{},\"dropped\":{},\"dropped_random\":{},\"dropped_burst\":{},\
             \"dropped_queue\":{},\"dropped_outage\":{},\"duplicated\":{},\"delivered\":{},\
             \"bytes_delivered\":{}}}",
            self.packets_in,
            self.bytes_in,
            self.dropped(),
            self.dropped_random,
            self.dropped_burst,
            self.dropped_queue,
            self.dropped_outage,
            self.duplicated,
            self.delivered,
            self.bytes_delivered,
        )
    }
}

/// A packet waiting for its release; the heap pops the smallest (release, seq) first.
struct Pending {
    release: Instant,
    seq: u64,
    data: Vec<u8>,
}

impl PartialEq for Pending {
    fn eq(&self, other: &Self) -> bool {
        (self.release, self.seq) == (other.release, other.seq)
    }
}
impl Eq for Pending {}
impl PartialOrd for Pending {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Pending {
    fn cmp(&self, other: &Self) -> Ordering {
        // Reversed: BinaryHeap is a max-heap.
        (other.release, other.seq).cmp(&(self.release, self.seq))
    }
}

/// One direction of an impaired path.
///
/// The order of operations on [`Link::push`]: outage, Gilbert–Elliott loss, random loss, the
/// bottleneck (tail drop if its queue is full, else the packet leaves it after the ones ahead
/// of it are serialized plus its own size*8/rate), then delay + jitter (floored at the previous
/// packet's release unless jitter may reorder), then the reorder hold, then duplication.
/// Time is whatever the caller says: the link never reads the clock.
pub struct Link {
    schedule: Schedule,
    start: Instant,
    rng: Rng,
    ge_bad: bool,
    /// When the bottleneck finishes serializing what it holds.
    busy_until: Instant,
    /// (finish time, size) of the packets in the bottleneck queue.
    queue: VecDeque<(Instant, usize)>,
    queued_bytes: usize,
    /// The release time of the last packet that keeps order (the floor for the next one).
    last_release: Instant,
    pending: BinaryHeap<Pending>,
    seq: u64,
    stats: Stats,
}

impl Link {
    /// A link whose phases count from `start`, its random choices drawn from `seed`.
    pub fn new(schedule: Schedule, seed: u64, start: Instant) -> Link {
        Link {
            schedule,
            start,
            rng: Rng::new(seed),
            ge_bad: false,
            busy_until: start,
            queue: VecDeque::new(),
            queued_bytes: 0,
            last_release: start,
            pending: BinaryHeap::new(),
            seq: 0,
            stats: Stats::default(),
        }
    }

    /// The settings in force at `now`.
    pub fn settings_at(&self, now: Instant) -> &Settings {
        self.schedule.at(now.saturating_duration_since(self.start))
    }

    /// Decides the fate of `datagram`, which arrived at `now`. Callers push in arrival order
    /// (`now` never decreasing).
    pub fn push(&mut self, now: Instant, datagram: Vec<u8>) -> Fate {
        let size = datagram.len();
        self.stats.packets_in += 1;
        self.stats.bytes_in += size as u64;
        let s = self.schedule.at(now.saturating_duration_since(self.start)).clone();

        if s.outage {
            return self.drop(Cause::Outage);
        }
        if let Some(ge) = s.ge {
            self.ge_bad = if self.ge_bad { !self.rng.chance(ge.r) } else { self.rng.chance(ge.p) };
            if self.rng.chance(if self.ge_bad { ge.loss_bad } else { ge.loss_good }) {
                return self.drop(Cause::Burst);
            }
        }
        if self.rng.chance(s.loss) {
            return self.drop(Cause::Random);
        }

        let mut leaves = now;
        if s.rate_bps > 0 {
            while let Some(&(finish, bytes)) = self.queue.front() {
                if finish > now {
                    break;
                }
                self.queued_bytes -= bytes;
                self.queue.pop_front();
            }
            if self.queued_bytes + size > s.queue_bytes {
                return self.drop(Cause::Queue);
            }
            let nanos = (size as u128 * 8 * 1_000_000_000).div_ceil(s.rate_bps as u128);
            leaves = self.busy_until.max(now) + Duration::from_nanos(nanos as u64);
            self.busy_until = leaves;
            self.queue.push_back((leaves, size));
            self.queued_bytes += size;
        }

        let mut release = leaves + s.delay + self.jitter(&s);
        if !s.jitter_reorders {
            release = release.max(self.last_release);
        }
        if self.rng.chance(s.reorder) {
            // Held back out of the ordered stream: it does not raise the floor for the next.
            release += s.reorder_delay;
        } else {
            self.last_release = self.last_release.max(release);
        }

        let duplicated = self.rng.chance(s.dup);
        if duplicated {
            self.stats.duplicated += 1;
            let copy = datagram.clone();
            self.schedule_at(release, datagram);
            self.schedule_at(release, copy);
        } else {
            self.schedule_at(release, datagram);
        }
        Fate::Scheduled { release, duplicated }
    }

    /// When the next packet is due, if any is waiting.
    pub fn next_release(&self) -> Option<Instant> {
        self.pending.peek().map(|p| p.release)
    }

    /// The next packet due at or before `now`, if any.
    pub fn poll(&mut self, now: Instant) -> Option<Vec<u8>> {
        if self.pending.peek()?.release > now {
            return None;
        }
        let p = self.pending.pop()?;
        self.stats.delivered += 1;
        self.stats.bytes_delivered += p.data.len() as u64;
        Some(p.data)
    }

    /// Packets waiting for their release.
    pub fn in_flight(&self) -> usize {
        self.pending.len()
    }

    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    fn drop(&mut self, cause: Cause) -> Fate {
        match cause {
            Cause::Random => self.stats.dropped_random += 1,
            Cause::Burst => self.stats.dropped_burst += 1,
            Cause::Queue => self.stats.dropped_queue += 1,
            Cause::Outage => self.stats.dropped_outage += 1,
        }
        Fate::Dropped(cause)
    }

    fn jitter(&mut self, s: &Settings) -> Duration {
        if s.jitter.is_zero() {
            return Duration::ZERO;
        }
        let u = match s.jitter_dist {
            JitterDist::Uniform => self.rng.unit(),
            JitterDist::Normal => (0..4).map(|_| self.rng.unit()).sum::<f64>() / 4.0,
        };
        s.jitter.mul_f64(u)
    }

    fn schedule_at(&mut self, release: Instant, data: Vec<u8>) {
        self.seq += 1;
        self.pending.push(Pending { release, seq: self.seq, data });
    }
}
