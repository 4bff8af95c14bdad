//! What a fragment becomes: the catalog (when the tracks change) and one frame per sample,
//! each with its track, group and timestamp.
//!
//! Track names: `video<n>` / `audio<n>`, `n` counting every rendition the importer has named
//! (`video0`, `audio1`, as moq-dev/moq `doc/concept/layer/hang.md`'s example catalog). A new
//! `moov` whose track configures its decoder exactly as a rendition of the current catalog
//! keeps that rendition's name, entry and group numbering (a restarted encoder continues the
//! same track); any other track gets a new name, so a player never reads frames of one
//! decoder configuration with another's (`@moq/watch` switches renditions by name).
//!
//! Timestamps continue across restarts: a stream's first samples are shifted to start where
//! the previous stream's frames ended (unless they already start later). `@moq/watch` only
//! promotes a new rendition once its playhead has caught up with the old one's
//! (`video/playhead.ts`, `caughtUp`), and reads timestamps going back as a rewind.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;

use bytes::Bytes;

use crate::catalog::{Audio, Catalog, Video};
use crate::cmaf::{self, ChunkTiming};
use crate::codec::{MediaKind, Rendition};
use crate::fragment::Sample;
use crate::importer::{AudioGroups, CatalogUpdate, Frame, ImportConfig, Output, Packaging, Stats, Stream};
use crate::legacy::{encode_frame, MAX_TIMESTAMP_US};
use crate::loc;
use crate::msf::{self, Listed, MsfPackaging};
use crate::Error;

/// A track's place in its groups, kept across streams by name.
#[derive(Debug, Default)]
struct TrackState {
    /// Groups started so far (the next group's number).
    groups: u64,
    next_object: u64,
    /// A group is open: the next frame may continue it.
    open: bool,
    group_start_us: u64,
    /// CMAF chunks written (each `moof`'s sequence number, from 1).
    chunks: u32,
}

/// A rendition of the catalog: its name, its configuration, and its CMAF header.
type Entry = (Arc<str>, Rendition, Option<Bytes>);

/// The broadcast's renditions, names and timeline, kept across streams.
#[derive(Debug, Default)]
pub(crate) struct Renditions {
    emitted: Option<Catalog>,
    /// The JSON last emitted (MSF's differs from hang's typed catalog by the init data).
    emitted_json: Option<Bytes>,
    current: Vec<Entry>,
    named: u64,
    tracks: HashMap<Arc<str>, TrackState>,
    /// The latest end (timestamp + duration) of any frame emitted, microseconds.
    timeline_end: i128,
    /// When the catalog was last repeated; `None` right after it changed.
    last_catalog_us: Option<u64>,
}

impl Renditions {
    pub(crate) fn catalog(&self) -> Option<&Catalog> {
        self.emitted.as_ref()
    }

    pub(crate) fn timeline_end(&self) -> i128 {
        self.timeline_end
    }

    /// Names the tracks of `stream` at its first fragment (whose `samples` measure the new
    /// renditions) and returns the catalog if it differs from the one last emitted.
    pub(crate) fn announce(
        &mut self,
        stream: &mut Stream,
        samples: &[Sample],
        config: &ImportConfig,
    ) -> Option<CatalogUpdate> {
        let mut entries: Vec<Entry> = Vec::new();
        stream.measured.clear();
        for (index, setup) in stream.setups.iter().enumerate() {
            let same = self.current.iter().find(|(name, rendition, header)| {
                rendition.same_decoder(&setup.rendition)
                    && *header == setup.cmaf_header
                    && !entries.iter().any(|(n, _, _)| n == name)
            });
            let entry = match same {
                Some(kept) => {
                    stream.measured.push(true);
                    kept.clone()
                }
                None => {
                    let prefix = if setup.rendition.kind() == MediaKind::Video { "video" } else { "audio" };
                    let name: Arc<str> = Arc::from(format!("{prefix}{}", self.named));
                    self.named += 1;
                    stream.measured.push(samples.iter().any(|s| s.track == index));
                    (name, measured(&setup.rendition, index, samples), setup.cmaf_header.clone())
                }
            };
            // A new stream starts a new group on every track.
            self.tracks.entry(entry.0.clone()).or_default().open = false;
            entries.push(entry);
        }
        stream.names = entries.iter().map(|(name, _, _)| name.clone()).collect();
        self.current = entries;
        self.emit(config)
    }

    /// A fragment after the first of `stream`: a new rendition that had no sample in the first
    /// one (ffmpeg's fragment per frame holds one track's frame) is measured on its own first,
    /// and the catalog emitted again with its frame rate and bitrate.
    pub(crate) fn remeasure(
        &mut self,
        stream: &mut Stream,
        samples: &[Sample],
        config: &ImportConfig,
    ) -> Option<CatalogUpdate> {
        let mut changed = false;
        for (index, done) in stream.measured.iter_mut().enumerate() {
            if *done || !samples.iter().any(|s| s.track == index) {
                continue;
            }
            *done = true;
            let name = &stream.names[index];
            if let Some(entry) = self.current.iter_mut().find(|(n, _, _)| n == name) {
                entry.1 = measured(&stream.setups[index].rendition, index, samples);
                changed = true;
            }
        }
        if changed {
            self.emit(config)
        } else {
            None
        }
    }

