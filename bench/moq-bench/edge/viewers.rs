//! The edge scenario's viewer threads: steady viewers connected and subscribed before the
//! start, viewers arriving (churn, crowd) that connect, subscribe as soon as their session is
//! set up, and leave; what each receives is checked and timed.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use hdrhistogram::Histogram;
use moq_edge::client::stamp::now_micros;
use moq_edge::client::{ClientError, Fleet, RequestState, SubscriberCore};
use moq_edge::wire::model::{LocationFilter, Parameters, RequestId};

use super::{Arrival, Kind, Layout};
use crate::check::{histogram, Expect, SubCheck, Tally};
use crate::load::{micros, Control, Plan};
use crate::procfs;

/// One of a viewer's two subscriptions.
#[derive(Debug)]
struct ViewSub {
    id: RequestId,
    check: SubCheck,
    sent: Instant,
    answered: bool,
    first: bool,
}

/// A viewer: one connection, subscribed to its broadcast's video and audio.
#[derive(Debug)]
struct Viewer {
    broadcast: usize,
    kind: Kind,
    opened: Instant,
    ready: bool,
    subs: Vec<ViewSub>,
    leave_at: Option<Instant>,
    gone: bool,
}

/// What a viewer thread counted.
#[derive(Debug)]
pub(super) struct EdgeTally {
    /// Delivery and integrity; `latency` is the steady viewers'.
    pub(super) base: Tally,
    /// Steady viewers' latency before the crowd arrived and while it did (to its end + 1 s).
    pub(super) latency_before: Histogram<u64>,
    pub(super) latency_crowd: Histogram<u64>,
    /// SUBSCRIBE → first object, per joining viewer (its first track to deliver).
    pub(super) join_churn: Histogram<u64>,
    pub(super) join_crowd: Histogram<u64>,
    /// Connection opened → session set up (QUIC handshake and SETUP), joiners.
    pub(super) setup_churn: Histogram<u64>,
    pub(super) setup_crowd: Histogram<u64>,
    /// Crowd: first opened and last set up (to count handshakes per second).
    pub(super) crowd_span: Option<(Instant, Instant)>,
    pub(super) crowd_ready: u64,
    pub(super) joiners: u64,
    /// Joiners that never received an object (of either track) while they stayed.
    pub(super) joiners_without_object: u64,
    /// Joiners whose connection failed or was refused before they were set up.
    pub(super) failed_connects: u64,
    /// Time spent connecting WebTransport and WebSocket joiners (those connect before
    /// returning, and the thread's other viewers wait meanwhile), and the longest such wait.
    pub(super) blocked: Duration,
    pub(super) blocked_max: Duration,
    /// Objects and bytes received so far, and how much of it went to the progress line.
    pub(super) seen: (u64, u64),
    pub(super) reported: (u64, u64),
    /// This thread's CPU seconds and wall seconds from the start.
    pub(super) cpu_s: f64,
    pub(super) wall_s: f64,
}

impl Default for EdgeTally {
    fn default() -> Self {
        EdgeTally {
            base: Tally::default(),
            latency_before: histogram(),
            latency_crowd: histogram(),
            join_churn: histogram(),
            join_crowd: histogram(),
            setup_churn: histogram(),
            setup_crowd: histogram(),
            crowd_span: None,
            crowd_ready: 0,
            joiners: 0,
            joiners_without_object: 0,
            failed_connects: 0,
            blocked: Duration::ZERO,
            blocked_max: Duration::ZERO,
            seen: (0, 0),
            reported: (0, 0),
            cpu_s: 0.0,
            wall_s: 0.0,
        }
    }
}

impl EdgeTally {
    pub(super) fn merge(&mut self, o: &EdgeTally) {
        self.base.merge(&o.base);
        for (a, b) in [
            (&mut self.latency_before, &o.latency_before),
            (&mut self.latency_crowd, &o.latency_crowd),
            (&mut self.join_churn, &o.join_churn),
            (&mut self.join_crowd, &o.join_crowd),
            (&mut self.setup_churn, &o.setup_churn),
            (&mut self.setup_crowd, &o.setup_crowd),
        ] {
            // Same bounds on both sides: adding cannot fail.
            let _ = a.add(b);
        }
        self.crowd_span = match (self.crowd_span, o.crowd_span) {
            (Some(a), Some(b)) => Some((a.0.min(b.0), a.1.max(b.1))),
            (a, b) => a.or(b),
        };
        self.crowd_ready += o.crowd_ready;
        self.joiners += o.joiners;
        self.joiners_without_object += o.joiners_without_object;
        self.failed_connects += o.failed_connects;
        self.blocked += o.blocked;
        self.blocked_max = self.blocked_max.max(o.blocked_max);
    }
}

