//! The load: one publisher thread (every publisher connection in one [`Fleet`]) and subscriber
//! threads (each a [`Fleet`] of its share of the subscriber connections), coordinated through
//! [`Control`]. Objects carry a sequence number and their send time (`client::stamp`), so each
//! subscriber thread checks loss, duplicates, order and latency as objects arrive.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};
use moq_edge::client::codes::publish_done;
use moq_edge::client::stamp::{now_micros, stamped};
use moq_edge::client::{ClientError, Fleet, PublisherCore, Relay, RequestState, SubscriberCore};
use moq_edge::wire::model::{FullTrackName, GroupOrder, Location, LocationFilter, Parameters, RequestId};
use moq_edge::wire::Version;

use crate::check::{Expect, SubCheck, Tally};

/// One track's schedule: its objects, their groups and sizes.
#[derive(Debug, Clone, Copy)]
pub struct TrackSpec {
    /// Objects per second.
    pub rate: f64,
    /// Objects per group.
    pub group_size: u64,
    /// Payload bytes of the first object of each group (a video keyframe), and of the others.
    pub first_size: usize,
    pub object_size: usize,
    /// The publisher connection that sends it.
    pub publisher: usize,
}

/// What every thread needs to know about the run.
#[derive(Debug)]
pub struct Plan {
    /// Where the subscribers connect.
    pub peer: Relay,
    /// Where the publishers connect (usually `peer`).
    pub publish_peer: Relay,
    pub version: Version,
    pub tracks: Vec<FullTrackName>,
    /// Each track's schedule, by index into `tracks`.
    pub specs: Vec<TrackSpec>,
    pub publishers: usize,
    /// Subgroups per group (streams per group); objects go to them round robin.
    pub subgroups: u64,
    pub datagrams: bool,
    pub warmup: Duration,
    pub duration: Duration,
    /// Churn: how long a subscriber stays before it leaves.
    pub hold: Duration,
    /// Time allowed to connect and for answers.
    pub timeout: Duration,
    /// The subscriptions' Group Order (`None`: the publisher's).
    pub group_order: Option<GroupOrder>,
}

impl Plan {
    /// Objects track `t` carries: warm-up plus measured window.
    pub fn total(&self, t: usize) -> u64 {
        ((self.warmup + self.duration).as_secs_f64() * self.specs[t].rate).ceil() as u64
    }

    /// The first sequence number of track `t` sent inside the measured window.
    pub fn window_lo(&self, t: usize) -> u64 {
        (self.warmup.as_secs_f64() * self.specs[t].rate).ceil() as u64
    }

    /// The objects a subscriber of track `t` present for the whole window is accountable for.
    pub fn whole(&self, t: usize) -> Expect {
        Expect::Window { lo: self.window_lo(t), end: self.total(t) }
    }

    /// When object `seq` of track `t` is due after the start: the tracks' objects are spread
    /// evenly, not sent in bursts.
    fn due(&self, seq: u64, t: usize) -> Duration {
        let n = self.tracks.len() as f64;
        Duration::from_secs_f64((seq as f64 + t as f64 / n) / self.specs[t].rate)
    }

    fn location(&self, seq: u64, t: usize) -> Location {
        let g = self.specs[t].group_size;
        Location::new(seq / g, seq % g)
    }
}

/// Shared by the threads of a run.
#[derive(Debug, Default)]
pub struct Control {
    /// Set by the main thread once every thread is ready: (start, the same in Unix µs).
    pub start: OnceLock<(Instant, u64)>,
    pub ready: AtomicUsize,
    /// The relay accepted every publisher's PUBLISH_NAMESPACE.
    pub announced: AtomicBool,
    /// The edge scenario's viewers may connect (the relay's memory was sampled with the
    /// publishers alone).
    pub connect: AtomicBool,
    /// Viewer threads of the edge scenario whose viewers are connected and set up.
    pub connected: AtomicUsize,
    /// The edge scenario's viewers may subscribe (the relay's memory was sampled with them
    /// connected and idle).
    pub subscribe: AtomicBool,
    /// The publishers sent their last object and PUBLISH_DONE.
    pub published: AtomicBool,
    /// Subscriber threads whose every subscription has ended (PUBLISH_DONE).
    pub drained: AtomicUsize,
    /// Everyone stops.
    pub stop: AtomicBool,
    /// Live progress: objects and bytes received so far (all threads).
    pub objects: AtomicU64,
    pub bytes: AtomicU64,
}

