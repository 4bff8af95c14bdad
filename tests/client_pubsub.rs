//! The client's publisher and subscriber state machines ([`PublisherCore`], [`SubscriberCore`])
//! against each other through two sessions back to back, no QUIC, every draft: the publisher
//! is the client (as towards a relay), the subscriber the server. Each pump delivers every
//! transmit and hands every event to its state machine until both sides are quiet.
#![allow(clippy::unwrap_used)]

mod support;

use bytes::Bytes;
use moq_edge::client::codes::{publish_done, request_error};
use moq_edge::client::{Ended, Origin, PublisherCore, Received, RequestState, SessionCore, SubscriberCore};
use moq_edge::session::{Session, SessionConfig};
use moq_edge::wire::model::{
    FullTrackName, Location, LocationFilter, Parameters, RequestId, Role, SetupOptions, TrackNamespace,
};
use moq_edge::wire::Version;
use support::session::{deliver, Split};

const DRAFTS: [Version; 5] = Version::ALL;
/// Stream reset code CANCELLED (every draft).
const CANCELLED: u64 = 0x1;

struct Pair {
    /// The publisher's session (client role) and state machine.
    p: Session,
    pc: PublisherCore,
    /// The subscriber's session (server role) and state machine.
    s: Session,
    sc: SubscriberCore,
    split: Split,
}

impl Pair {
    fn new(v: Version, split: Split) -> Pair {
        let mut pair = Pair {
            p: Session::new(v, Role::Client, SessionConfig::default(), SetupOptions::default()),
            pc: PublisherCore::new(),
            s: Session::new(v, Role::Server, SessionConfig::default(), SetupOptions::default()),
            sc: SubscriberCore::new(),
            split,
        };
        pair.pump();
        assert!(pair.p.is_ready() && pair.s.is_ready(), "{v:?}: SETUP");
        pair
    }

    fn pump(&mut self) {
        loop {
            let mut moved = false;
            while let Some(t) = self.p.poll_transmit() {
                deliver(&mut self.s, &t, self.split);
                moved = true;
            }
            while let Some(t) = self.s.poll_transmit() {
                deliver(&mut self.p, &t, self.split);
                moved = true;
            }
            while let Some(e) = self.p.poll_event() {
                self.pc.on_event(&mut self.p, e);
                moved = true;
            }
            while let Some(e) = self.s.poll_event() {
                self.sc.on_event(&mut self.s, e);
                moved = true;
            }
            if !moved {
                break;
            }
        }
        assert_eq!(self.pc.closed(), None, "publisher session closed");
        assert_eq!(self.sc.closed(), None, "subscriber session closed");
    }

    fn announce(&mut self, ns: &TrackNamespace) -> RequestId {
        let rid = self.pc.announce(&mut self.p, ns.clone()).unwrap();
        assert_eq!(self.pc.announcement(rid), Some(&RequestState::Pending));
        self.pump();
        assert_eq!(self.pc.announcement(rid), Some(&RequestState::Accepted));
        rid
    }

    fn subscribe(&mut self, track: &FullTrackName, filter: Option<LocationFilter>) -> RequestId {
        let rid = self.sc.subscribe(&mut self.s, track.clone(), filter).unwrap();
        self.pump();
        rid
    }

    fn send_group(&mut self, track: &FullTrackName, group: u64, objects: &[Bytes]) -> usize {
        let n = self.pc.send_group(&mut self.p, track, group, objects).unwrap();
        self.pump();
        n
    }
}

fn namespace() -> TrackNamespace {
    TrackNamespace::from_strs(&["live", "room1"])
}

fn track(name: &'static str) -> FullTrackName {
    FullTrackName { namespace: namespace(), name: Bytes::from_static(name.as_bytes()) }
}

/// Objects with distinct contents and sizes (one empty, one larger than a typical packet).
fn payloads(group: u64) -> Vec<Bytes> {
    vec![
        Bytes::from(format!("group {group} object 0")),
        Bytes::new(),
        Bytes::from((0..3000u32).map(|i| (i as u64 * 7 + group) as u8).collect::<Vec<u8>>()),
        Bytes::from_static(b"last"),
    ]
}

