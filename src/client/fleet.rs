//! Many MoQT client connections driven from one thread: a [`Fleet`] holds one connection (QUIC,
//! or QMux over a WebSocket), one session and one [`SessionCore`] per member, and runs them
//! all with [`drive_many`] or [`super::ws::drive_many`] (one `poll(2)` over every socket). A fleet of [`SubscriberCore`]s is the load
//! generator for relay tests (say 50 subscribers of one track); [`Endpoint`] lets publishers
//! and subscribers share one fleet, so that a whole scenario runs on one thread.
//!
//! Two things to know when writing a scenario:
//! - Only the fleet's members are driven while it runs. A relay answers a SUBSCRIBE only
//!   after its upstream publisher did, so a [`super::Publisher`] on the same thread but
//!   outside the fleet stalls [`Fleet::subscribe_all`]: put the publisher in the fleet
//!   ([`Endpoint`]) or on its own thread.
//! - Like [`drive_many`], a member's `step` runs when that member had I/O (or a QUIC timer
//!   fired), not when something outside changed; a condition on outside state (another
//!   thread, another connection) is seen on that member's next packet. Use short deadlines
//!   in a loop for such waits.

use std::time::{Duration, Instant};

use super::drive::Polled;
use super::moqt::{service, Collect, IoRef, SessionCore};
use super::publisher::PublisherCore;
use super::quic::{ClientError, QuicConn, BUF_LEN};
use super::subscriber::SubscriberCore;
use super::ws::WsConn;
use moqt::MoqtApp;
use session::{Event, Session, SessionConfig};
use wire::model::{FullTrackName, LocationFilter, RequestId, Role, SetupOptions};
use wire::Version;

/// A member's connection: QUIC (raw or WebTransport), QMux over a WebSocket, or none once it
/// has been retired ([`Fleet::retire`]).
enum Link {
    Quic(Box<QuicConn>),
    Ws(Box<WsConn>),
    Gone,
}

impl Polled for Link {
    fn close_error(&self) -> Option<ClientError> {
        match self {
            Link::Quic(c) => Polled::close_error(c.as_ref()),
            Link::Ws(c) => Polled::close_error(c.as_ref()),
            Link::Gone => None,
        }
    }

    fn send(&mut self, buf: &mut [u8]) -> Result<(), ClientError> {
        match self {
            Link::Quic(c) => Polled::send(c.as_mut(), buf),
            Link::Ws(c) => Polled::send(c.as_mut(), buf),
            Link::Gone => Ok(()),
        }
    }

    fn timeout(&self) -> Option<Instant> {
        match self {
            Link::Quic(c) => Polled::timeout(c.as_ref()),
            Link::Ws(c) => Polled::timeout(c.as_ref()),
            Link::Gone => None,
        }
    }

    fn sockets(&self, out: &mut Vec<std::os::fd::RawFd>) {
        match self {
            Link::Quic(c) => Polled::sockets(c.as_ref(), out),
            Link::Ws(c) => Polled::sockets(c.as_ref(), out),
            Link::Gone => {}
        }
    }

    fn receive(&mut self, k: usize, buf: &mut [u8]) -> Result<(), ClientError> {
        match self {
            Link::Quic(c) => Polled::receive(c.as_mut(), k, buf),
            Link::Ws(c) => Polled::receive(c.as_mut(), k, buf),
            Link::Gone => Ok(()),
        }
    }

    fn on_timer(&mut self, now: Instant) -> bool {
        match self {
            Link::Quic(c) => Polled::on_timer(c.as_mut(), now),
            Link::Ws(c) => Polled::on_timer(c.as_mut(), now),
            Link::Gone => false,
        }
    }

    fn buffered(&self) -> bool {
        match self {
            Link::Ws(c) => Polled::buffered(c.as_ref()),
            _ => false,
        }
    }
}

/// Client connections, each with its session and state machine, driven together. Members
/// may differ in transport and draft ([`Fleet::open`]).
pub struct Fleet<C> {
    links: Vec<Link>,
    apps: Vec<MoqtApp<Collect>>,
    cores: Vec<C>,
    /// Members that no longer read their streams ([`Fleet::stall`]).
    stalled: Vec<bool>,
    /// Why a member's connection closed, for a lenient fleet ([`Fleet::lenient`]).
    closed: Vec<Option<ClientError>>,
    lenient: bool,
    /// QUIC configurations of [`Fleet::open`], one per (peer, draft).
    configs: Vec<(std::net::SocketAddr, Version, quiche::Config)>,
    /// Scratch space for datagrams.
    buf: Vec<u8>,
}

