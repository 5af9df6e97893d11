//! Disk faults (issue 15, point 3): a data directory that fills up, an fsync that fails with
//! EIO, and flipped bytes in a stopped member's store. zooraft only: ZooKeeper has no
//! free-space reserve or `zk_disk_full` figure to compare with (see the book's operations page, "Disk
//! faults and clocks"). The tmpfs mounts need root; every mount is undone when its server
//! is dropped, also when a test fails.
//!
//! - Full disk: a member below its reserve (`diskReserveMB`) acknowledges no write, says so
//!   in its log, in `mntr` (`zk_disk_full 1`) and `isro` (`ro`), still answers reads and
//!   `ruok`, and resumes by itself once space returns, nothing lost (digests equal). A
//!   leader with a full disk hands leadership over, so the others keep writing.
//! - EIO on fsync (the `zooraft-faultshim` LD_PRELOAD library): the member stops at once
//!   with a clear message (never retries and carries on); clients move to the others;
//!   nothing acknowledged is lost; a restart once the fault is gone catches up.
//! - Flipped bytes (seeded; `FAULT_SEEDS` of them, 6 unless set): a restarted member either
//!   refuses to start with a message naming the corruption or rejoins with the others'
//!   digest; the others serve throughout.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use zookeeper_client as zc;
use zooraft_tests::faults::{self, fill, Rng};
use zooraft_tests::rt::{block_on, eventually, eventually_async, within};
use zooraft_tests::zc::persistent;
use zooraft_tests::{ServerKind, TestEnsemble, TestServer};

const WAIT: Duration = Duration::from_secs(60);
/// Each member's tmpfs, its reserve, and the space a test leaves when it fills the disk.
const TMPFS_BYTES: u64 = 160 << 20;
const RESERVE: (&str, &str) = ("diskReserveMB", "24");
const LEAVE_BYTES: u64 = 8 << 20;

async fn connect(hosts: &str) -> zc::Client {
    zooraft_tests::zc::connect(hosts, Duration::from_secs(10), WAIT).await
}

fn flag(server: &TestServer) -> Option<String> {
    server.figure("zk_disk_full")
}

async fn wait_flag(server: &TestServer, want: &str) {
    eventually_async(&format!("zk_disk_full {want}"), WAIT, || async {
        (flag(server).as_deref() == Some(want)).then_some(())
    })
    .await
}

async fn create(c: &zc::Client, path: &str) {
    within(path, WAIT, c.create(path, path.as_bytes(), &persistent()))
        .await
        .unwrap_or_else(|e| panic!("create {path}: {e}"));
}

/// `hash` once the server is quiet (a closing session may still move the last zxid).
fn quiet_hash(server: &TestServer) -> String {
    let hash = || server.four_letter_word("hash").expect("hash");
    let mut last = hash();
    eventually("a quiet server", WAIT, || {
        std::thread::sleep(Duration::from_millis(300));
        let now = hash();
        let same = now == last;
        last = now;
        same.then(|| last.clone())
    })
}

#[test]
fn full_disk_standalone_holds_writes_and_resumes() {
    let mut server = TestServer::builder(ServerKind::Zooraft)
        .tmpfs_data(TMPFS_BYTES)
        .config(RESERVE.0, RESERVE.1)
        .config("4lw.commands.whitelist", "*")
        .start();
    block_on(async {
        let c = connect(&server.connect_string()).await;
        // A second session for reads: a session's requests are answered in order, so
        // the writer's own reads (and pings) wait behind its held write, as in ZooKeeper.
        let r = connect(&server.connect_string()).await;
        create(&c, "/before").await;
        assert_eq!(flag(&server).as_deref(), Some("0"));
        let filler = fill(&server.data_dir(), LEAVE_BYTES);
        let held = tokio::spawn({
            let c = c.clone();
            async move { c.create("/during", b"d", &persistent()).await }
        });
        wait_flag(&server, "1").await;
        tokio::time::sleep(Duration::from_secs(2)).await;
        let held = if held.is_finished() {
            // Only a lost connection may end it early, never an acknowledgement.
            let out = held.await.expect("task");
            assert!(out.is_err(), "a write was acknowledged on a full disk");
            None
        } else {
            Some(held)
        };
        // Reads and health go on; the log and `isro` say why writes do not.
        let (data, _) = within("read", WAIT, r.get_data("/before"))
            .await
            .expect("read on a full disk");
        assert_eq!(data, b"/before");
        assert_eq!(server.four_letter_word("ruok").expect("ruok"), "imok");
        assert_eq!(server.four_letter_word("isro").expect("isro"), "ro");
        assert!(
            server.log_tail().contains("is full"),
            "{}",
            server.log_tail()
        );
        filler.release();
        // The held write goes through once space returns (its client may have lost its
        // connection meanwhile, waiting: then it learns so from the tree).
        if let Some(held) = held {
            let _ = within("the held write", WAIT, held).await;
        }
        wait_flag(&server, "0").await;
        assert_eq!(server.four_letter_word("isro").expect("isro"), "rw");
        eventually_async("/during applied", WAIT, || async {
            r.check_stat("/during").await.ok().flatten().map(|_| ())
        })
        .await;
        create(&r, "/after").await;
    });
    let before = quiet_hash(&server);
    server.restart();
    assert_eq!(quiet_hash(&server), before, "the restarted tree differs");
    block_on(async {
        let c = connect(&server.connect_string()).await;
        for p in ["/before", "/during", "/after"] {
            assert!(c.check_stat(p).await.expect("stat").is_some(), "{p} lost");
        }
    });
}

