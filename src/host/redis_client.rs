//! The namespace directory on Redis (config `directory`; ARCHITECTURE.md "Namespace
//! directory"): which relay of a cluster serves a namespace, so that a publisher may ingest at
//! any relay and every relay finds it.
//!
//! Entries: `<prefix>:ns:<namespace>` holds the advertised URL (`moqt://HOST:PORT`) of the
//! relay whose publishers announce the namespace, with a lease (`lease`, refreshed every third
//! of it). The first relay to register a namespace keeps it while it refreshes; a relay that
//! stops (or dies) stops refreshing and its entries expire by themselves, and another relay
//! that has a publisher of the namespace then takes it over. `<prefix>:relay:<url>` holds each
//! relay's load for drain (a sibling to name in GOAWAY). Every registration and removal is
//! published on `<prefix>:changes`; relays also read again what they use every third of the
//! lease, so an expiry is seen without Redis keyspace notifications.
//!
//! The client runs on its own thread, never on a core: the cores send [`DirRequest`]s and get
//! [`DirEvent`]s back (each event rings the core's doorbell). A slow or lost Redis delays
//! nothing but lookups, which then fail as misses; the relay keeps serving what it has, the
//! thread reconnects with backoff, and `moq_edge_directory_up` says so.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use tracing::{debug, info, warn};

use crate::config::Directory;
use ahash::{HashMap, HashSet};
use runtime::mesh::Waker;
use wire::model::TrackNamespace;

/// What a core asks of the directory.
#[derive(Debug)]
pub enum DirRequest {
    /// A local (or downstream) publisher announced `namespace` or PUBLISHed a track in it
    /// (counted: each Register is matched by one Unregister).
    Register(TrackNamespace),
    Unregister(TrackNamespace),
    /// Which relay serves `namespace`? The answer goes to `core`; a hit also makes a route.
    Lookup {
        core: usize,
        namespace: TrackNamespace,
    },
    /// A namespace subscription of prefix `prefix` appeared (`on`) or ended somewhere on the
    /// relay: namespaces other relays register under it are reported as [`DirEvent::Remote`].
    Watch {
        prefix: TrackNamespace,
        on: bool,
    },
    /// A core's busy share of the last second and its session count (written for siblings).
    Load {
        core: usize,
        busy_pct: u8,
        sessions: u64,
    },
    /// The relay drains: remove its entries, and answer the least loaded sibling's URL.
    Drain(Sender<Option<String>>),
    /// (From the watch thread.) A change published on the channel: the key's suffix.
    Changed(String),
    /// (From the watch thread.) It (re)subscribed: changes may have been missed.
    Resync,
}

/// What the directory tells a core.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DirEvent {
    /// The answer to this core's lookup of `namespace`: `found` when another relay serves it
    /// (its route then comes as [`DirEvent::Route`] to the core that owns the link).
    Answer { namespace: TrackNamespace, found: bool },
    /// Tracks under `prefix` are served by the relay at `url` (`on`), or no longer: the link
    /// to `url` (on this core) takes or drops the route.
    Route { url: String, prefix: TrackNamespace, on: bool },
    /// A namespace another relay of the cluster registered under a watched prefix appeared
    /// (`on`) or went away (sent to every core: discovery).
    Remote { namespace: TrackNamespace, on: bool },
}

/// One core's end of the directory.
#[derive(Debug)]
pub struct DirectoryPort {
    pub tx: Sender<DirRequest>,
    pub rx: Receiver<DirEvent>,
}

/// The directory's figures for the metrics endpoint.
#[derive(Debug, Default)]
pub struct DirectoryStats {
    pub up: AtomicBool,
    pub hits: AtomicU64,
    pub misses: AtomicU64,
    pub errors: AtomicU64,
    /// Namespaces this relay holds in the directory.
    pub registered: AtomicU64,
}

