//! draft-22 control message and parameter codec: round trips of every message, truncation at
//! every byte, arbitrary input, the per-message parameter tables, every error path with its
//! exact code, and hand-written vectors checked against the spec layout.

mod support;

use bytes::Bytes;
use proptest::collection::vec;
use proptest::option::of as opt;
use proptest::prelude::*;
use proptest::strategy::Union;
use support::strategies::*;
use support::vi64::B;
use wire::control::{message_type as mt, REDIRECT};
use wire::dialect::{D20, D22};
use wire::model::*;
use wire::params;
use wire::{DecodeError, EncodeError, ErrorCode, VarInt, Vi64};

/// The shared request-stream codec at this draft.
fn encode_message(m: &Message, out: &mut Vec<u8>) -> Result<(), EncodeError> {
    wire::control::encode_message(&D22, m, out)
}

fn decode_message(buf: &[u8], ctx: &DecodeContext) -> Result<(Message, usize), DecodeError> {
    wire::control::decode_message(&D22, buf, ctx)
}

/// Parameter lists copied by hand from the message definitions of draft-22 (§9.x, §9.20.15),
/// independent of the codec's own tables.
mod spec {
    pub const SUBSCRIBE: &[u64] =
        &[0x02, 0x03, 0x04, 0x06, 0x10, 0x20, 0x21, 0x22, 0x23, 0x25, 0x26, 0x27, 0x28, 0x32, 0x35];
    pub const SUBSCRIBE_OK: &[u64] = &[0x08, 0x09];
    pub const PUBLISH: &[u64] = &[0x02, 0x03, 0x06, 0x08, 0x09, 0x10, 0x20, 0x21, 0x22];
    pub const PUBLISH_STATE_NOTIFY: &[u64] = &[0x09, 0x10, 0x21];
    pub const FETCH: &[u64] = &[0x03, 0x0A, 0x20, 0x21, 0x22, 0x25, 0x26, 0x27, 0x28, 0x35];
    pub const FETCH_OK: &[u64] = &[];
    pub const TRACK_STATUS: &[u64] = &[0x03, 0x35];
    pub const PUBLISH_NAMESPACE: &[u64] = &[0x03];
    pub const SUBSCRIBE_NAMESPACE: &[u64] = &[0x03];
    pub const SUBSCRIBE_TRACKS: &[u64] = &[0x03, 0x10, 0x22, 0x25, 0x26, 0x27, 0x28, 0x29, 0x35];
    /// Union of the five lists of §9.5.
    pub const REQUEST_UPDATE: &[u64] =
        &[0x02, 0x03, 0x06, 0x10, 0x20, 0x21, 0x23, 0x25, 0x26, 0x27, 0x28, 0x29, 0x32, 0x34];
    /// Union of the lists of §9.3.
    pub const REQUEST_OK: &[u64] = &[0x08, 0x09];
    /// §9.3, the PUBLISH_OK row.
    pub const PUBLISH_OK: &[u64] = &[0x08];
    /// Table 7.
    pub const FILL: &[u64] = &[0x0A, 0x20, 0x21, 0x22, 0x25, 0x26, 0x27, 0x28];
    /// Table 14.
    pub const ALL: &[u64] = &[
        0x02, 0x03, 0x04, 0x06, 0x08, 0x09, 0x0A, 0x10, 0x20, 0x21, 0x22, 0x23, 0x25, 0x26, 0x27, 0x28, 0x29,
        0x32, 0x34, 0x35,
    ];
}

// ---------------------------------------------------------------- byte builders

// ---------------------------------------------------------------- helpers

const CLIENT_CTL: DecodeContext = DecodeContext::control(Role::Client);
const SERVER_CTL: DecodeContext = DecodeContext::control(Role::Server);
const CLIENT_REQ: DecodeContext = DecodeContext::request(Role::Client, RequestId(4));
const SERVER_REQ: DecodeContext = DecodeContext::request(Role::Server, RequestId(4));

fn encode(msg: &Message) -> Vec<u8> {
    let mut out = Vec::new();
    encode_message(msg, &mut out).expect("encodable message");
    out
}

fn decode(buf: &[u8], ctx: &DecodeContext) -> Result<(Message, usize), DecodeError> {
    decode_message(buf, ctx)
}

#[track_caller]
fn assert_code(r: Result<(Message, usize), DecodeError>, code: ErrorCode) {
    match r {
        Err(DecodeError::Invalid { code: c, .. }) => assert_eq!(c, code, "wrong error code"),
        other => panic!("expected {code:?}, got {other:?}"),
    }
}

#[track_caller]
fn assert_violation(r: Result<(Message, usize), DecodeError>) {
    assert_code(r, ErrorCode::ProtocolViolation)
}

#[track_caller]
fn assert_unsupported(msg: &Message) {
    let mut out = Vec::new();
    assert!(matches!(encode_message(msg, &mut out), Err(EncodeError::Unsupported(_))), "{msg:?}");
    assert!(out.is_empty(), "a failed encode must not write");
}

#[track_caller]
fn assert_out_of_range(msg: &Message) {
    let mut out = Vec::new();
    assert!(matches!(encode_message(msg, &mut out), Err(EncodeError::OutOfRange(_))), "{msg:?}");
}

fn track(ns: &[&str], name: &str) -> FullTrackName {
    FullTrackName { namespace: TrackNamespace::from_strs(ns), name: Bytes::copy_from_slice(name.as_bytes()) }
}

fn subscribe(params: Parameters) -> Message {
    Message::Subscribe(Subscribe { request_id: RequestId(2), track: track(&["a"], "b"), params })
}

/// Parameters encoded by the codec's parameter writer, with no allowed-set restriction.
fn param_bytes(p: &Parameters) -> Vec<u8> {
    let mut out = Vec::new();
    let all = params::ParamSet::of(spec::ALL);
    params::write_params(&mut wire::codec::Writer::<Vi64>::new(&mut out), &D22, p, all)
        .expect("encodable parameters");
    out
}

// ---------------------------------------------------------------- strategies

/// Any u64, boxed (see [`location_filter`] on stack use).
fn int() -> BoxedStrategy<u64> {
    int64().boxed()
}

fn rid() -> impl Strategy<Value = RequestId> {
    int().prop_map(RequestId)
}

/// A Full Track Name; draft-22 namespaces may have zero fields (§2.4.1).
fn ftn() -> impl Strategy<Value = FullTrackName> {
    (namespace(0, 6), bytes(32)).prop_map(|(namespace, name)| FullTrackName { namespace, name })
}

fn sorted2() -> impl Strategy<Value = (u64, u64)> {
    (int(), int()).prop_map(|(a, b)| (a.min(b), a.max(b)))
}

/// Every Location Filter type (§9.20.9).
fn location_filter() -> BoxedStrategy<LocationFilter> {
    // A Union of boxed arms: proptest's inline TupleUnion makes very large stack frames in
    // debug builds, and these strategies nest deeply.
    Union::new(vec![
        Just(LocationFilter::None).boxed(),
        int().prop_map(|groups_back| LocationFilter::RelativeStart { groups_back }).boxed(),
        location(int()).prop_map(|start| LocationFilter::AbsoluteStart { start }).boxed(),
        (sorted2(), int())
            .prop_map(|((g, end_group), object)| LocationFilter::AbsoluteStartGroupEnd {
                start: Location::new(g, object),
                end_group,
            })
            .boxed(),
        (sorted2(), int(), int())
            .prop_map(|((g1, g2), o1, o2)| LocationFilter::AbsoluteRange {
                start: Location::new(g1, o1),
                end: Location::new(g2, o2),
            })
            .boxed(),
        Just(LocationFilter::NextObject).boxed(),
    ])
    .boxed()
}

fn range_kind() -> impl Strategy<Value = RangeFilterKind> {
    prop::sample::select(vec![
        RangeFilterKind::SubgroupId,
        RangeFilterKind::ObjectId,
        RangeFilterKind::Priority,
        RangeFilterKind::ObjectProperty,
        RangeFilterKind::TrackProperty,
    ])
}

const fn kind_type(k: RangeFilterKind) -> u64 {
    match k {
        RangeFilterKind::SubgroupId => 0x25,
        RangeFilterKind::ObjectId => 0x26,
        RangeFilterKind::Priority => 0x27,
        RangeFilterKind::ObjectProperty => 0x28,
        RangeFilterKind::TrackProperty => 0x29,
    }
}

/// A range filter of any kind: zero-length, or a SetID, a Property Type for the property
/// filters, and ascending ranges whose last one may be open-ended.
fn range_filter() -> impl Strategy<Value = RangeFilter> {
    (range_kind(), any::<u8>(), int(), vec(int(), 0..7), 0..5u8).prop_map(
        |(kind, set_id, pty, mut vals, z)| {
            if z == 0 {
                return RangeFilter { kind, set: None };
            }
            vals.sort_unstable();
            let ranges = vals.chunks(2).map(|c| Range { start: c[0], end: c.get(1).copied() }).collect();
            let property_type =
                matches!(kind, RangeFilterKind::ObjectProperty | RangeFilterKind::TrackProperty)
                    .then_some(pty);
            RangeFilter { kind, set: Some(RangeSet { set_id, property_type, ranges }) }
        },
    )
}

