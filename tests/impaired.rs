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
