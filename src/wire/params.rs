//! Setup Options and Message Parameters of the request-stream drafts (draft-18 §10.2-§10.3,
//! draft-20 §10.2-§10.3, draft-22 §9.1 and §9.20), written once; the [`Dialect`] says where a
//! draft differs (the form of parameter 0x21 and of TRACK_NAMESPACE_PREFIX, which parameters
//! exist and where, which Setup Options exist).
//!
//! Setup Options are Key-Value-Pairs spanning the whole SETUP body; unknown options are kept.
//! Message Parameters are a counted list of `Type Delta` + value, where the value's encoding is
//! fixed by the parameter *type* (uint8, varint, Location, length-prefixed, namespace), not by
//! the even/odd rule of Key-Value-Pairs. Every parameter must be known in the draft and allowed
//! in the message that carries it: anything else is a PROTOCOL_VIOLATION. [`ParamSet`] and
//! [`Tables`] hold the per-message lists.
//!
//! Where draft-22 asks for a REQUEST_ERROR (`INVALID_FILTER`: a PRIORITY_FILTER value above
//! 255, an odd property type, a repeated Type/SetID/Property Type triple) the value is kept in
//! the model and left for the session to judge. Only a range delta that overflows 2^64-1
//! (§8.6) cannot be represented at all; the codec closes the session with PROTOCOL_VIOLATION
//! for it, since no conforming encoder can produce it.

use bytes::Bytes;

use crate::codec::{Reader, Writer};
use crate::common::{read_kv, read_location, read_namespace, read_token, write_kv, write_location};
use crate::common::{write_namespace, write_token};
use crate::dialect::{Dialect, FilterForm};
use crate::error::{DecodeError, EncodeError};
use crate::model::param_type as pt;
use crate::model::setup_type as st;
use crate::model::{
    AuthToken, GroupOrder, KvValue, Location, LocationFilter, Parameters, Range, RangeFilter,
    RangeFilterKind, RangeSet, SetupOptions,
};
use crate::typed_forms::{read_subscription_filter, write_subscription_filter, EndGroup};
use crate::varint::Vi64;

type R<'a> = Reader<'a, Vi64>;
type W<'a> = Writer<'a, Vi64>;

// ---------------------------------------------------------------------------------------------
// Parameter sets
// ---------------------------------------------------------------------------------------------

/// A set of Message Parameter types. Every draft-22 type is below 64, so a bit mask suffices.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ParamSet(u64);

impl ParamSet {
    /// The set holding `types`. Types of 64 and above cannot be members (draft-22 defines
    /// none) and are left out.
    pub const fn of(types: &[u64]) -> Self {
        let mut bits = 0u64;
        let mut i = 0;
        while i < types.len() {
            if types[i] < 64 {
                bits |= 1 << types[i];
            }
            i += 1;
        }
        ParamSet(bits)
    }

    pub const fn contains(self, ty: u64) -> bool {
        ty < 64 && self.0 & (1 << ty) != 0
    }

    pub const fn union(self, other: ParamSet) -> Self {
        ParamSet(self.0 | other.0)
    }

    /// The smallest type in `self` that is not in `other`.
    pub const fn first_outside(self, other: ParamSet) -> Option<u64> {
        let rest = self.0 & !other.0;
        if rest == 0 {
            None
        } else {
            Some(rest.trailing_zeros() as u64)
        }
    }

    fn insert(&mut self, ty: u64) {
        if ty < 64 {
            self.0 |= 1 << ty;
        }
    }
}

/// The parameter table of one draft: the types it defines, and those each message may carry
/// (the codec cannot know which request a REQUEST_UPDATE or REQUEST_OK answers, so those hold
/// the union over the request kinds; the session knows the kind).
#[derive(Debug)]
pub struct Tables {
    pub known: ParamSet,
    pub subscribe: ParamSet,
    pub subscribe_ok: ParamSet,
    pub publish: ParamSet,
    pub publish_ok: ParamSet,
    pub publish_state_notify: ParamSet,
    pub fetch: ParamSet,
    pub fetch_ok: ParamSet,
    pub track_status: ParamSet,
    pub publish_namespace: ParamSet,
    pub subscribe_namespace: ParamSet,
    pub subscribe_tracks: ParamSet,
    pub request_update: ParamSet,
    pub request_ok: ParamSet,
    /// The nested scope of FILL_PARAMETERS (draft-22 §9.20.15, Table 7).
    pub fill_parameters: ParamSet,
}

/// Types that may appear more than once in one message: AUTHORIZATION TOKEN (draft-18
/// §10.2.2, draft-22 §8.9) and the range filters (draft-22 §3.3.2; draft-18 has none).
pub const REPEATABLE: ParamSet = ParamSet::of(&[
    pt::AUTHORIZATION_TOKEN,
    pt::SUBGROUP_FILTER,
    pt::OBJECTID_FILTER,
    pt::PRIORITY_FILTER,
    pt::OBJECT_PROPERTY_FILTER,
    pt::TRACK_PROPERTY_FILTER,
]);

/// The range filters on Objects (all but TRACK_PROPERTY_FILTER), allowed together (§3.3.2).
const OBJECT_RANGE_FILTERS: [u64; 4] =
    [pt::SUBGROUP_FILTER, pt::OBJECTID_FILTER, pt::PRIORITY_FILTER, pt::OBJECT_PROPERTY_FILTER];

