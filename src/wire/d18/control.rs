//! draft-18 control messages (draft-ietf-moq-transport-18 §10): `Type (vi64), Length (16),
//! Body`.
//!
//! The framing, the streams and most bodies are draft-22's: SETUP on each side's control
//! stream, every request on its own bidirectional stream, responses without a Request ID (the
//! decoder takes it from [`DecodeContext::request_id`], the encoder drops the model's), and a
//! response-only message on the control stream is a PROTOCOL_VIOLATION. What draft-18 has of
//! its own:
//!
//! - GOAWAY ends with a Request ID when it is sent on the control stream (§10.4), carried in
//!   [`GoAway::request_id`].
//! - FETCH has a Fetch Type (§10.12): a standalone FETCH names its range with Start and End
//!   Locations ("end plus one", object 0 = the whole group) mapped onto
//!   `params.location_filter` as the draft-16 codec does, and the joining forms exist.
//!   FETCH_OK's End Location uses the same "plus one" form (§10.13).
//! - PUBLISH_OK is a REQUEST_OK (§10.5); the table still lists 0x1E as PUBLISH_OK with the
//!   REQUEST_OK layout, so 0x1E decodes (as [`Message::PublishOk`]) but is never written.
//! - PUBLISH_BLOCKED (0xF, §10.20) is draft-22's PUBLISH_SKIPPED ([`Message::PublishSkipped`]).
//! - There is no PUBLISH_STATE_NOTIFY, and the parameter tables differ ([`super::params`]).

use bytes::Bytes;

use super::params::{allowed, read_params, read_setup_options, write_params, write_setup_options};
use crate::codec::{Reader, Writer};
use crate::common::{
    read_control_frame, read_location, read_namespace, read_properties, read_reason, read_track_name,
    write_control, write_full_track_name, write_location, write_namespace, write_properties, write_reason,
    write_track_name,
};
// Identical in draft-18 and draft-22 (the same REQUEST_ERROR layout, REDIRECT code point and
// request-stream rules): written once, in the draft-22 codec.
use crate::d22::control::{read_full_track_name, read_request_error, response_id, write_request_error};
use crate::d22::params::ParamSet;
use crate::error::{DecodeError, EncodeError};
use crate::model::limits::MAX_GOAWAY_URI;
use crate::model::{
    DecodeContext, Fetch, FetchEnd, FetchKind, FetchOk, GoAway, Location, LocationFilter, Message,
    Parameters, Properties, Publish, PublishDone, PublishNamespace, PublishOk, PublishSkipped, RequestId,
    RequestOk, RequestUpdate, Role, Setup, Subscribe, SubscribeNamespace, SubscribeOk, SubscribeOptions,
    SubscribeTracks, TrackAlias, TrackNamespace,
};
use crate::varint::{VarInt, Vi64};

type R<'a> = Reader<'a, Vi64>;
type W<'a> = Writer<'a, Vi64>;

/// Message type code points (§10, the table of Message Types).
pub mod message_type {
    pub const SETUP: u64 = 0x2F00;
    pub const GOAWAY: u64 = 0x10;
    pub const SUBSCRIBE: u64 = 0x3;
    pub const SUBSCRIBE_OK: u64 = 0x4;
    pub const PUBLISH: u64 = 0x1D;
    /// Listed as PUBLISH_OK with the REQUEST_OK layout (§10.5); decoded, never written.
    pub const PUBLISH_OK: u64 = 0x1E;
    pub const PUBLISH_DONE: u64 = 0xB;
    pub const FETCH: u64 = 0x16;
    pub const FETCH_OK: u64 = 0x18;
    pub const TRACK_STATUS: u64 = 0xD;
    pub const PUBLISH_NAMESPACE: u64 = 0x6;
    pub const SUBSCRIBE_NAMESPACE: u64 = 0x50;
    pub const SUBSCRIBE_TRACKS: u64 = 0x51;
    pub const NAMESPACE: u64 = 0x8;
    pub const NAMESPACE_DONE: u64 = 0xE;
    pub const PUBLISH_BLOCKED: u64 = 0xF;
    pub const REQUEST_UPDATE: u64 = 0x2;
    pub const REQUEST_OK: u64 = 0x7;
    pub const REQUEST_ERROR: u64 = 0x5;
    /// RESERVED rows: old SETUP (0x01), CLIENT/SERVER_SETUP of <= 10 (0x40, 0x41) and <= 16
    /// (0x20, 0x21).
    pub const RESERVED: [u64; 5] = [0x01, 0x40, 0x41, 0x20, 0x21];
}

