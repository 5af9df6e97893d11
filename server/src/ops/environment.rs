//! `envi`: the process's environment under the keys ZooKeeper prints. ZooKeeper prints Java
//! system properties; the ones that describe the JVM (`java.*`) have no counterpart here and
//! are left out; the rest keep their names and meaning (`os.name` as Java spells it,
//! `Linux`; `os.arch` as Java spells it, `amd64`).
//!
//! Memory: Java reports its heap (`os.memory.total` committed, `.free` unused of it, `.max`
//! the ceiling), and dashboards compute used = total - free. zooraft has no heap; it
//! reports the memory the process may use (the cgroup limit, or the machine's memory) as
//! `max` and `total`, and what of it the process does not hold (limit - resident set) as
//! `free`, so total - free is the process's resident memory, in megabytes as ZooKeeper
//! prints them.

use std::fmt::Write as _;

/// The `envi` answer: ZooKeeper's header line, then `key=value` lines.
pub fn envi(version: &str, member: u64) -> String {
    let mut out = String::from("Environment:\n");
    for (k, v) in properties(version, member) {
        let _ = writeln!(out, "{k}={v}");
    }
    out
}

/// The environment's keys and values, in ZooKeeper's order (`envi`, the AdminServer's
/// `environment`).
pub fn properties(version: &str, member: u64) -> Vec<(&'static str, String)> {
    let hostname = read_trimmed("/proc/sys/kernel/hostname");
    let hosts = std::fs::read_to_string("/etc/hosts").unwrap_or_default();
    let host = canonical_name(&hosts, &hostname);
    let cwd = std::env::current_dir()
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    let (user, home) = user();
    let mb = |bytes: u64| format!("{}MB", bytes / (1024 * 1024));
    let limit = memory_limit();
    let resident = crate::allocator::resident_bytes().unwrap_or(0);
    vec![
        ("zookeeper.version", version.to_string()),
        ("host.name", host),
        ("zooraft.version", env!("CARGO_PKG_VERSION").to_string()),
        ("zooraft.member", member.to_string()),
        ("os.name", java_os_name().to_string()),
        ("os.arch", java_arch().to_string()),
        ("os.version", read_trimmed("/proc/sys/kernel/osrelease")),
        ("user.name", user),
        ("user.home", home),
        ("user.dir", cwd),
        ("os.memory.free", mb(limit.saturating_sub(resident))),
        ("os.memory.max", mb(limit)),
        ("os.memory.total", mb(limit)),
    ]
}

/// The AdminServer's `system_properties`: Java's system properties that mean something
/// outside a JVM, under their names, sorted as ZooKeeper's answer is (`java.*` left out).
pub fn system_properties(version: &str, member: u64) -> Vec<(&'static str, String)> {
    let mut props: Vec<(&'static str, String)> = properties(version, member)
        .into_iter()
        .filter(|(k, _)| !k.starts_with("os.memory") && *k != "host.name")
        .collect();
    props.extend([
        ("file.encoding", "UTF-8".to_string()),
        ("file.separator", "/".to_string()),
        ("line.separator", "\n".to_string()),
        ("path.separator", ":".to_string()),
    ]);
    props.sort_by(|a, b| a.0.cmp(b.0));
    props
}

/// The host's name as Java's `InetAddress.getLocalHost().getCanonicalHostName()` gives it
/// from the hosts file: the address the host name resolves to, then the first name listed
/// for that address (`localhost` when the host name is an alias of 127.0.0.1).
fn canonical_name(hosts: &str, hostname: &str) -> String {
    let entries: Vec<(&str, Vec<&str>)> = hosts
        .lines()
        .map(|l| l.split('#').next().unwrap_or(""))
        .filter_map(|l| {
            let mut words = l.split_whitespace();
            let addr = words.next()?;
            Some((addr, words.collect::<Vec<_>>()))
        })
        .collect();
    let Some(addr) = entries
        .iter()
        .find(|(_, names)| names.contains(&hostname))
        .map(|(a, _)| *a)
    else {
        return hostname.to_string();
    };
    entries
        .iter()
        .find(|(a, names)| *a == addr && !names.is_empty())
        .and_then(|(_, names)| names.first())
        .map_or_else(|| hostname.to_string(), |n| n.to_string())
}

fn read_trimmed(path: &str) -> String {
    std::fs::read_to_string(path)
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

fn java_os_name() -> &'static str {
    match std::env::consts::OS {
        "linux" => "Linux",
        "macos" => "Mac OS X",
        "freebsd" => "FreeBSD",
        other => other,
    }
}

fn java_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "x86" => "i386",
        other => other,
    }
}

