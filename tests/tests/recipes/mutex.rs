//! End-to-end tests of the mutex in one process: acquire and release, try-lock and
//! timeouts, reentrancy, FIFO order without a herd, owner data, containers, fenced writes.

use crate::common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use zooraft_recipes::{
    CreateMode, Error, ErrorCode, LockOptions, LostReason, Mutex, Op, OpResult, Owner, ZkClient,
    ZkResult,
};
use zooraft_tests::proxy::{Direction, Proxy};
use zooraft_tests::ServerKind;

use common::{children, client, client_with_timeout, eventually, server, Forward, Forwarding};

async fn basic_acquire_release(kind: ServerKind) {
    let server = server(kind);
    let c = client(&server.connect_string()).await;
    let options = LockOptions::default().label("basic test");
    let mutex = Mutex::with_options(c.clone(), "/locks/basic", options).expect("options");
    let guard = mutex.acquire().await.expect("acquire");
    assert!(mutex.is_held_by_this_handle());
    let name = guard.node_path().rsplit('/').next().unwrap().to_string();
    assert!(name.starts_with("_c_") && name.contains("-lock-"), "{name}");
    assert_eq!(
        name.len(),
        40 + "lock-".len() + 10,
        "Curator's layout: {name}"
    );

    // The token is the node's czxid; the data names the owner.
    let (data, stat) = c.get_data(guard.node_path()).await.expect("lock node");
    assert_eq!(guard.fencing_token().get(), stat.czxid as u64);
    assert_eq!(
        stat.ephemeral_owner,
        c.session().borrow().session_id.unwrap()
    );
    let owner = Owner::parse(&data).expect("owner data");
    assert_eq!(owner.pid, std::process::id());
    assert_eq!(owner.label, "basic test");

    // Parents are containers: clients see ephemeralOwner 0 (ZooKeeper hides its internal
    // container marker); the reaping below shows they are containers.
    for p in ["/locks", "/locks/basic"] {
        let s = c.exists(p).await.expect("exists").expect("parent exists");
        assert_eq!(s.ephemeral_owner, 0, "{p}");
    }

    let parts = mutex.participants().await.expect("participants");
    assert_eq!(parts.len(), 1);
    assert!(parts[0].holder);
    assert_eq!(parts[0].node, name);
    assert_eq!(parts[0].owner.as_ref().unwrap().label, "basic test");
    assert_eq!(parts[0].token, guard.fencing_token());

    guard.release().await.expect("release");
    assert!(!mutex.is_held_by_this_handle());
    assert!(children(&c, "/locks/basic").await.is_empty());

    // A second holder gets a larger token.
    let g2 = mutex.acquire().await.expect("acquire again");
    assert!(g2.fencing_token().get() > 0);
    g2.release().await.expect("release");

    // Once empty, the container lock path is reaped by the server.
    let c2 = c.clone();
    eventually(
        Duration::from_secs(30),
        "empty container lock path deleted",
        move || {
            let c2 = c2.clone();
            async move { c2.exists("/locks/basic").await.expect("exists").is_none() }
        },
    )
    .await;
    c.close().await;
}

both_servers!(
    basic_acquire_release_apache,
    basic_acquire_release_zooraft,
    basic_acquire_release
);

async fn try_acquire_and_timeouts(kind: ServerKind) {
    let server = server(kind);
    let c = client(&server.connect_string()).await;
    let path = "/locks/try";
    let a = Mutex::new(c.clone(), path);
    let b = Mutex::new(c.clone(), path);
    let held = a.acquire().await.expect("a acquires");

    assert!(b.try_acquire().await.expect("try").is_none());
    assert_eq!(children(&c, path).await.len(), 1, "try_acquire left a node");

    let r = b
        .acquire_timeout(Duration::from_millis(400))
        .await
        .expect("timed acquire");
    assert!(r.is_none());
    assert_eq!(
        children(&c, path).await,
        vec![held.node_path().rsplit('/').next().unwrap().to_string()],
        "acquire_timeout left a node"
    );

    // A cancelled acquire (the future dropped) leaves nothing either.
    let waiting = tokio::time::timeout(Duration::from_millis(300), b.acquire()).await;
    assert!(waiting.is_err());
    let c2 = c.clone();
    eventually(
        Duration::from_secs(10),
        "cancelled waiter's node deleted",
        move || {
            let c2 = c2.clone();
            async move { children(&c2, path).await.len() == 1 }
        },
    )
    .await;

    held.release().await.expect("release");
    let g = b.try_acquire().await.expect("try").expect("free now");
    // The handle that holds the lock does not enter it again: reentrancy is explicit.
    assert!(b
        .acquire_timeout(Duration::from_millis(100))
        .await
        .expect("busy")
        .is_none());
    let r = g.reenter();
    assert_eq!(r.hold_count(), 2);
    drop(r);
    g.release().await.expect("release");
    assert!(children(&c, path).await.is_empty());
    c.close().await;
}

