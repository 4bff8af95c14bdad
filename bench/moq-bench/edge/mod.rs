//! The edge scenario: an edge node's day in miniature. B broadcasts, each a video track (a
//! larger keyframe opening every group) and an audio track; V viewers spread over them by a
//! Zipf law, each subscribed to both tracks of its broadcast for the whole run; viewers who
//! come and go (churn: J arrivals a second, each staying a while); and an optional flash crowd
//! (K viewers of one broadcast arriving within a few seconds). Viewers use a mix of
//! transports and drafts. The relay's memory is sampled at each phase (publishers announced,
//! viewers connected and idle, viewers subscribed, the end), so that what a connection, a
//! viewer and a broadcast cost shows apart.

mod report;
mod viewers;

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use bytes::Bytes;
use clap::Args;
use moq_edge::client::cli::{parse_draft, parse_relay};
use moq_edge::client::stamp::{parse_namespace, STAMP_LEN};
use moq_edge::client::Relay;
use moq_edge::wire::model::{FullTrackName, TrackNamespace};
use moq_edge::wire::Version;

use crate::load::{self, micros, Control, Plan, PubReport, TrackSpec};
use crate::{procfs, RelayFigures};
use report::Report;
use viewers::{view, EdgeTally};

/// `moq-bench edge`'s options.
#[derive(Debug, Args)]
pub struct EdgeArgs {
    /// The relay's address (host:port or moqt://host:port); WebTransport and WebSocket viewers
    /// reach it at https:// and ws:// on the same address, with --path.
    #[arg(long, default_value = "moqt://127.0.0.1:4443")]
    relay: String,
    /// The URL path of WebTransport and WebSocket sessions.
    #[arg(long, default_value = "/moq")]
    path: String,
    /// The viewers' transports, dealt to them in turn: quic, webtransport, websocket.
    #[arg(long, value_delimiter = ',', default_value = "quic", value_parser = ["quic", "webtransport", "websocket"])]
    transports: Vec<String>,
    /// The viewers' MoQT drafts, dealt to them in turn (each transport meets each draft); the
    /// publishers use the first.
    #[arg(long, value_delimiter = ',', default_value = "16", value_parser = parse_draft)]
    drafts: Vec<Version>,
    /// Broadcasts (each a video and an audio track).
    #[arg(long, default_value_t = 100)]
    broadcasts: usize,
    /// Publisher connections; broadcast b is published by publisher b mod this.
    #[arg(long, default_value_t = 4)]
    publishers: usize,
    /// Viewers present for the whole run.
    #[arg(long, default_value_t = 500)]
    viewers: usize,
    /// Exponent of the Zipf law that spreads viewers over broadcasts (broadcast of rank r gets
    /// a share ∝ 1/r^s; 0: evenly).
    #[arg(long, default_value_t = 1.0)]
    zipf: f64,
    /// Video objects (frames) per second per broadcast.
    #[arg(long, default_value_t = 30.0)]
    video_rate: f64,
    /// Video objects per group (frames per GOP).
    #[arg(long, default_value_t = 30)]
    gop: u64,
    /// Bytes of a group's first video object (the keyframe) and of the others.
    #[arg(long, default_value_t = 20_000)]
    keyframe_size: usize,
    #[arg(long, default_value_t = 2_500)]
    frame_size: usize,
    /// Audio objects per second per broadcast, their bytes, and objects per group.
    #[arg(long, default_value_t = 50.0)]
    audio_rate: f64,
    #[arg(long, default_value_t = 200)]
    audio_size: usize,
    #[arg(long, default_value_t = 5)]
    audio_group: u64,
    /// Churn: viewers arriving per second over the whole run, each staying --hold-s then
    /// leaving (unsubscribe, close).
    #[arg(long, default_value_t = 0.0)]
    churn: f64,
    #[arg(long, default_value_t = 3.0)]
    hold_s: f64,
    /// A flash crowd: this many viewers of one broadcast arriving evenly within
    /// --crowd-window-s, starting --crowd-at-s after the measured window starts.
    #[arg(long, default_value_t = 0)]
    crowd: usize,
    #[arg(long, default_value_t = 2.0)]
    crowd_window_s: f64,
    #[arg(long, default_value_t = 3.0)]
    crowd_at_s: f64,
    /// The broadcast the crowd comes for (by rank: 0 is the most watched).
    #[arg(long, default_value_t = 0)]
    crowd_broadcast: usize,
    /// The crowd only connects and sets up (QUIC handshake and SETUP), without subscribing:
    /// to measure what handshakes cost the relay apart from what the crowd then watches.
    #[arg(long)]
    crowd_idle: bool,
    /// Seconds measured, after the warm-up.
    #[arg(long, default_value_t = 10.0)]
    duration: f64,
    #[arg(long, default_value_t = 2.0)]
    warmup: f64,
    /// Threads of the generator's steady viewers (dealt over them evenly).
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// Threads of the arriving viewers (churn and crowd), apart from the steady viewers' so
    /// that a joiner's connect (WebTransport and WebSocket ones wait for their handshake)
    /// never holds a steady viewer's reads.
    #[arg(long, default_value_t = 1)]
    arrival_threads: usize,
    /// Congestion control of the bench's QUIC connections.
    #[arg(long, default_value = "cubic", value_parser = ["cubic", "reno", "bbr2"])]
    congestion_control: String,
    /// The viewers acknowledge every this many packets (see `fanout --help`).
    #[arg(long, default_value_t = 2)]
    ack_every: u32,
    /// The relay's process id: its CPU per delivered GB and its memory at each phase.
    #[arg(long)]
    relay_pid: Option<u32>,
    #[arg(long)]
    json: Option<std::path::PathBuf>,
    /// Namespace prefix of the broadcasts (default: bench/<this process id>).
    #[arg(long)]
    namespace: Option<String>,
    #[arg(long)]
    quiet: bool,
    /// Seconds allowed for connecting and for each answer.
    #[arg(long, default_value_t = 30)]
    timeout_s: u64,
}

