//! A bounds-checked cursor for decoding and append helpers for encoding, generic over the
//! integer encoding so that both dialects share them. Nothing here panics on any input.

use std::marker::PhantomData;

use super::error::{DecodeError, EncodeError};
use super::varint::VarInt;

/// Reads from a byte slice; every read either succeeds or returns `NeedMore` without
/// consuming. Never reads past the slice.
#[derive(Debug, Clone)]
pub struct Reader<'a, V> {
    buf: &'a [u8],
    pos: usize,
    _v: PhantomData<V>,
}

impl<'a, V: VarInt> Reader<'a, V> {
    pub fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0, _v: PhantomData }
    }

    /// Bytes consumed so far.
    pub fn position(&self) -> usize {
        self.pos
    }

    /// Bytes left.
    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    pub fn is_empty(&self) -> bool {
        self.remaining() == 0
    }

    /// The unread rest of the input.
    pub fn rest(&self) -> &'a [u8] {
        &self.buf[self.pos..]
    }

    #[inline]
    pub fn int(&mut self) -> Result<u64, DecodeError> {
        let (v, n) = V::decode(self.rest())?;
        self.pos += n;
        Ok(v)
    }

    #[inline]
    pub fn u8(&mut self) -> Result<u8, DecodeError> {
        let b = *self.rest().first().ok_or(DecodeError::NeedMore)?;
        self.pos += 1;
        Ok(b)
    }

    #[inline]
    pub fn u16(&mut self) -> Result<u16, DecodeError> {
        let b = self.bytes(2)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }

    /// Exactly `n` bytes.
    #[inline]
    pub fn bytes(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        let b = self.rest().get(..n).ok_or(DecodeError::NeedMore)?;
        self.pos += n;
        Ok(b)
    }

    /// An integer length, capped at `max`, then that many bytes.
    pub fn len_prefixed(&mut self, max: usize, what: &'static str) -> Result<&'a [u8], DecodeError> {
        let len = self.int()?;
        if len > max as u64 {
            return Err(DecodeError::violation(what));
        }
        self.bytes(len as usize)
    }

    /// A sub-reader over the next `n` bytes (advancing past them).
    pub fn sub(&mut self, n: usize) -> Result<Reader<'a, V>, DecodeError> {
        Ok(Reader::new(self.bytes(n)?))
    }

    /// A count that bounds a following list: each element takes at least one byte, so a
    /// count larger than the bytes left can never be satisfied. Returns it as `usize`.
    pub fn count(&mut self, what: &'static str) -> Result<usize, DecodeError> {
        let n = self.int()?;
        if n > self.remaining() as u64 {
            // More elements than bytes: with a bounded body this is malformed, in a stream it
            // may just be short; callers of bounded bodies map NeedMore to a violation.
            let _ = what;
            return Err(DecodeError::NeedMore);
        }
        Ok(n as usize)
    }

    /// Fails unless all input was consumed.
    pub fn finish(&self, what: &'static str) -> Result<(), DecodeError> {
        if self.is_empty() {
            Ok(())
        } else {
            Err(DecodeError::violation(what))
        }
    }
}

/// Append helpers for one integer encoding.
pub struct Writer<'a, V> {
    pub out: &'a mut Vec<u8>,
    _v: PhantomData<V>,
}

impl<'a, V: VarInt> Writer<'a, V> {
    pub fn new(out: &'a mut Vec<u8>) -> Self {
        Writer { out, _v: PhantomData }
    }

    #[inline]
    pub fn int(&mut self, v: u64) -> Result<(), EncodeError> {
        V::encode(v, self.out)
    }

    #[inline]
    pub fn u8(&mut self, v: u8) {
        self.out.push(v);
    }

    #[inline]
    pub fn bytes(&mut self, b: &[u8]) {
        self.out.extend_from_slice(b);
    }

    pub fn len_prefixed(&mut self, b: &[u8]) -> Result<(), EncodeError> {
        self.int(b.len() as u64)?;
        self.bytes(b);
        Ok(())
    }

    /// Writes `body` and then inserts its length (as an integer) in front of it.
    pub fn with_len_prefix(
        &mut self,
        body: impl FnOnce(&mut Writer<'_, V>) -> Result<(), EncodeError>,
    ) -> Result<(), EncodeError> {
        let mut tmp = Vec::new();
        body(&mut Writer::new(&mut tmp))?;
        self.len_prefixed(&tmp)
    }
}
