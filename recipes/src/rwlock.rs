//! [`RwLock`]: Curator's read-write lock (`__READ__` / `__WRIT__` nodes
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

use crate::client::{IntoClient, ZkClient};
use crate::error::Error;
use crate::lock::LockCore;
use crate::mutex::Mutex;
use crate::names::checked_path;
use crate::options::{Config, LockOptions};
use crate::rules::Kind;

/// A read-write lock across processes, compatible with Curator's
/// `InterProcessReadWriteLock` on the same path.
///
/// ```no_run
/// use std::time::Duration;
/// use zooraft_recipes::{RwLock, ZookeeperClient};
///
/// #[tokio::main]
/// async fn main() -> Result<(), zooraft_recipes::Error> {
///     let client = ZookeeperClient::connect("127.0.0.1:2181", Duration::from_secs(10)).await?;
///     let rw = RwLock::new(client.clone(), "/locks/catalog");
///     let write = rw.write_lock().acquire().await?;
///     let read = write.acquire_read().await?; // the writer's read lock, in its place
///     write.release().await?; // downgrade: still reading
///     read.release().await?;
///     Ok(())
/// }
/// ```
#[doc(alias = "InterProcessReadWriteLock")]
#[derive(Debug, Clone)]
pub struct RwLock {
    read: Mutex,
    write: Mutex,
}

impl RwLock {
    /// A handle on the read-write lock at `path`.
    ///
    /// ```no_run
    /// # async fn f(client: zooraft_recipes::ZookeeperClient) {
    /// let rw = zooraft_recipes::RwLock::new(client, "/locks/catalog");
    /// # }
    /// ```
    pub fn new(client: impl IntoClient, path: &str) -> RwLock {
        let client = client.into_client();
        Self::build(client, path, Config::default())
    }

    /// A handle on the read-write lock at `path` made with `options` (both halves share
    /// them; see [`Mutex::with_options`]).
    ///
    /// ```no_run
    /// # fn f(client: zooraft_recipes::ZookeeperClient) -> Result<(), zooraft_recipes::Error> {
    /// use zooraft_recipes::{LockOptions, RwLock};
    /// let rw = RwLock::with_options(client, "/locks/catalog", LockOptions::default().label("indexer"))?;
    /// # Ok(()) }
    /// ```
    pub fn with_options(
        client: impl IntoClient,
        path: &str,
        options: LockOptions,
    ) -> Result<RwLock, Error> {
        let client = client.into_client();
        let config = options.config()?;
        Ok(Self::build(client, &checked_path(path)?, config))
    }

    fn build(client: Arc<dyn ZkClient>, path: &str, config: Config) -> RwLock {
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
        RwLock {
            read: Mutex { core: read },
            write: Mutex { core: write },
        }
    }

    /// The shared lock: many readers hold it at once, no writer meanwhile.
    ///
    /// ```no_run
    /// # async fn f(rw: zooraft_recipes::RwLock) -> Result<(), zooraft_recipes::Error> {
    /// let guard = rw.read_lock().acquire().await?;
    /// # Ok(()) }
    /// ```
    pub fn read_lock(&self) -> &Mutex {
        &self.read
    }

    /// The exclusive lock: one writer, no reader (except the writer's own, see
    /// [`LockGuard::acquire_read`](crate::LockGuard::acquire_read)).
    ///
    /// ```no_run
    /// # async fn f(rw: zooraft_recipes::RwLock) -> Result<(), zooraft_recipes::Error> {
    /// let guard = rw.write_lock().acquire().await?;
    /// # Ok(()) }
    /// ```
    pub fn write_lock(&self) -> &Mutex {
        &self.write
    }
}
