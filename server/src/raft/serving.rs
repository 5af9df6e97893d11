//! The serving policy: when this member serves clients, and when it lets them go.
//!
//! - A leader serves once its term's first entry is applied (everything committed before
//!   it is then applied too).
//! - A follower or observer serves while it hears from its leader and once it has caught
//!   up with it (applied everything committed) at least once under that leader; under write
//!   load its applied index trails the commit index by a batch at almost any instant, so
//!   "caught up right now" would make it flap.
//! - Otherwise it is looking: new sessions are refused at once, but existing clients are
//!   dropped only if this lasts for the grace period (one election timeout, at most a
//!   quarter of the shortest session timeout), so a short stall does not disconnect
//!   everyone while a member cut off from the quorum still lets its clients go long before
//!   their sessions could expire on the majority side.

use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use raft::StateRole;

use super::driver::Consensus;
use super::status::Role;

/// What to do with the clients when the serving state changes.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum ServingAction {
    Nothing,
    /// Not serving for the whole grace period: drop the clients (once).
    DropClients,
}

/// See the module docs.
pub(super) struct ServingPolicy {
    unserving_since: Option<Instant>,
    clients_dropped: bool,
    drop_clients_after: Duration,
}

impl ServingPolicy {
    pub fn new(election_timeout: Duration, min_session_timeout_ms: i32) -> ServingPolicy {
        let quarter_session = Duration::from_millis(min_session_timeout_ms.max(0) as u64 / 4);
        ServingPolicy {
            unserving_since: None,
            clients_dropped: false,
            drop_clients_after: election_timeout.min(quarter_session),
        }
    }

    /// The member serves (`true`) or not at `now`.
    pub fn update(&mut self, serving: bool, now: Instant) -> ServingAction {
        if serving {
            self.unserving_since = None;
            self.clients_dropped = false;
            return ServingAction::Nothing;
        }
        let since = *self.unserving_since.get_or_insert(now);
        if !self.clients_dropped && now.saturating_duration_since(since) >= self.drop_clients_after
        {
            self.clients_dropped = true;
            return ServingAction::DropClients;
        }
        ServingAction::Nothing
    }
}

impl Consensus {
    /// Publishes the Raft indexes, the role and whether this member serves, and applies the
    /// serving policy.
    pub(super) fn publish_status(&mut self) {
        let now = self.clock.now();
        let status = &self.replica.status;
        let raft = &self.node.raft;
        status.term.store(raft.term, Ordering::Relaxed);
        status
            .commit_index
            .store(raft.raft_log.committed, Ordering::Relaxed);
        status
            .log_last_index
            .store(raft.raft_log.last_index(), Ordering::Relaxed);
        let leadership = &mut self.leadership;
        let heard_recently = now.saturating_duration_since(leadership.last_contact)
            < super::election_timeout(self.timers.tick) * 2;
        let (role, serving) = match leadership.role {
            StateRole::Leader => {
                let role = if self.member.standalone {
                    Role::Standalone
                } else {
                    Role::Leader
                };
                (role, self.applied.term == raft.term)
            }
            // A voter that loses its leader campaigns, and raft-rs forgets the leader then;
            // an observer never campaigns, so contact is what tells it.
            _ if leadership.leader != 0 && heard_recently => {
                if self.applied.index >= raft.raft_log.committed {
                    leadership.synced = true;
                }
                let role = if self.member.observer {
                    Role::Observer
                } else {
                    Role::Follower
                };
                (role, leadership.synced)
            }
            _ => (Role::Looking, false),
        };
        status.set_role(role);
        if role == Role::Leader {
            self.publish_followers();
        }
        let status = &self.replica.status;
        let was = status.serving.swap(serving, Ordering::AcqRel);
        let me = self.member.me;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clients_are_dropped_once_after_the_grace_period() {
        let t = Instant::now();
        let election = Duration::from_secs(1);
        let mut p = ServingPolicy::new(election, 4000);
        assert_eq!(p.update(true, t), ServingAction::Nothing);
        assert_eq!(p.update(false, t), ServingAction::Nothing);
        assert_eq!(
            p.update(false, t + election / 2),
            ServingAction::Nothing,
            "a short stall keeps the clients"
        );
        assert_eq!(p.update(false, t + election), ServingAction::DropClients);
        assert_eq!(p.update(false, t + election * 3), ServingAction::Nothing);
        // Serving again, then losing the quorum again: a new grace period.
        assert_eq!(p.update(true, t + election * 4), ServingAction::Nothing);
        assert_eq!(p.update(false, t + election * 5), ServingAction::Nothing);
        assert_eq!(
            p.update(false, t + election * 6),
            ServingAction::DropClients
        );
    }

    #[test]
    fn the_grace_period_is_at_most_a_quarter_of_the_shortest_session() {
        let t = Instant::now();
        let mut p = ServingPolicy::new(Duration::from_secs(10), 2000);
        assert_eq!(p.update(false, t), ServingAction::Nothing);
        assert_eq!(
            p.update(false, t + Duration::from_millis(500)),
            ServingAction::DropClients
        );
    }
}
