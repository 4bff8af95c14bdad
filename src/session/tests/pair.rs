//! Pair harness for `session`: a client and a server [`Session`] back to back, the transmits of
//! one pumped into the other (no QUIC), for draft-16, draft-18 and draft-22. Covers the SETUP exchange,
//! request/response routing, byte-split delivery, Request ID rules and flow control (draft-16
//! §9.1, §9.5-§9.6; draft-22 §6.4.2.1), GOAWAY, pre-SETUP buffering (draft-22 §6.3),
//! cancellation (draft-22 §6.4.2.3) and garbage input.
#![allow(clippy::unwrap_used)]

mod support;

use bytes::Bytes;
use proptest::prelude::*;
use session::{Event, Session, SessionCode, SessionConfig, SessionError, StreamId, Transmit};
use support::session::{deliver, Split};
use wire::model::{
    DecodeContext, FullTrackName, GoAway, Location, LocationFilter, Message, Parameters, Publish,
    PublishNamespace, RequestError, RequestId, RequestKind, RequestOk, RequestUpdate, Role, Setup,
    SetupOptions, Subscribe, SubscribeNamespace, SubscribeOk, TrackAlias, TrackNamespace,
};
use wire::Version;

/// Every draft the session speaks: the served ones and draft-14.
const BOTH: [Version; 5] =
    [Version::Draft14, Version::Draft22, Version::Draft20, Version::Draft18, Version::Draft16];
/// The drafts with request streams (draft-18 §3.3, draft-20 §3.3, draft-22 §6.3).
const STREAMED: [Version; 3] = [Version::Draft18, Version::Draft20, Version::Draft22];

struct Side {
    s: Session,
    events: Vec<Event>,
    /// Every transmit this side produced, in order.
    sent: Vec<Transmit>,
}

struct Pair {
    c: Side,
    s: Side,
}

fn side(v: Version, role: Role, config: SessionConfig, setup: SetupOptions) -> Side {
    Side { s: Session::new(v, role, config, setup), events: Vec::new(), sent: Vec::new() }
}

impl Pair {
    fn new(v: Version) -> Pair {
        Pair::with(v, SessionConfig::default(), SessionConfig::default())
    }

    fn with(v: Version, cc: SessionConfig, sc: SessionConfig) -> Pair {
        let copts = SetupOptions {
            path: Some(Bytes::from_static(b"/moq")),
            authority: Some(Bytes::from_static(b"relay.example")),
            implementation: Some(Bytes::from_static(b"test-client")),
            ..Default::default()
        };
        let sopts = SetupOptions { max_auth_token_cache_size: Some(4096), ..Default::default() };
        Pair { c: side(v, Role::Client, cc, copts), s: side(v, Role::Server, sc, sopts) }
    }

    /// Moves transmits both ways until both sides are quiet.
    fn pump(&mut self, split: Split) {
        loop {
            let mut moved = false;
            while let Some(t) = self.c.s.poll_transmit() {
                deliver(&mut self.s.s, &t, split);
                self.c.sent.push(t);
                moved = true;
            }
            while let Some(t) = self.s.s.poll_transmit() {
                deliver(&mut self.c.s, &t, split);
                self.s.sent.push(t);
                moved = true;
            }
            if !moved {
                break;
            }
        }
        while let Some(e) = self.c.s.poll_event() {
            self.c.events.push(e);
        }
        while let Some(e) = self.s.s.poll_event() {
            self.s.events.push(e);
        }
    }

    fn ready(v: Version) -> Pair {
        let mut p = Pair::new(v);
        p.pump(Split::Whole);
        assert!(p.c.s.is_ready() && p.s.s.is_ready());
        p.c.events.clear();
        p.s.events.clear();
        p
    }
}

/// A SUBSCRIBE whose subscription state is explicit (draft-14 §9.7 has it in fixed fields,
/// so a draft-14 peer sees every one of them).
fn subscribe(id: RequestId) -> Message {
    Message::Subscribe(Subscribe {
        request_id: id,
        track: FullTrackName {
            namespace: TrackNamespace::from_strs(&["live"]),
            name: Bytes::from_static(b"video"),
        },
        params: Parameters {
            subscriber_priority: Some(128),
            forward: Some(true),
            // Not {0, 0}: draft-20 writes that as no filter (ARCHITECTURE.md).
            location_filter: Some(LocationFilter::AbsoluteStart { start: Location::new(5, 0) }),
            ..Default::default()
        },
    })
}

/// `m` as the peer's session reports it: draft-14 writes answers by the kind of request they
/// answer (`kind`) and fills fixed fields the model leaves out (SUBSCRIBE_OK's Group Order
/// is a Track Property, SUBSCRIBE_NAMESPACE asks for both kinds of discovery); the other
/// drafts give back `m`.
fn seen(v: Version, m: &Message, kind: RequestKind) -> Message {
    if v != Version::Draft14 {
        return m.clone();
    }
    let mut m = m.clone();
    if let Message::SubscribeNamespace(sn) = &mut m {
        sn.options = wire::model::SubscribeOptions::Both;
    }
    let mut out = Vec::new();
    v.encode_response(&m, kind, &mut out).unwrap();
    v.decode_message(&out, &DecodeContext::control(Role::Client)).unwrap().0
}

fn encode(v: Version, m: &Message) -> Vec<u8> {
    let mut out = Vec::new();
    v.encode_message(m, &mut out).unwrap();
    out
}

fn closed_with(events: &[Event]) -> Option<u64> {
    events.iter().find_map(|e| match e {
        Event::Closed { code, .. } => Some(*code),
        _ => None,
    })
}

fn drain(s: &mut Session) -> Vec<Event> {
    std::iter::from_fn(|| s.poll_event()).collect()
}

/// A client's SETUP as draft `v` writes it with `options`: draft-14's offers 0xff00000e.
fn client_setup(v: Version, options: SetupOptions) -> Message {
    let versions = v.setup_version().into_iter().collect();
    Message::ClientSetup(Setup { options: SetupOptions { versions, ..options } })
}

/// A server's SETUP as draft `v` writes it with `options`: draft-14's selects 0xff00000e.
fn server_setup(v: Version, options: SetupOptions) -> Message {
    Message::ServerSetup(Setup { options: SetupOptions { selected_version: v.setup_version(), ..options } })
}

/// The client's control stream: bidirectional 0 in draft-14 and draft-16, unidirectional 2
/// in the others.
fn client_control(v: Version) -> u64 {
    if v.request_streams() {
        2
    } else {
        0
    }
}

