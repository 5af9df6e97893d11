//! The enumerations of the recipes' public API: ZooKeeper's error codes, create modes and
//! watch event types.
//!
//! They are the recipes' own, not re-exports of the `jute` codec's: the recipes are a library
//! for other people's services, so their enums are `#[non_exhaustive]` (ZooKeeper adds error
//! codes and modes from release to release, and adding one here must not break a caller's
//! `match`), while the server crate keeps matching jute's enums exhaustively, so that a code
//! jute learns is a compile error wherever the server must decide what to do with it. The
//! two meet only at the wire, through the numeric values ZooKeeper defines.

/// A ZooKeeper error code (`KeeperException.Code`). `ConnectionLoss` and the other
/// transient codes mean the outcome of the call is unknown.
///
/// ```
/// use zooraft_recipes::ErrorCode;
/// assert_eq!(ErrorCode::from_code(-101), Some(ErrorCode::NoNode));
/// assert_eq!(ErrorCode::NoNode.code(), -101);
/// assert_eq!(ErrorCode::NoNode.to_string(), "NoNode (-101)");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(i32)]
#[non_exhaustive]
pub enum ErrorCode {
    /// No error (only seen as the result of an operation rolled back in a multi).
    Ok = 0,
    /// An unexpected error on the server, or one the client could not classify.
    SystemError = -1,
    /// A multi's operation that was not run because another one failed.
    RuntimeInconsistency = -2,
    /// The server's data is inconsistent.
    DataInconsistency = -3,
    /// The connection to the server was lost: the outcome of the call is unknown.
    ConnectionLoss = -4,
    /// A request or reply could not be encoded or decoded.
    MarshallingError = -5,
    /// The operation is not implemented (by the server or by the client).
    Unimplemented = -6,
    /// The operation timed out (the outcome is unknown).
    OperationTimeout = -7,
    /// Invalid arguments.
    BadArguments = -8,
    /// The session is unknown to the server.
    UnknownSession = -12,
    /// A reconfiguration's new configuration has no quorum.
    NewConfigNoQuorum = -13,
    /// Another reconfiguration is in progress.
    ReconfigInProgress = -14,
    /// A generic API error.
    ApiError = -100,
    /// The node does not exist.
    NoNode = -101,
    /// The session's identities are not allowed the operation by the node's ACL.
    NoAuth = -102,
    /// The node's version is not the expected one.
    BadVersion = -103,
    /// Ephemeral nodes may not have children.
    NoChildrenForEphemerals = -108,
    /// The node already exists.
    NodeExists = -110,
    /// The node has children (and so cannot be deleted).
    NotEmpty = -111,
    /// The session expired: its ephemeral nodes are gone.
    SessionExpired = -112,
    /// An invalid callback.
    InvalidCallback = -113,
    /// An invalid ACL.
    InvalidAcl = -114,
    /// Authentication failed.
    AuthFailed = -115,
    /// The session moved to another server (the outcome is unknown).
    SessionMoved = -118,
    /// A write was sent to a read-only server.
    NotReadOnly = -119,
    /// Ephemeral nodes cannot be created by a local session.
    EphemeralOnLocalSession = -120,
    /// The watch to remove does not exist.
    NoWatcher = -121,
    /// The request timed out on the server (the outcome is unknown).
    RequestTimeout = -122,
    /// Dynamic reconfiguration is disabled.
    ReconfigDisabled = -123,
    /// The session was closed because SASL authentication is required.
    SessionClosedRequireSaslAuth = -124,
    /// A quota was exceeded.
    QuotaExceeded = -125,
    /// The server throttled the request (the outcome is unknown).
    Throttled = -127,
}

/// Every code, for the way back from wire values.
const ERROR_CODES: [ErrorCode; 32] = [
    ErrorCode::Ok,
    ErrorCode::SystemError,
    ErrorCode::RuntimeInconsistency,
    ErrorCode::DataInconsistency,
    ErrorCode::ConnectionLoss,
    ErrorCode::MarshallingError,
    ErrorCode::Unimplemented,
    ErrorCode::OperationTimeout,
    ErrorCode::BadArguments,
    ErrorCode::UnknownSession,
    ErrorCode::NewConfigNoQuorum,
    ErrorCode::ReconfigInProgress,
    ErrorCode::ApiError,
    ErrorCode::NoNode,
    ErrorCode::NoAuth,
    ErrorCode::BadVersion,
    ErrorCode::NoChildrenForEphemerals,
    ErrorCode::NodeExists,
    ErrorCode::NotEmpty,
    ErrorCode::SessionExpired,
    ErrorCode::InvalidCallback,
    ErrorCode::InvalidAcl,
    ErrorCode::AuthFailed,
    ErrorCode::SessionMoved,
    ErrorCode::NotReadOnly,
    ErrorCode::EphemeralOnLocalSession,
    ErrorCode::NoWatcher,
    ErrorCode::RequestTimeout,
    ErrorCode::ReconfigDisabled,
    ErrorCode::SessionClosedRequireSaslAuth,
    ErrorCode::QuotaExceeded,
    ErrorCode::Throttled,
];

