//! WebSocket framing (RFC 6455 §5), written by hand as an incremental push parser: bytes go in
//! in any split, whole messages and control frames come out, and every buffer is bounded.

use bytes::BytesMut;

pub(crate) const OP_CONT: u8 = 0x0;
pub(crate) const OP_TEXT: u8 = 0x1;
pub(crate) const OP_BINARY: u8 = 0x2;
pub(crate) const OP_CLOSE: u8 = 0x8;
pub(crate) const OP_PING: u8 = 0x9;
pub(crate) const OP_PONG: u8 = 0xa;

/// RFC 6455 §7.4.1 status codes.
pub(crate) const STATUS_NORMAL: u16 = 1000;
pub(crate) const STATUS_PROTOCOL: u16 = 1002;
pub(crate) const STATUS_UNSUPPORTED: u16 = 1003;
pub(crate) const STATUS_INVALID_DATA: u16 = 1007;
pub(crate) const STATUS_TOO_BIG: u16 = 1009;

/// RFC 6455 §5.5: control frames carry at most 125 bytes.
const MAX_CONTROL: u64 = 125;

/// What a complete WebSocket frame or message means to QMux.
#[derive(Debug)]
pub(crate) enum Event {
    /// A whole binary message (reassembled from its fragments).
    Binary(Vec<u8>),
    Ping(Vec<u8>),
    Pong,
    Close,
}

