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

use std::collections::BTreeSet;

use bytes::Bytes;
use jute::{Acl, ErrorCode, Stat};

mod arena;
mod blob;
mod index;
mod kind;
mod load;
#[cfg(test)]
pub mod memory;
mod node;
mod nodes;
mod replay;
mod slot;
mod write;

use arena::ROOT;
pub use load::{LoadError, NodeRecord, TreeCapture, TreeLoader};
pub use node::{
    CreateOp, CreateRecord, Node, NodeKind, Trigger, TxnContext, Undo, CONFIG, QUOTA, ZOOKEEPER,
};
use nodes::Nodes;
pub use replay::DecidedCreate;
use slot::{new_slot, NONE};

/// Tree-wide settings that change what writes accept.
#[derive(Debug, Clone, Copy, Default)]
pub struct TreeOptions {
    /// `extendedTypesEnabled`: TTL nodes allowed.
    pub extended_types: bool,
}

/// The tree and its indexes (ephemerals by session, containers, TTL nodes): the znodes
/// (`nodes.rs`) and the settings that change what writes accept. Its writes are in
/// `write.rs`, their replay in `replay.rs`; here they are called.
#[derive(Debug, Clone)]
pub struct DataTree {
    nodes: Nodes,
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
        let mut tree = Nodes::empty();
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
        DataTree {
            nodes: tree,
            options,
        }
    }

    /// An empty tree with nothing in it, for loading a snapshot into.
    pub fn empty(options: TreeOptions) -> DataTree {
        DataTree {
            nodes: Nodes::empty(),
            options,
        }
    }

    /// Shares identical ACL lists between nodes (most nodes have the same one): the index
    /// of the list in the tree's table.
    pub fn intern_acl(&mut self, acl: Vec<Acl>) -> u32 {
        self.nodes.intern_acl(acl)
    }

    /// Looks a node up. `""` is the root, as in ZooKeeper.
    pub fn get(&self, path: &str) -> Option<Node<'_>> {
        self.nodes.get(path)
    }

    /// A consistent view of the tree for a snapshot, taken in one pointer copy per chunk.
    pub fn capture(&self) -> TreeCapture {
        self.nodes.capture()
    }

    /// Node count as ZooKeeper reports it (`Node count`, `zk_znode_count`): its map holds the
    /// root twice (under `""` and `/`).
    pub fn node_count(&self) -> usize {
        self.nodes.node_count()
    }

    pub fn approximate_data_size(&self) -> u64 {
        self.nodes.approximate_data_size()
    }

    /// All ephemeral paths of a session, in path order.
    pub fn ephemerals_of(&self, session: i64) -> impl Iterator<Item = &String> {
        self.nodes.ephemerals_of(session)
    }

    /// Number of ephemeral nodes.
    pub fn ephemeral_count(&self) -> usize {
        self.nodes.ephemeral_count()
    }

    /// Sessions that own at least one ephemeral, with their counts.
    pub fn ephemerals_by_session(&self) -> impl Iterator<Item = (i64, &BTreeSet<String>)> {
        self.nodes.ephemerals_by_session()
    }

    /// `getAllChildrenNumber`: every descendant (ZooKeeper counts all nodes for `/`, which
    /// includes the `/zookeeper` subtree).
    pub fn all_children_number(&self, path: &str) -> usize {
        self.nodes.all_children_number(path)
    }

    /// Every path in the tree, sorted (digests, dumps, tests).
    pub fn sorted_paths(&self) -> Vec<String> {
        self.nodes.sorted_paths()
    }

    /// Paths of the containers (for tests of snapshot loading).
    #[cfg(test)]
    pub fn containers(&self) -> &BTreeSet<String> {
        self.nodes.containers()
    }

    /// Paths of the TTL nodes (the leader's cleanup ages them, `raft/ttl_clock.rs`).
    pub fn ttls(&self) -> &BTreeSet<String> {
        self.nodes.ttls()
    }

    /// create / create2 / createContainer / createTTL, with ZooKeeper's order of checks:
    pub fn create(
        &mut self,
        ctx: &TxnContext,
        op: &CreateOp,
        triggers: &mut Vec<Trigger>,
        undo: Option<&mut Vec<Undo>>,
    ) -> Result<(String, Stat), ErrorCode> {
        write::create(
            &mut self.nodes,
            self.options.extended_types,
            ctx,
            op,
            triggers,
            undo,
        )
    }

    /// delete, with ZooKeeper's order: path form and special paths (BADARGUMENTS) → parent
    pub fn delete(
        &mut self,
        ctx: &TxnContext,
        path_in: &str,
        version: i32,
        triggers: &mut Vec<Trigger>,
        undo: Option<&mut Vec<Undo>>,
    ) -> Result<(), ErrorCode> {
        write::delete(&mut self.nodes, ctx, path_in, version, triggers, undo)
    }

    /// setData: path validation → node exists → WRITE permission → version.
    pub fn set_data(
        &mut self,
        ctx: &TxnContext,
        path_in: &str,
        data: Option<Bytes>,
        version: i32,
        triggers: &mut Vec<Trigger>,
        undo: Option<&mut Vec<Undo>>,
    ) -> Result<Stat, ErrorCode> {
        write::set_data(&mut self.nodes, ctx, path_in, data, version, triggers, undo)
    }

    /// Replaces `/zookeeper/config`'s data as a reconfig does (no ACL check here: the
    pub fn replace_config(
        &mut self,
        zxid: i64,
        time: i64,
        data: Bytes,
        version: i32,
        triggers: &mut Vec<Trigger>,
    ) -> Option<Stat> {
        write::replace_config(&mut self.nodes, zxid, time, data, version, triggers)
    }

    /// setACL: path validation → ACL fixup → node exists → ADMIN permission → aversion.
    pub fn set_acl(
        &mut self,
        ctx: &TxnContext,
        path_in: &str,
        new_acl: &[Acl],
        version: i32,
        undo: Option<&mut Vec<Undo>>,
    ) -> Result<Stat, ErrorCode> {
        write::set_acl(&mut self.nodes, ctx, path_in, new_acl, version, undo)
    }

    /// check (op 13, and inside multi): path validation → node exists → READ permission →
    pub fn check(&self, ctx: &TxnContext, path_in: &str, version: i32) -> Result<(), ErrorCode> {
        write::check(&self.nodes, ctx, path_in, version)
    }

    /// Deletes every ephemeral of a session (close or expiry), in path order.
    pub fn kill_session(&mut self, zxid: i64, session: i64, triggers: &mut Vec<Trigger>) {
        write::kill_session(&mut self.nodes, zxid, session, triggers)
    }

    /// The server's own removal of an empty container or an expired TTL node (ZooKeeper's
    pub fn delete_container_or_ttl(
        &mut self,
        zxid: i64,
        time: i64,
        path_in: &str,
        triggers: &mut Vec<Trigger>,
    ) -> Result<(), ErrorCode> {
        write::delete_container_or_ttl(&mut self.nodes, zxid, time, path_in, triggers)
    }

    /// A deleteContainer (op 20) sent by a client, with ZooKeeper's checks in its order:
    pub fn delete_container_request(
        &mut self,
        zxid: i64,
        path_in: &str,
        triggers: &mut Vec<Trigger>,
    ) -> Result<(), ErrorCode> {
        write::delete_container_request(&mut self.nodes, zxid, path_in, triggers)
    }

    /// Containers whose children have all gone (and that ever had one), and TTL nodes with
    pub fn cleanup_candidates(&self, now: i64) -> Vec<String> {
        write::cleanup_candidates(&self.nodes, now)
    }

    /// Reverses a failed multi's steps, newest first.
    pub fn rollback(&mut self, undo: Vec<Undo>) {
        write::rollback(&mut self.nodes, undo)
    }

    /// `DataTree.createNode`: the node with czxid = mzxid = pzxid = `zxid`; the parent's
    pub fn replay_create(
        &mut self,
        c: &DecidedCreate,
        triggers: &mut Vec<Trigger>,
    ) -> Result<Stat, ErrorCode> {
        replay::replay_create(&mut self.nodes, c, triggers)
    }

    /// A create/create2 of a node that exists already (re-created after a fuzzy snapshot
    pub fn replay_parent_of_existing(&mut self, c: &DecidedCreate) {
        replay::replay_parent_of_existing(&mut self.nodes, c)
    }

    /// `DataTree.deleteNode`: the node goes, and its parent's pzxid rises to `zxid`.
    pub fn replay_delete(
        &mut self,
        zxid: i64,
        path_in: &str,
        triggers: &mut Vec<Trigger>,
    ) -> Result<(), ErrorCode> {
        replay::replay_delete(&mut self.nodes, zxid, path_in, triggers)
    }

    /// `DataTree.setData`: the data, mzxid, mtime, and the version the leader computed.
    pub fn replay_set_data(
        &mut self,
        zxid: i64,
        time: i64,
        path_in: &str,
        data: Option<Bytes>,
        version: i32,
        triggers: &mut Vec<Trigger>,
    ) -> Result<Stat, ErrorCode> {
        replay::replay_set_data(
            &mut self.nodes,
            zxid,
            time,
            path_in,
            data,
            version,
            triggers,
        )
    }

    /// `DataTree.setACL`: the list as the leader fixed it up, and its aversion.
    pub fn replay_set_acl(
        &mut self,
        path_in: &str,
        acl: &[Acl],
        aversion: i32,
    ) -> Result<Stat, ErrorCode> {
        replay::replay_set_acl(&mut self.nodes, path_in, acl, aversion)
    }

    /// `DataTree.killSession`: the ephemerals the transaction names (ZooKeeper 3.6+ lists
    pub fn replay_kill_session(
        &mut self,
        zxid: i64,
        session: i64,
        named: &[String],
        triggers: &mut Vec<Trigger>,
    ) {
        replay::replay_kill_session(&mut self.nodes, zxid, session, named, triggers)
    }
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
