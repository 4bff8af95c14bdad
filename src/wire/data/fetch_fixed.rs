//! draft-14's fetch stream objects (§10.4.4): every field fixed, no Serialization Flags.
//!
//! ```text
//! { Group ID (i), Subgroup ID (i), Object ID (i), Publisher Priority (8),
//!   Extension Headers Length (i), [Extension headers (...)],
//!   Object Payload Length (i), [Object Status (i)], Object Payload (..) }
//! ```
//!
//! There are no End of Range items: a gap in the IDs means the objects in it do not exist
//! (§9.16.3). An object with Object Status Does Not Exist, End of Group or End of Track says
//! that its Location does not exist, and with the gap rule that nothing between the prior
//! item and it does: it decodes as `FetchItem::EndOfRange { kind: NonExistent }` at its
//! Location (what End of Group or End of Track says of later Locations is not kept: FETCH_OK's
//! End Of Track carries the track's end). An `EndOfRange` of non-existent objects is written
//! as a Does Not Exist object at its Location (Subgroup ID 0, priority 0); draft-14 cannot
//! say "unknown" or "timed out" (`Unsupported`: the publisher resets the stream instead).
//! A datagram object's Subgroup ID is written as its Object ID, and reads back as that.

use super::{read_status, status_may_have_properties, write_atomic, write_props, DataRules};
use crate::codec::Reader;
use crate::common::read_object_properties_as;
use crate::error::{DecodeError, EncodeError};
use crate::model::{FetchItem, FetchObject, Location, ObjectStatus, RangeEnd};

/// Decodes one draft-14 fetch object from the front of `buf`: `(item, bytes consumed)`.
pub(super) fn decode<R: DataRules>(buf: &[u8]) -> Result<(FetchItem, usize), DecodeError> {
    let mut r = Reader::<R::V>::new(buf);
    let group = r.int()?;
    let subgroup_id = r.int()?;
    let location = Location { group, object: r.int()? };
    let publisher_priority = r.u8()?;
    let properties = read_object_properties_as(&mut r, R::KV)?;
    let payload_len = r.int()?;
    let status = if payload_len == 0 { read_status::<R>(&mut r)? } else { ObjectStatus::Normal };
    if !properties.is_empty() && !status_may_have_properties::<R>(status) {
        return Err(DecodeError::violation("properties on an object whose status may have none"));
    }
    let item = match status {
        ObjectStatus::Normal => FetchItem::Object(FetchObject {
            location,
            subgroup_id: Some(subgroup_id),
            publisher_priority,
            properties,
            payload_len,
        }),
        _ => FetchItem::EndOfRange { kind: RangeEnd::NonExistent, location },
    };
    Ok((item, r.position()))
}

/// Appends one draft-14 fetch object (its header fields; the caller writes the payload).
pub(super) fn encode<R: DataRules>(item: &FetchItem, out: &mut Vec<u8>) -> Result<(), EncodeError> {
    let (location, subgroup, priority, status) = match item {
        FetchItem::Object(o) => (
            o.location,
            o.subgroup_id.unwrap_or(o.location.object),
            o.publisher_priority,
            ObjectStatus::Normal,
        ),
        FetchItem::EndOfRange { kind: RangeEnd::NonExistent, location } => {
            (*location, 0, 0, ObjectStatus::DoesNotExist)
        }
        FetchItem::EndOfRange { .. } => {
            return Err(EncodeError::Unsupported("draft-14 fetch streams cannot mark unknown objects"))
        }
    };
    write_atomic::<R::V, _>(out, |w| {
        w.int(location.group)?;
        w.int(subgroup)?;
        w.int(location.object)?;
        w.u8(priority);
        match item {
            FetchItem::Object(o) => {
                write_props::<R>(w, &o.properties)?;
                w.int(o.payload_len)?;
                if o.payload_len == 0 {
                    w.int(status.code())?;
                }
            }
            FetchItem::EndOfRange { .. } => {
                w.int(0)?;
                w.int(0)?;
                w.int(status.code())?;
            }
        }
        Ok(())
    })
}
