//! Malformed and unsupported input: every case is an error value or a skipped track, never a
//! panic; limits hold; an importer that failed recovers at the next stream.

mod common;

use common::*;
use media::{Error, ImportConfig, Importer, MediaKind, Output};
use mp4_atom::Codec;
use proptest::prelude::*;

fn patch_u32(file: &mut [u8], at: usize, value: u32) {
    file[at..at + 4].copy_from_slice(&value.to_be_bytes());
}

fn first_error(input: &[u8], config: ImportConfig) -> Error {
    run_chunked(input, input.len(), config).1.expect("an error")
}

fn a_box(kind: &[u8; 4], body: &[u8]) -> Vec<u8> {
    let mut out = ((8 + body.len()) as u32).to_be_bytes().to_vec();
    out.extend_from_slice(kind);
    out.extend_from_slice(body);
    out
}

#[test]
fn media_before_the_moov_is_refused() {
    assert!(matches!(first_error(&a_box(b"mdat", &[1, 2, 3]), ImportConfig::default()), Error::Order(_)));
    let moof_at = find(H264_AAC, b"moof") - 4;
    assert!(matches!(first_error(&H264_AAC[moof_at..], ImportConfig::default()), Error::Order(_)));
    // An mdat right after the moov, without its moof.
    let mdat_at = find(H264_AAC, b"mdat") - 4;
    let no_moof = [&H264_AAC[..moof_at], &H264_AAC[mdat_at..]].concat();
    assert!(matches!(first_error(&no_moof, ImportConfig::default()), Error::Order(_)));
}

#[test]
fn bad_box_sizes_are_refused() {
    for bad in [[0, 0, 0, 4, b'f', b'r', b'e', b'e'], [0, 0, 0, 0, b'm', b'd', b'a', b't']] {
        assert!(matches!(first_error(&bad, ImportConfig::default()), Error::BadBox { .. }));
    }
    let config = ImportConfig { max_box_size: 1000, ..Default::default() };
    assert!(matches!(first_error(H264_AAC, config), Error::BoxTooLarge { size: 1230, limit: 1000, .. }));
}

#[test]
fn a_large_skipped_box_is_never_held() {
    // A 1 GiB `free` box before the stream, fed as it arrives, with a 1 MiB buffer.
    let config = ImportConfig { max_buffered: 1 << 20, ..Default::default() };
    let mut importer = Importer::new(config);
    let size: u32 = 1 << 30;
    importer.push(&[&size.to_be_bytes()[..], b"free"].concat()).expect("push");
    assert_eq!(importer.poll(), Ok(None));
    let zeros = vec![0u8; 1 << 20];
    for _ in 0..(size as usize - 8) / zeros.len() {
        importer.push(&zeros).expect("push");
        assert_eq!(importer.poll(), Ok(None));
    }
    importer.push(&zeros[..(size as usize - 8) % zeros.len()]).expect("push");
    assert_eq!(importer.poll(), Ok(None));
    importer.push(H264_ONLY).expect("push");
    let mut frames = 0;
    while let Some(output) = importer.poll().expect("poll") {
        frames += usize::from(matches!(output, Output::Frame(_)));
    }
    assert_eq!(frames, 60);
}

#[test]
fn the_buffer_is_bounded_and_a_refused_push_takes_nothing() {
    let config = ImportConfig { max_buffered: 2000, ..Default::default() };
    let mut importer = Importer::new(config);
    assert!(matches!(importer.push(&H264_AAC[..2001]), Err(Error::BufferFull { limit: 2000, .. })));
    importer.push(&H264_AAC[..1500]).expect("fits");
    assert!(matches!(importer.push(&H264_AAC[1500..2100]), Err(Error::BufferFull { .. })));
    // The moov (1230 bytes after a 28-byte ftyp) is parsed, which makes room.
    assert_eq!(importer.poll(), Ok(None));
    importer.push(&H264_AAC[1500..2100]).expect("room after polling");
}

