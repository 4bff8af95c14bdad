//! Streams (RFC 9000 §2, §3) and their flow control (RFC 9000 §4), with quiche's API: the
//! caller's calls, and the frames that change them.

use std::collections::VecDeque;

use bytes::{Buf, BytesMut};

use crate::frame::{self, code, Violation};
use crate::params::TransportParams;
use crate::{Connection, Error, Role, Shutdown, State, StreamMap};

pub(crate) const BIDI: usize = 0;
pub(crate) const UNI: usize = 1;

/// Our sending half of a stream.
pub(crate) struct Send {
    pub(crate) off: u64,
    pub(crate) max: u64,
    pub(crate) fin: bool,
    pub(crate) reset: bool,
    pub(crate) stopped: Option<u64>,
    /// The application was told of `stopped` (by `stream_send` or `stream_shutdown`): only then
    /// can the stream go, as in quiche, where the application sees StreamStopped first.
    pub(crate) stop_told: bool,
    /// The output position after our last frame for it (FIN or RESET_STREAM).
    pub(crate) done_at: Option<u64>,
}

/// Our receiving half of a stream. QMux delivers in order (draft-ietf-quic-qmux-01 §4.1), so
/// the buffer is a plain queue, bounded by `max`.
pub(crate) struct Recv {
    pub(crate) buf: BytesMut,
    /// Bytes received (the next expected offset), and bytes the application read.
    pub(crate) off: u64,
    pub(crate) read: u64,
    pub(crate) max: u64,
    window: u64,
    pub(crate) fin: Option<u64>,
    pub(crate) reset: Option<u64>,
    /// We sent STOP_SENDING: incoming data is counted and dropped.
    pub(crate) stopped: bool,
    /// Nothing more for the application: FIN or reset delivered, or reading shut down.
    pub(crate) done: bool,
}

impl Recv {
    fn new(window: u64) -> Self {
        Recv {
            buf: BytesMut::new(),
            off: 0,
            read: 0,
            max: window,
            window,
            fin: None,
            reset: None,
            stopped: false,
            done: false,
        }
    }

    fn readable(&self) -> bool {
        !self.done && (!self.buf.is_empty() || self.reset.is_some() || self.fin == Some(self.read))
    }
}

#[derive(Default)]
pub(crate) struct Stream {
    pub(crate) send: Option<Send>,
    pub(crate) recv: Option<Recv>,
    in_readable: bool,
}

pub(crate) struct Streams {
    pub(crate) map: StreamMap,
    /// Per direction ([`BIDI`], [`UNI`]): streams we opened, streams the peer opened, the
    /// peer's limit for us (MAX_STREAMS), our limit for the peer, and peer streams closed.
    pub(crate) local_next: [u64; 2],
    pub(crate) peer_next: [u64; 2],
    pub(crate) peer_max: [u64; 2],
    pub(crate) local_max: [u64; 2],
    local_initial: [u64; 2],
    peer_closed: [u64; 2],
    /// Connection flow control (RFC 9000 §4.1): stream bytes sent and the peer's limit;
    /// received, our limit, read (or dropped), and our window.
    pub(crate) sent_data: u64,
    pub(crate) peer_max_data: u64,
    recv_data: u64,
    recv_max: u64,
    consumed: u64,
    window: u64,
    readable: VecDeque<u64>,
    /// (output position, stream) for streams whose last frame waits in the output.
    pending: VecDeque<(u64, u64)>,
}

impl Streams {
    pub(crate) fn new(local: &TransportParams) -> Self {
        let initial = [local.initial_max_streams_bidi, local.initial_max_streams_uni];
        Streams {
            map: StreamMap::default(),
            local_next: [0; 2],
            peer_next: [0; 2],
            peer_max: [0; 2],
            local_max: initial,
            local_initial: initial,
            peer_closed: [0; 2],
            sent_data: 0,
            peer_max_data: 0,
            recv_data: 0,
            recv_max: local.initial_max_data,
            consumed: 0,
            window: local.initial_max_data,
            readable: VecDeque::new(),
            pending: VecDeque::new(),
        }
    }
}