/// The user the process runs as (its real uid in `/etc/passwd`), and its home directory.
fn user() -> (String, String) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let uid = status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|l| l.split_whitespace().next())
        .unwrap_or("")
        .to_string();
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
    passwd_entry(&passwd, &uid).unwrap_or_else(|| {
        let name = std::env::var("USER").unwrap_or(uid);
        (name, std::env::var("HOME").unwrap_or_default())
    })
}

/// The name and home of `uid` in a passwd file's text.
fn passwd_entry(passwd: &str, uid: &str) -> Option<(String, String)> {
    passwd.lines().find_map(|line| {
        let fields: Vec<&str> = line.split(':').collect();
        (fields.len() >= 6 && fields[2] == uid)
            .then(|| (fields[0].to_string(), fields[5].to_string()))
    })
}

/// The cgroup v2 memory limit when one is set, else the machine's memory.
fn memory_limit() -> u64 {
    let cgroup = read_trimmed("/sys/fs/cgroup/memory.max")
        .parse::<u64>()
        .ok();
    let machine = meminfo_kb("MemTotal:").map(|kb| kb * 1024);
    match (cgroup, machine) {
        (Some(c), Some(m)) => c.min(m),
        (c, m) => c.or(m).unwrap_or(0),
    }
}

fn meminfo_kb(key: &str) -> Option<u64> {
    proc_number("/proc/meminfo", key, 0)
}

/// The number that is word `nth` after `prefix` on the first line of a `/proc` file that
/// starts with it.
pub fn proc_number(path: &str, prefix: &str, nth: usize) -> Option<u64> {
    std::fs::read_to_string(path)
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix(prefix))
        .and_then(|v| v.split_whitespace().nth(nth))
        .and_then(|v| v.parse().ok())
}

/// Milliseconds since this member became leader (0 while it is not).
pub(super) fn leader_uptime_ms(r: &crate::raft::RaftCounters) -> u64 {
    let since = r
        .leading_since_unix_ms
        .load(std::sync::atomic::Ordering::Relaxed);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    if since == 0 {
        0
    } else {
        now.saturating_sub(since)
    }
}

/// File descriptors the process holds.
pub(super) fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd")
        .map(|d| d.count())
        .unwrap_or(0)
}

/// The soft limit on open files.
pub(super) fn max_fds() -> u64 {
    // "Max open files  <soft>  <hard>  files": the soft limit.
    proc_number("/proc/self/limits", "Max open files", 0).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_host_name() {
        let hosts = "127.0.0.1 localhost\n127.0.0.1 vm # this machine\n::1 ip6-localhost\n";
        assert_eq!(canonical_name(hosts, "vm"), "localhost");
        let hosts = "127.0.0.1 localhost\n10.0.0.5 db1.example.com db1\n";
        assert_eq!(canonical_name(hosts, "db1"), "db1.example.com");
        assert_eq!(canonical_name(hosts, "elsewhere"), "elsewhere");
    }

    #[test]
    fn passwd_lookup() {
        let passwd = "root:x:0:0:root:/root:/bin/bash\nzk:x:1001:1001::/home/zk:/bin/sh\n";
        assert_eq!(
            passwd_entry(passwd, "1001"),
            Some(("zk".into(), "/home/zk".into()))
        );
        assert_eq!(passwd_entry(passwd, "7"), None);
        assert_eq!(passwd_entry("broken", "0"), None);
    }

    #[test]
    fn keys_in_zookeeper_form() {
        let text = envi("3.8.0-zooraft", 2);
        assert!(text.starts_with("Environment:\n"));
        let keys: Vec<&str> = text
            .lines()
            .skip(1)
            .filter_map(|l| l.split_once('=').map(|(k, _)| k))
            .collect();
        for k in [
            "os.version",
            "user.name",
            "user.home",
            "os.memory.free",
            "os.memory.max",
        ] {
            assert!(keys.contains(&k), "{k} missing from {text}");
        }
        let value = |k: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(&format!("{k}=")))
                .unwrap_or_default()
                .to_string()
        };
        assert!(value("os.memory.max").ends_with("MB"));
        let mb = |k: &str| value(k).trim_end_matches("MB").parse::<u64>().unwrap_or(0);
        assert!(mb("os.memory.max") > 0 && mb("os.memory.free") < mb("os.memory.max"));
        assert_eq!(value("zooraft.member"), "2");
    }
}
