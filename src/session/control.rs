//! The session state machine: SETUP exchange, control stream(s), request streams, Request ID
//! checks, routing of outgoing messages, cancellation and closing.
//!
//! - draft-14 (§3.3, §9): draft-16's single control stream, no other bidirectional stream;
//!   `control/d14.rs` owns what differs (version negotiation, answers per request kind,
//!   SUBSCRIBE_UPDATE, namespace-named messages, discovery by PUBLISH_NAMESPACE).
//! - draft-16 ("Session initialization", "Control Messages"): the client opens bidirectional stream 0 with
//!   CLIENT_SETUP, the server answers SERVER_SETUP on it; every control message travels there,
//!   except SUBSCRIBE_NAMESPACE, which opens its own bidirectional stream carrying its
//!   REQUEST_OK/REQUEST_ERROR and then NAMESPACE / NAMESPACE_DONE ("SUBSCRIBE_NAMESPACE").
//! - draft-22 (§6.3-§6.4): each side opens a unidirectional control stream beginning with SETUP
//!   (both send at once); every request opens a bidirectional stream whose responses travel
//!   back on it, without a Request ID on the wire. FIN ends one direction and is not a
//!   cancellation; RESET_STREAM / STOP_SENDING cancel the request (§6.4.2.2, §6.4.2.3).
//!   draft-18 has the same streams (§3.3, §3.3.2); its sessions behave as draft-22's, but for
//!   the control-stream GOAWAY's Request ID (§10.4) and the absence of MAX_REQUEST_UPDATES.
//! - Peer request streams that arrive before SETUP are buffered (bounded by
//!   [`SessionConfig::max_pre_setup_streams`] and [`SessionConfig::max_stream_buffer`]) and
//!   processed once the session is ready.
//! - Every protocol violation queues [`Transmit::Close`] and [`Event::Closed`] with the spec's
//!   code; afterwards all input is ignored. Nothing here panics on any input.
//!
//! This file owns the receiving half (SETUP exchange, parsing, Request ID checks, FIN / reset /
//! STOP_SENDING handling); `control/outgoing.rs` owns the sending half (routing, Request ID
//! allocation, MAX_REQUEST_ID grants, FIN and cancel); `control/data_in.rs` routes peer data
//! streams and datagrams into [`DataState`] and keeps its Track Alias table in step.

mod d14;
mod data_in;
mod data_out;
mod outgoing;
mod parts;
mod verbs;

use self::parts::{ControlStreams, GoAways, Requests, SetupState};

use ahash::HashMap;
use std::collections::VecDeque;
use std::time::Instant;

use bytes::Bytes;

use self::d14::D14;
use self::data_out::DataOut;
use super::data::{overload_code, DataLimits, DataState};
use super::error::{SessionCode, SessionError};
use super::requests::{consumed_id, opens_stream, parity, referenced_id, RequestIds};
use super::streams::{ClosedStreams, RecvBuf, StreamId, CLOSED_BIDI_WINDOW};
use super::{Event, Transmit};
use wire::control::message_type::SETUP as D22_SETUP;
use wire::model::{DecodeContext, Message, RequestError, RequestId, Role, SetupOptions};
use wire::{ControlCodec, DecodeError, RequestErrorCode, VarInt, Version, Vi64};

/// Stream reset / STOP_SENDING code used when a request is cancelled (draft-22 §12.5
/// CANCELLED = 0x1).
pub(crate) const RESET_CANCELLED: u64 = 0x1;

/// Limits and identity of one session.
#[derive(Debug, Clone)]
pub struct SessionConfig {
    /// Bytes buffered per receive stream waiting for a whole message (a control message is at
    /// most 65,535 bytes of body plus its header).
    pub max_stream_buffer: usize,
    /// Peer streams (request streams, or draft-22 unidirectional streams of unknown type) that
    /// may wait for SETUP before the session closes.
    pub max_pre_setup_streams: usize,
    /// draft-16: the peer's initial request window (MAX_REQUEST_ID = 2 × this).
    pub max_requests: u64,
    /// MOQT_IMPLEMENTATION sent in our SETUP when the caller's options have none.
    pub implementation: Option<Bytes>,
    /// Bytes buffered across all peer-opened request streams waiting for whole messages; the
    /// stream whose bytes would cross it is stopped and reset with EXCESSIVE_LOAD (draft-18
    /// §3.3.3, draft-22 §12.5; CANCELLED in draft-16), and its request cancelled.
    pub max_request_buffer: usize,
    /// Peer-opened bidirectional streams open at once (requests, and streams whose first
    /// message has not arrived); a new one beyond it is stopped and reset with EXCESSIVE_LOAD
    /// (CANCELLED in draft-16). The transport's stream limit normally keeps peers below it.
    pub max_peer_streams: usize,
    /// Data-plane limits (object size, data streams, streams held for an unknown alias).
    pub data: DataLimits,
}

