//! draft-14 data plane (draft-ietf-moq-transport-14 §10 "Data Streams and Datagrams"):
//! SUBGROUP_HEADER streams (§10.4.2), OBJECT_DATAGRAM (§10.3.1) and FETCH_HEADER streams
//! (§10.4.4), with QUIC varints. The logic lives in [`crate::data`]; this module fixes the
//! draft-14 rules: draft-16's, less the DEFAULT_PRIORITY bit (SUBGROUP_HEADER 0x10-0x15 and
//! 0x18-0x1D, OBJECT_DATAGRAM 0x00-0x07 and 0x20-0x21), with Extension Headers of absolute
//! types, Object Status Does Not Exist (0x1), and the fixed-field fetch object layout.

use crate::common::KvTypes;
use crate::data::{self as shared, DataRules};
use crate::error::{DecodeError, EncodeError};
use crate::model::{Datagram, DatagramHeader, RequestId, SubgroupHeader, UniStreamHeader};
use crate::varint::Quic;

/// The draft-14 data-plane rules.
#[derive(Debug, Clone, Copy)]
pub enum Draft14 {}

impl DataRules for Draft14 {
    type V = Quic;
    const FIRST_OBJECT_BIT: bool = false;
    const TIMED_OUT_RANGE: bool = false;
    const FETCH_ID_DELTAS: bool = false;
    const CONTROL_STREAM_TYPE: Option<u64> = None;
    const PADDING_STREAM_TYPE: Option<u64> = None;
    const PADDING_DATAGRAM_TYPE: Option<u64> = None;
    const DEFAULT_PRIORITY: bool = false;
    const KV: KvTypes = KvTypes::Absolute;
    const DOES_NOT_EXIST: bool = true;
    const FETCH_FIXED_FIELDS: bool = true;
}

/// Object reader for a subgroup stream (§10.4.2): `new(&header)`, then `decode(buf)`.
pub type SubgroupReader = shared::SubgroupReader<Draft14>;
/// Object writer for a subgroup stream (§10.4.2): `new(&header)`, then `encode(&obj, out)`.
pub type SubgroupWriter = shared::SubgroupWriter<Draft14>;
/// Item reader for a fetch stream (§10.4.4); `new(order)` ignores the order.
pub type FetchReader = shared::FetchReader<Draft14>;
/// Item writer for a fetch stream (§10.4.4); `new(order)` ignores the order.
pub type FetchWriter = shared::FetchWriter<Draft14>;

/// Reads the stream type and header at the start of a unidirectional stream: (header, bytes
/// consumed). Types: 0x05 FETCH_HEADER; 0x10-0x15, 0x18-0x1D SUBGROUP_HEADER; anything else
/// is a PROTOCOL_VIOLATION (§10).
pub fn decode_uni_stream_header(buf: &[u8]) -> Result<(UniStreamHeader, usize), DecodeError> {
    shared::decode_uni_stream_header::<Draft14>(buf)
}

/// Writes a SUBGROUP_HEADER (§10.4.2); `first_object` and an inherited (`None`) publisher
/// priority do not exist in draft-14 (Unsupported).
pub fn encode_subgroup_header(h: &SubgroupHeader, out: &mut Vec<u8>) -> Result<(), EncodeError> {
    shared::encode_subgroup_header::<Draft14>(h, out)
}

/// Writes a FETCH_HEADER (§10.4.4).
pub fn encode_fetch_header(request_id: RequestId, out: &mut Vec<u8>) -> Result<(), EncodeError> {
    shared::encode_fetch_header::<Draft14>(request_id, out)
}

/// Decodes an OBJECT_DATAGRAM (§10.3.1). A truncated header is `NeedMore`, which for a
/// datagram (always complete) the session treats as a PROTOCOL_VIOLATION.
pub fn decode_datagram(buf: &[u8]) -> Result<Datagram, DecodeError> {
    shared::decode_datagram::<Draft14>(buf)
}

/// Writes an OBJECT_DATAGRAM (§10.3.1): header, then `payload`.
pub fn encode_datagram(h: &DatagramHeader, payload: &[u8], out: &mut Vec<u8>) -> Result<(), EncodeError> {
    shared::encode_datagram::<Draft14>(h, payload, out)
}
