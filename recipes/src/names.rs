//! Lock node names, as Curator (and kazoo) write and read them.
//!
//! A lock node is `<path>/_c_<uuid>-<lock name><10-digit sequence>`: the `_c_<uuid>-` prefix
//! is Curator's protection prefix (a create whose reply was lost is found again by it), the
//! lock name is `lock-` for a mutex and `__READ__`/`__WRIT__` for the read-write lock, and
//! the sequence comes from the server. Contenders are ordered by the sequence alone (the
//! number after the last lock name), so nodes made by Curator, by kazoo (`<hex>__lock__<seq>`)
//! and by us sort together.

use std::path::Path;

use crate::error::Error;

/// Curator's protection prefix (`ProtectedUtils.PROTECTED_PREFIX`).
pub(crate) const PROTECTED_PREFIX: &str = "_c_";
/// The lock name of a mutex (Curator's `InterProcessMutex.LOCK_NAME`).
pub(crate) const MUTEX_LOCK_NAME: &str = "lock-";
/// The lock name kazoo's `Lock` uses (`<uuid hex>__lock__<seq>`).
pub(crate) const KAZOO_LOCK_NAME: &str = "__lock__";
/// The read lock name of Curator's `InterProcessReadWriteLock`.
pub(crate) const READ_LOCK_NAME: &str = "__READ__";
/// The write lock name of Curator's `InterProcessReadWriteLock`.
pub(crate) const WRITE_LOCK_NAME: &str = "__WRIT__";

/// The node name of Curator's `LeaderLatch` participants (`LeaderLatch.LOCK_NAME`).
pub(crate) const LATCH_NAME: &str = "latch-";
/// The node name of Curator's `InterProcessSemaphoreV2` leases.
pub(crate) const LEASE_NAME: &str = "lease-";

/// The names a leader latch treats as participants.
pub(crate) const LATCH_MARKERS: &[&str] = &[LATCH_NAME];
/// The names a semaphore treats as leases.
pub(crate) const LEASE_MARKERS: &[&str] = &[LEASE_NAME];

/// The names a mutex treats as contenders.
pub(crate) const MUTEX_MARKERS: &[&str] = &[MUTEX_LOCK_NAME, KAZOO_LOCK_NAME];
/// The names a read-write lock treats as contenders.
pub(crate) const RW_MARKERS: &[&str] = &[READ_LOCK_NAME, WRITE_LOCK_NAME];

/// The protection prefix for one create: `_c_<uuid>-`.
pub(crate) fn protected_prefix(uuid: &uuid::Uuid) -> String {
    format!("{PROTECTED_PREFIX}{}-", uuid.hyphenated())
}

/// The protection prefix a node name starts with, if it has one.
pub(crate) fn protection_of(name: &str) -> Option<&str> {
    let prefix = name.get(..40)?;
    (prefix.starts_with(PROTECTED_PREFIX) && prefix.ends_with('-')).then_some(prefix)
}

/// The sequence number of a contender node, read after the last of `markers` it contains.
/// `None` for a node that is not a contender.
pub(crate) fn sequence_of(name: &str, markers: &[&str]) -> Option<i64> {
    let (at, marker) = markers
        .iter()
        .filter_map(|m| name.rfind(m).map(|i| (i, *m)))
        .max_by_key(|(i, m)| i + m.len())?;
    let digits = &name[at + marker.len()..];
    let unsigned = digits.strip_prefix('-').unwrap_or(digits);
    if unsigned.is_empty() || unsigned.len() > 10 || !unsigned.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse::<i64>().ok()
}

/// One contender: its node name and sequence number.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Contender {
    pub name: String,
    pub sequence: i64,
}

/// The contenders among `children`, in lock order (by sequence, then name).
pub(crate) fn sorted_contenders(children: Vec<String>, markers: &[&str]) -> Vec<Contender> {
    let mut out: Vec<Contender> = children
        .into_iter()
        .filter_map(|name| sequence_of(&name, markers).map(|sequence| Contender { name, sequence }))
        .collect();
    out.sort_by(|a, b| {
        a.sequence
            .cmp(&b.sequence)
            .then_with(|| a.name.cmp(&b.name))
    });
    out
}

/// `path` if it is a valid recipe path (see [`validate_path`]), [`Error::InvalidPath`]
/// otherwise.
pub(crate) fn checked_path(path: &str) -> Result<String, Error> {
    if validate_path(path) {
        Ok(path.to_string())
    } else {
        Err(Error::InvalidPath(path.to_string()))
    }
}

/// Checks a lock path: absolute, no trailing slash, no empty, `.` or `..` segments.
pub(crate) fn validate_path(path: &str) -> bool {
    if path == "/" || !path.starts_with('/') || path.ends_with('/') {
        return false;
    }
    path[1..]
        .split('/')
        .all(|seg| !seg.is_empty() && seg != "." && seg != ".." && !seg.contains('\0'))
}

/// `base/name`.
pub(crate) fn join(base: &str, name: &str) -> String {
    format!("{base}/{name}")
}

/// The last segment of a path.
pub(crate) fn node_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// Every proper ancestor of `path` and `path` itself, shortest first (`/a`, `/a/b`).
pub(crate) fn ancestors_and_self(path: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (i, c) in path.char_indices().skip(1) {
        if c == '/' {
            out.push(path[..i].to_string());
        }
    }
    out.push(path.to_string());
    out
}

