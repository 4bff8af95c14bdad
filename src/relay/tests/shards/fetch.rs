//! The cache and FETCH: standalone FETCHes served from the cache, waiting for the upstream, or
//! completed by an upstream FETCH; joining FETCH and FILL_PARAMETERS.

use std::time::Duration;

use bytes::Bytes;
use session::Event;
use wire::code;
use wire::model::{
    Fetch, FetchEnd, FetchItem, FetchKind, GroupOrder, Location, LocationFilter, Message, Parameters,
    RangeEnd, RequestError, RequestId, Subscribe,
};

use crate::common::*;
use crate::harness::{messages, streams, Relay};

/// Groups a subscriber received (cached on the owner): a FETCH from a client on another core
/// gets exactly the requested range byte-exact, in order, one fetch stream ending with FIN,
/// after a FETCH_OK whose End Location follows each draft's rules (the requested end; the
/// Largest Object when the request goes past it; draft-16 "whole group" {G+1, 0} when the
/// request asked through the end of a group). A range after the Largest Object is
/// INVALID_RANGE; a track the relay does not relay now is subscribed upstream (DOES_NOT_EXIST
/// when the publisher has not got it, or nobody publishes it). Descending group order
/// returns groups last to first. No fetch state is left behind.
#[test]
fn fetch_is_served_from_the_cache() {
    for (pv, sv) in COMBOS {
        for owner in 0..3 {
            let mut r = Relay::new(3);
            let t = r.track_owned_by(&["live"], owner);
            let (p, subs, _up) = r.established(pv, sv, &t, &[1], Some(Location::new(0, 0)));
            r.publish_groups(p, pv, 1..4);
            r.take_events(subs[0].0);
            let f = r.connect(2, sv);
            let ctx = format!("{pv:?}->{sv:?} owner {owner}");

            let range =
                LocationFilter::AbsoluteRange { start: Location::new(1, 2), end: Location::new(2, 1) };
            let (rid, ev) = r.standalone(f, &t, range);
            let ok = fetch_ok(&messages(&ev), rid);
            assert_eq!(ok.end_location, FetchEnd::Object(Location::new(2, 1)), "{ctx}");
            assert_eq!(ok.track_properties, track_properties(), "{ctx}");
            let seen = fetch_streams(&ev);
            assert_eq!(seen.len(), 1, "{ctx}");
            assert_eq!((seen[0].request_id, seen[0].end), (rid, Some(None)), "{ctx}");
            assert_eq!(fetched_objects(&seen[0], 0), [(1, 2), (1, 3), (1, 4), (2, 0), (2, 1)], "{ctx}");

            let whole = LocationFilter::AbsoluteStartGroupEnd { start: Location::new(2, 0), end_group: 2 };
            let (rid, ev) = r.standalone(f, &t, whole);
            let ok = fetch_ok(&messages(&ev), rid);
            let want = if !since20(sv) { FetchEnd::Group(2) } else { FetchEnd::Object(Location::new(2, 4)) };
            assert_eq!(ok.end_location, want, "{ctx}");
            assert_eq!(fetched_objects(&fetch_streams(&ev)[0], 0), locations(2..3, 0..5), "{ctx}");

            let past = LocationFilter::AbsoluteRange { start: Location::new(3, 3), end: Location::new(9, 0) };
            let (rid, ev) = r.standalone(f, &t, past);
            assert_eq!(fetch_ok(&messages(&ev), rid).end_location, FetchEnd::Object(Location::new(3, 4)));
            assert_eq!(fetched_objects(&fetch_streams(&ev)[0], 0), [(3, 3), (3, 4)], "{ctx}");

            let after =
                LocationFilter::AbsoluteRange { start: Location::new(4, 0), end: Location::new(5, 0) };
            let (rid, ev) = r.standalone(f, &t, after);
            let e = request_error(&messages(&ev));
            assert_eq!((e.request_id, e.error_code), (rid, code::INVALID_RANGE), "{ctx}");
            assert!(fetch_streams(&ev).is_empty());

            // A track not relayed now is subscribed upstream for its End Location; this
            // publisher does not have it, so the FETCH gets its DOES_NOT_EXIST.
            let other = track(&["live"], "never-subscribed");
            let (rid, ev) = r.standalone(f, &other, range);
            assert!(messages(&ev).is_empty(), "{ctx}: waits for the upstream");
            let up = r.upstream_subscribe(p, &other);
            let e = RequestError {
                request_id: up.request_id,
                error_code: code::DOES_NOT_EXIST,
                retry_interval: 0,
                reason: Bytes::from_static(b"no such track"),
                redirect: None,
            };
            r.send(p, Message::RequestError(e));
            if pv.request_streams() {
                r.session(p).finish(up.request_id).unwrap();
            }
            r.run_until_quiet();
            let e = request_error(&messages(&r.take_events(f)));
            assert_eq!((e.request_id, e.error_code), (rid, code::DOES_NOT_EXIST), "{ctx}");
            let nobody = track(&["elsewhere"], "x");
            let (rid, ev) = r.standalone(f, &nobody, range);
            let e = request_error(&messages(&ev));
            assert_eq!((e.request_id, e.error_code), (rid, code::DOES_NOT_EXIST), "{ctx}: no publisher");

            let rid = r.next_request_id(f);
            let mut m = fetch_msg(rid, FetchKind::Standalone { track: t.clone() }, Some(range));
            if let Message::Fetch(f) = &mut m {
                f.params.group_order = Some(GroupOrder::Descending);
            }
            r.send(f, m);
            r.run_until_quiet();
            let ev = r.take_events(f);
            fetch_ok(&messages(&ev), rid);
            assert_eq!(
                fetched_objects(&fetch_streams(&ev)[0], 0),
                [(2, 0), (2, 1), (1, 2), (1, 3), (1, 4)],
                "{ctx}"
            );

            assert!(
                r.state_counts().iter().all(|c| c.1 <= 1),
                "only the subscription: {:?}",
                r.state_counts()
            );
            assert!(r.shards.iter().map(|s| s.cache_bytes()).sum::<usize>() > 0);
            r.assert_no_closes();
        }
    }
}

