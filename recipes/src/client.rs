//! The few ZooKeeper operations the recipes use, behind one small trait.
//!
//! The recipes never talk to a client library directly: they call [`ZkClient`], so the same
//! lock works over any client that can provide these operations (see the crate README for
//! which client gives what). The trait speaks in the recipes' own enums ([`ErrorCode`],
//! [`CreateMode`], [`EventType`]: the `codes` module says why they are not the
//! codec's) and the `jute` codec's records ([`Stat`], [`Acl`], [`Id`]), so that no client
//! library's types leak into the recipes.
//!
//! Besides the operations, a client reports its session through a
//! [`tokio::sync::watch`] channel of [`SessionState`]: whether the connection is up, which
//! session (an `epoch` that changes whenever the client starts a new session) and the
//! session timeout. The lost-lock signal and protection mode are built on it.
//!
//! Recipe constructors take any client through [`IntoClient`]: a client handle by value (the
//! usual case: `Mutex::new(client.clone(), path)`), an `Arc` of a client, or an
//! `Arc<dyn ZkClient>`. The three impls do not overlap because no `Arc` implements
//! [`ZkClient`], and no crate but this one can make one do so (`Arc` is not a fundamental
//! type, so the orphan rule forbids `impl ZkClient for Arc<Theirs>` elsewhere). That is also
//! why `Arc<T>` is not itself a `ZkClient`: the blanket impl over `T: ZkClient` would then
//! cover it twice.

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use tokio::sync::{mpsc, oneshot, watch};

pub use crate::codes::{CreateMode, ErrorCode, EventType};
pub use jute::{perms, Acl, Id, Stat};

/// The result of one ZooKeeper call: the value, or the error code ZooKeeper (or the client,
/// for `ConnectionLoss`) gave.
pub type ZkResult<T> = Result<T, ErrorCode>;

/// A one-shot watch: completes with the event type when the watch fires. If the client drops
/// the watch (it cannot deliver it any more), the receiver completes with an error; callers
/// treat that like a connection change and look again.
pub type WatchReceiver = oneshot::Receiver<EventType>;

/// A persistent watch: a stream of node events until the receiver is dropped (which ends the
/// watch) or the session ends (which closes the stream). Events during a connection loss
/// may be lost (ZOOKEEPER-4698): after a reconnection, read again what matters.
pub type PersistentWatch = mpsc::UnboundedReceiver<NodeEvent>;

/// One event of a [`PersistentWatch`]: what happened to which node.
///
/// ```
/// use zooraft_recipes::{EventType, NodeEvent};
/// let e = NodeEvent { event_type: EventType::NodeCreated, path: "/jobs/7".into() };
/// assert_eq!(e.path, "/jobs/7");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeEvent {
    /// What happened.
    pub event_type: EventType,
    /// The node it happened to (relative to the client's chroot).
    pub path: String,
}

/// The state of the client's connection to the ensemble.
///
/// ```
/// use zooraft_recipes::Connection;
/// assert_ne!(Connection::Connected, Connection::Disconnected);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Connection {
    /// Connected, with a live session.
    Connected,
    /// The connection is down; the session may still be alive on the server.
    Disconnected,
    /// The server said the session expired. The client may start a new one (with a new epoch).
    Expired,
    /// The client was closed; it will not reconnect.
    Closed,
}

/// What a client knows about its session, published on a watch channel.
///
/// ```
/// use std::time::{Duration, Instant};
/// use zooraft_recipes::{Connection, SessionState};
/// let s = SessionState::new(Connection::Connected, 1, Some(0x1234), Duration::from_secs(10));
/// assert_eq!(s.epoch, 1);
/// assert!(s.since <= Instant::now());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionState {
    /// Whether the connection is up.
    pub connection: Connection,
    /// Which session: changes every time the client starts a new session (after an expiry).
    /// Ephemeral nodes created under one epoch never belong to another.
    pub epoch: u64,
    /// The session id, when the client knows it.
    pub session_id: Option<i64>,
    /// The session timeout (negotiated when the client knows it, otherwise requested).
    pub timeout: Duration,
    /// When `connection` last changed.
    pub since: Instant,
}

