//! Data-plane codec tests for draft-16, draft-18 and draft-22: unidirectional stream headers,
//! subgroup streams, object datagrams, fetch streams and padding.
//!
//! The same suite runs for every dialect (`dialect_tests!`); the expected sets of valid type
//! values are written out from the spec text, independently of the implementation.
#![allow(clippy::unwrap_used)]

mod support;

use bytes::Bytes;
use proptest::collection::vec;
use proptest::prelude::*;
use support::strategies;
use wire::model::*;
use wire::{DecodeError, EncodeError, ErrorCode, Quic, VarInt, Vi64};

// ---------------------------------------------------------------------------------------------
// Expected type sets, from the spec text
// ---------------------------------------------------------------------------------------------

/// draft-16 §10.4.2: `Type (i) = 0x10..0x15 / 0x18..0x1D / 0x30..0x35 / 0x38..0x3D`.
fn d16_subgroup_types() -> Vec<u64> {
    (0x10..=0x15).chain(0x18..=0x1D).chain(0x30..=0x35).chain(0x38..=0x3D).collect()
}

/// draft-22 §11.3.1: below 128, bit 4 set, SUBGROUP_ID_MODE (mask 0x06) not 0b11.
fn d22_subgroup_types() -> Vec<u64> {
    (0..128u64).filter(|t| t & 0x10 != 0 && (t & 0x06) >> 1 != 0b11).collect()
}

/// draft-16 §10.3.1: `Type (i) = 0x00..0x0F / 0x20..0x21 / 0x24..0x25 / 0x28..0x29 / 0x2C..0x2D`.
fn d16_datagram_types() -> Vec<u64> {
    (0x00..=0x0F).chain([0x20, 0x21, 0x24, 0x25, 0x28, 0x29, 0x2C, 0x2D]).collect()
}

/// draft-22 §11.2.1: only bits 0x01, 0x02, 0x04, 0x08, 0x20; not STATUS with END_OF_GROUP.
fn d22_datagram_types() -> Vec<u64> {
    (0..128u64).filter(|t| t & !0x2F == 0 && !(t & 0x20 != 0 && t & 0x02 != 0)).collect()
}

#[test]
fn datagram_type_sets_agree_between_drafts() {
    assert_eq!(d16_datagram_types(), d22_datagram_types());
    assert_eq!(d16_datagram_types().len(), 24);
    assert_eq!(d16_subgroup_types().len(), 24);
    assert_eq!(d22_subgroup_types().len(), 48);
    // Without FIRST_OBJECT (0x40) the draft-22 set is exactly draft-16's.
    let d22_low: Vec<u64> = d22_subgroup_types().into_iter().filter(|t| t & 0x40 == 0).collect();
    assert_eq!(d22_low, d16_subgroup_types());
}

// ---------------------------------------------------------------------------------------------
// Shared helpers
// ---------------------------------------------------------------------------------------------

fn is_violation<T: std::fmt::Debug>(r: &Result<T, DecodeError>) -> bool {
    matches!(r, Err(DecodeError::Invalid { code: ErrorCode::ProtocolViolation, .. }))
}

#[track_caller]
fn assert_violation<T: std::fmt::Debug>(r: Result<T, DecodeError>) {
    assert!(is_violation(&r), "expected PROTOCOL_VIOLATION, got {r:?}");
}

/// The header a SUBGROUP_HEADER type `t` describes, with the given field values.
fn header_for_type(t: u64, alias: u64, group: u64, sub: u64, prio: u8) -> SubgroupHeader {
    SubgroupHeader {
        track_alias: TrackAlias(alias),
        group_id: group,
        subgroup_id: match (t & 0x06) >> 1 {
            0 => SubgroupId::Zero,
            1 => SubgroupId::FirstObject,
            _ => SubgroupId::Explicit(sub),
        },
        publisher_priority: if t & 0x20 != 0 { None } else { Some(prio) },
        has_properties: t & 0x01 != 0,
        end_of_group: t & 0x08 != 0,
        first_object: t & 0x40 != 0,
    }
}

fn status() -> impl Strategy<Value = ObjectStatus> {
    prop_oneof![
        4 => Just(ObjectStatus::Normal),
        1 => Just(ObjectStatus::EndOfGroup),
        1 => Just(ObjectStatus::EndOfTrack),
    ]
}

/// A sequence of subgroup objects with increasing IDs (runs and gaps), IDs up to `max`;
/// properties only when `has_props`, statuses only on empty objects.
fn subgroup_objects(
    has_props: bool,
    int: BoxedStrategy<u64>,
    max: u64,
    payload_len: BoxedStrategy<u64>,
) -> impl Strategy<Value = Vec<SubgroupObject>> {
    let gap = prop_oneof![4 => Just(0u64), 2 => 1..5u64, 1 => int.clone()];
    let item = (gap, status(), strategies::properties(int.clone()), payload_len);
    (int, vec(item, 0..10)).prop_map(move |(first, items)| {
        let mut out = Vec::new();
        let mut prev: Option<u64> = None;
        for (gap, status, props, len) in items {
            let id = match prev {
                None => first,
                Some(p) => match p.checked_add(gap).and_then(|v| v.checked_add(1)) {
                    Some(v) if v <= max => v,
                    _ => break,
                },
            };
            let (properties, payload_len) = if status != ObjectStatus::Normal {
                (Properties::new(), 0)
            } else {
                (if has_props { props } else { Properties::new() }, len)
            };
            out.push(SubgroupObject { object_id: id, properties, payload_len, status });
            prev = Some(id);
        }
        out
    })
}

/// How one fetch item's Object ID relates to the prior one.
#[derive(Debug, Clone)]
enum ObjStep {
    Next,
    Same,
    Gap(u64),
    Abs(u64),
}

/// How one fetch object's Subgroup ID relates to the prior one.
#[derive(Debug, Clone)]
enum SubStep {
    Zero,
    Same,
    PlusOne,
    Val(u64),
    Datagram,
}

#[derive(Debug, Clone)]
struct FetchStep {
    /// `Some(kind)`: an End of Range.
    end: Option<RangeEnd>,
    group_move: u64,
    obj: ObjStep,
    sub: SubStep,
    prio: Option<u8>,
    props: Properties,
    payload_len: u64,
}

fn fetch_step(int: BoxedStrategy<u64>, timed_out: bool) -> impl Strategy<Value = FetchStep> {
    let ends: Vec<RangeEnd> = if timed_out {
        vec![RangeEnd::NonExistent, RangeEnd::Unknown, RangeEnd::TimedOut]
    } else {
        vec![RangeEnd::NonExistent, RangeEnd::Unknown]
    };
    let end = prop_oneof![4 => Just(None), 1 => proptest::sample::select(ends).prop_map(Some)];
    let group_move = prop_oneof![4 => Just(0u64), 3 => 1..4u64, 1 => int.clone()];
    let obj = prop_oneof![
        4 => Just(ObjStep::Next),
        1 => Just(ObjStep::Same),
        2 => (0..6u64).prop_map(ObjStep::Gap),
        1 => int.clone().prop_map(ObjStep::Gap),
        2 => int.clone().prop_map(ObjStep::Abs),
    ];
    let sub = prop_oneof![
        2 => Just(SubStep::Zero),
        3 => Just(SubStep::Same),
        2 => Just(SubStep::PlusOne),
        2 => int.clone().prop_map(SubStep::Val),
        1 => Just(SubStep::Datagram),
    ];
    let prio = prop_oneof![3 => Just(None), 1 => any::<u8>().prop_map(Some)];
    (end, group_move, obj, sub, prio, strategies::properties(int), 0..12u64).prop_map(
        |(end, group_move, obj, sub, prio, props, payload_len)| FetchStep {
            end,
            group_move,
            obj,
            sub,
            prio,
            props,
            payload_len,
        },
    )
}

