//! The task behind a [`SubtreeCache`](crate::SubtreeCache): loads the subtree, follows it
//! with a persistent recursive watch or with one-shot watches, and reads it all again after
//! each reconnection.
//!
//! One-shot watches are re-armed by the read that handles their event. Which nodes have a
//! pending watch is remembered (`armed`), so handling an event does not pile up a second
//! watch per node. Whether a watch survives a reconnection depends on the client
//! (zookeeper-client sets its watches again, zookeeper-async does not), so every connection
//! is a new generation: its resync arms every node afresh, the previous generation's
//! forwarding tasks are aborted, and events of an older generation are ignored (the new
//! watch reports the same change).

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;

use std::time::Duration;

use tokio::sync::{mpsc, watch};

use crate::cache_state::{CacheEvent, Shared, WatchMode};
use crate::client::{
    is_transient, Connection, ErrorCode, EventType, NodeEvent, PersistentWatch, SessionState,
    WatchReceiver, ZkClient,
};
use crate::error::Error;
use crate::names::join;

/// Which one-shot watch fired.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Kind {
    /// A data watch (or, on the missing root, an exists watch).
    Data,
    /// A child watch.
    Children,
}

/// A one-shot watch that fired, or that the client dropped.
#[derive(Debug)]
struct Fired {
    path: String,
    kind: Kind,
    /// The connection it was armed on.
    generation: u64,
}

/// Why following stopped: look again after a reconnection, or give up.
enum Stop {
    Reconnect,
    Fatal(Error),
}

fn stop_of(e: ErrorCode) -> Stop {
    if is_transient(e) {
        Stop::Reconnect
    } else if e == ErrorCode::SessionExpired {
        // The client reports the expiry on its session channel; the outer loop decides.
        Stop::Reconnect
    } else {
        Stop::Fatal(Error::Zk(e))
    }
}

pub(crate) struct Syncer {
    client: Arc<dyn ZkClient>,
    shared: Arc<Shared>,
    mode: WatchMode,
    /// Pending one-shot watches: the generation that armed each, and its forwarding task.
    armed: HashMap<(String, Kind), (u64, tokio::task::AbortHandle)>,
    /// Counts connections: see the module docs.
    generation: u64,
    fired_tx: mpsc::UnboundedSender<Fired>,
    fired_rx: mpsc::UnboundedReceiver<Fired>,
}

impl Syncer {
    pub fn new(client: Arc<dyn ZkClient>, shared: Arc<Shared>, mode: WatchMode) -> Syncer {
        let (fired_tx, fired_rx) = mpsc::unbounded_channel();
        Syncer {
            client,
            shared,
            mode,
            armed: HashMap::new(),
            generation: 0,
            fired_tx,
            fired_rx,
        }
    }

    fn stop(&self, e: Error) {
        tracing::debug!(path = %self.shared.root, "cache stopped: {e}");
        self.shared.progress.send_modify(|p| p.stopped = Some(e));
    }

    pub async fn run(mut self) {
        let mut session = self.client.session();
        let mut recursive = self.mode != WatchMode::OneShot;
        loop {
            if let Err(e) = connected(&mut session).await {
                return self.stop(e);
            }
            self.generation += 1;
            let mut watch = None;
            if recursive {
                match self.client.watch_recursive(&self.shared.root).await {
                    Ok(w) => watch = Some(w),
                    Err(ErrorCode::Unimplemented) if self.mode == WatchMode::Auto => {
                        tracing::debug!("no persistent recursive watch: one-shot watches");
                        recursive = false;
                    }
                    Err(e) => match stop_of(e) {
                        Stop::Reconnect => {
                            self.wait_for_change(&mut session).await;
                            continue;
                        }
                        Stop::Fatal(e) => return self.stop(e),
                    },
                }
            }
            let mode = if recursive {
                WatchMode::Recursive
            } else {
                WatchMode::OneShot
            };
            self.shared.progress.send_modify(|p| p.mode = Some(mode));
            match self.follow(watch, &mut session).await {
                Stop::Reconnect => self.wait_for_change(&mut session).await,
                Stop::Fatal(e) => return self.stop(e),
            }
        }
    }

    /// Waits until the connection is not up (a failed call said so before the channel did),
    /// at most a moment.
    async fn wait_for_change(&self, session: &mut watch::Receiver<SessionState>) {
        if session.borrow().connection == Connection::Connected {
            let _ = tokio::time::timeout(Duration::from_millis(200), session.changed()).await;
        }
    }