/// `set` plus the four Object range filters.
const fn with_ranges(set: ParamSet) -> ParamSet {
    set.union(ParamSet::of(&OBJECT_RANGE_FILTERS))
}

/// draft-18 (§15.7; each message's list gathered from the "MAY appear in" sentence of every
/// parameter definition, §10.2.2-§10.2.14). Parameter 0x21 is SUBSCRIPTION_FILTER.
pub const D18: Tables = {
    const UPDATE_SUBSCRIPTION: ParamSet = ParamSet::of(&[
        pt::OBJECT_DELIVERY_TIMEOUT,
        pt::AUTHORIZATION_TOKEN,
        pt::SUBGROUP_DELIVERY_TIMEOUT,
        pt::FORWARD,
        pt::SUBSCRIBER_PRIORITY,
        pt::LOCATION_FILTER,
        pt::NEW_GROUP_REQUEST,
    ]);
    // §10.5 answering PUBLISH: the subscription's parameters, as draft-16's PUBLISH_OK.
    const PUBLISH_OK: ParamSet = ParamSet::of(&[
        pt::OBJECT_DELIVERY_TIMEOUT,
        pt::SUBGROUP_DELIVERY_TIMEOUT,
        pt::EXPIRES,
        pt::FORWARD,
        pt::SUBSCRIBER_PRIORITY,
        pt::LOCATION_FILTER,
        pt::GROUP_ORDER,
        pt::NEW_GROUP_REQUEST,
    ]);
    let token = ParamSet::of(&[pt::AUTHORIZATION_TOKEN]);
    Tables {
        known: ParamSet::of(&[
            pt::OBJECT_DELIVERY_TIMEOUT,
            pt::AUTHORIZATION_TOKEN,
            pt::RENDEZVOUS_TIMEOUT,
            pt::SUBGROUP_DELIVERY_TIMEOUT,
            pt::EXPIRES,
            pt::LARGEST_OBJECT,
            pt::FILL_TIMEOUT,
            pt::FORWARD,
            pt::SUBSCRIBER_PRIORITY,
            pt::LOCATION_FILTER,
            pt::GROUP_ORDER,
            pt::NEW_GROUP_REQUEST,
            pt::TRACK_NAMESPACE_PREFIX,
        ]),
        subscribe: UPDATE_SUBSCRIPTION.union(ParamSet::of(&[pt::RENDEZVOUS_TIMEOUT, pt::GROUP_ORDER])),
        subscribe_ok: ParamSet::of(&[pt::EXPIRES, pt::LARGEST_OBJECT]),
        publish: ParamSet::of(&[pt::AUTHORIZATION_TOKEN, pt::EXPIRES, pt::LARGEST_OBJECT, pt::FORWARD]),
        publish_ok: PUBLISH_OK,
        publish_state_notify: ParamSet::of(&[]),
        // §10.12: a standalone FETCH's range is in its body, not a parameter.
        fetch: ParamSet::of(&[
            pt::AUTHORIZATION_TOKEN,
            pt::FILL_TIMEOUT,
            pt::SUBSCRIBER_PRIORITY,
            pt::GROUP_ORDER,
        ]),
        fetch_ok: ParamSet::of(&[]),
        track_status: token,
        publish_namespace: token,
        subscribe_namespace: token,
        subscribe_tracks: ParamSet::of(&[pt::AUTHORIZATION_TOKEN, pt::FORWARD]),
        // §10.9: for a subscription, a FETCH, a PUBLISH_NAMESPACE, a namespace prefix.
        request_update: UPDATE_SUBSCRIPTION.union(ParamSet::of(&[pt::TRACK_NAMESPACE_PREFIX])),
        // §10.5: PUBLISH_OK, REQUEST_UPDATE_OK (EXPIRES, LARGEST_OBJECT), TRACK_STATUS_OK.
        request_ok: PUBLISH_OK.union(ParamSet::of(&[pt::LARGEST_OBJECT])),
        fill_parameters: ParamSet::of(&[]),
    }
};

