//! End to end over loopback: the relay on 2 cores (real QUIC, the runtime, the mesh) and our
//! client. One publisher, 50 subscribers spread over both cores, 3 tracks: every subscriber
//! receives every object byte-exact and in order, in draft-16, draft-22 and both mixes; the
//! publisher sees one upstream subscription per track; a malformed message closes only its
//! own session; a publisher that goes away mid-group ends every subscription with
//! PUBLISH_DONE and leaves no relay state behind; a graceful shutdown sends GOAWAY, keeps
//! relaying for the grace period, then closes with GOAWAY_TIMEOUT.
#![allow(clippy::unwrap_used)]

use std::sync::atomic::Ordering;
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::{Duration, Instant};

use bytes::Bytes;
use moq_edge::client::codes::publish_done;
use moq_edge::client::{
    Endpoint, Fleet, FollowingSubscriber, MoqtClient, Publisher, PublisherCore, Received, RequestState,
    Subscriber, SubscriberCore,
};
use moq_edge::host::{RelayFactory, RelayGauges};
use moq_edge::relay::RelayConfig;
use moq_edge::runtime::{self, RuntimeConfig, ServerHandle};
use moq_edge::session::SessionConfig;
use moq_edge::wire::model::{FullTrackName, RequestId, SetupOptions, TrackNamespace};
use moq_edge::wire::Version;

const SUBSCRIBERS: usize = 50;
const GROUPS: u64 = 3;
const OBJECTS: u64 = 5;

fn deadline() -> Instant {
    Instant::now() + Duration::from_secs(60)
}

fn relay() -> (ServerHandle, Arc<[RelayGauges]>) {
    let mut rc = RuntimeConfig::new(([127, 0, 0, 1], 0).into(), 2);
    rc.pin = false;
    let config = RelayConfig { linger: Duration::from_millis(50), ..RelayConfig::default() };
    let factory = RelayFactory::new(config, SessionConfig::default(), &[5; 32]);
    let gauges = factory.gauges();
    (runtime::start(rc, Arc::new(factory)).expect("relay starts"), gauges)
}

fn tracks() -> Vec<FullTrackName> {
    ["audio", "video", "captions"]
        .iter()
        .map(|n| FullTrackName {
            namespace: TrackNamespace::from_strs(&["e2e", "event"]),
            name: Bytes::copy_from_slice(n.as_bytes()),
        })
        .collect()
}

/// A distinct payload per object, some spanning several QUIC packets.
fn payload(track: usize, group: u64, object: u64) -> Bytes {
    let mut p = format!("t{track}g{group}o{object}:").into_bytes();
    p.resize(20 + (object as usize * 997 + track * 131) % 4000, b'a' + (group % 26) as u8);
    Bytes::from(p)
}

/// Waits (polling the relay's per-core gauges) until `want(sum over cores)` holds.
fn wait_gauges(g: &[RelayGauges], want: impl Fn((u64, u64, u64, u64)) -> bool) -> (u64, u64, u64, u64) {
    let end = deadline();
    loop {
        let sum = g
            .iter()
            .take(2)
            .map(RelayGauges::read)
            .fold((0, 0, 0, 0), |a, b| (a.0 + b.0, a.1 + b.1, a.2 + b.2, a.3 + b.3));
        if want(sum) || Instant::now() > end {
            return sum;
        }
        thread::sleep(Duration::from_millis(5));
    }
}

