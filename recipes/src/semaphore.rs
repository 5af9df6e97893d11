//! A counting semaphore compatible with Curator's `InterProcessSemaphoreV2`.
//!
//! Curator's layout under the semaphore path: `locks/`, a `Mutex` that
//! serialises acquirers, and `leases/`, one protected ephemeral-sequential node
//! `_c_<uuid>-lease-<seq>` per lease (its data the holder's node data). An acquirer takes the
//! mutex, creates its lease node, and waits (watching `leases/`) until `leases/` has at most
//! `max_leases` children; then it releases the mutex and holds the lease until it deletes the
//! node. `max_leases` is fixed, or read from a `SharedCount` node (a 4-byte big-endian int)
//! every time it is needed.
//!
//! Here the mutex is our [`Mutex`] and each lease runs the lock core with a
//! counting rule: a lease is a [`LockGuard`] with protection, guaranteed deletes, a
//! `lost()` signal and the lease node's czxid as token (for logs: holders of a semaphore
//! are concurrent, so lease tokens are not for a [`Fence`](crate::Fence)).
//!
//! kazoo's `Semaphore` uses another layout (its lock at `<path>-__lock__`, leases named by
//! uuid directly under the path, the maximum as decimal text in the path's data): the two do
//! not agree, so a kazoo semaphore and this one on the same path do not count each other.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::client::{IntoClient, ZkClient};
use crate::error::{Error, LostReason};
use crate::guard::LockGuard;
use crate::lock::LockCore;
use crate::mutex::{Mutex, Participant};
use crate::names::{checked_path, join};
pub use crate::options::MaxLeases;
use crate::options::{Config, LockOptions};
use crate::rules::Kind;

/// A lease of an [`Semaphore`]: held until released or dropped (dropping
/// releases in the background).
///
/// Several leases are held at once, so a lease has no fencing token (its node's czxid does
/// not exclude anyone) and no fenced writes: those belong to exclusive locks and leaders.
///
/// ```no_run
/// # async fn f(sem: zooraft_recipes::Semaphore) -> Result<(), zooraft_recipes::Error> {
/// let lease = sem.acquire().await?;
/// tokio::select! {
///     reason = lease.lost() => eprintln!("lease lost: {reason}"),
///     _ = tokio::time::sleep(std::time::Duration::from_millis(50)) => {}
/// }
/// lease.release().await?;
/// # Ok(()) }
/// ```
///
/// A lease is not a lock guard: it has no token to fence with.
///
/// ```compile_fail,E0599
/// # fn f(lease: zooraft_recipes::Lease) {
/// let _ = lease.fencing_token();
/// # }
/// ```
#[derive(Debug)]
#[must_use = "dropping a lease releases it (in the background)"]
pub struct Lease(LockGuard);

impl Lease {
    /// The full path of our lease node.
    pub fn node_path(&self) -> &str {
        self.0.node_path()
    }

    /// Completes when the lease can no longer be trusted (see [`LockGuard::lost`]).
    pub async fn lost(&self) -> LostReason {
        self.0.lost().await
    }

    /// Why the lease was lost, if it was.
    pub fn lost_reason(&self) -> Option<LostReason> {
        self.0.lost_reason()
    }

    /// Whether the lease is still held, as far as the client knows.
    pub fn is_valid(&self) -> bool {
        self.0.is_valid()
    }

    /// Gives the lease back: deletes its node (see [`LockGuard::release`]).
    pub async fn release(self) -> Result<(), Error> {
        self.0.release().await
    }
}

/// A semaphore across processes, compatible with Curator's `InterProcessSemaphoreV2` on the
/// same path: at most `max_leases` leases are held at once, by Rust and Java holders alike.
///
/// ```no_run
/// use std::time::Duration;
/// use zooraft_recipes::{Semaphore, ZookeeperClient};
///
/// #[tokio::main]
/// async fn main() -> Result<(), zooraft_recipes::Error> {
///     let client = ZookeeperClient::connect("127.0.0.1:2181", Duration::from_secs(10)).await?;
///     let sem = Semaphore::new(client.clone(), "/semaphores/exports", 3);
///     let lease = sem.acquire().await?;
///     // ... at most two others hold a lease now ...
///     lease.release().await?;
///     Ok(())
/// }
/// ```
#[doc(alias = "InterProcessSemaphoreV2")]
#[derive(Clone)]
pub struct Semaphore {
    client: Arc<dyn ZkClient>,
    leases_path: String,
    lock: Mutex,
    config: Config,
}

impl std::fmt::Debug for Semaphore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Semaphore")
            .field("leases", &self.leases_path)
            .field("max_leases", &self.config.max_leases)
            .finish()
    }
}

impl Semaphore {
    /// A semaphore at `path` granting at most `max_leases` leases.
    ///
    /// ```no_run
    /// # fn f(client: zooraft_recipes::ZookeeperClient) {
    /// let sem = zooraft_recipes::Semaphore::new(client, "/semaphores/exports", 3);
    /// # }
    /// ```
    pub fn new(client: impl IntoClient, path: &str, max_leases: usize) -> Semaphore {
        let client = client.into_client();
        Self::with(client, path, MaxLeases::Fixed(max_leases))
    }

