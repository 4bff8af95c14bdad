//! draft-18 Message Parameters (draft-ietf-moq-transport-18 §10.2) and Setup Options (§10.3).
//!
//! Message Parameters are a counted list of `Type Delta` + value, the value's encoding fixed by
//! the parameter *type* (uint8, varint, Location, length-prefixed, Track Namespace; §10.2), as
//! in draft-22. What differs from draft-22 is the table (§15.7): SUBSCRIPTION_FILTER (0x21) is a
//! length-prefixed Subscription Filter (§5.1.2, §10.2.9) where draft-22 has LOCATION_FILTER,
//! and there is no FILL_PARAMETERS, no range filter and no INCLUDE_PROPERTIES; the messages
//! each parameter may appear in differ too (the "MAY appear in" sentence of each §10.2.x).
//! Every parameter must be known and allowed in the message that carries it (§10.2, §10.2.1):
//! anything else is a PROTOCOL_VIOLATION.
//!
//! Setup Options are Key-Value-Pairs spanning the whole SETUP body (§10.3). draft-18 defines
//! PATH, AUTHORIZATION TOKEN, MAX_AUTH_TOKEN_CACHE_SIZE, AUTHORITY and MOQT_IMPLEMENTATION
//! (§15.4); every other option, draft-22's MAX_FILTER_RANGES and MAX_REQUEST_UPDATES included,
//! is unknown here and kept as such.

use bytes::Bytes;

use crate::codec::{Reader, Writer};
use crate::common::{read_kv, read_location, read_namespace, read_token, write_kv, write_location};
use crate::common::{write_namespace, write_token};
use crate::d22::params::{length_prefixed, present, set_once, ParamSet};
use crate::error::{DecodeError, EncodeError};
use crate::model::param_type as pt;
use crate::model::setup_type as st;
use crate::model::{AuthToken, GroupOrder, KvValue, LocationFilter, Parameters, SetupOptions};
use crate::varint::Vi64;

type R<'a> = Reader<'a, Vi64>;
type W<'a> = Writer<'a, Vi64>;

/// SUBSCRIPTION_FILTER (§10.2.9): the same code point as draft-22's LOCATION_FILTER, and the
/// same model field (`Parameters::location_filter`).
pub const SUBSCRIPTION_FILTER: u64 = pt::LOCATION_FILTER;

/// Subscription Filter types (§5.1.2).
pub mod filter_type {
    pub const NEXT_GROUP_START: u64 = 0x1;
    pub const LARGEST_OBJECT: u64 = 0x2;
    pub const ABSOLUTE_START: u64 = 0x3;
    pub const ABSOLUTE_RANGE: u64 = 0x4;
}

/// Every Message Parameter draft-18 defines (§15.7).
pub const KNOWN: ParamSet = ParamSet::of(&[
    pt::OBJECT_DELIVERY_TIMEOUT,
    pt::AUTHORIZATION_TOKEN,
    pt::RENDEZVOUS_TIMEOUT,
    pt::SUBGROUP_DELIVERY_TIMEOUT,
    pt::EXPIRES,
    pt::LARGEST_OBJECT,
    pt::FILL_TIMEOUT,
    pt::FORWARD,
    pt::SUBSCRIBER_PRIORITY,
    SUBSCRIPTION_FILTER,
    pt::GROUP_ORDER,
    pt::NEW_GROUP_REQUEST,
    pt::TRACK_NAMESPACE_PREFIX,
]);

/// Types that may appear more than once in one message: AUTHORIZATION TOKEN only (§10.2.2).
pub const REPEATABLE: ParamSet = ParamSet::of(&[pt::AUTHORIZATION_TOKEN]);

/// The parameters each message may carry, gathered from the "MAY appear in" sentence of every
/// parameter definition (§10.2.2-§10.2.14).
pub mod allowed {
    use super::{pt, ParamSet, SUBSCRIPTION_FILTER};

