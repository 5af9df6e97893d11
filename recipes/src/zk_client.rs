//! [`ZkClient`] over the zookeeper-client crate: the primary backend (feature
//! `zookeeper-client`, on by default).
//!
//! zookeeper-client has everything the recipes need natively: create2 with the Stat,
//! containers, multi, sync, the session id, the negotiated timeout, a terminal `Expired`
//! state, watches re-registered across reconnects, auth, TLS and SASL (through its
//! `Connector`). This module only translates types, and publishes the session state.

use std::sync::{Arc, Weak};
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::{mpsc, oneshot, watch};
use zookeeper_client as zkc;

use crate::client::{
    perms, Acl, Connection, CreateMode, ErrorCode, EventType, NodeEvent, Op, OpResult,
    PersistentWatch, SessionState, Stat, WatchReceiver, ZkClient, ZkResult,
};
use crate::error::{Cause, Error};

/// How long [`ZkClient::close`] waits for the server to end the session.
const CLOSE_WAIT: Duration = Duration::from_secs(5);

/// A zookeeper-client (`zookeeper_client::Client`) handle for the recipes.
///
/// A cheap handle: clones share one session (an `Arc` of the state inside), and every recipe
/// constructor takes one by value ([`IntoClient`](crate::IntoClient)), so pass
/// `client.clone()`. The session closes on [`close`](ZkClient::close) (for every clone), or
/// when the last clone is dropped (and the last recipe made with it, which holds one too).
///
/// ```no_run
/// use std::time::Duration;
/// use zooraft_recipes::{Mutex, ZookeeperClient};
/// # async fn f() -> Result<(), zooraft_recipes::Error> {
/// let client = ZookeeperClient::connect("127.0.0.1:2181", Duration::from_secs(10)).await?;
/// let guard = Mutex::new(client.clone(), "/locks/orders").acquire().await?;
/// guard.release().await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct ZookeeperClient {
    inner: Arc<Inner>,
}

/// What the clones of one [`ZookeeperClient`] share.
struct Inner {
    /// `None` once closed (dropping the last `zkc::Client` closes the session).
    client: std::sync::Mutex<Option<zkc::Client>>,
    state: Arc<watch::Sender<SessionState>>,
    task: tokio::task::JoinHandle<()>,
}

impl std::fmt::Debug for ZookeeperClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ZookeeperClient")
            .field("state", &*self.inner.state.borrow())
            .finish()
    }
}

impl ZookeeperClient {
    /// Connects (`host:port[,host:port...][/chroot]`) with the given session timeout.
    ///
    /// ```no_run
    /// # async fn f() -> Result<(), zooraft_recipes::Error> {
    /// let client = zooraft_recipes::ZookeeperClient::connect("127.0.0.1:2181", std::time::Duration::from_secs(10)).await?;
    /// # Ok(()) }
    /// ```
    pub async fn connect(
        connect_string: &str,
        session_timeout: Duration,
    ) -> Result<ZookeeperClient, Error> {
        Self::connect_with(
            zkc::Client::connector().with_session_timeout(session_timeout),
            connect_string,
        )
        .await
    }

    /// Connects with a zookeeper-client `Connector`, for auth, TLS, SASL, read-only mode...
    /// Auth given with `Connector::with_auth` is sent again on every reconnect.
    ///
    /// ```no_run
    /// # async fn f() -> Result<(), zooraft_recipes::Error> {
    /// let connector = zookeeper_client::Client::connector()
    ///     .with_session_timeout(std::time::Duration::from_secs(10))
    ///     .with_auth("digest", b"billing:secret");
    /// let client = zooraft_recipes::ZookeeperClient::connect_with(connector, "127.0.0.1:2181").await?;
    /// # Ok(()) }
    /// ```
    pub async fn connect_with(
        connector: zkc::Connector,
        connect_string: &str,
    ) -> Result<ZookeeperClient, Error> {
        let client = connector
            .connect(connect_string)
            .await
            .map_err(|e| Error::Connect {
                address: connect_string.to_string(),
                cause: Cause::new(e),
            })?;
        Ok(Self::from_client(client))
    }

