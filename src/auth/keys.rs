//! The verifier the relay holds: the keys of every format, and which formats are on.

use std::path::PathBuf;
use std::str::FromStr;

use crate::cat::CatKeys;
use crate::jwt::{self, JwtKeys};
use crate::v1::{Claims, V1Keys};
use crate::{Grant, TokenError};

/// Longest token value verified (bytes); longer ones are malformed.
const MAX_TOKEN_LEN: usize = 16 * 1024;

/// A token format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// This project's `v1.` tokens.
    Tokens,
    /// JSON Web Tokens (RFC 7519).
    Jwt,
    /// Common Access Tokens (CTA-5007).
    Cat,
}

impl FromStr for Format {
    type Err = anyhow::Error;

    fn from_str(s: &str) -> anyhow::Result<Format> {
        match s.trim() {
            "tokens" | "v1" => Ok(Format::Tokens),
            "jwt" => Ok(Format::Jwt),
            "cat" => Ok(Format::Cat),
            other => anyhow::bail!("unknown token format {other:?} (tokens, jwt, cat)"),
        }
    }
}

/// Which formats [`Keys::verify`] accepts (all by default).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Formats {
    pub tokens: bool,
    pub jwt: bool,
    pub cat: bool,
}

impl Default for Formats {
    fn default() -> Self {
        Formats { tokens: true, jwt: true, cat: true }
    }
}

impl Formats {
    /// Formats from a comma-separated list such as `jwt,cat` (as `--auth jwt,cat` gives).
    pub fn parse(list: &str) -> anyhow::Result<Formats> {
        let mut f = Formats { tokens: false, jwt: false, cat: false };
        for name in list.split(',').filter(|n| !n.trim().is_empty()) {
            match name.parse()? {
                Format::Tokens => f.tokens = true,
                Format::Jwt => f.jwt = true,
                Format::Cat => f.cat = true,
            }
        }
        Ok(f)
    }
}

/// Where [`Keys::load`] finds the keys.
#[derive(Debug, Clone, Default)]
pub struct AuthSources {
    /// `v1` keys, `id=base64url-secret` entries (as [`Keys::parse`] takes).
    pub tokens: Vec<String>,
    /// JWT key files: a JWK set JSON (`{"keys": [...]}`), one JWK, or a raw HS256 secret.
    pub jwt_files: Vec<PathBuf>,
    /// CAT key files: JWK set JSON with `kid`s, `oct` (HMAC) and `EC` P-256 (ES256) keys.
    pub cat_files: Vec<PathBuf>,
    pub formats: Formats,
}

/// The verification keys of every format, and the formats turned on.
#[derive(Clone, Default)]
pub struct Keys {
    v1: V1Keys,
    jwt: JwtKeys,
    cat: CatKeys,
    formats: Formats,
}

impl std::fmt::Debug for Keys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Keys")
            .field("ids", &self.v1.ids())
            .field("jwt", &self.jwt.ids())
            .field("cat", &self.cat.ids())
            .field("formats", &self.formats)
            .finish()
    }
}

impl Keys {
    /// `v1` keys from `id=base64url-secret` entries (the secret at least 16 bytes).
    pub fn parse(entries: &[String]) -> anyhow::Result<Keys> {
        Ok(Keys { v1: V1Keys::parse(entries)?, ..Keys::default() })
    }

    /// Keys of every format from `sources` (reading the key files now: call again when one
    /// changes, and swap the result in, to rotate keys without a restart).
    pub fn load(sources: &AuthSources) -> anyhow::Result<Keys> {
        let mut keys = Keys::parse(&sources.tokens)?.with_formats(sources.formats);
        let read = |p: &PathBuf| {
            std::fs::read(p).map_err(|e| anyhow::anyhow!("reading key file {}: {e}", p.display()))
        };
        for p in &sources.jwt_files {
            keys.add_jwt_keys(&read(p)?).map_err(|e| anyhow::anyhow!("JWT key file {}: {e}", p.display()))?;
        }
        for p in &sources.cat_files {
            keys.add_cat_keys(&read(p)?).map_err(|e| anyhow::anyhow!("CAT key file {}: {e}", p.display()))?;
        }
        Ok(keys)
    }

    /// Adds JWT keys from a key file's bytes (see [`AuthSources::jwt_files`]).
    pub fn add_jwt_keys(&mut self, file: &[u8]) -> anyhow::Result<()> {
        self.jwt.add_file(file)
    }

    /// Adds CAT keys from a key file's bytes (see [`AuthSources::cat_files`]).
    pub fn add_cat_keys(&mut self, file: &[u8]) -> anyhow::Result<()> {
        self.cat.add_file(file)
    }

    /// These keys with only `formats` accepted.
    pub fn with_formats(mut self, formats: Formats) -> Keys {
        self.formats = formats;
        self
    }

    /// True without a key of any format.
    pub fn is_empty(&self) -> bool {
        self.v1.is_empty() && self.jwt.is_empty() && self.cat.is_empty()
    }

    /// Mints a `v1` token with these keys (the first by ID), for a relay that shares its keys
    /// with its parents: what it renews its own upstream subscriptions with. `None` without
    /// `v1` keys.
    pub fn mint(&self, claims: &Claims) -> Option<String> {
        self.v1.mint(claims)
    }

    /// Verifies a token value of any enabled format and returns what it grants. The format
    /// is told by shape: a `v1.` prefix, else three base64url parts with a JSON header (JWT),
    /// else CBOR or base64 text of CBOR (CAT).
    pub fn verify(&self, token: &[u8], now: u64) -> Result<Grant, TokenError> {
        if token.len() > MAX_TOKEN_LEN {
            return Err(TokenError::Malformed);
        }
        let text = std::str::from_utf8(token).ok();
        if token.starts_with(b"v1.") {
            let text = text.ok_or(TokenError::Malformed)?;
            return if self.formats.tokens { self.v1.verify(text, now) } else { Err(TokenError::Disabled) };
        }
        if let Some(text) = text.filter(|t| jwt::header_json(t).is_some()) {
            return if self.formats.jwt { self.jwt.verify(text, now) } else { Err(TokenError::Disabled) };
        }
        if !self.formats.cat {
            return Err(TokenError::Malformed);
        }
        self.cat.verify(token, now)
    }
}