/// The relay subscribed upstream mid-group (the publisher's Largest was {5, 2}): a FETCH
/// that arrives before the publisher answers gets no FETCH_OK until it does (the End
/// Location is unknown until then); the range the relay never received is marked as an
/// Unknown range rather than left as a gap that would read "does not exist", and what it did
/// receive follows. A FETCH cancelled while it waited is never answered.
#[test]
fn fetch_waits_for_the_upstream_and_marks_what_was_never_received() {
    for (pv, sv) in COMBOS {
        let mut r = Relay::new(2);
        let t = r.track_owned_by(&["live"], 0);
        let p = r.connect(0, pv);
        r.announce(p, &["live"]);
        let s = r.connect(1, sv);
        r.subscribe(s, &t, None);
        let up = r.upstream_subscribe(p, &t);
        let f = r.connect(1, sv);
        let from = LocationFilter::AbsoluteRange { start: Location::new(5, 0), end: Location::new(9, 0) };
        let (rid, ev) = r.standalone(f, &t, from);
        assert!(ev.is_empty(), "{pv:?}->{sv:?}: answered before the End Location is known: {ev:?}");
        let (gone, _) = r.standalone(f, &t, from);
        if sv == D16 {
            r.send(f, Message::FetchCancel(gone));
        } else {
            r.session(f).cancel(gone).unwrap();
        }
        r.run_until_quiet();

        r.accept(p, &up, Some(Location::new(5, 2)));
        // Nothing cached: the relay asks the publisher (for both FETCHes; the answer to the
        // cancelled one is dropped), which has nothing either.
        assert!(r.take_events(f).is_empty(), "{pv:?}->{sv:?}: the FETCH waits for the upstream FETCH");
        assert_eq!(r.refuse_upstream_fetches(p), 2, "{pv:?}->{sv:?}");
        let ev = r.take_events(f);
        let ok = fetch_ok(&messages(&ev), rid);
        assert_eq!(ok.end_location, FetchEnd::Object(Location::new(5, 2)), "{pv:?}->{sv:?}");
        let seen = fetch_streams(&ev);
        assert_eq!(seen.len(), 1, "{pv:?}->{sv:?}: one answer, not the cancelled one");
        let [(FetchItem::EndOfRange { kind: RangeEnd::Unknown, location }, _)] = seen[0].items.as_slice()
        else {
            panic!("{pv:?}->{sv:?}: {:?}", seen[0].items)
        };
        assert_eq!(*location, Location::new(5, 2));

        // Objects 3.. of group 5 arrive (the stream started mid-group): a FETCH of the
        // group gets "unknown through {5, 2}", then 3 and 4.
        let st = r.open(p, &header(pv, PUB_ALIAS, 5, 0));
        for o in 3..5 {
            r.put(p, st, &object(5, o));
        }
        r.run_until_quiet();
        let rid = r.next_request_id(f);
        r.send(f, fetch_msg(rid, FetchKind::Standalone { track: t.clone() }, Some(from)));
        r.run_until_quiet();
        assert_eq!(r.refuse_upstream_fetches(p), 1, "{pv:?}->{sv:?}: for {{5, 0}}..{{5, 2}}");
        let ev = r.take_events(f);
        assert_eq!(fetch_ok(&messages(&ev), rid).end_location, FetchEnd::Object(Location::new(5, 4)));
        let seen = fetch_streams(&ev);
        assert!(
            matches!(seen[0].items[0].0, FetchItem::EndOfRange { kind: RangeEnd::Unknown, location } if location == Location::new(5, 2)),
            "{pv:?}->{sv:?}: {:?}",
            seen[0].items
        );
        assert_eq!(fetched_objects(&seen[0], 0), [(5, 3), (5, 4)], "{pv:?}->{sv:?}");
        assert_eq!(r.state_counts()[1].1, 1, "{pv:?}->{sv:?}: only the subscription is left");
        r.assert_no_closes();
    }
}

