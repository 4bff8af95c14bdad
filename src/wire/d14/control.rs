//! draft-14 control messages (§9) onto the version-neutral [`Message`].
//!
//! The framing (`Type (i), Length (16), Payload`), GOAWAY, MAX_REQUEST_ID, REQUESTS_BLOCKED,
//! UNSUBSCRIBE, PUBLISH_DONE and FETCH_CANCEL are draft-16's and written once in
//! [`crate::d16::control`]; the Subscription Filter and the FETCH body (Fetch Type, "end plus
//! one") once in [`crate::typed_forms`]. What is draft-14's own:
//!
//! - Subscription state is fixed fields (SUBSCRIBE §9.7, SUBSCRIBE_OK §9.8, SUBSCRIBE_UPDATE
//!   §9.10, PUBLISH §9.13, PUBLISH_OK §9.14, FETCH §9.16, FETCH_OK §9.17), mapped onto the
//!   model's [`Parameters`]. Where the model leaves a field out, the encoder writes the
//!   later drafts' default for its absence (Subscriber Priority 128, Forward 1, the
//!   unfiltered AbsoluteStart {0, 0}, Group Order 0 "the publisher's" in a request, Expires
//!   0); the fields of an answer that later drafts carry as Track Properties (Group Order =
//!   DEFAULT_PUBLISHER_GROUP_ORDER, DELIVERY TIMEOUT, MAX CACHE DURATION) are read into and
//!   written from `track_properties`; the other Track Properties have no place in draft-14
//!   and are not written. A model parameter draft-14 cannot carry is `Unsupported`, except
//!   the advisory EXPIRES of PUBLISH and PUBLISH_OK, which is not written.
//! - One answer per request kind (SUBSCRIBE_ERROR, TRACK_STATUS_OK, FETCH_ERROR, ...) where
//!   the model has [`RequestOk`] / [`RequestError`]: they decode to those, and are written by
//!   [`encode_response`], which takes the [`RequestKind`] answered. REQUEST_ERROR's Retry
//!   Interval has no field in draft-14 and is not written (decoded as 0).
//! - PUBLISH_NAMESPACE_DONE, PUBLISH_NAMESPACE_CANCEL and UNSUBSCRIBE_NAMESPACE name a
//!   namespace ([`Message::PublishNamespaceDoneNamed`], [`Message::PublishNamespaceCancelNamed`],
//!   [`Message::UnsubscribeNamespace`]); SUBSCRIBE_NAMESPACE has no Subscribe Options (it
//!   asks for both PUBLISH_NAMESPACE and PUBLISH, §9.28: `SubscribeOptions::Both`).

use crate::codec::{Reader, Writer};
use crate::common::{
    read_full_track_name, read_location, read_namespace, read_reason, write_location, write_namespace,
    write_reason, KvTypes,
};
use crate::d16::control::{frame, read_id, write_goaway, write_publish_done, write_track};
use crate::d16::params::{read_setup, write_setup};
use crate::error::{DecodeError, EncodeError};
use crate::model::{
    property_type, DecodeContext, Fetch, FetchOk, GroupOrder, KvValue, Location, LocationFilter, Message,
    Parameters, Properties, Publish, PublishNamespace, PublishNamespaceCancelNamed, PublishOk, RequestError,
    RequestId, RequestKind, RequestOk, RequestUpdate, Role, Setup, SetupOptions, Subscribe,
    SubscribeNamespace, SubscribeOk, SubscribeOptions, TrackAlias,
};
use crate::typed_forms::{
    fetch_end, read_fetch_kind, read_subscription_filter, write_fetch_end, write_fetch_kind,
    write_subscription_filter, EndGroup,
};
use crate::varint::Quic;

use super::params::{param_type, read_params, write_params, ParamMessage as PM, Params};

/// The MoQT version number of draft-14 in CLIENT_SETUP and SERVER_SETUP (§9.3.1).
pub const VERSION: u64 = 0xff00_000e;