/// The publisher's side of a scenario, on its own thread: announce, serve the relay's
/// upstream SUBSCRIBEs, and on `go` publish every group of every track, then PUBLISH_DONE.
/// Returns how many upstream subscriptions it saw per track.
fn publish_all(
    addr: std::net::SocketAddr,
    version: Version,
    announced: mpsc::Sender<()>,
    go: mpsc::Receiver<()>,
    finished: mpsc::Receiver<()>,
) -> thread::JoinHandle<Vec<usize>> {
    thread::spawn(move || {
        let mut p = Publisher::connect(addr, version, deadline()).unwrap();
        for t in tracks() {
            p.add_track(t);
        }
        p.announce(TrackNamespace::from_strs(&["e2e"]), deadline()).unwrap();
        announced.send(()).unwrap();
        while go.try_recv().is_err() {
            let _ = p.pump(Instant::now() + Duration::from_millis(20));
        }
        let ts = tracks();
        let seen: Vec<usize> =
            ts.iter().map(|t| p.core().subscriptions().filter(|(_, d)| &d.track == t).count()).collect();
        for g in 0..GROUPS {
            for (i, t) in ts.iter().enumerate() {
                let objects: Vec<Bytes> = (0..OBJECTS).map(|o| payload(i, g, o)).collect();
                p.send_group(t, g, &objects).unwrap();
            }
        }
        for t in &ts {
            p.done(t, publish_done::TRACK_ENDED, "the end").unwrap();
        }
        while finished.try_recv().is_err() {
            let _ = p.pump(Instant::now() + Duration::from_millis(20));
        }
        p.close().unwrap();
        seen
    })
}

fn fan_out(pub_v: Version, sub_v: Version, with_bad_client: bool) {
    let (relay, gauges) = relay();
    let addr = relay.local_addr();
    let (go_tx, go) = mpsc::channel();
    let (fin_tx, fin) = mpsc::channel();
    let (announced_tx, announced) = mpsc::channel();
    let publisher = publish_all(addr, pub_v, announced_tx, go, fin);

    let mut fleet = Fleet::<SubscriberCore>::subscribers(addr, sub_v, SUBSCRIBERS, deadline()).unwrap();
    // SUBSCRIBE only once the relay accepted the namespace (else DOES_NOT_EXIST): it answers
    // once every core knows it, so a SUBSCRIBE on either core finds it.
    announced.recv_timeout(Duration::from_secs(60)).unwrap();
    let ts = tracks();
    let ids: Vec<Vec<RequestId>> =
        ts.iter().map(|t| fleet.subscribe_all(t, None, deadline()).unwrap()).collect();
    // The gauges are published at the end of each core's turn: wait for the last one.
    wait_gauges(&gauges, |g| g.2 == (SUBSCRIBERS * ts.len()) as u64);
    let per_core: Vec<u64> = gauges.iter().take(2).map(|g| g.subscriptions.load(Ordering::Relaxed)).collect();
    assert!(per_core.iter().all(|&n| n > 0), "subscribers on both cores: {per_core:?}");
    assert_eq!(per_core.iter().sum::<u64>(), (SUBSCRIBERS * ts.len()) as u64);

    if with_bad_client {
        // A malformed control message (an unknown message type) closes that session only.
        let bad = MoqtClient::connect(addr, sub_v, SetupOptions::default(), deadline()).unwrap();
        let control = if sub_v.request_streams() { 2 } else { 0 };
        let (mut conn, app) = bad.into_parts().ok().unwrap();
        conn.conn_mut().stream_send(control, &[0x3f, 0x00, 0x00], false).unwrap();
        let mut bad = MoqtClient::from_parts(conn, app);
        let err = bad.until(deadline(), |_| false).unwrap_err();
        let close = err.peer_error().unwrap_or_else(|| panic!("expected the relay to close: {err}"));
        assert!(close.is_app && close.error_code == 0x3, "PROTOCOL_VIOLATION: {close:?}");
    }

    go_tx.send(()).unwrap();
    fleet
        .drive_until(deadline(), |i, core| {
            ids.iter().all(|per_track| {
                core.subscription(per_track[i])
                    .is_some_and(|s| s.done.as_ref().is_some_and(|d| s.streams_finished >= d.stream_count))
            })
        })
        .unwrap();
    fin_tx.send(()).unwrap();
    let upstream = publisher.join().unwrap();
    assert_eq!(upstream, vec![1; ts.len()], "one upstream subscription per track");

    for i in 0..SUBSCRIBERS {
        let core = fleet.core(i).unwrap();
        for (t, per_track) in ids.iter().enumerate() {
            let s = core.subscription(per_track[i]).unwrap();
            // Each group is its own stream: in order within it, any interleaving across them.
            for g in 0..GROUPS {
                let got: Vec<(u64, &[u8])> =
                    s.received.iter().filter(|r| r.group == g).map(|r| (r.object, &r.payload[..])).collect();
                let want: Vec<Bytes> = (0..OBJECTS).map(|o| payload(t, g, o)).collect();
                let ok = got.len() == want.len()
                    && got.iter().zip(&want).enumerate().all(|(o, (x, w))| x.0 == o as u64 && x.1 == &w[..]);
                let objects: Vec<u64> = got.iter().map(|x| x.0).collect();
                assert!(
                    ok,
                    "subscriber {i} track {t} group {g} ({pub_v:?} → {sub_v:?}): objects {objects:?}"
                );
            }
            assert_eq!(s.received.len() as u64, GROUPS * OBJECTS);
            let done = s.done.as_ref().unwrap();
            assert_eq!((done.status, done.stream_count), (publish_done::TRACK_ENDED, GROUPS));
            assert!(s.resets.is_empty(), "no stream was reset: {:?}", s.resets);
        }
    }
    fleet.close().unwrap();
    let left = wait_gauges(&gauges, |g| g == (0, 0, 0, 0));
    assert_eq!(left, (0, 0, 0, 0), "(sessions, tracks, subscriptions, upstreams) after everyone left");
    relay.shutdown().unwrap();
}