both_servers!(
    try_acquire_and_timeouts_apache,
    try_acquire_and_timeouts_zooraft,
    try_acquire_and_timeouts
);

/// The client-to-server frame count once it has not moved for 300 ms (bounded: 10 s).
async fn settled_frames(proxy: &Proxy) -> u64 {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let mut last = proxy.frames_forwarded(Direction::ClientToServer);
    loop {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let now = proxy.frames_forwarded(Direction::ClientToServer);
        if now == last || tokio::time::Instant::now() >= deadline {
            return now;
        }
        last = now;
    }
}

async fn reentrancy_does_not_touch_the_server(kind: ServerKind) {
    let server = server(kind);
    let proxy = Proxy::start(server.addr());
    // A long session: the client's pings (every 2/3 of the timeout) would count as frames.
    let c = client_with_timeout(&proxy.connect_string(), Duration::from_secs(30)).await;
    let observer = client(&server.connect_string()).await;
    let path = "/locks/reentrant";
    let mutex = Mutex::new(c.clone(), path);
    let first = mutex.acquire().await.expect("acquire");
    // The lock's monitor arms a watch on the node just after the acquire returns (its own
    // request, not the reentrant acquires'): count from when the client has gone quiet.
    let before = settled_frames(&proxy).await;
    let second = first.reenter();
    let third = second.reenter();
    assert_eq!(
        proxy.frames_forwarded(Direction::ClientToServer),
        before,
        "a reentrant acquire sent a request"
    );
    assert_eq!(third.hold_count(), 3);
    assert_eq!(first.node_path(), second.node_path());
    assert_eq!(first.fencing_token(), third.fencing_token());

    // Another handle in the same process is excluded, and so is a clone of this one:
    // reentrancy goes through the guard, never through the handle.
    let other = Mutex::new(c.clone(), path);
    assert!(other.try_acquire().await.expect("try").is_none());
    assert!(
        mutex.clone().try_acquire().await.expect("try").is_none(),
        "a clone of the handle entered the held lock"
    );
    assert!(
        mutex
            .acquire_timeout(Duration::from_millis(300))
            .await
            .expect("timeout")
            .is_none(),
        "the handle itself entered the held lock"
    );

    second.release().await.expect("release");
    drop(third);
    assert_eq!(
        children(&observer, path).await.len(),
        1,
        "released too early"
    );
    assert!(first.is_valid());
    first.release().await.expect("release");
    assert!(children(&observer, path).await.is_empty());
    c.close().await;
    observer.close().await;
}

both_servers!(
    reentrancy_does_not_touch_the_server_apache,
    reentrancy_does_not_touch_the_server_zooraft,
    reentrancy_does_not_touch_the_server
);

/// A client that counts the calls each waiter makes.
struct Counting {
    inner: Arc<dyn ZkClient>,
    lists: AtomicUsize,
}

#[async_trait]
impl Forward for Counting {
    fn inner(&self) -> &Arc<dyn ZkClient> {
        &self.inner
    }
    async fn get_children(&self, path: &str) -> ZkResult<Vec<String>> {
        self.lists.fetch_add(1, Ordering::SeqCst);
        self.inner.get_children(path).await
    }
}

