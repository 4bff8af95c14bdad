#![allow(clippy::unwrap_used)]

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use bytes::Bytes;
use ciborium::value::{Integer, Value};
use proptest::prelude::*;
use ring::rand::SystemRandom;
use ring::signature::{self, Ed25519KeyPair, KeyPair};
use wire::model::{AuthToken, TrackNamespace};
use wire::RequestErrorCode;
use wire::SessionCode;

use super::*;
use crate::jwt::Algorithm;

const SECRET: &[u8] = b"0123456789abcdef0123";
const RSA_PKCS1: &[u8] = include_bytes!("tests/rsa2048-pkcs1.der");
const NOW: u64 = 1_000_000;

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

fn ns(fields: &[&str]) -> TrackNamespace {
    TrackNamespace::from_strs(fields)
}

#[test]
fn tokens_verify_and_grant_a_prefix_until_expiry() {
    let k = keys();
    let t = token(&["live"], false, true, 100);
    let g = k.verify(&t, 50).unwrap();
    assert_eq!(g.subscribe, vec![ns(&["live"])]);
    assert!(g.publish.is_empty());
    assert!(g.allows(&ns(&["live", "cam"]), Right::Subscribe, 50));
    assert!(!g.allows(&ns(&["live", "cam"]), Right::Publish, 50));
    assert!(!g.allows(&ns(&["news"]), Right::Subscribe, 50));
    assert_eq!(k.verify(&t, 100), Err(TokenError::Expired));
    let mut bad = t.to_vec();
    let n = bad.len();
    bad[n - 3] ^= 1;
    assert_eq!(k.verify(&bad, 50), Err(TokenError::BadSignature), "signature");
    let other = Keys::parse(&[format!("k1={}", URL_SAFE_NO_PAD.encode(b"another secret of 16+"))]).unwrap();
    assert_eq!(other.verify(&t, 50), Err(TokenError::BadSignature), "another key");
    assert_eq!(k.verify(b"v1.k2.e30.AAAA", 50), Err(TokenError::UnknownKey), "unknown key id");
    assert_eq!(k.verify(b"garbage", 50), Err(TokenError::Malformed));
    assert!(Keys::parse(&["k1=c2hvcnQ".to_string()]).is_err(), "short secret");
    assert!(Keys::parse(&["no-equals".to_string()]).is_err());
    let err = Keys::parse(&["k1=bm90LWEtc2VjcmV0!".to_string()]).unwrap_err().to_string();
    assert!(!err.contains("bm90"), "no secret in errors: {err}");
    assert_eq!(
        k.clone().with_formats(Formats::parse("jwt,cat").unwrap()).verify(&t, 50),
        Err(TokenError::Disabled)
    );
}

