//! Pair harness for the session data plane: subgroup streams, Track Aliases and datagrams,
//! every draft, delivered whole and byte by byte (draft-16 §10, "Track Alias"; draft-22
//! §3.1.3-§3.1.3.1, §11). A client and a server [`Session`] back to back, no QUIC.
#![allow(clippy::unwrap_used)]

mod support;

use bytes::Bytes;
use proptest::prelude::*;
use session::{DataObject, Event, Session, SessionConfig, StreamId, Transmit};
use support::session::{deliver, Split};
use wire::model::{
    DatagramHeader, FullTrackName, KvValue, Message, ObjectStatus, Properties, Publish, PublishDone,
    RequestId, Role, SetupOptions, SubgroupHeader, SubgroupId, SubgroupObject, Subscribe, SubscribeOk,
    TrackAlias, TrackNamespace,
};
use wire::Version;

/// Every draft the session speaks: the served ones and draft-14.
const BOTH: [Version; 5] =
    [Version::Draft14, Version::Draft22, Version::Draft20, Version::Draft18, Version::Draft16];
const PROTOCOL_VIOLATION: u64 = 0x3;
const DUPLICATE_TRACK_ALIAS: u64 = 0x5;

struct Pair {
    c: Session,
    s: Session,
    /// Events of each side since the last `take`.
    ce: Vec<Event>,
    se: Vec<Event>,
    /// Transmits the server produced.
    s_sent: Vec<Transmit>,
}

impl Pair {
    fn ready(v: Version, sc: SessionConfig) -> Pair {
        let mut p = Pair {
            c: Session::new(v, Role::Client, SessionConfig::default(), SetupOptions::default()),
            s: Session::new(v, Role::Server, sc, SetupOptions::default()),
            ce: Vec::new(),
            se: Vec::new(),
            s_sent: Vec::new(),
        };
        p.pump(Split::Whole);
        assert!(p.c.is_ready() && p.s.is_ready());
        p.ce.clear();
        p.se.clear();
        p
    }

    fn pump(&mut self, split: Split) {
        loop {
            let mut moved = false;
            while let Some(t) = self.c.poll_transmit() {
                deliver(&mut self.s, &t, split);
                moved = true;
            }
            while let Some(t) = self.s.poll_transmit() {
                deliver(&mut self.c, &t, split);
                self.s_sent.push(t);
                moved = true;
            }
            if !moved {
                break;
            }
        }
        self.ce.extend(std::iter::from_fn(|| self.c.poll_event()));
        self.se.extend(std::iter::from_fn(|| self.s.poll_event()));
    }

    /// The client publishes a track with `alias`; returns the Request ID.
    fn publish(&mut self, alias: u64, split: Split) -> RequestId {
        let rid = self.c.next_request_id().unwrap();
        self.c.send(publish_msg(rid, alias)).unwrap();
        self.pump(split);
        rid
    }
}

fn publish_msg(rid: RequestId, alias: u64) -> Message {
    Message::Publish(Publish {
        request_id: rid,
        track: FullTrackName {
            namespace: TrackNamespace::from_strs(&["live"]),
            name: Bytes::from_static(b"v"),
        },
        track_alias: TrackAlias(alias),
        ..Default::default()
    })
}

fn header(alias: u64) -> SubgroupHeader {
    SubgroupHeader {
        track_alias: TrackAlias(alias),
        group_id: 5,
        subgroup_id: SubgroupId::Explicit(2),
        publisher_priority: Some(9),
        has_properties: true,
        end_of_group: false,
        first_object: false,
    }
}

/// Three objects: one with properties, a plain one, and an End of Group status object.
fn objects() -> Vec<(SubgroupObject, Bytes)> {
    let mut props = Properties::new();
    props.push(0x40, KvValue::Int(7));
    props.push(0x41, KvValue::Bytes(Bytes::from_static(b"meta")));
    vec![
        (
            SubgroupObject { object_id: 0, properties: props, payload_len: 5, ..Default::default() },
            Bytes::from_static(b"hello"),
        ),
        (SubgroupObject { object_id: 3, payload_len: 3, ..Default::default() }, Bytes::from_static(b"abc")),
        (
            SubgroupObject {
                object_id: 4,
                payload_len: 0,
                status: ObjectStatus::EndOfGroup,
                ..Default::default()
            },
            Bytes::new(),
        ),
    ]
}

