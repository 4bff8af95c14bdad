//! draft-16 Setup Parameters (§9.3.1) and Message Parameters (§9.2.2), mapped onto the model's
//! [`SetupOptions`] and [`Parameters`].
//!
//! Both lists are `Number of Parameters (i)` followed by Key-Value-Pairs (§1.4.2) whose types
//! are delta-encoded, so a list is always in non-decreasing type order and a repeated type has
//! delta 0. Setup Parameters use the version-independent code points; unknown ones are kept.
//! Message Parameters use draft-16's table (§13, "Message Parameters"); an unknown one closes
//! the session, and a known one that its message may not carry is ignored (§9.2.2).

use bytes::Bytes;

use crate::codec::{Reader, Writer};
use crate::common::{read_kv, read_location, read_token, write_kv, write_location, write_token, KvTypes};
use crate::error::{DecodeError, EncodeError};
use crate::model::{setup_type, AuthToken, GroupOrder, KvValue, Parameters, Role, SetupOptions};
use crate::typed_forms::{read_subscription_filter, write_subscription_filter, EndGroup};
use crate::varint::Quic;

/// draft-16 Message Parameter code points (§13 "Message Parameters").
pub mod param_type {
    /// DELIVERY_TIMEOUT (§9.2.2.2); the model's `object_delivery_timeout`.
    pub const DELIVERY_TIMEOUT: u64 = 0x02;
    /// AUTHORIZATION_TOKEN (§9.2.2.1), repeatable.
    pub const AUTHORIZATION_TOKEN: u64 = 0x03;
    /// EXPIRES (§9.2.2.6).
    pub const EXPIRES: u64 = 0x08;
    /// LARGEST_OBJECT (§9.2.2.7), a length-prefixed Location.
    pub const LARGEST_OBJECT: u64 = 0x09;
    /// FORWARD (§9.2.2.8).
    pub const FORWARD: u64 = 0x10;
    /// SUBSCRIBER_PRIORITY (§9.2.2.3).
    pub const SUBSCRIBER_PRIORITY: u64 = 0x20;
    /// SUBSCRIPTION_FILTER (§9.2.2.5), a length-prefixed Subscription Filter.
    pub const SUBSCRIPTION_FILTER: u64 = 0x21;
    /// GROUP_ORDER (§9.2.2.4).
    pub const GROUP_ORDER: u64 = 0x22;
    /// NEW_GROUP_REQUEST (§9.2.2.9).
    pub const NEW_GROUP_REQUEST: u64 = 0x32;

    /// Every Message Parameter draft-16 defines, ascending.
    pub const ALL: [u64; 9] = [
        DELIVERY_TIMEOUT,
        AUTHORIZATION_TOKEN,
        EXPIRES,
        LARGEST_OBJECT,
        FORWARD,
        SUBSCRIBER_PRIORITY,
        SUBSCRIPTION_FILTER,
        GROUP_ORDER,
        NEW_GROUP_REQUEST,
    ];
}

/// The draft-16 messages that carry a Parameters list; selects the parameters it may carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ParamMessage {
    RequestOk,
    Subscribe,
    SubscribeOk,
    RequestUpdate,
    Publish,
    PublishOk,
    Fetch,
    FetchOk,
    TrackStatus,
    PublishNamespace,
    SubscribeNamespace,
}