#[test]
fn requests_are_authorized_by_setup_request_or_alias_tokens() {
    let k = keys();
    let ns = ns(&["live", "a"]);
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

// ---- JWT ----

fn jwt_claims(root: &str, put: &[&str], get: &[&str]) -> JwtClaims {
    JwtClaims {
        root: root.into(),
        put: put.iter().map(|s| s.to_string()).collect(),
        get: get.iter().map(|s| s.to_string()).collect(),
        exp: Some(NOW + 600),
        iat: Some(NOW),
        nbf: None,
    }
}

fn jwt_keys(jwks: &str) -> Keys {
    let mut k = Keys::default();
    k.add_jwt_keys(jwks.as_bytes()).unwrap();
    k
}

fn hs_jwks(kid: &str) -> String {
    format!(r#"{{"keys":[{{"kty":"oct","kid":"{kid}","k":"{}"}}]}}"#, URL_SAFE_NO_PAD.encode(SECRET))
}

/// A P-256 key pair: PKCS#8 DER and its JWK (public part).
fn ec_key(kid: &str) -> (Vec<u8>, String) {
    let rng = SystemRandom::new();
    let alg = &signature::ECDSA_P256_SHA256_FIXED_SIGNING;
    let der = signature::EcdsaKeyPair::generate_pkcs8(alg, &rng).unwrap().as_ref().to_vec();
    let pair = signature::EcdsaKeyPair::from_pkcs8(alg, &der, &rng).unwrap();
    let point = pair.public_key().as_ref();
    let (x, y) = (URL_SAFE_NO_PAD.encode(&point[1..33]), URL_SAFE_NO_PAD.encode(&point[33..]));
    (der, format!(r#"{{"kty":"EC","crv":"P-256","kid":"{kid}","x":"{x}","y":"{y}"}}"#))
}

fn ed_key(kid: &str) -> (Vec<u8>, String) {
    let der = Ed25519KeyPair::generate_pkcs8(&SystemRandom::new()).unwrap().as_ref().to_vec();
    let pair = Ed25519KeyPair::from_pkcs8(&der).unwrap();
    let x = URL_SAFE_NO_PAD.encode(pair.public_key().as_ref());
    (der, format!(r#"{{"kty":"OKP","crv":"Ed25519","kid":"{kid}","x":"{x}"}}"#))
}

/// The RSA fixture's JWK and its modulus (public bytes).
fn rsa_jwk(kid: &str) -> (String, Vec<u8>) {
    let pair = signature::RsaKeyPair::from_der(RSA_PKCS1).unwrap();
    let c = ring::rsa::PublicKeyComponents::<Vec<u8>>::from(pair.public());
    let (n, e) = (URL_SAFE_NO_PAD.encode(&c.n), URL_SAFE_NO_PAD.encode(&c.e));
    (format!(r#"{{"kty":"RSA","kid":"{kid}","n":"{n}","e":"{e}"}}"#), c.n)
}

#[test]
fn jwt_grants_put_and_get_paths_under_root() {
    let k = jwt_keys(&hs_jwks("h1"));
    let signer = JwtSigner::hs256(SECRET).with_kid("h1");
    let t = mint_jwt(&signer, &jwt_claims("room/42", &["alice"], &[""])).unwrap();
    let g = k.verify(t.as_bytes(), NOW).unwrap();
    assert_eq!(g.publish, vec![ns(&["room", "42", "alice"])]);
    assert_eq!(g.subscribe, vec![ns(&["room", "42"])]);
    assert_eq!(g.expires, NOW + 600 + LEEWAY);
    assert!(g.allows(&ns(&["room", "42", "alice", "cam"]), Right::Publish, NOW));
    assert!(g.allows(&ns(&["room", "42", "bob"]), Right::Subscribe, NOW));
    assert!(!g.allows(&ns(&["room", "42", "bob"]), Right::Publish, NOW), "wrong prefix for put");
    assert!(!g.allows(&ns(&["room", "43"]), Right::Subscribe, NOW), "wrong prefix");
    let get_only = mint_jwt(&signer, &jwt_claims("", &[], &["live/"])).unwrap();
    let g = k.verify(get_only.as_bytes(), NOW).unwrap();
    assert!(!g.allows(&ns(&["live"]), Right::Publish, NOW), "wrong action");
    assert!(g.allows(&ns(&["live", "x"]), Right::Subscribe, NOW));
    // `put`/`get` may be one string (moq-dev writes either).
    let raw = br#"{"root":"a","put":"b","exp":2000000}"#;
    let c: JwtClaims = serde_json::from_slice(raw).unwrap();
    assert_eq!(c.put, vec!["b".to_string()]);
}

#[test]
fn jwt_times_are_checked_with_leeway() {
    let k = jwt_keys(&hs_jwks("h1"));
    let signer = JwtSigner::hs256(SECRET).with_kid("h1");
    let mut c = jwt_claims("", &[""], &[""]);
    c.exp = Some(NOW);
    let t = mint_jwt(&signer, &c).unwrap();
    assert!(k.verify(t.as_bytes(), NOW + LEEWAY - 1).is_ok(), "within the leeway");
    assert_eq!(k.verify(t.as_bytes(), NOW + LEEWAY), Err(TokenError::Expired));
    c.exp = Some(NOW + 600);
    c.nbf = Some(NOW + 100);
    let t = mint_jwt(&signer, &c).unwrap();
    assert_eq!(k.verify(t.as_bytes(), NOW), Err(TokenError::NotYetValid));
    assert!(k.verify(t.as_bytes(), NOW + 100 - LEEWAY).is_ok());
    c.exp = None;
    c.nbf = None;
    let t = mint_jwt(&signer, &c).unwrap();
    assert_eq!(k.verify(t.as_bytes(), NOW), Err(TokenError::BadClaim), "missing exp");
}

#[test]
fn jwt_refuses_bad_signatures_unknown_keys_and_foreign_algorithms() {
    let (rsa, modulus) = rsa_jwk("r1");
    let jwks = format!(r#"{{"keys":[{},{rsa}]}}"#, &hs_jwks("h1")[9..hs_jwks("h1").len() - 2]);
    let k = jwt_keys(&jwks);
    let c = jwt_claims("", &[""], &[""]);
    let good = mint_jwt(&JwtSigner::hs256(SECRET).with_kid("h1"), &c).unwrap();
    assert!(k.verify(good.as_bytes(), NOW).is_ok());
    let forged = mint_jwt(&JwtSigner::hs256(b"some other secret!!").with_kid("h1"), &c).unwrap();
    assert_eq!(k.verify(forged.as_bytes(), NOW), Err(TokenError::BadSignature));
    let unknown = mint_jwt(&JwtSigner::hs256(SECRET).with_kid("h9"), &c).unwrap();
    assert_eq!(k.verify(unknown.as_bytes(), NOW), Err(TokenError::UnknownKey));
    let no_kid = mint_jwt(&JwtSigner::hs256(SECRET), &c).unwrap();
    assert_eq!(k.verify(no_kid.as_bytes(), NOW), Err(TokenError::UnknownKey), "two keys, no kid");
    assert!(jwt_keys(&hs_jwks("h1")).verify(no_kid.as_bytes(), NOW).is_ok(), "one key, no kid");
    // HS256 MACed with the RSA public key's bytes, naming the RSA key: the key says RS256.
    let confused = mint_jwt(&JwtSigner::hs256(&modulus).with_kid("r1"), &c).unwrap();
    assert_eq!(k.verify(confused.as_bytes(), NOW), Err(TokenError::BadAlgorithm));
    // alg none, unsigned.
    let header = URL_SAFE_NO_PAD.encode(br#"{"alg":"none","typ":"JWT","kid":"h1"}"#);
    let body = URL_SAFE_NO_PAD.encode(serde_json::to_vec(&c).unwrap());
    assert_eq!(k.verify(format!("{header}.{body}.").as_bytes(), NOW), Err(TokenError::BadAlgorithm));
    // The header claims RS256 for the HMAC key.
    let rs = mint_jwt(&JwtSigner::rs256_pkcs1(RSA_PKCS1).with_kid("h1"), &c).unwrap();
    assert_eq!(k.verify(rs.as_bytes(), NOW), Err(TokenError::BadAlgorithm));
}

#[test]
fn jwt_verifies_es256_eddsa_and_rs256_from_a_jwk_set() {
    let (ec_der, ec) = ec_key("e1");
    let (ed_der, ed) = ed_key("d1");
    let (rsa, _) = rsa_jwk("r1");
    let k = jwt_keys(&format!(r#"{{"keys":[{ec},{ed},{rsa}]}}"#));
    let c = jwt_claims("live", &["me"], &[]);
    for signer in [
        JwtSigner::es256_pkcs8(&ec_der).with_kid("e1"),
        JwtSigner::ed25519_pkcs8(&ed_der).with_kid("d1"),
        JwtSigner::rs256_pkcs1(RSA_PKCS1).with_kid("r1"),
    ] {
        let t = mint_jwt(&signer, &c).unwrap();
        let g = k.verify(t.as_bytes(), NOW).unwrap_or_else(|e| panic!("{:?}: {e}", signer.alg));
        assert_eq!(g.publish, vec![ns(&["live", "me"])]);
        assert!(g.subscribe.is_empty());
        // Signed by another key of the same kind under the same kid.
        let wrong = match signer.alg {
            Algorithm::ES256 => JwtSigner::es256_pkcs8(&ec_key("e1").0).with_kid("e1"),
            Algorithm::EdDSA => JwtSigner::ed25519_pkcs8(&ed_key("d1").0).with_kid("d1"),
            _ => continue,
        };
        let t = mint_jwt(&wrong, &c).unwrap();
        assert_eq!(k.verify(t.as_bytes(), NOW), Err(TokenError::BadSignature));
    }
    // ES256 signed, but naming the Ed25519 key.
    let t = mint_jwt(&JwtSigner::es256_pkcs8(&ec_der).with_kid("d1"), &c).unwrap();
    assert_eq!(k.verify(t.as_bytes(), NOW), Err(TokenError::BadAlgorithm));
}

#[test]
fn jwt_key_files_may_be_raw_secrets_or_single_jwks() {
    let mut k = Keys::default();
    k.add_jwt_keys(b"a raw secret of enough bytes\n").unwrap();
    let t =
        mint_jwt(&JwtSigner::hs256(b"a raw secret of enough bytes"), &jwt_claims("", &[""], &[])).unwrap();
    assert!(k.verify(t.as_bytes(), NOW).is_ok());
    assert!(Keys::default().add_jwt_keys(b"short").is_err());
    assert!(Keys::default().add_jwt_keys(br#"{"kty":"weird"}"#).is_err());
    let (_, ec) = ec_key("e1");
    Keys::default().add_jwt_keys(ec.as_bytes()).unwrap();
}

// ---- CAT ----

fn cat_jwks(extra: &str) -> String {
    format!(r#"{{"keys":[{{"kty":"oct","kid":"m1","k":"{}"}}{extra}]}}"#, URL_SAFE_NO_PAD.encode(SECRET))
}

fn cat_keys(extra: &str) -> Keys {
    let mut k = Keys::default();
    k.add_cat_keys(cat_jwks(extra).as_bytes()).unwrap();
    k
}

fn scope(actions: &[u64], fields: &[&str]) -> MoqtScope {
    MoqtScope { actions: actions.to_vec(), namespace: fields.iter().map(|f| f.as_bytes().to_vec()).collect() }
}

fn mac_signer() -> CatSigner {
    CatSigner::Hmac { kid: b"m1".to_vec(), secret: SECRET.to_vec() }
}

#[test]
fn cat_mac0_and_sign1_tokens_verify() {
    let (ec_der, ec) = ec_key("s1");
    let k = cat_keys(&format!(",{ec}"));
    let claims = CatClaims {
        exp: NOW + 60,
        iat: Some(NOW),
        moqt: vec![scope(&[2, 6], &["live", "me"]), scope(&[4], &["live"])],
        ..CatClaims::default()
    };
    let es = CatSigner::Es256 { kid: b"s1".to_vec(), pkcs8: ec_der };
    for signer in [mac_signer(), es] {
        let t = mint_cat(&signer, &claims).unwrap();
        for form in [t.clone(), base64url(&t).into_bytes()] {
            let g = k.verify(&form, NOW).unwrap_or_else(|e| panic!("{signer:?}: {e}"));
            assert_eq!(g.publish, vec![ns(&["live", "me"])]);
            assert_eq!(g.subscribe, vec![ns(&["live"])]);
            assert_eq!(g.expires, NOW + 60 + LEEWAY);
        }
        let mut bad = t.clone();
        let n = bad.len();
        bad[n - 1] ^= 1;
        assert_eq!(k.verify(&bad, NOW), Err(TokenError::BadSignature));
        assert_eq!(k.verify(&t, NOW + 60 + LEEWAY), Err(TokenError::Expired));
    }
    // A Mac0 token naming the EC key, and a Sign1 token naming the HMAC key.
    let mac_as_ec =
        mint_cat(&CatSigner::Hmac { kid: b"s1".to_vec(), secret: SECRET.to_vec() }, &claims).unwrap();
    assert_eq!(k.verify(&mac_as_ec, NOW), Err(TokenError::BadAlgorithm));
    let ec_as_mac =
        mint_cat(&CatSigner::Es256 { kid: b"m1".to_vec(), pkcs8: ec_key("x").0 }, &claims).unwrap();
    assert_eq!(k.verify(&ec_as_mac, NOW), Err(TokenError::BadAlgorithm));
    let unknown =
        mint_cat(&CatSigner::Hmac { kid: b"m9".to_vec(), secret: SECRET.to_vec() }, &claims).unwrap();
    assert_eq!(k.verify(&unknown, NOW), Err(TokenError::UnknownKey));
    let later = CatClaims { nbf: Some(NOW + 100), ..claims.clone() };
    assert_eq!(k.verify(&mint_cat(&mac_signer(), &later).unwrap(), NOW), Err(TokenError::NotYetValid));
}

#[test]
fn cat_catu_path_scopes_the_grant() {
    let k = cat_keys("");
    let exact = CatClaims {
        exp: NOW + 60,
        catu_path: Some(PathMatch::Exact("/live/room".into())),
        ..Default::default()
    };
    let g = k.verify(&mint_cat(&mac_signer(), &exact).unwrap(), NOW).unwrap();
    assert_eq!((g.publish, g.subscribe), (vec![], vec![ns(&["live", "room"])]), "no moqt claim: subscribe");
    let both = CatClaims {
        exp: NOW + 60,
        catu_path: Some(PathMatch::Prefix("/live/".into())),
        moqt: vec![scope(&[6], &["live", "me"]), scope(&[4], &[]), scope(&[6], &["news"])],
        ..Default::default()
    };
    let g = k.verify(&mint_cat(&mac_signer(), &both).unwrap(), NOW).unwrap();
    assert_eq!(g.publish, vec![ns(&["live", "me"])], "outside catu: dropped");
    assert_eq!(g.subscribe, vec![ns(&["live"])], "narrowed to catu");
}

fn int(n: i64) -> Value {
    Value::Integer(Integer::from(n))
}

/// A COSE_Mac0 CAT assembled by hand (RFC 9052 §6.3's MAC_structure), untagged, with the
/// `moqt` claim under its text label, as base64 text.
fn hand_built_mac0(claims: Vec<(Value, Value)>, kid_in_unprotected: bool) -> Vec<u8> {
    let mut protected_map = vec![(int(1), int(5))];
    let mut unprotected = vec![];
    if kid_in_unprotected {
        unprotected.push((int(4), Value::Bytes(b"m1".to_vec())));
    } else {
        protected_map.push((int(4), Value::Bytes(b"m1".to_vec())));
    }
    let mut protected = Vec::new();
    ciborium::into_writer(&Value::Map(protected_map), &mut protected).unwrap();
    let mut payload = Vec::new();
    ciborium::into_writer(&Value::Map(claims), &mut payload).unwrap();
    let mac_structure = Value::Array(vec![
        Value::Text("MAC0".into()),
        Value::Bytes(protected.clone()),
        Value::Bytes(vec![]),
        Value::Bytes(payload.clone()),
    ]);
    let mut to_mac = Vec::new();
    ciborium::into_writer(&mac_structure, &mut to_mac).unwrap();
    let tag = ring::hmac::sign(&ring::hmac::Key::new(ring::hmac::HMAC_SHA256, SECRET), &to_mac);
    let cose = Value::Array(vec![
        Value::Bytes(protected),
        Value::Map(unprotected),
        Value::Bytes(payload),
        Value::Bytes(tag.as_ref().to_vec()),
    ]);
    let mut out = Vec::new();
    ciborium::into_writer(&cose, &mut out).unwrap();
    base64::engine::general_purpose::STANDARD.encode(out).into_bytes()
}

#[test]
fn cat_hand_assembled_tokens_verify() {
    let k = cat_keys("");
    let moqt = Value::Array(vec![
        Value::Array(vec![
            Value::Array(vec![int(2)]),
            Value::Array(vec![Value::Bytes(b"example".to_vec()), Value::Bytes(b"com".to_vec())]),
        ]),
        // Per-track and exact-length scopes are not representable: they grant nothing.
        Value::Array(vec![Value::Array(vec![int(4)]), Value::Array(vec![]), Value::Bytes(b"t".to_vec())]),
        Value::Array(vec![
            Value::Array(vec![int(4)]),
            Value::Array(vec![Value::Bytes(b"x".to_vec()), Value::Null]),
        ]),
    ]);
    let claims =
        vec![(int(4), int(NOW as i64 + 10)), (int(6), int(NOW as i64)), (Value::Text("moqt".into()), moqt)];
    for kid_in_unprotected in [false, true] {
        let t = hand_built_mac0(claims.clone(), kid_in_unprotected);
        let g = k.verify(&t, NOW).unwrap();
        assert_eq!(g.publish, vec![ns(&["example", "com"])]);
        assert!(g.subscribe.is_empty());
    }
    // Raw CBOR with only a COSE_Mac0 tag (17) verifies; with a COSE_Sign1 tag (18) it does not.
    let raw = base64_any(std::str::from_utf8(&hand_built_mac0(claims.clone(), false)).unwrap()).unwrap();
    assert!(k.verify(&[&[0xd1][..], &raw].concat(), NOW).is_ok());
    assert_eq!(k.verify(&[&[0xd2][..], &raw].concat(), NOW), Err(TokenError::BadAlgorithm));
    assert_eq!(
        k.verify(&[&[0xd1, 0xd1][..], &raw].concat(), NOW),
        Err(TokenError::Malformed),
        "two COSE tags"
    );
    let replay = vec![(int(4), int(NOW as i64 + 10)), (int(308), int(1))];
    assert_eq!(k.verify(&hand_built_mac0(replay, false), NOW), Err(TokenError::Unsupported));
    let no_exp = vec![(int(6), int(NOW as i64))];
    assert_eq!(k.verify(&hand_built_mac0(no_exp, false), NOW), Err(TokenError::BadClaim));
    let query = Value::Map(vec![(int(4), Value::Map(vec![(int(0), Value::Text("a=b".into()))]))]);
    let catu_query = vec![(int(4), int(NOW as i64 + 10)), (int(312), query)];
    assert_eq!(k.verify(&hand_built_mac0(catu_query, false), NOW), Err(TokenError::Unsupported));
}

// ---- loading, formats, SessionAuth mapping ----

#[test]
fn keys_load_from_files_and_formats_turn_off() {
    let dir = std::env::temp_dir().join(format!("moq-edge-auth-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (jwt_file, cat_file) = (dir.join("jwt.json"), dir.join("cat.json"));
    std::fs::write(&jwt_file, hs_jwks("h1")).unwrap();
    std::fs::write(&cat_file, cat_jwks("")).unwrap();
    let mut sources = AuthSources {
        tokens: vec![format!("k1={}", URL_SAFE_NO_PAD.encode(SECRET))],
        jwt_files: vec![jwt_file.clone()],
        cat_files: vec![cat_file],
        formats: Formats::default(),
    };
    let k = Keys::load(&sources).unwrap();
    let v1 = token(&["a"], true, true, NOW + 10);
    let jwt = mint_jwt(&JwtSigner::hs256(SECRET).with_kid("h1"), &jwt_claims("a", &[""], &[""])).unwrap();
    let cat = mint_cat(&mac_signer(), &CatClaims { exp: NOW + 10, ..Default::default() }).unwrap();
    for t in [&v1[..], jwt.as_bytes(), &cat] {
        assert!(k.verify(t, NOW).is_ok());
    }
    sources.formats = Formats::parse("jwt,cat").unwrap();
    let k = Keys::load(&sources).unwrap();
    assert_eq!(k.verify(&v1, NOW), Err(TokenError::Disabled));
    sources.formats = Formats::parse("tokens").unwrap();
    let k = Keys::load(&sources).unwrap();
    assert_eq!(k.verify(jwt.as_bytes(), NOW), Err(TokenError::Disabled));
    assert_eq!(k.verify(&cat, NOW), Err(TokenError::Malformed));
    assert!(Formats::parse("jwt,paseto").is_err());
    sources.jwt_files.push(dir.join("missing.json"));
    assert!(Keys::load(&sources).is_err());
    sources.jwt_files = vec![jwt_file.clone(), jwt_file];
    assert!(Keys::load(&sources).is_err(), "a kid twice");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Keys rotate without a restart: a key ring reloads its files, and a failed reload keeps the
/// keys in force.
#[test]
fn a_key_ring_rotates_keys_by_reloading_its_files() {
    let dir = std::env::temp_dir().join(format!("moq-edge-auth-ring-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("jwt.json");
    std::fs::write(&file, hs_jwks("old")).unwrap();
    let ring = KeyRing::load(AuthSources { jwt_files: vec![file.clone()], ..Default::default() }).unwrap();
    assert_eq!(ring.files(), vec![file.clone()]);
    let mint = |kid: &str| {
        mint_jwt(&JwtSigner::hs256(SECRET).with_kid(kid), &jwt_claims("a", &[""], &[""])).unwrap()
    };
    assert!(ring.keys().verify(mint("old").as_bytes(), NOW).is_ok());
    assert_eq!(ring.keys().verify(mint("new").as_bytes(), NOW), Err(TokenError::UnknownKey));
    std::fs::write(&file, hs_jwks("new")).unwrap();
    ring.reload().unwrap();
    assert!(ring.keys().verify(mint("new").as_bytes(), NOW).is_ok(), "the new key is in force");
    assert_eq!(
        ring.keys().verify(mint("old").as_bytes(), NOW),
        Err(TokenError::UnknownKey),
        "the old one is gone"
    );
    std::fs::write(&file, b"{not json").unwrap();
    assert!(ring.reload().is_err());
    assert!(ring.keys().verify(mint("new").as_bytes(), NOW).is_ok(), "a bad file keeps the keys in force");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A namespace subscription broader than the token is narrowed to what the token grants
/// under it; one the token reaches nowhere under is refused.
#[test]
fn discovery_is_narrowed_to_the_tokens_grants() {
    let k = jwt_keys(&hs_jwks("h1"));
    let signer = JwtSigner::hs256(SECRET).with_kid("h1");
    let viewer = mint_jwt(&signer, &jwt_claims("live/a", &[], &[""])).unwrap();
    let token = |t: &String| vec![AuthToken::UseValue { token_type: 0, value: Bytes::from(t.clone()) }];
    let mut a = SessionAuth::default();
    let (_, scope) = a.authorize_discovery(&k, &token(&viewer), &ns(&["live", "a", "x"]), 0, NOW).unwrap();
    assert_eq!(scope, Scope::All, "a prefix the token covers");
    let (until, scope) = a.authorize_discovery(&k, &token(&viewer), &ns(&[]), 0, NOW).unwrap();
    assert_eq!(scope, Scope::Within(vec![ns(&["live", "a"])]), "the root, narrowed");
    assert!(until > NOW);
    assert!(scope.covers(&ns(&["live", "a", "cam"])) && !scope.covers(&ns(&["live", "b"])));
    assert_eq!(
        a.authorize_discovery(&k, &token(&viewer), &ns(&["news"]), 0, NOW),
        Err(Denied::Request(RequestErrorCode::Unauthorized, "no token grants this"))
    );
    let publisher = mint_jwt(&signer, &jwt_claims("live/a", &[""], &[])).unwrap();
    assert!(
        a.authorize_discovery(&k, &token(&publisher), &ns(&[]), 0, NOW).is_err(),
        "publish is not subscribe"
    );
}

#[test]
fn session_auth_maps_token_errors_onto_request_codes() {
    let k = jwt_keys(&hs_jwks("h1"));
    let signer = JwtSigner::hs256(SECRET).with_kid("h1");
    let target = ns(&["a", "b"]);
    let mut a = SessionAuth::default();
    let mut check = |c: &JwtClaims, right| {
        let t = value(Bytes::from(mint_jwt(&signer, c).unwrap()));
        a.authorize(&k, &[t], &target, right, 0, NOW)
    };
    assert_eq!(check(&jwt_claims("a", &["b"], &[]), Right::Publish), Ok(NOW + 600 + LEEWAY));
    assert_eq!(
        check(&jwt_claims("a", &["b"], &[]), Right::Subscribe),
        Err(Denied::Request(RequestErrorCode::Unauthorized, "no token grants this"))
    );
    let expired = JwtClaims { exp: Some(NOW - LEEWAY), ..jwt_claims("a", &[""], &[""]) };
    assert_eq!(
        check(&expired, Right::Publish),
        Err(Denied::Request(RequestErrorCode::ExpiredAuthToken, "the token has expired"))
    );
    let early = JwtClaims { nbf: Some(NOW + 600), ..jwt_claims("a", &[""], &[""]) };
    let malformed = Err(Denied::Request(RequestErrorCode::MalformedAuthToken, "the token is not valid"));
    assert_eq!(check(&early, Right::Publish), malformed);
    let no_exp = JwtClaims { exp: None, ..jwt_claims("a", &[""], &[""]) };
    assert_eq!(check(&no_exp, Right::Publish), malformed);
    assert!(matches!(
        SessionAuth::from_setup(&k, &[value(Bytes::from_static(b"\xd8\x3d\x00"))], 0, NOW),
        Err(Denied::Session(SessionCode::MalformedAuthToken, _))
    ));
}

#[test]
fn keys_debug_names_ids_not_secrets() {
    let text = format!("{:?}", all_keys());
    assert!(
        text.contains("k1") && text.contains("h1") && text.contains("m1") && text.contains("s1"),
        "{text}"
    );
    assert!(!text.contains(&URL_SAFE_NO_PAD.encode(SECRET)[..8]), "{text}");
}

fn all_keys() -> Keys {
    let mut k = keys();
    k.add_jwt_keys(hs_jwks("h1").as_bytes()).unwrap();
    k.add_cat_keys(cat_jwks(&format!(",{}", ec_key("s1").1)).as_bytes()).unwrap();
    k
}

proptest! {
    #[test]
    fn verify_never_panics_on_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        let k = all_keys();
        let _ = k.verify(&bytes, NOW);
        let mut tagged = vec![0xd8, 0x3d, 0xd1];
        tagged.extend_from_slice(&bytes);
        let _ = k.verify(&tagged, NOW);
        let mut array = vec![0x84];
        array.extend_from_slice(&bytes);
        let _ = k.verify(&array, NOW);
    }

    #[test]
    fn verify_never_panics_on_token_shaped_text(
        a in "[A-Za-z0-9_=-]{0,40}",
        b in "[A-Za-z0-9_.=-]{0,60}",
        c in "[A-Za-z0-9_-]{0,40}",
    ) {
        let k = all_keys();
        let header = URL_SAFE_NO_PAD.encode(format!(r#"{{"alg":"{a}","kid":"h1"}}"#));
        for t in [
            format!("v1.{a}.{b}.{c}"),
            format!("v1.k1.{b}.{c}"),
            format!("{header}.{b}.{c}"),
            format!("{a}.{b}.{c}"),
            format!("{a}{b}{c}"),
        ] {
            let _ = k.verify(t.as_bytes(), NOW);
        }
    }
}