    /// The catalog of the current renditions, if it differs from the one last emitted.
    fn emit(&mut self, config: &ImportConfig) -> Option<CatalogUpdate> {
        let catalog = self.build();
        let json = self.json(&catalog, config);
        if self.emitted_json.as_ref() == Some(&json) {
            return None;
        }
        self.emitted = Some(catalog.clone());
        self.emitted_json = Some(json.clone());
        self.last_catalog_us = None;
        Some(CatalogUpdate { json, catalog })
    }

    /// The bytes of the catalog track: hang's `catalog`, or MSF's of the same renditions.
    fn json(&self, catalog: &Catalog, config: &ImportConfig) -> Bytes {
        let Some(packaging) = config.packaging.msf() else { return catalog.to_json() };
        let listed: Vec<Listed<'_>> = self
            .current
            .iter()
            .map(|(name, rendition, header)| {
                // CMAF: the CMAF header; LOC: the decoder's description.
                match (rendition, packaging) {
                    (Rendition::Video(v), MsfPackaging::Cmaf) => Listed::Video(name, v, header.as_ref()),
                    (Rendition::Video(v), MsfPackaging::Loc) => {
                        Listed::Video(name, v, v.description.as_ref())
                    }
                    (Rendition::Audio(a), MsfPackaging::Cmaf) => Listed::Audio(name, a, header.as_ref()),
                    (Rendition::Audio(a), MsfPackaging::Loc) => {
                        Listed::Audio(name, a, a.description.as_ref())
                    }
                }
            })
            .collect();
        msf::catalog(&listed, packaging).to_json()
    }

    fn build(&self) -> Catalog {
        let (mut video, mut audio) = (BTreeMap::new(), BTreeMap::new());
        for (name, rendition, _) in &self.current {
            match rendition {
                Rendition::Video(config) => video.insert(name.to_string(), config.clone()).is_none(),
                Rendition::Audio(config) => audio.insert(name.to_string(), config.clone()).is_none(),
            };
        }
        Catalog {
            video: (!video.is_empty()).then_some(Video { renditions: video }),
            audio: (!audio.is_empty()).then_some(Audio { renditions: audio }),
        }
    }

    /// The catalog to repeat before a group of the stream's lead track that starts at `ts`.
    fn repeat(&mut self, config: &ImportConfig, ts: u64) -> Option<CatalogUpdate> {
        let every = config.repeat_catalog_us?;
        match self.last_catalog_us {
            Some(last) if ts < last.saturating_add(every) => None,
            None => {
                self.last_catalog_us = Some(ts);
                None
            }
            Some(_) => {
                self.last_catalog_us = Some(ts);
                let catalog = self.emitted.clone()?;
                Some(CatalogUpdate { json: self.emitted_json.clone()?, catalog })
            }
        }
    }
}

/// `rendition` with what the first fragment shows of its track (the `index`th): frame rate,
/// bitrate (unless declared) and jitter, the fragment's duration (frames reach the
/// publisher a fragment at a time).
fn measured(rendition: &Rendition, index: usize, samples: &[Sample]) -> Rendition {
    let mine = samples.iter().filter(|s| s.track == index);
    let (count, bytes, micros) =
        mine.fold((0u64, 0u64, 0i128), |(c, b, d), s| (c + 1, b + s.range.len() as u64, d + s.duration_us));
    let mut rendition = rendition.clone();
    if count == 0 || micros <= 0 {
        return rendition;
    }
    let seconds = micros as f64 / 1e6;
    let bitrate = (bytes as f64 * 8.0 / seconds).round() as u64;
    let jitter = u64::try_from((micros + 999) / 1000).ok();
    match &mut rendition {
        Rendition::Video(v) => {
            v.framerate = Some((count as f64 / seconds * 1000.0).round() / 1000.0);
            v.bitrate = v.bitrate.or(Some(bitrate));
            v.jitter = jitter;
        }
        Rendition::Audio(a) => {
            a.bitrate = a.bitrate.or(Some(bitrate));
            a.jitter = jitter;
        }
    }
    rendition
}

/// The samples of one fragment not yet turned into frames.
pub(crate) struct Pending {
    mdat: Bytes,
    samples: std::vec::IntoIter<Sample>,
}

impl Pending {
    pub(crate) fn new(mdat: Bytes, samples: Vec<Sample>) -> Self {
        Pending { mdat, samples: samples.into_iter() }
    }

