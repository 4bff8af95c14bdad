//! moq-edge's media import, sans-IO: a fragmented MP4 (CMAF) byte stream in, a **hang**
//! broadcast out — the catalog and the frames that moq-dev's `<moq-watch>` player reads over
//! MoQT (moq-dev/moq `doc/concept/layer/hang.md`) — or, with [`ImportConfig::packaging`], an
//! **MSF** one (the MOQT Streaming Format: [`msf`]'s catalog, each frame a CMAF chunk or a LOC
//! payload: `cmaf.rs`, [`loc`]), what Shaka Player's MoQ client reads. The sections below
//! describe hang; MSF differs in the catalog and each object's bytes, not in the tracks,
//! groups and objects.
//!
//! This crate knows nothing of MoQT or sockets: it says which track each object goes to, in
//! which group, with which bytes; a publisher writes them.
//!
//! # The broadcast
//!
//! - A broadcast is a MoQT namespace. Its track [`CATALOG_TRACK`] (`catalog.json`) carries the
//!   catalog: each group holds one object, the whole JSON document ([`Output::Catalog`]; the
//!   player reads the first object of each group as a full snapshot, `@moq/json`
//!   `snapshot/consumer.ts`).
//! - One MoQT track per rendition, named as the catalog names it ([`Frame::track`]).
//! - Each video group is one GOP starting with a keyframe ([`Frame::new_group`]); audio
//!   groups follow [`AudioGroups`].
//! - Each object is one frame in the `legacy` container: the presentation timestamp in
//!   microseconds as a QUIC varint (RFC 9000 §16), then the codec payload
//!   ([`legacy`]). H.264 payloads stay as in the `mdat` (length-prefixed NAL units) since the
//!   catalog's `description` is the `avcC`.
//!
//! The catalog is emitted at the first fragment after each `moov` (before that fragment's
//! frames), once it can say each rendition's frame rate, bitrate and `jitter`, and only when
//! it differs from the last one: a restarted encoder with the same settings continues the
//! same tracks (`emit.rs` has the naming and timeline rules). A `moov` is expected whenever
//! the tracks change: a restart, a resolution change.
//!
//! # Not supported
//!
//! - Codecs other than H.264 (`avc1`, `avc3`), AAC (`mp4a`, MPEG-4 Audio) and Opus: such a
//!   track is [`Output::Skipped`] with its reason (HEVC, AV1, VP9, MP3, encrypted entries),
//!   and a `moov` with no track left is [`Error::NoSupportedTrack`]; a track with several
//!   sample entries is skipped too.
//! - Non-fragmented MP4 (an `mdat` with no `moof`), boxes of size 0 ("to the end of the
//!   file"), `moof` boxes whose data lies outside the `mdat` right after them.
//! - Edit lists beyond their leading empty edits and first media edit; `tkhd` rotation;
//!   the `display` size, `catalog.json.z` (the DEFLATE-compressed catalog hang publishers
//!   also serve; `@moq/watch` reads it only when asked), timeline tracks, and the `cmaf` and
//!   `loc` containers.
//!
//! # Use
//!
//! ```
//! let mut importer = media::Importer::new(media::ImportConfig::default());
//! # let chunk: &[u8] = &[];
//! importer.push(chunk)?;
//! while let Some(output) = importer.poll()? {
//!     match output {
//!         media::Output::Catalog(update) => { /* a new group of catalog.json: update.json */ }
//!         media::Output::Frame(frame) => { /* frame.payload into frame.track, group frame.group */ }
//!         media::Output::Skipped(track) => { /* a track not published, and why */ }
//!     }
//! }
//! # Ok::<(), media::Error>(())
//! ```
//!
//! # What a publisher must know of the player
//!
//! `@moq/watch` 0.4.6 (over `@moq/net` 0.2.8) subscribes to each track with the Largest
//! Object filter and descending group order, and never fetches: over a relay that follows the
//! MoQT drafts to the letter it sees only objects after the latest one, so it would miss a
//! catalog published once (set [`ImportConfig::repeat_catalog_us`]) and may start a video
//! track in the middle of a group, whose first object it then takes for a keyframe.

#![warn(missing_docs, unreachable_pub)]

mod boxes;
pub mod catalog;
mod cmaf;
mod codec;
mod emit;
mod error;
mod fragment;
mod importer;
pub mod legacy;
pub mod loc;
pub mod msf;

pub use catalog::{Catalog, CATALOG_TRACK};
pub use codec::{MediaKind, SkippedTrack};
pub use error::Error;
pub use importer::{AudioGroups, CatalogUpdate, Frame, ImportConfig, Importer, Output, Packaging, Stats};
