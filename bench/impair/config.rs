//! Settings from command-line flags and phase scripts: the same `key value` vocabulary for both.
//!
//! A key with no prefix sets both directions; `up-KEY` only client → upstream, `down-KEY` only
//! upstream → client.

use std::net::SocketAddr;
use std::time::Duration;

use crate::link::{GilbertElliott, JitterDist, Phase, Schedule, Settings};
use crate::proxy::Config;

/// The impairment keys and what they take, for `--help`.
pub const KEYS: &[(&str, &str)] = &[
    ("loss P", "random loss probability in [0, 1]"),
    ("ge P,R,LG,LB", "Gilbert-Elliott loss: P good->bad, R bad->good (per packet), loss in good, in bad"),
    ("delay-ms MS", "fixed one-way delay"),
    ("jitter-ms MS", "extra delay drawn in [0, MS] per packet"),
    ("jitter-dist uniform|normal", "jitter distribution (normal: bell-shaped, bounded); default uniform"),
    ("jitter-reorders", "let jitter reorder packets (default: jitter keeps order)"),
    ("reorder P", "probability that a packet is held back by reorder-ms more, so later ones overtake it"),
    ("reorder-ms MS", "the hold of a reordered packet (default 10)"),
    ("dup P", "duplication probability"),
    ("rate-kbps K", "bottleneck rate, K * 1000 bit/s (default: unlimited)"),
    ("queue-kb K", "bottleneck queue, K * 1000 bytes, tail drop (default 64)"),
    ("outage", "drop everything (for script phases)"),
    ("clear", "reset this direction to no impairment (for script phases)"),
];

/// Keys that take no value.
fn is_flag(key: &str) -> bool {
    matches!(strip_dir(key).1, "jitter-reorders" | "outage" | "clear")
}

/// Whether `key` (with or without an `up-`/`down-` prefix) is an impairment key.
pub fn is_setting(key: &str) -> bool {
    let k = strip_dir(key).1;
    KEYS.iter().any(|(spec, _)| spec.split(' ').next() == Some(k))
}

