//! Upstream links (edge → parent tiers): tracks served through a link, announcements forwarded
//! up it, no loops, a lost link, FETCH through a link.

use std::time::Duration;

use session::Event;
use wire::code;
use wire::model::{
    FullTrackName, Location, LocationFilter, Message, PublishNamespace, RequestId, TrackNamespace,
};

use crate::common::*;
use crate::harness::{messages, streams, ClientId, Relay};

impl Relay {
    /// Publisher `p` announces `fields`; the announcement is forwarded to `parent`, which the
    /// publisher's REQUEST_OK waits for. Returns (the publisher's request, the forwarded one);
    /// the parent has not answered yet.
    fn announce_via_link(
        &mut self,
        p: ClientId,
        parent: ClientId,
        fields: &[&str],
    ) -> (RequestId, PublishNamespace) {
        let rid = self.next_request_id(p);
        let msg = PublishNamespace { request_id: rid, namespace: ns(fields), ..Default::default() };
        self.send(p, Message::PublishNamespace(msg));
        self.run_until_quiet();
        assert!(self.take_events(p).is_empty(), "REQUEST_OK waits for the parent");
        let fwd = messages(&self.take_events(parent));
        let [Message::PublishNamespace(f)] = fwd.as_slice() else { panic!("parent got {fwd:?}") };
        assert_eq!(f.namespace, ns(fields));
        (rid, f.clone())
    }

    /// The parent accepts forwarded announcement `f`: the publisher gets its REQUEST_OK for `rid`.
    fn parent_accepts(&mut self, parent: ClientId, p: ClientId, f: &PublishNamespace, rid: RequestId) {
        let ok = wire::model::RequestOk { request_id: f.request_id, ..Default::default() };
        self.send(parent, Message::RequestOk(ok));
        self.run_until_quiet();
        let msgs = messages(&self.take_events(p));
        assert!(matches!(msgs.as_slice(), [Message::RequestOk(ok)] if ok.request_id == rid), "{msgs:?}");
    }
}

/// Tracks no local publisher serves are subscribed through the link, once per track whatever
/// the number of subscribers and cores; objects come down to all of them. A local publisher
/// of a namespace wins over the link's route.
#[test]
fn a_link_serves_tracks_no_local_publisher_has_with_one_upstream_subscription() {
    for v in DRAFTS {
        let mut r = Relay::new(2);
        let parent = r.link(v);
        let t = track(&["live", "cam"], "video");
        let subs: Vec<(ClientId, RequestId)> = [1, 0, 1]
            .iter()
            .map(|&core| {
                let s = r.connect(core, v);
                (s, r.subscribe(s, &t, None))
            })
            .collect();
        let up = r.upstream_subscribe(parent, &t);
        r.accept(parent, &up, None);
        for &(s, rid) in &subs {
            subscribe_ok(&messages(&r.take_events(s)), rid);
        }
        let h = header(v, PUB_ALIAS, 0, 0);
        let stream = r.open(parent, &h);
        r.put(parent, stream, &object(0, 0));
        r.run_until_quiet();
        for &(s, _) in &subs {
            let seen = streams(&r.take_events(s));
            assert_eq!(seen.len(), 1, "{v:?}");
            assert_eq!(seen[0].objects.len(), 1, "{v:?}");
        }
        assert!(r.take_events(parent).is_empty(), "one upstream SUBSCRIBE for three subscribers");

        // A local publisher of ["local"] is preferred to the default route.
        let p = r.connect(1, v);
        let (rid, f) = r.announce_via_link(p, parent, &["local"]);
        r.parent_accepts(parent, p, &f, rid);
        let local = track(&["local"], "x");
        let s = r.connect(0, v);
        r.subscribe(s, &local, None);
        r.upstream_subscribe(p, &local);
        assert!(r.take_events(parent).is_empty(), "{v:?}: not sent up the link");
        r.assert_no_closes();
    }
}

