//! zookeeper-client (kezhuw's client): CRUD through create2, sequential nodes,
//! getEphemerals and getAllChildrenNumber, one-shot and persistent (recursive) watches, multi
//! with rollback, multiRead, sync, resuming a session from another client object, and
//! expiry, both when another connection closes the session and after a partition.
//!
//! This client uses the newer parts of the protocol (create2, addWatch, multiRead,
//! removeWatches) that zookeeper-async does not, and reports session states
//! (`Disconnected`, `Expired`) that applications act on, so those are checked as it sees
//! them.

use std::time::Duration;

use zooraft_tests::proxy::Proxy;
use zooraft_tests::rt::{eventually_async, within};
use zooraft_tests::{ServerKind, TestServer};

use super::{run, WAIT};

mod zc {
    pub use zookeeper_client::{
        Acls, AddWatchMode, Client, CreateMode, CreateOptions, Error, EventType, MultiReadResult,
        MultiWriteError, MultiWriteResult, SessionState,
    };
}

fn zc_opts(mode: zc::CreateMode) -> zc::CreateOptions<'static> {
    mode.with_acls(zc::Acls::anyone_all())
}

/// Waits (at most [`WAIT`]) until none of `paths` exists, as `observer` sees it.
async fn zc_until_gone(what: &str, observer: &zc::Client, paths: &[&str]) {
    eventually_async(what, WAIT, || async {
        for path in paths {
            if observer.check_stat(path).await.expect("exists").is_some() {
                return None;
            }
        }
        Some(())
    })
    .await
}

async fn zc_connect(connect: &str) -> zc::Client {
    zooraft_tests::zc::connect(connect, Duration::from_secs(10), WAIT).await
}

fn zc_crud(kind: ServerKind) {
    run(TestServer::start(kind), |server| async move {
        let zk = zc_connect(&server.connect_string()).await;
        let persistent = zc_opts(zc::CreateMode::Persistent);
        let (st, seq) = zk.create("/zc", b"v0", &persistent).await.expect("create2");
        assert_eq!(seq.into_i64(), -1, "not sequential");
        assert_eq!(
            (st.version, st.cversion, st.data_length, st.num_children),
            (0, 0, 2, 0)
        );
        assert_eq!(st.czxid, st.mzxid);
        assert_eq!(st.pzxid, st.czxid);
        assert_eq!(zk.check_stat("/zc").await.expect("exists"), Some(st));
        let (data, st_get) = zk.get_data("/zc").await.expect("get");
        assert_eq!(data, b"v0");
        assert_eq!(st_get, st);

        let st1 = zk.set_data("/zc", b"v1", Some(0)).await.expect("set");
        assert_eq!(st1.version, 1);
        assert!(st1.mzxid > st.mzxid);
        assert!(matches!(
            zk.set_data("/zc", b"", Some(0)).await,
            Err(zc::Error::BadVersion)
        ));
        assert!(matches!(
            zk.create("/zc", b"", &persistent).await,
            Err(zc::Error::NodeExists)
        ));
        assert!(matches!(
            zk.get_data("/zc-none").await,
            Err(zc::Error::NoNode)
        ));
        assert_eq!(zk.check_stat("/zc-none").await.expect("exists"), None);

        for c in ["x", "y"] {
            zk.create(&format!("/zc/{c}"), c.as_bytes(), &persistent)
                .await
                .expect("child");
        }
        let ephemeral = zc_opts(zc::CreateMode::Ephemeral);
        zk.create("/zc/eph", b"", &ephemeral)
            .await
            .expect("ephemeral");
        let (mut kids, pst) = zk.get_children("/zc").await.expect("getChildren2");
        kids.sort();
        assert_eq!(kids, ["eph", "x", "y"]);
        assert_eq!((pst.num_children, pst.cversion), (3, 3));
        assert_eq!(Some(pst), zk.check_stat("/zc").await.expect("exists"));
        assert_eq!(
            zk.count_descendants_number("/zc")
                .await
                .expect("getAllChildrenNumber"),
            3
        );
        let root_count = zk.count_descendants_number("/").await.expect("root count");
        // Every descendant of /: /zookeeper, /zookeeper/config, /zookeeper/quota and our four.
        assert_eq!(root_count, 7);
        assert_eq!(
            zk.list_ephemerals("/").await.expect("getEphemerals"),
            ["/zc/eph"]
        );
        assert!(matches!(
            zk.delete("/zc", None).await,
            Err(zc::Error::NotEmpty)
        ));
        assert!(matches!(
            zk.delete("/zc/x", Some(4)).await,
            Err(zc::Error::BadVersion)
        ));
        zk.delete("/zc/x", Some(0)).await.expect("delete");
        let mut kids = zk.list_children("/zc").await.expect("getChildren");
        kids.sort();
        assert_eq!(kids, ["eph", "y"]);
        zk.mkdir("/zc/a/b/c", &persistent).await.expect("mkdir");
        assert!(zk.check_stat("/zc/a/b/c").await.expect("exists").is_some());
    });
}
zooraft_tests::against_both!(
    zookeeper_client_crud_apache,
    zookeeper_client_crud_zooraft,
    zc_crud
);