#[test]
fn fan_out_draft16() {
    fan_out(Version::Draft16, Version::Draft16, true);
}

#[test]
fn fan_out_draft22() {
    fan_out(Version::Draft22, Version::Draft22, true);
}

#[test]
fn fan_out_draft18() {
    fan_out(Version::Draft18, Version::Draft18, true);
}

#[test]
fn fan_out_draft18_publisher_to_draft16_subscribers() {
    fan_out(Version::Draft18, Version::Draft16, false);
}

#[test]
fn fan_out_draft16_publisher_to_draft18_subscribers() {
    fan_out(Version::Draft16, Version::Draft18, false);
}

#[test]
fn fan_out_draft22_publisher_to_draft18_subscribers() {
    fan_out(Version::Draft22, Version::Draft18, false);
}

#[test]
fn fan_out_draft18_publisher_to_draft22_subscribers() {
    fan_out(Version::Draft18, Version::Draft22, false);
}

#[test]
fn fan_out_draft22_publisher_to_draft16_subscribers() {
    fan_out(Version::Draft22, Version::Draft16, false);
}

#[test]
fn fan_out_draft16_publisher_to_draft22_subscribers() {
    fan_out(Version::Draft16, Version::Draft22, false);
}

#[test]
fn fan_out_draft14() {
    fan_out(Version::Draft14, Version::Draft14, true);
}

/// draft-14 (ALPN moq-00) publishers and subscribers meet those of every later draft, both ways.
#[test]
fn fan_out_between_draft14_and_every_later_draft() {
    for other in [Version::Draft16, Version::Draft18, Version::Draft20, Version::Draft22] {
        fan_out(Version::Draft14, other, false);
        fan_out(other, Version::Draft14, false);
    }
}

