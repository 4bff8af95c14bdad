//! The glue between a quiche connection and a sans-IO MoQT [`Session`]: stream bytes, resets,
//! STOP_SENDING and datagrams go into the session; its transmits go out through quiche, with
//! a per-stream queue for what flow control does not take yet. It moves bytes and makes no
//! protocol decision; what to do with requests is the [`RequestHandler`]'s business (the
//! relay's, or our client's).
//!
//! This crate is where MoQT meets the runtime: which ALPN is which draft ([`SERVER_ALPNS`]),
//! how an `h3` connection becomes a WebTransport session with MoQT inside it
//! ([`WebTransportAccept`]), and the [`Pump`] that writes a session's transmits under flow
//! control, shedding and delivery timeouts (ARCHITECTURE.md, "Transports").
//!
//! # The Pump's rules
//!
//! - Order: its queue (`queue.rs`) is keyed by (urgency, order, stream ID); quiche accepts only
//!   about a congestion window of stream data, so this order is what schedules a congested
//!   connection (quiche's priorities alone did not). A descending-order subscription's newer
//!   streams come first among equals; datagrams written together go most urgent first.
//! - Backlog: past `max_backlog_kib` the oldest (least urgent) subgroup streams quiche has opened
//!   are reset CANCELLED until half remains, never an object cut from a stream; the shed streams
//!   are reported (`Written::shed`) so the relay can end a subscription TOO_FAR_BEHIND.
//! - Unsent limit (`Pump::with_unsent_limit`): quiche is handed at most `max_unsent_kib` of
//!   subgroup data it has not sent and no more than `UNSENT_TIME` (100 ms) of the connection's
//!   measured drain rate (never below 4 KiB); on a 15 KB/s path 128 KiB held in quiche would be
//!   eight seconds nothing could drop. Control and request streams are not held back.
//! - Deadlines: bytes carry their deadline (`Transmit::Stream::expires`, a FIN the subgroup's via
//!   `Transmit::DeliverBy`); expired bytes are not handed and their stream is reset
//!   DELIVERY_TIMEOUT (`Written::expired`). A stream not started is not handed when its first
//!   object would arrive late behind what quiche holds, at the measured rate (over intervals with
//!   data waiting; older than 1 s or measured while stalled it predicts nothing), plus a round
//!   trip; a stream under way is cut only when its next object could not arrive a round trip
//!   from now (counting what quiche holds cut too many streams short, `tests/impaired.rs`).
//! - Streams handed in full are reported (`Written::finished`); a path that acknowledged
//!   nothing for 1 s is stalled, and for 3 s after (`Pump::path_stalled`).
//! - Under overload a write does not visit every queued stream: once quiche holds all it may,
//!   the rest wait their turn; nothing is offered when `stream_capacity` is 0 (quiche would send
//!   DATA_BLOCKED at every write, a ping-pong of about 1000 packets a second).
//! - Holds (`hold.rs`): `Transmit::Hold` keeps a stream's later writes until the named streams
//!   are delivered or reset, or 500 ms pass, so PUBLISH_DONE follows its data.
//! - Request streams whose answers are not read: `REQUEST_QUEUE_LIMIT` per stream,
//!   `REQUEST_QUEUE_TOTAL` in all (the longest refused, `Session::shed_request_stream`); the
//!   control stream: `CONTROL_QUEUE_LIMIT`, then CONTROL_MESSAGE_TIMEOUT.
//!
//! # WebTransport acceptance
//!
//! `accept.rs`: `server_alpns` (one per draft, then `h3`); `WebTransportAccept` answers the
//! CONNECT (200 with WT-Protocol; 400 malformed or no draft spoken here, 404 not a WebTransport
//! CONNECT, 429 a second session, 431 an oversized header block) and derives the SETUP the URL
//! implies (authority, path, `?jwt=`/`?token=`/`?cat=` tokens). The session's close becomes
//! CLOSE_WEBTRANSPORT_SESSION, a drain adds DRAIN_WEBTRANSPORT_SESSION beside GOAWAY, and stream
//! codes map into HTTP/3's WebTransport range (draft-ietf-webtrans-http3 §4.4).