/// draft-22 (§16.7 Table 14; each message's list from its definition in §9.x, which agree
/// with the per-parameter lists in §9.20.x). draft-20 has the same table (§10.2, §15.7).
pub const D22: Tables = {
    const UPDATE_SUBSCRIPTION: ParamSet = with_ranges(ParamSet::of(&[
        pt::OBJECT_DELIVERY_TIMEOUT,
        pt::AUTHORIZATION_TOKEN,
        pt::SUBGROUP_DELIVERY_TIMEOUT,
        pt::FORWARD,
        pt::SUBSCRIBER_PRIORITY,
        pt::LOCATION_FILTER,
        pt::FILL_PARAMETERS,
        pt::NEW_GROUP_REQUEST,
    ]));
    let token = ParamSet::of(&[pt::AUTHORIZATION_TOKEN]);
    Tables {
        known: with_ranges(ParamSet::of(&[
            pt::OBJECT_DELIVERY_TIMEOUT,
            pt::AUTHORIZATION_TOKEN,
            pt::RENDEZVOUS_TIMEOUT,
            pt::SUBGROUP_DELIVERY_TIMEOUT,
            pt::EXPIRES,
            pt::LARGEST_OBJECT,
            pt::FILL_TIMEOUT,
            pt::FORWARD,
            pt::SUBSCRIBER_PRIORITY,
            pt::LOCATION_FILTER,
            pt::GROUP_ORDER,
            pt::FILL_PARAMETERS,
            pt::TRACK_PROPERTY_FILTER,
            pt::NEW_GROUP_REQUEST,
            pt::TRACK_NAMESPACE_PREFIX,
            pt::INCLUDE_PROPERTIES,
        ])),
        // §9.6.
        subscribe: UPDATE_SUBSCRIPTION.union(ParamSet::of(&[
            pt::RENDEZVOUS_TIMEOUT,
            pt::GROUP_ORDER,
            pt::INCLUDE_PROPERTIES,
        ])),
        // §9.7.
        subscribe_ok: ParamSet::of(&[pt::EXPIRES, pt::LARGEST_OBJECT]),
        // §9.8.
        publish: ParamSet::of(&[
            pt::OBJECT_DELIVERY_TIMEOUT,
            pt::AUTHORIZATION_TOKEN,
            pt::SUBGROUP_DELIVERY_TIMEOUT,
            pt::EXPIRES,
            pt::LARGEST_OBJECT,
            pt::FORWARD,
            pt::SUBSCRIBER_PRIORITY,
            pt::LOCATION_FILTER,
            pt::GROUP_ORDER,
        ]),
        // §9.3, answering PUBLISH.
        publish_ok: ParamSet::of(&[pt::EXPIRES]),
        // §9.10.
        publish_state_notify: ParamSet::of(&[pt::LARGEST_OBJECT, pt::FORWARD, pt::LOCATION_FILTER]),
        // §9.11.
        fetch: with_ranges(ParamSet::of(&[
            pt::AUTHORIZATION_TOKEN,
            pt::FILL_TIMEOUT,
            pt::SUBSCRIBER_PRIORITY,
            pt::LOCATION_FILTER,
            pt::GROUP_ORDER,
            pt::INCLUDE_PROPERTIES,
        ])),
        // §9.12: "No parameters are currently defined for FETCH_OK".
        fetch_ok: ParamSet::of(&[]),
        // §9.13.
        track_status: ParamSet::of(&[pt::AUTHORIZATION_TOKEN, pt::INCLUDE_PROPERTIES]),
        // §9.14, §9.15.
        publish_namespace: token,
        subscribe_namespace: token,
        // §9.18.
        subscribe_tracks: with_ranges(ParamSet::of(&[
            pt::AUTHORIZATION_TOKEN,
            pt::FORWARD,
            pt::GROUP_ORDER,
            pt::TRACK_PROPERTY_FILTER,
            pt::INCLUDE_PROPERTIES,
        ])),
        // §9.5: for a subscription, a FETCH (token, priority), a PUBLISH_NAMESPACE (token), a
        // SUBSCRIBE_NAMESPACE (token, prefix), a SUBSCRIBE_TRACKS (token, FORWARD, the track
        // property filter, prefix).
        request_update: UPDATE_SUBSCRIPTION
            .union(ParamSet::of(&[pt::TRACK_PROPERTY_FILTER, pt::TRACK_NAMESPACE_PREFIX])),
        // §9.3: the union over the request kinds REQUEST_OK answers.
        request_ok: ParamSet::of(&[pt::EXPIRES, pt::LARGEST_OBJECT]),
        // §9.20.15, Table 7.
        fill_parameters: with_ranges(ParamSet::of(&[
            pt::FILL_TIMEOUT,
            pt::SUBSCRIBER_PRIORITY,
            pt::LOCATION_FILTER,
            pt::GROUP_ORDER,
        ])),
    }
};

/// The parameter types present in `p`.
pub fn present(p: &Parameters) -> ParamSet {
    let mut s = ParamSet::default();
    let mut put = |on: bool, ty: u64| {
        if on {
            s.insert(ty)
        }
    };
    put(p.object_delivery_timeout.is_some(), pt::OBJECT_DELIVERY_TIMEOUT);
    put(!p.auth_tokens.is_empty(), pt::AUTHORIZATION_TOKEN);
    put(p.rendezvous_timeout.is_some(), pt::RENDEZVOUS_TIMEOUT);
    put(p.subgroup_delivery_timeout.is_some(), pt::SUBGROUP_DELIVERY_TIMEOUT);
    put(p.expires.is_some(), pt::EXPIRES);
    put(p.largest_object.is_some(), pt::LARGEST_OBJECT);
    put(p.fill_timeout.is_some(), pt::FILL_TIMEOUT);
    put(p.forward.is_some(), pt::FORWARD);
    put(p.subscriber_priority.is_some(), pt::SUBSCRIBER_PRIORITY);
    put(p.location_filter.is_some(), pt::LOCATION_FILTER);
    put(p.group_order.is_some(), pt::GROUP_ORDER);
    put(p.fill_parameters.is_some(), pt::FILL_PARAMETERS);
    for f in &p.range_filters {
        put(true, range_filter_type(f.kind));
    }
    put(p.new_group_request.is_some(), pt::NEW_GROUP_REQUEST);
    put(p.track_namespace_prefix.is_some(), pt::TRACK_NAMESPACE_PREFIX);
    put(p.include_properties.is_some(), pt::INCLUDE_PROPERTIES);
    s
}