/// A server that has completed SETUP with a raw client (bytes injected by the test).
fn raw_server(v: Version) -> Session {
    let mut s = Session::new(v, Role::Server, SessionConfig::default(), SetupOptions::default());
    let setup = client_setup(v, SetupOptions::default());
    let control = client_control(v);
    s.on_stream_data(StreamId(control), &encode(v, &setup), false);
    assert!(s.is_ready(), "{v:?}");
    drain(&mut s);
    s
}

/// Where a raw client request goes: draft-16 the control stream, draft-22 a new bidi stream.
fn raw_request(s: &mut Session, v: Version, stream: u64, m: &Message) {
    let id = if v.request_streams() { stream } else { 0 };
    s.on_stream_data(StreamId(id), &encode(v, m), false);
}

#[test]
fn setup_completes_and_ready_carries_peer_options() {
    for v in BOTH {
        let mut p = Pair::new(v);
        p.pump(Split::Whole);
        let Some(Event::Ready { peer }) = p.s.events.first() else { panic!("{v:?}: {:?}", p.s.events) };
        assert_eq!(peer.path.as_deref(), Some(&b"/moq"[..]));
        assert_eq!(peer.authority.as_deref(), Some(&b"relay.example"[..]));
        assert_eq!(peer.implementation.as_deref(), Some(&b"test-client"[..]));
        let Some(Event::Ready { peer }) = p.c.events.first() else { panic!("{v:?}: {:?}", p.c.events) };
        assert_eq!(peer.max_auth_token_cache_size, Some(4096));
        assert_eq!(peer.implementation.as_deref(), Some(&b"moq-edge"[..]));
        match v {
            Version::Draft14 | Version::Draft16 => assert_eq!(peer.max_request_id, Some(200)),
            Version::Draft18 | Version::Draft20 | Version::Draft22 => assert_eq!(peer.max_request_id, None),
        }
        // The SETUP went on the right stream: draft-16 bidi 0, draft-22 uni 2 / 3.
        let first = |sent: &[Transmit]| match sent.first() {
            Some(Transmit::Stream { id, .. }) => id.0,
            other => panic!("{other:?}"),
        };
        let (c_id, s_id) = if v.request_streams() { (2, 3) } else { (0, 0) };
        assert_eq!((first(&p.c.sent), first(&p.s.sent)), (c_id, s_id), "{v:?}");
    }
}

#[test]
fn draft22_setup_options_all_travel() {
    let v = Version::Draft22;
    let copts = SetupOptions {
        path: Some(Bytes::from_static(b"/p")),
        authority: Some(Bytes::from_static(b"a")),
        implementation: Some(Bytes::from_static(b"i")),
        max_auth_token_cache_size: Some(1),
        max_request_updates: Some(2),
        max_filter_ranges: Some(3),
        ..Default::default()
    };
    let mut p = Pair {
        c: side(v, Role::Client, SessionConfig::default(), copts.clone()),
        s: side(v, Role::Server, SessionConfig::default(), SetupOptions::default()),
    };
    p.pump(Split::Whole);
    assert_eq!(p.s.events.first(), Some(&Event::Ready { peer: copts }));
}

/// SUBSCRIBE → SUBSCRIBE_OK and SUBSCRIBE → REQUEST_ERROR, every draft, whole or byte-split.
fn request_flow(v: Version, split: Split) -> (Vec<Event>, Vec<Event>, Vec<Transmit>) {
    let mut p = Pair::new(v);
    p.pump(split);
    let a = p.c.s.next_request_id().unwrap();
    let b = p.c.s.next_request_id().unwrap();
    assert_eq!((a, b), (RequestId(0), RequestId(2)));
    p.c.s.send(subscribe(a)).unwrap();
    p.c.s.send(subscribe(b)).unwrap();
    p.pump(split);
    assert!(p.s.events.contains(&Event::Message(subscribe(a))), "{v:?} {:?}", p.s.events);
    assert!(p.s.events.contains(&Event::Message(subscribe(b))));
    let ok =
        Message::SubscribeOk(SubscribeOk { request_id: a, track_alias: TrackAlias(7), ..Default::default() });
    let err = Message::RequestError(RequestError {
        request_id: b,
        error_code: 0x4,
        reason: Bytes::from_static(b"no such track"),
        ..Default::default()
    });
    p.s.s.send(ok.clone()).unwrap();
    p.s.s.send(err.clone()).unwrap();
    p.pump(split);
    let (ok, err) = (seen(v, &ok, RequestKind::Subscribe), seen(v, &err, RequestKind::Subscribe));
    assert!(p.c.events.contains(&Event::Message(ok)), "{v:?} {:?}", p.c.events);
    assert!(p.c.events.contains(&Event::Message(err)));
    assert!(!p.c.s.is_closed() && !p.s.s.is_closed());
    (p.c.events, p.s.events, p.s.sent)
}

#[test]
fn subscribe_responses_matched_by_request_id() {
    for v in BOTH {
        let (_, _, server_sent) = request_flow(v, Split::Whole);
        // Where the responses went: draft-16 the control stream, draft-22 the request streams
        // (client bidi 4 and 8; 0 is the first request stream in draft-22).
        let ids: Vec<u64> = server_sent
            .iter()
            .filter_map(|t| match t {
                Transmit::Stream { id, .. } => Some(id.0),
                _ => None,
            })
            .collect();
        match v {
            Version::Draft14 | Version::Draft16 => assert_eq!(ids, vec![0, 0, 0]),
            Version::Draft18 | Version::Draft20 | Version::Draft22 => assert_eq!(ids, vec![3, 0, 4]),
        }
    }
}

#[test]
fn byte_by_byte_delivery_gives_the_same_events() {
    for v in BOTH {
        let (c1, s1, _) = request_flow(v, Split::Whole);
        let (c2, s2, _) = request_flow(v, Split::Bytes);
        assert_eq!(c1, c2, "{v:?}");
        assert_eq!(s1, s2, "{v:?}");
    }
}

