//! moq-bench: a load generator for any MoQT relay (draft-16, -18, -20 or -22, by URL), built on
//! moq-edge's client. Publishers send time-stamped, sequence-numbered objects at a fixed rate;
//! subscribers check every arrival (lost, duplicated, reordered within a stream) and measure
//! publish → receive latency; with `--relay-pid` the relay's CPU time and memory are read
//! from /proc. Results: a live progress line, a table, and `--json FILE`.
//! See bench/README.md for what each figure means and the reference results.

mod check;
mod edge;
mod load;
mod procfs;

use std::io::Write;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use bytes::Bytes;
use clap::{Args, Parser, Subcommand};
use hdrhistogram::Histogram;
use moq_edge::client::cli::{parse_draft, parse_relay};
use moq_edge::client::stamp::{now_micros, parse_namespace, STAMP_LEN};
use moq_edge::wire::model::{FullTrackName, GroupOrder, TrackNamespace};
use moq_edge::wire::Version;
use serde_json::json;

use check::Tally;
use load::{Control, Member, Plan, PubReport, TrackSpec};
use procfs::ProcSample;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Debug, Parser)]
#[command(
    name = "moq-bench",
    version,
    about = "Load-test a MoQT relay: fan-out, many tracks, subscriber churn, late join",
    long_about = "Load-test a MoQT relay (any implementation, draft-16, -18, -20 or -22).\n\n\
        Publishers send objects whose payload starts with a sequence number and the send time; \
        subscribers count lost, duplicated and reordered objects and the publish-to-receive \
        latency. Publishers and subscribers run in this process (subscribers on --threads \
        threads), so run it on cores the relay does not use (taskset). With --relay-pid the \
        relay's CPU seconds, RSS and CPU cycles per delivered byte are measured too.\n\n\
        Exit status: 0 when no object was lost (unless --datagrams), duplicated or reordered; \
        1 otherwise; 2 when the run could not be made."
)]
struct Cli {
    #[command(subcommand)]
    scenario: Scenario,
}

#[derive(Debug, Subcommand)]
enum Scenario {
    /// P publishers, T tracks (track t published by publisher t mod P), S subscriber
    /// connections per track, each subscribed to its one track for the whole run.
    Fanout(Common),
    /// T tracks; S subscriber connections, each subscribed to every track.
    Tracks(Common),
    /// S subscribers per track in waves: connect, subscribe, stay --hold-ms, unsubscribe,
    /// close, again until the run ends. Measures subscribe and join times under churn.
    Churn {
        #[command(flatten)]
        common: Common,
        /// How long each subscriber stays before leaving, in milliseconds.
        #[arg(long, default_value_t = 1000)]
        hold_ms: u64,
    },
    /// An edge's day: broadcasts of video and audio, viewers spread over them by a Zipf law,
    /// churn, a flash crowd, a mix of transports and drafts (see bench/README.md).
    Edge(edge::EdgeArgs),
    /// S subscribers per track join one at a time, spread over the first 80% of the window,
    /// while the tracks run. Measures SUBSCRIBE → first object and how much of the group in
    /// progress a joiner misses (0 once the relay serves the group from its cache).
    LateJoin(Common),
}

