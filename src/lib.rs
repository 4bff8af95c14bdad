//! moq-edge: a thread-per-core MoQT relay.
pub mod config;
pub mod wire;
