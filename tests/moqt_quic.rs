//! MoQT over the real QUIC server running the relay: our client's session against it in every
//! draft, and the third-party client aiomoqt (draft-16 and draft-18 over raw QUIC, and over
//! WebTransport also draft-22; from PyPI, installed by `.ci/install-deps`) against it.

use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use moq_edge::client::{ClientError, MoqtClient, QuicConn};
use moq_edge::host::RelayFactory;
use moq_edge::relay::RelayConfig;
use moq_edge::runtime::{self, RuntimeConfig, ServerHandle};
use moq_edge::session::SessionConfig;
use moq_edge::wire::model::{
    FullTrackName, Message, Parameters, RequestId, Setup, SetupOptions, Subscribe, TrackNamespace,
};
use moq_edge::wire::Version;

fn deadline() -> Instant {
    Instant::now() + Duration::from_secs(60)
}

fn server() -> ServerHandle {
    let mut rc = RuntimeConfig::new(([127, 0, 0, 1], 0).into(), 2);
    rc.pin = false;
    let factory = RelayFactory::new(RelayConfig::default(), SessionConfig::default(), &[9; 32]);
    runtime::start(rc, Arc::new(factory)).expect("server starts")
}

/// SETUP completes over QUIC in every draft, and a SUBSCRIBE for a track nobody publishes is
/// answered REQUEST_ERROR DOES_NOT_EXIST (0x10; draft-14's SUBSCRIBE_ERROR 0x4) for that request.
#[test]
fn setup_and_requests_over_quic_in_every_draft() {
    let server = server();
    for version in Version::ALL {
        let setup = SetupOptions {
            path: Some(Bytes::from_static(b"/")),
            implementation: Some(Bytes::from_static(b"moq-edge-test")),
            ..SetupOptions::default()
        };
        let mut client = MoqtClient::connect(server.local_addr(), version, setup, deadline())
            .unwrap_or_else(|e| panic!("{version:?}: {e}"));
        let request_id = client.session_mut().next_request_id().expect("a request id");
        assert_eq!(request_id, RequestId(0));
        let subscribe = Message::Subscribe(Subscribe {
            request_id,
            track: FullTrackName {
                namespace: TrackNamespace::from_strs(&["live"]),
                name: Bytes::from_static(b"v"),
            },
            params: Parameters::default(),
        });
        match client.request(subscribe, deadline()).unwrap_or_else(|e| panic!("{version:?}: {e}")) {
            Message::RequestError(e) => {
                assert_eq!(e.request_id, request_id, "{version:?}");
                // SUBSCRIBE_ERROR's TRACK_DOES_NOT_EXIST is 0x4 at draft-14 (§9.9).
                let code = if version == Version::Draft14 { 0x4 } else { 0x10 };
                assert_eq!(e.error_code, code, "{version:?}: DOES_NOT_EXIST");
            }
            other => panic!("{version:?}: expected REQUEST_ERROR, got {other:?}"),
        }
    }
    server.shutdown().expect("stops");
}

/// A connection that completes the QUIC handshake and never sends SETUP is closed with
/// CONTROL_MESSAGE_TIMEOUT (0x11) once `setup_timeout` passes, in every draft.
#[test]
fn a_connection_without_setup_is_closed_with_control_message_timeout() {
    let mut rc = RuntimeConfig::new(([127, 0, 0, 1], 0).into(), 2);
    rc.pin = false;
    rc.setup_timeout = Duration::from_millis(300);
    let factory = RelayFactory::new(RelayConfig::default(), SessionConfig::default(), &[9; 32]);
    let server = runtime::start(rc, Arc::new(factory)).expect("server starts");
    for version in Version::ALL {
        let mut conn = QuicConn::connect(server.local_addr(), version.alpn()).expect("connects");
        conn.handshake(deadline()).expect("handshake");
        // Half a CLIENT_SETUP on the control stream, never the rest.
        let mut setup = Vec::new();
        version.encode_message(&Message::ClientSetup(Setup::default()), &mut setup).expect("encodes");
        let control = if version.request_streams() { 2 } else { 0 };
        conn.conn_mut().stream_send(control, &setup[..setup.len() / 2], false).expect("sends");
        match conn.drive(deadline(), |_| Ok(false)) {
            Err(ClientError::PeerClosed(e)) => {
                assert!(e.is_app, "{version:?}");
                assert_eq!(e.error_code, 0x11, "{version:?}: CONTROL_MESSAGE_TIMEOUT");
            }
            other => panic!("{version:?}: expected the relay to close, got {other:?}"),
        }
    }
    server.shutdown().expect("stops");
}

/// aiomoqt's standard tests (rendezvous-timeout is draft-18 only: it skips on draft-16, see
/// [`required`]).
const REQUIRED: [&str; 11] = [
    "setup-only",
    "announce-only",
    "publish-namespace-done",
    "subscribe-error",
    "announce-subscribe",
    "subscribe-before-announce",
    "data-subgroup-basic",
    "subscribe-namespace-lifecycle",
    "namespace-discovery",
    "publish-track-only",
    "publish-track-subscribe",
];

/// aiomoqt's opt-in tests (one per run): a FETCH of a group the relay forwarded, and a
/// SUBSCRIBE with a joining FETCH.
const OPT_IN: [&str; 2] = ["fetch", "join"];

