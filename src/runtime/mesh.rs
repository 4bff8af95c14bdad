//! The cross-core mesh: how one core hands messages to another.
//!
//! # Shape
//!
//! - One bounded lock-free queue ([`ArrayQueue`]) per ordered (source core, destination core)
//!   pair, so each pair is single-producer, single-consumer and FIFO, and no two cores contend
//!   on one queue.
//! - One doorbell per destination core: a Unix socket pair whose read end the destination's
//!   glommio loop awaits ([`Doorbell::wait`]), whose write end every producer shares, plus a
//!   `rung` flag so that at most one byte is in flight per wakeup.
//! - Batching: [`MeshEndpoint::send`] only marks the destination; [`MeshEndpoint::flush`] rings
//!   each marked destination once. A burst of any size between two flushes costs one `send(2)`
//!   per destination, and none at all while the destination has not yet drained the last ring.
//!
//! Shards are plain `usize` indexes `0..cores` here (the runtime wraps them in `ShardId`).
//! A message to one's own core is delivered through a local FIFO by the same [`drain`]
//! (`src == dst`), so callers need no special case.
//!
//! # Full queues
//!
//! A full pair queue means the destination core is behind. [`send`] never drops: the message
//! waits in the *source's* memory, in a per-destination overflow FIFO that [`flush`] moves into
//! the queue as room appears (and once anything is in overflow, later sends to that destination
//! queue behind it, so FIFO holds). The mesh itself never refuses a message: the bound is kept
//! by the layer that creates them. For that it counts, per destination, the bytes handed to it
//! and not yet taken by its consumer ([`MeshEndpoint::queued_bytes`], with the weight function
//! given to [`Mesh::with_weight`]; the consumer publishes what it took once per drain). The
//! core reads that and [`MeshEndpoint::overflow_to`] each turn and tells the application; the
//! relay then stops opening new streams to a backed-up core and resets the streams it would
//! push past its byte limit (ARCHITECTURE.md, the relay layer). Droppable
//! traffic (forwarded QUIC datagrams, which QUIC recovers from) uses [`try_send`], which fails
//! instead of overflowing.
//!
//! When a producer has overflow it raises the pair's `producer_waiting` flag; the consumer,
//! after draining, rings the producer's doorbell, so a producer core that is parked still wakes
//! up, and its next [`drain`] moves the overflow on.
//!
//! # Loop contract
//!
//! - After every [`Doorbell::wait`] that returns, call [`drain`] (it clears the doorbell flag
//!   first; a wake not followed by a drain can hide the next one).
//! - Call [`flush`] before waiting again whenever anything was sent this turn (simplest: every
//!   turn, as the last mesh step).
//!
//! Nothing else is needed: a drain cut short by its budget rings its own doorbell, so the next
//! wait returns at once.
//!
//! # Memory
//!
//! Queues are allocated up front: `cores * (cores - 1) * capacity` slots of `T`. Keep `T` small
//! (payloads are `Bytes`, i.e. pointers) and size `capacity` with that product in mind.
//!
//! [`drain`]: MeshEndpoint::drain
//! [`send`]: MeshEndpoint::send
//! [`try_send`]: MeshEndpoint::try_send
//! [`flush`]: MeshEndpoint::flush

