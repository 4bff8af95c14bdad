//! Live delivery: one upstream SUBSCRIBE aggregating subscribers on several cores and its fan-out
//! (subgroup streams and datagrams), routing by namespace, subscription filters, TRACK_STATUS.

use bytes::Bytes;
use relay::RelayConfig;
use session::Event;
use wire::code;
use wire::model::{
    DatagramHeader, KvValue, Location, LocationFilter, Message, Properties, RequestId, TrackAlias,
};
use wire::Version;

use crate::common::*;
use crate::harness::{messages, streams, ClientId, Relay};

/// Two subscribers on two cores share one upstream SUBSCRIBE; they are answered only after
/// the publisher's SUBSCRIBE_OK (relay alias, LARGEST_OBJECT, group order, track properties
/// carried); two interleaved subgroup streams reach both byte-exact and in order with FIN;
/// PUBLISH_DONE (TRACK_ENDED, Stream Count 2) reaches both; no state is left on any shard.
/// Run with the track's owner on the publisher's core, on a subscriber's core, and on a core
/// with no session at all.
#[test]
fn one_upstream_subscribe_feeds_subscribers_on_two_cores() {
    for (pv, sv) in COMBOS {
        for owner in [0, 1, 3] {
            let mut r = Relay::new(4);
            let t = r.track_owned_by(&["live", "cam"], owner);
            let alias = r.alias(&t);
            let p = r.connect(0, pv);
            r.announce(p, &["live"]);
            let s1 = r.connect(1, sv);
            let s2 = r.connect(2, sv);
            let rid1 = r.subscribe(s1, &t, None);
            assert!(r.take_events(s1).is_empty(), "answered before the publisher");
            let rid2 = r.subscribe(s2, &t, Some(LocationFilter::NextObject));
            let up = r.upstream_subscribe(p, &t);
            assert!(r.take_events(s1).is_empty() && r.take_events(s2).is_empty());
            assert_eq!(r.state_counts()[owner].0, 1, "the owner holds the track");

            let largest = Location::new(4, 9);
            r.accept(p, &up, Some(largest));
            for (s, rid) in [(s1, rid1), (s2, rid2)] {
                let ok = subscribe_ok(&messages(&r.take_events(s)), rid);
                assert_eq!(ok.track_alias, alias, "{pv:?}->{sv:?}");
                assert_eq!(ok.params.largest_object, Some(largest));
                assert_eq!(ok.track_properties, track_properties());
            }
            assert!(r.take_events(p).is_empty(), "a second upstream request");

            // Two subgroup streams, objects interleaved across several flights.
            let ha = header(pv, PUB_ALIAS, 5, 0);
            let hb = header(pv, PUB_ALIAS, 5, 1);
            let a = r.open(p, &ha);
            let b = r.open(p, &hb);
            let objs_a: Vec<_> = (0..6).map(|i| object(5, i * 2)).collect();
            let objs_b: Vec<_> = (0..6).map(|i| object(5, i * 2 + 1)).collect();
            for i in 0..6 {
                r.put(p, a, &objs_a[i]);
                r.put(p, b, &objs_b[i]);
                if i % 2 == 1 {
                    r.run_until_quiet();
                }
            }
            r.fin(p, a);
            r.fin(p, b);
            r.run_until_quiet();
            for (s, rid) in [(s1, rid1), (s2, rid2)] {
                let ev = r.take_events(s);
                assert!(messages(&ev).is_empty(), "{:?}", messages(&ev));
                let seen = streams(&ev);
                assert_eq!(seen.len(), 2, "{pv:?}->{sv:?} owner {owner}");
                assert_stream(&seen[0], rid, expected_header(&ha, alias, sv, true), &objs_a, Some(None));
                assert_stream(&seen[1], rid, expected_header(&hb, alias, sv, true), &objs_b, Some(None));
            }

            r.send(p, done_msg(up.request_id, 2));
            if pv.request_streams() {
                r.session(p).finish(up.request_id).unwrap();
            }
            r.run_until_quiet();
            for (s, rid) in [(s1, rid1), (s2, rid2)] {
                let d = publish_done(&messages(&r.take_events(s)));
                assert_eq!((d.request_id, d.status_code, d.stream_count), (rid, code::TRACK_ENDED, 2));
                assert_eq!(&d.reason[..], b"bye");
            }
            r.assert_idle();
            r.assert_no_closes();
        }
    }
}

/// Subscribers of every draft on one core and on the publisher's core, for one upstream
/// (each gets its own downstream streams and its own Stream Count).
#[test]
fn mixed_subscribers_on_one_core_share_the_upstream() {
    for pv in DRAFTS {
        let mut r = Relay::new(2);
        let t = track(&["live"], "mixed");
        let alias = r.alias(&t);
        let p = r.connect(0, pv);
        r.announce(p, &["live"]);
        let subs: Vec<(ClientId, Version)> = vec![
            (r.connect(1, D16), D16),
            (r.connect(1, D22), D22),
            (r.connect(0, D22), D22),
            (r.connect(0, D16), D16),
        ];
        let rids: Vec<RequestId> = subs.iter().map(|&(s, _)| r.subscribe(s, &t, None)).collect();
        let up = r.upstream_subscribe(p, &t);
        r.accept(p, &up, None);
        for (&(s, _), &rid) in subs.iter().zip(&rids) {
            subscribe_ok(&messages(&r.take_events(s)), rid);
        }
        let h = header(pv, PUB_ALIAS, 0, 0);
        let st = r.open(p, &h);
        let objs: Vec<_> = (0..4).map(|i| object(0, i)).collect();
        for o in &objs {
            r.put(p, st, o);
        }
        r.fin(p, st);
        r.send(p, done_msg(up.request_id, 1));
        r.run_until_quiet();
        for (&(s, sv), &rid) in subs.iter().zip(&rids) {
            let ev = r.take_events(s);
            let seen = streams(&ev);
            assert_eq!(seen.len(), 1);
            assert_stream(&seen[0], rid, expected_header(&h, alias, sv, true), &objs, Some(None));
            let d = publish_done(&messages(&ev));
            assert_eq!((d.request_id, d.stream_count), (rid, 1));
        }
        r.assert_idle();
        r.assert_no_closes();
    }
}