impl ParamMessage {
    /// The parameters this message may carry, from the "MAY appear in" sentence of each
    /// parameter definition in §9.2.2. Choices where the text is open:
    /// - REQUEST_UPDATE: the union over every request kind it can update (the "(for a
    ///   subscription)" qualifiers are for the session, which knows the kind).
    /// - REQUEST_OK: LARGEST_OBJECT, and EXPIRES (§9.2.2.6 says "TODO: or REQUEST_OK", and
    ///   §9.19 answers TRACK_STATUS with "the same parameters it would have set in a
    ///   SUBSCRIBE_OK").
    /// - FETCH: no SUBSCRIPTION_FILTER; a standalone FETCH's range travels in the message
    ///   body and is mapped onto `Parameters::location_filter` by the message codec.
    /// - FETCH_OK: none is defined for it.
    pub const fn allowed(self) -> &'static [u64] {
        use param_type::*;
        match self {
            ParamMessage::RequestOk => &[EXPIRES, LARGEST_OBJECT],
            ParamMessage::Subscribe => &[
                DELIVERY_TIMEOUT,
                AUTHORIZATION_TOKEN,
                FORWARD,
                SUBSCRIBER_PRIORITY,
                SUBSCRIPTION_FILTER,
                GROUP_ORDER,
                NEW_GROUP_REQUEST,
            ],
            ParamMessage::SubscribeOk => &[EXPIRES, LARGEST_OBJECT],
            ParamMessage::RequestUpdate => &[
                DELIVERY_TIMEOUT,
                AUTHORIZATION_TOKEN,
                FORWARD,
                SUBSCRIBER_PRIORITY,
                SUBSCRIPTION_FILTER,
                NEW_GROUP_REQUEST,
            ],
            ParamMessage::Publish => &[AUTHORIZATION_TOKEN, EXPIRES, LARGEST_OBJECT, FORWARD],
            ParamMessage::PublishOk => &[
                DELIVERY_TIMEOUT,
                EXPIRES,
                FORWARD,
                SUBSCRIBER_PRIORITY,
                SUBSCRIPTION_FILTER,
                GROUP_ORDER,
                NEW_GROUP_REQUEST,
            ],
            ParamMessage::Fetch => &[AUTHORIZATION_TOKEN, SUBSCRIBER_PRIORITY, GROUP_ORDER],
            ParamMessage::FetchOk => &[],
            ParamMessage::TrackStatus | ParamMessage::PublishNamespace => &[AUTHORIZATION_TOKEN],
            ParamMessage::SubscribeNamespace => &[AUTHORIZATION_TOKEN, FORWARD],
        }
    }

    pub fn allows(self, ty: u64) -> bool {
        self.allowed().contains(&ty)
    }
}

/// Stores `v` in `slot` unless it is set already (then `what` is a PROTOCOL_VIOLATION).
pub(crate) fn set_once<T>(slot: &mut Option<T>, v: T, what: &'static str) -> Result<(), DecodeError> {
    if slot.is_some() {
        return Err(DecodeError::violation(what));
    }
    *slot = Some(v);
    Ok(())
}

/// Reads `Number of Parameters` and the Message Parameters of `msg` (§9.2).
pub fn read_params(r: &mut Reader<'_, Quic>, msg: ParamMessage) -> Result<Parameters, DecodeError> {
    read_params_as(r, msg, false)
}

/// [`read_params`], where `zero_order` takes GROUP_ORDER 0 as draft-14's "the publisher's
/// order" (no preference), as Shaka Player writes it (`crate::d16::shaka`).
pub(crate) fn read_params_as(
    r: &mut Reader<'_, Quic>,
    msg: ParamMessage,
    zero_order: bool,
) -> Result<Parameters, DecodeError> {
    let n = r.count("number of parameters")?;
    let mut p = Parameters::default();
    let mut prev = 0u64;
    for _ in 0..n {
        let (ty, value) = read_kv(r, prev)?;
        prev = ty;
        if !param_type::ALL.contains(&ty) {
            return Err(DecodeError::violation("unknown message parameter"));
        }
        // §9.2.2: a parameter in a message it is not defined for "MUST be ignored".
        if zero_order && ty == param_type::GROUP_ORDER && value == KvValue::Int(0) {
            continue;
        }
        if msg.allows(ty) {
            apply_param(&mut p, ty, value)?;
        }
    }
    Ok(p)
}

