//! Time limits: RENDEZVOUS_TIMEOUT, object and subgroup delivery timeouts, MAX_CACHE_DURATION.

use relay::Input;
use std::time::Duration;

use relay::{ConnId, PathState, RelayConfig};
use session::{Event, StreamId, Transmit};
use wire::code;
use wire::model::{
    DatagramHeader, FetchItem, FetchKind, FullTrackName, GroupOrder, KvValue, Location, LocationFilter,
    Message, Parameters, Properties, PublishNamespace, RangeEnd, RequestId, Subscribe, TrackAlias,
};

use crate::common::*;
use crate::harness::{messages, streams, ClientId, Relay};

impl Relay {
    fn subscribe_rendezvous(&mut self, c: ClientId, t: &FullTrackName, ms: u64) -> RequestId {
        let rid = self.next_request_id(c);
        let params = Parameters { rendezvous_timeout: Some(ms), ..Default::default() };
        self.send(c, Message::Subscribe(Subscribe { request_id: rid, track: t.clone(), params }));
        self.run_until_quiet();
        rid
    }

    /// Hands client `c`'s pending output to the relay without running the mesh (so time can pass
    /// between an object's arrival and its fan-out on another core).
    fn deliver_pending(&mut self, c: ClientId) {
        for t in self.capture(c) {
            self.deliver_to_relay(c, &t);
        }
    }

