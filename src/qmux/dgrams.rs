//! Datagrams received and not yet read by the application: bounded in count and bytes, the
//! oldest dropped first (draft-ietf-quic-qmux-01 §6: received datagrams may be dropped).

use std::collections::VecDeque;

use crate::Error;

/// Datagrams held, at most.
const MAX_DGRAMS: usize = 256;
/// Bytes of datagrams held, at most.
const MAX_DGRAM_BYTES: usize = 1 << 20;

/// The received datagrams (see the module header).
#[derive(Debug, Default)]
pub(crate) struct DgramQueue {
    queue: VecDeque<Vec<u8>>,
    /// Bytes in `queue`.
    bytes: usize,
}

impl DgramQueue {
    /// Holds `d`, dropping the oldest held beyond the bounds: how many were dropped.
    pub(crate) fn push(&mut self, d: &[u8]) -> u64 {
        let mut dropped = 0;
        while self.queue.len() >= MAX_DGRAMS || self.bytes + d.len() > MAX_DGRAM_BYTES {
            let Some(old) = self.queue.pop_front() else { break };
            self.bytes -= old.len();
            dropped += 1;
        }
        self.bytes += d.len();
        self.queue.push_back(d.to_vec());
        dropped
    }

    /// The oldest held datagram, copied into `out`: its length; `Done` when none is held,
    /// `BufferTooShort` (and it stays) when it does not fit.
    pub(crate) fn pop(&mut self, out: &mut [u8]) -> Result<usize, Error> {
        let d = self.queue.front().ok_or(Error::Done)?;
        if d.len() > out.len() {
            return Err(Error::BufferTooShort);
        }
        let n = d.len();
        out[..n].copy_from_slice(d);
        self.bytes -= n;
        self.queue.pop_front();
        Ok(n)
    }
}