/// Stores one known, allowed parameter, checking its value and that it is not repeated.
fn apply_param(p: &mut Parameters, ty: u64, value: KvValue) -> Result<(), DecodeError> {
    use param_type::*;
    const DUP: &str = "duplicate message parameter";
    match (ty, value) {
        (DELIVERY_TIMEOUT, KvValue::Int(v)) => {
            if v == 0 {
                return Err(DecodeError::violation("DELIVERY_TIMEOUT of 0"));
            }
            set_once(&mut p.object_delivery_timeout, v, DUP)
        }
        (AUTHORIZATION_TOKEN, KvValue::Bytes(b)) => {
            p.auth_tokens.push(read_token::<Quic>(&b)?);
            Ok(())
        }
        (EXPIRES, KvValue::Int(v)) => set_once(&mut p.expires, v, DUP),
        (LARGEST_OBJECT, KvValue::Bytes(b)) => {
            let loc = read_exact(&b, read_location)
                .map_err(|_| DecodeError::kv_format("malformed LARGEST_OBJECT location"))?;
            set_once(&mut p.largest_object, loc, DUP)
        }
        (FORWARD, KvValue::Int(v)) => {
            let forward = match v {
                0 => false,
                1 => true,
                _ => return Err(DecodeError::violation("FORWARD not 0 or 1")),
            };
            set_once(&mut p.forward, forward, DUP)
        }
        (SUBSCRIBER_PRIORITY, KvValue::Int(v)) => {
            let prio =
                u8::try_from(v).map_err(|_| DecodeError::violation("SUBSCRIBER_PRIORITY above 255"))?;
            set_once(&mut p.subscriber_priority, prio, DUP)
        }
        (SUBSCRIPTION_FILTER, KvValue::Bytes(b)) => {
            // §9.2.2.5: a filter whose length does not match the parameter's is a violation.
            let f = read_exact(&b, |r| read_subscription_filter(r, EndGroup::Absolute))
                .map_err(|e| e.within_length("SUBSCRIPTION_FILTER shorter than its length"))?;
            set_once(&mut p.location_filter, f, DUP)
        }
        (GROUP_ORDER, KvValue::Int(v)) => {
            let order = GroupOrder::from_code(v).ok_or(DecodeError::violation("GROUP_ORDER not 1 or 2"))?;
            set_once(&mut p.group_order, order, DUP)
        }
        (NEW_GROUP_REQUEST, KvValue::Int(v)) => set_once(&mut p.new_group_request, v, DUP),
        // The type's parity fixes the value's kind, so a known type cannot arrive otherwise.
        _ => Err(DecodeError::kv_format("message parameter value of the wrong kind")),
    }
}

/// Decodes `value` with `f`, requiring every byte to be used.
pub(crate) fn read_exact<T>(
    value: &[u8],
    f: impl FnOnce(&mut Reader<'_, Quic>) -> Result<T, DecodeError>,
) -> Result<T, DecodeError> {
    let mut r = Reader::<Quic>::new(value);
    let v = f(&mut r)?;
    r.finish("trailing bytes in parameter value")?;
    Ok(v)
}

/// Writes `Number of Parameters` and the Message Parameters of `msg`, ascending by type.
/// Fails with `Unsupported` for a parameter `msg` cannot carry or one draft-16 lacks.
/// For FETCH, `location_filter` is skipped: the message body carries it.
pub fn write_params(w: &mut Writer<'_, Quic>, p: &Parameters, msg: ParamMessage) -> Result<(), EncodeError> {
    reject_d22_only(p)?;
    let kvs = param_kvs(p, msg)?;
    if let Some((ty, _)) = kvs.iter().find(|(ty, _)| !msg.allows(*ty)) {
        return Err(EncodeError::Unsupported(param_name(*ty)));
    }
    write_kv_list(w, &kvs, KvTypes::Delta)
}

/// The model fields draft-16 cannot carry.
fn reject_d22_only(p: &Parameters) -> Result<(), EncodeError> {
    let unsupported = [
        (p.rendezvous_timeout.is_some(), "RENDEZVOUS_TIMEOUT"),
        (p.subgroup_delivery_timeout.is_some(), "SUBGROUP_DELIVERY_TIMEOUT"),
        (p.fill_timeout.is_some(), "FILL_TIMEOUT"),
        (p.fill_parameters.is_some(), "FILL_PARAMETERS"),
        (!p.range_filters.is_empty(), "range filter parameters"),
        (p.track_namespace_prefix.is_some(), "TRACK_NAMESPACE_PREFIX"),
        (p.include_properties.is_some(), "INCLUDE_PROPERTIES"),
    ];
    match unsupported.iter().find(|(present, _)| *present) {
        Some((_, name)) => Err(EncodeError::Unsupported(name)),
        None => Ok(()),
    }
}

/// The draft-16 parameters of `p` as Key-Value-Pairs, ascending by type.
fn param_kvs(p: &Parameters, msg: ParamMessage) -> Result<Vec<(u64, KvValue)>, EncodeError> {
    use param_type::*;
    let mut kvs = Vec::new();
    if let Some(v) = p.object_delivery_timeout {
        if v == 0 {
            return Err(EncodeError::OutOfRange("DELIVERY_TIMEOUT of 0"));
        }
        kvs.push((DELIVERY_TIMEOUT, KvValue::Int(v)));
    }
    for t in &p.auth_tokens {
        kvs.push((AUTHORIZATION_TOKEN, KvValue::Bytes(token_bytes(t)?)));
    }
    if let Some(v) = p.expires {
        kvs.push((EXPIRES, KvValue::Int(v)));
    }
    if let Some(l) = p.largest_object {
        kvs.push((LARGEST_OBJECT, KvValue::Bytes(encode_with(|w| write_location(w, l))?)));
    }
    if let Some(f) = p.forward {
        kvs.push((FORWARD, KvValue::Int(u64::from(f))));
    }
    if let Some(v) = p.subscriber_priority {
        kvs.push((SUBSCRIBER_PRIORITY, KvValue::Int(u64::from(v))));
    }
    match p.location_filter {
        Some(f) if msg != ParamMessage::Fetch => {
            kvs.push((
                SUBSCRIPTION_FILTER,
                KvValue::Bytes(encode_with(|w| write_subscription_filter(w, f, EndGroup::Absolute))?),
            ));
        }
        _ => {}
    }
    if let Some(o) = p.group_order {
        kvs.push((GROUP_ORDER, KvValue::Int(o.code())));
    }
    if let Some(v) = p.new_group_request {
        kvs.push((NEW_GROUP_REQUEST, KvValue::Int(v)));
    }
    Ok(kvs)
}

fn param_name(ty: u64) -> &'static str {
    use param_type::*;
    match ty {
        DELIVERY_TIMEOUT => "DELIVERY_TIMEOUT in this message",
        AUTHORIZATION_TOKEN => "AUTHORIZATION_TOKEN in this message",
        EXPIRES => "EXPIRES in this message",
        LARGEST_OBJECT => "LARGEST_OBJECT in this message",
        FORWARD => "FORWARD in this message",
        SUBSCRIBER_PRIORITY => "SUBSCRIBER_PRIORITY in this message",
        SUBSCRIPTION_FILTER => "SUBSCRIPTION_FILTER in this message",
        GROUP_ORDER => "GROUP_ORDER in this message",
        NEW_GROUP_REQUEST => "NEW_GROUP_REQUEST in this message",
        _ => "message parameter in this message",
    }
}

