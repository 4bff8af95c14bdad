//! Authorization: signed tokens that grant publish and/or subscribe on namespace prefixes until
//! an expiry, carried in AUTHORIZATION TOKEN parameters (draft-16 §9.2.1.1, draft-22 §8.9), in
//! SETUP (for the whole session) or per request, directly or by a registered alias.
//!
//! [`Keys::verify`] accepts three token formats and tells them apart by shape:
//!
//! - `v1` ([`v1`]), this project's own, ASCII:
//!
//!   ```text
//!   v1.<key id>.<base64url(JSON claims)>.<base64url(HMAC-SHA256(key, "v1.<key id>.<claims>"))>
//!   claims: {"ns": ["live", "cam"], "pub": true, "sub": false, "exp": <unix seconds>}
//!   ```
//!
//!   The key id selects one of the configured keys, so keys rotate by adding a new id, minting
//!   with it, and removing the old one once its tokens have expired. `moq-edge token` mints.
//! - JWT ([`jwt`], RFC 7519), with the claims moq-dev's relay uses (`root`, `put`, `get`).
//! - CAT ([`cat`], CTA-5007 Common Access Token): a CWT (RFC 8392) in COSE_Mac0 or COSE_Sign1
//!   (RFC 9052), as raw CBOR bytes or base64/base64url text, with the `moqt` scope claim of the
//!   IETF draft "Authorization scheme for MOQT using Common Access Tokens" (draft-ietf-moq-c4m).
//!
//! [`Keys::load`] builds the keys of all three from [`AuthSources`] (again on a file change, to
//! rotate keys without a restart), and [`Formats`] turns formats on and off.
//!
//! Time checks of JWT and CAT tokens allow [`LEEWAY`] seconds of clock skew between their
//! issuer and the relay; `v1` tokens, minted with the relay's own keys, get none.
//!
//! # In the relay
//!
//! Each request's right (publish for PUBLISH_NAMESPACE and PUBLISH; subscribe for SUBSCRIBE,
//! FETCH, TRACK_STATUS, SUBSCRIBE_NAMESPACE and SUBSCRIBE_TRACKS) is checked against the session's
//! SETUP tokens and the request's own before anything else, so an aggregated upstream never
//! authorizes a subscriber without a token. Each format maps onto one `Grant` (publish prefixes,
//! subscribe prefixes, expiry): a JWT's `root` joined with each of `put`/`get`, a CAT's `moqt`
//! scopes intersected with its `catu` path. The key decides the algorithm (a header `alg` that
//! disagrees is refused), so HS/RS confusion and `none` cannot pass. `KeyRing` shares the keys
//! among cores (`Arc<RwLock<Arc<Keys>>>`: one uncontended read per request, never per object);
//! a failed reload keeps the old keys. A namespace subscription broader than every grant is
//! narrowed to the grants' prefixes (`Scope::Within`), since moq-dev's player discovers from the
//! root with a token for one broadcast; one that reaches nowhere is UNAUTHORIZED.

#![warn(missing_docs, unreachable_pub)]

use std::collections::HashMap;
use std::time::{SystemTime, UNIX_EPOCH};

use base64::engine::general_purpose::{STANDARD_NO_PAD, URL_SAFE_NO_PAD};
use base64::Engine;
use bytes::Bytes;

use wire::model::{AuthToken, TrackNamespace};
use wire::RequestErrorCode;
use wire::SessionCode;

pub mod cat;
pub mod jwt;
mod keys;
pub mod v1;

pub use cat::{mint_cat, CatClaims, CatSigner, MoqtScope, PathMatch};
pub use jwt::{mint_jwt, JwtClaims, JwtSigner};
pub use keys::{AuthSources, Format, Formats, KeyRing, Keys};
pub use v1::{mint, Claims};

/// Seconds of clock skew allowed on `exp` and `nbf` of JWT and CAT tokens (their issuers'
/// clocks are not the relay's): a token is good until `exp + LEEWAY`, and from `nbf - LEEWAY`.
pub const LEEWAY: u64 = 30;

/// A verified token: the namespace prefixes each right may touch, until `expires`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Grant {
    /// Prefixes (field-wise) of the namespaces the token may publish in.
    pub publish: Vec<TrackNamespace>,
    /// Prefixes (field-wise) of the namespaces the token may subscribe in.
    pub subscribe: Vec<TrackNamespace>,
    /// Unix seconds from which the grant no longer holds.
    pub expires: u64,
}

/// What a namespace subscription may be told about: everything under its prefix, or only
/// the namespaces under these narrower prefixes (all its tokens grant under the prefix).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// Every namespace under the prefix.
    All,
    /// Only those under these narrower prefixes.
    Within(Vec<TrackNamespace>),
}

impl Scope {
    /// Whether `namespace` (under the subscription's prefix) may be reported.
    pub fn covers(&self, namespace: &TrackNamespace) -> bool {
        match self {
            Scope::All => true,
            Scope::Within(prefixes) => prefixes.iter().any(|p| namespace.starts_with(p)),
        }
    }
}

/// The right a request needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Right {
    /// PUBLISH_NAMESPACE, PUBLISH.
    Publish,
    /// SUBSCRIBE, FETCH, TRACK_STATUS, SUBSCRIBE_NAMESPACE.
    Subscribe,
}

impl Grant {
    /// Whether this grant allows `right` on `namespace` at `now`.
    pub fn allows(&self, namespace: &TrackNamespace, right: Right, now: u64) -> bool {
        let prefixes = match right {
            Right::Publish => &self.publish,
            Right::Subscribe => &self.subscribe,
        };
        now < self.expires && prefixes.iter().any(|p| namespace.starts_with(p))
    }
}