/// Spec name of a parameter type, for encode errors.
pub const fn param_name(ty: u64) -> &'static str {
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
        pt::LOCATION_FILTER => "LOCATION_FILTER in this message",
        pt::GROUP_ORDER => "GROUP_ORDER in this message",
        pt::FILL_PARAMETERS => "FILL_PARAMETERS in this message",
        pt::SUBGROUP_FILTER => "SUBGROUP_FILTER in this message",
        pt::OBJECTID_FILTER => "OBJECTID_FILTER in this message",
        pt::PRIORITY_FILTER => "PRIORITY_FILTER in this message",
        pt::OBJECT_PROPERTY_FILTER => "OBJECT_PROPERTY_FILTER in this message",
        pt::TRACK_PROPERTY_FILTER => "TRACK_PROPERTY_FILTER in this message",
        pt::NEW_GROUP_REQUEST => "NEW_GROUP_REQUEST in this message",
        pt::TRACK_NAMESPACE_PREFIX => "TRACK_NAMESPACE_PREFIX in this message",
        pt::INCLUDE_PROPERTIES => "INCLUDE_PROPERTIES in this message",
        _ => "a parameter in this message",
    }
}

const fn range_filter_type(kind: RangeFilterKind) -> u64 {
    match kind {
        RangeFilterKind::SubgroupId => pt::SUBGROUP_FILTER,
        RangeFilterKind::ObjectId => pt::OBJECTID_FILTER,
        RangeFilterKind::Priority => pt::PRIORITY_FILTER,
        RangeFilterKind::ObjectProperty => pt::OBJECT_PROPERTY_FILTER,
        RangeFilterKind::TrackProperty => pt::TRACK_PROPERTY_FILTER,
    }
}

const RANGE_FILTER_KINDS: [RangeFilterKind; 5] = [
    RangeFilterKind::SubgroupId,
    RangeFilterKind::ObjectId,
    RangeFilterKind::Priority,
    RangeFilterKind::ObjectProperty,
    RangeFilterKind::TrackProperty,
];

// ---------------------------------------------------------------------------------------------
// Message Parameters: decoding
// ---------------------------------------------------------------------------------------------

/// Reads `Number of Parameters` and the parameters (draft-22 §9.20), accepting only types `d`
/// defines and `allowed` holds. Inside a control message body; a short body surfaces as
/// `NeedMore`, which the caller turns into a violation.
pub fn read_params(r: &mut R<'_>, d: &Dialect, allowed: ParamSet) -> Result<Parameters, DecodeError> {
    let n = r.count("message parameters")?;
    let mut p = Parameters::default();
    let mut prev: Option<u64> = None;
    for _ in 0..n {
        let delta = r.int()?;
        let ty = prev
            .unwrap_or(0)
            .checked_add(delta)
            .ok_or(DecodeError::violation("message parameter type overflows 2^64-1"))?;
        if !d.params.known.contains(ty) {
            return Err(DecodeError::violation("unknown message parameter"));
        }
        if !allowed.contains(ty) {
            return Err(DecodeError::violation("message parameter not allowed in this message"));
        }
        // Types are non-decreasing by construction, so a repeat is always the previous type.
        if prev == Some(ty) && !REPEATABLE.contains(ty) {
            return Err(DecodeError::violation("duplicate message parameter"));
        }
        read_value(r, d, ty, &mut p)?;
        prev = Some(ty);
    }
    Ok(p)
}

