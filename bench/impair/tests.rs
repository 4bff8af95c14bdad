//! The model driven with synthetic instants: no real clock, no timing thresholds.
#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use crate::{Cause, Fate, GilbertElliott, JitterDist, Link, Phase, Schedule, Settings};

const MS: Duration = Duration::from_millis(1);

fn link(settings: Settings, seed: u64, t0: Instant) -> Link {
    Link::new(Schedule::constant(settings), seed, t0)
}

/// Pushes `n` numbered 100-byte packets `gap` apart; returns their fates.
fn feed(l: &mut Link, t0: Instant, n: u32, gap: Duration) -> Vec<Fate> {
    (0..n).map(|i| l.push(t0 + gap * i, numbered(i, 100))).collect()
}

fn numbered(i: u32, size: usize) -> Vec<u8> {
    let mut d = vec![0u8; size.max(4)];
    d[..4].copy_from_slice(&i.to_be_bytes());
    d
}

fn number(d: &[u8]) -> u32 {
    u32::from_be_bytes([d[0], d[1], d[2], d[3]])
}

/// Everything still queued, in release order.
fn drain(l: &mut Link) -> Vec<u32> {
    let end = l.next_release().map(|t| t + Duration::from_secs(3600));
    std::iter::from_fn(|| l.poll(end?)).map(|d| number(&d)).collect()
}

fn delays(fates: &[Fate], t0: Instant, gap: Duration) -> Vec<Duration> {
    let mut out = Vec::new();
    for (i, f) in fates.iter().enumerate() {
        if let Fate::Scheduled { release, .. } = f {
            out.push(*release - (t0 + gap * i as u32));
        }
    }
    out
}

fn inversions(order: &[u32]) -> usize {
    order.windows(2).filter(|w| w[1] < w[0]).count()
}

fn mean_ms(d: &[Duration]) -> f64 {
    d.iter().map(|d| d.as_secs_f64() * 1e3).sum::<f64>() / d.len() as f64
}

#[test]
fn random_loss_rate_is_the_configured_one() {
    // 100 000 packets at p = 0.03: standard deviation of the rate 0.00054; tolerance 0.003.
    let t0 = Instant::now();
    let mut l = link(Settings { loss: 0.03, ..Settings::default() }, 1, t0);
    let fates = feed(&mut l, t0, 100_000, Duration::from_micros(10));
    let lost = fates.iter().filter(|f| **f == Fate::Dropped(Cause::Random)).count();
    let rate = lost as f64 / 100_000.0;
    assert!((rate - 0.03).abs() < 0.003, "loss rate {rate}");
    assert_eq!(l.stats().dropped_random, lost as u64);
    assert_eq!(l.stats().dropped(), lost as u64);
    assert_eq!(drain(&mut l).len(), 100_000 - lost);
    assert_eq!(l.stats().delivered, 100_000 - lost as u64);
}

/// Mean length of runs of consecutive drops.
fn mean_burst(fates: &[Fate]) -> f64 {
    let (mut runs, mut lost, mut in_run) = (0, 0, false);
    for f in fates {
        let dropped = matches!(f, Fate::Dropped(_));
        lost += dropped as usize;
        runs += (dropped && !in_run) as usize;
        in_run = dropped;
    }
    lost as f64 / runs as f64
}

#[test]
fn gilbert_elliott_loss_rate_is_the_stationary_one() {
    // Bad-state share p/(p+r) = 0.01/0.21 = 0.0476; loss = 0.9524*0.001 + 0.0476*0.5 = 0.0248.
    let ge = GilbertElliott { p: 0.01, r: 0.2, loss_good: 0.001, loss_bad: 0.5 };
    let expected = ge.stationary_loss();
    assert!((expected - (0.2 / 0.21 * 0.001 + 0.01 / 0.21 * 0.5)).abs() < 1e-12);
    // Bursts make the rate noisier than independent loss (about 2000 bad sojourns in 400 000
    // packets): tolerance 10 % of the rate.
    let t0 = Instant::now();
    let mut l = link(Settings { ge: Some(ge), ..Settings::default() }, 2, t0);
    let fates = feed(&mut l, t0, 400_000, Duration::from_micros(10));
    let lost = fates.iter().filter(|f| **f == Fate::Dropped(Cause::Burst)).count();
    let rate = lost as f64 / 400_000.0;
    assert!((rate - expected).abs() < 0.1 * expected, "loss rate {rate}, expected {expected}");
    assert_eq!(l.stats().dropped_burst, lost as u64);

    // The losses come in bursts; independent loss at the same rate has runs of about 1/(1-p).
    let mut r = link(Settings { loss: expected, ..Settings::default() }, 2, t0);
    let independent = feed(&mut r, t0, 400_000, Duration::from_micros(10));
    let (bursty, flat) = (mean_burst(&fates), mean_burst(&independent));
    assert!(bursty > 1.3 && flat < 1.05, "mean loss run {bursty} (GE) vs {flat} (random)");
}

