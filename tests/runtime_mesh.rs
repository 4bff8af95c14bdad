//! Cross-core mesh tests: per-(source, destination) FIFO under random interleavings, no lost
//! wakeups (every blocking wait has a generous timeout that only a lost wakeup can hit), and the
//! glommio doorbell.
#![allow(clippy::unwrap_used)]

use std::io::{self, Read};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use moq_edge::runtime::mesh::{Doorbell, Mesh, MeshEndpoint, Waker};
use proptest::collection::vec;
use proptest::prelude::*;

/// Only a lost wakeup makes a blocking wait last this long.
const LOST_WAKEUP: Duration = Duration::from_secs(20);

/// A message: (source core, sequence number on that (source, destination) pair).
type Msg = (usize, u32);

/// Blocks on a doorbell read end until it is rung; Err if it is not rung within `LOST_WAKEUP`.
fn block_on_doorbell(rx: &UnixStream) -> Result<(), String> {
    let mut buf = [0u8; 64];
    loop {
        match (&*rx).read(&mut buf) {
            Ok(0) => return Err("doorbell closed".into()),
            Ok(_) => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {
                return Err(format!("lost wakeup: doorbell silent for {LOST_WAKEUP:?}"))
            }
            Err(e) => return Err(e.to_string()),
        }
    }
}

fn blocking_doorbell(ep: &mut MeshEndpoint<Msg>) -> UnixStream {
    let rx = ep.take_doorbell().unwrap();
    rx.set_nonblocking(false).unwrap();
    rx.set_read_timeout(Some(LOST_WAKEUP)).unwrap();
    rx
}

#[derive(Debug, Clone)]
enum Op {
    /// `send` to `dst % cores` (own core included: loopback).
    Send(usize),
    TrySend(usize),
    Flush,
    Drain(usize),
    Yield,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0..8usize).prop_map(Op::Send),
        2 => (0..8usize).prop_map(Op::TrySend),
        1 => Just(Op::Flush),
        2 => (1..6usize).prop_map(Op::Drain),
        1 => Just(Op::Yield),
    ]
}

struct Shared {
    cores: usize,
    /// Producers that have finished their script.
    done: AtomicUsize,
    /// Messages accepted for each destination (by `send`, or `try_send` returning Ok).
    accepted_for: Vec<AtomicUsize>,
    wakers: Vec<Waker>,
}

/// What one core saw: `accepted[dst]` = sequence numbers it got accepted for `dst`, in order;
/// `received[src]` = sequence numbers it received from `src`, in order.
struct Log {
    accepted: Vec<Vec<u32>>,
    received: Vec<Vec<u32>>,
}

