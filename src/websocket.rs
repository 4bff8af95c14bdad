//! The web listener's WebSocket upgrade (RFC 6455 §4.2): a `GET` with `Upgrade: websocket`
//! that offers a QMux subprotocol naming a MoQT draft this relay speaks (`qmux-01.moqt-18`) is
//! answered `101 Switching Protocols` with the relay's choice, and the connection is handed to
//! a core, which serves MoQT over QMux on it (ARCHITECTURE.md, "Transports"). The choice is
//! the relay's preference (its drafts in order, then the QMux versions in order) among what
//! the client offers; a request that offers none of them is answered 400, one of another
//! WebSocket version 426 (§4.4).

use runtime::{StreamAcceptor, StreamRequest};

use crate::web::Response;

/// Where upgraded connections go, and what the relay offers on them.
#[derive(Clone)]
pub struct WebSocketSink {
    pub acceptor: StreamAcceptor,
    /// The MoQT ALPNs the relay speaks, most preferred first.
    pub apps: Vec<String>,
    /// The QMux versions, most preferred first.
    pub versions: Vec<qmux::Version>,
}

impl WebSocketSink {
    /// Upgrades to the relay's `drafts` (in its order of preference) over every QMux version
    /// ([`QMUX_VERSIONS`]).
    pub fn new(acceptor: StreamAcceptor, drafts: &[wire::Version]) -> Self {
        WebSocketSink { acceptor, apps: moqt::draft_alpns(drafts), versions: QMUX_VERSIONS.to_vec() }
    }
}

/// The QMux versions served, most preferred first: -01 (what the browser library pairs with
/// moqt-18), then -02 and -00.
pub const QMUX_VERSIONS: [qmux::Version; 3] =
    [qmux::Version::Qmux01, qmux::Version::Qmux02, qmux::Version::Qmux00];

/// An accepted upgrade: the `101` to write, then the connection to hand over.
#[derive(Debug)]
pub struct Accepted {
    pub response: Vec<u8>,
    pub version: qmux::Version,
    pub request: StreamRequest,
}

/// The value of every header `name` (case-insensitive), in order.
fn headers<'a>(head: &'a str, name: &'a str) -> impl Iterator<Item = &'a str> + 'a {
    head.split("\r\n").skip(1).filter_map(move |line| {
        let (n, v) = line.split_once(':')?;
        n.trim().eq_ignore_ascii_case(name).then_some(v.trim())
    })
}

/// Whether some `name` header's comma-separated list holds `token` (case-insensitive).
fn has_token(head: &str, name: &str, token: &str) -> bool {
    headers(head, name).flat_map(|v| v.split(',')).any(|t| t.trim().eq_ignore_ascii_case(token))
}

/// Whether `key` is a Sec-WebSocket-Key: a nonce of 16 bytes in base64 (RFC 6455 §4.1; RFC
/// 4648 §4), so 24 characters whose last two are padding.
fn is_nonce(key: &str) -> bool {
    use base64::Engine;
    key.len() == 24
        && base64::engine::general_purpose::STANDARD.decode(key).is_ok_and(|nonce| nonce.len() == 16)
}

/// `None`: not a WebSocket upgrade (answered as any request). `Some(Err(_))`: an upgrade
/// refused with that answer. `Some(Ok(_))`: accepted. `target` is the request line's.
pub fn upgrade(head: &[u8], target: &str, sink: &WebSocketSink) -> Option<Result<Accepted, Response>> {
    let head = std::str::from_utf8(head).ok()?;
    if !has_token(head, "upgrade", "websocket") {
        return None;
    }
    Some(accept(head, target, sink))
}

fn accept(head: &str, target: &str, sink: &WebSocketSink) -> Result<Accepted, Response> {
    // §4.1: "The method of the request MUST be GET, and the HTTP version MUST be at least 1.1",
    // with a Host header, Upgrade and Connection as below.
    let line = head.split("\r\n").next().unwrap_or_default();
    if !head.starts_with("GET ") || !has_token(head, "connection", "upgrade") {
        return Err(Response::text(400, "a WebSocket upgrade is a GET with Connection: upgrade\n"));
    }
    if !line.ends_with(" HTTP/1.1") {
        return Err(Response::text(400, "a WebSocket upgrade is an HTTP/1.1 request\n"));
    }
    if headers(head, "host").count() != 1 {
        return Err(Response::text(400, "a WebSocket upgrade has one Host header\n"));
    }
    if !headers(head, "sec-websocket-version").any(|v| v == "13") {
        return Err(Response::text(426, "WebSocket version 13 only\n").with("Sec-WebSocket-Version", "13"));
    }
    let key = headers(head, "sec-websocket-key").next().unwrap_or_default();
    if !is_nonce(key) {
        return Err(Response::text(400, "bad Sec-WebSocket-Key\n"));
    }
    let offered: Vec<&str> = headers(head, "sec-websocket-protocol")
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .collect();
    let apps: Vec<&str> = sink.apps.iter().map(String::as_str).collect();
    let Some((token, version, alpn)) = qmux::upgrade::choose(&offered, &apps, &sink.versions) else {
        return Err(Response::text(400, "no QMux subprotocol offered names a MoQT draft spoken here\n"));
    };
    let authority = headers(head, "host").next().unwrap_or_default().to_string();
    let response = format!(
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: {}\r\nSec-WebSocket-Protocol: {token}\r\n\r\n",
        qmux::upgrade::accept_key(key)
    );
    Ok(Accepted {
        response: response.into_bytes(),
        version,
        request: StreamRequest { alpn, authority, path: target.to_string() },
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn sink() -> WebSocketSink {
        WebSocketSink::new(runtime::StreamAcceptor::detached(), &[wire::Version::Draft18])
    }

    fn request(line: &str, host: &str, key: &str) -> String {
        format!(
            "{line}\r\n{host}Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: qmux-01.moqt-18\r\n\r\n"
        )
    }

    fn status(head: &str) -> u16 {
        match upgrade(head.as_bytes(), "/", &sink()) {
            Some(Ok(_)) => 101,
            Some(Err(r)) => r.status,
            None => 0,
        }
    }

    /// RFC 6455 §4.1 and §4.2.1: HTTP/1.1, one Host, and a key that is 16 bytes in base64;
    /// anything else is refused 400 (§4.2.2), not upgraded.
    #[test]
    fn an_upgrade_is_http_1_1_with_a_host_and_a_base64_nonce() {
        let (line, host, key) = ("GET / HTTP/1.1", "Host: relay\r\n", "dGhlIHNhbXBsZSBub25jZQ==");
        assert_eq!(status(&request(line, host, key)), 101);
        assert_eq!(status(&request("GET / HTTP/1.0", host, key)), 400, "HTTP/1.0");
        assert_eq!(status(&request(line, "", key)), 400, "no Host");
        assert_eq!(status(&request(line, "Host: a\r\nHost: b\r\n", key)), 400, "two Hosts");
        for bad in ["!!!!!!!!!!!!!!!!!!!!!!!!", "dGhlIHNhbXBsZSBub25jZQ", "dGhlIHNhbXBsZSBub25jZXh4eA=="] {
            assert_eq!(status(&request(line, host, bad)), 400, "key {bad:?}");
        }
        // 24 base64 characters that are not 16 bytes (no padding: 18 bytes).
        assert_eq!(status(&request(line, host, "dGhlIHNhbXBsZSBub25jZXh4")), 400);
    }
}
