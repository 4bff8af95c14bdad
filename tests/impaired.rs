//! Through an impaired network (bench/impair's proxy, in this process): subscribers whose link
//! loses, reorders and duplicates datagrams both ways still get every object of every
//! subgroup whole and in order (QUIC retransmits; the relay never breaks a stream), with the
//! relay and moq-bench as processes. Figures for impaired links are bench/impaired.sh's.

use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use impair::proxy::{Config, Proxy};
use impair::{Schedule, Settings};
use moq_edge::client::{Publisher, Subscriber};
use moq_edge::wire::model::{FullTrackName, GroupOrder, Parameters, TrackNamespace};
use moq_edge::wire::Version;

#[path = "support/process.rs"]
mod process;
use process::{free_tcp, free_udp, metric, wait_for, Proc};

#[test]
fn objects_arrive_whole_and_in_order_through_loss_reordering_and_duplication() {
    let relay = Relay::start();
    // 3 % loss, 5 % of datagrams held back 10 ms (reordered), 1 % duplicated, each way.
    let impaired = Settings {
        loss: 0.03,
        reorder: 0.05,
        reorder_delay: Duration::from_millis(10),
        dup: 0.01,
        ..Settings::default()
    };
    let schedule = Schedule { base: impaired, phases: Vec::new() };
    let proxy = Forwarder::start(relay.port, schedule.clone(), schedule, 11);
    let (through, port) = (proxy.addr, relay.port);
    let json = std::env::temp_dir().join(format!("moq-edge-impaired-{}.json", std::process::id()));
    let out = Command::new(env!("CARGO_BIN_EXE_moq-bench"))
        .args(["fanout", "--relay", &format!("moqt://{through}")])
        .args(["--publish-relay", &format!("moqt://127.0.0.1:{port}")])
        .args(["--subscribers", "5", "--rate", "100", "--group-size", "10", "--subgroups", "2"])
        .args(["--duration", "4", "--warmup", "1", "--timeout-s", "60", "--quiet", "--json"])
        .arg(&json)
        .output()
        .expect("moq-bench runs");
    let (up, down) = proxy.stop();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    let results: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&json).expect("moq-bench's JSON")).expect("JSON");
    std::fs::remove_file(&json).ok();
    assert!(
        down.dropped() > 0 && up.dropped() > 0 && down.duplicated > 0,
        "the link was impaired: {down:?} {up:?}"
    );
    let n = |k: &str| results[k].as_u64().unwrap_or(u64::MAX);
    for k in ["malformed", "duplicated", "reordered", "lost"] {
        assert_eq!(n(k), 0, "{k}: {results:#}\n{text}");
    }
    assert!(n("delivered_objects") > 0, "{results:#}\n{text}");
}

/// A viewer's link drops everything for 3 s and comes back: the relay keeps its session and
/// its subscription (what went stale meanwhile is dropped, and losses while the path delivers
/// nothing do not count toward TOO_FAR_BEHIND), and the viewer gets the groups published
/// after the outage.
#[test]
fn a_subscription_survives_a_three_second_outage_and_resumes_at_the_live_edge() {
    let relay = Relay::start();
    let outage = Settings { outage: true, ..Settings::default() };
    let phases = vec![
        impair::Phase { at: Duration::from_millis(1500), settings: outage },
        impair::Phase { at: Duration::from_millis(4500), settings: Settings::default() },
    ];
    let schedule = Schedule::new(Settings::default(), phases);
    let proxy = Forwarder::start(relay.port, schedule.clone(), schedule, 5);
    let live = Live::start(relay.port, "outage", 1000);
    let mut s =
        Subscriber::connect(proxy.addr, Version::Draft22, deadline()).expect("the subscriber connects");
    let id = s.subscribe(live.track.clone(), None, deadline()).expect("subscribed");
    let start = Instant::now();
    // Until well after the outage (which starts 1.5 s after the subscriber's first packet).
    s.pump(start + Duration::from_secs(8)).expect("the session survives the outage");
    let sent = live.stop();
    proxy.stop();
    let sub = s.core().subscription(id).expect("the subscription");
    assert!(sub.done.is_none(), "the subscription was ended: {:?}", sub.done);
    // Groups published after the link came back (with a second's margin) reached the viewer.
    let after: Vec<u64> =
        sent.iter().filter(|(_, at)| *at > start + Duration::from_millis(5500)).map(|(g, _)| *g).collect();
    let got: std::collections::HashSet<u64> = s.received(id).iter().map(|r| r.group).collect();
    assert!(
        !after.is_empty() && after.iter().all(|g| got.contains(g)),
        "groups {after:?} after the outage, got {got:?}"
    );
    relay.assert_none_too_far_behind();
}

