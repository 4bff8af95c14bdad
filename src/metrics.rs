//! The operations endpoint: Prometheus text metrics (`/metrics`), liveness (`/healthz`) and
//! readiness (`/readyz`) over plain HTTP/1.1 on one small thread. Every number is read from
//! per-core counters and gauges that their core alone writes (relaxed atomics, updated once
//! per turn) and merged here, on scrape; the latency histogram is merged by each core about
//! once a second under a lock no data path takes.

use std::fmt::Write as _;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::host::RelayGauges;
use relay::RelayStats;
use runtime::{ShardStats, ShutdownTrigger};

/// What the endpoint reads.
#[derive(Clone)]
pub struct Sources {
    pub cores: usize,
    pub shards: Arc<[ShardStats]>,
    pub relay: Arc<[RelayGauges]>,
    /// Readiness turns 503 once shutdown (the GOAWAY drain) has begun.
    pub shutdown: ShutdownTrigger,
    /// The namespace directory's figures, when one is configured.
    pub directory: Option<Arc<crate::host::redis_client::DirectoryStats>>,
    /// The web listener's counters, when it runs.
    pub web: Option<Arc<crate::web::WebStats>>,
    /// The event hooks' counters, when hooks are configured.
    pub events: Option<Arc<crate::host::events::EventStats>>,
    /// Admission by the platform's service, when configured.
    pub admission: Option<Arc<crate::host::admission::AdmissionStats>>,
}

/// Binds `addr` and serves on a thread named `metrics`. Returns the bound address.
pub fn serve(addr: SocketAddr, sources: Sources) -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind(addr)?;
    let local = listener.local_addr()?;
    std::thread::Builder::new().name("metrics".into()).spawn(move || {
        for stream in listener.incoming().flatten() {
            if let Err(e) = answer(stream, &sources) {
                tracing::debug!(error = %e, "metrics request");
            }
        }
    })?;
    Ok(local)
}

/// How long one request may take, head and answer together: the endpoint serves one
/// connection at a time, so a client that sends its head a byte at a time holds it this long
/// and no longer.
const REQUEST_DEADLINE: Duration = Duration::from_secs(2);

/// Reads one request (the request line is enough) and answers it; the connection closes.
fn answer(mut stream: TcpStream, sources: &Sources) -> std::io::Result<()> {
    let deadline = Instant::now() + REQUEST_DEADLINE;
    let left = || {
        let d = deadline.saturating_duration_since(Instant::now());
        if d.is_zero() {
            Err(std::io::Error::new(std::io::ErrorKind::TimedOut, "request too slow"))
        } else {
            Ok(d)
        }
    };
    stream.set_write_timeout(Some(REQUEST_DEADLINE))?;
    let mut buf = [0u8; 2048];
    let mut len = 0;
    while len < buf.len() {
        stream.set_read_timeout(Some(left()?))?;
        let n = stream.read(&mut buf[len..])?;
        len += n;
        if n == 0 || buf[..len].windows(4).any(|w| w == b"\r\n\r\n") {
            break;
        }
    }
    let head = String::from_utf8_lossy(&buf[..len]);
    let mut words = head.split_whitespace();
    let (method, path) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
    let path = path.split('?').next().unwrap_or("");
    let (status, kind, body) = match (method, path) {
        ("GET", "/metrics") => ("200 OK", "text/plain; version=0.0.4", render(sources)),
        ("GET", "/healthz") => ("200 OK", "text/plain", "ok\n".to_string()),
        ("GET", "/readyz") if sources.shutdown.is_triggered() => {
            ("503 Service Unavailable", "text/plain", "draining\n".to_string())
        }
        ("GET", "/readyz") => ("200 OK", "text/plain", "ready\n".to_string()),
        ("GET", _) => ("404 Not Found", "text/plain", "not found\n".to_string()),
        _ => ("405 Method Not Allowed", "text/plain", "GET only\n".to_string()),
    };
    let response = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.set_write_timeout(Some(left()?))?;
    stream.write_all(response.as_bytes())
}

/// One metric family: HELP, TYPE, one sample per core (`core` label) and the total.
fn family(out: &mut String, name: &str, kind: &str, help: &str, values: &[u64]) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
    samples(out, name, "", values);
}

/// A family's samples: one per core (`core` label, and `label` when not empty) and the total.
fn samples(out: &mut String, name: &str, label: &str, values: &[u64]) {
    let sep = if label.is_empty() { "" } else { "," };
    for (core, v) in values.iter().enumerate() {
        let _ = writeln!(out, "{name}{{core=\"{core}\"{sep}{label}}} {v}");
    }
    let _ = writeln!(out, "{name}{{core=\"all\"{sep}{label}}} {}", values.iter().sum::<u64>());
}

