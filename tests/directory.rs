//! A cluster of three relay processes sharing a namespace directory on a real Redis
//! (`redis-server`, started here on a loopback port; `.ci/install-deps` installs it). No relay
//! has an upstream configured: each finds the others through the directory.
//!
//! - A publisher on relay A, subscribers on relay C: C looks the namespace up, opens a link to
//!   A and gets every object in order; a second subscriber on C costs A nothing more.
//! - A is killed: its entry expires, the publisher starts again on B (carrying on its
//!   numbering), and C's subscriber moves to B, losing nothing beyond what A never sent.
//! - Redis is stopped: the relays keep serving the track they carry, a lookup fails cleanly;
//!   Redis comes back: registrations are written again and new lookups work.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

#[path = "support/process.rs"]
mod process;
use process::{free_tcp, free_udp, get, metric, wait_for, Proc};

/// A redis-server on `port` with nothing persisted; waits until it answers PING.
fn redis(port: u16) -> Proc {
    let child = Command::new("redis-server")
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("redis-server starts (Debian package redis-server; .ci/install-deps installs it)");
    let proc = Proc(child);
    wait_for("redis-server to answer PING", Duration::from_secs(10), || redis_cmd(port, "PING") == "+PONG");
    proc
}

/// One inline Redis command; the first line of the answer ("" when nothing answers).
fn redis_cmd(port: u16, cmd: &str) -> String {
    redis_lines(port, cmd).into_iter().next().unwrap_or_default()
}

/// The lines of the answer to one inline Redis command.
fn redis_lines(port: u16, cmd: &str) -> Vec<String> {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else { return Vec::new() };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    if write!(s, "{cmd}\r\n").is_err() {
        return Vec::new();
    }
    let mut buf = [0u8; 512];
    let n = s.read(&mut buf).unwrap_or(0);
    String::from_utf8_lossy(&buf[..n]).lines().map(str::to_string).collect()
}

/// The value of `key` (`None`: no such key, or no Redis).
fn redis_get(port: u16, key: &str) -> Option<String> {
    let lines = redis_lines(port, &format!("GET {key}"));
    match lines.first().map(String::as_str) {
        Some(len) if len.starts_with('$') && len != "$-1" => lines.get(1).cloned(),
        _ => None,
    }
}

/// A relay on one core in the cluster of the Redis on `redis_port`, with a short lease.
fn relay(port: u16, metrics: u16, redis_port: u16) -> Proc {
    relay_at(port, metrics, &format!("redis://127.0.0.1:{redis_port}"), &[])
}

/// A relay on one core in the cluster of the directory at `url` (`more`: more flags).
fn relay_at(port: u16, metrics: u16, url: &str, more: &[&str]) -> Proc {
    let child = Command::new(env!("CARGO_BIN_EXE_moq-edge"))
        .args(["--listen", &format!("127.0.0.1:{port}"), "--cores", "1", "--web", "off"])
        .args(["--metrics", &format!("127.0.0.1:{metrics}"), "--cache-mib", "16"])
        .args(["--admission-busy-pct", "0", "--upstream-insecure", "true"])
        .args(["--directory", url])
        .args(["--advertise", &format!("moqt://127.0.0.1:{port}"), "--directory-lease-ms", "1500"])
        .args(more)
        .stdout(Stdio::null())
        .stderr(log(&format!("relay-{port}")))
        .spawn()
        .expect("moq-edge starts");
    Proc(child)
}

/// Where a process's standard error goes: a file under the system's temporary directory
/// when MOQ_EDGE_TEST_LOGS is set (to read after a failure), else nowhere.
fn log(name: &str) -> Stdio {
    match std::env::var_os("MOQ_EDGE_TEST_LOGS") {
        Some(_) => {
            let path = std::env::temp_dir().join(format!("moq-edge-directory-{name}.log"));
            std::fs::File::create(path).map(Stdio::from).unwrap_or_else(|_| Stdio::null())
        }
        None => Stdio::null(),
    }
}

/// A metric without labels (`name value`), or with exactly `labels` (`name{labels} value`).
fn plain(port: u16, name: &str, labels: &str) -> Option<u64> {
    let text = get(port, "/metrics")?;
    let prefix = if labels.is_empty() { format!("{name} ") } else { format!("{name}{{{labels}}} ") };
    text.lines().find_map(|l| l.strip_prefix(&prefix)).and_then(|v| v.trim().parse().ok())
}