fn zc_ephemeral_sequential(kind: ServerKind) {
    run(TestServer::start(kind), |server| async move {
        let a = zc_connect(&server.connect_string()).await;
        let b = zc_connect(&server.connect_string()).await;
        a.create("/q", b"", &zc_opts(zc::CreateMode::Persistent))
            .await
            .expect("parent");
        let eseq = zc_opts(zc::CreateMode::EphemeralSequential);
        let (st0, s0) = a.create("/q/n-", b"", &eseq).await.expect("eseq");
        let (_, s1) = b.create("/q/n-", b"", &eseq).await.expect("eseq");
        let (_, s2) = a
            .create("/q/n-", b"", &zc_opts(zc::CreateMode::PersistentSequential))
            .await
            .expect("pseq");
        assert_eq!((s0.into_i64(), s1.into_i64(), s2.into_i64()), (0, 1, 2));
        assert_eq!(s1.to_string(), "0000000001");
        assert_eq!(st0.ephemeral_owner, a.session_id().0);
        assert_ne!(a.session_id(), b.session_id());
        let b_id = b.session_id();
        let owner1 = a
            .check_stat("/q/n-0000000001")
            .await
            .expect("exists")
            .expect("b's node")
            .ephemeral_owner;
        assert_eq!(owner1, b_id.0);

        // Dropping b (its last handle) closes its session: its ephemeral goes.
        drop(b);
        zc_until_gone(
            "b's ephemeral to go after b closed",
            &a,
            &["/q/n-0000000001"],
        )
        .await;
        let mut left = a.list_children("/q").await.expect("children");
        left.sort();
        assert_eq!(left, ["n-0000000000", "n-0000000002"]);
    });
}
zooraft_tests::against_both!(
    zookeeper_client_ephemeral_sequential_apache,
    zookeeper_client_ephemeral_sequential_zooraft,
    zc_ephemeral_sequential
);

