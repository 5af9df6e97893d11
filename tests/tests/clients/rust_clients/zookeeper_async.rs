//! zookeeper-async, the client the `recipes` crate builds on: CRUD with `Stat` checks and
//! error codes, `ZooKeeperExt` helpers, ephemeral and sequential nodes, one-shot data, child
//! and exists watches, ephemerals removed on close, and session expiry after a partition.
//!
//! The recipes (locks, leader latches) are only as right as this client's view of the
//! server: a `Stat` field it misreads, an event it does not deliver, or a session it never
//! learns has expired would break them without a recipe test noticing why.

use std::time::Duration;

use tokio::sync::mpsc;
use zooraft_tests::proxy::Proxy;
use zooraft_tests::rt::{eventually_async, within};
use zooraft_tests::{ServerKind, TestServer};

use super::{run, WAIT};

mod za {
    pub use zookeeper_async::{
        Acl, CreateMode, Stat, WatchedEvent, WatchedEventType, ZkError, ZkState, ZooKeeper,
    };
}
use zookeeper_async::ZooKeeperExt as _;

/// zookeeper-async's `Stat` has no `PartialEq`: compare its fields.
fn za_stat(s: &za::Stat) -> [i64; 11] {
    [
        s.czxid,
        s.mzxid,
        s.ctime,
        s.mtime,
        s.version.into(),
        s.cversion.into(),
        s.aversion.into(),
        s.ephemeral_owner,
        s.data_length.into(),
        s.num_children.into(),
        s.pzxid,
    ]
}

/// A connected zookeeper-async client and the events its default watcher saw.
async fn za_connect(
    connect: &str,
    timeout: Duration,
) -> (za::ZooKeeper, mpsc::UnboundedReceiver<za::WatchedEvent>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let zk = within(
        "zookeeper-async connect",
        WAIT,
        za::ZooKeeper::connect(connect, timeout, move |ev: za::WatchedEvent| {
            let _ = tx.send(ev);
        }),
    )
    .await
    .expect("zookeeper-async connects");
    (zk, rx)
}

/// A one-shot watch callback that forwards its event to a channel.
fn za_watch() -> (
    impl FnOnce(za::WatchedEvent) + Send + 'static,
    mpsc::UnboundedReceiver<za::WatchedEvent>,
) {
    let (tx, rx) = mpsc::unbounded_channel();
    (
        move |ev: za::WatchedEvent| {
            let _ = tx.send(ev);
        },
        rx,
    )
}

async fn za_next(
    rx: &mut mpsc::UnboundedReceiver<za::WatchedEvent>,
    what: &str,
) -> (za::WatchedEventType, Option<String>) {
    let ev = within(what, WAIT, rx.recv())
        .await
        .unwrap_or_else(|| panic!("watch channel closed before {what}"));
    (ev.event_type, ev.path)
}

/// Waits (at most [`WAIT`]) until `path` does not exist, as `observer` sees it.
async fn za_until_gone(what: &str, observer: &za::ZooKeeper, path: &str) {
    eventually_async(what, WAIT, || async {
        observer
            .exists(path, false)
            .await
            .expect("exists")
            .is_none()
            .then_some(())
    })
    .await
}

fn za_open() -> Vec<za::Acl> {
    za::Acl::open_unsafe().clone()
}

