//! The mutex under injected faults (a proxy between client and server): a create reply lost
//! to a connection drop, a release while the connection is down, a partition, an expiry.
//! Every scenario runs on both backends (zookeeper-client and zookeeper-async) against both
//! servers.

use crate::common;

use std::time::Duration;

use zooraft_recipes::{Connection, Error, LockOptions, LostReason, Mutex};
use zooraft_tests::proxy::{Direction, Proxy};
use zooraft_tests::ServerKind;

use common::{children, client, connect, connected, eventually, server, Backend};

/// True for a reply frame (xid, zxid, err = 0, ...) that carries a lock node's path: the
/// reply to our create (getChildren replies come later, when there is something to list).
fn is_lock_create_reply(frame: &[u8]) -> bool {
    frame.len() > 16
        && frame[12..16] == [0, 0, 0, 0]
        && i32::from_be_bytes([frame[0], frame[1], frame[2], frame[3]]) > 0
        && frame.windows(6).any(|w| w == b"-lock-")
}

async fn protection_recovers_lost_create_reply(kind: ServerKind, backend: Backend) {
    let server = server(kind);
    let proxy = Proxy::start(server.addr());
    let observer = client(&server.connect_string()).await;
    let c = connect(backend, &proxy.connect_string(), Duration::from_secs(8)).await;
    let epoch = c.session().borrow().epoch;
    let path = "/locks/protected";
    // Make the parent first, so the first create is the one whose reply is lost.
    let warm = Mutex::new(c.clone(), path);
    warm.acquire()
        .await
        .expect("warm")
        .release()
        .await
        .expect("release");

    proxy.drop_next_frame_and_cut(Direction::ServerToClient, is_lock_create_reply);
    let mutex = Mutex::new(c.clone(), path);
    let guard = tokio::time::timeout(Duration::from_secs(30), mutex.acquire())
        .await
        .expect("acquire after a lost reply")
        .expect("acquire");
    assert_eq!(
        proxy.frames_dropped(),
        1,
        "the create reply was not dropped"
    );
    assert_eq!(
        c.session().borrow().epoch,
        epoch,
        "the session survived the cut"
    );

    // The node created before the cut was found again: exactly one node, ours.
    let kids = children(&observer, path).await;
    assert_eq!(kids.len(), 1, "orphan or duplicate lock nodes: {kids:?}");
    assert_eq!(guard.node_path(), format!("{path}/{}", kids[0]));
    let stat = observer.exists(guard.node_path()).await.unwrap().unwrap();
    assert_eq!(guard.fencing_token().get(), stat.czxid as u64);
    guard.release().await.expect("release");
    assert!(children(&observer, path).await.is_empty());
    c.close().await;
    observer.close().await;
}

every_backend!(
    protection_recovers_lost_create_reply_on,
    protection_recovers_lost_create_reply
);

async fn lost_reply_then_expiry_makes_a_fresh_node(kind: ServerKind, backend: Backend) {
    let server = server(kind);
    let proxy = Proxy::start(server.addr());
    let observer = client(&server.connect_string()).await;
    let c = connect(backend, &proxy.connect_string(), Duration::from_secs(2)).await;
    let first_epoch = c.session().borrow().epoch;
    let path = "/locks/protected-expiry";
    let warm = Mutex::new(c.clone(), path);
    warm.acquire()
        .await
        .expect("warm")
        .release()
        .await
        .expect("release");
    let old_session = c.session().borrow().session_id.expect("session id known");

    // The reply is lost and the client cannot come back before its session expires.
    proxy.refuse_connections(true);
    proxy.drop_next_frame_and_cut(Direction::ServerToClient, is_lock_create_reply);
    let mutex = Mutex::new(c.clone(), path);
    let acquiring = tokio::spawn(async move { mutex.acquire().await.map(|g| (mutex, g)) });
    let p = &proxy;
    eventually(
        Duration::from_secs(20),
        "create reply dropped",
        move || async move { p.frames_dropped() == 1 },
    )
    .await;
    let o = observer.clone();
    eventually(
        Duration::from_secs(20),
        "old session's node gone",
        move || {
            let o = o.clone();
            async move { children(&o, path).await.is_empty() }
        },
    )
    .await;
    // Stay away a little longer than the session timeout, then let the client back: it
    // learns that its session expired, and so does the acquire.
    tokio::time::sleep(Duration::from_secs(3)).await;
    proxy.refuse_connections(false);
    let result = tokio::time::timeout(Duration::from_secs(60), acquiring)
        .await
        .expect("acquire finished")
        .expect("task");
    assert_eq!(
        result.err(),
        Some(Error::SessionExpired),
        "the acquire must fail with a distinct error"
    );
    assert!(
        c.session().borrow().epoch > first_epoch,
        "a new session was expected"
    );
    // A new client takes the lock with a node of its own; nothing of the old session is left.
    let fresh = connect(backend, &server.connect_string(), Duration::from_secs(8)).await;
    let guard = Mutex::new(fresh.clone(), path)
        .acquire()
        .await
        .expect("a new client acquires");
    let kids = children(&observer, path).await;
    assert_eq!(kids.len(), 1, "{kids:?}");
    let stat = observer.exists(guard.node_path()).await.unwrap().unwrap();
    assert_ne!(
        stat.ephemeral_owner, old_session,
        "a node of the old session was taken as ours"
    );
    if let Some(sid) = fresh.session().borrow().session_id {
        assert_eq!(stat.ephemeral_owner, sid);
    }
    guard.release().await.expect("release");
    fresh.close().await;
    c.close().await;
    observer.close().await;
}

