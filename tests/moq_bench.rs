//! moq-bench against the relay (in this process, 2 cores, loopback): each scenario runs end to
//! end, its integrity figures are exact for a relay that loses nothing, and the JSON carries
//! the keys scripts rely on. Behaviour only: no figure of speed is asserted.
#![allow(clippy::unwrap_used)]

use std::path::PathBuf;
use std::process::Command;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use moq_edge::host::RelayFactory;
use moq_edge::relay::RelayConfig;
use moq_edge::runtime::{self, RuntimeConfig, ServerHandle};
use moq_edge::session::SessionConfig;
use moq_edge::websocket::WebSocketSink;
use moq_edge::wire::Version;
use serde_json::Value;

/// The tests of this file run one at a time: each loads both cores (relay and generator), and
/// run together on a small machine the edge test's joiners could be set up so late that its
/// run ends before their first object.
fn one_at_a_time() -> MutexGuard<'static, ()> {
    static ONE: Mutex<()> = Mutex::new(());
    ONE.lock().unwrap_or_else(PoisonError::into_inner)
}

fn relay() -> ServerHandle {
    relay_with(2, |_| {})
}

/// A relay on `cores` unpinned cores, its runtime configuration adjusted by `tune`.
fn relay_with(cores: usize, tune: impl FnOnce(&mut RuntimeConfig)) -> ServerHandle {
    let mut rc = RuntimeConfig::new(([127, 0, 0, 1], 0).into(), cores);
    rc.pin = false;
    tune(&mut rc);
    let config = RelayConfig { linger: Duration::from_millis(50), ..RelayConfig::default() };
    runtime::start(rc, Arc::new(RelayFactory::new(config, SessionConfig::default(), &[9; 32]))).unwrap()
}

fn json_path(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("moq-bench-test-{}-{name}.json", std::process::id()))
}

/// Runs moq-bench with `args` against `relay`; returns (exit code, stdout, the JSON).
fn bench(relay: &ServerHandle, name: &str, args: &[&str]) -> (i32, String, Value) {
    let json = json_path(name);
    let out = Command::new(env!("CARGO_BIN_EXE_moq-bench"))
        .args(args)
        .args(["--relay", &format!("moqt://{}", relay.local_addr())])
        .args(["--quiet", "--timeout-s", "20", "--json"])
        .arg(&json)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let value = std::fs::read_to_string(&json)
        .map(|t| serde_json::from_str(&t).unwrap())
        .unwrap_or_else(|_| panic!("no JSON from {args:?}; stdout:\n{stdout}\nstderr:\n{stderr}"));
    let _ = std::fs::remove_file(&json);
    (out.status.code().unwrap_or(-1), stdout, value)
}

/// Nothing lost, duplicated or reordered.
fn assert_intact(v: &Value) {
    assert_eq!((u(v, "lost"), u(v, "duplicated"), u(v, "reordered")), (0, 0, 0), "{v}");
}

fn u(v: &Value, key: &str) -> u64 {
    v[key].as_u64().unwrap_or_else(|| panic!("{key} missing in {v}"))
}

#[test]
fn fanout_counts_every_object_in_every_draft() {
    let _alone = one_at_a_time();
    let relay = relay();
    // Each draft with one of the congestion controls the bench's connections may use.
    let ccs = ["cubic", "reno", "bbr2"];
    for (i, draft) in ["14", "16", "18", "20", "22"].into_iter().enumerate() {
        // 3 tracks from 2 publishers, 4 subscribers each, 100 objects/s: 1.0 s warm-up and
        // 1.0 s measured, so each subscription is accountable for objects 100..200.
        let (code, stdout, v) = bench(
            &relay,
            &format!("fanout-{draft}"),
            &[
                "fanout",
                "--draft",
                draft,
                "--congestion-control",
                ccs[i % ccs.len()],
                "--publishers",
                "2",
                "--tracks",
                "3",
                "--subscribers",
                "4",
                "--rate",
                "100",
                "--group-size",
                "7",
                "--object-size",
                "300",
                "--warmup",
                "1",
                "--duration",
                "1",
                "--threads",
                "2",
                "--relay-pid",
                &std::process::id().to_string(),
            ],
        );
        assert_eq!(code, 0, "{stdout}");
        assert!(stdout.contains("=> OK"), "{stdout}");
        assert_eq!(u(&v, "subscriber_sessions"), 12);
        assert_eq!(u(&v, "expected"), 12 * 100);
        assert_intact(&v);
        assert_eq!(u(&v, "malformed"), 0);
        assert_eq!(u(&v, "publisher_objects_sent"), 3 * 200);
        // By receive time: about one second's worth for 12 subscriptions.
        let delivered = u(&v, "delivered_objects");
        assert!((600..=1800).contains(&delivered), "{delivered}");
        assert_eq!(u(&v, "delivered_bytes"), delivered * 300);
        let latency = &v["latency_us"];
        assert_eq!(latency["count"].as_u64(), Some(1200));
        for key in ["p50", "p90", "p99", "p999", "max"] {
            assert!(latency[key].as_u64().is_some_and(|x| x > 0), "{key} in {latency}");
        }
        assert!(latency["p50"].as_u64() <= latency["max"].as_u64());
        // The relay is this process: its CPU time and memory were read from /proc.
        assert!(v["relay_cpu_s"].as_f64().is_some_and(|s| s > 0.0), "{v}");
        assert!(u(&v, "relay_rss_max_bytes") > 0);
        // The draft's ALPN: draft-14's is moq-00 (its version is agreed in SETUP).
        let alpn = if draft == "14" { "moq-00".to_string() } else { format!("moqt-{draft}") };
        assert_eq!(v["draft"].as_str(), Some(alpn.as_str()));
    }
    relay.shutdown().unwrap();
}

