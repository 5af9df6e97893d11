//! The scrub: every `scrubIntervalSeconds` (and once soon after start), the store's tables
//! and the snapshot file are read back and checked (`storage/scrub.rs`), so damage on disk
//! is found while the member runs, not at the next restart or when a follower needs it.
//!
//! What it does with damage, by what the member still has:
//! - a **damaged snapshot file**: the tree in memory is sound (it was loaded through the
//!   checksum and kept up by the log since), so the Raft loop writes a fresh snapshot from
//!   it and the damage is gone (`zk_snapshot_repairs`); the damaged file is never sent;
//! - a **damaged table** (the log, or the store's records): the member cannot rebuild it
//!   itself, and a start on it would fail or replay a different history, so it stops with
//!   the reason and the repair. It never serves a tree that differs.
//!
//! The thread runs at the snapshot worker's low priority, reads through RocksDB with the
//! block cache left alone, and stops when its channel closes.

use std::sync::atomic::Ordering;
use std::sync::mpsc::{Receiver, RecvTimeoutError, TryRecvError};
use std::sync::Arc;
use std::time::Duration;

use super::replica::Replica;
use super::snapshot_worker::lower_priority;
use super::storage::{RaftStorage, SnapshotScrub, TableScrubError};
use crate::critical;

/// The first scrub comes this long after start (or after the interval, if shorter): soon
/// enough that damage a restart did not read is found early, late enough not to compete
/// with catching up.
const FIRST_AFTER: Duration = Duration::from_secs(30);

/// Runs until `stop`'s sender is dropped, scrubbing every `every`.
pub fn run(stop: Receiver<()>, storage: RaftStorage, replica: Arc<Replica>, every: Duration) {
    lower_priority();
    let mut wait = every.min(FIRST_AFTER);
    loop {
        match stop.recv_timeout(wait) {
            Err(RecvTimeoutError::Timeout) => {}
            Ok(()) | Err(RecvTimeoutError::Disconnected) => return,
        }
        wait = every;
        let stopping = || matches!(stop.try_recv(), Err(TryRecvError::Disconnected));
        if !scrub_once(&storage, &replica, &stopping) {
            return;
        }
    }
}

/// One scrub; false when the member is stopping.
fn scrub_once(storage: &RaftStorage, replica: &Replica, stopping: &dyn Fn() -> bool) -> bool {
    let mut bytes = 0;
    match storage.scrub_snapshot() {
        SnapshotScrub::Sound { bytes: b } => bytes += b,
        SnapshotScrub::Nothing => {}
        SnapshotScrub::Damaged { index, why } => {
            storage.snapshot_damaged(&format!("the snapshot at index {index}: {why}"));
        }
    }
    match storage.scrub_tables(stopping) {
        Ok(read) => bytes += read.bytes,
        Err(TableScrubError::Stopped) => return false,
        Err(TableScrubError::Damaged(e)) => critical::fatal(format_args!(
            "the store in {} is damaged: {e}. Repair: in an ensemble, empty this member's \
             data directory (keep myid) and start it again, it catches up from the others; \
             a standalone server is restored from a backup",
            storage.dir().display()
        )),
    }
    let counters = &replica.counters;
    counters.scrub_last_bytes.store(bytes, Ordering::Relaxed);
    counters.scrubs.fetch_add(1, Ordering::Relaxed);
    true
}
