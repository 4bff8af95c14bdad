//! The objects and End of Range markers of a fetch stream (draft-16 §10.4.4, draft-22 §11.4.1).

use std::marker::PhantomData;

use super::{fetch_flags, id_in_range, write_atomic, DataRules};
use crate::codec::Reader;
use crate::common::{read_object_properties_as, write_object_properties_as};
use crate::error::{DecodeError, EncodeError};
use crate::model::{FetchItem, FetchObject, GroupOrder, Location, Properties, RangeEnd};
use crate::varint::VarInt;

/// What "the prior Object" means for the next item on a fetch stream (draft-16 §10.4.4.1,
/// draft-22 §11.4.1.1-2).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct FetchPrior {
    /// Location of the previous item, Object or End of Range (draft-22 §11.4.1.2: after an End
    /// of Range, the prior Group ID and Object ID are the End of Range's). `None` before the
    /// first item.
    location: Option<Location>,
    /// Subgroup ID of the last actual Object: `None` when there was none; `Some(None)` when it
    /// was a datagram object, which has no Subgroup ID to refer to.
    subgroup: Option<Option<u64>>,
    /// Publisher Priority of the last actual Object.
    priority: Option<u8>,
}

impl FetchPrior {
    fn location(&self, what: &'static str) -> Result<Location, DecodeError> {
        self.location.ok_or(DecodeError::violation(what))
    }

    fn subgroup(&self) -> Result<u64, DecodeError> {
        match self.subgroup {
            Some(Some(s)) => Ok(s),
            // quiche's parser rejects this too ("reference to subgroup ID of prior datagram").
            Some(None) => {
                Err(DecodeError::violation("prior fetch object is a datagram, with no Subgroup ID"))
            }
            None => Err(DecodeError::violation("fetch object references the Subgroup ID of no prior object")),
        }
    }
}

fn range_end_code<R: DataRules>(kind: RangeEnd) -> Result<u64, EncodeError> {
    use fetch_flags::*;
    match kind {
        RangeEnd::NonExistent => Ok(END_OF_NON_EXISTENT_RANGE),
        RangeEnd::Unknown => Ok(END_OF_UNKNOWN_RANGE),
        RangeEnd::TimedOut if R::TIMED_OUT_RANGE => Ok(END_OF_TIMED_OUT_RANGE),
        RangeEnd::TimedOut => Err(EncodeError::Unsupported("End of Timed-Out Range")),
    }
}

fn range_end_kind<R: DataRules>(flags: u64) -> Option<RangeEnd> {
    use fetch_flags::*;
    match flags {
        END_OF_NON_EXISTENT_RANGE => Some(RangeEnd::NonExistent),
        END_OF_UNKNOWN_RANGE => Some(RangeEnd::Unknown),
        END_OF_TIMED_OUT_RANGE if R::TIMED_OUT_RANGE => Some(RangeEnd::TimedOut),
        _ => None,
    }
}

/// Reads the items of one fetch stream, after its FETCH_HEADER (draft-16 §10.4.4, draft-22
/// §11.4.1): Serialization Flags, [Group ID (Delta)], [Subgroup ID], [Object ID (Delta)],
/// [Publisher Priority], [Properties], Object Payload Length. The payload follows each object
/// on the stream; the caller consumes it before the next `decode`.
///
/// An End of Range (0x8C, 0x10C, draft-22 also 0x20C) is the flags, then the Group ID and the
/// Object ID as absolute values, and nothing else: no Object Payload Length. The drafts only
/// say that "the Group ID and Object ID fields are present" and that Subgroup ID, Priority and
/// Properties are not (draft-16 §10.4.4.2, draft-22 §11.4.1.2, same text in the editor's copy);
/// an End of Range is not an Object and has no payload, and Google quiche's MoQT parser ends
/// the item after the Object ID. The values are absolute in draft-22 too: the text names the
/// "Group ID and Object ID fields", and as deltas the fixed 0x08 bit of 0x8C would make an End
/// of Range in the prior object's group inexpressible (a Group ID Delta moves by at least one).
#[derive(Debug, Clone)]
pub struct FetchReader<R> {
    order: GroupOrder,
    prior: FetchPrior,
    _r: PhantomData<R>,
}

