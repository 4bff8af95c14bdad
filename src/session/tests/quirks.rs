//! Peer dialects (ARCHITECTURE.md, "Peer quirks"): a draft-18 peer whose SETUP names it
//! moq-lite-js (`@moq/net` 0.2, under the `<moq-watch>` player) writes Message Parameter values
//! by the Key-Value-Pair rule, and at draft-18 and draft-16 means its Largest Object filter as
//! the latest group; the session reads and writes them so for that peer only, and keeps the
//! draft as written for everyone else.
#![allow(clippy::unwrap_used)]

use bytes::Bytes;
use session::{Event, Session, SessionConfig, StreamId, Transmit};
use wire::model::{
    FullTrackName, GroupOrder, Location, LocationFilter, Message, Parameters, Properties, RequestId, Role,
    Setup, SetupOptions, Subscribe, SubscribeOk, TrackAlias, TrackNamespace,
};
use wire::Version;

/// The client's control stream (its first unidirectional stream) and first request stream.
const CONTROL: StreamId = StreamId(2);
const REQUEST: StreamId = StreamId(0);

/// A draft-18 relay-side session whose client has sent SETUP naming `implementation`.
fn server_after_setup(implementation: &'static [u8]) -> Session {
    let mut s =
        Session::new(Version::Draft18, Role::Server, SessionConfig::default(), SetupOptions::default());
    let options =
        SetupOptions { implementation: Some(Bytes::from_static(implementation)), ..Default::default() };
    let mut setup = Vec::new();
    Version::Draft18.encode_message(&Message::ClientSetup(Setup { options }), &mut setup).unwrap();
    s.on_stream_data(CONTROL, &setup, false);
    while s.poll_transmit().is_some() {}
    while s.poll_event().is_some() {}
    s
}

/// The player's catalog SUBSCRIBE as it writes it: Request ID 0, ("demo") "catalog.json", and
/// the parameters FORWARD 1, SUBSCRIBER_PRIORITY 155 as the two-byte varint `80 9b`,
/// SUBSCRIPTION_FILTER Largest Object (length 1, type 2), GROUP_ORDER 2.
fn player_subscribe() -> Vec<u8> {
    let mut body = vec![0x00, 0x01, 0x04];
    body.extend_from_slice(b"demo");
    body.push(12);
    body.extend_from_slice(b"catalog.json");
    body.extend_from_slice(&[0x04, 0x10, 0x01, 0x10, 0x80, 0x9b, 0x01, 0x01, 0x02, 0x01, 0x02]);
    let mut frame = vec![0x03];
    frame.extend_from_slice(&(body.len() as u16).to_be_bytes());
    frame.extend_from_slice(&body);
    frame
}

fn events(s: &mut Session) -> Vec<Event> {
    std::iter::from_fn(|| s.poll_event()).collect()
}

#[test]
fn moq_lite_js_subscribe_is_read_in_its_dialect() {
    let mut s = server_after_setup(b"moq-lite-js");
    s.on_stream_data(REQUEST, &player_subscribe(), false);
    let track = FullTrackName {
        namespace: TrackNamespace::from_strs(&["demo"]),
        name: Bytes::from_static(b"catalog.json"),
    };
    let params = Parameters {
        forward: Some(true),
        subscriber_priority: Some(155),
        // Its Largest Object filter: the latest group, from its first object.
        location_filter: Some(LocationFilter::RelativeStart { groups_back: 1 }),
        group_order: Some(GroupOrder::Descending),
        ..Parameters::default()
    };
    let expected = Message::Subscribe(Subscribe { request_id: RequestId(0), track, params });
    assert_eq!(events(&mut s), vec![Event::Message(expected)]);
    assert!(!s.is_closed());

    // Its answer carries LARGEST_OBJECT as that peer reads it: a length-prefixed Location.
    let ok = SubscribeOk {
        request_id: RequestId(0),
        track_alias: TrackAlias(1),
        params: Parameters { largest_object: Some(Location::new(3, 0)), ..Parameters::default() },
        track_properties: Properties::new(),
    };
    s.send(Message::SubscribeOk(ok)).unwrap();
    let sent: Vec<u8> = std::iter::from_fn(|| s.poll_transmit())
        .filter_map(|t| match t {
            Transmit::Stream { id, data, .. } if id == REQUEST => Some(data.to_vec()),
            _ => None,
        })
        .flatten()
        .collect();
    // SUBSCRIBE_OK, length 6: Track Alias 1, one parameter, type 0x09, Length 2, {3, 0}.
    assert_eq!(sent, [0x04, 0x00, 0x06, 0x01, 0x01, 0x09, 0x02, 0x03, 0x00]);
}

/// Any other peer, and the same peer at another draft, gets the draft as written: these bytes
/// misread SUBSCRIBER_PRIORITY's varint as a uint8 and the rest as unknown parameters, which
/// closes the session with PROTOCOL_VIOLATION.
#[test]
fn other_peers_keep_the_draft_as_written() {
    let mut s = server_after_setup(b"another-client");
    s.on_stream_data(REQUEST, &player_subscribe(), false);
    assert!(s.is_closed());
    assert!(
        events(&mut s).iter().any(|e| matches!(e, Event::Closed { code: 0x3, .. })),
        "PROTOCOL_VIOLATION"
    );
}

/// At draft-16 the same library means its Largest Object filter as the latest group too: the
/// session of a peer that names itself moq-lite-js reads it so, any other peer's as written.
#[test]
fn moq_lite_js_largest_object_is_the_latest_group_at_draft_16() {
    const CONTROL_16: StreamId = StreamId(0);
    for (implementation, want) in [
        (&b"moq-lite-js"[..], LocationFilter::RelativeStart { groups_back: 1 }),
        (&b"another-client"[..], LocationFilter::NextObject),
    ] {
        let mut s =
            Session::new(Version::Draft16, Role::Server, SessionConfig::default(), SetupOptions::default());
        let options = SetupOptions {
            implementation: Some(Bytes::copy_from_slice(implementation)),
            max_request_id: Some(10),
            ..Default::default()
        };
        let mut bytes = Vec::new();
        Version::Draft16.encode_message(&Message::ClientSetup(Setup { options }), &mut bytes).unwrap();
        let track =
            FullTrackName { namespace: TrackNamespace::from_strs(&["demo"]), name: Bytes::from_static(b"v") };
        let params =
            Parameters { location_filter: Some(LocationFilter::NextObject), ..Parameters::default() };
        let sub = Subscribe { request_id: RequestId(0), track, params };
        Version::Draft16.encode_message(&Message::Subscribe(sub.clone()), &mut bytes).unwrap();
        s.on_stream_data(CONTROL_16, &bytes, false);
        let got = events(&mut s).into_iter().find_map(|e| match e {
            Event::Message(Message::Subscribe(m)) => Some(m),
            _ => None,
        });
        assert_eq!(got.map(|m| m.params.location_filter), Some(Some(want)), "{implementation:?}");
        assert!(!s.is_closed());
    }
}
