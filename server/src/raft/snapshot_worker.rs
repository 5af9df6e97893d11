//! The snapshot worker: a thread that encodes the states the Raft loop captures and
//! streams them to a file while the loop goes on, then reports back
//! ([`Input::SnapshotWritten`]).
//!
//! It must not slow the writes it runs beside: the thread runs at a lower CPU and I/O
//! priority than the Raft loop and the log writer (on a busy machine the encoder waits,
//! not the commits), the encoding goes out through a buffer of a few MiB rather than
//! being built whole (`state/snapshot_io.rs`), and the file's writeback is paced
//! (`storage/snapshot_files.rs`) so the log writer's fsyncs never wait behind a burst of
//! hundreds of MiB. What the snapshot costs in memory is measured as it goes: the
//! resident set's peak above what it was just before the capture.

use std::io::{self, Write};
use std::sync::mpsc::{Receiver, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant};

use raft::eraftpb::ConfState;

use super::disk_space;
use super::input::{Input, SnapshotWritten};
use super::replica::Replica;
use super::storage::{RaftStorage, SNAPSHOT_PACE};
use crate::allocator::resident_bytes;
use crate::state::snapshot::{self, SnapshotView};

/// The worker's niceness (the Raft loop and the log writer run at 0).
const NICENESS: i32 = 10;

/// A state captured by the Raft loop, for the worker to encode and make durable.
pub struct SnapshotJob {
    pub index: u64,
    pub term: u64,
    pub conf: ConfState,
    pub view: SnapshotView,
    /// The captured state's last zxid.
    pub zxid: i64,
    /// Time the Raft loop spent capturing the state.
    pub captured_in: Duration,
    /// The resident set just before the capture (0 if unknown).
    pub resident_before: u64,
}

/// Lowers this thread's CPU priority (its niceness) and I/O priority (best effort, lowest
/// level). Failures are logged: the work is done all the same.
pub(super) fn lower_priority() {
    // SAFETY: plain system calls about the calling thread.
    let tid = unsafe { libc::syscall(libc::SYS_gettid) } as libc::id_t;
    // SAFETY: as above; on Linux PRIO_PROCESS with a thread id is that thread alone.
    if unsafe { libc::setpriority(libc::PRIO_PROCESS, tid, NICENESS) } != 0 {
        tracing::debug!(
            "cannot lower the snapshot thread's priority: {}",
            io::Error::last_os_error()
        );
    }
    // ioprio_set(IOPRIO_WHO_PROCESS, tid, class BE (2) << 13 | level 7).
    const IOPRIO_WHO_PROCESS: libc::c_long = 1;
    let ioprio: libc::c_long = (2 << 13) | 7;
    // SAFETY: as above.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_ioprio_set,
            IOPRIO_WHO_PROCESS,
            tid as libc::c_long,
            ioprio,
        )
    };
    if rc != 0 {
        tracing::debug!(
            "cannot lower the snapshot thread's I/O priority: {}",
            io::Error::last_os_error()
        );
    }
}

/// The encoder's way to the file: every [`SNAPSHOT_PACE`] bytes it checks that the disk
/// still has its reserve (a snapshot must never take the log's room: the write fails
/// as a full disk would, and the snapshot is dropped) and samples the resident set.
struct Watched<'a, W> {
    out: &'a mut W,
    since_check: u64,
    room: &'a dyn Fn(u64) -> bool,
    peak: u64,
}

impl<W> Watched<'_, W> {
    fn sample(&mut self) {
        self.peak = self.peak.max(resident_bytes().unwrap_or(0));
    }
}

impl<W: Write> Write for Watched<'_, W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.out.write(buf)?;
        self.since_check += n as u64;
        if self.since_check >= SNAPSHOT_PACE {
            self.since_check = 0;
            self.sample();
            if !(self.room)(0) {
                return Err(io::Error::from_raw_os_error(libc::ENOSPC));
            }
        }
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}

/// What the encoding of `view` will take on disk, roughly (checked against the free space
/// before writing: the size itself is known only at the end).
fn estimated_size(view: &SnapshotView) -> u64 {
    64 + view.data_size + view.tree.len() as u64 * 64 + view.sessions.len() as u64 * 28
}

/// Encodes and stores one captured state, if `room(bytes)` says the disk has room for it
/// (checked before, against an estimate, and again as it is written).
pub fn write_snapshot(
    storage: &RaftStorage,
    job: SnapshotJob,
    room: &dyn Fn(u64) -> bool,
) -> Option<SnapshotWritten> {
    let started = Instant::now();
    let estimate = estimated_size(&job.view);
    if !room(estimate) {
        tracing::warn!(
            index = job.index,
            "not storing a snapshot of about {estimate} bytes: the data directory is short of space"
        );
        return None;
    }
    let mut peak = resident_bytes().unwrap_or(0);
    let view = job.view;
    let written = storage.write_snapshot_with(job.index, job.term, |sink| {
        let mut out = Watched {
            out: sink,
            since_check: 0,
            room,
            peak,
        };
        let result = snapshot::encode_into(&view, &mut out).map(|_| ());
        out.sample();
        peak = out.peak;
        result
    });
    // Release the captured znodes at once: the live tree stops copying on write.
    drop(view);
    match written {
        Ok(bytes) => Some(SnapshotWritten {
            index: job.index,
            term: job.term,
            conf: job.conf,
            zxid: job.zxid,
            bytes,
            captured_in: job.captured_in,
            written_in: started.elapsed(),
            peak_extra: peak.saturating_sub(job.resident_before),
        }),
        Err(e) if e.raw_os_error() == Some(libc::ENOSPC) => {
            tracing::warn!(
                index = job.index,
                "snapshot not stored: the data directory ran short of space while writing it"
            );
            None
        }
        Err(e) => {
            tracing::error!(index = job.index, "cannot write a snapshot: {e}");
            None
        }
    }
}

/// The worker thread's loop: every job is written and reported to the Raft thread.
pub fn run(jobs: Receiver<SnapshotJob>, storage: RaftStorage, replica: Arc<Replica>) {
    lower_priority();
    let inbox: Sender<Input> = replica.inbox();
    let reserve = replica.config().disk_reserve_bytes;
    let room = |bytes: u64| disk_space::has_room(storage.dir(), reserve, bytes, &replica.status);
    for job in jobs {
        let written = write_snapshot(&storage, job, &room);
        // The encoder's buffers and the captured chunks the tree copied are free now.
        crate::allocator::give_back_and_log("a snapshot");
        if inbox.send(Input::SnapshotWritten(written)).is_err() {
            return;
        }
    }
}
