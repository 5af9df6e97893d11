//! Leader election compatible with Curator's `LeaderLatch` and `LeaderSelector`: a Java
//! service and a Rust service on the same path elect one leader between them.
//!
//! Curator's `LeaderLatch` is a queue of protected ephemeral-sequential nodes
//! `<path>/_c_<uuid>-latch-<seq>` whose data is the participant id; the first node leads,
//! every other watches the node before its own. That is the mutex's algorithm with another
//! node name, so [`LeaderLatch`] runs the lock core with `latch-` nodes: leadership is a
//! [`LockGuard`], with the latch node's czxid as fencing token and the same `lost()` signal.
//!
//! Curator's `LeaderSelector` is an `InterProcessMutex` on the leader path (nodes
//! `_c_<uuid>-lock-<seq>`, data the participant id) whose holder runs `takeLeadership`.
//! [`LeaderSelector`] is the same: a mutex whose [`run`](Mutex::run) is the term
//! of office, cancelled the moment leadership is lost.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use crate::client::{IntoClient, Op, OpResult, Stat, ZkClient};
use crate::error::{Error, LostReason};
use crate::fence::FencingToken;
use crate::guard::LockGuard;
use crate::lock::LockCore;
use crate::mutex::{Mutex, Participant};
use crate::names::checked_path;
use crate::options::{Config, ElectionOptions};
use crate::rules::Kind;

/// Leadership won through a [`LeaderLatch`] or a [`LeaderSelector`]: the participant leads
/// until it releases (or drops) this, or until [`lost`](Self::lost) fires.
///
/// A leader's decisions carry its [`fencing_token`](Self::fencing_token) (the latch node's
/// czxid, larger than every earlier leader's), and its writes to ZooKeeper can be
/// [`fenced`](Self::fenced): applied only while it still leads. Unlike a lock's
/// [`LockGuard`] there is no reentrancy and no read-lock downgrade: an election has neither.
///
/// ```no_run
/// # async fn f(latch: zooraft_recipes::LeaderLatch) -> Result<(), zooraft_recipes::Error> {
/// let leadership = latch.await_leadership().await?;
/// println!("leading with token {}", leadership.fencing_token());
/// leadership.fenced_set_data("/config/leader", latch.id().as_bytes(), -1).await?;
/// leadership.release().await?; // steps down
/// # Ok(()) }
/// ```
///
/// Leadership is not reentrant (no second guard on the same term):
///
/// ```compile_fail,E0599
/// # fn f(leadership: zooraft_recipes::Leadership) {
/// let _second = leadership.reenter();
/// # }
/// ```
#[derive(Debug)]
#[must_use = "dropping the leadership steps down (in the background)"]
pub struct Leadership(LockGuard);

impl Leadership {
    /// The leader's fencing token: the latch node's czxid, larger than every earlier
    /// leader's. Send it with every decision to a resource that keeps a [`Fence`](crate::Fence).
    pub fn fencing_token(&self) -> FencingToken {
        self.0.fencing_token()
    }

    /// The full path of our latch node.
    pub fn node_path(&self) -> &str {
        self.0.node_path()
    }

    /// Completes when the leadership can no longer be trusted (see [`LockGuard::lost`]).
    pub async fn lost(&self) -> LostReason {
        self.0.lost().await
    }

    /// Why the leadership was lost, if it was.
    pub fn lost_reason(&self) -> Option<LostReason> {
        self.0.lost_reason()
    }

    /// Whether this participant still leads, as far as the client knows.
    pub fn is_valid(&self) -> bool {
        self.0.is_valid()
    }

    /// `ops` applied only while we lead (see [`LockGuard::fenced`]).
    pub async fn fenced(&self, ops: Vec<Op>) -> Result<Vec<OpResult>, Error> {
        self.0.fenced(ops).await
    }

    /// A `setData` applied only while we lead (see [`LockGuard::fenced_set_data`]).
    pub async fn fenced_set_data(
        &self,
        path: &str,
        data: &[u8],
        version: i32,
    ) -> Result<Stat, Error> {
        self.0.fenced_set_data(path, data, version).await
    }

    /// Steps down: deletes the latch node (see [`LockGuard::release`]).
    pub async fn release(self) -> Result<(), Error> {
        self.0.release().await
    }
}

