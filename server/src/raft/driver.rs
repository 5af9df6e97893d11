//! The Raft driver: one OS thread owns raft-rs's `RawNode`, and this is its loop.
//!
//! Everything reaches the thread through one inbox ([`Input`]). Each turn of the loop
//! handles what arrived, runs the timers (Raft ticks, session deadlines, ReadIndex retries,
//! cleanup of containers and TTL nodes), proposes what the leader gathered as one entry (a
//! [`crate::state::command::Batch`]) or forwards it to the leader, and then handles every
//! `Ready` (the ordering contract is below). The loop reads top to bottom:
//! [`Consensus::run`] → [`Consensus::turn`] → `handle` → `on_timers` → the turn's
//! proposals (`batching.rs`) → `process_ready`.
//!
//! The driver owns the [`Group`] (raft-rs's node, the store, the layers around it) and each
//! concern's state, and hands a concern the group with the call; no concern file uses this
//! one. `leader.rs` (session expiry, cleanup), `batching.rs` (proposals), `apply.rs`
//! (applying entries), `membership.rs` (reconfig), `recovery.rs` (trust), `transfer.rs`,
//! `liveness.rs`, `read_index.rs` (sync bookkeeping), `serving.rs` (when this member serves
//! clients; this file publishes what it decides), `snapshot_schedule.rs` (when to
//! snapshot).
//!
//! Standalone is a one-voter group running exactly this code.
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
//!    `on_persist_ready` itself after step 6 (`LogJobs::hand_over`, `log_writer.rs`).
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

use std::sync::atomic::Ordering;
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use raft::{SnapshotStatus, StateRole};

use super::apply::{resolve_reads, Applying};
use super::batching::Batching;
use super::clock::Clock;
use super::connections::Connections;
use super::group::Group;
use super::input::{Input, Transfer};
use super::leader::LeaderDuties;
use super::log_writer::{LogJobs, LogWrite, PersistJob};
use super::membership::{show_local_config, MembershipWork};
use super::metrics::Measures;
use super::proposed::Proposals;
use super::publish::Publishing;
use super::read_index::ReadIndex;
use super::recovery::Recovery;
use super::replica::Replica;
use super::serving::ServingPolicy;
use super::snapshot_schedule::SnapshotSchedule;
use super::snapshot_worker::SnapshotJob;
use super::storage::RaftStorage;
use super::timing::{election_timeout, Timers, HEARTBEAT_TICKS};
use super::transfer::Transfers;
use super::transport::Peers;
use super::trust::Trust;

/// How many inbox items one turn handles before servicing timers and readies.
const MAX_INPUTS_PER_TURN: usize = 20_000;

/// The threads that work for the Raft thread, and how to reach them.
pub struct Workers {
    /// The log writer (`log_writer.rs`): makes staged entries durable, then sends the
    /// messages that must follow persistence.
    pub log_writer: Sender<LogWrite>,
    /// The snapshot worker (`snapshot_worker.rs`): encodes and stores captured states.
    pub snapshots: Sender<SnapshotJob>,
    /// The scrub (`scrub.rs`): stops when this closes.
    pub scrub: Sender<()>,
    /// Joined at shutdown, so nothing uses the store once the driver is gone.
    pub threads: Vec<JoinHandle<()>>,
}

/// See the module docs.
pub struct Consensus {
    /// What every concern works with (see `group.rs`).
    pub(super) group: Group,
    inbox: Receiver<Input>,
    workers: Workers,
    /// What the log writer has in hand (`log_writer.rs`).
    log_jobs: LogJobs,
    timers: Timers,
    proposals: Proposals,
    reads: ReadIndex,
    duties: LeaderDuties,
    membership: MembershipWork,
    /// Whether this member's store and its peers' may count toward quorums (`trust.rs`).
    recovery: Recovery,
    transfers: Transfers,
    snapshots: SnapshotSchedule,
    serving: ServingPolicy,
    /// Episode clocks and the proposals in flight, for the metrics.
    measures: Measures,
}

