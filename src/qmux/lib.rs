//! QMux (draft-ietf-quic-qmux): QUIC v1's stream and datagram frames over a reliable, ordered
//! byte stream, sans-IO. One [`Connection`] speaks one of three wire versions
//! ([`Version::Qmux00`], [`Version::Qmux01`], [`Version::Qmux02`]) over one of two carriers:
//! WebSocket binary messages after an HTTP/1.1 upgrade ([`Framing::WebSocket`]), or the
//! draft's own records straight on TLS/TCP ([`Framing::Records`]).
//!
//! The caller moves bytes: socket bytes into [`Connection::recv`], [`Connection::take_output`]
//! out to the socket, and drives [`Connection::on_timeout`] at [`Connection::timeout_instant`].
//! Streams follow quiche's API and semantics, so code written for quiche's `Connection` calls
//! these the same way.
//!
//! # Wire choices
//! - Each frame we send goes in its own record: on -01/-02 one record is one WebSocket
//!   binary message (the message boundary replaces the record's Size field), on -00 one
//!   message is exactly one frame (what the browser client, npm `@moq/qmux`, expects).
//! - STREAM frames always carry Offset and Length (types 0x0e/0x0f), and each stream's bytes
//!   go out in order exactly once. On receipt, a STREAM frame whose offset is not the next
//!   expected byte (duplicates included) is a PROTOCOL_VIOLATION (draft-ietf-quic-qmux-01
//!   §4.1, -00 §4.1.2).
//! - Violations close with RFC 9000 §20.1 transport codes as the drafts require; the browser
//!   client sends 1002 (and 1003 for a text message) instead, which we accept as any code.
//!
//! # WebSocket framing
//! RFC 6455 §5 framing is written by hand in `ws.rs` (about 250 lines). `tungstenite` exposes
//! `protocol::frame::FrameHeader::parse` (a header from a `Cursor`, `None` until it is whole)
//! and `format` (to an `io::Write`), but payload reassembly, unmasking, the size limits and
//! the control-frame rules would still be ours, and the crate brings `http`, `rand`, `sha1`
//! and `log` along with its I/O-bound `WebSocket` type. The hand-written parser is a push
//! parser that fits `recv` (bytes in any split) and refuses an oversized message from its
//! header, before buffering it.
//!
//! # Serving it (ARCHITECTURE.md, "Transports")
//!
//! The web listener's thread answers the upgrade (`src/websocket.rs` in the `moq-edge` package):
//! `GET` with `Upgrade: websocket`, version 13, a 16-byte key, and a `qmux-VV.moqt-NN` the relay
//! speaks, chosen by the relay's preference (its drafts in order, then -01, -02, -00). A core
//! adopts the socket; this crate's state is serviced in the core's turn. Bounds: the core reads
//! at most 256 KiB not yet fed here and writes at most 256 KiB; we take stream data only while
//! our output holds under `Config::max_output` (256 KiB), so `stream_capacity` falls to zero and
//! the MoQT layer's shedding applies. We grant 256 bidirectional and 1024 unidirectional streams
//! (replenished), MAX_DATA 4 MiB, MAX_STREAM_DATA 1 MiB; a quiet peer is closed at the idle
//! timeout (QX_PING at a third of it on -01/-02, a WebSocket Ping every 5 s on -00).

#![warn(missing_docs, unreachable_pub)]

use std::collections::HashMap;
use std::time::Duration;

use bytes::BytesMut;

mod conn;
mod dgrams;
mod frame;
mod input;
pub mod params;
mod streams;
pub mod upgrade;
mod varint;
mod ws;

pub use frame::code;
pub use params::TransportParams;

/// QMux wire format version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Version {
    /// draft-ietf-quic-qmux-00: frames directly on the stream, no records, no QX_PING.
    Qmux00,
    /// draft-ietf-quic-qmux-01: records, QX_PING, max_record_size, datagrams.
    Qmux01,
    /// draft-ietf-quic-qmux-02: -01's wire format with stricter parameter and ping rules.
    Qmux02,
}

/// What carries the QMux records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// WebSocket binary messages after an HTTP/1.1 upgrade (RFC 6455).
    WebSocket,
    /// Records with their Size field, directly on the byte stream (TLS on TCP); on -00,
    /// which has no records, frames back to back (draft-ietf-quic-qmux-00 §4).
    Records,
}

/// Which side of the connection this is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Accepted the byte stream (the relay).
    Server,
    /// Opened it.
    Client,
}

