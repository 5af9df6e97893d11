//! The Ready cycle, and applying committed entries.
//!
//! # The ordering contract
//!
//! For each `Ready`, in this order (raft-rs's crate docs, `RawNode::ready`, with
//! asynchronous persistence):
//!
//! 1. **Send** the leader's messages (`take_messages`). Only a leader has any here, and
//!    they may leave before its own disk write (Raft thesis 10.2.1): the leader's entries
//!    count towards a commit only once its own `on_persist_ready` says they are durable.
//! 2. **Install** a snapshot from the leader, if the ready carries one: synchronously,
//!    after everything staged before it is durable (`finish_snapshot_ready`).
//! 3. **Apply** the committed entries. With asynchronous persistence raft-rs hands out as
//!    committed only entries that are durable on this member (after `on_persist_ready`)
//!    and on a quorum, so applying them now, before this ready's own writes are durable,
//!    never applies an entry that could be lost.
//! 4. **Persist**: stage the new entries and hard state in storage (readable through the
//!    `Storage` trait at once, as `advance_append_async` requires) and hand the write to
//!    the log writer, together with the messages that may leave only once it is durable
//!    (`take_persisted_messages`: a follower's append acks, votes). The writer fsyncs once
//!    for everything waiting, sends those messages, and reports [`Input::Persisted`], on
//!    which the driver calls `on_persist_ready`. A standalone member with nothing in
//!    flight at the writer and a small write does it on this thread instead, and calls
//!    `on_persist_ready` itself after step 6 (`write_inline`).
//! 5. Note the ReadIndex answers (`take_read_states`).
//! 6. **Advance**: `advance_append_async(rd)` then `advance_apply()`. `advance_apply` right
//!    after `advance_append_async` is correct because it only moves raft-rs's applied
//!    index to the last committed entry this ready handed out, and step 3 applied all of
//!    them synchronously, in this thread, before this call; it does not claim that this
//!    ready's new entries are durable (only `on_persist_ready` does). With
//!    `advance_append_async` no `LightReady` is returned: commits that follow from
//!    persistence come in a later `Ready`.
//!
//! [`Input::Persisted`]: super::input::Input::Persisted

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;

use raft::eraftpb::{Entry, EntryType, Message, MessageType, Snapshot};
use raft::StateRole;

use super::connections::ApplyRound;
use super::driver::Consensus;
use super::expiry::ExpiryTracker;
use super::input::SyncWaiter;
use super::log_writer::{LogWrite, PersistJob};
use super::restores::Restores;
use crate::critical;
use crate::state::command::{Batch, ClientWrite, CloseReason, Origin};
use crate::state::tree::Trigger;
use crate::state::{snapshot, ApplyObserver, SessionInfo, WriteResult};

/// The most entry bytes a ready may carry for the Raft thread to write them itself (a
/// standalone member with an idle log writer; see `write_inline`): a few small writes.
const INLINE_MAX_BYTES: usize = 4096;

impl Consensus {
    /// Handles every pending `Ready` (see the module docs for the order).
    pub(super) fn process_ready(&mut self) {
        while self.node.has_ready() {
            let mut rd = self.node.ready();
            if let Some(ss) = rd.ss() {
                self.on_soft_state(ss.leader_id, ss.raft_state);
            }
            // 1. The leader's messages.
            let msgs = rd.take_messages();
            self.send(msgs);
            // 2. A snapshot from the leader.
            if !rd.snapshot().is_empty() {
                self.finish_snapshot_ready(rd);
                continue;
            }
            // 3. Committed entries.
            let committed = rd.take_committed_entries();
            self.apply(committed);
            // 4. New entries and hard state, and the messages that must follow them.
            if self.leadership.role != StateRole::Leader {
                self.replica
                    .counters
                    .learner_proposals
                    .fetch_add(rd.entries().len() as u64, Ordering::Relaxed);
            }
            let entry_bytes: usize = rd.entries().iter().map(|e| e.data.len()).sum();
            let write = self.storage.stage(rd.entries(), rd.hs());
            let messages = rd.take_persisted_messages();
            let mut persisted_now = None;
            if write.is_some() || !messages.is_empty() {
                let job = PersistJob {
                    number: rd.number(),
                    write,
                    sync: rd.must_sync(),
                    messages,
                };
                persisted_now = self.write_inline(job, entry_bytes);
            }
            // 5. ReadIndex answers.
            for rs in rd.take_read_states() {
                self.reads.answered(rs.index, &rs.request_ctx);
            }
            // 6. Advance.
            self.node.advance_append_async(rd);
            if let Some(number) = persisted_now {
                self.node.on_persist_ready(number);
            }
            self.node.advance_apply();
            self.resolve_reads();
            self.maybe_snapshot();
        }
        self.publish_status();
    }