#[test]
fn gilbert_elliott_stationary_formula() {
    let ge = GilbertElliott { p: 0.1, r: 0.3, loss_good: 0.0, loss_bad: 1.0 };
    assert!((ge.stationary_loss() - 0.25).abs() < 1e-12);
    let stuck = GilbertElliott { p: 0.0, r: 0.0, loss_good: 0.02, loss_bad: 1.0 };
    assert_eq!(stuck.stationary_loss(), 0.02);
}

#[test]
fn delay_and_jitter_stay_in_bounds_with_the_expected_mean() {
    // Packets 20 ms apart, more than the jitter, so the keep-order floor never applies.
    // Uniform and bell-shaped jitter in [0, 10] ms both have mean 5 ms; over 100 000 packets the
    // standard error of the mean is under 0.01 ms; tolerance 0.1 ms.
    let t0 = Instant::now();
    let gap = 20 * MS;
    let mut spread = Vec::new();
    for dist in [JitterDist::Uniform, JitterDist::Normal] {
        let s = Settings { delay: 40 * MS, jitter: 10 * MS, jitter_dist: dist, ..Settings::default() };
        let mut l = link(s, 3, t0);
        let d = delays(&feed(&mut l, t0, 100_000, gap), t0, gap);
        assert_eq!(d.len(), 100_000);
        assert!(d.iter().all(|d| (40 * MS..=50 * MS).contains(d)), "{dist:?} out of bounds");
        let mean = mean_ms(&d);
        assert!((mean - 45.0).abs() < 0.1, "{dist:?}: mean delay {mean} ms");
        let var = d.iter().map(|d| (d.as_secs_f64() * 1e3 - mean).powi(2)).sum::<f64>() / d.len() as f64;
        spread.push(var.sqrt());
    }
    // Uniform on 10 ms: sd 2.89 ms; the mean of four uniforms: half that.
    assert!((spread[0] - 2.887).abs() < 0.05 && (spread[1] - 1.443).abs() < 0.05, "sd {spread:?}");
}

#[test]
fn jitter_keeps_order_unless_allowed_to_reorder() {
    // Packets 1 ms apart with 30 ms of jitter would overtake each other freely.
    let t0 = Instant::now();
    let s = Settings { delay: 40 * MS, jitter: 30 * MS, ..Settings::default() };
    let mut ordered = link(s.clone(), 4, t0);
    let fates = feed(&mut ordered, t0, 10_000, MS);
    assert!(delays(&fates, t0, MS).iter().all(|d| (40 * MS..=70 * MS).contains(d)));
    let out = drain(&mut ordered);
    assert_eq!(out, (0..10_000).collect::<Vec<u32>>());

    let mut free = link(Settings { jitter_reorders: true, ..s }, 4, t0);
    let fates = feed(&mut free, t0, 10_000, MS);
    assert!(delays(&fates, t0, MS).iter().all(|d| (40 * MS..=70 * MS).contains(d)));
    let out = drain(&mut free);
    assert_eq!(out.len(), 10_000);
    assert!(inversions(&out) > 1000, "only {} inversions", inversions(&out));
}

