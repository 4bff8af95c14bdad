//! This project's own token format, `v1.<key id>.<base64url(JSON claims)>.<base64url(MAC)>`,
//! with HMAC-SHA256 (RFC 2104) over `v1.<key id>.<claims>` under the key the id names.

use std::collections::HashMap;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use ring::hmac;
use serde::{Deserialize, Serialize};
use wire::model::TrackNamespace;

use crate::{Grant, TokenError};

/// What a `v1` token allows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claims {
    /// Namespace prefix, one string per field.
    pub ns: Vec<String>,
    /// May publish under it.
    #[serde(rename = "pub", default)]
    pub publish: bool,
    /// May subscribe under it.
    #[serde(rename = "sub", default)]
    pub subscribe: bool,
    /// Expiry, seconds since the Unix epoch.
    pub exp: u64,
}

/// The `v1` verification keys (id → HMAC-SHA256 key).
#[derive(Clone, Default)]
pub(crate) struct V1Keys {
    keys: HashMap<String, hmac::Key>,
}

pub(crate) fn key_id_ok(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 64
        && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

fn sign(id: &str, key: &hmac::Key, claims: &Claims) -> Result<String, serde_json::Error> {
    let body = URL_SAFE_NO_PAD.encode(serde_json::to_vec(claims)?);
    let signed = format!("v1.{id}.{body}");
    let sig = URL_SAFE_NO_PAD.encode(hmac::sign(key, signed.as_bytes()).as_ref());
    Ok(format!("{signed}.{sig}"))
}

impl V1Keys {
    /// Keys from `id=base64url-secret` entries (the secret at least 16 bytes).
    pub(crate) fn parse(entries: &[String]) -> anyhow::Result<V1Keys> {
        let mut keys = HashMap::new();
        for e in entries {
            // The entry holds a secret: name only the id in errors.
            let (id, secret) =
                e.split_once('=').ok_or_else(|| anyhow::anyhow!("a key entry is not id=secret"))?;
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
        Ok(V1Keys { keys })
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    pub(crate) fn ids(&self) -> Vec<&str> {
        let mut ids: Vec<&str> = self.keys.keys().map(String::as_str).collect();
        ids.sort_unstable();
        ids
    }

    /// Mints with the first key by id; `None` without keys.
    pub(crate) fn mint(&self, claims: &Claims) -> Option<String> {
        let (id, key) = self.keys.iter().min_by(|a, b| a.0.cmp(b.0))?;
        sign(id, key, claims).ok()
    }

    /// Verifies a `v1.` token (already known to be UTF-8 text).
    pub(crate) fn verify(&self, text: &str, now: u64) -> Result<Grant, TokenError> {
        let mut parts = text.split('.');
        let (Some("v1"), Some(id), Some(claims), Some(sig), None) =
            (parts.next(), parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(TokenError::Malformed);
        };
        let key = self.keys.get(id).ok_or(TokenError::UnknownKey)?;
        let sig = URL_SAFE_NO_PAD.decode(sig).map_err(|_| TokenError::Malformed)?;
        let signed = &text[..text.len() - text.rsplit('.').next().map_or(0, str::len) - 1];
        hmac::verify(key, signed.as_bytes(), &sig).map_err(|_| TokenError::BadSignature)?;
        let claims = URL_SAFE_NO_PAD.decode(claims).map_err(|_| TokenError::Malformed)?;
        let claims: Claims = serde_json::from_slice(&claims).map_err(|_| TokenError::Malformed)?;
        if now >= claims.exp {
            return Err(TokenError::Expired);
        }
        let prefix = TrackNamespace::from_strs(&claims.ns);
        Ok(Grant {
            publish: if claims.publish { vec![prefix.clone()] } else { Vec::new() },
            subscribe: if claims.subscribe { vec![prefix] } else { Vec::new() },
            expires: claims.exp,
        })
    }
}

/// Mints a `v1` token with key `id` (its secret, raw bytes).
pub fn mint(id: &str, secret: &[u8], claims: &Claims) -> anyhow::Result<String> {
    anyhow::ensure!(key_id_ok(id), "key id {id:?}: 1-64 of A-Z a-z 0-9 - _");
    Ok(sign(id, &hmac::Key::new(hmac::HMAC_SHA256, secret), claims)?)
}
