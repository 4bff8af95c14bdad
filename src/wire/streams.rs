//! The per-stream codecs as one type each, whatever the draft: a subgroup stream's object
//! reader and writer, a fetch stream's item reader and writer. Each holds the draft's own
//! (`data::*<Rules>`, monomorphized per draft for the per-object path) and dispatches once
//! per call; draft-20 uses draft-22's rules (its data plane is draft-22's).

use super::error::{DecodeError, EncodeError};
use super::model::{FetchItem, GroupOrder, RangeEnd, SubgroupHeader, SubgroupObject};
use super::{d14, d16, d18, d22, Version};

/// One enum per codec, a variant per data-plane rule set, and the call that dispatches.
macro_rules! per_draft {
    ($(#[$meta:meta])* $name:ident, $inner:ident) => {
        $(#[$meta])*
        #[derive(Debug)]
        pub enum $name {
            D14(d14::data::$inner),
            D16(d16::data::$inner),
            D18(d18::data::$inner),
            D22(d22::data::$inner),
        }
    };
}

/// Runs `$body` with `$w` bound to the draft's codec inside `$e`.
macro_rules! with_codec {
    ($ty:ident, $e:expr, $w:ident => $body:expr) => {
        match $e {
            $ty::D14($w) => $body,
            $ty::D16($w) => $body,
            $ty::D18($w) => $body,
            $ty::D22($w) => $body,
        }
    };
}

per_draft!(
    /// The reader of one subgroup stream's objects, after its header.
    SubgroupReader,
    SubgroupReader
);
per_draft!(
    /// The writer of one subgroup stream's objects, after its header.
    SubgroupWriter,
    SubgroupWriter
);
per_draft!(
    /// The reader of one fetch stream's items, after its header.
    FetchReader,
    FetchReader
);
per_draft!(
    /// The writer of one fetch stream's items, after its header.
    FetchWriter,
    FetchWriter
);

impl Version {
    /// A reader for the objects of the subgroup stream whose header is `h`.
    pub fn subgroup_reader(self, h: &SubgroupHeader) -> SubgroupReader {
        match self {
            Version::Draft14 => SubgroupReader::D14(d14::data::SubgroupReader::new(h)),
            Version::Draft16 => SubgroupReader::D16(d16::data::SubgroupReader::new(h)),
            Version::Draft18 => SubgroupReader::D18(d18::data::SubgroupReader::new(h)),
            Version::Draft20 | Version::Draft22 => SubgroupReader::D22(d22::data::SubgroupReader::new(h)),
        }
    }

    /// A writer for the objects of the subgroup stream whose header is `h`.
    pub fn subgroup_writer(self, h: &SubgroupHeader) -> SubgroupWriter {
        match self {
            Version::Draft14 => SubgroupWriter::D14(d14::data::SubgroupWriter::new(h)),
            Version::Draft16 => SubgroupWriter::D16(d16::data::SubgroupWriter::new(h)),
            Version::Draft18 => SubgroupWriter::D18(d18::data::SubgroupWriter::new(h)),
            Version::Draft20 | Version::Draft22 => SubgroupWriter::D22(d22::data::SubgroupWriter::new(h)),
        }
    }

    /// A reader for the items of one fetch stream whose groups go in `order`.
    pub fn fetch_reader(self, order: GroupOrder) -> FetchReader {
        match self {
            Version::Draft14 => FetchReader::D14(d14::data::FetchReader::new(order)),
            Version::Draft16 => FetchReader::D16(d16::data::FetchReader::new(order)),
            Version::Draft18 => FetchReader::D18(d18::data::FetchReader::new(order)),
            Version::Draft20 | Version::Draft22 => FetchReader::D22(d22::data::FetchReader::new(order)),
        }
    }

    /// A writer for the items of one fetch stream whose groups go in `order`.
    pub fn fetch_writer(self, order: GroupOrder) -> FetchWriter {
        match self {
            Version::Draft14 => FetchWriter::D14(d14::data::FetchWriter::new(order)),
            Version::Draft16 => FetchWriter::D16(d16::data::FetchWriter::new(order)),
            Version::Draft18 => FetchWriter::D18(d18::data::FetchWriter::new(order)),
            Version::Draft20 | Version::Draft22 => FetchWriter::D22(d22::data::FetchWriter::new(order)),
        }
    }
}

impl SubgroupReader {
    /// The next object at the front of `buf` and the bytes its header took (the payload
    /// follows), or `NeedMore`.
    pub fn decode(&mut self, buf: &[u8]) -> Result<(SubgroupObject, usize), DecodeError> {
        with_codec!(SubgroupReader, self, r => r.decode(buf))
    }
}

impl SubgroupWriter {
    /// Appends `obj`'s header (its payload is the caller's).
    pub fn encode(&mut self, obj: &SubgroupObject, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        with_codec!(SubgroupWriter, self, w => w.encode(obj, out))
    }
}

impl FetchReader {
    /// The next item at the front of `buf` and the bytes it took, or `NeedMore`.
    pub fn decode(&mut self, buf: &[u8]) -> Result<(FetchItem, usize), DecodeError> {
        with_codec!(FetchReader, self, r => r.decode(buf))
    }
}

impl FetchWriter {
    /// Appends `item`. draft-16 and draft-18 have no Timed-Out range (draft-16 §10.4.4.2,
    /// draft-18 §11.4.4.2): to their peers those objects are unknown.
    pub fn encode(&mut self, item: &FetchItem, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        let unknown;
        let item = match (&*self, item) {
            (FetchWriter::D22(_), _) => item,
            (_, FetchItem::EndOfRange { kind: RangeEnd::TimedOut, location }) => {
                unknown = FetchItem::EndOfRange { kind: RangeEnd::Unknown, location: *location };
                &unknown
            }
            _ => item,
        };
        with_codec!(FetchWriter, self, w => w.encode(item, out))
    }
}
