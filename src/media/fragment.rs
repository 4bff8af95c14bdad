//! One movie fragment: a `moof` and the `mdat` after it, resolved into samples (ISO/IEC
//! 14496-12 §8.8: `tfhd` §8.8.7, `trun` §8.8.8, `tfdt` §8.8.12, the `trex` defaults §8.8.3).

use std::ops::Range;

use mp4_atom::{Moof, Traf, TrunEntry};

use crate::codec::Defaults;
use crate::Error;

/// `sample_is_non_sync_sample` in the sample flags (§8.8.3.1).
const NON_SYNC: u32 = 0x0001_0000;

/// What a fragment needs to know of each track it may name.
pub(crate) struct TrackTiming {
    pub track_id: u32,
    pub timescale: u32,
    /// Added to each composition time (the track's edit list), in `timescale` units.
    pub edit_shift: i64,
    pub defaults: Defaults,
    /// Where the track's next fragment starts in decode time, for a `traf` without `tfdt`.
    pub next_decode_time: u64,
}

/// Where the fragment's boxes lie, in bytes from the start of the file (the last `ftyp`),
/// the origin of an explicit `base_data_offset`.
pub(crate) struct Layout {
    pub moof_start: u64,
    /// The `mdat` box, header included.
    pub mdat: Range<u64>,
    /// Its payload.
    pub payload: Range<u64>,
}

/// One sample, located and timed.
#[derive(Debug, Clone)]
pub(crate) struct Sample {
    /// Index into the tracks given to [`samples`].
    pub track: usize,
    /// Its bytes, as a range of the `mdat` box (header included).
    pub range: Range<usize>,
    /// Presentation time in microseconds (decode time plus composition offset).
    pub pts_us: i128,
    /// Decode time in microseconds (with the same edit-list shift as `pts_us`).
    pub dts_us: i128,
    pub duration_us: i128,
    /// A sync sample: `sample_is_non_sync_sample` clear, and not marked as depending on
    /// others.
    pub sync: bool,
}

/// Resolves every sample of `moof` against `tracks`, whose `next_decode_time` advances; a
/// `traf` of a track in `ignored` is passed over. At most `max_samples` samples.
pub(crate) fn samples(
    moof: &Moof,
    layout: &Layout,
    tracks: &mut [TrackTiming],
    ignored: &[u32],
    max_samples: usize,
) -> Result<Vec<Sample>, Error> {
    let count: u64 = moof.traf.iter().flat_map(|t| &t.trun).map(|r| r.samples.len() as u64).sum();
    if count > max_samples as u64 {
        return Err(Error::BadFragment(format!("{count} samples (limit {max_samples})")));
    }
    let mut out = Vec::with_capacity(count as usize);
    // §8.8.7.1: without base_data_offset or default-base-is-moof, the first traf's base is
    // the moof and each later one's is the end of the data of the traf before it.
    let mut implicit_base = layout.moof_start;
    for traf in &moof.traf {
        let id = traf.tfhd.track_id;
        let Some(index) = tracks.iter().position(|t| t.track_id == id) else {
            if ignored.contains(&id) {
                continue;
            }
            return Err(Error::BadFragment(format!("traf for track {id}, not in the moov")));
        };
        implicit_base = traf_samples(traf, index, &mut tracks[index], layout, implicit_base, &mut out)?;
    }
    Ok(out)
}

/// The samples of one `traf`; returns where its data ended.
fn traf_samples(
    traf: &Traf,
    index: usize,
    track: &mut TrackTiming,
    layout: &Layout,
    implicit_base: u64,
    out: &mut Vec<Sample>,
) -> Result<u64, Error> {
    let tfhd = &traf.tfhd;
    let base = match (tfhd.base_data_offset, tfhd.default_base_is_moof) {
        (Some(offset), _) => offset,
        (None, true) => layout.moof_start,
        (None, false) => implicit_base,
    };
    let mut decode_time = traf.tfdt.as_ref().map_or(track.next_decode_time, |t| t.base_media_decode_time);
    let mut position = base;
    for trun in &traf.trun {
        if let Some(offset) = trun.data_offset {
            position = base
                .checked_add_signed(i64::from(offset))
                .ok_or_else(|| Error::BadFragment("trun data_offset before the file".into()))?;
        }
        for entry in trun.samples.iter() {
            let sample = resolve(&entry, tfhd, track.defaults);
            let end = position.saturating_add(u64::from(sample.size));
            if position < layout.payload.start || end > layout.payload.end {
                return Err(Error::BadFragment(format!(
                    "track {}: sample at {position}..{end} is outside the mdat's {:?}",
                    track.track_id, layout.payload
                )));
            }
            let start = (position - layout.mdat.start) as usize;
            let dts = i128::from(decode_time) + i128::from(track.edit_shift);
            let pts = dts + i128::from(sample.cts);
            out.push(Sample {
                track: index,
                range: start..start + sample.size as usize,
                pts_us: to_micros(pts, track.timescale),
                dts_us: to_micros(dts, track.timescale),
                duration_us: to_micros(i128::from(sample.duration), track.timescale),
                sync: sample.flags & NON_SYNC == 0 && (sample.flags >> 24) & 0x3 != 1,
            });
            decode_time = decode_time.saturating_add(u64::from(sample.duration));
            position = end;
        }
    }
    track.next_decode_time = decode_time;
    Ok(position)
}

/// A sample's fields with the `tfhd` and `trex` defaults applied.
struct Resolved {
    duration: u32,
    size: u32,
    flags: u32,
    cts: i64,
}

fn resolve(entry: &TrunEntry, tfhd: &mp4_atom::Tfhd, defaults: Defaults) -> Resolved {
    Resolved {
        duration: entry.duration.or(tfhd.default_sample_duration).unwrap_or(defaults.duration),
        size: entry.size.or(tfhd.default_sample_size).unwrap_or(defaults.size),
        // mp4-atom gives the first sample first_sample_flags (§8.8.8.1) in `flags`.
        flags: entry.flags.or(tfhd.default_sample_flags).unwrap_or(defaults.flags),
        cts: entry.cts.unwrap_or(0),
    }
}

/// `ticks` of `timescale` in microseconds, rounded down.
pub(crate) fn to_micros(ticks: i128, timescale: u32) -> i128 {
    (ticks * 1_000_000).div_euclid(i128::from(timescale.max(1)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn micros_round_down() {
        assert_eq!(to_micros(512, 15360), 33_333);
        assert_eq!(to_micros(1024, 15360), 66_666);
        assert_eq!(to_micros(-512, 15360), -33_334);
        assert_eq!(to_micros(1024, 48000), 21_333);
    }
}
