//! The relay core end to end without QUIC: several [`RelayShard`]s (simulated cores) joined by
//! FIFO mesh queues, with draft-16 and draft-22 client sessions attached to them, driven by a
//! simulated clock (`tests/support/relay.rs`). Every scenario runs for each draft and for a
//! draft-16 publisher with draft-22 subscribers and the reverse; assertions are on the
//! messages and object bytes the clients see and on the shards' state counts.
//!
//! [`RelayShard`]: moq_edge::relay::RelayShard
#![allow(clippy::unwrap_used)]

#[path = "support/relay.rs"]
mod relay;
mod support;

use std::time::Duration;

use bytes::Bytes;
use moq_edge::relay::{code, RelayConfig};
use moq_edge::session::{DataObject, Event, Transmit};
use moq_edge::wire::model::{
    AuthToken, DatagramHeader, Fetch, FetchEnd, FetchItem, FetchKind, FetchOk, FullTrackName, GroupOrder,
    KvValue, Location, LocationFilter, Message, ObjectStatus, Parameters, Properties, Publish, PublishDone,
    PublishNamespace, RangeEnd, RequestError, RequestId, RequestUpdate, SetupOptions, SubgroupHeader,
    SubgroupId, SubgroupObject, Subscribe, SubscribeNamespace, SubscribeOk, TrackAlias, TrackNamespace,
};
use moq_edge::wire::{Quic, Version, Vi64};
use relay::{messages, streams, ClientId, Relay, SeenStream};

const D16: Version = Version::Draft16;
const D22: Version = Version::Draft22;
/// (publisher draft, subscriber draft).
const COMBOS: [(Version, Version); 4] = [(D16, D16), (D22, D22), (D16, D22), (D22, D16)];
const PROTOCOL_VIOLATION: u64 = 0x3;
/// The Track Alias publishers in these tests choose (the relay replaces it with its own).
const PUB_ALIAS: TrackAlias = TrackAlias(77);

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

fn ns(fields: &[&str]) -> TrackNamespace {
    TrackNamespace::from_strs(fields)
}

fn track(fields: &[&str], name: &str) -> FullTrackName {
    FullTrackName { namespace: ns(fields), name: Bytes::copy_from_slice(name.as_bytes()) }
}

/// A track in namespace `fields` whose owner shard is `owner`.
fn track_owned_by(r: &Relay, fields: &[&str], owner: usize) -> FullTrackName {
    (0..1000)
        .map(|i| track(fields, &format!("track-{i}")))
        .find(|t| r.owner(t) == owner)
        .expect("a name for every owner")
}

/// PUBLISH_NAMESPACE from `c`, answered with REQUEST_OK.
fn announce(r: &mut Relay, c: ClientId, fields: &[&str]) -> RequestId {
    let rid = r.next_request_id(c);
    r.send(
        c,
        Message::PublishNamespace(PublishNamespace {
            request_id: rid,
            namespace: ns(fields),
            ..Default::default()
        }),
    );
    r.run_until_quiet();
    let msgs = messages(&r.take_events(c));
    assert!(matches!(msgs.as_slice(), [Message::RequestOk(ok)] if ok.request_id == rid), "{msgs:?}");
    rid
}

fn subscribe_msg(rid: RequestId, track: &FullTrackName, filter: Option<LocationFilter>) -> Message {
    Message::Subscribe(Subscribe {
        request_id: rid,
        track: track.clone(),
        params: Parameters { location_filter: filter, ..Default::default() },
    })
}

/// SUBSCRIBE from `c` (delivered, answers not taken).
fn subscribe(r: &mut Relay, c: ClientId, track: &FullTrackName, filter: Option<LocationFilter>) -> RequestId {
    let rid = r.next_request_id(c);
    r.send(c, subscribe_msg(rid, track, filter));
    r.run_until_quiet();
    rid
}

/// The one upstream SUBSCRIBE the publisher got (and nothing else).
fn upstream_subscribe(r: &mut Relay, p: ClientId, track: &FullTrackName) -> Subscribe {
    let msgs = messages(&r.take_events(p));
    let [Message::Subscribe(s)] = msgs.as_slice() else { panic!("publisher got {msgs:?}") };
    assert_eq!(&s.track, track);
    assert_eq!(s.params.forward, Some(true));
    s.clone()
}

fn track_properties() -> Properties {
    let mut p = Properties::new();
    p.push(0x40, KvValue::Int(1234));
    p
}

/// The publisher answers the upstream SUBSCRIBE with Track Alias [`PUB_ALIAS`].
fn accept(r: &mut Relay, p: ClientId, up: &Subscribe, largest: Option<Location>) {
    accept_as(r, p, up, PUB_ALIAS, largest);
}

/// The publisher answers the upstream SUBSCRIBE with Track Alias `alias` (one per track).
fn accept_as(r: &mut Relay, p: ClientId, up: &Subscribe, alias: TrackAlias, largest: Option<Location>) {
    accept_with(r, p, up, alias, largest, track_properties());
}

/// The publisher answers the upstream SUBSCRIBE with these Track Properties.
fn accept_with(
    r: &mut Relay,
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
    r.send(p, Message::SubscribeOk(ok));
    r.run_until_quiet();
}

/// The one SUBSCRIBE_OK client `c` got for `rid` (and no other message).
fn subscribe_ok(msgs: &[Message], rid: RequestId) -> SubscribeOk {
    let [Message::SubscribeOk(ok)] = msgs else { panic!("expected SUBSCRIBE_OK for {rid:?}: {msgs:?}") };
    assert_eq!(ok.request_id, rid);
    ok.clone()
}

/// The one REQUEST_ERROR among `msgs`.
fn request_error(msgs: &[Message]) -> RequestError {
    let [Message::RequestError(e)] = msgs else { panic!("expected REQUEST_ERROR: {msgs:?}") };
    e.clone()
}

fn publish_done(msgs: &[Message]) -> PublishDone {
    let [Message::PublishDone(d)] = msgs else { panic!("expected PUBLISH_DONE: {msgs:?}") };
    d.clone()
}

/// A subgroup header as the publisher writes it. A draft-22 publisher sets FIRST_OBJECT (its
/// streams start at the subgroup's first object).
fn header(v: Version, alias: TrackAlias, group: u64, subgroup: u64) -> SubgroupHeader {
    SubgroupHeader {
        track_alias: alias,
        group_id: group,
        subgroup_id: SubgroupId::Explicit(subgroup),
        publisher_priority: Some(9),
        has_properties: true,
        end_of_group: false,
        first_object: v == D22,
    }
}

/// Object `id` with a payload derived from its location (every object distinct).
fn object(group: u64, id: u64) -> (SubgroupObject, Bytes) {
    let payload = Bytes::from(format!("g{group}-o{id}-{}", "x".repeat((id as usize * 37) % 200)));
    let mut properties = Properties::new();
    if id.is_multiple_of(2) {
        properties.push(0x42, KvValue::Int(group * 100 + id));
        properties.push(0x43, KvValue::Bytes(Bytes::from_static(b"meta")));
    }
    (
        SubgroupObject {
            object_id: id,
            properties,
            payload_len: payload.len() as u64,
            status: ObjectStatus::Normal,
        },
        payload,
    )
}

fn open(r: &mut Relay, p: ClientId, h: &SubgroupHeader) -> u64 {
    r.session(p).open_subgroup(h).unwrap()
}

fn put(r: &mut Relay, p: ClientId, stream: u64, o: &(SubgroupObject, Bytes)) {
    r.session(p).send_object(stream, &o.0, o.1.clone()).unwrap();
}

fn fin(r: &mut Relay, p: ClientId, stream: u64) {
    r.session(p).finish_data_stream(stream).unwrap();
}

/// The PUBLISH_DONE a publisher sends for `rid`.
fn done_msg(rid: RequestId, stream_count: u64) -> Message {
    Message::PublishDone(PublishDone {
        request_id: rid,
        status_code: code::TRACK_ENDED,
        stream_count,
        reason: Bytes::from_static(b"bye"),
    })
}

/// What a subscriber of `alias` (draft `sv`) should see for a stream the publisher (draft
/// `pv`) wrote with `h`; `from_first`: the subscriber got the stream from its first object.
fn expected_header(h: &SubgroupHeader, alias: TrackAlias, sv: Version, from_first: bool) -> SubgroupHeader {
    SubgroupHeader { track_alias: alias, first_object: h.first_object && from_first && sv == D22, ..*h }
}

fn assert_stream(
    seen: &SeenStream,
    rid: RequestId,
    header: SubgroupHeader,
    objects: &[(SubgroupObject, Bytes)],
    end: Option<Option<u64>>,
) {
    assert_eq!(seen.request_id, rid);
    assert_eq!(seen.header, header);
    let ids = |o: &[(SubgroupObject, Bytes)]| o.iter().map(|o| o.0.object_id).collect::<Vec<_>>();
    assert_eq!(ids(&seen.objects), ids(objects), "objects on stream {}", seen.stream);
    for (got, want) in seen.objects.iter().zip(objects) {
        assert_eq!(got.0, want.0);
        assert_eq!(&got.1[..], &want.1[..], "payload of object {}", want.0.object_id);
    }
    assert_eq!(seen.end, end, "end of stream {}", seen.stream);
}

/// No client closed a connection, and none was closed by the relay.
fn assert_no_closes(r: &Relay) {
    for (i, c) in r.clients.iter().enumerate() {
        assert_eq!(c.closed_by_relay, None, "client {i} closed by the relay");
        assert_eq!(c.closed_by_client, None, "client {i} closed the connection");
    }
}

/// A publisher on core 0 with `ns` announced, subscribers of `track` on the given cores, the
/// upstream SUBSCRIBE accepted. Returns (publisher, subscribers with their Request IDs, the
/// upstream SUBSCRIBE).
fn established(
    r: &mut Relay,
    pv: Version,
    sv: Version,
    track: &FullTrackName,
    cores: &[usize],
    largest: Option<Location>,
) -> (ClientId, Vec<(ClientId, RequestId)>, Subscribe) {
    let p = r.connect(0, pv);
    announce(r, p, &["live"]);
    let subs: Vec<(ClientId, RequestId)> = cores
        .iter()
        .map(|&core| {
            let s = r.connect(core, sv);
            (s, subscribe(r, s, track, None))
        })
        .collect();
    let up = upstream_subscribe(r, p, track);
    accept(r, p, &up, largest);
    for &(s, rid) in &subs {
        let ok = subscribe_ok(&messages(&r.take_events(s)), rid);
        assert_eq!(ok.track_alias, r.alias(track));
    }
    (p, subs, up)
}

// ---------------------------------------------------------------------------------------------
// 1. Aggregation and fan-out
// ---------------------------------------------------------------------------------------------

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
            let t = track_owned_by(&r, &["live", "cam"], owner);
            let alias = r.alias(&t);
            let p = r.connect(0, pv);
            announce(&mut r, p, &["live"]);
            let s1 = r.connect(1, sv);
            let s2 = r.connect(2, sv);
            let rid1 = subscribe(&mut r, s1, &t, None);
            assert!(r.take_events(s1).is_empty(), "answered before the publisher");
            let rid2 = subscribe(&mut r, s2, &t, Some(LocationFilter::NextObject));
            let up = upstream_subscribe(&mut r, p, &t);
            assert!(r.take_events(s1).is_empty() && r.take_events(s2).is_empty());
            assert_eq!(r.state_counts()[owner].0, 1, "the owner holds the track");

            let largest = Location::new(4, 9);
            accept(&mut r, p, &up, Some(largest));
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
            let a = open(&mut r, p, &ha);
            let b = open(&mut r, p, &hb);
            let objs_a: Vec<_> = (0..6).map(|i| object(5, i * 2)).collect();
            let objs_b: Vec<_> = (0..6).map(|i| object(5, i * 2 + 1)).collect();
            for i in 0..6 {
                put(&mut r, p, a, &objs_a[i]);
                put(&mut r, p, b, &objs_b[i]);
                if i % 2 == 1 {
                    r.run_until_quiet();
                }
            }
            fin(&mut r, p, a);
            fin(&mut r, p, b);
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
            if pv == D22 {
                r.session(p).finish(up.request_id).unwrap();
            }
            r.run_until_quiet();
            for (s, rid) in [(s1, rid1), (s2, rid2)] {
                let d = publish_done(&messages(&r.take_events(s)));
                assert_eq!((d.request_id, d.status_code, d.stream_count), (rid, code::TRACK_ENDED, 2));
                assert_eq!(&d.reason[..], b"bye");
            }
            r.assert_idle();
            assert_no_closes(&r);
        }
    }
}

/// Subscribers of both drafts on one core and on the publisher's core, for one upstream
/// (each gets its own downstream streams and its own Stream Count).
#[test]
fn mixed_subscribers_on_one_core_share_the_upstream() {
    for pv in [D16, D22] {
        let mut r = Relay::new(2);
        let t = track(&["live"], "mixed");
        let alias = r.alias(&t);
        let p = r.connect(0, pv);
        announce(&mut r, p, &["live"]);
        let subs: Vec<(ClientId, Version)> = vec![
            (r.connect(1, D16), D16),
            (r.connect(1, D22), D22),
            (r.connect(0, D22), D22),
            (r.connect(0, D16), D16),
        ];
        let rids: Vec<RequestId> = subs.iter().map(|&(s, _)| subscribe(&mut r, s, &t, None)).collect();
        let up = upstream_subscribe(&mut r, p, &t);
        accept(&mut r, p, &up, None);
        for (&(s, _), &rid) in subs.iter().zip(&rids) {
            subscribe_ok(&messages(&r.take_events(s)), rid);
        }
        let h = header(pv, PUB_ALIAS, 0, 0);
        let st = open(&mut r, p, &h);
        let objs: Vec<_> = (0..4).map(|i| object(0, i)).collect();
        for o in &objs {
            put(&mut r, p, st, o);
        }
        fin(&mut r, p, st);
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
        assert_no_closes(&r);
    }
}

/// Object datagrams reach subscribers on two cores with the relay's alias, header and payload
/// unchanged.
#[test]
fn datagrams_reach_every_subscriber() {
    for (pv, sv) in COMBOS {
        let mut r = Relay::new(3);
        let t = track_owned_by(&r, &["live"], 0);
        let alias = r.alias(&t);
        let (p, subs, _up) = established(&mut r, pv, sv, &t, &[1, 2], None);
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
        assert_no_closes(&r);
    }
}

// ---------------------------------------------------------------------------------------------
// 2. Routing
// ---------------------------------------------------------------------------------------------

/// SUBSCRIBE with no publisher for its namespace: REQUEST_ERROR DOES_NOT_EXIST, nothing kept.
#[test]
fn subscribe_without_publisher_is_does_not_exist() {
    for v in [D16, D22] {
        for owner in 0..2 {
            let mut r = Relay::new(2);
            let p = r.connect(0, v);
            announce(&mut r, p, &["other"]);
            let s = r.connect(1, v);
            let t = track_owned_by(&r, &["nobody"], owner);
            let rid = subscribe(&mut r, s, &t, None);
            let e = request_error(&messages(&r.take_events(s)));
            assert_eq!((e.request_id, e.error_code), (rid, code::DOES_NOT_EXIST), "{v:?}");
            assert!(r.take_events(p).is_empty());
            r.assert_idle();
            assert_no_closes(&r);
        }
    }
}

/// Publisher A announces ["a"], B announces ["a","b"]: a track in ["a","b","c"] goes to B, one
/// in ["a","x"] to A; after B withdraws, ["a","b","c"] goes to A.
#[test]
fn namespace_routing_takes_the_longest_prefix() {
    for (pv, sv) in COMBOS {
        let mut r = Relay::new(3);
        let a = r.connect(0, pv);
        let b = r.connect(1, pv);
        let s = r.connect(2, sv);
        announce(&mut r, a, &["a"]);
        let b_ns = announce(&mut r, b, &["a", "b"]);

        let deep = track(&["a", "b", "c"], "t");
        let rid = subscribe(&mut r, s, &deep, None);
        assert!(r.take_events(a).is_empty(), "{pv:?}: the shorter prefix got the SUBSCRIBE");
        let up = upstream_subscribe(&mut r, b, &deep);
        accept(&mut r, b, &up, None);
        subscribe_ok(&messages(&r.take_events(s)), rid);

        let shallow = track(&["a", "x"], "t");
        let rid2 = subscribe(&mut r, s, &shallow, None);
        assert!(r.take_events(b).is_empty());
        let up2 = upstream_subscribe(&mut r, a, &shallow);
        accept(&mut r, a, &up2, None);
        subscribe_ok(&messages(&r.take_events(s)), rid2);

        // B withdraws ["a","b"] (draft-16 PUBLISH_NAMESPACE_DONE, draft-22 cancels the request).
        r.send(b, Message::PublishNamespaceDone(b_ns));
        r.run_until_quiet();
        let other = track(&["a", "b", "c"], "u");
        let rid3 = subscribe(&mut r, s, &other, None);
        assert!(r.take_events(b).is_empty(), "{pv:?}: withdrawn namespace still routed");
        let up3 = upstream_subscribe(&mut r, a, &other);
        accept_as(&mut r, a, &up3, TrackAlias(78), None);
        subscribe_ok(&messages(&r.take_events(s)), rid3);
        assert_no_closes(&r);
    }
}

