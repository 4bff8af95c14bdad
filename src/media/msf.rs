//! The MOQT Streaming Format catalog (draft-ietf-moq-msf-01; the `cmaf` packaging is
//! draft-ietf-moq-cmsf-00's): one JSON document per object of the track [`MSF_CATALOG_TRACK`],
//! each a whole catalog (no delta updates), listing every track with its packaging, codec and
//! the data a decoder needs first.
//!
//! Each track's initialization data goes in two forms at once, so that every reader finds it:
//! inline as `initData` (MSF-00's field, which Shaka Player 5.2 and moq-dev's `@moq/msf` 0.2
//! read) and as `initRef` into the root's `initDataList` (MSF-01's). For `cmaf` it is the
//! track's CMAF header (`ftyp` + `moov`, CMSF §3.1); for `loc` the WebCodecs description (the
//! `avcC` body, the AudioSpecificConfig), as moq-dev's publishers write it.

use base64::Engine;
use bytes::Bytes;
use serde::Serialize;

use crate::catalog::{AudioConfig, VideoConfig};

/// The name of the track that carries the MSF catalog (MSF §5.1).
pub const MSF_CATALOG_TRACK: &str = "catalog";

/// How a track's objects are packaged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MsfPackaging {
    /// CMAF fragments (`cmaf`): an init segment in the catalog, one `moof`+`mdat` per object.
    Cmaf,
    /// LOC (`loc`): each object is one codec frame.
    Loc,
}

impl MsfPackaging {
    fn name(self) -> &'static str {
        match self {
            MsfPackaging::Cmaf => "cmaf",
            MsfPackaging::Loc => "loc",
        }
    }
}

/// An MSF catalog, as written.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MsfCatalog {
    /// The catalog format's version.
    pub version: String,
    /// The tracks.
    pub tracks: Vec<MsfTrack>,
    /// After `tracks` (MSF-01 §5.1.8).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub init_data_list: Vec<InitData>,
}

/// One track of an MSF catalog.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MsfTrack {
    /// The MoQT track name.
    pub name: String,
    /// `cmaf` or `loc`.
    pub packaging: &'static str,
    /// A live track (no end known).
    pub is_live: bool,
    /// `video` or `audio`.
    pub role: &'static str,
    /// The codec string.
    pub codec: String,
    /// Video width in pixels.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub width: Option<u32>,
    /// Video height in pixels.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub height: Option<u32>,
    /// Video frames per second.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub framerate: Option<f64>,
    /// Audio samples per second.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub samplerate: Option<u32>,
    /// Audio channel configuration (the channel count, as a string).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub channel_config: Option<String>,
    /// Bits per second.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bitrate: Option<u64>,
    /// Every track plays together (MSF §5.1.15).
    pub render_group: u32,
    /// The CMAF init segment, base64, inline.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub init_data: Option<String>,
    /// The `initDataList` entry holding its init segment.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub init_ref: Option<String>,
}

/// An entry of `initDataList` (MSF-01 §5.1.8): `type` "inline", `data` base64.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct InitData {
    /// What `initRef` names it by.
    pub id: String,
    /// `inline`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// The init segment, base64.
    pub data: String,
}

/// A track to list: its name, its configuration, and its initialization data.
pub(crate) enum Listed<'a> {
    Video(&'a str, &'a VideoConfig, Option<&'a Bytes>),
    Audio(&'a str, &'a AudioConfig, Option<&'a Bytes>),
}

/// The catalog of `tracks`, each packaged `packaging`.
pub(crate) fn catalog(tracks: &[Listed<'_>], packaging: MsfPackaging) -> MsfCatalog {
    let b64 = |b: &Bytes| base64::engine::general_purpose::STANDARD.encode(b);
    let mut out = MsfCatalog { version: "draft-01".into(), tracks: Vec::new(), init_data_list: Vec::new() };
    for listed in tracks {
        let (name, init) = match listed {
            Listed::Video(name, _, init) | Listed::Audio(name, _, init) => (*name, *init),
        };
        let init_ref = init.map(|data| {
            let id = format!("init-{name}");
            out.init_data_list.push(InitData { id: id.clone(), kind: "inline", data: b64(data) });
            id
        });
        let base = MsfTrack {
            name: name.to_string(),
            packaging: packaging.name(),
            is_live: true,
            role: "video",
            codec: String::new(),
            width: None,
            height: None,
            framerate: None,
            samplerate: None,
            channel_config: None,
            bitrate: None,
            render_group: 1,
            init_data: init.map(b64),
            init_ref,
        };
        out.tracks.push(match listed {
            Listed::Video(_, v, _) => MsfTrack {
                codec: v.codec.clone(),
                width: v.coded_width,
                height: v.coded_height,
                framerate: v.framerate,
                bitrate: v.bitrate,
                ..base
            },
            Listed::Audio(_, a, _) => MsfTrack {
                role: "audio",
                codec: a.codec.clone(),
                samplerate: Some(a.sample_rate),
                channel_config: Some(a.number_of_channels.to_string()),
                bitrate: a.bitrate,
                ..base
            },
        });
    }
    out
}

impl MsfCatalog {
    /// The JSON the catalog track carries.
    pub fn to_json(&self) -> Bytes {
        // Plain structs of strings and numbers serialise; a NaN frame rate (never measured
        // so) would become `null`.
        Bytes::from(serde_json::to_vec(self).unwrap_or_default())
    }
}
