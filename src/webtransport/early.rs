//! Payload of WebTransport streams that arrives before the session is accepted: held, within
//! a byte limit for all of them together, until the application takes it.

/// The held payload (see the module header).
#[derive(Debug, Default)]
pub(crate) struct Early {
    /// (session stream, bytes, fin), one entry per stream, in arrival order.
    streams: Vec<(u64, Vec<u8>, bool)>,
    /// Bytes held, all streams together.
    bytes: usize,
}

impl Early {
    /// Holds `data` (and `fin`) of session stream `stream` if all together stay within `max`
    /// bytes; otherwise drops what the stream had and returns false.
    pub(crate) fn hold(&mut self, stream: u64, data: &[u8], fin: bool, max: usize) -> bool {
        if self.bytes + data.len() > max {
            let bytes = &mut self.bytes;
            self.streams.retain(|(s, b, _)| {
                let keep = *s != stream;
                if !keep {
                    *bytes -= b.len();
                }
                keep
            });
            return false;
        }
        self.bytes += data.len();
        match self.streams.iter_mut().find(|(s, _, _)| *s == stream) {
            Some((_, buf, f)) => {
                buf.extend_from_slice(data);
                *f |= fin;
            }
            None => self.streams.push((stream, data.to_vec(), fin)),
        }
        true
    }

    /// The payload held so far for session stream `stream`, without taking it.
    pub(crate) fn of(&self, stream: u64) -> Vec<u8> {
        self.streams.iter().filter(|(s, _, _)| *s == stream).flat_map(|(_, d, _)| d.iter().copied()).collect()
    }

    /// Everything held: (session stream, bytes, fin), in arrival order.
    pub(crate) fn take(&mut self) -> Vec<(u64, Vec<u8>, bool)> {
        self.bytes = 0;
        std::mem::take(&mut self.streams)
    }
}
