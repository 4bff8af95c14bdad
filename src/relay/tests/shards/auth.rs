//! Authorization: tokens checked per request, namespace and right; token aliases and bad SETUP
//! tokens; subscriptions that expire with their token.

use std::time::Duration;

use bytes::Bytes;
use relay::RelayConfig;
use session::Event;
use wire::code;
use wire::model::{
    AuthToken, FetchKind, FullTrackName, Location, LocationFilter, Message, Parameters, PublishNamespace,
    RequestId, SetupOptions, Subscribe,
};
use wire::Version;

use crate::common::*;
use crate::harness::{messages, streams, ClientId, Relay};

const AUTH_SECRET: &[u8] = b"a secret of more than sixteen bytes";

fn auth_config() -> RelayConfig {
    use base64::Engine;
    let key = format!("k1={}", base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(AUTH_SECRET));
    let keys = auth::Keys::parse(&[key]).unwrap();
    RelayConfig { auth: Some(auth::KeyRing::fixed(keys)), ..RelayConfig::default() }
}

fn token(ns: &[&str], publish: bool, subscribe: bool, ttl: i64) -> Bytes {
    let exp = (auth::unix_now() as i64 + ttl) as u64;
    let claims = auth::Claims { ns: ns.iter().map(|s| s.to_string()).collect(), publish, subscribe, exp };
    Bytes::from(auth::mint("k1", AUTH_SECRET, &claims).unwrap())
}

fn use_value(value: Bytes) -> AuthToken {
    AuthToken::UseValue { token_type: 0, value }
}

impl Relay {
    fn connect_with_token(&mut self, core: usize, v: Version, t: Bytes) -> ClientId {
        let setup = SetupOptions { auth_tokens: vec![use_value(t)], ..Default::default() };
        let c = self.connect_with(core, v, setup);
        assert!(matches!(self.take_events(c).as_slice(), [Event::Ready { .. }]));
        c
    }

    fn subscribe_with(&mut self, c: ClientId, t: &FullTrackName, tokens: Vec<AuthToken>) -> RequestId {
        let rid = self.next_request_id(c);
        let params = Parameters { auth_tokens: tokens, ..Default::default() };
        self.send(c, Message::Subscribe(Subscribe { request_id: rid, track: t.clone(), params }));
        self.run_until_quiet();
        rid
    }
}

