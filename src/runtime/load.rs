//! How busy a core is: the share of each window (a second) it spent in its turns rather than
//! waiting for input (ARCHITECTURE.md, "Admission under load"). Sans-IO: the core passes
//! the instants it read, so the unit tests run it on a simulated clock.

use std::time::{Duration, Instant};

/// The window a busy share is measured over.
pub const LOAD_WINDOW: Duration = Duration::from_secs(1);

/// Whether a core busy `busy_pct` percent of the last second is over the admission threshold
/// `threshold` (0 or 100: admission is off): the core then refuses new connections.
pub fn over_threshold(busy_pct: u8, threshold: u8) -> bool {
    (1..100).contains(&threshold) && busy_pct > threshold
}

/// Busy time of one core, per window.
#[derive(Debug, Clone)]
pub struct LoadMeter {
    window: Duration,
    /// Start of the window being measured.
    start: Instant,
    /// Busy time in the window so far.
    busy: Duration,
    /// When the turn in progress began; `None` while the core waits.
    turn_since: Option<Instant>,
    /// The busy share of the last complete window, in percent.
    last: u8,
}

impl LoadMeter {
    /// A meter whose first window starts at `now`.
    pub fn new(now: Instant, window: Duration) -> Self {
        LoadMeter {
            window: window.max(Duration::from_millis(1)),
            start: now,
            busy: Duration::ZERO,
            turn_since: None,
            last: 0,
        }
    }

    /// A turn begins at `now` (after a wait, or right after the previous turn when that one
    /// yielded). Returns the busy share of the window that `now` completes, if it does.
    pub fn turn(&mut self, now: Instant) -> Option<u8> {
        if let Some(since) = self.turn_since {
            // The previous turn yielded without waiting: it was busy until now.
            self.busy += now.saturating_duration_since(since);
        }
        self.turn_since = Some(now);
        let elapsed = now.saturating_duration_since(self.start);
        if elapsed < self.window {
            return None;
        }
        let pct = (self.busy.as_micros() * 100 / elapsed.as_micros().max(1)).min(100);
        self.last = pct as u8;
        self.start = now;
        self.busy = Duration::ZERO;
        Some(self.last)
    }

    /// The core goes to wait for input at `at`: its turn ended then.
    pub fn wait(&mut self, at: Instant) {
        if let Some(since) = self.turn_since.take() {
            self.busy += at.saturating_duration_since(since);
        }
    }

    /// The busy share of the last complete window, in percent.
    pub fn busy_pct(&self) -> u8 {
        self.last
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// Runs `turns` of (busy, idle) milliseconds from `t0`, returning the shares reported.
    fn run(meter: &mut LoadMeter, t: &mut Instant, turns: &[(u64, u64)]) -> Vec<u8> {
        let mut out = Vec::new();
        for &(busy, idle) in turns {
            out.extend(meter.turn(*t));
            *t += ms(busy);
            if idle > 0 {
                meter.wait(*t);
                *t += ms(idle);
            }
        }
        out
    }

    #[test]
    fn the_busy_share_of_each_window_is_reported_when_it_completes() {
        let t0 = Instant::now();
        let mut t = t0;
        let mut meter = LoadMeter::new(t0, LOAD_WINDOW);
        // A second of 1 ms turns with 9 ms waits, then the turn that starts the next one.
        let mut shares = run(&mut meter, &mut t, &[(1, 9); 100]);
        shares.extend(meter.turn(t));
        assert_eq!(shares, vec![10]);
        assert_eq!(meter.busy_pct(), 10);
        // A second of 19 ms turns with 1 ms waits.
        let mut shares = run(&mut meter, &mut t, &[(19, 1); 50]);
        shares.extend(meter.turn(t));
        assert_eq!(shares, vec![95]);
        assert!(over_threshold(meter.busy_pct(), 90));
    }

    #[test]
    fn turns_that_yield_without_waiting_are_busy() {
        let t0 = Instant::now();
        let mut t = t0;
        let mut meter = LoadMeter::new(t0, LOAD_WINDOW);
        // 1 s of turns that never wait (each yields into the next).
        let mut shares = run(&mut meter, &mut t, &[(5, 0); 200]);
        shares.extend(meter.turn(t));
        assert_eq!(shares, vec![100]);
    }

    #[test]
    fn a_long_wait_ends_the_window_at_the_next_turn() {
        let t0 = Instant::now();
        let mut meter = LoadMeter::new(t0, LOAD_WINDOW);
        assert_eq!(meter.turn(t0), None);
        meter.wait(t0 + ms(500));
        // Idle for 3.5 s: the window that ends at the next turn is 4 s long, 0.5 s busy.
        assert_eq!(meter.turn(t0 + ms(4000)), Some(12));
        assert!(!over_threshold(meter.busy_pct(), 90));
    }

    #[test]
    fn zero_and_one_hundred_turn_admission_off() {
        assert!(!over_threshold(100, 0));
        assert!(!over_threshold(100, 100));
        assert!(over_threshold(91, 90));
        assert!(!over_threshold(90, 90));
    }
}
