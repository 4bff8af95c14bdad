//! Shared by the test files that declare `mod support;`: delivery of one session's transmits
//! to its peer for the pair harnesses (`session`, the session crate's own test helper).
#![allow(dead_code)]

#[path = "../../src/session/tests/support/session.rs"]
pub mod session;
