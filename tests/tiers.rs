//! Three relay processes on loopback, each with its own executor: an origin and two edges
//! whose upstream it is. A publisher on edge A, 100 subscribers on edge B: every object
//! arrives, in order, through A → origin → B; the origin carries exactly one subscription for
//! the track, whatever the number of subscribers on B. Then the origin is killed and started
//! again: the edges reconnect, A announces again, B subscribes again, and a subscriber on B
//! that stayed connected receives objects published after the restart.
//!
//! And a graceful switchover: an origin that drains names its successor in GOAWAY; both edges
//! move there without a gap and the old origin exits once they have.

use std::net::{SocketAddr, ToSocketAddrs};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[path = "support/process.rs"]
mod process;
use process::{free_tcp, free_udp, get, metric, wait_for, Proc};

/// Serializes this file's tests: each runs several relays and clients on a 2-CPU machine.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// A relay on one core; an edge (with `upstream`) drains for up to 60 s on SIGTERM.
fn relay(port: u16, metrics: u16, upstream: Option<u16>) -> Proc {
    let drain = if upstream.is_some() { 60_000 } else { 0 };
    relay_with(SocketAddr::from(([127, 0, 0, 1], port)), metrics, upstream, drain, None)
}

/// A relay on one core listening on `listen` that drains for `drain_ms` on SIGTERM, naming
/// `successor` (a `moqt://` URL) in its GOAWAY.
fn relay_with(
    listen: SocketAddr,
    metrics: u16,
    upstream: Option<u16>,
    drain_ms: u64,
    successor: Option<&str>,
) -> Proc {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_moq-edge"));
    let drain = drain_ms.to_string();
    cmd.args(["--listen", &listen.to_string(), "--cores", "1", "--goaway-timeout-ms", &drain])
        .args(["--metrics", &format!("127.0.0.1:{metrics}"), "--cache-mib", "16"])
        // Admission under load follows how busy the machine running the tests is; these tests
        // are about relaying (ARCHITECTURE.md, "Admission under load").
        .args(["--admission-busy-pct", "0"])
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    if let Some(up) = upstream {
        cmd.args(["--upstream", &format!("moqt://127.0.0.1:{up}"), "--upstream-insecure", "true"]);
    }
    if let Some(next) = successor {
        cmd.args(["--goaway-uri", next]);
    }
    Proc(cmd.spawn().expect("moq-edge starts"))
}