/// Turns steps into a fetch stream that follows `order`: groups move only in its direction,
/// Object IDs never decrease within a group. IDs stay at or below `max`.
fn fetch_items(
    order: GroupOrder,
    max: u64,
    start: Location,
    first_prio: u8,
    steps: Vec<FetchStep>,
) -> Vec<FetchItem> {
    let mut items = Vec::new();
    let mut loc: Option<Location> = None;
    let mut last_sub: Option<Option<u64>> = None;
    let mut last_prio: Option<u8> = None;
    for st in steps {
        let next = match loc {
            None => Some(start),
            Some(p) => {
                let g = if st.group_move == 0 {
                    Some(p.group)
                } else {
                    match order {
                        GroupOrder::Ascending => p.group.checked_add(st.group_move).filter(|g| *g <= max),
                        GroupOrder::Descending => p.group.checked_sub(st.group_move),
                    }
                };
                g.and_then(|g| {
                    let o = match (&st.obj, g != p.group) {
                        (ObjStep::Next, _) => p.object.checked_add(1),
                        (ObjStep::Same, _) => Some(p.object),
                        (ObjStep::Gap(d), _) => p.object.checked_add(1).and_then(|v| v.checked_add(*d)),
                        (ObjStep::Abs(v), true) => Some(*v),
                        (ObjStep::Abs(v), false) => p.object.checked_add(*v),
                    };
                    o.filter(|o| *o <= max).map(|object| Location { group: g, object })
                })
            }
        };
        let Some(location) = next else { continue };
        loc = Some(location);
        if let Some(kind) = st.end {
            items.push(FetchItem::EndOfRange { kind, location });
            continue;
        }
        let subgroup_id = match st.sub {
            SubStep::Zero => Some(0),
            SubStep::Same => Some(last_sub.flatten().unwrap_or(7)),
            SubStep::PlusOne => {
                Some(last_sub.flatten().and_then(|s| s.checked_add(1)).filter(|s| *s <= max).unwrap_or(3))
            }
            SubStep::Val(v) => Some(v),
            SubStep::Datagram => None,
        };
        let publisher_priority = st.prio.or(last_prio).unwrap_or(first_prio);
        last_sub = Some(subgroup_id);
        last_prio = Some(publisher_priority);
        items.push(FetchItem::Object(FetchObject {
            location,
            subgroup_id,
            publisher_priority,
            properties: st.props,
            payload_len: st.payload_len,
        }));
    }
    items
}

fn orders() -> impl Strategy<Value = GroupOrder> {
    prop_oneof![Just(GroupOrder::Ascending), Just(GroupOrder::Descending)]
}

/// Encodes a Key-Value-Pair list with `V` by hand: (type, Int or Bytes value), types ascending.
fn kv_bytes<V: VarInt>(kvs: &[(u64, KvValue)]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut prev = 0;
    for (ty, v) in kvs {
        V::encode(ty - prev, &mut out).unwrap();
        match v {
            KvValue::Int(i) => V::encode(*i, &mut out).unwrap(),
            KvValue::Bytes(b) => {
                V::encode(b.len() as u64, &mut out).unwrap();
                out.extend_from_slice(b);
            }
        }
        prev = *ty;
    }
    out
}

fn enc<V: VarInt>(vals: &[u64]) -> Vec<u8> {
    let mut out = Vec::new();
    for v in vals {
        V::encode(*v, &mut out).unwrap();
    }
    out
}

// ---------------------------------------------------------------------------------------------
// The suite, once per dialect
// ---------------------------------------------------------------------------------------------

