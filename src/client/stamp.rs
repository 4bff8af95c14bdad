//! Generated object payloads for load tools and tests: each begins with an 8-byte big-endian
//! sequence number and an 8-byte big-endian send time in microseconds since the Unix epoch,
//! then filler up to the requested size. A receiver finds gaps from the sequence numbers and
//! the one-way latency from the time (same clock, or synchronised clocks).

use std::time::{SystemTime, UNIX_EPOCH};

use bytes::{BufMut, Bytes, BytesMut};

use wire::model::TrackNamespace;

/// Bytes of the header every stamped payload starts with.
pub const STAMP_LEN: usize = 16;

/// What a stamped payload carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    /// Its sequence number on the track.
    pub seq: u64,
    /// Microseconds since the Unix epoch when the payload was made.
    pub micros: u64,
}

/// Microseconds since the Unix epoch now (0 if the clock is before it).
pub fn now_micros() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
}

/// A payload of `size` bytes (at least [`STAMP_LEN`]) stamped with `seq` and `micros`; the
/// filler bytes are `seq`'s low byte, so that payloads of different objects differ.
pub fn stamped(seq: u64, micros: u64, size: usize) -> Bytes {
    let mut b = BytesMut::with_capacity(size.max(STAMP_LEN));
    b.put_u64(seq);
    b.put_u64(micros);
    b.resize(size.max(STAMP_LEN), seq as u8);
    b.freeze()
}

/// The stamp at the start of `payload`, if it is long enough.
pub fn read_stamp(payload: &[u8]) -> Option<Stamp> {
    let seq = u64::from_be_bytes(payload.get(..8)?.try_into().ok()?);
    let micros = u64::from_be_bytes(payload.get(8..16)?.try_into().ok()?);
    Some(Stamp { seq, micros })
}

/// A Track Namespace from `a/b/c` (fields separated by '/'; empty fields are refused).
pub fn parse_namespace(text: &str) -> Result<TrackNamespace, String> {
    let fields: Vec<&str> = text.split('/').collect();
    if fields.iter().any(|f| f.is_empty()) {
        return Err(format!("namespace {text:?}: empty field (write fields separated by '/')"));
    }
    Ok(TrackNamespace::from_strs(&fields))
}

/// Counts what a receiver of stamped payloads saw: objects, sequence numbers skipped (gaps),
/// and ones that came late or twice.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct SeqStats {
    /// Payloads received.
    pub received: u64,
    /// Sequence numbers skipped between consecutive arrivals (counted when a later one arrives).
    pub missing: u64,
    /// Gaps: runs of skipped sequence numbers.
    pub gaps: u64,
    /// Arrivals at or below the highest sequence number already seen.
    pub out_of_order: u64,
    highest: Option<u64>,
}

impl SeqStats {
    /// Counts an arrival of sequence number `seq`.
    pub fn record(&mut self, seq: u64) {
        self.received += 1;
        match self.highest {
            Some(h) if seq <= h => self.out_of_order += 1,
            Some(h) => {
                if seq > h + 1 {
                    self.missing += seq - h - 1;
                    self.gaps += 1;
                }
                self.highest = Some(seq);
            }
            None => self.highest = Some(seq),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamp_round_trip_and_size() {
        let p = stamped(0x0102_0304_0506_0708, 42, 100);
        assert_eq!(p.len(), 100);
        assert_eq!(&p[..8], &[1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(read_stamp(&p), Some(Stamp { seq: 0x0102_0304_0506_0708, micros: 42 }));
        assert_eq!(stamped(1, 2, 3).len(), STAMP_LEN);
        assert_eq!(read_stamp(&p[..15]), None);
    }

    #[test]
    fn namespaces_split_on_slashes() {
        assert_eq!(parse_namespace("a/b"), Ok(TrackNamespace::from_strs(&["a", "b"])));
        assert_eq!(parse_namespace("live"), Ok(TrackNamespace::from_strs(&["live"])));
        assert!(parse_namespace("a//b").is_err());
        assert!(parse_namespace("").is_err());
    }

    #[test]
    fn sequence_gaps() {
        let mut s = SeqStats::default();
        for seq in [0, 1, 2, 5, 6, 4, 9] {
            s.record(seq);
        }
        assert_eq!((s.received, s.missing, s.gaps, s.out_of_order), (7, 4, 2, 1));
    }
}
