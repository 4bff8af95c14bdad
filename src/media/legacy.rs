//! The hang `legacy` container (moq-dev/moq `doc/concept/layer/hang.md`, "Legacy"): each
//! object is the presentation timestamp in microseconds as a QUIC variable-length integer
//! (RFC 9000 §16; `@moq/hang` `container/legacy.ts` reads it with `@moq/net`'s
//! `Varint.decode`, the RFC 9000 one, not the leading-ones encoding of later MoQT drafts),
//! then the codec payload.

use bytes::{BufMut, Bytes, BytesMut};

/// The largest timestamp the container carries here: 2^53 - 1 µs, because the player reads
/// the varint into a JavaScript number (`@moq/net` `varint.ts` loses precision above it).
pub const MAX_TIMESTAMP_US: u64 = (1 << 53) - 1;

/// Appends `v` (< 2^62) as a minimal QUIC varint.
pub fn put_varint(buf: &mut impl BufMut, v: u64) {
    if v < 1 << 6 {
        buf.put_u8(v as u8);
    } else if v < 1 << 14 {
        buf.put_u16(0x4000 | v as u16);
    } else if v < 1 << 30 {
        buf.put_u32(0x8000_0000 | v as u32);
    } else {
        buf.put_u64(0xc000_0000_0000_0000 | (v & 0x3fff_ffff_ffff_ffff));
    }
}

/// Reads a QUIC varint: the value and the bytes it took, or `None` if `buf` is too short.
pub fn get_varint(buf: &[u8]) -> Option<(u64, usize)> {
    let first = *buf.first()?;
    let len = 1usize << (first >> 6);
    let bytes = buf.get(..len)?;
    let mut v = u64::from(first & 0x3f);
    for b in &bytes[1..] {
        v = v << 8 | u64::from(*b);
    }
    Some((v, len))
}

/// One legacy object: the timestamp's varint, then `payload` (timestamps above
/// [`MAX_TIMESTAMP_US`] are the caller's to refuse).
pub fn encode_frame(timestamp_us: u64, payload: &[u8]) -> Bytes {
    let mut buf = BytesMut::with_capacity(8 + payload.len());
    put_varint(&mut buf, timestamp_us);
    buf.put_slice(payload);
    buf.freeze()
}

/// Splits a legacy object into its timestamp and payload.
pub fn decode_frame(object: &[u8]) -> Option<(u64, &[u8])> {
    let (ts, len) = get_varint(object)?;
    Some((ts, &object[len..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_are_rfc9000() {
        // RFC 9000 §A.1's examples.
        let cases: [(u64, &[u8]); 4] = [
            (37, &[0x25]),
            (15293, &[0x7b, 0xbd]),
            (494_878_333, &[0x9d, 0x7f, 0x3e, 0x7d]),
            (151_288_809_941_952_652, &[0xc2, 0x19, 0x7c, 0x5e, 0xff, 0x14, 0xe8, 0x8c]),
        ];
        for (v, wire) in cases {
            let mut buf = Vec::new();
            put_varint(&mut buf, v);
            assert_eq!(buf, wire, "{v}");
            assert_eq!(get_varint(wire), Some((v, wire.len())));
        }
        assert_eq!(get_varint(&[0x40]), None);
    }

    #[test]
    fn a_frame_is_the_timestamp_then_the_payload() {
        let object = encode_frame(33_333, b"abc");
        assert_eq!(&object[..], &[0x80, 0x00, 0x82, 0x35, b'a', b'b', b'c']);
        assert_eq!(decode_frame(&object), Some((33_333, &b"abc"[..])));
    }
}
