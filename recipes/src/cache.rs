//! [`SubtreeCache`]: a local mirror of a subtree (the node and everything below it), like
//! Curator's `CuratorCache` (and `TreeCache`, kazoo's `TreeCache`).
//!
//! The cache loads the subtree, then follows it: every creation, data change and deletion
//! becomes a [`CacheEvent`] for the listeners and an update of the mirror. It follows with a
//! persistent recursive watch (ZooKeeper 3.6+'s `addWatch`) when the client and server have
//! one — one watch for the whole subtree, events in the server's order — and otherwise with
//! one-shot data and child watches on every node, re-armed after each event.
//!
//! Events during a connection loss can be lost with either kind of watch (ZOOKEEPER-4698
//! for persistent ones), so after every reconnection (and in a new session) the cache reads
//! the whole subtree again and reports the differences, then [`CacheEvent::Resynced`].
//!
//! This module holds the public handle; `cache_state` the mirror, `cache_sync` the task
//! that reads and watches.

use std::sync::{Arc, Mutex as StdMutex};

use tokio::sync::mpsc;

use crate::cache_state::{child, Shared};
pub use crate::cache_state::{CacheEvent, ChildData, WatchMode};
use crate::cache_sync::Syncer;
use crate::client::{IntoClient, ZkClient};
use crate::error::Error;
use crate::names::checked_path;

/// A local mirror of a subtree, kept up to date, compatible in what it sees with Curator's
/// `CuratorCache` (it only reads: any writer, Curator or not, is seen).
///
/// ```no_run
/// use std::time::Duration;
/// use zooraft_recipes::{CacheEvent, SubtreeCache, ZookeeperClient};
///
/// #[tokio::main]
/// async fn main() -> Result<(), zooraft_recipes::Error> {
///     let client = ZookeeperClient::connect("127.0.0.1:2181", Duration::from_secs(10)).await?;
///     let cache = SubtreeCache::new(client, "/config")?;
///     let mut events = cache.listen();
///     cache.start();
///     cache.initialized().await?;
///     if let Some(node) = cache.get("/config/feature-x") {
///         println!("feature-x = {:?}", node.data);
///     }
///     while let Some(event) = events.recv().await {
///         if let CacheEvent::Changed { new, .. } = event {
///             println!("{} is now {:?}", new.path, new.data);
///         }
///     }
///     Ok(())
/// }
/// ```
#[doc(alias = "CuratorCache", alias = "TreeCache")]
pub struct SubtreeCache {
    client: Arc<dyn ZkClient>,
    shared: Arc<Shared>,
    mode: WatchMode,
    task: StdMutex<Option<tokio::task::JoinHandle<()>>>,
}

impl std::fmt::Debug for SubtreeCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SubtreeCache")
            .field("path", &self.shared.root)
            .field("mode", &self.mode)
            .field("progress", &*self.shared.progress.borrow())
            .finish()
    }
}

impl SubtreeCache {
    /// A cache of `path` and its subtree (not started: see [`start`](Self::start)).
    pub fn new(client: impl IntoClient, path: &str) -> Result<SubtreeCache, Error> {
        let client = client.into_client();
        Ok(SubtreeCache {
            client,
            shared: Arc::new(Shared::new(checked_path(path)?)),
            mode: WatchMode::Auto,
            task: StdMutex::new(None),
        })
    }

    /// Chooses how the cache watches (before [`start`](Self::start)).
    pub fn with_mode(mut self, mode: WatchMode) -> SubtreeCache {
        self.mode = mode;
        self
    }

    /// The subtree's root.
    pub fn path(&self) -> &str {
        &self.shared.root
    }

    /// A receiver of every event from now on, in order. Unbounded: keep reading it, or drop
    /// it (a dropped receiver is forgotten).
    pub fn listen(&self) -> mpsc::UnboundedReceiver<CacheEvent> {
        let (tx, rx) = mpsc::unbounded_channel();
        self.shared
            .listeners
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(tx);
        rx
    }

    /// Starts loading and following the subtree, on the current tokio runtime (a second
    /// call does nothing).
    ///
    /// # Panics
    /// Outside a tokio runtime.
    pub fn start(&self) {
        let mut task = self.task.lock().unwrap_or_else(|e| e.into_inner());
        if task.is_none() {
            let syncer = Syncer::new(self.client.clone(), self.shared.clone(), self.mode);
            *task = Some(tokio::spawn(syncer.run()));
        }
    }

    /// Waits until the initial load is complete; fails if the cache stopped first (see
    /// [`stopped`](Self::stopped)).
    pub async fn initialized(&self) -> Result<(), Error> {
        let mut rx = self.shared.progress.subscribe();
        let p = rx
            .wait_for(|p| p.initialized || p.stopped.is_some())
            .await
            .map_err(|_| Error::Closed)?;
        match &p.stopped {
            Some(e) if !p.initialized => Err(e.clone()),
            _ => Ok(()),
        }
    }

    /// Waits until the cache stops following the subtree, and says why: the client closed,
    /// its session expired and it cannot start another (zookeeper-client), or the server
    /// refused the watch or a read for good.
    pub async fn stopped(&self) -> Error {
        let mut rx = self.shared.progress.subscribe();
        let p = rx.wait_for(|p| p.stopped.is_some()).await;
        match p {
            Ok(p) => p.stopped.clone().unwrap_or(Error::Closed),
            Err(_) => Error::Closed,
        }
    }

    /// How many times the cache read the subtree again after a reconnection.
    pub fn resyncs(&self) -> u64 {
        self.shared.progress.borrow().resyncs
    }

    /// The kind of watch in use (`None` before the first connection).
    pub fn mode(&self) -> Option<WatchMode> {
        self.shared.progress.borrow().mode
    }

    /// The node at `path`, as cached.
    pub fn get(&self, path: &str) -> Option<ChildData> {
        self.shared.read().get(path).map(|n| child(path, n))
    }

    /// The cached children of `path` (their names, sorted).
    pub fn children(&self, path: &str) -> Vec<String> {
        self.shared.child_names(path)
    }

    /// Every cached node, sorted by path.
    pub fn snapshot(&self) -> Vec<ChildData> {
        self.shared
            .read()
            .iter()
            .map(|(p, n)| child(p, n))
            .collect()
    }

    /// How many nodes are cached.
    pub fn len(&self) -> usize {
        self.shared.read().len()
    }

    /// Whether no node is cached (the root does not exist, or the load has not begun).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Stops following the subtree (the mirror stays as it is).
    pub fn close(&self) {
        if let Some(t) = self.task.lock().unwrap_or_else(|e| e.into_inner()).take() {
            t.abort();
        }
        self.shared.progress.send_modify(|p| {
            if p.stopped.is_none() {
                p.stopped = Some(Error::Closed);
            }
        });
    }
}

impl Drop for SubtreeCache {
    fn drop(&mut self) {
        self.close();
    }
}
