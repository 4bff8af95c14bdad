//! How tracks and sessions end: the publisher gone mid-group, PUBLISH_DONE held for the streams
//! it counts, a malformed control message, a malformed track.

use relay::Input;
use std::time::Duration;

use bytes::Bytes;
use relay::RelayConfig;
use session::{Event, StreamId, Transmit};
use wire::code;
use wire::model::{Message, RequestId, SubgroupHeader, TrackAlias};
use wire::{Quic, Version, Vi64};

use crate::common::*;
use crate::harness::{messages, streams, Relay};

/// The publisher's connection goes away mid-group: every subscriber's open stream is reset,
/// PUBLISH_DONE follows (with the streams it got), a subscriber still waiting for another
/// track gets REQUEST_ERROR, the namespace is withdrawn everywhere, no state is left.
#[test]
fn publisher_gone_mid_group_resets_streams_and_ends_subscriptions() {
    for (pv, sv) in COMBOS {
        let mut r = Relay::new(3);
        let t = r.track_owned_by(&["live"], 1);
        let (p, subs, _up) = r.established(pv, sv, &t, &[0, 1, 2], None);
        let alias = r.alias(&t);
        let h = header(pv, PUB_ALIAS, 5, 0);
        let st = r.open(p, &h);
        let objs = [object(5, 0), object(5, 1)];
        for o in &objs {
            r.put(p, st, o);
        }
        r.run_until_quiet();
        // A second track whose upstream SUBSCRIBE is still unanswered.
        let pending = r.track_owned_by(&["live"], 2);
        let waiter = r.connect(2, sv);
        let wrid = r.subscribe(waiter, &pending, None);
        r.upstream_subscribe(p, &pending);

        r.disconnect(p);
        r.run_until_quiet();
        for &(s, rid) in &subs {
            let ev = r.take_events(s);
            let seen = streams(&ev);
            assert_eq!(seen.len(), 1, "{pv:?}->{sv:?}");
            let reset = Some(Some(code::RESET_SESSION_CLOSED));
            assert_stream(&seen[0], rid, expected_header(&h, alias, sv, true), &objs, reset);
            let d = publish_done(&messages(&ev));
            assert_eq!((d.request_id, d.stream_count), (rid, 1));
            assert_ne!(d.status_code, code::TRACK_ENDED);
        }
        let e = request_error(&messages(&r.take_events(waiter)));
        assert_eq!(e.request_id, wrid);
        r.assert_idle();

        // The namespace is gone on every core.
        for core in 0..3 {
            let s = r.connect(core, sv);
            let gone = r.track_owned_by(&["live"], core);
            let rid = r.subscribe(s, &gone, None);
            let e = request_error(&messages(&r.take_events(s)));
            assert_eq!((e.request_id, e.error_code), (rid, code::DOES_NOT_EXIST));
        }
        r.assert_idle();
        r.assert_no_closes();
    }
}

/// PUBLISH_DONE (Stream Count 1) overtakes the end of the stream it counts: the subscriber
/// gets the rest of the stream and its FIN first, PUBLISH_DONE after.
#[test]
fn publish_done_waits_for_the_stream_it_counts() {
    for (pv, sv) in COMBOS {
        let mut r = Relay::new(3);
        let t = r.track_owned_by(&["live"], 2);
        let alias = r.alias(&t);
        let (p, subs, up) = r.established(pv, sv, &t, &[1], None);
        let (s, rid) = subs[0];
        let h = header(pv, PUB_ALIAS, 1, 0);
        let st = r.open(p, &h);
        let objs: Vec<_> = (0..3).map(|i| object(1, i)).collect();
        r.put(p, st, &objs[0]);
        r.run_until_quiet();

        r.put(p, st, &objs[1]);
        r.put(p, st, &objs[2]);
        r.fin(p, st);
        r.send(p, done_msg(up.request_id, 1));
        let out = r.capture(p);
        let (data, control): (Vec<Transmit>, Vec<Transmit>) =
            out.into_iter().partition(|t| matches!(t, Transmit::Stream { id, .. } if *id == st));
        assert!(!control.is_empty() && !data.is_empty());
        for t in &control {
            r.deliver_to_relay(p, t);
        }
        r.run_until_quiet();
        let ev = r.take_events(s);
        assert!(messages(&ev).is_empty(), "{pv:?}->{sv:?}: PUBLISH_DONE before the stream ended");
        assert_eq!(r.state_counts()[0].2, 1, "upstream kept while its stream is open");

        for t in &data {
            r.deliver_to_relay(p, t);
        }
        r.run_until_quiet();
        let ev2 = r.take_events(s);
        let all: Vec<Event> = ev.into_iter().chain(ev2.iter().cloned()).collect();
        let seen = streams(&all);
        assert_eq!(seen.len(), 1);
        assert_stream(&seen[0], rid, expected_header(&h, alias, sv, true), &objs, Some(None));
        let end_at = ev2.iter().position(|e| matches!(e, Event::DataStreamEnd { .. })).unwrap();
        let done_at = ev2.iter().position(|e| matches!(e, Event::Message(Message::PublishDone(_)))).unwrap();
        assert!(end_at < done_at, "PUBLISH_DONE before FIN");
        let d = publish_done(&messages(&ev2));
        assert_eq!((d.request_id, d.status_code, d.stream_count), (rid, code::TRACK_ENDED, 1));
        r.assert_idle();
        r.assert_no_closes();
    }
}

