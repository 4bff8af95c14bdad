//! Event hooks (config `events_url` / `events_file`; ARCHITECTURE.md "Event hooks"): what a
//! platform hears of, as JSON: a broadcast starting and ending at this relay, a track's
//! PUBLISH beginning and ending, a session opening and closing (with its totals).
//!
//! Off the cores: a core hands its raw records to a bounded lock-free queue
//! ([`Hooks::record`] never blocks; when the queue is full the record is dropped and
//! counted). The `moq-edge-events` thread turns records into events (a broadcast starts when
//! the first session, on any core, announces its namespace or publishes a track in it, and
//! ends when the last one withdraws or leaves), numbers them, and appends them to the
//! outgoing queue, which is bounded: when it is full the oldest event is dropped and
//! counted. The `moq-edge-events-out` thread delivers that queue in order, in batches: a JSON
//! array POSTed to the URL (a 2xx answer delivers it; anything else is retried with backoff,
//! the batch kept at the head of the queue), or JSON lines appended to a file or written to
//! standard output.

use std::collections::VecDeque;
use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use ahash::HashMap;
use crossbeam_queue::ArrayQueue;
use relay::directory::RelayEvent;
use serde_json::{json, Value};
use tracing::{debug, warn};
use wire::model::TrackNamespace;

/// Where events go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sink {
    /// POSTed, a JSON array per batch (`http://` or `https://`).
    Url(String),
    /// Appended, one JSON object per line.
    File(PathBuf),
    Stdout,
}

/// The hooks' configuration (`events_url`, `events_file`, `events_queue`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventsConfig {
    pub sink: Sink,
    /// Events held while the sink does not take them (the oldest dropped beyond).
    pub queue: usize,
    /// How events name this relay (its `advertise` URL, else its listen address).
    pub relay: String,
}

/// Records the cores may hand over before the events thread takes them.
const RAW_QUEUE: usize = 65_536;
/// Events in one POST (or one write) at most.
const BATCH: usize = 256;
/// How long the threads sleep when they find nothing to do.
const IDLE: Duration = Duration::from_millis(20);
/// The first retry's wait, doubled after each failure up to `MAX_BACKOFF`.
const MIN_BACKOFF: Duration = Duration::from_millis(100);
const MAX_BACKOFF: Duration = Duration::from_secs(5);
/// A POST's whole time (connect, send, answer) at most.
const POST_TIMEOUT: Duration = Duration::from_secs(5);

/// The hooks' counters (`moq_edge_events_*`).
#[derive(Debug, Default)]
pub struct EventStats {
    /// Events made (numbered).
    pub emitted: AtomicU64,
    /// Events the sink took.
    pub delivered: AtomicU64,
    /// Events or records dropped: the outgoing queue full (the oldest), or the cores' queue
    /// full (the newest).
    pub dropped: AtomicU64,
    /// Deliveries that failed (each retried).
    pub failures: AtomicU64,
    /// Events waiting for the sink.
    pub queued: AtomicU64,
}

/// What a core records.
#[derive(Debug, Clone)]
pub enum Record {
    Relay(RelayEvent),
    SessionOpen(SessionInfo),
    SessionClose(SessionInfo, SessionTotals),
}

/// Which session: its core and its number there, how it came, and its draft.
#[derive(Debug, Clone)]
pub struct SessionInfo {
    pub core: usize,
    /// Counts the core's sessions from 1 (`session` in events: `CORE.SERIAL`).
    pub serial: u64,
    /// `quic`, `webtransport` or `websocket`.
    pub transport: &'static str,
    pub draft: u32,
    pub peer: Option<SocketAddr>,
}

/// A closed session's figures.
#[derive(Debug, Clone, Default)]
pub struct SessionTotals {
    pub seconds: f64,
    pub bytes_in: u64,
    pub bytes_out: u64,
    /// The close's error code and reason, and whether the peer sent it; `None`: no close
    /// frame (an idle timeout, or a transport that ended).
    pub close: Option<(u64, String, bool)>,
}

/// The cores' end of the hooks (cheap to clone).
#[derive(Clone)]
pub struct Hooks {
    raw: Arc<ArrayQueue<(u64, Record)>>,
    out: Arc<Outbox>,
    pub stats: Arc<EventStats>,
}

