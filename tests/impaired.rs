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

#[path = "support/process.rs"]
mod process;
use process::{free_tcp, free_udp, metric, wait_for, Proc};

#[test]
fn objects_arrive_whole_and_in_order_through_loss_reordering_and_duplication() {
    let (port, metrics) = (free_udp(), free_tcp());
    let _relay = Proc(
        Command::new(env!("CARGO_BIN_EXE_moq-edge"))
            .args(["--listen", &format!("127.0.0.1:{port}"), "--cores", "1", "--web", "off"])
            .args(["--metrics", &format!("127.0.0.1:{metrics}"), "--admission-busy-pct", "0"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("moq-edge starts"),
    );
    wait_for("the relay", Duration::from_secs(30), || metric(metrics, "moq_edge_sessions").is_some());
    // 3 % loss, 5 % of datagrams held back 10 ms (reordered), 1 % duplicated, each way.
    let impaired = Settings {
        loss: 0.03,
        reorder: 0.05,
        reorder_delay: Duration::from_millis(10),
        dup: 0.01,
        ..Settings::default()
    };
    let schedule = Schedule { base: impaired, phases: Vec::new() };
    let config = Config {
        listen: "127.0.0.1:0".parse().expect("an address"),
        upstream: format!("127.0.0.1:{port}").parse().expect("an address"),
        up: schedule.clone(),
        down: schedule,
        seed: 11,
        max_clients: 64,
    };
    let mut proxy = Proxy::bind(config).expect("the proxy binds");
    let through = proxy.local_addr().expect("its address");
    let stop = Arc::new(AtomicBool::new(false));
    let forwarding = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let until = Instant::now() + Duration::from_secs(120);
            proxy.run(&stop, Some(until), None, &mut std::io::sink()).expect("the proxy runs");
            proxy.stats()
        })
    };
    let json = std::env::temp_dir().join(format!("moq-edge-impaired-{}.json", std::process::id()));
    let out = Command::new(env!("CARGO_BIN_EXE_moq-bench"))
        .args(["fanout", "--relay", &format!("moqt://{through}")])
        .args(["--publish-relay", &format!("moqt://127.0.0.1:{port}")])
        .args(["--subscribers", "5", "--rate", "100", "--group-size", "10", "--subgroups", "2"])
        .args(["--duration", "4", "--warmup", "1", "--timeout-s", "60", "--quiet", "--json"])
        .arg(&json)
        .output()
        .expect("moq-bench runs");
    stop.store(true, Ordering::Relaxed);
    let (up, down) = forwarding.join().expect("the proxy thread");
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
    use moq_edge::client::{Publisher, Subscriber};
    use moq_edge::wire::model::{FullTrackName, TrackNamespace};
    use moq_edge::wire::Version;

    let (port, metrics) = (free_udp(), free_tcp());
    let _relay = Proc(
        Command::new(env!("CARGO_BIN_EXE_moq-edge"))
            .args(["--listen", &format!("127.0.0.1:{port}"), "--cores", "1", "--web", "off"])
            .args(["--metrics", &format!("127.0.0.1:{metrics}"), "--admission-busy-pct", "0"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("moq-edge starts"),
    );
    wait_for("the relay", Duration::from_secs(30), || metric(metrics, "moq_edge_sessions").is_some());
    let outage = Settings { outage: true, ..Settings::default() };
    let phases = vec![
        impair::Phase { at: Duration::from_millis(1500), settings: outage },
        impair::Phase { at: Duration::from_millis(4500), settings: Settings::default() },
    ];
    let schedule = Schedule::new(Settings::default(), phases);
    let config = Config {
        listen: "127.0.0.1:0".parse().expect("an address"),
        upstream: format!("127.0.0.1:{port}").parse().expect("an address"),
        up: schedule.clone(),
        down: schedule,
        seed: 5,
        max_clients: 8,
    };
    let mut proxy = Proxy::bind(config).expect("the proxy binds");
    let through = proxy.local_addr().expect("its address");
    let stop = Arc::new(AtomicBool::new(false));
    let forwarding = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let until = Instant::now() + Duration::from_secs(120);
            proxy.run(&stop, Some(until), None, &mut std::io::sink()).expect("the proxy runs");
        })
    };
    let deadline = || Instant::now() + Duration::from_secs(30);
    let t = FullTrackName { namespace: TrackNamespace::from_strs(&["outage"]), name: "video".into() };
    let relay: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().expect("an address");
    let mut p = Publisher::connect(relay, Version::Draft22, deadline()).expect("the publisher connects");
    p.add_track(t.clone());
    p.announce(t.namespace.clone(), deadline()).expect("announced");
    // One group of 3 objects every 100 ms, until told to stop; returns the time each was sent.
    let publishing = Arc::new(AtomicBool::new(true));
    let publisher = {
        let (t, publishing) = (t.clone(), publishing.clone());
        std::thread::spawn(move || {
            let mut sent = Vec::new();
            let mut group = 0;
            while publishing.load(Ordering::Relaxed) {
                if p.core().active(&t) > 0 {
                    let objects: Vec<bytes::Bytes> = (0..3).map(|o| vec![o as u8; 1000].into()).collect();
                    p.send_group(&t, group, &objects).expect("sent");
                    sent.push((group, Instant::now()));
                    group += 1;
                }
                p.pump(Instant::now() + Duration::from_millis(100)).expect("the publisher runs");
            }
            sent
        })
    };
    let mut s = Subscriber::connect(through, Version::Draft22, deadline()).expect("the subscriber connects");
    let id = s.subscribe(t.clone(), None, deadline()).expect("subscribed");
    let start = Instant::now();
    // Until well after the outage (which starts 1.5 s after the subscriber's first packet).
    s.pump(start + Duration::from_secs(8)).expect("the session survives the outage");
    publishing.store(false, Ordering::Relaxed);
    let sent = publisher.join().expect("the publisher thread");
    stop.store(true, Ordering::Relaxed);
    forwarding.join().expect("the proxy thread");
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
    let text = process::get(metrics, "/metrics").expect("the metrics");
    let ended = "moq_edge_subscriptions_ended_total{core=\"all\",reason=\"too_far_behind\"} 0";
    assert!(text.lines().any(|l| l == ended), "nothing ended TOO_FAR_BEHIND");
}
