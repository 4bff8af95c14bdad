//! `session`: one MoQT session per QUIC connection, as a sans-IO state machine. Stream bytes
//! and stream events go in; version-neutral [`Event`]s and [`Transmit`]s (bytes to write,
//! streams to reset, the session to close) come out. It never touches quiche, sockets or a
//! clock: the runtime feeds it, the relay reads its events and calls [`Session::send`].
//!
//! Every draft sits behind one API. draft-14 carries every control message on one
//! bidirectional control stream (`control/d14.rs` maps its per-kind answers, SUBSCRIBE_UPDATE
//! and namespace-named messages); draft-16 does too (plus a bidirectional stream per
//! SUBSCRIBE_NAMESPACE);
//! draft-22 opens a unidirectional control stream each way (SETUP, GOAWAY) and one
//! bidirectional stream per request, whose responses travel on the same stream.
//!
//! The data plane (`data`, `control/data_in.rs`, `control/data_out.rs`): peer subgroup and
//! fetch streams are parsed incrementally into [`Event::Object`]s whose payloads are `Bytes`
//! slices of the receive buffer, datagrams into [`Event::Datagram`]; Track Aliases from
//! SUBSCRIBE_OK / PUBLISH resolve them to Request IDs. Outgoing subgroup streams, fetch streams
//! and datagrams are queued as [`Transmit`]s with the caller's payload `Bytes` uncopied.
//!
//! # Streams per draft
//!
//! Every stream the session names is a `StreamId`, the stream as QUIC numbers it (RFC 9000 §2.1);
//! over WebTransport the `moqt` Pump maps it to and from the QUIC stream that carries it. The relay
//! keys its streams by it too. draft-18 and draft-22 (`Version::request_streams`): each side's
//! SETUP on its own unidirectional stream, each request on a new bidirectional stream with its
//! responses; request streams that arrive before SETUP are buffered (16 streams, 64 KiB each).
//! draft-18 sessions behave as draft-22 ones except where the wire differs: the control-stream
//! GOAWAY carries the first peer Request ID not used, and once it is sent the session itself
//! refuses new peer requests with GOING_AWAY (§10.4), there is no MAX_REQUEST_UPDATES, PUBLISH_OK
//! carries FORWARD (`Session::publish_ok_has_forward`), FETCH_OK can end at a whole group, and
//! joining FETCHes exist.
//!
//! # Draft-14
//!
//! Its session (`control/d14.rs`; `tests/pair.rs`, `tests/data.rs` and `tests/draft14.rs` run
//! it) keeps draft-16's streams and Request IDs, and adds:
//!
//! - version negotiation (§9.3.1): 0xff00000e offered and selected, else
//!   VERSION_NEGOTIATION_FAILED;
//! - the kind of each peer request until it is answered, so the caller's `RequestOk` /
//!   `RequestError` is written as that kind's answer and codes read by kind
//!   (`Session::peer_request_error_of`);
//! - REQUEST_UPDATE as SUBSCRIBE_UPDATE: the session keeps each subscription's filter, Largest
//!   Location, priority and Forward, merges the update and writes the whole state; parameters
//!   draft-14 lacks are dropped; no answer is awaited;
//! - namespace-named PUBLISH_NAMESPACE_DONE / _CANCEL / UNSUBSCRIBE_NAMESPACE, mapped to and from
//!   Request IDs; discovery by PUBLISH_NAMESPACE under a SUBSCRIBE_NAMESPACE prefix, reported as
//!   NAMESPACE as at draft-16;
//! - an inherited publisher priority written as 128; Does Not Exist objects arrive as objects.
//!
//! Over WebTransport draft-14 names no protocol: the first bytes of the client's control stream
//! tell its CLIENT_SETUP from draft-16's (`Version::sniff_client_setup`).
//!
//! # Data and limits
//!
//! Every peer unidirectional stream that is not a control stream is parsed incrementally. A
//! second live request with the same Track Alias closes with DUPLICATE_TRACK_ALIAS; a stream for
//! an alias not yet known is held (16 streams, 1 MiB) and released in order when it appears. Local
//! limits (object size 8 MiB, 256 data streams, 32 MiB buffered; 1000 peer request streams, 2 MiB
//! of partial messages) refuse the stream with STOP_SENDING (EXCESSIVE_LOAD; draft-16 CANCELLED),
//! not the session. A subscriber's session keeps the aliases of the 64 most recent subscriptions
//! ended by PUBLISH_DONE, so streams the message overtook are still delivered (draft-22 §9.9).
//! Not yet: a time limit on held data, discarding data of ended aliases at once, checking
//! FETCH_HEADER request IDs.

#![warn(missing_docs, unreachable_pub)]

mod control;
mod data;
mod error;
mod requests;
mod streams;

pub use control::{Session, SessionConfig, SessionUsage};
pub use data::{DataLimits, DataObject};
pub use error::{SessionCode, SessionError};
pub use streams::StreamId;

use std::time::Instant;

use bytes::Bytes;

use wire::model::{DatagramHeader, Message, RequestId, SetupOptions};