/// What a driver is built from (see [`Consensus::new`]).
pub struct Parts {
    pub replica: Arc<Replica>,
    pub connections: Arc<dyn Connections>,
    pub storage: RaftStorage,
    pub inbox: Receiver<Input>,
    pub peers: Option<Arc<dyn Peers>>,
    pub clock: Arc<dyn Clock>,
    pub workers: Workers,
}

impl Consensus {
    /// Builds the Raft node over `parts.storage`, whose snapshot (if any) the replica's
    /// state was loaded from.
    pub fn new(parts: Parts) -> Result<Consensus, raft::Error> {
        let Parts {
            replica,
            connections,
            storage,
            inbox,
            peers,
            clock,
            workers,
        } = parts;
        let group = Group::new(replica, connections, storage, peers, clock)?;
        let committed_at_start = group.node.raft.raft_log.committed;
        let (tick, applied) = (group.tick, group.applied.index);
        let settings = group.replica.config();
        let touch_interval =
            Duration::from_millis((settings.tick_time_ms as u64 / 2).clamp(10, 1000));
        let now = group.clock.now();
        let mut identity = group.storage.identity();
        if settings.is_standalone() && !identity.trusted {
            // A one-voter group has nobody to forget anything for: its store is the group's.
            identity.trusted = true;
            if let Err(e) = group.storage.set_identity(identity) {
                tracing::error!("cannot record this store's identity: {e}");
            }
        }
        let trust = Trust::new(identity, now, election_timeout(tick), applied);
        let timers = Timers {
            touch_interval,
            next_tick: now + tick,
            next_touch: now + touch_interval,
            next_cleanup: now + settings.container_check_interval,
            last_run: now,
            campaign_until: None,
        };
        let serving = ServingPolicy::new(election_timeout(tick), settings.min_session_timeout_ms);
        let mut c = Consensus {
            group,
            timers,
            proposals: Proposals::default(),
            reads: ReadIndex::default(),
            duties: LeaderDuties::default(),
            membership: MembershipWork::default(),
            recovery: Recovery { trust },
            transfers: Transfers::default(),
            snapshots: SnapshotSchedule::default(),
            serving,
            measures: Measures::new(now, applied, committed_at_start),
            inbox,
            workers,
            log_jobs: LogJobs::default(),
        };
        show_local_config(&c.group);
        c.publish_status();
        Ok(c)
    }

    /// Runs until [`Input::Shutdown`] or until every sender is gone; a takeover's backlog
    /// first.
    pub fn run(mut self, takeover: Option<super::Takeover>) {
        let campaign = takeover.as_ref().is_some_and(|t| t.campaign);
        if campaign {
            let keep = takeover
                .as_ref()
                .map_or(Duration::ZERO, |t| t.keep_clients_for);
            self.timers.campaign_until = Some(self.group.clock.now() + keep);
        }
        if self.group.member.standalone || campaign {
            // A one-voter group needs no election timeout: lead at once.
            if let Err(e) = self.group.node.campaign() {
                tracing::error!("campaign at start failed: {e}");
            }
        }
        self.process_ready();
        let backlog = match takeover {
            Some(t) => {
                self.serving
                    .keep_clients_until(self.group.clock.now() + t.keep_clients_for);
                t.backlog
            }
            None => Vec::new(),
        };
        for input in backlog {
            if !self.handle(input) {
                self.shutdown();
                return;
            }
        }
        loop {
            let wait = self
                .timers
                .next_deadline()
                .saturating_duration_since(self.group.clock.now());
            let woken_by = match self.inbox.recv_timeout(wait) {
                Ok(input) => Some(input),
                Err(RecvTimeoutError::Timeout) => None,
                Err(RecvTimeoutError::Disconnected) => break,
            };
            if !self.turn(woken_by) {
                break;
            }
        }
        self.shutdown();
    }

