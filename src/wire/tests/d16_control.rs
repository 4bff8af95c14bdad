//! draft-16 control message and parameter codec: round trips, truncation, arbitrary input,
//! every error path with its exact code, and hand-written vectors checked against the spec.

mod support;

use bytes::Bytes;
use proptest::collection::vec;
use proptest::prelude::*;
use support::strategies::*;
use wire::d16::control::{decode_message, encode_message, message_type as mt};
use wire::d16::params::{param_type as pt, ParamMessage};
use wire::model::*;
use wire::{DecodeError, EncodeError, ErrorCode, Quic, VarInt};

const MAX: u64 = (1 << 62) - 1;

// ---------------------------------------------------------------- strategies

fn rid() -> impl Strategy<Value = RequestId> {
    int62().prop_map(RequestId)
}

fn loc() -> impl Strategy<Value = Location> {
    location(int62())
}

/// A Subscription Filter draft-16 can express.
fn sub_filter() -> impl Strategy<Value = LocationFilter> {
    prop_oneof![
        Just(LocationFilter::RelativeStart { groups_back: 0 }),
        Just(LocationFilter::NextObject),
        loc().prop_map(|start| LocationFilter::AbsoluteStart { start }),
        (loc(), int62()).prop_map(|(start, extra)| LocationFilter::AbsoluteStartGroupEnd {
            start,
            end_group: start.group.saturating_add(extra).min(MAX),
        }),
    ]
}

/// Every field draft-16 can carry, each present or not.
fn d16_params() -> impl Strategy<Value = Parameters> {
    (
        (
            proptest::option::of(1..=MAX),
            vec(auth_token(int62()), 0..3),
            proptest::option::of(int62()),
            proptest::option::of(loc()),
            proptest::option::of(any::<bool>()),
        ),
        (
            proptest::option::of(any::<u8>()),
            proptest::option::of(sub_filter()),
            proptest::option::of(prop_oneof![Just(GroupOrder::Ascending), Just(GroupOrder::Descending)]),
            proptest::option::of(int62()),
        ),
    )
        .prop_map(|((timeout, tokens, expires, largest, forward), (prio, filter, order, ngr))| {
            Parameters {
                object_delivery_timeout: timeout,
                auth_tokens: tokens,
                expires,
                largest_object: largest,
                forward,
                subscriber_priority: prio,
                location_filter: filter,
                group_order: order,
                new_group_request: ngr,
                ..Parameters::default()
            }
        })
}

/// Drops every field `msg` may not carry.
fn mask(mut p: Parameters, msg: ParamMessage) -> Parameters {
    let allows = |ty| msg.allows(ty);
    if !allows(pt::DELIVERY_TIMEOUT) {
        p.object_delivery_timeout = None;
    }
    if !allows(pt::AUTHORIZATION_TOKEN) {
        p.auth_tokens.clear();
    }
    if !allows(pt::EXPIRES) {
        p.expires = None;
    }
    if !allows(pt::LARGEST_OBJECT) {
        p.largest_object = None;
    }
    if !allows(pt::FORWARD) {
        p.forward = None;
    }
    if !allows(pt::SUBSCRIBER_PRIORITY) {
        p.subscriber_priority = None;
    }
    if !allows(pt::SUBSCRIPTION_FILTER) {
        p.location_filter = None;
    }
    if !allows(pt::GROUP_ORDER) {
        p.group_order = None;
    }
    if !allows(pt::NEW_GROUP_REQUEST) {
        p.new_group_request = None;
    }
    p
}

fn params_for(msg: ParamMessage) -> impl Strategy<Value = Parameters> {
    d16_params().prop_map(move |p| mask(p, msg))
}

fn props() -> impl Strategy<Value = Properties> {
    properties(int62())
}

const KNOWN_SETUP: [u64; 6] = [1, 2, 3, 4, 5, 7];

fn setup_options(sender: Role) -> impl Strategy<Value = SetupOptions> {
    let token = auth_token(int62()).prop_filter("no alias references in CLIENT_SETUP", move |t| {
        sender == Role::Server || !matches!(t, AuthToken::Delete { .. } | AuthToken::UseAlias { .. })
    });
    let unknown_ty = prop_oneof![Just(6u64), Just(8u64), 0..0x100u64, 0x3800..0x4000u64, int62()]
        .prop_filter("unknown type", |t| !KNOWN_SETUP.contains(t));
    let unknown = vec(unknown_ty.prop_flat_map(|t| (Just(t), kv_for(t, int62()))), 0..4).prop_map(|mut u| {
        u.sort_by_key(|(t, _)| *t);
        u
    });
    (
        proptest::option::of(bytes(20)),
        proptest::option::of(int62()),
        vec(token, 0..3),
        proptest::option::of(int62()),
        proptest::option::of(bytes(20)),
        proptest::option::of(bytes(20)),
        unknown,
    )
        .prop_map(|(path, max_request_id, auth_tokens, cache, authority, implementation, unknown)| {
            SetupOptions {
                path,
                max_request_id,
                auth_tokens,
                max_auth_token_cache_size: cache,
                authority,
                implementation,
                unknown,
                ..SetupOptions::default()
            }
        })
}

fn subscribe(msg: ParamMessage) -> impl Strategy<Value = Subscribe> {
    (rid(), full_track_name(), params_for(msg)).prop_map(|(request_id, track, params)| Subscribe {
        request_id,
        track,
        params,
    })
}

