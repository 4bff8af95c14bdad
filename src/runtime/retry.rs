//! Stateless address validation tokens for QUIC Retry (RFC 9000 §8.1.2).
//!
//! How a shard uses them: for an Initial without a token, while retry is required
//! ([`super::RetryPolicy`]), it picks a new server CID `new_scid` (carrying its shard), sends
//! `quiche::retry(&hdr.scid, &hdr.dcid, &new_scid, &tokens.mint(peer, &hdr.dcid, now), ..)`
//! and keeps no state. For an Initial with a token it calls `tokens.validate(&hdr.token, peer,
//! now)`: `Some(odcid)` means the address is validated and it calls
//! `quiche::accept_with_buf_factory(&hdr.dcid, Some(&odcid), ..)` (the SCID must be the DCID the client now uses,
//! i.e. the CID from the Retry, so quiche's retry_source_connection_id matches); `None` means
//! drop the packet (or, under [`super::RetryPolicy::Auto`] below the threshold, accept it as if it
//! had no token).
//!
//! Token layout (all covered by the MAC, together with the peer's IP address and port, which
//! are not in the token):
//!
//! ```text
//! version (1) = 1 | expiry (8, u64 BE, Unix seconds) | odcid_len (1) | odcid (0..=20) | MAC (32)
//! ```

use std::net::SocketAddr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use ring::hmac;

use super::cid::derive_key;

/// When the server answers an Initial with a Retry (address validation, RFC 9000 §8.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetryPolicy {
    /// Never; accept every Initial that passes the connection cap.
    Never,
    /// Always require a validated address token.
    Always,
    /// Only while a core has more than this many handshakes in progress.
    Auto {
        /// The handshakes in progress past which retry starts.
        pending_handshakes: usize,
    },
}

/// How long a retry token is accepted after it was minted. A client answers a Retry within
/// one round trip, so this only has to cover slow paths and retransmitted Initials.
pub const RETRY_TOKEN_LIFETIME: Duration = Duration::from_secs(10);

/// Clock difference tolerated between minting and validating (cores share one clock, but a
/// fleet sharing the secret may not): an expiry further than lifetime + skew in the future
/// was not minted by us.
pub const RETRY_TOKEN_MAX_SKEW: Duration = Duration::from_secs(2);

const TOKEN_VERSION: u8 = 1;
const MAC_LEN: usize = 32;
const HEADER_LEN: usize = 1 + 8 + 1;

/// Mints and validates retry tokens with an HMAC-SHA256 key derived from the node secret
/// (distinct from the stateless reset key of the same secret).
pub struct RetryTokens {
    key: hmac::Key,
}

impl RetryTokens {
    /// Tokens keyed from the fleet's `secret`.
    pub fn new(secret: &[u8; 32]) -> Self {
        RetryTokens { key: derive_key(secret, b"moq-edge retry token v1") }
    }

    /// A token for a Retry answering `peer`'s Initial whose DCID was `odcid`. `odcid` is at
    /// most 20 bytes (`quiche::MAX_CONN_ID_LEN`, guaranteed by quiche's header parser); a
    /// longer one yields a token that [`RetryTokens::validate`] rejects.
    pub fn mint(&self, peer: SocketAddr, odcid: &[u8], now: SystemTime) -> Vec<u8> {
        let expiry = unix_secs(now).saturating_add(RETRY_TOKEN_LIFETIME.as_secs());
        let odcid = &odcid[..odcid.len().min(u8::MAX as usize)];
        let mut token = Vec::with_capacity(HEADER_LEN + odcid.len() + MAC_LEN);
        token.push(TOKEN_VERSION);
        token.extend_from_slice(&expiry.to_be_bytes());
        token.push(odcid.len() as u8);
        token.extend_from_slice(odcid);
        let tag = hmac::sign(&self.key, &mac_input(&token, peer));
        token.extend_from_slice(tag.as_ref());
        token
    }

    /// The original DCID carried by `token` if it is well formed, was minted with this key for
    /// exactly this peer address (IP and port), has not expired and does not claim an expiry
    /// further in the future than we would ever mint. The MAC is checked in constant time.
    /// Never panics, whatever the bytes.
    pub fn validate(
        &self,
        token: &[u8],
        peer: SocketAddr,
        now: SystemTime,
    ) -> Option<quiche::ConnectionId<'static>> {
        let (&version, rest) = token.split_first()?;
        if version != TOKEN_VERSION {
            return None;
        }
        let expiry = u64::from_be_bytes(rest.get(..8)?.try_into().ok()?);
        let odcid_len = *rest.get(8)? as usize;
        if odcid_len > quiche::MAX_CONN_ID_LEN {
            return None;
        }
        let body_len = HEADER_LEN + odcid_len;
        if token.len() != body_len + MAC_LEN {
            return None;
        }
        let (body, tag) = token.split_at(body_len);
        // Constant-time comparison of the full tag.
        hmac::verify(&self.key, &mac_input(body, peer), tag).ok()?;
        let now_secs = unix_secs(now);
        if now_secs > expiry {
            return None;
        }
        let latest = now_secs
            .saturating_add(RETRY_TOKEN_LIFETIME.as_secs())
            .saturating_add(RETRY_TOKEN_MAX_SKEW.as_secs());
        if expiry > latest {
            return None;
        }
        Some(quiche::ConnectionId::from_vec(body[HEADER_LEN..].to_vec()))
    }
}