    /// One turn of the loop: the input that woke it and whatever else is waiting, then the
    /// timers, then what the turn gathered is proposed or forwarded, then every `Ready` is
    /// handled. False once the driver must stop.
    pub(super) fn turn(&mut self, woken_by: Option<Input>) -> bool {
        if let Some(input) = woken_by {
            if !self.handle(input) {
                return false;
            }
        }
        for _ in 0..MAX_INPUTS_PER_TURN {
            match self.inbox.try_recv() {
                Ok(input) => {
                    if !self.handle(input) {
                        return false;
                    }
                }
                Err(_) => break,
            }
        }
        let now = self.group.clock.now();
        // One ReadIndex request for every waiter of this turn.
        if let Some(ctx) = self.reads.ask(now) {
            self.group.node.read_index(ctx);
        }
        self.on_timers(now);
        Batching {
            group: &mut self.group,
            proposals: &mut self.proposals,
            membership: &mut self.membership,
            measures: &mut self.measures,
        }
        .flush(now);
        self.process_ready();
        true
    }

    /// Stops serving, then lets the log writer finish what it was given and the snapshot
    /// worker finish its snapshot, and waits for both: when this returns, and the node and
    /// storage are dropped with `self`, nothing uses the store any more.
    pub(super) fn shutdown(mut self) {
        let status = &self.group.replica.status;
        status.serving.store(false, Ordering::Release);
        status.stopping.store(true, Ordering::Release);
        self.group.connections.stop_serving();
        // Closing their channels stops the workers once they finished what they were given.
        self.workers.log_writer = std::sync::mpsc::channel().0;
        self.workers.snapshots = std::sync::mpsc::channel().0;
        self.workers.scrub = std::sync::mpsc::channel().0;
        for t in std::mem::take(&mut self.workers.threads) {
            let _ = t.join();
        }
        let finished = self.inbox.try_iter().filter_map(|input| match input {
            Input::SnapshotWritten(w) => Some(w),
            _ => None,
        });
        let finished: Vec<_> = finished.collect();
        self.snapshots.snapshot_at_shutdown(&self.group, finished);
    }

    /// Handles one input; false on [`Input::Shutdown`].
    fn handle(&mut self, input: Input) -> bool {
        let g = &mut self.group;
        let now = g.clock.now();
        match input {
            Input::Command(c) => self.proposals.push(c, now),
            Input::Commands(cs, encoded) => self.proposals.extend_encoded(cs, encoded, now),
            Input::Forwarded(_) | Input::Raft(_) | Input::Touch(_) if g.hooks.peers_cut() => {}
            Input::Forwarded(cs) => self.proposals.extend(cs, now),
            Input::ReadIndex(waiter) => self.reads.request(waiter),
            Input::Raft(mut m) => {
                if m.from == g.leadership.leader && m.from != 0 {
                    g.leadership.last_contact = now;
                }
                if !self.recovery.screen(g, &mut m) {
                    return true;
                }
                let stepped = (m.get_msg_type(), m.from, m.term);
                if let Err(e) = g.node.step(*m) {
                    tracing::debug!("raft step: {e}");
                }
                if !self.recovery.trust.me.trusted {
                    self.recovery.after_step(g, stepped);
                }
            }
            Input::PeerIdentity(from, said) => {
                self.recovery.peer_identity(g, from, said);
                self.membership.maybe_joiner(g, &self.recovery.trust, from);
            }
            Input::Touch(sessions) => {
                if g.leads() {
                    for s in sessions {
                        self.duties.expiry.touch(s, now);
                    }
                }
            }
            Input::SnapshotStatus { to, ok } => {
                let status = if ok {
                    SnapshotStatus::Finish
                } else {
                    SnapshotStatus::Failure
                };
                g.node.report_snapshot(to, status);
            }
            Input::Unreachable(id) => g.node.report_unreachable(id),
            Input::PeerGone(id) => {
                self.membership.joiners.gone(id, now);
                super::liveness::on_peer_gone(g, id);
            }
            Input::Persisted(number) => {
                self.log_jobs.persisted(number);
                g.node.on_persist_ready(number);
            }
            Input::SnapshotWritten(Some(written)) => self.snapshots.snapshot_written(g, written),
            Input::SnapshotWritten(None) => self.snapshots.snapshot_failed(),
            Input::TransferLeader(what) => {
                self.transfers
                    .transfer_leadership(g, &self.recovery.trust, what);
            }
            Input::Shutdown => return false,
        }
        true
    }

