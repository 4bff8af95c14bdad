//! The code points the client uses, written out from the drafts' IANA tables (draft-16 §13
//! "REQUEST_ERROR Codes" / "PUBLISH_DONE Codes" / "Data Stream Reset Error Codes"; draft-22
//! §16.11.2-§16.11.4). Only codes with the same value in every draft are here: draft-22 swapped
//! EXPIRED and TOO_FAR_BEHIND in PUBLISH_DONE (0x6 / 0x5 there, 0x5 / 0x6 in draft-16).

/// REQUEST_ERROR codes (0x10 DOES_NOT_EXIST in every draft).
pub mod request_error {
    pub const INTERNAL_ERROR: u64 = 0x0;
    pub const UNAUTHORIZED: u64 = 0x1;
    pub const TIMEOUT: u64 = 0x2;
    pub const NOT_SUPPORTED: u64 = 0x3;
    pub const DOES_NOT_EXIST: u64 = 0x10;
    pub const INVALID_RANGE: u64 = 0x11;
    pub const UNINTERESTED: u64 = 0x20;
}

/// PUBLISH_DONE status codes.
pub mod publish_done {
    pub const INTERNAL_ERROR: u64 = 0x0;
    pub const UNAUTHORIZED: u64 = 0x1;
    pub const TRACK_ENDED: u64 = 0x2;
    pub const GOING_AWAY: u64 = 0x4;
    pub const UPDATE_FAILED: u64 = 0x8;
}

/// Data stream reset codes.
pub mod reset {
    pub const INTERNAL_ERROR: u64 = 0x0;
    pub const CANCELLED: u64 = 0x1;
}