// ---------------------------------------------------------------------------------------------
// 3. Linger
// ---------------------------------------------------------------------------------------------

/// What the publisher sees when the relay ends an upstream SUBSCRIBE.
fn assert_upstream_stopped(r: &mut Relay, p: ClientId, pv: Version, rid: RequestId) {
    let ev = r.take_events(p);
    match pv {
        D16 => assert_eq!(messages(&ev), vec![Message::Unsubscribe(rid)]),
        _ => assert_eq!(ev, vec![Event::Cancelled { request_id: rid }]),
    }
}

/// The last subscriber leaving (UNSUBSCRIBE / cancel) ends the upstream only once the linger
/// has passed (and the owner's timer says when).
#[test]
fn last_unsubscribe_stops_upstream_after_the_linger() {
    for (pv, sv) in COMBOS {
        let mut r = Relay::new(3);
        let t = track_owned_by(&r, &["live"], 2);
        let (p, subs, up) = established(&mut r, pv, sv, &t, &[1, 2], None);
        let linger = RelayConfig::default().linger;

        r.send(subs[0].0, Message::Unsubscribe(subs[0].1));
        r.run_until_quiet();
        assert_eq!(r.state_counts()[1].1, 0, "subscription on core 1 gone");
        r.send(subs[1].0, Message::Unsubscribe(subs[1].1));
        r.run_until_quiet();
        assert!(r.take_events(p).is_empty(), "{pv:?}->{sv:?}: upstream ended at once");
        let now = r.now;
        assert_eq!(r.shards[2].tick(now), Some(now + linger), "owner's linger deadline");
        assert_eq!(r.state_counts()[2].0, 1, "track kept while lingering");

        r.advance(linger - Duration::from_millis(1));
        assert!(r.take_events(p).is_empty(), "upstream ended before the linger");
        r.advance(Duration::from_millis(1));
        assert_upstream_stopped(&mut r, p, pv, up.request_id);
        r.assert_idle();
        for &(s, _) in &subs {
            assert!(messages(&r.take_events(s)).is_empty());
        }

        // After the linger a new subscriber needs a new upstream SUBSCRIBE.
        let rid = subscribe(&mut r, subs[0].0, &t, None);
        let up2 = upstream_subscribe(&mut r, p, &t);
        assert_ne!(up2.request_id, up.request_id);
        accept_as(&mut r, p, &up2, TrackAlias(78), None);
        subscribe_ok(&messages(&r.take_events(subs[0].0)), rid);
        assert_no_closes(&r);
    }
}

/// While the relay drains (GOAWAY sent) a track nobody wants is not kept: the last
/// subscriber leaving ends the upstream at once, so the publisher's relay (or parent) is not
/// held up by it.
#[test]
fn a_draining_relay_does_not_linger() {
    for (pv, sv) in COMBOS {
        let mut r = Relay::new(3);
        let t = track_owned_by(&r, &["live"], 2);
        let (p, subs, up) = established(&mut r, pv, sv, &t, &[1], None);
        for shard in &mut r.shards {
            shard.go_away(10_000);
        }
        r.run_until_quiet();
        for c in [p, subs[0].0] {
            let ev = messages(&r.take_events(c));
            assert!(matches!(ev.as_slice(), [Message::GoAway(_)]), "{ev:?}");
        }
        r.send(subs[0].0, Message::Unsubscribe(subs[0].1));
        r.run_until_quiet();
        r.advance(Duration::from_millis(1));
        assert_upstream_stopped(&mut r, p, pv, up.request_id);
    }
}

/// A subscriber arriving inside the linger reuses the upstream: no second SUBSCRIBE, an
/// immediate SUBSCRIBE_OK carrying the largest location seen, and objects flow to it.
#[test]
fn resubscribe_within_linger_reuses_the_upstream() {
    for (pv, sv) in COMBOS {
        let mut r = Relay::new(3);
        let t = track_owned_by(&r, &["live"], 0);
        let alias = r.alias(&t);
        let (p, subs, up) = established(&mut r, pv, sv, &t, &[1], None);
        let h = header(pv, PUB_ALIAS, 3, 0);
        let st = open(&mut r, p, &h);
        put(&mut r, p, st, &object(3, 0));
        put(&mut r, p, st, &object(3, 1));
        r.run_until_quiet();
        assert_eq!(streams(&r.take_events(subs[0].0))[0].objects.len(), 2);

        r.send(subs[0].0, Message::Unsubscribe(subs[0].1));
        r.run_until_quiet();
        let linger = RelayConfig::default().linger;
        r.advance(linger / 2);
        assert!(r.take_events(p).is_empty());

        let s2 = r.connect(2, sv);
        let rid = subscribe(&mut r, s2, &t, None);
        let ok = subscribe_ok(&messages(&r.take_events(s2)), rid);
        assert_eq!(ok.params.largest_object, Some(Location::new(3, 1)), "{pv:?}->{sv:?}");
        assert!(r.take_events(p).is_empty(), "a second upstream SUBSCRIBE");
        r.advance(linger);
        assert!(r.take_events(p).is_empty(), "upstream ended while in use");

        // The upstream stream continues; the new subscriber gets what follows.
        let more = [object(3, 2), object(3, 3)];
        for o in &more {
            put(&mut r, p, st, o);
        }
        fin(&mut r, p, st);
        r.run_until_quiet();
        let seen = streams(&r.take_events(s2));
        assert_eq!(seen.len(), 1);
        assert_stream(&seen[0], rid, expected_header(&h, alias, sv, false), &more, Some(None));

        r.send(s2, Message::Unsubscribe(rid));
        r.run_until_quiet();
        r.advance(linger);
        assert_upstream_stopped(&mut r, p, pv, up.request_id);
        r.assert_idle();
        assert_no_closes(&r);
    }
}

/// Client `c` sends `msg`, and its bytes reach the relay now, without running the mesh (the
/// shard's messages for other cores stay queued).
fn send_now(r: &mut Relay, c: ClientId, msg: Message) {
    r.send(c, msg);
    for t in r.capture(c) {
        r.deliver_to_relay(c, &t);
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
        let t = track_owned_by(&r, &["live"], 2);
        let alias = r.alias(&t);
        let (p, keep, _up) = established(&mut r, pv, sv, &t, &[0], None);
        let h = header(pv, PUB_ALIAS, 6, 0);
        let st = open(&mut r, p, &h);
        let objs: Vec<_> = (0..6).map(|i| object(6, i)).collect();
        put(&mut r, p, st, &objs[0]);
        r.run_until_quiet();
        let s1 = r.connect(1, sv);
        let s2 = r.connect(1, sv);

        let rid1 = r.next_request_id(s1);
        send_now(&mut r, s1, subscribe_msg(rid1, &t, None));
        send_now(&mut r, s1, Message::Unsubscribe(rid1));
        let rid2 = r.next_request_id(s2);
        send_now(&mut r, s2, subscribe_msg(rid2, &t, None));
        for o in &objs[1..4] {
            put(&mut r, p, st, o);
        }
        for t in r.capture(p) {
            r.deliver_to_relay(p, &t);
        }
        r.run_until_quiet();
        for o in &objs[4..] {
            put(&mut r, p, st, o);
        }
        fin(&mut r, p, st);
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
        assert_no_closes(&r);
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
        let t = track_owned_by(&r, &["live"], 2);
        let (p, subs, up) = established(&mut r, pv, sv, &t, &[1], None);
        let (s1, rid1) = subs[0];
        let s2 = r.connect(1, sv);

        send_now(&mut r, p, done_msg(up.request_id, 0));
        send_now(&mut r, s1, Message::Unsubscribe(rid1));
        let rid2 = r.next_request_id(s2);
        send_now(&mut r, s2, subscribe_msg(rid2, &t, None));
        r.run_until_quiet();
        assert!(messages(&r.take_events(s2)).is_empty(), "{pv:?}->{sv:?}: answered before the publisher");
        let up2 = upstream_subscribe(&mut r, p, &t);
        accept_as(&mut r, p, &up2, TrackAlias(78), None);
        subscribe_ok(&messages(&r.take_events(s2)), rid2);
        let ev = r.take_events(s1);
        assert!(messages(&ev).is_empty(), "{ev:?}");

        r.send(s2, Message::Unsubscribe(rid2));
        r.run_until_quiet();
        r.advance(RelayConfig::default().linger);
        assert_upstream_stopped(&mut r, p, pv, up2.request_id);
        r.assert_idle();
        assert_no_closes(&r);
    }
}

/// The only subscriber leaves before the publisher has answered the upstream SUBSCRIBE: the
/// upstream ends a linger after the answer, and nobody downstream hears of it.
#[test]
fn subscriber_leaving_before_the_upstream_answer() {
    for (pv, sv) in COMBOS {
        let mut r = Relay::new(3);
        let t = track_owned_by(&r, &["live"], 2);
        let p = r.connect(0, pv);
        announce(&mut r, p, &["live"]);
        let s = r.connect(1, sv);
        let rid = subscribe(&mut r, s, &t, None);
        let up = upstream_subscribe(&mut r, p, &t);
        r.send(s, Message::Unsubscribe(rid));
        r.run_until_quiet();
        assert_eq!(r.state_counts()[1].1, 0);
        accept(&mut r, p, &up, None);
        assert!(messages(&r.take_events(s)).is_empty(), "{pv:?}->{sv:?}");
        r.advance(RelayConfig::default().linger);
        assert_upstream_stopped(&mut r, p, pv, up.request_id);
        r.assert_idle();
        assert_no_closes(&r);
    }
}

// ---------------------------------------------------------------------------------------------
// 4. PUBLISH
// ---------------------------------------------------------------------------------------------

/// PUBLISH of `track`; a draft-22 publisher also states its GROUP_ORDER (draft-16 PUBLISH
/// has no such parameter).
fn publish_msg(v: Version, rid: RequestId, track: &FullTrackName, largest: Option<Location>) -> Message {
    let group_order = (v == D22).then_some(GroupOrder::Ascending);
    Message::Publish(Publish {
        request_id: rid,
        track: track.clone(),
        track_alias: PUB_ALIAS,
        params: Parameters {
            largest_object: largest,
            forward: Some(true),
            group_order,
            ..Default::default()
        },
        track_properties: Properties::new(),
    })
}

/// The Forward State the relay set for PUBLISH `rid`, from what the publisher got: draft-16
/// PUBLISH_OK carries FORWARD; draft-22 PUBLISH_OK (a REQUEST_OK) cannot, so the PUBLISH's own
/// state (1 in these tests) holds unless a REQUEST_UPDATE follows it.
fn publish_answer(pv: Version, msgs: &[Message], rid: RequestId) -> bool {
    match (pv, msgs) {
        (D16, [Message::PublishOk(ok)]) if ok.request_id == rid => ok.params.forward.unwrap_or(true),
        (D22, [Message::RequestOk(ok)]) if ok.request_id == rid => true,
        (D22, [Message::RequestOk(ok), Message::RequestUpdate(u)])
            if ok.request_id == rid && u.existing_request_id == rid =>
        {
            u.params.forward.unwrap_or(true)
        }
        _ => panic!("expected PUBLISH_OK for {rid:?}: {msgs:?}"),
    }
}

/// PUBLISH with nobody subscribed: paused (draft-16 PUBLISH_OK FORWARD=0; draft-22 PUBLISH_OK
/// then REQUEST_UPDATE FORWARD=0). A subscriber arrives: REQUEST_UPDATE FORWARD=1 upstream,
/// SUBSCRIBE_OK downstream; the stream the publisher opened before continues to the
/// subscriber, later streams reach it whole, PUBLISH_DONE ends it.
fn paused_then_forwarded(pv: Version, sv: Version) {
    let mut r = Relay::new(3);
    let t = track_owned_by(&r, &["live"], 2);
    let alias = r.alias(&t);
    let p = r.connect(0, pv);
    let prid = r.next_request_id(p);
    r.send(p, publish_msg(pv, prid, &t, Some(Location::new(2, 5))));
    r.run_until_quiet();
    let ev = r.take_events(p);
    assert_no_closes(&r);
    assert!(!publish_answer(pv, &messages(&ev), prid), "{pv:?}: not paused");
    assert_eq!(r.state_counts()[0].2, 1, "the PUBLISH is an upstream on core 0");

    // Objects sent while paused go nowhere (nobody subscribed).
    let h = header(pv, PUB_ALIAS, 3, 0);
    let st = open(&mut r, p, &h);
    put(&mut r, p, st, &object(3, 0));
    put(&mut r, p, st, &object(3, 1));
    r.run_until_quiet();

    let s = r.connect(1, sv);
    let rid = subscribe(&mut r, s, &t, None);
    let msgs = messages(&r.take_events(p));
    let [Message::RequestUpdate(u)] = msgs.as_slice() else { panic!("{pv:?}->{sv:?}: {msgs:?}") };
    assert_eq!((u.existing_request_id, u.params.forward), (prid, Some(true)));
    let ok = subscribe_ok(&messages(&r.take_events(s)), rid);
    assert_eq!(ok.track_alias, alias);
    assert_eq!(ok.params.largest_object, Some(Location::new(3, 1)));
    assert_no_closes(&r);

    let more = [object(3, 2), object(3, 3)];
    for o in &more {
        put(&mut r, p, st, o);
    }
    fin(&mut r, p, st);
    let h2 = header(pv, PUB_ALIAS, 4, 0);
    let st2 = open(&mut r, p, &h2);
    let g4: Vec<_> = (0..3).map(|i| object(4, i)).collect();
    for o in &g4 {
        put(&mut r, p, st2, o);
    }
    fin(&mut r, p, st2);
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
    assert_no_closes(&r);
}

