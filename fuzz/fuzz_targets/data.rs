//! The data plane of every draft: stream headers, subgroup objects, fetch items and datagrams
//! from arbitrary bytes never panic and never claim more bytes than given; decoded subgroup
//! objects and fetch items re-encode to the same values. The first byte picks draft and mode.
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
    codec_driver::data(data);
});