/// Histogram buckets of relay-added delay, in seconds.
const LATENCY_BUCKETS: [f64; 14] =
    [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0];

/// The Prometheus text exposition of every metric.
/// A family of per-core values: name, type, help, and the field it reads.
type Family<T> = (&'static str, &'static str, &'static str, fn(&T) -> &AtomicU64);

/// The runtime's per-core families, before the admission threshold's line.
const SHARD_FAMILIES: &[Family<ShardStats>] = &[
    ("moq_edge_connections", "gauge", "QUIC connections open.", |x| &x.connections),
    ("moq_edge_handshakes_in_progress", "gauge", "QUIC handshakes not yet complete.", |x| &x.handshakes),
    ("moq_edge_connections_accepted_total", "counter", "QUIC connections accepted (handshakes started).", |x| &x.accepted),
    ("moq_edge_connections_opened_total", "counter", "QUIC connections opened to upstream relays.", |x| &x.connects),
    ("moq_edge_initials_refused_total", "counter", "Initial packets refused (connection cap, bad token, draining, over the admission threshold).", |x| &x.refused),
    ("moq_edge_initials_refused_busy_total", "counter", "Initial packets refused because the core was over its admission threshold (of moq_edge_initials_refused_total).", |x| &x.refused_busy),
    ("moq_edge_core_busy_percent", "gauge", "Share of the last second the core was busy in its turns (not waiting for input), in percent.", |x| &x.busy_pct),
];

/// The runtime's per-core families after it.
const SHARD_FAMILIES_AFTER: &[Family<ShardStats>] = &[
    ("moq_edge_retries_total", "counter", "Stateless Retry packets sent.", |x| &x.retries),
    ("moq_edge_stateless_resets_total", "counter", "Stateless resets sent.", |x| &x.stateless_resets),
    ("moq_edge_udp_datagrams_in_total", "counter", "UDP datagrams received.", |x| &x.datagrams_in),
    ("moq_edge_udp_recv_batches_total", "counter", "recvmmsg calls that returned datagrams (datagrams in / this: datagrams per read).", |x| &x.recv_batches),
    ("moq_edge_udp_datagrams_out_total", "counter", "UDP datagrams sent.", |x| &x.datagrams_out),
    ("moq_edge_udp_trains_out_total", "counter", "Trains of datagrams sent, one GSO send each (datagrams out / this: datagrams per train; a datagram alone is a train).", |x| &x.trains_out),
    ("moq_edge_turns_total", "counter", "Turns of the core's loop.", |x| &x.turns),
    ("moq_edge_connection_services_total", "counter", "Connections serviced in a turn (input, a wake or a timer; the application's I/O, then quiche's output).", |x| &x.services),
    ("moq_edge_connection_idle_services_total", "counter", "Connection services that sent no datagram (of moq_edge_connection_services_total).", |x| &x.idle_services),
    ("moq_edge_pacing_releases_total", "counter", "Connections woken by the end of a pacing delay.", |x| &x.pacing_releases),
    ("moq_edge_udp_bytes_in_total", "counter", "UDP bytes received.", |x| &x.bytes_in),
    ("moq_edge_udp_bytes_out_total", "counter", "UDP bytes sent.", |x| &x.bytes_out),
    ("moq_edge_udp_dropped_total", "counter", "Datagrams dropped (unparseable, unknown version, full mesh queue).", |x| &x.dropped),
    ("moq_edge_mesh_packets_forwarded_total", "counter", "QUIC packets handed to the core owning their connection.", |x| &x.forwarded_out),
    ("moq_edge_mesh_backlog", "gauge", "Messages other cores had queued for this core at its last turn (256 or more: it ran out of budget).", |x| &x.mesh_backlog),
    ("moq_edge_mesh_queued_bytes", "gauge", "Bytes of messages this core has queued for other cores that they have not taken yet (the limit, mesh_queue_mib, is per destination core).", |x| &x.mesh_queued_bytes),
];

/// The relay's per-core state gauges.
const RELAY_FAMILIES: &[Family<RelayGauges>] = &[
    ("moq_edge_sessions", "gauge", "MoQT sessions.", |x| &x.sessions),
    ("moq_edge_subscriptions", "gauge", "Downstream subscriptions and FETCHes in progress.", |x| {
        &x.subscriptions
    }),
    (
        "moq_edge_tracks",
        "gauge",
        "Tracks owned (with held SUBSCRIBEs and upstream FETCHes in progress).",
        |x| &x.tracks,
    ),
    (
        "moq_edge_upstream_subscriptions",
        "gauge",
        "Upstream subscriptions (SUBSCRIBEs sent, PUBLISHes accepted) and upstream FETCHes.",
        |x| &x.upstreams,
    ),
    (
        "moq_edge_namespaces_announced",
        "gauge",
        "Namespaces (broadcasts) announced by this core's sessions with PUBLISH_NAMESPACE.",
        |x| &x.namespaces,
    ),
    ("moq_edge_upstream_links_up", "gauge", "Links to parent relays that are set up.", |x| &x.links_up),
    ("moq_edge_cache_bytes", "gauge", "Bytes of objects cached.", |x| &x.cache_bytes),
];

pub fn render(s: &Sources) -> String {
    let mut out = String::with_capacity(8192);
    let cores = s.cores.min(s.shards.len()).min(s.relay.len());
    let shard = |f: fn(&ShardStats) -> &AtomicU64| -> Vec<u64> {
        s.shards[..cores].iter().map(|st| f(st).load(Ordering::Relaxed)).collect()
    };
    let relay = |f: fn(&RelayGauges) -> &AtomicU64| -> Vec<u64> {
        s.relay[..cores].iter().map(|g| f(g).load(Ordering::Relaxed)).collect()
    };
    let m = &mut out;
    for (name, kind, help, field) in SHARD_FAMILIES {
        family(m, name, kind, help, &shard(*field));
    }
    let threshold = s.shards.first().map_or(0, |st| st.admission_busy_pct.load(Ordering::Relaxed));
    let _ = writeln!(
        m,
        "# HELP moq_edge_admission_busy_threshold_percent A core busier than this refuses new work (0: off).\n\
         # TYPE moq_edge_admission_busy_threshold_percent gauge\nmoq_edge_admission_busy_threshold_percent {threshold}"
    );
    for (name, kind, help, field) in SHARD_FAMILIES_AFTER {
        family(m, name, kind, help, &shard(*field));
    }
    for (name, kind, help, field) in RELAY_FAMILIES {
        family(m, name, kind, help, &relay(*field));
    }
    // The relay's counters, from their one table (`relay::RelayStats::COUNTERS`).
    let per_core: Vec<[u64; RelayStats::N]> = s.relay[..cores].iter().map(RelayGauges::counters).collect();
    let counter = |i: usize| -> Vec<u64> { per_core.iter().map(|c| c[i]).collect() };
    for (i, def) in RelayStats::COUNTERS.iter().enumerate() {
        let first = RelayStats::COUNTERS.iter().position(|d| d.family == def.family) == Some(i);
        if first {
            let _ = writeln!(m, "# HELP {} {}\n# TYPE {} counter", def.family, def.help, def.family);
        }
        samples(m, def.family, def.label, &counter(i));
    }
    let total = |family: &str| -> u64 {
        let i = RelayStats::COUNTERS.iter().position(|d| d.family == family);
        i.map_or(0, |i| counter(i).iter().sum())
    };
    let (hits, misses) =
        (total("moq_edge_fetch_cache_hits_total"), total("moq_edge_fetch_cache_misses_total"));
    let ratio = if hits + misses == 0 { 0.0 } else { hits as f64 / (hits + misses) as f64 };
    let _ = writeln!(
        m,
        "# HELP moq_edge_fetch_cache_hit_ratio Share of FETCHes answered wholly from the cache.\n\
         # TYPE moq_edge_fetch_cache_hit_ratio gauge\nmoq_edge_fetch_cache_hit_ratio {ratio}"
    );
    latency(m, &s.relay[..cores]);
    if let Some(d) = &s.directory {
        directory(m, d);
    }
    if let Some(w) = &s.web {
        web(m, w);
    }
    if let Some(e) = &s.events {
        events(m, e);
    }
    if let Some(a) = &s.admission {
        admission(m, a);
    }
    if let Some(rss) = resident_bytes() {
        let _ = writeln!(
            m,
            "# HELP process_resident_memory_bytes Resident memory of the relay process.\n\
             # TYPE process_resident_memory_bytes gauge\nprocess_resident_memory_bytes {rss}"
        );
    }
    out
}

/// The process's resident set, from Linux's `/proc/self/status` (`VmRSS`, in kB).
pub fn resident_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let kb = status.lines().find_map(|l| l.strip_prefix("VmRSS:"))?.trim().strip_suffix("kB")?;
    kb.trim().parse::<u64>().ok().map(|k| k * 1024)
}