/// With tokens required, every request needs a token that grants its right on its namespace,
/// from SETUP or the request: a publisher without one cannot announce; a subscriber's token
/// for ["live","a"] lets it subscribe there and nowhere else, even to a track the relay
/// already subscribes upstream for another subscriber (authorization is per subscriber);
/// FETCH, TRACK_STATUS and SUBSCRIBE_NAMESPACE are checked the same way; an expired token is
/// EXPIRED_AUTH_TOKEN, a forged one MALFORMED_AUTH_TOKEN.
#[test]
fn tokens_authorize_each_request_by_namespace_and_right() {
    const UNAUTHORIZED: u64 = 0x1;
    const MALFORMED: u64 = 0x4;
    const EXPIRED: u64 = 0x5;
    for (pv, sv) in COMBOS {
        let ctx = format!("{pv:?}->{sv:?}");
        let mut r = Relay::with_config(2, auth_config());
        let nobody = r.connect(0, pv);
        let rid = r.next_request_id(nobody);
        r.send(
            nobody,
            Message::PublishNamespace(PublishNamespace {
                request_id: rid,
                namespace: ns(&["live"]),
                ..Default::default()
            }),
        );
        r.run_until_quiet();
        r.refused(nobody, rid, UNAUTHORIZED, &ctx);

        let p = r.connect_with_token(0, pv, token(&["live"], true, false, 600));
        r.announce(p, &["live"]);
        let t = track(&["live", "a"], "x");
        let s = r.connect_with_token(1, sv, token(&["live", "a"], false, true, 600));
        let rid = r.subscribe_with(s, &t, vec![]);
        let up = r.upstream_subscribe(p, &t);
        r.accept(p, &up, Some(Location::new(0, 0)));
        subscribe_ok(&messages(&r.take_events(s)), rid);

        let other = track(&["live", "b"], "x");
        let rid = r.subscribe_with(s, &other, vec![]);
        r.refused(s, rid, UNAUTHORIZED, &ctx);
        let rid = r.subscribe_with(s, &other, vec![use_value(token(&["live"], false, true, 600))]);
        assert!(
            matches!(r.take_events(p).as_slice(), [Event::Message(Message::Subscribe(_))]),
            "{ctx}: a request token"
        );
        r.take_events(s);
        let _ = rid;

        // Aggregated upstream already, but this subscriber has no right to it.
        let stranger = r.connect(1, sv);
        let rid = r.subscribe_with(stranger, &t, vec![]);
        r.refused(stranger, rid, UNAUTHORIZED, &ctx);
        let rid = r.subscribe_with(stranger, &t, vec![use_value(token(&["live"], false, true, -5))]);
        r.refused(stranger, rid, EXPIRED, &ctx);
        let mut forged = token(&["live"], true, true, 600).to_vec();
        let n = forged.len();
        forged[n - 2] ^= 1;
        let rid = r.subscribe_with(stranger, &t, vec![use_value(Bytes::from(forged))]);
        r.refused(stranger, rid, MALFORMED, &ctx);
        let publish_only = token(&["live"], true, false, 600);
        let rid = r.subscribe_with(stranger, &t, vec![use_value(publish_only)]);
        r.refused(stranger, rid, UNAUTHORIZED, &ctx);

        let range = LocationFilter::AbsoluteRange { start: Location::new(0, 0), end: Location::new(0, 0) };
        let (rid, ev) = r.standalone(stranger, &t, range);
        let e = request_error(&messages(&ev));
        assert_eq!((e.request_id, e.error_code), (rid, UNAUTHORIZED), "{ctx}: FETCH");
        let rid = r.track_status(stranger, &t);
        r.refused(stranger, rid, UNAUTHORIZED, &ctx);
        let (rid, ev) = r.subscribe_namespace(stranger, &["live"]);
        let e = request_error(&messages(&ev));
        assert_eq!((e.request_id, e.error_code), (rid, UNAUTHORIZED), "{ctx}: SUBSCRIBE_NAMESPACE");
        let rid = r.next_request_id(s);
        r.send(s, fetch_msg(rid, FetchKind::Standalone { track: t.clone() }, Some(range)));
        r.run_until_quiet();
        r.refuse_upstream_fetches(p);
        fetch_ok(&messages(&r.take_events(s)), rid);
        r.assert_no_closes();
    }
}

/// Token aliases: a token registered with one request authorizes later ones that name its
/// alias, until it is deleted; naming an unknown alias closes the session with
/// UNKNOWN_AUTH_TOKEN_ALIAS, registering one twice with DUPLICATE_AUTH_TOKEN_ALIAS; a bad
/// SETUP token closes the session with MALFORMED_AUTH_TOKEN.
#[test]
fn token_aliases_and_bad_setup_tokens() {
    for v in DRAFTS {
        let mut r = Relay::with_config(2, auth_config());
        let p = r.connect_with_token(0, v, token(&["live"], true, false, 600));
        r.announce(p, &["live"]);
        let t = track(&["live"], "x");
        let s = r.connect(1, v);
        let tok = token(&["live"], false, true, 600);
        r.subscribe_with(s, &t, vec![AuthToken::Register { alias: 5, token_type: 0, value: tok.clone() }]);
        let up = r.upstream_subscribe(p, &t);
        r.accept(p, &up, None);
        r.take_events(s);
        let again = track(&["live"], "y");
        r.subscribe_with(s, &again, vec![AuthToken::UseAlias { alias: 5 }]);
        assert!(
            matches!(r.take_events(p).as_slice(), [Event::Message(Message::Subscribe(_))]),
            "{v:?}: alias used"
        );
        r.subscribe_with(
            s,
            &again,
            vec![AuthToken::Register { alias: 5, token_type: 0, value: tok.clone() }],
        );
        assert_eq!(r.clients[s].closed_by_relay, Some(0x14), "{v:?}: DUPLICATE_AUTH_TOKEN_ALIAS");

        let s2 = r.connect(1, v);
        r.subscribe_with(s2, &t, vec![AuthToken::UseAlias { alias: 9 }]);
        assert_eq!(r.clients[s2].closed_by_relay, Some(0x17), "{v:?}: UNKNOWN_AUTH_TOKEN_ALIAS");

        let setup = SetupOptions {
            auth_tokens: vec![use_value(Bytes::from_static(b"v1.k1.bad.bad"))],
            ..Default::default()
        };
        let bad = r.connect_with(1, v, setup);
        assert_eq!(r.clients[bad].closed_by_relay, Some(0x16), "{v:?}: MALFORMED_AUTH_TOKEN in SETUP");
        assert_eq!(r.clients[p].closed_by_relay, None);
    }
}

