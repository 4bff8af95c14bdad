//! draft-18 control message and parameter codec: round trips of every message, truncation at
//! every byte, arbitrary input, the per-message parameter tables, the error paths with their
//! exact codes, and hand-written vectors checked against the layouts of
//! draft-ietf-moq-transport-18 §10.

mod support;

use bytes::Bytes;
use proptest::collection::vec;
use proptest::option::of as opt;
use proptest::prelude::*;
use proptest::strategy::Union;
use support::strategies::*;
use support::vi64::B;
use wire::control::{fetch_type, message_type as mt, REDIRECT};
use wire::dialect::D18;
use wire::model::*;
use wire::params::{self, ParamSet};
use wire::{DecodeError, EncodeError, ErrorCode, VarInt, Vi64};

/// The shared request-stream codec at this draft.
fn encode_message(m: &Message, out: &mut Vec<u8>) -> Result<(), EncodeError> {
    wire::control::encode_message(&D18, m, out)
}

fn decode_message(buf: &[u8], ctx: &DecodeContext) -> Result<(Message, usize), DecodeError> {
    wire::control::decode_message(&D18, buf, ctx)
}

/// Parameter lists gathered by hand from the "MAY appear in" sentences of draft-18 §10.2.2 to
/// §10.2.14, independent of the codec's own tables.
mod spec {
    pub const SUBSCRIBE: &[u64] = &[0x02, 0x03, 0x04, 0x06, 0x10, 0x20, 0x21, 0x22, 0x32];
    pub const SUBSCRIBE_OK: &[u64] = &[0x08, 0x09];
    pub const PUBLISH: &[u64] = &[0x03, 0x08, 0x09, 0x10];
    pub const FETCH: &[u64] = &[0x03, 0x0A, 0x20, 0x22];
    pub const FETCH_OK: &[u64] = &[];
    pub const TRACK_STATUS: &[u64] = &[0x03];
    pub const PUBLISH_NAMESPACE: &[u64] = &[0x03];
    pub const SUBSCRIBE_NAMESPACE: &[u64] = &[0x03];
    pub const SUBSCRIBE_TRACKS: &[u64] = &[0x03, 0x10];
    /// Every parameter naming REQUEST_UPDATE (for any kind of request).
    pub const REQUEST_UPDATE: &[u64] = &[0x02, 0x03, 0x06, 0x10, 0x20, 0x21, 0x32, 0x34];
    /// PUBLISH_OK, REQUEST_UPDATE_OK and TRACK_STATUS_OK together.
    pub const REQUEST_OK: &[u64] = &[0x02, 0x06, 0x08, 0x09, 0x10, 0x20, 0x21, 0x22, 0x32];
    pub const PUBLISH_OK: &[u64] = &[0x02, 0x06, 0x08, 0x10, 0x20, 0x21, 0x22, 0x32];
    /// §15.7.
    pub const ALL: &[u64] = &[0x02, 0x03, 0x04, 0x06, 0x08, 0x09, 0x0A, 0x10, 0x20, 0x21, 0x22, 0x32, 0x34];
    /// Parameters draft-22 has and draft-18 does not (FILL_PARAMETERS, the range filters,
    /// INCLUDE_PROPERTIES).
    pub const D22_ONLY: &[u64] = &[0x23, 0x25, 0x26, 0x27, 0x28, 0x29, 0x35];
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
    assert!(out.is_empty(), "a failed encode must not write");
}

fn track(ns: &[&str], name: &str) -> FullTrackName {
    FullTrackName { namespace: TrackNamespace::from_strs(ns), name: Bytes::copy_from_slice(name.as_bytes()) }
}

fn subscribe(params: Parameters) -> Message {
    Message::Subscribe(Subscribe { request_id: RequestId(2), track: track(&["a"], "b"), params })
}

/// Parameters encoded by the codec's parameter writer, with every draft-18 type allowed.
fn param_bytes(p: &Parameters) -> Vec<u8> {
    let mut out = Vec::new();
    params::write_params(&mut wire::codec::Writer::<Vi64>::new(&mut out), &D18, p, ParamSet::of(spec::ALL))
        .expect("encodable parameters");
    out
}

// ---------------------------------------------------------------- strategies

/// Any u64, boxed.
fn int() -> BoxedStrategy<u64> {
    int64().boxed()
}

fn rid() -> impl Strategy<Value = RequestId> {
    int().prop_map(RequestId)
}

/// A Full Track Name; draft-18 namespaces may have zero fields (§2.4.1).
fn ftn() -> impl Strategy<Value = FullTrackName> {
    (namespace(0, 6), bytes(32)).prop_map(|(namespace, name)| FullTrackName { namespace, name })
}

/// Every Subscription Filter type (§5.1.2) as the model holds it.
fn subscription_filter() -> BoxedStrategy<LocationFilter> {
    Union::new(vec![
        Just(LocationFilter::RelativeStart { groups_back: 0 }).boxed(),
        Just(LocationFilter::NextObject).boxed(),
        location(int()).prop_map(|start| LocationFilter::AbsoluteStart { start }).boxed(),
        (int(), int(), int())
            .prop_map(|(a, b, object)| LocationFilter::AbsoluteStartGroupEnd {
                start: Location::new(a.min(b), object),
                end_group: a.max(b),
            })
            .boxed(),
    ])
    .boxed()
}

fn group_order() -> impl Strategy<Value = GroupOrder> {
    prop::sample::select(vec![GroupOrder::Ascending, GroupOrder::Descending])
}

/// Clears every parameter `allowed` does not list.
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
    keep!(new_group_request, 0x32);
    keep!(track_namespace_prefix, 0x34);
}