    /// Reads the subtree, reports the differences, then applies events until the
    /// connection drops.
    async fn follow(
        &mut self,
        mut watch: Option<PersistentWatch>,
        session: &mut watch::Receiver<SessionState>,
    ) -> Stop {
        let one_shot = watch.is_none();
        // The connection this pass follows: a later state with another `since` is another
        // connection, even if the channel only shows it connected again (the drop in
        // between was coalesced).
        let connected_since = session.borrow_and_update().since;
        if let Err(e) = self.resync(one_shot).await {
            return stop_of(e);
        }
        let first = !self.shared.progress.borrow().initialized;
        self.shared.progress.send_modify(|p| {
            if p.initialized {
                p.resyncs += 1;
            }
            p.initialized = true;
        });
        self.shared.emit(if first {
            CacheEvent::Initialized
        } else {
            CacheEvent::Resynced
        });
        loop {
            let result = tokio::select! {
                ev = recv(&mut watch) => match ev {
                    Some(ev) => self.on_node_event(ev).await,
                    // The watch ended with its session.
                    None => return Stop::Reconnect,
                },
                Some(f) = self.fired_rx.recv() => self.on_fired(f).await,
                changed = session.changed() => {
                    if changed.is_err() {
                        return Stop::Fatal(Error::Closed);
                    }
                    let s = session.borrow();
                    if s.connection != Connection::Connected || s.since != connected_since {
                        return Stop::Reconnect;
                    }
                    Ok(())
                }
            };
            if let Err(e) = result {
                return stop_of(e);
            }
        }
    }

    /// Reads the whole subtree (arming one-shot watches where none is pending), reports
    /// what differs from the mirror, and drops what is no longer there.
    async fn resync(&mut self, one_shot: bool) -> Result<(), ErrorCode> {
        let root = self.shared.root.clone();
        let mut seen = HashSet::new();
        self.load(&root, one_shot, &mut seen).await?;
        for path in self.shared.paths() {
            if !seen.contains(&path) {
                self.shared.remove_subtree(&path);
            }
        }
        Ok(())
    }

    /// Reads `top` and everything below it into the mirror, breadth first; records the
    /// paths read in `seen`.
    async fn load(
        &mut self,
        top: &str,
        one_shot: bool,
        seen: &mut HashSet<String>,
    ) -> Result<(), ErrorCode> {
        let mut queue = VecDeque::from([top.to_string()]);
        while let Some(path) = queue.pop_front() {
            if !self.read_data(&path, one_shot).await? {
                continue;
            }
            seen.insert(path.clone());
            let Some(names) = self.read_children(&path, one_shot).await? else {
                continue;
            };
            queue.extend(names.iter().map(|n| join(&path, n)));
        }
        Ok(())
    }

    /// Whether a one-shot watch of this connection is pending.
    fn is_armed(&self, key: &(String, Kind)) -> bool {
        self.armed
            .get(key)
            .is_some_and(|(g, _)| *g == self.generation)
    }

    /// Reads one node's data into the mirror (arming a data watch in one-shot mode). False
    /// when it does not exist (then it and its subtree leave the mirror).
    async fn read_data(&mut self, path: &str, one_shot: bool) -> Result<bool, ErrorCode> {
        let key = (path.to_string(), Kind::Data);
        let arm = one_shot && !self.is_armed(&key);
        let read = if arm {
            self.client
                .get_data_watch(path)
                .await
                .map(|(d, s, w)| (d, s, Some(w)))
        } else {
            self.client.get_data(path).await.map(|(d, s)| (d, s, None))
        };
        match read {
            Ok((data, stat, w)) => {
                if let Some(w) = w {
                    self.arm(key, w);
                }
                self.shared.upsert(path, data, stat);
                Ok(true)
            }
            Err(ErrorCode::NoNode) => {
                self.shared.remove_subtree(path);
                if arm && path == self.shared.root {
                    // Nothing else would tell us the root appeared.
                    self.arm_exists(path).await?;
                }
                Ok(false)
            }
            Err(e) => Err(e),
        }
    }