/// draft-14 Message Types (§9, table). The code points draft-16 gives the same message are
/// draft-16's constants, re-exported; draft-14's own follow.
pub mod message_type {
    pub use crate::d16::control::message_type::{
        CLIENT_SETUP, FETCH, FETCH_CANCEL, FETCH_OK, GOAWAY, MAX_REQUEST_ID, PUBLISH, PUBLISH_DONE,
        PUBLISH_NAMESPACE, PUBLISH_NAMESPACE_CANCEL, PUBLISH_NAMESPACE_DONE, PUBLISH_OK, REQUESTS_BLOCKED,
        SERVER_SETUP, SUBSCRIBE, SUBSCRIBE_NAMESPACE, SUBSCRIBE_OK, TRACK_STATUS, UNSUBSCRIBE,
    };
    /// SUBSCRIBE_ERROR (§9.9); draft-16's REQUEST_ERROR code point.
    pub const SUBSCRIBE_ERROR: u64 = 0x5;
    /// SUBSCRIBE_UPDATE (§9.10); draft-16's REQUEST_UPDATE code point.
    pub const SUBSCRIBE_UPDATE: u64 = 0x2;
    /// PUBLISH_ERROR (§9.15).
    pub const PUBLISH_ERROR: u64 = 0x1F;
    /// FETCH_ERROR (§9.18).
    pub const FETCH_ERROR: u64 = 0x19;
    /// TRACK_STATUS_OK (§9.21); draft-16's NAMESPACE_DONE code point.
    pub const TRACK_STATUS_OK: u64 = 0xE;
    /// TRACK_STATUS_ERROR (§9.22).
    pub const TRACK_STATUS_ERROR: u64 = 0xF;
    /// PUBLISH_NAMESPACE_OK (§9.24); draft-16's REQUEST_OK code point.
    pub const PUBLISH_NAMESPACE_OK: u64 = 0x7;
    /// PUBLISH_NAMESPACE_ERROR (§9.25); draft-16's NAMESPACE code point.
    pub const PUBLISH_NAMESPACE_ERROR: u64 = 0x8;
    /// SUBSCRIBE_NAMESPACE_OK (§9.29).
    pub const SUBSCRIBE_NAMESPACE_OK: u64 = 0x12;
    /// SUBSCRIBE_NAMESPACE_ERROR (§9.30).
    pub const SUBSCRIBE_NAMESPACE_ERROR: u64 = 0x13;
    /// UNSUBSCRIBE_NAMESPACE (§9.31).
    pub const UNSUBSCRIBE_NAMESPACE: u64 = 0x14;
}

type W<'a, 'b> = &'a mut Writer<'b, Quic>;
type R<'a, 'b> = &'a mut Reader<'b, Quic>;

/// The Subscriber Priority written when the model has none (draft-16 §9.2.2.3's default).
const DEFAULT_SUBSCRIBER_PRIORITY: u8 = 128;

/// Appends `msg` as one framed draft-14 control message. [`RequestOk`] and [`RequestError`]
/// are `Unsupported` here: draft-14 writes the answer of the request's kind, which
/// [`encode_response`] takes. Messages draft-14 lacks are `Unsupported`.
pub fn encode_message(msg: &Message, out: &mut Vec<u8>) -> Result<(), EncodeError> {
    use message_type as t;
    match msg {
        Message::ClientSetup(s) => {
            frame(out, t::CLIENT_SETUP, |w| write_setup_message(w, &s.options, Role::Client))
        }
        Message::ServerSetup(s) => {
            frame(out, t::SERVER_SETUP, |w| write_setup_message(w, &s.options, Role::Server))
        }
        Message::GoAway(m) => frame(out, t::GOAWAY, |w| write_goaway(w, m)),
        Message::MaxRequestId(id) => frame(out, t::MAX_REQUEST_ID, |w| w.int(id.0)),
        Message::RequestsBlocked(id) => frame(out, t::REQUESTS_BLOCKED, |w| w.int(id.0)),
        Message::Subscribe(m) => frame(out, t::SUBSCRIBE, |w| write_subscribe(w, m, PM::Subscribe)),
        Message::TrackStatus(m) => frame(out, t::TRACK_STATUS, |w| write_subscribe(w, m, PM::TrackStatus)),
        Message::SubscribeOk(m) => frame(out, t::SUBSCRIBE_OK, |w| {
            write_subscribe_ok(
                w,
                m.request_id,
                m.track_alias,
                &m.params,
                &m.track_properties,
                PM::SubscribeOk,
            )
        }),
        Message::RequestUpdate(m) => frame(out, t::SUBSCRIBE_UPDATE, |w| write_subscribe_update(w, m)),
        Message::Unsubscribe(id) => frame(out, t::UNSUBSCRIBE, |w| w.int(id.0)),
        Message::Publish(m) => frame(out, t::PUBLISH, |w| write_publish(w, m)),
        Message::PublishOk(m) => frame(out, t::PUBLISH_OK, |w| write_publish_ok(w, m.request_id, &m.params)),
        Message::PublishDone(m) => frame(out, t::PUBLISH_DONE, |w| write_publish_done(w, m)),
        Message::Fetch(m) => frame(out, t::FETCH, |w| write_fetch(w, m)),
        Message::FetchOk(m) => frame(out, t::FETCH_OK, |w| write_fetch_ok(w, m)),
        Message::FetchCancel(id) => frame(out, t::FETCH_CANCEL, |w| w.int(id.0)),
        Message::PublishNamespace(m) => frame(out, t::PUBLISH_NAMESPACE, |w| write_publish_namespace(w, m)),
        Message::PublishNamespaceDoneNamed(ns) => {
            frame(out, t::PUBLISH_NAMESPACE_DONE, |w| write_track_namespace(w, ns))
        }
        Message::PublishNamespaceCancelNamed(m) => frame(out, t::PUBLISH_NAMESPACE_CANCEL, |w| {
            write_track_namespace(w, &m.namespace)?;
            w.int(m.error_code)?;
            write_reason(w, &m.reason)
        }),
        Message::SubscribeNamespace(m) => {
            frame(out, t::SUBSCRIBE_NAMESPACE, |w| write_subscribe_namespace(w, m))
        }
        Message::UnsubscribeNamespace(prefix) => {
            frame(out, t::UNSUBSCRIBE_NAMESPACE, |w| write_track_namespace(w, prefix))
        }
        Message::RequestOk(_) | Message::RequestError(_) => {
            Err(EncodeError::Unsupported("draft-14 answer without its request kind (encode_response)"))
        }
        Message::PublishStateNotify(_)
        | Message::SubscribeTracks(_)
        | Message::PublishSkipped(_)
        | Message::Namespace(_)
        | Message::NamespaceDone(_)
        | Message::PublishNamespaceDone(_)
        | Message::PublishNamespaceCancel(_) => Err(EncodeError::Unsupported(msg.name())),
    }
}

