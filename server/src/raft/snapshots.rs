//! Snapshots of the state machine: when to take one, and the worker that writes it.
//!
//! The Raft loop decides (by entries, or by bytes applied since the last snapshot: at least
//! twice the last snapshot's size, so the cost of snapshots stays a fraction of the cost of
//! the log) and captures the state in one pass of pointer copies, where the state is
//! consistent. The worker thread encodes the capture and stores it in RocksDB while the
//! loop goes on, then reports back ([`Input::SnapshotWritten`]); only then does the loop
//! name the snapshot and compact the log behind it.

use std::sync::atomic::Ordering;
use std::sync::mpsc::{Receiver, Sender};
use std::time::{Duration, Instant};

use raft::eraftpb::ConfState;

use super::driver::Consensus;
use super::input::{Input, SnapshotWritten};
use super::storage::RaftStorage;
use crate::state::snapshot::{self, SnapshotView};

/// Take a snapshot once this many bytes of entries were applied since the last one (one
/// entry is a whole batch, so counting entries alone would let the log grow large).
const SNAPSHOT_AFTER_BYTES: u64 = 64 * 1024 * 1024;

/// The Raft loop's side of snapshotting.
#[derive(Default)]
pub(super) struct SnapshotSchedule {
    /// Bytes of entries applied since the last snapshot was started.
    pub bytes_since: u64,
    /// The size of the last snapshot written.
    pub last_bytes: u64,
    /// A capture is with the worker; no other is started meanwhile.
    pub in_progress: bool,
}

/// A state captured by the Raft loop, for the worker to encode and make durable.
pub struct SnapshotJob {
    index: u64,
    term: u64,
    conf: ConfState,
    view: SnapshotView,
    captured_in: Duration,
}

/// Encodes and stores one captured state.
pub fn write_snapshot(storage: &RaftStorage, job: SnapshotJob) -> Option<SnapshotWritten> {
    let started = Instant::now();
    let data = snapshot::encode(&job.view);
    // Release the captured znodes at once: the live tree stops copying on write.
    drop(job.view);
    match storage.write_snapshot(job.index, job.term, &data) {
        Ok(()) => Some(SnapshotWritten {
            index: job.index,
            term: job.term,
            conf: job.conf,
            bytes: data.len() as u64,
            captured_in: job.captured_in,
            written_in: started.elapsed(),
        }),
        Err(e) => {
            tracing::error!(index = job.index, "cannot write a snapshot: {e}");
            None
        }
    }
}

/// The worker thread's loop: every job is written and reported to the Raft thread.
pub fn run_worker(jobs: Receiver<SnapshotJob>, storage: RaftStorage, inbox: Sender<Input>) {
    for job in jobs {
        let written = write_snapshot(&storage, job);
        if inbox.send(Input::SnapshotWritten(written)).is_err() {
            return;
        }
    }
}

impl Consensus {
    /// Captures the state for a snapshot when enough was applied since the last one.
    pub(super) fn maybe_snapshot(&mut self) {
        if self.snapshots.in_progress {
            return;
        }
        let every = self.replica.config.snapshot_entries;
        let bytes_due = SNAPSHOT_AFTER_BYTES.max(2 * self.snapshots.last_bytes);
        if self.storage.entries_since_snapshot(self.applied.index) < every
            && self.snapshots.bytes_since < bytes_due
        {
            return;
        }
        self.snapshots.bytes_since = 0;
        let started = Instant::now();
        let view = self.replica.state.read().snapshot_view();
        let job = SnapshotJob {
            index: self.applied.index,
            term: self.applied.term,
            conf: self.storage.conf_state(),
            view,
            captured_in: started.elapsed(),
        };
        self.snapshots.in_progress = self.workers.snapshots.send(job).is_ok();
    }

    /// The worker stored a snapshot: name it and compact the log behind it.
    pub(super) fn snapshot_written(&mut self, written: SnapshotWritten) {
        let SnapshotWritten {
            index,
            term,
            conf,
            bytes,
            captured_in,
            written_in,
        } = written;
        self.snapshots.in_progress = false;
        if index <= self.storage.snapshot_metadata().index {
            // A snapshot from the leader was installed meanwhile; this one is older.
            return;
        }
        let compact_to = index.saturating_sub(self.replica.config.snapshot_retain_entries);
        self.storage.save_snapshot(index, term, &conf, compact_to);
        self.snapshots.last_bytes = bytes;
        self.replica
            .counters
            .snapshots
            .fetch_add(1, Ordering::Relaxed);
        self.replica
            .status
            .snapshot_index
            .store(index, Ordering::Relaxed);
        tracing::info!(
            index,
            bytes,
            capture_ms = captured_in.as_millis() as u64,
            encode_and_write_ms = written_in.as_millis() as u64,
            "snapshot taken"
        );
    }
}
