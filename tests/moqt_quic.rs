//! MoQT over the real QUIC server: our client's session against the server's, both drafts;
//! and the third-party client aiomoqt (draft-16) against the server (`../shared/interop.md`).

use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use moq_edge::client::MoqtClient;
use moq_edge::runtime::moqt::MoqtFactory;
use moq_edge::runtime::{self, RuntimeConfig, ServerHandle};
use moq_edge::wire::model::{
    FullTrackName, Message, Parameters, RequestId, SetupOptions, Subscribe, TrackNamespace,
};
use moq_edge::wire::Version;

fn deadline() -> Instant {
    Instant::now() + Duration::from_secs(60)
}

fn server() -> ServerHandle {
    let mut rc = RuntimeConfig::new(([127, 0, 0, 1], 0).into(), 2);
    rc.pin = false;
    runtime::start(rc, Arc::new(MoqtFactory::default())).expect("server starts")
}

/// SETUP completes over QUIC in both drafts, and a request gets the honest answer of a node
/// that does not relay yet: REQUEST_ERROR NOT_SUPPORTED for that request.
#[test]
fn setup_and_requests_over_quic_in_both_drafts() {
    let server = server();
    for version in [Version::Draft16, Version::Draft22] {
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
                assert_eq!(e.error_code, 0x3, "{version:?}: NOT_SUPPORTED");
            }
            other => panic!("{version:?}: expected REQUEST_ERROR, got {other:?}"),
        }
    }
    server.shutdown().expect("stops");
}

/// aiomoqt's interop client, `setup-only` test, draft-16 (it does not speak draft-22). CI
/// installs it (`.ci/install-deps`); where Python 3.12 is truly absent the test says so.
#[test]
fn aiomoqt_setup_only_draft16() {
    let client = concat!(env!("CARGO_MANIFEST_DIR"), "/.venv-interop/bin/moq-interop-client");
    if !std::path::Path::new(client).exists() {
        let python = std::path::Path::new("/root/.pyenv/versions/3.12.1/bin/python3");
        assert!(
            !python.exists(),
            "Python 3.12 is here but the interop venv is not: run .ci/install-deps (it creates .venv-interop)"
        );
        eprintln!("SKIPPED: Python 3.12 is absent, so aiomoqt cannot run here");
        return;
    }
    let server = server();
    let url = format!("moqt://127.0.0.1:{}", server.local_addr().port());
    let out = Command::new(client)
        .args(["-r", &url, "--tls-disable-verify", "--draft", "16", "-t", "setup-only"])
        .output()
        .expect("aiomoqt runs");
    let tap = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "aiomoqt setup-only failed:\n{tap}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(tap.contains("ok 1"), "{tap}");
    server.shutdown().expect("stops");
}
