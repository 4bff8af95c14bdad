//! Admission by HTTP against the binary (`--auth http`, README.md "Admission by HTTP"): a
//! platform's service (a small server here, on loopback) admits each session by its tokens.
//! Allowed publishers and viewers work over raw QUIC, WebTransport (the token in the URL) and
//! a WebSocket; a viewer whose grant does not cover the track gets UNAUTHORIZED, a session
//! the service refuses is closed; a revoked viewer is ended at revalidation; with the service
//! down, what it allowed before stays allowed and nothing new is; a thousand SUBSCRIBEs cost
//! the service nothing more than their session's question.

#![allow(clippy::unwrap_used)]

use std::collections::HashSet;
use std::io::Write;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use moq_edge::client::{ClientError, Subscriber};
use moq_edge::wire::model::{AuthToken, FullTrackName, SetupOptions, TrackNamespace};
use moq_edge::wire::Version;
use serde_json::{json, Value};

#[path = "support/process.rs"]
mod process;
use process::{free_tcp, free_udp, Proc};

/// The platform's service: each token's grant; revoked tokens are refused; while `down` it
/// answers 503.
#[derive(Default)]
struct Service {
    posts: AtomicU64,
    /// POSTs by the first token they carry.
    by_token: Mutex<std::collections::HashMap<String, u64>>,
    revoked: Mutex<HashSet<String>>,
    down: AtomicBool,
}

impl Service {
    fn start() -> (Arc<Service>, u16) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let me = Arc::new(Service::default());
        let service = me.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let _ = service.answer(stream);
            }
        });
        (me, port)
    }

    /// What the platform says about a session with `tokens`.
    fn decide(&self, tokens: &[String]) -> Value {
        let revoked = self.revoked.lock().unwrap();
        let grant = |publish: &[&str], subscribe: &[&str]| json!({"allow": true, "publish": publish, "subscribe": subscribe, "ttl_s": 1});
        for t in tokens.iter().filter(|t| !revoked.contains(*t)) {
            match t.as_str() {
                "pub-live" => return grant(&["live"], &[]),
                "viewer-live" | "viewer-revoked" => return grant(&[], &["live"]),
                "viewer-news" => return grant(&[], &["news"]),
                "viewer-many" => {
                    return json!({"allow": true, "publish": [], "subscribe": ["live"], "ttl_s": 3600})
                }
                _ => {}
            }
        }
        json!({"allow": false, "reason": "unknown or revoked"})
    }

    fn answer(&self, stream: TcpStream) -> std::io::Result<()> {
        let (request, body) = process::read_request(&stream)?;
        assert!(request.starts_with("POST /admit HTTP/1.1"), "{request}");
        let mut stream = stream;
        self.posts.fetch_add(1, Ordering::SeqCst);
        if self.down.load(Ordering::SeqCst) {
            return stream.write_all(
                b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
            );
        }
        let ask: Value = serde_json::from_slice(&body).expect("a JSON question");
        let action = ask["action"].as_str().unwrap_or_default();
        assert!(["session", "announced", "fetch"].contains(&action), "{ask}");
        let tokens: Vec<String> =
            ask["tokens"].as_array().unwrap().iter().map(|t| t.as_str().unwrap().to_string()).collect();
        if let Some(t) = tokens.first() {
            *self.by_token.lock().unwrap().entry(t.clone()).or_default() += 1;
        }
        let answer = self.decide(&tokens).to_string();
        write!(
            stream,
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{answer}",
            answer.len()
        )
    }
}

fn relay(port: u16, metrics: u16, service: u16, failure: &str) -> Proc {
    Proc(
        Command::new(env!("CARGO_BIN_EXE_moq-edge"))
            .args(["--listen", &format!("127.0.0.1:{port}"), "--cores", "2", "--admission-busy-pct", "0"])
            .args(["--metrics", &format!("127.0.0.1:{metrics}")])
            .args(["--auth", "http", "--auth-url", &format!("http://127.0.0.1:{service}/admit")])
            .args(["--auth-failure", failure])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("moq-edge starts"),
    )
}