#![warn(missing_docs, unreachable_pub)]

mod accept;
mod app;
mod hold;
mod path;
mod queue;
mod wt;

pub use accept::{
    draft_alpns, server_alpns, setup_from_request, setup_from_url, webtransport_handshake, write_h3,
    WebTransportAccept, WebTransportConn, URL_TOKEN_PARAMS,
};
pub use app::MoqtApp;
pub use path::{DELIVERY_SAMPLE, PATH_RECOVERY, PATH_STALL, UNSENT_FLOOR, UNSENT_TIME};

use runtime::Transport;
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, VecDeque};
use std::time::{Duration, Instant};

use ahash::HashMap;

use bytes::Bytes;
use tracing::debug;

use hold::Hold;
use path::PathEstimate;
use queue::{send_queue, Chunk, Sent, StreamQueue};
use session::{Event, Session, StreamId, Transmit};
use wire::Version;
use wt::WtLink;

/// The draft a WebTransport client that offers no WT-Available-Protocols speaks: draft-16,
/// the most widely deployed (a client of a draft without protocol negotiation in
/// WebTransport is an older one).
pub const WEBTRANSPORT_DEFAULT: Version = Version::Draft16;

/// Decides what to answer to the peer's requests.
pub trait RequestHandler {
    /// An event from the session (requests, responses, objects, ...). Answer through `session`.
    fn on_event(&mut self, session: &mut Session, event: Event);
}

/// Moves bytes between one quiche connection and its [`Session`]: stream data, resets,
/// STOP_SENDING and datagrams in; the session's transmits out, with a per-stream queue for
/// what flow control does not take yet.
#[derive(Debug, Default)]
pub struct Pump {
    /// Bytes the session wrote that quiche has not taken yet, per stream, in order, keyed by
    /// (urgency, order, stream ID). quiche takes stream data only up to the congestion
    /// window, so this order is what decides which stream's bytes go first: the most urgent,
    /// then the oldest (order = lowest ID), so that the streams a peer is waiting on to end
    /// (and to grant more streams) go first, and new streams open in ID order; a stream of a
    /// subscription asking for descending group order has order = the inverse of its ID
    /// (newest first among its equals).
    pending: BTreeMap<(u8, u64, StreamId), StreamQueue>,
    /// Emptied queues of streams written out, kept (up to [`SPARE_QUEUES`]) for the next
    /// streams: most objects open a queue and empty it in the same write, so reusing one
    /// saves an allocation and its free per object.
    spare: Vec<VecDeque<Chunk>>,
    /// (urgency, order) of the open streams the session prioritized (others:
    /// ([`DEFAULT_URGENCY`], ID)).
    urgency: HashMap<StreamId, (u8, u64)>,
    /// Most bytes kept in `pending` (`None`: no limit). Past it the oldest data streams are
    /// reset until the backlog is at half the limit: a subscriber that cannot keep up loses
    /// whole subgroup streams (which it sees reset), never objects inside a stream, and its
    /// memory stays bounded.
    backlog_limit: Option<usize>,
    /// Bytes in `pending`.
    queued: usize,
    /// What the connection's path does: what quiche holds unsent and how fast it drains,
    /// the round trip, stalls (`path.rs`).
    path: PathEstimate,
    /// Data streams reset because the backlog was over the limit.
    shed: u64,
    /// Until when data streams handed to quiche in full are reported ([`Written::finished`]):
    /// [`FINISHED_WATCH`] after the last write that left subgroup data waiting here, or shed
    /// or expired a stream (a path that delivers everything at once reports nothing).
    watch_finished: Option<Instant>,
    /// Finished data streams under a subgroup delivery timeout: (deadline, stream), soonest
    /// first.
    deliver_by: BinaryHeap<Reverse<(Instant, StreamId)>>,
    /// Data streams reset with DELIVERY_TIMEOUT.
    timed_out: u64,
    /// Writes held back until data streams are delivered ([`Transmit::Hold`]), oldest first;
    /// a stream's later writes wait behind its hold.
    holds: Vec<Hold>,
    /// Peer requests dropped because their answers piled up.
    dropped_requests: u64,
    /// Datagrams of this write: (urgency, bytes).
    dgrams: Vec<(u8, Bytes)>,
    /// What the write in progress did, which it returns.
    written: Written,
    /// The WebTransport session this MoQT session runs in (`None`: raw QUIC; `wt.rs`).
    wt: Option<Box<WtLink>>,
    /// Peer streams (their QUIC IDs) the application does not read for now
    /// ([`Pump::pause_reading`]).
    paused: Vec<u64>,
}

