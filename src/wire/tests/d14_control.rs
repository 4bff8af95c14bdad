//! draft-14 control message codec: round trips of every message (answers through
//! `encode_response` with the request kind they answer), truncation at every byte, arbitrary
//! input, error paths, and byte vectors built from the layouts of draft-14 §9.

mod support;

use bytes::Bytes;
use proptest::collection::vec;
use proptest::prelude::*;
use support::strategies::*;
use wire::codes::{code, RequestErrorCode};
use wire::d14::control::{decode_message, encode_message, encode_response, message_type as mt, VERSION};
use wire::model::*;
use wire::{DecodeError, EncodeError, ErrorCode, Quic, VarInt, Version};

const MAX: u64 = (1 << 62) - 1;

// ---------------------------------------------------------------- strategies

fn rid() -> impl Strategy<Value = RequestId> {
    int62().prop_map(RequestId)
}

fn loc() -> impl Strategy<Value = Location> {
    location(int62())
}

fn order() -> impl Strategy<Value = GroupOrder> {
    prop_oneof![Just(GroupOrder::Ascending), Just(GroupOrder::Descending)]
}

fn tokens() -> impl Strategy<Value = Vec<AuthToken>> {
    vec(auth_token(int62()), 0..3)
}

/// A Subscription Filter draft-14 can express (§9.7).
fn filter() -> impl Strategy<Value = LocationFilter> {
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

/// The Track Properties a draft-14 answer decodes to: its Group Order, DELIVERY TIMEOUT and
/// MAX CACHE DURATION.
fn answer_props(order: GroupOrder, timeout: Option<u64>, cache: Option<u64>) -> Properties {
    let mut p = Properties::new();
    if let Some(v) = timeout {
        p.push(property_type::OBJECT_DELIVERY_TIMEOUT, KvValue::Int(v));
    }
    if let Some(v) = cache {
        p.push(property_type::MAX_CACHE_DURATION, KvValue::Int(v));
    }
    p.push(property_type::DEFAULT_PUBLISHER_GROUP_ORDER, KvValue::Int(order.code()));
    p
}

fn setup_options(sender: Role) -> impl Strategy<Value = SetupOptions> {
    let token = auth_token(int62()).prop_filter("no alias references in CLIENT_SETUP", move |t| {
        sender == Role::Server || !matches!(t, AuthToken::Delete { .. } | AuthToken::UseAlias { .. })
    });
    let unknown_ty = prop_oneof![Just(6u64), Just(8u64), 0..0x100u64, int62()]
        .prop_filter("unknown type", |t| ![1, 2, 3, 4, 5, 7].contains(t));
    let unknown = vec(unknown_ty.prop_flat_map(|t| (Just(t), kv_for(t, int62()))), 0..4).prop_map(|mut u| {
        u.sort_by_key(|(t, _)| *t);
        u
    });
    let versions = vec(prop_oneof![Just(VERSION), int62()], 0..4);
    (
        (proptest::option::of(bytes(20)), proptest::option::of(int62()), vec(token, 0..3)),
        (proptest::option::of(int62()), proptest::option::of(bytes(20)), proptest::option::of(bytes(20))),
        (unknown, versions, int62()),
    )
        .prop_map(
            move |(
                (path, max_request_id, auth_tokens),
                (cache, authority, implementation),
                (unknown, versions, v),
            )| {
                let (versions, selected_version) = match sender {
                    Role::Client => (versions, None),
                    Role::Server => (Vec::new(), Some(v)),
                };
                SetupOptions {
                    path,
                    max_request_id,
                    auth_tokens,
                    max_auth_token_cache_size: cache,
                    authority,
                    implementation,
                    unknown,
                    versions,
                    selected_version,
                    ..SetupOptions::default()
                }
            },
        )
}

fn subscribe() -> impl Strategy<Value = Subscribe> {
    (
        rid(),
        full_track_name(),
        tokens(),
        proptest::option::of(int62()),
        any::<u8>(),
        proptest::option::of(order()),
        any::<bool>(),
        filter(),
    )
        .prop_map(|(request_id, track, auth_tokens, timeout, prio, order, forward, f)| Subscribe {
            request_id,
            track,
            params: Parameters {
                auth_tokens,
                object_delivery_timeout: timeout,
                subscriber_priority: Some(prio),
                group_order: order,
                forward: Some(forward),
                location_filter: Some(f),
                ..Parameters::default()
            },
        })
}

/// SUBSCRIBE_OK's (and TRACK_STATUS_OK's) parameters and Track Properties.
fn ok_fields() -> impl Strategy<Value = (Parameters, Properties)> {
    (
        proptest::option::of(1..=MAX),
        proptest::option::of(loc()),
        order(),
        proptest::option::of(int62()),
        proptest::option::of(int62()),
    )
        .prop_map(|(expires, largest_object, o, t, c)| {
            (Parameters { expires, largest_object, ..Parameters::default() }, answer_props(o, t, c))
        })
}

fn fetch() -> impl Strategy<Value = Fetch> {
    let end_incl = location(int_upto(MAX - 1));
    let kind_and_range = prop_oneof![
        (full_track_name(), loc(), int62()).prop_map(|(track, start, end_group)| (
            FetchKind::Standalone { track },
            Some(LocationFilter::AbsoluteStartGroupEnd { start, end_group })
        )),
        (full_track_name(), loc(), end_incl).prop_map(|(track, start, end)| (
            FetchKind::Standalone { track },
            Some(LocationFilter::AbsoluteRange { start, end })
        )),
        (rid(), int62()).prop_map(|(joining_request_id, joining_start)| (
            FetchKind::RelativeJoining { joining_request_id, joining_start },
            None
        )),
        (rid(), int62()).prop_map(|(joining_request_id, joining_start)| (
            FetchKind::AbsoluteJoining { joining_request_id, joining_start },
            None
        )),
    ];
    (rid(), kind_and_range, any::<u8>(), proptest::option::of(order()), tokens()).prop_map(
        |(request_id, (kind, location_filter), prio, group_order, auth_tokens)| Fetch {
            request_id,
            kind,
            params: Parameters {
                auth_tokens,
                subscriber_priority: Some(prio),
                group_order,
                location_filter,
                ..Parameters::default()
            },
        },
    )
}

fn reason() -> impl Strategy<Value = Bytes> {
    prop_oneof![bytes(40), Just(Bytes::from(vec![b'r'; 1024]))]
}

fn answered_kind() -> impl Strategy<Value = RequestKind> {
    prop_oneof![
        Just(RequestKind::Subscribe),
        Just(RequestKind::Publish),
        Just(RequestKind::Fetch),
        Just(RequestKind::TrackStatus),
        Just(RequestKind::PublishNamespace),
        Just(RequestKind::SubscribeNamespace),
    ]
}

/// A message, and the request kind it answers (for the answers that need one).
type Case = (Message, Option<RequestKind>);

fn plain(m: impl Strategy<Value = Message> + 'static) -> BoxedStrategy<Case> {
    m.prop_map(|m| (m, None)).boxed()
}

/// Requests and the messages draft-14 shares with draft-16.
fn requests() -> BoxedStrategy<Case> {
    prop_oneof![
        plain(setup_options(Role::Client).prop_map(|options| Message::ClientSetup(Setup { options }))),
        plain(setup_options(Role::Server).prop_map(|options| Message::ServerSetup(Setup { options }))),
        plain(
            bytes(60)
                .prop_map(|new_session_uri| Message::GoAway(GoAway { new_session_uri, ..GoAway::default() }))
        ),
        plain(rid().prop_map(Message::MaxRequestId)),
        plain(rid().prop_map(Message::RequestsBlocked)),
        plain(subscribe().prop_map(Message::Subscribe)),
        plain((rid(), full_track_name(), tokens()).prop_map(|(request_id, track, auth_tokens)| {
            Message::TrackStatus(Subscribe {
                request_id,
                track,
                params: Parameters { auth_tokens, ..Parameters::default() },
            })
        })),
        plain(
            (
                rid(),
                rid(),
                location(int_upto(MAX - 1)),
                proptest::option::of(0..MAX - 1),
                any::<u8>(),
                any::<bool>(),
                tokens(),
                proptest::option::of(int62())
            )
                .prop_map(
                    |(request_id, existing_request_id, start, end, prio, forward, auth_tokens, timeout)| {
                        let location_filter = match end {
                            None => LocationFilter::AbsoluteStart { start },
                            Some(e) => {
                                LocationFilter::AbsoluteStartGroupEnd { start, end_group: start.group.max(e) }
                            }
                        };
                        Message::RequestUpdate(RequestUpdate {
                            request_id,
                            existing_request_id,
                            params: Parameters {
                                auth_tokens,
                                object_delivery_timeout: timeout,
                                subscriber_priority: Some(prio),
                                forward: Some(forward),
                                location_filter: Some(location_filter),
                                ..Parameters::default()
                            },
                        })
                    }
                )
        ),
        plain(rid().prop_map(Message::Unsubscribe)),
        plain((rid(), int62(), int62(), reason()).prop_map(
            |(request_id, status_code, stream_count, reason)| {
                Message::PublishDone(PublishDone { request_id, status_code, stream_count, reason })
            }
        )),
        plain(fetch().prop_map(Message::Fetch)),
        plain(rid().prop_map(Message::FetchCancel)),
        plain((rid(), namespace(1, 32), tokens()).prop_map(|(request_id, namespace, auth_tokens)| {
            Message::PublishNamespace(PublishNamespace {
                request_id,
                namespace,
                params: Parameters { auth_tokens, ..Parameters::default() },
            })
        })),
        plain(namespace(1, 32).prop_map(Message::PublishNamespaceDoneNamed)),
        plain((namespace(1, 8), int62(), reason()).prop_map(|(namespace, error_code, reason)| {
            Message::PublishNamespaceCancelNamed(PublishNamespaceCancelNamed {
                namespace,
                error_code,
                reason,
            })
        })),
        plain((rid(), namespace(1, 32), tokens()).prop_map(|(request_id, prefix, auth_tokens)| {
            Message::SubscribeNamespace(SubscribeNamespace {
                request_id,
                prefix,
                options: SubscribeOptions::Both,
                params: Parameters { auth_tokens, ..Parameters::default() },
            })
        })),
        plain(namespace(1, 32).prop_map(Message::UnsubscribeNamespace)),
    ]
    .boxed()
}

/// Answers, and PUBLISH (whose fields are answer-like).
fn answers() -> BoxedStrategy<Case> {
    prop_oneof![
        plain((rid(), int62(), ok_fields()).prop_map(|(request_id, a, (params, track_properties))| {
            Message::SubscribeOk(SubscribeOk {
                request_id,
                track_alias: TrackAlias(a),
                params,
                track_properties,
            })
        })),
        (rid(), ok_fields())
            .prop_map(|(request_id, (params, track_properties))| {
                (
                    Message::RequestOk(RequestOk { request_id, params, track_properties }),
                    Some(RequestKind::TrackStatus),
                )
            })
            .boxed(),
        (rid(), prop_oneof![Just(RequestKind::PublishNamespace), Just(RequestKind::SubscribeNamespace)])
            .prop_map(|(request_id, k)| (
                Message::RequestOk(RequestOk { request_id, ..RequestOk::default() }),
                Some(k)
            ))
            .boxed(),
        (rid(), int62(), reason(), answered_kind())
            .prop_map(|(request_id, error_code, reason, k)| {
                let e = RequestError { request_id, error_code, retry_interval: 0, reason, redirect: None };
                (Message::RequestError(e), Some(k))
            })
            .boxed(),
        plain(
            (
                rid(),
                full_track_name(),
                int62(),
                tokens(),
                proptest::option::of(loc()),
                any::<bool>(),
                order(),
                proptest::option::of(int62()),
                proptest::option::of(int62())
            )
                .prop_map(
                    |(request_id, track, a, auth_tokens, largest_object, forward, o, t, c)| Message::Publish(
                        Publish {
                            request_id,
                            track,
                            track_alias: TrackAlias(a),
                            params: Parameters {
                                auth_tokens,
                                largest_object,
                                forward: Some(forward),
                                ..Parameters::default()
                            },
                            track_properties: answer_props(o, t, c),
                        }
                    )
                )
        ),
        plain(
            (rid(), any::<bool>(), any::<u8>(), order(), filter(), proptest::option::of(int62())).prop_map(
                |(request_id, forward, prio, o, f, timeout)| Message::PublishOk(PublishOk {
                    request_id,
                    params: Parameters {
                        object_delivery_timeout: timeout,
                        forward: Some(forward),
                        subscriber_priority: Some(prio),
                        group_order: Some(o),
                        location_filter: Some(f),
                        ..Parameters::default()
                    },
                })
            )
        ),
        plain(
            (
                rid(),
                any::<bool>(),
                prop_oneof![
                    int62().prop_map(FetchEnd::Group),
                    location(int_upto(MAX - 1)).prop_map(FetchEnd::Object)
                ],
                order(),
                proptest::option::of(int62())
            )
                .prop_map(|(request_id, end_of_track, end_location, o, c)| Message::FetchOk(
                    FetchOk {
                        request_id,
                        end_of_track,
                        end_location,
                        params: Parameters::default(),
                        track_properties: answer_props(o, None, c),
                    }
                ))
        ),
    ]
    .boxed()
}

fn any_case() -> BoxedStrategy<Case> {
    prop_oneof![requests(), answers()].boxed()
}

fn sender_of(m: &Message) -> Role {
    match m {
        Message::ClientSetup(_) => Role::Client,
        _ => Role::Server,
    }
}

// ---------------------------------------------------------------- helpers

fn enc(case: &Case) -> Vec<u8> {
    let mut out = Vec::new();
    match case.1 {
        Some(k) => encode_response(&case.0, k, &mut out),
        None => encode_message(&case.0, &mut out),
    }
    .unwrap_or_else(|e| panic!("{} encodes: {e}", case.0.name()));
    out
}

fn dec(buf: &[u8], sender: Role) -> Result<(Message, usize), DecodeError> {
    decode_message(buf, &DecodeContext::control(sender))
}

fn vi(v: u64) -> Vec<u8> {
    let mut out = Vec::new();
    Quic::encode(v, &mut out).expect("varint");
    out
}

fn frame(ty: u64, body: &[u8]) -> Vec<u8> {
    let mut out = vi(ty);
    out.extend_from_slice(&(body.len() as u16).to_be_bytes());
    out.extend_from_slice(body);
    out
}

fn violation(buf: &[u8], sender: Role) -> bool {
    matches!(dec(buf, sender), Err(DecodeError::Invalid { code: ErrorCode::ProtocolViolation, .. }))
}

/// `ns` fields, each length-prefixed, after their count.
fn ns_bytes(fields: &[&[u8]]) -> Vec<u8> {
    let mut out = vi(fields.len() as u64);
    for f in fields {
        out.extend(vi(f.len() as u64));
        out.extend_from_slice(f);
    }
    out
}

// ---------------------------------------------------------------- properties

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn every_message_round_trips(case in any_case()) {
        let bytes = enc(&case);
        let (back, n) = dec(&bytes, sender_of(&case.0)).expect("decodes");
        prop_assert_eq!(n, bytes.len());
        prop_assert_eq!(&back, &case.0);
        // The Version entry point writes the same bytes.
        let mut again = Vec::new();
        match case.1 {
            Some(k) => Version::Draft14.encode_response(&case.0, k, &mut again),
            None => Version::Draft14.encode_message(&case.0, &mut again),
        }.expect("encodes");
        prop_assert_eq!(again, bytes);
    }

    #[test]
    fn every_strict_prefix_needs_more(case in any_case()) {
        let bytes = enc(&case);
        for cut in 0..bytes.len() {
            prop_assert_eq!(dec(&bytes[..cut], sender_of(&case.0)), Err(DecodeError::NeedMore), "cut at {}", cut);
        }
    }

    #[test]
    fn arbitrary_input_never_panics(bytes in vec(any::<u8>(), 0..200)) {
        let _ = dec(&bytes, Role::Client);
        let _ = dec(&bytes, Role::Server);
    }

    /// A well-formed frame of every draft-14 type with an arbitrary body: an error or a value,
    /// never a panic, and a value consumes the whole frame.
    #[test]
    fn arbitrary_bodies_never_panic(ty in prop_oneof![0u64..0x22, Just(0x40u64)], body in vec(any::<u8>(), 0..120)) {
        let f = frame(ty, &body);
        for role in [Role::Client, Role::Server] {
            if let Ok((_, n)) = dec(&f, role) {
                prop_assert_eq!(n, f.len());
            }
        }
    }
}

