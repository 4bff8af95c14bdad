//! The thread-per-core QUIC server over loopback, driven by `moq_edge::client`: ALPN
//! negotiation, many concurrent connections over two cores, packets that reach the wrong core,
//! stateless resets and Retry.
//!
//! Every wait is for an event (a handshake, an echoed FIN, a reply datagram) with one generous
//! overall deadline that only turns a hang into a failure; nothing here measures time.

use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, ensure, Context as _};
use moq_edge::client::{drive_many, raw_exchange, Exchange, QuicConn};
use moq_edge::runtime::app::{EchoApp, PerConnection};
use moq_edge::runtime::cid::{ResetKey, CID_LEN};
use moq_edge::runtime::tls;
use moq_edge::runtime::ConnApp;
use moq_edge::runtime::{self, RetryPolicy, RuntimeConfig, ServerHandle, ShardStats};
use ring::rand::{SecureRandom, SystemRandom};

/// Upper bound on any single wait; far beyond what any of these needs on a loaded machine.
const DEADLINE: Duration = Duration::from_secs(60);

/// TLS alert `no_application_protocol` (120) as a QUIC CRYPTO_ERROR (0x100 + alert).
const NO_APPLICATION_PROTOCOL: u64 = 0x100 + 120;

fn deadline() -> Instant {
    Instant::now() + DEADLINE
}

fn config(cores: usize) -> RuntimeConfig {
    let mut rc = RuntimeConfig::new(([127, 0, 0, 1], 0).into(), cores);
    // Tests share the machine with other tests; pinning would only add contention.
    rc.pin = false;
    rc
}

/// Echoes every stream on every connection, offering the MoQT server's ALPNs.
fn start(rc: RuntimeConfig) -> anyhow::Result<ServerHandle> {
    let echo = PerConnection::new(
        moq_edge::moqt::server_alpns(&moq_edge::wire::Version::ALL),
        |_: &[u8]| -> Box<dyn ConnApp> { Box::new(EchoApp::default()) },
    );
    runtime::start(rc, Arc::new(echo))
}

/// `counter` summed over all cores.
fn total(server: &ServerHandle, counter: impl Fn(&ShardStats) -> &AtomicU64) -> u64 {
    server.stats().iter().map(|s| ShardStats::get(counter(s))).sum()
}

fn shutdown(server: ServerHandle, cores: usize) -> anyhow::Result<()> {
    let reports = server.shutdown()?;
    ensure!(reports.len() == cores, "one report per core, got {}", reports.len());
    Ok(())
}

/// Distinct, position-dependent bytes for connection/request `n`, of a length that varies
/// with `n` (1..=4000, so some echoes span several packets).
fn payload(n: usize) -> Vec<u8> {
    let len = 1 + (n * 797) % 4000;
    let tag = format!("<{n}>");
    tag.bytes().cycle().take(len).collect()
}

fn random<const N: usize>() -> anyhow::Result<[u8; N]> {
    let mut out = [0u8; N];
    SystemRandom::new().fill(&mut out).map_err(|_| anyhow!("system RNG failed"))?;
    Ok(out)
}

#[test]
fn handshake_negotiates_each_moqt_alpn() -> anyhow::Result<()> {
    let server = start(config(1))?;
    ensure!(!server.fingerprint().is_empty());
    for alpn in ["moqt-16", "moqt-22"] {
        let mut conn = QuicConn::connect(server.local_addr(), alpn)?;
        conn.handshake(deadline()).with_context(|| format!("handshake with {alpn}"))?;
        assert_eq!(conn.alpn(), alpn.as_bytes());
        // The application runs on the negotiated connection.
        assert_eq!(conn.request(b"ping", deadline())?, b"ping");
        conn.close()?;
    }
    assert_eq!(total(&server, |s| &s.accepted), 2);
    shutdown(server, 1)
}

#[test]
fn unknown_alpn_is_refused() -> anyhow::Result<()> {
    let server = start(config(1))?;
    // h3 is served (WebTransport); h2 never is over QUIC.
    let mut conn = QuicConn::connect(server.local_addr(), "h2")?;
    let err = match conn.handshake(deadline()) {
        Ok(()) => panic!("handshake with ALPN h2 succeeded: {:?}", conn.alpn()),
        Err(e) => e,
    };
    let closed =
        err.peer_error().ok_or_else(|| anyhow!("expected a CONNECTION_CLOSE from the server, got {err}"))?;
    assert!(!closed.is_app, "{err}");
    assert_eq!(closed.error_code, NO_APPLICATION_PROTOCOL, "{err}");
    assert!(conn.alpn().is_empty());
    shutdown(server, 1)
}

