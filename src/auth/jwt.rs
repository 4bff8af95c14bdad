//! JSON Web Tokens (RFC 7519) with the claims moq-dev's relay uses:
//!
//! ```text
//! {"root": "live/room", "put": ["alice"], "get": "", "exp": <unix s>, "iat": <unix s>}
//! ```
//!
//! - `root`: the path the token is scoped to, split on `/` into namespace fields (empty: all).
//! - `put` / `get`: a string or an array of strings, the sub-paths under `root` it may publish
//!   in / subscribe to; `""` is all of `root`, and a missing or empty list grants nothing.
//! - `exp` (required), `nbf` (optional), `iat` (informational), with [`crate::LEEWAY`].
//!
//! Keys are HS256 secrets or JSON Web Keys (RFC 7517) for ES256, EdDSA (Ed25519) or RS256,
//! selected by the header's `kid` (RFC 7515 §4.1.4); a token without `kid` is accepted only
//! when exactly one key is configured. The key decides the algorithm (RFC 8725 §3.1): a header
//! `alg` other than the key's, `none` included, is refused, so an HS256 token MACed with an RSA
//! or EC public key's bytes never verifies against that public key.
//!
//! Uses `jsonwebtoken` 9.x: it signs and verifies with `ring`, which the workspace already
//! builds, where 10.x wants aws-lc (or a second RustCrypto stack) as its backend.

use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, Jwk, JwkSet};
use jsonwebtoken::{errors::ErrorKind, DecodingKey, Header, Validation};
use serde::{Deserialize, Deserializer, Serialize};
use wire::model::TrackNamespace;

pub use jsonwebtoken::{Algorithm, EncodingKey};

use crate::{check_times, path_fields, Grant, TokenError};

/// The claims of a JWT (see the module docs).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct JwtClaims {
    /// The namespace prefix every path below is under, fields separated by `/`.
    #[serde(default)]
    pub root: String,
    /// Paths under `root` it may publish (one or many).
    #[serde(default, deserialize_with = "one_or_many", skip_serializing_if = "Vec::is_empty")]
    pub put: Vec<String>,
    /// Paths under `root` it may subscribe to (one or many).
    #[serde(default, deserialize_with = "one_or_many", skip_serializing_if = "Vec::is_empty")]
    pub get: Vec<String>,
    /// Expiry, Unix seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exp: Option<u64>,
    /// Not before, Unix seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nbf: Option<u64>,
    /// Issued at, Unix seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iat: Option<u64>,
}

fn one_or_many<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum OneOrMany {
        One(String),
        Many(Vec<String>),
    }
    Ok(match OneOrMany::deserialize(d)? {
        OneOrMany::One(s) => vec![s],
        OneOrMany::Many(v) => v,
    })
}

impl JwtClaims {
    /// The namespace prefixes `paths` name under `root`.
    fn prefixes(&self, paths: &[String]) -> Vec<TrackNamespace> {
        let root = path_fields(&self.root);
        let mut out: Vec<TrackNamespace> = paths
            .iter()
            .map(|p| TrackNamespace::from_strs(&[root.clone(), path_fields(p)].concat()))
            .collect();
        out.sort();
        out.dedup();
        out
    }
}

/// One verification key.
#[derive(Clone)]
struct JwtKey {
    kid: Option<String>,
    alg: Algorithm,
    key: DecodingKey,
}

/// The JWT verification keys.
#[derive(Clone, Default)]
pub(crate) struct JwtKeys {
    keys: Vec<JwtKey>,
}

