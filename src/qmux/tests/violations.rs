//! Hostile or broken input: each violation closes with its code, and nothing panics.

use std::time::Instant;

use super::{
    client_record, close_seen_by_client, drain, params_frame, server, small_config, wrap, FRAMINGS, VERSIONS,
};
use crate::code::*;
use crate::frame::{self, put_stream, put_varints};
use crate::{ws, Connection, Error, Framing, Role, Version};

/// Sends `frames` (after the parameters) to a server; checks the code it closes with, in its
/// state and on the wire, and that it closes once its output is taken.
fn expect_close(version: Version, framing: Framing, frames: &[u8], code: u64) {
    let now = Instant::now();
    let mut s = server(version, framing, now);
    let r = s.recv(&client_record(version, framing, frames), now);
    assert_eq!(r, Err(Error::Transport(code)), "{version:?} {framing:?}");
    assert_eq!(s.local_error().map(|e| e.error_code), Some(code));
    let out = drain(&mut s);
    assert!(s.is_closed());
    let seen = close_seen_by_client(version, framing, &out).expect("CONNECTION_CLOSE on the wire");
    assert!(!seen.is_app && seen.error_code == code, "{seen:?}");
    assert_eq!(s.recv(b"more", now), Err(Error::Closed));
}

#[test]
fn prohibited_and_unknown_frames() {
    for v in VERSIONS {
        for f in FRAMINGS {
            // PING, ACK, HANDSHAKE_DONE (draft-ietf-quic-qmux-01 §4), an unknown type.
            for ty in [0x01u8, 0x02, 0x1e, 0x21] {
                expect_close(v, f, &[ty, 0, 0, 0, 0], FRAME_ENCODING_ERROR);
            }
        }
    }
}

#[test]
fn stream_beyond_limit_and_flow_control() {
    for v in VERSIONS {
        for f in FRAMINGS {
            let mut b = Vec::new();
            put_stream(&mut b, 4 * 4, 0, b"x", false); // the 5th client bidi stream; limit 4
            expect_close(v, f, &b, STREAM_LIMIT_ERROR);
            // Records that fit, adding up past the 20 KiB stream window.
            let now = Instant::now();
            let mut s = server(v, f, now);
            let mut r = Ok(0);
            for i in 0..3u64 {
                let mut b = Vec::new();
                put_stream(&mut b, 2, i * 8000, &[0; 8000], false);
                r = s.recv(&client_record(v, f, &b), now);
            }
            assert_eq!(r, Err(Error::Transport(FLOW_CONTROL_ERROR)), "{v:?} {f:?}");
        }
    }
}

#[test]
fn out_of_order_and_final_size() {
    for v in VERSIONS {
        for f in FRAMINGS {
            let mut b = Vec::new();
            put_stream(&mut b, 0, 0, b"abc", false);
            put_stream(&mut b, 0, 0, b"abc", false); // an exact duplicate is not the next byte
            expect_close(v, f, &b, PROTOCOL_VIOLATION);
            let mut b = Vec::new();
            put_stream(&mut b, 0, 0, b"abc", true);
            put_stream(&mut b, 0, 3, b"d", false);
            expect_close(v, f, &b, FINAL_SIZE_ERROR);
            // Our own unidirectional stream cannot carry the peer's data; one we never opened
            // cannot be stopped.
            let mut b = Vec::new();
            put_stream(&mut b, 3, 0, b"x", false);
            expect_close(v, f, &b, STREAM_STATE_ERROR);
            let mut b = Vec::new();
            put_varints(&mut b, frame::STOP_SENDING, &[1, 0]);
            expect_close(v, f, &b, STREAM_STATE_ERROR);
            // A truncated frame at the end of a record (not on -00 over TCP, where it waits).
            if !(v == Version::Qmux00 && f == Framing::Records) {
                expect_close(v, f, &[0x0e, 0x00, 0x00, 0x05, 1, 2], FRAME_ENCODING_ERROR);
            }
        }
    }
}

