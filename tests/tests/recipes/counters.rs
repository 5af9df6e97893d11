//! SharedCount and AtomicCounter: their semantics on both servers and both client
//! backends, concurrent writers that never lose an update, and Curator (Java processes)
//! changing the same counters at the same time.

use crate::common;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use zooraft_recipes::{AtomicCounter, SharedCount, ZkClient};
use zooraft_tests::ServerKind;

use common::{client, connect, server, Backend};

async fn semantics(kind: ServerKind, backend: Backend) {
    let server = server(kind);
    let c = connect(backend, &server.connect_string(), Duration::from_secs(8)).await;
    // SharedCount: seeded once, versioned, compare-and-set on the version.
    let count = SharedCount::new(c.clone(), "/config/app/workers", 4).expect("count");
    count.start().await.expect("start");
    let again = SharedCount::new(c.clone(), "/config/app/workers", 9).expect("count");
    again.start().await.expect("start again keeps the value");
    let seen = count.get().await.expect("get");
    assert_eq!(seen.value, 4);
    let (data, _) = c.get_data("/config/app/workers").await.expect("raw");
    assert_eq!(data, 4i32.to_be_bytes(), "Curator's layout");
    assert!(count.try_set(seen, 5).await.expect("try_set"));
    assert!(
        !again.try_set(seen, 6).await.expect("stale try_set"),
        "a stale version loses"
    );
    let waiter = {
        let count = count.clone();
        let now = count.get().await.expect("get");
        tokio::spawn(async move { count.changed_since(now).await })
    };
    again.set(-7).await.expect("set");
    let changed = tokio::time::timeout(Duration::from_secs(20), waiter)
        .await
        .expect("changed_since wakes")
        .expect("task")
        .expect("changed");
    assert_eq!(changed.value, -7);
    // AtomicCounter: 0 until written, Curator's AtomicValue.
    let long = AtomicCounter::new(c.clone(), "/counters/a/orders").expect("long");
    assert_eq!(long.get().await.expect("get"), 0);
    let cas = long.compare_and_set(0, 3).await.expect("cas on nothing");
    assert!(
        !cas.succeeded,
        "as Curator: a node never written does not match"
    );
    assert!(long.initialize(5).await.expect("initialize"));
    assert!(!long.initialize(7).await.expect("initialize again"));
    let wrong = long.compare_and_set(4, 9).await.expect("cas");
    let right = long.compare_and_set(5, 9).await.expect("cas");
    assert!(!wrong.succeeded && right.succeeded && right.post_value == 9);
    let inc = long.increment().await.expect("increment");
    assert_eq!(
        (inc.pre_value, inc.post_value, inc.succeeded),
        (9, 10, true)
    );
    let sub = long.add(-15).await.expect("add");
    assert_eq!(sub.post_value, -5);
    assert_eq!(long.try_set(40).await.expect("try_set").post_value, 40);
    long.force_set(i64::MIN).await.expect("force_set");
    assert_eq!(long.get().await.expect("get"), i64::MIN);
    let (data, _) = c.get_data("/counters/a/orders").await.expect("raw");
    assert_eq!(data, i64::MIN.to_be_bytes(), "Curator's layout");
    let fresh = AtomicCounter::new(c.clone(), "/counters/b/fresh").expect("long");
    fresh.force_set(12).await.expect("force_set creates");
    assert_eq!(fresh.get().await.expect("get"), 12);
    // Bad input: a clear error.
    assert!(AtomicCounter::new(c.clone(), "no-slash").is_err());
    c.set_data("/counters/b/fresh", b"abc", -1)
        .await
        .expect("garble");
    assert!(
        fresh.get().await.is_err(),
        "not 8 bytes: an error, not a value"
    );
}

every_backend!(counter_semantics, semantics);

/// Several clients incrementing at once: every increment counted once, every value handed
/// out once.
async fn concurrent(kind: ServerKind, backend: Backend) {
    const TASKS: usize = 4;
    const EACH: usize = 40;
    let server = server(kind);
    let mut tasks = Vec::new();
    for _ in 0..TASKS {
        let c = connect(backend, &server.connect_string(), Duration::from_secs(8)).await;
        tasks.push(tokio::spawn(async move {
            let long = AtomicCounter::new(c, "/counters/concurrent").expect("long");
            let mut got = Vec::new();
            for _ in 0..EACH {
                let v = long.increment().await.expect("increment");
                assert!(v.succeeded, "{v:?}");
                assert_eq!(v.post_value, v.pre_value + 1);
                got.push(v.post_value);
            }
            got
        }));
    }
    let mut all = BTreeSet::new();
    for t in tasks {
        for v in t.await.expect("task") {
            assert!(all.insert(v), "{v} handed out twice");
        }
    }
    assert_eq!(all.len(), TASKS * EACH);
    assert_eq!(all.last().copied(), Some((TASKS * EACH) as i64));
}

every_backend!(concurrent_increments, concurrent);

/// Curator's DistributedAtomicLong and SharedCount and ours on the same paths at once.
async fn interop_with_curator(kind: ServerKind) {
    const EACH: usize = 30;
    let server = server(kind);
    let connect_string = server.connect_string();
    let (long_path, count_path) = ("/counters/mixed/long", "/counters/mixed/count");
    let mut java: tokio::process::Command =
        zooraft_tests::java::java_command("CounterContender").into();
    java.args([&connect_string, long_path, count_path, &EACH.to_string()])
        .kill_on_drop(true);
    let java = java.output();
    let rust = async {
        let c: Arc<dyn ZkClient> = client(&connect_string).await;
        let long = AtomicCounter::new(c.clone(), long_path).expect("long");
        let count = SharedCount::new(c.clone(), count_path, 0).expect("count");
        count.start().await.expect("start");
        for _ in 0..EACH {
            assert!(long.increment().await.expect("increment").succeeded);
            loop {
                let seen = count.get().await.expect("get");
                if count.try_set(seen, seen.value + 1).await.expect("try_set") {
                    break;
                }
            }
        }
        (long, count)
    };
    let (out, (long, count)) =
        tokio::time::timeout(Duration::from_secs(240), async { tokio::join!(java, rust) })
            .await
            .expect("both finish");
    let out = out.expect("run Curator");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("curator-counters"),
        "Curator failed: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(long.get().await.expect("long"), 2 * EACH as i64);
    assert_eq!(count.get().await.expect("count").value, 2 * EACH as i32);
}

both_servers!(
    counters_interop_with_curator_apache,
    counters_interop_with_curator_zooraft,
    interop_with_curator
);
