//! The observer loop: one thread that owns this member's view of the ZooKeeper ensemble.
//! It finds the leader, registers, takes the leader's sync (a SNAP, or the transactions
//! after what it holds), then applies every committed transaction in zxid order while it
//! forwards its own clients' writes, session changes and syncs, and answers the leader's
//! pings with the sessions its clients kept alive.
//!
//! Everything reaches the loop as an [`Event`] on one channel: the connections' inputs
//! (the same [`Input`]s the Raft thread takes) and what the current link's reader thread
//! read. A link that fails ends with its clients told to reconnect (a ZooKeeper observer
//! that loses its leader closes its client connections too), and the loop looks for the
//! leader again.

use std::sync::atomic::Ordering;
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use jute::quorum::{packet, QuorumPacket};
use std::io::Write;
use zkdata::txn::LoggedTxn;

use super::apply::apply_txn;
use super::cutover::{self, Handover, Step};
use super::forward::{ping_reply, Pending};
use super::inbox::{self, Inbox};
use super::journal::{Journal, Kept};
use super::link::{self, FromLeader, Link, Registration};
use super::pause::{Committed, Pause};
use super::wire::write_packet;
use crate::raft::{Connections, Input, Migration, Replica, Role, SyncWaiter};
use crate::state::command::Command;
use crate::state::StateMachine;

/// What the loop reacts to.
pub enum Event {
    Input(Input),
    /// From the reader of link number `.0`.
    Leader(u64, FromLeader),
}

/// Where the link is in ZooKeeper's sync.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Registered, receiving the sync (until UPTODATE).
    Syncing,
    /// Synced: serving clients, applying INFORMs.
    Following,
}

struct Observer {
    replica: Arc<Replica>,
    connections: Arc<dyn Connections>,
    events: Sender<Event>,
    link: Option<Link>,
    link_no: u64,
    phase: Phase,
    /// Proposals of a sync, waiting for their COMMIT (with their bytes, for the journal).
    proposals: std::collections::VecDeque<(LoggedTxn, bytes::Bytes)>,
    /// What this member keeps of the ensemble.
    journal: Kept,
    /// Requests sent to the leader, waiting for their answers.
    pending: Pending,
    accepted_epoch: u32,
    current_epoch: u32,
    /// The leader asked to truncate below what this member applied: it cannot rewind, so
    /// it reports having nothing next time, which gets it a SNAP.
    report_empty: bool,
    /// Transactions that did not fit the tree (a fuzzy snapshot's overlap).
    replay_errors: u64,
    /// How the current link's sync began (DIFF, TRUNC or SNAP), for the log.
    sync_kind: &'static str,
    /// A cut-over's write pause and commit.
    pause: Pause,
    /// The thread that moves the connections' inputs into the loop's channel (the
    /// cut-over hands the inbox to Raft).
    inbox: Option<Inbox>,
    runtime: tokio::runtime::Handle,
}

/// What the observer resumes from: its journal and the epochs it recorded.
pub struct Resume {
    pub journal: Journal,
    pub accepted_epoch: u32,
    pub current_epoch: u32,
}

/// Starts the observer thread.
pub fn start(
    replica: Arc<Replica>,
    connections: Arc<dyn Connections>,
    inbox: Receiver<Input>,
    resume: Resume,
) -> std::io::Result<JoinHandle<()>> {
    let (tx, rx) = channel();
    let inbox = inbox::spawn(inbox, tx.clone(), Event::Input)?;
    replica.status.set_role(Role::Observer);
    replica
        .status
        .migration
        .phase
        .store(Migration::SYNCING, Ordering::Release);
    let runtime = tokio::runtime::Handle::current();
    let mut o = Observer {
        replica,
        connections,
        events: tx,
        link: None,
        link_no: 0,
        phase: Phase::Syncing,
        proposals: Default::default(),
        journal: Kept::new(resume.journal),
        pending: Pending::default(),
        accepted_epoch: resume.accepted_epoch,
        current_epoch: resume.current_epoch,
        report_empty: false,
        replay_errors: 0,
        sync_kind: "",
        pause: Pause::default(),
        inbox: Some(inbox),
        runtime,
    };
    std::thread::Builder::new()
        .name("zab-observer".into())
        .spawn(move || {
            let Some(commit) = o.run(&rx) else {
                return;
            };
            let Some(handover) = o.handover(commit, &rx) else {
                return;
            };
            let (replica, connections, runtime) =
                (o.replica.clone(), o.connections.clone(), o.runtime.clone());
            drop(o);
            cutover::take_over(&replica, connections, handover, &runtime);
        })
}

