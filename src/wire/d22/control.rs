//! draft-22 control messages (§9): `Type (vi64), Length (16), Body`.
//!
//! SETUP and GOAWAY travel on the control stream; every other message travels on the
//! bidirectional stream of its request (§6.4.2). Requests carry their Request ID; responses
//! (SUBSCRIBE_OK, REQUEST_OK, REQUEST_ERROR, PUBLISH_DONE, PUBLISH_STATE_NOTIFY, FETCH_OK,
//! PUBLISH_SKIPPED) do not, so the decoder takes it from [`DecodeContext::request_id`] and the
//! encoder drops the model's. NAMESPACE and NAMESPACE_DONE carry only the namespace suffix.
//!
//! [`DecodeContext::request_id`] `None` means the control stream: a message that belongs on a
//! request stream and needs that stream's ID (the responses above, NAMESPACE, NAMESPACE_DONE,
//! REQUEST_UPDATE) is a PROTOCOL_VIOLATION there, and SETUP is one on a request stream. Requests
//! decode in either context, since the first message of a new stream names its own ID.
//!
//! Track Namespaces in draft-22 have 0 to 32 fields (§2.4.1), including a track's own
//! namespace, so every namespace here is read with a minimum of zero fields.

use bytes::Bytes;

use super::params::{allowed, read_params, read_setup_options, write_params, write_setup_options, ParamSet};
use crate::codec::{Reader, Writer};
use crate::common::{
    read_control_frame, read_location, read_namespace, read_properties, read_reason, read_track_name,
    write_control, write_full_track_name, write_location, write_namespace, write_properties, write_reason,
    write_track_name,
};
use crate::error::{DecodeError, EncodeError};
use crate::model::limits::MAX_GOAWAY_URI;
use crate::model::{
    DecodeContext, Fetch, FetchEnd, FetchKind, FetchOk, FullTrackName, GoAway, Message, Parameters,
    Properties, Publish, PublishDone, PublishNamespace, PublishSkipped, PublishStateNotify, Redirect,
    RequestError, RequestId, RequestOk, RequestUpdate, Role, Setup, Subscribe, SubscribeNamespace,
    SubscribeOk, SubscribeOptions, SubscribeTracks, TrackAlias, TrackNamespace,
};
use crate::varint::{VarInt, Vi64};

type R<'a> = Reader<'a, Vi64>;
type W<'a> = Writer<'a, Vi64>;

/// Message type code points (§9, Table 5).
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
    pub const REQUEST_UPDATE: u64 = 0x2;
    pub const REQUEST_OK: u64 = 0x7;
    pub const REQUEST_ERROR: u64 = 0x5;
    /// RESERVED rows of Table 5: old SETUP (0x01), CLIENT/SERVER_SETUP of <= 10 (0x40, 0x41)
    /// and <= 16 (0x20, 0x21), PUBLISH_OK of <= 17 (0x1E).
    pub const RESERVED: [u64; 6] = [0x01, 0x40, 0x41, 0x20, 0x21, 0x1E];
}

/// REQUEST_ERROR code REDIRECT (§16.11.2): the only code followed by a Redirect (§9.4.2).
pub const REDIRECT: u64 = 0x34;

// ---------------------------------------------------------------------------------------------
// Encoding
// ---------------------------------------------------------------------------------------------

