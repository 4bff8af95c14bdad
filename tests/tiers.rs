//! Three relay processes on loopback, each with its own executor: an origin and two edges
//! whose upstream it is. A publisher on edge A, 100 subscribers on edge B: every object
//! arrives, in order, through A → origin → B; the origin carries exactly one subscription for
//! the track, whatever the number of subscribers on B. Then the origin is killed and started
//! again: the edges reconnect, A announces again, B subscribes again, and a subscriber on B
//! that stayed connected receives objects published after the restart.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[path = "support/process.rs"]
mod process;
use process::{free_tcp, free_udp, get, metric, wait_for, Proc};

/// A relay on one core; an edge (with `upstream`) drains for up to 60 s on SIGTERM.
fn relay(port: u16, metrics: u16, upstream: Option<u16>) -> Proc {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_moq-edge"));
    let drain = if upstream.is_some() { "60000" } else { "0" };
    cmd.args(["--listen", &format!("127.0.0.1:{port}"), "--cores", "1", "--goaway-timeout-ms", drain])
        .args(["--metrics", &format!("127.0.0.1:{metrics}"), "--cache-mib", "16"])
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    if let Some(up) = upstream {
        cmd.args(["--upstream", &format!("moqt://127.0.0.1:{up}"), "--upstream-insecure", "true"]);
    }
    Proc(cmd.spawn().expect("moq-edge starts"))
}

#[test]
fn edge_to_origin_to_edge_relays_every_object_once_and_recovers_from_an_origin_restart() {
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
    let mut publisher = Proc(
        Command::new(env!("CARGO_BIN_EXE_moq-pub"))
            .args(["--relay", &format!("127.0.0.1:{p_a}"), "--namespace", "live/cam", "--track", "v"])
            .args(["--rate", "50", "--count", "3000"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("moq-pub starts"),
    );
    std::thread::sleep(Duration::from_millis(500));
    let subscriber = Command::new(env!("CARGO_BIN_EXE_moq-sub"))
        .args(["--relay", &format!("127.0.0.1:{p_b}"), "--namespace", "live/cam", "--track", "v"])
        .args(["--count", "400", "--timeout-s", "60"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("moq-sub starts");
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