impl Observer {
    fn tick(&self) -> Duration {
        Duration::from_millis(self.replica.config().tick_time_ms.max(1) as u64)
    }

    /// The loop; returns the cut-over's zxid and members once its commit is applied
    /// (`None` when the member shuts down).
    fn run(&mut self, rx: &Receiver<Event>) -> Option<Committed> {
        let mut retry_at = std::time::Instant::now();
        // Stopped after applying a cut-over's commit (before it recorded it)?
        if let Some(c) = super::pause::missed(&self.replica.state.read(), self.replica.me) {
            return Some(c);
        }
        loop {
            if let Some(commit) = self.pause.take_committed() {
                return Some(commit);
            }
            self.check_prepared();
            if self.link.is_none() && std::time::Instant::now() >= retry_at {
                if let Err(e) = self.connect() {
                    tracing::warn!(error = %e, "cannot follow the ZooKeeper leader; trying again");
                    retry_at = std::time::Instant::now() + self.tick().min(Duration::from_secs(1));
                }
            }
            let wait = if self.link.is_some() {
                Duration::from_secs(1)
            } else {
                retry_at.saturating_duration_since(std::time::Instant::now())
            };
            let wait = match self.pause.deadline() {
                Some(t) => wait.min(t.saturating_duration_since(std::time::Instant::now())),
                None => wait,
            };
            let first = match rx.recv_timeout(wait) {
                Ok(e) => e,
                Err(RecvTimeoutError::Timeout) => continue,
                Err(RecvTimeoutError::Disconnected) => return None,
            };
            // What is queued goes in one go, with one flush to the leader.
            let mut next = Some(first);
            let mut handled = 0;
            while let Some(event) = next.take() {
                if !self.handle(event) {
                    self.drop_link("shutting down");
                    return None;
                }
                handled += 1;
                // Nothing after the cut-over's commit is applied here.
                if handled < 1024 && !self.pause.is_committed() {
                    next = rx.try_recv().ok();
                }
            }
            self.flush();
        }
    }

    fn connect(&mut self) -> Result<(), String> {
        let replica = self.replica.clone();
        let config = replica.config();
        let timeout = self.tick() * config.init_limit.max(1);
        let (leader, addr) = link::find_leader(config, timeout.min(Duration::from_secs(5)))?;
        let reg = Registration {
            me: self.replica.me,
            accepted_epoch: self.accepted_epoch,
            current_epoch: self.current_epoch,
            last_zxid: if self.report_empty {
                0
            } else {
                self.replica.last_zxid()
            },
        };
        let no = self.link_no + 1;
        let events = self.events.clone();
        let send = move |ev| events.send(Event::Leader(no, ev)).is_ok();
        let l = link::open(leader, addr, &reg, config, send)?;
        self.link_no = no;
        if l.epoch > self.accepted_epoch {
            self.accepted_epoch = l.epoch;
            self.save_epochs();
        }
        self.replica.status.leader.store(leader, Ordering::Release);
        self.link = Some(l);
        self.phase = Phase::Syncing;
        self.sync_kind = "";
        Ok(())
    }

    /// Handles one event; false to stop.
    fn handle(&mut self, event: Event) -> bool {
        match event {
            Event::Input(Input::Shutdown) => return false,
            Event::Input(input) => self.input(input),
            Event::Leader(no, _) if no != self.link_no || self.link.is_none() => {}
            Event::Leader(_, FromLeader::Closed(why)) => self.drop_link(&why),
            Event::Leader(_, FromLeader::Snapshot { zxid, state }) => self.snapshot(zxid, *state),
            Event::Leader(_, FromLeader::Packet(p)) => {
                if let Err(e) = self.packet(p) {
                    self.drop_link(&e);
                }
            }
        }
        true
    }

