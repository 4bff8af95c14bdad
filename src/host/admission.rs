//! Admission by HTTP (config `auth = "http"`, `auth_url`; README.md "Admission by HTTP";
//! the relay's side is `relay::admission`). Off the cores: a core hands a session's question
//! ([`Admission::ask`], never blocking) to a bounded queue that a few worker threads serve,
//! one POST each to the platform's service, a whole-request timeout on each. Answers are
//! cached by what was asked (the session's tokens and URL path) for the time the service
//! gives, and questions already in flight are not asked twice, so a thousand viewers with one
//! token cost one POST a period. The verdict goes back on the asking core's channel, with a
//! wake-up. When the service cannot be reached, answers garbage or the queue is full, the
//! failure policy decides: deny, or allow what the service last allowed for the same question.
//!
//! The service gets `{"action":"session","tokens":[…],"authority":…,"path":…}` and answers
//! `{"allow":true,"publish":["live/cam"],"subscribe":[""],"ttl_s":60}` (namespace prefixes,
//! fields joined by `/`; `""` is every namespace) or `{"allow":false,"reason":"…"}`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, Sender, SyncSender};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use ahash::HashMap;
use relay::admission::{AdmitAsk, Verdict};
use relay::ConnId;
use runtime::mesh::Waker;
use serde_json::{json, Value};
use tracing::{debug, warn};
use wire::model::TrackNamespace;

/// What an unreachable or failing service means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailurePolicy {
    /// Sessions are refused (and, at revalidation, closed).
    Deny,
    /// What the service last allowed for the same question stays allowed; the rest is denied.
    AllowKnown,
}

/// `auth_url`, `auth_failure`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdmissionConfig {
    pub url: String,
    pub failure: FailurePolicy,
}

/// Questions waiting for a worker at most; beyond, the failure policy answers at once.
const QUEUE: usize = 4096;
/// Worker threads: POSTs in flight at most.
const WORKERS: usize = 4;
/// A POST's whole time at most.
const TIMEOUT: Duration = Duration::from_secs(3);
/// How long an answer holds when the service names no `ttl_s`, and at least.
const DEFAULT_TTL: Duration = Duration::from_secs(60);
const MIN_TTL: Duration = Duration::from_secs(1);
/// How long a failure's verdict holds before the service is asked again.
const FAILURE_TTL: Duration = Duration::from_secs(5);
/// The relay's own expiry of a grant: far off, since revalidation decides when it ends.
const GRANT_HORIZON_S: u64 = 365 * 24 * 3600;

/// The counters (`moq_edge_admission_http_*`).
#[derive(Debug, Default)]
pub struct AdmissionStats {
    /// POSTs made.
    pub requests: AtomicU64,
    /// Questions answered from the cache (or joined to one in flight).
    pub cached: AtomicU64,
    /// POSTs that failed (unreachable, timeout, not 200, not the expected JSON) or questions
    /// the full queue turned away.
    pub failures: AtomicU64,
    pub allowed: AtomicU64,
    pub denied: AtomicU64,
}

/// A verdict, how long it holds, for session `conn`.
pub type Answer = (ConnId, Verdict, Duration);

/// Each core's end, taken when it starts.
pub type Ports = Arc<Mutex<Vec<Option<Receiver<Answer>>>>>;

/// The cores' end of the admission (cheap to clone).
#[derive(Clone)]
pub struct Admission {
    jobs: SyncSender<String>,
    shared: Arc<Shared>,
    pub stats: Arc<AdmissionStats>,
}

impl std::fmt::Debug for Admission {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Admission").field("stats", &self.stats).finish()
    }
}

struct Shared {
    cfg: AdmissionConfig,
    agent: ureq::Agent,
    cores: Vec<Sender<Answer>>,
    wakers: OnceLock<Vec<Waker>>,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Answers by question, with when they were fetched and how long they hold.
    cache: HashMap<String, (Verdict, Instant, Duration)>,
    /// Questions in flight, and who waits for each.
    waiting: HashMap<String, Vec<(usize, ConnId)>>,
}

