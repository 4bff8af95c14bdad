//! Shared by the wire tests: proptest strategies for the version-neutral model.
#![allow(dead_code)]

pub mod strategies;
