//! The crate's tests. They live in a `tests` directory of the crate's sources so that they can
//! reach its internals (the frame encoders build hostile input).

mod pair;
mod props;
mod violations;
mod wire;

use std::time::{Duration, Instant};

use crate::{frame, ws, Config, Connection, Framing, Role, Version};

pub(crate) const VERSIONS: [Version; 3] = [Version::Qmux00, Version::Qmux01, Version::Qmux02];
pub(crate) const FRAMINGS: [Framing; 2] = [Framing::WebSocket, Framing::Records];

/// Small windows, so that tests move data well past them.
pub(crate) fn small_config() -> Config {
    Config {
        max_idle_timeout: Duration::from_secs(30),
        initial_max_data: 64 << 10,
        initial_max_stream_data_bidi_local: 20 << 10,
        initial_max_stream_data_bidi_remote: 20 << 10,
        initial_max_stream_data_uni: 20 << 10,
        initial_max_streams_bidi: 4,
        initial_max_streams_uni: 4,
        max_output: 48 << 10,
        ..Config::default()
    }
}

/// `frames` as the client would put them on the wire to a server: one masked WebSocket binary
/// message, a record with its Size, or (-00 on TCP) bare.
pub(crate) fn client_record(version: Version, framing: Framing, frames: &[u8]) -> Vec<u8> {
    wrap(version, framing, frames, Some([0x11, 0x22, 0x33, 0x44]))
}

pub(crate) fn wrap(version: Version, framing: Framing, frames: &[u8], mask: Option<[u8; 4]>) -> Vec<u8> {
    match (framing, version) {
        (Framing::WebSocket, _) => {
            let mut out = bytes::BytesMut::new();
            ws::encode(&mut out, ws::OP_BINARY, frames, mask);
            out.to_vec()
        }
        (Framing::Records, Version::Qmux00) => frames.to_vec(),
        (Framing::Records, _) => {
            let mut out = Vec::new();
            crate::varint::put(&mut out, frames.len() as u64);
            out.extend_from_slice(frames);
            out
        }
    }
}

/// A QX_TRANSPORT_PARAMETERS frame with `config`'s parameters.
pub(crate) fn params_frame(version: Version, config: &Config) -> Vec<u8> {
    let mut p = Vec::new();
    crate::TransportParams::from_config(config, version).encode(version, &mut p);
    let mut f = Vec::new();
    frame::put_bytes(&mut f, frame::QX_TRANSPORT_PARAMETERS, &p);
    f
}

/// A server that has taken the client's parameters (sent as `config`'s).
pub(crate) fn server(version: Version, framing: Framing, now: Instant) -> Connection {
    let config = small_config();
    let mut s = Connection::new(version, framing, Role::Server, &config, now);
    s.recv(&client_record(version, framing, &params_frame(version, &config)), now).expect("params");
    assert!(s.is_established());
    s
}

/// Everything `c` has to send.
pub(crate) fn drain(c: &mut Connection) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(b) = c.take_output(usize::MAX) {
        out.extend_from_slice(&b);
    }
    out
}

/// What a server's output says when a client reads it: the connection error it carries.
pub(crate) fn close_seen_by_client(
    version: Version,
    framing: Framing,
    server_out: &[u8],
) -> Option<crate::ConnectionError> {
    let now = Instant::now();
    // -01 reads -02's wire format without -02's QX_PING checks (a response to a ping this
    // client never sent may come before the close).
    let version = if version == Version::Qmux02 { Version::Qmux01 } else { version };
    let mut c = Connection::new(version, framing, Role::Client, &small_config(), now);
    let _ = c.recv(server_out, now);
    c.peer_error().cloned()
}
