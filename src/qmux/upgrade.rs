//! The WebSocket upgrade (RFC 6455 §4) and QMux's subprotocol names: `qmux-VV.<alpn>` picks
//! the QMux wire version and the application protocol (as the browser client, npm
//! `@moq/qmux`, offers them).

use base64::Engine;

use crate::Version;

/// RFC 6455 §1.3.
const GUID: &str = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/// `Sec-WebSocket-Accept` for a `Sec-WebSocket-Key` (RFC 6455 §4.2.2): base64 of the SHA-1 of
/// the key followed by the GUID.
pub fn accept_key(client_key: &str) -> String {
    let mut ctx = ring::digest::Context::new(&ring::digest::SHA1_FOR_LEGACY_USE_ONLY);
    ctx.update(client_key.trim().as_bytes());
    ctx.update(GUID.as_bytes());
    base64::engine::general_purpose::STANDARD.encode(ctx.finish())
}

/// A fresh `Sec-WebSocket-Key` (RFC 6455 §4.1): 16 random bytes, base64.
pub fn random_key() -> String {
    use ring::rand::SecureRandom;
    let mut nonce = [0u8; 16];
    let _ = ring::rand::SystemRandom::new().fill(&mut nonce);
    base64::engine::general_purpose::STANDARD.encode(nonce)
}

fn prefix(v: Version) -> &'static str {
    match v {
        Version::Qmux00 => "qmux-00",
        Version::Qmux01 => "qmux-01",
        Version::Qmux02 => "qmux-02",
    }
}

/// `qmux-01.moqt-18` → (Qmux01, Some("moqt-18")); bare `qmux-01` → (Qmux01, None).
pub fn parse_subprotocol(token: &str) -> Option<(Version, Option<&str>)> {
    let (head, app) = match token.split_once('.') {
        Some((h, a)) if !a.is_empty() => (h, Some(a)),
        Some(_) => return None,
        None => (token, None),
    };
    let v = [Version::Qmux00, Version::Qmux01, Version::Qmux02].into_iter().find(|v| prefix(*v) == head)?;
    Some((v, app))
}

/// The server's choice: for each app in `apps` order, each version in `versions` order, the
/// first `qmux-VV.app` among `offered`: (that token, its version, the app). Bare `qmux-VV`
/// and other tokens are never chosen.
pub fn choose(offered: &[&str], apps: &[&str], versions: &[Version]) -> Option<(String, Version, String)> {
    for app in apps {
        for v in versions {
            let want = format!("{}.{app}", prefix(*v));
            if let Some(tok) = offered.iter().find(|o| o.trim() == want) {
                return Some((tok.trim().to_string(), *v, app.to_string()));
            }
        }
    }
    None
}

/// What our client offers: every `qmux-VV.app`, apps first, in the given orders.
pub fn offer(apps: &[&str], versions: &[Version]) -> Vec<String> {
    apps.iter().flat_map(|a| versions.iter().map(move |v| format!("{}.{a}", prefix(*v)))).collect()
}