/// A session subscribing twice to one Track: draft-16 and draft-18 allow one subscription per
/// Track, so the second SUBSCRIBE fails with DUPLICATE_SUBSCRIPTION and the first goes on
/// (before, the relay answered SUBSCRIBE_OK with the same Track Alias and the subscriber closed
/// the session with DUPLICATE_TRACK_ALIAS; found by the `relay` fuzz target). draft-22 §3.1
/// allows several, but the relay keeps one per Track and session: NOT_SUPPORTED.
#[test]
fn a_second_subscription_to_a_track_follows_the_draft() {
    for (pv, sv) in COMBOS {
        let ctx = format!("{pv:?}->{sv:?}");
        let mut r = Relay::new(2);
        let t = r.track_owned_by(&["live"], 0);
        let (p, subs, _) = r.established(pv, sv, &t, &[1], None);
        let (s, first) = subs[0];
        let second = r.subscribe(s, &t, None);
        let msgs = messages(&r.take_events(s));
        let expected = if since20(sv) { code::NOT_SUPPORTED } else { code::DUPLICATE_SUBSCRIPTION_D16 };
        let e = request_error(&msgs);
        assert_eq!((e.request_id, e.error_code), (second, expected), "{ctx}");
        let st = r.open(p, &header(pv, PUB_ALIAS, 1, 0));
        r.put(p, st, &object(1, 0));
        r.fin(p, st);
        r.run_until_quiet();
        let got: Vec<RequestId> = streams(&r.take_events(s)).iter().map(|st| st.request_id).collect();
        assert_eq!(got, vec![first], "{ctx}: the first subscription goes on");
        r.assert_no_closes();
    }
}

/// Object datagrams reach subscribers on two cores with the relay's alias, header and payload
/// unchanged.
#[test]
fn datagrams_reach_every_subscriber() {
    for (pv, sv) in COMBOS {
        let mut r = Relay::new(3);
        let t = r.track_owned_by(&["live"], 0);
        let alias = r.alias(&t);
        let (p, subs, _up) = r.established(pv, sv, &t, &[1, 2], None);
        let mut props = Properties::new();
        props.push(0x42, KvValue::Int(5));
        let sent: Vec<(DatagramHeader, Bytes)> = (0..3)
            .map(|i| {
                let h = DatagramHeader {
                    track_alias: PUB_ALIAS,
                    group_id: 7,
                    object_id: i,
                    publisher_priority: Some(4),
                    properties: if i == 1 { props.clone() } else { Properties::new() },
                    end_of_group: i == 2,
                    status: None,
                };
                (h, Bytes::from(format!("datagram {i}")))
            })
            .collect();
        for (h, payload) in &sent {
            r.session(p).send_datagram(h, payload).unwrap();
        }
        r.run_until_quiet();
        for &(s, rid) in &subs {
            let got: Vec<(RequestId, DatagramHeader, Bytes)> = r
                .take_events(s)
                .into_iter()
                .filter_map(|e| match e {
                    Event::Datagram { request_id, header, payload } => Some((request_id, header, payload)),
                    _ => None,
                })
                .collect();
            let want: Vec<(RequestId, DatagramHeader, Bytes)> = sent
                .iter()
                .map(|(h, p)| (rid, DatagramHeader { track_alias: alias, ..h.clone() }, p.clone()))
                .collect();
            assert_eq!(got, want, "{pv:?}->{sv:?}");
        }
        r.assert_no_closes();
    }
}

/// SUBSCRIBE with no publisher for its namespace: REQUEST_ERROR DOES_NOT_EXIST, nothing kept.
#[test]
fn subscribe_without_publisher_is_does_not_exist() {
    for v in DRAFTS {
        for owner in 0..2 {
            let mut r = Relay::new(2);
            let p = r.connect(0, v);
            r.announce(p, &["other"]);
            let s = r.connect(1, v);
            let t = r.track_owned_by(&["nobody"], owner);
            let rid = r.subscribe(s, &t, None);
            let e = request_error(&messages(&r.take_events(s)));
            assert_eq!((e.request_id, e.error_code), (rid, code::DOES_NOT_EXIST), "{v:?}");
            assert!(r.take_events(p).is_empty());
            r.assert_idle();
            r.assert_no_closes();
        }
    }
}

/// Publisher A announces ["a"], B announces ["a","b"]: a track in ["a","b","c"] is subscribed
/// from both (every matching publisher: draft-16 "Relays MUST send SUBSCRIBE messages to all
/// matching publishers", draft-22 §7.6), B first (the longest prefix); the first SUBSCRIBE_OK
/// answers the subscriber, the second adds nothing for it. One in ["a","x"] goes to A alone;
/// after B withdraws, ["a","b","c"] goes to A alone. (Only the longest prefix used to be
/// asked.)
#[test]
fn namespace_routing_subscribes_every_matching_publisher() {
    for (pv, sv) in COMBOS {
        let mut r = Relay::new(3);
        let a = r.connect(0, pv);
        let b = r.connect(1, pv);
        let s = r.connect(2, sv);
        r.announce(a, &["a"]);
        let b_ns = r.announce(b, &["a", "b"]);

        let deep = track(&["a", "b", "c"], "t");
        let rid = r.subscribe(s, &deep, None);
        let up = r.upstream_subscribe(b, &deep);
        let up_a = r.upstream_subscribe(a, &deep);
        r.accept(b, &up, None);
        subscribe_ok(&messages(&r.take_events(s)), rid);
        r.accept_as(a, &up_a, TrackAlias(76), None);
        assert!(messages(&r.take_events(s)).is_empty(), "{pv:?}: answered once");

        let shallow = track(&["a", "x"], "t");
        let rid2 = r.subscribe(s, &shallow, None);
        assert!(r.take_events(b).is_empty());
        let up2 = r.upstream_subscribe(a, &shallow);
        r.accept(a, &up2, None);
        subscribe_ok(&messages(&r.take_events(s)), rid2);

        // B withdraws ["a","b"] (draft-16 PUBLISH_NAMESPACE_DONE, draft-22 cancels the request).
        r.send(b, Message::PublishNamespaceDone(b_ns));
        r.run_until_quiet();
        let other = track(&["a", "b", "c"], "u");
        let rid3 = r.subscribe(s, &other, None);
        assert!(r.take_events(b).is_empty(), "{pv:?}: withdrawn namespace still routed");
        let up3 = r.upstream_subscribe(a, &other);
        r.accept_as(a, &up3, TrackAlias(78), None);
        subscribe_ok(&messages(&r.take_events(s)), rid3);
        r.assert_no_closes();
    }
}