#[test]
fn every_two_way_split_of_the_client_bytes_gives_the_same_events() {
    for v in BOTH {
        let mut c = Session::new(v, Role::Client, SessionConfig::default(), SetupOptions::default());
        let mut stream_bytes: Vec<(StreamId, Vec<u8>)> = Vec::new();
        let mut take = |c: &mut Session| {
            while let Some(t) = c.poll_transmit() {
                if let Transmit::Stream { id, data, .. } = t {
                    match stream_bytes.iter_mut().find(|(i, _)| *i == id) {
                        Some((_, b)) => b.extend(data),
                        None => stream_bytes.push((id, data.to_vec())),
                    }
                }
            }
        };
        take(&mut c);
        // Make the client ready with a raw SERVER_SETUP so it can send requests.
        let max_request_id = (!v.request_streams()).then_some(10);
        let ss = encode(v, &server_setup(v, SetupOptions { max_request_id, ..Default::default() }));
        c.on_stream_data(StreamId(if v.request_streams() { 3 } else { 0 }), &ss, false);
        let id = c.next_request_id().unwrap();
        c.send(subscribe(id)).unwrap();
        take(&mut c);
        let reference = {
            let mut s = Session::new(v, Role::Server, SessionConfig::default(), SetupOptions::default());
            for (id, b) in &stream_bytes {
                s.on_stream_data(*id, b, false);
            }
            drain(&mut s)
        };
        assert!(reference.contains(&Event::Message(subscribe(id))), "{v:?} {reference:?}");
        for (sid, bytes) in &stream_bytes {
            for k in 0..=bytes.len() {
                let mut s = Session::new(v, Role::Server, SessionConfig::default(), SetupOptions::default());
                for (other, b) in &stream_bytes {
                    if other == sid {
                        s.on_stream_data(*sid, &bytes[..k], false);
                        s.on_stream_data(*sid, &bytes[k..], false);
                    } else {
                        s.on_stream_data(*other, b, false);
                    }
                }
                assert_eq!(drain(&mut s), reference, "{v:?} stream {sid} split at {k}");
            }
        }
    }
}

#[test]
fn request_id_violations_close_with_the_right_code() {
    let invalid = SessionCode::InvalidRequestId.code();
    for v in BOTH {
        // Wrong parity.
        let mut s = raw_server(v);
        raw_request(&mut s, v, 0, &subscribe(RequestId(1)));
        assert_eq!(closed_with(&drain(&mut s)), Some(invalid), "{v:?} parity");
        assert!(s.is_closed());
        // Duplicate.
        let mut s = raw_server(v);
        raw_request(&mut s, v, 0, &subscribe(RequestId(0)));
        raw_request(&mut s, v, 4, &subscribe(RequestId(0)));
        let ev = drain(&mut s);
        assert_eq!(ev.first(), Some(&Event::Message(subscribe(RequestId(0)))));
        assert_eq!(closed_with(&ev), Some(invalid), "{v:?} duplicate");
    }
    // draft-16: a skipped ID is not a violation (the gap may be a SUBSCRIBE_NAMESPACE on its
    // own stream, still in flight), but a lower ID after it on the control stream is out of
    // sequence; and one at MAX_REQUEST_ID (the server advertises 200).
    let v = Version::Draft16;
    let mut s = raw_server(v);
    raw_request(&mut s, v, 0, &subscribe(RequestId(2)));
    assert_eq!(closed_with(&drain(&mut s)), None, "skipped");
    raw_request(&mut s, v, 0, &subscribe(RequestId(0)));
    assert_eq!(closed_with(&drain(&mut s)), Some(invalid), "out of sequence on the control stream");
    // With a window of one request (MAX_REQUEST_ID 2), using ID 0 slides it to 4 (one
    // request more); ID 6 is beyond it.
    let config = SessionConfig { max_requests: 1, ..Default::default() };
    let mut s = Session::new(v, Role::Server, config, SetupOptions::default());
    s.on_stream_data(StreamId(0), &encode(v, &Message::ClientSetup(Setup::default())), false);
    raw_request(&mut s, v, 0, &subscribe(RequestId(0)));
    let sent: Vec<Transmit> = std::iter::from_fn(|| s.poll_transmit()).collect();
    let max_id = encode(v, &Message::MaxRequestId(RequestId(4)));
    assert!(
        sent.iter().any(|t| matches!(t, Transmit::Stream { data, .. } if data.ends_with(&max_id))),
        "MAX_REQUEST_ID 4 sent: {sent:?}"
    );
    raw_request(&mut s, v, 0, &subscribe(RequestId(6)));
    let ev = drain(&mut s);
    assert!(ev.contains(&Event::Message(subscribe(RequestId(0)))));
    assert_eq!(closed_with(&ev), Some(SessionCode::TooManyRequests.code()));
    // draft-18/22: request streams may arrive out of order, so a gap is not a violation.
    for v in STREAMED {
        let mut s = raw_server(v);
        raw_request(&mut s, v, 4, &subscribe(RequestId(2)));
        raw_request(&mut s, v, 0, &subscribe(RequestId(0)));
        let ev = drain(&mut s);
        assert_eq!(closed_with(&ev), None);
        assert_eq!(ev.len(), 2);
    }
}

#[test]
fn draft16_max_request_id_and_requests_blocked() {
    let v = Version::Draft16;
    let sc = SessionConfig { max_requests: 2, ..Default::default() };
    let mut p = Pair::with(v, SessionConfig::default(), sc);
    // Before SERVER_SETUP the client does not know the limit.
    assert_eq!(p.c.s.next_request_id(), Err(SessionError::NotReady));
    p.pump(Split::Whole);
    assert_eq!(p.c.s.next_request_id(), Ok(RequestId(0)));
    assert_eq!(p.c.s.next_request_id(), Ok(RequestId(2)));
    assert_eq!(p.c.s.next_request_id(), Err(SessionError::Blocked { max: 4 }));
    assert_eq!(p.c.s.next_request_id(), Err(SessionError::Blocked { max: 4 }));
    p.c.events.clear();
    p.s.events.clear();
    p.pump(Split::Whole);
    // REQUESTS_BLOCKED went out once.
    assert_eq!(p.s.events, vec![Event::Message(Message::RequestsBlocked(RequestId(4)))]);
    p.s.s.grant_requests(3).unwrap();
    p.pump(Split::Whole);
    assert_eq!(p.c.s.next_request_id(), Ok(RequestId(4)));
    p.c.s.send(subscribe(RequestId(0))).unwrap();
    p.c.s.send(subscribe(RequestId(2))).unwrap();
    p.c.s.send(subscribe(RequestId(4))).unwrap();
    p.pump(Split::Whole);
    assert!(!p.s.s.is_closed());
    assert_eq!(p.s.events.iter().filter(|e| matches!(e, Event::Message(Message::Subscribe(_)))).count(), 3);
    // A MAX_REQUEST_ID that does not increase is a PROTOCOL_VIOLATION.
    p.c.s.on_stream_data(StreamId(0), &encode(v, &Message::MaxRequestId(RequestId(10))), false);
    assert_eq!(closed_with(&drain(&mut p.c.s)), Some(SessionCode::ProtocolViolation.code()));
}

