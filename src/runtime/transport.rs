//! What an application writes into: a QUIC connection of quiche's, or QMux (QUIC's stream and
//! datagram frames over a WebSocket or TLS on TCP, draft-ietf-quic-qmux). Both number streams
//! as RFC 9000 §2.1 does and answer in quiche's terms (its `Error`, its `Shutdown`), so the
//! MoQT glue above (`moqt::Pump`) is written once for both, and a session cannot tell which
//! carries it (ARCHITECTURE.md, "Transports").

use bytes::Bytes;

use crate::QuicConnection;

/// A connection's streams and datagrams, in quiche's terms.
pub trait Transport {
    /// Reads stream `id` into `out`: bytes read and whether the stream's end was reached.
    fn stream_recv(&mut self, id: u64, out: &mut [u8]) -> quiche::Result<(usize, bool)>;
    /// Appends `data` to stream `id` (`fin`: ends it): bytes taken.
    fn stream_send(&mut self, id: u64, data: &[u8], fin: bool) -> quiche::Result<usize>;
    /// As `stream_send`, with bytes the transport may keep without copying them.
    fn stream_send_bytes(&mut self, id: u64, data: Bytes, fin: bool) -> quiche::Result<usize>;
    /// What `stream_send` would take now; an error once the stream is gone here (all of it
    /// delivered, or reset).
    fn stream_capacity(&mut self, id: u64) -> quiche::Result<usize>;
    /// Sets stream `id`'s urgency (lower first) and whether it interleaves with its equals.
    fn stream_priority(&mut self, id: u64, urgency: u8, incremental: bool) -> quiche::Result<()>;
    /// Ends a direction of stream `id` abruptly with `code` (RESET_STREAM or STOP_SENDING).
    fn stream_shutdown(&mut self, id: u64, how: quiche::Shutdown, code: u64) -> quiche::Result<()>;
    /// The next stream with something to read.
    fn stream_readable_next(&mut self) -> Option<u64>;
    /// Sends a datagram.
    fn dgram_send(&mut self, data: &[u8]) -> quiche::Result<()>;
    /// Reads the next datagram into `out`: its length.
    fn dgram_recv(&mut self, out: &mut [u8]) -> quiche::Result<usize>;
    /// Closes the connection (`app`: an application error code) with `code` and `reason`.
    fn close(&mut self, app: bool, code: u64, reason: &[u8]) -> quiche::Result<()>;
    /// Bytes handed to the network so far. Cheap: read on every write.
    fn sent_bytes(&self) -> u64;
    /// Bytes the path has delivered so far: acknowledged by the peer (QUIC), or written to
    /// the socket (QMux, whose TCP acknowledges below it); it stands still while the path is
    /// down. Not cheap over QUIC: quiche's connection statistics, which it gathers anew for
    /// each call with a walk over every stream, so callers sample it.
    fn acked_bytes(&self) -> u64;
    /// Packets (QUIC) or socket writes (QMux) so far: it grows once what was queued before
    /// has left.
    fn sent_units(&self) -> usize;
    /// The smoothed round-trip time of the active path (QUIC); zero for QMux, whose TCP does
    /// not tell.
    fn rtt(&self) -> std::time::Duration;
}

impl Transport for QuicConnection {
    fn stream_recv(&mut self, id: u64, out: &mut [u8]) -> quiche::Result<(usize, bool)> {
        quiche::Connection::stream_recv(self, id, out)
    }
    fn stream_send(&mut self, id: u64, data: &[u8], fin: bool) -> quiche::Result<usize> {
        quiche::Connection::stream_send(self, id, data, fin)
    }
    fn stream_send_bytes(&mut self, id: u64, data: Bytes, fin: bool) -> quiche::Result<usize> {
        // Shared, not copied (`SharedBufs`): quiche keeps a reference to these bytes until
        // the peer acknowledges them.
        self.stream_send_zc(id, data, fin).map(|(n, _)| n)
    }
    fn stream_capacity(&mut self, id: u64) -> quiche::Result<usize> {
        quiche::Connection::stream_capacity(self, id)
    }
    fn stream_priority(&mut self, id: u64, urgency: u8, incremental: bool) -> quiche::Result<()> {
        quiche::Connection::stream_priority(self, id, urgency, incremental)
    }
    fn stream_shutdown(&mut self, id: u64, how: quiche::Shutdown, code: u64) -> quiche::Result<()> {
        quiche::Connection::stream_shutdown(self, id, how, code)
    }
    fn stream_readable_next(&mut self) -> Option<u64> {
        quiche::Connection::stream_readable_next(self)
    }
    fn dgram_send(&mut self, data: &[u8]) -> quiche::Result<()> {
        quiche::Connection::dgram_send(self, data)
    }
    fn dgram_recv(&mut self, out: &mut [u8]) -> quiche::Result<usize> {
        quiche::Connection::dgram_recv(self, out)
    }
    fn close(&mut self, app: bool, code: u64, reason: &[u8]) -> quiche::Result<()> {
        quiche::Connection::close(self, app, code, reason)
    }
    fn sent_bytes(&self) -> u64 {
        // The paths' figures are kept as they go; `stats()` would walk every stream.
        self.path_stats().map(|p| p.sent_bytes).sum()
    }
    fn acked_bytes(&self) -> u64 {
        self.stats().acked_bytes
    }
    fn sent_units(&self) -> usize {
        self.path_stats().map(|p| p.sent).sum()
    }
    fn rtt(&self) -> std::time::Duration {
        self.path_stats().next().map_or(std::time::Duration::ZERO, |p| p.rtt)
    }
}

