//! [`InterProcessReadWriteLock`]: Curator's read-write lock (`__READ__` / `__WRIT__` nodes
//! under one path, ordered by sequence).
//!
//! A writer holds when its node is first; a reader holds when no writer's node is before its
//! own. Readers arriving after a waiting writer queue behind it, so writers are not starved.
//! A handle that holds the write lock may also take the read lock (its read node carries the
//! writer's sequence, so it keeps the writer's place after the write lock is released: a
//! downgrade); a reader can never upgrade to the write lock (it would wait for itself).

use std::sync::Arc;

use crate::client::ZkClient;
use crate::lock::{Config, Kind, LockCore};
use crate::mutex::InterProcessMutex;

/// A read-write lock across processes, compatible with Curator's
/// `InterProcessReadWriteLock` on the same path.
///
/// ```no_run
/// use std::time::Duration;
/// use recipes::{AsyncZkClient, InterProcessReadWriteLock};
///
/// #[tokio::main]
/// async fn main() -> Result<(), recipes::Error> {
///     let client = AsyncZkClient::connect("127.0.0.1:2181", Duration::from_secs(10)).await?;
///     let rw = InterProcessReadWriteLock::new(client.clone(), "/locks/catalog");
///     let write = rw.write_lock().acquire().await?;
///     let read = rw.read_lock().acquire().await?; // allowed while holding the write lock
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
    /// # async fn f(client: std::sync::Arc<recipes::AsyncZkClient>) {
    /// let rw = recipes::InterProcessReadWriteLock::new(client, "/locks/catalog");
    /// # }
    /// ```
    pub fn new(client: Arc<dyn ZkClient>, path: &str) -> InterProcessReadWriteLock {
        Self::with_label(client, path, "")
    }

    /// Like [`new`](Self::new), with a label stored in the lock nodes for operators.
    ///
    /// ```no_run
    /// # async fn f(client: std::sync::Arc<recipes::AsyncZkClient>) {
    /// let rw = recipes::InterProcessReadWriteLock::with_label(client, "/locks/catalog", "indexer");
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
        let write = Arc::new(LockCore::new(
            client.clone(),
            path.to_string(),
            Kind::Write,
            config.clone(),
            None,
        ));
        let read = Arc::new(LockCore::new(
            client,
            path.to_string(),
            Kind::Read,
            config,
            Some(write.clone()),
        ));
        InterProcessReadWriteLock {
            read: InterProcessMutex { core: read },
            write: InterProcessMutex { core: write },
        }
    }

    /// The shared lock: many readers hold it at once, no writer meanwhile.
    ///
    /// ```no_run
    /// # async fn f(rw: recipes::InterProcessReadWriteLock) -> Result<(), recipes::Error> {
    /// let guard = rw.read_lock().acquire().await?;
    /// # Ok(()) }
    /// ```
    pub fn read_lock(&self) -> &InterProcessMutex {
        &self.read
    }

    /// The exclusive lock: one writer, no reader (except this handle's own read lock).
    ///
    /// ```no_run
    /// # async fn f(rw: recipes::InterProcessReadWriteLock) -> Result<(), recipes::Error> {
    /// let guard = rw.write_lock().acquire().await?;
    /// # Ok(()) }
    /// ```
    pub fn write_lock(&self) -> &InterProcessMutex {
        &self.write
    }
}
