//! Codec errors. Decoding distinguishes "need more bytes" (incremental parsing of a stream)
//! from a malformed encoding, which carries the session error code the spec demands.

use thiserror::Error;

/// Session termination codes shared by draft-16 and draft-22 (draft-16 §13.1.1 / draft-22 §16.11.1).
/// Only the codes a codec can cause are listed here; the session layer owns the full table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    /// PROTOCOL_VIOLATION (0x3).
    ProtocolViolation,
    /// KEY_VALUE_FORMATTING_ERROR (0x6).
    KeyValueFormatting,
}

impl ErrorCode {
    /// The code point on the wire (identical in every draft).
    pub const fn code(self) -> u64 {
        match self {
            ErrorCode::ProtocolViolation => 0x3,
            ErrorCode::KeyValueFormatting => 0x6,
        }
    }
}

/// Result of a decode that failed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DecodeError {
    /// The input ends before the item does; call again with more bytes.
    #[error("need more bytes")]
    NeedMore,
    /// The input can never decode; the session must close with `code`.
    #[error("{reason} ({code:?})")]
    Invalid { code: ErrorCode, reason: &'static str },
}

impl DecodeError {
    /// A PROTOCOL_VIOLATION with a static reason.
    pub const fn violation(reason: &'static str) -> Self {
        DecodeError::Invalid { code: ErrorCode::ProtocolViolation, reason }
    }

    /// A KEY_VALUE_FORMATTING_ERROR with a static reason.
    pub const fn kv_format(reason: &'static str) -> Self {
        DecodeError::Invalid { code: ErrorCode::KeyValueFormatting, reason }
    }

    /// Inside a length-delimited body (a control message, a parameter value), running out of
    /// bytes is not "need more": the length lied. Converts `NeedMore` into a violation.
    pub fn within_length(self, reason: &'static str) -> Self {
        match self {
            DecodeError::NeedMore => DecodeError::violation(reason),
            other => other,
        }
    }
}

/// Why a value from the model cannot be written in a dialect.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum EncodeError {
    /// The message, parameter or field does not exist in this dialect.
    #[error("{0} cannot be expressed in this draft")]
    Unsupported(&'static str),
    /// A value breaks a limit of the spec (length, count, range).
    #[error("value out of range: {0}")]
    OutOfRange(&'static str),
}
