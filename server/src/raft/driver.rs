//! The Raft driver: one OS thread owns raft-rs's `RawNode`, and this is its loop.
//!
//! Everything reaches the thread through one inbox ([`Input`]). Each turn of the loop
//! handles what arrived, runs the timers (Raft ticks, session deadlines, ReadIndex retries,
//! cleanup of containers and TTL nodes), proposes what the leader gathered as one entry (a
//! [`crate::state::command::Batch`]) or forwards it to the leader, and then handles every
//! `Ready` (see `ready.rs` for the ordering contract). The loop reads top to bottom:
//! [`Consensus::run`] → [`Consensus::turn`] → `handle` → `on_timers` → `flush_pending`
//! → `process_ready`.
//!
//! The concerns live beside this file, each on its own part of the state below:
//! `ready.rs` (the Ready cycle and apply), `leader.rs` (batching, proposals, session
//! expiry, cleanup), `read_index.rs` (sync bookkeeping), `serving.rs` (when this member
//! serves clients; this file publishes what it decides), `snapshot_schedule.rs` (when to
//! snapshot).
//!
//! Standalone is a one-voter group running exactly this code.

use std::collections::{HashSet, VecDeque};
use std::sync::atomic::Ordering;
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use raft::{RawNode, ReadOnlyOption, SnapshotStatus, StateRole};

use super::clock::Clock;
use super::connections::Connections;
use super::expiry::ExpiryTracker;
use super::input::{Input, Transfer};
use super::log_writer::LogWrite;
use super::metrics::Measures;
use super::proposed::Proposals;
use super::read_index::ReadIndex;
use super::replica::Replica;
use super::serving::{Observed, ServingAction, ServingPolicy};
use super::snapshot_worker::SnapshotJob;
use super::status::Role;
use super::storage::RaftStorage;
use super::test_hooks::TestHooks;
use super::timing::{election_timeout, Timers, ELECTION_TICKS, HEARTBEAT_TICKS};
use super::transport::Peers;
use super::trust::Trust;
use crate::state::command::ClientWrite;

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

/// This member's place in the group (fixed while it runs).
pub(super) struct Member {
    pub me: u64,
    /// A one-voter group: campaigns at once, never talks to peers.
    pub standalone: bool,
    /// A learner: never campaigns, never votes.
    pub observer: bool,
}

/// Who leads, as this member last learned it from a `Ready`.
pub(super) struct Leadership {
    /// The leader's id; 0 while unknown.
    pub leader: u64,
    /// The role the last `Ready` reported. Becoming leader re-arms every session deadline
    /// at the same moment this changes; see [`Consensus::leads`].
    pub role: StateRole,
    /// When the leader was last heard from (an observer never campaigns, so this is what
    /// tells it the leader is gone).
    pub last_contact: Instant,
    /// Until when an operator's yield waits for a follower to answer (`transfer.rs`).
    pub yield_until: Option<Instant>,
}

/// The ready numbers last handed to the log writer and last reported durable by it.
#[derive(Default)]
pub(super) struct LogJobs {
    pub sent: u64,
    pub persisted: u64,
}

/// How far the state machine has applied the log.
pub(super) struct Applied {
    pub index: u64,
    pub term: u64,
}

/// The Raft loop's side of snapshotting.
#[derive(Default)]
pub(super) struct SnapshotSchedule {
    /// Bytes of entries applied since the last snapshot was started.
    pub bytes_since: u64,
    /// The size of the last snapshot written.
    pub last_bytes: u64,
    /// A capture is with the worker; no other is started meanwhile.
    pub in_progress: bool,
    /// The capture with the worker replaces a damaged snapshot file (`scrub.rs`).
    pub repairing: bool,
}

/// What only the leader does: decide expiries and clean up containers and TTL nodes.
#[derive(Default)]
pub(super) struct LeaderDuties {
    /// Session deadlines. Every member tracks them as sessions are created and closed; only
    /// the leader's, re-armed when it took over, decide anything.
    pub expiry: ExpiryTracker,
    /// Cleanup deletes proposed in this round (not proposed twice).
    pub cleanup_inflight: HashSet<String>,
    /// TTL nodes' ages on the monotonic clock (`ttl_clock.rs`).
    pub ttl_clock: super::ttl_clock::TtlClock,
}