// ---------------------------------------------------------------- vectors (§9)

#[test]
fn client_setup_lists_versions_then_absolute_parameters() {
    // §9.3: Number of Supported Versions, the versions, Number of Parameters, Setup Parameters
    // as Key-Value-Pairs with absolute types (§1.4.2): PATH (0x01) "/a", MAX_REQUEST_ID (0x02)
    // 100, MOQT IMPLEMENTATION (0x07) "x".
    let mut body = vi(2);
    body.extend(vi(VERSION));
    body.extend(vi(0xff00_000d));
    body.extend([0x03, 0x01, 0x02, b'/', b'a', 0x02]);
    body.extend(vi(100));
    body.extend([0x07, 0x01, b'x']);
    let bytes = frame(0x20, &body);
    assert_eq!(&bytes[..1], &[0x20]);
    let options = SetupOptions {
        versions: vec![0xff00_000e, 0xff00_000d],
        path: Some(Bytes::from_static(b"/a")),
        max_request_id: Some(100),
        implementation: Some(Bytes::from_static(b"x")),
        ..SetupOptions::default()
    };
    let m = Message::ClientSetup(Setup { options });
    assert_eq!(dec(&bytes, Role::Client), Ok((m.clone(), bytes.len())));
    assert_eq!(enc(&(m, None)), bytes);
    // The same types delta-coded (draft-16's 0x01, 0x01, 0x05) read as types 1, 1 and 5: a
    // repeated PATH.
    let mut delta = vi(1);
    delta.extend(vi(VERSION));
    delta.extend([0x02, 0x01, 0x01, b'/', 0x01, 0x01, b'b']);
    assert!(violation(&frame(0x20, &delta), Role::Client));
}