/// RFC 9000 §2.1: bit 1 is the direction, the rest above bit 1 the index.
fn dir(id: u64) -> usize {
    ((id >> 1) & 1) as usize
}

fn index(id: u64) -> u64 {
    id >> 2
}

impl Connection {
    /// RFC 9000 §2.1: bit 0 says who opened the stream (0 = client).
    fn is_local(&self, id: u64) -> bool {
        (id & 1 == 1) == (self.role == Role::Server)
    }

    fn new_stream(&self, id: u64) -> Stream {
        let (l, p, local) = (&self.local, &self.peer, self.is_local(id));
        let bidi = dir(id) == BIDI;
        let send_max = match (local, bidi) {
            (true, true) => Some(p.initial_max_stream_data_bidi_remote),
            (true, false) => Some(p.initial_max_stream_data_uni),
            (false, true) => Some(p.initial_max_stream_data_bidi_local),
            (false, false) => None,
        };
        let recv_window = match (local, bidi) {
            (true, true) => Some(l.initial_max_stream_data_bidi_local),
            (true, false) => None,
            (false, true) => Some(l.initial_max_stream_data_bidi_remote),
            (false, false) => Some(l.initial_max_stream_data_uni),
        };
        Stream {
            send: send_max.map(|max| Send {
                off: 0,
                max,
                fin: false,
                reset: false,
                stopped: None,
                stop_told: false,
                done_at: None,
            }),
            recv: recv_window.map(Recv::new),
            in_readable: false,
        }
    }

    /// The stream a peer's frame names: `recv` for frames about the peer's sending half
    /// (STREAM, RESET_STREAM), else about ours (STOP_SENDING, MAX_STREAM_DATA). Opens peer
    /// streams up to it (RFC 9000 §3.2). `Ok(false)`: a stream already gone, to ignore.
    fn frame_stream(&mut self, id: u64, recv: bool) -> Result<bool, Violation> {
        let (local, d, i) = (self.is_local(id), dir(id), index(id));
        // RFC 9000 §19.4, §19.5, §19.8, §19.10: the wrong half of a unidirectional stream.
        if d == UNI && local == recv {
            return Err((code::STREAM_STATE_ERROR, "frame for the wrong half of a unidirectional stream"));
        }
        if local {
            if i >= self.streams.local_next[d] {
                return Err((code::STREAM_STATE_ERROR, "frame for a stream we have not opened"));
            }
        } else {
            // RFC 9000 §4.6.
            if i >= self.streams.local_max[d] {
                return Err((code::STREAM_LIMIT_ERROR, "stream beyond our MAX_STREAMS"));
            }
            while self.streams.peer_next[d] <= i {
                let n = self.streams.peer_next[d];
                let new_id = (n << 2) | ((d as u64) << 1) | (id & 1);
                let s = self.new_stream(new_id);
                self.streams.map.insert(new_id, s);
                self.streams.peer_next[d] += 1;
            }
        }
        Ok(self.streams.map.contains_key(&id))
    }

