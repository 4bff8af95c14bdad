//! The importer: bytes in, catalog and frames out, sans-IO. The box loop lives here; what a
//! fragment turns into (the catalog, each frame's track, group and timestamp) lives in
//! `emit.rs`.

use std::collections::VecDeque;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use mp4_atom::{Decode, Moof, Moov};

use crate::boxes;
use crate::catalog::Catalog;
use crate::codec::{self, MediaKind, SkippedTrack, TrackSetup};
use crate::emit::{Pending, Renditions};
use crate::fragment::{self, Layout, TrackTiming};
use crate::Error;

/// Limits and choices of an [`Importer`].
#[derive(Debug, Clone)]
pub struct ImportConfig {
    /// The largest `moov`, `moof` or `mdat` accepted (each is held whole until it has
    /// arrived). Other boxes are skipped as they arrive, whatever their size.
    pub max_box_size: usize,
    /// The most bytes [`Importer::push`] holds unread. More than `max_box_size`, or a box of
    /// that size never fits.
    pub max_buffered: usize,
    /// The most samples one `moof` may describe.
    pub max_samples: usize,
    /// Where audio groups begin.
    pub audio_groups: AudioGroups,
    /// Emit the catalog again, unchanged, at the first group start at least this many
    /// microseconds after the last one: for subscribers whose subscription begins after the
    /// largest object and so never see a catalog published once (see the crate docs).
    pub repeat_catalog_us: Option<u64>,
    /// The format published: hang's, or MSF's with CMAF or LOC packaging.
    pub packaging: Packaging,
}

/// The broadcast format: which catalog, and how each frame is packaged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Packaging {
    /// hang: `catalog.json`, frames in the `legacy` container (`legacy.rs`).
    #[default]
    Hang,
    /// MSF: the `catalog` track (`msf.rs`), each frame one CMAF chunk (`cmaf.rs`).
    MsfCmaf,
    /// MSF: the `catalog` track, each frame its LOC payload with a timestamp property
    /// (`loc.rs`).
    MsfLoc,
}

impl Packaging {
    /// The name of the track that carries the catalog.
    pub fn catalog_track(self) -> &'static str {
        match self {
            Packaging::Hang => crate::CATALOG_TRACK,
            Packaging::MsfCmaf | Packaging::MsfLoc => crate::msf::MSF_CATALOG_TRACK,
        }
    }

    pub(crate) fn msf(self) -> Option<crate::msf::MsfPackaging> {
        match self {
            Packaging::Hang => None,
            Packaging::MsfCmaf => Some(crate::msf::MsfPackaging::Cmaf),
            Packaging::MsfLoc => Some(crate::msf::MsfPackaging::Loc),
        }
    }
}

impl Default for ImportConfig {
    fn default() -> Self {
        ImportConfig {
            max_box_size: 32 << 20,
            max_buffered: 64 << 20,
            max_samples: 100_000,
            audio_groups: AudioGroups::EachFrame,
            repeat_catalog_us: None,
            packaging: Packaging::Hang,
        }
    }
}

/// Where an audio track's groups begin. Every audio frame is independently decodable, so any
/// frame may start a group (moq-dev/moq `doc/concept/layer/hang.md`, "Groups and Keyframes":
/// audio groups need not align with video's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AudioGroups {
    /// Each frame is its own group, as moq-dev's publishers do (`@moq/publish`'s audio
    /// encoder, `moq-mux`'s import tracks): the relay forwards each frame without waiting for
    /// a group to end, and a player that falls behind skips whole frames.
    EachFrame,
    /// A group starts at the first frame at least this many microseconds after the current
    /// group's first: fewer streams, coarser skipping.
    Every {
        /// The shortest group, in microseconds.
        micros: u64,
    },
}

/// What the importer produces, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum Output {
    /// A catalog to publish as a new group of [`crate::CATALOG_TRACK`] (one object: `json`).
    Catalog(CatalogUpdate),
    /// A media object.
    Frame(Frame),
    /// A track of the `moov` that is not published.
    Skipped(SkippedTrack),
}

/// A catalog, typed (hang's form, whatever the packaging) and as the bytes to publish on
/// [`Packaging::catalog_track`]: hang's JSON, or MSF's.
#[derive(Debug, Clone, PartialEq)]
pub struct CatalogUpdate {
    /// The catalog, typed.
    pub catalog: Catalog,
    /// The bytes to publish.
    pub json: Bytes,
}

/// One frame, ready to publish as one object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    /// The MoQT track name, as the catalog names the rendition.
    pub track: Arc<str>,
    /// Video or audio.
    pub kind: MediaKind,
    /// The group this object belongs to: numbered from 0 per track, one more for each new
    /// group (the player reads consecutive numbers as a continuous timeline).
    pub group: u64,
    /// The object's number in its group, from 0.
    pub object: u64,
    /// This frame starts `group` (`object == 0`): a video keyframe, or an audio group start.
    pub new_group: bool,
    /// A sync sample (every audio frame is).
    pub keyframe: bool,
    /// Presentation timestamp, microseconds.
    pub timestamp_us: u64,
    /// The sample's duration, microseconds.
    pub duration_us: u64,
    /// The object: the legacy container's timestamp varint, then the codec payload (hang); a
    /// CMAF chunk (MSF `cmaf`); the LOC payload (MSF `loc`).
    pub payload: Bytes,
    /// Object properties to publish with it, as (type, integer value): LOC's timestamp.
    pub properties: Vec<(u64, u64)>,
}

