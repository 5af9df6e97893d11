use super::*;
use crate::tree::{StatPersisted, ZkNode, OPEN_UNSAFE_ACL_ID};
use crate::txn::{op, LoggedTxn, Txn, TxnDigest, TxnHeader};
use jute::Acl;

fn base() -> ZkTree {
    crate::tree::fresh()
}

/// A snapshot at zxid 0 and `n` logged creates (zxids 1..=n) with their digests, as
/// ZooKeeper writes them; returns the tree ZooKeeper would hold.
fn data_dir(dir: &Path, n: i64) -> ZkTree {
    let v = dir.join("version-2");
    std::fs::create_dir_all(&v).unwrap();
    let mut t = base();
    std::fs::write(v.join("snapshot.0"), snapshot::write(&t)).unwrap();
    let mut txns = Vec::new();
    for z in 1..=n {
        let header = TxnHeader {
            client_id: 1,
            cxid: z as i32,
            zxid: z,
            time: z * 10,
            kind: op::CREATE,
        };
        let txn = Txn::Create {
            path: format!("/n{z}"),
            data: None,
            acl: vec![Acl::open_unsafe()],
            ephemeral: false,
            parent_cversion: z as i32,
        };
        t.process(&header, &txn);
        txns.push(LoggedTxn {
            header,
            txn,
            digest: Some(TxnDigest {
                version: 2,
                tree_digest: t.digest(),
            }),
        });
    }
    std::fs::write(v.join("log.1"), log::write(0, &txns)).unwrap();
    t
}

#[test]
fn restores_snapshot_plus_log_with_digests() {
    let dir = tempfile::tempdir().unwrap();
    let expected = data_dir(dir.path(), 5);
    let r = restore(dir.path(), dir.path(), &mut |_| {}).unwrap();
    assert_eq!(r.tree.nodes, expected.nodes);
    assert_eq!(r.tree.last_zxid, 5);
    assert_eq!(r.txns, 5);
    assert!(matches!(r.digest, DigestCheck::Verified(n) if n >= 5));
}

#[test]
fn torn_tail_is_the_end_and_a_bad_crc_an_error() {
    let dir = tempfile::tempdir().unwrap();
    data_dir(dir.path(), 5);
    let log = dir.path().join("version-2/log.1");
    let whole = std::fs::read(&log).unwrap();
    std::fs::write(&log, &whole[..whole.len() - 3]).unwrap();
    let r = restore(dir.path(), dir.path(), &mut |_| {}).unwrap();
    assert_eq!(r.tree.last_zxid, 4);
    assert!(r.torn.is_some());
    let mut bad = whole.clone();
    bad[16 + 30] ^= 0xff;
    std::fs::write(&log, &bad).unwrap();
    let e = restore(dir.path(), dir.path(), &mut |_| {})
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("log.1") && e.contains("checksum") && e.contains("offset 16"),
        "{e}"
    );
}

#[test]
fn a_gap_in_the_logs_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    data_dir(dir.path(), 3);
    let header = TxnHeader {
        client_id: 1,
        cxid: 1,
        zxid: 7,
        time: 70,
        kind: op::CREATE_SESSION,
    };
    let later = LoggedTxn {
        header,
        txn: Txn::CreateSession { timeout: 3000 },
        digest: None,
    };
    std::fs::write(dir.path().join("version-2/log.7"), log::write(0, &[later])).unwrap();
    let e = restore(dir.path(), dir.path(), &mut |_| {})
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("gap") && e.contains("0x3") && e.contains("0x7"),
        "{e}"
    );
}

#[test]
fn incomplete_snapshots_are_skipped_and_damaged_ones_refused() {
    let dir = tempfile::tempdir().unwrap();
    let expected = data_dir(dir.path(), 4);
    let v = dir.path().join("version-2");
    // A newer snapshot cut short by a crash: skipped, the older one and the log used.
    let mut newer = base();
    newer.last_zxid = 2;
    let bytes = snapshot::write(&newer);
    std::fs::write(v.join("snapshot.2"), &bytes[..bytes.len() / 2]).unwrap();
    let r = restore(dir.path(), dir.path(), &mut |_| {}).unwrap();
    assert_eq!(r.skipped.len(), 1);
    assert_eq!(r.tree.nodes, expected.nodes);
    // The same, gzipped and cut short (ZooKeeper killed while writing `snapshot.N.gz`): the
    // stream breaks off, skipped the same way.
    std::fs::remove_file(v.join("snapshot.2")).unwrap();
    let gz = crate::stream::compress(crate::stream::Compression::Gzip, &bytes);
    std::fs::write(v.join("snapshot.2.gz"), &gz[..gz.len() / 2]).unwrap();
    let r = restore(dir.path(), dir.path(), &mut |_| {}).unwrap();
    assert_eq!(r.skipped.len(), 1);
    assert_eq!(r.tree.nodes, expected.nodes);
    std::fs::remove_file(v.join("snapshot.2.gz")).unwrap();
    // A complete-looking snapshot with a flipped byte: an error naming it.
    let mut flipped = bytes.clone();
    flipped[20] ^= 1;
    std::fs::write(v.join("snapshot.2"), &flipped).unwrap();
    let e = restore(dir.path(), dir.path(), &mut |_| {})
        .unwrap_err()
        .to_string();
    assert!(e.contains("snapshot.2"), "{e}");
    // Only an incomplete snapshot: no usable snapshot.
    std::fs::remove_file(v.join("snapshot.0")).unwrap();
    std::fs::write(v.join("snapshot.2"), &bytes[..bytes.len() / 2]).unwrap();
    let e = restore(dir.path(), dir.path(), &mut |_| {})
        .unwrap_err()
        .to_string();
    assert!(e.contains("no usable snapshot"), "{e}");
}