impl Default for SessionConfig {
    fn default() -> Self {
        SessionConfig {
            max_stream_buffer: 65_535 + 32,
            max_pre_setup_streams: 16,
            max_request_buffer: 2 << 20,
            max_peer_streams: 1000,
            max_requests: 100,
            implementation: Some(Bytes::from_static(b"moq-edge")),
            data: DataLimits::default(),
        }
    }
}

/// One request stream (draft-22), or a SUBSCRIBE_NAMESPACE stream (draft-16).
#[derive(Debug)]
struct ReqStream {
    /// `None` until the first message of a peer-opened stream has been parsed.
    request_id: Option<RequestId>,
    recv: RecvBuf,
    /// We sent FIN.
    send_fin: bool,
    /// The request is a PUBLISH: its REQUEST_UPDATEs come from the side that did not open it.
    publish: bool,
    /// draft-22: our REQUEST_UPDATEs on it not answered yet (the peer's MAX_REQUEST_UPDATES
    /// bounds them).
    updates_out: u64,
    /// `recv`'s length as last counted into [`Session::request_buffered`] (peer streams).
    counted: usize,
}

/// One MoQT session (see the module header).
#[derive(Debug)]
pub struct Session {
    version: Version,
    /// The control codec: the draft's, or the dialect of it the peer's SETUP shows it speaks
    /// (`wire::ControlCodec::for_peer`).
    codec: ControlCodec,
    role: Role,
    peer: Role,
    config: SessionConfig,
    /// The SETUP exchange.
    setup: SetupState,
    closed: bool,
    /// The connection's name in logs: the relay's core and connection id (0 elsewhere).
    log_id: (usize, u64),
    events: VecDeque<Event>,
    transmits: VecDeque<Transmit>,
    /// The control streams.
    control: ControlStreams,
    /// GOAWAY, each way.
    goaway: GoAways,
    /// Peer data streams, datagrams and the Track Alias table.
    data: DataState,
    /// Our data streams.
    data_out: DataOut,
    /// The request streams.
    reqs: Requests,
    ids: RequestIds,
    /// draft-14's request kinds, subscription state and namespace names (`control/d14.rs`).
    d14: D14,
}

/// What a session holds for its peer, for tests and the fuzz target's memory invariant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SessionUsage {
    /// Bytes buffered waiting for whole messages or objects: the control stream, request
    /// streams, streams of unknown type and data streams.
    pub buffered_bytes: usize,
    /// Peer streams with state: request streams (both sides'), data streams, streams of
    /// unknown type.
    pub streams: usize,
    /// Closed stream ids remembered above their watermarks.
    pub closed_ids: usize,
}

impl Session {
    /// A new session. A client queues its SETUP at once; a draft-22 server does too (§6.3: each
    /// side opens its control stream); a draft-16 server answers CLIENT_SETUP.
    pub fn new(version: Version, role: Role, config: SessionConfig, setup: SetupOptions) -> Session {
        let peer = match role {
            Role::Client => Role::Server,
            Role::Server => Role::Client,
        };
        let mut local_setup = setup;
        if local_setup.implementation.is_none() {
            local_setup.implementation = config.implementation.clone();
        }
        let local_max = config.max_requests.saturating_mul(2);
        let (local_control, peer_control) = match version {
            // draft-14 §9.3.2.3 / draft-16: MAX_REQUEST_ID in SETUP, one control stream.
            Version::Draft14 | Version::Draft16 => {
                local_setup.max_request_id = Some(local_max);
                (StreamId(0), Some(StreamId(0)))
            }
            Version::Draft18 | Version::Draft20 | Version::Draft22 => {
                local_setup.max_request_id = None;
                (StreamId::first(role, true), None)
            }
        };
        // draft-14 §9.3.1: the client offers its version; the server selects it on answering.
        local_setup.versions = match (version.setup_version(), role) {
            (Some(v), Role::Client) => vec![v],
            _ => Vec::new(),
        };
        local_setup.selected_version = None;
        let mut next_local_bidi = StreamId::first(role, false);
        if !version.request_streams() && role == Role::Client {
            next_local_bidi = next_local_bidi.next(); // stream 0 is the control stream
        }
        let data = DataState::new(version, config.data, StreamId::first(peer, true));
        let mut s = Session {
            version,
            codec: version.control_codec(),
            role,
            peer,
            config,
            setup: SetupState {
                local: local_setup,
                sent: false,
                peer: None,
                ready: false,
                transport: None,
                deadline: None,
                waiting: Vec::new(),
            },
            closed: false,
            log_id: (0, 0),
            events: VecDeque::new(),
            transmits: VecDeque::new(),
            control: ControlStreams {
                local: local_control,
                peer: peer_control,
                recv: RecvBuf::default(),
                uni_pending: HashMap::default(),
            },
            goaway: GoAways::default(),
            data,
            // draft-18/22: our first unidirectional stream is the control stream.
            data_out: DataOut::new({
                let first = StreamId::first(role, true);
                if version.request_streams() {
                    first.next()
                } else {
                    first
                }
            }),
            reqs: Requests {
                streams: HashMap::default(),
                // draft-16: the client's stream 0 is the control stream, never a request stream.
                closed_peer: ClosedStreams::new(
                    if !version.request_streams() && peer == Role::Client {
                        StreamId::first(peer, false).next()
                    } else {
                        StreamId::first(peer, false)
                    },
                    CLOSED_BIDI_WINDOW,
                ),
                by_request: HashMap::default(),
                next_local_bidi,
                buffered: 0,
                peer_count: 0,
            },
            ids: RequestIds::new(version, role, local_max),
            d14: D14::default(),
        };
        if role == Role::Client || version.request_streams() {
            s.send_setup();
        }
        s
    }

