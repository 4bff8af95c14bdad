//! What the tests' clients do through the harness, as methods on [`Relay`]: announce, subscribe,
//! accept an upstream SUBSCRIBE, write objects, answer upstream FETCHes, open a link; and the
//! checks several areas share.

use bytes::Bytes;
use session::{Event, StreamId};
use wire::code;
use wire::model::{
    Fetch, FetchEnd, FetchItem, FetchKind, FetchOk, FullTrackName, Location, LocationFilter, Message,
    Parameters, Properties, PublishNamespace, RequestError, RequestId, RequestUpdate, SubgroupHeader,
    SubgroupObject, Subscribe, SubscribeNamespace, SubscribeOk, TrackAlias, TrackNamespace,
};
use wire::Version;

use crate::common::*;
use crate::harness::{messages, ClientId, Relay};

impl Relay {
    /// A track in namespace `fields` whose owner shard is `owner`.
    pub fn track_owned_by(&self, fields: &[&str], owner: usize) -> FullTrackName {
        (0..1000)
            .map(|i| track(fields, &format!("track-{i}")))
            .find(|t| self.owner(t) == owner)
            .expect("a name for every owner")
    }

    /// PUBLISH_NAMESPACE from `c`, answered with REQUEST_OK.
    pub fn announce(&mut self, c: ClientId, fields: &[&str]) -> RequestId {
        let rid = self.next_request_id(c);
        self.send(
            c,
            Message::PublishNamespace(PublishNamespace {
                request_id: rid,
                namespace: ns(fields),
                ..Default::default()
            }),
        );
        self.run_until_quiet();
        let msgs = messages(&self.take_events(c));
        assert!(matches!(msgs.as_slice(), [Message::RequestOk(ok)] if ok.request_id == rid), "{msgs:?}");
        rid
    }

    /// SUBSCRIBE from `c` (delivered, answers not taken).
    pub fn subscribe(
        &mut self,
        c: ClientId,
        track: &FullTrackName,
        filter: Option<LocationFilter>,
    ) -> RequestId {
        let rid = self.next_request_id(c);
        self.send(c, subscribe_msg(rid, track, filter));
        self.run_until_quiet();
        rid
    }

    /// The one upstream SUBSCRIBE the publisher got (and nothing else).
    pub fn upstream_subscribe(&mut self, p: ClientId, track: &FullTrackName) -> Subscribe {
        let msgs = messages(&self.take_events(p));
        let [Message::Subscribe(s)] = msgs.as_slice() else { panic!("publisher got {msgs:?}") };
        assert_eq!(&s.track, track);
        assert_eq!(s.params.forward, Some(true));
        s.clone()
    }

    /// The publisher answers the upstream SUBSCRIBE with Track Alias [`PUB_ALIAS`].
    pub fn accept(&mut self, p: ClientId, up: &Subscribe, largest: Option<Location>) {
        self.accept_as(p, up, PUB_ALIAS, largest);
    }

    /// The publisher answers the upstream SUBSCRIBE with Track Alias `alias` (one per track).
    pub fn accept_as(&mut self, p: ClientId, up: &Subscribe, alias: TrackAlias, largest: Option<Location>) {
        self.accept_with(p, up, alias, largest, track_properties());
    }

    /// The publisher answers the upstream SUBSCRIBE with these Track Properties.
    pub fn accept_with(
        &mut self,
        p: ClientId,
        up: &Subscribe,
        alias: TrackAlias,
        largest: Option<Location>,
        track_properties: Properties,
    ) {
        let ok = SubscribeOk {
            request_id: up.request_id,
            track_alias: alias,
            params: Parameters { largest_object: largest, ..Default::default() },
            track_properties,
        };
        self.send(p, Message::SubscribeOk(ok));
        self.run_until_quiet();
    }

    pub fn open(&mut self, p: ClientId, h: &SubgroupHeader) -> StreamId {
        self.session(p).open_subgroup(h).unwrap()
    }

    pub fn put(&mut self, p: ClientId, stream: StreamId, o: &(SubgroupObject, Bytes)) {
        self.session(p).send_object(stream, &o.0, o.1.clone()).unwrap();
    }

    pub fn fin(&mut self, p: ClientId, stream: StreamId) {
        self.session(p).finish_data_stream(stream).unwrap();
    }