/// The bytes `f` writes (a parameter value).
pub(crate) fn encode_with(
    f: impl FnOnce(&mut Writer<'_, Quic>) -> Result<(), EncodeError>,
) -> Result<Bytes, EncodeError> {
    let mut buf = Vec::new();
    f(&mut Writer::new(&mut buf))?;
    Ok(Bytes::from(buf))
}

/// An AUTHORIZATION TOKEN parameter's value.
pub(crate) fn token_bytes(t: &AuthToken) -> Result<Bytes, EncodeError> {
    encode_with(|w| write_token(w, t))
}

/// `Number of Parameters`, then each pair with its type coded as `kv` says (`kvs` ascending
/// by type when delta-coded).
pub(crate) fn write_kv_list(
    w: &mut Writer<'_, Quic>,
    kvs: &[(u64, KvValue)],
    kv: KvTypes,
) -> Result<(), EncodeError> {
    w.int(kvs.len() as u64)?;
    let mut prev = 0u64;
    for (ty, value) in kvs {
        write_kv(w, prev, *ty, value)?;
        prev = kv.base_after(*ty);
    }
    Ok(())
}

/// Reads `Number of Parameters` and the Setup Parameters (§9.3.1) of a CLIENT_SETUP
/// (`sender == Client`) or SERVER_SETUP. Unknown parameters, duplicates included, are kept
/// in `unknown`; a repeated known one other than AUTHORIZATION TOKEN is a violation, as is
/// a DELETE or USE_ALIAS token in CLIENT_SETUP (§9.2.2.1). `kv` says how the types are coded:
/// draft-16's are deltas, draft-14's (whose Setup Parameters are otherwise the same,
/// draft-14 §9.3.2) absolute.
pub fn read_setup(r: &mut Reader<'_, Quic>, sender: Role, kv: KvTypes) -> Result<SetupOptions, DecodeError> {
    const DUP: &str = "duplicate setup parameter";
    let n = r.count("number of setup parameters")?;
    let mut o = SetupOptions::default();
    let mut prev = 0u64;
    for _ in 0..n {
        let (ty, value) = read_kv(r, prev)?;
        prev = kv.base_after(ty);
        match (ty, value) {
            (setup_type::PATH, KvValue::Bytes(b)) => set_once(&mut o.path, b, DUP)?,
            (setup_type::MAX_REQUEST_ID, KvValue::Int(v)) => set_once(&mut o.max_request_id, v, DUP)?,
            (setup_type::AUTHORIZATION_TOKEN, KvValue::Bytes(b)) => {
                let t = read_token::<Quic>(&b)?;
                if sender == Role::Client && is_alias_reference(&t) {
                    return Err(DecodeError::violation("DELETE or USE_ALIAS token in CLIENT_SETUP"));
                }
                o.auth_tokens.push(t);
            }
            (setup_type::MAX_AUTH_TOKEN_CACHE_SIZE, KvValue::Int(v)) => {
                set_once(&mut o.max_auth_token_cache_size, v, DUP)?
            }
            (setup_type::AUTHORITY, KvValue::Bytes(b)) => set_once(&mut o.authority, b, DUP)?,
            (setup_type::MOQT_IMPLEMENTATION, KvValue::Bytes(b)) => set_once(&mut o.implementation, b, DUP)?,
            // MAX_FILTER_RANGES (0x06) and MAX_REQUEST_UPDATES (0x08) are draft-22's: unknown here.
            (ty, value) => o.unknown.push((ty, value)),
        }
    }
    Ok(o)
}

fn is_alias_reference(t: &AuthToken) -> bool {
    matches!(t, AuthToken::Delete { .. } | AuthToken::UseAlias { .. })
}

/// The Setup Parameter types draft-16 defines (the rest are "unknown").
const KNOWN_SETUP: [u64; 6] = [
    setup_type::PATH,
    setup_type::MAX_REQUEST_ID,
    setup_type::AUTHORIZATION_TOKEN,
    setup_type::MAX_AUTH_TOKEN_CACHE_SIZE,
    setup_type::AUTHORITY,
    setup_type::MOQT_IMPLEMENTATION,
];

/// Writes `Number of Parameters` and the Setup Parameters of `o`, ascending by type (the
/// `unknown` ones keep their relative order), with the types coded as `kv` says.
pub fn write_setup(
    w: &mut Writer<'_, Quic>,
    o: &SetupOptions,
    sender: Role,
    kv: KvTypes,
) -> Result<(), EncodeError> {
    if o.max_filter_ranges.is_some() {
        return Err(EncodeError::Unsupported("MAX_FILTER_RANGES setup option"));
    }
    if o.max_request_updates.is_some() {
        return Err(EncodeError::Unsupported("MAX_REQUEST_UPDATES setup option"));
    }
    if sender == Role::Client && o.auth_tokens.iter().any(is_alias_reference) {
        return Err(EncodeError::OutOfRange("DELETE or USE_ALIAS token in CLIENT_SETUP"));
    }
    if o.unknown.iter().any(|(ty, _)| KNOWN_SETUP.contains(ty)) {
        return Err(EncodeError::OutOfRange("unknown setup parameter with a known type"));
    }
    let mut kvs = Vec::with_capacity(8 + o.unknown.len());
    if let Some(b) = &o.path {
        kvs.push((setup_type::PATH, KvValue::Bytes(b.clone())));
    }
    if let Some(v) = o.max_request_id {
        kvs.push((setup_type::MAX_REQUEST_ID, KvValue::Int(v)));
    }
    for t in &o.auth_tokens {
        kvs.push((setup_type::AUTHORIZATION_TOKEN, KvValue::Bytes(token_bytes(t)?)));
    }
    if let Some(v) = o.max_auth_token_cache_size {
        kvs.push((setup_type::MAX_AUTH_TOKEN_CACHE_SIZE, KvValue::Int(v)));
    }
    if let Some(b) = &o.authority {
        kvs.push((setup_type::AUTHORITY, KvValue::Bytes(b.clone())));
    }
    if let Some(b) = &o.implementation {
        kvs.push((setup_type::MOQT_IMPLEMENTATION, KvValue::Bytes(b.clone())));
    }
    kvs.extend(o.unknown.iter().cloned());
    kvs.sort_by_key(|(ty, _)| *ty); // stable: equal types keep their order
    write_kv_list(w, &kvs, kv)
}
