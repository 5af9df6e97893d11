//! The log writer: makes the Raft loop's staged updates durable, off the loop.
//!
//! raft-rs's asynchronous ready lets the Raft thread stage new entries and hard state in
//! memory (readable through `Storage` at once), hand the write over, and go on proposing,
//! replicating and applying while the disk works. This thread takes every write waiting for
//! it, writes them in order with a single fsync (group commit), only then sends the messages
//! that must follow persistence (a follower's append acknowledgements, votes), and tells the
//! Raft loop how far the log is durable (`RawNode::on_persist_ready`). Entries count towards
//! a commit only from that moment, so nothing is acknowledged before it is on disk. On a
//! data directory below its free-space reserve it waits instead of writing (`disk_space.rs`).
//!
//! A standalone member under light load skips this thread (`LogJobs::hand_over`):
//! with nothing of its in flight here and a small write, the Raft thread writes it itself,
//! two thread hand-offs fewer on the path of a lone write (a lock hand-over, for one).

use std::sync::mpsc::{Receiver, Sender};
use std::sync::Arc;
use std::time::Instant;

use raft::eraftpb::Message;

use super::group::Group;
use super::input::Input;
use super::replica::Replica;
use super::storage::{PendingWrite, RaftStorage};
use super::transport::Peers;

/// One ready's worth of persistence.
pub struct PersistJob {
    /// The ready's number (`Ready::number`).
    pub number: u64,
    pub write: Option<PendingWrite>,
    /// The ready changed entries, term or vote: an fsync is needed (`Ready::must_sync`).
    pub sync: bool,
    /// Messages that may leave only once this is durable.
    pub messages: Vec<Message>,
}

/// What the Raft loop sends this thread.
pub enum LogWrite {
    Job(PersistJob),
    /// Answered once everything sent before it is written.
    Barrier(Sender<()>),
}

/// Writes `writes` in order, with one fsync if `sync`, and counts the fsync for `mntr`.
pub fn write(
    storage: &RaftStorage,
    replica: &Replica,
    writes: Vec<PendingWrite>,
    sync: bool,
    rounds: u64,
) {
    let started = Instant::now();
    storage.write(writes, sync);
    if sync {
        let counters = &replica.counters;
        counters.fsync_time.record_ms(started.elapsed());
        counters.fsync_batch.record(rounds);
    }
}

/// The writer's loop; it ends when the Raft loop drops its sender.
pub fn run(
    rx: Receiver<LogWrite>,
    storage: RaftStorage,
    peers: Option<Arc<dyn Peers>>,
    replica: Arc<Replica>,
) {
    while let Ok(first) = rx.recv() {
        let mut jobs = Vec::new();
        let mut barriers = Vec::new();
        let mut next = Some(first);
        // Everything already waiting goes into this round: one fsync for all of it.
        while let Some(cmd) = next {
            match cmd {
                LogWrite::Job(job) => jobs.push(job),
                LogWrite::Barrier(done) => barriers.push(done),
            }
            next = rx.try_recv().ok();
        }
        if !jobs.is_empty() {
            let sync = jobs.iter().any(|j| j.sync);
            let mut writes = Vec::with_capacity(jobs.len());
            let mut messages = Vec::new();
            let mut number = 0;
            let rounds = jobs.len() as u64;
            for job in jobs {
                writes.extend(job.write);
                messages.extend(job.messages);
                number = number.max(job.number);
            }
            let status = &replica.status;
            let reserve = replica.config().disk_reserve_bytes;
            let stop = || status.stopping.load(std::sync::atomic::Ordering::Acquire);
            if !super::disk_space::wait_for_room(storage.dir(), reserve, 0, status, stop) {
                // Shutting down on a full disk: these were never acknowledged.
                return;
            }
            write(&storage, &replica, writes, sync, rounds);
            if let Some(peers) = &peers {
                for m in &messages {
                    peers.send_raft(m);
                }
            }
            if !replica.submit(Input::Persisted(number)) {
                return;
            }
        }
        for done in barriers {
            let _ = done.send(());
        }
    }
}

/// The most entry bytes a ready may carry for the Raft thread to write them itself (a
/// standalone member with an idle log writer; see [`LogJobs::hand_over`]): a few small
/// writes.
const INLINE_MAX_BYTES: usize = 4096;

/// The Raft thread's side of the log writer: the ready numbers last handed to it and last
/// reported durable by it.
#[derive(Default)]
pub(super) struct LogJobs {
    sent: u64,
    persisted: u64,
}

impl LogJobs {
    /// The writer reported the ready `number` durable.
    pub fn persisted(&mut self, number: u64) {
        self.persisted = self.persisted.max(number);
    }

    /// Hands `job` to the log writer, or, on a standalone member with nothing in flight
    /// there and little to write (light load, where a write's latency is its hand-offs),
    /// writes it on this thread: then it returns the ready's number, now durable. Under
    /// load the log writer keeps the disk busy while this thread applies and proposes.
    /// Either way the writes reach the disk in ready order: inline only when every earlier
    /// job is written.
    pub fn hand_over(
        &mut self,
        g: &Group,
        writer: &Sender<LogWrite>,
        job: PersistJob,
        entry_bytes: usize,
    ) -> Option<u64> {
        let status = &g.replica.status;
        let inline = g.member.standalone
            && job.messages.is_empty()
            && entry_bytes <= INLINE_MAX_BYTES
            && self.sent <= self.persisted
            && super::disk_space::has_room(
                g.storage.dir(),
                g.replica.config().disk_reserve_bytes,
                0,
                status,
            );
        if inline {
            let writes = job.write.into_iter().collect();
            write(&g.storage, &g.replica, writes, job.sync, 1);
            self.persisted = job.number;
            return Some(job.number);
        }
        self.sent = job.number;
        if writer.send(LogWrite::Job(job)).is_err() {
            crate::critical::fatal("the log writer stopped");
        }
        None
    }

    /// Waits until the log writer has written everything handed to it so far.
    pub fn barrier(&self, writer: &Sender<LogWrite>) {
        let (tx, rx) = std::sync::mpsc::channel();
        if writer.send(LogWrite::Barrier(tx)).is_ok() {
            let _ = rx.recv();
        }
    }
}