/// A viewer whose link carries half the track's bitrate (a rate cap with a queue of about a
/// second) cannot get every group: the relay drops whole subgroup streams (reset, or never
/// opened) and the viewer gets the others as they are, each a run of whole objects from the
/// first, in order, never a broken or reordered one. It is not ended TOO_FAR_BEHIND: it gets
/// groups through whole, and it still gets groups published in the last seconds.
#[test]
fn a_viewer_on_a_link_thinner_than_the_track_gets_whole_groups_and_keeps_the_live_edge() {
    let thin = ThinViewer::watch(None);
    let whole = thin.groups.values().filter(|o| o.len() == 3).count();
    let published = thin.published;
    assert!(whole > 0 && whole < published, "{whole} of {published} groups arrived whole: {:?}", thin.groups);
}

/// The same viewer asking for the newest group first (Group Order descending, as a live
/// player does): each new group goes before the rest of the one before, whose tail then runs
/// out of time; it gets runs of whole objects from each group's first, keeps the live edge,
/// and is not ended TOO_FAR_BEHIND for the tails its own order gave up.
#[test]
fn a_newest_first_viewer_on_a_thin_link_keeps_the_live_edge() {
    let thin = ThinViewer::watch(Some(GroupOrder::Descending));
    let published = thin.published;
    assert!(thin.groups.len() < published, "a half-rate link cannot carry every group: {:?}", thin.groups);
}

/// One viewer behind a link at half the track's rate for 10 s, checked for what every thin
/// viewer must get: whole objects in runs from each group's first, in order, groups published
/// in the last 3 s, nothing ended TOO_FAR_BEHIND. What arrived, by group, and how many groups
/// were published.
struct ThinViewer {
    groups: std::collections::BTreeMap<u64, Vec<u64>>,
    published: usize,
}

impl ThinViewer {
    fn watch(order: Option<GroupOrder>) -> Self {
        let relay = Relay::start();
        // The track: 3 objects of 1000 B every 100 ms, 30 KB/s; the link toward the viewer
        // carries half of that (headers included) through a 16 KB queue.
        let thin = Settings { rate_bps: 130_000, queue_bytes: 16 << 10, ..Settings::default() };
        let proxy = Forwarder::start(
            relay.port,
            Schedule::new(Settings::default(), Vec::new()),
            Schedule::new(thin, Vec::new()),
            7,
        );
        let live = Live::start(relay.port, "thin", 1000);
        let mut s =
            Subscriber::connect(proxy.addr, Version::Draft22, deadline()).expect("the subscriber connects");
        let params = Parameters { forward: Some(true), group_order: order, ..Parameters::default() };
        let id = s.subscribe_with(live.track.clone(), params, deadline()).expect("subscribed");
        let start = Instant::now();
        s.pump(start + Duration::from_secs(10)).expect("the session lives");
        let sent = live.stop();
        proxy.stop();
        let sub = s.core().subscription(id).expect("the subscription");
        assert!(sub.done.is_none(), "the subscription was ended: {:?}", sub.done);
        let mut groups: std::collections::BTreeMap<u64, Vec<u64>> = Default::default();
        for r in s.received(id) {
            assert_eq!(r.payload, Live::payload(r.object, 1000), "object {:?} arrived whole", r.location());
            groups.entry(r.group).or_default().push(r.object);
        }
        for (g, objects) in &groups {
            let prefix: Vec<u64> = (0..objects.len() as u64).collect();
            assert_eq!(objects, &prefix, "group {g}: a run of objects from the first, in order");
        }
        // The live edge: groups published in the last three seconds arrived.
        let last = sent.iter().filter(|(_, at)| *at > start + Duration::from_secs(7)).map(|(g, _)| *g);
        let recent: Vec<u64> = last.filter(|g| groups.contains_key(g)).collect();
        assert!(!recent.is_empty(), "nothing published in the last 3 s arrived: {groups:?}");
        relay.assert_none_too_far_behind();
        ThinViewer { groups, published: sent.len() }
    }
}