async fn fifo_without_herd(kind: ServerKind) {
    let server = server(kind);
    let c = client(&server.connect_string()).await;
    let path = "/locks/fifo";
    let holder = Mutex::new(c.clone(), path);
    let mut guard = Some(holder.acquire().await.expect("acquire"));
    let first_token = guard.as_ref().unwrap().fencing_token();

    // Five waiters, queued one after the other, each through its own counting client.
    let waiters: Vec<Arc<Forwarding<Counting>>> = (0..5)
        .map(|_| {
            Forwarding::client(Counting {
                inner: c.clone(),
                lists: AtomicUsize::new(0),
            })
        })
        .collect();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let (release_tx, _) = tokio::sync::broadcast::channel::<usize>(16);
    let mut tasks = Vec::new();
    for (i, w) in waiters.iter().enumerate() {
        let m = Mutex::new(w.clone(), path);
        let tx = tx.clone();
        let mut release_rx = release_tx.subscribe();
        tasks.push(tokio::spawn(async move {
            let g = m.acquire().await.expect("waiter acquires");
            tx.send((i, g.fencing_token(), g.node_path().to_string()))
                .unwrap();
            // Hold until told.
            loop {
                match release_rx.recv().await {
                    Ok(n) if n == i => break,
                    Ok(_) => continue,
                    Err(_) => break,
                }
            }
            g.release().await.expect("release");
        }));
        // Wait until its node is queued before starting the next.
        let c2 = c.clone();
        eventually(Duration::from_secs(10), "waiter queued", move || {
            let c2 = c2.clone();
            async move { children(&c2, path).await.len() == i + 2 }
        })
        .await;
    }
    // Let every waiter settle on its watch.
    tokio::time::sleep(Duration::from_millis(300)).await;

    let mut last_token = first_token;
    for expected in 0..5 {
        let before: Vec<usize> = waiters
            .iter()
            .map(|w| w.0.lists.load(Ordering::SeqCst))
            .collect();
        if expected == 0 {
            let g = guard.take().unwrap();
            g.release().await.expect("release holder");
        } else {
            release_tx.send(expected - 1).unwrap();
        }
        let (i, token, _node) = tokio::time::timeout(Duration::from_secs(20), rx.recv())
            .await
            .expect("next holder")
            .expect("channel");
        assert_eq!(i, expected, "acquisition order is not queue order");
        assert!(token > last_token, "tokens must increase");
        last_token = token;
        tokio::time::sleep(Duration::from_millis(200)).await;
        // Only the next waiter looked at the lock again: no herd.
        for (j, w) in waiters.iter().enumerate() {
            let woke = w.0.lists.load(Ordering::SeqCst) - before[j];
            if j == expected {
                assert!(woke >= 1, "the next waiter did not look");
            } else if j > expected {
                assert_eq!(woke, 0, "waiter {j} woke on release {expected}");
            }
        }
    }
    release_tx.send(4).unwrap();
    for t in tasks {
        tokio::time::timeout(Duration::from_secs(20), t)
            .await
            .expect("waiter finished")
            .expect("waiter task");
    }
    let c2 = c.clone();
    eventually(Duration::from_secs(10), "queue empty", move || {
        let c2 = c2.clone();
        async move { children(&c2, path).await.is_empty() }
    })
    .await;
    c.close().await;
}

both_servers!(
    fifo_without_herd_apache,
    fifo_without_herd_zooraft,
    fifo_without_herd
);

async fn fenced_writes_and_node_deletion(kind: ServerKind) {
    let server = server(kind);
    let c = client(&server.connect_string()).await;
    let admin = client(&server.connect_string()).await;
    admin
        .create("/orders", b"", CreateMode::Persistent)
        .await
        .expect("create /orders");
    admin
        .create("/orders/last", b"0", CreateMode::Persistent)
        .await
        .expect("create /orders/last");
    // What a failed multi looks like on the wire: ops before the failing one report 0,
    // the failing one its code, the ones after RuntimeInconsistency; nothing is applied.
    let r = c
        .multi(&[
            Op::SetData {
                path: "/orders/last".into(),
                data: b"x".to_vec(),
                version: -1,
            },
            Op::Check {
                path: "/locks/none".into(),
                version: -1,
            },
            Op::SetData {
                path: "/orders/last".into(),
                data: b"y".to_vec(),
                version: -1,
            },
        ])
        .await
        .expect("multi answered");
    assert_eq!(
        r,
        vec![
            OpResult::Error(ErrorCode::Ok),
            OpResult::Error(ErrorCode::NoNode),
            OpResult::Error(ErrorCode::RuntimeInconsistency)
        ]
    );
    assert_eq!(admin.get_data("/orders/last").await.unwrap().0, b"0");
    let mutex = Mutex::new(c.clone(), "/locks/fenced");
    let guard = mutex.acquire().await.expect("acquire");

    let stat = guard
        .fenced_set_data("/orders/last", b"1", 0)
        .await
        .expect("fenced write while holding");
    assert_eq!(stat.version, 1);
    // A failing op fails the whole transaction, and says which op.
    let err = guard
        .fenced(vec![
            Op::SetData {
                path: "/orders/last".into(),
                data: b"2".to_vec(),
                version: -1,
            },
            Op::SetData {
                path: "/orders/last".into(),
                data: b"3".to_vec(),
                version: 0,
            },
        ])
        .await
        .unwrap_err();
    assert_eq!(
        err,
        Error::OpFailed {
            index: 1,
            code: ErrorCode::BadVersion
        }
    );
    assert_eq!(admin.get_data("/orders/last").await.unwrap().0, b"1");
    let created = guard
        .fenced(vec![Op::Create {
            path: "/orders/o-".into(),
            data: b"x".to_vec(),
            mode: CreateMode::PersistentSequential,
            acl: Vec::new(),
        }])
        .await
        .expect("fenced create");
    assert!(matches!(&created[0], OpResult::Create(p) if p.starts_with("/orders/o-")));

    // An operator deletes the lock node: the holder hears of it, and its fenced writes fail.
    admin
        .delete(guard.node_path(), -1)
        .await
        .expect("delete lock node");
    let reason = tokio::time::timeout(Duration::from_secs(10), guard.lost())
        .await
        .expect("lost() completes");
    assert_eq!(reason, LostReason::NodeDeleted);
    assert!(!guard.is_valid());
    assert!(matches!(
        guard.fenced_set_data("/orders/last", b"9", -1).await,
        Err(Error::Lost(_))
    ));
    // Reentering a lost lock gives a guard that knows it is lost.
    let again = guard.reenter();
    assert!(!again.is_valid());
    assert!(matches!(again.fenced(vec![]).await, Err(Error::Lost(_))));
    drop(again);
    guard.release().await.expect("release a lost lock");
    // The server-side check fences even a holder that did not notice: a new holder's node,
    // deleted behind its back, fails the multi.
    let g2 = mutex.acquire().await.expect("acquire again");
    admin.delete(g2.node_path(), -1).await.expect("delete");
    let r = g2.fenced_set_data("/orders/last", b"9", -1).await;
    assert!(matches!(r, Err(Error::Lost(_))), "{r:?}");
    assert_eq!(admin.get_data("/orders/last").await.unwrap().0, b"1");
    drop(g2);
    c.close().await;
    admin.close().await;
}