fn group_order() -> impl Strategy<Value = GroupOrder> {
    prop::sample::select(vec![GroupOrder::Ascending, GroupOrder::Descending])
}

/// Clears every parameter `allowed` does not list, and orders range filters by type as the
/// wire does.
fn restrict(p: &mut Parameters, allowed: &[u64]) {
    let a = |t: u64| allowed.contains(&t);
    macro_rules! keep {
        ($field:ident, $ty:expr) => {
            if !a($ty) {
                p.$field = Default::default();
            }
        };
    }
    keep!(object_delivery_timeout, 0x02);
    keep!(auth_tokens, 0x03);
    keep!(rendezvous_timeout, 0x04);
    keep!(subgroup_delivery_timeout, 0x06);
    keep!(expires, 0x08);
    keep!(largest_object, 0x09);
    keep!(fill_timeout, 0x0A);
    keep!(forward, 0x10);
    keep!(subscriber_priority, 0x20);
    keep!(location_filter, 0x21);
    keep!(group_order, 0x22);
    keep!(fill_parameters, 0x23);
    keep!(new_group_request, 0x32);
    keep!(track_namespace_prefix, 0x34);
    keep!(include_properties, 0x35);
    p.range_filters.retain(|f| a(kind_type(f.kind)));
    p.range_filters.sort_by_key(|f| kind_type(f.kind));
}

/// Parameters drawn from exactly what `allowed` lists (FILL_PARAMETERS nests Table 7's set).
fn params(allowed: &'static [u64]) -> BoxedStrategy<Parameters> {
    let fill = if allowed.contains(&0x23) { opt(params(spec::FILL)).boxed() } else { Just(None).boxed() };
    let a = (
        opt(int()).boxed(),
        vec(auth_token(int()), 0..3).boxed(),
        opt(int()).boxed(),
        opt(int()).boxed(),
        opt(int()).boxed(),
        opt(location(int())).boxed(),
        opt(int()).boxed(),
        opt(any::<bool>()).boxed(),
        opt(any::<u8>()).boxed(),
        opt(location_filter()).boxed(),
        opt(group_order()).boxed(),
    );
    let b = (
        fill,
        vec(range_filter().boxed(), 0..5).boxed(),
        opt(int()).boxed(),
        opt(namespace(0, 4)).boxed(),
        opt(any::<bool>()).boxed(),
    );
    (a, b)
        .prop_map(move |(a, b)| {
            let mut p = Parameters {
                object_delivery_timeout: a.0,
                auth_tokens: a.1,
                rendezvous_timeout: a.2,
                subgroup_delivery_timeout: a.3,
                expires: a.4,
                largest_object: a.5,
                fill_timeout: a.6,
                forward: a.7,
                subscriber_priority: a.8,
                location_filter: a.9,
                group_order: a.10,
                fill_parameters: b.0.map(Box::new),
                range_filters: b.1,
                new_group_request: b.2,
                track_namespace_prefix: b.3,
                include_properties: b.4,
            };
            restrict(&mut p, allowed);
            p
        })
        .boxed()
}

fn role() -> impl Strategy<Value = Role> {
    prop_oneof![Just(Role::Client), Just(Role::Server)]
}

/// A request stream with any sender and Request ID.
fn req_ctx() -> impl Strategy<Value = DecodeContext> {
    (role(), rid()).prop_map(|(r, id)| DecodeContext::request(r, id))
}

/// The control stream or a request stream.
fn any_ctx() -> impl Strategy<Value = DecodeContext> {
    (role(), opt(rid())).prop_map(|(sender, request_id)| DecodeContext { sender, request_id })
}

/// Setup Options a SETUP from `client` may carry; unknown options (never a draft-22 type)
/// in ascending type order, possibly repeated.
fn setup_options(client: bool) -> impl Strategy<Value = SetupOptions> {
    let token = auth_token(int()).prop_filter("client SETUP cannot DELETE or USE_ALIAS", move |t| {
        !client || matches!(t, AuthToken::Register { .. } | AuthToken::UseValue { .. })
    });
    let unknown_ty = prop_oneof![Just(0x02u64), 0x09..0x80u64, 0x9Du64..0x4000, int()]
        .prop_filter("not a draft-22 option type", |t| *t == 0x02 || !(0x01..=0x08).contains(t));
    let unknown = vec(unknown_ty.prop_flat_map(|t| (Just(t), kv_for(t, int()))), 0..4);
    (
        (opt(bytes(20)), vec(token, 0..3), opt(int()), opt(bytes(20))),
        (opt(int()), opt(bytes(20)), opt(int()), unknown),
    )
        .prop_map(
            |((path, auth_tokens, cache, authority), (ranges, implementation, updates, mut unknown))| {
                unknown.sort_by_key(|(t, _)| *t);
                SetupOptions {
                    path,
                    max_request_id: None,
                    auth_tokens,
                    max_auth_token_cache_size: cache,
                    authority,
                    max_filter_ranges: ranges,
                    implementation,
                    max_request_updates: updates,
                    unknown,
                    ..SetupOptions::default()
                }
            },
        )
}

type Case = (Message, DecodeContext);

/// Every message draft-22 supports, with the context it decodes in. Responses take their
/// Request ID from the stream, so the model's ID is the context's.
fn message() -> impl Strategy<Value = Case> {
    let id_of = |c: &DecodeContext| c.request_id.unwrap_or_default();
    let arms: Vec<BoxedStrategy<Case>> = vec![
        setup_options(true).prop_map(|options| (Message::ClientSetup(Setup { options }), CLIENT_CTL)).boxed(),
        setup_options(false)
            .prop_map(|options| (Message::ServerSetup(Setup { options }), SERVER_CTL))
            .boxed(),
        (any_ctx(), bytes(64), int())
            .prop_map(|(ctx, uri, timeout_ms)| {
                let new_session_uri = if ctx.sender == Role::Client { Bytes::new() } else { uri };
                (Message::GoAway(GoAway { new_session_uri, timeout_ms, request_id: None }), ctx)
            })
            .boxed(),
        (any_ctx(), rid(), ftn(), params(spec::SUBSCRIBE))
            .prop_map(|(ctx, request_id, track, params)| {
                (Message::Subscribe(Subscribe { request_id, track, params }), ctx)
            })
            .boxed(),
        (any_ctx(), rid(), ftn(), params(spec::TRACK_STATUS))
            .prop_map(|(ctx, request_id, track, params)| {
                (Message::TrackStatus(Subscribe { request_id, track, params }), ctx)
            })
            .boxed(),
        (req_ctx(), int(), params(spec::SUBSCRIBE_OK), properties(int()))
            .prop_map(move |(ctx, alias, params, track_properties)| {
                let m = SubscribeOk {
                    request_id: id_of(&ctx),
                    track_alias: TrackAlias(alias),
                    params,
                    track_properties,
                };
                (Message::SubscribeOk(m), ctx)
            })
            .boxed(),
        (req_ctx(), rid(), params(spec::REQUEST_UPDATE))
            .prop_map(move |(ctx, request_id, params)| {
                let m = RequestUpdate { request_id, existing_request_id: id_of(&ctx), params };
                (Message::RequestUpdate(m), ctx)
            })
            .boxed(),
        (any_ctx(), rid(), ftn(), int(), params(spec::PUBLISH), properties(int()))
            .prop_map(|(ctx, request_id, track, alias, params, track_properties)| {
                let m =
                    Publish { request_id, track, track_alias: TrackAlias(alias), params, track_properties };
                (Message::Publish(m), ctx)
            })
            .boxed(),
        (req_ctx(), int(), int(), bytes(64))
            .prop_map(move |(ctx, status_code, stream_count, reason)| {
                let m = PublishDone { request_id: id_of(&ctx), status_code, stream_count, reason };
                (Message::PublishDone(m), ctx)
            })
            .boxed(),
        (req_ctx(), params(spec::PUBLISH_STATE_NOTIFY))
            .prop_map(move |(ctx, params)| {
                (Message::PublishStateNotify(PublishStateNotify { request_id: id_of(&ctx), params }), ctx)
            })
            .boxed(),
        (any_ctx(), rid(), ftn(), params(spec::FETCH))
            .prop_map(|(ctx, request_id, track, params)| {
                (Message::Fetch(Fetch { request_id, kind: FetchKind::Standalone { track }, params }), ctx)
            })
            .boxed(),
        (req_ctx(), any::<bool>(), location(int()), params(spec::FETCH_OK), properties(int()))
            .prop_map(move |(ctx, end_of_track, end, params, track_properties)| {
                let m = FetchOk {
                    request_id: id_of(&ctx),
                    end_of_track,
                    end_location: FetchEnd::Object(end),
                    params,
                    track_properties,
                };
                (Message::FetchOk(m), ctx)
            })
            .boxed(),
        (any_ctx(), rid(), namespace(0, 6), params(spec::PUBLISH_NAMESPACE))
            .prop_map(|(ctx, request_id, namespace, params)| {
                (Message::PublishNamespace(PublishNamespace { request_id, namespace, params }), ctx)
            })
            .boxed(),
        (any_ctx(), rid(), namespace(0, 6), params(spec::SUBSCRIBE_NAMESPACE))
            .prop_map(|(ctx, request_id, prefix, params)| {
                let m =
                    SubscribeNamespace { request_id, prefix, options: SubscribeOptions::Namespace, params };
                (Message::SubscribeNamespace(m), ctx)
            })
            .boxed(),
        (any_ctx(), rid(), namespace(0, 6), params(spec::SUBSCRIBE_TRACKS))
            .prop_map(|(ctx, request_id, prefix, params)| {
                (Message::SubscribeTracks(SubscribeTracks { request_id, prefix, params }), ctx)
            })
            .boxed(),
        (req_ctx(), namespace(0, 6)).prop_map(|(ctx, ns)| (Message::Namespace(ns), ctx)).boxed(),
        (req_ctx(), namespace(0, 6)).prop_map(|(ctx, ns)| (Message::NamespaceDone(ns), ctx)).boxed(),
        (req_ctx(), namespace(0, 6), bytes(32))
            .prop_map(move |(ctx, namespace_suffix, track_name)| {
                let m = PublishSkipped { request_id: id_of(&ctx), namespace_suffix, track_name };
                (Message::PublishSkipped(m), ctx)
            })
            .boxed(),
        (req_ctx(), params(spec::REQUEST_OK), properties(int()))
            .prop_map(move |(ctx, params, track_properties)| {
                (Message::RequestOk(RequestOk { request_id: id_of(&ctx), params, track_properties }), ctx)
            })
            .boxed(),
        (req_ctx(), int(), int(), bytes(64), bytes(40), ftn(), any::<bool>())
            .prop_map(move |(ctx, code, retry_interval, reason, uri, track, redirect)| {
                let (error_code, redirect) = if redirect {
                    let connect_uri = if ctx.sender == Role::Client { Bytes::new() } else { uri };
                    (REDIRECT, Some(Redirect { connect_uri, track }))
                } else {
                    (if code == REDIRECT { 0 } else { code }, None)
                };
                let m =
                    RequestError { request_id: id_of(&ctx), error_code, retry_interval, reason, redirect };
                (Message::RequestError(m), ctx)
            })
            .boxed(),
    ];
    Union::new(arms)
}

