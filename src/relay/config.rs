//! The relay's settings: limits, timers, the PUBLISH forward policy and admission under
//! load, with their defaults.

use std::time::Duration;

use bytes::Bytes;

use crate::links;

/// What the relay's PUBLISH_OK asks of a publisher (draft-22 §9.9 FORWARD; draft-16 PUBLISH_OK
/// Forward): objects at once, or only while someone is subscribed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PublishForward {
    /// FORWARD=1 from the start and while the publisher stays: the relay takes the track,
    /// caches it, and a first subscriber starts at once from the cache. Publishers that never
    /// act on REQUEST_UPDATE work.
    #[default]
    Always,
    /// FORWARD=0 while nobody is subscribed, REQUEST_UPDATE FORWARD=1 when someone is (and 0
    /// again after the linger): ingest costs nothing while nobody watches.
    OnDemand,
}

/// Whether a core busy `busy_pct` percent of the last second is over the admission
/// threshold `threshold` (0 or 100: admission is off). The relay refuses new requests by it
/// (the runtime, with the same rule, new connections).
pub fn over_admission_threshold(busy_pct: u8, threshold: u8) -> bool {
    (1..100).contains(&threshold) && busy_pct > threshold
}

/// Relay limits and timers.
#[derive(Debug, Clone)]
pub struct RelayConfig {
    /// How long an upstream subscription outlives its last downstream subscriber (a quick
    /// re-subscribe reuses it).
    pub linger: Duration,
    /// How long a PUBLISH_DONE from upstream waits for the data streams it counts before it
    /// is passed on anyway.
    pub done_wait: Duration,
    /// Whether a publisher's PUBLISH is asked for objects at once or only while someone is
    /// subscribed.
    pub publish_forward: PublishForward,
    /// PUBLISH_NAMESPACE per session.
    pub max_namespaces_per_session: usize,
    /// Namespaces (SUBSCRIBE_NAMESPACE) or tracks (PUBLISH offers) one namespace subscription
    /// may match when it is made; past it, NAMESPACE_TOO_LARGE (draft-22; draft-16 has no
    /// such code: EXCESSIVE_LOAD).
    pub max_namespace_matches: usize,
    /// Downstream subscriptions and upstream PUBLISHes per session.
    pub max_subscriptions_per_session: usize,
    /// Tracks owned by one shard.
    pub max_tracks_per_shard: usize,
    /// Bytes a session may have queued beyond what QUIC flow control takes; past it its oldest
    /// subgroup streams are reset (CANCELLED) until half of it remains.
    pub max_backlog: usize,
    /// Bytes (`RelayMsg::weight`: payloads and the messages that carry them) this core may
    /// have queued toward one other core, the limit per core pair of the mesh's data path.
    /// Past half of it no new stream is forwarded there; an object that would pass it resets
    /// its stream there (EXCESSIVE_LOAD; `shed.rs`).
    pub mesh_queue: usize,
    /// Subgroup bytes a connection's QUIC stack may hold not yet sent; beyond it they wait in
    /// the session's queue (where `max_backlog` and `max_lag` apply) rather than in QUIC's,
    /// which on a loss-free path grows to the subscriber's whole flow-control window.
    pub max_unsent: usize,
    /// Bytes of objects this shard caches for late joiners and FETCH (0: none).
    pub cache_budget: usize,
    /// GOAWAY's New Session URI when the relay drains (empty: clients reconnect to the URI
    /// they used).
    pub goaway_uri: Bytes,
    /// A subscription that loses this many subgroup streams to its session's backlog (or to
    /// `max_lag`) within 10 s is ended with PUBLISH_DONE TOO_FAR_BEHIND; streams shed while
    /// the core is over its admission threshold (the relay is what falls behind) do not count.
    pub too_far_behind_streams: u32,
    /// Input that waited this long in the socket before the core read it means the core is
    /// behind its input (a core keeping up reads it within a turn, a few milliseconds);
    /// streams shed in the [`BEHIND_WINDOW`](crate::BEHIND_WINDOW) after do not count toward TOO_FAR_BEHIND.
    pub behind_lag: Duration,
    /// The freshness budget of live delivery: an object not handed to QUIC within this of its
    /// arrival is not sent, and its subgroup stream is reset (DELIVERY_TIMEOUT), as under a
    /// delivery timeout (draft-22 §5.2) but for every subscription; a subscriber's own smaller
    /// timeouts apply as they are. `None`: no budget.
    pub max_lag: Option<Duration>,
    /// The longest a SUBSCRIBE is held for a publisher to appear (draft-22
    /// RENDEZVOUS_TIMEOUT asks; the relay may shorten it).
    pub max_rendezvous: Duration,
    /// Token keys: `Some` requires a token for every request (`auth`); `None` is open
    /// mode (tokens are ignored).
    pub auth: Option<auth::KeyRing>,
    /// MAX_AUTH_TOKEN_CACHE_SIZE the relay offers when tokens are required (bytes per session).
    pub auth_cache: usize,
    /// This relay's node ID (random per process), named in every SETUP to detect routing
    /// loops between relays (`links`).
    pub node_id: u64,
    /// Admission under load: while the runtime says the core was busier than this
    /// percentage (`Input::Load`), new SUBSCRIBE, FETCH and namespace
    /// subscriptions are refused with EXCESSIVE_LOAD; 0 (or 100): never.
    pub admission_busy_pct: u8,
    /// Sessions are admitted by the platform's service (`auth = "http"`, `admission.rs`):
    /// each waits, its events held, until the host hands in the verdict on its SETUP's and
    /// URL's tokens, whose grants then authorize every request of it (the requests' own
    /// tokens are not read). `auth` is then a key ring that verifies nothing.
    pub admission: bool,
    /// A namespace directory is configured (`directory.rs`): announcements are registered
    /// there, and tracks nothing here serves are looked up there.
    pub directory: bool,
    /// Event hooks are configured: announcements and PUBLISHes are recorded for them
    /// ([`RelayShard::take_events`](crate::RelayShard::take_events)).
    pub events: bool,
}