impl<R: DataRules> FetchReader<R> {
    /// `order` is the fetch's Group Order; draft-16 carries absolute IDs and ignores it.
    pub fn new(order: GroupOrder) -> Self {
        FetchReader { order, prior: FetchPrior::default(), _r: PhantomData }
    }

    /// Decodes one item from the front of `buf`: `(item, bytes consumed)`.
    pub fn decode(&mut self, buf: &[u8]) -> Result<(FetchItem, usize), DecodeError> {
        use fetch_flags::*;
        if R::FETCH_FIXED_FIELDS {
            return super::fetch_fixed::decode::<R>(buf);
        }
        let mut r = Reader::<R::V>::new(buf);
        let flags = r.int()?;
        if flags >= FIRST_RESERVED {
            let kind =
                range_end_kind::<R>(flags).ok_or(DecodeError::violation("unknown Serialization Flags"))?;
            let location = Location { group: r.int()?, object: r.int()? };
            self.prior.location = Some(location);
            return Ok((FetchItem::EndOfRange { kind, location }, r.position()));
        }
        let prior = self.prior;
        let has_group = flags & GROUP_ID != 0;

        let group = if has_group {
            let v = r.int()?;
            match prior.location {
                Some(p) if R::FETCH_ID_DELTAS => step_group::<R>(p.group, v, self.order)?,
                _ => v,
            }
        } else {
            prior.location("fetch object references the Group ID of no prior object")?.group
        };

        // With the DATAGRAM bit the two low bits are ignored and no Subgroup ID field exists.
        let subgroup_id = if flags & DATAGRAM != 0 {
            None
        } else {
            Some(match flags & SUBGROUP_MASK {
                SUBGROUP_ZERO => 0,
                SUBGROUP_PRIOR => prior.subgroup()?,
                SUBGROUP_PRIOR_PLUS_ONE => {
                    id_in_range::<R>(prior.subgroup()?.checked_add(1), "Subgroup ID overflows")?
                }
                _ => r.int()?,
            })
        };

        let object = if flags & OBJECT_ID != 0 {
            let v = r.int()?;
            match prior.location {
                // draft-22: without a Group ID Delta, the Object ID is the prior one plus the delta.
                Some(p) if R::FETCH_ID_DELTAS && !has_group => {
                    id_in_range::<R>(p.object.checked_add(v), "Object ID overflows")?
                }
                _ => v,
            }
        } else {
            let p = prior.location("fetch object references the Object ID of no prior object")?;
            id_in_range::<R>(p.object.checked_add(1), "Object ID overflows")?
        };

        let publisher_priority = if flags & PRIORITY != 0 {
            r.u8()?
        } else {
            prior
                .priority
                .ok_or(DecodeError::violation("fetch object references the Priority of no prior object"))?
        };
        let properties = if flags & PROPERTIES != 0 {
            read_object_properties_as(&mut r, R::KV)?
        } else {
            Properties::new()
        };
        let payload_len = r.int()?;

        let location = Location { group, object };
        self.prior = FetchPrior {
            location: Some(location),
            subgroup: Some(subgroup_id),
            priority: Some(publisher_priority),
        };
        let obj = FetchObject { location, subgroup_id, publisher_priority, properties, payload_len };
        Ok((FetchItem::Object(obj), r.position()))
    }
}

/// draft-22 §11.4.1.1: Ascending adds Group ID Delta + 1, Descending subtracts it.
fn step_group<R: DataRules>(prior: u64, delta: u64, order: GroupOrder) -> Result<u64, DecodeError> {
    let step = delta.checked_add(1);
    let g = match order {
        GroupOrder::Ascending => step.and_then(|s| prior.checked_add(s)),
        GroupOrder::Descending => step.and_then(|s| prior.checked_sub(s)),
    };
    id_in_range::<R>(g, "Group ID out of range")
}

/// Writes the items of one fetch stream, after its FETCH_HEADER; the inverse of
/// [`FetchReader`]. It picks the most compact flags: fields equal to, or derivable from, the
/// prior object are omitted. In draft-22 the items must follow the Group Order (groups move
/// only in its direction; Object IDs do not decrease within a group) since the deltas cannot
/// express anything else; draft-16's absolute fields accept any sequence.
#[derive(Debug, Clone)]
pub struct FetchWriter<R> {
    order: GroupOrder,
    prior: FetchPrior,
    _r: PhantomData<R>,
}