#[test]
fn second_goaway_is_a_protocol_violation() {
    for v in BOTH {
        let mut p = Pair::ready(v);
        p.s.s.send(Message::GoAway(GoAway::default())).unwrap();
        p.pump(Split::Whole);
        // draft-18's control-stream GOAWAY names the client's first unused Request ID (§10.4).
        let request_id = (v == Version::Draft18).then_some(RequestId(0));
        assert_eq!(
            p.c.events,
            vec![Event::Message(Message::GoAway(GoAway { request_id, ..GoAway::default() }))]
        );
        p.s.s.send(Message::GoAway(GoAway::default())).unwrap();
        p.pump(Split::Whole);
        assert_eq!(closed_with(&p.c.events), Some(SessionCode::ProtocolViolation.code()), "{v:?}");
        assert!(p.c.s.is_closed());
        // The closing side asks the transport to close the connection with the same code.
        assert!(p.c.sent.iter().any(|t| matches!(t, Transmit::Close { code: 0x3, .. })));
    }
}

#[test]
fn draft16_message_before_setup_is_a_protocol_violation() {
    let v = Version::Draft16;
    let mut s = Session::new(v, Role::Server, SessionConfig::default(), SetupOptions::default());
    s.on_stream_data(StreamId(0), &encode(v, &subscribe(RequestId(0))), false);
    assert_eq!(closed_with(&drain(&mut s)), Some(SessionCode::ProtocolViolation.code()));
    // Input after the close is ignored.
    s.on_stream_data(StreamId(0), &encode(v, &Message::ClientSetup(Setup::default())), false);
    assert!(drain(&mut s).is_empty());
    assert!(!s.is_ready());
}

#[test]
fn streams_request_streams_before_setup_are_buffered() {
    for v in STREAMED {
        let mut s = Session::new(v, Role::Server, SessionConfig::default(), SetupOptions::default());
        s.on_stream_data(StreamId(4), &encode(v, &subscribe(RequestId(2))), false);
        s.on_stream_data(StreamId(0), &encode(v, &subscribe(RequestId(0))), false);
        assert!(drain(&mut s).is_empty());
        s.on_stream_data(StreamId(2), &encode(v, &Message::ClientSetup(Setup::default())), false);
        let ev = drain(&mut s);
        assert!(matches!(ev.first(), Some(Event::Ready { .. })), "{ev:?}");
        assert_eq!(
            &ev[1..],
            &[Event::Message(subscribe(RequestId(2))), Event::Message(subscribe(RequestId(0)))]
        );
        // The response goes on the buffered request's stream.
        let ok = Message::SubscribeOk(SubscribeOk { request_id: RequestId(2), ..Default::default() });
        s.send(ok).unwrap();
        let last = std::iter::from_fn(|| s.poll_transmit()).last();
        assert!(matches!(last, Some(Transmit::Stream { id: StreamId(4), .. })), "{last:?}");
    }
}

#[test]
fn streams_too_many_streams_before_setup_close() {
    for v in STREAMED {
        let config = SessionConfig { max_pre_setup_streams: 2, ..Default::default() };
        let mut s = Session::new(v, Role::Server, config, SetupOptions::default());
        for (i, stream) in [0u64, 4, 8].iter().enumerate() {
            s.on_stream_data(StreamId(*stream), &encode(v, &subscribe(RequestId(2 * i as u64))), false);
        }
        assert_eq!(closed_with(&drain(&mut s)), Some(SessionCode::ProtocolViolation.code()));
        // And a stream that exceeds its byte limit.
        let config = SessionConfig { max_stream_buffer: 8, ..Default::default() };
        let mut s = Session::new(v, Role::Server, config, SetupOptions::default());
        s.on_stream_data(StreamId(0), &[0x03, 0x00, 0xFF, 0, 0, 0, 0, 0, 0, 0], false);
        assert!(s.is_closed());
    }
}

#[test]
fn streams_response_on_control_stream_is_a_protocol_violation() {
    for v in STREAMED {
        for m in [
            Message::SubscribeOk(SubscribeOk::default()),
            Message::RequestError(RequestError::default()),
            subscribe(RequestId(0)),
        ] {
            let mut s = raw_server(v);
            s.on_stream_data(StreamId(2), &encode(v, &m), false);
            assert_eq!(
                closed_with(&drain(&mut s)),
                Some(SessionCode::ProtocolViolation.code()),
                "{}",
                m.name()
            );
        }
        // A control stream closed (FIN) or reset is a PROTOCOL_VIOLATION too.
        let mut s = raw_server(v);
        s.on_stream_data(StreamId(2), &[], true);
        assert_eq!(closed_with(&drain(&mut s)), Some(SessionCode::ProtocolViolation.code()));
        let mut s = raw_server(v);
        s.on_stream_reset(StreamId(2), 0);
        assert_eq!(closed_with(&drain(&mut s)), Some(SessionCode::ProtocolViolation.code()));
    }
}

#[test]
fn streams_cancel_resets_the_request_stream() {
    for v in STREAMED {
        let mut p = Pair::ready(v);
        let id = p.c.s.next_request_id().unwrap();
        p.c.s.send(subscribe(id)).unwrap();
        p.pump(Split::Whole);
        assert_eq!(p.s.events, vec![Event::Message(subscribe(id))]);
        p.c.s.cancel(id).unwrap();
        p.pump(Split::Whole);
        assert_eq!(p.s.events.last(), Some(&Event::Cancelled { request_id: id }));
        assert!(p.c.sent.iter().any(|t| matches!(t, Transmit::Reset { id: StreamId(0), code: 0x1 })));
        assert!(p.c.sent.iter().any(|t| matches!(t, Transmit::StopSending { id: StreamId(0), code: 0x1 })));
        // The server forgot the request: a response for it has no stream.
        let ok = Message::SubscribeOk(SubscribeOk { request_id: id, ..Default::default() });
        assert_eq!(p.s.s.send(ok), Err(SessionError::UnknownRequest(0)));
        // draft-16 UNSUBSCRIBE maps onto the same cancellation in draft-22.
        let id = p.c.s.next_request_id().unwrap();
        p.c.s.send(subscribe(id)).unwrap();
        p.pump(Split::Whole);
        p.c.s.send(Message::Unsubscribe(id)).unwrap();
        p.pump(Split::Whole);
        assert_eq!(p.s.events.last(), Some(&Event::Cancelled { request_id: id }));
        assert!(!p.c.s.is_closed() && !p.s.s.is_closed());
    }
}

#[test]
fn streams_fin_is_not_a_cancellation() {
    for v in STREAMED {
        let mut p = Pair::ready(v);
        let id = p.c.s.next_request_id().unwrap();
        p.c.s.send(subscribe(id)).unwrap();
        p.c.s.finish(id).unwrap();
        p.pump(Split::Whole);
        assert_eq!(p.s.events, vec![Event::Message(subscribe(id))]);
        let ok = Message::SubscribeOk(SubscribeOk { request_id: id, ..Default::default() });
        p.s.s.send(ok.clone()).unwrap();
        p.pump(Split::Whole);
        assert_eq!(p.c.events, vec![Event::Message(ok)]);
    }
}

