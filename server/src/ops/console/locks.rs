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
        // Every recipe's node is ephemeral: a persistent look-alike holds nothing.
        let Some(child) = tree.get(&path).filter(|c| c.kind().client_owner() != 0) else {
            continue;
        };
        let parsed = parse(name).or_else(|| {
            let uuid = name.len() == 32 && name.bytes().all(|b| b.is_ascii_hexdigit());
            (kazoo_semaphore && uuid).then_some((Kind::Lease, 0))
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

    /// A tree of `(path, ephemeral owner or 0, czxid, data)`, parents first.
    fn tree_of(nodes: &[(&str, i64, i64, &[u8])]) -> DataTree {
        use crate::state::tree::{NodeKind, NodeRecord, TreeLoader, TreeOptions};
        let mut loader = TreeLoader::new(TreeOptions::default(), nodes.len() + 1);
        let acl = loader.tree.intern_acl(vec![jute::Acl::open_unsafe()]);
        let record = |owner: i64, czxid: i64, data| NodeRecord {
            data: Some(data),
            acl,
            czxid,
            mzxid: czxid,
            ctime: czxid * 1000,
            mtime: czxid * 1000,
            version: 0,
            cversion: 0,
            aversion: 0,
            kind: if owner == 0 {
                NodeKind::Persistent
            } else {
                NodeKind::Ephemeral(owner)
            },
            pzxid: czxid,
        };
        loader.node("/", &record(0, 0, b"")).expect("root");
        for (path, owner, czxid, data) in nodes {
            loader
                .node(path, &record(*owner, *czxid, data))
                .expect("a node");
        }
        loader.finish().expect("a tree")
    }

    #[test]
    fn the_report_finds_recipes_under_ephemerals_only() {
        let hex = "0123456789abcdef0123456789abcdef";
        let sem = format!("/sem/{hex}");
        let tree = tree_of(&[
            ("/locks", 0, 1, b""),
            ("/locks/m", 0, 2, b""),
            ("/locks/m/_c_a-lock-0000000002", 7, 11, b"second"),
            ("/locks/m/_c_b-lock-0000000001", 8, 10, b"first"),
            ("/sem", 0, 3, b""),
            ("/sem-__lock__", 0, 4, b""),
            (&sem, 9, 12, b"kazoo-sem"),
            ("/cfg", 0, 5, b""),
            ("/cfg/lock-0000000001", 0, 6, b"persistent, not a holder"),
            ("/cfg/member", 9, 13, b"ephemeral, not a recipe's"),
        ]);
        let addresses = BTreeMap::from([(8, "127.0.0.1:5000".to_string())]);
        let r = report(&tree, &addresses, 20_000);
        let locks = r["locks"].as_array().expect("locks");
        let paths: Vec<&str> = locks.iter().filter_map(|l| l["path"].as_str()).collect();
        assert_eq!(paths, ["/locks/m", "/sem"]);
        let m = &locks[0];
        assert_eq!(m["recipe"], "lock");
        assert_eq!(m["holders"][0]["session"], "0x8");
        assert_eq!(m["holders"][0]["token"], 10);
        assert_eq!(m["holders"][0]["client"], "127.0.0.1:5000");
        assert_eq!(m["holders"][0]["label"], "first");
        assert_eq!(m["holders"][0]["held_ms"], 10_000);
        assert_eq!(m["waiters"][0]["session"], "0x7");
        assert_eq!(m["waiters"][0]["waiting_ms"], 9_000);
        assert!(m["waiters"][0]["client"].is_null());
        let s = &locks[1];
        assert_eq!(s["recipe"], "semaphore leases");
        assert_eq!(s["holders"][0]["label"], "kazoo-sem");
    }

    #[test]
    fn labels_are_short_printable_text() {
        assert_eq!(label(Some(b"worker-1")), Some("worker-1".into()));
        assert_eq!(label(Some(b"\x00\x01")), None);
        assert_eq!(label(Some(&[b'a'; 300])), None);
        assert_eq!(label(None), None);
    }
}