// ---------------------------------------------------------------- properties

proptest! {
    #![proptest_config(ProptestConfig { cases: 384, ..ProptestConfig::default() })]

    /// decode(encode(m)) == m, the whole frame is consumed and nothing after it; every strict
    /// prefix needs more bytes.
    #[test]
    fn round_trip_and_prefixes((msg, ctx) in message()) {
        let buf = encode(&msg);
        let (decoded, used) = decode(&buf, &ctx).expect("decodes");
        prop_assert_eq!(&decoded, &msg);
        prop_assert_eq!(used, buf.len());

        let mut longer = buf.clone();
        longer.extend_from_slice(&[0x03, 0x00, 0x00]);
        prop_assert_eq!(decode(&longer, &ctx), Ok((msg, buf.len())));

        for n in 0..buf.len() {
            prop_assert_eq!(decode(&buf[..n], &ctx), Err(DecodeError::NeedMore), "prefix of {} bytes", n);
        }
    }

    /// draft-20 is draft-22 but for the form of LOCATION_FILTER and TRACK_NAMESPACE_PREFIX
    /// (a Length, no filter type): every draft-22 message round-trips through the draft-20
    /// codec too, except that an open filter from {0, 0} comes back as the unfiltered
    /// `LocationFilter::None` it is equal to (draft-20 §5.1.2); re-encoding gives the same
    /// bytes; every strict prefix needs more.
    #[test]
    fn draft_20_round_trip((msg, ctx) in message()) {
        let mut buf = Vec::new();
        wire::control::encode_message(&D20, &msg, &mut buf).expect("encodes");
        let (decoded, used) = wire::control::decode_message(&D20, &buf, &ctx).expect("decodes");
        prop_assert_eq!(used, buf.len());
        let zero_start = format!("{msg:?}").contains("AbsoluteStart { start: Location { group: 0, object: 0 } }");
        if !zero_start {
            prop_assert_eq!(&decoded, &msg);
        }
        let mut again = Vec::new();
        wire::control::encode_message(&D20, &decoded, &mut again).expect("re-encodes");
        prop_assert_eq!(&again, &buf);
        for n in 0..buf.len() {
            let prefix = wire::control::decode_message(&D20, &buf[..n], &ctx);
            prop_assert_eq!(prefix, Err(DecodeError::NeedMore), "prefix of {} bytes", n);
        }
    }

    /// Arbitrary bytes never panic, in either role, on the control stream or a request stream.
    #[test]
    fn arbitrary_bytes_never_panic(buf in vec(any::<u8>(), 0..300)) {
        for ctx in [CLIENT_CTL, SERVER_CTL, CLIENT_REQ, SERVER_REQ] {
            if let Ok((_, used)) = decode(&buf, &ctx) {
                prop_assert!(used <= buf.len());
            }
        }
    }

    /// Arbitrary bytes behind a valid type and length (so the body parsers see them).
    #[test]
    fn arbitrary_bodies_never_panic(ty in prop_oneof![
        Just(mt::SETUP), Just(mt::GOAWAY), Just(mt::SUBSCRIBE), Just(mt::SUBSCRIBE_OK),
        Just(mt::PUBLISH_STATE_NOTIFY), Just(mt::PUBLISH), Just(mt::PUBLISH_DONE), Just(mt::FETCH),
        Just(mt::FETCH_OK), Just(mt::TRACK_STATUS), Just(mt::PUBLISH_NAMESPACE),
        Just(mt::SUBSCRIBE_NAMESPACE), Just(mt::SUBSCRIBE_TRACKS), Just(mt::NAMESPACE),
        Just(mt::NAMESPACE_DONE), Just(mt::PUBLISH_SKIPPED), Just(mt::REQUEST_UPDATE),
        Just(mt::REQUEST_OK), Just(mt::REQUEST_ERROR),
    ], body in vec(any::<u8>(), 0..200)) {
        let buf = B(body).frame(ty);
        for ctx in [CLIENT_CTL, SERVER_CTL, CLIENT_REQ, SERVER_REQ] {
            prop_assert_ne!(decode(&buf, &ctx), Err(DecodeError::NeedMore));
        }
    }

    /// Valid encodings with one byte changed never panic and never report a length beyond
    /// the input.
    #[test]
    fn mutated_encodings_never_panic((msg, ctx) in message(), at in any::<prop::sample::Index>(), b in any::<u8>()) {
        let mut buf = encode(&msg);
        let i = at.index(buf.len());
        buf[i] = b;
        if let Ok((_, used)) = decode(&buf, &ctx) {
            prop_assert!(used <= buf.len());
        }
    }
}

// ---------------------------------------------------------------- message types

#[test]
fn message_type_values_match_table_5() {
    assert_eq!(mt::SETUP, 0x2F00);
    assert_eq!(mt::GOAWAY, 0x10);
    assert_eq!(mt::SUBSCRIBE, 0x3);
    assert_eq!(mt::SUBSCRIBE_OK, 0x4);
    assert_eq!(mt::PUBLISH_STATE_NOTIFY, 0x22);
    assert_eq!(mt::PUBLISH, 0x1D);
    assert_eq!(mt::PUBLISH_DONE, 0xB);
    assert_eq!(mt::FETCH, 0x16);
    assert_eq!(mt::FETCH_OK, 0x18);
    assert_eq!(mt::TRACK_STATUS, 0xD);
    assert_eq!(mt::PUBLISH_NAMESPACE, 0x6);
    assert_eq!(mt::SUBSCRIBE_NAMESPACE, 0x50);
    assert_eq!(mt::SUBSCRIBE_TRACKS, 0x51);
    assert_eq!(mt::NAMESPACE, 0x8);
    assert_eq!(mt::NAMESPACE_DONE, 0xE);
    assert_eq!(mt::PUBLISH_SKIPPED, 0xF);
    assert_eq!(mt::REQUEST_UPDATE, 0x2);
    assert_eq!(mt::REQUEST_OK, 0x7);
    assert_eq!(mt::REQUEST_ERROR, 0x5);
    assert_eq!(mt::RESERVED, [0x01, 0x40, 0x41, 0x20, 0x21, 0x1E]);
    assert_eq!(REDIRECT, 0x34);
}

/// Each message's first bytes are its Table 5 type.
#[test]
fn encoders_write_their_type() {
    let cases: [(Message, u64); 4] = [
        (Message::ClientSetup(Setup::default()), mt::SETUP),
        (Message::ServerSetup(Setup::default()), mt::SETUP),
        (Message::Namespace(TrackNamespace::default()), mt::NAMESPACE),
        (Message::PublishOk(PublishOk::default()), mt::REQUEST_OK),
    ];
    for (msg, ty) in cases {
        let buf = encode(&msg);
        assert_eq!(Vi64::decode(&buf).expect("type"), (ty, Vi64::size(ty).expect("size")));
    }
}

