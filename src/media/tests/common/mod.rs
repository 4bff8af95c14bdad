//! Fixtures and helpers shared by the import tests. The fixtures are ffmpeg's fragmented MP4
//! output, committed (`fixtures/README.md` has the commands): no test runs ffmpeg.
#![allow(dead_code)]

use media::{Error, Frame, ImportConfig, Importer, MediaKind, Output};
use mp4_atom::{Decode, Encode, Moov, Trak};

/// 2 s of 160x120 H.264 High at 30 fps (GOP 30) and 440 Hz AAC-LC, 48 kHz mono.
pub const H264_AAC: &[u8] = include_bytes!("../fixtures/h264_aac.mp4");
/// The same video with Opus audio.
pub const H264_OPUS: &[u8] = include_bytes!("../fixtures/h264_opus.mp4");
/// The same video alone.
pub const H264_ONLY: &[u8] = include_bytes!("../fixtures/h264_only.mp4");
/// 1 s of 320x240 H.264 High and 660 Hz AAC-LC with the same settings: the second stream
/// of a resolution change.
pub const H264_AAC_320: &[u8] = include_bytes!("../fixtures/h264_aac_320.mp4");
/// 1 s like `H264_AAC` without the cmaf flags: sample data located by `tfhd`
/// base_data_offset from the start of the file.
pub const H264_AAC_BASE_OFFSET: &[u8] = include_bytes!("../fixtures/h264_aac_base_offset.mp4");

/// Everything the importer produces from `input` pushed in chunks of `chunk` bytes, polling
/// after each, and the error that stopped it, if any.
pub fn run_chunked(input: &[u8], chunk: usize, config: ImportConfig) -> (Vec<Output>, Option<Error>) {
    let mut importer = Importer::new(config);
    let mut out = Vec::new();
    for piece in input.chunks(chunk.max(1)) {
        if let Err(e) = importer.push(piece) {
            return (out, Some(e));
        }
        loop {
            match importer.poll() {
                Ok(Some(output)) => out.push(output),
                Ok(None) => break,
                Err(e) => return (out, Some(e)),
            }
        }
    }
    (out, None)
}

/// `input` pushed whole, with the default configuration; panics on an error.
pub fn run(input: &[u8]) -> Vec<Output> {
    let (out, err) = run_chunked(input, input.len(), ImportConfig::default());
    assert_eq!(err, None);
    out
}

pub fn frames(out: &[Output]) -> Vec<&Frame> {
    out.iter()
        .filter_map(|o| match o {
            Output::Frame(f) => Some(f),
            _ => None,
        })
        .collect()
}

pub fn frames_of(out: &[Output], kind: MediaKind) -> Vec<&Frame> {
    frames(out).into_iter().filter(|f| f.kind == kind).collect()
}

pub fn catalogs(out: &[Output]) -> Vec<serde_json::Value> {
    out.iter()
        .filter_map(|o| match o {
            Output::Catalog(c) => Some(serde_json::from_slice(&c.json).expect("catalog JSON")),
            _ => None,
        })
        .collect()
}

/// The body of the first box of type `kind` found anywhere in `file` (a byte search: the
/// fixtures hold each configuration box once).
pub fn raw_box<'a>(file: &'a [u8], kind: &[u8; 4]) -> &'a [u8] {
    let at = file.windows(4).position(|w| w == kind).expect("box present");
    let size = u32::from_be_bytes(file[at - 4..at].try_into().expect("4 bytes")) as usize;
    &file[at + 4..at - 4 + size]
}

/// The NAL unit types of an AVC sample of 4-byte lengths.
pub fn nal_types(mut sample: &[u8]) -> Vec<u8> {
    let mut types = Vec::new();
    while sample.len() >= 4 {
        let len = u32::from_be_bytes(sample[..4].try_into().expect("4 bytes")) as usize;
        assert!(4 + len <= sample.len(), "NAL unit inside the sample");
        types.push(sample[4] & 0x1f);
        sample = &sample[4 + len..];
    }
    assert!(sample.is_empty(), "no trailing bytes");
    types
}

/// The offset of the first `kind` box's type field in `file`.
pub fn find(file: &[u8], kind: &[u8; 4]) -> usize {
    file.windows(4).position(|w| w == kind).expect("box present")
}

/// `file` with each track of its moov changed by `edit` (the fixtures' moof offsets are
/// relative to the moof, so the moov may change size).
pub fn with_moov(file: &[u8], edit: impl Fn(&mut Trak)) -> Vec<u8> {
    let at = find(file, b"moov") - 4;
    let size = u32::from_be_bytes(file[at..at + 4].try_into().expect("4 bytes")) as usize;
    let mut moov = Moov::decode(&mut &file[at..at + size]).expect("moov");
    moov.trak.iter_mut().for_each(edit);
    let mut encoded = Vec::new();
    moov.encode(&mut encoded).expect("encode");
    [&file[..at], &encoded[..], &file[at + size..]].concat()
}