impl SessionState {
    /// A state observed now.
    pub fn new(
        connection: Connection,
        epoch: u64,
        session_id: Option<i64>,
        timeout: Duration,
    ) -> SessionState {
        SessionState {
            connection,
            epoch,
            session_id,
            timeout,
            since: Instant::now(),
        }
    }
}

/// One operation of a multi (an atomic transaction), as the fenced write uses it.
///
/// ```
/// use zooraft_recipes::Op;
/// let op = Op::SetData { path: "/orders/next".into(), data: b"42".to_vec(), version: -1 };
/// assert_eq!(op.path(), "/orders/next");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Op {
    /// Fails the transaction unless the node exists (and, if `version` is not -1, has that
    /// data version).
    Check {
        /// The node that must exist.
        path: String,
        /// The data version it must have, or -1 for any.
        version: i32,
    },
    /// Creates a node.
    Create {
        /// The node to create (sequential modes append the sequence).
        path: String,
        /// Its data.
        data: Vec<u8>,
        /// Its mode.
        mode: CreateMode,
        /// Its ACL (empty: `world:anyone` with every permission).
        acl: Vec<Acl>,
    },
    /// Sets a node's data.
    SetData {
        /// The node.
        path: String,
        /// The new data.
        data: Vec<u8>,
        /// The data version it must have, or -1 for any.
        version: i32,
    },
    /// Deletes a node.
    Delete {
        /// The node.
        path: String,
        /// The data version it must have, or -1 for any.
        version: i32,
    },
}

impl Op {
    /// The path the operation names.
    pub fn path(&self) -> &str {
        match self {
            Op::Check { path, .. }
            | Op::Create { path, .. }
            | Op::SetData { path, .. }
            | Op::Delete { path, .. } => path,
        }
    }
}

/// The result of one operation of a multi.
///
/// ```
/// use zooraft_recipes::{ErrorCode, OpResult};
/// assert_eq!(OpResult::Error(ErrorCode::NoNode).error(), Some(ErrorCode::NoNode));
/// assert_eq!(OpResult::Check.error(), None);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum OpResult {
    /// The check passed.
    Check,
    /// The created path.
    Create(String),
    /// The node's Stat after the write.
    SetData(Stat),
    /// The node was deleted.
    Delete,
    /// The operation failed (or, with `RuntimeInconsistency`/`Ok`, was rolled back because
    /// another operation of the same multi failed).
    Error(ErrorCode),
}

impl OpResult {
    /// The error code of a failed operation.
    pub fn error(&self) -> Option<ErrorCode> {
        match self {
            OpResult::Error(e) => Some(*e),
            _ => None,
        }
    }
}

