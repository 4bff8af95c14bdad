//! The data plane, written once for both dialects: unidirectional stream headers, subgroup
//! streams, object datagrams and fetch streams (draft-16 §10 "Data Streams and Datagrams",
//! draft-22 §6.4.1 and §11).
//!
//! Everything here is generic over a [`DataRules`] type that names the integer encoding and
//! the few rules that differ between drafts; each `dNN::data` instantiates it with
//! `data_plane!`.
//!
//! - `header`: unidirectional stream types and headers (SUBGROUP_HEADER, FETCH_HEADER,
//!   draft-22 control and padding streams).
//! - `subgroup`: the objects of a subgroup stream.
//! - `datagram`: OBJECT_DATAGRAM and draft-22 padding datagrams.
//! - `fetch`: the objects and End of Range markers of a fetch stream.
//!
//! Objects are never copied: decoders return header fields and the payload *length* (or, for
//! a datagram, the offset where the payload starts); the caller slices the payload out of its
//! own buffer. Writers append headers only (except [`encode_datagram`], which must build one
//! contiguous datagram). The per-object paths allocate only when an object has properties.
//!
//! Stateful readers ([`SubgroupReader`], [`FetchReader`]) change their state only when a decode
//! succeeds, so a decode that returned [`DecodeError::NeedMore`] can be retried with more bytes.
//! Writers leave `out` untouched and their state unchanged when they return an error.

mod datagram;
mod fetch;
mod fetch_fixed;
mod header;
mod subgroup;

pub use datagram::*;
pub use fetch::*;
pub use header::*;
pub use subgroup::*;

/// Fixes the public face of one draft's data plane to `$rules`: the reader and writer types
/// and the header, datagram (and, with `padding`, padding) functions of this module. Each
/// `dNN::data` module states its [`DataRules`] and invokes this once, so what differs between
/// drafts is the rules and nothing else.
macro_rules! data_plane {
    ($rules:ty) => {
        /// Object reader for a subgroup stream: `new(&header)`, then `decode(buf)`.
        pub type SubgroupReader = $crate::data::SubgroupReader<$rules>;
        /// Object writer for a subgroup stream: `new(&header)`, then `encode(&obj, out)`.
        pub type SubgroupWriter = $crate::data::SubgroupWriter<$rules>;
        /// Item reader for a fetch stream; `new(order)` takes the fetch's Group Order, which
        /// only drafts with Group ID Deltas read.
        pub type FetchReader = $crate::data::FetchReader<$rules>;
        /// Item writer for a fetch stream; `new(order)` takes the fetch's Group Order. What
        /// the draft lacks (an End of Timed-Out Range, a FIRST_OBJECT bit) is `Unsupported`.
        pub type FetchWriter = $crate::data::FetchWriter<$rules>;

        /// Reads the stream type and header at the start of a unidirectional stream:
        /// (header, bytes consumed). A type the draft does not define is a
        /// PROTOCOL_VIOLATION; a control stream type is returned with zero bytes consumed,
        /// because the SETUP message that follows starts with that same type.
        pub fn decode_uni_stream_header(
            buf: &[u8],
        ) -> Result<($crate::model::UniStreamHeader, usize), $crate::error::DecodeError> {
            $crate::data::decode_uni_stream_header::<$rules>(buf)
        }

        /// Writes a SUBGROUP_HEADER; a field the draft lacks is `Unsupported`.
        pub fn encode_subgroup_header(
            h: &$crate::model::SubgroupHeader,
            out: &mut Vec<u8>,
        ) -> Result<(), $crate::error::EncodeError> {
            $crate::data::encode_subgroup_header::<$rules>(h, out)
        }

        /// Writes a FETCH_HEADER.
        pub fn encode_fetch_header(
            request_id: $crate::model::RequestId,
            out: &mut Vec<u8>,
        ) -> Result<(), $crate::error::EncodeError> {
            $crate::data::encode_fetch_header::<$rules>(request_id, out)
        }

        /// Decodes an OBJECT_DATAGRAM (or a padding datagram where the draft has one). A
        /// truncated header is `NeedMore`, which for a datagram (always complete) the session
        /// treats as a PROTOCOL_VIOLATION.
        pub fn decode_datagram(buf: &[u8]) -> Result<$crate::model::Datagram, $crate::error::DecodeError> {
            $crate::data::decode_datagram::<$rules>(buf)
        }

        /// Writes an OBJECT_DATAGRAM: header, then `payload`.
        pub fn encode_datagram(
            h: &$crate::model::DatagramHeader,
            payload: &[u8],
            out: &mut Vec<u8>,
        ) -> Result<(), $crate::error::EncodeError> {
            $crate::data::encode_datagram::<$rules>(h, payload, out)
        }
    };
    ($rules:ty, padding) => {
        $crate::data::data_plane!($rules);

        /// Writes the type of a padding stream; any bytes the caller sends after it must be
        /// zero.
        pub fn encode_padding_stream_header(out: &mut Vec<u8>) {
            // The type always has an encoding in the draft's integers.
            let _ = $crate::data::encode_padding_stream_header::<$rules>(out);
        }

        /// Writes a padding datagram: the type, then `len` zero bytes of Padding Data.
        pub fn encode_padding_datagram(len: usize, out: &mut Vec<u8>) {
            // The type always has an encoding in the draft's integers.
            let _ = $crate::data::encode_padding_datagram::<$rules>(len, out);
        }
    };
}
pub(crate) use data_plane;