/// With tokens, a subscription is authorized until its token expires: SUBSCRIBE_OK says when
/// in EXPIRES, and the relay ends it then with PUBLISH_DONE EXPIRED (its open streams reset)
/// unless a REQUEST_UPDATE brought a newer token, whose REQUEST_OK carries the new EXPIRES. A
/// REQUEST_UPDATE with a forged token fails (REQUEST_ERROR, then PUBLISH_DONE UPDATE_FAILED).
#[test]
fn subscriptions_expire_with_their_token_unless_renewed() {
    const MALFORMED: u64 = 0x4;
    for (pv, sv) in COMBOS {
        let ctx = format!("{pv:?}->{sv:?}");
        let mut r = Relay::with_config(2, auth_config());
        let p = r.connect_with_token(0, pv, token(&["live"], true, false, 600));
        r.announce(p, &["live"]);
        let t = r.track_owned_by(&["live"], 0);
        let subscriber = |r: &mut Relay| {
            let s = r.connect_with_token(1, sv, token(&["live"], false, true, 10));
            (s, r.subscribe_with(s, &t, vec![]))
        };
        let (lapsing, renewing, wrong) = (subscriber(&mut r), subscriber(&mut r), subscriber(&mut r));
        let up = r.upstream_subscribe(p, &t);
        r.accept(p, &up, None);
        for (s, rid) in [lapsing, renewing, wrong] {
            let ok = subscribe_ok(&messages(&r.take_events(s)), rid);
            let expires = ok.params.expires.unwrap_or_default();
            // The token's expiry and the shard's wall clock are whole Unix seconds read at
            // different moments: a second may tick between them.
            assert!((8_000..=11_000).contains(&expires), "{ctx}: EXPIRES {expires}");
        }
        let st = r.open(p, &header(pv, PUB_ALIAS, 1, 0));
        r.put(p, st, &object(1, 0));
        r.run_until_quiet();

        let fresh = token(&["live"], false, true, 600);
        let params = Parameters { auth_tokens: vec![use_value(fresh)], ..Default::default() };
        let answer = r.update(renewing.0, renewing.1, params);
        let msgs = messages(&r.take_events(renewing.0));
        let [Message::RequestOk(ok)] = msgs.as_slice() else { panic!("{ctx}: {msgs:?}") };
        assert_eq!(ok.request_id, answer);
        assert!(ok.params.expires.is_some_and(|e| e > 500_000), "{ctx}: {:?}", ok.params.expires);

        let mut forged = token(&["live"], false, true, 600).to_vec();
        let n = forged.len();
        forged[n - 2] ^= 1;
        let params = Parameters { auth_tokens: vec![use_value(Bytes::from(forged))], ..Default::default() };
        let answer = r.update(wrong.0, wrong.1, params);
        let msgs = messages(&r.take_events(wrong.0));
        let Message::RequestError(e) = &msgs[0] else { panic!("{ctx}: {msgs:?}") };
        assert_eq!((e.request_id, e.error_code), (answer, MALFORMED), "{ctx}");
        assert_eq!(publish_done(&msgs[1..]).status_code, code::DONE_UPDATE_FAILED, "{ctx}");

        r.advance(Duration::from_secs(5));
        r.put(p, st, &object(1, 1));
        r.run_until_quiet();
        r.advance(Duration::from_secs(6));
        r.put(p, st, &object(1, 2));
        r.run_until_quiet();

        let ev = r.take_events(lapsing.0);
        let d = publish_done(&messages(&ev));
        let expired = if sv == D16 { code::DONE_EXPIRED_D16 } else { code::DONE_EXPIRED_D22 };
        assert_eq!((d.request_id, d.status_code, d.stream_count), (lapsing.1, expired, 1), "{ctx}");
        let seen = streams(&ev);
        let reset = if sv == D16 { code::RESET_CANCELLED } else { code::RESET_EXPIRED_AUTH_TOKEN_D22 };
        let ids: Vec<u64> = seen[0].objects.iter().map(|o| o.0.object_id).collect();
        assert_eq!((ids, seen[0].end), (vec![0, 1], Some(Some(reset))), "{ctx}: objects until it expired");

        let ev = r.take_events(renewing.0);
        assert!(messages(&ev).is_empty(), "{ctx}: {ev:?}");
        let ids: Vec<u64> = streams(&ev)[0].objects.iter().map(|o| o.0.object_id).collect();
        assert_eq!(ids, vec![1, 2], "{ctx}: the renewed subscription goes on (object 0 taken earlier)");
        r.assert_no_closes();
    }
}