    /// The deadlines the relay gave object bytes on stream `stream` of client `c`, and the
    /// subgroup deadline it gave the stream (draft-22 §5.2 as the Pump applies them).
    fn deadlines(
        &self,
        c: ClientId,
        stream: StreamId,
    ) -> (Vec<Option<std::time::Instant>>, Option<std::time::Instant>) {
        let mut objects = Vec::new();
        let mut deliver_by = None;
        for t in &self.clients[c].relay_sent {
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
}

/// A draft-18 or draft-22 SUBSCRIBE with RENDEZVOUS_TIMEOUT for a track nobody publishes is held (no
/// answer) until a publisher appears: a PUBLISH_NAMESPACE that covers it (the relay then
/// subscribes upstream) or a PUBLISH of the track itself; either way the subscriber gets
/// SUBSCRIBE_OK only once the upstream is Established. Held past its time, it gets
/// REQUEST_ERROR TIMEOUT; a subscriber that leaves while held leaves nothing behind once the
/// relay's own limit (`max_rendezvous`) has passed.
#[test]
fn rendezvous_timeout_holds_a_subscribe_until_a_publisher_appears() {
    for (pv, sv) in DRAFTS.into_iter().flat_map(|pv| [(pv, D18), (pv, D22)]) {
        let mut r = Relay::new(2);
        let t = r.track_owned_by(&["live"], 0);
        let s = r.connect(1, sv);
        let rid = r.subscribe_rendezvous(s, &t, 5_000);
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
        r.accept(p, up, None);
        subscribe_ok(&messages(&r.take_events(s)), rid);

        let published = r.track_owned_by(&["other"], 1);
        let rid = r.subscribe_rendezvous(s, &published, 5_000);
        let prid = r.next_request_id(p);
        r.send(p, publish_as(pv, prid, &published, TrackAlias(9)));
        r.run_until_quiet();
        assert!(publish_answer(pv, &messages(&r.take_events(p)), prid), "{pv:?}: the PUBLISH forwards");
        subscribe_ok(&messages(&r.take_events(s)), rid);

        let nobody = r.track_owned_by(&["nobody"], 0);
        let rid = r.subscribe_rendezvous(s, &nobody, 2_000);
        r.advance(Duration::from_millis(1_999));
        assert!(r.take_events(s).is_empty());
        r.advance(Duration::from_millis(1));
        r.refused(s, rid, code::TIMEOUT, &format!("{pv:?}"));

        let gone = r.subscribe_rendezvous(s, &nobody, 60_000);
        r.session(s).cancel(gone).unwrap();
        r.run_until_quiet();
        // The relay holds a SUBSCRIBE no longer than its own limit (30 s), then forgets it.
        r.advance(RelayConfig::default().max_rendezvous);
        assert!(r.take_events(s).is_empty(), "{pv:?}: an answer to a cancelled SUBSCRIBE");
        assert_eq!(r.state_counts()[0].0, 1, "{pv:?}: only the first track is left on core 0");
        r.assert_no_closes();
    }
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
        let t = r.track_owned_by(&["live"], 0);
        let alias = r.alias(&t);
        let p = r.connect(0, pv);
        r.announce(p, &["live"]);
        // Subscribers on the other core: `patient` asks 1000 ms (the track's 100 ms wins),
        // `plain` asks nothing (100 ms), `strict` asks 30 ms.
        let sub = |r: &mut Relay, object: Option<u64>, subgroup: Option<u64>| {
            let s = r.connect(1, sv);
            let rid = r.next_request_id(s);
            let params = Parameters {
                object_delivery_timeout: object,
                subgroup_delivery_timeout: subgroup.filter(|_| sv != D16),
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
        let up = r.upstream_subscribe(p, &t);
        let mut props = track_properties();
        props.push(OBJECT_TIMEOUT, KvValue::Int(100));
        r.accept_with(p, &up, PUB_ALIAS, None, props);
        for &(s, rid) in &[patient, plain, strict] {
            subscribe_ok(&messages(&r.take_events(s)), rid);
        }

        // Group 1: object 0 on time; object 1 reaches core 1 60 ms after the relay got it.
        let h1 = header(pv, PUB_ALIAS, 1, 0);
        let g1 = r.open(p, &h1);
        r.put(p, g1, &object(1, 0));
        r.run_until_quiet();
        r.put(p, g1, &object(1, 1));
        r.deliver_pending(p);
        let received = r.now;
        r.now += ms(60);
        r.run_until_quiet();
        r.put(p, g1, &object(1, 2));
        r.fin(p, g1);
        r.run_until_quiet();
        let fin_at = r.now;

        // Group 2, a new subgroup: everyone again, `strict` included.
        let h2 = header(pv, PUB_ALIAS, 2, 0);
        let g2 = r.open(p, &h2);
        r.put(p, g2, &object(2, 0));
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
        r.deliver_pending(p);
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
                let (objects, deliver_by) = r.deadlines(s, seen[0].stream);
                assert_eq!(
                    objects.len(),
                    1 + 3 * 2,
                    "{pv:?}->{sv:?}: header, then header and payload per object"
                );
                assert_eq!(objects[0], None, "the subgroup header has no deadline");
                assert_eq!(objects[3], Some(received + ms(100)), "{pv:?}->{sv:?} {who}");
                let subgroup = (who == "patient" && sv != D16).then(|| fin_at + ms(200));
                assert_eq!(deliver_by, subgroup, "{pv:?}->{sv:?} {who}");
            }
            let g2_objects = [object(2, 0)];
            assert_stream(&seen[1], rid, expected_header(&h2, alias, sv, true), &g2_objects, None);
        }

        // A subgroup's first object can set its own timeout (draft-22 Object Property):
        // 1000 ms instead of the track's 100, so 200 ms late still goes to `plain`.
        if pv == D22 {
            let h4 = header(pv, PUB_ALIAS, 4, 0);
            let g4 = r.open(p, &h4);
            let mut first = object(4, 0);
            first.0.properties.push(OBJECT_TIMEOUT, KvValue::Int(1000));
            first.0.properties.push(SUBGROUP_TIMEOUT, KvValue::Int(50));
            r.put(p, g4, &first);
            r.deliver_pending(p);
            r.now += ms(200);
            r.run_until_quiet();
            let seen = streams(&r.take_events(plain.0));
            assert_eq!(seen.len(), 1, "{pv:?}->{sv:?}");
            assert_eq!(seen[0].objects.len(), 1, "{pv:?}->{sv:?}: on time by the subgroup's own value");
            r.fin(p, g4);
            r.run_until_quiet();
            let (_, deliver_by) = r.deadlines(plain.0, seen[0].stream);
            assert_eq!(deliver_by, Some(r.now + ms(50)), "{pv:?}->{sv:?}: the first object's subgroup value");
            // 30 ms for `strict`: late before its stream was opened, so none is.
            assert!(streams(&r.take_events(strict.0)).is_empty(), "{pv:?}->{sv:?}");
        }
        r.assert_no_closes();
    }
}

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
        let t = r.track_owned_by(&["live"], 0);
        let p = r.connect(0, pv);
        r.announce(p, &["live"]);
        let s = r.connect(1, sv);
        let srid = r.subscribe(s, &t, None);
        let up = r.upstream_subscribe(p, &t);
        let mut props = track_properties();
        props.push(MAX_CACHE_DURATION, KvValue::Int(1000));
        r.accept_with(p, &up, PUB_ALIAS, None, props);
        subscribe_ok(&messages(&r.take_events(s)), srid);

