//! Known bytes: the browser client's first message, the upgrade helpers, our own first bytes.

use std::time::Instant;

use super::{client_record, drain, small_config};
use crate::upgrade::{accept_key, choose, offer, parse_subprotocol, random_key};
use crate::{frame, params, Connection, Framing, Role, TransportParams, Version};

/// npm `@moq/qmux` 0.3.3's first WebSocket message on qmux-01: its QX_TRANSPORT_PARAMETERS.
const JS_FIRST_MESSAGE: &str = "ff5153300d0a0d0a35010480007530040480100000050480040000060480040000\
                                070480040000080240640902406420027ffec571c59429cd0845027ffe";

fn hex(s: &str) -> Vec<u8> {
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex")).collect()
}

#[test]
fn browser_first_message() {
    let msg = hex(JS_FIRST_MESSAGE);
    assert_eq!(msg.len(), 62);
    let Ok(Some((frame::Frame::TransportParams(p), 62))) = frame::decode(&msg, Version::Qmux01, true) else {
        panic!("not one QX_TRANSPORT_PARAMETERS frame")
    };
    let want = TransportParams {
        max_idle_timeout: 30_000,
        initial_max_data: 1 << 20,
        initial_max_stream_data_bidi_local: 256 << 10,
        initial_max_stream_data_bidi_remote: 256 << 10,
        initial_max_stream_data_uni: 256 << 10,
        initial_max_streams_bidi: 100,
        initial_max_streams_uni: 100,
        max_record_size: 16382,
        max_datagram_frame_size: 16382,
    };
    assert_eq!(TransportParams::decode(p, Version::Qmux01), Ok(want.clone()));
    // On -00 the last two are unknown parameters, ignored.
    let on_00 = TransportParams::decode(p, Version::Qmux00).expect("-00");
    assert_eq!(on_00.max_datagram_frame_size, 0);
    assert_eq!(on_00.max_record_size, params::QMUX00_MAX_FRAME_SIZE);
    // A server takes it as the client's first message, split anywhere.
    let now = Instant::now();
    let wire = client_record(Version::Qmux01, Framing::WebSocket, &msg);
    for cut in 0..wire.len() {
        let mut s = Connection::new(Version::Qmux01, Framing::WebSocket, Role::Server, &small_config(), now);
        s.recv(&wire[..cut], now).expect("first part");
        assert!(!s.is_established());
        s.recv(&wire[cut..], now).expect("second part");
        assert!(s.is_established());
        assert_eq!(s.peer_params(), &want);
        assert_eq!(s.dgram_max_writable_len(), Some(16382 - 3));
    }
}

#[test]
fn our_first_bytes() {
    let now = Instant::now();
    for v in super::VERSIONS {
        for f in super::FRAMINGS {
            let mut s = Connection::new(v, f, Role::Server, &small_config(), now);
            let out = drain(&mut s);
            // Server frames are unmasked; the record is the parameters frame alone.
            let frames = super::params_frame(v, &small_config());
            assert_eq!(out, super::wrap(v, f, &frames, None), "{v:?} {f:?}");
            let Ok(Some((frame::Frame::TransportParams(p), _))) = frame::decode(&frames, v, true) else {
                panic!("parameters")
            };
            let got = TransportParams::decode(p, v).expect("ours decode");
            assert_eq!(got, TransportParams::from_config(&small_config(), v));
            // A client's are masked.
            let mut c = Connection::new(v, f, Role::Client, &small_config(), now);
            let out = drain(&mut c);
            if f == Framing::WebSocket {
                assert_eq!(out[1] & 0x80, 0x80);
            }
        }
    }
    // The type 0x3f5153300d0a0d0a starts the stream on TCP for -00: "\xffQS0\r\n\r\n" (not
    // "\xffQMX\r\n\r\n" as draft-ietf-quic-qmux-01 §4.2 says).
    let mut s = Connection::new(Version::Qmux00, Framing::Records, Role::Server, &small_config(), now);
    assert_eq!(&drain(&mut s)[..8], b"\xffQS0\r\n\r\n");
}

#[test]
fn upgrade_helpers() {
    // RFC 6455 §1.3's example.
    assert_eq!(accept_key("dGhlIHNhbXBsZSBub25jZQ=="), "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
    assert_eq!(parse_subprotocol("qmux-01.moqt-18"), Some((Version::Qmux01, Some("moqt-18"))));
    assert_eq!(parse_subprotocol("qmux-01"), Some((Version::Qmux01, None)));
    assert_eq!(parse_subprotocol("qmux-02.moq-lite-05"), Some((Version::Qmux02, Some("moq-lite-05"))));
    assert_eq!(parse_subprotocol("qmux-03.moqt-18"), None);
    assert_eq!(parse_subprotocol("webtransport"), None);
    assert_eq!(parse_subprotocol("qmux-01."), None);
    // What @moq/net 0.2.8 offers, in its order.
    let mut offered: Vec<String> = Vec::new();
    for app in ["moq-lite-05", "moq-lite-04", "moq-lite-03", "moql"] {
        offered.extend(["02", "01", "00"].map(|v| format!("qmux-{v}.{app}")));
    }
    offered.push("qmux-01.moqt-18".into());
    for app in ["moqt-17", "moqt-16", "moqt-15"] {
        offered.extend(["02", "01", "00"].map(|v| format!("qmux-{v}.{app}")));
    }
    offered.extend(["qmux-02", "qmux-01", "qmux-00", "webtransport"].map(String::from));
    assert_eq!(offered.len(), 26);
    let offered: Vec<&str> = offered.iter().map(String::as_str).collect();
    let apps = ["moqt-22", "moqt-20", "moqt-18", "moqt-16"];
    let all = [Version::Qmux01, Version::Qmux02, Version::Qmux00];
    assert_eq!(
        choose(&offered, &apps, &all),
        Some(("qmux-01.moqt-18".into(), Version::Qmux01, "moqt-18".into()))
    );
    assert_eq!(
        choose(&offered, &["moqt-16"], &[Version::Qmux02, Version::Qmux01]),
        Some(("qmux-02.moqt-16".into(), Version::Qmux02, "moqt-16".into()))
    );
    assert_eq!(choose(&offered, &["moqt-22"], &all), None);
    assert_eq!(choose(&["qmux-01", "webtransport"], &apps, &all), None);
    assert_eq!(
        offer(&["moqt-18", "moqt-16"], &[Version::Qmux01]),
        vec!["qmux-01.moqt-18".to_string(), "qmux-01.moqt-16".to_string()]
    );
    let k = random_key();
    assert_eq!(k.len(), 24);
    assert_ne!(k, random_key());
}