/// A publisher's PUBLISH_NAMESPACE is forwarded up the link, and its REQUEST_OK waits for the
/// parent's answer (so a subscription anywhere in the tree finds the namespace at the
/// parent), at most 2 s. The parent's SUBSCRIBE comes down to the publisher; a parent's
/// request for a namespace nobody here announced is refused, never sent back up. Withdrawing
/// the namespace withdraws it upstream.
#[test]
fn announcements_go_up_the_link_and_the_parents_subscriptions_come_down() {
    for v in DRAFTS {
        let mut r = Relay::new(2);
        let parent = r.link(v);
        let p = r.connect(1, v);
        let (rid, f) = r.announce_via_link(p, parent, &["live"]);
        r.parent_accepts(parent, p, &f, rid);

        // The parent subscribes: the relay subscribes the publisher.
        let t = track(&["live"], "v");
        let prid = r.next_request_id(parent);
        r.send(parent, subscribe_msg(prid, &t, None));
        r.run_until_quiet();
        let up = r.upstream_subscribe(p, &t);
        r.accept(p, &up, None);
        subscribe_ok(&messages(&r.take_events(parent)), prid);
        // ... and a track nobody here announced is not sent back up the link.
        let other = track(&["elsewhere"], "v");
        let orid = r.next_request_id(parent);
        r.send(parent, subscribe_msg(orid, &other, None));
        r.run_until_quiet();
        let e = request_error(&messages(&r.take_events(parent)));
        assert_eq!((e.request_id, e.error_code), (orid, code::DOES_NOT_EXIST), "{v:?}");

        // A second namespace whose parent never answers: REQUEST_OK after 2 s anyway.
        let (rid2, _) = r.announce_via_link(p, parent, &["slow"]);
        r.advance(Duration::from_millis(2100));
        assert!(
            matches!(messages(&r.take_events(p)).as_slice(), [Message::RequestOk(ok)] if ok.request_id == rid2)
        );

        // Withdrawn here, withdrawn upstream.
        match v {
            D16 => r.send(p, Message::PublishNamespaceDone(rid)),
            _ => r.session(p).cancel(rid).unwrap(),
        }
        r.run_until_quiet();
        let ev = r.take_events(parent);
        let withdrawn = match v {
            D16 => messages(&ev)
                .iter()
                .any(|m| matches!(m, Message::PublishNamespaceDone(x) if *x == f.request_id)),
            _ => {
                ev.iter().any(|e| matches!(e, Event::Cancelled { request_id } if *request_id == f.request_id))
            }
        };
        assert!(withdrawn, "{v:?}: {ev:?}");
        r.assert_no_closes();
    }
}

/// Loops: a request from the relay the link leads to (A ↔ B configured as each other's
/// parents) is not sent up that link; a request from another relay is. A link whose parent
/// turns out to be this relay is closed.
#[test]
fn requests_never_go_back_to_the_relay_they_came_from() {
    for v in DRAFTS {
        let mut r = Relay::new(2);
        let parent = r.link(v);
        let same = r.connect_with(1, v, parent_setup(7));
        let _ = r.take_events(same);
        let t = track(&["x"], "t");
        let rid = r.subscribe(same, &t, None);
        let e = request_error(&messages(&r.take_events(same)));
        assert_eq!((e.request_id, e.error_code), (rid, code::DOES_NOT_EXIST), "{v:?}");
        assert!(r.take_events(parent).is_empty(), "{v:?}: not sent back to node 7");
        let other = r.connect_with(1, v, parent_setup(8));
        let _ = r.take_events(other);
        r.subscribe(other, &t, None);
        r.upstream_subscribe(parent, &t);

        let ours = r.shards[0].config().node_id;
        let looped = r.connect_link(1, v, vec![TrackNamespace::from_strs::<&str>(&[])], parent_setup(ours));
        assert_eq!(r.clients[looped].closed_by_relay, Some(PROTOCOL_VIOLATION), "{v:?}");
        assert!(!r.shards[1].is_link(r.clients[looped].conn) || r.shards[1].links_up() == 0);
    }
}