    /// No client closed a connection, and none was closed by the relay.
    pub fn assert_no_closes(&self) {
        for (i, c) in self.clients.iter().enumerate() {
            assert_eq!(c.closed_by_relay, None, "client {i} closed by the relay");
            assert_eq!(c.closed_by_client, None, "client {i} closed the connection");
        }
    }

    /// A publisher on core 0 with `ns` announced, subscribers of `track` on the given cores, the
    /// upstream SUBSCRIBE accepted. Returns (publisher, subscribers with their Request IDs, the
    /// upstream SUBSCRIBE).
    pub fn established(
        &mut self,
        pv: Version,
        sv: Version,
        track: &FullTrackName,
        cores: &[usize],
        largest: Option<Location>,
    ) -> (ClientId, Vec<(ClientId, RequestId)>, Subscribe) {
        let p = self.connect(0, pv);
        self.announce(p, &["live"]);
        let subs: Vec<(ClientId, RequestId)> = cores
            .iter()
            .map(|&core| {
                let s = self.connect(core, sv);
                (s, self.subscribe(s, track, None))
            })
            .collect();
        let up = self.upstream_subscribe(p, track);
        self.accept(p, &up, largest);
        for &(s, rid) in &subs {
            let ok = subscribe_ok(&messages(&self.take_events(s)), rid);
            assert_eq!(ok.track_alias, self.alias(track));
        }
        (p, subs, up)
    }

    /// What the publisher sees when the relay ends an upstream SUBSCRIBE.
    pub fn assert_upstream_stopped(&mut self, p: ClientId, pv: Version, rid: RequestId) {
        let ev = self.take_events(p);
        match pv {
            D16 => assert_eq!(messages(&ev), vec![Message::Unsubscribe(rid)]),
            _ => assert_eq!(ev, vec![Event::Cancelled { request_id: rid }]),
        }
    }

    /// NAMESPACE / NAMESPACE_DONE suffixes client `c` got on namespace subscription `rid`.
    pub fn namespace_events(&mut self, c: ClientId, rid: RequestId) -> Vec<(bool, TrackNamespace)> {
        self.take_events(c)
            .into_iter()
            .map(|e| match e {
                Event::RequestMessage { request_id, message: Message::Namespace(n) } if request_id == rid => {
                    (true, n)
                }
                Event::RequestMessage { request_id, message: Message::NamespaceDone(n) }
                    if request_id == rid =>
                {
                    (false, n)
                }
                other => panic!("expected NAMESPACE / NAMESPACE_DONE on {rid:?}: {other:?}"),
            })
            .collect()
    }

    pub fn subscribe_namespace(&mut self, c: ClientId, prefix: &[&str]) -> (RequestId, Vec<Event>) {
        let rid = self.next_request_id(c);
        self.send(
            c,
            Message::SubscribeNamespace(SubscribeNamespace {
                request_id: rid,
                prefix: ns(prefix),
                ..Default::default()
            }),
        );
        self.run_until_quiet();
        (rid, self.take_events(c))
    }

    pub fn standalone(
        &mut self,
        c: ClientId,
        t: &FullTrackName,
        filter: LocationFilter,
    ) -> (RequestId, Vec<Event>) {
        let rid = self.next_request_id(c);
        self.send(c, fetch_msg(rid, FetchKind::Standalone { track: t.clone() }, Some(filter)));
        self.run_until_quiet();
        (rid, self.take_events(c))
    }

    /// The FETCHes the relay sent publisher `p` upstream (for what its cache lacks).
    pub fn upstream_fetches(&mut self, p: ClientId) -> Vec<Fetch> {
        let msgs = messages(&self.take_events(p));
        msgs.iter()
            .map(|m| match m {
                Message::Fetch(f) => f.clone(),
                m => panic!("expected only upstream FETCHes: {m:?}"),
            })
            .collect()
    }

