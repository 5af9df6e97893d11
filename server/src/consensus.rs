//! The Raft driver: one OS thread owns raft-rs's `RawNode` and runs the ready loop.
//!
//! Everything reaches it through one inbox ([`Input`]): client commands from local
//! connections, commands forwarded by followers, Raft messages from peers, sync requests,
//! session touches, and the log writer's progress. Each turn of the loop drains the inbox,
//! proposes everything gathered as one entry (a [`Batch`]) or forwards it to the leader,
//! ticks, and handles the `Ready` in raft-rs's order (crate docs, `RawNode::ready`):
//!
//! 1. send the leader's messages (they may go out before our own disk write);
//! 2. install a snapshot, if one arrived (after everything staged before it is durable);
//! 3. apply committed entries (already durable) to the state machine;
//! 4. stage new entries and the hard state and hand them to the log writer
//!    ([`crate::persist`]), which writes them with one fsync per round and only then sends
//!    the messages that must follow persistence (votes, append acks);
//! 5. note ReadIndex results; `advance_append_async`; when the writer reports, call
//!    `on_persist_ready`, which lets raft-rs count those entries towards a commit.
//!
//! Standalone is a one-voter group running exactly this code. The leader also owns session
//! deadlines (expiring a session is a replicated close) and the removal of empty containers
//! and expired TTL nodes (replicated deletes).

use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use raft::eraftpb::{ConfState, Entry, EntryType, Message, Snapshot};
use raft::{RawNode, ReadOnlyOption, SnapshotStatus, StateRole};

use crate::delivery::Delivery;
use crate::net::pipeline::Env;
use crate::persist::{PersistCommand, PersistJob};
use crate::registry::Completion;
use crate::session::ExpiryTracker;
use crate::shared::{Role, Shared};
use crate::snapshot;
use crate::storage::RaftStorage;
use crate::transport::Transport;
use crate::txn::{Batch, CloseReason, Command};
use crate::watch::{ConnId, WatchSlot};

/// Raft elects after this many ticks without a leader.
pub const ELECTION_TICKS: usize = 10;
const HEARTBEAT_TICKS: usize = 2;
/// Largest encoded batch proposed as one entry.
const MAX_BATCH_BYTES: usize = 4 * 1024 * 1024;
/// Take a snapshot once this many bytes of entries were applied since the last one (one
/// entry is a whole batch, so counting entries alone would let the log grow large).
const SNAPSHOT_AFTER_BYTES: u64 = 64 * 1024 * 1024;
/// How many inbox items one turn handles before servicing timers and readies.
const MAX_INPUTS_PER_TURN: usize = 20_000;

/// Everything the consensus loop can be told.
pub enum Input {
    /// A command from a local connection.
    Command(Command),
    /// Commands a follower forwarded to us as leader.
    Forwarded(Vec<Command>),
    /// A `sync` (Raft's ReadIndex): the waiter is told once this member has applied
    /// everything the leader had committed when it was asked.
    ReadIndex(SyncWaiter),
    Raft(Box<Message>),
    /// Sessions a follower saw traffic on.
    Touch(Vec<i64>),
    SnapshotStatus {
        to: u64,
        ok: bool,
    },
    /// The snapshot thread stored a snapshot durably (`None`: it failed to).
    SnapshotWritten(Option<SnapshotWritten>),
    Unreachable(u64),
    /// The log writer made everything up to this ready number durable.
    Persisted(u64),
    Shutdown,
}

/// Who waits for a ReadIndex round.
pub enum SyncWaiter {
    /// A client's `sync`, queued in its connection's pipeline.
    Pipeline { conn: ConnId, token: u64 },
    /// A handshake making sure this member knows a session before refusing it.
    Notify(tokio::sync::oneshot::Sender<()>),
}

struct PendingRead {
    waiter: SyncWaiter,
    asked: Instant,
}

