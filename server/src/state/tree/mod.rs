//! The data tree: znodes, their `Stat`, and every mutation as a deterministic function of
//! the tree and the transaction (zxid, time, session, auth ids).
//!
//! Each write checks its preconditions in Apache ZooKeeper's order (`PrepRequestProcessor`)
//! and then mutates the tree the way `DataTree` does, so that every member applying the same
//! log reaches the same state and every client gets the error ZooKeeper would give. Nothing
//! here reads a clock, a random source or anything local: zxid, time and session come from
//! the replicated entry.
//!
//! A multi applies its ops one by one while recording an [`Undo`] log; if one op fails, the
//! log is rolled back so the multi leaves no trace. Watch triggers are returned to the caller
//! (never fired from here) so a failed multi fires none.
//!
//! The znodes live in an arena of compact slots ([`arena`]): one slot and one name+data
//! allocation per znode, one (parent, name) index, no stored paths. A snapshot captures the
//! arena in one pointer copy per chunk of slots ([`DataTree::capture`]); the snapshot thread
//! encodes that frozen view while the tree goes on changing, a write copying a chunk only
//! if the capture still holds it.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use jute::Acl;

mod arena;
mod blob;
mod index;
mod kind;
mod load;
#[cfg(test)]
pub mod memory;
mod node;
mod replay;
mod slot;
mod write;

use arena::{Arena, ROOT};
pub use load::{LoadError, NodeRecord, TreeCapture, TreeLoader};
pub use node::{
    CreateOp, CreateRecord, Node, NodeKind, Trigger, TxnContext, Undo, CONFIG, MAX_TTL_MS, QUOTA,
    ZOOKEEPER,
};
pub use replay::DecidedCreate;
use slot::{new_slot, ChildStat, NodeId, Slot, NONE};

/// Tree-wide settings that change what writes accept.
#[derive(Debug, Clone, Copy, Default)]
pub struct TreeOptions {
    /// `extendedTypesEnabled`: TTL nodes allowed.
    pub extended_types: bool,
}

/// The tree and its indexes (ephemerals by session, containers, TTL nodes).
#[derive(Debug, Clone)]
pub struct DataTree {
    arena: Arena,
    /// Interned ACL lists; a node holds the index of its list.
    acls: Vec<Arc<[Acl]>>,
    acl_ids: HashMap<Arc<[Acl]>, u32, ahash::RandomState>,
    ephemerals: HashMap<i64, BTreeSet<String>>,
    containers: BTreeSet<String>,
    ttls: BTreeSet<String>,
    /// Sum of path lengths and data lengths (ZooKeeper's `approximateDataSize`).
    data_size: u64,
    pub options: TreeOptions,
}

impl Default for DataTree {
    fn default() -> Self {
        DataTree::new(TreeOptions::default())
    }
}

impl DataTree {
    /// A fresh tree: `/`, `/zookeeper`, `/zookeeper/quota` and `/zookeeper/config`, as
    /// ZooKeeper builds it (children added without bumping cversion, so `/` shows
    /// cversion -1; the config node is world-readable with aversion -1).
    pub fn new(options: TreeOptions) -> DataTree {
        let mut tree = DataTree::empty(options);
        let open = tree.intern_acl(vec![Acl::open_unsafe()]);
        let read = tree.intern_acl(vec![Acl::read_unsafe()]);
        let system =
            |name: &str, acl: u32| new_slot(NodeKind::Persistent, acl, name.as_bytes(), Some(&[]));
        let mut config = system("config", read);
        config.aversion = -1;
        // (Into an empty tree: no name is taken yet.)
        let _ = tree.insert_slot(NONE, "/", system("", open));
        let _ = tree.insert_slot(ROOT, ZOOKEEPER, system("zookeeper", open));
        if let Some(zk) = tree.arena.lookup(ZOOKEEPER) {
            let _ = tree.insert_slot(zk, QUOTA, system("quota", open));
            let _ = tree.insert_slot(zk, CONFIG, config);
        }
        tree
    }

    /// An empty tree with nothing in it, for loading a snapshot into.
    pub fn empty(options: TreeOptions) -> DataTree {
        DataTree {
            arena: Arena::new(),
            acls: Vec::new(),
            acl_ids: HashMap::default(),
            ephemerals: HashMap::new(),
            containers: BTreeSet::new(),
            ttls: BTreeSet::new(),
            data_size: 0,
            options,
        }
    }

