//! draft-16 control messages (§9) onto the version-neutral [`Message`].
//!
//! Every message is `Type (i), Length (16), Payload` on the control stream (§9). A payload
//! must be consumed exactly: running out inside it or bytes left over is a
//! PROTOCOL_VIOLATION, as is an unknown message type. draft-22-only messages and fields
//! cannot be encoded here (`EncodeError::Unsupported`). Parameters are in [`super::params`].

use bytes::Bytes;

use crate::codec::{Reader, Writer};
use crate::common::{
    read_control_frame, read_full_track_name, read_location, read_namespace, read_properties, read_reason,
    write_control, write_full_track_name, write_location, write_namespace, write_properties, write_reason,
    KvTypes,
};
use crate::error::{DecodeError, EncodeError};
use crate::model::limits::MAX_GOAWAY_URI;
use crate::model::{
    DecodeContext, Fetch, FetchOk, FullTrackName, GoAway, Message, Publish, PublishDone, PublishNamespace,
    PublishNamespaceCancel, PublishOk, RequestError, RequestId, RequestOk, RequestUpdate, Role, Setup,
    Subscribe, SubscribeNamespace, SubscribeOk, SubscribeOptions, TrackAlias,
};
use crate::varint::Quic;

use super::params::{read_params, read_setup, write_params, write_setup, ParamMessage};
use crate::typed_forms::{fetch_end, read_fetch_kind, write_fetch_end, write_fetch_kind};

/// draft-16 Message Types (§9, table "Message Types").
pub mod message_type {
    pub const CLIENT_SETUP: u64 = 0x20;
    pub const SERVER_SETUP: u64 = 0x21;
    pub const GOAWAY: u64 = 0x10;
    pub const MAX_REQUEST_ID: u64 = 0x15;
    pub const REQUESTS_BLOCKED: u64 = 0x1A;
    pub const REQUEST_OK: u64 = 0x7;
    pub const REQUEST_ERROR: u64 = 0x5;
    pub const SUBSCRIBE: u64 = 0x3;
    pub const SUBSCRIBE_OK: u64 = 0x4;
    pub const REQUEST_UPDATE: u64 = 0x2;
    pub const UNSUBSCRIBE: u64 = 0xA;
    pub const PUBLISH: u64 = 0x1D;
    pub const PUBLISH_OK: u64 = 0x1E;
    pub const PUBLISH_DONE: u64 = 0xB;
    pub const FETCH: u64 = 0x16;
    pub const FETCH_OK: u64 = 0x18;
    pub const FETCH_CANCEL: u64 = 0x17;
    pub const TRACK_STATUS: u64 = 0xD;
    pub const PUBLISH_NAMESPACE: u64 = 0x6;
    pub const NAMESPACE: u64 = 0x8;
    pub const PUBLISH_NAMESPACE_DONE: u64 = 0x9;
    pub const NAMESPACE_DONE: u64 = 0xE;
    pub const PUBLISH_NAMESPACE_CANCEL: u64 = 0xC;
    pub const SUBSCRIBE_NAMESPACE: u64 = 0x11;
}

type W<'a, 'b> = &'a mut Writer<'b, Quic>;
type R<'a, 'b> = &'a mut Reader<'b, Quic>;