fn za_crud(kind: ServerKind) {
    run(TestServer::start(kind), |server| async move {
        let (zk, _session_events) =
            za_connect(&server.connect_string(), Duration::from_secs(10)).await;

        let path = zk
            .create("/za", b"v0".to_vec(), za_open(), za::CreateMode::Persistent)
            .await
            .expect("create");
        assert_eq!(path, "/za");
        let (data, st) = zk.get_data("/za", false).await.expect("get_data");
        assert_eq!(data, b"v0");
        assert_eq!(
            (
                st.version,
                st.cversion,
                st.aversion,
                st.data_length,
                st.num_children
            ),
            (0, 0, 0, 2, 0)
        );
        assert_eq!(st.ephemeral_owner, 0);
        assert_eq!(st.czxid, st.mzxid);
        assert_eq!(st.ctime, st.mtime);

        let st1 = zk
            .set_data("/za", b"v1-longer".to_vec(), Some(0))
            .await
            .expect("set_data");
        assert_eq!(st1.version, 1);
        assert_eq!(st1.data_length, 9);
        assert_eq!(st1.czxid, st.czxid);
        assert!(st1.mzxid > st.mzxid);
        let exists = zk
            .exists("/za", false)
            .await
            .expect("exists")
            .expect("present");
        assert_eq!(za_stat(&exists), za_stat(&st1));
        assert!(zk
            .exists("/za-missing", false)
            .await
            .expect("exists")
            .is_none());

        // Errors map to the right codes.
        assert!(matches!(
            zk.set_data("/za", vec![], Some(0)).await,
            Err(za::ZkError::BadVersion)
        ));
        assert!(matches!(
            zk.create("/za", vec![], za_open(), za::CreateMode::Persistent)
                .await,
            Err(za::ZkError::NodeExists)
        ));
        assert!(matches!(
            zk.create("/none/x", vec![], za_open(), za::CreateMode::Persistent)
                .await,
            Err(za::ZkError::NoNode)
        ));
        assert!(matches!(
            zk.get_data("/none", false).await,
            Err(za::ZkError::NoNode)
        ));

        // Children and the parent's stat.
        for c in ["b", "a", "c"] {
            zk.create(
                &format!("/za/{c}"),
                vec![],
                za_open(),
                za::CreateMode::Persistent,
            )
            .await
            .expect("create child");
        }
        let mut kids = zk.get_children("/za", false).await.expect("children");
        kids.sort();
        assert_eq!(kids, ["a", "b", "c"]);
        let pst = zk
            .exists("/za", false)
            .await
            .expect("exists")
            .expect("present");
        assert_eq!((pst.num_children, pst.cversion, pst.version), (3, 3, 1));
        let c_st = zk
            .exists("/za/c", false)
            .await
            .expect("exists")
            .expect("present");
        assert_eq!(
            pst.pzxid, c_st.czxid,
            "pzxid is the last child create's zxid"
        );
        assert!(matches!(
            zk.delete("/za", None).await,
            Err(za::ZkError::NotEmpty)
        ));
        assert!(matches!(
            zk.delete("/za/a", Some(3)).await,
            Err(za::ZkError::BadVersion)
        ));
        zk.delete("/za/a", Some(0)).await.expect("versioned delete");

        // create2 returns the same stat exists() reports.
        let (p2, st2) = zk
            .create2("/za2", b"x".to_vec(), za_open(), za::CreateMode::Persistent)
            .await
            .expect("create2");
        assert_eq!(p2, "/za2");
        let st2_exists = zk
            .exists("/za2", false)
            .await
            .expect("exists")
            .expect("present");
        assert_eq!(za_stat(&st2), za_stat(&st2_exists));

        // ZooKeeperExt helpers.
        zk.ensure_path("/za3/deep/path").await.expect("ensure_path");
        assert!(zk
            .exists("/za3/deep/path", false)
            .await
            .expect("exists")
            .is_some());
        zk.delete_recursive("/za").await.expect("delete_recursive");
        assert!(zk.exists("/za", false).await.expect("exists").is_none());
        zk.close().await.expect("close");
    });
}
zooraft_tests::against_both!(
    zookeeper_async_crud_apache,
    zookeeper_async_crud_zooraft,
    za_crud
);

fn za_ephemeral_sequential(kind: ServerKind) {
    run(TestServer::start(kind), |server| async move {
        let (a, _ea) = za_connect(&server.connect_string(), Duration::from_secs(10)).await;
        let (b, _eb) = za_connect(&server.connect_string(), Duration::from_secs(10)).await;
        a.create("/zs", vec![], za_open(), za::CreateMode::Persistent)
            .await
            .expect("parent");
        let e0 = a
            .create(
                "/zs/e-",
                b"a".to_vec(),
                za_open(),
                za::CreateMode::EphemeralSequential,
            )
            .await
            .expect("ephemeral sequential");
        let p1 = a
            .create(
                "/zs/p-",
                vec![],
                za_open(),
                za::CreateMode::PersistentSequential,
            )
            .await
            .expect("persistent sequential");
        let e2 = b
            .create(
                "/zs/e-",
                vec![],
                za_open(),
                za::CreateMode::EphemeralSequential,
            )
            .await
            .expect("b's ephemeral sequential");
        assert_eq!(e0, "/zs/e-0000000000");
        assert_eq!(p1, "/zs/p-0000000001");
        assert_eq!(e2, "/zs/e-0000000002");
        let owner_a = a
            .exists(&e0, false)
            .await
            .expect("exists")
            .expect("e0")
            .ephemeral_owner;
        let owner_b = a
            .exists(&e2, false)
            .await
            .expect("exists")
            .expect("e2")
            .ephemeral_owner;
        assert_ne!(owner_a, 0);
        assert_ne!(owner_b, 0);
        assert_ne!(owner_a, owner_b, "two sessions, two owners");
        assert_eq!(
            a.exists(&p1, false)
                .await
                .expect("exists")
                .expect("p1")
                .ephemeral_owner,
            0
        );
        assert!(matches!(
            a.create(
                &format!("{e0}/kid"),
                vec![],
                za_open(),
                za::CreateMode::Persistent
            )
            .await,
            Err(za::ZkError::NoChildrenForEphemerals)
        ));

        // Closing b removes b's ephemerals; a's stay. zookeeper-async's close() returns once
        // closeSession is written and then shuts the socket, so the server must still apply
        // a closeSession that is followed at once by EOF.
        b.close().await.expect("close b");
        za_until_gone("b's ephemeral to go after b closed", &a, &e2).await;
        assert!(a.exists(&e0, false).await.expect("exists").is_some());
        let mut left = a.get_children("/zs", false).await.expect("children");
        left.sort();
        assert_eq!(left, ["e-0000000000", "p-0000000001"]);
        a.close().await.expect("close a");
    });
}
zooraft_tests::against_both!(
    zookeeper_async_ephemeral_sequential_apache,
    zookeeper_async_ephemeral_sequential_zooraft,
    za_ephemeral_sequential
);

