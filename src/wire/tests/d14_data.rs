//! draft-14 data plane: the §10.5 examples byte by byte, the SUBGROUP_HEADER and
//! OBJECT_DATAGRAM type tables of §10.4.2 and §10.3.1, Object Status Does Not Exist, absolute
//! Extension Header types, the fixed-field fetch objects of §10.4.4, round trips, truncation
//! and arbitrary input.

mod support;

use bytes::Bytes;
use proptest::collection::vec;
use proptest::prelude::*;
use support::strategies::*;
use wire::model::*;
use wire::{DecodeError, EncodeError, ErrorCode, Version};

const D14: Version = Version::Draft14;

fn header(ty_bytes: &[u8]) -> SubgroupHeader {
    match D14.decode_uni_stream_header(ty_bytes) {
        Ok((UniStreamHeader::Subgroup(h), n)) => {
            assert_eq!(n, ty_bytes.len());
            h
        }
        other => panic!("{other:?}"),
    }
}

fn violation<T: std::fmt::Debug>(r: Result<T, DecodeError>) -> bool {
    matches!(r, Err(DecodeError::Invalid { code: ErrorCode::ProtocolViolation, .. }))
}

#[test]
fn section_10_5_first_example() {
    // SUBGROUP_HEADER 0x14: Track Alias 2, Group 0, Subgroup 0, Publisher Priority 0; objects
    // 0 "abcd" and 1 "efgh" (Object ID Delta 0 twice).
    let h = header(&[0x14, 0x02, 0x00, 0x00, 0x00]);
    assert_eq!(h.subgroup_id, SubgroupId::Explicit(0));
    assert_eq!(h.publisher_priority, Some(0));
    let mut r = D14.subgroup_reader(&h);
    let (o, n) = r.decode(&[0x00, 0x04, b'a', b'b', b'c', b'd']).expect("object 0");
    assert_eq!((o.object_id, o.payload_len, n), (0, 4, 2));
    let (o, _) = r.decode(&[0x00, 0x04]).expect("object 1");
    assert_eq!(o.object_id, 1);
    let mut out = Vec::new();
    D14.encode_subgroup_header(&h, &mut out).expect("encodes");
    assert_eq!(out, [0x14, 0x02, 0x00, 0x00, 0x00]);
}

#[test]
fn section_10_5_second_example_absolute_types() {
    // SUBGROUP_HEADER 0x15 (extensions); the first object has Extension Headers Length 33:
    // type 4 = 2186796243 (an 8-byte varint), then type 77 (absolute: 0x40 0x4D, not a delta
    // of 73) with Length 21. The example's value "traceID:123456" is 14 bytes; the lengths
    // only add up with a 21-byte value, as in draft-16's copy of the example.
    let h = header(&[0x15, 0x02, 0x00, 0x00, 0x00]);
    assert!(h.has_properties);
    let mut ext = vec![0x04, 0xC0, 0x00, 0x00, 0x00, 0x82, 0x57, 0xDC, 0xD3, 0x40, 0x4D, 21];
    ext.extend_from_slice(b"traceID:123456\0\0\0\0\0\0\0");
    assert_eq!(ext.len(), 33);
    let mut obj = vec![0x00, 33];
    obj.extend(&ext);
    obj.extend([0x04]);
    let mut r = D14.subgroup_reader(&h);
    let (first, n) = r.decode(&obj).expect("object 0");
    assert_eq!(n, obj.len());
    let o = first.clone();
    assert_eq!(o.properties.int(4), Some(2_186_796_243));
    assert_eq!(o.properties.bytes(77).map(|b| b.len()), Some(21));
    let (o, _) = r.decode(&[0x00, 0x00, 0x04]).expect("object 1, no extensions");
    assert_eq!((o.object_id, o.properties.len()), (1, 0));
    // Written back with absolute types, the same bytes.
    let mut w = D14.subgroup_writer(&h);
    let mut out = Vec::new();
    w.encode(&first, &mut out).expect("encodes");
    assert_eq!(out, obj);
}

