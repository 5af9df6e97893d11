//! The leader's duties, and the way commands reach the log.
//!
//! - Batching: every command gathered in a turn is proposed as one entry (split at
//!   [`MAX_BATCH_BYTES`]), so one Raft round and one fsync serve them all; a follower
//!   forwards what it gathered to the leader in one message.
//! - Session expiry: the leader owns the deadlines. Followers collect which sessions saw
//!   traffic and send the leader those touches in batches; a session past its deadline is
//!   closed by a replicated command, so its ephemerals go at the same zxid everywhere.
//! - Cleanup: empty containers and expired TTL nodes are deleted by replicated commands.
//!
//! Every decision here is taken only while [`Consensus::leads`] holds.

use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::time::Instant;

use super::driver::Consensus;
use super::timing::election_timeout;
use crate::state::command::{Batch, CloseReason, Command, EncodedBatch};
use crate::state::tree::NodeKind;

/// Largest encoded batch proposed as one entry.
const MAX_BATCH_BYTES: usize = 4 * 1024 * 1024;

impl Consensus {
    /// Collects the sessions with traffic on this member: the leader touches their
    /// deadlines and expires those past theirs; a follower sends the touches to the leader.
    pub(super) fn session_round(&mut self, now: Instant) {
        let touched = self.connections.take_touched();
        if self.leads() {
            for s in &touched {
                self.duties.expiry.touch(*s, now);
            }
            for session in self.duties.expiry.take_expired(now) {
                tracing::info!("session 0x{session:x} expired");
                self.replica
                    .counters
                    .sessions_expired
                    .fetch_add(1, Ordering::Relaxed);
                self.proposals.push(
                    Command::CloseSession {
                        session,
                        reason: CloseReason::Expired,
                    },
                    now,
                );
            }
        } else if self.leadership.leader != 0 && !touched.is_empty() {
            if let Some(peers) = &self.peers {
                peers.touch(self.leadership.leader, &touched);
            }
        }
    }

    /// Gives every session a full timeout from `now` (a new leader, or a stalled one).
    pub(super) fn rearm_sessions(&mut self, now: Instant) {
        self.duties.ttl_clock.reset();
        let state = self.replica.state.read();
        self.duties
            .expiry
            .rearm(state.sessions.iter().map(|(id, s)| (*id, s.timeout)), now);
    }

    /// Proposes the deletion of empty containers and expired TTL nodes.
    pub(super) fn cleanup_round(&mut self) {
        self.duties.cleanup_inflight.clear();
        let wall = self.clock.wall_ms();
        let now = self.clock.now();
        let candidates = {
            let state = self.replica.state.read();
            let tree = &state.tree;
            let ttl_nodes = tree.ttls().iter().filter_map(|p| {
                let n = tree.get(p)?;
                match n.kind() {
                    NodeKind::Ttl(ttl) => Some((p.as_str(), n.mtime(), ttl)),
                    _ => None,
                }
            });
            // A TTL node goes only once its age on the monotonic clock agrees too.
            let aged: HashSet<String> = self
                .duties
                .ttl_clock
                .round(ttl_nodes, now)
                .into_iter()
                .collect();
            let mut candidates = tree.cleanup_candidates(wall);
            candidates.retain(|p| !tree.ttls().contains(p) || aged.contains(p));
            candidates
        };
        for path in candidates {
            if self.duties.cleanup_inflight.insert(path.clone()) {
                self.proposals.push(Command::DeleteNode { path }, now);
            }
        }
    }

