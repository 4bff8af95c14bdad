//! A parent's GOAWAY: tracks move to the replacement link at a group boundary, each group whole
//! from one link.

use std::time::Duration;

use bytes::Bytes;
use session::Event;
use wire::code;
use wire::model::{DatagramHeader, FullTrackName, Message, Properties, Subscribe, TrackNamespace};
use wire::Version;

use crate::common::*;
use crate::harness::{messages, streams, ClientId, Relay};

/// Each subgroup stream among `events`: (group, object IDs, end).
fn groups(events: &[Event]) -> Vec<(u64, Vec<u64>, Option<Option<u64>>)> {
    streams(events)
        .iter()
        .map(|st| (st.header.group_id, st.objects.iter().map(|(o, _)| o.object_id).collect(), st.end))
        .collect()
}

impl Relay {
    /// A link (core 0) and a subscriber (core 1) of `t`, served through it: (parent, subscriber,
    /// the upstream SUBSCRIBE).
    fn subscribed_through_a_link(
        &mut self,
        v: Version,
        t: &FullTrackName,
    ) -> (ClientId, ClientId, Subscribe) {
        let parent = self.link(v);
        let s = self.connect(1, v);
        let rid = self.subscribe(s, t, None);
        let up = self.upstream_subscribe(parent, t);
        self.accept(parent, &up, None);
        subscribe_ok(&messages(&self.take_events(s)), rid);
        (parent, s, up)
    }

    /// `parent` sends GOAWAY with `uri`.
    fn parent_goes_away(&mut self, parent: ClientId, uri: &'static [u8]) {
        let goaway = wire::model::GoAway { new_session_uri: Bytes::from_static(uri), ..Default::default() };
        self.send(parent, Message::GoAway(goaway));
        self.run_until_quiet();
    }

    /// The replacement of link `old` (parent node `node`, the default route), set up: it gets the
    /// SUBSCRIBE of the track on `old` (returned).
    fn replacement(&mut self, old: ClientId, node: u64) -> (ClientId, Subscribe) {
        let parent = self.replace_link(old, vec![TrackNamespace::from_strs::<&str>(&[])], parent_setup(node));
        let ev = self.take_events(parent);
        let [Event::Ready { .. }, Event::Message(Message::Subscribe(up))] = ev.as_slice() else {
            panic!("the new parent got {ev:?}")
        };
        (parent, up.clone())
    }
}

/// The parent sends GOAWAY: the relay asks for a replacement link (to the New Session URI)
/// and keeps the old one. Once the new link is up, the track is subscribed there too and
/// moves at a group boundary: the group the old link had started comes whole from it, the
/// new link's copy of that group is not forwarded, the next group comes from the new link
/// (the old link's copy is not forwarded), and when the old link's last stream ends its
/// subscription is cancelled and the old link is ready to close. The subscriber sees each
/// group once, whole, and no PUBLISH_DONE.
#[test]
fn a_parents_goaway_moves_tracks_to_the_new_link_at_a_group_boundary() {
    for v in DRAFTS {
        let mut r = Relay::new(2);
        let t = track(&["live"], "v");
        let (parent, s, up) = r.subscribed_through_a_link(v, &t);
        let old5 = r.open(parent, &header(v, PUB_ALIAS, 5, 0));
        r.put(parent, old5, &object(5, 0));

        r.parent_goes_away(parent, b"moqt://parent-b.example:4443");
        let old_conn = r.clients[parent].conn;
        let uri = Bytes::from_static(b"moqt://parent-b.example:4443");
        assert_eq!(r.shards[0].take_link_goaways(), vec![(old_conn, uri)], "{v:?}");
        assert!(!r.shards[0].link_moved_out(old_conn), "{v:?}: no replacement yet");

        let (parent2, up2) = r.replacement(parent, 8);
        assert_eq!(up2.track, t);
        r.accept(parent2, &up2, None);
        assert!(r.take_events(parent).is_empty(), "{v:?}: the old subscription stays for now");
        // The new link's copy of group 5 (the old one started it) is not forwarded; its
        // group 6 is, and from then on the old link's group 6 is not.
        let new5 = r.open(parent2, &header(v, PUB_ALIAS, 5, 0));
        r.put(parent2, new5, &object(5, 1));
        let new6 = r.open(parent2, &header(v, PUB_ALIAS, 6, 0));
        r.put(parent2, new6, &object(6, 0));
        r.run_until_quiet();
        r.put(parent, old5, &object(5, 1));
        let old6 = r.open(parent, &header(v, PUB_ALIAS, 6, 0));
        r.put(parent, old6, &object(6, 0));
        r.run_until_quiet();
        assert!(r.take_events(parent).is_empty(), "{v:?}: group 5 is still open on the old link");
        assert!(!r.shards[0].link_moved_out(old_conn), "{v:?}");
        r.fin(parent, old5);
        r.run_until_quiet();
        r.assert_upstream_stopped(parent, v, up.request_id);
        assert!(r.shards[0].link_moved_out(old_conn), "{v:?}: nothing left on the old link");
        assert_eq!(r.shards[r.owner(&t)].stats().tracks_moved, 1, "{v:?}: counted");
        r.put(parent2, new6, &object(6, 1));
        r.fin(parent2, new6);
        let new7 = r.open(parent2, &header(v, PUB_ALIAS, 7, 0));
        r.put(parent2, new7, &object(7, 0));
        r.run_until_quiet();

        let ev = r.take_events(s);
        assert!(messages(&ev).is_empty(), "{v:?}: no PUBLISH_DONE: {ev:?}");
        let expected = vec![(5, vec![0, 1], Some(None)), (6, vec![0, 1], Some(None)), (7, vec![0], None)];
        assert_eq!(groups(&ev), expected, "{v:?}: each group once, whole, from one link");
        r.assert_no_closes();
    }
}

