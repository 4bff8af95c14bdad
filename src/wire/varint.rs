//! The two integer encodings: the QUIC varint of RFC 9000 §16 (draft-16) and the MoQT `vi64`
//! of draft-22 §8.1. Both are behind [`VarInt`] so that structures shared by the drafts
//! (namespaces, key-value pairs, reason phrases, locations) are written once.

use super::error::DecodeError;

/// One integer encoding.
pub trait VarInt {
    /// Decodes one integer from the front of `buf`: `(value, bytes consumed)`.
    fn decode(buf: &[u8]) -> Result<(u64, usize), DecodeError>;
    /// Appends the shortest encoding of `v`. Fails when `v` has no encoding.
    fn encode(v: u64, out: &mut Vec<u8>) -> Result<(), super::EncodeError>;
    /// Length of the shortest encoding of `v` (`None` when `v` has no encoding).
    fn size(v: u64) -> Option<usize>;
    /// Largest encodable value.
    const MAX: u64;
}

/// RFC 9000 varint: 2-bit length prefix, values below 2^62.
#[derive(Debug, Clone, Copy)]
pub struct Quic;

impl VarInt for Quic {
    const MAX: u64 = (1 << 62) - 1;

    #[inline]
    fn decode(buf: &[u8]) -> Result<(u64, usize), DecodeError> {
        let first = *buf.first().ok_or(DecodeError::NeedMore)?;
        let len = 1usize << (first >> 6);
        let bytes = buf.get(..len).ok_or(DecodeError::NeedMore)?;
        let mut v = u64::from(first & 0x3f);
        for b in &bytes[1..] {
            v = (v << 8) | u64::from(*b);
        }
        Ok((v, len))
    }

    #[inline]
    fn encode(v: u64, out: &mut Vec<u8>) -> Result<(), super::EncodeError> {
        match Self::size(v) {
            Some(1) => out.push(v as u8),
            Some(2) => out.extend_from_slice(&((v as u16) | 0x4000).to_be_bytes()),
            Some(4) => out.extend_from_slice(&((v as u32) | 0x8000_0000).to_be_bytes()),
            Some(_) => out.extend_from_slice(&(v | 0xc000_0000_0000_0000).to_be_bytes()),
            None => return Err(super::EncodeError::OutOfRange("QUIC varint above 2^62-1")),
        }
        Ok(())
    }

    #[inline]
    fn size(v: u64) -> Option<usize> {
        match v {
            0..=63 => Some(1),
            64..=16383 => Some(2),
            16384..=1_073_741_823 => Some(4),
            1_073_741_824..=Self::MAX => Some(8),
            _ => None,
        }
    }
}

/// MoQT vi64: the count of leading 1 bits of the first byte gives the extra bytes; 1 to 9
/// bytes, every u64 encodable, non-minimal encodings accepted on decode.
#[derive(Debug, Clone, Copy)]
pub struct Vi64;

impl VarInt for Vi64 {
    const MAX: u64 = u64::MAX;

    #[inline]
    fn decode(buf: &[u8]) -> Result<(u64, usize), DecodeError> {
        let first = *buf.first().ok_or(DecodeError::NeedMore)?;
        let extra = first.leading_ones() as usize; // 0..=8
        let len = extra + 1;
        let bytes = buf.get(..len).ok_or(DecodeError::NeedMore)?;
        // Bits of the first byte after the length prefix (none for 8 or 9 byte forms).
        let mut v = if extra >= 7 { 0 } else { u64::from(first & (0x7f >> extra)) };
        for b in &bytes[1..] {
            v = (v << 8) | u64::from(*b);
        }
        Ok((v, len))
    }

    #[inline]
    fn encode(v: u64, out: &mut Vec<u8>) -> Result<(), super::EncodeError> {
        let len = Self::size(v).unwrap_or(9);
        if len == 9 {
            out.push(0xff);
            out.extend_from_slice(&v.to_be_bytes());
            return Ok(());
        }
        let extra = len - 1;
        let be = v.to_be_bytes();
        let start = out.len();
        out.extend_from_slice(&be[8 - len..]);
        // Leading `extra` one bits, then a zero bit, in the first byte.
        out[start] |= !(0xffu8 >> extra);
        Ok(())
    }

    #[inline]
    fn size(v: u64) -> Option<usize> {
        // An n-byte encoding carries 7n bits for n <= 8, and 64 bits for n = 9.
        let bits = 64 - v.leading_zeros() as usize;
        Some(if bits <= 56 { bits.div_ceil(7).max(1) } else { 9 })
    }
}