#[test]
fn server_setup_names_the_selected_version() {
    let mut body = vi(VERSION);
    body.push(0x00);
    let bytes = frame(0x21, &body);
    let options = SetupOptions { selected_version: Some(VERSION), ..SetupOptions::default() };
    assert_eq!(dec(&bytes, Role::Server), Ok((Message::ServerSetup(Setup { options }), bytes.len())));
    // A SERVER_SETUP without a version cannot be written; one from a client is refused.
    let none = Message::ServerSetup(Setup::default());
    assert!(matches!(encode_message(&none, &mut Vec::new()), Err(EncodeError::Unsupported(_))));
    assert!(violation(&bytes, Role::Client));
}

#[test]
fn subscribe_layout() {
    // §9.7: Request ID 2, namespace ("a"), name "t", Subscriber Priority 7, Group Order 2,
    // Forward 1, AbsoluteRange {5, 1} .. 9, then DELIVERY TIMEOUT (0x02) 300 and an unknown
    // odd parameter 0x41, which is ignored.
    let mut body = vec![0x02];
    body.extend(ns_bytes(&[b"a"]));
    body.extend([0x01, b't', 7, 2, 1, 0x04, 5, 1, 9, 0x02, 0x02]);
    body.extend(vi(300));
    body.extend([0x40, 0x41, 0x01, 0xAA]);
    let (m, _) = dec(&frame(0x3, &body), Role::Client).expect("decodes");
    let Message::Subscribe(s) = m else { panic!("{m:?}") };
    assert_eq!(s.request_id, RequestId(2));
    assert_eq!(s.params.subscriber_priority, Some(7));
    assert_eq!(s.params.group_order, Some(GroupOrder::Descending));
    assert_eq!(s.params.forward, Some(true));
    assert_eq!(
        s.params.location_filter,
        Some(LocationFilter::AbsoluteStartGroupEnd { start: Location::new(5, 1), end_group: 9 })
    );
    assert_eq!(s.params.object_delivery_timeout, Some(300));
    // Group Order 3, Forward 2 and an End Group before the start are violations.
    for (at, v) in [(7, 3), (8, 2), (12, 4)] {
        let mut bad = body.clone();
        bad[at] = v;
        assert!(violation(&frame(0x3, &bad), Role::Client), "byte {at} = {v}");
    }
    // A repeated DELIVERY TIMEOUT is a violation (§9.2).
    let mut dup = body[..body.len() - 4].to_vec();
    dup[13] = 0x02;
    dup.extend([0x02, 0x05]);
    assert!(violation(&frame(0x3, &dup), Role::Client));
}

