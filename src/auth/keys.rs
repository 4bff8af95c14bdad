//! The verifier the relay holds: the keys of every format, and which formats are on.

use std::path::PathBuf;
use std::str::FromStr;
use std::sync::{Arc, RwLock};

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
    /// This relay's own tokens.
    pub tokens: bool,
    /// JSON Web Tokens.
    pub jwt: bool,
    /// Common Access Tokens.
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
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuthSources {
    /// `v1` keys, `id=base64url-secret` entries (as [`Keys::parse`] takes).
    pub tokens: Vec<String>,
    /// JWT key files: a JWK set JSON (`{"keys": [...]}`), one JWK, or a raw HS256 secret.
    pub jwt_files: Vec<PathBuf>,
    /// CAT key files: JWK set JSON with `kid`s, `oct` (HMAC) and `EC` P-256 (ES256) keys.
    pub cat_files: Vec<PathBuf>,
    /// The formats accepted.
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

/// The keys in force, shared by every core: loaded from [`AuthSources`] at start, and again
/// by [`KeyRing::reload`] (SIGHUP, or a key file that changed) without a restart. Requests
/// read the keys with [`KeyRing::keys`] (a read lock and a reference count, once per request,
/// never per object).
#[derive(Debug, Clone)]
pub struct KeyRing {
    sources: Arc<AuthSources>,
    current: Arc<RwLock<Arc<Keys>>>,
}

/// Two rings are equal when they read the same sources (the keys they hold follow from them).
impl PartialEq for KeyRing {
    fn eq(&self, other: &KeyRing) -> bool {
        self.sources == other.sources
    }
}

impl Eq for KeyRing {}

impl KeyRing {
    /// Loads the keys `sources` names.
    pub fn load(sources: AuthSources) -> anyhow::Result<KeyRing> {
        let keys = Keys::load(&sources)?;
        Ok(KeyRing { sources: Arc::new(sources), current: Arc::new(RwLock::new(Arc::new(keys))) })
    }

    /// Keys that are not read from files (tests, and tools that mint their own).
    pub fn fixed(keys: Keys) -> KeyRing {
        KeyRing { sources: Arc::default(), current: Arc::new(RwLock::new(Arc::new(keys))) }
    }

    /// The keys in force.
    pub fn keys(&self) -> Arc<Keys> {
        match self.current.read() {
            Ok(k) => k.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// Reads the key files again and puts the new keys in force; on failure the old keys stay.
    pub fn reload(&self) -> anyhow::Result<()> {
        let keys = Arc::new(Keys::load(&self.sources)?);
        match self.current.write() {
            Ok(mut k) => *k = keys,
            Err(poisoned) => *poisoned.into_inner() = keys,
        }
        Ok(())
    }

    /// The key files, to watch for changes.
    pub fn files(&self) -> Vec<PathBuf> {
        self.sources.jwt_files.iter().chain(&self.sources.cat_files).cloned().collect()
    }
}
