//! Admission under load (ARCHITECTURE.md, "Admission under load"): a core the runtime says is
//! over its busy threshold refuses new SUBSCRIBE, FETCH and namespace subscriptions with
//! REQUEST_ERROR EXCESSIVE_LOAD, while what it already serves keeps flowing and publishers'
//! requests are still answered; back under the threshold, new requests are accepted again.

use relay::Input;
use relay::RelayConfig;
use wire::code;
use wire::model::{Location, LocationFilter, Message, SubscribeTracks};

use crate::common::*;
use crate::harness::{messages, streams, Relay};

fn config(threshold: u8) -> RelayConfig {
    RelayConfig { admission_busy_pct: threshold, ..RelayConfig::default() }
}

/// Every core is made busy (95 % over a threshold of 90) with a subscription established:
/// a new SUBSCRIBE, a standalone FETCH and a SUBSCRIBE_NAMESPACE get EXCESSIVE_LOAD (0x9 at
/// every draft) and are counted; the established subscriber keeps receiving objects; a
/// publisher on the busy core still announces (REQUEST_OK); no session is closed. At 50 %
/// the same SUBSCRIBE is accepted.
#[test]
fn a_busy_core_refuses_new_requests_with_excessive_load_and_keeps_serving() {
    for (pv, sv) in COMBOS {
        let ctx = format!("{pv:?}->{sv:?}");
        let mut r = Relay::with_config(2, config(90));
        let t = r.track_owned_by(&["live", "cam"], 0);
        let (p, subs, _up) = r.established(pv, sv, &t, &[1], None);
        let (s1, rid1) = subs[0];
        for shard in &mut r.shards {
            shard.handle(r.now, Input::Load(95));
            assert!(shard.over_load());
        }

        let s2 = r.connect(1, sv);
        let rid = r.subscribe(s2, &t, None);
        r.refused(s2, rid, code::EXCESSIVE_LOAD, &format!("SUBSCRIBE {ctx}"));
        let (rid, ev) = r.standalone(
            s2,
            &t,
            LocationFilter::AbsoluteStartGroupEnd { start: Location::new(0, 0), end_group: 0 },
        );
        let e = request_error(&messages(&ev));
        assert_eq!((e.request_id, e.error_code), (rid, code::EXCESSIVE_LOAD), "FETCH {ctx}");
        let (rid, ev) = r.subscribe_namespace(s2, &["live"]);
        let e = request_error(&messages(&ev));
        assert_eq!((e.request_id, e.error_code), (rid, code::EXCESSIVE_LOAD), "SUBSCRIBE_NAMESPACE {ctx}");
        let stats = r.shards[1].stats();
        assert_eq!(
            (stats.admission_subscribes, stats.admission_fetches, stats.admission_namespaces),
            (1, 1, 1),
            "{ctx}"
        );

        // What the core already serves keeps flowing.
        r.publish_groups(p, pv, 0..2);
        let seen = streams(&r.take_events(s1));
        assert_eq!(seen.len(), 2, "{ctx}");
        assert!(seen.iter().all(|s| s.request_id == rid1 && s.objects.len() == 5), "{ctx}");

        // A publisher's request on the busy core is still answered.
        let p2 = r.connect(1, pv);
        r.announce(p2, &["other"]);

        // Back under the threshold: the same SUBSCRIBE is accepted.
        for shard in &mut r.shards {
            shard.handle(r.now, Input::Load(50));
            assert!(!shard.over_load());
        }
        let rid = r.subscribe(s2, &t, None);
        subscribe_ok(&messages(&r.take_events(s2)), rid);
        r.assert_no_closes();
    }
}

/// SUBSCRIBE_TRACKS (draft-18 and draft-22) is a namespace subscription: refused the same way.
#[test]
fn a_busy_core_refuses_subscribe_tracks() {
    for v in [D18, D22] {
        let mut r = Relay::with_config(1, config(90));
        r.shards[0].handle(r.now, Input::Load(100));
        let s = r.connect(0, v);
        let rid = r.next_request_id(s);
        r.send(
            s,
            Message::SubscribeTracks(SubscribeTracks {
                request_id: rid,
                prefix: ns(&["live"]),
                ..Default::default()
            }),
        );
        r.run_until_quiet();
        r.refused(s, rid, code::EXCESSIVE_LOAD, &format!("{v:?}"));
        assert_eq!(r.shards[0].stats().admission_namespaces, 1);
    }
}

/// At or under the threshold, and with admission off (0 or 100), nothing is refused however
/// busy the core is; a joining FETCH needs a subscription, which is accepted here.
#[test]
fn admission_off_or_under_the_threshold_refuses_nothing() {
    for (threshold, load) in [(90, 90), (0, 100), (100, 100)] {
        for (pv, sv) in COMBOS {
            let mut r = Relay::with_config(2, config(threshold));
            let t = r.track_owned_by(&["live", "cam"], 1);
            let (_p, _subs, _up) = r.established(pv, sv, &t, &[1], None);
            for shard in &mut r.shards {
                shard.handle(r.now, Input::Load(load));
            }
            let s = r.connect(1, sv);
            let rid = r.subscribe(s, &t, None);
            subscribe_ok(&messages(&r.take_events(s)), rid);
            let (_rid, ev) = r.standalone(
                s,
                &t,
                LocationFilter::AbsoluteStartGroupEnd { start: Location::new(0, 0), end_group: 0 },
            );
            assert!(
                !messages(&ev)
                    .iter()
                    .any(|m| matches!(m, Message::RequestError(e) if e.error_code == code::EXCESSIVE_LOAD)),
                "threshold {threshold} load {load} {pv:?}->{sv:?}: {ev:?}"
            );
            assert_eq!(r.shards[1].stats().admission_subscribes, 0);
        }
    }
}
