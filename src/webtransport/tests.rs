//! Unit tests of the WebTransport session state machine.
#![allow(clippy::unwrap_used)]

use super::*;

fn server() -> WebTransport {
    WebTransport::server(vec!["moqt-22".into(), "moqt-16".into()], "moqt-16".into(), Limits::default())
}

fn client(protocols: &[&str]) -> WebTransport {
    let protocols: Vec<String> = protocols.iter().map(|p| p.to_string()).collect();
    WebTransport::client("https://relay.example:4443/moq?token=t1", &protocols, Limits::default()).unwrap()
}

/// Moves every stream output of `from` into `to` (one call per output, whole); other
/// outputs are dropped.
fn deliver(from: &mut WebTransport, to: &mut WebTransport) {
    while let Some(o) = from.poll_output() {
        if let Output::Stream { quic, data, fin } = o {
            to.on_stream_data(quic, &data, fin);
        }
    }
}

/// Client and server through SETTINGS, CONNECT and 200.
fn pair(protocols: &[&str]) -> (WebTransport, WebTransport) {
    let (mut c, mut s) = (client(protocols), server());
    deliver(&mut c, &mut s);
    deliver(&mut s, &mut c);
    (c, s)
}

#[test]
fn connect_picks_the_clients_first_protocol_spoken_here() {
    let (c, s) = pair(&["moqt-99", "moqt-16", "moqt-22"]);
    let a = s.accepted().unwrap();
    assert_eq!(a.protocol, "moqt-16");
    assert_eq!((a.authority.as_str(), a.path.as_str()), ("relay.example:4443", "/moq?token=t1"));
    assert_eq!(c.accepted().unwrap().protocol, "moqt-16");
}

#[test]
fn a_client_offering_nothing_gets_the_default() {
    let (c, s) = pair(&[]);
    assert_eq!(s.accepted().unwrap().protocol, "moqt-16");
    // No WT-Protocol in the answer: the client takes its own (empty) first choice.
    assert!(c.accepted().is_some());
}

#[test]
fn a_client_offering_only_unknown_versions_is_refused_400() {
    let (mut c, mut s) = (client(&["moqt-99"]), server());
    deliver(&mut c, &mut s);
    assert!(s.accepted().is_none());
    deliver(&mut s, &mut c);
    assert_eq!(c.poll_event(), Some(Event::Refused { status: 400 }));
}

#[test]
fn stream_ids_map_both_ways_with_headers_on_first_bytes() {
    let (mut c, mut s) = pair(&["moqt-22"]);
    // The client's session streams 0 (bidi) and 2 (uni) are QUIC 4 and 6.
    assert_eq!(c.quic_id(0), Some(4));
    assert_eq!(c.quic_id(2), Some(6));
    assert_eq!(s.quic_id(3), Some(7)); // the server's first uni: QUIC 3 is HTTP/3's
    assert_eq!(s.quic_id(1), Some(1)); // server bidi: HTTP/3 opens none
    for (stream, payload) in [(0u64, &b"bidi"[..]), (2, &b"uni"[..])] {
        let header = c.stream_header(stream).unwrap();
        assert!(c.stream_header(stream).is_none(), "once");
        let q = c.quic_id(stream).unwrap();
        let mut bytes = header.to_vec();
        bytes.extend_from_slice(payload);
        // Split inside the header: the rest arrives later.
        assert_eq!(s.on_stream_data(q, &bytes[..1], false), None);
        let d = s.on_stream_data(q, &bytes[1..], false).unwrap();
        assert_eq!(&bytes[1..][d.offset..], payload);
        assert_eq!(d.stream, stream, "the server sees the client's numbering");
        assert_eq!(s.session_id(q), Some(stream));
    }
    // The server answers on the client's bidirectional stream: QUIC 4, no header.
    assert_eq!(s.quic_id(0), Some(4));
    assert!(s.stream_header(0).is_none());
    // A stream opened out of order still gets its header once.
    assert!(s.stream_header(11).is_some());
    assert!(s.stream_header(7).is_some());
    assert!(s.stream_header(7).is_none() && s.stream_header(11).is_none());
}

#[test]
fn datagrams_carry_the_quarter_stream_id() {
    let (c, s) = pair(&["moqt-16"]);
    let mut d = c.datagram_prefix().to_vec();
    d.extend_from_slice(b"object");
    assert_eq!(s.on_datagram(&d), Some(&b"object"[..]));
    assert_eq!(s.on_datagram(&[0x01, 1, 2]), None, "another session's");
    assert_eq!(s.on_datagram(&[]), None);
}

#[test]
fn close_and_drain_capsules_reach_the_peer() {
    let (mut c, mut s) = pair(&["moqt-16"]);
    while c.poll_event().is_some() {}
    s.drain();
    s.close(0x10, "bye");
    deliver(&mut s, &mut c);
    assert_eq!(c.poll_event(), Some(Event::Draining));
    assert_eq!(c.poll_event(), Some(Event::Closed { code: 0x10, reason: "bye".into() }));
    assert!(c.is_closed());
    s.close(0x10, "again");
    assert!(s.poll_output().is_none(), "one capsule");
}

