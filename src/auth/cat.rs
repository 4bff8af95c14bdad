//! Common Access Tokens (CTA-5007): CBOR Web Tokens (RFC 8392) in COSE_Mac0 with
//! HMAC 256/256 (COSE alg 5) or COSE_Sign1 with ES256 (COSE alg -7) (RFC 9052, RFC 9053),
//! optionally tagged CWT (61) and/or COSE_Mac0 (17) / COSE_Sign1 (18), carried as raw CBOR
//! bytes or as base64/base64url text.
//!
//! The key is selected by the COSE `kid` header (protected, else unprotected); a token without
//! one is accepted only when exactly one CAT key is configured. The key decides the structure
//! and algorithm: an HMAC key verifies only COSE_Mac0 with alg 5, an EC P-256 key only
//! COSE_Sign1 with alg -7, whatever the token claims; the `alg` must be in the protected
//! header (RFC 9052 §3.1 puts it there), and the external AAD is empty.
//!
//! Claims:
//!
//! - `exp` (4, required), `nbf` (5), `iat` (6, informational), with [`crate::LEEWAY`].
//! - `catu` (312, URI restriction): its path component (3) with an exact (0) or prefix (1)
//!   match is the token's root namespace, the path split on `/` into fields — the connection
//!   URL's path as the session's root, the way moq-dev's relay scopes a session. A prefix that
//!   ends mid-segment (`/live/ro`) is taken as the whole segment (`live`, `ro`), a narrower
//!   scope than the text prefix. Scheme, host and port components are not checked (the token
//!   has reached this relay); any other component or match type is refused as
//!   [`TokenError::Unsupported`].
//! - `moqt` (draft-ietf-moq-c4m §"moqt claim"): `[+ [actions, ? [+ ns-match], ? track-match]]`.
//!   The draft has no claim key assigned yet (`TBD_MOQT`), so this verifier reads it under the
//!   text label `"moqt"` and under the private-use integer [`MOQT_CLAIM_KEY`]. A scope whose
//!   actions include PUBLISH_NAMESPACE (2) or PUBLISH (6) grants [`crate::Right::Publish`]; one
//!   that includes SUBSCRIBE (4) grants [`crate::Right::Subscribe`]. Only scopes whose
//!   namespace matches are exact byte strings, without a trailing `nil` and without a track
//!   match, map onto namespace prefixes; other scopes (prefix/suffix field matches, exact-length
//!   or per-track scopes) grant nothing here, which is narrower than the token, never wider.
//!   Each scope is intersected with the `catu` root.
//! - Without a `moqt` claim the token grants subscribe (not publish) on the `catu` root, or
//!   on everything without `catu`, as a URL access token does for a CDN.
//! - `moqt-reval` (text label, or [`MOQT_REVAL_CLAIM_KEY`]) other than 0, and `catreplay`
//!   (308) other than 0 (reuse permitted), are refused as [`TokenError::Unsupported`]: this
//!   verifier neither revalidates nor remembers tokens it has seen.
//! - Recognised and ignored for now: `catr` (323, renewal: the relay issues no renewed token),
//!   and the restrictions that do not apply to a MoQT session or that it cannot see here
//!   (`catm`, `catalpn`, `cath`, `catnip`, `catgeo*`, `catif`, `catifdata`, `cattpk`,
//!   `catdpop`, `catpor`, `catv`, `cattprint`), like any other unknown claim.

use ciborium::value::{Integer, Value};
use coset::{iana, AsCborValue, CoseMac0, CoseMac0Builder, CoseSign1, CoseSign1Builder, HeaderBuilder};
use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, JwkSet};
use ring::{hmac, rand, signature};
use wire::model::TrackNamespace;

use crate::{base64_any, check_times, path_fields, Grant, TokenError};

/// Private-use CWT claim key (RFC 8392 §9.1: below -65536) for the `moqt` claim until IANA
/// assigns one.
pub const MOQT_CLAIM_KEY: i64 = -65_537;
/// Private-use CWT claim key for `moqt-reval` until IANA assigns one.
pub const MOQT_REVAL_CLAIM_KEY: i64 = -65_538;

