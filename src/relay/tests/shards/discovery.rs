//! Namespace and track discovery: SUBSCRIBE_NAMESPACE (NAMESPACE / NAMESPACE_DONE), PUBLISH
//! offered to namespace subscribers, PUBLISH_SKIPPED, NAMESPACE_TOO_LARGE.

use bytes::Bytes;
use relay::RelayConfig;
use session::{Event, Transmit};
use wire::code;
use wire::model::{
    FullTrackName, Location, Message, Parameters, RequestId, SubscribeNamespace, TrackAlias, TrackNamespace,
};

use crate::common::*;
use crate::harness::{messages, streams, Relay};

/// A namespace subscriber (on the other core than the publishers) hears the namespaces
/// already announced under its prefix at once, then each new one, once however many
/// publishers announce it, and NAMESPACE_DONE when the last of them withdraws (or leaves);
/// namespaces outside the prefix never; an overlapping second subscription is refused
/// PREFIX_OVERLAP; after cancelling, nothing more arrives and no state is left.
#[test]
fn namespace_subscribers_hear_namespaces_come_and_go() {
    for (pv, sv) in COMBOS {
        let mut r = Relay::new(2);
        let a = r.connect(0, pv);
        let a_live = r.announce(a, &["live", "a"]);
        r.announce(a, &["news"]);
        let s = r.connect(1, sv);
        let (rid, events) = r.subscribe_namespace(s, &["live"]);
        let msgs: Vec<Message> = events
            .iter()
            .filter_map(|e| match e {
                Event::Message(m) => Some(m.clone()),
                _ => None,
            })
            .collect();
        assert!(matches!(msgs.as_slice(), [Message::RequestOk(ok)] if ok.request_id == rid), "{msgs:?}");
        let first: Vec<_> = events
            .into_iter()
            .filter_map(|e| match e {
                Event::RequestMessage { message: Message::Namespace(n), .. } => Some(n),
                _ => None,
            })
            .collect();
        assert_eq!(first, vec![ns(&["a"])], "{pv:?}->{sv:?}: the namespace already announced");

        let b = r.connect(0, pv);
        r.announce(b, &["live", "b", "hd"]);
        r.announce(b, &["live", "a"]);
        r.announce(b, &["sports"]);
        assert_eq!(r.namespace_events(s, rid), vec![(true, ns(&["b", "hd"]))], "{pv:?}->{sv:?}");
        // The gauge counts announcements, each publisher's own (moq_edge_namespaces_announced).
        assert_eq!(r.shards[0].namespaces_announced(), 5, "{pv:?}->{sv:?}");

        // A withdraws ["live","a"], B still has it; B leaves: now it is gone.
        r.send(a, Message::PublishNamespaceDone(a_live));
        r.run_until_quiet();
        assert_eq!(r.namespace_events(s, rid), vec![], "{pv:?}->{sv:?}");
        assert_eq!(r.shards[0].namespaces_announced(), 4, "{pv:?}->{sv:?}");
        r.disconnect(b);
        r.run_until_quiet();
        assert_eq!(r.shards[0].namespaces_announced(), 1, "{pv:?}->{sv:?}: A's news");
        let mut done = r.namespace_events(s, rid);
        done.sort_by_key(|(_, n)| n.fields().len());
        assert_eq!(done, vec![(false, ns(&["a"])), (false, ns(&["b", "hd"]))], "{pv:?}->{sv:?}");

        let (rid2, events) = r.subscribe_namespace(s, &["live", "x"]);
        let e = request_error(&messages(&events));
        assert_eq!((e.request_id, e.error_code), (rid2, code::PREFIX_OVERLAP), "{pv:?}->{sv:?}");

        r.session(s).cancel(rid).unwrap();
        r.run_until_quiet();
        r.announce(a, &["live", "c"]);
        assert!(r.take_events(s).is_empty(), "{pv:?}->{sv:?}: nothing after cancelling");
        let (_, events) = r.subscribe_namespace(s, &["live", "x"]);
        assert!(matches!(messages(&events).as_slice(), [Message::RequestOk(_)]), "no overlap once cancelled");
        r.assert_no_closes();
    }
}