/// One core: runs its script (sends and drains interleaved), then keeps flushing and draining,
/// parking on its doorbell whenever there is nothing to do, until every message for it has
/// arrived and its own overflow is empty.
fn run_core(
    mut ep: MeshEndpoint<Msg>,
    script: Vec<Op>,
    final_budget: usize,
    flush_first: bool,
    shared: Arc<Shared>,
) -> Result<Log, String> {
    let me = ep.core();
    let cores = shared.cores;
    let rx = blocking_doorbell(&mut ep);
    let mut next_seq = vec![0u32; cores];
    let mut log = Log { accepted: vec![Vec::new(); cores], received: vec![Vec::new(); cores] };
    let mut received = 0usize;
    let mut bad = None;
    let mut drain = |ep: &mut MeshEndpoint<Msg>, budget: usize, log: &mut Log, received: &mut usize| {
        ep.drain(budget, |src, (from, seq)| {
            if src != from {
                bad = Some(format!("core {me}: message from {from} reported as from {src}"));
            }
            log.received[src].push(seq);
            *received += 1;
        })
    };

    for op in script {
        match op {
            Op::Send(d) | Op::TrySend(d) => {
                let dst = d % cores;
                let seq = next_seq[dst];
                next_seq[dst] += 1;
                let ok = match op {
                    Op::Send(_) => ep.send(dst, (me, seq)).is_ok(),
                    _ => ep.try_send(dst, (me, seq)).is_ok(),
                };
                if matches!(op, Op::Send(_)) && !ok {
                    return Err(format!("core {me}: send to {dst} refused"));
                }
                if ok {
                    log.accepted[dst].push(seq);
                    shared.accepted_for[dst].fetch_add(1, Ordering::SeqCst);
                }
            }
            Op::Flush => ep.flush(),
            Op::Drain(budget) => {
                drain(&mut ep, budget, &mut log, &mut received);
            }
            Op::Yield => thread::yield_now(),
        }
    }
    ep.flush();
    shared.done.fetch_add(1, Ordering::SeqCst);
    for waker in &shared.wakers {
        waker.wake();
    }

    loop {
        // Both orders of flush and drain must work.
        if flush_first {
            ep.flush();
        }
        let n = drain(&mut ep, final_budget, &mut log, &mut received);
        if !flush_first {
            ep.flush();
        }
        if shared.done.load(Ordering::SeqCst) == cores
            && received == shared.accepted_for[me].load(Ordering::SeqCst)
            && ep.pending_overflow() == 0
        {
            break;
        }
        if n == 0 {
            // Nothing to do: park. New messages, room for our overflow, and the last producer
            // finishing all ring this doorbell.
            block_on_doorbell(&rx).map_err(|e| {
                format!(
                    "core {me}: {e} (received {received} of {}, overflow {}, done {})",
                    shared.accepted_for[me].load(Ordering::SeqCst),
                    ep.pending_overflow(),
                    shared.done.load(Ordering::SeqCst)
                )
            })?;
        }
    }
    match bad {
        Some(e) => Err(e),
        None => Ok(log),
    }
}

