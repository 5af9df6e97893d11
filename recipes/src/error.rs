//! The recipes' errors, and why a held lock stopped being trustworthy.

use crate::client::ErrorCode;

/// Why [`LockGuard::lost`](crate::LockGuard::lost) completed: the lock can no longer be
/// trusted.
///
/// ```
/// use recipes::LostReason;
/// assert_eq!(LostReason::SessionExpired.to_string(), "the session expired");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
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
}

/// What can go wrong in a recipe.
///
/// ```
/// use recipes::{Error, ErrorCode};
/// let e: Error = ErrorCode::ConnectionLoss.into();
/// assert!(e.to_string().contains("ConnectionLoss"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
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
    /// The client could not connect.
    #[error("cannot connect: {0}")]
    Connect(String),
    /// The client was closed while the recipe was using it.
    #[error("the client is closed")]
    Closed,
}

impl From<ErrorCode> for Error {
    fn from(code: ErrorCode) -> Error {
        Error::Zk(code)
    }
}
