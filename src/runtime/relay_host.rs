//! Runs the relay on the cores: one [`RelayShard`] per core, shared by that core's
//! connections (`Rc<RefCell<_>>`: one thread, no lock). Each connection's `on_io` moves bytes
//! between quiche and its session ([`Pump`]) and lets the shard handle the session's events;
//! the shard's writes into other sessions wake those connections, and its messages for other
//! cores travel over the mesh as [`AppMessage`]s.

use crate::hash::HashMap;
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use tracing::warn;

use super::app::{AppFactory, AppMessage, ConnApp, ConnHandle, DiscardApp, ShardApp, ShardOutput};
use super::moqt::Pump;
use super::ShardId;
use crate::relay::alias::AliasKey;
use crate::relay::msg::RelayMsg;
use crate::relay::{RelayConfig, RelayShard};
use crate::session::{Session, SessionConfig};
use crate::wire::model::{Role, SetupOptions};
use crate::wire::Version;

/// One core's relay state sizes, published after every turn (read by tests and metrics;
/// relaxed atomics, written only by their core).
#[derive(Debug, Default)]
pub struct RelayGauges {
    pub sessions: AtomicU64,
    /// Tracks this core owns.
    pub tracks: AtomicU64,
    /// Downstream subscriptions on this core's sessions.
    pub subscriptions: AtomicU64,
    /// Upstream subscriptions (SUBSCRIBEs sent, PUBLISHes accepted) on this core's sessions.
    pub upstreams: AtomicU64,
}

impl RelayGauges {
    /// (sessions, tracks, subscriptions, upstreams).
    pub fn read(&self) -> (u64, u64, u64, u64) {
        let g = |a: &AtomicU64| a.load(Ordering::Relaxed);
        (g(&self.sessions), g(&self.tracks), g(&self.subscriptions), g(&self.upstreams))
    }
}

/// Serves the relay on every connection.
#[derive(Debug, Clone)]
pub struct RelayFactory {
    pub relay: RelayConfig,
    pub session: SessionConfig,
    key: AliasKey,
    gauges: Arc<[RelayGauges]>,
}

/// Cores a relay can have (connection IDs carry the core in one byte).
const MAX_CORES: usize = 256;

impl RelayFactory {
    /// `secret` keys the Track Alias hash (the same on every core of this relay).
    pub fn new(relay: RelayConfig, session: SessionConfig, secret: &[u8; 32]) -> Self {
        let gauges: Arc<[RelayGauges]> = (0..MAX_CORES).map(|_| RelayGauges::default()).collect();
        RelayFactory { relay, session, key: AliasKey::new(secret), gauges }
    }

    /// Per-core state sizes (index = core; cores beyond the server's stay zero).
    pub fn gauges(&self) -> Arc<[RelayGauges]> {
        self.gauges.clone()
    }
}

impl AppFactory for RelayFactory {
    fn new_connection(&self, _shard: ShardId, _version: Version) -> Box<dyn ConnApp> {
        // Not used: every core has a shard app.
        Box::new(DiscardApp)
    }

    fn shard_app(&self, shard: ShardId, cores: usize) -> Option<Box<dyn ShardApp>> {
        let now = Instant::now();
        let relay = RelayShard::new(shard.index(), cores, self.relay.clone(), self.key.clone(), now);
        let host = Host {
            relay,
            backlog: self.relay.max_backlog,
            session: self.session.clone(),
            setup: self.relay.server_setup(),
            pumps: HashMap::default(),
            buf: vec![0u8; 65_536],
            now,
            outbox: Vec::new(),
            woken: Vec::new(),
            gauges: self.gauges.clone(),
            core: shard.index(),
        };
        Some(Box::new(RelayHost(Rc::new(RefCell::new(host)))))
    }
}

struct Host {
    relay: RelayShard,
    /// The SETUP options every session sends.
    setup: SetupOptions,
    /// Bytes a session may queue beyond QUIC flow control (see `Pump::with_backlog_limit`).
    backlog: usize,
    session: SessionConfig,
    pumps: HashMap<u64, Pump>,
    /// Receive scratch buffer shared by the core's connections.
    buf: Vec<u8>,
    now: Instant,
    outbox: Vec<(usize, RelayMsg)>,
    woken: Vec<u64>,
    gauges: Arc<[RelayGauges]>,
    core: usize,
}