/// Seconds since the Unix epoch; 0 for a clock before it.
fn unix_secs(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

/// What the MAC covers: the token body, then the peer address as family tag, IP bytes and
/// port (BE). The address part has a fixed layout per family, so no two addresses encode the
/// same.
fn mac_input(body: &[u8], peer: SocketAddr) -> Vec<u8> {
    let mut b = Vec::with_capacity(body.len() + 19);
    b.extend_from_slice(body);
    match peer {
        SocketAddr::V4(a) => {
            b.push(4);
            b.extend_from_slice(&a.ip().octets());
        }
        SocketAddr::V6(a) => {
            b.push(6);
            b.extend_from_slice(&a.ip().octets());
        }
    }
    b.extend_from_slice(&peer.port().to_be_bytes());
    b
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn tokens() -> RetryTokens {
        RetryTokens::new(&[7; 32])
    }

    fn peer() -> SocketAddr {
        "192.0.2.10:4433".parse().unwrap()
    }

    fn now() -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(1_700_000_000)
    }

    const ODCID: [u8; 8] = [1, 2, 3, 4, 5, 6, 7, 8];

    #[test]
    fn round_trip() {
        let t = tokens();
        for len in 0..=quiche::MAX_CONN_ID_LEN {
            let odcid: Vec<u8> = (0..len as u8).collect();
            let token = t.mint(peer(), &odcid, now());
            let got = t.validate(&token, peer(), now()).unwrap();
            assert_eq!(got.as_ref(), &odcid[..]);
        }
        let v6: SocketAddr = "[2001:db8::1]:443".parse().unwrap();
        let token = t.mint(v6, &ODCID, now());
        assert_eq!(t.validate(&token, v6, now()).unwrap().as_ref(), &ODCID);
    }

    #[test]
    fn valid_until_lifetime_ends() {
        let t = tokens();
        let token = t.mint(peer(), &ODCID, now());
        assert!(t.validate(&token, peer(), now() + RETRY_TOKEN_LIFETIME).is_some());
        let late = now() + RETRY_TOKEN_LIFETIME + Duration::from_secs(1);
        assert!(t.validate(&token, peer(), late).is_none());
    }

    #[test]
    fn rejects_other_peer() {
        let t = tokens();
        let token = t.mint(peer(), &ODCID, now());
        let other_port: SocketAddr = "192.0.2.10:4434".parse().unwrap();
        let other_ip: SocketAddr = "192.0.2.11:4433".parse().unwrap();
        let mapped: SocketAddr = "[::ffff:192.0.2.10]:4433".parse().unwrap();
        assert!(t.validate(&token, other_port, now()).is_none());
        assert!(t.validate(&token, other_ip, now()).is_none());
        assert!(t.validate(&token, mapped, now()).is_none());
    }

    #[test]
    fn rejects_other_key() {
        let token = tokens().mint(peer(), &ODCID, now());
        assert!(RetryTokens::new(&[8; 32]).validate(&token, peer(), now()).is_none());
    }

    #[test]
    fn rejects_tokens_from_the_future() {
        let t = tokens();
        let ahead = now() + RETRY_TOKEN_MAX_SKEW + Duration::from_secs(1);
        let token = t.mint(peer(), &ODCID, ahead);
        assert!(t.validate(&token, peer(), now()).is_none());
        // Within the skew is fine.
        let token = t.mint(peer(), &ODCID, now() + RETRY_TOKEN_MAX_SKEW);
        assert!(t.validate(&token, peer(), now()).is_some());
    }

    #[test]
    fn rejects_pre_epoch_clock_gracefully() {
        let t = tokens();
        let before = UNIX_EPOCH - Duration::from_secs(5);
        let token = t.mint(peer(), &ODCID, before);
        // Minted as if at the epoch; still within its lifetime at the epoch.
        assert!(t.validate(&token, peer(), before).is_some());
        assert!(t.validate(&token, peer(), now()).is_none());
    }

    #[test]
    fn rejects_truncation_at_every_length() {
        let t = tokens();
        let token = t.mint(peer(), &ODCID, now());
        for len in 0..token.len() {
            assert!(t.validate(&token[..len], peer(), now()).is_none(), "len {len}");
        }
        let mut longer = token.clone();
        longer.push(0);
        assert!(t.validate(&longer, peer(), now()).is_none());
    }

    #[test]
    fn rejects_every_flipped_bit() {
        let t = tokens();
        let token = t.mint(peer(), &ODCID, now());
        for i in 0..token.len() * 8 {
            let mut bad = token.clone();
            bad[i / 8] ^= 1 << (i % 8);
            assert!(t.validate(&bad, peer(), now()).is_none(), "bit {i}");
        }
    }

    #[test]
    fn rejects_overlong_odcid() {
        let t = tokens();
        let token = t.mint(peer(), &[0; 21], now());
        assert!(t.validate(&token, peer(), now()).is_none());
    }

    proptest! {
        #[test]
        fn never_panics_on_arbitrary_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..128)) {
            prop_assert!(tokens().validate(&bytes, peer(), now()).is_none());
        }

        #[test]
        fn never_panics_on_plausible_headers(
            expiry in any::<u64>(),
            len in any::<u8>(),
            rest in proptest::collection::vec(any::<u8>(), 0..300),
        ) {
            let mut bytes = vec![TOKEN_VERSION];
            bytes.extend_from_slice(&expiry.to_be_bytes());
            bytes.push(len);
            bytes.extend_from_slice(&rest);
            prop_assert!(tokens().validate(&bytes, peer(), now()).is_none());
        }
    }
}
