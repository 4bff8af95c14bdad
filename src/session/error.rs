//! Session errors: the session termination code table of every draft ([`SessionCode`],
//! draft-16 §13.1.1 "Session Termination Error Codes", draft-18 §3.5 / §15.10.1, draft-22
//! §12.2 / §16.11.1), the
//! [`SessionError`] that the session's commands return, and the mapping from a codec's
//! [`DecodeError::Invalid`](wire::DecodeError) onto a termination code.

use thiserror::Error;

use crate::StreamId;

use wire::{DecodeError, EncodeError, ErrorCode};

/// A session termination code (the application error code of CONNECTION_CLOSE). The union of
/// draft-16, draft-18 and draft-22; the code points agree where several define a name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SessionCode {
    /// NO_ERROR (0x0).
    NoError,
    /// INTERNAL_ERROR (0x1).
    InternalError,
    /// UNAUTHORIZED (0x2).
    Unauthorized,
    /// PROTOCOL_VIOLATION (0x3).
    ProtocolViolation,
    /// INVALID_REQUEST_ID (0x4).
    InvalidRequestId,
    /// DUPLICATE_TRACK_ALIAS (0x5).
    DuplicateTrackAlias,
    /// KEY_VALUE_FORMATTING_ERROR (0x6).
    KeyValueFormatting,
    /// TOO_MANY_REQUESTS (0x7), draft-16 only.
    TooManyRequests,
    /// INVALID_PATH (0x8).
    InvalidPath,
    /// MALFORMED_PATH (0x9).
    MalformedPath,
    /// GOAWAY_TIMEOUT (0x10).
    GoawayTimeout,
    /// CONTROL_MESSAGE_TIMEOUT (0x11).
    ControlMessageTimeout,
    /// DATA_STREAM_TIMEOUT (0x12).
    DataStreamTimeout,
    /// AUTH_TOKEN_CACHE_OVERFLOW (0x13).
    AuthTokenCacheOverflow,
    /// DUPLICATE_AUTH_TOKEN_ALIAS (0x14).
    DuplicateAuthTokenAlias,
    /// VERSION_NEGOTIATION_FAILED (0x15), draft-16 and draft-18.
    VersionNegotiationFailed,
    /// MALFORMED_AUTH_TOKEN (0x16).
    MalformedAuthToken,
    /// UNKNOWN_AUTH_TOKEN_ALIAS (0x17).
    UnknownAuthTokenAlias,
    /// EXPIRED_AUTH_TOKEN (0x18).
    ExpiredAuthToken,
    /// INVALID_AUTHORITY (0x19).
    InvalidAuthority,
    /// MALFORMED_AUTHORITY (0x1A).
    MalformedAuthority,
    /// TOO_MANY_REQUEST_UPDATES (0x1B), draft-22 only.
    TooManyRequestUpdates,
}

impl SessionCode {
    /// The code point on the wire.
    pub const fn code(self) -> u64 {
        match self {
            SessionCode::NoError => 0x0,
            SessionCode::InternalError => 0x1,
            SessionCode::Unauthorized => 0x2,
            SessionCode::ProtocolViolation => 0x3,
            SessionCode::InvalidRequestId => 0x4,
            SessionCode::DuplicateTrackAlias => 0x5,
            SessionCode::KeyValueFormatting => 0x6,
            SessionCode::TooManyRequests => 0x7,
            SessionCode::InvalidPath => 0x8,
            SessionCode::MalformedPath => 0x9,
            SessionCode::GoawayTimeout => 0x10,
            SessionCode::ControlMessageTimeout => 0x11,
            SessionCode::DataStreamTimeout => 0x12,
            SessionCode::AuthTokenCacheOverflow => 0x13,
            SessionCode::DuplicateAuthTokenAlias => 0x14,
            SessionCode::VersionNegotiationFailed => 0x15,
            SessionCode::MalformedAuthToken => 0x16,
            SessionCode::UnknownAuthTokenAlias => 0x17,
            SessionCode::ExpiredAuthToken => 0x18,
            SessionCode::InvalidAuthority => 0x19,
            SessionCode::MalformedAuthority => 0x1A,
            SessionCode::TooManyRequestUpdates => 0x1B,
        }
    }
}

