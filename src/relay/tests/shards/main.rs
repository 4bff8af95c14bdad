//! The relay core end to end without QUIC: several [`RelayShard`]s (simulated cores) joined by
//! FIFO mesh queues, with draft-16 and draft-22 client sessions attached to them, driven by a
//! simulated clock (`harness.rs`). Every scenario runs for each draft and for a draft-16
//! publisher with draft-22 subscribers and the reverse; assertions are on the messages and
//! object bytes the clients see and on the shards' state counts.
//!
//! One module per area; what the clients do is in `actions.rs` (methods on the harness's
//! [`Relay`](harness::Relay)), the messages, objects and assertions they share in `common.rs`.
//!
//! [`RelayShard`]: relay::RelayShard
#![allow(clippy::unwrap_used)]

/// The session crate's test helper: one session's transmits delivered to its peer.
#[path = "../../../session/tests/support/session.rs"]
#[allow(dead_code)]
pub mod support_session;
mod support {
    pub use super::support_session as session;
}

mod actions;
mod common;
/// The `relay` fuzz target's driver (`fuzz.rs` replays its corpus).
/// The draft table the drivers' inputs select from.
#[path = "../../../../fuzz/src/drafts.rs"]
#[allow(dead_code)]
mod drafts;
mod harness;
/// Committed fuzzing corpora, one file per target.
#[path = "../../../../fuzz/src/pack.rs"]
mod pack;

#[path = "../../../../fuzz/src/relay_driver.rs"]
mod relay_driver;

mod fuzz;

mod admission;
mod auth;
mod directory;
mod discovery;
mod ends;
mod fetch;
mod linger;
mod links;
mod live;
mod moves;
mod platform;
mod publish;
mod timeouts;
mod update;
