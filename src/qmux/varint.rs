//! QUIC variable-length integers (RFC 9000 §16).

/// The largest value a varint can carry: 2^62 - 1.
pub(crate) const MAX: u64 = (1 << 62) - 1;

/// How many bytes `v` takes (RFC 9000 §16, Table 4); `v` must be at most [`MAX`].
pub(crate) fn len(v: u64) -> usize {
    match v {
        0..=63 => 1,
        64..=16383 => 2,
        16384..=1_073_741_823 => 4,
        _ => 8,
    }
}

/// Appends `v` in its shortest encoding; values above [`MAX`] are clamped to it.
pub(crate) fn put(out: &mut Vec<u8>, v: u64) {
    let v = v.min(MAX);
    match len(v) {
        1 => out.push(v as u8),
        2 => out.extend_from_slice(&(v as u16 | 0x4000).to_be_bytes()),
        4 => out.extend_from_slice(&(v as u32 | 0x8000_0000).to_be_bytes()),
        _ => out.extend_from_slice(&(v | 0xc000_0000_0000_0000).to_be_bytes()),
    }
}

/// Decodes one varint from the front of `buf`: its value and length, or `None` when `buf`
/// ends before it does.
pub(crate) fn get(buf: &[u8]) -> Option<(u64, usize)> {
    let first = *buf.first()?;
    let n = 1usize << (first >> 6);
    let bytes = buf.get(..n)?;
    let mut v = u64::from(first & 0x3f);
    for b in &bytes[1..] {
        v = (v << 8) | u64::from(*b);
    }
    Some((v, n))
}

/// A cursor over a byte slice that reads varints and byte runs.
pub(crate) struct Reader<'a> {
    pub(crate) buf: &'a [u8],
    pub(crate) pos: usize,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }

    /// The next varint, or `None` when the slice ends first.
    pub(crate) fn varint(&mut self) -> Option<u64> {
        let (v, n) = get(&self.buf[self.pos..])?;
        self.pos += n;
        Some(v)
    }

    /// The next `n` bytes, or `None` when fewer are left.
    pub(crate) fn bytes(&mut self, n: u64) -> Option<&'a [u8]> {
        let n = usize::try_from(n).ok()?;
        let end = self.pos.checked_add(n)?;
        let out = self.buf.get(self.pos..end)?;
        self.pos = end;
        Some(out)
    }

    /// Everything left.
    pub(crate) fn rest(&mut self) -> &'a [u8] {
        let out = &self.buf[self.pos..];
        self.pos = self.buf.len();
        out
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.pos >= self.buf.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        // RFC 9000 §A.1's examples.
        for (v, enc) in [
            (151_288_809_941_952_652u64, &[0xc2, 0x19, 0x7c, 0x5e, 0xff, 0x14, 0xe8, 0x8c][..]),
            (494_878_333, &[0x9d, 0x7f, 0x3e, 0x7d]),
            (15_293, &[0x7b, 0xbd]),
            (37, &[0x25]),
        ] {
            let mut out = Vec::new();
            put(&mut out, v);
            assert_eq!(out, enc);
            assert_eq!(get(enc), Some((v, enc.len())));
            assert_eq!(get(&enc[..enc.len() - 1]), None);
        }
    }
}
