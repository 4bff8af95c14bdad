//! The version-neutral model: what a MoQT message, parameter, property or object *means*,
//! independent of the draft that carried it. Each dialect (`d16`, `d22`) is a codec onto
//! these types; the session and relay layers see only these.

mod data;
mod message;
mod params;
mod properties;

pub use data::*;
pub use message::*;
pub use params::*;
pub use properties::*;

use bytes::Bytes;

/// Limits the drafts impose on every dialect.
pub mod limits {
    /// Track Namespace Fields per namespace (draft-16 §2.4.1, draft-22 §8.7).
    pub const MAX_NAMESPACE_FIELDS: usize = 32;
    /// Bytes in a Full Track Name, and in a Track Namespace alone.
    pub const MAX_FULL_TRACK_NAME: usize = 4096;
    /// Bytes in a Reason Phrase.
    pub const MAX_REASON_PHRASE: usize = 1024;
    /// Bytes in a GOAWAY New Session URI (and a Redirect Connect URI).
    pub const MAX_GOAWAY_URI: usize = 8192;
    /// Bytes in a length-prefixed Key-Value-Pair value.
    pub const MAX_KV_VALUE: usize = u16::MAX as usize;
    /// Bytes in a control message body (16-bit length field).
    pub const MAX_CONTROL_BODY: usize = u16::MAX as usize;
}

/// Identifies a request within a session (client even, server odd).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct RequestId(pub u64);

/// The number that names a track on data streams and datagrams.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct TrackAlias(pub u64);

/// Which side of the QUIC connection an endpoint is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    Client,
    Server,
}

/// The largest Object ID every draft's encoding can carry (draft-16's varint; draft-22's are
/// wider): where a range or End of Range marker means "the rest of the group".
pub const LAST_OBJECT: u64 = (1 << 62) - 1;

/// {Group, Object}; ordered as the drafts define (group first).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Location {
    pub group: u64,
    pub object: u64,
}

impl Location {
    pub const fn new(group: u64, object: u64) -> Self {
        Location { group, object }
    }
}

/// An ordered tuple of 0 to 32 non-empty byte fields. (A Track Namespace of a track has at
/// least one field; a prefix or a suffix may have none.)
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct TrackNamespace(pub Vec<Bytes>);

impl TrackNamespace {
    /// Builds a namespace from string-like fields (convenience for tests and config).
    pub fn from_strs<S: AsRef<[u8]>>(fields: &[S]) -> Self {
        TrackNamespace(fields.iter().map(|f| Bytes::copy_from_slice(f.as_ref())).collect())
    }

    /// Sum of the field lengths.
    pub fn byte_len(&self) -> usize {
        self.0.iter().map(|f| f.len()).sum()
    }

    pub fn fields(&self) -> &[Bytes] {
        &self.0
    }

    /// True when `prefix` is a prefix of `self` (field-wise).
    pub fn starts_with(&self, prefix: &TrackNamespace) -> bool {
        self.0.len() >= prefix.0.len() && self.0.iter().zip(&prefix.0).all(|(a, b)| a == b)
    }
}

/// Track Namespace plus Track Name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct FullTrackName {
    pub namespace: TrackNamespace,
    pub name: Bytes,
}

/// How to order groups (draft-16 §9.2.x GROUP_ORDER, draft-22 §9.20.8).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GroupOrder {
    Ascending,
    Descending,
}

impl GroupOrder {
    pub const fn code(self) -> u64 {
        match self {
            GroupOrder::Ascending => 1,
            GroupOrder::Descending => 2,
        }
    }

    pub const fn from_code(v: u64) -> Option<Self> {
        match v {
            1 => Some(GroupOrder::Ascending),
            2 => Some(GroupOrder::Descending),
            _ => None,
        }
    }
}

/// The code points in the model against the drafts' IANA tables (draft-16 §13, draft-22 §16),
/// written out here from the spec text rather than from the constants under test.
#[cfg(test)]
mod code_points {
    use super::*;
    use crate::error::ErrorCode;

