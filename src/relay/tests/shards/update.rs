//! REQUEST_UPDATE: pausing, resuming and re-filtering a subscription, invalid updates, a
//! namespace subscription's new prefix, and the Forward State carried upstream (within the
//! publisher's MAX_REQUEST_UPDATES).

use session::Event;
use wire::code;
use wire::model::{Location, LocationFilter, Message, Parameters, RequestId, SetupOptions};

use crate::common::*;
use crate::harness::{messages, streams, ClientId, Relay};

fn object_ids(events: &[Event]) -> Vec<(u64, u64)> {
    streams(events)
        .iter()
        .flat_map(|s| s.objects.iter().map(|o| (s.header.group_id, o.0.object_id)).collect::<Vec<_>>())
        .collect()
}

impl Relay {
    /// The REQUEST_UPDATEs of the upstream subscription `up` the publisher got: their FORWARD
    /// values.
    fn upstream_forward_updates(&mut self, p: ClientId, up: RequestId) -> Vec<Option<bool>> {
        messages(&self.take_events(p))
            .into_iter()
            .map(|m| match m {
                Message::RequestUpdate(u) if u.existing_request_id == up => u.params.forward,
                other => panic!("publisher got {other:?}"),
            })
            .collect()
    }
}

/// A subscriber pauses (FORWARD 0) and resumes its subscription: each update gets exactly
/// one REQUEST_OK carrying LARGEST_OBJECT (so it can FETCH what it skipped), and objects sent
/// while paused never reach it; a new Location filter applies to objects not yet sent; an
/// empty range (draft-22) is refused (INVALID_RANGE) and ends the subscription with
/// UPDATE_FAILED.
#[test]
fn request_update_pauses_resumes_and_refilters_a_subscription() {
    for (pv, sv) in COMBOS {
        let mut r = Relay::new(2);
        let t = r.track_owned_by(&["live"], 0);
        let (p, subs, _up) = r.established(pv, sv, &t, &[1], Some(Location::new(0, 0)));
        let (s, rid) = subs[0];
        let ctx = format!("{pv:?}->{sv:?}");
        let st = r.open(p, &header(pv, PUB_ALIAS, 1, 0));
        let send = |r: &mut Relay, range: std::ops::Range<u64>| {
            for o in range {
                r.put(p, st, &object(1, o));
            }
            r.run_until_quiet();
        };
        send(&mut r, 0..2);
        assert_eq!(object_ids(&r.take_events(s)), [(1, 0), (1, 1)], "{ctx}");

        let answer = r.update(s, rid, Parameters { forward: Some(false), ..Default::default() });
        let ok = request_ok(&messages(&r.take_events(s)), &ctx);
        assert_eq!((ok.request_id, ok.params.largest_object), (answer, Some(Location::new(1, 1))), "{ctx}");
        send(&mut r, 2..4);
        assert!(object_ids(&r.take_events(s)).is_empty(), "{ctx}: objects while paused");

        let answer = r.update(s, rid, Parameters { forward: Some(true), ..Default::default() });
        let ok = request_ok(&messages(&r.take_events(s)), &ctx);
        assert_eq!((ok.request_id, ok.params.largest_object), (answer, Some(Location::new(1, 3))), "{ctx}");
        send(&mut r, 4..5);
        assert_eq!(object_ids(&r.take_events(s)), [(1, 4)], "{ctx}");

        // From object 6 of group 1 through the end of group 1.
        let range = LocationFilter::AbsoluteStartGroupEnd { start: Location::new(1, 6), end_group: 1 };
        r.update(s, rid, Parameters { location_filter: Some(range), ..Default::default() });
        request_ok(&messages(&r.take_events(s)), &ctx);
        send(&mut r, 5..9);
        r.fin(p, st);
        let st2 = r.open(p, &header(pv, PUB_ALIAS, 2, 0));
        r.put(p, st2, &object(2, 0));
        r.run_until_quiet();
        assert_eq!(object_ids(&r.take_events(s)), [(1, 6), (1, 7), (1, 8)], "{ctx}");

        // An empty range (draft-22; draft-16's and draft-18's codecs cannot express one: the
        // draft-16 decoder closes the session, draft-18's End Group Delta cannot go back) is
        // refused and ends the subscription.
        if !since20(sv) {
            r.assert_no_closes();
            continue;
        }
        let empty = LocationFilter::AbsoluteRange { start: Location::new(3, 5), end: Location::new(3, 2) };
        let answer = r.update(s, rid, Parameters { location_filter: Some(empty), ..Default::default() });
        let msgs = messages(&r.take_events(s));
        let [Message::RequestError(e), Message::PublishDone(d)] = msgs.as_slice() else {
            panic!("{ctx}: {msgs:?}")
        };
        assert_eq!((e.request_id, e.error_code), (answer, code::INVALID_RANGE), "{ctx}");
        assert_eq!((d.request_id, d.status_code), (rid, code::DONE_UPDATE_FAILED), "{ctx}");
        assert_eq!(r.state_counts()[1].1, 0, "{ctx}: the subscription is gone");
        r.assert_no_closes();
    }
}

