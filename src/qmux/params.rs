//! QMux transport parameters: RFC 9000 §18's encoding, carried in QX_TRANSPORT_PARAMETERS
//! (draft-ietf-quic-qmux-01 §4.2), with the subset draft-ietf-quic-qmux-01 §5.1 permits.

use crate::varint::{self, Reader};
use crate::{Config, Version};

pub(crate) const MAX_IDLE_TIMEOUT: u64 = 0x01;
pub(crate) const INITIAL_MAX_DATA: u64 = 0x04;
pub(crate) const INITIAL_MAX_STREAM_DATA_BIDI_LOCAL: u64 = 0x05;
pub(crate) const INITIAL_MAX_STREAM_DATA_BIDI_REMOTE: u64 = 0x06;
pub(crate) const INITIAL_MAX_STREAM_DATA_UNI: u64 = 0x07;
pub(crate) const INITIAL_MAX_STREAMS_BIDI: u64 = 0x08;
pub(crate) const INITIAL_MAX_STREAMS_UNI: u64 = 0x09;
/// RFC 9221 §3.
pub(crate) const MAX_DATAGRAM_FRAME_SIZE: u64 = 0x20;
/// draft-ietf-quic-qmux-01 §5.2 (-00's `max_frame_size` had no codepoint yet).
pub(crate) const MAX_RECORD_SIZE: u64 = 0x0571_c594_29cd_0845;

/// draft-ietf-quic-qmux-01 §5.2: the initial (-02: default) `max_record_size`.
pub const DEFAULT_MAX_RECORD_SIZE: u64 = 16382;
/// draft-ietf-quic-qmux-00 §5.2: the initial `max_frame_size`, which bounds a whole frame.
pub const QMUX00_MAX_FRAME_SIZE: u64 = 16384;

/// RFC 9000 §4.6: stream counts above 2^60 cannot be expressed as stream IDs.
pub(crate) const MAX_STREAMS_LIMIT: u64 = 1 << 60;

/// One endpoint's transport parameters, with the values that apply when a parameter is absent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransportParams {
    /// Milliseconds; 0 = no idle timeout.
    pub max_idle_timeout: u64,
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
    /// The largest record (-01/-02: Frames field; -00: frame) the sender of these parameters
    /// accepts.
    pub max_record_size: u64,
    /// RFC 9221 §3; 0 = datagrams off (always on -00, which does not map the extension).
    pub max_datagram_frame_size: u64,
}

impl TransportParams {
    /// The values in force before any parameter is read.
    pub fn absent(version: Version) -> Self {
        TransportParams {
            max_idle_timeout: 0,
            initial_max_data: 0,
            initial_max_stream_data_bidi_local: 0,
            initial_max_stream_data_bidi_remote: 0,
            initial_max_stream_data_uni: 0,
            initial_max_streams_bidi: 0,
            initial_max_streams_uni: 0,
            max_record_size: match version {
                Version::Qmux00 => QMUX00_MAX_FRAME_SIZE,
                _ => DEFAULT_MAX_RECORD_SIZE,
            },
            max_datagram_frame_size: 0,
        }
    }

    /// What `config` advertises on `version`.
    pub fn from_config(config: &Config, version: Version) -> Self {
        TransportParams {
            max_idle_timeout: u64::try_from(config.max_idle_timeout.as_millis()).unwrap_or(varint::MAX),
            initial_max_data: config.initial_max_data.min(varint::MAX),
            initial_max_stream_data_bidi_local: config.initial_max_stream_data_bidi_local.min(varint::MAX),
            initial_max_stream_data_bidi_remote: config.initial_max_stream_data_bidi_remote.min(varint::MAX),
            initial_max_stream_data_uni: config.initial_max_stream_data_uni.min(varint::MAX),
            initial_max_streams_bidi: config.initial_max_streams_bidi.min(MAX_STREAMS_LIMIT),
            initial_max_streams_uni: config.initial_max_streams_uni.min(MAX_STREAMS_LIMIT),
            max_record_size: match version {
                // -00 has no codepoint for max_frame_size: the initial value is what we accept.
                Version::Qmux00 => QMUX00_MAX_FRAME_SIZE,
                _ => config.max_record_size.clamp(DEFAULT_MAX_RECORD_SIZE, varint::MAX),
            },
            max_datagram_frame_size: match version {
                Version::Qmux00 => 0,
                _ => config.max_datagram_frame_size.min(varint::MAX),
            },
        }
    }