fn expected(group: u64, objects: &[Bytes], via_datagram: bool) -> Vec<Received> {
    objects
        .iter()
        .enumerate()
        .map(|(i, payload)| Received {
            group,
            subgroup: 0,
            object: i as u64,
            payload: payload.clone(),
            via_datagram,
        })
        .collect()
}

/// announce → SUBSCRIBE → SUBSCRIBE_OK (LARGEST_OBJECT of what was sent before) → two groups
/// on subgroup streams and one as datagrams arrive byte-exact in order → PUBLISH_DONE.
#[test]
fn announce_subscribe_objects_and_publish_done() {
    for v in DRAFTS {
        for split in [Split::Whole, Split::Bytes] {
            let mut pair = Pair::new(v, split);
            let video = track("video");
            pair.pc.add_track(video.clone());
            let ns_rid = pair.announce(&namespace());
            assert_eq!(pair.sc.namespaces().collect::<Vec<_>>(), vec![(ns_rid, &namespace())]);

            // Sent before anyone subscribed: nobody receives it, but it sets LARGEST_OBJECT.
            assert_eq!(pair.send_group(&video, 0, &payloads(0)), 0);
            assert_eq!(pair.pc.largest(&video), Some(Location::new(0, 3)));

            let rid = pair.subscribe(&video, Some(LocationFilter::NextObject));
            let sub = pair.sc.subscription(rid).unwrap();
            assert_eq!(sub.state, RequestState::Accepted, "{v:?}");
            assert_eq!(sub.largest, Some(Location::new(0, 3)), "{v:?}: LARGEST_OBJECT");
            let alias = sub.track_alias.unwrap();
            let delivery = pair.pc.subscription(rid).unwrap();
            assert_eq!((delivery.alias, delivery.origin), (alias, Origin::Subscribe));
            assert_eq!(pair.pc.active(&video), 1);

            assert_eq!(pair.send_group(&video, 1, &payloads(1)), 1);
            assert_eq!(pair.send_group(&video, 2, &payloads(2)), 1);
            let sent = pair.pc.send_datagrams(&mut pair.p, &video, 3, &payloads(3)[..2]).unwrap();
            assert_eq!(sent, 2);
            pair.pump();

            let mut want = expected(1, &payloads(1), false);
            want.extend(expected(2, &payloads(2), false));
            want.extend(expected(3, &payloads(3)[..2], true));
            let sub = pair.sc.subscription(rid).unwrap();
            assert_eq!(sub.received, want, "{v:?} {split:?}");
            assert_eq!((sub.streams_finished, sub.resets.len()), (2, 0));
            assert!(sub.done.is_none());

            assert_eq!(pair.pc.done(&mut pair.p, &video, publish_done::TRACK_ENDED, "bye").unwrap(), 1);
            pair.pump();
            let done = pair.sc.subscription(rid).unwrap().done.clone().unwrap();
            assert_eq!(done.status, publish_done::TRACK_ENDED);
            assert_eq!(done.stream_count, 2);
            assert_eq!(&done.reason[..], b"bye");
            assert_eq!(pair.pc.ended(rid), Some(&Ended::Done { status: publish_done::TRACK_ENDED }));
            assert!(pair.pc.subscription(rid).is_none());
            assert_eq!(pair.sc.stray_objects(), 0);
        }
    }
}

/// A group sent object by object (begin / send / end) arrives the same way.
#[test]
fn streamed_group_arrives_in_order() {
    for v in DRAFTS {
        let mut pair = Pair::new(v, Split::Whole);
        let video = track("video");
        pair.pc.add_track(video.clone());
        pair.announce(&namespace());
        let rid = pair.subscribe(&video, None);
        assert_eq!(pair.pc.begin_group(&mut pair.p, &video, 7).unwrap(), 1);
        for (i, payload) in payloads(7).into_iter().enumerate() {
            let at = pair.pc.send_object(&mut pair.p, &video, payload).unwrap();
            assert_eq!(at, Location::new(7, i as u64));
            pair.pump();
            assert_eq!(pair.sc.received(rid).len(), i + 1, "{v:?}: object {i} arrives before the group ends");
        }
        pair.pc.end_group(&mut pair.p, &video).unwrap();
        pair.pump();
        assert_eq!(pair.sc.received(rid), &expected(7, &payloads(7), false)[..], "{v:?}");
        assert_eq!(pair.sc.subscription(rid).unwrap().streams_finished, 1);
    }
}

