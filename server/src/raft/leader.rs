//! What only the leader does besides proposing: decide session expiries and clean up
//! containers and TTL nodes.
//!
//! - Session expiry: the leader owns the deadlines. Followers collect which sessions saw
//!   traffic and send the leader those touches in batches; a session past its deadline is
//!   closed by a replicated command, so its ephemerals go at the same zxid everywhere.
//! - Cleanup: empty containers and expired TTL nodes are deleted by replicated commands.
//!
//! Every decision here is taken only while [`Group::leads`] holds.

use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::time::Instant;

use super::expiry::ExpiryTracker;
use super::group::Group;
use super::proposed::Proposals;
use super::ttl_clock::TtlClock;
use crate::state::command::{CloseReason, Command};
use crate::state::tree::NodeKind;

/// What only the leader does: decide expiries and clean up containers and TTL nodes.
#[derive(Default)]
pub(super) struct LeaderDuties {
    /// Session deadlines. Every member tracks them as sessions are created and closed; only
    /// the leader's, re-armed when it took over, decide anything.
    pub expiry: ExpiryTracker,
    /// Cleanup deletes proposed in this round (not proposed twice).
    cleanup_inflight: HashSet<String>,
    /// TTL nodes' ages on the monotonic clock (`ttl_clock.rs`).
    ttl_clock: TtlClock,
}

impl LeaderDuties {
    /// Collects the sessions with traffic on this member: the leader touches their
    /// deadlines and expires those past theirs; a follower sends the touches to the leader.
    pub fn session_round(&mut self, g: &Group, proposals: &mut Proposals, now: Instant) {
        let touched = g.connections.take_touched();
        if g.leads() {
            for s in &touched {
                self.expiry.touch(*s, now);
            }
            for session in self.expiry.take_expired(now) {
                tracing::info!("session 0x{session:x} expired");
                g.replica
                    .counters
                    .sessions_expired
                    .fetch_add(1, Ordering::Relaxed);
                proposals.push(
                    Command::CloseSession {
                        session,
                        reason: CloseReason::Expired,
                    },
                    now,
                );
            }
        } else if g.leadership.leader != 0 && !touched.is_empty() {
            if let Some(peers) = &g.peers {
                peers.touch(g.leadership.leader, &touched);
            }
        }
    }

    /// Gives every session a full timeout from `now` (a new leader, or a stalled one).
    pub fn rearm_sessions(&mut self, g: &Group, now: Instant) {
        self.ttl_clock.reset();
        let state = g.replica.state.read();
        self.expiry
            .rearm(state.sessions.iter().map(|(id, s)| (*id, s.timeout)), now);
    }

    /// Proposes the deletion of empty containers and expired TTL nodes.
    pub fn cleanup_round(&mut self, g: &Group, proposals: &mut Proposals) {
        self.cleanup_inflight.clear();
        let wall = g.clock.wall_ms();
        let now = g.clock.now();
        let candidates = {
            let state = g.replica.state.read();
            let tree = &state.tree;
            let ttl_nodes = tree.ttls().iter().filter_map(|p| {
                let n = tree.get(p)?;
                match n.kind() {
                    NodeKind::Ttl(ttl) => Some((p.as_str(), n.mtime(), ttl)),
                    _ => None,
                }
            });
            // A TTL node goes only once its age on the monotonic clock agrees too.
            let aged: HashSet<String> = self.ttl_clock.round(ttl_nodes, now).into_iter().collect();
            let mut candidates = tree.cleanup_candidates(wall);
            candidates.retain(|p| !tree.ttls().contains(p) || aged.contains(p));
            candidates
        };
        for path in candidates {
            if self.cleanup_inflight.insert(path.clone()) {
                proposals.push(Command::DeleteNode { path }, now);
            }
        }
    }
}