    /// The draft this session speaks.
    pub fn version(&self) -> Version {
        self.version
    }

    /// True once both SETUP messages have been exchanged.
    pub fn is_ready(&self) -> bool {
        self.setup.ready
    }

    /// True once the session has closed (no more input is processed).
    pub fn is_closed(&self) -> bool {
        self.closed
    }

    /// The next event, if any.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// True when events are waiting for [`Session::poll_event`].
    pub fn has_events(&self) -> bool {
        !self.events.is_empty()
    }

    /// The next thing for the transport to do, if any.
    pub fn poll_transmit(&mut self) -> Option<Transmit> {
        self.transmits.pop_front()
    }

    /// What the session holds for its peer (see [`SessionUsage`]).
    pub fn usage(&self) -> SessionUsage {
        let (data_bytes, data_streams, data_closed) = self.data.usage();
        let req_bytes: usize = self.reqs.streams.values().map(|s| s.recv.data().len()).sum();
        let uni_bytes: usize = self.control.uni_pending.values().map(|b| b.data().len()).sum();
        SessionUsage {
            buffered_bytes: self.control.recv.data().len() + req_bytes + uni_bytes + data_bytes,
            streams: self.reqs.streams.len() + self.control.uni_pending.len() + data_streams,
            closed_ids: self.reqs.closed_peer.tracked() + data_closed,
        }
    }

    /// The session closes with CONTROL_MESSAGE_TIMEOUT (draft-16 §13.1.1, draft-18 §3.5,
    /// draft-22 §12.2: the peer took too long to send a control message) unless the SETUP
    /// exchange has completed by `at`. The transport sets it from when the connection was
    /// accepted (`setup_timeout_ms`); see [`Session::on_timeout`].
    pub fn set_setup_deadline(&mut self, at: Instant) {
        self.setup.deadline = Some(at);
    }

    /// The next instant [`Session::on_timeout`] must be called by, if any.
    pub fn timeout(&self) -> Option<Instant> {
        self.setup.deadline.filter(|_| !self.setup.ready && !self.closed)
    }

    /// The clock reached `now`: a setup deadline that passed before SETUP completed closes
    /// the session with CONTROL_MESSAGE_TIMEOUT.
    pub fn on_timeout(&mut self, now: Instant) {
        if self.timeout().is_some_and(|at| at <= now) {
            self.close(SessionCode::ControlMessageTimeout, "SETUP did not complete in time");
        }
    }

    /// Closes the session with `code` (for example NO_ERROR, or GOAWAY_TIMEOUT).
    pub fn close(&mut self, code: SessionCode, reason: impl Into<String>) {
        if self.closed {
            return;
        }
        let reason = reason.into();
        self.closed = true;
        self.transmits.push_back(Transmit::Close { code: code.code(), reason: reason.clone() });
        self.events.push_back(Event::Closed { code: code.code(), reason });
    }

    // -----------------------------------------------------------------------------------------
    // Input
    // -----------------------------------------------------------------------------------------

    /// Bytes arrived on stream `id` (`fin`: the peer ended its direction).
    pub fn on_stream_data(&mut self, id: StreamId, data: &[u8], fin: bool) {
        if self.closed {
            return;
        }
        if let Err(e) = self.handle_data(id, data, fin) {
            self.fail(e);
        }
    }

