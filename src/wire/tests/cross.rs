//! The version-neutral model across dialects: what one draft decodes, the other draft encodes
//! and decodes to the same value (for everything both can express). This is what lets a
//! draft-16 subscriber receive a track published over draft-22, and the reverse; draft-18 is
//! checked against both.

mod support;

use bytes::Bytes;
use proptest::prelude::*;
use support::strategies::*;
use wire::model::*;
use wire::{d16, d18, d22, Version};

/// Decodes `bytes` in `from`, re-encodes in `to`, decodes again: returns both decoded values.
fn transcode(from: Version, to: Version, bytes: &[u8], ctx: &DecodeContext) -> (Message, Message) {
    let (first, n) = from.decode_message(bytes, ctx).expect("decodes in the source draft");
    assert_eq!(n, bytes.len());
    let mut out = Vec::new();
    to.encode_message(&first, &mut out).expect("encodes in the target draft");
    let (second, m) = to.decode_message(&out, ctx).expect("decodes in the target draft");
    assert_eq!(m, out.len());
    (first, second)
}

/// Parameters of a SUBSCRIBE that every draft can carry.
fn common_subscribe_params() -> impl Strategy<Value = Parameters> {
    let filter = prop_oneof![
        Just(LocationFilter::NextObject),
        Just(LocationFilter::RelativeStart { groups_back: 0 }),
        location(int62()).prop_map(|start| LocationFilter::AbsoluteStart { start }),
        (location(int_upto(1 << 40)), 0..1000u64).prop_map(|(start, d)| {
            LocationFilter::AbsoluteStartGroupEnd { start, end_group: start.group + d }
        }),
    ];
    (
        proptest::collection::vec(auth_token(int62()), 0..3),
        proptest::option::of(1..=(1u64 << 62) - 1),
        proptest::option::of(any::<bool>()),
        proptest::option::of(any::<u8>()),
        proptest::option::of(prop_oneof![Just(GroupOrder::Ascending), Just(GroupOrder::Descending)]),
        proptest::option::of(filter),
        proptest::option::of(int62()),
    )
        .prop_map(|(auth_tokens, timeout, forward, prio, order, filter, ngr)| Parameters {
            auth_tokens,
            object_delivery_timeout: timeout,
            forward,
            subscriber_priority: prio,
            group_order: order,
            location_filter: filter,
            new_group_request: ngr,
            ..Parameters::default()
        })
}

proptest! {
    #[test]
    fn subscribe_crosses_both_ways(
        request_id in 0..(1u64 << 62),
        track in full_track_name(),
        params in common_subscribe_params(),
    ) {
        let msg = Message::Subscribe(Subscribe { request_id: RequestId(request_id), track, params });
        let ctx = DecodeContext::control(Role::Client);
        for (from, to) in [(Version::Draft22, Version::Draft16), (Version::Draft16, Version::Draft22)] {
            let mut bytes = Vec::new();
            from.encode_message(&msg, &mut bytes).expect("encodes");
            let (first, second) = transcode(from, to, &bytes, &ctx);
            prop_assert_eq!(&first, &msg);
            prop_assert_eq!(&second, &msg);
        }
    }

    #[test]
    fn subgroup_objects_with_properties_cross(
        ids in proptest::collection::btree_set(0..(1u64 << 40), 1..8),
        props in proptest::collection::vec(properties(int62()), 8),
        lens in proptest::collection::vec(1..5000u64, 8),
    ) {
        let header = SubgroupHeader {
            track_alias: TrackAlias(3),
            group_id: 9,
            subgroup_id: SubgroupId::Explicit(1),
            publisher_priority: None,
            has_properties: true,
            end_of_group: false,
            first_object: false,
        };
        let objects: Vec<SubgroupObject> = ids
            .iter()
            .zip(props.iter().zip(&lens))
            .map(|(&object_id, (p, &payload_len))| SubgroupObject {
                object_id,
                properties: p.clone(),
                payload_len,
                status: ObjectStatus::Normal,
            })
            .collect();
        // Publisher side: draft-22 on the wire.
        let mut w22 = d22::data::SubgroupWriter::new(&header);
        let mut r22 = d22::data::SubgroupReader::new(&header);
        // Subscriber side: draft-16 on the wire.
        let mut w16 = d16::data::SubgroupWriter::new(&header);
        let mut r16 = d16::data::SubgroupReader::new(&header);
        for obj in &objects {
            let mut a = Vec::new();
            w22.encode(obj, &mut a).expect("draft-22 encodes");
            let (via22, n) = r22.decode(&a).expect("draft-22 decodes");
            prop_assert_eq!(n, a.len());
            let mut b = Vec::new();
            w16.encode(&via22, &mut b).expect("draft-16 encodes");
            let (via16, m) = r16.decode(&b).expect("draft-16 decodes");
            prop_assert_eq!(m, b.len());
            prop_assert_eq!(&via16, obj);
        }
    }
}