#[test]
fn subscribe_defaults_for_what_the_model_leaves_out() {
    let track =
        FullTrackName { namespace: TrackNamespace::from_strs(&["a"]), name: Bytes::from_static(b"t") };
    let m = Message::Subscribe(Subscribe { request_id: RequestId(0), track, params: Parameters::default() });
    let bytes = enc(&(m, None));
    // Priority 128, Group Order 0 (the publisher's), Forward 1, AbsoluteStart {0, 0}, no parameters.
    assert_eq!(&bytes[bytes.len() - 7..], &[128, 0, 1, 0x03, 0, 0, 0]);
}

#[test]
fn subscribe_ok_and_track_status_ok() {
    // §9.8: Request ID 4, Track Alias 9, Expires 0, Group Order 1, Content Exists 1 {3, 4},
    // MAX CACHE DURATION (0x04) 60.
    let body = [0x04, 0x09, 0x00, 0x01, 0x01, 0x03, 0x04, 0x01, 0x04, 60];
    let (m, _) = dec(&frame(0x4, &body), Role::Server).expect("decodes");
    let track_properties = answer_props(GroupOrder::Ascending, None, Some(60));
    let params = Parameters { largest_object: Some(Location::new(3, 4)), ..Parameters::default() };
    let ok = SubscribeOk {
        request_id: RequestId(4),
        track_alias: TrackAlias(9),
        params: params.clone(),
        track_properties: track_properties.clone(),
    };
    assert_eq!(m, Message::SubscribeOk(ok));
    // TRACK_STATUS_OK (0xE) has the same layout and decodes as REQUEST_OK.
    let (m, _) = dec(&frame(0xE, &body), Role::Server).expect("decodes");
    assert_eq!(m, Message::RequestOk(RequestOk { request_id: RequestId(4), params, track_properties }));
    // Group Order 0 and Content Exists 2 are violations.
    for (at, v) in [(3, 0), (4, 2)] {
        let mut bad = body.to_vec();
        bad[at] = v;
        assert!(violation(&frame(0x4, &bad), Role::Server));
    }
}

