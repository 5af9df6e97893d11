//! [`ZkClient`] over the zookeeper-async crate (feature `zookeeper-async`, off by default;
//! the primary backend is zookeeper-client, see [`ZookeeperClient`](crate::ZookeeperClient)).
//!
//! zookeeper-async gives create2 (so the lock node's czxid comes with the create), getData
//! with a watch, getChildren and delete. It lacks four things the recipes need, and this
//! module supplies them:
//! - `multi` (the fenced write) and real containers (it sends `CreateMode::Container` as a
//!   plain create, which makes a persistent node): sent over [`JuteConnection`], a second
//!   small session on this workspace's jute codec. That session is opened only when such a
//!   request is sent, carries every auth given to [`AsyncZkClient::add_auth`], and creates
//!   with the ACL the caller gives.
//! - `sync`: not offered. A conditional `setData` that cannot succeed (version -2) is sent on
//!   the main session instead: like every write it is ordered through the leader (Apache
//!   ZooKeeper logs failed writes as error transactions), so its reply comes only after the
//!   member applied everything committed before it, which is what the protection search
//!   needs from a sync.
//! - the session id: learned from the `ephemeralOwner` of the first ephemeral node we
//!   create, and forgotten when the session expires. The session *epoch* (which session) is
//!   tracked from its state events: zookeeper-async silently starts a new session after an
//!   expiry, and reports the expiry as `ZkState::NotConnected`.
//! - watches across reconnects: zookeeper-async does not re-register watches on a new
//!   connection, so a watch may never fire. The recipes therefore re-check whenever the
//!   connection comes back (they watch [`SessionState`] too).
//!
//! zookeeper-async's read timeout is computed in whole seconds from two thirds of the session
//! timeout, so session timeouts under two seconds make it reconnect in a loop: use two
//! seconds or more.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use jute::{
    Acl, CheckVersionRequest, CreateRequest, DeleteRequest, MultiOp, MultiResult, Request,
    Response, SetDataRequest,
};
use tokio::sync::{oneshot, watch};
use zookeeper_async::{ZkError, ZkState, ZooKeeper};

use crate::client::{
    Connection, CreateMode, ErrorCode, EventType, Op, OpResult, SessionState, Stat, WatchReceiver,
    ZkClient, ZkResult,
};
use crate::error::{Cause, Error};
use crate::wire::{AuthList, ConnectString, JuteConnection};

/// A zookeeper-async client with everything the recipes need.
///
/// A cheap handle: clones share one session (an `Arc` of the state inside), and every recipe
/// constructor takes one by value ([`IntoClient`](crate::IntoClient)), so pass
/// `client.clone()`. The session closes on [`close`](AsyncZkClient::close) (for every
/// clone), or in the background when the last clone is dropped (and the last recipe made
/// with it, which holds one too).
///
/// ```no_run
/// use std::time::Duration;
/// use zooraft_recipes::AsyncZkClient;
/// # async fn f() -> Result<(), zooraft_recipes::Error> {
/// let client = AsyncZkClient::connect("127.0.0.1:2181", Duration::from_secs(10)).await?;
/// // The underlying zookeeper-async handle stays available for everything else.
/// let stat = client.zookeeper().exists("/", false).await;
/// println!("{stat:?}");
/// client.close().await;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct AsyncZkClient {
    inner: Arc<Inner>,
}

/// What the clones of one [`AsyncZkClient`] share.
struct Inner {
    zk: Arc<ZooKeeper>,
    side: JuteConnection,
    auth: AuthList,
    state: Arc<watch::Sender<SessionState>>,
    closed: std::sync::atomic::AtomicBool,
}

impl std::fmt::Debug for AsyncZkClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AsyncZkClient")
            .field("state", &*self.inner.state.borrow())
            .finish()
    }
}

