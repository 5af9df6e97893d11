use super::*;
use jute::Acl;

fn base() -> ZkTree {
    fresh()
}

fn header(kind: i32, zxid: i64) -> TxnHeader {
    TxnHeader {
        client_id: 7,
        cxid: 1,
        zxid,
        time: 1000 + zxid,
        kind,
    }
}

fn create(path: &str, parent_cversion: i32, ephemeral: bool) -> Txn {
    Txn::Create {
        path: path.into(),
        data: Some(Bytes::from_static(b"d")),
        acl: vec![Acl::open_unsafe()],
        ephemeral,
        parent_cversion,
    }
}

#[test]
fn replay_over_a_fuzzy_snapshot_is_idempotent_where_zookeeper_is() {
    let mut t = base();
    assert_eq!(
        t.process(&header(op::CREATE, 1), &create("/a", 1, false)),
        None
    );
    let snapshot_like = t.clone();
    // Replaying the same create over a tree that already has it: NODEEXISTS, but the
    // parent keeps (not lowers) its cversion and pzxid.
    assert_eq!(
        t.process(&header(op::CREATE, 1), &create("/a", 1, false)),
        Some(ReplayError::NodeExists)
    );
    assert_eq!(t.nodes, snapshot_like.nodes);
    // A delete of a child already gone still raises the parent's pzxid.
    assert_eq!(
        t.process(
            &header(op::DELETE, 5),
            &Txn::Delete {
                path: "/a/x".into()
            }
        ),
        Some(ReplayError::NoNode)
    );
    assert_eq!(t.nodes["/a"].stat.pzxid, 5);
    // Sequential numbering comes from the stored cversion (child creates).
    t.process(&header(op::CREATE, 6), &create("/a/s0000000000", 1, false));
    t.process(
        &header(op::DELETE, 7),
        &Txn::Delete {
            path: "/a/s0000000000".into(),
        },
    );
    assert_eq!(t.nodes["/a"].stat.cversion, 1);
    assert_eq!(t.nodes["/a"].stat.pzxid, 7);
    assert_eq!(t.last_zxid, 7);
}

#[test]
fn sessions_ephemerals_multi_and_kinds() {
    let mut t = base();
    t.process(
        &header(op::CREATE_SESSION, 1),
        &Txn::CreateSession { timeout: 5000 },
    );
    t.process(&header(op::CREATE, 2), &create("/e", 1, true));
    assert_eq!(t.ephemerals_of(7), vec!["/e".to_string()]);
    assert_eq!(t.sessions[&7], 5000);
    // A failed multi changes nothing; a good one applies every op with one zxid.
    let failed = Txn::Multi(vec![
        (op::ERROR, Txn::Error { err: 0 }),
        (op::ERROR, Txn::Error { err: -101 }),
    ]);
    let before = t.digest();
    t.process(&header(op::MULTI, 3), &failed);
    assert_eq!(t.digest(), before);
    let good = Txn::Multi(vec![
        (op::CREATE, create("/m", 2, false)),
        (
            op::SET_DATA,
            Txn::SetData {
                path: "/m".into(),
                data: None,
                version: 1,
            },
        ),
        (
            op::CHECK,
            Txn::Check {
                path: "/m".into(),
                version: 1,
            },
        ),
    ]);
    t.process(&header(op::MULTI, 4), &good);
    assert_eq!(t.nodes["/m"].stat.version, 1);
    assert_eq!(t.nodes["/m"].stat.mzxid, 4);
    t.process(
        &header(op::CREATE_CONTAINER, 5),
        &Txn::CreateContainer {
            path: "/c".into(),
            data: None,
            acl: vec![],
            parent_cversion: 3,
        },
    );
    t.process(
        &header(op::CREATE_TTL, 6),
        &Txn::CreateTtl {
            path: "/t".into(),
            data: None,
            acl: vec![],
            parent_cversion: 4,
            ttl: 900,
        },
    );
    assert_eq!(
        OwnerKind::of(t.nodes["/c"].stat.ephemeral_owner),
        OwnerKind::Container
    );
    assert_eq!(
        OwnerKind::of(t.nodes["/t"].stat.ephemeral_owner),
        OwnerKind::Ttl(900)
    );
    t.process(
        &header(op::SET_ACL, 7),
        &Txn::SetAcl {
            path: "/m".into(),
            acl: vec![Acl::read_unsafe()],
            version: 1,
        },
    );
    assert_eq!(t.acl_of(&t.nodes["/m"]).unwrap(), vec![Acl::read_unsafe()]);
    assert_eq!(t.nodes["/m"].stat.aversion, 1);
    assert_eq!(t.nodes["/m"].stat.mzxid, 4, "setACL leaves mzxid");
    // Closing the session deletes its ephemerals, raising the parent's pzxid.
    t.process(
        &header(op::CLOSE_SESSION, 8),
        &Txn::CloseSession {
            paths: Some(vec!["/e".into()]),
        },
    );
    assert!(!t.nodes.contains_key("/e"));
    assert!(t.sessions.is_empty());
    assert_eq!(t.nodes["/"].stat.pzxid, 8);
}

