//! ZooKeeper's data tree as its files describe it, and the replay of logged transactions
//! with exactly `DataTree.processTxn`'s rules, so that a fuzzy snapshot plus its log give
//! the tree ZooKeeper itself would have loaded:
//!
//! - a create takes the parent's cversion from the transaction and raises it only if
//!   larger (the snapshot may already hold the child); a create that meets an existing
//!   node still raises the parent's cversion and pzxid (`setCversionPzxid`);
//! - a delete raises the parent's pzxid even when the child is already gone;
//! - errors a replay meets (NONODE, NODEEXISTS) are ignored, as ZooKeeper's restore does;
//! - a failed multi changes nothing.
//!
//! Stats are kept as stored (`StatPersisted`): `cversion` counts child creates, and
//! `ephemeral_owner` holds the container and TTL markers. The tree digest
//! (`DigestCalculator`, version 2) is kept up to date as nodes change, so a replay can be
//! checked against the digests ZooKeeper wrote into the snapshot and after each
//! transaction.

use std::collections::{BTreeMap, HashMap, HashSet};

/// Maps keyed by paths: a million entries are common, so a fast hash.
pub type FastMap<K, V> = HashMap<K, V, ahash::RandomState>;
pub type FastSet<K> = HashSet<K, ahash::RandomState>;

use bytes::Bytes;
use jute::Acl;

use crate::checksum::Crc32;
use crate::txn::{op, Txn, TxnHeader};

/// `StatPersisted`, field for field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StatPersisted {
    pub czxid: i64,
    pub mzxid: i64,
    pub ctime: i64,
    pub mtime: i64,
    pub version: i32,
    /// Child creates (clients see `cversion * 2 - children`).
    pub cversion: i32,
    pub aversion: i32,
    /// A session id, [`CONTAINER_OWNER`], or [`TTL_MARK`] | ttl.
    pub ephemeral_owner: i64,
    pub pzxid: i64,
}

/// `ephemeralOwner` of a container node.
pub const CONTAINER_OWNER: i64 = i64::MIN;
/// The top byte of a TTL node's `ephemeralOwner`; the low 40 bits are the TTL.
pub const TTL_MARK: i64 = 0xFF00_0000_0000_0000u64 as i64;
/// The ACL-cache key ZooKeeper uses for OPEN_ACL_UNSAFE given as null (the root's).
pub const OPEN_UNSAFE_ACL_ID: i64 = -1;
/// The digest version this crate computes (`DigestCalculator.DIGEST_VERSION`).
pub const DIGEST_VERSION: i32 = 2;

/// What a stored `ephemeralOwner` means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OwnerKind {
    None,
    Session(i64),
    Container,
    Ttl(i64),
}

impl OwnerKind {
    pub fn of(owner: i64) -> OwnerKind {
        if owner == 0 {
            OwnerKind::None
        } else if owner == CONTAINER_OWNER {
            OwnerKind::Container
        } else if owner & TTL_MARK == TTL_MARK {
            OwnerKind::Ttl(owner & 0xFF_FFFF_FFFF)
        } else {
            OwnerKind::Session(owner)
        }
    }

    pub fn owner(self) -> i64 {
        match self {
            OwnerKind::None => 0,
            OwnerKind::Session(s) => s,
            OwnerKind::Container => CONTAINER_OWNER,
            OwnerKind::Ttl(t) => TTL_MARK | (t & 0xFF_FFFF_FFFF),
        }
    }
}

/// One znode.
#[derive(Debug, Clone, PartialEq)]
pub struct ZkNode {
    pub data: Option<Bytes>,
    /// Key into [`ZkTree::acls`].
    pub acl: i64,
    pub stat: StatPersisted,
    pub children: FastSet<String>,
}

/// A ZooKeeper error code met during replay (ignored, as ZooKeeper ignores it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplayError {
    NoNode,
    NodeExists,
}

/// The tree, its ACL cache and the session table.
#[derive(Debug, Clone, Default)]
pub struct ZkTree {
    /// Path → node; the root is `/`.
    pub nodes: FastMap<String, ZkNode>,
    /// The ACL cache: key → list.
    pub acls: HashMap<i64, Vec<Acl>>,
    acl_keys: HashMap<Vec<Acl>, i64>,
    /// Session id → timeout (ms).
    pub sessions: BTreeMap<i64, i32>,
    ephemerals: HashMap<i64, HashSet<String>>,
    pub last_zxid: i64,
    digest: u64,
}

/// A path's parent and last component (`/a` → `/`, `a`).
pub fn split(path: &str) -> (&str, &str) {
    match path.rfind('/') {
        Some(0) => ("/", &path[1..]),
        Some(i) => (&path[..i], &path[i + 1..]),
        None => ("/", path),
    }
}