/// draft-16 and draft-18 Joining FETCH (relative and absolute) sent together with its SUBSCRIBE, on a core
/// that already receives the track and on one that does not (the FETCH then waits for the
/// SUBSCRIBE_OK): the fetch ends exactly at the Largest Location the SUBSCRIBE_OK carried and
/// the subscription goes on from the next object, so the joiner gets the current group with
/// no gap and no duplicate. Joining an unknown Request ID is INVALID_JOINING_REQUEST_ID.
#[test]
fn joining_fetch_and_subscription_are_contiguous() {
    for (pv, jv) in DRAFTS.into_iter().flat_map(|pv| [(pv, D16), (pv, D18)]) {
        for joiner_core in [1, 2] {
            let mut r = Relay::new(3);
            let t = r.track_owned_by(&["live"], 0);
            let (p, subs, _up) = r.established(pv, jv, &t, &[1], Some(Location::new(0, 0)));
            r.publish_groups(p, pv, 1..3);
            let h = header(pv, PUB_ALIAS, 3, 0);
            let st = r.open(p, &h);
            for o in 0..3 {
                r.put(p, st, &object(3, o));
            }
            r.run_until_quiet();
            r.take_events(subs[0].0);
            let ctx = format!("{pv:?} {jv:?} joiner on core {joiner_core}");

            for (kind_rel, start) in [(true, 1), (false, 2)] {
                let j = r.connect(joiner_core, jv);
                let sub_rid = r.next_request_id(j);
                r.send(j, subscribe_msg(sub_rid, &t, None));
                let fetch_rid = r.next_request_id(j);
                let kind = if kind_rel {
                    FetchKind::RelativeJoining { joining_request_id: sub_rid, joining_start: start }
                } else {
                    FetchKind::AbsoluteJoining { joining_request_id: sub_rid, joining_start: start }
                };
                r.send(j, fetch_msg(fetch_rid, kind, None));
                r.run_until_quiet();
                let ev = r.take_events(j);
                let msgs = messages(&ev);
                assert_eq!(msgs.len(), 2, "{ctx}: {msgs:?}");
                let [Message::SubscribeOk(sok), Message::FetchOk(fok)] = msgs.as_slice() else {
                    panic!("{ctx}: {msgs:?}")
                };
                assert_eq!((sok.request_id, fok.request_id), (sub_rid, fetch_rid));
                assert_eq!(sok.params.largest_object, Some(Location::new(3, 2)), "{ctx}");
                assert_eq!(fok.end_location, FetchEnd::Object(Location::new(3, 2)), "{ctx}");
                let mut want = locations(2..3, 0..5);
                want.extend(locations(3..4, 0..3));
                assert_eq!(fetched_objects(&fetch_streams(&ev)[0], 0), want, "{ctx} relative {kind_rel}");

                let bad = r.next_request_id(j);
                let kind =
                    FetchKind::RelativeJoining { joining_request_id: RequestId(9999), joining_start: 0 };
                r.send(j, fetch_msg(bad, kind, None));
                r.run_until_quiet();
                let e = request_error(&messages(&r.take_events(j)));
                assert_eq!((e.request_id, e.error_code), (bad, code::INVALID_JOINING_REQUEST_ID), "{ctx}");
            }
            // The rest of group 3 reaches the joiners on their subscriptions, from object 3.
            for o in 3..5 {
                r.put(p, st, &object(3, o));
            }
            r.fin(p, st);
            r.run_until_quiet();
            for c in r.clients.len() - 2..r.clients.len() {
                let seen = streams(&r.take_events(c));
                assert_eq!(seen.len(), 1, "{ctx}");
                let ids: Vec<u64> = seen[0].objects.iter().map(|o| o.0.object_id).collect();
                assert_eq!(ids, [3, 4], "{ctx}");
            }
            r.assert_no_closes();
        }
    }
}

