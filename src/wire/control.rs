//! Control messages of the request-stream drafts (draft-18 §10, draft-20 §10, draft-22 §9):
//! `Type (vi64), Length (16), Body`, written once for the three; [`Dialect`] holds where a
//! draft differs.
//!
//! SETUP and GOAWAY travel on the control stream; every other message travels on the
//! bidirectional stream of its request (draft-22 §6.4.2). Requests carry their Request ID;
//! responses (SUBSCRIBE_OK, REQUEST_OK, REQUEST_ERROR, PUBLISH_DONE, PUBLISH_STATE_NOTIFY,
//! FETCH_OK, PUBLISH_SKIPPED) do not, so the decoder takes it from
//! [`DecodeContext::request_id`] and the encoder drops the model's. NAMESPACE and
//! NAMESPACE_DONE carry only the namespace suffix.
//!
//! [`DecodeContext::request_id`] `None` means the control stream: a message that belongs on a
//! request stream and needs that stream's ID (the responses above, NAMESPACE, NAMESPACE_DONE,
//! REQUEST_UPDATE) is a PROTOCOL_VIOLATION there, and SETUP is one on a request stream. Requests
//! decode in either context, since the first message of a new stream names its own ID.
//!
//! Track Namespaces have 0 to 32 fields (draft-22 §2.4.1), including a track's own namespace,
//! so every namespace here is read with a minimum of zero fields.
//!
//! What draft-18 has of its own: GOAWAY ends with a Request ID on the control stream (§10.4);
//! FETCH has a Fetch Type (§10.12), a standalone FETCH names its range with Start and End
//! Locations ("end plus one", object 0 = the whole group) mapped onto
//! `params.location_filter`, and the joining forms exist; FETCH_OK's End Location uses the
//! same "plus one" form (§10.13); type 0x1E is PUBLISH_OK with the REQUEST_OK layout (§10.5),
//! decoded as [`Message::PublishOk`] and never written; 0xF is named PUBLISH_BLOCKED
//! (§10.20); there is no PUBLISH_STATE_NOTIFY.

use bytes::Bytes;

use crate::codec::{Reader, Writer};
use crate::common::{
    read_control_frame, read_location, read_namespace, read_properties, read_reason, read_track_name,
    write_control, write_full_track_name, write_location, write_namespace, write_properties, write_reason,
    write_track_name,
};
use crate::dialect::Dialect;
use crate::error::{DecodeError, EncodeError};
use crate::model::limits::MAX_GOAWAY_URI;
use crate::model::{
    DecodeContext, Fetch, FetchEnd, FetchKind, FetchOk, FullTrackName, GoAway, Message, Parameters,
    Properties, Publish, PublishDone, PublishNamespace, PublishOk, PublishSkipped, PublishStateNotify,
    Redirect, RequestError, RequestId, RequestOk, RequestUpdate, Role, Setup, Subscribe, SubscribeNamespace,
    SubscribeOk, SubscribeOptions, SubscribeTracks, TrackAlias, TrackNamespace,
};
use crate::params::{read_params, read_setup_options, write_params, write_setup_options, ParamSet};
use crate::typed_forms::{fetch_end, read_fetch_kind, write_fetch_end, write_fetch_kind};
use crate::varint::{VarInt, Vi64};

type R<'a> = Reader<'a, Vi64>;
type W<'a> = Writer<'a, Vi64>;