/// A subscription that begins while a group is in progress is given that group from its start
/// (`join_group`) and then its later objects, each once and in order; a subscription that
/// does not admit the group's start (Largest Object: after what was sent), or already has the
/// group, is left alone.
#[test]
fn a_subscription_begun_mid_group_joins_it_from_its_start() {
    for v in DRAFTS {
        let mut pair = Pair::new(v, Split::Whole);
        let video = track("video");
        pair.pc.add_track(video.clone());
        pair.announce(&namespace());
        let objects = payloads(5);
        pair.pc.begin_group(&mut pair.p, &video, 5).unwrap();
        for payload in &objects[..2] {
            pair.pc.send_object(&mut pair.p, &video, payload.clone()).unwrap();
        }
        let rid = pair.subscribe(&video, None);
        let next = pair.subscribe(&video, Some(LocationFilter::NextObject));
        assert!(pair.pc.join_group(&mut pair.p, rid, &objects[..2]).unwrap(), "{v:?}");
        assert!(!pair.pc.join_group(&mut pair.p, rid, &objects[..2]).unwrap(), "{v:?}: once");
        assert!(!pair.pc.join_group(&mut pair.p, next, &objects[..2]).unwrap(), "{v:?}: after the largest");
        for payload in &objects[2..] {
            pair.pc.send_object(&mut pair.p, &video, payload.clone()).unwrap();
        }
        pair.pc.end_group(&mut pair.p, &video).unwrap();
        pair.pump();
        assert_eq!(pair.sc.received(rid), &expected(5, &objects, false)[..], "{v:?}");
        let later: Vec<u64> = pair.sc.received(next).iter().map(|r| r.object).collect();
        assert!(
            later.is_empty(),
            "{v:?}: a Largest Object subscriber gets the next group, not this one: {later:?}"
        );
    }
}

/// A track the publisher does not have, in an announced namespace or not, is refused with
/// DOES_NOT_EXIST (0x10 in every draft); the refusal leaves the session usable.
#[test]
fn unknown_track_is_refused_with_does_not_exist() {
    for v in DRAFTS {
        let mut pair = Pair::new(v, Split::Whole);
        pair.pc.add_track(track("video"));
        pair.announce(&namespace());
        let other = FullTrackName {
            namespace: TrackNamespace::from_strs(&["elsewhere"]),
            name: Bytes::from_static(b"x"),
        };
        for t in [track("audio"), other] {
            let rid = pair.subscribe(&t, None);
            match &pair.sc.subscription(rid).unwrap().state {
                RequestState::Refused { code, reason } => {
                    assert_eq!(*code, request_error::DOES_NOT_EXIST, "{v:?}");
                    assert!(!reason.is_empty());
                }
                other => panic!("{v:?}: expected a refusal, got {other:?}"),
            }
            assert!(pair.pc.subscription(rid).is_none());
        }
        // The known track still works afterwards.
        let rid = pair.subscribe(&track("video"), None);
        assert_eq!(pair.sc.subscription(rid).unwrap().state, RequestState::Accepted, "{v:?}");
    }
}

