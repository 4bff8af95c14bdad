//! The relay's side of the namespace directory (`relay/directory.rs`): what a core asks
//! (registrations, lookups, watches), how requests wait for the answer, and how the routes
//! the directory gives (a link to the relay that has a namespace) serve and move tracks. The
//! directory itself (Redis) is played by the test: it takes the asks and answers them.

use relay::Input;
use std::time::Duration;

use relay::directory::{DirectoryAsk, DIRECTORY_WAIT};
use relay::RelayConfig;
use session::Event;
use wire::code;
use wire::model::{Location, LocationFilter, Message, TrackNamespace};
use wire::Version;

use crate::common::*;
use crate::harness::{messages, streams, ClientId, Relay};

fn clustered(cores: usize) -> Relay {
    Relay::with_config(cores, RelayConfig { directory: true, ..RelayConfig::default() })
}

impl Relay {
    /// What every core asked of the directory since the last call: (core, ask).
    fn directory_asks(&mut self) -> Vec<(usize, DirectoryAsk)> {
        let mut out = Vec::new();
        for (core, shard) in self.shards.iter_mut().enumerate() {
            out.extend(shard.take_directory().into_iter().map(|a| (core, a)));
        }
        out
    }

    /// A link on `core` to the relay the directory names (node `node`), with no route yet.
    fn directory_link(&mut self, core: usize, v: Version, node: u64) -> ClientId {
        let link = self.connect_directory_link(core, v, parent_setup(node));
        assert!(matches!(self.take_events(link).as_slice(), [Event::Ready { .. }]));
        link
    }

    /// The directory routes `prefix` to the relay of `link` (`on`) or no longer.
    fn route(&mut self, link: ClientId, prefix: &[&str], on: bool) {
        let (core, conn, now) = (self.clients[link].core, self.clients[link].conn, self.now);
        self.shards[core].handle(now, Input::LinkRoute { conn, prefix: ns(prefix), on });
        self.run_until_quiet();
    }

    /// The directory's answer to core `core`'s lookup of `namespace`.
    fn answer(&mut self, core: usize, namespace: &TrackNamespace, found: bool) {
        let now = self.now;
        self.shards[core].handle(now, Input::DirectoryAnswer { namespace, found });
        self.run_until_quiet();
    }
}

/// A SUBSCRIBE for a namespace nothing here serves waits while its owner looks it up (once,
/// however many subscribers); the directory names a relay, whose link takes the namespace as
/// a route, and the SUBSCRIBE goes up that link: SUBSCRIBE_OK only once it is Established.
/// Another track under the route needs no lookup.
#[test]
fn a_subscribe_waits_for_the_directory_and_goes_up_the_link_it_leads_to() {
    for v in DRAFTS {
        let mut r = clustered(2);
        let t = track(&["live", "cam"], "v");
        let owner = r.owner(&t);
        let (s1, s2) = (r.connect(0, v), r.connect(1, v));
        let (rid1, rid2) = (r.subscribe(s1, &t, None), r.subscribe(s2, &t, None));
        assert!(r.take_events(s1).is_empty() && r.take_events(s2).is_empty(), "{v:?}: held");
        assert_eq!(r.directory_asks(), vec![(owner, DirectoryAsk::Lookup(ns(&["live", "cam"])))], "{v:?}");

        r.answer(owner, &ns(&["live", "cam"]), true);
        assert!(r.take_events(s1).is_empty(), "{v:?}: a hit waits for its route");
        let link = r.directory_link(1, v, 7);
        r.route(link, &["live"], true);
        let up = r.upstream_subscribe(link, &t);
        assert!(r.take_events(s1).is_empty(), "{v:?}: no SUBSCRIBE_OK before the upstream's");
        r.accept(link, &up, None);
        subscribe_ok(&messages(&r.take_events(s1)), rid1);
        subscribe_ok(&messages(&r.take_events(s2)), rid2);
        let stream = r.open(link, &header(v, PUB_ALIAS, 0, 0));
        r.put(link, stream, &object(0, 0));
        r.run_until_quiet();
        for s in [s1, s2] {
            assert_eq!(streams(&r.take_events(s)).len(), 1, "{v:?}: objects come down the link");
        }

        let other = track(&["live", "news"], "v");
        r.subscribe(s1, &other, None);
        r.upstream_subscribe(link, &other);
        assert!(r.directory_asks().is_empty(), "{v:?}: the route serves it, no lookup");

        // A publisher here under that route: registered, REQUEST_OK at once, and not
        // forwarded up the directory's link (which is no parent).
        let p = r.connect(0, v);
        r.announce(p, &["live", "local"]);
        assert!(r.take_events(link).is_empty(), "{v:?}: not forwarded to the other relay");
        assert_eq!(r.directory_asks(), vec![(0, DirectoryAsk::Register(ns(&["live", "local"])))]);
        r.assert_no_closes();
    }
}