impl Control {
    pub fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// Serves `fleet` until the main thread starts the run.
    pub fn wait_start<C: moq_edge::client::SessionCore>(
        &self,
        fleet: &mut Fleet<C>,
    ) -> anyhow::Result<(Instant, u64)> {
        loop {
            if let Some(&s) = self.start.get() {
                return Ok(s);
            }
            if self.stopped() {
                bail!("stopped before the start (another thread failed or was not ready in time)");
            }
            fleet.pump(Instant::now() + Duration::from_millis(10)).context("waiting for the start")?;
        }
    }
}

/// What the publisher thread reports.
#[derive(Debug, Default, Clone, Copy)]
pub struct PubReport {
    pub objects_sent: u64,
    /// The most an object went out after its due time (the publisher fell behind).
    pub max_lag: Duration,
    /// The publisher thread's CPU seconds, from the start to its last object.
    pub cpu_s: f64,
    /// Seconds from the start to its last object.
    pub wall_s: f64,
}

/// The publisher thread: connects the publishers, announces, waits for the start, then sends
/// every track's objects on schedule and ends each track with PUBLISH_DONE.
pub fn publish(plan: &Plan, ctl: &Control) -> anyhow::Result<PubReport> {
    let deadline = Instant::now() + plan.timeout;
    let owner = |t: usize| plan.specs[t].publisher;
    let cores = (0..plan.publishers)
        .map(|p| {
            let mut core = PublisherCore::new();
            for (_, track) in plan.tracks.iter().enumerate().filter(|(t, _)| owner(*t) == p) {
                core.add_track(track.clone());
            }
            core
        })
        .collect();
    let mut fleet = Fleet::connect(plan.publish_peer.clone(), plan.version, cores, deadline)
        .context("publishers connect")?;
    // Each namespace once, by the publisher of its tracks.
    let mut namespaces = Vec::new();
    for (t, track) in plan.tracks.iter().enumerate() {
        if !namespaces.iter().any(|(_, ns)| *ns == &track.namespace) {
            namespaces.push((owner(t), &track.namespace));
        }
    }
    let mut announced: Vec<(usize, RequestId)> = Vec::new();
    for (p, namespace) in namespaces {
        let id = fleet.with(p, |c, s| c.announce(s, namespace.clone()));
        announced.push((p, id.ok_or(ClientError::Closed)??));
    }
    fleet
        .drive(deadline, |i, c, _| {
            announced.iter().filter(|(p, _)| *p == i).try_fold(true, |all, (_, id)| {
                Ok(all & c.announcement(*id).map_or(Ok(true), RequestState::outcome)?)
            })
        })
        .context("PUBLISH_NAMESPACE")?;
    ctl.announced.store(true, Ordering::SeqCst);
    ctl.ready.fetch_add(1, Ordering::SeqCst);
    let (t0, _) = ctl.wait_start(&mut fleet)?;
    let cpu0 = crate::procfs::thread_cpu_s();

    let mut report = PubReport::default();
    // Each track's next object, soonest first.
    let mut next: BinaryHeap<Reverse<(Duration, usize, u64)>> =
        (0..plan.tracks.len()).map(|t| Reverse((plan.due(0, t), t, 0))).collect();
    while let Some(Reverse((due_after, t, seq))) = next.pop() {
        if ctl.stopped() {
            break;
        }
        let due = t0 + due_after;
        let now = Instant::now();
        if due > now {
            next.push(Reverse((due_after, t, seq)));
            fleet.pump(due)?;
            continue;
        }
        if seq + 1 < plan.total(t) {
            next.push(Reverse((plan.due(seq + 1, t), t, seq + 1)));
        }
        report.max_lag = report.max_lag.max(now - due);
        let spec = plan.specs[t];
        let at = plan.location(seq, t);
        let size = if at.object == 0 { spec.first_size } else { spec.object_size };
        let payload = stamped(seq, now_micros(), size);
        let track = &plan.tracks[t];
        let last = at.object + 1 == spec.group_size;
        fleet
            .with(owner(t), |c, s| {
                if plan.datagrams {
                    return c.send_datagram(s, track, at, &payload, last).map(|_| ());
                }
                if at.object == 0 {
                    c.begin_subgroups(s, track, at.group, plan.subgroups)?;
                }
                c.send_object(s, track, payload)?;
                if last {
                    c.end_group(s, track)?;
                }
                Ok(())
            })
            .ok_or(ClientError::Closed)??;
        report.objects_sent += 1;
    }
    report.cpu_s = crate::procfs::thread_cpu_s() - cpu0;
    report.wall_s = t0.elapsed().as_secs_f64();
    for (t, track) in plan.tracks.iter().enumerate() {
        fleet.with(owner(t), |c, s| c.done(s, track, publish_done::TRACK_ENDED, "moq-bench finished"));
    }
    ctl.published.store(true, Ordering::SeqCst);
    while !ctl.stopped() {
        fleet.pump(Instant::now() + Duration::from_millis(50))?;
    }
    fleet.close()?;
    Ok(report)
}