#[test]
fn publish_without_subscribers_is_paused_then_forwarded() {
    for (pv, sv) in COMBOS {
        paused_then_forwarded(pv, sv);
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
            let t = track_owned_by(&r, &["live"], owner);
            let alias = r.alias(&t);
            let p = r.connect(0, pv);
            announce(&mut r, p, &["live"]);
            let s = r.connect(1, sv);
            let rid = subscribe(&mut r, s, &t, None);
            let up = upstream_subscribe(&mut r, p, &t);

            let prid = r.next_request_id(p);
            r.send(p, publish_msg(pv, prid, &t, Some(Location::new(2, 5))));
            let h = header(pv, PUB_ALIAS, 3, 0);
            let st = open(&mut r, p, &h);
            let objs: Vec<_> = (0..4).map(|i| object(3, i)).collect();
            for o in &objs {
                put(&mut r, p, st, o);
            }
            fin(&mut r, p, st);
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
            assert_no_closes(&r);

            // The publisher of the PUBLISH goes away mid-group: reset, PUBLISH_DONE, no state.
            let h2 = header(pv, PUB_ALIAS, 4, 0);
            let st2 = open(&mut r, p, &h2);
            put(&mut r, p, st2, &object(4, 0));
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

/// A PUBLISH whose last subscriber left is paused (REQUEST_UPDATE FORWARD=0) once the linger
/// has passed, and kept: a later subscriber resumes it (FORWARD=1) without a new PUBLISH.
#[test]
fn published_track_is_paused_after_the_linger() {
    for (pv, sv) in COMBOS {
        let mut r = Relay::new(2);
        let t = track_owned_by(&r, &["live"], 1);
        let p = r.connect(0, pv);
        let s = r.connect(1, sv);
        let prid = r.next_request_id(p);
        r.send(p, publish_msg(pv, prid, &t, None));
        r.run_until_quiet();
        assert!(!publish_answer(pv, &messages(&r.take_events(p)), prid));
        let rid = subscribe(&mut r, s, &t, None);
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

        let rid2 = subscribe(&mut r, s, &t, None);
        subscribe_ok(&messages(&r.take_events(s)), rid2);
        let msgs = messages(&r.take_events(p));
        assert!(matches!(msgs.as_slice(), [Message::RequestUpdate(u)] if u.params.forward == Some(true)));
        assert_no_closes(&r);
    }
}

// ---------------------------------------------------------------------------------------------
// 5. Publisher gone
// ---------------------------------------------------------------------------------------------

/// The publisher's connection goes away mid-group: every subscriber's open stream is reset,
/// PUBLISH_DONE follows (with the streams it got), a subscriber still waiting for another
/// track gets REQUEST_ERROR, the namespace is withdrawn everywhere, no state is left.
#[test]
fn publisher_gone_mid_group_resets_streams_and_ends_subscriptions() {
    for (pv, sv) in COMBOS {
        let mut r = Relay::new(3);
        let t = track_owned_by(&r, &["live"], 1);
        let (p, subs, _up) = established(&mut r, pv, sv, &t, &[0, 1, 2], None);
        let alias = r.alias(&t);
        let h = header(pv, PUB_ALIAS, 5, 0);
        let st = open(&mut r, p, &h);
        let objs = [object(5, 0), object(5, 1)];
        for o in &objs {
            put(&mut r, p, st, o);
        }
        r.run_until_quiet();
        // A second track whose upstream SUBSCRIBE is still unanswered.
        let pending = track_owned_by(&r, &["live"], 2);
        let waiter = r.connect(2, sv);
        let wrid = subscribe(&mut r, waiter, &pending, None);
        upstream_subscribe(&mut r, p, &pending);

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
            let gone = track_owned_by(&r, &["live"], core);
            let rid = subscribe(&mut r, s, &gone, None);
            let e = request_error(&messages(&r.take_events(s)));
            assert_eq!((e.request_id, e.error_code), (rid, code::DOES_NOT_EXIST));
        }
        r.assert_idle();
        assert_no_closes(&r);
    }
}

// ---------------------------------------------------------------------------------------------
// 6. Held PUBLISH_DONE
// ---------------------------------------------------------------------------------------------

/// PUBLISH_DONE (Stream Count 1) overtakes the end of the stream it counts: the subscriber
/// gets the rest of the stream and its FIN first, PUBLISH_DONE after.
#[test]
fn publish_done_waits_for_the_stream_it_counts() {
    for (pv, sv) in COMBOS {
        let mut r = Relay::new(3);
        let t = track_owned_by(&r, &["live"], 2);
        let alias = r.alias(&t);
        let (p, subs, up) = established(&mut r, pv, sv, &t, &[1], None);
        let (s, rid) = subs[0];
        let h = header(pv, PUB_ALIAS, 1, 0);
        let st = open(&mut r, p, &h);
        let objs: Vec<_> = (0..3).map(|i| object(1, i)).collect();
        put(&mut r, p, st, &objs[0]);
        r.run_until_quiet();

        put(&mut r, p, st, &objs[1]);
        put(&mut r, p, st, &objs[2]);
        fin(&mut r, p, st);
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
        assert_no_closes(&r);
    }
}

/// PUBLISH_DONE counting a stream that never comes is passed on once `done_wait` has passed
/// (not before), with the subscriber's own Stream Count.
#[test]
fn publish_done_is_passed_on_after_done_wait() {
    for (pv, sv) in COMBOS {
        let mut r = Relay::new(2);
        let t = track_owned_by(&r, &["live"], 1);
        let (p, subs, up) = established(&mut r, pv, sv, &t, &[1], None);
        let (s, rid) = subs[0];
        let st = open(&mut r, p, &header(pv, PUB_ALIAS, 1, 0));
        put(&mut r, p, st, &object(1, 0));
        fin(&mut r, p, st);
        r.send(p, done_msg(up.request_id, 2));
        r.run_until_quiet();
        assert!(messages(&r.take_events(s)).is_empty(), "{pv:?}->{sv:?}: PUBLISH_DONE not held");
        let wait = RelayConfig::default().done_wait;
        let now = r.now;
        assert_eq!(r.shards[0].tick(now), Some(now + wait), "ingest's done_wait deadline");

        r.advance(wait - Duration::from_millis(1));
        assert!(messages(&r.take_events(s)).is_empty());
        r.advance(Duration::from_millis(1));
        let d = publish_done(&messages(&r.take_events(s)));
        assert_eq!((d.request_id, d.status_code, d.stream_count), (rid, code::TRACK_ENDED, 1));
        r.assert_idle();
        assert_no_closes(&r);
    }
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
        let t = track_owned_by(&r, &["live"], 1);
        let alias = r.alias(&t);
        let (p, subs, up) = established(&mut r, pv, sv, &t, &[1], None);
        let (s, rid) = subs[0];
        let h1 = header(pv, PUB_ALIAS, 1, 0);
        let a = open(&mut r, p, &h1);
        let g1 = [object(1, 0)];
        put(&mut r, p, a, &g1[0]);
        fin(&mut r, p, a);
        r.run_until_quiet();
        // PUBLISH_DONE, then a stream the publisher opened before it but whose bytes come later.
        let h2 = header(pv, PUB_ALIAS, 2, 0);
        let b = open(&mut r, p, &h2);
        let g2 = [object(2, 0), object(2, 1)];
        for o in &g2 {
            put(&mut r, p, b, o);
        }
        fin(&mut r, p, b);
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
        assert_no_closes(&r);
    }
}

// ---------------------------------------------------------------------------------------------
// 7. Filters
// ---------------------------------------------------------------------------------------------

/// A subscriber joining mid-track with the default filter (and one with NextObject), on the
/// first subscriber's core and on another, gets exactly the objects after the largest
/// location at its SUBSCRIBE_OK; the early subscriber gets everything.
#[test]
fn late_subscriber_starts_after_the_largest_location() {
    for (pv, sv) in COMBOS {
        let mut r = Relay::new(3);
        let t = track_owned_by(&r, &["live"], 0);
        let alias = r.alias(&t);
        let (p, subs, _up) = established(&mut r, pv, sv, &t, &[1], Some(Location::new(0, 7)));
        let (s1, rid1) = subs[0];
        let h = header(pv, PUB_ALIAS, 1, 0);
        let st = open(&mut r, p, &h);
        let g1: Vec<_> = (0..6).map(|i| object(1, i)).collect();
        for o in &g1[..3] {
            put(&mut r, p, st, o);
        }
        r.run_until_quiet();

        let late_same = r.connect(1, sv);
        let rid_same = subscribe(&mut r, late_same, &t, None);
        let late_other = r.connect(2, sv);
        let rid_other = subscribe(&mut r, late_other, &t, Some(LocationFilter::NextObject));
        for (s, rid) in [(late_same, rid_same), (late_other, rid_other)] {
            let ok = subscribe_ok(&messages(&r.take_events(s)), rid);
            assert_eq!(ok.params.largest_object, Some(Location::new(1, 2)), "{pv:?}->{sv:?}");
        }
        for o in &g1[3..] {
            put(&mut r, p, st, o);
        }
        fin(&mut r, p, st);
        let h2 = header(pv, PUB_ALIAS, 2, 0);
        let st2 = open(&mut r, p, &h2);
        let g2: Vec<_> = (0..2).map(|i| object(2, i)).collect();
        for o in &g2 {
            put(&mut r, p, st2, o);
        }
        fin(&mut r, p, st2);
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
        assert_no_closes(&r);
    }
}

/// AbsoluteStart from a later group: nothing from earlier groups, everything from that group
/// on; a subscriber with an absolute window (AbsoluteStartGroupEnd in draft-16, AbsoluteRange
/// in draft-22) gets only the objects inside it.
#[test]
fn absolute_filters_skip_what_is_outside_them() {
    for (pv, sv) in COMBOS {
        let mut r = Relay::new(2);
        let t = track_owned_by(&r, &["live"], 1);
        let alias = r.alias(&t);
        let p = r.connect(0, pv);
        announce(&mut r, p, &["live"]);
        let s = r.connect(1, sv);
        let start = Location::new(3, 0);
        let rid = subscribe(&mut r, s, &t, Some(LocationFilter::AbsoluteStart { start }));
        // A window from (2,1): to the end of group 3 in draft-16 (its filters end only at a
        // group's end), to (3,1) inclusive in draft-22.
        let w = r.connect(0, sv);
        let from = Location::new(2, 1);
        let (window, g3_end) = match sv {
            D16 => (LocationFilter::AbsoluteStartGroupEnd { start: from, end_group: 3 }, 3),
            _ => (LocationFilter::AbsoluteRange { start: from, end: Location::new(3, 1) }, 2),
        };
        let wrid = subscribe(&mut r, w, &t, Some(window));
        let up = upstream_subscribe(&mut r, p, &t);
        accept(&mut r, p, &up, None);
        subscribe_ok(&messages(&r.take_events(s)), rid);
        subscribe_ok(&messages(&r.take_events(w)), wrid);

        let mut sent = Vec::new();
        for g in 1..5 {
            let h = header(pv, PUB_ALIAS, g, 0);
            let st = open(&mut r, p, &h);
            let objs: Vec<_> = (0..3).map(|i| object(g, i)).collect();
            for o in &objs {
                put(&mut r, p, st, o);
            }
            fin(&mut r, p, st);
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
        assert_no_closes(&r);
    }
}

// ---------------------------------------------------------------------------------------------
// 8. A misbehaving client
// ---------------------------------------------------------------------------------------------

/// A SUBSCRIBE frame with a byte past its fields (its length covers the extra byte).
fn malformed_subscribe(v: Version, rid: RequestId) -> Vec<u8> {
    let mut buf = Vec::new();
    v.encode_message(&subscribe_msg(rid, &track(&["x"], "y"), None), &mut buf).unwrap();
    let (body_len, total) = match v {
        D16 => moq_edge::wire::common::read_control_frame::<Quic>(&buf).map(|(_, b, n)| (b.len(), n)),
        _ => moq_edge::wire::common::read_control_frame::<Vi64>(&buf).map(|(_, b, n)| (b.len(), n)),
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
        let t = track_owned_by(&r, &["live"], 1);
        let alias = r.alias(&t);
        let (p, subs, _up) = established(&mut r, pv, sv, &t, &[1, 1, 2], None);
        let h = header(pv, PUB_ALIAS, 0, 0);
        let st = open(&mut r, p, &h);
        let objs: Vec<_> = (0..4).map(|i| object(0, i)).collect();
        put(&mut r, p, st, &objs[0]);
        r.run_until_quiet();

        let (bad, _) = subs[1];
        let junk = malformed_subscribe(sv, RequestId(100));
        // draft-16: on the control stream; draft-22: as a new request stream.
        let stream = if sv == D16 { 0 } else { 400 };
        r.deliver_to_relay(
            bad,
            &Transmit::Stream { id: stream, data: Bytes::from(junk), fin: false, expires: None },
        );
        r.run_until_quiet();
        assert_eq!(r.clients[bad].closed_by_relay, Some(PROTOCOL_VIOLATION), "{pv:?}->{sv:?}");
        assert_eq!(r.state_counts()[1].1, 1, "the closed session's subscription is gone");

        for o in &objs[1..] {
            put(&mut r, p, st, o);
        }
        fin(&mut r, p, st);
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

// ---------------------------------------------------------------------------------------------
// Namespace discovery (SUBSCRIBE_NAMESPACE)
// ---------------------------------------------------------------------------------------------

/// NAMESPACE / NAMESPACE_DONE suffixes client `c` got on namespace subscription `rid`.
fn namespace_events(r: &mut Relay, c: ClientId, rid: RequestId) -> Vec<(bool, TrackNamespace)> {
    r.take_events(c)
        .into_iter()
        .map(|e| match e {
            Event::RequestMessage { request_id, message: Message::Namespace(n) } if request_id == rid => {
                (true, n)
            }
            Event::RequestMessage { request_id, message: Message::NamespaceDone(n) } if request_id == rid => {
                (false, n)
            }
            other => panic!("expected NAMESPACE / NAMESPACE_DONE on {rid:?}: {other:?}"),
        })
        .collect()
}

fn subscribe_namespace(r: &mut Relay, c: ClientId, prefix: &[&str]) -> (RequestId, Vec<Event>) {
    let rid = r.next_request_id(c);
    r.send(
        c,
        Message::SubscribeNamespace(SubscribeNamespace {
            request_id: rid,
            prefix: ns(prefix),
            ..Default::default()
        }),
    );
    r.run_until_quiet();
    (rid, r.take_events(c))
}

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
        let a_live = announce(&mut r, a, &["live", "a"]);
        announce(&mut r, a, &["news"]);
        let s = r.connect(1, sv);
        let (rid, events) = subscribe_namespace(&mut r, s, &["live"]);
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
        announce(&mut r, b, &["live", "b", "hd"]);
        announce(&mut r, b, &["live", "a"]);
        announce(&mut r, b, &["sports"]);
        assert_eq!(namespace_events(&mut r, s, rid), vec![(true, ns(&["b", "hd"]))], "{pv:?}->{sv:?}");

        // A withdraws ["live","a"], B still has it; B leaves: now it is gone.
        r.send(a, Message::PublishNamespaceDone(a_live));
        r.run_until_quiet();
        assert_eq!(namespace_events(&mut r, s, rid), vec![], "{pv:?}->{sv:?}");
        r.disconnect(b);
        r.run_until_quiet();
        let mut done = namespace_events(&mut r, s, rid);
        done.sort_by_key(|(_, n)| n.fields().len());
        assert_eq!(done, vec![(false, ns(&["a"])), (false, ns(&["b", "hd"]))], "{pv:?}->{sv:?}");

        let (rid2, events) = subscribe_namespace(&mut r, s, &["live", "x"]);
        let e = request_error(&messages(&events));
        assert_eq!((e.request_id, e.error_code), (rid2, code::PREFIX_OVERLAP), "{pv:?}->{sv:?}");

        r.session(s).cancel(rid).unwrap();
        r.run_until_quiet();
        announce(&mut r, a, &["live", "c"]);
        assert!(r.take_events(s).is_empty(), "{pv:?}->{sv:?}: nothing after cancelling");
        let (_, events) = subscribe_namespace(&mut r, s, &["live", "x"]);
        assert!(matches!(messages(&events).as_slice(), [Message::RequestOk(_)]), "no overlap once cancelled");
        assert_no_closes(&r);
    }
}

// ---------------------------------------------------------------------------------------------
// Cache and FETCH
// ---------------------------------------------------------------------------------------------

/// One fetch stream as a client saw it: its items (End of Range markers with an empty payload)
/// and how it ended.
#[derive(Debug)]
struct SeenFetch {
    request_id: RequestId,
    items: Vec<(FetchItem, Bytes)>,
    end: Option<Option<u64>>,
}

fn fetch_streams(events: &[Event]) -> Vec<SeenFetch> {
    let mut out: Vec<(u64, SeenFetch)> = Vec::new();
    for e in events {
        match e {
            Event::Object { stream, request_id, object: DataObject::Fetch(item), payload } => {
                match out.iter_mut().find(|(id, _)| id == stream) {
                    Some((_, f)) => f.items.push((item.clone(), payload.clone())),
                    None => out.push((
                        *stream,
                        SeenFetch {
                            request_id: *request_id,
                            items: vec![(item.clone(), payload.clone())],
                            end: None,
                        },
                    )),
                }
            }
            Event::DataStreamEnd { stream, reset } => {
                if let Some((_, f)) = out.iter_mut().find(|(id, _)| id == stream) {
                    f.end = Some(*reset);
                }
            }
            _ => {}
        }
    }
    out.into_iter().map(|(_, f)| f).collect()
}

/// The objects of a fetch stream: (group, object) and payload; asserts each object's header
/// fields match what the publisher sent (`object(g, o)`, Subgroup ID `subgroup`).
fn fetched_objects(f: &SeenFetch, subgroup: u64) -> Vec<(u64, u64)> {
    f.items
        .iter()
        .filter_map(|(item, payload)| match item {
            FetchItem::Object(o) => {
                let (want, want_payload) = object(o.location.group, o.location.object);
                assert_eq!(&payload[..], &want_payload[..], "payload of {:?}", o.location);
                assert_eq!(o.properties, want.properties, "properties of {:?}", o.location);
                assert_eq!((o.subgroup_id, o.publisher_priority), (Some(subgroup), 9));
                Some((o.location.group, o.location.object))
            }
            FetchItem::EndOfRange { .. } => None,
        })
        .collect()
}

fn locations(groups: std::ops::Range<u64>, objects: std::ops::Range<u64>) -> Vec<(u64, u64)> {
    groups.flat_map(|g| objects.clone().map(move |o| (g, o))).collect()
}

fn fetch_msg(rid: RequestId, kind: FetchKind, filter: Option<LocationFilter>) -> Message {
    Message::Fetch(Fetch {
        request_id: rid,
        kind,
        params: Parameters { location_filter: filter, ..Default::default() },
    })
}

fn standalone(
    r: &mut Relay,
    c: ClientId,
    t: &FullTrackName,
    filter: LocationFilter,
) -> (RequestId, Vec<Event>) {
    let rid = r.next_request_id(c);
    r.send(c, fetch_msg(rid, FetchKind::Standalone { track: t.clone() }, Some(filter)));
    r.run_until_quiet();
    (rid, r.take_events(c))
}

fn fetch_ok(msgs: &[Message], rid: RequestId) -> FetchOk {
    let [Message::FetchOk(ok)] = msgs else { panic!("expected FETCH_OK for {rid:?}: {msgs:?}") };
    assert_eq!(ok.request_id, rid);
    ok.clone()
}

/// The FETCHes the relay sent publisher `p` upstream (for what its cache lacks).
fn upstream_fetches(r: &mut Relay, p: ClientId) -> Vec<Fetch> {
    let msgs = messages(&r.take_events(p));
    msgs.iter()
        .map(|m| match m {
            Message::Fetch(f) => f.clone(),
            m => panic!("expected only upstream FETCHes: {m:?}"),
        })
        .collect()
}

/// The publisher refuses every upstream FETCH waiting for it (REQUEST_ERROR DOES_NOT_EXIST).
fn refuse_upstream_fetches(r: &mut Relay, p: ClientId) -> usize {
    let fetches = upstream_fetches(r, p);
    for f in &fetches {
        let e = RequestError {
            request_id: f.request_id,
            error_code: code::DOES_NOT_EXIST,
            retry_interval: 0,
            reason: Bytes::from_static(b"not here either"),
            redirect: None,
        };
        r.send(p, Message::RequestError(e));
        if r.clients[p].version == D22 {
            r.session(p).finish(f.request_id).unwrap();
        }
    }
    r.run_until_quiet();
    fetches.len()
}

/// The publisher answers upstream FETCH `f` with objects `locations` (as `object(g, o)`,
/// Subgroup 0, priority 9) on a fetch stream ending with FIN.
fn serve_upstream_fetch(r: &mut Relay, p: ClientId, f: &Fetch, locations: &[(u64, u64)]) {
    use moq_edge::wire::model::{FetchObject, GroupOrder};
    let pv = r.clients[p].version;
    let last = locations.last().map_or(Location::default(), |&(g, o)| Location::new(g, o));
    let ok = FetchOk {
        request_id: f.request_id,
        end_of_track: false,
        end_location: FetchEnd::Object(last),
        params: Parameters::default(),
        track_properties: Properties::new(),
    };
    r.send(p, Message::FetchOk(ok));
    let stream = r.session(p).open_fetch_stream(f.request_id).unwrap();
    let mut w16 = moq_edge::wire::d16::data::FetchWriter::new(GroupOrder::Ascending);
    let mut w22 = moq_edge::wire::d22::data::FetchWriter::new(GroupOrder::Ascending);
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
        match pv {
            D16 => w16.encode(&item, &mut head).unwrap(),
            _ => w22.encode(&item, &mut head).unwrap(),
        }
        r.session(p).send_raw_data(stream, Bytes::from(head)).unwrap();
        r.session(p).send_raw_data(stream, payload).unwrap();
    }
    r.session(p).finish_data_stream(stream).unwrap();
    if pv == D22 {
        r.session(p).finish(f.request_id).unwrap();
    }
    r.run_until_quiet();
}