use std::collections::VecDeque;
use std::fmt;
use std::io;
use std::marker::PhantomData;
use std::os::fd::{FromRawFd, IntoRawFd};
use std::os::unix::net::UnixStream as StdUnixStream;
use std::sync::atomic::{fence, AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use crossbeam_queue::ArrayQueue;
use futures_lite::AsyncReadExt;

/// The most cores a mesh connects (a `ShardId` is a `u8`).
pub const MAX_CORES: usize = 256;

/// Most messages taken from one source before [`MeshEndpoint::drain`] moves to the next, so one
/// busy source cannot starve the others within a call.
const QUANTUM: usize = 16;

/// Bytes read from a doorbell per `read`; more than this pending is drained without waiting.
const DOORBELL_READ: usize = 64;

/// One destination core's wakeup: a flag and the shared write end of its socket pair.
///
/// # Why no wakeup is lost
///
/// Every operation on `rung` is a read-modify-write: producers `swap(true)` (ring), the consumer
/// `swap(false)` (clear, at the start of every drain). Consider a message M that a producer
/// pushes and then rings for (push sequenced before the ring R). Let C0 be the last clear
/// before R in `rung`'s modification order:
///
/// 1. Some ring R0 comes after C0 and at or before R (R itself qualifies). The first such ring
///    reads `false`, so it writes a byte. The consumer reads that byte in some `wait`, and every
///    `wait` is followed by a drain, which starts with a clear C1. C1 happens after the byte was
///    written, hence after R0 in modification order; no clear lies between C0 and R, so C1 comes
///    after R.
/// 2. Between R and the first clear after it there are only `swap(true)`s, which continue R's
///    release sequence, so that clear (an acquire RMW) synchronizes with R: the push of M
///    happens before the drain's pops, which therefore see M. The same holds for a consumer
///    ringing a producer after making room: the producer's drain retries its overflow right
///    after that clear, and sees the room.
///
/// A drain that stops early for its budget rings its own doorbell (another ring, same
/// argument), and bytes left unread only cause a spurious wakeup, never a lost one.
struct Bell {
    rung: AtomicBool,
    tx: socket2::Socket,
}

impl Bell {
    fn ring(&self) {
        if !self.rung.swap(true, Ordering::AcqRel) {
            // Non-blocking. Errors are ignored on purpose: WouldBlock means bytes are already
            // pending (so the consumer will wake); EPIPE means the consumer is gone (shutdown).
            // MSG_NOSIGNAL keeps the latter from raising SIGPIPE.
            let _ = self.tx.send_with_flags(&[1], libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL);
        }
    }

    /// Returns true when a ring happened since the previous clear.
    fn clear(&self) -> bool {
        self.rung.swap(false, Ordering::AcqRel)
    }
}

/// One (source, destination) queue.
struct Pair<T> {
    queue: ArrayQueue<T>,
    /// Raised by the producer while it holds overflow for this pair; the consumer lowers it and
    /// rings the producer after it has made room.
    producer_waiting: AtomicBool,
    /// Weight (bytes) of every message the consumer has popped so far; written by the consumer
    /// once per drain, read by the producer ([`MeshEndpoint::queued_bytes`]).
    taken: AtomicU64,
}

/// Builds meshes. A namespace only: [`Mesh::new`] returns the endpoints.
pub struct Mesh<T> {
    _marker: PhantomData<fn() -> T>,
}

impl<T: Send> Mesh<T> {
    /// Connects `cores` cores with one queue of `capacity` slots per ordered pair, and returns
    /// one endpoint per core (`endpoints[i].core() == i`); move each to its core's thread.
    ///
    /// Fails with `InvalidInput` when `cores` is 0 or above [`MAX_CORES`] or `capacity` is 0,
    /// and with the OS error when a socket pair cannot be created.
    // `Mesh` is only a namespace; the endpoints are the product.
    #[allow(clippy::new_ret_no_self)]
    pub fn new(cores: usize, capacity: usize) -> io::Result<Vec<MeshEndpoint<T>>> {
        Self::with_weight(cores, capacity, |_| 0)
    }

    /// As [`Mesh::new`], with `weigh` telling what a message weighs in bytes (what it holds),
    /// which [`MeshEndpoint::queued_bytes`] adds up per destination.
    pub fn with_weight(
        cores: usize,
        capacity: usize,
        weigh: fn(&T) -> usize,
    ) -> io::Result<Vec<MeshEndpoint<T>>> {
        if cores == 0 || cores > MAX_CORES || capacity == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("mesh needs 1..={MAX_CORES} cores and capacity >= 1 (got {cores}, {capacity})"),
            ));
        }
        let mut bells = Vec::with_capacity(cores);
        let mut doorbells = Vec::with_capacity(cores);
        for _ in 0..cores {
            let (rx, tx) = StdUnixStream::pair()?;
            rx.set_nonblocking(true)?;
            bells.push(Bell { rung: AtomicBool::new(false), tx: socket2::Socket::from(tx) });
            doorbells.push(rx);
        }
        let bells: Arc<[Bell]> = bells.into();

        // pairs[src][dst]
        let pairs: Vec<Vec<Option<Arc<Pair<T>>>>> = (0..cores)
            .map(|src| {
                (0..cores)
                    .map(|dst| {
                        (src != dst).then(|| {
                            Arc::new(Pair {
                                queue: ArrayQueue::new(capacity),
                                producer_waiting: AtomicBool::new(false),
                                taken: AtomicU64::new(0),
                            })
                        })
                    })
                    .collect()
            })
            .collect();

        let endpoints = doorbells
            .into_iter()
            .enumerate()
            .map(|(core, doorbell)| MeshEndpoint {
                core,
                capacity,
                bells: bells.clone(),
                outbound: pairs[core].clone(),
                inbound: pairs.iter().map(|row| row[core].clone()).collect(),
                overflow: (0..cores).map(|_| VecDeque::new()).collect(),
                overflow_len: 0,
                sent: vec![0; cores],
                local: VecDeque::new(),
                local_bytes: 0,
                weigh,
                dirty: Vec::with_capacity(cores),
                is_dirty: vec![false; cores],
                cursor: 0,
                doorbell: Some(doorbell),
            })
            .collect();
        Ok(endpoints)
    }
}

