//! The draft table: which draft an ALPN selects, and one entry point per codec operation that
//! dispatches to that draft: draft-16's own codec, or the request-stream codec with the
//! draft's [`Dialect`].

use super::dialect::{Dialect, D18, D18_MOQ_LITE_JS, D20, D22};
use super::error::{DecodeError, EncodeError};
use super::model::{
    Datagram, DatagramHeader, DecodeContext, LocationFilter, Message, RequestId, SubgroupHeader,
    UniStreamHeader,
};
use super::{control, d16, d18, d22};

/// A MoQT draft the relay speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Version {
    /// draft-ietf-moq-transport-16, ALPN `moqt-16`.
    Draft16,
    /// draft-ietf-moq-transport-18, ALPN `moqt-18`.
    Draft18,
    /// draft-ietf-moq-transport-20, ALPN `moqt-20`.
    Draft20,
    /// draft-ietf-moq-transport-22, ALPN `moqt-22`.
    Draft22,
}

impl Version {
    /// Every supported draft, in server preference order (newest first).
    pub const ALL: [Version; 4] = [Version::Draft22, Version::Draft20, Version::Draft18, Version::Draft16];

    /// The ALPN token that selects this draft.
    pub const fn alpn(self) -> &'static str {
        match self {
            Version::Draft16 => "moqt-16",
            Version::Draft18 => "moqt-18",
            Version::Draft20 => "moqt-20",
            Version::Draft22 => "moqt-22",
        }
    }

    /// Whether each side opens a unidirectional control stream with SETUP and every request
    /// travels on a bidirectional stream of its own, its responses without a Request ID
    /// (draft-18 §3.3, draft-22 §6.3), rather than all control messages on one bidirectional
    /// stream (draft-16).
    pub const fn request_streams(self) -> bool {
        !matches!(self, Version::Draft16)
    }

    /// The draft an ALPN token selects, if any.
    pub fn from_alpn(alpn: &[u8]) -> Option<Version> {
        Version::ALL.into_iter().find(|v| v.alpn().as_bytes() == alpn)
    }

    /// The request-stream draft's table of differences (`None`: draft-16, whose control plane
    /// is its own).
    pub const fn dialect(self) -> Option<&'static Dialect> {
        match self {
            Version::Draft16 => None,
            Version::Draft18 => Some(&D18),
            Version::Draft20 => Some(&D20),
            Version::Draft22 => Some(&D22),
        }
    }

    pub fn encode_message(self, msg: &Message, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        self.control_codec().encode_message(msg, out)
    }

    pub fn decode_message(self, buf: &[u8], ctx: &DecodeContext) -> Result<(Message, usize), DecodeError> {
        self.control_codec().decode_message(buf, ctx)
    }

    /// This draft's control codec, as the draft writes it.
    pub const fn control_codec(self) -> ControlCodec {
        ControlCodec { version: self, dialect: self.dialect(), latest_group: false }
    }

    pub fn decode_uni_stream_header(self, buf: &[u8]) -> Result<(UniStreamHeader, usize), DecodeError> {
        match self {
            Version::Draft16 => d16::data::decode_uni_stream_header(buf),
            Version::Draft18 => d18::data::decode_uni_stream_header(buf),
            Version::Draft20 | Version::Draft22 => d22::data::decode_uni_stream_header(buf),
        }
    }

    pub fn encode_subgroup_header(self, h: &SubgroupHeader, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        match self {
            Version::Draft16 => d16::data::encode_subgroup_header(h, out),
            Version::Draft18 => d18::data::encode_subgroup_header(h, out),
            Version::Draft20 | Version::Draft22 => d22::data::encode_subgroup_header(h, out),
        }
    }

    pub fn encode_fetch_header(self, request_id: RequestId, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        match self {
            Version::Draft16 => d16::data::encode_fetch_header(request_id, out),
            Version::Draft18 => d18::data::encode_fetch_header(request_id, out),
            Version::Draft20 | Version::Draft22 => d22::data::encode_fetch_header(request_id, out),
        }
    }

    pub fn decode_datagram(self, buf: &[u8]) -> Result<Datagram, DecodeError> {
        match self {
            Version::Draft16 => d16::data::decode_datagram(buf),
            Version::Draft18 => d18::data::decode_datagram(buf),
            Version::Draft20 | Version::Draft22 => d22::data::decode_datagram(buf),
        }
    }

    pub fn encode_datagram(
        self,
        h: &DatagramHeader,
        payload: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<(), EncodeError> {
        match self {
            Version::Draft16 => d16::data::encode_datagram(h, payload, out),
            Version::Draft18 => d18::data::encode_datagram(h, payload, out),
            Version::Draft20 | Version::Draft22 => d22::data::encode_datagram(h, payload, out),
        }
    }
}