/// The running directory client.
#[derive(Clone)]
pub struct DirectoryHandle {
    tx: Sender<DirRequest>,
    wakers: Arc<OnceLock<Vec<Waker>>>,
    pub stats: Arc<DirectoryStats>,
}

impl DirectoryHandle {
    /// The cores' doorbells, once the server runs: each event wakes its core.
    pub fn set_wakers(&self, wakers: Vec<Waker>) {
        let _ = self.wakers.set(wakers);
    }

    /// The relay drains: its entries are removed first, and the least loaded sibling's URL
    /// is returned (for GOAWAY's New Session URI), within `timeout`.
    pub fn drain(&self, timeout: Duration) -> Option<String> {
        let (tx, rx) = mpsc::channel();
        self.tx.send(DirRequest::Drain(tx)).ok()?;
        rx.recv_timeout(timeout).ok().flatten()
    }
}

/// Routes the directory keeps at most (a lookup beyond answers a miss).
pub const MAX_ROUTES: usize = 4096;
/// Namespaces reported for discovery at most.
const MAX_REMOTE: usize = 16_384;
/// Keys read per SCAN step, and keys a scan reads at most.
const SCAN_COUNT: usize = 256;
const SCAN_MAX: usize = 65_536;
/// How long a prefix whose entry went away is still read again (as long as the relay keeps
/// subscribers of a track whose upstream was lost, `owner::UPSTREAM_LOST_GRACE`).
const ROUTE_FORGET: Duration = Duration::from_secs(30);
/// Waits between connection attempts.
const BACKOFF_MIN: Duration = Duration::from_millis(250);
const BACKOFF_MAX: Duration = Duration::from_secs(5);
/// Connect, read and write timeout of a Redis command (the thread is blocked meanwhile).
const IO_TIMEOUT: Duration = Duration::from_secs(1);

/// Starts the directory thread (and its watch thread) for `cores` cores.
pub fn start(cfg: Directory, cores: usize) -> anyhow::Result<(DirectoryHandle, Vec<DirectoryPort>)> {
    let client = client(&cfg)?;
    let (tx, rx) = mpsc::channel();
    let mut ports = Vec::with_capacity(cores);
    let mut to_cores = Vec::with_capacity(cores);
    for _ in 0..cores {
        let (etx, erx) = mpsc::channel();
        ports.push(DirectoryPort { tx: tx.clone(), rx: erx });
        to_cores.push(etx);
    }
    let wakers = Arc::new(OnceLock::new());
    let stats = Arc::new(DirectoryStats::default());
    let keys = Keys::new(&cfg.prefix);
    let state = State {
        lease: cfg.lease,
        me: cfg.advertise.clone(),
        keys: keys.clone(),
        conn: Link::new(client.clone()),
        owned: HashMap::default(),
        routes: HashMap::default(),
        watches: HashMap::default(),
        remote: HashSet::default(),
        load: vec![(0, 0); cores],
        cores: to_cores,
        wakers: wakers.clone(),
        stats: stats.clone(),
    };
    std::thread::Builder::new().name("moq-edge-directory".into()).spawn(move || state.run(rx))?;
    let (wtx, channel) = (tx.clone(), keys.changes.clone());
    std::thread::Builder::new()
        .name("moq-edge-dir-watch".into())
        .spawn(move || watch(client, channel, wtx))?;
    info!(directory = %redacted(&cfg.url), advertise = %cfg.advertise, "namespace directory configured");
    Ok((DirectoryHandle { tx, wakers, stats }, ports))
}

/// The Redis client for the configured URL. `rediss://`: TLS with rustls on `ring` (the
/// crypto the relay already carries), trusting `ca` or else the system roots.
fn client(cfg: &Directory) -> anyhow::Result<redis::Client> {
    let open = |e: redis::RedisError| anyhow::anyhow!("config key `directory`: {e}");
    if !cfg.url.starts_with("rediss://") {
        return redis::Client::open(cfg.url.as_str()).map_err(open);
    }
    // Already installed (by an earlier start in this process): the same provider.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let root_cert = match &cfg.ca {
        Some(path) => Some(
            std::fs::read(path)
                .map_err(|e| anyhow::anyhow!("config key `directory_ca`: {}: {e}", path.display()))?,
        ),
        None => None,
    };
    let certs = redis::TlsCertificates { client_tls: None, root_cert };
    redis::Client::build_with_tls(cfg.url.as_str(), certs).map_err(open)
}

