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

/// The metric names in `expr` (a PromQL expression), each with the label names it selects on
/// or aggregates by (`instance`, which the scraper adds, left out).
fn metrics_in(expr: &str) -> Vec<(String, Vec<String>)> {
    let word = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let by: Vec<String> = expr
        .match_indices("by (")
        .filter_map(|(i, _)| expr[i + 4..].split_once(')').map(|(list, _)| list))
        .flat_map(|list| list.split(',').map(|l| l.trim().to_string()))
        .collect();
    let mut out = Vec::new();
    let mut rest = expr;
    while let Some(i) = rest.find("moq_edge_").or_else(|| rest.find("process_")) {
        let tail = &rest[i..];
        let end = tail.find(|c| !word(c)).unwrap_or(tail.len());
        let (name, after) = tail.split_at(end);
        let mut labels: Vec<String> = by.clone();
        if let Some(selector) = after.strip_prefix('{').and_then(|s| s.split_once('}')).map(|(s, _)| s) {
            labels.extend(selector.split(',').filter_map(|m| {
                let l = m.trim().split(['=', '!', '~']).next()?.trim();
                (!l.is_empty()).then(|| l.to_string())
            }));
        }
        labels.retain(|l| l != "instance");
        out.push((name.to_string(), labels));
        rest = after;
    }
    out
}

/// `deploy/grafana/moq-edge.json` queries only metrics the relay exports, by labels they
/// carry: a renamed metric or label would leave a panel empty without this.
#[test]
fn the_grafana_dashboard_queries_metrics_the_relay_exports() {
    let dashboard: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/grafana/moq-edge.json"))
            .expect("the dashboard"),
    )
    .expect("the dashboard is JSON");
    // A directory that is not there: its families are exported all the same.
    let (port, metrics, redis) = (free_udp(), free_tcp(), free_tcp());
    let _relay = Proc(
        Command::new(env!("CARGO_BIN_EXE_moq-edge"))
            .args(["--listen", &format!("127.0.0.1:{port}"), "--cores", "2"])
            .args(["--metrics", &format!("127.0.0.1:{metrics}")])
            .args(["--directory", &format!("redis://127.0.0.1:{redis}")])
            .args(["--advertise", &format!("moqt://127.0.0.1:{port}")])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("moq-edge starts"),
    );
    wait_for("the metrics endpoint", || {
        get(metrics, "/metrics").is_some_and(|r| r.starts_with("HTTP/1.1 200"))
    });
    let text = get(metrics, "/metrics").expect("metrics");
    // Each sample's name and its label names.
    let samples: Vec<(&str, Vec<&str>)> = text
        .lines()
        .filter(|l| l.starts_with("moq_edge_") || l.starts_with("process_"))
        .map(|l| {
            let name = l.split(['{', ' ']).next().unwrap_or("");
            let labels = l
                .split_once('{')
                .and_then(|(_, r)| r.split_once('}'))
                .map(|(ls, _)| ls.split(',').filter_map(|kv| kv.split_once('=').map(|(k, _)| k)).collect())
                .unwrap_or_default();
            (name, labels)
        })
        .collect();
    let panels = dashboard["panels"].as_array().expect("panels");
    let mut checked = 0;
    for panel in panels {
        for target in panel["targets"].as_array().into_iter().flatten() {
            let expr = target["expr"].as_str().expect("an expr");
            let found = metrics_in(expr);
            assert!(!found.is_empty(), "{}: no metric in {expr}", panel["title"]);
            for (name, labels) in found {
                let carriers: Vec<&Vec<&str>> =
                    samples.iter().filter(|(n, _)| *n == name).map(|(_, l)| l).collect();
                assert!(!carriers.is_empty(), "{}: {name} is not in /metrics", panel["title"]);
                for label in &labels {
                    assert!(
                        carriers.iter().any(|ls| ls.contains(&label.as_str())),
                        "{}: {name} has no label {label}",
                        panel["title"]
                    );
                }
                checked += 1;
            }
        }
    }
    assert!(checked >= 40, "only {checked} metric references checked");
}
