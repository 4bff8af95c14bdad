//! Setup options and message parameters as typed values.
//!
//! Code points differ by draft only where noted; each dialect maps its wire parameters onto
//! [`Parameters`] and rejects (or, where its draft says so, ignores) what it cannot carry.

use bytes::Bytes;

use super::{GroupOrder, Location, TrackNamespace};

/// An AUTHORIZATION TOKEN value (draft-16 §9.2.1.1, draft-22 §8.9).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum AuthToken {
    /// Alias Type 0x0: retire `alias`.
    Delete { alias: u64 },
    /// Alias Type 0x1: register `alias` for this token.
    Register { alias: u64, token_type: u64, value: Bytes },
    /// Alias Type 0x2: the token registered under `alias`.
    UseAlias { alias: u64 },
    /// Alias Type 0x3: this token, no alias.
    UseValue { token_type: u64, value: Bytes },
}

impl AuthToken {
    /// The Alias Type code point.
    pub const fn alias_type(&self) -> u64 {
        match self {
            AuthToken::Delete { .. } => 0,
            AuthToken::Register { .. } => 1,
            AuthToken::UseAlias { .. } => 2,
            AuthToken::UseValue { .. } => 3,
        }
    }
}

/// Setup parameters (draft-16 §9.3.1) / Setup Options (draft-22 §9.1). Unknown ones are kept
/// (the drafts say ignore them; keeping lets a proxy or test see them).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SetupOptions {
    /// PATH (0x01).
    pub path: Option<Bytes>,
    /// MAX_REQUEST_ID (0x02), draft-16 only.
    pub max_request_id: Option<u64>,
    /// AUTHORIZATION TOKEN (0x03), repeatable.
    pub auth_tokens: Vec<AuthToken>,
    /// MAX_AUTH_TOKEN_CACHE_SIZE (0x04).
    pub max_auth_token_cache_size: Option<u64>,
    /// AUTHORITY (0x05).
    pub authority: Option<Bytes>,
    /// MAX_FILTER_RANGES (0x06), draft-22 only.
    pub max_filter_ranges: Option<u64>,
    /// MOQT_IMPLEMENTATION (0x07).
    pub implementation: Option<Bytes>,
    /// MAX_REQUEST_UPDATES (0x08), draft-22 only.
    pub max_request_updates: Option<u64>,
    /// draft-14 only, and not a Setup Parameter: CLIENT_SETUP's Supported Versions, in the
    /// client's order (draft-14 §9.3, §9.3.1). Empty for every other draft, whose encoders
    /// ignore it (their version is the ALPN's).
    pub versions: Vec<u64>,
    /// draft-14 only, and not a Setup Parameter: SERVER_SETUP's Selected Version (draft-14
    /// §9.3). `None` for every other draft, whose encoders ignore it.
    pub selected_version: Option<u64>,
    /// Options this implementation does not know, in order, with their values.
    pub unknown: Vec<(u64, KvValue)>,
}

/// A Key-Value-Pair value: even types carry an integer, odd types bytes.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum KvValue {
    Int(u64),
    Bytes(Bytes),
}

/// A Location filter (draft-22 §9.20.9). draft-16's SUBSCRIPTION_FILTER and standalone FETCH
/// ranges map onto the same variants (see the d16 codec).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LocationFilter {
    /// 0x00: explicitly no filter.
    None,
    /// 0x01: start at `{Largest.Group + 1 - groups_back, 0}`; open-ended.
    /// (draft-16 "Next Group Start" is `groups_back = 0`.)
    RelativeStart { groups_back: u64 },
    /// 0x02: from `start`; open-ended.
    AbsoluteStart { start: Location },
    /// 0x03: from `start` to the end of group `end_group` (absolute).
    AbsoluteStartGroupEnd { start: Location, end_group: u64 },
    /// 0x04: from `start` to `end`, inclusive.
    AbsoluteRange { start: Location, end: Location },
    /// 0x05: from the Next Object (draft-16 "Largest Object" filter).
    NextObject,
}

/// Which header field or property a range filter tests (draft-22 §3.3.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RangeFilterKind {
    /// SUBGROUP_FILTER (0x25).
    SubgroupId,
    /// OBJECTID_FILTER (0x26).
    ObjectId,
    /// PRIORITY_FILTER (0x27).
    Priority,
    /// OBJECT_PROPERTY_FILTER (0x28).
    ObjectProperty,
    /// TRACK_PROPERTY_FILTER (0x29).
    TrackProperty,
}

/// One inclusive range; `end == None` is open-ended (allowed only for the last range).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Range {
    pub start: u64,
    pub end: Option<u64>,
}

/// A range filter parameter. `set == None` is the zero-length form that removes the filter in
/// REQUEST_UPDATE.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RangeFilter {
    pub kind: RangeFilterKind,
    pub set: Option<RangeSet>,
}