/// A child create's effect on its parent: the transaction's cversion (-1: one more than
/// now), applied only if it is higher, as the snapshot may already hold the child.
fn raise_cversion(stat: &mut StatPersisted, cversion: i32, zxid: i64) {
    let cv = if cversion == -1 {
        stat.cversion + 1
    } else {
        cversion
    };
    if cv > stat.cversion {
        stat.cversion = cv;
        stat.pzxid = zxid;
    }
}

/// `DigestCalculator.calculateDigest`: CRC-32 of the path (the root as ""), the data and the
/// stat; nodes under `/zookeeper/` do not count.
pub fn node_digest(path: &str, node: &ZkNode) -> u64 {
    if path.starts_with("/zookeeper/") {
        return 0;
    }
    let path = if path == "/" { "" } else { path };
    let mut crc = Crc32::default();
    crc.update(path.as_bytes());
    if let Some(d) = &node.data {
        crc.update(d);
    }
    let s = &node.stat;
    let mut b = Vec::with_capacity(60);
    for v in [s.czxid, s.mzxid, s.pzxid, s.ctime, s.mtime] {
        b.extend_from_slice(&v.to_be_bytes());
    }
    for v in [s.version, s.cversion, s.aversion] {
        b.extend_from_slice(&v.to_be_bytes());
    }
    b.extend_from_slice(&s.ephemeral_owner.to_be_bytes());
    crc.update(&b);
    u64::from(crc.value())
}

impl ZkTree {
    /// An empty tree (no root); nodes come from a snapshot or [`Self::insert`].
    pub fn new() -> ZkTree {
        ZkTree::default()
    }

    /// The tree digest, as ZooKeeper's `getTreeDigest` (a sum of node digests).
    pub fn digest(&self) -> i64 {
        self.digest as i64
    }

    /// The key for an ACL list, adding it to the cache if new (`convertAcls`).
    pub fn acl_key(&mut self, acl: &[Acl]) -> i64 {
        if let Some(k) = self.acl_keys.get(acl) {
            return *k;
        }
        let key = self.acls.keys().copied().max().unwrap_or(0).max(0) + 1;
        self.add_acl(key, acl.to_vec());
        key
    }

    /// Adds a cache entry read from a snapshot.
    pub fn add_acl(&mut self, key: i64, acl: Vec<Acl>) {
        self.acl_keys.entry(acl.clone()).or_insert(key);
        self.acls.insert(key, acl);
    }

    /// The ACL list of a node (`-1` is OPEN_ACL_UNSAFE); `None` if the cache lacks it.
    pub fn acl_of(&self, node: &ZkNode) -> Option<Vec<Acl>> {
        if node.acl == OPEN_UNSAFE_ACL_ID {
            return Some(vec![Acl::open_unsafe()]);
        }
        self.acls.get(&node.acl).cloned()
    }

    /// Inserts a node (replacing one at the same path), without linking it to its parent.
    pub fn insert(&mut self, path: String, node: ZkNode) {
        self.digest = self.digest.wrapping_add(node_digest(&path, &node));
        if let OwnerKind::Session(s) = OwnerKind::of(node.stat.ephemeral_owner) {
            self.ephemerals.entry(s).or_default().insert(path.clone());
        }
        if let Some(old) = self.nodes.insert(path.clone(), node) {
            self.forget(&path, &old);
        }
    }

    fn forget(&mut self, path: &str, node: &ZkNode) {
        self.digest = self.digest.wrapping_sub(node_digest(path, node));
        if let OwnerKind::Session(s) = OwnerKind::of(node.stat.ephemeral_owner) {
            if let Some(set) = self.ephemerals.get_mut(&s) {
                set.remove(path);
                if set.is_empty() {
                    self.ephemerals.remove(&s);
                }
            }
        }
    }

    /// Changes a node in place, keeping the digest right.
    fn update(&mut self, path: &str, f: impl FnOnce(&mut ZkNode)) -> Result<(), ReplayError> {
        let node = self.nodes.get_mut(path).ok_or(ReplayError::NoNode)?;
        let before = node_digest(path, node);
        f(node);
        let after = node_digest(path, node);
        self.digest = self.digest.wrapping_sub(before).wrapping_add(after);
        Ok(())
    }

    /// Links every node to its parent (after loading a snapshot); the first path whose
    /// parent is missing is returned as the error.
    pub fn link_children(&mut self) -> Result<(), String> {
        let paths: Vec<String> = self.nodes.keys().filter(|p| *p != "/").cloned().collect();
        for p in paths {
            let (parent, child) = split(&p);
            match self.nodes.get_mut(parent) {
                Some(n) => {
                    n.children.insert(child.to_string());
                }
                None => return Err(p),
            }
        }
        Ok(())
    }

