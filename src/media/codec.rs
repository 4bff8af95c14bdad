//! From a `moov`'s tracks to hang renditions: which tracks can be published, their WebCodecs
//! codec strings and decoder descriptions (moq-dev/moq `doc/concept/layer/hang.md`,
//! "`description`"), and the per-track defaults a fragment falls back on (`trex`).

use bytes::Bytes;
use mp4_atom::{Atom, Codec, Moov, Trak};

use crate::catalog::{AudioConfig, Container, VideoConfig};

/// Whether a track is video or audio.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MediaKind {
    /// A video track.
    Video,
    /// An audio track.
    Audio,
}

/// A track's decoder configuration, as the catalog will carry it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Rendition {
    Video(VideoConfig),
    Audio(AudioConfig),
}

impl Rendition {
    pub(crate) fn kind(&self) -> MediaKind {
        match self {
            Rendition::Video(_) => MediaKind::Video,
            Rendition::Audio(_) => MediaKind::Audio,
        }
    }

    /// Whether two renditions configure a decoder identically (what the player reloads on),
    /// ignoring the measured fields: framerate, bitrate, jitter.
    pub(crate) fn same_decoder(&self, other: &Rendition) -> bool {
        match (self, other) {
            (Rendition::Video(a), Rendition::Video(b)) => {
                (&a.codec, &a.description, a.coded_width, a.coded_height)
                    == (&b.codec, &b.description, b.coded_width, b.coded_height)
            }
            (Rendition::Audio(a), Rendition::Audio(b)) => {
                (&a.codec, &a.description, a.sample_rate, a.number_of_channels)
                    == (&b.codec, &b.description, b.sample_rate, b.number_of_channels)
            }
            _ => false,
        }
    }
}

/// The sample defaults of a track's `trex` (ISO/IEC 14496-12 §8.8.3), 0 where absent.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Defaults {
    pub duration: u32,
    pub size: u32,
    pub flags: u32,
}

/// A track of the `moov` that will be published.
#[derive(Debug, Clone)]
pub(crate) struct TrackSetup {
    pub track_id: u32,
    pub timescale: u32,
    /// Added to each sample's composition time, in `timescale` units: the track's edit list.
    pub edit_shift: i64,
    pub defaults: Defaults,
    pub rendition: Rendition,
    /// `Some(n)`: the samples carry `n`-byte NAL unit lengths that must become Annex B start
    /// codes (an `avc3` track whose `avcC` lists no parameter sets, so no description).
    pub annexb: Option<u8>,
    /// H.264: the samples' NAL unit length size and the `avcC`'s parameter sets (SPS, then
    /// PPS), which LOC puts in band before each keyframe (`loc.rs`).
    pub h264: Option<(u8, Vec<Vec<u8>>)>,
    /// The track's CMAF header for MSF's `cmaf` packaging (`cmaf::header`), as track 1.
    pub cmaf_header: Option<Bytes>,
}

/// A track of the `moov` that will not be published, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkippedTrack {
    /// Its `tkhd` track ID.
    pub track_id: u32,
    /// Why it is not published.
    pub reason: String,
}

/// Every track of `moov`, sorted into those published and those skipped.
pub(crate) fn tracks(moov: &Moov) -> (Vec<TrackSetup>, Vec<SkippedTrack>) {
    let (mut setups, mut skipped) = (Vec::new(), Vec::new());
    for trak in &moov.trak {
        let track_id = trak.tkhd.track_id;
        let result = if setups.iter().any(|s: &TrackSetup| s.track_id == track_id) {
            Err("duplicate track ID".to_string())
        } else {
            setup(moov, trak)
        };
        match result {
            Ok(setup) => setups.push(setup),
            Err(reason) => skipped.push(SkippedTrack { track_id, reason }),
        }
    }
    (setups, skipped)
}