/// What one [`Pump::write`] did besides handing bytes to the transport: what the relay's
/// TOO_FAR_BEHIND rule counts (streams lost, streams delivered whole meanwhile), and a
/// session closed because its peer did not read it.
#[derive(Debug, Default)]
pub struct Written {
    /// Data streams handed to quiche in full (FIN included), reported only within
    /// [`FINISHED_WATCH`] of data waiting here or a stream shed or expired here: a subscriber
    /// whose streams keep being lost while others of its get through whole is on a thin path,
    /// not too far behind.
    pub finished: Vec<StreamId>,
    /// Data streams reset to shed an over-long backlog (`Pump::with_backlog_limit`).
    pub shed: Vec<StreamId>,
    /// Data streams reset because object bytes queued for them passed their delivery
    /// deadline.
    pub expired: Vec<StreamId>,
    /// The session was closed because the peer did not read its control stream
    /// ([`CONTROL_QUEUE_LIMIT`]).
    pub control_piled: bool,
}

/// quiche's urgency of a stream nobody prioritized (control and request streams).
const DEFAULT_URGENCY: u8 = 127;
/// Emptied stream queues a session keeps for reuse, and the largest (in chunks) it keeps.
const SPARE_QUEUES: usize = 8;
const SPARE_QUEUE_CAPACITY: usize = 64;

/// Stream reset code for a data stream shed from an over-long backlog: CANCELLED (0x1) in
/// every draft (draft-16 §10.4.3, draft-22 §12.5).
pub const RESET_BACKLOG: u64 = 0x1;

/// Bytes of our answers one peer request stream may have waiting for the peer's flow control
/// before the request is dropped (`Session::shed_request_stream`: EXCESSIVE_LOAD), and the
/// most all of them together may have (the longest queues go first). Only a peer that sends
/// requests or REQUEST_UPDATEs and does not read the answers gets there.
pub const REQUEST_QUEUE_LIMIT: usize = 64 * 1024;
/// The most bytes of answers all of one session's peer request streams together may have
/// waiting (see [`REQUEST_QUEUE_LIMIT`]).
pub const REQUEST_QUEUE_TOTAL: usize = 1024 * 1024;

/// Bytes of our control stream that may wait for the peer's flow control before the session
/// is closed (`Pump::close_if_control_piled`). Control messages are never dropped, so a peer
/// that does not read them is closed instead: beyond what QUIC already holds for it, this is
/// thousands of answers, which only a peer that sends requests and reads nothing reaches.
pub const CONTROL_QUEUE_LIMIT: usize = 1024 * 1024;

/// How long after subgroup data waited, or a data stream was lost, a pump reports the streams
/// it hands over whole ([`Written::finished`]): the relay's TOO_FAR_BEHIND window.
pub const FINISHED_WATCH: Duration = Duration::from_secs(10);

/// Stream reset code DELIVERY_TIMEOUT (0x2) in every draft (draft-16 §10.4.3, draft-22 §12.5).
pub const RESET_DELIVERY_TIMEOUT: u64 = 0x2;

impl Pump {
    /// A pump whose queue above flow control holds at most `bytes` (see `backlog_limit`).
    pub fn with_backlog_limit(bytes: usize) -> Self {
        Pump { backlog_limit: Some(bytes), ..Pump::default() }
    }

    /// The same pump handing quiche at most `bytes` of subgroup data it has not sent yet
    /// (see `unsent_limit`).
    pub fn with_unsent_limit(mut self, bytes: usize) -> Self {
        self.path.set_unsent_limit(bytes);
        self
    }

