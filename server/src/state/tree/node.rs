//! One znode, and the records a write works with: what it triggers, how to undo it, and
//! the facts of its transaction.

use std::sync::Arc;

use bytes::Bytes;
use jute::{Acl, Id, Stat};

use super::arena::Slots;
pub use super::kind::NodeKind;
use super::slot::{ChildStat, Dir, NodeId, Slot};

/// `/zookeeper` and its system children (ZooKeeper's `isSpecialPath`).
pub const ZOOKEEPER: &str = "/zookeeper";
pub const QUOTA: &str = "/zookeeper/quota";
pub const CONFIG: &str = "/zookeeper/config";

/// The largest TTL ZooKeeper accepts (`EphemeralType.TTL` keeps 40 bits of milliseconds).
pub const MAX_TTL_MS: i64 = 0x00FF_FFFF_FFFF;

/// A read-only view of one znode (in the live tree or in a snapshot's capture).
#[derive(Clone, Copy)]
pub struct Node<'a> {
    pub(super) id: NodeId,
    pub(super) slot: &'a Slot,
    pub(super) slots: &'a Slots,
    pub(super) acls: &'a [Arc<[Acl]>],
}

impl<'a> Node<'a> {
    pub fn data(&self) -> Option<&'a [u8]> {
        self.slot.data()
    }

    /// The data as an owned buffer (a copy).
    pub fn data_bytes(&self) -> Option<Bytes> {
        self.data().map(Bytes::copy_from_slice)
    }

    pub fn acl(&self) -> &'a [Acl] {
        self.acls.get(self.slot.acl() as usize).map_or(&[], |a| a)
    }

    /// The index of its ACL list in the tree's table of lists.
    pub fn acl_id(&self) -> u32 {
        self.slot.acl()
    }

    pub fn kind(&self) -> NodeKind {
        self.slot.kind()
    }

    pub fn czxid(&self) -> i64 {
        self.slot.czxid
    }

    pub fn mzxid(&self) -> i64 {
        self.slot.mzxid
    }

    pub fn pzxid(&self) -> i64 {
        self.slots.dir_of(self.slot).pzxid
    }

    pub fn ctime(&self) -> i64 {
        self.slot.ctime
    }

    pub fn mtime(&self) -> i64 {
        self.slot.mtime
    }

    pub fn version(&self) -> i32 {
        self.slot.version
    }

    /// The internal child-create counter (ZooKeeper's persisted cversion): it names the
    /// next sequential child and only ever grows.
    pub fn cversion(&self) -> i32 {
        self.slots.dir_of(self.slot).cversion
    }

    pub fn aversion(&self) -> i32 {
        self.slot.aversion
    }

    pub fn num_children(&self) -> usize {
        self.slots.dir_of(self.slot).children as usize
    }

    /// Whether the node was created (or last set) with null data.
    pub fn has_data(&self) -> bool {
        self.slot.has_data()
    }

    /// The children's names (newest first; ZooKeeper's order is its hash set's, which no
    /// client may rely on).
    pub fn children(&self) -> impl Iterator<Item = &'a str> {
        self.slots
            .children(self.id)
            .map(|(_, s)| std::str::from_utf8(s.name()).unwrap_or_default())
    }

    /// The `Stat` clients see. The visible cversion counts creates *and* deletes of children:
    /// `2 × creates − current children` (`DataNode.copyStat`).
    pub fn stat(&self) -> Stat {
        stat_of(self.slot, self.slots.dir_of(self.slot))
    }
}

/// The `Stat` of a slot and its dir (see [`Node::stat`]).
pub(super) fn stat_of(s: &Slot, dir: Dir) -> Stat {
    let num_children = dir.children as i32;
    Stat {
        czxid: s.czxid,
        mzxid: s.mzxid,
        ctime: s.ctime,
        mtime: s.mtime,
        version: s.version,
        cversion: dir.cversion.wrapping_mul(2).wrapping_sub(num_children),
        aversion: s.aversion,
        ephemeral_owner: s.kind().client_owner(),
        data_length: s.data().map_or(0, |d| d.len() as i32),
        num_children,
        pzxid: dir.pzxid,
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
        node: Box<Slot>,
        /// The deleted node's own pzxid and cversion.
        child_stat: ChildStat,
        parent: String,
        parent_pzxid: i64,
    },
    DataSet {
        path: String,
        /// The node as it was (its blob shared, not copied).
        old: Box<Slot>,
    },
    AclSet {
        path: String,
        acl: u32,
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

/// `/`, `/zookeeper`, `/zookeeper/quota`, `/zookeeper/config` cannot be deleted.
pub fn is_special_path(path: &str) -> bool {
    matches!(path, "/" | ZOOKEEPER | QUOTA | CONFIG)
}