        r.publish_groups(p, pv, 0..2);
        r.advance(Duration::from_millis(600));
        r.publish_groups(p, pv, 2..3);
        r.advance(Duration::from_millis(600));

        let f = r.connect(1, sv);
        let all = LocationFilter::AbsoluteRange { start: Location::new(0, 0), end: Location::new(2, 4) };
        let rid = r.next_request_id(f);
        r.send(f, fetch_msg(rid, FetchKind::Standalone { track: t.clone() }, Some(all)));
        r.run_until_quiet();
        assert_eq!(r.refuse_upstream_fetches(p), 1, "{ctx}: the expired part is asked upstream");
        let ev = r.take_events(f);
        fetch_ok(&messages(&ev), rid);
        let seen = fetch_streams(&ev);
        let unknown = FetchItem::EndOfRange { kind: RangeEnd::Unknown, location: Location::new(1, 4) };
        assert_eq!(seen[0].items[0].0, unknown, "{ctx}: groups 0 and 1 expired");
        assert_eq!(fetched_objects(&seen[0], 0), locations(2..3, 0..5), "{ctx}");

        // Live: group 3's object reaches core 1 1.1 s after the relay got it: not forwarded.
        r.take_events(s);
        let st = r.open(p, &header(pv, PUB_ALIAS, 3, 0));
        r.put(p, st, &object(3, 0));
        r.deliver_pending(p);
        r.now += Duration::from_millis(1100);
        r.run_until_quiet();
        assert!(streams(&r.take_events(s)).is_empty(), "{ctx}: too old to forward");
        r.assert_no_closes();
    }
}