use super::codec::{Reader, Writer};
use super::common::{write_object_properties_as, KvTypes};
use super::error::{DecodeError, EncodeError};
use super::model::{ObjectStatus, Properties};
use super::varint::VarInt;

/// What differs between the drafts on the data plane. Every rule but the integer encoding
/// defaults to draft-16's, so a draft's impl lists exactly where it differs from draft-16.
pub trait DataRules {
    /// The integer encoding (QUIC varint for draft-16, vi64 for draft-22).
    type V: VarInt;
    /// SUBGROUP_HEADER has the FIRST_OBJECT bit 0x40 (draft-22 §11.3.1).
    const FIRST_OBJECT_BIT: bool = false;
    /// Fetch streams may carry End of Timed-Out Range, 0x20C (draft-22 §11.4.1).
    const TIMED_OUT_RANGE: bool = false;
    /// Fetch objects carry Group ID Delta and Object ID Delta (draft-22 §11.4.1.1) rather than
    /// absolute Group ID and Object ID fields (draft-16 §10.4.4).
    const FETCH_ID_DELTAS: bool = false;
    /// Unidirectional stream type that opens a control stream (draft-22: 0x2F00, §6.4.1).
    const CONTROL_STREAM_TYPE: Option<u64> = None;
    /// Unidirectional stream type of a padding stream (draft-22: 0x132B3E28, §11.5.1).
    const PADDING_STREAM_TYPE: Option<u64> = None;
    /// Datagram type of a padding datagram (draft-22: 0x132B3E29, §11.5.2).
    const PADDING_DATAGRAM_TYPE: Option<u64> = None;
    /// SUBGROUP_HEADER and OBJECT_DATAGRAM types have a DEFAULT_PRIORITY bit (0x20, 0x08) and
    /// a status datagram may leave out its Object ID (draft-16 on). draft-14 always writes the
    /// Publisher Priority and its only status datagram types are 0x20 and 0x21 (§10.3.1,
    /// §10.4.2).
    const DEFAULT_PRIORITY: bool = true;
    /// How Object Properties (draft-14 "Extension Headers") code their types: deltas from
    /// draft-16 on, absolute in draft-14 (§1.4.2, §10.2.1.2).
    const KV: KvTypes = KvTypes::Delta;
    /// draft-14's Object Status rules (§10.2.1.1-2): status 0x1 (Does Not Exist) exists, and
    /// only such an object may not have Extension Headers (End of Group and End of Track
    /// objects may). Later drafts have no 0x1 and no properties on any status object.
    const DOES_NOT_EXIST: bool = false;
    /// Fetch stream objects have draft-14's fixed layout (§10.4.4): Group ID, Subgroup ID,
    /// Object ID, Publisher Priority, Extension Headers, Object Payload Length and Object
    /// Status, no Serialization Flags and no End of Range items.
    const FETCH_FIXED_FIELDS: bool = false;
}

