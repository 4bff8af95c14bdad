//! Starting and stopping the cores: binds one SO_REUSEPORT socket per core (in shard order,
//! so the steering program's socket index is the shard), builds the mesh, and runs one pinned
//! glommio executor per core.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use anyhow::{anyhow, bail, Context};
use glommio::{LocalExecutorBuilder, Placement};
use tracing::{info, warn};

use super::app::{AppFactory, ShardApp};
use super::cid::{self, ShardId};
use super::mesh::{Mesh, MeshEndpoint, Waker};
use super::shard::{MeshMsg, Shard, ShardParts};
use super::stats::{ShardReport, ShardStats};
use super::{tls, udp, RuntimeConfig};
use crate::tcp::{StreamAcceptor, HANDOFF_QUEUE};
use crossbeam_queue::ArrayQueue;

/// Messages one core can queue for another before the sender sees "full": 4096 on small
/// machines, less per pair as cores grow so the queues (allocated up front, cores² of them)
/// stay within tens of MiB.
fn mesh_capacity(cores: usize) -> usize {
    (16_384 / cores.max(1)).clamp(256, 4096)
}
/// glommio's registered I/O buffer per core is at most this (we do no file I/O).
const MAX_IO_MEMORY: usize = 1 << 20;

/// A running server.
pub struct ServerHandle {
    local_addr: SocketAddr,
    fingerprint: String,
    identity: Arc<Mutex<tls::Identity>>,
    stats: Arc<[ShardStats]>,
    shutdown: Arc<AtomicBool>,
    wakers: Vec<Waker>,
    threads: Vec<glommio::ExecutorJoinHandle<ShardReport>>,
    reloader: TlsReloader,
    streams: StreamAcceptor,
}

/// A new TLS identity for the cores: each core picks it up at its next turn (one relaxed
/// load per turn) and builds its own quiche config from it. Connections already open keep
/// the identity they were made with.
#[derive(Default)]
pub(crate) struct TlsSwap {
    /// The application's ALPNs ([`AppFactory::alpns`]), which every server config offers.
    pub(crate) alpns: Vec<String>,
    pub(crate) generation: AtomicU64,
    pub(crate) material: Mutex<Option<Arc<tls::TlsMaterial>>>,
}

/// Reloads the certificate and key files (SIGHUP, or when they change) from any thread.
#[derive(Clone)]
pub struct TlsReloader {
    rc: RuntimeConfig,
    swap: Arc<TlsSwap>,
    wakers: Vec<Waker>,
    /// The identity new connections get: the one loaded at start, then each reloaded one.
    identity: Arc<Mutex<tls::Identity>>,
}

impl TlsReloader {
    /// Loads the identity again (PEM files; a self-signed one is generated anew) and hands it
    /// to every core. Returns the new fingerprint; on error the cores keep the old identity.
    pub fn reload(&self) -> anyhow::Result<String> {
        let material = tls::load_identity(&self.rc)?;
        // Fail here, not on a core, if quiche refuses it.
        material.server_config(&self.rc, &self.swap.alpns)?;
        let fingerprint = material.fingerprint().to_string();
        let identity = material.identity().clone();
        match self.swap.material.lock() {
            Ok(mut m) => *m = Some(Arc::new(material)),
            Err(_) => bail!("a core panicked while holding the TLS identity"),
        }
        self.swap.generation.fetch_add(1, Ordering::Release);
        for w in &self.wakers {
            w.wake();
        }
        match self.identity.lock() {
            Ok(mut current) => *current = identity,
            Err(poisoned) => *poisoned.into_inner() = identity,
        }
        Ok(fingerprint)
    }

    /// The identity new connections get (after the last successful [`TlsReloader::reload`]).
    pub fn identity(&self) -> tls::Identity {
        current(&self.identity)
    }

    /// A TLS context for HTTPS over TCP with the identity in force (the web listener builds
    /// one per connection, so it follows reloads). `None` if the lock was poisoned or the
    /// context could not be built.
    pub fn https_context(&self) -> Option<boring::ssl::SslContext> {
        let material = self.swap.material.lock().ok()?.clone()?;
        material.https_context().map_err(|e| warn!(error = %e, "HTTPS context")).ok()
    }

    /// The files to watch for changes (none for a self-signed identity).
    pub fn files(&self) -> Vec<std::path::PathBuf> {
        match &self.rc.tls {
            super::TlsSource::Files { cert, key } => vec![cert.clone(), key.clone()],
            super::TlsSource::SelfSigned => Vec::new(),
        }
    }
}

/// Something that can ask the server to stop from any thread (a signal handler thread).
#[derive(Clone)]
pub struct ShutdownTrigger {
    shutdown: Arc<AtomicBool>,
    wakers: Vec<Waker>,
}

impl ShutdownTrigger {
    /// Whether shutdown (the drain) has begun.
    pub fn is_triggered(&self) -> bool {
        self.shutdown.load(Ordering::Acquire)
    }

