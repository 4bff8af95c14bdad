//! draft-16 data plane (draft-ietf-moq-transport-16 §10 "Data Streams and Datagrams"):
//! SUBGROUP_HEADER streams (§10.4.2), OBJECT_DATAGRAM (§10.3.1) and FETCH_HEADER streams
//! (§10.4.4), with QUIC varints. The logic lives in [`crate::data`]; this module fixes
//! the draft-16 rules: no FIRST_OBJECT bit, no End of Timed-Out Range, absolute Group and
//! Object IDs on fetch streams, no padding, and the control stream is not a unidirectional
//! stream type.

use crate::data::{self as shared, DataRules};
use crate::error::{DecodeError, EncodeError};
use crate::model::{Datagram, DatagramHeader, RequestId, SubgroupHeader, UniStreamHeader};
use crate::varint::Quic;

/// The draft-16 data-plane rules.
#[derive(Debug, Clone, Copy)]
pub enum Draft16 {}

impl DataRules for Draft16 {
    type V = Quic;
    const FIRST_OBJECT_BIT: bool = false;
    const TIMED_OUT_RANGE: bool = false;
    const FETCH_ID_DELTAS: bool = false;
    const CONTROL_STREAM_TYPE: Option<u64> = None;
    const PADDING_STREAM_TYPE: Option<u64> = None;
    const PADDING_DATAGRAM_TYPE: Option<u64> = None;
}

/// Object reader for a subgroup stream (§10.4.2): `new(&header)`, then `decode(buf)`.
pub type SubgroupReader = shared::SubgroupReader<Draft16>;
/// Object writer for a subgroup stream (§10.4.2): `new(&header)`, then `encode(&obj, out)`.
pub type SubgroupWriter = shared::SubgroupWriter<Draft16>;
/// Item reader for a fetch stream (§10.4.4); `new(order)` ignores the order (absolute IDs).
pub type FetchReader = shared::FetchReader<Draft16>;
/// Item writer for a fetch stream (§10.4.4); `new(order)` ignores the order (absolute IDs).
pub type FetchWriter = shared::FetchWriter<Draft16>;

/// Reads the stream type and header at the start of a unidirectional stream: (header, bytes
/// consumed). Types: 0x05 FETCH_HEADER; 0x10-0x15, 0x18-0x1D, 0x30-0x35, 0x38-0x3D
/// SUBGROUP_HEADER; anything else is a PROTOCOL_VIOLATION (§10).
pub fn decode_uni_stream_header(buf: &[u8]) -> Result<(UniStreamHeader, usize), DecodeError> {
    shared::decode_uni_stream_header::<Draft16>(buf)
}

/// Writes a SUBGROUP_HEADER (§10.4.2); `first_object` does not exist in draft-16 (Unsupported).
pub fn encode_subgroup_header(h: &SubgroupHeader, out: &mut Vec<u8>) -> Result<(), EncodeError> {
    shared::encode_subgroup_header::<Draft16>(h, out)
}

/// Writes a FETCH_HEADER (§10.4.4).
pub fn encode_fetch_header(request_id: RequestId, out: &mut Vec<u8>) -> Result<(), EncodeError> {
    shared::encode_fetch_header::<Draft16>(request_id, out)
}

/// Decodes an OBJECT_DATAGRAM (§10.3.1). A truncated header is `NeedMore`, which for a
/// datagram (always complete) the session treats as a PROTOCOL_VIOLATION.
pub fn decode_datagram(buf: &[u8]) -> Result<Datagram, DecodeError> {
    shared::decode_datagram::<Draft16>(buf)
}

/// Writes an OBJECT_DATAGRAM (§10.3.1): header, then `payload`.
pub fn encode_datagram(h: &DatagramHeader, payload: &[u8], out: &mut Vec<u8>) -> Result<(), EncodeError> {
    shared::encode_datagram::<Draft16>(h, payload, out)
}
