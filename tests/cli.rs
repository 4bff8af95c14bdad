//! The `moq-edge` binary as a person runs it: `--help`, `--check-config` with a TOML file,
//! and the message it gives when it cannot start its io_uring executors.

use std::process::Command;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_moq-edge"))
}

#[test]
fn help_explains_every_flag() {
    let out = bin().arg("--help").output().expect("runs");
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    for flag in [
        "--config",
        "--listen",
        "--cores",
        "--cert",
        "--key",
        "--congestion-control",
        "--retry",
        "--idle-timeout-ms",
        "--max-connections-per-core",
        "--gso",
        "--linger-ms",
        "--check-config",
    ] {
        assert!(text.contains(flag), "--help does not mention {flag}:\n{text}");
    }
}

#[test]
fn check_config_reads_the_toml_file_and_rejects_unknown_keys() {
    let dir = std::env::temp_dir().join(format!("moq-edge-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("tmp dir");
    let path = dir.join("edge.toml");
    std::fs::write(&path, "listen = \"127.0.0.1:5544\"\ncores = 1\nretry = \"always\"\n").expect("write");
    let out = bin().arg("--check-config").arg(&path).output().expect("runs");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("127.0.0.1:5544") && text.contains("configuration ok"), "{text}");

    std::fs::write(&path, "listen = \"127.0.0.1:5544\"\nlisten_port = 1\n").expect("write");
    let out = bin().arg("--check-config").arg(&path).output().expect("runs");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("listen_port"), "the error names the unknown key: {err}");
    std::fs::remove_dir_all(&dir).ok();
}

/// The documented example of deploy/ loads, and every key it documents (active or commented
/// out) is a flag that `--help` explains.
#[test]
fn the_deploy_example_loads_and_every_key_is_a_flag() {
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/moq-edge.toml");
    let out = bin().arg("--check-config").arg(example).output().expect("runs");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        text.contains("upstream   moqt://origin.example.net:4443") && text.contains("configuration ok"),
        "{text}"
    );

    let help = bin().arg("--help").output().expect("runs");
    let help = String::from_utf8_lossy(&help.stdout);
    let doc = std::fs::read_to_string(example).expect("the example");
    let mut keys: Vec<&str> = doc
        .lines()
        .map(|l| l.trim_start_matches('#').trim_start())
        .filter_map(|l| l.split_once(" = ").map(|(k, _)| k))
        .filter(|k| !k.is_empty() && k.chars().all(|c| c.is_ascii_lowercase() || c == '_'))
        .collect();
    keys.sort_unstable();
    keys.dedup();
    assert!(keys.len() >= 24, "the example documents every key: {keys:?}");
    for key in keys {
        let flag = match key {
            "auth_keys" => "--auth-key".to_string(),
            k => format!("--{}", k.replace('_', "-")),
        };
        assert!(help.contains(&flag), "config key {key} has no flag {flag} in --help");
    }
}

/// glommio needs at least 512 KiB of RLIMIT_MEMLOCK; below that the executors cannot start
/// and the relay must say what to do instead of panicking.
#[test]
fn a_tiny_memlock_limit_gives_a_clear_error() {
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "ulimit -l 64 && exec '{}' --listen 127.0.0.1:0 --cores 1",
            env!("CARGO_BIN_EXE_moq-edge")
        ))
        .output()
        .expect("runs");
    assert!(!out.status.success(), "started with a 64 KiB memlock limit");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("io_uring") && err.contains("RLIMIT_MEMLOCK"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

/// The container seccomp profile of deploy/ is valid JSON that allows io_uring (the default
/// container profiles block it, and the relay cannot start without it).
#[test]
fn the_seccomp_profile_allows_io_uring() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/seccomp-io-uring.json");
    let profile: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).expect("the profile")).expect("JSON");
    assert_eq!(profile["defaultAction"], "SCMP_ACT_ERRNO", "an allow list");
    let allowed: Vec<&str> = profile["syscalls"]
        .as_array()
        .expect("syscalls")
        .iter()
        .filter(|rule| rule["action"] == "SCMP_ACT_ALLOW")
        .flat_map(|rule| rule["names"].as_array().into_iter().flatten())
        .filter_map(|n| n.as_str())
        .collect();
    for needed in ["io_uring_setup", "io_uring_enter", "io_uring_register", "sendmmsg", "recvmmsg", "sendmsg"]
    {
        assert!(allowed.contains(&needed), "{needed} is not allowed");
    }
}
