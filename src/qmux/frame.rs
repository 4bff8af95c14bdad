//! The QUIC v1 frames QMux carries (draft-ietf-quic-qmux-01 §4, RFC 9000 §19), the QMux
//! frames (QX_TRANSPORT_PARAMETERS, QX_PING) and DATAGRAM (RFC 9221 §4).

use crate::varint::{self, Reader};
use crate::Version;

/// Transport error codes (RFC 9000 §20.1) that QMux uses.
pub mod code {
    /// No error: a clean close.
    pub const NO_ERROR: u64 = 0x0;
    /// The endpoint failed on its own.
    pub const INTERNAL_ERROR: u64 = 0x1;
    /// The peer sent more than its flow-control credit.
    pub const FLOW_CONTROL_ERROR: u64 = 0x3;
    /// The peer opened more streams than allowed.
    pub const STREAM_LIMIT_ERROR: u64 = 0x4;
    /// A frame for a stream in a state that does not take it.
    pub const STREAM_STATE_ERROR: u64 = 0x5;
    /// A stream's final size changed or was passed.
    pub const FINAL_SIZE_ERROR: u64 = 0x6;
    /// A frame badly encoded.
    pub const FRAME_ENCODING_ERROR: u64 = 0x7;
    /// Transport parameters missing, repeated or invalid.
    pub const TRANSPORT_PARAMETER_ERROR: u64 = 0x8;
    /// Any other violation of the protocol.
    pub const PROTOCOL_VIOLATION: u64 = 0xa;
}

pub(crate) const PADDING: u64 = 0x00;
pub(crate) const RESET_STREAM: u64 = 0x04;
pub(crate) const STOP_SENDING: u64 = 0x05;
pub(crate) const STREAM_OFF_LEN: u64 = 0x0e;
pub(crate) const MAX_DATA: u64 = 0x10;
pub(crate) const MAX_STREAM_DATA: u64 = 0x11;
pub(crate) const MAX_STREAMS_BIDI: u64 = 0x12;
pub(crate) const MAX_STREAMS_UNI: u64 = 0x13;
pub(crate) const CONNECTION_CLOSE: u64 = 0x1c;
pub(crate) const APPLICATION_CLOSE: u64 = 0x1d;
pub(crate) const DATAGRAM: u64 = 0x30;
pub(crate) const DATAGRAM_LEN: u64 = 0x31;
/// draft-ietf-quic-qmux-01 §4.2.
pub(crate) const QX_TRANSPORT_PARAMETERS: u64 = 0x3f51_5330_0d0a_0d0a;
/// draft-ietf-quic-qmux-01 §4.3 (-00 left the codepoints TBD).
pub(crate) const QX_PING_REQUEST: u64 = 0x348c_6752_9ef8_c7bd;
pub(crate) const QX_PING_RESPONSE: u64 = 0x348c_6752_9ef8_c7be;

/// One decoded frame; byte fields borrow from the record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Frame<'a> {
    Padding,
    ResetStream {
        id: u64,
        code: u64,
        final_size: u64,
    },
    StopSending {
        id: u64,
        code: u64,
    },
    Stream {
        id: u64,
        offset: u64,
        data: &'a [u8],
        fin: bool,
    },
    MaxData(u64),
    MaxStreamData {
        id: u64,
        max: u64,
    },
    MaxStreams {
        bidi: bool,
        max: u64,
    },
    /// DATA_BLOCKED, STREAM_DATA_BLOCKED, STREAMS_BLOCKED: informational, ignored.
    Blocked,
    Close {
        app: bool,
        code: u64,
        reason: &'a [u8],
    },
    TransportParams(&'a [u8]),
    Ping {
        response: bool,
        seq: u64,
    },
    /// `len`: the frame had a Length field (type 0x31).
    Datagram {
        data: &'a [u8],
        len: bool,
    },
}

