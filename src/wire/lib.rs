//! `wire`: the MoQT codecs, sans-IO. No I/O, clocks or logging; no panics on any input;
//! decoders never read past what they are given and report "need more bytes" distinctly.
//!
//! - [`model`]: the version-neutral types every layer above uses.
//! - [`d14`]: draft-ietf-moq-transport-14 (ALPN `moq-00`, not served yet), QUIC varints; what
//!   it shares with draft-16 is [`d16`]'s.
//! - [`d16`]: draft-ietf-moq-transport-16 (ALPN `moqt-16`), QUIC varints.
//! - [`control`], [`params`]: the control codec of the request-stream drafts, 18, 20 and 22
//!   (ALPNs `moqt-18`, `moqt-20`, `moqt-22`), `vi64` integers, written once; [`dialect`] is
//!   the table of where each differs.
//! - [`d18`], [`d22`]: the data-plane rules of draft-18 and draft-22 (draft-20's are
//!   draft-22's).
//! - [`typed_forms`]: the Subscription Filter and typed FETCH that drafts 16 and 18 share.
//! - [`data`]: data-plane logic shared by the dialects (each fixes its rules).
//! - [`Version`]: the ALPN table and one entry point per operation, dispatching by draft.

pub mod codec;
pub mod codes;
pub mod common;
pub mod control;
pub mod d14;
pub mod d16;
pub mod d18;
pub mod d22;
pub mod data;
pub mod dialect;
pub mod error;
pub mod model;
pub mod params;
mod streams;
pub mod typed_forms;
pub mod varint;
mod version;

pub use codes::{code, DoneStatus, RequestErrorCode, ResetCode};
pub use error::{DecodeError, EncodeError, ErrorCode};
pub use streams::{FetchReader, FetchWriter, SubgroupReader, SubgroupWriter};
pub use varint::{Quic, VarInt, Vi64};
pub use version::{ControlCodec, Version};
