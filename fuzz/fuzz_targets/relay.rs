//! Several relay shards (simulated cores, mesh and clock: the relay-shard harness of
//! `src/relay/tests/shards/harness.rs`) and up to eight clients of any draft driven by arbitrary actions
//! (publish, subscribe, accept, objects, datagrams, FETCH, cancel, update, raw bytes, disconnect,
//! time steps, a stuck core): never a panic, one client's action never closes another's
//! session, a well-behaved client never rejects what the relay sends, and nothing is left on
//! any core once every client is gone. The driver lives in `src/relay_driver.rs`, which
//! `src/relay/tests/shards/fuzz.rs` in the relay crate shares.
#![no_main]

use libfuzzer_sys::fuzz_target;

/// The harness and the helpers it needs, from the relay crate's tests (by path).
#[path = "../../src/session/tests/support/session.rs"]
#[allow(dead_code)]
pub mod support_session;
mod support {
    pub use super::support_session as session;
}
#[path = "../../src/relay/tests/shards/common.rs"]
#[allow(dead_code)]
mod common;
#[path = "../../src/relay/tests/shards/harness.rs"]
#[allow(dead_code)]
mod harness;
/// The draft table the drivers' inputs select from.
#[path = "../src/drafts.rs"]
#[allow(dead_code)]
mod drafts;

#[path = "../src/relay_driver.rs"]
#[allow(dead_code)] // what only the corpus test uses (seed writing)
mod relay_driver;

fuzz_target!(|data: &[u8]| {
    relay_driver::Driver::run(data);
});
