//! The tree's state under one owner: the arena of znodes, the interned ACL lists, the
//! indexes by kind (ephemerals by session, containers, TTL nodes) and the data size, with
//! the primitive operations that keep them consistent (place, remove, look up, count).
//! The writes (`write.rs`), the replay of decided writes (`replay.rs`) and the snapshot
//! loader (`load.rs`) are built on these; [`DataTree`](super::DataTree) holds a `Nodes`
//! and delegates.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use jute::Acl;

use super::arena::{Arena, ROOT};
use super::index;
use super::load::TreeCapture;
use super::node::{Node, NodeKind};
use super::slot::{ChildStat, NodeId, Slot};

/// The znodes and their indexes.
#[derive(Debug, Clone)]
pub(super) struct Nodes {
    pub(super) arena: Arena,
    /// Interned ACL lists; a node holds the index of its list.
    pub(super) acls: Vec<Arc<[Acl]>>,
    pub(super) acl_ids: HashMap<Arc<[Acl]>, u32, ahash::RandomState>,
    pub(super) ephemerals: HashMap<i64, BTreeSet<String>>,
    pub(super) containers: BTreeSet<String>,
    pub(super) ttls: BTreeSet<String>,
    /// Sum of path lengths and data lengths (ZooKeeper's `approximateDataSize`).
    pub(super) data_size: u64,
}

impl Nodes {
    /// Nothing at all, not even `/`.
    pub(super) fn empty() -> Nodes {
        Nodes {
            arena: Arena::new(),
            acls: Vec::new(),
            acl_ids: HashMap::default(),
            ephemerals: HashMap::new(),
            containers: BTreeSet::new(),
            ttls: BTreeSet::new(),
            data_size: 0,
        }
    }

    /// Places a node under `parent` and indexes it; `path` is its full path. If `parent`
    /// has a child of that name already, nothing changes and its id is the error (with the
    /// slot given back).
    pub(super) fn insert_slot(
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
    pub(super) fn place_slot_unindexed(
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
    pub(super) fn count_placed(&mut self, path: &str, len: u64, kind: NodeKind) {
        self.data_size += path.len() as u64 + len;
        self.index_kind(path, kind);
    }

    /// Removes a (childless) node and unindexes it; `path` is its full path.
    pub(super) fn remove_slot(&mut self, id: NodeId, path: &str) -> Option<(Slot, ChildStat)> {
        let (slot, stat) = self.arena.remove(id)?;
        self.data_size = self
            .data_size
            .saturating_sub(path.len() as u64 + slot.data_len());
        self.unindex_kind(path, slot.kind());
        Some((slot, stat))
    }

    pub(super) fn index_kind(&mut self, path: &str, kind: NodeKind) {
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

    pub(super) fn unindex_kind(&mut self, path: &str, kind: NodeKind) {
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
    pub(super) fn intern_acl(&mut self, acl: Vec<Acl>) -> u32 {
        if let Some(&i) = self.acl_ids.get(&acl[..]) {
            return i;
        }
        let shared: Arc<[Acl]> = acl.into();
        let i = self.acls.len() as u32;
        self.acls.push(shared.clone());
        self.acl_ids.insert(shared, i);
        i
    }

    pub(super) fn view(&self, id: NodeId) -> Option<Node<'_>> {
        Some(Node {
            id,
            slot: self.arena.get(id)?,
            slots: self.arena.slots(),
            acls: &self.acls,
        })
    }

    /// Looks a node up. `""` is the root, as in ZooKeeper.
    pub(super) fn get(&self, path: &str) -> Option<Node<'_>> {
        self.view(self.arena.lookup(path)?)
    }

    /// A node to change by path, with its id (its chunk copied first if a snapshot still
    /// holds it).
    pub(super) fn get_mut(&mut self, path: &str) -> Option<&mut Slot> {
        let id = self.arena.lookup(path)?;
        self.arena.get_mut(id)
    }

    /// A consistent view of the tree for a snapshot, taken in one pointer copy per chunk.
    pub(super) fn capture(&self) -> TreeCapture {
        TreeCapture {
            slots: self.arena.capture(),
            acls: self.acls.clone(),
            len: self.arena.len(),
        }
    }

    /// Node count as ZooKeeper reports it (`Node count`, `zk_znode_count`): its map holds the
    /// root twice (under `""` and `/`).
    pub(super) fn node_count(&self) -> usize {
        self.arena.len() + 1
    }

    pub(super) fn approximate_data_size(&self) -> u64 {
        self.data_size
    }

    /// All ephemeral paths of a session, in path order.
    pub(super) fn ephemerals_of(&self, session: i64) -> impl Iterator<Item = &String> {
        self.ephemerals.get(&session).into_iter().flatten()
    }

    /// Number of ephemeral nodes.
    pub(super) fn ephemeral_count(&self) -> usize {
        self.ephemerals.values().map(|s| s.len()).sum()
    }

    /// Sessions that own at least one ephemeral, with their counts.
    pub(super) fn ephemerals_by_session(&self) -> impl Iterator<Item = (i64, &BTreeSet<String>)> {
        self.ephemerals.iter().map(|(s, p)| (*s, p))
    }

    /// `getAllChildrenNumber`: every descendant (ZooKeeper counts all nodes for `/`, which
    /// includes the `/zookeeper` subtree).
    pub(super) fn all_children_number(&self, path: &str) -> usize {
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
    pub(super) fn sorted_paths(&self) -> Vec<String> {
        let mut paths = Vec::with_capacity(self.arena.len());
        self.arena.slots().walk(|p, _, _| paths.push(p.to_string()));
        paths.sort_unstable();
        paths
    }

    /// Paths of the containers (for tests of snapshot loading).
    #[cfg(test)]
    pub(super) fn containers(&self) -> &BTreeSet<String> {
        &self.containers
    }

    /// Paths of the TTL nodes (the leader's cleanup ages them, `raft/ttl_clock.rs`).
    pub(super) fn ttls(&self) -> &BTreeSet<String> {
        &self.ttls
    }
}