fn zc_watches(kind: ServerKind) {
    run(TestServer::start(kind), |server| async move {
        let zk = zc_connect(&server.connect_string()).await;
        let writer = zc_connect(&server.connect_string()).await;
        let persistent = zc_opts(zc::CreateMode::Persistent);
        zk.create("/w", b"0", &persistent).await.expect("create");

        let (_, _, w) = zk.get_and_watch_data("/w").await.expect("watch data");
        writer.set_data("/w", b"1", None).await.expect("set");
        let ev = within("data watch", WAIT, w.changed()).await;
        assert_eq!(
            (ev.event_type, ev.path.as_str()),
            (zc::EventType::NodeDataChanged, "/w")
        );

        let (stat, w) = zk
            .check_and_watch_stat("/w/new")
            .await
            .expect("exists watch");
        assert!(stat.is_none());
        writer
            .create("/w/new", b"", &persistent)
            .await
            .expect("create");
        let ev = within("exists watch", WAIT, w.changed()).await;
        assert_eq!(
            (ev.event_type, ev.path.as_str()),
            (zc::EventType::NodeCreated, "/w/new")
        );

        let (_, w) = zk.list_and_watch_children("/w").await.expect("child watch");
        writer.delete("/w/new", None).await.expect("delete");
        let ev = within("child watch", WAIT, w.changed()).await;
        assert_eq!(
            (ev.event_type, ev.path.as_str()),
            (zc::EventType::NodeChildrenChanged, "/w")
        );

        // Persistent recursive watch: every change below, repeatedly, without re-arming.
        let mut rec = zk
            .watch("/w", zc::AddWatchMode::PersistentRecursive)
            .await
            .expect("addWatch recursive");
        writer
            .create("/w/a", b"", &persistent)
            .await
            .expect("create");
        writer
            .create("/w/a/b", b"", &persistent)
            .await
            .expect("create");
        writer.set_data("/w/a/b", b"x", None).await.expect("set");
        writer.delete("/w/a/b", None).await.expect("delete");
        writer.set_data("/w", b"2", None).await.expect("set");
        let mut got = Vec::new();
        for _ in 0..5 {
            let ev = within("recursive watch event", WAIT, rec.changed()).await;
            got.push((ev.event_type, ev.path));
        }
        use zc::EventType::{NodeChildrenChanged, NodeCreated, NodeDataChanged, NodeDeleted};
        assert_eq!(
            got,
            [
                (NodeCreated, "/w/a".to_string()),
                (NodeCreated, "/w/a/b".to_string()),
                (NodeDataChanged, "/w/a/b".to_string()),
                (NodeDeleted, "/w/a/b".to_string()),
                (NodeDataChanged, "/w".to_string()),
            ],
            "recursive watches carry no child events, only node events below"
        );

        // Persistent (non-recursive) watch: data and child events on the node itself.
        let mut pw = zk
            .watch("/w/a", zc::AddWatchMode::Persistent)
            .await
            .expect("addWatch persistent");
        writer.set_data("/w/a", b"1", None).await.expect("set");
        writer
            .create("/w/a/c", b"", &persistent)
            .await
            .expect("create");
        writer.set_data("/w/a", b"2", None).await.expect("set");
        let mut got = Vec::new();
        for _ in 0..3 {
            let ev = within("persistent watch event", WAIT, pw.changed()).await;
            got.push((ev.event_type, ev.path));
        }
        assert_eq!(
            got,
            [
                (NodeDataChanged, "/w/a".to_string()),
                (NodeChildrenChanged, "/w/a".to_string()),
                (NodeDataChanged, "/w/a".to_string()),
            ]
        );
        // remove() (deprecated in favour of Drop) awaits the server's removeWatches answer.
        #[allow(deprecated)]
        let removal = pw.remove();
        within("removing the persistent watch", WAIT, removal)
            .await
            .expect("removeWatches");
    });
}
zooraft_tests::against_both!(
    zookeeper_client_watches_apache,
    zookeeper_client_watches_zooraft,
    zc_watches
);