fn setup(moov: &Moov, trak: &Trak) -> Result<TrackSetup, String> {
    let track_id = trak.tkhd.track_id;
    let timescale = trak.mdia.mdhd.timescale;
    if timescale == 0 {
        return Err("media timescale is 0".into());
    }
    let handler = trak.mdia.hdlr.handler;
    let codecs = &trak.mdia.minf.stbl.stsd.codecs;
    let codec = match codecs.as_slice() {
        [] => return Err("no sample entry".into()),
        [codec] => codec,
        _ => return Err(format!("{} sample entries (only one is supported)", codecs.len())),
    };
    let avcc = match codec {
        Codec::Avc1(avc1) => Some(&avc1.avcc),
        Codec::Avc3(avc3) => Some(&avc3.avcc),
        _ => None,
    };
    let h264_sets = avcc.map(|a| {
        let sets = a.sequence_parameter_sets.iter().chain(&a.picture_parameter_sets).cloned().collect();
        (a.length_size, sets)
    });
    let (rendition, annexb) = match (&<[u8; 4]>::from(handler), codec) {
        (b"vide", Codec::Avc1(avc1)) => h264("avc1", &avc1.avcc, &avc1.visual, avc1.btrt.as_ref())?,
        (b"vide", Codec::Avc3(avc3)) => h264("avc3", &avc3.avcc, &avc3.visual, avc3.btrt.as_ref())?,
        (b"soun", Codec::Mp4a(mp4a)) => (aac(mp4a)?, None),
        (b"soun", Codec::Opus(opus)) => (self::opus(opus)?, None),
        (b"vide" | b"soun", other) => return Err(format!("unsupported codec {}", fourcc(other))),
        _ => return Err(format!("unsupported handler {handler}")),
    };
    let trex = moov.mvex.as_ref().and_then(|m| m.trex.iter().find(|t| t.track_id == track_id));
    let defaults = trex.map_or(Defaults::default(), |t| Defaults {
        duration: t.default_sample_duration,
        size: t.default_sample_size,
        flags: t.default_sample_flags,
    });
    let edit_shift = edit_shift(trak, moov.mvhd.timescale, timescale);
    // As track 1 whatever its ID here, and with no times of its own, so that a restarted
    // encoder with the same settings gives the same header (`emit.rs` keeps the rendition).
    let mut alone = trak.clone();
    alone.tkhd.track_id = 1;
    alone.tkhd.creation_time = 0;
    alone.tkhd.modification_time = 0;
    alone.mdia.mdhd.creation_time = 0;
    alone.mdia.mdhd.modification_time = 0;
    let mvhd = mp4_atom::Mvhd { creation_time: 0, modification_time: 0, ..moov.mvhd.clone() };
    let cmaf_header = crate::cmaf::header(&mvhd, &alone).ok();
    Ok(TrackSetup {
        track_id,
        timescale,
        edit_shift,
        defaults,
        rendition,
        annexb,
        h264: h264_sets,
        cmaf_header,
    })
}

/// Where the track's edit list (ISO/IEC 14496-12 §8.6.6 `elst`) puts its media on the
/// presentation timeline, for the common lists: leading empty edits (`media_time` -1) delay
/// it by their duration (in the movie's timescale), and the first media edit starts
/// presentation at its `media_time` (an encoder's B-frame delay or AAC priming). Later edits,
/// and rates, are ignored.
fn edit_shift(trak: &Trak, movie_timescale: u32, timescale: u32) -> i64 {
    let Some(elst) = trak.edts.as_ref().and_then(|e| e.elst.as_ref()) else { return 0 };
    let mut delay: i128 = 0;
    for entry in &elst.entries {
        match entry.media_time {
            None => delay += i128::from(entry.segment_duration),
            Some(start) => {
                let delay = delay * i128::from(timescale) / i128::from(movie_timescale.max(1));
                let shift = delay - i128::from(start);
                return i64::try_from(shift).unwrap_or(0);
            }
        }
    }
    0
}

/// The sample entry's four-character code, for messages.
fn fourcc(codec: &Codec) -> String {
    match codec {
        Codec::Unknown(kind, _) => kind.to_string(),
        // mp4-atom names its variants after the sample entry types (Hev1, Vp09, Mp3, ...).
        other => format!("{other:?}").split('(').next().unwrap_or_default().to_lowercase(),
    }
}

