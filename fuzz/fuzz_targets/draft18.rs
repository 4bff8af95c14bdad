//! draft-18, control and data plane: arbitrary bytes never panic a decoder nor make it claim
//! more bytes than given; whatever decodes re-encodes and decodes to the same value. The first
//! byte picks the plane and, for control messages, role and stream; for data, the mode.
//! The body lives in `src/codec_driver.rs`, which `tests/fuzz_corpus.rs` in the main crate
//! shares (its committed corpus replays under plain `cargo test`).
#![no_main]

use libfuzzer_sys::fuzz_target;

/// The draft table the drivers' inputs select from.
#[path = "../src/drafts.rs"]
#[allow(dead_code)]
mod drafts;

#[path = "../src/codec_driver.rs"]
#[allow(dead_code)] // each target uses one of its entry points
mod codec_driver;

fuzz_target!(|data: &[u8]| {
    codec_driver::draft18(data);
});
