//! Power loss: the members' data directories sit on lossy disks (`zooraft_tests::lossyfs`), and
//! a power loss is a kill -9 after which the disk drops every write, create, rename and
//! unlink that was not yet fsynced (tearing the last write at a random byte, by the
//! seed's coin). A kill -9 alone leaves the page cache, so only this tells a correct
//! fsync discipline from a missing one.
//!
//! After each power loss the members restart and must recover: serve again, agree on the
//! tree, and keep every acknowledged write with the zxid it was acknowledged with (the
//! writer's zxids rise strictly, so a zxid handed out twice shows). A member may refuse
//! to start only with a clear message; it must never serve a divergent tree.
//!
//! `CHAOS_POWER_LOSS=1` turns the kill -9 faults of the other scenarios into power losses.
//! Half the power losses (by the seed's coin) also keep a random subset of the unsynced
//! writes, as a disk that reorders them would; `CHAOS_REORDER=0` turns that off. `CHAOS_SOAK=30m` runs the power-loss scenarios over fresh seeds until
//! the time is up (`CHAOS_SOAK_RUNS=N` stops after N runs of each) and prints the totals.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use zooraft_tests::lossyfs::Crash;
use zooraft_tests::server::{ServerKind, TestServer};

use crate::clients::{connect, persistent, writer_task};
use crate::util::{bounded, lock, scenario_seed, serial, Rng};
use crate::world::{Fault, Summary, Target, World};
use crate::{TOOL_SESSION, WAIT};

/// `CHAOS_POWER_LOSS`: the other scenarios' kill -9 faults become power losses.
pub(crate) fn power_loss_switch() -> bool {
    flag("CHAOS_POWER_LOSS")
}

/// `CHAOS_REORDER=0`: power losses drop every unsynced write, never keep some.
fn reorder_switch() -> bool {
    std::env::var("CHAOS_REORDER").map_or(true, |v| v != "0")
}

fn flag(name: &str) -> bool {
    std::env::var(name).is_ok_and(|v| !v.is_empty() && v != "0")
}

/// Critical sections the contenders run in all before the checks.
const SECTIONS: usize = 15;

/// How long a member may take to serve again after a power loss.
const RECOVERY: Duration = Duration::from_secs(60);

impl World {
    /// Power loss of `members` at once; they start again after `down`.
    pub(crate) fn power_loss(&mut self, members: &[usize], down: Duration) {
        let reorder = reorder_switch();
        let names: Vec<String> = members.iter().map(|i| (i + 1).to_string()).collect();
        self.event(&format!(
            "power loss of member(s) {} for {down:?}",
            names.join(", ")
        ));
        for &i in members {
            let how = Crash {
                seed: self.rng.next(),
                tear: self.rng.coin(),
                reorder: reorder && self.rng.coin(),
            };
            let r = self.ensemble.member_mut(i).power_loss(how);
            self.counts.power_losses += 1;
            self.counts.dropped_writes += r.dropped_ops;
            self.counts.dropped_bytes += r.dropped_bytes;
            self.counts.torn_writes += u64::from(r.torn.is_some_and(|(_, k)| k > 0));
            self.event(&format!("member {}: {how:?} -> {r:?}", i + 1));
        }
        std::thread::sleep(down);
        for &i in members {
            self.ensemble.member_mut(i).respawn();
        }
        for &i in members {
            self.await_recovery(i);
        }
    }

