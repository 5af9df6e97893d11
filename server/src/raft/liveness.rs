//! How a member judges its peers' liveness beyond Raft's timers: a leader whose connection
//! closed is treated as gone at once (a killed process's sockets close immediately, while
//! missing heartbeats take a whole election timeout to notice). (A leader whose heartbeat
//! proves that this member lost entries it acknowledged: `trust.rs`.)

use raft::StateRole;

use super::group::Group;

/// A peer's connection to us ended. If it was our leader's, it is likely dead (a killed
/// process's sockets close at once, while its heartbeats would only be missed after a whole
/// election timeout): stop honouring its lease, so that this member votes for a candidate
/// at once, and campaign in turn by member id (the first survivor at the next tick, each
/// next one two ticks later). Safety does not depend on it: a leader that is alive after
/// all resets the timer with its next heartbeat, and pre-vote keeps a premature campaign
/// from disturbing it.
pub(super) fn on_peer_gone(g: &mut Group, id: u64) {
    let raft = &mut g.node.raft;
    if raft.state != StateRole::Follower || raft.leader_id != id {
        return;
    }
    let timeout = raft.election_timeout();
    // The survivors campaign in turn rather than at random: the lowest id first, at the
    // next tick, the next one two ticks later if no leader came of it, and so on. At random
    // (anywhere in the randomized part of the timeout, a whole election timeout wide) a
    // failover took from 0.1 to over 1 s; two survivors campaigning in the same tick would
    // split the vote and both wait a whole timeout more.
    let mut voters: Vec<u64> = raft.prs().conf().voters().ids().iter().collect();
    voters.retain(|&v| v != id);
    voters.sort_unstable();
    let Some(rank) = voters.iter().position(|&v| v == raft.id) else {
        return;
    };
    let turn = raft
        .randomized_election_timeout()
        .saturating_sub(1 + 2 * rank)
        .max(timeout);
    if raft.election_elapsed < turn {
        raft.election_elapsed = turn;
        tracing::info!(
            leader = id,
            turn = rank,
            "the leader's connection closed: its lease is over"
        );
    }
}