    fn on_timers(&mut self, now: Instant) {
        let g = &mut self.group;
        let gap = now.saturating_duration_since(self.timers.last_run);
        self.timers.last_run = now;
        if gap > g.election_timeout() && g.leads() {
            // Nothing was heard while stalled, so no deadline that lapsed meanwhile says a
            // session died: every session gets a full timeout, as under a new leader.
            tracing::warn!("the Raft loop stalled for {gap:?}; session deadlines re-armed");
            self.duties.rearm_sessions(g, now);
        }
        self.transfers.retry_yield(g, &self.recovery.trust, now);
        // A member whose store is untrusted must not campaign (`trust.rs`): its election
        // timer stands still.
        let ticks = now >= self.timers.next_tick
            && (g.node.raft.state == StateRole::Leader || self.recovery.may_vote(g));
        while now >= self.timers.next_tick {
            if ticks {
                g.node.tick();
                let leader = g.node.raft.leader_id != raft::INVALID_ID;
                if self.timers.campaign_again(now, leader) && g.node.campaign().is_err() {
                    tracing::debug!("a takeover's campaign was not started");
                }
            }
            self.timers.next_tick += g.tick;
            if self.timers.next_tick < now {
                self.timers.next_tick = now + g.tick;
            }
        }
        if now >= self.timers.next_touch {
            self.timers.next_touch = now + self.timers.touch_interval;
            self.duties.session_round(g, &mut self.proposals, now);
            g.hooks.refresh_cut(g.member.me);
            let trust = &self.recovery.trust;
            self.membership
                .membership_round(g, trust, &mut self.proposals, now);
            self.recovery.recovery_round(g, &self.membership.joiners);
            self.recovery.announce(g, false);
            self.snapshots.maybe_snapshot(g, &self.workers.snapshots);
            self.retry_reads(now);
            let g = &mut self.group;
            g.replica.counters.store_memory(g.storage.memory());
            self.publish_status();
            let g = &mut self.group;
            if g.replica.status.disk_full.load(Ordering::Acquire) && g.leads() && !g.transferring()
            {
                // It cannot write its log: another member must lead (see `disk_space.rs`).
                self.transfers
                    .transfer_leadership(g, &self.recovery.trust, Transfer::Yield);
            }
        }
        let g = &mut self.group;
        if g.leads() && now >= self.timers.next_cleanup {
            self.timers.next_cleanup = now + g.replica.config().container_check_interval;
            self.duties.cleanup_round(g, &mut self.proposals);
        }
    }

    /// ReadIndex requests can be dropped silently by raft-rs (no leader yet, or a leader
    /// that has not committed in its term); ask again until answered.
    fn retry_reads(&mut self, now: Instant) {
        let after = self.group.tick * (HEARTBEAT_TICKS as u32 * 2);
        for ctx in self.reads.due_for_retry(now, after) {
            self.group.node.read_index(ctx);
        }
    }

    /// Publishes the status for the layers above (`publish.rs`).
    fn publish_status(&mut self) {
        Publishing {
            group: &self.group,
            serving: &mut self.serving,
            membership: &self.membership,
            recovery: &mut self.recovery,
            measures: &mut self.measures,
        }
        .status();
    }

