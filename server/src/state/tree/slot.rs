//! One znode's fixed-size record ([`Slot`]) and the variable part it points to: kind,
//! owner, ACL id, name and data packed in one [`Blob`]; and the parent side of its Stat
//! ([`Dir`]) that only nodes with children need. The arena (`arena.rs`) stores them; this
//! module only knows how one node is laid out.

use super::blob::Blob;
use super::kind::{NodeKind, KIND_MASK};

/// A node id: its slot in the arena.
pub type NodeId = u32;

/// No node (the root's parent, the end of a sibling list).
pub const NONE: NodeId = u32::MAX;

/// Tag bit: whether the node has data (null vs empty); the kind is in the low two bits.
pub const HAS_DATA: u8 = 0b100;

/// One znode (64 bytes). `blob` holds what a write rarely changes, one after another: a
/// tag byte (kind and null-data flag), the ephemeral owner or TTL (8 bytes, only for those
/// kinds), the ACL id and the name's length (LEB128 varints: a byte each, usually), the
/// name, the data. `None` marks a free slot. The Stat's parent side is in its [`Dir`].
#[derive(Debug, Clone)]
pub struct Slot {
    blob: Option<Blob>,
    pub czxid: i64,
    pub mzxid: i64,
    pub ctime: i64,
    pub mtime: i64,
    pub version: i32,
    pub aversion: i32,
    pub parent: NodeId,
    pub next: NodeId,
    pub prev: NodeId,
    /// Its entry in the table of dirs, `NONE` while it has none (see [`Dir`]).
    pub(super) dir: u32,
}

/// What only a node with children (or that once had some) needs: a node without one has
/// no children, a cversion of 0 and its czxid as pzxid (ZooKeeper's Stat of a new node).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dir {
    /// The zxid of the last change to its children.
    pub pzxid: i64,
    /// The newest child (the head of the sibling list).
    pub first_child: NodeId,
    /// The internal child-create counter (ZooKeeper's persisted cversion).
    pub cversion: i32,
    pub children: u32,
}

impl Dir {
    /// The dir of a node created at `czxid` that never had a child.
    pub(super) fn leaf(czxid: i64) -> Dir {
        Dir {
            pzxid: czxid,
            first_child: NONE,
            cversion: 0,
            children: 0,
        }
    }
}

/// The child-side Stat fields a node keeps when it leaves the arena (a removal undone, a
/// snapshot's node placed): what a [`Dir`] holds beyond the links.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChildStat {
    pub pzxid: i64,
    pub cversion: i32,
}

/// A blob read back into its fields.
struct Parts<'a> {
    tag: u8,
    owner: i64,
    acl: u32,
    name: &'a [u8],
    /// The data (even when the tag says null: then empty).
    data: &'a [u8],
}

/// Whether a kind tag carries an owner (ephemerals) or TTL.
fn has_owner(tag: u8) -> bool {
    matches!(tag & KIND_MASK, 1 | 3)
}

/// A LEB128 varint of `v` into `buf`: the bytes used.
fn put_varint(mut v: u32, buf: &mut [u8; 5]) -> &[u8] {
    let mut n = 0;
    while v >= 0x80 {
        buf[n] = (v as u8) | 0x80;
        v >>= 7;
        n += 1;
    }
    buf[n] = v as u8;
    &buf[..=n]
}

/// A LEB128 varint from the front of `bytes` (0 from a truncated one: blobs are only ever
/// written by [`Slot::set_blob`]), and the rest.
fn get_varint(bytes: &[u8]) -> (u32, &[u8]) {
    let mut v: u32 = 0;
    for (i, &b) in bytes.iter().enumerate().take(5) {
        v |= u32::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return (v, &bytes[i + 1..]);
        }
    }
    (0, &[])
}

fn parse(bytes: &[u8]) -> Parts<'_> {
    let (&tag, rest) = bytes.split_first().unwrap_or((&0, &[]));
    let (owner, rest) = match rest.split_first_chunk::<8>() {
        Some((o, rest)) if has_owner(tag) => (i64::from_le_bytes(*o), rest),
        _ => (0, rest),
    };
    let (acl, rest) = get_varint(rest);
    let (name_len, rest) = get_varint(rest);
    let (name, data) = rest.split_at(rest.len().min(name_len as usize));
    Parts {
        tag,
        owner,
        acl,
        name,
        data,
    }
}

impl Slot {
    pub(super) const FREE: Slot = Slot {
        blob: None,
        czxid: 0,
        mzxid: 0,
        ctime: 0,
        mtime: 0,
        version: 0,
        aversion: 0,
        parent: NONE,
        next: NONE,
        prev: NONE,
        dir: NONE,
    };

    /// Whether the slot holds a node (a free slot has no blob).
    pub fn is_live(&self) -> bool {
        self.blob.is_some()
    }