/// Creates `path`, again after a lost connection (a leader change drops the clients of
/// every member, as in ZooKeeper); an earlier attempt that was applied counts.
async fn create_retrying(c: &zc::Client, path: &str) {
    eventually_async(path, WAIT, || async {
        match c.create(path, path.as_bytes(), &persistent()).await {
            Ok(_) | Err(zc::Error::NodeExists) => Some(()),
            Err(zc::Error::ConnectionLoss) => None,
            Err(e) => panic!("create {path}: {e}"),
        }
    })
    .await
}

fn full_disk_in_ensemble(leader_fills: bool) {
    let e = TestEnsemble::start_with(3, &[RESERVE], &|_, b| b.tmpfs_data(TMPFS_BYTES));
    let leader = e.leader();
    let victim = if leader_fills {
        leader
    } else {
        (leader + 1) % 3
    };
    let others: Vec<String> = (0..3)
        .filter(|i| *i != victim)
        .map(|i| e.member(i).connect_string())
        .collect();
    block_on(async {
        let c = connect(&others.join(",")).await;
        let v = connect(&e.member(victim).connect_string()).await;
        create(&c, "/before").await;
        e.converged();
        let filler = fill(&e.member(victim).data_dir(), LEAVE_BYTES);
        for i in 0..20 {
            create_retrying(&c, &format!("/w{i}")).await;
        }
        if leader_fills {
            // Deposed and behind the new leader, it stops serving, and then `mntr` answers
            // as ZooKeeper's does ("not currently serving"): its log tells.
            eventually_async("the full disk in the log", WAIT, || async {
                e.member(victim)
                    .log_tail()
                    .contains("is full")
                    .then_some(())
            })
            .await;
        } else {
            wait_flag(e.member(victim), "1").await;
        }
        if leader_fills {
            eventually("another leader", WAIT, || {
                let l = e.leader();
                (l != victim).then_some(l)
            });
        }
        for i in 20..40 {
            create_retrying(&c, &format!("/w{i}")).await;
        }
        let isro = e.member(victim).four_letter_word("isro").expect("isro");
        if leader_fills {
            // It has not caught up with the new leader (it cannot write what that one
            // sends), so it does not serve at all until space returns.
            assert_ne!(isro, "rw");
        } else {
            // In sync with its leader when the disk filled: it serves what it has.
            let (data, _) = within("read", WAIT, v.get_data("/before"))
                .await
                .expect("the full member still answers reads");
            assert_eq!(data, b"/before");
            assert_eq!(isro, "ro");
        }
        assert!(e.member(victim).log_tail().contains("is full"));
        filler.release();
        wait_flag(e.member(victim), "0").await;
        create_retrying(&c, "/after").await;
        drop(v);
        drop(c);
    });
    e.converged();
}

#[test]
fn full_disk_on_a_follower_lags_then_catches_up() {
    full_disk_in_ensemble(false);
}

#[test]
fn full_disk_on_the_leader_hands_leadership_over() {
    full_disk_in_ensemble(true);
}