/// The publisher's connection closes in the middle of a group: every subscriber's open stream
/// is reset, every subscription ends with PUBLISH_DONE, and the relay keeps nothing for it.
#[test]
fn publisher_gone_mid_group_ends_every_subscription() {
    for (pub_v, sub_v) in [
        (Version::Draft16, Version::Draft22),
        (Version::Draft22, Version::Draft16),
        (Version::Draft18, Version::Draft16),
        (Version::Draft22, Version::Draft18),
    ] {
        let (relay, gauges) = relay();
        let addr = relay.local_addr();
        let (go_tx, go) = mpsc::channel::<()>();
        let (kill_tx, kill) = mpsc::channel::<()>();
        let (announced_tx, announced) = mpsc::channel::<()>();
        let publisher = thread::spawn(move || {
            let mut p = Publisher::connect(addr, pub_v, deadline()).unwrap();
            let t = tracks().remove(0);
            p.add_track(t.clone());
            p.announce(TrackNamespace::from_strs(&["e2e"]), deadline()).unwrap();
            announced_tx.send(()).unwrap();
            while go.try_recv().is_err() {
                let _ = p.pump(Instant::now() + Duration::from_millis(20));
            }
            p.begin_group(&t, 0).unwrap();
            p.send_object(&t, payload(0, 0, 0)).unwrap();
            p.send_object(&t, payload(0, 0, 1)).unwrap();
            while kill.try_recv().is_err() {
                let _ = p.pump(Instant::now() + Duration::from_millis(20));
            }
            p.close().unwrap();
        });
        // Subscribe once the namespace is known (otherwise: DOES_NOT_EXIST, as it should be).
        announced.recv_timeout(Duration::from_secs(10)).unwrap();
        let mut fleet = Fleet::<SubscriberCore>::subscribers(addr, sub_v, 20, deadline()).unwrap();
        let ids = fleet.subscribe_all(&tracks()[0], None, deadline()).unwrap();
        go_tx.send(()).unwrap();
        fleet.drive_until(deadline(), |i, c| c.received(ids[i]).len() == 2).unwrap();
        kill_tx.send(()).unwrap();
        publisher.join().unwrap();
        fleet
            .drive_until(deadline(), |i, c| c.subscription(ids[i]).is_some_and(|s| s.done.is_some()))
            .unwrap();
        for (i, id) in ids.iter().enumerate() {
            let s = fleet.core(i).unwrap().subscription(*id).unwrap();

            let done = s.done.as_ref().unwrap();
            assert_eq!((done.status, done.stream_count), (publish_done::INTERNAL_ERROR, 1), "{pub_v:?}");
            assert_eq!(s.received.len(), 2);
            assert_eq!(s.streams_finished + s.resets.len() as u64, 1, "the open stream ended");
        }
        // The subscribers are still connected; nothing else is left.
        let left = wait_gauges(&gauges, |g| g == (20, 0, 0, 0));
        assert_eq!(left, (20, 0, 0, 0), "(sessions, tracks, subscriptions, upstreams)");
        fleet.close().unwrap();
        relay.shutdown().unwrap();
    }
}