impl AsyncZkClient {
    /// Connects and waits (at most `session_timeout`) until the session is established.
    /// The connect string is ZooKeeper's (`host:port[,host:port...][/chroot]`).
    ///
    /// ```no_run
    /// # async fn f() -> Result<(), zooraft_recipes::Error> {
    /// let client = zooraft_recipes::AsyncZkClient::connect("127.0.0.1:2181/app", std::time::Duration::from_secs(10)).await?;
    /// # Ok(()) }
    /// ```
    pub async fn connect(
        connect_string: &str,
        session_timeout: Duration,
    ) -> Result<AsyncZkClient, Error> {
        let target = ConnectString::parse(connect_string).ok_or_else(|| Error::Connect {
            address: connect_string.to_string(),
            cause: Cause::message("not host:port[,host:port...][/chroot]"),
        })?;
        let state = Arc::new(watch::Sender::new(SessionState::new(
            Connection::Disconnected,
            0,
            None,
            session_timeout,
        )));
        let zk = ZooKeeper::connect(connect_string, session_timeout, |_ev| {})
            .await
            .map_err(|e| Error::Connect {
                address: connect_string.to_string(),
                cause: Cause::new(e),
            })?;
        let listener_state = state.clone();
        zk.add_listener(move |s: ZkState| on_state(&listener_state, s));
        let auth = Arc::new(std::sync::Mutex::new(Vec::new()));
        let client = AsyncZkClient {
            inner: Arc::new(Inner {
                zk: Arc::new(zk),
                side: JuteConnection::new(target, session_timeout, auth.clone()),
                auth,
                state,
                closed: std::sync::atomic::AtomicBool::new(false),
            }),
        };
        let inner = &client.inner;
        // The Connected event may have fired before the listener was added: a request that
        // succeeds proves the session is up.
        let probe = tokio::time::timeout(session_timeout, inner.zk.exists("/", false)).await;
        match probe {
            Ok(Ok(_)) => {
                // zookeeper-async does not tell the negotiated timeout; the side session asks
                // for the same one and is clamped the same way.
                if let Ok(t) = inner.side.negotiated_timeout().await {
                    inner.state.send_modify(|s| s.timeout = s.timeout.min(t));
                }
                // The side session is opened again when a request needs it.
                inner.side.close().await;
                inner.state.send_if_modified(|s| {
                    if s.connection == Connection::Disconnected {
                        *s = SessionState::new(
                            Connection::Connected,
                            s.epoch,
                            s.session_id,
                            s.timeout,
                        );
                        true
                    } else {
                        false
                    }
                });
                Ok(client)
            }
            Ok(Err(e)) => {
                client.close().await;
                Err(Error::Connect {
                    address: connect_string.to_string(),
                    cause: Cause::new(e),
                })
            }
            Err(_) => {
                client.close().await;
                Err(Error::Connect {
                    address: connect_string.to_string(),
                    cause: Cause::message(format!("no session within {session_timeout:?}")),
                })
            }
        }
    }

    /// The zookeeper-async handle, for operations the recipes do not wrap.
    ///
    /// ```no_run
    /// # async fn f(client: zooraft_recipes::AsyncZkClient) {
    /// let kids = client.zookeeper().get_children("/", false).await;
    /// # }
    /// ```
    pub fn zookeeper(&self) -> &ZooKeeper {
        &self.inner.zk
    }

    /// Closes the session, for every clone (its ephemeral nodes, and so its locks, go with
    /// it). Dropping the last clone closes it too, in the background. zookeeper-async returns once
    /// closeSession is sent, without waiting for its reply: the nodes go a moment later.
    ///
    /// ```no_run
    /// # async fn f(client: zooraft_recipes::AsyncZkClient) {
    /// client.close().await;
    /// # }
    /// ```
    pub async fn close(&self) {
        self.inner.close().await
    }