/// H.264 (ISO/IEC 14496-15 §5.3): the codec string is `avc1.PPCCLL` (or `avc3.`) from the
/// `avcC`'s profile, compatibility and level bytes (the WebCodecs AVC registration); the
/// description is the `avcC` body, so the samples stay length-prefixed as in the `mdat`.
fn h264(
    prefix: &str,
    avcc: &mp4_atom::Avcc,
    visual: &mp4_atom::Visual,
    btrt: Option<&mp4_atom::Btrt>,
) -> Result<(Rendition, Option<u8>), String> {
    let codec = format!(
        "{prefix}.{:02x}{:02x}{:02x}",
        avcc.avc_profile_indication, avcc.profile_compatibility, avcc.avc_level_indication
    );
    // An avc3 track may leave its parameter sets in band (§5.4.2.1.1): without them there is
    // no usable description, and WebCodecs then reads the samples as Annex B.
    let in_band = prefix == "avc3" && avcc.sequence_parameter_sets.is_empty();
    let description = if in_band {
        None
    } else {
        let mut body = Vec::new();
        avcc.encode_body(&mut body).map_err(|e| format!("avcC: {e}"))?;
        Some(Bytes::from(body))
    };
    let config = VideoConfig {
        codec,
        container: Container::Legacy,
        description,
        coded_width: Some(u32::from(visual.width)).filter(|w| *w > 0),
        coded_height: Some(u32::from(visual.height)).filter(|h| *h > 0),
        framerate: None,
        bitrate: btrt.map(|b| u64::from(b.avg_bitrate)).filter(|b| *b > 0),
        jitter: None,
    };
    Ok((Rendition::Video(config), in_band.then_some(avcc.length_size)))
}

/// The MPEG-4 Audio sampling frequencies by index (ISO/IEC 14496-3 §1.6.3.4).
const AAC_RATES: [u32; 13] =
    [96000, 88200, 64000, 48000, 44100, 32000, 24000, 22050, 16000, 12000, 11025, 8000, 7350];

/// AAC (ISO/IEC 14496-14 `esds`): `mp4a.40.<audio object type>` for MPEG-4 Audio
/// (objectTypeIndication 0x40), the AudioSpecificConfig as the description.
fn aac(mp4a: &mp4_atom::Mp4a) -> Result<Rendition, String> {
    let dec = &mp4a.esds.es_desc.dec_config;
    if dec.object_type_indication != 0x40 {
        return Err(format!(
            "mp4a objectTypeIndication {:#04x} is not MPEG-4 Audio",
            dec.object_type_indication
        ));
    }
    let specific = dec.dec_specific.as_ref().ok_or("esds has no DecoderSpecificInfo")?;
    if specific.raw.len() < 2 || specific.profile == 0 {
        return Err("esds has no AudioSpecificConfig".into());
    }
    let entry_rate = u32::from(mp4a.audio.sample_rate.integer());
    let table_rate = AAC_RATES.get(usize::from(specific.freq_index)).copied();
    let sample_rate = Some(entry_rate).filter(|r| *r > 0).or(table_rate).ok_or("no sample rate")?;
    // The AudioSpecificConfig's channelConfiguration (§1.6.3.5) rules: muxers write 2 in the
    // sample entry whatever the stream (ffmpeg does for mono AAC). 0 defers to a program
    // config element, which the sample entry's count then stands for; 7 is 7.1 (8 channels);
    // parametric stereo (AOT 29) decodes a mono core to two.
    let channels = match (specific.profile, specific.chan_conf) {
        (29, 1) => 2,
        (_, 1..=6) => u32::from(specific.chan_conf),
        (_, 7) => 8,
        _ => u32::from(mp4a.audio.channel_count),
    };
    if channels == 0 {
        return Err("no channel count".into());
    }
    let declared = [dec.avg_bitrate, mp4a.btrt.as_ref().map_or(0, |b| b.avg_bitrate)];
    Ok(Rendition::Audio(AudioConfig {
        codec: format!("mp4a.40.{}", specific.profile),
        container: Container::Legacy,
        description: Some(Bytes::copy_from_slice(&specific.raw)),
        sample_rate,
        number_of_channels: channels,
        bitrate: declared.into_iter().find(|b| *b > 0).map(u64::from),
        jitter: None,
    }))
}

/// Opus (the Opus-in-ISOBMFF mapping, `Opus` sample entry with `dOps`): codec `opus`, no
/// description (`@moq/watch` configures Opus without one), and 48 kHz, the rate Opus always
/// decodes at (the `dOps` InputSampleRate is only the original input's).
fn opus(opus: &mp4_atom::Opus) -> Result<Rendition, String> {
    let channels = match opus.dops.output_channel_count {
        0 => u32::from(opus.audio.channel_count),
        n => u32::from(n),
    };
    if channels == 0 {
        return Err("no channel count".into());
    }
    Ok(Rendition::Audio(AudioConfig {
        codec: "opus".into(),
        container: Container::Legacy,
        description: None,
        sample_rate: 48000,
        number_of_channels: channels,
        bitrate: opus.btrt.as_ref().map(|b| u64::from(b.avg_bitrate)).filter(|b| *b > 0),
        jitter: None,
    }))
}