    /// The peer reset its sending direction of stream `id`.
    pub fn on_stream_reset(&mut self, id: StreamId, code: u64) {
        if self.closed {
            return;
        }
        if self.control.peer == Some(id) {
            return self.fail(SessionError::violation("control stream reset"));
        }
        if id.is_uni() && self.data_stream_reset(id, code) {
            return;
        }
        if self.control.uni_pending.remove(&id).is_some() {
            self.data.retire(id);
        }
        self.setup.waiting.retain(|&s| s != id);
        self.peer_cancelled(id, false);
    }

    /// Whether `id` is a unidirectional stream of ours other than the draft-22 control
    /// stream, i.e. a data stream we opened (open, or finished and still draining).
    pub fn is_local_data_stream(&self, id: StreamId) -> bool {
        id.is_uni() && id != self.control.local && id.initiator() == self.role
    }

    /// The stream our control messages go on (draft-14 and draft-16: the bidirectional
    /// stream 0; draft-18 to 22: our first unidirectional stream).
    pub fn local_control_stream(&self) -> StreamId {
        self.control.local
    }

    /// Whether `id` is an open bidirectional stream the peer opened (a request stream, or a
    /// draft-16 SUBSCRIBE_NAMESPACE stream), not the draft-16 control stream.
    pub fn is_peer_stream(&self, id: StreamId) -> bool {
        !id.is_uni()
            && id.initiator() != self.role
            && self.control.peer != Some(id)
            && self.reqs.streams.contains_key(&id)
    }

    /// The peer asked us to stop sending on stream `id`.
    pub fn on_stop_sending(&mut self, id: StreamId, code: u64) {
        if self.closed {
            return;
        }
        if id == self.control.local {
            return self.fail(SessionError::violation("STOP_SENDING on the control stream"));
        }
        if id.is_uni() {
            // STOP_SENDING on a data stream: answer with RESET_STREAM (RFC 9000 §3.5).
            self.data_stop_sending(id, code);
            return;
        }
        self.peer_cancelled(id, true);
    }

    fn fail(&mut self, e: SessionError) {
        match e {
            SessionError::Protocol { code, reason } => self.close(code, reason),
            other => self.close(SessionCode::InternalError, other.to_string()),
        }
    }

    fn handle_data(&mut self, id: StreamId, data: &[u8], fin: bool) -> Result<(), SessionError> {
        let limit = self.config.max_stream_buffer;
        let overflow = |_| SessionError::violation("stream buffer limit exceeded");
        if self.control.peer == Some(id) {
            self.control.recv.push(data, limit).map_err(overflow)?;
            self.control.recv.fin |= fin;
            return self.process_control();
        }
        if id.is_uni() {
            if id.initiator() == self.role {
                // Our own unidirectional streams cannot receive.
                return Ok(());
            }
            if !self.version.request_streams()
                || (!self.control.uni_pending.contains_key(&id) && self.data.owns(id))
            {
                // draft-14 and draft-16: every peer unidirectional stream is a data stream.
                return self.data_stream_input(id, data, fin);
            }
            return self.on_uni_data(id, data, fin);
        }
        if id.initiator() == self.role {
            // One of our request streams; unknown ones were already torn down.
            let Some(st) = self.reqs.streams.get_mut(&id) else { return Ok(()) };
            st.recv.push(data, limit).map_err(overflow)?;
            st.recv.fin |= fin;
        } else {
            if !self.reqs.streams.contains_key(&id) {
                if self.reqs.closed_peer.contains(id) {
                    return Ok(());
                }
                if !self.setup.ready {
                    if self.pending_count() >= self.config.max_pre_setup_streams {
                        return Err(SessionError::violation("too many streams before SETUP"));
                    }
                } else if self.reqs.peer_count >= self.config.max_peer_streams {
                    // Beyond what we serve at once (ARCHITECTURE.md, "Malformed and abusive
                    // input"): refused like a data stream over its limit.
                    let code = overload_code(self.version);
                    self.transmits.push_back(Transmit::StopSending { id, code });
                    self.transmits.push_back(Transmit::Reset { id, code });
                    self.reqs.closed_peer.insert(id);
                    return Ok(());
                }
                if !self.setup.ready {
                    self.setup.waiting.push(id);
                }
                self.reqs.peer_count += 1;
                self.reqs.streams.insert(
                    id,
                    ReqStream {
                        request_id: None,
                        recv: RecvBuf::default(),
                        send_fin: false,
                        publish: false,
                        updates_out: 0,
                        counted: 0,
                    },
                );
            }
            if self.reqs.buffered.saturating_add(data.len()) > self.config.max_request_buffer {
                self.overloaded(id);
                return Ok(());
            }
            if let Some(st) = self.reqs.streams.get_mut(&id) {
                st.recv.push(data, limit).map_err(overflow)?;
                st.recv.fin |= fin;
            }
            self.recount(id);
        }
        if self.setup.ready {
            self.process_stream(id)?;
            self.recount(id);
        }
        Ok(())
    }

