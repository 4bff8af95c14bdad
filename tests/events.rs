//! The event hooks end to end (`--events-url`, ARCHITECTURE.md "Event hooks"): a platform's
//! HTTP receiver (here a small server on loopback) hears real publishers' broadcasts start
//! and end, their tracks, and their sessions open and close, over raw QUIC, WebTransport and
//! a WebSocket, in order and none lost while it is up; while it answers 503 the relay keeps
//! the newest events within its queue, retries, and counts what it dropped.

#![allow(clippy::unwrap_used)]

use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;

#[path = "support/process.rs"]
mod process;
use process::{free_udp, get, Proc};

fn wait_for(what: &str, f: impl FnMut() -> bool) {
    process::wait_for(what, Duration::from_secs(30), f)
}

/// The platform's receiver: every event of every POST it accepted, in arrival order; while
/// `down`, it answers 503 and keeps nothing.
#[derive(Default)]
struct Receiver {
    events: Mutex<Vec<Value>>,
    posts: Mutex<u64>,
    down: AtomicBool,
}

impl Receiver {
    fn start() -> (Arc<Receiver>, u16) {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the receiver");
        let port = listener.local_addr().expect("its address").port();
        let rx = Arc::new(Receiver::default());
        let me = rx.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let _ = me.answer(stream);
            }
        });
        (rx, port)
    }

    /// One request per connection: reads the head and the body its Content-Length gives.
    fn answer(&self, stream: TcpStream) -> std::io::Result<()> {
        let (request, body) = process::read_request(&stream)?;
        assert!(request.starts_with("POST /hooks HTTP/1.1"), "the request line: {request}");
        let mut stream = stream;
        if self.down.load(Ordering::SeqCst) {
            return stream.write_all(
                b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
            );
        }
        let batch: Vec<Value> = serde_json::from_slice(&body).expect("a JSON array of events");
        self.events.lock().unwrap().extend(batch);
        *self.posts.lock().unwrap() += 1;
        stream.write_all(b"HTTP/1.1 204 No Content\r\nconnection: close\r\n\r\n")
    }

    fn events(&self) -> Vec<Value> {
        self.events.lock().unwrap().clone()
    }

    /// The index of the first event of `kind` matching `f`.
    fn find(&self, kind: &str, f: impl Fn(&Value) -> bool) -> Option<usize> {
        self.events().iter().position(|e| e["type"] == kind && f(e))
    }
}

