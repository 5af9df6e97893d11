//! One znode, and the records a write works with: what it triggers, how to undo it, and
//! the facts of its transaction.

use std::sync::Arc;

use bytes::Bytes;
use jute::{Acl, Id, Stat};

use std::collections::HashSet;
use std::hash::BuildHasher;
use std::sync::OnceLock;

/// A path or a child's name, shared between the tree and snapshots.
pub type Name = Arc<str>;

/// The hasher of child sets: ahash keyed once per process. A keyed `RandomState` in every
/// set would cost 32 bytes in each of millions of znodes; an unkeyed hash would let a client
/// choose child names that collide.
#[derive(Debug, Clone, Copy, Default)]
pub struct ChildHasher;

impl BuildHasher for ChildHasher {
    type Hasher = ahash::AHasher;

    fn build_hasher(&self) -> ahash::AHasher {
        static KEYS: OnceLock<ahash::RandomState> = OnceLock::new();
        KEYS.get_or_init(ahash::RandomState::new).build_hasher()
    }
}

/// A znode's child names.
pub type ChildSet = HashSet<Name, ChildHasher>;

/// Data as the tree keeps it: in an allocation of its own, exactly its size. Data decoded
/// from a Raft entry, a snapshot or a request is a slice of that whole buffer, and keeping
/// the slice would keep the whole buffer (every other command, header and path in it) alive
/// for as long as the znode lives.
pub fn owned(data: Option<Bytes>) -> Option<Bytes> {
    data.map(|d| {
        if d.is_empty() {
            Bytes::new()
        } else {
            Bytes::copy_from_slice(&d)
        }
    })
}

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
    pub children: ChildSet,
}

impl Znode {
    pub(super) fn new(
        data: Option<Bytes>,
        acl: Arc<[Acl]>,
        zxid: i64,
        time: i64,
        kind: NodeKind,
    ) -> Znode {
        Znode {
            data: owned(data),
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
            children: ChildSet::default(),
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

    pub(super) fn data_len(&self) -> u64 {
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
        node: Arc<Znode>,
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