    /// draft-16: the peer just used Request ID `used`; when fewer than half of
    /// `max_requests` are left under our MAX_REQUEST_ID, it is raised by half of them (a
    /// window that slides as the peer goes, like QUIC's MAX_STREAMS). Without it a peer could
    /// make `max_requests` requests in a whole session. How many are open at once is bounded
    /// by the relay's own limits (subscriptions, namespaces, FETCHes per session).
    fn keep_request_window(&mut self, used: RequestId) {
        let window = self.config.max_requests;
        if self.ids.running_low(used, window) {
            // Fails only on a closed session, which needs no more requests.
            if let Err(e) = self.grant_requests(window.div_ceil(2)) {
                tracing::trace!(error = %e, "request window not extended");
            }
        }
    }

    /// Brings [`Session::request_buffered`] up to date with peer stream `id`'s buffer.
    fn recount(&mut self, id: StreamId) {
        if id.initiator() == self.role {
            return;
        }
        if let Some(st) = self.reqs.streams.get_mut(&id) {
            let len = st.recv.data().len();
            self.reqs.buffered = self.reqs.buffered.saturating_sub(st.counted).saturating_add(len);
            st.counted = len;
        }
    }

    /// The transport gives up on peer request stream `id`: the peer does not read what we
    /// answer on it and the answers pile up (ARCHITECTURE.md, "Malformed and abusive input").
    /// As for a stream over `max_request_buffer`: STOP_SENDING and RESET_STREAM with
    /// EXCESSIVE_LOAD (CANCELLED in draft-16), the request cancelled. False when `id` is not
    /// an open peer request stream.
    pub fn shed_request_stream(&mut self, id: StreamId) -> bool {
        if self.closed || id.is_uni() || id.initiator() == self.role || !self.reqs.streams.contains_key(&id) {
            return false;
        }
        self.overloaded(id);
        true
    }

    /// Peer request stream `id` would take the session past `max_request_buffer`: it is
    /// stopped and reset with EXCESSIVE_LOAD (CANCELLED in draft-16), its request cancelled.
    fn overloaded(&mut self, id: StreamId) {
        let Some(st) = self.reqs.streams.get(&id) else { return };
        let code = overload_code(self.version);
        if let Some(rid) = st.request_id {
            self.events.push_back(Event::Cancelled { request_id: rid });
            self.data.remove_request(rid);
        }
        if !st.recv.fin {
            self.transmits.push_back(Transmit::StopSending { id, code });
        }
        if !st.send_fin {
            self.transmits.push_back(Transmit::Reset { id, code });
        }
        self.drop_stream(id);
    }

    fn pending_count(&self) -> usize {
        self.setup.waiting.len() + self.control.uni_pending.len()
    }

    /// draft-22 peer unidirectional stream: the control stream begins with SETUP (§6.4.1).
    fn on_uni_data(&mut self, id: StreamId, data: &[u8], fin: bool) -> Result<(), SessionError> {
        if !self.control.uni_pending.contains_key(&id)
            && self.pending_count() >= self.config.max_pre_setup_streams
        {
            return Err(SessionError::violation("too many streams of unknown type"));
        }
        let buf = self.control.uni_pending.entry(id).or_default();
        // No limit needed: the buffer leaves as soon as the type (at most 9 bytes) is whole,
        // so less than that waits here between calls. A first write larger than a control
        // stream's buffer (a data stream's first packets) is not a violation.
        if buf.push(data, usize::MAX).is_err() {
            return Err(SessionError::violation("stream buffer limit exceeded"));
        }
        buf.fin |= fin;
        let ty = match Vi64::decode(buf.data()) {
            Ok((ty, _)) => ty,
            Err(DecodeError::NeedMore) => {
                if fin {
                    self.control.uni_pending.remove(&id);
                    self.data.retire(id);
                }
                return Ok(());
            }
            Err(e) => return Err(e.into()),
        };
        let Some(buf) = self.control.uni_pending.remove(&id) else { return Ok(()) };
        if ty != D22_SETUP {
            // A data or padding stream (§6.4.1): its buffered bytes start the data parser.
            return self.data_stream_input(id, buf.data(), buf.fin);
        }
        if self.control.peer.is_some() {
            return Err(SessionError::violation("a second control stream"));
        }
        self.control.peer = Some(id);
        // Never a data stream: lets the data plane's closed-stream watermark pass it.
        self.data.retire(id);
        self.control.recv = buf;
        self.process_control()?;
        if self.control.recv.data().len() > self.config.max_stream_buffer {
            return Err(SessionError::violation("stream buffer limit exceeded"));
        }
        Ok(())
    }