/// One subscription of a subscriber thread.
#[derive(Debug)]
struct Sub {
    id: RequestId,
    check: SubCheck,
    sent: Instant,
    answered: bool,
    first_object: bool,
}

/// One subscriber connection's plan and subscriptions.
#[derive(Debug)]
pub struct Member {
    /// Indices into [`Plan::tracks`].
    pub tracks: Vec<usize>,
    /// When to subscribe, after the start (`None`: before the start).
    pub join_after: Option<Duration>,
    /// Stops reading its streams after the warm-up (`--stall`).
    pub stall: bool,
    subs: Vec<Sub>,
}

impl Member {
    pub fn new(tracks: Vec<usize>, join_after: Option<Duration>) -> Self {
        Member { tracks, join_after, stall: false, subs: Vec::new() }
    }
}

/// Per-thread recording state.
struct Recorder<'a> {
    plan: &'a Plan,
    ctl: &'a Control,
    tally: Tally,
    /// Measured window by receive time, Unix µs (set at the start).
    window: (u64, u64),
    /// Every object and byte received (the progress line), and how much of it was reported.
    seen: (u64, u64),
    reported: (u64, u64),
}

impl<'a> Recorder<'a> {
    fn new(plan: &'a Plan, ctl: &'a Control) -> Self {
        Recorder { plan, ctl, tally: Tally::default(), window: (0, u64::MAX), seen: (0, 0), reported: (0, 0) }
    }

    /// Subscribes member `m` to its tracks.
    fn subscribe(
        &self,
        core: &mut SubscriberCore,
        s: &mut moq_edge::session::Session,
        m: &mut Member,
        expect: Option<Expect>,
    ) {
        for &t in &m.tracks {
            let (total, expect) = (self.plan.total(t), expect.unwrap_or_else(|| self.plan.whole(t)));
            let track = self.plan.tracks[t].clone();
            let params = Parameters {
                forward: Some(true),
                location_filter: Some(LocationFilter::NextObject),
                group_order: self.plan.group_order,
                ..Parameters::default()
            };
            if let Ok(id) = core.subscribe_with(s, track, params) {
                m.subs.push(Sub {
                    id,
                    check: SubCheck::new(expect, total),
                    sent: Instant::now(),
                    answered: false,
                    first_object: false,
                });
            }
        }
    }