    /// §10.7.
    pub const SUBSCRIBE: ParamSet = ParamSet::of(&[
        pt::OBJECT_DELIVERY_TIMEOUT,
        pt::AUTHORIZATION_TOKEN,
        pt::RENDEZVOUS_TIMEOUT,
        pt::SUBGROUP_DELIVERY_TIMEOUT,
        pt::FORWARD,
        pt::SUBSCRIBER_PRIORITY,
        SUBSCRIPTION_FILTER,
        pt::GROUP_ORDER,
        pt::NEW_GROUP_REQUEST,
    ]);
    /// §10.8.
    pub const SUBSCRIBE_OK: ParamSet = ParamSet::of(&[pt::EXPIRES, pt::LARGEST_OBJECT]);
    /// §10.10.
    pub const PUBLISH: ParamSet =
        ParamSet::of(&[pt::AUTHORIZATION_TOKEN, pt::EXPIRES, pt::LARGEST_OBJECT, pt::FORWARD]);
    /// §10.12: the range of a standalone FETCH is in the message body, not a parameter.
    pub const FETCH: ParamSet =
        ParamSet::of(&[pt::AUTHORIZATION_TOKEN, pt::FILL_TIMEOUT, pt::SUBSCRIBER_PRIORITY, pt::GROUP_ORDER]);
    /// §10.13: no parameter names FETCH_OK.
    pub const FETCH_OK: ParamSet = ParamSet::of(&[]);
    /// §10.14: only AUTHORIZATION TOKEN names TRACK_STATUS.
    pub const TRACK_STATUS: ParamSet = ParamSet::of(&[pt::AUTHORIZATION_TOKEN]);
    /// §10.15.
    pub const PUBLISH_NAMESPACE: ParamSet = ParamSet::of(&[pt::AUTHORIZATION_TOKEN]);
    /// §10.18.
    pub const SUBSCRIBE_NAMESPACE: ParamSet = ParamSet::of(&[pt::AUTHORIZATION_TOKEN]);
    /// §10.19.
    pub const SUBSCRIBE_TRACKS: ParamSet = ParamSet::of(&[pt::AUTHORIZATION_TOKEN, pt::FORWARD]);
    /// §10.9, for a subscription.
    pub const REQUEST_UPDATE_SUBSCRIPTION: ParamSet = ParamSet::of(&[
        pt::OBJECT_DELIVERY_TIMEOUT,
        pt::AUTHORIZATION_TOKEN,
        pt::SUBGROUP_DELIVERY_TIMEOUT,
        pt::FORWARD,
        pt::SUBSCRIBER_PRIORITY,
        SUBSCRIPTION_FILTER,
        pt::NEW_GROUP_REQUEST,
    ]);
    /// §10.9, for a FETCH.
    pub const REQUEST_UPDATE_FETCH: ParamSet =
        ParamSet::of(&[pt::AUTHORIZATION_TOKEN, pt::SUBSCRIBER_PRIORITY]);
    /// §10.9, for a PUBLISH_NAMESPACE.
    pub const REQUEST_UPDATE_PUBLISH_NAMESPACE: ParamSet = ParamSet::of(&[pt::AUTHORIZATION_TOKEN]);
    /// §10.9.2, for a SUBSCRIBE_NAMESPACE or a SUBSCRIBE_TRACKS.
    pub const REQUEST_UPDATE_NAMESPACE_PREFIX: ParamSet =
        ParamSet::of(&[pt::AUTHORIZATION_TOKEN, pt::TRACK_NAMESPACE_PREFIX]);
    /// §10.9: the codec cannot know which request a REQUEST_UPDATE updates, so it accepts the
    /// union; the session knows the kind.
    pub const REQUEST_UPDATE: ParamSet = REQUEST_UPDATE_SUBSCRIPTION
        .union(REQUEST_UPDATE_FETCH)
        .union(REQUEST_UPDATE_PUBLISH_NAMESPACE)
        .union(REQUEST_UPDATE_NAMESPACE_PREFIX);
    /// §10.5 answering PUBLISH (PUBLISH_OK): the subscription's parameters, as draft-16's
    /// PUBLISH_OK carried them.
    pub const PUBLISH_OK: ParamSet = ParamSet::of(&[
        pt::OBJECT_DELIVERY_TIMEOUT,
        pt::SUBGROUP_DELIVERY_TIMEOUT,
        pt::EXPIRES,
        pt::FORWARD,
        pt::SUBSCRIBER_PRIORITY,
        SUBSCRIPTION_FILTER,
        pt::GROUP_ORDER,
        pt::NEW_GROUP_REQUEST,
    ]);
    /// §10.5: the union over the requests REQUEST_OK answers (PUBLISH_OK, REQUEST_UPDATE_OK
    /// with EXPIRES and LARGEST_OBJECT, TRACK_STATUS_OK with LARGEST_OBJECT).
    pub const REQUEST_OK: ParamSet = PUBLISH_OK.union(ParamSet::of(&[pt::LARGEST_OBJECT]));
}

