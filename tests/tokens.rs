//! Tokens minted by a third party: JWTs from PyJWT (in the interop venv `.ci/install-deps`
//! makes), verified by relay processes started with `--auth jwt --auth-jwt-keys FILE`
//! (README.md, "Authorization"). Over raw QUIC at draft-16 and draft-22: a token for the
//! namespace lets the subscription through (no publisher yet: 0x10), one for another
//! namespace is UNAUTHORIZED (0x1), and an expired one, `alg: none`, a wrong signature or an
//! unknown `kid` in SETUP close the session. The key file is rotated under the running relay:
//! new tokens pass and old ones fail without a restart. And a tier: an edge presents its own
//! JWT upstream (`--upstream-token`), a publisher and a subscriber each present theirs, and the
//! objects flow publisher → origin → edge → subscriber.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use moq_edge::client::{ClientError, Subscriber};
use moq_edge::wire::model::{AuthToken, FullTrackName, SetupOptions, TrackNamespace};
use moq_edge::wire::Version;

#[path = "support/process.rs"]
mod process;
use process::{free_tcp, free_udp, metric, wait_for, Proc};

const PYTHON: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/.venv-interop/bin/python");
/// An HS256 secret (32 bytes, base64url) and another one.
const SECRET_OLD: &str = "c2VjcmV0LW9mLXRoZS1vbGQta2V5LTMyLWJ5dGVzISE";
const SECRET_NEW: &str = "YW5vdGhlci1zZWNyZXQtZm9yLXRoZS1uZXcta2V5ISE";