    /// The same pump carrying its session inside WebTransport session `wt` (accepted), with
    /// the HTTP/3 bytes [`webtransport_handshake`] left unsent: what arrived before the session
    /// was accepted goes to it at the first read.
    pub fn with_webtransport(mut self, conn: WebTransportConn) -> Self {
        self.wt = Some(Box::new(WtLink::new(conn)));
        self
    }

    /// How the WebTransport peer closed the session (CLOSE_WEBTRANSPORT_SESSION's code and
    /// reason), once it has: the connection itself then closes with H3_NO_ERROR.
    pub fn webtransport_peer_close(&self) -> Option<&(u64, String)> {
        self.wt.as_ref().and_then(|wt| wt.peer_closed())
    }

    /// Stops reading stream `id`: what arrives on it stays in the transport, which gives the
    /// peer no more flow-control credit for it. A client's backpressure on a stream, and the
    /// tests' peers that do not read what the relay sends them.
    pub fn pause_reading(&mut self, id: StreamId) {
        if let Some(quic) = self.quic_id(id) {
            self.paused.push(quic);
        }
    }

    /// Queues `data` on stream `id` as it is, behind what the session wrote there: bytes the
    /// session would not write (the tests' hostile peers).
    pub fn queue_raw(&mut self, id: StreamId, data: Bytes) {
        self.queue_chunk(id, Chunk { data, fin: false, expires: None });
    }

    /// Whether the WebTransport peer asked to drain the session (DRAIN_WEBTRANSPORT_SESSION).
    pub fn webtransport_draining(&self) -> bool {
        self.wt.as_ref().is_some_and(|wt| wt.draining())
    }

    /// Asks the WebTransport peer to drain (DRAIN_WEBTRANSPORT_SESSION; MoQT's GOAWAY goes
    /// on the control stream as always). Nothing over raw QUIC.
    pub fn drain_webtransport(&mut self) {
        if let Some(wt) = self.wt.as_mut() {
            wt.session.drain();
        }
    }

    /// Feeds everything readable on `conn` into `session`; `buf` is scratch space.
    pub fn read(&mut self, conn: &mut impl Transport, session: &mut Session, buf: &mut [u8]) {
        if let Some(wt) = self.wt.as_mut() {
            for (stream, data, fin) in wt.session.take_early() {
                session.on_stream_data(StreamId(stream), &data, fin);
            }
        }
        while let Some(id) = conn.stream_readable_next() {
            if self.paused.contains(&id) {
                continue;
            }
            loop {
                match conn.stream_recv(id, buf) {
                    Ok((n, fin)) => {
                        match self.wt.as_mut() {
                            None => session.on_stream_data(StreamId(id), &buf[..n], fin),
                            Some(wt) => {
                                if let Some(d) = wt.session.on_stream_data(id, &buf[..n], fin) {
                                    session.on_stream_data(StreamId(d.stream), &buf[d.offset..n], fin);
                                }
                            }
                        }
                        if fin {
                            break;
                        }
                    }
                    Err(quiche::Error::Done) => break,
                    Err(quiche::Error::StreamReset(code)) => {
                        match self.wt.as_mut() {
                            None => session.on_stream_reset(StreamId(id), code),
                            Some(wt) => {
                                if let Some((stream, code)) = wt.session.on_stream_reset(id, code) {
                                    session.on_stream_reset(StreamId(stream), code);
                                }
                            }
                        }
                        break;
                    }
                    Err(e) => {
                        debug!(stream = id, error = %e, "stream_recv");
                        break;
                    }
                }
            }
        }
        while let Ok(n) = conn.dgram_recv(buf) {
            match self.wt.as_ref() {
                None => session.on_datagram(Bytes::copy_from_slice(&buf[..n])),
                Some(wt) => {
                    if let Some(payload) = wt.session.on_datagram(&buf[..n]) {
                        session.on_datagram(Bytes::copy_from_slice(payload));
                    }
                }
            }
        }
        if let Some(wt) = self.wt.as_mut() {
            wt.handle_events(conn);
        }
    }

    /// Writes the WebTransport layer's own output, over WebTransport.
    fn write_webtransport(&mut self, conn: &mut impl Transport) {
        if let Some(wt) = self.wt.as_mut() {
            wt.write(conn);
        }
    }