/// FETCH_HEADER stream type (draft-16 §10.4.4, draft-22 §11.4.1).
pub const FETCH_HEADER_TYPE: u64 = 0x05;

/// SUBGROUP_HEADER type bits (draft-16 §10.4.2, draft-22 §11.3.1).
pub mod subgroup_bits {
    /// EXTENSIONS (draft-16) / PROPERTIES (draft-22): every object has a properties field.
    pub const PROPERTIES: u64 = 0x01;
    /// SUBGROUP_ID_MODE, two bits.
    pub const ID_MODE_MASK: u64 = 0x06;
    pub const ID_MODE_ZERO: u64 = 0x00;
    pub const ID_MODE_FIRST_OBJECT: u64 = 0x02;
    pub const ID_MODE_PRESENT: u64 = 0x04;
    /// 0b11 is reserved.
    pub const ID_MODE_RESERVED: u64 = 0x06;
    pub const END_OF_GROUP: u64 = 0x08;
    /// Bit 4, always set in a SUBGROUP_HEADER type.
    pub const MARKER: u64 = 0x10;
    pub const DEFAULT_PRIORITY: u64 = 0x20;
    /// draft-22 only.
    pub const FIRST_OBJECT: u64 = 0x40;
}

/// OBJECT_DATAGRAM type bits (draft-16 §10.3.1, draft-22 §11.2.1). Both drafts define the
/// same bits; bit 0x10 and every bit above 0x20 are invalid.
pub mod datagram_bits {
    pub const PROPERTIES: u64 = 0x01;
    pub const END_OF_GROUP: u64 = 0x02;
    pub const ZERO_OBJECT_ID: u64 = 0x04;
    pub const DEFAULT_PRIORITY: u64 = 0x08;
    pub const STATUS: u64 = 0x20;
    /// Every defined bit.
    pub const DEFINED: u64 = PROPERTIES | END_OF_GROUP | ZERO_OBJECT_ID | DEFAULT_PRIORITY | STATUS;
}

/// Fetch object Serialization Flags (draft-16 §10.4.4.1, draft-22 §11.4.1.1) and the
/// reserved End of Range values (draft-16 §10.4.4, draft-22 §11.4.1 Table 8).
pub mod fetch_flags {
    pub const SUBGROUP_MASK: u64 = 0x03;
    pub const SUBGROUP_ZERO: u64 = 0x00;
    pub const SUBGROUP_PRIOR: u64 = 0x01;
    pub const SUBGROUP_PRIOR_PLUS_ONE: u64 = 0x02;
    pub const SUBGROUP_PRESENT: u64 = 0x03;
    pub const OBJECT_ID: u64 = 0x04;
    pub const GROUP_ID: u64 = 0x08;
    pub const PRIORITY: u64 = 0x10;
    pub const PROPERTIES: u64 = 0x20;
    pub const DATAGRAM: u64 = 0x40;
    /// Values at or above this are not flags.
    pub const FIRST_RESERVED: u64 = 0x80;
    pub const END_OF_NON_EXISTENT_RANGE: u64 = 0x8C;
    pub const END_OF_UNKNOWN_RANGE: u64 = 0x10C;
    /// draft-22 only.
    pub const END_OF_TIMED_OUT_RANGE: u64 = 0x20C;
}

