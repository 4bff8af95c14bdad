//! moq-impair: a UDP proxy that impairs the path between QUIC clients and a relay.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use impair::config::{self, KEYS};
use impair::proxy::{Config, Proxy};
use impair::{Schedule, Settings};

fn usage() -> String {
    let mut s = String::from(
        "moq-impair: a UDP proxy that impairs the path between QUIC clients and a relay\n\n\
         usage: moq-impair --listen ADDR --upstream ADDR [options] [impairments]\n\n\
         options:\n  \
           --listen ADDR        where clients send (e.g. 127.0.0.1:5000)\n  \
           --upstream ADDR      the relay (e.g. 127.0.0.1:4443)\n  \
           --seed N             seed of every random choice (default 1); same seed, same fates\n  \
           --script FILE        phases over time, one a line: OFFSET [KEY[=VALUE]]...\n                       \
                                (OFFSET like 3s or 1500ms from start; each phase is the flags'\n                       \
                                settings plus its own; a bare OFFSET goes back to the flags')\n  \
           --stats-every SECS   print the counters every SECS (they are also printed at the end)\n  \
           --duration SECS      stop after SECS (and print the final counters)\n  \
           --max-clients N      client addresses served at once (default 64; a new one evicts\n                       \
                                the least recently heard)\n  \
           --help\n\n\
         impairments (no prefix: both directions; --up-KEY: client -> relay only;\n\
         --down-KEY: relay -> client only):\n",
    );
    for (key, what) in KEYS {
        s.push_str(&format!("  --{key:<26} {what}\n"));
    }
    s.push_str(
        "\nEach client address gets its own upstream socket and its own pair of links (its own\n\
         bottleneck). Counters: one JSON line per report on stdout,\n\
         {\"t_s\":..,\"clients\":..,\"evicted\":..,\"up\":{..},\"down\":{..}}.\n\n\
         example: moq-impair --listen 127.0.0.1:5000 --upstream 127.0.0.1:4443 \\\n    \
         --down-loss 0.03 --delay-ms 40 --jitter-ms 5 --down-rate-kbps 2000 --stats-every 1\n",
    );
    s
}

struct Args {
    config: Config,
    stats_every: Option<Duration>,
    duration: Option<Duration>,
}

fn parse(args: &[String]) -> Result<Option<Args>, String> {
    let (mut listen, mut upstream, mut script) = (None, None, None);
    let (mut seed, mut max_clients, mut stats_every, mut duration) = (1u64, 64usize, None, None);
    let (mut up, mut down) = (Settings::default(), Settings::default());
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let Some(key) = arg.strip_prefix("--") else {
            return Err(format!("unexpected argument {arg:?}"));
        };
        let (key, inline) = match key.split_once('=') {
            Some((k, v)) => (k, Some(v.to_string())),
            None => (key, None),
        };
        if key == "help" {
            return Ok(None);
        }
        if config::is_setting(key) && !config::takes_value(key) {
            config::apply(key, inline.as_deref(), &mut up, &mut down)?;
            continue;
        }
        let value = match inline {
            Some(v) => v,
            None => it.next().cloned().ok_or_else(|| format!("--{key} needs a value"))?,
        };
        let secs = |v: &str| match v.parse::<f64>() {
            Ok(s) if s.is_finite() && s > 0.0 => Ok(Duration::from_secs_f64(s)),
            _ => Err(format!("--{key}: expected seconds > 0, got {v:?}")),
        };
        let addr = |v: &str| v.parse::<SocketAddr>().map_err(|e| format!("--{key} {v:?}: {e}"));
        match key {
            "listen" => listen = Some(addr(&value)?),
            "upstream" => upstream = Some(addr(&value)?),
            "seed" => seed = value.parse().map_err(|e| format!("--seed {value:?}: {e}"))?,
            "script" => script = Some(value),
            "stats-every" => stats_every = Some(secs(&value)?),
            "duration" => duration = Some(secs(&value)?),
            "max-clients" => {
                max_clients = match value.parse() {
                    Ok(n) if n > 0 => n,
                    _ => return Err(format!("--max-clients: expected a number > 0, got {value:?}")),
                }
            }
            k if config::is_setting(k) => config::apply(k, Some(&value), &mut up, &mut down)?,
            k => return Err(format!("unknown option --{k}")),
        }
    }
    let listen = listen.ok_or("--listen is required")?;
    let upstream = upstream.ok_or("--upstream is required")?;
    let (up, down) = match script {
        Some(path) => {
            let text = std::fs::read_to_string(&path).map_err(|e| format!("--script {path}: {e}"))?;
            config::script(&text, (&up, &down)).map_err(|e| format!("--script {path}: {e}"))?
        }
        None => (Schedule::constant(up), Schedule::constant(down)),
    };
    Ok(Some(Args { config: Config { listen, upstream, up, down, seed, max_clients }, stats_every, duration }))
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let args = match parse(&args) {
        Ok(Some(a)) => a,
        Ok(None) => {
            print!("{}", usage());
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("moq-impair: {e}\n\n{}", usage());
            return ExitCode::from(2);
        }
    };
    let mut proxy = match Proxy::bind(args.config.clone()) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("moq-impair: bind {}: {e}", args.config.listen);
            return ExitCode::FAILURE;
        }
    };
    let listening = proxy.local_addr().map(|a| a.to_string()).unwrap_or_default();
    eprintln!("moq-impair: {listening} -> {}", args.config.upstream);
    let until = args.duration.map(|d| Instant::now() + d);
    let stop = AtomicBool::new(false);
    match proxy.run(&stop, until, args.stats_every, &mut std::io::stdout().lock()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("moq-impair: {e}");
            ExitCode::FAILURE
        }
    }
}