/// One parameter value of (known) type `ty`, stored into `p`.
fn read_value(r: &mut R<'_>, d: &Dialect, ty: u64, p: &mut Parameters) -> Result<(), DecodeError> {
    match ty {
        pt::OBJECT_DELIVERY_TIMEOUT => p.object_delivery_timeout = Some(r.int()?),
        pt::AUTHORIZATION_TOKEN => {
            let value = length_prefixed(r)?;
            p.auth_tokens.push(read_token::<Vi64>(value.rest())?);
        }
        pt::RENDEZVOUS_TIMEOUT => p.rendezvous_timeout = Some(r.int()?),
        pt::SUBGROUP_DELIVERY_TIMEOUT => p.subgroup_delivery_timeout = Some(r.int()?),
        pt::EXPIRES => p.expires = Some(r.int()?),
        pt::LARGEST_OBJECT if d.kvp_values => {
            let mut sub = length_prefixed(r)?;
            let l = read_location(&mut sub).map_err(|e| e.within_length("LARGEST_OBJECT too short"))?;
            sub.finish("LARGEST_OBJECT longer than a Location")?;
            p.largest_object = Some(l);
        }
        pt::LARGEST_OBJECT => p.largest_object = Some(read_location(r)?),
        pt::FILL_TIMEOUT => p.fill_timeout = Some(r.int()?),
        pt::FORWARD => p.forward = Some(read_small(r, d, 1, "FORWARD other than 0 or 1")? == 1),
        pt::SUBSCRIBER_PRIORITY => {
            p.subscriber_priority = Some(read_small(r, d, 255, "SUBSCRIBER_PRIORITY above 255")?)
        }
        pt::LOCATION_FILTER => p.location_filter = Some(read_filter_param(r, d.filter)?),
        pt::GROUP_ORDER => {
            let order = GroupOrder::from_code(u64::from(read_small(r, d, 255, "GROUP_ORDER above 255")?));
            p.group_order = Some(order.ok_or(DecodeError::violation("GROUP_ORDER other than 1 or 2"))?);
        }
        pt::FILL_PARAMETERS => {
            // §9.20.15: a separate scope with its own allowed set (Table 7), which does not
            // include FILL_PARAMETERS, so nesting is one level deep.
            let mut sub = length_prefixed(r)?;
            let fill = read_params(&mut sub, d, d.params.fill_parameters)?;
            sub.finish("FILL_PARAMETERS longer than its parameters")?;
            p.fill_parameters = Some(Box::new(fill));
        }
        pt::NEW_GROUP_REQUEST => p.new_group_request = Some(r.int()?),
        pt::TRACK_NAMESPACE_PREFIX if d.prefix_in_length => {
            let mut sub = length_prefixed(r)?;
            let ns = read_namespace(&mut sub, 0)
                .map_err(|e| e.within_length("TRACK_NAMESPACE_PREFIX too short"))?;
            sub.finish("TRACK_NAMESPACE_PREFIX longer than its namespace")?;
            p.track_namespace_prefix = Some(ns);
        }
        pt::TRACK_NAMESPACE_PREFIX => p.track_namespace_prefix = Some(read_namespace(r, 0)?),
        pt::INCLUDE_PROPERTIES => {
            p.include_properties = Some(read_small(r, d, 1, "INCLUDE_PROPERTIES other than 0 or 1")? == 1)
        }
        _ => {
            let kind = match ty {
                pt::SUBGROUP_FILTER => RangeFilterKind::SubgroupId,
                pt::OBJECTID_FILTER => RangeFilterKind::ObjectId,
                pt::PRIORITY_FILTER => RangeFilterKind::Priority,
                pt::OBJECT_PROPERTY_FILTER => RangeFilterKind::ObjectProperty,
                pt::TRACK_PROPERTY_FILTER => RangeFilterKind::TrackProperty,
                _ => return Err(DecodeError::violation("unknown message parameter")),
            };
            p.range_filters.push(read_range_filter(r, kind)?);
        }
    }
    Ok(())
}

/// A vi64 length and a sub-reader over that many bytes.
pub(crate) fn length_prefixed<'a>(r: &mut R<'a>) -> Result<R<'a>, DecodeError> {
    let len = usize::try_from(r.int()?).map_err(|_| DecodeError::violation("length exceeds the message"))?;
    r.sub(len)
}

/// A uint8 parameter value at most `max` (a varint where `d` writes values by the
/// Key-Value-Pair rule); a larger value is a PROTOCOL_VIOLATION.
fn read_small(r: &mut R<'_>, d: &Dialect, max: u8, what: &'static str) -> Result<u8, DecodeError> {
    let v = if d.kvp_values { r.int()? } else { u64::from(r.u8()?) };
    u8::try_from(v).ok().filter(|v| *v <= max).ok_or(DecodeError::violation(what))
}

/// The value of parameter 0x21 in the form `form` names.
fn read_filter_param(r: &mut R<'_>, form: FilterForm) -> Result<LocationFilter, DecodeError> {
    if form == FilterForm::Typed {
        return read_location_filter(r);
    }
    // A length-prefixed value that does not fill its length exactly is malformed.
    let mut sub = length_prefixed(r)?;
    let f = match form {
        FilterForm::Subscription => read_subscription_filter(&mut sub, EndGroup::Delta),
        _ => read_counted_filter(&mut sub),
    }
    .map_err(|e| e.within_length("filter parameter shorter than its fields"))?;
    sub.finish("filter parameter longer than its fields")?;
    Ok(f)
}

/// LOCATION_FILTER (§9.20.9): Location Filter Type, then the fields that type names.
/// EndGroupDelta is relative to StartGroup; the model holds the absolute end group.
///
/// Transcription note: the draft-22 figure has no Length before the type, while draft-19
/// (Filter Type inside a length-prefixed value) and the editor's copy (length-prefixed, no
/// type) both prefix a Length, and draft-22 §3.4 still speaks of a "zero-length"
/// LOCATION_FILTER. This follows the draft-22 figure; its "zero-length" filter is type 0x00.
pub fn read_location_filter(r: &mut R<'_>) -> Result<LocationFilter, DecodeError> {
    let add_delta = |start: Location, delta: u64| {
        start.group.checked_add(delta).ok_or(DecodeError::violation("StartGroup + EndGroupDelta overflows"))
    };
    Ok(match r.int()? {
        0x00 => LocationFilter::None,
        0x01 => LocationFilter::RelativeStart { groups_back: r.int()? },
        0x02 => LocationFilter::AbsoluteStart { start: read_location(r)? },
        0x03 => {
            let start = read_location(r)?;
            let end_group = add_delta(start, r.int()?)?;
            LocationFilter::AbsoluteStartGroupEnd { start, end_group }
        }
        0x04 => {
            let start = read_location(r)?;
            let group = add_delta(start, r.int()?)?;
            LocationFilter::AbsoluteRange { start, end: Location { group, object: r.int()? } }
        }
        0x05 => LocationFilter::NextObject,
        _ => return Err(DecodeError::violation("unknown Location Filter Type")),
    })
}

