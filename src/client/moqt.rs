//! A MoQT client session over [`QuicConn`]: the same sans-IO [`Session`] the server uses, the
//! same quiche glue ([`MoqtApp`]), driven synchronously for tests and the bench.
//!
//! Protocol logic that outlives one request (the publisher and subscriber of
//! [`super::publisher`] and [`super::subscriber`]) is a [`SessionCore`]: a state machine fed
//! every session event together with the session, so that it can answer at once.
//! [`MoqtClient::drive_core`] runs one over a connection; [`super::fleet::Fleet`] runs many.

use runtime::QuicConnection;
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::time::Instant;

use moqt::WebTransportConn;
use moqt::{webtransport_handshake, MoqtApp, Pump, RequestHandler};
use runtime::ConnApp;
use session::{Event, Session, SessionConfig};
use webtransport::{self, WebTransport};
use wire::model::{Message, Role, SetupOptions};
use wire::Version;

use super::quic::{ClientError, QuicConn};
use super::ws::WsConn;

/// A client-side MoQT state machine over a [`Session`]: it sees every event of the session
/// (with the session, to answer requests at once) and keeps its own state. Everything it does
/// goes through the session, so the same state machine runs over QUIC ([`MoqtClient`],
/// [`super::fleet::Fleet`]) and back to back against another session in tests.
pub trait SessionCore {
    /// One event of the session, in order. Answers go through `session`.
    fn on_event(&mut self, session: &mut Session, event: Event);
}

/// Where a request of ours (PUBLISH_NAMESPACE, PUBLISH, SUBSCRIBE, REQUEST_UPDATE) stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RequestState {
    /// Sent; no answer yet.
    Pending,
    /// REQUEST_OK, SUBSCRIBE_OK or PUBLISH_OK arrived.
    Accepted,
    /// REQUEST_ERROR arrived with this code and reason.
    Refused {
        /// The error code.
        code: u64,
        /// The reason phrase.
        reason: String,
    },
    /// The peer cancelled the request (draft-22: reset or STOP_SENDING of its stream;
    /// draft-16: PUBLISH_NAMESPACE_CANCEL).
    Cancelled,
}

impl RequestState {
    /// `Ok(true)` once accepted, `Ok(false)` while pending, the refusal as an error.
    pub fn outcome(&self) -> Result<bool, ClientError> {
        match self {
            RequestState::Pending => Ok(false),
            RequestState::Accepted => Ok(true),
            RequestState::Refused { code, reason } => {
                Err(ClientError::Refused { code: *code, reason: reason.clone() })
            }
            RequestState::Cancelled => {
                Err(ClientError::Refused { code: 0, reason: "cancelled by the peer".to_string() })
            }
        }
    }
}

/// Who started a subscription.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Origin {
    /// The subscriber, with SUBSCRIBE.
    Subscribe,
    /// The publisher, with PUBLISH.
    Publish,
}

/// One round of a connection's MoQT work: stream and datagram I/O through the glue, then every
/// session event to `core`, repeated until no event is left (so the core's answers are handed
/// to quiche). A session close is [`ClientError::Session`] (the core has seen the event).
pub(crate) fn service<C: SessionCore>(
    app: &mut MoqtApp<Collect>,
    conn: IoRef<'_>,
    core: &mut C,
) -> Result<(), ClientError> {
    let mut conn = conn;
    loop {
        conn.on_io(app);
        let events = std::mem::take(&mut app.handler_mut().events);
        if events.is_empty() {
            return Ok(());
        }
        for event in events {
            let closed = match &event {
                Event::Closed { code, reason } => Some((*code, reason.clone())),
                _ => None,
            };
            core.on_event(app.session_mut(), event);
            if let Some((code, reason)) = closed {
                return Err(ClientError::Session { code, reason });
            }
        }
    }
}

/// The connection a round of [`service`] works on: quiche's or QMux's.
pub(crate) enum IoRef<'a> {
    Quic(&'a mut QuicConnection),
    Ws(&'a mut qmux::Connection),
}

impl IoRef<'_> {
    /// The same connection, borrowed again (for a second round on it).
    pub(crate) fn again(&mut self) -> IoRef<'_> {
        match self {
            IoRef::Quic(q) => IoRef::Quic(q),
            IoRef::Ws(w) => IoRef::Ws(w),
        }
    }

    fn on_io(&mut self, app: &mut MoqtApp<Collect>) {
        match self {
            IoRef::Quic(c) => app.on_io(c),
            IoRef::Ws(c) => app.on_stream_io(c),
        }
    }
}

