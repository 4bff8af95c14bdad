//! What a [`WebTransport`](crate::WebTransport) session asks of the transport ([`Output`]) and
//! tells its application ([`Event`]).

use bytes::Bytes;

use crate::Accepted;

/// What the transport is asked to do, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Output {
    /// Append `data` to QUIC stream `quic` (`fin`: end our direction).
    Stream {
        /// The QUIC stream.
        quic: u64,
        /// The bytes.
        data: Bytes,
        /// Whether they end our direction.
        fin: bool,
    },
    /// Ask the peer to stop sending on QUIC stream `quic` with an HTTP/3 error code.
    StopSending {
        /// The QUIC stream.
        quic: u64,
        /// The HTTP/3 error code.
        code: u64,
    },
    /// Reset our direction of QUIC stream `quic` with an HTTP/3 error code.
    Reset {
        /// The QUIC stream.
        quic: u64,
        /// The HTTP/3 error code.
        code: u64,
    },
    /// Close the QUIC connection with an HTTP/3 error code (a connection error).
    Close {
        /// The HTTP/3 error code.
        code: u64,
        /// Why, for the peer's logs.
        reason: String,
    },
}

/// What happened to the WebTransport session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// Server: a CONNECT was accepted (answered 200); the MoQT session may start.
    /// Client: the server answered 200.
    Accepted(Accepted),
    /// Client: the server refused the CONNECT with this status.
    Refused {
        /// The response's HTTP status.
        status: u16,
    },
    /// The peer closed the session (CLOSE_WEBTRANSPORT_SESSION, or the CONNECT stream ended).
    Closed {
        /// The application's code (MoQT's session termination code).
        code: u32,
        /// The peer's reason.
        reason: String,
    },
    /// The peer asked to drain the session (DRAIN_WEBTRANSPORT_SESSION).
    Draining,
}