/// Runs `f` on `out`; if it fails, `out` is restored to its length before the call, so a
/// writer that returns an error has written nothing.
pub(super) fn write_atomic<V: VarInt, T>(
    out: &mut Vec<u8>,
    f: impl FnOnce(&mut Writer<'_, V>) -> Result<T, EncodeError>,
) -> Result<T, EncodeError> {
    let start = out.len();
    let r = f(&mut Writer::new(out));
    if r.is_err() {
        out.truncate(start);
    }
    r
}

/// `v` as an ID of the dialect: every ID is an integer of its encoding, so a computed ID above
/// what the encoding can carry (2^62-1 in draft-16, 2^64-1 in draft-22) is a violation.
pub(super) fn id_in_range<R: DataRules>(v: Option<u64>, what: &'static str) -> Result<u64, DecodeError> {
    v.filter(|v| *v <= R::V::MAX).ok_or(DecodeError::violation(what))
}

/// Object Status; an unknown value, or Does Not Exist (0x1) outside draft-14, is a
/// PROTOCOL_VIOLATION (draft-14 §10.2.1.1, draft-16 §10.2.1.1, draft-22 §11.1.1).
pub(super) fn read_status<R: DataRules>(r: &mut Reader<'_, R::V>) -> Result<ObjectStatus, DecodeError> {
    ObjectStatus::from_code(r.int()?)
        .filter(|s| R::DOES_NOT_EXIST || *s != ObjectStatus::DoesNotExist)
        .ok_or(DecodeError::violation("unknown Object Status"))
}

/// Whether an object of `status` may carry properties: a Normal one always; in draft-14 any
/// but Does Not Exist (§10.2.1.2), in later drafts none (draft-16 §10.2.1.1-2, draft-22
/// §11.1.1-2).
pub(super) fn status_may_have_properties<R: DataRules>(status: ObjectStatus) -> bool {
    match status {
        ObjectStatus::Normal => true,
        ObjectStatus::DoesNotExist => false,
        ObjectStatus::EndOfGroup | ObjectStatus::EndOfTrack => R::DOES_NOT_EXIST,
    }
}

/// Only a Normal object has a payload; which may have properties is
/// [`status_may_have_properties`]; Does Not Exist is draft-14's alone.
pub(super) fn check_status<R: DataRules>(
    status: ObjectStatus,
    payload_len: u64,
    props: &Properties,
) -> Result<(), EncodeError> {
    if status == ObjectStatus::DoesNotExist && !R::DOES_NOT_EXIST {
        return Err(EncodeError::Unsupported("Object Status Does Not Exist (draft-14 only)"));
    }
    if status != ObjectStatus::Normal && payload_len != 0 {
        return Err(EncodeError::OutOfRange("payload on an object whose status is not Normal"));
    }
    if !props.is_empty() && !status_may_have_properties::<R>(status) {
        return Err(EncodeError::OutOfRange("properties on an object whose status may have none"));
    }
    Ok(())
}

/// Object Properties: length and Key-Value-Pairs, coded as `R::KV` says. Empty properties are
/// a single zero length, written without the temporary buffer the general path needs.
pub(super) fn write_props<R: DataRules>(
    w: &mut Writer<'_, R::V>,
    props: &Properties,
) -> Result<(), EncodeError> {
    if props.is_empty() {
        w.int(0)
    } else {
        write_object_properties_as(w, props, R::KV)
    }
}

/// A publisher priority the draft can write: draft-14 has no DEFAULT_PRIORITY bit, so an
/// inherited (`None`) one is `Unsupported` there (the session writes the track's).
pub(super) fn check_priority<R: DataRules>(p: Option<u8>) -> Result<(), EncodeError> {
    if p.is_none() && !R::DEFAULT_PRIORITY {
        return Err(EncodeError::Unsupported("default publisher priority (draft-14 always writes one)"));
    }
    Ok(())
}