    /// A trigger tied to no server (tests of what reads it).
    pub fn detached() -> Self {
        ShutdownTrigger { shutdown: Arc::new(AtomicBool::new(false)), wakers: Vec::new() }
    }

    /// Stop accepting, close every connection (within the drain timeout), end the cores.
    pub fn trigger(&self) {
        self.shutdown.store(true, Ordering::Release);
        for w in &self.wakers {
            w.wake();
        }
    }
}

impl ServerHandle {
    /// The bound address (with the port the kernel chose when the configured port was 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// SHA-256 fingerprint of the server certificate loaded at start (`AB:CD:...`); after a
    /// reload, [`ServerHandle::identity`] has the current one.
    pub fn fingerprint(&self) -> &str {
        &self.fingerprint
    }

    /// The identity new connections get: the one loaded at start, or the last one reloaded.
    pub fn identity(&self) -> tls::Identity {
        current(&self.identity)
    }

    /// Per-core counters.
    pub fn stats(&self) -> &[ShardStats] {
        &self.stats
    }

    /// The same counters, shared (for the metrics endpoint's thread).
    pub fn stats_arc(&self) -> Arc<[ShardStats]> {
        self.stats.clone()
    }

    /// Something that reloads the TLS identity from any thread.
    /// What hands connections over TCP (QMux after a WebSocket upgrade) to the cores.
    pub fn stream_acceptor(&self) -> StreamAcceptor {
        self.streams.clone()
    }

    /// What reloads the TLS identity on every core (SIGHUP, a file change).
    pub fn tls_reloader(&self) -> TlsReloader {
        self.reloader.clone()
    }

    /// Doorbells of the cores (index: core): a thread that hands a core work rings it.
    pub fn wakers(&self) -> Vec<Waker> {
        self.wakers.clone()
    }

    /// What starts the graceful shutdown of every core.
    pub fn shutdown_trigger(&self) -> ShutdownTrigger {
        ShutdownTrigger { shutdown: self.shutdown.clone(), wakers: self.wakers.clone() }
    }

    /// Stops the server and waits for every core. Returns each core's report.
    pub fn shutdown(self) -> anyhow::Result<Vec<ShardReport>> {
        self.shutdown_trigger().trigger();
        self.join()
    }

    /// Waits until the cores stop (after a [`ShutdownTrigger`] fired).
    pub fn join(self) -> anyhow::Result<Vec<ShardReport>> {
        self.threads
            .into_iter()
            .map(|t| t.join().map_err(|e| anyhow!("core stopped with an error: {e}")))
            .collect()
    }
}

/// Starts `rc.cores` cores serving QUIC on `rc.listen`, each running `app` on its connections.
pub fn start<F: AppFactory>(rc: RuntimeConfig, app: Arc<F>) -> anyhow::Result<ServerHandle> {
    if rc.cores == 0 || rc.cores > 256 {
        bail!(
            "cores must be between 1 and 256 (connection IDs carry the core in one byte), got {}",
            rc.cores
        );
    }
    let material = tls::load_identity(&rc)?;
    let fingerprint = material.fingerprint().to_string();
    let identity = Arc::new(Mutex::new(material.identity().clone()));
    let (sockets, addr) = bind_sockets(&rc)?;
    let secret = match rc.secret {
        Some(s) => s,
        None => cid::generate_secret(&ring::rand::SystemRandom::new())
            .map_err(|_| anyhow!("the system random number generator failed"))?,
    };
    let stats: Arc<[ShardStats]> = (0..rc.cores).map(|_| ShardStats::default()).collect();
    let shutdown = Arc::new(AtomicBool::new(false));
    let swap = Arc::new(TlsSwap { alpns: app.alpns(), ..TlsSwap::default() });
    let outbound_alpns = app.outbound_alpns();
    // The identity in force (the cores take a new one only when the generation moves): what
    // the web listener's HTTPS uses until a reload replaces it.
    let material = Arc::new(material);
    if let Ok(mut m) = swap.material.lock() {
        *m = Some(material.clone());
    }
    let (mut endpoints, wakers) = mesh::<<F::Shard as ShardApp>::Msg>(rc.cores)?;
    let io_memory = io_memory_per_core(rc.cores);
    // Pin within the CPUs the process was given (its affinity mask), not CPUs 0..n-1.
    let allowed = udp::allowed_cpus()
        .unwrap_or_else(|| (0..std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)).collect());

    let handoff: Arc<[_]> = (0..rc.cores).map(|_| Arc::new(ArrayQueue::new(HANDOFF_QUEUE))).collect();
    let (ready_tx, ready_rx) = mpsc::channel::<usize>();
    let mut threads = Vec::with_capacity(rc.cores);
    for (i, ((socket, gro), mesh)) in sockets.into_iter().zip(endpoints.drain(..)).enumerate() {
        let cpu = allowed.get(i % allowed.len().max(1)).copied().unwrap_or(0);
        let placement = if rc.pin { Placement::Fixed(cpu) } else { Placement::Unbound };
        let quic_config = material.server_config(&rc, &swap.alpns)?;
        let client_config = tls::upstream_config(&rc, &outbound_alpns)?;
        let parts = ShardParts {
            client_config,
            tls_swap: swap.clone(),
            id: ShardId(i as u8),
            socket,
            quic_config,
            mesh,
            app: app.clone(),
            secret,
            stats: stats.clone(),
            shutdown: shutdown.clone(),
            gro,
            handoff: handoff[i].clone(),
        };
        let rc = rc.clone();
        let ready = ready_tx.clone();
        let handle = LocalExecutorBuilder::new(placement)
            .name(&format!("moq-edge-core{i}"))
            .io_memory(io_memory)
            .spawn(move || async move {
                let shard = match Shard::new(&rc, parts) {
                    Ok(s) => s,
                    Err(e) => {
                        warn!(core = i, error = %e, "core failed to start");
                        return ShardReport::default();
                    }
                };
                let _ = ready.send(i);
                shard.run().await
            })
            .map_err(|e| io_uring_hint(anyhow!("starting core {i}: {e}")))?;
        threads.push(handle);
    }
    drop(ready_tx);
    // Wait until every core runs; a core whose executor could not start (io_uring refused)
    // never reports, and its thread's error explains why.
    let started = (0..rc.cores).all(|_| ready_rx.recv_timeout(Duration::from_secs(10)).is_ok());
    let reloader = TlsReloader { rc: rc.clone(), swap, wakers: wakers.clone(), identity: identity.clone() };
    let streams = StreamAcceptor::new(handoff, wakers.clone());
    let handle = ServerHandle {
        local_addr: addr,
        fingerprint,
        identity,
        stats,
        shutdown,
        wakers,
        threads,
        reloader,
        streams,
    };
    if !started {
        return Err(io_uring_hint(match handle.shutdown() {
            Err(e) => e,
            Ok(_) => anyhow!("a core did not start"),
        }));
    }
    info!(%addr, cores = rc.cores, io_memory, "serving QUIC");
    Ok(handle)
}