/// Message type code points (draft-22 §9 Table 5; draft-18 §10 and draft-20 §10, the table
/// of Message Types).
pub mod message_type {
    pub const SETUP: u64 = 0x2F00;
    pub const GOAWAY: u64 = 0x10;
    pub const SUBSCRIBE: u64 = 0x3;
    pub const SUBSCRIBE_OK: u64 = 0x4;
    pub const PUBLISH_STATE_NOTIFY: u64 = 0x22;
    pub const PUBLISH: u64 = 0x1D;
    pub const PUBLISH_DONE: u64 = 0xB;
    pub const FETCH: u64 = 0x16;
    pub const FETCH_OK: u64 = 0x18;
    pub const TRACK_STATUS: u64 = 0xD;
    pub const PUBLISH_NAMESPACE: u64 = 0x6;
    pub const SUBSCRIBE_NAMESPACE: u64 = 0x50;
    pub const SUBSCRIBE_TRACKS: u64 = 0x51;
    pub const NAMESPACE: u64 = 0x8;
    pub const NAMESPACE_DONE: u64 = 0xE;
    pub const PUBLISH_SKIPPED: u64 = 0xF;
    /// draft-18's name for PUBLISH_SKIPPED (§10.20).
    pub const PUBLISH_BLOCKED: u64 = PUBLISH_SKIPPED;
    /// draft-18: PUBLISH_OK with the REQUEST_OK layout (§10.5), decoded, never written; a
    /// RESERVED row from draft-20 on.
    pub const PUBLISH_OK: u64 = 0x1E;
    pub const REQUEST_UPDATE: u64 = 0x2;
    pub const REQUEST_OK: u64 = 0x7;
    pub const REQUEST_ERROR: u64 = 0x5;
    /// RESERVED rows: old SETUP (0x01), CLIENT/SERVER_SETUP of <= 10 (0x40, 0x41) and <= 16
    /// (0x20, 0x21); from draft-20 on also PUBLISH_OK of <= 17 (0x1E).
    pub const RESERVED: [u64; 6] = [0x01, 0x40, 0x41, 0x20, 0x21, 0x1E];
}

/// draft-18 FETCH types (§10.12).
pub use crate::typed_forms::fetch_type;

/// REQUEST_ERROR code REDIRECT (draft-22 §16.11.2, draft-18 §15.10.2): the only code followed
/// by a Redirect (draft-22 §9.4.2).
pub const REDIRECT: u64 = 0x34;

// ---------------------------------------------------------------------------------------------
// Encoding
// ---------------------------------------------------------------------------------------------

