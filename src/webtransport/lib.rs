//! `webtransport`: one WebTransport session over HTTP/3 (RFC 9114, RFC 9220 extended CONNECT,
//! RFC 9297 datagrams and capsules, draft-ietf-webtrans-http3), as a sans-IO state machine
//! between a QUIC connection's streams and a MoQT session. See ARCHITECTURE.md, "Transports".
//!
//! The MoQT session numbers its streams as if it owned a raw QUIC connection (draft-16's
//! control stream is the client's first bidirectional stream; draft-22's are the first
//! unidirectional stream of each side). Over WebTransport the first streams belong to HTTP/3
//! (the CONNECT request stream, the control streams, QPACK streams), and every WebTransport
//! stream starts with a header (bidirectional: signal 0x41 and the session ID; unidirectional:
//! type 0x54 and the session ID). This module strips and adds those headers and maps stream
//! IDs both ways, so that the session and the relay above it cannot tell which transport
//! carries them:
//!
//! - streams we open: session ID `s` is QUIC stream `s + 4` (our first stream of each kind is
//!   HTTP/3's: the control stream, or the client's CONNECT stream), except the server's
//!   bidirectional streams, which HTTP/3 never uses (`s` itself);
//! - the peer's bidirectional streams: the client's CONNECT stream is QUIC 0, so client stream
//!   `q` is session stream `q - 4`; the server's are unchanged;
//! - the peer's unidirectional streams: numbered in the order their WebTransport header
//!   completes (HTTP/3's own unidirectional streams come in any order, so no formula fits).
//!
//! Byte framing (HEADERS, SETTINGS, capsules, QPACK without a dynamic table) comes from the
//! `web-transport-proto` crate; this module keeps the state: which stream is which, the
//! CONNECT exchange, the limits a hostile peer meets, and the errors of RFC 9114 §8.1.

#![warn(missing_docs, unreachable_pub)]

mod early;

use early::Early;
use std::collections::{BTreeSet, HashMap, VecDeque};

use bytes::{BufMut, Bytes, BytesMut};
use web_transport_proto::{
    error_from_http3, error_to_http3, Capsule, ConnectError, ConnectRequest, ConnectResponse, Frame,
    Settings, StreamUni, VarInt,
};

/// The ALPN of HTTP/3, which carries WebTransport (RFC 9114 §3.1).
pub const ALPN: &str = "h3";

pub mod code;
mod io;

pub use io::{Event, Output};

/// The WEBTRANSPORT_STREAM signal that starts a bidirectional WebTransport stream.
const WT_BIDI_SIGNAL: u64 = 0x41;
/// The DRAIN_WEBTRANSPORT_SESSION capsule type (CLOSE_WEBTRANSPORT_SESSION is the crate's).
const CAPSULE_DRAIN: u64 = 0x78ae;

/// What one side of the exchange allows a peer (every resource a peer can grow has a limit).
#[derive(Debug, Clone)]
pub struct Limits {
    /// Bytes buffered for the peer's control stream until its SETTINGS frame is whole, and
    /// for one CONNECT request's HEADERS (and one capsule).
    pub max_header_bytes: usize,
    /// Bytes of WebTransport stream payload buffered before the session is accepted (a
    /// client may open streams before the CONNECT answer arrives), over all streams.
    pub max_early_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { max_header_bytes: 16 * 1024, max_early_bytes: 64 * 1024 }
    }
}

/// The CONNECT request the server accepted (or the client made).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Accepted {
    /// The WT-Protocol chosen (the MoQT ALPN), or the server's default.
    pub protocol: String,
    /// Whether the protocol was negotiated (the client offered WT-Available-Protocols and the
    /// server's answer named one), rather than the default taken for a client that named none.
    pub negotiated: bool,
    /// `:authority` of the request.
    pub authority: String,
    /// `:path` of the request, with its query.
    pub path: String,
}

/// What a peer's stream is, as far as its first bytes tell.
#[derive(Debug)]
enum PeerStream {
    /// Its type or WebTransport header is not whole yet: the bytes so far.
    Header(Vec<u8>),
    /// The peer's HTTP/3 control stream: buffered until SETTINGS, then frames skipped.
    Control(Vec<u8>),
    /// A request stream: the HEADERS of a request (bytes so far).
    Request(Vec<u8>),
    /// The CONNECT stream of the session after its HEADERS: HTTP/3 frames (bytes so far of
    /// a partial one), and the capsule stream their DATA payloads carry (RFC 9297 §3.2).
    Capsules { frames: Vec<u8>, capsules: Vec<u8> },
    /// A WebTransport stream of our session: session stream ID.
    Session(u64),
    /// Read and dropped (QPACK streams, refused streams, a request already answered).
    Discard,
}