/// PUBLISH_DONE counting a stream that never comes is passed on once `done_wait` has passed
/// (not before), with the subscriber's own Stream Count.
#[test]
fn publish_done_is_passed_on_after_done_wait() {
    for (pv, sv) in COMBOS {
        let mut r = Relay::new(2);
        let t = r.track_owned_by(&["live"], 1);
        let (p, subs, up) = r.established(pv, sv, &t, &[1], None);
        let (s, rid) = subs[0];
        let st = r.open(p, &header(pv, PUB_ALIAS, 1, 0));
        r.put(p, st, &object(1, 0));
        r.fin(p, st);
        r.send(p, done_msg(up.request_id, 2));
        r.run_until_quiet();
        assert!(messages(&r.take_events(s)).is_empty(), "{pv:?}->{sv:?}: PUBLISH_DONE not held");
        let wait = RelayConfig::default().done_wait;
        let now = r.now;
        assert_eq!(
            {
                r.shards[0].handle(now, Input::Timers);
                r.shards[0].poll_timeout()
            },
            Some(now + wait),
            "ingest's done_wait deadline"
        );

        r.advance(wait - Duration::from_millis(1));
        assert!(messages(&r.take_events(s)).is_empty());
        r.advance(Duration::from_millis(1));
        let d = publish_done(&messages(&r.take_events(s)));
        assert_eq!((d.request_id, d.status_code, d.stream_count), (rid, code::TRACK_ENDED, 1));
        r.assert_idle();
        r.assert_no_closes();
    }
}

/// The publisher side's timers visit only what is due: with 40 upstream subscriptions on the
/// core, ticks look at none of them until the one held PUBLISH_DONE's `done_wait` passes, and
/// then at that one.
#[test]
fn upstream_timers_visit_only_the_due_upstream() {
    let (pv, sv) = COMBOS[0];
    let mut r = Relay::new(2);
    let t = r.track_owned_by(&["live"], 1);
    let (p, subs, up) = r.established(pv, sv, &t, &[1], None);
    let (s, rid) = subs[0];
    // 39 more tracks from the same publisher, each with its own Track Alias.
    for i in 1..40u64 {
        let other = track(&["live"], &format!("other-{i}"));
        let viewer = r.connect(1, sv);
        r.subscribe(viewer, &other, None);
        let other_up = r.upstream_subscribe(p, &other);
        r.accept_as(p, &other_up, TrackAlias(PUB_ALIAS.0 + i), None);
    }
    let st = r.open(p, &header(pv, PUB_ALIAS, 1, 0));
    r.put(p, st, &object(1, 0));
    r.fin(p, st);
    r.send(p, done_msg(up.request_id, 2));
    r.run_until_quiet();
    let before = r.shards[0].upstream_visits();
    let wait = RelayConfig::default().done_wait;
    for _ in 0..10 {
        r.advance(wait / 20);
    }
    assert_eq!(r.shards[0].upstream_visits(), before, "no upstream looked at before its timer");
    assert!(messages(&r.take_events(s)).is_empty(), "PUBLISH_DONE held");
    r.advance(wait);
    assert_eq!(r.shards[0].upstream_visits() - before, 1, "the held one, once");
    let d = publish_done(&messages(&r.take_events(s)));
    assert_eq!(d.request_id, rid);
}