/// A WebSocket-level violation: the close status and a reason.
pub(crate) type WsError = (u16, &'static str);

struct Header {
    fin: bool,
    opcode: u8,
    mask: Option<[u8; 4]>,
    len: u64,
    got: u64,
}

pub(crate) struct Decoder {
    /// We are the server: RFC 6455 §5.1, client frames are masked and server frames are not.
    server: bool,
    /// The largest message we accept.
    limit: usize,
    head: [u8; 14],
    head_len: usize,
    cur: Option<Header>,
    /// The binary message being reassembled, if a fragment of it has arrived.
    msg: Option<Vec<u8>>,
    ctrl: Vec<u8>,
}

impl Decoder {
    pub(crate) fn new(server: bool, limit: usize) -> Self {
        Decoder { server, limit, head: [0; 14], head_len: 0, cur: None, msg: None, ctrl: Vec::new() }
    }

    /// Consumes bytes from `data` until one event is complete or `data` runs out: how many
    /// bytes were used and the event, if any.
    pub(crate) fn next(&mut self, data: &[u8]) -> Result<(usize, Option<Event>), WsError> {
        let mut used = 0;
        if self.cur.is_none() {
            used = self.read_header(data)?;
            if self.cur.is_none() {
                return Ok((used, None));
            }
        }
        let Some(h) = self.cur.as_mut() else { return Ok((used, None)) };
        let want = usize::try_from(h.len - h.got).unwrap_or(usize::MAX);
        let take = want.min(data.len() - used);
        let chunk = &data[used..used + take];
        let dst = if h.opcode >= OP_CLOSE { &mut self.ctrl } else { self.msg.get_or_insert_with(Vec::new) };
        let start = dst.len();
        dst.extend_from_slice(chunk);
        if let Some(mask) = h.mask {
            for (i, b) in dst[start..].iter_mut().enumerate() {
                *b ^= mask[((h.got + i as u64) % 4) as usize];
            }
        }
        h.got += take as u64;
        used += take;
        if h.got < h.len {
            return Ok((used, None));
        }
        let (fin, opcode) = (h.fin, h.opcode);
        self.cur = None;
        let event = match opcode {
            OP_PING => Some(Event::Ping(std::mem::take(&mut self.ctrl))),
            OP_PONG => {
                self.ctrl.clear();
                Some(Event::Pong)
            }
            OP_CLOSE => {
                let body = std::mem::take(&mut self.ctrl);
                check_close(&body)?;
                Some(Event::Close)
            }
            _ if fin => Some(Event::Binary(self.msg.take().unwrap_or_default())),
            _ => None,
        };
        Ok((used, event))
    }

    /// Reads the frame header (RFC 6455 §5.2) as far as `data` allows; sets `cur` once whole.
    fn read_header(&mut self, data: &[u8]) -> Result<usize, WsError> {
        let mut used = 0;
        loop {
            let need = self.header_len();
            if self.head_len >= need {
                break;
            }
            let Some(b) = data.get(used) else { return Ok(used) };
            self.head[self.head_len] = *b;
            self.head_len += 1;
            used += 1;
            if self.head_len == 2 {
                self.check_first_two()?;
            }
        }
        let h = &self.head;
        let masked = h[1] & 0x80 != 0;
        let (len, at) = match h[1] & 0x7f {
            126 => (u64::from(u16::from_be_bytes([h[2], h[3]])), 4),
            127 => (u64::from_be_bytes([h[2], h[3], h[4], h[5], h[6], h[7], h[8], h[9]]), 10),
            n => (u64::from(n), 2),
        };
        let mask = masked.then(|| [h[at], h[at + 1], h[at + 2], h[at + 3]]);
        let (fin, opcode) = (h[0] & 0x80 != 0, h[0] & 0x0f);
        self.head_len = 0;
        if len >> 63 != 0 {
            return Err((STATUS_PROTOCOL, "64-bit length with its top bit set"));
        }
        if opcode >= OP_CLOSE {
            if len > MAX_CONTROL {
                return Err((STATUS_PROTOCOL, "control frame over 125 bytes"));
            }
        } else {
            let have = self.msg.as_ref().map_or(0, Vec::len) as u64;
            if have.saturating_add(len) > self.limit as u64 {
                return Err((STATUS_TOO_BIG, "message over max_record_size"));
            }
        }
        self.cur = Some(Header { fin, opcode, mask, len, got: 0 });
        Ok(used)
    }

    /// How long the header is, as far as the bytes read so far tell.
    fn header_len(&self) -> usize {
        if self.head_len < 2 {
            return 2;
        }
        let mask = if self.head[1] & 0x80 != 0 { 4 } else { 0 };
        match self.head[1] & 0x7f {
            126 => 4 + mask,
            127 => 10 + mask,
            _ => 2 + mask,
        }
    }

    /// RFC 6455 §5.2, §5.4, §5.5: no extensions were negotiated, so RSV bits are 0; opcodes;
    /// fragmentation; masking direction.
    fn check_first_two(&self) -> Result<(), WsError> {
        let (b0, b1) = (self.head[0], self.head[1]);
        if b0 & 0x70 != 0 {
            return Err((STATUS_PROTOCOL, "reserved bits set"));
        }
        let (fin, opcode) = (b0 & 0x80 != 0, b0 & 0x0f);
        match opcode {
            OP_TEXT => return Err((STATUS_UNSUPPORTED, "text message")),
            OP_BINARY if self.msg.is_some() => {
                return Err((STATUS_PROTOCOL, "new message inside a fragmented one"))
            }
            OP_CONT if self.msg.is_none() => return Err((STATUS_PROTOCOL, "continuation without a message")),
            OP_BINARY | OP_CONT => {}
            OP_CLOSE | OP_PING | OP_PONG if !fin => {
                return Err((STATUS_PROTOCOL, "fragmented control frame"))
            }
            OP_CLOSE | OP_PING | OP_PONG => {}
            _ => return Err((STATUS_PROTOCOL, "unknown opcode")),
        }
        if (b1 & 0x80 != 0) != self.server {
            return Err((STATUS_PROTOCOL, "wrong masking for the direction"));
        }
        Ok(())
    }
}

/// A Close frame's body (RFC 6455 §5.5.1): empty, or a status code a peer may send (§7.4.1,
/// §7.4.2: not 1004-1006 or 1015, which are reserved or only for local use, nor anything below
/// 3000 that is not defined) followed by a UTF-8 reason. A bad code or a one-byte body is a
/// protocol error (1002); a reason that is not UTF-8 is invalid data (1007, §8.1).
fn check_close(body: &[u8]) -> Result<(), WsError> {
    let [hi, lo, reason @ ..] = body else {
        return match body.len() {
            0 => Ok(()),
            _ => Err((STATUS_PROTOCOL, "close frame body of one byte")),
        };
    };
    let code = u16::from_be_bytes([*hi, *lo]);
    let sendable = matches!(code, 1000..=1003 | 1007..=1014 | 3000..=4999);
    if !sendable {
        return Err((STATUS_PROTOCOL, "close frame with a status code a peer may not send"));
    }
    if std::str::from_utf8(reason).is_err() {
        return Err((STATUS_INVALID_DATA, "close frame reason not UTF-8"));
    }
    Ok(())
}

/// Appends one unfragmented frame; `mask` for client frames (RFC 6455 §5.3).
pub(crate) fn encode(out: &mut BytesMut, opcode: u8, payload: &[u8], mask: Option<[u8; 4]>) {
    out.reserve(payload.len() + 14);
    out.extend_from_slice(&[0x80 | opcode]);
    let m = if mask.is_some() { 0x80 } else { 0 };
    let len = payload.len();
    if len < 126 {
        out.extend_from_slice(&[m | len as u8]);
    } else if len <= 0xffff {
        out.extend_from_slice(&[m | 126]);
        out.extend_from_slice(&(len as u16).to_be_bytes());
    } else {
        out.extend_from_slice(&[m | 127]);
        out.extend_from_slice(&(len as u64).to_be_bytes());
    }
    match mask {
        Some(key) => {
            out.extend_from_slice(&key);
            out.extend(payload.iter().enumerate().map(|(i, b)| b ^ key[i % 4]));
        }
        None => out.extend_from_slice(payload),
    }
}

/// The largest header [`encode`] writes for a payload of `len` bytes.
pub(crate) fn header_len(len: usize, masked: bool) -> usize {
    let base = if len < 126 {
        2
    } else if len <= 0xffff {
        4
    } else {
        10
    };
    base + if masked { 4 } else { 0 }
}

/// Mask keys: a xorshift generator seeded once from the system's CSPRNG (RFC 6455 §10.3 asks
/// for unpredictable keys so that page scripts cannot choose the bytes on the wire; this
/// generator serves a native client, where that attack does not apply, and only needs keys
/// to vary).
pub(crate) struct MaskGen(u64);

impl MaskGen {
    pub(crate) fn new() -> Self {
        use ring::rand::SecureRandom;
        let mut seed = [0u8; 8];
        let _ = ring::rand::SystemRandom::new().fill(&mut seed);
        MaskGen(u64::from_le_bytes(seed) | 1)
    }

    pub(crate) fn next(&mut self) -> [u8; 4] {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        (x as u32).to_le_bytes()
    }
}
