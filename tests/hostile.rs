//! Hostile peers against one sans-IO server [`Session`], for every draft: what a peer can grow
//! is bounded, and the answer carries the spec's code (ARCHITECTURE.md, "Malformed and abusive
//! input"). No clock is read: deadlines are `Instant`s the test chooses.
#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use bytes::Bytes;
use moq_edge::session::{Event, Session, SessionConfig, StreamId, Transmit};
use moq_edge::wire::model::{
    FullTrackName, Message, RequestId, Role, Setup, SetupOptions, SubgroupHeader, SubgroupId, Subscribe,
    TrackAlias, TrackNamespace,
};
use moq_edge::wire::Version;

/// CONTROL_MESSAGE_TIMEOUT (draft-16 §13.1.1, draft-18 §3.5, draft-22 §12.2).
const CONTROL_MESSAGE_TIMEOUT: u64 = 0x11;

/// The stream reset code for a stream dropped for a local limit: EXCESSIVE_LOAD (draft-18
/// §3.3.3, draft-22 §12.5); draft-16 has none and uses CANCELLED.
fn overload(v: Version) -> u64 {
    match v {
        Version::Draft14 | Version::Draft16 => 0x1,
        Version::Draft18 | Version::Draft20 | Version::Draft22 => 0x9,
    }
}

fn encode(v: Version, m: &Message) -> Vec<u8> {
    let mut out = Vec::new();
    v.encode_message(m, &mut out).unwrap();
    out
}

fn subscribe(id: u64) -> Message {
    Message::Subscribe(Subscribe {
        request_id: RequestId(id),
        track: FullTrackName {
            namespace: TrackNamespace::from_strs(&["live"]),
            name: Bytes::from_static(b"v"),
        },
        ..Default::default()
    })
}

/// The client's control stream: draft-14 and draft-16 bidirectional stream 0, draft-18/22 its first
/// unidirectional stream.
fn control(v: Version) -> u64 {
    if !v.request_streams() {
        0
    } else {
        2
    }
}

/// The first client bidirectional stream that is not a control stream.
fn first_bidi(v: Version) -> u64 {
    if !v.request_streams() {
        4
    } else {
        0
    }
}

/// The first client unidirectional data stream.
fn first_uni(v: Version) -> u64 {
    if !v.request_streams() {
        2
    } else {
        6
    }
}

/// A client's SETUP at `v` (draft-14's lists its version, §9.3).
fn client_setup(v: Version) -> Message {
    let options =
        SetupOptions { versions: v.setup_version().into_iter().collect(), ..SetupOptions::default() };
    Message::ClientSetup(Setup { options })
}

fn server(v: Version, config: SessionConfig) -> Session {
    Session::new(v, Role::Server, config, SetupOptions::default())
}

/// A server whose SETUP exchange with a raw client (bytes from the test) is done.
fn ready_server(v: Version, config: SessionConfig) -> Session {
    let mut s = server(v, config);
    s.on_stream_data(StreamId(control(v)), &encode(v, &client_setup(v)), false);
    assert!(s.is_ready(), "{v:?}");
    while s.poll_event().is_some() {}
    while s.poll_transmit().is_some() {}
    s
}

fn events(s: &mut Session) -> Vec<Event> {
    std::iter::from_fn(|| s.poll_event()).collect()
}

fn transmits(s: &mut Session) -> Vec<Transmit> {
    std::iter::from_fn(|| s.poll_transmit()).collect()
}

fn closed_with(ev: &[Event]) -> Option<u64> {
    ev.iter().find_map(|e| match e {
        Event::Closed { code, .. } => Some(*code),
        _ => None,
    })
}

/// The first bytes of a control message that announces a 65,535-byte body (the type of
/// SUBSCRIBE, then the 16-bit length), followed by `body` of its bytes.
fn partial_message(v: Version, body: usize) -> Vec<u8> {
    let whole = encode(v, &subscribe(0));
    // Type varint: one byte in every draft for SUBSCRIBE (0x3).
    let mut out = vec![whole[0], 0xFF, 0xFF];
    out.resize(3 + body, 0);
    out
}

