//! draft-14 sessions back to back: what only draft-14 does, checked on the wire (version
//! negotiation §9.3.1, per-kind answers §9.9-§9.30, SUBSCRIBE_UPDATE §9.10, namespace-named
//! PUBLISH_NAMESPACE_DONE / _CANCEL / UNSUBSCRIBE_NAMESPACE §9.26, §9.27, §9.31, discovery by
//! PUBLISH_NAMESPACE §9.28, explicit publisher priority §10).
#![allow(clippy::unwrap_used)]

mod support;

use bytes::Bytes;
use session::{DataObject, Event, Session, SessionCode, SessionConfig, StreamId, Transmit};
use support::session::{deliver, Split};
use wire::model::{
    DecodeContext, FullTrackName, Location, LocationFilter, Message, ObjectStatus, Parameters,
    PublishNamespace, PublishNamespaceCancel, RequestId, RequestOk, RequestUpdate, Role, Setup, SetupOptions,
    SubgroupHeader, SubgroupId, SubgroupObject, Subscribe, SubscribeNamespace, SubscribeOk, TrackAlias,
    TrackNamespace,
};
use wire::{RequestErrorCode, Version};

const V: Version = Version::Draft14;
const VERSION: u64 = 0xff00_000e;
const VERSION_NEGOTIATION_FAILED: u64 = 0x15;

struct Pair {
    c: Session,
    s: Session,
    ce: Vec<Event>,
    se: Vec<Event>,
    /// Control stream bytes each side wrote since the last `take`.
    c_wire: Vec<u8>,
    s_wire: Vec<u8>,
    s_sent: Vec<Transmit>,
}

impl Pair {
    fn new() -> Pair {
        let mut p = Pair {
            c: Session::new(V, Role::Client, SessionConfig::default(), SetupOptions::default()),
            s: Session::new(V, Role::Server, SessionConfig::default(), SetupOptions::default()),
            ce: Vec::new(),
            se: Vec::new(),
            c_wire: Vec::new(),
            s_wire: Vec::new(),
            s_sent: Vec::new(),
        };
        p.pump();
        p
    }

    fn ready() -> Pair {
        let mut p = Pair::new();
        assert!(p.c.is_ready() && p.s.is_ready());
        p.take();
        p
    }

