//! Session errors: the [`SessionError`] that the session's commands return, and the mapping
//! from a codec's [`DecodeError::Invalid`](wire::DecodeError) onto a termination code
//! ([`SessionCode`], whose table of every draft is `wire`'s: the codes a session closes with
//! are named by the layers that decide them, `auth` among them, without the session).

use thiserror::Error;

use crate::StreamId;

pub use wire::SessionCode;
use wire::{DecodeError, EncodeError};

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
    Blocked {
        /// The peer's MAX_REQUEST_ID.
        max: u64,
    },
    /// draft-22: the peer's MAX_REQUEST_UPDATES unanswered REQUEST_UPDATEs are outstanding
    /// on that request; send it once one is answered.
    #[error("REQUEST_UPDATE blocked by the peer's MAX_REQUEST_UPDATES {max}")]
    UpdatesBlocked {
        /// The peer's MAX_REQUEST_UPDATES.
        max: u64,
    },
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
    Protocol {
        /// The session termination code.
        code: SessionCode,
        /// What was wrong.
        reason: String,
    },
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