/// Responses: draft-22 takes the Request ID from the request stream, draft-16 from the wire;
/// both land on the same model value.
#[test]
fn responses_cross_with_request_context() {
    let id = RequestId(6);
    let ctx = DecodeContext::request(Role::Server, id);
    let immutable = Bytes::from_static(&[0x04, 0x01, 0x40, 0x80]); // opaque: never re-encoded
    let props: Properties = [
        (property_type::DEFAULT_PUBLISHER_PRIORITY, KvValue::Int(10)),
        (property_type::IMMUTABLE_PROPERTIES, KvValue::Bytes(immutable.clone())),
        (0x3801, KvValue::Bytes(Bytes::from_static(b"app-specific"))),
    ]
    .into_iter()
    .collect();
    let messages = [
        Message::SubscribeOk(SubscribeOk {
            request_id: id,
            track_alias: TrackAlias(77),
            params: Parameters {
                expires: Some(30_000),
                largest_object: Some(Location::new(12, 3)),
                ..Parameters::default()
            },
            track_properties: props,
        }),
        Message::PublishDone(PublishDone {
            request_id: id,
            status_code: 0x2,
            stream_count: 14,
            reason: Bytes::from_static(b"track ended"),
        }),
        Message::RequestError(RequestError {
            request_id: id,
            error_code: 0x10,
            retry_interval: 0,
            reason: Bytes::from_static(b"no such track"),
            redirect: None,
        }),
        Message::FetchOk(FetchOk {
            request_id: id,
            end_of_track: true,
            end_location: FetchEnd::Object(Location::new(4, 20)),
            params: Parameters::default(),
            track_properties: Properties::new(),
        }),
    ];
    for msg in messages {
        for (from, to) in [(Version::Draft22, Version::Draft16), (Version::Draft16, Version::Draft22)] {
            let mut bytes = Vec::new();
            from.encode_message(&msg, &mut bytes).expect("encodes");
            let (first, second) = transcode(from, to, &bytes, &ctx);
            assert_eq!(first, msg, "{from:?} decode of {}", msg.name());
            assert_eq!(second, msg, "{from:?} -> {to:?} of {}", msg.name());
            if let Message::SubscribeOk(ok) = &second {
                assert_eq!(ok.track_properties.immutable(), Some(&immutable), "immutable blob kept as is");
            }
        }
    }
}

/// What exists in one draft only is refused by the other, not silently dropped.
#[test]
fn draft_only_messages_are_refused_not_dropped() {
    let mut out = Vec::new();
    assert!(Version::Draft22.encode_message(&Message::Unsubscribe(RequestId(2)), &mut out).is_err());
    assert!(Version::Draft22.encode_message(&Message::MaxRequestId(RequestId(2)), &mut out).is_err());
    let tracks = Message::SubscribeTracks(SubscribeTracks {
        request_id: RequestId(2),
        prefix: TrackNamespace::from_strs(&["a"]),
        params: Parameters::default(),
    });
    assert!(Version::Draft16.encode_message(&tracks, &mut out).is_err());
    let whole_group = Message::FetchOk(FetchOk {
        request_id: RequestId(1),
        end_location: FetchEnd::Group(5),
        ..FetchOk::default()
    });
    assert!(Version::Draft22.encode_message(&whole_group, &mut out).is_err());
    assert!(out.is_empty(), "a refused message writes nothing");
}