/// Spec name of a parameter type, for encode errors.
const fn param_name(ty: u64) -> &'static str {
    match ty {
        pt::OBJECT_DELIVERY_TIMEOUT => "OBJECT_DELIVERY_TIMEOUT in this message",
        pt::AUTHORIZATION_TOKEN => "AUTHORIZATION_TOKEN in this message",
        pt::RENDEZVOUS_TIMEOUT => "RENDEZVOUS_TIMEOUT in this message",
        pt::SUBGROUP_DELIVERY_TIMEOUT => "SUBGROUP_DELIVERY_TIMEOUT in this message",
        pt::EXPIRES => "EXPIRES in this message",
        pt::LARGEST_OBJECT => "LARGEST_OBJECT in this message",
        pt::FILL_TIMEOUT => "FILL_TIMEOUT in this message",
        pt::FORWARD => "FORWARD in this message",
        pt::SUBSCRIBER_PRIORITY => "SUBSCRIBER_PRIORITY in this message",
        SUBSCRIPTION_FILTER => "SUBSCRIPTION_FILTER in this message",
        pt::GROUP_ORDER => "GROUP_ORDER in this message",
        pt::NEW_GROUP_REQUEST => "NEW_GROUP_REQUEST in this message",
        pt::TRACK_NAMESPACE_PREFIX => "TRACK_NAMESPACE_PREFIX in this message",
        pt::FILL_PARAMETERS => "FILL_PARAMETERS (draft-22 only)",
        pt::INCLUDE_PROPERTIES => "INCLUDE_PROPERTIES (draft-22 only)",
        _ => "range filter parameters (draft-22 only)",
    }
}

// ---------------------------------------------------------------------------------------------
// Message Parameters: decoding
// ---------------------------------------------------------------------------------------------

/// Reads `Number of Parameters` and the parameters (§10.2), accepting only types in `allowed`.
/// Inside a control message body; a short body surfaces as `NeedMore`, which the caller turns
/// into a violation.
pub fn read_params(r: &mut R<'_>, allowed: ParamSet) -> Result<Parameters, DecodeError> {
    let n = r.count("message parameters")?;
    let mut p = Parameters::default();
    let mut prev: Option<u64> = None;
    for _ in 0..n {
        let delta = r.int()?;
        let ty = prev
            .unwrap_or(0)
            .checked_add(delta)
            .ok_or(DecodeError::violation("message parameter type overflows 2^64-1"))?;
        if !KNOWN.contains(ty) {
            return Err(DecodeError::violation("unknown message parameter"));
        }
        if !allowed.contains(ty) {
            return Err(DecodeError::violation("message parameter not allowed in this message"));
        }
        // Types never decrease (a delta is unsigned), so a repeat is the previous type.
        if prev == Some(ty) && !REPEATABLE.contains(ty) {
            return Err(DecodeError::violation("duplicate message parameter"));
        }
        read_value(r, ty, &mut p)?;
        prev = Some(ty);
    }
    Ok(p)
}