/// The standard tests that must pass at `draft`: all of them, and from draft-18 on also
/// rendezvous-timeout (RENDEZVOUS_TIMEOUT, draft-18 §10.2.6, draft-22 §9.20). At draft-14
/// aiomoqt skips subscribe-namespace-lifecycle (it tests draft-16's NAMESPACE messages;
/// draft-14's discovery, PUBLISH_NAMESPACE to the subscriber, is namespace-discovery's).
fn required(draft: &str) -> Vec<&'static str> {
    let mut names = REQUIRED.to_vec();
    match draft {
        "14" => names.retain(|n| *n != "subscribe-namespace-lifecycle"),
        "16" => {}
        _ => names.push("rendezvous-timeout"),
    }
    names
}

/// aiomoqt's interop client at draft-16 against the relay on two cores: every required and
/// opt-in test passes, without a compat annotation. CI installs it (`.ci/install-deps`).
#[test]
fn aiomoqt_interop_draft16() {
    aiomoqt_interop("16");
}

/// The same at draft-14 (ALPN moq-00, the version agreed in SETUP: 0xff00000e).
#[test]
fn aiomoqt_interop_draft14() {
    aiomoqt_interop("14");
}

/// The same at draft-18 (ALPN moqt-18): its standard tests, rendezvous-timeout included, and
/// the opt-in FETCH and joining FETCH.
#[test]
fn aiomoqt_interop_draft18() {
    aiomoqt_interop("18");
}

/// The same at draft-20 over raw QUIC (ALPN moqt-20).
#[test]
fn aiomoqt_interop_draft20() {
    aiomoqt_interop("20");
}

/// The same at draft-22 over raw QUIC (ALPN moqt-22).
#[test]
fn aiomoqt_interop_draft22() {
    aiomoqt_interop("22");
}

fn aiomoqt_interop(draft: &str) {
    let client = concat!(env!("CARGO_MANIFEST_DIR"), "/.venv-interop/bin/moq-interop-client");
    // CI installs it: a missing client is a failure, never a skip.
    assert!(
        std::path::Path::new(client).exists(),
        "the interop venv is missing: run .ci/install-deps (it creates .venv-interop)"
    );
    let server = server();
    let url = format!("moqt://127.0.0.1:{}", server.local_addr().port());
    let run = |test: Option<&str>| {
        let mut cmd = Command::new(client);
        cmd.args(["-r", &url, "--tls-disable-verify", "--draft", draft]);
        if let Some(t) = test {
            cmd.args(["-t", t]);
        }
        let out = cmd.output().expect("aiomoqt runs");
        (String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    let passed = |tap: &str, name: &str| {
        tap.lines()
            .any(|l| l.starts_with("ok ") && l.ends_with(&format!(" - {name}")) && !l.contains("# SKIP"))
    };
    let (tap, err) = run(None);
    let alpn = if draft == "14" { "moq-00".to_string() } else { format!("moqt-{draft}") };
    assert!(tap.contains(&format!("alpn: \"{alpn}\"")), "not draft-{draft}:\n{tap}");
    for name in required(draft) {
        assert!(passed(&tap, name), "draft-{draft}: aiomoqt {name} did not pass:\n{tap}\n{err}");
    }
    for name in OPT_IN {
        let (tap, err) = run(Some(name));
        assert!(passed(&tap, name), "draft-{draft}: aiomoqt {name} did not pass:\n{tap}\n{err}");
    }
    server.shutdown().expect("stops");
}

/// aiomoqt's standard suite over WebTransport (`https://`, ALPN h3, WT-Protocol) at draft-16,
/// -18, -20 and -22, and at draft-14, for which aiomoqt names no WT-Protocol (draft-14 defines
/// none): the relay tells it from its CLIENT_SETUP. A third-party WebTransport client against
/// the same relay and port.
#[test]
fn aiomoqt_interop_over_webtransport() {
    let client = concat!(env!("CARGO_MANIFEST_DIR"), "/.venv-interop/bin/moq-interop-client");
    assert!(
        std::path::Path::new(client).exists(),
        "the interop venv is missing: run .ci/install-deps (it creates .venv-interop)"
    );
    let server = server();
    let url = format!("https://127.0.0.1:{}/moq", server.local_addr().port());
    for draft in ["14", "16", "18", "20", "22"] {
        let out = Command::new(client)
            .args(["-r", &url, "--tls-disable-verify", "--draft", draft])
            .output()
            .expect("aiomoqt runs");
        let tap = String::from_utf8_lossy(&out.stdout);
        let err = String::from_utf8_lossy(&out.stderr);
        // Its report names the transport and the WT-Protocol the relay chose.
        assert!(tap.contains("transport: \"webtransport-h3\""), "not over WebTransport:\n{tap}");
        match draft {
            "14" => assert!(tap.contains("moqt_version: \"moqt-14\""), "{tap}"),
            _ => assert!(tap.contains(&format!("webtransport_protocol: \"moqt-{draft}\"")), "{tap}"),
        }
        for name in required(draft) {
            let passed = tap
                .lines()
                .any(|l| l.starts_with("ok ") && l.ends_with(&format!(" - {name}")) && !l.contains("# SKIP"));
            assert!(passed, "draft-{draft} over WebTransport: aiomoqt {name} did not pass:\n{tap}\n{err}");
        }
    }
    server.shutdown().expect("stops");
}