#[test]
fn unknown_and_reserved_types_are_violations() {
    for ty in [0x00, 0x09, 0x11, 0x1F, 0x23, 0x52, 0x2F01, 0x3FFF, u64::MAX] {
        assert_violation(decode(&B::new().frame(ty), &CLIENT_REQ));
        // Rejected as soon as the type is readable, without waiting for the body.
        assert_violation(decode(&B::new().int(ty).0, &CLIENT_REQ));
    }
    for ty in mt::RESERVED {
        for ctx in [CLIENT_CTL, SERVER_REQ] {
            assert_violation(decode(&B::new().frame(ty), &ctx));
            assert_violation(decode(&B::new().int(0).frame(ty), &ctx));
        }
    }
}

// ---------------------------------------------------------------- hand-written vectors

/// §8.6: ranges 3-5 and 10-15 encode as Start=3, End=2, Start=5, End=5.
#[test]
fn range_filter_spec_example() {
    let filter = RangeFilter {
        kind: RangeFilterKind::SubgroupId,
        set: Some(RangeSet {
            set_id: 7,
            property_type: None,
            ranges: vec![Range { start: 3, end: Some(5) }, Range { start: 10, end: Some(15) }],
        }),
    };
    let msg = subscribe(Parameters { range_filters: vec![filter], ..Parameters::default() });
    let expected = B::new()
        .int(2)
        .ns(&["a"])
        .lp(b"b")
        .int(1) // one parameter
        .int(0x25) // SUBGROUP_FILTER
        .int(5) // Length: SetID + four one-byte deltas
        .u8(7)
        .raw(&[3, 2, 5, 5])
        .frame(mt::SUBSCRIBE);
    assert_eq!(encode(&msg), expected);
    assert_eq!(decode(&expected, &CLIENT_CTL), Ok((msg, expected.len())));
}

/// An open-ended last range omits its End; a property filter carries its Property Type.
#[test]
fn range_filter_open_end_and_property_type() {
    let filter = RangeFilter {
        kind: RangeFilterKind::ObjectProperty,
        set: Some(RangeSet {
            set_id: 0,
            property_type: Some(0x3C),
            ranges: vec![Range { start: 1, end: Some(1) }, Range { start: 200, end: None }],
        }),
    };
    let msg = subscribe(Parameters { range_filters: vec![filter], ..Parameters::default() });
    let expected = B::new()
        .int(2)
        .ns(&["a"])
        .lp(b"b")
        .int(1)
        .int(0x28)
        .int(6) // SetID, Property Type, 1, 0, 199 (two bytes)
        .u8(0)
        .int(0x3C)
        .int(1)
        .int(0)
        .int(199)
        .frame(mt::SUBSCRIBE);
    assert_eq!(encode(&msg), expected);
    assert_eq!(decode(&expected, &CLIENT_CTL), Ok((msg, expected.len())));
}

/// A SUBSCRIBE laid out per §9.6 and §9.20, with non-minimal vi64s (Request ID 5 as
/// 0x80 0x05, a Type Delta as 0xC0 0x00 0x10) in the decoded form.
#[test]
fn subscribe_vector() {
    let body = [
        0x80, 0x05, // Request ID 5, two-byte vi64
        0x02, 0x03, b'l', b'i', b'v', 0x02, b'v', b'1', // namespace ("liv", "v1")
        0x04, b'c', b'a', b'm', b'1', // track name "cam1"
        0x05, // five parameters
        0x03, 0x03, 0x03, 0x00, b't', // AUTHORIZATION_TOKEN: length 3, USE_VALUE, type 0, "t"
        0xC0, 0x00, 0x0D, 0x01, // +0x0D = FORWARD (0x10), three-byte delta: 1
        0x10, 0x40, // +0x10 = SUBSCRIBER_PRIORITY (0x20): 64
        0x01, 0x04, 0x0A, 0x00, 0x02, 0x05, // +1 = LOCATION_FILTER: AbsoluteRange {10,0}..{12,5}
        0x01, 0x02, // +1 = GROUP_ORDER: Descending
    ];
    let buf = B(body.to_vec()).frame(mt::SUBSCRIBE);
    assert_eq!(&buf[..3], &[0x03, 0x00, body.len() as u8]);
    let expected = Message::Subscribe(Subscribe {
        request_id: RequestId(5),
        track: track(&["liv", "v1"], "cam1"),
        params: Parameters {
            auth_tokens: vec![AuthToken::UseValue { token_type: 0, value: Bytes::from_static(b"t") }],
            forward: Some(true),
            subscriber_priority: Some(64),
            location_filter: Some(LocationFilter::AbsoluteRange {
                start: Location::new(10, 0),
                end: Location::new(12, 5),
            }),
            group_order: Some(GroupOrder::Descending),
            ..Parameters::default()
        },
    });
    assert_eq!(decode(&buf, &CLIENT_CTL), Ok((expected.clone(), buf.len())));
    // The encoder writes the minimal forms: three bytes shorter.
    let minimal = encode(&expected);
    assert_eq!(minimal.len(), buf.len() - 3);
    assert_eq!(decode(&minimal, &CLIENT_CTL), Ok((expected, minimal.len())));
}

/// A client SETUP laid out per §9.1: type 0x2F00 (two-byte vi64 0xAF 0x00), 16-bit length,
/// Key-Value-Pair options with delta types, an unknown (grease) option kept.
#[test]
fn setup_vector() {
    let body: Vec<u8> = [
        &[0x01, 0x04][..],
        b"/moq",                                     // PATH (odd: length, bytes)
        &[0x02, 0x05, 0x01, 0x00, 0x00, b'k', b'v'], // +2 = AUTHORIZATION_TOKEN: REGISTER alias 0 type 0 "kv"
        &[0x01, 0x84, 0x00],                         // +1 = MAX_AUTH_TOKEN_CACHE_SIZE (even): 1024
        &[0x03, 0x08],                               // +3 = MOQT_IMPLEMENTATION, 8 bytes
        b"moq-edge",
        &[0x80, 0x96, 0x01, 0xAA], // +150 = 0x9D (grease, odd): one byte
    ]
    .concat();
    let buf = B(body.clone()).frame(mt::SETUP);
    assert_eq!(&buf[..4], &[0xAF, 0x00, 0x00, body.len() as u8]);
    let expected = SetupOptions {
        path: Some(Bytes::from_static(b"/moq")),
        auth_tokens: vec![AuthToken::Register { alias: 0, token_type: 0, value: Bytes::from_static(b"kv") }],
        max_auth_token_cache_size: Some(1024),
        implementation: Some(Bytes::from_static(b"moq-edge")),
        unknown: vec![(0x9D, KvValue::Bytes(Bytes::from_static(&[0xAA])))],
        ..SetupOptions::default()
    };
    let client = Message::ClientSetup(Setup { options: expected.clone() });
    assert_eq!(decode(&buf, &CLIENT_CTL), Ok((client.clone(), buf.len())));
    assert_eq!(encode(&client), buf);
    // The same bytes from the server are a SERVER setup.
    let server = Message::ServerSetup(Setup { options: expected });
    assert_eq!(decode(&buf, &SERVER_CTL), Ok((server.clone(), buf.len())));
    assert_eq!(encode(&server), buf);
}

/// Responses carry no Request ID: SUBSCRIBE_OK is Track Alias, Parameters, Track Properties.
#[test]
fn subscribe_ok_vector() {
    let buf = B::new()
        .int(9) // Track Alias
        .int(2)
        .int(0x08)
        .int(1000) // EXPIRES
        .int(0x01)
        .int(3)
        .int(4) // LARGEST_OBJECT {3, 4}
        .int(0x0E)
        .int(100) // DEFAULT_PUBLISHER_PRIORITY property
        .frame(mt::SUBSCRIBE_OK);
    let expected = Message::SubscribeOk(SubscribeOk {
        request_id: RequestId(4),
        track_alias: TrackAlias(9),
        params: Parameters {
            expires: Some(1000),
            largest_object: Some(Location::new(3, 4)),
            ..Parameters::default()
        },
        track_properties: [(0x0E, KvValue::Int(100))].into_iter().collect(),
    });
    assert_eq!(decode(&buf, &SERVER_REQ), Ok((expected.clone(), buf.len())));
    assert_eq!(encode(&expected), buf);
}

