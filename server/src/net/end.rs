//! Why a connection ended: the reasons the handshake and the connection's loop stop for,
//! logged when the connection closes.

/// Why a connection ended (logged).
#[derive(Debug, thiserror::Error)]
pub enum End {
    #[error("client closed the connection")]
    ClientClosed,
    #[error("I/O error: {0}")]
    Io(std::io::Error),
    #[error("protocol error: {0}")]
    Protocol(String),
    #[error("session closed")]
    SessionClosed,
    #[error("session expired or unknown")]
    Expired,
    #[error("leader changed with writes in flight")]
    LeaderChanged,
    #[error("member is not serving clients")]
    NotServing,
    #[error("the session could not be confirmed with the leader")]
    NoLeader,
    #[error("a write went unanswered for too long")]
    WriteTimeout,
    #[error("authentication failed")]
    AuthFailed,
    #[error(
        "the quorum is back: a read-only connection closes for the client to reconnect read-write"
    )]
    ReadOnlyOver,
}