/// Graceful shutdown (SIGTERM): every session gets GOAWAY with the configured New Session URI
/// (draft-22 also with the timeout; draft-16's GOAWAY has no timeout field), objects keep
/// flowing during the grace period, and the sessions still open when it ends are closed with
/// GOAWAY_TIMEOUT (0x10).
#[test]
fn shutdown_sends_goaway_then_closes_with_goaway_timeout() {
    for version in Version::ALL {
        let mut rc = RuntimeConfig::new(([127, 0, 0, 1], 0).into(), 2);
        rc.pin = false;
        rc.drain_grace = Duration::from_millis(5000);
        let config = RelayConfig {
            goaway_uri: Bytes::from_static(b"moqt://next.example:4443"),
            ..RelayConfig::default()
        };
        let factory = RelayFactory::new(config, SessionConfig::default(), &[5; 32]);
        let relay = runtime::start(rc, Arc::new(factory)).unwrap();
        let addr = relay.local_addr();
        let track = tracks()[0].clone();

        let mut publisher = PublisherCore::new();
        publisher.add_track(track.clone());
        let members = vec![
            Endpoint::Publisher(publisher),
            Endpoint::Subscriber(SubscriberCore::new()),
            Endpoint::Subscriber(SubscriberCore::new()),
        ];
        let mut fleet = Fleet::connect(addr, version, members, deadline()).unwrap();
        let ns = TrackNamespace::from_strs(&["e2e"]);
        let announced = fleet.with(0, |e, s| e.publisher_mut().unwrap().announce(s, ns)).unwrap().unwrap();
        // Every member is served on every round (the publisher answers the relay's SUBSCRIBE),
        // until `cond` holds for the fleet.
        let serve_until = |fleet: &mut Fleet<Endpoint>, cond: &dyn Fn(&Fleet<Endpoint>) -> bool| {
            let end = deadline();
            while !cond(fleet) {
                assert!(Instant::now() < end, "{version:?}: timed out");
                if let Err(e) = fleet.pump(Instant::now() + Duration::from_millis(10)) {
                    let seen: Vec<bool> = (0..3)
                        .map(|i| match fleet.core(i).unwrap() {
                            Endpoint::Publisher(p) => p.goaway().is_some(),
                            Endpoint::Subscriber(s) => s.goaway().is_some(),
                        })
                        .collect();
                    panic!("{version:?}: {e} (GOAWAY seen by {seen:?})");
                }
            }
        };
        let publisher =
            |f: &Fleet<Endpoint>| f.core(0).unwrap().publisher().unwrap().announcement(announced).cloned();
        serve_until(&mut fleet, &|f| publisher(f) == Some(RequestState::Accepted));
        let subs: Vec<RequestId> = (1..3)
            .map(|i| fleet.with(i, |e, s| e.subscriber_mut().unwrap().subscribe(s, track.clone(), None)))
            .map(|r| r.unwrap().unwrap())
            .collect();
        serve_until(&mut fleet, &|f| {
            (0..2).all(|i| subscriber(f, i).subscription(subs[i]).unwrap().state == RequestState::Accepted)
        });

        let trigger = relay.shutdown_trigger();
        let stopped = thread::spawn(move || relay.join());
        trigger.trigger();
        let goaway = |e: &Endpoint| match e {
            Endpoint::Publisher(p) => p.goaway().cloned(),
            Endpoint::Subscriber(s) => s.goaway().cloned(),
        };
        serve_until(&mut fleet, &|f| (0..3).all(|i| goaway(f.core(i).unwrap()).is_some()));
        for i in 0..3 {
            let g = goaway(fleet.core(i).unwrap()).unwrap();
            assert_eq!(&g.new_session_uri[..], b"moqt://next.example:4443", "{version:?}");
            // draft-14's and draft-16's GOAWAY have no Timeout field.
            let timeout = if matches!(version, Version::Draft14 | Version::Draft16) { 0 } else { 5000 };
            assert_eq!(g.timeout_ms, timeout, "{version:?}");
        }

        // Still relaying during the grace period.
        let objects: Vec<Bytes> = (0..OBJECTS).map(|o| payload(0, 0, o)).collect();
        fleet.with(0, |e, s| e.publisher_mut().unwrap().send_group(s, &track, 0, &objects)).unwrap().unwrap();
        serve_until(&mut fleet, &|f| {
            (0..2).all(|i| subscriber(f, i).received(subs[i]).len() == OBJECTS as usize)
        });

        // Nobody leaves: the relay closes every session with GOAWAY_TIMEOUT when time is up.
        let err = fleet.pump(deadline()).unwrap_err();
        let close =
            err.peer_error().unwrap_or_else(|| panic!("{version:?}: expected the relay to close: {err}"));
        assert!(close.is_app && close.error_code == 0x10, "{version:?}: GOAWAY_TIMEOUT: {close:?}");
        stopped.join().unwrap().unwrap();
    }
}

/// Subscriber `i` of the GOAWAY test's fleet (member `i + 1`).
fn subscriber(f: &Fleet<Endpoint>, i: usize) -> &SubscriberCore {
    f.core(i + 1).unwrap().subscriber().unwrap()
}

/// A relay with no sessions left stops as soon as it is asked, whatever its grace period.
#[test]
fn shutdown_without_sessions_does_not_wait_for_the_grace_period() {
    let mut rc = RuntimeConfig::new(([127, 0, 0, 1], 0).into(), 2);
    rc.pin = false;
    rc.drain_grace = Duration::from_secs(600);
    let factory = RelayFactory::new(RelayConfig::default(), SessionConfig::default(), &[5; 32]);
    let relay = runtime::start(rc, Arc::new(factory)).unwrap();
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || tx.send(relay.shutdown().map(|r| r.len())));
    // Generous: the point is that it does not wait the 600 s.
    let cores = rx.recv_timeout(Duration::from_secs(60)).expect("stopped without waiting").unwrap();
    assert_eq!(cores, 2);
}