/// One core's end of the mesh: its outbound queues (to every other core), its inbound queues
/// (from every other core) and its doorbell. `Send`, not `Sync`: it belongs to one thread.
pub struct MeshEndpoint<T> {
    core: usize,
    capacity: usize,
    /// Every core's bell, by core.
    bells: Arc<[Bell]>,
    /// By destination; `None` at `core`.
    outbound: Vec<Option<Arc<Pair<T>>>>,
    /// By source; `None` at `core`.
    inbound: Vec<Option<Arc<Pair<T>>>>,
    /// By destination: messages waiting for room in the pair queue.
    overflow: Vec<VecDeque<T>>,
    overflow_len: usize,
    /// By destination: weight of every message handed to it so far (its pair's `taken` is
    /// what the consumer popped of it).
    sent: Vec<u64>,
    /// Messages to this core itself.
    local: VecDeque<T>,
    /// Weight of the messages in `local`.
    local_bytes: usize,
    weigh: fn(&T) -> usize,
    /// Destinations that received something since the last flush (each once).
    dirty: Vec<usize>,
    is_dirty: Vec<bool>,
    /// Source the next drain starts with (rotates, for fairness across calls).
    cursor: usize,
    doorbell: Option<StdUnixStream>,
}

impl<T> fmt::Debug for MeshEndpoint<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MeshEndpoint")
            .field("core", &self.core)
            .field("cores", &self.bells.len())
            .field("capacity", &self.capacity)
            .field("pending_overflow", &self.overflow_len)
            .finish_non_exhaustive()
    }
}

impl<T: Send> MeshEndpoint<T> {
    /// This endpoint's core index.
    pub fn core(&self) -> usize {
        self.core
    }

    /// Number of cores in the mesh.
    pub fn cores(&self) -> usize {
        self.bells.len()
    }

    /// Slots per pair queue.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Queues `msg` for core `dst`; never drops it. When the pair queue is full (or earlier
    /// messages to `dst` are still in overflow) it waits in this endpoint's overflow until a
    /// later [`flush`](Self::flush) finds room. `dst` is rung at the next flush.
    ///
    /// The only error is `dst >= cores()` (a caller bug; the message is handed back).
    pub fn send(&mut self, dst: usize, msg: T) -> Result<(), T> {
        let weight = (self.weigh)(&msg);
        if dst == self.core {
            self.local_bytes += weight;
            self.local.push_back(msg);
            self.mark(dst);
            return Ok(());
        }
        let (Some(Some(pair)), Some(overflow), Some(sent)) =
            (self.outbound.get(dst), self.overflow.get_mut(dst), self.sent.get_mut(dst))
        else {
            return Err(msg);
        };
        *sent += weight as u64;
        if overflow.is_empty() {
            match pair.queue.push(msg) {
                Ok(()) => {
                    self.mark(dst);
                    return Ok(());
                }
                Err(msg) => overflow.push_back(msg),
            }
        } else {
            overflow.push_back(msg);
        }
        self.overflow_len += 1;
        Ok(())
    }