/// A subscriber joining mid-track with the default filter (and one with NextObject), on the
/// first subscriber's core and on another, gets exactly the objects after the largest
/// location at its SUBSCRIBE_OK; the early subscriber gets everything.
#[test]
fn late_subscriber_starts_after_the_largest_location() {
    for (pv, sv) in COMBOS {
        let mut r = Relay::new(3);
        let t = r.track_owned_by(&["live"], 0);
        let alias = r.alias(&t);
        let (p, subs, _up) = r.established(pv, sv, &t, &[1], Some(Location::new(0, 7)));
        let (s1, rid1) = subs[0];
        let h = header(pv, PUB_ALIAS, 1, 0);
        let st = r.open(p, &h);
        let g1: Vec<_> = (0..6).map(|i| object(1, i)).collect();
        for o in &g1[..3] {
            r.put(p, st, o);
        }
        r.run_until_quiet();

        let late_same = r.connect(1, sv);
        let rid_same = r.subscribe(late_same, &t, None);
        let late_other = r.connect(2, sv);
        let rid_other = r.subscribe(late_other, &t, Some(LocationFilter::NextObject));
        for (s, rid) in [(late_same, rid_same), (late_other, rid_other)] {
            let ok = subscribe_ok(&messages(&r.take_events(s)), rid);
            assert_eq!(ok.params.largest_object, Some(Location::new(1, 2)), "{pv:?}->{sv:?}");
        }
        for o in &g1[3..] {
            r.put(p, st, o);
        }
        r.fin(p, st);
        let h2 = header(pv, PUB_ALIAS, 2, 0);
        let st2 = r.open(p, &h2);
        let g2: Vec<_> = (0..2).map(|i| object(2, i)).collect();
        for o in &g2 {
            r.put(p, st2, o);
        }
        r.fin(p, st2);
        r.run_until_quiet();

        let seen = streams(&r.take_events(s1));
        assert_eq!(seen.len(), 2);
        assert_stream(&seen[0], rid1, expected_header(&h, alias, sv, true), &g1, Some(None));
        assert_stream(&seen[1], rid1, expected_header(&h2, alias, sv, true), &g2, Some(None));
        for (s, rid) in [(late_same, rid_same), (late_other, rid_other)] {
            let seen = streams(&r.take_events(s));
            assert_eq!(seen.len(), 2, "{pv:?}->{sv:?}");
            assert_stream(&seen[0], rid, expected_header(&h, alias, sv, false), &g1[3..], Some(None));
            assert_stream(&seen[1], rid, expected_header(&h2, alias, sv, true), &g2, Some(None));
        }
        r.assert_no_closes();
    }
}

/// AbsoluteStart from a later group: nothing from earlier groups, everything from that group
/// on; a subscriber with an absolute window (AbsoluteStartGroupEnd in draft-16, AbsoluteRange
/// in draft-22) gets only the objects inside it.
#[test]
fn absolute_filters_skip_what_is_outside_them() {
    for (pv, sv) in COMBOS {
        let mut r = Relay::new(2);
        let t = r.track_owned_by(&["live"], 1);
        let alias = r.alias(&t);
        let p = r.connect(0, pv);
        r.announce(p, &["live"]);
        let s = r.connect(1, sv);
        let start = Location::new(3, 0);
        let rid = r.subscribe(s, &t, Some(LocationFilter::AbsoluteStart { start }));
        // A window from (2,1): to the end of group 3 in draft-16 and draft-18 (their filters end
        // only at a group's end), to (3,1) inclusive in draft-22.
        let w = r.connect(0, sv);
        let from = Location::new(2, 1);
        let (window, g3_end) = match sv {
            D16 | D18 => (LocationFilter::AbsoluteStartGroupEnd { start: from, end_group: 3 }, 3),
            _ => (LocationFilter::AbsoluteRange { start: from, end: Location::new(3, 1) }, 2),
        };
        let wrid = r.subscribe(w, &t, Some(window));
        let up = r.upstream_subscribe(p, &t);
        r.accept(p, &up, None);
        subscribe_ok(&messages(&r.take_events(s)), rid);
        subscribe_ok(&messages(&r.take_events(w)), wrid);

        let mut sent = Vec::new();
        for g in 1..5 {
            let h = header(pv, PUB_ALIAS, g, 0);
            let st = r.open(p, &h);
            let objs: Vec<_> = (0..3).map(|i| object(g, i)).collect();
            for o in &objs {
                r.put(p, st, o);
            }
            r.fin(p, st);
            r.run_until_quiet();
            sent.push((h, objs));
        }
        let seen = streams(&r.take_events(s));
        assert_eq!(seen.len(), 2, "{pv:?}->{sv:?}: groups 3 and 4 only");
        for (got, (h, objs)) in seen.iter().zip(&sent[2..]) {
            assert_stream(got, rid, expected_header(h, alias, sv, true), objs, Some(None));
        }
        let seen = streams(&r.take_events(w));
        assert_eq!(seen.len(), 2, "{pv:?}->{sv:?}: the range spans groups 2 and 3");
        assert_stream(
            &seen[0],
            wrid,
            expected_header(&sent[1].0, alias, sv, false),
            &sent[1].1[1..],
            Some(None),
        );
        assert_stream(
            &seen[1],
            wrid,
            expected_header(&sent[2].0, alias, sv, true),
            &sent[2].1[..g3_end],
            Some(None),
        );
        r.assert_no_closes();
    }
}