fn zc_multi_and_sync(kind: ServerKind) {
    run(TestServer::start(kind), |server| async move {
        let zk = zc_connect(&server.connect_string()).await;
        let other = zc_connect(&server.connect_string()).await;
        let persistent = zc_opts(zc::CreateMode::Persistent);
        zk.create("/m", b"", &persistent).await.expect("create");

        let mut multi = zk.new_multi_writer();
        multi.add_create("/m/a", b"1", &persistent).expect("op");
        multi.add_check_version("/m", 0).expect("op");
        multi.add_set_data("/m/a", b"2", Some(0)).expect("op");
        multi
            .add_create("/m/s-", b"", &zc_opts(zc::CreateMode::PersistentSequential))
            .expect("op");
        multi.add_delete("/m/s-0000000001", None).expect("op");
        let results = within("multi", WAIT, multi.commit())
            .await
            .expect("multi commits");
        assert_eq!(results.len(), 5);
        match &results[0] {
            // zookeeper-client sends op 1 (create) inside a multi, whose result has no stat.
            zc::MultiWriteResult::Create { path, .. } => assert_eq!(path, "/m/a"),
            other => panic!("create result expected, got {other:?}"),
        }
        assert!(matches!(results[1], zc::MultiWriteResult::Check));
        let set_stat = match &results[2] {
            zc::MultiWriteResult::SetData { stat } => *stat,
            other => panic!("setData result expected, got {other:?}"),
        };
        assert_eq!(set_stat.version, 1);
        assert_eq!(
            set_stat.mzxid, set_stat.czxid,
            "created and modified by the same multi: one zxid for all its ops"
        );
        match &results[3] {
            zc::MultiWriteResult::Create { path, .. } => assert_eq!(path, "/m/s-0000000001"),
            other => panic!("create result expected, got {other:?}"),
        }
        assert!(matches!(results[4], zc::MultiWriteResult::Delete));
        assert_eq!(zk.get_data("/m/a").await.expect("get").0, b"2");

        // A failing op rolls the whole multi back and names its index.
        let mut multi = zk.new_multi_writer();
        multi.add_create("/m/b", b"", &persistent).expect("op");
        multi.add_set_data("/m/a", b"3", Some(0)).expect("op");
        multi.add_delete("/m/a", None).expect("op");
        match within("failing multi", WAIT, multi.commit()).await {
            Err(zc::MultiWriteError::OperationFailed { index, source }) => {
                assert_eq!(index, 1);
                assert!(matches!(source, zc::Error::BadVersion), "{source:?}");
            }
            other => panic!("expected OperationFailed, got {other:?}"),
        }
        assert_eq!(zk.check_stat("/m/b").await.expect("exists"), None);
        assert_eq!(zk.get_data("/m/a").await.expect("get").0, b"2");

        // multiRead: per-op results, errors inline.
        let mut reader = zk.new_multi_reader();
        reader.add_get_data("/m/a").expect("op");
        reader.add_get_children("/m").expect("op");
        reader.add_get_data("/m/none").expect("op");
        let read = within("multiRead", WAIT, reader.commit())
            .await
            .expect("multiRead");
        assert_eq!(read.len(), 3);
        assert!(matches!(&read[0], zc::MultiReadResult::Data { data, .. } if data == b"2"));
        assert!(
            matches!(&read[1], zc::MultiReadResult::Children { children } if children == &["a"])
        );
        assert!(matches!(
            &read[2],
            zc::MultiReadResult::Error {
                err: zc::Error::NoNode
            }
        ));

        // sync, then read another session's latest write.
        for i in 0..20u32 {
            zk.set_data("/m/a", &i.to_be_bytes(), None)
                .await
                .expect("set");
            other.sync("/m/a").await.expect("sync");
            assert_eq!(
                other.get_data("/m/a").await.expect("get").0,
                i.to_be_bytes()
            );
        }
    });
}
zooraft_tests::against_both!(
    zookeeper_client_multi_and_sync_apache,
    zookeeper_client_multi_and_sync_zooraft,
    zc_multi_and_sync
);

fn zc_session_resume(kind: ServerKind) {
    run(TestServer::start(kind), |server| async move {
        let observer = zc_connect(&server.connect_string()).await;
        // A detached client leaves its session open when dropped.
        let a = within(
            "detached connect",
            WAIT,
            zc::Client::connector()
                .with_session_timeout(Duration::from_secs(10))
                .with_detached()
                .connect(&server.connect_string()),
        )
        .await
        .expect("connect");
        a.create("/r", b"", &zc_opts(zc::CreateMode::Ephemeral))
            .await
            .expect("ephemeral");
        let session = a.session().clone();
        let id = a.session_id();
        drop(a);
        // Still there: the session outlives its first client object.
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(observer.check_stat("/r").await.expect("exists").is_some());

        let b = within(
            "resume by id and password",
            WAIT,
            zc::Client::connector()
                .with_session_timeout(Duration::from_secs(10))
                .with_session(session)
                .connect(&server.connect_string()),
        )
        .await
        .expect("resume");
        assert_eq!(b.session_id(), id, "same session after resume");
        assert_eq!(
            b.check_stat("/r")
                .await
                .expect("exists")
                .expect("ephemeral")
                .ephemeral_owner,
            id.0
        );
        b.create("/r2", b"", &zc_opts(zc::CreateMode::Ephemeral))
            .await
            .expect("second ephemeral");
        drop(b); // closes the session
        zc_until_gone(
            "the resumed session's ephemerals to go",
            &observer,
            &["/r", "/r2"],
        )
        .await;
    });
}
zooraft_tests::against_both!(
    zookeeper_client_session_resume_apache,
    zookeeper_client_session_resume_zooraft,
    zc_session_resume
);