/// Opens a subgroup on `from` and queues the objects (FIN when `fin`).
fn send_subgroup(from: &mut Session, alias: u64, fin: bool) -> StreamId {
    let id = from.open_subgroup(&header(alias)).unwrap();
    for (o, p) in objects() {
        from.send_object(id, &o, p).unwrap();
    }
    if fin {
        from.finish_data_stream(id).unwrap();
    }
    id
}

fn expected(stream: StreamId, rid: RequestId, alias: u64) -> Vec<Event> {
    let mut ev: Vec<Event> = objects()
        .into_iter()
        .map(|(object, payload)| Event::Object {
            stream,
            request_id: rid,
            object: DataObject::Subgroup { header: header(alias), object },
            payload,
        })
        .collect();
    ev.push(Event::DataStreamEnd { stream, reset: None });
    ev
}

fn data_events(ev: &[Event]) -> Vec<Event> {
    ev.iter().filter(|e| matches!(e, Event::Object { .. } | Event::DataStreamEnd { .. })).cloned().collect()
}

fn closed_with(ev: &[Event]) -> Option<u64> {
    ev.iter().find_map(|e| match e {
        Event::Closed { code, .. } => Some(*code),
        _ => None,
    })
}

#[test]
fn publish_then_subgroup_objects_whole_and_byte_by_byte() {
    for v in BOTH {
        let mut runs = Vec::new();
        for split in [Split::Whole, Split::Bytes] {
            let mut p = Pair::ready(v, SessionConfig::default());
            let rid = p.publish(7, split);
            assert_eq!(p.s.peer_track_alias(TrackAlias(7)), Some(rid));
            let id = send_subgroup(&mut p.c, 7, true);
            // Client uni streams: 2, 6, ...; draft-22's stream 2 is the control stream.
            assert_eq!(id, StreamId(if v.request_streams() { 6 } else { 2 }));
            p.pump(split);
            assert_eq!(data_events(&p.se), expected(id, rid, 7), "{v:?}");
            assert!(!p.s.is_closed());
            runs.push(p.se);
        }
        assert_eq!(runs[0], runs[1], "{v:?}");
    }
}

#[test]
fn subscribe_ok_alias_carries_server_objects() {
    for v in BOTH {
        let mut p = Pair::ready(v, SessionConfig::default());
        let rid = p.c.next_request_id().unwrap();
        let sub = Subscribe {
            request_id: rid,
            track: FullTrackName {
                namespace: TrackNamespace::from_strs(&["a"]),
                name: Bytes::from_static(b"b"),
            },
            ..Default::default()
        };
        p.c.send(Message::Subscribe(sub)).unwrap();
        p.pump(Split::Whole);
        let ok = SubscribeOk { request_id: rid, track_alias: TrackAlias(11), ..Default::default() };
        p.s.send(Message::SubscribeOk(ok)).unwrap();
        let id = send_subgroup(&mut p.s, 11, true);
        assert_eq!(id, StreamId(if v.request_streams() { 7 } else { 3 }));
        p.pump(Split::Bytes);
        assert_eq!(data_events(&p.ce), expected(id, rid, 11), "{v:?}");
    }
}

#[test]
fn fin_inside_an_object_is_a_protocol_violation() {
    for v in BOTH {
        let mut p = Pair::ready(v, SessionConfig::default());
        p.publish(7, Split::Whole);
        let id = send_subgroup(&mut p.c, 7, false);
        let mut bytes = Vec::new();
        while let Some(t) = p.c.poll_transmit() {
            if let Transmit::Stream { data, .. } = t {
                bytes.extend_from_slice(&data);
            }
        }
        // Cut inside the second object's payload ("abc").
        let cut = bytes.len() - 3;
        p.s.on_stream_data(id, &bytes[..cut], true);
        p.pump(Split::Whole);
        assert_eq!(closed_with(&p.se), Some(PROTOCOL_VIOLATION), "{v:?}");
        assert!(p.s_sent.iter().any(|t| matches!(t, Transmit::Close { code: 0x3, .. })));
    }
}

