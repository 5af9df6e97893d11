//! How the commands a turn gathered reach the log.
//!
//! Every command gathered in a turn is proposed as one entry (split at
//! [`MAX_BATCH_BYTES`]), so one Raft round and one fsync serve them all; a follower forwards
//! what it gathered to the leader in one message. Reconfigs wait in the membership's line
//! (`membership.rs`) and go one at a time. Only a member that [`leads`](Group::leads)
//! proposes.

use std::sync::atomic::Ordering;
use std::time::Instant;

use super::group::Group;
use super::membership::MembershipWork;
use super::metrics::Measures;
use super::proposed::Proposals;
use crate::state::command::{Batch, Command, EncodedBatch};

/// Largest encoded batch proposed as one entry.
const MAX_BATCH_BYTES: usize = 4 * 1024 * 1024;

/// The parts a turn's proposals touch.
pub(super) struct Batching<'a> {
    pub group: &'a mut Group,
    pub proposals: &'a mut Proposals,
    pub membership: &'a mut MembershipWork,
    pub measures: &'a mut Measures,
}

impl Batching<'_> {
    /// Proposes what the turn gathered (leader), or forwards it to the leader (follower).
    /// Without a leader commands wait, but not for ever: connections waiting on them give
    /// up on their own timers, and a leader change tells them to.
    pub fn flush(&mut self, now: Instant) {
        let g = &mut *self.group;
        if !self.membership.held.is_empty() && !g.leads() {
            self.membership.unhold_reconfigs(self.proposals, now);
        }
        if self.proposals.pending.is_empty() && self.membership.held.is_empty() {
            return;
        }
        let leader = g.leadership.leader;
        if g.transferring() {
            // raft-rs would drop them: they wait for the next leader (bounded below).
        } else if g.leads() {
            let (taken, mut encoded) = self.proposals.take_encoded();
            let commands = if taken.iter().any(is_reconfig) {
                // Held back: what was encoded no longer matches (rare; encoded again below).
                encoded = EncodedBatch::default();
                self.membership.hold_reconfigs(taken, now)
            } else {
                taken
            };
            let time = self.group.clock.wall_ms();
            if let Some(reconfig) = self.membership.release_reconfig(self.group, now) {
                self.propose(vec![reconfig], time);
                self.membership.reconfig_index = self.group.last_index();
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
        } else if leader != 0 && leader != g.member.me {
            if let Some(peers) = &g.peers {
                if peers.forward(leader, &self.proposals.pending) {
                    self.proposals.take();
                }
            }
        }
        self.drop_stale(now);
    }

    /// Drops the commands that waited too long for a leader.
    fn drop_stale(&mut self, now: Instant) {
        let limit = self.group.election_timeout() * 3;
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
        let g = &mut *self.group;
        // Only called when `leads()`: raft-rs 0.7 would forward a follower's proposal to the
        // leader, and a deposed leader's decisions (a session expiry) must not commit.
        debug_assert!(g.leads());
        let bytes = data.len();
        match g.node.propose(Vec::new(), data) {
            Ok(()) => {
                let counters = &g.replica.counters;
                counters.proposed(bytes);
                let index = g.node.raft.raft_log.last_index();
                let term = g.node.raft.term;
                self.proposals.proposed.keep(index, term, batch);
                let now = g.clock.now();
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