macro_rules! dialect_tests {
    (
        mod $m:ident;
        codec = $d:path;
        varint = $V:ty;
        int = $int:expr;
        subgroup_types = $sg:expr;
        datagram_types = $dg:expr;
        timed_out = $timed_out:expr;
        deltas = $deltas:expr;
    ) => {
        mod $m {
            use super::*;
            use $d as d;

            const MAX: u64 = <$V as VarInt>::MAX;

            fn int() -> BoxedStrategy<u64> {
                $int.boxed()
            }

            fn subgroup_header() -> impl Strategy<Value = SubgroupHeader> {
                (proptest::sample::select($sg), int(), int(), int(), any::<u8>())
                    .prop_map(|(t, a, g, s, p)| header_for_type(t, a, g, s, p))
            }

            /// An object datagram header valid for encoding (statuses without END_OF_GROUP,
            /// properties only on Normal objects), with its payload.
            fn datagram() -> impl Strategy<Value = (DatagramHeader, Vec<u8>)> {
                let st = prop_oneof![2 => Just(None), 1 => status().prop_map(Some)];
                let object = prop_oneof![1 => Just(0u64), 3 => int()];
                (
                    int(),
                    int(),
                    object,
                    proptest::option::of(any::<u8>()),
                    strategies::properties(int()),
                    any::<bool>(),
                    st,
                    vec(any::<u8>(), 0..40),
                )
                    .prop_map(|(alias, group, object, prio, props, eog, status, payload)| {
                        let normal = status.is_none_or(|s| s == ObjectStatus::Normal);
                        let h = DatagramHeader {
                            track_alias: TrackAlias(alias),
                            group_id: group,
                            object_id: object,
                            publisher_priority: prio,
                            properties: if normal { props } else { Properties::new() },
                            end_of_group: eog && status.is_none(),
                            status,
                        };
                        let payload = if status.is_some() { Vec::new() } else { payload };
                        (h, payload)
                    })
            }

            // ----- unidirectional stream headers -----------------------------------------

            /// Every subgroup header type, with every field both small and large.
            #[test]
            fn every_subgroup_header_type_round_trips() {
                for t in $sg {
                    for (a, g, s, p) in [(0, 0, 0, 0), (2, 5, 9, 200), (MAX, MAX, MAX, 255), (64, 16384, 1 << 30, 1)] {
                        let h = header_for_type(t, a, g, s, p);
                        let mut buf = Vec::new();
                        d::encode_subgroup_header(&h, &mut buf).unwrap();
                        assert_eq!(buf[0] as u64, t, "type byte of {h:?}");
                        assert_eq!(d::decode_uni_stream_header(&buf), Ok((UniStreamHeader::Subgroup(h), buf.len())));
                        for cut in 0..buf.len() {
                            assert_eq!(d::decode_uni_stream_header(&buf[..cut]), Err(DecodeError::NeedMore));
                        }
                    }
                }
            }

            /// Every type below 0x4000 (all one- and two-byte encodings), plus the draft-22
            /// special types: exactly the valid set is accepted, the rest is a violation.
            #[test]
            fn uni_stream_types_enumerated() {
                let subgroup: Vec<u64> = $sg;
                let specials = [0x2F00u64, 0x132B_3E28, 0x132B_3E29, 0x3FFF_FFFF, MAX];
                for t in (0..0x4000u64).chain(specials) {
                    let mut buf = enc::<$V>(&[t]);
                    let type_len = buf.len();
                    buf.extend_from_slice(&[0; 16]);
                    let got = d::decode_uni_stream_header(&buf);
                    if t == 0x05 {
                        assert_eq!(got, Ok((UniStreamHeader::Fetch { request_id: RequestId(0) }, type_len + 1)));
                    } else if subgroup.contains(&t) {
                        assert!(matches!(got, Ok((UniStreamHeader::Subgroup(_), _))), "{t:#x}: {got:?}");
                    } else if $deltas && t == 0x2F00 {
                        assert_eq!(got, Ok((UniStreamHeader::Control, 0)));
                    } else if $deltas && t == 0x132B_3E28 {
                        assert_eq!(got, Ok((UniStreamHeader::Padding, type_len)));
                    } else {
                        assert!(is_violation(&got), "type {t:#x} accepted: {got:?}");
                    }
                }
            }

            #[test]
            fn reserved_subgroup_id_mode_is_a_violation() {
                for t in [0x16u64, 0x17, 0x1E, 0x1F, 0x36, 0x37, 0x3E, 0x3F] {
                    let mut buf = enc::<$V>(&[t]);
                    buf.extend_from_slice(&[0; 8]);
                    assert_violation(d::decode_uni_stream_header(&buf));
                }
            }

            // ----- subgroup streams ------------------------------------------------------

            /// The writer refuses objects the stream cannot carry; a refused encode writes
            /// nothing and leaves the writer as it was.
            #[test]
            fn subgroup_object_errors_on_encode() {
                let mut h = header_for_type(0x10, 1, 1, 0, 0);
                let mut props = Properties::new();
                props.push(2, KvValue::Int(9));
                let with_props = SubgroupObject { object_id: 0, properties: props.clone(), payload_len: 1, ..Default::default() };
                let mut out = vec![0xEE];
                // Properties without the PROPERTIES bit.
                assert!(matches!(d::SubgroupWriter::new(&h).encode(&with_props, &mut out), Err(EncodeError::OutOfRange(_))));
                h.has_properties = true;
                let mut w = d::SubgroupWriter::new(&h);
                // Payload with a non-Normal status.
                let bad = SubgroupObject { object_id: 0, payload_len: 3, status: ObjectStatus::EndOfGroup, ..Default::default() };
                assert!(matches!(w.encode(&bad, &mut out), Err(EncodeError::OutOfRange(_))));
                // Properties with a non-Normal status.
                let bad = SubgroupObject { object_id: 0, properties: props, status: ObjectStatus::EndOfTrack, ..Default::default() };
                assert!(matches!(w.encode(&bad, &mut out), Err(EncodeError::OutOfRange(_))));
                assert_eq!(out, vec![0xEE], "failed encodes write nothing");
                // Object IDs must increase.
                w.encode(&SubgroupObject { object_id: 5, payload_len: 1, ..Default::default() }, &mut out).unwrap();
                for id in [5, 4, 0] {
                    let o = SubgroupObject { object_id: id, payload_len: 1, ..Default::default() };
                    assert!(matches!(w.encode(&o, &mut out), Err(EncodeError::OutOfRange(_))));
                }
                // The failed encodes did not move the writer: 6 is still a delta of 0.
                let len = out.len();
                w.encode(&SubgroupObject { object_id: 6, payload_len: 1, ..Default::default() }, &mut out).unwrap();
                assert_eq!(&out[len..], &[0x00, 0x00, 0x01]);
            }

            #[test]
            fn subgroup_object_decode_errors() {
                let plain = header_for_type(0x10, 1, 1, 0, 0);
                let with_props = header_for_type(0x11, 1, 1, 0, 0);
                // Unknown status values (payload length 0, then the status).
                for s in [1u64, 2, 5, 0x3F, 1000] {
                    assert_violation(d::SubgroupReader::new(&plain).decode(&enc::<$V>(&[0, 0, s])));
                }
                // Known statuses decode.
                for (s, st) in [(0u64, ObjectStatus::Normal), (3, ObjectStatus::EndOfGroup), (4, ObjectStatus::EndOfTrack)] {
                    let (o, n) = d::SubgroupReader::new(&plain).decode(&enc::<$V>(&[7, 0, s])).unwrap();
                    assert_eq!((o.object_id, o.payload_len, o.status, n), (7, 0, st, 3));
                }
                // Properties on an End of Group / End of Track object.
                let kv = kv_bytes::<$V>(&[(2, KvValue::Int(1))]);
                for s in [3u64, 4] {
                    let mut buf = enc::<$V>(&[0, kv.len() as u64]);
                    buf.extend_from_slice(&kv);
                    buf.extend(enc::<$V>(&[0, s]));
                    assert_violation(d::SubgroupReader::new(&with_props).decode(&buf));
                }
                // ... but a zero properties length on them is how they must be written.
                let (o, _) = d::SubgroupReader::new(&with_props).decode(&enc::<$V>(&[0, 0, 0, 3])).unwrap();
                assert_eq!(o.status, ObjectStatus::EndOfGroup);
                // A Key-Value-Pair cut short inside the properties length is a formatting error.
                let mut buf = enc::<$V>(&[0, 2, 1]); // length 2: type delta 1 (odd), length ...
                buf.extend(enc::<$V>(&[5, 0]));
                let got = d::SubgroupReader::new(&with_props).decode(&buf);
                assert!(
                    matches!(got, Err(DecodeError::Invalid { code: ErrorCode::KeyValueFormatting, .. })),
                    "{got:?}"
                );
            }

            /// Object ID Delta overflow: previous + delta + 1 above the largest ID.
            #[test]
            fn subgroup_object_id_overflow() {
                let h = header_for_type(0x10, 1, 1, 0, 0);
                let mut r = d::SubgroupReader::new(&h);
                r.decode(&enc::<$V>(&[MAX, 1])).unwrap();
                assert_violation(r.decode(&enc::<$V>(&[0, 1])));
                let mut r = d::SubgroupReader::new(&h);
                r.decode(&enc::<$V>(&[MAX - 1, 1])).unwrap();
                assert_eq!(r.decode(&enc::<$V>(&[0, 1])).unwrap().0.object_id, MAX);
                let mut r = d::SubgroupReader::new(&h);
                r.decode(&enc::<$V>(&[1, 1])).unwrap();
                assert_violation(r.decode(&enc::<$V>(&[MAX, 1])));
            }

            // ----- datagrams -------------------------------------------------------------

            /// Every datagram type below 0x4000 and the special values: exactly the valid set
            /// decodes (each with a body that fits its bits), the rest is a violation.
            #[test]
            fn datagram_types_enumerated() {
                let valid: Vec<u64> = $dg;
                let kv = kv_bytes::<$V>(&[(2, KvValue::Int(5))]);
                for t in (0..0x4000u64).chain([0x132B_3E28, 0x132B_3E29, MAX]) {
                    let mut buf = enc::<$V>(&[t, 1, 2]);
                    if t & 0x04 == 0 {
                        buf.extend(enc::<$V>(&[3]));
                    }
                    if t & 0x08 == 0 {
                        buf.push(7);
                    }
                    if t & 0x01 != 0 {
                        buf.extend(enc::<$V>(&[kv.len() as u64]));
                        buf.extend_from_slice(&kv);
                    }
                    let payload_at = buf.len();
                    if t & 0x20 != 0 {
                        buf.extend(enc::<$V>(&[0]));
                    } else {
                        buf.extend_from_slice(b"xy");
                    }
                    let got = d::decode_datagram(&buf);
                    if valid.contains(&t) {
                        let Ok(Datagram::Object { header, payload_offset }) = got else {
                            panic!("type {t:#x} rejected: {got:?}")
                        };
                        assert_eq!(header.track_alias, TrackAlias(1));
                        assert_eq!(header.group_id, 2);
                        assert_eq!(header.object_id, if t & 0x04 != 0 { 0 } else { 3 });
                        assert_eq!(header.publisher_priority, if t & 0x08 != 0 { None } else { Some(7) });
                        assert_eq!(header.properties.len(), (t & 1) as usize);
                        assert_eq!(header.end_of_group, t & 0x02 != 0);
                        if t & 0x20 != 0 {
                            assert_eq!(header.status, Some(ObjectStatus::Normal));
                            assert_eq!(payload_offset, buf.len());
                        } else {
                            assert_eq!(header.status, None);
                            assert_eq!(payload_offset, payload_at);
                        }
                    } else if $deltas && t == 0x132B_3E29 {
                        assert_eq!(got, Ok(Datagram::Padding));
                    } else {
                        assert!(is_violation(&got), "type {t:#x} accepted: {got:?}");
                    }
                }
            }

            #[test]
            fn datagram_decode_errors() {
                let kv = kv_bytes::<$V>(&[(2, KvValue::Int(5))]);
                // PROPERTIES bit with a zero properties length.
                assert_violation(d::decode_datagram(&enc::<$V>(&[0x01 | 0x04 | 0x08, 1, 2, 0])));
                // STATUS with PROPERTIES and a non-Normal status.
                for s in [3u64, 4] {
                    let mut buf = enc::<$V>(&[0x21 | 0x04 | 0x08, 1, 2, kv.len() as u64]);
                    buf.extend_from_slice(&kv);
                    buf.extend(enc::<$V>(&[s]));
                    assert_violation(d::decode_datagram(&buf));
                }
                // Unknown status.
                assert_violation(d::decode_datagram(&enc::<$V>(&[0x20 | 0x04 | 0x08, 1, 2, 1])));
                // Bytes after the status of a status datagram.
                assert_violation(d::decode_datagram(&enc::<$V>(&[0x20 | 0x04 | 0x08, 1, 2, 3, 0])));
                // STATUS with END_OF_GROUP.
                for t in [0x22u64, 0x23, 0x26, 0x27, 0x2A, 0x2B, 0x2E, 0x2F] {
                    assert_violation(d::decode_datagram(&enc::<$V>(&[t, 1, 2, 3, 4, 0])));
                }
                // Reserved bit 0x10 and bits above 0x20.
                for t in [0x10u64, 0x1F, 0x40, 0x80, 0x100] {
                    assert_violation(d::decode_datagram(&enc::<$V>(&[t, 1, 2, 3, 4])));
                }
                // Truncated headers are NeedMore (the session turns that into a violation).
                assert_eq!(d::decode_datagram(&enc::<$V>(&[0x00, 1])), Err(DecodeError::NeedMore));
                assert_eq!(d::decode_datagram(&[]), Err(DecodeError::NeedMore));
            }

            #[test]
            fn datagram_encode_errors() {
                let mut out = Vec::new();
                let h = DatagramHeader { status: Some(ObjectStatus::Normal), end_of_group: true, ..Default::default() };
                assert!(matches!(d::encode_datagram(&h, b"", &mut out), Err(EncodeError::OutOfRange(_))));
                let h = DatagramHeader { status: Some(ObjectStatus::EndOfGroup), ..Default::default() };
                assert!(matches!(d::encode_datagram(&h, b"x", &mut out), Err(EncodeError::OutOfRange(_))));
                let mut props = Properties::new();
                props.push(2, KvValue::Int(1));
                let h = DatagramHeader { status: Some(ObjectStatus::EndOfTrack), properties: props, ..Default::default() };
                assert!(matches!(d::encode_datagram(&h, b"", &mut out), Err(EncodeError::OutOfRange(_))));
                assert!(out.is_empty());
            }

            // ----- fetch streams ---------------------------------------------------------

            /// A reader that has seen one object: group 10, subgroup 4, object 5, priority 9.
            fn reader_after_one(order: GroupOrder) -> d::FetchReader {
                let mut w = d::FetchWriter::new(order);
                let mut r = d::FetchReader::new(order);
                let first = FetchItem::Object(FetchObject {
                    location: Location::new(10, 5),
                    subgroup_id: Some(4),
                    publisher_priority: 9,
                    ..Default::default()
                });
                let mut buf = Vec::new();
                w.encode(&first, &mut buf).unwrap();
                assert_eq!(r.decode(&buf), Ok((first, buf.len())));
                r
            }

            /// Every Serialization Flags value below 0x800: all values below 128 are flags, and
            /// of the rest only the End of Range values are accepted.
            #[test]
            fn fetch_serialization_flags_enumerated() {
                for f in 0..0x800u64 {
                    let mut r = reader_after_one(GroupOrder::Ascending);
                    // The fields the flags announce, with small values, then a payload length
                    // of 0 (for an End of Range: Group ID 0, Object ID 0).
                    let mut buf = enc::<$V>(&[f]);
                    if f >= 128 {
                        buf.extend(enc::<$V>(&[0, 0]));
                    } else {
                        let fields = (f & 0x08 != 0) as usize
                            + (f & 0x43 == 0x03) as usize
                            + (f & 0x04 != 0) as usize;
                        buf.extend(std::iter::repeat_n(0, fields));
                        if f & 0x10 != 0 {
                            buf.push(1);
                        }
                        if f & 0x20 != 0 {
                            buf.push(0);
                        }
                        buf.push(0);
                    }
                    let got = r.decode(&buf);
                    let end = f == 0x8C || f == 0x10C || ($timed_out && f == 0x20C);
                    if f < 128 || end {
                        assert_eq!(got.as_ref().map(|(_, n)| *n), Ok(buf.len()), "flags {f:#x}: {got:?}");
                        assert_eq!(matches!(got, Ok((FetchItem::EndOfRange { .. }, _))), end);
                    } else {
                        assert!(is_violation(&got), "flags {f:#x} accepted: {got:?}");
                    }
                }
            }

            /// End of Range: flags, Group ID, Object ID, no payload length.
            #[test]
            fn fetch_end_of_range_layout() {
                let mut kinds = vec![(0x8Cu64, RangeEnd::NonExistent), (0x10C, RangeEnd::Unknown)];
                if $timed_out {
                    kinds.push((0x20C, RangeEnd::TimedOut));
                }
                for (code, kind) in kinds {
                    let item = FetchItem::EndOfRange { kind, location: Location::new(7, 3) };
                    let mut buf = Vec::new();
                    d::FetchWriter::new(GroupOrder::Ascending).encode(&item, &mut buf).unwrap();
                    assert_eq!(buf, enc::<$V>(&[code, 7, 3]));
                    // As the first item, and after an object (absolute in both cases).
                    assert_eq!(d::FetchReader::new(GroupOrder::Ascending).decode(&buf), Ok((item.clone(), buf.len())));
                    assert_eq!(reader_after_one(GroupOrder::Descending).decode(&buf), Ok((item, buf.len())));
                }
            }

            #[test]
            fn fetch_first_object_referencing_prior_is_a_violation() {
                // Group ID (0x08), Object ID (0x04), subgroup present (0x03), priority (0x10).
                let full = 0x08 | 0x04 | 0x03 | 0x10;
                let body = |f: u64| {
                    let mut b = enc::<$V>(&[f]);
                    if f & 0x08 != 0 {
                        b.extend(enc::<$V>(&[1]));
                    }
                    if f & 0x03 == 0x03 {
                        b.extend(enc::<$V>(&[2]));
                    }
                    if f & 0x04 != 0 {
                        b.extend(enc::<$V>(&[3]));
                    }
                    if f & 0x10 != 0 {
                        b.push(4);
                    }
                    b.extend(enc::<$V>(&[0]));
                    b
                };
                let mut r = d::FetchReader::new(GroupOrder::Ascending);
                assert!(r.decode(&body(full)).is_ok());
                for f in [full & !0x08, full & !0x04, full & !0x10, (full & !0x03) | 0x01, (full & !0x03) | 0x02] {
                    assert_violation(d::FetchReader::new(GroupOrder::Ascending).decode(&body(f)));
                }
                // The DATAGRAM bit makes the subgroup bits irrelevant, even on the first object.
                assert!(d::FetchReader::new(GroupOrder::Ascending).decode(&body((full & !0x03) | 0x41)).is_ok());
                // After an End of Range only, the location is known but subgroup/priority are not.
                for f in [full & !0x08, full & !0x04] {
                    let mut r = d::FetchReader::new(GroupOrder::Ascending);
                    r.decode(&enc::<$V>(&[0x10C, 1, 1])).unwrap();
                    assert!(r.decode(&body(f)).is_ok(), "{f:#x}");
                }
                for f in [full & !0x10, (full & !0x03) | 0x01, (full & !0x03) | 0x02] {
                    let mut r = d::FetchReader::new(GroupOrder::Ascending);
                    r.decode(&enc::<$V>(&[0x10C, 1, 1])).unwrap();
                    assert_violation(r.decode(&body(f)));
                }
            }

            /// After a datagram object there is no prior Subgroup ID to refer to.
            #[test]
            fn fetch_prior_subgroup_of_datagram_is_a_violation() {
                let mut r = d::FetchReader::new(GroupOrder::Ascending);
                r.decode(&[&enc::<$V>(&[0x40 | 0x08 | 0x04 | 0x10, 1, 1])[..], &[5], &enc::<$V>(&[0])[..]].concat()).unwrap();
                assert_violation(r.clone().decode(&enc::<$V>(&[0x01, 0])));
                assert_violation(r.clone().decode(&enc::<$V>(&[0x02, 0])));
                assert!(r.decode(&enc::<$V>(&[0x00, 0])).is_ok());
            }

            #[test]
            fn fetch_timed_out_range_per_draft() {
                let got = d::FetchReader::new(GroupOrder::Ascending).decode(&enc::<$V>(&[0x20C, 1, 2]));
                let item = FetchItem::EndOfRange { kind: RangeEnd::TimedOut, location: Location::new(1, 2) };
                let mut out = Vec::new();
                let put = d::FetchWriter::new(GroupOrder::Ascending).encode(&item, &mut out);
                if $timed_out {
                    assert_eq!(got, Ok((item, enc::<$V>(&[0x20C, 1, 2]).len())));
                    assert_eq!(put, Ok(()));
                } else {
                    assert_violation(got);
                    assert!(matches!(put, Err(EncodeError::Unsupported(_))));
                    assert!(out.is_empty());
                }
            }

            /// Prior + 1 overflows for an omitted Object ID; the Subgroup ID likewise.
            #[test]
            fn fetch_id_overflow() {
                let mut r = d::FetchReader::new(GroupOrder::Ascending);
                r.decode(&[&enc::<$V>(&[0x08 | 0x04 | 0x03 | 0x10, 1, MAX, MAX])[..], &[0], &enc::<$V>(&[0])[..]].concat())
                    .unwrap();
                assert_violation(r.clone().decode(&enc::<$V>(&[0x01, 0]))); // object prior + 1
                assert_violation(r.clone().decode(&enc::<$V>(&[0x02 | 0x04 | 0x08, 0, 0, 0]))); // subgroup + 1
            }

            // ----- property tests --------------------------------------------------------

            proptest! {
                #![proptest_config(ProptestConfig::with_cases(64))]

                #[test]
                fn subgroup_header_round_trip(h in subgroup_header()) {
                    let mut buf = Vec::new();
                    d::encode_subgroup_header(&h, &mut buf).unwrap();
                    prop_assert_eq!(d::decode_uni_stream_header(&buf), Ok((UniStreamHeader::Subgroup(h), buf.len())));
                    for cut in 0..buf.len() {
                        prop_assert_eq!(d::decode_uni_stream_header(&buf[..cut]), Err(DecodeError::NeedMore));
                    }
                }

                #[test]
                fn fetch_header_round_trip(id in int()) {
                    let mut buf = Vec::new();
                    d::encode_fetch_header(RequestId(id), &mut buf).unwrap();
                    prop_assert_eq!(
                        d::decode_uni_stream_header(&buf),
                        Ok((UniStreamHeader::Fetch { request_id: RequestId(id) }, buf.len()))
                    );
                    for cut in 0..buf.len() {
                        prop_assert_eq!(d::decode_uni_stream_header(&buf[..cut]), Err(DecodeError::NeedMore));
                    }
                }

                /// A whole subgroup stream: header, then objects with their payload bytes in
                /// between; every strict prefix of each object header is NeedMore on the live
                /// reader, and the full header then decodes to the object.
                #[test]
                fn subgroup_stream_round_trip(
                    (h, objs) in subgroup_header().prop_flat_map(|h| {
                        (Just(h), subgroup_objects(h.has_properties, int(), MAX, (0..24u64).boxed()))
                    })
                ) {
                    let mut buf = Vec::new();
                    d::encode_subgroup_header(&h, &mut buf).unwrap();
                    let mut w = d::SubgroupWriter::new(&h);
                    let mut spans = Vec::new();
                    for (i, o) in objs.iter().enumerate() {
                        let start = buf.len();
                        w.encode(o, &mut buf).unwrap();
                        spans.push((start, buf.len()));
                        buf.extend(std::iter::repeat_n(i as u8, o.payload_len as usize));
                    }
                    let (got, mut pos) = d::decode_uni_stream_header(&buf).unwrap();
                    prop_assert_eq!(got, UniStreamHeader::Subgroup(h));
                    let mut r = d::SubgroupReader::new(&h);
                    for (i, (o, (start, end))) in objs.iter().zip(spans).enumerate() {
                        prop_assert_eq!(pos, start);
                        for cut in start..end {
                            prop_assert_eq!(r.decode(&buf[start..cut]), Err(DecodeError::NeedMore));
                        }
                        let (got, n) = r.decode(&buf[pos..]).unwrap();
                        prop_assert_eq!(&got, o);
                        prop_assert_eq!(pos + n, end);
                        pos = end + o.payload_len as usize;
                        prop_assert!(buf[end..pos].iter().all(|b| *b == i as u8));
                    }
                    prop_assert_eq!(pos, buf.len());
                }

                /// Object headers alone (any payload length, up to the integer maximum).
                #[test]
                fn subgroup_objects_large_lengths(
                    (h, objs) in subgroup_header().prop_flat_map(|h| {
                        (Just(h), subgroup_objects(h.has_properties, int(), MAX, int()))
                    })
                ) {
                    let mut buf = Vec::new();
                    let mut w = d::SubgroupWriter::new(&h);
                    for o in &objs {
                        w.encode(o, &mut buf).unwrap();
                    }
                    let mut r = d::SubgroupReader::new(&h);
                    let mut pos = 0;
                    for o in &objs {
                        let (got, n) = r.decode(&buf[pos..]).unwrap();
                        prop_assert_eq!(&got, o);
                        pos += n;
                    }
                    prop_assert_eq!(pos, buf.len());
                }

                #[test]
                fn datagram_round_trip((h, payload) in datagram()) {
                    let mut buf = Vec::new();
                    d::encode_datagram(&h, &payload, &mut buf).unwrap();
                    let t = buf[0] as u64;
                    prop_assert!(($dg).contains(&t), "type {:#x}", t);
                    prop_assert_eq!(t & 0x04 != 0, h.object_id == 0);
                    prop_assert_eq!(t & 0x01 != 0, !h.properties.is_empty());
                    let Datagram::Object { header, payload_offset } = d::decode_datagram(&buf).unwrap() else {
                        panic!("not an object datagram")
                    };
                    prop_assert_eq!(&header, &h);
                    prop_assert_eq!(&buf[payload_offset..], &payload[..]);
                    // Any cut inside the header is NeedMore (a status datagram ends with its status).
                    for cut in 0..payload_offset {
                        prop_assert_eq!(d::decode_datagram(&buf[..cut]), Err(DecodeError::NeedMore));
                    }
                }

                /// Random fetch streams following the Group Order, with End of Range markers,
                /// datagram objects and subgroup changes, through FetchWriter -> FetchReader with
                /// the payload bytes in between; every strict prefix of an item is NeedMore.
                #[test]
                fn fetch_stream_round_trip(
                    order in orders(),
                    id in int(),
                    start in strategies::location(int()),
                    first_prio in any::<u8>(),
                    steps in vec(fetch_step(int(), $timed_out), 0..16),
                ) {
                    let items = fetch_items(order, MAX, start, first_prio, steps);
                    fetch_round_trip(order, id, &items)?;
                }
            }

            fn fetch_round_trip(order: GroupOrder, id: u64, items: &[FetchItem]) -> Result<(), TestCaseError> {
                let mut buf = Vec::new();
                d::encode_fetch_header(RequestId(id), &mut buf).unwrap();
                let mut w = d::FetchWriter::new(order);
                let mut spans = Vec::new();
                for (i, it) in items.iter().enumerate() {
                    let start = buf.len();
                    w.encode(it, &mut buf).map_err(|e| TestCaseError::fail(format!("encode {it:?}: {e}")))?;
                    spans.push((start, buf.len()));
                    if let FetchItem::Object(o) = it {
                        buf.extend(std::iter::repeat_n(i as u8, o.payload_len as usize));
                    }
                }
                let (got, mut pos) = d::decode_uni_stream_header(&buf).unwrap();
                prop_assert_eq!(got, UniStreamHeader::Fetch { request_id: RequestId(id) });
                let mut r = d::FetchReader::new(order);
                for (it, (start, end)) in items.iter().zip(spans) {
                    prop_assert_eq!(pos, start);
                    for cut in start..end {
                        prop_assert_eq!(r.decode(&buf[start..cut]), Err(DecodeError::NeedMore));
                    }
                    let (got, n) = r.decode(&buf[pos..]).unwrap();
                    prop_assert_eq!(&got, it);
                    prop_assert_eq!(pos + n, end);
                    pos = end;
                    if let FetchItem::Object(o) = it {
                        pos += o.payload_len as usize;
                    }
                }
                prop_assert_eq!(pos, buf.len());
                Ok(())
            }

            proptest! {
                #![proptest_config(ProptestConfig::with_cases(256))]

                #[test]
                fn arbitrary_bytes_never_panic(
                    bytes in vec(any::<u8>(), 0..64),
                    order in orders(),
                    t in proptest::sample::select($sg),
                ) {
                    let _ = d::decode_uni_stream_header(&bytes);
                    let _ = d::decode_datagram(&bytes);
                    let h = header_for_type(t, 0, 0, 0, 0);
                    let mut r = d::SubgroupReader::new(&h);
                    let mut pos = 0;
                    while let Ok((o, n)) = r.decode(&bytes[pos..]) {
                        prop_assert!(n > 0);
                        pos += n + (o.payload_len.min((bytes.len() - pos - n) as u64)) as usize;
                    }
                    let mut r = d::FetchReader::new(order);
                    let mut pos = 0;
                    while let Ok((it, n)) = r.decode(&bytes[pos..]) {
                        prop_assert!(n > 0);
                        pos += n;
                        if let FetchItem::Object(o) = it {
                            pos += o.payload_len.min((bytes.len() - pos) as u64) as usize;
                        }
                    }
                }

                /// Streams built from small, mostly valid fields, to get past the first byte.
                #[test]
                fn structured_bytes_never_panic(
                    vals in vec(prop_oneof![0..0x40u64, Just(0x8C), Just(0x10C), Just(0x20C), int()], 0..24),
                    order in orders(),
                ) {
                    let buf = enc::<$V>(&vals);
                    let _ = d::decode_uni_stream_header(&buf);
                    let _ = d::decode_datagram(&buf);
                    for t in [0x10u64, 0x11] {
                        let mut r = d::SubgroupReader::new(&header_for_type(t, 0, 0, 0, 0));
                        let mut pos = 0;
                        while let Ok((_, n)) = r.decode(&buf[pos..]) {
                            pos += n;
                        }
                    }
                    let mut r = d::FetchReader::new(order);
                    let mut pos = 0;
                    while let Ok((_, n)) = r.decode(&buf[pos..]) {
                        pos += n;
                    }
                }
            }
        }
    };
}