#[test]
fn a_trun_pointing_outside_the_mdat_is_refused() {
    let mut file = H264_AAC.to_vec();
    let trun = find(&file, b"trun");
    patch_u32(&mut file, trun + 12, 0x7fff_0000);
    assert!(matches!(first_error(&file, ImportConfig::default()), Error::BadFragment(_)));
}

#[test]
fn absurd_sample_counts_are_refused() {
    for count in [u32::MAX, 100_001, 31] {
        let mut file = H264_AAC.to_vec();
        let trun = find(&file, b"trun");
        patch_u32(&mut file, trun + 8, count);
        let err = first_error(&file, ImportConfig::default());
        assert!(
            matches!(err, Error::Decode { kind: "moof", .. } | Error::BadFragment(_)),
            "{count}: {err:?}"
        );
    }
    // A sample count within the box but past the limit.
    let config = ImportConfig { max_samples: 20, ..Default::default() };
    assert!(matches!(first_error(H264_AAC, config), Error::BadFragment(_)));
}

#[test]
fn a_fragment_of_an_unknown_track_is_refused() {
    let mut file = H264_AAC.to_vec();
    let tfhd = find(&file, b"tfhd");
    patch_u32(&mut file, tfhd + 8, 9);
    assert!(matches!(first_error(&file, ImportConfig::default()), Error::BadFragment(_)));
}

#[test]
fn a_failed_importer_refuses_input_until_the_stream_ends() {
    let mut importer = Importer::new(ImportConfig::default());
    importer.push(&a_box(b"mdat", &[0; 8])).expect("push");
    assert!(matches!(importer.poll(), Err(Error::Order(_))));
    assert!(matches!(importer.poll(), Err(Error::Failed(_))));
    assert!(matches!(importer.push(H264_AAC), Err(Error::Failed(_))));
    assert_eq!(importer.end_stream(), Ok(()));
    importer.push(H264_AAC).expect("push");
    let mut out = Vec::new();
    while let Some(o) = importer.poll().expect("poll") {
        out.push(o);
    }
    assert_eq!(frames(&out).len(), 155);
}

/// `file` with its video sample entry's type overwritten by `kind` (mp4-atom decodes an
/// unknown type as `Codec::Unknown`).
fn with_entry_type(file: &[u8], kind: &[u8; 4]) -> Vec<u8> {
    let mut file = file.to_vec();
    let stsd = find(&file, b"stsd");
    let entry = stsd + find(&file[stsd..], b"avc1");
    file[entry..entry + 4].copy_from_slice(kind);
    file
}

#[test]
fn unsupported_tracks_are_skipped_with_a_reason() {
    let out = run(&with_entry_type(H264_AAC, b"hvc9"));
    let Some(Output::Skipped(skipped)) = out.first() else { panic!("{:?}", out.first()) };
    assert_eq!((skipped.track_id, skipped.reason.as_str()), (1, "unsupported codec hvc9"));
    assert_eq!(frames_of(&out, MediaKind::Video).len(), 0);
    assert_eq!(frames_of(&out, MediaKind::Audio).len(), 95);
    assert_eq!(catalogs(&out)[0].get("video"), None);
    // Nothing left to publish.
    let (out, err) = run_chunked(&with_entry_type(H264_ONLY, b"hvc9"), usize::MAX, ImportConfig::default());
    assert_eq!(err, Some(Error::NoSupportedTrack));
    assert!(matches!(&out[..], [Output::Skipped(_)]));
}