/// One parameter value of (known) type `ty`, stored into `p`.
fn read_value(r: &mut R<'_>, ty: u64, p: &mut Parameters) -> Result<(), DecodeError> {
    match ty {
        pt::OBJECT_DELIVERY_TIMEOUT => p.object_delivery_timeout = Some(r.int()?),
        pt::AUTHORIZATION_TOKEN => {
            let value = length_prefixed(r)?;
            p.auth_tokens.push(read_token::<Vi64>(value.rest())?);
        }
        pt::RENDEZVOUS_TIMEOUT => p.rendezvous_timeout = Some(r.int()?),
        pt::SUBGROUP_DELIVERY_TIMEOUT => p.subgroup_delivery_timeout = Some(r.int()?),
        pt::EXPIRES => p.expires = Some(r.int()?),
        pt::LARGEST_OBJECT => p.largest_object = Some(read_location(r)?),
        pt::FILL_TIMEOUT => p.fill_timeout = Some(r.int()?),
        pt::FORWARD => {
            p.forward = Some(match r.u8()? {
                0 => false,
                1 => true,
                _ => return Err(DecodeError::violation("FORWARD other than 0 or 1")),
            })
        }
        pt::SUBSCRIBER_PRIORITY => p.subscriber_priority = Some(r.u8()?),
        SUBSCRIPTION_FILTER => {
            // A filter that does not fill its length exactly is malformed.
            let mut sub = length_prefixed(r)?;
            let f = read_filter(&mut sub)
                .map_err(|e| e.within_length("SUBSCRIPTION_FILTER shorter than its fields"))?;
            sub.finish("SUBSCRIPTION_FILTER longer than its fields")?;
            p.location_filter = Some(f);
        }
        pt::GROUP_ORDER => {
            let order = GroupOrder::from_code(u64::from(r.u8()?));
            p.group_order = Some(order.ok_or(DecodeError::violation("GROUP_ORDER other than 1 or 2"))?);
        }
        pt::NEW_GROUP_REQUEST => p.new_group_request = Some(r.int()?),
        pt::TRACK_NAMESPACE_PREFIX => p.track_namespace_prefix = Some(read_namespace(r, 0)?),
        _ => return Err(DecodeError::violation("unknown message parameter")),
    }
    Ok(())
}

/// A Subscription Filter (§5.1.2): Filter Type, [Start Location], [End Group Delta].
/// Next Group Start is `RelativeStart { groups_back: 0 }`, Largest Object is `NextObject`,
/// AbsoluteStart is `AbsoluteStart`, AbsoluteRange is `AbsoluteStartGroupEnd` with the absolute
/// end group (Start Location's group plus the delta; an overflow is a PROTOCOL_VIOLATION).
pub fn read_filter(r: &mut R<'_>) -> Result<LocationFilter, DecodeError> {
    Ok(match r.int()? {
        filter_type::NEXT_GROUP_START => LocationFilter::RelativeStart { groups_back: 0 },
        filter_type::LARGEST_OBJECT => LocationFilter::NextObject,
        filter_type::ABSOLUTE_START => LocationFilter::AbsoluteStart { start: read_location(r)? },
        filter_type::ABSOLUTE_RANGE => {
            let start = read_location(r)?;
            let end_group = start
                .group
                .checked_add(r.int()?)
                .ok_or(DecodeError::violation("Start Group + End Group Delta overflows 2^64-1"))?;
            LocationFilter::AbsoluteStartGroupEnd { start, end_group }
        }
        _ => return Err(DecodeError::violation("unknown Subscription Filter type")),
    })
}

