//! Application codes that differ between drafts, typed: REQUEST_ERROR codes
//! ([`RequestErrorCode`]; draft-16 §13.1.2 table, draft-18 §15.10.2, draft-22 §12.3; in
//! draft-14 one table per error message, §13.1.2-§13.1.7, see
//! [`RequestErrorCode::code_for`]),
//! PUBLISH_DONE status codes ([`DoneStatus`]; draft-16 §13.1.3, draft-18 §15.10.3, draft-22
//! §12.4) and data stream reset codes ([`ResetCode`]; draft-16 §13.1.4, draft-18 §15.10.4,
//! draft-22 §12.5), and the session termination codes ([`SessionCode`]; draft-16 §13.1.1,
//! draft-18 §15.10.1, draft-22 §12.2), one union whose code points agree across drafts.
//! Layers above name the meaning; each draft
//! has one mapping to and from its code points, so a code read from a peer of one draft
//! reaches a peer of another as the same meaning, not the same number. A code point a draft
//! does not define travels as `Other` unchanged.
//!
//! The raw code points live in [`code`] (the tests and the mapping share them).

use super::model::RequestKind;
use super::Version;

/// Code points, by name; where the drafts differ the name ends in the draft.
pub mod code {
    /// REQUEST_ERROR and PUBLISH_DONE INTERNAL_ERROR.
    pub const INTERNAL_ERROR: u64 = 0x0;
    /// REQUEST_ERROR UNAUTHORIZED.
    pub const UNAUTHORIZED: u64 = 0x1;
    /// REQUEST_ERROR TIMEOUT.
    pub const TIMEOUT: u64 = 0x2;
    /// REQUEST_ERROR NOT_SUPPORTED.
    pub const NOT_SUPPORTED: u64 = 0x3;
    /// REQUEST_ERROR MALFORMED_AUTH_TOKEN.
    pub const MALFORMED_AUTH_TOKEN: u64 = 0x4;
    /// REQUEST_ERROR EXPIRED_AUTH_TOKEN.
    pub const EXPIRED_AUTH_TOKEN: u64 = 0x5;
    /// REQUEST_ERROR GOING_AWAY (draft-18 and draft-22).
    pub const GOING_AWAY_D22: u64 = 0x6;
    /// REQUEST_ERROR EXCESSIVE_LOAD (draft-22; draft-16 defines none, the relay sends it
    /// to draft-16 peers too).
    pub const EXCESSIVE_LOAD: u64 = 0x9;
    /// REQUEST_ERROR DOES_NOT_EXIST.
    pub const DOES_NOT_EXIST: u64 = 0x10;
    /// REQUEST_ERROR INVALID_RANGE.
    pub const INVALID_RANGE: u64 = 0x11;
    /// REQUEST_ERROR DUPLICATE_SUBSCRIPTION (draft-16 and draft-18).
    pub const DUPLICATE_SUBSCRIPTION_D16: u64 = 0x19;
    /// REQUEST_ERROR UNINTERESTED.
    pub const UNINTERESTED: u64 = 0x20;
    /// REQUEST_ERROR PREFIX_OVERLAP.
    pub const PREFIX_OVERLAP: u64 = 0x30;
    /// REQUEST_ERROR NAMESPACE_TOO_LARGE (draft-22; draft-16 peers get EXCESSIVE_LOAD).
    pub const NAMESPACE_TOO_LARGE: u64 = 0x31;
    /// REQUEST_ERROR INVALID_JOINING_REQUEST_ID (draft-16 and draft-18: draft-22 has no joining
    /// FETCH).
    pub const INVALID_JOINING_REQUEST_ID: u64 = 0x32;
    /// REQUEST_ERROR UNSUPPORTED_EXTENSION, REDIRECT (draft-18 and draft-22), CONFLICTING_FILTERS,
    /// INVALID_FILTER (draft-22).
    pub const UNSUPPORTED_EXTENSION_D22: u64 = 0x33;
    pub const REDIRECT_D22: u64 = 0x34;
    pub const CONFLICTING_FILTERS_D22: u64 = 0x35;
    pub const INVALID_FILTER_D22: u64 = 0x36;
    /// PUBLISH_DONE, REQUEST_ERROR and stream reset MALFORMED_TRACK (every draft).
    pub const MALFORMED_TRACK: u64 = 0x12;

