//! moq-edge: a thread-per-core MoQT relay.
//!
//! Layers (see ARCHITECTURE.md): [`wire`] (codecs), [`runtime`] (executors, sockets, QUIC,
//! mesh), [`client`] (the QUIC/MoQT client our tests and benchmarks use), [`config`],
//! [`metrics`] (the Prometheus and health endpoint), [`web`] (the watch page and the
//! certificate hash over HTTP).
pub mod auth;
pub mod client;
pub mod config;
pub mod hash;
pub mod metrics;
pub mod relay;
pub mod runtime;
pub mod session;
pub mod web;
pub mod webtransport;
pub mod wire;