    fn process_control(&mut self) -> Result<(), SessionError> {
        let ctx = DecodeContext::control(self.peer);
        while !self.closed {
            match self.codec.decode_message(self.control.recv.data(), &ctx) {
                Ok((msg, n)) => {
                    self.control.recv.consume(n);
                    self.on_control_message(msg)?;
                }
                Err(DecodeError::NeedMore) => break,
                Err(e) => return Err(e.into()),
            }
        }
        if self.control.recv.fin && !self.closed {
            return Err(SessionError::violation("control stream closed"));
        }
        Ok(())
    }

    fn on_control_message(&mut self, msg: Message) -> Result<(), SessionError> {
        if self.setup.peer.is_none() {
            let options = match (msg, self.peer) {
                (Message::ClientSetup(s), Role::Client) | (Message::ServerSetup(s), Role::Server) => {
                    s.options
                }
                (other, _) => return Err(SessionError::violation(format!("{} before SETUP", other.name()))),
            };
            if self.peer == Role::Server && options.path.is_some() {
                // draft-22 §9.1.2 / draft-16 "PATH": only a client sends PATH (INVALID_PATH).
                return Err(SessionError::protocol(SessionCode::InvalidPath, "PATH in a server SETUP"));
            }
            if !self.version.request_streams() {
                self.ids.set_peer_initial_max(options.max_request_id);
            }
            if self.version == Version::Draft14 {
                self.d14_negotiate(&options)?;
            }
            self.codec = self.codec.for_peer(options.implementation.as_deref());
            if self.codec.is_quirk() {
                let peer = options.implementation.as_deref().map(String::from_utf8_lossy);
                tracing::debug!(
                    core = self.log_id.0,
                    conn = self.log_id.1,
                    ?peer,
                    "speaking the peer's dialect"
                );
            }
            self.setup.peer = Some(options);
            if !self.setup.sent {
                self.send_setup();
            }
            return self.maybe_ready();
        }
        match msg {
            Message::ClientSetup(_) | Message::ServerSetup(_) => {
                Err(SessionError::violation("a second SETUP"))
            }
            Message::GoAway(ref g) => {
                if self.goaway.received {
                    return Err(SessionError::violation("a second GOAWAY"));
                }
                // draft-18 §10.4: the Request ID names one of ours; the wrong parity is
                // INVALID_REQUEST_ID.
                if g.request_id.is_some_and(|id| id.0 & 1 != parity(self.role)) {
                    return Err(SessionError::protocol(
                        SessionCode::InvalidRequestId,
                        "GOAWAY Request ID of the wrong parity",
                    ));
                }
                self.goaway.received = true;
                self.events.push_back(Event::Message(msg));
                Ok(())
            }
            _ if self.version.request_streams() => {
                Err(SessionError::violation(format!("{} on the control stream", msg.name())))
            }
            Message::MaxRequestId(max) => self.ids.on_max_request_id(max.0),
            // draft-14 §9.28: SUBSCRIBE_NAMESPACE is a control-stream request.
            Message::SubscribeNamespace(_) if self.version == Version::Draft14 => self.on_d16_request(msg),
            Message::SubscribeNamespace(_) | Message::Namespace(_) | Message::NamespaceDone(_) => {
                Err(SessionError::violation(format!("{} on the control stream", msg.name())))
            }
            msg => self.on_d16_request(msg),
        }
    }

    /// A draft-14 or draft-16 message on the control stream after SETUP: its Request IDs are
    /// checked, draft-14's forms mapped to the caller's, and the event queued.
    fn on_d16_request(&mut self, msg: Message) -> Result<(), SessionError> {
        if let Some(id) = consumed_id(&msg) {
            self.ids.on_peer_request(id, true)?;
            self.keep_request_window(id);
        }
        if let Some(id) = referenced_id(&msg) {
            if !self.ids.is_known(id) {
                // draft-16 §9.11: an invalid Existing Request ID is a PROTOCOL_VIOLATION.
                let code = match msg {
                    Message::RequestUpdate(_) => SessionCode::ProtocolViolation,
                    _ => SessionCode::InvalidRequestId,
                };
                return Err(SessionError::protocol(
                    code,
                    format!("{} names an unknown Request ID", msg.name()),
                ));
            }
        }
        if let Message::RequestUpdate(u) = &msg {
            // draft-16 §9.11: the Existing Request ID must name a request the peer
            // may update: one it sent (not a REQUEST_UPDATE), or a PUBLISH of ours.
            // A request that ended meanwhile is the application's to answer.
            if !self.ids.updatable_by_peer(u.existing_request_id) {
                return Err(SessionError::violation(
                    "REQUEST_UPDATE names a request the peer may not update",
                ));
            }
            self.ids.note_peer_update(u.request_id);
        }
        let msg = match self.version {
            Version::Draft14 => match self.incoming_d14(msg)? {
                Some(m) => m,
                None => return Ok(()),
            },
            _ => msg,
        };
        self.events.push_back(Event::Message(msg.clone()));
        self.observe_incoming(&msg)
    }

