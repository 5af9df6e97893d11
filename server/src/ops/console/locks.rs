//! The Locks page: every lock, read-write lock, semaphore and leader latch found in the tree
//! in Curator's or kazoo's layout, with its holders and its queue.
//!
//! Both libraries build their recipes from ephemeral sequential nodes under a directory, so
//! the candidates are the parents of ephemeral nodes: the tree indexes ephemerals by session,
//! and walking that index costs the number of ephemerals, not the size of the tree. That is
//! what lets the page ask again as soon as anything changed (a long poll on the last zxid,
//! `mod.rs`), so a lock handed over shows its new holder at once.
//!
//! A child's name says its recipe (the markers below); the holder is the lowest sequence
//! number (for read locks: every reader ahead of the first writer), the fencing token its
//! czxid, and everyone else waits in sequence order since the node was created.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{json, Value};

use crate::state::tree::DataTree;

/// What a child's name says it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    /// Curator's InterProcessMutex (`-lock-`), kazoo's Lock and WriteLock (`__lock__`).
    Lock,
    /// Curator's read lock (`__READ__`), kazoo's ReadLock (`__rlock__`).
    Read,
    /// Curator's write lock (`__WRIT__`).
    Write,
    /// Curator's LeaderLatch (`-latch-`).
    Latch,
    /// Curator's semaphore lease (`-lease-`).
    Lease,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Lock => "lock",
            Kind::Read => "read",
            Kind::Write => "write",
            Kind::Latch => "latch",
            Kind::Lease => "lease",
        }
    }
}

/// Markers in children's names, and the recipe each says (longest first where one contains
/// another).
const MARKERS: [(&str, Kind); 7] = [
    ("__READ__", Kind::Read),
    ("__WRIT__", Kind::Write),
    ("__rlock__", Kind::Read),
    ("__lock__", Kind::Lock),
    ("lock-", Kind::Lock),
    ("latch-", Kind::Latch),
    ("lease-", Kind::Lease),
];

/// A child's recipe and sequence number, when its name is one of the layouts.
pub fn parse(name: &str) -> Option<(Kind, u64)> {
    // Sequential nodes end in ten digits (ZooKeeper's %010d).
    let digits = name.len().checked_sub(10)?;
    let (head, tail) = (name.get(..digits)?, name.get(digits..)?);
    if !tail.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let seq = tail.parse().ok()?;
    MARKERS
        .iter()
        .find(|(m, _)| head.ends_with(m))
        .map(|(_, k)| (*k, seq))
}

/// One participant: a node in a lock directory.
#[derive(Debug, Clone)]
pub struct Entry {
    pub name: String,
    pub kind: Kind,
    pub seq: u64,
    pub czxid: i64,
    pub ctime: i64,
    pub owner: i64,
    /// The node's data when it reads as a short label (kazoo writes the identifier,
    /// Curator the client's address).
    pub label: Option<String>,
}

/// Which of a directory's entries (sorted by sequence) hold it.
pub fn holders(entries: &[Entry]) -> Vec<bool> {
    let mut held = vec![false; entries.len()];
    let mut writer_ahead = false;
    for (i, e) in entries.iter().enumerate() {
        held[i] = match e.kind {
            // Every lease is held; waiters queue in the semaphore's own lock directory.
            Kind::Lease => true,
            Kind::Read => !writer_ahead,
            Kind::Lock | Kind::Write | Kind::Latch => i == 0,
        };
        if matches!(e.kind, Kind::Lock | Kind::Write) {
            writer_ahead = true;
        }
    }
    held
}

/// A label from a node's data: printable UTF-8 of at most 200 bytes.
fn label(data: Option<&[u8]>) -> Option<String> {
    let d = data.filter(|d| !d.is_empty() && d.len() <= 200)?;
    let s = std::str::from_utf8(d).ok()?;
    s.chars().all(|c| !c.is_control()).then(|| s.to_string())
}

/// A directory's participants, sorted by sequence (none when nothing there is a recipe's).
pub fn directory(tree: &DataTree, dir: &str) -> Vec<Entry> {
    let Some(node) = tree.get(dir) else {
        return Vec::new();
    };
    // kazoo's semaphore: leases named by a uuid's 32 hex digits beside `<dir>-__lock__`.
    let kazoo_semaphore = tree.get(&format!("{dir}-__lock__")).is_some();
    let mut out = Vec::new();
    for name in node.children() {
        let path = if dir == "/" {
            format!("/{name}")
        } else {
            format!("{dir}/{name}")
        };
        let Some(child) = tree.get(&path) else {
            continue;
        };
        let parsed = parse(name).or_else(|| {
            let uuid = name.len() == 32 && name.bytes().all(|b| b.is_ascii_hexdigit());
            (kazoo_semaphore && uuid && child.kind().client_owner() != 0)
                .then_some((Kind::Lease, 0))
        });
        let Some((kind, seq)) = parsed else {
            continue;
        };
        out.push(Entry {
            name: name.to_string(),
            kind,
            seq,
            czxid: child.czxid(),
            ctime: child.ctime(),
            owner: child.kind().client_owner(),
            label: label(child.data()),
        });
    }
    out.sort_by_key(|e| (e.seq, e.czxid));
    out
}