    /// Queues `msg` for core `dst` if there is room now, for traffic that may be dropped.
    /// Hands the message back when the pair queue is full, when messages to `dst` are waiting
    /// in overflow (to keep FIFO), or when `dst >= cores()`.
    pub fn try_send(&mut self, dst: usize, msg: T) -> Result<(), T> {
        let weight = (self.weigh)(&msg);
        if dst == self.core {
            if self.local.len() >= self.capacity {
                return Err(msg);
            }
            self.local_bytes += weight;
            self.local.push_back(msg);
            self.mark(dst);
            return Ok(());
        }
        match (self.outbound.get(dst), self.overflow.get(dst), self.sent.get_mut(dst)) {
            (Some(Some(pair)), Some(overflow), Some(sent)) if overflow.is_empty() => {
                pair.queue.push(msg)?;
                *sent += weight as u64;
                self.mark(dst);
                Ok(())
            }
            _ => Err(msg),
        }
    }

    /// Moves overflow into the queues while there is room, then rings every destination that
    /// received anything since the last flush, once each. Call it once per loop turn, after the
    /// turn's sends.
    pub fn flush(&mut self) {
        if self.overflow_len > 0 {
            self.move_overflow();
        }
        for dst in self.dirty.drain(..) {
            if let (Some(flag), Some(bell)) = (self.is_dirty.get_mut(dst), self.bells.get(dst)) {
                *flag = false;
                bell.ring();
            }
        }
    }

    /// Messages waiting in this endpoint's overflow (all destinations).
    pub fn pending_overflow(&self) -> usize {
        self.overflow_len
    }

    /// Messages for `dst` waiting in this endpoint's overflow (its queue is full).
    pub fn overflow_to(&self, dst: usize) -> usize {
        self.overflow.get(dst).map_or(0, VecDeque::len)
    }

    /// Weight (bytes, by the mesh's weight function) of the messages this endpoint handed to
    /// `dst` that `dst` has not taken yet: its pair queue and this endpoint's overflow for it.
    /// What `dst` took in a drain still running on its thread counts until that drain ends.
    pub fn queued_bytes(&self, dst: usize) -> usize {
        if dst == self.core {
            return self.local_bytes;
        }
        match (self.outbound.get(dst), self.sent.get(dst)) {
            (Some(Some(pair)), Some(sent)) => {
                let queued = sent.wrapping_sub(pair.taken.load(Ordering::Acquire));
                usize::try_from(queued).unwrap_or(usize::MAX)
            }
            _ => 0,
        }
    }

    /// Delivers up to `budget` inbound messages to `f(src, msg)`, in FIFO order per source,
    /// round-robin across sources (at most `min(16, budget / cores)`, but at least one, from one
    /// source before moving to the next; the starting source rotates between calls). Returns how many were delivered.
    ///
    /// Clears this core's doorbell flag first, so anything pushed after the pops rings again.
    /// When it stops because of the budget with messages still queued, it rings its own
    /// doorbell, so the next [`Doorbell::wait`] returns at once: callers never need to track
    /// "more to do" themselves.
    pub fn drain(&mut self, budget: usize, mut f: impl FnMut(usize, T)) -> usize {
        if budget == 0 {
            return 0;
        }
        let Some(bell) = self.bells.get(self.core) else { return 0 };
        bell.clear();
        if self.overflow_len > 0 {
            // The wakeup may have been a consumer making room for our overflow: act on it here,
            // after the clear, so it cannot be lost whatever order the loop calls flush in.
            self.flush();
        }

        let cores = self.inbound.len();
        let start = self.cursor;
        self.cursor = if start + 1 >= cores { 0 } else { start + 1 };
        // Per-source share of one pass: small budgets are still split across sources.
        let quantum = (budget / cores).clamp(1, QUANTUM);
        let mut remaining = budget;
        loop {
            let before = remaining;
            for i in 0..cores {
                if remaining == 0 {
                    break;
                }
                let src = if start + i >= cores { start + i - cores } else { start + i };
                let quota = remaining.min(quantum);
                let mut taken = 0;
                let mut bytes = 0;
                if src == self.core {
                    while taken < quota {
                        let Some(msg) = self.local.pop_front() else { break };
                        bytes += (self.weigh)(&msg);
                        f(src, msg);
                        taken += 1;
                    }
                    self.local_bytes -= bytes;
                } else if let Some(Some(pair)) = self.inbound.get(src) {
                    while taken < quota {
                        let Some(msg) = pair.queue.pop() else { break };
                        bytes += (self.weigh)(&msg);
                        f(src, msg);
                        taken += 1;
                    }
                    if bytes > 0 {
                        // Single writer (this consumer): a plain add, published for the producer.
                        pair.taken.fetch_add(bytes as u64, Ordering::Release);
                    }
                }
                remaining -= taken;
            }
            if remaining == 0 || remaining == before {
                break;
            }
        }
        let delivered = budget - remaining;

        if delivered > 0 {
            self.wake_waiting_producers();
        }
        if remaining == 0 && self.has_inbound() {
            // Stopped by the budget: make the next wait return immediately.
            if let Some(bell) = self.bells.get(self.core) {
                bell.ring();
            }
        }
        delivered
    }

