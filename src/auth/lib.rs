//! Authorization: signed tokens that grant publish and/or subscribe on a namespace prefix until
//! an expiry, carried in AUTHORIZATION TOKEN parameters (draft-16 §9.2.1.1, draft-22 §8.9), in
//! SETUP (for the whole session) or per request, directly or by a registered alias.
//!
//! Token value (Token Type 0, "negotiated out-of-band"), ASCII:
//!
//! ```text
//! v1.<key id>.<base64url(JSON claims)>.<base64url(HMAC-SHA256(key, "v1.<key id>.<claims>"))>
//! claims: {"ns": ["live", "cam"], "pub": true, "sub": false, "exp": <unix seconds>}
//! ```
//!
//! The key id selects one of the configured keys, so keys rotate by adding a new id, minting
//! with it, and removing the old one once its tokens have expired. `moq-edge token` mints.

use std::collections::HashMap;
use std::time::{SystemTime, UNIX_EPOCH};

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use bytes::Bytes;
use ring::hmac;
use serde::{Deserialize, Serialize};

use session::SessionCode;
use wire::model::{AuthToken, TrackNamespace};
use wire::RequestErrorCode;

/// What a token allows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claims {
    /// Namespace prefix, one string per field.
    pub ns: Vec<String>,
    #[serde(rename = "pub", default)]
    pub publish: bool,
    #[serde(rename = "sub", default)]
    pub subscribe: bool,
    /// Expiry, seconds since the Unix epoch.
    pub exp: u64,
}

/// A verified token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    pub prefix: TrackNamespace,
    pub publish: bool,
    pub subscribe: bool,
    pub expires: u64,
}

/// The right a request needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Right {
    Publish,
    Subscribe,
}

impl Grant {
    fn allows(&self, namespace: &TrackNamespace, right: Right, now: u64) -> bool {
        let has = match right {
            Right::Publish => self.publish,
            Right::Subscribe => self.subscribe,
        };
        has && now < self.expires && namespace.starts_with(&self.prefix)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    #[error("malformed token")]
    Malformed,
    #[error("expired token")]
    Expired,
}

/// The verification keys (id → HMAC-SHA256 key).
#[derive(Clone)]
pub struct Keys {
    keys: HashMap<String, hmac::Key>,
}

impl std::fmt::Debug for Keys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut ids: Vec<&String> = self.keys.keys().collect();
        ids.sort();
        f.debug_struct("Keys").field("ids", &ids).finish()
    }
}

/// Seconds since the Unix epoch.
pub fn unix_now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