#[test]
fn subgroup_header_types() {
    // §10.4.2: 0x10-0x15 and 0x18-0x1D; no DEFAULT_PRIORITY bit (0x30-0x3D are draft-16's).
    for t in 0u8..0x80 {
        let mut b = vec![t, 0x01, 0x02];
        if t & 0x06 == 0x04 {
            b.push(0x03);
        }
        b.push(0x07);
        let valid = (0x10..=0x15).contains(&t) || (0x18..=0x1D).contains(&t);
        let r = D14.decode_uni_stream_header(&b);
        if valid {
            let (UniStreamHeader::Subgroup(h), _) = r.expect("valid") else { panic!() };
            assert_eq!(h.publisher_priority, Some(7), "{t:#x}");
            let mut out = Vec::new();
            D14.encode_subgroup_header(&h, &mut out).expect("encodes");
            assert_eq!(out, b, "{t:#x}");
        } else if t != 0x05 {
            assert!(violation(r), "{t:#x}");
        }
    }
    let h = SubgroupHeader {
        track_alias: TrackAlias(1),
        group_id: 2,
        subgroup_id: SubgroupId::Zero,
        publisher_priority: None,
        has_properties: false,
        end_of_group: false,
        first_object: false,
    };
    assert!(matches!(D14.encode_subgroup_header(&h, &mut Vec::new()), Err(EncodeError::Unsupported(_))));
}

#[test]
fn datagram_types() {
    // §10.3.1: 0x00-0x07 (payload) and 0x20-0x21 (status, always with an Object ID).
    for t in 0u8..0x40 {
        let mut b = vec![t, 0x01, 0x02];
        if t & 0x04 == 0 {
            b.push(0x03);
        }
        b.push(0x09);
        if t & 0x01 != 0 {
            b.extend([0x02, 0x3C, 0x01]);
        }
        b.push(if t & 0x20 != 0 { 0x03 } else { b'p' });
        let valid = t <= 0x07 || t == 0x20 || t == 0x21;
        match D14.decode_datagram(&b) {
            Ok(Datagram::Object { header, payload_offset }) => {
                assert!(valid, "{t:#x}");
                assert_eq!(header.publisher_priority, Some(9));
                let mut out = Vec::new();
                D14.encode_datagram(&header, &b[payload_offset..], &mut out).expect("encodes");
                assert_eq!(out, b, "{t:#x}");
            }
            other => assert!(!valid && violation(other), "{t:#x}"),
        }
    }
    // A status datagram for Object 0 keeps its Object ID field (type 0x20, not 0x24).
    let h = DatagramHeader {
        object_id: 0,
        publisher_priority: Some(1),
        status: Some(ObjectStatus::DoesNotExist),
        ..DatagramHeader::default()
    };
    let mut out = Vec::new();
    D14.encode_datagram(&h, &[], &mut out).expect("encodes");
    assert_eq!(out, [0x20, 0x00, 0x00, 0x00, 0x01, 0x01]);
    let none = DatagramHeader { publisher_priority: None, ..h };
    assert!(matches!(D14.encode_datagram(&none, &[], &mut Vec::new()), Err(EncodeError::Unsupported(_))));
}

#[test]
fn object_status_does_not_exist() {
    let h = header(&[0x11, 0x01, 0x02, 0x00]);
    // Payload Length 0, Status 0x1: Does Not Exist, with no extensions.
    let (o, _) = D14.subgroup_reader(&h).decode(&[0x00, 0x00, 0x00, 0x01]).expect("decodes");
    assert_eq!(o.status, ObjectStatus::DoesNotExist);
    // With extensions it is a violation (§10.2.1.2); an End of Group object may have them.
    assert!(violation(D14.subgroup_reader(&h).decode(&[0x00, 0x02, 0x3C, 0x01, 0x00, 0x01])));
    let (o, _) = D14.subgroup_reader(&h).decode(&[0x00, 0x02, 0x3C, 0x01, 0x00, 0x03]).expect("decodes");
    assert_eq!((o.status, o.properties.int(0x3C)), (ObjectStatus::EndOfGroup, Some(1)));
    // Later drafts have no 0x1.
    let h16 = SubgroupHeader { publisher_priority: Some(0), ..h };
    assert!(violation(Version::Draft16.subgroup_reader(&h16).decode(&[0x00, 0x00, 0x00, 0x01])));
    let obj = SubgroupObject { status: ObjectStatus::DoesNotExist, ..SubgroupObject::default() };
    assert!(matches!(
        Version::Draft16.subgroup_writer(&h16).encode(&obj, &mut Vec::new()),
        Err(EncodeError::Unsupported(_))
    ));
}