    /// PUBLISH_DONE UNAUTHORIZED.
    pub const DONE_UNAUTHORIZED: u64 = 0x1;
    /// PUBLISH_DONE TRACK_ENDED.
    pub const TRACK_ENDED: u64 = 0x2;
    /// PUBLISH_DONE SUBSCRIPTION_ENDED (draft-16 and draft-18).
    pub const DONE_SUBSCRIPTION_ENDED_D16: u64 = 0x3;
    /// PUBLISH_DONE GOING_AWAY.
    pub const DONE_GOING_AWAY: u64 = 0x4;
    /// PUBLISH_DONE EXPIRED: 0x5 in draft-16 (§13.1.3), 0x6 in draft-18 (§15.10.3) and
    /// draft-22 (§12.4).
    pub const DONE_EXPIRED_D16: u64 = 0x5;
    pub const DONE_EXPIRED_D22: u64 = 0x6;
    /// PUBLISH_DONE TOO_FAR_BEHIND: 0x6 in draft-16, 0x5 in draft-18 and draft-22.
    pub const DONE_TOO_FAR_BEHIND_D16: u64 = 0x6;
    pub const DONE_TOO_FAR_BEHIND_D22: u64 = 0x5;
    /// PUBLISH_DONE UPDATE_FAILED (every draft).
    pub const DONE_UPDATE_FAILED: u64 = 0x8;
    /// PUBLISH_DONE EXCESSIVE_LOAD (draft-18 and draft-22).
    pub const DONE_EXCESSIVE_LOAD_D22: u64 = 0x9;

    /// Stream reset INTERNAL_ERROR.
    pub const RESET_INTERNAL_ERROR: u64 = 0x0;
    /// Stream reset CANCELLED.
    pub const RESET_CANCELLED: u64 = 0x1;
    /// Stream reset DELIVERY_TIMEOUT (draft-16 §10.4.3, draft-22 §12.5).
    pub const RESET_DELIVERY_TIMEOUT: u64 = 0x2;
    /// Stream reset SESSION_CLOSED.
    pub const RESET_SESSION_CLOSED: u64 = 0x3;
    /// Stream reset UNKNOWN_OBJECT_STATUS: 0x4 in draft-16, 0x6 in draft-18 and draft-22.
    pub const RESET_UNKNOWN_OBJECT_STATUS_D16: u64 = 0x4;
    pub const RESET_UNKNOWN_OBJECT_STATUS_D22: u64 = 0x6;
    /// draft-22 stream reset GOING_AWAY (§12.5).
    pub const RESET_GOING_AWAY_D22: u64 = 0x4;
    /// draft-22 stream reset TOO_FAR_BEHIND (§12.5): the subscription is being terminated.
    pub const RESET_TOO_FAR_BEHIND_D22: u64 = 0x5;
    /// draft-22 stream reset EXPIRED_AUTH_TOKEN (§12.5).
    pub const RESET_EXPIRED_AUTH_TOKEN_D22: u64 = 0x7;
    /// draft-22 stream reset EXCESSIVE_LOAD (§12.5).
    pub const RESET_EXCESSIVE_LOAD_D22: u64 = 0x9;

    /// draft-14 error answers (§13.1.2-§13.1.7): TRACK_DOES_NOT_EXIST (SUBSCRIBE_ERROR,
    /// FETCH_ERROR), UNINTERESTED (PUBLISH_ERROR, PUBLISH_NAMESPACE_ERROR) and
    /// NAMESPACE_PREFIX_UNKNOWN (SUBSCRIBE_NAMESPACE_ERROR) share 0x4.
    pub const DOES_NOT_EXIST_D14: u64 = 0x4;
    /// draft-14 INVALID_RANGE (SUBSCRIBE_ERROR, FETCH_ERROR) and NAMESPACE_PREFIX_OVERLAP
    /// (SUBSCRIBE_NAMESPACE_ERROR).
    pub const INVALID_RANGE_D14: u64 = 0x5;
    /// draft-14 FETCH_ERROR NO_OBJECTS (no model meaning: read as `Other`).
    pub const NO_OBJECTS_D14: u64 = 0x6;
    /// draft-14 FETCH_ERROR INVALID_JOINING_REQUEST_ID.
    pub const INVALID_JOINING_REQUEST_ID_D14: u64 = 0x7;
    /// draft-14 FETCH_ERROR UNKNOWN_STATUS_IN_RANGE (no model meaning: read as `Other`).
    pub const UNKNOWN_STATUS_IN_RANGE_D14: u64 = 0x8;
    /// draft-14 FETCH_ERROR MALFORMED_TRACK.
    pub const FETCH_MALFORMED_TRACK_D14: u64 = 0x9;
    /// draft-14 MALFORMED_AUTH_TOKEN (every error table but PUBLISH_ERROR's).
    pub const MALFORMED_AUTH_TOKEN_D14: u64 = 0x10;
    /// draft-14 EXPIRED_AUTH_TOKEN (every error table but PUBLISH_ERROR's).
    pub const EXPIRED_AUTH_TOKEN_D14: u64 = 0x12;
    /// draft-14 PUBLISH_DONE MALFORMED_TRACK (§13.1.3).
    pub const DONE_MALFORMED_TRACK_D14: u64 = 0x7;
}

