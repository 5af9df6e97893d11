//! The tree in and out of snapshots: a frozen capture to encode from, and a loader that
//! builds the arena straight from decoded nodes.
//!
//! The capture walks the tree depth first, so snapshots list parents before children and
//! loading one places every node under a parent already placed (one index probe per path
//! segment of the parent, no per-node path kept). Snapshots from earlier builds list nodes
//! in any order: a node whose parent has not come yet waits, and the waiting nodes are
//! placed after the rest, shallowest first.
//!
//! A snapshot of ours whose checksum holds is depth first and lists each path once: its
//! loader ([`TreeLoader::depth_first`]) finds each node's parent among the ancestors of
//! the node placed before it, with no index lookup, and sets the index entries aside to add
//! them a group of shards at a time at the end ([`super::index::Pending`]): at 10 million
//! znodes adding them one by one, a cache miss each, was most of the load. A node that
//! breaks the order ends that mode (the entries so far are added, and loading goes on as
//! for any snapshot); a path listed twice is an error.

use std::sync::Arc;

use jute::Acl;

use super::arena::{Slots, ROOT};
use super::index::Pending;
use super::slot::{new_slot, ChildStat, NodeId, Slot, NONE};
use super::{DataTree, Node, NodeKind, TreeOptions};
use crate::state::path;

/// A frozen view of the tree, for encoding a snapshot while the tree goes on changing.
#[derive(Debug, Clone)]
pub struct TreeCapture {
    pub(super) slots: Slots,
    pub(super) acls: Vec<Arc<[Acl]>>,
    pub(super) len: usize,
}

impl TreeCapture {
    /// Number of nodes.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The interned ACL lists nodes refer to by [`Node::acl_id`].
    pub fn acl_lists(&self) -> &[Arc<[Acl]>] {
        &self.acls
    }

    /// Every node with its path, parents before their children.
    pub fn walk(&self, mut visit: impl FnMut(&str, Node<'_>)) {
        self.slots.walk(|path, id, slot| {
            visit(
                path,
                Node {
                    id,
                    slot,
                    slots: &self.slots,
                    acls: &self.acls,
                },
            )
        });
    }
}

/// A node as a snapshot stores it. `acl` is an index returned by [`DataTree::intern_acl`].
#[derive(Debug, Clone, Copy)]
pub struct NodeRecord<'a> {
    pub data: Option<&'a [u8]>,
    pub acl: u32,
    pub czxid: i64,
    pub mzxid: i64,
    pub ctime: i64,
    pub mtime: i64,
    pub version: i32,
    pub cversion: i32,
    pub aversion: i32,
    pub kind: NodeKind,
    pub pzxid: i64,
}

impl NodeRecord<'_> {
    fn slot(&self, name: &str) -> Slot {
        let mut s = new_slot(self.kind, self.acl, name.as_bytes(), self.data);
        s.czxid = self.czxid;
        s.mzxid = self.mzxid;
        s.ctime = self.ctime;
        s.mtime = self.mtime;
        s.version = self.version;
        s.aversion = self.aversion;
        s
    }

    fn child_stat(&self) -> ChildStat {
        ChildStat {
            pzxid: self.pzxid,
            cversion: self.cversion,
        }
    }
}

/// Why loaded nodes do not make a tree.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LoadError {
    #[error("invalid path {0:?}")]
    BadPath(String),
    #[error("{0} has no parent")]
    NoParent(String),
    #[error("no root node")]
    NoRoot,
    #[error("{0}: ACL index {1}")]
    Acl(String, u32),
    #[error("{0} is listed twice")]
    Twice(String),
}

/// Builds a tree from a snapshot's nodes.
pub struct TreeLoader {
    pub tree: DataTree,
    waiting: Vec<(String, Slot, ChildStat)>,
    /// The last parent found, by path: siblings come one after another in a snapshot.
    last_parent: (String, NodeId),
    /// Loading depth first, until a node breaks the order.
    depth_first: Option<DepthFirst>,
}

/// The state of a depth-first load (see the module docs).
struct DepthFirst {
    /// The path of the node placed last.
    path: String,
    /// Its ancestors and itself, root first: the length of each one's path (a prefix of
    /// `path`) and its id.
    stack: Vec<(usize, NodeId)>,
    pending: Pending,
}

