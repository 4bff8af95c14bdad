//! `wire`: the MoQT codecs, sans-IO. No I/O, clocks or logging; no panics on any input;
//! decoders never read past what they are given and report "need more bytes" distinctly.
//!
//! - [`model`]: the version-neutral types every layer above uses.
//! - [`d16`]: draft-ietf-moq-transport-16 (ALPN `moqt-16`), QUIC varints.
//! - [`d18`]: draft-ietf-moq-transport-18 (ALPN `moqt-18`), `vi64` integers, draft-16's FETCH.
//! - [`d22`]: draft-ietf-moq-transport-22 (ALPN `moqt-22`), `vi64` integers.
//! - [`data`]: data-plane logic shared by the dialects (each fixes its rules).
//! - [`Version`]: the ALPN table and one entry point per operation, dispatching by draft.

pub mod codec;
pub mod codes;
pub mod common;
pub mod d16;
pub mod d18;
pub mod d22;
pub mod data;
pub mod error;
pub mod model;
pub mod varint;
mod version;

pub use codes::{code, DoneStatus, RequestErrorCode, ResetCode};
pub use error::{DecodeError, EncodeError, ErrorCode};
pub use varint::{Quic, VarInt, Vi64};
pub use version::{FetchWriter, Version};