/// The algorithm a JWK is for: its `alg` if it names one its key type allows, else the
/// default for its type (RS256, ES256 for P-256, EdDSA for Ed25519, HS256).
fn jwk_algorithm(jwk: &Jwk) -> anyhow::Result<Algorithm> {
    use Algorithm::*;
    let allowed: &[Algorithm] = match &jwk.algorithm {
        AlgorithmParameters::RSA(_) => &[RS256, RS384, RS512, PS256, PS384, PS512],
        AlgorithmParameters::EllipticCurve(p) => match p.curve {
            EllipticCurve::P256 => &[ES256],
            EllipticCurve::P384 => &[ES384],
            _ => anyhow::bail!("unsupported EC curve"),
        },
        AlgorithmParameters::OctetKeyPair(p) => match p.curve {
            EllipticCurve::Ed25519 => &[EdDSA],
            _ => anyhow::bail!("unsupported OKP curve"),
        },
        AlgorithmParameters::OctetKey(_) => &[HS256, HS384, HS512],
    };
    let Some(named) = &jwk.common.key_algorithm else { return Ok(allowed[0]) };
    let named: Algorithm = named.to_string().parse().map_err(|_| anyhow::anyhow!("unsupported alg"))?;
    anyhow::ensure!(allowed.contains(&named), "alg {named:?} does not fit the key type");
    Ok(named)
}

impl JwtKeys {
    pub(crate) fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    pub(crate) fn ids(&self) -> Vec<String> {
        self.keys.iter().map(|k| k.kid.clone().unwrap_or_else(|| "(no kid)".into())).collect()
    }

    fn push(&mut self, key: JwtKey) -> anyhow::Result<()> {
        anyhow::ensure!(
            !self.keys.iter().any(|k| k.kid == key.kid),
            "JWT key id {:?} given twice",
            key.kid.as_deref().unwrap_or("(none)")
        );
        self.keys.push(key);
        Ok(())
    }

    /// Adds an HS256 secret (at least 16 bytes) with key id `kid`.
    pub(crate) fn add_secret(&mut self, kid: Option<String>, secret: &[u8]) -> anyhow::Result<()> {
        anyhow::ensure!(secret.len() >= 16, "the JWT secret is shorter than 16 bytes");
        self.push(JwtKey { kid, alg: Algorithm::HS256, key: DecodingKey::from_secret(secret) })
    }

    /// Adds one JSON Web Key.
    pub(crate) fn add_jwk(&mut self, jwk: &Jwk) -> anyhow::Result<()> {
        let alg = jwk_algorithm(jwk)?;
        if let AlgorithmParameters::OctetKey(p) = &jwk.algorithm {
            let len = crate::base64_any(&p.value).map_or(0, |k| k.len());
            anyhow::ensure!(len >= 16, "the JWK secret is shorter than 16 bytes");
        }
        // jsonwebtoken's errors can quote key parameters: say only which key failed.
        let key = DecodingKey::from_jwk(jwk).map_err(|_| {
            anyhow::anyhow!("JWK {:?} is not a usable key", jwk.common.key_id.as_deref().unwrap_or(""))
        })?;
        self.push(JwtKey { kid: jwk.common.key_id.clone(), alg, key })
    }

    /// Adds the keys of a file: a JWK set (`{"keys": [...]}`), one JWK, or else a raw HS256
    /// secret (the file's bytes less trailing whitespace), which has no key id.
    pub(crate) fn add_file(&mut self, bytes: &[u8]) -> anyhow::Result<()> {
        if let Ok(set) = serde_json::from_slice::<JwkSet>(bytes) {
            return set.keys.iter().try_for_each(|k| self.add_jwk(k));
        }
        if let Ok(jwk) = serde_json::from_slice::<Jwk>(bytes) {
            return self.add_jwk(&jwk);
        }
        anyhow::ensure!(!bytes.trim_ascii_start().starts_with(b"{"), "a JSON key file that is no JWK (set)");
        self.add_secret(None, bytes.trim_ascii_end())
    }

    fn select(&self, kid: Option<&str>) -> Result<&JwtKey, TokenError> {
        match kid {
            Some(kid) => self.keys.iter().find(|k| k.kid.as_deref() == Some(kid)),
            None if self.keys.len() == 1 => self.keys.first(),
            None => None,
        }
        .ok_or(TokenError::UnknownKey)
    }