/// A relay with a link to its parent (draft `v`) and a subscriber on core 1 of `live/v`,
/// subscribed through the link and answered (with `largest` as its Largest Object): the
/// relay, the parent, the track, the subscriber and its request.
fn subscribed_through_a_link(
    v: wire::Version,
    largest: Option<Location>,
) -> (Relay, ClientId, FullTrackName, ClientId, RequestId) {
    let mut r = Relay::new(2);
    let parent = r.link(v);
    let t = track(&["live"], "v");
    let s = r.connect(1, v);
    let rid = r.subscribe(s, &t, None);
    let up = r.upstream_subscribe(parent, &t);
    r.accept(parent, &up, largest);
    subscribe_ok(&messages(&r.take_events(s)), rid);
    (r, parent, t, s, rid)
}

/// The link closes under a subscription: its subscriber is kept (its open stream reset, no
/// PUBLISH_DONE) and the relay subscribes again as soon as a link serves the track; objects
/// flow again. When no link comes back within 30 s, the subscriber gets PUBLISH_DONE.
#[test]
fn a_lost_link_keeps_its_subscribers_and_subscribes_again() {
    for v in DRAFTS {
        let (mut r, parent, t, s, _) = subscribed_through_a_link(v, None);
        let h = header(v, PUB_ALIAS, 0, 0);
        let stream = r.open(parent, &h);
        r.put(parent, stream, &object(0, 0));
        r.run_until_quiet();
        let _ = r.take_events(s);

        r.disconnect(parent);
        r.run_until_quiet();
        let ev = r.take_events(s);
        assert!(!messages(&ev).iter().any(|m| matches!(m, Message::PublishDone(_))), "{v:?}: {ev:?}");

        let parent2 = r.link(v);
        r.advance(Duration::from_millis(10));
        let up2 = r.upstream_subscribe(parent2, &t);
        r.accept(parent2, &up2, None);
        assert!(messages(&r.take_events(s)).is_empty(), "{v:?}: no new SUBSCRIBE_OK, no PUBLISH_DONE");
        let stream = r.open(parent2, &header(v, PUB_ALIAS, 1, 0));
        r.put(parent2, stream, &object(1, 0));
        r.run_until_quiet();
        let seen = streams(&r.take_events(s));
        assert_eq!(seen.len(), 1, "{v:?}: objects flow again");

        r.disconnect(parent2);
        r.run_until_quiet();
        let ev = r.take_events(s);
        assert!(matches!(ev.as_slice(), [Event::DataStreamEnd { reset: Some(_), .. }]), "{v:?}: {ev:?}");
        r.advance(Duration::from_secs(10));
        assert!(!messages(&r.take_events(s)).iter().any(|m| matches!(m, Message::PublishDone(_))));
        r.advance(Duration::from_secs(21));
        let done = publish_done(&messages(&r.take_events(s)));
        assert_eq!(done.status_code, code::INTERNAL_ERROR, "{v:?}");
    }
}

