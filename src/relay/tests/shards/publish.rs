//! PUBLISH: by default (`publish_forward = always`) a track the publisher offers is forwarded
//! at once and cached; with `on-demand` it is paused while nobody subscribes and forwarded
//! when someone does. PUBLISH_NAMESPACE is answered once every core knows it.

use std::time::Duration;

use bytes::Bytes;
use relay::PublishForward;
use relay::RelayConfig;
use session::Event;
use wire::code;
use wire::model::{Location, Message, PublishNamespace, SubgroupObject};
use wire::Version;

use crate::common::*;
use crate::harness::{messages, streams, Relay};

fn on_demand() -> RelayConfig {
    RelayConfig { publish_forward: PublishForward::OnDemand, ..RelayConfig::default() }
}

/// `on-demand`: PUBLISH with nobody subscribed: paused (draft-16 PUBLISH_OK FORWARD=0;
/// draft-22 PUBLISH_OK then REQUEST_UPDATE FORWARD=0). A subscriber arrives: REQUEST_UPDATE
/// FORWARD=1 upstream, SUBSCRIBE_OK downstream; the stream the publisher opened before
/// continues to the subscriber, later streams reach it whole, PUBLISH_DONE ends it.
fn paused_then_forwarded(pv: Version, sv: Version) {
    let mut r = Relay::with_config(3, on_demand());
    let t = r.track_owned_by(&["live"], 2);
    let alias = r.alias(&t);
    let p = r.connect(0, pv);
    let prid = r.next_request_id(p);
    r.send(p, publish_msg(pv, prid, &t, Some(Location::new(2, 5))));
    r.run_until_quiet();
    let ev = r.take_events(p);
    r.assert_no_closes();
    assert!(!publish_answer(pv, &messages(&ev), prid), "{pv:?}: not paused");
    assert_eq!(r.state_counts()[0].2, 1, "the PUBLISH is an upstream on core 0");

    // Objects sent while paused go nowhere (nobody subscribed).
    let h = header(pv, PUB_ALIAS, 3, 0);
    let st = r.open(p, &h);
    r.put(p, st, &object(3, 0));
    r.put(p, st, &object(3, 1));
    r.run_until_quiet();

    let s = r.connect(1, sv);
    let rid = r.subscribe(s, &t, None);
    let msgs = messages(&r.take_events(p));
    let [Message::RequestUpdate(u)] = msgs.as_slice() else { panic!("{pv:?}->{sv:?}: {msgs:?}") };
    assert_eq!((u.existing_request_id, u.params.forward), (prid, Some(true)));
    let ok = subscribe_ok(&messages(&r.take_events(s)), rid);
    assert_eq!(ok.track_alias, alias);
    assert_eq!(ok.params.largest_object, Some(Location::new(3, 1)));
    r.assert_no_closes();

    let more = [object(3, 2), object(3, 3)];
    for o in &more {
        r.put(p, st, o);
    }
    r.fin(p, st);
    let h2 = header(pv, PUB_ALIAS, 4, 0);
    let st2 = r.open(p, &h2);
    let g4: Vec<_> = (0..3).map(|i| object(4, i)).collect();
    for o in &g4 {
        r.put(p, st2, o);
    }
    r.fin(p, st2);
    r.send(p, done_msg(prid, 2));
    r.run_until_quiet();
    let ev = r.take_events(s);
    let seen = streams(&ev);
    assert_eq!(seen.len(), 2);
    assert_stream(&seen[0], rid, expected_header(&h, alias, sv, false), &more, Some(None));
    assert_stream(&seen[1], rid, expected_header(&h2, alias, sv, true), &g4, Some(None));
    let d = publish_done(&messages(&ev));
    assert_eq!((d.request_id, d.status_code, d.stream_count), (rid, code::TRACK_ENDED, 2));
    r.assert_idle();
    r.assert_no_closes();
}

#[test]
fn publish_without_subscribers_is_paused_then_forwarded() {
    for (pv, sv) in COMBOS {
        paused_then_forwarded(pv, sv);
    }
}