    /// Turns the next sample into outputs (none if it is dropped); `false` when done.
    pub(crate) fn next(
        &mut self,
        stream: &Stream,
        renditions: &mut Renditions,
        config: &ImportConfig,
        stats: &mut Stats,
        queue: &mut VecDeque<Output>,
    ) -> Result<bool, Error> {
        let Some(sample) = self.samples.next() else { return Ok(false) };
        if sample.range.is_empty() {
            stats.empty_samples += 1;
            return Ok(true);
        }
        let setup = &stream.setups[sample.track];
        let name = &stream.names[sample.track];
        let kind = setup.rendition.kind();
        let ts = sample.pts_us + stream.offset_us.unwrap_or(0);
        let ts = u64::try_from(ts).ok().filter(|t| *t <= MAX_TIMESTAMP_US).ok_or(Error::Timestamp(ts))?;
        let state = renditions.tracks.entry(name.clone()).or_default();
        let new_group = match (kind, config.audio_groups) {
            (MediaKind::Video, _) => sample.sync,
            (MediaKind::Audio, AudioGroups::EachFrame) => true,
            (MediaKind::Audio, AudioGroups::Every { micros }) => {
                !state.open || ts >= state.group_start_us.saturating_add(micros)
            }
        };
        if !new_group && !state.open {
            stats.dropped_before_keyframe += 1;
            return Ok(true);
        }
        if new_group {
            *state = TrackState {
                groups: state.groups + 1,
                next_object: 0,
                open: true,
                group_start_us: ts,
                chunks: state.chunks,
            };
        }
        let (group, object) = (state.groups - 1, state.next_object);
        state.next_object += 1;
        state.chunks = state.chunks.wrapping_add(1);
        let sequence = state.chunks;
        if new_group && is_lead(stream, sample.track) {
            queue.extend(renditions.repeat(config, ts).map(Output::Catalog));
        }
        let data = &self.mdat[sample.range.clone()];
        let duration_us = u64::try_from(sample.duration_us).unwrap_or(0);
        let keyframe = sample.sync || kind == MediaKind::Audio;
        let mut properties = Vec::new();
        let payload = match config.packaging {
            Packaging::Hang => match setup.annexb {
                Some(length_size) => encode_frame(ts, &to_annexb(data, length_size)?),
                None => encode_frame(ts, data),
            },
            Packaging::MsfCmaf => {
                let decode = u64::try_from(sample.dts_us + stream.offset_us.unwrap_or(0)).unwrap_or(0);
                let timing = ChunkTiming {
                    decode_us: decode,
                    duration_us: u32::try_from(duration_us).unwrap_or(u32::MAX),
                    composition_offset_us: i64::try_from(i128::from(ts) - i128::from(decode)).unwrap_or(0),
                    sync: keyframe,
                };
                cmaf::chunk(sequence, 1, timing, data).map_err(Error::Package)?
            }
            Packaging::MsfLoc => {
                properties.push((loc::TIMESTAMP_PROPERTY, ts));
                let mut payload = loc::private_properties(ts);
                match &setup.h264 {
                    Some((length_size, sets)) => {
                        payload.extend(loc::h264_frame(data, *length_size, sets, sample.sync)?)
                    }
                    None => payload.extend_from_slice(data),
                }
                Bytes::from(payload)
            }
        };
        renditions.timeline_end = renditions.timeline_end.max(i128::from(ts) + i128::from(duration_us));
        queue.push_back(Output::Frame(Frame {
            track: name.clone(),
            kind,
            group,
            object,
            new_group,
            keyframe,
            timestamp_us: ts,
            duration_us,
            payload,
            properties,
        }));
        Ok(true)
    }
}

/// Whether the `index`th track paces the catalog's repetition: the first video track, or
/// the first track when there is no video.
fn is_lead(stream: &Stream, index: usize) -> bool {
    let video = stream.setups.iter().position(|s| s.rendition.kind() == MediaKind::Video);
    video.unwrap_or(0) == index
}

/// An H.264 sample of `length_size`-byte NAL unit lengths (ISO/IEC 14496-15 §5.3.2) as
/// Annex B (ITU-T H.264 Annex B): each length becomes a start code.
fn to_annexb(data: &[u8], length_size: u8) -> Result<Vec<u8>, Error> {
    let n = usize::from(length_size);
    let mut out = Vec::with_capacity(data.len() + 16);
    let mut rest = data;
    while !rest.is_empty() {
        let prefix = rest.get(..n).ok_or(Error::BadSample("truncated NAL unit length"))?;
        let len = prefix.iter().fold(0usize, |acc, b| acc << 8 | usize::from(*b));
        let nal = rest.get(n..n + len).ok_or(Error::BadSample("NAL unit past the end of the sample"))?;
        out.extend_from_slice(&[0, 0, 0, 1]);
        out.extend_from_slice(nal);
        rest = &rest[n + len..];
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn annexb_replaces_lengths_with_start_codes() {
        let sample = [0, 0, 0, 2, 0x65, 0xaa, 0, 0, 0, 1, 0x41];
        assert_eq!(to_annexb(&sample, 4), Ok(vec![0, 0, 0, 1, 0x65, 0xaa, 0, 0, 0, 1, 0x41]));
        assert_eq!(to_annexb(&[1, 0x65], 1), Ok(vec![0, 0, 0, 1, 0x65]));
        assert!(to_annexb(&[0, 0, 0, 3, 0x65], 4).is_err());
        assert!(to_annexb(&[0, 0], 4).is_err());
    }
}