#[test]
fn draft16_cancel_needs_a_message() {
    let mut p = Pair::ready(Version::Draft16);
    let id = p.c.s.next_request_id().unwrap();
    p.c.s.send(subscribe(id)).unwrap();
    assert!(matches!(p.c.s.cancel(id), Err(SessionError::Misrouted(_))));
    p.c.s.send(Message::Unsubscribe(id)).unwrap();
    p.pump(Split::Whole);
    assert_eq!(p.s.events, vec![Event::Message(subscribe(id)), Event::Message(Message::Unsubscribe(id))]);
}

#[test]
fn subscribe_namespace_stream_carries_namespace_messages() {
    for v in BOTH {
        let mut p = Pair::ready(v);
        let id = p.c.s.next_request_id().unwrap();
        let sn = Message::SubscribeNamespace(SubscribeNamespace {
            request_id: id,
            prefix: TrackNamespace::from_strs(&["live"]),
            ..Default::default()
        });
        p.c.s.send(sn.clone()).unwrap();
        p.pump(Split::Bytes);
        assert_eq!(p.s.events, vec![Event::Message(seen(v, &sn, RequestKind::SubscribeNamespace))], "{v:?}");
        // draft-16: its own bidi stream (4, after the control stream 0); draft-22: stream 0;
        // draft-14: the control stream 0 (§9.28), where the NAMESPACE below goes as the
        // server's own PUBLISH_NAMESPACE (the client's session answers it and reports it as
        // NAMESPACE; `draft14_discovery_publishes_namespaces` checks the wire).
        let stream = if v.request_streams() || v == Version::Draft14 { 0 } else { 4 };
        assert!(p.c.sent.iter().any(|t| matches!(t, Transmit::Stream { id, .. } if id.0 == stream)));
        let ok = Message::RequestOk(RequestOk { request_id: id, ..Default::default() });
        p.s.s.send(ok.clone()).unwrap();
        let ns = Message::Namespace(TrackNamespace::from_strs(&["a"]));
        assert!(matches!(p.s.s.send(ns.clone()), Err(SessionError::Misrouted(_))));
        p.s.s.send_on(id, ns.clone()).unwrap();
        p.pump(Split::Whole);
        assert_eq!(
            p.c.events,
            vec![Event::Message(ok), Event::RequestMessage { request_id: id, message: ns }],
            "{v:?}"
        );
        let server_streams: Vec<u64> =
            p.s.sent
                .iter()
                .filter_map(|t| match t {
                    Transmit::Stream { id, .. } => Some(id.0),
                    _ => None,
                })
                .collect();
        assert_eq!(server_streams.last(), Some(&stream));
        // Cancelling it reaches the server as Cancelled.
        p.c.s.cancel(id).unwrap();
        p.pump(Split::Whole);
        assert_eq!(p.s.events.last(), Some(&Event::Cancelled { request_id: id }), "{v:?}");
        assert!(!p.c.s.is_closed() && !p.s.s.is_closed());
    }
}

#[test]
fn bidi_stream_with_a_wrong_first_message_is_a_protocol_violation() {
    for v in BOTH {
        let mut s = raw_server(v);
        // draft-16 bidi streams other than the control stream begin with SUBSCRIBE_NAMESPACE;
        // draft-22 ones with a request (a response there has no request to name).
        let (stream, m) = match v {
            // draft-14 is not reachable until the session speaks it; it goes as draft-16.
            Version::Draft14 | Version::Draft16 => (4, subscribe(RequestId(0))),
            Version::Draft18 | Version::Draft20 | Version::Draft22 => {
                (0, Message::RequestOk(RequestOk::default()))
            }
        };
        s.on_stream_data(StreamId(stream), &encode(v, &m), false);
        assert_eq!(closed_with(&drain(&mut s)), Some(SessionCode::ProtocolViolation.code()), "{v:?}");
    }
}

#[test]
fn server_requests_use_odd_ids_and_server_streams() {
    for v in BOTH {
        let mut p = Pair::ready(v);
        let id = p.s.s.next_request_id().unwrap();
        assert_eq!(id, RequestId(1));
        p.s.s.send(subscribe(id)).unwrap();
        p.pump(Split::Whole);
        assert_eq!(p.c.events, vec![Event::Message(subscribe(id))], "{v:?}");
        if v.request_streams() {
            assert!(matches!(p.s.sent.last(), Some(Transmit::Stream { id: StreamId(1), .. })));
        }
        let ok = Message::SubscribeOk(SubscribeOk { request_id: id, ..Default::default() });
        p.c.s.send(ok.clone()).unwrap();
        p.pump(Split::Whole);
        assert_eq!(p.s.events, vec![Event::Message(seen(v, &ok, RequestKind::Subscribe))], "{v:?}");
    }
}

#[test]
fn request_update_references_its_request() {
    for v in BOTH {
        let mut p = Pair::ready(v);
        let a = p.c.s.next_request_id().unwrap();
        p.c.s.send(subscribe(a)).unwrap();
        let b = p.c.s.next_request_id().unwrap();
        let up = Message::RequestUpdate(RequestUpdate {
            request_id: b,
            existing_request_id: a,
            ..Default::default()
        });
        p.c.s.send(up.clone()).unwrap();
        p.pump(Split::Whole);
        // draft-14's SUBSCRIBE_UPDATE (§9.10) repeats the subscription's whole state, which the
        // session completes from the SUBSCRIBE.
        let up = match (v, &up, subscribe(a)) {
            (Version::Draft14, Message::RequestUpdate(u), Message::Subscribe(s)) => {
                Message::RequestUpdate(RequestUpdate { params: s.params, ..u.clone() })
            }
            _ => up,
        };
        assert_eq!(p.s.events, vec![Event::Message(subscribe(a)), Event::Message(up)], "{v:?}");
    }
}

#[test]
fn stop_sending_on_a_request_stream_cancels_it() {
    for v in STREAMED {
        let mut p = Pair::ready(v);
        let id = p.c.s.next_request_id().unwrap();
        p.c.s.send(subscribe(id)).unwrap();
        p.pump(Split::Whole);
        p.c.s.on_stop_sending(StreamId(0), 0x1);
        assert_eq!(drain(&mut p.c.s), vec![Event::Cancelled { request_id: id }]);
        let t: Vec<Transmit> = std::iter::from_fn(|| p.c.s.poll_transmit()).collect();
        assert_eq!(
            t,
            vec![
                Transmit::Reset { id: StreamId(0), code: 1 },
                Transmit::StopSending { id: StreamId(0), code: 1 }
            ]
        );
    }
}