/// The URL without its password (for logs).
fn redacted(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut u) if u.password().is_some() => {
            let _ = u.set_password(Some("***"));
            u.to_string()
        }
        _ => url.to_string(),
    }
}

/// The core whose link slots hold the link to `url` (the same for every request).
pub fn link_core(url: &str, cores: usize) -> usize {
    let mut h = DefaultHasher::new();
    url.hash(&mut h);
    (h.finish() % cores.max(1) as u64) as usize
}

/// The key names of one cluster.
#[derive(Debug, Clone)]
struct Keys {
    ns: String,
    relay: String,
    changes: String,
}

impl Keys {
    fn new(prefix: &str) -> Self {
        Keys {
            ns: format!("{prefix}:ns:"),
            relay: format!("{prefix}:relay:"),
            changes: format!("{prefix}:changes"),
        }
    }

    fn ns(&self, namespace: &TrackNamespace) -> String {
        format!("{}{}", self.ns, encode(namespace))
    }
}

/// A namespace as a key suffix: each field percent-encoded (everything but ASCII letters,
/// digits and `-._~`), fields joined by `/`. A prefix of the tuple is a prefix of the text
/// followed by `/` or the end.
pub fn encode(namespace: &TrackNamespace) -> String {
    let mut out = String::new();
    for (i, field) in namespace.fields().iter().enumerate() {
        if i > 0 {
            out.push('/');
        }
        for &b in field.iter() {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                out.push(b as char);
            } else {
                out.push_str(&format!("%{b:02X}"));
            }
        }
    }
    out
}

/// The inverse of [`encode`] (`None`: not an encoding of a namespace).
pub fn decode(text: &str) -> Option<TrackNamespace> {
    if text.is_empty() {
        return None;
    }
    let mut fields = Vec::new();
    for part in text.split('/') {
        let bytes = part.as_bytes();
        let mut field = Vec::with_capacity(bytes.len());
        let mut i = 0;
        while i < bytes.len() {
            if bytes[i] == b'%' {
                let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
                field.push(u8::from_str_radix(hex, 16).ok()?);
                i += 3;
            } else {
                field.push(bytes[i]);
                i += 1;
            }
        }
        fields.push(bytes::Bytes::from(field));
    }
    (fields.len() <= 32).then_some(TrackNamespace(fields))
}

/// The Redis connection and its backoff.
struct Link {
    client: redis::Client,
    conn: Option<redis::Connection>,
    retry_at: Instant,
    backoff: Duration,
}

impl Link {
    fn new(client: redis::Client) -> Self {
        Link { client, conn: None, retry_at: Instant::now(), backoff: BACKOFF_MIN }
    }

    /// The connection, (re)connecting when the backoff allows; `None`: Redis is unreachable.
    fn get(&mut self, stats: &DirectoryStats) -> Option<&mut redis::Connection> {
        if self.conn.is_none() && Instant::now() >= self.retry_at {
            match connect(&self.client) {
                Ok(c) => {
                    info!("namespace directory reachable");
                    self.conn = Some(c);
                    self.backoff = BACKOFF_MIN;
                    stats.up.store(true, Ordering::Relaxed);
                }
                Err(e) => self.failed(stats, &e),
            }
        }
        self.conn.as_mut()
    }