    fn pump(&mut self) {
        loop {
            let mut moved = false;
            while let Some(t) = self.c.poll_transmit() {
                if let Transmit::Stream { id: StreamId(0), data, .. } = &t {
                    self.c_wire.extend_from_slice(data);
                }
                deliver(&mut self.s, &t, Split::Whole);
                moved = true;
            }
            while let Some(t) = self.s.poll_transmit() {
                if let Transmit::Stream { id: StreamId(0), data, .. } = &t {
                    self.s_wire.extend_from_slice(data);
                }
                deliver(&mut self.c, &t, Split::Whole);
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

    fn take(&mut self) {
        self.ce.clear();
        self.se.clear();
        self.c_wire.clear();
        self.s_wire.clear();
        self.s_sent.clear();
    }
}

/// The Message Type of each draft-14 control message in `wire` (all below 64: one byte).
fn types(mut wire: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while wire.len() >= 3 {
        let len = usize::from(u16::from_be_bytes([wire[1], wire[2]]));
        out.push(wire[0]);
        wire = &wire[(3 + len).min(wire.len())..];
    }
    out
}

/// The control messages in `wire`, decoded as sent by `sender`.
fn messages(mut wire: &[u8], sender: Role) -> Vec<Message> {
    let mut out = Vec::new();
    while !wire.is_empty() {
        let (m, n) = V.decode_message(wire, &DecodeContext::control(sender)).unwrap();
        out.push(m);
        wire = &wire[n..];
    }
    out
}

fn closed_with(events: &[Event]) -> Option<u64> {
    events.iter().find_map(|e| match e {
        Event::Closed { code, .. } => Some(*code),
        _ => None,
    })
}

fn track() -> FullTrackName {
    FullTrackName { namespace: TrackNamespace::from_strs(&["live"]), name: Bytes::from_static(b"video") }
}

#[test]
fn setup_negotiates_version_0xff00000e() {
    let p = Pair::new();
    assert!(p.c.is_ready() && p.s.is_ready());
    let sent = messages(&p.c_wire, Role::Client);
    let [Message::ClientSetup(cs)] = sent.as_slice() else { panic!("{sent:?}") };
    assert_eq!(cs.options.versions, vec![VERSION]);
    assert_eq!(cs.options.max_request_id, Some(200), "§9.3.2.3 MAX_REQUEST_ID as draft-16");
    let sent = messages(&p.s_wire, Role::Server);
    let [Message::ServerSetup(ss)] = sent.as_slice() else { panic!("{sent:?}") };
    assert_eq!(ss.options.selected_version, Some(VERSION));
    assert_eq!(ss.options.implementation.as_deref(), Some(&b"moq-edge"[..]));
}

#[test]
fn no_common_version_is_version_negotiation_failed() {
    // A client that offers only draft-13: the server closes with 0x15 and answers nothing.
    let mut s = Session::new(V, Role::Server, SessionConfig::default(), SetupOptions::default());
    let offer = SetupOptions { versions: vec![0xff00_000d], ..Default::default() };
    let mut bytes = Vec::new();
    V.encode_message(&Message::ClientSetup(Setup { options: offer }), &mut bytes).unwrap();
    s.on_stream_data(StreamId(0), &bytes, false);
    let events: Vec<Event> = std::iter::from_fn(|| s.poll_event()).collect();
    assert_eq!(closed_with(&events), Some(VERSION_NEGOTIATION_FAILED));
    assert!(!std::iter::from_fn(|| s.poll_transmit()).any(|t| matches!(t, Transmit::Stream { .. })));
    // A server that selects a version the client did not offer.
    let mut c = Session::new(V, Role::Client, SessionConfig::default(), SetupOptions::default());
    let chosen = SetupOptions { selected_version: Some(0xff00_000d), ..Default::default() };
    let mut bytes = Vec::new();
    V.encode_message(&Message::ServerSetup(Setup { options: chosen }), &mut bytes).unwrap();
    c.on_stream_data(StreamId(0), &bytes, false);
    let events: Vec<Event> = std::iter::from_fn(|| c.poll_event()).collect();
    assert_eq!(closed_with(&events), Some(SessionCode::VersionNegotiationFailed.code()));
}

/// §3.3: the control stream is the only bidirectional stream.
#[test]
fn a_second_bidirectional_stream_is_a_protocol_violation() {
    let mut p = Pair::ready();
    let sn = Message::SubscribeNamespace(SubscribeNamespace {
        request_id: RequestId(0),
        prefix: TrackNamespace::from_strs(&["a"]),
        options: wire::model::SubscribeOptions::Both,
        params: Parameters::default(),
    });
    let mut bytes = Vec::new();
    V.encode_message(&sn, &mut bytes).unwrap();
    p.s.on_stream_data(StreamId(4), &bytes, false);
    p.pump();
    assert_eq!(closed_with(&p.se), Some(SessionCode::ProtocolViolation.code()));
}

/// §9.10: the caller's REQUEST_UPDATE (here Forward only) goes as SUBSCRIBE_UPDATE carrying
/// the whole subscription: the Largest Object filter starts after SUBSCRIBE_OK's Largest
/// Location, priority and Forward as last set. No answer is sent or awaited.
#[test]
fn subscribe_update_repeats_the_subscription_state() {
    let mut p = Pair::ready();
    let a = p.c.next_request_id().unwrap();
    let params = Parameters {
        subscriber_priority: Some(7),
        location_filter: Some(LocationFilter::NextObject),
        ..Default::default()
    };
    p.c.send(Message::Subscribe(Subscribe { request_id: a, track: track(), params })).unwrap();
    p.pump();
    let ok = SubscribeOk {
        request_id: a,
        track_alias: TrackAlias(3),
        params: Parameters { largest_object: Some(Location::new(3, 4)), ..Default::default() },
        ..Default::default()
    };
    p.s.send(Message::SubscribeOk(ok)).unwrap();
    p.pump();
    p.take();
    let b = p.c.next_request_id().unwrap();
    let params = Parameters { forward: Some(false), ..Default::default() };
    p.c.send(Message::RequestUpdate(RequestUpdate { request_id: b, existing_request_id: a, params }))
        .unwrap();
    p.pump();
    // Type 0x2, Request ID 2, Subscription Request ID 0, Start {3, 5}, End Group 0 (open),
    // Subscriber Priority 7, Forward 0, no parameters.
    assert_eq!(p.c_wire, vec![0x02, 0x00, 0x08, 0x02, 0x00, 0x03, 0x05, 0x00, 0x07, 0x00, 0x00]);
    let [Event::Message(Message::RequestUpdate(u))] = p.se.as_slice() else { panic!("{:?}", p.se) };
    assert_eq!(u.params.location_filter, Some(LocationFilter::AbsoluteStart { start: Location::new(3, 5) }));
    // The server's answer (what it sends in the other drafts) is not written.
    p.s.send(Message::RequestOk(RequestOk { request_id: b, ..Default::default() })).unwrap();
    p.pump();
    assert!(p.s_wire.is_empty(), "{:?}", p.s_wire);
    // A second update keeps the new start and Forward, changing the priority only.
    let c = p.c.next_request_id().unwrap();
    let params = Parameters { subscriber_priority: Some(9), ..Default::default() };
    p.c.send(Message::RequestUpdate(RequestUpdate { request_id: c, existing_request_id: a, params }))
        .unwrap();
    p.pump();
    assert_eq!(&p.c_wire[11..], &[0x02, 0x00, 0x08, 0x04, 0x00, 0x03, 0x05, 0x00, 0x09, 0x00, 0x00]);
    assert!(!p.c.is_closed() && !p.s.is_closed());
}

/// §9.9-§9.30: each refusal and acceptance is the message of its request's kind, with that
/// message's error code (§13.1.2-§13.1.7), and the receiver reads the code by the kind.
#[test]
fn answers_are_the_message_of_their_request_kind() {
    let mut p = Pair::ready();
    let sub = p.c.next_request_id().unwrap();
    p.c.send(Message::Subscribe(Subscribe {
        request_id: sub,
        track: track(),
        params: Parameters::default(),
    }))
    .unwrap();
    let ns = |rid, n: &str| {
        Message::PublishNamespace(PublishNamespace {
            request_id: rid,
            namespace: TrackNamespace::from_strs(&[n]),
            params: Parameters::default(),
        })
    };
    let pn_ok = p.c.next_request_id().unwrap();
    p.c.send(ns(pn_ok, "a")).unwrap();
    let pn_err = p.c.next_request_id().unwrap();
    p.c.send(ns(pn_err, "b")).unwrap();
    p.pump();
    p.take();
    p.s.request_error(sub, RequestErrorCode::DoesNotExist, "no such track").unwrap();
    p.s.send(Message::RequestOk(RequestOk { request_id: pn_ok, ..Default::default() })).unwrap();
    p.s.request_error(pn_err, RequestErrorCode::Unauthorized, "no").unwrap();
    p.pump();
    // SUBSCRIBE_ERROR 0x5, PUBLISH_NAMESPACE_OK 0x7, PUBLISH_NAMESPACE_ERROR 0x8.
    assert_eq!(types(&p.s_wire), vec![0x05, 0x07, 0x08]);
    let errors: Vec<(RequestId, u64)> =
        p.ce.iter()
            .filter_map(|e| match e {
                Event::Message(Message::RequestError(m)) => Some((m.request_id, m.error_code)),
                _ => None,
            })
            .collect();
    assert_eq!(errors.len(), 2, "{:?}", p.ce);
    for (rid, code) in errors {
        let expected =
            if rid == sub { RequestErrorCode::DoesNotExist } else { RequestErrorCode::Unauthorized };
        assert_eq!(p.c.peer_request_error_of(rid, code), expected);
    }
    assert!(p.ce.contains(&Event::Message(Message::RequestOk(RequestOk {
        request_id: pn_ok,
        ..Default::default()
    }))));
}

/// §9.26, §9.27: PUBLISH_NAMESPACE_DONE and _CANCEL name the namespace; each side sees the
/// Request ID of the PUBLISH_NAMESPACE, as in draft-16.
#[test]
fn namespace_done_and_cancel_name_the_namespace() {
    let mut p = Pair::ready();
    let a = p.c.next_request_id().unwrap();
    let namespace = TrackNamespace::from_strs(&["live", "room"]);
    p.c.send(Message::PublishNamespace(PublishNamespace {
        request_id: a,
        namespace: namespace.clone(),
        params: Parameters::default(),
    }))
    .unwrap();
    p.pump();
    p.take();
    p.c.send(Message::PublishNamespaceDone(a)).unwrap();
    p.pump();
    assert_eq!(
        messages(&p.c_wire, Role::Client),
        vec![Message::PublishNamespaceDoneNamed(namespace.clone())]
    );
    assert_eq!(p.se, vec![Event::Message(Message::PublishNamespaceDone(a))]);
    // Again, and this time the server cancels it.
    let b = p.c.next_request_id().unwrap();
    p.c.send(Message::PublishNamespace(PublishNamespace {
        request_id: b,
        namespace: namespace.clone(),
        params: Parameters::default(),
    }))
    .unwrap();
    p.pump();
    p.take();
    let cancel =
        PublishNamespaceCancel { request_id: b, error_code: 0x1, reason: Bytes::from_static(b"bye") };
    p.s.send(Message::PublishNamespaceCancel(cancel.clone())).unwrap();
    p.pump();
    assert_eq!(types(&p.s_wire), vec![0x0C]);
    assert_eq!(p.ce, vec![Event::Message(Message::PublishNamespaceCancel(cancel))]);
    // The namespace is gone on both sides: a second DONE names nothing.
    assert!(p.c.send(Message::PublishNamespaceDone(b)).is_err());
}

/// §9.28: after SUBSCRIBE_NAMESPACE_OK, the publisher's NAMESPACE / NAMESPACE_DONE (the
/// draft-16 verbs) go as PUBLISH_NAMESPACE requests of its own and PUBLISH_NAMESPACE_DONE;
/// the subscriber's session answers PUBLISH_NAMESPACE_OK and reports NAMESPACE /
/// NAMESPACE_DONE for its SUBSCRIBE_NAMESPACE. UNSUBSCRIBE_NAMESPACE (§9.31) names the prefix.
#[test]
fn discovery_publishes_namespaces_on_the_control_stream() {
    let mut p = Pair::ready();
    let sn = p.c.next_request_id().unwrap();
    let prefix = TrackNamespace::from_strs(&["live"]);
    let msg = SubscribeNamespace { request_id: sn, prefix: prefix.clone(), ..Default::default() };
    p.c.send(Message::SubscribeNamespace(msg)).unwrap();
    p.pump();
    p.s.send(Message::RequestOk(RequestOk { request_id: sn, ..Default::default() })).unwrap();
    let suffix = TrackNamespace::from_strs(&["room"]);
    p.s.send_on(sn, Message::Namespace(suffix.clone())).unwrap();
    p.pump();
    // SUBSCRIBE_NAMESPACE_OK 0x12, then PUBLISH_NAMESPACE 0x6 with the server's Request ID 1.
    assert_eq!(types(&p.s_wire), vec![0x12, 0x06]);
    let full = TrackNamespace::from_strs(&["live", "room"]);
    let pn =
        PublishNamespace { request_id: RequestId(1), namespace: full.clone(), params: Parameters::default() };
    assert_eq!(messages(&p.s_wire, Role::Server)[1], Message::PublishNamespace(pn));
    // The client answered PUBLISH_NAMESPACE_OK 0x7 itself and reported NAMESPACE.
    assert_eq!(types(&p.c_wire)[1..], [0x07]);
    assert_eq!(
        p.ce[1..],
        [Event::RequestMessage { request_id: sn, message: Message::Namespace(suffix.clone()) }]
    );
    assert!(p.se.len() == 1, "the answer to the session's own request is not reported: {:?}", p.se);
    p.take();
    p.s.send_on(sn, Message::NamespaceDone(suffix.clone())).unwrap();
    p.pump();
    assert_eq!(messages(&p.s_wire, Role::Server), vec![Message::PublishNamespaceDoneNamed(full)]);
    assert_eq!(p.ce, vec![Event::RequestMessage { request_id: sn, message: Message::NamespaceDone(suffix) }]);
    p.take();
    p.c.cancel(sn).unwrap();
    p.pump();
    assert_eq!(messages(&p.c_wire, Role::Client), vec![Message::UnsubscribeNamespace(prefix)]);
    assert_eq!(p.se, vec![Event::Cancelled { request_id: sn }]);
    assert!(!p.c.is_closed() && !p.s.is_closed());
}

/// §10.4.2, §10.3.1: no default priority bit, so an inherited publisher priority is written
/// (128) in the SUBGROUP_HEADER.
#[test]
fn subgroup_headers_carry_the_publisher_priority() {
    let mut p = Pair::ready();
    let h = SubgroupHeader {
        track_alias: TrackAlias(1),
        group_id: 2,
        subgroup_id: SubgroupId::Explicit(0),
        publisher_priority: None,
        has_properties: false,
        end_of_group: false,
        first_object: true,
    };
    let id = p.s.open_subgroup(&h).unwrap();
    let Some(Transmit::Stream { data, .. }) = p.s.poll_transmit() else { panic!() };
    let (header, _) = V.decode_uni_stream_header(&data).unwrap();
    let wire::model::UniStreamHeader::Subgroup(got) = header else { panic!("{header:?}") };
    assert_eq!(got.publisher_priority, Some(128));
    assert!(!got.first_object);
    assert_eq!(id.0 & 3, 3, "a server unidirectional stream");
}

/// §10.2.1: Object Status 0x1 (Does Not Exist) travels on a subgroup stream and arrives as
/// an object with that status.
#[test]
fn does_not_exist_objects_are_accepted() {
    let mut p = Pair::ready();
    let a = p.c.next_request_id().unwrap();
    p.c.send(Message::Subscribe(Subscribe { request_id: a, track: track(), params: Parameters::default() }))
        .unwrap();
    p.pump();
    let ok = SubscribeOk { request_id: a, track_alias: TrackAlias(1), ..Default::default() };
    p.s.send(Message::SubscribeOk(ok)).unwrap();
    p.pump();
    p.take();
    let h = SubgroupHeader {
        track_alias: TrackAlias(1),
        group_id: 2,
        subgroup_id: SubgroupId::Explicit(0),
        publisher_priority: Some(5),
        has_properties: false,
        end_of_group: false,
        first_object: false,
    };
    let id = p.s.open_subgroup(&h).unwrap();
    let gone = SubgroupObject { object_id: 1, status: ObjectStatus::DoesNotExist, ..Default::default() };
    p.s.send_object(id, &gone, Bytes::new()).unwrap();
    p.pump();
    let [Event::Object { request_id, object: DataObject::Subgroup { object, .. }, .. }] = p.ce.as_slice()
    else {
        panic!("{:?}", p.ce)
    };
    assert_eq!((*request_id, object.status), (a, ObjectStatus::DoesNotExist));
}
