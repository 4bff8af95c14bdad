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
    let out = bin().arg("--config").arg(&path).arg("--check-config").output().expect("runs");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("127.0.0.1:5544") && text.contains("configuration ok"), "{text}");

    std::fs::write(&path, "listen = \"127.0.0.1:5544\"\nlisten_port = 1\n").expect("write");
    let out = bin().arg("--config").arg(&path).arg("--check-config").output().expect("runs");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("listen_port"), "the error names the unknown key: {err}");
    std::fs::remove_dir_all(&dir).ok();
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
