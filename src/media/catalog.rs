//! The hang catalog: the JSON document a broadcast publishes on its `catalog.json` track, one
//! whole document per group (moq-dev/moq `doc/concept/layer/hang.md`, "Catalog").
//!
//! The schema followed is `@moq/hang` 0.3.5 (the one `@moq/watch` 0.4.6 depends on):
//! `catalog/root.ts` (a loose object with optional `video` and `audio`), `catalog/video.ts`
//! (`{ renditions: { <track name>: VideoConfig } }`), `catalog/audio.ts`
//! (`{ renditions: { <track name>: AudioConfig } }`), `catalog/container.ts` (`{ "kind":
//! "legacy" }`) and `catalog/hex.ts` (decoder descriptions as hex). Field names are the
//! camelCase of WebCodecs' `VideoDecoderConfig` / `AudioDecoderConfig`, as those schemas spell
//! them. Every optional field is left out when unknown, never written as `null` (the schemas'
//! `z.optional` accepts a missing key, not `null`).

use std::collections::BTreeMap;

use bytes::Bytes;
use serde::{Deserialize, Serialize};

/// The name of the track that carries the catalog (`catalog/format.ts`, `TRACK`).
pub const CATALOG_TRACK: &str = "catalog.json";

/// A hang catalog.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Catalog {
    /// The video renditions, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub video: Option<Video>,
    /// The audio renditions, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audio: Option<Audio>,
}

/// The video section: renditions by MoQT track name.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Video {
    /// By MoQT track name.
    pub renditions: BTreeMap<String, VideoConfig>,
}

/// The audio section: renditions by MoQT track name.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Audio {
    /// By MoQT track name.
    pub renditions: BTreeMap<String, AudioConfig>,
}

/// How a track's objects are framed (`catalog/container.ts`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Container {
    /// A QUIC variable-length integer (RFC 9000 §16) holding the presentation timestamp in
    /// microseconds, then the codec payload (`container/legacy.ts`).
    #[default]
    Legacy,
}

/// One video rendition: a WebCodecs `VideoDecoderConfig` plus hang's fields.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VideoConfig {
    /// The WebCodecs codec string, e.g. `avc1.64000b`.
    pub codec: String,
    /// How its objects are framed.
    pub container: Container,
    /// The decoder configuration: for H.264 the `avcC` box body (ISO/IEC 14496-15).
    #[serde(default, skip_serializing_if = "Option::is_none", with = "hex")]
    pub description: Option<Bytes>,
    /// Width in pixels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coded_width: Option<u32>,
    /// Height in pixels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coded_height: Option<u32>,
    /// Frames per second, measured on the first fragment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub framerate: Option<f64>,
    /// Bits per second: declared by the stream (`btrt`) or measured on the first fragment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bitrate: Option<u64>,
    /// Milliseconds the player must buffer: frames arrive a whole fragment at a time, so
    /// this is the first fragment's duration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jitter: Option<u64>,
}

/// One audio rendition: a WebCodecs `AudioDecoderConfig` plus hang's fields.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AudioConfig {
    /// The WebCodecs codec string: `mp4a.40.<audio object type>` or `opus`.
    pub codec: String,
    /// How its objects are framed.
    pub container: Container,
    /// For AAC the AudioSpecificConfig (ISO/IEC 14496-3 §1.6.2.1); none for Opus (the
    /// player configures Opus without one).
    #[serde(default, skip_serializing_if = "Option::is_none", with = "hex")]
    pub description: Option<Bytes>,
    /// Samples per second.
    pub sample_rate: u32,
    /// Channels.
    pub number_of_channels: u32,
    /// Bits per second: declared by the stream (`esds`, `btrt`) or measured on the first
    /// fragment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bitrate: Option<u64>,
    /// As [`VideoConfig::jitter`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jitter: Option<u64>,
}

impl Catalog {
    /// The JSON the `catalog.json` track carries.
    pub fn to_json(&self) -> Bytes {
        // Serialising plain structs, string-keyed maps and numbers cannot fail; a NaN
        // framerate (never produced) would become `null`.
        Bytes::from(serde_json::to_vec(self).unwrap_or_default())
    }

    /// Every rendition's track name, video first.
    pub fn track_names(&self) -> Vec<&str> {
        let video = self.video.iter().flat_map(|v| v.renditions.keys());
        let audio = self.audio.iter().flat_map(|a| a.renditions.keys());
        video.chain(audio).map(String::as_str).collect()
    }
}

/// Lower-case hex for the decoder descriptions (`catalog/hex.ts`: `^([0-9a-fA-F]{2})*$`).
mod hex {
    use bytes::Bytes;
    use serde::{de::Error, Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(value: &Option<Bytes>, s: S) -> Result<S::Ok, S::Error> {
        match value {
            Some(bytes) => s.serialize_str(&super::to_hex(bytes)),
            None => s.serialize_none(),
        }
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Bytes>, D::Error> {
        let Some(text) = Option::<String>::deserialize(d)? else { return Ok(None) };
        super::from_hex(&text).map(|v| Some(Bytes::from(v))).ok_or_else(|| D::Error::custom("expected hex"))
    }
}

/// `bytes` as lower-case hex.
pub fn to_hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 0xf)]));
    }
    out
}

/// Hex (either case) as bytes; `None` for an odd length or a non-hex digit.
pub fn from_hex(text: &str) -> Option<Vec<u8>> {
    let digits = text.as_bytes();
    if !digits.len().is_multiple_of(2) {
        return None;
    }
    let nibble = |c: u8| char::from(c).to_digit(16).and_then(|d| u8::try_from(d).ok());
    digits.chunks(2).map(|pair| Some(nibble(pair[0])? << 4 | nibble(pair[1])?)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_round_trips() {
        assert_eq!(to_hex(&[0x01, 0x64, 0x00, 0x0b, 0xff]), "0164000bff");
        assert_eq!(from_hex("0164000BFF"), Some(vec![0x01, 0x64, 0x00, 0x0b, 0xff]));
        assert_eq!(from_hex("abc"), None);
        assert_eq!(from_hex("zz"), None);
    }

    #[test]
    fn optional_fields_are_left_out_and_the_container_is_tagged() {
        let config = AudioConfig {
            codec: "opus".into(),
            container: Container::Legacy,
            description: None,
            sample_rate: 48000,
            number_of_channels: 2,
            bitrate: None,
            jitter: None,
        };
        let audio = Some(Audio { renditions: [("audio0".to_string(), config)].into() });
        let catalog = Catalog { audio, ..Default::default() };
        let json = String::from_utf8(catalog.to_json().to_vec()).expect("utf-8");
        assert_eq!(
            json,
            r#"{"audio":{"renditions":{"audio0":{"codec":"opus","container":{"kind":"legacy"},"sampleRate":48000,"numberOfChannels":2}}}}"#
        );
        let back: Catalog = serde_json::from_str(&json).expect("parses");
        assert_eq!(back, catalog);
    }
}