/// Appends one framed control message. draft-16-only messages fail with `Unsupported`; draft-16
/// PUBLISH_OK is written as REQUEST_OK (§9.3) when its parameters fit.
pub fn encode_message(msg: &Message, out: &mut Vec<u8>) -> Result<(), EncodeError> {
    use message_type as mt;
    match msg {
        Message::ClientSetup(s) => frame(out, mt::SETUP, |w| write_setup_options(w, &s.options, true)),
        Message::ServerSetup(s) => frame(out, mt::SETUP, |w| write_setup_options(w, &s.options, false)),
        Message::GoAway(m) => frame(out, mt::GOAWAY, |w| write_goaway(w, m)),
        Message::RequestOk(m) => frame(out, mt::REQUEST_OK, |w| {
            write_params_then_properties(w, &m.params, allowed::REQUEST_OK, &m.track_properties)
        }),
        Message::PublishOk(m) => frame(out, mt::REQUEST_OK, |w| {
            write_params_then_properties(w, &m.params, allowed::PUBLISH_OK, &Properties::new())
        }),
        Message::RequestError(m) => frame(out, mt::REQUEST_ERROR, |w| write_request_error(w, m)),
        Message::Subscribe(m) => frame(out, mt::SUBSCRIBE, |w| write_subscribe(w, m, allowed::SUBSCRIBE)),
        Message::TrackStatus(m) => {
            frame(out, mt::TRACK_STATUS, |w| write_subscribe(w, m, allowed::TRACK_STATUS))
        }
        Message::SubscribeOk(m) => frame(out, mt::SUBSCRIBE_OK, |w| {
            w.int(m.track_alias.0)?;
            write_params_then_properties(w, &m.params, allowed::SUBSCRIBE_OK, &m.track_properties)
        }),
        Message::RequestUpdate(m) => frame(out, mt::REQUEST_UPDATE, |w| {
            w.int(m.request_id.0)?;
            write_params(w, &m.params, allowed::REQUEST_UPDATE)
        }),
        Message::Publish(m) => frame(out, mt::PUBLISH, |w| {
            w.int(m.request_id.0)?;
            write_full_track_name(w, &m.track)?;
            w.int(m.track_alias.0)?;
            write_params_then_properties(w, &m.params, allowed::PUBLISH, &m.track_properties)
        }),
        Message::PublishDone(m) => frame(out, mt::PUBLISH_DONE, |w| {
            w.int(m.status_code)?;
            w.int(m.stream_count)?;
            write_reason(w, &m.reason)
        }),
        Message::PublishStateNotify(m) => frame(out, mt::PUBLISH_STATE_NOTIFY, |w| {
            write_params(w, &m.params, allowed::PUBLISH_STATE_NOTIFY)
        }),
        Message::Fetch(m) => frame(out, mt::FETCH, |w| write_fetch(w, m)),
        Message::FetchOk(m) => frame(out, mt::FETCH_OK, |w| write_fetch_ok(w, m)),
        Message::PublishNamespace(m) => frame(out, mt::PUBLISH_NAMESPACE, |w| {
            write_prefixed_request(w, m.request_id, &m.namespace, &m.params, allowed::PUBLISH_NAMESPACE)
        }),
        Message::SubscribeNamespace(m) => {
            // draft-22 SUBSCRIBE_NAMESPACE only ever yields NAMESPACE messages (§9.15).
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
        Message::PublishSkipped(m) => frame(out, mt::PUBLISH_SKIPPED, |w| {
            write_namespace(w, &m.namespace_suffix)?;
            write_track_name(w, m.namespace_suffix.byte_len(), &m.track_name)
        }),
        Message::MaxRequestId(_)
        | Message::RequestsBlocked(_)
        | Message::Unsubscribe(_)
        | Message::FetchCancel(_)
        | Message::PublishNamespaceDone(_)
        | Message::PublishNamespaceCancel(_) => Err(EncodeError::Unsupported(msg.name())),
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

/// GOAWAY (§9.2): New Session URI (at most 8192 bytes), Timeout.
fn write_goaway(w: &mut W<'_>, m: &GoAway) -> Result<(), EncodeError> {
    if m.request_id.is_some() {
        return Err(EncodeError::Unsupported("GOAWAY Request ID (draft-18 only)"));
    }
    if m.new_session_uri.len() > MAX_GOAWAY_URI {
        return Err(EncodeError::OutOfRange("GOAWAY URI longer than 8192 bytes"));
    }
    w.len_prefixed(&m.new_session_uri)?;
    w.int(m.timeout_ms)
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
fn write_subscribe(w: &mut W<'_>, m: &Subscribe, allowed: ParamSet) -> Result<(), EncodeError> {
    w.int(m.request_id.0)?;
    write_full_track_name(w, &m.track)?;
    write_params(w, &m.params, allowed)
}

/// FETCH (§9.11): only the standalone form exists; the range is the LOCATION_FILTER parameter.
fn write_fetch(w: &mut W<'_>, m: &Fetch) -> Result<(), EncodeError> {
    let FetchKind::Standalone { track } = &m.kind else {
        return Err(EncodeError::Unsupported("joining FETCH"));
    };
    w.int(m.request_id.0)?;
    write_full_track_name(w, track)?;
    write_params(w, &m.params, allowed::FETCH)
}

/// FETCH_OK (§9.12): End Of Track (8), inclusive End Location, Parameters, Track Properties.
fn write_fetch_ok(w: &mut W<'_>, m: &FetchOk) -> Result<(), EncodeError> {
    let FetchEnd::Object(end) = m.end_location else {
        return Err(EncodeError::Unsupported("FETCH_OK ending at a whole group"));
    };
    w.u8(u8::from(m.end_of_track));
    write_location(w, end)?;
    write_params_then_properties(w, &m.params, allowed::FETCH_OK, &m.track_properties)
}

/// PUBLISH_NAMESPACE / SUBSCRIBE_NAMESPACE / SUBSCRIBE_TRACKS: Request ID, Track Namespace
/// Prefix, Parameters.
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

fn write_params_then_properties(
    w: &mut W<'_>,
    params: &Parameters,
    allowed: ParamSet,
    props: &Properties,
) -> Result<(), EncodeError> {
    write_params(w, params, allowed)?;
    write_properties(w, props)
}

// ---------------------------------------------------------------------------------------------
// Decoding
// ---------------------------------------------------------------------------------------------

/// Decodes one control message from the front of `buf`: (message, bytes consumed).
/// `NeedMore` until the whole frame (type, 16-bit length, body) is present; an unknown or
/// reserved type fails as soon as the type is readable. A body shorter or longer than its
/// fields is a PROTOCOL_VIOLATION (§9).
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

/// Unknown types and the RESERVED rows of Table 5 close the session (§9).
fn check_type(ty: u64) -> Result<(), DecodeError> {
    use message_type as mt;
    match ty {
        mt::SETUP
        | mt::GOAWAY
        | mt::SUBSCRIBE
        | mt::SUBSCRIBE_OK
        | mt::PUBLISH_STATE_NOTIFY
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
        _ if mt::RESERVED.contains(&ty) => Err(DecodeError::violation("reserved control message type")),
        _ => Err(DecodeError::violation("unknown control message type")),
    }
}

fn decode_body(ty: u64, r: &mut R<'_>, ctx: &DecodeContext) -> Result<Message, DecodeError> {
    use message_type as mt;
    Ok(match ty {
        mt::SETUP => {
            // SETUP belongs on the control stream only (Table 5).
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
        mt::FETCH => {
            let request_id = RequestId(r.int()?);
            let kind = FetchKind::Standalone { track: read_full_track_name(r)? };
            Message::Fetch(Fetch { request_id, kind, params: read_params(r, allowed::FETCH)? })
        }
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
        mt::PUBLISH_STATE_NOTIFY => {
            let request_id = response_id(ctx)?;
            Message::PublishStateNotify(PublishStateNotify {
                request_id,
                params: read_params(r, allowed::PUBLISH_STATE_NOTIFY)?,
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
        mt::FETCH_OK => Message::FetchOk(read_fetch_ok(r, ctx)?),
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
        mt::REQUEST_OK => {
            let request_id = response_id(ctx)?;
            let params = read_params(r, allowed::REQUEST_OK)?;
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

fn read_goaway(r: &mut R<'_>, ctx: &DecodeContext) -> Result<GoAway, DecodeError> {
    let uri = r.len_prefixed(MAX_GOAWAY_URI, "GOAWAY URI longer than 8192 bytes")?;
    if ctx.sender == Role::Client && !uri.is_empty() {
        return Err(DecodeError::violation("GOAWAY with a New Session URI from a client"));
    }
    let new_session_uri = Bytes::copy_from_slice(uri);
    Ok(GoAway { new_session_uri, timeout_ms: r.int()?, request_id: None })
}

fn read_subscribe(r: &mut R<'_>, allowed: ParamSet) -> Result<Subscribe, DecodeError> {
    let request_id = RequestId(r.int()?);
    let track = read_full_track_name(r)?;
    Ok(Subscribe { request_id, track, params: read_params(r, allowed)? })
}

fn read_fetch_ok(r: &mut R<'_>, ctx: &DecodeContext) -> Result<FetchOk, DecodeError> {
    let request_id = response_id(ctx)?;
    let end_of_track = match r.u8()? {
        0 => false,
        1 => true,
        _ => return Err(DecodeError::violation("FETCH_OK End Of Track other than 0 or 1")),
    };
    let end_location = FetchEnd::Object(read_location(r)?);
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