    /// Hands over the read end of this core's doorbell (non-blocking), once; `None` afterwards.
    /// Wrap it with [`Doorbell::new`] on the core's executor.
    pub fn take_doorbell(&mut self) -> Option<StdUnixStream> {
        self.doorbell.take()
    }

    /// A handle that rings `core`'s doorbell from any thread (e.g. a signal thread asking the
    /// cores to shut down); `None` when `core >= cores()`.
    pub fn waker(&self, core: usize) -> Option<Waker> {
        (core < self.bells.len()).then(|| Waker { bells: self.bells.clone(), core })
    }

    fn mark(&mut self, dst: usize) {
        if let Some(flag) = self.is_dirty.get_mut(dst) {
            if !*flag {
                *flag = true;
                self.dirty.push(dst);
            }
        }
    }

    /// Moves as much overflow as fits into the pair queues; where some remains, raises the
    /// pair's `producer_waiting` flag so the consumer rings us when it makes room.
    fn move_overflow(&mut self) {
        for dst in 0..self.overflow.len() {
            let (Some(Some(pair)), Some(overflow)) = (self.outbound.get(dst), self.overflow.get_mut(dst))
            else {
                continue;
            };
            if overflow.is_empty() {
                continue;
            }
            let mut moved = push_from(&pair.queue, overflow);
            if !overflow.is_empty() {
                // Dekker-style handshake with `wake_waiting_producers`: we raise the flag then
                // retry the push; the consumer pops then reads the flag, with a SeqCst fence on
                // each side. Either our retry sees the room the consumer made, or the consumer
                // sees the flag and rings us.
                pair.producer_waiting.store(true, Ordering::Relaxed);
                fence(Ordering::SeqCst);
                moved += push_from(&pair.queue, overflow);
            }
            if overflow.is_empty() {
                pair.producer_waiting.store(false, Ordering::Relaxed);
            }
            self.overflow_len -= moved;
            if moved > 0 {
                if let Some(flag) = self.is_dirty.get_mut(dst) {
                    if !*flag {
                        *flag = true;
                        self.dirty.push(dst);
                    }
                }
            }
        }
    }

    /// After pops: ring each source that is waiting for room (see `move_overflow`).
    fn wake_waiting_producers(&self) {
        fence(Ordering::SeqCst);
        for (src, pair) in self.inbound.iter().enumerate() {
            let Some(pair) = pair else { continue };
            if pair.producer_waiting.load(Ordering::Relaxed)
                && pair.producer_waiting.swap(false, Ordering::Relaxed)
            {
                if let Some(bell) = self.bells.get(src) {
                    bell.ring();
                }
            }
        }
    }

    fn has_inbound(&self) -> bool {
        !self.local.is_empty() || self.inbound.iter().flatten().any(|pair| !pair.queue.is_empty())
    }
}

/// Pushes from the front of `from` into `queue` until it is full or `from` is empty.
fn push_from<T>(queue: &ArrayQueue<T>, from: &mut VecDeque<T>) -> usize {
    let mut moved = 0;
    while let Some(msg) = from.pop_front() {
        if let Err(msg) = queue.push(msg) {
            from.push_front(msg);
            break;
        }
        moved += 1;
    }
    moved
}

/// Rings one core's doorbell from any thread. Cheap to clone.
#[derive(Clone)]
pub struct Waker {
    bells: Arc<[Bell]>,
    core: usize,
}

