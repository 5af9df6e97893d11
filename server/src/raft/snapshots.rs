//! Snapshots of the state machine: when to take one, and the worker that writes it.
//!
//! The Raft loop decides (by entries, or by bytes applied since the last snapshot: half the
//! last snapshot's size, at least [`SNAPSHOT_AFTER_BYTES`]) and captures the state in one pass of pointer copies, where the state is
//! consistent. The worker (`snapshot_worker.rs`) encodes the capture and streams it to a
//! file while the loop goes on, then reports back; only then does the loop name the
//! snapshot and compact the log behind it. The last snapshot's size, duration and peak
//! extra memory are published for `mntr`.

use std::sync::atomic::Ordering;
use std::time::Instant;

use super::driver::Consensus;
use super::input::SnapshotWritten;
use super::snapshot_worker::{resident_bytes, SnapshotJob};

/// Take a snapshot once this many bytes of entries were applied since the last one, or half
/// the last snapshot's size if more (one entry is a whole batch, so counting entries alone
/// would let the log grow large).
///
/// The log after the snapshot is what a restart replays, and replaying a byte of log costs
/// about three times what loading a byte of snapshot does (each command is a full apply);
/// a snapshot costs the writes nothing now (streamed by a low-priority thread, no second
/// copy of the tree), so the log is kept to half a snapshot: a restart loads the snapshot
/// and at most that much log. (It used to be twice the snapshot, for a restart three
/// times as long at a million znodes.)
const SNAPSHOT_AFTER_BYTES: u64 = 32 * 1024 * 1024;

impl Consensus {
    /// Captures the state for a snapshot when enough was applied since the last one, or
    /// when raft-rs needs a newer one to send (a member added since the last was taken).
    pub(super) fn maybe_snapshot(&mut self) {
        if self.snapshots.in_progress {
            return;
        }
        let every = self.replica.config.snapshot_entries;
        let bytes_due = SNAPSHOT_AFTER_BYTES.max(self.snapshots.last_bytes / 2);
        let since = self.storage.entries_since_snapshot(self.applied.index);
        let wanted = self.storage.take_snapshot_wanted() && since > 0;
        if since < every && self.snapshots.bytes_since < bytes_due && !wanted {
            return;
        }
        self.snapshots.bytes_since = 0;
        let resident_before = resident_bytes().unwrap_or(0);
        let started = Instant::now();
        let view = self.replica.state.read().snapshot_view();
        let job = SnapshotJob {
            index: self.applied.index,
            term: self.applied.term,
            // Raft's membership as of the applied index (conf changes apply in order).
            conf: self.node.raft.prs().conf().to_conf_state(),
            view,
            captured_in: started.elapsed(),
            resident_before,
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
            peak_extra,
        } = written;
        self.snapshots.in_progress = false;
        if index <= self.storage.snapshot_metadata().index {
            // A snapshot from the leader was installed meanwhile; this one is older.
            return;
        }
        let compact_to = index.saturating_sub(self.replica.config.snapshot_retain_entries);
        self.storage.save_snapshot(index, term, &conf, compact_to);
        self.snapshots.last_bytes = bytes;
        let counters = &self.replica.counters;
        counters.snapshot_time.record_ms(captured_in + written_in);
        counters.snapshot_last(bytes, captured_in + written_in, peak_extra);
        self.replica
            .status
            .snapshot_index
            .store(index, Ordering::Relaxed);
        tracing::info!(
            index,
            bytes,
            capture_ms = captured_in.as_millis() as u64,
            encode_and_write_ms = written_in.as_millis() as u64,
            peak_extra_bytes = peak_extra,
            "snapshot taken"
        );
    }
}
