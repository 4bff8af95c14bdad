//! What the host tells a core's relay, one [`Input`] per call of `RelayShard::handle`
//! (with the shard's clock): new sessions and links, a session's events or its end, a message
//! from another core, the timers' time, what a transport did with the relay's data streams,
//! the platform's and the directory's answers, a drain, and what the runtime measured. After
//! each, the relay handles the messages it sent itself; what it has for the host is taken
//! with the `take_*` calls (messages for other cores, sessions written to, questions for the
//! platform and the directory, events, links' GOAWAYs), and when to call again with
//! `poll_timeout`.

use std::time::Duration;

use session::{Session, StreamId};
use wire::model::TrackNamespace;

use crate::admission::Verdict;
use crate::fanout::PathState;
use crate::msg::{ConnId, RelayMsg};

/// One thing the host tells the relay (see the module header).
#[derive(Debug)]
pub enum Input<'a> {
    /// A new session on this core (a peer's connection), named `ConnId` (unique on this core).
    Session(ConnId, Session),
    /// A session this core opened to a parent relay, serving the namespace prefixes `routes`
    /// (an empty prefix is the default route), which take effect when its SETUP exchange
    /// completes. `replaces`: the link (on this core) whose parent sent GOAWAY; its tracks
    /// move to this one once it is up. `directory`: it leads to a relay the namespace
    /// directory named, not to a parent, and local announcements are not forwarded up it
    /// (the directory already tells every relay where they are).
    Link {
        /// Its name on this core.
        conn: ConnId,
        /// The relay's side of it.
        session: Session,
        /// The prefixes it serves.
        routes: Vec<TrackNamespace>,
        /// The link whose parent sent GOAWAY, if any.
        replaces: Option<ConnId>,
        /// It leads to a relay the directory named.
        directory: bool,
    },
    /// Session `conn` may have events (its transport was read): each is handled, unless the
    /// session waits for the platform's verdict.
    Events(ConnId),
    /// The connection under session `conn` is gone: the session and everything it had go
    /// (its subscriptions end upstream, its tracks end downstream).
    Gone(ConnId),
    /// A message from the relay of another core.
    Message(RelayMsg),
    /// The timers' time (linger, held PUBLISH_DONE, renewals, links): see `poll_timeout`.
    Timers,
    /// Session `conn`'s transport reset these data streams of the relay's to shed a backlog
    /// the subscriber was not taking (they count toward TOO_FAR_BEHIND).
    Shed {
        /// The session.
        conn: ConnId,
        /// The streams reset.
        streams: &'a [StreamId],
        /// Whether its path was delivering.
        path: PathState,
    },
    /// Session `conn`'s transport reset these data streams because an object's time ran out
    /// before QUIC took it (DELIVERY_TIMEOUT).
    Expired {
        /// The session.
        conn: ConnId,
        /// The streams reset.
        streams: &'a [StreamId],
        /// Whether its path was delivering.
        path: PathState,
    },
    /// Session `conn`'s transport took these data streams in full while it was losing others:
    /// their subscriptions are on a thin path, not behind.
    Finished {
        /// The session.
        conn: ConnId,
        /// The streams taken whole.
        streams: &'a [StreamId],
    },
    /// The platform's verdict on session `conn`, at its admission or at a revalidation.
    Admitted {
        /// The session.
        conn: ConnId,
        /// What the platform said.
        verdict: Verdict,
    },
    /// The directory answered this core's lookup of `namespace`: on a miss, the requests held
    /// for it get the answer they would have had without a directory; on a hit they wait for
    /// the route (the link to the relay named comes up) until their time is up.
    DirectoryAnswer {
        /// The namespace looked up.
        namespace: &'a TrackNamespace,
        /// Whether a relay of the cluster serves it.
        found: bool,
    },
    /// A namespace registered by another relay of the cluster appeared (`on`) or went away:
    /// namespace subscriptions hear of it like of a local announcement.
    RemoteNamespace {
        /// The namespace.
        namespace: TrackNamespace,
        /// Appeared, or went away.
        on: bool,
    },
    /// Link `conn` takes namespace prefix `prefix` as a route (`on`) or drops it: the
    /// directory names the relay it leads to as the one serving `prefix`.
    LinkRoute {
        /// The link.
        conn: ConnId,
        /// The prefix.
        prefix: TrackNamespace,
        /// Taken, or dropped.
        on: bool,
    },
    /// The relay is going away (graceful shutdown): every session gets GOAWAY with the
    /// configured New Session URI, else `sibling` (a relay the namespace directory says is
    /// the least loaded), and `timeout_ms` (draft-22 carries it; draft-16's GOAWAY has no
    /// timeout field), and so does every session set up from now on. Nothing else changes:
    /// subscriptions keep flowing until the sessions close or the core's time is up.
    GoAway {
        /// How long sessions are served after GOAWAY, in milliseconds.
        timeout_ms: u64,
        /// The least loaded relay of the cluster, if the directory named one.
        sibling: Option<&'a str>,
    },
    /// The wall clock reads these Unix seconds now: token expiry follows the wall clock.
    WallClock(u64),
    /// How long this turn's input waited in the socket before the core read it: objects read
    /// this turn arrived that much earlier than the turn's clock says, and their delivery
    /// deadlines (`max_lag`, delivery timeouts) count from then. Input that waited
    /// `behind_lag` or more means the core itself is behind.
    ReceiveLag(Duration),
    /// The runtime's view of this core's mesh queues, by destination core: backed up
    /// (`congested`: the queue is full and messages wait in overflow), and the weight
    /// (`RelayMsg::weight`) sent there and not taken yet. A backed-up core, or one with more
    /// than half of `mesh_queue` waiting, is forwarded no new stream; an object that would
    /// take it past `mesh_queue` resets its stream there instead (`shed.rs`: whole subgroups
    /// are shed, never an object of a stream already forwarded; control messages always go).
    MeshBacklog {
        /// By core: the queue to it is backed up.
        congested: &'a [bool],
        /// By core: the weight queued to it.
        bytes: &'a [usize],
    },
    /// The core was busy this percentage of the last second (the runtime measures it; the
    /// relay reads no clock). Over `admission_busy_pct`, new downstream requests are refused
    /// (ARCHITECTURE.md, "Admission under load").
    Load(u8),
}