#[test]
fn subscribe_update_end_group_is_plus_one() {
    // §9.10: Request ID 6, Subscription Request ID 2, Start {10, 0}, End Group 13 (= 12 + 1),
    // priority 1, Forward 0, no parameters.
    let body = [0x06, 0x02, 10, 0, 13, 1, 0, 0];
    let (m, _) = dec(&frame(0x2, &body), Role::Client).expect("decodes");
    let Message::RequestUpdate(u) = &m else { panic!("{m:?}") };
    assert_eq!(u.existing_request_id, RequestId(2));
    assert_eq!(
        u.params.location_filter,
        Some(LocationFilter::AbsoluteStartGroupEnd { start: Location::new(10, 0), end_group: 12 })
    );
    assert_eq!(enc(&(m.clone(), None)), frame(0x2, &body));
    // End Group 0 is open-ended; an end before the start group is a violation.
    let mut open = body;
    open[4] = 0;
    let (m, _) = dec(&frame(0x2, &open), Role::Client).expect("decodes");
    let Message::RequestUpdate(u) = m else { panic!() };
    assert_eq!(u.params.location_filter, Some(LocationFilter::AbsoluteStart { start: Location::new(10, 0) }));
    let mut before = body;
    before[4] = 10;
    assert!(violation(&frame(0x2, &before), Role::Client));
    // Without its fixed fields an update cannot be written.
    let bare = Message::RequestUpdate(RequestUpdate::default());
    assert!(matches!(encode_message(&bare, &mut Vec::new()), Err(EncodeError::Unsupported(_))));
}