/// The default (`always`): PUBLISH with nobody subscribed is answered FORWARD=1 at once, so a
/// publisher that never acts on REQUEST_UPDATE still sends; the relay takes the objects (and
/// caches them). A subscriber gets SUBSCRIBE_OK with the largest location the relay saw, the
/// publisher hears nothing more (no REQUEST_UPDATE), and the objects that follow reach the
/// subscriber. When the subscriber leaves, the linger passes and the publisher is still not
/// paused.
#[test]
fn publish_is_forwarded_at_once_by_default() {
    for (pv, sv) in COMBOS {
        let mut r = Relay::new(3);
        let t = r.track_owned_by(&["live"], 2);
        let alias = r.alias(&t);
        let p = r.connect(0, pv);
        let prid = r.next_request_id(p);
        r.send(p, publish_msg(pv, prid, &t, Some(Location::new(2, 5))));
        r.run_until_quiet();
        let msgs = messages(&r.take_events(p));
        assert!(publish_answer(pv, &msgs, prid), "{pv:?}: forwarding from the start: {msgs:?}");
        assert!(!msgs.iter().any(|m| matches!(m, Message::RequestUpdate(_))), "{pv:?}: {msgs:?}");

        let h = header(pv, PUB_ALIAS, 3, 0);
        let st = r.open(p, &h);
        r.put(p, st, &object(3, 0));
        r.put(p, st, &object(3, 1));
        r.run_until_quiet();

        let s = r.connect(1, sv);
        let rid = r.subscribe(s, &t, None);
        assert!(messages(&r.take_events(p)).is_empty(), "{pv:?}->{sv:?}: no REQUEST_UPDATE needed");
        let ok = subscribe_ok(&messages(&r.take_events(s)), rid);
        assert_eq!(ok.track_alias, alias);
        assert_eq!(ok.params.largest_object, Some(Location::new(3, 1)), "{pv:?}->{sv:?}");

        let h2 = header(pv, PUB_ALIAS, 4, 0);
        let st2 = r.open(p, &h2);
        let g4: Vec<_> = (0..3).map(|i| object(4, i)).collect();
        for o in &g4 {
            r.put(p, st2, o);
        }
        r.fin(p, st2);
        r.run_until_quiet();
        let ev = r.take_events(s);
        let seen = streams(&ev);
        let whole = seen.iter().find(|st| st.header.group_id == 4);
        let whole = whole.unwrap_or_else(|| panic!("{pv:?}->{sv:?}: group 4 not delivered: {seen:?}"));
        assert_eq!(whole.objects.len(), 3, "{pv:?}->{sv:?}");

        r.send(s, Message::Unsubscribe(rid));
        r.run_until_quiet();
        r.advance(RelayConfig::default().linger + Duration::from_millis(1));
        assert!(messages(&r.take_events(p)).is_empty(), "{pv:?}->{sv:?}: never paused");
        r.assert_no_closes();
    }
}

