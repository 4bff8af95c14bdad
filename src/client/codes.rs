//! The code points the client uses, by the names of the drafts' IANA tables (draft-16 §13
//! "REQUEST_ERROR Codes" / "PUBLISH_DONE Codes" / "Data Stream Reset Error Codes"; draft-22
//! §16.11.2-§16.11.4), taken from `wire::code`, which holds every draft's. Only codes with the
//! same value in drafts 16 to 22 are here: draft-22 swapped EXPIRED and TOO_FAR_BEHIND in
//! PUBLISH_DONE (0x6 / 0x5 there, 0x5 / 0x6 in draft-16).

/// REQUEST_ERROR codes (0x10 DOES_NOT_EXIST in every draft but draft-14).
pub mod request_error {
    pub use wire::code::{
        DOES_NOT_EXIST, INTERNAL_ERROR, INVALID_RANGE, NOT_SUPPORTED, TIMEOUT, UNAUTHORIZED, UNINTERESTED,
    };
}

/// PUBLISH_DONE status codes.
pub mod publish_done {
    pub use wire::code::{
        DONE_GOING_AWAY as GOING_AWAY, DONE_UNAUTHORIZED as UNAUTHORIZED,
        DONE_UPDATE_FAILED as UPDATE_FAILED, INTERNAL_ERROR, TRACK_ENDED,
    };
}

/// Data stream reset codes.
pub mod reset {
    pub use wire::code::{RESET_CANCELLED as CANCELLED, RESET_INTERNAL_ERROR as INTERNAL_ERROR};
}
