//! The objects of a subgroup stream (draft-16 §10.4.2, draft-22 §11.3.1).

use std::marker::PhantomData;

use super::{
    check_status, id_in_range, read_status, status_may_have_properties, write_atomic, write_props, DataRules,
};
use crate::codec::Reader;
use crate::common::read_object_properties_as;
use crate::error::{DecodeError, EncodeError};
use crate::model::{ObjectStatus, Properties, SubgroupHeader, SubgroupObject};
use crate::varint::VarInt;

/// Reads the objects of one subgroup stream, after its header (draft-16 §10.4.2 "Subgroup
/// Object Fields", draft-22 §11.3.1 Figure 27): Object ID Delta, [Properties], Object Payload
/// Length, [Object Status]. The payload (`payload_len` bytes) follows each object header on
/// the stream; the caller consumes it before the next `decode`.
#[derive(Debug, Clone)]
pub struct SubgroupReader<R> {
    has_properties: bool,
    prev_object_id: Option<u64>,
    _r: PhantomData<R>,
}

impl<R: DataRules> SubgroupReader<R> {
    pub fn new(header: &SubgroupHeader) -> Self {
        SubgroupReader { has_properties: header.has_properties, prev_object_id: None, _r: PhantomData }
    }

    /// The Object ID of the last object decoded, if any.
    pub fn prev_object_id(&self) -> Option<u64> {
        self.prev_object_id
    }

    /// Decodes one object header from the front of `buf`: `(object, bytes consumed)`.
    pub fn decode(&mut self, buf: &[u8]) -> Result<(SubgroupObject, usize), DecodeError> {
        let mut r = Reader::<R::V>::new(buf);
        let delta = r.int()?;
        // The first object's delta is its Object ID; later ones add delta + 1 to the previous.
        let object_id = match self.prev_object_id {
            None => delta,
            Some(prev) => id_in_range::<R>(
                prev.checked_add(delta).and_then(|v| v.checked_add(1)),
                "Object ID overflows",
            )?,
        };
        let properties =
            if self.has_properties { read_object_properties_as(&mut r, R::KV)? } else { Properties::new() };
        let payload_len = r.int()?;
        // The Object Status field is present only when the payload length is zero.
        let status = if payload_len == 0 { read_status::<R>(&mut r)? } else { ObjectStatus::Normal };
        if !properties.is_empty() && !status_may_have_properties::<R>(status) {
            return Err(DecodeError::violation("properties on an object whose status may have none"));
        }
        self.prev_object_id = Some(object_id);
        Ok((SubgroupObject { object_id, properties, payload_len, status }, r.position()))
    }
}

/// Writes the objects of one subgroup stream, after its header; the inverse of
/// [`SubgroupReader`]. The caller writes each object's payload after its header.
#[derive(Debug, Clone)]
pub struct SubgroupWriter<R> {
    has_properties: bool,
    prev_object_id: Option<u64>,
    _r: PhantomData<R>,
}

impl<R: DataRules> SubgroupWriter<R> {
    pub fn new(header: &SubgroupHeader) -> Self {
        SubgroupWriter { has_properties: header.has_properties, prev_object_id: None, _r: PhantomData }
    }

    /// Appends the header fields of `obj`. Object IDs must increase along the stream.
    pub fn encode(&mut self, obj: &SubgroupObject, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        if !obj.properties.is_empty() && !self.has_properties {
            return Err(EncodeError::OutOfRange(
                "object properties on a subgroup without the PROPERTIES bit",
            ));
        }
        check_status::<R>(obj.status, obj.payload_len, &obj.properties)?;
        if obj.object_id > R::V::MAX {
            return Err(EncodeError::OutOfRange("Object ID above the integer range"));
        }
        let delta = match self.prev_object_id {
            None => obj.object_id,
            Some(prev) => obj
                .object_id
                .checked_sub(prev)
                .and_then(|d| d.checked_sub(1))
                .ok_or(EncodeError::OutOfRange("Object IDs must increase along a subgroup stream"))?,
        };
        write_atomic::<R::V, _>(out, |w| {
            w.int(delta)?;
            if self.has_properties {
                write_props::<R>(w, &obj.properties)?;
            }
            w.int(obj.payload_len)?;
            if obj.payload_len == 0 {
                w.int(obj.status.code())?;
            }
            Ok(())
        })?;
        self.prev_object_id = Some(obj.object_id);
        Ok(())
    }
}