impl Host {
    /// Writes session `conn`'s output into its connection.
    fn flush(&mut self, key: u64, conn: &mut quiche::Connection) {
        let (Some(session), Some(pump)) = (self.relay.session_mut(key), self.pumps.get_mut(&key)) else {
            return;
        };
        pump.write(conn, session, self.now);
    }
}

struct RelayHost(Rc<RefCell<Host>>);

impl ShardApp for RelayHost {
    fn new_connection(&mut self, conn: ConnHandle, version: Version) -> Box<dyn ConnApp> {
        let mut host = self.0.borrow_mut();
        let session = Session::new(version, Role::Server, host.session.clone(), host.setup.clone());
        host.relay.add_session(conn.0, session);
        let pump = Pump::with_backlog_limit(host.backlog);
        host.pumps.insert(conn.0, pump);
        Box::new(RelayConn { key: conn.0, host: self.0.clone() })
    }

    fn begin_turn(&mut self, now: Instant) {
        self.0.borrow_mut().now = now;
    }

    fn on_message(&mut self, from: usize, msg: AppMessage) {
        let mut host = self.0.borrow_mut();
        let now = host.now;
        match msg.downcast::<RelayMsg>() {
            Ok(m) => host.relay.on_message(from, *m, now),
            Err(_) => warn!(from, "a mesh message that is not the relay's"),
        }
    }

    fn drain(&mut self, now: Instant, timeout: std::time::Duration) {
        let host = &mut *self.0.borrow_mut();
        host.now = now;
        host.relay.go_away(u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX));
    }

    fn poll(&mut self, now: Instant, out: &mut ShardOutput) {
        let host = &mut *self.0.borrow_mut();
        host.now = now;
        out.deadline = host.relay.tick(now);
        host.relay.take_outbox(&mut host.outbox);
        for (dst, msg) in host.outbox.drain(..) {
            out.messages.push((dst, Box::new(msg)));
        }
        host.relay.take_woken(&mut host.woken);
        out.wake.extend(host.woken.drain(..).map(ConnHandle));
        if let Some(g) = host.gauges.get(host.core) {
            let (tracks, subscriptions, upstreams) = host.relay.state_counts();
            g.sessions.store(host.relay.session_count() as u64, Ordering::Relaxed);
            g.tracks.store(tracks as u64, Ordering::Relaxed);
            g.subscriptions.store(subscriptions as u64, Ordering::Relaxed);
            g.upstreams.store(upstreams as u64, Ordering::Relaxed);
        }
    }
}

/// One connection's view: its key in the shard.
struct RelayConn {
    key: u64,
    host: Rc<RefCell<Host>>,
}

impl ConnApp for RelayConn {
    fn on_io(&mut self, conn: &mut quiche::Connection) {
        let host = &mut *self.host.borrow_mut();
        let key = self.key;
        let now = host.now;
        if let (Some(session), Some(pump)) = (host.relay.session_mut(key), host.pumps.get_mut(&key)) {
            pump.read(conn, session, &mut host.buf);
        }
        loop {
            host.relay.handle_events(key, now);
            host.flush(key, conn);
            // Writing can surface events (STOP_SENDING seen by stream_send) and shed streams
            // from an over-long backlog (which may end subscriptions: PUBLISH_DONE to write).
            let shed = host.pumps.get_mut(&key).map(Pump::take_shed).unwrap_or_default();
            if !shed.is_empty() {
                host.relay.streams_shed(key, &shed, now);
                continue;
            }
            if !host.relay.session_mut(key).is_some_and(|s| s.has_events()) {
                break;
            }
        }
    }

    fn on_closed(&mut self, _conn: &quiche::Connection) {
        let host = &mut *self.host.borrow_mut();
        let now = host.now;
        host.relay.remove_session(self.key, now);
        host.pumps.remove(&self.key);
    }
}