    /// Places a node under `parent` and indexes it; `path` is its full path. If `parent`
    /// has a child of that name already, nothing changes and its id is the error (with the
    /// slot given back).
    fn insert_slot(
        &mut self,
        parent: NodeId,
        path: &str,
        slot: Slot,
    ) -> Result<NodeId, (NodeId, Slot)> {
        let (len, kind) = (slot.data_len(), slot.kind());
        let id = self.arena.insert(parent, slot)?;
        self.count_placed(path, len, kind);
        Ok(id)
    }

    /// [`insert_slot`](Self::insert_slot) with the index entry set aside in `pending` (see
    /// [`Arena::place_unindexed`]).
    fn place_slot_unindexed(
        &mut self,
        parent: NodeId,
        path: &str,
        slot: Slot,
        pending: &mut index::Pending,
    ) -> NodeId {
        let (len, kind) = (slot.data_len(), slot.kind());
        let id = self.arena.place_unindexed(parent, slot, pending);
        self.count_placed(path, len, kind);
        id
    }

    /// A node placed at `path` with `len` bytes of data: the data size and the kind's
    /// index (ephemerals, containers, TTL nodes) take it in.
    fn count_placed(&mut self, path: &str, len: u64, kind: NodeKind) {
        self.data_size += path.len() as u64 + len;
        self.index_kind(path, kind);
    }

    /// Removes a (childless) node and unindexes it; `path` is its full path.
    fn remove_slot(&mut self, id: NodeId, path: &str) -> Option<(Slot, ChildStat)> {
        let (slot, stat) = self.arena.remove(id)?;
        self.data_size = self
            .data_size
            .saturating_sub(path.len() as u64 + slot.data_len());
        self.unindex_kind(path, slot.kind());
        Some((slot, stat))
    }

    fn index_kind(&mut self, path: &str, kind: NodeKind) {
        match kind {
            NodeKind::Persistent => {}
            NodeKind::Ephemeral(s) => {
                self.ephemerals
                    .entry(s)
                    .or_default()
                    .insert(path.to_string());
            }
            NodeKind::Container => {
                self.containers.insert(path.to_string());
            }
            NodeKind::Ttl(_) => {
                self.ttls.insert(path.to_string());
            }
        }
    }

    fn unindex_kind(&mut self, path: &str, kind: NodeKind) {
        match kind {
            NodeKind::Persistent => {}
            NodeKind::Ephemeral(s) => {
                if let Some(set) = self.ephemerals.get_mut(&s) {
                    set.remove(path);
                    if set.is_empty() {
                        self.ephemerals.remove(&s);
                    }
                }
            }
            NodeKind::Container => {
                self.containers.remove(path);
            }
            NodeKind::Ttl(_) => {
                self.ttls.remove(path);
            }
        }
    }

    /// Shares identical ACL lists between nodes (most nodes have the same one): the index
    /// of the list in the tree's table.
    pub fn intern_acl(&mut self, acl: Vec<Acl>) -> u32 {
        if let Some(&i) = self.acl_ids.get(&acl[..]) {
            return i;
        }
        let shared: Arc<[Acl]> = acl.into();
        let i = self.acls.len() as u32;
        self.acls.push(shared.clone());
        self.acl_ids.insert(shared, i);
        i
    }