    /// A STREAM frame (RFC 9000 §19.8), in order (draft-ietf-quic-qmux-01 §4.1).
    pub(crate) fn on_stream(
        &mut self,
        id: u64,
        offset: u64,
        data: &[u8],
        fin: bool,
    ) -> Result<(), Violation> {
        if !self.frame_stream(id, true)? {
            // A stream already gone (its final size known and reached): its bytes still count
            // against, and then return, connection credit.
            let n = data.len() as u64;
            if self.streams.recv_data + n > self.streams.recv_max {
                return Err((code::FLOW_CONTROL_ERROR, "STREAM beyond flow control"));
            }
            self.streams.recv_data += n;
            self.consume(n);
            return Ok(());
        }
        let st = &mut self.streams;
        let Some(r) = st.map.get_mut(&id).and_then(|s| s.recv.as_mut()) else { return Ok(()) };
        if r.reset.is_some() {
            return Ok(());
        }
        if offset != r.off {
            return Err((code::PROTOCOL_VIOLATION, "STREAM data out of order"));
        }
        let end = offset + data.len() as u64;
        // RFC 9000 §4.5.
        if r.fin.is_some_and(|f| end > f || (fin && end != f)) {
            return Err((code::FINAL_SIZE_ERROR, "STREAM past or changing its final size"));
        }
        // RFC 9000 §4.1.
        if end > r.max || st.recv_data + data.len() as u64 > st.recv_max {
            return Err((code::FLOW_CONTROL_ERROR, "STREAM beyond flow control"));
        }
        st.recv_data += data.len() as u64;
        r.off = end;
        if fin {
            r.fin = Some(end);
        }
        if r.stopped {
            // Dropped, and its connection credit returned (RFC 9000 §4.5), or the peer's
            // credit would shrink with every stopped stream; the stream's own limit still
            // holds (checked above). Once the final size is known the stream can go.
            self.consume(data.len() as u64);
            if fin {
                self.maybe_collect(id);
            }
        } else {
            r.buf.extend_from_slice(data);
            self.mark_readable(id);
        }
        Ok(())
    }

    /// RESET_STREAM (RFC 9000 §19.4). A final size below what arrived is taken as what arrived:
    /// implementations of drafts up to -02 sent 0 there.
    pub(crate) fn on_reset_stream(&mut self, id: u64, err: u64, final_size: u64) -> Result<(), Violation> {
        if !self.frame_stream(id, true)? {
            return Ok(());
        }
        let st = &mut self.streams;
        let Some(r) = st.map.get_mut(&id).and_then(|s| s.recv.as_mut()) else { return Ok(()) };
        if r.reset.is_some() {
            return Ok(());
        }
        let final_size = final_size.max(r.off);
        if r.fin.is_some_and(|f| f != final_size) {
            return Err((code::FINAL_SIZE_ERROR, "RESET_STREAM changes the final size"));
        }
        let gap = final_size - r.off;
        if final_size > r.max || st.recv_data + gap > st.recv_max {
            return Err((code::FLOW_CONTROL_ERROR, "RESET_STREAM beyond flow control"));
        }
        st.recv_data += gap;
        let dropped = r.buf.len() as u64 + gap;
        r.buf.clear();
        r.off = final_size;
        r.fin = Some(final_size);
        r.reset = Some(err);
        let stopped = r.stopped;
        self.consume(dropped);
        if stopped {
            self.maybe_collect(id);
        } else {
            self.mark_readable(id);
        }
        Ok(())
    }

    /// STOP_SENDING (RFC 9000 §19.5): answered with RESET_STREAM (RFC 9000 §3.5).
    pub(crate) fn on_stop_sending(&mut self, id: u64, err: u64) -> Result<(), Violation> {
        if !self.frame_stream(id, false)? {
            return Ok(());
        }
        let Some(s) = self.streams.map.get_mut(&id).and_then(|s| s.send.as_mut()) else { return Ok(()) };
        if s.fin || s.reset {
            return Ok(());
        }
        s.stopped = Some(err);
        self.reset_send(id, err);
        Ok(())
    }

    pub(crate) fn on_max_stream_data(&mut self, id: u64, max: u64) -> Result<(), Violation> {
        if self.frame_stream(id, false)? {
            if let Some(s) = self.streams.map.get_mut(&id).and_then(|s| s.send.as_mut()) {
                s.max = s.max.max(max);
            }
        }
        Ok(())
    }

    /// Queues RESET_STREAM with our final size and ends our sending half.
    fn reset_send(&mut self, id: u64, err: u64) {
        let Some(s) = self.streams.map.get_mut(&id).and_then(|s| s.send.as_mut()) else { return };
        let off = s.off;
        s.reset = true;
        self.control(|b| frame::put_varints(b, frame::RESET_STREAM, &[id, err, off]));
        self.send_done(id);
    }