/// The operations the recipes need from a ZooKeeper client.
///
/// Paths are absolute (relative to the client's chroot, if it has one). Every call returns
/// ZooKeeper's error code on failure; `ConnectionLoss` means the outcome is unknown.
///
/// Implemented for [`ZookeeperClient`](crate::ZookeeperClient) (zookeeper-client, the primary
/// backend) and, with the `zookeeper-async` feature, for `AsyncZkClient`. Any other client
/// can implement it; the trait is object safe and the recipes hold an `Arc<dyn ZkClient>`
/// (made from whatever the constructor was given, see [`IntoClient`]).
///
/// ```no_run
/// use zooraft_recipes::{ZookeeperClient, ZkClient};
/// # async fn f() -> Result<(), zooraft_recipes::Error> {
/// let client = ZookeeperClient::connect("127.0.0.1:2181", std::time::Duration::from_secs(10)).await?;
/// let children = client.get_children("/").await?;
/// println!("{children:?}");
/// # Ok(()) }
/// ```
#[async_trait]
pub trait ZkClient: Send + Sync + 'static {
    /// Creates a node with the given ACL and returns its path (with the sequence suffix, if
    /// sequential) and its Stat (ZooKeeper's `create2`). `CreateMode::Container` must create a
    /// real container. An empty `acl` means `world:anyone` with every permission.
    ///
    /// ```no_run
    /// # use zooraft_recipes::ZkClient;
    /// # async fn f(client: std::sync::Arc<dyn ZkClient>) -> Result<(), zooraft_recipes::Error> {
    /// use zooraft_recipes::{perms, Acl, Id};
    /// let acl = [Acl { perms: perms::ALL, id: Id { scheme: "auth".into(), id: "".into() } }];
    /// let (path, stat) = client.create_acl("/jobs/job-", b"x", zooraft_recipes::CreateMode::EphemeralSequential, &acl).await?;
    /// # Ok(()) }
    /// ```
    async fn create_acl(
        &self,
        path: &str,
        data: &[u8],
        mode: CreateMode,
        acl: &[Acl],
    ) -> ZkResult<(String, Stat)>;

    /// Creates a node open to everyone (`world:anyone`, every permission): see
    /// [`create_acl`](ZkClient::create_acl).
    ///
    /// ```no_run
    /// # use zooraft_recipes::ZkClient;
    /// # async fn f(client: std::sync::Arc<dyn ZkClient>) -> Result<(), zooraft_recipes::Error> {
    /// let (path, stat) = client.create("/jobs/job-", b"x", zooraft_recipes::CreateMode::EphemeralSequential).await?;
    /// # Ok(()) }
    /// ```
    async fn create(&self, path: &str, data: &[u8], mode: CreateMode) -> ZkResult<(String, Stat)> {
        self.create_acl(path, data, mode, &[]).await
    }

    /// Makes the member this client is connected to catch up with the leader (ZooKeeper's
    /// `sync`): reads sent after it see every write committed before it. The protection
    /// searches call it before they list the lock path.
    ///
    /// ```no_run
    /// # use zooraft_recipes::ZkClient;
    /// # async fn f(client: std::sync::Arc<dyn ZkClient>) -> Result<(), zooraft_recipes::Error> {
    /// client.sync("/locks/orders").await?;
    /// let fresh = client.get_children("/locks/orders").await?;
    /// # Ok(()) }
    /// ```
    async fn sync(&self, path: &str) -> ZkResult<()>;

    /// Closes the session (its ephemeral nodes, and so its locks, go with it) and publishes
    /// [`Connection::Closed`]. The default does nothing, for clients closed by other means.
    ///
    /// ```no_run
    /// # use zooraft_recipes::ZkClient;
    /// # async fn f(client: std::sync::Arc<dyn ZkClient>) {
    /// client.close().await;
    /// # }
    /// ```
    async fn close(&self) {}

    /// Deletes a node (`version` -1 matches any version).
    ///
    /// ```no_run
    /// # use zooraft_recipes::ZkClient;
    /// # async fn f(client: std::sync::Arc<dyn ZkClient>) -> Result<(), zooraft_recipes::Error> {
    /// client.delete("/jobs/job-0000000001", -1).await?;
    /// # Ok(()) }
    /// ```
    async fn delete(&self, path: &str, version: i32) -> ZkResult<()>;

    /// Replaces the node's data if its version is `version` (-1 matches any version), and
    /// returns its new Stat (`BadVersion` if another write came first).
    ///
    /// ```no_run
    /// # use zooraft_recipes::ZkClient;
    /// # async fn f(client: std::sync::Arc<dyn ZkClient>) -> Result<(), zooraft_recipes::Error> {
    /// let (_, stat) = client.get_data("/config").await?;
    /// let stat = client.set_data("/config", b"v2", stat.version).await?;
    /// # Ok(()) }
    /// ```
    async fn set_data(&self, path: &str, data: &[u8], version: i32) -> ZkResult<Stat>;

    /// The node's Stat, or `None` if it does not exist. Sets no watch.
    ///
    /// ```no_run
    /// # use zooraft_recipes::ZkClient;
    /// # async fn f(client: std::sync::Arc<dyn ZkClient>) -> Result<(), zooraft_recipes::Error> {
    /// let stat = client.exists("/jobs").await?;
    /// # Ok(()) }
    /// ```
    async fn exists(&self, path: &str) -> ZkResult<Option<Stat>>;

    /// The node's data and Stat. Sets no watch.
    ///
    /// ```no_run
    /// # use zooraft_recipes::ZkClient;
    /// # async fn f(client: std::sync::Arc<dyn ZkClient>) -> Result<(), zooraft_recipes::Error> {
    /// let (data, stat) = client.get_data("/jobs").await?;
    /// # Ok(()) }
    /// ```
    async fn get_data(&self, path: &str) -> ZkResult<(Vec<u8>, Stat)>;

    /// The node's data and Stat, leaving a data watch on it (fires on change or deletion).
    /// A missing node gives `NoNode` and leaves no watch behind.
    ///
    /// ```no_run
    /// # use zooraft_recipes::ZkClient;
    /// # async fn f(client: std::sync::Arc<dyn ZkClient>) -> Result<(), zooraft_recipes::Error> {
    /// let (data, stat, watch) = client.get_data_watch("/jobs").await?;
    /// let event = watch.await;
    /// # Ok(()) }
    /// ```
    async fn get_data_watch(&self, path: &str) -> ZkResult<(Vec<u8>, Stat, WatchReceiver)>;

    /// The node's Stat, or `None` if it does not exist, leaving a watch that fires when it
    /// is created, changed or deleted (ZooKeeper's `exists` with a watch). The default
    /// answers `Unimplemented`; recipes that need it then poll.
    ///
    /// ```no_run
    /// # use zooraft_recipes::ZkClient;
    /// # async fn f(client: std::sync::Arc<dyn ZkClient>) -> Result<(), zooraft_recipes::Error> {
    /// let (stat, watch) = client.exists_watch("/jobs/ready").await?;
    /// if stat.is_none() {
    ///     let created = watch.await;
    /// }
    /// # Ok(()) }
    /// ```
    async fn exists_watch(&self, path: &str) -> ZkResult<(Option<Stat>, WatchReceiver)> {
        let _ = path;
        Err(ErrorCode::Unimplemented)
    }

    /// Adds a persistent recursive watch on `path` (ZooKeeper 3.6+'s `addWatch` with mode
    /// `PERSISTENT_RECURSIVE`): every creation, data change and deletion of `path` and of
    /// every node below it, for as long as the returned receiver lives. The default answers
    /// `Unimplemented` (a client or server without it); recipes then use one-shot watches.
    ///
    /// ```no_run
    /// # use zooraft_recipes::ZkClient;
    /// # async fn f(client: std::sync::Arc<dyn ZkClient>) -> Result<(), zooraft_recipes::Error> {
    /// let mut events = client.watch_recursive("/config").await?;
    /// while let Some(event) = events.recv().await {
    ///     println!("{:?} {}", event.event_type, event.path);
    /// }
    /// # Ok(()) }
    /// ```
    async fn watch_recursive(&self, path: &str) -> ZkResult<PersistentWatch> {
        let _ = path;
        Err(ErrorCode::Unimplemented)
    }

    /// The names of the node's children, in no particular order. Sets no watch.
    ///
    /// ```no_run
    /// # use zooraft_recipes::ZkClient;
    /// # async fn f(client: std::sync::Arc<dyn ZkClient>) -> Result<(), zooraft_recipes::Error> {
    /// let names = client.get_children("/jobs").await?;
    /// # Ok(()) }
    /// ```
    async fn get_children(&self, path: &str) -> ZkResult<Vec<String>>;

    /// The names of the node's children, leaving a child watch on it (fires when a child is
    /// added or removed, or the node is deleted). The default answers `Unimplemented`;
    /// recipes that need it then poll.
    ///
    /// ```no_run
    /// # use zooraft_recipes::ZkClient;
    /// # async fn f(client: std::sync::Arc<dyn ZkClient>) -> Result<(), zooraft_recipes::Error> {
    /// let (names, watch) = client.get_children_watch("/jobs").await?;
    /// let event = watch.await;
    /// # Ok(()) }
    /// ```
    async fn get_children_watch(&self, path: &str) -> ZkResult<(Vec<String>, WatchReceiver)> {
        let _ = path;
        Err(ErrorCode::Unimplemented)
    }

    /// Runs the operations as one atomic transaction. `Err` means the request as a whole
    /// failed (e.g. `ConnectionLoss`); when one operation fails, the call returns `Ok` with
    /// one result per operation, the failing one being `OpResult::Error`.
    ///
    /// ```no_run
    /// # use zooraft_recipes::ZkClient;
    /// # async fn f(client: std::sync::Arc<dyn ZkClient>) -> Result<(), zooraft_recipes::Error> {
    /// use zooraft_recipes::Op;
    /// let results = client.multi(&[
    ///     Op::Check { path: "/jobs".into(), version: -1 },
    ///     Op::SetData { path: "/jobs".into(), data: b"1".to_vec(), version: -1 },
    /// ]).await?;
    /// # Ok(()) }
    /// ```
    async fn multi(&self, ops: &[Op]) -> ZkResult<Vec<OpResult>>;

    /// The session state channel; its current value is the state now.
    ///
    /// Every call (on every clone of a handle) must subscribe to the same channel for as long
    /// as the session lives: the recipes recognise the clients of one session by it (the locks
    /// held through one session share one heartbeat).
    ///
    /// ```no_run
    /// # use zooraft_recipes::ZkClient;
    /// # async fn f(client: std::sync::Arc<dyn ZkClient>) -> Result<(), zooraft_recipes::Error> {
    /// let connected = client.session().borrow().connection == zooraft_recipes::Connection::Connected;
    /// # Ok(()) }
    /// ```
    fn session(&self) -> watch::Receiver<SessionState>;
}

