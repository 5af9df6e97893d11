//! The Tree page's answers: one node (its data, decoded Stat, ACL, a page of its children,
//! the watches on it) and a search by path prefix.
//!
//! Data goes out as hex: the browser shows it as text, pretty JSON or hex, and bytes that
//! are not UTF-8 survive the trip. Children are sorted and paged so a node with a hundred
//! thousand children costs the page one page of names; the search stops after a bounded
//! number of visited nodes so it never holds the tree's lock for long.

use serde_json::{json, Value};

use crate::state::tree::DataTree;

/// Children per page unless asked otherwise, and at most.
pub const PAGE: usize = 100;
pub const MAX_PAGE: usize = 1000;
/// Paths a search returns, and nodes it visits, at most.
const SEARCH_RESULTS: usize = 200;
const SEARCH_VISITS: usize = 200_000;

/// Lowercase hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

/// ZooKeeper's permission bits as letters (`cdrwa`).
pub fn perms(p: i32) -> String {
    [(4, 'c'), (8, 'd'), (1, 'r'), (2, 'w'), (16, 'a')]
        .iter()
        .filter(|(bit, _)| p & bit != 0)
        .map(|(_, c)| *c)
        .collect()
}

/// A path joined to a child's name.
pub fn child_path(parent: &str, name: &str) -> String {
    if parent == "/" {
        format!("/{name}")
    } else {
        format!("{parent}/{name}")
    }
}

/// A zxid as the page shows it, with its epoch and counter.
fn zxid(z: i64) -> Value {
    json!({"hex": format!("0x{z:x}"), "epoch": z >> 32, "counter": z & 0xffff_ffff})
}

/// One node, or `None` when there is none at `path`. `watchers` are the sessions watching it.
pub fn node(
    tree: &DataTree,
    path: &str,
    offset: usize,
    limit: usize,
    watchers: &[i64],
) -> Option<Value> {
    let n = tree.get(path)?;
    let stat = n.stat();
    let mut names: Vec<&str> = n.children().collect();
    names.sort_unstable();
    let total = names.len();
    let limit = limit.clamp(1, MAX_PAGE);
    let page: Vec<Value> = names
        .iter()
        .skip(offset)
        .take(limit)
        .map(|name| {
            let children = tree
                .get(&child_path(path, name))
                .map_or(0, |c| c.num_children());
            json!({"name": name, "children": children})
        })
        .collect();
    let acl: Vec<Value> = n
        .acl()
        .iter()
        .map(|a| json!({"scheme": a.id.scheme, "id": a.id.id, "perms": perms(a.perms)}))
        .collect();
    let watch_sessions: Vec<String> = watchers.iter().map(|s| format!("0x{s:x}")).collect();
    Some(json!({
        "path": path,
        "data_hex": n.data().map(hex),
        "stat": {
            "czxid": zxid(stat.czxid),
            "mzxid": zxid(stat.mzxid),
            "pzxid": zxid(stat.pzxid),
            "ctime": stat.ctime,
            "mtime": stat.mtime,
            "version": stat.version,
            "cversion": stat.cversion,
            "aversion": stat.aversion,
            "ephemeralOwner": format!("0x{:x}", stat.ephemeral_owner),
            "dataLength": stat.data_length,
            "numChildren": stat.num_children,
        },
        "acl": acl,
        "children": {"total": total, "offset": offset, "names": page},
        "watches": {"count": watchers.len(), "sessions": watch_sessions},
    }))
}

/// Paths that start with `prefix`, in order, at most [`SEARCH_RESULTS`].
pub fn search(tree: &DataTree, prefix: &str) -> Value {
    let prefix = if prefix.starts_with('/') {
        prefix.to_string()
    } else {
        format!("/{prefix}")
    };
    // Start from the deepest existing node the prefix names whole.
    let mut start = prefix.as_str();
    while tree.get(start).is_none() {
        start = match start.rfind('/') {
            Some(0) | None => "/",
            Some(i) => &start[..i],
        };
    }
    let (mut found, mut visits, mut complete) = (Vec::new(), 0, true);
    let mut stack = vec![start.to_string()];
    while let Some(path) = stack.pop() {
        visits += 1;
        if found.len() >= SEARCH_RESULTS || visits > SEARCH_VISITS {
            complete = false;
            break;
        }
        if path.starts_with(&prefix) {
            found.push(path.clone());
        }
        let Some(n) = tree.get(&path) else { continue };
        let mut names: Vec<&str> = n.children().collect();
        names.sort_unstable_by(|a, b| b.cmp(a));
        for name in names {
            let child = child_path(&path, name);
            // Only subtrees that can hold a match: the child is on the prefix's way, or
            // already under it.
            if child.starts_with(&prefix) || prefix.starts_with(&child) {
                stack.push(child);
            }
        }
    }
    json!({"prefix": prefix, "paths": found, "complete": complete})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn perms_and_hex_read_as_zookeeper_prints_them() {
        assert_eq!(perms(31), "cdrwa");
        assert_eq!(perms(1), "r");
        assert_eq!(perms(0), "");
        assert_eq!(hex(b"\x00<a>"), "003c613e");
        assert_eq!(child_path("/", "a"), "/a");
        assert_eq!(child_path("/a", "b"), "/a/b");
    }

    #[test]
    fn the_fresh_tree_reads_and_searches() {
        let tree = DataTree::default();
        let root = node(&tree, "/", 0, PAGE, &[7]).expect("root");
        assert_eq!(root["children"]["names"][0]["name"], "zookeeper");
        assert_eq!(root["watches"]["sessions"][0], "0x7");
        assert!(node(&tree, "/nope", 0, PAGE, &[]).is_none());
        let paged = node(&tree, "/zookeeper", 1, 1, &[]).expect("zookeeper");
        assert_eq!(paged["children"]["total"], 2);
        assert_eq!(paged["children"]["names"].as_array().map(Vec::len), Some(1));
        let found = search(&tree, "/zookeeper/q");
        assert_eq!(found["paths"], json!(["/zookeeper/quota"]));
        let all = search(&tree, "zoo");
        assert_eq!(
            all["paths"],
            json!(["/zookeeper", "/zookeeper/config", "/zookeeper/quota"])
        );
    }
}