/// The freshness budget (`max_lag`): with no delivery timeout of its own, every object a
/// subscriber is sent carries `received + max_lag` as its deadline (the transport resets its
/// subgroup stream with DELIVERY_TIMEOUT when its bytes are still queued then), a subscriber's
/// smaller timeout carries its own, and an object that reaches the subscriber's core later than
/// the budget is not sent (its stream reset). With the budget off, no deadline.
#[test]
fn max_lag_bounds_live_delivery() {
    let ms = Duration::from_millis;
    for (pv, sv) in COMBOS {
        let ctx = format!("{pv:?}->{sv:?}");
        for lag in [Some(ms(500)), None] {
            let config = RelayConfig { max_lag: lag, ..RelayConfig::default() };
            let mut r = Relay::with_config(2, config);
            let t = r.track_owned_by(&["live"], 0);
            let p = r.connect(0, pv);
            r.announce(p, &["live"]);
            let plain = r.connect(1, sv);
            let plain_rid = r.subscribe(plain, &t, None);
            let strict = r.connect(1, sv);
            let rid = r.next_request_id(strict);
            let params = Parameters { object_delivery_timeout: Some(100), ..Default::default() };
            r.send(strict, Message::Subscribe(Subscribe { request_id: rid, track: t.clone(), params }));
            r.run_until_quiet();
            let up = r.upstream_subscribe(p, &t);
            r.accept(p, &up, None);
            subscribe_ok(&messages(&r.take_events(plain)), plain_rid);
            subscribe_ok(&messages(&r.take_events(strict)), rid);

            let g1 = r.open(p, &header(pv, PUB_ALIAS, 1, 0));
            r.put(p, g1, &object(1, 0));
            let received = r.now;
            r.run_until_quiet();
            let seen = streams(&r.take_events(strict));
            let (objects, _) = r.deadlines(strict, seen[0].stream);
            assert_eq!(objects[1..], [Some(received + ms(100)); 2], "{ctx} {lag:?}: its own, smaller");

            // Object 1 reaches core 1 600 ms after the relay got it: past the budget.
            r.put(p, g1, &object(1, 1));
            r.deliver_pending(p);
            r.now += ms(600);
            r.run_until_quiet();
            let seen = streams(&r.take_events(plain));
            let [s] = seen.as_slice() else { panic!("{ctx}: {seen:?}") };
            let (objects, _) = r.deadlines(plain, s.stream);
            assert_eq!(objects[1..3], [lag.map(|l| received + l); 2], "{ctx} {lag:?}: header and payload");
            match lag {
                Some(_) => {
                    assert_eq!(s.objects.len(), 1, "{ctx}: object 1 not sent late");
                    assert_eq!(s.end, Some(Some(code::RESET_DELIVERY_TIMEOUT)), "{ctx}");
                }
                None => assert_eq!((s.objects.len(), s.end), (2, None), "{ctx}: sent, late or not"),
            }
            r.assert_no_closes();
        }
    }
}

/// Input that waited in the socket before the core read it (`RelayShard::set_receive_lag`,
/// measured by the runtime from the kernel's receive timestamps) arrived that much earlier:
/// deadlines count from then, and an object that already waited past the budget is not sent.
#[test]
fn time_spent_in_the_socket_counts_against_the_budget() {
    let ms = Duration::from_millis;
    for (pv, sv) in COMBOS {
        let ctx = format!("{pv:?}->{sv:?}");
        let config = RelayConfig { max_lag: Some(ms(500)), ..RelayConfig::default() };
        let mut r = Relay::with_config(1, config);
        let t = track(&["live"], "v");
        let (p, subs, _) = r.established(pv, sv, &t, &[0], None);
        let s = subs[0].0;

        // Read 200 ms after the kernel got it: its deadline is 300 ms from now.
        r.shards[0].handle(r.now, Input::ReceiveLag(ms(200)));
        let g1 = r.open(p, &header(pv, PUB_ALIAS, 1, 0));
        r.put(p, g1, &object(1, 0));
        r.run_until_quiet();
        let seen = streams(&r.take_events(s));
        let [st] = seen.as_slice() else { panic!("{ctx}: {seen:?}") };
        let (objects, _) = r.deadlines(s, st.stream);
        assert_eq!(objects[1..], [Some(r.now + ms(300)); 2], "{ctx}: counted from the kernel's receipt");

        // Read 700 ms late: past the budget, not sent; its stream is reset.
        r.shards[0].handle(r.now, Input::ReceiveLag(ms(700)));
        r.put(p, g1, &object(1, 1));
        r.run_until_quiet();
        let events = r.take_events(s);
        assert!(!events.iter().any(|e| matches!(e, Event::Object { .. })), "{ctx}: nothing stale sent");
        let reset = events.iter().any(|e| {
            matches!(e, Event::DataStreamEnd { stream, reset: Some(c) } if *stream == st.stream && *c == code::RESET_DELIVERY_TIMEOUT)
        });
        assert!(reset, "{ctx}: its stream reset with DELIVERY_TIMEOUT: {events:?}");
        r.shards[0].handle(r.now, Input::ReceiveLag(Duration::ZERO));
        r.assert_no_closes();
    }
}

