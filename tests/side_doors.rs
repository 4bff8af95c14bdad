//! The HTTP side doors against the binary (README.md "HTTP side doors"): `GET /announced`
//! lists what the relay can serve (announced and published, on any core), `GET /fetch` answers
//! a track's newest group (or group N) from the cache, and with tokens required both need one
//! that grants subscribe, in the query or as a Bearer header.

#![allow(clippy::unwrap_used)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;

#[path = "support/process.rs"]
mod process;
use process::{free_udp, Proc};

/// An answer: status, headers (lowercase names), body.
type Answer = (u16, Vec<(String, String)>, Vec<u8>);

/// A relay's TCP port's answer to `GET path` (with `headers`).
fn http(port: u16, path: &str, headers: &str) -> Option<Answer> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    write!(s, "GET {path} HTTP/1.1\r\nHost: x\r\n{headers}\r\n").ok()?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).ok()?;
    let end = raw.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = String::from_utf8_lossy(&raw[..end]).into_owned();
    let mut lines = head.split("\r\n");
    let status = lines.next()?.split(' ').nth(1)?.parse().ok()?;
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    Some((status, headers, raw[end + 4..].to_vec()))
}

fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
}

/// The namespaces `GET /announced…` lists, as `a/b` paths.
fn announced(port: u16, path: &str, headers: &str) -> (u16, Vec<String>) {
    let (status, _, body) = http(port, path, headers).expect("an answer");
    if status != 200 {
        return (status, Vec::new());
    }
    let doc: Value = serde_json::from_slice(&body).expect("JSON");
    let list = doc["namespaces"].as_array().expect("namespaces").iter();
    let paths =
        list.map(|n| n.as_array().unwrap().iter().map(|f| f.as_str().unwrap()).collect::<Vec<_>>().join("/"));
    (status, paths.collect())
}

fn relay(port: u16, extra: &[&str]) -> Proc {
    Proc(
        Command::new(env!("CARGO_BIN_EXE_moq-edge"))
            .args(["--listen", &format!("127.0.0.1:{port}"), "--cores", "2", "--admission-busy-pct", "0"])
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("moq-edge starts"),
    )
}

/// moq-pub on the relay at `port`: `namespace`/`track`, 50 objects of 200 bytes a second in
/// groups of 10, until stopped.
fn publisher(port: u16, namespace: &str, track: &str, mode: &str, token: Option<&str>) -> Proc {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_moq-pub"));
    cmd.args(["--relay", &format!("127.0.0.1:{port}"), "--namespace", namespace, "--track", track, mode])
        .args(["--rate", "50", "--group-size", "10", "--object-size", "200"]);
    if let Some(t) = token {
        cmd.args(["--token", t]);
    }
    Proc(cmd.stdout(Stdio::null()).stderr(Stdio::null()).spawn().expect("moq-pub starts"))
}

fn wait_for(what: &str, f: impl FnMut() -> bool) {
    process::wait_for(what, Duration::from_secs(30), f)
}