    #[test]
    fn message_parameters_draft22_table_14_and_draft16_13_2() {
        use param_type::*;
        let table: [(u64, u64); 20] = [
            (OBJECT_DELIVERY_TIMEOUT, 0x02), // draft-16 DELIVERY_TIMEOUT is also 0x02
            (AUTHORIZATION_TOKEN, 0x03),
            (RENDEZVOUS_TIMEOUT, 0x04),
            (SUBGROUP_DELIVERY_TIMEOUT, 0x06),
            (EXPIRES, 0x08),
            (LARGEST_OBJECT, 0x09),
            (FILL_TIMEOUT, 0x0A),
            (FORWARD, 0x10),
            (SUBSCRIBER_PRIORITY, 0x20),
            (LOCATION_FILTER, 0x21), // draft-16 SUBSCRIPTION_FILTER is also 0x21
            (GROUP_ORDER, 0x22),
            (FILL_PARAMETERS, 0x23),
            (SUBGROUP_FILTER, 0x25),
            (OBJECTID_FILTER, 0x26),
            (PRIORITY_FILTER, 0x27),
            (OBJECT_PROPERTY_FILTER, 0x28),
            (TRACK_PROPERTY_FILTER, 0x29),
            (NEW_GROUP_REQUEST, 0x32),
            (TRACK_NAMESPACE_PREFIX, 0x34),
            (INCLUDE_PROPERTIES, 0x35),
        ];
        for (ours, spec) in table {
            assert_eq!(ours, spec);
        }
    }

    #[test]
    fn setup_options_draft22_table_11_and_draft16_9_3_1() {
        use setup_type::*;
        assert_eq!(
            [PATH, MAX_REQUEST_ID, AUTHORIZATION_TOKEN, MAX_AUTH_TOKEN_CACHE_SIZE, AUTHORITY],
            [0x01, 0x02, 0x03, 0x04, 0x05]
        );
        assert_eq!([MAX_FILTER_RANGES, MOQT_IMPLEMENTATION, MAX_REQUEST_UPDATES], [0x06, 0x07, 0x08]);
    }

    #[test]
    fn properties_draft22_table_15_and_draft16_13_3() {
        use property_type::*;
        assert_eq!(
            [
                OBJECT_DELIVERY_TIMEOUT,
                MAX_CACHE_DURATION,
                SUBGROUP_DELIVERY_TIMEOUT,
                IMMUTABLE_PROPERTIES,
                DEFAULT_PUBLISHER_PRIORITY,
                DEFAULT_PUBLISHER_GROUP_ORDER,
                DYNAMIC_GROUPS,
                PRIOR_GROUP_ID_GAP,
                PRIOR_OBJECT_ID_GAP
            ],
            [0x02, 0x04, 0x06, 0x0B, 0x0E, 0x22, 0x30, 0x3C, 0x3E]
        );
    }

    #[test]
    fn enums_and_error_codes() {
        // Object Status registry (draft-22 Table 17, draft-16 §10.2.1.1).
        for (s, code) in
            [(ObjectStatus::Normal, 0x0), (ObjectStatus::EndOfGroup, 0x3), (ObjectStatus::EndOfTrack, 0x4)]
        {
            assert_eq!(s.code(), code);
            assert_eq!(ObjectStatus::from_code(code), Some(s));
        }
        // 0x1 is draft-14's Does Not Exist (§10.2.1.1); later drafts' decoders refuse it.
        assert_eq!(ObjectStatus::from_code(0x1), Some(ObjectStatus::DoesNotExist));
        assert_eq!(ObjectStatus::DoesNotExist.code(), 0x1);
        assert_eq!(ObjectStatus::from_code(0x2), None);
        // Group Order: Ascending 0x1, Descending 0x2.
        assert_eq!(GroupOrder::from_code(1), Some(GroupOrder::Ascending));
        assert_eq!(GroupOrder::from_code(2), Some(GroupOrder::Descending));
        assert_eq!(GroupOrder::from_code(0), None);
        // Authorization Token Alias Type (draft-22 Table 12).
        let b = bytes::Bytes::new();
        assert_eq!(AuthToken::Delete { alias: 0 }.alias_type(), 0x0);
        assert_eq!(AuthToken::Register { alias: 0, token_type: 0, value: b.clone() }.alias_type(), 0x1);
        assert_eq!(AuthToken::UseAlias { alias: 0 }.alias_type(), 0x2);
        assert_eq!(AuthToken::UseValue { token_type: 0, value: b }.alias_type(), 0x3);
        // Session termination codes the codec produces (draft-22 Table 19).
        assert_eq!(ErrorCode::ProtocolViolation.code(), 0x3);
        assert_eq!(ErrorCode::KeyValueFormatting.code(), 0x6);
    }
}