impl<R: DataRules> FetchWriter<R> {
    /// `order` is the fetch's Group Order; draft-16 ignores it.
    pub fn new(order: GroupOrder) -> Self {
        FetchWriter { order, prior: FetchPrior::default(), _r: PhantomData }
    }

    /// Appends one item (for an object, its header fields; the caller writes the payload).
    pub fn encode(&mut self, item: &FetchItem, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        if R::FETCH_FIXED_FIELDS {
            return super::fetch_fixed::encode::<R>(item, out);
        }
        match item {
            FetchItem::EndOfRange { kind, location } => {
                let code = range_end_code::<R>(*kind)?;
                write_atomic::<R::V, _>(out, |w| {
                    w.int(code)?;
                    w.int(location.group)?;
                    w.int(location.object)
                })?;
                self.prior.location = Some(*location);
                Ok(())
            }
            FetchItem::Object(o) => self.encode_object(o, out),
        }
    }

    fn encode_object(&mut self, o: &FetchObject, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        use fetch_flags::*;
        let Location { group, object } = o.location;
        let max = R::V::MAX;
        if group > max || object > max || o.subgroup_id.is_some_and(|s| s > max) {
            return Err(EncodeError::OutOfRange("ID above the integer range"));
        }
        let prior = self.prior;
        let mut flags = 0;

        let group_field = match prior.location {
            None => Some(group),
            Some(p) if p.group == group => None,
            Some(p) if R::FETCH_ID_DELTAS => Some(group_delta(p.group, group, self.order)?),
            Some(_) => Some(group),
        };
        if group_field.is_some() {
            flags |= GROUP_ID;
        }

        let object_field = match prior.location {
            Some(p) if p.object.checked_add(1) == Some(object) => None,
            Some(p) if R::FETCH_ID_DELTAS && group_field.is_none() => Some(
                object
                    .checked_sub(p.object)
                    .ok_or(EncodeError::OutOfRange("Object ID decreases within a group"))?,
            ),
            _ => Some(object),
        };
        if object_field.is_some() {
            flags |= OBJECT_ID;
        }

        let subgroup_field = match o.subgroup_id {
            None => {
                flags |= DATAGRAM;
                None
            }
            Some(0) => None,
            Some(s) => match prior.subgroup {
                Some(Some(ps)) if ps == s => {
                    flags |= SUBGROUP_PRIOR;
                    None
                }
                Some(Some(ps)) if ps.checked_add(1) == Some(s) => {
                    flags |= SUBGROUP_PRIOR_PLUS_ONE;
                    None
                }
                _ => {
                    flags |= SUBGROUP_PRESENT;
                    Some(s)
                }
            },
        };

        let priority_field = if prior.priority == Some(o.publisher_priority) {
            None
        } else {
            flags |= PRIORITY;
            Some(o.publisher_priority)
        };
        if !o.properties.is_empty() {
            flags |= PROPERTIES;
        }

        write_atomic::<R::V, _>(out, |w| {
            w.int(flags)?;
            if let Some(g) = group_field {
                w.int(g)?;
            }
            if let Some(s) = subgroup_field {
                w.int(s)?;
            }
            if let Some(v) = object_field {
                w.int(v)?;
            }
            if let Some(p) = priority_field {
                w.u8(p);
            }
            if !o.properties.is_empty() {
                write_object_properties_as(w, &o.properties, R::KV)?;
            }
            w.int(o.payload_len)
        })?;
        self.prior = FetchPrior {
            location: Some(o.location),
            subgroup: Some(o.subgroup_id),
            priority: Some(o.publisher_priority),
        };
        Ok(())
    }
}

/// The draft-22 Group ID Delta from `prior` to `group` (which differ).
fn group_delta(prior: u64, group: u64, order: GroupOrder) -> Result<u64, EncodeError> {
    let step = match order {
        GroupOrder::Ascending => group.checked_sub(prior),
        GroupOrder::Descending => prior.checked_sub(group),
    };
    step.and_then(|s| s.checked_sub(1))
        .ok_or(EncodeError::OutOfRange("Group ID moves against the Group Order"))
}