#[derive(Debug, Args)]
struct Common {
    /// The relay: moqt://host:port (or host:port) over raw QUIC, or https://host:port/path over
    /// WebTransport (HTTP/3) on the same port.
    #[arg(long, default_value = "moqt://127.0.0.1:4443")]
    relay: String,
    /// Where the publishers connect, when not to --relay (a relay tier: publish on one edge,
    /// subscribe on another that reaches it through their parent).
    #[arg(long, value_name = "URL")]
    publish_relay: Option<String>,
    /// MoQT draft: 14, 16, 18, 20 or 22.
    #[arg(long, default_value = "16", value_parser = parse_draft)]
    draft: Version,
    /// Congestion control of the bench's QUIC connections (publishers and subscribers): cubic,
    /// reno or bbr2, as the relay's `--congestion-control`.
    #[arg(long, default_value = "cubic", value_parser = ["cubic", "reno", "bbr2"])]
    congestion_control: String,
    /// Publisher connections.
    #[arg(long, default_value_t = 1)]
    publishers: usize,
    /// Subscriber connections per track (tracks: in all).
    #[arg(long, default_value_t = 10)]
    subscribers: usize,
    /// Tracks.
    #[arg(long, default_value_t = 1)]
    tracks: usize,
    /// Payload bytes per object (at least 16).
    #[arg(long, default_value_t = 1200)]
    object_size: usize,
    /// Objects per second per track.
    #[arg(long, default_value_t = 100.0)]
    rate: f64,
    /// Objects per group.
    #[arg(long, default_value_t = 30)]
    group_size: u64,
    /// Subgroups (streams) per group; Object ID n goes to subgroup n mod this.
    #[arg(long, default_value_t = 1)]
    subgroups: u64,
    /// Send objects as datagrams instead of on subgroup streams (losses then allowed).
    #[arg(long)]
    datagrams: bool,
    /// Seconds measured, after the warm-up.
    #[arg(long, default_value_t = 10.0)]
    duration: f64,
    /// Seconds of load before measuring.
    #[arg(long, default_value_t = 2.0)]
    warmup: f64,
    /// Subscriber threads of the generator; subscriber connections are split evenly over them.
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// Subscriber connections that stop reading their streams after the warm-up (no
    /// stream_recv, so no flow-control credit back to the relay) while QUIC still
    /// acknowledges; fanout, tracks and late-join. The integrity and latency figures are the
    /// other connections'.
    #[arg(long, default_value_t = 0)]
    stall: usize,
    /// The relay's process id: measure its CPU time, RSS and cycles per delivered byte.
    #[arg(long)]
    relay_pid: Option<u32>,
    /// Clock of the relay's CPUs in GHz, to turn CPU seconds into cycles (default: the
    /// "cpu MHz" of /proc/cpuinfo).
    #[arg(long)]
    cpu_ghz: Option<f64>,
    /// Also write the results as JSON to this file.
    #[arg(long)]
    json: Option<std::path::PathBuf>,
    /// Namespace of the bench's tracks (default: bench/<this process id>).
    #[arg(long)]
    namespace: Option<String>,
    /// No live progress line.
    #[arg(long)]
    quiet: bool,
    /// Seconds allowed for connecting and for each answer.
    #[arg(long, default_value_t = 30)]
    timeout_s: u64,
    /// The subscribers' Group Order: `publisher` (no Group Order parameter: the publisher's
    /// preference), `ascending` or `descending` (newest group first: what a live player asks
    /// for, draft-22 §5.1).
    #[arg(long, default_value = "publisher", value_parser = ["publisher", "ascending", "descending"])]
    group_order: String,
    /// The subscribers acknowledge every this many packets (or after 25 ms) instead of at
    /// every write, which with quiche is every packet; 2 is RFC 9000 §13.2.2's
    /// recommendation (and what bench/floor's model of a subscriber does), browsers
    /// acknowledge less often still. The publishers write at every read.
    #[arg(long, default_value_t = 1)]
    ack_every: u32,
    /// Objects that arrive later than this many ms after they were published are counted as
    /// late in the report (default: the relay's default freshness budget, `--max-lag-ms`).
    #[arg(long, default_value_t = 2000)]
    late_ms: u64,
}

/// What the relay's /proc said over the run.
#[derive(Debug, Default)]
struct RelayFigures {
    start: ProcSample,
    window_cpu_s: Option<f64>,
    rss_max: u64,
    /// (seconds since the start, RSS bytes), about once a second.
    rss_samples: Vec<(f64, u64)>,
}