/// Starts the workers for a relay of `cores` cores.
pub fn start(cfg: AdmissionConfig, cores: usize) -> anyhow::Result<(Admission, Ports)> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let (senders, receivers): (Vec<_>, Vec<_>) = (0..cores).map(|_| mpsc::channel()).unzip();
    let (jobs, queue) = mpsc::sync_channel::<String>(QUEUE);
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(TIMEOUT))
        .http_status_as_error(false)
        .build()
        .into();
    let shared =
        Arc::new(Shared { cfg, agent, cores: senders, wakers: OnceLock::new(), state: Mutex::default() });
    let stats = Arc::new(AdmissionStats::default());
    let queue = Arc::new(Mutex::new(queue));
    for i in 0..WORKERS {
        let (queue, shared, stats) = (queue.clone(), shared.clone(), stats.clone());
        std::thread::Builder::new().name(format!("moq-edge-admission-{i}")).spawn(move || loop {
            let key = match queue.lock().map(|q| q.recv()) {
                Ok(Ok(key)) => key,
                _ => return, // the relay is gone
            };
            let answer = shared.post(&key, &stats);
            shared.settle(&key, answer, &stats);
        })?;
    }
    let ports = Arc::new(Mutex::new(receivers.into_iter().map(Some).collect()));
    Ok((Admission { jobs, shared, stats }, ports))
}

impl Admission {
    /// The cores' doorbells, once the server runs.
    pub fn set_wakers(&self, wakers: Vec<Waker>) {
        let _ = self.shared.wakers.set(wakers);
    }

    /// Core `core` asks about `ask`: the answer comes on its channel (at once when cached).
    pub fn ask(&self, core: usize, ask: &AdmitAsk) {
        let text = |b: &Option<bytes::Bytes>| b.as_ref().map(|b| String::from_utf8_lossy(b).into_owned());
        let tokens: Vec<String> =
            ask.tokens.iter().map(|t| String::from_utf8_lossy(t).into_owned()).collect();
        let body = question("session", &tokens, text(&ask.authority), text(&ask.path));
        let Ok(mut state) = self.shared.state.lock() else { return };
        if let Some((verdict, left)) = fresh(&state, &body) {
            self.stats.cached.fetch_add(1, Ordering::Relaxed);
            return self.shared.tell(core, (ask.conn, verdict, left));
        }
        if let Some(waiters) = state.waiting.get_mut(&body) {
            self.stats.cached.fetch_add(1, Ordering::Relaxed);
            return waiters.push((core, ask.conn));
        }
        state.waiting.insert(body.clone(), vec![(core, ask.conn)]);
        drop(state);
        if self.jobs.try_send(body.clone()).is_err() {
            warn!("admission: the queue to the platform's service is full");
            self.stats.failures.fetch_add(1, Ordering::Relaxed);
            let _ = self.shared.settle(&body, None, &self.stats);
        }
    }
}

impl Admission {
    /// A side door's request (`GET /announced`, `GET /fetch`: `action` `announced` or
    /// `fetch`, on the web listener's connection thread, which may wait): the cached answer,
    /// else one POST, the failure policy when it fails.
    pub fn decide(&self, action: &str, tokens: &[String], path: &str) -> Verdict {
        let body = question(action, tokens, None, Some(path.to_string()));
        if let Some((verdict, _)) = self.shared.state.lock().ok().and_then(|s| fresh(&s, &body)) {
            self.stats.cached.fetch_add(1, Ordering::Relaxed);
            return verdict;
        }
        let answer = self.shared.post(&body, &self.stats);
        self.shared.settle(&body, answer, &self.stats)
    }
}

/// The question's JSON, also its key in the cache.
fn question(action: &str, tokens: &[String], authority: Option<String>, path: Option<String>) -> String {
    json!({ "action": action, "tokens": tokens, "authority": authority, "path": path }).to_string()
}

/// The cached answer to `key` while it holds, and how long it still does.
fn fresh(state: &State, key: &str) -> Option<(Verdict, Duration)> {
    let (verdict, at, ttl) = state.cache.get(key)?;
    let left = (*at + *ttl).checked_duration_since(Instant::now())?;
    Some((verdict.clone(), left.max(MIN_TTL)))
}

impl Shared {
    fn tell(&self, core: usize, answer: Answer) {
        if let Some(tx) = self.cores.get(core) {
            let _ = tx.send(answer);
            if let Some(w) = self.wakers.get().and_then(|w| w.get(core)) {
                w.wake();
            }
        }
    }