/// The web listener's families (`crate::web`).
fn web(out: &mut String, w: &crate::web::WebStats) {
    let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
    let _ = writeln!(
        out,
        "# HELP moq_edge_web_connections_total Connections to the web listener (TCP port), by outcome.\n\
         # TYPE moq_edge_web_connections_total counter"
    );
    for (outcome, n) in [
        ("served", &w.accepted),
        ("refused_full", &w.refused_full),
        ("refused_client_share", &w.refused_client),
    ] {
        let _ = writeln!(out, "moq_edge_web_connections_total{{outcome=\"{outcome}\"}} {}", get(n));
    }
    let _ = writeln!(
        out,
        "# HELP moq_edge_web_deadlines_missed_total Web connections closed because the TLS handshake, the request head or the answer missed its deadline.\n\
         # TYPE moq_edge_web_deadlines_missed_total counter\nmoq_edge_web_deadlines_missed_total {}",
        get(&w.timed_out)
    );
    let _ = writeln!(
        out,
        "# HELP moq_edge_web_upgrades_total WebSocket connections handed to the cores.\n\
         # TYPE moq_edge_web_upgrades_total counter\nmoq_edge_web_upgrades_total {}",
        get(&w.upgraded)
    );
}

/// The namespace directory's families (`host::redis_client`).
fn directory(out: &mut String, d: &crate::host::redis_client::DirectoryStats) {
    let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
    let up = u64::from(d.up.load(Ordering::Relaxed));
    let gauge = |out: &mut String, name: &str, help: &str, v: u64| {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {v}");
    };
    gauge(
        out,
        "moq_edge_directory_up",
        "Whether the namespace directory (Redis) answered the last command.",
        up,
    );
    let _ = writeln!(
        out,
        "# HELP moq_edge_directory_lookups_total Lookups of namespaces no local publisher or route serves.\n\
         # TYPE moq_edge_directory_lookups_total counter"
    );
    for (result, n) in [("hit", &d.hits), ("miss", &d.misses), ("error", &d.errors)] {
        let _ = writeln!(out, "moq_edge_directory_lookups_total{{result=\"{result}\"}} {}", get(n));
    }
    let registered = get(&d.registered);
    gauge(out, "moq_edge_directory_registered", "Namespaces this relay holds in the directory.", registered);
}

