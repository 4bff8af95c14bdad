//! Per-core counters, written by their core only (relaxed atomics, no locks) and read by
//! anyone (tests, the bench, later the metrics endpoint).

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

/// Counters of one core.
#[derive(Debug, Default)]
pub struct ShardStats {
    /// Connections currently open on this core.
    pub connections: AtomicU64,
    /// Connections accepted since start.
    pub accepted: AtomicU64,
    /// Handshakes in progress.
    pub handshakes: AtomicU64,
    /// Initials refused (connection cap, draining, over the admission threshold, bad token;
    /// unknown ALPN is counted by quiche).
    pub refused: AtomicU64,
    /// UDP datagrams received.
    pub datagrams_in: AtomicU64,
    /// UDP datagrams sent.
    pub datagrams_out: AtomicU64,
    /// UDP payload bytes received.
    pub bytes_in: AtomicU64,
    /// UDP payload bytes sent.
    pub bytes_out: AtomicU64,
    /// sendmsg calls that carried a UDP_SEGMENT train of more than one datagram.
    pub gso_sends: AtomicU64,
    /// Trains sent (one datagram alone counts as one): `datagrams_out` / this is the
    /// datagrams per train.
    pub trains_out: AtomicU64,
    /// Turns of the core's loop (each ends in a wait, a yield or the receive hold).
    pub turns: AtomicU64,
    /// Connections serviced (the application's I/O, then quiche's output written): one a
    /// turn for each connection with input, a wake, or a due timer.
    pub services: AtomicU64,
    /// Of `services`, those whose write found nothing to send (one whose output send
    /// coalescing holds back is not counted).
    pub idle_services: AtomicU64,
    /// Connections whose pacing delay ended (a timer that releases what quiche held back).
    pub pacing_releases: AtomicU64,
    /// `recvmmsg` calls that returned at least one datagram (`datagrams_in` / this: the
    /// datagrams a read gathers; receive coalescing raises it).
    pub recv_batches: AtomicU64,
    /// Datagrams this core received for a connection of another core and handed over.
    pub forwarded_out: AtomicU64,
    /// Datagrams another core handed to this one.
    pub forwarded_in: AtomicU64,
    /// Stateless resets sent (short-header packets of no connection here).
    pub stateless_resets: AtomicU64,
    /// Retry packets sent.
    pub retries: AtomicU64,
    /// Datagrams dropped: unparseable, unknown version, full mesh queue.
    pub dropped: AtomicU64,
    /// Connections this core opened (to upstream relays) since start.
    pub connects: AtomicU64,
    /// Of `connections`, those this core opened (open now).
    pub outbound: AtomicU64,
    /// Mesh messages this core drained at its last turn (the budget is 256).
    pub mesh_backlog: AtomicU64,
    /// Bytes this core has queued toward other cores that they have not taken yet (all
    /// destinations; the relay's limit is per destination).
    pub mesh_queued_bytes: AtomicU64,
    /// Of `refused`, Initials refused because the core was over its admission threshold.
    pub refused_busy: AtomicU64,
    /// The share of the last second this core was busy in its turns, in percent.
    pub busy_pct: AtomicU64,
    /// The admission threshold in percent (0: off), the same on every core.
    pub admission_busy_pct: AtomicU64,
}

impl ShardStats {
    #[inline]
    pub(crate) fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Relaxed);
    }

    #[inline]
    pub(crate) fn sub(counter: &AtomicU64, n: u64) {
        counter.fetch_sub(n, Relaxed);
    }

    /// Sets a gauge.
    #[inline]
    pub(crate) fn set(gauge: &AtomicU64, v: u64) {
        gauge.store(v, Relaxed);
    }

    /// A relaxed read of a counter.
    pub fn get(counter: &AtomicU64) -> u64 {
        counter.load(Relaxed)
    }
}

/// What a core reports when it stops.
#[derive(Debug, Clone, Copy, Default)]
pub struct ShardReport {
    /// CPU time of the core's thread (user + system).
    pub cpu: Duration,
}