impl Waker {
    /// Wakes the core (a no-op if a wakeup is already pending).
    pub fn wake(&self) {
        if let Some(bell) = self.bells.get(self.core) {
            bell.ring();
        }
    }

    /// The core this waker rings.
    pub fn core(&self) -> usize {
        self.core
    }
}

impl fmt::Debug for Waker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Waker").field("core", &self.core).finish()
    }
}

/// The glommio side of a core's doorbell.
pub struct Doorbell {
    stream: glommio::net::UnixStream,
    /// A second descriptor of the same socket, to drain surplus bytes with MSG_DONTWAIT
    /// without going through the reactor.
    spare: socket2::Socket,
}

impl fmt::Debug for Doorbell {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Doorbell").finish_non_exhaustive()
    }
}

impl Doorbell {
    /// Wraps the read end from [`MeshEndpoint::take_doorbell`]. Must be called on the glommio
    /// executor that will wait on it (glommio panics otherwise, as for any of its sockets).
    pub fn new(read_end: StdUnixStream) -> io::Result<Doorbell> {
        // The socket must be in blocking mode: io_uring completes a read on an O_NONBLOCK
        // socket at once with EAGAIN instead of waiting, which would turn `wait` into a spin.
        // (O_NONBLOCK belongs to the open file, so the duplicate must not set it either.)
        read_end.set_nonblocking(false)?;
        let spare = socket2::Socket::from(read_end.try_clone()?);
        let fd = read_end.into_raw_fd();
        // SAFETY: `fd` comes from `into_raw_fd` on an open Unix stream socket, so it is valid and
        // owned by nobody else; glommio's stream takes that ownership and closes it on drop.
        #[allow(unsafe_code)]
        let stream = unsafe { glommio::net::UnixStream::from_raw_fd(fd) };
        Ok(Doorbell { stream, spare })
    }