/// A subscriber that stops reading: its session's backlog past `max_backlog` is shed a whole
/// subgroup stream at a time (it sees them reset, never an object missing inside one), the
/// subscriber that keeps reading gets every object, and after `too_far_behind_streams` shed
/// streams in a row the slow one's subscription ends with PUBLISH_DONE TOO_FAR_BEHIND.
#[test]
fn a_subscriber_that_stops_reading_is_shed_then_ended_too_far_behind() {
    const GROUPS_RUN: u64 = 60;
    for version in Version::ALL {
        let mut rc = RuntimeConfig::new(([127, 0, 0, 1], 0).into(), 1);
        rc.pin = false;
        // This test is about the subscriber falling behind: the relay's own input waiting in
        // the socket on a busy test machine must not count as the relay falling behind.
        let config =
            RelayConfig { max_backlog: 256 * 1024, behind_lag: Duration::MAX, ..RelayConfig::default() };
        let factory = RelayFactory::new(config, SessionConfig::default(), &[5; 32]);
        let relay = runtime::start(rc, Arc::new(factory)).unwrap();
        let addr = relay.local_addr();
        let track = tracks()[0].clone();
        let (go_tx, go) = mpsc::channel::<()>();
        let (fin_tx, fin) = mpsc::channel::<()>();
        let (announced_tx, announced) = mpsc::channel::<()>();
        let published = track.clone();
        let publisher = thread::spawn(move || {
            let mut p = Publisher::connect(addr, version, deadline()).unwrap();
            p.add_track(published.clone());
            p.announce(TrackNamespace::from_strs(&["e2e"]), deadline()).unwrap();
            announced_tx.send(()).unwrap();
            while go.try_recv().is_err() {
                let _ = p.pump(Instant::now() + Duration::from_millis(10));
            }
            for g in 0..GROUPS_RUN {
                let objects: Vec<Bytes> = (0..OBJECTS).map(|o| payload(0, g, o)).collect();
                p.send_group(&published, g, &objects).unwrap();
                let _ = p.pump(Instant::now() + Duration::from_millis(5));
            }
            p.done(&published, publish_done::TRACK_ENDED, "the end").unwrap();
            while fin.try_recv().is_err() {
                let _ = p.pump(Instant::now() + Duration::from_millis(10));
            }
            p.close().unwrap();
        });

        let mut fast = Subscriber::connect(addr, version, deadline()).unwrap();
        let mut slow = Subscriber::connect(addr, version, deadline()).unwrap();
        // SUBSCRIBE only once the relay knows the namespace (else DOES_NOT_EXIST).
        announced.recv_timeout(Duration::from_secs(60)).unwrap();
        let fast_id = fast.subscribe(track.clone(), None, deadline()).unwrap();
        let slow_id = slow.subscribe(track.clone(), None, deadline()).unwrap();
        go_tx.send(()).unwrap();
        // Only `fast` is read while the track runs.
        let finished = |c: &SubscriberCore, id| {
            c.subscription(id).is_some_and(|s| {
                s.done.as_ref().is_some_and(|d| s.streams_finished + s.resets.len() as u64 >= d.stream_count)
            })
        };
        fast.pump_until(deadline(), |c| finished(c, fast_id)).unwrap();
        // The slow one then reads what is left for it: PUBLISH_DONE ends it. (Its Stream
        // Count cannot be met: a stream reset before its header arrived cannot be told apart.)
        slow.pump_until(deadline(), |c| c.subscription(slow_id).is_some_and(|s| s.done.is_some())).unwrap();
        slow.pump(Instant::now() + Duration::from_millis(200)).unwrap();
        fin_tx.send(()).unwrap();
        publisher.join().unwrap();

        let f = fast.core().subscription(fast_id).unwrap();
        assert_eq!(f.received.len() as u64, GROUPS_RUN * OBJECTS, "{version:?}: the reader got everything");
        assert!(f.resets.is_empty(), "{version:?}: {:?}", f.resets);
        assert_eq!(f.done.as_ref().unwrap().status, publish_done::TRACK_ENDED);

        let s = slow.core().subscription(slow_id).unwrap();
        let too_far_behind = if matches!(version, Version::Draft14 | Version::Draft16) { 0x6 } else { 0x5 };
        let done = s.done.as_ref().unwrap();
        assert_eq!(done.status, too_far_behind, "{version:?}: {done:?}");
        assert!(
            s.streams_finished + (s.resets.len() as u64) < done.stream_count,
            "{version:?}: streams shed"
        );
        assert!((s.received.len() as u64) < GROUPS_RUN * OBJECTS, "{version:?}");
        // Whatever arrived of a group is that group's objects from 0 on, in order, byte-exact.
        for g in 0..GROUPS_RUN {
            let got: Vec<&Received> = s.received.iter().filter(|r| r.group == g).collect();
            for (o, r) in got.iter().enumerate() {
                assert_eq!(
                    (r.object, &r.payload),
                    (o as u64, &payload(0, g, o as u64)),
                    "{version:?} group {g}"
                );
            }
        }
        fast.close().unwrap();
        slow.close().unwrap();
        relay.shutdown().unwrap();
    }
}