dialect_tests! {
    mod draft16;
    codec = wire::d16::data;
    varint = Quic;
    int = strategies::int62();
    subgroup_types = d16_subgroup_types();
    datagram_types = d16_datagram_types();
    timed_out = false;
    deltas = false;
}

// draft-18 (§3.4, §11) has draft-22's stream and datagram types, FIRST_OBJECT bit and fetch
// deltas, but no End of Timed-Out Range (§11.4.4 defines 0x8C and 0x10C only).
dialect_tests! {
    mod draft18;
    codec = wire::d18::data;
    varint = Vi64;
    int = strategies::int64();
    subgroup_types = d22_subgroup_types();
    datagram_types = d22_datagram_types();
    timed_out = false;
    deltas = true;
}

dialect_tests! {
    mod draft22;
    codec = wire::d22::data;
    varint = Vi64;
    int = strategies::int64();
    subgroup_types = d22_subgroup_types();
    datagram_types = d22_datagram_types();
    timed_out = true;
    deltas = true;
}

// ---------------------------------------------------------------------------------------------
// draft-16 only
// ---------------------------------------------------------------------------------------------

mod draft16_only {
    use super::*;
    use wire::d16::data as d;

    #[test]
    fn first_object_bit_is_unsupported() {
        let h = SubgroupHeader { first_object: true, ..header_for_type(0x10, 1, 1, 0, 0) };
        let mut out = Vec::new();
        assert!(matches!(d::encode_subgroup_header(&h, &mut out), Err(EncodeError::Unsupported(_))));
        assert!(out.is_empty());
        // 0x50 (FIRST_OBJECT | 0x10) is not a draft-16 stream type.
        assert_violation(d::decode_uni_stream_header(&[0x50, 0, 0]));
    }

