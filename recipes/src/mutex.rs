//! [`Mutex`], the lock handle (its options, its acquires, `run`), and the
//! participants listing every recipe shares. The held lock is a [`LockGuard`].

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::client::{ErrorCode, IntoClient, ZkClient};
use crate::error::Error;
use crate::fence::FencingToken;
use crate::guard::LockGuard;
use crate::holding::Holding;
use crate::lock::LockCore;
use crate::names::{checked_path, join, sorted_contenders, Owner};
use crate::options::{Config, LockOptions};
use crate::rules::{decide, is_write_node, Decision, Kind};

/// A fair, herd-free lock across processes, compatible with Curator's `InterProcessMutex` on
/// the same path.
///
/// Contenders queue in the order their lock nodes were created; each waits for the node just
/// before its own, so a release wakes exactly one waiter. The holder gets a [`LockGuard`]
/// with a [`FencingToken`] and a [`lost`](LockGuard::lost) signal.
///
/// # Tasks, clones and reentrancy
///
/// A handle, its clones, and every task sharing it exclude each other exactly like separate
/// processes: an acquire through a handle whose lock is held by another task waits for that
/// task to release it (locally, without a second lock node). Cloning the handle into many
/// tasks is therefore safe. Reentrancy is explicit: the holder calls
/// [`LockGuard::reenter`] to get a second guard on the same acquisition (no request is sent);
/// the node is deleted when the last guard is released. Acquiring again through the handle
/// from the task that holds it waits for itself, like `std::sync::Mutex`.
///
/// ```no_run
/// use std::time::Duration;
/// use zooraft_recipes::{Mutex, ZookeeperClient};
///
/// #[tokio::main]
/// async fn main() -> Result<(), zooraft_recipes::Error> {
///     let client = ZookeeperClient::connect("127.0.0.1:2181", Duration::from_secs(10)).await?;
///     let mutex = Mutex::new(client.clone(), "/locks/orders");
///     let total = mutex
///         .run(|guard| async move {
///             // Cancelled (dropped) the moment the lock is lost.
///             guard.fenced_set_data("/orders/next", b"43", -1).await
///         })
///         .await??;
///     println!("{total:?}");
///     Ok(())
/// }
/// ```
#[doc(alias = "InterProcessMutex")]
#[derive(Clone)]
pub struct Mutex {
    pub(crate) core: Arc<LockCore>,
}

impl std::fmt::Debug for Mutex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mutex")
            .field("path", &self.core.path)
            .field("kind", &self.core.kind)
            .finish()
    }
}

impl Mutex {
    /// A handle on the lock at `path` (created, with its parents, as containers when first
    /// needed). Nothing is sent until the first acquire.
    ///
    /// ```no_run
    /// # async fn f(client: zooraft_recipes::ZookeeperClient) {
    /// let mutex = zooraft_recipes::Mutex::new(client, "/locks/orders");
    /// # }
    /// ```
    pub fn new(client: impl IntoClient, path: &str) -> Mutex {
        let client = client.into_client();
        Mutex {
            core: Arc::new(LockCore::new(
                client,
                path.to_string(),
                Kind::Mutex,
                Config::default(),
                None,
            )),
        }
    }

    /// A handle on the lock at `path` made with `options`: fails with
    /// [`Error::InvalidPath`] or [`Error::InvalidOption`] before anything is sent.
    ///
    /// ```no_run
    /// # async fn f(client: zooraft_recipes::ZookeeperClient) -> Result<(), zooraft_recipes::Error> {
    /// use zooraft_recipes::{LockOptions, Mutex};
    /// let mutex = Mutex::with_options(client, "/locks/orders", LockOptions::default().label("billing"))?;
    /// # Ok(()) }
    /// ```
    pub fn with_options(
        client: impl IntoClient,
        path: &str,
        options: LockOptions,
    ) -> Result<Mutex, Error> {
        let client = client.into_client();
        let config = options.config()?;
        Ok(Mutex {
            core: Arc::new(LockCore::new(
                client,
                checked_path(path)?,
                Kind::Mutex,
                config,
                None,
            )),
        })
    }