/// FETCH types (§10.12).
pub mod fetch_type {
    pub const STANDALONE: u64 = 0x1;
    pub const RELATIVE_JOINING: u64 = 0x2;
    pub const ABSOLUTE_JOINING: u64 = 0x3;
}

/// REQUEST_ERROR code REDIRECT (§15.10.2): the only code followed by a Redirect (§10.6.2).
pub const REDIRECT: u64 = 0x34;

// ---------------------------------------------------------------------------------------------
// Encoding
// ---------------------------------------------------------------------------------------------

/// Appends one framed control message. Messages draft-18 lacks fail with `Unsupported`;
/// PUBLISH_OK is written as REQUEST_OK (§10.5).
pub fn encode_message(msg: &Message, out: &mut Vec<u8>) -> Result<(), EncodeError> {
    use message_type as mt;
    match msg {
        Message::ClientSetup(s) => frame(out, mt::SETUP, |w| write_setup_options(w, &s.options, true)),
        Message::ServerSetup(s) => frame(out, mt::SETUP, |w| write_setup_options(w, &s.options, false)),
        Message::GoAway(m) => frame(out, mt::GOAWAY, |w| write_goaway(w, m)),
        Message::RequestOk(m) => frame(out, mt::REQUEST_OK, |w| {
            write_params(w, &m.params, allowed::REQUEST_OK)?;
            write_properties(w, &m.track_properties)
        }),
        Message::PublishOk(m) => frame(out, mt::REQUEST_OK, |w| {
            write_params(w, &m.params, allowed::PUBLISH_OK)?;
            write_properties(w, &Properties::new())
        }),
        Message::RequestError(m) => frame(out, mt::REQUEST_ERROR, |w| write_request_error(w, m)),
        Message::Subscribe(m) => frame(out, mt::SUBSCRIBE, |w| write_subscribe(w, m, allowed::SUBSCRIBE)),
        Message::TrackStatus(m) => {
            frame(out, mt::TRACK_STATUS, |w| write_subscribe(w, m, allowed::TRACK_STATUS))
        }
        Message::SubscribeOk(m) => frame(out, mt::SUBSCRIBE_OK, |w| {
            w.int(m.track_alias.0)?;
            write_params(w, &m.params, allowed::SUBSCRIBE_OK)?;
            write_properties(w, &m.track_properties)
        }),
        Message::RequestUpdate(m) => frame(out, mt::REQUEST_UPDATE, |w| {
            w.int(m.request_id.0)?;
            write_params(w, &m.params, allowed::REQUEST_UPDATE)
        }),
        Message::Publish(m) => frame(out, mt::PUBLISH, |w| {
            w.int(m.request_id.0)?;
            write_full_track_name(w, &m.track)?;
            w.int(m.track_alias.0)?;
            write_params(w, &m.params, allowed::PUBLISH)?;
            write_properties(w, &m.track_properties)
        }),
        Message::PublishDone(m) => frame(out, mt::PUBLISH_DONE, |w| {
            w.int(m.status_code)?;
            w.int(m.stream_count)?;
            write_reason(w, &m.reason)
        }),
        Message::Fetch(m) => frame(out, mt::FETCH, |w| write_fetch(w, m)),
        Message::FetchOk(m) => frame(out, mt::FETCH_OK, |w| write_fetch_ok(w, m)),
        Message::PublishNamespace(m) => frame(out, mt::PUBLISH_NAMESPACE, |w| {
            write_prefixed_request(w, m.request_id, &m.namespace, &m.params, allowed::PUBLISH_NAMESPACE)
        }),
        Message::SubscribeNamespace(m) => {
            // draft-18 SUBSCRIBE_NAMESPACE yields NAMESPACE messages only; PUBLISHes come from
            // SUBSCRIBE_TRACKS (§10.18, §10.19).
            if m.options != SubscribeOptions::Namespace {
                return Err(EncodeError::Unsupported("SUBSCRIBE_NAMESPACE options other than NAMESPACE"));
            }
            frame(out, mt::SUBSCRIBE_NAMESPACE, |w| {
                write_prefixed_request(w, m.request_id, &m.prefix, &m.params, allowed::SUBSCRIBE_NAMESPACE)
            })
        }
        Message::SubscribeTracks(m) => frame(out, mt::SUBSCRIBE_TRACKS, |w| {
            write_prefixed_request(w, m.request_id, &m.prefix, &m.params, allowed::SUBSCRIBE_TRACKS)
        }),
        Message::Namespace(suffix) => frame(out, mt::NAMESPACE, |w| write_namespace(w, suffix)),
        Message::NamespaceDone(suffix) => frame(out, mt::NAMESPACE_DONE, |w| write_namespace(w, suffix)),
        Message::PublishSkipped(m) => frame(out, mt::PUBLISH_BLOCKED, |w| {
            write_namespace(w, &m.namespace_suffix)?;
            write_track_name(w, m.namespace_suffix.byte_len(), &m.track_name)
        }),
        Message::MaxRequestId(_)
        | Message::RequestsBlocked(_)
        | Message::Unsubscribe(_)
        | Message::FetchCancel(_)
        | Message::PublishNamespaceDone(_)
        | Message::PublishNamespaceCancel(_)
        | Message::PublishStateNotify(_) => Err(EncodeError::Unsupported(msg.name())),
    }
}

