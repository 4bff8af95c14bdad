//! Linger: an upstream subscription nobody wants any more is kept for `linger` before it ends;
//! subscribers leaving and joining while answers are in flight.

use relay::Input;
use std::time::Duration;

use relay::RelayConfig;
use wire::model::{Location, Message, TrackAlias};

use crate::common::*;
use crate::harness::{messages, streams, ClientId, Relay};

impl Relay {
    /// Client `c` sends `msg`, and its bytes reach the relay now, without running the mesh (the
    /// shard's messages for other cores stay queued).
    fn send_now(&mut self, c: ClientId, msg: Message) {
        self.send(c, msg);
        for t in self.capture(c) {
            self.deliver_to_relay(c, &t);
        }
    }
}

/// The last subscriber leaving (UNSUBSCRIBE / cancel) ends the upstream only once the linger
/// has passed (and the owner's timer says when).
#[test]
fn last_unsubscribe_stops_upstream_after_the_linger() {
    for (pv, sv) in COMBOS {
        let mut r = Relay::new(3);
        let t = r.track_owned_by(&["live"], 2);
        let (p, subs, up) = r.established(pv, sv, &t, &[1, 2], None);
        let linger = RelayConfig::default().linger;

        r.send(subs[0].0, Message::Unsubscribe(subs[0].1));
        r.run_until_quiet();
        assert_eq!(r.state_counts()[1].1, 0, "subscription on core 1 gone");
        r.send(subs[1].0, Message::Unsubscribe(subs[1].1));
        r.run_until_quiet();
        assert!(r.take_events(p).is_empty(), "{pv:?}->{sv:?}: upstream ended at once");
        let now = r.now;
        assert_eq!(
            {
                r.shards[2].handle(now, Input::Timers);
                r.shards[2].poll_timeout()
            },
            Some(now + linger),
            "owner's linger deadline"
        );
        assert_eq!(r.state_counts()[2].0, 1, "track kept while lingering");

        r.advance(linger - Duration::from_millis(1));
        assert!(r.take_events(p).is_empty(), "upstream ended before the linger");
        r.advance(Duration::from_millis(1));
        r.assert_upstream_stopped(p, pv, up.request_id);
        r.assert_idle();
        for &(s, _) in &subs {
            assert!(messages(&r.take_events(s)).is_empty());
        }

        // After the linger a new subscriber needs a new upstream SUBSCRIBE.
        let rid = r.subscribe(subs[0].0, &t, None);
        let up2 = r.upstream_subscribe(p, &t);
        assert_ne!(up2.request_id, up.request_id);
        r.accept_as(p, &up2, TrackAlias(78), None);
        subscribe_ok(&messages(&r.take_events(subs[0].0)), rid);
        r.assert_no_closes();
    }
}

/// While the relay drains (GOAWAY sent) a track nobody wants is not kept: the last
/// subscriber leaving ends the upstream at once, so the publisher's relay (or parent) is not
/// held up by it.
#[test]
fn a_draining_relay_does_not_linger() {
    for (pv, sv) in COMBOS {
        let mut r = Relay::new(3);
        let t = r.track_owned_by(&["live"], 2);
        let (p, subs, up) = r.established(pv, sv, &t, &[1], None);
        for shard in &mut r.shards {
            shard.handle(r.now, Input::GoAway { timeout_ms: 10_000, sibling: None });
        }
        r.run_until_quiet();
        for c in [p, subs[0].0] {
            let ev = messages(&r.take_events(c));
            assert!(matches!(ev.as_slice(), [Message::GoAway(_)]), "{ev:?}");
        }
        r.send(subs[0].0, Message::Unsubscribe(subs[0].1));
        r.run_until_quiet();
        r.advance(Duration::from_millis(1));
        r.assert_upstream_stopped(p, pv, up.request_id);
    }
}

/// A subscriber arriving inside the linger reuses the upstream: no second SUBSCRIBE, an
/// immediate SUBSCRIBE_OK carrying the largest location seen, and objects flow to it.
#[test]
fn resubscribe_within_linger_reuses_the_upstream() {
    for (pv, sv) in COMBOS {
        let mut r = Relay::new(3);
        let t = r.track_owned_by(&["live"], 0);
        let alias = r.alias(&t);
        let (p, subs, up) = r.established(pv, sv, &t, &[1], None);
        let h = header(pv, PUB_ALIAS, 3, 0);
        let st = r.open(p, &h);
        r.put(p, st, &object(3, 0));
        r.put(p, st, &object(3, 1));
        r.run_until_quiet();
        assert_eq!(streams(&r.take_events(subs[0].0))[0].objects.len(), 2);

        r.send(subs[0].0, Message::Unsubscribe(subs[0].1));
        r.run_until_quiet();
        let linger = RelayConfig::default().linger;
        r.advance(linger / 2);
        assert!(r.take_events(p).is_empty());

        let s2 = r.connect(2, sv);
        let rid = r.subscribe(s2, &t, None);
        let ok = subscribe_ok(&messages(&r.take_events(s2)), rid);
        assert_eq!(ok.params.largest_object, Some(Location::new(3, 1)), "{pv:?}->{sv:?}");
        assert!(r.take_events(p).is_empty(), "a second upstream SUBSCRIBE");
        r.advance(linger);
        assert!(r.take_events(p).is_empty(), "upstream ended while in use");

        // The upstream stream continues; the new subscriber gets what follows.
        let more = [object(3, 2), object(3, 3)];
        for o in &more {
            r.put(p, st, o);
        }
        r.fin(p, st);
        r.run_until_quiet();
        let seen = streams(&r.take_events(s2));
        assert_eq!(seen.len(), 1);
        assert_stream(&seen[0], rid, expected_header(&h, alias, sv, false), &more, Some(None));

        r.send(s2, Message::Unsubscribe(rid));
        r.run_until_quiet();
        r.advance(linger);
        r.assert_upstream_stopped(p, pv, up.request_id);
        r.assert_idle();
        r.assert_no_closes();
    }
}