/// Who holds or waits for a lock: stored as the lock node's data, for operators.
///
/// The data is one line of text, `host=<host> pid=<pid> label=<label>` (the label last, so it
/// may contain spaces).
///
/// ```
/// use zooraft_recipes::Owner;
/// let me = Owner::current("orders-worker");
/// let parsed = Owner::parse(&me.to_bytes()).unwrap();
/// assert_eq!(parsed, me);
/// assert_eq!(parsed.pid, std::process::id());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owner {
    /// The host name of the process.
    pub host: String,
    /// Its process id.
    pub pid: u32,
    /// A label chosen by the caller (a service or task name).
    pub label: String,
}

impl Owner {
    /// This process, with a caller-chosen label.
    pub fn current(label: &str) -> Owner {
        Owner {
            host: hostname(),
            pid: std::process::id(),
            label: label.replace('\n', " "),
        }
    }

    /// The node data.
    pub fn to_bytes(&self) -> Vec<u8> {
        format!("host={} pid={} label={}", self.host, self.pid, self.label).into_bytes()
    }

    /// Reads node data written by [`Owner::to_bytes`]; `None` for anything else (Curator
    /// writes the client's IP address, kazoo the identifier it was given).
    pub fn parse(data: &[u8]) -> Option<Owner> {
        let text = std::str::from_utf8(data).ok()?;
        let rest = text.strip_prefix("host=")?;
        let (host, rest) = rest.split_once(" pid=")?;
        let (pid, label) = rest.split_once(" label=")?;
        Some(Owner {
            host: host.to_string(),
            pid: pid.parse().ok()?,
            label: label.to_string(),
        })
    }
}

fn hostname() -> String {
    let from_proc = std::fs::read_to_string(Path::new("/proc/sys/kernel/hostname"))
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty());
    if let Some(h) = from_proc {
        return h;
    }
    let mut buf = [0u8; 256];
    // SAFETY: gethostname writes at most buf.len() bytes into the buffer we own.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc == 0 {
        let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
        String::from_utf8_lossy(&buf[..end]).into_owned()
    } else {
        "unknown".to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequences_of_curator_kazoo_and_negative_nodes() {
        let markers = [MUTEX_LOCK_NAME, KAZOO_LOCK_NAME];
        let curator = "_c_f290140d-9856-42ad-b9bf-348ffc086062-lock-0000000759";
        assert_eq!(sequence_of(curator, &markers), Some(759));
        let kazoo = "514e5a831836450cb1a56c741e990fd8__lock__0000000032";
        assert_eq!(sequence_of(kazoo, &markers), Some(32));
        assert_eq!(sequence_of("lock--0000000005", &markers), Some(-5));
        assert_eq!(sequence_of("leases", &markers), None);
    }

    #[test]
    fn names_are_curators_and_kazoos() {
        assert_eq!(PROTECTED_PREFIX, "_c_");
        assert_eq!(
            [
                MUTEX_LOCK_NAME,
                KAZOO_LOCK_NAME,
                READ_LOCK_NAME,
                WRITE_LOCK_NAME
            ],
            ["lock-", "__lock__", "__READ__", "__WRIT__"]
        );
        assert_eq!([LATCH_NAME, LEASE_NAME], ["latch-", "lease-"]);
    }

    #[test]
    fn contenders_sort_by_sequence_across_clients() {
        let children = vec![
            "_c_8eb6e1f4-0000-0000-0000-000000000000-lock-0000000031".to_string(),
            "514e5a831836450cb1a56c741e990fd8__lock__0000000032".to_string(),
            "_c_00000000-0000-0000-0000-000000000000-lock-0000000030".to_string(),
            "leases".to_string(),
        ];
        let sorted = sorted_contenders(children, MUTEX_MARKERS);
        let seqs: Vec<i64> = sorted.iter().map(|c| c.sequence).collect();
        assert_eq!(seqs, vec![30, 31, 32]);
    }

    #[test]
    fn read_write_names_sort_together() {
        let children = vec![
            "_c_a-__WRIT__0000000003".to_string(),
            "_c_b-__READ__0000000001".to_string(),
            "_c_c-lock-0000000000".to_string(),
        ];
        let sorted = sorted_contenders(children, RW_MARKERS);
        assert_eq!(sorted.len(), 2);
        assert_eq!(sorted[0].sequence, 1);
        assert_eq!(sorted[1].sequence, 3);
    }

    #[test]
    fn protected_prefix_is_curators() {
        let u = uuid::Uuid::nil();
        let p = protected_prefix(&u);
        assert_eq!(p, "_c_00000000-0000-0000-0000-000000000000-");
        assert_eq!(p.len(), 40);
        let name = format!("{p}lock-0000000007");
        assert_eq!(protection_of(&name), Some(p.as_str()));
        assert_eq!(protection_of("lock-0000000007"), None);
        assert_eq!(protection_of("_c_short-lock-1"), None);
        assert_eq!(protection_of("_c_é"), None);
    }

    #[test]
    fn paths() {
        assert!(validate_path("/locks/orders"));
        assert!(!validate_path("/"));
        assert!(!validate_path("locks"));
        assert!(!validate_path("/a//b"));
        assert!(!validate_path("/a/"));
        assert_eq!(ancestors_and_self("/a/b/c"), vec!["/a", "/a/b", "/a/b/c"]);
        assert_eq!(node_name("/a/b"), "b");
    }

    #[test]
    fn owner_rejects_foreign_data() {
        assert_eq!(Owner::parse(b"127.0.1.1"), None);
        assert_eq!(Owner::parse(&[0xff, 0xfe]), None);
        let o = Owner::parse(b"host=h pid=7 label=a b c").unwrap();
        assert_eq!(o.label, "a b c");
    }
}