    /// Takes what member `m` received and records it.
    fn take(&mut self, core: &mut SubscriberCore, m: &mut Member) {
        let now = Instant::now();
        let now_us = now_micros();
        let in_window = (self.window.0..self.window.1).contains(&now_us);
        for sub in &mut m.subs {
            if !sub.answered {
                match core.subscription(sub.id).map(|s| &s.state) {
                    Some(RequestState::Accepted) => {
                        sub.answered = true;
                        self.tally.subscribe_ok.saturating_record(micros(now - sub.sent));
                    }
                    Some(RequestState::Pending) => {}
                    _ => {
                        sub.answered = true;
                        self.tally.subscribe_errors += 1;
                    }
                }
            }
            for r in core.take_received(sub.id) {
                self.seen.0 += 1;
                self.seen.1 += r.payload.len() as u64;
                if in_window {
                    self.tally.delivered_objects += 1;
                    self.tally.delivered_bytes += r.payload.len() as u64;
                }
                let Some((seq, sent_us)) = sub.check.record(&r) else { continue };
                if !sub.first_object {
                    sub.first_object = true;
                    self.tally.join.saturating_record(micros(now - sub.sent));
                    self.tally.missed_in_group += r.object;
                }
                if sub.check.in_window(seq) {
                    self.tally.latency.saturating_record(now_us.saturating_sub(sent_us).max(1));
                }
            }
        }
    }

    /// Publishes this thread's progress to the shared counters.
    fn report(&mut self) {
        let (o, b) = self.seen;
        self.ctl.objects.fetch_add(o - self.reported.0, Ordering::Relaxed);
        self.ctl.bytes.fetch_add(b - self.reported.1, Ordering::Relaxed);
        self.reported = (o, b);
    }

    /// Counts member `m`'s subscriptions into the totals.
    fn close(&mut self, core: &SubscriberCore, m: &Member) {
        for sub in &m.subs {
            self.tally.close(&sub.check);
            self.tally.resets += core.subscription(sub.id).map_or(0, |s| s.resets.len() as u64);
        }
    }
}

pub fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX).max(1)
}

fn window_of(plan: &Plan, start_us: u64) -> (u64, u64) {
    let lo = start_us + micros(plan.warmup);
    (lo, lo + micros(plan.duration))
}

/// A subscriber thread for the fan-out, many-tracks and late-join scenarios: connects its
/// members, subscribes those without a join time before the start and the others at their
/// time, records everything that arrives, and ends when every subscription has ended after
/// the publishers finished, or when told to stop.
pub fn subscribe(plan: &Plan, ctl: &Control, mut members: Vec<Member>) -> anyhow::Result<Tally> {
    let deadline = Instant::now() + plan.timeout;
    let mut fleet = Fleet::subscribers(plan.peer.clone(), plan.version, members.len(), deadline)
        .context("subscribers connect")?;
    let mut rec = Recorder::new(plan, ctl);
    rec.tally.sessions = members.len() as u64;
    // A SUBSCRIBE before the publisher's namespace is known is refused (DOES_NOT_EXIST). A
    // relay of several cores may learn the namespace on the others a little later than it
    // answers the publisher: allow it a moment.
    while !ctl.announced.load(Ordering::SeqCst) {
        if ctl.stopped() {
            bail!("stopped before the publishers were ready");
        }
        fleet.pump(Instant::now() + Duration::from_millis(10))?;
    }
    fleet.pump(Instant::now() + Duration::from_millis(100))?;
    for (i, m) in members.iter_mut().enumerate().filter(|(_, m)| m.join_after.is_none()) {
        fleet.with(i, |c, s| rec.subscribe(c, s, m, None));
    }
    fleet
        .drive(deadline, |i, c, _| {
            let m = &mut members[i];
            rec.take(c, m);
            m.subs.iter().try_fold(true, |all, sub| {
                Ok(all & c.subscription(sub.id).map_or(Ok(true), |s| s.state.outcome())?)
            })
        })
        .context("SUBSCRIBE")?;
    ctl.ready.fetch_add(1, Ordering::SeqCst);
    let (t0, start_us) = ctl.wait_start(&mut fleet)?;
    rec.window = window_of(plan, start_us);

    let mut joins: Vec<(Duration, usize)> =
        members.iter().enumerate().filter_map(|(i, m)| m.join_after.map(|d| (d, i))).collect();
    joins.sort();
    let mut next_join = 0;
    let mut drained = false;
    let mut stalled = !members.iter().any(|m| m.stall);
    while !ctl.stopped() {
        let mut slice = Instant::now() + Duration::from_millis(100);
        if !stalled {
            if t0 + plan.warmup <= Instant::now() {
                // These connections stop reading (and so stop granting flow control) now.
                for (i, _) in members.iter().enumerate().filter(|(_, m)| m.stall) {
                    fleet.stall(i);
                }
                stalled = true;
            } else {
                slice = slice.min(t0 + plan.warmup);
            }
        }
        if let Some(&(after, i)) = joins.get(next_join) {
            if t0 + after <= Instant::now() {
                fleet.with(i, |c, s| rec.subscribe(c, s, &mut members[i], Some(Expect::Observed)));
                rec.tally.joins += 1;
                next_join += 1;
                continue;
            }
            slice = slice.min(t0 + after);
        }
        fleet.pump_with(slice, |i, c| rec.take(c, &mut members[i]))?;
        rec.report();
        let all_done = fleet.cores().iter().zip(&members).filter(|(_, m)| !m.stall).all(|(c, m)| {
            m.subs.iter().all(|sub| c.subscription(sub.id).is_none_or(|s| s.done.is_some() || !s.is_live()))
        });
        if !drained && next_join == joins.len() && ctl.published.load(Ordering::SeqCst) && all_done {
            drained = true;
            ctl.drained.fetch_add(1, Ordering::SeqCst);
        }
    }
    for (i, m) in members.iter().enumerate() {
        if m.stall {
            rec.tally.stalled += 1;
        } else if let Some(c) = fleet.core(i) {
            rec.close(c, m);
        }
    }
    fleet.close()?;
    Ok(rec.tally)
}