#[test]
fn fetch_objects_have_fixed_fields() {
    // §10.4.4: Group 5, Subgroup 1, Object 3, Priority 7, Extension Headers Length 0,
    // Payload Length 2.
    let bytes = [0x05, 0x01, 0x03, 0x07, 0x00, 0x02];
    let mut r = D14.fetch_reader(GroupOrder::Ascending);
    let (item, n) = r.decode(&bytes).expect("decodes");
    assert_eq!(n, bytes.len());
    let obj = FetchObject {
        location: Location::new(5, 3),
        subgroup_id: Some(1),
        publisher_priority: 7,
        properties: Properties::new(),
        payload_len: 2,
    };
    assert_eq!(item, FetchItem::Object(obj.clone()));
    let mut out = Vec::new();
    D14.fetch_writer(GroupOrder::Ascending).encode(&item, &mut out).expect("encodes");
    assert_eq!(out, bytes);
    // A datagram object's Subgroup ID is its Object ID.
    let dg = FetchItem::Object(FetchObject { subgroup_id: None, ..obj });
    let mut out = Vec::new();
    D14.fetch_writer(GroupOrder::Ascending).encode(&dg, &mut out).expect("encodes");
    assert_eq!(out, [0x05, 0x03, 0x03, 0x07, 0x00, 0x02]);
    // Status objects: Does Not Exist, End of Group, End of Track say the Location does not
    // exist (an End of Range of non-existent objects); a zero-length Normal object is an object.
    for status in [0x01, 0x03, 0x04] {
        let (item, _) = r.decode(&[0x06, 0x00, 0x02, 0x00, 0x00, 0x00, status]).expect("decodes");
        assert_eq!(
            item,
            FetchItem::EndOfRange { kind: RangeEnd::NonExistent, location: Location::new(6, 2) }
        );
    }
    let (item, _) = r.decode(&[0x06, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00]).expect("decodes");
    assert!(matches!(item, FetchItem::Object(FetchObject { payload_len: 0, .. })));
    let gap = FetchItem::EndOfRange { kind: RangeEnd::NonExistent, location: Location::new(6, 2) };
    let mut out = Vec::new();
    D14.fetch_writer(GroupOrder::Ascending).encode(&gap, &mut out).expect("encodes");
    assert_eq!(out, [0x06, 0x00, 0x02, 0x00, 0x00, 0x00, 0x01]);
    let unknown = FetchItem::EndOfRange { kind: RangeEnd::Unknown, location: Location::new(6, 2) };
    assert!(matches!(
        D14.fetch_writer(GroupOrder::Ascending).encode(&unknown, &mut Vec::new()),
        Err(EncodeError::Unsupported(_))
    ));
    // FETCH_HEADER is draft-16's.
    let mut out = Vec::new();
    D14.encode_fetch_header(RequestId(9), &mut out).expect("encodes");
    assert_eq!(out, [0x05, 0x09]);
}

fn props() -> impl Strategy<Value = Properties> {
    properties(int62())
}

fn fetch_object() -> impl Strategy<Value = FetchObject> {
    (location(int62()), int62(), any::<u8>(), props(), 1..(1u64 << 62)).prop_map(
        |(location, s, publisher_priority, properties, payload_len)| FetchObject {
            location,
            subgroup_id: Some(s),
            publisher_priority,
            properties,
            payload_len,
        },
    )
}