#[test]
fn many_tracks_datagrams_and_late_join() {
    let _alone = one_at_a_time();
    let relay = relay();
    // Every subscriber takes all 4 tracks.
    let (code, stdout, v) = bench(
        &relay,
        "tracks",
        &[
            "tracks",
            "--tracks",
            "4",
            "--subscribers",
            "3",
            "--rate",
            "50",
            "--warmup",
            "0.5",
            "--duration",
            "1",
        ],
    );
    assert_eq!(code, 0, "{stdout}");
    assert_eq!(u(&v, "subscriber_sessions"), 3);
    assert_eq!(u(&v, "expected"), 3 * 4 * 50);
    assert_intact(&v);

    // Datagrams: losses would be allowed, but a loopback relay loses none of these few.
    let (code, stdout, v) = bench(
        &relay,
        "datagrams",
        &[
            "fanout",
            "--draft",
            "22",
            "--datagrams",
            "--subscribers",
            "3",
            "--rate",
            "50",
            "--warmup",
            "0.5",
            "--duration",
            "1",
        ],
    );
    assert_eq!(code, 0, "{stdout}");
    assert!(stdout.contains("datagrams"));
    assert_eq!(v["datagrams"].as_bool(), Some(true));
    assert_eq!(u(&v, "duplicated"), 0);

    // Three subgroup streams per group (objects round robin): every object, in order within
    // each stream, in drafts 16 and 22.
    for draft in ["16", "22"] {
        let (code, stdout, v) = bench(
            &relay,
            &format!("subgroups-{draft}"),
            &[
                "fanout",
                "--draft",
                draft,
                "--subgroups",
                "3",
                "--group-size",
                "9",
                "--subscribers",
                "3",
                "--rate",
                "90",
                "--warmup",
                "0.5",
                "--duration",
                "1",
            ],
        );
        assert_eq!(code, 0, "{stdout}");
        assert_eq!(u(&v, "subgroups"), 3);
        assert_eq!(u(&v, "expected"), 3 * 90);
        assert_intact(&v);
    }

    // Late joiners: 6 subscribers join during the window; each gets objects from its join on
    // (counted between its first and last object) and a join time.
    let (code, stdout, v) = bench(
        &relay,
        "late-join",
        &[
            "late-join",
            "--subscribers",
            "6",
            "--rate",
            "50",
            "--group-size",
            "10",
            "--warmup",
            "0.5",
            "--duration",
            "2",
        ],
    );
    assert_eq!(code, 0, "{stdout}");
    assert_eq!(u(&v, "joins"), 6);
    assert_eq!(v["join_us"]["count"].as_u64(), Some(6), "{v}");
    assert_eq!(v["subscribe_ok_us"]["count"].as_u64(), Some(6));
    assert!(u(&v, "expected") > 0);
    assert_intact(&v);
    // Without a cache a joiner starts at the next object: it misses the rest of the group
    // in progress (at most group size - 1 objects each).
    assert!(u(&v, "missed_in_group") <= 6 * 9);
    relay.shutdown().unwrap();
}