/// A miss, or no answer within DIRECTORY_WAIT, gets what it would get without a directory:
/// DOES_NOT_EXIST for SUBSCRIBE, FETCH and TRACK_STATUS. A request from another relay is not
/// looked up (the directory names the relay with the publisher: one hop, no loops).
#[test]
fn a_miss_or_no_answer_is_does_not_exist_and_relays_are_not_looked_up() {
    for v in DRAFTS {
        let mut r = clustered(2);
        let t = track(&["live", "gone"], "v");
        let owner = r.owner(&t);
        let s = r.connect(1, v);
        let rid = r.subscribe(s, &t, None);
        let status = r.track_status(s, &t);
        assert!(r.take_events(s).is_empty(), "{v:?}: both wait");
        assert_eq!(r.directory_asks().len(), 1, "{v:?}: one lookup for both");
        r.answer(owner, &ns(&["live", "gone"]), false);
        let errors: Vec<(u64, u64)> = messages(&r.take_events(s))
            .iter()
            .filter_map(|m| match m {
                Message::RequestError(e) => Some((e.request_id.0, e.error_code)),
                _ => None,
            })
            .collect();
        assert!(errors.contains(&(rid.0, code::DOES_NOT_EXIST)), "{v:?}: {errors:?}");
        assert!(errors.contains(&(status.0, code::DOES_NOT_EXIST)), "{v:?}: {errors:?}");

        // A TRACK_STATUS held with a SUBSCRIBE that is cancelled meanwhile still gets its answer.
        let t2 = track(&["live", "gone2"], "v");
        let rid2 = r.subscribe(s, &t2, None);
        let status2 = r.track_status(s, &t2);
        match v {
            D16 => r.send(s, Message::Unsubscribe(rid2)),
            _ => r.session(s).cancel(rid2).unwrap(),
        }
        r.run_until_quiet();
        r.take_events(s);
        assert_eq!(r.directory_asks().len(), 1, "{v:?}");
        r.answer(r.owner(&t2), &ns(&["live", "gone2"]), false);
        r.refused(s, status2, code::DOES_NOT_EXIST, "a TRACK_STATUS whose SUBSCRIBE went away");

        // A FETCH whose lookup is never answered.
        let range = LocationFilter::AbsoluteRange { start: Location::new(0, 0), end: Location::new(1, 0) };
        let (frid, ev) = r.standalone(s, &t, range);
        assert!(ev.is_empty(), "{v:?}: the FETCH waits");
        assert_eq!(r.directory_asks().len(), 1, "{v:?}");
        r.advance(DIRECTORY_WAIT + Duration::from_millis(100));
        r.refused(s, frid, code::DOES_NOT_EXIST, "a FETCH whose lookup timed out");

        // A relay asking (its SETUP names a node): refused at once, nothing looked up.
        let peer = r.connect_with(0, v, parent_setup(9));
        r.take_events(peer);
        let prid = r.subscribe(peer, &track(&["live", "else"], "v"), None);
        r.refused(peer, prid, code::DOES_NOT_EXIST, "a relay's SUBSCRIBE");
        assert!(r.directory_asks().is_empty(), "{v:?}");
        r.assert_no_closes();
    }
}

