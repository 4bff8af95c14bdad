//! moq-edge: a thread-per-core MoQT relay.
//!
//! The `moq-edge` package is the top of the workspace's layers (ARCHITECTURE.md, "Crates"):
//! [`config`] (flags and the TOML file), [`host`] (the glue that runs the [`relay`] on the
//! [`runtime`]: one relay shard per core, MoQT sessions on its connections, the Redis
//! directory), [`metrics`] (the Prometheus and health endpoint) and [`web`] (the watch page
//! and the certificate hash over HTTP). The layer crates are re-exported under their names.
//!
//! # host
//!
//! `host/mod.rs` runs the relay on the cores: `RelayFactory` (the runtime's `AppFactory`), one
//! `RelayShard` per core behind `Rc<RefCell<_>>` (`RelayHost`, the `ShardApp` whose message is
//! `RelayMsg`), each connection a `RelayConn` (a `Pump` and the shard's event handling), per-core
//! gauges (`RelayGauges`). It executes the link slots' commands (DNS on a short-lived thread,
//! connect, close) and keeps links alive (5 s idle timeout, a keep-alive every second). Beside it:
//! `host/redis_client.rs` (the directory's Redis client, threads "moq-edge-directory" and
//! "moq-edge-dir-watch", backoff 250 ms doubling to 5 s), `host/events.rs` (the event hooks'
//! events and delivery threads), `host/admission.rs` (the admission service's four workers and
//! cache), `host/side_door.rs` (the HTTP side doors' queries, answered by the cores between turns).
//!
//! # metrics and web
//!
//! `metrics` reads the runtime's `ShardStats`, the relay's counters and the host's gauges on
//! scrape; the relay-delay histogram is merged into a shared one under a mutex about once a
//! second. `web` serves the page and `/certificate.sha256` (the SHA-256 of the leaf's DER, as
//! lowercase hex, from the identity in force) on the QUIC port's TCP twin; its slots
//! (`web/slots.rs`: 256 to 4,096 a core, at most a quarter of RLIMIT_NOFILE; a sixteenth per
//! client address or IPv6 /64) and whole-request deadlines keep a thread per connection from being
//! a door a slow client can shut. A head whose lines end with a bare LF is answered 400.
pub mod config;
pub mod host;
pub mod metrics;
pub mod web;
pub mod websocket;

pub use auth;
pub use client;
pub use media;
pub use moqt;
pub use qmux;
pub use relay;
pub use runtime;
pub use session;
pub use webtransport;
pub use wire;