/// Appends `msg` as one framed draft-16 control message.
pub fn encode_message(msg: &Message, out: &mut Vec<u8>) -> Result<(), EncodeError> {
    use message_type as t;
    match msg {
        Message::ClientSetup(s) => {
            frame(out, t::CLIENT_SETUP, |w| write_setup(w, &s.options, Role::Client, KvTypes::Delta))
        }
        Message::ServerSetup(s) => {
            frame(out, t::SERVER_SETUP, |w| write_setup(w, &s.options, Role::Server, KvTypes::Delta))
        }
        Message::GoAway(m) => frame(out, t::GOAWAY, |w| write_goaway(w, m)),
        Message::MaxRequestId(id) => frame(out, t::MAX_REQUEST_ID, |w| w.int(id.0)),
        Message::RequestsBlocked(id) => frame(out, t::REQUESTS_BLOCKED, |w| w.int(id.0)),
        Message::RequestOk(m) => frame(out, t::REQUEST_OK, |w| write_request_ok(w, m)),
        Message::RequestError(m) => frame(out, t::REQUEST_ERROR, |w| write_request_error(w, m)),
        Message::Subscribe(m) => frame(out, t::SUBSCRIBE, |w| write_subscribe(w, m, ParamMessage::Subscribe)),
        Message::SubscribeOk(m) => frame(out, t::SUBSCRIBE_OK, |w| write_subscribe_ok(w, m)),
        Message::RequestUpdate(m) => frame(out, t::REQUEST_UPDATE, |w| write_request_update(w, m)),
        Message::Unsubscribe(id) => frame(out, t::UNSUBSCRIBE, |w| w.int(id.0)),
        Message::Publish(m) => frame(out, t::PUBLISH, |w| write_publish(w, m)),
        Message::PublishOk(m) => frame(out, t::PUBLISH_OK, |w| write_publish_ok(w, m)),
        Message::PublishDone(m) => frame(out, t::PUBLISH_DONE, |w| write_publish_done(w, m)),
        Message::Fetch(m) => frame(out, t::FETCH, |w| write_fetch(w, m)),
        Message::FetchOk(m) => frame(out, t::FETCH_OK, |w| write_fetch_ok(w, m)),
        Message::FetchCancel(id) => frame(out, t::FETCH_CANCEL, |w| w.int(id.0)),
        Message::TrackStatus(m) => {
            frame(out, t::TRACK_STATUS, |w| write_subscribe(w, m, ParamMessage::TrackStatus))
        }
        Message::PublishNamespace(m) => frame(out, t::PUBLISH_NAMESPACE, |w| write_publish_namespace(w, m)),
        Message::Namespace(suffix) => frame(out, t::NAMESPACE, |w| write_namespace(w, suffix)),
        Message::PublishNamespaceDone(id) => frame(out, t::PUBLISH_NAMESPACE_DONE, |w| w.int(id.0)),
        Message::NamespaceDone(suffix) => frame(out, t::NAMESPACE_DONE, |w| write_namespace(w, suffix)),
        Message::PublishNamespaceCancel(m) => {
            frame(out, t::PUBLISH_NAMESPACE_CANCEL, |w| write_publish_namespace_cancel(w, m))
        }
        Message::SubscribeNamespace(m) => {
            frame(out, t::SUBSCRIBE_NAMESPACE, |w| write_subscribe_namespace(w, m))
        }
        Message::PublishStateNotify(_)
        | Message::SubscribeTracks(_)
        | Message::PublishSkipped(_)
        | Message::PublishNamespaceDoneNamed(_)
        | Message::PublishNamespaceCancelNamed(_)
        | Message::UnsubscribeNamespace(_) => Err(EncodeError::Unsupported(msg.name())),
    }
}

