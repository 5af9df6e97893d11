//! Leader transfer: the leader hands its role to a caught-up voter without an election
//! timeout, so that a rolling restart or an upgrade costs clients one short pause instead of
//! an election. Asked for by an operator (the `ydld` and `rqld` four-letter words) and by a
//! leader stopping cleanly (SIGTERM, see `server.rs`).
//!
//! raft-rs does the protocol (`MsgTransferLeader`, then `MsgTimeoutNow` once the transferee
//! has the whole log; aborted after an election timeout); this module picks the transferee
//! and keeps the writes gathered meanwhile: raft-rs drops proposals while a transfer is in
//! flight, so they wait here and go to whoever leads next.

use raft::StateRole;

use super::driver::Consensus;
use super::input::Transfer;

impl Consensus {
    /// Starts a transfer; returns the transferee, or `None` when there is nobody to hand
    /// over to (not the leader, standalone, an observer asking, or no active voter).
    pub(super) fn transfer_leadership(&mut self, what: Transfer) -> Option<u64> {
        let me = self.member.me;
        match what {
            Transfer::Yield => {
                if !self.leads() {
                    return None;
                }
                let target = self.best_transferee()?;
                tracing::info!(member = me, "handing leadership over to {target}");
                self.node.transfer_leader(target);
                Some(target)
            }
            Transfer::Request => {
                let leader = self.leadership.leader;
                let voters = self.node.raft.prs().conf().to_conf_state().voters;
                if leader == 0 || leader == me || self.member.standalone || !voters.contains(&me) {
                    return None;
                }
                tracing::info!(member = me, "asking leader {leader} for leadership");
                self.node.transfer_leader(me);
                Some(me)
            }
        }
    }

    /// Whether the leader is handing over (raft-rs drops proposals meanwhile).
    pub(super) fn transferring(&self) -> bool {
        self.node.raft.state == StateRole::Leader && self.node.raft.lead_transferee.is_some()
    }

    /// The active voter, other than this member, whose log matches the leader's furthest.
    fn best_transferee(&self) -> Option<u64> {
        let me = self.member.me;
        let raft = &self.node.raft;
        let voters = raft.prs().conf().to_conf_state().voters;
        voters
            .into_iter()
            .filter(|id| *id != me)
            .filter_map(|id| raft.prs().get(id).map(|pr| (id, pr)))
            .filter(|(_, pr)| pr.recent_active)
            .max_by_key(|(id, pr)| (pr.matched, std::cmp::Reverse(*id)))
            .map(|(id, _)| id)
    }
}