impl std::fmt::Debug for Hooks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hooks").field("raw", &self.raw.len()).field("stats", &self.stats).finish()
    }
}

impl Hooks {
    /// Hands `record` to the events thread, stamped with the wall clock; never blocks.
    pub fn record(&self, record: Record) {
        if self.raw.push((unix_ms(), record)).is_err() {
            self.stats.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Waits up to `within` for what was recorded to be delivered (at shutdown).
    pub fn flush(&self, within: Duration) {
        let end = std::time::Instant::now() + within;
        while std::time::Instant::now() < end && !(self.raw.is_empty() && self.out.is_empty()) {
            std::thread::sleep(IDLE);
        }
    }
}

/// Starts the two threads.
pub fn start(cfg: EventsConfig) -> anyhow::Result<Hooks> {
    let sink = Writer::open(&cfg.sink)?;
    let hooks = Hooks {
        raw: Arc::new(ArrayQueue::new(RAW_QUEUE)),
        out: Arc::new(Outbox { events: Mutex::new(VecDeque::new()), cap: cfg.queue.max(1) }),
        stats: Arc::default(),
    };
    let mut events = Events { relay: cfg.relay, live: HashMap::default(), seq: 0 };
    let (raw, out, stats) = (hooks.raw.clone(), hooks.out.clone(), hooks.stats.clone());
    std::thread::Builder::new().name("moq-edge-events".into()).spawn(move || loop {
        let mut idle = true;
        while let Some((at, record)) = raw.pop() {
            idle = false;
            for event in events.of(at, record) {
                stats.emitted.fetch_add(1, Ordering::Relaxed);
                out.push(event, &stats);
            }
        }
        if idle {
            std::thread::sleep(IDLE);
        }
    })?;
    let (out, stats) = (hooks.out.clone(), hooks.stats.clone());
    std::thread::Builder::new()
        .name("moq-edge-events-out".into())
        .spawn(move || deliver(sink, &out, &stats))?;
    Ok(hooks)
}

/// The outgoing queue: (sequence number, the event's JSON), oldest first.
struct Outbox {
    events: Mutex<VecDeque<(u64, String)>>,
    cap: usize,
}

impl Outbox {
    fn push(&self, (seq, json): (u64, String), stats: &EventStats) {
        let Ok(mut q) = self.events.lock() else { return };
        if q.len() >= self.cap {
            q.pop_front();
            stats.dropped.fetch_add(1, Ordering::Relaxed);
        }
        q.push_back((seq, json));
        stats.queued.store(q.len() as u64, Ordering::Relaxed);
    }

    fn is_empty(&self) -> bool {
        self.events.lock().map(|q| q.is_empty()).unwrap_or(true)
    }

    /// The oldest events, up to `BATCH` (copied: they stay queued until delivered).
    fn head(&self) -> Vec<(u64, String)> {
        self.events.lock().map(|q| q.iter().take(BATCH).cloned().collect()).unwrap_or_default()
    }

    /// Events up to `seq` were delivered: those still queued leave; how many did.
    fn delivered(&self, seq: u64, stats: &EventStats) -> u64 {
        let Ok(mut q) = self.events.lock() else { return 0 };
        let mut n = 0;
        while q.front().is_some_and(|(s, _)| *s <= seq) {
            q.pop_front();
            n += 1;
        }
        stats.queued.store(q.len() as u64, Ordering::Relaxed);
        n
    }
}

/// The events thread's state: which broadcasts are live, and the next number.
struct Events {
    relay: String,
    /// Live broadcasts: the announcements and PUBLISHes that hold each, over all cores.
    live: HashMap<TrackNamespace, u32>,
    seq: u64,
}

impl Events {
    /// The events `record` makes (none, one or two), numbered, as JSON.
    fn of(&mut self, at: u64, record: Record) -> Vec<(u64, String)> {
        let mut made = Vec::new();
        match record {
            Record::Relay(RelayEvent::Namespace { namespace, on }) => {
                if let Some(e) = self.hold(&namespace, on) {
                    made.push(e);
                }
            }
            Record::Relay(RelayEvent::Track { track, on }) => {
                let namespace = fields(&track.namespace);
                let name = String::from_utf8_lossy(&track.name).into_owned();
                let kind = if on { "track_start" } else { "track_end" };
                let event = json!({"type": kind, "namespace": namespace, "track": name});
                // A PUBLISH holds its broadcast too: it starts before its track, ends after.
                if on {
                    made.extend(self.hold(&track.namespace, true));
                    made.push(event);
                } else {
                    made.push(event);
                    made.extend(self.hold(&track.namespace, false));
                }
            }
            Record::SessionOpen(s) => made.push(session("session_open", &s)),
            Record::SessionClose(s, t) => {
                let mut e = session("session_close", &s);
                e["seconds"] = json!((t.seconds * 1000.0).round() / 1000.0);
                e["bytes_in"] = json!(t.bytes_in);
                e["bytes_out"] = json!(t.bytes_out);
                if let Some((code, reason, by_peer)) = t.close {
                    e["error_code"] = json!(code);
                    e["reason"] = json!(reason);
                    e["closed_by"] = json!(if by_peer { "peer" } else { "relay" });
                }
                made.push(e);
            }
        }
        made.into_iter()
            .map(|mut e| {
                self.seq += 1;
                e["seq"] = json!(self.seq);
                e["at_ms"] = json!(at);
                e["relay"] = json!(self.relay);
                (self.seq, e.to_string())
            })
            .collect()
    }

    /// One more (`on`) or one fewer hold on `namespace`: the broadcast's start or end when
    /// the count leaves or reaches zero.
    fn hold(&mut self, namespace: &TrackNamespace, on: bool) -> Option<Value> {
        let n = self.live.entry(namespace.clone()).or_default();
        let (was, now) = (*n, if on { n.saturating_add(1) } else { n.saturating_sub(1) });
        *n = now;
        if now == 0 {
            self.live.remove(namespace);
        }
        let kind = match (was, now) {
            (0, 1) => "broadcast_start",
            (1, 0) => "broadcast_end",
            _ => return None,
        };
        Some(json!({"type": kind, "namespace": fields(namespace)}))
    }
}

fn session(kind: &str, s: &SessionInfo) -> Value {
    let mut e = json!({
        "type": kind,
        "session": format!("{}.{}", s.core, s.serial),
        "transport": s.transport,
        "draft": s.draft,
    });
    if let Some(peer) = s.peer {
        e["peer"] = json!(peer.to_string());
    }
    e
}

/// A namespace's fields as strings (bytes that are not UTF-8 replaced).
fn fields(namespace: &TrackNamespace) -> Vec<String> {
    namespace.fields().iter().map(|f| String::from_utf8_lossy(f).into_owned()).collect()
}

fn unix_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}

/// The sink, opened.
enum Writer {
    Url(String, ureq::Agent),
    File(std::fs::File),
    Stdout,
}

impl Writer {
    fn open(sink: &Sink) -> anyhow::Result<Writer> {
        Ok(match sink {
            Sink::Url(url) => {
                // rustls's process-wide provider (ring), as the directory's client installs it.
                let _ = rustls::crypto::ring::default_provider().install_default();
                let agent = ureq::Agent::config_builder().timeout_global(Some(POST_TIMEOUT)).build().into();
                Writer::Url(url.clone(), agent)
            }
            Sink::File(path) => Writer::File(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(path)
                    .map_err(|e| anyhow::anyhow!("config key `events_file`: {}: {e}", path.display()))?,
            ),
            Sink::Stdout => Writer::Stdout,
        })
    }