    /// Our sending half sent its last frame: the stream can go once the output passes it.
    fn send_done(&mut self, id: u64) {
        let at = self.out_taken + self.out.len() as u64;
        if let Some(s) = self.streams.map.get_mut(&id).and_then(|s| s.send.as_mut()) {
            s.done_at = Some(at);
        }
        self.streams.pending.push_back((at, id));
        self.maybe_collect(id);
    }

    /// After `take_output`: streams whose last frame left.
    pub(crate) fn collect_sent(&mut self) {
        while let Some(&(at, id)) = self.streams.pending.front() {
            if at > self.out_taken {
                break;
            }
            self.streams.pending.pop_front();
            self.maybe_collect(id);
        }
    }

    /// Drops a stream that is done both ways; a peer's stream gives the peer a new one
    /// (RFC 9000 §4.6: MAX_STREAMS as streams close, after half the initial limit).
    fn maybe_collect(&mut self, id: u64) {
        let taken = self.out_taken;
        let Some(s) = self.streams.map.get(&id) else { return };
        let send_done = s
            .send
            .as_ref()
            .is_none_or(|s| s.done_at.is_some_and(|at| at <= taken) && (s.stopped.is_none() || s.stop_told));
        // A receiving half we stopped stays until its final size is known (the peer answers
        // STOP_SENDING with RESET_STREAM, RFC 9000 §3.5), so that its flow-control limit still
        // holds for what the peer sent before it saw STOP_SENDING (RFC 9000 §4.1).
        let recv_done = s.recv.as_ref().is_none_or(|r| r.done && (!r.stopped || r.fin.is_some()));
        if !send_done || !recv_done {
            return;
        }
        self.streams.map.remove(&id);
        if self.is_local(id) {
            return;
        }
        let d = dir(id);
        let st = &mut self.streams;
        st.peer_closed[d] += 1;
        let target = st.peer_closed[d] + st.local_initial[d];
        if target - st.local_max[d] >= (st.local_initial[d] / 2).max(1) {
            st.local_max[d] = target;
            let ty = if d == BIDI { frame::MAX_STREAMS_BIDI } else { frame::MAX_STREAMS_UNI };
            self.control(|b| frame::put_varints(b, ty, &[target]));
        }
    }

    /// The application read (or we dropped) `n` bytes: MAX_DATA once half the window is used.
    fn consume(&mut self, n: u64) {
        let st = &mut self.streams;
        st.consumed += n;
        if st.recv_max - st.consumed <= st.window / 2 && st.window > 0 {
            st.recv_max = st.consumed + st.window;
            let max = st.recv_max;
            self.control(|b| frame::put_varints(b, frame::MAX_DATA, &[max]));
        }
    }

    fn mark_readable(&mut self, id: u64) {
        if let Some(s) = self.streams.map.get_mut(&id) {
            if !s.in_readable && s.recv.as_ref().is_some_and(Recv::readable) {
                s.in_readable = true;
                self.streams.readable.push_back(id);
            }
        }
    }

    /// The next stream with data, a FIN or a reset to read (ours or the peer's); a stream
    /// left partly read comes back after `stream_recv`.
    pub fn stream_readable_next(&mut self) -> Option<u64> {
        while let Some(id) = self.streams.readable.pop_front() {
            if let Some(s) = self.streams.map.get_mut(&id) {
                s.in_readable = false;
                if s.recv.as_ref().is_some_and(Recv::readable) {
                    return Some(id);
                }
            }
        }
        None
    }

