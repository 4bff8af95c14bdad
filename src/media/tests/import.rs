//! The importer on real ffmpeg output: the catalog's fields, every frame's track, group and
//! timestamp, restarts and resolution changes.

mod common;

use common::*;
use media::catalog::to_hex;
use media::legacy::decode_frame;
use media::{AudioGroups, ImportConfig, MediaKind, Output};
use serde_json::Value;

/// The catalog of the main fixture, exactly.
const MAIN_CATALOG: &str = concat!(
    r#"{"video":{"renditions":{"video0":{"codec":"avc1.64000b","container":{"kind":"legacy"},"#,
    r#""description":"0164000bffe100196764000bacd942847e5c0440000003004000000f03c50a658001000668ebe3cb22c0fdf8f800","#,
    r#""codedWidth":160,"codedHeight":120,"framerate":30.0,"bitrate":145001,"jitter":1000}}},"#,
    r#""audio":{"renditions":{"audio1":{"codec":"mp4a.40.2","container":{"kind":"legacy"},"#,
    r#""description":"118856e500","sampleRate":48000,"numberOfChannels":1,"bitrate":32000,"jitter":960}}}}"#
);

#[test]
fn the_main_fixture_has_one_catalog_first_and_it_is_exact() {
    let out = run(H264_AAC);
    let Some(Output::Catalog(first)) = out.first() else {
        panic!("the catalog comes first: {:?}", out.first())
    };
    assert_eq!(std::str::from_utf8(&first.json), Ok(MAIN_CATALOG));
    assert_eq!(catalogs(&out).len(), 1);
    assert_eq!(first.catalog.track_names(), ["video0", "audio1"]);
    let typed: media::Catalog = serde_json::from_slice(&first.json).expect("typed");
    assert_eq!(typed, first.catalog);
}

#[test]
fn the_video_rendition_comes_from_the_avcc() {
    let catalog = &catalogs(&run(H264_AAC))[0];
    let video = &catalog["video"]["renditions"]["video0"];
    // The description is the avcC body as the file holds it, and the codec string its
    // profile, compatibility and level bytes, which are also the SPS's (after its NAL header).
    let avcc = raw_box(H264_AAC, b"avcC");
    assert_eq!(video["description"], to_hex(avcc));
    let codec = format!("avc1.{:02x}{:02x}{:02x}", avcc[1], avcc[2], avcc[3]);
    assert_eq!(video["codec"], codec.as_str());
    assert_eq!(avcc[5] & 0x1f, 1, "one SPS");
    let sps = &avcc[8..];
    assert_eq!((sps[0] & 0x1f, &sps[1..4]), (7, &avcc[1..4]));
    // High profile (100 = 0x64), level 1.1 (ffprobe: level=11): what 160x120 at 30 fps gets.
    assert_eq!(codec, "avc1.64000b");
    assert_eq!((video["codedWidth"].as_u64(), video["codedHeight"].as_u64()), (Some(160), Some(120)));
    assert_eq!(video["container"], serde_json::json!({ "kind": "legacy" }));
    assert_eq!(video["framerate"].as_f64(), Some(30.0));
}

#[test]
fn the_aac_rendition_comes_from_the_esds() {
    let catalog = &catalogs(&run(H264_AAC))[0];
    let audio = &catalog["audio"]["renditions"]["audio1"];
    let asc = media::catalog::from_hex(audio["description"].as_str().expect("hex")).expect("hex");
    // AudioSpecificConfig: 5 bits object type, 4 bits frequency index, 4 bits channels.
    let (aot, freq, channels) = (asc[0] >> 3, (asc[0] & 7) << 1 | asc[1] >> 7, (asc[1] >> 3) & 0xf);
    assert_eq!((aot, freq, channels), (2, 3, 1), "AAC-LC, 48 kHz, mono");
    assert_eq!(audio["codec"], format!("mp4a.40.{aot}").as_str());
    assert_eq!(audio["sampleRate"], 48000);
    assert_eq!(audio["numberOfChannels"], 1);
    assert_eq!(audio["bitrate"], 32000, "the esds avgBitrate (-b:a 32k)");
}