    fn parts(&self) -> Parts<'_> {
        parse(self.blob.as_ref().map_or(&[], Blob::bytes))
    }

    pub fn kind(&self) -> NodeKind {
        let p = self.parts();
        NodeKind::unpack(p.tag, p.owner)
    }

    /// The index of its ACL list in the tree's table of lists.
    pub fn acl(&self) -> u32 {
        self.parts().acl
    }

    pub fn name(&self) -> &[u8] {
        self.parts().name
    }

    /// Whether the node was created (or last set) with data (null data is not empty data).
    pub fn has_data(&self) -> bool {
        self.parts().tag & HAS_DATA != 0
    }

    pub fn data(&self) -> Option<&[u8]> {
        let p = self.parts();
        (p.tag & HAS_DATA != 0).then_some(p.data)
    }

    pub fn data_len(&self) -> u64 {
        self.data().map_or(0, |d| d.len() as u64)
    }

    /// Sets kind, ACL, name and data in one allocation of exactly their size (plus the tag
    /// and the varints).
    fn set_blob(&mut self, kind: NodeKind, acl: u32, name: &[u8], data: Option<&[u8]>) {
        let (kind_tag, owner) = kind.pack();
        let tag = kind_tag | if data.is_some() { HAS_DATA } else { 0 };
        let owner = owner.to_le_bytes();
        let owner = if has_owner(tag) { &owner[..] } else { &[] };
        let (mut acl_buf, mut len_buf) = ([0; 5], [0; 5]);
        let acl = put_varint(acl, &mut acl_buf);
        let name_len = put_varint(u32::try_from(name.len()).unwrap_or(u32::MAX), &mut len_buf);
        let blob = Blob::new(&[&[tag], owner, acl, name_len, name, data.unwrap_or_default()]);
        self.blob = Some(blob);
    }

    /// Keeps kind, ACL and name, replaces the data.
    pub fn set_data(&mut self, data: Option<&[u8]>) {
        let old = self.blob.take();
        let p = parse(old.as_ref().map_or(&[], Blob::bytes));
        self.set_blob(NodeKind::unpack(p.tag, p.owner), p.acl, p.name, data);
    }

    /// Keeps kind, name and data, replaces the ACL id.
    pub fn set_acl(&mut self, acl: u32) {
        let old = self.blob.take();
        let p = parse(old.as_ref().map_or(&[], Blob::bytes));
        let data = (p.tag & HAS_DATA != 0).then_some(p.data);
        self.set_blob(NodeKind::unpack(p.tag, p.owner), acl, p.name, data);
    }

    /// Takes back the kind, ACL, name and data `old` had (shared, not copied).
    pub fn restore_blob(&mut self, old: &Slot) {
        self.blob = old.blob.clone();
    }
}

/// A fresh slot with kind, ACL id, name and data, every other field zero (the caller fills
/// the Stat).
pub fn new_slot(kind: NodeKind, acl: u32, name: &[u8], data: Option<&[u8]>) -> Slot {
    let mut slot = Slot::FREE;
    slot.set_blob(kind, acl, name, data);
    slot
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn null_and_empty_data_differ() {
        let a = new_slot(NodeKind::Persistent, 0, b"n", None);
        let b = new_slot(NodeKind::Persistent, 0, b"n", Some(b""));
        assert_eq!(a.data(), None);
        assert_eq!(b.data(), Some(&b""[..]));
    }

    #[test]
    fn kinds_names_and_data_round_trip() {
        assert_eq!(std::mem::size_of::<Slot>(), 64);
        for kind in [
            NodeKind::Persistent,
            NodeKind::Ephemeral(-0x1234_5678_9abc),
            NodeKind::Container,
            NodeKind::Ttl(0x00FF_FFFF_FFFF),
        ] {
            let mut s = new_slot(kind, 300, b"name", Some(b"data"));
            assert_eq!(
                (s.kind(), s.name(), s.data()),
                (kind, &b"name"[..], Some(&b"data"[..]))
            );
            let before = s.clone();
            s.set_data(None);
            assert_eq!((s.kind(), s.name(), s.data()), (kind, &b"name"[..], None));
            s.set_data(Some(b""));
            assert_eq!(
                (s.kind(), s.data(), s.data_len()),
                (kind, Some(&b""[..]), 0)
            );
            s.set_acl(u32::MAX);
            assert_eq!(
                (s.kind(), s.acl(), s.name()),
                (kind, u32::MAX, &b"name"[..])
            );
            s.restore_blob(&before);
            assert_eq!(s.acl(), 300);
            assert_eq!(
                (s.kind(), s.name(), s.data()),
                (kind, &b"name"[..], Some(&b"data"[..]))
            );
        }
    }
}