/// Appends `msg`, the answer to a request of kind `answers`, as draft-14 writes it:
/// a [`RequestOk`] as TRACK_STATUS_OK, PUBLISH_NAMESPACE_OK, SUBSCRIBE_NAMESPACE_OK or (for
/// a PUBLISH) PUBLISH_OK; a [`RequestError`] as SUBSCRIBE_ERROR, PUBLISH_ERROR, FETCH_ERROR,
/// TRACK_STATUS_ERROR, PUBLISH_NAMESPACE_ERROR or SUBSCRIBE_NAMESPACE_ERROR. A SUBSCRIBE is
/// answered by SUBSCRIBE_OK and a FETCH by FETCH_OK (their own model messages), and
/// SUBSCRIBE_UPDATE by nothing: those are `Unsupported`. Any other message is written as
/// [`encode_message`] writes it.
pub fn encode_response(msg: &Message, answers: RequestKind, out: &mut Vec<u8>) -> Result<(), EncodeError> {
    use message_type as t;
    match msg {
        Message::RequestOk(m) => match answers {
            RequestKind::TrackStatus => frame(out, t::TRACK_STATUS_OK, |w| {
                write_subscribe_ok(
                    w,
                    m.request_id,
                    TrackAlias(0),
                    &m.params,
                    &m.track_properties,
                    PM::TrackStatusOk,
                )
            }),
            RequestKind::Publish => {
                frame(out, t::PUBLISH_OK, |w| write_publish_ok(w, m.request_id, &m.params))
            }
            RequestKind::PublishNamespace => frame(out, t::PUBLISH_NAMESPACE_OK, |w| write_bare_ok(w, m)),
            RequestKind::SubscribeNamespace => frame(out, t::SUBSCRIBE_NAMESPACE_OK, |w| write_bare_ok(w, m)),
            _ => Err(EncodeError::Unsupported("draft-14 has no REQUEST_OK for this request kind")),
        },
        Message::RequestError(m) => {
            let ty = match answers {
                RequestKind::Subscribe => t::SUBSCRIBE_ERROR,
                RequestKind::Publish => t::PUBLISH_ERROR,
                RequestKind::Fetch => t::FETCH_ERROR,
                RequestKind::TrackStatus => t::TRACK_STATUS_ERROR,
                RequestKind::PublishNamespace => t::PUBLISH_NAMESPACE_ERROR,
                RequestKind::SubscribeNamespace => t::SUBSCRIBE_NAMESPACE_ERROR,
                RequestKind::RequestUpdate | RequestKind::SubscribeTracks => {
                    return Err(EncodeError::Unsupported("draft-14 has no error for this request kind"))
                }
            };
            frame(out, ty, |w| write_error(w, m))
        }
        _ => encode_message(msg, out),
    }
}

/// Decodes one control message from the front of `buf`: `(message, bytes consumed)`.
/// `NeedMore` until the whole frame is present; a payload that does not match its fields,
/// or an unknown message type, is a PROTOCOL_VIOLATION (§9).
pub fn decode_message(buf: &[u8], ctx: &DecodeContext) -> Result<(Message, usize), DecodeError> {
    crate::d16::control::decode_framed(buf, ctx, read_body)
}

