//! The draft table: which draft an ALPN selects, and one entry point per codec operation that
//! dispatches to that draft: draft-16's own codec, or the request-stream codec with the
//! draft's [`Dialect`].

use super::dialect::{Dialect, D18, D18_MOQ_LITE_JS, D20, D22};
use super::error::{DecodeError, EncodeError};
use super::model::{
    Datagram, DatagramHeader, DecodeContext, LocationFilter, Message, RequestId, RequestKind, SubgroupHeader,
    UniStreamHeader,
};
use super::{control, d14, d16, d18, d22};

/// A MoQT draft the relay speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Version {
    /// draft-ietf-moq-transport-14, ALPN `moq-00` (shared by every draft up to 14; the
    /// version is agreed in CLIENT_SETUP / SERVER_SETUP, [`Version::setup_version`]). Not in
    /// [`Version::ALL`]: a relay serves it when asked (`--drafts`), see [`Version::KNOWN`].
    Draft14,
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
    /// Every draft served by default, in server preference order (newest first).
    pub const ALL: [Version; 5] =
        [Version::Draft22, Version::Draft20, Version::Draft18, Version::Draft16, Version::Draft14];

    /// Every draft the codec and the session can speak, newest first: [`Version::ALL`] and
    /// those a relay serves only when asked (`--drafts`).
    pub const KNOWN: [Version; 5] =
        [Version::Draft22, Version::Draft20, Version::Draft18, Version::Draft16, Version::Draft14];

    /// The draft's number (`draft-ietf-moq-transport-NN`).
    pub const fn number(self) -> u32 {
        match self {
            Version::Draft14 => 14,
            Version::Draft16 => 16,
            Version::Draft18 => 18,
            Version::Draft20 => 20,
            Version::Draft22 => 22,
        }
    }

    /// The ALPN token that selects this draft.
    pub const fn alpn(self) -> &'static str {
        match self {
            Version::Draft14 => "moq-00",
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
        !matches!(self, Version::Draft14 | Version::Draft16)
    }

    /// The MoQT version number CLIENT_SETUP offers and SERVER_SETUP selects, for the drafts
    /// that agree on a version inside SETUP (draft-14 §9.3.1: 0xff00000e); `None` for the
    /// drafts the ALPN names alone.
    pub const fn setup_version(self) -> Option<u64> {
        match self {
            Version::Draft14 => Some(d14::control::VERSION),
            _ => None,
        }
    }

    /// The draft an ALPN token selects, if any (`moq-00`: draft-14, the only draft of that
    /// ALPN spoken here; its SETUP still has to agree on 0xff00000e).
    pub fn from_alpn(alpn: &[u8]) -> Option<Version> {
        Version::KNOWN.into_iter().find(|v| v.alpn().as_bytes() == alpn)
    }

    /// The draft of a client whose transport named none (a WebTransport CONNECT without
    /// WT-Available-Protocols), told from the first bytes of its control stream: draft-14's
    /// CLIENT_SETUP and draft-16's share type 0x20 and a 16-bit length, then draft-14 lists
    /// its supported versions (§9.3: 0xff0000NN for the drafts) where draft-16 counts its
    /// parameters, whose types are small. `None` until enough bytes arrived (or when they
    /// are no CLIENT_SETUP at all: then draft-16, the default, reads and refuses them).
    pub fn sniff_client_setup(first: &[u8]) -> Option<Version> {
        use crate::varint::{Quic, VarInt};
        let (kind, n) = Quic::decode(first).ok()?;
        if kind != 0x20 {
            return Some(Version::Draft16);
        }
        let rest = first.get(n + 2..)?;
        let (count, n) = Quic::decode(rest).ok()?;
        if count == 0 {
            return Some(Version::Draft16);
        }
        let (first_value, _) = Quic::decode(rest.get(n..)?).ok()?;
        Some(if first_value >> 24 == 0xff { Version::Draft14 } else { Version::Draft16 })
    }

    /// The request-stream draft's table of differences (`None`: draft-14 and draft-16, whose
    /// control planes are their own).
    pub const fn dialect(self) -> Option<&'static Dialect> {
        match self {
            Version::Draft14 | Version::Draft16 => None,
            Version::Draft18 => Some(&D18),
            Version::Draft20 => Some(&D20),
            Version::Draft22 => Some(&D22),
        }
    }

    /// Appends `msg` as one control message of this draft.
    pub fn encode_message(self, msg: &Message, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        self.control_codec().encode_message(msg, out)
    }

    /// Appends `msg`, the answer to a request of kind `answers` (see
    /// [`ControlCodec::encode_response`]).
    pub fn encode_response(
        self,
        msg: &Message,
        answers: RequestKind,
        out: &mut Vec<u8>,
    ) -> Result<(), EncodeError> {
        self.control_codec().encode_response(msg, answers, out)
    }

    /// Decodes one control message of this draft from the front of `buf`.
    pub fn decode_message(self, buf: &[u8], ctx: &DecodeContext) -> Result<(Message, usize), DecodeError> {
        self.control_codec().decode_message(buf, ctx)
    }

    /// This draft's control codec, as the draft writes it.
    pub const fn control_codec(self) -> ControlCodec {
        ControlCodec { version: self, dialect: self.dialect(), latest_group: false, shaka: false }
    }

    /// Reads the type and header of a unidirectional stream of this draft.
    pub fn decode_uni_stream_header(self, buf: &[u8]) -> Result<(UniStreamHeader, usize), DecodeError> {
        match self {
            Version::Draft14 => d14::data::decode_uni_stream_header(buf),
            Version::Draft16 => d16::data::decode_uni_stream_header(buf),
            Version::Draft18 => d18::data::decode_uni_stream_header(buf),
            Version::Draft20 | Version::Draft22 => d22::data::decode_uni_stream_header(buf),
        }
    }

    /// Writes a SUBGROUP_HEADER of this draft.
    pub fn encode_subgroup_header(self, h: &SubgroupHeader, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        match self {
            Version::Draft14 => d14::data::encode_subgroup_header(h, out),
            Version::Draft16 => d16::data::encode_subgroup_header(h, out),
            Version::Draft18 => d18::data::encode_subgroup_header(h, out),
            Version::Draft20 | Version::Draft22 => d22::data::encode_subgroup_header(h, out),
        }
    }

    /// Writes a FETCH_HEADER of this draft.
    pub fn encode_fetch_header(self, request_id: RequestId, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        match self {
            Version::Draft14 => d14::data::encode_fetch_header(request_id, out),
            Version::Draft16 => d16::data::encode_fetch_header(request_id, out),
            Version::Draft18 => d18::data::encode_fetch_header(request_id, out),
            Version::Draft20 | Version::Draft22 => d22::data::encode_fetch_header(request_id, out),
        }
    }

    /// Decodes an OBJECT_DATAGRAM (or padding datagram) of this draft.
    pub fn decode_datagram(self, buf: &[u8]) -> Result<Datagram, DecodeError> {
        match self {
            Version::Draft14 => d14::data::decode_datagram(buf),
            Version::Draft16 => d16::data::decode_datagram(buf),
            Version::Draft18 => d18::data::decode_datagram(buf),
            Version::Draft20 | Version::Draft22 => d22::data::decode_datagram(buf),
        }
    }

    /// Writes an OBJECT_DATAGRAM of this draft: header, then `payload`.
    pub fn encode_datagram(
        self,
        h: &DatagramHeader,
        payload: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<(), EncodeError> {
        match self {
            Version::Draft14 => d14::data::encode_datagram(h, payload, out),
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
    /// The peer is Shaka Player at draft-16, whose messages are draft-16's except where its
    /// code still follows draft-14 (`d16::shaka`).
    shaka: bool,
}

/// What Shaka Player's MoQT client names itself in MOQT_IMPLEMENTATION ("ShakaPlayer/v5.2.12").
const SHAKA: &[u8] = b"ShakaPlayer/";

impl ControlCodec {
    /// The codec for a peer whose SETUP named its implementation `implementation`: the
    /// draft's own, except where a widely used implementation is known to write the draft
    /// differently (ARCHITECTURE.md, "Peer quirks"). moq-lite-js (`@moq/net` 0.2) means its
    /// Largest Object filter as the latest group, at draft-16 and draft-18; at draft-18 it
    /// also writes Message Parameter values by the Key-Value-Pair rule. Its later versions
    /// offer draft-20, which this relay prefers, so one that settles on draft-18 or draft-16
    /// here is one that has the quirks.
    ///
    /// Shaka Player (`ShakaPlayer/…`, at draft-14 and draft-16) subscribes to the catalog and
    /// to each media track with the Largest Object filter and reads the first object it gets,
    /// so it means the latest group as moq-lite-js does (a catalog published once would never
    /// reach it, and a video track would start after its keyframe); at draft-16 it also
    /// writes some messages as draft-14 did (`d16::shaka`).
    pub fn for_peer(self, implementation: Option<&[u8]>) -> ControlCodec {
        let shaka = implementation.is_some_and(|i| i.starts_with(SHAKA));
        match (self.version, implementation) {
            (Version::Draft18, Some(b"moq-lite-js")) => {
                ControlCodec { dialect: Some(&D18_MOQ_LITE_JS), latest_group: true, ..self }
            }
            (Version::Draft16, Some(b"moq-lite-js")) => ControlCodec { latest_group: true, ..self },
            (Version::Draft16, _) if shaka => ControlCodec { latest_group: true, shaka: true, ..self },
            (Version::Draft14, _) if shaka => ControlCodec { latest_group: true, ..self },
            _ => self,
        }
    }

    /// Whether this is a peer's dialect rather than the draft as written.
    pub fn is_quirk(self) -> bool {
        self.latest_group || self.shaka || self.dialect.is_some_and(|d| d.kvp_values)
    }

    /// The draft whose fetch streams (FETCH_HEADER and objects) this peer reads: its own,
    /// except Shaka's draft-16, which reads draft-14's.
    pub fn fetch_version(self) -> Version {
        if self.shaka {
            Version::Draft14
        } else {
            self.version
        }
    }

    /// Appends `msg` as one control message. In draft-14 a [`Message::RequestOk`] or
    /// [`Message::RequestError`] needs the kind of request it answers: use
    /// [`ControlCodec::encode_response`].
    pub fn encode_message(self, msg: &Message, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        if self.latest_group && filter(msg) == Some(LATEST_GROUP) {
            let mut theirs = msg.clone();
            set_filter(&mut theirs, LocationFilter::NextObject);
            return ControlCodec { latest_group: false, ..self }.encode_message(&theirs, out);
        }
        match (self.version, self.dialect) {
            (Version::Draft14, _) => d14::control::encode_message(msg, out),
            (_, None) if self.shaka => d16::shaka::encode_message(msg, out),
            (_, None) => d16::control::encode_message(msg, out),
            (_, Some(d)) => control::encode_message(d, msg, out),
        }
    }

    /// Appends `msg`, the answer to a request of kind `answers`. draft-14 has one answer
    /// message per request kind (TRACK_STATUS_OK, SUBSCRIBE_ERROR, FETCH_ERROR, ...) where the
    /// model has [`Message::RequestOk`] / [`Message::RequestError`], and writes the one
    /// `answers` names (`d14::control::encode_response`); every other draft ignores
    /// `answers` and writes `msg` as [`ControlCodec::encode_message`] does. The session knows
    /// the kind from the Request ID the answer carries.
    pub fn encode_response(
        self,
        msg: &Message,
        answers: RequestKind,
        out: &mut Vec<u8>,
    ) -> Result<(), EncodeError> {
        match self.version {
            Version::Draft14 => d14::control::encode_response(msg, answers, out),
            _ => self.encode_message(msg, out),
        }
    }

    /// Decodes one control message of this draft from the front of `buf`.
    /// Decodes one control message from the front of `buf`: `(message, bytes consumed)`.
    pub fn decode_message(self, buf: &[u8], ctx: &DecodeContext) -> Result<(Message, usize), DecodeError> {
        let (mut msg, used) = match (self.version, self.dialect) {
            (Version::Draft14, _) => d14::control::decode_message(buf, ctx)?,
            (_, None) if self.shaka => d16::shaka::decode_message(buf, ctx)?,
            (_, None) => d16::control::decode_message(buf, ctx)?,
            (_, Some(d)) => control::decode_message(d, buf, ctx)?,
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
    fn a_client_setup_tells_draft_14_from_16() {
        let mut d14 = Vec::new();
        let versions = crate::model::SetupOptions { versions: vec![0xff00000e], ..Default::default() };
        let setup = crate::model::Setup { options: versions };
        Version::Draft14.encode_message(&Message::ClientSetup(setup), &mut d14).expect("encodes");
        let mut d16 = Vec::new();
        let path =
            crate::model::SetupOptions { path: Some(bytes::Bytes::from_static(b"/")), ..Default::default() };
        let setup16 = crate::model::Setup { options: path };
        Version::Draft16.encode_message(&Message::ClientSetup(setup16), &mut d16).expect("encodes");
        assert_eq!(Version::sniff_client_setup(&d14), Some(Version::Draft14));
        assert_eq!(Version::sniff_client_setup(&d16), Some(Version::Draft16));
        // Not enough yet: no answer, whatever the prefix.
        for end in 0..4 {
            assert_eq!(Version::sniff_client_setup(&d14[..end]), None, "{end}");
        }
        assert_eq!(Version::sniff_client_setup(&[0x2f, 0x00]), Some(Version::Draft16));
    }

    /// Shaka Player is told by its MOQT_IMPLEMENTATION: its draft-16 SUBSCRIBE (GROUP_ORDER 0)
    /// is read for it and refused from anyone else, and its Largest Object filter means the
    /// latest group at both drafts it speaks; other peers keep the draft as written.
    #[test]
    fn shaka_is_told_by_its_implementation() {
        use crate::model::{DecodeContext, Role};
        let subscribe: &[u8] =
            b"\x03\x00\x19\x00\x01\x04live\x07catalog\x04\x10\x01\x10\x00\x01\x01\x02\x01\x00";
        let ctx = DecodeContext::control(Role::Client);
        let shaka = Version::Draft16.control_codec().for_peer(Some(b"ShakaPlayer/v5.2.12"));
        assert!(shaka.is_quirk());
        assert_eq!(shaka.fetch_version(), Version::Draft14);
        let Message::Subscribe(s) = shaka.decode_message(subscribe, &ctx).expect("read for Shaka").0 else {
            panic!("a SUBSCRIBE")
        };
        assert_eq!(s.params.group_order, None);
        assert_eq!(s.params.location_filter, Some(LATEST_GROUP));
        for other in [None, Some(&b"moq-edge"[..]), Some(&b"Shaka"[..])] {
            let codec = Version::Draft16.control_codec().for_peer(other);
            assert!(!codec.is_quirk(), "{other:?}");
            assert_eq!(codec.fetch_version(), Version::Draft16);
            let err = codec.decode_message(subscribe, &ctx).expect_err("GROUP_ORDER 0");
            assert!(
                matches!(
                    err,
                    crate::error::DecodeError::Invalid {
                        code: crate::error::ErrorCode::ProtocolViolation,
                        ..
                    }
                ),
                "{other:?}: {err}"
            );
        }
        // Draft-14: its SUBSCRIBE is draft-14's own; only the filter's meaning differs.
        let d14 = Version::Draft14.control_codec().for_peer(Some(b"ShakaPlayer/v5.2.12"));
        assert!(d14.is_quirk());
        assert_eq!(d14.fetch_version(), Version::Draft14);
    }

    #[test]
    fn alpn_table() {
        assert_eq!(Version::from_alpn(b"moqt-16"), Some(Version::Draft16));
        assert_eq!(Version::from_alpn(b"moqt-18"), Some(Version::Draft18));
        assert_eq!(Version::from_alpn(b"moqt-20"), Some(Version::Draft20));
        assert_eq!(Version::from_alpn(b"moqt-22"), Some(Version::Draft22));
        assert_eq!(Version::from_alpn(b"moqt-17"), None);
        assert_eq!(Version::ALL, Version::KNOWN);
        assert_eq!(Version::from_alpn(b"h3"), None);
        // draft-14 is the one draft of `moq-00` spoken here.
        assert_eq!(Version::from_alpn(b"moq-00"), Some(Version::Draft14));
        assert_eq!(Version::Draft14.alpn(), "moq-00");
        assert_eq!(Version::Draft14.setup_version(), Some(0xff00000e));
        assert!(!Version::Draft14.request_streams());
        assert!(Version::ALL.iter().filter(|v| **v != Version::Draft14).all(|v| v.setup_version().is_none()));
        for v in Version::ALL {
            assert_eq!(Version::from_alpn(v.alpn().as_bytes()), Some(v));
        }
    }
}