/// Writes `f` as a Subscription Filter (§5.1.2); the filters draft-18 has no type for
/// (an explicit no-filter, a start more than the next group back, an end inside a group) are
/// `Unsupported`.
pub fn write_filter(w: &mut W<'_>, f: LocationFilter) -> Result<(), EncodeError> {
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
                .ok_or(EncodeError::OutOfRange("filter End Group before the Start Location"))?;
            w.int(filter_type::ABSOLUTE_RANGE)?;
            write_location(w, start)?;
            w.int(delta)
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

// ---------------------------------------------------------------------------------------------
// Message Parameters: encoding
// ---------------------------------------------------------------------------------------------

/// Writes `Number of Parameters` and the parameters of `p` in ascending type order. Fails with
/// `Unsupported` when `p` holds a parameter outside `allowed` (or one draft-18 lacks).
pub fn write_params(w: &mut W<'_>, p: &Parameters, allowed: ParamSet) -> Result<(), EncodeError> {
    if let Some(ty) = present(p).first_outside(allowed) {
        return Err(EncodeError::Unsupported(param_name(ty)));
    }
    // Filters first: a failure must leave `w` untouched.
    let filter = match p.location_filter {
        Some(f) => {
            let mut v = Vec::new();
            write_filter(&mut Writer::new(&mut v), f)?;
            Some(v)
        }
        None => None,
    };
    let singles = [
        p.object_delivery_timeout.is_some(),
        p.rendezvous_timeout.is_some(),
        p.subgroup_delivery_timeout.is_some(),
        p.expires.is_some(),
        p.largest_object.is_some(),
        p.fill_timeout.is_some(),
        p.forward.is_some(),
        p.subscriber_priority.is_some(),
        filter.is_some(),
        p.group_order.is_some(),
        p.new_group_request.is_some(),
        p.track_namespace_prefix.is_some(),
    ];
    let count = singles.iter().filter(|b| **b).count() + p.auth_tokens.len();
    w.int(count as u64)?;
    let mut pw = ParamWriter { w, prev: 0 };
    if let Some(v) = p.object_delivery_timeout {
        pw.ty(pt::OBJECT_DELIVERY_TIMEOUT)?.int(v)?;
    }
    for t in &p.auth_tokens {
        pw.ty(pt::AUTHORIZATION_TOKEN)?.with_len_prefix(|w| write_token(w, t))?;
    }
    if let Some(v) = p.rendezvous_timeout {
        pw.ty(pt::RENDEZVOUS_TIMEOUT)?.int(v)?;
    }
    if let Some(v) = p.subgroup_delivery_timeout {
        pw.ty(pt::SUBGROUP_DELIVERY_TIMEOUT)?.int(v)?;
    }
    if let Some(v) = p.expires {
        pw.ty(pt::EXPIRES)?.int(v)?;
    }
    if let Some(v) = p.largest_object {
        write_location(pw.ty(pt::LARGEST_OBJECT)?, v)?;
    }
    if let Some(v) = p.fill_timeout {
        pw.ty(pt::FILL_TIMEOUT)?.int(v)?;
    }
    if let Some(v) = p.forward {
        pw.ty(pt::FORWARD)?.u8(u8::from(v));
    }
    if let Some(v) = p.subscriber_priority {
        pw.ty(pt::SUBSCRIBER_PRIORITY)?.u8(v);
    }
    if let Some(v) = &filter {
        pw.ty(SUBSCRIPTION_FILTER)?.len_prefixed(v)?;
    }
    if let Some(v) = p.group_order {
        pw.ty(pt::GROUP_ORDER)?.u8(v.code() as u8);
    }
    if let Some(v) = p.new_group_request {
        pw.ty(pt::NEW_GROUP_REQUEST)?.int(v)?;
    }
    if let Some(ns) = &p.track_namespace_prefix {
        write_namespace(pw.ty(pt::TRACK_NAMESPACE_PREFIX)?, ns)?;
    }
    Ok(())
}

/// Writes Type Deltas; callers go in ascending type order.
struct ParamWriter<'w, 'a> {
    w: &'w mut W<'a>,
    prev: u64,
}

impl<'a> ParamWriter<'_, 'a> {
    fn ty(&mut self, ty: u64) -> Result<&mut W<'a>, EncodeError> {
        let delta = ty.checked_sub(self.prev).ok_or(EncodeError::OutOfRange("parameters not ascending"))?;
        self.w.int(delta)?;
        self.prev = ty;
        Ok(self.w)
    }
}

// ---------------------------------------------------------------------------------------------
// Setup Options (§10.3)
// ---------------------------------------------------------------------------------------------

/// The Setup Option types draft-18 defines (§15.4).
const fn is_known_option(ty: u64) -> bool {
    matches!(
        ty,
        st::PATH
            | st::AUTHORIZATION_TOKEN
            | st::MAX_AUTH_TOKEN_CACHE_SIZE
            | st::AUTHORITY
            | st::MOQT_IMPLEMENTATION
    )
}