// ---------------------------------------------------------------------------------------------
// draft-18 against the other two
// ---------------------------------------------------------------------------------------------

const D16: Version = Version::Draft16;
const D18: Version = Version::Draft18;
const D22: Version = Version::Draft22;

/// Encodes `msg` in `from`, decodes it, re-encodes in `to` and decodes again; both decoded
/// values must be `msg`.
#[track_caller]
fn crosses(msg: &Message, from: Version, to: Version, ctx: &DecodeContext) {
    let mut a = Vec::new();
    from.encode_message(msg, &mut a).unwrap_or_else(|e| panic!("{from:?} encodes {}: {e}", msg.name()));
    let (first, n) = from.decode_message(&a, ctx).expect("decodes in the source draft");
    assert_eq!(n, a.len());
    assert_eq!(&first, msg, "{from:?} decode of {}", msg.name());
    let mut b = Vec::new();
    to.encode_message(&first, &mut b).unwrap_or_else(|e| panic!("{to:?} encodes {}: {e}", msg.name()));
    let (second, m) = to.decode_message(&b, ctx).expect("decodes in the target draft");
    assert_eq!(m, b.len());
    assert_eq!(&second, msg, "{from:?} -> {to:?} of {}", msg.name());
}

/// Every ordered pair of two different dialects among `ds`.
fn pairs(ds: &[Version]) -> Vec<(Version, Version)> {
    let mut out = Vec::new();
    for (i, a) in ds.iter().enumerate() {
        for (j, b) in ds.iter().enumerate() {
            if i != j {
                out.push((*a, *b));
            }
        }
    }
    out
}

proptest! {
    /// What the three drafts share of SUBSCRIBE crosses between any two of them.
    #[test]
    fn subscribe_crosses_three_drafts(
        request_id in 0..(1u64 << 62),
        track in full_track_name(),
        params in common_subscribe_params(),
    ) {
        let msg = Message::Subscribe(Subscribe { request_id: RequestId(request_id), track, params });
        for (from, to) in pairs(&[D16, D18, D22]) {
            crosses(&msg, from, to, &DecodeContext::control(Role::Client));
        }
    }

    /// A standalone FETCH's absolute range crosses all three drafts: draft-16 and draft-18 in
    /// Start/End Locations, draft-22 in LOCATION_FILTER.
    #[test]
    fn standalone_fetch_crosses_three_drafts(
        track in full_track_name(),
        start in location(int_upto(1 << 40)),
        groups in 0..1000u64,
        end_object in proptest::option::of(0..(1u64 << 40)),
        prio in proptest::option::of(any::<u8>()),
    ) {
        let end_group = start.group + groups;
        let range = match end_object {
            None => LocationFilter::AbsoluteStartGroupEnd { start, end_group },
            Some(object) => LocationFilter::AbsoluteRange { start, end: Location::new(end_group, object) },
        };
        let params = Parameters { location_filter: Some(range), subscriber_priority: prio, ..Parameters::default() };
        let msg = Message::Fetch(Fetch { request_id: RequestId(4), kind: FetchKind::Standalone { track }, params });
        for (from, to) in pairs(&[D16, D18, D22]) {
            crosses(&msg, from, to, &DecodeContext::control(Role::Client));
        }
    }

    /// Subgroup objects with properties go from a draft-18 publisher to a draft-16 subscriber.
    #[test]
    fn subgroup_objects_cross_draft18_to_draft16(
        ids in proptest::collection::btree_set(0..(1u64 << 40), 1..8),
        props in proptest::collection::vec(properties(int62()), 8),
    ) {
        let header = SubgroupHeader {
            track_alias: TrackAlias(3),
            group_id: 9,
            subgroup_id: SubgroupId::FirstObject,
            publisher_priority: Some(4),
            has_properties: true,
            end_of_group: true,
            first_object: false,
        };
        let (mut w18, mut r18) = (d18::data::SubgroupWriter::new(&header), d18::data::SubgroupReader::new(&header));
        let (mut w16, mut r16) = (d16::data::SubgroupWriter::new(&header), d16::data::SubgroupReader::new(&header));
        for (&object_id, p) in ids.iter().zip(&props) {
            let obj = SubgroupObject { object_id, properties: p.clone(), payload_len: 9, status: ObjectStatus::Normal };
            let mut a = Vec::new();
            w18.encode(&obj, &mut a).expect("draft-18 encodes");
            let (via18, n) = r18.decode(&a).expect("draft-18 decodes");
            prop_assert_eq!(n, a.len());
            let mut b = Vec::new();
            w16.encode(&via18, &mut b).expect("draft-16 encodes");
            let (via16, m) = r16.decode(&b).expect("draft-16 decodes");
            prop_assert_eq!(m, b.len());
            prop_assert_eq!(&via16, &obj);
        }
    }
}

