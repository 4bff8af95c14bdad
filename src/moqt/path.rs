//! What a [`Pump`](crate::Pump) knows of its connection's path: how much subgroup data the
//! transport holds unsent and how fast it drains (so that an object is not handed to it when
//! it could not arrive in time), the round trip, and whether the path is stalled (delivering
//! nothing) or recovering from a stall. Fed the transport's counters and the shard's clock by
//! the pump; reads neither itself.

use std::time::{Duration, Instant};

use crate::queue::Ahead;

/// How long a path must deliver nothing (no acknowledgement) to count as stalled
/// ([`PathEstimate::stalled`]): longer than a few RTTs of any path a viewer watches over,
/// shorter than the relay's freshness budget (2 s by default), so that what an outage makes
/// stale is dropped while the path counts as stalled.
pub const PATH_STALL: Duration = Duration::from_secs(1);

/// How often a pump reads what its path has delivered (`PathEstimate::sample_delivery`): a
/// small part of [`PATH_STALL`].
pub const DELIVERY_SAMPLE: Duration = Duration::from_millis(50);

/// How long after a stall ends the path still counts as stalled ([`PathEstimate::stalled`]):
/// what queued during the outage drains and expires meanwhile (the relay's freshness budget
/// is 2 s by default).
pub const PATH_RECOVERY: Duration = Duration::from_secs(3);

/// What quiche may hold unsent, in time at the connection's measured drain rate (see
/// `PathEstimate::look_ahead`): a few turns of the core, so that quiche never waits for data
/// on a fast path, while on a thin one the objects it holds leave soon after they are handed.
pub const UNSENT_TIME: Duration = Duration::from_millis(100);

/// The least that bound may be, in bytes (three full packets: on a path of 15 KB/s a larger
/// floor would itself hold objects back for a good part of the freshness budget).
pub const UNSENT_FLOOR: usize = 4 << 10;

/// Shortest span over which quiche's drain rate is measured.
const DRAIN_INTERVAL: Duration = Duration::from_millis(25);

/// How long the pump uses an RTT it read from quiche before reading it again.
const RTT_REFRESH: Duration = Duration::from_millis(100);

/// How long a measured drain rate predicts anything: a connection whose data stopped
/// waiting may since have found a faster path (or lost it).
const DRAIN_FRESH: Duration = Duration::from_secs(1);

/// One connection's path as its pump measures it (see the module header).
#[derive(Debug, Default)]
pub(crate) struct PathEstimate {
    /// Subgroup data handed to quiche and not yet sent by it, at most (`None`: no bound).
    /// quiche takes stream data up to its congestion window's free part whenever it gets an
    /// ACK, whatever it still holds unsent, so on a loss-free path it would hold as much as
    /// the peer's flow-control window allows, where neither the backlog limit nor a delivery
    /// deadline reaches it. Beyond this the bytes wait in the pump.
    unsent_limit: Option<usize>,
    /// Subgroup data handed to quiche that it has not sent yet, as far as its sent bytes tell
    /// (each byte it sends, of any stream, counts).
    unsent_held: usize,
    /// quiche's `sent_bytes` at the last write.
    sent_mark: u64,
    /// How fast quiche sends this connection's bytes while subgroup data waits for it (bytes
    /// per second, smoothed; 0: not measured yet), and when it was last measured. What
    /// quiche holds unsent takes about held / rate to leave, and a round trip to arrive, so
    /// an object handed to it now arrives that much later: one whose delivery deadline falls
    /// before then is not handed at all. A rate older than [`DRAIN_FRESH`] predicts nothing.
    drain_rate: f64,
    drain_at: Option<Instant>,
    /// Start of the current rate measurement: (time, quiche's `sent_bytes`) at a write that
    /// left quiche holding subgroup data unsent, or data waiting in the pump. The sample is
    /// taken only if quiche still holds some (or data still waits) when it ends, so that what
    /// it sent meanwhile was limited by the path (its congestion window, the peer's flow
    /// control) or the CPU, not by having nothing to send.
    drain_mark: Option<(Instant, u64)>,
    /// The path's RTT as last read, and when ([`PathEstimate::rtt`]).
    rtt: Option<(Instant, Duration)>,
    /// The transport's delivered bytes at the last sample, and when they last grew.
    delivered: Option<(u64, Instant)>,
    /// When they were last read ([`DELIVERY_SAMPLE`]).
    delivery_sampled: Option<Instant>,
    /// The path came back from a stall: what it held meanwhile is still draining (and
    /// expiring) until then.
    recovering_until: Option<Instant>,
}

impl PathEstimate {
    /// Bounds what quiche may hold unsent to `bytes` of subgroup data.
    pub(crate) fn set_unsent_limit(&mut self, bytes: usize) {
        self.unsent_limit = Some(bytes);
        self.unsent_held = 0;
    }