impl ErrorCode {
    /// The wire value (ZooKeeper's `KeeperException.Code.intValue()`).
    pub fn code(self) -> i32 {
        self as i32
    }

    /// The code for a wire value, if ZooKeeper defines one.
    pub fn from_code(code: i32) -> Option<ErrorCode> {
        ERROR_CODES.into_iter().find(|c| c.code() == code)
    }

    /// The code for a wire value; a value ZooKeeper does not define is a `SystemError`.
    pub(crate) fn from_wire(code: i32) -> ErrorCode {
        ErrorCode::from_code(code).unwrap_or(ErrorCode::SystemError)
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?} ({})", self, self.code())
    }
}

/// So that `?` takes a [`ZkClient`](crate::ZkClient) call's error into `Box<dyn Error>`,
/// `anyhow` and the like.
///
/// ```
/// fn stat() -> Result<(), Box<dyn std::error::Error>> {
///     Err(zooraft_recipes::ErrorCode::NoNode)?
/// }
/// assert_eq!(stat().unwrap_err().to_string(), "NoNode (-101)");
/// ```
impl std::error::Error for ErrorCode {}

/// How a node is created (ZooKeeper's `CreateMode`). The modes with a TTL are not here: the
/// recipes' operations carry no TTL.
///
/// ```
/// use zooraft_recipes::CreateMode;
/// assert_eq!(CreateMode::EphemeralSequential.flags(), 3);
/// assert!(CreateMode::Container.is_container());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CreateMode {
    /// A node that stays until deleted.
    Persistent,
    /// A node deleted when the session that created it ends.
    Ephemeral,
    /// A persistent node whose name gets a ten-digit sequence number appended.
    PersistentSequential,
    /// An ephemeral node whose name gets a ten-digit sequence number appended.
    EphemeralSequential,
    /// A persistent node the server deletes once it has had children and has none left.
    Container,
}

impl CreateMode {
    /// The wire value (`CreateRequest.flags`).
    pub fn flags(self) -> i32 {
        match self {
            CreateMode::Persistent => 0,
            CreateMode::Ephemeral => 1,
            CreateMode::PersistentSequential => 2,
            CreateMode::EphemeralSequential => 3,
            CreateMode::Container => 4,
        }
    }

    /// True for the modes that append a sequence number to the name.
    pub fn is_sequential(self) -> bool {
        matches!(
            self,
            CreateMode::PersistentSequential | CreateMode::EphemeralSequential
        )
    }

    /// True for a container.
    pub fn is_container(self) -> bool {
        self == CreateMode::Container
    }
}

/// What a watch reported (ZooKeeper's `Watcher.Event.EventType`).
///
/// ```
/// use zooraft_recipes::EventType;
/// assert_eq!(EventType::from_code(2), Some(EventType::NodeDeleted));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum EventType {
    /// No node event (a change of the connection's state).
    None,
    /// The watched node was created.
    NodeCreated,
    /// The watched node was deleted.
    NodeDeleted,
    /// The watched node's data changed.
    NodeDataChanged,
    /// A child of the watched node was added or removed.
    NodeChildrenChanged,
    /// A data watch was removed.
    DataWatchRemoved,
    /// A child watch was removed.
    ChildWatchRemoved,
    /// A persistent watch was removed.
    PersistentWatchRemoved,
}

impl EventType {
    /// The type for a wire value, if ZooKeeper defines one.
    pub fn from_code(code: i32) -> Option<EventType> {
        Some(match code {
            -1 => EventType::None,
            1 => EventType::NodeCreated,
            2 => EventType::NodeDeleted,
            3 => EventType::NodeDataChanged,
            4 => EventType::NodeChildrenChanged,
            5 => EventType::DataWatchRemoved,
            6 => EventType::ChildWatchRemoved,
            7 => EventType::PersistentWatchRemoved,
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_codes_round_trip_and_agree_with_the_codec() {
        for c in ERROR_CODES {
            let v = c.code();
            assert_eq!(ErrorCode::from_code(v), Some(c));
            // The same value names the same code in jute (the server's codec).
            let j = jute::ErrorCode::from_code(v).expect("jute knows it");
            assert_eq!(format!("{j:?}"), format!("{c:?}"));
        }
        for v in -200..=0 {
            if let Some(j) = jute::ErrorCode::from_code(v) {
                assert!(ErrorCode::from_code(v).is_some(), "{j:?} is missing");
            }
        }
        assert_eq!(ErrorCode::from_code(-9999), None);
        assert_eq!(ErrorCode::from_wire(-9999), ErrorCode::SystemError);
    }

    #[test]
    fn modes_and_events_agree_with_the_codec() {
        for m in [
            CreateMode::Persistent,
            CreateMode::Ephemeral,
            CreateMode::PersistentSequential,
            CreateMode::EphemeralSequential,
            CreateMode::Container,
        ] {
            let j = jute::CreateMode::from_flags(m.flags()).expect("jute knows it");
            assert_eq!(format!("{j:?}"), format!("{m:?}"));
        }
        for v in -1..=7 {
            let ours = EventType::from_code(v).map(|e| format!("{e:?}"));
            let theirs = jute::EventType::from_code(v).map(|e| format!("{e:?}"));
            assert_eq!(ours, theirs);
        }
    }
}