/// Joining FETCHes and a FETCH_OK that ends with a whole group exist in draft-16 and
/// draft-18 only: they cross between those two and draft-22 refuses them.
#[test]
fn joining_fetch_and_whole_group_end_cross_draft16_and_draft18() {
    let messages = [
        (
            Message::Fetch(Fetch {
                request_id: RequestId(6),
                kind: FetchKind::RelativeJoining { joining_request_id: RequestId(2), joining_start: 3 },
                params: Parameters { subscriber_priority: Some(1), ..Parameters::default() },
            }),
            DecodeContext::control(Role::Client),
        ),
        (
            Message::Fetch(Fetch {
                request_id: RequestId(6),
                kind: FetchKind::AbsoluteJoining { joining_request_id: RequestId(2), joining_start: 30 },
                params: Parameters { group_order: Some(GroupOrder::Descending), ..Parameters::default() },
            }),
            DecodeContext::control(Role::Client),
        ),
        (
            Message::FetchOk(FetchOk {
                request_id: RequestId(6),
                end_of_track: false,
                end_location: FetchEnd::Group(12),
                params: Parameters::default(),
                track_properties: Properties::new(),
            }),
            DecodeContext::request(Role::Server, RequestId(6)),
        ),
    ];
    for (msg, ctx) in &messages {
        crosses(msg, D16, D18, ctx);
        crosses(msg, D18, D16, ctx);
        let mut out = Vec::new();
        assert!(D22.encode_message(msg, &mut out).is_err(), "draft-22 refuses {msg:?}");
        assert!(out.is_empty());
    }
}

