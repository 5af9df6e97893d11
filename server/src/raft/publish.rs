//! What the Raft thread publishes for the layers above after each round: Raft's indexes,
//! the role, whether this member serves clients (the serving policy decides; the clients
//! are dropped when it says so), why not as far as trust explains it, and the leader's view
//! of its followers.

use std::sync::atomic::Ordering;

use super::group::Group;
use super::membership::MembershipWork;
use super::metrics::Measures;
use super::recovery::Recovery;
use super::serving::{Observed, ServingAction, ServingPolicy};
use super::status::Role;

/// The parts publishing reads and updates, borrowed from the driver for one call.
pub(super) struct Publishing<'a> {
    pub group: &'a Group,
    pub serving: &'a mut ServingPolicy,
    pub membership: &'a MembershipWork,
    pub recovery: &'a mut Recovery,
    pub measures: &'a mut Measures,
}

impl Publishing<'_> {
    /// Publishes the Raft indexes, the role and whether this member serves (the serving
    /// policy decides), and drops the clients when the policy says so.
    pub fn status(&mut self) {
        let g = self.group;
        let now = g.clock.now();
        let raft = &g.node.raft;
        let status = &g.replica.status;
        status.term.store(raft.term, Ordering::Relaxed);
        status
            .commit_index
            .store(raft.raft_log.committed, Ordering::Relaxed);
        status
            .log_last_index
            .store(raft.raft_log.last_index(), Ordering::Relaxed);
        let observed = Observed {
            role: g.leadership.role,
            standalone: g.member.standalone,
            observer: self.membership.reports_observer(g),
            leader: g.leadership.leader,
            heard_from_leader: now.saturating_duration_since(g.leadership.last_contact)
                < g.election_timeout() * 2,
            applied_index: g.applied.index,
            applied_term: g.applied.term,
            term: raft.term,
            committed: raft.raft_log.committed,
            trusted: self.recovery.trust.me.trusted,
        };
        let (role, serving) = self.serving.decide(&observed);
        status.set_role(role);
        self.recovery.publish_trust(g, serving);
        if role == Role::Leader {
            g.publish_followers();
        }
        let counters = &g.replica.counters;
        let measures = &mut self.measures;
        measures
            .proposals
            .committed(observed.committed, now, counters);
        measures.serving(serving, role == Role::Leader, now, counters);
        let me = g.member.me;
        let was = status.serving.swap(serving, Ordering::AcqRel);
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
            g.connections.stop_serving();
        }
    }
}
