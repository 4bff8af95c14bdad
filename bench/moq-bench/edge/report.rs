//! The edge scenario's report: a table on stdout and, with `--json`, the same as JSON.

use std::time::Duration;

use anyhow::Context;
use serde_json::json;

use super::viewers::EdgeTally;
use super::{EdgeArgs, Phases};
use crate::load::{Plan, PubReport};
use crate::RelayFigures;

pub(super) struct Report<'a> {
    pub(super) t: &'a EdgeTally,
    pub(super) published: &'a PubReport,
    pub(super) gen_cpu_s: f64,
    /// The busiest viewer thread's CPU over its wall time.
    pub(super) busiest: f64,
    pub(super) relay: &'a RelayFigures,
    pub(super) phases: Phases,
    pub(super) watched: usize,
}

fn mib(b: f64) -> f64 {
    b / 1048576.0
}

/// Prints the report and writes it as JSON with `--json`; true when delivery was intact and
/// every joiner got an object.
pub(super) fn report(a: &EdgeArgs, plan: &Plan, r: Report<'_>) -> anyhow::Result<bool> {
    let b = &r.t.base;
    let secs = plan.duration.as_secs_f64();
    let intact = b.lost == 0 && b.duplicated == 0 && b.reordered == 0 && b.malformed == 0;
    let joined = r.t.joiners_without_object == 0 && r.t.failed_connects == 0 && b.subscribe_errors == 0;
    let handshakes = traffic(a, secs, &r, intact, joined);
    let generator = generator(plan, &r);
    let memory = relay(a, secs, &r);
    if let Some(path) = &a.json {
        let doc = json_doc(a, secs, &r, Verdicts { intact, handshakes, generator, memory });
        std::fs::write(path, serde_json::to_string_pretty(&doc)? + "\n")
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(intact && joined)
}

/// What the text report worked out, for the JSON one.
struct Verdicts {
    intact: bool,
    handshakes: Option<f64>,
    generator: serde_json::Value,
    memory: Memory,
}

/// The relay's memory per idle connection and per viewer (KiB), its growth in the run, and its
/// CPU per delivered GB.
struct Memory {
    idle_conn: f64,
    viewer: f64,
    grown: u64,
    cpu_per_gb: Option<f64>,
}

/// Prints the load, delivery, integrity, joiners and the latency, join and setup times;
/// returns the crowd's handshakes per second.
fn traffic(a: &EdgeArgs, secs: f64, r: &Report<'_>, intact: bool, joined: bool) -> Option<f64> {
    let (t, watched) = (r.t, r.watched);
    let b = &t.base;
    println!("\n== moq-bench edge: {} ==", a.relay);
    println!(
        "load        {} broadcasts ({watched} watched) of video {}/s ({} B keyframe, {} B frames, {} per group) and \
         audio {}/s × {} B; {} viewers (Zipf s = {}), churn {}/s staying {} s, crowd of {} in {} s",
        a.broadcasts,
        a.video_rate,
        a.keyframe_size,
        a.frame_size,
        a.gop,
        a.audio_rate,
        a.audio_size,
        a.viewers,
        a.zipf,
        a.churn,
        a.hold_s,
        a.crowd,
        a.crowd_window_s
    );
    let gb = b.delivered_bytes as f64 / 1e9;
    println!(
        "delivered   {} objects, {} bytes in {secs:.1} s: {:.0} objects/s, {:.3} Gbit/s",
        b.delivered_objects,
        b.delivered_bytes,
        b.delivered_objects as f64 / secs,
        gb * 8.0 / secs
    );
    println!(
        "integrity   expected {}, delivered {} ({:.4}), lost {}, duplicated {}, reordered {}, malformed {}, \
         streams reset {} => {}",
        b.expected,
        b.expected - b.lost,
        if b.expected > 0 { (b.expected - b.lost) as f64 / b.expected as f64 } else { 1.0 },
        b.lost,
        b.duplicated,
        b.reordered,
        b.malformed,
        b.resets,
        if intact { "OK" } else { "FAILED" }
    );
    println!(
        "joiners     {} arrived, {} failed to connect, {} subscribe errors, {} got no object => {}",
        t.joiners,
        t.failed_connects,
        b.subscribe_errors,
        t.joiners_without_object,
        if joined { "OK" } else { "FAILED" }
    );
    println!("latency µs  steady viewers: {}", crate::line(&b.latency));
    if a.crowd > 0 {
        println!("            before the crowd: {}", crate::line(&t.latency_before));
        println!("            while it arrives: {}", crate::line(&t.latency_crowd));
    }
    println!("join µs     churn: {}", crate::line(&t.join_churn));
    println!("            crowd: {}", crate::line(&t.join_crowd));
    println!("setup µs    churn: {}", crate::line(&t.setup_churn));
    println!("            crowd: {}", crate::line(&t.setup_crowd));
    let handshakes = t.crowd_span.map(|(a, b)| t.crowd_ready as f64 / (b - a).as_secs_f64().max(1e-3));
    if let Some(h) = handshakes {
        println!(
            "            crowd: {} set up at {h:.0} handshakes/s (first opened to last set up; offered {:.0}/s)",
            t.crowd_ready,
            a.crowd as f64 / a.crowd_window_s
        );
    }
    handshakes
}

/// Prints whether the generator kept up; returns its figures for the JSON report.
fn generator(plan: &Plan, r: &Report<'_>) -> serde_json::Value {
    let Report { t, published, gen_cpu_s, busiest, .. } = *r;
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let busy = gen_cpu_s / (plan.warmup + plan.duration).as_secs_f64();
    let kept_up = busiest < 0.9 && busy < 0.9 * cpus as f64 && published.max_lag < Duration::from_millis(50);
    println!(
        "generator   {gen_cpu_s:.2} CPU s ({busy:.2} of {cpus} CPU(s)); busiest viewer thread {:.0} % busy, publisher \
         {:.0} % busy and at most {:.1} ms behind; joiners' connects held their thread {:.0} ms (longest {:.1} ms) \
         => {}",
        busiest * 100.0,
        published.cpu_s / published.wall_s.max(1e-9) * 100.0,
        published.max_lag.as_secs_f64() * 1e3,
        t.blocked.as_secs_f64() * 1e3,
        t.blocked_max.as_secs_f64() * 1e3,
        if kept_up { "kept up" } else { "SATURATED: the figures above are the generator's, not the relay's" }
    );
    json!({
        "cpu_s": gen_cpu_s,
        "cpus": cpus,
        "busiest_viewer_thread": busiest,
        "publisher_busy": published.cpu_s / published.wall_s.max(1e-9),
        "publisher_max_lag_ms": published.max_lag.as_secs_f64() * 1e3,
        "connect_blocked_ms": t.blocked.as_secs_f64() * 1e3,
        "kept_up": kept_up,
    })
}

/// Prints the relay's CPU and memory at each phase.
fn relay(a: &EdgeArgs, secs: f64, r: &Report<'_>) -> Memory {
    let Report { relay, phases, .. } = *r;
    let b = &r.t.base;
    let gb = b.delivered_bytes as f64 / 1e9;
    let cpu_per_gb = relay.window_cpu_s.filter(|_| gb > 0.0).map(|s| s / gb);
    let per = |d: u64, n: usize| if n == 0 { 0.0 } else { d as f64 / n as f64 / 1024.0 };
    let (idle_conn, viewer) = (
        per(phases.connected.saturating_sub(phases.announced), a.viewers),
        per(phases.subscribed.saturating_sub(phases.connected), a.viewers),
    );
    let grown = relay.rss_max.saturating_sub(phases.subscribed);
    if let Some(pid) = a.relay_pid {
        println!(
            "relay {pid}   CPU {} in the window: {} per delivered GB, {} µs per delivered object",
            relay.window_cpu_s.map_or("n/a".into(), |s| format!("{s:.2} s ({:.2} cores)", s / secs)),
            cpu_per_gb.map_or("n/a".into(), |c| format!("{c:.2} CPU s")),
            relay
                .window_cpu_s
                .map_or("n/a".into(), |s| format!("{:.2}", s * 1e6 / b.delivered_objects.max(1) as f64))
        );
        println!(
            "            RSS {:.1} MiB idle, {:.1} with the publishers, {:.1} with the viewers connected \
             ({idle_conn:.1} KiB per idle connection), {:.1} subscribed ({viewer:.1} KiB per viewer), {:.1} max \
             (+{:.1} MiB in the run: caches, arrivals)",
            mib(phases.idle as f64),
            mib(phases.announced as f64),
            mib(phases.connected as f64),
            mib(phases.subscribed as f64),
            mib(relay.rss_max as f64),
            mib(grown as f64)
        );
    }
    Memory { idle_conn, viewer, grown, cpu_per_gb }
}

fn json_doc(a: &EdgeArgs, secs: f64, r: &Report<'_>, v: Verdicts) -> serde_json::Value {
    let Report { t, relay, phases, watched, .. } = *r;
    let b = &t.base;
    let pct = crate::percentiles;
    let mut doc = json!({
        "scenario": "edge",
        "relay": a.relay,
        "transports": a.transports,
        "drafts": a.drafts.iter().map(|v| v.alpn()).collect::<Vec<_>>(),
        "broadcasts": a.broadcasts,
        "watched": watched,
        "viewers": a.viewers,
        "churn_per_s": a.churn,
        "crowd": a.crowd,
        "duration_s": secs,
        "delivered_objects": b.delivered_objects,
        "delivered_bytes": b.delivered_bytes,
        "expected": b.expected,
        "lost": b.lost,
        "duplicated": b.duplicated,
        "reordered": b.reordered,
        "malformed": b.malformed,
        "streams_reset": b.resets,
        "subscribe_errors": b.subscribe_errors,
        "joiners": t.joiners,
        "failed_connects": t.failed_connects,
        "joiners_without_object": t.joiners_without_object,
        "intact": v.intact,
        "latency_us": pct(&b.latency),
        "latency_before_crowd_us": pct(&t.latency_before),
        "latency_during_crowd_us": pct(&t.latency_crowd),
        "join_churn_us": pct(&t.join_churn),
        "join_crowd_us": pct(&t.join_crowd),
        "setup_churn_us": pct(&t.setup_churn),
        "setup_crowd_us": pct(&t.setup_crowd),
        "crowd_handshakes_per_s": v.handshakes,
    });
    doc["generator"] = v.generator;
    doc["relay_cpu_s"] = json!(relay.window_cpu_s);
    doc["relay_cpu_s_per_gb"] = json!(v.memory.cpu_per_gb);
    doc["relay_rss"] = json!({
        "idle": phases.idle,
        "announced": phases.announced,
        "connected": phases.connected,
        "subscribed": phases.subscribed,
        "max": relay.rss_max,
        "per_idle_connection_kib": v.memory.idle_conn,
        "per_viewer_kib": v.memory.viewer,
        "run_growth": v.memory.grown,
    });
    doc
}