/// GOAWAY when the old link is ahead of the new one, and closes before its last group ends:
/// the new link's copies of groups the old one started are never forwarded; the old link's
/// open stream is reset when it closes (no PUBLISH_DONE), and the next group the old link
/// had not started comes from the new link. A new parent that refuses the track leaves it on
/// the old link; the move is tried again half a second later.
#[test]
fn a_move_keeps_each_group_from_one_link_when_the_old_one_is_ahead_or_closes() {
    for v in DRAFTS {
        let mut r = Relay::new(2);
        let t = track(&["live"], "v");
        let (parent, s, _) = r.subscribed_through_a_link(v, &t);
        let old5 = r.open(parent, &header(v, PUB_ALIAS, 5, 0));
        r.put(parent, old5, &object(5, 0));
        r.parent_goes_away(parent, b"");
        let (parent2, up2) = r.replacement(parent, 8);
        r.accept(parent2, &up2, None);
        // The old link is ahead: it opens group 6 before the new link's group 6 arrives.
        let old6 = r.open(parent, &header(v, PUB_ALIAS, 6, 0));
        r.put(parent, old6, &object(6, 0));
        r.run_until_quiet();
        let new6 = r.open(parent2, &header(v, PUB_ALIAS, 6, 0));
        r.put(parent2, new6, &object(6, 1));
        r.run_until_quiet();
        // The old link goes before group 6 ends: its stream is reset; group 7 is the new one's.
        r.disconnect(parent);
        r.run_until_quiet();
        r.put(parent2, new6, &object(6, 2));
        let new7 = r.open(parent2, &header(v, PUB_ALIAS, 7, 0));
        r.put(parent2, new7, &object(7, 0));
        r.run_until_quiet();
        let ev = r.take_events(s);
        assert!(messages(&ev).is_empty(), "{v:?}: no PUBLISH_DONE: {ev:?}");
        let reset = |g: &(u64, Vec<u64>, Option<Option<u64>>)| matches!(g.2, Some(Some(_)));
        let seen = groups(&ev);
        assert!(seen[..2].iter().all(reset), "{v:?}: reset when the link closed: {seen:?}");
        let ids: Vec<(u64, Vec<u64>)> = seen.into_iter().map(|(g, ids, _)| (g, ids)).collect();
        assert_eq!(ids, vec![(5, vec![0]), (6, vec![0]), (7, vec![0])], "{v:?}");

        // A second GOAWAY round where the new parent refuses: the track stays where it is.
        r.parent_goes_away(parent2, b"");
        let (parent3, up3) = r.replacement(parent2, 9);
        let refusal = wire::model::RequestError {
            request_id: up3.request_id,
            error_code: code::DOES_NOT_EXIST,
            reason: Bytes::from_static(b"no such track"),
            ..Default::default()
        };
        r.send(parent3, Message::RequestError(refusal));
        r.run_until_quiet();
        r.put(parent2, new7, &object(7, 1));
        r.run_until_quiet();
        assert_eq!(groups(&r.take_events(s)), vec![(7, vec![1], None)], "{v:?}: still from the second link");
        assert!(r.take_events(parent2).is_empty(), "{v:?}: its subscription is kept");
        assert!(!r.shards[0].link_moved_out(r.clients[parent2].conn), "{v:?}: the link still carries it");
        // Half a second later the move is tried again; this time the parent has the track.
        r.advance(Duration::from_millis(600));
        let again = r.upstream_subscribe(parent3, &t);
        r.accept(parent3, &again, None);
        let new8 = r.open(parent3, &header(v, PUB_ALIAS, 8, 0));
        r.put(parent3, new8, &object(8, 0));
        r.run_until_quiet();
        assert_eq!(groups(&r.take_events(s)), vec![(8, vec![0], None)], "{v:?}: from the third link");
        r.fin(parent2, new7);
        r.run_until_quiet();
        r.assert_upstream_stopped(parent2, v, up2.request_id);
        assert!(r.shards[0].link_moved_out(r.clients[parent2].conn), "{v:?}");
        let ev = r.take_events(s);
        let ended = matches!(ev.as_slice(), [Event::DataStreamEnd { reset: None, .. }]);
        assert!(ended, "{v:?}: group 7 ends: {ev:?}");
        r.assert_no_closes();
    }
}