/// The connection under a [`MoqtClient`].
enum Conn {
    Quic(Box<QuicConn>),
    Ws(Box<WsConn>),
}

impl Conn {
    /// Drives the connection (see [`QuicConn::drive`], [`WsConn::drive`]); `step` gets its
    /// transport.
    fn drive(
        &mut self,
        deadline: Instant,
        mut step: impl FnMut(IoRef<'_>) -> Result<bool, ClientError>,
    ) -> Result<(), ClientError> {
        match self {
            Conn::Quic(c) => c.drive(deadline, |c| step(IoRef::Quic(c.conn_mut()))),
            Conn::Ws(c) => c.drive(deadline, |c| step(IoRef::Ws(c))),
        }
    }
}

/// Keeps every event for the caller.
#[derive(Debug, Default)]
pub struct Collect {
    /// The events, in order.
    pub events: Vec<Event>,
}

impl RequestHandler for Collect {
    fn on_event(&mut self, _session: &mut Session, event: Event) {
        self.events.push(event);
    }
}

/// Where a client connects: the relay's address, and the URL when MoQT does not run over raw
/// QUIC with the draft's ALPN (`None`): a WebTransport session (`https://host:port/path`), or
/// QMux over a WebSocket (`ws://` or `wss://host:port/path`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Relay {
    /// The relay's UDP (or TCP) address.
    pub addr: SocketAddr,
    /// The URL, when not raw QUIC.
    pub url: Option<String>,
    /// The congestion control of our QUIC connections to it (`None`: cubic); QMux over a
    /// WebSocket leaves it to TCP.
    pub congestion_control: Option<String>,
    /// Our QUIC connections acknowledge every this many packets (or after
    /// [`crate::quic::ACK_DELAY`]) instead of at every write (`None`: quiche's own, an ACK
    /// whenever something arrived).
    pub ack_every: Option<u32>,
}

impl From<SocketAddr> for Relay {
    fn from(addr: SocketAddr) -> Self {
        Relay { addr, url: None, congestion_control: None, ack_every: None }
    }
}

impl std::fmt::Display for Relay {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.url {
            Some(url) if url.starts_with("https://") => write!(f, "{url} (WebTransport)"),
            Some(url) => write!(f, "{url} (QMux over WebSocket)"),
            None => write!(f, "{}", self.addr),
        }
    }
}

impl Relay {
    /// The same relay, reached with congestion control `name` (cubic, reno, bbr2).
    pub fn with_congestion_control(mut self, name: &str) -> Self {
        self.congestion_control = Some(name.to_string());
        self
    }

    /// The same relay, our connections to it acknowledging every `n` packets (RFC 9000
    /// §13.2.2's recommendation is two) or after [`crate::quic::ACK_DELAY`].
    pub fn with_ack_every(mut self, n: u32) -> Self {
        self.ack_every = (n > 1).then_some(n);
        self
    }

    /// A QUIC client configuration offering `alpn`, with this relay's congestion control.
    pub(super) fn quic_config(&self, alpn: &str) -> Result<quiche::Config, ClientError> {
        let cc = self.congestion_control.as_deref().unwrap_or("cubic");
        Ok(runtime::tls::client_config_with(&[alpn], false, cc)?)
    }

    /// The same relay over WebTransport at `https://ADDR/path`.
    pub fn webtransport(addr: SocketAddr, path: &str) -> Self {
        Relay { addr, url: Some(format!("https://{addr}{path}")), congestion_control: None, ack_every: None }
    }

    /// The same relay over QMux over WebSocket at `ws://ADDR/path` (`wss://` with `tls`), on
    /// its TCP port of the same number.
    pub fn websocket(addr: SocketAddr, path: &str, tls: bool) -> Self {
        let scheme = if tls { "wss" } else { "ws" };
        Relay {
            addr,
            url: Some(format!("{scheme}://{addr}{path}")),
            congestion_control: None,
            ack_every: None,
        }
    }
}