fn za_watches(kind: ServerKind) {
    run(TestServer::start(kind), |server| async move {
        let (zk, _e) = za_connect(&server.connect_string(), Duration::from_secs(10)).await;
        let (writer, _w) = za_connect(&server.connect_string(), Duration::from_secs(10)).await;
        use za::WatchedEventType::{
            NodeChildrenChanged, NodeCreated, NodeDataChanged, NodeDeleted,
        };
        zk.create("/zw", b"0".to_vec(), za_open(), za::CreateMode::Persistent)
            .await
            .expect("create");

        // Data watch: fires once on set.
        let (w, mut rx) = za_watch();
        zk.get_data_w("/zw", w).await.expect("get_data_w");
        writer
            .set_data("/zw", b"1".to_vec(), None)
            .await
            .expect("set");
        assert_eq!(
            za_next(&mut rx, "data watch").await,
            (NodeDataChanged, Some("/zw".into()))
        );

        // Exists watch on a missing node fires NodeCreated.
        let (w, mut rx) = za_watch();
        assert!(zk.exists_w("/zw/new", w).await.expect("exists_w").is_none());
        writer
            .create("/zw/new", vec![], za_open(), za::CreateMode::Persistent)
            .await
            .expect("create");
        assert_eq!(
            za_next(&mut rx, "exists watch").await,
            (NodeCreated, Some("/zw/new".into()))
        );

        // Child watch.
        let (w, mut rx) = za_watch();
        zk.get_children_w("/zw", w).await.expect("get_children_w");
        writer
            .create("/zw/kid", vec![], za_open(), za::CreateMode::Persistent)
            .await
            .expect("create");
        assert_eq!(
            za_next(&mut rx, "child watch").await,
            (NodeChildrenChanged, Some("/zw".into()))
        );

        // Data watch sees a delete.
        let (w, mut rx) = za_watch();
        zk.get_data_w("/zw/kid", w).await.expect("get_data_w");
        writer.delete("/zw/kid", None).await.expect("delete");
        assert_eq!(
            za_next(&mut rx, "delete watch").await,
            (NodeDeleted, Some("/zw/kid".into()))
        );

        // One-shot: a second change after the event fires nothing more (checked after a
        // round trip on the watching session, which the event would have preceded).
        writer
            .set_data("/zw", b"2".to_vec(), None)
            .await
            .expect("set");
        zk.get_data("/zw", false).await.expect("get");
        assert!(rx.try_recv().is_err());

        // A session's own write fires its own watch.
        let (w, mut rx) = za_watch();
        zk.get_data_w("/zw", w).await.expect("get_data_w");
        zk.set_data("/zw", b"own".to_vec(), None)
            .await
            .expect("own set");
        assert_eq!(
            za_next(&mut rx, "own write's watch").await,
            (NodeDataChanged, Some("/zw".into()))
        );
        zk.close().await.expect("close");
        writer.close().await.expect("close");
    });
}
zooraft_tests::against_both!(
    zookeeper_async_watches_apache,
    zookeeper_async_watches_zooraft,
    za_watches
);

fn za_session_expiry(kind: ServerKind) {
    // tickTime 200 ms: a 2 s session timeout is within [2, 20] ticks, so it is granted as is.
    let server = TestServer::builder(kind).tick_time_ms(200).start();
    run(server, |server| async move {
        let proxy = Proxy::start(server.addr());
        let (observer, _o) = za_connect(&server.connect_string(), Duration::from_secs(10)).await;
        let (states_tx, mut states) = mpsc::unbounded_channel();
        let (zk, _e) = za_connect(&proxy.connect_string(), Duration::from_secs(2)).await;
        zk.add_listener(move |s: za::ZkState| {
            let _ = states_tx.send(s);
        });
        zk.create("/zx", vec![], za_open(), za::CreateMode::Ephemeral)
            .await
            .expect("ephemeral through the proxy");
        let owner = observer
            .exists("/zx", false)
            .await
            .expect("exists")
            .expect("ephemeral visible")
            .ephemeral_owner;
        assert_ne!(owner, 0);

        // Partition: the server hears nothing from the session and expires it, which the
        // observer sees as the ephemeral disappearing.
        proxy.partition(true);
        za_until_gone(
            "the server to expire the partitioned session",
            &observer,
            "/zx",
        )
        .await;
        proxy.partition(false);

        // The client reconnects with its old session id and is told it expired.
        #[allow(deprecated)]
        let expired = within("the client to observe expiry", WAIT, async {
            let mut seen = Vec::new();
            loop {
                let s = states.recv().await.expect("state channel open");
                seen.push(s);
                if s == za::ZkState::NotConnected || s == za::ZkState::Closed {
                    return seen;
                }
            }
        })
        .await;
        assert!(
            expired.contains(&za::ZkState::Connecting),
            "the client saw the connection drop first: {expired:?}"
        );
        observer.close().await.expect("close observer");
    });
}
zooraft_tests::against_both!(
    zookeeper_async_session_expiry_apache,
    zookeeper_async_session_expiry_zooraft,
    za_session_expiry
);