/// Server or client side of the exchange.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// Accepts the CONNECT (the relay).
    Server,
    /// Sends the CONNECT (our client, the tests).
    Client,
}

/// One WebTransport session on one HTTP/3 connection.
#[derive(Debug)]
pub struct WebTransport {
    side: Side,
    limits: Limits,
    /// Server: the protocols it speaks, most preferred first, and the one a client that offers
    /// none gets.
    protocols: Vec<String>,
    default_protocol: String,
    peer: HashMap<u64, PeerStream>,
    /// The peer's control stream and whether its SETTINGS arrived.
    peer_control: Option<u64>,
    peer_settings: bool,
    /// The session's CONNECT stream (QUIC ID; its quarter is the datagram context).
    connect: Option<u64>,
    accepted: Option<Accepted>,
    closed: bool,
    /// Peer unidirectional streams: QUIC → session and back, and the next session ID.
    uni_in: HashMap<u64, u64>,
    uni_back: HashMap<u64, u64>,
    next_peer_uni: u64,
    /// Our streams that already carry their header: every ID of a kind below the watermark,
    /// except those skipped (opened out of order) and not yet written.
    started: [u64; 4],
    skipped: BTreeSet<u64>,
    /// Payload of WebTransport streams that arrived before the session was accepted.
    early: Early,
    out: VecDeque<Output>,
    events: VecDeque<Event>,
    /// Client: the request's authority and path, for the [`Accepted`] event.
    pending_request: Option<(String, String)>,
    /// CLOSE_WEBTRANSPORT_SESSION was queued.
    close_sent: bool,
}

/// A WebTransport payload the session should see: `offset` is where it starts in the bytes
/// given to [`WebTransport::on_stream_data`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deliver {
    /// The session stream the payload is on.
    pub stream: u64,
    /// Where the payload starts in the bytes given.
    pub offset: usize,
}

impl WebTransport {
    /// A server offering `protocols` (most preferred first) in WT-Protocol; a client that
    /// offers none gets `default_protocol`. Queues our control stream with SETTINGS.
    pub fn server(protocols: Vec<String>, default_protocol: String, limits: Limits) -> Self {
        let mut wt = WebTransport::new(Side::Server, limits);
        wt.protocols = protocols;
        wt.default_protocol = default_protocol;
        wt.send_settings();
        wt
    }

    /// A client asking for a session at `url` (an `https` URL) with `protocols` in
    /// WT-Available-Protocols: queues SETTINGS and the CONNECT request.
    pub fn client(url: &str, protocols: &[String], limits: Limits) -> Result<Self, String> {
        let url = url::Url::parse(url).map_err(|e| format!("{url}: {e}"))?;
        let mut wt = WebTransport::new(Side::Client, limits);
        wt.send_settings();
        let request = ConnectRequest::new(url.clone()).with_protocols(protocols.iter().cloned());
        let mut buf = BytesMut::new();
        request.encode(&mut buf).map_err(|e| format!("CONNECT: {e}"))?;
        wt.connect = Some(0);
        wt.peer.insert(0, PeerStream::Request(Vec::new()));
        let path = path_and_query(&url);
        wt.protocols = protocols.to_vec();
        wt.out.push_back(Output::Stream { quic: 0, data: buf.freeze(), fin: false });
        // Remembered for the Accepted event.
        wt.pending_request = Some((url.authority().to_string(), path));
        Ok(wt)
    }

    fn new(side: Side, limits: Limits) -> Self {
        let peer_uni = match side {
            Side::Server => 2,
            Side::Client => 3,
        };
        WebTransport {
            side,
            limits,
            protocols: Vec::new(),
            default_protocol: String::new(),
            peer: HashMap::new(),
            peer_control: None,
            peer_settings: false,
            connect: None,
            accepted: None,
            closed: false,
            uni_in: HashMap::new(),
            uni_back: HashMap::new(),
            next_peer_uni: peer_uni,
            // Our first bidirectional (client) and unidirectional streams are HTTP/3's.
            started: [0, 1, 2, 3],
            skipped: BTreeSet::new(),
            early: Early::default(),
            out: VecDeque::new(),
            events: VecDeque::new(),
            pending_request: None,
            close_sent: false,
        }
    }

    fn send_settings(&mut self) {
        let mut settings = Settings::default();
        settings.enable_webtransport(1);
        let mut buf = BytesMut::new();
        settings.encode(&mut buf); // stream type CONTROL, then the SETTINGS frame
        let quic = match self.side {
            Side::Server => 3,
            Side::Client => 2,
        };
        self.out.push_back(Output::Stream { quic, data: buf.freeze(), fin: false });
    }

    /// The accepted session, once there is one.
    pub fn accepted(&self) -> Option<&Accepted> {
        self.accepted.as_ref()
    }

    /// True once the session was closed by either side.
    pub fn is_closed(&self) -> bool {
        self.closed
    }