/// A lost link's track is being subscribed again through the new link when the parent lists
/// the track's namespace (its answer to the link's SUBSCRIBE_NAMESPACE): that sends no second
/// SUBSCRIBE, which the parent would refuse as a duplicate, leaving the track retrying
/// against its own subscription. The one SUBSCRIBE's answer brings the objects back.
#[test]
fn a_namespace_listed_while_a_lost_track_subscribes_again_sends_no_second_subscribe() {
    for v in DRAFTS {
        let (mut r, parent, t, s, _) = subscribed_through_a_link(v, None);
        r.disconnect(parent);
        r.run_until_quiet();

        let parent2 = r.link(v);
        r.advance(Duration::from_millis(10));
        let up2 = r.upstream_subscribe(parent2, &t);
        let asked = r.clients[parent2].discovery.clone();
        r.session(parent2).send_on(asked[0].request_id, Message::Namespace(ns(&["live"]))).unwrap();
        r.run_until_quiet();
        r.advance(Duration::from_millis(10));
        let again = messages(&r.take_events(parent2));
        assert!(!again.iter().any(|m| matches!(m, Message::Subscribe(_))), "{v:?}: {again:?}");
        r.accept(parent2, &up2, None);
        let stream = r.open(parent2, &header(v, PUB_ALIAS, 1, 0));
        r.put(parent2, stream, &object(1, 0));
        r.run_until_quiet();
        assert_eq!(streams(&r.take_events(s)).len(), 1, "{v:?}: objects flow again");
    }
}

/// An edge asked to FETCH a track it does not relay: it subscribes the track through its link
/// (for the End Location), then FETCHes from the parent what its empty cache lacks, and
/// answers with the parent's objects.
#[test]
fn fetch_of_a_track_not_relayed_goes_up_the_link() {
    for v in DRAFTS {
        let mut r = Relay::new(2);
        let parent = r.link(v);
        let t = track(&["vod"], "film");
        let f = r.connect(1, v);
        let range = LocationFilter::AbsoluteRange { start: Location::new(1, 0), end: Location::new(1, 2) };
        let (rid, ev) = r.standalone(f, &t, range);
        assert!(messages(&ev).is_empty(), "{v:?}");
        let up = r.upstream_subscribe(parent, &t);
        r.accept(parent, &up, Some(Location::new(3, 4)));
        let asked = r.upstream_fetches(parent);
        assert_eq!(asked.len(), 1, "{v:?}: one upstream FETCH for what the cache lacks");
        r.serve_upstream_fetch(parent, &asked[0], &[(1, 0), (1, 1), (1, 2)]);
        let ev = r.take_events(f);
        fetch_ok(&messages(&ev), rid);
        assert_eq!(fetched_objects(&fetch_streams(&ev)[0], 0), [(1, 0), (1, 1), (1, 2)], "{v:?}");
    }
}

/// Relay rule (draft-22 §7: SUBSCRIBE_OK only with an Established upstream): while a lost
/// link's track is being subscribed again, a new subscriber on a core that already carries
/// the track waits; it gets SUBSCRIBE_OK with the new upstream's Largest Object once that
/// answers, and the subscriber that kept its subscription gets nothing new. (It used to be
/// answered at once with the old upstream's Largest Object.)
#[test]
fn a_new_subscriber_waits_while_the_upstream_is_lost() {
    for v in [D16, D22] {
        let (mut r, parent, t, s, rid) = subscribed_through_a_link(v, Some(Location::new(0, 3)));

        r.disconnect(parent);
        r.run_until_quiet();
        let _ = r.take_events(s);
        let s2 = r.connect(1, v);
        let rid2 = r.subscribe(s2, &t, None);
        assert!(messages(&r.take_events(s2)).is_empty(), "{v:?}: no SUBSCRIBE_OK without an upstream");

        let parent2 = r.link(v);
        r.advance(Duration::from_millis(10));
        let up2 = r.upstream_subscribe(parent2, &t);
        r.accept(parent2, &up2, Some(Location::new(7, 2)));
        let ok = subscribe_ok(&messages(&r.take_events(s2)), rid2);
        assert_eq!(ok.params.largest_object, Some(Location::new(7, 2)), "{v:?}: the new upstream's");
        assert!(messages(&r.take_events(s)).is_empty(), "{v:?}: the first subscriber is not answered again");

        // Lost again, and never back: the one who kept its subscription gets PUBLISH_DONE, a
        // newcomer still waiting gets REQUEST_ERROR.
        r.disconnect(parent2);
        r.run_until_quiet();
        let s3 = r.connect(1, v);
        let rid3 = r.subscribe(s3, &t, None);
        r.advance(Duration::from_secs(31));
        let done = publish_done(&messages(&r.take_events(s)));
        assert_eq!((done.request_id, done.status_code), (rid, code::INTERNAL_ERROR), "{v:?}");
        let msgs = messages(&r.take_events(s3));
        assert!(
            matches!(msgs.as_slice(), [Message::RequestError(e)] if e.request_id == rid3),
            "{v:?}: {msgs:?}"
        );
        r.assert_no_closes();
    }
}

