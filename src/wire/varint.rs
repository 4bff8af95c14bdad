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
        if first < 0x80 {
            return Ok((u64::from(first), 1));
        }
        let extra = first.leading_ones() as usize; // 1..=8
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
        if v < 0x80 {
            // The common case on the data path (deltas, small lengths): one byte as is.
            out.push(v as u8);
            return Ok(());
        }
        if v < 0x4000 {
            // Two bytes: 10xxxxxx xxxxxxxx (object payload lengths, most IDs).
            out.extend_from_slice(&((v as u16) | 0x8000).to_be_bytes());
            return Ok(());
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex")).collect()
    }

    /// RFC 9000 Appendix A.1 examples.
    #[test]
    fn quic_rfc9000_vectors() {
        for (bytes, value) in [
            ("c2197c5eff14e88c", 151_288_809_941_952_652u64),
            ("9d7f3e7d", 494_878_333),
            ("7bbd", 15_293),
            ("25", 37),
            ("4025", 37),
        ] {
            let b = hex(bytes);
            assert_eq!(Quic::decode(&b), Ok((value, b.len())), "{bytes}");
        }
        let mut out = Vec::new();
        Quic::encode(15_293, &mut out).expect("encodes");
        assert_eq!(out, hex("7bbd"));
        assert!(Quic::encode(1 << 62, &mut Vec::new()).is_err());
    }

    /// draft-22 §8.1 Table 4, including the non-minimal 0x8025.
    #[test]
    fn vi64_draft22_vectors() {
        for (bytes, value) in [
            ("25", 37u64),
            ("8025", 37),
            ("bbbd", 15_293),
            ("ed7f3e7d", 226_442_877),
            ("faa1a0e403d8", 2_893_212_287_960),
            ("fc8998abc66bc0", 151_288_809_941_952),
            ("fefa318fa8e3ca11", 70_423_237_261_249_041),
            ("ffffffffffffffffff", 18_446_744_073_709_551_615),
        ] {
            let b = hex(bytes);
            assert_eq!(Vi64::decode(&b), Ok((value, b.len())), "{bytes}");
            // The minimal form of each value (all but 0x8025 are minimal).
            if bytes != "8025" {
                let mut out = Vec::new();
                Vi64::encode(value, &mut out).expect("encodes");
                assert_eq!(out, b, "{bytes}");
            }
        }
        // "the value 0 can be encoded as 0x00, 0x8000, 0xc00000, or any longer form"
        for zero in ["00", "8000", "c00000", "e0000000", "ff0000000000000000"] {
            let b = hex(zero);
            assert_eq!(Vi64::decode(&b), Ok((0, b.len())), "{zero}");
        }
    }

    /// The length classes of draft-22 Table 3: the largest value of each class takes that many
    /// bytes and the next value one more.
    #[test]
    fn vi64_length_boundaries() {
        for n in 1..=8usize {
            let max = (1u64 << (7 * n)) - 1;
            assert_eq!(Vi64::size(max), Some(n), "max of {n}-byte class");
            assert_eq!(Vi64::size(max + 1), Some(n + 1), "first of {}-byte class", n + 1);
        }
        assert_eq!(Vi64::size(u64::MAX), Some(9));
    }

    fn round_trip<V: VarInt>(v: u64) -> Result<(), TestCaseError> {
        let mut out = Vec::new();
        V::encode(v, &mut out).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(Some(out.len()), V::size(v));
        prop_assert_eq!(V::decode(&out), Ok((v, out.len())));
        for cut in 0..out.len() {
            prop_assert_eq!(V::decode(&out[..cut]), Err(DecodeError::NeedMore));
        }
        Ok(())
    }

    proptest! {
        #[test]
        fn quic_round_trip(v in 0..=Quic::MAX) { round_trip::<Quic>(v)?; }

        #[test]
        fn vi64_round_trip(v in any::<u64>()) { round_trip::<Vi64>(v)?; }

        #[test]
        fn vi64_small_round_trip(shift in 0u32..64, low in any::<u64>()) {
            round_trip::<Vi64>(low >> shift)?;
        }

        #[test]
        fn arbitrary_bytes_never_panic(b in proptest::collection::vec(any::<u8>(), 0..12)) {
            if let Ok((_, n)) = Quic::decode(&b) { prop_assert!(n <= b.len()); }
            if let Ok((_, n)) = Vi64::decode(&b) { prop_assert!(n <= b.len()); }
        }
    }
}
