//! Changes a ZooKeeper leader already decided, applied as ZooKeeper's `DataTree` applies a
//! transaction (`processTxn`): no permission, version or path checks (the leader made them
//! before it logged the transaction), and every zxid, time and version taken from the
//! transaction rather than computed here. A zooraft member that observes a ZooKeeper
//! ensemble applies the ensemble's transactions through these, so its tree is ZooKeeper's
//! field by field.
//!
//! As in ZooKeeper, a transaction that does not fit the tree (a create over an existing
//! node, a change to a missing one) changes nothing and reports why; ZooKeeper only logs
//! those, and so does the caller.

use bytes::Bytes;
use jute::{Acl, ErrorCode, Stat};

use super::node::stat_of;
use super::node::{NodeKind, Trigger};
use super::nodes::Nodes;
use super::slot::{new_slot, ChildStat, Dir};
use super::write;
use crate::state::path;

/// A create as a ZooKeeper transaction states it (`CreateTxn`, `CreateContainerTxn`,
/// `CreateTTLTxn`): the final path (a sequential node's suffix included), and the parent's
/// child version the leader computed (-1: one more than now).
#[derive(Debug, Clone)]
pub struct DecidedCreate<'a> {
    pub path: &'a str,
    pub data: Option<&'a [u8]>,
    pub acl: &'a [Acl],
    pub kind: NodeKind,
    pub parent_cversion: i32,
    pub zxid: i64,
    pub time: i64,
}

/// `DataTree.createNode`: the node with czxid = mzxid = pzxid = `zxid`; the parent's
/// cversion becomes `parent_cversion` (and its pzxid `zxid`) only if that raises it.
pub(super) fn replay_create(
    t: &mut Nodes,
    c: &DecidedCreate,
    triggers: &mut Vec<Trigger>,
) -> Result<Stat, ErrorCode> {
    let parent_path = path::parent_of(c.path);
    let child = path::child_name(c.path);
    if child.is_empty() {
        return Err(ErrorCode::NodeExists);
    }
    let parent_id = t.arena.lookup(parent_path).ok_or(ErrorCode::NoNode)?;
    let parent_dir = t.arena.dir(parent_id).ok_or(ErrorCode::NoNode)?;
    let acl = t.intern_acl(c.acl.to_vec());
    let mut node = new_slot(c.kind, acl, child.as_bytes(), c.data);
    (node.czxid, node.mzxid) = (c.zxid, c.zxid);
    (node.ctime, node.mtime) = (c.time, c.time);
    let stat = stat_of(&node, Dir::leaf(c.zxid));
    if t.insert_slot(parent_id, c.path, node).is_err() {
        return Err(ErrorCode::NodeExists);
    }
    raise_child_version(t, parent_id, parent_dir, c.parent_cversion, c.zxid);
    triggers.push(Trigger::Created(c.path.to_string()));
    triggers.push(Trigger::ChildrenChanged(parent_path.to_string()));
    Ok(stat)
}

/// A create/create2 of a node that exists already (re-created after a fuzzy snapshot
/// took its parent): ZooKeeper still gives the parent this create's cversion and pzxid.
pub(super) fn replay_parent_of_existing(t: &mut Nodes, c: &DecidedCreate) {
    let parent_path = path::parent_of(c.path);
    if let Some(id) = t.arena.lookup(parent_path) {
        if let Some(dir) = t.arena.dir(id) {
            raise_child_version(t, id, dir, c.parent_cversion, c.zxid);
        }
    }
}

fn raise_child_version(t: &mut Nodes, id: super::slot::NodeId, dir: Dir, cversion: i32, zxid: i64) {
    let cv = if cversion == -1 {
        dir.cversion.wrapping_add(1)
    } else {
        cversion
    };
    if cv > dir.cversion {
        t.arena.set_child_stat(
            id,
            ChildStat {
                pzxid: zxid,
                cversion: cv,
            },
        );
    }
}

/// `DataTree.deleteNode`: the node goes, and its parent's pzxid rises to `zxid`.
pub(super) fn replay_delete(
    t: &mut Nodes,
    zxid: i64,
    path_in: &str,
    triggers: &mut Vec<Trigger>,
) -> Result<(), ErrorCode> {
    let id = t.arena.lookup(path_in).ok_or(ErrorCode::NoNode)?;
    if path_in == "/" {
        return Err(ErrorCode::BadArguments);
    }
    let node = t.view(id).ok_or(ErrorCode::NoNode)?;
    if node.num_children() != 0 {
        return Err(ErrorCode::NotEmpty);
    }
    write::remove_node_at(t, zxid, id, path_in, triggers, None);
    Ok(())
}

/// `DataTree.setData`: the data, mzxid, mtime, and the version the leader computed.
pub(super) fn replay_set_data(
    t: &mut Nodes,
    zxid: i64,
    time: i64,
    path_in: &str,
    data: Option<Bytes>,
    version: i32,
    triggers: &mut Vec<Trigger>,
) -> Result<Stat, ErrorCode> {
    let id = t.arena.lookup(path_in).ok_or(ErrorCode::NoNode)?;
    write::put_data(
        t,
        id,
        path_in,
        data.as_deref(),
        version,
        zxid,
        time,
        triggers,
    )
}