/// moq-pub on the relay at port `publish_on` (track live/cam/v, 3000 objects, `pub_args`),
/// and half a second later moq-sub for 400 of its objects on the relay at `subscribe_on`
/// (`sub_args`; its output piped).
fn publisher_and_subscriber_start(
    publish_on: u16,
    subscribe_on: u16,
    pub_args: &[&str],
    sub_args: &[&str],
) -> (Proc, std::process::Child) {
    let track = ["--namespace", "live/cam", "--track", "v"];
    let publisher = Proc(
        Command::new(env!("CARGO_BIN_EXE_moq-pub"))
            .args(["--relay", &format!("127.0.0.1:{publish_on}")])
            .args(track)
            .args(["--count", "3000"])
            .args(pub_args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("moq-pub starts"),
    );
    std::thread::sleep(Duration::from_millis(500));
    let subscriber = Command::new(env!("CARGO_BIN_EXE_moq-sub"))
        .args(["--relay", &format!("127.0.0.1:{subscribe_on}")])
        .args(track)
        .args(["--count", "400", "--timeout-s", "60"])
        .args(sub_args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("moq-sub starts");
    (publisher, subscriber)
}

#[test]
fn edge_to_origin_to_edge_relays_every_object_once_and_recovers_from_an_origin_restart() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (p_origin, p_a, p_b) = (free_udp(), free_udp(), free_udp());
    let (m_origin, m_a, m_b) = (free_tcp(), free_tcp(), free_tcp());
    let mut origin = relay(p_origin, m_origin, None);
    let _a = relay(p_a, m_a, Some(p_origin));
    let mut b = relay(p_b, m_b, Some(p_origin));
    let links_up = |m| metric(m, "moq_edge_upstream_links_up") == Some(1);
    wait_for("both edges' links to the origin", Duration::from_secs(30), || links_up(m_a) && links_up(m_b));
    let ready = get(m_origin, "/readyz").unwrap_or_default();
    assert!(ready.starts_with("HTTP/1.1 200") && ready.ends_with("ready\n"), "{ready}");

    // 1 publisher on A, 100 subscribers on B, one track.
    let json = std::env::temp_dir().join(format!("moq-edge-tiers-{}.json", std::process::id()));
    let mut bench = Command::new(env!("CARGO_BIN_EXE_moq-bench"))
        .args(["fanout", "--relay", &format!("moqt://127.0.0.1:{p_b}")])
        .args(["--publish-relay", &format!("moqt://127.0.0.1:{p_a}")])
        .args(["--subscribers", "100", "--rate", "30", "--warmup", "1", "--duration", "4", "--quiet"])
        .arg("--json")
        .arg(&json)
        .stdout(Stdio::piped())
        .spawn()
        .expect("moq-bench starts");
    // While it runs: the origin has exactly one subscription (B's), and one upstream (to A).
    let mut seen = Vec::new();
    let end = Instant::now() + Duration::from_secs(60);
    while Instant::now() < end && bench.try_wait().ok().flatten().is_none() {
        if let (Some(subs), Some(ups)) =
            (metric(m_origin, "moq_edge_subscriptions"), metric(m_origin, "moq_edge_upstream_subscriptions"))
        {
            seen.push((subs, ups));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let out = bench.wait_with_output().expect("moq-bench ends");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "moq-bench found lost, duplicated or reordered objects:\n{text}");
    let results: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("the bench's JSON")).expect("JSON");
    std::fs::remove_file(&json).ok();
    let n = |k: &str| results[k].as_u64().unwrap_or(u64::MAX);
    assert_eq!(
        (n("lost"), n("duplicated"), n("reordered"), n("subscribe_errors")),
        (0, 0, 0, 0),
        "{results:#}"
    );
    assert!(n("delivered_objects") >= 100 * 30 * 3, "about 100 × 30/s × 4 s objects:\n{results:#}");
    // ("delivered" counts arrivals inside the measured window, "expected" what was sent in it:
    // they differ by the objects in flight at its edges; lost/duplicated/reordered are exact.)
    assert!(seen.contains(&(1, 1)), "the origin carried one subscription and one upstream: {seen:?}");
    assert!(seen.iter().all(|&(subs, ups)| subs <= 1 && ups <= 1), "never more than one per track: {seen:?}");
    assert!(metric(m_b, "moq_edge_objects_out_total").is_some_and(|n| n > 0));

    // Kill the origin (no CONNECTION_CLOSE) while a publisher on A and a subscriber on B run,
    // and start it again on the same port: the subscriber gets objects published after it.
    let (mut publisher, subscriber) = publisher_and_subscriber_start(p_a, p_b, &["--rate", "50"], &[]);
    std::thread::sleep(Duration::from_secs(2));
    let _ = origin.0.kill();
    let _ = origin.0.wait();
    std::thread::sleep(Duration::from_millis(500));
    let restarted_at = Instant::now();
    origin = relay(p_origin, m_origin, None);
    wait_for("the edges to reconnect", Duration::from_secs(30), || links_up(m_a) && links_up(m_b));
    let out = subscriber.wait_with_output().expect("moq-sub ends");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the subscriber did not get 400 objects:\n{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // 400 objects at 50/s take 8 s; about 2.5 s of them came before the kill, so most came
    // through the restarted origin.
    assert!(restarted_at.elapsed() > Duration::from_secs(2), "objects arrived after the restart");
    assert!(metric(m_origin, "moq_edge_subscriptions") == Some(1), "B subscribed again at the new origin");
    let _ = publisher.0.kill();

    // SIGTERM on B, whose subscribers are gone: it closes its link and exits without waiting
    // out its 60 s drain (the link serves clients; it does not hold the relay up).
    wait_for("B's subscriber sessions to end", Duration::from_secs(40), || {
        metric(m_b, "moq_edge_sessions") == Some(1)
    });
    let pid = b.0.id().to_string();
    assert!(Command::new("kill").args(["-TERM", &pid]).status().expect("kill runs").success());
    wait_for("B to exit", Duration::from_secs(30), || b.0.try_wait().ok().flatten().is_some());
    drop(origin);
}

/// The origin drains (SIGTERM) and names its successor in GOAWAY, while a publisher on edge A
/// and a subscriber on edge B run: both edges connect to the successor, A announces there, B
/// subscribes there and moves the track at a group boundary, and both close their old links
/// once nothing is left on them, so the old origin exits long before its 30 s drain is over.
/// The subscriber sees every object once, in order: no gap, no stream reset.
#[test]
fn an_origins_goaway_moves_the_edges_to_its_successor_without_a_gap() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (p_old, p_new, p_a, p_b) = (free_udp(), free_udp(), free_udp(), free_udp());
    let (m_old, m_new, m_a, m_b) = (free_tcp(), free_tcp(), free_tcp(), free_tcp());
    // The successor is named by host name ("localhost"), which the edges resolve off their
    // cores; it listens on the address that name resolves to first here.
    let first = ("localhost", p_new).to_socket_addrs().ok().and_then(|mut a| a.next());
    let new_addr = first.expect("localhost resolves");
    let _new = relay_with(new_addr, m_new, None, 0, None);
    let successor = format!("moqt://localhost:{p_new}");
    let old_addr = SocketAddr::from(([127, 0, 0, 1], p_old));
    let mut old = relay_with(old_addr, m_old, None, 30_000, Some(&successor));
    let _a = relay(p_a, m_a, Some(p_old));
    let _b = relay(p_b, m_b, Some(p_old));
    let links_up = |m| metric(m, "moq_edge_upstream_links_up") == Some(1);
    wait_for("both edges' links to the origin", Duration::from_secs(30), || links_up(m_a) && links_up(m_b));

    // Groups of 10 objects at 50/s: a group boundary every 200 ms.
    let pub_args = ["--rate", "50", "--group-size", "10"];
    let (mut publisher, subscriber) = publisher_and_subscriber_start(p_a, p_b, &pub_args, &["--quiet"]);
    wait_for("the subscription through the old origin", Duration::from_secs(30), || {
        metric(m_old, "moq_edge_subscriptions") == Some(1)
    });
    std::thread::sleep(Duration::from_secs(1));
    let pid = old.0.id().to_string();
    assert!(Command::new("kill").args(["-TERM", &pid]).status().expect("kill runs").success());
    let drained_at = Instant::now();
    wait_for("the old origin to exit (its edges moved away)", Duration::from_secs(20), || {
        old.0.try_wait().ok().flatten().is_some()
    });
    let drain_took = drained_at.elapsed();
    let out = subscriber.wait_with_output().expect("moq-sub ends");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "moq-sub failed:\n{text}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains("received 400 objects"), "{text}");
    assert!(
        text.contains("gaps 0 (0 missing), late/duplicate 0, streams reset 0"),
        "every object once, in order, no stream cut short:\n{text}"
    );
    assert!(metric(m_new, "moq_edge_subscriptions") == Some(1), "B's subscription is at the new origin");
    assert!(links_up(m_a) && links_up(m_b), "each edge has one link, to the new origin");
    assert_eq!(metric(m_b, "moq_edge_upstream_moves_total"), Some(1), "B moved its one track");
    let _ = publisher.0.kill();
    eprintln!("the old origin exited {:.1} s after SIGTERM", drain_took.as_secs_f64());
}
