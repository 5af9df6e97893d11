//! The tree's writes, each in Apache ZooKeeper's order of checks (`PrepRequestProcessor`)
//! and with `DataTree`'s effects, and the rollback of a failed multi.

use bytes::Bytes;
use jute::{perms, Acl, CreateMode, ErrorCode, Stat};

use super::node::stat_of;
use super::node::{
    is_special_path, CreateOp, CreateRecord, NodeKind, Trigger, TxnContext, Undo, CONFIG,
    MAX_TTL_MS,
};
use super::nodes::Nodes;
use super::slot::{new_slot, ChildStat, Dir, NodeId};
use crate::state::{acl, path};

/// create / create2 / createContainer / createTTL, with ZooKeeper's order of checks:
/// flags → TTL → parent path form → ACL fixup → parent exists → CREATE permission →
/// sequential suffix → full path validation → NODEEXISTS → ephemeral parent.
/// Returns the created path and its Stat.
pub(super) fn create(
    t: &mut Nodes,
    extended_types: bool,
    ctx: &TxnContext,
    op: &CreateOp,
    triggers: &mut Vec<Trigger>,
    undo: Option<&mut Vec<Undo>>,
) -> Result<(String, Stat), ErrorCode> {
    let mode = CreateMode::from_flags(op.flags).ok_or(ErrorCode::BadArguments)?;
    if mode.is_ttl() && !extended_types {
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
    let parent_id = t.arena.lookup(parent_path).ok_or(ErrorCode::NoNode)?;
    let parent = t.view(parent_id).ok_or(ErrorCode::NoNode)?;
    acl::check(parent.acl(), perms::CREATE, ctx.auth)?;
    let parent_cversion = parent.cversion();
    let parent_kind = parent.kind();
    let full_path = if mode.is_sequential() {
        format!("{}{:010}", op.path, parent_cversion)
    } else {
        op.path.to_string()
    };
    path::validate(&full_path).map_err(|_| ErrorCode::BadArguments)?;
    let child = path::child_name(&full_path);
    // (A valid path's only empty name is the root's: creating `/` finds it.)
    if child.is_empty() {
        return Err(ErrorCode::NodeExists);
    }
    if matches!(parent_kind, NodeKind::Ephemeral(_)) {
        // NODEEXISTS comes first; an ephemeral parent has no children, so this probe
        // is for the rare create under one (the usual path learns it from the insert).
        if t.arena.child(parent_id, child.as_bytes()).is_some() {
            return Err(ErrorCode::NodeExists);
        }
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
    let acl = t.intern_acl(acl);
    let mut node = new_slot(kind, acl, child.as_bytes(), op.data.as_deref());
    (node.czxid, node.mzxid) = (ctx.zxid, ctx.zxid);
    (node.ctime, node.mtime) = (ctx.time, ctx.time);
    // A new node has no dir: its pzxid is its czxid.
    let stat = stat_of(&node, Dir::leaf(ctx.zxid));
    let parent_dir = t.arena.dir(parent_id).ok_or(ErrorCode::NoNode)?;
    let (old_cversion, old_pzxid) = (parent_dir.cversion, parent_dir.pzxid);
    let new_cversion = parent_cversion.wrapping_add(1);
    // The insert's own probe of the index says whether the name is taken: one probe for
    // both (nothing has changed before this point but the ACL table, which may keep a
    // list no node uses).
    if t.insert_slot(parent_id, &full_path, node).is_err() {
        return Err(ErrorCode::NodeExists);
    }
    if new_cversion > old_cversion {
        let stat = ChildStat {
            pzxid: ctx.zxid,
            cversion: new_cversion,
        };
        t.arena.set_child_stat(parent_id, stat);
    }
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
pub(super) fn delete(
    t: &mut Nodes,
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
    // The parent is found by its path and the node under it by name: one walk.
    let parent_id = t.arena.lookup(parent_path).ok_or(ErrorCode::NoNode)?;
    let parent = t.view(parent_id).ok_or(ErrorCode::NoNode)?;
    acl::check(parent.acl(), perms::DELETE, ctx.auth)?;
    let id = t
        .arena
        .child(parent_id, path::child_name(path_in).as_bytes())
        .ok_or(ErrorCode::NoNode)?;
    let node = t.view(id).ok_or(ErrorCode::NoNode)?;
    if version != -1 && version != node.version() {
        return Err(ErrorCode::BadVersion);
    }
    if node.num_children() != 0 {
        return Err(ErrorCode::NotEmpty);
    }
    remove_node_at(t, ctx.zxid, id, path_in, triggers, undo);
    Ok(())
}

/// Removes a childless node and updates its parent (DataTree.deleteNode).
fn remove_node(
    t: &mut Nodes,
    zxid: i64,
    path_in: &str,
    triggers: &mut Vec<Trigger>,
    undo: Option<&mut Vec<Undo>>,
) {
    if let Some(id) = t.arena.lookup(path_in) {
        remove_node_at(t, zxid, id, path_in, triggers, undo);
    }
}

/// [`Self::remove_node`] of the node `id`, found at `path_in` by the caller.
pub(super) fn remove_node_at(
    t: &mut Nodes,
    zxid: i64,
    id: NodeId,
    path_in: &str,
    triggers: &mut Vec<Trigger>,
    undo: Option<&mut Vec<Undo>>,
) {
    let parent_key = path::parent_of(path_in).to_string();
    let Some((node, child_stat)) = t.remove_slot(id, path_in) else {
        return;
    };
    let mut old_pzxid = 0;
    if let Some(parent) = t.arena.dir(node.parent) {
        old_pzxid = parent.pzxid;
        if zxid > parent.pzxid {
            t.arena.set_pzxid(node.parent, zxid);
        }
    }
    if let Some(undo) = undo {
        undo.push(Undo::Deleted {
            path: path_in.to_string(),
            node: Box::new(node),
            child_stat,
            parent: parent_key.clone(),
            parent_pzxid: old_pzxid,
        });
    }
    triggers.push(Trigger::Deleted(path_in.to_string()));
    triggers.push(Trigger::ChildrenChanged(parent_key));
}

/// setData: path validation → node exists → WRITE permission → version.
pub(super) fn set_data(
    t: &mut Nodes,
    ctx: &TxnContext,
    path_in: &str,
    data: Option<Bytes>,
    version: i32,
    triggers: &mut Vec<Trigger>,
    undo: Option<&mut Vec<Undo>>,
) -> Result<Stat, ErrorCode> {
    path::validate(path_in).map_err(|_| ErrorCode::BadArguments)?;
    let id = t.arena.lookup(path_in).ok_or(ErrorCode::NoNode)?;
    let node = t.view(id).ok_or(ErrorCode::NoNode)?;
    acl::check(node.acl(), perms::WRITE, ctx.auth)?;
    if version != -1 && version != node.version() {
        return Err(ErrorCode::BadVersion);
    }
    let next = node.version().wrapping_add(1);
    if let Some(undo) = undo {
        let old = t.arena.get(id).ok_or(ErrorCode::NoNode)?;
        undo.push(Undo::DataSet {
            path: path_in.to_string(),
            old: Box::new(old.clone()),
        });
    }
    put_data(
        t,
        id,
        path_in,
        data.as_deref(),
        next,
        ctx.zxid,
        ctx.time,
        triggers,
    )
}

/// Gives node `id` (at `path_in`) `data`, `version`, mzxid `zxid` and mtime `time`,
/// whoever decided them (a client's setData, a reconfig, a ZooKeeper leader's
/// transaction): its Stat after, and its data watches' trigger.
#[allow(clippy::too_many_arguments)]
pub(super) fn put_data(
    t: &mut Nodes,
    id: NodeId,
    path_in: &str,
    data: Option<&[u8]>,
    version: i32,
    zxid: i64,
    time: i64,
    triggers: &mut Vec<Trigger>,
) -> Result<Stat, ErrorCode> {
    let new_len = data.map_or(0, |d| d.len() as u64);
    let dir = t.arena.dir(id).ok_or(ErrorCode::NoNode)?;
    let node = t.arena.get_mut(id).ok_or(ErrorCode::NoNode)?;
    let old_len = node.data_len();
    node.set_data(data);
    node.version = version;
    node.mzxid = zxid;
    node.mtime = time;
    let stat = stat_of(node, dir);
    t.data_size = (t.data_size + new_len).saturating_sub(old_len);
    triggers.push(Trigger::DataChanged(path_in.to_string()));
    Ok(stat)
}

/// Replaces `/zookeeper/config`'s data as a reconfig does (no ACL check here: the
/// reconfig did its own), with `version` as the node's version; its data watches fire.
pub(super) fn replace_config(
    t: &mut Nodes,
    zxid: i64,
    time: i64,
    data: Bytes,
    version: i32,
    triggers: &mut Vec<Trigger>,
) -> Option<Stat> {
    let id = t.arena.lookup(CONFIG)?;
    put_data(t, id, CONFIG, Some(&data), version, zxid, time, triggers).ok()
}

/// setACL: path validation → ACL fixup → node exists → ADMIN permission → aversion.
/// (No watch fires and mzxid does not change, as in ZooKeeper.)
pub(super) fn set_acl(
    t: &mut Nodes,
    ctx: &TxnContext,
    path_in: &str,
    new_acl: &[Acl],
    version: i32,
    undo: Option<&mut Vec<Undo>>,
) -> Result<Stat, ErrorCode> {
    path::validate(path_in).map_err(|_| ErrorCode::BadArguments)?;
    let fixed = acl::fixup(ctx.auth, new_acl)?;
    let id = t.arena.lookup(path_in).ok_or(ErrorCode::NoNode)?;
    let node = t.view(id).ok_or(ErrorCode::NoNode)?;
    acl::check(node.acl(), perms::ADMIN, ctx.auth)?;
    if version != -1 && version != node.aversion() {
        return Err(ErrorCode::BadVersion);
    }
    let acl = t.intern_acl(fixed);
    let dir = t.arena.dir(id).ok_or(ErrorCode::NoNode)?;
    let node = t.arena.get_mut(id).ok_or(ErrorCode::NoNode)?;
    let old = node.acl();
    node.set_acl(acl);
    if let Some(undo) = undo {
        undo.push(Undo::AclSet {
            path: path_in.to_string(),
            acl: old,
            aversion: node.aversion,
        });
    }
    node.aversion = node.aversion.wrapping_add(1);
    Ok(stat_of(node, dir))
}

/// check (op 13, and inside multi): path validation → node exists → READ permission →
/// version.
pub(super) fn check(
    t: &Nodes,
    ctx: &TxnContext,
    path_in: &str,
    version: i32,
) -> Result<(), ErrorCode> {
    path::validate(path_in).map_err(|_| ErrorCode::BadArguments)?;
    let node = t.get(path_in).ok_or(ErrorCode::NoNode)?;
    acl::check(node.acl(), perms::READ, ctx.auth)?;
    if version != -1 && version != node.version() {
        return Err(ErrorCode::BadVersion);
    }
    Ok(())
}

/// Deletes every ephemeral of a session (close or expiry), in path order.
pub(super) fn kill_session(t: &mut Nodes, zxid: i64, session: i64, triggers: &mut Vec<Trigger>) {
    let paths: Vec<String> = t
        .ephemerals
        .remove(&session)
        .map(|s| s.into_iter().collect())
        .unwrap_or_default();
    for p in paths {
        // An ephemeral cannot have children, so removing it never orphans anything.
        remove_node(t, zxid, &p, triggers, None);
    }
}

/// The server's own removal of an empty container or an expired TTL node (ZooKeeper's
/// deleteContainer, op 20): re-checked at apply, so a node that gained a child or was
/// touched since the leader chose it stays.
pub(super) fn delete_container_or_ttl(
    t: &mut Nodes,
    zxid: i64,
    time: i64,
    path_in: &str,
    triggers: &mut Vec<Trigger>,
) -> Result<(), ErrorCode> {
    let node = t.get(path_in).ok_or(ErrorCode::NoNode)?;
    if node.num_children() != 0 {
        return Err(ErrorCode::NotEmpty);
    }
    match node.kind() {
        NodeKind::Container => {}
        NodeKind::Ttl(ttl) if time - node.mtime() > ttl => {}
        _ => return Err(ErrorCode::BadVersion),
    }
    remove_node(t, zxid, path_in, triggers, None);
    Ok(())
}

/// A deleteContainer (op 20) sent by a client, with ZooKeeper's checks in its order:
/// path form (BADARGUMENTS) → node exists → childless (NOTEMPTY) → not an ephemeral
/// (BADVERSION) → parent exists. No ACL is checked, as in ZooKeeper.
pub(super) fn delete_container_request(
    t: &mut Nodes,
    zxid: i64,
    path_in: &str,
    triggers: &mut Vec<Trigger>,
) -> Result<(), ErrorCode> {
    let parent = path::parent_for_create(path_in).ok_or(ErrorCode::BadArguments)?;
    if is_special_path(path_in) {
        return Err(ErrorCode::BadArguments);
    }
    let node = t.get(path_in).ok_or(ErrorCode::NoNode)?;
    if node.num_children() != 0 {
        return Err(ErrorCode::NotEmpty);
    }
    if matches!(node.kind(), NodeKind::Ephemeral(_)) {
        return Err(ErrorCode::BadVersion);
    }
    t.get(parent).ok_or(ErrorCode::NoNode)?;
    remove_node(t, zxid, path_in, triggers, None);
    Ok(())
}

/// Containers whose children have all gone (and that ever had one), and TTL nodes with
/// no children left untouched for longer than their TTL, as of wall-clock `now`.
pub(super) fn cleanup_candidates(t: &Nodes, now: i64) -> Vec<String> {
    let mut out = Vec::new();
    for p in &t.containers {
        if let Some(n) = t.get(p) {
            if n.cversion() > 0 && n.num_children() == 0 {
                out.push(p.clone());
            }
        }
    }
    for p in &t.ttls {
        if let Some(n) = t.get(p) {
            if let NodeKind::Ttl(ttl) = n.kind() {
                if n.num_children() == 0 && ttl != 0 && now - n.mtime() > ttl {
                    out.push(p.clone());
                }
            }
        }
    }
    out
}

/// Reverses a failed multi's steps, newest first.
pub(super) fn rollback(t: &mut Nodes, undo: Vec<Undo>) {
    for step in undo.into_iter().rev() {
        match step {
            Undo::Created {
                path,
                parent,
                parent_cversion,
                parent_pzxid,
            } => {
                if let Some(id) = t.arena.lookup(&path) {
                    t.remove_slot(id, &path);
                }
                if let Some(parent_id) = t.arena.lookup(&parent) {
                    let stat = ChildStat {
                        pzxid: parent_pzxid,
                        cversion: parent_cversion,
                    };
                    t.arena.set_child_stat(parent_id, stat);
                }
            }
            Undo::Deleted {
                path,
                node,
                child_stat,
                parent,
                parent_pzxid,
            } => {
                if let Some(parent_id) = t.arena.lookup(&parent) {
                    t.arena.set_pzxid(parent_id, parent_pzxid);
                    // (Its name is free again: later steps were undone first.)
                    if let Ok(id) = t.insert_slot(parent_id, &path, *node) {
                        t.arena.set_child_stat(id, child_stat);
                    }
                }
            }
            Undo::DataSet { path, old } => {
                if let Some(n) = t.get_mut(&path) {
                    let new_len = n.data_len();
                    n.restore_blob(&old);
                    n.mzxid = old.mzxid;
                    n.mtime = old.mtime;
                    n.version = old.version;
                    let old_len = n.data_len();
                    t.data_size = (t.data_size + old_len).saturating_sub(new_len);
                }
            }
            Undo::AclSet {
                path,
                acl,
                aversion,
            } => {
                if let Some(n) = t.get_mut(&path) {
                    n.set_acl(acl);
                    n.aversion = aversion;
                }
            }
        }
    }
}