    /// Watches for the missing root's creation (one-shot mode).
    async fn arm_exists(&mut self, path: &str) -> Result<(), ErrorCode> {
        let key = (path.to_string(), Kind::Data);
        match self.client.exists_watch(path).await {
            Ok((stat, w)) => {
                self.arm(key, w);
                if stat.is_some() {
                    // Created again before the watch was set: no event will say so. Handle
                    // it as if its watch had fired.
                    tracing::debug!("{path} appeared while the cache armed its watch");
                    let _ = self.fired_tx.send(Fired {
                        path: path.to_string(),
                        kind: Kind::Data,
                        generation: self.generation,
                    });
                }
                Ok(())
            }
            Err(ErrorCode::Unimplemented) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// A node's children names (arming a child watch in one-shot mode); `None` if the node
    /// is gone.
    async fn read_children(
        &mut self,
        path: &str,
        one_shot: bool,
    ) -> Result<Option<Vec<String>>, ErrorCode> {
        let key = (path.to_string(), Kind::Children);
        let arm = one_shot && !self.is_armed(&key);
        let read = if arm {
            self.client
                .get_children_watch(path)
                .await
                .map(|(c, w)| (c, Some(w)))
        } else {
            self.client.get_children(path).await.map(|c| (c, None))
        };
        match read {
            Ok((names, w)) => {
                if let Some(w) = w {
                    self.arm(key, w);
                }
                Ok(Some(names))
            }
            Err(ErrorCode::NoNode) => {
                self.shared.remove_subtree(path);
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    /// Remembers a pending one-shot watch and forwards its firing.
    fn arm(&mut self, key: (String, Kind), w: WatchReceiver) {
        let tx = self.fired_tx.clone();
        let fired = Fired {
            path: key.0.clone(),
            kind: key.1,
            generation: self.generation,
        };
        let task = tokio::spawn(async move {
            // Fired or dropped: either way the node is read again.
            let _ = w.await;
            let _ = tx.send(fired);
        });
        if let Some((_, old)) = self
            .armed
            .insert(key, (self.generation, task.abort_handle()))
        {
            old.abort();
        }
    }

    /// An event of the persistent recursive watch: read the node again (or drop it).
    async fn on_node_event(&mut self, ev: NodeEvent) -> Result<(), ErrorCode> {
        match ev.event_type {
            EventType::NodeCreated | EventType::NodeDataChanged => {
                self.read_data(&ev.path, false).await.map(drop)
            }
            EventType::NodeDeleted => {
                self.shared.remove_subtree(&ev.path);
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// A one-shot watch fired: read what it watched again (which re-arms it).
    async fn on_fired(&mut self, f: Fired) -> Result<(), ErrorCode> {
        if f.generation != self.generation {
            return Ok(());
        }
        self.armed.remove(&(f.path.clone(), f.kind));
        match f.kind {
            Kind::Data => {
                let known = self.shared.contains(&f.path);
                if self.read_data(&f.path, true).await? && !known {
                    // The root appeared: load what is below it.
                    let mut seen = HashSet::new();
                    self.load(&f.path, true, &mut seen).await?;
                }
                Ok(())
            }
            Kind::Children => {
                if !self.shared.contains(&f.path) {
                    return Ok(());
                }
                let Some(names) = self.read_children(&f.path, true).await? else {
                    return Ok(());
                };
                let cached: HashSet<String> =
                    self.shared.child_names(&f.path).into_iter().collect();
                let now: HashSet<&String> = names.iter().collect();
                for gone in cached.iter().filter(|c| !now.contains(c)) {
                    self.shared.remove_subtree(&join(&f.path, gone));
                }
                for new in names.iter().filter(|c| !cached.contains(*c)) {
                    let mut seen = HashSet::new();
                    self.load(&join(&f.path, new), true, &mut seen).await?;
                }
                Ok(())
            }
        }
    }
}

/// Waits until connected. A client whose session expired may start another
/// (zookeeper-async does at once); one still expired after two session timeouts will not
/// (zookeeper-client's expiry is final), and neither will a closed one.
async fn connected(session: &mut watch::Receiver<SessionState>) -> Result<(), Error> {
    loop {
        {
            let s = session.borrow_and_update();
            match s.connection {
                Connection::Connected => return Ok(()),
                Connection::Closed => return Err(Error::Closed),
                Connection::Expired if s.since.elapsed() > s.timeout * 2 => {
                    return Err(Error::SessionExpired)
                }
                _ => {}
            }
        }
        let changed = tokio::time::timeout(Duration::from_millis(500), session.changed());
        if let Ok(Err(_)) = changed.await {
            return Err(Error::Closed);
        }
    }
}

/// The next event of the persistent watch, or never without one.
async fn recv(watch: &mut Option<PersistentWatch>) -> Option<NodeEvent> {
    match watch {
        Some(w) => w.recv().await,
        None => std::future::pending().await,
    }
}
