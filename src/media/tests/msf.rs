//! The importer publishing MSF (`Packaging::MsfCmaf`, `Packaging::MsfLoc`) from the same
//! ffmpeg output as hang: the catalog's schema, each CMAF chunk and LOC payload against the
//! sample it carries, the repeated catalog, and a catalog completed once a track that had no
//! frame in the first fragment gets one.

mod common;

use base64::Engine;
use bytes::Bytes;
use common::*;
use media::legacy::decode_frame;
use media::loc::TIMESTAMP_PROPERTY;
use media::msf::MSF_CATALOG_TRACK;
use media::{ImportConfig, MediaKind, Output, Packaging};
use mp4_atom::{Decode, Ftyp, Mdat, Moof, Moov};
use serde_json::Value;

/// 1 s like `H264_AAC`, a fragment per frame.
const EVERY_FRAME: &[u8] = include_bytes!("fixtures/h264_aac_every_frame.mp4");

fn run_as(input: &[u8], packaging: Packaging) -> Vec<Output> {
    let (out, err) = run_chunked(input, input.len(), ImportConfig { packaging, ..ImportConfig::default() });
    assert_eq!(err, None);
    out
}

fn b64(s: &Value) -> Vec<u8> {
    base64::engine::general_purpose::STANDARD.decode(s.as_str().expect("a string")).expect("base64")
}

/// The sample a hang frame carries (its legacy container taken off).
fn sample(frame: &media::Frame) -> Bytes {
    let (_, data) = decode_frame(&frame.payload).expect("a legacy object");
    Bytes::copy_from_slice(data)
}

