//! The seam between the runtime and what runs on a connection. The runtime owns the quiche
//! connection and calls the application after every batch of I/O; the application reads and
//! writes streams and datagrams. The MoQT session (issue 4) is one such application; tests and
//! benchmarks bring their own.

use crate::runtime::ShardId;
use crate::wire::Version;

/// One connection's application, living on the connection's core.
pub trait ConnApp {
    /// After packets for this connection were processed (and once when the handshake
    /// completes): read readable streams and datagrams, write what is due. Called on the
    /// connection's core only.
    fn on_io(&mut self, conn: &mut quiche::Connection);

    /// The connection closed (by either side or by idle timeout). Default: nothing.
    fn on_closed(&mut self, _conn: &quiche::Connection) {}
}

/// Makes one [`ConnApp`] per established connection. Shared by all cores.
pub trait AppFactory: Send + Sync + 'static {
    /// A connection on `shard` finished its handshake and chose `version` by ALPN.
    fn new_connection(&self, shard: ShardId, version: Version) -> Box<dyn ConnApp>;
}

/// Reads and discards everything; keeps connections open until they idle out. What `make run`
/// serves until the MoQT session exists.
#[derive(Debug, Default, Clone, Copy)]
pub struct DiscardApp;

impl ConnApp for DiscardApp {
    fn on_io(&mut self, conn: &mut quiche::Connection) {
        let mut buf = [0u8; 4096];
        while let Some(id) = conn.stream_readable_next() {
            while let Ok((_, _fin)) = conn.stream_recv(id, &mut buf) {}
        }
        while conn.dgram_recv(&mut buf).is_ok() {}
    }
}

impl AppFactory for DiscardApp {
    fn new_connection(&self, _shard: ShardId, _version: Version) -> Box<dyn ConnApp> {
        Box::new(DiscardApp)
    }
}

/// Echoes every stream back on the same stream, FIN included (tests).
#[derive(Debug, Default)]
pub struct EchoApp {
    pending: std::collections::HashMap<u64, (Vec<u8>, bool)>,
}

impl ConnApp for EchoApp {
    fn on_io(&mut self, conn: &mut quiche::Connection) {
        let mut buf = [0u8; 16384];
        while let Some(id) = conn.stream_readable_next() {
            while let Ok((n, fin)) = conn.stream_recv(id, &mut buf) {
                let entry = self.pending.entry(id).or_default();
                entry.0.extend_from_slice(&buf[..n]);
                entry.1 |= fin;
            }
        }
        self.pending.retain(|&id, (data, fin)| {
            match conn.stream_send(id, data, *fin) {
                Ok(n) => {
                    data.drain(..n);
                }
                Err(quiche::Error::Done) => {}
                Err(_) => return false,
            }
            !data.is_empty()
        });
    }
}

/// Factory for [`EchoApp`].
#[derive(Debug, Default, Clone, Copy)]
pub struct EchoFactory;

impl AppFactory for EchoFactory {
    fn new_connection(&self, _shard: ShardId, _version: Version) -> Box<dyn ConnApp> {
        Box::new(EchoApp::default())
    }
}
