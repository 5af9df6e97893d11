//! Why a client connection ended: the connection's and the handshake's common outcome,
//! logged when the connection closes and counted in the metrics.

use super::stream::FrameError;

/// Why a connection ended (logged).
#[derive(Debug, thiserror::Error)]
pub(super) enum End {
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

impl From<FrameError> for End {
    fn from(e: FrameError) -> End {
        match e {
            FrameError::Protocol(m) => End::Protocol(m),
            FrameError::Io(e) => End::Io(e),
        }
    }
}
