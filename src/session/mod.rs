//! `session`: one MoQT session per QUIC connection, as a sans-IO state machine. Stream bytes
//! and stream events go in; version-neutral [`Event`]s and [`Transmit`]s (bytes to write,
//! streams to reset, the session to close) come out. It never touches quiche, sockets or a
//! clock: the runtime feeds it, the relay reads its events and calls [`Session::send`].
//!
//! Both drafts sit behind one API. draft-16 carries every control message on one
//! bidirectional control stream (plus a bidirectional stream per SUBSCRIBE_NAMESPACE);
//! draft-22 opens a unidirectional control stream each way (SETUP, GOAWAY) and one
//! bidirectional stream per request, whose responses travel on the same stream.

mod control;
mod error;
mod requests;
mod streams;

pub use control::{Session, SessionConfig};
pub use error::{SessionCode, SessionError};

use crate::wire::model::{Message, RequestId, SetupOptions};

/// What the session asks the transport to do, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transmit {
    /// Append `data` to stream `id` (opening it when new); `fin` ends our direction.
    Stream { id: u64, data: Vec<u8>, fin: bool },
    /// End our sending direction of `id` abruptly with an application error code.
    Reset { id: u64, code: u64 },
    /// Ask the peer to stop sending on `id`.
    StopSending { id: u64, code: u64 },
    /// Close the connection with an application error code (a session termination code).
    Close { code: u64, reason: String },
}

/// What happened on the session, in version-neutral terms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// The SETUP exchange finished: requests may flow. `peer` is the peer's setup options.
    Ready { peer: SetupOptions },
    /// A control message from the peer: a request, a response, an update, a namespace
    /// message. Responses carry the Request ID they answer in both drafts.
    Message(Message),
    /// A message that names no Request ID on the wire and belongs to request `request_id`
    /// (NAMESPACE / NAMESPACE_DONE on a SUBSCRIBE_NAMESPACE stream, both drafts).
    RequestMessage { request_id: RequestId, message: Message },
    /// The peer cancelled request `request_id` (draft-22: reset or STOP_SENDING on its
    /// request stream; draft-16 expresses this with UNSUBSCRIBE/FETCH_CANCEL/... messages).
    Cancelled { request_id: RequestId },
    /// The session is over (by the peer, or by us after a protocol violation).
    Closed { code: u64, reason: String },
}