/// draft-22 FILL_PARAMETERS on SUBSCRIBE: after SUBSCRIBE_OK, a fill fetch stream named by
/// the SUBSCRIBE's Request ID carries the current group from its start through the Largest
/// Location (contiguous with what the subscription then delivers); a fill range that
/// selects nothing opens no stream.
#[test]
fn fill_parameters_open_a_fill_fetch_stream() {
    for pv in DRAFTS {
        let mut r = Relay::new(2);
        let t = r.track_owned_by(&["live"], 1);
        let (p, _subs, _up) = r.established(pv, D22, &t, &[1], Some(Location::new(0, 0)));
        r.publish_groups(p, pv, 1..2);
        let st = r.open(p, &header(pv, PUB_ALIAS, 2, 0));
        for o in 0..2 {
            r.put(p, st, &object(2, o));
        }
        r.run_until_quiet();
        for (fill, want) in [
            (LocationFilter::RelativeStart { groups_back: 1 }, locations(2..3, 0..2)),
            (LocationFilter::NextObject, vec![]),
        ] {
            let j = r.connect(0, D22);
            let rid = r.next_request_id(j);
            let fill = Parameters { location_filter: Some(fill), ..Default::default() };
            let params = Parameters { fill_parameters: Some(Box::new(fill)), ..Default::default() };
            r.send(j, Message::Subscribe(Subscribe { request_id: rid, track: t.clone(), params }));
            r.run_until_quiet();
            let ev = r.take_events(j);
            subscribe_ok(&messages(&ev), rid);
            let seen = fetch_streams(&ev);
            if want.is_empty() {
                assert!(seen.is_empty(), "{pv:?}: {seen:?}");
                continue;
            }
            assert_eq!((seen.len(), seen[0].request_id, seen[0].end), (1, rid, Some(None)), "{pv:?}");
            assert_eq!(fetched_objects(&seen[0], 0), want, "{pv:?}");
        }
        r.assert_no_closes();
    }
}

