//! Incoming bytes → records → frames: the three ways QMux arrives (WebSocket messages, records
//! on a byte stream, -00's bare frames on a byte stream), each parsed incrementally so that any
//! split of the input gives the same result, and each bounded by our record size.

use std::time::Instant;

use crate::frame::{self, code, Frame, Violation};
use crate::params::TransportParams;
use crate::ws::{self, Event};
use crate::{varint, Connection, ConnectionError, Framing, Role, State, Version};

/// A violation found while reading: the transport error code, a reason and the WebSocket
/// close status (RFC 6455 §7.4.1) that goes with it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Fail {
    pub(crate) code: u64,
    pub(crate) reason: &'static str,
    pub(crate) ws_status: u16,
}

impl From<Violation> for Fail {
    fn from((code, reason): Violation) -> Self {
        Fail { code, reason, ws_status: ws::STATUS_PROTOCOL }
    }
}

fn ws_fail((status, reason): ws::WsError) -> Fail {
    let code = match status {
        // draft-ietf-quic-qmux-01 §5.2: a record over max_record_size.
        ws::STATUS_TOO_BIG => code::FRAME_ENCODING_ERROR,
        _ => code::PROTOCOL_VIOLATION,
    };
    Fail { code, reason, ws_status: status }
}

pub(crate) enum Input {
    Ws(ws::Decoder),
    Records(RecordReader),
    /// -00 directly on a byte stream: frames back to back (draft-ietf-quic-qmux-00 §4).
    Frames {
        buf: Vec<u8>,
        limit: usize,
    },
}

impl Input {
    pub(crate) fn new(framing: Framing, role: Role, version: Version, limit: u64) -> Self {
        let limit = usize::try_from(limit).unwrap_or(usize::MAX);
        match (framing, version) {
            (Framing::WebSocket, _) => Input::Ws(ws::Decoder::new(role == Role::Server, limit)),
            (Framing::Records, Version::Qmux00) => Input::Frames { buf: Vec::new(), limit },
            (Framing::Records, _) => {
                Input::Records(RecordReader { head: Vec::new(), size: None, buf: Vec::new(), limit })
            }
        }
    }
}

/// draft-ietf-quic-qmux-01 §3.2: Size, then that many bytes of Frames.
pub(crate) struct RecordReader {
    head: Vec<u8>,
    size: Option<usize>,
    buf: Vec<u8>,
    limit: usize,
}

impl RecordReader {
    fn next(&mut self, data: &[u8]) -> Result<(usize, Option<Vec<u8>>), Fail> {
        let mut used = 0;
        let size = loop {
            if let Some(s) = self.size {
                break s;
            }
            let Some(b) = data.get(used) else { return Ok((used, None)) };
            self.head.push(*b);
            used += 1;
            if let Some((v, _)) = varint::get(&self.head) {
                self.head.clear();
                if v > self.limit as u64 {
                    // draft-ietf-quic-qmux-01 §5.2.
                    return Err((code::FRAME_ENCODING_ERROR, "record over max_record_size").into());
                }
                self.size = Some(v as usize);
            }
        };
        let take = (size - self.buf.len()).min(data.len() - used);
        self.buf.extend_from_slice(&data[used..used + take]);
        used += take;
        if self.buf.len() < size {
            return Ok((used, None));
        }
        self.size = None;
        Ok((used, Some(std::mem::take(&mut self.buf))))
    }
}