/// `DataTree.setACL`: the list as the leader fixed it up, and its aversion.
pub(super) fn replay_set_acl(
    t: &mut Nodes,
    path_in: &str,
    acl: &[Acl],
    aversion: i32,
) -> Result<Stat, ErrorCode> {
    let id = t.arena.lookup(path_in).ok_or(ErrorCode::NoNode)?;
    let acl = t.intern_acl(acl.to_vec());
    let dir = t.arena.dir(id).ok_or(ErrorCode::NoNode)?;
    let node = t.arena.get_mut(id).ok_or(ErrorCode::NoNode)?;
    node.set_acl(acl);
    node.aversion = aversion;
    Ok(stat_of(node, dir))
}

/// `DataTree.killSession`: the ephemerals the transaction names (ZooKeeper 3.6+ lists
/// them), then any others of the session this tree knows.
pub(super) fn replay_kill_session(
    t: &mut Nodes,
    zxid: i64,
    session: i64,
    named: &[String],
    triggers: &mut Vec<Trigger>,
) {
    for p in named {
        if let Some(n) = t.get(p) {
            if n.kind() == NodeKind::Ephemeral(session) {
                let _ = replay_delete(t, zxid, p, triggers);
            }
        }
    }
    write::kill_session(t, zxid, session, triggers);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::tree::{DataTree, TreeOptions};

    fn create<'a>(path: &'a str, kind: NodeKind, pcv: i32, zxid: i64) -> DecidedCreate<'a> {
        DecidedCreate {
            path,
            data: Some(b"d"),
            acl: &[],
            kind,
            parent_cversion: pcv,
            zxid,
            time: zxid * 10,
        }
    }

    /// The stored child version (creates, as ZooKeeper stores it) and pzxid of `path`.
    fn dir(t: &DataTree, path: &str) -> (i32, i64) {
        let d = t
            .nodes
            .arena
            .dir(t.nodes.arena.lookup(path).unwrap())
            .unwrap();
        (d.cversion, d.pzxid)
    }

    #[test]
    fn creates_take_the_leaders_numbers() {
        let mut t = DataTree::new(TreeOptions::default());
        let mut tr = Vec::new();
        let s = t
            .replay_create(&create("/a", NodeKind::Persistent, 1, 5), &mut tr)
            .unwrap();
        assert_eq!((s.czxid, s.mzxid, s.pzxid, s.ctime), (5, 5, 5, 50));
        assert_eq!(dir(&t, "/"), (1, 5));
        // A sequential child at the path the leader chose; the parent's cversion as stated.
        t.replay_create(
            &create("/a/q0000000007", NodeKind::Ephemeral(9), 8, 6),
            &mut tr,
        )
        .unwrap();
        assert_eq!(dir(&t, "/a"), (8, 6));
        // What a client sees: every create and delete counted (8 creates, 7 gone).
        assert_eq!(t.get("/a").unwrap().stat().cversion, 15);
        assert_eq!(t.ephemerals_of(9).count(), 1);
        // -1: one more than now. A lower one leaves the parent as it is.
        t.replay_create(&create("/b", NodeKind::Container, -1, 7), &mut tr)
            .unwrap();
        assert_eq!(dir(&t, "/").0, 2);
        t.replay_create(&create("/c", NodeKind::Persistent, 1, 8), &mut tr)
            .unwrap();
        assert_eq!(dir(&t, "/"), (2, 7));
        assert_eq!(
            t.replay_create(&create("/c", NodeKind::Persistent, 9, 9), &mut tr),
            Err(ErrorCode::NodeExists)
        );
        assert_eq!(
            t.replay_create(&create("/x/y", NodeKind::Persistent, 1, 9), &mut tr),
            Err(ErrorCode::NoNode)
        );
    }

    #[test]
    fn set_data_acl_delete_and_sessions() {
        let mut t = DataTree::new(TreeOptions::default());
        let mut tr = Vec::new();
        t.replay_create(&create("/a", NodeKind::Persistent, 1, 5), &mut tr)
            .unwrap();
        t.replay_create(&create("/a/e", NodeKind::Ephemeral(3), 1, 6), &mut tr)
            .unwrap();
        let s = t
            .replay_set_data(7, 70, "/a", Some(Bytes::from_static(b"xy")), 4, &mut tr)
            .unwrap();
        assert_eq!((s.version, s.mzxid, s.mtime, s.data_length), (4, 7, 70, 2));
        let s = t.replay_set_acl("/a", &[Acl::open_unsafe()], 2).unwrap();
        assert_eq!(s.aversion, 2);
        assert_eq!(t.replay_delete(8, "/a", &mut tr), Err(ErrorCode::NotEmpty));
        t.replay_kill_session(8, 3, &["/a/e".to_string()], &mut tr);
        assert!(t.get("/a/e").is_none());
        assert_eq!(t.get("/a").unwrap().stat().pzxid, 8);
        t.replay_delete(9, "/a", &mut tr).unwrap();
        assert_eq!(t.get("/").unwrap().stat().pzxid, 9);
        assert_eq!(t.replay_delete(10, "/a", &mut tr), Err(ErrorCode::NoNode));
    }
}