    /// The lock path.
    pub fn path(&self) -> &str {
        &self.core.path
    }

    fn guard(&self, holding: Arc<Holding>) -> LockGuard {
        LockGuard::new(self.core.clone(), holding)
    }

    /// Waits until the lock is ours. Connection problems are waited out, and a waiter whose
    /// node vanished queues again. Fails with [`Error::SessionExpired`] when the session
    /// expires meanwhile, [`Error::Closed`] when the client is closed, or a ZooKeeper error
    /// that retrying cannot cure.
    ///
    /// ```no_run
    /// # async fn f(mutex: zooraft_recipes::Mutex) -> Result<(), zooraft_recipes::Error> {
    /// let guard = mutex.acquire().await?;
    /// # Ok(()) }
    /// ```
    pub async fn acquire(&self) -> Result<LockGuard, Error> {
        match self.core.acquire(None, true, None).await? {
            Some(h) => Ok(self.guard(h)),
            None => Err(Error::Closed),
        }
    }

    /// Takes the lock if no one else holds it, without waiting for a holder: `None` when it
    /// is taken (our node is deleted again before this returns). Fails with
    /// [`Error::Disconnected`] rather than answering `None` when the connection is down (at
    /// the call, or for a whole session timeout during it).
    ///
    /// ```no_run
    /// # async fn f(mutex: zooraft_recipes::Mutex) -> Result<(), zooraft_recipes::Error> {
    /// if let Some(guard) = mutex.try_acquire().await? {
    ///     guard.release().await?;
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn try_acquire(&self) -> Result<Option<LockGuard>, Error> {
        Ok(self
            .core
            .acquire(None, false, None)
            .await?
            .map(|h| self.guard(h)))
    }

    /// Waits at most `timeout` (measured from the call, node creation included), and then no
    /// node of ours is left behind. `Ok(None)` means busy: connected, with another holder
    /// until the deadline. The deadline passing while disconnected is
    /// [`Error::Disconnected`]; an expired session is [`Error::SessionExpired`]; a closed
    /// client [`Error::Closed`].
    ///
    /// ```no_run
    /// # async fn f(mutex: zooraft_recipes::Mutex) -> Result<(), zooraft_recipes::Error> {
    /// match mutex.acquire_timeout(std::time::Duration::from_secs(2)).await {
    ///     Ok(Some(guard)) => guard.release().await?,
    ///     Ok(None) => println!("busy"),
    ///     Err(zooraft_recipes::Error::Disconnected) => println!("cannot tell: the connection is down"),
    ///     Err(e) => return Err(e),
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn acquire_timeout(&self, timeout: Duration) -> Result<Option<LockGuard>, Error> {
        let deadline = Instant::now() + timeout;
        Ok(self
            .core
            .acquire(Some(deadline), true, None)
            .await?
            .map(|h| self.guard(h)))
    }

    /// Acquires, runs `f` with the guard while the lock is held, and releases. If the lock is
    /// lost first, `f`'s future is dropped at once (cancelled at its current `.await`) and
    /// the result is [`Error::Lost`]; otherwise it is what `f` returned. The guard `f` gets
    /// is a [`reenter`](LockGuard::reenter)ed one: if `f` keeps it beyond its future, the
    /// lock stays held until that guard is released too.
    ///
    /// This is the safe way to use a lock in async Rust: no code of the critical section runs
    /// after the lock is known lost.
    ///
    /// ```no_run
    /// # async fn f(mutex: zooraft_recipes::Mutex) -> Result<(), zooraft_recipes::Error> {
    /// let token = mutex.run(|guard| async move { guard.fencing_token() }).await?;
    /// # Ok(()) }
    /// ```
    pub async fn run<F, Fut, T>(&self, f: F) -> Result<T, Error>
    where
        F: FnOnce(LockGuard) -> Fut,
        Fut: std::future::Future<Output = T>,
    {
        let guard = self.acquire().await?;
        let inner = guard.reenter();
        let result = tokio::select! {
            biased;
            reason = guard.lost() => Err(Error::Lost(reason)),
            out = f(inner) => Ok(out),
        };
        match (result, guard.release().await) {
            (Ok(out), Ok(())) => Ok(out),
            (Ok(_), Err(e)) => Err(e),
            // Once lost, the release cannot fail in a way that matters more than the loss.
            (Err(e), _) => Err(e),
        }
    }