/// The control codec one session uses: its draft's, or the dialect of it its peer speaks.
#[derive(Debug, Clone, Copy)]
pub struct ControlCodec {
    version: Version,
    dialect: Option<&'static Dialect>,
    /// The peer's Largest Object filter (Subscription Filter type 0x2) asks for the latest
    /// group from its first object, `LocationFilter::RelativeStart { groups_back: 1 }`, as a
    /// moq-lite subscription does, rather than for the objects after the largest one
    /// (draft-16 §5.1.2, draft-18 §5.1.2); and this codec writes that filter to it so.
    latest_group: bool,
}

impl ControlCodec {
    /// The codec for a peer whose SETUP named its implementation `implementation`: the
    /// draft's own, except where a widely used implementation is known to write the draft
    /// differently (ARCHITECTURE.md, "Peer quirks"). moq-lite-js (`@moq/net` 0.2) means its
    /// Largest Object filter as the latest group, at draft-16 and draft-18; at draft-18 it
    /// also writes Message Parameter values by the Key-Value-Pair rule. Its later versions
    /// offer draft-20, which this relay prefers, so one that settles on draft-18 or draft-16
    /// here is one that has the quirks.
    pub fn for_peer(self, implementation: Option<&[u8]>) -> ControlCodec {
        match (self.version, implementation) {
            (Version::Draft18, Some(b"moq-lite-js")) => {
                ControlCodec { dialect: Some(&D18_MOQ_LITE_JS), latest_group: true, ..self }
            }
            (Version::Draft16, Some(b"moq-lite-js")) => ControlCodec { latest_group: true, ..self },
            _ => self,
        }
    }

    /// Whether this is a peer's dialect rather than the draft as written.
    pub fn is_quirk(self) -> bool {
        self.latest_group || self.dialect.is_some_and(|d| d.kvp_values)
    }

    pub fn encode_message(self, msg: &Message, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        if self.latest_group && filter(msg) == Some(LATEST_GROUP) {
            let mut theirs = msg.clone();
            set_filter(&mut theirs, LocationFilter::NextObject);
            return ControlCodec { latest_group: false, ..self }.encode_message(&theirs, out);
        }
        match self.dialect {
            None => d16::control::encode_message(msg, out),
            Some(d) => control::encode_message(d, msg, out),
        }
    }

    pub fn decode_message(self, buf: &[u8], ctx: &DecodeContext) -> Result<(Message, usize), DecodeError> {
        let (mut msg, used) = match self.dialect {
            None => d16::control::decode_message(buf, ctx)?,
            Some(d) => control::decode_message(d, buf, ctx)?,
        };
        if self.latest_group && filter(&msg) == Some(LocationFilter::NextObject) {
            set_filter(&mut msg, LATEST_GROUP);
        }
        Ok((msg, used))
    }
}

/// The latest group from its first object: what moq-lite-js means by Largest Object.
const LATEST_GROUP: LocationFilter = LocationFilter::RelativeStart { groups_back: 1 };

/// The subscription filter of a message that carries one (SUBSCRIBE, PUBLISH_OK,
/// REQUEST_UPDATE).
fn filter(msg: &Message) -> Option<LocationFilter> {
    match msg {
        Message::Subscribe(m) => m.params.location_filter,
        Message::PublishOk(m) => m.params.location_filter,
        Message::RequestUpdate(m) => m.params.location_filter,
        _ => None,
    }
}

fn set_filter(msg: &mut Message, f: LocationFilter) {
    match msg {
        Message::Subscribe(m) => m.params.location_filter = Some(f),
        Message::PublishOk(m) => m.params.location_filter = Some(f),
        Message::RequestUpdate(m) => m.params.location_filter = Some(f),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alpn_table() {
        assert_eq!(Version::from_alpn(b"moqt-16"), Some(Version::Draft16));
        assert_eq!(Version::from_alpn(b"moqt-18"), Some(Version::Draft18));
        assert_eq!(Version::from_alpn(b"moqt-20"), Some(Version::Draft20));
        assert_eq!(Version::from_alpn(b"moqt-22"), Some(Version::Draft22));
        assert_eq!(Version::from_alpn(b"moqt-17"), None);
        assert_eq!(Version::ALL, [Version::Draft22, Version::Draft20, Version::Draft18, Version::Draft16]);
        assert_eq!(Version::from_alpn(b"h3"), None);
        for v in Version::ALL {
            assert_eq!(Version::from_alpn(v.alpn().as_bytes()), Some(v));
        }
    }
}
