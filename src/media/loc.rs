//! LOC packaging for MSF (draft-ietf-moq-loc-02, the version Shaka Player 5.2 reads): each
//! object is one frame's codec bitstream, and its timestamp travels as the object property
//! [`TIMESTAMP_PROPERTY`] (microseconds; without a Timescale property, LOC-02 §2.3.1).
//!
//! The payload also starts with LOC's Private Properties ([`private_properties`]), holding the
//! timestamp again. LOC-02 puts them before the bitstream without saying how they are framed;
//! Shaka reads a count then Key-Value-Pairs, and strips such a block from every payload that
//! starts with a count of 1 to 64, whatever the object properties hold. A bitstream that starts
//! with such a byte (a mono AAC frame's first byte is often 0x01) would lose its first bytes,
//! and an empty block (a count of 0) would stay in the payload as its first byte: so every
//! payload carries a block of one property.
//!
//! H.264 goes in its length-prefixed form (ISO/IEC 14496-15 §5.3.2) with 4-byte lengths, and
//! each keyframe carries the track's parameter sets in front of it: a LOC receiver configures
//! its decoder from the bitstream (Shaka's transmuxer drops frames until it has seen an SPS
//! and a PPS), and the catalog's description is then only a convenience. AAC and Opus frames
//! are their codec payload as they are.

use crate::Error;

/// LOC-02's Timestamp property (an even type: one varint value), microseconds.
pub const TIMESTAMP_PROPERTY: u64 = 0x06;

/// The Private Properties that start every payload: a count of one, then the timestamp
/// property (QUIC varints, RFC 9000 §16).
pub fn private_properties(timestamp_us: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(10);
    crate::legacy::put_varint(&mut out, 1);
    crate::legacy::put_varint(&mut out, TIMESTAMP_PROPERTY);
    crate::legacy::put_varint(&mut out, timestamp_us);
    out
}

/// One H.264 frame for LOC: the NAL units of `data` (lengths of `length_size` bytes) with
/// 4-byte lengths, after `param_sets` (SPS and PPS, each a NAL unit) when `keyframe`.
pub(crate) fn h264_frame(
    data: &[u8],
    length_size: u8,
    param_sets: &[Vec<u8>],
    keyframe: bool,
) -> Result<Vec<u8>, Error> {
    let extra: usize = if keyframe { param_sets.iter().map(|p| p.len() + 4).sum() } else { 0 };
    let mut out = Vec::with_capacity(data.len() + extra + 16);
    if keyframe {
        for nal in param_sets {
            push_nal(&mut out, nal)?;
        }
    }
    let n = usize::from(length_size);
    if !(1..=4).contains(&n) {
        return Err(Error::BadSample("NAL unit length size not 1 to 4"));
    }
    let mut rest = data;
    while !rest.is_empty() {
        let prefix = rest.get(..n).ok_or(Error::BadSample("truncated NAL unit length"))?;
        let len = prefix.iter().fold(0usize, |acc, b| acc << 8 | usize::from(*b));
        let nal = rest.get(n..n + len).ok_or(Error::BadSample("NAL unit past the end of the sample"))?;
        push_nal(&mut out, nal)?;
        rest = &rest[n + len..];
    }
    Ok(out)
}

fn push_nal(out: &mut Vec<u8>, nal: &[u8]) -> Result<(), Error> {
    let len = u32::try_from(nal.len()).map_err(|_| Error::BadSample("a NAL unit over 4 GiB"))?;
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(nal);
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_private_block_is_a_count_of_one_and_the_timestamp() {
        assert_eq!(private_properties(5), [1, 6, 5]);
        let ts = 1_796_323_596_466_312u64;
        let block = private_properties(ts);
        assert_eq!(&block[..2], &[1, 6]);
        assert_eq!(crate::legacy::get_varint(&block[2..]), Some((ts, 8)));
    }

    #[test]
    fn keyframes_carry_the_parameter_sets_and_lengths_become_four_bytes() {
        let sps = vec![0x67, 0x64, 0x00];
        let pps = vec![0x68, 0xee];
        let idr = [0, 2, 0x65, 0x88];
        let frame = h264_frame(&idr, 2, &[sps, pps], true).unwrap();
        assert_eq!(frame, [0, 0, 0, 3, 0x67, 0x64, 0, 0, 0, 0, 2, 0x68, 0xee, 0, 0, 0, 2, 0x65, 0x88]);
        let delta = h264_frame(&[0, 0, 0, 1, 0x41], 4, &[vec![0x67]], false).unwrap();
        assert_eq!(delta, [0, 0, 0, 1, 0x41]);
        assert!(h264_frame(&[0, 0, 0, 5, 0x41], 4, &[], false).is_err());
        assert!(h264_frame(&[0, 0], 4, &[], false).is_err());
        assert!(h264_frame(&[1, 0x41], 0, &[], false).is_err());
    }
}