#[test]
fn path_from_a_server_is_invalid_path() {
    for v in BOTH {
        let mut c = Session::new(v, Role::Client, SessionConfig::default(), SetupOptions::default());
        let opts = SetupOptions {
            path: Some(Bytes::from_static(b"/x")),
            max_request_id: None,
            ..Default::default()
        };
        let mut bytes = Vec::new();
        // Written by hand through the client-side encoder of the same option set.
        v.encode_message(&server_setup(v, opts), &mut bytes).unwrap();
        c.on_stream_data(StreamId(if v.request_streams() { 3 } else { 0 }), &bytes, false);
        assert_eq!(closed_with(&drain(&mut c)), Some(SessionCode::InvalidPath.code()), "{v:?}");
    }
}

#[test]
fn streams_fin_inside_a_message_and_duplicate_update_id() {
    for v in STREAMED {
        let mut s = raw_server(v);
        let bytes = encode(v, &subscribe(RequestId(0)));
        s.on_stream_data(StreamId(0), &bytes[..bytes.len() - 1], true);
        assert_eq!(closed_with(&drain(&mut s)), Some(SessionCode::ProtocolViolation.code()));
        let mut s = raw_server(v);
        raw_request(&mut s, v, 0, &subscribe(RequestId(0)));
        let up = Message::RequestUpdate(RequestUpdate {
            request_id: RequestId(0),
            existing_request_id: RequestId(0),
            ..Default::default()
        });
        s.on_stream_data(StreamId(0), &encode(v, &up), false);
        assert_eq!(closed_with(&drain(&mut s)), Some(SessionCode::InvalidRequestId.code()));
    }
}

#[test]
fn late_bytes_on_a_cancelled_stream_are_ignored() {
    for v in STREAMED {
        let mut s = raw_server(v);
        raw_request(&mut s, v, 0, &subscribe(RequestId(0)));
        s.on_stream_reset(StreamId(0), 0x1);
        assert_eq!(drain(&mut s).last(), Some(&Event::Cancelled { request_id: RequestId(0) }));
        // A REQUEST_UPDATE that was in flight when the stream was cancelled.
        let up = Message::RequestUpdate(RequestUpdate {
            request_id: RequestId(2),
            existing_request_id: RequestId(0),
            ..Default::default()
        });
        s.on_stream_data(StreamId(0), &encode(v, &up), false);
        assert!(drain(&mut s).is_empty());
        assert!(!s.is_closed());
        raw_request(&mut s, v, 4, &subscribe(RequestId(2)));
        assert_eq!(drain(&mut s), vec![Event::Message(subscribe(RequestId(2)))]);
    }
}

proptest! {
    #[test]
    fn garbage_on_the_control_stream_never_panics(
        data in proptest::collection::vec(any::<u8>(), 0..512),
        cut in 0usize..512,
        which in 0usize..5,
        with_setup in any::<bool>(),
    ) {
        let v = BOTH[which];
        let mut s = Session::new(v, Role::Server, SessionConfig::default(), SetupOptions::default());
        let control = if v.request_streams() { 2 } else { 0 };
        let mut bytes = Vec::new();
        if with_setup {
            bytes = encode(v, &client_setup(v, SetupOptions::default()));
        }
        bytes.extend_from_slice(&data);
        let cut = cut.min(bytes.len());
        s.on_stream_data(StreamId(control), &bytes[..cut], false);
        s.on_stream_data(StreamId(control), &bytes[cut..], false);
        s.on_stream_data(StreamId(4), &data, true);
        s.on_stream_reset(StreamId(8), 0);
        let events = drain(&mut s);
        prop_assert_eq!(s.is_closed(), closed_with(&events).is_some());
        while s.poll_transmit().is_some() {}
    }
}

fn publish(id: RequestId) -> Message {
    Message::Publish(Publish {
        request_id: id,
        track: FullTrackName {
            namespace: TrackNamespace::from_strs(&["live"]),
            name: Bytes::from_static(b"v"),
        },
        track_alias: TrackAlias(7),
        params: Parameters::default(),
        track_properties: Default::default(),
    })
}

/// draft-22 §9.5 (draft-18 §10.9): REQUEST_UPDATE comes from the sender of a request, or from
/// the subscriber of a PUBLISH. On a PUBLISH stream both sides may send it (the relay switching
/// a publisher's Forward State; the publisher renewing its token); on a SUBSCRIBE stream, the
/// publisher (its receiver) updating it is a protocol violation.
#[test]
fn streams_request_update_on_a_publish_comes_from_either_side() {
    for v in STREAMED {
        let mut p = Pair::ready(v);
        let a = p.c.s.next_request_id().unwrap();
        p.c.s.send(publish(a)).unwrap();
        p.pump(Split::Whole);
        assert_eq!(p.s.events, vec![Event::Message(publish(a))]);
        let b = p.s.s.next_request_id().unwrap();
        let params = Parameters { forward: Some(true), ..Default::default() };
        let up = Message::RequestUpdate(RequestUpdate { request_id: b, existing_request_id: a, params });
        p.s.s.send(up.clone()).unwrap();
        p.pump(Split::Whole);
        assert_eq!(p.c.events, vec![Event::Message(up)]);
        // The publisher updates its own PUBLISH.
        let c = p.c.s.next_request_id().unwrap();
        let own = Message::RequestUpdate(RequestUpdate {
            request_id: c,
            existing_request_id: a,
            ..Default::default()
        });
        p.c.s.send(own.clone()).unwrap();
        p.pump(Split::Whole);
        assert_eq!(p.s.events.last(), Some(&Event::Message(own)), "{v:?}");
        assert!(!p.c.s.is_closed() && !p.s.s.is_closed());

        // The receiver of a SUBSCRIBE may not update it.
        let mut p = Pair::ready(v);
        let a = p.c.s.next_request_id().unwrap();
        p.c.s.send(subscribe(a)).unwrap();
        p.pump(Split::Whole);
        let b = p.s.s.next_request_id().unwrap();
        let up = Message::RequestUpdate(RequestUpdate {
            request_id: b,
            existing_request_id: a,
            ..Default::default()
        });
        p.s.s.send(up).unwrap();
        p.pump(Split::Whole);
        assert_eq!(closed_with(&p.c.events), Some(SessionCode::ProtocolViolation.code()), "{v:?}");
    }
}

/// draft-22 §3.3.2: PUBLISH_NAMESPACE is withdrawn by cancelling its request stream; the
/// receiver sees the cancellation.
#[test]
fn streams_publish_namespace_done_cancels_the_request() {
    for v in STREAMED {
        let mut p = Pair::ready(v);
        let a = p.c.s.next_request_id().unwrap();
        let ns = Message::PublishNamespace(PublishNamespace {
            request_id: a,
            namespace: TrackNamespace::from_strs(&["live"]),
            params: Parameters::default(),
        });
        p.c.s.send(ns).unwrap();
        p.pump(Split::Whole);
        p.c.s.send(Message::PublishNamespaceDone(a)).unwrap();
        p.pump(Split::Whole);
        assert_eq!(p.s.events.last(), Some(&Event::Cancelled { request_id: a }));
    }
}

