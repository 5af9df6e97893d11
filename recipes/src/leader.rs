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
//! [`LeaderSelector`] is the same: a mutex whose [`run`](InterProcessMutex::run) is the term
//! of office, cancelled the moment leadership is lost.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use crate::client::ZkClient;
use crate::error::Error;
use crate::guard::LockGuard;
use crate::lock::{Config, Kind, LockCore};
use crate::mutex::{InterProcessMutex, Participant};

/// Leadership won through a [`LeaderLatch`]: the participant leads until it releases (or
/// drops) this, or until [`lost`](LockGuard::lost) fires. The fencing token is the latch
/// node's czxid.
pub type Leadership = LockGuard;

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
    mutex: InterProcessMutex,
    id: String,
}

impl LeaderLatch {
    /// A participant with id `id` (stored in its latch node, as Curator does) in the
    /// election at `path`.
    ///
    /// ```no_run
    /// # fn f(client: std::sync::Arc<zooraft_recipes::ZookeeperClient>) {
    /// let latch = zooraft_recipes::LeaderLatch::new(client, "/election/billing", "rust-1");
    /// # }
    /// ```
    pub fn new(client: Arc<dyn ZkClient>, path: &str, id: &str) -> LeaderLatch {
        let config = Config {
            node_data: Some(id.as_bytes().to_vec()),
            ..Config::default()
        };
        LeaderLatch {
            mutex: InterProcessMutex {
                core: Arc::new(LockCore::new(
                    client,
                    path.to_string(),
                    Kind::Latch,
                    config,
                    None,
                )),
            },
            id: id.to_string(),
        }
    }

    /// This participant's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Joins the election and waits until this participant leads. Errors as
    /// [`InterProcessMutex::acquire`].
    ///
    /// ```no_run
    /// # async fn f(latch: zooraft_recipes::LeaderLatch) -> Result<(), zooraft_recipes::Error> {
    /// let leadership = latch.await_leadership().await?;
    /// leadership.release().await?; // steps down
    /// # Ok(()) }
    /// ```
    pub async fn await_leadership(&self) -> Result<Leadership, Error> {
        self.mutex.acquire().await
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
        self.mutex.acquire_timeout(timeout).await
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
    mutex: InterProcessMutex,
}

impl LeaderSelector {
    /// A participant with id `id` (stored in its node) in the election at `path`.
    ///
    /// ```no_run
    /// # fn f(client: std::sync::Arc<zooraft_recipes::ZookeeperClient>) {
    /// let selector = zooraft_recipes::LeaderSelector::new(client, "/election/indexer", "rust-1");
    /// # }
    /// ```
    pub fn new(client: Arc<dyn ZkClient>, path: &str, id: &str) -> LeaderSelector {
        LeaderSelector {
            mutex: InterProcessMutex::new(client, path).with_node_data(id.as_bytes()),
        }
    }

    /// Waits for leadership, then runs `term` as the leader (Curator's `takeLeadership`) and
    /// steps down when it returns. If leadership is lost first, `term` is cancelled and the
    /// result is [`Error::Lost`]. See [`InterProcessMutex::run`].
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
        self.mutex.run(term).await
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