/// FETCH (§9.11) has no Fetch Type: Request ID, track, parameters (range in LOCATION_FILTER).
/// FETCH_OK's End Location is inclusive.
#[test]
fn fetch_and_fetch_ok_vectors() {
    let fetch = B::new()
        .int(6)
        .ns(&["a"])
        .lp(b"t")
        .int(1)
        .int(0x21)
        .int(0x03)
        .int(7)
        .int(1)
        .int(2) // AbsoluteStartGroupEnd {7,1} .. end of group 9
        .frame(mt::FETCH);
    let expected = Message::Fetch(Fetch {
        request_id: RequestId(6),
        kind: FetchKind::Standalone { track: track(&["a"], "t") },
        params: Parameters {
            location_filter: Some(LocationFilter::AbsoluteStartGroupEnd {
                start: Location::new(7, 1),
                end_group: 9,
            }),
            ..Parameters::default()
        },
    });
    assert_eq!(decode(&fetch, &CLIENT_CTL), Ok((expected.clone(), fetch.len())));
    assert_eq!(encode(&expected), fetch);

    let ok = B::new().u8(1).int(9).int(4).int(0).frame(mt::FETCH_OK);
    let expected = Message::FetchOk(FetchOk {
        request_id: RequestId(4),
        end_of_track: true,
        end_location: FetchEnd::Object(Location::new(9, 4)),
        ..FetchOk::default()
    });
    assert_eq!(decode(&ok, &SERVER_REQ), Ok((expected.clone(), ok.len())));
    assert_eq!(encode(&expected), ok);
}

/// REQUEST_UPDATE carries its own Request ID; the updated request is the stream's.
#[test]
fn request_update_ids() {
    let buf = B::new().int(10).int(1).int(0x10).u8(0).frame(mt::REQUEST_UPDATE);
    let expected = Message::RequestUpdate(RequestUpdate {
        request_id: RequestId(10),
        existing_request_id: RequestId(4),
        params: Parameters { forward: Some(false), ..Parameters::default() },
    });
    assert_eq!(decode(&buf, &CLIENT_REQ), Ok((expected.clone(), buf.len())));
    assert_eq!(encode(&expected), buf);
}

/// GOAWAY: URI then Timeout; REQUEST_ERROR with a Redirect after the reason.
#[test]
fn goaway_and_redirect_vectors() {
    let buf = B::new().lp(b"moqt://x").int(3000).frame(mt::GOAWAY);
    let expected = Message::GoAway(GoAway {
        new_session_uri: Bytes::from_static(b"moqt://x"),
        timeout_ms: 3000,
        request_id: None,
    });
    assert_eq!(decode(&buf, &SERVER_CTL), Ok((expected.clone(), buf.len())));
    assert_eq!(encode(&expected), buf);

    let buf = B::new()
        .int(REDIRECT)
        .int(1)
        .lp(b"moved")
        .lp(b"moqt://y")
        .ns(&["n"])
        .lp(b"t")
        .frame(mt::REQUEST_ERROR);
    let expected = Message::RequestError(RequestError {
        request_id: RequestId(4),
        error_code: REDIRECT,
        retry_interval: 1,
        reason: Bytes::from_static(b"moved"),
        redirect: Some(Redirect { connect_uri: Bytes::from_static(b"moqt://y"), track: track(&["n"], "t") }),
    });
    assert_eq!(decode(&buf, &SERVER_REQ), Ok((expected.clone(), buf.len())));
    assert_eq!(encode(&expected), buf);
}

/// FILL_PARAMETERS is a length-prefixed nested parameter list with its own scope: a type may
/// appear both outside and inside it.
#[test]
fn fill_parameters_vector() {
    let fill = Parameters {
        fill_timeout: Some(0),
        location_filter: Some(LocationFilter::RelativeStart { groups_back: 1 }),
        ..Parameters::default()
    };
    let msg = subscribe(Parameters {
        location_filter: Some(LocationFilter::NextObject),
        fill_parameters: Some(Box::new(fill)),
        ..Parameters::default()
    });
    let inner = B::new().int(2).int(0x0A).int(0).int(0x17).int(0x01).int(1).0;
    let expected = B::new()
        .int(2)
        .ns(&["a"])
        .lp(b"b")
        .int(2)
        .int(0x21)
        .int(0x05) // LOCATION_FILTER: Next Object
        .int(0x02)
        .lp(&inner) // FILL_PARAMETERS
        .frame(mt::SUBSCRIBE);
    assert_eq!(encode(&msg), expected);
    assert_eq!(decode(&expected, &CLIENT_CTL), Ok((msg, expected.len())));
}

/// draft-16 PUBLISH_OK is written as REQUEST_OK and read back as REQUEST_OK.
#[test]
fn publish_ok_encodes_as_request_ok() {
    let msg = Message::PublishOk(PublishOk {
        request_id: RequestId(4),
        params: Parameters { expires: Some(5), ..Parameters::default() },
    });
    let buf = encode(&msg);
    assert_eq!(buf, B::new().int(1).int(0x08).int(5).frame(mt::REQUEST_OK));
    let expected = Message::RequestOk(RequestOk {
        request_id: RequestId(4),
        params: Parameters { expires: Some(5), ..Parameters::default() },
        track_properties: Properties::new(),
    });
    assert_eq!(decode(&buf, &CLIENT_REQ), Ok((expected, buf.len())));
    // LARGEST_OBJECT is not allowed in PUBLISH_OK.
    assert_unsupported(&Message::PublishOk(PublishOk {
        request_id: RequestId(4),
        params: Parameters { largest_object: Some(Location::new(1, 1)), ..Parameters::default() },
    }));
}

// ---------------------------------------------------------------- parameter tables

/// One sample value of each parameter type, alone in a Parameters.
fn sample(ty: u64) -> Parameters {
    let mut p = Parameters::default();
    let range = |kind| RangeFilter { kind, set: None };
    match ty {
        0x02 => p.object_delivery_timeout = Some(5),
        0x03 => p.auth_tokens = vec![AuthToken::UseValue { token_type: 1, value: Bytes::from_static(b"x") }],
        0x04 => p.rendezvous_timeout = Some(1),
        0x06 => p.subgroup_delivery_timeout = Some(1),
        0x08 => p.expires = Some(1),
        0x09 => p.largest_object = Some(Location::new(1, 2)),
        0x0A => p.fill_timeout = Some(1),
        0x10 => p.forward = Some(true),
        0x20 => p.subscriber_priority = Some(3),
        0x21 => p.location_filter = Some(LocationFilter::NextObject),
        0x22 => p.group_order = Some(GroupOrder::Descending),
        0x23 => p.fill_parameters = Some(Box::default()),
        0x25 => p.range_filters = vec![range(RangeFilterKind::SubgroupId)],
        0x26 => p.range_filters = vec![range(RangeFilterKind::ObjectId)],
        0x27 => p.range_filters = vec![range(RangeFilterKind::Priority)],
        0x28 => p.range_filters = vec![range(RangeFilterKind::ObjectProperty)],
        0x29 => p.range_filters = vec![range(RangeFilterKind::TrackProperty)],
        0x32 => p.new_group_request = Some(1),
        0x34 => p.track_namespace_prefix = Some(TrackNamespace::from_strs(&["p"])),
        0x35 => p.include_properties = Some(false),
        _ => panic!("no sample for {ty:#x}"),
    }
    p
}

/// The fields before the parameters of each message that has parameters, and its list.
fn with_params(ty: u64) -> (B, &'static [u64]) {
    let track = || B::new().int(2).ns(&["a"]).lp(b"b");
    match ty {
        mt::SUBSCRIBE => (track(), spec::SUBSCRIBE),
        mt::TRACK_STATUS => (track(), spec::TRACK_STATUS),
        mt::FETCH => (track(), spec::FETCH),
        mt::SUBSCRIBE_OK => (B::new().int(1), spec::SUBSCRIBE_OK),
        mt::PUBLISH => (track().int(1), spec::PUBLISH),
        mt::PUBLISH_STATE_NOTIFY => (B::new(), spec::PUBLISH_STATE_NOTIFY),
        mt::FETCH_OK => (B::new().u8(0).int(1).int(1), spec::FETCH_OK),
        mt::PUBLISH_NAMESPACE => (B::new().int(2).ns(&["a"]), spec::PUBLISH_NAMESPACE),
        mt::SUBSCRIBE_NAMESPACE => (B::new().int(2).ns(&[]), spec::SUBSCRIBE_NAMESPACE),
        mt::SUBSCRIBE_TRACKS => (B::new().int(2).ns(&["a"]), spec::SUBSCRIBE_TRACKS),
        mt::REQUEST_UPDATE => (B::new().int(2), spec::REQUEST_UPDATE),
        mt::REQUEST_OK => (B::new(), spec::REQUEST_OK),
        _ => unreachable!(),
    }
}

fn params_of(msg: &Message) -> &Parameters {
    match msg {
        Message::Subscribe(m) | Message::TrackStatus(m) => &m.params,
        Message::Fetch(m) => &m.params,
        Message::SubscribeOk(m) => &m.params,
        Message::Publish(m) => &m.params,
        Message::PublishStateNotify(m) => &m.params,
        Message::FetchOk(m) => &m.params,
        Message::PublishNamespace(m) => &m.params,
        Message::SubscribeNamespace(m) => &m.params,
        Message::SubscribeTracks(m) => &m.params,
        Message::RequestUpdate(m) => &m.params,
        Message::RequestOk(m) => &m.params,
        other => panic!("no parameters in {other:?}"),
    }
}