/// A viewer thread's viewers: their connections, their state, and what they counted.
struct Crew {
    fleet: Fleet<SubscriberCore>,
    viewers: Vec<Viewer>,
    tally: EdgeTally,
}

/// A viewer thread: connects its steady viewers (and tells the main thread), subscribes them
/// when told, then serves them and its arrivals until the run is over.
pub(super) fn view(
    layout: &Layout<'_>,
    ctl: &Control,
    steady: Vec<(usize, usize)>,
    joins: Vec<Arrival>,
) -> anyhow::Result<EdgeTally> {
    let plan = layout.plan;
    let mut crew = Crew::steady(layout, ctl, &steady)?;
    ctl.ready.fetch_add(1, Ordering::SeqCst);
    let (t0, start_us) = ctl.wait_start(&mut crew.fleet)?;
    let (cpu0, wall0) = (procfs::thread_cpu_s(), Instant::now());
    let window = (start_us + micros(plan.warmup), start_us + micros(plan.warmup + plan.duration));
    let crowd = layout.crowd_us.map(|(a, b)| (start_us + a, start_us + b));
    let mut next_join = 0;
    let mut drained = false;
    while !ctl.stopped() {
        let slice = Instant::now() + Duration::from_millis(50);
        let slice = crew.arrive(layout, &joins, &mut next_join, t0, slice);
        let slice = crew.sweep(slice);
        // Serve: a joiner subscribes as soon as its session is set up.
        let Crew { fleet, viewers, tally } = &mut crew;
        let served = fleet.drive(slice, |i, c, s| {
            let v = &mut viewers[i];
            if !v.ready && s.is_ready() {
                set_up(layout, tally, v, c, s);
            }
            take(tally, v, c, window, crowd);
            Ok(false)
        });
        match served {
            Ok(()) | Err(ClientError::Deadline) => {}
            Err(e) => return Err(e.into()),
        }
        let (o, b) = tally.seen;
        ctl.objects.fetch_add(o - tally.reported.0, Ordering::Relaxed);
        ctl.bytes.fetch_add(b - tally.reported.1, Ordering::Relaxed);
        tally.reported = (o, b);
        if !drained && next_join == joins.len() && ctl.published.load(Ordering::SeqCst) && crew.all_done() {
            drained = true;
            crew.tally.cpu_s = procfs::thread_cpu_s() - cpu0;
            crew.tally.wall_s = wall0.elapsed().as_secs_f64();
            ctl.drained.fetch_add(1, Ordering::SeqCst);
        }
    }
    let Crew { mut fleet, mut viewers, mut tally } = crew;
    if !drained {
        tally.cpu_s = procfs::thread_cpu_s() - cpu0;
        tally.wall_s = wall0.elapsed().as_secs_f64();
    }
    for (i, v) in viewers.iter_mut().enumerate() {
        if !v.gone {
            close(&fleet, i, v, &mut tally);
        }
    }
    let _ = fleet.close();
    Ok(tally)
}