/// A subscription the relay brings with its own PUBLISH (SUBSCRIBE_TRACKS, draft-22 §9.16)
/// is authorized until the namespace subscription's token expires, like any other: then it
/// ends with PUBLISH_DONE EXPIRED. (It used to last for ever.)
#[test]
fn pushed_subscriptions_expire_with_their_token() {
    let mut r = Relay::with_config(2, auth_config());
    let p = r.connect_with_token(0, D22, token(&["live"], true, false, 600));
    let t = r.track_owned_by(&["live"], 0);
    let prid = r.next_request_id(p);
    r.send(p, publish_msg(D22, prid, &t, Some(Location::new(0, 0))));
    r.run_until_quiet();
    r.take_events(p);

    let s = r.connect_with_token(1, D22, token(&["live"], false, true, 10));
    let rid = r.next_request_id(s);
    let m = wire::model::SubscribeTracks {
        request_id: rid,
        prefix: ns(&["live"]),
        params: Parameters::default(),
    };
    r.send(s, Message::SubscribeTracks(m));
    r.run_until_quiet();
    let msgs = messages(&r.take_events(s));
    let [Message::RequestOk(_), Message::Publish(offer)] = msgs.as_slice() else { panic!("{msgs:?}") };
    let accept = wire::model::PublishOk { request_id: offer.request_id, params: Parameters::default() };
    r.send(s, Message::PublishOk(accept));
    r.run_until_quiet();
    r.advance(Duration::from_secs(5));
    assert!(!messages(&r.take_events(s)).iter().any(|m| matches!(m, Message::PublishDone(_))));
    r.advance(Duration::from_secs(6));
    let msgs = messages(&r.take_events(s));
    let done = msgs.iter().find_map(|m| match m {
        Message::PublishDone(d) => Some(d.clone()),
        _ => None,
    });
    let done = done.unwrap_or_else(|| panic!("no PUBLISH_DONE: {msgs:?}"));
    assert_eq!((done.request_id, done.status_code), (offer.request_id, code::DONE_EXPIRED_D22));
}

/// The relay's own upstream subscription through a link is renewed before its EXPIRES (issue:
/// viewers used to be ended with PUBLISH_DONE EXPIRED when the link's token ran out): with
/// keys shared with its parent, the relay mints a fresh token for the track's namespace and
/// sends it in a REQUEST_UPDATE at three quarters of the time left; the parent can verify it.
#[test]
fn upstream_subscriptions_through_a_link_are_renewed_before_they_expire() {
    let keys = auth::Keys::parse(&[format!(
        "k1={}",
        base64::Engine::encode(&base64::engine::general_purpose::URL_SAFE_NO_PAD, AUTH_SECRET)
    )])
    .unwrap();
    for v in [D16, D18, D22] {
        let mut r = Relay::with_config(2, auth_config());
        let parent = r.link(v);
        let t = track(&["live"], "v");
        let s = r.connect_with_token(1, v, token(&["live"], false, true, 3600));
        let rid = r.subscribe_with(s, &t, vec![]);
        let up = r.upstream_subscribe(parent, &t);
        let ok = wire::model::SubscribeOk {
            request_id: up.request_id,
            track_alias: PUB_ALIAS,
            params: Parameters { expires: Some(20_000), ..Default::default() },
            track_properties: Default::default(),
        };
        r.send(parent, Message::SubscribeOk(ok));
        r.run_until_quiet();
        subscribe_ok(&messages(&r.take_events(s)), rid);

        r.advance(Duration::from_secs(14));
        assert!(messages(&r.take_events(parent)).is_empty(), "{v:?}: not yet");
        r.advance(Duration::from_secs(2));
        let msgs = messages(&r.take_events(parent));
        let [Message::RequestUpdate(u)] = msgs.as_slice() else { panic!("{v:?}: {msgs:?}") };
        assert_eq!(u.existing_request_id, up.request_id, "{v:?}");
        let [AuthToken::UseValue { value, .. }] = u.params.auth_tokens.as_slice() else {
            panic!("{v:?}: {:?}", u.params.auth_tokens)
        };
        let grant = keys.verify(value, auth::unix_now()).expect("a token the parent accepts");
        assert!(grant.publish.is_empty(), "{v:?}");
        assert_eq!(grant.subscribe, vec![ns(&["live"])], "{v:?}");
        assert!(grant.expires > auth::unix_now() + 3000, "{v:?}: good for an hour");
        r.assert_no_closes();
    }
}

