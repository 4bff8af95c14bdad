//! The HTTP side doors' way to the cores (`GET /announced`, `GET /fetch`; README.md "HTTP
//! side doors"). A request on one of the web listener's connection threads becomes a
//! [`Query`] on a core's channel (and a wake-up); the core answers it after its turn
//! (`RelayShard::namespaces_under`, `RelayShard::cached_group`) and the thread waits for the
//! answer a bounded time. The listener bounds its connections, and each waits for one
//! answer at a time, so the queries in flight are bounded by the listener's slots.

use std::sync::mpsc::{self, Receiver, Sender, SyncSender};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use bytes::Bytes;
use relay::alias::{owner, AliasKey};
use relay::RelayShard;
use runtime::mesh::Waker;
use wire::model::{FullTrackName, TrackNamespace};

/// What a side door asks a core.
#[derive(Debug, Clone)]
pub enum Ask {
    /// The namespaces at or below this prefix.
    Namespaces(TrackNamespace),
    /// A group of a track (the newest cached when `None`), from its owner core's cache.
    Group { track: FullTrackName, group: Option<u64> },
}

/// A core's answer.
#[derive(Debug, Clone)]
pub enum Answer {
    Namespaces(Vec<TrackNamespace>),
    /// The group's number and its objects' payloads, in order; `None`: not cached.
    Group(Option<(u64, Vec<Bytes>)>),
}

/// One question for a core, and where its answer goes.
#[derive(Debug)]
pub struct Query {
    ask: Ask,
    reply: SyncSender<Answer>,
}

/// Each core's end, taken by the core when it starts (as the directory's ports are).
pub type Ports = Arc<Mutex<Vec<Option<Receiver<Query>>>>>;

/// The web listener's end (cheap to clone).
#[derive(Clone)]
pub struct SideDoor {
    cores: Vec<Sender<Query>>,
    wakers: Arc<OnceLock<Vec<Waker>>>,
    /// The relay's Track Alias key: which core owns (and caches) a track.
    key: AliasKey,
}

impl std::fmt::Debug for SideDoor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SideDoor").field("cores", &self.cores.len()).finish()
    }
}

/// The side door of a relay of `cores` cores whose Track Alias key is `key`, and the cores'
/// ends.
pub fn new(cores: usize, key: AliasKey) -> (SideDoor, Ports) {
    let (senders, receivers): (Vec<_>, Vec<_>) = (0..cores).map(|_| mpsc::channel()).unzip();
    let ports = Arc::new(Mutex::new(receivers.into_iter().map(Some).collect()));
    (SideDoor { cores: senders, wakers: Arc::default(), key }, ports)
}

impl SideDoor {
    /// The cores' doorbells, once the server runs.
    pub fn set_wakers(&self, wakers: Vec<Waker>) {
        let _ = self.wakers.set(wakers);
    }

    /// Every namespace under `prefix` this relay can serve (every core's answer together, in
    /// the first core's order), or `None` when a core did not answer within `within`.
    pub fn namespaces(&self, prefix: &TrackNamespace, within: Duration) -> Option<Vec<TrackNamespace>> {
        let end = Instant::now() + within;
        let waiting: Vec<_> = (0..self.cores.len())
            .map(|core| self.send(core, Ask::Namespaces(prefix.clone())))
            .collect::<Option<_>>()?;
        let mut all: Vec<TrackNamespace> = Vec::new();
        for rx in waiting {
            let Ok(Answer::Namespaces(list)) = rx.recv_timeout(end.saturating_duration_since(Instant::now()))
            else {
                return None;
            };
            for n in list {
                if !all.contains(&n) {
                    all.push(n);
                }
            }
        }
        Some(all)
    }

    /// Group `group` (the newest when `None`) of `track` from its owner core's cache:
    /// `Some(None)` when it is not cached, `None` when the core did not answer in time.
    pub fn group(
        &self,
        track: &FullTrackName,
        group: Option<u64>,
        within: Duration,
    ) -> Option<Option<(u64, Vec<Bytes>)>> {
        let core = owner(self.key.alias(track), self.cores.len());
        let rx = self.send(core, Ask::Group { track: track.clone(), group })?;
        match rx.recv_timeout(within) {
            Ok(Answer::Group(g)) => Some(g),
            _ => None,
        }
    }

    fn send(&self, core: usize, ask: Ask) -> Option<Receiver<Answer>> {
        let (reply, rx) = mpsc::sync_channel(1);
        self.cores.get(core)?.send(Query { ask, reply }).ok()?;
        if let Some(w) = self.wakers.get().and_then(|w| w.get(core)) {
            w.wake();
        }
        Some(rx)
    }
}

/// A core answers what was asked of it since its last turn.
pub fn answer(port: &Receiver<Query>, relay: &RelayShard, now: Instant) {
    for q in port.try_iter() {
        let answer = match &q.ask {
            Ask::Namespaces(prefix) => Answer::Namespaces(relay.namespaces_under(prefix)),
            Ask::Group { track, group } => Answer::Group(relay.cached_group(track, *group, now)),
        };
        // Err: the asker gave up waiting; nothing to do.
        let _ = q.reply.try_send(answer);
    }
}