/// Responses take their Request ID from the request stream in draft-18 and draft-22 and from
/// the wire in draft-16: all three land on the same model value.
#[test]
fn responses_cross_three_drafts() {
    let id = RequestId(6);
    let ctx = DecodeContext::request(Role::Server, id);
    let props: Properties = [
        (property_type::DEFAULT_PUBLISHER_PRIORITY, KvValue::Int(10)),
        (property_type::IMMUTABLE_PROPERTIES, KvValue::Bytes(Bytes::from_static(&[0x04, 0x01]))),
    ]
    .into_iter()
    .collect();
    let messages = [
        Message::SubscribeOk(SubscribeOk {
            request_id: id,
            track_alias: TrackAlias(77),
            params: Parameters {
                expires: Some(30_000),
                largest_object: Some(Location::new(12, 3)),
                ..Parameters::default()
            },
            track_properties: props,
        }),
        Message::PublishDone(PublishDone {
            request_id: id,
            status_code: 0x2,
            stream_count: 14,
            reason: Bytes::from_static(b"track ended"),
        }),
        Message::RequestError(RequestError {
            request_id: id,
            error_code: 0x10,
            retry_interval: 0,
            reason: Bytes::from_static(b"no such track"),
            redirect: None,
        }),
        Message::FetchOk(FetchOk {
            request_id: id,
            end_of_track: true,
            end_location: FetchEnd::Object(Location::new(4, 20)),
            params: Parameters::default(),
            track_properties: Properties::new(),
        }),
        Message::RequestOk(RequestOk {
            request_id: id,
            params: Parameters { largest_object: Some(Location::new(1, 1)), ..Parameters::default() },
            track_properties: Properties::new(),
        }),
    ];
    for msg in &messages {
        for (from, to) in pairs(&[D16, D18, D22]) {
            crosses(msg, from, to, &ctx);
        }
    }
    // What draft-18 and draft-22 share beyond draft-16: a Redirect, SUBSCRIBE_TRACKS,
    // PUBLISH_SKIPPED (draft-18's PUBLISH_BLOCKED) and REQUEST_OK's Track Properties.
    let redirect = Message::RequestError(RequestError {
        request_id: id,
        error_code: wire::control::REDIRECT,
        retry_interval: 5,
        reason: Bytes::from_static(b"moved"),
        redirect: Some(Redirect {
            connect_uri: Bytes::from_static(b"moqt://b"),
            track: FullTrackName::default(),
        }),
    });
    let skipped = Message::PublishSkipped(PublishSkipped {
        request_id: id,
        namespace_suffix: TrackNamespace::from_strs(&["x"]),
        track_name: Bytes::from_static(b"t"),
    });
    let status = Message::RequestOk(RequestOk {
        request_id: id,
        params: Parameters::default(),
        track_properties: [(0x0E, KvValue::Int(3))].into_iter().collect(),
    });
    let tracks = Message::SubscribeTracks(SubscribeTracks {
        request_id: RequestId(2),
        prefix: TrackNamespace::from_strs(&["a"]),
        params: Parameters { forward: Some(false), ..Parameters::default() },
    });
    for msg in [redirect, skipped, status, tracks] {
        crosses(&msg, D18, D22, &ctx);
        crosses(&msg, D22, D18, &ctx);
    }
}

/// PUBLISH_OK: draft-16's 0x1E carries the subscription's parameters, draft-18 writes the same
/// parameters in a REQUEST_OK (which draft-18 reads back as REQUEST_OK).
#[test]
fn publish_ok_parameters_reach_draft18() {
    let params = Parameters {
        forward: Some(true),
        subscriber_priority: Some(9),
        group_order: Some(GroupOrder::Descending),
        location_filter: Some(LocationFilter::AbsoluteStart { start: Location::new(4, 0) }),
        ..Parameters::default()
    };
    let ok = Message::PublishOk(PublishOk { request_id: RequestId(3), params: params.clone() });
    let ctx = DecodeContext::request(Role::Client, RequestId(3));
    let mut a = Vec::new();
    d16::control::encode_message(&ok, &mut a).expect("draft-16 encodes");
    let (from16, _) = d16::control::decode_message(&a, &ctx).expect("draft-16 decodes");
    let mut b = Vec::new();
    Version::Draft18.encode_message(&from16, &mut b).expect("draft-18 encodes");
    let (via18, _) = Version::Draft18.decode_message(&b, &ctx).expect("draft-18 decodes");
    assert_eq!(
        via18,
        Message::RequestOk(RequestOk {
            request_id: RequestId(3),
            params,
            track_properties: Properties::new()
        })
    );
}