    fn view(&self, id: NodeId) -> Option<Node<'_>> {
        Some(Node {
            id,
            slot: self.arena.get(id)?,
            slots: self.arena.slots(),
            acls: &self.acls,
        })
    }

    /// Looks a node up. `""` is the root, as in ZooKeeper.
    pub fn get(&self, path: &str) -> Option<Node<'_>> {
        self.view(self.arena.lookup(path)?)
    }

    /// A node to change by path, with its id (its chunk copied first if a snapshot still
    /// holds it).
    fn get_mut(&mut self, path: &str) -> Option<&mut Slot> {
        let id = self.arena.lookup(path)?;
        self.arena.get_mut(id)
    }

    /// A consistent view of the tree for a snapshot, taken in one pointer copy per chunk.
    pub fn capture(&self) -> TreeCapture {
        TreeCapture {
            slots: self.arena.capture(),
            acls: self.acls.clone(),
            len: self.arena.len(),
        }
    }

    /// Node count as ZooKeeper reports it (`Node count`, `zk_znode_count`): its map holds the
    /// root twice (under `""` and `/`).
    pub fn node_count(&self) -> usize {
        self.arena.len() + 1
    }

    pub fn approximate_data_size(&self) -> u64 {
        self.data_size
    }

    /// All ephemeral paths of a session, in path order.
    pub fn ephemerals_of(&self, session: i64) -> impl Iterator<Item = &String> {
        self.ephemerals.get(&session).into_iter().flatten()
    }

    /// Number of ephemeral nodes.
    pub fn ephemeral_count(&self) -> usize {
        self.ephemerals.values().map(|s| s.len()).sum()
    }

    /// Sessions that own at least one ephemeral, with their counts.
    pub fn ephemerals_by_session(&self) -> impl Iterator<Item = (i64, &BTreeSet<String>)> {
        self.ephemerals.iter().map(|(s, p)| (*s, p))
    }

    /// `getAllChildrenNumber`: every descendant (ZooKeeper counts all nodes for `/`, which
    /// includes the `/zookeeper` subtree).
    pub fn all_children_number(&self, path: &str) -> usize {
        let Some(id) = self.arena.lookup(path) else {
            return 0;
        };
        if id == ROOT {
            return self.arena.len() - 1;
        }
        let slots = self.arena.slots();
        let mut count = 0;
        let mut stack = vec![id];
        while let Some(n) = stack.pop() {
            for (c, _) in slots.children(n) {
                count += 1;
                stack.push(c);
            }
        }
        count
    }

    /// Every path in the tree, sorted (digests, dumps, tests).
    pub fn sorted_paths(&self) -> Vec<String> {
        let mut paths = Vec::with_capacity(self.arena.len());
        self.arena.slots().walk(|p, _, _| paths.push(p.to_string()));
        paths.sort_unstable();
        paths
    }

    /// Paths of the containers (for tests of snapshot loading).
    #[cfg(test)]
    pub fn containers(&self) -> &BTreeSet<String> {
        &self.containers
    }

    /// Paths of the TTL nodes (the leader's cleanup ages them, `raft/ttl_clock.rs`).
    pub fn ttls(&self) -> &BTreeSet<String> {
        &self.ttls
    }
}

