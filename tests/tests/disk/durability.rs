//! Standalone durability: a write acknowledged to a client survives `kill -9` and restart,
//! and a restart with 100,000 znodes brings every one back with the same zxids, from the
//! log alone or from a snapshot plus the log after it; a clean stop snapshots the log it
//! would otherwise replay.

use std::time::{Duration, Instant};

use zookeeper_client as zc;
use zooraft_tests::zc::persistent;
use zooraft_tests::{ServerKind, TestServer};

const WAIT: Duration = Duration::from_secs(120);

use zooraft_tests::rt::block_on;

async fn connect(hosts: &str) -> zc::Client {
    zooraft_tests::zc::connect(hosts, Duration::from_secs(20), WAIT).await
}

/// Creates `/bulk/n<i>` for `i` in `0..count`, `in_flight` at a time; returns each czxid.
async fn bulk_create(client: &zc::Client, count: usize, in_flight: usize) -> Vec<i64> {
    tokio::time::timeout(WAIT, client.create("/bulk", b"", &persistent()))
        .await
        .expect("in time")
        .expect("/bulk");
    let mut czxids = vec![0i64; count];
    let mut tasks = tokio::task::JoinSet::new();
    let mut next = 0;
    while next < count || !tasks.is_empty() {
        while next < count && tasks.len() < in_flight {
            let c = client.clone();
            let i = next;
            tasks.spawn(async move {
                let (stat, _) = c
                    .create(
                        &format!("/bulk/n{i}"),
                        format!("value-{i}").as_bytes(),
                        &persistent(),
                    )
                    .await
                    .expect("create acknowledged");
                (i, stat.czxid)
            });
            next += 1;
        }
        if let Some(done) = tokio::time::timeout(WAIT, tasks.join_next())
            .await
            .expect("progress")
        {
            let (i, czxid) = done.expect("task");
            czxids[i] = czxid;
        }
    }
    czxids
}

fn digest(server: &TestServer) -> String {
    server
        .four_letter_word("hash")
        .expect("hash")
        .trim()
        .to_string()
}

/// The digest once the server is quiet: a client's closeSession may still be on its way
/// when the client is dropped, and it moves the last zxid.
fn settled_digest(server: &TestServer) -> String {
    let mut last = digest(server);
    for _ in 0..50 {
        std::thread::sleep(Duration::from_millis(200));
        let now = digest(server);
        if now == last {
            return now;
        }
        last = now;
    }
    panic!("the server never went quiet: {last}");
}

#[test]
fn acknowledged_writes_survive_kill_9() {
    let mut server = TestServer::builder(ServerKind::Zooraft)
        .config("4lw.commands.whitelist", "*")
        .start();
    let czxids = block_on(async {
        let c = connect(&server.connect_string()).await;
        bulk_create(&c, 2000, 200).await
    });
    let before = settled_digest(&server);
    server.kill();
    server.restart();
    assert_eq!(
        digest(&server),
        before,
        "same tree and last zxid after kill -9"
    );
    block_on(async {
        let c = connect(&server.connect_string()).await;
        for (i, czxid) in czxids.iter().enumerate().step_by(97) {
            let (data, stat) = c
                .get_data(&format!("/bulk/n{i}"))
                .await
                .expect("acknowledged write present");
            assert_eq!(data, format!("value-{i}").as_bytes());
            assert_eq!(stat.czxid, *czxid);
        }
        // New writes get zxids above everything before the crash.
        let (stat, _) = c
            .create("/after", b"", &persistent())
            .await
            .expect("create");
        assert!(stat.czxid > *czxids.iter().max().expect("some"));
    });
}

