//! The connection's life: creation, input, output, timers, closing and datagrams.

use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};

use crate::frame::{self, code};
use crate::input::{Fail, Input};
use crate::params::TransportParams;
use crate::{
    streams, varint, ws, Config, Connection, ConnectionError, Error, Framing, Role, State, Stats, Version,
};

/// Control frames (pongs, MAX_* updates, pings) may take the output this far past
/// `max_output`; beyond that the peer is not reading and the connection is dropped.
const CONTROL_SLACK: usize = 64 << 10;
/// A close frame's reason is cut to this many bytes.
const MAX_REASON: usize = 1024;

/// Idle timeout and keep-alive state.
///
/// The idle timer runs from the last complete record or WebSocket frame received. Draft -02
/// §7.1 also resets it on sending, but a sender cannot tell a dead peer from a slow one that
/// way; instead we send QX_PING (-01/-02) when nothing was heard for a third of the timeout,
/// which a live peer answers (and the browser client times out the same way). On -00, which
/// has no QX_PING, a server's WebSocket Pings draw Pongs; -00 directly on TCP has neither.
pub(crate) struct Timers {
    /// The effective idle timeout (RFC 9000 §10.1: the smaller of the non-zero values).
    pub(crate) idle: Option<Duration>,
    pub(crate) last_recv: Instant,
    /// When to check whether we sent anything lately (-01/-02 QX_PING).
    pub(crate) ping_check: Option<Instant>,
    /// Something was sent since the last check.
    pub(crate) sent: bool,
    pub(crate) ws_ping: Option<Instant>,
    /// The highest QX_PING request number sent and received.
    pub(crate) ping_sent: Option<u64>,
    pub(crate) ping_recv: Option<u64>,
    pings: bool,
}

impl Timers {
    fn new(config: &Config, version: Version, framing: Framing, role: Role, now: Instant) -> Self {
        let ws_ping =
            (framing == Framing::WebSocket && role == Role::Server && !config.ws_ping_interval.is_zero())
                .then(|| now.checked_add(config.ws_ping_interval))
                .flatten();
        let mut t = Timers {
            idle: None,
            last_recv: now,
            ping_check: None,
            sent: true,
            ws_ping,
            ping_sent: None,
            ping_recv: None,
            pings: version != Version::Qmux00,
        };
        t.set_idle_ms(u64::try_from(config.max_idle_timeout.as_millis()).unwrap_or(u64::MAX), 0, now);
        t
    }

    pub(crate) fn set_idle(&mut self, local: &TransportParams, peer: &TransportParams, now: Instant) {
        self.set_idle_ms(local.max_idle_timeout, peer.max_idle_timeout, now);
    }

    fn set_idle_ms(&mut self, a: u64, b: u64, now: Instant) {
        // Capped at 2^32 ms (49 days), so that instants never overflow.
        let ms = [a, b].into_iter().filter(|v| *v > 0).min().map(|v| v.min(u64::from(u32::MAX)));
        self.idle = ms.map(Duration::from_millis);
        // draft-ietf-quic-qmux-01 §7: QX_PING keeps the connection active. We check every
        // sixth of the timeout, so a ping leaves at most a third of it after our last send.
        self.ping_check = self.idle.filter(|_| self.pings).map(|d| now + d / 6);
    }
}

impl Connection {
    /// A connection of `version` framed as `framing`, playing `role`, offering `config`, at
    /// `now`; its transport parameters are queued at once.
    pub fn new(version: Version, framing: Framing, role: Role, config: &Config, now: Instant) -> Self {
        let local = TransportParams::from_config(config, version);
        let mut c = Connection {
            version,
            framing,
            role,
            config: config.clone(),
            input: Input::new(framing, role, version, local.max_record_size),
            streams: streams::Streams::new(&local),
            local,
            peer: TransportParams::absent(version),
            established: false,
            state: State::Open,
            timed_out: false,
            local_error: None,
            peer_error: None,
            out: BytesMut::new(),
            out_taken: 0,
            scratch: Vec::new(),
            mask: (framing == Framing::WebSocket && role == Role::Client).then(ws::MaskGen::new),
            timers: Timers::new(config, version, framing, role, now),
            dgrams: Default::default(),
            stats: Stats::default(),
        };
        // draft-ietf-quic-qmux-01 §4.2: our parameters go first, without waiting for the peer's.
        let mut p = Vec::new();
        c.local.encode(version, &mut p);
        c.control(|s| frame::put_bytes(s, frame::QX_TRANSPORT_PARAMETERS, &p));
        c
    }

