//! Connections over TCP: QMux (draft-ietf-quic-qmux) after a WebSocket upgrade, for viewers
//! that have no UDP or no WebTransport (ARCHITECTURE.md, "Transports"). Whatever accepted the
//! TCP connection and answered its upgrade (the web listener, on its own thread) hands the
//! socket to a core with a [`StreamAcceptor`]; from then on the core owns it: its QMux state
//! lives on the core beside the QUIC connections, runs the same application, and only the
//! socket reads and writes are tasks of the core's executor.

use std::net::TcpStream;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use crossbeam_queue::ArrayQueue;

use crate::mesh::Waker;

/// Upgraded connections waiting for a core to take them, per core.
pub(crate) const HANDOFF_QUEUE: usize = 256;

/// A TCP connection whose upgrade was answered, for a core to serve.
#[derive(Debug)]
pub struct StreamHandoff {
    /// The socket (blocking or not: the core makes it non-blocking).
    pub socket: TcpStream,
    /// TLS already set up on it (`wss://`), or none (`ws://`).
    pub tls: Option<crate::StreamTls>,
    /// The QMux version and framing the upgrade chose.
    pub version: qmux::Version,
    /// How QMux frames travel: WebSocket messages or the draft's records.
    pub framing: qmux::Framing,
    /// What the application sees of the request: the application protocol the upgrade
    /// chose (an ALPN of [`crate::AppFactory::alpns`]), the authority and the path.
    pub request: StreamRequest,
    /// Bytes that arrived after the upgrade request, before the handoff (the client may send
    /// its first frames without waiting for the answer).
    pub early: Vec<u8>,
}

/// The request behind a connection over TCP, as its application sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamRequest {
    /// The application protocol the upgrade chose.
    pub alpn: String,
    /// The request's authority (`Host`).
    pub authority: String,
    /// With the query.
    pub path: String,
}

/// Hands upgraded TCP connections to the cores, round robin. Cheap to clone; usable from any
/// thread.
#[derive(Clone)]
pub struct StreamAcceptor {
    queues: Arc<[Arc<ArrayQueue<StreamHandoff>>]>,
    wakers: Vec<Waker>,
    next: Arc<AtomicUsize>,
}

impl StreamAcceptor {
    pub(crate) fn new(queues: Arc<[Arc<ArrayQueue<StreamHandoff>>]>, wakers: Vec<Waker>) -> Self {
        StreamAcceptor { queues, wakers, next: Arc::new(AtomicUsize::new(0)) }
    }

    /// An acceptor tied to no core: every connection comes back (tests of what holds one).
    pub fn detached() -> Self {
        StreamAcceptor::new(Arc::from(Vec::new()), Vec::new())
    }

    /// Gives `conn` to the next core whose queue has room; back when every queue is full
    /// (the cores are not keeping up: the caller closes it).
    pub fn adopt(&self, mut conn: StreamHandoff) -> Result<(), StreamHandoff> {
        let cores = self.queues.len();
        let start = self.next.fetch_add(1, Ordering::Relaxed);
        for i in 0..cores {
            let core = (start + i) % cores;
            match self.queues[core].push(conn) {
                Ok(()) => {
                    if let Some(w) = self.wakers.get(core) {
                        w.wake();
                    }
                    return Ok(());
                }
                Err(back) => conn = back,
            }
        }
        Err(conn)
    }
}