#[test]
fn transport_parameter_rules() {
    let now = Instant::now();
    for v in VERSIONS {
        for f in FRAMINGS {
            // A prohibited parameter: stateless_reset_token (0x02) with 16 bytes.
            let mut p = vec![0x02, 16];
            p.extend_from_slice(&[0; 16]);
            let mut tp = Vec::new();
            frame::put_bytes(&mut tp, frame::QX_TRANSPORT_PARAMETERS, &p);
            let mut s = Connection::new(v, f, Role::Server, &small_config(), now);
            assert_eq!(
                s.recv(&client_record(v, f, &tp), now),
                Err(Error::Transport(TRANSPORT_PARAMETER_ERROR))
            );
            assert!(!s.is_established());
            // A frame before the parameters: -02 §4.2 says PROTOCOL_VIOLATION, -00/-01
            // TRANSPORT_PARAMETER_ERROR.
            let mut s = Connection::new(v, f, Role::Server, &small_config(), now);
            let mut b = Vec::new();
            put_varints(&mut b, frame::MAX_DATA, &[1000]);
            let code = if v == Version::Qmux02 { PROTOCOL_VIOLATION } else { TRANSPORT_PARAMETER_ERROR };
            assert_eq!(s.recv(&client_record(v, f, &b), now), Err(Error::Transport(code)), "{v:?} {f:?}");
            // A second parameters frame.
            expect_close(v, f, &params_frame(v, &small_config()), code);
        }
        // max_record_size below 16382 (-01/-02 §5.2).
        if v != Version::Qmux00 {
            let mut p = Vec::new();
            crate::varint::put(&mut p, crate::params::MAX_RECORD_SIZE);
            p.extend_from_slice(&[2, 0x7f, 0xfd]);
            assert_eq!(crate::TransportParams::decode(&p, v), Err("max_record_size below 16382"));
        }
    }
}

#[test]
fn websocket_violations() {
    let now = Instant::now();
    for v in VERSIONS {
        // A text message: fatal (status 1003 on the WebSocket Close).
        let mut s = server(v, Framing::WebSocket, now);
        let mut text = bytes::BytesMut::new();
        ws::encode(&mut text, ws::OP_TEXT, b"hi", Some([1, 2, 3, 4]));
        assert_eq!(s.recv(&text, now), Err(Error::Transport(PROTOCOL_VIOLATION)));
        let out = drain(&mut s);
        assert_eq!(&out[out.len() - 4..], &[0x88, 0x02, 0x03, 0xeb], "Close 1003 last");
        // A message over max_record_size: refused from its header, before the payload.
        let mut s = server(v, Framing::WebSocket, now);
        let head = [0x82, 0xfe, 0x50, 0x00, 1, 2, 3, 4]; // masked, 20480 bytes
        assert_eq!(s.recv(&head, now), Err(Error::Transport(FRAME_ENCODING_ERROR)));
        // Unmasked from a client.
        let mut s = server(v, Framing::WebSocket, now);
        let msg = wrap(v, Framing::WebSocket, &[0], None);
        assert_eq!(s.recv(&msg, now), Err(Error::Transport(PROTOCOL_VIOLATION)));
        // Masked from a server.
        let mut c = Connection::new(v, Framing::WebSocket, Role::Client, &small_config(), now);
        let msg = wrap(v, Framing::WebSocket, &params_frame(v, &small_config()), Some([9, 9, 9, 9]));
        assert_eq!(c.recv(&msg, now), Err(Error::Transport(PROTOCOL_VIOLATION)));
        // A control frame over 125 bytes.
        let mut s = server(v, Framing::WebSocket, now);
        assert_eq!(
            s.recv(&[0x89, 0xfe, 0x00, 0x7e, 1, 2, 3, 4], now),
            Err(Error::Transport(PROTOCOL_VIOLATION))
        );
        // Fragments that add up to too much.
        let mut s = server(v, Framing::WebSocket, now);
        let mut frag = bytes::BytesMut::new();
        for _ in 0..3 {
            let mut b = bytes::BytesMut::new();
            ws::encode(&mut b, ws::OP_CONT, &[0; 6000], Some([1, 1, 1, 1]));
            b[0] &= 0x7f; // not final
            frag.extend_from_slice(&b);
        }
        frag[0] = 0x02; // the first is a non-final binary frame
        assert_eq!(s.recv(&frag, now), Err(Error::Transport(FRAME_ENCODING_ERROR)));
    }
}