    /// After the faults: the contenders keep going until `n` critical sections in all (a
    /// short schedule of restarts leaves them little time; the lock checks want some).
    fn await_sections(&mut self, n: usize) {
        let deadline = Instant::now() + RECOVERY;
        while self.sections().len() < n && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Waits until member `i` serves again; one that exits instead must say why.
    fn await_recovery(&mut self, i: usize) {
        let deadline = Instant::now() + RECOVERY;
        loop {
            let m = self.ensemble.member_mut(i);
            if m.is_serving() {
                return;
            }
            if let Some(status) = m.exited() {
                let tail = m.log_tail();
                self.counts.refused_starts += 1;
                let clear = tail.contains("cannot use data directory");
                self.violation(format!(
                    "member {} did not recover from a power loss: it exited ({status}){}; log:\n{tail}",
                    i + 1,
                    if clear { " with a clear message" } else { " WITHOUT a clear message" }
                ));
                // The rest of the scenario needs it: start it again, so that a second
                // refusal (or a recovery) shows too.
                self.ensemble.member_mut(i).respawn();
                return;
            }
            if Instant::now() > deadline {
                let tail = m.log_tail();
                self.violation(format!(
                    "member {} does not serve {RECOVERY:?} after a power loss; log:\n{tail}",
                    i + 1
                ));
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// Runs `scenario` once, or under `CHAOS_SOAK` over fresh seeds until the time is up, and
/// prints the totals.
fn soak(name: &str, scenario: impl Fn() -> Summary) {
    let Some(budget) = std::env::var("CHAOS_SOAK")
        .ok()
        .and_then(|s| parse_duration(&s))
    else {
        scenario();
        return;
    };
    let runs_cap: u64 = std::env::var("CHAOS_SOAK_RUNS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(u64::MAX);
    let start = Instant::now();
    let mut total = Summary::default();
    let mut runs = 0u64;
    while start.elapsed() < budget && runs < runs_cap {
        let s = scenario();
        runs += 1;
        total.faults += s.faults;
        total.power_losses += s.power_losses;
        total.dropped_writes += s.dropped_writes;
        total.acked += s.acked;
        total.refused_starts += s.refused_starts;
        println!(
            "soak {name}: run {runs} done, {:.0}s elapsed: {total:?}",
            start.elapsed().as_secs_f64()
        );
    }
    println!(
        "SOAK {name}: {runs} seeds in {:.0}s: {} faults injected ({} power losses, {} unsynced writes dropped), \
         {} writes acknowledged, lost = 0, violations = 0, refused starts = {}",
        start.elapsed().as_secs_f64(),
        total.faults,
        total.power_losses,
        total.dropped_writes,
        total.acked,
        total.refused_starts
    );
}

/// `90s`, `30m`, `2h` (a bare number is seconds).
fn parse_duration(s: &str) -> Option<Duration> {
    let s = s.trim();
    let (num, unit) = match s.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
        Some((at, _)) => s.split_at(at),
        None => (s, "s"),
    };
    let n: u64 = num.parse().ok()?;
    let secs = match unit {
        "s" => n,
        "m" => n * 60,
        "h" => n * 3600,
        _ => return None,
    };
    Some(Duration::from_secs(secs))
}

/// One power-loss scenario on `members` members, under the writer and lock contenders,
/// with the faults `schedule` draws from the seed.
fn scenario(name: &str, members: usize, schedule: fn(&mut Rng) -> Vec<Fault>) {
    soak(name, || {
        let mut w = World::on_lossy_disks(name, members, &[]);
        w.start_writer();
        w.start_contenders(3);
        let faults = schedule(&mut w.rng);
        w.run_schedule(faults);
        w.await_sections(SECTIONS);
        w.finish()
    });
}

/// Power loss of one member at a time (any, the leader, a follower) on three members.
#[test]
fn power_loss_one_member() {
    let _serial = serial();
    scenario("power-one-3", 3, |r| {
        vec![
            Fault::PowerLoss(Target::Any, r.ms(200, 2000)),
            Fault::PowerLoss(Target::Leader, r.ms(200, 2000)),
            Fault::PowerLoss(Target::Follower, r.ms(200, 2000)),
        ]
    });
}

/// Power loss of a minority (the leader and a follower) of five members at once, twice,
/// and of one member.
#[test]
fn power_loss_minority() {
    let _serial = serial();
    scenario("power-minority-5", 5, |r| {
        vec![
            Fault::PowerLossMinority(r.ms(200, 2000)),
            Fault::PowerLossMinority(r.ms(200, 2000)),
            Fault::PowerLoss(Target::Any, r.ms(200, 2000)),
        ]
    });
}

/// Power loss of every member at once, twice, and of the leader, on three members: nothing
/// acknowledged may be lost even though every copy lost its unsynced writes.
#[test]
fn power_loss_every_member() {
    let _serial = serial();
    scenario("power-all-3", 3, |r| {
        vec![
            Fault::PowerLossAll(r.ms(200, 1500)),
            Fault::PowerLossAll(r.ms(200, 1500)),
            Fault::PowerLoss(Target::Leader, r.ms(200, 1500)),
        ]
    });
}

/// A standalone server (no peers to repair from) loses its power three times under a
/// write load: every acknowledged create survives with its zxid, zxids keep rising.
#[test]
fn power_loss_standalone() {
    let _serial = serial();
    soak("power-standalone", standalone_once);
}

fn standalone_once() -> Summary {
    let seed = scenario_seed("power-standalone");
    println!("chaos power-standalone: seed {seed:#x} (replay with CHAOS_SEED={seed:#x})");
    let mut rng = Rng::new(seed);
    let mut server = TestServer::builder(ServerKind::Zooraft)
        .lossy_disk()
        .start();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    let hosts = server.connect_string();
    rt.block_on(async {
        let c = connect(&hosts, TOOL_SESSION).await.expect("a session");
        for p in ["/chaos", "/chaos/acks"] {
            bounded(WAIT, c.create(p, b"", &persistent()))
                .await
                .expect("in time")
                .expect("create");
        }
    });
    let acked = Arc::new(Mutex::new(Vec::new()));
    let quiet = Arc::new(AtomicBool::new(false));
    let writer = rt.spawn(writer_task(hosts.clone(), acked.clone(), quiet.clone()));
    let mut summary = Summary::default();
    for round in 0..3 {
        std::thread::sleep(rng.ms(500, 2500));
        let how = Crash {
            seed: rng.next(),
            tear: rng.coin(),
            reorder: reorder_switch() && rng.coin(),
        };
        let before = lock(&acked).len();
        let r = server.power_loss(how);
        println!("round {round}: power loss after {before} acknowledged creates: {how:?} -> {r:?}");
        summary.faults += 1;
        summary.power_losses += 1;
        summary.dropped_writes += r.dropped_ops;
        server.restart();
    }
    quiet.store(true, Ordering::SeqCst);
    let _ = rt.block_on(bounded(WAIT, writer));
    let acked = lock(&acked).clone();
    summary.acked = acked.len() as u64;
    let missing: Vec<String> = rt.block_on(async {
        let c = connect(&hosts, TOOL_SESSION).await.expect("a session");
        let mut missing = Vec::new();
        for (path, czxid) in &acked {
            match bounded(WAIT, c.check_stat(path)).await {
                Some(Ok(Some(s))) if s.czxid == *czxid => {}
                other => missing.push(format!("{path} (czxid {czxid:#x}): {other:?}")),
            }
        }
        missing
    });
    assert!(
        missing.is_empty(),
        "seed {seed:#x}: {} of {} acknowledged creates lost after power losses, e.g. {:?}",
        missing.len(),
        acked.len(),
        &missing[..missing.len().min(5)]
    );
    if let Some(w) = acked.windows(2).find(|w| w[1].1 <= w[0].1) {
        panic!("seed {seed:#x}: zxid reused: {w:?}");
    }
    assert!(
        acked.len() > 10,
        "the writer made progress: {}",
        acked.len()
    );
    println!(
        "chaos power-standalone: {} acknowledged creates all present after 3 power losses",
        acked.len()
    );
    summary
}
