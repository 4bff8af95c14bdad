//! A MoQT client session over [`QuicConn`]: the same sans-IO [`Session`] the server uses, the
//! same quiche glue ([`MoqtApp`]), driven synchronously for tests and the bench.

use std::time::Instant;

use crate::runtime::moqt::{MoqtApp, RequestHandler};
use crate::runtime::ConnApp;
use crate::session::{Event, Session, SessionConfig};
use crate::wire::model::{Message, Role, SetupOptions};
use crate::wire::Version;

use super::quic::{ClientError, QuicConn};

/// Keeps every event for the caller.
#[derive(Debug, Default)]
pub struct Collect {
    pub events: Vec<Event>,
}

impl RequestHandler for Collect {
    fn on_event(&mut self, _session: &mut Session, event: Event) {
        self.events.push(event);
    }
}

/// A client's MoQT session on one QUIC connection.
pub struct MoqtClient {
    conn: QuicConn,
    app: MoqtApp<Collect>,
}

impl MoqtClient {
    /// Connects with the ALPN of `version` and completes the QUIC handshake and SETUP.
    pub fn connect(
        peer: std::net::SocketAddr,
        version: Version,
        setup: SetupOptions,
        deadline: Instant,
    ) -> Result<MoqtClient, ClientError> {
        let mut conn = QuicConn::connect(peer, version.alpn())?;
        conn.handshake(deadline)?;
        let session = Session::new(version, Role::Client, SessionConfig::default(), setup);
        let mut client = MoqtClient { conn, app: MoqtApp::new(session, Collect::default()) };
        client.until(deadline, |e| matches!(e, Event::Ready { .. }))?;
        Ok(client)
    }

    pub fn session_mut(&mut self) -> &mut Session {
        self.app.session_mut()
    }

    /// Drives the connection until an event matching `want` arrives, and returns it (events
    /// before it are dropped). A session close is an error.
    pub fn until(
        &mut self,
        deadline: Instant,
        mut want: impl FnMut(&Event) -> bool,
    ) -> Result<Event, ClientError> {
        let mut found = None;
        let app = &mut self.app;
        self.conn.drive(deadline, |c| {
            app.on_io(c.conn_mut());
            for event in app.handler_mut().events.drain(..) {
                if found.is_none() && want(&event) {
                    found = Some(event);
                } else if let Event::Closed { code, reason } = event {
                    return Err(ClientError::Session { code, reason });
                }
            }
            Ok(found.is_some())
        })?;
        found.ok_or(ClientError::Deadline)
    }

    /// Sends `msg` and waits for the first control message from the peer.
    pub fn request(&mut self, msg: Message, deadline: Instant) -> Result<Message, ClientError> {
        self.app
            .session_mut()
            .send(msg)
            .map_err(|e| ClientError::Session { code: 0, reason: e.to_string() })?;
        match self.until(deadline, |e| matches!(e, Event::Message(_)))? {
            Event::Message(m) => Ok(m),
            _ => Err(ClientError::Deadline),
        }
    }
}