    /// Bytes read from the socket. A violation closes the connection (CONNECTION_CLOSE, then a
    /// WebSocket Close) and returns [`Error::Transport`]; after our own close, input is discarded
    /// (draft-ietf-quic-qmux-02 §7.2).
    pub fn recv(&mut self, data: &[u8], now: Instant) -> Result<usize, Error> {
        if self.is_closed() {
            return Err(Error::Closed);
        }
        if self.state == State::Closing {
            return Ok(data.len());
        }
        self.stats.recv_bytes += data.len() as u64;
        let result = self.recv_inner(data, now);
        if let Err(f) = result {
            self.fail(f);
            return Err(Error::Transport(f.code));
        }
        Ok(data.len())
    }

    /// The peer closed the byte stream (draft-ietf-quic-qmux-02 §7: the connection ends).
    pub fn recv_eof(&mut self, _now: Instant) {
        self.state = State::Closed;
    }

    /// At most `max` bytes of what is to be written to the byte stream, in order.
    pub fn take_output(&mut self, max: usize) -> Option<Bytes> {
        if self.out.is_empty() || max == 0 {
            return None;
        }
        let n = max.min(self.out.len());
        let bytes = self.out.split_to(n).freeze();
        self.out_taken += n as u64;
        self.stats.sent_bytes += n as u64;
        // draft-ietf-quic-qmux-02 §7.1: bytes drained from the send buffer are what we see of
        // our sending.
        self.timers.sent = true;
        self.collect_sent();
        Some(bytes)
    }

    /// Whether bytes wait to be written.
    pub fn has_output(&self) -> bool {
        !self.out.is_empty()
    }

    /// When `on_timeout` is due next (idle timeout, keep-alive ping).
    pub fn timeout_instant(&self) -> Option<Instant> {
        if self.state != State::Open {
            return None;
        }
        let idle = self.timers.idle.map(|d| self.timers.last_recv + d);
        [idle, self.timers.ping_check, self.timers.ws_ping].into_iter().flatten().min()
    }

    /// Acts on the timers due at `now`.
    pub fn on_timeout(&mut self, now: Instant) {
        if self.state != State::Open {
            return;
        }
        if self.timers.idle.is_some_and(|d| now >= self.timers.last_recv + d) {
            // draft-ietf-quic-qmux-02 §7.2: on idle timeout no QMux frame is sent.
            self.timed_out = true;
            self.state = State::Closed;
            return;
        }
        if let (Some(at), Some(idle)) = (self.timers.ping_check, self.timers.idle) {
            if now >= at {
                // Nothing sent lately (the peer's timer), or nothing heard for a third of the
                // timeout (ours: a live peer answers).
                if !self.timers.sent || now >= self.timers.last_recv + idle / 3 {
                    let seq = self.timers.ping_sent.map_or(0, |s| s + 1);
                    self.timers.ping_sent = Some(seq);
                    self.control(|s| frame::put_varints(s, frame::QX_PING_REQUEST, &[seq]));
                }
                self.timers.sent = false;
                self.timers.ping_check = Some(now + idle / 6);
            }
        }
        if self.timers.ws_ping.is_some_and(|at| now >= at) {
            self.write_ws(ws::OP_PING, &[]);
            self.timers.ws_ping = now.checked_add(self.config.ws_ping_interval);
        }
    }

    /// Whether the peer's transport parameters arrived (ours go at once).
    pub fn is_established(&self) -> bool {
        self.established
    }

    /// Closed by the peer, by EOF or idle, or by us once the close frames were all taken.
    pub fn is_closed(&self) -> bool {
        self.state == State::Closed || (self.state == State::Closing && self.out.is_empty())
    }

    /// Whether the connection closed because it was idle too long.
    pub fn is_timed_out(&self) -> bool {
        self.timed_out
    }

    /// How the peer closed the connection, if it did.
    pub fn peer_error(&self) -> Option<&ConnectionError> {
        self.peer_error.as_ref()
    }

    /// How we closed the connection, if we did.
    pub fn local_error(&self) -> Option<&ConnectionError> {
        self.local_error.as_ref()
    }

    /// APPLICATION_CLOSE when `app`, else CONNECTION_CLOSE (RFC 9000 §19.19), then a WebSocket
    /// Close with status 1000. `Err(Done)` once closing or closed.
    pub fn close(&mut self, app: bool, code: u64, reason: &[u8]) -> Result<(), Error> {
        if self.state != State::Open {
            return Err(Error::Done);
        }
        self.close_with(app, code, reason, ws::STATUS_NORMAL);
        Ok(())
    }

    pub(crate) fn fail(&mut self, f: Fail) {
        if self.state == State::Open {
            self.close_with(false, f.code, f.reason.as_bytes(), f.ws_status);
        }
    }

    fn close_with(&mut self, app: bool, code: u64, reason: &[u8], ws_status: u16) {
        let reason = &reason[..reason.len().min(MAX_REASON)];
        self.local_error = Some(ConnectionError { is_app: app, error_code: code, reason: reason.to_vec() });
        let mut s = std::mem::take(&mut self.scratch);
        s.clear();
        frame::put_close(&mut s, app, code, reason);
        self.write_record(&s);
        self.scratch = s;
        self.write_ws_close(ws_status);
        self.state = State::Closing;
    }