    /// Asks the service about `key`: its answer, or `None` when it failed.
    fn post(&self, key: &str, stats: &AdmissionStats) -> Option<(Verdict, Duration)> {
        stats.requests.fetch_add(1, Ordering::Relaxed);
        let answer = self
            .agent
            .post(self.cfg.url.as_str())
            .header("content-type", "application/json")
            .send(key)
            .map_err(|e| e.to_string())
            .and_then(|mut r| {
                let status = r.status().as_u16();
                let text = r.body_mut().read_to_string().map_err(|e| e.to_string())?;
                if status != 200 {
                    return Err(format!("status {status}"));
                }
                parse(&text).ok_or_else(|| format!("not an answer: {text:.200}"))
            });
        match answer {
            Ok(a) => Some(a),
            Err(why) => {
                stats.failures.fetch_add(1, Ordering::Relaxed);
                warn!(why, "admission: the platform's service failed; the failure policy decides");
                None
            }
        }
    }

    /// The answer to `key` (`None`: the service failed) is cached and told to its waiters;
    /// the verdict it comes to.
    fn settle(&self, key: &str, answer: Option<(Verdict, Duration)>, stats: &AdmissionStats) -> Verdict {
        let Ok(mut state) = self.state.lock() else { return Verdict::Deny };
        let now = Instant::now();
        let (verdict, ttl) = match answer {
            Some(a) => a,
            None => {
                let known = state.cache.get(key).map(|(v, _, _)| v.clone());
                match (self.cfg.failure, known) {
                    (FailurePolicy::AllowKnown, Some(v @ Verdict::Allow(_))) => (v, FAILURE_TTL),
                    _ => (Verdict::Deny, FAILURE_TTL),
                }
            }
        };
        let counter = if matches!(verdict, Verdict::Allow(_)) { &stats.allowed } else { &stats.denied };
        state.cache.insert(key.to_string(), (verdict.clone(), now, ttl));
        // Answers past their time are dropped as new ones come: the cache holds what
        // sessions asked within the longest ttl.
        state.cache.retain(|_, (_, at, ttl)| now < *at + *ttl + DEFAULT_TTL);
        let waiters = state.waiting.remove(key).unwrap_or_default();
        drop(state);
        counter.fetch_add(waiters.len() as u64, Ordering::Relaxed);
        debug!(waiters = waiters.len(), ?verdict, ?ttl, "admission settled");
        for (core, conn) in waiters {
            self.tell(core, (conn, verdict.clone(), ttl));
        }
        verdict
    }
}

/// The service's answer: a verdict and how long it holds.
fn parse(text: &str) -> Option<(Verdict, Duration)> {
    let v: Value = serde_json::from_str(text).ok()?;
    let ttl = v
        .get("ttl_s")
        .and_then(Value::as_f64)
        .map_or(DEFAULT_TTL, |s| Duration::from_secs_f64(s.clamp(0.0, 86_400.0)));
    let ttl = ttl.max(MIN_TTL);
    if !v.get("allow")?.as_bool()? {
        return Some((Verdict::Deny, ttl));
    }
    let prefixes = |name: &str| -> Option<Vec<TrackNamespace>> {
        let list = v.get(name).map_or(Some(Vec::new()), |l| l.as_array().cloned())?;
        list.iter()
            .map(|p| {
                let p = p.as_str()?;
                Some(TrackNamespace::from_strs(&p.split('/').filter(|f| !f.is_empty()).collect::<Vec<_>>()))
            })
            .collect()
    };
    let grant = auth::Grant {
        publish: prefixes("publish")?,
        subscribe: prefixes("subscribe")?,
        expires: auth::unix_now() + GRANT_HORIZON_S,
    };
    Some((Verdict::Allow(grant), ttl))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn answers_parse() {
        let (v, ttl) = parse(r#"{"allow":true,"publish":["live/cam"],"subscribe":[""],"ttl_s":30}"#).unwrap();
        let Verdict::Allow(g) = v else { panic!("allowed") };
        assert_eq!(g.publish, vec![TrackNamespace::from_strs(&["live", "cam"])]);
        assert_eq!(g.subscribe, vec![TrackNamespace::default()]);
        assert_eq!(ttl, Duration::from_secs(30));
        assert_eq!(parse(r#"{"allow":false,"reason":"banned"}"#).map(|a| a.0), Some(Verdict::Deny));
        assert_eq!(parse(r#"{"allow":true}"#).map(|a| a.1), Some(DEFAULT_TTL));
        for bad in ["", "[]", r#"{"allow":"yes"}"#, r#"{"allow":true,"publish":[3]}"#] {
            assert!(parse(bad).is_none(), "{bad}");
        }
    }
}
