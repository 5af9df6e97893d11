//! End-to-end tests of the read-write lock: readers share, a writer excludes everyone,
//! writers are not starved, and a writer may take (and keep, after a downgrade) a read lock.

use crate::common;

use std::time::Duration;

use zooraft_recipes::{LockOptions, RwLock};
use zooraft_tests::ServerKind;

use common::{children, client, eventually, server};

async fn readers_share_writers_exclude(kind: ServerKind) {
    let server = server(kind);
    let c = client(&server.connect_string()).await;
    let path = "/locks/rw";
    let labelled = |label: &str| {
        RwLock::with_options(c.clone(), path, LockOptions::default().label(label)).expect("options")
    };
    let a = labelled("reader-a");
    let b = labelled("reader-b");
    let w = labelled("writer");
    let late = labelled("late-reader");

    let r1 = a.read_lock().acquire().await.expect("reader a");
    let r2 = b
        .read_lock()
        .try_acquire()
        .await
        .expect("try")
        .expect("readers share");
    assert!(w.write_lock().try_acquire().await.expect("try").is_none());
    assert_eq!(children(&c, path).await.len(), 2, "try_acquire left a node");

    // A writer queues behind the readers...
    let wl = w.write_lock().clone();
    let writer = tokio::spawn(async move { wl.acquire().await.expect("writer") });
    let cc = c.clone();
    eventually(Duration::from_secs(10), "writer queued", move || {
        let cc = cc.clone();
        async move { children(&cc, path).await.len() == 3 }
    })
    .await;
    // ...and a reader arriving after it waits behind it: writers are not starved.
    assert!(late.read_lock().try_acquire().await.expect("try").is_none());
    assert!(late
        .read_lock()
        .acquire_timeout(Duration::from_millis(300))
        .await
        .expect("timed")
        .is_none());

    let parts = a.read_lock().participants().await.expect("participants");
    let holders: Vec<bool> = parts.iter().map(|p| p.holder).collect();
    assert_eq!(holders, vec![true, true, false]);
    assert!(parts[2].exclusive && !parts[0].exclusive);
    assert_eq!(parts[2].owner.as_ref().unwrap().label, "writer");

    r1.release().await.expect("release");
    assert!(!writer.is_finished());
    let token_r2 = r2.fencing_token();
    r2.release().await.expect("release");
    let wg = tokio::time::timeout(Duration::from_secs(20), writer)
        .await
        .expect("writer acquires once readers leave")
        .expect("task");
    assert!(wg.fencing_token() > token_r2);

    let lr = late.read_lock().clone();
    let reader = tokio::spawn(async move { lr.acquire().await.expect("late reader") });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !reader.is_finished(),
        "a reader got in while a writer held the lock"
    );
    wg.release().await.expect("release");
    let rg = tokio::time::timeout(Duration::from_secs(20), reader)
        .await
        .expect("reader after writer")
        .expect("task");
    rg.release().await.expect("release");
    assert!(children(&c, path).await.is_empty());
    c.close().await;
}

both_servers!(
    readers_share_writers_exclude_apache,
    readers_share_writers_exclude_zooraft,
    readers_share_writers_exclude
);

async fn writer_takes_read_lock_and_downgrades(kind: ServerKind) {
    let server = server(kind);
    let c = client(&server.connect_string()).await;
    let path = "/locks/rw-downgrade";
    let mine = RwLock::new(c.clone(), path);
    let other_writer = RwLock::new(c.clone(), path);
    let other_reader = RwLock::new(c.clone(), path);

    let w = mine.write_lock().acquire().await.expect("write");
    let r = tokio::time::timeout(Duration::from_secs(5), w.acquire_read())
        .await
        .expect("a writer takes the read lock without waiting")
        .expect("read");
    // A reader cannot take the write lock it does not hold (no upgrade): another writer waits.
    let ow = other_writer.write_lock().clone();
    let waiting_writer = tokio::spawn(async move { ow.acquire().await.expect("other writer") });
    let cc = c.clone();
    eventually(Duration::from_secs(10), "other writer queued", move || {
        let cc = cc.clone();
        async move { children(&cc, path).await.len() == 3 }
    })
    .await;

    // Downgrade: release the write lock, keep reading. The waiting writer stays out.
    w.release().await.expect("release write");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !waiting_writer.is_finished(),
        "writer got in during our read lock"
    );
    let parts = mine.read_lock().participants().await.expect("participants");
    assert!(parts[0].holder && !parts[0].exclusive, "{parts:?}");
    // A reader arriving now queues behind the waiting writer.
    assert!(other_reader
        .read_lock()
        .try_acquire()
        .await
        .expect("try")
        .is_none());

    r.release().await.expect("release read");
    let g = tokio::time::timeout(Duration::from_secs(20), waiting_writer)
        .await
        .expect("writer after downgrade")
        .expect("task");
    g.release().await.expect("release");
    assert!(children(&c, path).await.is_empty());
    c.close().await;
}

both_servers!(
    writer_takes_read_lock_and_downgrades_apache,
    writer_takes_read_lock_and_downgrades_zooraft,
    writer_takes_read_lock_and_downgrades
);