#[test]
fn video_frames_are_gops_of_thirty_at_thirty_fps() {
    let out = run(H264_AAC);
    let video = frames_of(&out, MediaKind::Video);
    assert_eq!(video.len(), 60, "2 s at 30 fps");
    for (i, f) in video.iter().enumerate() {
        assert_eq!(&*f.track, "video0");
        let starts = i % 30 == 0;
        assert_eq!((f.new_group, f.keyframe), (starts, starts), "frame {i}");
        assert_eq!((f.group, f.object), ((i / 30) as u64, (i % 30) as u64), "frame {i}");
        // The object is the timestamp's varint, then the sample as the mdat holds it:
        // 4-byte NAL lengths, an IDR slice (type 5) exactly in the keyframes.
        let (ts, sample) = decode_frame(&f.payload).expect("legacy frame");
        assert_eq!(ts, f.timestamp_us);
        let types = nal_types(sample);
        assert_eq!(types.contains(&5), starts, "frame {i}: {types:?}");
    }
    // B-frames: decode order is not presentation order, but the presentation timestamps are
    // every frame of 2 s, one per 1/30 s (33333.3 µs, rounded down).
    let mut pts: Vec<u64> = video.iter().map(|f| f.timestamp_us).collect();
    pts.sort_unstable();
    assert_eq!(pts[0], 0);
    for (i, pair) in pts.windows(2).enumerate() {
        let step = pair[1] - pair[0];
        assert!((33_333..=33_334).contains(&step), "step {i}: {step}");
        assert_eq!(pair[1], (i as u64 + 1) * 1_000_000 / 30);
    }
    // Each group starts at its earliest presentation time.
    for group in video.chunks(30) {
        assert!(group.iter().all(|f| f.timestamp_us >= group[0].timestamp_us));
    }
}

#[test]
fn aac_frames_are_each_a_group_of_1024_samples() {
    let out = run(H264_AAC);
    let audio = frames_of(&out, MediaKind::Audio);
    // 2 s of 48 kHz plus the encoder's 1024 priming samples, in frames of 1024.
    assert_eq!(audio.len(), (96_000 + 1024usize).div_ceil(1024));
    for (i, f) in audio.iter().enumerate() {
        assert_eq!(
            (&*f.track, f.group, f.object, f.new_group, f.keyframe),
            ("audio1", i as u64, 0, true, true)
        );
        assert_eq!(f.timestamp_us, i as u64 * 1024 * 1_000_000 / 48_000, "frame {i}");
        assert_eq!(decode_frame(&f.payload).map(|(ts, _)| ts), Some(f.timestamp_us));
    }
    assert!(audio.iter().rev().skip(1).all(|f| f.duration_us == 21_333));
}

#[test]
fn opus_is_published_without_a_description() {
    let out = run(H264_OPUS);
    let catalog = &catalogs(&out)[0];
    let audio = &catalog["audio"]["renditions"]["audio1"];
    assert_eq!(audio["codec"], "opus");
    assert_eq!((audio["sampleRate"].as_u64(), audio["numberOfChannels"].as_u64()), (Some(48000), Some(1)));
    assert_eq!(audio.get("description"), None);
    let opus = frames_of(&out, MediaKind::Audio);
    // 20 ms packets over 2 s plus the 312-sample pre-skip.
    assert_eq!(opus.len(), (96_000 + 312usize).div_ceil(960));
    for (i, f) in opus.iter().enumerate() {
        assert_eq!((f.timestamp_us, f.group), (i as u64 * 20_000, i as u64));
    }
    assert_eq!(frames_of(&out, MediaKind::Video).len(), 60);
}

#[test]
fn video_alone_has_no_audio_section() {
    let out = run(H264_ONLY);
    let catalog = &catalogs(&out)[0];
    assert_eq!(catalog.as_object().map(|o| o.keys().collect::<Vec<_>>()), Some(vec![&"video".to_string()]));
    assert_eq!(frames(&out).len(), 60);
}

#[test]
fn one_byte_at_a_time_is_the_same_as_whole() {
    for input in [H264_AAC, H264_OPUS] {
        let whole = run(input);
        let (bytewise, err) = run_chunked(input, 1, ImportConfig::default());
        assert_eq!(err, None);
        assert_eq!(bytewise, whole);
    }
}