/// Publishes groups `groups` of five objects each, one subgroup stream per group (FIN).
fn publish_groups(r: &mut Relay, p: ClientId, pv: Version, groups: std::ops::Range<u64>) {
    for g in groups {
        let st = open(r, p, &header(pv, PUB_ALIAS, g, 0));
        for o in 0..5 {
            put(r, p, st, &object(g, o));
        }
        fin(r, p, st);
    }
    r.run_until_quiet();
}

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
            let t = track_owned_by(&r, &["live"], owner);
            let (p, subs, _up) = established(&mut r, pv, sv, &t, &[1], Some(Location::new(0, 0)));
            publish_groups(&mut r, p, pv, 1..4);
            r.take_events(subs[0].0);
            let f = r.connect(2, sv);
            let ctx = format!("{pv:?}->{sv:?} owner {owner}");

            let range =
                LocationFilter::AbsoluteRange { start: Location::new(1, 2), end: Location::new(2, 1) };
            let (rid, ev) = standalone(&mut r, f, &t, range);
            let ok = fetch_ok(&messages(&ev), rid);
            assert_eq!(ok.end_location, FetchEnd::Object(Location::new(2, 1)), "{ctx}");
            assert_eq!(ok.track_properties, track_properties(), "{ctx}");
            let seen = fetch_streams(&ev);
            assert_eq!(seen.len(), 1, "{ctx}");
            assert_eq!((seen[0].request_id, seen[0].end), (rid, Some(None)), "{ctx}");
            assert_eq!(fetched_objects(&seen[0], 0), [(1, 2), (1, 3), (1, 4), (2, 0), (2, 1)], "{ctx}");

            let whole = LocationFilter::AbsoluteStartGroupEnd { start: Location::new(2, 0), end_group: 2 };
            let (rid, ev) = standalone(&mut r, f, &t, whole);
            let ok = fetch_ok(&messages(&ev), rid);
            let want = if sv == D16 { FetchEnd::Group(2) } else { FetchEnd::Object(Location::new(2, 4)) };
            assert_eq!(ok.end_location, want, "{ctx}");
            assert_eq!(fetched_objects(&fetch_streams(&ev)[0], 0), locations(2..3, 0..5), "{ctx}");

            let past = LocationFilter::AbsoluteRange { start: Location::new(3, 3), end: Location::new(9, 0) };
            let (rid, ev) = standalone(&mut r, f, &t, past);
            assert_eq!(fetch_ok(&messages(&ev), rid).end_location, FetchEnd::Object(Location::new(3, 4)));
            assert_eq!(fetched_objects(&fetch_streams(&ev)[0], 0), [(3, 3), (3, 4)], "{ctx}");

            let after =
                LocationFilter::AbsoluteRange { start: Location::new(4, 0), end: Location::new(5, 0) };
            let (rid, ev) = standalone(&mut r, f, &t, after);
            let e = request_error(&messages(&ev));
            assert_eq!((e.request_id, e.error_code), (rid, code::INVALID_RANGE), "{ctx}");
            assert!(fetch_streams(&ev).is_empty());

            // A track not relayed now is subscribed upstream for its End Location; this
            // publisher does not have it, so the FETCH gets its DOES_NOT_EXIST.
            let other = track(&["live"], "never-subscribed");
            let (rid, ev) = standalone(&mut r, f, &other, range);
            assert!(messages(&ev).is_empty(), "{ctx}: waits for the upstream");
            let up = upstream_subscribe(&mut r, p, &other);
            let e = RequestError {
                request_id: up.request_id,
                error_code: code::DOES_NOT_EXIST,
                retry_interval: 0,
                reason: Bytes::from_static(b"no such track"),
                redirect: None,
            };
            r.send(p, Message::RequestError(e));
            if pv == D22 {
                r.session(p).finish(up.request_id).unwrap();
            }
            r.run_until_quiet();
            let e = request_error(&messages(&r.take_events(f)));
            assert_eq!((e.request_id, e.error_code), (rid, code::DOES_NOT_EXIST), "{ctx}");
            let nobody = track(&["elsewhere"], "x");
            let (rid, ev) = standalone(&mut r, f, &nobody, range);
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
            assert_no_closes(&r);
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
        let t = track_owned_by(&r, &["live"], 0);
        let p = r.connect(0, pv);
        announce(&mut r, p, &["live"]);
        let s = r.connect(1, sv);
        subscribe(&mut r, s, &t, None);
        let up = upstream_subscribe(&mut r, p, &t);
        let f = r.connect(1, sv);
        let from = LocationFilter::AbsoluteRange { start: Location::new(5, 0), end: Location::new(9, 0) };
        let (rid, ev) = standalone(&mut r, f, &t, from);
        assert!(ev.is_empty(), "{pv:?}->{sv:?}: answered before the End Location is known: {ev:?}");
        let (gone, _) = standalone(&mut r, f, &t, from);
        if sv == D16 {
            r.send(f, Message::FetchCancel(gone));
        } else {
            r.session(f).cancel(gone).unwrap();
        }
        r.run_until_quiet();

        accept(&mut r, p, &up, Some(Location::new(5, 2)));
        // Nothing cached: the relay asks the publisher (for both FETCHes; the answer to the
        // cancelled one is dropped), which has nothing either.
        assert!(r.take_events(f).is_empty(), "{pv:?}->{sv:?}: the FETCH waits for the upstream FETCH");
        assert_eq!(refuse_upstream_fetches(&mut r, p), 2, "{pv:?}->{sv:?}");
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
        let st = open(&mut r, p, &header(pv, PUB_ALIAS, 5, 0));
        for o in 3..5 {
            put(&mut r, p, st, &object(5, o));
        }
        r.run_until_quiet();
        let rid = r.next_request_id(f);
        r.send(f, fetch_msg(rid, FetchKind::Standalone { track: t.clone() }, Some(from)));
        r.run_until_quiet();
        assert_eq!(refuse_upstream_fetches(&mut r, p), 1, "{pv:?}->{sv:?}: for {{5, 0}}..{{5, 2}}");
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
        assert_no_closes(&r);
    }
}

/// draft-16 Joining FETCH (relative and absolute) sent together with its SUBSCRIBE, on a core
/// that already receives the track and on one that does not (the FETCH then waits for the
/// SUBSCRIBE_OK): the fetch ends exactly at the Largest Location the SUBSCRIBE_OK carried and
/// the subscription goes on from the next object, so the joiner gets the current group with
/// no gap and no duplicate. Joining an unknown Request ID is INVALID_JOINING_REQUEST_ID.
#[test]
fn joining_fetch_and_subscription_are_contiguous() {
    for pv in [D16, D22] {
        for joiner_core in [1, 2] {
            let mut r = Relay::new(3);
            let t = track_owned_by(&r, &["live"], 0);
            let (p, subs, _up) = established(&mut r, pv, D16, &t, &[1], Some(Location::new(0, 0)));
            publish_groups(&mut r, p, pv, 1..3);
            let h = header(pv, PUB_ALIAS, 3, 0);
            let st = open(&mut r, p, &h);
            for o in 0..3 {
                put(&mut r, p, st, &object(3, o));
            }
            r.run_until_quiet();
            r.take_events(subs[0].0);
            let ctx = format!("{pv:?} joiner on core {joiner_core}");

            for (kind_rel, start) in [(true, 1), (false, 2)] {
                let j = r.connect(joiner_core, D16);
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
                put(&mut r, p, st, &object(3, o));
            }
            fin(&mut r, p, st);
            r.run_until_quiet();
            for c in r.clients.len() - 2..r.clients.len() {
                let seen = streams(&r.take_events(c));
                assert_eq!(seen.len(), 1, "{ctx}");
                let ids: Vec<u64> = seen[0].objects.iter().map(|o| o.0.object_id).collect();
                assert_eq!(ids, [3, 4], "{ctx}");
            }
            assert_no_closes(&r);
        }
    }
}

/// draft-22 FILL_PARAMETERS on SUBSCRIBE: after SUBSCRIBE_OK, a fill fetch stream named by
/// the SUBSCRIBE's Request ID carries the current group from its start through the Largest
/// Location (contiguous with what the subscription then delivers); a fill range that
/// selects nothing opens no stream.
#[test]
fn fill_parameters_open_a_fill_fetch_stream() {
    for pv in [D16, D22] {
        let mut r = Relay::new(2);
        let t = track_owned_by(&r, &["live"], 1);
        let (p, _subs, _up) = established(&mut r, pv, D22, &t, &[1], Some(Location::new(0, 0)));
        publish_groups(&mut r, p, pv, 1..2);
        let st = open(&mut r, p, &header(pv, PUB_ALIAS, 2, 0));
        for o in 0..2 {
            put(&mut r, p, st, &object(2, o));
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
        assert_no_closes(&r);
    }
}

// ---------------------------------------------------------------------------------------------
// TRACK_STATUS
// ---------------------------------------------------------------------------------------------

fn request_ok(msgs: &[Message], ctx: &str) -> moq_edge::wire::model::RequestOk {
    let [Message::RequestOk(ok)] = msgs else { panic!("{ctx}: expected REQUEST_OK: {msgs:?}") };
    ok.clone()
}

fn track_status(r: &mut Relay, c: ClientId, t: &FullTrackName) -> RequestId {
    let rid = r.next_request_id(c);
    r.send(
        c,
        Message::TrackStatus(Subscribe { request_id: rid, track: t.clone(), params: Parameters::default() }),
    );
    r.run_until_quiet();
    rid
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
        let t = track_owned_by(&r, &["live"], 2);
        let (p, subs, _up) = established(&mut r, pv, sv, &t, &[1], Some(Location::new(0, 0)));
        publish_groups(&mut r, p, pv, 1..2);
        r.take_events(subs[0].0);
        let c = r.connect(0, sv);
        let ctx = format!("{pv:?}->{sv:?}");

        let rid = track_status(&mut r, c, &t);
        let ok = request_ok(&messages(&r.take_events(c)), &ctx);
        assert_eq!((ok.request_id, ok.params.largest_object), (rid, Some(Location::new(1, 4))), "{ctx}");
        let props = if sv == D22 { track_properties() } else { Properties::new() };
        assert_eq!(ok.track_properties, props, "{ctx}");
        assert!(r.take_events(p).is_empty(), "{ctx}: asked upstream");

        let other = track_owned_by(&r, &["live"], 1);
        let rid = track_status(&mut r, c, &other);
        assert!(r.take_events(c).is_empty(), "{ctx}: answered before the publisher");
        let up = upstream_subscribe(&mut r, p, &other);
        accept_as(&mut r, p, &up, TrackAlias(78), Some(Location::new(7, 1)));
        let ok = request_ok(&messages(&r.take_events(c)), &ctx);
        assert_eq!((ok.request_id, ok.params.largest_object), (rid, Some(Location::new(7, 1))), "{ctx}");
        r.advance(RelayConfig::default().linger);
        assert_upstream_stopped(&mut r, p, pv, up.request_id);

        let rid = track_status(&mut r, c, &track(&["nobody"], "x"));
        let e = request_error(&messages(&r.take_events(c)));
        assert_eq!((e.request_id, e.error_code), (rid, code::DOES_NOT_EXIST), "{ctx}");
        assert_eq!(r.state_counts()[1].0, 0, "{ctx}: the status track is gone from its owner");
        assert_no_closes(&r);
    }
}

// ---------------------------------------------------------------------------------------------
// REQUEST_UPDATE
// ---------------------------------------------------------------------------------------------

/// Sends REQUEST_UPDATE of `existing`; returns the Request ID its answer carries (draft-16:
/// the update's own; draft-22: the updated request's, on whose stream it travels).
fn update(r: &mut Relay, c: ClientId, existing: RequestId, params: Parameters) -> RequestId {
    let rid = r.next_request_id(c);
    let m = RequestUpdate { request_id: rid, existing_request_id: existing, params };
    r.send(c, Message::RequestUpdate(m));
    r.run_until_quiet();
    if r.clients[c].version == D16 {
        rid
    } else {
        existing
    }
}

fn object_ids(events: &[Event]) -> Vec<(u64, u64)> {
    streams(events)
        .iter()
        .flat_map(|s| s.objects.iter().map(|o| (s.header.group_id, o.0.object_id)).collect::<Vec<_>>())
        .collect()
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
        let t = track_owned_by(&r, &["live"], 0);
        let (p, subs, _up) = established(&mut r, pv, sv, &t, &[1], Some(Location::new(0, 0)));
        let (s, rid) = subs[0];
        let ctx = format!("{pv:?}->{sv:?}");
        let st = open(&mut r, p, &header(pv, PUB_ALIAS, 1, 0));
        let send = |r: &mut Relay, range: std::ops::Range<u64>| {
            for o in range {
                put(r, p, st, &object(1, o));
            }
            r.run_until_quiet();
        };
        send(&mut r, 0..2);
        assert_eq!(object_ids(&r.take_events(s)), [(1, 0), (1, 1)], "{ctx}");

        let answer = update(&mut r, s, rid, Parameters { forward: Some(false), ..Default::default() });
        let ok = request_ok(&messages(&r.take_events(s)), &ctx);
        assert_eq!((ok.request_id, ok.params.largest_object), (answer, Some(Location::new(1, 1))), "{ctx}");
        send(&mut r, 2..4);
        assert!(object_ids(&r.take_events(s)).is_empty(), "{ctx}: objects while paused");

        let answer = update(&mut r, s, rid, Parameters { forward: Some(true), ..Default::default() });
        let ok = request_ok(&messages(&r.take_events(s)), &ctx);
        assert_eq!((ok.request_id, ok.params.largest_object), (answer, Some(Location::new(1, 3))), "{ctx}");
        send(&mut r, 4..5);
        assert_eq!(object_ids(&r.take_events(s)), [(1, 4)], "{ctx}");

        // From object 6 of group 1 through the end of group 1.
        let range = LocationFilter::AbsoluteStartGroupEnd { start: Location::new(1, 6), end_group: 1 };
        update(&mut r, s, rid, Parameters { location_filter: Some(range), ..Default::default() });
        request_ok(&messages(&r.take_events(s)), &ctx);
        send(&mut r, 5..9);
        fin(&mut r, p, st);
        let st2 = open(&mut r, p, &header(pv, PUB_ALIAS, 2, 0));
        put(&mut r, p, st2, &object(2, 0));
        r.run_until_quiet();
        assert_eq!(object_ids(&r.take_events(s)), [(1, 6), (1, 7), (1, 8)], "{ctx}");

        // An empty range (draft-22; draft-16's codec cannot express one: its decoder closes
        // the session) is refused and ends the subscription.
        if sv == D16 {
            assert_no_closes(&r);
            continue;
        }
        let empty = LocationFilter::AbsoluteRange { start: Location::new(3, 5), end: Location::new(3, 2) };
        let answer =
            update(&mut r, s, rid, Parameters { location_filter: Some(empty), ..Default::default() });
        let msgs = messages(&r.take_events(s));
        let [Message::RequestError(e), Message::PublishDone(d)] = msgs.as_slice() else {
            panic!("{ctx}: {msgs:?}")
        };
        assert_eq!((e.request_id, e.error_code), (answer, code::INVALID_RANGE), "{ctx}");
        assert_eq!((d.request_id, d.status_code), (rid, code::DONE_UPDATE_FAILED), "{ctx}");
        assert_eq!(r.state_counts()[1].1, 0, "{ctx}: the subscription is gone");
        assert_no_closes(&r);
    }
}

