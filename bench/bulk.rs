//! Bulk transfer through the QUIC runtime: how fast the server pushes stream data to N
//! clients over loopback, and what it costs in server CPU per gigabyte, with and without GSO,
//! on one and two server cores. Figures and the command: bench/README.md.
//!
//! The server runs in-process with [`BulkApp`]: a client opens a bidirectional stream and sends
//! a decimal byte count with FIN; the server answers with that many bytes and FIN. Each client
//! runs in its own thread on `moq_edge::client`.
//!
//! ```text
//! cargo bench --bench bulk -- --cores 1,2 --clients 8 --bytes 2000000000 --gso on,off
//! ```
//!
//! `--bytes` is the total per configuration, split evenly among the clients. Without
//! `--bench` on the command line (as under `cargo test --benches`) it runs one tiny smoke
//! configuration instead. Unknown arguments are ignored.

use moq_edge::runtime::QuicConnection;
use std::collections::HashMap;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, ensure, Context as _};
use moq_edge::client::QuicConn;
use moq_edge::runtime::app::PerConnection;
use moq_edge::runtime::{self, AppFactory, ConnApp, RuntimeConfig, ServerHandle, ShardStats};

/// Bytes handed to `stream_send` per call (quiche copies them into its send buffer).
static ZEROS: [u8; 64 * 1024] = [0; 64 * 1024];

/// Longest request accepted (a decimal u64 is at most 20 digits).
const MAX_REQUEST: usize = 32;

/// Stream error code for a request that is not a decimal byte count.
const BAD_REQUEST: u64 = 1;

/// One stream being served: the request as it arrives, then the bytes still to send.
#[derive(Debug, Default)]
struct Transfer {
    request: Vec<u8>,
    /// `Some` once the request's FIN arrived; counts down to 0, then the FIN goes out.
    remaining: Option<u64>,
}

/// Sends each requested byte count back on the request's stream, as much as stream and
/// connection capacity allow on every `on_io`.
#[derive(Debug, Default)]
struct BulkApp {
    transfers: HashMap<u64, Transfer>,
}

impl ConnApp for BulkApp {
    fn on_io(&mut self, conn: &mut QuicConnection) {
        let mut buf = [0u8; MAX_REQUEST];
        while let Some(id) = conn.stream_readable_next() {
            let t = self.transfers.entry(id).or_default();
            while let Ok((n, fin)) = conn.stream_recv(id, &mut buf) {
                t.request.extend_from_slice(&buf[..n]);
                let count = std::str::from_utf8(&t.request).ok().and_then(|s| s.parse::<u64>().ok());
                if t.request.len() > MAX_REQUEST || (fin && count.is_none()) {
                    let _ = conn.stream_shutdown(id, quiche::Shutdown::Read, BAD_REQUEST);
                    let _ = conn.stream_shutdown(id, quiche::Shutdown::Write, BAD_REQUEST);
                    self.transfers.remove(&id);
                    break;
                }
                if fin {
                    t.remaining = count;
                }
            }
        }
        self.transfers.retain(|&id, t| {
            let Some(remaining) = t.remaining.as_mut() else { return true };
            loop {
                let n = (*remaining).min(ZEROS.len() as u64) as usize;
                let fin = n as u64 == *remaining;
                match conn.stream_send(id, &ZEROS[..n], fin) {
                    Ok(sent) => {
                        *remaining -= sent as u64;
                        if fin && sent == n {
                            return false;
                        }
                        if sent < n {
                            return true;
                        }
                    }
                    Err(quiche::Error::Done) => return true,
                    Err(_) => return false,
                }
            }
        });
    }
}

/// The application protocol of the bulk transfer (it is not MoQT).
const ALPN: &str = "bulk";

/// A server whose every connection is a [`BulkApp`], on ALPN [`ALPN`].
fn bulk_factory() -> impl AppFactory {
    PerConnection::new(vec![ALPN.to_string()], |_: &[u8]| -> Box<dyn ConnApp> {
        Box::new(BulkApp::default())
    })
}

/// What to run: every combination of `cores` x `gso`.
#[derive(Debug, Clone)]
struct Options {
    cores: Vec<usize>,
    gso: Vec<bool>,
    clients: usize,
    bytes: u64,
}

impl Options {
    fn parse(args: &[String]) -> anyhow::Result<Options> {
        let bench = args.iter().any(|a| a == "--bench");
        let mut o = if bench {
            Options { cores: vec![1, 2], gso: vec![true, false], clients: 8, bytes: 2_000_000_000 }
        } else {
            Options { cores: vec![1], gso: vec![true], clients: 2, bytes: 4_000_000 }
        };
        let mut it = args.iter();
        while let Some(arg) = it.next() {
            let mut value = || it.next().ok_or_else(|| anyhow!("{arg} needs a value"));
            match arg.as_str() {
                "--cores" => o.cores = list(value()?, |s| s.parse().ok())?,
                "--gso" => o.gso = list(value()?, on_off)?,
                "--clients" => o.clients = value()?.parse().context("--clients")?,
                "--bytes" => o.bytes = value()?.parse().context("--bytes")?,
                _ => {} // `--bench` and whatever else cargo passes
            }
        }
        ensure!(o.clients > 0 && !o.cores.is_empty() && !o.gso.is_empty(), "nothing to run");
        ensure!(o.cores.iter().all(|&c| c > 0), "--cores must be positive");
        Ok(o)
    }
}