impl<C: SessionCore> Fleet<C> {
    /// A fleet of no member yet, to [`Fleet::open`] members into.
    pub fn new() -> Self {
        Fleet {
            links: Vec::new(),
            apps: Vec::new(),
            cores: Vec::new(),
            stalled: Vec::new(),
            closed: Vec::new(),
            lenient: false,
            configs: Vec::new(),
            buf: vec![0u8; BUF_LEN],
        }
    }

    fn push(&mut self, link: Link, app: MoqtApp<Collect>, core: C) -> usize {
        self.links.push(link);
        self.apps.push(app);
        self.cores.push(core);
        self.stalled.push(false);
        self.closed.push(None);
        self.cores.len() - 1
    }

    /// Opens one connection per core to `peer` (one quiche configuration for all, the ALPN of
    /// `version`, certificates not verified) and drives them all through the QUIC handshake
    /// and SETUP.
    pub fn connect(
        relay: impl Into<super::Relay>,
        version: Version,
        cores: Vec<C>,
        deadline: Instant,
    ) -> Result<Self, ClientError> {
        let relay = relay.into();
        let mut fleet = Fleet::new();
        for core in cores {
            fleet.open(&relay, version, core, deadline)?;
        }
        fleet.drive(deadline, |_, _, s| Ok(s.is_ready()))?;
        Ok(fleet)
    }

    /// Adds a member: a connection to `relay` in draft `version` with `core`, returning its
    /// index. Over raw QUIC this only starts the handshake (the member's session sets up as
    /// the fleet is driven: see [`Fleet::is_ready`]); over WebTransport the QUIC handshake and
    /// the CONNECT, and over a WebSocket the TCP connection and the upgrade, are made before it
    /// returns (by `deadline`).
    pub fn open(
        &mut self,
        relay: &super::Relay,
        version: Version,
        core: C,
        deadline: Instant,
    ) -> Result<usize, ClientError> {
        let session =
            || Session::new(version, Role::Client, SessionConfig::default(), SetupOptions::default());
        match relay.url.as_deref() {
            Some(url) if url.starts_with("https://") => {
                let client =
                    super::MoqtClient::connect(relay.clone(), version, SetupOptions::default(), deadline)?;
                let (conn, app) = client.into_parts().map_err(|_| ClientError::Closed)?;
                Ok(self.push(Link::Quic(Box::new(conn)), app, core))
            }
            Some(url) => {
                let conn = WsConn::connect(relay.addr, url, &[version.alpn()], deadline)?;
                Ok(self.push(Link::Ws(Box::new(conn)), MoqtApp::new(session(), Collect::default()), core))
            }
            None => {
                let at = match self.configs.iter().position(|(a, v, _)| *a == relay.addr && *v == version) {
                    Some(at) => at,
                    None => {
                        self.configs.push((relay.addr, version, relay.quic_config(version.alpn())?));
                        self.configs.len() - 1
                    }
                };
                let mut conn = QuicConn::connect_with(relay.addr, &mut self.configs[at].2)?;
                conn.set_ack_every(relay.ack_every);
                Ok(self.push(Link::Quic(Box::new(conn)), MoqtApp::new(session(), Collect::default()), core))
            }
        }
    }

    /// From now on a member whose connection or session closes does not fail
    /// [`Fleet::drive`]: it is left out of it, and [`Fleet::closed`] says why. For load
    /// generators, where a refused or dropped member is counted, not fatal.
    pub fn lenient(&mut self) {
        self.lenient = true;
    }

    /// Why member `i`'s connection closed (a lenient fleet's, or one retired).
    pub fn closed(&self, i: usize) -> Option<&ClientError> {
        self.closed.get(i).and_then(Option::as_ref)
    }

    /// Member `i`'s session has completed SETUP (and its connection is still open).
    pub fn is_ready(&self, i: usize) -> bool {
        self.closed(i).is_none() && self.apps.get(i).is_some_and(|a| a.session().is_ready())
    }