/// A REQUEST_UPDATE carrying a parameter the updated request cannot take (FORWARD on a
/// PUBLISH_NAMESPACE), or (draft-16) naming a Request ID that was never used, closes the
/// session with PROTOCOL_VIOLATION; other sessions are untouched.
#[test]
fn invalid_request_updates_close_the_session() {
    for (pv, sv) in COMBOS {
        let mut r = Relay::new(2);
        let t = track_owned_by(&r, &["live"], 0);
        let (_p, subs, _up) = established(&mut r, pv, sv, &t, &[1, 1], None);
        let other = r.connect(0, pv);
        let ns_rid = announce(&mut r, other, &["other"]);
        update(&mut r, other, ns_rid, Parameters { forward: Some(true), ..Default::default() });
        assert_eq!(r.clients[other].closed_by_relay, Some(PROTOCOL_VIOLATION), "{pv:?}->{sv:?}");
        if sv == D16 {
            let (s, _) = subs[1];
            update(&mut r, s, RequestId(4000), Parameters::default());
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
    announce(&mut r, a, &["live", "a"]);
    announce(&mut r, a, &["news", "b"]);
    let s = r.connect(1, D22);
    let (rid, _) = subscribe_namespace(&mut r, s, &["live"]);
    let (other, _) = subscribe_namespace(&mut r, s, &["sports"]);
    let params = Parameters { track_namespace_prefix: Some(ns(&["news"])), ..Default::default() };
    update(&mut r, s, rid, params);
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
    announce(&mut r, a, &["news", "c"]);
    assert_eq!(namespace_events(&mut r, s, rid), vec![(true, ns(&["c"]))]);

    let params = Parameters { track_namespace_prefix: Some(ns(&["news", "x"])), ..Default::default() };
    update(&mut r, s, other, params);
    let e = request_error(&messages(&r.take_events(s)));
    assert_eq!((e.request_id, e.error_code), (other, code::PREFIX_OVERLAP));
    announce(&mut r, a, &["sports", "d"]);
    assert!(r.take_events(s).is_empty(), "the refused subscription ended");
    assert_no_closes(&r);
}

/// The REQUEST_UPDATEs of the upstream subscription `up` the publisher got: their FORWARD
/// values.
fn upstream_forward_updates(r: &mut Relay, p: ClientId, up: RequestId) -> Vec<Option<bool>> {
    messages(&r.take_events(p))
        .into_iter()
        .map(|m| match m {
            Message::RequestUpdate(u) if u.existing_request_id == up => u.params.forward,
            other => panic!("publisher got {other:?}"),
        })
        .collect()
}

/// FORWARD changes propagate: the upstream subscription is paused (REQUEST_UPDATE FORWARD 0)
/// only when every downstream subscription on every core is paused, and resumed as soon as
/// one is not (by an update, or by a new subscriber).
#[test]
fn upstream_is_paused_only_while_every_subscriber_is() {
    for (pv, sv) in COMBOS {
        let mut r = Relay::new(3);
        let t = track_owned_by(&r, &["live"], 0);
        let (p, subs, up) = established(&mut r, pv, sv, &t, &[1, 2], None);
        let ctx = format!("{pv:?}->{sv:?}");
        let pause = Parameters { forward: Some(false), ..Default::default() };
        let resume = Parameters { forward: Some(true), ..Default::default() };

        update(&mut r, subs[0].0, subs[0].1, pause.clone());
        assert_eq!(upstream_forward_updates(&mut r, p, up.request_id), [], "{ctx}: one still forwards");
        update(&mut r, subs[1].0, subs[1].1, pause.clone());
        assert_eq!(upstream_forward_updates(&mut r, p, up.request_id), [Some(false)], "{ctx}");
        update(&mut r, subs[0].0, subs[0].1, resume);
        assert_eq!(upstream_forward_updates(&mut r, p, up.request_id), [Some(true)], "{ctx}");
        update(&mut r, subs[0].0, subs[0].1, pause);
        assert_eq!(upstream_forward_updates(&mut r, p, up.request_id), [Some(false)], "{ctx}");
        let late = r.connect(1, sv);
        subscribe(&mut r, late, &t, None);
        assert_eq!(
            upstream_forward_updates(&mut r, p, up.request_id),
            [Some(true)],
            "{ctx}: a new subscriber"
        );
        for (s, _) in subs {
            r.take_events(s);
        }
        assert_no_closes(&r);
    }
}

/// PUBLISH of `track` with Track Alias `alias`.
fn publish_as(v: Version, rid: RequestId, track: &FullTrackName, alias: TrackAlias) -> Message {
    let mut m = publish_msg(v, rid, track, None);
    if let Message::Publish(p) = &mut m {
        p.track_alias = alias;
    }
    m
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
        let t1 = track_owned_by(&r, &["live"], 2);
        let t2 = track_owned_by(&r, &["live"], 0);
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
                options: moq_edge::wire::model::SubscribeOptions::Publish,
                ..Default::default()
            })
        } else {
            Message::SubscribeTracks(moq_edge::wire::model::SubscribeTracks {
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

        let answer = Parameters { forward: (sv == D16).then_some(true), ..Default::default() };
        let accept = moq_edge::wire::model::PublishOk { request_id: offer.request_id, params: answer };
        r.send(s, Message::PublishOk(accept));
        r.run_until_quiet();
        assert!(r.take_events(s).is_empty(), "{ctx}: no SUBSCRIBE_OK for an accepted PUBLISH");
        let h = header(pv, PUB_ALIAS, 3, 0);
        let st = open(&mut r, p, &h);
        let objs: Vec<_> = (0..3).map(|i| object(3, i)).collect();
        for o in &objs {
            put(&mut r, p, st, o);
        }
        fin(&mut r, p, st);
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
        announce(&mut r, p, &["live"]);
        let sub_rid = subscribe(&mut r, s, &t2, None);
        let up = upstream_subscribe(&mut r, p, &t2);
        accept_as(&mut r, p, &up, TrackAlias(2), None);
        subscribe_ok(&messages(&r.take_events(s)), sub_rid);
        let t3 = track(&["live", "more"], "t3");
        let p3 = r.next_request_id(p);
        r.send(p, publish_as(pv, p3, &t3, TrackAlias(3)));
        r.run_until_quiet();
        let msgs = messages(&r.take_events(s));
        let [Message::Publish(offer3)] = msgs.as_slice() else { panic!("{ctx}: {msgs:?}") };
        assert_eq!(offer3.track, t3, "{ctx}");

        r.send(p, done_msg(prid, 1));
        if pv == D22 {
            r.session(p).finish(prid).unwrap();
        }
        r.run_until_quiet();
        let d = publish_done(&messages(&r.take_events(s)));
        assert_eq!(
            (d.request_id, d.status_code, d.stream_count),
            (offer.request_id, code::TRACK_ENDED, 1),
            "{ctx}"
        );
        assert_no_closes(&r);
    }
}

// ---------------------------------------------------------------------------------------------
// Authorization
// ---------------------------------------------------------------------------------------------

const AUTH_SECRET: &[u8] = b"a secret of more than sixteen bytes";

fn auth_config() -> RelayConfig {
    use base64::Engine;
    let key = format!("k1={}", base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(AUTH_SECRET));
    let keys = moq_edge::auth::Keys::parse(&[key]).unwrap();
    RelayConfig { auth: Some(std::sync::Arc::new(keys)), ..RelayConfig::default() }
}

fn token(ns: &[&str], publish: bool, subscribe: bool, ttl: i64) -> Bytes {
    let exp = (moq_edge::auth::unix_now() as i64 + ttl) as u64;
    let claims =
        moq_edge::auth::Claims { ns: ns.iter().map(|s| s.to_string()).collect(), publish, subscribe, exp };
    Bytes::from(moq_edge::auth::mint("k1", AUTH_SECRET, &claims).unwrap())
}

fn use_value(value: Bytes) -> AuthToken {
    AuthToken::UseValue { token_type: 0, value }
}

fn connect_with_token(r: &mut Relay, core: usize, v: Version, t: Bytes) -> ClientId {
    let setup = SetupOptions { auth_tokens: vec![use_value(t)], ..Default::default() };
    let c = r.connect_with(core, v, setup);
    assert!(matches!(r.take_events(c).as_slice(), [Event::Ready { .. }]));
    c
}

fn subscribe_with(r: &mut Relay, c: ClientId, t: &FullTrackName, tokens: Vec<AuthToken>) -> RequestId {
    let rid = r.next_request_id(c);
    let params = Parameters { auth_tokens: tokens, ..Default::default() };
    r.send(c, Message::Subscribe(Subscribe { request_id: rid, track: t.clone(), params }));
    r.run_until_quiet();
    rid
}

fn refused(r: &mut Relay, c: ClientId, rid: RequestId, code: u64, ctx: &str) {
    let e = request_error(&messages(&r.take_events(c)));
    assert_eq!((e.request_id, e.error_code), (rid, code), "{ctx}");
}

/// With tokens required, every request needs a token that grants its right on its namespace,
/// from SETUP or the request: a publisher without one cannot announce; a subscriber's token
/// for ["live","a"] lets it subscribe there and nowhere else, even to a track the relay
/// already subscribes upstream for another subscriber (authorization is per subscriber);
/// FETCH, TRACK_STATUS and SUBSCRIBE_NAMESPACE are checked the same way; an expired token is
/// EXPIRED_AUTH_TOKEN, a forged one MALFORMED_AUTH_TOKEN.
#[test]
fn tokens_authorize_each_request_by_namespace_and_right() {
    const UNAUTHORIZED: u64 = 0x1;
    const MALFORMED: u64 = 0x4;
    const EXPIRED: u64 = 0x5;
    for (pv, sv) in COMBOS {
        let ctx = format!("{pv:?}->{sv:?}");
        let mut r = Relay::with_config(2, auth_config());
        let nobody = r.connect(0, pv);
        let rid = r.next_request_id(nobody);
        r.send(
            nobody,
            Message::PublishNamespace(PublishNamespace {
                request_id: rid,
                namespace: ns(&["live"]),
                ..Default::default()
            }),
        );
        r.run_until_quiet();
        refused(&mut r, nobody, rid, UNAUTHORIZED, &ctx);

        let p = connect_with_token(&mut r, 0, pv, token(&["live"], true, false, 600));
        announce(&mut r, p, &["live"]);
        let t = track(&["live", "a"], "x");
        let s = connect_with_token(&mut r, 1, sv, token(&["live", "a"], false, true, 600));
        let rid = subscribe_with(&mut r, s, &t, vec![]);
        let up = upstream_subscribe(&mut r, p, &t);
        accept(&mut r, p, &up, Some(Location::new(0, 0)));
        subscribe_ok(&messages(&r.take_events(s)), rid);

        let other = track(&["live", "b"], "x");
        let rid = subscribe_with(&mut r, s, &other, vec![]);
        refused(&mut r, s, rid, UNAUTHORIZED, &ctx);
        let rid = subscribe_with(&mut r, s, &other, vec![use_value(token(&["live"], false, true, 600))]);
        assert!(
            matches!(r.take_events(p).as_slice(), [Event::Message(Message::Subscribe(_))]),
            "{ctx}: a request token"
        );
        r.take_events(s);
        let _ = rid;

        // Aggregated upstream already, but this subscriber has no right to it.
        let stranger = r.connect(1, sv);
        let rid = subscribe_with(&mut r, stranger, &t, vec![]);
        refused(&mut r, stranger, rid, UNAUTHORIZED, &ctx);
        let rid = subscribe_with(&mut r, stranger, &t, vec![use_value(token(&["live"], false, true, -5))]);
        refused(&mut r, stranger, rid, EXPIRED, &ctx);
        let mut forged = token(&["live"], true, true, 600).to_vec();
        let n = forged.len();
        forged[n - 2] ^= 1;
        let rid = subscribe_with(&mut r, stranger, &t, vec![use_value(Bytes::from(forged))]);
        refused(&mut r, stranger, rid, MALFORMED, &ctx);
        let publish_only = token(&["live"], true, false, 600);
        let rid = subscribe_with(&mut r, stranger, &t, vec![use_value(publish_only)]);
        refused(&mut r, stranger, rid, UNAUTHORIZED, &ctx);

        let range = LocationFilter::AbsoluteRange { start: Location::new(0, 0), end: Location::new(0, 0) };
        let (rid, ev) = standalone(&mut r, stranger, &t, range);
        let e = request_error(&messages(&ev));
        assert_eq!((e.request_id, e.error_code), (rid, UNAUTHORIZED), "{ctx}: FETCH");
        let rid = track_status(&mut r, stranger, &t);
        refused(&mut r, stranger, rid, UNAUTHORIZED, &ctx);
        let (rid, ev) = subscribe_namespace(&mut r, stranger, &["live"]);
        let e = request_error(&messages(&ev));
        assert_eq!((e.request_id, e.error_code), (rid, UNAUTHORIZED), "{ctx}: SUBSCRIBE_NAMESPACE");
        let rid = r.next_request_id(s);
        r.send(s, fetch_msg(rid, FetchKind::Standalone { track: t.clone() }, Some(range)));
        r.run_until_quiet();
        refuse_upstream_fetches(&mut r, p);
        fetch_ok(&messages(&r.take_events(s)), rid);
        assert_no_closes(&r);
    }
}

/// Token aliases: a token registered with one request authorizes later ones that name its
/// alias, until it is deleted; naming an unknown alias closes the session with
/// UNKNOWN_AUTH_TOKEN_ALIAS, registering one twice with DUPLICATE_AUTH_TOKEN_ALIAS; a bad
/// SETUP token closes the session with MALFORMED_AUTH_TOKEN.
#[test]
fn token_aliases_and_bad_setup_tokens() {
    for v in [D16, D22] {
        let mut r = Relay::with_config(2, auth_config());
        let p = connect_with_token(&mut r, 0, v, token(&["live"], true, false, 600));
        announce(&mut r, p, &["live"]);
        let t = track(&["live"], "x");
        let s = r.connect(1, v);
        let tok = token(&["live"], false, true, 600);
        subscribe_with(
            &mut r,
            s,
            &t,
            vec![AuthToken::Register { alias: 5, token_type: 0, value: tok.clone() }],
        );
        let up = upstream_subscribe(&mut r, p, &t);
        accept(&mut r, p, &up, None);
        r.take_events(s);
        let again = track(&["live"], "y");
        subscribe_with(&mut r, s, &again, vec![AuthToken::UseAlias { alias: 5 }]);
        assert!(
            matches!(r.take_events(p).as_slice(), [Event::Message(Message::Subscribe(_))]),
            "{v:?}: alias used"
        );
        subscribe_with(
            &mut r,
            s,
            &again,
            vec![AuthToken::Register { alias: 5, token_type: 0, value: tok.clone() }],
        );
        assert_eq!(r.clients[s].closed_by_relay, Some(0x14), "{v:?}: DUPLICATE_AUTH_TOKEN_ALIAS");

        let s2 = r.connect(1, v);
        subscribe_with(&mut r, s2, &t, vec![AuthToken::UseAlias { alias: 9 }]);
        assert_eq!(r.clients[s2].closed_by_relay, Some(0x17), "{v:?}: UNKNOWN_AUTH_TOKEN_ALIAS");

        let setup = SetupOptions {
            auth_tokens: vec![use_value(Bytes::from_static(b"v1.k1.bad.bad"))],
            ..Default::default()
        };
        let bad = r.connect_with(1, v, setup);
        assert_eq!(r.clients[bad].closed_by_relay, Some(0x16), "{v:?}: MALFORMED_AUTH_TOKEN in SETUP");
        assert_eq!(r.clients[p].closed_by_relay, None);
    }
}

// ---------------------------------------------------------------------------------------------
// RENDEZVOUS_TIMEOUT (draft-22)
// ---------------------------------------------------------------------------------------------

fn subscribe_rendezvous(r: &mut Relay, c: ClientId, t: &FullTrackName, ms: u64) -> RequestId {
    let rid = r.next_request_id(c);
    let params = Parameters { rendezvous_timeout: Some(ms), ..Default::default() };
    r.send(c, Message::Subscribe(Subscribe { request_id: rid, track: t.clone(), params }));
    r.run_until_quiet();
    rid
}

/// A draft-22 SUBSCRIBE with RENDEZVOUS_TIMEOUT for a track nobody publishes is held (no
/// answer) until a publisher appears: a PUBLISH_NAMESPACE that covers it (the relay then
/// subscribes upstream) or a PUBLISH of the track itself; either way the subscriber gets
/// SUBSCRIBE_OK only once the upstream is Established. Held past its time, it gets
/// REQUEST_ERROR TIMEOUT; a subscriber that leaves while held leaves nothing behind once the
/// relay's own limit (`max_rendezvous`) has passed.
#[test]
fn rendezvous_timeout_holds_a_subscribe_until_a_publisher_appears() {
    for pv in [D16, D22] {
        let mut r = Relay::new(2);
        let t = track_owned_by(&r, &["live"], 0);
        let s = r.connect(1, D22);
        let rid = subscribe_rendezvous(&mut r, s, &t, 5_000);
        assert!(r.take_events(s).is_empty(), "{pv:?}: answered at once");
        r.advance(Duration::from_secs(1));
        let p = r.connect(0, pv);
        let ns_rid = r.next_request_id(p);
        let m = PublishNamespace { request_id: ns_rid, namespace: ns(&["live"]), ..Default::default() };
        r.send(p, Message::PublishNamespace(m));
        r.run_until_quiet();
        let msgs = messages(&r.take_events(p));
        // The held SUBSCRIBE goes upstream as soon as the owner's core has the namespace,
        // which can be before the REQUEST_OK (sent once every core has it).
        let up = match msgs.as_slice() {
            [Message::RequestOk(_), Message::Subscribe(up)]
            | [Message::Subscribe(up), Message::RequestOk(_)] => up,
            _ => panic!("{pv:?}: {msgs:?}"),
        };
        assert_eq!(up.track, t);
        assert!(r.take_events(s).is_empty(), "{pv:?}: SUBSCRIBE_OK before the upstream");
        accept(&mut r, p, up, None);
        subscribe_ok(&messages(&r.take_events(s)), rid);

        let published = track_owned_by(&r, &["other"], 1);
        let rid = subscribe_rendezvous(&mut r, s, &published, 5_000);
        let prid = r.next_request_id(p);
        r.send(p, publish_as(pv, prid, &published, TrackAlias(9)));
        r.run_until_quiet();
        assert!(publish_answer(pv, &messages(&r.take_events(p)), prid), "{pv:?}: the PUBLISH forwards");
        subscribe_ok(&messages(&r.take_events(s)), rid);

        let nobody = track_owned_by(&r, &["nobody"], 0);
        let rid = subscribe_rendezvous(&mut r, s, &nobody, 2_000);
        r.advance(Duration::from_millis(1_999));
        assert!(r.take_events(s).is_empty());
        r.advance(Duration::from_millis(1));
        refused(&mut r, s, rid, code::TIMEOUT, &format!("{pv:?}"));

        let gone = subscribe_rendezvous(&mut r, s, &nobody, 60_000);
        r.session(s).cancel(gone).unwrap();
        r.run_until_quiet();
        // The relay holds a SUBSCRIBE no longer than its own limit (30 s), then forgets it.
        r.advance(RelayConfig::default().max_rendezvous);
        assert!(r.take_events(s).is_empty(), "{pv:?}: an answer to a cancelled SUBSCRIBE");
        assert_eq!(r.state_counts()[0].0, 1, "{pv:?}: only the first track is left on core 0");
        assert_no_closes(&r);
    }
}

/// PUBLISH_NAMESPACE is answered only once every core has the namespace: a subscriber that
/// the REQUEST_OK prompts finds it on whichever core its SUBSCRIBE lands (no DOES_NOT_EXIST
/// race with the broadcast).
#[test]
fn publish_namespace_is_answered_once_every_core_knows_it() {
    for v in [D16, D22] {
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
        assert_no_closes(&r);
    }
}

// ---------------------------------------------------------------------------------------------
// Delivery timeouts
// ---------------------------------------------------------------------------------------------

/// Hands client `c`'s pending output to the relay without running the mesh (so time can pass
/// between an object's arrival and its fan-out on another core).
fn deliver_pending(r: &mut Relay, c: ClientId) {
    for t in r.capture(c) {
        r.deliver_to_relay(c, &t);
    }
}

/// The deadlines the relay gave object bytes on stream `stream` of client `c`, and the
/// subgroup deadline it gave the stream (draft-22 §5.2 as the Pump applies them).
fn deadlines(
    r: &Relay,
    c: ClientId,
    stream: u64,
) -> (Vec<Option<std::time::Instant>>, Option<std::time::Instant>) {
    let mut objects = Vec::new();
    let mut deliver_by = None;
    for t in &r.clients[c].relay_sent {
        match t {
            Transmit::Stream { id, data, expires, .. } if *id == stream && !data.is_empty() => {
                objects.push(*expires)
            }
            Transmit::DeliverBy { id, at } if *id == stream => deliver_by = Some(*at),
            _ => {}
        }
    }
    (objects, deliver_by)
}

/// OBJECT_ and SUBGROUP_DELIVERY_TIMEOUT (draft-22 §5.2; draft-16 DELIVERY_TIMEOUT): the
/// effective value is the smaller of the subscriber's parameter and the publisher's track
/// property (a subgroup's first object may override the latter), counted from when the relay
/// received the object. An object already late when it reaches the subscriber's core resets
/// that subscriber's stream with DELIVERY_TIMEOUT and no stream is reopened for the rest of the
/// subgroup; other subscribers, and the next subgroup, are unaffected. Objects forwarded in
/// time carry their deadline to the send queue, and a finished stream its subgroup deadline.
/// A late datagram is dropped for the subscriber it is late for.
#[test]
fn delivery_timeouts_reset_late_subgroups_per_subscriber() {
    const OBJECT_TIMEOUT: u64 = 0x02;
    const SUBGROUP_TIMEOUT: u64 = 0x06;
    let ms = Duration::from_millis;
    for (pv, sv) in COMBOS {
        let mut r = Relay::new(2);
        let t = track_owned_by(&r, &["live"], 0);
        let alias = r.alias(&t);
        let p = r.connect(0, pv);
        announce(&mut r, p, &["live"]);
        // Subscribers on the other core: `patient` asks 1000 ms (the track's 100 ms wins),
        // `plain` asks nothing (100 ms), `strict` asks 30 ms.
        let sub = |r: &mut Relay, object: Option<u64>, subgroup: Option<u64>| {
            let s = r.connect(1, sv);
            let rid = r.next_request_id(s);
            let params = Parameters {
                object_delivery_timeout: object,
                subgroup_delivery_timeout: subgroup.filter(|_| sv == D22),
                ..Default::default()
            };
            let m = Subscribe { request_id: rid, track: t.clone(), params };
            r.send(s, Message::Subscribe(m));
            r.run_until_quiet();
            (s, rid)
        };
        let patient = sub(&mut r, Some(1000), Some(200));
        let plain = sub(&mut r, None, None);
        let strict = sub(&mut r, Some(30), None);
        let up = upstream_subscribe(&mut r, p, &t);
        let mut props = track_properties();
        props.push(OBJECT_TIMEOUT, KvValue::Int(100));
        accept_with(&mut r, p, &up, PUB_ALIAS, None, props);
        for &(s, rid) in &[patient, plain, strict] {
            subscribe_ok(&messages(&r.take_events(s)), rid);
        }

        // Group 1: object 0 on time; object 1 reaches core 1 60 ms after the relay got it.
        let h1 = header(pv, PUB_ALIAS, 1, 0);
        let g1 = open(&mut r, p, &h1);
        put(&mut r, p, g1, &object(1, 0));
        r.run_until_quiet();
        put(&mut r, p, g1, &object(1, 1));
        deliver_pending(&mut r, p);
        let received = r.now;
        r.now += ms(60);
        r.run_until_quiet();
        put(&mut r, p, g1, &object(1, 2));
        fin(&mut r, p, g1);
        r.run_until_quiet();
        let fin_at = r.now;

        // Group 2, a new subgroup: everyone again, `strict` included.
        let h2 = header(pv, PUB_ALIAS, 2, 0);
        let g2 = open(&mut r, p, &h2);
        put(&mut r, p, g2, &object(2, 0));
        r.run_until_quiet();

        // Datagram 3/0, 60 ms late: dropped for `strict` only.
        let dh = DatagramHeader {
            track_alias: PUB_ALIAS,
            group_id: 3,
            object_id: 0,
            publisher_priority: Some(4),
            properties: Properties::new(),
            end_of_group: false,
            status: None,
        };
        r.session(p).send_datagram(&dh, b"late datagram").unwrap();
        deliver_pending(&mut r, p);
        r.now += ms(60);
        r.run_until_quiet();

        let g1_all = [object(1, 0), object(1, 1), object(1, 2)];
        for (who, (s, rid)) in [("patient", patient), ("plain", plain), ("strict", strict)] {
            let ev = r.take_events(s);
            let seen = streams(&ev);
            let datagrams = ev.iter().filter(|e| matches!(e, Event::Datagram { .. })).count();
            assert_eq!(seen.len(), 2, "{pv:?}->{sv:?} {who}: {seen:?}");
            if who == "strict" {
                let reset = Some(Some(code::RESET_DELIVERY_TIMEOUT));
                assert_stream(&seen[0], rid, expected_header(&h1, alias, sv, true), &g1_all[..1], reset);
                assert_eq!(datagrams, 0, "{pv:?}->{sv:?}: the late datagram was dropped");
            } else {
                assert_stream(&seen[0], rid, expected_header(&h1, alias, sv, true), &g1_all, Some(None));
                assert_eq!(datagrams, 1, "{pv:?}->{sv:?} {who}");
                // Each object's bytes carry received + 100 ms (the track's value is smaller).
                let (objects, deliver_by) = deadlines(&r, s, seen[0].stream);
                assert_eq!(
                    objects.len(),
                    1 + 3 * 2,
                    "{pv:?}->{sv:?}: header, then header and payload per object"
                );
                assert_eq!(objects[0], None, "the subgroup header has no deadline");
                assert_eq!(objects[3], Some(received + ms(100)), "{pv:?}->{sv:?} {who}");
                let subgroup = (who == "patient" && sv == D22).then(|| fin_at + ms(200));
                assert_eq!(deliver_by, subgroup, "{pv:?}->{sv:?} {who}");
            }
            let g2_objects = [object(2, 0)];
            assert_stream(&seen[1], rid, expected_header(&h2, alias, sv, true), &g2_objects, None);
        }

        // A subgroup's first object can set its own timeout (draft-22 Object Property):
        // 1000 ms instead of the track's 100, so 200 ms late still goes to `plain`.
        if pv == D22 {
            let h4 = header(pv, PUB_ALIAS, 4, 0);
            let g4 = open(&mut r, p, &h4);
            let mut first = object(4, 0);
            first.0.properties.push(OBJECT_TIMEOUT, KvValue::Int(1000));
            first.0.properties.push(SUBGROUP_TIMEOUT, KvValue::Int(50));
            put(&mut r, p, g4, &first);
            deliver_pending(&mut r, p);
            r.now += ms(200);
            r.run_until_quiet();
            let seen = streams(&r.take_events(plain.0));
            assert_eq!(seen.len(), 1, "{pv:?}->{sv:?}");
            assert_eq!(seen[0].objects.len(), 1, "{pv:?}->{sv:?}: on time by the subgroup's own value");
            fin(&mut r, p, g4);
            r.run_until_quiet();
            let (_, deliver_by) = deadlines(&r, plain.0, seen[0].stream);
            assert_eq!(deliver_by, Some(r.now + ms(50)), "{pv:?}->{sv:?}: the first object's subgroup value");
            // 30 ms for `strict`: late before its stream was opened, so none is.
            assert!(streams(&r.take_events(strict.0)).is_empty(), "{pv:?}->{sv:?}");
        }
        assert_no_closes(&r);
    }
}

// ---------------------------------------------------------------------------------------------
// EXPIRES
// ---------------------------------------------------------------------------------------------

/// With tokens, a subscription is authorized until its token expires: SUBSCRIBE_OK says when
/// in EXPIRES, and the relay ends it then with PUBLISH_DONE EXPIRED (its open streams reset)
/// unless a REQUEST_UPDATE brought a newer token, whose REQUEST_OK carries the new EXPIRES. A
/// REQUEST_UPDATE with a forged token fails (REQUEST_ERROR, then PUBLISH_DONE UPDATE_FAILED).
#[test]
fn subscriptions_expire_with_their_token_unless_renewed() {
    const MALFORMED: u64 = 0x4;
    for (pv, sv) in COMBOS {
        let ctx = format!("{pv:?}->{sv:?}");
        let mut r = Relay::with_config(2, auth_config());
        let p = connect_with_token(&mut r, 0, pv, token(&["live"], true, false, 600));
        announce(&mut r, p, &["live"]);
        let t = track_owned_by(&r, &["live"], 0);
        let subscriber = |r: &mut Relay| {
            let s = connect_with_token(r, 1, sv, token(&["live"], false, true, 10));
            (s, subscribe_with(r, s, &t, vec![]))
        };
        let (lapsing, renewing, wrong) = (subscriber(&mut r), subscriber(&mut r), subscriber(&mut r));
        let up = upstream_subscribe(&mut r, p, &t);
        accept(&mut r, p, &up, None);
        for (s, rid) in [lapsing, renewing, wrong] {
            let ok = subscribe_ok(&messages(&r.take_events(s)), rid);
            let expires = ok.params.expires.unwrap_or_default();
            assert!((8_000..=10_000).contains(&expires), "{ctx}: EXPIRES {expires}");
        }
        let st = open(&mut r, p, &header(pv, PUB_ALIAS, 1, 0));
        put(&mut r, p, st, &object(1, 0));
        r.run_until_quiet();

        let fresh = token(&["live"], false, true, 600);
        let params = Parameters { auth_tokens: vec![use_value(fresh)], ..Default::default() };
        let answer = update(&mut r, renewing.0, renewing.1, params);
        let msgs = messages(&r.take_events(renewing.0));
        let [Message::RequestOk(ok)] = msgs.as_slice() else { panic!("{ctx}: {msgs:?}") };
        assert_eq!(ok.request_id, answer);
        assert!(ok.params.expires.is_some_and(|e| e > 500_000), "{ctx}: {:?}", ok.params.expires);

        let mut forged = token(&["live"], false, true, 600).to_vec();
        let n = forged.len();
        forged[n - 2] ^= 1;
        let params = Parameters { auth_tokens: vec![use_value(Bytes::from(forged))], ..Default::default() };
        let answer = update(&mut r, wrong.0, wrong.1, params);
        let msgs = messages(&r.take_events(wrong.0));
        let Message::RequestError(e) = &msgs[0] else { panic!("{ctx}: {msgs:?}") };
        assert_eq!((e.request_id, e.error_code), (answer, MALFORMED), "{ctx}");
        assert_eq!(publish_done(&msgs[1..]).status_code, code::DONE_UPDATE_FAILED, "{ctx}");

        r.advance(Duration::from_secs(5));
        put(&mut r, p, st, &object(1, 1));
        r.run_until_quiet();
        r.advance(Duration::from_secs(6));
        put(&mut r, p, st, &object(1, 2));
        r.run_until_quiet();

        let ev = r.take_events(lapsing.0);
        let d = publish_done(&messages(&ev));
        let expired = if sv == D16 { code::DONE_EXPIRED_D16 } else { code::DONE_EXPIRED_D22 };
        assert_eq!((d.request_id, d.status_code, d.stream_count), (lapsing.1, expired, 1), "{ctx}");
        let seen = streams(&ev);
        let reset = if sv == D16 { code::RESET_CANCELLED } else { code::RESET_EXPIRED_AUTH_TOKEN_D22 };
        let ids: Vec<u64> = seen[0].objects.iter().map(|o| o.0.object_id).collect();
        assert_eq!((ids, seen[0].end), (vec![0, 1], Some(Some(reset))), "{ctx}: objects until it expired");

        let ev = r.take_events(renewing.0);
        assert!(messages(&ev).is_empty(), "{ctx}: {ev:?}");
        let ids: Vec<u64> = streams(&ev)[0].objects.iter().map(|o| o.0.object_id).collect();
        assert_eq!(ids, vec![1, 2], "{ctx}: the renewed subscription goes on (object 0 taken earlier)");
        assert_no_closes(&r);
    }
}

// ---------------------------------------------------------------------------------------------
// MAX_CACHE_DURATION
// ---------------------------------------------------------------------------------------------

/// MAX_CACHE_DURATION (draft-22 §10.3; draft-16 Track Extension 0x04): an object is not served
/// from the cache once that long has passed since the relay received it, and what expired is
/// unknown from then on (an End of Unknown Range, not "does not exist"). It also bounds live
/// forwarding: an object that reaches a subscriber's core later than that is not sent.
#[test]
fn max_cache_duration_expires_cached_objects() {
    const MAX_CACHE_DURATION: u64 = 0x04;
    for (pv, sv) in COMBOS {
        let ctx = format!("{pv:?}->{sv:?}");
        let mut r = Relay::new(2);
        let t = track_owned_by(&r, &["live"], 0);
        let p = r.connect(0, pv);
        announce(&mut r, p, &["live"]);
        let s = r.connect(1, sv);
        let srid = subscribe(&mut r, s, &t, None);
        let up = upstream_subscribe(&mut r, p, &t);
        let mut props = track_properties();
        props.push(MAX_CACHE_DURATION, KvValue::Int(1000));
        accept_with(&mut r, p, &up, PUB_ALIAS, None, props);
        subscribe_ok(&messages(&r.take_events(s)), srid);

        publish_groups(&mut r, p, pv, 0..2);
        r.advance(Duration::from_millis(600));
        publish_groups(&mut r, p, pv, 2..3);
        r.advance(Duration::from_millis(600));

        let f = r.connect(1, sv);
        let all = LocationFilter::AbsoluteRange { start: Location::new(0, 0), end: Location::new(2, 4) };
        let rid = r.next_request_id(f);
        r.send(f, fetch_msg(rid, FetchKind::Standalone { track: t.clone() }, Some(all)));
        r.run_until_quiet();
        assert_eq!(refuse_upstream_fetches(&mut r, p), 1, "{ctx}: the expired part is asked upstream");
        let ev = r.take_events(f);
        fetch_ok(&messages(&ev), rid);
        let seen = fetch_streams(&ev);
        let unknown = FetchItem::EndOfRange { kind: RangeEnd::Unknown, location: Location::new(1, 4) };
        assert_eq!(seen[0].items[0].0, unknown, "{ctx}: groups 0 and 1 expired");
        assert_eq!(fetched_objects(&seen[0], 0), locations(2..3, 0..5), "{ctx}");

        // Live: group 3's object reaches core 1 1.1 s after the relay got it: not forwarded.
        r.take_events(s);
        let st = open(&mut r, p, &header(pv, PUB_ALIAS, 3, 0));
        put(&mut r, p, st, &object(3, 0));
        deliver_pending(&mut r, p);
        r.now += Duration::from_millis(1100);
        r.run_until_quiet();
        assert!(streams(&r.take_events(s)).is_empty(), "{ctx}: too old to forward");
        assert_no_closes(&r);
    }
}

// ---------------------------------------------------------------------------------------------
// Upstream FETCH
// ---------------------------------------------------------------------------------------------

/// A FETCH for objects the cache lacks (draft-22 §3.2.3): the relay FETCHes exactly the
/// missing part from the publisher, then answers with the publisher's objects followed by the
/// cached ones, one contiguous fetch stream, FETCH_OK withheld until then. A publisher that
/// does not answer within the fill time leaves a Timed-Out range (draft-16 has none: Unknown)
/// and the relay cancels its upstream FETCH; draft-22 FILL_TIMEOUT 0 asks for no waiting.
#[test]
fn fetch_gets_what_the_cache_lacks_from_upstream() {
    for (pv, sv) in COMBOS {
        let ctx = format!("{pv:?}->{sv:?}");
        let mut r = Relay::new(2);
        let t = track_owned_by(&r, &["live"], 0);
        let (p, _subs, _up) = established(&mut r, pv, sv, &t, &[1], Some(Location::new(5, 2)));
        let st = open(&mut r, p, &header(pv, PUB_ALIAS, 5, 0));
        for o in 3..5 {
            put(&mut r, p, st, &object(5, o));
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
        let ups = upstream_fetches(&mut r, p);
        let [up] = ups.as_slice() else { panic!("{ctx}: one upstream FETCH: {ups:?}") };
        let missing = LocationFilter::AbsoluteRange { start: Location::new(4, 0), end: Location::new(5, 2) };
        assert_eq!(up.params.location_filter, Some(missing), "{ctx}: only what is not cached");
        assert!(r.take_events(f).is_empty(), "{ctx}: no FETCH_OK before the upstream answers");
        let upstream: Vec<(u64, u64)> =
            locations(4..5, 0..5).into_iter().chain(locations(5..6, 0..3)).collect();
        serve_upstream_fetch(&mut r, p, up, &upstream);
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
        assert_eq!(upstream_fetches(&mut r, p).len(), 1, "{ctx}");
        r.advance(Duration::from_secs(3));
        let ev = r.take_events(f);
        fetch_ok(&messages(&ev), rid);
        let seen = fetch_streams(&ev);
        let kind = if sv == D22 { RangeEnd::TimedOut } else { RangeEnd::Unknown };
        let gap = FetchItem::EndOfRange { kind, location: Location::new(5, 2) };
        assert_eq!(seen[0].items[0].0, gap, "{ctx}");
        assert_eq!(fetched_objects(&seen[0], 0), [(5, 3), (5, 4)], "{ctx}");
        let cancel = r.take_events(p);
        let cancelled = match pv {
            D16 => messages(&cancel).iter().any(|m| matches!(m, Message::FetchCancel(_))),
            _ => cancel.iter().any(|e| matches!(e, Event::Cancelled { .. })),
        };
        assert!(cancelled, "{ctx}: the upstream FETCH is cancelled: {cancel:?}");

        if sv == D22 {
            let rid = ask(&mut r, Some(0));
            assert!(upstream_fetches(&mut r, p).is_empty(), "{ctx}: FILL_TIMEOUT 0 waits for nothing");
            let ev = r.take_events(f);
            fetch_ok(&messages(&ev), rid);
            assert_eq!(fetch_streams(&ev)[0].items[0].0, gap, "{ctx}");
        }
        let counts = r.state_counts();
        let sum = |f: fn(&(usize, usize, usize)) -> usize| counts.iter().map(f).sum::<usize>();
        assert_eq!((sum(|c| c.0), sum(|c| c.1), sum(|c| c.2)), (1, 1, 1), "{ctx}: no fetch left: {counts:?}");
        assert_no_closes(&r);
    }
}

/// draft-22 SUBSCRIBE_TRACKS: a track the relay cannot offer a PUBLISH for (here the
/// session's subscription limit, 1, is taken by the first offer) is reported with
/// PUBLISH_SKIPPED on the SUBSCRIBE_TRACKS stream, naming it by its suffix under the prefix.
#[test]
fn tracks_that_cannot_be_offered_are_publish_skipped() {
    for pv in [D16, D22] {
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
        let m = moq_edge::wire::model::SubscribeTracks {
            request_id: rid,
            prefix: ns(&["live"]),
            ..Default::default()
        };
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
        assert_no_closes(&r);
    }
}

// ---------------------------------------------------------------------------------------------
// Malformed tracks
// ---------------------------------------------------------------------------------------------

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
            let t = track_owned_by(&r, &["live"], 1);
            let (p, subs, up) = established(&mut r, pv, sv, &t, &[0, 1], None);
            let st = open(&mut r, p, &header(pv, PUB_ALIAS, 1, 0));
            put(&mut r, p, st, &object(1, 0));
            put(&mut r, p, st, &object(1, 1));
            if case.starts_with("after") {
                fin(&mut r, p, st);
                let again =
                    open(&mut r, p, &SubgroupHeader { first_object: false, ..header(pv, PUB_ALIAS, 1, 0) });
                put(&mut r, p, again, &object(1, 2));
            } else {
                let other = open(&mut r, p, &header(pv, PUB_ALIAS, 1, 1));
                let (o, _) = object(1, 1);
                let forged = Bytes::from(vec![b'!'; o.payload_len as usize]);
                put(&mut r, p, other, &(o, forged));
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
            assert_eq!(r.shards[1].stats.malformed_tracks, 1, "{ctx}: counted");
            r.assert_idle();
            assert_no_closes(&r);
        }
    }
}