fn list<T>(s: &str, parse: impl Fn(&str) -> Option<T>) -> anyhow::Result<Vec<T>> {
    s.split(',').map(|p| parse(p.trim()).ok_or_else(|| anyhow!("bad list item {p:?}"))).collect()
}

fn on_off(s: &str) -> Option<bool> {
    match s {
        "on" | "true" | "1" => Some(true),
        "off" | "false" | "0" => Some(false),
        _ => None,
    }
}

/// One configuration's results.
#[derive(Debug)]
struct Outcome {
    bytes: u64,
    elapsed: Duration,
    server_cpu: Duration,
    /// CPU time of the whole process minus the server's: the client threads (and the
    /// harness), when /proc is readable.
    client_cpu: Option<Duration>,
    datagrams_out: u64,
    gso_sends: u64,
}

fn total(server: &ServerHandle, counter: impl Fn(&ShardStats) -> &AtomicU64) -> u64 {
    server.stats().iter().map(|s| ShardStats::get(counter(s))).sum()
}

/// User + system CPU time of this process so far, from /proc/self/stat (Linux, in clock
/// ticks of USER_HZ = 100 per second).
fn process_cpu() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the parenthesised command name: state is field 3, utime 14, stime 15.
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace().skip(11);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some(Duration::from_millis((utime + stime) * 10))
}

fn run(cores: usize, gso: bool, clients: usize, bytes: u64) -> anyhow::Result<Outcome> {
    let cpu_before = process_cpu();
    let mut rc = RuntimeConfig::new(([127, 0, 0, 1], 0).into(), cores);
    rc.gso = gso;
    rc.pin = false;
    let server = runtime::start(rc, Arc::new(bulk_factory()))?;
    let addr = server.local_addr();
    let per_client = bytes / clients as u64;
    let deadline = Instant::now() + Duration::from_secs(600);

    // Handshakes first, then every client starts its download at the barrier.
    let barrier = Arc::new(Barrier::new(clients));
    let threads: Vec<_> = (0..clients)
        .map(|_| {
            let barrier = Arc::clone(&barrier);
            std::thread::spawn(move || -> anyhow::Result<(u64, Instant, Instant)> {
                let setup = || -> anyhow::Result<QuicConn> {
                    let mut conn = QuicConn::connect(addr, ALPN)?;
                    conn.handshake(deadline)?;
                    Ok(conn)
                };
                let conn = setup();
                // Every thread reaches the barrier, failed or not, so none waits forever.
                barrier.wait();
                let mut conn = conn?;
                let start = Instant::now();
                let got = conn.download(per_client.to_string().as_bytes(), deadline)?;
                let end = Instant::now();
                let _ = conn.close();
                Ok((got, start, end))
            })
        })
        .collect();
    let mut results = Vec::with_capacity(clients);
    for t in threads {
        results.push(t.join().map_err(|_| anyhow!("client thread panicked"))??);
    }
    let datagrams_out = total(&server, |s| &s.datagrams_out);
    let gso_sends = total(&server, |s| &s.gso_sends);
    let reports = server.shutdown()?;
    let server_cpu: Duration = reports.iter().map(|r| r.cpu).sum();
    let client_cpu = match (cpu_before, process_cpu()) {
        (Some(a), Some(b)) => Some(b.saturating_sub(a).saturating_sub(server_cpu)),
        _ => None,
    };

    let received: u64 = results.iter().map(|r| r.0).sum();
    if received != per_client * clients as u64 {
        bail!("received {received} bytes, expected {}", per_client * clients as u64);
    }
    let start = results.iter().map(|r| r.1).min().ok_or_else(|| anyhow!("no clients"))?;
    let end = results.iter().map(|r| r.2).max().ok_or_else(|| anyhow!("no clients"))?;
    Ok(Outcome { bytes: received, elapsed: end - start, server_cpu, client_cpu, datagrams_out, gso_sends })
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let o = Options::parse(&args)?;
    println!(
        "bulk transfer: {} clients, {} bytes per configuration, loopback, {} available CPUs\n",
        o.clients,
        o.bytes,
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    println!(
        "| server cores | GSO | Gbit/s | server CPU s/GB | client CPU s/GB | datagrams out | GSO trains |"
    );
    println!("|---:|:---:|---:|---:|---:|---:|---:|");
    for &cores in &o.cores {
        for &gso in &o.gso {
            let r = run(cores, gso, o.clients, o.bytes)
                .with_context(|| format!("{cores} cores, GSO {}", if gso { "on" } else { "off" }))?;
            let secs = r.elapsed.as_secs_f64().max(1e-9);
            let gb = r.bytes as f64 / 1e9;
            println!(
                "| {cores} | {} | {:.2} | {:.2} | {} | {} | {} |",
                if gso { "on" } else { "off" },
                r.bytes as f64 * 8.0 / secs / 1e9,
                r.server_cpu.as_secs_f64() / gb.max(1e-9),
                r.client_cpu.map_or("-".to_string(), |c| format!("{:.2}", c.as_secs_f64() / gb.max(1e-9))),
                r.datagrams_out,
                r.gso_sends,
            );
        }
    }
    Ok(())
}
