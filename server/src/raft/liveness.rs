//! How a member judges its peers' liveness beyond Raft's timers: a leader whose connection
//! closed is treated as gone at once (a killed process's sockets close immediately, while
//! missing heartbeats take a whole election timeout to notice), and a leader whose heartbeat
//! proves that this member lost entries it acknowledged makes the member stop with the
//! reason, instead of raft-rs panicking on it.

use super::driver::Consensus;
use raft::StateRole;

impl Consensus {
    /// A leader's heartbeat carries the commit index up to what this member acknowledged as
    /// durable. If that is past the end of our log, entries we acknowledged are gone: the
    /// disk lost fsynced data, or the data directory was put back from an older copy. raft-rs
    /// would panic on it; say what happened and how to recover instead, and stop: this
    /// member must not vote or serve on a log that broke its promises.
    pub(super) fn refuse_lost_entries(&self, m: &raft::eraftpb::Message) {
        let raft = &self.node.raft;
        if m.get_msg_type() != raft::eraftpb::MessageType::MsgHeartbeat || m.term < raft.term {
            return;
        }
        let last = raft.raft_log.last_index();
        if m.commit > last {
            crate::critical::fatal(format_args!(
                "member {}: leader {} says entries up to index {} are committed, counting on \
                 this member's acknowledgement, but this member's log ends at {last}: entries \
                 it acknowledged as durable are gone from its data directory (a disk that lost \
                 fsynced writes, or a data directory restored from an older copy). It cannot \
                 rejoin with this data: remove it with a reconfig and add it back with an \
                 empty data directory (README, Operations: replacing a member)",
                raft.id, m.from, m.commit
            ));
        }
    }

    /// A peer's connection to us ended. If it was our leader's, it is likely dead (a
    /// killed process's sockets close at once, while its heartbeats would only be missed
    /// after a whole election timeout): stop honouring its lease, so that this member votes
    /// for a candidate at once and campaigns itself after the random part of its timeout
    /// only (0 to 1 election timeout instead of 1 to 2). Safety does not depend on it: a
    /// leader that is alive after all resets the timer with its next heartbeat, and
    /// pre-vote keeps a premature campaign from disturbing it.
    pub(super) fn on_peer_gone(&mut self, id: u64) {
        let raft = &mut self.node.raft;
        if raft.state != StateRole::Follower || raft.leader_id != id {
            return;
        }
        let timeout = raft.election_timeout();
        if raft.election_elapsed < timeout {
            raft.election_elapsed = timeout;
            tracing::info!(
                leader = id,
                "the leader's connection closed: its lease is over"
            );
        }
    }
}