/// The mesh's endpoints, one per core, and a waker for each core's doorbell.
#[allow(clippy::type_complexity)]
fn mesh<M: Send + 'static>(cores: usize) -> anyhow::Result<(Vec<MeshEndpoint<MeshMsg<M>>>, Vec<Waker>)> {
    let endpoints = Mesh::<MeshMsg<M>>::with_weight(cores, mesh_capacity(cores), MeshMsg::weight)
        .context("creating the mesh")?;
    let wakers = (0..cores).filter_map(|i| endpoints.first().and_then(|e| e.waker(i))).collect();
    Ok((endpoints, wakers))
}

/// One SO_REUSEPORT socket per core, bound in shard order (socket index in the reuseport
/// group == shard), the steering program attached to the first; and the address they serve
/// (the port the first was given, when `rc.listen` asked for any).
fn bind_sockets(rc: &RuntimeConfig) -> anyhow::Result<(Vec<(socket2::Socket, bool)>, SocketAddr)> {
    let mut sockets = Vec::with_capacity(rc.cores);
    let mut addr = rc.listen;
    for i in 0..rc.cores {
        let (socket, gro) = udp::bind_reuseport(addr).with_context(|| format!("binding UDP {addr}"))?;
        if i == 0 {
            addr = socket.local_addr()?.as_socket().unwrap_or(addr);
            if rc.steering && rc.cores > 1 {
                if let Err(e) = udp::attach_steering(&socket) {
                    warn!(error = %e, "reuseport steering program refused; the mesh hands packets over instead");
                }
            }
        }
        sockets.push((socket, gro));
    }
    Ok((sockets, addr))
}

/// A copy of the shared identity (a poisoned lock still holds a whole value: it is only ever
/// replaced in one assignment).
fn current(identity: &Mutex<tls::Identity>) -> tls::Identity {
    match identity.lock() {
        Ok(i) => i.clone(),
        Err(poisoned) => poisoned.into_inner().clone(),
    }
}

/// glommio registers `io_memory` bytes per executor as locked memory; the sum must fit under
/// RLIMIT_MEMLOCK (8 MiB by default) with room to spare, or registration fails.
fn io_memory_per_core(cores: usize) -> usize {
    let limit = udp::memlock_limit().map_or(usize::MAX, |l| usize::try_from(l).unwrap_or(usize::MAX));
    let share = (limit / 2) / cores.max(1);
    share.clamp(64 << 10, MAX_IO_MEMORY)
}

/// Adds what to do when the executor could not start: the usual cause is io_uring.
fn io_uring_hint(e: anyhow::Error) -> anyhow::Error {
    e.context(
        "could not start a glommio executor: moq-edge needs io_uring (Linux 5.8 or newer, not \
         disabled by sysctl kernel.io_uring_disabled, and allowed by the seccomp profile: \
         containers need a profile that permits io_uring_setup/io_uring_enter/io_uring_register) \
 and RLIMIT_MEMLOCK of at least 512 KiB (ulimit -l)",
    )
}