    /// The QUIC stream that carries session stream `id` (itself over raw QUIC).
    fn quic_id(&self, id: StreamId) -> Option<u64> {
        match &self.wt {
            None => Some(id.0),
            Some(wt) => wt.quic_id(id),
        }
    }

    /// A MoQT stream error code as it goes on the wire.
    fn wire_code(&self, code: u64) -> u64 {
        if self.wt.is_some() {
            webtransport::wire_code(code)
        } else {
            code
        }
    }

    fn shutdown(&self, conn: &mut impl Transport, id: StreamId, how: quiche::Shutdown, code: u64) -> bool {
        match self.quic_id(id) {
            Some(q) => conn.stream_shutdown(q, how, self.wire_code(code)).is_ok(),
            None => false,
        }
    }

    /// Writes the session's transmits into `conn` (what does not fit waits here). `now`
    /// decides which delivery timeouts have passed: object bytes still queued past theirs,
    /// and finished streams not fully acknowledged by theirs, are reset with DELIVERY_TIMEOUT.
    /// (They are checked here, on each write, not on a timer of their own: a connection with
    /// queued data writes on every ACK and on quiche's loss timers.)
    pub fn write(&mut self, conn: &mut impl Transport, session: &mut Session, now: Instant) -> Written {
        // quiche sends nothing during a write (its packets go out at the flush after), so
        // its counts now are its counts throughout.
        let sent = conn.sent_bytes();
        self.path.sample_delivery(|| conn.acked_bytes(), now);
        while let Some(t) = session.poll_transmit() {
            self.pending_transmit(conn, t);
        }
        self.release_holds(conn, now);
        self.write_webtransport(conn);
        // Set when a stream type (the two low bits of the ID) hit the peer's stream limit:
        // every later stream of that type would too, so they are not tried this time.
        let mut limited = [false; 4];
        let mut expired = Vec::new();
        // Streams done here (all of it went, the stream is gone, or it expired).
        let mut done = Vec::new();
        // Peer request streams with answers waiting: (bytes, stream).
        let mut requests = Vec::new();
        let (unsent, ahead) = self.path.look_ahead(sent, self.queued > 0, || conn.rtt(), now);
        let mut budget = unsent.map_or(usize::MAX, |(_, room)| room);
        // Subgroup data left waiting here by this write (the path, not the application, is
        // what limits the drain rate measured from it).
        let mut data_waiting = false;
        // Whether data streams handed in full are reported now (see `watch_finished`).
        let watching = self.watch_finished.is_some_and(|until| now < until);
        let wt = self.wt.as_deref();
        // In key order: control and request streams (urgency 127) before every data stream
        // (128 and up), then the most urgent, oldest data first.
        for (&key, queue) in self.pending.iter_mut() {
            let id = key.2;
            let kind = (id.0 & 3) as usize;
            let fin = queue.chunks.back().is_some_and(|c| c.fin);
            let quic = wt.map_or(Some(id.0), |wt| wt.quic_id(id));
            let before = queue.bytes;
            let data = session.is_local_data_stream(id);
            let sent = match quic {
                _ if limited[kind] => Sent::Waiting,
                None => Sent::Gone,
                Some(quic) => {
                    // Control and request streams are not held back: only subgroup data.
                    let budget = if data { Some(&mut budget) } else { None };
                    let ids = (id, quic, wt.is_some());
                    send_queue(conn, session, ids, queue, (now, ahead), &mut limited[kind], budget)
                }
            };
            match sent {
                Sent::Waiting => {
                    data_waiting |= data;
                    self.queued -= before - queue.bytes;
                    if !id.is_uni() && session.is_peer_stream(id) {
                        requests.push((queue.bytes, id));
                    }
                    // quiche holds all it may: the data streams after this one cannot hand
                    // anything either. Their bytes wait, each checked against its deadline
                    // when its turn comes (not on every write: under overload a connection
                    // has hundreds of streams queued and is written at every ACK).
                    if data && budget == 0 {
                        break;
                    }
                    continue;
                }
                Sent::All if fin => {
                    self.urgency.remove(&id); // all of it went, FIN included: the stream is done here
                    if data && watching {
                        self.written.finished.push(id);
                    }
                }
                Sent::All | Sent::Gone => {}
                Sent::Expired => expired.push(id),
            }
            self.queued -= before;
            done.push(key);
        }
        for key in done {
            self.retire(&key);
        }
        if let Some((_, room)) = unsent {
            self.path.handed(room - budget, data_waiting, now);
        }
        self.reset_expired(conn, session, expired);
        self.expire_finished(conn, now);
        self.drop_piled_requests(session, requests);
        self.close_if_control_piled(session);
        // The session's Reset transmits for those streams: nothing is left to send for them.
        while let Some(t) = session.poll_transmit() {
            self.pending_transmit(conn, t);
        }
        if self.backlog_limit.is_some_and(|limit| self.queued > limit) {
            self.shed_oldest(conn, session);
        }
        if data_waiting || !self.written.shed.is_empty() || !self.written.expired.is_empty() {
            self.watch_finished = Some(now + FINISHED_WATCH);
        }
        self.send_datagrams(conn);
        // The session's close (and anything else the WebTransport layer queued meanwhile).
        self.write_webtransport(conn);
        std::mem::take(&mut self.written)
    }

