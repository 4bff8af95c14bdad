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

use super::moqt::{service, Collect, IoRef, SessionCore};
use super::publisher::PublisherCore;
use super::quic::{drive_many, ClientError, QuicConn};
use super::subscriber::SubscriberCore;
use super::ws::WsConn;
use moqt::MoqtApp;
use session::{Event, Session, SessionConfig};
use wire::model::{FullTrackName, LocationFilter, RequestId, Role, SetupOptions};
use wire::Version;

/// The members' connections: all QUIC, or all QMux over WebSockets.
enum Conns {
    Quic(Vec<QuicConn>),
    Ws(Vec<WsConn>),
}

/// Client connections, each with its session and state machine, driven together.
pub struct Fleet<C> {
    conns: Conns,
    apps: Vec<MoqtApp<Collect>>,
    cores: Vec<C>,
    /// Members that no longer read their streams ([`Fleet::stall`]).
    stalled: Vec<bool>,
}

impl<C: SessionCore> Fleet<C> {
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
        if let Some(url) = relay.url.as_deref().filter(|u| !u.starts_with("https://")) {
            // Over WebSockets each member's upgrade precedes its session, one after the other.
            let mut conns = Vec::with_capacity(cores.len());
            let mut apps = Vec::with_capacity(cores.len());
            for _ in &cores {
                conns.push(WsConn::connect(relay.addr, url, &[version.alpn()], deadline)?);
                let session =
                    Session::new(version, Role::Client, SessionConfig::default(), SetupOptions::default());
                apps.push(MoqtApp::new(session, Collect::default()));
            }
            let stalled = vec![false; cores.len()];
            let mut fleet = Fleet { conns: Conns::Ws(conns), apps, cores, stalled };
            fleet.drive(deadline, |_, _, s| Ok(s.is_ready()))?;
            return Ok(fleet);
        }
        if relay.url.is_some() {
            // Over WebTransport each member's CONNECT precedes its session: they connect one
            // after the other.
            let (mut conns, mut apps) = (Vec::with_capacity(cores.len()), Vec::with_capacity(cores.len()));
            for _ in &cores {
                let client =
                    super::MoqtClient::connect(relay.clone(), version, SetupOptions::default(), deadline)?;
                let (conn, app) = client.into_parts().map_err(|_| ClientError::Closed)?;
                conns.push(conn);
                apps.push(app);
            }
            let stalled = vec![false; cores.len()];
            return Ok(Fleet { conns: Conns::Quic(conns), apps, cores, stalled });
        }
        let peer = relay.addr;
        let mut config = relay.quic_config(version.alpn())?;
        let mut conns = Vec::with_capacity(cores.len());
        let mut apps = Vec::with_capacity(cores.len());
        for _ in &cores {
            let mut conn = QuicConn::connect_with(peer, &mut config)?;
            conn.set_ack_every(relay.ack_every);
            conns.push(conn);
            let session =
                Session::new(version, Role::Client, SessionConfig::default(), SetupOptions::default());
            apps.push(MoqtApp::new(session, Collect::default()));
        }
        let stalled = vec![false; cores.len()];
        let mut fleet = Fleet { conns: Conns::Quic(conns), apps, cores, stalled };
        fleet.drive(deadline, |_, _, s| Ok(s.is_ready()))?;
        Ok(fleet)
    }

    pub fn len(&self) -> usize {
        self.cores.len()
    }

    pub fn is_empty(&self) -> bool {
        self.cores.is_empty()
    }

    pub fn core(&self, i: usize) -> Option<&C> {
        self.cores.get(i)
    }

    pub fn core_mut(&mut self, i: usize) -> Option<&mut C> {
        self.cores.get_mut(i)
    }

    pub fn cores(&self) -> &[C] {
        &self.cores
    }

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
    /// ([`ClientError::Deadline`]).
    pub fn drive(
        &mut self,
        deadline: Instant,
        mut step: impl FnMut(usize, &mut C, &mut Session) -> Result<bool, ClientError>,
    ) -> Result<(), ClientError> {
        let Fleet { conns, apps, cores, stalled } = self;
        let mut member = |i: usize, mut io: IoRef<'_>| {
            if stalled.get(i).copied().unwrap_or(false) {
                return Ok(true);
            }
            let (Some(app), Some(core)) = (apps.get_mut(i), cores.get_mut(i)) else { return Ok(true) };
            service(app, io.again(), core)?;
            let done = step(i, core, app.session_mut())?;
            service(app, io, core)?;
            Ok(done)
        };
        match conns {
            Conns::Quic(conns) => drive_many(conns, deadline, |i, c| {
                if !c.conn().is_established() {
                    return Ok(false);
                }
                member(i, IoRef::Quic(c.conn_mut()))
            }),
            Conns::Ws(conns) => super::ws::drive_many(conns, deadline, |i, c| member(i, IoRef::Ws(c))),
        }
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
        match &mut self.conns {
            Conns::Quic(conns) => conns.iter_mut().try_for_each(QuicConn::close),
            Conns::Ws(conns) => conns.iter_mut().try_for_each(WsConn::close),
        }
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
    Publisher(PublisherCore),
    Subscriber(SubscriberCore),
}

impl Endpoint {
    pub fn publisher(&self) -> Option<&PublisherCore> {
        match self {
            Endpoint::Publisher(p) => Some(p),
            Endpoint::Subscriber(_) => None,
        }
    }

    pub fn publisher_mut(&mut self) -> Option<&mut PublisherCore> {
        match self {
            Endpoint::Publisher(p) => Some(p),
            Endpoint::Subscriber(_) => None,
        }
    }

    pub fn subscriber(&self) -> Option<&SubscriberCore> {
        match self {
            Endpoint::Subscriber(s) => Some(s),
            Endpoint::Publisher(_) => None,
        }
    }

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
