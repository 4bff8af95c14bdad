//! Admission by the platform (`RelayConfig::admission`, `relay::admission`): a session that
//! is set up waits, its requests unread, until the host hands in the platform's verdict; the
//! grant then authorizes its requests as a token's would (and the requests' own tokens are not
//! read); a refusal, at admission or at a revalidation, closes it UNAUTHORIZED.

use auth::{Grant, KeyRing, Keys};
use bytes::Bytes;
use relay::admission::Verdict;
use relay::Input;
use relay::RelayConfig;
use session::Event;
use wire::model::{AuthToken, Message, PublishNamespace, SetupOptions};
use wire::{code, Version};

use crate::common::*;
use crate::harness::{messages, ClientId, Relay};

const UNAUTHORIZED_SESSION: u64 = 0x2;

fn config() -> RelayConfig {
    RelayConfig { auth: Some(KeyRing::fixed(Keys::default())), admission: true, ..RelayConfig::default() }
}

fn grant(publish: &[&[&str]], subscribe: &[&[&str]]) -> Verdict {
    let expires = auth::unix_now() + 3600;
    Verdict::Allow(Grant {
        publish: publish.iter().map(|f| ns(f)).collect(),
        subscribe: subscribe.iter().map(|f| ns(f)).collect(),
        expires,
    })
}

impl Relay {
    /// A client on `core` whose SETUP carries `token`: set up on its side, held on the relay's;
    /// the relay asked about it exactly once, with that token.
    fn connect_held(&mut self, core: usize, v: Version, token: &str) -> ClientId {
        let value = Bytes::copy_from_slice(token.as_bytes());
        let setup = SetupOptions {
            auth_tokens: vec![AuthToken::UseValue { token_type: 0, value }],
            ..Default::default()
        };
        let c = self.connect_with(core, v, setup);
        assert!(matches!(self.take_events(c).as_slice(), [Event::Ready { .. }]));
        let asks = self.shards[core].take_admissions();
        assert_eq!(asks.len(), 1, "{asks:?}");
        assert_eq!(asks[0].conn, self.clients[c].conn);
        assert_eq!(asks[0].tokens, vec![Bytes::copy_from_slice(token.as_bytes())]);
        c
    }

    fn verdict(&mut self, c: ClientId, verdict: Verdict) {
        let (core, conn, now) = (self.clients[c].core, self.clients[c].conn, self.now);
        self.shards[core].handle(now, Input::Admitted { conn, verdict });
        self.run_until_quiet();
    }
}

#[test]
fn a_session_waits_for_the_platform_and_its_grant_authorizes_its_requests() {
    for v in [Version::Draft14, Version::Draft16, Version::Draft22] {
        let mut r = Relay::with_config(2, config());
        let p = r.connect_held(0, v, "publisher");
        let rid = r.next_request_id(p);
        let announce =
            PublishNamespace { request_id: rid, namespace: ns(&["live", "a"]), ..Default::default() };
        r.send(p, Message::PublishNamespace(announce));
        r.run_until_quiet();
        assert!(messages(&r.take_events(p)).is_empty(), "{v:?}: no answer before the verdict");
        r.verdict(p, grant(&[&["live"]], &[]));
        let msgs = messages(&r.take_events(p));
        assert!(
            matches!(msgs.as_slice(), [Message::RequestOk(ok)] if ok.request_id == rid),
            "{v:?}: {msgs:?}"
        );

        // A viewer whose grant covers other namespaces: its SUBSCRIBE is UNAUTHORIZED.
        let s = r.connect_held(1, v, "news viewer");
        r.verdict(s, grant(&[], &[&["news"]]));
        r.subscribe(s, &track(&["live", "a"], "v"), None);
        let e = request_error(&messages(&r.take_events(s)));
        assert_eq!(e.error_code, code::UNAUTHORIZED, "{v:?}");
        // One whose grant covers it is served: the relay subscribes to the publisher.
        let ok = r.connect_held(1, v, "live viewer");
        r.verdict(ok, grant(&[], &[&["live"]]));
        r.subscribe(ok, &track(&["live", "a"], "v"), None);
        assert!(messages(&r.take_events(ok)).is_empty(), "{v:?}: waiting for the publisher");
        let upstream = messages(&r.take_events(p));
        assert!(matches!(upstream.as_slice(), [Message::Subscribe(_)]), "{v:?}: {upstream:?}");

        // Refused at admission, or at a revalidation: closed UNAUTHORIZED.
        let d = r.connect_held(1, v, "stranger");
        r.verdict(d, Verdict::Deny);
        assert_eq!(r.clients[d].closed_by_relay, Some(UNAUTHORIZED_SESSION), "{v:?}");
        r.verdict(ok, Verdict::Deny);
        assert_eq!(r.clients[ok].closed_by_relay, Some(UNAUTHORIZED_SESSION), "{v:?}: revoked");
        assert_eq!(r.clients[p].closed_by_relay, None);
    }
}
