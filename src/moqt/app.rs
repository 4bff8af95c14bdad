//! [`MoqtApp`]: a session with a handler for its events, on QUIC or QMux (our client).

use std::time::Instant;

use runtime::{ConnApp, QuicConnection, Transport};
use session::Session;

use super::{Pump, RequestHandler};

/// One connection's MoQT session over quiche, with a handler for its events (our client).
pub struct MoqtApp<H> {
    session: Session,
    handler: H,
    pump: Pump,
    buf: Vec<u8>,
}

impl<H: RequestHandler> MoqtApp<H> {
    /// Glue for `session` (either role: the server's connections and our client use it).
    pub fn new(session: Session, handler: H) -> Self {
        Self::with_pump(session, handler, Pump::default())
    }

    /// Glue for `session` writing through `pump` (one over WebTransport, or with a backlog
    /// limit).
    pub fn with_pump(session: Session, handler: H, pump: Pump) -> Self {
        MoqtApp { session, handler, pump, buf: vec![0u8; 65_536] }
    }

    /// The MoQT session.
    pub fn session(&self) -> &Session {
        &self.session
    }

    /// The glue (its WebTransport state, backlog figures).
    pub fn pump(&self) -> &Pump {
        &self.pump
    }

    /// The glue, to configure or drive it (tests' hostile peers pause reading, queue raw bytes).
    pub fn pump_mut(&mut self) -> &mut Pump {
        &mut self.pump
    }

    /// The MoQT session, to act on it (publish, subscribe, answer).
    pub fn session_mut(&mut self) -> &mut Session {
        &mut self.session
    }

    /// What answers the peer's requests.
    pub fn handler(&self) -> &H {
        &self.handler
    }

    /// What answers the peer's requests, to act on it.
    pub fn handler_mut(&mut self) -> &mut H {
        &mut self.handler
    }

    /// Hands the next session event to the handler; false when there was none.
    fn handle_next_event(&mut self) -> bool {
        match self.session.poll_event() {
            Some(event) => {
                self.handler.on_event(&mut self.session, event);
                true
            }
            None => false,
        }
    }

    fn read(&mut self, conn: &mut impl Transport) {
        self.pump.read(conn, &mut self.session, &mut self.buf);
    }

    fn write(&mut self, conn: &mut impl Transport, now: Instant) {
        self.pump.write(conn, &mut self.session, now);
    }
}

impl<H: RequestHandler> ConnApp for MoqtApp<H> {
    fn set_setup_deadline(&mut self, at: Instant) {
        self.session.set_setup_deadline(at);
    }

    fn on_io(&mut self, conn: &mut QuicConnection) {
        self.io(conn);
    }

    fn on_stream_io(&mut self, conn: &mut qmux::Connection) {
        self.io(conn);
    }
}

impl<H: RequestHandler> MoqtApp<H> {
    /// Reads, hands every event to the handler, writes: over QUIC or QMux alike.
    fn io(&mut self, conn: &mut impl Transport) {
        let now = Instant::now();
        self.session.on_timeout(now);
        self.read(conn);
        loop {
            while self.handle_next_event() {}
            self.write(conn, now);
            // Writing can surface events (a STOP_SENDING seen by stream_send); stop when it
            // did not. Every round consumes queued work, so this ends.
            if !self.handle_next_event() {
                break;
            }
        }
    }
}