/// The replacement link closes before the track moved: the track stays on the old link, and
/// moves when the next replacement is up.
#[test]
fn a_failed_replacement_is_replaced_and_the_move_happens_then() {
    for v in DRAFTS {
        let mut r = Relay::new(2);
        let t = track(&["live"], "v");
        let (parent, s, up) = r.subscribed_through_a_link(v, &t);
        r.parent_goes_away(parent, b"");
        let (parent2, _) = r.replacement(parent, 8);
        r.disconnect(parent2);
        r.run_until_quiet();
        let old5 = r.open(parent, &header(v, PUB_ALIAS, 5, 0));
        r.put(parent, old5, &object(5, 0));
        r.run_until_quiet();
        assert_eq!(groups(&r.take_events(s)), vec![(5, vec![0], None)], "{v:?}: still from the old link");

        let (parent3, up3) = r.replacement(parent, 9);
        r.accept(parent3, &up3, None);
        let new6 = r.open(parent3, &header(v, PUB_ALIAS, 6, 0));
        r.put(parent3, new6, &object(6, 0));
        r.run_until_quiet();
        assert_eq!(groups(&r.take_events(s)), vec![(6, vec![0], None)], "{v:?}: from the third link");
        r.fin(parent, old5);
        r.run_until_quiet();
        r.assert_upstream_stopped(parent, v, up.request_id);
        assert!(r.shards[0].link_moved_out(r.clients[parent].conn), "{v:?}");
        let ev = r.take_events(s);
        assert!(messages(&ev).is_empty(), "{v:?}: {ev:?}");
        r.assert_no_closes();
    }
}