#[test]
fn churn_reconnects_in_waves() {
    let _alone = one_at_a_time();
    let relay = relay();
    let (code, stdout, v) = bench(
        &relay,
        "churn",
        &[
            "churn",
            "--draft",
            "22",
            "--subscribers",
            "4",
            "--threads",
            "2",
            "--rate",
            "50",
            "--hold-ms",
            "300",
            "--warmup",
            "0.2",
            "--duration",
            "1",
        ],
    );
    assert_eq!(code, 0, "{stdout}");
    // Waves of 2 per thread, each lasting at least 300 ms, over 1.2 s: several waves.
    let sessions = u(&v, "sessions_opened");
    assert!(sessions >= 8 && sessions.is_multiple_of(2), "{sessions}");
    assert_eq!(u(&v, "joins"), sessions);
    assert_eq!(v["subscribe_ok_us"]["count"].as_u64(), Some(sessions), "{v}");
    assert_eq!(u(&v, "subscribe_errors"), 0);
    assert_intact(&v);
    relay.shutdown().unwrap();
}

#[test]
fn bad_arguments_and_unreachable_relays_fail_with_status_2() {
    let _alone = one_at_a_time();
    let run = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_moq-bench")).args(args).output().unwrap();
        (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    let (code, err) = run(&["fanout", "--publishers", "3", "--tracks", "2"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--publishers"), "{err}");
    let (code, err) = run(&["fanout", "--object-size", "8"]);
    assert_eq!(code, Some(2), "{err}");
    let (code, err) = run(&["fanout", "--congestion-control", "warp-drive"]);
    assert_eq!(code, Some(2), "{err}");
    // Nobody listens there: the connection attempt times out.
    let (code, err) = run(&["fanout", "--relay", "moqt://127.0.0.1:9", "--timeout-s", "1", "--quiet"]);
    assert_eq!(code, Some(2), "{err}");
    let (_, help) = {
        let out = Command::new(env!("CARGO_BIN_EXE_moq-bench")).args(["fanout", "--help"]).output().unwrap();
        (out.status.code(), String::from_utf8_lossy(&out.stdout).into_owned())
    };
    for flag in ["--relay", "--draft", "--subscribers", "--object-size", "--rate", "--relay-pid", "--json"] {
        assert!(help.contains(flag), "{flag} missing from --help");
    }
}

/// Send coalescing (`RuntimeConfig::send_coalesce`), on whatever the load (threshold 0): a
/// subscriber's packets wait and leave together as GSO trains, and nothing is lost,
/// duplicated or reordered; without it, the same stream (one object per turn) leaves a
/// packet at a time.
#[test]
fn coalesced_sends_leave_in_trains_and_lose_nothing() {
    let _alone = one_at_a_time();
    let run = |coalesce: Duration| {
        let relay = relay_with(1, |rc| (rc.send_coalesce, rc.coalesce_busy_pct) = (coalesce, 0));
        let args = ["fanout", "--subscribers", "2", "--rate", "400", "--object-size", "1000"];
        let (code, _, v) =
            bench(&relay, "coalesce", &[&args[..], &["--warmup", "1", "--duration", "2"]].concat());
        assert_eq!(code, 0, "{v}");
        assert_intact(&v);
        let trains =
            relay.stats().iter().map(|s| s.gso_sends.load(std::sync::atomic::Ordering::Relaxed)).sum::<u64>();
        relay.shutdown().unwrap();
        trains
    };
    let (held, at_once) = (run(Duration::from_millis(5)), run(Duration::ZERO));
    eprintln!("gso trains: {held} held, {at_once} at once");
    assert!(held > at_once, "trains of several packets: {held} held, {at_once} without coalescing");
}

/// Receive coalescing (`RuntimeConfig::recv_coalesce`): once datagrams come fast enough that a
/// hold gathers several, a core that has read some sleeps before it reads again, so each read
/// takes several datagrams at once; nothing is lost, duplicated or reordered. Without it, the
/// same load is read about a datagram at a time.
#[test]
fn coalesced_receives_gather_datagrams_and_lose_nothing() {
    let _alone = one_at_a_time();
    let run = |hold: Duration| {
        let relay = relay_with(1, |rc| rc.recv_coalesce = hold);
        let args = ["fanout", "--subscribers", "2", "--rate", "1000", "--object-size", "1000"];
        let (code, _, v) =
            bench(&relay, "recv-coalesce", &[&args[..], &["--warmup", "1", "--duration", "3"]].concat());
        assert_eq!(code, 0, "{v}");
        assert_intact(&v);
        let sum = |f: fn(&moq_edge::runtime::ShardStats) -> &std::sync::atomic::AtomicU64| {
            relay.stats().iter().map(|s| f(s).load(std::sync::atomic::Ordering::Relaxed)).sum::<u64>()
        };
        let (datagrams, reads) = (sum(|s| &s.datagrams_in), sum(|s| &s.recv_batches));
        relay.shutdown().unwrap();
        datagrams as f64 / reads.max(1) as f64
    };
    // 5 ms at about 2,000 datagrams a second (the publisher's packets and the subscribers'
    // ACKs) gathers about ten; the first second, before the rate is known, is read as it
    // comes (about one datagram a read), so the whole run's average is lower.
    let (held, at_once) = (run(Duration::from_millis(5)), run(Duration::ZERO));
    eprintln!("datagrams per read: {held:.2} held, {at_once:.2} at once");
    assert!(held > at_once, "reads gather more when held: {held:.2} held, {at_once:.2} at once");
    assert!(held >= 2.0, "a 5 ms hold gathers several datagrams per read: {held:.2}");
}

/// A relay on two cores with its web listener at the same port, so that viewers reach it over
/// raw QUIC, WebTransport and QMux over a WebSocket.
fn relay_with_web() -> ServerHandle {
    let server = relay();
    let reloader = server.tls_reloader();
    let sha = reloader.identity().sha256;
    let sources = moq_edge::web::Sources {
        certificate: Arc::new(move || sha),
        https: Some(Arc::new(move || reloader.https_context())),
        websocket: Some(WebSocketSink::new(server.stream_acceptor(), &Version::ALL)),
        side_door: None,
        auth: None,
        admission: None,
    };
    moq_edge::web::serve(server.local_addr(), sources).unwrap();
    server
}

/// A small edge's day: 20 broadcasts of video and audio, 100 viewers spread by Zipf over
/// three transports and three drafts, churn, a crowd of 100: nothing lost, duplicated or
/// reordered, every joiner set up, subscribed and sent its first object, and the relay's
/// memory read at each phase. (Rates and sizes are low so that a debug build among other
/// tests keeps up: this checks behaviour, not speed.)
#[test]
fn edge_day_in_miniature_loses_nothing_and_serves_every_joiner() {
    let _alone = one_at_a_time();
    let relay = relay_with_web();
    let pid = std::process::id().to_string();
    let (code, stdout, v) = bench(
        &relay,
        "edge",
        &[
            "edge",
            "--broadcasts",
            "20",
            "--viewers",
            "100",
            "--video-rate",
            "10",
            "--gop",
            "10",
            "--keyframe-size",
            "4000",
            "--frame-size",
            "800",
            "--audio-rate",
            "10",
            "--audio-group",
            "2",
            "--audio-size",
            "100",
            "--transports",
            "quic,webtransport,websocket",
            "--drafts",
            "14,16,22",
            "--churn",
            "5",
            "--hold-s",
            "2",
            "--crowd",
            "100",
            "--crowd-at-s",
            "2",
            "--warmup",
            "1",
            "--duration",
            "8",
            "--relay-pid",
            &pid,
        ],
    );
    assert_eq!(code, 0, "{stdout}");
    assert_intact(&v);
    assert_eq!((u(&v, "malformed"), u(&v, "subscribe_errors")), (0, 0), "{v}");
    // Every broadcast has viewers (20 broadcasts, 100 viewers: the least watched gets one).
    assert_eq!(u(&v, "watched"), 20);
    // Churn: one arrival every 200 ms until 1 + 8 - 2 - 1 s; the crowd: 100.
    assert_eq!(u(&v, "joiners"), 30 + 100, "{v}");
    assert_eq!((u(&v, "failed_connects"), u(&v, "joiners_without_object")), (0, 0), "{v}");
    assert_eq!(v["setup_crowd_us"]["count"].as_u64(), Some(100), "{v}");
    assert_eq!(v["join_crowd_us"]["count"].as_u64(), Some(100), "{v}");
    assert_eq!(v["join_churn_us"]["count"].as_u64(), Some(30), "{v}");
    // The steady viewers' latency is split around the crowd's arrival.
    assert!(v["latency_before_crowd_us"]["count"].as_u64().unwrap() > 0, "{v}");
    assert!(v["latency_during_crowd_us"]["count"].as_u64().unwrap() > 0, "{v}");
    assert!(u(&v, "expected") > 0 && u(&v, "delivered_objects") > 0, "{v}");
    // The relay here is this process: its memory was read at every phase.
    let rss = &v["relay_rss"];
    for phase in ["idle", "announced", "connected", "subscribed", "max"] {
        assert!(rss[phase].as_u64().unwrap() > 0, "{phase}: {v}");
    }
    relay.shutdown().unwrap();
}