/// Every parameter type is accepted exactly in the messages whose §9.x list names it; any
/// other is a PROTOCOL_VIOLATION on decode (§9.20.1) and `Unsupported` on encode.
#[test]
fn parameters_allowed_exactly_per_message() {
    let types = [
        mt::SUBSCRIBE,
        mt::TRACK_STATUS,
        mt::FETCH,
        mt::SUBSCRIBE_OK,
        mt::PUBLISH,
        mt::PUBLISH_STATE_NOTIFY,
        mt::FETCH_OK,
        mt::PUBLISH_NAMESPACE,
        mt::SUBSCRIBE_NAMESPACE,
        mt::SUBSCRIBE_TRACKS,
        mt::REQUEST_UPDATE,
        mt::REQUEST_OK,
    ];
    for mty in types {
        let (prefix, list) = with_params(mty);
        for &pty in spec::ALL {
            let p = sample(pty);
            let buf = prefix.clone().raw(&param_bytes(&p)).frame(mty);
            let got = decode(&buf, &SERVER_REQ);
            if list.contains(&pty) {
                let (msg, used) = got.unwrap_or_else(|e| panic!("{mty:#x} must accept {pty:#x}: {e:?}"));
                assert_eq!(used, buf.len());
                assert_eq!(params_of(&msg), &p, "{mty:#x} / {pty:#x}");
                assert_eq!(encode(&msg), buf, "{mty:#x} / {pty:#x} re-encodes");
            } else {
                assert_violation(got);
            }
        }
    }
}

#[test]
fn encoding_a_disallowed_parameter_is_unsupported() {
    for &pty in spec::ALL.iter().filter(|t| !spec::SUBSCRIBE.contains(t)) {
        assert_unsupported(&subscribe(sample(pty)));
    }
    for &pty in spec::ALL.iter().filter(|t| !spec::REQUEST_OK.contains(t)) {
        assert_unsupported(&Message::RequestOk(RequestOk { params: sample(pty), ..RequestOk::default() }));
    }
    for &pty in spec::ALL.iter().filter(|t| !spec::PUBLISH_OK.contains(t)) {
        assert_unsupported(&Message::PublishOk(PublishOk { params: sample(pty), ..PublishOk::default() }));
    }
    for &pty in spec::ALL.iter().filter(|t| !spec::FILL.contains(t)) {
        let p = Parameters { fill_parameters: Some(Box::new(sample(pty))), ..Parameters::default() };
        assert_unsupported(&subscribe(p));
    }
}

/// Table 7: FILL_PARAMETERS accepts exactly its own list, whatever the enclosing message.
#[test]
fn fill_parameters_allowed_set() {
    for &pty in spec::ALL {
        let inner = param_bytes(&sample(pty));
        let body = B::new().int(2).ns(&["a"]).lp(b"b").int(1).int(0x23).lp(&inner);
        let got = decode(&body.frame(mt::SUBSCRIBE), &CLIENT_CTL);
        if spec::FILL.contains(&pty) {
            let (msg, _) = got.unwrap_or_else(|e| panic!("FILL_PARAMETERS must accept {pty:#x}: {e:?}"));
            assert_eq!(params_of(&msg).fill_parameters.as_deref(), Some(&sample(pty)));
        } else {
            assert_violation(got);
        }
    }
}

#[test]
fn repeatable_parameters() {
    let tokens = vec![
        AuthToken::Register { alias: 1, token_type: 2, value: Bytes::from_static(b"abc") },
        AuthToken::UseAlias { alias: 1 },
        AuthToken::Delete { alias: 1 },
        AuthToken::UseValue { token_type: 0, value: Bytes::new() },
    ];
    let f = |kind, set_id| RangeFilter {
        kind,
        set: Some(RangeSet { set_id, property_type: None, ranges: vec![Range { start: 0, end: None }] }),
    };
    let p = Parameters {
        auth_tokens: tokens,
        range_filters: vec![
            f(RangeFilterKind::SubgroupId, 0),
            f(RangeFilterKind::SubgroupId, 1),
            f(RangeFilterKind::Priority, 0),
        ],
        ..Parameters::default()
    };
    let msg = subscribe(p);
    let buf = encode(&msg);
    assert_eq!(decode(&buf, &CLIENT_CTL), Ok((msg, buf.len())));
}

/// Range filters come out grouped by type (the wire order); within a type the order is kept.
#[test]
fn range_filters_are_written_in_type_order() {
    let f = |kind, set_id| RangeFilter {
        kind,
        set: Some(RangeSet { set_id, property_type: None, ranges: vec![] }),
    };
    let msg = subscribe(Parameters {
        range_filters: vec![
            f(RangeFilterKind::Priority, 1),
            f(RangeFilterKind::SubgroupId, 2),
            f(RangeFilterKind::Priority, 0),
        ],
        ..Parameters::default()
    });
    let (decoded, _) = decode(&encode(&msg), &CLIENT_CTL).expect("decodes");
    let kinds: Vec<_> = params_of(&decoded)
        .range_filters
        .iter()
        .map(|f| (kind_type(f.kind), f.set.as_ref().map(|s| s.set_id)))
        .collect();
    assert_eq!(kinds, [(0x25, Some(2)), (0x27, Some(1)), (0x27, Some(0))]);
}

// ---------------------------------------------------------------- error paths

/// SUBSCRIBE body: request ID 2, track a/b, then `params` raw.
fn subscribe_with(params: B) -> Vec<u8> {
    B::new().int(2).ns(&["a"]).lp(b"b").raw(&params.0).frame(mt::SUBSCRIBE)
}

#[test]
fn length_mismatch_is_a_violation() {
    let good = B::new().int(2).ns(&["a"]).lp(b"b").int(0);
    // One byte more than the fields.
    assert_violation(decode(&good.clone().u8(0).frame(mt::SUBSCRIBE), &CLIENT_CTL));
    // Length one byte short of the fields (the frame is complete).
    let mut short = good.clone().frame(mt::SUBSCRIBE);
    short[2] -= 1;
    short.pop();
    assert_violation(decode(&short, &CLIENT_CTL));
    // A parameter count larger than the body can hold.
    assert_violation(decode(&B::new().int(2).ns(&["a"]).lp(b"b").int(9).frame(mt::SUBSCRIBE), &CLIENT_CTL));
    // Trailing bytes after messages without Track Properties.
    assert_violation(decode(&B::new().ns(&["a"]).u8(1).frame(mt::NAMESPACE), &CLIENT_REQ));
    assert_violation(decode(&B::new().lp(b"").int(0).u8(0).frame(mt::GOAWAY), &CLIENT_CTL));
    assert_violation(decode(&B::new().int(0).int(0).lp(b"").u8(0).frame(mt::PUBLISH_DONE), &SERVER_REQ));
}

#[test]
fn request_stream_messages_on_the_control_stream() {
    let responses = [
        B::new().int(1).int(0).frame(mt::SUBSCRIBE_OK),
        B::new().int(0).frame(mt::REQUEST_OK),
        B::new().int(0).int(0).lp(b"").frame(mt::REQUEST_ERROR),
        B::new().int(0).int(0).lp(b"").frame(mt::PUBLISH_DONE),
        B::new().int(0).frame(mt::PUBLISH_STATE_NOTIFY),
        B::new().u8(0).int(0).int(0).int(0).frame(mt::FETCH_OK),
        B::new().ns(&[]).lp(b"").frame(mt::PUBLISH_SKIPPED),
        B::new().int(2).int(0).frame(mt::REQUEST_UPDATE),
        B::new().ns(&["a"]).frame(mt::NAMESPACE),
        B::new().ns(&["a"]).frame(mt::NAMESPACE_DONE),
    ];
    for buf in responses {
        assert!(decode(&buf, &SERVER_REQ).is_ok(), "valid on a request stream: {buf:02x?}");
        assert_violation(decode(&buf, &SERVER_CTL));
        assert_violation(decode(&buf, &CLIENT_CTL));
    }
    // SETUP belongs on the control stream.
    assert_violation(decode(&B::new().frame(mt::SETUP), &CLIENT_REQ));
}