    /// The next thing to write, if any.
    pub fn poll_output(&mut self) -> Option<Output> {
        self.out.pop_front()
    }

    /// The next event, if any.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// The payload held so far for session stream `stream` (arrival order), without taking it.
    pub fn early_of(&self, stream: u64) -> Vec<u8> {
        self.early.of(stream)
    }

    /// Payload that arrived on WebTransport streams before the session was accepted:
    /// (session stream, bytes, fin), in arrival order.
    pub fn take_early(&mut self) -> Vec<(u64, Vec<u8>, bool)> {
        self.early.take()
    }

    fn is_local(&self, quic: u64) -> bool {
        let client_opened = quic & 1 == 0;
        client_opened == (self.side == Side::Client)
    }

    // -----------------------------------------------------------------------------------------
    // Stream IDs
    // -----------------------------------------------------------------------------------------

    /// The QUIC stream that carries session stream `stream` (`None`: a peer stream that is
    /// gone, or never was).
    pub fn quic_id(&self, stream: u64) -> Option<u64> {
        let uni = stream & 2 != 0;
        let local = self.is_local(stream);
        match (uni, local) {
            (true, false) => self.uni_back.get(&stream).copied(),
            // The server's bidirectional streams are the only kind HTTP/3 never opens.
            (false, _) if stream & 1 == 1 => Some(stream),
            _ => stream.checked_add(4),
        }
    }

    /// The session stream carried by QUIC stream `quic`, if it is a WebTransport stream of
    /// the session whose header was read.
    pub fn session_id(&self, quic: u64) -> Option<u64> {
        match self.peer.get(&quic) {
            Some(PeerStream::Session(s)) => Some(*s),
            _ if self.is_local(quic) => self.local_session_id(quic),
            _ => None,
        }
    }

    fn local_session_id(&self, quic: u64) -> Option<u64> {
        if quic & 3 == 1 {
            Some(quic)
        } else {
            quic.checked_sub(4)
        }
    }

    /// The header that must precede the first bytes we write on our session stream `stream`
    /// (`None` after the first time, and for the peer's streams).
    pub fn stream_header(&mut self, stream: u64) -> Option<Bytes> {
        if !self.is_local(stream) {
            return None;
        }
        let kind = (stream & 3) as usize;
        let mark = self.started[kind];
        let first = if stream >= mark {
            let mut s = mark;
            while s < stream {
                self.skipped.insert(s);
                s += 4;
            }
            self.started[kind] = stream + 4;
            true
        } else {
            self.skipped.remove(&stream)
        };
        if !first {
            return None;
        }
        let session = self.connect.unwrap_or(0);
        let mut buf = BytesMut::with_capacity(10);
        if stream & 2 != 0 {
            StreamUni::WEBTRANSPORT.encode(&mut buf);
        } else {
            Frame(VarInt::from_u32(WT_BIDI_SIGNAL as u32)).encode(&mut buf);
        }
        varint(session).encode(&mut buf);
        Some(buf.freeze())
    }

    // -----------------------------------------------------------------------------------------
    // Input
    // -----------------------------------------------------------------------------------------

    /// Bytes arrived on QUIC stream `quic`. WebTransport payload comes back as [`Deliver`]
    /// (the session stream and where in `data` its bytes start; before the session is
    /// accepted they are kept for [`WebTransport::take_early`]); HTTP/3's own bytes are
    /// consumed here.
    pub fn on_stream_data(&mut self, quic: u64, data: &[u8], fin: bool) -> Option<Deliver> {
        if self.is_local(quic) && quic & 2 != 0 {
            return None; // our unidirectional streams cannot receive
        }
        // The data path: more bytes of a session stream whose header was read.
        if let (Some(PeerStream::Session(stream)), false, Some(_)) =
            (self.peer.get(&quic), fin, self.accepted.as_ref())
        {
            return Some(Deliver { stream: *stream, offset: 0 });
        }
        let state = match self.peer.remove(&quic) {
            Some(s) => s,
            None if self.is_local(quic) => {
                // The peer answering on a bidirectional stream we opened: ours are the CONNECT
                // stream (in `peer` already) and session streams.
                let stream = self.local_session_id(quic)?;
                return Some(Deliver { stream, offset: 0 });
            }
            // QUIC's stream limits bound how many of these a peer can open.
            None => PeerStream::Header(Vec::new()),
        };
        let (next, deliver) = self.advance(quic, state, data, fin);
        if let Some(next) = next {
            self.peer.insert(quic, next);
        }
        if fin && deliver.is_none() {
            self.stream_ended(quic);
        }
        deliver
    }