/// Token expiry follows the shard's clock, not a clock the relay reads itself (it reads
/// none): a SETUP token good for 10 s authorizes a SUBSCRIBE at once, and 11 s later by the
/// harness's simulated clock the next SUBSCRIBE gets EXPIRED_AUTH_TOKEN. (The relay used to
/// read the wall clock here, so the second SUBSCRIBE passed.)
#[test]
fn token_expiry_follows_the_shards_clock() {
    const EXPIRED: u64 = 0x5;
    for (pv, sv) in COMBOS {
        let ctx = format!("{pv:?}->{sv:?}");
        let mut r = Relay::with_config(2, auth_config());
        let p = r.connect_with_token(0, pv, token(&["live"], true, false, 600));
        r.announce(p, &["live"]);
        let t = r.track_owned_by(&["live"], 0);
        let s = r.connect_with_token(1, sv, token(&["live"], false, true, 10));
        let first = r.subscribe_with(s, &t, vec![]);
        let up = r.upstream_subscribe(p, &t);
        r.accept(p, &up, None);
        subscribe_ok(&messages(&r.take_events(s)), first);

        r.advance(Duration::from_secs(11));
        let other = r.track_owned_by(&["live"], 1);
        let second = r.subscribe_with(s, &other, vec![]);
        let e = request_error(
            &messages(&r.take_events(s))
                .into_iter()
                .filter(|m| matches!(m, Message::RequestError(_)))
                .collect::<Vec<_>>(),
        );
        assert_eq!((e.request_id, e.error_code), (second, EXPIRED), "{ctx}");
    }
}