    /// Hands `job` to the log writer, or, on a standalone member with nothing in flight
    /// there and little to write (light load, where a write's latency is its hand-offs),
    /// writes it on this thread: then it returns the ready's number, now durable. Under
    /// load the log writer keeps the disk busy while this thread applies and proposes.
    /// Either way the writes reach the disk in ready order: inline only when every earlier
    /// job is written.
    fn write_inline(&mut self, job: PersistJob, entry_bytes: usize) -> Option<u64> {
        let status = &self.replica.status;
        let inline = self.member.standalone
            && job.messages.is_empty()
            && entry_bytes <= INLINE_MAX_BYTES
            && self.log_jobs.sent <= self.log_jobs.persisted
            && super::disk_space::has_room(
                self.storage.dir(),
                self.replica.config().disk_reserve_bytes,
                0,
                status,
            );
        if inline {
            let writes = job.write.into_iter().collect();
            super::log_writer::write(&self.storage, &self.replica, writes, job.sync, 1);
            self.log_jobs.persisted = job.number;
            return Some(job.number);
        }
        self.log_jobs.sent = job.number;
        if self.workers.log_writer.send(LogWrite::Job(job)).is_err() {
            critical::fatal("the log writer stopped");
        }
        None
    }

    /// A ready carrying a snapshot from the leader is completed synchronously: everything
    /// staged before it is flushed first, the snapshot replaces the log durably, and only
    /// then are raft-rs told it is persisted (`advance`) and the acks sent.
    fn finish_snapshot_ready(&mut self, mut rd: raft::Ready) {
        self.log_writer_barrier();
        let snap = rd.snapshot().clone();
        self.install_snapshot(&snap);
        let committed = rd.take_committed_entries();
        self.apply(committed);
        self.storage.append(rd.entries(), rd.hs(), true);
        let msgs = rd.take_persisted_messages();
        self.send(msgs);
        for rs in rd.take_read_states() {
            self.reads.answered(rs.index, &rs.request_ctx);
        }
        let mut light = self.node.advance(rd);
        let msgs = light.take_messages();
        self.send(msgs);
        let committed = light.take_committed_entries();
        self.apply(committed);
        self.node.advance_apply();
        self.resolve_reads();
    }

    /// Waits until the log writer has written everything handed to it so far.
    fn log_writer_barrier(&mut self) {
        let (tx, rx) = std::sync::mpsc::channel();
        if self.workers.log_writer.send(LogWrite::Barrier(tx)).is_ok() {
            let _ = rx.recv();
        }
    }

    fn send(&mut self, msgs: Vec<Message>) {
        let Some(peers) = &self.peers else { return };
        for m in msgs {
            if m.get_msg_type() == MessageType::MsgSnapshot {
                self.replica
                    .counters
                    .snapshot_syncs
                    .fetch_add(1, Ordering::Relaxed);
            }
            peers.send_raft(&m);
        }
    }

    fn on_soft_state(&mut self, leader: u64, role: StateRole) {
        let was_leader = self.leadership.role == StateRole::Leader;
        let now = self.clock.now();
        if leader != self.leadership.leader {
            tracing::info!(
                member = self.member.me,
                "leader is now {leader} (was {})",
                self.leadership.leader
            );
            if self.leadership.leader != 0 {
                // Writes in flight through the old leader may never be answered.
                self.connections.leader_changed();
            }
            self.leadership.leader = leader;
            self.leadership.last_contact = now;
            // Noted here, as raft-rs tells it: a tenure of any length is on the timeline.
            self.replica.changes.leader(leader, self.node.raft.term);
            self.measures
                .leader_known(leader, now, &self.replica.counters);
            self.serving.leader_changed();
        }
        self.leadership.role = role;
        if role == StateRole::Leader && !was_leader {
            // A new leader gives every session a full timeout (ZooKeeper does the same).
            self.rearm_sessions(now);
            self.timers.next_cleanup = now + self.replica.config().container_check_interval;
            // A fresh ensemble's `/zookeeper/config` right away (only queued here: no
            // proposal may reach raft-rs in the middle of a Ready).
            self.state_first_config_if_none(now);
            // A reconfig proposed now waits for everything the last leader committed.
            self.membership.reconfig_index = self.node.raft.raft_log.last_index();
        }
        self.replica.status.leader.store(leader, Ordering::Relaxed);
    }