impl Connection {
    /// Feeds `data` through the framing; stops at the first violation or once closed.
    pub(crate) fn recv_inner(&mut self, data: &[u8], now: Instant) -> Result<(), Fail> {
        let mut pos = 0;
        while pos < data.len() && self.state == State::Open {
            match &mut self.input {
                Input::Ws(dec) => {
                    let (n, event) = dec.next(&data[pos..]).map_err(ws_fail)?;
                    pos += n;
                    if let Some(event) = event {
                        self.on_ws_event(event, now)?;
                    }
                }
                Input::Records(rr) => {
                    let (n, record) = rr.next(&data[pos..])?;
                    pos += n;
                    if let Some(record) = record {
                        self.on_record(&record, now)?;
                    }
                }
                Input::Frames { buf, .. } => {
                    buf.extend_from_slice(&data[pos..]);
                    pos = data.len();
                    self.on_bare_frames(now)?;
                }
            }
        }
        Ok(())
    }

    fn on_ws_event(&mut self, event: Event, now: Instant) -> Result<(), Fail> {
        self.timers.last_recv = now;
        match event {
            Event::Binary(msg) => self.on_record(&msg, now)?,
            // RFC 6455 §5.5.2: a Pong for each Ping, right away, so that the output does not
            // depend on how the input was split (the output bound stops a flood).
            Event::Ping(payload) => self.write_ws(ws::OP_PONG, &payload),
            Event::Pong => {}
            // RFC 6455 §5.5.1: the peer closes the WebSocket; answer with a Close.
            Event::Close => {
                self.write_ws_close(ws::STATUS_NORMAL);
                self.state = State::Closed;
            }
        }
        Ok(())
    }

    /// One record's Frames (one WebSocket message: draft-ietf-quic-qmux-01 §3.2 with the
    /// message boundary as Size).
    fn on_record(&mut self, record: &[u8], now: Instant) -> Result<(), Fail> {
        self.stats.recv_records += 1;
        self.timers.last_recv = now;
        let mut pos = 0;
        while pos < record.len() && self.state == State::Open {
            let Some((f, n)) = frame::decode(&record[pos..], self.version, true)? else {
                return Err((code::FRAME_ENCODING_ERROR, "truncated frame").into());
            };
            pos += n;
            self.on_frame(f, now)?;
        }
        Ok(())
    }

    /// -00 on a byte stream: every complete frame in the buffer; a partial one waits, as long
    /// as it can still fit in max_frame_size (draft-ietf-quic-qmux-00 §5.2).
    fn on_bare_frames(&mut self, now: Instant) -> Result<(), Fail> {
        let Input::Frames { buf, limit } = &mut self.input else { return Ok(()) };
        let (data, limit) = (std::mem::take(buf), *limit);
        let mut pos = 0;
        let result = loop {
            if self.state != State::Open {
                break Ok(());
            }
            match frame::decode(&data[pos..], self.version, false) {
                Ok(Some((f, n))) if n > limit => {
                    let _ = f;
                    break Err((code::FRAME_ENCODING_ERROR, "frame over max_frame_size").into());
                }
                Ok(Some((f, n))) => {
                    pos += n;
                    self.stats.recv_records += 1;
                    self.timers.last_recv = now;
                    if let Err(e) = self.on_frame(f, now) {
                        break Err(e);
                    }
                }
                Ok(None) if data.len() - pos > limit => {
                    break Err((code::FRAME_ENCODING_ERROR, "frame over max_frame_size").into());
                }
                Ok(None) => break Ok(()),
                Err(e) => break Err(e.into()),
            }
        };
        if let Input::Frames { buf, .. } = &mut self.input {
            buf.extend_from_slice(&data[pos..]);
        }
        result
    }