    /// Setup options the transport carried instead of SETUP: over WebTransport the CONNECT
    /// request's authority and path (a client must not send AUTHORITY or PATH in SETUP
    /// there), and an authorization token from its URL. They complete the peer's SETUP
    /// options in [`Event::Ready`]: authority and path where SETUP has none, tokens after
    /// SETUP's.
    pub fn set_transport_setup(&mut self, options: SetupOptions) {
        self.setup.transport = Some(options);
    }

    fn maybe_ready(&mut self) -> Result<(), SessionError> {
        if self.setup.ready || !self.setup.sent {
            return Ok(());
        }
        let Some(mut peer) = self.setup.peer.clone() else { return Ok(()) };
        if let Some(t) = self.setup.transport.take() {
            peer.authority = peer.authority.or(t.authority);
            peer.path = peer.path.or(t.path);
            peer.auth_tokens.extend(t.auth_tokens);
        }
        self.setup.ready = true;
        self.events.push_back(Event::Ready { peer });
        for id in std::mem::take(&mut self.setup.waiting) {
            if self.closed {
                break;
            }
            self.process_stream(id)?;
            self.recount(id);
        }
        Ok(())
    }

    /// Parses whole messages on a request stream (draft-22) or SUBSCRIBE_NAMESPACE stream
    /// (draft-16).
    fn process_stream(&mut self, id: StreamId) -> Result<(), SessionError> {
        let codec = self.codec;
        loop {
            if self.closed {
                return Ok(());
            }
            let Some(st) = self.reqs.streams.get_mut(&id) else { return Ok(()) };
            let ctx = match st.request_id {
                Some(r) => DecodeContext::request(self.peer, r),
                None => DecodeContext::control(self.peer),
            };
            match codec.decode_message(st.recv.data(), &ctx) {
                Ok((msg, n)) => {
                    st.recv.consume(n);
                    self.on_stream_message(id, msg)?;
                }
                Err(DecodeError::NeedMore) => {
                    if st.recv.fin {
                        if !st.recv.is_empty() {
                            return Err(SessionError::violation("FIN inside a message"));
                        }
                        return self.on_peer_fin(id);
                    }
                    return Ok(());
                }
                Err(e) => return Err(e.into()),
            }
        }
    }

    fn on_stream_message(&mut self, id: StreamId, msg: Message) -> Result<(), SessionError> {
        let Some(st) = self.reqs.streams.get_mut(&id) else { return Ok(()) };
        let Some(rid) = st.request_id else {
            // The first message of a peer-opened stream.
            let allowed = match self.version {
                // draft-14 §3.3: no bidirectional stream but the control stream.
                Version::Draft14 => false,
                Version::Draft16 => matches!(msg, Message::SubscribeNamespace(_)),
                Version::Draft18 | Version::Draft20 | Version::Draft22 => opens_stream(&msg),
            };
            let Some(rid) = consumed_id(&msg).filter(|_| allowed) else {
                return Err(SessionError::violation(format!(
                    "bidirectional stream begins with {}",
                    msg.name()
                )));
            };
            st.request_id = Some(rid);
            st.publish = matches!(msg, Message::Publish(_));
            self.ids.on_peer_request(rid, false)?;
            self.keep_request_window(rid);
            self.reqs.by_request.insert(rid, id);
            if self.goaway.sent {
                return self.refuse_going_away(id, rid);
            }
            self.events.push_back(Event::Message(msg.clone()));
            return self.observe_incoming(&msg);
        };
        let local = id.initiator() == self.role;
        let publish = st.publish;
        // draft-18 and draft-22 streams (`true`) or a draft-16 SUBSCRIBE_NAMESPACE stream.
        match (&msg, self.version.request_streams()) {
            (Message::Namespace(_) | Message::NamespaceDone(_), _) if local => {
                self.events.push_back(Event::RequestMessage { request_id: rid, message: msg });
                return Ok(());
            }
            (Message::RequestOk(_) | Message::RequestError(_), false)
                if local && referenced_id(&msg) != Some(rid) =>
            {
                return Err(SessionError::protocol(
                    SessionCode::InvalidRequestId,
                    "response names another request",
                ));
            }
            (Message::RequestOk(_) | Message::RequestError(_), false) if local => {}
            (_, false) => {
                return Err(SessionError::violation(format!(
                    "{} on a SUBSCRIBE_NAMESPACE stream",
                    msg.name()
                )));
            }
            (m, true) if opens_stream(m) => {
                return Err(SessionError::violation(format!("{} on an open request stream", msg.name())));
            }
            // An answer restores one REQUEST_UPDATE credit (draft-22 §9.1.7).
            (Message::RequestOk(_) | Message::RequestError(_), true) => {
                if let Some(st) = self.reqs.streams.get_mut(&id) {
                    st.updates_out = st.updates_out.saturating_sub(1);
                }
            }
            (Message::RequestUpdate(u), true) => {
                // draft-22 §9.5, draft-18 §10.9: the sender of a request updates it (a
                // publisher its PUBLISH too, e.g. to renew its token), and so does the
                // subscriber of a PUBLISH: on a stream we opened, only the receiver of our
                // PUBLISH may.
                if local && !publish {
                    return Err(SessionError::violation("REQUEST_UPDATE from the receiver of a request"));
                }
                self.ids.on_peer_request(u.request_id, false)?;
            }
            _ => {}
        }
        self.events.push_back(Event::Message(msg.clone()));
        self.observe_incoming(&msg)
    }

