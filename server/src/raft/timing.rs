//! raft-rs's timing: the tick counts of elections and heartbeats, and the election timeout
//! every other timeout of zooraft's (waiting for a session grant, for a sync, for a leader,
//! the grace period before dropping clients) is counted in.

use std::time::Duration;

/// raft-rs elects after this many ticks without hearing from a leader (randomized up to
/// twice as many).
pub const ELECTION_TICKS: usize = 10;
/// A leader sends heartbeats every this many ticks.
pub const HEARTBEAT_TICKS: usize = 2;

/// raft-rs's base election timeout for a tick length.
pub fn election_timeout(tick: Duration) -> Duration {
    tick * ELECTION_TICKS as u32
}