/// Counters of what the importer did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Frames produced.
    pub frames: u64,
    /// Catalogs produced.
    pub catalogs: u64,
    /// Video frames dropped because their track had no keyframe yet (since the `moov`).
    pub dropped_before_keyframe: u64,
    /// Samples of zero bytes, not published.
    pub empty_samples: u64,
    /// Top-level boxes passed over (`free`, `sidx`, `mfra`, `emsg`, ...).
    pub skipped_boxes: u64,
}

/// The `moov` in force and what follows from it.
pub(crate) struct Stream {
    pub setups: Vec<TrackSetup>,
    pub timing: Vec<TrackTiming>,
    pub ignored: Vec<u32>,
    /// Each track's rendition name, once the first fragment has announced them.
    pub names: Vec<Arc<str>>,
    /// Each track's frame rate and bitrate have been measured on its first fragment (or its
    /// rendition was kept from an earlier stream).
    pub measured: Vec<bool>,
    /// Added to every timestamp of this stream, set at its first samples.
    pub offset_us: Option<i128>,
}

/// Turns a fragmented MP4 byte stream into a hang broadcast's catalog and frames.
///
/// Feed it with [`push`](Self::push) and drain it with [`poll`](Self::poll) until `None`
/// before pushing again. Boxes are parsed as they are polled, so what it holds is bounded by
/// [`ImportConfig::max_buffered`] plus one fragment's frames.
pub struct Importer {
    config: ImportConfig,
    input: BytesMut,
    /// Bytes of a skipped box still to come.
    discard: u64,
    /// Bytes consumed so far, and where the current file (the last `ftyp`) began.
    position: u64,
    file_start: u64,
    failed: Option<Error>,
    queue: VecDeque<Output>,
    /// An error to return once the outputs before it are polled.
    deferred: Option<Error>,
    stream: Option<Stream>,
    moof: Option<(Moof, u64)>,
    pending: Option<Pending>,
    renditions: Renditions,
    stats: Stats,
}

impl Importer {
    /// An importer with `config`, before any input.
    pub fn new(config: ImportConfig) -> Self {
        Importer {
            config,
            input: BytesMut::new(),
            discard: 0,
            position: 0,
            file_start: 0,
            failed: None,
            queue: VecDeque::new(),
            deferred: None,
            stream: None,
            moof: None,
            pending: None,
            renditions: Renditions::default(),
            stats: Stats::default(),
        }
    }

    /// Takes the next bytes of the stream, in chunks of any size. Refuses (taking nothing)
    /// what would hold more than [`ImportConfig::max_buffered`] bytes: poll, then push again.
    pub fn push(&mut self, chunk: &[u8]) -> Result<(), Error> {
        self.check()?;
        let buffered = self.input.len();
        if buffered.saturating_add(chunk.len()) > self.config.max_buffered {
            return Err(Error::BufferFull { buffered, pushed: chunk.len(), limit: self.config.max_buffered });
        }
        self.input.extend_from_slice(chunk);
        Ok(())
    }

    /// The next output, or `None` until more bytes are pushed. An error stops the importer
    /// until [`end_stream`](Self::end_stream).
    pub fn poll(&mut self) -> Result<Option<Output>, Error> {
        self.check()?;
        match self.next_output() {
            Ok(output) => Ok(output),
            Err(e) => {
                self.failed = Some(e.clone());
                Err(e)
            }
        }
    }

    /// The input ended (the encoder exited) or failed. Drops what is in flight: a partial
    /// box, a `moof` without its `mdat`, frames not yet polled, the `moov`, and an earlier
    /// error. What a broadcast's subscribers rely on is kept: the track names, their group
    /// numbers, the catalog and the timeline, so a stream pushed next (starting with its own
    /// `ftyp` and `moov`) continues the same broadcast, its timestamps after these.
    ///
    /// Returns [`Error::Truncated`] if a partial box was dropped (a report: the importer is
    /// ready for the next stream either way).
    pub fn end_stream(&mut self) -> Result<(), Error> {
        let partial = self.input.len();
        self.position += partial as u64;
        self.file_start = self.position;
        self.input.clear();
        self.discard = 0;
        self.failed = None;
        self.queue.clear();
        self.deferred = None;
        self.stream = None;
        self.moof = None;
        self.pending = None;
        match partial {
            0 => Ok(()),
            bytes => Err(Error::Truncated { bytes }),
        }
    }

    /// The catalog last emitted.
    pub fn catalog(&self) -> Option<&Catalog> {
        self.renditions.catalog()
    }

    /// What it did so far.
    pub fn stats(&self) -> Stats {
        self.stats
    }

    fn check(&self) -> Result<(), Error> {
        match &self.failed {
            Some(e) => Err(Error::Failed(e.to_string())),
            None => Ok(()),
        }
    }