impl DepthFirst {
    /// The id of `parent_path` if it is the last node placed or one of its ancestors
    /// (forgetting the ancestors below it: depth first, they have no more children to come).
    fn parent(&mut self, parent_path: &str) -> Option<NodeId> {
        while let Some(&(len, id)) = self.stack.last() {
            if len == parent_path.len() && self.path.as_bytes()[..len] == *parent_path.as_bytes() {
                return Some(id);
            }
            if len < parent_path.len() {
                return None;
            }
            self.stack.pop();
        }
        None
    }

    /// `path` (a child of the top of the stack) was placed as `id`.
    fn descend(&mut self, path: &str, id: NodeId) {
        let parent_len = self.stack.last().map_or(0, |&(len, _)| len);
        self.path.truncate(parent_len);
        self.path.push_str(&path[parent_len..]);
        self.stack.push((path.len(), id));
    }
}

impl TreeLoader {
    /// A loader for about `n` nodes.
    pub fn new(options: TreeOptions, n: usize) -> TreeLoader {
        let mut tree = DataTree::empty(options);
        tree.nodes.arena.reserve(n.min(1 << 26));
        TreeLoader {
            tree,
            waiting: Vec::new(),
            last_parent: (String::new(), NONE),
            depth_first: None,
        }
    }

    /// A loader for about `n` nodes listed depth first (the root first, every node right
    /// after its parent's earlier children and their subtrees), each path once: a
    /// snapshot of ours whose checksum holds. Nodes in another order are loaded all the
    /// same, more slowly; a path listed twice is refused ([`LoadError::Twice`]).
    pub fn depth_first(options: TreeOptions, n: usize) -> TreeLoader {
        let mut loader = TreeLoader::new(options, n);
        loader.depth_first = Some(DepthFirst {
            path: String::new(),
            stack: Vec::new(),
            pending: Pending::with_capacity(n.min(1 << 26)),
        });
        loader
    }

    /// Ends a depth-first load: the entries set aside go into the index.
    fn end_depth_first(&mut self) -> Result<(), LoadError> {
        let Some(df) = self.depth_first.take() else {
            return Ok(());
        };
        self.tree
            .nodes
            .arena
            .absorb(df.pending)
            .map_err(|id| LoadError::Twice(self.tree.nodes.arena.path_of(id)))
    }

    /// Adds one node; a node already loaded under the same path is replaced (its children
    /// stay).
    pub fn node(&mut self, path_in: &str, record: &NodeRecord) -> Result<(), LoadError> {
        if path_in != "/" && path::validate(path_in).is_err() {
            return Err(LoadError::BadPath(path_in.to_string()));
        }
        self.checked_node(path_in, record)
    }

    /// As [`node`](Self::node), for a path the caller has already checked with
    /// [`path::validate`]: the snapshot reader checks paths on its parsing thread, off the
    /// thread that builds the tree, which a big tree's load waits on.
    pub fn checked_node(&mut self, path_in: &str, record: &NodeRecord) -> Result<(), LoadError> {
        if record.acl as usize >= self.tree.nodes.acls.len() {
            return Err(LoadError::Acl(path_in.to_string(), record.acl));
        }
        let stat = record.child_stat();
        if path_in == "/" {
            let slot = record.slot("");
            return match self.tree.nodes.arena.get(ROOT) {
                Some(_) => {
                    self.replace(ROOT, path_in, slot, stat);
                    Ok(())
                }
                None if self.tree.nodes.arena.len() == 0 => {
                    if let Ok(root) = self.tree.nodes.insert_slot(NONE, path_in, slot) {
                        self.tree.nodes.arena.set_child_stat(root, stat);
                    }
                    if let Some(df) = &mut self.depth_first {
                        df.descend(path_in, ROOT);
                    }
                    Ok(())
                }
                None => Err(LoadError::NoRoot),
            };
        }
        let name = path::child_name(path_in);
        let slot = record.slot(name);
        if let Some(df) = &mut self.depth_first {
            if let Some(parent) = df.parent(path::parent_of(path_in)) {
                let id =
                    self.tree
                        .nodes
                        .place_slot_unindexed(parent, path_in, slot, &mut df.pending);
                self.tree.nodes.arena.set_child_stat(id, stat);
                df.descend(path_in, id);
                return Ok(());
            }
            self.end_depth_first()?;
        }
        self.place(path_in, slot, stat);
        Ok(())
    }