/// Publisher `p` sends `groups`, one object each on its own subgroup stream, and the relay
/// forwards them.
fn one_object_groups(r: &mut Relay, p: ClientId, pv: wire::Version, groups: std::ops::RangeInclusive<u64>) {
    for g in groups {
        let st = r.open(p, &header(pv, PUB_ALIAS, g, 0));
        r.put(p, st, &object(g, 0));
        r.fin(p, st);
    }
    r.run_until_quiet();
}

/// Streams `lost` of the subscriber session `conn` (core 1) ran out of time on a path that
/// delivers.
fn expire(r: &mut Relay, conn: ConnId, lost: &[StreamId]) {
    let now = r.now;
    r.shards[1].handle(now, Input::Expired { conn, streams: lost, path: PathState::Delivering });
    r.run_until_quiet();
}

/// Subscriber `s` (draft `sv`) got PUBLISH_DONE TOO_FAR_BEHIND for `rid`.
fn assert_too_far_behind(r: &mut Relay, s: ClientId, sv: wire::Version, rid: RequestId, ctx: &str) {
    let done = publish_done(&messages(&r.take_events(s)));
    let too_far = if sv == D16 { code::DONE_TOO_FAR_BEHIND_D16 } else { code::DONE_TOO_FAR_BEHIND_D22 };
    assert_eq!((done.request_id, done.status_code), (rid, too_far), "{ctx}");
}

/// A subscriber on core 1 (draft `sv`) of a track published on core 0 (draft `pv`), under
/// `config`, asking for Group Order `order` (`None`: the publisher's), sent `groups`
/// one-object groups: the relay, the publisher, the subscriber, its request and the streams
/// it was sent.
fn sent_groups(
    config: RelayConfig,
    (pv, sv): (wire::Version, wire::Version),
    groups: u64,
    order: Option<GroupOrder>,
) -> (Relay, ClientId, ClientId, RequestId, Vec<StreamId>) {
    let mut r = Relay::with_config(2, config);
    let t = r.track_owned_by(&["live"], 0);
    let p = r.connect(0, pv);
    r.announce(p, &["live"]);
    let s = r.connect(1, sv);
    let rid = r.next_request_id(s);
    let params = Parameters { group_order: order, ..Parameters::default() };
    r.send(s, Message::Subscribe(Subscribe { request_id: rid, track: t.clone(), params }));
    r.run_until_quiet();
    let up = r.upstream_subscribe(p, &t);
    r.accept(p, &up, None);
    subscribe_ok(&messages(&r.take_events(s)), rid);
    one_object_groups(&mut r, p, pv, 1..=groups);
    let ids: Vec<StreamId> = streams(&r.take_events(s)).iter().map(|s| s.stream).collect();
    assert_eq!(ids.len() as u64, groups, "{pv:?}->{sv:?}");
    (r, p, s, rid, ids)
}