const CWT_TAG: u64 = 61;
const MAC0_TAG: u64 = 17;
const SIGN1_TAG: u64 = 18;
const EXP: i64 = 4;
const NBF: i64 = 5;
const IAT: i64 = 6;
const CATREPLAY: i64 = 308;
const CATU: i64 = 312;
const CATU_PATH: i64 = 3;

/// How a `catu` path restriction matches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PathMatch {
    /// The URL's path is this.
    Exact(String),
    /// The URL's path starts with this.
    Prefix(String),
}

/// One `moqt` scope: actions (draft-ietf-moq-c4m action numbers) on a namespace prefix given
/// as exact field matches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MoqtScope {
    /// The actions allowed (draft-ietf-moq-c4m action numbers).
    pub actions: Vec<u64>,
    /// The namespace prefix, one exact match per field.
    pub namespace: Vec<Vec<u8>>,
}

/// The claims [`mint_cat`] writes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CatClaims {
    /// Expiry, Unix seconds.
    pub exp: u64,
    /// Not before, Unix seconds.
    pub nbf: Option<u64>,
    /// Issued at, Unix seconds.
    pub iat: Option<u64>,
    /// The `catu` restriction of the URL's path.
    pub catu_path: Option<PathMatch>,
    /// The `moqt` scopes.
    pub moqt: Vec<MoqtScope>,
}

#[derive(Clone)]
enum CatKey {
    Hmac(hmac::Key),
    /// An uncompressed SEC1 P-256 point.
    Es256(Vec<u8>),
}

#[derive(Clone)]
struct CatKeyEntry {
    kid: Option<Vec<u8>>,
    key: CatKey,
}

/// The CAT verification keys.
#[derive(Clone, Default)]
pub(crate) struct CatKeys {
    keys: Vec<CatKeyEntry>,
}

impl CatKeys {
    pub(crate) fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    pub(crate) fn ids(&self) -> Vec<String> {
        let name = |k: &CatKeyEntry| k.kid.as_ref().map(|k| String::from_utf8_lossy(k).into_owned());
        self.keys.iter().map(|k| name(k).unwrap_or_else(|| "(no kid)".into())).collect()
    }

    /// Adds the keys of a JWK set (`{"keys": [...]}`): `oct` keys for HMAC 256/256 (at least
    /// 16 bytes) and `EC` P-256 keys for ES256, each named by its `kid`.
    pub(crate) fn add_file(&mut self, bytes: &[u8]) -> anyhow::Result<()> {
        let set: JwkSet = serde_json::from_slice(bytes).map_err(|_| anyhow::anyhow!("not a JWK set"))?;
        for jwk in &set.keys {
            let kid = jwk.common.key_id.clone();
            let name = kid.clone().unwrap_or_default();
            let key = match &jwk.algorithm {
                AlgorithmParameters::OctetKey(p) => {
                    let k = base64_any(&p.value).ok_or_else(|| anyhow::anyhow!("CAT key {name:?}: bad k"))?;
                    anyhow::ensure!(k.len() >= 16, "CAT key {name:?}: the secret is shorter than 16 bytes");
                    CatKey::Hmac(hmac::Key::new(hmac::HMAC_SHA256, &k))
                }
                AlgorithmParameters::EllipticCurve(p) if p.curve == EllipticCurve::P256 => {
                    let (x, y) = (base64_any(&p.x), base64_any(&p.y));
                    let (Some(x), Some(y)) = (x, y) else { anyhow::bail!("CAT key {name:?}: bad x/y") };
                    anyhow::ensure!(x.len() == 32 && y.len() == 32, "CAT key {name:?}: not a P-256 point");
                    CatKey::Es256([&[4u8][..], &x, &y].concat())
                }
                _ => anyhow::bail!("CAT key {name:?}: only oct and EC P-256 keys"),
            };
            let kid = kid.map(String::into_bytes);
            anyhow::ensure!(!self.keys.iter().any(|k| k.kid == kid), "CAT key id {name:?} given twice");
            self.keys.push(CatKeyEntry { kid, key });
        }
        Ok(())
    }

    fn select(&self, kid: &[u8]) -> Result<&CatKeyEntry, TokenError> {
        if kid.is_empty() {
            return match self.keys.as_slice() {
                [only] => Ok(only),
                _ => Err(TokenError::UnknownKey),
            };
        }
        self.keys.iter().find(|k| k.kid.as_deref() == Some(kid)).ok_or(TokenError::UnknownKey)
    }