/// A client's MoQT session on one connection (QUIC, or QMux over a WebSocket).
pub struct MoqtClient {
    conn: Conn,
    app: MoqtApp<Collect>,
}

impl MoqtClient {
    /// Connects with the ALPN of `version` (or over WebTransport, offering only `version`)
    /// and completes the QUIC handshake, the WebTransport CONNECT, and SETUP.
    pub fn connect(
        relay: impl Into<Relay>,
        version: Version,
        setup: SetupOptions,
        deadline: Instant,
    ) -> Result<MoqtClient, ClientError> {
        let relay = relay.into();
        match &relay.url {
            None => {
                let mut conn = QuicConn::connect_with(relay.addr, &mut relay.quic_config(version.alpn())?)?;
                conn.set_ack_every(relay.ack_every);
                Self::setup(conn, version, setup, deadline)
            }
            Some(url) if url.starts_with("https://") => {
                let mut conn =
                    QuicConn::connect_with(relay.addr, &mut relay.quic_config(webtransport::ALPN)?)?;
                conn.set_ack_every(relay.ack_every);
                Self::setup_webtransport(conn, url, version, setup, deadline)
            }
            Some(url) => Self::setup_websocket(relay.addr, url, version, setup, deadline),
        }
    }

    /// The WebSocket upgrade to `url` offering `version`'s protocol over QMux, then SETUP. A
    /// refusal is [`ClientError::Refused`] with the HTTP status as its code.
    fn setup_websocket(
        addr: SocketAddr,
        url: &str,
        version: Version,
        setup: SetupOptions,
        deadline: Instant,
    ) -> Result<MoqtClient, ClientError> {
        let ws = WsConn::connect(addr, url, &[version.alpn()], deadline)?;
        let session = Session::new(version, Role::Client, SessionConfig::default(), setup);
        let mut client =
            MoqtClient { conn: Conn::Ws(Box::new(ws)), app: MoqtApp::new(session, Collect::default()) };
        client.until(deadline, |e| matches!(e, Event::Ready { .. }))?;
        Ok(client)
    }

    /// The WebTransport CONNECT to `url` offering `version`'s protocol, then SETUP inside the
    /// session. A refusal is [`ClientError::Refused`] with the HTTP status as its code.
    fn setup_webtransport(
        mut conn: QuicConn,
        url: &str,
        version: Version,
        setup: SetupOptions,
        deadline: Instant,
    ) -> Result<MoqtClient, ClientError> {
        conn.handshake(deadline)?;
        let protocols = [version.alpn().to_string()];
        let mut wt = WebTransport::client(url, &protocols, webtransport::Limits::default())
            .map_err(|e| ClientError::Refused { code: 0, reason: e })?;
        let mut h3 = VecDeque::new();
        let mut buf = vec![0u8; 65_536];
        conn.drive(deadline, |c| {
            webtransport_handshake(c.conn_mut(), &mut wt, &mut h3, &mut buf);
            Ok(wt.accepted().is_some() || wt.is_closed())
        })?;
        while let Some(event) = wt.poll_event() {
            if let webtransport::Event::Refused { status } = event {
                let reason = format!("WebTransport CONNECT answered {status}");
                return Err(ClientError::Refused { code: u64::from(status), reason });
            }
        }
        let accepted = wt.accepted().ok_or(ClientError::Closed)?;
        let version =
            Version::from_alpn(accepted.protocol.as_bytes()).ok_or_else(|| ClientError::Refused {
                code: 0,
                reason: format!("the server chose WT-Protocol {:?}", accepted.protocol),
            })?;
        let session = Session::new(version, Role::Client, SessionConfig::default(), setup);
        let pump = Pump::default().with_webtransport(WebTransportConn { wt, h3 });
        let mut client = MoqtClient {
            conn: Conn::Quic(Box::new(conn)),
            app: MoqtApp::with_pump(session, Collect::default(), pump),
        };
        client.until(deadline, |e| matches!(e, Event::Ready { .. }))?;
        Ok(client)
    }