#[test]
fn data_before_its_alias_is_held_then_delivered() {
    for v in BOTH {
        let mut p = Pair::ready(v, SessionConfig::default());
        let rid = p.c.next_request_id().unwrap();
        p.c.send(publish_msg(rid, 7)).unwrap();
        let id = send_subgroup(&mut p.c, 7, true);
        let sent: Vec<Transmit> = std::iter::from_fn(|| p.c.poll_transmit()).collect();
        // Data first, then the PUBLISH.
        for t in sent.iter().filter(|t| matches!(t, Transmit::Stream { id: s, .. } if *s == id)) {
            deliver(&mut p.s, t, Split::Bytes);
        }
        let before: Vec<Event> = std::iter::from_fn(|| p.s.poll_event()).collect();
        assert!(data_events(&before).is_empty(), "{v:?} {before:?}");
        for t in sent.iter().filter(|t| !matches!(t, Transmit::Stream { id: s, .. } if *s == id)) {
            deliver(&mut p.s, t, Split::Whole);
        }
        p.pump(Split::Whole);
        assert!(matches!(p.se.first(), Some(Event::Message(Message::Publish(_)))), "{v:?} {:?}", p.se);
        assert_eq!(data_events(&p.se), expected(id, rid, 7), "{v:?}");
    }
}

#[test]
fn held_streams_are_bounded() {
    for v in BOTH {
        let mut sc = SessionConfig::default();
        sc.data.max_held_streams = 2;
        let mut p = Pair::ready(v, sc);
        let ids: Vec<StreamId> = (0..3).map(|_| send_subgroup(&mut p.c, 99, true)).collect();
        p.pump(Split::Whole);
        assert!(data_events(&p.se).is_empty());
        let stops: Vec<StreamId> = p
            .s_sent
            .iter()
            .filter_map(|t| match t {
                Transmit::StopSending { id, .. } => Some(*id),
                _ => None,
            })
            .collect();
        assert_eq!(stops, vec![ids[2]], "{v:?}");
        // The two held streams are released once the alias appears; the dropped one is not.
        let rid = p.publish(99, Split::Whole);
        let objs = data_events(&p.se)
            .iter()
            .filter(|e| matches!(e, Event::Object { request_id, .. } if *request_id == rid))
            .count();
        assert_eq!(objs, 6, "{v:?}");
        assert!(!p.s.is_closed());
    }
}

/// An alias in use by another track is DUPLICATE_TRACK_ALIAS (a second PUBLISH of the same
/// track may take its alias over: see session_pair's
/// `a_second_publish_of_the_same_track_may_reuse_its_alias`).
#[test]
fn duplicate_alias_closes_the_session() {
    for v in BOTH {
        let mut p = Pair::ready(v, SessionConfig::default());
        p.publish(7, Split::Whole);
        let rid = p.c.next_request_id().unwrap();
        let mut other = publish_msg(rid, 7);
        if let Message::Publish(m) = &mut other {
            m.track.name = Bytes::from_static(b"another");
        }
        p.c.send(other).unwrap();
        p.pump(Split::Whole);
        assert_eq!(closed_with(&p.se), Some(DUPLICATE_TRACK_ALIAS), "{v:?}");
    }
}

#[test]
fn alias_is_free_again_after_publish_done() {
    for v in BOTH {
        let mut p = Pair::ready(v, SessionConfig::default());
        let rid = p.publish(7, Split::Whole);
        // PUBLISH_DONE ends the request on the subscriber side (the server here receives it).
        let done = PublishDone { request_id: rid, status_code: 0, stream_count: 0, reason: Bytes::new() };
        p.c.send(Message::PublishDone(done)).unwrap();
        p.pump(Split::Whole);
        // The alias still resolves streams the PUBLISH_DONE overtook (draft-22 §9.9) ...
        assert_eq!(p.s.peer_track_alias(TrackAlias(7)), Some(rid), "{v:?} {:?}", p.se);
        // ... and a new request may take it over.
        let again = p.publish(7, Split::Whole);
        assert_eq!(closed_with(&p.se), None, "{v:?}");
        assert_eq!(p.s.peer_track_alias(TrackAlias(7)), Some(again), "{v:?}");
    }
}