/// Namespace discovery through a link: when it comes up, the link asks its parent for the
/// namespaces under each route (SUBSCRIBE_NAMESPACE), and what the parent answers
/// (NAMESPACE, NAMESPACE_DONE) reaches this relay's namespace subscribers like a local
/// announcement, once per namespace: a viewer on an edge finds a broadcast published at the
/// origin (a player that waits for the announcement before subscribing). The parent's
/// namespaces route nothing (the route does); the link's loss withdraws them.
#[test]
fn the_parents_namespaces_reach_namespace_subscribers_here() {
    for v in DRAFTS {
        let mut r = Relay::new(2);
        let parent = r.link(v);
        let asked = r.clients[parent].discovery.clone();
        assert_eq!(asked.len(), 1, "{v:?}: one SUBSCRIBE_NAMESPACE per route");
        assert_eq!(asked[0].prefix, ns(&[]), "{v:?}: the default route's prefix");
        let up = asked[0].request_id;

        // Known at the parent before the viewer asks, and after.
        r.session(parent).send_on(up, Message::Namespace(ns(&["live", "a"]))).unwrap();
        r.run_until_quiet();
        let s = r.connect(1, v);
        let (rid, events) = r.subscribe_namespace(s, &["live"]);
        let now: Vec<_> = events
            .into_iter()
            .filter_map(|e| match e {
                Event::RequestMessage { message: Message::Namespace(n), .. } => Some(n),
                _ => None,
            })
            .collect();
        assert_eq!(now, vec![ns(&["a"])], "{v:?}: the parent's namespace, at once");
        r.session(parent).send_on(up, Message::Namespace(ns(&["live", "b"]))).unwrap();
        r.session(parent).send_on(up, Message::Namespace(ns(&["news"]))).unwrap();
        r.run_until_quiet();
        assert_eq!(r.namespace_events(s, rid), vec![(true, ns(&["b"]))], "{v:?}: and as it comes");
        // A local publisher of the same namespace: still one NAMESPACE, and one NAMESPACE_DONE
        // only when both are gone.
        let p = r.connect(0, v);
        let (prid, f) = r.announce_via_link(p, parent, &["live", "b"]);
        r.parent_accepts(parent, p, &f, prid);
        r.session(parent).send_on(up, Message::NamespaceDone(ns(&["live", "b"]))).unwrap();
        r.run_until_quiet();
        assert_eq!(r.namespace_events(s, rid), vec![], "{v:?}: announced here too");
        r.disconnect(p);
        r.run_until_quiet();
        assert_eq!(r.namespace_events(s, rid), vec![(false, ns(&["b"]))], "{v:?}");
        let withdrawn = messages(&r.take_events(parent));
        assert!(
            matches!(withdrawn.as_slice(), [Message::PublishNamespaceDone(_)] | []),
            "{v:?}: {withdrawn:?}"
        );
        // A track under a namespace the parent listed is subscribed through the link's route.
        let t = track(&["live", "a"], "video");
        let viewer = r.connect(1, v);
        r.subscribe(viewer, &t, None);
        r.upstream_subscribe(parent, &t);
        // The link goes: its parent's namespaces with it.
        r.disconnect(parent);
        r.run_until_quiet();
        assert_eq!(r.namespace_events(s, rid), vec![(false, ns(&["a"]))], "{v:?}: gone with the link");
    }
}