#[test]
fn records_over_max_record_size() {
    let now = Instant::now();
    for v in [Version::Qmux01, Version::Qmux02] {
        let mut s = server(v, Framing::Records, now);
        // Size 16383: refused from the Size field alone.
        assert_eq!(s.recv(&[0x7f, 0xff], now), Err(Error::Transport(FRAME_ENCODING_ERROR)));
    }
    // -00 on TCP: a frame that cannot fit in 16384 bytes.
    let mut s = server(Version::Qmux00, Framing::Records, now);
    let mut b = Vec::new();
    put_stream(&mut b, 0, 0, &[0; 17000], false);
    assert_eq!(s.recv(&b, now), Err(Error::Transport(FRAME_ENCODING_ERROR)));
}

#[test]
fn datagram_rules() {
    let mut b = Vec::new();
    frame::put_bytes(&mut b, frame::DATAGRAM_LEN, b"x");
    // -00 has no DATAGRAM: an unknown frame type.
    expect_close(Version::Qmux00, Framing::WebSocket, &b, FRAME_ENCODING_ERROR);
    // Not negotiated by us: PROTOCOL_VIOLATION (RFC 9221 §3).
    let now = Instant::now();
    let config = crate::Config { max_datagram_frame_size: 0, ..small_config() };
    let mut s = Connection::new(Version::Qmux01, Framing::WebSocket, Role::Server, &config, now);
    let mut rec = params_frame(Version::Qmux01, &small_config());
    rec.extend_from_slice(&b);
    assert_eq!(
        s.recv(&client_record(Version::Qmux01, Framing::WebSocket, &rec), now),
        Err(Error::Transport(PROTOCOL_VIOLATION))
    );
}

#[test]
fn qx_ping_rules_on_02() {
    let now = Instant::now();
    let mut b = Vec::new();
    put_varints(&mut b, frame::QX_PING_REQUEST, &[5]);
    put_varints(&mut b, frame::QX_PING_REQUEST, &[5]);
    expect_close(Version::Qmux02, Framing::WebSocket, &b, PROTOCOL_VIOLATION);
    let mut b = Vec::new();
    put_varints(&mut b, frame::QX_PING_RESPONSE, &[0]);
    expect_close(Version::Qmux02, Framing::Records, &b, PROTOCOL_VIOLATION);
    // -01: monotonic, not strict; each answered.
    let mut s = server(Version::Qmux01, Framing::Records, now);
    let _ = drain(&mut s);
    let mut b = Vec::new();
    for seq in [3, 3, 9] {
        put_varints(&mut b, frame::QX_PING_REQUEST, &[seq]);
    }
    s.recv(&client_record(Version::Qmux01, Framing::Records, &b), now).expect("pings");
    let mut want = Vec::new();
    for seq in [3, 3, 9] {
        let mut r = Vec::new();
        put_varints(&mut r, frame::QX_PING_RESPONSE, &[seq]);
        want.extend_from_slice(&crate::tests::wrap(Version::Qmux01, Framing::Records, &r, None));
    }
    assert_eq!(drain(&mut s), want);
}

#[test]
fn output_stays_bounded_when_the_peer_never_reads() {
    let now = Instant::now();
    let mut s = server(Version::Qmux01, Framing::WebSocket, now);
    let mut one = Vec::new();
    let mut b = Vec::new();
    for seq in 0..100_000u64 {
        b.clear();
        put_varints(&mut b, frame::QX_PING_REQUEST, &[seq]);
        one.extend_from_slice(&client_record(Version::Qmux01, Framing::WebSocket, &b));
        let mut p = bytes::BytesMut::new();
        ws::encode(&mut p, ws::OP_PING, &[0; 100], Some([1, 2, 3, 4]));
        one.extend_from_slice(&p);
        if s.recv(&one, now).is_err() || s.is_closed() {
            break;
        }
        one.clear();
        assert!(s.out.len() <= small_config().max_output + (64 << 10) + 256);
    }
    assert!(s.is_closed(), "a peer that never reads is dropped");
    assert_eq!(s.local_error().map(|e| e.error_code), Some(INTERNAL_ERROR));
}