/// Several publishers of a live track (draft-22 §7.3 Multiple Publishers: redundant encoders,
/// a publisher reconnecting or arriving from another relay, §7.6.1) are all kept and what they
/// send is merged: each subgroup reaches the subscriber on one stream, each object once, in
/// order, whichever publisher delivered it first; a subgroup ends when its last publisher
/// stream ends. One publisher leaving costs the subscriber nothing; the last one's PUBLISH_DONE
/// ends the subscription. A publisher beyond the relay's limit is refused EXCESSIVE_LOAD.
/// (The newest PUBLISH used to win, resetting the open stream of every viewer; then one took
/// over from the other at a group boundary and stopped it.)
#[test]
fn several_publishers_of_a_track_are_merged() {
    for (pv, sv) in COMBOS {
        let ctx = format!("{pv:?}->{sv:?}");
        let mut r = Relay::new(2);
        let t = r.track_owned_by(&["live"], 1);
        let a = r.connect(0, pv);
        let arid = r.next_request_id(a);
        r.send(a, publish_msg(pv, arid, &t, None));
        r.run_until_quiet();
        r.take_events(a);
        let s = r.connect(1, sv);
        let rid = r.subscribe(s, &t, None);
        subscribe_ok(&messages(&r.take_events(s)), rid);
        let sa = r.open(a, &header(pv, PUB_ALIAS, 1, 0));
        r.put(a, sa, &object(1, 0));
        r.put(a, sa, &object(1, 1));
        r.run_until_quiet();

        // B joins while A is in group 1: its copy of objects 0 and 1 is dropped, its object 2
        // continues A's stream, and the stream ends when A's does too.
        let b = r.connect(0, pv);
        let brid = r.next_request_id(b);
        r.send(b, publish_msg(pv, brid, &t, None));
        r.run_until_quiet();
        assert!(publish_answer(pv, &messages(&r.take_events(b)), brid), "{ctx}: B is asked to send");
        let sb1 = r.open(b, &header(pv, PUB_ALIAS, 1, 0));
        for o in 0..3 {
            r.put(b, sb1, &object(1, o));
        }
        r.fin(b, sb1);
        r.run_until_quiet();
        r.put(a, sa, &object(1, 2));
        r.fin(a, sa);
        r.run_until_quiet();
        // Group 2 (objects 0..=4) from both, each ahead in turn: B gives 0..=2, A 3, B 4.
        let sb2 = r.open(b, &header(pv, PUB_ALIAS, 2, 0));
        for o in 0..3 {
            r.put(b, sb2, &object(2, o));
        }
        r.run_until_quiet();
        let sa2 = r.open(a, &header(pv, PUB_ALIAS, 2, 0));
        for o in 0..4 {
            r.put(a, sa2, &object(2, o));
        }
        r.run_until_quiet();
        r.put(b, sb2, &object(2, 3));
        r.put(b, sb2, &object(2, 4));
        r.fin(b, sb2);
        r.run_until_quiet();
        r.put(a, sa2, &object(2, 4));
        r.fin(a, sa2);
        r.run_until_quiet();
        let got = groups(&r.take_events(s));
        let want = vec![(1, vec![0, 1, 2], Some(None)), (2, vec![0, 1, 2, 3, 4], Some(None))];
        assert_eq!(got, want, "{ctx}");
        for p in [a, b] {
            let ev = r.take_events(p);
            let stopped = ev.iter().any(|e| {
                matches!(e, Event::Message(Message::Unsubscribe(_))) || matches!(e, Event::Cancelled { .. })
            });
            assert!(!stopped, "{ctx}: no publisher is stopped: {ev:?}");
        }

        // The same datagram from both: delivered once.
        let dh = DatagramHeader {
            track_alias: PUB_ALIAS,
            group_id: 3,
            object_id: 7,
            publisher_priority: Some(4),
            properties: Properties::new(),
            end_of_group: false,
            status: None,
        };
        for p in [a, b] {
            r.session(p).send_datagram(&dh, b"twice").unwrap();
        }
        r.run_until_quiet();
        let ev = r.take_events(s);
        assert_eq!(ev.iter().filter(|e| matches!(e, Event::Datagram { .. })).count(), 1, "{ctx}: {ev:?}");

        // A goes away: B carries on, the subscription too.
        r.disconnect(a);
        let sb3 = r.open(b, &header(pv, PUB_ALIAS, 3, 0));
        r.put(b, sb3, &object(3, 0));
        r.fin(b, sb3);
        r.run_until_quiet();
        let ev = r.take_events(s);
        assert!(messages(&ev).is_empty(), "{ctx}: no PUBLISH_DONE: {ev:?}");
        assert_eq!(groups(&ev), vec![(3, vec![0], Some(None))], "{ctx}");

        // Publishers beyond the limit are refused; B's PUBLISH_DONE ends the subscription.
        let mut refused = None;
        for _ in 0..8 {
            let p = r.connect(0, pv);
            let prid = r.next_request_id(p);
            r.send(p, publish_msg(pv, prid, &t, None));
            r.run_until_quiet();
            let msgs = messages(&r.take_events(p));
            if let [Message::RequestError(e)] = msgs.as_slice() {
                refused = Some(e.error_code);
                break;
            }
        }
        assert_eq!(refused, Some(code::EXCESSIVE_LOAD), "{ctx}: the ninth publisher");
        r.send(b, done_msg(brid, 3));
        r.run_until_quiet();
        let msgs = messages(&r.take_events(s));
        assert!(msgs.is_empty(), "{ctx}: other publishers remain: {msgs:?}");
        r.assert_no_closes();
    }
}
