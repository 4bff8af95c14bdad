//! The request-stream drafts (18, 20 and 22) as one control codec and a table of differences.
//!
//! From draft-18 on, the control plane has one shape: vi64 integers, SETUP on each side's
//! unidirectional control stream, a bidirectional stream per request whose responses carry no
//! Request ID, and Message Parameters as a counted list of type deltas whose value encoding the
//! type fixes. [`crate::control`] and [`crate::params`] write and read every message once;
//! a [`Dialect`] says what one draft does differently, and nothing else does. ARCHITECTURE.md
//! ("One model, a codec per draft") lists the differences with their sections.

use crate::params::{self, Tables};

/// How a draft writes the value of parameter 0x21 (SUBSCRIPTION_FILTER in draft-18,
/// LOCATION_FILTER from draft-19 on).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FilterForm {
    /// draft-18 §10.2.9: a length-prefixed Subscription Filter (Filter Type 0x1-0x4, §5.1.2).
    Subscription,
    /// draft-20 §10.2.9, §5.1.2: length-prefixed, zero to four vi64s whose count says which
    /// filter it is (two zeros: the next object).
    Counted,
    /// draft-22 §9.20.9: a Location Filter Type (0x00-0x05), then its fields, no Length.
    Typed,
}

/// What one request-stream draft does differently on the control wire.
#[derive(Debug)]
pub struct Dialect {
    /// The value form of parameter 0x21.
    pub filter: FilterForm,
    /// TRACK_NAMESPACE_PREFIX (0x34) is a length-prefixed value: draft-18 and draft-20 list
    /// only uint8, varint, Location and Length-prefixed value encodings (draft-18 §10.2,
    /// draft-20 §10.2); draft-22 adds "Track Namespace" as an encoding of its own (§9.20) and
    /// writes it bare.
    pub prefix_in_length: bool,
    /// FETCH names its range in its body after a Fetch Type, the joining forms exist, and
    /// FETCH_OK's End Location is "end plus one" (draft-18 §10.12, §10.13). From draft-20 on,
    /// FETCH is standalone only, its range the LOCATION_FILTER parameter, and FETCH_OK's End
    /// Location inclusive.
    pub fetch_type: bool,
    /// GOAWAY on the control stream ends with a Request ID (draft-18 §10.4).
    pub goaway_request_id: bool,
    /// Type 0x1E is PUBLISH_OK with the REQUEST_OK layout (draft-18 §10.5); later drafts
    /// reserve it.
    pub publish_ok_type: bool,
    /// PUBLISH_STATE_NOTIFY exists (draft-20 §10.10, draft-22 §9.10).
    pub publish_state_notify: bool,
    /// The MAX_FILTER_RANGES and MAX_REQUEST_UPDATES Setup Options exist (draft-20 §10.3.1,
    /// draft-22 §9.1); draft-18 keeps them as unknown options.
    pub limit_options: bool,
    /// Message Parameter values follow the Key-Value-Pair rule (an even type's value is a
    /// varint, an odd type's is length-prefixed) rather than each type's own encoding: how the
    /// moq-lite-js library (`@moq/net` 0.2) writes and reads draft-18 parameters. Only in
    /// [`D18_MOQ_LITE_JS`], which a session selects when the peer names itself so in SETUP
    /// (ARCHITECTURE.md, "Peer quirks").
    pub kvp_values: bool,
    /// GROUP_ORDER in a SUBSCRIBE_OK, which draft-18 does not allow there (§10.2.11: SUBSCRIBE,
    /// PUBLISH_OK, FETCH), is read and dropped rather than a PROTOCOL_VIOLATION: moq-lite-js
    /// (`@moq/net` 0.1 and 0.2) answers every SUBSCRIBE it serves so, as a publisher (the
    /// `<moq-publish>` element). Dropped, as draft-16 §9.2.2 drops a parameter a message does
    /// not define, so the peer is read alike at both drafts. Only in [`D18_MOQ_LITE_JS`].
    pub stray_group_order: bool,
    /// Which parameters each message may carry.
    pub params: &'static Tables,
}

/// draft-ietf-moq-transport-18.
pub const D18: Dialect = Dialect {
    filter: FilterForm::Subscription,
    prefix_in_length: true,
    fetch_type: true,
    goaway_request_id: true,
    publish_ok_type: true,
    publish_state_notify: false,
    limit_options: false,
    kvp_values: false,
    stray_group_order: false,
    params: &params::D18,
};

/// draft-18 as the moq-lite-js library (`@moq/net` 0.1 and 0.2, under the `<moq-publish>`
/// publisher and the `<moq-watch>` player) speaks it: parameter values by the Key-Value-Pair
/// rule. Of the parameters draft-18 defines, that changes SUBSCRIBER_PRIORITY (a varint, not
/// a uint8: 155 is `80 9b`), FORWARD and GROUP_ORDER (varints whose small values are the same
/// bytes) and LARGEST_OBJECT (a length-prefixed Location). As a publisher it also puts
/// GROUP_ORDER in its SUBSCRIBE_OKs (`stray_group_order`). (Its Largest Object filter is a
/// matter of meaning, not of encoding, at every draft it speaks: `ControlCodec::for_peer`.)
pub const D18_MOQ_LITE_JS: Dialect = Dialect { kvp_values: true, stray_group_order: true, ..D18 };

/// draft-ietf-moq-transport-22.
pub const D22: Dialect = Dialect {
    filter: FilterForm::Typed,
    prefix_in_length: false,
    fetch_type: false,
    goaway_request_id: false,
    publish_ok_type: false,
    publish_state_notify: true,
    limit_options: true,
    kvp_values: false,
    stray_group_order: false,
    params: &params::D22,
};

/// draft-ietf-moq-transport-20: draft-22's messages and tables; the Location Filter and the
/// namespace prefix keep a Length.
pub const D20: Dialect = Dialect { filter: FilterForm::Counted, prefix_in_length: true, ..D22 };