fn relay(port: u16, metrics: u16, hooks: u16) -> Proc {
    let child = Command::new(env!("CARGO_BIN_EXE_moq-edge"))
        .args(["--listen", &format!("127.0.0.1:{port}"), "--cores", "2"])
        .args(["--metrics", &format!("127.0.0.1:{metrics}")])
        .args(["--events-url", &format!("http://127.0.0.1:{hooks}/hooks"), "--events-queue", "8"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("moq-edge starts");
    Proc(child)
}

/// moq-pub at `url` for `namespace`/v: 20 objects at 50/s, then it ends its session.
fn publisher(url: &str, namespace: &str, draft: &str, mode: &str) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_moq-pub"))
        .args(["--relay", url, "--namespace", namespace, "--track", "v", "--draft", draft, mode])
        .args(["--rate", "50", "--group-size", "10", "--count", "20"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("moq-pub starts")
}

fn plain(port: u16, name: &str) -> Option<u64> {
    let text = get(port, "/metrics")?;
    text.lines().find_map(|l| l.strip_prefix(&format!("{name} "))).and_then(|v| v.trim().parse().ok())
}

#[test]
fn the_platform_hears_broadcasts_and_sessions_in_order_and_drops_are_counted() {
    let (rx, hooks) = Receiver::start();
    let (port, metrics) = (free_udp(), process::free_tcp());
    let _relay = relay(port, metrics, hooks);
    wait_for("the relay's metrics", || plain(metrics, "moq_edge_events_emitted_total").is_some());

    // Three publishers, one per transport and draft; each ends its own session.
    let runs = [
        (format!("127.0.0.1:{port}"), "live/quic", "16", "--publish", "quic"),
        (format!("https://127.0.0.1:{port}/moq"), "live/wt", "18", "--announce", "webtransport"),
        (format!("ws://127.0.0.1:{port}/moq"), "live/ws", "22", "--publish", "websocket"),
    ];
    for (url, namespace, draft, mode, transport) in &runs {
        let out = publisher(url, namespace, draft, mode).wait_with_output().expect("moq-pub runs");
        assert!(out.status.success(), "moq-pub {url}: {}", String::from_utf8_lossy(&out.stderr));
        let fields: Vec<&str> = namespace.split('/').collect();
        let ns = serde_json::json!(fields);
        wait_for(&format!("the end of {namespace}"), || {
            rx.find("broadcast_end", |e| e["namespace"] == ns).is_some()
                && rx.find("session_close", |e| e["transport"] == *transport).is_some()
        });
        let start = rx.find("broadcast_start", |e| e["namespace"] == ns).expect("its start");
        let end = rx.find("broadcast_end", |e| e["namespace"] == ns).expect("its end");
        let open = rx.find("session_open", |e| e["transport"] == *transport).expect("its session's opening");
        let close = rx.find("session_close", |e| e["transport"] == *transport).expect("its session's close");
        // A session that ends without withdrawing first is told closed as its broadcast ends:
        // either may come first.
        assert!(open < start && start < end && open < close, "{namespace}: {:#?}", rx.events());
        let events = rx.events();
        assert_eq!(events[open]["draft"], draft.parse::<u64>().unwrap(), "{:#?}", events[open]);
        assert_eq!(events[open]["session"], events[close]["session"]);
        assert!(
            events[open]["peer"].as_str().is_some_and(|p| p.starts_with("127.0.0.1:"))
                || *transport == "websocket"
        );
        assert!(events[close]["bytes_in"].as_u64() > Some(20 * 16), "{:#?}", events[close]);
        assert!(events[close]["bytes_out"].as_u64() > Some(0));
        if *mode == "--publish" {
            let track =
                rx.find("track_start", |e| e["namespace"] == ns && e["track"] == "v").expect("its track");
            let track_end = rx.find("track_end", |e| e["namespace"] == ns).expect("its track's end");
            assert!(start < track && track < track_end && track_end < end, "{:#?}", rx.events());
        }
    }
    // Every event so far arrived once, numbered without a gap, from this relay.
    let events = rx.events();
    let seqs: Vec<u64> = events.iter().map(|e| e["seq"].as_u64().expect("seq")).collect();
    assert_eq!(seqs, (1..=seqs.len() as u64).collect::<Vec<_>>(), "{events:#?}");
    assert!(events.iter().all(|e| e["relay"] == format!("moqt://127.0.0.1:{port}") && e["at_ms"].is_u64()));
    assert_eq!(plain(metrics, "moq_edge_events_dropped_total"), Some(0));

    // The platform answers 503: four publishers make 16 events, the queue keeps 8.
    rx.down.store(true, Ordering::SeqCst);
    let before = seqs.len() as u64;
    for i in 0..4 {
        let out = publisher(&format!("127.0.0.1:{port}"), &format!("down/{i}"), "16", "--announce")
            .wait_with_output()
            .expect("moq-pub runs");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
    wait_for("16 events made while the receiver is down", || {
        plain(metrics, "moq_edge_events_emitted_total") == Some(before + 16)
    });
    assert!(plain(metrics, "moq_edge_events_failures_total") > Some(0), "deliveries were tried");
    assert_eq!(plain(metrics, "moq_edge_events_dropped_total"), Some(8), "the oldest 8 dropped");
    assert_eq!(rx.events().len() as u64, before, "nothing accepted while down");

    // Back up: the newest 8, in order, after the retry's backoff.
    rx.down.store(false, Ordering::SeqCst);
    wait_for("the queue delivered", || rx.events().len() as u64 == before + 8);
    let late: Vec<u64> = rx.events()[before as usize..].iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    assert_eq!(late, (before + 9..=before + 16).collect::<Vec<_>>());
    let ends = rx.events()[before as usize..].iter().filter(|e| e["type"] == "broadcast_end").count();
    assert!(ends >= 2, "the newest events are the last publishers' ends: {:#?}", rx.events());
    assert_eq!(plain(metrics, "moq_edge_events_delivered_total"), Some(before + 8));
    assert_eq!(plain(metrics, "moq_edge_events_queued"), Some(0));
}
