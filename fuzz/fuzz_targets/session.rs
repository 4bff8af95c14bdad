//! A whole server `Session` of any draft driven by arbitrary actions (stream bytes, FIN,
//! resets, STOP_SENDING, datagrams, time steps, answers): never a panic, every close with a
//! session termination code, and buffered memory within the configured limits. The driver
//! lives in `src/session_driver.rs`, which `tests/fuzz_corpus.rs` in the main crate shares.
#![no_main]

use libfuzzer_sys::fuzz_target;

/// The draft table the drivers' inputs select from.
#[path = "../src/drafts.rs"]
#[allow(dead_code)]
mod drafts;

#[path = "../src/session_driver.rs"]
#[allow(dead_code)] // what only the corpus test uses (seed writing)
mod session_driver;

fuzz_target!(|data: &[u8]| {
    session_driver::run(data);
});