impl RelayConfig {
    /// The SETUP options the relay's sessions send.
    pub fn server_setup(&self) -> wire::model::SetupOptions {
        wire::model::SetupOptions {
            max_auth_token_cache_size: self.auth.as_ref().map(|_| self.auth_cache as u64),
            implementation: Some(links::implementation(self.node_id)),
            ..Default::default()
        }
    }

    /// The SETUP options of the relay's upstream links: its node ID, and `token` (if any).
    pub fn link_setup(&self, token: Option<&str>) -> wire::model::SetupOptions {
        let auth_tokens = token
            .map(|t| wire::model::AuthToken::UseValue { token_type: 0, value: Bytes::from(t.to_string()) })
            .into_iter()
            .collect();
        wire::model::SetupOptions {
            implementation: Some(links::implementation(self.node_id)),
            auth_tokens,
            ..Default::default()
        }
    }
}

impl Default for RelayConfig {
    fn default() -> Self {
        RelayConfig {
            linger: Duration::from_secs(2),
            done_wait: Duration::from_secs(2),
            publish_forward: PublishForward::Always,
            max_namespaces_per_session: 256,
            max_namespace_matches: 10_000,
            max_subscriptions_per_session: 1024,
            max_tracks_per_shard: 100_000,
            max_backlog: 1 << 20,
            max_unsent: 128 << 10,
            mesh_queue: 8 << 20,
            cache_budget: 64 << 20,
            goaway_uri: Bytes::new(),
            too_far_behind_streams: 4,
            behind_lag: Duration::from_millis(25),
            max_lag: Some(Duration::from_secs(2)),
            max_rendezvous: Duration::from_secs(30),
            auth: None,
            auth_cache: 4096,
            node_id: random_node_id(),
            admission_busy_pct: 0,
            directory: false,
            events: false,
            admission: false,
        }
    }
}

/// A random node ID (a relay's identity between relays).
pub(crate) fn random_node_id() -> u64 {
    let mut b = [0u8; 8];
    // The CSPRNG does not fail on supported platforms; a zero ID would still work (it only
    // has to differ from the parents' and children's).
    let _ = ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut b);
    u64::from_le_bytes(b)
}