/// Millisecond wall-clock time, the time stamped on a batch by the leader.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// The initial membership for a new data directory: voters and observers (learners).
pub fn initial_conf_state(config: &crate::config::Config) -> ConfState {
    let mut cs = ConfState::default();
    if config.members.is_empty() {
        cs.voters = vec![config.my_id];
    } else {
        for m in config.members.values() {
            if m.observer {
                cs.learners.push(m.id);
            } else {
                cs.voters.push(m.id);
            }
        }
    }
    cs
}

/// See the module docs.
pub struct Consensus {
    node: RawNode<RaftStorage>,
    storage: RaftStorage,
    shared: Arc<Shared>,
    inbox: Receiver<Input>,
    transport: Option<Transport>,
    me: u64,
    standalone: bool,
    observer: bool,
    pending: Vec<Command>,
    pending_since: Option<Instant>,
    reads: HashMap<u64, PendingRead>,
    read_seq: u64,
    ready_reads: Vec<(u64, u64)>,
    expiry: ExpiryTracker,
    leader: u64,
    role: StateRole,
    last_leader_contact: Instant,
    /// A follower has applied everything committed at least once under its current leader:
    /// it serves from then on, though under write load its applied index trails the commit
    /// index by a batch at almost any instant.
    synced_with_leader: bool,

    applied: u64,
    applied_term: u64,
    bytes_since_snapshot: u64,
    last_snapshot_bytes: u64,
    snapshot_in_progress: bool,
    snapshots: std::sync::mpsc::Sender<SnapshotJob>,
    persist: std::sync::mpsc::Sender<PersistCommand>,
    /// The log writer and snapshot threads: joined at shutdown, so the store is closed
    /// before the process exits (RocksDB must not be in use while the process tears down).
    workers: Vec<std::thread::JoinHandle<()>>,
    /// When this member stopped serving, and whether its clients were dropped since.
    unserving_since: Option<Instant>,
    clients_dropped: bool,
    drop_clients_after: Duration,
    next_tick: Instant,
    next_touch: Instant,
    /// When the timers last ran: a long gap means this member was stalled (SIGSTOP, a VM
    /// pause, swapping) and saw no sign of life from anyone meanwhile.
    last_timers: Instant,
    next_cleanup: Instant,
    cleanup_inflight: HashSet<String>,
    tick: Duration,
    touch_interval: Duration,
}

impl Consensus {
    /// Builds the Raft node over `storage`, whose snapshot (if any) `shared.state` was
    /// loaded from.
    pub fn new(
        shared: Arc<Shared>,
        storage: RaftStorage,
        inbox: Receiver<Input>,
        transport: Option<Transport>,
    ) -> Result<Consensus, raft::Error> {
        let me = shared.me;
        let snap_index = storage.snapshot_metadata().index;
        let snap_term = storage.snapshot_metadata().term;
        let config = raft::Config {
            id: me,
            election_tick: ELECTION_TICKS,
            heartbeat_tick: HEARTBEAT_TICKS,
            applied: snap_index,
            max_size_per_msg: 8 * 1024 * 1024,
            max_inflight_msgs: 512,
            check_quorum: true,
            pre_vote: true,
            read_only_option: ReadOnlyOption::Safe,
            max_uncommitted_size: 1 << 30,
            ..Default::default()
        };
        config.validate()?;
        let logger = crate::raft_log::logger(me);
        let node = RawNode::new(&config, storage.clone(), &logger)?;
        let (persist_tx, log_writer) =
            crate::persist::spawn(storage.clone(), transport.clone(), shared.clone())
                .map_err(|e| raft::Error::Store(raft::StorageError::Other(Box::new(e))))?;
        let (snapshots, snapshot_writer) =
            spawn_snapshot_writer(storage.clone(), shared.inbox.clone());
        let workers = std::iter::once(log_writer).chain(snapshot_writer).collect();
        let standalone = shared.config.is_standalone();
        let observer = shared.config.is_observer();
        let tick = shared.config.raft_tick;
        let touch_interval =
            Duration::from_millis((shared.config.tick_time_ms as u64 / 2).clamp(10, 1000));
        let now = Instant::now();
        let mut c = Consensus {
            node,
            storage,
            inbox,
            transport,
            me,
            standalone,
            observer,
            pending: Vec::new(),
            pending_since: None,
            reads: HashMap::new(),
            read_seq: 0,
            ready_reads: Vec::new(),
            expiry: ExpiryTracker::default(),
            leader: 0,
            role: StateRole::Follower,
            last_leader_contact: now,
            synced_with_leader: false,

            applied: snap_index,
            applied_term: snap_term,
            bytes_since_snapshot: 0,
            last_snapshot_bytes: 0,
            snapshot_in_progress: false,
            snapshots,
            persist: persist_tx,
            workers,
            unserving_since: None,
            clients_dropped: false,
            // One election timeout, but never more than a quarter of the shortest session.
            drop_clients_after: (tick * ELECTION_TICKS as u32).min(Duration::from_millis(
                shared.config.min_session_timeout_ms.max(0) as u64 / 4,
            )),
            next_tick: now + tick,
            next_touch: now + touch_interval,
            last_timers: now,
            next_cleanup: now + shared.config.container_check_interval,
            cleanup_inflight: HashSet::new(),
            tick,
            touch_interval,
            shared,
        };
        c.publish_status();
        Ok(c)
    }