#[test]
fn connection_flow_control() {
    let now = Instant::now();
    for v in VERSIONS {
        for f in FRAMINGS {
            // Four uni streams of 16000 bytes fit the 64 KiB connection window; 2000 more do not.
            let mut s = server(v, f, now);
            for id in [2u64, 6, 10, 14] {
                for half in 0..2u64 {
                    let mut b = Vec::new();
                    put_stream(&mut b, id, half * 8000, &[1; 8000], false);
                    s.recv(&client_record(v, f, &b), now).expect("within the window");
                }
            }
            let mut b = Vec::new();
            put_stream(&mut b, 0, 0, &[1; 2000], false);
            assert_eq!(s.recv(&client_record(v, f, &b), now), Err(Error::Transport(FLOW_CONTROL_ERROR)));
        }
    }
}

#[test]
fn reset_with_a_small_final_size_is_tolerated() {
    let now = Instant::now();
    let mut s = server(Version::Qmux01, Framing::WebSocket, now);
    let mut b = Vec::new();
    put_stream(&mut b, 2, 0, b"abcdef", false);
    put_varints(&mut b, frame::RESET_STREAM, &[2, 5, 0]);
    s.recv(&client_record(Version::Qmux01, Framing::WebSocket, &b), now).expect("tolerated");
    assert_eq!(s.stream_readable_next(), Some(2));
    assert_eq!(s.stream_recv(2, &mut [0; 10]), Err(Error::StreamReset(5)));
    // A final size that changes a FIN's is not.
    let mut b = Vec::new();
    put_stream(&mut b, 6, 0, b"abc", true);
    put_varints(&mut b, frame::RESET_STREAM, &[6, 5, 10]);
    assert_eq!(
        s.recv(&client_record(Version::Qmux01, Framing::WebSocket, &b), now),
        Err(Error::Transport(FINAL_SIZE_ERROR))
    );
}

#[test]
fn huge_peer_idle_timeout_and_no_local_one() {
    let now = Instant::now();
    let config = crate::Config { max_idle_timeout: std::time::Duration::ZERO, ..small_config() };
    let mut s = Connection::new(Version::Qmux01, Framing::Records, Role::Server, &config, now);
    assert_eq!(s.timeout_instant(), None);
    let mut p = Vec::new();
    for (id, v) in [(0x01u64, crate::varint::MAX), (0x04, 1000)] {
        crate::varint::put(&mut p, id);
        crate::varint::put(&mut p, crate::varint::len(v) as u64);
        crate::varint::put(&mut p, v);
    }
    let mut tp = Vec::new();
    frame::put_bytes(&mut tp, frame::QX_TRANSPORT_PARAMETERS, &p);
    s.recv(&client_record(Version::Qmux01, Framing::Records, &tp), now).expect("params");
    let at = s.timeout_instant().expect("the peer's timeout applies");
    s.on_timeout(at);
    assert!(!s.is_closed());
}

#[test]
fn local_stream_limits() {
    let now = Instant::now();
    let mut c = Connection::new(Version::Qmux01, Framing::WebSocket, Role::Client, &small_config(), now);
    // Before the server's parameters there is no credit at all.
    assert_eq!(c.stream_send(0, b"x", false), Err(Error::StreamLimit));
    let mut s = Connection::new(Version::Qmux01, Framing::WebSocket, Role::Server, &small_config(), now);
    c.recv(&drain(&mut s), now).expect("server params");
    for i in 0..4u64 {
        assert_eq!(c.stream_send(4 * i, b"x", false), Ok(1));
    }
    assert_eq!(c.stream_send(16, b"x", false), Err(Error::StreamLimit));
    // Not ours to open, and not ours to send on.
    assert_eq!(c.stream_send(1, b"x", false), Err(Error::InvalidStreamState(1)));
    assert_eq!(c.stream_recv(2, &mut [0; 4]), Err(Error::InvalidStreamState(2)));
    assert_eq!(c.stream_capacity(40), Err(Error::InvalidStreamState(40)));
}