#[test]
fn a_second_connect_is_answered_429() {
    let (mut c, mut s) = pair(&["moqt-16"]);
    let url = url::Url::parse("https://relay.example/moq").unwrap();
    let mut buf = BytesMut::new();
    ConnectRequest::new(url).encode(&mut buf).unwrap();
    assert_eq!(s.on_stream_data(8, &buf, false), None);
    let Some(Output::Stream { quic: 8, data, fin: true }) = s.poll_output() else { panic!() };
    match ConnectResponse::decode(&mut &data[..]) {
        Err(ConnectError::WrongStatus(Some(st))) => assert_eq!(st.as_u16(), 429),
        other => panic!("{other:?}"),
    }
    assert!(c.poll_event().is_some());
}

#[test]
fn a_wt_stream_for_another_session_is_refused() {
    let (_, mut s) = pair(&["moqt-16"]);
    // Uni stream type 0x54 naming session 8.
    assert_eq!(s.on_stream_data(14, &[0x40, 0x54, 0x08, 1, 2, 3], false), None);
    assert_eq!(
        s.poll_output(),
        Some(Output::StopSending { quic: 14, code: code::WT_BUFFERED_STREAM_REJECTED })
    );
}

#[test]
fn http3_errors_close_the_connection() {
    // A second control stream (RFC 9114 §6.2.1).
    let (mut c, mut s) = (client(&[]), server());
    deliver(&mut c, &mut s);
    while s.poll_output().is_some() {}
    s.on_stream_data(6, &[0x00, 0x04, 0x00], false);
    assert!(matches!(s.poll_output(), Some(Output::Close { code: code::H3_STREAM_CREATION_ERROR, .. })));
    // A control stream that does not start with SETTINGS.
    let mut s = server();
    while s.poll_output().is_some() {}
    s.on_stream_data(2, &[0x00, 0x07, 0x01, 0x00], false);
    assert!(matches!(s.poll_output(), Some(Output::Close { code: code::H3_MISSING_SETTINGS, .. })));
    // A client's push stream.
    let mut s = server();
    while s.poll_output().is_some() {}
    s.on_stream_data(2, &[0x01], false);
    assert!(matches!(s.poll_output(), Some(Output::Close { code: code::H3_STREAM_CREATION_ERROR, .. })));
    // An unknown stream type is only stopped.
    let mut s = server();
    while s.poll_output().is_some() {}
    s.on_stream_data(2, &[0x21], false);
    assert_eq!(s.poll_output(), Some(Output::StopSending { quic: 2, code: code::H3_STREAM_CREATION_ERROR }));
}

#[test]
fn oversized_headers_are_answered_431() {
    let mut s = server();
    while s.poll_output().is_some() {}
    // HEADERS frame declaring 1 MB.
    s.on_stream_data(0, &[0x01, 0x80, 0x10, 0x00, 0x00, 0x00], false);
    let Some(Output::Stream { quic: 0, data, fin: true }) = s.poll_output() else { panic!() };
    match ConnectResponse::decode(&mut &data[..]) {
        Err(ConnectError::WrongStatus(Some(st))) => assert_eq!(st.as_u16(), 431),
        other => panic!("{other:?}"),
    }
}

#[test]
fn payload_before_acceptance_is_held_within_its_limit() {
    let mut c = client(&["moqt-16"]);
    let mut s = WebTransport::server(
        vec!["moqt-16".into()],
        "moqt-16".into(),
        Limits { max_early_bytes: 8, ..Limits::default() },
    );
    // A WebTransport bidi stream (signal 0x41, session 0) before the CONNECT arrives.
    assert_eq!(s.on_stream_data(4, &[0x40, 0x41, 0x00, b'a', b'b'], false), None);
    assert_eq!(s.on_stream_data(8, &[0x40, 0x41, 0x00, 0, 1, 2, 3, 4, 5, 6, 7, 8], false), None);
    assert!(matches!(s.poll_output(), Some(Output::Stream { quic: 3, .. })), "SETTINGS");
    assert_eq!(
        s.poll_output(),
        Some(Output::StopSending { quic: 8, code: code::WT_BUFFERED_STREAM_REJECTED }),
        "over the limit"
    );
    deliver(&mut c, &mut s);
    assert!(s.accepted().is_some());
    assert_eq!(s.take_early(), vec![(0, b"ab".to_vec(), false)]);
}

proptest::proptest! {
    /// Whatever a peer sends on any stream, in any pieces, nothing panics and every
    /// delivered range lies inside the bytes given.
    #[test]
    fn arbitrary_input_never_panics(
        chunks in proptest::collection::vec(
            (0u64..24, proptest::collection::vec(proptest::prelude::any::<u8>(), 0..64), proptest::prelude::any::<bool>()),
            0..40,
        ),
    ) {
        for mut wt in [server(), client(&["moqt-16"])] {
            for (quic, data, fin) in &chunks {
                if let Some(d) = wt.on_stream_data(*quic, data, *fin) {
                    proptest::prop_assert!(d.offset <= data.len());
                }
                let _ = wt.on_datagram(data);
                let _ = wt.on_stream_reset(*quic, 0x52e4a40fa8db);
            }
            while wt.poll_output().is_some() {}
        }
    }
}
