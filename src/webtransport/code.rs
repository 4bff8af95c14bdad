//! HTTP/3 error codes (RFC 9114 §8.1) and WebTransport's (draft-ietf-webtrans-http3 §9.5).

/// No error: the connection or stream closes cleanly.
pub const H3_NO_ERROR: u64 = 0x100;
/// A stream of a type the endpoint does not accept.
pub const H3_STREAM_CREATION_ERROR: u64 = 0x103;
/// A stream the connection needs (control, QPACK) was closed.
pub const H3_CLOSED_CRITICAL_STREAM: u64 = 0x104;
/// A frame not allowed in its state or on its stream.
pub const H3_FRAME_UNEXPECTED: u64 = 0x105;
/// A frame whose layout or size is wrong.
pub const H3_FRAME_ERROR: u64 = 0x106;
/// The peer makes the endpoint do too much work.
pub const H3_EXCESSIVE_LOAD: u64 = 0x107;
/// A SETTINGS frame with a bad payload.
pub const H3_SETTINGS_ERROR: u64 = 0x109;
/// No SETTINGS frame at the start of the control stream.
pub const H3_MISSING_SETTINGS: u64 = 0x10a;
/// A malformed request or response (here: a CONNECT this server does not take).
pub const H3_MESSAGE_ERROR: u64 = 0x10e;
/// A stream for a session that does not exist (or not yet, past the buffering limit).
pub const WT_BUFFERED_STREAM_REJECTED: u64 = 0x3994_bd84;
/// The stream's session is gone.
pub const WT_SESSION_GONE: u64 = 0x170d_7b68;