/// The directories that hold ephemeral nodes: where every lock, latch and lease lives.
pub fn candidate_dirs(tree: &DataTree) -> BTreeSet<String> {
    let mut dirs = BTreeSet::new();
    for (_, paths) in tree.ephemerals_by_session() {
        for p in paths {
            if let Some(i) = p.rfind('/') {
                dirs.insert(if i == 0 {
                    "/".into()
                } else {
                    p[..i].to_string()
                });
            }
        }
    }
    dirs
}

/// What a directory is, from its entries.
fn recipe(entries: &[Entry]) -> &'static str {
    let kinds: BTreeSet<Kind> = entries.iter().map(|e| e.kind).collect();
    if kinds.contains(&Kind::Read) || kinds.contains(&Kind::Write) {
        "read-write lock"
    } else if kinds.contains(&Kind::Latch) {
        "leader latch"
    } else if kinds.contains(&Kind::Lease) {
        "semaphore leases"
    } else {
        "lock"
    }
}

/// Every recipe directory, as the Locks page shows it. `addresses` maps a session to the
/// client address of its connection on this member.
pub fn report(tree: &DataTree, addresses: &BTreeMap<i64, String>, now_ms: i64) -> Value {
    let mut list = Vec::new();
    for dir in candidate_dirs(tree) {
        let entries = directory(tree, &dir);
        if entries.is_empty() {
            continue;
        }
        let held = holders(&entries);
        let show = |e: &Entry, holds: bool| {
            json!({
                "node": e.name,
                "kind": e.kind.name(),
                "sequence": e.seq,
                "token": e.czxid,
                "session": format!("0x{:x}", e.owner),
                "client": addresses.get(&e.owner),
                "label": e.label,
                "created": e.ctime,
                "waiting_ms": if holds { Value::Null } else { json!((now_ms - e.ctime).max(0)) },
                "held_ms": if holds { json!((now_ms - e.ctime).max(0)) } else { Value::Null },
            })
        };
        let (mut holding, mut waiting) = (Vec::new(), Vec::new());
        for (e, h) in entries.iter().zip(&held) {
            if *h {
                holding.push(show(e, true));
            } else {
                waiting.push(show(e, false));
            }
        }
        list.push(json!({
            "path": dir,
            "recipe": recipe(&entries),
            "holders": holding,
            "waiters": waiting,
        }));
    }
    json!({ "locks": list, "now": now_ms })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(name: &str) -> Entry {
        let (kind, seq) = parse(name).expect("a recipe name");
        Entry {
            name: name.into(),
            kind,
            seq,
            czxid: seq as i64,
            ctime: 0,
            owner: 1,
            label: None,
        }
    }

    #[test]
    fn names_of_both_libraries_parse() {
        let curator = "_c_8c6b2f2e-5b8e-4a5a-9a3e-0c2d7e1f0a11-lock-0000000007";
        assert_eq!(parse(curator), Some((Kind::Lock, 7)));
        assert_eq!(parse("lock-0000000003"), Some((Kind::Lock, 3)));
        assert_eq!(parse("_c_x-__READ__0000000001"), Some((Kind::Read, 1)));
        assert_eq!(parse("_c_x-__WRIT__0000000002"), Some((Kind::Write, 2)));
        assert_eq!(parse("_c_x-latch-0000000012"), Some((Kind::Latch, 12)));
        assert_eq!(parse("_c_x-lease-0000000004"), Some((Kind::Lease, 4)));
        assert_eq!(parse("0f3a__lock__0000000009"), Some((Kind::Lock, 9)));
        assert_eq!(parse("0f3a__rlock__0000000010"), Some((Kind::Read, 10)));
        assert_eq!(parse("lock-000000001x"), None);
        assert_eq!(parse("config"), None);
        assert_eq!(parse("member-0000000001"), None);
        assert_eq!(parse("é"), None);
    }

    #[test]
    fn the_lowest_holds_and_readers_share() {
        let mutex = [entry("a-lock-0000000002"), entry("b-lock-0000000005")];
        assert_eq!(holders(&mutex), [true, false]);
        let rw = [
            entry("a-__READ__0000000001"),
            entry("b-__READ__0000000002"),
            entry("c-__WRIT__0000000003"),
            entry("d-__READ__0000000004"),
        ];
        assert_eq!(holders(&rw), [true, true, false, false]);
        let writer_first = [entry("c-__WRIT__0000000001"), entry("d-__READ__0000000002")];
        assert_eq!(holders(&writer_first), [true, false]);
        let kazoo = [entry("x__lock__0000000001"), entry("y__rlock__0000000002")];
        assert_eq!(holders(&kazoo), [true, false]);
        let leases = [entry("a-lease-0000000001"), entry("b-lease-0000000002")];
        assert_eq!(holders(&leases), [true, true]);
    }

    #[test]
    fn labels_are_short_printable_text() {
        assert_eq!(label(Some(b"worker-1")), Some("worker-1".into()));
        assert_eq!(label(Some(b"\x00\x01")), None);
        assert_eq!(label(Some(&[b'a'; 300])), None);
        assert_eq!(label(None), None);
    }
}