#[test]
fn setup_not_completed_by_its_deadline_closes_with_control_message_timeout() {
    for v in Version::ALL {
        let t0 = Instant::now();
        let deadline = t0 + Duration::from_secs(5);
        let mut s = server(v, SessionConfig::default());
        s.set_setup_deadline(deadline);
        assert_eq!(s.timeout(), Some(deadline));
        // Half a CLIENT_SETUP: the session waits for the rest.
        let setup = encode(v, &Message::ClientSetup(Setup::default()));
        s.on_stream_data(StreamId(control(v)), &setup[..setup.len() / 2], false);
        s.on_timeout(deadline - Duration::from_millis(1));
        assert!(!s.is_closed(), "{v:?}");
        s.on_timeout(deadline);
        assert!(s.is_closed(), "{v:?}");
        assert_eq!(closed_with(&events(&mut s)), Some(CONTROL_MESSAGE_TIMEOUT), "{v:?}");
        let close = transmits(&mut s).into_iter().find_map(|t| match t {
            Transmit::Close { code, .. } => Some(code),
            _ => None,
        });
        assert_eq!(close, Some(CONTROL_MESSAGE_TIMEOUT), "{v:?}");
        assert_eq!(s.timeout(), None);
    }
}

#[test]
fn setup_completed_in_time_disarms_the_deadline() {
    for v in Version::ALL {
        let t0 = Instant::now();
        let mut s = server(v, SessionConfig::default());
        s.set_setup_deadline(t0 + Duration::from_secs(5));
        s.on_stream_data(StreamId(control(v)), &encode(v, &client_setup(v)), false);
        assert!(s.is_ready());
        assert_eq!(s.timeout(), None);
        s.on_timeout(t0 + Duration::from_secs(60));
        assert!(!s.is_closed(), "{v:?}");
        assert_eq!(closed_with(&events(&mut s)), None);
    }
}

#[test]
fn peer_request_streams_beyond_the_limit_are_refused_with_excessive_load() {
    for v in Version::ALL {
        let config = SessionConfig { max_peer_streams: 4, ..Default::default() };
        let mut s = ready_server(v, config);
        let first = first_bidi(v);
        // Four streams whose first message has not arrived yet: all kept.
        for k in 0..4 {
            s.on_stream_data(StreamId(first + 4 * k), &[0x03], false);
        }
        assert!(transmits(&mut s).is_empty(), "{v:?}");
        // The fifth is stopped and reset; its bytes are ignored, the session stays open.
        let fifth = first + 16;
        s.on_stream_data(StreamId(fifth), &[0x03], false);
        let code = overload(v);
        assert_eq!(
            transmits(&mut s),
            vec![
                Transmit::StopSending { id: StreamId(fifth), code },
                Transmit::Reset { id: StreamId(fifth), code }
            ],
            "{v:?}"
        );
        s.on_stream_data(StreamId(fifth), &[0, 0], false);
        assert!(transmits(&mut s).is_empty() && !s.is_closed(), "{v:?}");
        assert_eq!(s.usage().streams, 4);
        // Once the peer gives one up, a new stream is served again.
        s.on_stream_reset(StreamId(first), 0);
        transmits(&mut s);
        s.on_stream_data(StreamId(first + 20), &[0x03], false);
        assert!(transmits(&mut s).is_empty(), "{v:?}");
        assert_eq!(s.usage().streams, 4);
        assert_eq!(closed_with(&events(&mut s)), None);
    }
}