/// TRACK_STATUS of a relayed track is answered from the relay's state (LARGEST_OBJECT; the
/// Track Properties in draft-22, whose REQUEST_OK carries them) without asking upstream; of
/// a track it does not relay, by subscribing upstream as a SUBSCRIBE would (no answer until
/// the publisher's), which then lingers and ends; of a namespace nobody publishes,
/// DOES_NOT_EXIST.
#[test]
fn track_status_from_relay_state_or_upstream() {
    for (pv, sv) in COMBOS {
        let mut r = Relay::new(3);
        let t = r.track_owned_by(&["live"], 2);
        let (p, subs, _up) = r.established(pv, sv, &t, &[1], Some(Location::new(0, 0)));
        r.publish_groups(p, pv, 1..2);
        r.take_events(subs[0].0);
        let c = r.connect(0, sv);
        let ctx = format!("{pv:?}->{sv:?}");

        let rid = r.track_status(c, &t);
        let ok = request_ok(&messages(&r.take_events(c)), &ctx);
        assert_eq!((ok.request_id, ok.params.largest_object), (rid, Some(Location::new(1, 4))), "{ctx}");
        let props = if sv != D16 { track_properties() } else { Properties::new() };
        assert_eq!(ok.track_properties, props, "{ctx}");
        assert!(r.take_events(p).is_empty(), "{ctx}: asked upstream");

        let other = r.track_owned_by(&["live"], 1);
        let rid = r.track_status(c, &other);
        assert!(r.take_events(c).is_empty(), "{ctx}: answered before the publisher");
        let up = r.upstream_subscribe(p, &other);
        r.accept_as(p, &up, TrackAlias(78), Some(Location::new(7, 1)));
        let ok = request_ok(&messages(&r.take_events(c)), &ctx);
        assert_eq!((ok.request_id, ok.params.largest_object), (rid, Some(Location::new(7, 1))), "{ctx}");
        r.advance(RelayConfig::default().linger);
        r.assert_upstream_stopped(p, pv, up.request_id);

        let rid = r.track_status(c, &track(&["nobody"], "x"));
        let e = request_error(&messages(&r.take_events(c)));
        assert_eq!((e.request_id, e.error_code), (rid, code::DOES_NOT_EXIST), "{ctx}");
        assert_eq!(r.state_counts()[1].0, 0, "{ctx}: the status track is gone from its owner");
        r.assert_no_closes();
    }
}

/// A SUBSCRIBE without a filter is unfiltered (draft-16 SUBSCRIPTION FILTER: "If omitted ...
/// the subscription is unfiltered"; draft-22 §3.3.1 "Subscriptions without a filter pass all
/// Objects"): objects of an earlier group that arrive after its SUBSCRIBE_OK (a late subgroup
/// stream) reach it; a NextObject subscriber's window starts after the Largest Object and
/// drops them. (Absent used to be read as NextObject.)
#[test]
fn a_subscription_without_a_filter_is_unfiltered() {
    for (pv, sv) in COMBOS {
        let mut r = Relay::new(2);
        let t = r.track_owned_by(&["live"], 0);
        let alias = r.alias(&t);
        let (p, subs, _up) = r.established(pv, sv, &t, &[1], Some(Location::new(5, 2)));
        let (unfiltered, rid) = subs[0];
        let next = r.connect(1, sv);
        let rid_next = r.subscribe(next, &t, Some(LocationFilter::NextObject));
        subscribe_ok(&messages(&r.take_events(next)), rid_next);

        // A late stream of group 4 (another subgroup, delayed in the network).
        let h = header(pv, PUB_ALIAS, 4, 1);
        let st = r.open(p, &h);
        let late: Vec<_> = (0..2).map(|i| object(4, i)).collect();
        for o in &late {
            r.put(p, st, o);
        }
        r.fin(p, st);
        r.run_until_quiet();

        let seen = streams(&r.take_events(unfiltered));
        assert_eq!(seen.len(), 1, "{pv:?}->{sv:?}: the late group reaches the unfiltered subscription");
        assert_stream(&seen[0], rid, expected_header(&h, alias, sv, true), &late, Some(None));
        assert!(streams(&r.take_events(next)).is_empty(), "{pv:?}->{sv:?}: NextObject drops it");
        r.assert_no_closes();
    }
}

/// Range filters (draft-22 §3.3.2) need the relay's MAX_FILTER_RANGES, which it does not offer
/// (0): a SUBSCRIBE carrying one is refused INVALID_FILTER (0x36), and so is a REQUEST_UPDATE
/// adding one (the subscription then ends, UPDATE_FAILED). They are never accepted and ignored.
#[test]
fn range_filters_are_refused_not_ignored() {
    use wire::model::{Parameters, Range, RangeFilter, RangeFilterKind, RangeSet, Subscribe};
    let filter = RangeFilter {
        kind: RangeFilterKind::SubgroupId,
        set: Some(RangeSet {
            set_id: 0,
            property_type: None,
            ranges: vec![Range { start: 0, end: Some(0) }],
        }),
    };
    let mut r = Relay::new(2);
    let t = r.track_owned_by(&["live"], 0);
    let (_p, subs, _up) = r.established(D22, D22, &t, &[1], Some(Location::new(0, 0)));
    let s = r.connect(1, D22);
    let rid = r.next_request_id(s);
    let params = Parameters { range_filters: vec![filter.clone()], ..Default::default() };
    r.send(s, Message::Subscribe(Subscribe { request_id: rid, track: t.clone(), params }));
    r.run_until_quiet();
    let msgs = messages(&r.take_events(s));
    assert!(
        matches!(msgs.as_slice(), [Message::RequestError(e)] if e.request_id == rid && e.error_code == 0x36),
        "{msgs:?}"
    );
    let (s1, rid1) = subs[0];
    r.update(s1, rid1, Parameters { range_filters: vec![filter], ..Default::default() });
    let msgs = messages(&r.take_events(s1));
    assert!(msgs.iter().any(|m| matches!(m, Message::RequestError(e) if e.error_code == 0x36)), "{msgs:?}");
    assert!(msgs.iter().any(|m| matches!(m, Message::PublishDone(d) if d.request_id == rid1)), "{msgs:?}");
    r.assert_no_closes();
}