/// A control-stream GOAWAY's Request ID is draft-18's alone; the others refuse it rather than
/// drop it, and draft-18 has no PUBLISH_STATE_NOTIFY or draft-16 cancel messages.
#[test]
fn draft18_only_and_draft18_less_fields_are_refused() {
    let goaway = Message::GoAway(GoAway { request_id: Some(RequestId(4)), ..GoAway::default() });
    for d in [D16, D22] {
        let mut out = Vec::new();
        assert!(d.encode_message(&goaway, &mut out).is_err(), "{d:?}");
        assert!(out.is_empty());
    }
    crosses(&goaway, D18, D18, &DecodeContext::control(Role::Server));
    for msg in [
        Message::PublishStateNotify(PublishStateNotify::default()),
        Message::Unsubscribe(RequestId(1)),
        Message::MaxRequestId(RequestId(1)),
    ] {
        let mut out = Vec::new();
        assert!(D18.encode_message(&msg, &mut out).is_err(), "{}", msg.name());
        assert!(out.is_empty());
    }
}

// ---------------------------------------------------------------------------------------------
// draft-14 against draft-16: what both carry the same way crosses unchanged
// ---------------------------------------------------------------------------------------------

proptest! {
    /// Messages draft-14 and draft-16 write alike (draft-14's fixed FETCH fields as draft-16
    /// parameters, FETCH_OK's Group Order as a Track Property) cross both ways.
    #[test]
    fn draft14_crosses_draft16(
        request_id in 0..(1u64 << 62),
        track in full_track_name(),
        start in location(int_upto(1 << 40)),
        end in 0..1000u64,
        prio in any::<u8>(),
        order in prop_oneof![Just(GroupOrder::Ascending), Just(GroupOrder::Descending)],
        status_code in int62(),
        reason in bytes(30),
        end_of_track in any::<bool>(),
    ) {
        let d14 = Version::Draft14;
        let ctx = DecodeContext::control(Role::Server);
        let fetch = Message::Fetch(Fetch {
            request_id: RequestId(request_id),
            kind: FetchKind::Standalone { track },
            params: Parameters {
                subscriber_priority: Some(prio),
                group_order: Some(order),
                location_filter: Some(LocationFilter::AbsoluteStartGroupEnd { start, end_group: start.group + end }),
                ..Parameters::default()
            },
        });
        let mut props = Properties::new();
        props.push(property_type::DEFAULT_PUBLISHER_GROUP_ORDER, KvValue::Int(order.code()));
        let fetch_ok = Message::FetchOk(FetchOk {
            request_id: RequestId(request_id),
            end_of_track,
            end_location: FetchEnd::Object(start),
            params: Parameters::default(),
            track_properties: props,
        });
        let done = Message::PublishDone(PublishDone {
            request_id: RequestId(request_id),
            status_code,
            stream_count: 3,
            reason,
        });
        for msg in [fetch, fetch_ok, done, Message::Unsubscribe(RequestId(request_id))] {
            crosses(&msg, d14, D16, &ctx);
            crosses(&msg, D16, d14, &ctx);
        }
    }
}

/// A draft-16 SUBSCRIBE that leaves its subscription parameters out reaches a draft-14 peer
/// with draft-16's defaults written out (priority 128, forward, unfiltered).
#[test]
fn draft16_subscribe_defaults_in_draft14() {
    let track =
        FullTrackName { namespace: TrackNamespace::from_strs(&["a"]), name: Bytes::from_static(b"t") };
    let sub =
        Message::Subscribe(Subscribe { request_id: RequestId(2), track, params: Parameters::default() });
    let mut b = Vec::new();
    D16.encode_message(&sub, &mut b).expect("draft-16 encodes");
    let (first, _) = D16.decode_message(&b, &DecodeContext::control(Role::Client)).expect("decodes");
    let (_, second) = transcode(D16, Version::Draft14, &b, &DecodeContext::control(Role::Client));
    let Message::Subscribe(s) = second else { panic!() };
    assert_eq!(first, sub);
    assert_eq!(s.params.subscriber_priority, Some(128));
    assert_eq!(s.params.forward, Some(true));
    assert_eq!(s.params.location_filter, Some(LocationFilter::AbsoluteStart { start: Location::new(0, 0) }));
}
