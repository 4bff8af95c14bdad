//! What the roles of one core share: the core's place among the cores, its clock as the
//! runtime last told it, the configuration, the namespace table, the namespace directory's
//! requests, the counters and the mail between roles and cores. The shard owns one [`Cx`]
//! beside its roles and its sessions, and lends it to each role it calls; a role that takes a
//! `Cx` touches no other role's state: it talks to them through [`Cx::send`].
//!
//! This module sits below the roles: it names none of them, and none of them needs the crate
//! root for shared plumbing.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use tracing::debug;
use wire::model::{GoAway, RequestId, TrackAlias, TrackNamespace};

use crate::alias::{self, AliasKey};
use crate::config::{over_admission_threshold, RelayConfig};
use crate::directory::Directory;
use crate::msg::{ConnId, Epoch, NamespaceMsg, RelayMsg, SessionRef};
use crate::namespaces::{NamespaceTable, Via};
use crate::stats::RelayStats;

/// How long after input waited `behind_lag` the core still counts as behind: streams shed
/// now were queued in the last seconds (the freshness budget's default).
pub const BEHIND_WINDOW: Duration = Duration::from_secs(2);

/// A session call whose failure leaves the relay nothing to do (the stream was already reset
/// or finished, the request already ended, the session is closing): logged at debug, so
/// that what the relay dropped can be seen.
pub(crate) fn unheeded(result: Result<(), session::SessionError>, what: &'static str) {
    if let Err(e) = result {
        debug!(error = %e, what, "session call refused");
    }
}

/// The shared state of one core's roles (see the module header).
#[derive(Debug)]
pub(crate) struct Cx {
    pub core: usize,
    pub cores: usize,
    /// The shard's clock at the call being handled.
    pub now: Instant,
    pub config: RelayConfig,
    pub key: AliasKey,
    pub namespaces: NamespaceTable,
    /// What this core asks of the namespace directory.
    pub directory: Directory,
    /// Counters for the metrics endpoint.
    pub stats: RelayStats,
    /// Set once the relay drains: the GOAWAY every session gets (sessions set up later too).
    pub goaway: Option<GoAway>,
    pub mail: Mail,
    pub load: Load,
    wall: WallClock,
}

/// The core's load as the runtime measured it.
#[derive(Debug, Default)]
pub(crate) struct Load {
    /// The core's busy share of the last second, in percent.
    pub busy_pct: u8,
    /// When input last waited `behind_lag` or more in the socket.
    pub behind_at: Option<Instant>,
    /// How long this turn's input waited in the socket before the core read it.
    pub receive_lag: Duration,
}

/// The wall clock as the runtime last told it: Unix seconds at one instant of the shard's
/// clock. The relay reads no clock; token expiry (Unix seconds) is measured against this.
#[derive(Debug, Clone, Copy)]
struct WallClock {
    at: Instant,
    unix_secs: u64,
}

impl Cx {
    pub(crate) fn new(
        core: usize,
        cores: usize,
        config: RelayConfig,
        key: AliasKey,
        now: Instant,
        unix_secs: u64,
    ) -> Self {
        Cx {
            core,
            cores,
            now,
            key,
            namespaces: NamespaceTable::default(),
            directory: Directory::new(config.directory, config.events),
            stats: RelayStats::default(),
            goaway: None,
            mail: Mail::new(core),
            load: Load::default(),
            wall: WallClock { at: now, unix_secs },
            config,
        }
    }

    pub(crate) fn send(&mut self, dst: usize, msg: impl Into<RelayMsg>) {
        self.mail.send(dst, msg);
    }

    /// Tells every core's namespace table that `publisher` serves `namespace` (its request
    /// `rid`), come `via`.
    pub(crate) fn namespace_announced(
        &mut self,
        namespace: &TrackNamespace,
        publisher: SessionRef,
        rid: RequestId,
        via: Via,
    ) {
        for core in 0..self.cores {
            let namespace = namespace.clone();
            self.send(core, NamespaceMsg::NamespaceAnnounced { namespace, publisher, rid, via });
        }
    }

    /// Tells every core's namespace table that `publisher` no longer serves `namespace`.
    pub(crate) fn namespace_withdrawn(&mut self, namespace: &TrackNamespace, publisher: SessionRef) {
        for core in 0..self.cores {
            self.send(core, NamespaceMsg::NamespaceWithdrawn { namespace: namespace.clone(), publisher });
        }
    }

    /// The relay is draining (GOAWAY sent): nothing lingers.
    pub(crate) fn draining(&self) -> bool {
        self.goaway.is_some()
    }