    /// What subgroup data quiche may take now, under what bound: (bound, room), `None`
    /// without an unsent limit; and, when the drain rate is known, what delays what is handed
    /// to it now (`bound - budget` bytes at the time each chunk is handed, then a round
    /// trip). `sent` is quiche's sent bytes now, `waiting` whether data waits in the pump,
    /// `rtt` reads the path's RTT from quiche. What quiche sent since the last write is taken
    /// off what it holds. The bound is the unsent limit lowered to [`UNSENT_TIME`] of the
    /// measured drain rate (never below [`UNSENT_FLOOR`]): on a path thinner than the track,
    /// what quiche holds then leaves within that time, and the rest waits in the pump, where
    /// delivery deadlines and the backlog limit drop whole streams, instead of in quiche,
    /// where it would only grow late.
    pub(crate) fn look_ahead(
        &mut self,
        sent: u64,
        waiting: bool,
        rtt: impl FnOnce() -> Duration,
        now: Instant,
    ) -> (Option<(usize, usize)>, Option<Ahead>) {
        let Some(limit) = self.unsent_limit else { return (None, None) };
        let drained = usize::try_from(sent.saturating_sub(self.sent_mark)).unwrap_or(usize::MAX);
        self.sent_mark = sent;
        self.unsent_held = self.unsent_held.saturating_sub(drained);
        // quiche still holds some, or data waits here: it had something to send all along.
        let backlogged = self.unsent_held > 0 || waiting;
        self.measure_drain(sent, now, backlogged);
        let Some(rate) = self.fresh_drain_rate(now) else {
            return (Some((limit, limit.saturating_sub(self.unsent_held))), None);
        };
        let bound = ((rate * UNSENT_TIME.as_secs_f64()) as usize).clamp(UNSENT_FLOOR.min(limit), limit);
        let ahead = Ahead { limit: bound, rtt: self.rtt(rtt, now), secs_per_byte: 1.0 / rate };
        (Some((bound, bound.saturating_sub(self.unsent_held))), Some(ahead))
    }

    /// The path's smoothed RTT, read from quiche (`read`) at most every [`RTT_REFRESH`]
    /// (quiche builds its path statistics anew for each read).
    fn rtt(&mut self, read: impl FnOnce() -> Duration, now: Instant) -> Duration {
        match self.rtt {
            Some((at, rtt)) if now.saturating_duration_since(at) < RTT_REFRESH => rtt,
            _ => {
                let rtt = read();
                self.rtt = Some((now, rtt));
                rtt
            }
        }
    }

    /// A write handed quiche `bytes` of subgroup data: they count as held until it sends
    /// them, and a drain rate measurement starts if quiche holds some or data waits.
    pub(crate) fn handed(&mut self, bytes: usize, data_waiting: bool, now: Instant) {
        self.unsent_held += bytes;
        if self.drain_mark.is_none() && (data_waiting || self.unsent_held > 0) {
            self.drain_mark = Some((now, self.sent_mark));
        }
    }

    /// Updates the drain rate once a measurement has run [`DRAIN_INTERVAL`]: what quiche sent
    /// since the mark over the time since (smoothed, a quarter weight to the newest, while the
    /// last is fresh).
    fn measure_drain(&mut self, sent: u64, now: Instant, backlogged: bool) {
        let Some((at, mark)) = self.drain_mark else { return };
        let dt = now.saturating_duration_since(at);
        if dt < DRAIN_INTERVAL {
            return;
        }
        if dt > DRAIN_FRESH || !backlogged || self.stalled(now) {
            // quiche ran out of data meanwhile: what it sent says how much there was, not
            // how fast the path takes it.
            self.drain_mark = None;
            return;
        }
        let sample = sent.saturating_sub(mark) as f64 / dt.as_secs_f64();
        let fresh = self.fresh_drain_rate(now).is_some();
        self.drain_rate = if fresh { 0.75 * self.drain_rate + 0.25 * sample } else { sample };
        self.drain_at = Some(now);
        self.drain_mark = None;
    }

    /// The drain rate, if measured within [`DRAIN_FRESH`] and the path is not stalled (an
    /// outage's trickle of probes says nothing of the path that comes back; what queued
    /// meanwhile goes by its deadlines alone).
    fn fresh_drain_rate(&self, now: Instant) -> Option<f64> {
        let at = self.drain_at?;
        let fresh = now.saturating_duration_since(at) <= DRAIN_FRESH && !self.stalled(now);
        (self.drain_rate > 0.0 && fresh).then_some(self.drain_rate)
    }

    /// Reads what the path has delivered (`acked`: the transport's acknowledged bytes), at
    /// most every [`DELIVERY_SAMPLE`] (the read walks every stream of the connection, and a
    /// stall is judged in seconds).
    pub(crate) fn sample_delivery(&mut self, acked: impl FnOnce() -> u64, now: Instant) {
        if self.delivery_sampled.is_some_and(|at| now.saturating_duration_since(at) < DELIVERY_SAMPLE) {
            return;
        }
        self.delivery_sampled = Some(now);
        self.note_delivery(acked(), now);
    }