/// A participant in an election compatible with Curator's `LeaderLatch` on the same path.
///
/// While [`await_leadership`](Self::await_leadership) runs, the participant has a node in
/// the queue; it leads when its node is first, and gives up leadership (its node is deleted)
/// when the [`Leadership`] is released or dropped.
///
/// ```no_run
/// use std::time::Duration;
/// use zooraft_recipes::{LeaderLatch, ZookeeperClient};
///
/// #[tokio::main]
/// async fn main() -> Result<(), zooraft_recipes::Error> {
///     let client = ZookeeperClient::connect("127.0.0.1:2181", Duration::from_secs(10)).await?;
///     let latch = LeaderLatch::new(client.clone(), "/election/billing", "rust-1");
///     let leadership = latch.await_leadership().await?;
///     println!("leading with token {}", leadership.fencing_token());
///     let reason = leadership.lost().await; // lead until this fires
///     eprintln!("no longer leader: {reason}");
///     Ok(())
/// }
/// ```
#[derive(Debug, Clone)]
pub struct LeaderLatch {
    mutex: Mutex,
    id: String,
}

impl LeaderLatch {
    /// A participant with id `id` (stored in its latch node, as Curator does) in the
    /// election at `path`.
    ///
    /// ```no_run
    /// # fn f(client: zooraft_recipes::ZookeeperClient) {
    /// let latch = zooraft_recipes::LeaderLatch::new(client, "/election/billing", "rust-1");
    /// # }
    /// ```
    pub fn new(client: impl IntoClient, path: &str, id: &str) -> LeaderLatch {
        let client = client.into_client();
        let config = Config::participant(id);
        LeaderLatch::build(client, path.to_string(), id, config)
    }

    /// Like [`new`](Self::new), made with `options`: fails before anything is sent on an
    /// invalid path or an option out of range.
    ///
    /// ```no_run
    /// # fn f(client: zooraft_recipes::ZookeeperClient) -> Result<(), zooraft_recipes::Error> {
    /// use zooraft_recipes::{ElectionOptions, LeaderLatch};
    /// let options = ElectionOptions::default().suspend_fraction(0.3);
    /// let latch = LeaderLatch::with_options(client, "/election/billing", "rust-1", options)?;
    /// # Ok(()) }
    /// ```
    pub fn with_options(
        client: impl IntoClient,
        path: &str,
        id: &str,
        options: ElectionOptions,
    ) -> Result<LeaderLatch, Error> {
        let client = client.into_client();
        let config = options.config(id)?;
        Ok(LeaderLatch::build(client, checked_path(path)?, id, config))
    }

    fn build(client: Arc<dyn ZkClient>, path: String, id: &str, config: Config) -> LeaderLatch {
        LeaderLatch {
            mutex: Mutex {
                core: Arc::new(LockCore::new(client, path, Kind::Latch, config, None)),
            },
            id: id.to_string(),
        }
    }

    /// This participant's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Joins the election and waits until this participant leads. Errors as
    /// [`Mutex::acquire`].
    ///
    /// ```no_run
    /// # async fn f(latch: zooraft_recipes::LeaderLatch) -> Result<(), zooraft_recipes::Error> {
    /// let leadership = latch.await_leadership().await?;
    /// leadership.release().await?; // steps down
    /// # Ok(()) }
    /// ```
    pub async fn await_leadership(&self) -> Result<Leadership, Error> {
        self.mutex.acquire().await.map(Leadership)
    }

    /// Like [`await_leadership`](Self::await_leadership), for at most `timeout`: `Ok(None)`
    /// when another participant still leads (and our node is gone again).
    ///
    /// ```no_run
    /// # async fn f(latch: zooraft_recipes::LeaderLatch) -> Result<(), zooraft_recipes::Error> {
    /// if let Some(l) = latch.await_leadership_timeout(std::time::Duration::from_secs(5)).await? {
    ///     l.release().await?;
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn await_leadership_timeout(
        &self,
        timeout: Duration,
    ) -> Result<Option<Leadership>, Error> {
        Ok(self.mutex.acquire_timeout(timeout).await?.map(Leadership))
    }

    /// Every participant in election order (Curator's `getParticipants`); a participant's id
    /// is its node's [`data`](Participant::data).
    ///
    /// ```no_run
    /// # async fn f(latch: zooraft_recipes::LeaderLatch) -> Result<(), zooraft_recipes::Error> {
    /// for p in latch.participants().await? {
    ///     println!("{} {}", String::from_utf8_lossy(&p.data), p.holder);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn participants(&self) -> Result<Vec<Participant>, Error> {
        self.mutex.participants().await
    }

    /// The leader, if there is one (Curator's `getLeader`).
    ///
    /// ```no_run
    /// # async fn f(latch: zooraft_recipes::LeaderLatch) -> Result<(), zooraft_recipes::Error> {
    /// if let Some(leader) = latch.leader().await? {
    ///     println!("{} leads", String::from_utf8_lossy(&leader.data));
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn leader(&self) -> Result<Option<Participant>, Error> {
        Ok(self.participants().await?.into_iter().find(|p| p.holder))
    }
}