    /// §10.5 "Examples", first stream: SUBGROUP_HEADER type 0x14 (Subgroup ID present, priority
    /// present), two 4-byte objects.
    #[test]
    fn spec_example_type_0x14() {
        #[rustfmt::skip]
        let wire: Vec<u8> = vec![
            0x14, // Type
            0x02, // Track Alias = 2
            0x00, // Group ID = 0
            0x00, // Subgroup ID = 0
            0x00, // Priority = 0
            0x00, // Object ID Delta = 0 (Object ID 0)
            0x04, // Object Payload Length = 4
            b'a', b'b', b'c', b'd',
            0x00, // Object ID Delta = 0 (Object ID 1)
            0x04, // Object Payload Length = 4
            b'e', b'f', b'g', b'h',
        ];
        let header = SubgroupHeader {
            track_alias: TrackAlias(2),
            group_id: 0,
            subgroup_id: SubgroupId::Explicit(0),
            publisher_priority: Some(0),
            has_properties: false,
            end_of_group: false,
            first_object: false,
        };
        let objects = [
            (SubgroupObject { object_id: 0, payload_len: 4, ..Default::default() }, &b"abcd"[..]),
            (SubgroupObject { object_id: 1, payload_len: 4, ..Default::default() }, &b"efgh"[..]),
        ];
        check_example(&wire, header, &objects);
    }