fn read_body(ty: u64, r: R, ctx: &DecodeContext) -> Result<Message, DecodeError> {
    use message_type as t;
    Ok(match ty {
        t::CLIENT_SETUP => Message::ClientSetup(read_setup_message(r, ctx.sender, Role::Client)?),
        t::SERVER_SETUP => Message::ServerSetup(read_setup_message(r, ctx.sender, Role::Server)?),
        // Laid out as in draft-16 (§9.4, §9.5, §9.6, §9.12, §9.16, §9.15).
        t::GOAWAY
        | t::MAX_REQUEST_ID
        | t::REQUESTS_BLOCKED
        | t::UNSUBSCRIBE
        | t::FETCH_CANCEL
        | t::PUBLISH_DONE => crate::d16::control::read_body(ty, r, ctx)?,
        t::SUBSCRIBE => Message::Subscribe(read_subscribe(r, PM::Subscribe)?),
        t::TRACK_STATUS => Message::TrackStatus(read_subscribe(r, PM::TrackStatus)?),
        t::SUBSCRIBE_OK => {
            let (request_id, track_alias, params, track_properties) = read_subscribe_ok(r, PM::SubscribeOk)?;
            Message::SubscribeOk(SubscribeOk { request_id, track_alias, params, track_properties })
        }
        t::TRACK_STATUS_OK => {
            // §9.21: Track Alias is 0 and means nothing.
            let (request_id, _, params, track_properties) = read_subscribe_ok(r, PM::TrackStatusOk)?;
            Message::RequestOk(RequestOk { request_id, params, track_properties })
        }
        t::SUBSCRIBE_UPDATE => Message::RequestUpdate(read_subscribe_update(r)?),
        t::PUBLISH => Message::Publish(read_publish(r)?),
        t::PUBLISH_OK => Message::PublishOk(read_publish_ok(r)?),
        t::FETCH => Message::Fetch(read_fetch(r)?),
        t::FETCH_OK => Message::FetchOk(read_fetch_ok(r)?),
        t::PUBLISH_NAMESPACE => Message::PublishNamespace(read_publish_namespace(r)?),
        t::PUBLISH_NAMESPACE_OK | t::SUBSCRIBE_NAMESPACE_OK => {
            Message::RequestOk(RequestOk { request_id: read_id(r)?, ..RequestOk::default() })
        }
        t::SUBSCRIBE_ERROR
        | t::PUBLISH_ERROR
        | t::FETCH_ERROR
        | t::TRACK_STATUS_ERROR
        | t::PUBLISH_NAMESPACE_ERROR
        | t::SUBSCRIBE_NAMESPACE_ERROR => Message::RequestError(read_error(r)?),
        t::PUBLISH_NAMESPACE_DONE => Message::PublishNamespaceDoneNamed(read_namespace(r, 1)?),
        t::PUBLISH_NAMESPACE_CANCEL => Message::PublishNamespaceCancelNamed(PublishNamespaceCancelNamed {
            namespace: read_namespace(r, 1)?,
            error_code: r.int()?,
            reason: read_reason(r)?,
        }),
        t::SUBSCRIBE_NAMESPACE => Message::SubscribeNamespace(read_subscribe_namespace(r)?),
        // §9.28: a prefix of 0 fields (or more than 32) is a PROTOCOL_VIOLATION.
        t::UNSUBSCRIBE_NAMESPACE => Message::UnsubscribeNamespace(read_namespace(r, 1)?),
        _ => return Err(DecodeError::violation("unknown control message type")),
    })
}

// ------------------------------------------------------------------ fixed fields

/// A one-byte 0-or-1 field (Forward, Content Exists, End Of Track); anything else is a
/// PROTOCOL_VIOLATION.
fn read_flag(r: R, what: &'static str) -> Result<bool, DecodeError> {
    match r.u8()? {
        0 => Ok(false),
        1 => Ok(true),
        _ => Err(DecodeError::violation(what)),
    }
}

/// A request's Group Order byte: 0 is the publisher's order (`None`), 1 and 2 the two
/// orders, anything larger a PROTOCOL_VIOLATION (§9.7, §9.16).
fn read_request_order(r: R) -> Result<Option<GroupOrder>, DecodeError> {
    match r.u8()? {
        0 => Ok(None),
        v => {
            GroupOrder::from_code(u64::from(v)).map(Some).ok_or(DecodeError::violation("Group Order above 2"))
        }
    }
}

/// An answer's Group Order byte: 1 or 2; 0 and larger values are a PROTOCOL_VIOLATION (§9.8,
/// §9.13, §9.14, §9.17).
fn read_answer_order(r: R) -> Result<GroupOrder, DecodeError> {
    GroupOrder::from_code(u64::from(r.u8()?)).ok_or(DecodeError::violation("Group Order not 1 or 2"))
}

fn write_order(w: W, order: Option<GroupOrder>) {
    w.u8(order.map_or(0, |o| o.code() as u8));
}

/// Content Exists and, when 1, the Largest Location.
fn read_largest(r: R) -> Result<Option<Location>, DecodeError> {
    Ok(if read_flag(r, "Content Exists not 0 or 1")? { Some(read_location(r)?) } else { None })
}

fn write_largest(w: W, largest: Option<Location>) -> Result<(), EncodeError> {
    w.u8(u8::from(largest.is_some()));
    largest.map_or(Ok(()), |l| write_location(w, l))
}

/// A Filter Type and its fields (§9.7). The model's unfiltered subscription (no filter, or
/// `LocationFilter::None`) is AbsoluteStart {0, 0}, which draft-14 says selects the same.
fn write_filter(w: W, f: Option<LocationFilter>) -> Result<(), EncodeError> {
    let f = match f {
        None | Some(LocationFilter::None) => LocationFilter::AbsoluteStart { start: Location::new(0, 0) },
        Some(f) => f,
    };
    write_subscription_filter(w, f, EndGroup::Absolute)
}

/// Fails if `rest` (what a writer left of the model's parameters) still holds anything.
fn nothing_left(rest: &Parameters, what: &'static str) -> Result<(), EncodeError> {
    if rest.is_empty() {
        Ok(())
    } else {
        Err(EncodeError::Unsupported(what))
    }
}