/// A subscription that keeps losing subgroup streams in its session's transport ends with
/// PUBLISH_DONE TOO_FAR_BEHIND (`too_far_behind_streams` within 10 s): streams shed from an
/// over-long backlog always count; streams that ran out of time count when the freshness
/// budget was what ran out, not a smaller delivery timeout the subscriber asked for itself.
#[test]
fn subscriptions_that_keep_losing_streams_end_too_far_behind() {
    let ms = Duration::from_millis;
    for (pv, sv) in COMBOS {
        let ctx = format!("{pv:?}->{sv:?}");
        let config =
            RelayConfig { max_lag: Some(ms(500)), too_far_behind_streams: 2, ..RelayConfig::default() };
        let mut r = Relay::with_config(2, config);
        let t = r.track_owned_by(&["live"], 0);
        let p = r.connect(0, pv);
        r.announce(p, &["live"]);
        let lagging = r.connect(1, sv);
        let lagging_rid = r.subscribe(lagging, &t, None);
        let strict = r.connect(1, sv);
        let strict_rid = r.next_request_id(strict);
        let params = Parameters { object_delivery_timeout: Some(100), ..Default::default() };
        r.send(strict, Message::Subscribe(Subscribe { request_id: strict_rid, track: t.clone(), params }));
        r.run_until_quiet();
        let up = r.upstream_subscribe(p, &t);
        r.accept(p, &up, None);
        subscribe_ok(&messages(&r.take_events(lagging)), lagging_rid);
        subscribe_ok(&messages(&r.take_events(strict)), strict_rid);
        one_object_groups(&mut r, p, pv, 1..=4);
        let ids = |r: &mut Relay, c: ClientId| -> Vec<StreamId> {
            streams(&r.take_events(c)).iter().map(|s| s.stream).collect()
        };
        let (lagging_ids, strict_ids) = (ids(&mut r, lagging), ids(&mut r, strict));
        assert_eq!((lagging_ids.len(), strict_ids.len()), (4, 4), "{ctx}");
        let (lagging_conn, strict_conn) = (r.clients[lagging].conn, r.clients[strict].conn);

        // Two streams out of time: the budget ran out for `lagging`, its own 100 ms for `strict`.
        for i in 0..2 {
            let now = r.now;
            r.shards[1].handle(
                now,
                Input::Expired {
                    conn: lagging_conn,
                    streams: &lagging_ids[i..=i],
                    path: PathState::Delivering,
                },
            );
            r.shards[1].handle(
                now,
                Input::Expired {
                    conn: strict_conn,
                    streams: &strict_ids[i..=i],
                    path: PathState::Delivering,
                },
            );
            r.run_until_quiet();
        }
        assert_too_far_behind(&mut r, lagging, sv, lagging_rid, &ctx);
        assert!(messages(&r.take_events(strict)).is_empty(), "{ctx}: its own timeouts are no lag");

        // Shed from the backlog: counts whatever the subscriber's timeouts.
        for i in 2..4 {
            let now = r.now;
            r.shards[1].handle(
                now,
                Input::Shed { conn: strict_conn, streams: &strict_ids[i..=i], path: PathState::Delivering },
            );
            r.run_until_quiet();
        }
        assert_too_far_behind(&mut r, strict, sv, strict_rid, &ctx);
        r.assert_no_closes();
    }
}

/// Streams shed while the subscriber's core is overloaded (over its admission threshold, or
/// its input waited 25 ms or more in the socket within the last 2 s) do not count toward
/// TOO_FAR_BEHIND: then every subscriber falls behind because the relay does, and ending them
/// all would leave an overloaded relay delivering nothing. Once the core keeps up again,
/// losses count.
#[test]
fn streams_shed_while_the_core_is_overloaded_do_not_end_subscriptions() {
    for (pv, sv) in COMBOS {
        let ctx = format!("{pv:?}->{sv:?}");
        let config =
            RelayConfig { admission_busy_pct: 90, too_far_behind_streams: 2, ..RelayConfig::default() };
        let (mut r, _, s, rid, ids) = sent_groups(config, (pv, sv), 6, None);
        let conn = r.clients[s].conn;
        let shed = |r: &mut Relay, ids: &[StreamId]| {
            for id in ids {
                let now = r.now;
                r.shards[1].handle(
                    now,
                    Input::Shed { conn, streams: std::slice::from_ref(id), path: PathState::Delivering },
                );
                r.run_until_quiet();
            }
        };

        r.shards[1].handle(r.now, Input::Load(95));
        shed(&mut r, &ids[..2]);
        assert!(messages(&r.take_events(s)).is_empty(), "{ctx}: the core was over its threshold");

        r.shards[1].handle(r.now, Input::Load(50));
        r.shards[1].handle(r.now, Input::ReceiveLag(Duration::from_millis(50)));
        r.shards[1].handle(r.now, Input::ReceiveLag(Duration::ZERO));
        shed(&mut r, &ids[2..4]);
        assert!(messages(&r.take_events(s)).is_empty(), "{ctx}: the core's input waited in the socket");

        r.advance(Duration::from_secs(3));
        r.take_events(s);
        shed(&mut r, &ids[4..]);
        assert_too_far_behind(&mut r, s, sv, rid, &ctx);
        r.assert_no_closes();
    }
}