fn restart_with_100k(snapshot_every: Option<&str>) {
    let mut b = TestServer::builder(ServerKind::Zooraft).config("4lw.commands.whitelist", "*");
    if let Some(n) = snapshot_every {
        b = b
            .config("snapshotEntries", n)
            .config("snapshotRetainEntries", "100");
    }
    let mut server = b.start();
    let count = 100_000;
    let czxids = block_on(async {
        let c = connect(&server.connect_string()).await;
        bulk_create(&c, count, 1000).await
    });
    let before = settled_digest(&server);
    server.kill();
    let started = Instant::now();
    server.restart();
    let took = started.elapsed();
    println!(
        "restart with {count} znodes ({}): serving after {took:?}",
        if snapshot_every.is_some() {
            "snapshot + log tail"
        } else {
            "log replay"
        }
    );
    assert_eq!(
        digest(&server),
        before,
        "same tree and last zxid after restart"
    );
    block_on(async {
        let c = connect(&server.connect_string()).await;
        let children = c.list_children("/bulk").await.expect("list");
        assert_eq!(children.len(), count);
        for (i, czxid) in czxids.iter().enumerate().step_by(1009) {
            let (_, stat) = c.get_data(&format!("/bulk/n{i}")).await.expect("present");
            assert_eq!(stat.czxid, *czxid, "/bulk/n{i} keeps its zxid");
        }
    });
    if snapshot_every.is_some() {
        let log = std::fs::read_to_string(server.log_path()).unwrap_or_default();
        assert!(log.contains("snapshot taken"), "a snapshot was taken");
    }
}

#[test]
fn restart_with_100k_znodes_from_the_log() {
    restart_with_100k(None);
}

#[test]
fn restart_with_100k_znodes_from_a_snapshot() {
    restart_with_100k(Some("200"));
}

/// The value of a `mntr` line.
fn mntr(server: &TestServer, key: &str) -> Option<String> {
    let answer = server.four_letter_word("mntr").expect("mntr");
    answer.lines().find_map(|l| {
        let (k, v) = l.split_once('\t')?;
        (k == key).then(|| v.trim().to_string())
    })
}

#[test]
fn a_clean_stop_snapshots_the_log_and_the_restart_replays_none() {
    let mut server = TestServer::builder(ServerKind::Zooraft)
        .config("4lw.commands.whitelist", "*")
        .start();
    // About 6 MiB of log: past the share of it a stop snapshots, far below the size after
    // which a running server snapshots by itself.
    let count = 20_000;
    let czxids = block_on(async {
        let c = connect(&server.connect_string()).await;
        let value = vec![b'v'; 300];
        tokio::time::timeout(WAIT, c.create("/big", b"", &persistent()))
            .await
            .expect("in time")
            .expect("/big");
        let mut tasks = tokio::task::JoinSet::new();
        for k in 0..8 {
            let (c, value) = (c.clone(), value.clone());
            tasks.spawn(async move {
                let mut out = Vec::new();
                for i in (k..count).step_by(8) {
                    let (stat, _) = c
                        .create(&format!("/big/n{i}"), &value, &persistent())
                        .await
                        .expect("create acknowledged");
                    out.push((i, stat.czxid));
                }
                out
            });
        }
        let mut czxids = vec![0i64; count];
        while let Some(done) = tokio::time::timeout(WAIT, tasks.join_next())
            .await
            .expect("progress")
        {
            for (i, czxid) in done.expect("task") {
                czxids[i] = czxid;
            }
        }
        czxids
    });
    let before = settled_digest(&server);
    let log = std::fs::read_to_string(server.log_path()).unwrap_or_default();
    assert!(!log.contains("snapshot taken"), "no snapshot while running");
    assert!(server.stop(), "stopped by SIGTERM in time");
    let log = std::fs::read_to_string(server.log_path()).unwrap_or_default();
    let stopping = log.rfind("shutting down").expect("shutdown logged");
    assert!(
        log[stopping..].contains("snapshot taken"),
        "the stop took a snapshot"
    );
    server.restart();
    assert_eq!(digest(&server), before, "same tree and last zxid");
    assert_eq!(
        mntr(&server, "zk_cnt_startup_txns_loaded").as_deref(),
        Some("1"),
        "one start-up replay recorded"
    );
    assert_eq!(
        mntr(&server, "zk_sum_startup_txns_loaded").as_deref(),
        Some("0"),
        "nothing to replay after the snapshot"
    );
    block_on(async {
        let c = connect(&server.connect_string()).await;
        for (i, czxid) in czxids.iter().enumerate().step_by(997) {
            let (data, stat) = c.get_data(&format!("/big/n{i}")).await.expect("present");
            assert_eq!(data.len(), 300);
            assert_eq!(stat.czxid, *czxid, "/big/n{i} keeps its zxid");
        }
    });
}