/// The answer fields later drafts carry as Track Properties, as Track Properties: Group
/// Order as DEFAULT_PUBLISHER_GROUP_ORDER, DELIVERY TIMEOUT as OBJECT_DELIVERY_TIMEOUT, MAX
/// CACHE DURATION as MAX_CACHE_DURATION.
fn to_track_properties(order: GroupOrder, p: &Params) -> Properties {
    let mut props = Properties::new();
    if let Some(v) = p.delivery_timeout {
        props.push(property_type::OBJECT_DELIVERY_TIMEOUT, KvValue::Int(v));
    }
    if let Some(v) = p.max_cache_duration {
        props.push(property_type::MAX_CACHE_DURATION, KvValue::Int(v));
    }
    props.push(property_type::DEFAULT_PUBLISHER_GROUP_ORDER, KvValue::Int(order.code()));
    props
}

/// The inverse of [`to_track_properties`]: the Group Order (`explicit`, else the property,
/// else Ascending) and the parameters `msg` may carry; other properties are not written.
fn from_track_properties(explicit: Option<GroupOrder>, props: &Properties, msg: PM) -> (GroupOrder, Params) {
    let order = explicit
        .or_else(|| props.int(property_type::DEFAULT_PUBLISHER_GROUP_ORDER).and_then(GroupOrder::from_code))
        .unwrap_or(GroupOrder::Ascending);
    let take = |pt, prop| if msg.allows(pt) { props.int(prop) } else { None };
    let params = Params {
        auth_tokens: Vec::new(),
        delivery_timeout: take(param_type::DELIVERY_TIMEOUT, property_type::OBJECT_DELIVERY_TIMEOUT),
        max_cache_duration: take(param_type::MAX_CACHE_DURATION, property_type::MAX_CACHE_DURATION),
    };
    (order, params)
}

// ------------------------------------------------------------------ messages

/// CLIENT_SETUP: Supported Versions, then Setup Parameters; SERVER_SETUP: the Selected
/// Version, then Setup Parameters (§9.3). The versions live in `SetupOptions::versions` /
/// `selected_version`.
fn read_setup_message(r: R, sender: Role, expected: Role) -> Result<Setup, DecodeError> {
    if sender != expected {
        return Err(DecodeError::violation("setup message from the wrong role"));
    }
    let (versions, selected_version) = match sender {
        Role::Client => {
            let n = r.count("number of supported versions")?;
            ((0..n).map(|_| r.int()).collect::<Result<Vec<_>, _>>()?, None)
        }
        Role::Server => (Vec::new(), Some(r.int()?)),
    };
    let options = read_setup(r, sender, KvTypes::Absolute)?;
    Ok(Setup { options: SetupOptions { versions, selected_version, ..options } })
}

fn write_setup_message(w: W, o: &SetupOptions, sender: Role) -> Result<(), EncodeError> {
    match sender {
        Role::Client => {
            if o.selected_version.is_some() {
                return Err(EncodeError::Unsupported("Selected Version in CLIENT_SETUP"));
            }
            w.int(o.versions.len() as u64)?;
            o.versions.iter().try_for_each(|v| w.int(*v))?;
        }
        Role::Server => {
            if !o.versions.is_empty() {
                return Err(EncodeError::Unsupported("Supported Versions in SERVER_SETUP"));
            }
            w.int(
                o.selected_version
                    .ok_or(EncodeError::Unsupported("SERVER_SETUP without a Selected Version"))?,
            )?;
        }
    }
    write_setup(w, o, sender, KvTypes::Absolute)
}

/// SUBSCRIBE (§9.7), and TRACK_STATUS (§9.20, the same layout). A TRACK_STATUS creates no
/// subscription, so its subscription fields and DELIVERY TIMEOUT are checked and dropped: the
/// model's TRACK_STATUS carries its track and AUTHORIZATION TOKENs, as the later drafts' does.
fn read_subscribe(r: R, msg: PM) -> Result<Subscribe, DecodeError> {
    let request_id = read_id(r)?;
    let track = read_full_track_name(r)?;
    let subscriber_priority = Some(r.u8()?);
    let group_order = read_request_order(r)?;
    let forward = Some(read_flag(r, "Forward not 0 or 1")?);
    let location_filter = Some(read_subscription_filter(r, EndGroup::Absolute)?);
    let p = read_params(r, msg)?;
    let params = if msg == PM::TrackStatus {
        Parameters { auth_tokens: p.auth_tokens, ..Parameters::default() }
    } else {
        Parameters {
            auth_tokens: p.auth_tokens,
            object_delivery_timeout: p.delivery_timeout,
            subscriber_priority,
            group_order,
            forward,
            location_filter,
            ..Parameters::default()
        }
    };
    Ok(Subscribe { request_id, track, params })
}

fn write_subscribe(w: W, m: &Subscribe, msg: PM) -> Result<(), EncodeError> {
    let mut p = m.params.clone();
    w.int(m.request_id.0)?;
    write_track(w, &m.track)?;
    w.u8(p.subscriber_priority.take().unwrap_or(DEFAULT_SUBSCRIBER_PRIORITY));
    write_order(w, p.group_order.take());
    w.u8(u8::from(p.forward.take().unwrap_or(true)));
    write_filter(w, p.location_filter.take())?;
    let wire = Params {
        auth_tokens: std::mem::take(&mut p.auth_tokens),
        delivery_timeout: p.object_delivery_timeout.take(),
        max_cache_duration: None,
    };
    nothing_left(&p, "a parameter draft-14's SUBSCRIBE cannot carry")?;
    write_params(w, &wire, msg)
}