#[test]
fn datagrams_resolve_their_alias() {
    for v in BOTH {
        let mut p = Pair::ready(v, SessionConfig::default());
        let rid = p.publish(7, Split::Whole);
        let h =
            DatagramHeader { track_alias: TrackAlias(7), group_id: 1, object_id: 2, ..Default::default() };
        p.c.send_datagram(&h, b"payload").unwrap();
        let status = DatagramHeader { object_id: 3, status: Some(ObjectStatus::EndOfTrack), ..h.clone() };
        p.c.send_datagram(&status, b"").unwrap();
        let unknown = DatagramHeader { track_alias: TrackAlias(8), ..h.clone() };
        p.c.send_datagram(&unknown, b"x").unwrap();
        p.pump(Split::Whole);
        let dgs: Vec<&Event> = p.se.iter().filter(|e| matches!(e, Event::Datagram { .. })).collect();
        // draft-14 §10.3.1 has no default priority: the inherited one is written as 128.
        let explicit = |d: &DatagramHeader| match v {
            Version::Draft14 => DatagramHeader { publisher_priority: Some(128), ..d.clone() },
            _ => d.clone(),
        };
        assert_eq!(
            dgs,
            vec![
                &Event::Datagram {
                    request_id: rid,
                    header: explicit(&h),
                    payload: Bytes::from_static(b"payload")
                },
                &Event::Datagram { request_id: rid, header: explicit(&status), payload: Bytes::new() },
            ],
            "{v:?}"
        );
        assert_eq!(p.s.dropped_datagrams(), 1);
        // A truncated datagram is a PROTOCOL_VIOLATION.
        let mut raw = Vec::new();
        if let Some(Transmit::Datagram { data, .. }) = {
            p.c.send_datagram(&h, b"").unwrap();
            p.c.poll_transmit()
        } {
            raw.extend_from_slice(&data[..2]);
        }
        p.s.on_datagram(Bytes::from(raw));
        p.pump(Split::Whole);
        assert_eq!(closed_with(&p.se), Some(PROTOCOL_VIOLATION), "{v:?}");
    }
}

#[test]
fn object_over_the_size_limit_abandons_the_stream() {
    for v in BOTH {
        let mut sc = SessionConfig::default();
        sc.data.max_object_size = 4;
        let mut p = Pair::ready(v, sc);
        let rid = p.publish(7, Split::Whole);
        let id = send_subgroup(&mut p.c, 7, false);
        p.pump(Split::Whole);
        // "hello" is 5 bytes: nothing is delivered, STOP_SENDING goes out, the session stays.
        let code = if v.request_streams() { 0x9 } else { 0x1 };
        assert_eq!(data_events(&p.se), vec![Event::DataStreamEnd { stream: id, reset: Some(code) }], "{v:?}");
        assert!(p.s_sent.contains(&Transmit::StopSending { id, code }));
        assert!(!p.s.is_closed());
        // The client answered STOP_SENDING with RESET_STREAM; late bytes are ignored.
        p.c.send_object(
            id,
            &SubgroupObject { object_id: 9, payload_len: 1, ..Default::default() },
            Bytes::from_static(b"z"),
        )
        .unwrap_err();
        p.s.on_stream_data(id, b"\x00\x01z", true);
        p.pump(Split::Whole);
        assert!(!p.s.is_closed());
        let _ = rid;
    }
}