/// The leader's bookkeeping for membership changes (`membership.rs`).
#[derive(Default)]
pub(super) struct MembershipWork {
    /// When `/zookeeper/config`'s first content was last proposed.
    pub stated_at: Option<Instant>,
    /// The configuration version the peer transport was last given.
    pub peers_version: Option<i64>,
    /// Reconfigs waiting for the previous one to be carried out, and since when.
    pub held: VecDeque<(ClientWrite, Instant)>,
    /// The log index of the last reconfig proposed (or of the last entry when this member
    /// took over): the next reconfig waits until it is applied.
    pub reconfig_index: u64,
    /// Servers syncing before a reconfig names them (`joiners.rs`), and whether the
    /// configuration names this member an observer (None: it does not name it).
    pub joiners: super::joiners::Joiners,
    pub listed_observer: Option<bool>,
}

/// See the module docs.
pub struct Consensus {
    /// raft-rs's node, over the same RocksDB store as `storage`.
    pub(super) node: RawNode<RaftStorage>,
    pub(super) storage: RaftStorage,
    /// The state, status and inbox shared with the layers above.
    pub(super) replica: Arc<Replica>,
    /// The connections of this member: the only way to them.
    pub(super) connections: Arc<dyn Connections>,
    /// The other members (none when standalone).
    pub(super) peers: Option<Arc<dyn Peers>>,
    pub(super) clock: Arc<dyn Clock>,
    inbox: Receiver<Input>,
    pub(super) workers: Workers,
    /// What the log writer has in hand (`ready.rs` writes inline only when nothing).
    pub(super) log_jobs: LogJobs,
    pub(super) member: Member,
    pub(super) timers: Timers,
    pub(super) leadership: Leadership,
    pub(super) proposals: Proposals,
    pub(super) reads: ReadIndex,
    pub(super) duties: LeaderDuties,
    pub(super) membership: MembershipWork,
    /// Test-only holds and faults (inert but with feature `test-hooks` and the variable).
    pub(super) hooks: TestHooks,
    pub(super) applied: Applied,
    pub(super) snapshots: SnapshotSchedule,
    pub(super) serving: ServingPolicy,
    /// Episode clocks and the proposals in flight, for the metrics.
    pub(super) measures: Measures,
    /// Whether this member's store and its peers' may count toward quorums (`trust.rs`).
    pub(super) trust: Trust,
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
        let me = replica.me;
        let snap = storage.snapshot_metadata();
        let config = raft::Config {
            id: me,
            election_tick: ELECTION_TICKS,
            heartbeat_tick: HEARTBEAT_TICKS,
            applied: snap.index,
            max_size_per_msg: 8 * 1024 * 1024,
            max_inflight_msgs: 512,
            check_quorum: true,
            pre_vote: true,
            read_only_option: ReadOnlyOption::Safe,
            max_uncommitted_size: 1 << 30,
            ..Default::default()
        };
        config.validate()?;
        let logger = super::slog_bridge::logger(me);
        let node = RawNode::new(&config, storage.clone(), &logger)?;
        let committed_at_start = node.raft.raft_log.committed;
        // Raft's own view: a reconfig may have made this member one (or not) since zoo.cfg.
        let observer = node.raft.prs().conf().learners().contains(&me);
        let settings = replica.config();
        let tick = settings.raft_tick;
        let touch_interval =
            Duration::from_millis((settings.tick_time_ms as u64 / 2).clamp(10, 1000));
        let now = clock.now();
        let mut identity = storage.identity();
        if settings.is_standalone() && !identity.trusted {
            // A one-voter group has nobody to forget anything for: its store is the group's.
            identity.trusted = true;
            if let Err(e) = storage.set_identity(identity) {
                tracing::error!("cannot record this store's identity: {e}");
            }
        }
        let trust = Trust::new(identity, now, election_timeout(tick), snap.index);
        let hooks = TestHooks::from_env(&settings.data_dir);
        let peers = hooks.wrap(peers);
        let mut c = Consensus {
            node,
            storage,
            member: Member {
                me,
                standalone: settings.is_standalone(),
                observer,
            },
            timers: Timers {
                tick,
                touch_interval,
                next_tick: now + tick,
                next_touch: now + touch_interval,
                next_cleanup: now + settings.container_check_interval,
                last_run: now,
                campaign_until: None,
            },
            leadership: Leadership {
                leader: 0,
                role: StateRole::Follower,
                last_contact: now,
                yield_until: None,
            },
            proposals: Proposals::default(),
            reads: ReadIndex::default(),
            duties: LeaderDuties::default(),
            membership: MembershipWork::default(),
            hooks,
            applied: Applied {
                index: snap.index,
                term: snap.term,
            },
            snapshots: SnapshotSchedule::default(),
            serving: ServingPolicy::new(election_timeout(tick), settings.min_session_timeout_ms),
            measures: Measures::new(now, snap.index, committed_at_start),
            trust,
            inbox,
            workers,
            log_jobs: LogJobs::default(),
            replica,
            connections,
            peers,
            clock,
        };
        c.show_local_config();
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
            self.timers.campaign_until = Some(self.clock.now() + keep);
        }
        if self.member.standalone || campaign {
            // A one-voter group needs no election timeout: lead at once.
            if let Err(e) = self.node.campaign() {
                tracing::error!("campaign at start failed: {e}");
            }
        }
        self.process_ready();
        let backlog = match takeover {
            Some(t) => {
                self.serving
                    .keep_clients_until(self.clock.now() + t.keep_clients_for);
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
                .saturating_duration_since(self.clock.now());
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
        let now = self.clock.now();
        // One ReadIndex request for every waiter of this turn.
        if let Some(ctx) = self.reads.ask(now) {
            self.node.read_index(ctx);
        }
        self.on_timers(now);
        self.flush_pending(now);
        self.process_ready();
        true
    }

    /// Stops serving, then lets the log writer finish what it was given and the snapshot
    /// worker finish its snapshot, and waits for both: when this returns, and the node and
    /// storage are dropped with `self`, nothing uses the store any more.
    pub(super) fn shutdown(mut self) {
        self.replica.status.serving.store(false, Ordering::Release);
        self.replica.status.stopping.store(true, Ordering::Release);
        self.connections.stop_serving();
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
        self.snapshot_at_shutdown(finished);
    }

    /// Handles one input; false on [`Input::Shutdown`].
    fn handle(&mut self, input: Input) -> bool {
        let now = self.clock.now();
        match input {
            Input::Command(c) => self.proposals.push(c, now),
            Input::Commands(cs, encoded) => self.proposals.extend_encoded(cs, encoded, now),
            Input::Forwarded(_) | Input::Raft(_) | Input::Touch(_) if self.hooks.peers_cut() => {}
            Input::Forwarded(cs) => self.proposals.extend(cs, now),
            Input::ReadIndex(waiter) => self.reads.request(waiter),
            Input::Raft(mut m) => {
                if m.from == self.leadership.leader && m.from != 0 {
                    self.leadership.last_contact = now;
                }
                if !self.screen(&mut m) {
                    return true;
                }
                let stepped = (m.get_msg_type(), m.from, m.term);
                if let Err(e) = self.node.step(*m) {
                    tracing::debug!("raft step: {e}");
                }
                if !self.trust.me.trusted {
                    self.after_step(stepped);
                }
            }
            Input::PeerIdentity(from, said) => self.peer_identity(from, said),
            Input::Touch(sessions) => {
                if self.leads() {
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
                self.node.report_snapshot(to, status);
            }
            Input::Unreachable(id) => self.node.report_unreachable(id),
            Input::PeerGone(id) => self.on_peer_gone(id),
            Input::Persisted(number) => {
                self.log_jobs.persisted = self.log_jobs.persisted.max(number);
                self.node.on_persist_ready(number);
            }
            Input::SnapshotWritten(Some(written)) => self.snapshot_written(written),
            Input::SnapshotWritten(None) => self.snapshot_failed(),
            Input::TransferLeader(what) => {
                self.transfer_leadership(what);
            }
            Input::Shutdown => return false,
        }
        true
    }

    /// Whether this member leads, as far as deciding anything goes (expiring a session,
    /// proposing a cleanup). Both must hold:
    /// - raft-rs's own role: a message stepped in this turn may have deposed us before the
    ///   next `Ready` updates `leadership.role` (a leader paused past its term would
    ///   otherwise expire sessions that were alive on the other members);
    /// - `leadership.role`: it turns to leader together with the re-arming of every session
    ///   deadline, when the `Ready` reports our election. Until then this member's
    ///   deadlines are a follower's, never touched, long stale.
    pub(super) fn leads(&self) -> bool {
        self.leadership.role == StateRole::Leader && self.node.raft.state == StateRole::Leader
    }

    fn on_timers(&mut self, now: Instant) {
        let gap = now.saturating_duration_since(self.timers.last_run);
        self.timers.last_run = now;
        if gap > election_timeout(self.timers.tick) && self.leads() {
            // Nothing was heard while stalled, so no deadline that lapsed meanwhile says a
            // session died: every session gets a full timeout, as under a new leader.
            tracing::warn!("the Raft loop stalled for {gap:?}; session deadlines re-armed");
            self.rearm_sessions(now);
        }
        // A member whose store is untrusted must not campaign (`trust.rs`): its election
        // timer stands still.
        self.retry_yield(now);
        let ticks = now >= self.timers.next_tick
            && (self.node.raft.state == StateRole::Leader || self.may_vote());
        while now >= self.timers.next_tick {
            if ticks {
                self.node.tick();
                let leader = self.node.raft.leader_id != raft::INVALID_ID;
                if self.timers.campaign_again(now, leader) && self.node.campaign().is_err() {
                    tracing::debug!("a takeover's campaign was not started");
                }
            }
            self.timers.next_tick += self.timers.tick;
            if self.timers.next_tick < now {
                self.timers.next_tick = now + self.timers.tick;
            }
        }
        if now >= self.timers.next_touch {
            self.timers.next_touch = now + self.timers.touch_interval;
            self.session_round(now);
            self.hooks.refresh_cut(self.member.me);
            self.membership_round(now);
            self.recovery_round();
            self.announce(false);
            self.maybe_snapshot();
            self.retry_reads(now);
            self.replica.counters.store_memory(self.storage.memory());
            self.publish_status();
            if self.replica.status.disk_full.load(Ordering::Acquire)
                && self.leads()
                && !self.transferring()
            {
                // It cannot write its log: another member must lead (see `disk_space.rs`).
                self.transfer_leadership(Transfer::Yield);
            }
        }
        if self.leads() && now >= self.timers.next_cleanup {
            self.timers.next_cleanup = now + self.replica.config().container_check_interval;
            self.cleanup_round();
        }
    }

    /// ReadIndex requests can be dropped silently by raft-rs (no leader yet, or a leader
    /// that has not committed in its term); ask again until answered.
    fn retry_reads(&mut self, now: Instant) {
        let after = self.timers.tick * (HEARTBEAT_TICKS as u32 * 2);
        for ctx in self.reads.due_for_retry(now, after) {
            self.node.read_index(ctx);
        }
    }

    /// Publishes the Raft indexes, the role and whether this member serves (the serving
    /// policy decides), and drops the clients when the policy says so.
    pub(super) fn publish_status(&mut self) {
        let now = self.clock.now();
        let raft = &self.node.raft;
        let status = &self.replica.status;
        status.term.store(raft.term, Ordering::Relaxed);
        status
            .commit_index
            .store(raft.raft_log.committed, Ordering::Relaxed);
        status
            .log_last_index
            .store(raft.raft_log.last_index(), Ordering::Relaxed);
        let observed = Observed {
            role: self.leadership.role,
            standalone: self.member.standalone,
            observer: self.reports_observer(),
            leader: self.leadership.leader,
            heard_from_leader: now.saturating_duration_since(self.leadership.last_contact)
                < election_timeout(self.timers.tick) * 2,
            applied_index: self.applied.index,
            applied_term: self.applied.term,
            term: raft.term,
            committed: raft.raft_log.committed,
            trusted: self.trust.me.trusted,
        };
        let (role, serving) = self.serving.decide(&observed);
        status.set_role(role);
        self.publish_trust(serving);
        if role == Role::Leader {
            self.publish_followers();
        }
        let counters = &self.replica.counters;
        let measures = &mut self.measures;
        measures
            .proposals
            .committed(observed.committed, now, counters);
        measures.serving(serving, role == Role::Leader, now, counters);
        let me = self.member.me;
        let was = self.replica.status.serving.swap(serving, Ordering::AcqRel);
        if serving && !was {
            tracing::info!(member = me, role = role.name(), "serving clients");
        } else if !serving && was {
            tracing::warn!(
                member = me,
                "not serving new clients: no leader or no quorum"
            );
        }
        if self.serving.update(serving, now) == ServingAction::DropClients {
            tracing::warn!(
                member = me,
                "dropping clients: still no leader or no quorum"
            );
            self.connections.stop_serving();
        }
    }

    /// The leader's view of its followers, for `mntr`.
    fn publish_followers(&self) {
        let raft = &self.node.raft;
        let mut followers = 0;
        let mut synced = 0;
        let mut observers = 0;
        let last = raft.raft_log.last_index();
        let learners: HashSet<u64> = raft.prs().conf().learners().iter().copied().collect();
        for (id, pr) in raft.prs().iter() {
            if *id == self.member.me {
                continue;
            }
            if learners.contains(id) {
                observers += 1;
                continue;
            }
            if pr.recent_active {
                followers += 1;
                if pr.matched + 64 >= last {
                    synced += 1;
                }
            }
        }
        let status = &self.replica.status;
        status.followers.store(followers, Ordering::Relaxed);
        status.synced_followers.store(synced, Ordering::Relaxed);
        status.observers.store(observers, Ordering::Relaxed);
    }
}