/// Parameters drawn from exactly what `allowed` lists.
fn params(allowed: &'static [u64]) -> BoxedStrategy<Parameters> {
    let a = (
        opt(int()).boxed(),
        vec(auth_token(int()), 0..3).boxed(),
        opt(int()).boxed(),
        opt(int()).boxed(),
        opt(int()).boxed(),
        opt(location(int())).boxed(),
        opt(int()).boxed(),
    );
    let b = (
        opt(any::<bool>()).boxed(),
        opt(any::<u8>()).boxed(),
        opt(subscription_filter()).boxed(),
        opt(group_order()).boxed(),
        opt(int()).boxed(),
        opt(namespace(0, 4)).boxed(),
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
                forward: b.0,
                subscriber_priority: b.1,
                location_filter: b.2,
                group_order: b.3,
                new_group_request: b.4,
                track_namespace_prefix: b.5,
                ..Parameters::default()
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

/// Setup Options a SETUP from `client` may carry; unknown options (never a draft-18 type, but
/// draft-16's and draft-22's own among them) in ascending type order, possibly repeated.
fn setup_options(client: bool) -> impl Strategy<Value = SetupOptions> {
    let token = auth_token(int()).prop_filter("client SETUP cannot DELETE or USE_ALIAS", move |t| {
        !client || matches!(t, AuthToken::Register { .. } | AuthToken::UseValue { .. })
    });
    let unknown_ty =
        prop_oneof![Just(0x02u64), Just(0x06), Just(0x08), 0x09..0x80u64, 0x9Du64..0x4000, int()]
            .prop_filter("not a draft-18 option type", |t| ![0x01, 0x03, 0x04, 0x05, 0x07].contains(t));
    let unknown = vec(unknown_ty.prop_flat_map(|t| (Just(t), kv_for(t, int()))), 0..4);
    (opt(bytes(20)), vec(token, 0..3), opt(int()), opt(bytes(20)), opt(bytes(20)), unknown).prop_map(
        |(path, auth_tokens, cache, authority, implementation, mut unknown)| {
            unknown.sort_by_key(|(t, _)| *t);
            SetupOptions {
                path,
                auth_tokens,
                max_auth_token_cache_size: cache,
                authority,
                implementation,
                unknown,
                ..SetupOptions::default()
            }
        },
    )
}

/// A FETCH of any Fetch Type: a standalone one with the absolute range its Start and End
/// Locations can express, or a joining one.
fn fetch() -> BoxedStrategy<Fetch> {
    let range = Union::new(vec![
        (location(int()), int())
            .prop_map(|(start, end_group)| LocationFilter::AbsoluteStartGroupEnd { start, end_group })
            .boxed(),
        (location(int()), int(), 0..u64::MAX)
            .prop_map(|(start, group, object)| LocationFilter::AbsoluteRange {
                start,
                end: Location::new(group, object),
            })
            .boxed(),
    ]);
    let standalone = (ftn(), range, params(spec::FETCH)).prop_map(|(track, range, mut params)| {
        params.location_filter = Some(range);
        (FetchKind::Standalone { track }, params)
    });
    let joining =
        (rid(), int(), any::<bool>(), params(spec::FETCH)).prop_map(|(id, start, relative, params)| {
            let kind = if relative {
                FetchKind::RelativeJoining { joining_request_id: id, joining_start: start }
            } else {
                FetchKind::AbsoluteJoining { joining_request_id: id, joining_start: start }
            };
            (kind, params)
        });
    (rid(), prop_oneof![standalone, joining])
        .prop_map(|(request_id, (kind, params))| Fetch { request_id, kind, params })
        .boxed()
}

type Case = (Message, DecodeContext);

/// Every message draft-18 supports, with the context it decodes in. Responses take their
/// Request ID from the stream, so the model's ID is the context's.
fn message() -> impl Strategy<Value = Case> {
    let id_of = |c: &DecodeContext| c.request_id.unwrap_or_default();
    let arms: Vec<BoxedStrategy<Case>> = vec![
        setup_options(true).prop_map(|options| (Message::ClientSetup(Setup { options }), CLIENT_CTL)).boxed(),
        setup_options(false)
            .prop_map(|options| (Message::ServerSetup(Setup { options }), SERVER_CTL))
            .boxed(),
        (any_ctx(), bytes(64), int(), rid())
            .prop_map(|(ctx, uri, timeout_ms, id)| {
                let new_session_uri = if ctx.sender == Role::Client { Bytes::new() } else { uri };
                // The Request ID is there exactly on the control stream (§10.4).
                let request_id = if ctx.request_id.is_none() { Some(id) } else { None };
                (Message::GoAway(GoAway { new_session_uri, timeout_ms, request_id }), ctx)
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
        (any_ctx(), fetch()).prop_map(|(ctx, f)| (Message::Fetch(f), ctx)).boxed(),
        (req_ctx(), any::<bool>(), location(int()), any::<bool>(), properties(int()))
            .prop_map(move |(ctx, end_of_track, end, whole_group, track_properties)| {
                let end_location = if whole_group || end.object == u64::MAX {
                    FetchEnd::Group(end.group)
                } else {
                    FetchEnd::Object(end)
                };
                let m = FetchOk {
                    request_id: id_of(&ctx),
                    end_of_track,
                    end_location,
                    params: Parameters::default(),
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
        Just(mt::PUBLISH), Just(mt::PUBLISH_OK), Just(mt::PUBLISH_DONE), Just(mt::FETCH),
        Just(mt::FETCH_OK), Just(mt::TRACK_STATUS), Just(mt::PUBLISH_NAMESPACE),
        Just(mt::SUBSCRIBE_NAMESPACE), Just(mt::SUBSCRIBE_TRACKS), Just(mt::NAMESPACE),
        Just(mt::NAMESPACE_DONE), Just(mt::PUBLISH_BLOCKED), Just(mt::REQUEST_UPDATE),
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

/// The Message Types table of §10.
#[test]
fn message_type_values_match_the_table() {
    assert_eq!(mt::SETUP, 0x2F00);
    assert_eq!(mt::GOAWAY, 0x10);
    assert_eq!(mt::SUBSCRIBE, 0x3);
    assert_eq!(mt::SUBSCRIBE_OK, 0x4);
    assert_eq!(mt::PUBLISH, 0x1D);
    assert_eq!(mt::PUBLISH_OK, 0x1E);
    assert_eq!(mt::PUBLISH_DONE, 0xB);
    assert_eq!(mt::FETCH, 0x16);
    assert_eq!(mt::FETCH_OK, 0x18);
    assert_eq!(mt::TRACK_STATUS, 0xD);
    assert_eq!(mt::PUBLISH_NAMESPACE, 0x6);
    assert_eq!(mt::SUBSCRIBE_NAMESPACE, 0x50);
    assert_eq!(mt::SUBSCRIBE_TRACKS, 0x51);
    assert_eq!(mt::NAMESPACE, 0x8);
    assert_eq!(mt::NAMESPACE_DONE, 0xE);
    assert_eq!(mt::PUBLISH_BLOCKED, 0xF);
    assert_eq!(mt::REQUEST_UPDATE, 0x2);
    assert_eq!(mt::REQUEST_OK, 0x7);
    assert_eq!(mt::REQUEST_ERROR, 0x5);
    // draft-18 reserves the first five; 0x1E is its PUBLISH_OK (reserved from draft-20 on).
    assert_eq!(mt::RESERVED[..5], [0x01, 0x40, 0x41, 0x20, 0x21]);
    assert_eq!(mt::PUBLISH_OK, 0x1E);
    assert_eq!(
        [fetch_type::STANDALONE, fetch_type::RELATIVE_JOINING, fetch_type::ABSOLUTE_JOINING],
        [1, 2, 3]
    );
    assert_eq!(REDIRECT, 0x34);
}

/// Each message's first bytes are its type; PUBLISH_OK and PUBLISH_BLOCKED use theirs.
#[test]
fn encoders_write_their_type() {
    let cases: [(Message, u64); 5] = [
        (Message::ClientSetup(Setup::default()), mt::SETUP),
        (Message::ServerSetup(Setup::default()), mt::SETUP),
        (Message::Namespace(TrackNamespace::default()), mt::NAMESPACE),
        (Message::PublishOk(PublishOk::default()), mt::REQUEST_OK),
        (Message::PublishSkipped(PublishSkipped::default()), mt::PUBLISH_BLOCKED),
    ];
    for (msg, ty) in cases {
        let buf = encode(&msg);
        assert_eq!(Vi64::decode(&buf).expect("type"), (ty, Vi64::size(ty).expect("size")));
    }
}

/// Unknown types, draft-22's PUBLISH_STATE_NOTIFY (0x22) and draft-16's cancel and flow
/// control messages among them, and the RESERVED rows close the session.
#[test]
fn unknown_and_reserved_types_are_violations() {
    for ty in [0x00, 0x09, 0x0A, 0x0C, 0x11, 0x15, 0x17, 0x1A, 0x1F, 0x22, 0x23, 0x52, 0x2F01, u64::MAX] {
        assert_violation(decode(&B::new().frame(ty), &CLIENT_REQ));
        // Rejected as soon as the type is readable, without waiting for the body.
        assert_violation(decode(&B::new().int(ty).0, &CLIENT_REQ));
    }
    // draft-18's RESERVED rows: 0x1E, reserved from draft-20 on, is its PUBLISH_OK.
    for ty in mt::RESERVED.into_iter().filter(|&t| t != mt::PUBLISH_OK) {
        for ctx in [CLIENT_CTL, SERVER_REQ] {
            assert_violation(decode(&B::new().frame(ty), &ctx));
            assert_violation(decode(&B::new().int(0).frame(ty), &ctx));
        }
    }
}

// ---------------------------------------------------------------- hand-written vectors

/// A client SETUP laid out per §10.3: type 0x2F00, 16-bit length, Key-Value-Pair options with
/// delta types. draft-22's MAX_FILTER_RANGES (0x06) and a grease option are unknown and kept.
#[test]
fn setup_vector() {
    let body: Vec<u8> = [
        &[0x01, 0x04][..],
        b"/moq",                                     // PATH (odd: length, bytes)
        &[0x02, 0x05, 0x01, 0x00, 0x00, b'k', b'v'], // +2 = AUTHORIZATION_TOKEN: REGISTER alias 0 type 0 "kv"
        &[0x01, 0x84, 0x00],                         // +1 = MAX_AUTH_TOKEN_CACHE_SIZE (even): 1024
        &[0x02, 0x10],                               // +2 = 0x06, unknown in draft-18 (even): 16
        &[0x01, 0x08],                               // +1 = MOQT_IMPLEMENTATION, 8 bytes
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
        unknown: vec![(0x06, KvValue::Int(16)), (0x9D, KvValue::Bytes(Bytes::from_static(&[0xAA])))],
        ..SetupOptions::default()
    };
    let client = Message::ClientSetup(Setup { options: expected.clone() });
    assert_eq!(decode(&buf, &CLIENT_CTL), Ok((client.clone(), buf.len())));
    assert_eq!(encode(&client), buf);
    let server = Message::ServerSetup(Setup { options: expected });
    assert_eq!(decode(&buf, &SERVER_CTL), Ok((server.clone(), buf.len())));
    assert_eq!(encode(&server), buf);
}

/// A SUBSCRIBE laid out per §10.7 and §10.2, with non-minimal vi64s (Request ID 5 as
/// 0x80 0x05, a Type Delta as 0xC0 0x00 0x0D) in the decoded form; the SUBSCRIPTION_FILTER is
/// length-prefixed and its AbsoluteRange carries an End Group Delta (§5.1.2).
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
        0x01, 0x04, 0x04, 0x0A, 0x00,
        0x02, // +1 = SUBSCRIPTION_FILTER, length 4: AbsoluteRange {10,0}, +2
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
            location_filter: Some(LocationFilter::AbsoluteStartGroupEnd {
                start: Location::new(10, 0),
                end_group: 12,
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

/// The four Subscription Filter types (§5.1.2), each inside its length-prefixed parameter.
#[test]
fn subscription_filter_vectors() {
    let cases = [
        (B::new().int(1), LocationFilter::RelativeStart { groups_back: 0 }),
        (B::new().int(2), LocationFilter::NextObject),
        (B::new().int(3).int(7).int(3), LocationFilter::AbsoluteStart { start: Location::new(7, 3) }),
        // End Group Delta 0: the rest of the start group.
        (
            B::new().int(4).int(7).int(3).int(0),
            LocationFilter::AbsoluteStartGroupEnd { start: Location::new(7, 3), end_group: 7 },
        ),
    ];
    for (filter, expected) in cases {
        let buf = subscribe_with(B::new().int(1).int(0x21).lp(&filter.0));
        let msg = subscribe(Parameters { location_filter: Some(expected), ..Parameters::default() });
        assert_eq!(decode(&buf, &CLIENT_CTL), Ok((msg.clone(), buf.len())), "{expected:?}");
        assert_eq!(encode(&msg), buf);
    }
    // The forms draft-18 has no filter type for.
    for f in [
        LocationFilter::None,
        LocationFilter::RelativeStart { groups_back: 2 },
        LocationFilter::AbsoluteRange { start: Location::new(1, 0), end: Location::new(2, 3) },
    ] {
        assert_unsupported(&subscribe(Parameters { location_filter: Some(f), ..Parameters::default() }));
    }
    let bad = LocationFilter::AbsoluteStartGroupEnd { start: Location::new(5, 0), end_group: 4 };
    assert_out_of_range(&subscribe(Parameters { location_filter: Some(bad), ..Parameters::default() }));
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

/// FETCH (§10.12): a standalone FETCH's End Location is the last object plus one, object 0
/// meaning the whole group; the joining forms carry a Request ID and a start.
#[test]
fn fetch_vectors() {
    let standalone = |end: (u64, u64)| {
        B::new()
            .int(6)
            .int(fetch_type::STANDALONE)
            .ns(&["a"])
            .lp(b"t")
            .int(7)
            .int(1)
            .int(end.0)
            .int(end.1)
            .int(1)
            .int(0x20)
            .u8(9) // SUBSCRIBER_PRIORITY 9
            .frame(mt::FETCH)
    };
    let fetch = |range| {
        Message::Fetch(Fetch {
            request_id: RequestId(6),
            kind: FetchKind::Standalone { track: track(&["a"], "t") },
            params: Parameters {
                location_filter: Some(range),
                subscriber_priority: Some(9),
                ..Parameters::default()
            },
        })
    };
    for (end, range) in [
        ((9, 0), LocationFilter::AbsoluteStartGroupEnd { start: Location::new(7, 1), end_group: 9 }),
        ((9, 5), LocationFilter::AbsoluteRange { start: Location::new(7, 1), end: Location::new(9, 4) }),
    ] {
        let buf = standalone(end);
        assert_eq!(decode(&buf, &CLIENT_CTL), Ok((fetch(range), buf.len())));
        assert_eq!(encode(&fetch(range)), buf);
    }
    for (ty, kind) in [
        (
            fetch_type::RELATIVE_JOINING,
            FetchKind::RelativeJoining { joining_request_id: RequestId(2), joining_start: 3 },
        ),
        (
            fetch_type::ABSOLUTE_JOINING,
            FetchKind::AbsoluteJoining { joining_request_id: RequestId(2), joining_start: 3 },
        ),
    ] {
        let buf = B::new().int(8).int(ty).int(2).int(3).int(0).frame(mt::FETCH);
        let msg = Message::Fetch(Fetch { request_id: RequestId(8), kind, params: Parameters::default() });
        assert_eq!(decode(&buf, &CLIENT_REQ), Ok((msg.clone(), buf.len())));
        assert_eq!(encode(&msg), buf);
    }
    // An unknown Fetch Type.
    for ty in [0u64, 4, 0x3F] {
        assert_violation(decode(&B::new().int(8).int(ty).int(2).int(3).int(0).frame(mt::FETCH), &CLIENT_CTL));
    }
    // A standalone FETCH needs an absolute range; a joining one has none; an inclusive end at
    // the last possible object has no "plus one".
    let track = FetchKind::Standalone { track: track(&["a"], "t") };
    assert_unsupported(&Message::Fetch(Fetch {
        request_id: RequestId(1),
        kind: track.clone(),
        params: Parameters::default(),
    }));
    let relative = LocationFilter::RelativeStart { groups_back: 0 };
    let params = Parameters { location_filter: Some(relative), ..Parameters::default() };
    assert_unsupported(&Message::Fetch(Fetch { request_id: RequestId(1), kind: track.clone(), params }));
    let joining = FetchKind::AbsoluteJoining { joining_request_id: RequestId(0), joining_start: 0 };
    let range = LocationFilter::AbsoluteStart { start: Location::new(0, 0) };
    let params = Parameters { location_filter: Some(range), ..Parameters::default() };
    assert_unsupported(&Message::Fetch(Fetch { request_id: RequestId(1), kind: joining, params }));
    let last = LocationFilter::AbsoluteRange { start: Location::new(0, 0), end: Location::new(0, u64::MAX) };
    let params = Parameters { location_filter: Some(last), ..Parameters::default() };
    assert_out_of_range(&Message::Fetch(Fetch { request_id: RequestId(1), kind: track, params }));
}

/// FETCH_OK's End Location (§10.13) is the last object plus one; object 0 is the whole group.
#[test]
fn fetch_ok_vectors() {
    for ((g, o), end) in [((9, 5), FetchEnd::Object(Location::new(9, 4))), ((9, 0), FetchEnd::Group(9))] {
        let buf = B::new().u8(1).int(g).int(o).int(0).frame(mt::FETCH_OK);
        let expected = Message::FetchOk(FetchOk {
            request_id: RequestId(4),
            end_of_track: true,
            end_location: end,
            ..FetchOk::default()
        });
        assert_eq!(decode(&buf, &SERVER_REQ), Ok((expected.clone(), buf.len())));
        assert_eq!(encode(&expected), buf);
    }
    let last = FetchEnd::Object(Location::new(1, u64::MAX));
    assert_out_of_range(&Message::FetchOk(FetchOk { end_location: last, ..FetchOk::default() }));
    for bad in [2u8, 0xFF] {
        assert_violation(decode(&B::new().u8(bad).int(0).int(1).int(0).frame(mt::FETCH_OK), &SERVER_REQ));
    }
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

/// GOAWAY (§10.4): URI, Timeout, and a Request ID on the control stream only.
#[test]
fn goaway_vectors() {
    let control = B::new().lp(b"moqt://x").int(3000).int(6).frame(mt::GOAWAY);
    let expected = Message::GoAway(GoAway {
        new_session_uri: Bytes::from_static(b"moqt://x"),
        timeout_ms: 3000,
        request_id: Some(RequestId(6)),
    });
    assert_eq!(decode(&control, &SERVER_CTL), Ok((expected.clone(), control.len())));
    assert_eq!(encode(&expected), control);
    // The same bytes on a request stream have one field too many.
    assert_violation(decode(&control, &SERVER_REQ));

    let request = B::new().lp(b"moqt://x").int(3000).frame(mt::GOAWAY);
    let expected = Message::GoAway(GoAway {
        new_session_uri: Bytes::from_static(b"moqt://x"),
        timeout_ms: 3000,
        request_id: None,
    });
    assert_eq!(decode(&request, &SERVER_REQ), Ok((expected.clone(), request.len())));
    assert_eq!(encode(&expected), request);
    // ...and on the control stream, one too few.
    assert_violation(decode(&request, &SERVER_CTL));
    // From a client: no URI.
    let client = B::new().lp(b"moqt://a").int(0).int(1).frame(mt::GOAWAY);
    assert_violation(decode(&client, &CLIENT_CTL));
    assert!(decode(&B::new().lp(b"").int(0).int(1).frame(mt::GOAWAY), &CLIENT_CTL).is_ok());
    // Over 8192 bytes; exactly 8192 is fine.
    let uri = vec![b'u'; 8193];
    assert_violation(decode(&B::new().lp(&uri).int(0).int(0).frame(mt::GOAWAY), &SERVER_CTL));
    assert!(decode(&B::new().lp(&uri[..8192]).int(0).int(0).frame(mt::GOAWAY), &SERVER_CTL).is_ok());
    assert_out_of_range(&Message::GoAway(GoAway { new_session_uri: Bytes::from(uri), ..GoAway::default() }));
}

/// REQUEST_ERROR with a Redirect after the reason (§10.6).
#[test]
fn redirect_vector() {
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
    // REDIRECT without a Redirect, another code with one, a Connect URI from a client.
    assert_violation(decode(&B::new().int(REDIRECT).int(0).lp(b"").frame(mt::REQUEST_ERROR), &SERVER_REQ));
    let trailing = B::new().int(0x10).int(0).lp(b"").lp(b"").ns(&["a"]).lp(b"").frame(mt::REQUEST_ERROR);
    assert_violation(decode(&trailing, &SERVER_REQ));
    assert_violation(decode(&buf, &CLIENT_REQ));
    assert_out_of_range(&Message::RequestError(RequestError {
        error_code: REDIRECT,
        ..RequestError::default()
    }));
    assert_out_of_range(&Message::RequestError(RequestError {
        error_code: 0x10,
        redirect: Some(Redirect::default()),
        ..RequestError::default()
    }));
}

/// PUBLISH_OK is a REQUEST_OK (§10.5): written as 0x7 with the subscription's parameters; the
/// 0x1E the table still lists decodes as PUBLISH_OK, without Track Properties.
#[test]
fn publish_ok_vectors() {
    let params = Parameters {
        forward: Some(false),
        subscriber_priority: Some(3),
        location_filter: Some(LocationFilter::NextObject),
        ..Parameters::default()
    };
    let msg = Message::PublishOk(PublishOk { request_id: RequestId(4), params: params.clone() });
    let body = B::new().int(3).int(0x10).u8(0).int(0x10).u8(3).int(0x01).lp(&[0x02]);
    let buf = encode(&msg);
    assert_eq!(buf, body.clone().frame(mt::REQUEST_OK));
    let as_ok = Message::RequestOk(RequestOk {
        request_id: RequestId(4),
        params,
        track_properties: Properties::new(),
    });
    assert_eq!(decode(&buf, &CLIENT_REQ), Ok((as_ok, buf.len())));

    let legacy = body.clone().frame(mt::PUBLISH_OK);
    assert_eq!(decode(&legacy, &CLIENT_REQ), Ok((msg, legacy.len())));
    assert_violation(decode(&legacy, &CLIENT_CTL));
    assert_violation(decode(&body.int(0x0E).int(1).frame(mt::PUBLISH_OK), &CLIENT_REQ));
    // LARGEST_OBJECT belongs to REQUEST_UPDATE_OK and TRACK_STATUS_OK, not PUBLISH_OK.
    assert_violation(decode(&B::new().int(1).int(0x09).int(1).int(1).frame(mt::PUBLISH_OK), &CLIENT_REQ));
    assert_unsupported(&Message::PublishOk(PublishOk {
        request_id: RequestId(4),
        params: Parameters { largest_object: Some(Location::new(1, 1)), ..Parameters::default() },
    }));
}

/// PUBLISH_BLOCKED (§10.20) is the model's PUBLISH_SKIPPED: suffix and track name.
#[test]
fn publish_blocked_vector() {
    let buf = B::new().ns(&["x"]).lp(b"t").frame(mt::PUBLISH_BLOCKED);
    let expected = Message::PublishSkipped(PublishSkipped {
        request_id: RequestId(4),
        namespace_suffix: TrackNamespace::from_strs(&["x"]),
        track_name: Bytes::from_static(b"t"),
    });
    assert_eq!(decode(&buf, &SERVER_REQ), Ok((expected.clone(), buf.len())));
    assert_eq!(encode(&expected), buf);
    assert_violation(decode(&buf, &SERVER_CTL));
}

// ---------------------------------------------------------------- parameter tables

/// One sample value of each parameter type (draft-18's and draft-22's), alone in a Parameters.
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
        mt::FETCH => (B::new().int(2).int(fetch_type::ABSOLUTE_JOINING).int(0).int(0), spec::FETCH),
        mt::SUBSCRIBE_OK => (B::new().int(1), spec::SUBSCRIBE_OK),
        mt::PUBLISH => (track().int(1), spec::PUBLISH),
        mt::FETCH_OK => (B::new().u8(0).int(1).int(1), spec::FETCH_OK),
        mt::PUBLISH_NAMESPACE => (B::new().int(2).ns(&["a"]), spec::PUBLISH_NAMESPACE),
        mt::SUBSCRIBE_NAMESPACE => (B::new().int(2).ns(&[]), spec::SUBSCRIBE_NAMESPACE),
        mt::SUBSCRIBE_TRACKS => (B::new().int(2).ns(&["a"]), spec::SUBSCRIBE_TRACKS),
        mt::REQUEST_UPDATE => (B::new().int(2), spec::REQUEST_UPDATE),
        mt::REQUEST_OK => (B::new(), spec::REQUEST_OK),
        mt::PUBLISH_OK => (B::new(), spec::PUBLISH_OK),
        _ => unreachable!(),
    }
}

fn params_of(msg: &Message) -> &Parameters {
    match msg {
        Message::Subscribe(m) | Message::TrackStatus(m) => &m.params,
        Message::Fetch(m) => &m.params,
        Message::SubscribeOk(m) => &m.params,
        Message::Publish(m) => &m.params,
        Message::FetchOk(m) => &m.params,
        Message::PublishNamespace(m) => &m.params,
        Message::SubscribeNamespace(m) => &m.params,
        Message::SubscribeTracks(m) => &m.params,
        Message::RequestUpdate(m) => &m.params,
        Message::RequestOk(m) => &m.params,
        Message::PublishOk(m) => &m.params,
        other => panic!("no parameters in {other:?}"),
    }
}

/// Every draft-18 parameter type is accepted exactly in the messages whose §10.2.x sentence
/// names it; in any other it is a PROTOCOL_VIOLATION on decode (§10.2.1) and `Unsupported` on
/// encode. Messages with Track Properties get an empty list after the parameters.
#[test]
fn parameters_allowed_exactly_per_message() {
    let types = [
        mt::SUBSCRIBE,
        mt::TRACK_STATUS,
        mt::FETCH,
        mt::SUBSCRIBE_OK,
        mt::PUBLISH,
        mt::FETCH_OK,
        mt::PUBLISH_NAMESPACE,
        mt::SUBSCRIBE_NAMESPACE,
        mt::SUBSCRIBE_TRACKS,
        mt::REQUEST_UPDATE,
        mt::REQUEST_OK,
        mt::PUBLISH_OK,
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
                if mty != mt::PUBLISH_OK {
                    assert_eq!(encode(&msg), buf, "{mty:#x} / {pty:#x} re-encodes");
                }
            } else {
                assert_violation(got);
            }
        }
    }
}

#[test]
fn encoding_a_disallowed_parameter_is_unsupported() {
    let all: Vec<u64> = spec::ALL.iter().chain(spec::D22_ONLY).copied().collect();
    for &pty in all.iter().filter(|t| !spec::SUBSCRIBE.contains(t)) {
        assert_unsupported(&subscribe(sample(pty)));
    }
    for &pty in all.iter().filter(|t| !spec::REQUEST_OK.contains(t)) {
        assert_unsupported(&Message::RequestOk(RequestOk { params: sample(pty), ..RequestOk::default() }));
    }
    for &pty in all.iter().filter(|t| !spec::PUBLISH_OK.contains(t)) {
        assert_unsupported(&Message::PublishOk(PublishOk { params: sample(pty), ..PublishOk::default() }));
    }
    for &pty in all.iter().filter(|t| !spec::REQUEST_UPDATE.contains(t)) {
        assert_unsupported(&Message::RequestUpdate(RequestUpdate {
            params: sample(pty),
            ..RequestUpdate::default()
        }));
    }
}

/// draft-22's parameter types are unknown in draft-18, whatever the message.
#[test]
fn draft22_parameters_are_unknown() {
    for &ty in spec::D22_ONLY {
        assert_violation(decode(&subscribe_with(B::new().int(1).int(ty).int(0)), &CLIENT_CTL));
        assert_violation(decode(
            &B::new().int(2).int(1).int(ty).int(0).frame(mt::REQUEST_UPDATE),
            &CLIENT_REQ,
        ));
    }
}

/// AUTHORIZATION TOKEN may repeat (§10.2.2); nothing else may.
#[test]
fn repeatable_parameters() {
    let tokens = vec![
        AuthToken::Register { alias: 1, token_type: 2, value: Bytes::from_static(b"abc") },
        AuthToken::UseAlias { alias: 1 },
        AuthToken::Delete { alias: 1 },
        AuthToken::UseValue { token_type: 0, value: Bytes::new() },
    ];
    let msg = subscribe(Parameters { auth_tokens: tokens, ..Parameters::default() });
    let buf = encode(&msg);
    assert_eq!(decode(&buf, &CLIENT_CTL), Ok((msg, buf.len())));
    // Two EXPIRES in SUBSCRIBE_OK (the second with Type Delta 0).
    let buf = B::new().int(1).int(2).int(0x08).int(1).int(0).int(2).frame(mt::SUBSCRIBE_OK);
    assert_violation(decode(&buf, &SERVER_REQ));
    // Two FORWARD, two SUBSCRIPTION_FILTER in SUBSCRIBE.
    assert_violation(decode(&subscribe_with(B::new().int(2).int(0x10).u8(1).int(0).u8(1)), &CLIENT_CTL));
    let f = [0x02u8];
    assert_violation(decode(&subscribe_with(B::new().int(2).int(0x21).lp(&f).int(0).lp(&f)), &CLIENT_CTL));
}

// ---------------------------------------------------------------- error paths

/// SUBSCRIBE body: request ID 2, track a/b, then `params` raw.
fn subscribe_with(params: B) -> Vec<u8> {
    B::new().int(2).ns(&["a"]).lp(b"b").raw(&params.0).frame(mt::SUBSCRIBE)
}

#[test]
fn length_mismatch_is_a_violation() {
    let good = B::new().int(2).ns(&["a"]).lp(b"b").int(0);
    assert_violation(decode(&good.clone().u8(0).frame(mt::SUBSCRIBE), &CLIENT_CTL));
    let mut short = good.clone().frame(mt::SUBSCRIBE);
    short[2] -= 1;
    short.pop();
    assert_violation(decode(&short, &CLIENT_CTL));
    // A parameter count larger than the body can hold.
    assert_violation(decode(&B::new().int(2).ns(&["a"]).lp(b"b").int(9).frame(mt::SUBSCRIBE), &CLIENT_CTL));
    // Trailing bytes after messages without Track Properties.
    assert_violation(decode(&B::new().ns(&["a"]).u8(1).frame(mt::NAMESPACE), &CLIENT_REQ));
    assert_violation(decode(&B::new().int(0).int(0).lp(b"").u8(0).frame(mt::PUBLISH_DONE), &SERVER_REQ));
    assert_violation(decode(
        &B::new().int(2).int(2).int(1).int(1).int(0).u8(0).frame(mt::FETCH),
        &CLIENT_REQ,
    ));
}

#[test]
fn request_stream_messages_on_the_control_stream() {
    let responses = [
        B::new().int(1).int(0).frame(mt::SUBSCRIBE_OK),
        B::new().int(0).frame(mt::REQUEST_OK),
        B::new().int(0).frame(mt::PUBLISH_OK),
        B::new().int(0).int(0).lp(b"").frame(mt::REQUEST_ERROR),
        B::new().int(0).int(0).lp(b"").frame(mt::PUBLISH_DONE),
        B::new().u8(0).int(0).int(0).int(0).frame(mt::FETCH_OK),
        B::new().ns(&[]).lp(b"").frame(mt::PUBLISH_BLOCKED),
        B::new().int(2).int(0).frame(mt::REQUEST_UPDATE),
        B::new().ns(&["a"]).frame(mt::NAMESPACE),
        B::new().ns(&["a"]).frame(mt::NAMESPACE_DONE),
    ];
    for buf in responses {
        assert!(decode(&buf, &SERVER_REQ).is_ok(), "valid on a request stream: {buf:02x?}");
        assert_violation(decode(&buf, &SERVER_CTL));
        assert_violation(decode(&buf, &CLIENT_CTL));
    }
    assert_violation(decode(&B::new().frame(mt::SETUP), &CLIENT_REQ));
}

#[test]
fn namespace_limits() {
    let fields: Vec<String> = (0..33).map(|i| format!("f{i}")).collect();
    let refs: Vec<&str> = fields.iter().map(String::as_str).collect();
    assert_violation(decode(&B::new().ns(&refs).frame(mt::NAMESPACE), &CLIENT_REQ));
    assert!(decode(&B::new().ns(&refs[..32]).frame(mt::NAMESPACE), &CLIENT_REQ).is_ok());
    assert_violation(decode(&B::new().ns(&["a", ""]).frame(mt::NAMESPACE), &CLIENT_REQ));
    // Full track name over 4096 bytes, and exactly 4096.
    let big = "x".repeat(4000);
    let name = vec![b'n'; 97];
    let sub = |n: &[u8]| B::new().int(2).ns(&[big.as_str()]).lp(n).int(0).frame(mt::SUBSCRIBE);
    assert_violation(decode(&sub(&name), &CLIENT_CTL));
    assert!(decode(&sub(&name[..96]), &CLIENT_CTL).is_ok());
    // A track namespace with no fields is allowed (§2.4.1).
    assert!(decode(&B::new().int(2).ns(&[]).lp(b"t").int(0).frame(mt::SUBSCRIBE), &CLIENT_CTL).is_ok());
    // TRACK_NAMESPACE_PREFIX follows the same rules.
    let prefix = B::new().int(2).int(1).int(0x34).ns(&["a", ""]).frame(mt::REQUEST_UPDATE);
    assert_violation(decode(&prefix, &CLIENT_REQ));
    assert_out_of_range(&Message::Namespace(TrackNamespace::from_strs(&refs)));
}

#[test]
fn reason_phrase_limit() {
    let reason = vec![b'r'; 1025];
    assert_violation(decode(&B::new().int(0).int(0).lp(&reason).frame(mt::PUBLISH_DONE), &SERVER_REQ));
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

/// Types only ascend; a Type Delta that would carry the type past 2^64-1 is a violation.
#[test]
fn parameter_type_overflow_is_a_violation() {
    let buf = subscribe_with(B::new().int(2).int(0x32).int(1).int(u64::MAX).int(0));
    assert_violation(decode(&buf, &CLIENT_CTL));
}

#[test]
fn uint8_parameter_values() {
    // FORWARD is 0 or 1; GROUP_ORDER is 1 or 2 (§10.2.12, §10.2.8).
    for bad in [2u8, 0x80, 0xFF] {
        assert_violation(decode(&subscribe_with(B::new().int(1).int(0x10).u8(bad)), &CLIENT_CTL));
    }
    for bad in [0u8, 3, 0xFF] {
        assert_violation(decode(&subscribe_with(B::new().int(1).int(0x22).u8(bad)), &CLIENT_CTL));
    }
    // SUBSCRIBER_PRIORITY is one byte, not a vi64: 0xC0 is the value 192.
    let (msg, _) = decode(&subscribe_with(B::new().int(1).int(0x20).u8(0xC0)), &CLIENT_CTL).expect("decodes");
    assert_eq!(params_of(&msg).subscriber_priority, Some(192));
}

#[test]
fn subscription_filter_errors() {
    // Unknown Filter Types, draft-22's Location Filter Types 0x00 and 0x05 among them.
    for ty in [0u64, 5, 6, 0x21, u64::MAX] {
        assert_violation(decode(
            &subscribe_with(B::new().int(1).int(0x21).lp(&B::new().int(ty).0)),
            &CLIENT_CTL,
        ));
    }
    // Start Group + End Group Delta past 2^64-1; u64::MAX + 0 is fine.
    let over = B::new().int(4).int(u64::MAX).int(0).int(1).0;
    assert_violation(decode(&subscribe_with(B::new().int(1).int(0x21).lp(&over)), &CLIENT_CTL));
    let ok = B::new().int(4).int(u64::MAX).int(0).int(0).0;
    assert!(decode(&subscribe_with(B::new().int(1).int(0x21).lp(&ok)), &CLIENT_CTL).is_ok());
    // A filter shorter or longer than its length, or a length past the message.
    let short = B::new().int(3).int(1).0;
    assert_violation(decode(&subscribe_with(B::new().int(1).int(0x21).lp(&short)), &CLIENT_CTL));
    let long = B::new().int(2).int(0).0;
    assert_violation(decode(&subscribe_with(B::new().int(1).int(0x21).lp(&long)), &CLIENT_CTL));
    assert_violation(decode(&subscribe_with(B::new().int(1).int(0x21).int(9).int(2)), &CLIENT_CTL));
    // draft-22's unprefixed form (type directly after the Type Delta) does not parse: 0x02 is
    // read as a length of two bytes that are not there.
    assert_violation(decode(&subscribe_with(B::new().int(1).int(0x21).int(2)), &CLIENT_CTL));
}

#[test]
fn token_with_unknown_alias_type_is_a_formatting_error() {
    let token = B::new().int(4).int(0).0;
    assert_code(
        decode(&subscribe_with(B::new().int(1).int(0x03).lp(&token)), &CLIENT_CTL),
        ErrorCode::KeyValueFormatting,
    );
    let setup = B::new().int(0x03).lp(&B::new().int(9).0).frame(mt::SETUP);
    assert_code(decode(&setup, &CLIENT_CTL), ErrorCode::KeyValueFormatting);
}

#[test]
fn setup_option_rules() {
    // A duplicate known option.
    assert_violation(decode(&B::new().int(0x01).lp(b"/a").int(0).lp(b"/b").frame(mt::SETUP), &CLIENT_CTL));
    assert_violation(decode(&B::new().int(0x04).int(1).int(0).int(2).frame(mt::SETUP), &SERVER_CTL));
    // draft-22's options are unknown here, so they may repeat.
    let buf = B::new().int(0x06).int(1).int(0).int(2).int(0x02).int(3).frame(mt::SETUP);
    let (msg, _) = decode(&buf, &SERVER_CTL).expect("decodes");
    let Message::ServerSetup(Setup { options }) = &msg else { panic!("{msg:?}") };
    assert_eq!(options.unknown, [(0x06, KvValue::Int(1)), (0x06, KvValue::Int(2)), (0x08, KvValue::Int(3))]);
    assert_eq!(options.max_filter_ranges, None);
    assert_eq!(encode(&msg), buf);
    // A client SETUP may not DELETE or USE_ALIAS; a server's may.
    let delete = B::new().int(0x03).lp(&B::new().int(0).int(1).0).frame(mt::SETUP);
    assert_violation(decode(&delete, &CLIENT_CTL));
    assert!(decode(&delete, &SERVER_CTL).is_ok());
    let options =
        SetupOptions { auth_tokens: vec![AuthToken::Delete { alias: 1 }], ..SetupOptions::default() };
    assert_out_of_range(&Message::ClientSetup(Setup { options }));
    // Options of other drafts have no draft-18 form; unknown options cannot reuse a known type.
    for options in [
        SetupOptions { max_request_id: Some(1), ..SetupOptions::default() },
        SetupOptions { max_filter_ranges: Some(1), ..SetupOptions::default() },
        SetupOptions { max_request_updates: Some(1), ..SetupOptions::default() },
    ] {
        assert_unsupported(&Message::ClientSetup(Setup { options }));
    }
    let options =
        SetupOptions { unknown: vec![(0x07, KvValue::Bytes(Bytes::new()))], ..SetupOptions::default() };
    assert_out_of_range(&Message::ServerSetup(Setup { options }));
}

/// What only draft-16 or only draft-22 has is refused, and nothing is written.
#[test]
fn other_drafts_messages_are_unsupported() {
    let cases = [
        Message::MaxRequestId(RequestId(1)),
        Message::RequestsBlocked(RequestId(1)),
        Message::Unsubscribe(RequestId(1)),
        Message::FetchCancel(RequestId(1)),
        Message::PublishNamespaceDone(RequestId(1)),
        Message::PublishNamespaceCancel(PublishNamespaceCancel::default()),
        Message::PublishStateNotify(PublishStateNotify::default()),
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
    assert_out_of_range(&Message::SubscribeOk(SubscribeOk {
        track_properties: props,
        ..SubscribeOk::default()
    }));
}

/// moq-lite-js's draft-18 dialect (ARCHITECTURE.md, "Peer quirks"): parameter values by the
/// Key-Value-Pair rule. A SUBSCRIBER_PRIORITY above 127 is a two-byte varint, LARGEST_OBJECT a
/// length-prefixed Location; every message still round-trips, and a varint above the uint8
/// range is refused.
#[test]
fn moq_lite_js_dialect() {
    use wire::dialect::D18_MOQ_LITE_JS as D;
    let track =
        FullTrackName { namespace: TrackNamespace::from_strs(&["demo"]), name: Bytes::from_static(b"v") };
    let params = Parameters {
        subscriber_priority: Some(155),
        forward: Some(true),
        group_order: Some(GroupOrder::Descending),
        ..Parameters::default()
    };
    let sub = Message::Subscribe(Subscribe { request_id: RequestId(4), track, params });
    let mut lite = Vec::new();
    wire::control::encode_message(&D, &sub, &mut lite).expect("encodes");
    let spec = encode(&sub);
    assert_eq!(lite.len(), spec.len() + 1, "the priority takes two bytes");
    assert!(lite.windows(3).any(|w| w == [0x10, 0x80, 0x9b]), "{lite:02x?}");
    assert_eq!(wire::control::decode_message(&D, &lite, &CLIENT_REQ), Ok((sub, lite.len())));

    // Its Largest Object filter (type 2) is the latest group from its first object, at
    // draft-18 and at draft-16 (where the parameter is length-prefixed too).
    let latest = Parameters {
        location_filter: Some(LocationFilter::RelativeStart { groups_back: 1 }),
        ..Parameters::default()
    };
    let track =
        FullTrackName { namespace: TrackNamespace::from_strs(&["demo"]), name: Bytes::from_static(b"v") };
    let sub = Message::Subscribe(Subscribe { request_id: RequestId(4), track, params: latest });
    for version in [wire::Version::Draft18, wire::Version::Draft16] {
        let codec = version.control_codec().for_peer(Some(b"moq-lite-js"));
        assert!(codec.is_quirk());
        let mut lite = Vec::new();
        codec.encode_message(&sub, &mut lite).expect("encodes");
        assert!(lite.ends_with(&[0x21, 0x01, 0x02]), "{version:?}: {lite:02x?}");
        let ctx =
            if version == wire::Version::Draft16 { DecodeContext::control(Role::Client) } else { CLIENT_REQ };
        assert_eq!(codec.decode_message(&lite, &ctx), Ok((sub.clone(), lite.len())), "{version:?}");
        // As the draft is written, the same bytes ask for the objects after the largest.
        let (plain, _) = version.decode_message(&lite, &ctx).expect("decodes");
        let Message::Subscribe(plain) = plain else { panic!("{plain:?}") };
        assert_eq!(plain.params.location_filter, Some(LocationFilter::NextObject), "{version:?}");
    }

    let ok = Message::SubscribeOk(SubscribeOk {
        request_id: RequestId(4),
        track_alias: TrackAlias(1),
        params: Parameters { largest_object: Some(Location::new(3, 0)), ..Parameters::default() },
        track_properties: Properties::new(),
    });
    let mut lite = Vec::new();
    wire::control::encode_message(&D, &ok, &mut lite).expect("encodes");
    assert_eq!(&lite[3..], [0x01, 0x01, 0x09, 0x02, 0x03, 0x00]);
    assert_eq!(wire::control::decode_message(&D, &lite, &CLIENT_REQ), Ok((ok, lite.len())));

    // As a publisher (`<moq-publish>`), its SUBSCRIBE_OK carries GROUP_ORDER 2, which draft-18
    // does not allow there: read and dropped for it, a violation from anyone else.
    let theirs = B::new().int(7).int(1).int(0x22).int(2).frame(mt::SUBSCRIBE_OK);
    let bare = Message::SubscribeOk(SubscribeOk {
        request_id: RequestId(4),
        track_alias: TrackAlias(7),
        params: Parameters::default(),
        track_properties: Properties::new(),
    });
    assert_eq!(wire::control::decode_message(&D, &theirs, &CLIENT_REQ), Ok((bare, theirs.len())));
    assert_violation(wire::control::decode_message(&wire::dialect::D18, &theirs, &CLIENT_REQ));

    // Priority 300 as a varint: out of the uint8 range.
    let body = B::new().int(4).ns(&["demo"]).lp(b"v").int(1).int(0x20).int(300);
    assert_violation(wire::control::decode_message(&D, &body.frame(mt::SUBSCRIBE), &CLIENT_REQ));
}