    fn place(&mut self, path_in: &str, slot: Slot, stat: ChildStat) -> bool {
        let parent_path = path::parent_of(path_in);
        let tree = &mut self.tree;
        let cached = &mut self.last_parent;
        let parent = if cached.1 != NONE && cached.0 == parent_path {
            Some(cached.1)
        } else if tree.nodes.arena.get(ROOT).is_none() {
            None
        } else {
            let found = tree.nodes.arena.lookup(parent_path);
            if let Some(id) = found {
                cached.0.clear();
                cached.0.push_str(parent_path);
                cached.1 = id;
            }
            found
        };
        match parent {
            Some(parent) => {
                // A path listed twice: the later node replaces the earlier (kept for it).
                match tree.nodes.insert_slot(parent, path_in, slot) {
                    Ok(id) => tree.nodes.arena.set_child_stat(id, stat),
                    Err((old, slot)) => self.replace(old, path_in, slot, stat),
                }
                true
            }
            None => {
                self.waiting.push((path_in.to_string(), slot, stat));
                false
            }
        }
    }

    fn replace(&mut self, id: u32, path_in: &str, slot: Slot, stat: ChildStat) {
        let tree = &mut self.tree;
        let Some(old) = tree.nodes.arena.replace(id, slot) else {
            return;
        };
        tree.nodes.arena.set_child_stat(id, stat);
        let Some(new) = tree.nodes.arena.get(id) else {
            return;
        };
        let (new_len, new_kind) = (new.data_len(), new.kind());
        tree.nodes.data_size = (tree.nodes.data_size + new_len).saturating_sub(old.data_len());
        tree.nodes.unindex_kind(path_in, old.kind());
        tree.nodes.index_kind(path_in, new_kind);
    }

    /// The tree, once every node waiting for its parent is placed.
    pub fn finish(mut self) -> Result<DataTree, LoadError> {
        if self.tree.nodes.arena.get(ROOT).is_none() {
            return Err(LoadError::NoRoot);
        }
        self.end_depth_first()?;
        let mut waiting = std::mem::take(&mut self.waiting);
        waiting.sort_by_key(|(p, ..)| p.bytes().filter(|&b| b == b'/').count());
        for (p, slot, stat) in waiting {
            if !self.place(&p, slot, stat) {
                return Err(LoadError::NoParent(p));
            }
        }
        Ok(self.tree)
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use jute::Acl;

    use super::*;
    use crate::state::tree::{CreateOp, CreateRecord, TxnContext};

    fn ctx(zxid: i64) -> TxnContext<'static> {
        TxnContext {
            zxid,
            time: zxid,
            session: 9,
            auth: &[],
        }
    }

    fn sample() -> DataTree {
        let mut t = DataTree::default();
        let acl = [Acl::open_unsafe()];
        for (i, (p, data, flags)) in [
            ("/a", Some(&b"x"[..]), 0),
            ("/a/b", None, 0),
            ("/a/b/c", Some(&b""[..]), 1),
            ("/d", Some(&b"yy"[..]), 0),
        ]
        .into_iter()
        .enumerate()
        {
            let op = CreateOp {
                path: p,
                data: data.map(Bytes::copy_from_slice),
                acl: &acl,
                flags,
                record: CreateRecord::Plain,
            };
            t.create(&ctx(i as i64 + 1), &op, &mut Vec::new(), None)
                .unwrap();
        }
        t
    }

    fn reload(capture: &TreeCapture, reverse: bool) -> Result<DataTree, LoadError> {
        reload_with(capture, reverse, false)
    }

