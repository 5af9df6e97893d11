//! CPU accounting for the measured window: the load generator's own CPU, the server
//! process's CPU, and how busy the whole machine was.
//!
//! On a 2-core machine the generator competes with the server for CPU, so every result
//! carries these figures: a run where the generator (or the machine) was saturated says
//! more about the client than about the server. Linux only (`/proc`, `getrusage`).

use std::time::{Duration, Instant};

/// One reading of the counters.
#[derive(Debug, Clone, Copy)]
pub struct CpuSample {
    at: Instant,
    /// This process (all threads), user + system.
    own: Duration,
    /// The server process, if known and readable.
    server: Option<Duration>,
    /// Machine-wide (busy, total) jiffies from `/proc/stat`.
    machine: Option<(u64, u64)>,
}

impl CpuSample {
    /// Reads every counter now.
    pub fn take(server_pid: Option<u32>) -> CpuSample {
        Self::take_all(server_pid.as_slice())
    }

    /// Reads every counter now; the server's CPU is the sum over `server_pids` (the
    /// members of an ensemble), unknown if any is unreadable or none is given.
    pub fn take_all(server_pids: &[u32]) -> CpuSample {
        let server = if server_pids.is_empty() {
            None
        } else {
            server_pids
                .iter()
                .map(|&p| process_cpu(p))
                .sum::<Option<Duration>>()
        };
        CpuSample {
            at: Instant::now(),
            own: own_cpu(),
            server,
            machine: machine_jiffies(),
        }
    }

    /// CPU use between `self` (earlier) and `later`.
    pub fn usage_until(&self, later: &CpuSample) -> CpuUsage {
        let wall = later.at.saturating_duration_since(self.at).as_secs_f64();
        let pct = |d: Duration| {
            if wall > 0.0 {
                100.0 * d.as_secs_f64() / wall
            } else {
                0.0
            }
        };
        let server_cpu = match (self.server, later.server) {
            (Some(a), Some(b)) => Some(b.saturating_sub(a)),
            _ => None,
        };
        let machine_busy_pct = match (self.machine, later.machine) {
            (Some((b0, t0)), Some((b1, t1))) if t1 > t0 => {
                Some(100.0 * (b1.saturating_sub(b0)) as f64 / (t1 - t0) as f64)
            }
            _ => None,
        };
        CpuUsage {
            wall_s: wall,
            generator_pct: pct(later.own.saturating_sub(self.own)),
            server_pct: server_cpu.map(pct),
            server_cpu_s: server_cpu.map(|d| d.as_secs_f64()),
            machine_busy_pct,
            cores: cores(),
        }
    }
}

/// CPU use over the measured window. Percentages are of one core (200% = both of 2 cores).
#[derive(Debug, Clone, Copy, PartialEq, Default, serde::Serialize)]
pub struct CpuUsage {
    pub wall_s: f64,
    pub generator_pct: f64,
    pub server_pct: Option<f64>,
    pub server_cpu_s: Option<f64>,
    /// All cores together, 0..=100.
    pub machine_busy_pct: Option<f64>,
    pub cores: usize,
}

impl CpuUsage {
    /// Server CPU microseconds spent per completed op.
    pub fn server_us_per_op(&self, ops: u64) -> Option<f64> {
        match (self.server_cpu_s, ops) {
            (Some(s), n) if n > 0 => Some(s * 1e6 / n as f64),
            _ => None,
        }
    }
}

fn cores() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}

fn timeval(tv: libc::timeval) -> Duration {
    Duration::from_secs(tv.tv_sec.max(0) as u64) + Duration::from_micros(tv.tv_usec.max(0) as u64)
}

/// User + system CPU of this whole process.
fn own_cpu() -> Duration {
    // SAFETY: rusage is plain integers, for which all zeroes is a valid value.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage only writes into the struct we pass, which we own.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    if rc != 0 {
        return Duration::ZERO;
    }
    timeval(ru.ru_utime) + timeval(ru.ru_stime)
}

fn clock_ticks() -> u64 {
    // SAFETY: sysconf has no memory effects.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as u64
    } else {
        100
    }
}

/// User + system CPU of process `pid` (all its threads), from `/proc/<pid>/stat`.
pub fn process_cpu(pid: u32) -> Option<Duration> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_proc_stat_cpu(&text, clock_ticks())
}

/// utime + stime (fields 14 and 15) of a `/proc/<pid>/stat` line. The command name (field
/// 2) is in parentheses and may itself hold spaces or parentheses, so fields are counted
/// from the last `)`.
fn parse_proc_stat_cpu(line: &str, ticks_per_s: u64) -> Option<Duration> {
    let rest = &line[line.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // `rest` starts at field 3 (state), so field n is at index n - 3.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    let ticks = utime + stime;
    Some(Duration::from_micros(
        ticks * 1_000_000 / ticks_per_s.max(1),
    ))
}

/// (busy, total) jiffies over all cores, from the first line of `/proc/stat`.
fn machine_jiffies() -> Option<(u64, u64)> {
    let text = std::fs::read_to_string("/proc/stat").ok()?;
    parse_machine_jiffies(text.lines().next()?)
}

fn parse_machine_jiffies(line: &str) -> Option<(u64, u64)> {
    let mut it = line.split_whitespace();
    if it.next()? != "cpu" {
        return None;
    }
    let v: Vec<u64> = it.filter_map(|f| f.parse().ok()).collect();
    if v.len() < 4 {
        return None;
    }
    // user nice system idle iowait irq softirq steal (guest time is already in user).
    let total: u64 = v.iter().take(8).sum();
    let idle = v[3] + v.get(4).copied().unwrap_or(0);
    Some((total - idle, total))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_stat_fields_are_counted_after_the_command_name() {
        let line = "1234 (java (ZK) main) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 42";
        assert_eq!(
            parse_proc_stat_cpu(line, 100),
            Some(Duration::from_secs(3)),
            "250 + 50 ticks at 100 Hz"
        );
        assert_eq!(parse_proc_stat_cpu("garbage", 100), None);
    }

    #[test]
    fn machine_jiffies_exclude_idle_and_iowait() {
        let line = "cpu  100 0 50 800 50 0 0 0 0 0";
        assert_eq!(parse_machine_jiffies(line), Some((150, 1000)));
        assert_eq!(parse_machine_jiffies("cpu0 1 2 3 4"), None);
    }

    #[test]
    fn own_cpu_grows_when_we_spin() {
        let before = CpuSample::take(Some(std::process::id()));
        // Spin until getrusage shows 50 ms more CPU (bounded: a busy machine only delays it).
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut x = 0u64;
        while own_cpu().saturating_sub(before.own) < Duration::from_millis(50)
            && Instant::now() < deadline
        {
            for _ in 0..10_000 {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
            }
        }
        std::hint::black_box(x);
        let after = CpuSample::take(Some(std::process::id()));
        let u = before.usage_until(&after);
        assert!(after.own >= before.own + Duration::from_millis(50));
        assert!(u.generator_pct > 0.0);
        let server = u
            .server_cpu_s
            .expect("our own /proc/<pid>/stat is readable");
        assert!(server >= 0.0);
        assert_eq!(u.server_us_per_op(0), None);
    }
}
