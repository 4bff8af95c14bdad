//! Network impairment for the bench harness: a sans-IO model of a lossy, delaying,
//! rate-limited path ([`Link`]) and a UDP proxy that puts it between QUIC clients and a relay
//! ([`proxy::Proxy`], the `moq-impair` binary).

pub mod config;
mod link;
pub mod proxy;
mod rng;

pub use link::{Cause, Fate, GilbertElliott, JitterDist, Link, Phase, Schedule, Settings, Stats};
pub use rng::Rng;

#[cfg(test)]
mod tests;