    /// Like [`MoqtClient::connect`] with the caller's quiche configuration (one configuration
    /// for many connections; it must offer the ALPN of `version`).
    pub fn connect_with(
        peer: std::net::SocketAddr,
        config: &mut quiche::Config,
        version: Version,
        setup: SetupOptions,
        deadline: Instant,
    ) -> Result<MoqtClient, ClientError> {
        let conn = QuicConn::connect_with(peer, config)?;
        Self::setup(conn, version, setup, deadline)
    }

    fn setup(
        mut conn: QuicConn,
        version: Version,
        setup: SetupOptions,
        deadline: Instant,
    ) -> Result<MoqtClient, ClientError> {
        conn.handshake(deadline)?;
        let session = Session::new(version, Role::Client, SessionConfig::default(), setup);
        let mut client =
            MoqtClient { conn: Conn::Quic(Box::new(conn)), app: MoqtApp::new(session, Collect::default()) };
        client.until(deadline, |e| matches!(e, Event::Ready { .. }))?;
        Ok(client)
    }

    /// The MoQT session.
    pub fn session(&self) -> &Session {
        self.app.session()
    }

    /// Whether the relay asked to drain the WebTransport session this client runs in
    /// (DRAIN_WEBTRANSPORT_SESSION, sent beside MoQT's GOAWAY); false over raw QUIC.
    pub fn webtransport_draining(&self) -> bool {
        self.app.pump().webtransport_draining()
    }

    /// The MoQT session, to act on it.
    pub fn session_mut(&mut self) -> &mut Session {
        self.app.session_mut()
    }

    /// The glue between the session and the connection: its queues, and what the tests'
    /// hostile peers do below the session ([`Pump::pause_reading`], [`Pump::queue_raw`]).
    pub fn pump_mut(&mut self) -> &mut Pump {
        self.app.pump_mut()
    }

    /// The QUIC connection (none over a WebSocket).
    pub fn quic(&self) -> Option<&QuicConn> {
        match &self.conn {
            Conn::Quic(c) => Some(c),
            Conn::Ws(_) => None,
        }
    }

    /// The connection and the glue, for driving several clients with [`super::drive_many`]
    /// (see [`super::fleet::Fleet`]); the client itself back when it runs over a WebSocket.
    pub fn into_parts(self) -> Result<(QuicConn, MoqtApp<Collect>), Box<MoqtClient>> {
        match self.conn {
            Conn::Quic(c) => Ok((*c, self.app)),
            conn => Err(Box::new(MoqtClient { conn, app: self.app })),
        }
    }

    /// Reassembles a client from [`MoqtClient::into_parts`].
    pub fn from_parts(conn: QuicConn, app: MoqtApp<Collect>) -> MoqtClient {
        MoqtClient { conn: Conn::Quic(Box::new(conn)), app }
    }

    /// Drives the connection with `core` seeing every session event, until `done` returns
    /// `true` (it runs after each round of I/O and events, and may act on the session: what
    /// it queues is written out before the driver waits again), the session or connection
    /// closes (an error), or `deadline` passes ([`ClientError::Deadline`]). Events already
    /// collected (by [`MoqtClient::until`]) go to `core` first. `done` runs when this
    /// connection had I/O or a timer fired, not when state outside it changed.
    pub fn drive_core<C: SessionCore>(
        &mut self,
        core: &mut C,
        deadline: Instant,
        mut done: impl FnMut(&mut C, &mut Session) -> Result<bool, ClientError>,
    ) -> Result<(), ClientError> {
        let app = &mut self.app;
        let driven = self.conn.drive(deadline, |mut c| {
            service(app, c.again(), core)?;
            let finished = done(core, app.session_mut())?;
            service(app, c, core)?;
            Ok(finished)
        });
        driven.map_err(|e| self.session_closed(e))
    }

    /// A connection closed because the WebTransport peer closed the session is that close:
    /// [`ClientError::Session`] with its code (the connection itself closed with H3_NO_ERROR).
    fn session_closed(&self, e: ClientError) -> ClientError {
        match self.app.pump().webtransport_peer_close() {
            Some((code, reason)) if !matches!(e, ClientError::Deadline) => {
                ClientError::Session { code: *code, reason: reason.clone() }
            }
            _ => e,
        }
    }