/// A draft-20 Location Filter (§5.1.2), the fields filling its length: none (unfiltered,
/// [`LocationFilter::None`]),
/// `[StartGroupDelta]` (relative: that many groups back), `[StartGroup, StartObject]` (from a
/// Location; `{0, 0}` is the next object), `[.., EndGroupDelta]` (to the end of a group),
/// `[.., EndObject]` (to an object). A fifth field is a PROTOCOL_VIOLATION.
fn read_counted_filter(r: &mut R<'_>) -> Result<LocationFilter, DecodeError> {
    let mut f = [0u64; 4];
    let mut n = 0;
    while !r.is_empty() {
        if n == f.len() {
            return Err(DecodeError::violation("Location Filter with more than four fields"));
        }
        f[n] = r.int()?;
        n += 1;
    }
    let start = Location { group: f[0], object: f[1] };
    let end_group = || {
        start.group.checked_add(f[2]).ok_or(DecodeError::violation("StartGroup + EndGroupDelta overflows"))
    };
    Ok(match n {
        0 => LocationFilter::None,
        1 => LocationFilter::RelativeStart { groups_back: f[0] },
        2 if f[..2] == [0, 0] => LocationFilter::NextObject,
        2 => LocationFilter::AbsoluteStart { start },
        3 => LocationFilter::AbsoluteStartGroupEnd { start, end_group: end_group()? },
        _ => LocationFilter::AbsoluteRange { start, end: Location { group: end_group()?, object: f[3] } },
    })
}

/// A range filter (§8.6, §9.20.10-14): Length, then (when non-zero) SetID (8), the Property
/// Type for the property filters, and delta-encoded Ranges filling the rest.
fn read_range_filter(r: &mut R<'_>, kind: RangeFilterKind) -> Result<RangeFilter, DecodeError> {
    let mut sub = length_prefixed(r)?;
    if sub.is_empty() {
        return Ok(RangeFilter { kind, set: None });
    }
    let set_id = sub.u8()?;
    let property_type = match kind {
        RangeFilterKind::ObjectProperty | RangeFilterKind::TrackProperty => Some(sub.int()?),
        _ => None,
    };
    // §8.6: each Start is a delta from the previous End (0 at first), each End a delta from its
    // Start; an End is present unless the Range is the last one (the Length runs out after
    // its Start). An overflow should be INVALID_FILTER, which a codec cannot send and the
    // model cannot hold: it is a PROTOCOL_VIOLATION here (see the module doc).
    let overflow = || DecodeError::violation("range filter delta overflows 2^64-1");
    let mut ranges = Vec::new();
    let mut prev_end = 0u64;
    while !sub.is_empty() {
        let start = prev_end.checked_add(sub.int()?).ok_or_else(overflow)?;
        if sub.is_empty() {
            ranges.push(Range { start, end: None });
            break;
        }
        let end = start.checked_add(sub.int()?).ok_or_else(overflow)?;
        ranges.push(Range { start, end: Some(end) });
        prev_end = end;
    }
    Ok(RangeFilter { kind, set: Some(RangeSet { set_id, property_type, ranges }) })
}

// ---------------------------------------------------------------------------------------------
// Message Parameters: encoding
// ---------------------------------------------------------------------------------------------

/// Writes `Number of Parameters` and the parameters of `p` in ascending type order (range
/// filters are grouped by type, keeping their relative order within a type), each in `d`'s
/// form. Fails with `Unsupported` when `p` holds a parameter outside `allowed`, or a filter
/// `d` cannot write, leaving `w` untouched.
pub fn write_params(
    w: &mut W<'_>,
    d: &Dialect,
    p: &Parameters,
    allowed: ParamSet,
) -> Result<(), EncodeError> {
    if let Some(ty) = present(p).first_outside(allowed) {
        return Err(EncodeError::Unsupported(param_name(ty)));
    }
    // The filter first: a failure must leave `w` untouched.
    let filter = p.location_filter.map(|f| encode_filter(d.filter, &f)).transpose()?;
    w.int(count(p) as u64)?;
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
        let w = pw.ty(pt::LARGEST_OBJECT)?;
        if d.kvp_values {
            w.with_len_prefix(|w| write_location(w, v))?;
        } else {
            write_location(w, v)?;
        }
    }
    if let Some(v) = p.fill_timeout {
        pw.ty(pt::FILL_TIMEOUT)?.int(v)?;
    }
    if let Some(v) = p.forward {
        write_small(pw.ty(pt::FORWARD)?, d, u8::from(v))?;
    }
    if let Some(v) = p.subscriber_priority {
        write_small(pw.ty(pt::SUBSCRIBER_PRIORITY)?, d, v)?;
    }
    if let Some(v) = &filter {
        pw.ty(pt::LOCATION_FILTER)?.bytes(v);
    }
    if let Some(v) = p.group_order {
        write_small(pw.ty(pt::GROUP_ORDER)?, d, v.code() as u8)?;
    }
    if let Some(fill) = &p.fill_parameters {
        pw.ty(pt::FILL_PARAMETERS)?
            .with_len_prefix(|w| write_params(w, d, fill, d.params.fill_parameters))?;
    }
    for kind in RANGE_FILTER_KINDS {
        for f in p.range_filters.iter().filter(|f| f.kind == kind) {
            write_range_filter(pw.ty(range_filter_type(kind))?, f)?;
        }
    }
    if let Some(v) = p.new_group_request {
        pw.ty(pt::NEW_GROUP_REQUEST)?.int(v)?;
    }
    if let Some(ns) = &p.track_namespace_prefix {
        let w = pw.ty(pt::TRACK_NAMESPACE_PREFIX)?;
        if d.prefix_in_length {
            w.with_len_prefix(|w| write_namespace(w, ns))?;
        } else {
            write_namespace(w, ns)?;
        }
    }
    if let Some(v) = p.include_properties {
        pw.ty(pt::INCLUDE_PROPERTIES)?.u8(u8::from(v));
    }
    Ok(())
}