    /// The parts applying borrows, for one call.
    fn applying(&mut self) -> Applying<'_> {
        Applying {
            group: &mut self.group,
            proposed: &mut self.proposals.proposed,
            expiry: &mut self.duties.expiry,
            recovery: &mut self.recovery,
            snapshots: &mut self.snapshots,
            measures: &mut self.measures,
        }
    }

    /// Handles every pending `Ready` (see the module docs for the order).
    fn process_ready(&mut self) {
        while self.group.node.has_ready() {
            let mut rd = self.group.node.ready();
            if let Some(ss) = rd.ss() {
                self.on_soft_state(ss.leader_id, ss.raft_state);
            }
            // 1. The leader's messages.
            self.group.send(rd.take_messages());
            // 2. A snapshot from the leader.
            if !rd.snapshot().is_empty() {
                self.finish_snapshot_ready(rd);
                continue;
            }
            // 3. Committed entries.
            let committed = rd.take_committed_entries();
            self.applying().entries(committed);
            // 4. New entries and hard state, and the messages that must follow them.
            let g = &mut self.group;
            if g.leadership.role != StateRole::Leader {
                g.replica
                    .counters
                    .learner_proposals
                    .fetch_add(rd.entries().len() as u64, Ordering::Relaxed);
            }
            let entry_bytes: usize = rd.entries().iter().map(|e| e.data.len()).sum();
            let write = g.storage.stage(rd.entries(), rd.hs());
            let messages = rd.take_persisted_messages();
            let mut persisted_now = None;
            if write.is_some() || !messages.is_empty() {
                let job = PersistJob {
                    number: rd.number(),
                    write,
                    sync: rd.must_sync(),
                    messages,
                };
                persisted_now = self.log_jobs.hand_over(
                    &self.group,
                    &self.workers.log_writer,
                    job,
                    entry_bytes,
                );
            }
            // 5. ReadIndex answers.
            for rs in rd.take_read_states() {
                self.reads.answered(rs.index, &rs.request_ctx);
            }
            // 6. Advance.
            let g = &mut self.group;
            g.node.advance_append_async(rd);
            if let Some(number) = persisted_now {
                g.node.on_persist_ready(number);
            }
            g.node.advance_apply();
            resolve_reads(g, &mut self.reads);
            self.snapshots.maybe_snapshot(g, &self.workers.snapshots);
        }
        self.publish_status();
    }

    /// A ready carrying a snapshot from the leader is completed synchronously: everything
    /// staged before it is flushed first, the snapshot replaces the log durably, and only
    /// then are raft-rs told it is persisted (`advance`) and the acks sent.
    fn finish_snapshot_ready(&mut self, mut rd: raft::Ready) {
        self.log_jobs.barrier(&self.workers.log_writer);
        let snap = rd.snapshot().clone();
        self.applying().snapshot(&snap);
        let committed = rd.take_committed_entries();
        self.applying().entries(committed);
        self.group.storage.append(rd.entries(), rd.hs(), true);
        self.group.send(rd.take_persisted_messages());
        for rs in rd.take_read_states() {
            self.reads.answered(rs.index, &rs.request_ctx);
        }
        let mut light = self.group.node.advance(rd);
        self.group.send(light.take_messages());
        let committed = light.take_committed_entries();
        self.applying().entries(committed);
        self.group.node.advance_apply();
        resolve_reads(&self.group, &mut self.reads);
    }

    fn on_soft_state(&mut self, leader: u64, role: StateRole) {
        let g = &mut self.group;
        let was_leader = g.leadership.role == StateRole::Leader;
        let now = g.clock.now();
        if leader != g.leadership.leader {
            tracing::info!(
                member = g.member.me,
                "leader is now {leader} (was {})",
                g.leadership.leader
            );
            if g.leadership.leader != 0 {
                // Writes in flight through the old leader may never be answered.
                g.connections.leader_changed();
            }
            g.leadership.leader = leader;
            g.leadership.last_contact = now;
            // Noted here, as raft-rs tells it: a tenure of any length is on the timeline.
            g.replica.changes.leader(leader, g.node.raft.term);
            self.measures.leader_known(leader, now, &g.replica.counters);
            self.serving.leader_changed();
        }
        g.leadership.role = role;
        if role == StateRole::Leader && !was_leader {
            // A new leader gives every session a full timeout (ZooKeeper does the same).
            self.duties.rearm_sessions(g, now);
            self.timers.next_cleanup = now + g.replica.config().container_check_interval;
            // A fresh ensemble's `/zookeeper/config` right away (only queued here: no
            // proposal may reach raft-rs in the middle of a Ready).
            self.membership
                .state_first_config_if_none(g, &mut self.proposals, now);
            // A reconfig proposed now waits for everything the last leader committed.
            self.membership.reconfig_index = g.last_index();
        }
        g.replica.status.leader.store(leader, Ordering::Relaxed);
    }
}