    /// One frame, in the connection's state.
    fn on_frame(&mut self, f: Frame<'_>, now: Instant) -> Result<(), Fail> {
        let is_params = matches!(f, Frame::TransportParams(_));
        // draft-ietf-quic-qmux-01 §4.2: QX_TRANSPORT_PARAMETERS first and only first
        // (-00 §4.2: first; -02 §4.2 signals misuse with PROTOCOL_VIOLATION). PADDING before
        // it is tolerated, as the browser client does.
        if is_params == self.established && !matches!(f, Frame::Padding) {
            let code = match self.version {
                Version::Qmux02 => code::PROTOCOL_VIOLATION,
                _ => code::TRANSPORT_PARAMETER_ERROR,
            };
            let reason = if is_params {
                "second QX_TRANSPORT_PARAMETERS"
            } else {
                "first frame is not QX_TRANSPORT_PARAMETERS"
            };
            return Err((code, reason).into());
        }
        match f {
            Frame::Padding | Frame::Blocked => {}
            Frame::TransportParams(p) => self.on_params(p, now)?,
            Frame::Close { app, code, reason } => {
                self.peer_error =
                    Some(ConnectionError { is_app: app, error_code: code, reason: reason.to_vec() });
                self.state = State::Closed;
            }
            Frame::Ping { response: false, seq } => {
                // draft-ietf-quic-qmux-02 §4.3: request numbers strictly increase.
                if self.version == Version::Qmux02 && self.timers.ping_recv.is_some_and(|p| seq <= p) {
                    return Err((code::PROTOCOL_VIOLATION, "QX_PING sequence not increasing").into());
                }
                self.timers.ping_recv = Some(self.timers.ping_recv.map_or(seq, |p| p.max(seq)));
                // draft-ietf-quic-qmux-01 §4.3: echo it. Each request gets its own response
                // (coalescing would make the output depend on how the input was split).
                self.control(|s| frame::put_varints(s, frame::QX_PING_RESPONSE, &[seq]));
            }
            Frame::Ping { response: true, seq } => {
                // draft-ietf-quic-qmux-02 §4.3: a response echoes a number we sent.
                if self.version == Version::Qmux02 && self.timers.ping_sent.is_none_or(|s| seq > s) {
                    return Err((code::PROTOCOL_VIOLATION, "QX_PING response to no request").into());
                }
            }
            Frame::Datagram { data, len } => self.on_datagram(data, len)?,
            Frame::ResetStream { id, code, final_size } => self.on_reset_stream(id, code, final_size)?,
            Frame::StopSending { id, code } => self.on_stop_sending(id, code)?,
            Frame::Stream { id, offset, data, fin } => self.on_stream(id, offset, data, fin)?,
            Frame::MaxData(max) => self.streams.peer_max_data = self.streams.peer_max_data.max(max),
            Frame::MaxStreamData { id, max } => self.on_max_stream_data(id, max)?,
            Frame::MaxStreams { bidi, max } => {
                let m = &mut self.streams.peer_max[usize::from(!bidi)];
                *m = (*m).max(max);
            }
        }
        Ok(())
    }

    fn on_params(&mut self, p: &[u8], now: Instant) -> Result<(), Fail> {
        let peer = TransportParams::decode(p, self.version)
            .map_err(|r| Fail::from((code::TRANSPORT_PARAMETER_ERROR, r)))?;
        self.streams.peer_max_data = peer.initial_max_data;
        self.streams.peer_max = [peer.initial_max_streams_bidi, peer.initial_max_streams_uni];
        self.peer = peer;
        self.established = true;
        self.timers.set_idle(&self.local, &self.peer, now);
        Ok(())
    }

    /// RFC 9221 §3: DATAGRAM frames need our parameter, and fit in it.
    fn on_datagram(&mut self, d: &[u8], len_field: bool) -> Result<(), Fail> {
        let frame_len = 1 + if len_field { varint::len(d.len() as u64) } else { 0 } + d.len();
        if self.local.max_datagram_frame_size == 0 {
            return Err((code::PROTOCOL_VIOLATION, "DATAGRAM not negotiated").into());
        }
        if frame_len as u64 > self.local.max_datagram_frame_size {
            return Err((code::PROTOCOL_VIOLATION, "DATAGRAM over max_datagram_frame_size").into());
        }
        // draft-ietf-quic-qmux-01 §6: received datagrams may be dropped; the oldest go first.
        self.stats.dgrams_dropped += self.dgrams.push(d);
        Ok(())
    }
}