    /// Wraps a connected zookeeper-client handle.
    ///
    /// ```no_run
    /// # async fn f() -> Result<(), Box<dyn std::error::Error>> {
    /// let raw = zookeeper_client::Client::connect("127.0.0.1:2181").await?;
    /// let client = zooraft_recipes::ZookeeperClient::from_client(raw);
    /// # Ok(()) }
    /// ```
    pub fn from_client(client: zkc::Client) -> ZookeeperClient {
        let state = Arc::new(watch::Sender::new(SessionState::new(
            map_state(client.state()),
            0,
            Some(client.session_id().0),
            client.session_timeout(),
        )));
        let weak: Weak<watch::Sender<SessionState>> = Arc::downgrade(&state);
        let mut states = client.state_watcher();
        let task = tokio::spawn(async move {
            loop {
                let s = states.changed().await;
                let Some(tx) = weak.upgrade() else { return };
                let connection = map_state(s);
                tx.send_modify(|cur| {
                    if cur.connection == Connection::Closed {
                        // Closed through `close`: nothing changes that.
                        return;
                    }
                    let epoch = if connection == Connection::Expired {
                        cur.epoch + 1
                    } else {
                        cur.epoch
                    };
                    *cur = SessionState::new(connection, epoch, cur.session_id, cur.timeout);
                });
                if s.is_terminated() {
                    return;
                }
            }
        });
        ZookeeperClient {
            inner: Arc::new(Inner {
                client: std::sync::Mutex::new(Some(client)),
                state,
                task,
            }),
        }
    }