fn frame(
    out: &mut Vec<u8>,
    ty: u64,
    body: impl FnOnce(&mut W<'_>) -> Result<(), EncodeError>,
) -> Result<(), EncodeError> {
    write_control::<Vi64>(out, ty, body)
}

/// GOAWAY (§10.4): New Session URI (at most 8192 bytes), Timeout, and the Request ID when the
/// message is for the control stream (`request_id` is `Some`).
fn write_goaway(w: &mut W<'_>, m: &GoAway) -> Result<(), EncodeError> {
    if m.new_session_uri.len() > MAX_GOAWAY_URI {
        return Err(EncodeError::OutOfRange("GOAWAY URI longer than 8192 bytes"));
    }
    w.len_prefixed(&m.new_session_uri)?;
    w.int(m.timeout_ms)?;
    match m.request_id {
        Some(id) => w.int(id.0),
        None => Ok(()),
    }
}

/// SUBSCRIBE (§10.7) and TRACK_STATUS (§10.14): Request ID, Full Track Name, Parameters.
fn write_subscribe(w: &mut W<'_>, m: &Subscribe, allowed: ParamSet) -> Result<(), EncodeError> {
    w.int(m.request_id.0)?;
    write_full_track_name(w, &m.track)?;
    write_params(w, &m.params, allowed)
}

/// FETCH (§10.12): Request ID, Fetch Type, the standalone or joining fields, Parameters. A
/// standalone FETCH's `params.location_filter` becomes its Start and End Locations: an
/// `AbsoluteStartGroupEnd` ends at `{end_group, 0}` (the whole group), an `AbsoluteRange` at its
/// inclusive end plus one object.
fn write_fetch(w: &mut W<'_>, m: &Fetch) -> Result<(), EncodeError> {
    w.int(m.request_id.0)?;
    match &m.kind {
        FetchKind::Standalone { track } => {
            let (start, end) = match m.params.location_filter {
                Some(LocationFilter::AbsoluteStartGroupEnd { start, end_group }) => {
                    (start, Location::new(end_group, 0))
                }
                Some(LocationFilter::AbsoluteRange { start, end }) => (start, end_plus_one(end)?),
                _ => return Err(EncodeError::Unsupported("standalone FETCH without an absolute range")),
            };
            w.int(fetch_type::STANDALONE)?;
            write_full_track_name(w, track)?;
            write_location(w, start)?;
            write_location(w, end)?;
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
            w.int(*joining_start)?;
        }
    }
    // The range travelled in the body; FETCH has no SUBSCRIPTION_FILTER parameter.
    let params = Parameters { location_filter: None, ..m.params.clone() };
    write_params(w, &params, allowed::FETCH)
}

/// An inclusive end as draft-18's "end plus one" Location (§10.12.1, §10.13).
fn end_plus_one(end: Location) -> Result<Location, EncodeError> {
    let object = end.object.checked_add(1).ok_or(EncodeError::OutOfRange("end object of 2^64-1"))?;
    Ok(Location::new(end.group, object))
}

/// FETCH_OK (§10.13): End Of Track (8), End Location ("end plus one"; object 0 = the whole
/// group), Parameters, Track Properties.
fn write_fetch_ok(w: &mut W<'_>, m: &FetchOk) -> Result<(), EncodeError> {
    let end = match m.end_location {
        FetchEnd::Group(g) => Location::new(g, 0),
        FetchEnd::Object(l) => end_plus_one(l)?,
    };
    w.u8(u8::from(m.end_of_track));
    write_location(w, end)?;
    write_params(w, &m.params, allowed::FETCH_OK)?;
    write_properties(w, &m.track_properties)
}

/// PUBLISH_NAMESPACE / SUBSCRIBE_NAMESPACE / SUBSCRIBE_TRACKS: Request ID, Track Namespace
/// (Prefix), Parameters.
fn write_prefixed_request(
    w: &mut W<'_>,
    id: RequestId,
    prefix: &TrackNamespace,
    params: &Parameters,
    allowed: ParamSet,
) -> Result<(), EncodeError> {
    w.int(id.0)?;
    write_namespace(w, prefix)?;
    write_params(w, params, allowed)
}

// ---------------------------------------------------------------------------------------------
// Decoding
// ---------------------------------------------------------------------------------------------

/// Decodes one control message from the front of `buf`: (message, bytes consumed).
/// `NeedMore` until the whole frame (type, 16-bit length, body) is present; an unknown or
/// reserved type fails as soon as the type is readable. A body shorter or longer than its
/// fields is a PROTOCOL_VIOLATION (§10).
pub fn decode_message(buf: &[u8], ctx: &DecodeContext) -> Result<(Message, usize), DecodeError> {
    if let Ok((ty, _)) = Vi64::decode(buf) {
        check_type(ty)?;
    }
    let (ty, body, total) = read_control_frame::<Vi64>(buf)?;
    let mut r = R::new(body);
    let msg = decode_body(ty, &mut r, ctx)
        .map_err(|e| e.within_length("control message body shorter than its fields"))?;
    r.finish("control message body longer than its fields")?;
    Ok((msg, total))
}

/// Unknown types and the RESERVED rows close the session (§10).
fn check_type(ty: u64) -> Result<(), DecodeError> {
    use message_type as mt;
    match ty {
        mt::SETUP
        | mt::GOAWAY
        | mt::SUBSCRIBE
        | mt::SUBSCRIBE_OK
        | mt::PUBLISH
        | mt::PUBLISH_OK
        | mt::PUBLISH_DONE
        | mt::FETCH
        | mt::FETCH_OK
        | mt::TRACK_STATUS
        | mt::PUBLISH_NAMESPACE
        | mt::SUBSCRIBE_NAMESPACE
        | mt::SUBSCRIBE_TRACKS
        | mt::NAMESPACE
        | mt::NAMESPACE_DONE
        | mt::PUBLISH_BLOCKED
        | mt::REQUEST_UPDATE
        | mt::REQUEST_OK
        | mt::REQUEST_ERROR => Ok(()),
        _ if mt::RESERVED.contains(&ty) => Err(DecodeError::violation("reserved control message type")),
        _ => Err(DecodeError::violation("unknown control message type")),
    }
}

fn decode_body(ty: u64, r: &mut R<'_>, ctx: &DecodeContext) -> Result<Message, DecodeError> {
    use message_type as mt;
    Ok(match ty {
        mt::SETUP => {
            // SETUP belongs on the control stream only (§10, the Stream column).
            if ctx.request_id.is_some() {
                return Err(DecodeError::violation("SETUP on a request stream"));
            }
            let setup = Setup { options: read_setup_options(r, ctx.sender == Role::Client)? };
            match ctx.sender {
                Role::Client => Message::ClientSetup(setup),
                Role::Server => Message::ServerSetup(setup),
            }
        }
        mt::GOAWAY => Message::GoAway(read_goaway(r, ctx)?),
        mt::SUBSCRIBE => Message::Subscribe(read_subscribe(r, allowed::SUBSCRIBE)?),
        mt::TRACK_STATUS => Message::TrackStatus(read_subscribe(r, allowed::TRACK_STATUS)?),
        mt::PUBLISH => {
            let request_id = RequestId(r.int()?);
            let track = read_full_track_name(r)?;
            let track_alias = TrackAlias(r.int()?);
            let params = read_params(r, allowed::PUBLISH)?;
            Message::Publish(Publish {
                request_id,
                track,
                track_alias,
                params,
                track_properties: read_properties(r)?,
            })
        }
        mt::FETCH => Message::Fetch(read_fetch(r)?),
        mt::PUBLISH_NAMESPACE => {
            let (request_id, namespace, params) = read_prefixed_request(r, allowed::PUBLISH_NAMESPACE)?;
            Message::PublishNamespace(PublishNamespace { request_id, namespace, params })
        }
        mt::SUBSCRIBE_NAMESPACE => {
            let (request_id, prefix, params) = read_prefixed_request(r, allowed::SUBSCRIBE_NAMESPACE)?;
            Message::SubscribeNamespace(SubscribeNamespace {
                request_id,
                prefix,
                options: SubscribeOptions::Namespace,
                params,
            })
        }
        mt::SUBSCRIBE_TRACKS => {
            let (request_id, prefix, params) = read_prefixed_request(r, allowed::SUBSCRIBE_TRACKS)?;
            Message::SubscribeTracks(SubscribeTracks { request_id, prefix, params })
        }
        mt::PUBLISH_BLOCKED => {
            let request_id = response_id(ctx)?;
            let namespace_suffix = read_namespace(r, 0)?;
            let track_name = read_track_name(r, namespace_suffix.byte_len())?;
            Message::PublishSkipped(PublishSkipped { request_id, namespace_suffix, track_name })
        }
        mt::REQUEST_UPDATE => {
            // The update's own Request ID is on the wire; the updated request is the stream's.
            let existing_request_id = response_id(ctx)?;
            let request_id = RequestId(r.int()?);
            Message::RequestUpdate(RequestUpdate {
                request_id,
                existing_request_id,
                params: read_params(r, allowed::REQUEST_UPDATE)?,
            })
        }
        _ => return decode_response(ty, r, ctx),
    })
}

/// The body of a response (or a message on a response's stream) of type `ty`.
fn decode_response(ty: u64, r: &mut R<'_>, ctx: &DecodeContext) -> Result<Message, DecodeError> {
    use message_type as mt;
    Ok(match ty {
        mt::SUBSCRIBE_OK => {
            let request_id = response_id(ctx)?;
            let track_alias = TrackAlias(r.int()?);
            let params = read_params(r, allowed::SUBSCRIBE_OK)?;
            Message::SubscribeOk(SubscribeOk {
                request_id,
                track_alias,
                params,
                track_properties: read_properties(r)?,
            })
        }
        mt::PUBLISH_OK => {
            let request_id = response_id(ctx)?;
            let params = read_params(r, allowed::PUBLISH_OK)?;
            // §10.5: Track Properties are empty in PUBLISH_OK.
            if !read_properties(r)?.is_empty() {
                return Err(DecodeError::violation("Track Properties in PUBLISH_OK"));
            }
            Message::PublishOk(PublishOk { request_id, params })
        }
        mt::PUBLISH_DONE => {
            let request_id = response_id(ctx)?;
            let status_code = r.int()?;
            let stream_count = r.int()?;
            Message::PublishDone(PublishDone {
                request_id,
                status_code,
                stream_count,
                reason: read_reason(r)?,
            })
        }
        mt::FETCH_OK => Message::FetchOk(read_fetch_ok(r, ctx)?),
        mt::NAMESPACE => {
            response_id(ctx)?;
            Message::Namespace(read_namespace(r, 0)?)
        }
        mt::NAMESPACE_DONE => {
            response_id(ctx)?;
            Message::NamespaceDone(read_namespace(r, 0)?)
        }
        mt::REQUEST_OK => {
            let request_id = response_id(ctx)?;
            let params = read_params(r, allowed::REQUEST_OK)?;
            Message::RequestOk(RequestOk { request_id, params, track_properties: read_properties(r)? })
        }
        mt::REQUEST_ERROR => Message::RequestError(read_request_error(r, ctx)?),
        _ => return Err(DecodeError::violation("unknown control message type")),
    })
}

/// GOAWAY (§10.4): the Request ID is there exactly on the control stream.
fn read_goaway(r: &mut R<'_>, ctx: &DecodeContext) -> Result<GoAway, DecodeError> {
    let uri = r.len_prefixed(MAX_GOAWAY_URI, "GOAWAY URI longer than 8192 bytes")?;
    if ctx.sender == Role::Client && !uri.is_empty() {
        return Err(DecodeError::violation("GOAWAY with a New Session URI from a client"));
    }
    let new_session_uri = Bytes::copy_from_slice(uri);
    let timeout_ms = r.int()?;
    let request_id = match ctx.request_id {
        None => Some(RequestId(r.int()?)),
        Some(_) => None,
    };
    Ok(GoAway { new_session_uri, timeout_ms, request_id })
}

fn read_subscribe(r: &mut R<'_>, allowed: ParamSet) -> Result<Subscribe, DecodeError> {
    let request_id = RequestId(r.int()?);
    let track = read_full_track_name(r)?;
    Ok(Subscribe { request_id, track, params: read_params(r, allowed)? })
}

/// FETCH (§10.12). A standalone FETCH's Start and End Locations become
/// `params.location_filter` (see [`write_fetch`]); an unknown Fetch Type is a
/// PROTOCOL_VIOLATION.
fn read_fetch(r: &mut R<'_>) -> Result<Fetch, DecodeError> {
    let request_id = RequestId(r.int()?);
    let (kind, range) = match r.int()? {
        fetch_type::STANDALONE => {
            let track = read_full_track_name(r)?;
            let start = read_location(r)?;
            let end = read_location(r)?;
            let range = match end.object {
                0 => LocationFilter::AbsoluteStartGroupEnd { start, end_group: end.group },
                o => LocationFilter::AbsoluteRange { start, end: Location::new(end.group, o - 1) },
            };
            (FetchKind::Standalone { track }, Some(range))
        }
        fetch_type::RELATIVE_JOINING => {
            let (joining_request_id, joining_start) = (RequestId(r.int()?), r.int()?);
            (FetchKind::RelativeJoining { joining_request_id, joining_start }, None)
        }
        fetch_type::ABSOLUTE_JOINING => {
            let (joining_request_id, joining_start) = (RequestId(r.int()?), r.int()?);
            (FetchKind::AbsoluteJoining { joining_request_id, joining_start }, None)
        }
        _ => return Err(DecodeError::violation("unknown Fetch Type")),
    };
    let mut params = read_params(r, allowed::FETCH)?;
    params.location_filter = range;
    Ok(Fetch { request_id, kind, params })
}

/// FETCH_OK (§10.13): End Location `{G, 0}` is the whole group G, `{G, O}` ends at `{G, O-1}`.
fn read_fetch_ok(r: &mut R<'_>, ctx: &DecodeContext) -> Result<FetchOk, DecodeError> {
    let request_id = response_id(ctx)?;
    let end_of_track = match r.u8()? {
        0 => false,
        1 => true,
        _ => return Err(DecodeError::violation("FETCH_OK End Of Track other than 0 or 1")),
    };
    let end = read_location(r)?;
    let end_location = match end.object {
        0 => FetchEnd::Group(end.group),
        o => FetchEnd::Object(Location::new(end.group, o - 1)),
    };
    let params = read_params(r, allowed::FETCH_OK)?;
    Ok(FetchOk { request_id, end_of_track, end_location, params, track_properties: read_properties(r)? })
}

fn read_prefixed_request(
    r: &mut R<'_>,
    allowed: ParamSet,
) -> Result<(RequestId, TrackNamespace, Parameters), DecodeError> {
    let request_id = RequestId(r.int()?);
    let prefix = read_namespace(r, 0)?;
    Ok((request_id, prefix, read_params(r, allowed)?))
}
