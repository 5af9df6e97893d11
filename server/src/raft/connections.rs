//! The one narrow interface through which the Raft layer reaches the connections on this
//! member. The network layer implements it (`net::ClientPort`); the Raft thread holds it as
//! `Arc<dyn Connections>` and knows nothing else of connections, pipelines or watches.
//!
//! The trait is declared here, by the layer that calls it, so the Raft layer imports
//! nothing above itself; everything behind it is the network layer's business.

use crate::state::command::ConnId;
use crate::state::{ApplyObserver, StateMachine};

/// What the Raft thread tells the connections of this member.
pub trait Connections: Send + Sync {
    /// Opens one apply round. The Raft thread calls it while it holds the state's write
    /// lock and applies the round's commands with the returned observer, calling
    /// [`ApplyRound::settle`] after each, then releases the state lock and calls
    /// [`ApplyRound::finish`].
    fn apply_round(&self) -> Box<dyn ApplyRound + '_>;
    /// A connection's `sync` is satisfied (the caller holds the state's read lock).
    fn sync_done(&self, state: &StateMachine, conn: ConnId, token: u64);
    /// The leader changed: writes in flight through the old one may never be answered.
    fn leader_changed(&self);
    /// This member stops serving its clients (no quorum for too long, shutting down, or a
    /// snapshot from the leader replaced the tree the clients' watches were set on).
    fn stop_serving(&self);
    /// Sessions with traffic on this member since the last call.
    fn take_touched(&self) -> Vec<i64>;
}

/// The outcomes of one apply round, handed to the connections they belong to.
pub trait ApplyRound: ApplyObserver {
    /// After each command: its replies go to their connections, which answer the reads
    /// queued behind the command against exactly this state.
    fn settle(&mut self, state: &StateMachine);
    /// Ends the round once the state lock is released: what could not be handed over
    /// under the lock (session grants, closes) goes now.
    fn finish(self: Box<Self>);
}