    /// Sessions that own ephemerals.
    pub fn ephemeral_owners(&self) -> Vec<i64> {
        let mut v: Vec<i64> = self.ephemerals.keys().copied().collect();
        v.sort_unstable();
        v
    }

    /// The ephemerals of a session.
    pub fn ephemerals_of(&self, session: i64) -> Vec<String> {
        let mut v: Vec<String> = self
            .ephemerals
            .get(&session)
            .map(|s| s.iter().cloned().collect())
            .unwrap_or_default();
        v.sort();
        v
    }

    /// `DataTree.createNode`.
    #[allow(clippy::too_many_arguments)]
    pub fn create_node(
        &mut self,
        path: &str,
        data: Option<Bytes>,
        acl: &[Acl],
        owner: i64,
        parent_cversion: i32,
        zxid: i64,
        time: i64,
    ) -> Result<(), ReplayError> {
        let (parent, child) = split(path);
        let acl = self.acl_key(acl);
        let p = self.nodes.get(parent).ok_or(ReplayError::NoNode)?;
        if p.children.contains(child) {
            return Err(ReplayError::NodeExists);
        }
        let child = child.to_string();
        self.update(parent, |p| {
            raise_cversion(&mut p.stat, parent_cversion, zxid);
            p.children.insert(child);
        })?;
        let stat = StatPersisted {
            czxid: zxid,
            mzxid: zxid,
            ctime: time,
            mtime: time,
            ephemeral_owner: owner,
            pzxid: zxid,
            ..Default::default()
        };
        self.insert(
            path.to_string(),
            ZkNode {
                data,
                acl,
                stat,
                children: FastSet::default(),
            },
        );
        Ok(())
    }

    /// `DataTree.deleteNode`: the parent's pzxid rises even if the child is already gone.
    pub fn delete_node(&mut self, path: &str, zxid: i64) -> Result<(), ReplayError> {
        let (parent, child) = split(path);
        self.update(parent, |p| {
            p.children.remove(child);
            if zxid > p.stat.pzxid {
                p.stat.pzxid = zxid;
            }
        })?;
        let node = self.nodes.remove(path).ok_or(ReplayError::NoNode)?;
        self.forget(path, &node);
        Ok(())
    }

    /// `DataTree.setCversionPzxid`.
    fn set_cversion_pzxid(
        &mut self,
        path: &str,
        cversion: i32,
        zxid: i64,
    ) -> Result<(), ReplayError> {
        self.update(path, |n| raise_cversion(&mut n.stat, cversion, zxid))
    }

    /// Deletes a session's ephemerals (`killSession`): the paths the transaction names,
    /// then any others the tree knows.
    pub fn kill_session(&mut self, session: i64, zxid: i64, named: Option<&[String]>) {
        let mut paths: Vec<String> = named.map(<[String]>::to_vec).unwrap_or_default();
        for p in self.ephemerals_of(session) {
            if !paths.contains(&p) {
                paths.push(p);
            }
        }
        for p in paths {
            let _ = self.delete_node(&p, zxid);
        }
    }

    /// Applies one logged transaction (`FileTxnSnapLog.processTransaction`). Errors a
    /// fuzzy snapshot makes expected are returned for counting, never fatal.
    pub fn process(&mut self, h: &TxnHeader, txn: &Txn) -> Option<ReplayError> {
        let result = match txn {
            Txn::CreateSession { timeout } => {
                self.sessions.insert(h.client_id, *timeout);
                None
            }
            Txn::CloseSession { paths } => {
                self.sessions.remove(&h.client_id);
                self.kill_session(h.client_id, h.zxid, paths.as_deref());
                None
            }
            Txn::Multi(subs) => {
                let failed = subs.iter().any(|(k, _)| *k == op::ERROR);
                let mut first = None;
                if !failed {
                    for (kind, sub) in subs {
                        let sub_header = TxnHeader { kind: *kind, ..*h };
                        if let Some(e) = self.apply(&sub_header, sub) {
                            first.get_or_insert(e);
                        }
                    }
                }
                first
            }
            other => self.apply(h, other),
        };
        if h.zxid > self.last_zxid {
            self.last_zxid = h.zxid;
        }
        result
    }