    /// Verifies a JWT (already known to be three base64url parts with a JSON header).
    pub(crate) fn verify(&self, text: &str, now: u64) -> Result<Grant, TokenError> {
        let header = header_json(text).ok_or(TokenError::Malformed)?;
        let alg = header.get("alg").and_then(|a| a.as_str()).ok_or(TokenError::Malformed)?;
        if alg.eq_ignore_ascii_case("none") {
            return Err(TokenError::BadAlgorithm);
        }
        let key = self.select(header.get("kid").and_then(|k| k.as_str()))?;
        let mut v = Validation::new(key.alg);
        // Times are checked below against the caller's clock, not jsonwebtoken's.
        v.validate_exp = false;
        v.validate_nbf = false;
        v.validate_aud = false;
        v.required_spec_claims.clear();
        v.leeway = 0;
        let data = jsonwebtoken::decode::<JwtClaims>(text, &key.key, &v).map_err(|e| match e.kind() {
            ErrorKind::InvalidSignature => TokenError::BadSignature,
            ErrorKind::InvalidAlgorithm | ErrorKind::InvalidAlgorithmName | ErrorKind::MissingAlgorithm => {
                TokenError::BadAlgorithm
            }
            _ => TokenError::Malformed,
        })?;
        let c = data.claims;
        let exp = c.exp.ok_or(TokenError::BadClaim)?;
        let expires = check_times(exp, c.nbf, now)?;
        Ok(Grant { publish: c.prefixes(&c.put), subscribe: c.prefixes(&c.get), expires })
    }
}

/// The decoded JSON header of a `header.payload.signature` text, if it is one.
pub(crate) fn header_json(text: &str) -> Option<serde_json::Map<String, serde_json::Value>> {
    let mut parts = text.split('.');
    let (Some(h), Some(_), Some(_), None) = (parts.next(), parts.next(), parts.next(), parts.next()) else {
        return None;
    };
    let bytes = base64::Engine::decode(&base64::engine::general_purpose::URL_SAFE_NO_PAD, h).ok()?;
    match serde_json::from_slice(&bytes).ok()? {
        serde_json::Value::Object(m) => Some(m),
        _ => None,
    }
}

/// A key to mint JWTs with, and the algorithm it signs with.
#[derive(Clone)]
pub struct JwtSigner {
    /// The key ID written in the header.
    pub kid: Option<String>,
    /// The algorithm.
    pub alg: Algorithm,
    /// The signing key.
    pub key: EncodingKey,
}

impl JwtSigner {
    /// An HMAC-SHA256 secret.
    pub fn hs256(secret: &[u8]) -> Self {
        JwtSigner { kid: None, alg: Algorithm::HS256, key: EncodingKey::from_secret(secret) }
    }

    /// A P-256 key in PKCS#8 DER (as `ring::signature::EcdsaKeyPair::generate_pkcs8` makes).
    pub fn es256_pkcs8(der: &[u8]) -> Self {
        JwtSigner { kid: None, alg: Algorithm::ES256, key: EncodingKey::from_ec_der(der) }
    }

    /// An Ed25519 key in PKCS#8 DER.
    pub fn ed25519_pkcs8(der: &[u8]) -> Self {
        JwtSigner { kid: None, alg: Algorithm::EdDSA, key: EncodingKey::from_ed_der(der) }
    }

    /// An RSA key in PKCS#1 DER (`RSAPrivateKey`).
    pub fn rs256_pkcs1(der: &[u8]) -> Self {
        JwtSigner { kid: None, alg: Algorithm::RS256, key: EncodingKey::from_rsa_der(der) }
    }

    /// The same key, named `kid` in the header.
    pub fn with_kid(mut self, kid: &str) -> Self {
        self.kid = Some(kid.to_string());
        self
    }
}

/// Mints a JWT with `signer`'s key, algorithm and key id.
pub fn mint_jwt(signer: &JwtSigner, claims: &JwtClaims) -> anyhow::Result<String> {
    let mut header = Header::new(signer.alg);
    header.kid.clone_from(&signer.kid);
    jsonwebtoken::encode(&header, claims, &signer.key).map_err(|e| anyhow::anyhow!("minting a JWT: {e}"))
}