fn fetch() -> impl Strategy<Value = Fetch> {
    let end_incl = location(int_upto(MAX - 1));
    let standalone = (
        full_track_name(),
        prop_oneof![
            (loc(), int62())
                .prop_map(|(start, end_group)| LocationFilter::AbsoluteStartGroupEnd { start, end_group }),
            (loc(), end_incl).prop_map(|(start, end)| LocationFilter::AbsoluteRange { start, end }),
        ],
    );
    let kind_and_range = prop_oneof![
        standalone.prop_map(|(track, range)| (FetchKind::Standalone { track }, Some(range))),
        (rid(), int62()).prop_map(|(joining_request_id, joining_start)| (
            FetchKind::RelativeJoining { joining_request_id, joining_start },
            None
        )),
        (rid(), int62()).prop_map(|(joining_request_id, joining_start)| (
            FetchKind::AbsoluteJoining { joining_request_id, joining_start },
            None
        )),
    ];
    (rid(), kind_and_range, params_for(ParamMessage::Fetch)).prop_map(
        |(request_id, (kind, range), mut params)| {
            params.location_filter = range;
            Fetch { request_id, kind, params }
        },
    )
}

fn fetch_ok() -> impl Strategy<Value = FetchOk> {
    let end = prop_oneof![
        int62().prop_map(FetchEnd::Group),
        location(int_upto(MAX - 1)).prop_map(FetchEnd::Object)
    ];
    (rid(), any::<bool>(), end, props()).prop_map(
        |(request_id, end_of_track, end_location, track_properties)| FetchOk {
            request_id,
            end_of_track,
            end_location,
            params: Parameters::default(),
            track_properties,
        },
    )
}

fn reason() -> impl Strategy<Value = Bytes> {
    prop_oneof![bytes(40), Just(Bytes::from(vec![b'r'; 1024]))]
}

/// Every message draft-16 can carry.
fn any_message() -> impl Strategy<Value = Message> {
    prop_oneof![
        setup_options(Role::Client).prop_map(|options| Message::ClientSetup(Setup { options })),
        setup_options(Role::Server).prop_map(|options| Message::ServerSetup(Setup { options })),
        prop_oneof![bytes(60), Just(Bytes::from(vec![b'u'; 8192]))].prop_map(|new_session_uri| {
            Message::GoAway(GoAway { new_session_uri, timeout_ms: 0, request_id: None })
        }),
        rid().prop_map(Message::MaxRequestId),
        rid().prop_map(Message::RequestsBlocked),
        (rid(), params_for(ParamMessage::RequestOk)).prop_map(|(request_id, params)| Message::RequestOk(
            RequestOk { request_id, params, track_properties: Properties::new() }
        )),
        (rid(), int62(), int62(), reason()).prop_map(|(request_id, error_code, retry_interval, reason)| {
            Message::RequestError(RequestError {
                request_id,
                error_code,
                retry_interval,
                reason,
                redirect: None,
            })
        }),
        subscribe(ParamMessage::Subscribe).prop_map(Message::Subscribe),
        (rid(), int62(), params_for(ParamMessage::SubscribeOk), props()).prop_map(
            |(request_id, a, params, p)| {
                Message::SubscribeOk(SubscribeOk {
                    request_id,
                    track_alias: TrackAlias(a),
                    params,
                    track_properties: p,
                })
            }
        ),
        (rid(), rid(), params_for(ParamMessage::RequestUpdate)).prop_map(
            |(request_id, existing_request_id, params)| {
                Message::RequestUpdate(RequestUpdate { request_id, existing_request_id, params })
            }
        ),
        rid().prop_map(Message::Unsubscribe),
        (rid(), full_track_name(), int62(), params_for(ParamMessage::Publish), props()).prop_map(
            |(request_id, track, a, params, track_properties)| Message::Publish(Publish {
                request_id,
                track,
                track_alias: TrackAlias(a),
                params,
                track_properties,
            })
        ),
        (rid(), params_for(ParamMessage::PublishOk))
            .prop_map(|(request_id, params)| Message::PublishOk(PublishOk { request_id, params })),
        (rid(), int62(), int62(), reason()).prop_map(|(request_id, status_code, stream_count, reason)| {
            Message::PublishDone(PublishDone { request_id, status_code, stream_count, reason })
        }),
        fetch().prop_map(Message::Fetch),
        fetch_ok().prop_map(Message::FetchOk),
        rid().prop_map(Message::FetchCancel),
        subscribe(ParamMessage::TrackStatus).prop_map(Message::TrackStatus),
        (rid(), namespace(1, 32), params_for(ParamMessage::PublishNamespace)).prop_map(
            |(request_id, namespace, params)| Message::PublishNamespace(PublishNamespace {
                request_id,
                namespace,
                params
            })
        ),
        namespace(0, 8).prop_map(Message::Namespace),
        rid().prop_map(Message::PublishNamespaceDone),
        namespace(0, 8).prop_map(Message::NamespaceDone),
        (rid(), int62(), reason()).prop_map(|(request_id, error_code, reason)| {
            Message::PublishNamespaceCancel(PublishNamespaceCancel { request_id, error_code, reason })
        }),
        (
            rid(),
            namespace(0, 32),
            prop_oneof![
                Just(SubscribeOptions::Publish),
                Just(SubscribeOptions::Namespace),
                Just(SubscribeOptions::Both)
            ],
            params_for(ParamMessage::SubscribeNamespace)
        )
            .prop_map(|(request_id, prefix, options, params)| {
                Message::SubscribeNamespace(SubscribeNamespace { request_id, prefix, options, params })
            }),
    ]
}

/// The role that may send `m` (CLIENT_SETUP from a client, everything else from the server,
/// which may also send a GOAWAY URI).
fn sender_of(m: &Message) -> Role {
    match m {
        Message::ClientSetup(_) => Role::Client,
        _ => Role::Server,
    }
}

// ---------------------------------------------------------------- helpers

fn enc(m: &Message) -> Vec<u8> {
    let mut out = Vec::new();
    encode_message(m, &mut out).expect("encodable");
    out
}

fn enc_err(m: &Message) -> EncodeError {
    encode_message(m, &mut Vec::new()).expect_err("must not encode")
}