    /// Adds an identity (`addauth`) to the session, and to the side session that sends
    /// multi and container creates: both act as the same user.
    ///
    /// ```no_run
    /// # async fn f(client: zooraft_recipes::AsyncZkClient) -> Result<(), zooraft_recipes::Error> {
    /// client.add_auth("digest", b"billing:secret").await?;
    /// # Ok(()) }
    /// ```
    pub async fn add_auth(&self, scheme: &str, auth: &[u8]) -> Result<(), Error> {
        self.inner.add_auth(scheme, auth).await
    }
}

impl Inner {
    async fn close(&self) {
        if self.closed.swap(true, std::sync::atomic::Ordering::SeqCst) {
            return;
        }
        let _ = tokio::time::timeout(Duration::from_secs(5), self.zk.close()).await;
        self.side.close().await;
        self.state.send_modify(|s| {
            *s = SessionState::new(Connection::Closed, s.epoch, s.session_id, s.timeout)
        });
    }

    async fn add_auth(&self, scheme: &str, auth: &[u8]) -> Result<(), Error> {
        self.zk
            .add_auth(scheme, auth.to_vec())
            .await
            .map_err(|e| Error::Zk(code(e)))?;
        self.auth
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((scheme.to_string(), auth.to_vec()));
        // A side session opened before has not got it: the next request opens a new one.
        self.side.close().await;
        Ok(())
    }

    fn learn_session(&self, stat: &Stat) {
        if stat.ephemeral_owner == 0 {
            return;
        }
        self.state.send_if_modified(|s| {
            if s.session_id.is_none() && s.connection != Connection::Expired {
                s.session_id = Some(stat.ephemeral_owner);
                true
            } else {
                false
            }
        });
    }

    async fn side_call(&self, req: Request) -> ZkResult<Response> {
        self.side.call(req).await
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        // zookeeper-async keeps its I/O task (and so the session) alive after the handle is
        // dropped; close the session instead of leaving it to ping forever.
        if self.closed.load(std::sync::atomic::Ordering::SeqCst) {
            return;
        }
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            let zk = self.zk.clone();
            rt.spawn(async move {
                let _ = tokio::time::timeout(Duration::from_secs(5), zk.close()).await;
            });
        }
    }
}

/// Maps zookeeper-async's state events onto [`SessionState`].
#[allow(deprecated)]
fn on_state(state: &watch::Sender<SessionState>, s: ZkState) {
    state.send_modify(|cur| {
        let (connection, epoch, session_id) = match s {
            ZkState::Connected | ZkState::ConnectedReadOnly => {
                (Connection::Connected, cur.epoch, cur.session_id)
            }
            ZkState::Connecting => {
                if cur.connection == Connection::Disconnected
                    || cur.connection == Connection::Expired
                {
                    // Still down (or already expired): keep when it went down.
                    return;
                }
                (Connection::Disconnected, cur.epoch, cur.session_id)
            }
            // zookeeper-async reports an expired session this way, then opens a new one.
            ZkState::NotConnected => (Connection::Expired, cur.epoch + 1, None),
            ZkState::Closed | ZkState::AuthFailed => {
                (Connection::Closed, cur.epoch, cur.session_id)
            }
            ZkState::Associating => return,
        };
        *cur = SessionState::new(connection, epoch, session_id, cur.timeout);
    });
}

fn code(e: ZkError) -> ErrorCode {
    ErrorCode::from_wire(e as i32)
}

