//! OBJECT_DATAGRAM (draft-16 §10.3.1, draft-22 §11.2.1) and padding datagrams (draft-22
//! §11.5.2).

use super::{
    check_priority, check_status, datagram_bits, read_status, status_may_have_properties, write_atomic,
    DataRules,
};
use crate::codec::Reader;
use crate::common::{read_object_properties_as, write_object_properties_as};
use crate::error::{DecodeError, EncodeError};
use crate::model::{Datagram, DatagramHeader, Properties, TrackAlias};

/// True when `t` is a valid OBJECT_DATAGRAM type: only defined bits, and not both STATUS and
/// END_OF_GROUP. draft-16 §10.3.1 (0x00-0x0F, 0x20-0x21, 0x24-0x25, 0x28-0x29, 0x2C-0x2D),
/// draft-22 §11.2.1 (the same set, described as Type Flags). draft-14 §10.3.1 has no
/// DEFAULT_PRIORITY bit and no status type without an Object ID: 0x00-0x07, 0x20-0x21.
pub fn is_datagram_type<R: DataRules>(t: u64) -> bool {
    use datagram_bits::*;
    let defined = if R::DEFAULT_PRIORITY { DEFINED } else { DEFINED & !DEFAULT_PRIORITY };
    let status = t & STATUS != 0;
    t & !defined == 0
        && !(status && t & END_OF_GROUP != 0)
        && (R::DEFAULT_PRIORITY || !(status && t & ZERO_OBJECT_ID != 0))
}

/// Decodes a whole datagram. draft-16 §10.3.1, draft-22 §11.2.1 and §11.5.2.
///
/// The payload is the rest of the datagram after the header (`payload_offset`); a status
/// datagram has no payload, so bytes after its Object Status are a PROTOCOL_VIOLATION.
///
/// A datagram whose header is cut short returns [`DecodeError::NeedMore`] like every other
/// decoder here; since a datagram is always complete, the session must treat that as a
/// PROTOCOL_VIOLATION.
pub fn decode_datagram<R: DataRules>(buf: &[u8]) -> Result<Datagram, DecodeError> {
    use datagram_bits::*;
    let mut r = Reader::<R::V>::new(buf);
    let t = r.int()?;
    if R::PADDING_DATAGRAM_TYPE == Some(t) {
        return Ok(Datagram::Padding);
    }
    if !is_datagram_type::<R>(t) {
        return Err(DecodeError::violation("invalid OBJECT_DATAGRAM type"));
    }
    let track_alias = TrackAlias(r.int()?);
    let group_id = r.int()?;
    let object_id = if t & ZERO_OBJECT_ID != 0 { 0 } else { r.int()? };
    let publisher_priority = if t & DEFAULT_PRIORITY != 0 { None } else { Some(r.u8()?) };
    let properties = if t & PROPERTIES != 0 {
        let p = read_object_properties_as(&mut r, R::KV)?;
        if p.is_empty() {
            return Err(DecodeError::violation("datagram PROPERTIES bit with zero-length properties"));
        }
        p
    } else {
        Properties::new()
    };
    let status = if t & STATUS != 0 {
        let s = read_status::<R>(&mut r)?;
        if !properties.is_empty() && !status_may_have_properties::<R>(s) {
            return Err(DecodeError::violation("properties on an object whose status may have none"));
        }
        r.finish("payload in a status datagram")?;
        Some(s)
    } else {
        None
    };
    let header = DatagramHeader {
        track_alias,
        group_id,
        object_id,
        publisher_priority,
        properties,
        end_of_group: t & END_OF_GROUP != 0,
        status,
    };
    Ok(Datagram::Object { header, payload_offset: r.position() })
}

/// Writes a whole OBJECT_DATAGRAM: header then `payload`. Sets ZERO_OBJECT_ID when the Object
/// ID is 0 (except on a draft-14 status datagram, which always has one) and PROPERTIES exactly
/// when there are properties. draft-14 §10.3.1, draft-16 §10.3.1, draft-22 §11.2.1.
pub fn encode_datagram<R: DataRules>(
    h: &DatagramHeader,
    payload: &[u8],
    out: &mut Vec<u8>,
) -> Result<(), EncodeError> {
    use datagram_bits::*;
    check_priority::<R>(h.publisher_priority)?;
    let mut t = 0;
    if !h.properties.is_empty() {
        t |= PROPERTIES;
    }
    if h.end_of_group {
        t |= END_OF_GROUP;
    }
    if h.object_id == 0 && (R::DEFAULT_PRIORITY || h.status.is_none()) {
        t |= ZERO_OBJECT_ID;
    }
    if h.publisher_priority.is_none() {
        t |= DEFAULT_PRIORITY;
    }
    if let Some(status) = h.status {
        if h.end_of_group {
            return Err(EncodeError::OutOfRange("a status datagram cannot carry END_OF_GROUP"));
        }
        if !payload.is_empty() {
            return Err(EncodeError::OutOfRange("a status datagram has no payload"));
        }
        check_status::<R>(status, 0, &h.properties)?;
        t |= STATUS;
    }
    write_atomic::<R::V, _>(out, |w| {
        w.int(t)?;
        w.int(h.track_alias.0)?;
        w.int(h.group_id)?;
        if t & ZERO_OBJECT_ID == 0 {
            w.int(h.object_id)?;
        }
        if let Some(p) = h.publisher_priority {
            w.u8(p);
        }
        if !h.properties.is_empty() {
            write_object_properties_as(w, &h.properties, R::KV)?;
        }
        match h.status {
            Some(s) => w.int(s.code()),
            None => {
                w.bytes(payload);
                Ok(())
            }
        }
    })
}

/// Writes a padding datagram: the type, then `len` zero bytes (draft-22 §11.5.2). `len`
/// counts the Padding Data only, not the type.
pub fn encode_padding_datagram<R: DataRules>(len: usize, out: &mut Vec<u8>) -> Result<(), EncodeError> {
    let t = R::PADDING_DATAGRAM_TYPE.ok_or(EncodeError::Unsupported("padding datagram"))?;
    write_atomic::<R::V, _>(out, |w| w.int(t))?;
    out.resize(out.len() + len, 0);
    Ok(())
}
