//! Unidirectional stream types and headers (draft-16 §10, §10.4.2, §10.4.4; draft-22 §6.4.1,
//! §11.3.1, §11.4.1, §11.5.1).

use super::{check_priority, subgroup_bits, write_atomic, DataRules, FETCH_HEADER_TYPE};
use crate::codec::Reader;
use crate::error::{DecodeError, EncodeError};
use crate::model::{RequestId, SubgroupHeader, SubgroupId, TrackAlias, UniStreamHeader};
use crate::varint::VarInt;

/// True when `t` is a valid SUBGROUP_HEADER type: bit 4 set, SUBGROUP_ID_MODE not 0b11, no
/// bit outside the defined ones (0x01-0x20, plus FIRST_OBJECT 0x40 in draft-22).
/// draft-16 §10.4.2: 0x10-0x15, 0x18-0x1D, 0x30-0x35, 0x38-0x3D. draft-22 §11.3.1:
/// 0b0XX1XXXX (< 128) without mode 0b11.
/// draft-14 §10.4.2 has no DEFAULT_PRIORITY bit: 0x10-0x15, 0x18-0x1D.
pub fn is_subgroup_type<R: DataRules>(t: u64) -> bool {
    use subgroup_bits::*;
    let allowed = 0x1F
        | if R::DEFAULT_PRIORITY { DEFAULT_PRIORITY } else { 0 }
        | if R::FIRST_OBJECT_BIT { FIRST_OBJECT } else { 0 };
    t & !allowed == 0 && t & MARKER != 0 && t & ID_MODE_MASK != ID_MODE_RESERVED
}

/// Reads the stream type and header at the start of a unidirectional stream:
/// `(header, bytes consumed)`. draft-16 §10 (stream type table), draft-22 §6.4.1 Table 2.
///
/// A draft-22 control stream (type 0x2F00) consumes nothing: its first message, SETUP, starts
/// with that same type. Any other unknown type is a PROTOCOL_VIOLATION.
pub fn decode_uni_stream_header<R: DataRules>(buf: &[u8]) -> Result<(UniStreamHeader, usize), DecodeError> {
    let mut r = Reader::<R::V>::new(buf);
    let t = r.int()?;
    if t == FETCH_HEADER_TYPE {
        let request_id = RequestId(r.int()?);
        return Ok((UniStreamHeader::Fetch { request_id }, r.position()));
    }
    if is_subgroup_type::<R>(t) {
        let h = read_subgroup_header_fields(t, &mut r)?;
        return Ok((UniStreamHeader::Subgroup(h), r.position()));
    }
    if R::CONTROL_STREAM_TYPE == Some(t) {
        return Ok((UniStreamHeader::Control, 0));
    }
    if R::PADDING_STREAM_TYPE == Some(t) {
        return Ok((UniStreamHeader::Padding, r.position()));
    }
    Err(DecodeError::violation("unknown unidirectional stream type"))
}

/// The SUBGROUP_HEADER fields after a valid type `t`.
fn read_subgroup_header_fields<V: VarInt>(
    t: u64,
    r: &mut Reader<'_, V>,
) -> Result<SubgroupHeader, DecodeError> {
    use subgroup_bits::*;
    let track_alias = TrackAlias(r.int()?);
    let group_id = r.int()?;
    let subgroup_id = match t & ID_MODE_MASK {
        ID_MODE_ZERO => SubgroupId::Zero,
        ID_MODE_FIRST_OBJECT => SubgroupId::FirstObject,
        ID_MODE_PRESENT => SubgroupId::Explicit(r.int()?),
        _ => return Err(DecodeError::violation("reserved SUBGROUP_ID_MODE")),
    };
    let publisher_priority = if t & DEFAULT_PRIORITY != 0 { None } else { Some(r.u8()?) };
    Ok(SubgroupHeader {
        track_alias,
        group_id,
        subgroup_id,
        publisher_priority,
        has_properties: t & PROPERTIES != 0,
        end_of_group: t & END_OF_GROUP != 0,
        first_object: t & FIRST_OBJECT != 0,
    })
}

/// The SUBGROUP_HEADER type for `h`.
pub fn subgroup_type<R: DataRules>(h: &SubgroupHeader) -> Result<u64, EncodeError> {
    use subgroup_bits::*;
    check_priority::<R>(h.publisher_priority)?;
    let mut t = MARKER;
    if h.has_properties {
        t |= PROPERTIES;
    }
    t |= match h.subgroup_id {
        SubgroupId::Zero => ID_MODE_ZERO,
        SubgroupId::FirstObject => ID_MODE_FIRST_OBJECT,
        SubgroupId::Explicit(_) => ID_MODE_PRESENT,
    };
    if h.end_of_group {
        t |= END_OF_GROUP;
    }
    if h.publisher_priority.is_none() {
        t |= DEFAULT_PRIORITY;
    }
    if h.first_object {
        if !R::FIRST_OBJECT_BIT {
            return Err(EncodeError::Unsupported("SUBGROUP_HEADER FIRST_OBJECT bit"));
        }
        t |= FIRST_OBJECT;
    }
    Ok(t)
}

/// Writes a SUBGROUP_HEADER (type and fields). draft-16 §10.4.2, draft-22 §11.3.1.
pub fn encode_subgroup_header<R: DataRules>(
    h: &SubgroupHeader,
    out: &mut Vec<u8>,
) -> Result<(), EncodeError> {
    let t = subgroup_type::<R>(h)?;
    write_atomic::<R::V, _>(out, |w| {
        w.int(t)?;
        w.int(h.track_alias.0)?;
        w.int(h.group_id)?;
        if let SubgroupId::Explicit(s) = h.subgroup_id {
            w.int(s)?;
        }
        if let Some(p) = h.publisher_priority {
            w.u8(p);
        }
        Ok(())
    })
}

/// Writes a FETCH_HEADER: type 0x05 and the Request ID. draft-16 §10.4.4, draft-22 §11.4.1.
pub fn encode_fetch_header<R: DataRules>(
    request_id: RequestId,
    out: &mut Vec<u8>,
) -> Result<(), EncodeError> {
    write_atomic::<R::V, _>(out, |w| {
        w.int(FETCH_HEADER_TYPE)?;
        w.int(request_id.0)
    })
}

/// Writes the type of a padding stream; the caller may follow it with zero bytes
/// (draft-22 §11.5.1).
pub fn encode_padding_stream_header<R: DataRules>(out: &mut Vec<u8>) -> Result<(), EncodeError> {
    let t = R::PADDING_STREAM_TYPE.ok_or(EncodeError::Unsupported("padding stream"))?;
    write_atomic::<R::V, _>(out, |w| w.int(t))
}