/// `/`, `/zookeeper`, `/zookeeper/quota`, `/zookeeper/config` cannot be deleted.
pub fn is_special_path(path: &str) -> bool {
    matches!(path, "/" | ZOOKEEPER | QUOTA | CONFIG)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use jute::{ErrorCode, Stat};

    fn ctx(zxid: i64) -> TxnContext<'static> {
        TxnContext {
            zxid,
            time: 1000 + zxid,
            session: 0x42,
            auth: &[],
        }
    }

    fn open() -> Vec<Acl> {
        vec![Acl::open_unsafe()]
    }

    fn create(
        tree: &mut DataTree,
        zxid: i64,
        path: &str,
        flags: i32,
    ) -> Result<(String, Stat), ErrorCode> {
        let acl = open();
        let record = match flags {
            4 => CreateRecord::Container,
            _ => CreateRecord::Plain,
        };
        let op = CreateOp {
            path,
            data: Some(Bytes::from_static(b"d")),
            acl: &acl,
            flags,
            record,
        };
        tree.create(&ctx(zxid), &op, &mut Vec::new(), None)
    }

    #[test]
    fn fresh_tree_matches_zookeeper() {
        let t = DataTree::default();
        let root = t.get("/").unwrap().stat();
        assert_eq!(root.cversion, -1);
        assert_eq!(root.num_children, 1);
        assert_eq!(t.get("").unwrap().stat(), root);
        assert_eq!(t.get(ZOOKEEPER).unwrap().stat().cversion, -2);
        assert_eq!(t.get(CONFIG).unwrap().stat().aversion, -1);
        assert_eq!(t.node_count(), 5);
    }

    #[test]
    fn sequence_counts_creates_and_never_reuses() {
        let mut t = DataTree::default();
        create(&mut t, 1, "/p", 0).unwrap();
        assert_eq!(create(&mut t, 2, "/p/a", 2).unwrap().0, "/p/a0000000000");
        assert_eq!(create(&mut t, 3, "/p/b", 0).unwrap().0, "/p/b");
        t.delete(&ctx(4), "/p/b", -1, &mut Vec::new(), None)
            .unwrap();
        assert_eq!(create(&mut t, 5, "/p/a", 2).unwrap().0, "/p/a0000000002");
        assert_eq!(create(&mut t, 6, "/p/", 2).unwrap().0, "/p/0000000003");
        let p = t.get("/p").unwrap().stat();
        // 4 creates, 1 delete, 3 children: visible cversion = 2*4 - 3 = 5.
        assert_eq!(p.cversion, 5);
        assert_eq!(p.num_children, 3);
        assert_eq!(p.pzxid, 6);
    }

    #[test]
    fn create_checks_in_zookeeper_order() {
        let mut t = DataTree::default();
        assert_eq!(create(&mut t, 1, "a/b", 0), Err(ErrorCode::NoNode));
        assert_eq!(create(&mut t, 1, "", 0), Err(ErrorCode::BadArguments));
        assert_eq!(create(&mut t, 1, "/a/", 0), Err(ErrorCode::NoNode));
        assert_eq!(create(&mut t, 1, "//a", 0), Err(ErrorCode::BadArguments));
        assert_eq!(create(&mut t, 1, "/", 0), Err(ErrorCode::NodeExists));
        assert_eq!(create(&mut t, 1, "/x", 9), Err(ErrorCode::BadArguments));
        assert_eq!(create(&mut t, 1, "/x", 5), Err(ErrorCode::Unimplemented));
        create(&mut t, 1, "/e", 1).unwrap();
        let (root, count) = (t.get("/").unwrap().stat(), t.node_count());
        assert_eq!(create(&mut t, 2, "/e", 0), Err(ErrorCode::NodeExists));
        assert_eq!(
            t.get("/").unwrap().stat(),
            root,
            "a create refused as NODEEXISTS leaves the parent's cversion and pzxid"
        );
        assert_eq!(t.node_count(), count, "and adds no node");
        assert_eq!(
            create(&mut t, 2, "/e/c", 0),
            Err(ErrorCode::NoChildrenForEphemerals)
        );
    }

    #[test]
    fn stat_of_new_node_and_parent() {
        let mut t = DataTree::default();
        let (_, s) = create(&mut t, 7, "/n", 1).unwrap();
        assert_eq!((s.czxid, s.mzxid, s.pzxid), (7, 7, 7));
        assert_eq!(s.ctime, s.mtime);
        assert_eq!(s.ephemeral_owner, 0x42);
        assert_eq!(s.data_length, 1);
        let root = t.get("/").unwrap().stat();
        assert_eq!(root.pzxid, 7);
        assert_eq!(root.cversion, 0);
    }

    #[test]
    fn versions_and_errors() {
        let mut t = DataTree::default();
        create(&mut t, 1, "/n", 0).unwrap();
        create(&mut t, 2, "/n/c", 0).unwrap();
        let mut tr = Vec::new();
        assert_eq!(
            t.set_data(&ctx(3), "/n", None, 5, &mut tr, None),
            Err(ErrorCode::BadVersion)
        );
        let s = t.set_data(&ctx(3), "/n", None, 0, &mut tr, None).unwrap();
        assert_eq!((s.version, s.mzxid, s.data_length), (1, 3, 0));
        assert_eq!(
            t.delete(&ctx(4), "/n", -1, &mut tr, None),
            Err(ErrorCode::NotEmpty)
        );
        assert_eq!(
            t.delete(&ctx(4), "/n/c", 3, &mut tr, None),
            Err(ErrorCode::BadVersion)
        );
        assert_eq!(
            t.delete(&ctx(4), "/zookeeper", -1, &mut tr, None),
            Err(ErrorCode::BadArguments)
        );
        assert_eq!(
            t.delete(&ctx(4), "/nope", -1, &mut tr, None),
            Err(ErrorCode::NoNode)
        );
        assert_eq!(
            t.set_data(&ctx(4), "/n/", None, -1, &mut tr, None),
            Err(ErrorCode::BadArguments)
        );
    }

    #[test]
    fn rollback_restores_everything() {
        let mut t = DataTree::default();
        create(&mut t, 1, "/a", 0).unwrap();
        let before = format!("{:?}", t.sorted_paths());
        let before_stat = t.get("/a").unwrap().stat();
        let before_size = t.approximate_data_size();
        let mut undo = Vec::new();
        let mut tr = Vec::new();
        let acl = open();
        let op = CreateOp {
            path: "/a/s",
            data: None,
            acl: &acl,
            flags: 2,
            record: CreateRecord::Plain,
        };
        t.create(&ctx(2), &op, &mut tr, Some(&mut undo)).unwrap();
        t.set_data(
            &ctx(2),
            "/a",
            Some(Bytes::from_static(b"zz")),
            -1,
            &mut tr,
            Some(&mut undo),
        )
        .unwrap();
        t.delete(&ctx(2), "/a/s0000000000", -1, &mut tr, Some(&mut undo))
            .unwrap();
        t.set_acl(&ctx(2), "/a", &[Acl::read_unsafe()], -1, Some(&mut undo))
            .unwrap();
        // The new ACL is enforced at once, within the same multi.
        assert_eq!(
            t.set_data(&ctx(2), "/a", None, -1, &mut tr, None),
            Err(ErrorCode::NoAuth)
        );
        t.rollback(undo);
        assert_eq!(format!("{:?}", t.sorted_paths()), before);
        assert_eq!(t.get("/a").unwrap().stat(), before_stat);
        assert_eq!(t.approximate_data_size(), before_size);
        assert_eq!(t.get("/a").unwrap().acl(), &open()[..]);
        // The sequence counter was rolled back too.
        assert_eq!(create(&mut t, 3, "/a/s", 2).unwrap().0, "/a/s0000000000");
    }

    #[test]
    fn kill_session_removes_only_its_ephemerals() {
        let mut t = DataTree::default();
        create(&mut t, 1, "/e1", 1).unwrap();
        create(&mut t, 2, "/e2", 1).unwrap();
        create(&mut t, 3, "/p", 0).unwrap();
        let mut tr = Vec::new();
        t.kill_session(4, 0x42, &mut tr);
        assert!(t.get("/e1").is_none() && t.get("/e2").is_none() && t.get("/p").is_some());
        assert_eq!(t.ephemeral_count(), 0);
        assert_eq!(
            tr.iter()
                .filter(|x| matches!(x, Trigger::Deleted(_)))
                .count(),
            2
        );
    }

    #[test]
    fn containers_and_ttls_become_candidates() {
        let mut t = DataTree::new(TreeOptions {
            extended_types: true,
        });
        create(&mut t, 1, "/c", 4).unwrap();
        assert!(
            t.cleanup_candidates(i64::MAX).is_empty(),
            "a container that never had children stays"
        );
        create(&mut t, 2, "/c/x", 0).unwrap();
        t.delete(&ctx(3), "/c/x", -1, &mut Vec::new(), None)
            .unwrap();
        assert_eq!(t.cleanup_candidates(0), vec!["/c".to_string()]);
        let acl = open();
        let op = CreateOp {
            path: "/t",
            data: None,
            acl: &acl,
            flags: 5,
            record: CreateRecord::Ttl(100),
        };
        t.create(&ctx(4), &op, &mut Vec::new(), None).unwrap();
        let mtime = t.get("/t").unwrap().mtime();
        assert!(!t.cleanup_candidates(mtime + 50).contains(&"/t".to_string()));
        assert!(t
            .cleanup_candidates(mtime + 101)
            .contains(&"/t".to_string()));
        assert_eq!(t.get("/t").unwrap().stat().ephemeral_owner, 0);
        let mut tr = Vec::new();
        assert_eq!(
            t.delete_container_or_ttl(5, mtime + 50, "/t", &mut tr),
            Err(ErrorCode::BadVersion)
        );
        t.delete_container_or_ttl(5, mtime + 101, "/t", &mut tr)
            .unwrap();
        t.delete_container_or_ttl(6, 0, "/c", &mut tr).unwrap();
        assert!(t.get("/c").is_none() && t.get("/t").is_none());
    }

    #[test]
    fn all_children_number_counts_descendants() {
        let mut t = DataTree::default();
        create(&mut t, 1, "/a", 0).unwrap();
        create(&mut t, 2, "/a/b", 0).unwrap();
        create(&mut t, 3, "/a/b/c", 0).unwrap();
        assert_eq!(t.all_children_number("/a"), 2);
        assert_eq!(t.all_children_number("/"), 6);
    }
}