/// A uint8 parameter value (a varint where `d` writes values by the Key-Value-Pair rule).
fn write_small(w: &mut W<'_>, d: &Dialect, v: u8) -> Result<(), EncodeError> {
    if d.kvp_values {
        w.int(u64::from(v))
    } else {
        w.u8(v);
        Ok(())
    }
}

/// Number of parameters `p` puts on the wire.
fn count(p: &Parameters) -> usize {
    let singles = [
        p.object_delivery_timeout.is_some(),
        p.rendezvous_timeout.is_some(),
        p.subgroup_delivery_timeout.is_some(),
        p.expires.is_some(),
        p.largest_object.is_some(),
        p.fill_timeout.is_some(),
        p.forward.is_some(),
        p.subscriber_priority.is_some(),
        p.location_filter.is_some(),
        p.group_order.is_some(),
        p.fill_parameters.is_some(),
        p.new_group_request.is_some(),
        p.track_namespace_prefix.is_some(),
        p.include_properties.is_some(),
    ];
    singles.iter().filter(|b| **b).count() + p.auth_tokens.len() + p.range_filters.len()
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

/// The whole value of parameter 0x21 for `f` in `form` (its Length included where the form
/// has one).
fn encode_filter(form: FilterForm, f: &LocationFilter) -> Result<Vec<u8>, EncodeError> {
    let mut v = Vec::new();
    let mut w = Writer::<Vi64>::new(&mut v);
    match form {
        FilterForm::Typed => write_location_filter(&mut w, f)?,
        FilterForm::Subscription => {
            w.with_len_prefix(|w| write_subscription_filter(w, *f, EndGroup::Delta))?
        }
        FilterForm::Counted => w.with_len_prefix(|w| write_counted_filter(w, f))?,
    }
    Ok(v)
}

/// The fields of a draft-20 Location Filter (§5.1.2; see [`read_counted_filter`]). An open
/// filter from {0, 0} is written as no fields, since two zeros mean the next object; it
/// selects what "unfiltered" selects.
fn write_counted_filter(w: &mut W<'_>, f: &LocationFilter) -> Result<(), EncodeError> {
    match *f {
        LocationFilter::None => Ok(()),
        LocationFilter::AbsoluteStart { start: Location { group: 0, object: 0 } } => Ok(()),
        LocationFilter::RelativeStart { groups_back } => w.int(groups_back),
        LocationFilter::NextObject => {
            w.int(0)?;
            w.int(0)
        }
        LocationFilter::AbsoluteStart { start } => write_location(w, start),
        LocationFilter::AbsoluteStartGroupEnd { start, end_group } => {
            write_location(w, start)?;
            w.int(end_group_delta(start, end_group)?)
        }
        LocationFilter::AbsoluteRange { start, end } => {
            write_location(w, start)?;
            w.int(end_group_delta(start, end.group)?)?;
            w.int(end.object)
        }
    }
}

/// EndGroupDelta: `end_group` relative to the start's group (not before it).
fn end_group_delta(start: Location, end_group: u64) -> Result<u64, EncodeError> {
    end_group
        .checked_sub(start.group)
        .ok_or(EncodeError::OutOfRange("location filter ends before its start group"))
}

/// LOCATION_FILTER value (§9.20.9). An end group before the start group has no EndGroupDelta.
pub fn write_location_filter(w: &mut W<'_>, f: &LocationFilter) -> Result<(), EncodeError> {
    let delta = end_group_delta;
    match *f {
        LocationFilter::None => w.int(0x00),
        LocationFilter::RelativeStart { groups_back } => {
            w.int(0x01)?;
            w.int(groups_back)
        }
        LocationFilter::AbsoluteStart { start } => {
            w.int(0x02)?;
            write_location(w, start)
        }
        LocationFilter::AbsoluteStartGroupEnd { start, end_group } => {
            let d = delta(start, end_group)?;
            w.int(0x03)?;
            write_location(w, start)?;
            w.int(d)
        }
        LocationFilter::AbsoluteRange { start, end } => {
            let d = delta(start, end.group)?;
            w.int(0x04)?;
            write_location(w, start)?;
            w.int(d)?;
            w.int(end.object)
        }
        LocationFilter::NextObject => w.int(0x05),
    }
}

/// A range filter value (§8.6): Length, SetID, [Property Type], delta-encoded Ranges.
fn write_range_filter(w: &mut W<'_>, f: &RangeFilter) -> Result<(), EncodeError> {
    let Some(set) = &f.set else {
        return w.int(0);
    };
    let wants_property = matches!(f.kind, RangeFilterKind::ObjectProperty | RangeFilterKind::TrackProperty);
    if wants_property != set.property_type.is_some() {
        return Err(EncodeError::OutOfRange("property type present exactly in the property filters"));
    }
    w.with_len_prefix(|w| {
        w.u8(set.set_id);
        if let Some(t) = set.property_type {
            w.int(t)?;
        }
        let mut prev_end = 0u64;
        for (i, range) in set.ranges.iter().enumerate() {
            let start_delta =
                range.start.checked_sub(prev_end).ok_or(EncodeError::OutOfRange("ranges not ascending"))?;
            w.int(start_delta)?;
            match range.end {
                Some(end) => {
                    w.int(
                        end.checked_sub(range.start)
                            .ok_or(EncodeError::OutOfRange("range ends before start"))?,
                    )?;
                    prev_end = end;
                }
                None if i + 1 == set.ranges.len() => {}
                None => return Err(EncodeError::OutOfRange("open-ended range before the last")),
            }
        }
        Ok(())
    })
}

// ---------------------------------------------------------------------------------------------
// Setup Options (§9.1)
// ---------------------------------------------------------------------------------------------

/// Setup Options spanning all of `r` (the SETUP body). `from_client`: the sender is the client,
/// whose AUTHORIZATION TOKEN options may not DELETE or USE_ALIAS (§9.1.4).
pub fn read_setup_options(
    r: &mut R<'_>,
    d: &Dialect,
    from_client: bool,
) -> Result<SetupOptions, DecodeError> {
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
            (st::MAX_FILTER_RANGES, KvValue::Int(v)) if d.limit_options => {
                set_once(&mut o.max_filter_ranges, v)?
            }
            (st::MOQT_IMPLEMENTATION, KvValue::Bytes(b)) => set_once(&mut o.implementation, b)?,
            (st::MAX_REQUEST_UPDATES, KvValue::Int(v)) if d.limit_options => {
                set_once(&mut o.max_request_updates, v)?
            }
            // Unknown (draft-16's MAX_REQUEST_ID, 0x02; draft-18 also knows neither limit
            // option): kept, duplicates allowed.
            (ty, value) => o.unknown.push((ty, value)),
        }
    }
    Ok(o)
}