both_servers!(
    fenced_writes_and_node_deletion_apache,
    fenced_writes_and_node_deletion_zooraft,
    fenced_writes_and_node_deletion
);

/// A waiter with a second node of its own (same protection prefix, same session: what a
/// create leaves when its reply is lost and the protection search asks a member that has
/// not applied it yet) deletes it, so whoever queued behind that node is not stuck there.
async fn a_second_node_of_ours_is_deleted(kind: ServerKind, backend: common::Backend) {
    let server = server(kind);
    let a = client(&server.connect_string()).await;
    // The waiter with the twin, on the backend under test.
    let b = common::connect(backend, &server.connect_string(), Duration::from_secs(8)).await;
    let c = client(&server.connect_string()).await;
    let path = "/locks/twins";
    let held = Mutex::new(a.clone(), path)
        .acquire()
        .await
        .expect("A acquires");
    let b_mutex = Mutex::new(b.clone(), path);
    let b_task = tokio::spawn({
        let m = b_mutex.clone();
        async move { m.acquire_timeout(Duration::from_secs(20)).await }
    });
    eventually(Duration::from_secs(10), "B queues", || async {
        b_mutex.participants().await.is_ok_and(|p| p.len() == 2)
    })
    .await;
    let participants = b_mutex.participants().await.expect("participants");
    let b_node = &participants[1].node;
    // The twin: B's prefix, B's session, queued after B's node.
    let (twin, _) = b
        .create(
            &format!("{path}/{}lock-", &b_node[..40]),
            b"",
            CreateMode::EphemeralSequential,
        )
        .await
        .expect("create the twin");
    // C queues behind the twin.
    let c_mutex = Mutex::new(c.clone(), path);
    let c_task = tokio::spawn({
        let m = c_mutex.clone();
        async move { m.acquire_timeout(Duration::from_secs(20)).await }
    });
    eventually(Duration::from_secs(10), "C queues", || async {
        children(&a, path).await.len() == 4
    })
    .await;
    held.release().await.expect("A releases");
    let b_guard = b_task
        .await
        .expect("B's task")
        .expect("B acquires")
        .expect("B within its timeout");
    assert!(
        !children(&a, path)
            .await
            .iter()
            .any(|n| twin.ends_with(n.as_str())),
        "B deleted its twin {twin}"
    );
    b_guard.release().await.expect("B releases");
    let c_guard = c_task
        .await
        .expect("C's task")
        .expect("C acquires")
        .expect("C is not stuck behind the twin");
    c_guard.release().await.expect("C releases");
    for x in [a, b, c] {
        x.close().await;
    }
}

every_backend!(second_node_of_ours, a_second_node_of_ours_is_deleted);