    /// Reads in order into `out`: (bytes, FIN reached). `Err(Done)` when nothing is there,
    /// `Err(StreamReset(code))` once after the peer's RESET_STREAM (buffered data is dropped),
    /// `Err(InvalidStreamState)` for a stream without a receiving half or already gone.
    /// Reading returns credit: MAX_STREAM_DATA and MAX_DATA once half a window is read.
    pub fn stream_recv(&mut self, id: u64, out: &mut [u8]) -> Result<(usize, bool), Error> {
        let s = self.streams.map.get_mut(&id).ok_or(Error::InvalidStreamState(id))?;
        let r = s.recv.as_mut().ok_or(Error::InvalidStreamState(id))?;
        if r.done {
            return Err(Error::Done);
        }
        if let Some(err) = r.reset {
            r.done = true;
            self.maybe_collect(id);
            return Err(Error::StreamReset(err));
        }
        let n = out.len().min(r.buf.len());
        out[..n].copy_from_slice(&r.buf[..n]);
        r.buf.advance(n);
        r.read += n as u64;
        let fin = r.fin == Some(r.read);
        if n == 0 && !fin {
            return Err(Error::Done);
        }
        r.done = fin;
        // RFC 9000 §4.2: MAX_STREAM_DATA once half the stream's window is read.
        let update = (r.fin.is_none() && r.max - r.read <= r.window / 2 && r.window > 0).then(|| {
            r.max = r.read + r.window;
            r.max
        });
        if let Some(max) = update {
            self.control(|b| frame::put_varints(b, frame::MAX_STREAM_DATA, &[id, max]));
        }
        self.consume(n as u64);
        self.mark_readable(id);
        if fin {
            self.maybe_collect(id);
        }
        Ok((n, fin))
    }

    /// Opens our stream `id` if new; checks the peer's MAX_STREAMS (RFC 9000 §4.6). Lower
    /// IDs are not created: like quiche, streams are used in order.
    fn open_local(&mut self, id: u64) -> Result<(), Error> {
        let (d, i) = (dir(id), index(id));
        if !self.is_local(id) || i < self.streams.local_next[d] {
            return Ok(());
        }
        if i >= self.streams.peer_max[d] {
            return Err(Error::StreamLimit);
        }
        let s = self.new_stream(id);
        self.streams.map.insert(id, s);
        self.streams.local_next[d] = i + 1;
        Ok(())
    }

    /// How much STREAM payload fits in the next record for `id` at `off`, given `want` bytes
    /// and `out_len` bytes already in the output; `None` when not even a header fits.
    fn chunk(&self, id: u64, off: u64, want: usize, out_len: usize) -> Option<usize> {
        // draft-ietf-quic-qmux-01 §5.2 (-00 §5.2: the frame, header included).
        let rec = usize::try_from(self.peer.max_record_size).unwrap_or(usize::MAX);
        let hdr = frame::stream_header_len(id, off, want.min(rec));
        let room = self.config.max_output.saturating_sub(out_len);
        let room = room.checked_sub(self.record_overhead(rec.min(room)) + hdr)?;
        let by_record = rec.checked_sub(hdr)?;
        Some(want.min(room).min(by_record))
    }

    /// Sends as much of `data` as credit and output room allow, as STREAM frames straight into
    /// the output, in order, each byte once (draft-ietf-quic-qmux-01 §4.1); FIN goes with the
    /// last byte. Opens our stream `id` if new (empty `data` without FIN just opens it).
    /// `Err(Done)`: nothing fits now; `Err(StreamLimit)`: beyond the peer's MAX_STREAMS;
    /// `Err(StreamStopped(code))`: the peer sent STOP_SENDING (we answered with RESET_STREAM);
    /// `Err(InvalidStreamState)`: not a stream we can send on, already finished, or gone.
    pub fn stream_send(&mut self, id: u64, data: &[u8], fin: bool) -> Result<usize, Error> {
        if self.state != State::Open {
            return Err(Error::Closed);
        }
        self.open_local(id)?;
        let s =
            self.streams.map.get(&id).and_then(|s| s.send.as_ref()).ok_or(Error::InvalidStreamState(id))?;
        if let Some(err) = s.stopped {
            return Err(Error::StreamStopped(err));
        }
        if s.fin || s.reset {
            return Err(Error::InvalidStreamState(id));
        }
        let mut taken = 0;
        while let Some(s) = self.streams.map.get(&id).and_then(|s| s.send.as_ref()) {
            let off = s.off;
            let credit = (s.max - off).min(self.streams.peer_max_data.saturating_sub(self.streams.sent_data));
            let want = (data.len() - taken).min(usize::try_from(credit).unwrap_or(usize::MAX));
            let Some(n) = self.chunk(id, off, want, self.out.len()) else { break };
            let last = fin && taken + n == data.len();
            if n == 0 && !last {
                break;
            }
            let mut b = std::mem::take(&mut self.scratch);
            b.clear();
            frame::put_stream(&mut b, id, off, &data[taken..taken + n], last);
            self.write_record(&b);
            self.scratch = b;
            taken += n;
            self.streams.sent_data += n as u64;
            if let Some(s) = self.streams.map.get_mut(&id).and_then(|s| s.send.as_mut()) {
                s.off += n as u64;
                s.fin = last;
            }
            if last {
                self.send_done(id);
                break;
            }
        }
        if taken == 0 && !data.is_empty() {
            return Err(Error::Done);
        }
        if taken == 0
            && fin
            && self.streams.map.get(&id).and_then(|s| s.send.as_ref()).is_some_and(|s| !s.fin)
        {
            return Err(Error::Done);
        }
        Ok(taken)
    }