#[test]
fn peer_reset_ends_a_data_stream() {
    for v in BOTH {
        let mut p = Pair::ready(v, SessionConfig::default());
        p.publish(7, Split::Whole);
        let id = send_subgroup(&mut p.c, 7, false);
        p.c.reset_data_stream(id, 0x2).unwrap();
        p.pump(Split::Whole);
        assert_eq!(data_events(&p.se).last(), Some(&Event::DataStreamEnd { stream: id, reset: Some(0x2) }));
        assert_eq!(data_events(&p.se).len(), 4, "{v:?}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Arbitrary bytes on a data stream (after a header for a known alias, or raw), cut
    /// anywhere, and as a datagram, never panic.
    #[test]
    fn arbitrary_data_never_panics(
        which in 0usize..3,
        prefix in any::<bool>(),
        bytes in proptest::collection::vec(any::<u8>(), 0..200),
        cut in any::<usize>(),
        fin in any::<bool>(),
    ) {
        let v = Version::ALL[which];
        let mut p = Pair::ready(v, SessionConfig::default());
        p.publish(7, Split::Whole);
        let id = StreamId(if v.request_streams() { 6 } else { 2 });
        let mut data = Vec::new();
        if prefix {
            let sid = p.c.open_subgroup(&header(7)).unwrap();
            prop_assert_eq!(sid, id);
            while let Some(Transmit::Stream { data: d, .. }) = p.c.poll_transmit() {
                data.extend_from_slice(&d);
            }
        }
        data.extend_from_slice(&bytes);
        let cut = cut % (data.len() + 1);
        p.s.on_stream_data(id, &data[..cut], false);
        p.s.on_stream_data(id, &data[cut..], fin);
        p.s.on_datagram(Bytes::from(bytes.clone()));
        p.s.on_stream_data(id.next(), &bytes, fin);
        p.pump(Split::Whole);
    }
}

#[test]
fn fetch_stream_objects_follow_the_fetch_group_order() {
    use wire::model::{
        Fetch, FetchItem, FetchKind, FetchObject, GroupOrder, Location, LocationFilter, Parameters, RangeEnd,
    };
    for v in BOTH {
        let mut p = Pair::ready(v, SessionConfig::default());
        let rid = p.c.next_request_id().unwrap();
        let params = Parameters {
            group_order: Some(GroupOrder::Descending),
            location_filter: Some(LocationFilter::AbsoluteRange {
                start: Location { group: 0, object: 0 },
                end: Location { group: 9, object: 0 },
            }),
            ..Default::default()
        };
        let track =
            FullTrackName { namespace: TrackNamespace::from_strs(&["a"]), name: Bytes::from_static(b"b") };
        p.c.send(Message::Fetch(Fetch { request_id: rid, kind: FetchKind::Standalone { track }, params }))
            .unwrap();
        p.pump(Split::Whole);
        let items = vec![
            (
                FetchItem::Object(FetchObject {
                    location: Location { group: 5, object: 1 },
                    subgroup_id: Some(0),
                    publisher_priority: 3,
                    payload_len: 2,
                    ..Default::default()
                }),
                Bytes::from_static(b"g5"),
            ),
            (
                FetchItem::Object(FetchObject {
                    location: Location { group: 3, object: 0 },
                    subgroup_id: Some(0),
                    publisher_priority: 3,
                    payload_len: 2,
                    ..Default::default()
                }),
                Bytes::from_static(b"g3"),
            ),
            (
                FetchItem::EndOfRange {
                    kind: RangeEnd::NonExistent,
                    location: Location { group: 2, object: 9 },
                },
                Bytes::new(),
            ),
        ];
        let id = p.s.open_fetch_stream(rid).unwrap();
        let mut out = Vec::new();
        let mut w = v.fetch_writer(GroupOrder::Descending);
        for (item, payload) in &items {
            w.encode(item, &mut out).unwrap();
            out.extend_from_slice(payload);
        }
        p.s.send_raw_data(id, Bytes::from(out)).unwrap();
        p.s.finish_data_stream(id).unwrap();
        p.pump(Split::Bytes);
        let mut want: Vec<Event> = items
            .into_iter()
            .map(|(item, payload)| Event::Object {
                stream: id,
                request_id: rid,
                object: DataObject::Fetch(item),
                payload,
            })
            .collect();
        want.push(Event::DataStreamEnd { stream: id, reset: None });
        assert_eq!(data_events(&p.ce), want, "{v:?}");
    }
}

#[test]
fn total_buffered_bytes_are_bounded() {
    for v in BOTH {
        let mut sc = SessionConfig::default();
        sc.data.max_buffered_bytes = 64;
        let mut p = Pair::ready(v, sc);
        p.publish(7, Split::Whole);
        let a = p.c.open_subgroup(&header(7)).unwrap();
        let b = p.c.open_subgroup(&header(7)).unwrap();
        let big = SubgroupObject { object_id: 0, payload_len: 40, ..Default::default() };
        // Each stream holds an incomplete 40-byte object: the second crosses 64 bytes in all.
        p.c.send_object(a, &big, Bytes::from(vec![1; 40])).unwrap();
        p.c.send_object(b, &big, Bytes::from(vec![2; 40])).unwrap();
        let sent: Vec<Transmit> = std::iter::from_fn(|| p.c.poll_transmit()).collect();
        for t in &sent {
            match t {
                // Withhold the last payload byte of each stream.
                Transmit::Stream { id, data, fin, .. } if data.len() == 40 => {
                    p.s.on_stream_data(*id, &data[..39], *fin)
                }
                t => deliver(&mut p.s, t, Split::Whole),
            }
        }
        p.pump(Split::Whole);
        assert!(p.s_sent.iter().any(|t| matches!(t, Transmit::StopSending { id, .. } if *id == b)), "{v:?}");
        assert!(!p.s_sent.iter().any(|t| matches!(t, Transmit::StopSending { id, .. } if *id == a)), "{v:?}");
        assert!(!p.s.is_closed());
    }
}

/// draft-18 §11.5.1, draft-22 §11.5.1.
#[test]
fn padding_streams_are_discarded() {
    for v in [Version::Draft18, Version::Draft22] {
        let mut p = Pair::ready(v, SessionConfig::default());
        let mut pad = Vec::new();
        wire::d22::data::encode_padding_stream_header(&mut pad);
        assert_eq!(pad, {
            let mut d18 = Vec::new();
            wire::d18::data::encode_padding_stream_header(&mut d18);
            d18
        });
        pad.extend_from_slice(&[0; 100]);
        p.s.on_stream_data(StreamId(6), &pad[..3], false);
        p.s.on_stream_data(StreamId(6), &pad[3..], true);
        p.pump(Split::Whole);
        assert!(p.se.is_empty(), "{v:?}: {:?}", p.se);
        assert!(!p.s.is_closed());
    }
}

#[test]
fn draft16_control_setup_type_on_a_data_stream_is_a_violation() {
    // draft-16 has no unidirectional control stream: an unknown stream type closes.
    let mut p = Pair::ready(Version::Draft16, SessionConfig::default());
    p.s.on_stream_data(StreamId(2), &[0x3f, 0x00], false);
    p.pump(Split::Whole);
    assert_eq!(closed_with(&p.se), Some(PROTOCOL_VIOLATION));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// A valid subgroup stream cut into arbitrary chunks gives the same events as whole.
    #[test]
    fn any_chunking_gives_the_same_objects(which in 0usize..3, cuts in proptest::collection::vec(any::<usize>(), 0..6)) {
        let v = Version::ALL[which];
        let mut p = Pair::ready(v, SessionConfig::default());
        let rid = p.publish(7, Split::Whole);
        let id = send_subgroup(&mut p.c, 7, false);
        let mut bytes = Vec::new();
        while let Some(Transmit::Stream { data, .. }) = p.c.poll_transmit() {
            bytes.extend_from_slice(&data);
        }
        let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c % (bytes.len() + 1)).collect();
        cuts.push(0);
        cuts.push(bytes.len());
        cuts.sort_unstable();
        for w in cuts.windows(2) {
            p.s.on_stream_data(id, &bytes[w[0]..w[1]], w[1] == bytes.len());
        }
        p.pump(Split::Whole);
        prop_assert_eq!(data_events(&p.se), expected(id, rid, 7));
    }
}