/// The event hooks' families (`host::events`).
fn events(out: &mut String, e: &crate::host::events::EventStats) {
    let families: [(&str, &str, &str, &AtomicU64); 5] = [
        ("moq_edge_events_emitted_total", "counter", "Events made for the event hooks.", &e.emitted),
        ("moq_edge_events_delivered_total", "counter", "Events the hooks' sink took.", &e.delivered),
        (
            "moq_edge_events_dropped_total",
            "counter",
            "Events dropped: the oldest while the hooks' queue was full (the sink down or slow).",
            &e.dropped,
        ),
        (
            "moq_edge_events_failures_total",
            "counter",
            "Deliveries to the hooks' sink that failed.",
            &e.failures,
        ),
        ("moq_edge_events_queued", "gauge", "Events waiting for the hooks' sink.", &e.queued),
    ];
    for (name, kind, help, v) in families {
        let _ =
            writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {}", v.load(Ordering::Relaxed));
    }
}

/// Admission by the platform's service (`host::admission`).
fn admission(out: &mut String, a: &crate::host::admission::AdmissionStats) {
    let families: [(&str, &str, &AtomicU64); 5] = [
        ("moq_edge_admission_http_requests_total", "POSTs to the platform's admission service.", &a.requests),
        (
            "moq_edge_admission_http_cached_total",
            "Admission questions answered from the cache or joined to one in flight.",
            &a.cached,
        ),
        (
            "moq_edge_admission_http_failures_total",
            "Admission POSTs that failed, or questions a full queue turned away.",
            &a.failures,
        ),
        (
            "moq_edge_admission_http_allowed_total",
            "Sessions admitted (or readmitted) by the platform.",
            &a.allowed,
        ),
        (
            "moq_edge_admission_http_denied_total",
            "Sessions refused (or ended at revalidation) by the platform or the failure policy.",
            &a.denied,
        ),
    ];
    for (name, help, v) in families {
        let _ = writeln!(
            out,
            "# HELP {name} {help}\n# TYPE {name} counter\n{name} {}",
            v.load(Ordering::Relaxed)
        );
    }
}