    /// What [`Self::stream_send`] would take now; `Err(InvalidStreamState)` once the stream is
    /// gone (done both ways, its last frame taken from the output) or never opened.
    pub fn stream_capacity(&self, id: u64) -> Result<usize, Error> {
        let s =
            self.streams.map.get(&id).and_then(|s| s.send.as_ref()).ok_or(Error::InvalidStreamState(id))?;
        if let Some(err) = s.stopped {
            return Err(Error::StreamStopped(err));
        }
        if s.fin || s.reset || self.state != State::Open {
            return Ok(0);
        }
        let mut off = s.off;
        let mut credit = (s.max - off).min(self.streams.peer_max_data.saturating_sub(self.streams.sent_data));
        let (mut total, mut out_len) = (0usize, self.out.len());
        while credit > 0 {
            let want = usize::try_from(credit).unwrap_or(usize::MAX);
            let n = match self.chunk(id, off, want, out_len) {
                Some(n) if n > 0 => n,
                _ => break,
            };
            let hdr = frame::stream_header_len(id, off, n);
            out_len += self.record_overhead(hdr + n) + hdr + n;
            total += n;
            off += n as u64;
            credit -= n as u64;
        }
        Ok(total)
    }

    /// Priorities are accepted and ignored: each frame goes out as it is sent.
    pub fn stream_priority(&mut self, id: u64, _urgency: u8, _incremental: bool) -> Result<(), Error> {
        if self.streams.map.contains_key(&id) {
            Ok(())
        } else {
            Err(Error::InvalidStreamState(id))
        }
    }

    /// `Read`: STOP_SENDING (RFC 9000 §19.5) and drop what arrives; `Write`: RESET_STREAM
    /// with our final size (RFC 9000 §19.4).
    pub fn stream_shutdown(&mut self, id: u64, how: Shutdown, err: u64) -> Result<(), Error> {
        if self.state != State::Open {
            return Err(Error::Closed);
        }
        let s = self.streams.map.get_mut(&id).ok_or(Error::InvalidStreamState(id))?;
        match how {
            Shutdown::Read => {
                let r = s.recv.as_mut().ok_or(Error::InvalidStreamState(id))?;
                if r.done {
                    return Ok(());
                }
                let send_stop = r.fin.is_none() && r.reset.is_none();
                let dropped = r.buf.len() as u64;
                r.buf.clear();
                r.stopped = true;
                r.done = true;
                if send_stop {
                    self.control(|b| frame::put_varints(b, frame::STOP_SENDING, &[id, err]));
                }
                self.consume(dropped);
                self.maybe_collect(id);
            }
            Shutdown::Write => {
                let snd = s.send.as_mut().ok_or(Error::InvalidStreamState(id))?;
                snd.stop_told = true;
                if !snd.fin && !snd.reset {
                    self.reset_send(id, err);
                }
                self.maybe_collect(id);
            }
        }
        Ok(())
    }
}