/// A namespace subscription whose prefix matches more namespaces than the relay enumerates
/// (`max_namespace_matches`, 1 here) is refused: NAMESPACE_TOO_LARGE in draft-22 (draft-16
/// has no such code: EXCESSIVE_LOAD). A narrower prefix is accepted.
#[test]
fn a_prefix_matching_too_much_is_namespace_too_large() {
    for sv in [D16, D22] {
        let config = RelayConfig { max_namespace_matches: 1, ..RelayConfig::default() };
        let mut r = Relay::with_config(2, config);
        let p = r.connect(0, D16);
        announce(&mut r, p, &["live", "a"]);
        announce(&mut r, p, &["live", "b"]);
        let s = r.connect(1, sv);
        let (rid, ev) = subscribe_namespace(&mut r, s, &["live"]);
        let e = request_error(&messages(&ev));
        let want = if sv == D22 { code::NAMESPACE_TOO_LARGE } else { code::EXCESSIVE_LOAD };
        assert_eq!((e.request_id, e.error_code), (rid, want), "{sv:?}");
        let (rid, ev) = subscribe_namespace(&mut r, s, &["live", "a"]);
        let msgs = messages(&ev);
        assert!(
            matches!(msgs.first(), Some(Message::RequestOk(ok)) if ok.request_id == rid),
            "{sv:?}: {msgs:?}"
        );
        assert_no_closes(&r);
    }
}