    /// The peer reset QUIC stream `quic` with HTTP/3 code `code`: the session stream and the
    /// WebTransport application code it carries, for a session stream.
    pub fn on_stream_reset(&mut self, quic: u64, code: u64) -> Option<(u64, u64)> {
        let stream = self.session_id(quic);
        if Some(quic) == self.connect && self.accepted.is_some() && !self.closed {
            self.closed = true;
            self.events.push_back(Event::Closed { code: 0, reason: "CONNECT stream reset".into() });
        } else if Some(quic) == self.peer_control {
            self.fail(code::H3_CLOSED_CRITICAL_STREAM, "control stream reset");
        }
        self.stream_ended(quic);
        stream.map(|s| (s, app_code(code)))
    }

    /// A stream that will carry nothing more: forget its mapping (a session stream's FIN is
    /// delivered with its data; call this after).
    pub fn stream_ended(&mut self, quic: u64) {
        if Some(quic) == self.connect || Some(quic) == self.peer_control {
            return;
        }
        self.peer.remove(&quic);
        if let Some(s) = self.uni_in.remove(&quic) {
            self.uni_back.remove(&s);
        }
    }

    /// A received HTTP datagram: the MoQT payload when it belongs to our session.
    pub fn on_datagram<'a>(&self, data: &'a [u8]) -> Option<&'a [u8]> {
        let connect = self.connect?;
        self.accepted.as_ref()?;
        let mut buf = data;
        let quarter = VarInt::decode(&mut buf).ok()?.into_inner();
        (quarter == connect / 4).then_some(buf)
    }

    /// The prefix of every datagram we send (the quarter stream ID of the CONNECT stream).
    pub fn datagram_prefix(&self) -> Bytes {
        let mut buf = BytesMut::with_capacity(8);
        varint(self.connect.unwrap_or(0) / 4).encode(&mut buf);
        buf.freeze()
    }

    fn advance(
        &mut self,
        quic: u64,
        state: PeerStream,
        data: &[u8],
        fin: bool,
    ) -> (Option<PeerStream>, Option<Deliver>) {
        match state {
            PeerStream::Header(mut buf) => {
                let before = buf.len();
                let take = data.len().min(16);
                buf.extend_from_slice(&data[..take]);
                match self.classify(quic, &buf) {
                    Classified::NeedMore if buf.len() >= 16 || fin => {
                        self.out.push_back(Output::StopSending { quic, code: code::H3_FRAME_ERROR });
                        (Some(PeerStream::Discard), None)
                    }
                    Classified::NeedMore => {
                        let rest = &data[take..];
                        if !rest.is_empty() {
                            // More than 16 bytes and still no header: impossible for a valid one.
                            self.out.push_back(Output::StopSending { quic, code: code::H3_FRAME_ERROR });
                            return (Some(PeerStream::Discard), None);
                        }
                        (Some(PeerStream::Header(buf)), None)
                    }
                    Classified::Is(next, used) if used >= before => {
                        let offset = used - before;
                        let (next, deliver) = self.advance(quic, next, &data[offset..], fin);
                        (next, deliver.map(|d| Deliver { stream: d.stream, offset: d.offset + offset }))
                    }
                    // A state that parses from its first byte (control, request): it gets the
                    // bytes buffered so far, then the new ones.
                    Classified::Is(next, used) => {
                        let next = match next {
                            PeerStream::Control(_) => PeerStream::Control(buf[used..before].to_vec()),
                            PeerStream::Request(_) => PeerStream::Request(buf[used..before].to_vec()),
                            other => other,
                        };
                        self.advance(quic, next, data, fin)
                    }
                }
            }
            PeerStream::Session(stream) => {
                if self.accepted.is_none() {
                    return self.buffer_early(quic, stream, data, fin);
                }
                if fin {
                    self.stream_ended(quic);
                }
                (
                    if fin { None } else { Some(PeerStream::Session(stream)) },
                    Some(Deliver { stream, offset: 0 }),
                )
            }
            PeerStream::Control(buf) => self.on_control_stream(buf, data, fin),
            PeerStream::Request(mut buf) => {
                buf.extend_from_slice(data);
                match self.side {
                    Side::Server => self.on_request(quic, buf, fin),
                    Side::Client => self.on_response(buf, fin),
                }
            }
            PeerStream::Capsules { mut frames, mut capsules } => {
                frames.extend_from_slice(data);
                self.on_connect_stream(&mut frames, &mut capsules);
                if fin {
                    if !self.closed {
                        self.closed = true;
                        self.events.push_back(Event::Closed { code: 0, reason: String::new() });
                    }
                    return (Some(PeerStream::Discard), None);
                }
                (Some(PeerStream::Capsules { frames, capsules }), None)
            }
            PeerStream::Discard => (if fin { None } else { Some(PeerStream::Discard) }, None),
        }
    }

    /// Bytes of the peer's HTTP/3 control stream: its SETTINGS first (a client requires
    /// WebTransport in them), then frames that need no answer, skipped.
    fn on_control_stream(
        &mut self,
        mut buf: Vec<u8>,
        data: &[u8],
        fin: bool,
    ) -> (Option<PeerStream>, Option<Deliver>) {
        if fin {
            self.fail(code::H3_CLOSED_CRITICAL_STREAM, "control stream ended");
            return (Some(PeerStream::Discard), None);
        }
        if self.peer_settings {
            // Later control frames (GOAWAY, MAX_PUSH_ID, ...) need no answer here:
            // they are skipped frame by frame.
            buf.extend_from_slice(data);
            self.skip_control_frames(&mut buf);
            return (Some(PeerStream::Control(buf)), None);
        }
        buf.extend_from_slice(data);
        let mut read = &buf[..];
        match Settings::decode(&mut read) {
            Ok(settings) => {
                if self.side == Side::Client && settings.supports_webtransport() == 0 {
                    self.fail(code::H3_SETTINGS_ERROR, "the server does not offer WebTransport");
                }
                self.peer_settings = true;
                let used = buf.len() - read.len();
                buf.drain(..used);
                self.skip_control_frames(&mut buf);
                (Some(PeerStream::Control(buf)), None)
            }
            Err(web_transport_proto::SettingsError::UnexpectedEnd)
                if buf.len() <= self.limits.max_header_bytes =>
            {
                (Some(PeerStream::Control(buf)), None)
            }
            Err(web_transport_proto::SettingsError::UnexpectedFrame(_)) => {
                self.fail(code::H3_MISSING_SETTINGS, "the control stream must start with SETTINGS");
                (Some(PeerStream::Discard), None)
            }
            Err(e) => {
                self.fail(code::H3_SETTINGS_ERROR, &format!("SETTINGS: {e}"));
                (Some(PeerStream::Discard), None)
            }
        }
    }

    /// What a new peer stream is, from its first bytes: the state for the rest and how many
    /// bytes of `buf` the type and header took.
    fn classify(&mut self, quic: u64, buf: &[u8]) -> Classified {
        let mut read = buf;
        let Ok(kind) = VarInt::decode(&mut read) else { return Classified::NeedMore };
        let kind = kind.into_inner();
        let used = |read: &[u8]| buf.len() - read.len();
        if quic & 2 == 0 {
            // Bidirectional: a WebTransport stream, or an HTTP request (a frame).
            if kind == WT_BIDI_SIGNAL {
                let Ok(session) = VarInt::decode(&mut read) else { return Classified::NeedMore };
                return Classified::Is(self.wt_stream(quic, session.into_inner()), used(read));
            }
            if self.side == Side::Client {
                // A server's bidirectional stream that is not WebTransport (RFC 9114 §6.1).
                self.fail(code::H3_STREAM_CREATION_ERROR, "server-initiated request stream");
                return Classified::Is(PeerStream::Discard, buf.len());
            }
            // A request: its frames are parsed whole, from the first byte.
            return Classified::Is(PeerStream::Request(Vec::new()), 0);
        }
        match kind {
            0x00 => {
                if self.peer_control.is_some() {
                    self.fail(code::H3_STREAM_CREATION_ERROR, "a second control stream");
                    return Classified::Is(PeerStream::Discard, used(read));
                }
                self.peer_control = Some(quic);
                // SETTINGS is decoded with its stream type: keep the whole buffer.
                Classified::Is(PeerStream::Control(Vec::new()), 0)
            }
            0x54 => {
                let Ok(session) = VarInt::decode(&mut read) else { return Classified::NeedMore };
                Classified::Is(self.wt_stream(quic, session.into_inner()), used(read))
            }
            // QPACK encoder/decoder: with no dynamic table there is nothing to act on.
            0x02 | 0x03 => Classified::Is(PeerStream::Discard, used(read)),
            0x01 if self.side == Side::Server => {
                self.fail(code::H3_STREAM_CREATION_ERROR, "a client opened a push stream");
                Classified::Is(PeerStream::Discard, used(read))
            }
            // Unknown and reserved types (RFC 9114 §6.2): abort reading, keep the connection.
            _ => {
                self.out.push_back(Output::StopSending { quic, code: code::H3_STREAM_CREATION_ERROR });
                Classified::Is(PeerStream::Discard, used(read))
            }
        }
    }

    /// A WebTransport stream naming session `session`.
    fn wt_stream(&mut self, quic: u64, session: u64) -> PeerStream {
        let ours = self.connect.is_some_and(|c| c == session) || (self.connect.is_none() && session == 0);
        if !ours || self.closed {
            let code = if self.closed { code::WT_SESSION_GONE } else { code::WT_BUFFERED_STREAM_REJECTED };
            self.out.push_back(Output::StopSending { quic, code });
            if quic & 2 == 0 {
                self.out.push_back(Output::Reset { quic, code });
            }
            return PeerStream::Discard;
        }
        let stream = if quic & 2 == 0 {
            match self.side {
                // The client's bidirectional stream 0 is the CONNECT stream.
                Side::Server => match quic.checked_sub(4) {
                    Some(s) => s,
                    None => return PeerStream::Discard,
                },
                Side::Client => quic,
            }
        } else {
            let s = self.next_peer_uni;
            self.next_peer_uni += 4;
            self.uni_in.insert(quic, s);
            self.uni_back.insert(s, quic);
            s
        };
        PeerStream::Session(stream)
    }

    /// Keeps payload the caller got as [`Deliver`] but cannot hand to a session yet (the
    /// session is made once the CONNECT is accepted, possibly in the middle of a read): it is
    /// returned by [`WebTransport::take_early`], under the same limit.
    pub fn hold(&mut self, quic: u64, stream: u64, data: &[u8], fin: bool) {
        if let (Some(next), _) = self.buffer_early(quic, stream, data, fin) {
            // A refusal (over the limit) left the stream discarded: keep that state.
            if matches!(next, PeerStream::Discard) {
                self.peer.insert(quic, next);
            }
        }
    }

    fn buffer_early(
        &mut self,
        quic: u64,
        stream: u64,
        data: &[u8],
        fin: bool,
    ) -> (Option<PeerStream>, Option<Deliver>) {
        if !self.early.hold(stream, data, fin, self.limits.max_early_bytes) {
            self.out.push_back(Output::StopSending { quic, code: code::WT_BUFFERED_STREAM_REJECTED });
            return (Some(PeerStream::Discard), None);
        }
        (if fin { None } else { Some(PeerStream::Session(stream)) }, None)
    }

    /// Skips whole frames of the peer's control stream after SETTINGS (a second SETTINGS is
    /// an error; a frame too large to be a control frame closes the connection).
    fn skip_control_frames(&mut self, buf: &mut Vec<u8>) {
        loop {
            let mut read = &buf[..];
            let (Ok(kind), Ok(len)) = (VarInt::decode(&mut read), VarInt::decode(&mut read)) else { return };
            let (kind, len) = (kind.into_inner(), len.into_inner());
            if kind == 0x04 {
                return self.fail(code::H3_FRAME_UNEXPECTED, "a second SETTINGS frame");
            }
            if matches!(kind, 0x00 | 0x01) {
                return self.fail(code::H3_FRAME_UNEXPECTED, "DATA or HEADERS on the control stream");
            }
            let header = buf.len() - read.len();
            let Ok(len) = usize::try_from(len) else {
                return self.fail(code::H3_EXCESSIVE_LOAD, "control frame too large");
            };
            if len > self.limits.max_header_bytes {
                return self.fail(code::H3_EXCESSIVE_LOAD, "control frame too large");
            }
            if read.len() < len {
                return;
            }
            buf.drain(..header + len);
        }
    }

    /// A request stream's bytes (server): the CONNECT of the session, or a request we answer
    /// with an error status.
    fn on_request(&mut self, quic: u64, buf: Vec<u8>, fin: bool) -> (Option<PeerStream>, Option<Deliver>) {
        let mut read = &buf[..];
        let request = ConnectRequest::decode(&mut read);
        let used = buf.len() - read.len();
        match request {
            Err(ConnectError::UnexpectedEnd) if !fin && buf.len() <= self.limits.max_header_bytes + 16 => {
                (Some(PeerStream::Request(buf)), None)
            }
            Err(ConnectError::UnexpectedEnd) if !fin => {
                self.respond(quic, 431, None);
                (Some(PeerStream::Discard), None)
            }
            Err(ConnectError::FieldSectionTooLarge | ConnectError::FrameTooLarge) => {
                self.respond(quic, 431, None);
                (Some(PeerStream::Discard), None)
            }
            Err(ConnectError::UnexpectedFrame(_)) => {
                // RFC 9114 §4.1: a request must start with HEADERS.
                self.fail(code::H3_FRAME_UNEXPECTED, "a request that does not start with HEADERS");
                (Some(PeerStream::Discard), None)
            }
            Err(ConnectError::WrongMethod(_) | ConnectError::WrongProtocol(_)) => {
                // Not a WebTransport CONNECT: nothing else is served over HTTP/3 here.
                self.respond(quic, 404, None);
                (Some(PeerStream::Discard), None)
            }
            Err(ConnectError::QpackError(_)) => {
                self.fail(0x200, "QPACK decompression failed"); // QPACK_DECOMPRESSION_FAILED
                (Some(PeerStream::Discard), None)
            }
            Err(_) => {
                // Malformed (RFC 9114 §4.1.2): a stream error H3_MESSAGE_ERROR, answered 400.
                self.respond(quic, 400, None);
                (Some(PeerStream::Discard), None)
            }
            Ok(_) if self.connect.is_some() => {
                // One session per connection (SETTINGS_WT_MAX_SESSIONS = 1).
                self.respond(quic, 429, None);
                (Some(PeerStream::Discard), None)
            }
            Ok(request) => {
                let protocol = if request.protocols.is_empty() {
                    Some(self.default_protocol.clone())
                } else {
                    request.protocols.iter().find(|p| self.protocols.contains(p)).cloned()
                };
                let Some(protocol) = protocol else {
                    // None of the offered MoQT versions is spoken here.
                    self.respond(quic, 400, None);
                    return (Some(PeerStream::Discard), None);
                };
                if fin {
                    self.respond(quic, 400, None);
                    return (Some(PeerStream::Discard), None);
                }
                let path = path_and_query(&request.url);
                self.connect = Some(quic);
                let offered = !request.protocols.is_empty();
                self.respond(quic, 200, offered.then_some(protocol.as_str()));
                let authority = request.url.authority().to_string();
                let accepted = Accepted { protocol, negotiated: offered, authority, path };
                self.accepted = Some(accepted.clone());
                self.events.push_back(Event::Accepted(accepted));
                let mut frames = buf;
                frames.drain(..used);
                let mut capsules = Vec::new();
                self.on_connect_stream(&mut frames, &mut capsules);
                (Some(PeerStream::Capsules { frames, capsules }), None)
            }
        }
    }

    /// Answers request stream `quic` with `status` (and WT-Protocol `protocol`); anything but
    /// 200 ends the stream.
    fn respond(&mut self, quic: u64, status: u16, protocol: Option<&str>) {
        let Ok(status_code) = web_transport_proto::http::StatusCode::from_u16(status) else { return };
        let mut response = ConnectResponse::new(status_code);
        if let Some(p) = protocol {
            response = response.with_protocol(p);
        }
        let mut buf = BytesMut::new();
        if response.encode(&mut buf).is_err() {
            return;
        }
        let fin = status != 200;
        self.out.push_back(Output::Stream { quic, data: buf.freeze(), fin });
        if fin {
            self.out.push_back(Output::StopSending { quic, code: code::H3_NO_ERROR });
        }
    }

    /// The server's answer to our CONNECT (client).
    fn on_response(&mut self, buf: Vec<u8>, fin: bool) -> (Option<PeerStream>, Option<Deliver>) {
        let mut read = &buf[..];
        match ConnectResponse::decode(&mut read) {
            Err(ConnectError::UnexpectedEnd) if !fin && buf.len() <= self.limits.max_header_bytes + 16 => {
                (Some(PeerStream::Request(buf)), None)
            }
            Ok(response) => {
                let used = buf.len() - read.len();
                let negotiated = response.protocol.is_some();
                let protocol = match response.protocol {
                    Some(p) => p,
                    // A server that chose none: the client's first offer is what it speaks.
                    None => self.protocols.first().cloned().unwrap_or_default(),
                };
                let (authority, path) = self.pending_request.take().unwrap_or_default();
                let accepted = Accepted { protocol, negotiated, authority, path };
                self.accepted = Some(accepted.clone());
                self.events.push_back(Event::Accepted(accepted));
                let mut frames = buf;
                frames.drain(..used);
                let mut capsules = Vec::new();
                self.on_connect_stream(&mut frames, &mut capsules);
                if fin {
                    self.closed = true;
                    self.events.push_back(Event::Closed { code: 0, reason: String::new() });
                    return (Some(PeerStream::Discard), None);
                }
                (Some(PeerStream::Capsules { frames, capsules }), None)
            }
            Err(ConnectError::WrongStatus(status)) => {
                let status = status.map_or(0, |s| s.as_u16());
                self.closed = true;
                self.events.push_back(Event::Refused { status });
                (Some(PeerStream::Discard), None)
            }
            Err(e) => {
                self.fail(code::H3_MESSAGE_ERROR, &format!("CONNECT response: {e}"));
                (Some(PeerStream::Discard), None)
            }
        }
    }

    /// The CONNECT stream's frames after its HEADERS: DATA payloads join the capsule stream,
    /// other frames (trailers, reserved types) are skipped; whole capsules are acted on. A
    /// frame or capsule larger than the header limit closes the connection (nothing this
    /// session expects there is that large).
    fn on_connect_stream(&mut self, frames: &mut Vec<u8>, capsules: &mut Vec<u8>) {
        loop {
            let mut read = &frames[..];
            let (Ok(kind), Ok(len)) = (VarInt::decode(&mut read), VarInt::decode(&mut read)) else { break };
            let header = frames.len() - read.len();
            let len = usize::try_from(len.into_inner()).unwrap_or(usize::MAX);
            if len > self.limits.max_header_bytes {
                return self.fail(code::H3_EXCESSIVE_LOAD, "frame on the CONNECT stream too large");
            }
            if read.len() < len {
                break;
            }
            if kind.into_inner() == 0x00 {
                capsules.extend_from_slice(&read[..len]);
            }
            frames.drain(..header + len);
        }
        if capsules.len() > self.limits.max_header_bytes {
            return self.fail(code::H3_EXCESSIVE_LOAD, "capsule too large");
        }
        self.on_capsules(capsules);
    }

    /// Whole capsules of the capsule stream (RFC 9297 §3.2); the rest of a partial one stays.
    fn on_capsules(&mut self, buf: &mut Vec<u8>) {
        while !buf.is_empty() {
            let mut read = &buf[..];
            let capsule = match Capsule::decode(&mut read) {
                Ok(c) => c,
                Err(
                    web_transport_proto::CapsuleError::UnexpectedEnd
                    | web_transport_proto::CapsuleError::VarInt(_),
                ) => return,
                Err(e) => {
                    return self.fail(code::H3_MESSAGE_ERROR, &format!("capsule: {e}"));
                }
            };
            let used = buf.len() - read.len();
            buf.drain(..used);
            match capsule {
                Capsule::CloseWebTransportSession { code, reason } if !self.closed => {
                    self.closed = true;
                    self.events.push_back(Event::Closed { code, reason });
                }
                Capsule::Unknown { typ, .. } if typ.into_inner() == CAPSULE_DRAIN => {
                    self.events.push_back(Event::Draining);
                }
                _ => {}
            }
        }
    }

    // -----------------------------------------------------------------------------------------
    // Output
    // -----------------------------------------------------------------------------------------

    /// Closes the session: CLOSE_WEBTRANSPORT_SESSION with the application `code` and `reason`
    /// on the CONNECT stream, which then ends.
    pub fn close(&mut self, code: u32, reason: &str) {
        let Some(connect) = self.connect else { return };
        if self.close_sent || self.accepted.is_none() {
            return;
        }
        self.closed = true;
        self.close_sent = true;
        // The reason is cut to what the capsule allows (at most 1024 bytes, at a char boundary).
        let mut end = reason.len().min(1024);
        while !reason.is_char_boundary(end) {
            end -= 1;
        }
        let capsule = Capsule::CloseWebTransportSession { code, reason: reason[..end].to_string() };
        let mut buf = BytesMut::new();
        capsule.encode(&mut buf);
        self.out.push_back(Output::Stream { quic: connect, data: data_frame(&buf), fin: true });
    }

    /// Asks the peer to drain the session (DRAIN_WEBTRANSPORT_SESSION), as MoQT's GOAWAY does.
    pub fn drain(&mut self) {
        let Some(connect) = self.connect else { return };
        if self.closed {
            return;
        }
        let mut buf = BytesMut::new();
        varint(CAPSULE_DRAIN).encode(&mut buf);
        buf.put_u8(0); // no payload
        self.out.push_back(Output::Stream { quic: connect, data: data_frame(&buf), fin: false });
    }

    fn fail(&mut self, code: u64, reason: &str) {
        if self.out.iter().any(|o| matches!(o, Output::Close { .. })) {
            return;
        }
        self.closed = true;
        self.out.push_back(Output::Close { code, reason: reason.to_string() });
    }
}