#[test]
fn fetch_and_fetch_ok_layout() {
    // §9.16: Request ID 8, priority 3, Group Order 0, Standalone: ("a") "t" {1, 0} .. {2, 5}
    // ("end plus one": up to {2, 4}), no parameters.
    let mut body = vec![0x08, 3, 0, 0x01];
    body.extend(ns_bytes(&[b"a"]));
    body.extend([0x01, b't', 1, 0, 2, 5, 0]);
    let (m, _) = dec(&frame(0x16, &body), Role::Client).expect("decodes");
    let Message::Fetch(f) = &m else { panic!("{m:?}") };
    assert_eq!(f.params.subscriber_priority, Some(3));
    assert_eq!(f.params.group_order, None);
    assert_eq!(
        f.params.location_filter,
        Some(LocationFilter::AbsoluteRange { start: Location::new(1, 0), end: Location::new(2, 4) })
    );
    assert_eq!(enc(&(m.clone(), None)), frame(0x16, &body));
    // §9.17: Request ID 8, Group Order 2, End Of Track 1, End {7, 0} (the whole group 7).
    let body = [0x08, 2, 1, 7, 0, 0];
    let (m, _) = dec(&frame(0x18, &body), Role::Server).expect("decodes");
    let Message::FetchOk(ok) = &m else { panic!("{m:?}") };
    assert_eq!(ok.end_location, FetchEnd::Group(7));
    assert!(ok.end_of_track);
    assert_eq!(ok.track_properties, answer_props(GroupOrder::Descending, None, None));
    assert_eq!(enc(&(m.clone(), None)), frame(0x18, &body));
}