    /// A command failed: the connection is dropped and tried again after the backoff.
    fn failed(&mut self, stats: &DirectoryStats, e: &redis::RedisError) {
        if self.conn.take().is_some() || stats.up.swap(false, Ordering::Relaxed) {
            warn!(error = %e, "namespace directory unreachable: serving what is here, retrying");
        } else {
            debug!(error = %e, "namespace directory still unreachable");
        }
        stats.up.store(false, Ordering::Relaxed);
        self.retry_at = Instant::now() + self.backoff;
        self.backoff = (self.backoff * 2).min(BACKOFF_MAX);
    }
}

fn connect(client: &redis::Client) -> redis::RedisResult<redis::Connection> {
    let c = client.get_connection_with_timeout(IO_TIMEOUT)?;
    c.set_read_timeout(Some(IO_TIMEOUT))?;
    c.set_write_timeout(Some(IO_TIMEOUT))?;
    Ok(c)
}

/// Registers `KEYS[1]` = `ARGV[1]` for `ARGV[2]` ms when it is free or already ours; a new
/// entry is published on `KEYS[2]` (payload `ARGV[3]`). 1: ours.
const CLAIM: &str = "local v = redis.call('GET', KEYS[1]) \
    if v == false or v == ARGV[1] then \
      redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2]) \
      if v == false then redis.call('PUBLISH', KEYS[2], ARGV[3]) end \
      return 1 \
    end \
    return 0";

/// Removes `KEYS[1]` when it is ours (`ARGV[1]`) and publishes that on `KEYS[2]`.
const RELEASE: &str = "if redis.call('GET', KEYS[1]) == ARGV[1] then \
      redis.call('DEL', KEYS[1]) \
      redis.call('PUBLISH', KEYS[2], ARGV[2]) \
      return 1 \
    end \
    return 0";

/// A namespace registered by this relay.
#[derive(Debug, Default)]
struct Owned {
    /// Announcements and PUBLISHes of it here (Register minus Unregister).
    count: u32,
    /// The entry is ours (another relay may hold it: we take over when it lets go).
    held: bool,
}

struct State {
    lease: Duration,
    me: String,
    keys: Keys,
    conn: Link,
    owned: HashMap<TrackNamespace, Owned>,
    /// Prefixes routed to another relay's URL (through a link), and prefixes whose entry
    /// went away, still read again for [`ROUTE_FORGET`] (since when): the tracks under them
    /// wait for another relay to take the namespace over.
    routes: HashMap<TrackNamespace, Result<String, Instant>>,
    /// Prefixes of namespace subscriptions (counted), and the namespaces reported under them.
    watches: HashMap<TrackNamespace, u32>,
    remote: HashSet<TrackNamespace>,
    load: Vec<(u8, u64)>,
    cores: Vec<Sender<DirEvent>>,
    wakers: Arc<OnceLock<Vec<Waker>>>,
    stats: Arc<DirectoryStats>,
}

impl State {
    fn run(mut self, rx: Receiver<DirRequest>) {
        let period = self.lease / 3;
        let mut refresh_at = Instant::now();
        loop {
            let now = Instant::now();
            if now >= refresh_at {
                self.refresh();
                refresh_at = Instant::now() + period;
            }
            match rx.recv_timeout(refresh_at.saturating_duration_since(Instant::now())) {
                Ok(req) => self.handle(req),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return,
            }
        }
    }