#[test]
fn request_stream_flood_of_whole_requests_stops_at_the_limit() {
    for v in [Version::Draft18, Version::Draft22] {
        let config = SessionConfig { max_peer_streams: 8, ..Default::default() };
        let mut s = ready_server(v, config);
        for k in 0..20u64 {
            s.on_stream_data(StreamId(4 * k), &encode(v, &subscribe(2 * k)), false);
        }
        let requests =
            events(&mut s).iter().filter(|e| matches!(e, Event::Message(Message::Subscribe(_)))).count();
        assert_eq!(requests, 8, "{v:?}");
        let refused =
            transmits(&mut s).iter().filter(|t| matches!(t, Transmit::Reset { code: 0x9, .. })).count();
        assert_eq!(refused, 12, "{v:?}");
        assert!(!s.is_closed());
    }
}

#[test]
fn partial_request_messages_are_bounded_across_streams() {
    for v in Version::ALL {
        let config = SessionConfig { max_request_buffer: 200_000, ..Default::default() };
        let mut s = ready_server(v, config);
        let first = first_bidi(v);
        let chunk = partial_message(v, 60_000);
        // Three partial messages fit (180,009 bytes); the fourth would cross 200,000.
        for k in 0..3 {
            s.on_stream_data(StreamId(first + 4 * k), &chunk, false);
        }
        assert!(transmits(&mut s).is_empty(), "{v:?}");
        let fourth = first + 12;
        s.on_stream_data(StreamId(fourth), &chunk, false);
        let code = overload(v);
        assert_eq!(
            transmits(&mut s),
            vec![
                Transmit::StopSending { id: StreamId(fourth), code },
                Transmit::Reset { id: StreamId(fourth), code }
            ],
            "{v:?}"
        );
        assert!(!s.is_closed(), "{v:?}");
        assert!(s.usage().buffered_bytes <= 200_000, "{v:?}");
        // A stream that grows past the total later is dropped the same way.
        s.on_stream_data(StreamId(first), &chunk[..30_000], false);
        assert_eq!(
            transmits(&mut s),
            vec![
                Transmit::StopSending { id: StreamId(first), code },
                Transmit::Reset { id: StreamId(first), code }
            ],
            "{v:?}"
        );
        assert_eq!(s.usage().buffered_bytes, 2 * chunk.len());
        assert_eq!(closed_with(&events(&mut s)), None);
    }
}

#[test]
fn a_known_request_whose_stream_overflows_the_total_is_cancelled() {
    for v in [Version::Draft18, Version::Draft22] {
        let config = SessionConfig { max_request_buffer: 100_000, ..Default::default() };
        let mut s = ready_server(v, config);
        s.on_stream_data(StreamId(0), &encode(v, &subscribe(0)), false);
        assert!(matches!(events(&mut s)[..], [Event::Message(Message::Subscribe(_))]));
        // A REQUEST_UPDATE that never completes, bigger than the total.
        s.on_stream_data(StreamId(0), &partial_message(v, 60_000), false);
        s.on_stream_data(StreamId(0), &vec![0; 60_000], false);
        assert_eq!(events(&mut s), vec![Event::Cancelled { request_id: RequestId(0) }]);
        let code = overload(v);
        assert_eq!(
            transmits(&mut s),
            vec![Transmit::StopSending { id: StreamId(0), code }, Transmit::Reset { id: StreamId(0), code }],
            "{v:?}"
        );
        assert_eq!(s.usage().buffered_bytes, 0);
    }
}

