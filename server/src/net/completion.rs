//! What the Raft side (through `delivery.rs`) and other connections tell a connection's
//! task. Replies themselves go through the connection's pipeline; these are the events
//! that change what the task does next.

/// See the module docs.
#[derive(Debug)]
pub enum Completion {
    /// The session ended (closed by the client, expired, or taken over by a reconnect).
    SessionClosed,
    /// The leader changed; writes in flight may never be answered.
    LeaderChanged,
    /// This member stopped serving clients (no quorum, or shutting down).
    StopServing,
    /// A sync was answered: the requests held back behind it may go on.
    Resume,
}