#[test]
fn a_restart_with_the_same_settings_continues_the_same_tracks() {
    let twice = [H264_AAC, H264_AAC].concat();
    let out = run(&twice);
    assert_eq!(catalogs(&out).len(), 1, "the same catalog is not emitted again");
    let video = frames_of(&out, MediaKind::Video);
    assert_eq!(video.len(), 120);
    assert!(video.iter().all(|f| &*f.track == "video0"));
    let starts: Vec<u64> = video.iter().filter(|f| f.new_group).map(|f| f.group).collect();
    assert_eq!(starts, [0, 1, 2, 3]);
    // The second stream starts where the first ended (its last audio frame's end).
    let all = frames(&out);
    let (first, second) = all.split_at(all.len() / 2);
    let first_end = first.iter().map(|f| f.timestamp_us + f.duration_us).max().expect("frames");
    assert_eq!(second.iter().map(|f| f.timestamp_us).min(), Some(first_end));
    let audio = frames_of(&out, MediaKind::Audio);
    let (a, b) = audio.split_at(audio.len() / 2);
    assert_eq!(b[0].timestamp_us, a.last().map(|f| f.timestamp_us + f.duration_us).expect("audio"));
    assert_eq!(b[0].timestamp_us, first_end);
    assert_eq!(video[60].timestamp_us, first_end);
    assert!(audio.windows(2).all(|p| p[1].timestamp_us > p[0].timestamp_us && p[1].group == p[0].group + 1));
}

#[test]
fn a_resolution_change_is_a_new_rendition_and_the_audio_continues() {
    let out = run(&[H264_AAC, H264_AAC_320].concat());
    let cats = catalogs(&out);
    assert_eq!(cats.len(), 2);
    let second = &cats[1];
    let video = second["video"]["renditions"].as_object().expect("video");
    assert_eq!(video.keys().collect::<Vec<_>>(), ["video2"]);
    assert_eq!(
        (video["video2"]["codedWidth"].as_u64(), video["video2"]["codedHeight"].as_u64()),
        (Some(320), Some(240))
    );
    assert_eq!(video["video2"]["codec"], "avc1.64000d", "level 1.3 for 320x240");
    assert_eq!(second["audio"], cats[0]["audio"], "the audio decoder is unchanged: audio1 goes on");
    // The second catalog comes before the second stream's first frame.
    let at = out.iter().position(|o| matches!(o, Output::Catalog(_)) && !std::ptr::eq(o, &out[0]));
    let first_new = out.iter().position(|o| matches!(o, Output::Frame(f) if &*f.track == "video2"));
    assert!(at < first_new);
    let new_video = frames_of(&out, MediaKind::Video).into_iter().filter(|f| &*f.track == "video2").count();
    assert_eq!(new_video, 30);
    let audio = frames_of(&out, MediaKind::Audio);
    assert!(audio.iter().all(|f| &*f.track == "audio1"));
    assert!(audio.windows(2).all(|p| p[1].timestamp_us > p[0].timestamp_us && p[1].group == p[0].group + 1));
    let old_end = frames_of(&out, MediaKind::Video).iter().filter(|f| &*f.track == "video0").count();
    assert_eq!(old_end, 60);
}

#[test]
fn an_encoder_that_dies_mid_box_is_dropped_and_the_next_one_continues() {
    let mut importer = media::Importer::new(ImportConfig::default());
    let cut = H264_AAC.len() - 1000;
    importer.push(&H264_AAC[..cut]).expect("push");
    let mut first = Vec::new();
    while let Some(o) = importer.poll().expect("poll") {
        first.push(o);
    }
    assert!(matches!(importer.end_stream(), Err(media::Error::Truncated { bytes }) if bytes > 0));
    importer.push(H264_AAC_320).expect("push");
    let mut second = Vec::new();
    while let Some(o) = importer.poll().expect("poll") {
        second.push(o);
    }
    assert_eq!(catalogs(&second).len(), 1);
    let last = frames(&first).iter().map(|f| f.timestamp_us + f.duration_us).max().expect("frames");
    assert_eq!(frames(&second).iter().map(|f| f.timestamp_us).min(), Some(last));
    assert_eq!(importer.end_stream(), Ok(()));
}

#[test]
fn audio_groups_can_span_a_duration() {
    let config = ImportConfig { audio_groups: AudioGroups::Every { micros: 500_000 }, ..Default::default() };
    let (out, err) = run_chunked(H264_AAC, H264_AAC.len(), config);
    assert_eq!(err, None);
    let audio = frames_of(&out, MediaKind::Audio);
    let starts: Vec<u64> = audio.iter().filter(|f| f.new_group).map(|f| f.timestamp_us).collect();
    // The first frame at or after each 500 ms from the group's start (frames of 21.3 ms).
    assert_eq!(starts, [0, 512_000, 1_024_000, 1_536_000]);
    assert!(audio.iter().all(|f| f.group == f.timestamp_us / 512_000));
}