#[test]
fn answers_take_the_request_kind() {
    let e = Message::RequestError(RequestError {
        request_id: RequestId(3),
        error_code: 4,
        retry_interval: 9,
        reason: Bytes::from_static(b"no"),
        redirect: None,
    });
    for (k, ty) in [
        (RequestKind::Subscribe, mt::SUBSCRIBE_ERROR),
        (RequestKind::Publish, mt::PUBLISH_ERROR),
        (RequestKind::Fetch, mt::FETCH_ERROR),
        (RequestKind::TrackStatus, mt::TRACK_STATUS_ERROR),
        (RequestKind::PublishNamespace, mt::PUBLISH_NAMESPACE_ERROR),
        (RequestKind::SubscribeNamespace, mt::SUBSCRIBE_NAMESPACE_ERROR),
    ] {
        // Request ID, Error Code, Reason Phrase; no Retry Interval in draft-14.
        assert_eq!(enc(&(e.clone(), Some(k))), frame(ty, &[3, 4, 2, b'n', b'o']), "{k:?}");
    }
    assert_eq!((mt::SUBSCRIBE_ERROR, mt::PUBLISH_ERROR, mt::FETCH_ERROR), (0x5, 0x1F, 0x19));
    assert_eq!((mt::TRACK_STATUS_OK, mt::TRACK_STATUS_ERROR), (0xE, 0xF));
    assert_eq!((mt::PUBLISH_NAMESPACE_OK, mt::PUBLISH_NAMESPACE_ERROR), (0x7, 0x8));
    assert_eq!(
        (mt::SUBSCRIBE_NAMESPACE_OK, mt::SUBSCRIBE_NAMESPACE_ERROR, mt::UNSUBSCRIBE_NAMESPACE),
        (0x12, 0x13, 0x14)
    );
    let ok = Message::RequestOk(RequestOk { request_id: RequestId(5), ..RequestOk::default() });
    assert_eq!(enc(&(ok.clone(), Some(RequestKind::PublishNamespace))), frame(0x7, &[5]));
    assert_eq!(enc(&(ok.clone(), Some(RequestKind::SubscribeNamespace))), frame(0x12, &[5]));
    // Without a kind, and for kinds draft-14 answers otherwise or not at all: Unsupported.
    let unsupported = |m: &Message, k: Option<RequestKind>| {
        let r = match k {
            Some(k) => encode_response(m, k, &mut Vec::new()),
            None => encode_message(m, &mut Vec::new()),
        };
        matches!(r, Err(EncodeError::Unsupported(_)))
    };
    assert!(unsupported(&ok, None));
    assert!(unsupported(&e, None));
    assert!(unsupported(&ok, Some(RequestKind::Subscribe)));
    assert!(unsupported(&ok, Some(RequestKind::RequestUpdate)));
    assert!(unsupported(&e, Some(RequestKind::RequestUpdate)));
    // A REQUEST_OK answering a PUBLISH is a PUBLISH_OK.
    let publish_ok = Parameters { group_order: Some(GroupOrder::Ascending), ..Parameters::default() };
    let ok = Message::RequestOk(RequestOk {
        request_id: RequestId(1),
        params: publish_ok.clone(),
        ..RequestOk::default()
    });
    let (m, _) = dec(&enc(&(ok, Some(RequestKind::Publish))), Role::Client).expect("decodes");
    let Message::PublishOk(p) = m else { panic!("{m:?}") };
    assert_eq!(p.params.group_order, Some(GroupOrder::Ascending));
}

#[test]
fn namespace_messages_name_the_namespace() {
    let ns = ns_bytes(&[b"a", b"b"]);
    let (m, _) = dec(&frame(0x9, &ns), Role::Server).expect("decodes");
    assert_eq!(m, Message::PublishNamespaceDoneNamed(TrackNamespace::from_strs(&["a", "b"])));
    let (m, _) = dec(&frame(0x14, &ns), Role::Client).expect("decodes");
    assert_eq!(m, Message::UnsubscribeNamespace(TrackNamespace::from_strs(&["a", "b"])));
    // §9.28: a prefix of no fields is a violation, in SUBSCRIBE_NAMESPACE and after it.
    assert!(violation(&frame(0x14, &[0]), Role::Client));
    assert!(violation(&frame(0x11, &[0, 0, 0]), Role::Client));
    // Draft-16's forms of these cannot be written.
    for m in [Message::PublishNamespaceDone(RequestId(1)), Message::Namespace(TrackNamespace::default())] {
        assert!(matches!(encode_message(&m, &mut Vec::new()), Err(EncodeError::Unsupported(_))));
    }
    let sub = Message::SubscribeNamespace(SubscribeNamespace {
        options: SubscribeOptions::Namespace,
        prefix: TrackNamespace::from_strs(&["a"]),
        ..SubscribeNamespace::default()
    });
    assert!(matches!(encode_message(&sub, &mut Vec::new()), Err(EncodeError::Unsupported(_))));
}