/// Declares a typed code: its variants, and per draft the (variant, code point) table. The
/// first row naming a code point wins when decoding; a variant a draft has no row for is
/// written as that draft's fallback variant.
macro_rules! typed_code {
    (
        $(#[$meta:meta])*
        $name:ident { $($(#[$vmeta:meta])* $variant:ident),* $(,)? }
        d14 { $($v14:ident = $c14:expr),* $(,)? } else $f14:ident;
        d16 { $($v16:ident = $c16:expr),* $(,)? } else $f16:ident;
        d18 { $($v18:ident = $c18:expr),* $(,)? } else $f18:ident;
        d22 { $($v22:ident = $c22:expr),* $(,)? } else $f22:ident;
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum $name {
            $($(#[$vmeta])* $variant,)*
            /// A code point this draft does not define (passed on unchanged).
            Other(u64),
        }

        impl $name {
            /// The code point in draft `v` (a meaning `v` lacks is written as its nearest).
            pub fn code(self, v: Version) -> u64 {
                match v {
                    Version::Draft14 => match self {
                        $($name::$v14 => $c14,)*
                        $name::Other(c) => c,
                        #[allow(unreachable_patterns)]
                        _ => $name::$f14.code(v),
                    },
                    Version::Draft16 => match self {
                        $($name::$v16 => $c16,)*
                        $name::Other(c) => c,
                        #[allow(unreachable_patterns)]
                        _ => $name::$f16.code(v),
                    },
                    Version::Draft18 => match self {
                        $($name::$v18 => $c18,)*
                        $name::Other(c) => c,
                        #[allow(unreachable_patterns)]
                        _ => $name::$f18.code(v),
                    },
                    // draft-20's tables are draft-22's (draft-20 §15).
                    Version::Draft20 | Version::Draft22 => match self {
                        $($name::$v22 => $c22,)*
                        $name::Other(c) => c,
                        #[allow(unreachable_patterns)]
                        _ => $name::$f22.code(v),
                    },
                }
            }

            /// The meaning of code point `c` read from a peer of draft `v`.
            #[allow(unreachable_patterns)]
            pub fn from_code(c: u64, v: Version) -> Self {
                match v {
                    Version::Draft14 => match c {
                        $(x if x == $c14 => $name::$v14,)*
                        _ => $name::Other(c),
                    },
                    Version::Draft16 => match c {
                        $(x if x == $c16 => $name::$v16,)*
                        _ => $name::Other(c),
                    },
                    Version::Draft18 => match c {
                        $(x if x == $c18 => $name::$v18,)*
                        _ => $name::Other(c),
                    },
                    Version::Draft20 | Version::Draft22 => match c {
                        $(x if x == $c22 => $name::$v22,)*
                        _ => $name::Other(c),
                    },
                }
            }
        }
    };
}

typed_code! {
    /// A REQUEST_ERROR code.
    RequestErrorCode {
        InternalError, Unauthorized, Timeout, NotSupported, MalformedAuthToken, ExpiredAuthToken,
        GoingAway, ExcessiveLoad, DoesNotExist, InvalidRange, MalformedTrack,
        DuplicateSubscription, Uninterested, PrefixOverlap, NamespaceTooLarge,
        InvalidJoiningRequestId, UnsupportedExtension, Redirect, ConflictingFilters, InvalidFilter,
    }
    // SUBSCRIBE_ERROR's table (§13.1.2); the others are `code_for`'s.
    d14 {
        InternalError = code::INTERNAL_ERROR,
        Unauthorized = code::UNAUTHORIZED,
        Timeout = code::TIMEOUT,
        NotSupported = code::NOT_SUPPORTED,
        DoesNotExist = code::DOES_NOT_EXIST_D14,
        InvalidRange = code::INVALID_RANGE_D14,
        MalformedAuthToken = code::MALFORMED_AUTH_TOKEN_D14,
        ExpiredAuthToken = code::EXPIRED_AUTH_TOKEN_D14,
    } else InternalError;
    d16 {
        InternalError = code::INTERNAL_ERROR,
        Unauthorized = code::UNAUTHORIZED,
        Timeout = code::TIMEOUT,
        NotSupported = code::NOT_SUPPORTED,
        MalformedAuthToken = code::MALFORMED_AUTH_TOKEN,
        ExpiredAuthToken = code::EXPIRED_AUTH_TOKEN,
        DoesNotExist = code::DOES_NOT_EXIST,
        InvalidRange = code::INVALID_RANGE,
        MalformedTrack = code::MALFORMED_TRACK,
        DuplicateSubscription = code::DUPLICATE_SUBSCRIPTION_D16,
        Uninterested = code::UNINTERESTED,
        PrefixOverlap = code::PREFIX_OVERLAP,
        InvalidJoiningRequestId = code::INVALID_JOINING_REQUEST_ID,
        // Not in draft-16's table: the relay has always sent these code points to draft-16
        // peers (decoding 0x9 from a draft-16 peer is then EXCESSIVE_LOAD as well).
        ExcessiveLoad = code::EXCESSIVE_LOAD,
        NamespaceTooLarge = code::EXCESSIVE_LOAD,
    } else InternalError;
    d18 {
        InternalError = code::INTERNAL_ERROR,
        Unauthorized = code::UNAUTHORIZED,
        Timeout = code::TIMEOUT,
        NotSupported = code::NOT_SUPPORTED,
        MalformedAuthToken = code::MALFORMED_AUTH_TOKEN,
        ExpiredAuthToken = code::EXPIRED_AUTH_TOKEN,
        GoingAway = code::GOING_AWAY_D22,
        ExcessiveLoad = code::EXCESSIVE_LOAD,
        DoesNotExist = code::DOES_NOT_EXIST,
        InvalidRange = code::INVALID_RANGE,
        MalformedTrack = code::MALFORMED_TRACK,
        DuplicateSubscription = code::DUPLICATE_SUBSCRIPTION_D16,
        Uninterested = code::UNINTERESTED,
        PrefixOverlap = code::PREFIX_OVERLAP,
        NamespaceTooLarge = code::NAMESPACE_TOO_LARGE,
        InvalidJoiningRequestId = code::INVALID_JOINING_REQUEST_ID,
        UnsupportedExtension = code::UNSUPPORTED_EXTENSION_D22,
        Redirect = code::REDIRECT_D22,
        // draft-18 has no range filters, so no CONFLICTING_FILTERS or INVALID_FILTER: the
        // filter cannot be satisfied.
        ConflictingFilters = code::INVALID_RANGE,
        InvalidFilter = code::INVALID_RANGE,
    } else InternalError;
    d22 {
        InternalError = code::INTERNAL_ERROR,
        Unauthorized = code::UNAUTHORIZED,
        Timeout = code::TIMEOUT,
        NotSupported = code::NOT_SUPPORTED,
        MalformedAuthToken = code::MALFORMED_AUTH_TOKEN,
        ExpiredAuthToken = code::EXPIRED_AUTH_TOKEN,
        GoingAway = code::GOING_AWAY_D22,
        ExcessiveLoad = code::EXCESSIVE_LOAD,
        DoesNotExist = code::DOES_NOT_EXIST,
        InvalidRange = code::INVALID_RANGE,
        MalformedTrack = code::MALFORMED_TRACK,
        Uninterested = code::UNINTERESTED,
        PrefixOverlap = code::PREFIX_OVERLAP,
        NamespaceTooLarge = code::NAMESPACE_TOO_LARGE,
        UnsupportedExtension = code::UNSUPPORTED_EXTENSION_D22,
        Redirect = code::REDIRECT_D22,
        ConflictingFilters = code::CONFLICTING_FILTERS_D22,
        InvalidFilter = code::INVALID_FILTER_D22,
        // draft-22 has no joining FETCH; the code point is kept as it is.
        InvalidJoiningRequestId = code::INVALID_JOINING_REQUEST_ID,
    } else InternalError;
}

typed_code! {
    /// A PUBLISH_DONE status code.
    DoneStatus {
        InternalError, Unauthorized, TrackEnded, SubscriptionEnded, GoingAway, Expired,
        TooFarBehind, UpdateFailed, ExcessiveLoad, MalformedTrack,
    }
    d14 {
        InternalError = code::INTERNAL_ERROR,
        Unauthorized = code::DONE_UNAUTHORIZED,
        TrackEnded = code::TRACK_ENDED,
        SubscriptionEnded = code::DONE_SUBSCRIPTION_ENDED_D16,
        GoingAway = code::DONE_GOING_AWAY,
        Expired = code::DONE_EXPIRED_D16,
        TooFarBehind = code::DONE_TOO_FAR_BEHIND_D16,
        MalformedTrack = code::DONE_MALFORMED_TRACK_D14,
    } else InternalError;
    d16 {
        InternalError = code::INTERNAL_ERROR,
        Unauthorized = code::DONE_UNAUTHORIZED,
        TrackEnded = code::TRACK_ENDED,
        SubscriptionEnded = code::DONE_SUBSCRIPTION_ENDED_D16,
        GoingAway = code::DONE_GOING_AWAY,
        Expired = code::DONE_EXPIRED_D16,
        TooFarBehind = code::DONE_TOO_FAR_BEHIND_D16,
        UpdateFailed = code::DONE_UPDATE_FAILED,
        MalformedTrack = code::MALFORMED_TRACK,
    } else InternalError;
    d18 {
        InternalError = code::INTERNAL_ERROR,
        Unauthorized = code::DONE_UNAUTHORIZED,
        TrackEnded = code::TRACK_ENDED,
        SubscriptionEnded = code::DONE_SUBSCRIPTION_ENDED_D16,
        GoingAway = code::DONE_GOING_AWAY,
        TooFarBehind = code::DONE_TOO_FAR_BEHIND_D22,
        Expired = code::DONE_EXPIRED_D22,
        UpdateFailed = code::DONE_UPDATE_FAILED,
        ExcessiveLoad = code::DONE_EXCESSIVE_LOAD_D22,
        MalformedTrack = code::MALFORMED_TRACK,
    } else InternalError;
    d22 {
        InternalError = code::INTERNAL_ERROR,
        Unauthorized = code::DONE_UNAUTHORIZED,
        TrackEnded = code::TRACK_ENDED,
        GoingAway = code::DONE_GOING_AWAY,
        TooFarBehind = code::DONE_TOO_FAR_BEHIND_D22,
        Expired = code::DONE_EXPIRED_D22,
        UpdateFailed = code::DONE_UPDATE_FAILED,
        ExcessiveLoad = code::DONE_EXCESSIVE_LOAD_D22,
        MalformedTrack = code::MALFORMED_TRACK,
        // draft-22 dropped SUBSCRIPTION_ENDED: the track is over for this subscriber.
        SubscriptionEnded = code::TRACK_ENDED,
    } else InternalError;
}

typed_code! {
    /// A data stream reset code (RESET_STREAM's application error code).
    ResetCode {
        InternalError, Cancelled, DeliveryTimeout, SessionClosed, UnknownObjectStatus, GoingAway,
        TooFarBehind, ExpiredAuthToken, ExcessiveLoad, MalformedTrack,
    }
    // §10.4.3: only these four; the rest is a cancelled stream, as in draft-16.
    d14 {
        InternalError = code::RESET_INTERNAL_ERROR,
        Cancelled = code::RESET_CANCELLED,
        DeliveryTimeout = code::RESET_DELIVERY_TIMEOUT,
        SessionClosed = code::RESET_SESSION_CLOSED,
    } else Cancelled;
    d16 {
        InternalError = code::RESET_INTERNAL_ERROR,
        Cancelled = code::RESET_CANCELLED,
        DeliveryTimeout = code::RESET_DELIVERY_TIMEOUT,
        SessionClosed = code::RESET_SESSION_CLOSED,
        UnknownObjectStatus = code::RESET_UNKNOWN_OBJECT_STATUS_D16,
        MalformedTrack = code::MALFORMED_TRACK,
        // draft-16 has no GOING_AWAY, TOO_FAR_BEHIND, EXPIRED_AUTH_TOKEN or EXCESSIVE_LOAD
        // reset: the stream is cancelled, its only fitting code.
    } else Cancelled;
    d18 {
        InternalError = code::RESET_INTERNAL_ERROR,
        Cancelled = code::RESET_CANCELLED,
        DeliveryTimeout = code::RESET_DELIVERY_TIMEOUT,
        SessionClosed = code::RESET_SESSION_CLOSED,
        GoingAway = code::RESET_GOING_AWAY_D22,
        TooFarBehind = code::RESET_TOO_FAR_BEHIND_D22,
        UnknownObjectStatus = code::RESET_UNKNOWN_OBJECT_STATUS_D22,
        ExpiredAuthToken = code::RESET_EXPIRED_AUTH_TOKEN_D22,
        ExcessiveLoad = code::RESET_EXCESSIVE_LOAD_D22,
        MalformedTrack = code::MALFORMED_TRACK,
    } else Cancelled;
    d22 {
        InternalError = code::RESET_INTERNAL_ERROR,
        Cancelled = code::RESET_CANCELLED,
        DeliveryTimeout = code::RESET_DELIVERY_TIMEOUT,
        SessionClosed = code::RESET_SESSION_CLOSED,
        GoingAway = code::RESET_GOING_AWAY_D22,
        TooFarBehind = code::RESET_TOO_FAR_BEHIND_D22,
        UnknownObjectStatus = code::RESET_UNKNOWN_OBJECT_STATUS_D22,
        ExpiredAuthToken = code::RESET_EXPIRED_AUTH_TOKEN_D22,
        ExcessiveLoad = code::RESET_EXCESSIVE_LOAD_D22,
        MalformedTrack = code::MALFORMED_TRACK,
    } else Cancelled;
}

/// draft-14's error table for the answer to a request of kind `k` (§13.1.2 SUBSCRIBE_ERROR,
/// §13.1.4 PUBLISH_ERROR, §13.1.5 FETCH_ERROR, §13.1.6 PUBLISH_NAMESPACE_ERROR, §13.1.7
/// SUBSCRIBE_NAMESPACE_ERROR; TRACK_STATUS_ERROR is SUBSCRIBE_ERROR's, §9.22). The first row
/// naming a code point wins when decoding. PUBLISH_ERROR has no auth token codes: those are
/// written as UNAUTHORIZED.
fn d14_table(k: RequestKind) -> &'static [(RequestErrorCode, u64)] {
    use code::*;
    use RequestErrorCode as E;
    match k {
        RequestKind::Publish => &[
            (E::InternalError, INTERNAL_ERROR),
            (E::Unauthorized, UNAUTHORIZED),
            (E::Timeout, TIMEOUT),
            (E::NotSupported, NOT_SUPPORTED),
            (E::Uninterested, DOES_NOT_EXIST_D14),
            (E::MalformedAuthToken, UNAUTHORIZED),
            (E::ExpiredAuthToken, UNAUTHORIZED),
        ],
        RequestKind::Fetch => &[
            (E::InternalError, INTERNAL_ERROR),
            (E::Unauthorized, UNAUTHORIZED),
            (E::Timeout, TIMEOUT),
            (E::NotSupported, NOT_SUPPORTED),
            (E::DoesNotExist, DOES_NOT_EXIST_D14),
            (E::InvalidRange, INVALID_RANGE_D14),
            (E::InvalidJoiningRequestId, INVALID_JOINING_REQUEST_ID_D14),
            (E::MalformedTrack, FETCH_MALFORMED_TRACK_D14),
            (E::MalformedAuthToken, MALFORMED_AUTH_TOKEN_D14),
            (E::ExpiredAuthToken, EXPIRED_AUTH_TOKEN_D14),
        ],
        RequestKind::PublishNamespace => &[
            (E::InternalError, INTERNAL_ERROR),
            (E::Unauthorized, UNAUTHORIZED),
            (E::Timeout, TIMEOUT),
            (E::NotSupported, NOT_SUPPORTED),
            (E::Uninterested, DOES_NOT_EXIST_D14),
            (E::MalformedAuthToken, MALFORMED_AUTH_TOKEN_D14),
            (E::ExpiredAuthToken, EXPIRED_AUTH_TOKEN_D14),
        ],
        RequestKind::SubscribeNamespace => &[
            (E::InternalError, INTERNAL_ERROR),
            (E::Unauthorized, UNAUTHORIZED),
            (E::Timeout, TIMEOUT),
            (E::NotSupported, NOT_SUPPORTED),
            (E::DoesNotExist, DOES_NOT_EXIST_D14),
            (E::PrefixOverlap, INVALID_RANGE_D14),
            (E::MalformedAuthToken, MALFORMED_AUTH_TOKEN_D14),
            (E::ExpiredAuthToken, EXPIRED_AUTH_TOKEN_D14),
        ],
        RequestKind::Subscribe
        | RequestKind::TrackStatus
        | RequestKind::RequestUpdate
        | RequestKind::SubscribeTracks => &[],
    }
}

impl RequestErrorCode {
    /// The code point in draft `v` of this error answering a request of kind `answers`.
    /// draft-14's error codes are per answer message and overlap (0x4 is TRACK_DOES_NOT_EXIST,
    /// UNINTERESTED or NAMESPACE_PREFIX_UNKNOWN); every other draft has one table and ignores
    /// `answers`. A meaning the answer's table lacks is written as INTERNAL_ERROR.
    pub fn code_for(self, v: Version, answers: RequestKind) -> u64 {
        let table = d14_table(answers);
        match (v, self) {
            (Version::Draft14, RequestErrorCode::Other(c)) => c,
            (Version::Draft14, _) if !table.is_empty() => {
                table.iter().find(|(e, _)| *e == self).map_or(code::INTERNAL_ERROR, |(_, c)| *c)
            }
            _ => self.code(v),
        }
    }

    /// The meaning of code point `c` read from a peer of draft `v` in the answer to a request
    /// of kind `answers` (see [`RequestErrorCode::code_for`]).
    pub fn from_code_for(c: u64, v: Version, answers: RequestKind) -> Self {
        let table = d14_table(answers);
        match v {
            Version::Draft14 if !table.is_empty() => {
                table.iter().find(|(_, n)| *n == c).map_or(RequestErrorCode::Other(c), |(e, _)| *e)
            }
            _ => RequestErrorCode::from_code(c, v),
        }
    }
}

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

impl From<crate::ErrorCode> for SessionCode {
    fn from(c: crate::ErrorCode) -> Self {
        match c {
            crate::ErrorCode::ProtocolViolation => SessionCode::ProtocolViolation,
            crate::ErrorCode::KeyValueFormatting => SessionCode::KeyValueFormatting,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const D16: Version = Version::Draft16;
    const D18: Version = Version::Draft18;
    const D22: Version = Version::Draft22;

    /// draft-18's tables (§15.10.2-§15.10.4), written out from the spec text: every named
    /// code point, both ways.
    #[test]
    fn the_draft18_tables() {
        use RequestErrorCode as R;
        for (c, v) in [
            (R::InternalError, 0x0),
            (R::Unauthorized, 0x1),
            (R::Timeout, 0x2),
            (R::NotSupported, 0x3),
            (R::MalformedAuthToken, 0x4),
            (R::ExpiredAuthToken, 0x5),
            (R::GoingAway, 0x6),
            (R::ExcessiveLoad, 0x9),
            (R::DoesNotExist, 0x10),
            (R::InvalidRange, 0x11),
            (R::MalformedTrack, 0x12),
            (R::DuplicateSubscription, 0x19),
            (R::Uninterested, 0x20),
            (R::PrefixOverlap, 0x30),
            (R::NamespaceTooLarge, 0x31),
            (R::InvalidJoiningRequestId, 0x32),
            (R::UnsupportedExtension, 0x33),
            (R::Redirect, 0x34),
        ] {
            assert_eq!(c.code(D18), v, "{c:?}");
            assert_eq!(R::from_code(v, D18), c, "{v:#x}");
        }
        assert_eq!(R::InvalidFilter.code(D18), 0x11);
        assert_eq!(R::from_code(0x35, D18), R::Other(0x35));
        use DoneStatus as S;
        for (c, v) in [
            (S::InternalError, 0x0),
            (S::Unauthorized, 0x1),
            (S::TrackEnded, 0x2),
            (S::SubscriptionEnded, 0x3),
            (S::GoingAway, 0x4),
            (S::TooFarBehind, 0x5),
            (S::Expired, 0x6),
            (S::UpdateFailed, 0x8),
            (S::ExcessiveLoad, 0x9),
            (S::MalformedTrack, 0x12),
        ] {
            assert_eq!(c.code(D18), v, "{c:?}");
            assert_eq!(S::from_code(v, D18), c, "{v:#x}");
        }
        use ResetCode as X;
        for (c, v) in [
            (X::InternalError, 0x0),
            (X::Cancelled, 0x1),
            (X::DeliveryTimeout, 0x2),
            (X::SessionClosed, 0x3),
            (X::GoingAway, 0x4),
            (X::TooFarBehind, 0x5),
            (X::UnknownObjectStatus, 0x6),
            (X::ExpiredAuthToken, 0x7),
            (X::ExcessiveLoad, 0x9),
            (X::MalformedTrack, 0x12),
        ] {
            assert_eq!(c.code(D18), v, "{c:?}");
            assert_eq!(X::from_code(v, D18), c, "{v:#x}");
        }
    }

    #[test]
    fn the_drafts_tables() {
        use RequestErrorCode as R;
        for (c, d16, d22) in [
            (R::InternalError, 0x0, 0x0),
            (R::Unauthorized, 0x1, 0x1),
            (R::Timeout, 0x2, 0x2),
            (R::NotSupported, 0x3, 0x3),
            (R::DoesNotExist, 0x10, 0x10),
            (R::InvalidRange, 0x11, 0x11),
            (R::MalformedTrack, 0x12, 0x12),
            (R::PrefixOverlap, 0x30, 0x30),
            (R::NamespaceTooLarge, 0x9, 0x31),
            (R::GoingAway, 0x0, 0x6),
            (R::InvalidFilter, 0x0, 0x36),
        ] {
            assert_eq!((c.code(D16), c.code(D22)), (d16, d22), "{c:?}");
        }
        use DoneStatus as S;
        for (c, d16, d22) in [
            (S::TrackEnded, 0x2, 0x2),
            (S::Expired, 0x5, 0x6),
            (S::TooFarBehind, 0x6, 0x5),
            (S::UpdateFailed, 0x8, 0x8),
            (S::MalformedTrack, 0x12, 0x12),
            (S::SubscriptionEnded, 0x3, 0x2),
            (S::ExcessiveLoad, 0x0, 0x9),
        ] {
            assert_eq!((c.code(D16), c.code(D22)), (d16, d22), "{c:?}");
        }
        use ResetCode as X;
        for (c, d16, d22) in [
            (X::Cancelled, 0x1, 0x1),
            (X::DeliveryTimeout, 0x2, 0x2),
            (X::SessionClosed, 0x3, 0x3),
            (X::UnknownObjectStatus, 0x4, 0x6),
            (X::TooFarBehind, 0x1, 0x5),
            (X::ExpiredAuthToken, 0x1, 0x7),
            (X::MalformedTrack, 0x12, 0x12),
        ] {
            assert_eq!((c.code(D16), c.code(D22)), (d16, d22), "{c:?}");
        }
    }

    /// Every code point read from a peer is written back to a peer of the same draft as it
    /// came, defined or not.
    #[test]
    fn same_draft_round_trip_keeps_every_code_point() {
        for v in Version::ALL {
            for c in (0..0x40).chain([0x9D, 0x11C, u64::MAX]) {
                assert_eq!(RequestErrorCode::from_code(c, v).code(v), c, "{v:?} {c:#x}");
                assert_eq!(DoneStatus::from_code(c, v).code(v), c, "{v:?} {c:#x}");
                assert_eq!(ResetCode::from_code(c, v).code(v), c, "{v:?} {c:#x}");
            }
        }
    }

    #[test]
    fn crossing_drafts_keeps_the_meaning() {
        let status = DoneStatus::from_code(code::DONE_TOO_FAR_BEHIND_D16, D16);
        assert_eq!(status, DoneStatus::TooFarBehind);
        assert_eq!(status.code(D22), code::DONE_TOO_FAR_BEHIND_D22);
        let reset = ResetCode::from_code(code::RESET_EXPIRED_AUTH_TOKEN_D22, D22);
        assert_eq!(reset.code(D16), code::RESET_CANCELLED);
        assert_eq!(RequestErrorCode::from_code(0x31, D22).code(D16), code::EXCESSIVE_LOAD);
    }
}