/// Appends one framed control message in draft `d`. Messages `d` lacks fail with
/// `Unsupported`; PUBLISH_OK is written as REQUEST_OK (draft-18 §10.5, draft-22 §9.3) when its
/// parameters fit.
pub fn encode_message(d: &Dialect, msg: &Message, out: &mut Vec<u8>) -> Result<(), EncodeError> {
    use message_type as mt;
    match msg {
        Message::ClientSetup(s) => frame(out, mt::SETUP, |w| write_setup_options(w, d, &s.options, true)),
        Message::ServerSetup(s) => frame(out, mt::SETUP, |w| write_setup_options(w, d, &s.options, false)),
        Message::GoAway(m) => frame(out, mt::GOAWAY, |w| write_goaway(w, d, m)),
        Message::RequestOk(m) => frame(out, mt::REQUEST_OK, |w| {
            write_params_then_properties(w, d, &m.params, d.params.request_ok, &m.track_properties)
        }),
        Message::PublishOk(m) => frame(out, mt::REQUEST_OK, |w| {
            write_params_then_properties(w, d, &m.params, d.params.publish_ok, &Properties::new())
        }),
        Message::RequestError(m) => frame(out, mt::REQUEST_ERROR, |w| write_request_error(w, m)),
        Message::Subscribe(m) => frame(out, mt::SUBSCRIBE, |w| write_subscribe(w, d, m, d.params.subscribe)),
        Message::TrackStatus(m) => {
            frame(out, mt::TRACK_STATUS, |w| write_subscribe(w, d, m, d.params.track_status))
        }
        Message::SubscribeOk(m) => frame(out, mt::SUBSCRIBE_OK, |w| {
            w.int(m.track_alias.0)?;
            write_params_then_properties(w, d, &m.params, d.params.subscribe_ok, &m.track_properties)
        }),
        Message::RequestUpdate(m) => frame(out, mt::REQUEST_UPDATE, |w| {
            w.int(m.request_id.0)?;
            write_params(w, d, &m.params, d.params.request_update)
        }),
        Message::Publish(m) => frame(out, mt::PUBLISH, |w| {
            w.int(m.request_id.0)?;
            write_full_track_name(w, &m.track)?;
            w.int(m.track_alias.0)?;
            write_params_then_properties(w, d, &m.params, d.params.publish, &m.track_properties)
        }),
        Message::PublishDone(m) => frame(out, mt::PUBLISH_DONE, |w| {
            w.int(m.status_code)?;
            w.int(m.stream_count)?;
            write_reason(w, &m.reason)
        }),
        Message::PublishStateNotify(_) if !d.publish_state_notify => {
            Err(EncodeError::Unsupported(msg.name()))
        }
        Message::PublishStateNotify(m) => frame(out, mt::PUBLISH_STATE_NOTIFY, |w| {
            write_params(w, d, &m.params, d.params.publish_state_notify)
        }),
        Message::Fetch(m) => frame(out, mt::FETCH, |w| write_fetch(w, d, m)),
        Message::FetchOk(m) => frame(out, mt::FETCH_OK, |w| write_fetch_ok(w, d, m)),
        Message::PublishNamespace(m) => frame(out, mt::PUBLISH_NAMESPACE, |w| {
            write_prefixed_request(w, d, m.request_id, &m.namespace, &m.params, d.params.publish_namespace)
        }),
        Message::SubscribeNamespace(m) => {
            // draft-22 SUBSCRIBE_NAMESPACE only ever yields NAMESPACE messages (§9.15).
            if m.options != SubscribeOptions::Namespace {
                return Err(EncodeError::Unsupported("SUBSCRIBE_NAMESPACE options other than NAMESPACE"));
            }
            frame(out, mt::SUBSCRIBE_NAMESPACE, |w| {
                write_prefixed_request(w, d, m.request_id, &m.prefix, &m.params, d.params.subscribe_namespace)
            })
        }
        Message::SubscribeTracks(m) => frame(out, mt::SUBSCRIBE_TRACKS, |w| {
            write_prefixed_request(w, d, m.request_id, &m.prefix, &m.params, d.params.subscribe_tracks)
        }),
        Message::Namespace(suffix) => frame(out, mt::NAMESPACE, |w| write_namespace(w, suffix)),
        Message::NamespaceDone(suffix) => frame(out, mt::NAMESPACE_DONE, |w| write_namespace(w, suffix)),
        Message::PublishSkipped(m) => frame(out, mt::PUBLISH_SKIPPED, |w| {
            write_namespace(w, &m.namespace_suffix)?;
            write_track_name(w, m.namespace_suffix.byte_len(), &m.track_name)
        }),
        Message::MaxRequestId(_)
        | Message::RequestsBlocked(_)
        | Message::Unsubscribe(_)
        | Message::FetchCancel(_)
        | Message::PublishNamespaceDone(_)
        | Message::PublishNamespaceCancel(_)
        | Message::PublishNamespaceDoneNamed(_)
        | Message::PublishNamespaceCancelNamed(_)
        | Message::UnsubscribeNamespace(_) => Err(EncodeError::Unsupported(msg.name())),
    }
}