    /// Proposes what the turn gathered (leader), or forwards it to the leader (follower).
    /// Without a leader commands wait, but not for ever: connections waiting on them give
    /// up on their own timers, and a leader change tells them to.
    pub(super) fn flush_pending(&mut self, now: Instant) {
        if !self.membership.held.is_empty() && !self.leads() {
            self.unhold_reconfigs(now);
        }
        if self.proposals.pending.is_empty() && self.membership.held.is_empty() {
            return;
        }
        let leader = self.leadership.leader;
        if self.transferring() {
            // raft-rs would drop them: they wait for the next leader (bounded below).
        } else if self.leads() {
            let (taken, mut encoded) = self.proposals.take_encoded();
            let commands = if taken.iter().any(is_reconfig) {
                // Held back: what was encoded no longer matches (rare; encoded again below).
                encoded = EncodedBatch::default();
                self.hold_reconfigs(taken, now)
            } else {
                taken
            };
            let time = self.clock.wall_ms();
            if let Some(reconfig) = self.release_reconfig(now) {
                self.propose(vec![reconfig], time);
                self.membership.reconfig_index = self.node.raft.raft_log.last_index();
            }
            let total: usize = commands.iter().map(approximate_size).sum();
            if total < MAX_BATCH_BYTES {
                // The common case: the turn's commands are one entry, in their own vector.
                if !commands.is_empty() && encoded.count() == commands.len() {
                    let data = encoded.finish(time);
                    self.propose_batch(Batch { time, commands }, data);
                } else if !commands.is_empty() {
                    self.propose(commands, time);
                }
                return self.drop_stale(now);
            }
            let mut batch = Vec::new();
            let mut size = 0;
            for c in commands {
                size += approximate_size(&c);
                batch.push(c);
                if size >= MAX_BATCH_BYTES {
                    self.propose(std::mem::take(&mut batch), time);
                    size = 0;
                }
            }
            if !batch.is_empty() {
                self.propose(batch, time);
            }
        } else if leader != 0 && leader != self.member.me {
            if let Some(peers) = &self.peers {
                if peers.forward(leader, &self.proposals.pending) {
                    self.proposals.take();
                }
            }
        }
        self.drop_stale(now);
    }

    /// Drops the commands that waited too long for a leader.
    fn drop_stale(&mut self, now: Instant) {
        let limit = election_timeout(self.timers.tick) * 3;
        if self
            .proposals
            .since
            .is_some_and(|t| now.saturating_duration_since(t) > limit)
        {
            let dropped = self.proposals.take();
            tracing::warn!(
                "dropping {} commands: no leader for {limit:?}",
                dropped.len()
            );
        }
    }

    fn propose(&mut self, commands: Vec<Command>, time: i64) {
        let batch = Batch { time, commands };
        let data = batch.encode();
        self.propose_batch(batch, data);
    }

    /// Proposes `batch`, whose encoding is `data`.
    fn propose_batch(&mut self, batch: Batch, data: Vec<u8>) {
        let n = batch.commands.len() as u64;
        // Only called when `leads()`: raft-rs 0.7 would forward a follower's proposal to the
        // leader, and a deposed leader's decisions (a session expiry) must not commit.
        debug_assert!(self.leads());
        let bytes = data.len();
        match self.node.propose(Vec::new(), data) {
            Ok(()) => {
                let counters = &self.replica.counters;
                counters.proposed(bytes);
                let index = self.node.raft.raft_log.last_index();
                let term = self.node.raft.term;
                self.proposals.proposed.keep(index, term, batch);
                let now = self.clock.now();
                self.measures.proposals.proposed(index, now);
                counters.proposals.fetch_add(n, Ordering::Relaxed);
                counters.batches.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => {
                // Leadership is being lost or transferred: the origins will be told of the
                // leader change and their clients retry.
                tracing::warn!("proposal of {n} commands dropped: {e}");
            }
        }
    }
}

fn is_reconfig(c: &Command) -> bool {
    matches!(c, Command::Write(w) if w.op == jute::OpCode::Reconfig as i32)
}

fn approximate_size(c: &Command) -> usize {
    match c {
        Command::Write(w) => 64 + w.body.len(),
        Command::Restore { state, .. } => 64 + state.len(),
        _ => 64,
    }
}