    /// §10.5 "Examples", second stream: type 0x35 (extensions, Subgroup ID present, default
    /// priority); the first object has two extension headers, the second an empty list.
    ///
    /// The example says `Extension Headers Length = 33` and, for type 77, `Length = 21` but
    /// shows the 14-byte value "traceID:123456". 33 = 1 (type 4) + 8 (2186796243 as a QUIC
    /// varint) + 2 (type delta 73) + 1 (length) + 21, so the lengths agree with each other and
    /// not with the string: the vector keeps the stated lengths, with a 21-byte value.
    #[test]
    fn spec_example_type_0x35() {
        let trace = b"traceID:1234567890123";
        assert_eq!(trace.len(), 21);
        let mut wire: Vec<u8> = vec![
            0x35, // Type
            0x02, // Track Alias = 2
            0x00, // Group ID = 0
            0x00, // Subgroup ID = 0
            0x00, // Object ID Delta = 0 (Object ID 0)
            0x21, // Extension Headers Length = 33
            0x04, // Type delta 4 (Type = 4, even: a varint value)
            0xC0, 0x00, 0x00, 0x00, 0x82, 0x57, 0xDC, 0xD3, // Value = 2186796243
            0x40, 0x49, // Type delta 73 (Type = 77, odd: length and bytes)
            0x15, // Length = 21
        ];
        wire.extend_from_slice(trace);
        #[rustfmt::skip]
        wire.extend_from_slice(&[
            0x04, // Object Payload Length = 4
            b'a', b'b', b'c', b'd',
            0x00, // Object ID Delta = 0 (Object ID 1)
            0x00, // Extension Headers Length = 0
            0x04, // Object Payload Length = 4
            b'e', b'f', b'g', b'h',
        ]);
        let header = SubgroupHeader {
            track_alias: TrackAlias(2),
            group_id: 0,
            subgroup_id: SubgroupId::Explicit(0),
            publisher_priority: None,
            has_properties: true,
            end_of_group: false,
            first_object: false,
        };
        let mut props = Properties::new();
        props.push(4, KvValue::Int(2_186_796_243));
        props.push(77, KvValue::Bytes(Bytes::from_static(trace)));
        let objects = [
            (
                SubgroupObject { object_id: 0, properties: props, payload_len: 4, ..Default::default() },
                &b"abcd"[..],
            ),
            (SubgroupObject { object_id: 1, payload_len: 4, ..Default::default() }, &b"efgh"[..]),
        ];
        check_example(&wire, header, &objects);
    }

    /// Decodes `wire` to `header` and `objects`, then re-encodes it byte for byte.
    fn check_example(wire: &[u8], header: SubgroupHeader, objects: &[(SubgroupObject, &[u8])]) {
        let (h, mut pos) = d::decode_uni_stream_header(wire).unwrap();
        assert_eq!(h, UniStreamHeader::Subgroup(header));
        let mut r = d::SubgroupReader::new(&header);
        for (o, payload) in objects {
            let (got, n) = r.decode(&wire[pos..]).unwrap();
            assert_eq!(&got, o);
            pos += n;
            assert_eq!(&wire[pos..pos + got.payload_len as usize], *payload);
            pos += got.payload_len as usize;
        }
        assert_eq!(pos, wire.len());

        let mut out = Vec::new();
        d::encode_subgroup_header(&header, &mut out).unwrap();
        let mut w = d::SubgroupWriter::new(&header);
        for (o, payload) in objects {
            w.encode(o, &mut out).unwrap();
            out.extend_from_slice(payload);
        }
        assert_eq!(out, wire);
    }

    /// Absolute Group and Object IDs accept any sequence of locations, in either order.
    #[test]
    fn fetch_fields_are_absolute() {
        let objs = [(5u64, 5u64), (5, 2), (1, 9), (9, 0), (9, 1)];
        let items: Vec<FetchItem> = objs
            .iter()
            .map(|(g, o)| {
                FetchItem::Object(FetchObject {
                    location: Location::new(*g, *o),
                    subgroup_id: Some(0),
                    publisher_priority: 1,
                    ..Default::default()
                })
            })
            .collect();
        let mut buf = Vec::new();
        let mut w = d::FetchWriter::new(GroupOrder::Ascending);
        for it in &items {
            w.encode(it, &mut buf).unwrap();
        }
        #[rustfmt::skip]
        let expect: Vec<u8> = vec![
            0x1C, 5, 5, 1, 0, // group, object, priority present; subgroup zero
            0x04, 2, 0,       // object present
            0x0C, 1, 9, 0,    // group and object present
            0x0C, 9, 0, 0,
            0x00, 0,          // everything derived: object = prior + 1
        ];
        assert_eq!(buf, expect);
        let mut r = d::FetchReader::new(GroupOrder::Descending);
        let mut pos = 0;
        for it in &items {
            let (got, n) = r.decode(&buf[pos..]).unwrap();
            assert_eq!(&got, it);
            pos += n;
        }
        assert_eq!(pos, buf.len());
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// draft-16 fetch fields are absolute: any sequence of locations round-trips.
        #[test]
        fn fetch_any_locations_round_trip(
            locs in vec((strategies::location(strategies::int62().boxed()), proptest::option::of(strategies::int62()), any::<u8>(), any::<bool>()), 0..12),
        ) {
            let items: Vec<FetchItem> = locs
                .into_iter()
                .map(|(location, subgroup_id, publisher_priority, end)| {
                    if end {
                        FetchItem::EndOfRange { kind: RangeEnd::Unknown, location }
                    } else {
                        FetchItem::Object(FetchObject { location, subgroup_id, publisher_priority, properties: Properties::new(), payload_len: 0 })
                    }
                })
                .collect();
            let mut buf = Vec::new();
            let mut w = d::FetchWriter::new(GroupOrder::Ascending);
            for it in &items {
                w.encode(it, &mut buf).unwrap();
            }
            let mut r = d::FetchReader::new(GroupOrder::Ascending);
            let mut pos = 0;
            for it in &items {
                let (got, n) = r.decode(&buf[pos..]).unwrap();
                prop_assert_eq!(&got, it);
                pos += n;
            }
            prop_assert_eq!(pos, buf.len());
        }
    }

    /// IDs above 2^62-1 cannot be written (they would not be readable either).
    #[test]
    fn ids_above_varint_range_are_rejected() {
        let big = 1u64 << 62;
        let mut out = Vec::new();
        let h = header_for_type(0x10, 1, 1, 0, 0);
        let o = SubgroupObject { object_id: big, payload_len: 1, ..Default::default() };
        assert!(matches!(d::SubgroupWriter::new(&h).encode(&o, &mut out), Err(EncodeError::OutOfRange(_))));
        let f = FetchItem::Object(FetchObject { location: Location::new(1, big), ..Default::default() });
        assert!(matches!(
            d::FetchWriter::new(GroupOrder::Ascending).encode(&f, &mut out),
            Err(EncodeError::OutOfRange(_))
        ));
        let mut w = d::FetchWriter::new(GroupOrder::Ascending);
        let at = |o| FetchItem::Object(FetchObject { location: Location::new(1, o), ..Default::default() });
        w.encode(&at(big - 1), &mut out).unwrap();
        let len = out.len();
        // big == prior + 1 would be "derived", but is out of range.
        assert!(matches!(w.encode(&at(big), &mut out), Err(EncodeError::OutOfRange(_))));
        assert_eq!(out.len(), len);
        let dg = DatagramHeader { group_id: big, ..Default::default() };
        assert!(matches!(d::encode_datagram(&dg, b"", &mut out), Err(EncodeError::OutOfRange(_))));
        assert_eq!(out.len(), len, "a failed datagram encode writes nothing");
    }
}