fn dec(buf: &[u8], sender: Role) -> Result<(Message, usize), DecodeError> {
    decode_message(buf, &DecodeContext::control(sender))
}

fn vi(v: u64) -> Vec<u8> {
    let mut out = Vec::new();
    Quic::encode(v, &mut out).expect("varint");
    out
}

/// A frame around a hand-built body.
fn frame(ty: u64, body: &[u8]) -> Vec<u8> {
    let mut out = vi(ty);
    out.extend_from_slice(&(body.len() as u16).to_be_bytes());
    out.extend_from_slice(body);
    out
}

/// Concatenates byte pieces.
fn cat(parts: &[&[u8]]) -> Vec<u8> {
    parts.concat()
}

fn code_of(r: Result<(Message, usize), DecodeError>) -> ErrorCode {
    match r {
        Err(DecodeError::Invalid { code, .. }) => code,
        other => panic!("expected an invalid-input error, got {other:?}"),
    }
}

fn violation(buf: &[u8], sender: Role) {
    assert_eq!(code_of(dec(buf, sender)), ErrorCode::ProtocolViolation, "{buf:02x?}");
}

fn kv_error(buf: &[u8], sender: Role) {
    assert_eq!(code_of(dec(buf, sender)), ErrorCode::KeyValueFormatting, "{buf:02x?}");
}

/// A SUBSCRIBE body for request 0, namespace ("a"), name "t", with raw parameter bytes.
fn subscribe_with_params(count: u64, params: &[u8]) -> Vec<u8> {
    frame(mt::SUBSCRIBE, &cat(&[&[0x00, 0x01, 0x01, b'a', 0x01, b't'], &vi(count), params]))
}

fn decoded_subscribe_params(count: u64, params: &[u8]) -> Parameters {
    match dec(&subscribe_with_params(count, params), Role::Client) {
        Ok((Message::Subscribe(s), _)) => s.params,
        other => panic!("expected SUBSCRIBE, got {other:?}"),
    }
}

// ---------------------------------------------------------------- properties