    /// Resets with DELIVERY_TIMEOUT the data streams whose queued bytes expired.
    fn reset_expired(&mut self, conn: &mut impl Transport, session: &mut Session, expired: Vec<StreamId>) {
        for id in expired {
            self.urgency.remove(&id);
            self.shutdown(conn, id, quiche::Shutdown::Write, RESET_DELIVERY_TIMEOUT);
            // Err: the session had finished the stream (its FIN queued here); quiche's reset
            // above is what the peer sees.
            if let Err(e) = session.reset_data_stream(id, RESET_DELIVERY_TIMEOUT) {
                tracing::trace!(stream = id.0, error = %e, "expired stream already finished");
            }
            self.timed_out += 1;
            self.written.expired.push(id);
        }
    }

    /// Hands the queued datagrams to quiche. They go before stream data in its packets, most
    /// urgent first; best effort by nature: a full queue drops the datagram.
    fn send_datagrams(&mut self, conn: &mut impl Transport) {
        self.dgrams.sort_by_key(|(urgency, _)| *urgency);
        let prefix = self.wt.as_ref().map(|wt| wt.session.datagram_prefix());
        let mut framed = Vec::new();
        for (_, data) in self.dgrams.drain(..) {
            let _ = match &prefix {
                None => conn.dgram_send(&data),
                // One buffer for the whole batch: the HTTP datagram's quarter stream ID, then
                // the object datagram.
                Some(p) => {
                    framed.clear();
                    framed.extend_from_slice(p);
                    framed.extend_from_slice(&data);
                    conn.dgram_send(&framed)
                }
            };
        }
    }

    /// Drops the peer requests whose answers pile up (`requests`: their streams' queued
    /// bytes): every one over [`REQUEST_QUEUE_LIMIT`], then the longest until all together
    /// are within [`REQUEST_QUEUE_TOTAL`]. The session queues the resets.
    fn drop_piled_requests(&mut self, session: &mut Session, mut requests: Vec<(usize, StreamId)>) {
        let mut total: usize = requests.iter().map(|(b, _)| b).sum();
        if total <= REQUEST_QUEUE_TOTAL && requests.iter().all(|(b, _)| *b <= REQUEST_QUEUE_LIMIT) {
            return;
        }
        requests.sort_unstable_by(|a, b| b.cmp(a));
        for (bytes, id) in requests {
            if bytes <= REQUEST_QUEUE_LIMIT && total <= REQUEST_QUEUE_TOTAL {
                break;
            }
            if session.shed_request_stream(id) {
                total -= bytes;
                self.dropped_requests += 1;
            }
        }
    }