    /// Closes member `i`'s connection (CONNECTION_CLOSE, or a WebSocket Close, no wait) and
    /// lets its socket go; its core stays, to be read.
    pub fn retire(&mut self, i: usize) -> Result<(), ClientError> {
        let Some(link) = self.links.get_mut(i) else { return Ok(()) };
        let result = match link {
            Link::Quic(c) => c.close(),
            Link::Ws(c) => c.close(),
            Link::Gone => Ok(()),
        };
        *link = Link::Gone;
        if self.closed[i].is_none() {
            self.closed[i] = Some(ClientError::Closed);
        }
        result
    }

    /// How many connections.
    pub fn len(&self) -> usize {
        self.cores.len()
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.cores.is_empty()
    }

    /// Connection `i`'s state machine.
    pub fn core(&self, i: usize) -> Option<&C> {
        self.cores.get(i)
    }

    /// Connection `i`'s state machine, to act on it.
    pub fn core_mut(&mut self, i: usize) -> Option<&mut C> {
        self.cores.get_mut(i)
    }

    /// Every connection's state machine.
    pub fn cores(&self) -> &[C] {
        &self.cores
    }

    /// Connection `i`'s MoQT session.
    pub fn session(&self, i: usize) -> Option<&Session> {
        self.apps.get(i).map(|a| a.session())
    }

    /// Runs `f` on member `i`'s state machine and session (to subscribe, send, ...). What it
    /// queues goes out on the next drive (or [`Fleet::flush`]).
    pub fn with<R>(&mut self, i: usize, f: impl FnOnce(&mut C, &mut Session) -> R) -> Option<R> {
        let (app, core) = (self.apps.get_mut(i)?, self.cores.get_mut(i)?);
        Some(f(core, app.session_mut()))
    }

    /// Member `i` stops reading: from now on its session is never serviced (no `stream_recv`,
    /// so no flow-control credit goes back to the peer) and its `step` never runs; QUIC still
    /// acknowledges its packets and answers its timers. A stalled member counts as done in
    /// [`Fleet::drive`]. For the load generator's stalled-subscriber runs.
    pub fn stall(&mut self, i: usize) {
        if let Some(s) = self.stalled.get_mut(i) {
            *s = true;
        }
    }

    /// Drives every connection until `step(i, core, session)` has returned `true` once for
    /// each member. `step` runs after each round of I/O and events of a member not done yet
    /// (it may act: what it queues is written out at once). A member whose session or
    /// connection closes fails the call ([`ClientError::Conn`] names it), as does `deadline`
    /// ([`ClientError::Deadline`]); in a lenient fleet it is left out instead.
    pub fn drive(
        &mut self,
        deadline: Instant,
        mut step: impl FnMut(usize, &mut C, &mut Session) -> Result<bool, ClientError>,
    ) -> Result<(), ClientError> {
        let Fleet { links, apps, cores, stalled, closed, lenient, buf, .. } = self;
        let lenient = *lenient;
        super::drive::drive(links, deadline, buf, |i, link| {
            if stalled[i] || closed[i].is_some() {
                return Ok(true);
            }
            let (Some(app), Some(core)) = (apps.get_mut(i), cores.get_mut(i)) else { return Ok(true) };
            let io = match link {
                Link::Quic(c) if !c.conn().is_established() => match c.close_error() {
                    Some(e) if lenient => {
                        closed[i] = Some(e);
                        return Ok(true);
                    }
                    _ => return Ok(false),
                },
                Link::Quic(c) => IoRef::Quic(c.conn_mut()),
                Link::Ws(c) => IoRef::Ws(&mut c.qmux),
                Link::Gone => return Ok(true),
            };
            let mut io = io;
            let run = (|| -> Result<bool, ClientError> {
                service(app, io.again(), core)?;
                let done = step(i, core, app.session_mut())?;
                service(app, io, core)?;
                Ok(done)
            })();
            match run {
                Err(e) if lenient => {
                    closed[i] = Some(e);
                    Ok(true)
                }
                Ok(false) if lenient && link.close_error().is_some() => {
                    closed[i] = link.close_error();
                    Ok(true)
                }
                other => other,
            }
        })
    }

    /// Drives until `cond(i, core)` holds for every member.
    pub fn drive_until(
        &mut self,
        deadline: Instant,
        mut cond: impl FnMut(usize, &C) -> bool,
    ) -> Result<(), ClientError> {
        self.drive(deadline, |i, core, _| Ok(cond(i, core)))
    }

    /// Serves every connection until `deadline`.
    pub fn pump(&mut self, deadline: Instant) -> Result<(), ClientError> {
        self.pump_with(deadline, |_, _| {})
    }

