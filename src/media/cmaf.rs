//! CMAF packaging for MSF (draft-ietf-moq-cmsf-00 §3): each object is one or more `moof` +
//! `mdat` of one track, a group starts at a SAP, and the track's CMAF header (`ftyp` + `moov`)
//! travels in the catalog as base64 (`initData`). Here each object is one frame: a `moof` with
//! one `traf` and one `trun` entry, then its `mdat` (ISO/IEC 14496-12 §8.8).
//!
//! Times are microseconds: the header's media timescale is 1,000,000, so the importer's
//! timeline (continued across encoder restarts, the edit list applied) carries over as it is,
//! and the header has no edit list.

use bytes::Bytes;
use mp4_atom::{
    Encode, FourCC, Ftyp, Mdat, Mfhd, Moof, Moov, Mvex, Mvhd, Tfdt, Tfhd, Traf, Trak, Trex, Trun, TrunEntry,
};

/// The media timescale of every CMAF header written here: microseconds.
pub(crate) const TIMESCALE: u32 = 1_000_000;

/// Sample flags (§8.8.3.1): a sync sample depends on no other (`sample_depends_on` 2); any
/// other depends on others and is not a sync sample.
const SYNC_FLAGS: u32 = 0x0200_0000;
const NON_SYNC_FLAGS: u32 = 0x0101_0000;

/// The CMAF header of `trak` alone: `ftyp`, then a `moov` of `mvhd`, the track (its media
/// timescale microseconds, no edit list, no duration) and an `mvex` with its `trex`.
pub(crate) fn header(mvhd: &Mvhd, trak: &Trak) -> Result<Bytes, String> {
    let track_id = trak.tkhd.track_id;
    let mut trak = trak.clone();
    trak.edts = None;
    trak.tkhd.duration = 0;
    trak.mdia.mdhd.timescale = TIMESCALE;
    trak.mdia.mdhd.duration = 0;
    let moov = Moov {
        mvhd: Mvhd { duration: 0, next_track_id: track_id.saturating_add(1), ..mvhd.clone() },
        meta: None,
        mvex: Some(Mvex {
            mehd: None,
            trex: vec![Trex {
                track_id,
                default_sample_description_index: 1,
                default_sample_duration: 0,
                default_sample_size: 0,
                default_sample_flags: 0,
            }],
        }),
        trak: vec![trak],
        udta: None,
        ainf: None,
    };
    let ftyp = Ftyp {
        major_brand: FourCC::new(b"iso6"),
        minor_version: 0,
        compatible_brands: vec![FourCC::new(b"iso6"), FourCC::new(b"cmfc"), FourCC::new(b"mp41")],
    };
    let mut out = Vec::new();
    ftyp.encode(&mut out).map_err(|e| format!("ftyp: {e}"))?;
    moov.encode(&mut out).map_err(|e| format!("moov: {e}"))?;
    Ok(Bytes::from(out))
}

/// One frame's timing, in microseconds.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ChunkTiming {
    pub decode_us: u64,
    pub duration_us: u32,
    /// Presentation minus decode time.
    pub composition_offset_us: i64,
    pub sync: bool,
}

/// One frame of track `track_id` as a CMAF chunk: `moof` (`mfhd` with `sequence`, a `traf`
/// whose data is found from the `moof`, its `tfdt`, a `trun` of one sample) then the `mdat`.
pub(crate) fn chunk(sequence: u32, track_id: u32, timing: ChunkTiming, data: &[u8]) -> Result<Bytes, String> {
    let size = u32::try_from(data.len()).map_err(|_| "a sample over 4 GiB".to_string())?;
    let entry = TrunEntry {
        duration: Some(timing.duration_us),
        size: Some(size),
        flags: Some(if timing.sync { SYNC_FLAGS } else { NON_SYNC_FLAGS }),
        cts: Some(timing.composition_offset_us),
    };
    let mut moof = Moof {
        mfhd: Mfhd { sequence_number: sequence },
        traf: vec![Traf {
            tfhd: Tfhd { track_id, default_base_is_moof: true, ..Tfhd::default() },
            tfdt: Some(Tfdt { base_media_decode_time: timing.decode_us }),
            trun: vec![Trun { data_offset: Some(0), samples: vec![entry].into() }],
            ..Traf::default()
        }],
    };
    // The sample starts after the moof and the mdat's 8-byte header; the offset's own width
    // does not depend on its value.
    let mut probe = Vec::new();
    moof.encode(&mut probe).map_err(|e| format!("moof: {e}"))?;
    let offset = i32::try_from(probe.len() + 8).map_err(|_| "a moof over 2 GiB".to_string())?;
    moof.traf[0].trun[0].data_offset = Some(offset);
    let mut out = Vec::with_capacity(probe.len() + 8 + data.len());
    moof.encode(&mut out).map_err(|e| format!("moof: {e}"))?;
    Mdat { data: data.to_vec() }.encode(&mut out).map_err(|e| format!("mdat: {e}"))?;
    Ok(Bytes::from(out))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use mp4_atom::Decode;

    #[test]
    fn a_chunk_is_a_moof_whose_one_sample_is_the_mdat_payload() {
        let timing =
            ChunkTiming { decode_us: 1_000_000, duration_us: 33_333, composition_offset_us: 0, sync: true };
        let data = b"\x00\x00\x00\x02\x65\x88";
        let bytes = chunk(7, 1, timing, data).unwrap();
        let mut at = &bytes[..];
        let moof = Moof::decode(&mut at).unwrap();
        let mdat = Mdat::decode(&mut at).unwrap();
        assert!(at.is_empty());
        assert_eq!(mdat.data, data);
        assert_eq!(moof.mfhd.sequence_number, 7);
        let traf = &moof.traf[0];
        assert!(traf.tfhd.default_base_is_moof);
        assert_eq!(traf.tfdt.as_ref().unwrap().base_media_decode_time, 1_000_000);
        let trun = &traf.trun[0];
        let entry = trun.samples.get(0).unwrap();
        assert_eq!((entry.duration, entry.size, entry.flags), (Some(33_333), Some(6), Some(SYNC_FLAGS)));
        // The data offset points at the mdat's payload, from the moof's first byte.
        let offset = trun.data_offset.unwrap() as usize;
        assert_eq!(&bytes[offset..], data);
        let later = ChunkTiming { sync: false, ..timing };
        let bytes = chunk(8, 1, later, data).unwrap();
        let moof = Moof::decode(&mut &bytes[..]).unwrap();
        assert_eq!(moof.traf[0].trun[0].samples.get(0).unwrap().flags, Some(NON_SYNC_FLAGS));
    }
}