#[test]
fn announced_and_fetch_answer_from_every_core() {
    let port = free_udp();
    let _relay = relay(port, &[]);
    wait_for("the web listener", || http(port, "/announced", "").is_some());
    // Two publishers (each on a core of the kernel's choosing): one PUBLISHes its track
    // (cached from the start), one announces its namespace.
    let _a = publisher(port, "live/a", "v", "--publish", None);
    let _b = publisher(port, "live/b", "v", "--announce", None);
    wait_for("both listed", || {
        let (_, mut list) = announced(port, "/announced", "");
        list.sort();
        list == ["live/a", "live/b"]
    });
    assert_eq!(announced(port, "/announced/live/a", ""), (200, vec!["live/a".to_string()]));
    assert_eq!(announced(port, "/announced/news", ""), (200, vec![]));
    assert_eq!(http(port, "/announced/live//a", "").unwrap().0, 400);

    // The newest group of live/a/v: whole objects of 200 bytes, in order.
    wait_for("a second group cached", || {
        http(port, "/fetch/live/a/v", "")
            .is_some_and(|(s, h, _)| s == 200 && header(&h, "x-moq-group") != Some("0"))
    });
    let (status, headers, body) = http(port, "/fetch/live/a/v", "").unwrap();
    assert_eq!(status, 200);
    let group: u64 = header(&headers, "x-moq-group").unwrap().parse().unwrap();
    let objects: usize = header(&headers, "x-moq-objects").unwrap().parse().unwrap();
    assert!((1..=10).contains(&objects), "{headers:?}");
    assert_eq!(body.len(), objects * 200, "the objects' payloads, one after the other");
    assert_eq!(header(&headers, "cache-control"), Some("public, max-age=1"));
    assert_eq!(header(&headers, "content-type"), Some("application/octet-stream"));
    assert_eq!(header(&headers, "access-control-allow-origin"), Some("*"));
    // An earlier group by number: whole (10 objects), cacheable for longer.
    let earlier = group.saturating_sub(1);
    let (status, headers, body) = http(port, &format!("/fetch/live/a/v?group={earlier}"), "").unwrap();
    assert_eq!((status, header(&headers, "x-moq-group")), (200, Some(earlier.to_string().as_str())));
    assert_eq!(body.len(), 10 * 200);
    assert_eq!(header(&headers, "cache-control"), Some("public, max-age=3600"));

    for (path, want) in [
        ("/fetch/live/a/nothing", 404),
        ("/fetch/live/b/v", 404), // announced, never subscribed: nothing cached
        ("/fetch/v", 400),
        ("/fetch/live/a/v?group=x", 400),
        ("/fetch/live/a/v?group=999999", 404),
    ] {
        assert_eq!(http(port, path, "").unwrap().0, want, "{path}");
    }
}

/// `moq-edge token` for `namespace` with `rights` (`--publish`, `--subscribe`).
fn token(key: &str, namespace: &str, rights: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_moq-edge"))
        .args(["token", "--key", key, "--namespace", namespace, "--ttl", "600"])
        .args(rights)
        .output()
        .expect("moq-edge token");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

#[test]
fn with_tokens_required_the_side_doors_need_one_that_grants_subscribe() {
    let key = "k1=c2VjcmV0LW9mLXRoZS1vbGQta2V5LTMyLWJ5dGVzISE";
    let port = free_udp();
    let _relay = relay(port, &["--auth", "tokens", "--auth-key", key]);
    wait_for("the web listener", || http(port, "/announced", "").is_some());
    let _a = publisher(port, "live/a", "v", "--publish", Some(&token(key, "live", &["--publish"])));
    let _n = publisher(port, "news/x", "v", "--publish", Some(&token(key, "news", &["--publish"])));
    let live = token(key, "live", &["--subscribe"]);
    let news = token(key, "news", &["--subscribe"]);
    let publish_only = token(key, "live", &["--publish"]);
    let bearer = |t: &str| format!("Authorization: Bearer {t}\r\n");

    let (status, headers, _) = http(port, "/announced", "").unwrap();
    assert_eq!((status, header(&headers, "www-authenticate")), (401, Some("Bearer")));
    assert_eq!(http(port, "/announced?token=v1.not-a-token", "").unwrap().0, 401);
    wait_for("live/a listed for a live viewer", || {
        announced(port, &format!("/announced?token={live}"), "") == (200, vec!["live/a".to_string()])
    });
    wait_for("news/x listed for a news viewer (a Bearer token)", || {
        announced(port, "/announced", &bearer(&news)) == (200, vec!["news/x".to_string()])
    });
    assert_eq!(announced(port, &format!("/announced?token={publish_only}"), ""), (200, vec![]));

    wait_for("a cached group", || {
        http(port, &format!("/fetch/live/a/v?token={live}"), "").is_some_and(|(s, _, _)| s == 200)
    });
    let (status, headers, _) = http(port, "/fetch/live/a/v", &bearer(&live)).unwrap();
    assert_eq!((status, header(&headers, "cache-control")), (200, Some("private, max-age=1")));
    assert_eq!(http(port, "/fetch/live/a/v", "").unwrap().0, 401);
    assert_eq!(http(port, "/fetch/live/a/v", &bearer(&news)).unwrap().0, 403);
    assert_eq!(http(port, &format!("/fetch/live/a/v?token={publish_only}"), "").unwrap().0, 403);
}
