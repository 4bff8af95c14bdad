//! The version-neutral model across dialects: what one draft decodes, the other draft encodes
//! and decodes to the same value (for everything both drafts can express). This is what lets a
//! draft-16 subscriber receive a track published over draft-22, and the reverse.

mod support;

use bytes::Bytes;
use moq_edge::wire::model::*;
use moq_edge::wire::{d16, d22, Version};
use proptest::prelude::*;
use support::strategies::*;

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

/// Parameters of a SUBSCRIBE that both drafts can carry.
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