/// Priorities of live streams (draft-22 §5.1): a draft-22 stream whose header carries no
/// publisher priority is sent at the track's DEFAULT_PUBLISHER_PRIORITY; a subscription that
/// asked no GROUP_ORDER takes the track's DEFAULT_PUBLISHER_GROUP_ORDER (descending here); a
/// REQUEST_UPDATE of SUBSCRIBER_PRIORITY moves the streams already open, not only new ones.
#[test]
fn live_streams_follow_the_tracks_priorities_and_updates() {
    use session::{data_urgency, Transmit};
    use wire::model::Parameters;
    let mut r = Relay::new(2);
    let t = r.track_owned_by(&["live"], 0);
    let p = r.connect(0, D22);
    r.announce(p, &["live"]);
    let s = r.connect(1, D22);
    let rid = r.subscribe(s, &t, None);
    let up = r.upstream_subscribe(p, &t);
    let mut props = Properties::new();
    props.push(0x0E, KvValue::Int(10)); // DEFAULT_PUBLISHER_PRIORITY
    props.push(0x22, KvValue::Int(2)); // DEFAULT_PUBLISHER_GROUP_ORDER: descending
    r.accept_with(p, &up, PUB_ALIAS, Some(Location::new(0, 0)), props);
    subscribe_ok(&messages(&r.take_events(s)), rid);
    r.clients[s].relay_sent.clear();

    let mut h = header(D22, PUB_ALIAS, 1, 0);
    h.publisher_priority = None;
    let st = r.open(p, &h);
    r.put(p, st, &object(1, 0));
    r.run_until_quiet();
    let priorities = |r: &mut Relay| -> Vec<(u8, bool)> {
        let sent = std::mem::take(&mut r.clients[s].relay_sent);
        sent.iter()
            .filter_map(|t| match t {
                Transmit::Priority { urgency, descending, .. } => Some((*urgency, *descending)),
                _ => None,
            })
            .collect()
    };
    assert_eq!(priorities(&mut r), [(data_urgency(128, 10), true)], "the track's defaults");

    r.update(s, rid, Parameters { subscriber_priority: Some(0), ..Default::default() });
    assert_eq!(priorities(&mut r), [(data_urgency(0, 10), true)], "the open stream moves");
    r.assert_no_closes();
}

/// Two publishers announce ["live"] (draft-16 "Relays MUST send SUBSCRIBE messages to all
/// matching publishers", draft-22 §7.6): a subscriber's SUBSCRIBE goes up to both. One that
/// refuses costs nothing while the other answers; what both send is merged (each object once,
/// one stream per subgroup); one ending leaves the subscription to the other; the last one's
/// PUBLISH_DONE ends it.
#[test]
fn every_announcer_is_subscribed_and_their_objects_merged() {
    for (pv, sv) in COMBOS {
        let ctx = format!("{pv:?}->{sv:?}");
        let mut r = Relay::new(2);
        let t = r.track_owned_by(&["live"], 1);
        let a = r.connect(0, pv);
        let b = r.connect(1, pv);
        r.announce(a, &["live"]);
        r.announce(b, &["live"]);
        let s = r.connect(1, sv);
        let rid = r.subscribe(s, &t, None);
        let up_a = r.upstream_subscribe(a, &t);
        let up_b = r.upstream_subscribe(b, &t);
        // B (asked first: the newest announcement) does not have it; A does.
        let e = wire::model::RequestError {
            request_id: up_b.request_id,
            error_code: code::DOES_NOT_EXIST,
            retry_interval: 0,
            reason: Bytes::from_static(b"not here"),
            redirect: None,
        };
        r.send(b, Message::RequestError(e));
        r.run_until_quiet();
        assert!(messages(&r.take_events(s)).is_empty(), "{ctx}: waits for A");
        r.accept(a, &up_a, None);
        subscribe_ok(&messages(&r.take_events(s)), rid);

        // A third publisher C announces: a new track of the namespace is subscribed from all
        // three, and all three answer.
        let c = r.connect(0, pv);
        r.announce(c, &["live"]);
        let t2 = r.track_owned_by(&["live"], 0);
        let rid2 = r.subscribe(s, &t2, None);
        let up_a2 = r.upstream_subscribe(a, &t2);
        let up_c2 = r.upstream_subscribe(c, &t2);
        let up_b2 = r.upstream_subscribe(b, &t2);
        r.accept_as(a, &up_a2, TrackAlias(76), None);
        r.accept(c, &up_c2, None);
        r.accept(b, &up_b2, None);
        subscribe_ok(&messages(&r.take_events(s)), rid2);
        for (p, alias) in [(a, TrackAlias(76)), (c, PUB_ALIAS), (b, PUB_ALIAS)] {
            let st = r.open(p, &header(pv, alias, 1, 0));
            r.put(p, st, &object(1, 0));
            r.put(p, st, &object(1, 1));
            r.fin(p, st);
            r.run_until_quiet();
        }
        let seen = streams(&r.take_events(s));
        let got: Vec<(u64, Vec<u64>)> = seen
            .iter()
            .map(|st| (st.header.group_id, st.objects.iter().map(|(o, _)| o.object_id).collect()))
            .collect();
        assert_eq!(got, vec![(1, vec![0, 1])], "{ctx}: one stream, each object once");
        assert_eq!(seen[0].end, Some(None), "{ctx}");

        // A and C end their subscriptions: B carries on; B's end is the track's.
        r.send(a, done_msg(up_a2.request_id, 1));
        r.send(c, done_msg(up_c2.request_id, 1));
        r.run_until_quiet();
        assert!(
            messages(&r.take_events(s))
                .iter()
                .all(|m| !matches!(m, Message::PublishDone(d) if d.request_id == rid2)),
            "{ctx}"
        );
        r.send(b, done_msg(up_b2.request_id, 1));
        r.run_until_quiet();
        let done = publish_done(&messages(&r.take_events(s)));
        assert_eq!(done.request_id, rid2, "{ctx}");
        r.assert_no_closes();
    }
}