/// One stream the peer keeps open while thousands of later ones end: what the session
/// remembers about the ended ones stays bounded, bidirectional and unidirectional.
#[test]
fn closed_streams_behind_one_open_stream_are_remembered_within_a_window() {
    for v in Version::ALL {
        let mut s = ready_server(v, SessionConfig::default());
        let bidi = first_bidi(v);
        let uni = first_uni(v);
        // The stream that stays open: a partial message.
        s.on_stream_data(StreamId(bidi), &[0x03], false);
        // A held data stream (alias unknown) stays open too.
        let h = SubgroupHeader {
            track_alias: TrackAlias(7),
            group_id: 0,
            subgroup_id: SubgroupId::Zero,
            publisher_priority: Some(128),
            has_properties: false,
            end_of_group: false,
            first_object: false,
        };
        let mut header = Vec::new();
        v.encode_subgroup_header(&h, &mut header).unwrap();
        s.on_stream_data(StreamId(uni), &header, false);
        // Windows: 4,096 bidirectional and 16,384 unidirectional stream ids.
        for k in 1..=6000u64 {
            s.on_stream_data(StreamId(bidi + 4 * k), &[], true);
        }
        assert!(s.usage().closed_ids <= 4096, "{v:?}: {:?}", s.usage());
        for k in 1..=40_000u64 {
            s.on_stream_data(StreamId(uni + 4 * k), &[], true);
        }
        let usage = s.usage();
        assert!(usage.closed_ids <= 4096 + 16_384, "{v:?}: {usage:?}");
        assert_eq!(usage.streams, 2, "{v:?}");
        // The open streams still work, and late bytes on ended ones are still ignored.
        s.on_stream_data(StreamId(bidi + 4 * 6000), &[1, 2, 3], false);
        s.on_stream_data(StreamId(uni + 4 * 40_000), &[1, 2, 3], false);
        assert_eq!(s.usage().streams, 2, "{v:?}");
        assert!(!s.is_closed(), "{v:?}");
    }
}

/// Bounded from the start, kept here with the other limits: peer data streams beyond
/// `max_data_streams` are stopped with the overload code; the session stays open.
#[test]
fn data_streams_beyond_the_limit_are_stopped() {
    for v in Version::ALL {
        let mut s = ready_server(v, SessionConfig::default());
        let max = SessionConfig::default().data.max_data_streams as u64;
        let uni = first_uni(v);
        // A SUBGROUP_HEADER's stream type alone: the header is not complete yet.
        for k in 0..max {
            s.on_stream_data(StreamId(uni + 4 * k), &[0x10], false);
        }
        assert!(transmits(&mut s).is_empty(), "{v:?}");
        let over = uni + 4 * max;
        s.on_stream_data(StreamId(over), &[0x10], false);
        assert_eq!(
            transmits(&mut s),
            vec![Transmit::StopSending { id: StreamId(over), code: overload(v) }],
            "{v:?}"
        );
        assert!(!s.is_closed());
        assert_eq!(s.usage().streams, max as usize);
    }
}

/// Bounded from the start: draft-18/22 peer unidirectional streams whose type has
/// not arrived whole count with the streams waiting for SETUP; one more than
/// `max_pre_setup_streams` (16) closes the session with PROTOCOL_VIOLATION.
#[test]
fn uni_streams_of_unknown_type_are_bounded() {
    for v in [Version::Draft18, Version::Draft22] {
        let mut s = ready_server(v, SessionConfig::default());
        // The first byte of SETUP's two-byte type: not a whole type yet.
        let first = encode(v, &Message::ClientSetup(Setup::default()))[0];
        for k in 0..16 {
            s.on_stream_data(StreamId(first_uni(v) + 4 * k), &[first], false);
        }
        assert!(!s.is_closed(), "{v:?}");
        s.on_stream_data(StreamId(first_uni(v) + 64), &[first], false);
        assert_eq!(closed_with(&events(&mut s)), Some(0x3), "{v:?}: PROTOCOL_VIOLATION");
    }
}

