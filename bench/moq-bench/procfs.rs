//! The relay process as Linux's /proc shows it: CPU time (user + system) and resident
//! memory, read by pid, so that any relay can be measured from outside.

use std::fs;

/// One reading of a process.
#[derive(Debug, Clone, Copy, Default)]
pub struct ProcSample {
    /// User + system CPU seconds since the process started (all threads).
    pub cpu_s: f64,
    /// Resident set size, bytes.
    pub rss_bytes: u64,
}

/// Reads `/proc/<pid>/stat` and `/proc/<pid>/status`; `None` once the process is gone.
pub fn sample(pid: u32) -> Option<ProcSample> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may hold spaces: count from after it.
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // Fields 14 and 15 of stat(5) (utime, stime) are the 12th and 13th after the name.
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    let status = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let rss_kb = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse::<u64>().ok())?;
    Some(ProcSample { cpu_s: ticks as f64 / clock_ticks() as f64, rss_bytes: rss_kb * 1024 })
}

fn clock_ticks() -> i64 {
    // SAFETY: sysconf reads a configuration value; it has no memory effects.
    #[allow(unsafe_code)]
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t
    } else {
        100
    }
}

/// This process's CPU seconds so far (user + system, every thread).
pub fn own_cpu_s() -> f64 {
    sample(std::process::id()).map_or(0.0, |s| s.cpu_s)
}

/// The calling thread's CPU seconds so far (user + system).
pub fn thread_cpu_s() -> f64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes one timespec, which `ts` is.
    #[allow(unsafe_code)]
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc == 0 {
        ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9
    } else {
        0.0
    }
}

/// The nominal clock of this machine's CPUs in GHz, from `/proc/cpuinfo` ("cpu MHz" of the
/// first CPU), if it says.
pub fn cpu_ghz() -> Option<f64> {
    let info = fs::read_to_string("/proc/cpuinfo").ok()?;
    let mhz =
        info.lines().find(|l| l.starts_with("cpu MHz"))?.split(':').nth(1)?.trim().parse::<f64>().ok()?;
    (mhz > 0.0).then_some(mhz / 1000.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_this_process() {
        let s = sample(std::process::id()).expect("/proc of this process");
        assert!(s.rss_bytes > 0);
        assert!(s.cpu_s >= 0.0);
        assert!(sample(u32::MAX).is_none());
    }
}