/// Streams lost while the subscriber's path delivers nothing (an outage: the host tells from
/// its transport's acknowledgements, `PathState::Stalled`) do not count toward TOO_FAR_BEHIND:
/// the subscription stays, and resumes with the groups after the outage. Losses on a path
/// that delivers (a slow one) still do.
#[test]
fn streams_lost_while_the_path_is_stalled_do_not_end_subscriptions() {
    for (pv, sv) in COMBOS {
        let ctx = format!("{pv:?}->{sv:?}");
        let config = RelayConfig { too_far_behind_streams: 2, ..RelayConfig::default() };
        let (mut r, p, s, rid, ids) = sent_groups(config, (pv, sv), 6, None);
        let conn = r.clients[s].conn;
        for (i, id) in ids[..4].iter().enumerate() {
            let now = r.now;
            let ids = std::slice::from_ref(id);
            if i % 2 == 0 {
                r.shards[1].handle(now, Input::Expired { conn, streams: ids, path: PathState::Stalled });
            } else {
                r.shards[1].handle(now, Input::Shed { conn, streams: ids, path: PathState::Stalled });
            }
            r.run_until_quiet();
        }
        assert!(messages(&r.take_events(s)).is_empty(), "{ctx}: an outage ends nothing");
        // The path is back: the next group reaches the subscription.
        one_object_groups(&mut r, p, pv, 7..=7);
        assert_eq!(streams(&r.take_events(s)).len(), 1, "{ctx}: the subscription goes on");
        // Losses on a path that delivers count again.
        for id in &ids[4..] {
            let now = r.now;
            r.shards[1].handle(
                now,
                Input::Expired { conn, streams: std::slice::from_ref(id), path: PathState::Delivering },
            );
            r.run_until_quiet();
        }
        assert_too_far_behind(&mut r, s, sv, rid, &ctx);
        r.assert_no_closes();
    }
}

/// A subscriber on a path thinner than its track loses streams while others of its get through
/// whole: each stream taken whole (`streams_finished`) starts the count toward TOO_FAR_BEHIND
/// again, and what it loses within the freshness budget after (several at once when its path
/// slows) does not count, so it keeps its subscription however many it loses. Losing the
/// limit with none through for longer than the budget still ends it.
#[test]
fn a_thin_path_that_gets_some_streams_through_whole_is_not_too_far_behind() {
    for (pv, sv) in COMBOS {
        let ctx = format!("{pv:?}->{sv:?}");
        let config = RelayConfig { too_far_behind_streams: 2, ..RelayConfig::default() };
        let budget = config.max_lag.expect("a freshness budget by default");
        let (mut r, _, s, rid, ids) = sent_groups(config, (pv, sv), 8, None);
        let conn = r.clients[s].conn;
        let lose = |r: &mut Relay, lost: &[StreamId]| expire(r, conn, lost);
        // One lost, one whole, then three lost at once: never too far behind.
        lose(&mut r, &ids[..1]);
        let now = r.now;
        r.shards[1].handle(now, Input::Finished { conn, streams: &ids[1..2] });
        lose(&mut r, &ids[2..5]);
        assert!(messages(&r.take_events(s)).is_empty(), "{ctx}: a thin path ends nothing");
        // Nothing through for longer than the budget, and two more lost: too far behind.
        r.advance(budget + Duration::from_millis(100));
        let _ = r.take_events(s);
        lose(&mut r, &ids[5..6]);
        lose(&mut r, &ids[6..7]);
        assert_too_far_behind(&mut r, s, sv, rid, &ctx);
        r.assert_no_closes();
    }
}