    /// Applies committed entries in log order: every command of every batch, telling the
    /// connections after each (so the reads queued behind a write see exactly its state).
    pub(super) fn apply(&mut self, entries: Vec<Entry>) {
        if entries.is_empty() {
            return;
        }
        let replica = self.replica.clone();
        let connections = self.connections.clone();
        let now = self.clock.now();
        let mut state = replica.state.write();
        // Lock order: the state first, then (inside the round) the watches.
        let mut round = connections.apply_round();
        let applied = entries.len() as u64;
        for e in entries {
            match e.get_entry_type() {
                EntryType::EntryNormal if !e.data.is_empty() => {
                    let own = self.proposals.proposed.take(e.index, e.term);
                    let batch = match own.map_or_else(|| Batch::decode(e.data.clone()), Ok) {
                        Ok(batch) => batch,
                        // Skipping an entry would fork this member from the others.
                        Err(err) => critical::fatal(format_args!(
                            "entry {} in the log cannot be decoded ({err})",
                            e.index
                        )),
                    };
                    let mut observer = Applier {
                        round: round.as_mut(),
                        expiry: &mut self.duties.expiry,
                        restores: &self.replica.restores,
                        now,
                    };
                    for command in &batch.commands {
                        state.apply_one(command, e.term, batch.time, &mut observer);
                        observer.round.settle(&state);
                    }
                    self.proposals.proposed.recycle(batch.commands);
                }
                EntryType::EntryNormal => {}
                EntryType::EntryConfChange | EntryType::EntryConfChangeV2 => {
                    self.apply_conf_change(&e);
                }
            }
            self.applied.index = e.index;
            self.applied.term = e.term;
            self.snapshots.bytes_since += e.data.len() as u64;
        }
        replica.set_last_zxid(state.last_zxid);
        self.storage.set_applied(self.applied.index);
        let counters = &replica.counters;
        counters.commits.fetch_add(applied, Ordering::Relaxed);
        if self.leadership.role != StateRole::Leader {
            counters
                .learner_commits
                .fetch_add(applied, Ordering::Relaxed);
        }
        self.measures.applied(self.applied.index, now, counters);
        drop(state);
        round.finish();
        replica
            .status
            .applied_index
            .store(self.applied.index, Ordering::Relaxed);
    }

    /// Releases the sync waiters whose ReadIndex this member has now applied.
    fn resolve_reads(&mut self) {
        let done = self.reads.take_resolved(self.applied.index);
        if done.is_empty() {
            return;
        }
        let state = self.replica.state.read();
        for waiter in done {
            match waiter {
                SyncWaiter::Resume { reply, .. } => {
                    let _ = reply.send(true);
                }
                SyncWaiter::Pipeline { conn, token } => {
                    self.connections.sync_done(&state, conn, token)
                }
            }
        }
    }

    fn install_snapshot(&mut self, snap: &Snapshot) {
        let meta = snap.get_metadata();
        tracing::info!(
            index = meta.index,
            term = meta.term,
            bytes = snap.data.len(),
            "installing snapshot from the leader"
        );
        let options = self.replica.state.read().tree.options;
        let state = match snapshot::decode(snap.data.clone(), options) {
            Ok(s) => s,
            Err(e) => critical::fatal(format_args!(
                "the snapshot received from the leader is unusable ({e})"
            )),
        };
        // Room for it first (see `disk_space.rs`): a failed write would stop the member,
        // and it would fail the same way after every restart.
        let status = &self.replica.status;
        let stopping = || status.stopping.load(Ordering::Acquire);
        let (dir, reserve) = (self.storage.dir(), self.replica.config().disk_reserve_bytes);
        let bytes = snap.data.len() as u64;
        if !super::disk_space::wait_for_room(dir, reserve, bytes, status, stopping) {
            critical::fatal("stopping while waiting for room for a snapshot");
        }
        self.storage.install_snapshot(snap);
        {
            let mut current = self.replica.state.write();
            *current = state;
            self.replica.set_last_zxid(current.last_zxid);
        }
        self.applied.index = meta.index;
        self.applied.term = meta.term;
        self.proposals.proposed.clear();
        let now = self.clock.now();
        self.measures
            .applied(meta.index, now, &self.replica.counters);
        // Watches were set against a tree that is gone: clients reconnect and re-register
        // them with SetWatches, which reports what changed.
        self.connections.stop_serving();
    }
}

/// The observer of one apply round: the connections' round, plus the session deadlines
/// this member tracks.
struct Applier<'a> {
    round: &'a mut dyn ApplyRound,
    expiry: &'a mut ExpiryTracker,
    restores: &'a Restores,
    now: std::time::Instant,
}

impl ApplyObserver for Applier<'_> {
    fn triggers(&mut self, zxid: i64, triggers: &[Trigger]) {
        self.round.triggers(zxid, triggers);
    }

    fn write_done(&mut self, write: &ClientWrite, zxid: i64, result: WriteResult) {
        self.round.write_done(write, zxid, result);
    }

    fn session_created(
        &mut self,
        session: i64,
        info: &SessionInfo,
        origin: Origin,
        zxid: i64,
        ok: bool,
    ) {
        if ok {
            self.expiry.add(session, info.timeout, self.now);
        }
        self.round.session_created(session, info, origin, zxid, ok);
    }

    fn ephemerals_deleted(&mut self, session: i64, zxid: i64, triggers: &[Trigger]) {
        self.round.ephemerals_deleted(session, zxid, triggers);
    }

    fn session_closed(&mut self, session: i64, zxid: i64, reason: CloseReason) {
        self.expiry.remove(session);
        self.round.session_closed(session, zxid, reason);
    }

    fn restored(&mut self, nonce: u64, zxid: i64, sessions: &BTreeMap<i64, SessionInfo>) {
        // Deadlines only count on the leader; a follower's are re-armed when it leads.
        let sessions = sessions.iter().map(|(id, s)| (*id, s.timeout));
        self.expiry.rearm(sessions, self.now);
        self.restores.applied(nonce, zxid);
    }
}