    /// draft-18 §10.4: after our GOAWAY, a new request "MUST be rejected with REQUEST_ERROR
    /// using error code GOING_AWAY". The session answers it itself (the application never sees
    /// it), ends the stream and ignores what else arrives on it.
    fn refuse_going_away(&mut self, id: StreamId, rid: RequestId) -> Result<(), SessionError> {
        let refusal = Message::RequestError(RequestError {
            request_id: rid,
            error_code: RequestErrorCode::GoingAway.code(self.version),
            retry_interval: 0,
            reason: Bytes::from_static(b"going away"),
            redirect: None,
        });
        let mut data = Vec::new();
        self.codec.encode_message(&refusal, &mut data)?;
        self.transmits.push_back(Transmit::Stream { id, data: data.into(), fin: false, expires: None });
        self.finish_stream(id);
        self.drop_stream(id);
        Ok(())
    }

    /// The peer finished its direction of a request stream after whole messages.
    fn on_peer_fin(&mut self, id: StreamId) -> Result<(), SessionError> {
        let Some(st) = self.reqs.streams.get(&id) else { return Ok(()) };
        match st.request_id {
            // draft-16 "SUBSCRIBE_NAMESPACE": a SUBSCRIBE_NAMESPACE is cancelled by FIN from the subscriber.
            Some(rid) if self.version == Version::Draft16 && id.initiator() != self.role => {
                self.events.push_back(Event::Cancelled { request_id: rid });
                self.finish_stream(id);
                self.drop_stream(id);
            }
            Some(_) => {
                // draft-22 §6.4.2.2: a FIN is not a cancellation; forget the stream once both
                // directions are done.
                if st.send_fin {
                    self.drop_stream(id);
                }
            }
            None => self.drop_stream(id),
        }
        Ok(())
    }

    /// A reset (`stop_sending` false) or STOP_SENDING from the peer on a request stream:
    /// the request is cancelled (draft-22 §6.4.2.3); we abort what is still open.
    fn peer_cancelled(&mut self, id: StreamId, stop_sending: bool) {
        let Some(st) = self.reqs.streams.get(&id) else { return };
        if let Some(rid) = st.request_id {
            self.events.push_back(Event::Cancelled { request_id: rid });
            self.data.remove_request(rid);
        }
        if !st.send_fin {
            self.transmits.push_back(Transmit::Reset { id, code: RESET_CANCELLED });
        }
        if stop_sending && !st.recv.fin {
            self.transmits.push_back(Transmit::StopSending { id, code: RESET_CANCELLED });
        }
        self.drop_stream(id);
    }

    fn drop_stream(&mut self, id: StreamId) {
        if let Some(st) = self.reqs.streams.remove(&id) {
            if let Some(rid) = st.request_id {
                self.reqs.by_request.remove(&rid);
            }
            if id.initiator() != self.role {
                self.reqs.peer_count = self.reqs.peer_count.saturating_sub(1);
                self.reqs.buffered = self.reqs.buffered.saturating_sub(st.counted);
            }
        }
        if id.initiator() != self.role {
            self.reqs.closed_peer.insert(id);
        }
        self.setup.waiting.retain(|&s| s != id);
    }
}