/// A subscriber that asked for the newest group first (Group Order descending) on a path
/// thinner than its track gets each new group's beginning and loses the tail of the one
/// before, which waits behind it until its time runs out: those losses are its own order's,
/// at the live edge, and do not count toward TOO_FAR_BEHIND. Losing the newest group's
/// stream, with nothing newer sent, does.
#[test]
fn older_groups_lost_behind_a_newer_one_do_not_end_a_newest_first_subscription() {
    for (pv, sv) in COMBOS {
        let ctx = format!("{pv:?}->{sv:?}");
        let config = RelayConfig { too_far_behind_streams: 2, ..RelayConfig::default() };
        let (mut r, _, s, rid, ids) = sent_groups(config, (pv, sv), 6, Some(GroupOrder::Descending));
        let conn = r.clients[s].conn;
        let lose = |r: &mut Relay, lost: &[StreamId]| expire(r, conn, lost);
        // Groups 1-4 lost, one by one and then two at once, behind group 6.
        lose(&mut r, &ids[..1]);
        lose(&mut r, &ids[1..2]);
        lose(&mut r, &ids[2..4]);
        assert!(messages(&r.take_events(s)).is_empty(), "{ctx}: superseded groups end nothing");
        // The two newest lost at once: nothing newer was sent, the subscriber is behind.
        lose(&mut r, &ids[4..6]);
        assert_too_far_behind(&mut r, s, sv, rid, &ctx);
        r.assert_no_closes();
    }
}

/// The same losses count for a subscription in ascending order: it asked for the older
/// groups first, and losing them is falling behind.
#[test]
fn older_groups_lost_count_for_an_ascending_subscription() {
    for (pv, sv) in COMBOS {
        let ctx = format!("{pv:?}->{sv:?}");
        let config = RelayConfig { too_far_behind_streams: 2, ..RelayConfig::default() };
        let (mut r, _, s, rid, ids) = sent_groups(config, (pv, sv), 6, Some(GroupOrder::Ascending));
        let conn = r.clients[s].conn;
        expire(&mut r, conn, &ids[..2]);
        assert_too_far_behind(&mut r, s, sv, rid, &ctx);
        r.assert_no_closes();
    }
}

/// What concerns one session's streams (lost, expired, taken whole) or its close visits that
/// session's subscriptions alone, however many tracks and other sessions the core serves: a
/// core with 100 tracks and a subscriber on each (plus one watching all of them) visits one
/// subscription per call for a session with one, and closing it visits one.
#[test]
fn stream_ends_and_closes_visit_only_the_sessions_own_subscriptions() {
    let (pv, sv) = (D16, D16);
    let mut r = Relay::new(2);
    let p = r.connect(0, pv);
    r.announce(p, &["live"]);
    let crowd = r.connect(1, sv);
    let mut tracks = Vec::new();
    for i in 0..100 {
        let t = track(&["live"], &format!("t{i}"));
        r.subscribe(crowd, &t, None);
        let other = r.connect(1, sv);
        r.subscribe(other, &t, None);
        tracks.push(t);
    }
    let lone = r.connect(1, sv);
    r.subscribe(lone, &tracks[7], None);
    r.run_until_quiet();
    let lone_conn = r.clients[lone].conn;
    let before = r.shards[1].subscription_visits();
    let now = r.now;
    let stream = [StreamId(3)];
    r.shards[1].handle(now, Input::Finished { conn: lone_conn, streams: &stream });
    r.shards[1]
        .handle(now, Input::Expired { conn: lone_conn, streams: &stream, path: PathState::Delivering });
    r.shards[1].handle(now, Input::Shed { conn: lone_conn, streams: &stream, path: PathState::Delivering });
    assert_eq!(r.shards[1].subscription_visits() - before, 3, "one subscription for each of three calls");
    r.disconnect(lone);
    r.run_until_quiet();
    assert_eq!(r.shards[1].subscription_visits() - before, 4, "and one when its session closed");
}
