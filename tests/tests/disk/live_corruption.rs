//! Corruption while a member runs (issue 26, point 3): damage appears on a running member's
//! disk, not only between a stop and a start (`disk_faults.rs` covers those). zooraft only:
//! ZooKeeper has no scrub to compare with (see the book, docs/src/operations.md, "Disk faults and clocks").
//!
//! - A flipped bit in one of a running follower's table files: the scrub
//!   (`scrubIntervalSeconds`) reads it back within seconds and the member stops, naming the
//!   damage and the repair; emptied (myid kept) and started again, it catches up. The
//!   others serve throughout; no member serves a different tree.
//! - A torn snapshot file on a running follower: the scrub finds it and the member writes a
//!   fresh one from its tree, so a restart then loads a sound one.
//! - A damaged snapshot file on the leader, with a follower so far behind that it needs the
//!   snapshot: the leader checks what it sends, never sends the damage, writes a fresh one
//!   and sends that (the follower used to stop on "an unusable snapshot from the leader").

use std::path::PathBuf;
use std::time::Duration;

use zookeeper_client as zc;
use zooraft_tests::faults::{self, Rng};
use zooraft_tests::rt::{eventually, within};
use zooraft_tests::zc::persistent;
use zooraft_tests::TestEnsemble;

const WAIT: Duration = Duration::from_secs(60);

fn seed() -> u64 {
    std::env::var("FAULT_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5c4b)
}

async fn create_all(hosts: &str, prefix: &str, n: usize) -> zc::Client {
    let c = zooraft_tests::zc::connect(hosts, Duration::from_secs(10), WAIT).await;
    for i in 0..n {
        let path = format!("{prefix}{i}");
        within(&path, WAIT, c.create(&path, path.as_bytes(), &persistent()))
            .await
            .unwrap_or_else(|e| panic!("create {path}: {e}"));
    }
    c
}

fn hosts_but(e: &TestEnsemble, skip: usize) -> String {
    let hosts: Vec<String> = (0..e.len())
        .filter(|i| *i != skip)
        .map(|i| e.member(i).connect_string())
        .collect();
    hosts.join(",")
}

/// A figure of `mntr` as a number (0 when absent).
fn figure(e: &TestEnsemble, i: usize, key: &str) -> u64 {
    e.member(i)
        .figure(key)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// The snapshot files of member `i`, once no snapshot is being written.
fn settled_snapshots(e: &TestEnsemble, i: usize) -> Vec<PathBuf> {
    let dir = e.member(i).data_dir();
    eventually("the snapshot files to settle", WAIT, || {
        let files = faults::files_under(&dir);
        let writing = files
            .iter()
            .any(|p| p.extension().is_some_and(|x| x == "tmp"));
        let snaps: Vec<PathBuf> = files
            .into_iter()
            .filter(|p| p.extension().is_some_and(|x| x == "snap"))
            .collect();
        (!writing && snaps.len() == 1).then_some(snaps)
    })
}

#[test]
fn a_table_flipped_while_running_stops_the_member_with_the_repair() {
    let rt = zooraft_tests::rt::runtime();
    let mut e = TestEnsemble::start(3, 0, &[("scrubIntervalSeconds", "1")]);
    let victim = (e.leader() + 1) % 3;
    let client = rt.block_on(create_all(&hosts_but(&e, victim), "/before", 300));
    e.converged();
    // A restart writes what the write-ahead log held out to table files.
    e.member_mut(victim).restart();
    let dir = e.member(victim).data_dir();
    let mut rng = Rng::new(seed());
    let (table, pos) = faults::flip_live_table(&dir, &mut rng).expect("a table file");
    eprintln!("flipped {} at {pos}", table.display());
    let status = e
        .member_mut(victim)
        .wait_exit(WAIT)
        .expect("the scrub stops the member");
    let log = std::fs::read_to_string(e.member(victim).log_path()).expect("log");
    assert!(!status.success(), "{status}: {log}");
    assert!(
        log.contains("is damaged") && log.contains("Corruption") && log.contains("Repair"),
        "the member stopped without naming the damage and the repair: {log}"
    );
    // The others served throughout.
    rt.block_on(async {
        for i in 0..50 {
            let path = format!("/during{i}");
            within(&path, WAIT, client.create(&path, b"", &persistent()))
                .await
                .unwrap_or_else(|err| panic!("create {path}: {err}"));
        }
    });
    // The repair the message names: empty the directory (the harness writes myid again).
    std::fs::remove_dir_all(&dir).expect("empty the data directory");
    e.member_mut(victim).restart();
    let (digest, _) = e.converged();
    eprintln!("repaired; every member at {digest}");
}

#[test]
fn a_torn_snapshot_on_a_running_follower_is_written_afresh() {
    let rt = zooraft_tests::rt::runtime();
    let mut e = TestEnsemble::start(
        3,
        0,
        &[("scrubIntervalSeconds", "1"), ("snapshotEntries", "100")],
    );
    let victim = (e.leader() + 1) % 3;
    let _client = rt.block_on(create_all(&hosts_but(&e, victim), "/n", 250));
    e.converged();
    settled_snapshots(&e, victim);
    let mut rng = Rng::new(seed());
    let (snap, cut) =
        faults::tear_snapshot(&e.member(victim).data_dir(), &mut rng).expect("a snapshot");
    eprintln!("tore {} at {cut}", snap.display());
    eventually("the follower repairs its snapshot", WAIT, || {
        (figure(&e, victim, "zk_snapshot_repairs") >= 1).then_some(())
    });
    let repaired = settled_snapshots(&e, victim);
    assert!(
        std::fs::metadata(&repaired[0]).expect("repaired").len() > cut,
        "still torn"
    );
    // A restart loads the repaired snapshot and serves the same tree.
    e.member_mut(victim).kill();
    e.member_mut(victim).restart();
    e.converged();
}

#[test]
fn a_damaged_snapshot_on_the_leader_is_never_sent() {
    let rt = zooraft_tests::rt::runtime();
    // No scrub: the check before sending is what is tested.
    let mut e = TestEnsemble::start(
        3,
        0,
        &[
            ("scrubIntervalSeconds", "0"),
            ("snapshotEntries", "100"),
            ("snapshotRetainEntries", "10"),
        ],
    );
    let leader = e.leader();
    let behind = (leader + 1) % 3;
    e.member_mut(behind).kill();
    let _client = rt.block_on(create_all(&hosts_but(&e, behind), "/n", 250));
    let snaps = settled_snapshots(&e, leader);
    // A flipped bit in the middle: the same length, so only the checksum tells.
    let path = &snaps[0];
    let mut bytes = std::fs::read(path).expect("read the snapshot");
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x10;
    std::fs::write(path, &bytes).expect("damage the snapshot");
    e.member_mut(behind).respawn();
    eventually("the leader repairs its snapshot", WAIT, || {
        if let Some(status) = e.member_mut(behind).exited() {
            let log = e.member(behind).log_tail();
            panic!("the follower stopped ({status}): {log}");
        }
        (figure(&e, leader, "zk_snapshot_repairs") >= 1).then_some(())
    });
    e.converged();
    assert!(
        e.member_mut(behind).exited().is_none(),
        "{}",
        e.member(behind).log_tail()
    );
}