/// What [`WebTransport::classify`] found.
enum Classified {
    NeedMore,
    Is(PeerStream, usize),
}

/// A URL's `:path`: its path and query.
fn path_and_query(url: &url::Url) -> String {
    match url.query() {
        Some(q) => format!("{}?{q}", url.path()),
        None => url.path().to_string(),
    }
}

/// `payload` in an HTTP/3 DATA frame (capsules travel in DATA frames, RFC 9297 §3.2).
fn data_frame(payload: &[u8]) -> Bytes {
    let mut buf = BytesMut::with_capacity(payload.len() + 9);
    Frame(VarInt::from_u32(0)).encode(&mut buf);
    varint(payload.len() as u64).encode(&mut buf);
    buf.put_slice(payload);
    buf.freeze()
}

fn varint(v: u64) -> VarInt {
    VarInt::from_u64(v).unwrap_or(VarInt::MAX)
}

/// A WebTransport application error code as the HTTP/3 code on the wire (stream resets and
/// STOP_SENDING, draft-ietf-webtrans-http3 §4.4). MoQT's codes are far below 2^32.
pub fn wire_code(app: u64) -> u64 {
    error_to_http3(u32::try_from(app).unwrap_or(u32::MAX))
}

/// The WebTransport application code an HTTP/3 stream error carries; a code outside the
/// WebTransport range (an HTTP/3 error of the peer's stack) reads as 0.
pub fn app_code(wire: u64) -> u64 {
    error_from_http3(wire).map_or(0, u64::from)
}

#[cfg(test)]
mod tests;