// ---------------------------------------------------------------------------------------------
// draft-22 only
// ---------------------------------------------------------------------------------------------

mod draft22_only {
    use super::*;
    use wire::d22::data as d;

    #[test]
    fn control_stream_consumes_nothing() {
        // 0x2F00 as vi64: two bytes, 0b10xxxxxx.
        let setup = [0xAF, 0x00, 0x00, 0x02, 0x00, 0x00];
        assert_eq!(d::decode_uni_stream_header(&setup), Ok((UniStreamHeader::Control, 0)));
        assert_eq!(d::decode_uni_stream_header(&setup[..1]), Err(DecodeError::NeedMore));
    }

    #[test]
    fn padding_stream_and_datagram() {
        let mut s = Vec::new();
        d::encode_padding_stream_header(&mut s);
        let n = s.len();
        s.extend_from_slice(&[0; 10]);
        assert_eq!(d::decode_uni_stream_header(&s), Ok((UniStreamHeader::Padding, n)));
        for cut in 0..n {
            assert_eq!(d::decode_uni_stream_header(&s[..cut]), Err(DecodeError::NeedMore));
        }
        for len in [0usize, 1, 1200] {
            let mut dg = Vec::new();
            d::encode_padding_datagram(len, &mut dg);
            assert_eq!(dg.len(), n + len);
            assert!(dg[n..].iter().all(|b| *b == 0));
            assert_eq!(d::decode_datagram(&dg), Ok(Datagram::Padding));
        }
        assert_eq!(s[..n], enc::<Vi64>(&[0x132B_3E28])[..]);
    }

    #[test]
    fn first_object_bit() {
        let h = header_for_type(0x50, 3, 4, 0, 9);
        assert!(h.first_object);
        let mut buf = Vec::new();
        d::encode_subgroup_header(&h, &mut buf).unwrap();
        assert_eq!(buf, vec![0x50, 3, 4, 9]);
        assert_eq!(d::decode_uni_stream_header(&buf), Ok((UniStreamHeader::Subgroup(h), 4)));
    }

    fn obj(g: u64, o: u64, s: Option<u64>, p: u8) -> FetchItem {
        FetchItem::Object(FetchObject {
            location: Location::new(g, o),
            subgroup_id: s,
            publisher_priority: p,
            properties: Properties::new(),
            payload_len: 0,
        })
    }

    fn decode_all(order: GroupOrder, buf: &[u8]) -> Result<Vec<FetchItem>, DecodeError> {
        let mut r = d::FetchReader::new(order);
        let mut pos = 0;
        let mut items = Vec::new();
        while pos < buf.len() {
            let (it, n) = r.decode(&buf[pos..])?;
            items.push(it);
            pos += n;
        }
        Ok(items)
    }

    /// §11.4.1.1 by hand, Ascending: a Group ID Delta moves up by delta + 1 and then the
    /// Object ID Delta is absolute; without one the Object ID is prior + delta.
    #[test]
    fn fetch_deltas_ascending() {
        #[rustfmt::skip]
        let wire: Vec<u8> = vec![
            0x1F, 10, 4, 5, 9, 0, // G=10 S=4 O=5 P=9
            0x05, 3, 0,           // same group, subgroup prior, object 5 + 3 = 8
            0x00, 0,              // subgroup zero, object 9
            0x0C, 1, 2, 0,        // group 10 + 1 + 1 = 12, object 2 (absolute)
            0x0A, 0, 0,           // group 13, subgroup 0 + 1, object 3 (prior + 1)
            0x51, 7, 0,           // datagram (low bits ignored), object 4, priority 7
            0x04, 0, 0,           // object 4 + 0: subgroup zero
        ];
        let items = decode_all(GroupOrder::Ascending, &wire).unwrap();
        assert_eq!(
            items,
            vec![
                obj(10, 5, Some(4), 9),
                obj(10, 8, Some(4), 9),
                obj(10, 9, Some(0), 9),
                obj(12, 2, Some(0), 9),
                obj(13, 3, Some(1), 9),
                obj(13, 4, None, 7),
                obj(13, 4, Some(0), 7),
            ]
        );
    }

    /// Descending: a Group ID Delta moves down by delta + 1; below zero is a violation.
    #[test]
    fn fetch_deltas_descending() {
        let wire: Vec<u8> = vec![0x1C, 10, 0, 1, 0, 0x08, 3, 0, 0x08, 5, 0];
        let items = decode_all(GroupOrder::Descending, &wire[..8]).unwrap();
        // G=10 O=0 S=0 P=1; then G = 10 - 4 = 6, O = 1.
        assert_eq!(items, vec![obj(10, 0, Some(0), 1), obj(6, 1, Some(0), 1)]);
        // Then 6 - 6 = 0 is fine ...
        assert!(decode_all(GroupOrder::Descending, &[&wire[..8], &[0x08, 5, 0]].concat()).is_ok());
        // ... and 6 - 7 underflows.
        assert_violation(decode_all(GroupOrder::Descending, &[&wire[..8], &[0x08, 6, 0]].concat()));
        // A delta of 2^64-1 cannot be stepped in either order.
        let huge = enc::<Vi64>(&[0x08, u64::MAX, 0]);
        assert_violation(decode_all(GroupOrder::Descending, &[&wire[..5], &huge[..]].concat()));
        assert_violation(decode_all(GroupOrder::Ascending, &[&wire[..5], &huge[..]].concat()));
        // Ascending overflow past 2^64-1.
        let first = [&enc::<Vi64>(&[0x1C, u64::MAX - 1, 0])[..], &[1], &enc::<Vi64>(&[0])[..]].concat();
        assert!(decode_all(GroupOrder::Ascending, &[&first[..], &[0x08, 0, 0]].concat()).is_ok());
        assert_violation(decode_all(GroupOrder::Ascending, &[&first[..], &[0x08, 1, 0]].concat()));
        // Object ID overflow: prior + Object ID Delta.
        let first = [&enc::<Vi64>(&[0x1C, 1, u64::MAX - 1])[..], &[1], &enc::<Vi64>(&[0])[..]].concat();
        assert!(decode_all(GroupOrder::Ascending, &[&first[..], &[0x04, 1, 0]].concat()).is_ok());
        assert_violation(decode_all(GroupOrder::Ascending, &[&first[..], &[0x04, 2, 0]].concat()));
    }

    /// After an End of Range the prior Group and Object IDs are its own (§11.4.1.2).
    #[test]
    fn fetch_prior_after_end_of_range() {
        #[rustfmt::skip]
        let wire: Vec<u8> = vec![
            0x13, 4, 3, 9, 0,       // first object needs absolute G/O: here G missing
        ];
        assert_violation(decode_all(GroupOrder::Ascending, &wire));
        let end = enc::<Vi64>(&[0x10C, 20, 6]);
        #[rustfmt::skip]
        let rest: Vec<u8> = vec![
            0x13, 2, 9, 0,       // subgroup 2, priority 9, group 20 (prior), object 7
            0x08, 0, 0,          // group 21, object 8, subgroup zero
        ];
        let items = decode_all(GroupOrder::Ascending, &[&end[..], &rest[..]].concat()).unwrap();
        assert_eq!(
            items,
            vec![
                FetchItem::EndOfRange { kind: RangeEnd::Unknown, location: Location::new(20, 6) },
                obj(20, 7, Some(2), 9),
                obj(21, 8, Some(0), 9),
            ]
        );
    }

    /// The writer cannot express groups against the Group Order or Object IDs going down within
    /// a group; it refuses them and writes nothing.
    #[test]
    fn fetch_writer_order_errors() {
        let mut out = Vec::new();
        let mut w = d::FetchWriter::new(GroupOrder::Ascending);
        w.encode(&obj(5, 5, Some(0), 1), &mut out).unwrap();
        let len = out.len();
        assert!(matches!(w.encode(&obj(4, 0, Some(0), 1), &mut out), Err(EncodeError::OutOfRange(_))));
        assert!(matches!(w.encode(&obj(5, 4, Some(0), 1), &mut out), Err(EncodeError::OutOfRange(_))));
        assert_eq!(out.len(), len);
        let mut w = d::FetchWriter::new(GroupOrder::Descending);
        w.encode(&obj(5, 5, Some(0), 1), &mut out).unwrap();
        assert!(matches!(w.encode(&obj(6, 0, Some(0), 1), &mut out), Err(EncodeError::OutOfRange(_))));
        // The writer state did not move: group 4 is still a delta of 0 from 5.
        let len = out.len();
        w.encode(&obj(4, 0, Some(0), 1), &mut out).unwrap();
        assert_eq!(&out[len..], &[0x0C, 0, 0, 0]);
    }

