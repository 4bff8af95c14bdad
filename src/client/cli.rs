//! What `moq-pub` and `moq-sub` share on their command lines: the relay, the draft and the
//! track.

use std::net::{SocketAddr, ToSocketAddrs};

use anyhow::{anyhow, Context};
use bytes::Bytes;

use super::stamp::parse_namespace;
use super::Relay;
use wire::model::{AuthToken, FullTrackName, SetupOptions};
use wire::Version;

/// `--relay`, `--draft`, `--namespace`, `--track`, `--token`.
#[derive(Debug, Clone, clap::Args)]
pub struct TrackArgs {
    /// Relay: host:port or moqt://host:port (raw QUIC), https://host:port/path
    /// (WebTransport over HTTP/3 on the same UDP port), or ws:// / wss://host:port/path (QMux
    /// over a WebSocket on the TCP port of the same number).
    #[arg(long, default_value = "127.0.0.1:4443")]
    pub relay: String,
    /// MoQT draft: 16, 18, 20 or 22 (chooses the ALPN moqt-16 / moqt-18 / moqt-20 / moqt-22).
    #[arg(long, default_value = "16", value_parser = parse_draft)]
    pub draft: Version,
    /// Track namespace, fields separated by '/' (for example live/room1).
    #[arg(long)]
    pub namespace: String,
    /// Track name.
    #[arg(long, default_value = "video")]
    pub track: String,
    /// An authorization token for the session, sent in SETUP (AUTHORIZATION TOKEN): any
    /// format the relay takes (its own, a JWT, a base64url Common Access Token).
    #[arg(long, value_name = "TOKEN")]
    pub token: Option<String>,
}

impl TrackArgs {
    /// The SETUP options these arguments ask for: the token, if any.
    pub fn setup(&self) -> SetupOptions {
        let auth_tokens = self
            .token
            .iter()
            .map(|t| AuthToken::UseValue { token_type: 0, value: Bytes::from(t.clone()) })
            .collect();
        SetupOptions { auth_tokens, ..SetupOptions::default() }
    }
}

/// Parses a draft number: `16`, `18`, `20` or `22` (the number in its ALPN `moqt-NN`).
pub fn parse_draft(s: &str) -> Result<Version, String> {
    Version::KNOWN
        .into_iter()
        .find(|v| v.number().to_string() == s)
        .ok_or_else(|| format!("unknown draft {s:?} (14, 16, 18, 20 or 22)"))
}

/// The first address of a relay given as `host:port` or `moqt://host:port[/path]`.
pub fn resolve_relay(relay: &str) -> anyhow::Result<SocketAddr> {
    let authority = relay.strip_prefix("moqt://").unwrap_or(relay);
    let authority = authority.split('/').next().unwrap_or(authority);
    authority
        .to_socket_addrs()
        .with_context(|| format!("resolving {relay}"))?
        .next()
        .ok_or_else(|| anyhow!("{relay}: no address"))
}

/// A relay given as `host:port`, `moqt://host:port[/path]` (raw QUIC),
/// `https://host:port/path` (WebTransport at that URL) or `ws://` / `wss://host:port/path`
/// (QMux over a WebSocket at that URL, on the relay's TCP port).
pub fn parse_relay(relay: &str) -> anyhow::Result<Relay> {
    let url = ["https://", "wss://", "ws://"].iter().find_map(|s| relay.strip_prefix(s));
    match url {
        Some(rest) => {
            let authority = rest.split('/').next().unwrap_or(rest);
            let authority = authority.split('?').next().unwrap_or(authority);
            let addr = authority
                .to_socket_addrs()
                .with_context(|| format!("resolving {relay}"))?
                .next()
                .ok_or_else(|| anyhow!("{relay}: no address"))?;
            Ok(Relay { addr, url: Some(relay.to_string()), congestion_control: None, ack_every: None })
        }
        None => Ok(Relay::from(resolve_relay(relay)?)),
    }
}

impl TrackArgs {
    /// The relay: its first address, and the WebTransport URL for `https://`.
    pub fn peer(&self) -> anyhow::Result<Relay> {
        parse_relay(&self.relay)
    }

    /// The full track name.
    pub fn full_track_name(&self) -> anyhow::Result<FullTrackName> {
        let namespace = parse_namespace(&self.namespace).map_err(|e| anyhow!(e))?;
        Ok(FullTrackName { namespace, name: Bytes::from(self.track.clone()) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relay_urls_and_addresses() {
        let want: SocketAddr = "127.0.0.1:4443".parse().unwrap_or_else(|_| unreachable!());
        for text in ["127.0.0.1:4443", "moqt://127.0.0.1:4443", "moqt://127.0.0.1:4443/edge"] {
            assert_eq!(resolve_relay(text).ok(), Some(want), "{text}");
        }
        assert!(resolve_relay("moqt://127.0.0.1").is_err());
    }
}