/// Frames one draft-16 (or draft-14) control message whose body `body` writes.
pub(crate) fn frame(
    out: &mut Vec<u8>,
    ty: u64,
    body: impl FnOnce(&mut Writer<'_, Quic>) -> Result<(), EncodeError>,
) -> Result<(), EncodeError> {
    write_control::<Quic>(out, ty, body)
}

/// Decodes one control message from the front of `buf`: `(message, bytes consumed)`.
/// `NeedMore` until the whole frame (type, 16-bit length, body) is present.
pub fn decode_message(buf: &[u8], ctx: &DecodeContext) -> Result<(Message, usize), DecodeError> {
    decode_framed(buf, ctx, read_body)
}

/// A control message's frame (type, 16-bit length, body; draft-14 and draft-16 alike), its
/// body read by `read_body`, which must take all of it.
pub(crate) fn decode_framed(
    buf: &[u8],
    ctx: &DecodeContext,
    read_body: fn(u64, R, &DecodeContext) -> Result<Message, DecodeError>,
) -> Result<(Message, usize), DecodeError> {
    let (ty, body, consumed) = read_control_frame::<Quic>(buf)?;
    let mut r = Reader::<Quic>::new(body);
    let msg =
        read_body(ty, &mut r, ctx).map_err(|e| e.within_length("control message shorter than its fields"))?;
    r.finish("control message longer than its fields")?;
    Ok((msg, consumed))
}

/// The body of a draft-16 control message of type `ty` (draft-14 reads those it shares this
/// way too).
pub(crate) fn read_body(ty: u64, r: R, ctx: &DecodeContext) -> Result<Message, DecodeError> {
    use message_type as t;
    Ok(match ty {
        t::CLIENT_SETUP => Message::ClientSetup(read_setup_message(r, ctx.sender, Role::Client)?),
        t::SERVER_SETUP => Message::ServerSetup(read_setup_message(r, ctx.sender, Role::Server)?),
        t::GOAWAY => Message::GoAway(read_goaway(r, ctx.sender)?),
        t::MAX_REQUEST_ID => Message::MaxRequestId(read_id(r)?),
        t::REQUESTS_BLOCKED => Message::RequestsBlocked(read_id(r)?),
        t::REQUEST_OK => Message::RequestOk(read_request_ok(r)?),
        t::REQUEST_ERROR => Message::RequestError(read_request_error(r)?),
        t::SUBSCRIBE => Message::Subscribe(read_subscribe(r, ParamMessage::Subscribe)?),
        t::SUBSCRIBE_OK => Message::SubscribeOk(read_subscribe_ok(r)?),
        t::REQUEST_UPDATE => Message::RequestUpdate(read_request_update(r)?),
        t::UNSUBSCRIBE => Message::Unsubscribe(read_id(r)?),
        t::PUBLISH => Message::Publish(read_publish(r)?),
        t::PUBLISH_OK => Message::PublishOk(read_publish_ok(r)?),
        t::PUBLISH_DONE => Message::PublishDone(read_publish_done(r)?),
        t::FETCH => Message::Fetch(read_fetch(r)?),
        t::FETCH_OK => Message::FetchOk(read_fetch_ok(r)?),
        t::FETCH_CANCEL => Message::FetchCancel(read_id(r)?),
        t::TRACK_STATUS => Message::TrackStatus(read_subscribe(r, ParamMessage::TrackStatus)?),
        t::PUBLISH_NAMESPACE => Message::PublishNamespace(read_publish_namespace(r)?),
        // §9.21/§9.23: a suffix after the subscribed prefix; empty when the namespace is the prefix.
        t::NAMESPACE => Message::Namespace(read_namespace(r, 0)?),
        t::PUBLISH_NAMESPACE_DONE => Message::PublishNamespaceDone(read_id(r)?),
        t::NAMESPACE_DONE => Message::NamespaceDone(read_namespace(r, 0)?),
        t::PUBLISH_NAMESPACE_CANCEL => Message::PublishNamespaceCancel(read_publish_namespace_cancel(r)?),
        t::SUBSCRIBE_NAMESPACE => Message::SubscribeNamespace(read_subscribe_namespace(r)?),
        _ => return Err(DecodeError::violation("unknown control message type")),
    })
}

/// A Request ID field.
pub(crate) fn read_id(r: R) -> Result<RequestId, DecodeError> {
    Ok(RequestId(r.int()?))
}

/// A track's Full Track Name: its namespace needs at least one field (§2.4.1).
pub(crate) fn write_track(w: W, t: &FullTrackName) -> Result<(), EncodeError> {
    if t.namespace.0.is_empty() {
        return Err(EncodeError::OutOfRange("track namespace with no fields"));
    }
    write_full_track_name(w, t)
}

/// CLIENT_SETUP / SERVER_SETUP (§9.3); `expected` is the role that may send it.
fn read_setup_message(r: R, sender: Role, expected: Role) -> Result<Setup, DecodeError> {
    if sender != expected {
        return Err(DecodeError::violation("setup message from the wrong role"));
    }
    Ok(Setup { options: read_setup(r, sender, KvTypes::Delta)? })
}

/// GOAWAY (§9.4): only the URI; a client may not send one (the server "MUST close").
pub(crate) fn read_goaway(r: R, sender: Role) -> Result<GoAway, DecodeError> {
    let uri = r.len_prefixed(MAX_GOAWAY_URI, "GOAWAY URI longer than 8192 bytes")?;
    if sender == Role::Client && !uri.is_empty() {
        return Err(DecodeError::violation("GOAWAY with a New Session URI from a client"));
    }
    Ok(GoAway { new_session_uri: Bytes::copy_from_slice(uri), timeout_ms: 0, request_id: None })
}

/// The inverse of [`read_goaway`]; a timeout or Request ID is `Unsupported`.
pub(crate) fn write_goaway(w: W, m: &GoAway) -> Result<(), EncodeError> {
    if m.timeout_ms != 0 {
        return Err(EncodeError::Unsupported("GOAWAY timeout"));
    }
    if m.request_id.is_some() {
        return Err(EncodeError::Unsupported("GOAWAY Request ID (draft-18 only)"));
    }
    if m.new_session_uri.len() > MAX_GOAWAY_URI {
        return Err(EncodeError::OutOfRange("GOAWAY URI longer than 8192 bytes"));
    }
    w.len_prefixed(&m.new_session_uri)
}

/// REQUEST_OK (§9.7): no Track Properties in draft-16.
fn read_request_ok(r: R) -> Result<RequestOk, DecodeError> {
    let request_id = read_id(r)?;
    let params = read_params(r, ParamMessage::RequestOk)?;
    Ok(RequestOk { request_id, params, track_properties: Default::default() })
}

fn write_request_ok(w: W, m: &RequestOk) -> Result<(), EncodeError> {
    if !m.track_properties.is_empty() {
        return Err(EncodeError::Unsupported("REQUEST_OK track properties"));
    }
    w.int(m.request_id.0)?;
    write_params(w, &m.params, ParamMessage::RequestOk)
}

/// REQUEST_ERROR (§9.8): no Redirect in draft-16.
fn read_request_error(r: R) -> Result<RequestError, DecodeError> {
    Ok(RequestError {
        request_id: read_id(r)?,
        error_code: r.int()?,
        retry_interval: r.int()?,
        reason: read_reason(r)?,
        redirect: None,
    })
}

fn write_request_error(w: W, m: &RequestError) -> Result<(), EncodeError> {
    if m.redirect.is_some() {
        return Err(EncodeError::Unsupported("REQUEST_ERROR redirect"));
    }
    w.int(m.request_id.0)?;
    w.int(m.error_code)?;
    w.int(m.retry_interval)?;
    write_reason(w, &m.reason)
}

/// SUBSCRIBE (§9.9) and TRACK_STATUS (§9.19, same layout).
pub(crate) fn read_subscribe(r: R, kind: ParamMessage) -> Result<Subscribe, DecodeError> {
    Ok(Subscribe { request_id: read_id(r)?, track: read_full_track_name(r)?, params: read_params(r, kind)? })
}

fn write_subscribe(w: W, m: &Subscribe, kind: ParamMessage) -> Result<(), EncodeError> {
    w.int(m.request_id.0)?;
    write_track(w, &m.track)?;
    write_params(w, &m.params, kind)
}

/// SUBSCRIBE_OK (§9.10): Track Extensions fill the rest of the payload.
fn read_subscribe_ok(r: R) -> Result<SubscribeOk, DecodeError> {
    Ok(SubscribeOk {
        request_id: read_id(r)?,
        track_alias: TrackAlias(r.int()?),
        params: read_params(r, ParamMessage::SubscribeOk)?,
        track_properties: read_properties(r)?,
    })
}

fn write_subscribe_ok(w: W, m: &SubscribeOk) -> Result<(), EncodeError> {
    w.int(m.request_id.0)?;
    w.int(m.track_alias.0)?;
    write_params(w, &m.params, ParamMessage::SubscribeOk)?;
    write_properties(w, &m.track_properties)
}

/// REQUEST_UPDATE (§9.11).
fn read_request_update(r: R) -> Result<RequestUpdate, DecodeError> {
    Ok(RequestUpdate {
        request_id: read_id(r)?,
        existing_request_id: read_id(r)?,
        params: read_params(r, ParamMessage::RequestUpdate)?,
    })
}

fn write_request_update(w: W, m: &RequestUpdate) -> Result<(), EncodeError> {
    w.int(m.request_id.0)?;
    w.int(m.existing_request_id.0)?;
    write_params(w, &m.params, ParamMessage::RequestUpdate)
}

/// PUBLISH (§9.13): Track Extensions fill the rest of the payload.
fn read_publish(r: R) -> Result<Publish, DecodeError> {
    Ok(Publish {
        request_id: read_id(r)?,
        track: read_full_track_name(r)?,
        track_alias: TrackAlias(r.int()?),
        params: read_params(r, ParamMessage::Publish)?,
        track_properties: read_properties(r)?,
    })
}

fn write_publish(w: W, m: &Publish) -> Result<(), EncodeError> {
    w.int(m.request_id.0)?;
    write_track(w, &m.track)?;
    w.int(m.track_alias.0)?;
    write_params(w, &m.params, ParamMessage::Publish)?;
    write_properties(w, &m.track_properties)
}

/// PUBLISH_OK (§9.14).
fn read_publish_ok(r: R) -> Result<PublishOk, DecodeError> {
    Ok(PublishOk { request_id: read_id(r)?, params: read_params(r, ParamMessage::PublishOk)? })
}

fn write_publish_ok(w: W, m: &PublishOk) -> Result<(), EncodeError> {
    w.int(m.request_id.0)?;
    write_params(w, &m.params, ParamMessage::PublishOk)
}

/// PUBLISH_DONE (§9.15).
pub(crate) fn read_publish_done(r: R) -> Result<PublishDone, DecodeError> {
    Ok(PublishDone {
        request_id: read_id(r)?,
        status_code: r.int()?,
        stream_count: r.int()?,
        reason: read_reason(r)?,
    })
}

/// The inverse of [`read_publish_done`].
pub(crate) fn write_publish_done(w: W, m: &PublishDone) -> Result<(), EncodeError> {
    w.int(m.request_id.0)?;
    w.int(m.status_code)?;
    w.int(m.stream_count)?;
    write_reason(w, &m.reason)
}

/// FETCH (§9.16). A Standalone Fetch's Start Location and End Location ("end plus one",
/// object 0 = the whole group) become `params.location_filter`: `AbsoluteStartGroupEnd`
/// for `{G, 0}`, `AbsoluteRange` with the inclusive end `{G, O - 1}` otherwise.
fn read_fetch(r: R) -> Result<Fetch, DecodeError> {
    let request_id = read_id(r)?;
    let (kind, range) = read_fetch_kind(r, read_full_track_name)?;
    let mut params = read_params(r, ParamMessage::Fetch)?;
    params.location_filter = range;
    Ok(Fetch { request_id, kind, params })
}

fn write_fetch(w: W, m: &Fetch) -> Result<(), EncodeError> {
    w.int(m.request_id.0)?;
    write_fetch_kind(w, m, write_track)?;
    // The FETCH parameter table has no SUBSCRIPTION_FILTER; write_params skips the range.
    write_params(w, &m.params, ParamMessage::Fetch)
}

/// FETCH_OK (§9.17): End Location `{G, 0}` is the whole group G, `{G, O}` ends at `{G, O-1}`.
fn read_fetch_ok(r: R) -> Result<FetchOk, DecodeError> {
    let request_id = read_id(r)?;
    let end_of_track = match r.u8()? {
        0 => false,
        1 => true,
        _ => return Err(DecodeError::violation("End Of Track not 0 or 1")),
    };
    let end_location = fetch_end(read_location(r)?);
    Ok(FetchOk {
        request_id,
        end_of_track,
        end_location,
        params: read_params(r, ParamMessage::FetchOk)?,
        track_properties: read_properties(r)?,
    })
}

fn write_fetch_ok(w: W, m: &FetchOk) -> Result<(), EncodeError> {
    let end = write_fetch_end(m.end_location)?;
    w.int(m.request_id.0)?;
    w.u8(u8::from(m.end_of_track));
    write_location(w, end)?;
    write_params(w, &m.params, ParamMessage::FetchOk)?;
    write_properties(w, &m.track_properties)
}

/// PUBLISH_NAMESPACE (§9.20): a track namespace, so at least one field.
fn read_publish_namespace(r: R) -> Result<PublishNamespace, DecodeError> {
    Ok(PublishNamespace {
        request_id: read_id(r)?,
        namespace: read_namespace(r, 1)?,
        params: read_params(r, ParamMessage::PublishNamespace)?,
    })
}

fn write_publish_namespace(w: W, m: &PublishNamespace) -> Result<(), EncodeError> {
    if m.namespace.0.is_empty() {
        return Err(EncodeError::OutOfRange("track namespace with no fields"));
    }
    w.int(m.request_id.0)?;
    write_namespace(w, &m.namespace)?;
    write_params(w, &m.params, ParamMessage::PublishNamespace)
}

/// PUBLISH_NAMESPACE_CANCEL (§9.24).
fn read_publish_namespace_cancel(r: R) -> Result<PublishNamespaceCancel, DecodeError> {
    Ok(PublishNamespaceCancel { request_id: read_id(r)?, error_code: r.int()?, reason: read_reason(r)? })
}

fn write_publish_namespace_cancel(w: W, m: &PublishNamespaceCancel) -> Result<(), EncodeError> {
    w.int(m.request_id.0)?;
    w.int(m.error_code)?;
    write_reason(w, &m.reason)
}

/// SUBSCRIBE_NAMESPACE (§9.25): a prefix of 0 to 32 fields, then Subscribe Options.
fn read_subscribe_namespace(r: R) -> Result<SubscribeNamespace, DecodeError> {
    let request_id = read_id(r)?;
    let prefix = read_namespace(r, 0)?;
    let options = match r.int()? {
        0 => SubscribeOptions::Publish,
        1 => SubscribeOptions::Namespace,
        2 => SubscribeOptions::Both,
        _ => return Err(DecodeError::violation("unknown Subscribe Options")),
    };
    let params = read_params(r, ParamMessage::SubscribeNamespace)?;
    Ok(SubscribeNamespace { request_id, prefix, options, params })
}

fn write_subscribe_namespace(w: W, m: &SubscribeNamespace) -> Result<(), EncodeError> {
    w.int(m.request_id.0)?;
    write_namespace(w, &m.prefix)?;
    w.int(match m.options {
        SubscribeOptions::Publish => 0,
        SubscribeOptions::Namespace => 1,
        SubscribeOptions::Both => 2,
    })?;
    write_params(w, &m.params, ParamMessage::SubscribeNamespace)
}
