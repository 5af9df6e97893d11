//! The two Rust ZooKeeper clients against a real server:
//!
//! * `zookeeper-async` (the client the `recipes` crate builds on): CRUD with `Stat` checks,
//!   ephemeral and sequential nodes, data/child/exists watches, ephemeral cleanup on close,
//!   and session expiry seen by the client after a network partition (a loopback proxy that
//!   drops and blackholes the client's connections while the server expires the session).
//! * `zookeeper-client` (kezhuw's client): the same basics through create2, plus multi
//!   (success and rollback), multiRead, sync, persistent and persistent-recursive watches,
//!   getEphemerals/getAllChildrenNumber, resuming a session by id and password from another
//!   client object, and expiry observed when another connection closes the session.
//!
//! Every scenario is bounded by [`SCENARIO_TIMEOUT`] and each wait inside it by its own bound.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use harness::{ServerKind, TestServer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};

/// The bound on one whole scenario.
const SCENARIO_TIMEOUT: Duration = Duration::from_secs(120);
/// The bound on one wait for an event or a state.
const WAIT: Duration = Duration::from_secs(20);

use harness::rt::runtime;

/// Runs `body` against a fresh server (started by `server`), bounded by [`SCENARIO_TIMEOUT`].
fn run<F, Fut>(server: TestServer, body: F)
where
    F: FnOnce(Arc<TestServer>) -> Fut,
    Fut: Future<Output = ()>,
{
    let server = Arc::new(server);
    let rt = runtime();
    let scenario = server.clone();
    let outcome =
        rt.block_on(async move { tokio::time::timeout(SCENARIO_TIMEOUT, body(scenario)).await });
    // Client tasks may still hold sockets; stop them before the server goes.
    rt.shutdown_timeout(Duration::from_secs(5));
    if outcome.is_err() {
        panic!(
            "scenario did not finish within {SCENARIO_TIMEOUT:?}; server log:\n{}",
            server.log_tail()
        );
    }
}

/// Awaits `fut` for at most [`WAIT`].
async fn within<T>(what: &str, fut: impl Future<Output = T>) -> T {
    harness::rt::within(what, WAIT, fut).await
}

/// Polls `check` until it returns true, for at most [`WAIT`].
async fn eventually<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    within(what, async {
        while !check().await {
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    })
    .await
}

macro_rules! both_kinds {
    ($scenario:ident, $apache:ident, $zooraft:ident) => {
        #[test]
        fn $apache() {
            $scenario(ServerKind::Apache);
        }

        #[test]
        fn $zooraft() {
            $scenario(ServerKind::Zooraft);
        }
    };
}

// ---------------------------------------------------------------------------------------
// A loopback proxy that can partition clients from the server.
// ---------------------------------------------------------------------------------------

/// Forwards connections from its own port to the server's. `partition()` closes every
/// forwarded connection and holds new ones open without forwarding a byte (so clients
/// neither reach the server nor spin reconnecting) until `heal()`.
struct PartitionProxy {
    port: u16,
    partitioned: watch::Sender<bool>,
}

impl PartitionProxy {
    async fn start(upstream: std::net::SocketAddr) -> PartitionProxy {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind proxy port");
        let port = listener.local_addr().expect("proxy address").port();
        let (partitioned, rx) = watch::channel(false);
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                tokio::spawn(Self::serve(client, upstream, rx.clone()));
            }
        });
        PartitionProxy { port, partitioned }
    }

    async fn serve(
        mut client: TcpStream,
        upstream: std::net::SocketAddr,
        mut partitioned: watch::Receiver<bool>,
    ) {
        if *partitioned.borrow_and_update() {
            // Blackhole: keep the socket, answer nothing, close once healed.
            let _ = partitioned.wait_for(|p| !*p).await;
            return;
        }
        let Ok(mut server) = TcpStream::connect(upstream).await else {
            return;
        };
        tokio::select! {
            _ = tokio::io::copy_bidirectional(&mut client, &mut server) => {}
            _ = partitioned.wait_for(|p| *p) => {}
        }
    }

    fn connect_string(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    fn partition(&self) {
        self.partitioned.send_replace(true);
    }

    fn heal(&self) {
        self.partitioned.send_replace(false);
    }
}