#[test]
fn the_catalog_lists_every_track_with_its_cmaf_header() {
    assert_eq!(Packaging::MsfCmaf.catalog_track(), MSF_CATALOG_TRACK);
    assert_eq!(MSF_CATALOG_TRACK, "catalog");
    let out = run_as(H264_AAC, Packaging::MsfCmaf);
    let catalog = &catalogs(&out)[0];
    assert_eq!(catalog["version"], "draft-01");
    let tracks = catalog["tracks"].as_array().expect("tracks");
    assert_eq!(tracks.len(), 2);
    let (video, audio) = (&tracks[0], &tracks[1]);
    for (field, want) in [
        ("name", "video0"),
        ("packaging", "cmaf"),
        ("role", "video"),
        ("codec", "avc1.64000b"),
        ("initRef", "init-video0"),
    ] {
        assert_eq!(video[field], want, "{field}: {video}");
    }
    assert_eq!((video["isLive"].as_bool(), video["renderGroup"].as_u64()), (Some(true), Some(1)));
    assert_eq!((video["width"].as_u64(), video["height"].as_u64()), (Some(160), Some(120)));
    assert_eq!(video["framerate"].as_f64(), Some(30.0));
    assert!(video["bitrate"].as_u64().is_some_and(|b| b > 0));
    assert_eq!((audio["name"].as_str(), audio["role"].as_str()), (Some("audio1"), Some("audio")));
    assert_eq!((audio["codec"].as_str(), audio["samplerate"].as_u64()), (Some("mp4a.40.2"), Some(48000)));
    assert_eq!(audio["channelConfig"], "1");
    // The header inline and in initDataList, the same bytes: ftyp, then a moov of one track
    // (ID 1, microseconds, no edit list) with its trex.
    let list = catalog["initDataList"].as_array().expect("initDataList");
    for track in [video, audio] {
        let entry = list.iter().find(|e| e["id"] == track["initRef"]).expect("listed");
        assert_eq!(entry["type"], "inline");
        assert_eq!(entry["data"], track["initData"]);
        let header = b64(&track["initData"]);
        let mut at = &header[..];
        let ftyp = Ftyp::decode(&mut at).expect("ftyp");
        assert!(ftyp.compatible_brands.iter().any(|b| b.as_ref() == b"cmfc"));
        let moov = Moov::decode(&mut at).expect("moov");
        assert!(at.is_empty());
        assert_eq!(moov.trak.len(), 1);
        let trak = &moov.trak[0];
        assert_eq!((trak.tkhd.track_id, trak.mdia.mdhd.timescale), (1, 1_000_000));
        assert!(trak.edts.is_none());
        assert_eq!(moov.mvex.expect("mvex").trex[0].track_id, 1);
    }
    // A fixed JSON shape: the list after the tracks.
    let json = match &out[0] {
        Output::Catalog(c) => String::from_utf8(c.json.to_vec()).expect("UTF-8"),
        other => panic!("the catalog first: {other:?}"),
    };
    assert!(json
        .starts_with(r#"{"version":"draft-01","tracks":[{"name":"video0","packaging":"cmaf","isLive":true"#));
    assert!(json.find("initDataList") > json.find("tracks"));
}

#[test]
fn each_cmaf_object_is_one_frame_as_a_moof_and_its_mdat() {
    let hang = run(H264_AAC);
    let cmaf = run_as(H264_AAC, Packaging::MsfCmaf);
    let (hang, cmaf) = (frames(&hang), frames(&cmaf));
    assert_eq!(hang.len(), cmaf.len());
    let mut last_sequence = std::collections::HashMap::new();
    for (h, c) in hang.iter().zip(&cmaf) {
        assert_eq!((&h.track, h.group, h.object, h.keyframe), (&c.track, c.group, c.object, c.keyframe));
        assert!(c.properties.is_empty());
        let mut at = &c.payload[..];
        let moof = Moof::decode(&mut at).expect("moof");
        let mdat = Mdat::decode(&mut at).expect("mdat");
        assert!(at.is_empty(), "nothing after the mdat");
        assert_eq!(mdat.data, sample(h), "the sample, as it was");
        assert_eq!(moof.traf.len(), 1);
        let traf = &moof.traf[0];
        assert_eq!(traf.tfhd.track_id, 1);
        let entry = traf.trun[0].samples.get(0).expect("one sample");
        let decode = traf.tfdt.as_ref().expect("tfdt").base_media_decode_time;
        let cts = entry.cts.unwrap_or(0);
        assert_eq!(decode as i64 + cts, h.timestamp_us as i64, "presentation time in microseconds");
        assert_eq!(u64::from(entry.duration.expect("duration")), h.duration_us);
        let sync = entry.flags.expect("flags") & 0x0001_0000 == 0;
        assert_eq!(sync, h.keyframe, "{:?}", h.track);
        // Each track's sequence numbers go up by one.
        let seq = moof.mfhd.sequence_number;
        if let Some(prev) = last_sequence.insert(c.track.clone(), seq) {
            assert_eq!(seq, prev + 1);
        }
    }
}

#[test]
fn each_loc_object_is_its_bitstream_with_a_timestamp_property() {
    let hang = run(H264_AAC);
    let loc = run_as(H264_AAC, Packaging::MsfLoc);
    let catalog = &catalogs(&loc)[0];
    let video = &catalog["tracks"][0];
    assert_eq!(video["packaging"], "loc");
    // LOC's init data is the decoder's description: the avcC body.
    assert_eq!(b64(&video["initData"]), raw_box(H264_AAC, b"avcC"));
    let (hang, loc) = (frames(&hang), frames(&loc));
    assert_eq!(hang.len(), loc.len());
    for (h, l) in hang.iter().zip(&loc) {
        assert_eq!(l.properties, vec![(TIMESTAMP_PROPERTY, h.timestamp_us)]);
        // The private properties first: the timestamp again.
        let block = media::loc::private_properties(h.timestamp_us);
        assert!(l.payload.starts_with(&block));
        let bitstream = &l.payload[block.len()..];
        match h.kind {
            MediaKind::Audio => assert_eq!(bitstream, sample(h), "AAC as it was"),
            MediaKind::Video => {
                let types = nal_types(bitstream);
                let own = nal_types(&sample(h));
                if h.keyframe {
                    // The SPS and the PPS in band, then the frame's own NAL units.
                    assert_eq!(&types[..2], &[7, 8]);
                    assert_eq!(&types[2..], &own[..]);
                } else {
                    assert_eq!(types, own);
                }
            }
        }
    }
}

#[test]
fn the_msf_catalog_repeats_unchanged() {
    let config = ImportConfig {
        packaging: Packaging::MsfCmaf,
        repeat_catalog_us: Some(500_000),
        ..ImportConfig::default()
    };
    let (out, err) = run_chunked(H264_AAC, 4096, config);
    assert_eq!(err, None);
    let jsons: Vec<&Bytes> = out
        .iter()
        .filter_map(|o| match o {
            Output::Catalog(c) => Some(&c.json),
            _ => None,
        })
        .collect();
    // At the video group starts (a GOP a second) at least 500 ms apart: 0 s and 1 s.
    assert_eq!(jsons.len(), 2, "{} catalogs in 2 s", jsons.len());
    assert!(jsons.iter().all(|j| *j == jsons[0]));
}

/// ffmpeg's fragment per frame: the first fragment holds one audio frame, so the video track
/// is measured on its own first fragment and the catalog is emitted again with its frame rate,
/// before that fragment's frames; hang and MSF alike.
#[test]
fn a_track_measured_after_the_first_fragment_completes_the_catalog() {
    for packaging in [Packaging::Hang, Packaging::MsfCmaf, Packaging::MsfLoc] {
        let out = run_as(EVERY_FRAME, packaging);
        let all = catalogs(&out);
        assert_eq!(all.len(), 2, "{packaging:?}");
        let rate = |c: &Value| match packaging {
            Packaging::Hang => c["video"]["renditions"]["video0"]["framerate"].as_f64(),
            _ => c["tracks"][0]["framerate"].as_f64(),
        };
        assert_eq!(rate(&all[0]), None, "{packaging:?}: not measured on an audio fragment");
        assert_eq!(rate(&all[1]), Some(30.0), "{packaging:?}");
        let first_video =
            out.iter().position(|o| matches!(o, Output::Frame(f) if f.kind == MediaKind::Video));
        let second_catalog = out.iter().enumerate().filter(|(_, o)| matches!(o, Output::Catalog(_))).nth(1);
        assert!(second_catalog.map(|(i, _)| i) < first_video, "{packaging:?}: before the video's frames");
    }
}

/// Bad input fails the import the same way whatever the packaging: an error, not a panic.
#[test]
fn malformed_input_fails_cleanly_in_every_packaging() {
    let mut broken = H264_AAC.to_vec();
    let at = find(&broken, b"trun");
    broken[at + 8..at + 12].copy_from_slice(&u32::MAX.to_be_bytes()); // an absurd sample count
    for packaging in [Packaging::MsfCmaf, Packaging::MsfLoc] {
        let config = ImportConfig { packaging, ..ImportConfig::default() };
        let (_, err) = run_chunked(&broken, broken.len(), config.clone());
        assert!(err.is_some(), "{packaging:?}");
        for cut in [10, 100, 1000, H264_AAC.len() / 2] {
            let (_, err) = run_chunked(&H264_AAC[..cut], 7, config.clone());
            assert_eq!(err, None, "{packaging:?}: a cut stream waits for more");
        }
    }
}