/// Frames one message whose body `body` writes.
fn frame(
    out: &mut Vec<u8>,
    ty: u64,
    body: impl FnOnce(&mut W<'_>) -> Result<(), EncodeError>,
) -> Result<(), EncodeError> {
    write_control::<Vi64>(out, ty, body)
}

/// GOAWAY (draft-22 §9.2): New Session URI (at most 8192 bytes), Timeout; in draft-18 (§10.4)
/// then the Request ID when the message is for the control stream (`request_id` is `Some`).
fn write_goaway(w: &mut W<'_>, d: &Dialect, m: &GoAway) -> Result<(), EncodeError> {
    if m.request_id.is_some() && !d.goaway_request_id {
        return Err(EncodeError::Unsupported("GOAWAY Request ID (draft-18 only)"));
    }
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

/// REQUEST_ERROR (§9.4.2); the Redirect is present exactly for code REDIRECT.
pub(crate) fn write_request_error(w: &mut W<'_>, m: &RequestError) -> Result<(), EncodeError> {
    if (m.error_code == REDIRECT) != m.redirect.is_some() {
        return Err(EncodeError::OutOfRange("Redirect present exactly when the error code is REDIRECT"));
    }
    w.int(m.error_code)?;
    w.int(m.retry_interval)?;
    write_reason(w, &m.reason)?;
    if let Some(r) = &m.redirect {
        if r.connect_uri.len() > MAX_GOAWAY_URI {
            return Err(EncodeError::OutOfRange("Redirect Connect URI longer than 8192 bytes"));
        }
        w.len_prefixed(&r.connect_uri)?;
        write_full_track_name(w, &r.track)?;
    }
    Ok(())
}

/// SUBSCRIBE (§9.6) and TRACK_STATUS (§9.13): Request ID, Full Track Name, Parameters.
fn write_subscribe(w: &mut W<'_>, d: &Dialect, m: &Subscribe, allowed: ParamSet) -> Result<(), EncodeError> {
    w.int(m.request_id.0)?;
    write_full_track_name(w, &m.track)?;
    write_params(w, d, &m.params, allowed)
}

/// FETCH (draft-22 §9.11): only the standalone form exists; the range is the LOCATION_FILTER
/// parameter. draft-18 (§10.12): Request ID, Fetch Type, the standalone or joining fields,
/// Parameters; a standalone FETCH's `params.location_filter` becomes its Start and End
/// Locations: an `AbsoluteStartGroupEnd` ends at `{end_group, 0}` (the whole group), an
/// `AbsoluteRange` at its inclusive end plus one object.
fn write_fetch(w: &mut W<'_>, d: &Dialect, m: &Fetch) -> Result<(), EncodeError> {
    if d.fetch_type {
        return write_typed_fetch(w, d, m);
    }
    let FetchKind::Standalone { track } = &m.kind else {
        return Err(EncodeError::Unsupported("joining FETCH"));
    };
    w.int(m.request_id.0)?;
    write_full_track_name(w, track)?;
    write_params(w, d, &m.params, d.params.fetch)
}

fn write_typed_fetch(w: &mut W<'_>, d: &Dialect, m: &Fetch) -> Result<(), EncodeError> {
    w.int(m.request_id.0)?;
    write_fetch_kind(w, m, write_full_track_name)?;
    // The range travelled in the body; FETCH has no SUBSCRIPTION_FILTER parameter.
    let params = Parameters { location_filter: None, ..m.params.clone() };
    write_params(w, d, &params, d.params.fetch)
}

/// FETCH_OK (draft-22 §9.12): End Of Track (8), inclusive End Location, Parameters, Track
/// Properties. draft-18 (§10.13): the End Location is "end plus one"; object 0 = the whole
/// group.
fn write_fetch_ok(w: &mut W<'_>, d: &Dialect, m: &FetchOk) -> Result<(), EncodeError> {
    let end = match m.end_location {
        e if d.fetch_type => write_fetch_end(e)?,
        FetchEnd::Object(l) => l,
        FetchEnd::Group(_) => return Err(EncodeError::Unsupported("FETCH_OK ending at a whole group")),
    };
    w.u8(u8::from(m.end_of_track));
    write_location(w, end)?;
    write_params_then_properties(w, d, &m.params, d.params.fetch_ok, &m.track_properties)
}

/// PUBLISH_NAMESPACE / SUBSCRIBE_NAMESPACE / SUBSCRIBE_TRACKS: Request ID, Track Namespace
/// Prefix, Parameters.
fn write_prefixed_request(
    w: &mut W<'_>,
    d: &Dialect,
    id: RequestId,
    prefix: &TrackNamespace,
    params: &Parameters,
    allowed: ParamSet,
) -> Result<(), EncodeError> {
    w.int(id.0)?;
    write_namespace(w, prefix)?;
    write_params(w, d, params, allowed)
}

fn write_params_then_properties(
    w: &mut W<'_>,
    d: &Dialect,
    params: &Parameters,
    allowed: ParamSet,
    props: &Properties,
) -> Result<(), EncodeError> {
    write_params(w, d, params, allowed)?;
    write_properties(w, props)
}

// ---------------------------------------------------------------------------------------------
// Decoding
// ---------------------------------------------------------------------------------------------

/// Decodes one control message from the front of `buf`: (message, bytes consumed).
/// `NeedMore` until the whole frame (type, 16-bit length, body) is present; an unknown or
/// reserved type fails as soon as the type is readable. A body shorter or longer than its
/// fields is a PROTOCOL_VIOLATION (§9).
pub fn decode_message(d: &Dialect, buf: &[u8], ctx: &DecodeContext) -> Result<(Message, usize), DecodeError> {
    if let Ok((ty, _)) = Vi64::decode(buf) {
        check_type(d, ty)?;
    }
    let (ty, body, total) = read_control_frame::<Vi64>(buf)?;
    let mut r = R::new(body);
    let msg = decode_body(d, ty, &mut r, ctx)
        .map_err(|e| e.within_length("control message body shorter than its fields"))?;
    r.finish("control message body longer than its fields")?;
    Ok((msg, total))
}

/// Unknown types and the RESERVED rows of Table 5 close the session (§9).
fn check_type(d: &Dialect, ty: u64) -> Result<(), DecodeError> {
    use message_type as mt;
    match ty {
        mt::SETUP
        | mt::GOAWAY
        | mt::SUBSCRIBE
        | mt::SUBSCRIBE_OK
        | mt::PUBLISH
        | mt::PUBLISH_DONE
        | mt::FETCH
        | mt::FETCH_OK
        | mt::TRACK_STATUS
        | mt::PUBLISH_NAMESPACE
        | mt::SUBSCRIBE_NAMESPACE
        | mt::SUBSCRIBE_TRACKS
        | mt::NAMESPACE
        | mt::NAMESPACE_DONE
        | mt::PUBLISH_SKIPPED
        | mt::REQUEST_UPDATE
        | mt::REQUEST_OK
        | mt::REQUEST_ERROR => Ok(()),
        mt::PUBLISH_STATE_NOTIFY if d.publish_state_notify => Ok(()),
        mt::PUBLISH_OK if d.publish_ok_type => Ok(()),
        _ if mt::RESERVED.contains(&ty) => Err(DecodeError::violation("reserved control message type")),
        _ => Err(DecodeError::violation("unknown control message type")),
    }
}

fn decode_body(d: &Dialect, ty: u64, r: &mut R<'_>, ctx: &DecodeContext) -> Result<Message, DecodeError> {
    use message_type as mt;
    Ok(match ty {
        mt::SETUP => {
            // SETUP belongs on the control stream only (Table 5).
            if ctx.request_id.is_some() {
                return Err(DecodeError::violation("SETUP on a request stream"));
            }
            let setup = Setup { options: read_setup_options(r, d, ctx.sender == Role::Client)? };
            match ctx.sender {
                Role::Client => Message::ClientSetup(setup),
                Role::Server => Message::ServerSetup(setup),
            }
        }
        mt::GOAWAY => Message::GoAway(read_goaway(r, d, ctx)?),
        mt::SUBSCRIBE => Message::Subscribe(read_subscribe(r, d, d.params.subscribe)?),
        mt::TRACK_STATUS => Message::TrackStatus(read_subscribe(r, d, d.params.track_status)?),
        mt::PUBLISH => {
            let request_id = RequestId(r.int()?);
            let track = read_full_track_name(r)?;
            let track_alias = TrackAlias(r.int()?);
            let params = read_params(r, d, d.params.publish)?;
            Message::Publish(Publish {
                request_id,
                track,
                track_alias,
                params,
                track_properties: read_properties(r)?,
            })
        }
        mt::FETCH if d.fetch_type => Message::Fetch(read_typed_fetch(r, d)?),
        mt::FETCH => {
            let request_id = RequestId(r.int()?);
            let kind = FetchKind::Standalone { track: read_full_track_name(r)? };
            Message::Fetch(Fetch { request_id, kind, params: read_params(r, d, d.params.fetch)? })
        }
        mt::PUBLISH_NAMESPACE => {
            let (request_id, namespace, params) = read_prefixed_request(r, d, d.params.publish_namespace)?;
            Message::PublishNamespace(PublishNamespace { request_id, namespace, params })
        }
        mt::SUBSCRIBE_NAMESPACE => {
            let (request_id, prefix, params) = read_prefixed_request(r, d, d.params.subscribe_namespace)?;
            Message::SubscribeNamespace(SubscribeNamespace {
                request_id,
                prefix,
                options: SubscribeOptions::Namespace,
                params,
            })
        }
        mt::SUBSCRIBE_TRACKS => {
            let (request_id, prefix, params) = read_prefixed_request(r, d, d.params.subscribe_tracks)?;
            Message::SubscribeTracks(SubscribeTracks { request_id, prefix, params })
        }
        mt::REQUEST_UPDATE => {
            // The update's own Request ID is on the wire; the updated request is the stream's.
            let existing_request_id = response_id(ctx)?;
            let request_id = RequestId(r.int()?);
            Message::RequestUpdate(RequestUpdate {
                request_id,
                existing_request_id,
                params: read_params(r, d, d.params.request_update)?,
            })
        }
        _ => return decode_response(d, ty, r, ctx),
    })
}

/// The body of a response (or a message on a response's stream) of type `ty`.
fn decode_response(d: &Dialect, ty: u64, r: &mut R<'_>, ctx: &DecodeContext) -> Result<Message, DecodeError> {
    use message_type as mt;
    Ok(match ty {
        mt::SUBSCRIBE_OK => {
            let request_id = response_id(ctx)?;
            let track_alias = TrackAlias(r.int()?);
            let params = if d.stray_group_order {
                let stray = ParamSet::of(&[crate::model::param_type::GROUP_ORDER]);
                Parameters { group_order: None, ..read_params(r, d, d.params.subscribe_ok.union(stray))? }
            } else {
                read_params(r, d, d.params.subscribe_ok)?
            };
            Message::SubscribeOk(SubscribeOk {
                request_id,
                track_alias,
                params,
                track_properties: read_properties(r)?,
            })
        }
        mt::PUBLISH_STATE_NOTIFY => {
            let request_id = response_id(ctx)?;
            Message::PublishStateNotify(PublishStateNotify {
                request_id,
                params: read_params(r, d, d.params.publish_state_notify)?,
            })
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
        mt::FETCH_OK => Message::FetchOk(read_fetch_ok(r, d, ctx)?),
        mt::NAMESPACE => {
            response_id(ctx)?;
            Message::Namespace(read_namespace(r, 0)?)
        }
        mt::NAMESPACE_DONE => {
            response_id(ctx)?;
            Message::NamespaceDone(read_namespace(r, 0)?)
        }
        mt::PUBLISH_SKIPPED => {
            let request_id = response_id(ctx)?;
            let namespace_suffix = read_namespace(r, 0)?;
            let track_name = read_track_name(r, namespace_suffix.byte_len())?;
            Message::PublishSkipped(PublishSkipped { request_id, namespace_suffix, track_name })
        }
        mt::PUBLISH_OK => {
            let request_id = response_id(ctx)?;
            let params = read_params(r, d, d.params.publish_ok)?;
            // draft-18 §10.5: Track Properties are empty in PUBLISH_OK.
            if !read_properties(r)?.is_empty() {
                return Err(DecodeError::violation("Track Properties in PUBLISH_OK"));
            }
            Message::PublishOk(PublishOk { request_id, params })
        }
        mt::REQUEST_OK => {
            let request_id = response_id(ctx)?;
            let params = read_params(r, d, d.params.request_ok)?;
            Message::RequestOk(RequestOk { request_id, params, track_properties: read_properties(r)? })
        }
        mt::REQUEST_ERROR => Message::RequestError(read_request_error(r, ctx)?),
        _ => return Err(DecodeError::violation("unknown control message type")),
    })
}

/// The Request ID of the stream a response (or NAMESPACE, or REQUEST_UPDATE) arrived on. On
/// the control stream there is none: those messages belong on a request stream (§9, Table 5).
pub(crate) fn response_id(ctx: &DecodeContext) -> Result<RequestId, DecodeError> {
    ctx.request_id.ok_or(DecodeError::violation("request-stream message on the control stream"))
}

/// Track Namespace (0 to 32 fields, §2.4.1), Track Name; 4096 bytes in all (§8.7).
pub(crate) fn read_full_track_name(r: &mut R<'_>) -> Result<FullTrackName, DecodeError> {
    let namespace = read_namespace(r, 0)?;
    let name = read_track_name(r, namespace.byte_len())?;
    Ok(FullTrackName { namespace, name })
}

fn read_goaway(r: &mut R<'_>, d: &Dialect, ctx: &DecodeContext) -> Result<GoAway, DecodeError> {
    let uri = r.len_prefixed(MAX_GOAWAY_URI, "GOAWAY URI longer than 8192 bytes")?;
    if ctx.sender == Role::Client && !uri.is_empty() {
        return Err(DecodeError::violation("GOAWAY with a New Session URI from a client"));
    }
    let new_session_uri = Bytes::copy_from_slice(uri);
    let timeout_ms = r.int()?;
    // draft-18 §10.4: the Request ID is there exactly on the control stream.
    let request_id = match ctx.request_id {
        None if d.goaway_request_id => Some(RequestId(r.int()?)),
        _ => None,
    };
    Ok(GoAway { new_session_uri, timeout_ms, request_id })
}

fn read_subscribe(r: &mut R<'_>, d: &Dialect, allowed: ParamSet) -> Result<Subscribe, DecodeError> {
    let request_id = RequestId(r.int()?);
    let track = read_full_track_name(r)?;
    Ok(Subscribe { request_id, track, params: read_params(r, d, allowed)? })
}

fn read_fetch_ok(r: &mut R<'_>, d: &Dialect, ctx: &DecodeContext) -> Result<FetchOk, DecodeError> {
    let request_id = response_id(ctx)?;
    let end_of_track = match r.u8()? {
        0 => false,
        1 => true,
        _ => return Err(DecodeError::violation("FETCH_OK End Of Track other than 0 or 1")),
    };
    let end = read_location(r)?;
    // draft-18 §10.13: "end plus one".
    let end_location = if d.fetch_type { fetch_end(end) } else { FetchEnd::Object(end) };
    let params = read_params(r, d, d.params.fetch_ok)?;
    Ok(FetchOk { request_id, end_of_track, end_location, params, track_properties: read_properties(r)? })
}

/// draft-18 FETCH (§10.12). A standalone FETCH's Start and End Locations become
/// `params.location_filter` (see [`write_fetch`]); an unknown Fetch Type is a
/// PROTOCOL_VIOLATION.
fn read_typed_fetch(r: &mut R<'_>, d: &Dialect) -> Result<Fetch, DecodeError> {
    let request_id = RequestId(r.int()?);
    let (kind, range) = read_fetch_kind(r, read_full_track_name)?;
    let mut params = read_params(r, d, d.params.fetch)?;
    params.location_filter = range;
    Ok(Fetch { request_id, kind, params })
}

fn read_prefixed_request(
    r: &mut R<'_>,
    d: &Dialect,
    allowed: ParamSet,
) -> Result<(RequestId, TrackNamespace, Parameters), DecodeError> {
    let request_id = RequestId(r.int()?);
    let prefix = read_namespace(r, 0)?;
    Ok((request_id, prefix, read_params(r, d, allowed)?))
}

pub(crate) fn read_request_error(r: &mut R<'_>, ctx: &DecodeContext) -> Result<RequestError, DecodeError> {
    let request_id = response_id(ctx)?;
    let error_code = r.int()?;
    let retry_interval = r.int()?;
    let reason = read_reason(r)?;
    let redirect = if error_code == REDIRECT {
        // The Connect URI shares GOAWAY's 8192-byte limit (model::limits).
        let uri = r.len_prefixed(MAX_GOAWAY_URI, "Redirect Connect URI longer than 8192 bytes")?;
        if ctx.sender == Role::Client && !uri.is_empty() {
            return Err(DecodeError::violation("Redirect with a Connect URI from a client"));
        }
        let connect_uri = Bytes::copy_from_slice(uri);
        Some(Redirect { connect_uri, track: read_full_track_name(r)? })
    } else {
        None
    };
    Ok(RequestError { request_id, error_code, retry_interval, reason, redirect })
}
