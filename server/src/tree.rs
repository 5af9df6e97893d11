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

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use bytes::Bytes;
use jute::{perms, Acl, CreateMode, ErrorCode, Id, Stat};

use crate::acl;
use crate::path;

type FastMap<K, V> = HashMap<K, V, ahash::RandomState>;
type FastSet<K> = HashSet<K, ahash::RandomState>;

/// `/zookeeper` and its system children (ZooKeeper's `isSpecialPath`).
pub const ZOOKEEPER: &str = "/zookeeper";
pub const QUOTA: &str = "/zookeeper/quota";
pub const CONFIG: &str = "/zookeeper/config";

/// The largest TTL ZooKeeper accepts (`EphemeralType.TTL` keeps 40 bits of milliseconds).
pub const MAX_TTL_MS: i64 = 0x00FF_FFFF_FFFF;

/// What kind of znode this is; ZooKeeper folds this into `ephemeralOwner`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeKind {
    Persistent,
    Ephemeral(i64),
    Container,
    Ttl(i64),
}

impl NodeKind {
    /// The `ephemeralOwner` clients see: the session for ephemerals, 0 otherwise
    /// (containers and TTL nodes report 0, as `DataNode.getClientEphemeralOwner` does).
    pub fn client_owner(self) -> i64 {
        match self {
            NodeKind::Ephemeral(s) => s,
            _ => 0,
        }
    }
}

/// One znode.
#[derive(Debug, Clone)]
pub struct Znode {
    pub data: Option<Bytes>,
    pub acl: Arc<[Acl]>,
    pub czxid: i64,
    pub mzxid: i64,
    pub ctime: i64,
    pub mtime: i64,
    pub version: i32,
    /// The internal child-create counter (ZooKeeper's persisted cversion): it names the next
    /// sequential child and only ever grows.
    pub cversion: i32,
    pub aversion: i32,
    pub kind: NodeKind,
    pub pzxid: i64,
    pub children: FastSet<Box<str>>,
}

impl Znode {
    fn new(data: Option<Bytes>, acl: Arc<[Acl]>, zxid: i64, time: i64, kind: NodeKind) -> Znode {
        Znode {
            data,
            acl,
            czxid: zxid,
            mzxid: zxid,
            ctime: time,
            mtime: time,
            version: 0,
            cversion: 0,
            aversion: 0,
            kind,
            pzxid: zxid,
            children: FastSet::default(),
        }
    }

    /// The `Stat` clients see. The visible cversion counts creates *and* deletes of children:
    /// `2 × creates − current children` (`DataNode.copyStat`).
    pub fn stat(&self) -> Stat {
        let num_children = self.children.len() as i32;
        Stat {
            czxid: self.czxid,
            mzxid: self.mzxid,
            ctime: self.ctime,
            mtime: self.mtime,
            version: self.version,
            cversion: self.cversion.wrapping_mul(2).wrapping_sub(num_children),
            aversion: self.aversion,
            ephemeral_owner: self.kind.client_owner(),
            data_length: self.data.as_ref().map_or(0, |d| d.len() as i32),
            num_children,
            pzxid: self.pzxid,
        }
    }

    fn data_len(&self) -> u64 {
        self.data.as_ref().map_or(0, |d| d.len() as u64)
    }
}

/// What a write did that watches care about, in the order it happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Trigger {
    Created(String),
    Deleted(String),
    DataChanged(String),
    /// On the parent (given in client form: `/` for top-level nodes).
    ChildrenChanged(String),
}

/// One step to reverse when a multi fails.
#[derive(Debug)]
pub enum Undo {
    Created {
        path: String,
        parent: String,
        parent_cversion: i32,
        parent_pzxid: i64,
    },
    Deleted {
        path: String,
        node: Box<Znode>,
        parent: String,
        parent_pzxid: i64,
    },
    DataSet {
        path: String,
        data: Option<Bytes>,
        mzxid: i64,
        mtime: i64,
        version: i32,
    },
    AclSet {
        path: String,
        acl: Arc<[Acl]>,
        aversion: i32,
    },
}