/// moq-pub on `port` for `namespace`/v, 50 objects/s in groups of 10, from sequence `first`.
fn publisher(port: u16, namespace: &str, first: u64) -> Proc {
    let child = Command::new(env!("CARGO_BIN_EXE_moq-pub"))
        .args(["--relay", &format!("127.0.0.1:{port}"), "--namespace", namespace, "--track", "v"])
        .args(["--rate", "50", "--group-size", "10", "--count", "100000"])
        .args(["--first-seq", &first.to_string()])
        .stdout(Stdio::null())
        .stderr(log(&format!("pub-{port}-{}", namespace.replace('/', "-"))))
        .spawn()
        .expect("moq-pub starts");
    Proc(child)
}

/// moq-sub on `port` for `namespace`/v, `count` objects (output piped).
fn subscriber(port: u16, namespace: &str, count: u64) -> Child {
    Command::new(env!("CARGO_BIN_EXE_moq-sub"))
        .args(["--relay", &format!("127.0.0.1:{port}"), "--namespace", namespace, "--track", "v"])
        .args(["--count", &count.to_string(), "--timeout-s", "60", "--quiet"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("moq-sub starts")
}

fn output(child: Child) -> (bool, String) {
    let out = child.wait_with_output().expect("moq-sub ends");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.success(), text)
}

/// The number after `what` in moq-sub's summary ("gaps 1 (…)" → 1).
fn summary(text: &str, what: &str) -> u64 {
    let at = text.find(what).unwrap_or_else(|| panic!("no {what:?} in:\n{text}"));
    let rest = &text[at + what.len()..];
    rest.split(|c: char| !c.is_ascii_digit())
        .find(|s| !s.is_empty())
        .and_then(|s| s.parse().ok())
        .unwrap_or(u64::MAX)
}

#[test]
fn three_relays_find_each_other_through_the_directory_and_follow_a_namespace_that_moves() {
    let redis_port = free_tcp();
    let mut redis_server = redis(redis_port);
    let (p_a, p_b, p_c) = (free_udp(), free_udp(), free_udp());
    let (m_a, m_b, m_c) = (free_tcp(), free_tcp(), free_tcp());
    let mut a = relay(p_a, m_a, redis_port);
    let mut b = relay(p_b, m_b, redis_port);
    let _c = relay(p_c, m_c, redis_port);
    for m in [m_a, m_b, m_c] {
        wait_for("the relays to reach Redis", Duration::from_secs(30), || {
            plain(m, "moq_edge_directory_up", "") == Some(1)
        });
    }

    // A publisher on A: A registers live/cam.
    let started = Instant::now();
    let mut pub_a = publisher(p_a, "live/cam", 0);
    wait_for("A to register live/cam", Duration::from_secs(20), || {
        redis_get(redis_port, "moq-edge:ns:live/cam") == Some(format!("moqt://127.0.0.1:{p_a}"))
    });
    assert_eq!(plain(m_a, "moq_edge_directory_registered", ""), Some(1));

    // A subscriber on C, which has no route: looked up, linked to A, every object in order.
    let first = subscriber(p_c, "live/cam", 100);
    let (ok, text) = output(first);
    assert!(ok, "the first subscriber on C:\n{text}");
    assert!(text.contains("received 100 objects"), "{text}");
    assert!(text.contains("gaps 0 (0 missing), late/duplicate 0, streams reset 0"), "{text}");
    assert_eq!(plain(m_c, "moq_edge_directory_lookups_total", "result=\"hit\""), Some(1));
    assert_eq!(metric(m_c, "moq_edge_upstream_links_up"), Some(1), "C has one link, to A");

    // Two subscribers on C at once (the second long-lived, for the move below): A serves one
    // subscription for them, C's.
    let moving = subscriber(p_c, "live/cam", 100_000);
    let second = subscriber(p_c, "live/cam", 100);
    let mut seen = Vec::new();
    wait_for("C's subscriptions", Duration::from_secs(20), || {
        metric(m_c, "moq_edge_subscriptions") == Some(2)
    });
    for _ in 0..10 {
        seen.push(metric(m_a, "moq_edge_subscriptions").unwrap_or(u64::MAX));
        std::thread::sleep(Duration::from_millis(100));
    }
    let (ok, text) = output(second);
    assert!(
        ok && text.contains("gaps 0 (0 missing), late/duplicate 0"),
        "the second subscriber on C:\n{text}"
    );
    assert!(seen.iter().all(|&n| n == 1), "A carried exactly one subscription (C's link): {seen:?}");

    // A dies (no CONNECTION_CLOSE, no directory removal). The publisher starts again on B,
    // carrying on its numbering past what A could have sent; C's subscriber follows it to B.
    let _ = a.0.kill();
    let _ = a.0.wait();
    let _ = pub_a.0.kill();
    std::thread::sleep(Duration::from_millis(300));
    let first_seq = (started.elapsed().as_secs_f64() * 50.0) as u64 + 50;
    let _pub_b = publisher(p_b, "live/cam", first_seq);
    wait_for("B to take live/cam over once A's entry expired", Duration::from_secs(20), || {
        redis_get(redis_port, "moq-edge:ns:live/cam") == Some(format!("moqt://127.0.0.1:{p_b}"))
            && plain(m_b, "moq_edge_directory_registered", "") == Some(1)
    });
    wait_for("C's subscription to reach B", Duration::from_secs(20), || {
        metric(m_b, "moq_edge_subscriptions") == Some(1)
    });
    // 150 more objects (3 s) through B, then the subscriber is stopped.
    let objects_at_b = |m| metric(m, "moq_edge_objects_out_total").unwrap_or(0);
    let base = objects_at_b(m_b);
    wait_for("150 objects from B", Duration::from_secs(20), || objects_at_b(m_b) >= base + 150);
    let pid = moving.id().to_string();
    let _ = Command::new("kill").args(["-INT", &pid]).status();
    let (_, text) = output(moving);
    assert_eq!(summary(&text, "late/duplicate "), 0, "nothing twice or backwards:\n{text}");
    assert!(summary(&text, "gaps ") <= 1, "one gap at most, while no publisher was up:\n{text}");
    assert!(summary(&text, "received ") >= 150 + 100, "objects from A, then from B:\n{text}");

    // Redis stops: B and C keep serving the track they carry; a new lookup fails cleanly.
    let _ = redis_server.0.kill();
    let _ = redis_server.0.wait();
    wait_for("C to notice Redis is gone", Duration::from_secs(20), || {
        plain(m_c, "moq_edge_directory_up", "") == Some(0)
    });
    let during = subscriber(p_c, "live/cam", 50);
    let (ok, text) = output(during);
    assert!(
        ok && text.contains("gaps 0 (0 missing)"),
        "a subscriber of the carried track meanwhile:\n{text}"
    );
    let asked = Instant::now();
    let unknown = subscriber(p_c, "live/none", 1);
    let (ok, text) = output(unknown);
    assert!(!ok && asked.elapsed() < Duration::from_secs(10), "a lookup without Redis is refused:\n{text}");

    // Redis returns (empty): B writes its entry again, and a new namespace on B is found.
    let _redis_again = redis(redis_port);
    wait_for("B to register live/cam again", Duration::from_secs(20), || {
        redis_get(redis_port, "moq-edge:ns:live/cam") == Some(format!("moqt://127.0.0.1:{p_b}"))
    });
    let _pub_two = publisher(p_b, "live/two", 0);
    wait_for("B to register live/two", Duration::from_secs(20), || {
        redis_get(redis_port, "moq-edge:ns:live/two") == Some(format!("moqt://127.0.0.1:{p_b}"))
    });
    let (ok, text) = output(subscriber(p_c, "live/two", 50));
    assert!(ok && text.contains("received 50 objects"), "a new namespace after Redis came back:\n{text}");

    // B drains (SIGTERM): it leaves the directory, and sends its own subscribers to the one
    // sibling left, C (A's load entry expired with it).
    let on_b = subscriber(p_b, "live/two", 100_000);
    // Its SUBSCRIBE_OK: objects flow to it (counted by B).
    let out_before = metric(m_b, "moq_edge_objects_out_total").unwrap_or(0);
    std::thread::sleep(Duration::from_millis(500));
    wait_for("a subscriber on B", Duration::from_secs(20), || {
        metric(m_b, "moq_edge_subscriptions").is_some_and(|n| n >= 1)
            && metric(m_b, "moq_edge_objects_out_total").is_some_and(|n| n >= out_before + 25)
    });
    let pid = b.0.id().to_string();
    assert!(Command::new("kill").args(["-TERM", &pid]).status().expect("kill runs").success());
    wait_for("B's entries to go", Duration::from_secs(20), || {
        redis_get(redis_port, "moq-edge:ns:live/two").is_none()
            && redis_get(redis_port, &format!("moq-edge:relay:moqt://127.0.0.1:{p_b}")).is_none()
    });
    wait_for("B to exit", Duration::from_secs(30), || b.0.try_wait().ok().flatten().is_some());
    let pid = on_b.id().to_string();
    let _ = Command::new("kill").args(["-INT", &pid]).status();
    let (_, text) = output(on_b);
    let sibling = format!("New Session URI \"moqt://127.0.0.1:{p_c}\"");
    assert!(text.contains(&sibling), "GOAWAY names the least loaded sibling, C:\n{text}");
}

/// `rediss://`: the relays reach Redis over TLS (rustls), trusting the CA named by
/// `--directory-ca`; the cluster works as over plain TCP. A relay that does not trust the
/// server's certificate never reaches it.
#[test]
fn a_directory_over_tls() {
    // A CA and a certificate for 127.0.0.1 signed by it; Redis serves TLS only.
    let dir = std::env::temp_dir().join(format!("moq-edge-directory-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    let ca_key = rcgen::KeyPair::generate().expect("a CA key");
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("CA params");
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca = rcgen::CertifiedIssuer::self_signed(ca_params, ca_key).expect("the CA");
    let key = rcgen::KeyPair::generate().expect("a server key");
    let params = rcgen::CertificateParams::new(vec!["127.0.0.1".to_string()]).expect("server params");
    let cert = params.signed_by(&key, &ca).expect("the server certificate");
    let (ca_pem, cert_pem, key_pem) = (dir.join("ca.pem"), dir.join("cert.pem"), dir.join("key.pem"));
    std::fs::write(&ca_pem, ca.pem()).expect("ca.pem");
    std::fs::write(&cert_pem, cert.pem()).expect("cert.pem");
    std::fs::write(&key_pem, key.serialize_pem()).expect("key.pem");
    let port = free_tcp();
    let path = |p: &std::path::Path| p.to_string_lossy().into_owned();
    let _redis = Proc(
        Command::new("redis-server")
            .args(["--port", "0", "--tls-port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--tls-cert-file", &path(&cert_pem), "--tls-key-file", &path(&key_pem)])
            .args(["--tls-ca-cert-file", &path(&ca_pem), "--tls-auth-clients", "no"])
            .args(["--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server starts"),
    );
    let url = format!("rediss://127.0.0.1:{port}");
    let ca_arg = path(&ca_pem);
    let (p_a, p_c, p_x) = (free_udp(), free_udp(), free_udp());
    let (m_a, m_c, m_x) = (free_tcp(), free_tcp(), free_tcp());
    let _a = relay_at(p_a, m_a, &url, &["--directory-ca", &ca_arg]);
    let _c = relay_at(p_c, m_c, &url, &["--directory-ca", &ca_arg]);
    // Without the CA: the system roots do not know it.
    let mut x = relay_at(p_x, m_x, &url, &[]);
    for m in [m_a, m_c] {
        wait_for("the relays to reach Redis over TLS", Duration::from_secs(30), || {
            plain(m, "moq_edge_directory_up", "") == Some(1)
        });
    }
    let _pub_a = publisher(p_a, "live/tls", 0);
    wait_for("A to register live/tls", Duration::from_secs(20), || {
        plain(m_a, "moq_edge_directory_registered", "") == Some(1)
    });
    let (ok, text) = output(subscriber(p_c, "live/tls", 50));
    assert!(ok && text.contains("received 50 objects"), "a subscriber on C, found over TLS:\n{text}");
    assert_eq!(plain(m_c, "moq_edge_directory_lookups_total", "result=\"hit\""), Some(1));
    // X runs (its metrics answer) and has never reached Redis.
    wait_for("X's metrics endpoint", Duration::from_secs(30), || {
        let exited = x.0.try_wait().ok().flatten();
        assert!(
            exited.is_none(),
            "the relay without the CA exited ({exited:?}): it must run, not reach Redis"
        );
        plain(m_x, "moq_edge_directory_up", "").is_some()
    });
    assert_eq!(plain(m_x, "moq_edge_directory_up", ""), Some(0), "an untrusted certificate is refused");
    assert_eq!(plain(m_x, "moq_edge_directory_registered", ""), Some(0));
    let _ = std::fs::remove_dir_all(&dir);
}