/// A subscriber waits for an upstream SUBSCRIBE when the publisher sends PUBLISH for the track
/// instead, with objects right behind it (before any PUBLISH_OK): the PUBLISH replaces the
/// pending SUBSCRIBE (ended upstream), PUBLISH_OK asks FORWARD=1, and the subscriber gets every
/// object the publisher sent.
#[test]
fn publish_while_a_subscriber_waits_loses_no_objects() {
    for (pv, sv) in COMBOS {
        for owner in 0..3 {
            let mut r = Relay::new(3);
            let t = r.track_owned_by(&["live"], owner);
            let alias = r.alias(&t);
            let p = r.connect(0, pv);
            r.announce(p, &["live"]);
            let s = r.connect(1, sv);
            let rid = r.subscribe(s, &t, None);
            let up = r.upstream_subscribe(p, &t);

            let prid = r.next_request_id(p);
            r.send(p, publish_msg(pv, prid, &t, Some(Location::new(2, 5))));
            let h = header(pv, PUB_ALIAS, 3, 0);
            let st = r.open(p, &h);
            let objs: Vec<_> = (0..4).map(|i| object(3, i)).collect();
            for o in &objs {
                r.put(p, st, o);
            }
            r.fin(p, st);
            r.run_until_quiet();

            let ev = r.take_events(p);
            let msgs = messages(&ev);
            // The pending upstream SUBSCRIBE ends; the PUBLISH is answered forwarding.
            let answer = match pv {
                D16 => {
                    assert_eq!(msgs.first(), Some(&Message::Unsubscribe(up.request_id)), "{msgs:?}");
                    &msgs[1..]
                }
                _ => {
                    assert!(ev.contains(&Event::Cancelled { request_id: up.request_id }), "{ev:?}");
                    &msgs[..]
                }
            };
            assert!(publish_answer(pv, answer, prid), "{pv:?}->{sv:?}: paused");
            let ev = r.take_events(s);
            let ok = subscribe_ok(&messages(&ev), rid);
            assert_eq!(ok.params.largest_object, Some(Location::new(2, 5)));
            let seen = streams(&ev);
            assert_eq!(seen.len(), 1, "{pv:?}->{sv:?} owner {owner}");
            assert_stream(&seen[0], rid, expected_header(&h, alias, sv, true), &objs, Some(None));
            r.assert_no_closes();

            // The publisher of the PUBLISH goes away mid-group: reset, PUBLISH_DONE, no state.
            let h2 = header(pv, PUB_ALIAS, 4, 0);
            let st2 = r.open(p, &h2);
            r.put(p, st2, &object(4, 0));
            r.run_until_quiet();
            r.disconnect(p);
            r.run_until_quiet();
            let ev = r.take_events(s);
            let seen = streams(&ev);
            let reset = Some(Some(code::RESET_SESSION_CLOSED));
            assert_stream(&seen[0], rid, expected_header(&h2, alias, sv, true), &[object(4, 0)], reset);
            let d = publish_done(&messages(&ev));
            assert_eq!((d.request_id, d.stream_count), (rid, 2));
            r.assert_idle();
        }
    }
}

/// `on-demand`: a PUBLISH whose last subscriber left is paused (REQUEST_UPDATE FORWARD=0) once
/// the linger has passed, and kept: a later subscriber resumes it (FORWARD=1) without a new
/// PUBLISH.
#[test]
fn published_track_is_paused_after_the_linger() {
    for (pv, sv) in COMBOS {
        let mut r = Relay::with_config(2, on_demand());
        let t = r.track_owned_by(&["live"], 1);
        let p = r.connect(0, pv);
        let s = r.connect(1, sv);
        let prid = r.next_request_id(p);
        r.send(p, publish_msg(pv, prid, &t, None));
        r.run_until_quiet();
        assert!(!publish_answer(pv, &messages(&r.take_events(p)), prid));
        let rid = r.subscribe(s, &t, None);
        subscribe_ok(&messages(&r.take_events(s)), rid);
        let msgs = messages(&r.take_events(p));
        assert!(matches!(msgs.as_slice(), [Message::RequestUpdate(u)] if u.params.forward == Some(true)));

        r.send(s, Message::Unsubscribe(rid));
        r.run_until_quiet();
        let linger = RelayConfig::default().linger;
        r.advance(linger - Duration::from_millis(1));
        assert!(r.take_events(p).is_empty(), "{pv:?}->{sv:?}: paused before the linger");
        r.advance(Duration::from_millis(1));
        let msgs = messages(&r.take_events(p));
        let [Message::RequestUpdate(u)] = msgs.as_slice() else { panic!("{msgs:?}") };
        assert_eq!((u.existing_request_id, u.params.forward), (prid, Some(false)));
        assert_eq!(r.state_counts(), vec![(0, 0, 1), (1, 0, 0)], "the PUBLISH is kept");

        let rid2 = r.subscribe(s, &t, None);
        subscribe_ok(&messages(&r.take_events(s)), rid2);
        let msgs = messages(&r.take_events(p));
        assert!(matches!(msgs.as_slice(), [Message::RequestUpdate(u)] if u.params.forward == Some(true)));
        r.assert_no_closes();
    }
}