    /// Verifies a CAT, raw CBOR (`token`) or base64 text of it.
    pub(crate) fn verify(&self, token: &[u8], now: u64) -> Result<Grant, TokenError> {
        let (cose_tag, value) = untag(token)?;
        // COSE_Mac0 and COSE_Sign1 share their shape: read the headers as either.
        let mac0 = CoseMac0::from_cbor_value(value.clone()).map_err(|_| TokenError::Malformed)?;
        let kid = match mac0.protected.header.key_id.as_slice() {
            [] => mac0.unprotected.key_id.as_slice(),
            kid => kid,
        };
        let entry = self.select(kid)?;
        let alg = mac0.protected.header.alg.clone();
        let payload = match &entry.key {
            CatKey::Hmac(key) => {
                let want = coset::Algorithm::Assigned(iana::Algorithm::HMAC_256_256);
                if cose_tag == Some(SIGN1_TAG) || alg != Some(want) {
                    return Err(TokenError::BadAlgorithm);
                }
                mac0.verify_payload_tag(
                    b"",
                    || TokenError::Malformed,
                    |tag, data| hmac::verify(key, data, tag).map_err(|_| TokenError::BadSignature),
                )?;
                mac0.payload
            }
            CatKey::Es256(point) => {
                let want = coset::Algorithm::Assigned(iana::Algorithm::ES256);
                if cose_tag == Some(MAC0_TAG) || alg != Some(want) {
                    return Err(TokenError::BadAlgorithm);
                }
                let sign1 = CoseSign1::from_cbor_value(value).map_err(|_| TokenError::Malformed)?;
                if sign1.payload.is_none() {
                    return Err(TokenError::Malformed);
                }
                let public = signature::UnparsedPublicKey::new(&signature::ECDSA_P256_SHA256_FIXED, point);
                sign1.verify_signature(b"", |sig, data| {
                    public.verify(data, sig).map_err(|_| TokenError::BadSignature)
                })?;
                sign1.payload
            }
        };
        grant(&payload.ok_or(TokenError::Malformed)?, now)
    }
}

/// Decodes one CBOR item filling `bytes` (or base64 text of one) and strips the CWT tag and
/// a COSE_Mac0/COSE_Sign1 tag: returns the COSE tag, if any, and the COSE array.
fn untag(bytes: &[u8]) -> Result<(Option<u64>, Value), TokenError> {
    let decoded;
    let raw = match bytes.first() {
        // A CBOR tag (major type 6) or a 4-array: raw bytes. Base64 text starts elsewhere.
        Some(0xc0..=0xdb | 0x84) => bytes,
        _ => {
            let text = std::str::from_utf8(bytes).map_err(|_| TokenError::Malformed)?;
            decoded = base64_any(text.trim()).ok_or(TokenError::Malformed)?;
            &decoded
        }
    };
    let mut v = decode_all(raw)?;
    let (mut cwt, mut cose) = (false, None);
    while let Value::Tag(tag, inner) = v {
        match tag {
            CWT_TAG if !cwt && cose.is_none() => cwt = true,
            MAC0_TAG | SIGN1_TAG if cose.is_none() => cose = Some(tag),
            _ => return Err(TokenError::Malformed),
        }
        v = *inner;
    }
    Ok((cose, v))
}

fn decode_all(bytes: &[u8]) -> Result<Value, TokenError> {
    let mut cursor = std::io::Cursor::new(bytes);
    let v: Value = ciborium::from_reader(&mut cursor).map_err(|_| TokenError::Malformed)?;
    if cursor.position() != bytes.len() as u64 {
        return Err(TokenError::Malformed);
    }
    Ok(v)
}

fn int(v: &Value) -> Option<i128> {
    v.as_integer().map(i128::from)
}

fn time(v: &Value) -> Result<u64, TokenError> {
    int(v).and_then(|i| u64::try_from(i).ok()).ok_or(TokenError::BadClaim)
}

