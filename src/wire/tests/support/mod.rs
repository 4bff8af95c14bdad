//! Shared by the wire tests: proptest strategies for the version-neutral model, and a builder
//! of vi64 wire bytes.
#![allow(dead_code)]

pub mod strategies;
pub mod vi64;