// ---------------------------------------------------------------------------------------
// zookeeper-async
// ---------------------------------------------------------------------------------------

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
    let ev = within(what, rx.recv())
        .await
        .unwrap_or_else(|| panic!("watch channel closed before {what}"));
    (ev.event_type, ev.path)
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
both_kinds!(
    za_crud,
    zookeeper_async_crud_apache,
    zookeeper_async_crud_zooraft
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
        eventually("b's ephemeral to go after b closed", || async {
            a.exists(&e2, false).await.expect("exists").is_none()
        })
        .await;
        assert!(a.exists(&e0, false).await.expect("exists").is_some());
        let mut left = a.get_children("/zs", false).await.expect("children");
        left.sort();
        assert_eq!(left, ["e-0000000000", "p-0000000001"]);
        a.close().await.expect("close a");
    });
}
both_kinds!(
    za_ephemeral_sequential,
    zookeeper_async_ephemeral_sequential_apache,
    zookeeper_async_ephemeral_sequential_zooraft
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
both_kinds!(
    za_watches,
    zookeeper_async_watches_apache,
    zookeeper_async_watches_zooraft
);

fn za_session_expiry(kind: ServerKind) {
    // tickTime 200 ms: a 2 s session timeout is within [2, 20] ticks, so it is granted as is.
    let server = TestServer::builder(kind).tick_time_ms(200).start();
    run(server, |server| async move {
        let proxy = PartitionProxy::start(server.addr()).await;
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
        proxy.partition();
        eventually("the server to expire the partitioned session", || async {
            observer
                .exists("/zx", false)
                .await
                .expect("exists")
                .is_none()
        })
        .await;
        proxy.heal();

        // The client reconnects with its old session id and is told it expired.
        #[allow(deprecated)]
        let expired = within("the client to observe expiry", async {
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
both_kinds!(
    za_session_expiry,
    zookeeper_async_session_expiry_apache,
    zookeeper_async_session_expiry_zooraft
);

// ---------------------------------------------------------------------------------------
// zookeeper-client
// ---------------------------------------------------------------------------------------

mod zc {
    pub use zookeeper_client::{
        Acls, AddWatchMode, Client, CreateMode, CreateOptions, Error, EventType, MultiReadResult,
        MultiWriteError, MultiWriteResult, SessionState,
    };
}

fn zc_opts(mode: zc::CreateMode) -> zc::CreateOptions<'static> {
    mode.with_acls(zc::Acls::anyone_all())
}

async fn zc_connect(connect: &str) -> zc::Client {
    within(
        "zookeeper-client connect",
        zc::Client::connector()
            .with_session_timeout(Duration::from_secs(10))
            .connect(connect),
    )
    .await
    .expect("zookeeper-client connects")
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
both_kinds!(
    zc_crud,
    zookeeper_client_crud_apache,
    zookeeper_client_crud_zooraft
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
        eventually("b's ephemeral to go after b closed", || async {
            a.check_stat("/q/n-0000000001")
                .await
                .expect("exists")
                .is_none()
        })
        .await;
        let mut left = a.list_children("/q").await.expect("children");
        left.sort();
        assert_eq!(left, ["n-0000000000", "n-0000000002"]);
    });
}
both_kinds!(
    zc_ephemeral_sequential,
    zookeeper_client_ephemeral_sequential_apache,
    zookeeper_client_ephemeral_sequential_zooraft
);

fn zc_watches(kind: ServerKind) {
    run(TestServer::start(kind), |server| async move {
        let zk = zc_connect(&server.connect_string()).await;
        let writer = zc_connect(&server.connect_string()).await;
        let persistent = zc_opts(zc::CreateMode::Persistent);
        zk.create("/w", b"0", &persistent).await.expect("create");

        let (_, _, w) = zk.get_and_watch_data("/w").await.expect("watch data");
        writer.set_data("/w", b"1", None).await.expect("set");
        let ev = within("data watch", w.changed()).await;
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
        let ev = within("exists watch", w.changed()).await;
        assert_eq!(
            (ev.event_type, ev.path.as_str()),
            (zc::EventType::NodeCreated, "/w/new")
        );

        let (_, w) = zk.list_and_watch_children("/w").await.expect("child watch");
        writer.delete("/w/new", None).await.expect("delete");
        let ev = within("child watch", w.changed()).await;
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
            let ev = within("recursive watch event", rec.changed()).await;
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
            let ev = within("persistent watch event", pw.changed()).await;
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
        within("removing the persistent watch", removal)
            .await
            .expect("removeWatches");
    });
}
both_kinds!(
    zc_watches,
    zookeeper_client_watches_apache,
    zookeeper_client_watches_zooraft
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
        let results = within("multi", multi.commit())
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
        match within("failing multi", multi.commit()).await {
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
        let read = within("multiRead", reader.commit())
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
both_kinds!(
    zc_multi_and_sync,
    zookeeper_client_multi_and_sync_apache,
    zookeeper_client_multi_and_sync_zooraft
);

fn zc_session_resume(kind: ServerKind) {
    run(TestServer::start(kind), |server| async move {
        let observer = zc_connect(&server.connect_string()).await;
        // A detached client leaves its session open when dropped.
        let a = within(
            "detached connect",
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
        eventually("the resumed session's ephemerals to go", || async {
            observer.check_stat("/r").await.expect("exists").is_none()
                && observer.check_stat("/r2").await.expect("exists").is_none()
        })
        .await;
    });
}
both_kinds!(
    zc_session_resume,
    zookeeper_client_session_resume_apache,
    zookeeper_client_session_resume_zooraft
);

fn zc_session_expiry(kind: ServerKind) {
    run(TestServer::start(kind), |server| async move {
        let proxy = PartitionProxy::start(server.addr()).await;
        let observer = zc_connect(&server.connect_string()).await;
        let a = zc_connect(&proxy.connect_string()).await;
        a.create("/x", b"", &zc_opts(zc::CreateMode::Ephemeral))
            .await
            .expect("ephemeral");
        let mut states = a.state_watcher();
        assert_eq!(states.state(), zc::SessionState::SyncConnected);

        // Cut a off (well within its 10 s session timeout) so it cannot take its session back,
        // then another connection resumes the session with its id and password and closes it.
        proxy.partition();
        let b = within(
            "second connection on the same session",
            zc::Client::connector()
                .with_session_timeout(Duration::from_secs(10))
                .with_session(a.session().clone())
                .connect(&server.connect_string()),
        )
        .await
        .expect("take over the session");
        assert_eq!(b.session_id(), a.session_id());
        drop(b);
        eventually("the closed session's ephemeral to go", || async {
            observer.check_stat("/x").await.expect("exists").is_none()
        })
        .await;
        proxy.heal();

        // a reconnects with the closed session's id and learns it is gone.
        let last = within("the first client to see Expired", async {
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
both_kinds!(
    zc_session_expiry,
    zookeeper_client_session_expiry_apache,
    zookeeper_client_session_expiry_zooraft
);

fn zc_expiry_after_partition(kind: ServerKind) {
    let server = TestServer::builder(kind).tick_time_ms(200).start();
    run(server, |server| async move {
        let proxy = PartitionProxy::start(server.addr()).await;
        let observer = zc_connect(&server.connect_string()).await;
        let a = within(
            "connect through the proxy",
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
        proxy.partition();
        eventually("the server to expire the partitioned session", || async {
            observer.check_stat("/px").await.expect("exists").is_none()
        })
        .await;
        proxy.heal();
        let seen = within("the client to see Expired", async {
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
both_kinds!(
    zc_expiry_after_partition,
    zookeeper_client_expiry_after_partition_apache,
    zookeeper_client_expiry_after_partition_zooraft
);