#[test]
fn avc3_without_parameter_sets_is_published_as_annex_b() {
    let in_band = |c: &mut Codec| {
        if let Codec::Avc1(avc1) = c {
            let mut avcc = avc1.avcc.clone();
            avcc.sequence_parameter_sets.clear();
            avcc.picture_parameter_sets.clear();
            *c = Codec::Avc3(mp4_atom::Avc3 { visual: avc1.visual.clone(), avcc, ..Default::default() });
        }
    };
    let out = run(&with_moov(H264_ONLY, |t| t.mdia.minf.stbl.stsd.codecs.iter_mut().for_each(in_band)));
    let video = &catalogs(&out)[0]["video"]["renditions"]["video0"];
    assert_eq!((video["codec"].as_str(), video.get("description")), (Some("avc3.64000b"), None));
    let original = run(H264_ONLY);
    for (f, o) in frames(&out).iter().zip(frames(&original)) {
        let (_, annexb) = media::legacy::decode_frame(&f.payload).expect("frame");
        let (_, avcc) = media::legacy::decode_frame(&o.payload).expect("frame");
        // Each 4-byte length becomes a 4-byte start code.
        let mut expected = avcc.to_vec();
        let mut i = 0;
        while i < expected.len() {
            let len = u32::from_be_bytes(expected[i..i + 4].try_into().expect("4 bytes")) as usize;
            expected[i..i + 4].copy_from_slice(&[0, 0, 0, 1]);
            i += 4 + len;
        }
        assert_eq!(annexb, &expected[..]);
    }
    // With its parameter sets kept, avc3 keeps the avcC as its description.
    let named = |c: &mut Codec| {
        if let Codec::Avc1(avc1) = c {
            let avcc = avc1.avcc.clone();
            *c = Codec::Avc3(mp4_atom::Avc3 { visual: avc1.visual.clone(), avcc, ..Default::default() });
        }
    };
    let avc3 = with_moov(H264_ONLY, |t| t.mdia.minf.stbl.stsd.codecs.iter_mut().for_each(named));
    let video = &catalogs(&run(&avc3))[0]["video"]["renditions"]["video0"];
    assert_eq!(video["codec"], "avc3.64000b");
    assert_eq!(video["description"], media::catalog::to_hex(raw_box(H264_ONLY, b"avcC")));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..4096), chunk in 1usize..64) {
        let _ = run_chunked(&bytes, chunk, ImportConfig::default());
    }

    #[test]
    fn mutated_streams_never_panic(
        edits in proptest::collection::vec((0usize..H264_AAC.len(), any::<u8>()), 1..8),
        cut in 0usize..H264_AAC.len(),
        chunk in 1usize..8192,
    ) {
        let mut file = H264_AAC.to_vec();
        for (at, byte) in edits {
            file[at] = byte;
        }
        let _ = run_chunked(&file, chunk, ImportConfig::default());
        let _ = run_chunked(&file[..cut], chunk, ImportConfig::default());
        let spliced = [&file[..cut], H264_OPUS].concat();
        let _ = run_chunked(&spliced, chunk, ImportConfig::default());
    }

    #[test]
    fn mutated_boxes_headers_never_panic(at in 0usize..64, value in any::<u32>(), chunk in 1usize..8192) {
        // Box sizes and fields: overwrite a word inside the moov or the first moof.
        for kind in [b"moov", b"moof", b"trun", b"tfhd", b"avcC", b"esds"] {
            let mut file = H264_AAC.to_vec();
            let start = find(&file, kind) - 4;
            if start + at + 4 <= file.len() {
                patch_u32(&mut file, start + at, value);
            }
            let _ = run_chunked(&file, chunk, ImportConfig::default());
        }
    }

    #[test]
    fn any_chunking_gives_the_same_output(chunks in proptest::collection::vec(1usize..5000, 1..40)) {
        let whole = run(H264_AAC);
        let mut importer = Importer::new(ImportConfig::default());
        let (mut out, mut at) = (Vec::new(), 0);
        for size in chunks.iter().cycle() {
            if at == H264_AAC.len() {
                break;
            }
            let end = (at + size).min(H264_AAC.len());
            importer.push(&H264_AAC[at..end]).expect("push");
            at = end;
            while let Some(o) = importer.poll().expect("poll") {
                out.push(o);
            }
        }
        prop_assert_eq!(out, whole);
    }
}