#[test]
fn explicit_reordering_holds_back_the_configured_share() {
    // 5 % of the packets held 10 ms more, the rest on time and in order: 100 000 packets, sd
    // of the share 0.0007; tolerance 0.005.
    let t0 = Instant::now();
    let s = Settings { delay: 20 * MS, reorder: 0.05, reorder_delay: 10 * MS, ..Settings::default() };
    let mut l = link(s, 5, t0);
    let fates = feed(&mut l, t0, 100_000, MS);
    let d = delays(&fates, t0, MS);
    let held = d.iter().filter(|d| **d == 30 * MS).count();
    assert_eq!(held + d.iter().filter(|d| **d == 20 * MS).count(), 100_000);
    let share = held as f64 / 100_000.0;
    assert!((share - 0.05).abs() < 0.005, "held back {share}");
    let out = drain(&mut l);
    // Each held packet is overtaken by the 10 that follow it: one inversion where it lands.
    assert!(inversions(&out) > held / 2, "{} inversions for {held} held", inversions(&out));
    let on_time: Vec<u32> = out.iter().copied().filter(|&i| d[i as usize] == 20 * MS).collect::<Vec<u32>>();
    assert!(on_time.windows(2).all(|w| w[0] < w[1]));
}

#[test]
fn rate_cap_spaces_releases_and_drops_when_the_queue_is_full() {
    // 1 Mbit/s: a 1250-byte packet takes 10 ms. The queue holds 4000 bytes: three packets.
    let t0 = Instant::now();
    let s = Settings { delay: 5 * MS, rate_bps: 1_000_000, queue_bytes: 4000, ..Settings::default() };
    let mut l = link(s, 6, t0);
    let at = |ms: u32| t0 + MS * ms;
    let sched = |release| Fate::Scheduled { release, duplicated: false };
    assert_eq!(l.push(t0, numbered(0, 1250)), sched(at(15)));
    assert_eq!(l.push(t0, numbered(1, 1250)), sched(at(25)));
    assert_eq!(l.push(t0, numbered(2, 1250)), sched(at(35)));
    assert_eq!(l.push(t0, numbered(3, 1250)), Fate::Dropped(Cause::Queue));
    // At 10 ms the first has left the bottleneck: room for one more, behind the other two.
    assert_eq!(l.push(at(10), numbered(4, 1250)), sched(at(45)));
    assert_eq!(l.push(at(10), numbered(5, 300)), Fate::Dropped(Cause::Queue)); // 3750 + 300 > 4000
                                                                               // Once idle, a packet takes only its own serialization time: 100 bytes, 0.8 ms.
    assert_eq!(l.push(at(100), numbered(6, 100)), sched(at(105) + Duration::from_micros(800)));
    assert_eq!(l.stats().dropped_queue, 2);

    // Nothing released before its time; then one at a time in order.
    assert_eq!(l.poll(at(14)), None);
    assert_eq!(l.next_release(), Some(at(15)));
    assert_eq!(l.poll(at(15)).map(|d| number(&d)), Some(0));
    assert_eq!(l.poll(at(15)), None);
    assert_eq!(drain(&mut l), vec![1, 2, 4, 6]);

    // Sustained overload: what gets through is the rate (5000 packets of 1250 bytes offered
    // at twice 1 Mbit/s over 25 s; 2500 fit, plus the queue's three).
    let s = Settings { rate_bps: 1_000_000, queue_bytes: 4000, ..Settings::default() };
    let mut l = link(s, 6, t0);
    let fates: Vec<Fate> = (0..5000).map(|i| l.push(t0 + 5 * MS * i, numbered(i, 1250))).collect();
    let releases: Vec<Instant> = fates
        .iter()
        .filter_map(|f| if let Fate::Scheduled { release, .. } = f { Some(*release) } else { None })
        .collect();
    assert!(releases.windows(2).all(|w| w[1] - w[0] >= 10 * MS));
    assert!((2500..=2504).contains(&releases.len()), "{} through", releases.len());
}

#[test]
fn duplicates_appear_at_the_configured_rate() {
    // 100 000 packets at 1 %: 1000 expected, sd 31; tolerance 150.
    let t0 = Instant::now();
    let mut l = link(Settings { dup: 0.01, ..Settings::default() }, 7, t0);
    let fates = feed(&mut l, t0, 100_000, Duration::from_micros(10));
    let dups = fates.iter().filter(|f| matches!(f, Fate::Scheduled { duplicated: true, .. })).count();
    assert!((dups as i64 - 1000).abs() < 150, "{dups} duplicates");
    assert_eq!(l.stats().duplicated, dups as u64);
    let out = drain(&mut l);
    assert_eq!(out.len(), 100_000 + dups);
    assert_eq!(l.stats().delivered, (100_000 + dups) as u64);
    // The copy comes right after its original; otherwise in order.
    let mut dedup = out.clone();
    dedup.dedup();
    assert_eq!(dedup, (0..100_000).collect::<Vec<u32>>());
}