    fn input(&mut self, input: Input) {
        let following = self.phase == Phase::Following && self.link.is_some();
        match input {
            Input::Command(c) => self.forward(c, following),
            Input::Commands(cs, _) | Input::Forwarded(cs) => {
                for c in cs {
                    self.forward(c, following);
                }
            }
            Input::ReadIndex(waiter) if following => {
                let p = self.pending.wait(waiter);
                self.send(&p);
            }
            // Not following: the waiter is dropped, and its connection is being closed.
            Input::ReadIndex(_) => {}
            // Raft's own traffic has no meaning here.
            _ => {}
        }
    }

    fn forward(&mut self, c: Command, following: bool) {
        if !following {
            // The connections were told to stop; what they sent meanwhile has nowhere to go.
            return;
        }
        let Some(c) = self.pause.hold(c) else {
            self.publish_counts();
            return;
        };
        if let Some(p) = self.pending.forward(c) {
            self.send(&p);
        }
        self.publish_counts();
    }

    fn publish_counts(&self) {
        let (m, pending) = (&self.replica.status.migration, self.pending.len());
        m.held.store(self.pause.held() as u64, Ordering::Relaxed);
        m.pending.store(pending as u64, Ordering::Relaxed);
    }

    /// A cut-over step was applied.
    fn cutover_step(&mut self, step: Step, t: &zkdata::txn::TxnHeader) {
        let replica = self.replica.clone();
        let plan = || cutover::plan_in(&replica.state.read().tree);
        match self.pause.step(step, t, replica.me, plan) {
            Some(Step::Prepare(_)) => self.set_phase(Migration::PREPARED),
            Some(Step::Abort) => self.release("the coordinator aborted it"),
            Some(Step::Commit) | None => {}
        }
    }

    /// A prepared cut-over that did not commit in time is given up.
    fn check_prepared(&mut self) {
        if self
            .pause
            .deadline()
            .is_some_and(|t| std::time::Instant::now() >= t)
        {
            self.release("it did not commit within its timeout");
        }
    }

    /// Gives a prepared cut-over up: the held writes go to ZooKeeper after all.
    fn release(&mut self, why: &str) {
        let Some((plan, held)) = self.pause.release() else {
            return;
        };
        tracing::warn!(
            reason = why,
            held = held.len(),
            plan = plan.summary(),
            "cut-over abandoned: ZooKeeper stays in charge"
        );
        self.set_phase(Migration::FOLLOWING);
        let following = self.phase == Phase::Following && self.link.is_some();
        for c in held {
            self.forward(c, following);
        }
        self.publish_counts();
    }

    fn set_phase(&self, phase: u8) {
        let m = &self.replica.status.migration;
        m.phase.store(phase, Ordering::Release);
    }

    /// Everything the Raft thread takes over: the inbox, and what reached this member and
    /// is not done, oldest first.
    fn handover(&mut self, c: Committed, rx: &Receiver<Event>) -> Option<Handover> {
        // The state at the commit is what the Raft store starts from: durable first.
        if self.journaled(|j| j.sync()).is_none() && !c.late {
            crate::critical::fatal("cannot make dataDir/zab durable at the cut-over");
        }
        // ZooKeeper sees this observer go; nothing after the commit is applied here.
        self.link = None;
        let (inbox, after_stop) = self.inbox.take()?.take_back()?;
        let mut backlog = self.pending.hand_over();
        backlog.extend(self.pause.take_held().into_iter().map(Input::Command));
        for event in rx.try_iter() {
            if let Event::Input(i) = event {
                backlog.push(i);
            }
        }
        backlog.extend(after_stop);
        Some(Handover {
            zxid: c.zxid,
            time: c.time,
            members: c.members,
            keep_clients_for: c.timeout,
            late: c.late,
            plan: c.plan,
            inbox,
            backlog,
        })
    }

    fn send(&mut self, p: &QuorumPacket) {
        let failed = match &mut self.link {
            Some(l) => write_packet(&mut l.out, p).err(),
            None => None,
        };
        if let Some(e) = failed {
            self.drop_link(&format!("writing to the leader: {e}"));
        }
    }