    /// Hands what the session has queued to quiche and sends it, without waiting; events that
    /// arrived meanwhile go to `core`.
    pub fn flush_core<C: SessionCore>(&mut self, core: &mut C) -> Result<(), ClientError> {
        self.drive_core(core, Instant::now() + std::time::Duration::from_secs(3600), |_, _| Ok(true))
    }

    /// Drives the connection until an event matching `want` arrives, and returns it (events
    /// before it are dropped; those after it stay collected). A session close is an error.
    pub fn until(
        &mut self,
        deadline: Instant,
        mut want: impl FnMut(&Event) -> bool,
    ) -> Result<Event, ClientError> {
        let mut found = None;
        let app = &mut self.app;
        let driven = self.conn.drive(deadline, |mut c| {
            c.on_io(app);
            let events = std::mem::take(&mut app.handler_mut().events);
            let mut rest = events.into_iter();
            for event in rest.by_ref() {
                if want(&event) {
                    found = Some(event);
                    break;
                } else if let Event::Closed { code, reason } = event {
                    return Err(ClientError::Session { code, reason });
                }
            }
            app.handler_mut().events.extend(rest);
            Ok(found.is_some())
        });
        driven.map_err(|e| self.session_closed(e))?;
        found.ok_or(ClientError::Deadline)
    }

    /// Sends CONNECTION_CLOSE (application error 0) without waiting for the peer.
    pub fn close(&mut self) -> Result<(), ClientError> {
        match &mut self.conn {
            Conn::Quic(c) => c.close(),
            Conn::Ws(c) => c.close(),
        }
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

/// A [`SessionCore`] on its own QUIC connection: [`super::Publisher`] and
/// [`super::Subscriber`] are this with their cores. What the core queues is handed to QUIC
/// whenever the connection is driven ([`Driven::pump`], or any waiting method).
pub struct Driven<C> {
    pub(super) client: MoqtClient,
    pub(super) core: C,
}

impl<C: SessionCore + Default> Driven<C> {
    /// A new core on an established MoQT session.
    pub fn new(client: MoqtClient) -> Self {
        Driven { client, core: C::default() }
    }

    /// Connects to `relay` (QUIC handshake, WebTransport CONNECT when asked, and SETUP)
    /// speaking `version`.
    pub fn connect(
        relay: impl Into<Relay>,
        version: Version,
        deadline: Instant,
    ) -> Result<Self, ClientError> {
        Self::connect_setup(relay, version, SetupOptions::default(), deadline)
    }

    /// Like [`Driven::connect`], with `setup`'s options (an authorization token) in SETUP.
    pub fn connect_setup(
        relay: impl Into<Relay>,
        version: Version,
        setup: SetupOptions,
        deadline: Instant,
    ) -> Result<Self, ClientError> {
        Ok(Self::new(MoqtClient::connect(relay, version, setup, deadline)?))
    }
}

impl<C: SessionCore> Driven<C> {
    /// The state machine.
    pub fn core(&self) -> &C {
        &self.core
    }

    /// The state machine, to act on it.
    pub fn core_mut(&mut self) -> &mut C {
        &mut self.core
    }

    /// The connection under it.
    pub fn client_mut(&mut self) -> &mut MoqtClient {
        &mut self.client
    }

    /// Serves the connection until `deadline`.
    pub fn pump(&mut self, deadline: Instant) -> Result<(), ClientError> {
        match self.pump_until(deadline, |_| false) {
            Err(ClientError::Deadline) => Ok(()),
            other => other,
        }
    }

    /// Serves the connection until `cond` holds ([`ClientError::Deadline`] if it does not by
    /// `deadline`).
    pub fn pump_until(
        &mut self,
        deadline: Instant,
        mut cond: impl FnMut(&C) -> bool,
    ) -> Result<(), ClientError> {
        self.client.drive_core(&mut self.core, deadline, |core, _| Ok(cond(core)))
    }

    /// Hands what the core queued to QUIC and sends it, without waiting.
    pub fn flush(&mut self) -> Result<(), ClientError> {
        self.client.flush_core(&mut self.core)
    }

    /// Closes the connection (CONNECTION_CLOSE, no wait).
    pub fn close(&mut self) -> Result<(), ClientError> {
        self.client.close()
    }
}