/// Sessions that leave after GOAWAY let the relay stop before its grace period ends (every
/// core, also one that never had a connection).
#[test]
fn shutdown_ends_when_the_sessions_leave() {
    for version in Version::ALL {
        let mut rc = RuntimeConfig::new(([127, 0, 0, 1], 0).into(), 2);
        rc.pin = false;
        rc.drain_grace = Duration::from_secs(600);
        let factory = RelayFactory::new(RelayConfig::default(), SessionConfig::default(), &[5; 32]);
        let relay = runtime::start(rc, Arc::new(factory)).unwrap();
        let mut sub = Subscriber::connect(relay.local_addr(), version, deadline()).unwrap();
        let trigger = relay.shutdown_trigger();
        let (tx, rx) = mpsc::channel();
        thread::spawn(move || tx.send(relay.join().map(|r| r.len())));
        trigger.trigger();
        sub.pump_until(deadline(), |c| c.goaway().is_some()).unwrap();
        sub.close().unwrap();
        // Generous: the point is that it does not wait the 600 s.
        let cores = rx.recv_timeout(Duration::from_secs(60)).expect("stopped once the session left").unwrap();
        assert_eq!(cores, 2, "{version:?}");
    }
}

/// Graceful subscriber switchover (draft-22 §7.4.1) across two relays: one publisher feeds
/// the same live track, object for object, to relay A and relay B. A subscriber on A gets
/// GOAWAY pointing at B when A drains; it subscribes on B, cancels on A once B has taken over,
/// and closes its A session. The objects it delivers run on without a gap or a repeat across
/// the switch, payloads intact; A then stops without waiting out its grace period.
#[test]
fn subscriber_follows_goaway_to_another_relay_without_loss_or_repeat() {
    for version in Version::ALL {
        follow_goaway(version, 1);
    }
}

/// The same with two subgroups per group (object n on subgroup n mod 2, each on its own
/// stream): the move is cut at a group boundary, so no object of either subgroup is lost or
/// repeated across it (objects of one group may arrive in either subgroup's order).
#[test]
fn subscriber_follows_goaway_exactly_with_several_subgroups() {
    for version in Version::ALL {
        follow_goaway(version, 2);
    }
}