    /// Closes the session when more than [`CONTROL_QUEUE_LIMIT`] bytes of our control stream
    /// wait for the peer's flow control: a peer that gives no credit for our control messages
    /// is not reading them, and keeping them for it would let it grow our memory without bound
    /// (by sending requests whose answers pile up). Closed with CONTROL_MESSAGE_TIMEOUT: its
    /// answers to our control messages cannot come, since it does not read them (draft-16
    /// §13.1.1, draft-22 §12.2).
    fn close_if_control_piled(&mut self, session: &mut Session) {
        // Everything queued, control included, is in `queued`: under the limit, nothing to look up.
        if self.queued <= CONTROL_QUEUE_LIMIT {
            return;
        }
        let control = session.local_control_stream();
        let piled = self.pending.get(&self.key(control)).map_or(0, |q| q.bytes);
        if piled > CONTROL_QUEUE_LIMIT && !session.is_closed() {
            debug!(piled, "closing a session whose peer does not read its control stream");
            session.close(session::SessionCode::ControlMessageTimeout, "control stream not read");
            self.written.control_piled = true;
        }
    }

    /// Resets with DELIVERY_TIMEOUT the finished streams past their subgroup deadline that
    /// quiche still holds: not all acknowledged (a fully delivered stream is gone from it).
    fn expire_finished(&mut self, conn: &mut impl Transport, now: Instant) {
        while let Some(&Reverse((at, id))) = self.deliver_by.peek() {
            if at > now {
                break;
            }
            self.deliver_by.pop();
            self.drop_stream(id);
            if self.shutdown(conn, id, quiche::Shutdown::Write, RESET_DELIVERY_TIMEOUT) {
                self.timed_out += 1;
            }
        }
    }

    /// Forgets what is queued for stream `id`.
    fn drop_stream(&mut self, id: StreamId) {
        if let Some(queue) = self.pending.remove(&self.key(id)) {
            self.queued -= queue.bytes;
        }
        self.urgency.remove(&id);
    }

    /// Applies one transmit of the session: stream bytes join their stream's queue, the rest
    /// goes to quiche at once.
    fn pending_transmit(&mut self, conn: &mut impl Transport, t: Transmit) {
        match t {
            Transmit::Stream { id, data, fin, expires } => {
                let chunk = Chunk { data, fin, expires };
                match self.holds.iter_mut().rev().find(|h| h.id == id) {
                    Some(hold) => hold.chunks.push(chunk),
                    None => self.queue_chunk(id, chunk),
                }
            }
            Transmit::DeliverBy { id, at } => self.deliver_by.push(Reverse((at, id))),
            Transmit::Hold { id, streams, until } => {
                self.holds.push(Hold { id, streams, until, chunks: Vec::new() });
            }
            Transmit::Reset { id, code } => {
                self.holds.retain(|h| h.id != id);
                self.drop_stream(id);
                self.shutdown(conn, id, quiche::Shutdown::Write, code);
            }
            Transmit::StopSending { id, code } => {
                self.shutdown(conn, id, quiche::Shutdown::Read, code);
            }
            // Sent at the end of the write, most urgent first.
            Transmit::Datagram { data, urgency } => self.dgrams.push((urgency, data)),
            Transmit::Close { code, reason } => match self.wt.as_mut() {
                None => {
                    let _ = conn.close(true, code, reason.as_bytes());
                }
                // Over WebTransport the session ends with a capsule; the connection closes
                // once it is on the wire.
                Some(wt) => wt.close(conn, code, &reason),
            },
            // Not incremental: quiche sends a stream's bytes before the next one's of the same
            // urgency (stream ID order). A stream past the peer's MAX_STREAMS keeps 127.
            Transmit::Priority { id, urgency, descending } => {
                if let Some(q) = self.quic_id(id) {
                    let _ = conn.stream_priority(q, urgency, false);
                }
                let old = self.key(id);
                let order = if descending { u64::MAX - id.0 } else { id.0 };
                if urgency == DEFAULT_URGENCY && !descending {
                    self.urgency.remove(&id);
                } else {
                    self.urgency.insert(id, (urgency, order));
                }
                if let Some(queue) = self.pending.remove(&old) {
                    self.pending.insert(self.key(id), queue);
                }
            }
        }
    }