/// draft-18 §10.4: the control-stream GOAWAY names the smallest peer Request ID not processed
/// (here after the client's requests 0 and 2: 4), and one of the wrong parity for its receiver
/// is INVALID_REQUEST_ID.
#[test]
fn draft18_goaway_names_the_first_unprocessed_request() {
    let v = Version::Draft18;
    let mut p = Pair::ready(v);
    for _ in 0..2 {
        let id = p.c.s.next_request_id().unwrap();
        p.c.s.send(subscribe(id)).unwrap();
    }
    p.pump(Split::Whole);
    p.c.events.clear();
    p.s.s.go_away(GoAway { timeout_ms: 500, ..GoAway::default() }).unwrap();
    p.pump(Split::Whole);
    let expected = GoAway { timeout_ms: 500, request_id: Some(RequestId(4)), ..GoAway::default() };
    assert_eq!(p.c.events, vec![Event::Message(Message::GoAway(expected))]);
    // A client's GOAWAY names a server Request ID: odd, 1 when none was used.
    p.c.s.go_away(GoAway::default()).unwrap();
    p.pump(Split::Whole);
    let expected = GoAway { request_id: Some(RequestId(1)), ..GoAway::default() };
    assert_eq!(p.s.events.last(), Some(&Event::Message(Message::GoAway(expected))));
    // An even Request ID from the client is of the server's peer's parity.
    let mut s = raw_server(v);
    let bad = GoAway { request_id: Some(RequestId(2)), ..GoAway::default() };
    s.on_stream_data(StreamId(2), &encode(v, &Message::GoAway(bad)), false);
    assert_eq!(closed_with(&drain(&mut s)), Some(SessionCode::InvalidRequestId.code()));
}

/// Every request a peer makes consumes its Request ID, accepted or not (draft-16 "Request
/// ID"; draft-22 §6.4.2.1): a relay that sends SUBSCRIBE_NAMESPACE (Request ID 1) to every
/// client at connect, then PUBLISH_NAMESPACE (3) and SUBSCRIBE (5), is answered and kept, at
/// every draft, whether the client refuses, ignores or accepts them.
#[test]
fn requests_from_the_server_consume_their_ids_whatever_the_answer() {
    for v in BOTH {
        let mut p = Pair::ready(v);
        let sn = p.s.s.next_request_id().unwrap();
        // draft-14 §9.28: a prefix has 1 to 32 fields; the empty prefix cannot be written.
        let mut prefix = TrackNamespace::from_strs::<&str>(&[]);
        if v == Version::Draft14 {
            let sn = SubscribeNamespace { request_id: sn, prefix: prefix.clone(), ..Default::default() };
            assert!(matches!(p.s.s.send(Message::SubscribeNamespace(sn)), Err(SessionError::Encode(_))));
            prefix = TrackNamespace::from_strs(&["live"]);
        }
        p.s.s
            .send(Message::SubscribeNamespace(SubscribeNamespace {
                request_id: sn,
                prefix,
                ..Default::default()
            }))
            .unwrap();
        p.pump(Split::Whole);
        assert!(!p.c.s.is_closed(), "{v:?}: {:?}", p.c.events);
        // The client refuses it.
        let refuse = Message::RequestError(wire::model::RequestError {
            request_id: sn,
            error_code: 0x3,
            retry_interval: 0,
            reason: Bytes::from_static(b"not supported"),
            redirect: None,
        });
        p.c.s.send(refuse).unwrap();
        let pn = p.s.s.next_request_id().unwrap();
        assert_eq!(pn.0, sn.0 + 2);
        p.s.s
            .send(Message::PublishNamespace(wire::model::PublishNamespace {
                request_id: pn,
                namespace: TrackNamespace::from_strs(&["x"]),
                ..Default::default()
            }))
            .unwrap();
        let sub = p.s.s.next_request_id().unwrap();
        p.s.s.send(subscribe(sub)).unwrap();
        p.pump(Split::Whole);
        assert!(!p.c.s.is_closed() && !p.s.s.is_closed(), "{v:?}: {:?} / {:?}", p.c.events, p.s.events);
        let got: Vec<Option<RequestId>> =
            p.c.events
                .iter()
                .filter_map(|e| match e {
                    Event::Message(Message::SubscribeNamespace(m)) => Some(Some(m.request_id)),
                    Event::Message(Message::PublishNamespace(m)) => Some(Some(m.request_id)),
                    Event::Message(Message::Subscribe(m)) => Some(Some(m.request_id)),
                    _ => None,
                })
                .collect();
        assert_eq!(got, vec![Some(sn), Some(pn), Some(sub)], "{v:?}");
    }
}

/// Requests on different streams may arrive in any order (QUIC orders bytes within a stream
/// only): a draft-16 server's SUBSCRIBE_NAMESPACE (Request ID 1, on its own bidirectional
/// stream) that arrives after its PUBLISH_NAMESPACE (3, on the control stream) is not "out of
/// sequence"; both are delivered. Within one stream the order still holds, and an ID used
/// twice still closes the session with INVALID_REQUEST_ID. Same in draft-22.
#[test]
fn requests_on_other_streams_may_arrive_out_of_order() {
    for v in BOTH {
        let mut p = Pair::ready(v);
        let sn = p.s.s.next_request_id().unwrap();
        p.s.s
            .send(Message::SubscribeNamespace(SubscribeNamespace {
                request_id: sn,
                prefix: TrackNamespace::from_strs(&["a"]),
                ..Default::default()
            }))
            .unwrap();
        let pn = p.s.s.next_request_id().unwrap();
        p.s.s
            .send(Message::PublishNamespace(wire::model::PublishNamespace {
                request_id: pn,
                namespace: TrackNamespace::from_strs(&["x"]),
                ..Default::default()
            }))
            .unwrap();
        let sent: Vec<Transmit> = std::iter::from_fn(|| p.s.s.poll_transmit()).collect();
        if v == Version::Draft14 {
            // draft-14 §9.28: both go on the control stream, whose order QUIC keeps: there
            // are no other streams to arrive out of order.
            assert!(sent.iter().all(|t| matches!(t, Transmit::Stream { id: StreamId(0), .. })));
            continue;
        }
        for t in sent.iter().rev() {
            deliver(&mut p.c.s, t, Split::Whole);
        }
        let events = drain(&mut p.c.s);
        assert_eq!(closed_with(&events), None, "{v:?}: {events:?}");
        let ids: Vec<RequestId> = events
            .iter()
            .filter_map(|e| match e {
                Event::Message(Message::SubscribeNamespace(m)) => Some(m.request_id),
                Event::Message(Message::PublishNamespace(m)) => Some(m.request_id),
                _ => None,
            })
            .collect();
        assert_eq!(ids, vec![pn, sn], "{v:?}");
        // draft-16: the same ID again on the control stream is still refused.
        if v == Version::Draft16 {
            let again = Message::PublishNamespace(wire::model::PublishNamespace {
                request_id: pn,
                namespace: TrackNamespace::from_strs(&["y"]),
                ..Default::default()
            });
            p.c.s.on_stream_data(StreamId(0), &encode(v, &again), false);
            assert_eq!(closed_with(&drain(&mut p.c.s)), Some(0x4), "INVALID_REQUEST_ID");
        }
    }
}