/// The body of a non-empty range filter.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RangeSet {
    pub set_id: u8,
    /// The property type tested; present exactly for the two property filters.
    pub property_type: Option<u64>,
    /// Absolute, ascending, non-overlapping ranges.
    pub ranges: Vec<Range>,
}

/// Every message parameter of every draft, typed. `None`/empty means absent.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Parameters {
    /// AUTHORIZATION_TOKEN (0x03), repeatable.
    pub auth_tokens: Vec<AuthToken>,
    /// draft-16 DELIVERY_TIMEOUT / draft-22 OBJECT_DELIVERY_TIMEOUT (0x02), milliseconds.
    pub object_delivery_timeout: Option<u64>,
    /// RENDEZVOUS_TIMEOUT (0x04), draft-18 and draft-22.
    pub rendezvous_timeout: Option<u64>,
    /// SUBGROUP_DELIVERY_TIMEOUT (0x06), draft-18 and draft-22.
    pub subgroup_delivery_timeout: Option<u64>,
    /// EXPIRES (0x08), milliseconds.
    pub expires: Option<u64>,
    /// LARGEST_OBJECT (0x09).
    pub largest_object: Option<Location>,
    /// FILL_TIMEOUT (0x0A), draft-18 and draft-22.
    pub fill_timeout: Option<u64>,
    /// FORWARD (0x10).
    pub forward: Option<bool>,
    /// SUBSCRIBER_PRIORITY (0x20).
    pub subscriber_priority: Option<u8>,
    /// draft-22 LOCATION_FILTER / draft-16 and draft-18 SUBSCRIPTION_FILTER (0x21).
    pub location_filter: Option<LocationFilter>,
    /// GROUP_ORDER (0x22).
    pub group_order: Option<GroupOrder>,
    /// FILL_PARAMETERS (0x23), draft-22 only: a nested parameter scope.
    pub fill_parameters: Option<Box<Parameters>>,
    /// Range filters (0x25..=0x29), draft-22 only, repeatable.
    pub range_filters: Vec<RangeFilter>,
    /// NEW_GROUP_REQUEST (0x32).
    pub new_group_request: Option<u64>,
    /// TRACK_NAMESPACE_PREFIX (0x34), draft-18 and draft-22.
    pub track_namespace_prefix: Option<TrackNamespace>,
    /// INCLUDE_PROPERTIES (0x35), draft-22 only.
    pub include_properties: Option<bool>,
}

impl Parameters {
    pub fn is_empty(&self) -> bool {
        *self == Parameters::default()
    }
}

/// Message parameter code points. The numbers are the same in every draft that has
/// the parameter (draft-16 §13.2, draft-22 §16.7).
pub mod param_type {
    pub const OBJECT_DELIVERY_TIMEOUT: u64 = 0x02;
    pub const AUTHORIZATION_TOKEN: u64 = 0x03;
    pub const RENDEZVOUS_TIMEOUT: u64 = 0x04;
    pub const SUBGROUP_DELIVERY_TIMEOUT: u64 = 0x06;
    pub const EXPIRES: u64 = 0x08;
    pub const LARGEST_OBJECT: u64 = 0x09;
    pub const FILL_TIMEOUT: u64 = 0x0A;
    pub const FORWARD: u64 = 0x10;
    pub const SUBSCRIBER_PRIORITY: u64 = 0x20;
    pub const LOCATION_FILTER: u64 = 0x21;
    pub const GROUP_ORDER: u64 = 0x22;
    pub const FILL_PARAMETERS: u64 = 0x23;
    pub const SUBGROUP_FILTER: u64 = 0x25;
    pub const OBJECTID_FILTER: u64 = 0x26;
    pub const PRIORITY_FILTER: u64 = 0x27;
    pub const OBJECT_PROPERTY_FILTER: u64 = 0x28;
    pub const TRACK_PROPERTY_FILTER: u64 = 0x29;
    pub const NEW_GROUP_REQUEST: u64 = 0x32;
    pub const TRACK_NAMESPACE_PREFIX: u64 = 0x34;
    pub const INCLUDE_PROPERTIES: u64 = 0x35;
}

/// Setup parameter / option code points (constant across versions).
pub mod setup_type {
    pub const PATH: u64 = 0x01;
    pub const MAX_REQUEST_ID: u64 = 0x02;
    pub const AUTHORIZATION_TOKEN: u64 = 0x03;
    pub const MAX_AUTH_TOKEN_CACHE_SIZE: u64 = 0x04;
    pub const AUTHORITY: u64 = 0x05;
    pub const MAX_FILTER_RANGES: u64 = 0x06;
    pub const MOQT_IMPLEMENTATION: u64 = 0x07;
    pub const MAX_REQUEST_UPDATES: u64 = 0x08;
}