/// Announcements and PUBLISHes register their namespace from the publisher's core, once per
/// announcement; their end unregisters it. Namespace subscriptions watch their prefix, and
/// namespaces other relays registered under it are reported like local ones.
#[test]
fn publishers_register_and_namespace_subscribers_see_the_cluster() {
    for v in DRAFTS {
        let mut r = clustered(2);
        let p = r.connect(1, v);
        let rid = r.announce(p, &["live"]);
        assert_eq!(r.directory_asks(), vec![(1, DirectoryAsk::Register(ns(&["live"])))], "{v:?}");
        match v {
            D16 => r.send(p, Message::PublishNamespaceDone(rid)),
            _ => r.session(p).cancel(rid).unwrap(),
        }
        r.run_until_quiet();
        r.take_events(p);
        assert_eq!(r.directory_asks(), vec![(1, DirectoryAsk::Unregister(ns(&["live"])))], "{v:?}");

        let q = r.connect(0, v);
        let t = track(&["pushed"], "v");
        let prid = r.next_request_id(q);
        r.send(q, publish_msg(v, prid, &t, None));
        r.run_until_quiet();
        r.take_events(q);
        assert_eq!(r.directory_asks(), vec![(0, DirectoryAsk::Register(ns(&["pushed"])))], "{v:?}");
        r.disconnect(q);
        r.run_until_quiet();
        assert_eq!(r.directory_asks(), vec![(0, DirectoryAsk::Unregister(ns(&["pushed"])))], "{v:?}");

        let s = r.connect(0, v);
        let (nrid, _) = r.subscribe_namespace(s, &["live"]);
        assert_eq!(r.directory_asks(), vec![(0, DirectoryAsk::Watch { prefix: ns(&["live"]), on: true })]);
        let now = r.now;
        for shard in r.shards.iter_mut() {
            shard.handle(now, Input::RemoteNamespace { namespace: ns(&["live", "far"]), on: true });
        }
        r.run_until_quiet();
        assert_eq!(r.namespace_events(s, nrid), vec![(true, ns(&["far"]))], "{v:?}");
        for shard in r.shards.iter_mut() {
            shard.handle(now, Input::RemoteNamespace { namespace: ns(&["live", "far"]), on: false });
        }
        r.run_until_quiet();
        assert_eq!(r.namespace_events(s, nrid), vec![(false, ns(&["far"]))], "{v:?}");
        // A remote namespace routes nothing: a SUBSCRIBE to it is looked up.
        r.disconnect(s);
        r.run_until_quiet();
        assert_eq!(r.directory_asks(), vec![(0, DirectoryAsk::Watch { prefix: ns(&["live"]), on: false })]);
        r.assert_no_closes();
    }
}

/// The namespace moves to another relay: the link to it takes the route, and the track moves
/// there make-before-break (the group the old relay started comes whole from it, the next
/// from the new one); the old link's route goes away.
#[test]
fn a_namespace_that_moves_takes_its_tracks_to_the_new_relay_without_a_gap() {
    for v in DRAFTS {
        let mut r = clustered(2);
        let t = track(&["live", "cam"], "v");
        let owner = r.owner(&t);
        let s = r.connect(0, v);
        let rid = r.subscribe(s, &t, None);
        r.answer(owner, &ns(&["live", "cam"]), true);
        let old = r.directory_link(0, v, 7);
        r.route(old, &["live", "cam"], true);
        let up = r.upstream_subscribe(old, &t);
        r.accept(old, &up, None);
        subscribe_ok(&messages(&r.take_events(s)), rid);
        let st = r.open(old, &header(v, PUB_ALIAS, 0, 0));
        r.put(old, st, &object(0, 0));
        r.run_until_quiet();

        // The directory now names node 8: its link takes the route, then the old one drops it.
        let new = r.directory_link(1, v, 8);
        r.route(new, &["live", "cam"], true);
        let moved = r.upstream_subscribe(new, &t);
        r.route(old, &["live", "cam"], false);
        r.accept(new, &moved, None);
        r.put(old, st, &object(0, 1));
        r.fin(old, st);
        let st2 = r.open(new, &header(v, PUB_ALIAS, 1, 0));
        r.put(new, st2, &object(1, 0));
        r.run_until_quiet();
        let seen = streams(&r.take_events(s));
        let objects: Vec<(u64, u64)> = seen
            .iter()
            .flat_map(|st| st.objects.iter().map(|(o, _)| (st.header.group_id, o.object_id)))
            .collect();
        assert_eq!(objects, vec![(0, 0), (0, 1), (1, 0)], "{v:?}: every object once, in order");
        assert_eq!(r.shards[owner].stats().tracks_moved, 1, "{v:?}");
        let ended = r.take_events(old).into_iter().any(|e| match e {
            Event::Message(Message::Unsubscribe(rid)) | Event::Cancelled { request_id: rid } => {
                rid == up.request_id
            }
            _ => false,
        });
        assert!(ended, "{v:?}: the old subscription is stopped");
        r.assert_no_closes();
    }
}
