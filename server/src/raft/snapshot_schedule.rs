//! Snapshots of the state machine: when to take one, and the worker that writes it.
//!
//! The Raft loop decides (by entries, or by bytes applied since the last snapshot: half the
//! last snapshot's size, at least [`SNAPSHOT_AFTER_BYTES`]) and captures the state in one pass of pointer copies, where the state is
//! consistent. The worker (`snapshot_worker.rs`) encodes the capture and streams it to a
//! file while the loop goes on, then reports back; only then does the loop name the
//! snapshot and compact the log behind it. The last snapshot's size, duration and peak
//! extra memory are published for `mntr`.
//!
//! A clean stop names the snapshot the worker finished meanwhile and, when the log since the
//! last snapshot is worth it, writes one more on the Raft thread before exiting
//! ([`SnapshotSchedule::snapshot_at_shutdown`]): the next start then loads instead of replaying.

use std::sync::atomic::Ordering;
use std::sync::mpsc::Sender;
use std::time::Instant;

use super::disk_space;
use super::group::Group;
use super::input::SnapshotWritten;
use super::snapshot_worker::{write_snapshot, SnapshotJob};
use crate::allocator::resident_bytes;

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

/// A clean shutdown takes a snapshot when the log applied since the last one is more than
/// this share (1/n) of the last snapshot's size (replaying it would cost about 3/n of the
/// snapshot's load) ...
const SHUTDOWN_SNAPSHOT_SHARE: u64 = 16;
/// ... and at least this many bytes (less replays in a few milliseconds).
const SHUTDOWN_SNAPSHOT_MIN_BYTES: u64 = 4 * 1024 * 1024;

/// The Raft loop's side of snapshotting.
#[derive(Default)]
pub(super) struct SnapshotSchedule {
    /// Bytes of entries applied since the last snapshot was started.
    pub bytes_since: u64,
    /// The size of the last snapshot written.
    last_bytes: u64,
    /// A capture is with the worker; no other is started meanwhile.
    in_progress: bool,
    /// The capture with the worker replaces a damaged snapshot file (`scrub.rs`).
    repairing: bool,
}

impl SnapshotSchedule {
    /// Captures the state for a snapshot when enough was applied since the last one, when
    /// raft-rs needs a newer one to send (a member added since the last was taken), or when
    /// the stored one was found damaged (then even at the index it has: the file is
    /// replaced by a sound one of the same state).
    pub fn maybe_snapshot(&mut self, g: &Group, worker: &Sender<SnapshotJob>) {
        if self.in_progress {
            return;
        }
        let every = g.replica.config().snapshot_entries;
        let bytes_due = SNAPSHOT_AFTER_BYTES.max(self.last_snapshot_bytes(g) / 2);
        let since = g.storage.entries_since_snapshot(g.applied.index);
        let wanted = g.storage.take_snapshot_wanted() && since > 0;
        let damaged = g.storage.take_snapshot_damaged();
        if since < every && self.bytes_since < bytes_due && !wanted && !damaged {
            return;
        }
        let job = self.capture(g);
        self.in_progress = worker.send(job).is_ok();
        self.repairing = damaged && self.in_progress;
    }

    /// The worker could not store the capture (a full disk). A repair it carried is asked
    /// for again by the next scrub, or by the next follower that needs the snapshot.
    pub fn snapshot_failed(&mut self) {
        self.in_progress = false;
        if std::mem::take(&mut self.repairing) {
            tracing::warn!("the fresh snapshot could not be written; the damaged one stays");
        }
    }

    /// The size of the last snapshot: the one this run wrote, or the one it started from.
    fn last_snapshot_bytes(&mut self, g: &Group) -> u64 {
        if self.last_bytes == 0 {
            self.last_bytes = g.storage.snapshot_len().unwrap_or(0);
        }
        self.last_bytes
    }

    /// Captures the applied state (starting the count of bytes towards the next snapshot).
    fn capture(&mut self, g: &Group) -> SnapshotJob {
        self.bytes_since = 0;
        let resident_before = resident_bytes().unwrap_or(0);
        let started = Instant::now();
        let (view, zxid) = {
            let state = g.replica.state.read();
            (
                crate::state::snapshot::SnapshotView::of(&state),
                state.last_zxid,
            )
        };
        SnapshotJob {
            index: g.applied.index,
            term: g.applied.term,
            // Raft's membership as of the applied index (conf changes apply in order).
            conf: g.node.raft.prs().conf().to_conf_state(),
            view,
            zxid,
            captured_in: started.elapsed(),
            resident_before,
        }
    }

    /// At a clean shutdown (the workers stopped), names the snapshot the worker finished
    /// meanwhile (`finished`, taken from the inbox), then takes one on this thread if the log applied since the last would
    /// take a restart longer to replay than [`SHUTDOWN_SNAPSHOT_SHARE`] of the snapshot's
    /// load: a byte of log replays about three times slower than a byte of snapshot loads,
    /// and writing a snapshot is faster still than loading it, so a stop that writes one
    /// saves the next start more than it costs. A crash restart still replays its log.
    pub fn snapshot_at_shutdown(&mut self, g: &Group, finished: Vec<Option<SnapshotWritten>>) {
        for written in finished {
            match written {
                Some(w) => self.snapshot_written(g, w),
                None => self.snapshot_failed(),
            }
        }
        let due =
            SHUTDOWN_SNAPSHOT_MIN_BYTES.max(self.last_snapshot_bytes(g) / SHUTDOWN_SNAPSHOT_SHARE);
        if self.in_progress
            || self.bytes_since < due
            || g.applied.index <= g.storage.snapshot_metadata().index
        {
            return;
        }
        let job = self.capture(g);
        let reserve = g.replica.config().disk_reserve_bytes;
        let (storage, status) = (&g.storage, &g.replica.status);
        let room = |bytes: u64| disk_space::has_room(storage.dir(), reserve, bytes, status);
        if let Some(written) = write_snapshot(storage, job, &room) {
            self.snapshot_written(g, written);
        }
    }

    /// The worker stored a snapshot: name it and compact the log behind it.
    pub fn snapshot_written(&mut self, g: &Group, written: SnapshotWritten) {
        let SnapshotWritten {
            index,
            term,
            conf,
            zxid,
            bytes,
            captured_in,
            written_in,
            peak_extra,
        } = written;
        self.in_progress = false;
        let repaired = std::mem::take(&mut self.repairing);
        // Older: a snapshot from the leader was installed meanwhile. (The same index: a
        // repair of a damaged file, which this one replaced; it is named again.)
        if index < g.storage.snapshot_metadata().index {
            return;
        }
        let compact_to = index.saturating_sub(g.replica.config().snapshot_retain_entries);
        g.storage.save_snapshot(index, term, &conf, compact_to);
        self.last_bytes = bytes;
        let counters = &g.replica.counters;
        // Counted once the sound file is named: a restart from now on loads it.
        if repaired {
            counters.snapshot_repairs.fetch_add(1, Ordering::Relaxed);
        }
        counters.snapshot_time.record_ms(captured_in + written_in);
        counters.snapshot_last(bytes, captured_in + written_in, peak_extra);
        let status = &g.replica.status;
        status.snapshot_index.store(index, Ordering::Relaxed);
        status.snapshot_named(zxid);
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