proptest! {
    // 24 message kinds share one strategy: more cases than the default so each gets dozens.
    #![proptest_config(ProptestConfig::with_cases(1024))]

    #[test]
    fn round_trip(m in any_message()) {
        let buf = enc(&m);
        let (back, used) = dec(&buf, sender_of(&m)).expect("decodes");
        prop_assert_eq!(&back, &m);
        prop_assert_eq!(used, buf.len());
        // A following message is not consumed.
        let mut two = buf.clone();
        two.extend_from_slice(&buf);
        let (first, used) = dec(&two, sender_of(&m)).expect("decodes");
        prop_assert_eq!(first, m);
        prop_assert_eq!(used, buf.len());
    }

    #[test]
    fn every_strict_prefix_needs_more(m in any_message()) {
        let buf = enc(&m);
        for n in 0..buf.len() {
            prop_assert_eq!(dec(&buf[..n], sender_of(&m)), Err(DecodeError::NeedMore), "prefix {}", n);
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic(buf in vec(any::<u8>(), 0..300)) {
        let _ = dec(&buf, Role::Client);
        let _ = dec(&buf, Role::Server);
    }

    /// A well-framed body of random bytes behind every message type reaches the body parsers.
    #[test]
    fn random_bodies_never_panic(ty in prop::sample::select(ALL_TYPES.to_vec()), body in vec(any::<u8>(), 0..200)) {
        let buf = frame(ty, &body);
        for sender in [Role::Client, Role::Server] {
            if let Ok((_, used)) = dec(&buf, sender) {
                prop_assert_eq!(used, buf.len());
            }
        }
    }

    /// Valid encodings with one byte changed decode or fail cleanly.
    #[test]
    fn mutated_encodings_never_panic(m in any_message(), at in any::<prop::sample::Index>(), b in any::<u8>()) {
        let mut buf = enc(&m);
        let i = at.index(buf.len());
        buf[i] = b;
        let _ = dec(&buf, Role::Client);
        let _ = dec(&buf, Role::Server);
    }
}

const ALL_TYPES: [u64; 24] = [
    0x20, 0x21, 0x10, 0x15, 0x1A, 0x7, 0x5, 0x3, 0x4, 0x2, 0xA, 0x1D, 0x1E, 0xB, 0x16, 0x18, 0x17, 0xD, 0x6,
    0x8, 0x9, 0xE, 0xC, 0x11,
];

// ---------------------------------------------------------------- message table

#[test]
fn message_types_match_the_draft_16_table() {
    let table = [
        (mt::CLIENT_SETUP, 0x20),
        (mt::SERVER_SETUP, 0x21),
        (mt::GOAWAY, 0x10),
        (mt::MAX_REQUEST_ID, 0x15),
        (mt::REQUESTS_BLOCKED, 0x1A),
        (mt::REQUEST_OK, 0x7),
        (mt::REQUEST_ERROR, 0x5),
        (mt::SUBSCRIBE, 0x3),
        (mt::SUBSCRIBE_OK, 0x4),
        (mt::REQUEST_UPDATE, 0x2),
        (mt::UNSUBSCRIBE, 0xA),
        (mt::PUBLISH, 0x1D),
        (mt::PUBLISH_OK, 0x1E),
        (mt::PUBLISH_DONE, 0xB),
        (mt::FETCH, 0x16),
        (mt::FETCH_OK, 0x18),
        (mt::FETCH_CANCEL, 0x17),
        (mt::TRACK_STATUS, 0xD),
        (mt::PUBLISH_NAMESPACE, 0x6),
        (mt::NAMESPACE, 0x8),
        (mt::PUBLISH_NAMESPACE_DONE, 0x9),
        (mt::NAMESPACE_DONE, 0xE),
        (mt::PUBLISH_NAMESPACE_CANCEL, 0xC),
        (mt::SUBSCRIBE_NAMESPACE, 0x11),
    ];
    for (konst, spec) in table {
        assert_eq!(konst, spec);
    }
    assert_eq!(table.map(|(t, _)| t), ALL_TYPES);
    assert_eq!(pt::ALL, [0x02, 0x03, 0x08, 0x09, 0x10, 0x20, 0x21, 0x22, 0x32]);
}

#[test]
fn encoded_type_byte_is_the_table_value() {
    let m = Message::Unsubscribe(RequestId(9));
    assert_eq!(enc(&m), [0x0A, 0x00, 0x01, 0x09]);
    let m = Message::MaxRequestId(RequestId(100));
    assert_eq!(enc(&m), [0x15, 0x00, 0x02, 0x40, 0x64]);
}

// ---------------------------------------------------------------- spec-layout vectors

/// SUBSCRIBE (§9.9) written out field by field.
#[test]
fn subscribe_vector() {
    #[rustfmt::skip]
    let bytes = [
        0x03,                   // Type = SUBSCRIBE
        0x00, 0x19,             // Length = 25
        0x02,                   // Request ID = 2
        0x02,                   // Number of Track Namespace Fields = 2
        0x04, b'l', b'i', b'v', b'e',
        0x03, b'c', b'a', b'm',
        0x05, b'v', b'i', b'd', b'e', b'o', // Track Name
        0x03,                   // Number of Parameters = 3
        0x10, 0x01,             // delta 0x10: FORWARD = 1
        0x10, 0x0A,             // delta 0x10 (0x20): SUBSCRIBER_PRIORITY = 10
        0x01, 0x01, 0x02,       // delta 0x01 (0x21): SUBSCRIPTION_FILTER, length 1, Largest Object
    ];
    let m = Message::Subscribe(Subscribe {
        request_id: RequestId(2),
        track: FullTrackName {
            namespace: TrackNamespace::from_strs(&["live", "cam"]),
            name: Bytes::from("video"),
        },
        params: Parameters {
            forward: Some(true),
            subscriber_priority: Some(10),
            location_filter: Some(LocationFilter::NextObject),
            ..Parameters::default()
        },
    });
    assert_eq!(enc(&m), bytes);
    // draft-16 messages carry their own IDs: a stream's Request ID in the context is ignored.
    let ctx = DecodeContext::request(Role::Client, RequestId(40));
    assert_eq!(decode_message(&bytes, &ctx), Ok((m.clone(), bytes.len())));
    assert_eq!(dec(&bytes, Role::Client), Ok((m, bytes.len())));
}

/// CLIENT_SETUP (§9.3) with PATH, MAX_REQUEST_ID and MOQT_IMPLEMENTATION.
#[test]
fn client_setup_vector() {
    #[rustfmt::skip]
    let bytes = [
        0x20,                   // Type = CLIENT_SETUP
        0x00, 0x10,             // Length = 16
        0x03,                   // Number of Parameters = 3
        0x01, 0x04, b'/', b'm', b'o', b'q', // delta 1: PATH, length 4
        0x01, 0x40, 0x64,       // delta 1 (0x02): MAX_REQUEST_ID = 100
        0x05, 0x04, b'e', b'd', b'g', b'e', // delta 5 (0x07): MOQT_IMPLEMENTATION
    ];
    let m = Message::ClientSetup(Setup {
        options: SetupOptions {
            path: Some(Bytes::from("/moq")),
            max_request_id: Some(100),
            implementation: Some(Bytes::from("edge")),
            ..SetupOptions::default()
        },
    });
    assert_eq!(enc(&m), bytes);
    assert_eq!(dec(&bytes, Role::Client), Ok((m, bytes.len())));
}

/// Standalone FETCH (§9.16.1): End Location is "end plus one", object 0 = the whole group.
#[test]
fn standalone_fetch_vectors() {
    let track = FullTrackName { namespace: TrackNamespace::from_strs(&["a"]), name: Bytes::from("b") };
    let fetch = |filter| {
        Message::Fetch(Fetch {
            request_id: RequestId(4),
            kind: FetchKind::Standalone { track: track.clone() },
            params: Parameters { location_filter: Some(filter), ..Parameters::default() },
        })
    };
    let whole = fetch(LocationFilter::AbsoluteStartGroupEnd { start: Location::new(1, 0), end_group: 3 });
    let bytes = [0x16, 0x00, 0x0C, 0x04, 0x01, 0x01, 0x01, b'a', 0x01, b'b', 0x01, 0x00, 0x03, 0x00, 0x00];
    assert_eq!(enc(&whole), bytes);
    assert_eq!(dec(&bytes, Role::Client), Ok((whole, bytes.len())));

    let partial =
        fetch(LocationFilter::AbsoluteRange { start: Location::new(1, 2), end: Location::new(3, 4) });
    let bytes = [0x16, 0x00, 0x0C, 0x04, 0x01, 0x01, 0x01, b'a', 0x01, b'b', 0x01, 0x02, 0x03, 0x05, 0x00];
    assert_eq!(enc(&partial), bytes);
    assert_eq!(dec(&bytes, Role::Client), Ok((partial, bytes.len())));
}

/// Joining FETCH (§9.16.2) with GROUP_ORDER, and FETCH_OK (§9.17) End Location mapping.
#[test]
fn joining_fetch_and_fetch_ok_vectors() {
    let m = Message::Fetch(Fetch {
        request_id: RequestId(6),
        kind: FetchKind::RelativeJoining { joining_request_id: RequestId(2), joining_start: 3 },
        params: Parameters { group_order: Some(GroupOrder::Descending), ..Parameters::default() },
    });
    let bytes = [0x16, 0x00, 0x07, 0x06, 0x02, 0x02, 0x03, 0x01, 0x22, 0x02];
    assert_eq!(enc(&m), bytes);
    assert_eq!(dec(&bytes, Role::Client), Ok((m, bytes.len())));

    let ok = |end_location| {
        Message::FetchOk(FetchOk {
            request_id: RequestId(6),
            end_of_track: true,
            end_location,
            params: Parameters::default(),
            track_properties: Properties::new(),
        })
    };
    let bytes = [0x18, 0x00, 0x05, 0x06, 0x01, 0x05, 0x00, 0x00];
    assert_eq!(dec(&bytes, Role::Server), Ok((ok(FetchEnd::Group(5)), bytes.len())));
    let bytes = [0x18, 0x00, 0x05, 0x06, 0x01, 0x05, 0x08, 0x00];
    assert_eq!(dec(&bytes, Role::Server), Ok((ok(FetchEnd::Object(Location::new(5, 7))), bytes.len())));
    assert_eq!(enc(&ok(FetchEnd::Object(Location::new(5, 7)))), bytes);
}

// ---------------------------------------------------------------- framing errors

#[test]
fn unknown_message_types_are_violations() {
    for ty in [0x00, 0x01, 0x0F, 0x12, 0x19, 0x40, 0x41, 0x1F, 0x3FFF] {
        violation(&frame(ty, &[]), Role::Client);
        violation(&frame(ty, &[0x00]), Role::Server);
    }
}

#[test]
fn length_mismatches_are_violations() {
    let good = subscribe_with_params(1, &[0x10, 0x01]);
    assert!(dec(&good, Role::Client).is_ok());
    // Length one short (the last byte moves outside the frame and is not read).
    let mut short = good.clone();
    short[2] -= 1;
    violation(&short, Role::Client);
    // Length one long, with an extra byte inside the frame.
    let mut long = good.clone();
    long[2] += 1;
    long.push(0x00);
    violation(&long, Role::Client);
    // Fixed-size bodies too.
    violation(&frame(mt::UNSUBSCRIBE, &[0x01, 0x00]), Role::Client);
    violation(&frame(mt::UNSUBSCRIBE, &[]), Role::Client);
    violation(&frame(mt::MAX_REQUEST_ID, &[0x40]), Role::Client);
    // A parameter count larger than the body.
    violation(&subscribe_with_params(5, &[0x10, 0x01]), Role::Client);
}

// ---------------------------------------------------------------- naming limits

#[test]
fn namespace_limits() {
    // SUBSCRIBE with a 0-field namespace.
    violation(&frame(mt::SUBSCRIBE, &[0x00, 0x00, 0x01, b't', 0x00]), Role::Client);
    // 33 fields.
    let mut body = vec![0x00, 33];
    for _ in 0..33 {
        body.extend_from_slice(&[0x01, b'x']);
    }
    body.extend_from_slice(&[0x00, 0x00]);
    violation(&frame(mt::SUBSCRIBE, &body), Role::Client);
    // An empty field.
    violation(&frame(mt::SUBSCRIBE, &[0x00, 0x02, 0x01, b'a', 0x00, 0x00, 0x00]), Role::Client);
    // PUBLISH_NAMESPACE needs a field; SUBSCRIBE_NAMESPACE's prefix and NAMESPACE's suffix may be empty.
    violation(&frame(mt::PUBLISH_NAMESPACE, &[0x00, 0x00, 0x00]), Role::Server);
    assert!(dec(&frame(mt::SUBSCRIBE_NAMESPACE, &[0x00, 0x00, 0x01, 0x00]), Role::Client).is_ok());
    assert_eq!(
        dec(&frame(mt::NAMESPACE, &[0x00]), Role::Server),
        Ok((Message::Namespace(TrackNamespace::default()), 4))
    );
    // A 33-field prefix and an empty suffix field.
    let mut body = vec![0x00, 33];
    for _ in 0..33 {
        body.extend_from_slice(&[0x01, b'x']);
    }
    body.extend_from_slice(&[0x01, 0x00]);
    violation(&frame(mt::SUBSCRIBE_NAMESPACE, &body), Role::Client);
    violation(&frame(mt::NAMESPACE_DONE, &[0x01, 0x00]), Role::Server);
}

#[test]
fn full_track_name_longer_than_4096_is_a_violation() {
    let field = vec![b'n'; 4000];
    let name = vec![b't'; 97];
    let body = cat(&[&[0x00, 0x01], &vi(4000), &field, &vi(97), &name, &[0x00]]);
    violation(&frame(mt::SUBSCRIBE, &body), Role::Client);
    // Exactly 4096 is fine.
    let name = vec![b't'; 96];
    let body = cat(&[&[0x00, 0x01], &vi(4000), &field, &vi(96), &name, &[0x00]]);
    assert!(dec(&frame(mt::SUBSCRIBE, &body), Role::Client).is_ok());
    // A namespace alone above 4096.
    let body = cat(&[&[0x00, 0x02], &vi(4000), &field, &vi(97), &name[..96], &[b'x', 0x00, 0x00]]);
    violation(&frame(mt::PUBLISH_NAMESPACE, &body), Role::Server);
}

#[test]
fn reason_longer_than_1024_is_a_violation() {
    let reason = vec![b'r'; 1025];
    violation(&frame(mt::REQUEST_ERROR, &cat(&[&[0x00, 0x00, 0x00], &vi(1025), &reason])), Role::Server);
    violation(&frame(mt::PUBLISH_DONE, &cat(&[&[0x00, 0x00, 0x00], &vi(1025), &reason])), Role::Server);
    violation(&frame(mt::PUBLISH_NAMESPACE_CANCEL, &cat(&[&[0x00, 0x00], &vi(1025), &reason])), Role::Client);
    let m = Message::RequestError(RequestError { reason: Bytes::from(reason), ..RequestError::default() });
    assert!(matches!(enc_err(&m), EncodeError::OutOfRange(_)));
}

// ---------------------------------------------------------------- message parameters

#[test]
fn parameter_value_checks() {
    violation(&subscribe_with_params(1, &[0x10, 0x02]), Role::Client); // FORWARD = 2
    violation(&subscribe_with_params(1, &[0x20, 0x41, 0x00]), Role::Client); // SUBSCRIBER_PRIORITY = 256
    violation(&subscribe_with_params(1, &[0x22, 0x03]), Role::Client); // GROUP_ORDER = 3
    violation(&subscribe_with_params(1, &[0x22, 0x00]), Role::Client); // GROUP_ORDER = 0
    violation(&subscribe_with_params(1, &[0x02, 0x00]), Role::Client); // DELIVERY_TIMEOUT = 0
                                                                       // The boundaries are accepted.
    let p = decoded_subscribe_params(3, &[0x10, 0x00, 0x10, 0x40, 0xFF, 0x02, 0x02]);
    assert_eq!(
        (p.forward, p.subscriber_priority, p.group_order),
        (Some(false), Some(255), Some(GroupOrder::Descending))
    );
    assert_eq!(decoded_subscribe_params(1, &[0x02, 0x01]).object_delivery_timeout, Some(1));
}

#[test]
fn duplicate_and_unknown_parameters() {
    violation(&subscribe_with_params(2, &[0x10, 0x01, 0x00, 0x01]), Role::Client); // FORWARD twice
    violation(&subscribe_with_params(2, &[0x20, 0x01, 0x00, 0x02]), Role::Client); // priority twice
    violation(&subscribe_with_params(1, &[0x04, 0x01]), Role::Client); // 0x04: not a draft-16 parameter
    violation(&subscribe_with_params(1, &[0x23, 0x00]), Role::Client); // 0x23: draft-22 FILL_PARAMETERS
                                                                       // Unknown is a violation even where no parameter is allowed (FETCH_OK).
    violation(&frame(mt::FETCH_OK, &[0x00, 0x00, 0x01, 0x00, 0x01, 0x06, 0x01]), Role::Server);
    // AUTHORIZATION TOKEN may repeat.
    let p = decoded_subscribe_params(2, &[0x03, 0x02, 0x02, 0x07, 0x00, 0x02, 0x02, 0x08]);
    assert_eq!(p.auth_tokens, [AuthToken::UseAlias { alias: 7 }, AuthToken::UseAlias { alias: 8 }]);
    // A huge delta lands on an unknown type.
    let mut params = vec![0x10, 0x01];
    params.extend_from_slice(&[0xFF; 8]);
    params.push(0x00);
    violation(&subscribe_with_params(2, &params), Role::Client);
}

#[test]
fn parameter_not_defined_for_the_message_is_ignored() {
    // SUBSCRIBE_OK with FORWARD = 1 and SUBSCRIBER_PRIORITY = 300 (both ignored), EXPIRES = 5.
    let body = [0x00, 0x01, 0x03, 0x08, 0x05, 0x08, 0x01, 0x10, 0x41, 0x2C];
    match dec(&frame(mt::SUBSCRIBE_OK, &body), Role::Server) {
        Ok((Message::SubscribeOk(ok), _)) => {
            assert_eq!(ok.params, Parameters { expires: Some(5), ..Parameters::default() });
        }
        other => panic!("{other:?}"),
    }
    // TRACK_STATUS carries no delivery parameters (§9.19): SUBSCRIBER_PRIORITY is dropped.
    let body = [0x00, 0x01, 0x01, b'a', 0x01, b't', 0x01, 0x20, 0x05];
    match dec(&frame(mt::TRACK_STATUS, &body), Role::Client) {
        Ok((Message::TrackStatus(s), _)) => assert!(s.params.is_empty()),
        other => panic!("{other:?}"),
    }
    // A SUBSCRIPTION_FILTER inside FETCH is ignored (the range is in the body).
    let body = [0x00, 0x02, 0x00, 0x00, 0x01, 0x21, 0x01, 0x02];
    match dec(&frame(mt::FETCH, &body), Role::Client) {
        Ok((Message::Fetch(f), _)) => assert!(f.params.is_empty()),
        other => panic!("{other:?}"),
    }
}

#[test]
fn subscription_filter_errors() {
    violation(&subscribe_with_params(1, &[0x21, 0x01, 0x05]), Role::Client); // filter type 5
    violation(&subscribe_with_params(1, &[0x21, 0x01, 0x00]), Role::Client); // filter type 0
    violation(&subscribe_with_params(1, &[0x21, 0x02, 0x02, 0x00]), Role::Client); // trailing byte
    violation(&subscribe_with_params(1, &[0x21, 0x02, 0x03, 0x01]), Role::Client); // truncated start
    violation(&subscribe_with_params(1, &[0x21, 0x04, 0x04, 0x05, 0x00, 0x04]), Role::Client); // end < start
    let p = decoded_subscribe_params(1, &[0x21, 0x04, 0x04, 0x05, 0x00, 0x05]);
    assert_eq!(
        p.location_filter,
        Some(LocationFilter::AbsoluteStartGroupEnd { start: Location::new(5, 0), end_group: 5 })
    );
    let p = decoded_subscribe_params(1, &[0x21, 0x01, 0x01]);
    assert_eq!(p.location_filter, Some(LocationFilter::RelativeStart { groups_back: 0 }));
}

#[test]
fn malformed_token_and_location_are_kv_formatting_errors() {
    kv_error(&subscribe_with_params(1, &[0x03, 0x02, 0x04, 0x00]), Role::Client); // alias type 4
    kv_error(&subscribe_with_params(1, &[0x03, 0x00]), Role::Client); // empty token
    kv_error(&subscribe_with_params(1, &[0x03, 0x03, 0x00, 0x01, 0x02]), Role::Client); // DELETE + trailing
                                                                                        // LARGEST_OBJECT with one varint, or three, in SUBSCRIBE_OK.
    kv_error(&frame(mt::SUBSCRIBE_OK, &[0x00, 0x00, 0x01, 0x09, 0x01, 0x05]), Role::Server);
    kv_error(&frame(mt::SUBSCRIBE_OK, &[0x00, 0x00, 0x01, 0x09, 0x03, 0x05, 0x01, 0x02]), Role::Server);
    // Malformed Track Extensions.
    kv_error(&frame(mt::SUBSCRIBE_OK, &[0x00, 0x00, 0x00, 0x01, 0x05, 0x01]), Role::Server);
    // Malformed setup token.
    kv_error(&frame(mt::SERVER_SETUP, &[0x01, 0x03, 0x01, 0x09]), Role::Server);
}

#[test]
fn encoder_rejects_what_draft_16_cannot_carry() {
    let sub = |params| Message::Subscribe(Subscribe { params, ..Subscribe::default() });
    let track = FullTrackName { namespace: TrackNamespace::from_strs(&["a"]), name: Bytes::new() };
    let sub_t =
        |params| Message::Subscribe(Subscribe { track: track.clone(), params, ..Subscribe::default() });
    let d22_only = [
        Parameters { rendezvous_timeout: Some(1), ..Parameters::default() },
        Parameters { subgroup_delivery_timeout: Some(1), ..Parameters::default() },
        Parameters { fill_timeout: Some(1), ..Parameters::default() },
        Parameters { fill_parameters: Some(Box::default()), ..Parameters::default() },
        Parameters {
            range_filters: vec![RangeFilter { kind: RangeFilterKind::ObjectId, set: None }],
            ..Parameters::default()
        },
        Parameters { track_namespace_prefix: Some(TrackNamespace::default()), ..Parameters::default() },
        Parameters { include_properties: Some(true), ..Parameters::default() },
        // Not allowed in SUBSCRIBE.
        Parameters { expires: Some(1), ..Parameters::default() },
        Parameters { largest_object: Some(Location::new(1, 1)), ..Parameters::default() },
        // Filters draft-16 has no type for.
        Parameters { location_filter: Some(LocationFilter::None), ..Parameters::default() },
        Parameters {
            location_filter: Some(LocationFilter::RelativeStart { groups_back: 2 }),
            ..Parameters::default()
        },
        Parameters {
            location_filter: Some(LocationFilter::AbsoluteRange {
                start: Location::new(1, 1),
                end: Location::new(2, 2),
            }),
            ..Parameters::default()
        },
    ];
    for p in d22_only {
        assert!(matches!(enc_err(&sub_t(p.clone())), EncodeError::Unsupported(_)), "{p:?}");
    }
    // A track namespace needs a field.
    assert!(matches!(enc_err(&sub(Parameters::default())), EncodeError::OutOfRange(_)));
    let bad_range = Parameters {
        location_filter: Some(LocationFilter::AbsoluteStartGroupEnd {
            start: Location::new(5, 0),
            end_group: 4,
        }),
        ..Parameters::default()
    };
    assert!(matches!(enc_err(&sub_t(bad_range)), EncodeError::OutOfRange(_)));
    let zero_timeout = Parameters { object_delivery_timeout: Some(0), ..Parameters::default() };
    assert!(matches!(enc_err(&sub_t(zero_timeout)), EncodeError::OutOfRange(_)));
    // Parameters on FETCH_OK, track properties on REQUEST_OK, a redirect, a GOAWAY timeout.
    let fetch_ok =
        FetchOk { params: Parameters { expires: Some(1), ..Parameters::default() }, ..FetchOk::default() };
    assert!(matches!(enc_err(&Message::FetchOk(fetch_ok)), EncodeError::Unsupported(_)));
    let request_ok =
        RequestOk { track_properties: [(2, KvValue::Int(1))].into_iter().collect(), ..RequestOk::default() };
    assert!(matches!(enc_err(&Message::RequestOk(request_ok)), EncodeError::Unsupported(_)));
    let error = RequestError { redirect: Some(Redirect::default()), ..RequestError::default() };
    assert!(matches!(enc_err(&Message::RequestError(error)), EncodeError::Unsupported(_)));
    assert!(matches!(
        enc_err(&Message::GoAway(GoAway { timeout_ms: 5, ..GoAway::default() })),
        EncodeError::Unsupported(_)
    ));
    let long_uri = GoAway { new_session_uri: Bytes::from(vec![b'u'; 8193]), ..GoAway::default() };
    assert!(matches!(enc_err(&Message::GoAway(long_uri)), EncodeError::OutOfRange(_)));
}

#[test]
fn draft_22_only_messages_are_unsupported() {
    for m in [
        Message::PublishStateNotify(PublishStateNotify::default()),
        Message::SubscribeTracks(SubscribeTracks::default()),
        Message::PublishSkipped(PublishSkipped::default()),
    ] {
        assert_eq!(enc_err(&m), EncodeError::Unsupported(m.name()));
    }
}

// ---------------------------------------------------------------- FETCH / FETCH_OK

#[test]
fn fetch_errors() {
    for ty in [0x00, 0x04, 0x10] {
        violation(&frame(mt::FETCH, &[0x00, ty, 0x00, 0x00, 0x00]), Role::Client);
    }
    // End Of Track must be 0 or 1.
    violation(&frame(mt::FETCH_OK, &[0x00, 0x02, 0x01, 0x00, 0x00]), Role::Server);
    let track = FullTrackName { namespace: TrackNamespace::from_strs(&["a"]), name: Bytes::new() };
    let standalone = |filter| {
        Message::Fetch(Fetch {
            request_id: RequestId(0),
            kind: FetchKind::Standalone { track: track.clone() },
            params: Parameters { location_filter: filter, ..Parameters::default() },
        })
    };
    assert!(matches!(enc_err(&standalone(None)), EncodeError::Unsupported(_)));
    assert!(matches!(enc_err(&standalone(Some(LocationFilter::NextObject))), EncodeError::Unsupported(_)));
    let max_end =
        LocationFilter::AbsoluteRange { start: Location::new(0, 0), end: Location::new(1, u64::MAX) };
    assert!(matches!(enc_err(&standalone(Some(max_end))), EncodeError::OutOfRange(_)));
    let beyond = LocationFilter::AbsoluteRange { start: Location::new(0, 0), end: Location::new(1, MAX) };
    assert!(matches!(enc_err(&standalone(Some(beyond))), EncodeError::OutOfRange(_)));
    let joining = Message::Fetch(Fetch {
        request_id: RequestId(0),
        kind: FetchKind::AbsoluteJoining { joining_request_id: RequestId(0), joining_start: 0 },
        params: Parameters { location_filter: Some(LocationFilter::NextObject), ..Parameters::default() },
    });
    assert!(matches!(enc_err(&joining), EncodeError::Unsupported(_)));
    let ok = FetchOk { end_location: FetchEnd::Object(Location::new(0, u64::MAX)), ..FetchOk::default() };
    assert!(matches!(enc_err(&Message::FetchOk(ok)), EncodeError::OutOfRange(_)));
}

// ---------------------------------------------------------------- setup, GOAWAY, options

#[test]
fn setup_messages_from_the_wrong_role_are_violations() {
    violation(&frame(mt::CLIENT_SETUP, &[0x00]), Role::Server);
    violation(&frame(mt::SERVER_SETUP, &[0x00]), Role::Client);
    assert!(dec(&frame(mt::CLIENT_SETUP, &[0x00]), Role::Client).is_ok());
    assert!(dec(&frame(mt::SERVER_SETUP, &[0x00]), Role::Server).is_ok());
}

#[test]
fn setup_parameter_rules() {
    // A duplicate PATH.
    violation(&frame(mt::CLIENT_SETUP, &[0x02, 0x01, 0x01, b'a', 0x00, 0x01, b'b']), Role::Client);
    // A duplicate MAX_REQUEST_ID.
    violation(&frame(mt::SERVER_SETUP, &[0x02, 0x02, 0x01, 0x00, 0x01]), Role::Server);
    // Duplicate unknown parameters are kept; 0x06 and 0x08 (draft-22 only) are unknown here.
    let body = [0x04, 0x06, 0x01, 0x02, 0x00, 0x00, 0x03, 0x31, 0x00];
    let expect = SetupOptions {
        unknown: vec![
            (6, KvValue::Int(1)),
            (8, KvValue::Int(0)),
            (8, KvValue::Int(3)),
            (0x39, KvValue::Bytes(Bytes::new())),
        ],
        ..SetupOptions::default()
    };
    assert_eq!(
        dec(&frame(mt::SERVER_SETUP, &body), Role::Server),
        Ok((Message::ServerSetup(Setup { options: expect }), 12))
    );
    // DELETE (0) and USE_ALIAS (2) tokens are a violation in CLIENT_SETUP, fine in SERVER_SETUP.
    for token in [[0x00, 0x01], [0x02, 0x01]] {
        let body = cat(&[&[0x01, 0x03, 0x02], &token]);
        violation(&frame(mt::CLIENT_SETUP, &body), Role::Client);
        assert!(dec(&frame(mt::SERVER_SETUP, &body), Role::Server).is_ok());
    }
    // Repeated tokens are fine.
    let body = [0x02, 0x03, 0x02, 0x03, 0x00, 0x00, 0x02, 0x03, 0x00];
    assert!(dec(&frame(mt::CLIENT_SETUP, &body), Role::Client).is_ok());
    // Encoder: draft-22 options, alias references from a client, unknowns with a known type.
    let setup = |options| Message::ClientSetup(Setup { options });
    let o = SetupOptions { max_filter_ranges: Some(1), ..SetupOptions::default() };
    assert!(matches!(enc_err(&setup(o)), EncodeError::Unsupported(_)));
    let o = SetupOptions { max_request_updates: Some(1), ..SetupOptions::default() };
    assert!(matches!(enc_err(&setup(o)), EncodeError::Unsupported(_)));
    let o = SetupOptions { auth_tokens: vec![AuthToken::UseAlias { alias: 1 }], ..SetupOptions::default() };
    assert!(matches!(enc_err(&setup(o.clone())), EncodeError::OutOfRange(_)));
    assert!(encode_message(&Message::ServerSetup(Setup { options: o }), &mut Vec::new()).is_ok());
    let o = SetupOptions { unknown: vec![(1, KvValue::Bytes(Bytes::new()))], ..SetupOptions::default() };
    assert!(matches!(enc_err(&setup(o)), EncodeError::OutOfRange(_)));
    let o = SetupOptions { unknown: vec![(9, KvValue::Int(1))], ..SetupOptions::default() };
    assert!(matches!(enc_err(&setup(o)), EncodeError::OutOfRange(_)));
}

#[test]
fn goaway_rules() {
    let with_uri = frame(mt::GOAWAY, &[0x03, b'm', b'o', b'q']);
    violation(&with_uri, Role::Client);
    assert!(dec(&with_uri, Role::Server).is_ok());
    assert!(dec(&frame(mt::GOAWAY, &[0x00]), Role::Client).is_ok());
    let long = cat(&[&vi(8193), &vec![b'u'; 8193]]);
    violation(&frame(mt::GOAWAY, &long), Role::Server);
}

#[test]
fn subscribe_options_must_be_known() {
    violation(&frame(mt::SUBSCRIBE_NAMESPACE, &[0x00, 0x00, 0x03, 0x00]), Role::Client);
}