impl From<ErrorCode> for SessionCode {
    fn from(c: ErrorCode) -> Self {
        match c {
            ErrorCode::ProtocolViolation => SessionCode::ProtocolViolation,
            ErrorCode::KeyValueFormatting => SessionCode::KeyValueFormatting,
        }
    }
}

/// Why a session command failed, or why the session closed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SessionError {
    /// The session is closed; nothing more can be sent.
    #[error("session closed")]
    Closed,
    /// The SETUP exchange has not finished (draft-16: the peer's MAX_REQUEST_ID is unknown).
    #[error("session not ready")]
    NotReady,
    /// draft-16: the peer's MAX_REQUEST_ID forbids a new request; REQUESTS_BLOCKED was queued.
    #[error("request IDs blocked by the peer's MAX_REQUEST_ID {max}")]
    Blocked { max: u64 },
    /// draft-22: the peer's MAX_REQUEST_UPDATES unanswered REQUEST_UPDATEs are outstanding
    /// on that request; send it once one is answered.
    #[error("REQUEST_UPDATE blocked by the peer's MAX_REQUEST_UPDATES {max}")]
    UpdatesBlocked { max: u64 },
    /// The message names a request this session does not know (or has no stream for).
    #[error("unknown request {0}")]
    UnknownRequest(u64),
    /// No open data stream of ours has this id.
    #[error("unknown data stream {0}")]
    UnknownStream(StreamId),
    /// The message cannot be sent with this API (for example NAMESPACE without its request).
    #[error("{0} cannot be sent here")]
    Misrouted(&'static str),
    /// The message cannot be encoded in this session's draft.
    #[error("encode: {0}")]
    Encode(#[from] EncodeError),
    /// A protocol violation: the session closes with `code`.
    #[error("{reason} (code {:#x})", code.code())]
    Protocol { code: SessionCode, reason: String },
}

impl SessionError {
    /// A protocol error with `code` and `reason`.
    pub fn protocol(code: SessionCode, reason: impl Into<String>) -> Self {
        SessionError::Protocol { code, reason: reason.into() }
    }

    /// A PROTOCOL_VIOLATION.
    pub fn violation(reason: impl Into<String>) -> Self {
        SessionError::protocol(SessionCode::ProtocolViolation, reason)
    }
}

impl From<DecodeError> for SessionError {
    /// `Invalid` maps onto its termination code. `NeedMore` reaching this point means the input
    /// ended where no more can come (a FIN inside a message): a PROTOCOL_VIOLATION.
    fn from(e: DecodeError) -> Self {
        match e {
            DecodeError::NeedMore => SessionError::violation("stream ended inside a message"),
            DecodeError::Invalid { code, reason } => SessionError::protocol(code.into(), reason),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn code_points_match_draft16_13_1_1_and_draft22_12_2() {
        use SessionCode::*;
        let table = [
            (NoError, 0x0),
            (InternalError, 0x1),
            (Unauthorized, 0x2),
            (ProtocolViolation, 0x3),
            (InvalidRequestId, 0x4),
            (DuplicateTrackAlias, 0x5),
            (KeyValueFormatting, 0x6),
            (TooManyRequests, 0x7),
            (InvalidPath, 0x8),
            (MalformedPath, 0x9),
            (GoawayTimeout, 0x10),
            (ControlMessageTimeout, 0x11),
            (DataStreamTimeout, 0x12),
            (AuthTokenCacheOverflow, 0x13),
            (DuplicateAuthTokenAlias, 0x14),
            (VersionNegotiationFailed, 0x15),
            (MalformedAuthToken, 0x16),
            (UnknownAuthTokenAlias, 0x17),
            (ExpiredAuthToken, 0x18),
            (InvalidAuthority, 0x19),
            (MalformedAuthority, 0x1A),
            (TooManyRequestUpdates, 0x1B),
        ];
        for (c, v) in table {
            assert_eq!(c.code(), v);
        }
    }

    #[test]
    fn decode_errors_map_to_codes() {
        let e: SessionError = DecodeError::kv_format("x").into();
        assert!(matches!(e, SessionError::Protocol { code: SessionCode::KeyValueFormatting, .. }));
        let e: SessionError = DecodeError::violation("y").into();
        assert!(matches!(e, SessionError::Protocol { code: SessionCode::ProtocolViolation, .. }));
    }
}
