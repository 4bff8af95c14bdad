//! The parts of a [`Session`](super::Session)'s state, by concern: its SETUP exchange, its
//! control streams, GOAWAY in each direction, and the request streams.

use ahash::HashMap;
use std::time::Instant;

use wire::model::{RequestId, SetupOptions};

use super::ReqStream;
use crate::streams::{ClosedStreams, RecvBuf, StreamId};

/// The SETUP exchange: what we send, what the peer sent, and what waits for it.
#[derive(Debug)]
pub(super) struct SetupState {
    /// Our SETUP options.
    pub local: SetupOptions,
    /// Whether our SETUP went out.
    pub sent: bool,
    /// The peer's, once received.
    pub peer: Option<SetupOptions>,
    /// Both sides' SETUP exchanged: the session is set up.
    pub ready: bool,
    /// What the transport already said about the peer's setup (a WebTransport CONNECT's
    /// authority, path and URL token): merged into the peer's SETUP options.
    pub transport: Option<SetupOptions>,
    /// The session closes with CONTROL_MESSAGE_TIMEOUT if SETUP has not completed by then.
    pub deadline: Option<Instant>,
    /// Peer streams waiting for SETUP, in arrival order.
    pub waiting: Vec<StreamId>,
}

/// The control streams.
#[derive(Debug)]
pub(super) struct ControlStreams {
    /// Our sending control stream (draft-16: 0; draft-22: our first unidirectional stream).
    pub local: StreamId,
    /// The peer's control stream once known (draft-16: 0).
    pub peer: Option<StreamId>,
    /// What arrived on it and is not a whole message yet.
    pub recv: RecvBuf,
    /// draft-22: peer unidirectional streams whose type is not yet known.
    pub uni_pending: HashMap<StreamId, RecvBuf>,
}

/// GOAWAY, each way.
#[derive(Debug, Default)]
pub(super) struct GoAways {
    /// The peer sent GOAWAY.
    pub received: bool,
    /// draft-18: we sent a control-stream GOAWAY, so every request the peer opens from now on
    /// is refused with GOING_AWAY (§10.4).
    pub sent: bool,
}

/// The request streams (drafts 18 to 22; on drafts 14 and 16 requests share the control
/// stream and only the request IDs are kept here).
#[derive(Debug)]
pub(super) struct Requests {
    /// Streams with a request on them, both sides'.
    pub streams: HashMap<StreamId, ReqStream>,
    /// Peer-opened bidirectional streams already finished with (late bytes are ignored).
    pub closed_peer: ClosedStreams,
    /// The stream each request is on.
    pub by_request: HashMap<RequestId, StreamId>,
    /// The next bidirectional stream we open.
    pub next_local_bidi: StreamId,
    /// Bytes buffered on peer-opened request streams (bounded by `max_request_buffer`).
    pub buffered: usize,
    /// Peer-opened bidirectional streams in `streams` (bounded by `max_peer_streams`).
    pub peer_count: usize,
}