fn deadline() -> Instant {
    Instant::now() + Duration::from_secs(30)
}

/// A relay process on one core.
struct Relay {
    _proc: Proc,
    port: u16,
    metrics: u16,
}

impl Relay {
    fn start() -> Self {
        let (port, metrics) = (free_udp(), free_tcp());
        let proc = Proc(
            Command::new(env!("CARGO_BIN_EXE_moq-edge"))
                .args(["--listen", &format!("127.0.0.1:{port}"), "--cores", "1", "--web", "off"])
                .args(["--metrics", &format!("127.0.0.1:{metrics}"), "--admission-busy-pct", "0"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("moq-edge starts"),
        );
        wait_for("the relay", Duration::from_secs(30), || metric(metrics, "moq_edge_sessions").is_some());
        Relay { _proc: proc, port, metrics }
    }

    fn assert_none_too_far_behind(&self) {
        let text = process::get(self.metrics, "/metrics").expect("the metrics");
        let ended = "moq_edge_subscriptions_ended_total{core=\"all\",reason=\"too_far_behind\"} 0";
        assert!(text.lines().any(|l| l == ended), "nothing ended TOO_FAR_BEHIND");
    }
}

/// The impairment proxy in front of the relay, on a thread of its own.
struct Forwarder {
    addr: std::net::SocketAddr,
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<(impair::Stats, impair::Stats)>,
}

impl Forwarder {
    fn start(port: u16, up: Schedule, down: Schedule, seed: u64) -> Self {
        let config = Config {
            listen: "127.0.0.1:0".parse().expect("an address"),
            upstream: format!("127.0.0.1:{port}").parse().expect("an address"),
            up,
            down,
            seed,
            max_clients: 64,
        };
        let mut proxy = Proxy::bind(config).expect("the proxy binds");
        let addr = proxy.local_addr().expect("its address");
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let until = Instant::now() + Duration::from_secs(120);
                proxy.run(&stop, Some(until), None, &mut std::io::sink()).expect("the proxy runs");
                proxy.stats()
            })
        };
        Forwarder { addr, stop, thread }
    }

    /// Stops forwarding: what each direction did (up, down).
    fn stop(self) -> (impair::Stats, impair::Stats) {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().expect("the proxy thread")
    }
}

/// A publisher on the relay (not through the proxy): one group of 3 objects every 100 ms
/// while anyone subscribes, until stopped.
struct Live {
    track: FullTrackName,
    publishing: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<Vec<(u64, Instant)>>,
}

impl Live {
    fn start(port: u16, namespace: &str, size: usize) -> Self {
        let track =
            FullTrackName { namespace: TrackNamespace::from_strs(&[namespace]), name: "video".into() };
        let relay: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().expect("an address");
        let mut p = Publisher::connect(relay, Version::Draft22, deadline()).expect("the publisher connects");
        p.add_track(track.clone());
        p.announce(track.namespace.clone(), deadline()).expect("announced");
        let publishing = Arc::new(AtomicBool::new(true));
        let thread = {
            let (t, publishing) = (track.clone(), publishing.clone());
            std::thread::spawn(move || {
                let mut sent = Vec::new();
                let mut group = 0;
                while publishing.load(Ordering::Relaxed) {
                    if p.core().active(&t) > 0 {
                        let objects: Vec<bytes::Bytes> = (0..3).map(|o| Live::payload(o, size)).collect();
                        p.send_group(&t, group, &objects).expect("sent");
                        sent.push((group, Instant::now()));
                        group += 1;
                    }
                    p.pump(Instant::now() + Duration::from_millis(100)).expect("the publisher runs");
                }
                sent
            })
        };
        Live { track, publishing, thread }
    }

    /// Object `object`'s payload: `size` bytes that say which object they are.
    fn payload(object: u64, size: usize) -> bytes::Bytes {
        vec![object as u8; size].into()
    }

    /// Stops publishing: each group's number and when it was sent.
    fn stop(self) -> Vec<(u64, Instant)> {
        self.publishing.store(false, Ordering::Relaxed);
        self.thread.join().expect("the publisher thread")
    }
}