fn key_id_ok(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 64
        && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

impl Keys {
    /// Keys from `id=base64url-secret` entries (the secret at least 16 bytes).
    pub fn parse(entries: &[String]) -> anyhow::Result<Keys> {
        let mut keys = HashMap::new();
        for e in entries {
            let (id, secret) = e.split_once('=').ok_or_else(|| anyhow::anyhow!("{e:?} is not id=secret"))?;
            anyhow::ensure!(key_id_ok(id), "key id {id:?}: 1-64 of A-Z a-z 0-9 - _");
            let secret = URL_SAFE_NO_PAD
                .decode(secret.trim_end_matches('='))
                .map_err(|_| anyhow::anyhow!("key {id}: the secret is not base64url"))?;
            anyhow::ensure!(secret.len() >= 16, "key {id}: the secret is shorter than 16 bytes");
            anyhow::ensure!(
                keys.insert(id.to_string(), hmac::Key::new(hmac::HMAC_SHA256, &secret)).is_none(),
                "key {id} given twice"
            );
        }
        Ok(Keys { keys })
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Mints a token with these keys (the first by ID), for a relay that shares its keys with
    /// its parents: what it renews its own upstream subscriptions with. `None` without keys.
    pub fn mint(&self, claims: &Claims) -> Option<String> {
        let (id, key) = self.keys.iter().min_by(|a, b| a.0.cmp(b.0))?;
        let body = URL_SAFE_NO_PAD.encode(serde_json::to_vec(claims).ok()?);
        let signed = format!("v1.{id}.{body}");
        let sig = URL_SAFE_NO_PAD.encode(hmac::sign(key, signed.as_bytes()).as_ref());
        Some(format!("{signed}.{sig}"))
    }

    /// Verifies a token value and returns what it grants.
    pub fn verify(&self, token: &[u8], now: u64) -> Result<Grant, TokenError> {
        let text = std::str::from_utf8(token).map_err(|_| TokenError::Malformed)?;
        let mut parts = text.split('.');
        let (Some("v1"), Some(id), Some(claims), Some(sig), None) =
            (parts.next(), parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(TokenError::Malformed);
        };
        let key = self.keys.get(id).ok_or(TokenError::Malformed)?;
        let sig = URL_SAFE_NO_PAD.decode(sig).map_err(|_| TokenError::Malformed)?;
        let signed = &text[..text.len() - text.rsplit('.').next().map_or(0, str::len) - 1];
        hmac::verify(key, signed.as_bytes(), &sig).map_err(|_| TokenError::Malformed)?;
        let claims = URL_SAFE_NO_PAD.decode(claims).map_err(|_| TokenError::Malformed)?;
        let claims: Claims = serde_json::from_slice(&claims).map_err(|_| TokenError::Malformed)?;
        if now >= claims.exp {
            return Err(TokenError::Expired);
        }
        Ok(Grant {
            prefix: TrackNamespace::from_strs(&claims.ns),
            publish: claims.publish,
            subscribe: claims.subscribe,
            expires: claims.exp,
        })
    }
}

/// Mints a token with key `id` (its secret, raw bytes).
pub fn mint(id: &str, secret: &[u8], claims: &Claims) -> anyhow::Result<String> {
    anyhow::ensure!(key_id_ok(id), "key id {id:?}: 1-64 of A-Z a-z 0-9 - _");
    let key = hmac::Key::new(hmac::HMAC_SHA256, secret);
    let body = URL_SAFE_NO_PAD.encode(serde_json::to_vec(claims)?);
    let signed = format!("v1.{id}.{body}");
    let sig = URL_SAFE_NO_PAD.encode(hmac::sign(&key, signed.as_bytes()).as_ref());
    Ok(format!("{signed}.{sig}"))
}

/// Why a request is not authorized.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Denied {
    /// REQUEST_ERROR with this code (UNAUTHORIZED, MALFORMED_AUTH_TOKEN, EXPIRED_AUTH_TOKEN).
    Request(RequestErrorCode, &'static str),
    /// The session is closed with this termination code (alias misuse, a bad SETUP token).
    Session(SessionCode, &'static str),
}

/// Bytes a registered alias counts against MAX_AUTH_TOKEN_CACHE_SIZE (draft-16 §9.3.1.4).
fn alias_cost(value: &Bytes) -> usize {
    16 + value.len()
}

/// One session's authorization state: grants from SETUP and its token alias cache.
#[derive(Debug, Default)]
pub struct SessionAuth {
    setup: Vec<Grant>,
    aliases: HashMap<u64, Bytes>,
    cache_bytes: usize,
}

impl SessionAuth {
    /// SETUP tokens: they authorize every request of the session. A bad one closes it.
    pub fn from_setup(
        keys: &Keys,
        tokens: &[AuthToken],
        cache_limit: usize,
        now: u64,
    ) -> Result<Self, Denied> {
        let mut me = SessionAuth::default();
        let mut grants = Vec::new();
        me.resolve(keys, tokens, cache_limit, now, &mut grants).map_err(|d| match d {
            Denied::Request(RequestErrorCode::ExpiredAuthToken, why) => {
                Denied::Session(SessionCode::ExpiredAuthToken, why)
            }
            Denied::Request(_, why) => Denied::Session(SessionCode::MalformedAuthToken, why),
            d => d,
        })?;
        me.setup = grants;
        Ok(me)
    }

    /// Checks a request's tokens (registering and retiring aliases as they say) and whether
    /// the session's or the request's grants allow `right` on `namespace`. Returns when the
    /// last grant allowing it expires (unix seconds): what the request is authorized until.
    pub fn authorize(
        &mut self,
        keys: &Keys,
        tokens: &[AuthToken],
        namespace: &TrackNamespace,
        right: Right,
        cache_limit: usize,
        now: u64,
    ) -> Result<u64, Denied> {
        let mut grants = Vec::new();
        self.resolve(keys, tokens, cache_limit, now, &mut grants)?;
        let allowing = self.setup.iter().chain(&grants).filter(|g| g.allows(namespace, right, now));
        if let Some(until) = allowing.map(|g| g.expires).max() {
            return Ok(until);
        }
        let expired = self.setup.iter().chain(&grants).any(|g| now >= g.expires);
        if expired {
            return Err(Denied::Request(RequestErrorCode::ExpiredAuthToken, "the token has expired"));
        }
        Err(Denied::Request(RequestErrorCode::Unauthorized, "no token grants this"))
    }

    fn resolve(
        &mut self,
        keys: &Keys,
        tokens: &[AuthToken],
        cache_limit: usize,
        now: u64,
        grants: &mut Vec<Grant>,
    ) -> Result<(), Denied> {
        // Alias changes apply even when the request then fails (draft-16 §9.2.1.1).
        let mut failure = None;
        for t in tokens {
            let value = match t {
                AuthToken::Delete { alias } => {
                    let v = self.aliases.remove(alias).ok_or(Denied::Session(
                        SessionCode::UnknownAuthTokenAlias,
                        "DELETE of an unknown token alias",
                    ))?;
                    self.cache_bytes -= alias_cost(&v);
                    continue;
                }
                AuthToken::Register { alias, value, .. } => {
                    if self.aliases.contains_key(alias) {
                        return Err(Denied::Session(
                            SessionCode::DuplicateAuthTokenAlias,
                            "alias registered twice",
                        ));
                    }
                    if self.cache_bytes + alias_cost(value) > cache_limit {
                        return Err(Denied::Session(SessionCode::AuthTokenCacheOverflow, "token cache full"));
                    }
                    self.cache_bytes += alias_cost(value);
                    self.aliases.insert(*alias, value.clone());
                    value.clone()
                }
                AuthToken::UseAlias { alias } => self
                    .aliases
                    .get(alias)
                    .cloned()
                    .ok_or(Denied::Session(SessionCode::UnknownAuthTokenAlias, "unknown token alias"))?,
                AuthToken::UseValue { value, .. } => value.clone(),
            };
            match keys.verify(&value, now) {
                Ok(g) => grants.push(g),
                Err(TokenError::Expired) => {
                    failure.get_or_insert(Denied::Request(
                        RequestErrorCode::ExpiredAuthToken,
                        "the token has expired",
                    ));
                }
                Err(TokenError::Malformed) => {
                    failure =
                        Some(Denied::Request(RequestErrorCode::MalformedAuthToken, "the token is not valid"));
                }
            }
        }
        failure.map_or(Ok(()), Err)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    const SECRET: &[u8] = b"0123456789abcdef0123";

    fn keys() -> Keys {
        Keys::parse(&[format!("k1={}", URL_SAFE_NO_PAD.encode(SECRET))]).unwrap()
    }

    fn token(ns: &[&str], publish: bool, subscribe: bool, exp: u64) -> Bytes {
        let claims = Claims { ns: ns.iter().map(|s| s.to_string()).collect(), publish, subscribe, exp };
        Bytes::from(mint("k1", SECRET, &claims).unwrap())
    }

    fn value(v: Bytes) -> AuthToken {
        AuthToken::UseValue { token_type: 0, value: v }
    }

    #[test]
    fn tokens_verify_and_grant_a_prefix_until_expiry() {
        let k = keys();
        let t = token(&["live"], false, true, 100);
        let g = k.verify(&t, 50).unwrap();
        assert_eq!(g.prefix, TrackNamespace::from_strs(&["live"]));
        assert!(g.allows(&TrackNamespace::from_strs(&["live", "cam"]), Right::Subscribe, 50));
        assert!(!g.allows(&TrackNamespace::from_strs(&["live", "cam"]), Right::Publish, 50));
        assert!(!g.allows(&TrackNamespace::from_strs(&["news"]), Right::Subscribe, 50));
        assert_eq!(k.verify(&t, 100), Err(TokenError::Expired));
        let mut bad = t.to_vec();
        let n = bad.len();
        bad[n - 3] ^= 1;
        assert_eq!(k.verify(&bad, 50), Err(TokenError::Malformed), "signature");
        let other =
            Keys::parse(&[format!("k1={}", URL_SAFE_NO_PAD.encode(b"another secret of 16+"))]).unwrap();
        assert_eq!(other.verify(&t, 50), Err(TokenError::Malformed), "another key");
        assert_eq!(k.verify(b"v1.k2.e30.AAAA", 50), Err(TokenError::Malformed), "unknown key id");
        assert_eq!(k.verify(b"garbage", 50), Err(TokenError::Malformed));
        assert!(Keys::parse(&["k1=c2hvcnQ".to_string()]).is_err(), "short secret");
        assert!(Keys::parse(&["no-equals".to_string()]).is_err());
    }

    #[test]
    fn requests_are_authorized_by_setup_request_or_alias_tokens() {
        let k = keys();
        let ns = TrackNamespace::from_strs(&["live", "a"]);
        let sub = token(&["live"], false, true, 1000);
        let mut a = SessionAuth::from_setup(&k, &[value(sub.clone())], 0, 10).unwrap();
        assert_eq!(a.authorize(&k, &[], &ns, Right::Subscribe, 0, 10), Ok(1000), "until the token expires");
        assert_eq!(
            a.authorize(&k, &[], &ns, Right::Publish, 0, 10),
            Err(Denied::Request(RequestErrorCode::Unauthorized, "no token grants this"))
        );
        let publish = token(&["live", "a"], true, false, 2000);
        assert_eq!(a.authorize(&k, &[value(publish.clone())], &ns, Right::Publish, 0, 10), Ok(2000));
        // Authorized until the last grant allowing it expires (the request's, here).
        let later = token(&["live"], false, true, 3000);
        assert_eq!(a.authorize(&k, &[value(later)], &ns, Right::Subscribe, 0, 10), Ok(3000));
        let reg = AuthToken::Register { alias: 7, token_type: 0, value: publish.clone() };
        assert!(matches!(
            a.authorize(&k, std::slice::from_ref(&reg), &ns, Right::Publish, 16, 10),
            Err(Denied::Session(SessionCode::AuthTokenCacheOverflow, _))
        ));
        let limit = 16 + publish.len();
        assert_eq!(a.authorize(&k, std::slice::from_ref(&reg), &ns, Right::Publish, limit, 10), Ok(2000));
        assert_eq!(
            a.authorize(&k, &[AuthToken::UseAlias { alias: 7 }], &ns, Right::Publish, limit, 10),
            Ok(2000)
        );
        assert!(matches!(
            a.authorize(&k, &[reg], &ns, Right::Publish, 10_000, 10),
            Err(Denied::Session(SessionCode::DuplicateAuthTokenAlias, _))
        ));
        assert_eq!(
            a.authorize(&k, &[AuthToken::Delete { alias: 7 }], &ns, Right::Subscribe, limit, 10),
            Ok(1000)
        );
        assert!(matches!(
            a.authorize(&k, &[AuthToken::UseAlias { alias: 7 }], &ns, Right::Publish, limit, 10),
            Err(Denied::Session(SessionCode::UnknownAuthTokenAlias, _))
        ));
        let old = token(&["live"], true, true, 5);
        assert_eq!(
            a.authorize(&k, &[value(old.clone())], &ns, Right::Publish, 0, 10),
            Err(Denied::Request(RequestErrorCode::ExpiredAuthToken, "the token has expired"))
        );
        assert_eq!(
            a.authorize(&k, &[value(Bytes::from_static(b"v1.k1.x.y"))], &ns, Right::Subscribe, 0, 10),
            Err(Denied::Request(RequestErrorCode::MalformedAuthToken, "the token is not valid"))
        );
        assert!(matches!(
            SessionAuth::from_setup(&k, &[value(old)], 0, 10),
            Err(Denied::Session(SessionCode::ExpiredAuthToken, _))
        ));
    }
}
