//! What can go wrong while importing a byte stream. Every malformed input is one of these
//! values: the importer never panics on what it is fed.

/// An import failure. After one, the importer refuses input until [`crate::Importer::end_stream`]
/// (see there): a byte stream that went wrong cannot be resynchronised inside itself.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// A box header is malformed: a size smaller than its header, or a size field of zero
    /// ("to the end of the file"), which a stream cannot honour.
    #[error("malformed box header for {kind:?} at byte {at}: {reason}")]
    BadBox {
        /// The box's type.
        kind: String,
        /// Its byte offset in the stream.
        at: u64,
        /// What is wrong.
        reason: &'static str,
    },

    /// A box that must be held whole (`moov`, `moof`, `mdat`) is larger than
    /// [`crate::ImportConfig::max_box_size`].
    #[error("{kind} box of {size} bytes exceeds the limit of {limit}")]
    BoxTooLarge {
        /// The box's type.
        kind: String,
        /// Its size.
        size: u64,
        /// The limit.
        limit: usize,
    },

    /// [`crate::Importer::push`] would hold more than [`crate::ImportConfig::max_buffered`]
    /// bytes. Nothing was taken: poll the importer and push again.
    #[error("buffer full: {buffered} bytes held, {pushed} pushed, limit {limit}")]
    BufferFull {
        /// Bytes held.
        buffered: usize,
        /// Bytes pushed.
        pushed: usize,
        /// The limit.
        limit: usize,
    },

    /// A frame could not be packaged (writing its CMAF chunk failed).
    #[error("cannot package a frame: {0}")]
    Package(String),

    /// mp4-atom could not decode a box's contents.
    #[error("cannot decode {kind}: {reason}")]
    Decode {
        /// The box's type.
        kind: &'static str,
        /// What mp4-atom said.
        reason: String,
    },

    /// A box arrived where the stream's order does not allow it (an `mdat` or `moof` before
    /// any `moov`, an `mdat` without its `moof`, two `moof` in a row).
    #[error("{0}")]
    Order(&'static str),

    /// The `moov` describes no track this importer can publish (each track's reason is in
    /// the [`crate::Output::Skipped`] items before this error).
    #[error("the moov has no supported track")]
    NoSupportedTrack,

    /// A track's fields are unusable (a zero timescale, a missing codec configuration).
    #[error("track {track_id}: {reason}")]
    BadTrack {
        /// Its `tkhd` track ID.
        track_id: u32,
        /// What is wrong.
        reason: String,
    },

    /// A fragment's sample table is unusable: a sample outside the `mdat`, too many samples,
    /// a zero duration, an unknown track.
    #[error("fragment: {0}")]
    BadFragment(String),

    /// A presentation timestamp falls outside what the legacy container carries
    /// (0 to 2^53 - 1 microseconds: the player reads it as a JavaScript number).
    #[error("timestamp {0} µs is outside 0..2^53")]
    Timestamp(i128),

    /// An H.264 sample's NAL unit lengths do not add up (only checked where the sample is
    /// rewritten to Annex B).
    #[error("malformed H.264 sample: {0}")]
    BadSample(&'static str),

    /// [`crate::Importer::end_stream`] dropped this many bytes of a box that never completed.
    #[error("the stream ended inside a box: {bytes} bytes dropped")]
    Truncated {
        /// Bytes dropped.
        bytes: usize,
    },

    /// The importer failed earlier; [`crate::Importer::end_stream`] clears it.
    #[error("the importer failed earlier: {0}")]
    Failed(String),
}

impl Error {
    pub(crate) fn decode(kind: &'static str, err: impl std::fmt::Display) -> Self {
        Error::Decode { kind, reason: err.to_string() }
    }
}