/// `moq_edge_relay_delay_seconds`: the cores' histograms merged.
fn latency(out: &mut String, gauges: &[RelayGauges]) {
    let mut all = relay::latency_histogram();
    for g in gauges {
        if let Ok(h) = g.latency.lock() {
            if let Some(h) = h.as_ref() {
                let _ = all.add(h);
            }
        }
    }
    let _ = writeln!(
        out,
        "# HELP moq_edge_relay_delay_seconds Delay the relay adds: an object's arrival at its ingest core to its write at a subscriber core.\n\
         # TYPE moq_edge_relay_delay_seconds histogram"
    );
    for le in LATENCY_BUCKETS {
        let count = all.count_between(0, (le * 1e6) as u64);
        let _ = writeln!(out, "moq_edge_relay_delay_seconds_bucket{{le=\"{le}\"}} {count}");
    }
    let n = all.len();
    let sum = all.mean() * n as f64 / 1e6;
    let _ = writeln!(out, "moq_edge_relay_delay_seconds_bucket{{le=\"+Inf\"}} {n}");
    let _ = writeln!(out, "moq_edge_relay_delay_seconds_sum {sum}\nmoq_edge_relay_delay_seconds_count {n}");
    for (q, name) in [(0.5, "0.5"), (0.99, "0.99"), (0.999, "0.999")] {
        let v = all.value_at_quantile(q) as f64 / 1e6;
        let _ = writeln!(out, "moq_edge_relay_delay_quantile_seconds{{quantile=\"{name}\"}} {v}");
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn families_carry_each_core_and_the_total_and_the_histogram_merges() {
        let shards: Arc<[ShardStats]> = (0..2).map(|_| ShardStats::default()).collect();
        let relay: Arc<[RelayGauges]> = (0..2).map(|_| RelayGauges::default()).collect();
        let at = |family: &str, label: &str| {
            RelayStats::COUNTERS.iter().position(|d| d.family == family && d.label == label).unwrap()
        };
        relay[0].counters[at("moq_edge_objects_out_total", "")].store(5, Ordering::Relaxed);
        relay[1].counters[at("moq_edge_objects_out_total", "")].store(7, Ordering::Relaxed);
        relay[1].counters[at("moq_edge_fetch_cache_hits_total", "")].store(3, Ordering::Relaxed);
        relay[1].counters[at("moq_edge_fetch_cache_misses_total", "")].store(1, Ordering::Relaxed);
        relay[0].counters[at("moq_edge_resets_total", "reason=\"backlog\"")].store(2, Ordering::Relaxed);
        for (g, us) in [(&relay[0], 150u64), (&relay[1], 3000)] {
            let mut h = relay::latency_histogram();
            h.record(us).unwrap();
            *g.latency.lock().unwrap() = Some(h);
        }
        let trigger = runtime::ShutdownTrigger::detached();
        let text = render(&Sources {
            cores: 2,
            shards,
            relay,
            shutdown: trigger,
            directory: None,
            web: None,
            events: None,
            admission: None,
        });
        assert!(text.contains("moq_edge_objects_out_total{core=\"0\"} 5"), "{text}");
        assert!(text.contains("moq_edge_objects_out_total{core=\"1\"} 7"), "{text}");
        assert!(text.contains("moq_edge_objects_out_total{core=\"all\"} 12"), "{text}");
        assert!(text.contains("moq_edge_fetch_cache_hit_ratio 0.75"), "{text}");
        // Two counters of one family: one HELP, told apart by their label.
        assert_eq!(text.matches("# HELP moq_edge_resets_total ").count(), 1, "{text}");
        assert!(text.contains("moq_edge_resets_total{core=\"all\",reason=\"backlog\"} 2"), "{text}");
        assert!(text.contains("moq_edge_resets_total{core=\"all\",reason=\"delivery_timeout\"} 0"), "{text}");
        assert!(text.contains("moq_edge_relay_delay_seconds_bucket{le=\"0.00025\"} 1"), "{text}");
        assert!(text.contains("moq_edge_relay_delay_seconds_bucket{le=\"0.005\"} 2"), "{text}");
        assert!(text.contains("moq_edge_relay_delay_seconds_count 2"), "{text}");
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let value = line.rsplit(' ').next().unwrap();
            assert!(value.parse::<f64>().is_ok(), "not a sample: {line}");
        }
    }
}