impl Crew {
    /// Connects the steady viewers once told to (after the relay's memory was read with only
    /// the publishers there), and subscribes them once told to.
    fn steady(layout: &Layout<'_>, ctl: &Control, steady: &[(usize, usize)]) -> anyhow::Result<Crew> {
        let plan = layout.plan;
        while !ctl.connect.load(Ordering::SeqCst) {
            if ctl.stopped() {
                bail!("stopped before the viewers connected");
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        let deadline = Instant::now() + plan.timeout;
        let mut fleet: Fleet<SubscriberCore> = Fleet::new();
        let mut viewers: Vec<Viewer> = Vec::new();
        let mut tally = EdgeTally::default();
        for &(n, broadcast) in steady {
            let (relay, version) = layout.link(n);
            fleet.open(relay, version, SubscriberCore::new(), deadline).context("a viewer connects")?;
            viewers.push(Viewer {
                broadcast,
                kind: Kind::Steady,
                opened: Instant::now(),
                ready: true,
                subs: Vec::new(),
                leave_at: None,
                gone: false,
            });
        }
        fleet.drive(deadline, |_, _, s| Ok(s.is_ready())).context("viewers set up")?;
        fleet.lenient();
        tally.base.sessions = viewers.len() as u64;
        ctl.connected.fetch_add(1, Ordering::SeqCst);
        while !ctl.subscribe.load(Ordering::SeqCst) {
            if ctl.stopped() {
                bail!("stopped before the viewers subscribed");
            }
            fleet.pump(Instant::now() + Duration::from_millis(10))?;
        }
        for (i, v) in viewers.iter_mut().enumerate() {
            fleet.with(i, |c, s| subscribe(layout, c, s, v, Some(plan_whole)));
        }
        fleet
            .drive(deadline, |i, c, _| {
                Ok(viewers[i]
                    .subs
                    .iter()
                    .all(|s| c.subscription(s.id).is_none_or(|x| x.state != RequestState::Pending)))
            })
            .context("SUBSCRIBE")?;
        let refused = |c: &SubscriberCore, s: &ViewSub| {
            c.subscription(s.id)
                .is_none_or(|x| !matches!(x.state, RequestState::Accepted | RequestState::Pending))
        };
        for (i, v) in viewers.iter().enumerate() {
            let c = fleet.core(i).context("a viewer")?;
            if let Some(s) = v.subs.iter().find(|s| refused(c, s)) {
                bail!("a viewer's SUBSCRIBE was refused: {:?}", c.subscription(s.id).map(|x| &x.state));
            }
        }
        Ok(Crew { fleet, viewers, tally })
    }

    /// Opens the arrivals that are due; returns `slice`, shortened to the next arrival (in
    /// batches of at least 5 ms: each round of the fleet visits every member once).
    fn arrive(
        &mut self,
        layout: &Layout<'_>,
        joins: &[Arrival],
        next: &mut usize,
        t0: Instant,
        slice: Instant,
    ) -> Instant {
        let now = Instant::now();
        while let Some(j) = joins.get(*next) {
            if t0 + j.at > now {
                return slice.min((t0 + j.at).max(now + Duration::from_millis(5)));
            }
            *next += 1;
            self.tally.joiners += 1;
            let (relay, version) = layout.link(j.n);
            let before = Instant::now();
            let opened = self.fleet.open(relay, version, SubscriberCore::new(), before + layout.plan.timeout);
            if relay.url.is_some() {
                let took = before.elapsed();
                self.tally.blocked += took;
                self.tally.blocked_max = self.tally.blocked_max.max(took);
            }
            if opened.is_err() {
                self.tally.failed_connects += 1;
                continue;
            }
            self.viewers.push(Viewer {
                broadcast: j.broadcast,
                kind: j.kind,
                opened: before,
                ready: false,
                subs: Vec::new(),
                leave_at: j.hold.map(|h| t0 + j.at + h),
                gone: false,
            });
        }
        slice
    }

    /// Counts joiners that failed, and lets those whose time is up leave; returns `slice`,
    /// shortened to the next departure.
    fn sweep(&mut self, mut slice: Instant) -> Instant {
        let now = Instant::now();
        for (i, v) in self.viewers.iter_mut().enumerate() {
            if v.gone {
                continue;
            }
            if !v.ready && self.fleet.closed(i).is_some() {
                v.gone = true;
                self.tally.failed_connects += 1;
                continue;
            }
            if let Some(at) = v.leave_at {
                if at <= now {
                    leave(&mut self.fleet, i, v, &mut self.tally);
                } else {
                    slice = slice.min(at);
                }
            }
        }
        slice
    }

    /// Whether every viewer has left, closed, or seen each of its subscriptions end.
    fn all_done(&self) -> bool {
        self.viewers.iter().enumerate().all(|(i, v)| {
            v.gone
                || self.fleet.closed(i).is_some()
                || self.fleet.core(i).is_some_and(|c| {
                    v.subs
                        .iter()
                        .all(|s| c.subscription(s.id).is_none_or(|x| x.done.is_some() || !x.is_live()))
                })
        })
    }
}

/// Joiner `v`'s session is set up: its setup time is recorded and it subscribes.
fn set_up(
    layout: &Layout<'_>,
    tally: &mut EdgeTally,
    v: &mut Viewer,
    core: &mut SubscriberCore,
    s: &mut moq_edge::session::Session,
) {
    let now = Instant::now();
    v.ready = true;
    let setup = micros(now - v.opened);
    if v.kind == Kind::Crowd {
        tally.setup_crowd.saturating_record(setup);
        tally.crowd_ready += 1;
        tally.crowd_span = Some(tally.crowd_span.map_or((v.opened, now), |(first, _)| (first, now)));
    } else {
        tally.setup_churn.saturating_record(setup);
    }
    if v.kind == Kind::Crowd && layout.crowd_idle {
        return;
    }
    subscribe(layout, core, s, v, None);
}

/// The `expect` of a steady viewer's subscription: the whole window.
fn plan_whole(plan: &Plan, t: usize) -> Expect {
    plan.whole(t)
}

/// Subscribes viewer `v` to its broadcast's video and audio (next object on).
fn subscribe(
    layout: &Layout<'_>,
    core: &mut SubscriberCore,
    s: &mut moq_edge::session::Session,
    v: &mut Viewer,
    expect: Option<fn(&Plan, usize) -> Expect>,
) {
    let plan = layout.plan;
    for t in [layout.video(v.broadcast), layout.video(v.broadcast) + 1] {
        let params = Parameters {
            forward: Some(true),
            location_filter: Some(LocationFilter::NextObject),
            ..Parameters::default()
        };
        if let Ok(id) = core.subscribe_with(s, plan.tracks[t].clone(), params) {
            let expect = expect.map_or(Expect::Observed, |f| f(plan, t));
            v.subs.push(ViewSub {
                id,
                check: SubCheck::new(expect, plan.total(t)),
                sent: Instant::now(),
                answered: false,
                first: false,
            });
        }
    }
}

/// Takes what viewer `v` received and records it.
fn take(
    tally: &mut EdgeTally,
    v: &mut Viewer,
    core: &mut SubscriberCore,
    window: (u64, u64),
    crowd: Option<(u64, u64)>,
) {
    let now = Instant::now();
    let now_us = now_micros();
    let in_window = (window.0..window.1).contains(&now_us);
    let mut joined = v.subs.iter().any(|s| s.first);
    for sub in &mut v.subs {
        if !sub.answered {
            match core.subscription(sub.id).map(|s| &s.state) {
                Some(RequestState::Accepted) => {
                    sub.answered = true;
                    tally.base.subscribe_ok.saturating_record(micros(now - sub.sent));
                }
                Some(RequestState::Pending) => {}
                _ => {
                    sub.answered = true;
                    tally.base.subscribe_errors += 1;
                }
            }
        }
        for r in core.take_received(sub.id) {
            tally.seen.0 += 1;
            tally.seen.1 += r.payload.len() as u64;
            if in_window {
                tally.base.delivered_objects += 1;
                tally.base.delivered_bytes += r.payload.len() as u64;
            }
            let Some((seq, sent_us)) = sub.check.record(&r) else { continue };
            if !sub.first {
                sub.first = true;
                if v.kind != Kind::Steady && !joined {
                    joined = true;
                    let join = micros(now - sub.sent);
                    match v.kind {
                        Kind::Crowd => tally.join_crowd.saturating_record(join),
                        _ => tally.join_churn.saturating_record(join),
                    }
                }
            }
            if v.kind == Kind::Steady && sub.check.in_window(seq) {
                let lat = now_us.saturating_sub(sent_us).max(1);
                tally.base.latency.saturating_record(lat);
                match crowd {
                    Some((a, b)) if (a..b).contains(&now_us) => tally.latency_crowd.saturating_record(lat),
                    Some((a, _)) if now_us < a => tally.latency_before.saturating_record(lat),
                    _ => {}
                }
            }
        }
    }
}

/// Viewer `i` leaves: unsubscribes, closes its connection, and its subscriptions are counted.
fn leave(fleet: &mut Fleet<SubscriberCore>, i: usize, v: &mut Viewer, tally: &mut EdgeTally) {
    for sub in &v.subs {
        fleet.with(i, |c, s| c.unsubscribe(s, sub.id));
    }
    let _ = fleet.flush();
    close(fleet, i, v, tally);
    let _ = fleet.retire(i);
}

/// Counts viewer `i`'s subscriptions into the totals.
fn close(fleet: &Fleet<SubscriberCore>, i: usize, v: &mut Viewer, tally: &mut EdgeTally) {
    v.gone = true;
    if v.kind != Kind::Steady && v.ready && !v.subs.is_empty() && !v.subs.iter().any(|s| s.first) {
        tally.joiners_without_object += 1;
    }
    if let Some(c) = fleet.core(i) {
        for sub in &v.subs {
            tally.base.close(&sub.check);
            tally.base.resets += c.subscription(sub.id).map_or(0, |s| s.resets.len() as u64);
        }
    }
}