fn publisher(url: &str, token: &str) -> Proc {
    Proc(
        Command::new(env!("CARGO_BIN_EXE_moq-pub"))
            .args(["--relay", url, "--namespace", "live/a", "--track", "v", "--token", token])
            .args(["--rate", "50", "--group-size", "10"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("moq-pub starts"),
    )
}

/// moq-sub on `url` for live/a/v: `count` objects (its token in SETUP when given).
fn viewer(url: &str, token: Option<&str>, count: u64) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_moq-sub"));
    cmd.args(["--relay", url, "--namespace", "live/a", "--track", "v", "--quiet"]).args([
        "--count",
        &count.to_string(),
        "--timeout-s",
        "20",
    ]);
    if let Some(t) = token {
        cmd.args(["--token", t]);
    }
    cmd.output().expect("moq-sub runs")
}

fn said(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

fn metric(port: u16, name: &str) -> Option<u64> {
    let text = process::get(port, "/metrics")?;
    text.lines().find_map(|l| l.strip_prefix(&format!("{name} "))).and_then(|v| v.trim().parse().ok())
}

#[test]
fn the_platform_admits_sessions_and_ends_what_it_revokes() {
    let (service, service_port) = Service::start();
    let (port, metrics) = (free_udp(), free_tcp());
    let _relay = relay(port, metrics, service_port, "allow-known");
    process::wait_for("the relay", Duration::from_secs(30), || process::get(metrics, "/metrics").is_some());
    let quic = format!("127.0.0.1:{port}");
    let _pub = publisher(&quic, "pub-live");
    process::wait_for("the publisher admitted and announced", Duration::from_secs(30), || {
        metric(metrics, "moq_edge_namespaces_announced{core=\"all\"}") == Some(1)
    });

    // Allowed viewers on every transport: the token in SETUP, or in the URL.
    for (url, token) in [
        (quic.clone(), Some("viewer-live")),
        (format!("https://127.0.0.1:{port}/moq?token=viewer-live"), None),
        (format!("ws://127.0.0.1:{port}/moq?token=viewer-live"), None),
    ] {
        let out = viewer(&url, token, 20);
        assert!(out.status.success() && said(&out).contains("received 20 objects"), "{url}: {}", said(&out));
    }
    // The side doors ask the same service (`GET /announced`, on the TCP port).
    let side = |query: &str| process::get(port, &format!("/announced{query}")).unwrap_or_default();
    let listed = side("?token=viewer-live");
    assert!(listed.starts_with("HTTP/1.1 200") && listed.contains(r#"["live","a"]"#), "{listed}");
    assert!(side("?token=stranger").starts_with("HTTP/1.1 401"));
    assert!(side("").starts_with("HTTP/1.1 401"));
    // A grant for other namespaces: SUBSCRIBE refused UNAUTHORIZED (0x1 at draft-16).
    let out = viewer(&quic, Some("viewer-news"), 5);
    assert!(!out.status.success() && said(&out).contains("REQUEST_ERROR 0x1 "), "{}", said(&out));
    // No token the platform knows: the session is closed.
    let out = viewer(&quic, Some("stranger"), 5);
    assert!(!out.status.success(), "{}", said(&out));
    assert!(
        said(&out).contains("0x2") || said(&out).to_lowercase().contains("unauthorized"),
        "{}",
        said(&out)
    );

    // Revoked while watching: ended at the next revalidation (the answer holds 1 s).
    let mut watching = Command::new(env!("CARGO_BIN_EXE_moq-sub"))
        .args([
            "--relay",
            &quic,
            "--namespace",
            "live/a",
            "--track",
            "v",
            "--quiet",
            "--token",
            "viewer-revoked",
        ])
        .args(["--timeout-s", "30"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    assert!(watching.try_wait().unwrap().is_none(), "still watching before the revocation");
    service.revoked.lock().unwrap().insert("viewer-revoked".to_string());
    let start = Instant::now();
    while watching.try_wait().unwrap().is_none() {
        assert!(start.elapsed() < Duration::from_secs(20), "the revoked viewer was not ended");
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = watching.wait_with_output().unwrap();
    assert!(!out.status.success(), "ended with an error: {}", said(&out));

    // Two sessions with one token and a thousand SUBSCRIBEs: one question to the service (its
    // answer holds an hour; the second session's is the cache's).
    let setup = SetupOptions {
        auth_tokens: vec![AuthToken::UseValue { token_type: 0, value: "viewer-many".into() }],
        ..SetupOptions::default()
    };
    let addr: SocketAddr = quic.parse().unwrap();
    let deadline = || Instant::now() + Duration::from_secs(20);
    let first = Subscriber::connect_setup(addr, Version::Draft16, setup.clone(), deadline()).unwrap();
    let mut s = Subscriber::connect_setup(addr, Version::Draft16, setup, deadline()).unwrap();
    for i in 0..1000 {
        let track = FullTrackName {
            namespace: TrackNamespace::from_strs(&["live", "none"]),
            name: format!("t{i}").into(),
        };
        match s.subscribe(track, None, Instant::now() + Duration::from_secs(10)) {
            Err(ClientError::Refused { code, .. }) => assert_eq!(code, 0x10, "authorized, no publisher"),
            other => panic!("SUBSCRIBE {i}: {:?}", other.map(|_| ())),
        }
    }
    let asked = service.by_token.lock().unwrap().get("viewer-many").copied();
    assert_eq!(asked, Some(1), "POSTs for two sessions of one token and their 1,000 SUBSCRIBEs");
    drop((first, s));

    // The service goes down: what it allowed stays allowed, nothing new is.
    service.down.store(true, Ordering::SeqCst);
    std::thread::sleep(Duration::from_millis(1200)); // the cached answers' time is up
    let out = viewer(&quic, Some("viewer-live"), 10);
    assert!(out.status.success(), "allowed before, allowed while the service is down: {}", said(&out));
    let out = viewer(&quic, Some("viewer-news"), 5);
    assert!(!out.status.success(), "never allowed before: refused: {}", said(&out));
    assert!(metric(metrics, "moq_edge_admission_http_failures_total") > Some(0));
    assert!(metric(metrics, "moq_edge_admission_http_cached_total").is_some());
}

/// With `--auth-failure deny`, a service that is down refuses every session.
#[test]
fn with_deny_a_service_down_refuses_everyone() {
    let (service, service_port) = Service::start();
    service.down.store(true, Ordering::SeqCst);
    let (port, metrics) = (free_udp(), free_tcp());
    let _relay = relay(port, metrics, service_port, "deny");
    process::wait_for("the relay", Duration::from_secs(30), || process::get(metrics, "/metrics").is_some());
    let out = viewer(&format!("127.0.0.1:{port}"), Some("viewer-live"), 5);
    assert!(!out.status.success(), "{}", said(&out));
    assert_eq!(metric(metrics, "moq_edge_admission_http_allowed_total"), Some(0));
}
