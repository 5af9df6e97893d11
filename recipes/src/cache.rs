//! [`CuratorCache`]: a local mirror of a subtree (the node and everything below it), like
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
//! This module holds the mirror and the public handle; `cache_sync` the task that reads
//! and watches.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex as StdMutex, RwLock};

use tokio::sync::{mpsc, watch};

use crate::cache_sync::Syncer;
use crate::client::{Stat, ZkClient};
use crate::counters::checked_path;
use crate::error::Error;

/// A node as the cache holds it.
///
/// ```
/// use zooraft_recipes::{ChildData, Stat};
/// let d = ChildData { path: "/config/a".into(), data: b"x".to_vec(), stat: Stat::default() };
/// assert_eq!(d.name(), "a");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChildData {
    /// The node's path.
    pub path: String,
    /// Its data.
    pub data: Vec<u8>,
    /// Its Stat when it was read.
    pub stat: Stat,
}

impl ChildData {
    /// The last component of the path.
    pub fn name(&self) -> &str {
        self.path.rsplit('/').next().unwrap_or_default()
    }
}

/// What the cache saw happen, in the order it applied it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum CacheEvent {
    /// A node appeared (in the initial load, or later).
    Created(ChildData),
    /// A node's data changed (or it was deleted and created again between two reads).
    Changed {
        /// What the cache held.
        old: ChildData,
        /// What it holds now.
        new: ChildData,
    },
    /// A node disappeared (children before their parent).
    Deleted(ChildData),
    /// The initial load is complete: the cache mirrors the subtree.
    Initialized,
    /// After a reconnection the cache read the subtree again; the events for the
    /// differences came before this one.
    Resynced,
}

/// How the cache watches the subtree.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum WatchMode {
    /// A persistent recursive watch where the client and server have it, one-shot watches
    /// otherwise (the default).
    Auto,
    /// Only a persistent recursive watch: the cache stops with `Unimplemented` without one.
    Recursive,
    /// One-shot data and child watches on every node (ZooKeeper before 3.6).
    OneShot,
}

/// A node in the mirror: what a [`ChildData`] holds besides the path (the map's key).
#[derive(Debug, Clone)]
pub(crate) struct Node {
    pub data: Box<[u8]>,
    pub stat: Stat,
}

/// The cache's progress, published to [`CuratorCache::initialized`] and friends.
#[derive(Debug, Clone, Default)]
pub(crate) struct Progress {
    pub initialized: bool,
    pub resyncs: u64,
    pub mode: Option<WatchMode>,
    pub stopped: Option<Error>,
}

/// What the handle and the task share.
pub(crate) struct Shared {
    pub root: String,
    pub nodes: RwLock<BTreeMap<String, Node>>,
    listeners: StdMutex<Vec<mpsc::UnboundedSender<CacheEvent>>>,
    pub progress: watch::Sender<Progress>,
}

/// The keys of `path` and every node below it, in map order (parents first).
fn subtree_keys(nodes: &BTreeMap<String, Node>, path: &str) -> Vec<String> {
    let mut keys: Vec<String> = Vec::new();
    if nodes.contains_key(path) {
        keys.push(path.to_string());
    }
    let base = if path == "/" {
        String::new()
    } else {
        path.to_string()
    };
    let (lo, hi) = (format!("{base}/"), format!("{base}0"));
    keys.extend(nodes.range(lo..hi).map(|(k, _)| k.clone()));
    keys
}

impl Shared {
    fn new(root: String) -> Shared {
        Shared {
            root,
            nodes: RwLock::new(BTreeMap::new()),
            listeners: StdMutex::new(Vec::new()),
            progress: watch::Sender::new(Progress::default()),
        }
    }