#[test]
fn namespace_limits() {
    // 33 fields.
    let fields: Vec<String> = (0..33).map(|i| format!("f{i}")).collect();
    let refs: Vec<&str> = fields.iter().map(String::as_str).collect();
    assert_violation(decode(&B::new().ns(&refs).frame(mt::NAMESPACE), &CLIENT_REQ));
    assert_violation(decode(&subscribe_with_track(B::new().ns(&refs).lp(b"t")), &CLIENT_CTL));
    // 32 fields is fine.
    assert!(decode(&B::new().ns(&refs[..32]).frame(mt::NAMESPACE), &CLIENT_REQ).is_ok());
    // An empty field.
    assert_violation(decode(&B::new().ns(&["a", ""]).frame(mt::NAMESPACE), &CLIENT_REQ));
    assert_violation(decode(&subscribe_with_track(B::new().ns(&[""]).lp(b"t")), &CLIENT_CTL));
    // Full track name over 4096 bytes (namespace 4000 + name 97), and exactly 4096.
    let big = "x".repeat(4000);
    let name = vec![b'n'; 97];
    assert_violation(decode(&subscribe_with_track(B::new().ns(&[big.as_str()]).lp(&name)), &CLIENT_CTL));
    assert!(decode(&subscribe_with_track(B::new().ns(&[big.as_str()]).lp(&name[..96])), &CLIENT_CTL).is_ok());
    assert_violation(decode(&B::new().ns(&[big.as_str()]).lp(&name).frame(mt::PUBLISH_SKIPPED), &SERVER_REQ));
    // A namespace alone over 4096 bytes.
    let huge = "y".repeat(4097);
    assert_violation(decode(&B::new().ns(&[huge.as_str()]).frame(mt::NAMESPACE), &CLIENT_REQ));
    // TRACK_NAMESPACE_PREFIX follows the same rules.
    let prefix = B::new().int(2).int(1).int(0x34).ns(&["a", ""]).frame(mt::REQUEST_UPDATE);
    assert_violation(decode(&prefix, &CLIENT_REQ));
    // Encoding checks the same limits.
    let msg = Message::Namespace(TrackNamespace::from_strs(&refs));
    assert_out_of_range(&msg);
    assert_out_of_range(&Message::Namespace(TrackNamespace::from_strs(&["a", ""])));
    let long =
        FullTrackName { namespace: TrackNamespace::from_strs(&[big.as_str()]), name: Bytes::from(name) };
    assert_out_of_range(&Message::Subscribe(Subscribe { track: long, ..Subscribe::default() }));
}

fn subscribe_with_track(track: B) -> Vec<u8> {
    B::new().int(2).raw(&track.0).int(0).frame(mt::SUBSCRIBE)
}

#[test]
fn reason_phrase_limit() {
    let reason = vec![b'r'; 1025];
    assert_violation(decode(&B::new().int(0).int(0).lp(&reason).frame(mt::PUBLISH_DONE), &SERVER_REQ));
    assert_violation(decode(&B::new().int(1).int(0).lp(&reason).frame(mt::REQUEST_ERROR), &SERVER_REQ));
    assert!(decode(&B::new().int(1).int(0).lp(&reason[..1024]).frame(mt::REQUEST_ERROR), &SERVER_REQ).is_ok());
    assert_out_of_range(&Message::PublishDone(PublishDone {
        reason: Bytes::from(reason),
        ..PublishDone::default()
    }));
}

#[test]
fn unknown_parameter_is_a_violation() {
    for ty in [0x01, 0x05, 0x07, 0x0B, 0x11, 0x24, 0x2A, 0x33, 0x36, 0x3FFF, u64::MAX] {
        assert_violation(decode(&subscribe_with(B::new().int(1).int(ty).int(0)), &CLIENT_CTL));
    }
}

#[test]
fn duplicate_parameter_is_a_violation() {
    // Two EXPIRES in SUBSCRIBE_OK (the second with Type Delta 0).
    let buf = B::new().int(1).int(2).int(0x08).int(1).int(0).int(2).frame(mt::SUBSCRIBE_OK);
    assert_violation(decode(&buf, &SERVER_REQ));
    // Two FORWARD in SUBSCRIBE.
    assert_violation(decode(&subscribe_with(B::new().int(2).int(0x10).u8(1).int(0).u8(1)), &CLIENT_CTL));
    // Two LOCATION_FILTER in SUBSCRIBE.
    assert_violation(decode(&subscribe_with(B::new().int(2).int(0x21).int(5).int(0).int(5)), &CLIENT_CTL));
    // Two FILL_TIMEOUT inside FILL_PARAMETERS.
    let inner = B::new().int(2).int(0x0A).int(1).int(0).int(2).0;
    assert_violation(decode(&subscribe_with(B::new().int(1).int(0x23).lp(&inner)), &CLIENT_CTL));
}

/// Types only ascend; a Type Delta that would carry the type past 2^64-1 is a violation.
#[test]
fn parameter_type_overflow_is_a_violation() {
    let buf = subscribe_with(B::new().int(2).int(0x35).u8(1).int(u64::MAX).int(0));
    assert_violation(decode(&buf, &CLIENT_CTL));
    let buf = B::new().int(2).int(0x34).ns(&["a"]).int(u64::MAX - 0x33).frame(mt::REQUEST_UPDATE);
    assert_violation(decode(&buf, &CLIENT_REQ));
}

#[test]
fn uint8_parameter_values() {
    // FORWARD and INCLUDE_PROPERTIES are 0 or 1; GROUP_ORDER is 1 or 2.
    for bad in [2u8, 0x80, 0xFF] {
        assert_violation(decode(&subscribe_with(B::new().int(1).int(0x10).u8(bad)), &CLIENT_CTL));
        assert_violation(decode(&subscribe_with(B::new().int(1).int(0x35).u8(bad)), &CLIENT_CTL));
    }
    for bad in [0u8, 3, 0xFF] {
        assert_violation(decode(&subscribe_with(B::new().int(1).int(0x22).u8(bad)), &CLIENT_CTL));
    }
    // SUBSCRIBER_PRIORITY is one byte, not a vi64: 0xC0 is the value 192.
    let (msg, _) = decode(&subscribe_with(B::new().int(1).int(0x20).u8(0xC0)), &CLIENT_CTL).expect("decodes");
    assert_eq!(params_of(&msg).subscriber_priority, Some(192));
}

#[test]
fn location_filter_errors() {
    for ty in [6u64, 7, 0x21, u64::MAX] {
        assert_violation(decode(&subscribe_with(B::new().int(1).int(0x21).int(ty)), &CLIENT_CTL));
    }
    // StartGroup + EndGroupDelta overflows, for both types that carry a delta.
    let over = |t| subscribe_with(B::new().int(1).int(0x21).int(t).int(u64::MAX).int(0).int(1).int(0));
    assert_violation(decode(&over(3), &CLIENT_CTL));
    assert_violation(decode(&over(4), &CLIENT_CTL));
    // u64::MAX + 0 is fine.
    let ok = subscribe_with(B::new().int(1).int(0x21).int(3).int(u64::MAX).int(0).int(0));
    assert!(decode(&ok, &CLIENT_CTL).is_ok());
    // A filter whose end group precedes its start group cannot be encoded.
    let bad = LocationFilter::AbsoluteStartGroupEnd { start: Location::new(5, 0), end_group: 4 };
    assert_out_of_range(&subscribe(Parameters { location_filter: Some(bad), ..Parameters::default() }));
    let bad = LocationFilter::AbsoluteRange { start: Location::new(5, 0), end: Location::new(4, 9) };
    assert_out_of_range(&subscribe(Parameters { location_filter: Some(bad), ..Parameters::default() }));
}

#[test]
fn range_filter_errors() {
    // A Start delta past 2^64-1.
    let body = B::new().u8(0).int(u64::MAX).int(0).int(1).0;
    assert_violation(decode(&subscribe_with(B::new().int(1).int(0x25).lp(&body)), &CLIENT_CTL));
    // An End delta past 2^64-1.
    let body = B::new().u8(0).int(5).int(u64::MAX).0;
    assert_violation(decode(&subscribe_with(B::new().int(1).int(0x26).lp(&body)), &CLIENT_CTL));
    // A Length past the end of the message.
    assert_violation(decode(&subscribe_with(B::new().int(1).int(0x25).int(9).u8(0)), &CLIENT_CTL));
    // A property filter without its Property Type.
    assert_violation(decode(&subscribe_with(B::new().int(1).int(0x28).int(1).u8(0)), &CLIENT_CTL));
    // What the spec answers with INVALID_FILTER but the model can hold is left to the session:
    // a PRIORITY_FILTER above 255 and an odd property type decode.
    let body = B::new().u8(0).int(300).0;
    assert!(decode(&subscribe_with(B::new().int(1).int(0x27).lp(&body)), &CLIENT_CTL).is_ok());
    let body = B::new().u8(0).int(0x0B).int(1).0;
    assert!(decode(&subscribe_with(B::new().int(1).int(0x28).lp(&body)), &CLIENT_CTL).is_ok());
    // Encoding rejects ranges that are not ascending, reversed, or open before the last, and a
    // property type on the wrong kind.
    let set = |ranges, property_type| RangeSet { set_id: 0, property_type, ranges };
    let bad = [
        (
            RangeFilterKind::ObjectId,
            set(vec![Range { start: 5, end: Some(9) }, Range { start: 8, end: None }], None),
        ),
        (RangeFilterKind::ObjectId, set(vec![Range { start: 5, end: Some(4) }], None)),
        (
            RangeFilterKind::ObjectId,
            set(vec![Range { start: 1, end: None }, Range { start: 8, end: None }], None),
        ),
        (RangeFilterKind::ObjectId, set(vec![], Some(2))),
        (RangeFilterKind::TrackProperty, set(vec![], None)),
    ];
    for (kind, set) in bad {
        let p =
            Parameters { range_filters: vec![RangeFilter { kind, set: Some(set) }], ..Parameters::default() };
        assert_out_of_range(&Message::SubscribeTracks(SubscribeTracks {
            params: p,
            ..SubscribeTracks::default()
        }));
    }
}

