//! The serving policy: when this member serves clients, and when it lets them go.
//!
//! - A leader serves once its term's first entry is applied (everything committed before
//!   it is then applied too).
//! - A follower or observer serves while it hears from its leader and once it has caught
//!   up with it (applied everything committed) at least once under that leader; under write
//!   load its applied index trails the commit index by a batch at almost any instant, so
//!   "caught up right now" would make it flap.
//! - A member whose data directory is untrusted (`trust.rs`) serves nobody until it has
//!   caught up and been promoted: it could show a client an older tree than one it saw.
//! - Otherwise it is looking: new sessions are refused at once, but existing clients are
//!   dropped only if this lasts for the grace period (one election timeout, at most a
//!   quarter of the shortest session timeout), so a short stall does not disconnect
//!   everyone while a member cut off from the quorum still lets its clients go long before
//!   their sessions could expire on the majority side.

use std::time::{Duration, Instant};

use raft::StateRole;

use super::status::Role;

/// What to do with the clients when the serving state changes.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum ServingAction {
    Nothing,
    /// Not serving for the whole grace period: drop the clients (once).
    DropClients,
}

/// What the policy looks at, as the Raft thread sees it at one instant.
pub(super) struct Observed {
    /// The role the last `Ready` reported.
    pub role: StateRole,
    pub standalone: bool,
    pub observer: bool,
    /// The leader's id, 0 while unknown.
    pub leader: u64,
    /// The leader was heard from within two election timeouts.
    pub heard_from_leader: bool,
    pub applied_index: u64,
    pub applied_term: u64,
    pub term: u64,
    pub committed: u64,
    /// This member's store holds all it acknowledged (`trust.rs`): one that does not
    /// serves nobody until it has caught up and been promoted.
    pub trusted: bool,
}

/// See the module docs.
pub(super) struct ServingPolicy {
    /// Applied everything committed at least once under the current leader.
    synced: bool,
    unserving_since: Option<Instant>,
    clients_dropped: bool,
    drop_clients_after: Duration,
    /// Clients are kept at least until then, served or not (a member that took over its
    /// clients from ZooKeeper while its Raft ensemble forms).
    keep_clients_until: Option<Instant>,
}

impl ServingPolicy {
    pub fn new(election_timeout: Duration, min_session_timeout_ms: i32) -> ServingPolicy {
        let quarter_session = Duration::from_millis(min_session_timeout_ms.max(0) as u64 / 4);
        ServingPolicy {
            synced: false,
            unserving_since: None,
            clients_dropped: false,
            drop_clients_after: election_timeout.min(quarter_session),
            keep_clients_until: None,
        }
    }

    /// Keeps the clients until `until` whatever happens (the grace of a takeover).
    pub fn keep_clients_until(&mut self, until: Instant) {
        self.keep_clients_until = Some(until);
    }

    /// A new leader: the member serves again once it has caught up with that one.
    pub fn leader_changed(&mut self) {
        self.synced = false;
    }

    /// The role this member reports, and whether it serves clients.
    pub fn decide(&mut self, o: &Observed) -> (Role, bool) {
        match o.role {
            StateRole::Leader => {
                let role = if o.standalone {
                    Role::Standalone
                } else {
                    Role::Leader
                };
                (role, o.applied_term == o.term)
            }
            // A voter that loses its leader campaigns, and raft-rs forgets the leader then;
            // an observer never campaigns, so contact is what tells it.
            _ if o.leader != 0 && o.heard_from_leader => {
                if o.applied_index >= o.committed {
                    self.synced = true;
                }
                let role = if o.observer {
                    Role::Observer
                } else {
                    Role::Follower
                };
                (role, self.synced && o.trusted)
            }
            _ => (Role::Looking, false),
        }
    }

    /// The member serves (`true`) or not at `now`.
    pub fn update(&mut self, serving: bool, now: Instant) -> ServingAction {
        if serving {
            self.unserving_since = None;
            self.clients_dropped = false;
            return ServingAction::Nothing;
        }
        if self.keep_clients_until.is_some_and(|t| now < t) {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn follower(applied_index: u64, committed: u64) -> Observed {
        Observed {
            role: StateRole::Follower,
            standalone: false,
            observer: false,
            leader: 1,
            heard_from_leader: true,
            applied_index,
            applied_term: 2,
            term: 2,
            committed,
            trusted: true,
        }
    }

    #[test]
    fn a_follower_serves_once_caught_up_and_keeps_serving_while_trailing_by_a_batch() {
        let mut p = ServingPolicy::new(Duration::from_secs(1), 4000);
        assert_eq!(p.decide(&follower(5, 9)), (Role::Follower, false));
        assert_eq!(p.decide(&follower(9, 9)), (Role::Follower, true));
        // Under write load the applied index trails the commit index at almost any instant.
        assert_eq!(p.decide(&follower(10, 12)), (Role::Follower, true));
        // A new leader: caught up with that one first.
        p.leader_changed();
        assert_eq!(p.decide(&follower(12, 14)), (Role::Follower, false));
        let lost = Observed {
            heard_from_leader: false,
            ..follower(14, 14)
        };
        assert_eq!(p.decide(&lost), (Role::Looking, false));
    }

    #[test]
    fn an_untrusted_member_serves_nobody_even_when_caught_up() {
        let mut p = ServingPolicy::new(Duration::from_secs(1), 4000);
        let untrusted = Observed {
            trusted: false,
            ..follower(9, 9)
        };
        assert_eq!(p.decide(&untrusted), (Role::Follower, false));
        assert_eq!(p.decide(&follower(9, 9)), (Role::Follower, true));
    }

    #[test]
    fn a_leader_serves_once_an_entry_of_its_term_is_applied() {
        let mut p = ServingPolicy::new(Duration::from_secs(1), 4000);
        let leader = |applied_term| Observed {
            role: StateRole::Leader,
            applied_term,
            ..follower(9, 9)
        };
        assert_eq!(p.decide(&leader(1)), (Role::Leader, false));
        assert_eq!(p.decide(&leader(2)), (Role::Leader, true));
        let standalone = Observed {
            standalone: true,
            ..leader(2)
        };
        assert_eq!(p.decide(&standalone), (Role::Standalone, true));
    }

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