/// A participant in an election compatible with Curator's `LeaderSelector` on the same path.
///
/// ```no_run
/// use std::time::Duration;
/// use zooraft_recipes::{LeaderSelector, ZookeeperClient};
///
/// #[tokio::main]
/// async fn main() -> Result<(), zooraft_recipes::Error> {
///     let client = ZookeeperClient::connect("127.0.0.1:2181", Duration::from_secs(10)).await?;
///     let selector = LeaderSelector::new(client.clone(), "/election/indexer", "rust-1");
///     loop {
///         // One term of office; requeue after it (Curator's autoRequeue).
///         let result = selector
///             .lead(|leadership| async move {
///                 println!("leading with token {}", leadership.fencing_token());
///                 tokio::time::sleep(Duration::from_secs(30)).await;
///             })
///             .await;
///         if let Err(e) = result {
///             eprintln!("term ended: {e}");
///         }
///     }
/// }
/// ```
#[derive(Debug, Clone)]
pub struct LeaderSelector {
    mutex: Mutex,
}

impl LeaderSelector {
    /// A participant with id `id` (stored in its node) in the election at `path`.
    ///
    /// ```no_run
    /// # fn f(client: zooraft_recipes::ZookeeperClient) {
    /// let selector = zooraft_recipes::LeaderSelector::new(client, "/election/indexer", "rust-1");
    /// # }
    /// ```
    pub fn new(client: impl IntoClient, path: &str, id: &str) -> LeaderSelector {
        let client = client.into_client();
        let config = Config::participant(id);
        LeaderSelector::build(client, path.to_string(), config)
    }

    /// Like [`new`](Self::new), made with `options`: fails before anything is sent on an
    /// invalid path or an option out of range.
    ///
    /// ```no_run
    /// # fn f(client: zooraft_recipes::ZookeeperClient) -> Result<(), zooraft_recipes::Error> {
    /// use zooraft_recipes::{ElectionOptions, LeaderSelector};
    /// let selector = LeaderSelector::with_options(client, "/election/indexer", "rust-1", ElectionOptions::default())?;
    /// # Ok(()) }
    /// ```
    pub fn with_options(
        client: impl IntoClient,
        path: &str,
        id: &str,
        options: ElectionOptions,
    ) -> Result<LeaderSelector, Error> {
        let client = client.into_client();
        let config = options.config(id)?;
        Ok(LeaderSelector::build(client, checked_path(path)?, config))
    }

    /// A selector is a mutex on the election path whose nodes hold the participant's id.
    fn build(client: Arc<dyn ZkClient>, path: String, config: Config) -> LeaderSelector {
        LeaderSelector {
            mutex: Mutex {
                core: Arc::new(LockCore::new(client, path, Kind::Mutex, config, None)),
            },
        }
    }

    /// Waits for leadership, then runs `term` as the leader (Curator's `takeLeadership`) and
    /// steps down when it returns. If leadership is lost first, `term` is cancelled and the
    /// result is [`Error::Lost`]. See [`Mutex::run`].
    ///
    /// ```no_run
    /// # async fn f(selector: zooraft_recipes::LeaderSelector) -> Result<(), zooraft_recipes::Error> {
    /// let token = selector.lead(|l| async move { l.fencing_token() }).await?;
    /// # Ok(()) }
    /// ```
    pub async fn lead<F, Fut, T>(&self, term: F) -> Result<T, Error>
    where
        F: FnOnce(Leadership) -> Fut,
        Fut: Future<Output = T>,
    {
        self.mutex.run(|guard| term(Leadership(guard))).await
    }

    /// Every participant in election order; a participant's id is its node's data.
    ///
    /// ```no_run
    /// # async fn f(selector: zooraft_recipes::LeaderSelector) -> Result<(), zooraft_recipes::Error> {
    /// let n = selector.participants().await?.len();
    /// # Ok(()) }
    /// ```
    pub async fn participants(&self) -> Result<Vec<Participant>, Error> {
        self.mutex.participants().await
    }
}