    pub fn emit(&self, event: CacheEvent) {
        let mut listeners = self.listeners.lock().unwrap_or_else(|e| e.into_inner());
        listeners.retain(|l| l.send(event.clone()).is_ok());
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<String, Node>> {
        self.nodes.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, BTreeMap<String, Node>> {
        self.nodes.write().unwrap_or_else(|e| e.into_inner())
    }

    /// Records a node as read; reports it created or changed (a new data version or a
    /// new incarnation). A Stat that differs only in its children's counters is kept
    /// without an event.
    pub fn upsert(&self, path: &str, data: Vec<u8>, stat: Stat) {
        let new = Node {
            data: data.into_boxed_slice(),
            stat,
        };
        let old = self.write().insert(path.to_string(), new.clone());
        let event = match old {
            None => CacheEvent::Created(child(path, &new)),
            Some(old) if old.stat.mzxid != new.stat.mzxid || old.stat.czxid != new.stat.czxid => {
                CacheEvent::Changed {
                    old: child(path, &old),
                    new: child(path, &new),
                }
            }
            Some(_) => return,
        };
        self.emit(event);
    }

    /// Removes `path` and everything below it, children first.
    pub fn remove_subtree(&self, path: &str) {
        let removed: Vec<(String, Node)> = {
            let mut nodes = self.write();
            let keys = subtree_keys(&nodes, path);
            keys.into_iter()
                .rev()
                .filter_map(|k| nodes.remove(&k).map(|n| (k, n)))
                .collect()
        };
        for (k, n) in removed {
            self.emit(CacheEvent::Deleted(child(&k, &n)));
        }
    }

    /// The cached paths.
    pub fn paths(&self) -> Vec<String> {
        self.read().keys().cloned().collect()
    }

    pub fn contains(&self, path: &str) -> bool {
        self.read().contains_key(path)
    }

    /// The cached children names of `path`.
    pub fn child_names(&self, path: &str) -> Vec<String> {
        let nodes = self.read();
        let base = if path == "/" {
            String::new()
        } else {
            path.to_string()
        };
        let (lo, hi) = (format!("{base}/"), format!("{base}0"));
        nodes
            .range(lo.clone()..hi)
            .map(|(k, _)| &k[lo.len()..])
            .filter(|rest| !rest.contains('/'))
            .map(str::to_string)
            .collect()
    }
}

fn child(path: &str, node: &Node) -> ChildData {
    ChildData {
        path: path.to_string(),
        data: node.data.to_vec(),
        stat: node.stat.clone(),
    }
}

/// A local mirror of a subtree, kept up to date, compatible in what it sees with Curator's
/// `CuratorCache` (it only reads: any writer, Curator or not, is seen).
///
/// ```no_run
/// use std::time::Duration;
/// use zooraft_recipes::{CacheEvent, CuratorCache, ZookeeperClient};
///
/// #[tokio::main]
/// async fn main() -> Result<(), zooraft_recipes::Error> {
///     let client = ZookeeperClient::connect("127.0.0.1:2181", Duration::from_secs(10)).await?;
///     let cache = CuratorCache::new(client, "/config")?;
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
#[doc(alias = "TreeCache")]
pub struct CuratorCache {
    client: Arc<dyn ZkClient>,
    shared: Arc<Shared>,
    mode: WatchMode,
    task: StdMutex<Option<tokio::task::JoinHandle<()>>>,
}

impl std::fmt::Debug for CuratorCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CuratorCache")
            .field("path", &self.shared.root)
            .field("mode", &self.mode)
            .field("progress", &*self.shared.progress.borrow())
            .finish()
    }
}

impl CuratorCache {
    /// A cache of `path` and its subtree (not started: see [`start`](Self::start)).
    pub fn new(client: Arc<dyn ZkClient>, path: &str) -> Result<CuratorCache, Error> {
        Ok(CuratorCache {
            client,
            shared: Arc::new(Shared::new(checked_path(path)?)),
            mode: WatchMode::Auto,
            task: StdMutex::new(None),
        })
    }

    /// Chooses how the cache watches (before [`start`](Self::start)).
    pub fn with_mode(mut self, mode: WatchMode) -> CuratorCache {
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

impl Drop for CuratorCache {
    fn drop(&mut self) {
        self.close();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shared_with(paths: &[&str]) -> Shared {
        let s = Shared::new("/a".into());
        for p in paths {
            s.upsert(p, Vec::new(), Stat::default());
        }
        s
    }

    #[test]
    fn subtree_is_the_node_and_its_descendants_only() {
        let s = shared_with(&["/a", "/a/b", "/a/b/c", "/a-x", "/a/d", "/ab"]);
        let (tx, mut rx) = mpsc::unbounded_channel();
        s.listeners.lock().unwrap().push(tx);
        s.remove_subtree("/a/b");
        let mut deleted = Vec::new();
        while let Ok(CacheEvent::Deleted(d)) = rx.try_recv() {
            deleted.push(d.path);
        }
        assert_eq!(deleted, vec!["/a/b/c", "/a/b"], "children first");
        assert_eq!(s.paths(), vec!["/a", "/a-x", "/a/d", "/ab"]);
        assert_eq!(s.child_names("/a"), vec!["d"]);
    }

    #[test]
    fn changes_are_new_versions_not_new_children() {
        let s = Shared::new("/a".into());
        let (tx, mut rx) = mpsc::unbounded_channel();
        s.listeners.lock().unwrap().push(tx);
        let mut stat = Stat {
            czxid: 5,
            mzxid: 5,
            ..Stat::default()
        };
        s.upsert("/a", b"1".to_vec(), stat.clone());
        stat.cversion = 1;
        stat.num_children = 1;
        s.upsert("/a", b"1".to_vec(), stat.clone());
        stat.mzxid = 9;
        s.upsert("/a", b"2".to_vec(), stat);
        assert!(matches!(rx.try_recv(), Ok(CacheEvent::Created(_))));
        match rx.try_recv() {
            Ok(CacheEvent::Changed { old, new }) => {
                assert_eq!((old.data, new.data), (b"1".to_vec(), b"2".to_vec()))
            }
            other => panic!("{other:?}"),
        }
        assert!(rx.try_recv().is_err());
    }
}