    fn next_output(&mut self) -> Result<Option<Output>, Error> {
        loop {
            if let Some(output) = self.queue.pop_front() {
                match &output {
                    Output::Catalog(_) => self.stats.catalogs += 1,
                    Output::Frame(_) => self.stats.frames += 1,
                    Output::Skipped(_) => {}
                }
                return Ok(Some(output));
            }
            if let Some(e) = self.deferred.take() {
                return Err(e);
            }
            if let Some(pending) = &mut self.pending {
                let stream = self.stream.as_ref().ok_or(Error::Order("frames without a moov"))?;
                let (renditions, config, stats) = (&mut self.renditions, &self.config, &mut self.stats);
                if !pending.next(stream, renditions, config, stats, &mut self.queue)? {
                    self.pending = None;
                }
                continue;
            }
            if !self.step()? {
                return Ok(None);
            }
        }
    }

    /// Consumes the next box, or the next bytes of a skipped one; `false` if more input is
    /// needed first.
    fn step(&mut self) -> Result<bool, Error> {
        if self.discard > 0 {
            let n = self.discard.min(self.input.len() as u64);
            let _ = self.input.split_to(n as usize);
            self.discard -= n;
            self.position += n;
            return Ok(n > 0);
        }
        let Some(header) = boxes::header(&self.input, self.position)? else { return Ok(false) };
        match &header.kind {
            b"moov" | b"moof" | b"mdat" => {}
            kind => {
                if kind == b"ftyp" {
                    self.file_start = self.position;
                } else if kind != b"styp" {
                    self.stats.skipped_boxes += 1;
                }
                self.discard = header.size;
                return Ok(true);
            }
        }
        if header.size > self.config.max_box_size as u64 {
            let limit = self.config.max_box_size;
            return Err(Error::BoxTooLarge { kind: header.name(), size: header.size, limit });
        }
        if (self.input.len() as u64) < header.size {
            return Ok(false);
        }
        let start = self.position;
        let whole = self.input.split_to(header.size as usize).freeze();
        self.position += header.size;
        match &header.kind {
            b"moov" => self.on_moov(&whole)?,
            b"moof" => self.on_moof(&whole, start)?,
            _ => self.on_mdat(whole, start)?,
        }
        Ok(true)
    }

    fn on_moov(&mut self, whole: &[u8]) -> Result<(), Error> {
        if self.moof.is_some() {
            return Err(Error::Order("a moov after a moof, before its mdat"));
        }
        let moov = Moov::decode(&mut &whole[..]).map_err(|e| Error::decode("moov", e))?;
        let (setups, skipped) = codec::tracks(&moov);
        self.queue.extend(skipped.iter().cloned().map(Output::Skipped));
        if setups.is_empty() {
            // After the Skipped items that say why.
            self.deferred = Some(Error::NoSupportedTrack);
            return Ok(());
        }
        let timing = setups
            .iter()
            .map(|s| TrackTiming {
                track_id: s.track_id,
                timescale: s.timescale,
                edit_shift: s.edit_shift,
                defaults: s.defaults,
                next_decode_time: 0,
            })
            .collect();
        let ignored = skipped.iter().map(|s| s.track_id).collect();
        self.stream = Some(Stream {
            setups,
            timing,
            ignored,
            names: Vec::new(),
            measured: Vec::new(),
            offset_us: None,
        });
        Ok(())
    }

    fn on_moof(&mut self, whole: &[u8], start: u64) -> Result<(), Error> {
        if self.stream.is_none() {
            return Err(Error::Order("moof before any moov"));
        }
        if self.moof.is_some() {
            return Err(Error::Order("two moof boxes without an mdat between them"));
        }
        let moof = Moof::decode(&mut &whole[..]).map_err(|e| Error::decode("moof", e))?;
        self.moof = Some((moof, start - self.file_start));
        Ok(())
    }

    fn on_mdat(&mut self, whole: Bytes, start: u64) -> Result<(), Error> {
        let stream = self.stream.as_mut().ok_or(Error::Order("mdat before any moov"))?;
        let (moof, moof_start) = self.moof.take().ok_or(Error::Order("mdat without a moof before it"))?;
        let header_len =
            if u32::from_be_bytes([whole[0], whole[1], whole[2], whole[3]]) == 1 { 16 } else { 8 };
        let at = start - self.file_start;
        let end = at + whole.len() as u64;
        let layout = Layout { moof_start, mdat: at..end, payload: at + header_len..end };
        let samples =
            fragment::samples(&moof, &layout, &mut stream.timing, &stream.ignored, self.config.max_samples)?;
        let update = if stream.names.is_empty() {
            self.renditions.announce(stream, &samples, &self.config)
        } else {
            self.renditions.remeasure(stream, &samples, &self.config)
        };
        self.queue.extend(update.map(Output::Catalog));
        if stream.offset_us.is_none() {
            if let Some(min) = samples.iter().map(|s| s.pts_us).min() {
                stream.offset_us = Some((self.renditions.timeline_end() - min).max(0));
            }
        }
        self.pending = Some(Pending::new(whole, samples));
        Ok(())
    }
}