/// SUBSCRIBE_OK (§9.8), and TRACK_STATUS_OK (§9.21, the same layout): Request ID, Track
/// Alias, and the answer's parameters and Track Properties.
fn read_subscribe_ok(r: R, msg: PM) -> Result<(RequestId, TrackAlias, Parameters, Properties), DecodeError> {
    let request_id = read_id(r)?;
    let track_alias = TrackAlias(r.int()?);
    let expires = Some(r.int()?).filter(|e| *e != 0);
    let order = read_answer_order(r)?;
    let largest_object = read_largest(r)?;
    let p = read_params(r, msg)?;
    let params = Parameters { expires, largest_object, ..Parameters::default() };
    Ok((request_id, track_alias, params, to_track_properties(order, &p)))
}

fn write_subscribe_ok(
    w: W,
    request_id: RequestId,
    alias: TrackAlias,
    params: &Parameters,
    props: &Properties,
    msg: PM,
) -> Result<(), EncodeError> {
    let mut p = params.clone();
    let (order, wire) = from_track_properties(p.group_order.take(), props, msg);
    w.int(request_id.0)?;
    w.int(alias.0)?;
    w.int(p.expires.take().unwrap_or(0))?;
    write_order(w, Some(order));
    write_largest(w, p.largest_object.take())?;
    nothing_left(&p, "a parameter draft-14's SUBSCRIBE_OK cannot carry")?;
    write_params(w, &wire, msg)
}

/// SUBSCRIBE_UPDATE (§9.10): a Start Location and an End Group "plus 1" (0 = open-ended)
/// become `location_filter` (AbsoluteStart, or AbsoluteStartGroupEnd with the inclusive
/// end); Subscriber Priority and Forward are always there. An End Group before the start is
/// a PROTOCOL_VIOLATION.
fn read_subscribe_update(r: R) -> Result<RequestUpdate, DecodeError> {
    let request_id = read_id(r)?;
    let existing_request_id = read_id(r)?;
    let start = read_location(r)?;
    let location_filter = match r.int()? {
        0 => LocationFilter::AbsoluteStart { start },
        e if e - 1 < start.group => {
            return Err(DecodeError::violation("SUBSCRIBE_UPDATE End Group before Start"))
        }
        e => LocationFilter::AbsoluteStartGroupEnd { start, end_group: e - 1 },
    };
    let subscriber_priority = r.u8()?;
    let forward = read_flag(r, "Forward not 0 or 1")?;
    let p = read_params(r, PM::SubscribeUpdate)?;
    let params = Parameters {
        auth_tokens: p.auth_tokens,
        object_delivery_timeout: p.delivery_timeout,
        subscriber_priority: Some(subscriber_priority),
        forward: Some(forward),
        location_filter: Some(location_filter),
        ..Parameters::default()
    };
    Ok(RequestUpdate { request_id, existing_request_id, params })
}

/// The inverse of [`read_subscribe_update`]. Its fields are not optional in draft-14: an
/// update without an absolute start filter, a Subscriber Priority or a Forward is
/// `Unsupported` (the session fills in the subscription's current values).
fn write_subscribe_update(w: W, m: &RequestUpdate) -> Result<(), EncodeError> {
    let mut p = m.params.clone();
    let (start, end) = match p.location_filter.take() {
        Some(LocationFilter::AbsoluteStart { start }) => (start, 0),
        Some(LocationFilter::AbsoluteStartGroupEnd { start, end_group }) => {
            let end = end_group.checked_add(1).ok_or(EncodeError::OutOfRange("End Group + 1 overflows"))?;
            (start, end)
        }
        _ => return Err(EncodeError::Unsupported("SUBSCRIBE_UPDATE without an absolute start filter")),
    };
    let prio = p
        .subscriber_priority
        .take()
        .ok_or(EncodeError::Unsupported("SUBSCRIBE_UPDATE without a priority"))?;
    let forward = p.forward.take().ok_or(EncodeError::Unsupported("SUBSCRIBE_UPDATE without Forward"))?;
    let wire = Params {
        auth_tokens: std::mem::take(&mut p.auth_tokens),
        delivery_timeout: p.object_delivery_timeout.take(),
        max_cache_duration: None,
    };
    nothing_left(&p, "a parameter draft-14's SUBSCRIBE_UPDATE cannot carry")?;
    w.int(m.request_id.0)?;
    w.int(m.existing_request_id.0)?;
    write_location(w, start)?;
    w.int(end)?;
    w.u8(prio);
    w.u8(u8::from(forward));
    write_params(w, &wire, PM::SubscribeUpdate)
}

/// PUBLISH (§9.13).
fn read_publish(r: R) -> Result<Publish, DecodeError> {
    let request_id = read_id(r)?;
    let track = read_full_track_name(r)?;
    let track_alias = TrackAlias(r.int()?);
    let order = read_answer_order(r)?;
    let largest_object = read_largest(r)?;
    let forward = Some(read_flag(r, "Forward not 0 or 1")?);
    let p = read_params(r, PM::Publish)?;
    let track_properties = to_track_properties(order, &p);
    let params = Parameters { auth_tokens: p.auth_tokens, largest_object, forward, ..Parameters::default() };
    Ok(Publish { request_id, track, track_alias, params, track_properties })
}