    /// The core is over its admission threshold, or its input waited `behind_lag` in the
    /// socket within the last [`BEHIND_WINDOW`]: the relay, not its subscribers, is what
    /// falls behind (streams it sheds now do not count toward TOO_FAR_BEHIND).
    pub(crate) fn overloaded(&self) -> bool {
        over_admission_threshold(self.load.busy_pct, self.config.admission_busy_pct)
            || self.load.behind_at.is_some_and(|t| self.now.saturating_duration_since(t) < BEHIND_WINDOW)
    }

    /// When the data read this turn reached this relay: `now` less the time it waited in the
    /// socket.
    pub(crate) fn received(&self) -> Instant {
        self.now.checked_sub(self.load.receive_lag).unwrap_or(self.now)
    }

    /// A new upstream subscription ID, unique across cores.
    pub(crate) fn new_epoch(&mut self) -> Epoch {
        self.mail.next_epoch += 1;
        epoch(self.core, self.mail.next_epoch)
    }

    /// Whether this core's mesh queue to `core` is backed up (see
    /// `Input::MeshBacklog`): no new stream is forwarded there (`shed.rs`).
    pub(crate) fn mesh_backed_up(&self, core: usize) -> bool {
        self.mail.congested.get(core).copied().unwrap_or(false)
            || self.mail.queued(core) > self.config.mesh_queue / 2
    }

    /// Whether `bytes` more fit in this core's mesh queue to `core` (`RelayConfig::mesh_queue`).
    pub(crate) fn mesh_room(&self, core: usize, bytes: usize) -> bool {
        self.mail.queued(core) + bytes <= self.config.mesh_queue
    }

    /// The core that owns track `alias`.
    pub(crate) fn owner_of(&self, alias: TrackAlias) -> usize {
        alias::owner(alias, self.cores)
    }

    /// Session `conn` of this core, as other cores name it.
    pub(crate) fn me(&self, conn: ConnId) -> SessionRef {
        SessionRef { core: self.core, conn }
    }

    /// The wall clock reads `unix_secs` at `now` of the shard's clock.
    pub(crate) fn set_wall_clock(&mut self, now: Instant, unix_secs: u64) {
        self.wall = WallClock { at: now, unix_secs };
    }

    /// Unix seconds now (from the wall clock the runtime gave the shard and the shard's
    /// clock since).
    pub(crate) fn unix_secs(&self) -> u64 {
        let since = self.now.saturating_duration_since(self.wall.at).as_secs();
        self.wall.unix_secs.saturating_add(since)
    }
}

/// Upstream subscription `seq` of core `core` (the core in the top bits).
fn epoch(core: usize, seq: u64) -> Epoch {
    (core as u64) << 48 | seq
}

/// Messages this shard sends: to itself (handled in the same turn) or to other cores, and
/// what the runtime says of the mesh queues they go into.
#[derive(Debug)]
pub(crate) struct Mail {
    core: usize,
    local: VecDeque<RelayMsg>,
    /// (core, message, its weight: `RelayMsg::weight`).
    outbox: Vec<(usize, RelayMsg, usize)>,
    /// By core: the weight (`RelayMsg::weight`) of what was sent to it and it has not taken
    /// yet, as the runtime last said (`Input::MeshBacklog`), plus what was sent since.
    queued: Vec<usize>,
    /// Cores this core's mesh queues are backed up to, as the runtime last said.
    congested: Vec<bool>,
    /// The last upstream subscription ID this core handed out.
    next_epoch: u64,
}

impl Mail {
    fn new(core: usize) -> Self {
        Mail {
            core,
            local: VecDeque::new(),
            outbox: Vec::new(),
            queued: Vec::new(),
            congested: Vec::new(),
            next_epoch: 0,
        }
    }

    fn send(&mut self, dst: usize, msg: impl Into<RelayMsg>) {
        let msg = msg.into();
        if dst == self.core {
            self.local.push_back(msg);
        } else {
            if self.queued.len() <= dst {
                self.queued.resize(dst + 1, 0);
            }
            let weight = msg.weight();
            self.queued[dst] += weight;
            self.outbox.push((dst, msg, weight));
        }
    }

    fn queued(&self, core: usize) -> usize {
        self.queued.get(core).copied().unwrap_or(0)
    }

    /// The runtime's view of the mesh queues (`Input::MeshBacklog`).
    pub(crate) fn set_backlog(&mut self, congested: &[bool], bytes: &[usize]) {
        self.congested.clear();
        self.congested.extend_from_slice(congested);
        self.queued.clear();
        self.queued.extend_from_slice(bytes);
    }

    /// The next message this core sent itself.
    pub(crate) fn next_local(&mut self) -> Option<RelayMsg> {
        self.local.pop_front()
    }

    /// Messages for other cores, in order.
    pub(crate) fn take_outbox(&mut self, out: &mut Vec<(usize, RelayMsg, usize)>) {
        out.append(&mut self.outbox);
    }
}