    fn handle(&mut self, req: DirRequest) {
        match req {
            DirRequest::Register(ns) => {
                let o = self.owned.entry(ns.clone()).or_default();
                o.count += 1;
                if o.count == 1 {
                    self.claim(&[ns]);
                }
            }
            DirRequest::Unregister(ns) => {
                let Some(o) = self.owned.get_mut(&ns) else { return };
                o.count = o.count.saturating_sub(1);
                if o.count == 0 {
                    let held = self.owned.remove(&ns).is_some_and(|o| o.held);
                    if held {
                        self.release(&[ns]);
                    }
                    self.count_registered();
                }
            }
            DirRequest::Lookup { core, namespace } => {
                let found = self.lookup(&namespace);
                self.tell(core, DirEvent::Answer { namespace, found });
            }
            DirRequest::Watch { prefix, on } => {
                let n = self.watches.entry(prefix.clone()).or_default();
                if on {
                    *n += 1;
                    if *n == 1 {
                        self.scan(&prefix);
                    }
                } else {
                    *n = n.saturating_sub(1);
                    if *n == 0 {
                        self.watches.remove(&prefix);
                        self.forget_unwatched();
                    }
                }
            }
            DirRequest::Load { core, busy_pct, sessions } => {
                if let Some(l) = self.load.get_mut(core) {
                    *l = (busy_pct, sessions);
                }
            }
            DirRequest::Drain(answer) => {
                let sibling = self.drain();
                let _ = answer.send(sibling);
            }
            DirRequest::Changed(suffix) => self.changed(&suffix),
            DirRequest::Resync => self.refresh(),
        }
    }

    fn tell(&self, core: usize, event: DirEvent) {
        if let Some(tx) = self.cores.get(core) {
            let _ = tx.send(event);
            if let Some(w) = self.wakers.get().and_then(|w| w.get(core)) {
                w.wake();
            }
        }
    }

    fn tell_all(&self, event: DirEvent) {
        for core in 0..self.cores.len() {
            self.tell(core, event.clone());
        }
    }

    /// Runs `f` on the Redis connection; `None` when Redis is unreachable or the command
    /// failed (the connection is then dropped and tried again after the backoff).
    fn redis<T>(&mut self, f: impl FnOnce(&mut redis::Connection) -> redis::RedisResult<T>) -> Option<T> {
        let c = self.conn.get(&self.stats)?;
        match f(c) {
            Ok(v) => Some(v),
            Err(e) => {
                self.conn.failed(&self.stats, &e);
                None
            }
        }
    }

    fn count_registered(&self) {
        let n = self.owned.values().filter(|o| o.held).count();
        self.stats.registered.store(n as u64, Ordering::Relaxed);
    }

    /// Claims (or refreshes) the entries of `namespaces` in one round trip.
    fn claim(&mut self, namespaces: &[TrackNamespace]) {
        if namespaces.is_empty() {
            return;
        }
        let lease = self.lease.as_millis() as u64;
        let mut pipe = redis::pipe();
        for ns in namespaces {
            pipe.cmd("EVAL").arg(CLAIM).arg(2).arg(self.keys.ns(ns)).arg(&self.keys.changes);
            pipe.arg(&self.me).arg(lease).arg(change(ns));
        }
        let results = self.redis(|c| pipe.query::<Vec<i64>>(c)).unwrap_or_default();
        for (ns, r) in namespaces.iter().zip(results) {
            let Some(o) = self.owned.get_mut(ns) else { continue };
            if o.held != (r == 1) {
                let ns = encode(ns);
                match r == 1 {
                    true => info!(namespace = %ns, "registered in the directory"),
                    false => info!(namespace = %ns, "held by another relay in the directory"),
                }
            }
            o.held = r == 1;
        }
        self.count_registered();
    }

    /// Removes our entries of `namespaces`.
    fn release(&mut self, namespaces: &[TrackNamespace]) {
        let mut pipe = redis::pipe();
        for ns in namespaces {
            pipe.cmd("EVAL").arg(RELEASE).arg(2).arg(self.keys.ns(ns)).arg(&self.keys.changes);
            pipe.arg(&self.me).arg(change(ns)).ignore();
        }
        self.redis(|c| pipe.query::<()>(c));
    }