/// Stores a non-repeatable option; a second instance is a PROTOCOL_VIOLATION (§9.1).
pub(crate) fn set_once<T>(slot: &mut Option<T>, v: T) -> Result<(), DecodeError> {
    if slot.is_some() {
        return Err(DecodeError::violation("duplicate setup option"));
    }
    *slot = Some(v);
    Ok(())
}

/// True for the option types `d` defines (all but draft-16's MAX_REQUEST_ID; draft-18 lacks
/// the two limits).
const fn is_known_option(d: &Dialect, ty: u64) -> bool {
    match ty {
        st::PATH | st::AUTHORIZATION_TOKEN | st::MAX_AUTH_TOKEN_CACHE_SIZE | st::AUTHORITY => true,
        st::MOQT_IMPLEMENTATION => true,
        st::MAX_FILTER_RANGES | st::MAX_REQUEST_UPDATES => d.limit_options,
        _ => false,
    }
}

/// Writes the Setup Options in ascending type order (unknown options merged in by type,
/// keeping their relative order). `from_client` applies the §9.1.4 token rule.
pub fn write_setup_options(
    w: &mut W<'_>,
    d: &Dialect,
    o: &SetupOptions,
    from_client: bool,
) -> Result<(), EncodeError> {
    if o.max_request_id.is_some() {
        return Err(EncodeError::Unsupported("MAX_REQUEST_ID setup option"));
    }
    if !d.limit_options && o.max_filter_ranges.is_some() {
        return Err(EncodeError::Unsupported("MAX_FILTER_RANGES setup option"));
    }
    if !d.limit_options && o.max_request_updates.is_some() {
        return Err(EncodeError::Unsupported("MAX_REQUEST_UPDATES setup option"));
    }
    if o.unknown.iter().any(|(ty, _)| is_known_option(d, *ty)) {
        return Err(EncodeError::OutOfRange("unknown setup option with a known type"));
    }
    if from_client
        && o.auth_tokens.iter().any(|t| matches!(t, AuthToken::Delete { .. } | AuthToken::UseAlias { .. }))
    {
        return Err(EncodeError::OutOfRange("DELETE or USE_ALIAS token in a client SETUP"));
    }
    let mut known: Vec<(u64, KvValue)> = Vec::new();
    let mut bytes = |ty: u64, v: &Option<Bytes>| {
        if let Some(b) = v {
            known.push((ty, KvValue::Bytes(b.clone())));
        }
    };
    bytes(st::PATH, &o.path);
    bytes(st::AUTHORITY, &o.authority);
    bytes(st::MOQT_IMPLEMENTATION, &o.implementation);
    for (ty, v) in [
        (st::MAX_AUTH_TOKEN_CACHE_SIZE, o.max_auth_token_cache_size),
        (st::MAX_FILTER_RANGES, o.max_filter_ranges),
        (st::MAX_REQUEST_UPDATES, o.max_request_updates),
    ] {
        if let Some(v) = v {
            known.push((ty, KvValue::Int(v)));
        }
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