/// Whether the key takes a value.
pub fn takes_value(key: &str) -> bool {
    !is_flag(key)
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Dir {
    Both,
    Up,
    Down,
}

fn strip_dir(key: &str) -> (Dir, &str) {
    if let Some(k) = key.strip_prefix("up-") {
        (Dir::Up, k)
    } else if let Some(k) = key.strip_prefix("down-") {
        (Dir::Down, k)
    } else {
        (Dir::Both, key)
    }
}

fn prob(key: &str, v: &str) -> Result<f64, String> {
    match v.trim().parse::<f64>() {
        Ok(p) if (0.0..=1.0).contains(&p) => Ok(p),
        _ => Err(format!("{key}: expected a probability in [0, 1], got {v:?}")),
    }
}

fn nonneg(key: &str, v: &str) -> Result<f64, String> {
    match v.trim().parse::<f64>() {
        Ok(x) if x.is_finite() && x >= 0.0 => Ok(x),
        _ => Err(format!("{key}: expected a non-negative number, got {v:?}")),
    }
}

fn millis(key: &str, v: &str) -> Result<Duration, String> {
    Ok(Duration::from_secs_f64(nonneg(key, v)? / 1000.0))
}

/// Applies one `key [value]` to `up` and/or `down`. A flag's value, if given, must be
/// `true`/`false`/`1`/`0`.
pub fn apply(key: &str, value: Option<&str>, up: &mut Settings, down: &mut Settings) -> Result<(), String> {
    let (dir, k) = strip_dir(key);
    let targets: Vec<&mut Settings> = match dir {
        Dir::Both => vec![up, down],
        Dir::Up => vec![up],
        Dir::Down => vec![down],
    };
    let need = || value.ok_or_else(|| format!("{key}: needs a value"));
    let flag = || match value {
        None | Some("1") | Some("true") => Ok(true),
        Some("0") | Some("false") => Ok(false),
        Some(v) => Err(format!("{key}: expected true or false, got {v:?}")),
    };
    for s in targets {
        match k {
            "loss" => s.loss = prob(key, need()?)?,
            "ge" => {
                let v = need()?;
                let parts: Vec<&str> = v.split(',').collect();
                if parts.len() != 4 {
                    return Err(format!("{key}: expected P,R,LOSS_GOOD,LOSS_BAD, got {v:?}"));
                }
                s.ge = Some(GilbertElliott {
                    p: prob(key, parts[0])?,
                    r: prob(key, parts[1])?,
                    loss_good: prob(key, parts[2])?,
                    loss_bad: prob(key, parts[3])?,
                });
            }
            "delay-ms" => s.delay = millis(key, need()?)?,
            "jitter-ms" => s.jitter = millis(key, need()?)?,
            "jitter-dist" => {
                s.jitter_dist = match need()? {
                    "uniform" => JitterDist::Uniform,
                    "normal" => JitterDist::Normal,
                    v => return Err(format!("{key}: expected uniform or normal, got {v:?}")),
                }
            }
            "jitter-reorders" => s.jitter_reorders = flag()?,
            "reorder" => s.reorder = prob(key, need()?)?,
            "reorder-ms" => s.reorder_delay = millis(key, need()?)?,
            "dup" => s.dup = prob(key, need()?)?,
            "rate-kbps" => s.rate_bps = (nonneg(key, need()?)? * 1000.0).round() as u64,
            "queue-kb" => s.queue_bytes = (nonneg(key, need()?)? * 1000.0).round() as usize,
            "outage" => s.outage = flag()?,
            "clear" => {
                if flag()? {
                    *s = Settings::default();
                }
            }
            _ => return Err(format!("unknown setting {key:?}")),
        }
    }
    Ok(())
}

/// Parses a time offset: `3s`, `2.5s`, `1500ms`.
pub fn offset(v: &str) -> Result<Duration, String> {
    let (num, scale) = if let Some(n) = v.strip_suffix("ms") {
        (n, 1e-3)
    } else if let Some(n) = v.strip_suffix('s') {
        (n, 1.0)
    } else {
        return Err(format!("offset {v:?}: expected a unit, e.g. 3s or 1500ms"));
    };
    Ok(Duration::from_secs_f64(nonneg("offset", num)? * scale))
}

/// Parses a phase script into the (up, down) schedules, each phase starting from `base`.
///
/// One phase a line: an offset from the start, then settings as `key` or `key=value` (keys as
/// in [`KEYS`], with optional `up-`/`down-` prefixes). `#` starts a comment. A line with only
/// an offset goes back to `base`. For example, an outage from 3 s to 6 s, then a lossy
/// downlink:
///
/// ```text
/// 3s outage
/// 6s
/// 10s down-loss=0.05 delay-ms=80
/// ```
pub fn script(text: &str, base: (&Settings, &Settings)) -> Result<(Schedule, Schedule), String> {
    let mut up_phases = Vec::new();
    let mut down_phases = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        let mut words = line.split_whitespace();
        let Some(at) = words.next() else { continue };
        let at = offset(at).map_err(|e| format!("line {}: {e}", n + 1))?;
        let (mut up, mut down) = (base.0.clone(), base.1.clone());
        for w in words {
            let (k, v) = match w.split_once('=') {
                Some((k, v)) => (k, Some(v)),
                None => (w, None),
            };
            apply(k, v, &mut up, &mut down).map_err(|e| format!("line {}: {e}", n + 1))?;
        }
        up_phases.push(Phase { at, settings: up });
        down_phases.push(Phase { at, settings: down });
    }
    Ok((Schedule::new(base.0.clone(), up_phases), Schedule::new(base.1.clone(), down_phases)))
}

