//! Settings from command-line flags and phase scripts: the same `key value` vocabulary for both.
//!
//! A key with no prefix sets both directions; `up-KEY` only client → upstream, `down-KEY` only
//! upstream → client.

use std::time::Duration;

use crate::link::{GilbertElliott, JitterDist, Phase, Schedule, Settings};

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
}
