//! MoQT over WebTransport end to end: the relay on one UDP port serving raw QUIC (`moqt-16`,
//! `moqt-22`) and HTTP/3 WebTransport (`h3`) at once, with this project's client library on
//! either transport (ARCHITECTURE.md, "Transports"). A publisher on one transport reaches a
//! subscriber on the other, in every draft, on streams and datagrams; GOAWAY reaches
//! WebTransport sessions; bad CONNECT requests get their HTTP status. (aiomoqt, a third-party
//! client, runs its interop suite over WebTransport in `tests/moqt_quic.rs`.)

#![allow(clippy::unwrap_used)]

#[path = "support/live.rs"]
mod live;

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use moq_edge::client::{ClientError, QuicConn, Relay, Subscriber};
use moq_edge::host::{RelayFactory, RelayGauges};
use moq_edge::moqt::webtransport_handshake;
use moq_edge::relay::RelayConfig;
use moq_edge::runtime::{self, RuntimeConfig, ServerHandle};
use moq_edge::session::SessionConfig;
use moq_edge::webtransport::{self, WebTransport};
use moq_edge::wire::model::FullTrackName;
use moq_edge::wire::Version;

use live::{deadline, GROUPS, PER_GROUP};
use web_transport_proto::{ConnectError, ConnectRequest, ConnectResponse};

fn relay(goaway_timeout: Duration) -> (ServerHandle, Arc<[RelayGauges]>) {
    let mut rc = RuntimeConfig::new(([127, 0, 0, 1], 0).into(), 2);
    rc.pin = false;
    rc.drain_grace = goaway_timeout;
    let config = RelayConfig { linger: Duration::from_millis(50), ..RelayConfig::default() };
    let factory = RelayFactory::new(config, SessionConfig::default(), &[5; 32]);
    let gauges = factory.gauges();
    (runtime::start(rc, Arc::new(factory)).expect("relay starts"), gauges)
}

fn track(name: &str) -> FullTrackName {
    live::track("wt", name)
}