/// A viewer's role, for its figures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Steady,
    Churn,
    Crowd,
}

/// A viewer that arrives during the run.
#[derive(Debug, Clone, Copy)]
struct Arrival {
    /// After the start.
    at: Duration,
    broadcast: usize,
    kind: Kind,
    /// How long it stays (`None`: to the end).
    hold: Option<Duration>,
    /// The viewer's number, which picks its transport and draft.
    n: usize,
}

/// The run's layout, shared by the threads.
struct Layout<'a> {
    plan: &'a Plan,
    /// Per transport: where a viewer connects.
    relays: Vec<Relay>,
    drafts: Vec<Version>,
    /// Receive-time window of the crowd's effect on the steady viewers, Unix µs (from the
    /// start): the crowd's arrival to its end + 1 s.
    crowd_us: Option<(u64, u64)>,
    /// The crowd does not subscribe (`--crowd-idle`).
    crowd_idle: bool,
}

impl Layout<'_> {
    /// Viewer `n`'s transport and draft: each transport meets each draft.
    fn link(&self, n: usize) -> (&Relay, Version) {
        let t = self.relays.len();
        (&self.relays[n % t], self.drafts[(n / t) % self.drafts.len()])
    }

    fn video(&self, b: usize) -> usize {
        2 * b
    }
}

/// A deterministic generator (xorshift64*) for the viewers' broadcasts.
struct Rng(u64);

