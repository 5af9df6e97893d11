//! Rolling restarts and leader transfer.
//!
//! - A rolling restart of all three members (SIGTERM, start again, one at a time) under a
//!   write load from several clients: no session expires, no write fails other than by
//!   ConnectionLoss (retried), every acknowledged write is there at the end and the members
//!   agree. The longest stall (the longest interval in which no write was acknowledged by
//!   anyone) is measured and printed, never asserted: zooraft with leader transfer on
//!   shutdown (the default), zooraft without it (`leaderTransferOnShutdown=no`, so the
//!   others wait out an election timeout, as in ZooKeeper), and Apache ZooKeeper 3.8.
//! - `ydld` and `rqld` (zooraft's leader-transfer four-letter words) move leadership.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use harness::rt::{block_on, eventually, runtime};
use harness::zc::{connect, persistent};
use harness::{ServerKind, TestEnsemble, TestServer};
use zookeeper_client as zc;

const WRITERS: usize = 4;
const SESSION: Duration = Duration::from_secs(15);
/// A writer gives up on one attempt after this long and retries.
const ATTEMPT: Duration = Duration::from_secs(10);

/// What the writers saw.
#[derive(Default)]
struct Load {
    /// Paths whose create was acknowledged.
    acked: Mutex<Vec<String>>,
    /// When the last write was acknowledged, and the longest gap between two
    /// acknowledgements (by any writer) while members were being restarted.
    last_ack: Mutex<Option<Instant>>,
    longest_stall: Mutex<Duration>,
    measuring: AtomicBool,
    expired: AtomicU64,
    connection_losses: AtomicU64,
    /// Errors other than ConnectionLoss (or a timed-out attempt): must stay zero.
    failed: Mutex<Vec<String>>,
    stop: AtomicBool,
}

impl Load {
    fn ack(&self, path: String) {
        let now = Instant::now();
        let mut last = self.last_ack.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(before) = *last {
            if self.measuring.load(Ordering::SeqCst) {
                let mut longest = self.longest_stall.lock().unwrap_or_else(|e| e.into_inner());
                *longest = (*longest).max(now - before);
            }
        }
        *last = Some(now);
        drop(last);
        self.acked
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(path);
    }
}