/// The label of a claim: its integer key, or the private-use key of a text label we know.
fn label(k: &Value) -> Option<i64> {
    match k {
        Value::Text(t) if t == "moqt" => Some(MOQT_CLAIM_KEY),
        Value::Text(t) if t == "moqt-reval" => Some(MOQT_REVAL_CLAIM_KEY),
        _ => int(k).and_then(|i| i64::try_from(i).ok()),
    }
}

/// What the claims of a verified CAT grant.
fn grant(payload: &[u8], now: u64) -> Result<Grant, TokenError> {
    let Value::Map(claims) = decode_all(payload)? else { return Err(TokenError::Malformed) };
    let (mut exp, mut nbf, mut root, mut moqt) = (None, None, Vec::new(), None);
    for (k, v) in &claims {
        match label(k) {
            Some(EXP) => exp = Some(time(v)?),
            Some(NBF) => nbf = Some(time(v)?),
            Some(IAT) => {
                time(v)?;
            }
            Some(CATU) => root = catu_root(v)?,
            Some(CATREPLAY | MOQT_REVAL_CLAIM_KEY) if int(v) != Some(0) => {
                return Err(TokenError::Unsupported);
            }
            Some(MOQT_CLAIM_KEY) => moqt = Some(moqt_scopes(v)?),
            _ => {}
        }
    }
    let expires = check_times(exp.ok_or(TokenError::BadClaim)?, nbf, now)?;
    let root = TrackNamespace::from_strs(&root);
    let Some(scopes) = moqt else {
        return Ok(Grant { publish: Vec::new(), subscribe: vec![root], expires });
    };
    let mut g = Grant { expires, ..Grant::default() };
    for (publish, subscribe, ns) in scopes {
        let ns = if ns.starts_with(&root) {
            ns
        } else if root.starts_with(&ns) {
            root.clone()
        } else {
            continue;
        };
        if publish {
            g.publish.push(ns.clone());
        }
        if subscribe {
            g.subscribe.push(ns);
        }
    }
    Ok(g)
}

/// The root namespace fields of a `catu` claim (see the module docs).
fn catu_root(v: &Value) -> Result<Vec<String>, TokenError> {
    let Value::Map(components) = v else { return Err(TokenError::BadClaim) };
    let mut root = Vec::new();
    for (component, matcher) in components {
        match int(component) {
            Some(0..=2) => continue,
            Some(c) if c == i128::from(CATU_PATH) => {}
            _ => return Err(TokenError::Unsupported),
        }
        let Value::Map(m) = matcher else { return Err(TokenError::BadClaim) };
        let [(kind, Value::Text(path))] = m.as_slice() else { return Err(TokenError::Unsupported) };
        match int(kind) {
            Some(0 | 1) => root = path_fields(path).into_iter().map(str::to_string).collect(),
            _ => return Err(TokenError::Unsupported),
        }
    }
    Ok(root)
}

/// The representable scopes of a `moqt` claim: (publish, subscribe, namespace prefix).
fn moqt_scopes(v: &Value) -> Result<Vec<(bool, bool, TrackNamespace)>, TokenError> {
    let Value::Array(scopes) = v else { return Err(TokenError::BadClaim) };
    let mut out = Vec::new();
    for scope in scopes {
        let Value::Array(parts) = scope else { return Err(TokenError::BadClaim) };
        let Some(Value::Array(actions)) = parts.first() else { return Err(TokenError::BadClaim) };
        let actions: Vec<i128> =
            actions.iter().map(|a| int(a).ok_or(TokenError::BadClaim)).collect::<Result<_, _>>()?;
        let publish = actions.iter().any(|a| *a == 2 || *a == 6);
        let subscribe = actions.contains(&4);
        let fields = match parts.get(1) {
            None => Some(Vec::new()),
            Some(Value::Array(matches)) => exact_fields(matches),
            Some(_) => return Err(TokenError::BadClaim),
        };
        // A track match (third element) narrows to tracks, which grants cannot express.
        if let (Some(fields), None) = (fields, parts.get(2)) {
            out.push((publish, subscribe, TrackNamespace::from_strs(&fields)));
        }
    }
    Ok(out)
}

/// The namespace fields when every match is an exact byte string (else `None`).
fn exact_fields(matches: &[Value]) -> Option<Vec<Vec<u8>>> {
    matches.iter().map(|m| if let Value::Bytes(b) = m { Some(b.clone()) } else { None }).collect()
}