    /// Waits until the doorbell has been rung since the last wait, then consumes every pending
    /// ring. Cancel-safe: dropping the future consumes nothing.
    ///
    /// An error means the doorbell is unusable (`UnexpectedEof`: every write end is gone, i.e.
    /// the whole mesh was dropped); the loop should treat the mesh as closed rather than wait
    /// again, which would return at once.
    pub async fn wait(&mut self) -> io::Result<()> {
        let mut buf = [0u8; DOORBELL_READ];
        let n = self.stream.read(&mut buf).await?;
        if n == 0 {
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "mesh doorbell closed"));
        }
        if n == buf.len() {
            let mut spare = [std::mem::MaybeUninit::<u8>::uninit(); DOORBELL_READ];
            loop {
                match self.spare.recv_with_flags(&mut spare, libc::MSG_DONTWAIT) {
                    Ok(n) if n == spare.len() => continue,
                    Ok(_) => break,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err(e),
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::io::Read;

    /// Bytes pending on a (non-blocking) doorbell read end.
    fn pending_bytes(rx: &StdUnixStream) -> usize {
        let mut total = 0;
        let mut buf = [0u8; 256];
        loop {
            match (&*rx).read(&mut buf) {
                Ok(0) => return total,
                Ok(n) => total += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return total,
                Err(e) => panic!("{e}"),
            }
        }
    }

    fn mesh(cores: usize, capacity: usize) -> (Vec<MeshEndpoint<u32>>, Vec<StdUnixStream>) {
        let mut eps = Mesh::<u32>::new(cores, capacity).unwrap();
        let rxs = eps.iter_mut().map(|ep| ep.take_doorbell().unwrap()).collect();
        (eps, rxs)
    }

    fn collect(ep: &mut MeshEndpoint<u32>, budget: usize) -> Vec<(usize, u32)> {
        let mut out = Vec::new();
        ep.drain(budget, |src, m| out.push((src, m)));
        out
    }

    #[test]
    fn rejects_bad_sizes() {
        assert!(Mesh::<u32>::new(0, 4).is_err());
        assert!(Mesh::<u32>::new(257, 4).is_err());
        assert!(Mesh::<u32>::new(2, 0).is_err());
        assert_eq!(Mesh::<u32>::new(3, 1).unwrap().len(), 3);
    }

    #[test]
    fn burst_costs_one_ring_and_rings_again_after_drain() {
        let (mut eps, rxs) = mesh(2, 1024);
        for i in 0..100 {
            eps[0].send(1, i).unwrap();
        }
        assert_eq!(pending_bytes(&rxs[1]), 0, "sends alone do not ring");
        eps[0].flush();
        eps[0].flush();
        assert_eq!(pending_bytes(&rxs[1]), 1, "one ring for the burst");
        assert_eq!(pending_bytes(&rxs[0]), 0);

        // More sends before the consumer drains: already rung, no new byte.
        eps[0].send(1, 100).unwrap();
        eps[0].flush();
        assert_eq!(pending_bytes(&rxs[1]), 0);

        let got = collect(&mut eps[1], usize::MAX);
        assert_eq!(got, (0..=100).map(|i| (0, i)).collect::<Vec<_>>());

        eps[0].send(1, 7).unwrap();
        eps[0].flush();
        assert_eq!(pending_bytes(&rxs[1]), 1, "rings again after a drain");
    }

    #[test]
    fn overflow_keeps_fifo_and_try_send_does_not_jump_it() {
        let (mut eps, _rxs) = mesh(2, 2);
        for i in 0..10 {
            eps[0].send(1, i).unwrap();
        }
        assert_eq!(eps[0].pending_overflow(), 8);
        assert_eq!((eps[0].overflow_to(1), eps[0].overflow_to(0), eps[0].overflow_to(7)), (8, 0, 0));
        assert_eq!(eps[0].try_send(1, 99), Err(99), "overflow non-empty");
        let mut got = Vec::new();
        while got.len() < 10 {
            eps[0].flush();
            got.extend(collect(&mut eps[1], 1).into_iter().map(|(_, m)| m));
        }
        assert_eq!(got, (0..10).collect::<Vec<_>>());
        assert_eq!(eps[0].pending_overflow(), 0);
        assert_eq!(eps[0].try_send(1, 10), Ok(()));
        assert_eq!(eps[0].try_send(1, 11), Ok(()));
        assert_eq!(eps[0].try_send(1, 12), Err(12), "queue full");
    }

    #[test]
    fn consumer_rings_a_producer_waiting_for_room() {
        let (mut eps, rxs) = mesh(2, 1);
        eps[0].send(1, 1).unwrap();
        eps[0].send(1, 2).unwrap();
        eps[0].flush();
        assert_eq!(pending_bytes(&rxs[0]), 0);
        assert_eq!(collect(&mut eps[1], 8), vec![(0, 1)]);
        assert_eq!(pending_bytes(&rxs[0]), 1, "producer woken to flush its overflow");
        eps[0].flush();
        assert_eq!(eps[0].pending_overflow(), 0);
        assert_eq!(collect(&mut eps[1], 8), vec![(0, 2)]);
    }

    /// A loop that flushes before it drains: the room-made wakeup arrives while the producer's
    /// flag is still set from the previous wake, so no byte is written; the producer's drain
    /// (which clears the flag) must still move the overflow on.
    #[test]
    fn room_wakeup_survives_flush_before_drain() {
        let (mut eps, rxs) = mesh(2, 1);
        for i in 1..=3 {
            eps[0].send(1, i).unwrap();
        }
        eps[0].flush();
        assert_eq!(collect(&mut eps[1], 8), vec![(0, 1)]);
        assert_eq!(pending_bytes(&rxs[0]), 1, "woken for room");
        eps[0].flush(); // moves 2; 3 still waits
        assert_eq!(eps[0].pending_overflow(), 1);
        assert_eq!(collect(&mut eps[1], 8), vec![(0, 2)]); // rings 0 again: flag still set
        assert_eq!(pending_bytes(&rxs[0]), 0);
        pending_bytes(&rxs[1]); // discard the rings consumer 1 has already acted on
        assert_eq!(collect(&mut eps[0], 8), vec![]);
        assert_eq!(eps[0].pending_overflow(), 0, "drain moved the overflow");
        assert_eq!(pending_bytes(&rxs[1]), 1, "and rang its destination");
        assert_eq!(collect(&mut eps[1], 8), vec![(0, 3)]);
    }

    #[test]
    fn budget_exhaustion_rings_self() {
        let (mut eps, rxs) = mesh(3, 64);
        for i in 0..5 {
            eps[0].send(2, i).unwrap();
            eps[1].send(2, 100 + i).unwrap();
        }
        eps[0].flush();
        eps[1].flush();
        assert_eq!(pending_bytes(&rxs[2]), 1);
        let first = collect(&mut eps[2], 4);
        assert_eq!(first.len(), 4);
        assert_eq!(pending_bytes(&rxs[2]), 1, "left-over messages re-ring");
        let rest = collect(&mut eps[2], 100);
        assert_eq!(rest.len(), 6);
        assert_eq!(pending_bytes(&rxs[2]), 0, "nothing left: no ring");
        // Both sources were served in the first, budget-limited call.
        assert!(first.iter().any(|&(s, _)| s == 0) && first.iter().any(|&(s, _)| s == 1));
    }

    #[test]
    fn round_robin_does_not_starve() {
        let (mut eps, _rxs) = mesh(3, 1024);
        for i in 0..500 {
            eps[0].send(2, i).unwrap();
        }
        eps[1].send(2, 7).unwrap();
        let got = collect(&mut eps[2], 2 * QUANTUM);
        assert!(got.contains(&(1, 7)));
    }

    #[test]
    fn loopback_and_bad_destination() {
        let (mut eps, rxs) = mesh(2, 2);
        eps[0].send(0, 1).unwrap();
        eps[0].send(0, 2).unwrap();
        eps[0].send(0, 3).unwrap();
        assert_eq!(eps[0].try_send(0, 4), Err(4));
        assert_eq!(eps[0].send(2, 5), Err(5));
        assert_eq!(eps[0].try_send(9, 6), Err(6));
        eps[0].flush();
        assert_eq!(pending_bytes(&rxs[0]), 1);
        assert_eq!(collect(&mut eps[0], 10), vec![(0, 1), (0, 2), (0, 3)]);
    }

    #[test]
    fn waker_rings_once_until_cleared() {
        let (mut eps, rxs) = mesh(2, 4);
        let w = eps[0].waker(1).unwrap();
        assert!(eps[0].waker(2).is_none());
        std::thread::spawn(move || {
            w.wake();
            w.wake();
        })
        .join()
        .unwrap();
        assert_eq!(pending_bytes(&rxs[1]), 1);
        assert_eq!(collect(&mut eps[1], 4), vec![]);
        eps[0].waker(1).unwrap().wake();
        assert_eq!(pending_bytes(&rxs[1]), 1);
    }

    /// The bytes queued toward a destination count its pair queue and the sender's overflow,
    /// and fall as the consumer drains; messages a full queue refused (`try_send`) never count.
    #[test]
    fn queued_bytes_follow_what_the_consumer_has_not_taken() {
        let mut eps = Mesh::<u32>::with_weight(2, 2, |m| *m as usize).unwrap();
        for w in [100, 200, 300, 400] {
            eps[0].send(1, w).unwrap();
        }
        assert!(eps[0].try_send(1, 5000).is_err(), "queue full, overflow waiting");
        eps[0].send(0, 7).unwrap();
        assert_eq!((eps[0].queued_bytes(1), eps[0].queued_bytes(0), eps[1].queued_bytes(0)), (1000, 7, 0));
        assert_eq!(collect(&mut eps[1], 1), vec![(0, 100)]);
        assert_eq!(eps[0].queued_bytes(1), 900);
        eps[0].flush();
        assert_eq!(collect(&mut eps[1], 8), vec![(0, 200), (0, 300)]);
        assert_eq!(eps[0].queued_bytes(1), 400, "the overflow still counts");
        eps[0].flush();
        assert_eq!(collect(&mut eps[1], 8), vec![(0, 400)]);
        assert_eq!(collect(&mut eps[0], 8), vec![(0, 7)]);
        assert_eq!((eps[0].queued_bytes(1), eps[0].queued_bytes(0)), (0, 0));
    }

    #[test]
    fn undelivered_messages_are_dropped_with_the_mesh() {
        let marker = Arc::new(());
        let mut eps = Mesh::<Arc<()>>::new(2, 1).unwrap();
        for _ in 0..3 {
            eps[0].send(1, marker.clone()).unwrap();
        }
        drop(eps);
        assert_eq!(Arc::strong_count(&marker), 1);
    }
}