/// True for errors after which the outcome of a call is unknown and the caller should wait
/// for the connection and look again.
pub(crate) fn is_transient(e: ErrorCode) -> bool {
    matches!(
        e,
        ErrorCode::ConnectionLoss
            | ErrorCode::OperationTimeout
            | ErrorCode::SessionMoved
            | ErrorCode::RequestTimeout
            | ErrorCode::Throttled
    )
}

/// Anything a recipe constructor accepts as its client.
///
/// Implemented for every [`ZkClient`] by value (so `Mutex::new(client.clone(), path)` with a
/// [`ZookeeperClient`](crate::ZookeeperClient) or `AsyncZkClient` handle), for `Arc<T>` of
/// one, and for `Arc<dyn ZkClient>`, so code that shares its client through an `Arc` passes
/// it as before. A recipe keeps the client until it is dropped.
///
/// ```
/// use std::sync::Arc;
/// use zooraft_recipes::{IntoClient, ZkClient};
///
/// fn shared(client: impl IntoClient) -> Arc<dyn ZkClient> {
///     client.into_client()
/// }
/// # fn check<T: ZkClient>(t: T, a: Arc<T>, d: Arc<dyn ZkClient>) {
/// # let _ = (shared(t), shared(a), shared(d));
/// # }
/// ```
pub trait IntoClient {
    /// The client, shared the way the recipes hold it.
    fn into_client(self) -> Arc<dyn ZkClient>;
}

impl<T: ZkClient> IntoClient for T {
    fn into_client(self) -> Arc<dyn ZkClient> {
        Arc::new(self)
    }
}

impl<T: ZkClient> IntoClient for Arc<T> {
    fn into_client(self) -> Arc<dyn ZkClient> {
        self
    }
}

impl IntoClient for Arc<dyn ZkClient> {
    fn into_client(self) -> Arc<dyn ZkClient> {
        self
    }
}