    /// Whether this handle (or a clone of it) holds the lock now.
    ///
    /// ```no_run
    /// # async fn f(mutex: zooraft_recipes::Mutex) -> Result<(), zooraft_recipes::Error> {
    /// let guard = mutex.acquire().await?;
    /// assert!(mutex.is_held_by_this_handle());
    /// # Ok(()) }
    /// ```
    pub fn is_held_by_this_handle(&self) -> bool {
        self.core.held().is_some()
    }

    /// The holder and the queue, in lock order, for operators.
    ///
    /// ```no_run
    /// # async fn f(mutex: zooraft_recipes::Mutex) -> Result<(), zooraft_recipes::Error> {
    /// for p in mutex.participants().await? {
    ///     let who = p.owner.map(|o| format!("{}:{} {}", o.host, o.pid, o.label));
    ///     println!("{} {} {:?}", if p.holder { "holds" } else { "waits" }, p.node, who);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn participants(&self) -> Result<Vec<Participant>, Error> {
        participants(&self.core.client, &self.core.path, self.core.kind).await
    }
}

/// One contender for a lock, as [`Mutex::participants`] lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Participant {
    /// The lock node's name.
    pub node: String,
    /// Its sequence number (the lock order).
    pub sequence: i64,
    /// Whether it holds the lock (for a read lock, every reader before the first writer; for
    /// a leader latch, the leader; for a semaphore, every lease node).
    pub holder: bool,
    /// Whether it is a writer (read-write lock) or a mutex node (always true for a mutex).
    pub exclusive: bool,
    /// Who created it, if it carries our owner data.
    pub owner: Option<Owner>,
    /// The node's raw data (Curator stores the client's IP address, kazoo its identifier).
    pub data: Vec<u8>,
    /// The fencing token the node gives (or gave) its holder.
    pub token: FencingToken,
}

pub(crate) async fn participants(
    client: &Arc<dyn ZkClient>,
    path: &str,
    kind: Kind,
) -> Result<Vec<Participant>, Error> {
    let children = match client.get_children(path).await {
        Ok(c) => c,
        Err(ErrorCode::NoNode) => return Ok(Vec::new()),
        Err(e) => return Err(e.into()),
    };
    let sorted = sorted_contenders(children, kind.markers());
    let mut out = Vec::with_capacity(sorted.len());
    for (idx, c) in sorted.iter().enumerate() {
        let (data, stat) = match client.get_data(&join(path, &c.name)).await {
            Ok(d) => d,
            Err(ErrorCode::NoNode) => continue,
            Err(e) => return Err(e.into()),
        };
        let exclusive = match kind {
            Kind::Mutex | Kind::Latch => true,
            Kind::Lease => false,
            Kind::Read | Kind::Write => is_write_node(&c.name),
        };
        let node_kind = match kind {
            Kind::Mutex | Kind::Latch | Kind::Lease => kind,
            _ if exclusive => Kind::Write,
            _ => Kind::Read,
        };
        out.push(Participant {
            node: c.name.clone(),
            sequence: c.sequence,
            holder: decide(node_kind, &sorted, idx) == Decision::Granted,
            exclusive,
            owner: Owner::parse(&data),
            data,
            token: FencingToken::from_czxid(stat.czxid),
        });
    }
    Ok(out)
}
