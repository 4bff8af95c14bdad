//! draft-18 data plane (draft-ietf-moq-transport-18 §3.4 and §11): unidirectional stream types
//! (§3.4), OBJECT_DATAGRAM (§11.3.1), SUBGROUP_HEADER streams (§11.4.2), FETCH_HEADER streams
//! (§11.4.4) and padding (§11.5), with vi64 integers. The logic lives in
//! [`crate::data`]; the rules are draft-22's but for one: the FIRST_OBJECT bit, Group
//! and Object ID deltas on fetch streams ordered by the fetch's Group Order (§11.4.4.1), the
//! control stream type 0x2F00 and the padding types are all here, while End of Timed-Out Range
//! is not (§11.4.4 defines only 0x8C and 0x10C).

use crate::data::{self as shared, DataRules};
use crate::error::{DecodeError, EncodeError};
use crate::model::{Datagram, DatagramHeader, RequestId, SubgroupHeader, UniStreamHeader};
use crate::varint::Vi64;

/// Unidirectional stream type of the control stream; also the SETUP message type (§3.4, §10.3).
pub const CONTROL_STREAM_TYPE: u64 = 0x2F00;
/// Padding stream type (§11.5.1).
pub const PADDING_STREAM_TYPE: u64 = 0x132B_3E28;
/// Padding datagram type (§11.5.2).
pub const PADDING_DATAGRAM_TYPE: u64 = 0x132B_3E29;

/// The draft-18 data-plane rules.
#[derive(Debug, Clone, Copy)]
pub enum Draft18 {}

impl DataRules for Draft18 {
    type V = Vi64;
    const FIRST_OBJECT_BIT: bool = true;
    const TIMED_OUT_RANGE: bool = false;
    const FETCH_ID_DELTAS: bool = true;
    const CONTROL_STREAM_TYPE: Option<u64> = Some(CONTROL_STREAM_TYPE);
    const PADDING_STREAM_TYPE: Option<u64> = Some(PADDING_STREAM_TYPE);
    const PADDING_DATAGRAM_TYPE: Option<u64> = Some(PADDING_DATAGRAM_TYPE);
}

/// Object reader for a subgroup stream (§11.4.2): `new(&header)`, then `decode(buf)`.
pub type SubgroupReader = shared::SubgroupReader<Draft18>;
/// Object writer for a subgroup stream (§11.4.2): `new(&header)`, then `encode(&obj, out)`.
pub type SubgroupWriter = shared::SubgroupWriter<Draft18>;
/// Item reader for a fetch stream (§11.4.4); `new(order)` takes the fetch's Group Order, which
/// decides the direction of Group ID Deltas (§11.4.4.1).
pub type FetchReader = shared::FetchReader<Draft18>;

/// Item writer for a fetch stream (§11.4.4); `new(order)` takes the fetch's Group Order. An End
/// of Timed-Out Range, which draft-18 lacks, is `Unsupported` (`Version::fetch_writer` writes it
/// as an End of Unknown Range).
pub type FetchWriter = shared::FetchWriter<Draft18>;

/// Reads the stream type and header at the start of a unidirectional stream: (header, bytes
/// consumed). Types (§3.4): 0x05 FETCH_HEADER; 0b0XX1XXXX SUBGROUP_HEADER (mode 0b11 reserved);
/// 0x2F00 control stream, returned with ZERO bytes consumed because the SETUP message that
/// follows starts with that same type; 0x132B3E28 padding. Anything else is a
/// PROTOCOL_VIOLATION.
pub fn decode_uni_stream_header(buf: &[u8]) -> Result<(UniStreamHeader, usize), DecodeError> {
    shared::decode_uni_stream_header::<Draft18>(buf)
}

/// Writes a SUBGROUP_HEADER (§11.4.2).
pub fn encode_subgroup_header(h: &SubgroupHeader, out: &mut Vec<u8>) -> Result<(), EncodeError> {
    shared::encode_subgroup_header::<Draft18>(h, out)
}

/// Writes a FETCH_HEADER (§11.4.4).
pub fn encode_fetch_header(request_id: RequestId, out: &mut Vec<u8>) -> Result<(), EncodeError> {
    shared::encode_fetch_header::<Draft18>(request_id, out)
}

/// Decodes an OBJECT_DATAGRAM (§11.3.1) or a padding datagram (§11.5.2). A truncated header is
/// `NeedMore`, which for a datagram (always complete) the session treats as a
/// PROTOCOL_VIOLATION.
pub fn decode_datagram(buf: &[u8]) -> Result<Datagram, DecodeError> {
    shared::decode_datagram::<Draft18>(buf)
}

/// Writes an OBJECT_DATAGRAM (§11.3.1): header, then `payload`.
pub fn encode_datagram(h: &DatagramHeader, payload: &[u8], out: &mut Vec<u8>) -> Result<(), EncodeError> {
    shared::encode_datagram::<Draft18>(h, payload, out)
}

/// Writes the type of a padding stream (§11.5.1); any bytes the caller sends after it must be
/// zero.
pub fn encode_padding_stream_header(out: &mut Vec<u8>) {
    // The type always has a vi64 encoding.
    let _ = shared::encode_padding_stream_header::<Draft18>(out);
}

/// Writes a padding datagram (§11.5.2): the type, then `len` zero bytes of Padding Data.
pub fn encode_padding_datagram(len: usize, out: &mut Vec<u8>) {
    // The type always has a vi64 encoding.
    let _ = shared::encode_padding_datagram::<Draft18>(len, out);
}