/// One writer: its own session, creates `/rolling/w<i>-<k>` one after the other. An attempt
/// lost to ConnectionLoss (or a reset) is retried with the same path (NodeExists then means the lost one
/// committed).
async fn writer(i: usize, hosts: String, load: Arc<Load>) {
    let client = connect(&hosts, SESSION, Duration::from_secs(30)).await;
    let mut k = 0u64;
    while !load.stop.load(Ordering::SeqCst) {
        k += 1;
        let path = format!("/rolling/w{i}-{k:06}");
        let mut retried = false;
        loop {
            let attempt =
                tokio::time::timeout(ATTEMPT, client.create(&path, b"x", &persistent())).await;
            match attempt {
                Ok(Ok(_)) => break load.ack(path),
                Ok(Err(zc::Error::NodeExists)) if retried => break load.ack(path),
                // zookeeper-client reports the connection's I/O error (a reset) as a custom
                // error: a connection loss all the same.
                Ok(Err(zc::Error::ConnectionLoss | zc::Error::Custom(_))) | Err(_) => {
                    load.connection_losses.fetch_add(1, Ordering::SeqCst);
                    retried = true;
                    if load.stop.load(Ordering::SeqCst) {
                        return;
                    }
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                Ok(Err(zc::Error::SessionExpired)) => {
                    load.expired.fetch_add(1, Ordering::SeqCst);
                    return;
                }
                Ok(Err(e)) => {
                    let mut failed = load.failed.lock().unwrap_or_else(|e| e.into_inner());
                    failed.push(format!("{path}: {e}"));
                    break;
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Restarts every member in turn under load; returns the longest write stall.
fn rolling_restart(kind: ServerKind, extra: &[(&str, &str)], label: &str) -> Duration {
    let mut ensemble = TestEnsemble::start_kind(kind, 3, 0, extra);
    let hosts = ensemble.connect_string();
    let rt = runtime();
    let load = Arc::new(Load::default());
    rt.block_on(async {
        let c = connect(&hosts, SESSION, Duration::from_secs(30)).await;
        c.create("/rolling", b"", &persistent())
            .await
            .expect("create /rolling");
    });
    let writers: Vec<_> = (0..WRITERS)
        .map(|i| rt.spawn(writer(i, hosts.clone(), load.clone())))
        .collect();
    std::thread::sleep(Duration::from_secs(2));
    load.measuring.store(true, Ordering::SeqCst);
    let first_leader = ensemble.leader();
    // Followers first, the leader last (as an operator would), each back and serving before
    // the next goes.
    let mut order: Vec<usize> = (0..3).filter(|i| *i != first_leader).collect();
    order.push(first_leader);
    for i in order {
        let exited = ensemble.member_mut(i).stop();
        assert!(exited, "{label}: member {} did not stop on SIGTERM", i + 1);
        std::thread::sleep(Duration::from_millis(500));
        ensemble.member_mut(i).restart();
        ensemble.wait_all_serving();
        std::thread::sleep(Duration::from_secs(2));
    }
    load.measuring.store(false, Ordering::SeqCst);
    std::thread::sleep(Duration::from_secs(1));
    load.stop.store(true, Ordering::SeqCst);
    rt.block_on(async {
        for w in writers {
            let _ = tokio::time::timeout(Duration::from_secs(30), w).await;
        }
    });
    let failed = load
        .failed
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    assert!(failed.is_empty(), "{label}: writes failed: {failed:?}");
    assert_eq!(
        load.expired.load(Ordering::SeqCst),
        0,
        "{label}: sessions expired"
    );
    let acked = load.acked.lock().unwrap_or_else(|e| e.into_inner()).clone();
    assert!(!acked.is_empty(), "{label}: no write was acknowledged");
    // Every acknowledged write is on every member.
    for i in 0..3 {
        let addr = ensemble.member(i).connect_string();
        rt.block_on(async {
            let c = connect(&addr, SESSION, Duration::from_secs(30)).await;
            c.sync("/rolling").await.expect("sync");
            let children = c.list_children("/rolling").await.expect("children");
            let present: std::collections::HashSet<String> = children.into_iter().collect();
            for p in &acked {
                let name = p.trim_start_matches("/rolling/");
                assert!(
                    present.contains(name),
                    "{label}: acknowledged {p} missing on member {}",
                    i + 1
                );
            }
        });
    }
    if kind == ServerKind::Zooraft {
        ensemble.converged();
    }
    let stall = *load.longest_stall.lock().unwrap_or_else(|e| e.into_inner());
    eprintln!(
        "MEASURED {label}: longest write stall {} ms; {} writes acknowledged, {} ConnectionLoss retries, 0 expired",
        stall.as_millis(),
        acked.len(),
        load.connection_losses.load(Ordering::SeqCst)
    );
    stall
}

#[test]
fn rolling_restart_with_leader_transfer_zooraft() {
    rolling_restart(
        ServerKind::Zooraft,
        &[],
        "zooraft, leader transfer on shutdown",
    );
}

#[test]
fn rolling_restart_without_leader_transfer_zooraft() {
    rolling_restart(
        ServerKind::Zooraft,
        &[("leaderTransferOnShutdown", "no")],
        "zooraft, no leader transfer",
    );
}

#[test]
fn rolling_restart_apache() {
    rolling_restart(ServerKind::Apache, &[], "Apache ZooKeeper 3.8");
}

/// The leader-transfer words: `ydld` on the leader hands over, `ydld` elsewhere says who
/// leads, `rqld` on a follower makes it the leader.
#[test]
fn ydld_and_rqld_move_leadership() {
    let ensemble = TestEnsemble::start(3, 0, &[]);
    let leader = ensemble.leader();
    let follower = (leader + 1) % 3;
    let answer = ensemble
        .member(follower)
        .four_letter_word("ydld")
        .expect("ydld on a follower");
    assert_eq!(
        answer,
        format!("Not the leader; the leader is server {}.\n", leader + 1)
    );
    let answer = ensemble
        .member(leader)
        .four_letter_word("ydld")
        .expect("ydld on the leader");
    assert!(
        answer.starts_with("Leadership transfer requested"),
        "{answer}"
    );
    let next = eventually("a new leader after ydld", Duration::from_secs(30), || {
        let l = ensemble.leader();
        (l != leader).then_some(l)
    });
    // rqld on a member that does not lead makes it the leader.
    let wants = (0..3).find(|i| *i != next).expect("a follower");
    let answer = ensemble
        .member(wants)
        .four_letter_word("rqld")
        .expect("rqld on a follower");
    assert_eq!(
        answer,
        format!(
            "Leadership requested from the leader, server {}.\n",
            next + 1
        )
    );
    eventually("the requester leads", Duration::from_secs(30), || {
        (ensemble.leader() == wants).then_some(())
    });
    let answer = ensemble
        .member(wants)
        .four_letter_word("rqld")
        .expect("rqld on the leader");
    assert_eq!(answer, "Already the leader.\n");
    // The ensemble still takes writes.
    let hosts = ensemble.connect_string();
    block_on(async {
        let c = connect(&hosts, SESSION, Duration::from_secs(30)).await;
        c.create("/after-transfer", b"", &persistent())
            .await
            .expect("a write after the transfers");
    });
    ensemble.converged();
}

/// The leader-transfer words are whitelisted like the others; a standalone server has
/// nobody to hand over to.
#[test]
fn leader_transfer_words_follow_the_whitelist() {
    let server = TestServer::builder(ServerKind::Zooraft).start();
    for word in ["ydld", "rqld"] {
        assert_eq!(
            server.four_letter_word(word).expect(word),
            format!("{word} is not executed because it is not in the whitelist.\n")
        );
    }
    let server = TestServer::builder(ServerKind::Zooraft)
        .config("4lw.commands.whitelist", "srvr, ydld, rqld")
        .start();
    for word in ["ydld", "rqld"] {
        assert_eq!(
            server.four_letter_word(word).expect(word),
            "A standalone server has nobody to transfer to.\n"
        );
    }
}