/// A caller that is behind its schedule calls `drive_many` with deadlines already past, over
/// and over (moq-bench's publisher at a high object rate). Each call must still read what
/// arrived and fire timers, or the connection never hears an ACK and stalls.
#[test]
fn deadlines_already_past_still_make_progress() -> anyhow::Result<()> {
    let server = start(config(1))?;
    let mut conns = vec![QuicConn::connect(server.local_addr(), "moqt-16")?];
    // Far more than the initial congestion window: it cannot go through without ACKs.
    let big: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
    let mut exchange = Exchange::new(conns[0].next_bidi_stream(), big.clone());
    let give_up = Instant::now() + Duration::from_secs(10);
    let mut calls = 0u64;
    loop {
        let past = Instant::now() - Duration::from_millis(1);
        match drive_many(&mut conns, past, |_, c| exchange.progress(c.conn_mut())) {
            Ok(()) => break,
            Err(moq_edge::client::ClientError::Deadline) => {}
            Err(e) => return Err(e.into()),
        }
        calls += 1;
        ensure!(Instant::now() < give_up, "no progress after {calls} calls with past deadlines");
        // Let the server answer between calls without blocking in the client.
        std::thread::sleep(Duration::from_micros(200));
    }
    ensure!(exchange.reply() == big.as_slice(), "wrong echo");
    conns[0].close()?;
    shutdown(server, 1)
}

#[test]
fn two_hundred_connections_spread_over_two_cores() -> anyhow::Result<()> {
    const CONNS: usize = 200;
    let server = start(config(2))?;
    let addr = server.local_addr();
    // One config per ALPN for all connections (building one loads the system trust store).
    let mut configs = [tls::client_config(&["moqt-16"], false)?, tls::client_config(&["moqt-22"], false)?];
    let mut conns = Vec::with_capacity(CONNS);
    for i in 0..CONNS {
        conns.push(QuicConn::connect_with(addr, &mut configs[i % 2])?);
    }
    let mut exchanges: Vec<Exchange> =
        conns.iter_mut().enumerate().map(|(i, c)| Exchange::new(c.next_bidi_stream(), payload(i))).collect();
    drive_many(&mut conns, deadline(), |i, c| exchanges[i].progress(c.conn_mut()))?;
    for (i, exchange) in exchanges.iter().enumerate() {
        assert!(exchange.is_finished());
        assert!(exchange.reply() == payload(i).as_slice(), "connection {i}: wrong echo");
        let alpn: &[u8] = if i % 2 == 0 { b"moqt-16" } else { b"moqt-22" };
        assert_eq!(conns[i].alpn(), alpn);
    }

    let accepted: Vec<u64> = server.stats().iter().map(|s| ShardStats::get(&s.accepted)).collect();
    assert_eq!(accepted.iter().sum::<u64>(), CONNS as u64, "{accepted:?}");
    // 200 distinct source ports all hashing to one of two cores: probability 2^-199.
    assert!(accepted.iter().all(|&a| a > 0), "a core accepted nothing: {accepted:?}");
    assert_eq!(total(&server, |s| &s.connections), CONNS as u64);
    for conn in &mut conns {
        conn.close()?;
    }
    shutdown(server, 2)
}

/// Connects, echoes, moves the connection to a new source port with `mv`, echoes again, and
/// repeats with a fresh connection until the server reports a forwarded datagram. Returns the
/// number of connections used.
///
/// The reuseport hash sends the moved 4-tuple to the other core with probability 1/2 (two
/// cores), so 64 attempts all staying on the owner has probability 2^-64. Each attempt uses
/// a new connection because a connection survives only one change of address for now (see
/// ARCHITECTURE.md, "Known limitation: repeated client address changes").
fn move_until_forwarded(
    server: &ServerHandle,
    alpn: &str,
    mut mv: impl FnMut(&mut QuicConn) -> anyhow::Result<()>,
) -> anyhow::Result<usize> {
    const ATTEMPTS: usize = 64;
    for attempt in 1..=ATTEMPTS {
        let mut conn = QuicConn::connect(server.local_addr(), alpn)?;
        conn.handshake(deadline())?;
        let data = payload(attempt);
        ensure!(conn.request(&data, deadline())? == data, "wrong echo before the move");
        let forwarded = total(server, |s| &s.forwarded_out);

        let old = conn.local_addr();
        mv(&mut conn).with_context(|| format!("move of connection {attempt}"))?;
        ensure!(conn.local_addr() != old, "source address did not change");
        let data = payload(1000 + attempt);
        let echoed = conn.request(&data, deadline()).with_context(|| format!("echo after move {attempt}"))?;
        ensure!(echoed == data, "wrong echo after move {attempt}");
        let moved_to_other_core = total(server, |s| &s.forwarded_out) > forwarded;
        if moved_to_other_core {
            // Data keeps flowing while every datagram goes through the other core.
            let data = payload(2000 + attempt);
            ensure!(conn.request(&data, deadline())? == data, "wrong echo after forwarding");
        }
        conn.close()?;
        if moved_to_other_core {
            return Ok(attempt);
        }
    }
    Err(anyhow!("no datagram was forwarded in {ATTEMPTS} attempts"))
}

