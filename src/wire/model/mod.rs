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
