//! The watch page in a real browser (README.md, "Watching in a browser"; ARCHITECTURE.md,
//! "Web listener"): the relay binary serves the page and `/certificate.sha256` over TCP on its
//! QUIC port; headless Chromium (Debian's, driven by puppeteer-core from `web/test/watch.mjs`)
//! loads the page, which pins the certificate hash with WebTransport's
//! `serverCertificateHashes` and subscribes with @moq/lite (MoQT draft-16, WT protocol
//! moqt-16), while moq-pub publishes stamped objects in draft-16, then in draft-22 (the relay
//! translates).
//!
//! Chromium, Node.js and `web/node_modules` are required: `.ci/install-deps` installs them.
//! Without them these tests fail and say what to run; they never skip.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use moq_edge::client::stamp::stamped;
use serde_json::Value;

#[path = "support/process.rs"]
mod process;
use process::{get, metric, Proc};

const WEB: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/web");
const CHROMIUM: &str = "/usr/bin/chromium";
/// Objects per round: two groups of 30 at 30 a second.
const OBJECTS: u64 = 60;
const GROUP_SIZE: u64 = 30;
const OBJECT_SIZE: usize = 1200;
/// Pages watching the track at once.
const PAGES: usize = 2;
/// A guard against a hang (the test asserts no duration).
const GUARD: Duration = Duration::from_secs(120);

/// The tests take turns: on a 2-core machine, a browser test beside another (or beside the
/// bundle's rebuild) starves its relays and pages (objects shed for lag, frames late).
static ONE_BROWSER_TEST: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    ONE_BROWSER_TEST.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn wait_for(what: &str, f: impl FnMut() -> bool) {
    process::wait_for(what, GUARD, f)
}

/// Fails, naming what to install, when the browser, Node.js or the web packages are missing.
fn require_browser_tools() {
    assert!(
        Path::new(CHROMIUM).exists(),
        "Chromium is missing ({CHROMIUM}): run .ci/install-deps (it installs Debian's chromium)"
    );
    let node = Command::new("node").arg("--version").output();
    assert!(
        node.is_ok_and(|o| o.status.success()),
        "Node.js is missing (`node` is not on PATH): run .ci/install-deps"
    );
    assert!(
        Path::new(WEB).join("node_modules/puppeteer-core").is_dir()
            && Path::new(WEB).join("node_modules/esbuild").is_dir(),
        "web/node_modules is missing: run .ci/install-deps (it runs `npm ci` in web/)"
    );
}

/// The relay binary, its stdout read for the addresses it serves.
struct Relay {
    proc: Proc,
    /// UDP (QUIC) and TCP (web) port.
    port: u16,
    /// The metrics endpoint's TCP port, when it was asked for.
    metrics: Option<u16>,
}

/// Starts moq-edge on a port the kernel picks (`--listen 127.0.0.1:0`); the web listener
/// follows it unless `args` move it.
fn start_relay(args: &[&str]) -> Relay {
    let mut child = Command::new(env!("CARGO_BIN_EXE_moq-edge"))
        .args(["--listen", "127.0.0.1:0", "--cores", "2"])
        // Admission under load follows how busy the machine running the tests is; these tests
        // are about the page (ARCHITECTURE.md, "Admission under load").
        .args(["--admission-busy-pct", "0"])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("moq-edge starts");
    let stdout = child.stdout.take().expect("stdout");
    let proc = Proc(child);
    let (mut port, mut web, mut metrics) = (None, None, None);
    // Its lines arrive through a thread, so that a relay that never prints what is awaited
    // fails the test after a while instead of hanging it.
    let (tx, lines) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut seen = String::new();
    let port_of =
        |l: &str| l.rsplit(':').next().map(|p| p.trim_end_matches('/')).and_then(|p| p.parse().ok());
    while port.is_none() || (web.is_none() && !seen.contains("web        off")) {
        let line = match lines.recv_timeout(std::time::Duration::from_secs(60)) {
            Ok(Ok(line)) => line,
            Ok(Err(_)) | Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                panic!("moq-edge ended before serving:\n{seen}")
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                panic!("moq-edge printed no serving line within a minute:\n{seen}")
            }
        };
        if let Some(rest) = line.trim().strip_prefix("serving    udp ") {
            port = rest
                .split_whitespace()
                .next()
                .and_then(|a| a.rsplit(':').next())
                .and_then(|p| p.parse().ok());
        } else if line.trim().starts_with("web        serving http://") {
            web = port_of(&line);
        } else if line.trim().starts_with("metrics    serving http://") {
            metrics = port_of(&line);
        }
        seen.push_str(&line);
        seen.push('\n');
    }
    // Keep reading, so that the relay never blocks on a full pipe.
    std::thread::spawn(move || lines.into_iter().for_each(drop));
    let port = port.expect("the UDP port");
    if let Some(w) = web {
        if !args.contains(&"--web") {
            assert_eq!(w, port, "the web listener takes the QUIC port by default:\n{seen}");
        }
    }
    Relay { proc, port, metrics }
}