/// A key to mint CATs with.
#[derive(Debug, Clone)]
pub enum CatSigner {
    /// HMAC 256/256 in COSE_Mac0.
    Hmac {
        /// The key ID.
        kid: Vec<u8>,
        /// The secret.
        secret: Vec<u8>,
    },
    /// ES256 in COSE_Sign1, a P-256 key in PKCS#8 DER.
    Es256 {
        /// The key ID.
        kid: Vec<u8>,
        /// The private key, PKCS#8 DER.
        pkcs8: Vec<u8>,
    },
}

fn claims_cbor(c: &CatClaims) -> anyhow::Result<Vec<u8>> {
    let i = |n: i64| Value::Integer(Integer::from(n));
    let t = |n: u64| Value::Integer(Integer::from(n));
    let mut map = vec![(i(EXP), t(c.exp))];
    map.extend(c.nbf.map(|n| (i(NBF), t(n))));
    map.extend(c.iat.map(|n| (i(IAT), t(n))));
    if let Some(path) = &c.catu_path {
        let (kind, p) = match path {
            PathMatch::Exact(p) => (0, p),
            PathMatch::Prefix(p) => (1, p),
        };
        let matcher = Value::Map(vec![(i(kind), Value::Text(p.clone()))]);
        map.push((i(CATU), Value::Map(vec![(i(CATU_PATH), matcher)])));
    }
    if !c.moqt.is_empty() {
        let scope = |s: &MoqtScope| {
            let actions = Value::Array(s.actions.iter().map(|a| t(*a)).collect());
            let ns = Value::Array(s.namespace.iter().map(|f| Value::Bytes(f.clone())).collect());
            Value::Array(vec![actions, ns])
        };
        map.push((i(MOQT_CLAIM_KEY), Value::Array(c.moqt.iter().map(scope).collect())));
    }
    let mut out = Vec::new();
    ciborium::into_writer(&Value::Map(map), &mut out)?;
    Ok(out)
}

/// Mints a CAT: a CWT-tagged (61) COSE_Mac0 (17) or COSE_Sign1 (18) with `kid` in the
/// protected header. [`crate::base64url`] makes text of it for a URL.
pub fn mint_cat(signer: &CatSigner, claims: &CatClaims) -> anyhow::Result<Vec<u8>> {
    let payload = claims_cbor(claims)?;
    let (tag, value) = match signer {
        CatSigner::Hmac { kid, secret } => {
            let key = hmac::Key::new(hmac::HMAC_SHA256, secret);
            let protected = HeaderBuilder::new().algorithm(iana::Algorithm::HMAC_256_256).key_id(kid.clone());
            let mac0 = CoseMac0Builder::new()
                .protected(protected.build())
                .payload(payload)
                .create_tag(b"", |data| hmac::sign(&key, data).as_ref().to_vec())
                .build();
            (MAC0_TAG, mac0.to_cbor_value())
        }
        CatSigner::Es256 { kid, pkcs8 } => {
            let rng = rand::SystemRandom::new();
            let alg = &signature::ECDSA_P256_SHA256_FIXED_SIGNING;
            let pair = signature::EcdsaKeyPair::from_pkcs8(alg, pkcs8, &rng)
                .map_err(|_| anyhow::anyhow!("not a P-256 PKCS#8 key"))?;
            let protected = HeaderBuilder::new().algorithm(iana::Algorithm::ES256).key_id(kid.clone());
            let mut failed = false;
            let sign1 = CoseSign1Builder::new()
                .protected(protected.build())
                .payload(payload)
                .create_signature(b"", |data| {
                    pair.sign(&rng, data).map(|s| s.as_ref().to_vec()).unwrap_or_else(|_| {
                        failed = true;
                        Vec::new()
                    })
                })
                .build();
            anyhow::ensure!(!failed, "ES256 signing failed");
            (SIGN1_TAG, sign1.to_cbor_value())
        }
    };
    let value = value.map_err(|_| anyhow::anyhow!("encoding the COSE structure"))?;
    let tagged = Value::Tag(CWT_TAG, Box::new(Value::Tag(tag, Box::new(value))));
    let mut out = Vec::new();
    ciborium::into_writer(&tagged, &mut out)?;
    Ok(out)
}