#[test]
fn the_catalog_can_repeat_at_video_group_starts() {
    let config = ImportConfig { repeat_catalog_us: Some(500_000), ..Default::default() };
    let (out, err) = run_chunked(H264_AAC, 4096, config);
    assert_eq!(err, None);
    let cats: Vec<usize> =
        out.iter().enumerate().filter(|(_, o)| matches!(o, Output::Catalog(_))).map(|(i, _)| i).collect();
    assert_eq!(cats.len(), 2, "the first, then before the second GOP");
    let Output::Frame(next) = &out[cats[1] + 1] else { panic!("a frame follows") };
    assert_eq!((&*next.track, next.group, next.object), ("video0", 1, 0));
    assert_eq!(catalogs(&out)[0], catalogs(&out)[1]);
}

#[test]
fn stats_count_what_happened() {
    let mut importer = media::Importer::new(ImportConfig::default());
    importer.push(H264_AAC).expect("push");
    while importer.poll().expect("poll").is_some() {}
    let stats = importer.stats();
    assert_eq!((stats.frames, stats.catalogs, stats.dropped_before_keyframe), (155, 1, 0));
    assert_eq!(stats.skipped_boxes, 1, "the mfra at the end");
    let names: Vec<Value> =
        importer.catalog().expect("catalog").track_names().iter().map(|n| (*n).into()).collect();
    assert_eq!(names, ["video0", "audio1"]);
}

#[test]
fn edit_lists_place_each_track_on_the_presentation_timeline() {
    use mp4_atom::{Edts, Elst, ElstEntry, FixedPoint};
    // The video's first edit starts at 1024 of 15360 (a two-frame delay, 66666 µs), the
    // audio's behind an empty edit of 10 ms (movie timescale 1000).
    let edits = |trak: &mut mp4_atom::Trak| {
        let entries = if trak.tkhd.track_id == 1 {
            vec![ElstEntry { segment_duration: 0, media_time: Some(1024), media_rate: FixedPoint::new(1, 0) }]
        } else {
            vec![
                ElstEntry { segment_duration: 10, media_time: None, media_rate: FixedPoint::new(1, 0) },
                ElstEntry { segment_duration: 0, media_time: Some(0), media_rate: FixedPoint::new(1, 0) },
            ]
        };
        trak.edts = Some(Edts { elst: Some(Elst { entries }) });
    };
    let out = run(&with_moov(H264_AAC, edits));
    let plain = run(H264_AAC);
    // Video 66666 µs earlier than the file's composition times: shifted up so that nothing is
    // negative, which puts the audio (10 ms later than its own) 76666 µs later.
    let video: Vec<u64> = frames_of(&out, MediaKind::Video).iter().map(|f| f.timestamp_us).collect();
    let was: Vec<u64> = frames_of(&plain, MediaKind::Video).iter().map(|f| f.timestamp_us).collect();
    assert!(video.iter().zip(&was).all(|(v, w)| v.abs_diff(*w) <= 1), "video unchanged: the shift is undone");
    let audio = frames_of(&out, MediaKind::Audio);
    let plain_audio = frames_of(&plain, MediaKind::Audio);
    for (a, p) in audio.iter().zip(&plain_audio) {
        assert!(
            a.timestamp_us.abs_diff(p.timestamp_us + 76_666) <= 1,
            "{} vs {}",
            a.timestamp_us,
            p.timestamp_us
        );
    }
}

#[test]
fn explicit_base_data_offsets_count_from_the_start_of_each_file() {
    // Twice: the second file's offsets count from its own ftyp, not from the byte stream's
    // start.
    let out = run(&[H264_AAC_BASE_OFFSET, H264_AAC_BASE_OFFSET].concat());
    assert_eq!(catalogs(&out).len(), 1);
    let video = frames_of(&out, MediaKind::Video);
    assert_eq!(video.len(), 60);
    for (i, f) in video.iter().enumerate() {
        let (_, sample) = decode_frame(&f.payload).expect("legacy frame");
        assert_eq!(nal_types(sample).contains(&5), i % 30 == 0, "frame {i}");
        assert_eq!(f.new_group, i % 30 == 0);
    }
    // Without negative composition offsets or an edit list, presentation starts two frames
    // (the B-frame delay) after decoding.
    let mut pts: Vec<u64> = video[..30].iter().map(|f| f.timestamp_us).collect();
    pts.sort_unstable();
    assert_eq!(pts[0], 66_666);
    assert!(pts.windows(2).all(|p| (33_333..=33_334).contains(&(p[1] - p[0]))));
    let audio = frames_of(&out, MediaKind::Audio);
    assert_eq!(audio.len(), 2 * (48_000 + 1024usize).div_ceil(1024));
    assert!(audio.windows(2).all(|p| p[1].timestamp_us > p[0].timestamp_us));
}
