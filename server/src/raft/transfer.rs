//! Leader transfer: the leader hands its role to a caught-up voter without an election
//! timeout, so that a rolling restart or an upgrade costs clients one short pause instead of
//! an election. Asked for by an operator (the `ydld` and `rqld` four-letter words) and by a
//! leader stopping cleanly (SIGTERM, see `server.rs`).
//!
//! raft-rs does the protocol (`MsgTransferLeader`, then `MsgTimeoutNow` once the transferee
//! has the whole log; aborted after an election timeout); this module picks the transferee
//! and keeps the writes gathered meanwhile: raft-rs drops proposals while a transfer is in
//! flight, so they wait here and go to whoever leads next.
//!
//! [`ask`] is the operator's side, shared by the four-letter words, the admin server's
//! `/commands/yield_leadership` and `/commands/request_leadership`, and the console's
//! "make leader" (a transfer to a named voter, asked of any member): it decides from the
//! published status whether the request makes sense on this member and hands it to the
//! Raft thread.

use std::sync::atomic::Ordering;
use std::time::Instant;

use super::group::Group;
use super::input::{Input, Transfer};
use super::replica::Replica;
use super::status::Role;
use super::trust::{Trust, QUARANTINE_TIMEOUTS};

/// What became of an operator's transfer request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Asked {
    /// Handed to the Raft thread; the text says what happens next.
    Started(String),
    /// Not for this member (the text says why: not the leader, an observer, ...).
    Refused(String),
    /// The Raft thread is gone (the member is stopping).
    NotServing,
}

/// `Yield` (the leader hands over to its most up-to-date follower) or `Request` (this
/// member asks the leader for leadership). The Raft thread carries it out; `srvr` on the
/// members shows who leads afterwards (a transfer that cannot finish is dropped after an
/// election timeout, and the old leader stays).
pub fn ask(replica: &Replica, what: Transfer) -> Asked {
    let role = replica.status.role();
    let leader = replica.status.leader.load(Ordering::Relaxed);
    let refused = |s: String| Asked::Refused(s);
    let started = match (what, role) {
        (_, Role::Standalone) => {
            return refused("A standalone server has nobody to transfer to.\n".into())
        }
        (Transfer::Yield, Role::Leader) => {
            "Leadership transfer requested: the leader hands over to its most up-to-date follower.\n"
                .to_string()
        }
        (Transfer::Yield, _) => {
            return refused(format!("Not the leader; the leader is server {leader}.\n"))
        }
        (Transfer::To(id), _) if id == leader => {
            return refused(format!("Server {id} already leads.\n"))
        }
        (Transfer::To(_), role) if role == Role::Looking || leader == 0 => {
            return refused("No leader to hand over from yet.\n".into())
        }
        (Transfer::To(id), _) => {
            format!("Leadership transfer to server {id} asked of the leader, server {leader}.\n")
        }
        (_, Role::Leader) => return refused("Already the leader.\n".into()),
        (_, Role::Observer) => return refused("An observer cannot lead.\n".into()),
        // Between a leader's end and the next one's first message: nobody to ask yet.
        _ if leader == 0 => return refused("No leader yet; ask again once one is elected.\n".into()),
        _ => format!("Leadership requested from the leader, server {leader}.\n"),
    };
    if replica.submit(Input::TransferLeader(what)) {
        Asked::Started(started)
    } else {
        Asked::NotServing
    }
}

/// A yield that found nobody to hand over to, tried again until the deadline.
#[derive(Default)]
pub(super) struct Transfers {
    /// Until when an operator's yield waits for a follower to answer.
    yield_until: Option<Instant>,
}

impl Transfers {
    /// Starts a transfer; returns the transferee, or `None` when there is nobody to hand
    /// over to (not the leader, standalone, an observer asking, or no active voter).
    pub fn transfer_leadership(
        &mut self,
        g: &mut Group,
        trust: &Trust,
        what: Transfer,
    ) -> Option<u64> {
        let me = g.member.me;
        match what {
            Transfer::Yield => {
                if !g.leads() {
                    return None;
                }
                let Some(target) = Self::best_transferee(g, trust) else {
                    // raft-rs forgets which followers answered at every quorum check, so
                    // right after one nobody looks active; and a member just promoted back
                    // cannot campaign before its quarantine ends: wait for either.
                    let wait = g.election_timeout() * (QUARANTINE_TIMEOUTS + 1);
                    self.yield_until.get_or_insert(g.clock.now() + wait);
                    return None;
                };
                self.yield_until = None;
                tracing::info!(member = me, "handing leadership over to {target}");
                g.node.transfer_leader(target);
                Some(target)
            }
            Transfer::To(target) => {
                let leader = g.leadership.leader;
                let voters = g.node.raft.prs().conf().to_conf_state().voters;
                if leader == 0 || leader == target || !voters.contains(&target) {
                    tracing::info!(
                        member = me,
                        "no transfer to {target}: not a voter, or it leads"
                    );
                    return None;
                }
                tracing::info!(
                    member = me,
                    "asking leader {leader} to hand over to {target}"
                );
                // raft-rs names the transferee as the message's sender; a follower passes
                // the message on to the leader.
                g.node.transfer_leader(target);
                Some(target)
            }
            Transfer::Request => {
                let leader = g.leadership.leader;
                let voters = g.node.raft.prs().conf().to_conf_state().voters;
                if leader == 0 || leader == me || g.member.standalone || !voters.contains(&me) {
                    return None;
                }
                tracing::info!(member = me, "asking leader {leader} for leadership");
                g.node.transfer_leader(me);
                Some(me)
            }
        }
    }

    /// Tries again a yield that found no follower to hand over to, until a quarantine and
    /// an election timeout after it was asked; dropped when this member no longer leads.
    pub fn retry_yield(&mut self, g: &mut Group, trust: &Trust, now: Instant) {
        let Some(until) = self.yield_until else {
            return;
        };
        if now > until || !g.leads() {
            self.yield_until = None;
        } else if !g.transferring() {
            self.transfer_leadership(g, trust, Transfer::Yield);
        }
    }

    /// The active voter, other than this member, whose log matches the leader's furthest,
    /// among those that could campaign now (see [`Trust::may_take_over`]).
    ///
    /// [`Trust::may_take_over`]: super::trust::Trust::may_take_over
    fn best_transferee(g: &Group, trust: &Trust) -> Option<u64> {
        let me = g.member.me;
        let now = g.clock.now();
        let raft = &g.node.raft;
        let voters = raft.prs().conf().to_conf_state().voters;
        voters
            .into_iter()
            .filter(|id| *id != me && trust.may_take_over(*id, now))
            .filter_map(|id| raft.prs().get(id).map(|pr| (id, pr)))
            .filter(|(_, pr)| pr.recent_active)
            .max_by_key(|(id, pr)| (pr.matched, std::cmp::Reverse(*id)))
            .map(|(id, _)| id)
    }
}