every_backend!(
    lost_reply_then_expiry_makes_a_fresh_node_on,
    lost_reply_then_expiry_makes_a_fresh_node
);

async fn guaranteed_delete_after_dropped_connection(kind: ServerKind, backend: Backend) {
    let server = server(kind);
    let proxy = Proxy::start(server.addr());
    let observer = client(&server.connect_string()).await;
    let c = connect(backend, &proxy.connect_string(), Duration::from_secs(8)).await;
    let epoch = c.session().borrow().epoch;
    let path = "/locks/guaranteed";
    let mutex = Mutex::new(c.clone(), path);
    let guard = mutex.acquire().await.expect("acquire");
    let node = guard.node_path().to_string();

    // The connection drops and cannot come back; the guard is dropped meanwhile.
    proxy.refuse_connections(true);
    proxy.cut_all();
    let cc = c.clone();
    eventually(
        Duration::from_secs(10),
        "client sees the disconnect",
        move || {
            let cc = cc.clone();
            async move { cc.session().borrow().connection != Connection::Connected }
        },
    )
    .await;
    drop(guard);
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        observer.exists(&node).await.unwrap().is_some(),
        "the node cannot be deleted while disconnected"
    );
    // The connection comes back: the background delete goes through, in the same session.
    proxy.refuse_connections(false);
    let o = observer.clone();
    let n = node.clone();
    eventually(Duration::from_secs(20), "lock node deleted", move || {
        let o = o.clone();
        let n = n.clone();
        async move { o.exists(&n).await.unwrap().is_none() }
    })
    .await;
    connected(&c).await;
    let state = c.session().borrow().clone();
    assert_eq!(
        state.epoch, epoch,
        "the session expired: the delete proved nothing"
    );
    assert_eq!(state.connection, Connection::Connected);
    // And the lock is free for others.
    let other = Mutex::new(observer.clone(), path);
    let g = other.try_acquire().await.expect("try").expect("free");
    g.release().await.expect("release");
    c.close().await;
    observer.close().await;
}

every_backend!(
    guaranteed_delete_after_dropped_connection_on,
    guaranteed_delete_after_dropped_connection
);

async fn partition_and_expiry_signal_lost(kind: ServerKind, backend: Backend) {
    let server = server(kind);
    let proxy = Proxy::start(server.addr());
    let observer = client(&server.connect_string()).await;
    let c = connect(backend, &proxy.connect_string(), Duration::from_secs(4)).await;
    let path = "/locks/partition";
    let options = LockOptions::default().suspend_fraction(0.5);
    let mutex = Mutex::with_options(c.clone(), path, options).expect("fraction");
    let guard = mutex.acquire().await.expect("acquire");
    assert!(guard.is_valid());

    // A partition: nothing gets through. The holder must give up before the server could
    // have expired its session and granted the lock to someone else.
    proxy.blackhole(true);
    let reason = tokio::time::timeout(Duration::from_secs(20), guard.lost())
        .await
        .expect("lost() completes during a partition");
    assert_eq!(reason, LostReason::ConnectionSuspended);
    let other = Mutex::new(observer.clone(), path);
    // The server expires the session; the lock goes to the next contender.
    let g = tokio::time::timeout(Duration::from_secs(30), other.acquire())
        .await
        .expect("next holder after expiry")
        .expect("acquire");
    assert!(g.fencing_token() > guard.fencing_token());
    proxy.blackhole(false);
    proxy.cut_all();
    // The old holder's fenced write fails.
    let cc = c.clone();
    eventually(
        Duration::from_secs(30),
        "old client reconnects",
        move || {
            let cc = cc.clone();
            // zookeeper-client's expiry is terminal; zookeeper-async starts a new session.
            async move {
                matches!(
                    cc.session().borrow().connection,
                    Connection::Connected | Connection::Expired
                )
            }
        },
    )
    .await;
    assert!(guard.fenced_set_data(path, b"x", -1).await.is_err());
    drop(guard);
    g.release().await.expect("release");
    c.close().await;
    observer.close().await;
}

every_backend!(
    partition_and_expiry_signal_lost_on,
    partition_and_expiry_signal_lost
);
