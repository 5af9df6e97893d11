//! How much memory a server holds, measured the way that is fair to each: zooraft's
//! resident set (`VmRSS` of `/proc/<pid>/status`: everything it holds, RocksDB included),
//! and for Apache ZooKeeper its live heap after a full collection (`jcmd <pid> GC.run`,
//! then `jcmd <pid> GC.heap_info`), because a JVM's resident set is whatever heap it was
//! given, not what it needs. ZooKeeper's RSS is reported next to it for context.

use std::process::Command;

use crate::server::ServerKind;

/// One memory reading of a server.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct MemoryReading {
    /// Resident set size in bytes.
    pub rss: u64,
    /// A JVM's heap in use right after a full GC, in bytes (ZooKeeper only).
    pub live_heap: Option<u64>,
}

impl MemoryReading {
    /// The figure compared: zooraft's RSS, ZooKeeper's live heap (its RSS if jcmd failed).
    pub fn primary(&self) -> u64 {
        self.live_heap.unwrap_or(self.rss)
    }
}

/// Reads the memory of the server `kind` running as `pid` (for ZooKeeper this forces a
/// full GC first). `None` when the process is gone.
pub fn read(kind: ServerKind, pid: u32) -> Option<MemoryReading> {
    let rss = rss_bytes(pid)?;
    let live_heap = match kind {
        ServerKind::Zooraft => None,
        ServerKind::Apache => match jvm_live_heap(pid) {
            Ok(h) => Some(h),
            Err(e) => {
                tracing::warn!("ZooKeeper's live heap unknown ({e}); its RSS stands in");
                None
            }
        },
    };
    Some(MemoryReading { rss, live_heap })
}

/// `VmRSS` of a process, in bytes.
pub fn rss_bytes(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    parse_kib_field(&status, "VmRSS:").map(|k| k * 1024)
}

fn parse_kib_field(status: &str, field: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

fn jcmd(pid: u32, command: &str) -> Result<String, String> {
    let out = Command::new("jcmd")
        .arg(pid.to_string())
        .arg(command)
        .output()
        .map_err(|e| format!("jcmd: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    if !out.status.success() {
        return Err(format!("jcmd {command}: {}", text.trim()));
    }
    Ok(text)
}

/// A full GC, then the heap in use, in bytes.
pub fn jvm_live_heap(pid: u32) -> Result<u64, String> {
    jcmd(pid, "GC.run")?;
    let info = jcmd(pid, "GC.heap_info")?;
    parse_heap_used(&info).ok_or_else(|| format!("no `used` figure in GC.heap_info: {info}"))
}

/// The first `used <n>K` of `GC.heap_info`'s answer (the whole heap's line comes first,
/// e.g. ` garbage-first heap   total 262144K, used 10240K [...]`), in bytes.
fn parse_heap_used(info: &str) -> Option<u64> {
    let line = info.lines().find(|l| l.contains(" used "))?;
    let after = line.split(" used ").nth(1)?;
    let digits: String = after.chars().take_while(char::is_ascii_digit).collect();
    let n: u64 = digits.parse().ok()?;
    let unit = after[digits.len()..].chars().next();
    Some(match unit {
        Some('K') => n * 1024,
        Some('M') => n << 20,
        Some('G') => n << 30,
        _ => n,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heap_info_is_parsed() {
        let g1 = "12345:\n garbage-first heap   total 262144K, used 10240K [0x00000000f0000000, 0x0000000100000000)\n  region size 1024K, 1 young (1024K), 0 survivors (0K)\n Metaspace       used 20000K, committed 20480K, reserved 1114112K\n";
        assert_eq!(parse_heap_used(g1), Some(10240 * 1024));
        let serial = " def new generation   total 4928K, used 351K [0x...)\n";
        assert_eq!(parse_heap_used(serial), Some(351 * 1024));
        assert_eq!(parse_heap_used("nothing here"), None);
    }

    #[test]
    fn our_own_rss_is_read() {
        let rss = rss_bytes(std::process::id()).expect("our own status");
        assert!(rss > 0);
        assert_eq!(rss_bytes(u32::MAX), None);
        assert_eq!(parse_kib_field("VmRSS:\t  2048 kB\n", "VmRSS:"), Some(2048));
    }
}