/// A JWT or a Common Access Token ends a subscription at its `exp` (plus the 30 s leeway
/// those formats get for their issuers' clocks) like this relay's own tokens: PUBLISH_DONE
/// EXPIRED once the expiry passes, objects delivered until then.
#[test]
fn jwt_and_cat_subscriptions_expire_with_their_token() {
    use auth;
    let secret = {
        use base64::Engine;
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(AUTH_SECRET)
    };
    let jwks = format!(r#"{{"keys":[{{"kty":"oct","kid":"j1","k":"{secret}"}}]}}"#);
    // Good for 10 s more: `exp` is 20 s ago, within the leeway.
    let exp = auth::unix_now() + 10 - auth::LEEWAY;
    let jwt = {
        let claims = auth::JwtClaims {
            root: "live".into(),
            get: vec![String::new()],
            exp: Some(exp),
            ..Default::default()
        };
        Bytes::from(auth::mint_jwt(&auth::JwtSigner::hs256(AUTH_SECRET).with_kid("j1"), &claims).unwrap())
    };
    let cat = {
        let scope = auth::MoqtScope { actions: vec![4], namespace: vec![b"live".to_vec()] };
        let claims = auth::CatClaims { exp, moqt: vec![scope], ..Default::default() };
        let signer = auth::CatSigner::Hmac { kid: b"c1".to_vec(), secret: AUTH_SECRET.to_vec() };
        Bytes::from(auth::mint_cat(&signer, &claims).unwrap())
    };
    for (format, viewer_token) in [("jwt", jwt), ("cat", cat)] {
        for (pv, sv) in [(D16, D16), (D22, D22)] {
            let ctx = format!("{format} {pv:?}->{sv:?}");
            let mut config = auth_config();
            let mut keys = (*config.auth.as_ref().unwrap().keys()).clone();
            keys.add_jwt_keys(jwks.as_bytes()).unwrap();
            keys.add_cat_keys(jwks.replace("j1", "c1").as_bytes()).unwrap();
            config.auth = Some(auth::KeyRing::fixed(keys));
            let mut r = Relay::with_config(2, config);
            let p = r.connect_with_token(0, pv, token(&["live"], true, false, 600));
            r.announce(p, &["live"]);
            let t = r.track_owned_by(&["live"], 0);
            let s = r.connect_with_token(1, sv, viewer_token.clone());
            let rid = r.subscribe_with(s, &t, vec![]);
            let up = r.upstream_subscribe(p, &t);
            r.accept(p, &up, None);
            let ok = subscribe_ok(&messages(&r.take_events(s)), rid);
            let expires = ok.params.expires.unwrap_or_default();
            assert!((8_000..=11_000).contains(&expires), "{ctx}: EXPIRES {expires}");
            let st = r.open(p, &header(pv, PUB_ALIAS, 1, 0));
            r.put(p, st, &object(1, 0));
            r.run_until_quiet();
            r.advance(Duration::from_secs(12));
            r.put(p, st, &object(1, 1));
            r.run_until_quiet();
            let ev = r.take_events(s);
            let d = publish_done(&messages(&ev));
            let expired = if sv == D16 { code::DONE_EXPIRED_D16 } else { code::DONE_EXPIRED_D22 };
            assert_eq!((d.request_id, d.status_code), (rid, expired), "{ctx}");
            let ids: Vec<u64> = streams(&ev)[0].objects.iter().map(|o| o.0.object_id).collect();
            assert_eq!(ids, vec![0], "{ctx}: objects until it expired");
            r.assert_no_closes();
        }
    }
}

/// A namespace subscription broader than its token (a player that discovers from the root
/// with a token for one broadcast) is accepted, narrowed to what the token grants: it hears
/// of the namespaces under the token's prefixes and of no other, now and as they come.
#[test]
fn discovery_is_narrowed_to_what_the_token_grants() {
    for (pv, sv) in [(D16, D16), (D22, D22), (D16, D22)] {
        let ctx = format!("{pv:?}->{sv:?}");
        let mut r = Relay::with_config(2, auth_config());
        let p = r.connect_with_token(0, pv, token(&[], true, false, 600));
        r.announce(p, &["live", "a"]);
        r.announce(p, &["live", "b"]);
        let viewer = r.connect_with_token(1, sv, token(&["live", "a"], false, true, 600));
        let (rid, events) = r.subscribe_namespace(viewer, &[]);
        assert!(matches!(messages(&events).as_slice(), [Message::RequestOk(_)]), "{ctx}: {events:?}");
        let listed: Vec<_> = events
            .into_iter()
            .filter_map(|e| match e {
                Event::RequestMessage { message: Message::Namespace(n), .. } => Some(n),
                _ => None,
            })
            .collect();
        assert_eq!(listed, vec![ns(&["live", "a"])], "{ctx}: only what the token grants");
        r.announce(p, &["live", "a", "hd"]);
        r.announce(p, &["news"]);
        assert_eq!(r.namespace_events(viewer, rid), vec![(true, ns(&["live", "a", "hd"]))], "{ctx}");
        // A token that reaches nowhere under the prefix is refused as before.
        let other = r.connect_with_token(1, sv, token(&["sports"], false, true, 600));
        let (rid, ev) = r.subscribe_namespace(other, &["live"]);
        let e = request_error(&messages(&ev));
        assert_eq!((e.request_id, e.error_code), (rid, 0x1), "{ctx}: UNAUTHORIZED");
        r.assert_no_closes();
    }
}

/// A namespace subscription's prefix update (draft-22 §9.5.2) is authorized like a new one:
/// moving it under a prefix the tokens reach nowhere in is UNAUTHORIZED, and moving it to a
/// broader prefix narrows it to what they grant, so an update never lists more than the
/// tokens cover.
#[test]
fn a_namespace_prefix_update_is_authorized_like_a_new_subscription() {
    let mut r = Relay::with_config(2, auth_config());
    let p = r.connect_with_token(0, D22, token(&[], true, false, 600));
    r.announce(p, &["live", "a"]);
    r.announce(p, &["news"]);
    let viewer = r.connect_with_token(1, D22, token(&["live", "a"], false, true, 600));
    let (rid, events) = r.subscribe_namespace(viewer, &["live", "a"]);
    assert!(matches!(messages(&events).as_slice(), [Message::RequestOk(_)]), "{events:?}");
    let to = |fields: &[&str]| Parameters { track_namespace_prefix: Some(ns(fields)), ..Default::default() };
    r.update(viewer, rid, to(&["news"]));
    let e = request_error(&messages(&r.take_events(viewer)));
    assert_eq!(e.error_code, 0x1, "UNAUTHORIZED");
    let (rid, _) = r.subscribe_namespace(viewer, &["live", "a"]);
    r.update(viewer, rid, to(&[]));
    let ev = r.take_events(viewer);
    assert!(matches!(messages(&ev).as_slice(), [Message::RequestOk(_)]), "{ev:?}");
    r.announce(p, &["sports"]);
    r.announce(p, &["live", "a", "hd"]);
    assert_eq!(
        r.namespace_events(viewer, rid),
        vec![(true, ns(&["live", "a", "hd"]))],
        "only what it grants"
    );
    r.assert_no_closes();
}