fn wrong_core_server() -> anyhow::Result<ServerHandle> {
    let mut rc = config(2);
    // Without the BPF program the kernel hashes every 4-tuple, so a moved connection's
    // packets can land on the core that does not own it.
    rc.steering = false;
    start(rc)
}

/// Moves connections (with `mv`) on a server without steering until one is served through
/// the other core, and checks both cores counted the hand-over.
fn served_through_the_wrong_core(
    alpn: &str,
    mv: impl FnMut(&mut QuicConn) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let server = wrong_core_server()?;
    let attempts = move_until_forwarded(&server, alpn, mv)?;
    assert!(total(&server, |s| &s.forwarded_out) > 0);
    assert!(total(&server, |s| &s.forwarded_in) > 0);
    assert_eq!(total(&server, |s| &s.accepted), attempts as u64);
    shutdown(server, 2)
}

#[test]
fn migrated_connection_reached_through_the_wrong_core() -> anyhow::Result<()> {
    served_through_the_wrong_core("moqt-22", |c| {
        c.migrate(deadline())?;
        Ok(())
    })
}

#[test]
fn rebound_connection_reached_through_the_wrong_core() -> anyhow::Result<()> {
    served_through_the_wrong_core("moqt-16", |c| {
        c.rebind()?;
        Ok(())
    })
}

/// With the steering program, a moved connection's packets go straight to the core named by
/// their connection ID: nothing is forwarded. (Without it, 16 moves all hashing to the owner
/// would have probability 2^-16.)
#[test]
fn steering_delivers_moved_connections_to_their_core() -> anyhow::Result<()> {
    const CONNS: usize = 16;
    let server = start(config(2))?;
    for n in 0..CONNS {
        let mut conn = QuicConn::connect(server.local_addr(), "moqt-16")?;
        conn.handshake(deadline())?;
        let data = payload(n);
        ensure!(conn.request(&data, deadline())? == data, "wrong echo before the move");
        // Half migrate (new connection ID), half rebind (same connection ID).
        if n % 2 == 0 {
            conn.migrate(deadline())?;
        } else {
            conn.rebind()?;
        }
        let data = payload(100 + n);
        ensure!(conn.request(&data, deadline())? == data, "wrong echo after the move");
        conn.close()?;
    }
    assert_eq!(total(&server, |s| &s.forwarded_out), 0);
    assert_eq!(total(&server, |s| &s.accepted), CONNS as u64);
    shutdown(server, 2)
}

#[test]
fn unknown_connection_id_gets_a_stateless_reset() -> anyhow::Result<()> {
    const TRIGGER_LEN: usize = 100;
    let secret = [0x5a; 32];
    let mut rc = config(2);
    rc.secret = Some(secret);
    let server = start(rc)?;
    let key = ResetKey::new(&secret);
    for shard in 0..2u8 {
        let mut packet = random::<TRIGGER_LEN>()?.to_vec();
        packet[0] = 0x40 | (packet[0] & 0x3f);
        packet[1] = shard;
        let dcid = packet[1..1 + CID_LEN].to_vec();

        let reply = raw_exchange(server.local_addr(), &packet, deadline())?;
        assert!(reply.len() < TRIGGER_LEN, "reset of {} bytes", reply.len());
        assert!(reply.len() >= 21, "reset of {} bytes", reply.len());
        assert_eq!(reply[0] & 0xc0, 0x40, "first byte {:#04x}", reply[0]);
        let token = key.token(&dcid).to_be_bytes();
        assert_eq!(&reply[reply.len() - 16..], &token, "shard {shard}");
    }
    assert_eq!(total(&server, |s| &s.stateless_resets), 2);
    shutdown(server, 2)
}

#[test]
fn retry_always_still_connects() -> anyhow::Result<()> {
    let mut rc = config(1);
    rc.retry = RetryPolicy::Always;
    let server = start(rc)?;
    let mut conn = QuicConn::connect(server.local_addr(), "moqt-16")?;
    conn.handshake(deadline())?;
    assert_eq!(conn.alpn(), b"moqt-16");
    assert_eq!(conn.request(b"after retry", deadline())?, b"after retry");
    assert!(total(&server, |s| &s.retries) > 0);
    assert_eq!(total(&server, |s| &s.accepted), 1);
    conn.close()?;
    shutdown(server, 1)
}