    /// Every third of the lease: our entries and load are refreshed (entries we do not hold
    /// are claimed if free), the routes read again, the watched prefixes scanned again.
    fn refresh(&mut self) {
        let mine: Vec<TrackNamespace> = self.owned.keys().cloned().collect();
        self.claim(&mine);
        let (busy, sessions) = self.load.iter().fold((0u8, 0u64), |(b, s), (lb, ls)| (b.max(*lb), s + ls));
        let key = format!("{}{}", self.keys.relay, self.me);
        let lease = self.lease.as_millis() as u64;
        let load = format!("{busy} {sessions}");
        self.redis(|c| redis::cmd("SET").arg(key).arg(load).arg("PX").arg(lease).query::<()>(c));
        self.routes.retain(|_, r| r.as_ref().err().is_none_or(|since| since.elapsed() < ROUTE_FORGET));
        let prefixes: Vec<TrackNamespace> = self.routes.keys().cloned().collect();
        self.reread(&prefixes);
        let watched: Vec<TrackNamespace> = self.watches.keys().cloned().collect();
        for p in watched {
            self.scan(&p);
        }
    }

    /// The relay serving `namespace`: the longest registered prefix of it. A hit that is
    /// another relay becomes (or moves) the prefix's route.
    fn lookup(&mut self, namespace: &TrackNamespace) -> bool {
        let n = namespace.fields().len();
        let prefixes: Vec<TrackNamespace> =
            (1..=n).rev().map(|k| TrackNamespace(namespace.fields()[..k].to_vec())).collect();
        let keys: Vec<String> = prefixes.iter().map(|p| self.keys.ns(p)).collect();
        let Some(values) = self.redis(|c| mget(c, &keys)) else {
            self.stats.errors.fetch_add(1, Ordering::Relaxed);
            return false;
        };
        let hit = prefixes.into_iter().zip(values).find_map(|(p, v)| v.map(|url| (p, url)));
        match hit {
            Some((prefix, url)) if url != self.me && crate::config::moqt_host_port(&url).is_ok() => {
                if !self.routes.contains_key(&prefix) && self.routes.len() >= MAX_ROUTES {
                    warn!(limit = MAX_ROUTES, "directory routes at their limit: lookup answered as a miss");
                    self.stats.misses.fetch_add(1, Ordering::Relaxed);
                    return false;
                }
                self.stats.hits.fetch_add(1, Ordering::Relaxed);
                self.set_route(prefix, Some(url));
                true
            }
            _ => {
                self.stats.misses.fetch_add(1, Ordering::Relaxed);
                false
            }
        }
    }

    /// Routes `prefix` to `url` (`None`: to nobody), telling the cores of the links involved.
    fn set_route(&mut self, prefix: TrackNamespace, url: Option<String>) {
        let old = self.routes.get(&prefix).and_then(|r| r.clone().ok());
        if old == url {
            return;
        }
        let cores = self.cores.len();
        // The new route first: the link to the new relay takes the tracks before the old one
        // lets them go (make before break).
        if let Some(url) = &url {
            info!(prefix = %encode(&prefix), relay = %url, "directory route");
            let event = DirEvent::Route { url: url.clone(), prefix: prefix.clone(), on: true };
            self.tell(link_core(url, cores), event);
            self.routes.insert(prefix.clone(), Ok(url.clone()));
        } else {
            info!(prefix = %encode(&prefix), "directory route gone");
            self.routes.insert(prefix.clone(), Err(Instant::now()));
        }
        if let Some(old) = old {
            self.tell(link_core(&old, cores), DirEvent::Route { url: old, prefix, on: false });
        }
    }

    /// Reads the entries of routed `prefixes` again: moved ones move, gone ones go.
    fn reread(&mut self, prefixes: &[TrackNamespace]) {
        if prefixes.is_empty() {
            return;
        }
        let keys: Vec<String> = prefixes.iter().map(|p| self.keys.ns(p)).collect();
        let Some(values) = self.redis(|c| mget(c, &keys)) else { return };
        for (p, v) in prefixes.iter().zip(values) {
            let url = v.filter(|u| *u != self.me && crate::config::moqt_host_port(u).is_ok());
            self.set_route(p.clone(), url);
        }
    }