/// Track discovery: a namespace subscriber that asks for PUBLISH (draft-16 SUBSCRIBE_NAMESPACE
/// with Subscribe Options PUBLISH; draft-22 SUBSCRIBE_TRACKS) gets one from the relay for
/// each track under its prefix with an Established upstream (the relay's Track Alias), and
/// for tracks published later; accepting it (PUBLISH_OK) makes it a subscription: objects
/// flow, and PUBLISH_DONE ends it with the track. Tracks it already subscribes to and tracks
/// outside the prefix are not offered; no NAMESPACE is sent when only PUBLISH was asked for.
#[test]
fn namespace_subscribers_are_offered_tracks_with_publish() {
    for (pv, sv) in COMBOS {
        let ctx = format!("{pv:?}->{sv:?}");
        let mut r = Relay::new(3);
        let t1 = r.track_owned_by(&["live"], 2);
        let t2 = r.track_owned_by(&["live"], 0);
        let p = r.connect(0, pv);
        let prid = r.next_request_id(p);
        r.send(p, publish_msg(pv, prid, &t1, Some(Location::new(2, 5))));
        let other = r.next_request_id(p);
        r.send(p, publish_as(pv, other, &track(&["elsewhere"], "x"), TrackAlias(1)));
        r.run_until_quiet();
        r.take_events(p);

        let s = r.connect(1, sv);
        let rid = r.next_request_id(s);
        let m = if sv == D16 {
            Message::SubscribeNamespace(SubscribeNamespace {
                request_id: rid,
                prefix: ns(&["live"]),
                options: wire::model::SubscribeOptions::Publish,
                ..Default::default()
            })
        } else {
            Message::SubscribeTracks(wire::model::SubscribeTracks {
                request_id: rid,
                prefix: ns(&["live"]),
                ..Default::default()
            })
        };
        r.send(s, m);
        r.run_until_quiet();
        let ev = r.take_events(s);
        let msgs = messages(&ev);
        let [Message::RequestOk(ok), Message::Publish(offer)] = msgs.as_slice() else {
            panic!("{ctx}: {ev:?}")
        };
        assert_eq!(ok.request_id, rid);
        assert_eq!(
            (&offer.track, offer.track_alias, offer.params.forward),
            (&t1, r.alias(&t1), Some(true)),
            "{ctx}"
        );
        // The Largest Object the relay knows (draft-22 §9.8: a PUBLISH carries it).
        assert_eq!(offer.params.largest_object, Some(Location::new(2, 5)), "{ctx}");

        // draft-16 and draft-18 PUBLISH_OK carry FORWARD; draft-22's cannot.
        let answer = Parameters { forward: (!since20(sv)).then_some(true), ..Default::default() };
        let accept = wire::model::PublishOk { request_id: offer.request_id, params: answer };
        r.send(s, Message::PublishOk(accept));
        r.run_until_quiet();
        assert!(r.take_events(s).is_empty(), "{ctx}: no SUBSCRIBE_OK for an accepted PUBLISH");
        let h = header(pv, PUB_ALIAS, 3, 0);
        let st = r.open(p, &h);
        let objs: Vec<_> = (0..3).map(|i| object(3, i)).collect();
        for o in &objs {
            r.put(p, st, o);
        }
        r.fin(p, st);
        r.run_until_quiet();
        let seen = streams(&r.take_events(s));
        assert_eq!(seen.len(), 1, "{ctx}");
        assert_stream(
            &seen[0],
            offer.request_id,
            expected_header(&h, r.alias(&t1), sv, true),
            &objs,
            Some(None),
        );

        // A second track the subscriber SUBSCRIBEs to (through the publisher's namespace):
        // not offered when its upstream becomes Established; a third, published later, is.
        r.take_events(p);
        r.announce(p, &["live"]);
        let sub_rid = r.subscribe(s, &t2, None);
        let up = r.upstream_subscribe(p, &t2);
        r.accept_as(p, &up, TrackAlias(2), None);
        subscribe_ok(&messages(&r.take_events(s)), sub_rid);
        let t3 = track(&["live", "more"], "t3");
        let p3 = r.next_request_id(p);
        r.send(p, publish_as(pv, p3, &t3, TrackAlias(3)));
        r.run_until_quiet();
        let msgs = messages(&r.take_events(s));
        let [Message::Publish(offer3)] = msgs.as_slice() else { panic!("{ctx}: {msgs:?}") };
        assert_eq!(offer3.track, t3, "{ctx}");

        r.send(p, done_msg(prid, 1));
        if pv.request_streams() {
            r.session(p).finish(prid).unwrap();
        }
        r.run_until_quiet();
        let d = publish_done(&messages(&r.take_events(s)));
        assert_eq!(
            (d.request_id, d.status_code, d.stream_count),
            (offer.request_id, code::TRACK_ENDED, 1),
            "{ctx}"
        );
        r.assert_no_closes();
    }
}