/// Writes `/acked/n<i>` through `hosts` until `stop`; returns the acknowledged paths.
async fn write_until(hosts: String, stop: Arc<AtomicBool>) -> Vec<String> {
    let c = connect(&hosts).await;
    let _ = c.create("/acked", b"", &persistent()).await;
    let mut acked = Vec::new();
    let mut i = 0;
    while !stop.load(Ordering::Relaxed) {
        let path = format!("/acked/n{i}");
        i += 1;
        match tokio::time::timeout(WAIT, c.create(&path, b"v", &persistent())).await {
            Ok(Ok(_)) => acked.push(path),
            // Connection loss while a member stops: not acknowledged, maybe applied.
            Ok(Err(_)) | Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
    acked
}

fn eio_on_fsync(leader_fails: bool) {
    let triggers = tempfile::tempdir().expect("tempdir");
    let trigger = |i: usize| -> PathBuf { triggers.path().join(format!("eio-{i}")) };
    let shim = zooraft_tests::fault_shim();
    let mut e = TestEnsemble::start_with(3, &[], &|i, b| {
        b.env("LD_PRELOAD", &shim.display().to_string())
            .env("ZOORAFT_FAULT_EIO_FILE", &trigger(i).display().to_string())
    });
    let leader = e.leader();
    let victim = if leader_fails {
        leader
    } else {
        (leader + 1) % 3
    };
    let stop = Arc::new(AtomicBool::new(false));
    let rt = zooraft_tests::rt::runtime();
    let writer = rt.spawn(write_until(e.connect_string(), stop.clone()));
    std::thread::sleep(Duration::from_secs(2));
    std::fs::write(trigger(victim), b"").expect("arm the fault");
    let status = e
        .member_mut(victim)
        .wait_exit(WAIT)
        .expect("the member stops on a failed fsync");
    let log = e.member(victim).log_tail();
    assert_eq!(status.code(), Some(70), "{log}");
    assert!(
        log.contains("storage failure") && log.contains("stopping"),
        "no clear message: {log}"
    );
    // Clients carry on with the others.
    std::thread::sleep(Duration::from_secs(3));
    stop.store(true, Ordering::Relaxed);
    let acked = rt
        .block_on(within("the writer", WAIT, writer))
        .expect("writer");
    std::fs::remove_file(trigger(victim)).expect("clear the fault");
    e.member_mut(victim).restart();
    e.converged();
    rt.block_on(async {
        let c = connect(&e.member(victim).connect_string()).await;
        for p in &acked {
            assert!(
                c.check_stat(p).await.expect("stat").is_some(),
                "acknowledged {p} lost"
            );
        }
    });
    assert!(acked.len() > 5, "too few writes: {}", acked.len());
}

#[test]
fn eio_on_fsync_stops_a_follower() {
    eio_on_fsync(false);
}

#[test]
fn eio_on_fsync_stops_the_leader() {
    eio_on_fsync(true);
}

/// The seeds to run: `FAULT_SEEDS` of them (6 unless set) from `FAULT_SEED_FROM` (0).
fn seeds() -> std::ops::Range<u64> {
    let var = |name: &str, default: u64| {
        std::env::var(name)
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(default)
    };
    let from = var("FAULT_SEED_FROM", 0);
    from..from + var("FAULT_SEEDS", 6)
}

/// An ensemble with some history, its victim (a follower) killed, and a copy of the
/// victim's store as the kill left it.
struct Flips {
    e: TestEnsemble,
    victim: usize,
    pristine: tempfile::TempDir,
    client: zc::Client,
}

fn flips_setup(rt: &tokio::runtime::Runtime) -> Flips {
    // Small snapshots, so that the store has snapshot chunks in table files too.
    let mut e = TestEnsemble::start(
        3,
        0,
        &[("snapshotEntries", "100"), ("snapshotRetainEntries", "50")],
    );
    let victim = (e.leader() + 1) % 3;
    let others: Vec<String> = (0..3)
        .filter(|i| *i != victim)
        .map(|i| e.member(i).connect_string())
        .collect();
    let client = rt.block_on(async {
        let c = connect(&others.join(",")).await;
        for i in 0..300 {
            create(&c, &format!("/n{i}")).await;
        }
        c
    });
    e.converged();
    // kill -9: the write-ahead log keeps the latest entries (a clean stop leaves it empty).
    e.member_mut(victim).kill();
    let pristine = tempfile::tempdir().expect("tempdir");
    faults::copy_dir(&e.member(victim).data_dir(), pristine.path());
    Flips {
        e,
        victim,
        pristine,
        client,
    }
}

#[test]
fn flipped_bytes_are_refused_or_repaired() {
    // One runtime for the whole test: the clients live as long as it does.
    let rt = zooraft_tests::rt::runtime();
    let mut f = flips_setup(&rt);
    let (mut refused, mut recovered) = (0, 0);
    for seed in seeds() {
        let victim = f.victim;
        let data = f.e.member(victim).data_dir();
        std::fs::remove_dir_all(&data).expect("clear data dir");
        faults::copy_dir(f.pristine.path(), &data);
        let mut rng = Rng::new(seed);
        let count = 1 + rng.below(3) as usize;
        let (file, positions) = faults::flip_bytes(&data, &mut rng, count);
        let log_from = std::fs::metadata(f.e.member(victim).log_path()).map_or(0, |m| m.len());
        f.e.member_mut(victim).respawn();
        // The others serve throughout.
        rt.block_on(create(&f.client, &format!("/seed{seed}")));
        // Refused at start, or serving; a block that start-up did not need (data a
        // later write superseded) is read by the first compaction, which then stops the
        // member with the same message: that counts as refused too. A member that serves
        // must reach the others' digest.
        let e = &mut f.e;
        let outcome = eventually("a verdict", WAIT, || {
            if let Some(status) = e.member_mut(victim).wait_exit(Duration::from_millis(100)) {
                return Some(Err(status));
            }
            let digests: Vec<_> = (0..3).map(|i| e.digest(i)).collect();
            let same = digests[0].is_some() && digests.iter().all(|d| *d == digests[0]);
            same.then_some(Ok(()))
        });
        // This start's own lines only (the log file is appended to across restarts).
        let log = std::fs::read(e.member(victim).log_path()).expect("log");
        let log = String::from_utf8_lossy(&log[log_from as usize..]).into_owned();
        let served = log.contains("serving clients");
        let why = log
            .lines()
            .rev()
            .find(|l| l.contains("orrupt") || l.contains("hecksum"));
        match outcome {
            Err(status) => {
                assert!(!status.success(), "{log}");
                // Named as corruption, or (a flipped digit in CURRENT) the file it names.
                assert!(
                    why.is_some() || log.contains("cannot use data directory"),
                    "seed {seed}: refused without a clear message: {log}"
                );
                refused += 1;
            }
            Ok(()) => recovered += 1,
        }
        eprintln!(
            "seed {seed}: {} at {positions:?}: {}{} {}",
            file.display(),
            if outcome.is_ok() {
                "recovered"
            } else {
                "refused"
            },
            if served { " after serving" } else { "" },
            why.unwrap_or("")
        );
        e.member_mut(victim).kill();
        if served {
            // It took entries the copy lacks; Raft forbids a voter forgetting what it
            // acknowledged, so the next seed needs a fresh ensemble.
            drop(std::mem::replace(&mut f, flips_setup(&rt)));
        }
    }
    eprintln!("flipped bytes: {refused} refused, {recovered} recovered");
    f.e.converged();
}

/// A follower put back on an older copy of its own data directory (as a disk that lost
/// fsynced writes would leave it) has forgotten entries it acknowledged: the leader's first
/// heartbeat says so, and the member says why, takes a new incarnation and is caught up and
/// promoted again (raft-rs would panic with `to_commit … is out of range`), while the
/// others keep serving.
#[test]
fn a_member_on_an_older_copy_of_its_data_recovers_with_the_reason() {
    let rt = zooraft_tests::rt::runtime();
    let mut e = TestEnsemble::start(3, 0, &[]);
    let victim = (e.leader() + 1) % 3;
    let others: Vec<String> = (0..3)
        .filter(|i| *i != victim)
        .map(|i| e.member(i).connect_string())
        .collect();
    let client = rt.block_on(connect(&others.join(",")));
    rt.block_on(async {
        for i in 0..20 {
            create(&client, &format!("/old{i}")).await;
        }
    });
    e.converged();
    e.member_mut(victim).stop();
    let older = tempfile::tempdir().expect("tempdir");
    faults::copy_dir(&e.member(victim).data_dir(), older.path());
    e.member_mut(victim).respawn();
    rt.block_on(async {
        for i in 0..50 {
            create(&client, &format!("/new{i}")).await;
        }
    });
    // The victim acknowledged the new entries; now it loses them.
    e.converged();
    e.member_mut(victim).stop();
    let data = e.member(victim).data_dir();
    std::fs::remove_dir_all(&data).expect("clear data dir");
    faults::copy_dir(older.path(), &data);
    let log_from = std::fs::metadata(e.member(victim).log_path()).map_or(0, |m| m.len());
    e.member_mut(victim).respawn();
    // The others serve throughout.
    rt.block_on(create(&client, "/after"));
    zooraft_tests::rt::eventually("the member caught up and trusted again", WAIT, || {
        (e.member(victim).figure("zk_data_trusted").as_deref() == Some("1")).then_some(())
    });
    let log = std::fs::read(e.member(victim).log_path()).expect("log");
    let log = String::from_utf8_lossy(&log[log_from as usize..]).into_owned();
    assert!(
        log.contains("entries it acknowledged are gone from its data directory"),
        "no clear reason in the log: {log}"
    );
    assert!(!log.contains("out of range"), "raft-rs panicked: {log}");
    e.converged();
}