#[test]
fn unknown_types_and_parameters() {
    // 0x1E is PUBLISH_OK here; 0x30 and the old 0x40 CLIENT_SETUP are unknown.
    for ty in [0x30, 0x40, 0x2F00] {
        assert!(violation(&frame(ty, &[]), Role::Client), "{ty:#x}");
    }
    // A parameter a message may not carry is ignored (§9.2.1): MAX CACHE DURATION in FETCH.
    let mut body = vec![0x08, 3, 1, 0x02, 0x01, 0x05, 0x01, 0x04, 0x07];
    let (m, _) = dec(&frame(0x16, &body), Role::Client).expect("decodes");
    let Message::Fetch(f) = m else { panic!() };
    assert!(f.params.auth_tokens.is_empty());
    // ...but a model parameter draft-14 has no place for cannot be written.
    body.clear();
    let track = FullTrackName { namespace: TrackNamespace::from_strs(&["a"]), name: Bytes::new() };
    let mut s = Subscribe { track, ..Subscribe::default() };
    s.params.new_group_request = Some(1);
    assert!(matches!(encode_message(&Message::Subscribe(s), &mut body), Err(EncodeError::Unsupported(_))));
}

#[test]
fn error_code_tables_per_answer() {
    use RequestErrorCode as E;
    let d14 = Version::Draft14;
    // 0x4 means a different thing in each table (§13.1.2-§13.1.7).
    assert_eq!(E::from_code_for(0x4, d14, RequestKind::Subscribe), E::DoesNotExist);
    assert_eq!(E::from_code_for(0x4, d14, RequestKind::Publish), E::Uninterested);
    assert_eq!(E::from_code_for(0x4, d14, RequestKind::SubscribeNamespace), E::DoesNotExist);
    assert_eq!(E::from_code_for(0x5, d14, RequestKind::SubscribeNamespace), E::PrefixOverlap);
    assert_eq!(E::from_code_for(0x7, d14, RequestKind::Fetch), E::InvalidJoiningRequestId);
    assert_eq!(E::from_code_for(0x6, d14, RequestKind::Fetch), E::Other(code::NO_OBJECTS_D14));
    assert_eq!(E::DoesNotExist.code_for(d14, RequestKind::Fetch), 0x4);
    assert_eq!(E::MalformedTrack.code_for(d14, RequestKind::Fetch), 0x9);
    assert_eq!(E::ExpiredAuthToken.code_for(d14, RequestKind::TrackStatus), 0x12);
    assert_eq!(E::ExpiredAuthToken.code_for(d14, RequestKind::Publish), 0x1);
    assert_eq!(E::PrefixOverlap.code_for(d14, RequestKind::Subscribe), 0x0);
    // Other drafts ignore the kind.
    assert_eq!(E::DoesNotExist.code_for(Version::Draft16, RequestKind::Publish), code::DOES_NOT_EXIST);
    // Every code point read from a draft-14 peer goes back as it came, in every table.
    for k in [
        RequestKind::Subscribe,
        RequestKind::Publish,
        RequestKind::Fetch,
        RequestKind::TrackStatus,
        RequestKind::PublishNamespace,
        RequestKind::SubscribeNamespace,
    ] {
        for c in 0..0x20 {
            assert_eq!(E::from_code_for(c, d14, k).code_for(d14, k), c, "{k:?} {c:#x}");
        }
    }
    use wire::{DoneStatus as S, ResetCode as X};
    assert_eq!(S::MalformedTrack.code(d14), 0x7);
    assert_eq!(S::from_code(0x5, d14), S::Expired);
    assert_eq!(S::from_code(0x6, d14), S::TooFarBehind);
    assert_eq!(X::TooFarBehind.code(d14), code::RESET_CANCELLED);
}