    /// Removes the queue of a stream done here (all of it went, the stream is gone, or it
    /// expired), keeping its buffer, cleared, for a later stream.
    fn retire(&mut self, key: &(u8, u64, StreamId)) {
        let Some(StreamQueue { mut chunks, .. }) = self.pending.remove(key) else { return };
        if self.spare.len() < SPARE_QUEUES && chunks.capacity() <= SPARE_QUEUE_CAPACITY {
            chunks.clear();
            self.spare.push(chunks);
        }
    }

    /// Appends one write to stream `id`'s queue.
    fn queue_chunk(&mut self, id: StreamId, chunk: Chunk) {
        let key = self.key(id);
        let spare = &mut self.spare;
        let queue = self
            .pending
            .entry(key)
            .or_insert_with(|| StreamQueue { chunks: spare.pop().unwrap_or_default(), bytes: 0 });
        let before = queue.bytes;
        // A new WebTransport stream of ours starts with its header.
        if let Some(header) = self.wt.as_mut().and_then(|wt| wt.session.stream_header(id.0)) {
            queue.push(Chunk { data: header, fin: false, expires: None });
        }
        queue.push(chunk);
        self.queued += queue.bytes - before;
    }

    fn key(&self, id: StreamId) -> (u8, u64, StreamId) {
        let (urgency, order) = self.urgency.get(&id).copied().unwrap_or((DEFAULT_URGENCY, id.0));
        (urgency, order, id)
    }

    /// Resets the oldest data streams with queued bytes until the backlog is at half its
    /// limit. The session forgets them (later objects for them are refused there), and quiche
    /// drops what it still buffered for them.
    fn shed_oldest(&mut self, conn: &mut impl Transport, session: &mut Session) {
        let target = self.backlog_limit.unwrap_or(0) / 2;
        // Oldest first; with priorities set, the least urgent streams go first.
        let mut victims: Vec<(u8, StreamId)> = self
            .pending
            .keys()
            .filter(|&&(_, _, id)| session.is_local_data_stream(id))
            .map(|&(urgency, _, id)| (urgency, id))
            .collect();
        victims.sort_by_key(|&(urgency, id)| (std::cmp::Reverse(urgency), id));
        let victims: Vec<StreamId> = victims.into_iter().map(|(_, id)| id).collect();
        for id in victims {
            if self.queued <= target {
                break;
            }
            // Only streams quiche has opened: a stream waiting for MAX_STREAMS would be opened
            // implicitly by a later one and then never ended. They are the newest anyway.
            if !self.shutdown(conn, id, quiche::Shutdown::Write, RESET_BACKLOG) {
                continue;
            }
            self.drop_stream(id);
            // The session may have finished the stream already: then only quiche knew it.
            if let Err(e) = session.reset_data_stream(id, RESET_BACKLOG) {
                tracing::trace!(stream = id.0, error = %e, "shed stream already finished");
            }
            self.shed += 1;
            self.written.shed.push(id);
        }
        // The session's Reset transmits for these streams: nothing is left to send for them.
        while let Some(t) = session.poll_transmit() {
            self.pending_transmit(conn, t);
        }
    }

    /// Bytes waiting for flow control (as of the last write).
    pub fn queued_bytes(&self) -> usize {
        self.queued
    }

    /// Data streams reset so far because the backlog was over its limit.
    pub fn shed_streams(&self) -> u64 {
        self.shed
    }

    /// Peer requests dropped so far because their answers piled up ([`REQUEST_QUEUE_LIMIT`]).
    pub fn dropped_requests(&self) -> u64 {
        self.dropped_requests
    }

    /// Data streams reset so far because a delivery timeout passed.
    pub fn timed_out_streams(&self) -> u64 {
        self.timed_out
    }

    /// Whether the path has delivered nothing for [`PATH_STALL`] (as of the last write), or
    /// came back from such a stall less than [`PATH_RECOVERY`] ago: streams lost meanwhile
    /// are an outage's (what piled up during it expires as it drains), not a slow
    /// subscriber's (the relay's `PathState`).
    pub fn path_stalled(&self, now: Instant) -> bool {
        self.path.stalled(now)
    }
}

#[cfg(test)]
mod tests;
