//! moq-edge: a thread-per-core MoQT relay.
//!
//! The `moq-edge` package is the top of the workspace's layers (ARCHITECTURE.md, "Crates"):
//! [`config`] (flags and the TOML file), [`host`] (the glue that runs the [`relay`] on the
//! [`runtime`]: one relay shard per core, MoQT sessions on its connections, the Redis
//! directory), [`metrics`] (the Prometheus and health endpoint) and [`web`] (the watch page
//! and the certificate hash over HTTP). The layer crates are re-exported under their names.
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