#[test]
fn a_stopped_stream_still_returns_connection_credit() {
    let now = Instant::now();
    for v in VERSIONS {
        for f in FRAMINGS {
            let mut s = server(v, f, now);
            // Four unidirectional streams (the limit), each filled to its 20 KiB window and
            // stopped after its first record: 80 KiB in all, past the 64 KiB connection window,
            // which is fine since we dropped (and credited) every byte.
            for id in [2u64, 6, 10, 14] {
                let mut b = Vec::new();
                put_stream(&mut b, id, 0, &[1; 8000], false);
                s.recv(&client_record(v, f, &b), now).expect("data");
                s.stream_shutdown(id, crate::Shutdown::Read, 3).expect("stop");
                // The client keeps sending until it sees STOP_SENDING, within the window.
                let mut b = Vec::new();
                put_stream(&mut b, id, 8000, &[1; 12480], false);
                s.recv(&client_record(v, f, &b), now).expect("dropped data");
            }
            for id in [2u64, 6, 10, 14] {
                let mut b = Vec::new();
                put_varints(&mut b, frame::RESET_STREAM, &[id, 3, 20480]);
                s.recv(&client_record(v, f, &b), now).expect("reset");
            }
            assert!(s.local_error().is_none());
            assert!(s.streams.map.is_empty(), "the streams go once their final sizes are known");
        }
    }
}

/// STOP_SENDING does not lift a stream's flow-control limit: data past it is FLOW_CONTROL_ERROR
/// (RFC 9000 §4.1), whether the peer sends it before or after it sees STOP_SENDING.
#[test]
fn a_stopped_stream_keeps_its_limit() {
    let now = Instant::now();
    for v in VERSIONS {
        for f in FRAMINGS {
            let mut s = server(v, f, now);
            let mut b = Vec::new();
            put_stream(&mut b, 2, 0, &[1; 8000], false);
            s.recv(&client_record(v, f, &b), now).expect("data");
            s.stream_shutdown(2, crate::Shutdown::Read, 3).expect("stop");
            let mut r = Ok(0);
            for i in 1..4u64 {
                let mut b = Vec::new();
                put_stream(&mut b, 2, i * 8000, &[1; 8000], false);
                r = s.recv(&client_record(v, f, &b), now);
                if r.is_err() {
                    break;
                }
            }
            assert_eq!(r, Err(Error::Transport(FLOW_CONTROL_ERROR)), "{v:?} {f:?}");
        }
    }
}

/// A Close frame's body (RFC 6455 §5.5.1, §7.4): a one-byte body or a status code a peer may
/// not send is a protocol error (1002), a reason that is not UTF-8 invalid data (1007); a good
/// Close is answered 1000.
#[test]
fn websocket_close_frames_are_checked() {
    let now = Instant::now();
    let close = |body: &[u8]| {
        let mut b = bytes::BytesMut::new();
        ws::encode(&mut b, ws::OP_CLOSE, body, Some([7, 7, 7, 7]));
        b
    };
    let mut reason_bad_utf8 = 1000u16.to_be_bytes().to_vec();
    reason_bad_utf8.extend_from_slice(&[0xff, 0xfe]);
    let cases: [(&str, Vec<u8>, Option<u16>); 8] = [
        ("empty", Vec::new(), None),
        ("1000 with a reason", [&1000u16.to_be_bytes()[..], b"bye"].concat(), None),
        ("4000", 4000u16.to_be_bytes().to_vec(), None),
        ("one byte", vec![0x03], Some(1002)),
        ("1005", 1005u16.to_be_bytes().to_vec(), Some(1002)),
        ("1006", 1006u16.to_be_bytes().to_vec(), Some(1002)),
        ("999", 999u16.to_be_bytes().to_vec(), Some(1002)),
        ("reason not UTF-8", reason_bad_utf8, Some(1007)),
    ];
    for v in VERSIONS {
        for (what, body, status) in &cases {
            let mut s = server(v, Framing::WebSocket, now);
            let r = s.recv(&close(body), now);
            let out = drain(&mut s);
            let answered = u16::from_be_bytes([out[out.len() - 2], out[out.len() - 1]]);
            assert_eq!(&out[out.len() - 4..out.len() - 2], &[0x88, 0x02], "{what}: a Close last");
            match status {
                None => {
                    assert!(r.is_ok(), "{what}: {r:?}");
                    assert_eq!(answered, 1000, "{what}");
                }
                Some(code) => {
                    assert_eq!(r, Err(Error::Transport(PROTOCOL_VIOLATION)), "{what}");
                    assert_eq!(answered, *code, "{what}");
                }
            }
        }
    }
}