#[test]
fn digest_is_maintained_incrementally_and_skips_system_nodes() {
    let mut t = base();
    t.process(&header(op::CREATE, 1), &create("/a", 1, false));
    t.process(
        &header(op::SET_DATA, 2),
        &Txn::SetData {
            path: "/a".into(),
            data: None,
            version: 1,
        },
    );
    t.process(&header(op::CREATE, 3), &create("/a/b", 1, false));
    t.process(
        &header(op::DELETE, 4),
        &Txn::Delete {
            path: "/a/b".into(),
        },
    );
    let full = t
        .nodes
        .iter()
        .fold(0u64, |acc, (p, n)| acc.wrapping_add(node_digest(p, n)));
    assert_eq!(t.digest(), full as i64);
    let n = t.nodes["/a"].clone();
    assert_eq!(node_digest("/zookeeper/quota", &n), 0);
    assert_ne!(node_digest("/zookeeper", &n), 0);
    assert_eq!(node_digest("/", &n), node_digest("", &n));
}

#[test]
fn orphaned_ephemerals_go_at_load() {
    let mut t = base();
    t.process(&header(op::CREATE, 1), &create("/e", 1, true));
    t.last_zxid = 9;
    assert_eq!(t.remove_orphaned_ephemerals(), vec![7]);
    assert!(!t.nodes.contains_key("/e"));
    assert_eq!(t.nodes["/"].stat.pzxid, 9);
}

#[test]
fn quota_stats_are_recomputed_as_zookeeper_does_at_load() {
    let mut t = base();
    t.process(
        &header(op::CREATE, 1),
        &create("/zookeeper/quota", 1, false),
    );
    t.process(&header(op::CREATE, 2), &create("/app", 2, false));
    t.process(&header(op::CREATE, 3), &create("/app/x", 1, false));
    t.process(
        &header(op::CREATE, 4),
        &create("/zookeeper/quota/app", 1, false),
    );
    for (z, name, data) in [
        (5, "zookeeper_limits", "count=10,bytes=-1"),
        (6, "zookeeper_stats", "count=0,bytes=0,zcustom=1"),
    ] {
        let txn = Txn::Create {
            path: format!("/zookeeper/quota/app/{name}"),
            data: Some(Bytes::from(data)),
            acl: vec![],
            ephemeral: false,
            parent_cversion: -1,
        };
        t.process(&header(op::CREATE, z), &txn);
    }
    let digest = t.digest();
    t.recompute_quota_stats();
    // /app and /app/x, one byte of data each.
    assert_eq!(
        t.nodes["/zookeeper/quota/app/zookeeper_stats"]
            .data
            .as_deref(),
        Some(&b"count=2,bytes=2,zcustom=1"[..])
    );
    assert_eq!(t.digest(), digest, "system nodes are not in the digest");
}