    fn apply(&mut self, h: &TxnHeader, txn: &Txn) -> Option<ReplayError> {
        let r = match txn {
            Txn::Create {
                path,
                data,
                acl,
                ephemeral,
                parent_cversion,
            } => {
                let owner = if *ephemeral { h.client_id } else { 0 };
                let r = self.create_node(
                    path,
                    data.clone(),
                    acl,
                    owner,
                    *parent_cversion,
                    h.zxid,
                    h.time,
                );
                if r == Err(ReplayError::NodeExists) && matches!(h.kind, op::CREATE | op::CREATE2) {
                    // The node was re-created by another session after the snapshot took
                    // its parent: the parent still gets this create's cversion and pzxid.
                    let (parent, _) = split(path);
                    if let Err(e) = self.set_cversion_pzxid(parent, *parent_cversion, h.zxid) {
                        return Some(e);
                    }
                }
                r
            }
            Txn::CreateContainer {
                path,
                data,
                acl,
                parent_cversion,
            } => self.create_node(
                path,
                data.clone(),
                acl,
                CONTAINER_OWNER,
                *parent_cversion,
                h.zxid,
                h.time,
            ),
            Txn::CreateTtl {
                path,
                data,
                acl,
                parent_cversion,
                ttl,
            } => self.create_node(
                path,
                data.clone(),
                acl,
                OwnerKind::Ttl(*ttl).owner(),
                *parent_cversion,
                h.zxid,
                h.time,
            ),
            Txn::Delete { path } => self.delete_node(path, h.zxid),
            Txn::SetData {
                path,
                data,
                version,
            } => self.update(path, |n| {
                n.data = data.clone();
                n.stat.mtime = h.time;
                n.stat.mzxid = h.zxid;
                n.stat.version = *version;
            }),
            Txn::SetAcl { path, acl, version } => {
                let key = self.acl_key(acl);
                self.update(path, |n| {
                    n.acl = key;
                    n.stat.aversion = *version;
                })
            }
            Txn::Check { .. } | Txn::Error { .. } => Ok(()),
            // Not inside a multi (the decoder refuses them there); handled by `process`.
            Txn::CreateSession { .. } | Txn::CloseSession { .. } | Txn::Multi(_) => Ok(()),
        };
        r.err()
    }

    /// ZooKeeper's `setupQuota` at load: the `zookeeper_stats` node of every path with a
    /// quota gets that subtree's current node count and data bytes (ZooKeeper keeps these
    /// in memory, outside the log). Other keys of the stats node are kept, sorted after
    /// `count` and `bytes`, as `StatsTrack.toString` writes them.
    pub fn recompute_quota_stats(&mut self) {
        const PREFIX: &str = "/zookeeper/quota";
        let limits: Vec<String> = self
            .nodes
            .keys()
            .filter(|p| p.starts_with("/zookeeper/quota/") && p.ends_with("/zookeeper_limits"))
            .cloned()
            .collect();
        for limit in limits {
            let quota_dir = &limit[..limit.len() - "/zookeeper_limits".len()];
            let target = &quota_dir[PREFIX.len()..];
            let stats_path = format!("{quota_dir}/zookeeper_stats");
            if !self.nodes.contains_key(target) || !self.nodes.contains_key(&stats_path) {
                continue;
            }
            let (mut count, mut bytes) = (0i64, 0i64);
            let mut stack = vec![target.to_string()];
            while let Some(p) = stack.pop() {
                let Some(n) = self.nodes.get(&p) else {
                    continue;
                };
                count += 1;
                bytes += n.data.as_ref().map_or(0, |d| d.len() as i64);
                for c in &n.children {
                    stack.push(if p == "/" {
                        format!("/{c}")
                    } else {
                        format!("{p}/{c}")
                    });
                }
            }
            let Some(node) = self.nodes.get_mut(&stats_path) else {
                continue;
            };
            let old = node
                .data
                .as_deref()
                .map(String::from_utf8_lossy)
                .unwrap_or_default();
            let mut others: Vec<(String, String)> = old
                .split(',')
                .filter_map(|kv| kv.split_once('='))
                .filter(|(k, _)| *k != "count" && *k != "bytes")
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            others.sort();
            let mut text = format!("count={count},bytes={bytes}");
            for (k, v) in others {
                text.push_str(&format!(",{k}={v}"));
            }
            node.data = Some(Bytes::from(text));
        }
    }

    /// ZooKeeper's load-time clean-up: ephemerals whose session is not in the table are
    /// deleted (with the last zxid). Returns the sessions cleaned up.
    pub fn remove_orphaned_ephemerals(&mut self) -> Vec<i64> {
        let orphans: Vec<i64> = self
            .ephemeral_owners()
            .into_iter()
            .filter(|s| !self.sessions.contains_key(s))
            .collect();
        for s in &orphans {
            self.kill_session(*s, self.last_zxid, None);
        }
        orphans
    }
}

/// A fresh tree as ZooKeeper starts one (`/` and `/zookeeper`), for tests.
#[cfg(test)]
pub(crate) fn fresh() -> ZkTree {
    let mut t = ZkTree::new();
    let root = ZkNode {
        data: Some(Bytes::new()),
        acl: OPEN_UNSAFE_ACL_ID,
        stat: StatPersisted::default(),
        children: FastSet::default(),
    };
    t.insert("/".into(), root.clone());
    t.insert("/zookeeper".into(), root);
    t.link_children().expect("the root exists");
    t
}

#[cfg(test)]
mod tests;