/// PUBLISH_DONE (Stream Count 2) arrives before the second stream has even begun: that stream's
/// objects must still reach the subscriber, then PUBLISH_DONE. Fails today in the relay's
/// session: on PUBLISH_DONE it forgets the publisher's Track Alias at once
/// (`observe_incoming` → `remove_request`), so a stream whose header arrives afterwards is
/// held as "unknown alias" and never reaches the relay, which passes PUBLISH_DONE on only after
/// `done_wait`, without that stream (draft-22 §9.9: the receiver "should receive any
/// late-opening streams in a relatively short time").
#[test]
fn publish_done_waits_for_a_stream_not_yet_opened() {
    for (pv, sv) in COMBOS {
        let mut r = Relay::new(2);
        let t = r.track_owned_by(&["live"], 1);
        let alias = r.alias(&t);
        let (p, subs, up) = r.established(pv, sv, &t, &[1], None);
        let (s, rid) = subs[0];
        let h1 = header(pv, PUB_ALIAS, 1, 0);
        let a = r.open(p, &h1);
        let g1 = [object(1, 0)];
        r.put(p, a, &g1[0]);
        r.fin(p, a);
        r.run_until_quiet();
        // PUBLISH_DONE, then a stream the publisher opened before it but whose bytes come later.
        let h2 = header(pv, PUB_ALIAS, 2, 0);
        let b = r.open(p, &h2);
        let g2 = [object(2, 0), object(2, 1)];
        for o in &g2 {
            r.put(p, b, o);
        }
        r.fin(p, b);
        r.send(p, done_msg(up.request_id, 2));
        let out = r.capture(p);
        let (data, control): (Vec<Transmit>, Vec<Transmit>) =
            out.into_iter().partition(|t| matches!(t, Transmit::Stream { id, .. } if *id == b));
        for t in control.iter().chain(&data) {
            r.deliver_to_relay(p, t);
        }
        r.run_until_quiet();
        let ev = r.take_events(s);
        let seen = streams(&ev);
        assert_eq!(seen.len(), 2, "{pv:?}->{sv:?}: the late stream was lost");
        assert_stream(&seen[0], rid, expected_header(&h1, alias, sv, true), &g1, Some(None));
        assert_stream(&seen[1], rid, expected_header(&h2, alias, sv, true), &g2, Some(None));
        let d = publish_done(&messages(&ev));
        assert_eq!((d.request_id, d.stream_count), (rid, 2));
        r.assert_idle();
        r.assert_no_closes();
    }
}

/// A SUBSCRIBE frame with a byte past its fields (its length covers the extra byte).
fn malformed_subscribe(v: Version, rid: RequestId) -> Vec<u8> {
    let mut buf = Vec::new();
    v.encode_message(&subscribe_msg(rid, &track(&["x"], "y"), None), &mut buf).unwrap();
    let (body_len, total) = match v {
        D16 => wire::common::read_control_frame::<Quic>(&buf).map(|(_, b, n)| (b.len(), n)),
        _ => wire::common::read_control_frame::<Vi64>(&buf).map(|(_, b, n)| (b.len(), n)),
    }
    .unwrap();
    assert_eq!(total, buf.len());
    let ty_len = total - 2 - body_len;
    let mut out = buf[..ty_len].to_vec();
    out.extend_from_slice(&(body_len as u16 + 1).to_be_bytes());
    out.extend_from_slice(&buf[ty_len + 2..]);
    out.push(0);
    out
}

/// One subscriber sends a malformed control message: only its session closes, with
/// PROTOCOL_VIOLATION; its subscription is gone; the others (one on the same core) keep
/// receiving objects.
#[test]
fn malformed_control_message_closes_only_that_session() {
    for (pv, sv) in COMBOS {
        let mut r = Relay::new(3);
        let t = r.track_owned_by(&["live"], 1);
        let alias = r.alias(&t);
        let (p, subs, _up) = r.established(pv, sv, &t, &[1, 1, 2], None);
        let h = header(pv, PUB_ALIAS, 0, 0);
        let st = r.open(p, &h);
        let objs: Vec<_> = (0..4).map(|i| object(0, i)).collect();
        r.put(p, st, &objs[0]);
        r.run_until_quiet();

        let (bad, _) = subs[1];
        let junk = malformed_subscribe(sv, RequestId(100));
        // draft-16: on the control stream; draft-22: as a new request stream.
        let stream = if sv == D16 { 0 } else { 400 };
        r.deliver_to_relay(
            bad,
            &Transmit::Stream { id: StreamId(stream), data: Bytes::from(junk), fin: false, expires: None },
        );
        r.run_until_quiet();
        assert_eq!(r.clients[bad].closed_by_relay, Some(PROTOCOL_VIOLATION), "{pv:?}->{sv:?}");
        assert_eq!(r.state_counts()[1].1, 1, "the closed session's subscription is gone");

        for o in &objs[1..] {
            r.put(p, st, o);
        }
        r.fin(p, st);
        r.run_until_quiet();
        for &(s, rid) in [subs[0], subs[2]].iter() {
            let seen = streams(&r.take_events(s));
            assert_eq!(seen.len(), 1);
            assert_stream(&seen[0], rid, expected_header(&h, alias, sv, true), &objs, Some(None));
            assert_eq!(r.clients[s].closed_by_relay, None);
        }
        assert_eq!(r.clients[p].closed_by_relay, None);
        assert_eq!(r.clients[bad].closed_by_client, None);
    }
}