    fn note_delivery(&mut self, delivered: u64, now: Instant) {
        match self.delivered {
            Some((d, _)) if d == delivered => {}
            Some((_, at)) => {
                if now.saturating_duration_since(at) >= PATH_STALL {
                    self.recovering_until = Some(now + PATH_RECOVERY);
                }
                self.delivered = Some((delivered, now));
            }
            None => self.delivered = Some((delivered, now)),
        }
    }

    /// Whether the path has delivered nothing for [`PATH_STALL`] (as of the last sample), or
    /// came back from such a stall less than [`PATH_RECOVERY`] ago: streams lost meanwhile
    /// are an outage's (what piled up during it expires as it drains), not a slow
    /// subscriber's (the relay's `PathState`).
    pub(crate) fn stalled(&self, now: Instant) -> bool {
        self.delivered.is_some_and(|(_, at)| now.saturating_duration_since(at) >= PATH_STALL)
            || self.recovering_until.is_some_and(|until| now < until)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn a_path_that_delivers_nothing_for_a_second_is_stalled_then_recovering() {
        let t0 = Instant::now();
        let mut p = PathEstimate::default();
        p.sample_delivery(|| 100, t0);
        assert!(!p.stalled(t0 + 999 * MS), "not yet");
        assert!(p.stalled(t0 + PATH_STALL), "a second without an acknowledgement");
        // Sampled no more often than every DELIVERY_SAMPLE: this read is skipped.
        p.sample_delivery(|| unreachable!("read within the sample interval"), t0 + 10 * MS);
        let back = t0 + 1500 * MS;
        p.sample_delivery(|| 200, back);
        // It keeps delivering from then on.
        for k in 1..=5u32 {
            p.sample_delivery(|| 200 + u64::from(k), back + 500 * MS * k);
        }
        assert!(p.stalled(back + PATH_RECOVERY - MS), "recovering: what queued drains");
        assert!(!p.stalled(back + PATH_RECOVERY), "recovered");
    }

    #[test]
    fn a_path_that_keeps_delivering_is_never_stalled() {
        let t0 = Instant::now();
        let mut p = PathEstimate::default();
        for i in 0..100u64 {
            let now = t0 + DELIVERY_SAMPLE * i as u32;
            p.sample_delivery(|| i * 1000, now);
            assert!(!p.stalled(now), "at {i}");
        }
    }

    #[test]
    fn the_drain_rate_is_measured_only_while_data_waits_and_bounds_what_quiche_holds() {
        let t0 = Instant::now();
        let mut p = PathEstimate::default();
        p.set_unsent_limit(1 << 20);
        let (unsent, ahead) = p.look_ahead(0, false, || unreachable!("no rate yet"), t0);
        assert_eq!(unsent, Some((1 << 20, 1 << 20)), "no rate measured: the whole limit");
        assert!(ahead.is_none());
        // 100 kB handed and still held 50 ms later, of which 50 kB left: 1 MB/s.
        p.handed(100_000, true, t0);
        let (unsent, ahead) = p.look_ahead(50_000, true, || 20 * MS, t0 + 50 * MS);
        let bound = 100_000; // UNSENT_TIME (100 ms) at 1 MB/s
        assert_eq!(unsent, Some((bound, bound - 50_000)), "the bound follows the rate");
        let ahead = ahead.expect("a fresh rate");
        assert_eq!((ahead.limit, ahead.rtt), (bound, 20 * MS));
        assert!((ahead.secs_per_byte - 1e-6).abs() < 1e-9, "{}", ahead.secs_per_byte);
    }

    #[test]
    fn what_quiche_sent_with_nothing_waiting_is_no_rate() {
        let t0 = Instant::now();
        let mut p = PathEstimate::default();
        p.set_unsent_limit(1 << 20);
        p.handed(10_000, false, t0);
        // All of it left and nothing waits: the path was not what limited it.
        let (unsent, ahead) = p.look_ahead(10_000, false, || unreachable!("no rate"), t0 + 50 * MS);
        assert_eq!(unsent, Some((1 << 20, 1 << 20)));
        assert!(ahead.is_none());
    }

    #[test]
    fn a_slow_rate_never_bounds_below_the_floor() {
        let t0 = Instant::now();
        let mut p = PathEstimate::default();
        p.set_unsent_limit(1 << 20);
        p.handed(10_000, true, t0);
        // 1 kB in 100 ms: 10 kB/s, whose 100 ms is 1 kB, below the floor.
        let (unsent, _) = p.look_ahead(1_000, true, || 50 * MS, t0 + 100 * MS);
        assert_eq!(unsent.map(|(bound, _)| bound), Some(UNSENT_FLOOR));
    }
}
