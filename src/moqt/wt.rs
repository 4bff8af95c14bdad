//! A [`Pump`](crate::Pump)'s WebTransport session, when its MoQT session runs in one: the
//! session's state machine (its stream IDs mapped to QUIC's, stream headers, datagram
//! prefixes, capsules), the HTTP/3 bytes it still has to write, and how it ends (the peer
//! drains or closes it; our close goes out as a capsule before the connection closes).

use std::collections::VecDeque;

use bytes::Bytes;
use runtime::Transport;
use session::StreamId;
use tracing::debug;
use webtransport::{code as wt_code, Event as WtEvent, WebTransport};

use crate::accept::write_webtransport_output;
use crate::WebTransportConn;

/// One WebTransport session under a pump (see the module header).
#[derive(Debug)]
pub(crate) struct WtLink {
    /// The session's state machine. Stream IDs in the pump are the session's; this maps
    /// them to QUIC's.
    pub session: WebTransport,
    /// HTTP/3 bytes of the WebTransport layer (control stream, CONNECT stream) not yet taken
    /// by quiche: (QUIC stream, bytes, fin).
    h3: VecDeque<(u64, Bytes, bool)>,
    /// The peer sent DRAIN_WEBTRANSPORT_SESSION.
    draining: bool,
    /// The peer closed the session: its code (MoQT's session termination code) and reason.
    peer_closed: Option<(u64, String)>,
    /// We closed the session: its CLOSE_WEBTRANSPORT_SESSION capsule went out once quiche had
    /// sent this many packets; the connection closes after the next one.
    closing: Option<usize>,
}

impl WtLink {
    /// The accepted session `conn`, with the HTTP/3 bytes its handshake left unsent.
    pub(crate) fn new(conn: WebTransportConn) -> Self {
        WtLink { session: conn.wt, h3: conn.h3, draining: false, peer_closed: None, closing: None }
    }

    /// Whether the peer asked to drain the session.
    pub(crate) fn draining(&self) -> bool {
        self.draining
    }

    /// How the peer closed the session, once it has.
    pub(crate) fn peer_closed(&self) -> Option<&(u64, String)> {
        self.peer_closed.as_ref()
    }

    /// The QUIC stream that carries session stream `id`.
    pub(crate) fn quic_id(&self, id: StreamId) -> Option<u64> {
        self.session.quic_id(id.0)
    }

    /// The peer closed the session (CLOSE_WEBTRANSPORT_SESSION, or its CONNECT stream
    /// ended): with one session per connection, the connection closes with it. Or it asks to
    /// drain.
    pub(crate) fn handle_events(&mut self, conn: &mut impl Transport) {
        while let Some(event) = self.session.poll_event() {
            match event {
                WtEvent::Closed { code, reason } => {
                    debug!(code, reason, "WebTransport session closed by the peer");
                    let _ = conn.close(true, wt_code::H3_NO_ERROR, b"");
                    self.peer_closed = Some((u64::from(code), reason));
                }
                WtEvent::Draining => {
                    debug!("WebTransport peer asks to drain");
                    self.draining = true;
                }
                WtEvent::Accepted(_) | WtEvent::Refused { .. } => {}
            }
        }
    }

    /// Writes the WebTransport layer's own output (HTTP/3 streams, stream errors), and closes
    /// the connection once our close capsule is on the wire.
    pub(crate) fn write(&mut self, conn: &mut impl Transport) {
        write_webtransport_output(conn, &mut self.session, &mut self.h3);
        if let Some(sent) = self.closing {
            if conn.sent_units() > sent {
                let _ = conn.close(true, wt_code::H3_NO_ERROR, b"");
            }
        }
    }

    /// Ends the session with a capsule (MoQT's `code` and `reason`); the connection closes
    /// once it is on the wire.
    pub(crate) fn close(&mut self, conn: &impl Transport, code: u64, reason: &str) {
        self.session.close(u32::try_from(code).unwrap_or(u32::MAX), reason);
        self.closing = Some(conn.sent_units());
    }
}