/// A REQUEST_UPDATE carrying a parameter the updated request cannot take (FORWARD on a
/// PUBLISH_NAMESPACE), or (draft-16) naming a Request ID that was never used, closes the
/// session with PROTOCOL_VIOLATION; other sessions are untouched.
#[test]
fn invalid_request_updates_close_the_session() {
    for (pv, sv) in COMBOS {
        let mut r = Relay::new(2);
        let t = r.track_owned_by(&["live"], 0);
        let (_p, subs, _up) = r.established(pv, sv, &t, &[1, 1], None);
        let other = r.connect(0, pv);
        let ns_rid = r.announce(other, &["other"]);
        r.update(other, ns_rid, Parameters { forward: Some(true), ..Default::default() });
        assert_eq!(r.clients[other].closed_by_relay, Some(PROTOCOL_VIOLATION), "{pv:?}->{sv:?}");
        if sv == D16 {
            let (s, _) = subs[1];
            r.update(s, RequestId(4000), Parameters::default());
            assert_eq!(r.clients[s].closed_by_relay, Some(PROTOCOL_VIOLATION), "unknown Existing Request ID");
        }
        assert_eq!(r.clients[subs[0].0].closed_by_relay, None);
    }
}

/// draft-22 §9.5.2: a namespace subscription's prefix is updated; NAMESPACE messages after
/// the REQUEST_OK are relative to the new prefix (the namespaces it adds are announced); a
/// prefix overlapping the session's other namespace subscription is refused PREFIX_OVERLAP
/// and that subscription's stream is closed.
#[test]
fn request_update_moves_a_namespace_subscription() {
    let mut r = Relay::new(2);
    let a = r.connect(0, D22);
    r.announce(a, &["live", "a"]);
    r.announce(a, &["news", "b"]);
    let s = r.connect(1, D22);
    let (rid, _) = r.subscribe_namespace(s, &["live"]);
    let (other, _) = r.subscribe_namespace(s, &["sports"]);
    let params = Parameters { track_namespace_prefix: Some(ns(&["news"])), ..Default::default() };
    r.update(s, rid, params);
    let ev = r.take_events(s);
    assert!(matches!(messages(&ev).as_slice(), [Message::RequestOk(ok)] if ok.request_id == rid), "{ev:?}");
    let added: Vec<_> = ev
        .iter()
        .filter_map(|e| match e {
            Event::RequestMessage { message: Message::Namespace(n), .. } => Some(n.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(added, vec![ns(&["b"])]);
    r.announce(a, &["news", "c"]);
    assert_eq!(r.namespace_events(s, rid), vec![(true, ns(&["c"]))]);

    let params = Parameters { track_namespace_prefix: Some(ns(&["news", "x"])), ..Default::default() };
    r.update(s, other, params);
    let e = request_error(&messages(&r.take_events(s)));
    assert_eq!((e.request_id, e.error_code), (other, code::PREFIX_OVERLAP));
    r.announce(a, &["sports", "d"]);
    assert!(r.take_events(s).is_empty(), "the refused subscription ended");
    r.assert_no_closes();
}

/// FORWARD changes propagate: the upstream subscription is paused (REQUEST_UPDATE FORWARD 0)
/// only when every downstream subscription on every core is paused, and resumed as soon as
/// one is not (by an update, or by a new subscriber).
#[test]
fn upstream_is_paused_only_while_every_subscriber_is() {
    for (pv, sv) in COMBOS {
        let mut r = Relay::new(3);
        let t = r.track_owned_by(&["live"], 0);
        let (p, subs, up) = r.established(pv, sv, &t, &[1, 2], None);
        let ctx = format!("{pv:?}->{sv:?}");
        let pause = Parameters { forward: Some(false), ..Default::default() };
        let resume = Parameters { forward: Some(true), ..Default::default() };

        r.update(subs[0].0, subs[0].1, pause.clone());
        assert_eq!(r.upstream_forward_updates(p, up.request_id), [], "{ctx}: one still forwards");
        r.update(subs[1].0, subs[1].1, pause.clone());
        assert_eq!(r.upstream_forward_updates(p, up.request_id), [Some(false)], "{ctx}");
        r.update(subs[0].0, subs[0].1, resume);
        assert_eq!(r.upstream_forward_updates(p, up.request_id), [Some(true)], "{ctx}");
        r.update(subs[0].0, subs[0].1, pause);
        assert_eq!(r.upstream_forward_updates(p, up.request_id), [Some(false)], "{ctx}");
        let late = r.connect(1, sv);
        r.subscribe(late, &t, None);
        assert_eq!(r.upstream_forward_updates(p, up.request_id), [Some(true)], "{ctx}: a new subscriber");
        for (s, _) in subs {
            r.take_events(s);
        }
        r.assert_no_closes();
    }
}

/// draft-22 MAX_REQUEST_UPDATES (§9.1.7) of a publisher that set it to 1: the relay never has
/// more than one of its REQUEST_UPDATEs unanswered on the upstream subscription; a change of
/// the Forward State meanwhile waits and goes out (the latest state) once the publisher
/// answers.
#[test]
fn upstream_request_updates_respect_the_publishers_limit() {
    for sv in DRAFTS {
        let ctx = format!("D22->{sv:?}");
        let mut r = Relay::new(2);
        let t = r.track_owned_by(&["live"], 0);
        let setup = SetupOptions { max_request_updates: Some(1), ..Default::default() };
        let p = r.connect_with(0, D22, setup);
        r.take_events(p);
        r.announce(p, &["live"]);
        let s = r.connect(1, sv);
        let rid = r.subscribe(s, &t, None);
        let up = r.upstream_subscribe(p, &t);
        r.accept(p, &up, None);
        subscribe_ok(&messages(&r.take_events(s)), rid);
        let pause = Parameters { forward: Some(false), ..Default::default() };
        let resume = Parameters { forward: Some(true), ..Default::default() };

        r.update(s, rid, pause);
        assert_eq!(r.upstream_forward_updates(p, up.request_id), [Some(false)], "{ctx}");
        r.update(s, rid, resume);
        assert_eq!(r.upstream_forward_updates(p, up.request_id), [], "{ctx}: one is unanswered");
        let ok = wire::model::RequestOk { request_id: up.request_id, ..Default::default() };
        r.send(p, Message::RequestOk(ok.clone()));
        r.run_until_quiet();
        assert_eq!(r.upstream_forward_updates(p, up.request_id), [Some(true)], "{ctx}: now it goes");
        r.send(p, Message::RequestOk(ok));
        r.run_until_quiet();
        assert_eq!(r.upstream_forward_updates(p, up.request_id), [], "{ctx}: nothing else waits");
        r.take_events(s);
        r.assert_no_closes();
    }
}

/// The sender of a PUBLISH may update it (draft-22 §9.5: "The sender of a request ... can
/// later send a REQUEST_UPDATE"; draft-16 §9.11), e.g. to renew its token: answered
/// REQUEST_OK, nothing closed, and the track keeps reaching its subscriber. (draft-22 used
/// to close the session, draft-16 to answer DOES_NOT_EXIST.)
#[test]
fn a_publisher_updates_its_own_publish() {
    for (pv, sv) in COMBOS {
        let ctx = format!("{pv:?}->{sv:?}");
        let mut r = Relay::new(2);
        let t = r.track_owned_by(&["live"], 1);
        let p = r.connect(0, pv);
        let prid = r.next_request_id(p);
        r.send(p, publish_msg(pv, prid, &t, None));
        r.run_until_quiet();
        r.take_events(p);
        let s = r.connect(1, sv);
        let rid = r.subscribe(s, &t, None);
        subscribe_ok(&messages(&r.take_events(s)), rid);

        let token =
            wire::model::AuthToken::UseValue { token_type: 0, value: bytes::Bytes::from_static(b"renewed") };
        let answer = r.update(p, prid, Parameters { auth_tokens: vec![token], ..Default::default() });
        let ok = request_ok(&messages(&r.take_events(p)), &ctx);
        assert_eq!(ok.request_id, answer, "{ctx}");
        r.assert_no_closes();

        let st = r.open(p, &header(pv, PUB_ALIAS, 1, 0));
        r.put(p, st, &object(1, 0));
        r.run_until_quiet();
        assert_eq!(object_ids(&r.take_events(s)), [(1, 0)], "{ctx}: still flowing");
    }
}

/// NEW_GROUP_REQUEST through the relay (draft-22 §9.20.19 "Relay Handling"; draft-16 NEW
/// GROUP REQUEST Parameter): the first SUBSCRIBE's value goes in the upstream SUBSCRIBE; once
/// Established, a track with DYNAMIC_GROUPS = 1 gets a REQUEST_UPDATE for a value of 0 or
/// beyond the Largest Group unless ours with a greater or equal value is outstanding; a value
/// at or below the Largest Group goes nowhere; a new group ends the outstanding request. A
/// track without DYNAMIC_GROUPS never gets one.
#[test]
fn new_group_requests_go_upstream_as_the_spec_says() {
    use wire::model::{KvValue, Properties};
    for (pv, sv) in COMBOS {
        let ctx = format!("{pv:?}->{sv:?}");
        for dynamic in [true, false] {
            let mut r = Relay::new(2);
            let t = r.track_owned_by(&["live"], 0);
            let p = r.connect(0, pv);
            r.announce(p, &["live"]);
            let with_ngr = |r: &mut Relay, s, value: u64| {
                let rid = r.next_request_id(s);
                let mut m = subscribe_msg(rid, &t, None);
                if let Message::Subscribe(sub) = &mut m {
                    sub.params.new_group_request = Some(value);
                }
                r.send(s, m);
                r.run_until_quiet();
                rid
            };
            let s1 = r.connect(1, sv);
            let r1 = with_ngr(&mut r, s1, 0);
            let up = r.upstream_subscribe(p, &t);
            assert_eq!(up.params.new_group_request, Some(0), "{ctx}: in the upstream SUBSCRIBE");
            let mut props = Properties::new();
            if dynamic {
                props.push(0x30, KvValue::Int(1)); // DYNAMIC_GROUPS
            }
            r.accept_with(p, &up, PUB_ALIAS, Some(Location::new(3, 4)), props);
            r.take_events(s1);
            let ngr_sent = |r: &mut Relay| -> Vec<u64> {
                messages(&r.take_events(p))
                    .iter()
                    .filter_map(|m| match m {
                        Message::RequestUpdate(u) => {
                            assert_eq!(u.existing_request_id, up.request_id);
                            u.params.new_group_request
                        }
                        _ => None,
                    })
                    .collect()
            };
            let s2 = r.connect(1, sv);
            with_ngr(&mut r, s2, 5);
            let want: &[u64] = if dynamic { &[5] } else { &[] };
            assert_eq!(ngr_sent(&mut r), want, "{ctx} dynamic {dynamic}: beyond the Largest Group");
            let s3 = r.connect(0, sv);
            with_ngr(&mut r, s3, 4);
            assert_eq!(ngr_sent(&mut r), [] as [u64; 0], "{ctx}: 5 is outstanding");
            let s4 = r.connect(1, sv);
            with_ngr(&mut r, s4, 2);
            assert_eq!(ngr_sent(&mut r), [] as [u64; 0], "{ctx}: at or below the Largest Group");

            // Group 6 arrives: nothing outstanding any more; a subscriber's REQUEST_UPDATE
            // with 0 goes up.
            let st = r.open(p, &header(pv, PUB_ALIAS, 6, 0));
            r.put(p, st, &object(6, 0));
            r.run_until_quiet();
            r.take_events(s1);
            r.update(s1, r1, Parameters { new_group_request: Some(0), ..Default::default() });
            let want: &[u64] = if dynamic { &[0] } else { &[] };
            assert_eq!(ngr_sent(&mut r), want, "{ctx} dynamic {dynamic}: after a new group");
            r.assert_no_closes();
        }
    }
}

/// NEW_GROUP_REQUESTs that arrive while the upstream SUBSCRIBE is on its way (from another
/// core than the first subscriber's, so through the owner) go up once it is Established, by
/// the usual rules: the largest of them, beyond what the SUBSCRIBE carried.
#[test]
fn new_group_requests_before_establishment_go_up_after_it() {
    use wire::model::{KvValue, Properties};
    for (pv, sv) in COMBOS {
        let ctx = format!("{pv:?}->{sv:?}");
        let mut r = Relay::new(3);
        let t = r.track_owned_by(&["live"], 0);
        let p = r.connect(0, pv);
        r.announce(p, &["live"]);
        let with_ngr = |r: &mut Relay, s, value: u64| {
            let rid = r.next_request_id(s);
            let mut m = subscribe_msg(rid, &t, None);
            if let Message::Subscribe(sub) = &mut m {
                sub.params.new_group_request = Some(value);
            }
            r.send(s, m);
            r.run_until_quiet();
        };
        let s1 = r.connect(1, sv);
        with_ngr(&mut r, s1, 0);
        let s2 = r.connect(2, sv);
        with_ngr(&mut r, s2, 9);
        let up = r.upstream_subscribe(p, &t);
        assert_eq!(up.params.new_group_request, Some(0), "{ctx}");
        let mut props = Properties::new();
        props.push(0x30, KvValue::Int(1)); // DYNAMIC_GROUPS
        r.accept_with(p, &up, PUB_ALIAS, Some(Location::new(3, 4)), props);
        let sent: Vec<u64> = messages(&r.take_events(p))
            .iter()
            .filter_map(|m| match m {
                Message::RequestUpdate(u) => u.params.new_group_request,
                _ => None,
            })
            .collect();
        assert_eq!(sent, [9], "{ctx}");
        r.assert_no_closes();
    }
}

/// A SUBSCRIBE with NEW_GROUP_REQUEST held for a publisher to appear (RENDEZVOUS_TIMEOUT;
/// draft-18 and draft-22 have it) keeps its request: the largest value of the held SUBSCRIBEs
/// goes in the upstream SUBSCRIBE once a publisher announces the namespace (draft-22
/// §9.20.19). (It used to be dropped.)
#[test]
fn a_held_subscribes_new_group_request_goes_upstream() {
    for (pv, sv) in COMBOS {
        if sv == D16 {
            continue; // draft-16 has no RENDEZVOUS_TIMEOUT
        }
        let ctx = format!("{pv:?}->{sv:?}");
        let mut r = Relay::new(2);
        let t = r.track_owned_by(&["live"], 0);
        let held = |r: &mut Relay, value: u64| {
            let s = r.connect(1, sv);
            let rid = r.next_request_id(s);
            let mut m = subscribe_msg(rid, &t, None);
            if let Message::Subscribe(sub) = &mut m {
                sub.params.new_group_request = Some(value);
                sub.params.rendezvous_timeout = Some(5_000);
            }
            r.send(s, m);
            r.run_until_quiet();
            assert!(messages(&r.take_events(s)).is_empty(), "{ctx}: held");
        };
        held(&mut r, 3);
        held(&mut r, 7);
        let p = r.connect(0, pv);
        let rid = r.next_request_id(p);
        let ns = wire::model::TrackNamespace::from_strs(&["live"]);
        let m = wire::model::PublishNamespace { request_id: rid, namespace: ns, params: Default::default() };
        r.send(p, Message::PublishNamespace(m));
        r.run_until_quiet();
        let up: Vec<_> = messages(&r.take_events(p))
            .into_iter()
            .filter_map(|m| match m {
                Message::Subscribe(s) => Some(s),
                _ => None,
            })
            .collect();
        let [up] = up.as_slice() else { panic!("{ctx}: {up:?}") };
        assert_eq!(up.params.new_group_request, Some(7), "{ctx}");
        r.assert_no_closes();
    }
}