/// SUBSCRIBE with FORWARD=0: nothing is sent while paused; REQUEST_UPDATE FORWARD=1 is
/// answered with REQUEST_OK (with LARGEST_OBJECT) and delivery resumes; FORWARD=0 pauses again.
#[test]
fn subscription_paused_and_resumed_by_request_update() {
    for v in DRAFTS {
        let mut pair = Pair::new(v, Split::Whole);
        let video = track("video");
        pair.pc.add_track(video.clone());
        let params = Parameters { forward: Some(false), ..Parameters::default() };
        let rid = pair.sc.subscribe_with(&mut pair.s, video.clone(), params).unwrap();
        pair.pump();
        assert_eq!(pair.sc.subscription(rid).unwrap().state, RequestState::Accepted);
        assert!(!pair.pc.subscription(rid).unwrap().forward);
        assert_eq!(pair.send_group(&video, 0, &payloads(0)), 0, "{v:?}: paused");
        assert!(pair.sc.received(rid).is_empty());

        let up = pair.sc.update_forward(&mut pair.s, rid, true).unwrap();
        pair.pump();
        assert_eq!(pair.sc.update(up), Some(&RequestState::Accepted), "{v:?}: REQUEST_OK");
        assert_eq!(pair.send_group(&video, 1, &payloads(1)), 1, "{v:?}: resumed");
        assert_eq!(pair.sc.received(rid), &expected(1, &payloads(1), false)[..]);

        let up = pair.sc.update_forward(&mut pair.s, rid, false).unwrap();
        pair.pump();
        assert_eq!(pair.sc.update(up), Some(&RequestState::Accepted));
        assert_eq!(pair.send_group(&video, 2, &payloads(2)), 0, "{v:?}: paused again");
        assert_eq!(pair.sc.received(rid).len(), payloads(1).len());
    }
}

/// PUBLISH with FORWARD=0, accepted (draft-16 PUBLISH_OK keeps FORWARD=0; draft-22 answers
/// REQUEST_OK): no objects while paused; the subscriber's REQUEST_UPDATE FORWARD=1 is
/// answered with REQUEST_OK and objects flow.
fn publish_paused_then_resumed(v: Version) {
    let mut pair = Pair::new(v, Split::Whole);
    pair.sc.accept_publish(None);
    let video = track("video");
    let rid = pair.pc.publish(&mut pair.p, video.clone(), false).unwrap();
    assert_eq!(pair.pc.subscription(rid).unwrap().state, RequestState::Pending);
    pair.pump();
    let d = pair.pc.subscription(rid).unwrap();
    assert_eq!(
        (d.state.clone(), d.forward, d.origin),
        (RequestState::Accepted, false, Origin::Publish),
        "{v:?}"
    );
    let sub = pair.sc.subscription(rid).unwrap();
    assert_eq!((sub.origin, sub.forward, sub.track_alias), (Origin::Publish, false, Some(d.alias)));

    assert_eq!(pair.send_group(&video, 0, &payloads(0)), 0, "{v:?}: paused");
    assert!(pair.sc.received(rid).is_empty());

    let up = pair.sc.update_forward(&mut pair.s, rid, true).unwrap();
    pair.pump();
    assert_eq!(pair.sc.update(up), Some(&RequestState::Accepted), "{v:?}: REQUEST_OK");
    assert!(pair.pc.subscription(rid).unwrap().forward);
    assert_eq!(pair.send_group(&video, 1, &payloads(1)), 1, "{v:?}: resumed");
    assert_eq!(pair.sc.received(rid), &expected(1, &payloads(1), false)[..]);

    assert_eq!(pair.pc.done(&mut pair.p, &video, publish_done::TRACK_ENDED, "end").unwrap(), 1);
    pair.pump();
    let done = pair.sc.subscription(rid).unwrap().done.clone().unwrap();
    assert_eq!((done.status, done.stream_count), (publish_done::TRACK_ENDED, 1));
}

#[test]
fn publish_paused_then_resumed_by_request_update_draft16() {
    publish_paused_then_resumed(Version::Draft16);
}

/// draft-22 §9.5: "A subscriber can also send REQUEST_UPDATE to modify parameters of a
/// subscription established with PUBLISH". It travels on the PUBLISH's request stream, which
/// the publisher opened, and is answered there.
#[test]
fn publish_paused_then_resumed_by_request_update_draft22() {
    publish_paused_then_resumed(Version::Draft22);
}

#[test]
fn publish_paused_then_resumed_by_request_update_draft18() {
    publish_paused_then_resumed(Version::Draft18);
}