/// draft-18 §10.4: once a session sent its GOAWAY, a request the peer opens is refused with
/// REQUEST_ERROR GOING_AWAY (0x6) by the session itself; the application never sees it. A
/// draft-22 session passes it on (the relay decides).
#[test]
fn draft18_requests_after_our_goaway_are_going_away() {
    for v in STREAMED {
        let mut p = Pair::ready(v);
        p.s.s.go_away(GoAway::default()).unwrap();
        p.pump(Split::Whole);
        p.c.events.clear();
        let id = p.c.s.next_request_id().unwrap();
        p.c.s.send(subscribe(id)).unwrap();
        p.pump(Split::Whole);
        if v == Version::Draft18 {
            assert!(p.s.events.is_empty(), "{:?}", p.s.events);
            let [Event::Message(Message::RequestError(e))] = p.c.events.as_slice() else {
                panic!("{:?}", p.c.events)
            };
            assert_eq!((e.request_id, e.error_code), (id, 0x6));
        } else {
            assert_eq!(p.s.events, vec![Event::Message(subscribe(id))]);
        }
        assert!(!p.c.s.is_closed() && !p.s.s.is_closed(), "{v:?}");
    }
}

/// draft-16 §9.11: a REQUEST_UPDATE's Existing Request ID must name a request the sender may
/// update: its own request (a SUBSCRIBE: fine; a REQUEST_UPDATE: PROTOCOL_VIOLATION), or a
/// PUBLISH of the receiver's (fine), never another request of the receiver's
/// (PROTOCOL_VIOLATION). A never-issued ID is a PROTOCOL_VIOLATION too; a request that merely
/// ended is the application's to answer.
#[test]
fn draft16_request_update_names_a_request_its_sender_may_update() {
    let v = Version::Draft16;
    let update = |request_id, existing_request_id| {
        Message::RequestUpdate(RequestUpdate { request_id, existing_request_id, ..Default::default() })
    };
    // Its own SUBSCRIBE, then its own REQUEST_UPDATE.
    let mut p = Pair::ready(v);
    let a = p.c.s.next_request_id().unwrap();
    p.c.s.send(subscribe(a)).unwrap();
    let b = p.c.s.next_request_id().unwrap();
    p.c.s.send(update(b, a)).unwrap();
    p.pump(Split::Whole);
    assert_eq!(closed_with(&p.s.events), None, "{:?}", p.s.events);
    let c = p.c.s.next_request_id().unwrap();
    p.c.s.send(update(c, b)).unwrap();
    p.pump(Split::Whole);
    assert_eq!(closed_with(&p.s.events), Some(SessionCode::ProtocolViolation.code()), "names an update");

    // The server's PUBLISH: its receiver may update it; the server's SUBSCRIBE: not.
    let mut p = Pair::ready(v);
    let pb = p.s.s.next_request_id().unwrap();
    p.s.s.send(publish(pb)).unwrap();
    let sb = p.s.s.next_request_id().unwrap();
    p.s.s.send(subscribe(sb)).unwrap();
    p.pump(Split::Whole);
    let a = p.c.s.next_request_id().unwrap();
    p.c.s.send(update(a, pb)).unwrap();
    p.pump(Split::Whole);
    assert_eq!(closed_with(&p.s.events), None, "the receiver of a PUBLISH: {:?}", p.s.events);
    let b = p.c.s.next_request_id().unwrap();
    p.c.s.send(update(b, sb)).unwrap();
    p.pump(Split::Whole);
    assert_eq!(
        closed_with(&p.s.events),
        Some(SessionCode::ProtocolViolation.code()),
        "the server's SUBSCRIBE"
    );
}

/// A second PUBLISH of the same track with the same Track Alias on one session (a publisher
/// switching over on its session) takes the alias over; DUPLICATE_TRACK_ALIAS is for an alias
/// reused by a different track (draft-22 §3.1.3, draft-16 "Track Alias").
#[test]
fn a_second_publish_of_the_same_track_may_reuse_its_alias() {
    for v in BOTH {
        let mut p = Pair::ready(v);
        let a = p.c.s.next_request_id().unwrap();
        p.c.s.send(publish(a)).unwrap();
        let b = p.c.s.next_request_id().unwrap();
        p.c.s.send(publish(b)).unwrap();
        p.pump(Split::Whole);
        assert_eq!(closed_with(&p.s.events), None, "{v:?}: {:?}", p.s.events);
        assert_eq!(p.s.s.peer_track_alias(TrackAlias(7)), Some(b), "{v:?}: the alias is the new PUBLISH's");

        let c = p.c.s.next_request_id().unwrap();
        let mut other = publish(c);
        if let Message::Publish(m) = &mut other {
            m.track.name = Bytes::from_static(b"another");
        }
        p.c.s.send(other).unwrap();
        p.pump(Split::Whole);
        assert_eq!(closed_with(&p.s.events), Some(SessionCode::DuplicateTrackAlias.code()), "{v:?}");
    }
}

/// draft-16: MAX_REQUEST_ID slides as the client goes, so a long session is not limited to
/// `max_requests` requests in all: with a window of 2, the client makes 20 requests, each once
/// the previous answer went both ways, and is never blocked.
#[test]
fn draft16_request_window_slides() {
    let v = Version::Draft16;
    let sc = SessionConfig { max_requests: 2, ..Default::default() };
    let mut p = Pair::with(v, SessionConfig::default(), sc);
    p.pump(Split::Whole);
    for _ in 0..20 {
        let rid = p.c.s.next_request_id().expect("not blocked");
        p.c.s.send(subscribe(rid)).unwrap();
        p.pump(Split::Whole);
    }
    assert!(!p.s.s.is_closed() && !p.c.s.is_closed());
    assert_eq!(p.s.events.iter().filter(|e| matches!(e, Event::Message(Message::Subscribe(_)))).count(), 20);
    assert!(!p.s.events.iter().any(|e| matches!(e, Event::Message(Message::RequestsBlocked(_)))));
}