/// quiche's error for a QMux one.
fn quiche_error(e: qmux::Error) -> quiche::Error {
    match e {
        qmux::Error::Done => quiche::Error::Done,
        qmux::Error::StreamReset(code) => quiche::Error::StreamReset(code),
        qmux::Error::StreamStopped(code) => quiche::Error::StreamStopped(code),
        qmux::Error::StreamLimit => quiche::Error::StreamLimit,
        qmux::Error::InvalidStreamState(id) => quiche::Error::InvalidStreamState(id),
        _ => quiche::Error::InvalidState,
    }
}

fn shutdown(how: quiche::Shutdown) -> qmux::Shutdown {
    match how {
        quiche::Shutdown::Read => qmux::Shutdown::Read,
        quiche::Shutdown::Write => qmux::Shutdown::Write,
    }
}

impl Transport for qmux::Connection {
    fn stream_recv(&mut self, id: u64, out: &mut [u8]) -> quiche::Result<(usize, bool)> {
        qmux::Connection::stream_recv(self, id, out).map_err(quiche_error)
    }
    fn stream_send(&mut self, id: u64, data: &[u8], fin: bool) -> quiche::Result<usize> {
        qmux::Connection::stream_send(self, id, data, fin).map_err(quiche_error)
    }
    fn stream_send_bytes(&mut self, id: u64, data: Bytes, fin: bool) -> quiche::Result<usize> {
        qmux::Connection::stream_send(self, id, &data, fin).map_err(quiche_error)
    }
    fn stream_capacity(&mut self, id: u64) -> quiche::Result<usize> {
        qmux::Connection::stream_capacity(self, id).map_err(quiche_error)
    }
    fn stream_priority(&mut self, id: u64, urgency: u8, incremental: bool) -> quiche::Result<()> {
        qmux::Connection::stream_priority(self, id, urgency, incremental).map_err(quiche_error)
    }
    fn stream_shutdown(&mut self, id: u64, how: quiche::Shutdown, code: u64) -> quiche::Result<()> {
        qmux::Connection::stream_shutdown(self, id, shutdown(how), code).map_err(quiche_error)
    }
    fn stream_readable_next(&mut self) -> Option<u64> {
        qmux::Connection::stream_readable_next(self)
    }
    fn dgram_send(&mut self, data: &[u8]) -> quiche::Result<()> {
        qmux::Connection::dgram_send(self, data).map_err(quiche_error)
    }
    fn dgram_recv(&mut self, out: &mut [u8]) -> quiche::Result<usize> {
        qmux::Connection::dgram_recv(self, out).map_err(quiche_error)
    }
    fn close(&mut self, app: bool, code: u64, reason: &[u8]) -> quiche::Result<()> {
        qmux::Connection::close(self, app, code, reason).map_err(quiche_error)
    }
    fn sent_bytes(&self) -> u64 {
        self.stats().sent_bytes
    }
    fn acked_bytes(&self) -> u64 {
        self.stats().sent_bytes
    }
    fn sent_units(&self) -> usize {
        usize::try_from(self.stats().sent_bytes).unwrap_or(usize::MAX)
    }
    fn rtt(&self) -> std::time::Duration {
        std::time::Duration::ZERO
    }
}