    /// Wraps `frames` as one record for the framing and appends it to the output.
    pub(crate) fn write_record(&mut self, frames: &[u8]) {
        match (self.framing, self.version) {
            (Framing::WebSocket, _) => {
                let mask = self.mask.as_mut().map(ws::MaskGen::next);
                ws::encode(&mut self.out, ws::OP_BINARY, frames, mask);
            }
            (Framing::Records, Version::Qmux00) => self.out.extend_from_slice(frames),
            (Framing::Records, _) => {
                let mut size = Vec::with_capacity(8);
                varint::put(&mut size, frames.len() as u64);
                self.out.extend_from_slice(&size);
                self.out.extend_from_slice(frames);
            }
        }
        self.stats.sent_records += 1;
    }

    /// How many bytes [`Self::write_record`] adds around `len` bytes of frames.
    pub(crate) fn record_overhead(&self, len: usize) -> usize {
        match (self.framing, self.version) {
            (Framing::WebSocket, _) => ws::header_len(len, self.mask.is_some()),
            (Framing::Records, Version::Qmux00) => 0,
            (Framing::Records, _) => varint::len(len as u64),
        }
    }

    /// Queues one record of control frames built by `build`. The output may pass `max_output`
    /// by a bounded slack for these; past it the connection is dropped.
    pub(crate) fn control(&mut self, build: impl FnOnce(&mut Vec<u8>)) {
        if self.state != State::Open {
            return;
        }
        let mut s = std::mem::take(&mut self.scratch);
        s.clear();
        build(&mut s);
        self.write_record(&s);
        self.scratch = s;
        self.check_overflow();
    }

    pub(crate) fn write_ws(&mut self, opcode: u8, payload: &[u8]) {
        if self.framing == Framing::WebSocket && self.state == State::Open {
            let mask = self.mask.as_mut().map(ws::MaskGen::next);
            ws::encode(&mut self.out, opcode, payload, mask);
            self.check_overflow();
        }
    }

    pub(crate) fn write_ws_close(&mut self, status: u16) {
        if self.framing == Framing::WebSocket {
            let mask = self.mask.as_mut().map(ws::MaskGen::next);
            ws::encode(&mut self.out, ws::OP_CLOSE, &status.to_be_bytes(), mask);
        }
    }

    fn check_overflow(&mut self) {
        if self.out.len() > self.config.max_output.saturating_add(CONTROL_SLACK) {
            self.out.clear();
            self.state = State::Closed;
            self.local_error = Some(ConnectionError {
                is_app: false,
                error_code: code::INTERNAL_ERROR,
                reason: b"output not read".to_vec(),
            });
        }
    }

    /// Sends a datagram (if the peer accepts datagrams of its size).
    pub fn dgram_send(&mut self, data: &[u8]) -> Result<(), Error> {
        if self.state != State::Open {
            return Err(Error::Closed);
        }
        let max = self.dgram_max_writable_len().ok_or(Error::InvalidState)?;
        if data.len() > max {
            return Err(Error::BufferTooShort);
        }
        let frame_len = 1 + varint::len(data.len() as u64) + data.len();
        if self.out.len() + self.record_overhead(frame_len) + frame_len > self.config.max_output {
            // RFC 9221 §5: a blocked sender may drop datagrams.
            return Err(Error::Done);
        }
        let mut s = std::mem::take(&mut self.scratch);
        s.clear();
        frame::put_bytes(&mut s, frame::DATAGRAM_LEN, data);
        self.write_record(&s);
        self.scratch = s;
        Ok(())
    }

    /// The oldest datagram received, copied into `out`: its length.
    pub fn dgram_recv(&mut self, out: &mut [u8]) -> Result<usize, Error> {
        self.dgrams.pop(out)
    }

    /// The largest datagram payload the peer accepts in a DATAGRAM frame with a Length, alone
    /// in a record (draft-ietf-quic-qmux-02 §10.1: bounded by max_datagram_frame_size and
    /// max_record_size); `None` before the peer's parameters, when it accepts none, or on -00.
    pub fn dgram_max_writable_len(&self) -> Option<usize> {
        if self.version == Version::Qmux00 || !self.established || self.peer.max_datagram_frame_size == 0 {
            return None;
        }
        let limit = self.peer.max_datagram_frame_size.min(self.peer.max_record_size);
        let limit = usize::try_from(limit).unwrap_or(usize::MAX).min(self.config.max_output);
        let p = limit.checked_sub(1 + varint::len(limit as u64))?;
        Some(p)
    }

    /// What crossed the byte stream so far.
    pub fn stats(&self) -> Stats {
        self.stats
    }

    /// The QMux version spoken.
    pub fn version(&self) -> Version {
        self.version
    }

    /// The peer's transport parameters (their absent values until they arrive).
    pub fn peer_params(&self) -> &TransportParams {
        &self.peer
    }
}