    /// A semaphore at `path` whose maximum is the number in the node `count_path` (Curator's
    /// `SharedCount`: a 4-byte big-endian int), read again whenever an acquirer waits.
    ///
    /// ```no_run
    /// # fn f(client: zooraft_recipes::ZookeeperClient) {
    /// let sem = zooraft_recipes::Semaphore::with_shared_count(client, "/semaphores/exports", "/semaphores/exports-max");
    /// # }
    /// ```
    pub fn with_shared_count(client: impl IntoClient, path: &str, count_path: &str) -> Semaphore {
        let client = client.into_client();
        Self::with(client, path, MaxLeases::Shared(count_path.to_string()))
    }

    /// A semaphore at `path` granting `max` leases at once, made with `options` (the lease
    /// nodes hold the owner line or `node_data`, carry the ACL and report to `metrics`).
    /// Fails before anything is sent on an invalid path, a maximum of zero leases or an
    /// option out of range.
    ///
    /// ```no_run
    /// # fn f(client: zooraft_recipes::ZookeeperClient) -> Result<(), zooraft_recipes::Error> {
    /// use zooraft_recipes::{LockOptions, MaxLeases, Semaphore};
    /// let options = LockOptions::default().node_data(&b"worker-7"[..]);
    /// let sem = Semaphore::with_options(client, "/semaphores/exports", MaxLeases::Fixed(3), options)?;
    /// # Ok(()) }
    /// ```
    pub fn with_options(
        client: impl IntoClient,
        path: &str,
        max: MaxLeases,
        options: LockOptions,
    ) -> Result<Semaphore, Error> {
        let client = client.into_client();
        let path = checked_path(path)?;
        match &max {
            MaxLeases::Fixed(0) => {
                return Err(Error::InvalidOption(
                    "a semaphore needs at least one lease".into(),
                ))
            }
            MaxLeases::Shared(count) => {
                checked_path(count)?;
            }
            MaxLeases::Fixed(_) => {}
        }
        let config = options.config()?;
        // The lock that serializes acquirers is an internal detail: it shares the ACL and
        // label, and reports nothing (the leases do).
        let lock = Mutex::with_options(
            client.clone(),
            &join(&path, "locks"),
            LockOptions {
                metrics: None,
                ..options
            },
        )?;
        Ok(Semaphore {
            lock,
            leases_path: join(&path, "leases"),
            client,
            config: Config {
                max_leases: max,
                ..config
            },
        })
    }

    fn with(client: Arc<dyn ZkClient>, path: &str, max: MaxLeases) -> Semaphore {
        Semaphore {
            lock: Mutex::new(client.clone(), &join(path, "locks")),
            leases_path: join(path, "leases"),
            client,
            config: Config {
                max_leases: max,
                ..Config::default()
            },
        }
    }

    /// Waits for a lease. Errors as [`Mutex::acquire`].
    ///
    /// ```no_run
    /// # async fn f(sem: zooraft_recipes::Semaphore) -> Result<(), zooraft_recipes::Error> {
    /// let lease = sem.acquire().await?;
    /// lease.release().await?;
    /// # Ok(()) }
    /// ```
    pub async fn acquire(&self) -> Result<Lease, Error> {
        match self.acquire_until(None).await? {
            Some(lease) => Ok(lease),
            None => Err(Error::Closed),
        }
    }

    /// Waits at most `timeout` for a lease: `Ok(None)` when every lease stayed taken (and no
    /// node of ours is left). Errors as [`Mutex::acquire_timeout`].
    ///
    /// ```no_run
    /// # async fn f(sem: zooraft_recipes::Semaphore) -> Result<(), zooraft_recipes::Error> {
    /// match sem.acquire_timeout(std::time::Duration::from_secs(2)).await? {
    ///     Some(lease) => lease.release().await?,
    ///     None => println!("all leases taken"),
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn acquire_timeout(&self, timeout: Duration) -> Result<Option<Lease>, Error> {
        self.acquire_until(Some(Instant::now() + timeout)).await
    }

    async fn acquire_until(&self, deadline: Option<Instant>) -> Result<Option<Lease>, Error> {
        let lock = match deadline {
            None => self.lock.acquire().await?,
            Some(d) => match self
                .lock
                .acquire_timeout(d.saturating_duration_since(Instant::now()))
                .await?
            {
                Some(g) => g,
                None => return Ok(None),
            },
        };
        // Every acquire is its own holder: a semaphore handle may hold several leases.
        let core = Arc::new(LockCore::new(
            self.client.clone(),
            self.leases_path.clone(),
            Kind::Lease,
            self.config.clone(),
            None,
        ));
        let result = core.acquire(deadline, true, None).await;
        let released = lock.release().await;
        let lease = result?.map(|h| Lease(LockGuard::new(core, h)));
        if let Err(e) = released {
            tracing::warn!("semaphore lock release: {e}");
        }
        Ok(lease)
    }

    /// The lease nodes (Curator's `getParticipantNodes`), with their data.
    ///
    /// ```no_run
    /// # async fn f(sem: zooraft_recipes::Semaphore) -> Result<(), zooraft_recipes::Error> {
    /// let held = sem.participants().await?.len();
    /// # Ok(()) }
    /// ```
    pub async fn participants(&self) -> Result<Vec<Participant>, Error> {
        crate::mutex::participants(&self.client, &self.leases_path, Kind::Lease).await
    }
}
