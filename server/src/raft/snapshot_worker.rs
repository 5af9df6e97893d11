//! The snapshot worker: a thread that encodes the states the Raft loop captures and stores
//! them in RocksDB while the loop goes on, then reports back ([`Input::SnapshotWritten`]).

use std::sync::mpsc::{Receiver, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant};

use raft::eraftpb::ConfState;

use super::disk_space;
use super::input::{Input, SnapshotWritten};
use super::replica::Replica;
use super::storage::RaftStorage;
use crate::state::snapshot::{self, SnapshotView};

/// A state captured by the Raft loop, for the worker to encode and make durable.
pub struct SnapshotJob {
    pub index: u64,
    pub term: u64,
    pub conf: ConfState,
    pub view: SnapshotView,
    /// Time the Raft loop spent capturing the state.
    pub captured_in: Duration,
}

/// Encodes and stores one captured state, if `room(bytes)` says the disk has room for it.
pub fn write_snapshot(
    storage: &RaftStorage,
    job: SnapshotJob,
    room: &dyn Fn(u64) -> bool,
) -> Option<SnapshotWritten> {
    let started = Instant::now();
    let data = snapshot::encode(&job.view);
    // Release the captured znodes at once: the live tree stops copying on write.
    drop(job.view);
    if !room(data.len() as u64) {
        // A failed write would leave RocksDB unwritable (see `disk_space.rs`); the log
        // just keeps the entries a little longer.
        tracing::warn!(
            index = job.index,
            "not storing a snapshot of {} bytes: the data directory is short of space",
            data.len()
        );
        return None;
    }
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
pub fn run(jobs: Receiver<SnapshotJob>, storage: RaftStorage, replica: Arc<Replica>) {
    let inbox: Sender<Input> = replica.inbox();
    let reserve = replica.config.disk_reserve_bytes;
    let room = |bytes: u64| disk_space::has_room(storage.dir(), reserve, bytes, &replica.status);
    for job in jobs {
        let written = write_snapshot(&storage, job, &room);
        if inbox.send(Input::SnapshotWritten(written)).is_err() {
            return;
        }
    }
}