/// Bounded from the start: an object header (its properties) still incomplete past
/// 64 KiB is a local limit: the stream is stopped with the overload code and reported ended;
/// the session stays open.
#[test]
fn object_headers_beyond_64_kib_are_stopped() {
    use moq_edge::wire::model::{KvValue, Properties, Publish, SubgroupObject};
    for v in Version::ALL {
        let mut s = ready_server(v, SessionConfig::default());
        let publish = Message::Publish(Publish {
            request_id: RequestId(0),
            track: FullTrackName {
                namespace: TrackNamespace::from_strs(&["live"]),
                name: Bytes::from_static(b"v"),
            },
            track_alias: TrackAlias(1),
            ..Default::default()
        });
        // draft-16: on the control stream; draft-18/22: on a request stream of its own.
        s.on_stream_data(StreamId(0), &encode(v, &publish), false);
        let ev = events(&mut s);
        assert!(ev.iter().any(|e| matches!(e, Event::Message(Message::Publish(_)))), "{v:?}: {ev:?}");
        let h = SubgroupHeader {
            track_alias: TrackAlias(1),
            group_id: 0,
            subgroup_id: SubgroupId::Zero,
            publisher_priority: Some(128),
            has_properties: true,
            end_of_group: false,
            first_object: false,
        };
        let mut props = Properties::new();
        props.push(0x41, KvValue::Bytes(Bytes::from(vec![1u8; 40_000])));
        props.push(0x43, KvValue::Bytes(Bytes::from(vec![2u8; 40_000])));
        let o = SubgroupObject { object_id: 0, properties: props, payload_len: 1, ..Default::default() };
        let mut bytes = Vec::new();
        v.encode_subgroup_header(&h, &mut bytes).unwrap();
        v.subgroup_writer(&h).encode(&o, &mut bytes).unwrap();
        let id = first_uni(v);
        s.on_stream_data(StreamId(id), &bytes[..70_000], false);
        transmits(&mut s);
        assert!(!s.is_closed(), "{v:?}: {:?}", events(&mut s));
        assert_eq!(s.usage().buffered_bytes, 0, "{v:?}");
        assert_eq!(
            events(&mut s),
            vec![Event::DataStreamEnd { stream: StreamId(id), reset: Some(overload(v)) }],
            "{v:?}"
        );
    }
}

/// Shaka Player's draft-16 CLIENT_SETUP (MAX_REQUEST_ID 42069, MOQT_IMPLEMENTATION
/// `ShakaPlayer/v5.2.12`) and its first SUBSCRIBE, GROUP_ORDER 0 (draft-14's "the publisher's
/// order"), as its `buffer_control_writer.js` writes them; the same SETUP naming `other/1.0`.
const SHAKA_SETUP: &[u8] = b"\x20\x00\x1b\x02\x02\x80\x00\xa4\x55\x05\x13ShakaPlayer/v5.2.12";
const OTHER_SETUP: &[u8] = b"\x20\x00\x13\x02\x02\x80\x00\xa4\x55\x05\x0bother/1.0.0";
const SHAKA_SUBSCRIBE: &[u8] =
    b"\x03\x00\x19\x00\x01\x04live\x07catalog\x04\x10\x01\x10\x00\x01\x01\x02\x01\x00";

/// Shaka's bytes are read for Shaka (ARCHITECTURE.md, "Peer quirks"): its SUBSCRIBE arrives,
/// with no group order and its Largest Object filter as the latest group; from a peer that
/// names itself otherwise, the same SUBSCRIBE closes the session with PROTOCOL_VIOLATION.
#[test]
fn shaka_subscribe_is_read_for_shaka_and_refused_from_others() {
    use moq_edge::wire::model::LocationFilter;
    let mut shaka = server(Version::Draft16, SessionConfig::default());
    shaka.on_stream_data(StreamId(0), SHAKA_SETUP, false);
    assert!(shaka.is_ready());
    shaka.on_stream_data(StreamId(0), SHAKA_SUBSCRIBE, false);
    let ev = events(&mut shaka);
    assert_eq!(closed_with(&ev), None, "{ev:?}");
    let s = ev
        .iter()
        .find_map(|e| match e {
            Event::Message(Message::Subscribe(s)) => Some(s),
            _ => None,
        })
        .expect("its SUBSCRIBE");
    assert_eq!(s.params.group_order, None);
    assert_eq!(s.params.location_filter, Some(LocationFilter::RelativeStart { groups_back: 1 }));

    let mut other = server(Version::Draft16, SessionConfig::default());
    other.on_stream_data(StreamId(0), OTHER_SETUP, false);
    assert!(other.is_ready());
    other.on_stream_data(StreamId(0), SHAKA_SUBSCRIBE, false);
    assert_eq!(closed_with(&events(&mut other)), Some(0x3));
}