/// draft-22 MAX_REQUEST_UPDATES (§9.1.7) of a publisher that set it to 1: the relay never has
/// more than one of its REQUEST_UPDATEs unanswered on the upstream subscription; a change of
/// the Forward State meanwhile waits and goes out (the latest state) once the publisher
/// answers.
#[test]
fn upstream_request_updates_respect_the_publishers_limit() {
    for sv in [D16, D22] {
        let ctx = format!("D22->{sv:?}");
        let mut r = Relay::new(2);
        let t = track_owned_by(&r, &["live"], 0);
        let setup = SetupOptions { max_request_updates: Some(1), ..Default::default() };
        let p = r.connect_with(0, D22, setup);
        r.take_events(p);
        announce(&mut r, p, &["live"]);
        let s = r.connect(1, sv);
        let rid = subscribe(&mut r, s, &t, None);
        let up = upstream_subscribe(&mut r, p, &t);
        accept(&mut r, p, &up, None);
        subscribe_ok(&messages(&r.take_events(s)), rid);
        let pause = Parameters { forward: Some(false), ..Default::default() };
        let resume = Parameters { forward: Some(true), ..Default::default() };

        update(&mut r, s, rid, pause);
        assert_eq!(upstream_forward_updates(&mut r, p, up.request_id), [Some(false)], "{ctx}");
        update(&mut r, s, rid, resume);
        assert_eq!(upstream_forward_updates(&mut r, p, up.request_id), [], "{ctx}: one is unanswered");
        let ok = moq_edge::wire::model::RequestOk { request_id: up.request_id, ..Default::default() };
        r.send(p, Message::RequestOk(ok.clone()));
        r.run_until_quiet();
        assert_eq!(upstream_forward_updates(&mut r, p, up.request_id), [Some(true)], "{ctx}: now it goes");
        r.send(p, Message::RequestOk(ok));
        r.run_until_quiet();
        assert_eq!(upstream_forward_updates(&mut r, p, up.request_id), [], "{ctx}: nothing else waits");
        r.take_events(s);
        assert_no_closes(&r);
    }
}

// ---------------------------------------------------------------------------------------------
// Upstream links (edge → parent tiers)
// ---------------------------------------------------------------------------------------------

/// SETUP options of a parent relay that names moq-edge node `node`.
fn parent_setup(node: u64) -> SetupOptions {
    SetupOptions { implementation: Some(moq_edge::relay::links::implementation(node)), ..Default::default() }
}

/// A link on core 0 to parent node 7 with the default route; its Ready event taken.
fn link(r: &mut Relay, v: Version) -> ClientId {
    let parent = r.connect_link(0, v, vec![TrackNamespace::from_strs::<&str>(&[])], parent_setup(7));
    let ev = r.take_events(parent);
    let [Event::Ready { peer }] = ev.as_slice() else { panic!("parent got {ev:?}") };
    let ours = moq_edge::relay::links::node_of(peer);
    assert_eq!(ours, Some(r.shards[0].config().node_id), "the relay names its node in SETUP");
    parent
}

/// Publisher `p` announces `fields`; the announcement is forwarded to `parent`, which the
/// publisher's REQUEST_OK waits for. Returns (the publisher's request, the forwarded one);
/// the parent has not answered yet.
fn announce_via_link(
    r: &mut Relay,
    p: ClientId,
    parent: ClientId,
    fields: &[&str],
) -> (RequestId, PublishNamespace) {
    let rid = r.next_request_id(p);
    let msg = PublishNamespace { request_id: rid, namespace: ns(fields), ..Default::default() };
    r.send(p, Message::PublishNamespace(msg));
    r.run_until_quiet();
    assert!(r.take_events(p).is_empty(), "REQUEST_OK waits for the parent");
    let fwd = messages(&r.take_events(parent));
    let [Message::PublishNamespace(f)] = fwd.as_slice() else { panic!("parent got {fwd:?}") };
    assert_eq!(f.namespace, ns(fields));
    (rid, f.clone())
}

/// The parent accepts forwarded announcement `f`: the publisher gets its REQUEST_OK for `rid`.
fn parent_accepts(r: &mut Relay, parent: ClientId, p: ClientId, f: &PublishNamespace, rid: RequestId) {
    let ok = moq_edge::wire::model::RequestOk { request_id: f.request_id, ..Default::default() };
    r.send(parent, Message::RequestOk(ok));
    r.run_until_quiet();
    let msgs = messages(&r.take_events(p));
    assert!(matches!(msgs.as_slice(), [Message::RequestOk(ok)] if ok.request_id == rid), "{msgs:?}");
}

/// Tracks no local publisher serves are subscribed through the link, once per track whatever
/// the number of subscribers and cores; objects come down to all of them. A local publisher
/// of a namespace wins over the link's route.
#[test]
fn a_link_serves_tracks_no_local_publisher_has_with_one_upstream_subscription() {
    for v in [D16, D22] {
        let mut r = Relay::new(2);
        let parent = link(&mut r, v);
        let t = track(&["live", "cam"], "video");
        let subs: Vec<(ClientId, RequestId)> = [1, 0, 1]
            .iter()
            .map(|&core| {
                let s = r.connect(core, v);
                (s, subscribe(&mut r, s, &t, None))
            })
            .collect();
        let up = upstream_subscribe(&mut r, parent, &t);
        accept(&mut r, parent, &up, None);
        for &(s, rid) in &subs {
            subscribe_ok(&messages(&r.take_events(s)), rid);
        }
        let h = header(v, PUB_ALIAS, 0, 0);
        let stream = open(&mut r, parent, &h);
        put(&mut r, parent, stream, &object(0, 0));
        r.run_until_quiet();
        for &(s, _) in &subs {
            let seen = streams(&r.take_events(s));
            assert_eq!(seen.len(), 1, "{v:?}");
            assert_eq!(seen[0].objects.len(), 1, "{v:?}");
        }
        assert!(r.take_events(parent).is_empty(), "one upstream SUBSCRIBE for three subscribers");

        // A local publisher of ["local"] is preferred to the default route.
        let p = r.connect(1, v);
        let (rid, f) = announce_via_link(&mut r, p, parent, &["local"]);
        parent_accepts(&mut r, parent, p, &f, rid);
        let local = track(&["local"], "x");
        let s = r.connect(0, v);
        subscribe(&mut r, s, &local, None);
        upstream_subscribe(&mut r, p, &local);
        assert!(r.take_events(parent).is_empty(), "{v:?}: not sent up the link");
        assert_no_closes(&r);
    }
}