/// A subscriber thread for the churn scenario: waves of `members` connections that connect,
/// subscribe, stay for [`Plan::hold`], unsubscribe and close, repeated until the measured
/// window ends.
pub fn churn(plan: &Plan, ctl: &Control, members: &[Vec<usize>]) -> anyhow::Result<Tally> {
    let mut rec = Recorder::new(plan, ctl);
    ctl.ready.fetch_add(1, Ordering::SeqCst);
    let (t0, start_us) = loop {
        if let Some(&s) = ctl.start.get() {
            break s;
        }
        if ctl.stopped() {
            return Ok(rec.tally);
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    rec.window = window_of(plan, start_us);
    let end = t0 + plan.warmup + plan.duration;
    while Instant::now() < end && !ctl.stopped() {
        let deadline = Instant::now() + plan.timeout;
        let mut fleet = Fleet::subscribers(plan.peer.clone(), plan.version, members.len(), deadline)
            .context("churn: subscribers connect")?;
        rec.tally.sessions += members.len() as u64;
        let mut wave: Vec<Member> = members.iter().map(|t| Member::new(t.clone(), None)).collect();
        for (i, m) in wave.iter_mut().enumerate() {
            fleet.with(i, |c, s| rec.subscribe(c, s, m, Some(Expect::Observed)));
            rec.tally.joins += m.subs.len() as u64;
        }
        let leave = Instant::now() + plan.hold;
        while Instant::now() < leave && !ctl.stopped() {
            let slice = leave.min(Instant::now() + Duration::from_millis(100));
            fleet.pump_with(slice, |i, c| rec.take(c, &mut wave[i]))?;
            rec.report();
        }
        for (i, m) in wave.iter().enumerate() {
            for sub in &m.subs {
                fleet.with(i, |c, s| c.unsubscribe(s, sub.id));
            }
        }
        fleet.flush()?;
        for (i, m) in wave.iter().enumerate() {
            if let Some(c) = fleet.core(i) {
                rec.close(c, m);
            }
        }
        fleet.close()?;
    }
    ctl.drained.fetch_add(1, Ordering::SeqCst);
    while !ctl.stopped() {
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(rec.tally)
}

/// Joins the threads; fails with every thread's error, each named.
pub fn join_all<T>(
    handles: Vec<(String, std::thread::ScopedJoinHandle<'_, anyhow::Result<T>>)>,
) -> anyhow::Result<Vec<T>> {
    let mut done = Vec::new();
    let mut errors = Vec::new();
    for (name, h) in handles {
        match h.join() {
            Ok(Ok(t)) => done.push(t),
            Ok(Err(e)) => errors.push(format!("{name}: {e:#}")),
            Err(_) => errors.push(format!("{name}: panicked")),
        }
    }
    if errors.is_empty() {
        Ok(done)
    } else {
        Err(anyhow!(errors.join("\n  ")))
    }
}