    /// Namespaces other relays registered under `prefix` (discovery).
    fn scan(&mut self, prefix: &TrackNamespace) {
        let text = encode(prefix);
        let patterns = if prefix.fields().is_empty() {
            vec![format!("{}*", self.keys.ns)]
        } else {
            vec![format!("{}{text}", self.keys.ns), format!("{}{text}/*", self.keys.ns)]
        };
        let Some((keys, values)) = self.redis(|c| {
            let mut keys = Vec::new();
            for pattern in &patterns {
                scan(c, pattern, &mut keys)?;
            }
            let values = mget(c, &keys)?;
            Ok((keys, values))
        }) else {
            return;
        };
        let mut found: HashSet<TrackNamespace> = HashSet::default();
        for (k, v) in keys.iter().zip(values) {
            let (Some(ns), Some(url)) = (k.strip_prefix(&self.keys.ns).and_then(decode), v) else { continue };
            if url != self.me && ns.starts_with(prefix) {
                found.insert(ns);
            }
        }
        let gone: Vec<TrackNamespace> =
            self.remote.iter().filter(|n| n.starts_with(prefix) && !found.contains(*n)).cloned().collect();
        for ns in gone {
            self.set_remote(ns, false);
        }
        for ns in found {
            self.set_remote(ns, true);
        }
    }

    fn set_remote(&mut self, ns: TrackNamespace, on: bool) {
        let changed = if on {
            self.remote.len() < MAX_REMOTE && self.remote.insert(ns.clone())
        } else {
            self.remote.remove(&ns)
        };
        if changed {
            self.tell_all(DirEvent::Remote { namespace: ns, on });
        }
    }

    /// Remote namespaces under no watched prefix any more are forgotten.
    fn forget_unwatched(&mut self) {
        let gone: Vec<TrackNamespace> =
            self.remote.iter().filter(|n| !self.watches.keys().any(|p| n.starts_with(p))).cloned().collect();
        for ns in gone {
            self.set_remote(ns, false);
        }
    }

    /// A change was published for key suffix `suffix` (`ns:<namespace>`).
    fn changed(&mut self, suffix: &str) {
        let Some(ns) = suffix.strip_prefix("ns:").and_then(decode) else { return };
        if self.owned.get(&ns).is_some_and(|o| !o.held) {
            self.claim(std::slice::from_ref(&ns)); // it may be free now: ours to take
        }
        if self.routes.contains_key(&ns) {
            self.reread(std::slice::from_ref(&ns));
        }
        if self.watches.keys().any(|p| ns.starts_with(p)) {
            let key = self.keys.ns(&ns);
            if let Some(v) = self.redis(|c| redis::cmd("GET").arg(key).query::<Option<String>>(c)) {
                let on = v.is_some_and(|u| u != self.me);
                self.set_remote(ns, on);
            }
        }
    }

    /// Removes our entries and load, and names the least loaded sibling.
    fn drain(&mut self) -> Option<String> {
        let mine: Vec<TrackNamespace> =
            self.owned.iter().filter(|(_, o)| o.held).map(|(n, _)| n.clone()).collect();
        self.release(&mine);
        self.owned.clear();
        self.count_registered();
        let relay_key = format!("{}{}", self.keys.relay, self.me);
        let pattern = format!("{}*", self.keys.relay);
        let (keys, values) = self.redis(|c| {
            let _ = redis::cmd("DEL").arg(&relay_key).query::<()>(c);
            let mut keys = Vec::new();
            scan(c, &pattern, &mut keys)?;
            keys.retain(|k| *k != relay_key);
            let values = mget(c, &keys)?;
            Ok((keys, values))
        })?;
        let best = keys
            .iter()
            .zip(values)
            .filter_map(|(k, v)| {
                let url = k.strip_prefix(&self.keys.relay)?;
                let v = v?;
                let (busy, sessions) = v.split_once(' ')?;
                let load = (busy.parse::<u64>().ok()?, sessions.parse::<u64>().ok()?);
                crate::config::moqt_host_port(url).ok()?;
                Some((load, url.to_string()))
            })
            .min();
        let sibling = best.map(|(_, url)| url);
        info!(sibling = ?sibling, "directory entries removed for drain");
        sibling
    }
}