fn zc_session_expiry(kind: ServerKind) {
    run(TestServer::start(kind), |server| async move {
        let proxy = Proxy::start(server.addr());
        let observer = zc_connect(&server.connect_string()).await;
        let a = zc_connect(&proxy.connect_string()).await;
        a.create("/x", b"", &zc_opts(zc::CreateMode::Ephemeral))
            .await
            .expect("ephemeral");
        let mut states = a.state_watcher();
        assert_eq!(states.state(), zc::SessionState::SyncConnected);

        // Cut a off (well within its 10 s session timeout) so it cannot take its session back,
        // then another connection resumes the session with its id and password and closes it.
        proxy.partition(true);
        let b = within(
            "second connection on the same session",
            WAIT,
            zc::Client::connector()
                .with_session_timeout(Duration::from_secs(10))
                .with_session(a.session().clone())
                .connect(&server.connect_string()),
        )
        .await
        .expect("take over the session");
        assert_eq!(b.session_id(), a.session_id());
        drop(b);
        zc_until_gone("the closed session's ephemeral to go", &observer, &["/x"]).await;
        proxy.partition(false);

        // a reconnects with the closed session's id and learns it is gone.
        let last = within("the first client to see Expired", WAIT, async {
            loop {
                let s = states.changed().await;
                if s.is_terminated() {
                    return s;
                }
            }
        })
        .await;
        assert_eq!(last, zc::SessionState::Expired);
        assert!(matches!(
            a.get_data("/").await,
            Err(zc::Error::SessionExpired)
        ));
    });
}
zooraft_tests::against_both!(
    zookeeper_client_session_expiry_apache,
    zookeeper_client_session_expiry_zooraft,
    zc_session_expiry
);

fn zc_expiry_after_partition(kind: ServerKind) {
    let server = TestServer::builder(kind).tick_time_ms(200).start();
    run(server, |server| async move {
        let proxy = Proxy::start(server.addr());
        let observer = zc_connect(&server.connect_string()).await;
        let a = within(
            "connect through the proxy",
            WAIT,
            zc::Client::connector()
                .with_session_timeout(Duration::from_secs(2))
                .connect(&proxy.connect_string()),
        )
        .await
        .expect("connect");
        let mut states = a.state_watcher();
        a.create("/px", b"", &zc_opts(zc::CreateMode::Ephemeral))
            .await
            .expect("ephemeral");
        proxy.partition(true);
        zc_until_gone(
            "the server to expire the partitioned session",
            &observer,
            &["/px"],
        )
        .await;
        proxy.partition(false);
        let seen = within("the client to see Expired", WAIT, async {
            let mut seen = Vec::new();
            loop {
                let s = states.changed().await;
                seen.push(s);
                if s.is_terminated() {
                    return seen;
                }
            }
        })
        .await;
        assert_eq!(seen.last(), Some(&zc::SessionState::Expired), "{seen:?}");
        assert!(seen.contains(&zc::SessionState::Disconnected), "{seen:?}");
    });
}
zooraft_tests::against_both!(
    zookeeper_client_expiry_after_partition_apache,
    zookeeper_client_expiry_after_partition_zooraft,
    zc_expiry_after_partition
);