/// The per-transaction facts every write needs, all taken from the replicated entry.
#[derive(Debug, Clone, Copy)]
pub struct TxnContext<'a> {
    pub zxid: i64,
    pub time: i64,
    pub session: i64,
    pub auth: &'a [Id],
}

/// A create as the tree sees it: op 1/15/19/21 all come down to this.
#[derive(Debug, Clone)]
pub struct CreateOp<'a> {
    pub path: &'a str,
    pub data: Option<Bytes>,
    pub acl: &'a [Acl],
    pub flags: i32,
    /// Which create record this came from. The validation mode always comes from `flags`,
    /// but the kind of node comes from the record, as in ZooKeeper: createContainer (19)
    /// always makes a container, createTTL (21) a TTL node, and create/create2 an
    /// ephemeral or persistent node (a container flag on op 1 gives a plain persistent node).
    pub record: CreateRecord,
}

/// The create record a request carried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CreateRecord {
    Plain,
    Container,
    Ttl(i64),
}

/// Tree-wide settings that change what writes accept.
#[derive(Debug, Clone, Copy, Default)]
pub struct TreeOptions {
    /// `extendedTypesEnabled`: TTL nodes allowed.
    pub extended_types: bool,
}

/// The tree and its indexes (ephemerals by session, containers, TTL nodes).
#[derive(Debug, Clone)]
pub struct DataTree {
    nodes: FastMap<String, Znode>,
    ephemerals: HashMap<i64, BTreeSet<String>>,
    containers: BTreeSet<String>,
    ttls: BTreeSet<String>,
    acl_cache: HashMap<Vec<Acl>, Arc<[Acl]>>,
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
        let empty = || Some(Bytes::new());
        let system = |acl: Arc<[Acl]>| Znode::new(empty(), acl, 0, 0, NodeKind::Persistent);
        let mut root = system(open.clone());
        root.children.insert("zookeeper".into());
        let mut zk = system(open.clone());
        zk.children.insert("quota".into());
        zk.children.insert("config".into());
        let mut config = system(read);
        config.aversion = -1;
        tree.insert_raw("/".into(), root);
        tree.insert_raw(ZOOKEEPER.into(), zk);
        tree.insert_raw(QUOTA.into(), system(open));
        tree.insert_raw(CONFIG.into(), config);
        tree
    }

    fn insert_raw(&mut self, path: String, node: Znode) {
        self.data_size += path.len() as u64 + node.data_len();
        self.index_kind(&path, node.kind);
        self.nodes.insert(path, node);
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

    /// Shares identical ACL lists between nodes (most nodes have the same one).
    pub fn intern_acl(&mut self, acl: Vec<Acl>) -> Arc<[Acl]> {
        if let Some(a) = self.acl_cache.get(&acl) {
            return a.clone();
        }
        let shared: Arc<[Acl]> = acl.clone().into();
        self.acl_cache.insert(acl, shared.clone());
        shared
    }

    /// Looks a node up. `""` is the root, as in ZooKeeper.
    pub fn get(&self, path: &str) -> Option<&Znode> {
        if path.is_empty() {
            return self.nodes.get("/");
        }
        self.nodes.get(path)
    }

    fn get_mut(&mut self, path: &str) -> Option<&mut Znode> {
        if path.is_empty() {
            return self.nodes.get_mut("/");
        }
        self.nodes.get_mut(path)
    }

    /// Node count as ZooKeeper reports it (`Node count`, `zk_znode_count`): its map holds the
    /// root twice (under `""` and `/`).
    pub fn node_count(&self) -> usize {
        self.nodes.len() + 1
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

    pub fn containers(&self) -> &BTreeSet<String> {
        &self.containers
    }

    pub fn ttls(&self) -> &BTreeSet<String> {
        &self.ttls
    }

    /// `getAllChildrenNumber`: every descendant (ZooKeeper counts all nodes for `/`, which
    /// includes the `/zookeeper` subtree).
    pub fn all_children_number(&self, path: &str) -> usize {
        if path == "/" {
            return self.nodes.len() - 1;
        }
        let mut count = 0;
        let mut stack: Vec<String> = vec![path.to_string()];
        while let Some(p) = stack.pop() {
            if let Some(n) = self.nodes.get(&p) {
                for c in &n.children {
                    count += 1;
                    stack.push(path::join(&p, c));
                }
            }
        }
        count
    }

    /// Every path in the tree, sorted (snapshots, digests, dumps).
    pub fn sorted_paths(&self) -> Vec<&String> {
        let mut paths: Vec<&String> = self.nodes.keys().collect();
        paths.sort();
        paths
    }

    /// Iterates over all nodes (unordered).
    pub fn iter(&self) -> impl Iterator<Item = (&String, &Znode)> {
        self.nodes.iter()
    }

    // ---------------------------------------------------------------- writes

    /// create / create2 / createContainer / createTTL, with ZooKeeper's order of checks:
    /// flags → TTL → parent path form → ACL fixup → parent exists → CREATE permission →
    /// sequential suffix → full path validation → NODEEXISTS → ephemeral parent.
    /// Returns the created path and its Stat.
    pub fn create(
        &mut self,
        ctx: &TxnContext,
        op: &CreateOp,
        triggers: &mut Vec<Trigger>,
        undo: Option<&mut Vec<Undo>>,
    ) -> Result<(String, Stat), ErrorCode> {
        let mode = CreateMode::from_flags(op.flags).ok_or(ErrorCode::BadArguments)?;
        if mode.is_ttl() && !self.options.extended_types {
            return Err(ErrorCode::Unimplemented);
        }
        let ttl = match op.record {
            CreateRecord::Ttl(ttl) => ttl,
            _ => -1,
        };
        if mode.is_ttl() {
            if ttl <= 0 || ttl > MAX_TTL_MS {
                return Err(ErrorCode::BadArguments);
            }
        } else if ttl >= 0 {
            return Err(ErrorCode::BadArguments);
        }
        let parent_path = path::parent_for_create(op.path).ok_or(ErrorCode::BadArguments)?;
        let acl = acl::fixup(ctx.auth, op.acl)?;
        let parent = self.get(parent_path).ok_or(ErrorCode::NoNode)?;
        acl::check(&parent.acl, perms::CREATE, ctx.auth)?;
        let parent_cversion = parent.cversion;
        let parent_kind = parent.kind;
        let full_path = if mode.is_sequential() {
            format!("{}{:010}", op.path, parent_cversion)
        } else {
            op.path.to_string()
        };
        path::validate(&full_path).map_err(|_| ErrorCode::BadArguments)?;
        if self.get(&full_path).is_some() {
            return Err(ErrorCode::NodeExists);
        }
        if matches!(parent_kind, NodeKind::Ephemeral(_)) {
            return Err(ErrorCode::NoChildrenForEphemerals);
        }
        let kind = match op.record {
            CreateRecord::Container => NodeKind::Container,
            CreateRecord::Ttl(ttl) => NodeKind::Ttl(ttl),
            CreateRecord::Plain if mode.is_ephemeral() => NodeKind::Ephemeral(ctx.session),
            CreateRecord::Plain => NodeKind::Persistent,
        };

        // Apply: DataTree.createNode.
        let parent_key = if parent_path.is_empty() {
            "/"
        } else {
            parent_path
        }
        .to_string();
        let acl = self.intern_acl(acl);
        let node = Znode::new(op.data.clone(), acl, ctx.zxid, ctx.time, kind);
        let stat = node.stat();
        let child = path::child_name(&full_path).to_string();
        let parent = self.get_mut(&parent_key).ok_or(ErrorCode::NoNode)?;
        let (old_cversion, old_pzxid) = (parent.cversion, parent.pzxid);
        let new_cversion = parent_cversion.wrapping_add(1);
        if new_cversion > parent.cversion {
            parent.cversion = new_cversion;
            parent.pzxid = ctx.zxid;
        }
        parent.children.insert(child.into_boxed_str());
        self.insert_raw(full_path.clone(), node);
        if let Some(undo) = undo {
            undo.push(Undo::Created {
                path: full_path.clone(),
                parent: parent_key.clone(),
                parent_cversion: old_cversion,
                parent_pzxid: old_pzxid,
            });
        }
        triggers.push(Trigger::Created(full_path.clone()));
        triggers.push(Trigger::ChildrenChanged(parent_key));
        Ok((full_path, stat))
    }

    /// delete, with ZooKeeper's order: path form and special paths (BADARGUMENTS) → parent
    /// exists → DELETE permission on the parent → node exists → version → NOTEMPTY.
    pub fn delete(
        &mut self,
        ctx: &TxnContext,
        path_in: &str,
        version: i32,
        triggers: &mut Vec<Trigger>,
        undo: Option<&mut Vec<Undo>>,
    ) -> Result<(), ErrorCode> {
        let parent_path = path::parent_for_create(path_in).ok_or(ErrorCode::BadArguments)?;
        if is_special_path(path_in) {
            return Err(ErrorCode::BadArguments);
        }
        let parent = self.get(parent_path).ok_or(ErrorCode::NoNode)?;
        acl::check(&parent.acl, perms::DELETE, ctx.auth)?;
        let node = self.get(path_in).ok_or(ErrorCode::NoNode)?;
        if version != -1 && version != node.version {
            return Err(ErrorCode::BadVersion);
        }
        if !node.children.is_empty() {
            return Err(ErrorCode::NotEmpty);
        }
        self.remove_node(ctx.zxid, path_in, triggers, undo);
        Ok(())
    }

    /// Removes a childless node and updates its parent (DataTree.deleteNode).
    fn remove_node(
        &mut self,
        zxid: i64,
        path_in: &str,
        triggers: &mut Vec<Trigger>,
        undo: Option<&mut Vec<Undo>>,
    ) {
        let parent_key = path::parent_of(path_in).to_string();
        let Some(node) = self.nodes.remove(path_in) else {
            return;
        };
        self.data_size = self
            .data_size
            .saturating_sub(path_in.len() as u64 + node.data_len());
        self.unindex_kind(path_in, node.kind);
        let mut old_pzxid = 0;
        if let Some(parent) = self.nodes.get_mut(&parent_key) {
            parent.children.remove(path::child_name(path_in));
            old_pzxid = parent.pzxid;
            if zxid > parent.pzxid {
                parent.pzxid = zxid;
            }
        }
        if let Some(undo) = undo {
            undo.push(Undo::Deleted {
                path: path_in.to_string(),
                node: Box::new(node),
                parent: parent_key.clone(),
                parent_pzxid: old_pzxid,
            });
        }
        triggers.push(Trigger::Deleted(path_in.to_string()));
        triggers.push(Trigger::ChildrenChanged(parent_key));
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
        path::validate(path_in).map_err(|_| ErrorCode::BadArguments)?;
        let node = self.get(path_in).ok_or(ErrorCode::NoNode)?;
        acl::check(&node.acl, perms::WRITE, ctx.auth)?;
        if version != -1 && version != node.version {
            return Err(ErrorCode::BadVersion);
        }
        let new_len = data.as_ref().map_or(0, |d| d.len() as u64);
        let node = self.get_mut(path_in).ok_or(ErrorCode::NoNode)?;
        let old_len = node.data_len();
        let old_data = std::mem::replace(&mut node.data, data);
        if let Some(undo) = undo {
            undo.push(Undo::DataSet {
                path: path_in.to_string(),
                data: old_data,
                mzxid: node.mzxid,
                mtime: node.mtime,
                version: node.version,
            });
        }
        node.version = node.version.wrapping_add(1);
        node.mzxid = ctx.zxid;
        node.mtime = ctx.time;
        let stat = node.stat();
        self.data_size = (self.data_size + new_len).saturating_sub(old_len);
        triggers.push(Trigger::DataChanged(path_in.to_string()));
        Ok(stat)
    }

    /// setACL: path validation → ACL fixup → node exists → ADMIN permission → aversion.
    /// (No watch fires and mzxid does not change, as in ZooKeeper.)
    pub fn set_acl(
        &mut self,
        ctx: &TxnContext,
        path_in: &str,
        new_acl: &[Acl],
        version: i32,
        undo: Option<&mut Vec<Undo>>,
    ) -> Result<Stat, ErrorCode> {
        path::validate(path_in).map_err(|_| ErrorCode::BadArguments)?;
        let fixed = acl::fixup(ctx.auth, new_acl)?;
        let node = self.get(path_in).ok_or(ErrorCode::NoNode)?;
        acl::check(&node.acl, perms::ADMIN, ctx.auth)?;
        if version != -1 && version != node.aversion {
            return Err(ErrorCode::BadVersion);
        }
        let acl = self.intern_acl(fixed);
        let node = self.get_mut(path_in).ok_or(ErrorCode::NoNode)?;
        let old = std::mem::replace(&mut node.acl, acl);
        if let Some(undo) = undo {
            undo.push(Undo::AclSet {
                path: path_in.to_string(),
                acl: old,
                aversion: node.aversion,
            });
        }
        node.aversion = node.aversion.wrapping_add(1);
        Ok(node.stat())
    }

    /// check (op 13, and inside multi): path validation → node exists → READ permission →
    /// version.
    pub fn check(&self, ctx: &TxnContext, path_in: &str, version: i32) -> Result<(), ErrorCode> {
        path::validate(path_in).map_err(|_| ErrorCode::BadArguments)?;
        let node = self.get(path_in).ok_or(ErrorCode::NoNode)?;
        acl::check(&node.acl, perms::READ, ctx.auth)?;
        if version != -1 && version != node.version {
            return Err(ErrorCode::BadVersion);
        }
        Ok(())
    }

    /// Deletes every ephemeral of a session (close or expiry), in path order.
    pub fn kill_session(&mut self, zxid: i64, session: i64, triggers: &mut Vec<Trigger>) {
        let paths: Vec<String> = self
            .ephemerals
            .remove(&session)
            .map(|s| s.into_iter().collect())
            .unwrap_or_default();
        for p in paths {
            // An ephemeral cannot have children, so removing it never orphans anything.
            self.remove_node(zxid, &p, triggers, None);
        }
    }

    /// The server's own removal of an empty container or an expired TTL node (ZooKeeper's
    /// deleteContainer, op 20): re-checked at apply, so a node that gained a child or was
    /// touched since the leader chose it stays.
    pub fn delete_container_or_ttl(
        &mut self,
        zxid: i64,
        time: i64,
        path_in: &str,
        triggers: &mut Vec<Trigger>,
    ) -> Result<(), ErrorCode> {
        let node = self.get(path_in).ok_or(ErrorCode::NoNode)?;
        if !node.children.is_empty() {
            return Err(ErrorCode::NotEmpty);
        }
        match node.kind {
            NodeKind::Container => {}
            NodeKind::Ttl(ttl) if time - node.mtime > ttl => {}
            _ => return Err(ErrorCode::BadVersion),
        }
        self.remove_node(zxid, path_in, triggers, None);
        Ok(())
    }

    /// A deleteContainer (op 20) sent by a client, with ZooKeeper's checks in its order:
    /// path form (BADARGUMENTS) → node exists → childless (NOTEMPTY) → not an ephemeral
    /// (BADVERSION) → parent exists. No ACL is checked, as in ZooKeeper.
    pub fn delete_container_request(
        &mut self,
        zxid: i64,
        path_in: &str,
        triggers: &mut Vec<Trigger>,
    ) -> Result<(), ErrorCode> {
        let parent = path::parent_for_create(path_in).ok_or(ErrorCode::BadArguments)?;
        if is_special_path(path_in) {
            return Err(ErrorCode::BadArguments);
        }
        let node = self.get(path_in).ok_or(ErrorCode::NoNode)?;
        if !node.children.is_empty() {
            return Err(ErrorCode::NotEmpty);
        }
        if matches!(node.kind, NodeKind::Ephemeral(_)) {
            return Err(ErrorCode::BadVersion);
        }
        self.get(parent).ok_or(ErrorCode::NoNode)?;
        self.remove_node(zxid, path_in, triggers, None);
        Ok(())
    }

    /// Containers whose children have all gone (and that ever had one), and TTL nodes with
    /// no children left untouched for longer than their TTL, as of wall-clock `now`.
    pub fn cleanup_candidates(&self, now: i64) -> Vec<String> {
        let mut out = Vec::new();
        for p in &self.containers {
            if let Some(n) = self.nodes.get(p) {
                if n.cversion > 0 && n.children.is_empty() {
                    out.push(p.clone());
                }
            }
        }
        for p in &self.ttls {
            if let Some(n) = self.nodes.get(p) {
                if let NodeKind::Ttl(ttl) = n.kind {
                    if n.children.is_empty() && ttl != 0 && now - n.mtime > ttl {
                        out.push(p.clone());
                    }
                }
            }
        }
        out
    }

    /// Reverses a failed multi's steps, newest first.
    pub fn rollback(&mut self, undo: Vec<Undo>) {
        for step in undo.into_iter().rev() {
            match step {
                Undo::Created {
                    path,
                    parent,
                    parent_cversion,
                    parent_pzxid,
                } => {
                    if let Some(node) = self.nodes.remove(&path) {
                        self.data_size = self
                            .data_size
                            .saturating_sub(path.len() as u64 + node.data_len());
                        self.unindex_kind(&path, node.kind);
                    }
                    if let Some(p) = self.nodes.get_mut(&parent) {
                        p.children.remove(path::child_name(&path));
                        p.cversion = parent_cversion;
                        p.pzxid = parent_pzxid;
                    }
                }
                Undo::Deleted {
                    path,
                    node,
                    parent,
                    parent_pzxid,
                } => {
                    if let Some(p) = self.nodes.get_mut(&parent) {
                        p.children.insert(path::child_name(&path).into());
                        p.pzxid = parent_pzxid;
                    }
                    self.insert_raw(path, *node);
                }
                Undo::DataSet {
                    path,
                    data,
                    mzxid,
                    mtime,
                    version,
                } => {
                    if let Some(n) = self.nodes.get_mut(&path) {
                        let new_len = n.data_len();
                        n.data = data;
                        n.mzxid = mzxid;
                        n.mtime = mtime;
                        n.version = version;
                        let old_len = n.data_len();
                        self.data_size = (self.data_size + old_len).saturating_sub(new_len);
                    }
                }
                Undo::AclSet {
                    path,
                    acl,
                    aversion,
                } => {
                    if let Some(n) = self.nodes.get_mut(&path) {
                        n.acl = acl;
                        n.aversion = aversion;
                    }
                }
            }
        }
    }

    // ---------------------------------------------------------------- snapshots

    /// Inserts a node while loading a snapshot (parents before children is not required:
    /// children sets are stored with each node).
    pub fn load_node(&mut self, path: String, node: Znode) {
        if let Some(old) = self.nodes.remove(&path) {
            self.data_size = self
                .data_size
                .saturating_sub(path.len() as u64 + old.data_len());
            self.unindex_kind(&path, old.kind);
        }
        self.insert_raw(path, node);
    }

    /// An empty tree with nothing in it, for loading a snapshot into.
    pub fn empty(options: TreeOptions) -> DataTree {
        DataTree {
            nodes: FastMap::default(),
            ephemerals: HashMap::new(),
            containers: BTreeSet::new(),
            ttls: BTreeSet::new(),
            acl_cache: HashMap::new(),
            data_size: 0,
            options,
        }
    }

    /// A new, empty children set (for snapshot loading).
    pub fn new_children() -> FastSet<Box<str>> {
        FastSet::default()
    }

    /// Adds a loaded node to its parent's children; false if the parent is missing.
    pub fn link_child(&mut self, path_in: &str) -> bool {
        let parent = path::parent_of(path_in);
        let name = path::child_name(path_in);
        match self.nodes.get_mut(parent) {
            Some(p) => {
                p.children.insert(name.into());
                true
            }
            None => false,
        }
    }
}

/// `/`, `/zookeeper`, `/zookeeper/quota`, `/zookeeper/config` cannot be deleted.
pub fn is_special_path(path: &str) -> bool {
    matches!(path, "/" | ZOOKEEPER | QUOTA | CONFIG)
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!(create(&mut t, 2, "/e", 0), Err(ErrorCode::NodeExists));
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
        assert_eq!(&*t.get("/a").unwrap().acl, &open()[..]);
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
        let mtime = t.get("/t").unwrap().mtime;
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
