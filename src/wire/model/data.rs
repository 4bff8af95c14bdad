//! Objects on the data plane: subgroup streams, datagrams and fetch streams.
//!
//! Decoders return headers and the payload *length*; the payload bytes stay in the caller's
//! buffer (a `bytes::Bytes` the session slices), so objects are never copied by the codec.

use super::properties::Properties;
use super::{Location, RequestId, TrackAlias};

/// Object Status (draft-14 §10.2.1.1, draft-16 §10.2.1.1, draft-22 §11.1.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ObjectStatus {
    /// 0x0.
    #[default]
    Normal,
    /// 0x1, draft-14 only: this object does not exist and never will (later drafts say so
    /// by leaving a gap; their codecs refuse to write it).
    DoesNotExist,
    /// 0x3: no objects at or after this Object ID exist in the group.
    EndOfGroup,
    /// 0x4: no objects at or after this Location exist in the track.
    EndOfTrack,
}

impl ObjectStatus {
    pub const fn code(self) -> u64 {
        match self {
            ObjectStatus::Normal => 0x0,
            ObjectStatus::DoesNotExist => 0x1,
            ObjectStatus::EndOfGroup => 0x3,
            ObjectStatus::EndOfTrack => 0x4,
        }
    }

    /// The status a code point names in any draft (0x1 is draft-14's alone: each data-plane
    /// codec also checks its draft has it).
    pub const fn from_code(v: u64) -> Option<Self> {
        match v {
            0x0 => Some(ObjectStatus::Normal),
            0x1 => Some(ObjectStatus::DoesNotExist),
            0x3 => Some(ObjectStatus::EndOfGroup),
            0x4 => Some(ObjectStatus::EndOfTrack),
            _ => None,
        }
    }
}

/// How a SUBGROUP_HEADER conveys the Subgroup ID (SUBGROUP_ID_MODE, bits 1-2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SubgroupId {
    /// 0b00: Subgroup ID 0, not on the wire.
    Zero,
    /// 0b01: the Object ID of the first object on the stream.
    FirstObject,
    /// 0b10: on the wire.
    Explicit(u64),
}

/// SUBGROUP_HEADER: opens a subgroup stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SubgroupHeader {
    pub track_alias: TrackAlias,
    pub group_id: u64,
    pub subgroup_id: SubgroupId,
    /// `None`: DEFAULT_PRIORITY, inherit the track's publisher priority.
    pub publisher_priority: Option<u8>,
    /// EXTENSIONS (draft-16) / PROPERTIES (draft-22) bit: every object carries a properties
    /// length field.
    pub has_properties: bool,
    /// END_OF_GROUP bit: this subgroup holds the group's largest object.
    pub end_of_group: bool,
    /// FIRST_OBJECT bit (draft-18 and draft-22): the first object on the stream is the first the
    /// original publisher sent in this subgroup.
    pub first_object: bool,
}

/// The header fields of one object on a subgroup stream; `payload_len` bytes of payload
/// follow it on the stream.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct SubgroupObject {
    /// Absolute Object ID (the wire carries a delta from the previous object).
    pub object_id: u64,
    /// Empty when the header has no properties flag (or the object has none).
    pub properties: Properties,
    pub payload_len: u64,
    /// Only meaningful when `payload_len == 0`; always `Normal` otherwise.
    pub status: ObjectStatus,
}

/// OBJECT_DATAGRAM header; the payload is the rest of the datagram (absent when `status` is
/// `Some`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct DatagramHeader {
    pub track_alias: TrackAlias,
    pub group_id: u64,
    pub object_id: u64,
    /// `None`: DEFAULT_PRIORITY.
    pub publisher_priority: Option<u8>,
    pub properties: Properties,
    pub end_of_group: bool,
    /// `Some`: STATUS bit, a status and no payload.
    pub status: Option<ObjectStatus>,
}

/// What a datagram carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Datagram {
    /// An object: header, and the byte offset where the payload starts.
    Object { header: DatagramHeader, payload_offset: usize },
    /// draft-22 padding datagram (discard).
    Padding,
}

/// The header of a unidirectional stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum UniStreamHeader {
    Subgroup(SubgroupHeader),
    /// FETCH_HEADER: objects answering the request (FETCH, or draft-22 fill fetch streams
    /// named by the SUBSCRIBE or REQUEST_UPDATE Request ID).
    Fetch {
        request_id: RequestId,
    },
    /// draft-22: the control stream; its first message is SETUP (the type was not consumed).
    Control,
    /// draft-22: a padding stream; discard the rest.
    Padding,
}

/// End of Range kinds on a fetch stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RangeEnd {
    /// 0x8C.
    NonExistent,
    /// 0x10C.
    Unknown,
    /// 0x20C (draft-22 only).
    TimedOut,
}

/// One object on a fetch stream.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct FetchObject {
    pub location: Location,
    /// `None`: a datagram-preference object (flag 0x40).
    pub subgroup_id: Option<u64>,
    pub publisher_priority: u8,
    pub properties: Properties,
    pub payload_len: u64,
}

/// One item on a fetch stream.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum FetchItem {
    Object(FetchObject),
    /// Every Location after the previous item up to and including `location` is of `kind`.
    EndOfRange {
        kind: RangeEnd,
        location: Location,
    },
}
