//! Operating the relay as an edge node: the metrics and health endpoint, JSON logs, qlog on
//! demand, and certificate reload on SIGHUP and on file change, against the real binary.

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use moq_edge::client::quic::QuicConn;

#[path = "support/process.rs"]
mod process;
use process::{free_tcp, free_udp, get, Proc};

fn wait_for(what: &str, f: impl FnMut() -> bool) {
    process::wait_for(what, Duration::from_secs(20), f)
}

/// Writes a new self-signed certificate and key; returns the certificate's fingerprint.
fn write_identity(cert: &Path, key: &Path) -> String {
    let ck = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).expect("a certificate");
    std::fs::write(key, ck.signing_key.serialize_pem()).expect("write key");
    std::fs::write(cert, ck.cert.pem()).expect("write cert");
    moq_edge::runtime::tls::fingerprint(ck.cert.der())
}

/// The fingerprint of the certificate the relay on `port` presents to a new connection.
fn served_fingerprint(port: u16) -> String {
    let peer = format!("127.0.0.1:{port}").parse().expect("addr");
    let mut conn = QuicConn::connect(peer, "moqt-16").expect("connect");
    conn.handshake(Instant::now() + Duration::from_secs(5)).expect("handshake");
    let der = conn.conn().peer_cert().expect("a certificate").to_vec();
    let _ = conn.close();
    moq_edge::runtime::tls::fingerprint(&der)
}

#[test]
fn metrics_health_json_logs_qlog_and_certificate_reload() {
    let dir = std::env::temp_dir().join(format!("moq-edge-ops-{}", std::process::id()));
    let qlog = dir.join("qlog");
    std::fs::create_dir_all(&qlog).expect("tmp dirs");
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    let first = write_identity(&cert, &key);
    let (port, metrics) = (free_udp(), free_tcp());
    let relay = Proc(
        Command::new(env!("CARGO_BIN_EXE_moq-edge"))
            .args(["--listen", &format!("127.0.0.1:{port}"), "--cores", "1"])
            .args(["--metrics", &format!("127.0.0.1:{metrics}"), "--log-format", "json"])
            .arg("--cert")
            .arg(&cert)
            .arg("--key")
            .arg(&key)
            .arg("--qlog-dir")
            .arg(&qlog)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("moq-edge starts"),
    );
    wait_for("the metrics endpoint", || {
        get(metrics, "/healthz").is_some_and(|r| r.starts_with("HTTP/1.1 200"))
    });
    assert!(get(metrics, "/readyz").is_some_and(|r| r.starts_with("HTTP/1.1 200") && r.ends_with("ready\n")));
    assert!(get(metrics, "/nothing").is_some_and(|r| r.starts_with("HTTP/1.1 404")));

    // A connection: the counters move, and its qlog is written.
    assert_eq!(served_fingerprint(port), first);
    let accepted = |text: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix("moq_edge_connections_accepted_total{core=\"all\"} "))
            .and_then(|v| v.trim().parse::<u64>().ok())
    };
    let text = get(metrics, "/metrics").expect("metrics");
    assert!(text.starts_with("HTTP/1.1 200") && text.contains("text/plain; version=0.0.4"), "{text}");
    assert!(accepted(&text).is_some_and(|n| n >= 1), "{text}");
    for family in ["moq_edge_sessions", "moq_edge_relay_delay_seconds_bucket", "moq_edge_resets_total"] {
        assert!(text.contains(family), "{family} missing:\n{text}");
    }
    wait_for("a qlog file", || {
        std::fs::read_dir(&qlog).into_iter().flatten().flatten().any(|e| {
            e.path().extension().is_some_and(|x| x == "sqlog") && e.metadata().is_ok_and(|m| m.len() > 0)
        })
    });

    // SIGHUP: new connections get the new certificate.
    let second = write_identity(&cert, &key);
    let pid = relay.0.id().to_string();
    let signal = |sig: &str| Command::new("kill").args([sig, &pid]).status().expect("kill runs").success();
    assert!(signal("-HUP"));
    wait_for("the reloaded certificate", || served_fingerprint(port) == second);

    // A changed file is noticed without a signal (checked every 2 s).
    std::thread::sleep(Duration::from_millis(1100)); // a different modification time
    let third = write_identity(&cert, &key);
    wait_for("the certificate from the changed file", || served_fingerprint(port) == third);

    // Stop it and read its log: one JSON object per line, the reloads among them.
    let mut relay = relay;
    assert!(signal("-TERM"));
    let mut err = String::new();
    if let Some(mut e) = relay.0.stderr.take() {
        let _ = e.read_to_string(&mut err);
    }
    let _ = relay.0.wait();
    let lines: Vec<serde_json::Value> = err
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not a JSON log line ({e}): {l}")))
        .collect();
    assert!(lines.iter().all(|l| l["level"].is_string() && l["fields"].is_object()), "{err}");
    let reloads =
        lines.iter().filter(|l| l["fields"]["message"] == "TLS certificate reloaded; sessions stay up");
    assert!(reloads.count() >= 2, "{err}");
    std::fs::remove_dir_all(&dir).ok();
}