/// Why a frame could not be decoded: the transport error code and a reason.
pub(crate) type Violation = (u64, &'static str);

const TRUNCATED: Violation = (code::FRAME_ENCODING_ERROR, "truncated frame");

/// Decodes the frame at the front of `buf`. `bounded`: `buf` ends at a record (or WebSocket
/// message) boundary, which ends frames that omit their Length (draft-ietf-quic-qmux-01 §3.2);
/// otherwise (-00 directly on the byte stream) `Ok(None)` means more bytes are needed.
pub(crate) fn decode(
    buf: &[u8],
    version: Version,
    bounded: bool,
) -> Result<Option<(Frame<'_>, usize)>, Violation> {
    let mut r = Reader::new(buf);
    match decode_inner(&mut r, version, bounded) {
        Ok(Some(f)) => Ok(Some((f, r.pos))),
        Ok(None) if bounded => Err(TRUNCATED),
        Ok(None) => Ok(None),
        Err(e) => Err(e),
    }
}

fn decode_inner<'a>(
    r: &mut Reader<'a>,
    version: Version,
    bounded: bool,
) -> Result<Option<Frame<'a>>, Violation> {
    macro_rules! v {
        () => {
            match r.varint() {
                Some(v) => v,
                None => return Ok(None),
            }
        };
    }
    let ty = v!();
    let frame = match ty {
        PADDING => Frame::Padding,
        RESET_STREAM => Frame::ResetStream { id: v!(), code: v!(), final_size: v!() },
        STOP_SENDING => Frame::StopSending { id: v!(), code: v!() },
        0x08..=0x0f => return decode_stream(r, ty, bounded),
        MAX_DATA => Frame::MaxData(v!()),
        MAX_STREAM_DATA => Frame::MaxStreamData { id: v!(), max: v!() },
        MAX_STREAMS_BIDI | MAX_STREAMS_UNI => {
            let max = v!();
            // RFC 9000 §19.11.
            if max > crate::params::MAX_STREAMS_LIMIT {
                return Err((code::FRAME_ENCODING_ERROR, "MAX_STREAMS above 2^60"));
            }
            Frame::MaxStreams { bidi: ty == MAX_STREAMS_BIDI, max }
        }
        0x14 | 0x16 | 0x17 => {
            v!();
            Frame::Blocked
        }
        0x15 => {
            v!();
            v!();
            Frame::Blocked
        }
        CONNECTION_CLOSE | APPLICATION_CLOSE => {
            let code = v!();
            if ty == CONNECTION_CLOSE {
                v!(); // Frame Type (RFC 9000 §19.19)
            }
            let len = v!();
            let Some(reason) = r.bytes(len) else { return Ok(None) };
            Frame::Close { app: ty == APPLICATION_CLOSE, code, reason }
        }
        QX_TRANSPORT_PARAMETERS => {
            let len = v!();
            let Some(p) = r.bytes(len) else { return Ok(None) };
            Frame::TransportParams(p)
        }
        QX_PING_REQUEST | QX_PING_RESPONSE if version != Version::Qmux00 => {
            Frame::Ping { response: ty == QX_PING_RESPONSE, seq: v!() }
        }
        // draft-ietf-quic-qmux-01 §10.1 maps RFC 9221; -00 does not.
        DATAGRAM if version != Version::Qmux00 && bounded => Frame::Datagram { data: r.rest(), len: false },
        DATAGRAM_LEN if version != Version::Qmux00 => {
            let len = v!();
            let Some(data) = r.bytes(len) else { return Ok(None) };
            Frame::Datagram { data, len: true }
        }
        // draft-ietf-quic-qmux-01 §4: the prohibited frames (PING, ACK, CRYPTO, NEW_TOKEN,
        // connection IDs, path validation, HANDSHAKE_DONE) and RFC 9000 §12.4: unknown types.
        _ => return Err((code::FRAME_ENCODING_ERROR, "prohibited or unknown frame type")),
    };
    Ok(Some(frame))
}

/// RFC 9000 §19.8; without a Length the frame ends at the record boundary
/// (draft-ietf-quic-qmux-01 §3.2). On -00 over a plain byte stream there is no boundary, so
/// such a frame cannot be delimited: FRAME_ENCODING_ERROR.
fn decode_stream<'a>(r: &mut Reader<'a>, ty: u64, bounded: bool) -> Result<Option<Frame<'a>>, Violation> {
    let Some(id) = r.varint() else { return Ok(None) };
    let offset = if ty & 0x04 != 0 {
        let Some(o) = r.varint() else { return Ok(None) };
        o
    } else {
        0
    };
    let data = if ty & 0x02 != 0 {
        let Some(len) = r.varint() else { return Ok(None) };
        let Some(d) = r.bytes(len) else { return Ok(None) };
        d
    } else if bounded {
        r.rest()
    } else {
        return Err((code::FRAME_ENCODING_ERROR, "STREAM without Length outside a record"));
    };
    if offset.saturating_add(data.len() as u64) > varint::MAX {
        return Err((code::FRAME_ENCODING_ERROR, "STREAM beyond 2^62"));
    }
    Ok(Some(Frame::Stream { id, offset, data, fin: ty & 0x01 != 0 }))
}

/// The size of a STREAM frame's header (type, id, offset, length) for `len` payload bytes.
pub(crate) fn stream_header_len(id: u64, offset: u64, len: usize) -> usize {
    1 + varint::len(id) + varint::len(offset) + varint::len(len as u64)
}

pub(crate) fn put_stream(out: &mut Vec<u8>, id: u64, offset: u64, data: &[u8], fin: bool) {
    varint::put(out, STREAM_OFF_LEN | u64::from(fin));
    varint::put(out, id);
    varint::put(out, offset);
    varint::put(out, data.len() as u64);
    out.extend_from_slice(data);
}

/// A frame made only of varints (RESET_STREAM, STOP_SENDING, MAX_*, QX_PING).
pub(crate) fn put_varints(out: &mut Vec<u8>, ty: u64, fields: &[u64]) {
    varint::put(out, ty);
    for f in fields {
        varint::put(out, *f);
    }
}

/// CONNECTION_CLOSE (Frame Type 0: not tied to a frame) or APPLICATION_CLOSE (RFC 9000 §19.19).
pub(crate) fn put_close(out: &mut Vec<u8>, app: bool, code: u64, reason: &[u8]) {
    if app {
        put_varints(out, APPLICATION_CLOSE, &[code]);
    } else {
        put_varints(out, CONNECTION_CLOSE, &[code, 0]);
    }
    varint::put(out, reason.len() as u64);
    out.extend_from_slice(reason);
}

pub(crate) fn put_bytes(out: &mut Vec<u8>, ty: u64, data: &[u8]) {
    varint::put(out, ty);
    varint::put(out, data.len() as u64);
    out.extend_from_slice(data);
}