fn main() {
    let cli = Cli::parse();
    match run(cli) {
        Ok(true) => {}
        Ok(false) => std::process::exit(1),
        Err(e) => {
            eprintln!("moq-bench: {e:#}");
            std::process::exit(2);
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<bool> {
    let (name, common, hold_ms) = match cli.scenario {
        Scenario::Edge(a) => return edge::run(&a),
        Scenario::Fanout(c) => ("fanout", c, 0),
        Scenario::Tracks(c) => ("tracks", c, 0),
        Scenario::Churn { common, hold_ms } => ("churn", common, hold_ms),
        Scenario::LateJoin(c) => ("late-join", c, 0),
    };
    let c = &common;
    check(c)?;
    let plan = plan(c, hold_ms)?;
    let (shares, sessions) = deal(name, c, &plan)?;

    let ctl = Control::default();
    let mut relay = RelayFigures::default();
    if let Some(pid) = c.relay_pid {
        relay.start = procfs::sample(pid).with_context(|| format!("reading /proc/{pid}"))?;
        relay.rss_max = relay.start.rss_bytes;
    }
    let gen_cpu_before = procfs::own_cpu_s();
    eprintln!(
        "moq-bench {name}: {} ({}), {} publisher(s), {sessions} subscriber connection(s) on {} thread(s), \
         {} track(s) × {} objects/s × {} B",
        c.relay,
        c.draft.alpn(),
        c.publishers,
        shares.len(),
        c.tracks,
        c.rate,
        c.object_size
    );

    let (pub_report, tallies) = std::thread::scope(|scope| -> anyhow::Result<(PubReport, Vec<Tally>)> {
        let (plan, ctl) = (&plan, &ctl);
        let publisher = std::thread::Builder::new()
            .name("publisher".into())
            .spawn_scoped(scope, move || load::publish(plan, ctl))?;
        let mut subs = Vec::new();
        let threads = shares.len();
        for (j, share) in shares.into_iter().enumerate() {
            let h = std::thread::Builder::new().name(format!("subscribers-{j}")).spawn_scoped(
                scope,
                move || match name {
                    "churn" => {
                        let tracks: Vec<Vec<usize>> = share.iter().map(|m| m.tracks.clone()).collect();
                        load::churn(plan, ctl, &tracks)
                    }
                    _ => load::subscribe(plan, ctl, share),
                },
            )?;
            subs.push((format!("subscriber thread {j}"), h));
        }
        let failed = |subs: &Vec<(String, std::thread::ScopedJoinHandle<'_, _>)>| {
            publisher.is_finished() || subs.iter().any(|(_, h)| h.is_finished())
        };
        let ready_by = Instant::now() + plan.timeout * 2;
        while ctl.ready.load(Ordering::SeqCst) < threads + 1 && !failed(&subs) && Instant::now() < ready_by {
            std::thread::sleep(Duration::from_millis(5));
        }
        if ctl.ready.load(Ordering::SeqCst) == threads + 1 {
            supervise(c.relay_pid, c.quiet, plan, ctl, &mut relay, threads, || failed(&subs));
        }
        ctl.stop.store(true, Ordering::SeqCst);
        let published = publisher.join().map_err(|_| anyhow::anyhow!("publisher thread panicked"))?;
        let tallies = load::join_all(subs);
        match (published, tallies) {
            (Ok(p), Ok(t)) => Ok((p, t)),
            (Err(e), Ok(_)) => Err(e.context("publisher thread")),
            (Ok(_), Err(e)) => Err(e),
            (Err(p), Err(e)) => Err(anyhow::anyhow!("publisher thread: {p:#}\n  {e:#}")),
        }
    })?;
    let gen_cpu_s = procfs::own_cpu_s() - gen_cpu_before;

    let mut total = Tally::default();
    for t in &tallies {
        total.merge(t);
    }
    let measured = Measured { tally: &total, published: &pub_report, gen_cpu_s, relay: &relay };
    report(name, c, &plan, sessions, measured)
}

/// The options' ranges and how they combine.
fn check(c: &Common) -> anyhow::Result<()> {
    if c.publishers == 0 || c.subscribers == 0 || c.tracks == 0 || c.threads == 0 {
        bail!("--publishers, --subscribers, --tracks and --threads must be at least 1");
    }
    if c.publishers > c.tracks {
        bail!("--publishers ({}) must not exceed --tracks ({})", c.publishers, c.tracks);
    }
    if c.object_size < STAMP_LEN {
        bail!("--object-size must be at least {STAMP_LEN} (the stamp)");
    }
    if !(c.rate > 0.0 && c.rate.is_finite()) || c.group_size == 0 || c.subgroups == 0 {
        bail!("--rate must be positive, --group-size and --subgroups at least 1");
    }
    if !(c.duration > 0.0 && c.warmup >= 0.0 && c.duration.is_finite() && c.warmup.is_finite()) {
        bail!("--duration must be positive and --warmup not negative");
    }
    Ok(())
}

/// What the threads run: the tracks (one namespace per publisher, so that each announces its
/// own), rates and times.
fn plan(c: &Common, hold_ms: u64) -> anyhow::Result<Plan> {
    let ns = c.namespace.clone().unwrap_or_else(|| format!("bench/{}", std::process::id()));
    let namespace = parse_namespace(&ns).map_err(|e| anyhow::anyhow!(e))?;
    // One namespace per publisher, so that each announces its own.
    let tracks = (0..c.tracks)
        .map(|t| {
            let mut fields: Vec<Bytes> = namespace.fields().to_vec();
            fields.push(Bytes::from(format!("p{}", t % c.publishers)));
            FullTrackName { namespace: TrackNamespace(fields), name: Bytes::from(format!("t{t}")) }
        })
        .collect();
    let spec = |t: usize| TrackSpec {
        rate: c.rate,
        group_size: c.group_size,
        first_size: c.object_size,
        object_size: c.object_size,
        publisher: t % c.publishers,
    };
    Ok(Plan {
        peer: parse_relay(&c.relay)?
            .with_congestion_control(&c.congestion_control)
            .with_ack_every(c.ack_every),
        publish_peer: parse_relay(c.publish_relay.as_deref().unwrap_or(&c.relay))?
            .with_congestion_control(&c.congestion_control),
        version: c.draft,
        specs: (0..c.tracks).map(spec).collect(),
        tracks,
        publishers: c.publishers,
        subgroups: c.subgroups,
        datagrams: c.datagrams,
        warmup: Duration::from_secs_f64(c.warmup),
        duration: Duration::from_secs_f64(c.duration),
        hold: Duration::from_millis(hold_ms),
        timeout: Duration::from_secs(c.timeout_s),
        group_order: match c.group_order.as_str() {
            "ascending" => Some(GroupOrder::Ascending),
            "descending" => Some(GroupOrder::Descending),
            _ => None,
        },
    })
}

/// The subscriber connections of scenario `name`, dealt round robin to the threads (the first
/// `--stall` of them stop reading); and how many there are.
fn deal(name: &str, c: &Common, plan: &Plan) -> anyhow::Result<(Vec<Vec<Member>>, usize)> {
    let mut shares: Vec<Vec<Member>> = (0..c.threads).map(|_| Vec::new()).collect();
    let members: Vec<Member> = match name {
        "tracks" => (0..c.subscribers).map(|_| Member::new((0..c.tracks).collect(), None)).collect(),
        _ => {
            let n = c.subscribers * c.tracks;
            (0..n)
                .map(|k| {
                    let join = (name == "late-join")
                        .then(|| plan.warmup + plan.duration.mul_f64(0.8 * (k as f64 + 0.5) / n as f64));
                    Member::new(vec![k % c.tracks], join)
                })
                .collect()
        }
    };
    let sessions = members.len();
    if c.stall > 0 && (name == "churn" || c.stall >= sessions) {
        bail!("--stall needs a scenario other than churn and fewer than {sessions} subscriber connections");
    }
    let mut members = members;
    for m in members.iter_mut().take(c.stall) {
        m.stall = true;
    }
    for (k, m) in members.into_iter().enumerate() {
        shares[k % c.threads].push(m);
    }
    shares.retain(|s| !s.is_empty());
    Ok((shares, sessions))
}

/// The main thread's part of a run: starts it, prints progress, samples the relay at the
/// window's edges, and returns when the run is over (or a thread ended early).
fn supervise(
    relay_pid: Option<u32>,
    quiet: bool,
    plan: &Plan,
    ctl: &Control,
    relay: &mut RelayFigures,
    threads: usize,
    failed: impl Fn() -> bool,
) {
    let t0 = Instant::now();
    let _ = ctl.start.set((t0, now_micros()));
    let (w_start, w_end) = (t0 + plan.warmup, t0 + plan.warmup + plan.duration);
    let grace = w_end + Duration::from_secs(5);
    let mut at_window_start: Option<ProcSample> = None;
    let (mut last_tick, mut last_objects, mut last_bytes) = (t0, 0u64, 0u64);
    loop {
        let now = Instant::now();
        // The relay's sample first: the window's end is sampled before the loop can stop there
        // (a light load drains at once, and the run used to end without its CPU figure).
        if let Some(pid) = relay_pid {
            if let Some(s) = procfs::sample(pid) {
                relay.rss_max = relay.rss_max.max(s.rss_bytes);
                if at_window_start.is_none() && now >= w_start {
                    at_window_start = Some(s);
                }
                if relay.window_cpu_s.is_none() && now >= w_end {
                    relay.window_cpu_s = at_window_start.map(|a| s.cpu_s - a.cpu_s);
                }
            }
        }
        let over = ctl.published.load(Ordering::SeqCst) && ctl.drained.load(Ordering::SeqCst) == threads;
        if (now >= w_end && over) || now >= grace || failed() {
            break;
        }
        if now >= last_tick + Duration::from_secs(1) {
            if let Some(s) = relay_pid.and_then(procfs::sample) {
                relay.rss_samples.push(((now - t0).as_secs_f64(), s.rss_bytes));
            }
            let (o, b) = (ctl.objects.load(Ordering::Relaxed), ctl.bytes.load(Ordering::Relaxed));
            let dt = (now - last_tick).as_secs_f64();
            if !quiet {
                let phase = if now < w_start {
                    "warm-up"
                } else if now < w_end {
                    "measuring"
                } else {
                    "draining"
                };
                eprint!(
                    "\r  {:>5.1} s  {phase:<9}  {:>9.0} objects/s  {:>7.3} Gbit/s   ",
                    (now - t0).as_secs_f64(),
                    (o - last_objects) as f64 / dt,
                    (b - last_bytes) as f64 * 8.0 / dt / 1e9
                );
                let _ = std::io::stderr().flush();
            }
            (last_tick, last_objects, last_bytes) = (now, o, b);
        }
        // Wake for the next tick, or exactly at a window edge.
        let mut next = last_tick + Duration::from_secs(1);
        for edge in [w_start, w_end] {
            if edge > now {
                next = next.min(edge);
            }
        }
        std::thread::sleep(next.saturating_duration_since(Instant::now()).min(Duration::from_millis(100)));
    }
    if !quiet {
        eprintln!();
    }
}

fn percentiles(h: &Histogram<u64>) -> serde_json::Value {
    if h.is_empty() {
        return json!(null);
    }
    json!({
        "count": h.len(),
        "p50": h.value_at_quantile(0.50),
        "p90": h.value_at_quantile(0.90),
        "p99": h.value_at_quantile(0.99),
        "p999": h.value_at_quantile(0.999),
        "max": h.max(),
        "mean": (h.mean() * 10.0).round() / 10.0,
    })
}

fn line(h: &Histogram<u64>) -> String {
    if h.is_empty() {
        return "none".to_string();
    }
    format!(
        "p50 {} | p90 {} | p99 {} | p99.9 {} | max {} (n = {})",
        h.value_at_quantile(0.5),
        h.value_at_quantile(0.9),
        h.value_at_quantile(0.99),
        h.value_at_quantile(0.999),
        h.max(),
        h.len()
    )
}

/// What a run measured: the subscribers' tally, the publisher's, the generator's CPU and the
/// relay process's figures.
struct Measured<'a> {
    tally: &'a Tally,
    published: &'a PubReport,
    gen_cpu_s: f64,
    relay: &'a RelayFigures,
}

/// Prints the run's report (and writes it as JSON with `--json`); true when delivery was intact
/// (nothing duplicated, reordered or malformed; nothing lost, unless over datagrams).
fn report(name: &str, c: &Common, plan: &Plan, sessions: usize, m: Measured<'_>) -> anyhow::Result<bool> {
    let Measured { tally: t, published, gen_cpu_s, relay } = m;
    let secs = plan.duration.as_secs_f64();
    let gbps = t.delivered_bytes as f64 * 8.0 / secs / 1e9;
    let ghz = c.cpu_ghz.or_else(procfs::cpu_ghz);
    let cycles_per_byte = match (relay.window_cpu_s, ghz) {
        (Some(cpu), Some(ghz)) if t.delivered_bytes > 0 && cpu > 0.0 => {
            Some(cpu * ghz * 1e9 / t.delivered_bytes as f64)
        }
        _ => None,
    };
    let lost_allowed = c.datagrams;
    let intact = t.duplicated == 0 && t.reordered == 0 && t.malformed == 0 && (lost_allowed || t.lost == 0);

    print_traffic(name, c, plan, sessions, t, intact, gbps);
    println!(
        "publisher   {} objects sent, fell behind by at most {:.1} ms",
        published.objects_sent,
        published.max_lag.as_secs_f64() * 1e3
    );
    println!("generator   {gen_cpu_s:.2} CPU s (publishers and subscribers, whole run)");
    let relay_json = match c.relay_pid {
        Some(pid) => print_relay(pid, relay, plan.warmup.as_secs_f64(), sessions, secs, cycles_per_byte, ghz),
        None => json!(null),
    };
    if !t.latency.is_empty() {
        let p99 = t.latency.value_at_quantile(0.99);
        println!(
            "targets     latency p99 {p99} µs vs 2000 µs: {} (the target applies at half the saturating load)",
            if p99 < 2000 { "under" } else { "over" }
        );
    }

    if let Some(path) = &c.json {
        let mut doc = json!({
            "scenario": name,
            "relay": c.relay,
            "draft": c.draft.alpn(),
            "publishers": c.publishers,
            "subscriber_sessions": sessions,
            "tracks": c.tracks,
            "object_size": c.object_size,
            "rate": c.rate,
            "group_size": c.group_size,
            "subgroups": c.subgroups,
            "datagrams": c.datagrams,
            "warmup_s": plan.warmup.as_secs_f64(),
            "duration_s": secs,
            "delivered_objects": t.delivered_objects,
            "delivered_bytes": t.delivered_bytes,
            "objects_per_s": t.delivered_objects as f64 / secs,
            "gbps": gbps,
            "expected": t.expected,
            "lost": t.lost,
            "duplicated": t.duplicated,
            "reordered": t.reordered,
            "malformed": t.malformed,
            "streams_reset": t.resets,
            "stalled": t.stalled,
            "subscribe_errors": t.subscribe_errors,
            "intact": intact,
            "latency_us": percentiles(&t.latency),
            "subscribe_ok_us": percentiles(&t.subscribe_ok),
            "join_us": percentiles(&t.join),
            "joins": t.joins,
            "sessions_opened": t.sessions,
            "missed_in_group": t.missed_in_group,
            "publisher_objects_sent": published.objects_sent,
            "publisher_max_lag_ms": published.max_lag.as_secs_f64() * 1e3,
            "generator_cpu_s": gen_cpu_s,
            "cpu_ghz": ghz,
            "relay": relay_json,
            "relay_cpu_s": relay.window_cpu_s,
            "relay_rss_max_bytes": c.relay_pid.map(|_| relay.rss_max),
            "relay_cycles_per_byte": cycles_per_byte,
        });
        // (Beside the literal: one more key there passes serde_json's macro recursion limit.)
        doc["late_ms"] = json!(c.late_ms);
        doc["late_objects"] = json!(late(t, c));
        std::fs::write(path, serde_json::to_string_pretty(&doc)? + "\n")
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(intact)
}

/// The load, the window and what was delivered, with its integrity.
/// Objects that arrived more than `--late-ms` after they were published.
fn late(t: &Tally, c: &Common) -> u64 {
    t.latency.count_between(c.late_ms.saturating_mul(1000).saturating_add(1), u64::MAX)
}

fn print_traffic(name: &str, c: &Common, plan: &Plan, sessions: usize, t: &Tally, intact: bool, gbps: f64) {
    let secs = plan.duration.as_secs_f64();
    let lost_allowed = c.datagrams;
    println!("\n== moq-bench {name}: {} ({}) ==", c.relay, c.draft.alpn());
    println!(
        "load        {} publisher(s), {sessions} subscriber connection(s), {} track(s); {} B objects, {}/s per track, \
         {} per group, {}",
        c.publishers,
        c.tracks,
        c.object_size,
        c.rate,
        c.group_size,
        if c.datagrams { "datagrams".to_string() } else { format!("{} subgroup stream(s) per group", c.subgroups) }
    );
    println!("window      {secs:.1} s measured after {:.1} s warm-up", plan.warmup.as_secs_f64());
    println!(
        "delivered   {} objects, {} bytes: {:.0} objects/s, {gbps:.3} Gbit/s",
        t.delivered_objects,
        t.delivered_bytes,
        t.delivered_objects as f64 / secs
    );
    println!(
        "integrity   expected {}, lost {}{}, duplicated {}, reordered {}, malformed {}, streams reset {}, \
         subscribe errors {}  => {}",
        t.expected,
        t.lost,
        if lost_allowed { " (datagrams: allowed)" } else { "" },
        t.duplicated,
        t.reordered,
        t.malformed,
        t.resets,
        t.subscribe_errors,
        if intact { "OK" } else { "FAILED" }
    );
    if t.stalled > 0 {
        println!(
            "stalled     {} subscriber connection(s) stopped reading after the warm-up (not counted above)",
            t.stalled
        );
    }
    println!("latency µs  {}", line(&t.latency));
    if late(t, c) > 0 {
        println!(
            "late        {} object(s) arrived more than {} ms after they were published",
            late(t, c),
            c.late_ms
        );
    }
    if name == "churn" || name == "late-join" {
        println!("subscribe→OK µs           {}", line(&t.subscribe_ok));
        println!("subscribe→first object µs {}", line(&t.join));
        println!("joins {}, sessions opened {}", t.joins, t.sessions);
        if name == "late-join" && t.joins > 0 {
            println!(
                "missed of the group in progress: {:.1} objects per joiner on average",
                t.missed_in_group as f64 / t.joins as f64
            );
        }
    }
}

/// The relay process `pid`'s CPU and memory in the window (`warmup` s after the start, `secs`
/// long); returns them for the JSON report.
fn print_relay(
    pid: u32,
    relay: &RelayFigures,
    warmup: f64,
    sessions: usize,
    secs: f64,
    cycles_per_byte: Option<f64>,
    ghz: Option<f64>,
) -> serde_json::Value {
    let growth = relay.rss_max.saturating_sub(relay.start.rss_bytes);
    println!(
        "relay {pid}   CPU {} in the window, RSS {:.1} MiB at start, {:.1} MiB max (+{:.1} MiB)",
        relay.window_cpu_s.map_or("n/a".into(), |s| format!("{s:.2} s ({:.2} cores)", s / secs)),
        relay.start.rss_bytes as f64 / 1048576.0,
        relay.rss_max as f64 / 1048576.0,
        growth as f64 / 1048576.0
    );
    match cycles_per_byte {
        _ if relay.window_cpu_s == Some(0.0) => println!(
            "            cycles per byte: n/a (process {pid} used no CPU in the window: is --relay-pid the relay?)"
        ),
        Some(cpb) => println!(
            "            {cpb:.2} cycles per delivered byte (CPU s × {:.2} GHz / bytes); target ≤ 5: {}",
            ghz.unwrap_or(0.0),
            if cpb <= 5.0 { "met".to_string() } else { format!("missed by {:.1}x", cpb / 5.0) }
        ),
        None => println!(
            "            cycles per byte: n/a (no window sample, no clock, or nothing delivered)"
        ),
    }
    if sessions > 0 {
        println!(
            "            RSS growth per subscriber connection {:.1} KiB (target: 2000 on one core under 200 MiB, \
             i.e. ≤ 102 KiB)",
            growth as f64 / 1024.0 / sessions as f64
        );
    }
    // Mean RSS of the first and the last quarter of the samples taken in the measured
    // window, after the warm-up (a leak shows as growth).
    let window = relay.rss_samples.iter().position(|s| s.0 >= warmup).unwrap_or(relay.rss_samples.len());
    let measured = &relay.rss_samples[window..];
    let n = measured.len();
    let mean = |xs: &[(f64, u64)]| xs.iter().map(|x| x.1 as f64).sum::<f64>() / xs.len().max(1) as f64;
    let quarters = (n >= 4).then(|| (mean(&measured[..n / 4]), mean(&measured[n - n / 4..])));
    if let Some((first, last)) = quarters {
        println!(
            "            RSS mean {:.1} MiB in the first quarter of the measured window, {:.1} MiB in the last ({:+.1} %)",
            first / 1048576.0,
            last / 1048576.0,
            (last / first - 1.0) * 100.0
        );
    }
    json!({
        "pid": pid,
        "cpu_s": relay.window_cpu_s,
        "rss_start_bytes": relay.start.rss_bytes,
        "rss_max_bytes": relay.rss_max,
        "rss_samples": relay.rss_samples.iter().map(|(t, b)| json!([t, b])).collect::<Vec<_>>(),
        "rss_first_quarter_bytes": quarters.map(|q| q.0),
        "rss_last_quarter_bytes": quarters.map(|q| q.1),
    })
}
