//! QMux (draft-ietf-quic-qmux): QUIC's stream and datagram frames over a reliable, ordered
//! byte stream, sans-IO. API SKELETON: bodies to be written (not to land like this).

use std::time::{Duration, Instant};

use bytes::Bytes;

/// QMux wire format version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Version {
    Qmux00,
    Qmux01,
    Qmux02,
}

/// What carries the QMux records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// WebSocket binary messages after an HTTP/1.1 upgrade (RFC 6455).
    WebSocket,
    /// Records with their Size field, directly on the byte stream (TLS on TCP).
    Records,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Server,
    Client,
}

#[derive(Debug, Clone)]
pub struct Config {
    pub max_idle_timeout: Duration,
    pub initial_max_data: u64,
    pub initial_max_stream_data_bidi_local: u64,
    pub initial_max_stream_data_bidi_remote: u64,
    pub initial_max_stream_data_uni: u64,
    pub initial_max_streams_bidi: u64,
    pub initial_max_streams_uni: u64,
    pub max_record_size: u64,
    pub max_datagram_frame_size: u64,
    pub max_output: usize,
    pub ws_ping_interval: Duration,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shutdown {
    Read,
    Write,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    #[error("nothing to do")]
    Done,
    #[error("stream reset by the peer with {0:#x}")]
    StreamReset(u64),
    #[error("stream stopped by the peer with {0:#x}")]
    StreamStopped(u64),
    #[error("peer's stream limit reached")]
    StreamLimit,
    #[error("stream {0} in an invalid state")]
    InvalidStreamState(u64),
    #[error("connection closed")]
    Closed,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectionError {
    pub is_app: bool,
    pub error_code: u64,
    pub reason: Vec<u8>,
}

#[derive(Debug, Clone, Copy, Default)]
pub struct Stats {
    pub sent_bytes: u64,
    pub recv_bytes: u64,
}

impl Default for Config {
    fn default() -> Self {
        unimplemented!()
    }
}

pub struct Connection {}

#[allow(unused_variables, clippy::unimplemented)]
impl Connection {
    pub fn new(version: Version, framing: Framing, role: Role, config: &Config, now: Instant) -> Self {
        unimplemented!()
    }
    pub fn recv(&mut self, data: &[u8], now: Instant) -> Result<usize, Error> {
        unimplemented!()
    }
    pub fn recv_eof(&mut self, now: Instant) {
        unimplemented!()
    }
    pub fn take_output(&mut self, max: usize) -> Option<Bytes> {
        unimplemented!()
    }
    pub fn has_output(&self) -> bool {
        unimplemented!()
    }
    pub fn timeout_instant(&self) -> Option<Instant> {
        unimplemented!()
    }
    pub fn on_timeout(&mut self, now: Instant) {
        unimplemented!()
    }
    pub fn is_established(&self) -> bool {
        unimplemented!()
    }
    pub fn is_closed(&self) -> bool {
        unimplemented!()
    }
    pub fn is_timed_out(&self) -> bool {
        unimplemented!()
    }
    pub fn peer_error(&self) -> Option<&ConnectionError> {
        unimplemented!()
    }
    pub fn local_error(&self) -> Option<&ConnectionError> {
        unimplemented!()
    }
    pub fn close(&mut self, app: bool, code: u64, reason: &[u8]) -> Result<(), Error> {
        unimplemented!()
    }
    pub fn stream_recv(&mut self, id: u64, out: &mut [u8]) -> Result<(usize, bool), Error> {
        unimplemented!()
    }
    pub fn stream_send(&mut self, id: u64, data: &[u8], fin: bool) -> Result<usize, Error> {
        unimplemented!()
    }
    pub fn stream_capacity(&self, id: u64) -> Result<usize, Error> {
        unimplemented!()
    }
    pub fn stream_priority(&mut self, id: u64, urgency: u8, incremental: bool) -> Result<(), Error> {
        unimplemented!()
    }
    pub fn stream_shutdown(&mut self, id: u64, how: Shutdown, code: u64) -> Result<(), Error> {
        unimplemented!()
    }
    pub fn stream_readable_next(&mut self) -> Option<u64> {
        unimplemented!()
    }
    pub fn dgram_send(&mut self, data: &[u8]) -> Result<(), Error> {
        unimplemented!()
    }
    pub fn dgram_recv(&mut self, out: &mut [u8]) -> Result<usize, Error> {
        unimplemented!()
    }
    pub fn dgram_max_writable_len(&self) -> Option<usize> {
        unimplemented!()
    }
    pub fn stats(&self) -> Stats {
        unimplemented!()
    }
    pub fn version(&self) -> Version {
        unimplemented!()
    }
}

/// The WebSocket upgrade (RFC 6455 §4) and QMux's subprotocol names.
pub mod upgrade {
    use super::Version;

    #[allow(unused_variables, clippy::unimplemented)]
    pub fn accept_key(client_key: &str) -> String {
        unimplemented!()
    }

    #[allow(unused_variables, clippy::unimplemented)]
    pub fn parse_subprotocol(token: &str) -> Option<(Version, Option<&str>)> {
        unimplemented!()
    }

    #[allow(unused_variables, clippy::unimplemented)]
    pub fn offer(apps: &[&str], versions: &[Version]) -> Vec<String> {
        unimplemented!()
    }

    #[allow(unused_variables, clippy::unimplemented)]
    pub fn client_key() -> String {
        unimplemented!()
    }

    #[allow(unused_variables, clippy::unimplemented)]
    pub fn choose(offered: &[&str], apps: &[&str], versions: &[Version]) -> Option<(String, Version, String)> {
        unimplemented!()
    }
}