/// A malformed track (draft-22 §12.1): here an object after the end of its subgroup, or the
/// same object again with another payload. The relay forwards and caches nothing of the
/// object that shows it, ends every subscription with PUBLISH_DONE MALFORMED_TRACK (open
/// streams reset with it), stops its upstream subscription and leaves no state behind.
#[test]
fn a_malformed_track_ends_its_subscriptions() {
    for (pv, sv) in COMBOS {
        for case in ["after the end of its subgroup", "twice with different payloads"] {
            let ctx = format!("{pv:?}->{sv:?} {case}");
            let mut r = Relay::new(2);
            let t = r.track_owned_by(&["live"], 1);
            let (p, subs, up) = r.established(pv, sv, &t, &[0, 1], None);
            let st = r.open(p, &header(pv, PUB_ALIAS, 1, 0));
            r.put(p, st, &object(1, 0));
            r.put(p, st, &object(1, 1));
            if case.starts_with("after") {
                r.fin(p, st);
                let again = r.open(p, &SubgroupHeader { first_object: false, ..header(pv, PUB_ALIAS, 1, 0) });
                r.put(p, again, &object(1, 2));
            } else {
                let other = r.open(p, &header(pv, PUB_ALIAS, 1, 1));
                let (o, _) = object(1, 1);
                let forged = Bytes::from(vec![b'!'; o.payload_len as usize]);
                r.put(p, other, &(o, forged));
            }
            r.run_until_quiet();
            for &(s, rid) in &subs {
                let ev = r.take_events(s);
                let d = publish_done(&messages(&ev));
                assert_eq!((d.request_id, d.status_code), (rid, code::MALFORMED_TRACK), "{ctx}");
                let seen = streams(&ev);
                assert_eq!(seen.len(), 1, "{ctx}: the object that shows it is not forwarded: {seen:?}");
                let ids: Vec<u64> = seen[0].objects.iter().map(|o| o.0.object_id).collect();
                assert_eq!(ids, vec![0, 1], "{ctx}");
                if !case.starts_with("after") {
                    assert_eq!(seen[0].end, Some(Some(code::MALFORMED_TRACK)), "{ctx}: open streams reset");
                }
            }
            let ev = r.take_events(p);
            let stopped = match pv {
                D16 => messages(&ev).contains(&Message::Unsubscribe(up.request_id)),
                _ => ev.contains(&Event::Cancelled { request_id: up.request_id }),
            };
            assert!(stopped, "{ctx}: the upstream subscription is stopped: {ev:?}");
            assert_eq!(r.shards[1].stats().malformed_tracks, 1, "{ctx}: counted");
            r.assert_idle();
            r.assert_no_closes();
        }
    }
}

/// A publisher's PUBLISH_DONE status reaches each subscriber as the same meaning in the
/// subscriber's draft: EXPIRED is 0x5 in draft-16 and 0x6 in draft-22 (TOO_FAR_BEHIND the
/// reverse), so passing the number through would tell a subscriber of the other draft
/// something else.
#[test]
fn publish_done_status_crosses_drafts_as_its_meaning() {
    use wire::model::PublishDone;
    use wire::DoneStatus;
    for status in [DoneStatus::Expired, DoneStatus::TooFarBehind, DoneStatus::TrackEnded] {
        for (pv, sv) in COMBOS {
            let mut r = Relay::new(2);
            let t = r.track_owned_by(&["live"], 1);
            let (p, subs, up) = r.established(pv, sv, &t, &[1], None);
            let (s, rid) = subs[0];
            r.send(
                p,
                Message::PublishDone(PublishDone {
                    request_id: up.request_id,
                    status_code: status.code(pv),
                    stream_count: 0,
                    reason: Bytes::from_static(b"bye"),
                }),
            );
            r.run_until_quiet();
            let d = publish_done(&messages(&r.take_events(s)));
            assert_eq!((d.request_id, d.status_code), (rid, status.code(sv)), "{status:?} {pv:?}->{sv:?}");
            r.assert_no_closes();
        }
    }
}