fn follow_goaway(version: Version, subgroups: u64) {
    const PER_GROUP: u64 = 5;
    {
        let start = |goaway_uri: Bytes| {
            let mut rc = RuntimeConfig::new(([127, 0, 0, 1], 0).into(), 2);
            rc.pin = false;
            rc.drain_grace = Duration::from_secs(600);
            let config = RelayConfig { goaway_uri, ..RelayConfig::default() };
            let factory = RelayFactory::new(config, SessionConfig::default(), &[5; 32]);
            runtime::start(rc, Arc::new(factory)).unwrap()
        };
        let relay_b = start(Bytes::new());
        let b = relay_b.local_addr();
        let relay_a = start(Bytes::from(format!("moqt://{b}")));
        let a = relay_a.local_addr();
        let track = tracks()[0].clone();

        // The publisher: the same objects to both relays, 5 per group, one group after another.
        let (announced_tx, announced) = mpsc::channel();
        let (stop_tx, stop) = mpsc::channel::<()>();
        let t = track.clone();
        let publisher = thread::spawn(move || {
            let mut both = [
                Publisher::connect(a, version, deadline()).unwrap(),
                Publisher::connect(b, version, deadline()).unwrap(),
            ];
            for p in &mut both {
                p.add_track(t.clone());
                p.announce(TrackNamespace::from_strs(&["e2e"]), deadline()).unwrap();
            }
            announced_tx.send(()).unwrap();
            let mut group = 0;
            while stop.try_recv().is_err() {
                for p in &mut both {
                    p.begin_subgroups(&t, group, subgroups).unwrap();
                }
                for object in 0..PER_GROUP {
                    for p in &mut both {
                        let at = p.send_object(&t, payload(0, group, object)).unwrap();
                        assert_eq!((at.group, at.object), (group, object));
                        let _ = p.pump(Instant::now() + Duration::from_millis(2));
                    }
                }
                for p in &mut both {
                    p.end_group(&t).unwrap();
                }
                group += 1;
            }
            for p in &mut both {
                p.close().unwrap();
            }
        });
        announced.recv().unwrap();

        let mut sub = FollowingSubscriber::connect(a, version, deadline()).unwrap();
        let h = sub.subscribe(track.clone(), deadline()).unwrap();
        let mut got: Vec<Received> = Vec::new();
        let end = deadline();
        let serve_until = |sub: &mut FollowingSubscriber,
                           got: &mut Vec<Received>,
                           cond: &dyn Fn(&FollowingSubscriber, usize) -> bool| {
            while !cond(sub, got.len()) {
                assert!(Instant::now() < end, "{version:?}: timed out with {} objects", got.len());
                sub.pump(Instant::now() + Duration::from_millis(10)).unwrap();
                got.extend(sub.take_received(h));
            }
        };
        serve_until(&mut sub, &mut got, &|_, n| n >= 3 * PER_GROUP as usize);
        let before = got.len();

        let trigger = relay_a.shutdown_trigger();
        let (stopped_tx, stopped) = mpsc::channel();
        thread::spawn(move || stopped_tx.send(relay_a.join().map(|r| r.len())));
        trigger.trigger();
        serve_until(&mut sub, &mut got, &|s, n| s.switches() == 1 && n >= before + 4 * PER_GROUP as usize);
        assert_eq!(sub.relay(), b, "{version:?}: now on relay B");
        // A ends its drain once its sessions leave: ours left when the move completed.
        stop_tx.send(()).unwrap();
        publisher.join().unwrap();
        let cores = stopped.recv_timeout(Duration::from_secs(60)).expect("relay A stopped").unwrap();
        assert_eq!(cores, 2, "{version:?}");

        if subgroups > 1 {
            got.sort_by_key(|r| r.location());
        }
        let first = got[0].location();
        for (i, r) in got.iter().enumerate() {
            let n = first.group * PER_GROUP + first.object + i as u64;
            let want = (n / PER_GROUP, n % PER_GROUP);
            assert_eq!((r.group, r.object), want, "{version:?}: object {i} of {}", got.len());
            assert_eq!(r.payload, payload(0, r.group, r.object), "{version:?}: payload of {want:?}");
        }
        sub.close().unwrap();
        relay_b.shutdown().unwrap();
    }
}
