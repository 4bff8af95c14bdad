//! Shared by the session tests (and, by path, the client and relay tests): delivery of one
//! session's transmits to its peer for the pair harnesses.
#![allow(dead_code)]

pub mod session;