/// Lines of a child's stream, read on their own thread.
fn lines_of(stream: impl Read + Send + 'static) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stream).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// The next line that satisfies `want`, or a panic naming `what` (with the lines seen) when the
/// stream ends or the guard expires.
fn expect_line(lines: &mpsc::Receiver<String>, what: &str, want: impl Fn(&str) -> bool) -> String {
    let end = Instant::now() + GUARD;
    let mut seen = Vec::new();
    loop {
        match lines.recv_timeout(end.saturating_duration_since(Instant::now())) {
            Ok(line) if want(&line) => return line,
            Ok(line) => seen.push(line),
            Err(e) => panic!("no {what} ({e}); seen:\n{}", seen.join("\n")),
        }
    }
}

/// A relay metric (`core="all"`), 0 while the endpoint does not answer.
fn gauge(relay: &Relay, name: &str) -> u64 {
    relay.metrics.and_then(|m| metric(m, name)).unwrap_or(0)
}

/// moq-pub for `OBJECTS` objects on live/video, started and ended by lines on its stdin.
fn start_publisher(
    port: u16,
    draft: &str,
) -> (Child, ChildStdin, mpsc::Receiver<String>, mpsc::Receiver<String>) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_moq-pub"))
        .args(["--relay", &format!("127.0.0.1:{port}"), "--draft", draft])
        .args(["--namespace", "live", "--track", "video", "--rate", "30"])
        .args(["--group-size", &GROUP_SIZE.to_string(), "--count", &OBJECTS.to_string()])
        .args(["--object-size", &OBJECT_SIZE.to_string(), "--wait-stdin"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("moq-pub starts");
    let stdin = child.stdin.take().expect("stdin");
    let out = lines_of(child.stdout.take().expect("stdout"));
    let err = lines_of(child.stderr.take().expect("stderr"));
    (child, stdin, out, err)
}

/// web/test/watch.mjs on `url` with `PAGES` pages, writing its screenshot to `png`.
fn start_driver(url: &str, png: &Path) -> (Proc, mpsc::Receiver<String>, mpsc::Receiver<String>) {
    let mut child = Command::new("node")
        .current_dir(WEB)
        .args(["test/watch.mjs", "--url", url, "--pages", &PAGES.to_string()])
        .args(["--objects", &OBJECTS.to_string(), "--timeout-s", &GUARD.as_secs().to_string()])
        .arg("--screenshot")
        .arg(png)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("node starts");
    let out = lines_of(child.stdout.take().expect("stdout"));
    let err = lines_of(child.stderr.take().expect("stderr"));
    (Proc(child), out, err)
}

fn drained(lines: &mpsc::Receiver<String>) -> String {
    lines.try_iter().collect::<Vec<_>>().join("\n")
}

fn sha256_hex(bytes: &[u8]) -> String {
    moq_edge::web::hex_lower(ring::digest::digest(&ring::digest::SHA256, bytes).as_ref())
}

/// One page's report: the track ended cleanly after every object arrived once, in order, with
/// the bytes moq-pub stamped (sequence numbers consecutive from 0, the right length, the
/// payload's SHA-256 the one of the payload moq-pub makes for that stamp).
fn check_page(page: &Value, draft: &str) {
    let errors = page["errors"].as_array().expect("errors");
    assert!(errors.is_empty(), "draft-{draft} publisher: the page reported errors: {errors:?}");
    assert_eq!(page["notes"], Value::Array(Vec::new()), "a page that joined before the first object");
    assert_eq!(page["state"], "ended", "{page}");
    assert_eq!(page["protocol"], "moqt-16", "the WebTransport protocol the relay chose");
    assert_eq!(page["version"], "moq-transport-16", "the MoQT version @moq/lite set up");
    assert_eq!(page["gaps"], 0);
    let objects = page["objects"].as_array().expect("objects");
    assert_eq!(objects.len() as u64, OBJECTS, "draft-{draft} publisher: objects the page received");
    for (i, o) in objects.iter().enumerate() {
        let i = i as u64;
        let field = |k: &str| o[k].as_u64().unwrap_or_else(|| panic!("object {i}: no {k}: {o}"));
        assert_eq!(field("seq"), i, "in order, none missing: {o}");
        assert_eq!((field("group"), field("object")), (i / GROUP_SIZE, i % GROUP_SIZE), "{o}");
        assert_eq!(field("len"), OBJECT_SIZE as u64, "{o}");
        let payload = stamped(i, field("micros"), OBJECT_SIZE);
        assert_eq!(o["sha"].as_str(), Some(sha256_hex(&payload).as_str()), "object {i}'s bytes: {o}");
    }
}

/// One round: a fresh relay, moq-pub in `draft`, two pages on the same track.
fn round(draft: &str, png: &Path) {
    let relay = start_relay(&["--metrics", "127.0.0.1:0"]);
    let (mut publisher, mut control, pub_out, pub_err) = start_publisher(relay.port, draft);
    expect_line(&pub_err, "moq-pub's announcement", |l| {
        l.contains("waiting for a line on standard input to start")
    });

    let url = format!("http://127.0.0.1:{}/?namespace=live&track=video", relay.port);
    let (_driver, events, driver_log) = start_driver(&url, png);
    let explain =
        |why: &str| format!("{why}\nwatch.mjs:\n{}\nmoq-pub:\n{}", drained(&driver_log), drained(&pub_err));
    // The driver's next event: `what`, or "done" early when a page failed.
    let event = |what: &str| {
        let line = expect_line(&events, what, |l| l.starts_with("{\"event\":"));
        let event = serde_json::from_str::<Value>(&line).unwrap_or_else(|e| panic!("{e}: {line}"));
        if event["event"] != what {
            let pages = event["pages"].as_array().cloned().unwrap_or_default();
            let states: Vec<String> =
                pages.iter().map(|p| format!("{}: {}", p["state"], p["errors"])).collect();
            let console = event["console"].as_array().cloned().unwrap_or_default();
            let console: Vec<&str> = console.iter().filter_map(Value::as_str).collect();
            panic!(
                "{}",
                explain(&format!(
                    "draft-{draft} publisher: expected the event {what:?}, got {:?}; pages: {states:?}\npage consoles:\n{}",
                    event["event"],
                    console.join("\n")
                ))
            );
        }
        event
    };

    // Both pages subscribed: the relay holds two downstream subscriptions and one upstream.
    let _ = event("subscribed");
    wait_for("two downstream subscriptions on one upstream subscription", || {
        gauge(&relay, "moq_edge_subscriptions") == PAGES as u64
            && gauge(&relay, "moq_edge_upstream_subscriptions") == 1
    });
    writeln!(control, "start").expect("moq-pub's stdin");

    // Every page has every object: the relay took each object once from the publisher and wrote
    // it once to each page.
    let _ = event("received");
    wait_for("the relay's object counters", || {
        gauge(&relay, "moq_edge_objects_in_total") == OBJECTS
            && gauge(&relay, "moq_edge_objects_out_total") == OBJECTS * PAGES as u64
    });
    assert_eq!(gauge(&relay, "moq_edge_upstream_subscriptions"), 1, "{}", explain("one upstream"));
    writeln!(control, "end").expect("moq-pub's stdin");

    let done = event("done");
    assert_eq!(done["timedOut"], false, "{}", explain("the pages did not finish"));
    let pages = done["pages"].as_array().expect("pages");
    assert_eq!(pages.len(), PAGES);
    for page in pages {
        check_page(page, draft);
    }
    let summary = expect_line(&pub_out, "moq-pub's summary", |l| l.starts_with("moq-pub: sent"));
    assert!(
        summary.contains(&format!("sent {OBJECTS} objects")) && summary.ends_with("ended 1 subscription(s)"),
        "the publisher served one subscription for both pages: {summary}"
    );
    let end = Instant::now() + GUARD;
    while publisher.try_wait().expect("moq-pub").is_none() {
        assert!(Instant::now() < end, "moq-pub did not exit");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Two pages in headless Chromium watch one track through the relay, with moq-pub publishing
/// in draft-16 and then in draft-22: every object arrives in order with its bytes, the
/// WebTransport session pinned the certificate hash the relay served, and the second page
/// cost no second upstream subscription. The draft-16 round's screenshot is
/// target/browser-watch.png, the draft-22 round's target/browser-watch-draft22.png.
#[test]
fn pages_in_chromium_watch_a_track_published_in_either_draft() {
    require_browser_tools();
    let _turn = one_at_a_time();
    let target = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/target"));
    round("16", &target.join("browser-watch.png"));
    round("22", &target.join("browser-watch-draft22.png"));
}

/// The body of a GET on `port`, when the answer is 200.
fn body(port: u16, path: &str) -> Option<String> {
    let answer = get(port, path)?;
    let (head, body) = answer.split_once("\r\n\r\n")?;
    head.starts_with("HTTP/1.1 200 ").then(|| body.to_string())
}

/// Writes a new self-signed certificate and key; returns the certificate's SHA-256, hex.
fn write_identity(cert: &Path, key: &Path) -> String {
    let ck = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).expect("a certificate");
    std::fs::write(key, ck.signing_key.serialize_pem()).expect("write key");
    std::fs::write(cert, ck.cert.pem()).expect("write cert");
    sha256_hex(ck.cert.der())
}

/// `/certificate.sha256` is the hash of the certificate new connections get, also after a
/// reload (SIGHUP); `--web ADDR` moves the listener and `--web off` removes it.
#[test]
fn the_web_listener_follows_reloads_and_can_move_or_be_off() {
    let _turn = one_at_a_time();
    let dir = std::env::temp_dir().join(format!("moq-edge-web-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("tmp dir");
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    let first = write_identity(&cert, &key);
    let (cert_s, key_s) = (cert.to_str().expect("utf-8"), key.to_str().expect("utf-8"));
    let relay = start_relay(&["--cert", cert_s, "--key", key_s]);
    assert_eq!(body(relay.port, "/certificate.sha256").as_deref(), Some(first.as_str()));
    let page = body(relay.port, "/?namespace=live&track=video").expect("the page");
    assert!(page.starts_with("<!doctype html>") && page.contains("/watch.js"), "{page}");
    assert!(body(relay.port, "/watch.js").is_some_and(|js| js.len() > 10_000));

    let second = write_identity(&cert, &key);
    let pid = relay.proc.0.id().to_string();
    assert!(Command::new("kill").args(["-HUP", &pid]).status().expect("kill runs").success());
    wait_for("the reloaded certificate's hash", || {
        body(relay.port, "/certificate.sha256").as_deref() == Some(second.as_str())
    });
    drop(relay);

    let moved = process::free_tcp();
    let _relay = start_relay(&["--web", &format!("127.0.0.1:{moved}")]);
    assert!(body(moved, "/certificate.sha256").is_some_and(|h| h.len() == 64));
    let off = start_relay(&["--web", "off"]);
    assert!(get(off.port, "/certificate.sha256").is_none(), "--web off serves nothing");
    std::fs::remove_dir_all(&dir).ok();
}

/// The bundle committed in web/dist/ (which the relay embeds) is what the pinned packages
/// build from web/src/: `node build.mjs` (what `npm run build` and `make web` run) into a
/// fresh folder gives the same files, byte for byte.
#[test]
fn the_committed_bundle_is_the_build_of_the_pinned_packages() {
    let _turn = one_at_a_time();
    require_browser_tools();
    let out = std::env::temp_dir().join(format!("moq-edge-web-build-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let status =
        Command::new("node").current_dir(WEB).arg("build.mjs").arg(&out).status().expect("node runs");
    assert!(status.success(), "node build.mjs failed");
    let names = |dir: &Path| {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .expect("a folder")
            .map(|e| e.expect("an entry").file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    };
    let dist = Path::new(WEB).join("dist");
    assert_eq!(names(&dist), names(&out), "web/dist/ holds what the build writes");
    for name in names(&out) {
        let built = std::fs::read(out.join(&name)).expect("built");
        let committed = std::fs::read(dist.join(&name)).expect("committed");
        assert!(
            built == committed,
            "web/dist/{name} is not the build of web/src/: run `make web` and commit it"
        );
    }
    std::fs::remove_dir_all(&out).ok();
}

/// ffmpeg's test pattern (H.264 640x360 at 30 fps with a 1 s GOP, and AAC; 16:9 as most live
/// video is, x264's `veryfast` so that a 2-core machine keeps up), as fragmented MP4
/// in real time for `secs`, piped into `moq-pub --fmp4` publishing the hang broadcast `name` at
/// `draft` on the relay at `port`. The frames' timestamps are the wall clock at which ffmpeg
/// reads them (`-output_ts_offset` now, `frag_discont` so that each fragment's decode time
/// says so), which lets the page measure each decoded frame's glass-to-decoder latency.
/// `format`: moq-pub's `--format` (`hang`, `msf-cmaf`, `msf-loc`). `token`: moq-pub's
/// authorization token. Returns both processes and moq-pub's stderr.
fn start_encoder(
    port: u16,
    (draft, format): (&str, &str),
    name: &str,
    secs: u32,
    token: Option<&str>,
) -> (Proc, Proc, mpsc::Receiver<String>) {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("after 1970");
    let mut ffmpeg = Command::new("ffmpeg")
        .args(["-hide_banner", "-loglevel", "error", "-re"])
        .args(["-f", "lavfi", "-i", "testsrc2=size=640x360:rate=30"])
        .args(["-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000"])
        .args(["-t", &secs.to_string()])
        .args(["-c:v", "libx264", "-profile:v", "high", "-pix_fmt", "yuv420p", "-tune", "zerolatency"])
        .args(["-preset", "veryfast"])
        .args(["-g", "30", "-keyint_min", "30", "-sc_threshold", "0"])
        .args(["-c:a", "aac", "-b:a", "32k"])
        .args(["-output_ts_offset", &format!("{}.{:06}", now.as_secs(), now.subsec_micros())])
        .args([
            "-f",
            "mp4",
            "-movflags",
            "cmaf+frag_every_frame+empty_moov+default_base_moof+frag_discont",
            "-",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("ffmpeg starts");
    let video = ffmpeg.stdout.take().expect("ffmpeg's stdout");
    let mut publisher = Command::new(env!("CARGO_BIN_EXE_moq-pub"))
        .args(["--relay", &format!("127.0.0.1:{port}"), "--draft", draft, "--namespace", name, "--fmp4"])
        .args(["--format", format])
        .args(token.map(|t| ["--token", t]).into_iter().flatten())
        .stdin(Stdio::from(video))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("moq-pub starts");
    let err = lines_of(publisher.stderr.take().expect("stderr"));
    (Proc(ffmpeg), Proc(publisher), err)
}

/// web/test/play.mjs: `pages` pages of the player on `url`, page i opened `stagger_ms` × i
/// after the first, each read `seconds` after its first frame. Returns its "done" event.
fn play(url: &str, pages: usize, stagger_ms: u64, seconds: u64, png: &Path, browser: Viewer) -> Value {
    let out = Command::new("node")
        .current_dir(WEB)
        .args(["test/play.mjs", "--url", url, "--pages", &pages.to_string()])
        .args(browser.args())
        .args(["--stagger-ms", &stagger_ms.to_string(), "--seconds", &seconds.to_string()])
        .arg("--screenshot")
        .arg(png)
        .output()
        .expect("node runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let done = stdout.lines().rev().find(|l| l.starts_with("{\"event\":\"done\""));
    let Some(done) = done else {
        panic!("play.mjs ended without a report:\n{stdout}\n{}", String::from_utf8_lossy(&out.stderr))
    };
    serde_json::from_str(done).unwrap_or_else(|e| panic!("{e}: {done}"))
}

/// Frames in a 10 s window at 30 fps, and the share of them each viewer's decoder must output.
const WINDOW_S: u64 = 10;
const MIN_DECODED: u64 = 30 * WINDOW_S * 9 / 10;

/// A quantile (in ms) of the delay relay `r` added to objects, from its metrics endpoint.
fn relay_delay_ms(r: &Relay, quantile: &str) -> Option<f64> {
    let text = get(r.metrics?, "/metrics")?;
    let prefix = format!("moq_edge_relay_delay_quantile_seconds{{quantile=\"{quantile}\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .map(|s| s * 1e3)
}

/// How a round's viewers reach the relay.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Viewer {
    /// Chromium, over WebTransport (without `window.WebSocket`, so that the player's race,
    /// WebTransport with a head start and then a WebSocket, cannot pick the WebSocket on a
    /// slow machine: the WebSocket has its own viewers).
    WebTransport,
    /// Chromium without `window.WebTransport` (removed before the page loads): the player
    /// falls back to QMux over a WebSocket on the relay's TCP port.
    ChromiumWithoutWebTransport,
    /// Debian's Firefox ESR (over WebDriver BiDi), which the player sends to the WebSocket.
    FirefoxEsr,
}

impl Viewer {
    fn args(self) -> &'static [&'static str] {
        match self {
            Viewer::WebTransport => &["--no-websocket"],
            Viewer::ChromiumWithoutWebTransport => &["--no-webtransport"],
            Viewer::FirefoxEsr => &["--firefox", "/usr/bin/firefox-esr"],
        }
    }

    /// The protocol the page must report for its session at MoQT `draft`: WebTransport's,
    /// or the WebSocket subprotocol the relay chose (QMux -01 first).
    fn protocol(self, draft: &str) -> String {
        match self {
            Viewer::WebTransport => format!("moqt-{draft}"),
            _ => format!("qmux-01.moqt-{draft}"),
        }
    }
}

/// One round of the player.
struct Round<'a> {
    what: &'a str,
    /// The relay moq-pub publishes to, and the relays the broadcast crosses to the viewers
    /// (the last is the one they watch on).
    path: &'a [&'a Relay],
    /// moq-pub's draft, and the one the player must end up speaking.
    draft: &'a str,
    viewer_draft: &'a str,
    png: PathBuf,
    /// With tokens required: moq-pub's token, and the JWT the page carries in its URL.
    tokens: Option<(&'a str, &'a str)>,
    viewer: Viewer,
    /// moq-pub's `--format`: `hang`, or `msf-cmaf` (the page then plays it with
    /// `catalog-format="msf"`).
    format: &'a str,
}

/// A broadcast from ffmpeg through moq-pub at `draft`, two viewers on the last relay of the
/// path (one from the start, one 5 s later), each of whose video decoder outputs at least
/// 90 % of the frames of the 10 s from its first frame. Prints each viewer's time to first
/// frame and live-edge latency beside the relays' added delay, and one `player-figures` JSON
/// line for bench/player.sh.
fn play_round(round: Round) {
    let Round { what, path, draft, viewer_draft, png, tokens, viewer, format } = round;
    let (Some(first), Some(last)) = (path.first(), path.last()) else { panic!("an empty path") };
    let name = format!("demo-{draft}");
    let (_ffmpeg, _publisher, log) =
        start_encoder(first.port, (draft, format), &name, 30, tokens.map(|t| t.0));
    expect_line(&log, "moq-pub's catalog", |l| l.starts_with("moq-pub: catalog"));
    let jwt = tokens.map_or(String::new(), |t| format!("&jwt={}", t.1));
    let msf = if format.starts_with("msf") { "&format=msf" } else { "" };
    let url = format!("http://127.0.0.1:{}/?name={name}{jwt}{msf}", last.port);
    let done = play(&url, 2, 5_000, WINDOW_S, &png, viewer);
    // The catalog the viewers read, as web code beside the player would fetch it (README
    // "HTTP side doors"), from the cache while the track still lingers there.
    let catalog = format!("/fetch/{name}/{}", if msf.is_empty() { "catalog.json" } else { "catalog" });
    let query = tokens.map_or(String::new(), |t| format!("?jwt={}", t.1));
    let fetched = get(last.port, &format!("{catalog}{query}")).unwrap_or_default();
    let (head, body) = fetched.split_once("\r\n\r\n").unwrap_or_default();
    let parsed: Option<Value> = serde_json::from_str(body).ok();
    assert!(
        head.starts_with("HTTP/1.1 200") && head.contains("Content-Type: application/json"),
        "{what}: GET {catalog}: {fetched}"
    );
    assert!(parsed.as_ref().is_some_and(Value::is_object), "{what}: {catalog} is not a JSON object: {body}");
    let console: Vec<&str> =
        done["console"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
    let pub_log = drained(&log);
    let explain = || {
        format!(
            "{what}, publisher at draft-{draft}\npage consoles:\n{}\nmoq-pub:\n{pub_log}",
            console.join("\n")
        )
    };
    // The encoder's and the import's part: moq-pub's last report of its frames' ages.
    let encoder_ms = pub_log
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix("moq-pub: video frames published "))
        .and_then(|rest| rest.split(' ').next()?.parse::<f64>().ok());
    let relay_p50: Vec<Option<f64>> = path.iter().map(|r| relay_delay_ms(r, "0.5")).collect();
    let relay_p99: Vec<Option<f64>> = path.iter().map(|r| relay_delay_ms(r, "0.99")).collect();
    let mut viewers = Vec::new();
    for (i, page) in done["pages"].as_array().expect("pages").iter().enumerate() {
        let decoded = page["windowDecoded"].as_u64().unwrap_or(0);
        let first_ms = page["firstFrameMs"].as_f64();
        let (age, age95) = (page["ageMedianMs"].as_f64(), page["ageP95Ms"].as_f64());
        println!(
            "{what}, draft-{draft} publisher, draft-{viewer_draft} viewer {i}: {decoded} frames decoded in {WINDOW_S} s, \
             first after {first_ms:?} ms, glass to decoder median {age:?} ms (p95 {age95:?}); \
             moq-pub {encoder_ms:?} ms after the timestamps; relay delay p50 {relay_p50:?} ms, p99 {relay_p99:?} ms"
        );
        assert!(
            decoded >= MIN_DECODED,
            "viewer {i}: {decoded} frames decoded, want {MIN_DECODED}: {page}\n{}",
            explain()
        );
        assert_eq!(page["errors"], Value::Array(Vec::new()), "viewer {i}'s decoder: {}", explain());
        // The player picks the newest draft both offer (ARCHITECTURE.md, "Peer quirks").
        let protocols = page["protocols"].as_array().cloned().unwrap_or_default();
        assert_eq!(
            protocols.last().and_then(Value::as_str),
            Some(viewer.protocol(viewer_draft).as_str()),
            "viewer {i}'s protocols {protocols:?}: {}",
            explain()
        );
        assert!(age.is_some(), "viewer {i}: the page measured no frame's latency: {page}");
        println!("{what}, viewer {i}'s page: {}", page["layout"]);
        check_layout(&page["layout"], &format!("{what}, viewer {i}"));
        viewers.push(serde_json::json!({ "ttff_ms": first_ms, "age_median_ms": age, "age_p95_ms": age95 }));
    }
    // The first viewer's page at a phone's width: the picture in its shape, across the screen.
    let phone = &done["phone"];
    check_layout(phone, &format!("{what}, viewer 0 on a phone"));
    let width = phone["rendered"]["width"].as_f64().unwrap_or(0.0);
    assert!((300.0..=390.0).contains(&width), "{what}: the picture is {width} px wide on a 390 px phone");
    // The page's button turns the sound on (the player starts muted, as browsers require).
    assert_eq!(
        done["sound"],
        serde_json::json!({ "muted": false, "button": "Mute" }),
        "{what}: {}",
        done["sound"]
    );
    let figures = serde_json::json!({
        "round": what, "publisher": draft, "viewer": viewer_draft, "viewers": viewers,
        "relay_delay_p50_ms": relay_p50, "relay_delay_p99_ms": relay_p99, "moq_pub_age_ms": encoder_ms,
    });
    println!("player-figures {figures}");
}

/// What a person sees while the broadcast plays (the page's layout from play.mjs): the picture
/// in the stream's own shape (within 2 %) and within the window's width; every card of the
/// player's panel shown, none with a placeholder or a zero for a figure known while frames are
/// decoded; the graph's last value above zero.
fn check_layout(layout: &Value, what: &str) {
    let f = |v: &Value| v.as_f64().unwrap_or(0.0);
    let (rw, rh) = (f(&layout["rendered"]["width"]), f(&layout["rendered"]["height"]));
    let (sw, sh) = (f(&layout["stream"]["width"]), f(&layout["stream"]["height"]));
    assert!(rw > 0.0 && rh > 0.0 && sw > 0.0 && sh > 0.0, "{what}: no picture or no stream size: {layout}");
    let shape = (rw / rh) / (sw / sh);
    assert!((shape - 1.0).abs() <= 0.02, "{what}: the picture is {rw}x{rh} for a {sw}x{sh} stream: {layout}");
    assert!(rw <= f(&layout["viewport"]["width"]), "{what}: the picture is wider than the window: {layout}");
    for card in ["status", "protocol", "frames", "rendition", "latency", "bitrate"] {
        let value = layout["cards"][card]["value"].as_str().unwrap_or_default();
        let placeholder =
            value.is_empty() || value.contains('\u{2013}') || value == "0" || value.starts_with("0 ");
        assert!(!placeholder, "{what}: card {card} reads {value:?}: {layout}");
    }
    assert!(f(&layout["graph"]["last"]) > 0.0, "{what}: the graph's last value: {layout}");
}

/// Live video on the screen: ffmpeg's test pattern (H.264 and AAC), imported by moq-pub from
/// fragmented MP4 into a hang broadcast, played by moq-dev's `<moq-watch>` (the web page's
/// player mode) in headless Chromium through the relay: with the publisher at draft-16, -18
/// and -22 and the viewer at draft-18 (the newest the player offers); with the publisher at
/// draft-22 and the viewer at draft-16 (a relay offering 16 and 22 only); and through an edge
/// relay whose parent the publisher feeds. The frames counted are those the player's own
/// VideoDecoder outputs (web/src/player.js). Screenshots: target/browser-play-*.png.
#[test]
fn the_player_plays_a_broadcast_from_ffmpeg_through_the_relay() {
    require_browser_tools();
    let _turn = one_at_a_time();
    assert!(
        Command::new("ffmpeg").arg("-version").output().is_ok_and(|o| o.status.success()),
        "ffmpeg is missing: run .ci/install-deps (it installs Debian's ffmpeg)"
    );
    let target = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/target"));
    let metrics = ["--metrics", "127.0.0.1:0"];
    for draft in ["16", "18", "22"] {
        let relay = start_relay(&metrics);
        let png = target.join(format!("browser-play-{draft}.png"));
        play_round(Round {
            what: "one relay",
            path: &[&relay],
            draft,
            viewer_draft: "18",
            png,
            tokens: None,
            viewer: Viewer::WebTransport,
            format: "hang",
        });
    }
    let relay = start_relay(&[&metrics[..], &["--drafts", "16,22"]].concat());
    let png = target.join("browser-play-viewer16.png");
    play_round(Round {
        what: "one relay of drafts 16 and 22",
        path: &[&relay],
        draft: "22",
        viewer_draft: "16",
        png,
        tokens: None,
        viewer: Viewer::WebTransport,
        format: "hang",
    });
    let origin = start_relay(&metrics);
    let parent = format!("moqt://127.0.0.1:{}", origin.port);
    let edge = start_relay(&[&metrics[..], &["--upstream", &parent, "--upstream-insecure", "true"]].concat());
    let png = target.join("browser-play-tier.png");
    play_round(Round {
        what: "edge and origin",
        path: &[&origin, &edge],
        draft: "16",
        viewer_draft: "18",
        png,
        tokens: None,
        viewer: Viewer::WebTransport,
        format: "hang",
    });
}

/// The player with tokens required: a relay that takes JWTs (`--auth jwt`), moq-pub
/// presenting its own, and the page carrying the viewer's in its URL (`&jwt=`), which the
/// page passes to the relay in the WebTransport URL (README.md, "Authorization").
#[test]
fn the_player_plays_with_a_jwt_in_the_page_url() {
    use moq_edge::auth;
    require_browser_tools();
    let _turn = one_at_a_time();
    let target = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/target"));
    let secret = b"the platform's secret, 32 bytes!";
    let keys = target.join(format!("browser-jwks-{}.json", std::process::id()));
    let k = base64::Engine::encode(&base64::engine::general_purpose::URL_SAFE_NO_PAD, secret);
    std::fs::write(&keys, format!(r#"{{"keys":[{{"kty":"oct","kid":"web","k":"{k}"}}]}}"#)).expect("written");
    let exp = Some(auth::unix_now() + 600);
    let mint = |claims: auth::JwtClaims| {
        auth::mint_jwt(&auth::JwtSigner::hs256(secret).with_kid("web"), &claims).expect("minted")
    };
    let publisher =
        mint(auth::JwtClaims { root: "demo-22".into(), put: vec![String::new()], exp, ..Default::default() });
    let viewer =
        mint(auth::JwtClaims { root: "demo-22".into(), get: vec![String::new()], exp, ..Default::default() });
    let keys_arg = keys.to_str().expect("a UTF-8 path");
    let relay = start_relay(&["--metrics", "127.0.0.1:0", "--auth", "jwt", "--auth-jwt-keys", keys_arg]);
    let png = target.join("browser-play-jwt.png");
    play_round(Round {
        what: "one relay requiring JWTs",
        path: &[&relay],
        draft: "22",
        viewer_draft: "18",
        png,
        tokens: Some((&publisher, &viewer)),
        viewer: Viewer::WebTransport,
        format: "hang",
    });
    std::fs::remove_file(&keys).ok();
}

/// The player admitted by the platform's service (`--auth http`, README.md "Admission by
/// HTTP"): a small service here allows moq-pub's token to publish and the page's (in its URL,
/// `&jwt=`, which the page passes on in the WebTransport URL) to watch; the catalog fetched
/// through `/fetch` with the page's token is decided by the same service.
#[test]
fn the_player_plays_admitted_by_the_platform() {
    require_browser_tools();
    let _turn = one_at_a_time();
    let service = std::net::TcpListener::bind("127.0.0.1:0").expect("the service's port");
    let url = format!("http://{}/admit", service.local_addr().expect("its address"));
    std::thread::spawn(move || {
        for stream in service.incoming().flatten() {
            admit(stream);
        }
    });
    let relay = start_relay(&["--metrics", "127.0.0.1:0", "--auth", "http", "--auth-url", &url]);
    let png = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/target/browser-play-admitted.png"));
    play_round(Round {
        what: "one relay admitting by the platform's service",
        path: &[&relay],
        draft: "22",
        viewer_draft: "18",
        png,
        tokens: Some(("platform-publisher", "platform-viewer")),
        viewer: Viewer::WebTransport,
        format: "hang",
    });
}

/// The platform's admission service of `the_player_plays_admitted_by_the_platform`: one
/// question per connection; `platform-publisher` may publish, `platform-viewer` watch.
fn admit(stream: std::net::TcpStream) {
    let Ok((_, body)) = process::read_request(&stream) else { return };
    let ask: Value = serde_json::from_slice(&body).unwrap_or_default();
    let has = |t: &str| ask["tokens"].as_array().is_some_and(|ts| ts.iter().any(|x| x == t));
    let answer = if has("platform-publisher") {
        serde_json::json!({"allow": true, "publish": [""], "subscribe": [], "ttl_s": 60})
    } else if has("platform-viewer") {
        serde_json::json!({"allow": true, "publish": [], "subscribe": [""], "ttl_s": 60})
    } else {
        serde_json::json!({"allow": false})
    }
    .to_string();
    let mut stream = stream;
    let _ = write!(
        stream,
        "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{answer}",
        answer.len()
    );
}

/// Viewers without WebTransport (UDP blocked, or a browser whose WebTransport the player does
/// not use) still watch: Chromium with `window.WebTransport` removed, and Debian's Firefox ESR
/// (which the player always sends to the WebSocket), play the broadcast over QMux over a
/// WebSocket on the relay's TCP port, at draft-18 (the relay's choice among what the player
/// offers) and at draft-16 (a relay of drafts 16 and 22), their own decoders counting frames
/// as in the WebTransport rounds.
#[test]
fn the_player_plays_over_a_websocket_without_webtransport() {
    require_browser_tools();
    let _turn = one_at_a_time();
    assert!(
        std::path::Path::new("/usr/bin/firefox-esr").exists(),
        "Firefox ESR is missing: run .ci/install-deps (it installs Debian's firefox-esr)"
    );
    let target = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/target"));
    let metrics = ["--metrics", "127.0.0.1:0"];
    for (viewer, name) in [(Viewer::ChromiumWithoutWebTransport, "chromium"), (Viewer::FirefoxEsr, "firefox")]
    {
        let relay = start_relay(&metrics);
        play_round(Round {
            what: &format!("one relay, {name} over a WebSocket"),
            path: &[&relay],
            draft: "22",
            viewer_draft: "18",
            png: target.join(format!("browser-play-ws-{name}-18.png")),
            tokens: None,
            viewer,
            format: "hang",
        });
        let relay = start_relay(&[&metrics[..], &["--drafts", "16,22"]].concat());
        play_round(Round {
            what: &format!("one relay of drafts 16 and 22, {name} over a WebSocket"),
            path: &[&relay],
            draft: "22",
            viewer_draft: "16",
            png: target.join(format!("browser-play-ws-{name}-16.png")),
            tokens: None,
            viewer,
            format: "hang",
        });
    }
}

/// web/test/shaka.mjs: Shaka Player on the relay at `port`, playing broadcast `name` with its
/// `manifest.msf.version` `version`: two pages, the second 5 s after the first, each read
/// `WINDOW_S` after its first frame. Returns its "done" event.
fn shaka(port: u16, name: &str, version: &str) -> Value {
    let out = Command::new("node")
        .current_dir(WEB)
        .args(["test/shaka.mjs", "--relay", &format!("https://127.0.0.1:{port}/"), "--namespace", name])
        .args(["--version", version, "--pages", "2", "--stagger-ms", "5000"])
        .args(["--seconds", &WINDOW_S.to_string()])
        .output()
        .expect("node runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let done = stdout.lines().rev().find(|l| l.starts_with("{\"event\":\"done\""));
    let Some(done) = done else {
        panic!("shaka.mjs ended without a report:\n{stdout}\n{}", String::from_utf8_lossy(&out.stderr))
    };
    serde_json::from_str(done).unwrap_or_else(|e| panic!("{e}: {done}"))
}

/// A broadcast from ffmpeg through moq-pub (`format`: `msf-cmaf` or `msf-loc`, at draft-22)
/// on the first relay of `path`, played by Shaka Player on the last at `version` (`auto`, its
/// default, which settles on draft-16; or `draft-14`): each of two viewers (one from the
/// start, one 5 s later) plays at least half of a 10 s window (from 2 s after its first
/// frame: shaka.mjs) and renders at least 90 % of the frames of the video time it played.
fn shaka_round(what: &str, path: &[&Relay], format: &str, version: &str) {
    let (Some(first), Some(last)) = (path.first(), path.last()) else { panic!("an empty path") };
    let name = format!("shaka-{format}");
    let (_ffmpeg, _publisher, log) = start_encoder(first.port, ("22", format), &name, 30, None);
    expect_line(&log, "moq-pub's catalog", |l| l.starts_with("moq-pub: catalog"));
    let done = shaka(last.port, &name, version);
    let console: Vec<&str> =
        done["console"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
    for (i, page) in done["pages"].as_array().expect("pages").iter().enumerate() {
        let frames = page["windowFrames"].as_u64().unwrap_or(0);
        let media = page["windowMediaS"].as_f64().unwrap_or(0.0);
        println!(
            "{what}, {format}, Shaka {version}, viewer {i}: {frames} frames rendered in {WINDOW_S} s ({media:.2} s of video), first after {:?} ms, protocols {}",
            page["firstFrameMs"].as_f64(),
            page["protocols"]
        );
        let explain = || format!("{page}\n{}\nmoq-pub:\n{}", console.join("\n"), drained(&log));
        // It plays (its clock went on for at least half the window) and the video it played
        // had its frames: at least 90 % of 30 a second of video time. A player starved of
        // CPU stalls (its clock stops) without the relay losing a frame.
        assert!(
            media >= WINDOW_S as f64 / 2.0,
            "{what}, {format}, {version}, viewer {i}: stalled: {}",
            explain()
        );
        assert!(
            frames as f64 >= 0.9 * 30.0 * media,
            "{what}, {format}, {version}, viewer {i}: {frames} frames in {media:.2} s of video: {}",
            explain()
        );
        assert_eq!(page["errors"], Value::Array(Vec::new()), "viewer {i}: {}", explain());
        // Its default offers moqt-16 then moq-00, and the relay takes the client's first choice;
        // draft-14 offers no protocol and names draft-14 in CLIENT_SETUP.
        let protocol = if version == "auto" { "moqt-16" } else { "" };
        assert_eq!(page["protocols"][0], protocol, "viewer {i}: {}", explain());
    }
}

/// A second player family: Shaka Player's MoQ client (npm `shaka-player`, its experimental
/// build) plays what `moq-pub --fmp4` publishes in the MOQT Streaming Format, with CMAF and
/// with LOC packaging, through the relay: at Shaka's default settings (draft-16, where it
/// writes GROUP_ORDER 0, and reads the latest group of a Largest Object subscription:
/// ARCHITECTURE.md, "Peer quirks") and at draft-14, and through an edge and its origin; and
/// moq-dev's `<moq-watch catalog-format="msf">` (the watch page's `&format=msf`) plays the
/// CMAF broadcast.
#[test]
fn shaka_and_the_player_play_msf_broadcasts_through_the_relay() {
    require_browser_tools();
    let _turn = one_at_a_time();
    assert!(
        Path::new(WEB).join("node_modules/shaka-player/dist/shaka-player.experimental.js").is_file(),
        "shaka-player is missing from web/node_modules: run .ci/install-deps"
    );
    for format in ["msf-cmaf", "msf-loc"] {
        for version in ["auto", "draft-14"] {
            let relay = start_relay(&[]);
            shaka_round("one relay", &[&relay], format, version);
        }
    }
    let origin = start_relay(&[]);
    let parent = format!("moqt://127.0.0.1:{}", origin.port);
    let edge = start_relay(&["--upstream", &parent, "--upstream-insecure", "true"]);
    shaka_round("edge and origin", &[&origin, &edge], "msf-cmaf", "auto");
    let relay = start_relay(&["--metrics", "127.0.0.1:0"]);
    let target = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/target"));
    play_round(Round {
        what: "one relay, an MSF broadcast",
        path: &[&relay],
        draft: "16",
        viewer_draft: "18",
        png: target.join("browser-play-msf.png"),
        tokens: None,
        viewer: Viewer::WebTransport,
        format: "msf-cmaf",
    });
}

/// moq-dev's browser publisher (`<moq-publish>`, npm `@moq/publish`, on `@moq/net` 0.1) in
/// Chromium with a fake camera, publishing through the relay, and the watch page playing it:
/// one viewer from the start and one joining 5 s later, each decoding at least 90 % of what
/// the publisher's encoder output over the viewer's window (web/test/publish.mjs). The
/// library offers moq-lite first, which this relay does not speak, so it settles on an IETF
/// draft: draft-18 when the relay offers every draft, draft-16 when it offers only that
/// (ARCHITECTURE.md, "Peer quirks": as a publisher it answers SUBSCRIBE with GROUP_ORDER in
/// the SUBSCRIBE_OK). The player's audio worklet loads (the page's CSP lets it).
#[test]
fn the_browser_publisher_is_played_through_the_relay() {
    require_browser_tools();
    let _turn = one_at_a_time();
    for (args, draft) in [(&[][..], "18"), (&["--drafts", "16"][..], "16")] {
        let relay = start_relay(args);
        let url = format!("http://127.0.0.1:{}/", relay.port);
        let out = Command::new("node")
            .current_dir(WEB)
            .args(["test/publish.mjs", "--relay", &url, "--name", "room.hang"])
            .args(["--seconds", "8", "--late-ms", "5000"])
            .output()
            .expect("node runs");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let Some(done) = stdout.lines().rev().find(|l| l.starts_with("{\"event\":\"done\"")) else {
            panic!("publish.mjs ended without a report:\n{stdout}\n{}", String::from_utf8_lossy(&out.stderr))
        };
        let done: Value = serde_json::from_str(done).unwrap_or_else(|e| panic!("{e}: {done}"));
        let console: Vec<&str> =
            done["console"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
        let explain = || format!("{}\n{}", done["publisher"], console.join("\n"));
        let protocol = Value::from(format!("moqt-{draft}"));
        assert_eq!(done["publisher"]["protocols"], Value::Array(vec![protocol.clone()]), "{}", explain());
        assert_eq!(done["publisher"]["errors"], Value::Array(Vec::new()), "{}", explain());
        for (i, viewer) in done["viewers"].as_array().expect("viewers").iter().enumerate() {
            let decoded = viewer["windowDecoded"].as_u64().unwrap_or(0);
            let encoded = viewer["windowEncoded"].as_u64().unwrap_or(0);
            println!(
                "draft-{draft}, viewer {i}: {decoded} frames decoded of {encoded} encoded in the window, first after {:?} ms",
                viewer["firstFrameMs"].as_f64()
            );
            assert!(encoded > 0, "draft-{draft}, viewer {i}: no window: {viewer}\n{}", explain());
            assert!(
                decoded * 10 >= encoded * 9,
                "draft-{draft}, viewer {i}: {decoded} of {encoded}: {viewer}\n{}",
                explain()
            );
            assert_eq!(viewer["protocols"], Value::Array(vec![protocol.clone()]), "{}", explain());
            assert_eq!(viewer["errors"], Value::Array(Vec::new()), "{}", explain());
        }
        let refused =
            console.iter().find(|l| l.contains("pageerror") || l.contains("Failed to load worklet"));
        assert!(refused.is_none(), "draft-{draft}: {refused:?}\n{}", explain());
    }
}