/// A draft-16 PUBLISH_OK that asks for FORWARD=0 pauses a PUBLISH sent with FORWARD=1.
#[test]
fn draft16_publish_ok_forward_0_pauses() {
    // draft-18's PUBLISH_OK (a REQUEST_OK, §10.5) carries FORWARD as draft-16's does.
    for v in [Version::Draft16, Version::Draft18] {
        let mut pair = Pair::new(v, Split::Whole);
        pair.sc.accept_publish(Some(false));
        let video = track("video");
        let rid = pair.pc.publish(&mut pair.p, video.clone(), true).unwrap();
        pair.pump();
        assert_eq!(pair.pc.subscription(rid).unwrap().state, RequestState::Accepted, "{v:?}");
        assert!(!pair.pc.subscription(rid).unwrap().forward, "{v:?}");
        assert_eq!(pair.send_group(&video, 0, &payloads(0)), 0, "{v:?}");
    }
}

/// PUBLISH with FORWARD=1 accepted: objects flow at once; a PUBLISH the peer does not want
/// is refused with UNINTERESTED and ends the publisher's subscription.
#[test]
fn publish_accepted_delivers_and_refused_publish_ends() {
    for v in DRAFTS {
        let mut pair = Pair::new(v, Split::Whole);
        let video = track("video");
        let refused = pair.pc.publish(&mut pair.p, video.clone(), true).unwrap();
        pair.pump();
        assert!(
            matches!(pair.pc.ended(refused), Some(Ended::Refused { code, .. }) if *code == request_error::UNINTERESTED),
            "{v:?}: {:?}",
            pair.pc.ended(refused)
        );
        assert!(pair.pc.subscription(refused).is_none());

        pair.sc.accept_publish(None);
        let rid = pair.pc.publish(&mut pair.p, video.clone(), true).unwrap();
        pair.pump();
        assert_eq!(pair.send_group(&video, 4, &payloads(4)), 1, "{v:?}");
        assert_eq!(pair.sc.received(rid), &expected(4, &payloads(4), false)[..]);
    }
}

/// UNSUBSCRIBE (draft-16) / cancelling the request stream (draft-22) stops delivery: the
/// publisher forgets the subscription and resets the stream of the group in progress; later
/// groups open no stream and nothing more reaches the subscriber.
#[test]
fn unsubscribe_stops_delivery() {
    for v in DRAFTS {
        let mut pair = Pair::new(v, Split::Whole);
        let video = track("video");
        pair.pc.add_track(video.clone());
        pair.announce(&namespace());
        let rid = pair.subscribe(&video, None);
        let keep = pair.subscribe(&video, None);
        assert_eq!(pair.send_group(&video, 0, &payloads(0)), 2);
        assert_eq!(pair.sc.received(rid).len(), 4);

        // Unsubscribe in the middle of a group.
        assert_eq!(pair.pc.begin_group(&mut pair.p, &video, 1).unwrap(), 2);
        pair.pc.send_object(&mut pair.p, &video, Bytes::from_static(b"first")).unwrap();
        pair.pump();
        pair.sc.unsubscribe(&mut pair.s, rid).unwrap();
        pair.pump();
        assert_eq!(pair.pc.ended(rid), Some(&Ended::Unsubscribed), "{v:?}");
        assert!(pair.pc.subscription(rid).is_none());
        assert_eq!(pair.pc.active(&video), 1);
        pair.pc.send_object(&mut pair.p, &video, Bytes::from_static(b"second")).unwrap();
        pair.pc.end_group(&mut pair.p, &video).unwrap();
        assert_eq!(pair.send_group(&video, 2, &payloads(2)), 1, "{v:?}: only the other subscription");

        let gone = pair.sc.subscription(rid).unwrap();
        assert_eq!(gone.received.len(), 5, "{v:?}: group 0 and the first object of group 1");
        assert_eq!(gone.late_objects, 0, "{v:?}: nothing was sent after the unsubscribe");
        assert_eq!(gone.resets, vec![CANCELLED], "{v:?}: the open stream was reset");
        let kept = pair.sc.subscription(keep).unwrap();
        assert_eq!(kept.received.len(), 4 + 2 + 4, "{v:?}");
        assert_eq!(kept.streams_finished, 3);
        assert_eq!(pair.sc.stray_objects(), 0);
    }
}