/// Runs one core per script on its own thread; checks that every (src, dst) sequence arrived
/// complete, in order, without duplicates.
fn check_mesh(
    capacity: usize,
    final_budget: usize,
    flush_first: bool,
    scripts: Vec<Vec<Op>>,
) -> Result<(), TestCaseError> {
    let cores = scripts.len();
    let eps = Mesh::<Msg>::new(cores, capacity).unwrap();
    let shared = Arc::new(Shared {
        cores,
        done: AtomicUsize::new(0),
        accepted_for: (0..cores).map(|_| AtomicUsize::new(0)).collect(),
        wakers: (0..cores).map(|c| eps[0].waker(c).unwrap()).collect(),
    });
    let handles: Vec<_> = eps
        .into_iter()
        .zip(scripts)
        .map(|(ep, script)| {
            let shared = shared.clone();
            thread::spawn(move || run_core(ep, script, final_budget, flush_first, shared))
        })
        .collect();
    let mut logs = Vec::new();
    for h in handles {
        match h.join() {
            Ok(Ok(log)) => logs.push(log),
            Ok(Err(e)) => return Err(TestCaseError::fail(e)),
            Err(_) => return Err(TestCaseError::fail("core thread panicked")),
        }
    }
    for src in 0..cores {
        for dst in 0..cores {
            prop_assert_eq!(
                &logs[dst].received[src],
                &logs[src].accepted[dst],
                "pair ({}, {}): received vs accepted",
                src,
                dst
            );
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    /// Random scripts on 2-4 cores, each core a thread that both produces and consumes, with
    /// tiny queues (overflow paths run) and small drain budgets.
    #[test]
    fn per_pair_order_is_kept(
        capacity in 1..=4usize,
        final_budget in 1..=8usize,
        flush_first in any::<bool>(),
        scripts in (2..=4usize).prop_flat_map(|cores| vec(vec(op(), 0..300), cores)),
    ) {
        check_mesh(capacity, final_budget, flush_first, scripts)?;
    }
}

/// A heavier fixed run: 4 cores each sending 20 000 messages round the mesh through 2-slot queues.
#[test]
fn heavy_traffic_through_tiny_queues() {
    let script: Vec<Op> = (0..20_000)
        .map(|i| match i % 10 {
            3 => Op::Flush,
            7 => Op::Drain(3),
            _ => Op::Send(i * 7 / 3),
        })
        .collect();
    check_mesh(2, 5, true, vec![script.clone(); 4]).unwrap();
    check_mesh(2, 5, false, vec![script; 4]).unwrap();
}

/// Runs `f` on a fresh glommio executor thread.
fn on_glommio<F, Fut>(f: F)
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + 'static,
{
    glommio::LocalExecutorBuilder::default()
        .name("mesh-test")
        .spawn(f)
        .expect("glommio executor failed to start (io_uring unavailable?)")
        .join()
        .unwrap();
}

/// Awaits one doorbell wait, or fails after `LOST_WAKEUP`.
async fn wait_or_fail(bell: &mut Doorbell) {
    let woke = futures_lite::future::or(async { bell.wait().await.map(|()| true) }, async {
        glommio::timer::sleep(LOST_WAKEUP).await;
        Ok(false)
    })
    .await
    .unwrap();
    assert!(woke, "doorbell wait did not return after a ring");
}

#[test]
fn glommio_doorbell_wakes_on_ring_from_another_thread() {
    let mut eps = Mesh::<u32>::new(2, 8).unwrap();
    let rx = eps[1].take_doorbell().unwrap();
    let waker = eps[0].waker(1).unwrap();
    let mut ep1 = eps.pop().unwrap();
    on_glommio(move || async move {
        let mut bell = Doorbell::new(rx).unwrap();
        // The ring comes while the executor is (most likely) parked in io_uring.
        let ringer = thread::spawn(move || {
            thread::sleep(Duration::from_millis(50));
            waker.wake();
        });
        wait_or_fail(&mut bell).await;
        ringer.join().unwrap();
        assert_eq!(ep1.drain(8, |_, _| {}), 0);

        // A ring that lands before the wait starts is not lost either.
        let waker = ep1.waker(1).unwrap();
        thread::spawn(move || waker.wake()).join().unwrap();
        wait_or_fail(&mut bell).await;
    });
    drop(eps);
}

/// A glommio consumer loop (wait → drain) against three std-thread producers that flush often
/// and park on their own doorbells while they hold overflow.
#[test]
fn glommio_consumer_loop_receives_everything_in_order() {
    const PER_PRODUCER: u32 = 30_000;
    let mut eps = Mesh::<Msg>::new(4, 4).unwrap();
    let consumer_rx = eps[0].take_doorbell().unwrap();
    let mut consumer = eps.remove(0);
    let producers: Vec<_> = eps
        .into_iter()
        .map(|mut ep| {
            thread::spawn(move || {
                let rx = blocking_doorbell(&mut ep);
                let me = ep.core();
                for seq in 0..PER_PRODUCER {
                    ep.send(0, (me, seq)).unwrap();
                    if seq % 5 == 0 {
                        ep.flush();
                    }
                }
                loop {
                    ep.flush();
                    if ep.pending_overflow() == 0 {
                        break;
                    }
                    block_on_doorbell(&rx).unwrap();
                    ep.drain(usize::MAX, |_, _| {});
                }
            })
        })
        .collect();

    on_glommio(move || async move {
        let mut bell = Doorbell::new(consumer_rx).unwrap();
        let mut next = [0u32; 4];
        let mut total = 0;
        while total < 3 * PER_PRODUCER {
            wait_or_fail(&mut bell).await;
            total += consumer.drain(64, |src, (from, seq)| {
                assert_eq!(src, from);
                assert_eq!(seq, next[src], "source {src} out of order");
                next[src] += 1;
            }) as u32;
        }
        assert_eq!(next, [0, PER_PRODUCER, PER_PRODUCER, PER_PRODUCER]);
    });
    for p in producers {
        p.join().unwrap();
    }
}