#[test]
fn a_replay_that_disagrees_with_the_digests_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    data_dir(dir.path(), 3);
    let v = dir.path().join("version-2");
    // Rewrite the log with a digest that cannot match after the second create.
    let mut txns = Vec::new();
    log::read(&std::fs::read(v.join("log.1")).unwrap(), |_, t| {
        txns.push(t);
        Ok::<(), LogError>(())
    })
    .unwrap();
    if let Some(d) = txns[1].digest.as_mut() {
        d.tree_digest ^= 1;
    }
    std::fs::write(v.join("log.1"), log::write(0, &txns)).unwrap();
    let e = restore(dir.path(), dir.path(), &mut |_| {})
        .unwrap_err()
        .to_string();
    assert!(e.contains("digest mismatch after zxid 0x2"), "{e}");
}

#[test]
fn export_round_trips_and_refuses_a_used_directory() {
    let src = tempfile::tempdir().unwrap();
    let tree = data_dir(src.path(), 3);
    for c in [Compression::None, Compression::Gzip, Compression::Snappy] {
        let out = tempfile::tempdir().unwrap();
        let path = write_datadir(&tree, out.path(), c).unwrap();
        assert!(path
            .to_string_lossy()
            .ends_with(&format!("snapshot.3{}", c.suffix())));
        let back = restore(out.path(), out.path(), &mut |_| {}).unwrap();
        assert_eq!(back.tree.nodes, tree.nodes);
        assert_eq!(back.digest, DigestCheck::Verified(1));
        assert_eq!(
            std::fs::read_to_string(out.path().join("version-2/currentEpoch")).unwrap(),
            "0"
        );
        assert!(write_datadir(&tree, out.path(), c).is_err());
    }
}

#[test]
fn a_logged_reconfig_and_a_close_session_replay() {
    let dir = tempfile::tempdir().unwrap();
    let v = dir.path().join("version-2");
    std::fs::create_dir_all(&v).unwrap();
    let mut t = base();
    let config = ZkNode {
        data: Some(Bytes::new()),
        acl: OPEN_UNSAFE_ACL_ID,
        stat: StatPersisted {
            aversion: -1,
            ..Default::default()
        },
        children: Default::default(),
    };
    t.insert("/zookeeper/config".into(), config);
    t.link_children().unwrap();
    std::fs::write(v.join("snapshot.0"), snapshot::write(&t)).unwrap();
    let h = |zxid, kind, client_id| TxnHeader {
        client_id,
        cxid: 1,
        zxid,
        time: 500 + zxid,
        kind,
    };
    let members = "server.1=127.0.0.1:2888:3888:participant;0.0.0.0:2181\nversion=100000002";
    let txns = vec![
        LoggedTxn {
            header: h(1, op::CREATE_SESSION, 0x77),
            txn: Txn::CreateSession { timeout: 9000 },
            digest: None,
        },
        LoggedTxn {
            header: h(2, op::RECONFIG, 0x77),
            txn: Txn::SetData {
                path: "/zookeeper/config".into(),
                data: Some(Bytes::from(members)),
                version: -1,
            },
            digest: None,
        },
        LoggedTxn {
            header: h(3, op::CREATE, 0x77),
            txn: Txn::Create {
                path: "/e".into(),
                data: None,
                acl: vec![Acl::open_unsafe()],
                ephemeral: true,
                parent_cversion: 2,
            },
            digest: None,
        },
        LoggedTxn {
            header: h(4, op::CLOSE_SESSION, 0x77),
            txn: Txn::CloseSession {
                paths: Some(vec!["/e".into()]),
            },
            digest: None,
        },
        LoggedTxn {
            header: h(5, op::CREATE_SESSION, 0x78),
            txn: Txn::CreateSession { timeout: 4000 },
            digest: None,
        },
    ];
    std::fs::write(v.join("log.1"), log::write(0, &txns)).unwrap();
    let r = restore(dir.path(), dir.path(), &mut |_| {}).unwrap();
    let cfg = &r.tree.nodes["/zookeeper/config"];
    assert_eq!(cfg.data.as_deref(), Some(members.as_bytes()));
    assert_eq!((cfg.stat.mzxid, cfg.stat.version), (2, -1));
    assert!(!r.tree.nodes.contains_key("/e"));
    assert_eq!(r.tree.nodes["/"].stat.pzxid, 4);
    assert_eq!(
        r.tree.sessions.iter().collect::<Vec<_>>(),
        vec![(&0x78, &4000)]
    );
    assert_eq!(r.tree.last_zxid, 5);
    assert_eq!(r.digest, DigestCheck::NotAvailable);
}
