//! The cache's mirror: the nodes it holds, what changed between two reads of them (the
//! [`CacheEvent`]s), and the state shared by the public handle (`cache.rs`) and the task
//! that reads and watches (`cache_sync.rs`), so that neither of those two uses the other.

use std::collections::BTreeMap;
use std::sync::{Mutex as StdMutex, RwLock};

use tokio::sync::{mpsc, watch};

use crate::client::Stat;
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

/// The cache's progress, published to [`SubtreeCache::initialized`] and friends.
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
    pub(crate) listeners: StdMutex<Vec<mpsc::UnboundedSender<CacheEvent>>>,
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
    pub(crate) fn new(root: String) -> Shared {
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

    pub(crate) fn read(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<String, Node>> {
        self.nodes.read().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn write(&self) -> std::sync::RwLockWriteGuard<'_, BTreeMap<String, Node>> {
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

pub(crate) fn child(path: &str, node: &Node) -> ChildData {
    ChildData {
        path: path.to_string(),
        data: node.data.to_vec(),
        stat: node.stat.clone(),
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