#[test]
fn redirect_presence_follows_the_error_code() {
    // REDIRECT without a Redirect: the body ends early.
    let buf = B::new().int(REDIRECT).int(0).lp(b"").frame(mt::REQUEST_ERROR);
    assert_violation(decode(&buf, &SERVER_REQ));
    // Another code followed by a Redirect: trailing bytes.
    let buf = B::new().int(0x10).int(0).lp(b"").lp(b"").ns(&["a"]).lp(b"").frame(mt::REQUEST_ERROR);
    assert_violation(decode(&buf, &SERVER_REQ));
    // A Connect URI from a client is a violation; from a server it is fine.
    let buf =
        B::new().int(REDIRECT).int(0).lp(b"").lp(b"moqt://z").ns(&["a"]).lp(b"").frame(mt::REQUEST_ERROR);
    assert_violation(decode(&buf, &CLIENT_REQ));
    assert!(decode(&buf, &SERVER_REQ).is_ok());
    // Encoding: the Redirect must match the code both ways.
    let redirect = Some(Redirect::default());
    assert_out_of_range(&Message::RequestError(RequestError {
        error_code: REDIRECT,
        ..RequestError::default()
    }));
    assert_out_of_range(&Message::RequestError(RequestError {
        error_code: 0x10,
        redirect,
        ..RequestError::default()
    }));
}

#[test]
fn goaway_errors() {
    // A New Session URI from a client.
    let buf = B::new().lp(b"moqt://a").int(0).frame(mt::GOAWAY);
    assert_violation(decode(&buf, &CLIENT_CTL));
    assert_violation(decode(&buf, &CLIENT_REQ));
    assert!(decode(&buf, &SERVER_CTL).is_ok());
    // Over 8192 bytes; exactly 8192 is fine.
    let uri = vec![b'u'; 8193];
    assert_violation(decode(&B::new().lp(&uri).int(0).frame(mt::GOAWAY), &SERVER_CTL));
    assert!(decode(&B::new().lp(&uri[..8192]).int(0).frame(mt::GOAWAY), &SERVER_CTL).is_ok());
    assert_out_of_range(&Message::GoAway(GoAway { new_session_uri: Bytes::from(uri), ..GoAway::default() }));
}

#[test]
fn fetch_ok_end_of_track_is_zero_or_one() {
    for bad in [2u8, 0xFF] {
        assert_violation(decode(&B::new().u8(bad).int(0).int(0).int(0).frame(mt::FETCH_OK), &SERVER_REQ));
    }
}

#[test]
fn token_with_unknown_alias_type_is_a_formatting_error() {
    // As a message parameter.
    let token = B::new().int(4).int(0).0;
    assert_code(
        decode(&subscribe_with(B::new().int(1).int(0x03).lp(&token)), &CLIENT_CTL),
        ErrorCode::KeyValueFormatting,
    );
    // Truncated: USE_ALIAS without its alias.
    let token = B::new().int(2).0;
    assert_code(
        decode(&subscribe_with(B::new().int(1).int(0x03).lp(&token)), &CLIENT_CTL),
        ErrorCode::KeyValueFormatting,
    );
    // As a setup option.
    let setup = B::new().int(0x03).lp(&B::new().int(9).0).frame(mt::SETUP);
    assert_code(decode(&setup, &CLIENT_CTL), ErrorCode::KeyValueFormatting);
}

#[test]
fn setup_option_rules() {
    // A duplicate known option.
    let dup_path = B::new().int(0x01).lp(b"/a").int(0).lp(b"/b").frame(mt::SETUP);
    assert_violation(decode(&dup_path, &CLIENT_CTL));
    let dup_int = B::new().int(0x06).int(1).int(0).int(2).frame(mt::SETUP);
    assert_violation(decode(&dup_int, &SERVER_CTL));
    // Repeated tokens and repeated unknown options are fine; draft-16's MAX_REQUEST_ID (0x02)
    // is unknown here.
    let tokens = B::new().int(3).int(0).raw(b"x").0;
    let buf = B::new()
        .int(0x02)
        .int(100)
        .int(0)
        .int(200)
        .int(0x01)
        .lp(&tokens)
        .int(0)
        .lp(&tokens)
        .int(0x9D - 0x03)
        .lp(b"g")
        .int(0)
        .lp(b"h")
        .frame(mt::SETUP);
    let (msg, _) = decode(&buf, &SERVER_CTL).expect("decodes");
    let Message::ServerSetup(Setup { options }) = &msg else { panic!("{msg:?}") };
    assert_eq!(options.auth_tokens.len(), 2);
    assert_eq!(
        options.unknown,
        [
            (0x02, KvValue::Int(100)),
            (0x02, KvValue::Int(200)),
            (0x9D, KvValue::Bytes(Bytes::from_static(b"g"))),
            (0x9D, KvValue::Bytes(Bytes::from_static(b"h"))),
        ]
    );
    assert_eq!(encode(&msg), buf);
    // A client SETUP may not DELETE or USE_ALIAS (§9.1.4); a server's may.
    let delete = B::new().int(0x03).lp(&B::new().int(0).int(1).0).frame(mt::SETUP);
    assert_violation(decode(&delete, &CLIENT_CTL));
    assert!(decode(&delete, &SERVER_CTL).is_ok());
    let use_alias = B::new().int(0x03).lp(&B::new().int(2).int(1).0).frame(mt::SETUP);
    assert_violation(decode(&use_alias, &CLIENT_CTL));
    let options =
        SetupOptions { auth_tokens: vec![AuthToken::Delete { alias: 1 }], ..SetupOptions::default() };
    assert_out_of_range(&Message::ClientSetup(Setup { options: options.clone() }));
    assert!(encode_message(&Message::ServerSetup(Setup { options }), &mut Vec::new()).is_ok());
    // A Key-Value-Pair type overflow and an over-long value (§8.3).
    assert_violation(decode(&B::new().int(0x05).lp(b"x").int(u64::MAX).int(0).frame(mt::SETUP), &CLIENT_CTL));
    assert_violation(decode(&B::new().int(0x07).int(70_000).frame(mt::SETUP), &CLIENT_CTL));
    // Unknown options cannot reuse a draft-22 type, and MAX_REQUEST_ID has no draft-22 form.
    let options =
        SetupOptions { unknown: vec![(0x01, KvValue::Bytes(Bytes::new()))], ..SetupOptions::default() };
    assert_out_of_range(&Message::ServerSetup(Setup { options }));
    let options = SetupOptions { max_request_id: Some(1), ..SetupOptions::default() };
    assert_unsupported(&Message::ClientSetup(Setup { options }));
}

#[test]
fn draft16_only_messages_are_unsupported() {
    let track = FullTrackName::default();
    let cases = [
        Message::MaxRequestId(RequestId(1)),
        Message::RequestsBlocked(RequestId(1)),
        Message::Unsubscribe(RequestId(1)),
        Message::FetchCancel(RequestId(1)),
        Message::PublishNamespaceDone(RequestId(1)),
        Message::PublishNamespaceCancel(PublishNamespaceCancel::default()),
        Message::Fetch(Fetch {
            request_id: RequestId(1),
            kind: FetchKind::RelativeJoining { joining_request_id: RequestId(0), joining_start: 1 },
            params: Parameters::default(),
        }),
        Message::Fetch(Fetch {
            request_id: RequestId(1),
            kind: FetchKind::AbsoluteJoining { joining_request_id: RequestId(0), joining_start: 1 },
            params: Parameters::default(),
        }),
        Message::FetchOk(FetchOk { end_location: FetchEnd::Group(3), ..FetchOk::default() }),
        Message::SubscribeNamespace(SubscribeNamespace {
            options: SubscribeOptions::Publish,
            ..Default::default()
        }),
        Message::SubscribeNamespace(SubscribeNamespace {
            options: SubscribeOptions::Both,
            ..Default::default()
        }),
    ];
    for msg in &cases {
        assert_unsupported(msg);
    }
    // The standalone form of the same FETCH encodes.
    let ok = Message::Fetch(Fetch {
        request_id: RequestId(1),
        kind: FetchKind::Standalone { track },
        params: Parameters::default(),
    });
    assert!(encode_message(&ok, &mut Vec::new()).is_ok());
}

/// A 65535-byte body is the largest; one byte more cannot be framed.
#[test]
fn body_length_limit() {
    let fits = Message::PublishSkipped(PublishSkipped {
        namespace_suffix: TrackNamespace::default(),
        track_name: Bytes::from(vec![b'n'; 4096]),
        ..PublishSkipped::default()
    });
    assert!(encode_message(&fits, &mut Vec::new()).is_ok());
    let props: Properties = (0..7000u64).map(|_| (0x0E, KvValue::Int(1 << 60))).collect();
    let too_big = Message::RequestOk(RequestOk { track_properties: props, ..RequestOk::default() });
    assert_out_of_range(&too_big);
}