    /// The same hand vectors, written by the FetchWriter: it picks the most compact flags.
    #[test]
    fn fetch_writer_is_compact() {
        let items = vec![
            obj(10, 5, Some(4), 9),
            obj(10, 8, Some(4), 9),
            obj(10, 9, Some(0), 9),
            obj(12, 2, Some(0), 9),
            obj(13, 3, Some(1), 9),
            obj(13, 4, None, 7),
            obj(13, 4, Some(0), 7),
        ];
        let mut out = Vec::new();
        let mut w = d::FetchWriter::new(GroupOrder::Ascending);
        for it in &items {
            w.encode(it, &mut out).unwrap();
        }
        #[rustfmt::skip]
        let expect: Vec<u8> = vec![
            0x1F, 10, 4, 5, 9, 0,
            0x05, 3, 0,
            0x00, 0,
            0x0C, 1, 2, 0,
            0x0A, 0, 0,
            0x50, 7, 0,
            0x04, 0, 0,
        ];
        assert_eq!(out, expect);
        assert_eq!(decode_all(GroupOrder::Ascending, &out).unwrap(), items);
    }
}

// ---------------------------------------------------------------------------------------------
// draft-18 only
// ---------------------------------------------------------------------------------------------

mod draft18_only {
    use super::*;
    use wire::d18::data as d;

    /// §11.4.2: draft-18's SUBGROUP_HEADER types are draft-22's (0b0XX1XXXX, mode 0b11
    /// reserved), written out from the draft-18 figure's ranges.
    #[test]
    fn subgroup_types_match_the_figure() {
        let figure: Vec<u64> = (0x10..=0x15)
            .chain(0x18..=0x1D)
            .chain(0x30..=0x35)
            .chain(0x38..=0x3D)
            .chain(0x50..=0x55)
            .chain(0x58..=0x5D)
            .chain(0x70..=0x75)
            .chain(0x78..=0x7D)
            .collect();
        assert_eq!(figure, d22_subgroup_types());
    }

    #[test]
    fn control_and_padding_streams() {
        let setup = [0xAF, 0x00, 0x00, 0x02, 0x00, 0x00];
        assert_eq!(d::decode_uni_stream_header(&setup), Ok((UniStreamHeader::Control, 0)));
        let mut s = Vec::new();
        d::encode_padding_stream_header(&mut s);
        assert_eq!(s, enc::<Vi64>(&[0x132B_3E28]));
        assert_eq!(d::decode_uni_stream_header(&s), Ok((UniStreamHeader::Padding, s.len())));
        let mut dg = Vec::new();
        d::encode_padding_datagram(3, &mut dg);
        assert_eq!(d::decode_datagram(&dg), Ok(Datagram::Padding));
    }

    /// §11.6 "Examples", first stream: type 0x14 (Subgroup ID present, priority present), two
    /// 4-byte objects. Every value is below 64, so the bytes are those of draft-16.
    #[test]
    fn spec_example_type_0x14() {
        #[rustfmt::skip]
        let wire: Vec<u8> = vec![
            0x14, 0x02, 0x00, 0x00, 0x00, // Type, Track Alias 2, Group 0, Subgroup 0, Priority 0
            0x00, 0x04, b'a', b'b', b'c', b'd', // Object ID Delta 0 (Object 0), length 4
            0x00, 0x04, b'e', b'f', b'g', b'h', // Object ID Delta 0 (Object 1), length 4
        ];
        let header = SubgroupHeader {
            track_alias: TrackAlias(2),
            group_id: 0,
            subgroup_id: SubgroupId::Explicit(0),
            publisher_priority: Some(0),
            has_properties: false,
            end_of_group: false,
            first_object: false,
        };
        let objects = [
            (SubgroupObject { object_id: 0, payload_len: 4, ..Default::default() }, &b"abcd"[..]),
            (SubgroupObject { object_id: 1, payload_len: 4, ..Default::default() }, &b"efgh"[..]),
        ];
        check(&wire, header, &objects, true);
    }

    /// §11.6 "Examples", second stream: type 0x35 (properties, Subgroup ID present, default
    /// priority); the first object has two properties, the second none.
    ///
    /// The example still carries draft-16's numbers: `Properties Length = 33` and `Length = 21`
    /// for the 14-byte "traceID:123456". With vi64 integers (§1.4.1) and the 21-byte value the
    /// two lengths imply, the minimal encoding is 29 bytes (type 4: 1, 2186796243: 5, delta 73:
    /// 1, length: 1, value: 21); written with the 9-byte vi64 form of 2186796243, which §1.4.1
    /// allows, the list is exactly the stated 33. Both decode to the same object; the encoder
    /// writes the minimal one.
    #[test]
    fn spec_example_type_0x35() {
        let trace = b"traceID:1234567890123";
        let mut props = Properties::new();
        props.push(4, KvValue::Int(2_186_796_243));
        props.push(77, KvValue::Bytes(Bytes::from_static(trace)));
        let header = SubgroupHeader {
            track_alias: TrackAlias(2),
            group_id: 0,
            subgroup_id: SubgroupId::Explicit(0),
            publisher_priority: None,
            has_properties: true,
            end_of_group: false,
            first_object: false,
        };
        let objects = [
            (
                SubgroupObject { object_id: 0, properties: props, payload_len: 4, ..Default::default() },
                &b"abcd"[..],
            ),
            (SubgroupObject { object_id: 1, payload_len: 4, ..Default::default() }, &b"efgh"[..]),
        ];
        for (len, value, minimal) in [
            (29u8, &[0xF0, 0x82, 0x57, 0xDC, 0xD3][..], true),
            (33, &[0xFF, 0x00, 0x00, 0x00, 0x00, 0x82, 0x57, 0xDC, 0xD3][..], false),
        ] {
            let mut wire = vec![0x35, 0x02, 0x00, 0x00, 0x00, len, 0x04];
            wire.extend_from_slice(value);
            wire.extend_from_slice(&[0x49, 0x15]); // Type delta 73 (Type 77, odd), Length 21
            wire.extend_from_slice(trace);
            wire.extend_from_slice(&[0x04, b'a', b'b', b'c', b'd', 0x00, 0x00, 0x04, b'e', b'f', b'g', b'h']);
            check(&wire, header, &objects, minimal);
        }
    }

    /// Decodes `wire` to `header` and `objects`; when `minimal`, re-encodes it byte for byte.
    fn check(wire: &[u8], header: SubgroupHeader, objects: &[(SubgroupObject, &[u8])], minimal: bool) {
        let (h, mut pos) = d::decode_uni_stream_header(wire).unwrap();
        assert_eq!(h, UniStreamHeader::Subgroup(header));
        let mut r = d::SubgroupReader::new(&header);
        for (o, payload) in objects {
            let (got, n) = r.decode(&wire[pos..]).unwrap();
            assert_eq!(&got, o);
            pos += n;
            assert_eq!(&wire[pos..pos + got.payload_len as usize], *payload);
            pos += got.payload_len as usize;
        }
        assert_eq!(pos, wire.len());
        if minimal {
            let mut out = Vec::new();
            d::encode_subgroup_header(&header, &mut out).unwrap();
            let mut w = d::SubgroupWriter::new(&header);
            for (o, payload) in objects {
                w.encode(o, &mut out).unwrap();
                out.extend_from_slice(payload);
            }
            assert_eq!(out, wire);
        }
    }

    /// §11.4.4.1: Group ID and Object ID deltas as in draft-22, by hand: Ascending adds the
    /// Group ID Delta + 1, Descending subtracts it; without a Group ID Delta the Object ID is
    /// the prior one plus the Object ID Delta.
    #[test]
    fn fetch_deltas() {
        let obj = |g, o| {
            FetchItem::Object(FetchObject {
                location: Location::new(g, o),
                subgroup_id: Some(0),
                publisher_priority: 7,
                properties: Properties::new(),
                payload_len: 0,
            })
        };
        // First: Group 5, Object 2, priority 7. Then +2 objects in the group; then a group
        // delta of 1 (Ascending: 7, Descending: 3) with an absolute Object ID 4.
        #[rustfmt::skip]
        let wire = [
            0x1C, 5, 2, 7, 0,
            0x04, 2, 0,
            0x0C, 1, 4, 0,
        ];
        for (order, next) in [(GroupOrder::Ascending, 7), (GroupOrder::Descending, 3)] {
            let mut r = d::FetchReader::new(order);
            let mut pos = 0;
            let mut items = Vec::new();
            while pos < wire.len() {
                let (it, n) = r.decode(&wire[pos..]).unwrap();
                items.push(it);
                pos += n;
            }
            assert_eq!(items, [obj(5, 2), obj(5, 4), obj(next, 4)], "{order:?}");
            let mut w = d::FetchWriter::new(order);
            let mut out = Vec::new();
            for it in &items {
                w.encode(it, &mut out).unwrap();
            }
            assert_eq!(out, wire, "{order:?}");
        }
    }
}