    /// Runs until [`Input::Shutdown`] or until every sender is gone.
    pub fn run(mut self) {
        if self.standalone {
            // A one-voter group needs no election timeout: lead at once.
            if let Err(e) = self.node.campaign() {
                tracing::error!("standalone campaign failed: {e}");
            }
        }
        self.process_ready();
        'serve: loop {
            let wait = self
                .next_deadline()
                .saturating_duration_since(Instant::now());
            match self.inbox.recv_timeout(wait) {
                Ok(input) => {
                    if !self.handle(input) {
                        break 'serve;
                    }
                    for _ in 0..MAX_INPUTS_PER_TURN {
                        match self.inbox.try_recv() {
                            Ok(input) => {
                                if !self.handle(input) {
                                    break 'serve;
                                }
                            }
                            Err(_) => break,
                        }
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => break 'serve,
            }
            self.on_timers();
            self.flush_pending();
            self.process_ready();
        }
        self.shutdown();
    }

    /// Stops serving, then lets the log writer finish what it was given and the snapshot
    /// thread finish its snapshot, and waits for both: when this returns, and the node and
    /// storage are dropped with `self`, nothing uses the store any more.
    fn shutdown(self) {
        self.shared.status.serving.store(false, Ordering::Release);
        self.shared.registry.broadcast(|| Completion::StopServing);
        let Consensus {
            persist,
            snapshots,
            workers,
            ..
        } = self;
        drop(persist);
        drop(snapshots);
        for w in workers {
            let _ = w.join();
        }
    }

    fn next_deadline(&self) -> Instant {
        self.next_tick.min(self.next_touch)
    }

    fn handle(&mut self, input: Input) -> bool {
        match input {
            Input::Command(c) => {
                if self.pending.is_empty() {
                    self.pending_since = Some(Instant::now());
                }
                self.pending.push(c);
            }
            Input::Forwarded(cs) => {
                if self.pending.is_empty() {
                    self.pending_since = Some(Instant::now());
                }
                self.pending.extend(cs);
            }
            Input::ReadIndex(waiter) => {
                self.read_seq += 1;
                let ctx = self.read_seq;
                self.reads.insert(
                    ctx,
                    PendingRead {
                        waiter,
                        asked: Instant::now(),
                    },
                );
                self.node.read_index(ctx.to_be_bytes().to_vec());
            }
            Input::Raft(m) => {
                if m.from == self.leader && self.leader != 0 {
                    self.last_leader_contact = Instant::now();
                }
                if let Err(e) = self.node.step(*m) {
                    tracing::debug!("raft step: {e}");
                }
            }
            Input::Touch(sessions) => {
                if self.leads() {
                    let now = Instant::now();
                    for s in sessions {
                        self.expiry.touch(s, now);
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
            Input::Persisted(number) => self.node.on_persist_ready(number),
            Input::SnapshotWritten(Some(written)) => self.snapshot_written(written),
            Input::SnapshotWritten(None) => self.snapshot_in_progress = false,
            Input::Shutdown => return false,
        }
        true
    }

    /// Whether this member leads, as far as deciding anything goes: both raft-rs's own role
    /// (a message stepped in this turn may have deposed us before the next `Ready` updates
    /// `self.role`) and `self.role` (set with the re-arming of every session deadline when
    /// the `Ready` reports our election; before that the deadlines are stale).
    fn leads(&self) -> bool {
        self.role == StateRole::Leader && self.node.raft.state == StateRole::Leader
    }

    fn on_timers(&mut self) {
        let now = Instant::now();
        let gap = now.saturating_duration_since(self.last_timers);
        self.last_timers = now;
        if gap > self.tick * ELECTION_TICKS as u32 && self.leads() {
            // Nothing was heard while stalled, so no deadline that lapsed meanwhile says a
            // session died: every session gets a full timeout, as under a new leader.
            tracing::warn!("the Raft loop stalled for {gap:?}; session deadlines re-armed");
            let state = self.shared.state.read();
            self.expiry
                .rearm(state.sessions.iter().map(|(id, s)| (*id, s.timeout)), now);
        }
        while now >= self.next_tick {
            self.node.tick();
            self.next_tick += self.tick;
            if self.next_tick < now {
                self.next_tick = now + self.tick;
            }
        }
        if now >= self.next_touch {
            self.next_touch = now + self.touch_interval;
            let touched = self.shared.registry.drain_touched();
            if self.leads() {
                for s in &touched {
                    self.expiry.touch(*s, now);
                }
                for s in self.expiry.take_expired(now) {
                    tracing::info!("session 0x{s:x} expired");
                    self.queue(Command::CloseSession {
                        session: s,
                        reason: CloseReason::Expired,
                    });
                }
            } else if self.leader != 0 && !touched.is_empty() {
                if let Some(t) = &self.transport {
                    t.touch(self.leader, &touched);
                }
            }
            self.retry_reads(now);
            self.publish_status();
        }
        if self.leads() && now >= self.next_cleanup {
            self.next_cleanup = now + self.shared.config.container_check_interval;
            self.cleanup_inflight.clear();
            let candidates = self.shared.state.read().tree.cleanup_candidates(now_ms());
            for path in candidates {
                if self.cleanup_inflight.insert(path.clone()) {
                    self.queue(Command::DeleteNode { path });
                }
            }
        }
    }

    fn queue(&mut self, c: Command) {
        if self.pending.is_empty() {
            self.pending_since = Some(Instant::now());
        }
        self.pending.push(c);
    }

    /// ReadIndex requests can be dropped silently by raft-rs (no leader yet, or a leader
    /// that has not committed in its term); ask again until answered.
    fn retry_reads(&mut self, now: Instant) {
        let retry_after = self.tick * (HEARTBEAT_TICKS as u32 * 2);
        let mut again = Vec::new();
        for (ctx, r) in self.reads.iter_mut() {
            if now.duration_since(r.asked) >= retry_after {
                r.asked = now;
                again.push(*ctx);
            }
        }
        for ctx in again {
            self.node.read_index(ctx.to_be_bytes().to_vec());
        }
    }

    fn flush_pending(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        if self.leads() {
            let commands = std::mem::take(&mut self.pending);
            self.pending_since = None;
            let time = now_ms();
            let mut batch = Batch {
                time,
                commands: Vec::new(),
            };
            let mut size = 0;
            for c in commands {
                size += approximate_size(&c);
                batch.commands.push(c);
                if size >= MAX_BATCH_BYTES {
                    self.propose(std::mem::take(&mut batch.commands), time);
                    size = 0;
                }
            }
            if !batch.commands.is_empty() {
                self.propose(batch.commands, time);
            }
        } else if self.leader != 0 && self.leader != self.me {
            if let Some(t) = &self.transport {
                if t.forward(self.leader, &self.pending) {
                    self.pending.clear();
                    self.pending_since = None;
                }
            }
        }
        // Without a leader, commands wait; connections waiting on them give up on their
        // own timers, and a leader change tells them to.
        let limit = self.tick * (ELECTION_TICKS as u32 * 3);
        if self.pending_since.is_some_and(|t| t.elapsed() > limit) {
            tracing::warn!(
                "dropping {} commands: no leader for {:?}",
                self.pending.len(),
                limit
            );
            self.pending.clear();
            self.pending_since = None;
        }
    }

    fn propose(&mut self, commands: Vec<Command>, time: i64) {
        let n = commands.len() as u64;
        // Only called when `leads()`: raft-rs 0.7 would forward a follower's proposal to the
        // leader, and a deposed leader's decisions (a session expiry) must not commit.
        debug_assert!(self.leads());
        let batch = Batch { time, commands };
        match self.node.propose(Vec::new(), batch.encode()) {
            Ok(()) => {
                self.shared
                    .metrics
                    .proposals
                    .fetch_add(n, Ordering::Relaxed);
                self.shared.metrics.batches.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => {
                // Leadership is being lost or transferred: the origins will be told of the
                // leader change and their clients retry.
                tracing::warn!("proposal of {n} commands dropped: {e}");
            }
        }
    }

    fn send(&mut self, msgs: Vec<Message>) {
        let Some(t) = &self.transport else { return };
        for m in msgs {
            t.send_raft(&m);
        }
    }

    /// Handles every pending `Ready` in raft-rs's order, with asynchronous persistence: new
    /// entries and hard state are staged in storage and handed to the log writer, which
    /// fsyncs, sends the messages that must follow persistence, and reports back
    /// ([`Input::Persisted`]); meanwhile this loop goes on.
    fn process_ready(&mut self) {
        while self.node.has_ready() {
            let mut rd = self.node.ready();
            if let Some(ss) = rd.ss() {
                self.on_soft_state(ss.leader_id, ss.raft_state);
            }
            // The leader's messages may leave before its own write (thesis 10.2.1).
            let msgs = rd.take_messages();
            self.send(msgs);
            if !rd.snapshot().is_empty() {
                self.finish_snapshot_ready(rd);
                continue;
            }
            let committed = rd.take_committed_entries();
            self.apply(committed);
            let write = self.storage.stage(rd.entries(), rd.hs());
            let messages = rd.take_persisted_messages();
            if write.is_some() || !messages.is_empty() {
                let job = PersistJob {
                    number: rd.number(),
                    write,
                    sync: rd.must_sync(),
                    messages,
                };
                if self.persist.send(PersistCommand::Job(job)).is_err() {
                    tracing::error!("the log writer stopped; stopping");
                    std::process::exit(crate::critical::EXIT_FATAL);
                }
            }
            for rs in rd.take_read_states() {
                if let Ok(ctx) = <[u8; 8]>::try_from(rs.request_ctx.as_slice()) {
                    self.ready_reads.push((rs.index, u64::from_be_bytes(ctx)));
                }
            }
            self.node.advance_append_async(rd);
            self.node.advance_apply();
            self.resolve_reads();
            self.maybe_snapshot();
        }
        self.publish_status();
    }

    /// A ready carrying a snapshot from the leader is completed synchronously: everything
    /// staged before it is flushed first, the snapshot replaces the log durably, and only
    /// then are raft-rs told it is persisted (`advance`) and the acks sent.
    fn finish_snapshot_ready(&mut self, mut rd: raft::Ready) {
        self.persist_barrier();
        let snap = rd.snapshot().clone();
        self.install_snapshot(&snap);
        let committed = rd.take_committed_entries();
        self.apply(committed);
        self.storage.append(rd.entries(), rd.hs(), true);
        let msgs = rd.take_persisted_messages();
        self.send(msgs);
        for rs in rd.take_read_states() {
            if let Ok(ctx) = <[u8; 8]>::try_from(rs.request_ctx.as_slice()) {
                self.ready_reads.push((rs.index, u64::from_be_bytes(ctx)));
            }
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
    fn persist_barrier(&mut self) {
        let (tx, rx) = std::sync::mpsc::channel();
        if self.persist.send(PersistCommand::Barrier(tx)).is_ok() {
            let _ = rx.recv();
        }
    }

    fn on_soft_state(&mut self, leader: u64, role: StateRole) {
        let was_leader = self.role == StateRole::Leader;
        if leader != self.leader {
            tracing::info!(
                member = self.me,
                "leader is now {leader} (was {})",
                self.leader
            );
            if self.leader != 0 {
                // Writes in flight through the old leader may never be answered.
                self.shared.registry.broadcast(|| Completion::LeaderChanged);
            }
            self.leader = leader;
            self.last_leader_contact = Instant::now();
            self.synced_with_leader = false;
        }
        self.role = role;
        if role == StateRole::Leader && !was_leader {
            // A new leader gives every session a full timeout (ZooKeeper does the same).
            let now = Instant::now();
            let state = self.shared.state.read();
            self.expiry
                .rearm(state.sessions.iter().map(|(id, s)| (*id, s.timeout)), now);
            self.next_cleanup = now + self.shared.config.container_check_interval;
        }
        self.shared.status.leader.store(leader, Ordering::Relaxed);
    }

    fn apply(&mut self, entries: Vec<Entry>) {
        if entries.is_empty() {
            return;
        }
        let shared = self.shared.clone();
        let mut state = shared.state.write();
        let mut watches = shared.watches.lock();
        let mut delivery = Delivery::new(
            self.me,
            &mut watches,
            &shared.registry,
            &mut self.expiry,
            &shared.metrics,
        );
        for e in entries {
            match e.get_entry_type() {
                EntryType::EntryNormal if !e.data.is_empty() => match Batch::decode(e.data.clone())
                {
                    Ok(batch) => {
                        for command in &batch.commands {
                            state.apply_one(command, e.term, batch.time, &mut delivery);
                            // Reads queued behind this command's write see exactly this state.
                            delivery.settle(&state);
                        }
                    }
                    Err(err) => {
                        // Skipping an entry would fork this member from the others.
                        tracing::error!("entry {} cannot be decoded ({err}); stopping", e.index);
                        eprintln!("zooraft: entry {} in the log cannot be decoded ({err}); refusing to continue", e.index);
                        std::process::exit(crate::critical::EXIT_FATAL);
                    }
                },
                EntryType::EntryNormal => {}
                EntryType::EntryConfChange | EntryType::EntryConfChangeV2 => {
                    tracing::warn!(
                        "ignoring membership change entry {}: membership is static",
                        e.index
                    );
                }
            }
            self.applied = e.index;
            self.applied_term = e.term;
            self.bytes_since_snapshot += e.data.len() as u64;
        }
        shared.last_zxid.store(state.last_zxid, Ordering::Release);
        self.storage.set_applied(self.applied);
        let outbound = delivery.finish();
        drop(watches);
        drop(state);
        outbound.dispatch(&shared.registry);
        shared
            .status
            .applied_index
            .store(self.applied, Ordering::Relaxed);
    }

    fn resolve_reads(&mut self) {
        if self.ready_reads.is_empty() {
            return;
        }
        let applied = self.applied;
        let mut keep = Vec::new();
        let mut done = Vec::new();
        for (index, ctx) in std::mem::take(&mut self.ready_reads) {
            if index <= applied {
                if let Some(r) = self.reads.remove(&ctx) {
                    done.push(r.waiter);
                }
            } else {
                keep.push((index, ctx));
            }
        }
        self.ready_reads = keep;
        if done.is_empty() {
            return;
        }
        let shared = self.shared.clone();
        let state = shared.state.read();
        for waiter in done {
            match waiter {
                SyncWaiter::Notify(tx) => {
                    let _ = tx.send(());
                }
                SyncWaiter::Pipeline { conn, token } => {
                    if let Some(p) = shared.registry.pipeline(conn) {
                        let mut env = Env {
                            state: &state,
                            watches: WatchSlot::Shared(&shared.watches),
                            metrics: &shared.metrics,
                        };
                        p.lock().sync_done(token, &mut env);
                    }
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
        let state = match snapshot::decode(snap.data.clone(), self.shared.state.read().tree.options)
        {
            Ok(s) => s,
            Err(e) => {
                tracing::error!("snapshot from the leader is unusable ({e}); stopping");
                eprintln!("zooraft: snapshot received from the leader is unusable ({e})");
                std::process::exit(crate::critical::EXIT_FATAL);
            }
        };
        self.storage.install_snapshot(snap);
        {
            let mut current = self.shared.state.write();
            *current = state;
            self.shared
                .last_zxid
                .store(current.last_zxid, Ordering::Release);
        }
        self.applied = meta.index;
        self.applied_term = meta.term;
        // Watches were set against a tree that is gone: clients reconnect and re-register
        // them with SetWatches, which reports what changed.
        self.shared.registry.broadcast(|| Completion::StopServing);
    }

    /// Takes a snapshot when enough has been applied since the last one: by entries, or by
    /// bytes (at least twice the last snapshot's size, so the cost of snapshots stays a
    /// fraction of the cost of the log). Only the encoding happens here, where the state is
    /// consistent; a separate thread writes the file, and the log is compacted when it
    /// reports back ([`Input::SnapshotWritten`]).
    fn maybe_snapshot(&mut self) {
        if self.snapshot_in_progress {
            return;
        }
        let every = self.shared.config.snapshot_entries;
        let bytes_due = SNAPSHOT_AFTER_BYTES.max(2 * self.last_snapshot_bytes);
        if self.storage.entries_since_snapshot(self.applied) < every
            && self.bytes_since_snapshot < bytes_due
        {
            return;
        }
        self.bytes_since_snapshot = 0;
        let started = Instant::now();
        let view = self.shared.state.read().snapshot_view();
        let job = SnapshotJob {
            index: self.applied,
            term: self.applied_term,
            conf: self.storage.conf_state(),
            view,
            captured_in: started.elapsed(),
        };
        self.snapshot_in_progress = self.snapshots.send(job).is_ok();
    }

    fn snapshot_written(&mut self, written: SnapshotWritten) {
        let SnapshotWritten {
            index,
            term,
            conf,
            bytes,
            captured_in,
            written_in,
        } = written;
        self.snapshot_in_progress = false;
        if index <= self.storage.snapshot_metadata().index {
            // A snapshot from the leader was installed meanwhile; this one is older.
            return;
        }
        let compact_to = index.saturating_sub(self.shared.config.snapshot_retain_entries);
        self.storage.save_snapshot(index, term, &conf, compact_to);
        self.last_snapshot_bytes = bytes;
        self.shared
            .metrics
            .snapshots
            .fetch_add(1, Ordering::Relaxed);
        self.shared
            .status
            .snapshot_index
            .store(index, Ordering::Relaxed);
        tracing::info!(
            index,
            bytes,
            capture_ms = captured_in.as_millis() as u64,
            encode_and_write_ms = written_in.as_millis() as u64,
            "snapshot taken"
        );
    }

    fn publish_status(&mut self) {
        let status = &self.shared.status;
        let raft = &self.node.raft;
        status.term.store(raft.term, Ordering::Relaxed);
        status
            .commit_index
            .store(raft.raft_log.committed, Ordering::Relaxed);
        status
            .log_last_index
            .store(raft.raft_log.last_index(), Ordering::Relaxed);
        let election_timeout = self.tick * ELECTION_TICKS as u32;
        let (role, serving) = match self.role {
            StateRole::Leader => {
                // Serve once this term's first entry is applied: everything committed
                // before it is applied too.
                let ready = self.applied_term == raft.term;
                let role = if self.standalone {
                    Role::Standalone
                } else {
                    Role::Leader
                };
                (role, ready)
            }
            // A voter that loses its leader campaigns, and raft-rs forgets the leader then;
            // an observer never campaigns, so contact is what tells it.
            _ if self.leader != 0 && self.last_leader_contact.elapsed() < election_timeout * 2 => {
                if self.applied >= raft.raft_log.committed {
                    self.synced_with_leader = true;
                }
                let caught_up = self.synced_with_leader;
                let role = if self.observer {
                    Role::Observer
                } else {
                    Role::Follower
                };
                (role, caught_up)
            }
            _ => (Role::Looking, false),
        };
        status.set_role(role);
        if role == Role::Leader {
            let mut followers = 0;
            let mut synced = 0;
            let mut observers = 0;
            let last = raft.raft_log.last_index();
            let learners: HashSet<u64> = raft.prs().conf().learners().iter().copied().collect();
            for (id, pr) in raft.prs().iter() {
                if *id == self.me {
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
            status.followers.store(followers, Ordering::Relaxed);
            status.synced_followers.store(synced, Ordering::Relaxed);
            status.observers.store(observers, Ordering::Relaxed);
        }
        // New sessions are refused at once; existing clients are dropped only if this lasts
        // for the grace period, so a short stall (a busy machine, a slow disk) does not
        // disconnect everyone, while a member cut off from the quorum still lets its clients
        // go long before their sessions could expire on the majority side.
        let was = status.serving.swap(serving, Ordering::AcqRel);
        if serving {
            if !was {
                tracing::info!(member = self.me, role = role.name(), "serving clients");
            }
            self.unserving_since = None;
            self.clients_dropped = false;
        } else {
            let since = *self.unserving_since.get_or_insert_with(Instant::now);
            if was {
                tracing::warn!(
                    member = self.me,
                    "not serving new clients: no leader or no quorum"
                );
            }
            if !self.clients_dropped && since.elapsed() >= self.drop_clients_after {
                tracing::warn!(
                    member = self.me,
                    "dropping clients: still no leader or no quorum"
                );
                self.shared.registry.broadcast(|| Completion::StopServing);
                self.clients_dropped = true;
            }
        }
    }
}

/// A snapshot the snapshot thread stored, for the Raft loop to name and compact behind.
pub struct SnapshotWritten {
    index: u64,
    term: u64,
    conf: ConfState,
    bytes: u64,
    /// Time the Raft loop spent capturing the state.
    captured_in: Duration,
    /// Time the snapshot thread spent encoding and writing.
    written_in: Duration,
}

/// A state captured by the Raft loop, for the snapshot thread to encode and make durable.
struct SnapshotJob {
    index: u64,
    term: u64,
    conf: ConfState,
    view: snapshot::SnapshotView,
    captured_in: Duration,
}

/// The thread that encodes and stores snapshots, so the Raft loop never waits for that work.
fn spawn_snapshot_writer(
    storage: RaftStorage,
    inbox: std::sync::mpsc::Sender<Input>,
) -> (
    std::sync::mpsc::Sender<SnapshotJob>,
    Option<std::thread::JoinHandle<()>>,
) {
    let (tx, rx) = std::sync::mpsc::channel::<SnapshotJob>();
    let spawned = crate::critical::spawn("snapshot", move || {
        for job in rx {
            let started = Instant::now();
            let data = snapshot::encode(&job.view);
            // Release the captured znodes at once: the live tree stops copying on write.
            drop(job.view);
            let written = match storage.write_snapshot(job.index, job.term, &data) {
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
            };
            if inbox.send(Input::SnapshotWritten(written)).is_err() {
                return;
            }
        }
    });
    match spawned {
        Ok(thread) => (tx, Some(thread)),
        Err(e) => {
            // Without the thread snapshots are never taken; the log just keeps growing.
            tracing::error!("cannot start the snapshot thread: {e}");
            (tx, None)
        }
    }
}

fn approximate_size(c: &Command) -> usize {
    match c {
        Command::Write(w) => 64 + w.body.len(),
        _ => 64,
    }
}