/// A subscriber core that is behind (the owner core's mesh queue to it backed up: the
/// runtime says so: `set_mesh_backlog`) loses whole subgroups, never an object inside a
/// stream it was given: a stream already forwarded there goes on to its end, a stream that
/// opens meanwhile is not forwarded there at all (counted), a datagram is dropped, and control
/// messages still go (a new SUBSCRIBE on that core is answered). Once it catches up, new
/// streams reach it again.
#[test]
fn a_core_that_is_behind_loses_whole_subgroups_not_objects() {
    for (pv, sv) in COMBOS {
        let ctx = format!("{pv:?}->{sv:?}");
        let mut r = Relay::new(2);
        let t = r.track_owned_by(&["live"], 0);
        let p = r.connect(0, pv);
        r.announce(p, &["live"]);
        let s = r.connect(1, sv);
        let rid = r.subscribe(s, &t, None);
        let up = r.upstream_subscribe(p, &t);
        r.accept(p, &up, None);
        subscribe_ok(&messages(&r.take_events(s)), rid);
        let g1 = r.open(p, &header(pv, PUB_ALIAS, 1, 0));
        r.put(p, g1, &object(1, 0));
        r.run_until_quiet();

        r.set_congested(0, 1, true);
        r.put(p, g1, &object(1, 1));
        let g2 = r.open(p, &header(pv, PUB_ALIAS, 2, 0));
        r.put(p, g2, &object(2, 0));
        r.fin(p, g1);
        r.fin(p, g2);
        let dh = DatagramHeader {
            track_alias: PUB_ALIAS,
            group_id: 2,
            object_id: 5,
            publisher_priority: Some(4),
            properties: Properties::new(),
            end_of_group: false,
            status: None,
        };
        r.session(p).send_datagram(&dh, b"dropped").unwrap();
        r.run_until_quiet();
        // Control still crosses: another track owned by core 0, subscribed from core 1.
        let other = r.track_owned_by(&["live", "x"], 0);
        let s2 = r.connect(1, sv);
        let rid2 = r.subscribe(s2, &other, None);
        let up2 = r.upstream_subscribe(p, &other);
        r.accept_as(p, &up2, TrackAlias(76), None);
        subscribe_ok(&messages(&r.take_events(s2)), rid2);

        r.set_congested(0, 1, false);
        let g3 = r.open(p, &header(pv, PUB_ALIAS, 3, 0));
        r.put(p, g3, &object(3, 0));
        r.fin(p, g3);
        r.run_until_quiet();

        let ev = r.take_events(s);
        let got: Vec<(u64, Vec<u64>, Option<Option<u64>>)> = streams(&ev)
            .iter()
            .map(|st| (st.header.group_id, st.objects.iter().map(|(o, _)| o.object_id).collect(), st.end))
            .collect();
        assert_eq!(got, vec![(1, vec![0, 1], Some(None)), (3, vec![0], Some(None))], "{ctx}");
        assert_eq!(ev.iter().filter(|e| matches!(e, Event::Datagram { .. })).count(), 0, "{ctx}");
        assert_eq!(r.shards[0].stats().mesh_shed_streams, 1, "{ctx}");
        r.assert_no_closes();
    }
}

/// A core that takes nothing more from another (stuck) bounds what waits for it: past half of
/// `mesh_queue`, a stream that opens is not forwarded there; an object that would pass the
/// limit resets its stream there instead (EXCESSIVE_LOAD), after the objects that fit, in
/// order; what follows of that stream is not sent; the data waiting never passes the limit. On
/// both hops that carry objects between cores: the owner to a subscriber core, and a
/// publisher's core to the owner. Once the core catches up, new streams reach it whole.
#[test]
fn a_stuck_core_gets_whole_subgroups_reset_never_more_than_the_mesh_limit() {
    const LIMIT: usize = 4096;
    // (publisher's core, subscriber's core, the stuck pair); the track's owner is core 0.
    let hops = [("owner -> subscriber core", 0, 1, (0, 1)), ("publisher core -> owner", 1, 0, (1, 0))];
    for (hop, pub_core, sub_core, (src, dst)) in hops {
        for (pv, sv) in COMBOS {
            let ctx = format!("{hop} {pv:?}->{sv:?}");
            let mut r = Relay::with_config(2, RelayConfig { mesh_queue: LIMIT, ..RelayConfig::default() });
            let t = r.track_owned_by(&["live"], 0);
            let p = r.connect(pub_core, pv);
            r.announce(p, &["live"]);
            let s = r.connect(sub_core, sv);
            let rid = r.subscribe(s, &t, None);
            let up = r.upstream_subscribe(p, &t);
            r.accept(p, &up, None);
            subscribe_ok(&messages(&r.take_events(s)), rid);
            let g1 = r.open(p, &header(pv, PUB_ALIAS, 1, 0));
            r.put(p, g1, &object(1, 0));
            r.run_until_quiet();

            r.stall(src, dst, true);
            for id in 1..=40 {
                r.put(p, g1, &object(1, id));
            }
            r.run_until_quiet();
            let g2 = r.open(p, &header(pv, PUB_ALIAS, 2, 0));
            r.put(p, g2, &object(2, 0));
            r.fin(p, g2);
            r.fin(p, g1);
            r.run_until_quiet();
            // Data stays within the limit; the reset (control) always goes.
            let queued = r.mesh_queued(src, dst);
            let reset_msg = relay::RelayMsg::data_weight(0);
            assert!(queued <= LIMIT + reset_msg, "{ctx}: {queued} bytes wait for the stuck core");
            assert!(queued > LIMIT / 2, "{ctx}: {queued} bytes: the limit was what stopped it");
            assert_eq!(r.shards[src].stats().mesh_shed_streams, 2, "{ctx}: g1 reset, g2 not opened");

            r.stall(src, dst, false);
            r.run_until_quiet();
            let g3 = r.open(p, &header(pv, PUB_ALIAS, 3, 0));
            r.put(p, g3, &object(3, 0));
            r.fin(p, g3);
            r.run_until_quiet();

            let ev = r.take_events(s);
            let seen = streams(&ev);
            let groups: Vec<u64> = seen.iter().map(|st| st.header.group_id).collect();
            assert_eq!(groups, vec![1, 3], "{ctx}");
            let ids: Vec<u64> = seen[0].objects.iter().map(|(o, _)| o.object_id).collect();
            assert!(ids.len() > 1 && ids.len() < 41, "{ctx}: {} objects of g1 reached it", ids.len());
            assert_eq!(ids, (0..ids.len() as u64).collect::<Vec<_>>(), "{ctx}: a prefix, in order");
            let reset = wire::ResetCode::ExcessiveLoad.code(sv);
            assert_eq!(seen[0].end, Some(Some(reset)), "{ctx}: g1 reset");
            assert_eq!(seen[1].objects.len(), 1, "{ctx}");
            assert_eq!(seen[1].end, Some(None), "{ctx}: g3 whole");
            r.assert_no_closes();
        }
    }
}

