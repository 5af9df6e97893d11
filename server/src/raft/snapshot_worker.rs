//! The snapshot worker: a thread that encodes the states the Raft loop captures and stores
//! them in RocksDB while the loop goes on, then reports back ([`Input::SnapshotWritten`]).

use std::sync::mpsc::{Receiver, Sender};
use std::time::{Duration, Instant};

use raft::eraftpb::ConfState;

use super::input::{Input, SnapshotWritten};
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
pub fn run(jobs: Receiver<SnapshotJob>, storage: RaftStorage, inbox: Sender<Input>) {
    for job in jobs {
        let written = write_snapshot(&storage, job);
        if inbox.send(Input::SnapshotWritten(written)).is_err() {
            return;
        }
    }
}