    /// Serves every connection until `deadline`, calling `on_io(i, core)` after each round
    /// of I/O and events of member `i` (to take what it received as it arrives).
    pub fn pump_with(
        &mut self,
        deadline: Instant,
        mut on_io: impl FnMut(usize, &mut C),
    ) -> Result<(), ClientError> {
        let step = |i, core: &mut C, _: &mut Session| {
            on_io(i, core);
            Ok(false)
        };
        match self.drive(deadline, step) {
            Err(ClientError::Deadline) => Ok(()),
            other => other,
        }
    }

    /// Hands what every session has queued to QUIC and sends it, without waiting.
    pub fn flush(&mut self) -> Result<(), ClientError> {
        self.drive(Instant::now() + Duration::from_secs(3600), |_, _, _| Ok(true))
    }

    /// Closes every connection (CONNECTION_CLOSE, no wait).
    pub fn close(&mut self) -> Result<(), ClientError> {
        self.links.iter_mut().try_for_each(|l| match l {
            Link::Quic(c) => c.close(),
            Link::Ws(c) => c.close(),
            Link::Gone => Ok(()),
        })
    }
}

impl<C: SessionCore> Default for Fleet<C> {
    fn default() -> Self {
        Fleet::new()
    }
}

impl Fleet<SubscriberCore> {
    /// `n` subscriber connections to `peer`, set up.
    pub fn subscribers(
        peer: impl Into<super::Relay>,
        version: Version,
        n: usize,
        deadline: Instant,
    ) -> Result<Self, ClientError> {
        Self::connect(peer, version, (0..n).map(|_| SubscriberCore::new()).collect(), deadline)
    }

    /// Every member subscribes to `track` (FORWARD=1, `filter`); waits for every answer.
    /// Returns each member's Request ID; a REQUEST_ERROR fails the call with the member's
    /// index ([`ClientError::Conn`] around [`ClientError::Refused`]).
    pub fn subscribe_all(
        &mut self,
        track: &FullTrackName,
        filter: Option<LocationFilter>,
        deadline: Instant,
    ) -> Result<Vec<RequestId>, ClientError> {
        let mut ids = Vec::with_capacity(self.len());
        for i in 0..self.len() {
            let id = self.with(i, |core, s| core.subscribe(s, track.clone(), filter));
            ids.push(id.ok_or(ClientError::Closed)??);
        }
        self.drive(deadline, |i, core, _| {
            let Some(&id) = ids.get(i) else { return Ok(true) };
            core.subscription(id).map_or(Ok(true), |s| s.state.outcome())
        })?;
        Ok(ids)
    }

    /// Objects received per member for the subscriptions `ids` (as returned by
    /// [`Fleet::subscribe_all`]).
    pub fn received_counts(&self, ids: &[RequestId]) -> Vec<usize> {
        self.cores.iter().zip(ids).map(|(c, id)| c.received(*id).len()).collect()
    }
}

/// A publisher or a subscriber, to mix both in one [`Fleet`].
#[derive(Debug)]
pub enum Endpoint {
    /// A publisher.
    Publisher(PublisherCore),
    /// A subscriber.
    Subscriber(SubscriberCore),
}

impl Endpoint {
    /// The publisher, if it is one.
    pub fn publisher(&self) -> Option<&PublisherCore> {
        match self {
            Endpoint::Publisher(p) => Some(p),
            Endpoint::Subscriber(_) => None,
        }
    }

    /// The publisher, if it is one, to act on it.
    pub fn publisher_mut(&mut self) -> Option<&mut PublisherCore> {
        match self {
            Endpoint::Publisher(p) => Some(p),
            Endpoint::Subscriber(_) => None,
        }
    }

    /// The subscriber, if it is one.
    pub fn subscriber(&self) -> Option<&SubscriberCore> {
        match self {
            Endpoint::Subscriber(s) => Some(s),
            Endpoint::Publisher(_) => None,
        }
    }

    /// The subscriber, if it is one, to act on it.
    pub fn subscriber_mut(&mut self) -> Option<&mut SubscriberCore> {
        match self {
            Endpoint::Subscriber(s) => Some(s),
            Endpoint::Publisher(_) => None,
        }
    }
}

impl SessionCore for Endpoint {
    fn on_event(&mut self, session: &mut Session, event: Event) {
        match self {
            Endpoint::Publisher(p) => p.on_event(session, event),
            Endpoint::Subscriber(s) => s.on_event(session, event),
        }
    }
}
