//! [`InterProcessReadWriteLock`]: Curator's read-write lock (`__READ__` / `__WRIT__` nodes
//! under one path, ordered by sequence).
//!
//! A writer holds when its node is first; a reader holds when no writer's node is before its
//! own. Readers arriving after a waiting writer queue behind it, so writers are not starved.
//! The holder of the write lock may also take the read lock, explicitly through its guard
//! ([`LockGuard::acquire_read`](crate::LockGuard::acquire_read): the read node carries the
//! writer's sequence, so it keeps the writer's place after the write lock is released: a
//! downgrade); a reader can never upgrade to the write lock (it would wait for itself).
//! Each half of a handle admits one holder at a time, like a mutex handle: tasks sharing the
//! handle take turns; separate handles share the read lock.

use std::sync::Arc;

use crate::client::{Acl, ZkClient};
use crate::error::Error;
use crate::lock::{check_suspend_fraction, Config, Kind, LockCore};
use crate::metrics::LockMetrics;
use crate::mutex::InterProcessMutex;

/// A read-write lock across processes, compatible with Curator's
/// `InterProcessReadWriteLock` on the same path.
///
/// ```no_run
/// use std::time::Duration;
/// use zooraft_recipes::{InterProcessReadWriteLock, ZookeeperClient};
///
/// #[tokio::main]
/// async fn main() -> Result<(), zooraft_recipes::Error> {
///     let client = ZookeeperClient::connect("127.0.0.1:2181", Duration::from_secs(10)).await?;
///     let rw = InterProcessReadWriteLock::new(client.clone(), "/locks/catalog");
///     let write = rw.write_lock().acquire().await?;
///     let read = write.acquire_read().await?; // the writer's read lock, in its place
///     write.release().await?; // downgrade: still reading
///     read.release().await?;
///     Ok(())
/// }
/// ```
#[derive(Debug, Clone)]
pub struct InterProcessReadWriteLock {
    read: InterProcessMutex,
    write: InterProcessMutex,
}

impl InterProcessReadWriteLock {
    /// A handle on the read-write lock at `path`.
    ///
    /// ```no_run
    /// # async fn f(client: std::sync::Arc<zooraft_recipes::ZookeeperClient>) {
    /// let rw = zooraft_recipes::InterProcessReadWriteLock::new(client, "/locks/catalog");
    /// # }
    /// ```
    pub fn new(client: Arc<dyn ZkClient>, path: &str) -> InterProcessReadWriteLock {
        Self::with_label(client, path, "")
    }

    /// Like [`new`](Self::new), with a label stored in the lock nodes for operators.
    ///
    /// ```no_run
    /// # async fn f(client: std::sync::Arc<zooraft_recipes::ZookeeperClient>) {
    /// let rw = zooraft_recipes::InterProcessReadWriteLock::with_label(client, "/locks/catalog", "indexer");
    /// # }
    /// ```
    pub fn with_label(
        client: Arc<dyn ZkClient>,
        path: &str,
        label: &str,
    ) -> InterProcessReadWriteLock {
        let config = Config {
            owner: crate::names::Owner::current(label),
            ..Config::default()
        };
        Self::build(client, path, config)
    }

    fn build(client: Arc<dyn ZkClient>, path: &str, config: Config) -> InterProcessReadWriteLock {
        let read = Arc::new(LockCore::new(
            client.clone(),
            path.to_string(),
            Kind::Read,
            config.clone(),
            None,
        ));
        let write = Arc::new(LockCore::new(
            client,
            path.to_string(),
            Kind::Write,
            config,
            Some(read.clone()),
        ));
        InterProcessReadWriteLock {
            read: InterProcessMutex { core: read },
            write: InterProcessMutex { core: write },
        }
    }

    fn reconfigured(self, f: impl FnOnce(&mut Config)) -> InterProcessReadWriteLock {
        let core = &self.write.core;
        let mut config = core.config.clone();
        f(&mut config);
        Self::build(core.client.clone(), &core.path, config)
    }

    /// Sets the ACL of the lock nodes and of the containers above them (see
    /// [`InterProcessMutex::with_acl`]). Call it before acquiring: it makes a new handle.
    ///
    /// ```no_run
    /// # async fn f(rw: zooraft_recipes::InterProcessReadWriteLock, acl: Vec<zooraft_recipes::Acl>) {
    /// let rw = rw.with_acl(acl);
    /// # }
    /// ```
    pub fn with_acl(self, acl: Vec<Acl>) -> InterProcessReadWriteLock {
        self.reconfigured(|c| c.acl = acl)
    }

    /// Stores `data` in the lock nodes instead of the owner line (Curator's
    /// `lockNodeBytes`). Call it before acquiring: it makes a new handle.
    ///
    /// ```no_run
    /// # async fn f(rw: zooraft_recipes::InterProcessReadWriteLock) {
    /// let rw = rw.with_node_data(b"10.0.0.7");
    /// # }
    /// ```
    pub fn with_node_data(self, data: &[u8]) -> InterProcessReadWriteLock {
        let data = data.to_vec();
        self.reconfigured(|c| c.node_data = Some(data))
    }

    /// Reports both locks' events to `metrics` (see [`LockMetrics`]).
    ///
    /// ```no_run
    /// # async fn f(rw: zooraft_recipes::InterProcessReadWriteLock, m: std::sync::Arc<dyn zooraft_recipes::LockMetrics>) {
    /// let rw = rw.with_metrics(m);
    /// # }
    /// ```
    pub fn with_metrics(self, metrics: Arc<dyn LockMetrics>) -> InterProcessReadWriteLock {
        self.reconfigured(|c| c.metrics = Some(metrics))
    }

    /// Sets the suspend fraction of both locks (see
    /// [`InterProcessMutex::with_suspend_fraction`]).
    ///
    /// ```no_run
    /// # async fn f(rw: zooraft_recipes::InterProcessReadWriteLock) -> Result<(), zooraft_recipes::Error> {
    /// let rw = rw.with_suspend_fraction(0.3)?;
    /// # Ok(()) }
    /// ```
    pub fn with_suspend_fraction(self, fraction: f64) -> Result<InterProcessReadWriteLock, Error> {
        let fraction = check_suspend_fraction(fraction)?;
        Ok(self.reconfigured(|c| c.suspend_fraction = fraction))
    }

    /// The shared lock: many readers hold it at once, no writer meanwhile.
    ///
    /// ```no_run
    /// # async fn f(rw: zooraft_recipes::InterProcessReadWriteLock) -> Result<(), zooraft_recipes::Error> {
    /// let guard = rw.read_lock().acquire().await?;
    /// # Ok(()) }
    /// ```
    pub fn read_lock(&self) -> &InterProcessMutex {
        &self.read
    }

    /// The exclusive lock: one writer, no reader (except the writer's own, see
    /// [`LockGuard::acquire_read`](crate::LockGuard::acquire_read)).
    ///
    /// ```no_run
    /// # async fn f(rw: zooraft_recipes::InterProcessReadWriteLock) -> Result<(), zooraft_recipes::Error> {
    /// let guard = rw.write_lock().acquire().await?;
    /// # Ok(()) }
    /// ```
    pub fn write_lock(&self) -> &InterProcessMutex {
        &self.write
    }
}