/// On one core, a subscriber leaves before the owner's answer to its core's SUBSCRIBE arrives,
/// and another subscribes right after (before the mesh has moved anything), while objects keep
/// arriving at the owner: the new subscriber gets every object after the LARGEST_OBJECT of its
/// SUBSCRIBE_OK, with no gap, and the upstream is kept.
#[test]
fn leave_and_join_on_one_core_while_the_answer_is_in_flight() {
    for (pv, sv) in COMBOS {
        let mut r = Relay::new(3);
        let t = r.track_owned_by(&["live"], 2);
        let alias = r.alias(&t);
        let (p, keep, _up) = r.established(pv, sv, &t, &[0], None);
        let h = header(pv, PUB_ALIAS, 6, 0);
        let st = r.open(p, &h);
        let objs: Vec<_> = (0..6).map(|i| object(6, i)).collect();
        r.put(p, st, &objs[0]);
        r.run_until_quiet();
        let s1 = r.connect(1, sv);
        let s2 = r.connect(1, sv);

        let rid1 = r.next_request_id(s1);
        r.send_now(s1, subscribe_msg(rid1, &t, None));
        r.send_now(s1, Message::Unsubscribe(rid1));
        let rid2 = r.next_request_id(s2);
        r.send_now(s2, subscribe_msg(rid2, &t, None));
        for o in &objs[1..4] {
            r.put(p, st, o);
        }
        for t in r.capture(p) {
            r.deliver_to_relay(p, &t);
        }
        r.run_until_quiet();
        for o in &objs[4..] {
            r.put(p, st, o);
        }
        r.fin(p, st);
        r.run_until_quiet();

        let ev = r.take_events(s2);
        let ok = subscribe_ok(&messages(&ev), rid2);
        let largest = ok.params.largest_object.expect("objects were seen");
        let after: Vec<_> =
            objs.iter().filter(|o| Location::new(6, o.0.object_id) > largest).cloned().collect();
        let seen = streams(&ev);
        assert_eq!(seen.len(), 1, "{pv:?}->{sv:?}");
        assert_stream(&seen[0], rid2, expected_header(&h, alias, sv, false), &after, Some(None));
        assert!(messages(&r.take_events(s1)).is_empty(), "the subscriber that left got answers");
        let seen = streams(&r.take_events(keep[0].0));
        assert_stream(&seen[0], keep[0].1, expected_header(&h, alias, sv, true), &objs, Some(None));
        assert_eq!(r.state_counts()[1].1, 1);
        r.assert_no_closes();
    }
}

/// The track ends upstream while, on one core, its subscriber leaves and another subscribes
/// (the owner sees PUBLISH_DONE before that core's UNSUBSCRIBE and new SUBSCRIBE): the new
/// subscriber is not told "done" for a subscription it never had; its SUBSCRIBE starts a new
/// upstream SUBSCRIBE and is answered when the publisher accepts; it can leave and nothing is
/// left behind.
#[test]
fn track_end_racing_leave_and_join_on_one_core() {
    for (pv, sv) in COMBOS {
        let mut r = Relay::new(3);
        let t = r.track_owned_by(&["live"], 2);
        let (p, subs, up) = r.established(pv, sv, &t, &[1], None);
        let (s1, rid1) = subs[0];
        let s2 = r.connect(1, sv);

        r.send_now(p, done_msg(up.request_id, 0));
        r.send_now(s1, Message::Unsubscribe(rid1));
        let rid2 = r.next_request_id(s2);
        r.send_now(s2, subscribe_msg(rid2, &t, None));
        r.run_until_quiet();
        assert!(messages(&r.take_events(s2)).is_empty(), "{pv:?}->{sv:?}: answered before the publisher");
        let up2 = r.upstream_subscribe(p, &t);
        r.accept_as(p, &up2, TrackAlias(78), None);
        subscribe_ok(&messages(&r.take_events(s2)), rid2);
        let ev = r.take_events(s1);
        assert!(messages(&ev).is_empty(), "{ev:?}");

        r.send(s2, Message::Unsubscribe(rid2));
        r.run_until_quiet();
        r.advance(RelayConfig::default().linger);
        r.assert_upstream_stopped(p, pv, up2.request_id);
        r.assert_idle();
        r.assert_no_closes();
    }
}

/// The only subscriber leaves before the publisher has answered the upstream SUBSCRIBE: the
/// upstream ends a linger after the answer, and nobody downstream hears of it.
#[test]
fn subscriber_leaving_before_the_upstream_answer() {
    for (pv, sv) in COMBOS {
        let mut r = Relay::new(3);
        let t = r.track_owned_by(&["live"], 2);
        let p = r.connect(0, pv);
        r.announce(p, &["live"]);
        let s = r.connect(1, sv);
        let rid = r.subscribe(s, &t, None);
        let up = r.upstream_subscribe(p, &t);
        r.send(s, Message::Unsubscribe(rid));
        r.run_until_quiet();
        assert_eq!(r.state_counts()[1].1, 0);
        r.accept(p, &up, None);
        assert!(messages(&r.take_events(s)).is_empty(), "{pv:?}->{sv:?}");
        r.advance(RelayConfig::default().linger);
        r.assert_upstream_stopped(p, pv, up.request_id);
        r.assert_idle();
        r.assert_no_closes();
    }
}