/// What the session asks the transport to do, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transmit {
    /// Append `data` to stream `id` (opening it when new); `fin` ends our direction.
    /// `data` is `Bytes` so object payloads travel uncopied. `expires`: object bytes under a
    /// delivery timeout (draft-22 §5.2 OBJECT_DELIVERY_TIMEOUT, draft-16 DELIVERY_TIMEOUT)
    /// must be handed to the transport by then; if not, the stream is reset with
    /// DELIVERY_TIMEOUT instead.
    Stream {
        /// The stream.
        id: StreamId,
        /// The bytes to append.
        data: Bytes,
        /// Whether they end our direction.
        fin: bool,
        /// When object bytes under a delivery timeout must be handed over by.
        expires: Option<Instant>,
    },
    /// The finished data stream `id` must be fully delivered by `at` (draft-22 §5.2
    /// SUBGROUP_DELIVERY_TIMEOUT); if the peer has not acknowledged all of it by then, the
    /// stream is reset with DELIVERY_TIMEOUT.
    DeliverBy {
        /// The finished data stream.
        id: StreamId,
        /// When it must be fully delivered by.
        at: Instant,
    },
    /// What is written to stream `id` from here on waits until every data stream in `streams`
    /// is fully acknowledged by the peer or reset, or until `until`: a message that must not
    /// overtake the data it counts (PUBLISH_DONE after its subgroup streams). A transport that
    /// cannot tell sends it at once.
    Hold {
        /// The stream whose later writes wait.
        id: StreamId,
        /// The data streams they wait for.
        streams: Vec<StreamId>,
        /// How long they wait at most.
        until: Instant,
    },
    /// End our sending direction of `id` abruptly with an application error code.
    Reset {
        /// The stream.
        id: StreamId,
        /// The application error code.
        code: u64,
    },
    /// Ask the peer to stop sending on `id`.
    StopSending {
        /// The stream.
        id: StreamId,
        /// The application error code.
        code: u64,
    },
    /// Send one QUIC DATAGRAM (an OBJECT_DATAGRAM); datagrams queued together go most
    /// urgent first (same scale as [`data_urgency`]).
    Datagram {
        /// The datagram.
        data: Bytes,
        /// Its urgency (lower goes first).
        urgency: u8,
    },
    /// Close the connection with an application error code (a session termination code).
    Close {
        /// The session termination code.
        code: u64,
        /// Why, for the peer's logs.
        reason: String,
    },
    /// Send stream `id` with this QUIC urgency (lower goes first; streams default to 127,
    /// which keeps control and request streams ahead of data streams, all 128 or more);
    /// `descending`: among streams of equal urgency, newer (higher ID) ones first (a
    /// subscription's descending GROUP_ORDER), instead of older first.
    Priority {
        /// The stream.
        id: StreamId,
        /// Its QUIC urgency.
        urgency: u8,
        /// Newer streams of equal urgency first.
        descending: bool,
    },
}

/// The QUIC urgency of a data stream (draft-22 §5.1: subscriber priority first, then
/// publisher priority; lower is more urgent): 128 + the two priorities' top 4 and 3 bits, so
/// control and request streams (urgency 127) always go first. Streams of equal urgency go in
/// stream ID order, oldest (lowest group) first.
pub fn data_urgency(subscriber_priority: u8, publisher_priority: u8) -> u8 {
    128 | (subscriber_priority >> 4) << 3 | publisher_priority >> 5
}

/// What happened on the session, in version-neutral terms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// The SETUP exchange finished: requests may flow. `peer` is the peer's setup options.
    Ready {
        /// The peer's setup options.
        peer: SetupOptions,
    },
    /// A control message from the peer: a request, a response, an update, a namespace
    /// message. Responses carry the Request ID they answer in every draft.
    Message(Message),
    /// A message that names no Request ID on the wire and belongs to request `request_id`
    /// (NAMESPACE / NAMESPACE_DONE on a SUBSCRIBE_NAMESPACE stream, every draft).
    RequestMessage {
        /// The request it belongs to.
        request_id: RequestId,
        /// The message.
        message: Message,
    },
    /// The peer cancelled request `request_id` (draft-22: reset or STOP_SENDING on its
    /// request stream; draft-16 expresses this with UNSUBSCRIBE/FETCH_CANCEL/... messages).
    Cancelled {
        /// The request cancelled.
        request_id: RequestId,
    },
    /// A whole object (or fetch End of Range) from data stream `stream`, for request
    /// `request_id` (a subgroup stream's Track Alias resolved; a fetch stream's Request ID).
    /// `payload` shares the receive buffer (no copy).
    Object {
        /// The data stream.
        stream: StreamId,
        /// The request it answers.
        request_id: RequestId,
        /// The object.
        object: DataObject,
        /// Its payload.
        payload: Bytes,
    },
    /// A data stream that produced `Object` events ended: `reset` is `None` after FIN, the
    /// peer's reset code, or the STOP_SENDING code we sent when we abandoned it (object over
    /// [`DataLimits::max_object_size`]).
    DataStreamEnd {
        /// The data stream.
        stream: StreamId,
        /// `None` after FIN, else the reset or STOP_SENDING code.
        reset: Option<u64>,
    },
    /// An object datagram for request `request_id` (status datagrams have an empty payload).
    Datagram {
        /// The request it answers.
        request_id: RequestId,
        /// Its header.
        header: DatagramHeader,
        /// Its payload.
        payload: Bytes,
    },
    /// The session is over (by the peer, or by us after a protocol violation).
    Closed {
        /// The session termination code.
        code: u64,
        /// The reason given.
        reason: String,
    },
}