#[test]
fn an_outage_drops_everything_in_its_window_and_nothing_outside() {
    // One packet a millisecond for 10 s; outage from 3 s to 6 s; a 20 ms delay throughout.
    let t0 = Instant::now();
    let base = Settings { delay: 20 * MS, ..Settings::default() };
    let outage = Settings { outage: true, ..base.clone() };
    let phases = vec![
        Phase { at: Duration::from_secs(6), settings: base.clone() },
        Phase { at: Duration::from_secs(3), settings: outage },
    ];
    let mut l = Link::new(Schedule::new(base, phases), 8, t0);
    let fates = feed(&mut l, t0, 10_000, MS);
    for (i, f) in fates.iter().enumerate() {
        let in_window = (3000..6000).contains(&i);
        assert_eq!(*f == Fate::Dropped(Cause::Outage), in_window, "packet at {i} ms: {f:?}");
        if !in_window {
            assert_eq!(*f, Fate::Scheduled { release: t0 + MS * (i as u32 + 20), duplicated: false });
        }
    }
    assert_eq!(l.stats().dropped_outage, 3000);
    assert_eq!(l.stats().dropped(), 3000);
    assert!(l.settings_at(t0 + Duration::from_millis(4500)).outage);
    assert!(!l.settings_at(t0 + Duration::from_millis(6000)).outage);
}

#[test]
fn a_script_degrades_and_recovers() {
    // Through the script parser: loss and more delay for 3 s, then back to the flags' settings.
    let t0 = Instant::now();
    let base = Settings { delay: 10 * MS, ..Settings::default() };
    let (_, down) = crate::config::script("2s loss=0.5 delay-ms=100\n5s\n", (&base, &base)).unwrap();
    let mut l = Link::new(down, 9, t0);
    let fates = feed(&mut l, t0, 8000, MS);
    let lost_in =
        |r: std::ops::Range<usize>| fates[r].iter().filter(|f| matches!(f, Fate::Dropped(_))).count();
    assert_eq!(lost_in(0..2000) + lost_in(5000..8000), 0);
    let lost = lost_in(2000..5000);
    assert!((1350..1650).contains(&lost), "{lost} lost of 3000 at 50 %");
    let d = delays(&fates, t0, MS);
    assert!(d.iter().filter(|d| **d == 100 * MS).count() == 3000 - lost);
}

#[test]
fn the_same_seed_gives_the_same_fates() {
    let t0 = Instant::now();
    let s = Settings {
        loss: 0.02,
        ge: Some(GilbertElliott { p: 0.02, r: 0.3, loss_good: 0.0, loss_bad: 0.4 }),
        delay: 30 * MS,
        jitter: 8 * MS,
        jitter_dist: JitterDist::Normal,
        reorder: 0.01,
        dup: 0.01,
        rate_bps: 5_000_000,
        queue_bytes: 20_000,
        ..Settings::default()
    };
    let run = |seed| {
        let mut l = link(s.clone(), seed, t0);
        let fates: Vec<Fate> =
            (0..20_000u32).map(|i| l.push(t0 + MS * i / 2, numbered(i, 200 + (i as usize % 1000)))).collect();
        (fates, drain(&mut l), *l.stats())
    };
    let (a, b, c) = (run(42), run(42), run(43));
    assert_eq!(a, b);
    assert_ne!(a.0, c.0);
    // Every cause but outage happened, so the comparison covered them.
    let st = a.2;
    assert!(st.dropped_random > 0 && st.dropped_burst > 0 && st.dropped_queue > 0 && st.duplicated > 0);
    assert_eq!(st.packets_in, st.dropped() + st.delivered - st.duplicated);
}

#[test]
fn default_settings_forward_untouched() {
    let t0 = Instant::now();
    let mut l = link(Settings::default(), 0, t0);
    for i in 0..100 {
        assert_eq!(
            l.push(t0 + MS * i, numbered(i, 1200)),
            Fate::Scheduled { release: t0 + MS * i, duplicated: false }
        );
        assert_eq!(l.poll(t0 + MS * i).map(|d| number(&d)), Some(i));
    }
    assert_eq!(l.in_flight(), 0);
    assert_eq!(l.next_release(), None);
}
