//! Per-stream receive buffers and QUIC stream-id arithmetic (RFC 9000 §2.1).
//!
//! A [`RecvBuf`] accumulates the bytes of one stream until whole control messages can be
//! parsed (the codecs report `NeedMore` for a partial one). Every buffer has a byte limit, so a
//! peer cannot grow memory by sending a message that never completes (design §5).

use crate::wire::model::Role;

/// The receive side of one stream.
#[derive(Debug, Default)]
pub struct RecvBuf {
    buf: Vec<u8>,
    /// The peer sent FIN.
    pub fin: bool,
}

/// The buffer would exceed its limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Overflow;

impl RecvBuf {
    /// Appends `data`; fails (appending nothing) when the buffer would hold more than `limit`.
    pub fn push(&mut self, data: &[u8], limit: usize) -> Result<(), Overflow> {
        if self.buf.len().saturating_add(data.len()) > limit {
            return Err(Overflow);
        }
        self.buf.extend_from_slice(data);
        Ok(())
    }

    /// The unparsed bytes.
    pub fn data(&self) -> &[u8] {
        &self.buf
    }

    /// Drops the first `n` parsed bytes.
    pub fn consume(&mut self, n: usize) {
        let n = n.min(self.buf.len());
        self.buf.drain(..n);
    }

    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }
}

/// The peer-opened bidirectional streams this session has finished with, so that bytes still in
/// flight on them (after a cancel) are not mistaken for new streams. Kept compact: a watermark
/// below which every stream of the kind is closed, plus the closed ids above it.
#[derive(Debug)]
pub struct ClosedStreams {
    below: u64,
    above: std::collections::BTreeSet<u64>,
}

impl ClosedStreams {
    /// For the peer-opened streams of the kind that starts at `first` (ids `first + 4k`).
    pub fn new(first: u64) -> Self {
        ClosedStreams { below: first, above: Default::default() }
    }

    pub fn insert(&mut self, id: u64) {
        if id < self.below {
            return;
        }
        self.above.insert(id);
        while self.above.remove(&self.below) {
            self.below = self.below.saturating_add(4);
        }
    }

    pub fn contains(&self, id: u64) -> bool {
        id < self.below || self.above.contains(&id)
    }
}

/// The endpoint that opened stream `id`.
pub const fn initiator(id: u64) -> Role {
    if id & 1 == 0 {
        Role::Client
    } else {
        Role::Server
    }
}

/// True for unidirectional streams.
pub const fn is_uni(id: u64) -> bool {
    id & 2 != 0
}

/// The first stream id of a kind: client bidi 0, server bidi 1, client uni 2, server uni 3.
pub const fn first_id(role: Role, uni: bool) -> u64 {
    let r = match role {
        Role::Client => 0,
        Role::Server => 1,
    };
    r | if uni { 2 } else { 0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_id_kinds() {
        assert_eq!(first_id(Role::Client, false), 0);
        assert_eq!(first_id(Role::Server, false), 1);
        assert_eq!(first_id(Role::Client, true), 2);
        assert_eq!(first_id(Role::Server, true), 3);
        assert_eq!(initiator(4), Role::Client);
        assert_eq!(initiator(7), Role::Server);
        assert!(is_uni(6) && !is_uni(5));
    }

    #[test]
    fn closed_streams_compact() {
        let mut c = ClosedStreams::new(1);
        c.insert(9);
        assert!(c.contains(9) && !c.contains(1) && !c.contains(5));
        c.insert(1);
        c.insert(5);
        assert!(c.contains(1) && c.contains(5) && c.contains(9) && !c.contains(13));
        assert!(c.above.is_empty());
    }

    #[test]
    fn buffer_limit() {
        let mut b = RecvBuf::default();
        assert!(b.push(b"abc", 4).is_ok());
        assert_eq!(b.push(b"de", 4), Err(Overflow));
        b.consume(2);
        assert_eq!(b.data(), b"c");
        assert!(b.push(b"de", 4).is_ok());
    }
}