/// Why a token is refused. The messages name no token bytes and no key material.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    /// Not a token of any enabled format, or a token whose parts do not parse.
    #[error("malformed token")]
    Malformed,
    /// Past its expiry (`exp`).
    #[error("expired token")]
    Expired,
    /// Before its `nbf`.
    #[error("token not yet valid")]
    NotYetValid,
    /// No configured key has the token's key id (or it has none and several keys could apply).
    #[error("unknown token key")]
    UnknownKey,
    /// The signature or MAC does not verify.
    #[error("bad token signature")]
    BadSignature,
    /// The token names an algorithm its key is not for (or `none`).
    #[error("token algorithm not allowed")]
    BadAlgorithm,
    /// A claim this verifier requires (`exp`) is missing or mistyped.
    #[error("token claim missing or invalid")]
    BadClaim,
    /// The token asks for something this verifier cannot check (see [`cat`]).
    #[error("token restriction not supported")]
    Unsupported,
    /// The token's format is turned off ([`Formats`]).
    #[error("token format not enabled")]
    Disabled,
}

/// Seconds since the Unix epoch.
pub fn unix_now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// Base64url without padding, as JWT and URL-carried tokens use it.
pub fn base64url(bytes: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(bytes)
}

/// Decodes base64url or standard base64, padded or not (CAT tokens in URLs come either way).
pub fn base64_any(text: &str) -> Option<Vec<u8>> {
    let t = text.trim_end_matches('=');
    URL_SAFE_NO_PAD.decode(t).or_else(|_| STANDARD_NO_PAD.decode(t)).ok()
}

/// Namespace fields of a `/`-separated path; empty segments (leading, trailing, doubled `/`)
/// are dropped, so `""` and `"/"` are the empty prefix, which matches every namespace.
pub(crate) fn path_fields(path: &str) -> Vec<&str> {
    path.split('/').filter(|s| !s.is_empty()).collect()
}

/// The time checks JWT and CAT share, with [`LEEWAY`]: returns the grant's expiry.
pub(crate) fn check_times(exp: u64, nbf: Option<u64>, now: u64) -> Result<u64, TokenError> {
    let expires = exp.saturating_add(LEEWAY);
    if now >= expires {
        return Err(TokenError::Expired);
    }
    if nbf.is_some_and(|nbf| now.saturating_add(LEEWAY) < nbf) {
        return Err(TokenError::NotYetValid);
    }
    Ok(expires)
}

/// Why a request is not authorized.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Denied {
    /// REQUEST_ERROR with this code (UNAUTHORIZED, MALFORMED_AUTH_TOKEN, EXPIRED_AUTH_TOKEN).
    Request(RequestErrorCode, &'static str),
    /// The session is closed with this termination code (alias misuse, a bad SETUP token).
    Session(SessionCode, &'static str),
}

/// Why no grant allowed a request: an expired token, else none that covers it.
fn refusal<'a>(mut grants: impl Iterator<Item = &'a Grant>, now: u64) -> Denied {
    if grants.any(|g| now >= g.expires) {
        return Denied::Request(RequestErrorCode::ExpiredAuthToken, "the token has expired");
    }
    Denied::Request(RequestErrorCode::Unauthorized, "no token grants this")
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
    /// A session admitted by the platform (`auth = "http"`): `grants` authorize every request
    /// of it; tokens of its requests are not read.
    pub fn admitted(grants: Vec<Grant>) -> Self {
        SessionAuth { setup: grants, ..SessionAuth::default() }
    }

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
        Err(refusal(self.setup.iter().chain(&grants), now))
    }

    /// Like [`SessionAuth::authorize`] for a namespace subscription (SUBSCRIBE_NAMESPACE,
    /// SUBSCRIBE_TRACKS) under `prefix`: allowed whole when a grant covers `prefix`, and
    /// otherwise narrowed to what the grants allow under it ([`Scope::Within`]) — a viewer's
    /// token for one broadcast lets a player that discovers from the root (as moq-dev's does)
    /// see that broadcast and nothing else. Refused when no grant reaches under `prefix`.
    /// Returns until when (the latest expiry of the grants used) and the scope.
    pub fn authorize_discovery(
        &mut self,
        keys: &Keys,
        tokens: &[AuthToken],
        prefix: &TrackNamespace,
        cache_limit: usize,
        now: u64,
    ) -> Result<(u64, Scope), Denied> {
        let mut grants = Vec::new();
        self.resolve(keys, tokens, cache_limit, now, &mut grants)?;
        let all = || self.setup.iter().chain(&grants);
        let whole = all().filter(|g| g.allows(prefix, Right::Subscribe, now)).map(|g| g.expires).max();
        if let Some(until) = whole {
            return Ok((until, Scope::All));
        }
        let (mut within, mut until) = (Vec::new(), 0);
        for g in all().filter(|g| now < g.expires) {
            for p in g.subscribe.iter().filter(|p| p.starts_with(prefix)) {
                within.push(p.clone());
                until = until.max(g.expires);
            }
        }
        if within.is_empty() {
            return Err(refusal(all(), now));
        }
        Ok((until, Scope::Within(within)))
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
                Err(_) => {
                    failure =
                        Some(Denied::Request(RequestErrorCode::MalformedAuthToken, "the token is not valid"));
                }
            }
        }
        failure.map_or(Ok(()), Err)
    }
}

#[cfg(test)]
mod tests;