/// The upstream SUBSCRIBE asks for at least what the track's first subscriber asked of the
/// relay (draft-16 and draft-18 §5.1.2: an absolute Start Location "MAY be less than the
/// Largest Object observed at the publisher"): an absolute start, a window, or no filter reach
/// back before the publisher's Largest Object to the objects it already holds; a live filter
/// starts at its next object. A publisher that honours the filter sends what it holds from
/// there, and the subscriber gets exactly the objects inside its own window, in order.
#[test]
fn the_upstream_subscribe_covers_what_the_first_subscriber_asked() {
    use LocationFilter as F;
    let largest = Location::new(3, 2);
    let at = |g, o| Location::new(g, o);
    for (pv, sv) in COMBOS {
        // (the subscriber's filter, the upstream filter, the subscriber's window)
        let window = match sv {
            D16 | D18 => F::AbsoluteStartGroupEnd { start: at(1, 2), end_group: 4 },
            _ => F::AbsoluteRange { start: at(1, 2), end: at(4, 1) },
        };
        let window_end = if since20(sv) { at(4, 1) } else { at(4, u64::MAX) };
        let mut cases = vec![
            (None, None, at(0, 0), None),
            (Some(F::AbsoluteStart { start: at(0, 0) }), None, at(0, 0), None),
            (
                Some(F::AbsoluteStart { start: at(2, 1) }),
                Some(F::AbsoluteStart { start: at(2, 1) }),
                at(2, 1),
                None,
            ),
            (Some(window), Some(F::AbsoluteStart { start: at(1, 2) }), at(1, 2), Some(window_end)),
            (Some(F::NextObject), Some(F::NextObject), at(3, 3), None),
            (Some(F::RelativeStart { groups_back: 0 }), Some(F::NextObject), at(4, 0), None),
        ];
        if since20(sv) {
            // Two groups back: a draft-16 or draft-18 publisher cannot be asked that, and is
            // asked for everything instead.
            let up = since20(pv).then_some(F::RelativeStart { groups_back: 2 });
            cases.push((Some(F::RelativeStart { groups_back: 2 }), up, at(2, 0), None));
        }
        for (filter, upstream, from, to) in cases {
            let ctx = format!("{pv:?}->{sv:?} {filter:?}");
            let mut r = Relay::new(2);
            let t = r.track_owned_by(&["live"], 1);
            let p = r.connect(0, pv);
            r.announce(p, &["live"]);
            let s = r.connect(1, sv);
            let rid = r.subscribe(s, &t, filter);
            let up = r.upstream_subscribe(p, &t);
            assert_eq!(up.params.location_filter, upstream, "{ctx}");
            r.accept(p, &up, Some(largest));
            let ok = subscribe_ok(&messages(&r.take_events(s)), rid);
            assert_eq!(ok.params.largest_object, Some(largest), "{ctx}");

            // The publisher holds groups 0 to 3 (objects 0 to 2 each) and goes on with groups
            // 4 and 5; it sends what the upstream filter covers.
            let first = match upstream {
                None => at(0, 0),
                Some(F::AbsoluteStart { start }) => start,
                Some(F::RelativeStart { groups_back }) => at(largest.group + 1 - groups_back, 0),
                _ => at(3, 3),
            };
            let mut sent = Vec::new();
            for g in first.group..6 {
                let lo = if g == first.group { first.object } else { 0 };
                if lo > 2 {
                    continue;
                }
                let mut h = header(pv, PUB_ALIAS, g, 0);
                h.first_object &= lo == 0;
                let st = r.open(p, &h);
                for o in lo..3 {
                    r.put(p, st, &object(g, o));
                    sent.push(at(g, o));
                }
                r.fin(p, st);
                r.run_until_quiet();
            }
            let seen: Vec<Location> = streams(&r.take_events(s))
                .iter()
                .flat_map(|st| st.objects.iter().map(|o| at(st.header.group_id, o.0.object_id)))
                .collect();
            let want: Vec<Location> =
                sent.into_iter().filter(|&l| l >= from && to.is_none_or(|e| l <= e)).collect();
            assert_eq!(seen, want, "{ctx}");
            r.assert_no_closes();
        }
    }
}

/// A subscriber that joins with an absolute start before the Largest Location is sent what the
/// relay's cache holds of its window first, one stream per subgroup, then what arrives live;
/// the subgroup still open upstream continues on the stream the cache began (nothing lost,
/// nothing twice, never reordered). On the first subscriber's core and on another, for a
/// SUBSCRIBE-fed track and for a PUBLISH-fed one (taken and cached before anyone subscribed).
/// A subscriber without a filter, or from the next object or group, gets only what arrives
/// after it.
#[test]
fn a_late_subscriber_with_a_past_start_gets_the_cache_then_the_live_objects() {
    for (pv, sv) in COMBOS {
        for (late_core, published) in [(1, false), (2, false), (1, true)] {
            let ctx = format!("{pv:?}->{sv:?} core {late_core} published {published}");
            let mut r = Relay::new(3);
            let t = r.track_owned_by(&["live"], 0);
            let p = if published {
                let p = r.connect(0, pv);
                let prid = r.next_request_id(p);
                r.send(p, publish_msg(pv, prid, &t, None));
                r.run_until_quiet();
                assert!(publish_answer(pv, &messages(&r.take_events(p)), prid), "{ctx}");
                p
            } else {
                r.established(pv, sv, &t, &[1], None).0
            };
            r.publish_groups(p, pv, 1..3);
            let h3 = header(pv, PUB_ALIAS, 3, 0);
            let st3 = r.open(p, &h3);
            for o in 0..3 {
                r.put(p, st3, &object(3, o));
            }
            r.run_until_quiet();

            let late = r.connect(late_core, sv);
            let start = Location::new(1, 3);
            let rid = r.subscribe(late, &t, Some(LocationFilter::AbsoluteStart { start }));
            let live = r.connect(late_core, sv);
            let live_rid = r.subscribe(live, &t, None);
            let mut events = Vec::new();
            for (s, rid) in [(late, rid), (live, live_rid)] {
                let ev = r.take_events(s);
                let ok = subscribe_ok(&messages(&ev), rid);
                assert_eq!(ok.params.largest_object, Some(Location::new(3, 2)), "{ctx}");
                events.push(ev);
            }
            for o in 3..5 {
                r.put(p, st3, &object(3, o));
            }
            r.fin(p, st3);
            r.publish_groups(p, pv, 4..5);

            let mut got = |r: &mut Relay, s| -> Vec<(u64, Vec<u64>, bool)> {
                let mut ev = events.remove(0);
                ev.extend(r.take_events(s));
                streams(&ev)
                    .iter()
                    .map(|st| {
                        let ids = st.objects.iter().map(|o| o.0.object_id).collect();
                        (st.header.group_id, ids, st.end == Some(None))
                    })
                    .collect()
            };
            let want = vec![
                (1, vec![3, 4], true),
                (2, vec![0, 1, 2, 3, 4], true),
                (3, vec![0, 1, 2, 3, 4], true),
                (4, vec![0, 1, 2, 3, 4], true),
            ];
            assert_eq!(got(&mut r, late), want, "{ctx}");
            let want_live = vec![(3, vec![3, 4], true), (4, vec![0, 1, 2, 3, 4], true)];
            assert_eq!(got(&mut r, live), want_live, "{ctx}: no filter, only what arrives after");
            r.assert_no_closes();
        }
    }
}