/// Setup Options spanning all of `r` (the SETUP body). `from_client`: the sender is the client,
/// whose AUTHORIZATION TOKEN options may not DELETE or USE_ALIAS (§10.2.2).
pub fn read_setup_options(r: &mut R<'_>, from_client: bool) -> Result<SetupOptions, DecodeError> {
    let mut o = SetupOptions::default();
    let mut prev = 0u64;
    while !r.is_empty() {
        let (ty, value) = read_kv(r, prev)?;
        prev = ty;
        // read_kv gives even types an Int and odd types Bytes, matching each known option.
        match (ty, value) {
            (st::PATH, KvValue::Bytes(b)) => set_once(&mut o.path, b)?,
            (st::AUTHORIZATION_TOKEN, KvValue::Bytes(b)) => {
                let token = read_token::<Vi64>(&b)?;
                if from_client && matches!(token, AuthToken::Delete { .. } | AuthToken::UseAlias { .. }) {
                    return Err(DecodeError::violation("DELETE or USE_ALIAS token in a client SETUP"));
                }
                o.auth_tokens.push(token);
            }
            (st::MAX_AUTH_TOKEN_CACHE_SIZE, KvValue::Int(v)) => {
                set_once(&mut o.max_auth_token_cache_size, v)?
            }
            (st::AUTHORITY, KvValue::Bytes(b)) => set_once(&mut o.authority, b)?,
            (st::MOQT_IMPLEMENTATION, KvValue::Bytes(b)) => set_once(&mut o.implementation, b)?,
            // Unknown ones (draft-16's MAX_REQUEST_ID, draft-22's MAX_FILTER_RANGES and
            // MAX_REQUEST_UPDATES among them) are kept; duplicates are allowed (§10.3).
            (ty, value) => o.unknown.push((ty, value)),
        }
    }
    Ok(o)
}

/// Writes the Setup Options in ascending type order (unknown options merged in by type,
/// keeping their relative order). Options of other drafts are `Unsupported`.
pub fn write_setup_options(w: &mut W<'_>, o: &SetupOptions, from_client: bool) -> Result<(), EncodeError> {
    if o.max_request_id.is_some() {
        return Err(EncodeError::Unsupported("MAX_REQUEST_ID setup option"));
    }
    if o.max_filter_ranges.is_some() {
        return Err(EncodeError::Unsupported("MAX_FILTER_RANGES setup option"));
    }
    if o.max_request_updates.is_some() {
        return Err(EncodeError::Unsupported("MAX_REQUEST_UPDATES setup option"));
    }
    if o.unknown.iter().any(|(ty, _)| is_known_option(*ty)) {
        return Err(EncodeError::OutOfRange("unknown setup option with a known type"));
    }
    if from_client
        && o.auth_tokens.iter().any(|t| matches!(t, AuthToken::Delete { .. } | AuthToken::UseAlias { .. }))
    {
        return Err(EncodeError::OutOfRange("DELETE or USE_ALIAS token in a client SETUP"));
    }
    let mut known: Vec<(u64, KvValue)> = Vec::new();
    for (ty, v) in
        [(st::PATH, &o.path), (st::AUTHORITY, &o.authority), (st::MOQT_IMPLEMENTATION, &o.implementation)]
    {
        if let Some(b) = v {
            known.push((ty, KvValue::Bytes(b.clone())));
        }
    }
    if let Some(v) = o.max_auth_token_cache_size {
        known.push((st::MAX_AUTH_TOKEN_CACHE_SIZE, KvValue::Int(v)));
    }
    for t in &o.auth_tokens {
        let mut value = Vec::new();
        write_token(&mut Writer::<Vi64>::new(&mut value), t)?;
        known.push((st::AUTHORIZATION_TOKEN, KvValue::Bytes(Bytes::from(value))));
    }
    known.extend(o.unknown.iter().cloned());
    // Stable: repeated tokens and repeated unknown options keep their order.
    known.sort_by_key(|(ty, _)| *ty);
    let mut prev = 0u64;
    for (ty, value) in &known {
        write_kv(w, prev, *ty, value)?;
        prev = *ty;
    }
    Ok(())
}