/// What this side offers and bounds.
#[derive(Debug, Clone)]
pub struct Config {
    /// Closes the connection when nothing arrives for this long (zero: never).
    pub max_idle_timeout: Duration,
    /// Connection-level flow-control credit given at the start (RFC 9000 §18.2).
    pub initial_max_data: u64,
    /// Credit for each bidirectional stream we open.
    pub initial_max_stream_data_bidi_local: u64,
    /// Credit for each bidirectional stream the peer opens.
    pub initial_max_stream_data_bidi_remote: u64,
    /// Credit for each unidirectional stream the peer opens.
    pub initial_max_stream_data_uni: u64,
    /// Bidirectional streams the peer may open at the start.
    pub initial_max_streams_bidi: u64,
    /// Unidirectional streams the peer may open at the start.
    pub initial_max_streams_uni: u64,
    /// The largest record (WebSocket message) we accept; raised to 16382 if lower
    /// (draft-ietf-quic-qmux-01 §5.2). Not advertised on -00, which accepts 16384-byte frames.
    pub max_record_size: u64,
    /// RFC 9221's parameter; 0 = datagrams off. Ignored on -00.
    pub max_datagram_frame_size: u64,
    /// Stream data is encoded into the output only while it holds less than this.
    pub max_output: usize,
    /// Server role over WebSocket: send a WebSocket Ping this often (zero = never).
    pub ws_ping_interval: Duration,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            max_idle_timeout: Duration::from_secs(30),
            initial_max_data: 4 << 20,
            initial_max_stream_data_bidi_local: 1 << 20,
            initial_max_stream_data_bidi_remote: 1 << 20,
            initial_max_stream_data_uni: 1 << 20,
            initial_max_streams_bidi: 256,
            initial_max_streams_uni: 1024,
            max_record_size: params::DEFAULT_MAX_RECORD_SIZE,
            max_datagram_frame_size: params::DEFAULT_MAX_RECORD_SIZE,
            max_output: 256 << 10,
            ws_ping_interval: Duration::from_secs(5),
        }
    }
}

/// Which direction of a stream to end abruptly.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shutdown {
    /// The peer's: STOP_SENDING.
    Read,
    /// Ours: RESET_STREAM.
    Write,
}

/// What a call on a [`Connection`] refused, as quiche's calls answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// Nothing to read, or no room to write.
    #[error("nothing to do")]
    Done,
    /// The peer reset the stream with this code.
    #[error("stream reset by the peer with {0:#x}")]
    StreamReset(u64),
    /// The peer asked us to stop sending on the stream with this code.
    #[error("stream stopped by the peer with {0:#x}")]
    StreamStopped(u64),
    /// Opening the stream would pass the peer's stream limit.
    #[error("peer's stream limit reached")]
    StreamLimit,
    /// The stream cannot do this now (not open, already ended).
    #[error("stream {0} in an invalid state")]
    InvalidStreamState(u64),
    /// The connection is closed.
    #[error("connection closed")]
    Closed,
    /// The peer broke the protocol: we closed the connection with this transport error code.
    #[error("protocol violation, closed with transport error {0:#x}")]
    Transport(u64),
    /// The operation is not available: datagrams the peer does not accept (or on -00).
    #[error("not available in this connection's state")]
    InvalidState,
    /// A datagram larger than the peer accepts, or a buffer too small for the next one.
    #[error("buffer too short")]
    BufferTooShort,
}

/// How a side closed the connection (CONNECTION_CLOSE).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectionError {
    /// An application error code, not a transport one.
    pub is_app: bool,
    /// The code.
    pub error_code: u64,
    /// The reason phrase.
    pub reason: Vec<u8>,
}

/// What crossed the byte stream so far.
#[derive(Debug, Clone, Copy, Default)]
pub struct Stats {
    /// Bytes handed out by `take_output`.
    pub sent_bytes: u64,
    /// Bytes given to `recv`.
    pub recv_bytes: u64,
    /// Complete records (WebSocket messages; -00 on TCP: frames) received and sent.
    pub recv_records: u64,
    /// Complete records sent.
    pub sent_records: u64,
    /// Datagrams received and dropped unread (the receive queue was full).
    pub dgrams_dropped: u64,
}

/// Where the connection is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum State {
    Open,
    /// We closed: the close frames wait in the output; incoming bytes are discarded
    /// (draft-ietf-quic-qmux-02 §7.2).
    Closing,
    Closed,
}

/// A QMux connection over one byte stream.
pub struct Connection {
    pub(crate) version: Version,
    pub(crate) framing: Framing,
    pub(crate) role: Role,
    pub(crate) config: Config,
    pub(crate) local: TransportParams,
    pub(crate) peer: TransportParams,
    pub(crate) established: bool,
    pub(crate) state: State,
    pub(crate) timed_out: bool,
    pub(crate) local_error: Option<ConnectionError>,
    pub(crate) peer_error: Option<ConnectionError>,
    pub(crate) input: input::Input,
    pub(crate) out: BytesMut,
    /// Bytes taken from `out` so far: the absolute output position of `out[0]`.
    pub(crate) out_taken: u64,
    pub(crate) scratch: Vec<u8>,
    pub(crate) mask: Option<ws::MaskGen>,
    pub(crate) timers: conn::Timers,
    pub(crate) streams: streams::Streams,
    /// Datagrams received and not yet read.
    pub(crate) dgrams: dgrams::DgramQueue,
    pub(crate) stats: Stats,
}

/// Streams by ID, for [`streams::Streams`].
pub(crate) type StreamMap = HashMap<u64, streams::Stream>;

#[cfg(test)]
mod tests;
