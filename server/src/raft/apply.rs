//! Applying committed entries and snapshots from the leader to the state machine, and
//! releasing what waited on them.
//!
//! Every command of every batch is applied in log order, and the connections are told
//! after each (so the reads queued behind a write see exactly its state); conf changes go
//! to raft-rs (`membership.rs`). A snapshot from the leader replaces the state whole. The
//! Ready cycle (`driver.rs`) decides when; this file only applies.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;

use raft::eraftpb::{Entry, EntryType, Snapshot};
use raft::StateRole;

use super::connections::ApplyRound;
use super::disk_space;
use super::expiry::ExpiryTracker;
use super::group::Group;
use super::input::SyncWaiter;
use super::membership::apply_conf_change;
use super::metrics::Measures;
use super::proposed::Proposed;
use super::read_index::ReadIndex;
use super::recovery::Recovery;
use super::restores::Restores;
use super::snapshot_schedule::SnapshotSchedule;
use crate::critical;
use crate::state::command::{Batch, ClientWrite, CloseReason, Origin};
use crate::state::tree::Trigger;
use crate::state::{snapshot, ApplyObserver, SessionInfo, WriteResult};

/// The parts applying touches, borrowed from the driver for one call.
pub(super) struct Applying<'a> {
    pub group: &'a mut Group,
    /// The leader's own batches, applied without decoding.
    pub proposed: &'a mut Proposed,
    /// Session deadlines, added and removed as sessions are.
    pub expiry: &'a mut ExpiryTracker,
    /// Conf changes may promote this member (`recovery.rs`).
    pub recovery: &'a mut Recovery,
    pub snapshots: &'a mut SnapshotSchedule,
    pub measures: &'a mut Measures,
}

impl Applying<'_> {
    /// Applies committed entries in log order: every command of every batch, telling the
    /// connections after each (so the reads queued behind a write see exactly its state).
    pub fn entries(&mut self, entries: Vec<Entry>) {
        if entries.is_empty() {
            return;
        }
        let replica = self.group.replica.clone();
        let connections = self.group.connections.clone();
        let now = self.group.clock.now();
        let mut state = replica.state.write();
        // Lock order: the state first, then (inside the round) the watches.
        let mut round = connections.apply_round();
        let applied = entries.len() as u64;
        for e in entries {
            match e.get_entry_type() {
                EntryType::EntryNormal if !e.data.is_empty() => {
                    let own = self.proposed.take(e.index, e.term);
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
                        expiry: &mut *self.expiry,
                        restores: &self.group.replica.restores,
                        now,
                    };
                    for command in &batch.commands {
                        state.apply_one(command, e.term, batch.time, &mut observer);
                        observer.round.settle(&state);
                    }
                    self.proposed.recycle(batch.commands);
                }
                EntryType::EntryNormal => {}
                EntryType::EntryConfChange | EntryType::EntryConfChangeV2 => {
                    apply_conf_change(self.group, self.recovery, &e);
                }
            }
            self.group.applied.index = e.index;
            self.group.applied.term = e.term;
            self.snapshots.bytes_since += e.data.len() as u64;
        }
        replica.set_last_zxid(state.last_zxid);
        self.group.storage.set_applied(self.group.applied.index);
        let counters = &replica.counters;
        counters.commits.fetch_add(applied, Ordering::Relaxed);
        if self.group.leadership.role != StateRole::Leader {
            counters
                .learner_commits
                .fetch_add(applied, Ordering::Relaxed);
        }
        self.measures
            .applied(self.group.applied.index, now, counters);
        drop(state);
        round.finish();
        replica
            .status
            .applied_index
            .store(self.group.applied.index, Ordering::Relaxed);
    }

    pub fn snapshot(&mut self, snap: &Snapshot) {
        let meta = snap.get_metadata();
        tracing::info!(
            index = meta.index,
            term = meta.term,
            bytes = snap.data.len(),
            "installing snapshot from the leader"
        );
        let options = self.group.replica.state.read().tree.options;
        let state = match snapshot::decode(snap.data.clone(), options) {
            Ok(s) => s,
            Err(e) => critical::fatal(format_args!(
                "the snapshot received from the leader is unusable ({e})"
            )),
        };
        // Room for it first (see `disk_space.rs`): a failed write would stop the member,
        // and it would fail the same way after every restart.
        let status = &self.group.replica.status;
        let stopping = || status.stopping.load(Ordering::Acquire);
        let (dir, reserve) = (
            self.group.storage.dir(),
            self.group.replica.config().disk_reserve_bytes,
        );
        let bytes = snap.data.len() as u64;
        if !disk_space::wait_for_room(dir, reserve, bytes, status, stopping) {
            critical::fatal("stopping while waiting for room for a snapshot");
        }
        self.group.storage.install_snapshot(snap);
        {
            let mut current = self.group.replica.state.write();
            *current = state;
            self.group.replica.set_last_zxid(current.last_zxid);
        }
        self.group.applied.index = meta.index;
        self.group.applied.term = meta.term;
        self.proposed.clear();
        let now = self.group.clock.now();
        self.measures
            .applied(meta.index, now, &self.group.replica.counters);
        // Watches were set against a tree that is gone: clients reconnect and re-register
        // them with SetWatches, which reports what changed.
        self.group.connections.stop_serving();
    }
}

/// Releases the sync waiters whose ReadIndex this member has now applied.
pub(super) fn resolve_reads(g: &Group, reads: &mut ReadIndex) {
    let done = reads.take_resolved(g.applied.index);
    if done.is_empty() {
        return;
    }
    let state = g.replica.state.read();
    for waiter in done {
        match waiter {
            SyncWaiter::Resume { reply, .. } => {
                let _ = reply.send(true);
            }
            SyncWaiter::Pipeline { conn, token } => g.connections.sync_done(&state, conn, token),
        }
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