    /// The publisher refuses every upstream FETCH waiting for it (REQUEST_ERROR DOES_NOT_EXIST).
    pub fn refuse_upstream_fetches(&mut self, p: ClientId) -> usize {
        let fetches = self.upstream_fetches(p);
        for f in &fetches {
            let e = RequestError {
                request_id: f.request_id,
                error_code: code::DOES_NOT_EXIST,
                retry_interval: 0,
                reason: Bytes::from_static(b"not here either"),
                redirect: None,
            };
            self.send(p, Message::RequestError(e));
            if self.clients[p].version.request_streams() {
                self.session(p).finish(f.request_id).unwrap();
            }
        }
        self.run_until_quiet();
        fetches.len()
    }

    /// The publisher answers upstream FETCH `f` with objects `locations` (as `object(g, o)`,
    /// Subgroup 0, priority 9) on a fetch stream ending with FIN.
    pub fn serve_upstream_fetch(&mut self, p: ClientId, f: &Fetch, locations: &[(u64, u64)]) {
        use wire::model::{FetchObject, GroupOrder};
        let pv = self.clients[p].version;
        let last = locations.last().map_or(Location::default(), |&(g, o)| Location::new(g, o));
        let ok = FetchOk {
            request_id: f.request_id,
            end_of_track: false,
            end_location: FetchEnd::Object(last),
            params: Parameters::default(),
            track_properties: Properties::new(),
        };
        self.send(p, Message::FetchOk(ok));
        let stream = self.session(p).open_fetch_stream(f.request_id).unwrap();
        let mut w = pv.fetch_writer(GroupOrder::Ascending);
        for &(g, o) in locations {
            let (obj, payload) = object(g, o);
            let item = FetchItem::Object(FetchObject {
                location: Location::new(g, o),
                subgroup_id: Some(0),
                publisher_priority: 9,
                properties: obj.properties,
                payload_len: payload.len() as u64,
            });
            let mut head = Vec::new();
            w.encode(&item, &mut head).unwrap();
            self.session(p).send_raw_data(stream, Bytes::from(head)).unwrap();
            self.session(p).send_raw_data(stream, payload).unwrap();
        }
        self.session(p).finish_data_stream(stream).unwrap();
        if pv.request_streams() {
            self.session(p).finish(f.request_id).unwrap();
        }
        self.run_until_quiet();
    }

    /// Publishes groups `groups` of five objects each, one subgroup stream per group (FIN).
    pub fn publish_groups(&mut self, p: ClientId, pv: Version, groups: std::ops::Range<u64>) {
        for g in groups {
            let st = self.open(p, &header(pv, PUB_ALIAS, g, 0));
            for o in 0..5 {
                self.put(p, st, &object(g, o));
            }
            self.fin(p, st);
        }
        self.run_until_quiet();
    }

    pub fn track_status(&mut self, c: ClientId, t: &FullTrackName) -> RequestId {
        let rid = self.next_request_id(c);
        self.send(
            c,
            Message::TrackStatus(Subscribe {
                request_id: rid,
                track: t.clone(),
                params: Parameters::default(),
            }),
        );
        self.run_until_quiet();
        rid
    }

    /// Sends REQUEST_UPDATE of `existing`; returns the Request ID its answer carries (draft-16:
    /// the update's own; draft-18 and draft-22: the updated request's, on whose stream it
    /// travels).
    pub fn update(&mut self, c: ClientId, existing: RequestId, params: Parameters) -> RequestId {
        let rid = self.next_request_id(c);
        let m = RequestUpdate { request_id: rid, existing_request_id: existing, params };
        self.send(c, Message::RequestUpdate(m));
        self.run_until_quiet();
        if self.clients[c].version == D16 {
            rid
        } else {
            existing
        }
    }

    pub fn refused(&mut self, c: ClientId, rid: RequestId, code: u64, ctx: &str) {
        let e = request_error(&messages(&self.take_events(c)));
        assert_eq!((e.request_id, e.error_code), (rid, code), "{ctx}");
    }

    /// A link on core 0 to parent node 7 with the default route; its Ready event taken.
    pub fn link(&mut self, v: Version) -> ClientId {
        let parent = self.connect_link(0, v, vec![TrackNamespace::from_strs::<&str>(&[])], parent_setup(7));
        let ev = self.take_events(parent);
        let [Event::Ready { peer }] = ev.as_slice() else { panic!("parent got {ev:?}") };
        let ours = relay::links::node_of(peer);
        assert_eq!(ours, Some(self.shards[0].config().node_id), "the relay names its node in SETUP");
        parent
    }
}