/// A publisher's PUBLISH_NAMESPACE is forwarded up the link, and its REQUEST_OK waits for the
/// parent's answer (so a subscription anywhere in the tree finds the namespace at the
/// parent), at most 2 s. The parent's SUBSCRIBE comes down to the publisher; a parent's
/// request for a namespace nobody here announced is refused, never sent back up. Withdrawing
/// the namespace withdraws it upstream.
#[test]
fn announcements_go_up_the_link_and_the_parents_subscriptions_come_down() {
    for v in [D16, D22] {
        let mut r = Relay::new(2);
        let parent = link(&mut r, v);
        let p = r.connect(1, v);
        let (rid, f) = announce_via_link(&mut r, p, parent, &["live"]);
        parent_accepts(&mut r, parent, p, &f, rid);

        // The parent subscribes: the relay subscribes the publisher.
        let t = track(&["live"], "v");
        let prid = r.next_request_id(parent);
        r.send(parent, subscribe_msg(prid, &t, None));
        r.run_until_quiet();
        let up = upstream_subscribe(&mut r, p, &t);
        accept(&mut r, p, &up, None);
        subscribe_ok(&messages(&r.take_events(parent)), prid);
        // ... and a track nobody here announced is not sent back up the link.
        let other = track(&["elsewhere"], "v");
        let orid = r.next_request_id(parent);
        r.send(parent, subscribe_msg(orid, &other, None));
        r.run_until_quiet();
        let e = request_error(&messages(&r.take_events(parent)));
        assert_eq!((e.request_id, e.error_code), (orid, code::DOES_NOT_EXIST), "{v:?}");

        // A second namespace whose parent never answers: REQUEST_OK after 2 s anyway.
        let (rid2, _) = announce_via_link(&mut r, p, parent, &["slow"]);
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
        assert_no_closes(&r);
    }
}

/// Loops: a request from the relay the link leads to (A ↔ B configured as each other's
/// parents) is not sent up that link; a request from another relay is. A link whose parent
/// turns out to be this relay is closed.
#[test]
fn requests_never_go_back_to_the_relay_they_came_from() {
    for v in [D16, D22] {
        let mut r = Relay::new(2);
        let parent = link(&mut r, v);
        let same = r.connect_with(1, v, parent_setup(7));
        let _ = r.take_events(same);
        let t = track(&["x"], "t");
        let rid = subscribe(&mut r, same, &t, None);
        let e = request_error(&messages(&r.take_events(same)));
        assert_eq!((e.request_id, e.error_code), (rid, code::DOES_NOT_EXIST), "{v:?}");
        assert!(r.take_events(parent).is_empty(), "{v:?}: not sent back to node 7");
        let other = r.connect_with(1, v, parent_setup(8));
        let _ = r.take_events(other);
        subscribe(&mut r, other, &t, None);
        upstream_subscribe(&mut r, parent, &t);

        let ours = r.shards[0].config().node_id;
        let looped = r.connect_link(1, v, vec![TrackNamespace::from_strs::<&str>(&[])], parent_setup(ours));
        assert_eq!(r.clients[looped].closed_by_relay, Some(PROTOCOL_VIOLATION), "{v:?}");
        assert!(!r.shards[1].is_link(r.clients[looped].conn) || r.shards[1].links_up() == 0);
    }
}

/// The link closes under a subscription: its subscriber is kept (its open stream reset, no
/// PUBLISH_DONE) and the relay subscribes again as soon as a link serves the track; objects
/// flow again. When no link comes back within 30 s, the subscriber gets PUBLISH_DONE.
#[test]
fn a_lost_link_keeps_its_subscribers_and_subscribes_again() {
    for v in [D16, D22] {
        let mut r = Relay::new(2);
        let parent = link(&mut r, v);
        let t = track(&["live"], "v");
        let s = r.connect(1, v);
        let rid = subscribe(&mut r, s, &t, None);
        let up = upstream_subscribe(&mut r, parent, &t);
        accept(&mut r, parent, &up, None);
        subscribe_ok(&messages(&r.take_events(s)), rid);
        let h = header(v, PUB_ALIAS, 0, 0);
        let stream = open(&mut r, parent, &h);
        put(&mut r, parent, stream, &object(0, 0));
        r.run_until_quiet();
        let _ = r.take_events(s);

        r.disconnect(parent);
        r.run_until_quiet();
        let ev = r.take_events(s);
        assert!(!messages(&ev).iter().any(|m| matches!(m, Message::PublishDone(_))), "{v:?}: {ev:?}");

        let parent2 = link(&mut r, v);
        r.advance(Duration::from_millis(10));
        let up2 = upstream_subscribe(&mut r, parent2, &t);
        accept(&mut r, parent2, &up2, None);
        assert!(messages(&r.take_events(s)).is_empty(), "{v:?}: no new SUBSCRIBE_OK, no PUBLISH_DONE");
        let stream = open(&mut r, parent2, &header(v, PUB_ALIAS, 1, 0));
        put(&mut r, parent2, stream, &object(1, 0));
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

/// A link (core 0) and a subscriber (core 1) of `t`, served through it: (parent, subscriber,
/// the upstream SUBSCRIBE).
fn subscribed_through_a_link(
    r: &mut Relay,
    v: Version,
    t: &FullTrackName,
) -> (ClientId, ClientId, Subscribe) {
    let parent = link(r, v);
    let s = r.connect(1, v);
    let rid = subscribe(r, s, t, None);
    let up = upstream_subscribe(r, parent, t);
    accept(r, parent, &up, None);
    subscribe_ok(&messages(&r.take_events(s)), rid);
    (parent, s, up)
}

/// `parent` sends GOAWAY with `uri`.
fn parent_goes_away(r: &mut Relay, parent: ClientId, uri: &'static [u8]) {
    let goaway = moq_edge::wire::model::GoAway { new_session_uri: Bytes::from_static(uri), timeout_ms: 0 };
    r.send(parent, Message::GoAway(goaway));
    r.run_until_quiet();
}

/// The replacement of link `old` (parent node `node`, the default route), set up: it gets the
/// SUBSCRIBE of the track on `old` (returned).
fn replacement(r: &mut Relay, old: ClientId, node: u64) -> (ClientId, Subscribe) {
    let parent = r.replace_link(old, vec![TrackNamespace::from_strs::<&str>(&[])], parent_setup(node));
    let ev = r.take_events(parent);
    let [Event::Ready { .. }, Event::Message(Message::Subscribe(up))] = ev.as_slice() else {
        panic!("the new parent got {ev:?}")
    };
    (parent, up.clone())
}

/// Each subgroup stream among `events`: (group, object IDs, end).
fn groups(events: &[Event]) -> Vec<(u64, Vec<u64>, Option<Option<u64>>)> {
    streams(events)
        .iter()
        .map(|st| (st.header.group_id, st.objects.iter().map(|(o, _)| o.object_id).collect(), st.end))
        .collect()
}

/// The parent sends GOAWAY: the relay asks for a replacement link (to the New Session URI)
/// and keeps the old one. Once the new link is up, the track is subscribed there too and
/// moves at a group boundary: the group the old link had started comes whole from it, the
/// new link's copy of that group is not forwarded, the next group comes from the new link
/// (the old link's copy is not forwarded), and when the old link's last stream ends its
/// subscription is cancelled and the old link is ready to close. The subscriber sees each
/// group once, whole, and no PUBLISH_DONE.
#[test]
fn a_parents_goaway_moves_tracks_to_the_new_link_at_a_group_boundary() {
    for v in [D16, D22] {
        let mut r = Relay::new(2);
        let t = track(&["live"], "v");
        let (parent, s, up) = subscribed_through_a_link(&mut r, v, &t);
        let old5 = open(&mut r, parent, &header(v, PUB_ALIAS, 5, 0));
        put(&mut r, parent, old5, &object(5, 0));

        parent_goes_away(&mut r, parent, b"moqt://parent-b.example:4443");
        let old_conn = r.clients[parent].conn;
        let uri = Bytes::from_static(b"moqt://parent-b.example:4443");
        assert_eq!(r.shards[0].take_link_goaways(), vec![(old_conn, uri)], "{v:?}");
        assert!(!r.shards[0].link_moved_out(old_conn), "{v:?}: no replacement yet");

        let (parent2, up2) = replacement(&mut r, parent, 8);
        assert_eq!(up2.track, t);
        accept(&mut r, parent2, &up2, None);
        assert!(r.take_events(parent).is_empty(), "{v:?}: the old subscription stays for now");
        // The new link's copy of group 5 (the old one started it) is not forwarded; its
        // group 6 is, and from then on the old link's group 6 is not.
        let new5 = open(&mut r, parent2, &header(v, PUB_ALIAS, 5, 0));
        put(&mut r, parent2, new5, &object(5, 1));
        let new6 = open(&mut r, parent2, &header(v, PUB_ALIAS, 6, 0));
        put(&mut r, parent2, new6, &object(6, 0));
        r.run_until_quiet();
        put(&mut r, parent, old5, &object(5, 1));
        let old6 = open(&mut r, parent, &header(v, PUB_ALIAS, 6, 0));
        put(&mut r, parent, old6, &object(6, 0));
        r.run_until_quiet();
        assert!(r.take_events(parent).is_empty(), "{v:?}: group 5 is still open on the old link");
        assert!(!r.shards[0].link_moved_out(old_conn), "{v:?}");
        fin(&mut r, parent, old5);
        r.run_until_quiet();
        assert_upstream_stopped(&mut r, parent, v, up.request_id);
        assert!(r.shards[0].link_moved_out(old_conn), "{v:?}: nothing left on the old link");
        assert_eq!(r.shards[r.owner(&t)].stats.tracks_moved, 1, "{v:?}: counted");
        put(&mut r, parent2, new6, &object(6, 1));
        fin(&mut r, parent2, new6);
        let new7 = open(&mut r, parent2, &header(v, PUB_ALIAS, 7, 0));
        put(&mut r, parent2, new7, &object(7, 0));
        r.run_until_quiet();

        let ev = r.take_events(s);
        assert!(messages(&ev).is_empty(), "{v:?}: no PUBLISH_DONE: {ev:?}");
        let expected = vec![(5, vec![0, 1], Some(None)), (6, vec![0, 1], Some(None)), (7, vec![0], None)];
        assert_eq!(groups(&ev), expected, "{v:?}: each group once, whole, from one link");
        assert_no_closes(&r);
    }
}

/// GOAWAY when the old link is ahead of the new one, and closes before its last group ends:
/// the new link's copies of groups the old one started are never forwarded; the old link's
/// open stream is reset when it closes (no PUBLISH_DONE), and the next group the old link
/// had not started comes from the new link. A new parent that refuses the track leaves it on
/// the old link; the move is tried again half a second later.
#[test]
fn a_move_keeps_each_group_from_one_link_when_the_old_one_is_ahead_or_closes() {
    for v in [D16, D22] {
        let mut r = Relay::new(2);
        let t = track(&["live"], "v");
        let (parent, s, _) = subscribed_through_a_link(&mut r, v, &t);
        let old5 = open(&mut r, parent, &header(v, PUB_ALIAS, 5, 0));
        put(&mut r, parent, old5, &object(5, 0));
        parent_goes_away(&mut r, parent, b"");
        let (parent2, up2) = replacement(&mut r, parent, 8);
        accept(&mut r, parent2, &up2, None);
        // The old link is ahead: it opens group 6 before the new link's group 6 arrives.
        let old6 = open(&mut r, parent, &header(v, PUB_ALIAS, 6, 0));
        put(&mut r, parent, old6, &object(6, 0));
        r.run_until_quiet();
        let new6 = open(&mut r, parent2, &header(v, PUB_ALIAS, 6, 0));
        put(&mut r, parent2, new6, &object(6, 1));
        r.run_until_quiet();
        // The old link goes before group 6 ends: its stream is reset; group 7 is the new one's.
        r.disconnect(parent);
        r.run_until_quiet();
        put(&mut r, parent2, new6, &object(6, 2));
        let new7 = open(&mut r, parent2, &header(v, PUB_ALIAS, 7, 0));
        put(&mut r, parent2, new7, &object(7, 0));
        r.run_until_quiet();
        let ev = r.take_events(s);
        assert!(messages(&ev).is_empty(), "{v:?}: no PUBLISH_DONE: {ev:?}");
        let reset = |g: &(u64, Vec<u64>, Option<Option<u64>>)| matches!(g.2, Some(Some(_)));
        let seen = groups(&ev);
        assert!(seen[..2].iter().all(reset), "{v:?}: reset when the link closed: {seen:?}");
        let ids: Vec<(u64, Vec<u64>)> = seen.into_iter().map(|(g, ids, _)| (g, ids)).collect();
        assert_eq!(ids, vec![(5, vec![0]), (6, vec![0]), (7, vec![0])], "{v:?}");

        // A second GOAWAY round where the new parent refuses: the track stays where it is.
        parent_goes_away(&mut r, parent2, b"");
        let (parent3, up3) = replacement(&mut r, parent2, 9);
        let refusal = moq_edge::wire::model::RequestError {
            request_id: up3.request_id,
            error_code: code::DOES_NOT_EXIST,
            reason: Bytes::from_static(b"no such track"),
            ..Default::default()
        };
        r.send(parent3, Message::RequestError(refusal));
        r.run_until_quiet();
        put(&mut r, parent2, new7, &object(7, 1));
        r.run_until_quiet();
        assert_eq!(groups(&r.take_events(s)), vec![(7, vec![1], None)], "{v:?}: still from the second link");
        assert!(r.take_events(parent2).is_empty(), "{v:?}: its subscription is kept");
        assert!(!r.shards[0].link_moved_out(r.clients[parent2].conn), "{v:?}: the link still carries it");
        // Half a second later the move is tried again; this time the parent has the track.
        r.advance(Duration::from_millis(600));
        let again = upstream_subscribe(&mut r, parent3, &t);
        accept(&mut r, parent3, &again, None);
        let new8 = open(&mut r, parent3, &header(v, PUB_ALIAS, 8, 0));
        put(&mut r, parent3, new8, &object(8, 0));
        r.run_until_quiet();
        assert_eq!(groups(&r.take_events(s)), vec![(8, vec![0], None)], "{v:?}: from the third link");
        fin(&mut r, parent2, new7);
        r.run_until_quiet();
        assert_upstream_stopped(&mut r, parent2, v, up2.request_id);
        assert!(r.shards[0].link_moved_out(r.clients[parent2].conn), "{v:?}");
        let ev = r.take_events(s);
        let ended = matches!(ev.as_slice(), [Event::DataStreamEnd { reset: None, .. }]);
        assert!(ended, "{v:?}: group 7 ends: {ev:?}");
        assert_no_closes(&r);
    }
}

/// The replacement link closes before the track moved: the track stays on the old link, and
/// moves when the next replacement is up.
#[test]
fn a_failed_replacement_is_replaced_and_the_move_happens_then() {
    for v in [D16, D22] {
        let mut r = Relay::new(2);
        let t = track(&["live"], "v");
        let (parent, s, up) = subscribed_through_a_link(&mut r, v, &t);
        parent_goes_away(&mut r, parent, b"");
        let (parent2, _) = replacement(&mut r, parent, 8);
        r.disconnect(parent2);
        r.run_until_quiet();
        let old5 = open(&mut r, parent, &header(v, PUB_ALIAS, 5, 0));
        put(&mut r, parent, old5, &object(5, 0));
        r.run_until_quiet();
        assert_eq!(groups(&r.take_events(s)), vec![(5, vec![0], None)], "{v:?}: still from the old link");

        let (parent3, up3) = replacement(&mut r, parent, 9);
        accept(&mut r, parent3, &up3, None);
        let new6 = open(&mut r, parent3, &header(v, PUB_ALIAS, 6, 0));
        put(&mut r, parent3, new6, &object(6, 0));
        r.run_until_quiet();
        assert_eq!(groups(&r.take_events(s)), vec![(6, vec![0], None)], "{v:?}: from the third link");
        fin(&mut r, parent, old5);
        r.run_until_quiet();
        assert_upstream_stopped(&mut r, parent, v, up.request_id);
        assert!(r.shards[0].link_moved_out(r.clients[parent].conn), "{v:?}");
        let ev = r.take_events(s);
        assert!(messages(&ev).is_empty(), "{v:?}: {ev:?}");
        assert_no_closes(&r);
    }
}

/// An edge asked to FETCH a track it does not relay: it subscribes the track through its link
/// (for the End Location), then FETCHes from the parent what its empty cache lacks, and
/// answers with the parent's objects.
#[test]
fn fetch_of_a_track_not_relayed_goes_up_the_link() {
    for v in [D16, D22] {
        let mut r = Relay::new(2);
        let parent = link(&mut r, v);
        let t = track(&["vod"], "film");
        let f = r.connect(1, v);
        let range = LocationFilter::AbsoluteRange { start: Location::new(1, 0), end: Location::new(1, 2) };
        let (rid, ev) = standalone(&mut r, f, &t, range);
        assert!(messages(&ev).is_empty(), "{v:?}");
        let up = upstream_subscribe(&mut r, parent, &t);
        accept(&mut r, parent, &up, Some(Location::new(3, 4)));
        let asked = upstream_fetches(&mut r, parent);
        assert_eq!(asked.len(), 1, "{v:?}: one upstream FETCH for what the cache lacks");
        serve_upstream_fetch(&mut r, parent, &asked[0], &[(1, 0), (1, 1), (1, 2)]);
        let ev = r.take_events(f);
        fetch_ok(&messages(&ev), rid);
        assert_eq!(fetched_objects(&fetch_streams(&ev)[0], 0), [(1, 0), (1, 1), (1, 2)], "{v:?}");
    }
}
