//! Per-stream receive buffers and QUIC stream-id arithmetic (RFC 9000 §2.1).
//!
//! A [`RecvBuf`] accumulates the bytes of one stream until whole control messages can be
//! parsed (the codecs report `NeedMore` for a partial one). Every buffer has a byte limit, so a
//! peer cannot grow memory by sending a message that never completes (design §5).

use wire::model::Role;

/// The receive side of one stream.
#[derive(Debug, Default)]
pub(crate) struct RecvBuf {
    buf: Vec<u8>,
    /// The peer sent FIN.
    pub fin: bool,
}

/// The buffer would exceed its limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Overflow;

impl RecvBuf {
    /// Appends `data`; fails (appending nothing) when the buffer would hold more than `limit`.
    pub(crate) fn push(&mut self, data: &[u8], limit: usize) -> Result<(), Overflow> {
        if self.buf.len().saturating_add(data.len()) > limit {
            return Err(Overflow);
        }
        self.buf.extend_from_slice(data);
        Ok(())
    }

    /// The unparsed bytes.
    pub(crate) fn data(&self) -> &[u8] {
        &self.buf
    }

    /// Drops the first `n` parsed bytes.
    pub(crate) fn consume(&mut self, n: usize) {
        let n = n.min(self.buf.len());
        self.buf.drain(..n);
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }
}

/// The peer-opened streams of one kind this session has finished with, so that bytes still in
/// flight on them (after a cancel) are not mistaken for new streams. Kept compact: a watermark
/// below which every stream of the kind counts as closed, plus the closed ids above it.
///
/// Bounded: one stream the peer keeps open (a long subscription) holds the watermark while
/// every later stream closes above it, so past `window` ids above it the lowest is dropped and
/// the watermark passes it (ARCHITECTURE.md, "Malformed and abusive input"). A stream still
/// open below the watermark is unaffected, since callers look up their open streams first;
/// a stream whose first byte arrives `window` streams late is taken as closed. The transport
/// keeps far fewer streams open at once (`INITIAL_MAX_STREAMS_*`), so that only happens to a
/// peer that skipped stream ids on purpose.
#[derive(Debug)]
pub(crate) struct ClosedStreams {
    below: StreamId,
    above: std::collections::BTreeSet<StreamId>,
    window: usize,
}

impl ClosedStreams {
    /// For the peer-opened streams of the kind that starts at `first` (ids `first + 4k`),
    /// keeping at most `window` closed ids above the watermark.
    pub(crate) fn new(first: StreamId, window: usize) -> Self {
        ClosedStreams { below: first, above: Default::default(), window }
    }

    pub(crate) fn insert(&mut self, id: StreamId) {
        if id < self.below {
            return;
        }
        self.above.insert(id);
        if self.above.len() > self.window {
            if let Some(lowest) = self.above.pop_first() {
                self.below = StreamId(lowest.0.saturating_add(4));
            }
        }
        while self.above.remove(&self.below) {
            self.below = StreamId(self.below.0.saturating_add(4));
        }
    }

    pub(crate) fn contains(&self, id: StreamId) -> bool {
        id < self.below || self.above.contains(&id)
    }

    /// Closed ids kept above the watermark.
    pub(crate) fn tracked(&self) -> usize {
        self.above.len()
    }
}

/// Closed peer bidirectional stream ids kept above the watermark: well above the request
/// streams a peer may have open at once (`runtime::tls::INITIAL_MAX_STREAMS_BIDI`, 1,000).
pub(crate) const CLOSED_BIDI_WINDOW: usize = 4096;
/// The same for unidirectional (data) streams (`INITIAL_MAX_STREAMS_UNI`, 10,000).
pub(crate) const CLOSED_UNI_WINDOW: usize = 16_384;

/// A QUIC stream of the session, in QUIC's numbering (RFC 9000 §2.1): the two low bits say
/// who opened it and whether it is unidirectional. Over WebTransport it is the QUIC stream
/// the WebTransport layer maps the session's stream to; over raw QUIC the stream itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(transparent)]
pub struct StreamId(pub u64);

impl StreamId {
    /// The first stream id of a kind: client bidi 0, server bidi 1, client uni 2, server uni 3.
    pub const fn first(role: Role, uni: bool) -> StreamId {
        let r = match role {
            Role::Client => 0,
            Role::Server => 1,
        };
        StreamId(r | if uni { 2 } else { 0 })
    }

    /// The endpoint that opened it.
    pub const fn initiator(self) -> Role {
        if self.0 & 1 == 0 {
            Role::Client
        } else {
            Role::Server
        }
    }

    /// True for a unidirectional stream.
    pub const fn is_uni(self) -> bool {
        self.0 & 2 != 0
    }

    /// The next stream of the same kind (ids of a kind step by 4).
    pub const fn next(self) -> StreamId {
        StreamId(self.0.saturating_add(4))
    }
}

impl std::fmt::Display for StreamId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_id_kinds() {
        assert_eq!(StreamId::first(Role::Client, false), StreamId(0));
        assert_eq!(StreamId::first(Role::Server, false), StreamId(1));
        assert_eq!(StreamId::first(Role::Client, true), StreamId(2));
        assert_eq!(StreamId::first(Role::Server, true), StreamId(3));
        assert_eq!(StreamId(4).initiator(), Role::Client);
        assert_eq!(StreamId(7).initiator(), Role::Server);
        assert!(StreamId(6).is_uni() && !StreamId(5).is_uni());
        assert_eq!(StreamId(3).next(), StreamId(7));
    }

    #[test]
    fn closed_streams_compact() {
        let mut c = ClosedStreams::new(StreamId(1), 16);
        c.insert(StreamId(9));
        assert!(c.contains(StreamId(9)) && !c.contains(StreamId(1)) && !c.contains(StreamId(5)));
        c.insert(StreamId(1));
        c.insert(StreamId(5));
        assert!([1, 5, 9].map(StreamId).iter().all(|&id| c.contains(id)) && !c.contains(StreamId(13)));
        assert!(c.above.is_empty());
    }

    #[test]
    fn closed_streams_keep_a_bounded_window() {
        // Stream 0 stays open while 1000 later streams close.
        let mut c = ClosedStreams::new(StreamId(0), 8);
        let bidi = |k: u64| StreamId(4 * k);
        for k in 1..=1000u64 {
            c.insert(bidi(k));
        }
        assert!(c.tracked() <= 8);
        assert!(c.contains(bidi(1000)) && c.contains(bidi(500)) && !c.contains(bidi(1001)));
        // A gap above the watermark is still told apart.
        c.insert(bidi(1003));
        assert!(c.contains(bidi(1003)) && !c.contains(bidi(1002)));
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