/// PUBLISH_NAMESPACE is answered only once every core has the namespace: a subscriber that
/// the REQUEST_OK prompts finds it on whichever core its SUBSCRIBE lands (no DOES_NOT_EXIST
/// race with the broadcast).
#[test]
fn publish_namespace_is_answered_once_every_core_knows_it() {
    for v in DRAFTS {
        let mut r = Relay::new(3);
        let p = r.connect(0, v);
        let rid = r.next_request_id(p);
        let m = PublishNamespace { request_id: rid, namespace: ns(&["live"]), ..Default::default() };
        r.send(p, Message::PublishNamespace(m));
        for t in r.capture(p) {
            r.deliver_to_relay(p, &t);
        }
        // Core 0 applied it (and flushed its output to the client); the broadcast to cores
        // 1 and 2 is still in the mesh.
        let early: Vec<Event> = std::iter::from_fn(|| r.session(p).poll_event()).collect();
        assert!(messages(&early).is_empty(), "{v:?}: answered before the other cores know: {early:?}");
        r.run_until_quiet();
        let msgs = messages(&r.take_events(p));
        assert!(
            matches!(msgs.as_slice(), [Message::RequestOk(ok)] if ok.request_id == rid),
            "{v:?}: {msgs:?}"
        );
        r.assert_no_closes();
    }
}

/// A publisher PUBLISHes a track, writes object (0, 0) and goes away without PUBLISH_DONE; a
/// new publisher PUBLISHes the same track just before it is gone (so the relay keeps both for
/// a moment) and writes its own, different (0, 0): the track goes on with the new publisher,
/// whose object replaces the gone one's in the cache and reaches the subscriber, and is not
/// taken for a malformed track (draft-22 §2.5: a publisher that restarts "risks colliding with
/// previously published Objects"; moq-test-client's publish-track-only and
/// publish-track-subscribe do exactly this). Two publishers that feed the track together and
/// disagree still make it malformed.
#[test]
fn a_new_publisher_of_a_track_whose_publisher_went_away_may_reuse_its_locations() {
    for (pv, sv) in COMBOS {
        let ctx = format!("{pv:?}->{sv:?}");
        let mut r = Relay::new(2);
        let t = r.track_owned_by(&["moq-test", "publish"], 1);
        let old = r.connect(0, pv);
        let rid = r.next_request_id(old);
        r.send(old, publish_msg(pv, rid, &t, None));
        r.run_until_quiet();
        assert!(publish_answer(pv, &messages(&r.take_events(old)), rid), "{ctx}");
        let st = r.open(old, &header(pv, PUB_ALIAS, 0, 0));
        let payload = |p: &'static [u8]| {
            (SubgroupObject { payload_len: p.len() as u64, ..object(0, 0).0 }, Bytes::from_static(p))
        };
        let stale = payload(b"publish-track-only");
        r.put(old, st, &stale);
        r.fin(old, st);
        r.run_until_quiet();

        let new = r.connect(1, pv);
        let rid = r.next_request_id(new);
        r.send(new, publish_msg(pv, rid, &t, None));
        r.run_until_quiet();
        assert!(publish_answer(pv, &messages(&r.take_events(new)), rid), "{ctx}");
        let s = r.connect(1, sv);
        let srid = r.subscribe(s, &t, None);
        subscribe_ok(&messages(&r.take_events(s)), srid);
        r.disconnect(old);
        r.run_until_quiet();

        let fresh = payload(b"publish-track-subscribe");
        let st = r.open(new, &header(pv, PUB_ALIAS, 0, 0));
        r.put(new, st, &fresh);
        r.fin(new, st);
        r.run_until_quiet();
        let ev = r.take_events(s);
        assert!(messages(&ev).is_empty(), "{ctx}: {:?}", messages(&ev));
        let seen = streams(&ev);
        assert_eq!(seen.len(), 1, "{ctx}");
        assert_eq!(seen[0].objects.len(), 1, "{ctx}");
        assert_eq!(&seen[0].objects[0].1[..], b"publish-track-subscribe", "{ctx}");

        // A third publisher feeding the track beside the new one, disagreeing about (0, 0).
        let third = r.connect(0, pv);
        let rid = r.next_request_id(third);
        r.send(third, publish_msg(pv, rid, &t, None));
        r.run_until_quiet();
        r.take_events(third);
        let st = r.open(third, &header(pv, PUB_ALIAS, 0, 0));
        r.put(third, st, &stale);
        r.run_until_quiet();
        let d = publish_done(&messages(&r.take_events(s)));
        assert_eq!(d.status_code, code::MALFORMED_TRACK, "{ctx}");
        r.assert_no_closes();
    }
}