/// A FETCH for objects the cache lacks (draft-22 §3.2.3): the relay FETCHes exactly the
/// missing part from the publisher, then answers with the publisher's objects followed by the
/// cached ones, one contiguous fetch stream, FETCH_OK withheld until then. A publisher that
/// does not answer within the fill time leaves a Timed-Out range (draft-16 has none: Unknown)
/// and the relay cancels its upstream FETCH; FILL_TIMEOUT 0 (draft-18 §10.2.5, draft-22) asks
/// for no waiting.
#[test]
fn fetch_gets_what_the_cache_lacks_from_upstream() {
    for (pv, sv) in COMBOS {
        let ctx = format!("{pv:?}->{sv:?}");
        let mut r = Relay::new(2);
        let t = r.track_owned_by(&["live"], 0);
        let (p, _subs, _up) = r.established(pv, sv, &t, &[1], Some(Location::new(5, 2)));
        let st = r.open(p, &header(pv, PUB_ALIAS, 5, 0));
        for o in 3..5 {
            r.put(p, st, &object(5, o));
        }
        r.run_until_quiet();
        let f = r.connect(1, sv);
        let range = LocationFilter::AbsoluteRange { start: Location::new(4, 0), end: Location::new(5, 4) };
        let ask = |r: &mut Relay, fill_timeout: Option<u64>| {
            let rid = r.next_request_id(f);
            let params = Parameters { location_filter: Some(range), fill_timeout, ..Default::default() };
            let kind = FetchKind::Standalone { track: t.clone() };
            r.send(f, Message::Fetch(Fetch { request_id: rid, kind, params }));
            r.run_until_quiet();
            rid
        };

        let rid = ask(&mut r, None);
        let ups = r.upstream_fetches(p);
        let [up] = ups.as_slice() else { panic!("{ctx}: one upstream FETCH: {ups:?}") };
        let missing = LocationFilter::AbsoluteRange { start: Location::new(4, 0), end: Location::new(5, 2) };
        assert_eq!(up.params.location_filter, Some(missing), "{ctx}: only what is not cached");
        assert!(r.take_events(f).is_empty(), "{ctx}: no FETCH_OK before the upstream answers");
        let upstream: Vec<(u64, u64)> =
            locations(4..5, 0..5).into_iter().chain(locations(5..6, 0..3)).collect();
        r.serve_upstream_fetch(p, up, &upstream);
        let ev = r.take_events(f);
        assert_eq!(
            fetch_ok(&messages(&ev), rid).end_location,
            FetchEnd::Object(Location::new(5, 4)),
            "{ctx}"
        );
        let seen = fetch_streams(&ev);
        assert_eq!(fetched_objects(&seen[0], 0), locations(4..6, 0..5), "{ctx}: upstream, then cached");
        assert_eq!(seen[0].items.len(), 10, "{ctx}: no range markers");
        assert_eq!(seen[0].end, Some(None), "{ctx}");

        // The publisher stays silent: after the relay's fill time, the gap is Timed-Out.
        let rid = ask(&mut r, None);
        assert_eq!(r.upstream_fetches(p).len(), 1, "{ctx}");
        r.advance(Duration::from_secs(3));
        let ev = r.take_events(f);
        fetch_ok(&messages(&ev), rid);
        let seen = fetch_streams(&ev);
        let kind = if since20(sv) { RangeEnd::TimedOut } else { RangeEnd::Unknown };
        let gap = FetchItem::EndOfRange { kind, location: Location::new(5, 2) };
        assert_eq!(seen[0].items[0].0, gap, "{ctx}");
        assert_eq!(fetched_objects(&seen[0], 0), [(5, 3), (5, 4)], "{ctx}");
        let cancel = r.take_events(p);
        let cancelled = match pv {
            D16 => messages(&cancel).iter().any(|m| matches!(m, Message::FetchCancel(_))),
            _ => cancel.iter().any(|e| matches!(e, Event::Cancelled { .. })),
        };
        assert!(cancelled, "{ctx}: the upstream FETCH is cancelled: {cancel:?}");

        if sv != D16 {
            let rid = ask(&mut r, Some(0));
            assert!(r.upstream_fetches(p).is_empty(), "{ctx}: FILL_TIMEOUT 0 waits for nothing");
            let ev = r.take_events(f);
            fetch_ok(&messages(&ev), rid);
            assert_eq!(fetch_streams(&ev)[0].items[0].0, gap, "{ctx}");
        }
        let counts = r.state_counts();
        let sum = |f: fn(&(usize, usize, usize)) -> usize| counts.iter().map(f).sum::<usize>();
        assert_eq!((sum(|c| c.0), sum(|c| c.1), sum(|c| c.2)), (1, 1, 1), "{ctx}: no fetch left: {counts:?}");
        r.assert_no_closes();
    }
}

/// A fetch stream is sent among the data streams at its subscriber priority and the track's
/// publisher priority (draft-22 §5.1), not at the urgency of control streams (127) ahead of
/// all live data: a FETCH with SUBSCRIBER_PRIORITY 10 gets the urgency `data_urgency(10, 128)`.
#[test]
fn fetch_streams_are_sent_at_their_priority() {
    for (pv, sv) in COMBOS {
        let mut r = Relay::new(2);
        let t = r.track_owned_by(&["live"], 0);
        let (p, subs, _up) = r.established(pv, sv, &t, &[1], Some(Location::new(0, 0)));
        r.publish_groups(p, pv, 1..3);
        r.take_events(subs[0].0);
        let f = r.connect(1, sv);
        r.clients[f].relay_sent.clear();
        let rid = r.next_request_id(f);
        let range = LocationFilter::AbsoluteRange { start: Location::new(1, 0), end: Location::new(1, 2) };
        let params =
            Parameters { location_filter: Some(range), subscriber_priority: Some(10), ..Default::default() };
        let kind = FetchKind::Standalone { track: t.clone() };
        r.send(f, Message::Fetch(Fetch { request_id: rid, kind, params }));
        r.run_until_quiet();
        let ev = r.take_events(f);
        let seen = fetch_streams(&ev);
        assert_eq!(seen.len(), 1, "{pv:?}->{sv:?}");
        let want = session::data_urgency(10, 128);
        let set = r.clients[f]
            .relay_sent
            .iter()
            .any(|t| matches!(t, session::Transmit::Priority { urgency, .. } if *urgency == want));
        assert!(set, "{pv:?}->{sv:?}: {:?}", r.clients[f].relay_sent);
    }
}
