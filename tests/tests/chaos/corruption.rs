//! Corruption injected while the members run (ClickHouse Keeper's Jepsen suite has its log
//! and snapshot corruption nemeses): a flipped bit in a running member's table file, a torn
//! snapshot file. The member must find it (`scrubIntervalSeconds`, set short by the
//! scenario) and stop with the damage named, or write its snapshot afresh from its tree; it
//! never serves a different tree (the register checker and the final tree comparison run
//! as for every scenario). A member stopped on a damaged table is repaired as the message
//! says: its data directory emptied (myid kept), then started again.

use std::time::{Duration, Instant};

use zooraft_tests::faults;

use crate::world::{Target, World};

/// How long a member may take to stop on a flipped table (the scrub runs every second).
const FIND_WITHIN: Duration = Duration::from_secs(30);

impl World {
    /// See [`crate::world::Fault::CorruptTable`].
    pub(crate) fn corrupt_table(&mut self, target: Target, down: Duration) {
        let i = self.pick(target);
        let dir = self.ensemble.member(i).data_dir();
        let mut flipped = faults::flip_live_table(&dir, &mut faults::Rng::new(self.rng.next()));
        if flipped.is_none() {
            // Recovery writes what the write-ahead log held out to a table file.
            self.event(&format!(
                "member {} has no table file large enough yet: kill -9 and restart it first",
                i + 1
            ));
            self.ensemble.member_mut(i).kill();
            self.ensemble.member_mut(i).respawn();
            self.ensemble.wait_all_serving();
            flipped = faults::flip_live_table(&dir, &mut faults::Rng::new(self.rng.next()));
        }
        let Some((file, pos)) = flipped else {
            self.event(&format!("member {} has no table file to flip", i + 1));
            return;
        };
        self.event(&format!(
            "flip a bit of member {}'s {} at {pos} while it runs",
            i + 1,
            file.display()
        ));
        let Some(status) = self.ensemble.member_mut(i).wait_exit(FIND_WITHIN) else {
            if file.exists() {
                self.violation(format!(
                    "member {} still serves {FIND_WITHIN:?} after a bit of {} was flipped",
                    i + 1,
                    file.display()
                ));
            } else {
                self.event("the flipped table was compacted away before the scrub read it");
            }
            return;
        };
        let tail = self.ensemble.member(i).log_tail();
        if !tail.contains("Corruption") && !tail.contains("corrupt") {
            self.violation(format!(
                "member {} stopped ({status}) without naming the damage:\n{tail}",
                i + 1
            ));
        }
        self.counts.corruptions_found += 1;
        self.event(&format!(
            "member {} stopped on the damage ({status}); empty its data directory, restart it after {down:?}",
            i + 1
        ));
        std::fs::remove_dir_all(&dir).expect("empty a data directory");
        std::thread::sleep(down);
        self.ensemble.member_mut(i).respawn();
    }

    /// See [`crate::world::Fault::TearSnapshot`].
    pub(crate) fn tear_snapshot(&mut self, target: Target) {
        let i = self.pick(target);
        let dir = self.ensemble.member(i).data_dir();
        let repairs = |w: &World| {
            w.ensemble
                .member(i)
                .figure("zk_snapshot_repairs")
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0)
        };
        let before = repairs(self);
        let Some((file, cut)) = faults::tear_snapshot(&dir, &mut faults::Rng::new(self.rng.next()))
        else {
            self.event(&format!("member {} has no snapshot file yet", i + 1));
            return;
        };
        self.event(&format!(
            "tear member {}'s {} at {cut} bytes while it runs",
            i + 1,
            file.display()
        ));
        // Repaired (a fresh file named), or replaced by a newer snapshot in the course of
        // things; either way the torn file is gone.
        let deadline = Instant::now() + FIND_WITHIN;
        loop {
            if let Some(status) = self.ensemble.member_mut(i).exited() {
                let tail = self.ensemble.member(i).log_tail();
                self.violation(format!(
                    "member {} stopped ({status}) on a torn snapshot file:\n{tail}",
                    i + 1
                ));
                self.ensemble.member_mut(i).respawn();
                return;
            }
            let repaired = repairs(self) > before;
            if repaired || !file.exists() {
                self.counts.snapshots_repaired += u64::from(repaired);
                break;
            }
            if Instant::now() > deadline {
                self.violation(format!(
                    "member {}'s torn snapshot was not repaired within {FIND_WITHIN:?}",
                    i + 1
                ));
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        // The repaired directory must start: kill -9 and restart on it.
        self.event(&format!(
            "member {}'s snapshot repaired; kill -9 and restart it",
            i + 1
        ));
        self.ensemble.member_mut(i).kill();
        self.ensemble.member_mut(i).respawn();
    }
}