    fn reload_with(
        capture: &TreeCapture,
        reverse: bool,
        depth_first: bool,
    ) -> Result<DataTree, LoadError> {
        let mut nodes = Vec::new();
        capture.walk(|p, n| {
            let record = NodeRecord {
                data: n.data(),
                acl: n.acl_id(),
                czxid: n.czxid(),
                mzxid: n.mzxid(),
                ctime: n.ctime(),
                mtime: n.mtime(),
                version: n.version(),
                cversion: n.cversion(),
                aversion: n.aversion(),
                kind: n.kind(),
                pzxid: n.pzxid(),
            };
            let record = NodeRecord {
                data: None,
                ..record
            };
            nodes.push((p.to_string(), record, n.data().map(<[u8]>::to_vec)));
        });
        if reverse {
            nodes.reverse();
        }
        let mut loader = if depth_first {
            TreeLoader::depth_first(TreeOptions::default(), nodes.len())
        } else {
            TreeLoader::new(TreeOptions::default(), nodes.len())
        };
        for list in capture.acl_lists() {
            loader.tree.intern_acl(list.to_vec());
        }
        for (p, record, data) in &nodes {
            let record = NodeRecord {
                data: data.as_deref(),
                ..*record
            };
            loader.node(p, &record)?;
        }
        // A capture is walked depth first: in that mode the loader never had to leave it.
        assert_eq!(
            loader.depth_first.is_some(),
            depth_first && !reverse,
            "depth-first mode at the end"
        );
        loader.finish()
    }

    fn summary(t: &DataTree) -> Vec<String> {
        t.sorted_paths()
            .into_iter()
            .map(|p| {
                let n = t.get(&p).unwrap();
                format!("{p} {:?} {:?} {:?}", n.data(), n.stat(), n.kind())
            })
            .collect()
    }

    #[test]
    fn loads_in_any_order_and_keeps_null_data() {
        let t = sample();
        for (reverse, depth_first) in [(false, false), (true, false), (false, true), (true, true)] {
            let back = reload_with(&t.capture(), reverse, depth_first).unwrap();
            assert_eq!(summary(&back), summary(&t));
            assert_eq!(back.approximate_data_size(), t.approximate_data_size());
            assert_eq!(back.ephemerals_of(9).count(), 1);
        }
        assert_eq!(t.get("/a/b").unwrap().data(), None);
        assert_eq!(t.get("/a/b/c").unwrap().data(), Some(&b""[..]));
    }

    #[test]
    fn a_capture_does_not_see_later_writes() {
        let mut t = sample();
        let before = summary(&t);
        let capture = t.capture();
        let mut tr = Vec::new();
        t.set_data(
            &ctx(9),
            "/d",
            Some(Bytes::from_static(b"new")),
            -1,
            &mut tr,
            None,
        )
        .unwrap();
        t.delete(&ctx(10), "/a/b/c", -1, &mut tr, None).unwrap();
        let op = CreateOp {
            path: "/z",
            data: None,
            acl: &[Acl::read_unsafe()],
            flags: 0,
            record: CreateRecord::Plain,
        };
        t.create(&ctx(11), &op, &mut tr, None).unwrap();
        assert_eq!(summary(&reload(&capture, false).unwrap()), before);
        assert_ne!(summary(&t), before);
    }