fn stat(s: zookeeper_async::Stat) -> Stat {
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

fn async_mode(mode: CreateMode) -> zookeeper_async::CreateMode {
    use zookeeper_async::CreateMode as M;
    match mode {
        CreateMode::Persistent => M::Persistent,
        CreateMode::Ephemeral => M::Ephemeral,
        CreateMode::PersistentSequential => M::PersistentSequential,
        CreateMode::EphemeralSequential => M::EphemeralSequential,
        CreateMode::Container => M::Container,
    }
}

fn event_type(t: zookeeper_async::WatchedEventType) -> EventType {
    use zookeeper_async::WatchedEventType as W;
    match t {
        W::NodeCreated => EventType::NodeCreated,
        W::NodeDeleted => EventType::NodeDeleted,
        W::NodeDataChanged => EventType::NodeDataChanged,
        W::NodeChildrenChanged => EventType::NodeChildrenChanged,
        W::DataWatchRemoved => EventType::DataWatchRemoved,
        W::ChildWatchRemoved => EventType::ChildWatchRemoved,
        _ => EventType::None,
    }
}

/// Converts one recipe op into a jute multi op (paths with the chroot added).
fn multi_op(side: &JuteConnection, op: &Op) -> MultiOp {
    match op {
        Op::Check { path, version } => MultiOp::Check(CheckVersionRequest {
            path: side.server_path(path),
            version: *version,
        }),
        Op::Create {
            path,
            data,
            mode,
            acl,
        } => {
            let req = CreateRequest {
                path: side.server_path(path),
                data: Some(bytes::Bytes::copy_from_slice(data)),
                acl: jute_acl(acl),
                flags: mode.flags(),
            };
            if mode.is_container() {
                MultiOp::CreateContainer(req)
            } else {
                MultiOp::Create2(req)
            }
        }
        Op::SetData {
            path,
            data,
            version,
        } => MultiOp::SetData(SetDataRequest {
            path: side.server_path(path),
            data: Some(bytes::Bytes::copy_from_slice(data)),
            version: *version,
        }),
        Op::Delete { path, version } => MultiOp::Delete(DeleteRequest {
            path: side.server_path(path),
            version: *version,
        }),
    }
}

/// The ACL to send: the caller's, or open to everyone when empty.
fn jute_acl(acl: &[Acl]) -> Vec<Acl> {
    if acl.is_empty() {
        vec![Acl::open_unsafe()]
    } else {
        acl.to_vec()
    }
}

/// The ACL in zookeeper-async's terms.
fn async_acl(acl: &[Acl]) -> Vec<zookeeper_async::Acl> {
    use zookeeper_async::Permission as P;
    jute_acl(acl)
        .iter()
        .map(|a| {
            let mut p = P::NONE;
            for (bit, perm) in [
                (jute::perms::READ, P::READ),
                (jute::perms::WRITE, P::WRITE),
                (jute::perms::CREATE, P::CREATE),
                (jute::perms::DELETE, P::DELETE),
                (jute::perms::ADMIN, P::ADMIN),
            ] {
                if a.perms & bit != 0 {
                    p = p | perm;
                }
            }
            zookeeper_async::Acl {
                perms: p,
                scheme: a.id.scheme.clone(),
                id: a.id.id.clone(),
            }
        })
        .collect()
}

#[async_trait]
impl ZkClient for AsyncZkClient {
    async fn create_acl(
        &self,
        path: &str,
        data: &[u8],
        mode: CreateMode,
        acl: &[Acl],
    ) -> ZkResult<(String, Stat)> {
        if mode.is_container() {
            let req = CreateRequest {
                path: self.inner.side.server_path(path),
                data: Some(bytes::Bytes::copy_from_slice(data)),
                acl: jute_acl(acl),
                flags: mode.flags(),
            };
            return match self.inner.side_call(Request::CreateContainer(req)).await? {
                Response::Create2(p, s) => Ok((self.inner.side.client_path(p), s)),
                Response::Create(p) => Ok((self.inner.side.client_path(p), Stat::default())),
                _ => Err(ErrorCode::MarshallingError),
            };
        }
        let (p, s) = self
            .inner
            .zk
            .create2(path, data.to_vec(), async_acl(acl), async_mode(mode))
            .await
            .map_err(code)?;
        let s = stat(s);
        self.inner.learn_session(&s);
        Ok((p, s))
    }

    async fn delete(&self, path: &str, version: i32) -> ZkResult<()> {
        let v = if version == -1 { None } else { Some(version) };
        self.inner.zk.delete(path, v).await.map_err(code)
    }

    async fn set_data(&self, path: &str, data: &[u8], version: i32) -> ZkResult<Stat> {
        let v = if version == -1 { None } else { Some(version) };
        let s = self.inner.zk.set_data(path, data.to_vec(), v).await;
        Ok(stat(s.map_err(code)?))
    }

    async fn exists(&self, path: &str) -> ZkResult<Option<Stat>> {
        Ok(self
            .inner
            .zk
            .exists(path, false)
            .await
            .map_err(code)?
            .map(stat))
    }

    async fn get_data(&self, path: &str) -> ZkResult<(Vec<u8>, Stat)> {
        let (d, s) = self.inner.zk.get_data(path, false).await.map_err(code)?;
        Ok((d, stat(s)))
    }

    async fn get_data_watch(&self, path: &str) -> ZkResult<(Vec<u8>, Stat, WatchReceiver)> {
        let (tx, rx) = oneshot::channel();
        let (d, s) = self
            .inner
            .zk
            .get_data_w(path, move |ev: zookeeper_async::WatchedEvent| {
                let _ = tx.send(event_type(ev.event_type));
            })
            .await
            .map_err(code)?;
        Ok((d, stat(s), rx))
    }

    async fn exists_watch(&self, path: &str) -> ZkResult<(Option<Stat>, WatchReceiver)> {
        let (tx, rx) = oneshot::channel();
        let s = self
            .inner
            .zk
            .exists_w(path, move |ev: zookeeper_async::WatchedEvent| {
                let _ = tx.send(event_type(ev.event_type));
            })
            .await
            .map_err(code)?;
        Ok((s.map(stat), rx))
    }

    async fn get_children(&self, path: &str) -> ZkResult<Vec<String>> {
        self.inner.zk.get_children(path, false).await.map_err(code)
    }

    async fn get_children_watch(&self, path: &str) -> ZkResult<(Vec<String>, WatchReceiver)> {
        let (tx, rx) = oneshot::channel();
        let children = self
            .inner
            .zk
            .get_children_w(path, move |ev: zookeeper_async::WatchedEvent| {
                let _ = tx.send(event_type(ev.event_type));
            })
            .await
            .map_err(code)?;
        Ok((children, rx))
    }

    async fn sync(&self, path: &str) -> ZkResult<()> {
        // A write that cannot succeed (no node has data version -2), ordered like a sync.
        match self.inner.zk.set_data(path, Vec::new(), Some(-2)).await {
            Ok(_) => Ok(()),
            Err(e) => match code(e) {
                ErrorCode::BadVersion | ErrorCode::NoNode | ErrorCode::NoAuth => Ok(()),
                other => Err(other),
            },
        }
    }

    async fn close(&self) {
        AsyncZkClient::close(self).await
    }

    async fn multi(&self, ops: &[Op]) -> ZkResult<Vec<OpResult>> {
        let req = Request::Multi(ops.iter().map(|o| multi_op(&self.inner.side, o)).collect());
        let Response::Multi(results) = self.inner.side_call(req).await? else {
            return Err(ErrorCode::MarshallingError);
        };
        Ok(results
            .into_iter()
            .map(|r| match r {
                MultiResult::Create(p) => OpResult::Create(self.inner.side.client_path(p)),
                MultiResult::Create2(p, _) => OpResult::Create(self.inner.side.client_path(p)),
                MultiResult::Delete => OpResult::Delete,
                MultiResult::SetData(s) => OpResult::SetData(s),
                MultiResult::Check => OpResult::Check,
                MultiResult::Error(e) => OpResult::Error(ErrorCode::from_wire(e)),
                MultiResult::GetChildren(_) | MultiResult::GetData(..) => {
                    OpResult::Error(ErrorCode::MarshallingError)
                }
            })
            .collect())
    }

    fn session(&self) -> watch::Receiver<SessionState> {
        self.inner.state.subscribe()
    }
}
