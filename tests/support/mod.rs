//! Shared by the test files that declare `mod support;`: proptest strategies for the
//! version-neutral model (`strategies`), and delivery of one session's transmits to its peer
//! for the pair harnesses (`session`). Each file uses what it needs.
#![allow(dead_code)]

pub mod session;
pub mod strategies;