    /// RFC 9000 §18 encoding. Only parameters the version knows are sent (draft-ietf-quic-qmux-01
    /// §5.1: no parameters that extend QUIC v1 unless they are usable with QMux).
    pub fn encode(&self, version: Version, out: &mut Vec<u8>) {
        let mut put = |id: u64, v: u64| {
            varint::put(out, id);
            varint::put(out, varint::len(v) as u64);
            varint::put(out, v);
        };
        if self.max_idle_timeout > 0 {
            put(MAX_IDLE_TIMEOUT, self.max_idle_timeout);
        }
        put(INITIAL_MAX_DATA, self.initial_max_data);
        put(INITIAL_MAX_STREAM_DATA_BIDI_LOCAL, self.initial_max_stream_data_bidi_local);
        put(INITIAL_MAX_STREAM_DATA_BIDI_REMOTE, self.initial_max_stream_data_bidi_remote);
        put(INITIAL_MAX_STREAM_DATA_UNI, self.initial_max_stream_data_uni);
        put(INITIAL_MAX_STREAMS_BIDI, self.initial_max_streams_bidi);
        put(INITIAL_MAX_STREAMS_UNI, self.initial_max_streams_uni);
        if version != Version::Qmux00 {
            if self.max_datagram_frame_size > 0 {
                put(MAX_DATAGRAM_FRAME_SIZE, self.max_datagram_frame_size);
            }
            put(MAX_RECORD_SIZE, self.max_record_size);
        }
    }

    /// Decodes and checks the peer's parameters; `Err` carries the reason for a
    /// TRANSPORT_PARAMETER_ERROR.
    pub fn decode(buf: &[u8], version: Version) -> Result<Self, &'static str> {
        let mut params = TransportParams::absent(version);
        let mut seen: Vec<u64> = Vec::new();
        let mut r = Reader::new(buf);
        while !r.is_empty() {
            let id = r.varint().ok_or("truncated parameter id")?;
            let len = r.varint().ok_or("truncated parameter length")?;
            let value = r.bytes(len).ok_or("truncated parameter value")?;
            // draft-ietf-quic-qmux-01 §5.1 (-02 §5.1 lists them): QUIC v1's other parameters
            // are prohibited.
            if matches!(id, 0x00 | 0x02 | 0x03 | 0x0a..=0x10) {
                return Err("prohibited transport parameter");
            }
            let known = matches!(id, MAX_IDLE_TIMEOUT | INITIAL_MAX_DATA..=INITIAL_MAX_STREAMS_UNI)
                || (version != Version::Qmux00 && matches!(id, MAX_RECORD_SIZE | MAX_DATAGRAM_FRAME_SIZE));
            if !known {
                // Unknown ones, and RFC 9000 §18.1's reserved ones, are ignored.
                continue;
            }
            // RFC 9000 §7.4: a parameter appears at most once.
            if seen.contains(&id) {
                return Err("repeated transport parameter");
            }
            seen.push(id);
            let v = match varint::get(value) {
                Some((v, n)) if n == value.len() => v,
                _ => return Err("malformed transport parameter value"),
            };
            params.set(id, v)?;
        }
        Ok(params)
    }

    fn set(&mut self, id: u64, v: u64) -> Result<(), &'static str> {
        match id {
            MAX_IDLE_TIMEOUT => self.max_idle_timeout = v,
            INITIAL_MAX_DATA => self.initial_max_data = v,
            INITIAL_MAX_STREAM_DATA_BIDI_LOCAL => self.initial_max_stream_data_bidi_local = v,
            INITIAL_MAX_STREAM_DATA_BIDI_REMOTE => self.initial_max_stream_data_bidi_remote = v,
            INITIAL_MAX_STREAM_DATA_UNI => self.initial_max_stream_data_uni = v,
            INITIAL_MAX_STREAMS_BIDI | INITIAL_MAX_STREAMS_UNI if v > MAX_STREAMS_LIMIT => {
                // RFC 9000 §4.6.
                return Err("initial_max_streams above 2^60");
            }
            INITIAL_MAX_STREAMS_BIDI => self.initial_max_streams_bidi = v,
            INITIAL_MAX_STREAMS_UNI => self.initial_max_streams_uni = v,
            // draft-ietf-quic-qmux-01 §5.2: the value can only raise the initial one.
            MAX_RECORD_SIZE if v < DEFAULT_MAX_RECORD_SIZE => return Err("max_record_size below 16382"),
            MAX_RECORD_SIZE => self.max_record_size = v,
            MAX_DATAGRAM_FRAME_SIZE => self.max_datagram_frame_size = v,
            _ => {}
        }
        Ok(())
    }
}