    fn flush(&mut self) {
        let failed = match &mut self.link {
            Some(l) => l.out.flush().err(),
            None => None,
        };
        if let Some(e) = failed {
            self.drop_link(&format!("writing to the leader: {e}"));
        }
        let long = self.journaled(|j| j.sync()).unwrap_or(false);
        if long {
            let view = crate::state::snapshot::SnapshotView::of(&self.replica.state.read());
            self.journaled(|j| j.snapshot(&view));
        }
    }

    /// Runs `f` on the journal; a failure is logged and ends journaling (the ensemble's
    /// leader still has everything: a restart syncs the whole tree again).
    fn journaled<T>(&mut self, f: impl FnOnce(&mut Journal) -> std::io::Result<T>) -> Option<T> {
        self.journal.with(f)
    }

    fn save_epochs(&mut self) {
        let (a, c) = (self.accepted_epoch, self.current_epoch);
        self.journaled(|j| j.set_epochs(a, c));
    }

    fn packet(&mut self, p: QuorumPacket) -> Result<(), String> {
        let epoch_zxid = (self.link.as_ref().map_or(0, |l| l.epoch) as i64) << 32;
        match (self.phase, p.kind) {
            (_, packet::INFORM) => self.inform(link::data_of(&p))?,
            (_, packet::INFORM_AND_ACTIVATE) => {
                let data = link::data_of(&p);
                if data.len() < 8 {
                    return Err("INFORMANDACTIVATE without its leader id".into());
                }
                // The new configuration takes effect in ZooKeeper's membership; this
                // member keeps following the same leader unless the link drops.
                self.inform(data.slice(8..))?;
            }
            (Phase::Syncing, packet::DIFF) => self.sync_kind = "DIFF",
            (Phase::Syncing, packet::TRUNC) => {
                self.sync_kind = "TRUNC";
                if p.zxid < self.replica.last_zxid() {
                    self.report_empty = true;
                    return Err(format!(
                        "the leader asks to truncate to {:#x}, below what this member applied; asking for a snapshot",
                        p.zxid
                    ));
                }
            }
            (Phase::Syncing, packet::PROPOSAL) => {
                let data = link::data_of(&p);
                self.proposals.push_back((decode(&data)?, data));
            }
            (Phase::Syncing, packet::COMMIT) => {
                while let Some((t, data)) = self.proposals.pop_front() {
                    if t.header.zxid == p.zxid {
                        self.apply(t, &data);
                        break;
                    }
                }
            }
            (Phase::Syncing, packet::NEW_LEADER) => {
                self.current_epoch = (p.zxid >> 32) as u32;
                self.save_epochs();
                self.send(&QuorumPacket::new(packet::ACK, epoch_zxid, None));
            }
            (Phase::Syncing, packet::UP_TO_DATE) => {
                self.send(&QuorumPacket::new(packet::ACK, epoch_zxid, None));
                self.phase = Phase::Following;
                self.report_empty = false;
                self.proposals.clear();
                self.publish_serving(true);
                self.set_phase(Migration::FOLLOWING);
                tracing::info!(
                    zxid = format!("{:#x}", self.replica.last_zxid()),
                    "synced with the ZooKeeper leader by {}: serving clients",
                    self.sync_kind
                );
            }
            // The Java learner ignores pings until it is synced; answering one before the
            // NEWLEADER ack would break the leader's sync.
            (Phase::Syncing, packet::PING) => {}
            (Phase::Following, packet::PING) => self.ping(p),
            (Phase::Following, packet::SYNC) => self.sync_done(),
            (Phase::Following, packet::REVALIDATE) => {
                if !self.pending.revalidated(&link::data_of(&p)) {
                    tracing::warn!("a REVALIDATE answer without its session and verdict");
                }
            }
            (phase, kind) => {
                tracing::debug!(
                    ?phase,
                    kind = packet::name(kind),
                    "ignored a packet from the leader"
                );
            }
        }
        Ok(())
    }

    fn inform(&mut self, data: bytes::Bytes) -> Result<(), String> {
        let t = decode(&data)?;
        self.apply(t, &data);
        Ok(())
    }