fn write_publish(w: W, m: &Publish) -> Result<(), EncodeError> {
    let mut p = m.params.clone();
    let (order, mut wire) = from_track_properties(p.group_order.take(), &m.track_properties, PM::Publish);
    wire.auth_tokens = std::mem::take(&mut p.auth_tokens);
    p.expires = None; // advisory; draft-14's PUBLISH has no Expires
    w.int(m.request_id.0)?;
    write_track(w, &m.track)?;
    w.int(m.track_alias.0)?;
    write_order(w, Some(order));
    write_largest(w, p.largest_object.take())?;
    w.u8(u8::from(p.forward.take().unwrap_or(true)));
    nothing_left(&p, "a parameter draft-14's PUBLISH cannot carry")?;
    write_params(w, &wire, PM::Publish)
}

/// PUBLISH_OK (§9.14): Forward, Subscriber Priority, Group Order (1 or 2) and a filter.
fn read_publish_ok(r: R) -> Result<PublishOk, DecodeError> {
    let request_id = read_id(r)?;
    let forward = Some(read_flag(r, "Forward not 0 or 1")?);
    let subscriber_priority = Some(r.u8()?);
    let group_order = Some(read_answer_order(r)?);
    let location_filter = Some(read_subscription_filter(r, EndGroup::Absolute)?);
    let p = read_params(r, PM::PublishOk)?;
    let params = Parameters {
        object_delivery_timeout: p.delivery_timeout,
        forward,
        subscriber_priority,
        group_order,
        location_filter,
        ..Parameters::default()
    };
    Ok(PublishOk { request_id, params })
}

/// The inverse of [`read_publish_ok`]. The Group Order overrides the PUBLISH's and has no
/// "unset" value, so one the model leaves out is `Unsupported` (the session fills in the
/// PUBLISH's).
fn write_publish_ok(w: W, request_id: RequestId, params: &Parameters) -> Result<(), EncodeError> {
    let mut p = params.clone();
    let order =
        p.group_order.take().ok_or(EncodeError::Unsupported("draft-14 PUBLISH_OK without a Group Order"))?;
    p.expires = None; // advisory; draft-14's PUBLISH_OK has no Expires
    w.int(request_id.0)?;
    w.u8(u8::from(p.forward.take().unwrap_or(true)));
    w.u8(p.subscriber_priority.take().unwrap_or(DEFAULT_SUBSCRIBER_PRIORITY));
    write_order(w, Some(order));
    write_filter(w, p.location_filter.take())?;
    let wire = Params { delivery_timeout: p.object_delivery_timeout.take(), ..Params::default() };
    nothing_left(&p, "a parameter draft-14's PUBLISH_OK cannot carry")?;
    write_params(w, &wire, PM::PublishOk)
}

/// FETCH (§9.16): Subscriber Priority and Group Order (0 = the publisher's), then draft-16's
/// Fetch Type and its fields ([`read_fetch_kind`]).
pub(crate) fn read_fetch(r: R) -> Result<Fetch, DecodeError> {
    let request_id = read_id(r)?;
    let subscriber_priority = Some(r.u8()?);
    let group_order = read_request_order(r)?;
    let (kind, location_filter) = read_fetch_kind(r, read_full_track_name)?;
    let p = read_params(r, PM::Fetch)?;
    let params = Parameters {
        auth_tokens: p.auth_tokens,
        subscriber_priority,
        group_order,
        location_filter,
        ..Parameters::default()
    };
    Ok(Fetch { request_id, kind, params })
}

fn write_fetch(w: W, m: &Fetch) -> Result<(), EncodeError> {
    let mut p = m.params.clone();
    w.int(m.request_id.0)?;
    w.u8(p.subscriber_priority.take().unwrap_or(DEFAULT_SUBSCRIBER_PRIORITY));
    write_order(w, p.group_order.take());
    write_fetch_kind(w, m, write_track)?;
    p.location_filter = None; // written by write_fetch_kind
    let wire = Params { auth_tokens: std::mem::take(&mut p.auth_tokens), ..Params::default() };
    nothing_left(&p, "a parameter draft-14's FETCH cannot carry")?;
    write_params(w, &wire, PM::Fetch)
}

/// FETCH_OK (§9.17): Group Order (1 or 2, a Track Property in the model), End Of Track, and
/// draft-16's "end plus one" End Location.
fn read_fetch_ok(r: R) -> Result<FetchOk, DecodeError> {
    let request_id = read_id(r)?;
    let order = read_answer_order(r)?;
    let end_of_track = read_flag(r, "End Of Track not 0 or 1")?;
    let end_location = fetch_end(read_location(r)?);
    let p = read_params(r, PM::FetchOk)?;
    let track_properties = to_track_properties(order, &p);
    Ok(FetchOk { request_id, end_of_track, end_location, params: Parameters::default(), track_properties })
}

