//! Top-level box framing of a byte stream (ISO/IEC 14496-12 §4.2): the size and type of the
//! next box, read before its body has arrived, so that a box can be refused by its size
//! alone.

use crate::Error;

/// A box header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Header {
    pub kind: [u8; 4],
    /// The whole box, header included.
    pub size: u64,
}

impl Header {
    pub(crate) fn name(&self) -> String {
        self.kind.iter().map(|&b| if b.is_ascii_graphic() { char::from(b) } else { '?' }).collect()
    }
}

/// The header at the start of `buf` (which starts at byte `at` of the stream), or `None`
/// until enough bytes have arrived.
pub(crate) fn header(buf: &[u8], at: u64) -> Result<Option<Header>, Error> {
    let Some(head) = buf.get(..8) else { return Ok(None) };
    let kind = [head[4], head[5], head[6], head[7]];
    let (size, header_len) = match u32::from_be_bytes([head[0], head[1], head[2], head[3]]) {
        // `largesize` follows the type.
        1 => match buf.get(8..16) {
            Some(large) => (u64::from_be_bytes(large.try_into().unwrap_or_default()), 16),
            None => return Ok(None),
        },
        size => (u64::from(size), 8),
    };
    let bad = |reason| Error::BadBox { kind: Header { kind, size }.name(), at, reason };
    if size == 0 {
        return Err(bad("size 0 (to the end of the file) cannot be framed in a stream"));
    }
    if size < header_len {
        return Err(bad("size smaller than the box header"));
    }
    Ok(Some(Header { kind, size }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_frame_boxes() {
        let moov = [0, 0, 0, 16, b'm', b'o', b'o', b'v'];
        assert_eq!(header(&moov, 0), Ok(Some(Header { kind: *b"moov", size: 16 })));
        assert_eq!(header(&moov[..7], 0), Ok(None));
        let large = [0, 0, 0, 1, b'm', b'd', b'a', b't', 0, 0, 0, 1, 0, 0, 0, 0];
        assert_eq!(header(&large, 0), Ok(Some(Header { kind: *b"mdat", size: 1 << 32 })));
        assert_eq!(header(&large[..12], 0), Ok(None));
        assert!(header(&[0, 0, 0, 0, b'm', b'd', b'a', b't'], 0).is_err());
        assert!(header(&[0, 0, 0, 7, b'f', b'r', b'e', b'e'], 0).is_err());
        assert!(header(&[0, 0, 0, 1, b'f', b'r', b'e', b'e', 0, 0, 0, 0, 0, 0, 0, 15], 0).is_err());
    }
}
