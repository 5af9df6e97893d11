//! The recipes' errors, and why a held lock stopped being trustworthy.

use std::sync::Arc;

use crate::client::ErrorCode;

/// Why [`LockGuard::lost`](crate::LockGuard::lost) completed: the lock can no longer be
/// trusted.
///
/// ```
/// use zooraft_recipes::LostReason;
/// assert_eq!(LostReason::SessionExpired.to_string(), "the session expired");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
#[non_exhaustive]
pub enum LostReason {
    /// The connection has been down longer than the configured fraction of the session
    /// timeout: the server may have expired the session and granted the lock to another.
    #[error("the connection was down too long")]
    ConnectionSuspended,
    /// The server expired the session; its ephemeral lock node is gone.
    #[error("the session expired")]
    SessionExpired,
    /// The lock node was deleted (by an operator, or with the session).
    #[error("the lock node was deleted")]
    NodeDeleted,
    /// The client was closed.
    #[error("the client was closed")]
    ClientClosed,
    /// The lock was released through this guard.
    #[error("the lock was released")]
    Released,
    /// The task that watches the lock stopped (it panicked, or its runtime shut down):
    /// nothing can vouch for the lock any more.
    #[error("the lock's monitor stopped")]
    MonitorStopped,
}

impl LostReason {
    /// A short stable name, for metrics labels.
    ///
    /// ```
    /// assert_eq!(zooraft_recipes::LostReason::NodeDeleted.as_str(), "node_deleted");
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            LostReason::ConnectionSuspended => "connection_suspended",
            LostReason::SessionExpired => "session_expired",
            LostReason::NodeDeleted => "node_deleted",
            LostReason::ClientClosed => "client_closed",
            LostReason::Released => "released",
            LostReason::MonitorStopped => "monitor_stopped",
        }
    }
}

/// What can go wrong in a recipe.
///
/// A ZooKeeper error code is the kind of an [`Error::Zk`] (as `std::io::ErrorKind` is of an
/// I/O error), so it is part of the message; the client library's error behind an
/// [`Error::Connect`] is its [`source`](std::error::Error::source).
///
/// ```
/// use zooraft_recipes::{Error, ErrorCode};
/// let e: Error = ErrorCode::ConnectionLoss.into();
/// assert!(e.to_string().contains("ConnectionLoss"));
/// // `?` takes it into any error box.
/// fn f() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
///     Err(Error::from(ErrorCode::NoNode))?
/// }
/// assert!(f().is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// ZooKeeper (or the client) answered with an error code.
    #[error("ZooKeeper error {0}")]
    Zk(ErrorCode),
    /// One operation of a fenced write failed (the transaction was not applied).
    #[error("operation {index} of the fenced write failed: {code}")]
    OpFailed {
        /// Which of the caller's operations failed (0 for the first).
        index: usize,
        /// Its error code.
        code: ErrorCode,
    },
    /// The lock is no longer held (a fenced write found the lock node gone, or a reentrant
    /// acquire found the held lock lost).
    #[error("the lock is lost: {0}")]
    Lost(LostReason),
    /// The lock path is not a valid ZooKeeper path.
    #[error("invalid lock path {0:?}")]
    InvalidPath(String),
    /// The client could not connect; [`source`](std::error::Error::source) says why.
    #[error("cannot connect to {address}")]
    Connect {
        /// The connect string.
        address: String,
        /// What the client reported.
        #[source]
        cause: Cause,
    },
    /// The client was closed while the recipe was using it.
    #[error("the client is closed")]
    Closed,
    /// The session the recipe was using expired (its ephemeral nodes are gone). Clients
    /// that cannot start a new session (zookeeper-client) must be replaced; others may be
    /// used again once reconnected.
    #[error("the session expired")]
    SessionExpired,
    /// The deadline passed while the client was disconnected: the recipe could not tell
    /// whether the lock is busy. For a release: the delete of the lock node goes on in the
    /// background, and the next acquire through the handle finishes it first.
    #[error("the connection is down")]
    Disconnected,
    /// The server gave no creation zxid for the lock node, so there is no fencing token.
    #[error("no fencing token for {0}")]
    NoFencingToken(String),
    /// A double barrier member is not in the barrier: it never entered, or its member node
    /// was deleted by someone else.
    #[error("not a member of the double barrier: {0}")]
    NotMember(String),
    /// A recipe option is out of range.
    #[error("invalid option: {0}")]
    InvalidOption(String),
}

/// The error a client library reported, behind an [`Error::Connect`]. Two causes are equal
/// when they say the same thing.
#[derive(Clone)]
pub struct Cause(Arc<dyn std::error::Error + Send + Sync>);

impl Cause {
    /// Wraps the client library's error.
    pub(crate) fn new(error: impl std::error::Error + Send + Sync + 'static) -> Cause {
        Cause(Arc::new(error))
    }

    /// A cause that is only a message (for errors the client library reports as text).
    #[cfg(any(feature = "zookeeper-async", test))]
    pub(crate) fn message(text: impl Into<String>) -> Cause {
        let boxed: Box<dyn std::error::Error + Send + Sync> = text.into().into();
        Cause(Arc::from(boxed))
    }
}

impl std::fmt::Debug for Cause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(&*self.0, f)
    }
}

impl std::fmt::Display for Cause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(&*self.0, f)
    }
}

impl std::error::Error for Cause {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.source()
    }
}

impl PartialEq for Cause {
    fn eq(&self, other: &Cause) -> bool {
        self.to_string() == other.to_string()
    }
}

impl Eq for Cause {}

impl From<ErrorCode> for Error {
    fn from(code: ErrorCode) -> Error {
        Error::Zk(code)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::error::Error as _;

    #[test]
    fn a_connect_error_names_the_address_and_keeps_its_cause() {
        let io = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused");
        let e = Error::Connect {
            address: "127.0.0.1:1".into(),
            cause: Cause::new(io),
        };
        assert_eq!(e.to_string(), "cannot connect to 127.0.0.1:1");
        assert_eq!(
            e.source().map(|s| s.to_string()).as_deref(),
            Some("refused")
        );
        let again = Error::Connect {
            address: "127.0.0.1:1".into(),
            cause: Cause::message("refused"),
        };
        assert_eq!(e, again);
    }
}