pub(crate) fn write_fetch_ok(w: W, m: &FetchOk) -> Result<(), EncodeError> {
    let mut p = m.params.clone();
    let (order, wire) = from_track_properties(p.group_order.take(), &m.track_properties, PM::FetchOk);
    nothing_left(&p, "a parameter draft-14's FETCH_OK cannot carry")?;
    let end = write_fetch_end(m.end_location)?;
    w.int(m.request_id.0)?;
    write_order(w, Some(order));
    w.u8(u8::from(m.end_of_track));
    write_location(w, end)?;
    write_params(w, &wire, PM::FetchOk)
}

/// PUBLISH_NAMESPACE (§9.23): a track namespace, so at least one field.
fn read_publish_namespace(r: R) -> Result<PublishNamespace, DecodeError> {
    let request_id = read_id(r)?;
    let namespace = read_namespace(r, 1)?;
    let p = read_params(r, PM::PublishNamespace)?;
    Ok(PublishNamespace {
        request_id,
        namespace,
        params: Parameters { auth_tokens: p.auth_tokens, ..Parameters::default() },
    })
}

fn write_publish_namespace(w: W, m: &PublishNamespace) -> Result<(), EncodeError> {
    let mut p = m.params.clone();
    let wire = Params { auth_tokens: std::mem::take(&mut p.auth_tokens), ..Params::default() };
    nothing_left(&p, "a parameter draft-14's PUBLISH_NAMESPACE cannot carry")?;
    w.int(m.request_id.0)?;
    write_track_namespace(w, &m.namespace)?;
    write_params(w, &wire, PM::PublishNamespace)
}

/// SUBSCRIBE_NAMESPACE (§9.28): a prefix of 1 to 32 fields; no Subscribe Options (the
/// publisher sends both PUBLISH_NAMESPACE and PUBLISH: `SubscribeOptions::Both`).
fn read_subscribe_namespace(r: R) -> Result<SubscribeNamespace, DecodeError> {
    let request_id = read_id(r)?;
    let prefix = read_namespace(r, 1)?;
    let p = read_params(r, PM::SubscribeNamespace)?;
    let params = Parameters { auth_tokens: p.auth_tokens, ..Parameters::default() };
    Ok(SubscribeNamespace { request_id, prefix, options: SubscribeOptions::Both, params })
}

fn write_subscribe_namespace(w: W, m: &SubscribeNamespace) -> Result<(), EncodeError> {
    if m.options != SubscribeOptions::Both {
        return Err(EncodeError::Unsupported("draft-14 SUBSCRIBE_NAMESPACE options other than both"));
    }
    let mut p = m.params.clone();
    let wire = Params { auth_tokens: std::mem::take(&mut p.auth_tokens), ..Params::default() };
    nothing_left(&p, "a parameter draft-14's SUBSCRIBE_NAMESPACE cannot carry")?;
    w.int(m.request_id.0)?;
    write_track_namespace(w, &m.prefix)?;
    write_params(w, &wire, PM::SubscribeNamespace)
}

/// A namespace that needs at least one field (a track's, or a namespace prefix in §9.28).
fn write_track_namespace(w: W, ns: &crate::model::TrackNamespace) -> Result<(), EncodeError> {
    if ns.0.is_empty() {
        return Err(EncodeError::OutOfRange("track namespace with no fields"));
    }
    write_namespace(w, ns)
}

/// PUBLISH_NAMESPACE_OK (§9.24) and SUBSCRIBE_NAMESPACE_OK (§9.29): the Request ID only.
fn write_bare_ok(w: W, m: &RequestOk) -> Result<(), EncodeError> {
    if !m.params.is_empty() || !m.track_properties.is_empty() {
        return Err(EncodeError::Unsupported("parameters in a draft-14 namespace OK"));
    }
    w.int(m.request_id.0)
}

/// Every draft-14 error answer (§9.9, §9.15, §9.18, §9.22, §9.25, §9.30): Request ID, Error
/// Code, Reason Phrase; no Retry Interval (decoded as 0, "do not retry").
fn read_error(r: R) -> Result<RequestError, DecodeError> {
    Ok(RequestError {
        request_id: read_id(r)?,
        error_code: r.int()?,
        retry_interval: 0,
        reason: read_reason(r)?,
        redirect: None,
    })
}

fn write_error(w: W, m: &RequestError) -> Result<(), EncodeError> {
    if m.redirect.is_some() {
        return Err(EncodeError::Unsupported("draft-14 error with a Redirect"));
    }
    w.int(m.request_id.0)?;
    w.int(m.error_code)?;
    write_reason(w, &m.reason)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::d16::control::message_type as d16_type;

    #[test]
    fn code_points_draft16_reuses() {
        use message_type as t;
        assert_eq!(t::SUBSCRIBE_ERROR, d16_type::REQUEST_ERROR);
        assert_eq!(t::PUBLISH_NAMESPACE_OK, d16_type::REQUEST_OK);
        assert_eq!(t::TRACK_STATUS_OK, d16_type::NAMESPACE_DONE);
        assert_eq!(t::SUBSCRIBE_UPDATE, d16_type::REQUEST_UPDATE);
    }
}
