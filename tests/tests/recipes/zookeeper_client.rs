//! The recipes over the zookeeper-client crate (`ZookeeperClient`), alone and mixed with
//! zookeeper-async handles on the same lock path.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use zooraft_recipes::{
    CreateMode, Error, ErrorCode, LockOptions, LostReason, Mutex, Owner, ZkClient, ZookeeperClient,
};
use zooraft_tests::proxy::{Direction, Proxy};
use zooraft_tests::ServerKind;

use common::{children, client, connect, server, Backend};

async fn zk_client(connect: &str) -> ZookeeperClient {
    ZookeeperClient::connect(connect, Duration::from_secs(8))
        .await
        .expect("connect zookeeper-client")
}

async fn mixed_clients_share_one_lock(kind: ServerKind) {
    let server = server(kind);
    let zc = zk_client(&server.connect_string()).await;
    let za = connect(
        Backend::ZookeeperAsync,
        &server.connect_string(),
        Duration::from_secs(8),
    )
    .await;
    let path = "/locks/mixed";
    let label = |l: &str| LockOptions::default().label(l);
    let m1 = Mutex::with_options(zc.clone(), path, label("zookeeper-client")).expect("options");
    let m2 = Mutex::with_options(za.clone(), path, label("zookeeper-async")).expect("options");

    let g1 = m1.acquire().await.expect("acquire via zookeeper-client");
    let (data, stat) = za.get_data(g1.node_path()).await.expect("node");
    assert_eq!(Owner::parse(&data).unwrap().label, "zookeeper-client");
    assert_eq!(g1.fencing_token().get(), stat.czxid as u64);
    assert_eq!(Some(stat.ephemeral_owner), zc.session().borrow().session_id);
    assert!(m2.try_acquire().await.expect("try").is_none());

    let waiter = tokio::spawn(async move { m2.acquire().await.map(|g| (m2, g)) });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!waiter.is_finished());

    // Fenced writes through zookeeper-client's own multi.
    za.create("/mixed-data", b"0", CreateMode::Persistent)
        .await
        .expect("data node");
    // set_data at a version, through both backends: the new Stat, BadVersion, NoNode.
    let s1 = zc
        .set_data("/mixed-data", b"a", 0)
        .await
        .expect("set via zookeeper-client");
    assert_eq!(s1.version, 1);
    let s2 = za
        .set_data("/mixed-data", b"b", s1.version)
        .await
        .expect("set via zookeeper-async");
    assert_eq!((s2.version, s2.data_length), (2, 1));
    for c in [&zc as &dyn ZkClient, &*za] {
        assert!(matches!(
            c.set_data("/mixed-data", b"c", 1).await,
            Err(ErrorCode::BadVersion)
        ));
        assert!(matches!(
            c.set_data("/no-such-node", b"", -1).await,
            Err(ErrorCode::NoNode)
        ));
    }
    assert_eq!(za.get_data("/mixed-data").await.expect("read").0, b"b");
    g1.fenced_set_data("/mixed-data", b"1", -1)
        .await
        .expect("fenced write");
    let t1 = g1.fencing_token();
    g1.release().await.expect("release");
    let (_m2, g2) = tokio::time::timeout(Duration::from_secs(20), waiter)
        .await
        .expect("handoff to the zookeeper-async waiter")
        .expect("task")
        .expect("acquire");
    assert!(g2.fencing_token() > t1);
    g2.release().await.expect("release");

    // The lock node vanishing is noticed through zookeeper-client's watch too.
    let g3 = m1.acquire().await.expect("acquire again");
    za.delete(g3.node_path(), -1).await.expect("delete");
    let reason = tokio::time::timeout(Duration::from_secs(10), g3.lost())
        .await
        .expect("lost");
    assert_eq!(reason, LostReason::NodeDeleted);
    assert!(matches!(
        g3.fenced_set_data("/mixed-data", b"2", -1).await,
        Err(Error::Lost(_))
    ));
    drop(g3);
    za.close().await;
}

both_servers!(
    mixed_clients_share_one_lock_apache,
    mixed_clients_share_one_lock_zooraft,
    mixed_clients_share_one_lock
);

async fn zookeeper_client_protection(kind: ServerKind) {
    let server = server(kind);
    let proxy = Proxy::start(server.addr());
    let observer = client(&server.connect_string()).await;
    let zc = zk_client(&proxy.connect_string()).await;
    let path = "/locks/zkc-protected";
    let warm = Mutex::new(zc.clone(), path);
    warm.acquire()
        .await
        .expect("warm")
        .release()
        .await
        .expect("release");

    proxy.drop_next_frame_and_cut(Direction::ServerToClient, |f| {
        f.len() > 16 && f[12..16] == [0, 0, 0, 0] && f.windows(6).any(|w| w == b"-lock-")
    });
    let mutex = Mutex::new(zc.clone(), path);
    let guard = tokio::time::timeout(Duration::from_secs(30), mutex.acquire())
        .await
        .expect("acquire after a lost reply")
        .expect("acquire");
    assert_eq!(proxy.frames_dropped(), 1);
    let kids = children(&observer, path).await;
    assert_eq!(kids.len(), 1, "{kids:?}");
    assert_eq!(guard.node_path(), format!("{path}/{}", kids[0]));
    guard.release().await.expect("release");
    assert!(children(&observer, path).await.is_empty());
    observer.close().await;
}