/// A late subscriber whose filter starts some groups back from the Largest Object (draft-20
/// and draft-22 RelativeStart; moq-lite-js's Largest Object, ARCHITECTURE.md "Peer quirks")
/// gets those groups from the cache from their first object, then the live objects: a
/// player joining mid-GOP starts at the GOP's keyframe.
#[test]
fn a_late_subscriber_some_groups_back_gets_them_from_the_cache() {
    for (pv, sv) in COMBOS.into_iter().filter(|(_, sv)| since20(*sv)) {
        let ctx = format!("{pv:?}->{sv:?}");
        let mut r = Relay::new(2);
        let t = r.track_owned_by(&["live"], 0);
        let p = r.established(pv, sv, &t, &[1], None).0;
        r.publish_groups(p, pv, 1..3);
        let st3 = r.open(p, &header(pv, PUB_ALIAS, 3, 0));
        for o in 0..3 {
            r.put(p, st3, &object(3, o));
        }
        r.run_until_quiet();

        let late = r.connect(1, sv);
        let rid = r.subscribe(late, &t, Some(LocationFilter::RelativeStart { groups_back: 1 }));
        let mut ev = r.take_events(late);
        assert_eq!(
            subscribe_ok(&messages(&ev), rid).params.largest_object,
            Some(Location::new(3, 2)),
            "{ctx}"
        );
        for o in 3..5 {
            r.put(p, st3, &object(3, o));
        }
        r.fin(p, st3);
        r.publish_groups(p, pv, 4..5);
        ev.extend(r.take_events(late));
        let got: Vec<(u64, Vec<u64>)> = streams(&ev)
            .iter()
            .map(|st| (st.header.group_id, st.objects.iter().map(|o| o.0.object_id).collect()))
            .collect();
        assert_eq!(got, vec![(3, vec![0, 1, 2, 3, 4]), (4, vec![0, 1, 2, 3, 4])], "{ctx}");
        r.assert_no_closes();
    }
}

/// A subscriber whose absolute start lies before the relay's cache (the relay subscribed the
/// track live, from its Largest Object) is sent what lies before the cache from an upstream
/// FETCH of exactly that range, then the cache, then the live objects: in order, nothing
/// twice. While the fetch is out, what arrives live waits in the cache for it.
#[test]
fn a_late_subscriber_starting_before_the_cache_is_filled_from_upstream() {
    for (pv, sv) in COMBOS {
        let ctx = format!("{pv:?}->{sv:?}");
        let mut r = Relay::new(2);
        let t = r.track_owned_by(&["live"], 1);
        let p = r.connect(0, pv);
        r.announce(p, &["live"]);
        let first = r.connect(1, sv);
        let rid = r.subscribe(first, &t, Some(LocationFilter::NextObject));
        let up = r.upstream_subscribe(p, &t);
        assert_eq!(up.params.location_filter, Some(LocationFilter::NextObject), "{ctx}");
        r.accept(p, &up, Some(Location::new(5, 4)));
        subscribe_ok(&messages(&r.take_events(first)), rid);
        r.publish_groups(p, pv, 6..8);

        let late = r.connect(0, sv);
        let rid = r.subscribe(late, &t, Some(LocationFilter::AbsoluteStart { start: Location::new(4, 2) }));
        let mut events = r.take_events(late);
        subscribe_ok(&messages(&events), rid);
        let fetches = r.upstream_fetches(p);
        assert_eq!(fetches.len(), 1, "{ctx}");
        // Through the end of group 5: the cache starts at (6, 0).
        let range = LocationFilter::AbsoluteStartGroupEnd { start: Location::new(4, 2), end_group: 5 };
        assert_eq!(fetches[0].params.location_filter, Some(range), "{ctx}: only what the cache lacks");
        // Group 8 goes on live meanwhile.
        r.publish_groups(p, pv, 8..9);
        assert!(streams(&r.take_events(late)).is_empty(), "{ctx}: nothing before the fill");
        let mut fetched = locations(4..5, 2..5);
        fetched.extend(locations(5..6, 0..5));
        r.serve_upstream_fetch(p, &fetches[0], &fetched);
        r.publish_groups(p, pv, 9..10);
        events.extend(r.take_events(late));
        let seen: Vec<(u64, u64)> = streams(&events)
            .iter()
            .flat_map(|st| st.objects.iter().map(|o| (st.header.group_id, o.0.object_id)).collect::<Vec<_>>())
            .collect();
        let mut want = fetched.clone();
        want.extend(locations(6..10, 0..5));
        assert_eq!(seen, want, "{ctx}");
        r.assert_no_closes();
    }
}