/// An absolute start / end-group filter bounds what is sent (draft-16 has no object-level end).
#[test]
fn absolute_range_filter_bounds_delivery() {
    for v in DRAFTS {
        let mut pair = Pair::new(v, Split::Whole);
        let video = track("video");
        pair.pc.add_track(video.clone());
        let filter = LocationFilter::AbsoluteStartGroupEnd { start: Location::new(1, 2), end_group: 2 };
        let rid = pair.subscribe(&video, Some(filter));
        assert_eq!(pair.send_group(&video, 0, &payloads(0)), 0);
        assert_eq!(pair.send_group(&video, 1, &payloads(1)), 1);
        assert_eq!(pair.send_group(&video, 2, &payloads(2)), 1);
        assert_eq!(pair.send_group(&video, 3, &payloads(3)), 0);
        let got: Vec<Location> = pair.sc.received(rid).iter().map(Received::location).collect();
        assert_eq!(
            got,
            [(1, 2), (1, 3), (2, 0), (2, 1), (2, 2), (2, 3)].map(|(g, o)| Location::new(g, o)).to_vec(),
            "{v:?}"
        );
    }
}

/// The subscriber's switchover cut (`client::switchover`, draft-22 §7.4.1) must wait for every
/// subgroup of the groups the old relay still owes, not only for an object past the cut:
/// streams of one group are not ordered with another group's, so an object of group 2 can
/// arrive while a subgroup stream of group 1 is still open. Here the subscriber has group 2's
/// first object and group 1's subgroup 1 has not ended: `has_open_stream_before(rid, 2)` says
/// wait (the rule before, "an object of a group at or past the cut arrived", would have cut
/// and lost what that stream still carried); once its FIN arrives, it says go.
#[test]
fn the_switchover_cut_waits_for_every_subgroup_of_earlier_groups() {
    for v in DRAFTS {
        let mut pair = Pair::new(v, Split::Whole);
        let video = track("video");
        pair.pc.add_track(video.clone());
        pair.announce(&namespace());
        let rid = pair.subscribe(&video, None);
        pair.pc.begin_subgroups(&mut pair.p, &video, 1, 2).unwrap();
        for payload in payloads(1).into_iter().take(2) {
            pair.pc.send_object(&mut pair.p, &video, payload).unwrap();
        }
        pair.pump();
        // Group 2 begins (group 1's two streams end with FIN): deliver everything but the FIN
        // of group 1's subgroup 1, which is late.
        pair.pc.begin_subgroups(&mut pair.p, &video, 2, 2).unwrap();
        pair.pc.send_object(&mut pair.p, &video, payloads(2).remove(0)).unwrap();
        let sent: Vec<_> = std::iter::from_fn(|| pair.p.poll_transmit()).collect();
        let late = |t: &moq_edge::session::Transmit| matches!(t, moq_edge::session::Transmit::Stream { data, fin: true, .. } if data.is_empty());
        // The FINs of group 1 are the first two empty finishing writes; hold back the second.
        let mut fins = 0;
        let mut held = Vec::new();
        for t in sent {
            if late(&t) {
                fins += 1;
                if fins == 2 {
                    held.push(t);
                    continue;
                }
            }
            deliver(&mut pair.s, &t, Split::Whole);
        }
        pair.pump();
        let last = pair.sc.received(rid).iter().map(|r| r.location()).max();
        assert_eq!(last.map(|l| l.group), Some(2), "{v:?}: an object of group 2 arrived");
        assert!(pair.sc.has_open_stream_before(rid, 2), "{v:?}: group 1's subgroup 1 is still open");
        for t in &held {
            deliver(&mut pair.s, t, Split::Whole);
        }
        pair.pump();
        assert!(!pair.sc.has_open_stream_before(rid, 2), "{v:?}: every stream of group 1 ended");
    }
}
