//! The two forms draft-16 and draft-18 share and later drafts dropped, written once for both
//! integer encodings: the Subscription Filter (draft-16 §5.1.2, draft-18 §5.1.2), and the
//! FETCH body led by a Fetch Type with its "end plus one" End Location (draft-16 §9.16,
//! draft-18 §10.12), which FETCH_OK shares (draft-16 §9.17, draft-18 §10.13).

use crate::codec::{Reader, Writer};
use crate::common::{read_location, write_location};
use crate::error::{DecodeError, EncodeError};
use crate::model::{Fetch, FetchEnd, FetchKind, FullTrackName, Location, LocationFilter, RequestId};
use crate::varint::VarInt;

/// Subscription Filter types.
pub mod filter_type {
    pub const NEXT_GROUP_START: u64 = 0x1;
    pub const LARGEST_OBJECT: u64 = 0x2;
    pub const ABSOLUTE_START: u64 = 0x3;
    pub const ABSOLUTE_RANGE: u64 = 0x4;
}

/// How an AbsoluteRange Subscription Filter names its end group: draft-16 the End Group
/// itself, draft-18 an End Group Delta from the Start Location's group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EndGroup {
    Absolute,
    Delta,
}

/// A Subscription Filter as a [`LocationFilter`]: Next Group Start is
/// `RelativeStart { groups_back: 0 }`, Largest Object is `NextObject`, AbsoluteStart is
/// `AbsoluteStart`, AbsoluteRange is `AbsoluteStartGroupEnd` with the absolute end group (an
/// end before the start, or a delta that overflows, is a PROTOCOL_VIOLATION).
pub fn read_subscription_filter<V: VarInt>(
    r: &mut Reader<'_, V>,
    end: EndGroup,
) -> Result<LocationFilter, DecodeError> {
    Ok(match r.int()? {
        filter_type::NEXT_GROUP_START => LocationFilter::RelativeStart { groups_back: 0 },
        filter_type::LARGEST_OBJECT => LocationFilter::NextObject,
        filter_type::ABSOLUTE_START => LocationFilter::AbsoluteStart { start: read_location(r)? },
        filter_type::ABSOLUTE_RANGE => {
            let start = read_location(r)?;
            let v = r.int()?;
            let end_group = match end {
                EndGroup::Absolute if v < start.group => {
                    return Err(DecodeError::violation("filter End Group before Start Location"))
                }
                EndGroup::Absolute => v,
                EndGroup::Delta => start
                    .group
                    .checked_add(v)
                    .ok_or(DecodeError::violation("Start Group + End Group Delta overflows 2^64-1"))?,
            };
            LocationFilter::AbsoluteStartGroupEnd { start, end_group }
        }
        _ => return Err(DecodeError::violation("unknown Subscription Filter type")),
    })
}

/// Writes `f` as a Subscription Filter; the filters these drafts have no type for (an
/// explicit no-filter, a start more than the next group back, an end inside a group) are
/// `Unsupported`.
pub fn write_subscription_filter<V: VarInt>(
    w: &mut Writer<'_, V>,
    f: LocationFilter,
    end: EndGroup,
) -> Result<(), EncodeError> {
    match f {
        LocationFilter::RelativeStart { groups_back: 0 } => w.int(filter_type::NEXT_GROUP_START),
        LocationFilter::NextObject => w.int(filter_type::LARGEST_OBJECT),
        LocationFilter::AbsoluteStart { start } => {
            w.int(filter_type::ABSOLUTE_START)?;
            write_location(w, start)
        }
        LocationFilter::AbsoluteStartGroupEnd { start, end_group } => {
            let delta = end_group
                .checked_sub(start.group)
                .ok_or(EncodeError::OutOfRange("filter End Group before Start Location"))?;
            w.int(filter_type::ABSOLUTE_RANGE)?;
            write_location(w, start)?;
            w.int(if end == EndGroup::Delta { delta } else { end_group })
        }
        LocationFilter::RelativeStart { .. } => {
            Err(EncodeError::Unsupported("relative start filter other than Next Group Start"))
        }
        LocationFilter::None => Err(EncodeError::Unsupported("explicit no-filter")),
        LocationFilter::AbsoluteRange { .. } => {
            Err(EncodeError::Unsupported("subscription filter ending inside a group"))
        }
    }
}

/// FETCH types.
pub mod fetch_type {
    pub const STANDALONE: u64 = 0x1;
    pub const RELATIVE_JOINING: u64 = 0x2;
    pub const ABSOLUTE_JOINING: u64 = 0x3;
}

