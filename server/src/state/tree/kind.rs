//! A znode's kind (persistent, ephemeral, container, TTL) and how a slot's blob packs it:
//! two tag bits, and an owner (session or TTL) only for the kinds that have one.

/// The kind's bits in a blob's tag byte.
pub const KIND_MASK: u8 = 0b11;

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

    /// The kind packed as a blob's tag bits and owner.
    pub(super) fn pack(self) -> (u8, i64) {
        match self {
            NodeKind::Persistent => (0, 0),
            NodeKind::Ephemeral(s) => (1, s),
            NodeKind::Container => (2, 0),
            NodeKind::Ttl(t) => (3, t),
        }
    }

    pub(super) fn unpack(tag: u8, owner: i64) -> NodeKind {
        match tag & KIND_MASK {
            0 => NodeKind::Persistent,
            1 => NodeKind::Ephemeral(owner),
            2 => NodeKind::Container,
            _ => NodeKind::Ttl(owner),
        }
    }
}