    fn apply(&mut self, t: LoggedTxn, data: &[u8]) {
        if t.header.zxid <= self.replica.last_zxid() {
            // Already in the tree (a SNAP is fuzzy: the leader serializes it after it
            // starts forwarding), or already applied before a reconnect.
            return;
        }
        let local = self.pending.take(t.header.client_id, t.header.cxid);
        let replica = self.replica.clone();
        let connections = self.connections.clone();
        let mut state = replica.state.write();
        let mut round = connections.apply_round();
        if let Some(e) = apply_txn(&mut state, &t, local.as_ref(), round.as_mut()) {
            self.replay_errors += 1;
            tracing::debug!(
                zxid = format!("{:#x}", t.header.zxid),
                error = ?e,
                "a transaction did not fit the tree (over a fuzzy snapshot), as ZooKeeper ignores it"
            );
        }
        round.settle(&state);
        replica.set_last_zxid(state.last_zxid);
        drop(state);
        round.finish();
        self.journaled(|j| j.append(data));
        if local.is_some() {
            self.publish_counts();
        }
        if let Some(step) = cutover::step_of(&t) {
            self.cutover_step(step, &t.header);
        }
    }

    fn snapshot(&mut self, zxid: i64, mut state: StateMachine) {
        self.sync_kind = "SNAP";
        state.last_zxid = zxid;
        let serving = self.replica.is_serving();
        // The old copy goes first: the log must never continue a tree it does not follow.
        self.journaled(|j| j.clear());
        let view = crate::state::snapshot::SnapshotView::of(&state);
        {
            let mut held = self.replica.state.write();
            *held = state;
            self.replica.set_last_zxid(zxid);
        }
        self.journaled(|j| j.snapshot(&view));
        if serving {
            // Watches were set against a tree that is gone.
            self.connections.stop_serving();
        }
        if let Some(c) = super::pause::missed(&self.replica.state.read(), self.replica.me) {
            self.pause.commit(c);
        }
    }

    /// The answer to a PING: the sessions this member's clients used since the last one.
    fn ping(&mut self, p: QuorumPacket) {
        // The leader's ping carries the last zxid it proposed: how far behind this is.
        let last = self.replica.last_zxid();
        let lag = if p.zxid >> 32 == last >> 32 {
            (p.zxid - last).max(0)
        } else {
            p.zxid & 0xffff_ffff
        };
        self.replica
            .status
            .migration
            .lag
            .store(lag as u64, Ordering::Relaxed);
        let touched = self.connections.take_touched();
        let reply = ping_reply(p, &touched, &self.replica.state.read());
        self.send(&reply);
    }

    fn sync_done(&mut self) {
        let Some(waiter) = self.pending.synced() else {
            tracing::warn!("the leader answered a sync this member did not ask for");
            return;
        };
        match waiter {
            SyncWaiter::Pipeline { conn, token } => {
                let state = self.replica.state.read();
                self.connections.sync_done(&state, conn, token);
            }
            SyncWaiter::Resume { reply, .. } => {
                let _ = reply.send(true);
            }
        }
    }

    fn publish_serving(&self, serving: bool) {
        let status = &self.replica.status;
        let epoch = self.link.as_ref().map_or(0, |l| l.epoch);
        status.term.store(epoch as u64, Ordering::Release);
        status.serving.store(serving, Ordering::Release);
    }

    fn drop_link(&mut self, why: &str) {
        let Some(l) = self.link.take() else { return };
        self.set_phase(Migration::SYNCING);
        // Held writes have no leader to go to either; their connections are closed below.
        self.pause.drop_held();
        let dropped = self.pending.clear();
        self.proposals.clear();
        let was_serving = self.replica.is_serving();
        self.publish_serving(false);
        self.replica.status.leader.store(0, Ordering::Release);
        if was_serving {
            self.connections.stop_serving();
        }
        tracing::warn!(
            leader = l.leader,
            reason = why,
            unanswered = dropped,
            "no longer following the ZooKeeper leader"
        );
    }
}

fn decode(data: &bytes::Bytes) -> Result<LoggedTxn, String> {
    LoggedTxn::decode(data.clone())
        .map_err(|e| format!("a transaction from the leader does not decode: {e}"))
}