both_servers!(
    zookeeper_client_protection_apache,
    zookeeper_client_protection_zooraft,
    zookeeper_client_protection
);

/// Waits (on watches) until `path` does not exist.
async fn gone(observer: &Arc<dyn ZkClient>, path: &str) {
    loop {
        let (stat, watch) = observer.exists_watch(path).await.expect("exists");
        if stat.is_none() {
            return;
        }
        let _ = watch.await;
    }
}

/// A client handle by value, an `Arc` of one and an `Arc<dyn ZkClient>` all make a `Mutex`,
/// and the three locks (one session) take turns.
async fn every_client_form_makes_a_mutex(kind: ServerKind) {
    let server = server(kind);
    let zc = zk_client(&server.connect_string()).await;
    let path = "/locks/forms";
    let by_value = Mutex::new(zc.clone(), path);
    let arc: Arc<ZookeeperClient> = Arc::new(zc.clone());
    let by_arc = Mutex::new(arc, path);
    let dynamic: Arc<dyn ZkClient> = Arc::new(zc.clone());
    let by_dyn = Mutex::with_options(dynamic, path, LockOptions::default()).expect("options");
    let session = zc.session().borrow().session_id;
    let mut tokens = Vec::new();
    for mutex in [&by_value, &by_arc, &by_dyn] {
        let guard = mutex.acquire().await.expect("acquire");
        let (_, stat) = zc.get_data(guard.node_path()).await.expect("lock node");
        assert_eq!(Some(stat.ephemeral_owner), session);
        tokens.push(guard.fencing_token());
        guard.release().await.expect("release");
    }
    assert!(tokens.windows(2).all(|w| w[0] < w[1]), "{tokens:?}");
    zc.close().await;
}

both_servers!(
    every_client_form_makes_a_mutex_apache,
    every_client_form_makes_a_mutex_zooraft,
    every_client_form_makes_a_mutex
);

/// The session timeout of the handles whose closing is tested: long, so that only a close
/// (not an expiry) removes their ephemeral node within [`CLOSE_BOUND`].
const LONG_SESSION: Duration = Duration::from_secs(40);
/// How long the last clone's close may take to show at the server.
const CLOSE_BOUND: Duration = Duration::from_secs(20);

/// A server that grants [`LONG_SESSION`] (the usual test server caps sessions at 10 s).
fn long_session_server(kind: ServerKind) -> zooraft_tests::TestServer {
    zooraft_tests::TestServer::builder(kind)
        .tick_time_ms(500)
        .config("maxSessionTimeout", "60000")
        .start()
}

/// Clones of a handle share its session: dropping one leaves it open, dropping the last
/// one (a recipe's included) closes it, and the server deletes its ephemeral nodes.
async fn last_clone_closes_the_session<C: ZkClient + Clone>(observer: Arc<dyn ZkClient>, c: C) {
    // An expiry would also delete the node, but only after the session timeout.
    let timeout = c.session().borrow().timeout;
    assert!(
        timeout > CLOSE_BOUND,
        "negotiated {timeout:?}: an expiry could pass for a close"
    );
    let path = "/handles/ephemeral";
    match observer
        .create("/handles", b"", CreateMode::Persistent)
        .await
    {
        Ok(_) | Err(ErrorCode::NodeExists) => {}
        Err(e) => panic!("parent: {e}"),
    }
    c.create(path, b"", CreateMode::Ephemeral)
        .await
        .expect("ephemeral");
    let session = c.session().borrow().session_id;
    let mutex = Mutex::new(c.clone(), "/locks/handles");
    let other = c.clone();
    drop(c);
    // Still open: a request through the other clone succeeds after the drop, and the node is
    // still the session's.
    other
        .sync(path)
        .await
        .expect("the session survives one drop");
    let (_, stat) = observer.get_data(path).await.expect("node still there");
    assert_eq!(Some(stat.ephemeral_owner), session);
    drop(other);
    // The mutex holds the last clone: the session is still open, and serves the lock.
    mutex
        .acquire()
        .await
        .expect("acquire through the recipe's clone")
        .release()
        .await
        .expect("release");
    assert!(observer.exists(path).await.expect("exists").is_some());
    drop(mutex);
    tokio::time::timeout(CLOSE_BOUND, gone(&observer, path))
        .await
        .expect("the session closes with its last clone");
    observer.close().await;
}

async fn last_zookeeper_client_clone_closes(kind: ServerKind) {
    let server = long_session_server(kind);
    let observer = client(&server.connect_string()).await;
    let zc = ZookeeperClient::connect(&server.connect_string(), LONG_SESSION)
        .await
        .expect("connect zookeeper-client");
    last_clone_closes_the_session(observer, zc).await;
}

both_servers!(
    last_zookeeper_client_clone_closes_apache,
    last_zookeeper_client_clone_closes_zooraft,
    last_zookeeper_client_clone_closes
);

async fn last_async_zk_client_clone_closes(kind: ServerKind) {
    let server = long_session_server(kind);
    let observer = client(&server.connect_string()).await;
    let za = zooraft_recipes::AsyncZkClient::connect(&server.connect_string(), LONG_SESSION)
        .await
        .expect("connect zookeeper-async");
    last_clone_closes_the_session(observer, za).await;
}

both_servers!(
    last_async_zk_client_clone_closes_apache,
    last_async_zk_client_clone_closes_zooraft,
    last_async_zk_client_clone_closes
);