/// A FETCH's Fetch Type and the fields it names, after the Request ID and before the
/// parameters: a standalone FETCH's Full Track Name (written by `track`) and Start and End
/// Locations from `params.location_filter` (an `AbsoluteStartGroupEnd` ends at
/// `{end_group, 0}`, the whole group; an `AbsoluteRange` at its inclusive end plus one
/// object), or a joining FETCH's Joining Request ID and Joining Start.
pub fn write_fetch_kind<V: VarInt>(
    w: &mut Writer<'_, V>,
    m: &Fetch,
    track: impl FnOnce(&mut Writer<'_, V>, &FullTrackName) -> Result<(), EncodeError>,
) -> Result<(), EncodeError> {
    match &m.kind {
        FetchKind::Standalone { track: t } => {
            let (start, end) = match m.params.location_filter {
                Some(LocationFilter::AbsoluteStartGroupEnd { start, end_group }) => {
                    (start, Location::new(end_group, 0))
                }
                Some(LocationFilter::AbsoluteRange { start, end }) => (start, end_plus_one(end)?),
                _ => return Err(EncodeError::Unsupported("standalone FETCH without an absolute range")),
            };
            w.int(fetch_type::STANDALONE)?;
            track(w, t)?;
            write_location(w, start)?;
            write_location(w, end)
        }
        FetchKind::RelativeJoining { joining_request_id, joining_start }
        | FetchKind::AbsoluteJoining { joining_request_id, joining_start } => {
            if m.params.location_filter.is_some() {
                return Err(EncodeError::Unsupported("location filter on a joining FETCH"));
            }
            let ty = match m.kind {
                FetchKind::RelativeJoining { .. } => fetch_type::RELATIVE_JOINING,
                _ => fetch_type::ABSOLUTE_JOINING,
            };
            w.int(ty)?;
            w.int(joining_request_id.0)?;
            w.int(*joining_start)
        }
    }
}

/// The inverse of [`write_fetch_kind`]: the kind, and a standalone FETCH's range (for
/// `params.location_filter`). An unknown Fetch Type is a PROTOCOL_VIOLATION.
pub fn read_fetch_kind<V: VarInt>(
    r: &mut Reader<'_, V>,
    track: impl FnOnce(&mut Reader<'_, V>) -> Result<FullTrackName, DecodeError>,
) -> Result<(FetchKind, Option<LocationFilter>), DecodeError> {
    Ok(match r.int()? {
        fetch_type::STANDALONE => {
            let track = track(r)?;
            let start = read_location(r)?;
            let range = match fetch_end(read_location(r)?) {
                FetchEnd::Group(end_group) => LocationFilter::AbsoluteStartGroupEnd { start, end_group },
                FetchEnd::Object(end) => LocationFilter::AbsoluteRange { start, end },
            };
            (FetchKind::Standalone { track }, Some(range))
        }
        ty @ (fetch_type::RELATIVE_JOINING | fetch_type::ABSOLUTE_JOINING) => {
            let (joining_request_id, joining_start) = (RequestId(r.int()?), r.int()?);
            let kind = if ty == fetch_type::RELATIVE_JOINING {
                FetchKind::RelativeJoining { joining_request_id, joining_start }
            } else {
                FetchKind::AbsoluteJoining { joining_request_id, joining_start }
            };
            (kind, None)
        }
        _ => return Err(DecodeError::violation("unknown Fetch Type")),
    })
}

/// An inclusive end as an "end plus one" Location.
pub fn end_plus_one(end: Location) -> Result<Location, EncodeError> {
    let object = end.object.checked_add(1).ok_or(EncodeError::OutOfRange("end object of 2^64-1"))?;
    Ok(Location::new(end.group, object))
}

/// An "end plus one" End Location: `{G, 0}` is the whole group G, `{G, O}` ends at `{G, O-1}`.
pub fn fetch_end(end: Location) -> FetchEnd {
    match end.object {
        0 => FetchEnd::Group(end.group),
        o => FetchEnd::Object(Location::new(end.group, o - 1)),
    }
}

/// A FETCH_OK End Location as written: [`end_plus_one`], or `{G, 0}` for the whole group G.
pub fn write_fetch_end(end: FetchEnd) -> Result<Location, EncodeError> {
    match end {
        FetchEnd::Group(g) => Ok(Location::new(g, 0)),
        FetchEnd::Object(l) => end_plus_one(l),
    }
}