    #[test]
    fn a_path_listed_twice_keeps_the_later_node_and_its_children() {
        let t = sample();
        let mut loader = TreeLoader::new(TreeOptions::default(), 8);
        for list in t.capture().acl_lists() {
            loader.tree.intern_acl(list.to_vec());
        }
        let mut nodes = Vec::new();
        t.capture().walk(|p, n| {
            let data = n.data().map(<[u8]>::to_vec);
            nodes.push((p.to_string(), data, n.acl_id(), n.kind(), n.version()));
        });
        fn record(data: Option<&[u8]>, acl: u32, kind: NodeKind, version: i32) -> NodeRecord<'_> {
            NodeRecord {
                data,
                acl,
                czxid: 1,
                mzxid: 1,
                ctime: 1,
                mtime: 1,
                version,
                cversion: 0,
                aversion: 0,
                kind,
                pzxid: 1,
            }
        }
        for (p, data, acl, kind, version) in &nodes {
            loader
                .node(p, &record(data.as_deref(), *acl, *kind, *version))
                .unwrap();
        }
        loader
            .node("/a", &record(Some(b"again"), 0, NodeKind::Persistent, 7))
            .unwrap();
        let back = loader.finish().unwrap();
        assert_eq!(back.node_count(), t.node_count());
        let a = back.get("/a").unwrap();
        assert_eq!((a.data(), a.version()), (Some(&b"again"[..]), 7));
        assert_eq!(a.children().collect::<Vec<_>>(), ["b"]);
        assert!(back.get("/a/b/c").is_some());
    }

    /// A tree of `n` nodes at depths 1 to 4, names reused under different parents.
    fn wide_and_deep(n: usize) -> DataTree {
        let mut t = DataTree::default();
        let acl = [Acl::open_unsafe()];
        let mut paths: Vec<String> = vec!["/".into()];
        for i in 0..n {
            let parent = &paths[(i * 7919) % paths.len()];
            let depth = parent.matches('/').count();
            let parent = if depth >= 4 { "/" } else { parent.as_str() };
            let path = format!("{}/n{}", parent.trim_end_matches('/'), i % 97);
            let path = if t.get(&path).is_some() {
                format!("{path}-{i}")
            } else {
                path
            };
            let op = CreateOp {
                path: &path,
                data: Some(Bytes::from(format!("d{i}"))),
                acl: &acl,
                flags: 0,
                record: CreateRecord::Plain,
            };
            t.create(&ctx(i as i64 + 1), &op, &mut Vec::new(), None)
                .unwrap();
            paths.push(path);
        }
        t
    }

    #[test]
    fn a_depth_first_load_finds_every_node_once_the_index_is_built() {
        let t = wide_and_deep(20_000);
        for (reverse, depth_first) in [(false, true), (true, true), (false, false)] {
            let back = reload_with(&t.capture(), reverse, depth_first).unwrap();
            assert_eq!(back.node_count(), t.node_count());
            assert_eq!(summary(&back), summary(&t), "reverse {reverse}");
            for p in t.sorted_paths().iter().step_by(13) {
                let (a, b) = (back.get(p).unwrap(), t.get(p).unwrap());
                assert_eq!((a.data(), a.stat()), (b.data(), b.stat()), "{p}");
            }
            assert!(back.get("/n1/none").is_none());
        }
    }

    #[test]
    fn a_depth_first_load_refuses_a_path_listed_twice() {
        let t = sample();
        let capture = t.capture();
        let mut loader = TreeLoader::depth_first(TreeOptions::default(), 8);
        for list in capture.acl_lists() {
            loader.tree.intern_acl(list.to_vec());
        }
        let mut nodes = Vec::new();
        capture.walk(|p, n| {
            let data = n.data().map(<[u8]>::to_vec);
            nodes.push((p.to_string(), data, n.acl_id(), n.kind()));
        });
        nodes.push(nodes[1].clone());
        for (p, data, acl, kind) in &nodes {
            let record = NodeRecord {
                data: data.as_deref(),
                acl: *acl,
                czxid: 1,
                mzxid: 1,
                ctime: 1,
                mtime: 1,
                version: 0,
                cversion: 0,
                aversion: 0,
                kind: *kind,
                pzxid: 1,
            };
            loader.node(p, &record).unwrap();
        }
        let twice = nodes[1].0.clone();
        assert_eq!(loader.finish().err(), Some(LoadError::Twice(twice)));
    }

    #[test]
    fn an_orphan_or_a_bad_path_is_refused() {
        let t = sample();
        let capture = t.capture();
        let mut loader = TreeLoader::new(TreeOptions::default(), 4);
        let acl = loader.tree.intern_acl(vec![Acl::open_unsafe()]);
        let mut record = None;
        capture.walk(|p, n| {
            if p == "/" {
                record = Some((n.czxid(), n.kind()));
            }
        });
        let (czxid, kind) = record.unwrap();
        let node = NodeRecord {
            data: None,
            acl,
            czxid,
            mzxid: 0,
            ctime: 0,
            mtime: 0,
            version: 0,
            cversion: 0,
            aversion: 0,
            kind,
            pzxid: 0,
        };
        assert_eq!(
            loader.node("/x/", &node),
            Err(LoadError::BadPath("/x/".into()))
        );
        assert_eq!(
            loader.node("/", &NodeRecord { acl: 7, ..node }),
            Err(LoadError::Acl("/".into(), 7))
        );
        loader.node("/p/q", &node).unwrap();
        assert_eq!(loader.finish().err(), Some(LoadError::NoRoot));
        let mut loader = TreeLoader::new(TreeOptions::default(), 4);
        loader.tree.intern_acl(vec![Acl::open_unsafe()]);
        loader.node("/", &node).unwrap();
        loader.node("/p/q", &node).unwrap();
        assert_eq!(
            loader.finish().err(),
            Some(LoadError::NoParent("/p/q".into()))
        );
    }
}
