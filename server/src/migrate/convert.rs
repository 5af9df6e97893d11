//! ZooKeeper's tree (as `zkdata` reads and writes it) to zooraft's state machine and back.
//!
//! Both keep Stats the same way (`cversion` as the stored child-create counter), so every
//! field carries over unchanged; only the node kind changes representation: ZooKeeper folds
//! it into `ephemeralOwner` (a session, the container marker, or the TTL marker with the
//! TTL), zooraft keeps a `NodeKind`. Session passwords are not in ZooKeeper's files: it
//! derives them from the session id, and so does the import, so a client still holding a
//! ZooKeeper session can resume it on zooraft.

use zkdata::tree::{FastSet, OwnerKind, StatPersisted, ZkNode, ZkTree};

use crate::state::tree::{LoadError, NodeKind, NodeRecord, TreeLoader, TreeOptions};
use crate::state::{SessionInfo, StateMachine};

/// Why a ZooKeeper tree cannot become zooraft state.
#[derive(Debug, thiserror::Error)]
pub enum ConvertError {
    #[error("node {0} names an ACL the snapshot's ACL cache lacks")]
    MissingAcl(String),
    #[error("the tree's links are inconsistent: {0} nodes but {1} parent-child links")]
    Links(usize, usize),
    #[error("invalid path {0:?}")]
    BadPath(String),
}

fn kind_of(owner: i64) -> NodeKind {
    match OwnerKind::of(owner) {
        OwnerKind::None => NodeKind::Persistent,
        OwnerKind::Session(s) => NodeKind::Ephemeral(s),
        OwnerKind::Container => NodeKind::Container,
        OwnerKind::Ttl(t) => NodeKind::Ttl(t),
    }
}

fn owner_of(kind: NodeKind) -> i64 {
    match kind {
        NodeKind::Persistent => OwnerKind::None,
        NodeKind::Ephemeral(s) => OwnerKind::Session(s),
        NodeKind::Container => OwnerKind::Container,
        NodeKind::Ttl(t) => OwnerKind::Ttl(t),
    }
    .owner()
}

/// Builds zooraft's state from a restored ZooKeeper tree, consuming it (the nodes move
/// instead of being copied, which halves the peak memory of a large import).
pub fn to_state(mut zk: ZkTree, options: TreeOptions) -> Result<StateMachine, ConvertError> {
    let count = zk.nodes.len();
    let mut loader = TreeLoader::new(options, count);
    let mut acl_lists = std::collections::HashMap::new();
    let mut links = 0;
    let nodes = std::mem::take(&mut zk.nodes);
    for (path, node) in nodes {
        let acl = match acl_lists.get(&node.acl) {
            Some(&a) => a,
            None => {
                let list = zk
                    .acl_of(&node)
                    .ok_or_else(|| ConvertError::MissingAcl(path.clone()))?;
                let shared = loader.tree.intern_acl(list);
                acl_lists.insert(node.acl, shared);
                shared
            }
        };
        let s = node.stat;
        // ZooKeeper's children sets must agree with the paths, from which the tree's links
        // are built.
        links += node.children.len();
        let record = NodeRecord {
            data: node.data.as_deref(),
            acl,
            czxid: s.czxid,
            mzxid: s.mzxid,
            ctime: s.ctime,
            mtime: s.mtime,
            version: s.version,
            cversion: s.cversion,
            aversion: s.aversion,
            kind: kind_of(s.ephemeral_owner),
            pzxid: s.pzxid,
        };
        loader.node(&path, &record).map_err(|e| match e {
            LoadError::BadPath(p) => ConvertError::BadPath(p),
            _ => ConvertError::Links(count, links),
        })?;
    }
    if links + 1 != count {
        return Err(ConvertError::Links(count, links));
    }
    let tree = loader
        .finish()
        .map_err(|_| ConvertError::Links(count, links))?;
    let sessions = zk
        .sessions
        .iter()
        .map(|(id, timeout)| {
            let info = SessionInfo {
                timeout: *timeout,
                passwd: zkdata::zookeeper_session_password(*id),
            };
            (*id, info)
        })
        .collect();
    Ok(StateMachine {
        tree,
        sessions,
        last_zxid: zk.last_zxid,
    })
}

/// ZooKeeper's tree for a zooraft state (for export).
pub fn to_zookeeper(state: &StateMachine) -> ZkTree {
    let mut zk = ZkTree::new();
    state.tree.capture().walk(|path, node| {
        let acl = zk.acl_key(node.acl());
        zk.insert(
            path.to_string(),
            ZkNode {
                data: node.data_bytes(),
                acl,
                stat: StatPersisted {
                    czxid: node.czxid(),
                    mzxid: node.mzxid(),
                    ctime: node.ctime(),
                    mtime: node.mtime(),
                    version: node.version(),
                    cversion: node.cversion(),
                    aversion: node.aversion(),
                    ephemeral_owner: owner_of(node.kind()),
                    pzxid: node.pzxid(),
                },
                children: node.children().map(str::to_string).collect::<FastSet<_>>(),
            },
        );
    });
    zk.sessions = state
        .sessions
        .iter()
        .map(|(id, s)| (*id, s.timeout))
        .collect();
    zk.last_zxid = state.last_zxid;
    zk
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::snapshot::tree_digest;
    use crate::state::tree::{CreateOp, CreateRecord, TxnContext};
    use bytes::Bytes;
    use jute::Acl;

    #[test]
    fn every_kind_and_stat_survives_both_ways() {
        let options = TreeOptions {
            extended_types: true,
        };
        let mut sm = StateMachine::new(options);
        sm.sessions.insert(
            0x55,
            SessionInfo {
                timeout: 6000,
                passwd: [1; 16],
            },
        );
        let ctx = TxnContext {
            zxid: 0x3_0000_0007,
            time: 1234,
            session: 0x55,
            auth: &[],
        };
        for (p, flags, record) in [
            ("/p", 0, CreateRecord::Plain),
            ("/p/s", 2, CreateRecord::Plain),
            ("/e", 1, CreateRecord::Plain),
            ("/c", 4, CreateRecord::Container),
            ("/t", 5, CreateRecord::Ttl(9000)),
        ] {
            let op = CreateOp {
                path: p,
                data: Some(Bytes::from_static(b"v")),
                acl: &[if p == "/p" {
                    Acl::open_unsafe()
                } else {
                    Acl::read_unsafe()
                }],
                flags,
                record,
            };
            sm.tree.create(&ctx, &op, &mut Vec::new(), None).unwrap();
        }
        sm.last_zxid = 0x3_0000_0007;
        let zk = to_zookeeper(&sm);
        assert_eq!(zk.nodes["/c"].stat.ephemeral_owner, i64::MIN);
        assert_eq!(
            OwnerKind::of(zk.nodes["/t"].stat.ephemeral_owner),
            OwnerKind::Ttl(9000)
        );
        assert_eq!(zk.nodes["/e"].stat.ephemeral_owner, 0x55);
        let back = to_state(zk, options).unwrap();
        assert_eq!(tree_digest(&back.tree), tree_digest(&sm.tree));
        assert_eq!(back.last_zxid, sm.last_zxid);
        assert_eq!(back.sessions[&0x55].timeout, 6000);
        // The password is ZooKeeper's, derived from the id.
        assert_eq!(
            back.sessions[&0x55].passwd,
            zkdata::zookeeper_session_password(0x55)
        );
        assert_eq!(back.tree.containers().len(), 1);
        assert_eq!(back.tree.ttls().len(), 1);
    }
}
