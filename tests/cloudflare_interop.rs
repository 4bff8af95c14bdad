//! Cloudflare's MoQT interop test client (`moq-test-client` from crates.io, the client of the
//! MoQ interop runner and of Cloudflare's relays) against the relay on two cores: version
//! 0.1.11 speaks draft-16 (8 tests), 0.2.0 draft-18 (18 tests). `.ci/install-deps` builds both
//! into a cache outside the repository; a missing client is a failure, never a skip. Each
//! suite runs whole, three times (its publish-track-subscribe and data-subgroup-basic tests
//! once failed often, not always), and any `not ok` fails.

use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;

use moq_edge::host::RelayFactory;
use moq_edge::relay::RelayConfig;
use moq_edge::runtime::{self, RuntimeConfig, ServerHandle};
use moq_edge::session::SessionConfig;

/// Whole-suite runs per client version.
const RUNS: usize = 3;

fn server() -> ServerHandle {
    let mut rc = RuntimeConfig::new(([127, 0, 0, 1], 0).into(), 2);
    rc.pin = false;
    let factory = RelayFactory::new(RelayConfig::default(), SessionConfig::default(), &[9; 32]);
    runtime::start(rc, Arc::new(factory)).expect("server starts")
}

/// Where `.ci/install-deps` put version `v` (the same cache rule).
fn client(v: &str) -> PathBuf {
    let root = std::env::var_os("MOQ_TEST_CLIENT_CACHE")
        .or_else(|| std::env::var_os("XDG_CACHE_HOME"))
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").expect("HOME")).join(".cache"));
    let bin = root.join(format!("moq-test-client-{v}")).join("bin").join("moq-test-client");
    assert!(bin.exists(), "{} is missing: run .ci/install-deps", bin.display());
    bin
}

/// Every test of the client's suite (`-l`) passes against the relay, `RUNS` times.
fn suite(v: &str, tests: usize) {
    let bin = client(v);
    let list = Command::new(&bin).arg("-l").output().expect("the client runs");
    let names: Vec<String> = String::from_utf8_lossy(&list.stdout).lines().map(str::to_owned).collect();
    assert_eq!(names.len(), tests, "moq-test-client {v} lists {names:?}");
    let server = server();
    let url = format!("moqt://127.0.0.1:{}", server.local_addr().port());
    for run in 1..=RUNS {
        let out =
            Command::new(&bin).args(["-r", &url, "--tls-disable-verify"]).output().expect("the client runs");
        let tap = String::from_utf8_lossy(&out.stdout);
        let err = String::from_utf8_lossy(&out.stderr);
        let failed: Vec<&str> = tap.lines().filter(|l| l.starts_with("not ok")).collect();
        assert!(failed.is_empty(), "moq-test-client {v}, run {run}: {failed:?}\n{tap}\n{err}");
        for name in &names {
            let passed = tap
                .lines()
                .any(|l| l.starts_with("ok ") && l.contains(&format!(" - {name}")) && !l.contains("# SKIP"));
            assert!(passed, "moq-test-client {v}, run {run}: {name} did not pass:\n{tap}\n{err}");
        }
        assert!(out.status.success(), "moq-test-client {v}, run {run}: {}\n{tap}\n{err}", out.status);
    }
    server.shutdown().expect("stops");
}

/// Draft-16: the 8 tests of moq-test-client 0.1.11.
#[test]
fn cloudflare_moq_test_client_draft16() {
    suite("0.1.11", 8);
}

/// Draft-18: the 18 tests of moq-test-client 0.2.0 (the moq-test scenarios included: subgroup
/// per group and per object, two subgroups, datagrams, extensions, increments, FORWARD 0).
#[test]
fn cloudflare_moq_test_client_draft18() {
    suite("0.2.0", 18);
}