impl Rng {
    fn next_f64(&mut self) -> f64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// The Zipf law over `b` broadcasts: each one's cumulative share.
fn zipf_cdf(b: usize, s: f64) -> Vec<f64> {
    let weights: Vec<f64> = (1..=b).map(|r| 1.0 / (r as f64).powf(s)).collect();
    let total: f64 = weights.iter().sum();
    let mut acc = 0.0;
    weights
        .iter()
        .map(|w| {
            acc += w / total;
            acc
        })
        .collect()
}

fn pick(cdf: &[f64], u: f64) -> usize {
    cdf.partition_point(|&c| c < u).min(cdf.len() - 1)
}

/// `v` steady viewers' broadcasts: each broadcast's Zipf share, rounded by largest remainder,
/// then shuffled so that every thread gets a mix.
fn steady_broadcasts(v: usize, cdf: &[f64], rng: &mut Rng) -> Vec<usize> {
    let shares: Vec<f64> = cdf
        .iter()
        .scan(0.0, |prev, &c| {
            let s = (c - *prev) * v as f64;
            *prev = c;
            Some(s)
        })
        .collect();
    let mut counts: Vec<usize> = shares.iter().map(|s| s.floor() as usize).collect();
    let mut order: Vec<usize> = (0..cdf.len()).collect();
    order.sort_by(|&a, &b| (shares[b] - shares[b].floor()).total_cmp(&(shares[a] - shares[a].floor())));
    let short = v - counts.iter().sum::<usize>();
    for &b in order.iter().take(short) {
        counts[b] += 1;
    }
    let mut out: Vec<usize> =
        counts.iter().enumerate().flat_map(|(b, &n)| std::iter::repeat_n(b, n)).collect();
    for i in (1..out.len()).rev() {
        let j = (rng.next_f64() * (i + 1) as f64) as usize;
        out.swap(i, j.min(i));
    }
    out
}

fn check_args(a: &EdgeArgs) -> anyhow::Result<()> {
    if a.broadcasts == 0 || a.publishers == 0 || a.gop == 0 || a.audio_group == 0 {
        bail!("--broadcasts, --publishers, --gop and --audio-group must be at least 1");
    }
    if a.threads == 0 || a.arrival_threads == 0 || a.viewers == 0 {
        bail!("--viewers, --threads and --arrival-threads must be at least 1");
    }
    if a.publishers > a.broadcasts {
        bail!("--publishers ({}) must not exceed --broadcasts ({})", a.publishers, a.broadcasts);
    }
    if a.frame_size.min(a.keyframe_size).min(a.audio_size) < STAMP_LEN {
        bail!("object sizes must be at least {STAMP_LEN} (the stamp)");
    }
    let positive = |x: f64| x > 0.0 && x.is_finite();
    if !positive(a.video_rate)
        || !positive(a.audio_rate)
        || !positive(a.duration)
        || a.warmup.is_nan()
        || a.warmup < 0.0
    {
        bail!("rates and --duration must be positive, --warmup not negative");
    }
    if !(a.churn >= 0.0 && a.zipf >= 0.0 && positive(a.hold_s) && positive(a.crowd_window_s)) {
        bail!("--churn and --zipf must not be negative, --hold-s and --crowd-window-s positive");
    }
    let run = a.warmup + a.duration;
    if a.churn > 0.0 && a.hold_s + 1.0 > run {
        bail!("--hold-s must leave a second of the run ({run} s) for the churn to arrive in");
    }
    if a.crowd > 0 && (a.warmup + a.crowd_at_s + a.crowd_window_s + 1.0 > run || a.crowd_at_s < 0.0) {
        bail!("the crowd must arrive inside the measured window, a second before its end");
    }
    if a.crowd > 0 && a.crowd_broadcast >= a.broadcasts {
        bail!("--crowd-broadcast must be below --broadcasts");
    }
    Ok(())
}

fn relays(a: &EdgeArgs) -> anyhow::Result<Vec<Relay>> {
    let quic = parse_relay(&a.relay)?;
    let addr = quic.addr;
    let quic = quic.with_congestion_control(&a.congestion_control).with_ack_every(a.ack_every);
    a.transports
        .iter()
        .map(|t| match t.as_str() {
            "webtransport" => Ok(parse_relay(&format!("https://{addr}{}", a.path))?
                .with_congestion_control(&a.congestion_control)
                .with_ack_every(a.ack_every)),
            "websocket" => parse_relay(&format!("ws://{addr}{}", a.path)),
            _ => Ok(quic.clone()),
        })
        .collect()
}

fn plan(a: &EdgeArgs) -> anyhow::Result<Plan> {
    let ns = a.namespace.clone().unwrap_or_else(|| format!("bench/{}", std::process::id()));
    let prefix = parse_namespace(&ns).map_err(|e| anyhow::anyhow!(e))?;
    let mut tracks = Vec::new();
    let mut specs = Vec::new();
    for b in 0..a.broadcasts {
        let mut fields: Vec<Bytes> = prefix.fields().to_vec();
        fields.push(Bytes::from(format!("b{b}")));
        let namespace = TrackNamespace(fields);
        let publisher = b % a.publishers;
        for (name, spec) in [
            (
                "video",
                TrackSpec {
                    rate: a.video_rate,
                    group_size: a.gop,
                    first_size: a.keyframe_size,
                    object_size: a.frame_size,
                    publisher,
                },
            ),
            (
                "audio",
                TrackSpec {
                    rate: a.audio_rate,
                    group_size: a.audio_group,
                    first_size: a.audio_size,
                    object_size: a.audio_size,
                    publisher,
                },
            ),
        ] {
            tracks.push(FullTrackName {
                namespace: namespace.clone(),
                name: Bytes::from_static(name.as_bytes()),
            });
            specs.push(spec);
        }
    }
    let quic = parse_relay(&a.relay)?.with_congestion_control(&a.congestion_control);
    Ok(Plan {
        peer: quic.clone().with_ack_every(a.ack_every),
        publish_peer: quic,
        version: a.drafts[0],
        tracks,
        specs,
        publishers: a.publishers,
        subgroups: 1,
        datagrams: false,
        warmup: Duration::from_secs_f64(a.warmup),
        duration: Duration::from_secs_f64(a.duration),
        hold: Duration::from_secs_f64(a.hold_s),
        timeout: Duration::from_secs(a.timeout_s),
        group_order: None,
    })
}

/// The arrivals of the run (churn and crowd), in time order, numbered after the steady
/// viewers.
fn arrivals(a: &EdgeArgs, cdf: &[f64], rng: &mut Rng) -> Vec<Arrival> {
    let mut out = Vec::new();
    let run = a.warmup + a.duration;
    let mut n = a.viewers;
    if a.churn > 0.0 {
        let last = run - a.hold_s - 1.0;
        let count = (last * a.churn).floor() as usize;
        for k in 0..count {
            let at = Duration::from_secs_f64((k as f64 + 0.5) / a.churn);
            let hold = Some(Duration::from_secs_f64(a.hold_s));
            out.push(Arrival { at, broadcast: pick(cdf, rng.next_f64()), kind: Kind::Churn, hold, n });
            n += 1;
        }
    }
    for k in 0..a.crowd {
        let at = a.warmup + a.crowd_at_s + a.crowd_window_s * k as f64 / a.crowd as f64;
        let at = Duration::from_secs_f64(at);
        out.push(Arrival { at, broadcast: a.crowd_broadcast, kind: Kind::Crowd, hold: None, n });
        n += 1;
    }
    out.sort_by_key(|x| x.at);
    out
}

/// A viewer thread's part: steady viewers (number, broadcast) and arrivals.
type Share = (Vec<(usize, usize)>, Vec<Arrival>);

/// The relay's memory at each phase of the run.
#[derive(Debug, Default, Clone, Copy)]
struct Phases {
    idle: u64,
    announced: u64,
    connected: u64,
    subscribed: u64,
}

/// Deals steady viewers round robin to their threads and arrivals to theirs, and says what
/// the run will be; returns the shares, the number of viewer threads and of broadcasts watched.
fn deal(a: &EdgeArgs, steady: &[usize], joins: &[Arrival]) -> (Vec<Share>, usize, usize) {
    let steady_threads = a.threads.min(a.viewers);
    let arrival_threads = a.arrival_threads.min(joins.len());
    let threads = steady_threads + arrival_threads;
    let mut shares: Vec<Share> = (0..threads).map(|_| Default::default()).collect();
    for (n, &b) in steady.iter().enumerate() {
        shares[n % steady_threads].0.push((n, b));
    }
    for (k, j) in joins.iter().enumerate() {
        shares[steady_threads + k % arrival_threads].1.push(*j);
    }
    let watched = {
        let mut w: Vec<bool> = vec![false; a.broadcasts];
        steady.iter().chain(joins.iter().map(|j| &j.broadcast)).for_each(|&b| w[b] = true);
        w.iter().filter(|&&x| x).count()
    };
    eprintln!(
        "moq-bench edge: {} over {:?}, drafts {:?}: {} broadcasts ({} watched) from {} publisher(s); {} viewers, \
         {} churn arrivals, crowd of {}; {steady_threads} viewer and {arrival_threads} arrival thread(s)",
        a.relay,
        a.transports,
        a.drafts.iter().map(|v| v.alpn()).collect::<Vec<_>>(),
        a.broadcasts,
        watched,
        a.publishers,
        a.viewers,
        joins.iter().filter(|j| j.kind == Kind::Churn).count(),
        a.crowd,
    );
    (shares, threads, watched)
}

/// Runs `moq-bench edge`; true when delivery was intact and every joiner got an object.
pub fn run(a: &EdgeArgs) -> anyhow::Result<bool> {
    check_args(a)?;
    let plan = plan(a)?;
    let cdf = zipf_cdf(a.broadcasts, a.zipf);
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let steady = steady_broadcasts(a.viewers, &cdf, &mut rng);
    let joins = arrivals(a, &cdf, &mut rng);
    let crowd_us = (a.crowd > 0).then(|| {
        let from = micros(Duration::from_secs_f64(a.warmup + a.crowd_at_s));
        (from, from + micros(Duration::from_secs_f64(a.crowd_window_s + 1.0)))
    });
    let layout = Layout {
        plan: &plan,
        relays: relays(a)?,
        drafts: a.drafts.clone(),
        crowd_us,
        crowd_idle: a.crowd_idle,
    };
    let (shares, threads, watched) = deal(a, &steady, &joins);
    let ctl = Control::default();
    let mut relay = RelayFigures::default();
    let mut phases = Phases::default();
    let rss = || a.relay_pid.and_then(procfs::sample).map_or(0, |s| s.rss_bytes);
    if let Some(pid) = a.relay_pid {
        relay.start = procfs::sample(pid).with_context(|| format!("reading /proc/{pid}"))?;
        phases.idle = relay.start.rss_bytes;
    }
    let gen_cpu_before = procfs::own_cpu_s();
    let (published, tallies) = std::thread::scope(|scope| -> anyhow::Result<(PubReport, Vec<EdgeTally>)> {
        let (plan, ctl, layout) = (&plan, &ctl, &layout);
        let publisher = std::thread::Builder::new()
            .name("publisher".into())
            .spawn_scoped(scope, move || load::publish(plan, ctl))?;
        let mut handles = Vec::new();
        for (j, (steady, joins)) in shares.into_iter().enumerate() {
            let h = std::thread::Builder::new()
                .name(format!("viewers-{j}"))
                .spawn_scoped(scope, move || view(layout, ctl, steady, joins))?;
            handles.push((format!("viewer thread {j}"), h));
        }
        let failed = |h: &Vec<(String, std::thread::ScopedJoinHandle<'_, _>)>| {
            publisher.is_finished() || h.iter().any(|(_, h)| h.is_finished())
        };
        let by = Instant::now() + plan.timeout * 2;
        // Each phase: wait for the threads, let the relay settle, sample its memory.
        let phase = |done: &dyn Fn() -> bool| -> bool {
            while !done() && !failed(&handles) && Instant::now() < by {
                std::thread::sleep(Duration::from_millis(5));
            }
            std::thread::sleep(Duration::from_millis(300));
            done()
        };
        let ok = phase(&|| ctl.announced.load(Ordering::SeqCst))
            && {
                phases.announced = rss();
                ctl.connect.store(true, Ordering::SeqCst);
                phase(&|| ctl.connected.load(Ordering::SeqCst) == threads)
            }
            && {
                phases.connected = rss();
                ctl.subscribe.store(true, Ordering::SeqCst);
                phase(&|| ctl.ready.load(Ordering::SeqCst) == threads + 1)
            };
        if ok {
            phases.subscribed = rss();
            relay.rss_max = relay.rss_max.max(phases.subscribed);
            crate::supervise(a.relay_pid, a.quiet, plan, ctl, &mut relay, threads, || failed(&handles));
        }
        ctl.stop.store(true, Ordering::SeqCst);
        let published = publisher.join().map_err(|_| anyhow::anyhow!("publisher thread panicked"))?;
        let tallies = load::join_all(handles);
        match (published, tallies) {
            (Ok(p), Ok(t)) => Ok((p, t)),
            (Err(e), Ok(_)) => Err(e.context("publisher thread")),
            (Ok(_), Err(e)) => Err(e),
            (Err(p), Err(e)) => Err(anyhow::anyhow!("publisher thread: {p:#}\n  {e:#}")),
        }
    })?;
    let gen_cpu_s = procfs::own_cpu_s() - gen_cpu_before;
    let mut total = EdgeTally::default();
    let busiest = tallies.iter().map(|t| t.cpu_s / t.wall_s.max(1e-9)).fold(0.0, f64::max);
    for t in &tallies {
        total.merge(t);
    }
    report::report(
        a,
        &plan,
        Report { t: &total, published: &published, gen_cpu_s, busiest, relay: &relay, phases, watched },
    )
}