/// The `--help` text.
pub fn usage() -> String {
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

/// A parsed command line.
#[derive(Clone, Debug)]
pub struct Cli {
    pub config: Config,
    pub stats_every: Option<Duration>,
    pub duration: Option<Duration>,
}

/// Parses `moq-impair`'s arguments (without the program name); `Ok(None)` for `--help`. Reads
/// the `--script` file if there is one.
pub fn parse_cli(args: &[String]) -> Result<Option<Cli>, String> {
    let (mut listen, mut upstream, mut script_path) = (None, None, None);
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
        if is_setting(key) && !takes_value(key) {
            apply(key, inline.as_deref(), &mut up, &mut down)?;
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
            "script" => script_path = Some(value),
            "stats-every" => stats_every = Some(secs(&value)?),
            "duration" => duration = Some(secs(&value)?),
            "max-clients" => {
                max_clients = match value.parse() {
                    Ok(n) if n > 0 => n,
                    _ => return Err(format!("--max-clients: expected a number > 0, got {value:?}")),
                }
            }
            k if is_setting(k) => apply(k, Some(&value), &mut up, &mut down)?,
            k => return Err(format!("unknown option --{k}")),
        }
    }
    let listen = listen.ok_or("--listen is required")?;
    let upstream = upstream.ok_or("--upstream is required")?;
    let (up, down) = match script_path {
        Some(path) => {
            let text = std::fs::read_to_string(&path).map_err(|e| format!("--script {path}: {e}"))?;
            script(&text, (&up, &down)).map_err(|e| format!("--script {path}: {e}"))?
        }
        None => (Schedule::constant(up), Schedule::constant(down)),
    };
    Ok(Some(Cli { config: Config { listen, upstream, up, down, seed, max_clients }, stats_every, duration }))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn keys_apply_per_direction() {
        let (mut up, mut down) = (Settings::default(), Settings::default());
        apply("loss", Some("0.03"), &mut up, &mut down).unwrap();
        apply("down-delay-ms", Some("40"), &mut up, &mut down).unwrap();
        apply("up-ge", Some("0.01,0.2,0,0.5"), &mut up, &mut down).unwrap();
        apply("rate-kbps", Some("2000"), &mut up, &mut down).unwrap();
        apply("jitter-reorders", None, &mut up, &mut down).unwrap();
        assert_eq!((up.loss, down.loss), (0.03, 0.03));
        assert_eq!((up.delay, down.delay), (Duration::ZERO, Duration::from_millis(40)));
        assert!(up.ge.is_some() && down.ge.is_none());
        assert_eq!(up.rate_bps, 2_000_000);
        assert!(up.jitter_reorders && down.jitter_reorders);
        assert!(apply("loss", Some("1.5"), &mut up, &mut down).is_err());
        assert!(apply("loss", None, &mut up, &mut down).is_err());
        assert!(apply("bogus", Some("1"), &mut up, &mut down).is_err());
        assert!(is_setting("down-reorder-ms") && !is_setting("listen"));
        assert!(!takes_value("up-outage") && takes_value("dup"));
    }

    #[test]
    fn script_phases_start_from_base() {
        let base = Settings { delay: Duration::from_millis(20), ..Settings::default() };
        let text = "# outage then a lossy downlink\n3s outage\n6s\n\n10s down-loss=0.05 delay-ms=80 # x\n";
        let (up, down) = script(text, (&base, &base)).unwrap();
        assert_eq!(up.phases.len(), 3);
        assert_eq!(up.at(Duration::from_secs(1)), &base);
        assert!(up.at(Duration::from_secs(3)).outage && down.at(Duration::from_millis(5999)).outage);
        assert_eq!(down.at(Duration::from_secs(6)), &base);
        let late = down.at(Duration::from_secs(11));
        assert_eq!((late.loss, late.delay), (0.05, Duration::from_millis(80)));
        assert_eq!(up.at(Duration::from_secs(11)).loss, 0.0);
        assert!(script("3 outage", (&base, &base)).is_err());
        assert!(script("3s lose=1", (&base, &base)).is_err());
        assert_eq!(offset("1500ms").unwrap(), Duration::from_millis(1500));
    }

    #[test]
    fn command_line() {
        let args = |s: &str| s.split_whitespace().map(String::from).collect::<Vec<String>>();
        let cli = parse_cli(&args(
            "--listen 127.0.0.1:5000 --upstream=127.0.0.1:4443 --down-loss 0.03 --delay-ms 40 \
             --up-jitter-ms=5 --jitter-reorders --seed 9 --stats-every 0.5 --max-clients 200",
        ))
        .unwrap()
        .unwrap();
        let c = &cli.config;
        assert_eq!(c.listen, "127.0.0.1:5000".parse().unwrap());
        assert_eq!(c.upstream, "127.0.0.1:4443".parse().unwrap());
        assert_eq!((c.seed, c.max_clients), (9, 200));
        assert_eq!((c.up.base.loss, c.down.base.loss), (0.0, 0.03));
        assert_eq!(
            (c.up.base.delay, c.down.base.delay),
            (Duration::from_millis(40), Duration::from_millis(40))
        );
        assert_eq!((c.up.base.jitter, c.down.base.jitter), (Duration::from_millis(5), Duration::ZERO));
        assert!(c.up.base.jitter_reorders && c.down.phases.is_empty());
        assert_eq!((cli.stats_every, cli.duration), (Some(Duration::from_millis(500)), None));
        assert!(parse_cli(&args("--help")).unwrap().is_none());
        assert!(parse_cli(&args("--listen 127.0.0.1:5000")).is_err());
        assert!(parse_cli(&args("--listen 127.0.0.1:5000 --upstream 127.0.0.1:1 --lose 1")).is_err());
        assert!(parse_cli(&args("--listen 127.0.0.1:5000 --upstream 127.0.0.1:1 --delay-ms")).is_err());
        assert!(usage().contains("--down-KEY"));
    }
}