proptest! {
    #[test]
    fn subgroup_objects_round_trip(ids in vec(0..1000u64, 1..6), ps in vec(props(), 6), status in prop_oneof![Just(ObjectStatus::EndOfGroup), Just(ObjectStatus::EndOfTrack), Just(ObjectStatus::DoesNotExist)]) {
        let h = header(&[0x11, 0x01, 0x02, 0x00]);
        let mut w = D14.subgroup_writer(&h);
        let mut r = D14.subgroup_reader(&h);
        let mut id = 0;
        for (i, d) in ids.iter().enumerate() {
            id += d + u64::from(i > 0);
            let last = i + 1 == ids.len();
            let obj = if last {
                let properties = if status == ObjectStatus::DoesNotExist { Properties::new() } else { ps[i].clone() };
                SubgroupObject { object_id: id, properties, payload_len: 0, status }
            } else {
                SubgroupObject { object_id: id, properties: ps[i].clone(), payload_len: 3, status: ObjectStatus::Normal }
            };
            let mut out = Vec::new();
            w.encode(&obj, &mut out).expect("encodes");
            for cut in 0..out.len() {
                prop_assert_eq!(r.decode(&out[..cut]), Err(DecodeError::NeedMore));
            }
            let (back, n) = r.decode(&out).expect("decodes");
            prop_assert_eq!(n, out.len());
            prop_assert_eq!(back, obj);
        }
    }

    #[test]
    fn fetch_objects_round_trip(obj in fetch_object()) {
        let item = FetchItem::Object(obj);
        let mut out = Vec::new();
        D14.fetch_writer(GroupOrder::Descending).encode(&item, &mut out).expect("encodes");
        let mut r = D14.fetch_reader(GroupOrder::Descending);
        for cut in 0..out.len() {
            prop_assert_eq!(r.decode(&out[..cut]), Err(DecodeError::NeedMore));
        }
        prop_assert_eq!(r.decode(&out), Ok((item, out.len())));
    }

    #[test]
    fn datagrams_round_trip(alias in int62(), group in int62(), object in int62(), prio in any::<u8>(), p in props(), eog in any::<bool>(), payload in vec(any::<u8>(), 0..20)) {
        let h = DatagramHeader { track_alias: TrackAlias(alias), group_id: group, object_id: object, publisher_priority: Some(prio), properties: p, end_of_group: eog, status: None };
        let mut out = Vec::new();
        D14.encode_datagram(&h, &payload, &mut out).expect("encodes");
        let Ok(Datagram::Object { header, payload_offset }) = D14.decode_datagram(&out) else { panic!() };
        prop_assert_eq!(header, h);
        prop_assert_eq!(&out[payload_offset..], &payload[..]);
    }

    #[test]
    fn arbitrary_input_never_panics(bytes in vec(any::<u8>(), 0..80)) {
        let _ = D14.decode_datagram(&bytes);
        if let Ok((UniStreamHeader::Subgroup(h), n)) = D14.decode_uni_stream_header(&bytes) {
            let _ = D14.subgroup_reader(&h).decode(&bytes[n..]);
        }
        let _ = D14.fetch_reader(GroupOrder::Ascending).decode(&bytes);
        let _ = D14.subgroup_reader(&header(&[0x11, 0x01, 0x02, 0x00])).decode(&bytes);
    }
}

#[test]
fn immutable_blob_is_kept_as_it_arrived() {
    // Extension Header 0x0B (Immutable Extensions, §11.2) is a byte value: kept byte for byte.
    let blob = Bytes::from_static(&[0x04, 0x01, 0x02, 0x05]);
    let h = header(&[0x11, 0x01, 0x02, 0x00]);
    let mut p = Properties::new();
    p.push(0x0B, KvValue::Bytes(blob.clone()));
    let obj = SubgroupObject { object_id: 0, properties: p, payload_len: 1, status: ObjectStatus::Normal };
    let mut out = Vec::new();
    D14.subgroup_writer(&h).encode(&obj, &mut out).expect("encodes");
    let (back, _) = D14.subgroup_reader(&h).decode(&out).expect("decodes");
    assert_eq!(back.properties.immutable(), Some(&blob));
}
