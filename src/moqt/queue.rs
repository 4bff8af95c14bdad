//! What waits in the Pump for quiche: each stream's chunks in order ([`StreamQueue`]), and
//! handing them over ([`send_queue`]) under the unsent budget and the delivery deadlines,
//! looking ahead at what quiche holds and the round trip ([`Ahead`]).

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use bytes::Bytes;
use runtime::Transport;
use session::{Session, StreamId};
use tracing::debug;

/// Bytes of one stream write waiting for quiche.
#[derive(Debug)]
pub(crate) struct Chunk {
    pub(crate) data: Bytes,
    pub(crate) fin: bool,
    /// Object bytes under a delivery timeout: not handed to quiche after this.
    pub(crate) expires: Option<Instant>,
}

/// How long an object handed to quiche now takes to arrive: what quiche holds unsent
/// (`limit` minus the budget left) at the measured rate, then a round trip. A sender with
/// data waiting has a full window in flight, so the round trip includes the time what is in
/// flight and queued on the path takes (the smoothed RTT grows with the bottleneck's queue);
/// it is a one-way delay too long, which errs on the side of fresher media.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ahead {
    pub(crate) limit: usize,
    pub(crate) rtt: Duration,
    pub(crate) secs_per_byte: f64,
}

impl Ahead {
    pub(crate) fn delay(&self, budget: usize) -> Duration {
        let held = self.limit.saturating_sub(budget) as f64;
        Duration::from_secs_f64(held * self.secs_per_byte) + self.rtt
    }
}

/// One stream's bytes waiting for quiche, in order, and how many.
#[derive(Debug, Default)]
pub(crate) struct StreamQueue {
    pub(crate) chunks: VecDeque<Chunk>,
    pub(crate) bytes: usize,
}

impl StreamQueue {
    pub(crate) fn push(&mut self, chunk: Chunk) {
        self.bytes += chunk.data.len();
        self.chunks.push_back(chunk);
    }
}

/// What [`send_queue`] did with a stream's queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sent {
    /// Bytes remain, waiting for flow control or for MAX_STREAMS.
    Waiting,
    /// All of it went to quiche.
    All,
    /// The stream is gone (the peer stopped it, or quiche refused it).
    Gone,
    /// The next bytes are object data past its delivery timeout: the stream is to be reset
    /// (quiche has it open: a RESET_STREAM needs a stream).
    Expired,
}

/// Hands stream `id`'s queued bytes to quiche (on QUIC stream `quic`) in order, as far as it
/// takes them and, when given, `budget` allows (it is spent), checking each object's delivery
/// timeout before passing it on (draft-22 §5.2): object bytes that would arrive after their
/// deadline are not passed on: a stream not started yet behind what quiche holds and a round
/// trip ([`Ahead`]), a stream under way a round trip from now. A stream that hits the peer's
/// stream limit sets `limited`, since every later stream of its type would too.
pub(crate) fn send_queue(
    conn: &mut impl Transport,
    session: &mut Session,
    (id, quic, over_wt): (StreamId, u64, bool),
    queue: &mut StreamQueue,
    (now, ahead): (Instant, Option<Ahead>),
    limited: &mut bool,
    mut budget: Option<&mut usize>,
) -> Sent {
    // Whether quiche's room was looked at: once per visit, not per chunk (two per object). If
    // it runs out partway through the stream's chunks, the next offer costs at most one
    // DATA_BLOCKED for this write.
    let mut room_checked = false;
    loop {
        // When the next object would arrive. For a stream not started yet (its header, which
        // has no deadline, still in front) all that quiche holds is ahead of it; a stream
        // under way is not held back by that (what quiche holds is mostly its own earlier
        // bytes), only by the round trip, so that a group started in time goes on while its
        // objects can still arrive in time.
        let starting = queue.chunks.front().is_some_and(|c| c.expires.is_none());
        let leaves = match (ahead, budget.as_deref()) {
            (Some(a), Some(&b)) if starting => now + a.delay(b),
            (Some(a), Some(_)) => now + a.rtt,
            _ => now,
        };
        // The next deadline: the front chunk's, or behind a stream's headers (no deadline of
        // their own) its first object's, so that a stream not started yet is reset rather
        // than opened for an object already too late.
        let due = queue.chunks.iter().take(3).find_map(|c| c.expires);
        if due.is_some_and(|at| at <= leaves) {
            // Opens the stream in quiche if it never was, so that it can be reset.
            return match conn.stream_send(quic, &[], false) {
                Err(quiche::Error::StreamLimit) => {
                    *limited = true;
                    Sent::Waiting
                }
                _ => Sent::Expired,
            };
        }
        let Some(Chunk { data, fin, .. }) = queue.chunks.front_mut() else { break };
        let take = budget.as_deref().map_or(data.len(), |b| data.len().min(*b));
        if take == 0 && !data.is_empty() {
            return Sent::Waiting; // quiche holds enough unsent: the rest waits for its sends
        }
        // quiche would take nothing now (flow control or the congestion window): not offered,
        // since every `stream_send` past the peer's MAX_DATA makes quiche send DATA_BLOCKED
        // again, which the peer acknowledges, which makes the next write. A stream quiche does
        // not know yet is offered (that opens it).
        if take > 0 && !room_checked {
            room_checked = true;
            if conn.stream_capacity(quic).is_ok_and(|cap| cap == 0) {
                return Sent::Waiting;
            }
        }
        match conn.stream_send_bytes(quic, data.slice(..take), *fin && take == data.len()) {
            Ok(n) => {
                if let Some(b) = budget.as_deref_mut() {
                    *b -= n;
                }
                queue.bytes -= n;
                if n < data.len() {
                    // Flow control or the budget took part of it: the rest waits.
                    let _ = data.split_to(n);
                    return Sent::Waiting;
                }
                queue.chunks.pop_front();
            }
            // No credit yet: the bytes wait here, in order, for MAX_DATA or MAX_STREAM_DATA.
            Err(quiche::Error::Done) => return Sent::Waiting,
            // The peer's stream limit: they wait for MAX_STREAMS.
            Err(quiche::Error::StreamLimit) => {
                *limited = true;
                return Sent::Waiting;
            }
            Err(quiche::Error::StreamStopped(code)) => {
                // Over WebTransport the code is in HTTP/3's space (even on a server
                // bidirectional stream, whose QUIC ID is the session's).
                let code = if over_wt { webtransport::app_code(code) } else { code };
                session.on_stop_sending(id, code);
                return Sent::Gone;
            }
            Err(e) => {
                debug!(stream = id.0, error = %e, "stream_send");
                return Sent::Gone;
            }
        }
    }
    Sent::All
}