    /// The zookeeper-client handle, for everything else (`None` once closed).
    ///
    /// ```no_run
    /// # async fn f(client: zooraft_recipes::ZookeeperClient) {
    /// let id = client.client().map(|c| c.session_id());
    /// # }
    /// ```
    pub fn client(&self) -> Option<zkc::Client> {
        self.inner
            .client
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The handle, or `ConnectionLoss` once closed (the state channel says `Closed`).
    fn zk(&self) -> ZkResult<zkc::Client> {
        self.client().ok_or(ErrorCode::ConnectionLoss)
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn map_state(s: zkc::SessionState) -> Connection {
    match s {
        zkc::SessionState::SyncConnected | zkc::SessionState::ConnectedReadOnly => {
            Connection::Connected
        }
        zkc::SessionState::Disconnected => Connection::Disconnected,
        zkc::SessionState::Expired => Connection::Expired,
        _ => Connection::Closed,
    }
}

fn code(e: zkc::Error) -> ErrorCode {
    use zkc::Error as E;
    match e {
        E::NoNode => ErrorCode::NoNode,
        E::NoAuth => ErrorCode::NoAuth,
        E::BadVersion => ErrorCode::BadVersion,
        E::NoChildrenForEphemerals => ErrorCode::NoChildrenForEphemerals,
        E::NodeExists => ErrorCode::NodeExists,
        E::NotEmpty => ErrorCode::NotEmpty,
        E::SessionExpired => ErrorCode::SessionExpired,
        E::InvalidAcl => ErrorCode::InvalidAcl,
        E::AuthFailed => ErrorCode::AuthFailed,
        E::SessionMoved => ErrorCode::SessionMoved,
        E::NotReadOnly => ErrorCode::NotReadOnly,
        E::NoWatcher => ErrorCode::NoWatcher,
        E::QuotaExceeded => ErrorCode::QuotaExceeded,
        E::Throttled => ErrorCode::Throttled,
        E::MarshallingError => ErrorCode::MarshallingError,
        E::Unimplemented => ErrorCode::Unimplemented,
        E::ConnectionLoss => ErrorCode::ConnectionLoss,
        E::Timeout => ErrorCode::OperationTimeout,
        E::ReconfigDisabled => ErrorCode::ReconfigDisabled,
        E::BadArguments(_) => ErrorCode::BadArguments,
        E::RuntimeInconsistent => ErrorCode::RuntimeInconsistency,
        E::UnexpectedErrorCode(c) => ErrorCode::from_wire(c),
        E::UnmarshalError { .. } => ErrorCode::MarshallingError,
        // No host left to try: the session is over.
        E::NoHosts => ErrorCode::SessionExpired,
        // I/O and other client-side failures: the request's outcome is unknown.
        _ => ErrorCode::ConnectionLoss,
    }
}

fn stat(s: zkc::Stat) -> Stat {
    Stat {
        czxid: s.czxid,
        mzxid: s.mzxid,
        ctime: s.ctime,
        mtime: s.mtime,
        version: s.version,
        cversion: s.cversion,
        aversion: s.aversion,
        ephemeral_owner: s.ephemeral_owner,
        data_length: s.data_length,
        num_children: s.num_children,
        pzxid: s.pzxid,
    }
}

fn mode(m: CreateMode) -> zkc::CreateMode {
    match m {
        CreateMode::Persistent => zkc::CreateMode::Persistent,
        CreateMode::PersistentSequential => zkc::CreateMode::PersistentSequential,
        CreateMode::Ephemeral => zkc::CreateMode::Ephemeral,
        CreateMode::EphemeralSequential => zkc::CreateMode::EphemeralSequential,
        CreateMode::Container => zkc::CreateMode::Container,
    }
}

fn event(t: zkc::EventType) -> EventType {
    match t {
        zkc::EventType::NodeCreated => EventType::NodeCreated,
        zkc::EventType::NodeDeleted => EventType::NodeDeleted,
        zkc::EventType::NodeDataChanged => EventType::NodeDataChanged,
        zkc::EventType::NodeChildrenChanged => EventType::NodeChildrenChanged,
        _ => EventType::None,
    }
}

fn version(v: i32) -> Option<i32> {
    if v == -1 {
        None
    } else {
        Some(v)
    }
}

/// The recipes' ACL in zookeeper-client's terms.
fn acl(a: &Acl) -> zkc::Acl {
    use zkc::Permission as P;
    let mut p = P::NONE;
    for (bit, perm) in [
        (perms::READ, P::READ),
        (perms::WRITE, P::WRITE),
        (perms::CREATE, P::CREATE),
        (perms::DELETE, P::DELETE),
        (perms::ADMIN, P::ADMIN),
    ] {
        if a.perms & bit != 0 {
            p = p | perm;
        }
    }
    zkc::Acl::new(p, zkc::AuthId::new(&a.id.scheme, &a.id.id))
}

fn acls(list: &[Acl]) -> Vec<zkc::Acl> {
    if list.is_empty() {
        zkc::Acls::anyone_all().iter().cloned().collect()
    } else {
        list.iter().map(acl).collect()
    }
}

#[async_trait]
impl ZkClient for ZookeeperClient {
    async fn create_acl(
        &self,
        path: &str,
        data: &[u8],
        m: CreateMode,
        list: &[Acl],
    ) -> ZkResult<(String, Stat)> {
        let zk = self.zk()?;
        let list = acls(list);
        let options = mode(m).with_acls(zkc::Acls::new(&list));
        let (s, seq) = zk.create(path, data, &options).await.map_err(code)?;
        let created = if m.is_sequential() {
            format!("{path}{seq}")
        } else {
            path.to_string()
        };
        Ok((created, stat(s)))
    }

    async fn delete(&self, path: &str, v: i32) -> ZkResult<()> {
        self.zk()?.delete(path, version(v)).await.map_err(code)
    }

    async fn set_data(&self, path: &str, data: &[u8], v: i32) -> ZkResult<Stat> {
        let s = self.zk()?.set_data(path, data, version(v)).await;
        Ok(stat(s.map_err(code)?))
    }

    async fn exists(&self, path: &str) -> ZkResult<Option<Stat>> {
        Ok(self.zk()?.check_stat(path).await.map_err(code)?.map(stat))
    }

    async fn get_data(&self, path: &str) -> ZkResult<(Vec<u8>, Stat)> {
        let (d, s) = self.zk()?.get_data(path).await.map_err(code)?;
        Ok((d, stat(s)))
    }

    async fn get_data_watch(&self, path: &str) -> ZkResult<(Vec<u8>, Stat, WatchReceiver)> {
        let (d, s, w) = self.zk()?.get_and_watch_data(path).await.map_err(code)?;
        let (tx, rx) = oneshot::channel();
        tokio::spawn(async move {
            let ev = w.changed().await;
            let _ = tx.send(event(ev.event_type));
        });
        Ok((d, stat(s), rx))
    }

    async fn exists_watch(&self, path: &str) -> ZkResult<(Option<Stat>, WatchReceiver)> {
        let (s, w) = self.zk()?.check_and_watch_stat(path).await.map_err(code)?;
        let (tx, rx) = oneshot::channel();
        tokio::spawn(async move {
            let ev = w.changed().await;
            let _ = tx.send(event(ev.event_type));
        });
        Ok((s.map(stat), rx))
    }

    async fn watch_recursive(&self, path: &str) -> ZkResult<PersistentWatch> {
        let mut w = self
            .zk()?
            .watch(path, zkc::AddWatchMode::PersistentRecursive)
            .await
            .map_err(code)?;
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            loop {
                let ev = tokio::select! {
                    ev = w.changed() => ev,
                    // The receiver is gone: dropping the watcher ends the watch.
                    () = tx.closed() => return,
                };
                // After a terminal session event the watcher has nothing more to say (and
                // must not be polled again).
                if ev.session_state.is_terminated() {
                    return;
                }
                if ev.event_type == zkc::EventType::Session {
                    continue;
                }
                let event = NodeEvent {
                    event_type: event(ev.event_type),
                    path: ev.path,
                };
                if tx.send(event).is_err() {
                    return;
                }
            }
        });
        Ok(rx)
    }

    async fn get_children(&self, path: &str) -> ZkResult<Vec<String>> {
        self.zk()?.list_children(path).await.map_err(code)
    }

    async fn get_children_watch(&self, path: &str) -> ZkResult<(Vec<String>, WatchReceiver)> {
        let (children, w) = self
            .zk()?
            .list_and_watch_children(path)
            .await
            .map_err(code)?;
        let (tx, rx) = oneshot::channel();
        tokio::spawn(async move {
            let ev = w.changed().await;
            let _ = tx.send(event(ev.event_type));
        });
        Ok((children, rx))
    }

    async fn sync(&self, path: &str) -> ZkResult<()> {
        self.zk()?.sync(path).await.map_err(code)
    }

    async fn close(&self) {
        let taken = self
            .inner
            .client
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        let Some(client) = taken else { return };
        // Closed from now on: what happens to our nodes while the session ends (their
        // deletion, its watch events) is the close, not a lost lock of another kind.
        self.inner.state.send_modify(|s| {
            if s.connection != Connection::Expired {
                *s = SessionState::new(Connection::Closed, s.epoch, s.session_id, s.timeout)
            }
        });
        // Dropping the last handle makes zookeeper-client send closeSession; wait (a little)
        // for the session to end, so that our ephemeral nodes are gone when this returns.
        // Handles the application still holds (from `client()`) keep the session open.
        let mut states = client.state_watcher();
        let limit = client.session_timeout().min(CLOSE_WAIT);
        drop(client);
        let _ = tokio::time::timeout(limit, async {
            while !states.peek_state().is_terminated() {
                states.changed().await;
            }
        })
        .await;
    }

    async fn multi(&self, ops: &[Op]) -> ZkResult<Vec<OpResult>> {
        let zk = self.zk()?;
        let create_acls: Vec<Vec<zkc::Acl>> = ops
            .iter()
            .map(|op| match op {
                Op::Create { acl: list, .. } => acls(list),
                _ => Vec::new(),
            })
            .collect();
        let mut w = zk.new_multi_writer();
        for (op, list) in ops.iter().zip(&create_acls) {
            match op {
                Op::Check { path, version } => w.add_check_version(path, *version),
                Op::Create {
                    path,
                    data,
                    mode: m,
                    ..
                } => w.add_create(path, data, &mode(*m).with_acls(zkc::Acls::new(list))),
                Op::SetData {
                    path,
                    data,
                    version: v,
                } => w.add_set_data(path, data, version(*v)),
                Op::Delete { path, version: v } => w.add_delete(path, version(*v)),
            }
            .map_err(code)?;
        }
        match w.commit().await {
            Ok(results) => Ok(results
                .into_iter()
                .map(|r| match r {
                    zkc::MultiWriteResult::Check => OpResult::Check,
                    zkc::MultiWriteResult::Delete => OpResult::Delete,
                    zkc::MultiWriteResult::Create { path, .. } => OpResult::Create(path),
                    zkc::MultiWriteResult::SetData { stat: s } => OpResult::SetData(stat(s)),
                    _ => OpResult::Error(ErrorCode::MarshallingError),
                })
                .collect()),
            Err(zkc::MultiWriteError::OperationFailed { index, source }) => Ok((0..ops.len())
                .map(|i| {
                    OpResult::Error(match i.cmp(&index) {
                        std::cmp::Ordering::Less => ErrorCode::Ok,
                        std::cmp::Ordering::Equal => code(source.clone()),
                        std::cmp::Ordering::Greater => ErrorCode::RuntimeInconsistency,
                    })
                })
                .collect()),
            Err(zkc::MultiWriteError::RequestFailed { source }) => Err(code(source)),
        }
    }

    fn session(&self) -> watch::Receiver<SessionState> {
        self.inner.state.subscribe()
    }
}