    /// Delivers `batch` whole, or fails.
    fn write(&mut self, batch: &[(u64, String)]) -> Result<(), String> {
        let lines = || batch.iter().map(|(_, e)| format!("{e}\n")).collect::<String>();
        match self {
            Writer::Url(url, agent) => {
                let body =
                    format!("[{}]", batch.iter().map(|(_, e)| e.as_str()).collect::<Vec<_>>().join(","));
                agent
                    .post(url.as_str())
                    .header("content-type", "application/json")
                    .send(body)
                    .map(|_| ())
                    .map_err(|e| e.to_string())
            }
            Writer::File(f) => {
                f.write_all(lines().as_bytes()).and_then(|_| f.flush()).map_err(|e| e.to_string())
            }
            Writer::Stdout => {
                let mut out = std::io::stdout().lock();
                out.write_all(lines().as_bytes()).and_then(|_| out.flush()).map_err(|e| e.to_string())
            }
        }
    }
}

/// The delivery thread: the queue's head, in order, until the sink takes it.
fn deliver(mut sink: Writer, out: &Outbox, stats: &EventStats) {
    let mut backoff = MIN_BACKOFF;
    let mut failing = false;
    loop {
        let batch = out.head();
        let Some(&(last, _)) = batch.last() else {
            std::thread::sleep(IDLE);
            continue;
        };
        match sink.write(&batch) {
            Ok(()) => {
                let n = out.delivered(last, stats);
                stats.delivered.fetch_add(n, Ordering::Relaxed);
                if failing {
                    warn!("event hooks: delivering again");
                }
                (backoff, failing) = (MIN_BACKOFF, false);
            }
            Err(why) => {
                stats.failures.fetch_add(1, Ordering::Relaxed);
                if failing {
                    debug!(why, "event hooks: delivery failed again");
                } else {
                    warn!(
                        why,
                        "event hooks: delivery failed; retrying with backoff, the oldest dropped when full"
                    );
                }
                failing = true;
                std::thread::sleep(backoff);
                backoff = (backoff * 2).min(MAX_BACKOFF);
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use wire::model::FullTrackName;

    fn ns(f: &[&str]) -> TrackNamespace {
        TrackNamespace::from_strs(f)
    }

    fn types(events: &[(u64, String)]) -> Vec<String> {
        events
            .iter()
            .map(|(_, e)| serde_json::from_str::<Value>(e).unwrap()["type"].as_str().unwrap().to_string())
            .collect()
    }

    /// Two publishers of one broadcast (on different cores): it starts with the first and
    /// ends with the last; a PUBLISH alone holds its broadcast around its track.
    #[test]
    fn a_broadcast_starts_with_its_first_holder_and_ends_with_its_last() {
        let mut ev = Events { relay: "r".into(), live: HashMap::default(), seq: 0 };
        let live = ns(&["live"]);
        let mut all = Vec::new();
        let rec = |namespace: &TrackNamespace, on| {
            Record::Relay(RelayEvent::Namespace { namespace: namespace.clone(), on })
        };
        all.extend(ev.of(1, rec(&live, true)));
        all.extend(ev.of(2, rec(&live, true)));
        all.extend(ev.of(3, rec(&live, false)));
        all.extend(ev.of(4, rec(&live, false)));
        all.extend(ev.of(5, rec(&live, false)));
        let track = FullTrackName { namespace: ns(&["solo"]), name: "v".into() };
        all.extend(ev.of(6, Record::Relay(RelayEvent::Track { track: track.clone(), on: true })));
        all.extend(ev.of(7, Record::Relay(RelayEvent::Track { track, on: false })));
        assert_eq!(
            types(&all),
            [
                "broadcast_start",
                "broadcast_end",
                "broadcast_start",
                "track_start",
                "track_end",
                "broadcast_end"
            ]
        );
        let seqs: Vec<u64> = all.iter().map(|(s, _)| *s).collect();
        assert_eq!(seqs, [1, 2, 3, 4, 5, 6]);
        let first: Value = serde_json::from_str(&all[0].1).unwrap();
        assert_eq!(first["namespace"], json!(["live"]));
        assert_eq!((first["at_ms"].as_u64(), first["relay"].as_str()), (Some(1), Some("r")));
        assert!(ev.live.is_empty());
    }

    /// The outgoing queue keeps the newest `cap` events and counts what it dropped; a
    /// delivery takes only what it delivered.
    #[test]
    fn the_outbox_drops_the_oldest_and_keeps_order() {
        let stats = EventStats::default();
        let out = Outbox { events: Mutex::new(VecDeque::new()), cap: 3 };
        for seq in 1..=5 {
            out.push((seq, seq.to_string()), &stats);
        }
        assert_eq!(stats.dropped.load(Ordering::Relaxed), 2);
        let head: Vec<u64> = out.head().iter().map(|(s, _)| *s).collect();
        assert_eq!(head, [3, 4, 5]);
        out.push((6, "6".into()), &stats);
        assert_eq!(out.delivered(5, &stats), 2, "3 was dropped meanwhile; 4 and 5 were delivered");
        assert_eq!(out.head().iter().map(|(s, _)| *s).collect::<Vec<_>>(), [6]);
    }
}