/// A distinct payload per object, some spanning several QUIC packets.
fn payload(group: u64, object: u64) -> Bytes {
    let mut p = format!("g{group}o{object}:").into_bytes();
    p.resize(20 + (object as usize * 1733) % 5000, b'a' + (group % 26) as u8);
    Bytes::from(p)
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Via {
    Quic,
    WebTransport,
}

fn relay_at(addr: SocketAddr, via: Via) -> Relay {
    match via {
        Via::Quic => Relay::from(addr),
        Via::WebTransport => Relay::webtransport(addr, "/moq"),
    }
}

/// A publisher and a subscriber on different transports (and both on WebTransport), each
/// draft: every object arrives, in order, with its bytes; a second WebTransport subscriber
/// on the same track adds no upstream subscription (one per track at the relay).
#[test]
fn publisher_and_subscriber_on_either_transport_in_both_drafts() {
    let (server, gauges) = relay(Duration::from_secs(5));
    let addr = server.local_addr();
    let pairs = [
        (Via::Quic, Via::WebTransport),
        (Via::WebTransport, Via::Quic),
        (Via::WebTransport, Via::WebTransport),
    ];
    for version in Version::ALL {
        for (pv, sv) in pairs {
            let t = track(&format!("{version:?}-{pv:?}-{sv:?}"));
            let (publisher, go) = live::publish(relay_at(addr, pv), version, t.clone(), false, payload);
            let mut subs: Vec<_> = (0..2)
                .map(|_| Subscriber::connect(relay_at(addr, sv), version, deadline()).unwrap())
                .collect();
            let ids: Vec<_> =
                subs.iter_mut().map(|s| s.subscribe(t.clone(), None, deadline()).unwrap()).collect();
            go.send(()).unwrap();
            for (s, id) in subs.iter_mut().zip(&ids) {
                let want = (GROUPS * PER_GROUP) as usize;
                let end = deadline();
                while s.received(*id).len() < want {
                    assert!(
                        Instant::now() < end,
                        "{version:?} {pv:?}→{sv:?}: {} objects",
                        s.received(*id).len()
                    );
                    s.pump(Instant::now() + Duration::from_millis(10)).unwrap();
                }
                for (i, r) in s.received(*id).iter().enumerate() {
                    let (g, o) = (i as u64 / PER_GROUP, i as u64 % PER_GROUP);
                    assert_eq!((r.group, r.object), (g, o), "{version:?} {pv:?}→{sv:?}: order");
                    assert_eq!(r.payload, payload(g, o), "{version:?} {pv:?}→{sv:?}: bytes of {g}/{o}");
                    assert!(!r.via_datagram);
                }
            }
            // The publisher is still connected: the relay holds one upstream subscription
            // for the two subscribers.
            let upstreams: u64 =
                gauges.iter().map(|g| g.upstreams.load(std::sync::atomic::Ordering::Relaxed)).sum();
            assert_eq!(upstreams, 1, "{version:?} {pv:?}→{sv:?}: upstream subscriptions for one track");
            publisher.join().unwrap();
        }
    }
    server.shutdown().unwrap();
}

/// Object datagrams cross WebTransport as HTTP datagrams (quarter stream ID prefix), both
/// ways through the relay, in every draft.
#[test]
fn datagrams_over_webtransport_in_both_drafts() {
    let (server, _) = relay(Duration::from_secs(5));
    let addr = server.local_addr();
    for version in Version::ALL {
        let t = track(&format!("dgram-{version:?}"));
        let (publisher, go) =
            live::publish(relay_at(addr, Via::WebTransport), version, t.clone(), true, payload);
        let mut s = Subscriber::connect(relay_at(addr, Via::WebTransport), version, deadline()).unwrap();
        let id = s.subscribe(t.clone(), None, deadline()).unwrap();
        go.send(()).unwrap();
        let end = Instant::now() + Duration::from_secs(20);
        // Datagrams are unreliable by nature: most (on loopback, all) arrive.
        while s.received(id).len() < (GROUPS * PER_GROUP) as usize && Instant::now() < end {
            s.pump(Instant::now() + Duration::from_millis(10)).unwrap();
        }
        let got = s.received(id);
        assert!(!got.is_empty(), "{version:?}: no datagram arrived");
        for r in got {
            assert!(r.via_datagram, "{version:?}");
            let want = payload(r.group, r.object);
            assert_eq!(r.payload, want.slice(..want.len().min(900)), "{version:?}: {}/{}", r.group, r.object);
        }
        publisher.join().unwrap();
    }
    server.shutdown().unwrap();
}

/// A draining relay sends GOAWAY to its WebTransport sessions (with the DRAIN capsule
/// beside it) and, when the grace period ends, closes them with GOAWAY_TIMEOUT in a
/// CLOSE_WEBTRANSPORT_SESSION capsule, then the connection.
#[test]
fn goaway_reaches_webtransport_sessions() {
    for version in Version::ALL {
        let (server, _) = relay(Duration::from_millis(1500));
        let addr = server.local_addr();
        let mut s = Subscriber::connect(relay_at(addr, Via::WebTransport), version, deadline()).unwrap();
        let trigger = server.shutdown_trigger();
        let stopped = thread::spawn(move || server.join());
        trigger.trigger();
        s.pump_until(deadline(), |c| c.goaway().is_some()).unwrap();
        s.pump(Instant::now() + Duration::from_millis(50)).unwrap();
        assert!(s.client_mut().webtransport_draining(), "{version:?}: DRAIN_WEBTRANSPORT_SESSION");
        let err = s.pump(deadline()).unwrap_err();
        let closed = s.core().closed().map(|(code, _)| code);
        assert!(
            closed == Some(0x10)
                || matches!(err.root(), ClientError::PeerClosed(_) | ClientError::Session { .. }),
            "{version:?}: the relay ends the session after the grace period: {err} / {closed:?}"
        );
        stopped.join().unwrap().unwrap();
    }
}

/// What the relay answers a raw HTTP/3 request: the status of the response on `stream`.
fn h3_status(addr: SocketAddr, requests: &[(u64, Bytes)], stream: u64) -> Option<u16> {
    let mut conn = QuicConn::connect(addr, webtransport::ALPN).unwrap();
    conn.handshake(deadline()).unwrap();
    // Our SETTINGS (the client's control stream) come from the WebTransport layer; the
    // requests are written raw.
    let mut wt =
        WebTransport::client(&format!("https://{addr}/unused"), &[], webtransport::Limits::default())
            .unwrap();
    let mut h3 = VecDeque::new();
    while let Some(o) = wt.poll_output() {
        if let webtransport::Output::Stream { quic: 2, data, fin } = o {
            h3.push_back((2, data, fin));
        }
    }
    for (id, bytes) in requests {
        h3.push_back((*id, bytes.clone(), false));
    }
    let mut reply = Vec::new();
    let mut status = None;
    let _ = conn.drive(Instant::now() + Duration::from_secs(10), |c| {
        moq_edge::moqt::write_h3(c.conn_mut(), &mut h3);
        let mut buf = [0u8; 4096];
        while let Ok((n, _)) = c.conn_mut().stream_recv(stream, &mut buf) {
            reply.extend_from_slice(&buf[..n]);
        }
        status = match ConnectResponse::decode(&mut &reply[..]) {
            Ok(r) => Some(r.status.as_u16()),
            Err(ConnectError::WrongStatus(s)) => s.map(|s| s.as_u16()),
            Err(_) => None,
        };
        Ok(status.is_some())
    });
    status
}

fn connect_request(addr: SocketAddr, protocols: &[&str]) -> Bytes {
    let url = url::Url::parse(&format!("https://{addr}/moq")).unwrap();
    let request = ConnectRequest::new(url).with_protocols(protocols.iter().map(|p| p.to_string()));
    let mut buf = BytesMut::new();
    request.encode(&mut buf).unwrap();
    buf.freeze()
}

/// Requests the relay does not serve get their HTTP status, and the connection stays usable:
/// a GET (404), a CONNECT offering no MoQT version spoken here (400), a second CONNECT on a
/// connection that has its session (429), a malformed CONNECT without `:path` (400).
#[test]
fn bad_requests_get_their_status() {
    let (server, _) = relay(Duration::from_secs(5));
    let addr = server.local_addr();

    // GET / (QPACK: no dynamic table; :method GET = static 17, :path / = 1, :scheme https =
    // 23, :authority with name reference 0 and a literal value).
    let mut get = vec![0x00, 0x00, 0xc0 | 17, 0xc0 | 1, 0xc0 | 23, 0x50, 9];
    get.extend_from_slice(b"localhost");
    let mut frame = vec![0x01, get.len() as u8];
    frame.extend_from_slice(&get);
    assert_eq!(h3_status(addr, &[(0, Bytes::from(frame))], 0), Some(404), "GET");

    assert_eq!(h3_status(addr, &[(0, connect_request(addr, &["moqt-99"]))], 0), Some(400), "unknown version");

    let first = connect_request(addr, &["moqt-16"]);
    assert_eq!(h3_status(addr, &[(0, first.clone()), (4, first)], 4), Some(429), "second CONNECT");

    // CONNECT without :path (static :method CONNECT = 15, :scheme https, :authority, and
    // :protocol webtransport as a literal name).
    let mut bad = vec![0x00, 0x00, 0xc0 | 15, 0xc0 | 23, 0x50, 9];
    bad.extend_from_slice(b"localhost");
    // Literal name (3-bit length prefix: 7, then 2 more), literal value.
    bad.extend_from_slice(&[0x27, 0x02]);
    bad.extend_from_slice(b":protocol");
    bad.push(12);
    bad.extend_from_slice(b"webtransport");
    let mut frame = vec![0x01, bad.len() as u8];
    frame.extend_from_slice(&bad);
    assert_eq!(h3_status(addr, &[(0, Bytes::from(frame))], 0), Some(400), "no :path");

    // The client library reports a refusal with the status.
    let refused = Subscriber::connect(Relay::webtransport(addr, "/moq"), Version::Draft16, deadline());
    assert!(refused.is_ok(), "a good CONNECT after all that");

    // Nothing above harmed the relay: raw QUIC still works.
    Subscriber::connect(addr, Version::Draft22, deadline()).unwrap();
    server.shutdown().unwrap();
}

/// The WebTransport handshake helper alone: our client's CONNECT, accepted with the
/// protocol it offered.
#[test]
fn connect_is_answered_with_the_offered_protocol() {
    let (server, _) = relay(Duration::from_secs(5));
    let addr = server.local_addr();
    for version in Version::ALL {
        let mut conn = QuicConn::connect(addr, webtransport::ALPN).unwrap();
        conn.handshake(deadline()).unwrap();
        let mut wt = WebTransport::client(
            &format!("https://{addr}/moq?token=abc"),
            &[version.alpn().to_string()],
            webtransport::Limits::default(),
        )
        .unwrap();
        let mut h3 = VecDeque::new();
        let mut buf = vec![0u8; 65_536];
        conn.drive(deadline(), |c| {
            webtransport_handshake(c.conn_mut(), &mut wt, &mut h3, &mut buf);
            Ok(wt.accepted().is_some())
        })
        .unwrap();
        let accepted = wt.accepted().unwrap();
        assert_eq!(accepted.protocol, version.alpn());
        assert_eq!(accepted.path, "/moq?token=abc");
    }
    server.shutdown().unwrap();
}

/// `setup_timeout` over WebTransport: a connection whose CONNECT never comes is closed with
/// H3_NO_ERROR (0x100, RFC 9114 §5.2: there is no session to carry a MoQT code); a session
/// whose CONNECT was accepted but whose MoQT SETUP never comes ends with
/// CLOSE_WEBTRANSPORT_SESSION carrying CONTROL_MESSAGE_TIMEOUT (0x11).
#[test]
fn connections_that_never_set_up_are_closed() {
    let mut rc = RuntimeConfig::new(([127, 0, 0, 1], 0).into(), 2);
    rc.pin = false;
    rc.setup_timeout = Duration::from_millis(300);
    let factory = RelayFactory::new(RelayConfig::default(), SessionConfig::default(), &[5; 32]);
    let server = runtime::start(rc, Arc::new(factory)).expect("relay starts");
    let addr = server.local_addr();
    // No CONNECT (not even SETTINGS).
    let mut conn = QuicConn::connect(addr, webtransport::ALPN).unwrap();
    conn.handshake(deadline()).unwrap();
    match conn.drive(deadline(), |_| Ok(false)) {
        Err(ClientError::PeerClosed(e)) => assert_eq!((e.is_app, e.error_code), (true, 0x100)),
        other => panic!("expected the relay to close, got {other:?}"),
    }
    // CONNECT accepted, no SETUP.
    for version in Version::ALL {
        let mut conn = QuicConn::connect(addr, webtransport::ALPN).unwrap();
        conn.handshake(deadline()).unwrap();
        let mut wt = WebTransport::client(
            &format!("https://{addr}/moq"),
            &[version.alpn().to_string()],
            webtransport::Limits::default(),
        )
        .unwrap();
        let mut h3 = VecDeque::new();
        let mut buf = vec![0u8; 65_536];
        let mut closed = None;
        let _ = conn.drive(deadline(), |c| {
            webtransport_handshake(c.conn_mut(), &mut wt, &mut h3, &mut buf);
            while let Some(e) = wt.poll_event() {
                if let webtransport::Event::Closed { code, .. } = e {
                    closed = Some(code);
                }
            }
            Ok(closed.is_some())
        });
        assert!(wt.accepted().is_some(), "{version:?}");
        assert_eq!(closed, Some(0x11), "{version:?}: CONTROL_MESSAGE_TIMEOUT");
    }
    server.shutdown().unwrap();
}

/// Token auth for browsers: the `token`, `jwt` and `cat` query parameters of the CONNECT URL
/// authorize the session like a token in SETUP, whatever the token's format (this relay's
/// own, a JWT with moq-dev's claims, a Common Access Token as base64url). With one that grants
/// the namespace a subscription is looked up (no publisher: 0x10); without one, or with one
/// for another namespace, it is refused UNAUTHORIZED (0x1).
#[test]
fn a_token_in_the_url_authorizes_the_session() {
    use base64::Engine;
    use moq_edge::auth;
    const SECRET: &[u8] = b"a secret of more than sixteen bytes";
    let secret = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(SECRET);
    let mut keys = auth::Keys::parse(&[format!("k1={secret}")]).unwrap();
    let jwks = format!(r#"{{"keys":[{{"kty":"oct","kid":"j1","k":"{secret}"}}]}}"#);
    keys.add_jwt_keys(jwks.as_bytes()).unwrap();
    keys.add_cat_keys(jwks.replace("j1", "c1").as_bytes()).unwrap();
    let mut rc = RuntimeConfig::new(([127, 0, 0, 1], 0).into(), 1);
    rc.pin = false;
    let config = RelayConfig { auth: Some(auth::KeyRing::fixed(keys)), ..RelayConfig::default() };
    let server =
        runtime::start(rc, Arc::new(RelayFactory::new(config, SessionConfig::default(), &[5; 32]))).unwrap();
    let addr = server.local_addr();
    let exp = auth::unix_now() + 600;
    let token = |ns: &str| {
        let claims = auth::Claims { ns: vec![ns.to_string()], publish: false, subscribe: true, exp };
        auth::mint("k1", SECRET, &claims).unwrap()
    };
    let jwt = |root: &str| {
        let claims = auth::JwtClaims {
            root: root.into(),
            get: vec![String::new()],
            exp: Some(exp),
            ..Default::default()
        };
        auth::mint_jwt(&auth::JwtSigner::hs256(SECRET).with_kid("j1"), &claims).unwrap()
    };
    let cat = |ns: &str| {
        let scope = auth::MoqtScope { actions: vec![4], namespace: vec![ns.as_bytes().to_vec()] };
        let claims = auth::CatClaims { exp, moqt: vec![scope], ..Default::default() };
        let signer = auth::CatSigner::Hmac { kid: b"c1".to_vec(), secret: SECRET.to_vec() };
        auth::base64url(&auth::mint_cat(&signer, &claims).unwrap())
    };
    for version in Version::ALL {
        for (path, want) in [
            (format!("/moq?token={}", token("wt")), 0x10),
            ("/moq".to_string(), 0x1),
            (format!("/moq?x=1&token={}", token("other")), 0x1),
            (format!("/moq?jwt={}", jwt("wt")), 0x10),
            (format!("/moq?jwt={}", jwt("other")), 0x1),
            (format!("/moq?cat={}", cat("wt")), 0x10),
            (format!("/moq?cat={}", cat("other")), 0x1),
        ] {
            let mut s = Subscriber::connect(Relay::webtransport(addr, &path), version, deadline()).unwrap();
            // DOES_NOT_EXIST is SUBSCRIBE_ERROR's TRACK_DOES_NOT_EXIST 0x4 at draft-14 (§9.9).
            let want = if want == 0x10 && version == Version::Draft14 { 0x4 } else { want };
            match s.subscribe(track("a"), None, deadline()) {
                Err(ClientError::Refused { code, .. }) => assert_eq!(code, want, "{version:?} {path}"),
                other => panic!("{version:?} {path}: {other:?}"),
            }
        }
    }
    server.shutdown().unwrap();
}