/// Appends the keys matching `pattern` (SCAN, [`SCAN_MAX`] at most) to `keys`.
fn scan(c: &mut redis::Connection, pattern: &str, keys: &mut Vec<String>) -> redis::RedisResult<()> {
    let mut cursor = 0u64;
    loop {
        let (next, batch): (u64, Vec<String>) =
            redis::cmd("SCAN").arg(cursor).arg("MATCH").arg(pattern).arg("COUNT").arg(SCAN_COUNT).query(c)?;
        keys.extend(batch);
        cursor = next;
        if cursor == 0 || keys.len() >= SCAN_MAX {
            return Ok(());
        }
    }
}

/// The values of `keys` (MGET; nothing asked for none).
fn mget(c: &mut redis::Connection, keys: &[String]) -> redis::RedisResult<Vec<Option<String>>> {
    if keys.is_empty() {
        return Ok(Vec::new());
    }
    redis::cmd("MGET").arg(keys).query(c)
}

/// The payload of a change of `namespace`'s entry on the change channel.
fn change(namespace: &TrackNamespace) -> String {
    format!("ns:{}", encode(namespace))
}

/// The watch thread: subscribes to the change channel and hands what it hears to the
/// directory thread; after every (re)subscription a resync, since changes may have passed.
fn watch(client: redis::Client, channel: String, tx: Sender<DirRequest>) {
    let mut backoff = BACKOFF_MIN;
    loop {
        let result = (|| -> redis::RedisResult<()> {
            let mut conn = client.get_connection_with_timeout(IO_TIMEOUT)?;
            let mut pubsub = conn.as_pubsub();
            pubsub.subscribe(&channel)?;
            pubsub.set_read_timeout(Some(Duration::from_secs(1)))?;
            backoff = BACKOFF_MIN;
            if tx.send(DirRequest::Resync).is_err() {
                return Ok(());
            }
            loop {
                match pubsub.get_message() {
                    Ok(msg) => {
                        if let Ok(payload) = msg.get_payload::<String>() {
                            if tx.send(DirRequest::Changed(payload)).is_err() {
                                return Ok(());
                            }
                        }
                    }
                    Err(e) if e.is_timeout() => {}
                    Err(e) => return Err(e),
                }
            }
        })();
        match result {
            Ok(()) => return, // the directory thread is gone
            Err(e) => debug!(error = %e, "directory change channel lost; subscribing again"),
        }
        std::thread::sleep(backoff);
        backoff = (backoff * 2).min(BACKOFF_MAX);
    }
}

/// The directory's end for the relay of one core (held by the factory until the core takes
/// it).
pub type Ports = Arc<Mutex<Vec<Option<DirectoryPort>>>>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespaces_round_trip_through_keys() {
        let ns = TrackNamespace(vec![
            bytes::Bytes::from_static(b"live"),
            bytes::Bytes::from_static(b"a/b c*"),
            bytes::Bytes::from_static(&[0, 0xff]),
        ]);
        let text = encode(&ns);
        assert_eq!(text, "live/a%2Fb%20c%2A/%00%FF");
        assert_eq!(decode(&text), Some(ns));
        assert_eq!(decode("x/%G1"), None);
        assert_eq!(decode("x/%4"), None);
        assert_eq!(decode(""), None);
        let keys = Keys::new("c1");
        assert_eq!(keys.ns(&TrackNamespace::from_strs(&["live"])), "c1:ns:live");
    }

    #[test]
    fn a_url_has_one_link_core() {
        let a = link_core("moqt://a:1", 4);
        assert!(a < 4);
        assert_eq!(a, link_core("moqt://a:1", 4));
        assert_eq!(link_core("moqt://a:1", 1), 0);
    }
}