/// draft-22 SUBSCRIBE_TRACKS: a track the relay cannot offer a PUBLISH for (here the
/// session's subscription limit, 1, is taken by the first offer) is reported with
/// PUBLISH_SKIPPED on the SUBSCRIBE_TRACKS stream, naming it by its suffix under the prefix.
#[test]
fn tracks_that_cannot_be_offered_are_publish_skipped() {
    for pv in DRAFTS {
        let config = RelayConfig { max_subscriptions_per_session: 1, ..RelayConfig::default() };
        let mut r = Relay::with_config(2, config);
        let (a, b) = (track(&["live", "a"], "x"), track(&["live", "b"], "y"));
        // One publisher per track (the limit applies to publishers' sessions too).
        for t in [&a, &b] {
            let p = r.connect(0, pv);
            let rid = r.next_request_id(p);
            r.send(p, publish_as(pv, rid, t, TrackAlias(1)));
            r.run_until_quiet();
            r.take_events(p);
        }

        let s = r.connect(1, D22);
        let rid = r.next_request_id(s);
        let m = wire::model::SubscribeTracks { request_id: rid, prefix: ns(&["live"]), ..Default::default() };
        r.send(s, Message::SubscribeTracks(m));
        r.run_until_quiet();
        let ev = r.take_events(s);
        let offered: Vec<FullTrackName> = messages(&ev)
            .into_iter()
            .filter_map(|m| match m {
                Message::Publish(p) => Some(p.track),
                _ => None,
            })
            .collect();
        let skipped: Vec<(RequestId, FullTrackName)> = ev
            .iter()
            .filter_map(|e| match e {
                Event::Message(Message::PublishSkipped(m)) => {
                    let mut fields: Vec<Bytes> = vec![Bytes::from_static(b"live")];
                    fields.extend(m.namespace_suffix.fields().iter().cloned());
                    let namespace = TrackNamespace(fields);
                    Some((m.request_id, FullTrackName { namespace, name: m.track_name.clone() }))
                }
                _ => None,
            })
            .collect();
        assert_eq!(offered.len(), 1, "{pv:?}: {ev:?}");
        let other = if offered[0] == a { b.clone() } else { a.clone() };
        assert_eq!(skipped, vec![(rid, other)], "{pv:?}");
        r.assert_no_closes();
    }
}

/// A namespace subscription whose prefix matches more namespaces than the relay enumerates
/// (`max_namespace_matches`, 1 here) is refused: NAMESPACE_TOO_LARGE in draft-22 (draft-16
/// has no such code: EXCESSIVE_LOAD). A narrower prefix is accepted.
#[test]
fn a_prefix_matching_too_much_is_namespace_too_large() {
    for sv in DRAFTS {
        let config = RelayConfig { max_namespace_matches: 1, ..RelayConfig::default() };
        let mut r = Relay::with_config(2, config);
        let p = r.connect(0, D16);
        r.announce(p, &["live", "a"]);
        r.announce(p, &["live", "b"]);
        let s = r.connect(1, sv);
        let (rid, ev) = r.subscribe_namespace(s, &["live"]);
        let e = request_error(&messages(&ev));
        let want = if sv != D16 { code::NAMESPACE_TOO_LARGE } else { code::EXCESSIVE_LOAD };
        assert_eq!((e.request_id, e.error_code), (rid, want), "{sv:?}");
        let (rid, ev) = r.subscribe_namespace(s, &["live", "a"]);
        let msgs = messages(&ev);
        assert!(
            matches!(msgs.first(), Some(Message::RequestOk(ok)) if ok.request_id == rid),
            "{sv:?}: {msgs:?}"
        );
        r.assert_no_closes();
    }
}

/// The relay's own PUBLISH (draft-22 §9.8, pushed to a SUBSCRIBE_TRACKS subscriber): one that
/// asked FORWARD=0 and is accepted by an answer without FORWARD stays paused (the PUBLISH's
/// value stands), so no object flows; one the subscriber refuses has its request stream ended
/// by the relay too (FIN), returning the stream credit.
#[test]
fn pushed_publish_keeps_its_forward_and_a_refusal_ends_its_stream() {
    let mut r = Relay::new(2);
    let t = r.track_owned_by(&["live"], 1);
    let p = r.connect(0, D22);
    let prid = r.next_request_id(p);
    r.send(p, publish_msg(D22, prid, &t, Some(Location::new(2, 5))));
    r.run_until_quiet();
    r.take_events(p);

    for refuse in [false, true] {
        let s = r.connect(1, D22);
        let rid = r.next_request_id(s);
        let params = Parameters { forward: Some(false), ..Default::default() };
        let m = wire::model::SubscribeTracks { request_id: rid, prefix: ns(&["live"]), params };
        r.send(s, Message::SubscribeTracks(m));
        r.run_until_quiet();
        let msgs = messages(&r.take_events(s));
        let [Message::RequestOk(_), Message::Publish(offer)] = msgs.as_slice() else { panic!("{msgs:?}") };
        assert_eq!(offer.params.forward, Some(false), "asked paused");
        r.clients[s].relay_sent.clear();
        if refuse {
            let no = wire::model::RequestError {
                request_id: offer.request_id,
                error_code: 0x3,
                retry_interval: 0,
                reason: Bytes::from_static(b"no thanks"),
                redirect: None,
            };
            r.send(s, Message::RequestError(no));
            r.run_until_quiet();
            let fin = r.clients[s].relay_sent.iter().any(|t| matches!(t, Transmit::Stream { fin: true, .. }));
            assert!(fin, "the refused PUBLISH's stream is ended: {:?}", r.clients[s].relay_sent);
        } else {
            let accept =
                wire::model::PublishOk { request_id: offer.request_id, params: Parameters::default() };
            r.send(s, Message::PublishOk(accept));
            r.run_until_quiet();
            let st = r.open(p, &header(D22, PUB_ALIAS, 3, 0));
            r.put(p, st, &object(3, 0));
            r.run_until_quiet();
            assert!(streams(&r.take_events(s)).is_empty(), "paused: no object flows");
        }
        r.assert_no_closes();
    }
}