fn jwks(kid: &str, secret: &str) -> String {
    format!(r#"{{"keys":[{{"kty":"oct","kid":"{kid}","alg":"HS256","k":"{secret}"}}]}}"#)
}

/// A JWT minted by PyJWT: `claims` (a Python dict literal, where `NOW` is the current Unix
/// time), signed HS256 with `secret` under `kid`, or unsigned (`alg: none`) when `secret` is
/// `None`.
fn pyjwt(claims: &str, kid: &str, secret: Option<&str>) -> String {
    let sign = match secret {
        Some(s) => format!(
            "jwt.encode(claims, base64.urlsafe_b64decode('{s}' + '=' * (-len('{s}') % 4)), algorithm='HS256', headers={{'kid': '{kid}'}})"
        ),
        None => format!("jwt.encode(claims, None, algorithm='none', headers={{'kid': '{kid}'}})"),
    };
    let script =
        format!("import base64, time, jwt\nNOW = int(time.time())\nclaims = {claims}\nprint({sign})");
    let out = Command::new(PYTHON).args(["-c", &script]).output().unwrap_or_else(|e| {
        panic!("{PYTHON}: {e}; run .ci/install-deps (it installs PyJWT in .venv-interop)")
    });
    assert!(out.status.success(), "PyJWT: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).expect("ASCII").trim().to_string()
}

/// A relay process on `port` that requires JWTs verified with the keys in `keys`.
fn relay(port: u16, metrics: u16, keys: &Path, extra: &[&str]) -> Proc {
    Proc(
        Command::new(env!("CARGO_BIN_EXE_moq-edge"))
            .args(["--listen", &format!("127.0.0.1:{port}"), "--cores", "1", "--web", "off"])
            .args(["--metrics", &format!("127.0.0.1:{metrics}"), "--admission-busy-pct", "0"])
            .args(["--auth", "jwt", "--auth-jwt-keys"])
            .arg(keys)
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("moq-edge starts"),
    )
}

/// What a subscriber with `token` in SETUP gets for live/cam/v on the relay at `port`:
/// `Ok(code)` for a refused SUBSCRIBE (0x10 means it was authorized: no publisher), `Err`
/// when the session itself was refused or closed.
fn subscribe_with(port: u16, version: Version, token: &str) -> Result<u64, ClientError> {
    let deadline = Instant::now() + Duration::from_secs(10);
    let setup = SetupOptions {
        auth_tokens: vec![AuthToken::UseValue { token_type: 0, value: token.to_string().into() }],
        ..SetupOptions::default()
    };
    let mut s = Subscriber::connect_setup(
        std::net::SocketAddr::from(([127, 0, 0, 1], port)),
        version,
        setup,
        deadline,
    )?;
    let track = FullTrackName { namespace: TrackNamespace::from_strs(&["live", "cam"]), name: "v".into() };
    match s.subscribe(track, None, deadline) {
        Err(ClientError::Refused { code, .. }) => Ok(code),
        Err(e) => Err(e),
        Ok(_) => Ok(0),
    }
}

#[test]
fn jwts_from_pyjwt_authorize_sessions_and_keys_rotate_without_a_restart() {
    let dir = std::env::temp_dir().join(format!("moq-edge-tokens-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    let keys = dir.join("jwks.json");
    std::fs::write(&keys, jwks("old", SECRET_OLD)).expect("written");
    let (port, metrics) = (free_udp(), free_tcp());
    let _relay = relay(port, metrics, &keys, &[]);
    wait_for("the relay", Duration::from_secs(30), || metric(metrics, "moq_edge_sessions").is_some());

    let viewer = |root: &str, exp: &str| format!("{{'root': '{root}', 'get': '', 'exp': {exp}, 'iat': NOW}}");
    let good = pyjwt(&viewer("live", "NOW + 600"), "old", Some(SECRET_OLD));
    let elsewhere = pyjwt(&viewer("news", "NOW + 600"), "old", Some(SECRET_OLD));
    let expired = pyjwt(&viewer("live", "NOW - 600"), "old", Some(SECRET_OLD));
    let unsigned = pyjwt(&viewer("live", "NOW + 600"), "old", None);
    let forged = pyjwt(&viewer("live", "NOW + 600"), "old", Some(SECRET_NEW));
    let unknown = pyjwt(&viewer("live", "NOW + 600"), "other", Some(SECRET_OLD));
    for version in [Version::Draft16, Version::Draft22] {
        assert_eq!(subscribe_with(port, version, &good).ok(), Some(0x10), "{version:?}: authorized");
        assert_eq!(subscribe_with(port, version, &elsewhere).ok(), Some(0x1), "{version:?}: UNAUTHORIZED");
        for (what, token) in
            [("expired", &expired), ("alg none", &unsigned), ("forged", &forged), ("unknown kid", &unknown)]
        {
            let got = subscribe_with(port, version, token);
            assert!(got.is_err(), "{version:?}: a SETUP token {what} must close the session: {got:?}");
        }
    }

    // Rotation: the file now holds only the new key; the relay picks it up without a restart.
    std::fs::write(&keys, jwks("new", SECRET_NEW)).expect("written");
    let fresh = pyjwt(&viewer("live", "NOW + 600"), "new", Some(SECRET_NEW));
    wait_for("the new key in force", Duration::from_secs(30), || {
        subscribe_with(port, Version::Draft16, &fresh).ok() == Some(0x10)
    });
    assert!(subscribe_with(port, Version::Draft16, &good).is_err(), "the old key is gone");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn an_edge_presents_its_own_jwt_to_its_origin() {
    let dir = std::env::temp_dir().join(format!("moq-edge-tokens-tier-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    let keys = dir.join("jwks.json");
    std::fs::write(&keys, jwks("k", SECRET_OLD)).expect("written");
    let token = |claims: &str| pyjwt(claims, "k", Some(SECRET_OLD));
    let relay_token = token("{'root': '', 'get': '', 'put': '', 'exp': NOW + 600}");
    let publisher_token = token("{'root': 'live', 'put': 'cam', 'exp': NOW + 600}");
    let viewer_token = token("{'root': 'live/cam', 'get': '', 'exp': NOW + 600}");
    let (p_origin, p_edge, m_origin, m_edge) = (free_udp(), free_udp(), free_tcp(), free_tcp());
    let _origin = relay(p_origin, m_origin, &keys, &[]);
    let upstream = format!("moqt://127.0.0.1:{p_origin}");
    let upstream_args =
        ["--upstream", &upstream, "--upstream-insecure", "true", "--upstream-token", &relay_token];
    let _edge = relay(p_edge, m_edge, &keys, &upstream_args);
    wait_for("the edge's link", Duration::from_secs(30), || {
        metric(m_edge, "moq_edge_upstream_links_up") == Some(1)
    });
    let track = ["--namespace", "live/cam", "--track", "v"];
    let _publisher = Proc(
        Command::new(env!("CARGO_BIN_EXE_moq-pub"))
            .args(["--relay", &format!("127.0.0.1:{p_origin}"), "--token", &publisher_token])
            .args(track)
            .args(["--count", "3000"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("moq-pub starts"),
    );
    std::thread::sleep(Duration::from_millis(500));
    let out = Command::new(env!("CARGO_BIN_EXE_moq-sub"))
        .args(["--relay", &format!("127.0.0.1:{p_edge}"), "--token", &viewer_token, "--draft", "22"])
        .args(track)
        .args(["--count", "50", "--timeout-s", "60"])
        .output()
        .expect("moq-sub runs");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success() && text.contains("received 50 objects"), "{text}");
    std::fs::remove_dir_all(&dir).ok();
}
