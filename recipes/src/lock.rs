//! The lock algorithm shared by the mutex and the read-write lock (Curator's
//! `LockInternals`): create a protected ephemeral-sequential node, list the contenders in
//! sequence order, hold the lock if the rules say so, otherwise watch the one node whose
//! deletion can change that and wait.
//!
//! Every node this module creates is owned by a [`Pending`] until it becomes a held lock, so
//! a timeout, an error or a dropped future deletes it (in the background if need be).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex as StdMutex};
use std::time::Duration;

use tokio::sync::{oneshot, watch};
use tokio::time::Instant;

use crate::cleanup::{session_gone, spawn_delete, wait_connected, DeleteOutcome, Doomed};
use crate::client::{is_transient, Connection, CreateMode, ErrorCode, Stat, ZkClient};
use crate::error::{Error, LostReason};
use crate::fence::FencingToken;
use crate::monitor::Monitor;
use crate::names::{
    ancestors_and_self, join, node_name, protected_prefix, protection_of, sequence_of,
    sorted_contenders, Contender, Owner, MUTEX_LOCK_NAME, MUTEX_MARKERS, READ_LOCK_NAME,
    RW_MARKERS, WRITE_LOCK_NAME,
};

/// How long a timed-out or failed acquire waits for its node's delete before returning
/// (the delete goes on in the background after that).
const CLEANUP_GRACE: Duration = Duration::from_secs(5);

/// A pause after a call failed with a transient error, so that a client which fails fast
/// while it still believes it is connected is not spun on.
const TRANSIENT_BACKOFF: Duration = Duration::from_millis(20);

/// Which recipe a lock core implements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Mutex,
    Read,
    Write,
}

impl Kind {
    fn lock_name(self) -> &'static str {
        match self {
            Kind::Mutex => MUTEX_LOCK_NAME,
            Kind::Read => READ_LOCK_NAME,
            Kind::Write => WRITE_LOCK_NAME,
        }
    }

    pub(crate) fn markers(self) -> &'static [&'static str] {
        match self {
            Kind::Mutex => MUTEX_MARKERS,
            Kind::Read | Kind::Write => RW_MARKERS,
        }
    }
}

/// True for a read-write lock node written by a writer (its last marker is `__WRIT__`).
pub(crate) fn is_write_node(name: &str) -> bool {
    match (name.rfind(WRITE_LOCK_NAME), name.rfind(READ_LOCK_NAME)) {
        (Some(w), Some(r)) => w > r,
        (Some(_), None) => true,
        _ => false,
    }
}

/// What a contender at `idx` does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Decision {
    Granted,
    /// Wait for this node to go.
    Watch(String),
}

/// Curator's `getsTheLock`: a mutex or a writer holds when it is first; a reader holds when
/// no writer is before it, and otherwise watches the first writer.
pub(crate) fn decide(kind: Kind, sorted: &[Contender], idx: usize) -> Decision {
    match kind {
        Kind::Mutex | Kind::Write => {
            if idx == 0 {
                Decision::Granted
            } else {
                Decision::Watch(sorted[idx - 1].name.clone())
            }
        }
        Kind::Read => match sorted[..idx].iter().find(|c| is_write_node(&c.name)) {
            None => Decision::Granted,
            Some(w) => Decision::Watch(w.name.clone()),
        },
    }
}

/// Options of a lock handle.
#[derive(Debug, Clone)]
pub(crate) struct Config {
    pub owner: Owner,
    pub suspend_fraction: f64,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            owner: Owner::current(""),
            suspend_fraction: 0.5,
        }
    }
}

/// A lock node we created.
#[derive(Debug, Clone)]
pub(crate) struct NodeInfo {
    pub path: String,
    pub name: String,
    pub stat: Stat,
    pub epoch: u64,
}

/// A held lock: one node, held once or more (reentrancy) through one handle.
pub(crate) struct Holding {
    pub path: String,
    pub name: String,
    pub token: FencingToken,
    pub epoch: u64,
    pub count: AtomicUsize,
    pub lost: watch::Receiver<Option<LostReason>>,
    stop: StdMutex<Option<oneshot::Sender<()>>>,
}

impl Holding {
    pub fn lost_reason(&self) -> Option<LostReason> {
        *self.lost.borrow()
    }
}

/// One lock handle's shared state: which node it holds, and how many times.
pub(crate) struct LockCore {
    pub client: Arc<dyn ZkClient>,
    pub path: String,
    pub kind: Kind,
    pub config: Config,
    pub held: StdMutex<Option<Arc<Holding>>>,
    acquiring: tokio::sync::Mutex<()>,
    /// For a read lock: the write lock of the same read-write lock handle.
    pub write_core: Option<Arc<LockCore>>,
}

/// Owns a node that is not (yet) a held lock: deletes it unless disarmed.
struct Pending {
    client: Arc<dyn ZkClient>,
    doomed: Option<(Doomed, u64)>,
}

impl Pending {
    fn arm(&mut self, doomed: Doomed, epoch: u64) {
        self.doomed = Some((doomed, epoch));
    }

    fn disarm(&mut self) {
        self.doomed = None;
    }

    /// Deletes the node now, waiting a little for the delete (it goes on in the background).
    async fn cleanup(&mut self) {
        if let Some((d, e)) = self.doomed.take() {
            if let Some(h) = spawn_delete(self.client.clone(), d, e) {
                let _ = tokio::time::timeout(CLEANUP_GRACE, h).await;
            }
        }
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        if let Some((d, e)) = self.doomed.take() {
            spawn_delete(self.client.clone(), d, e);
        }
    }
}

fn deadline_passed(deadline: Option<Instant>) -> bool {
    deadline.is_some_and(|d| Instant::now() >= d)
}

async fn sleep_until_opt(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}

impl LockCore {
    pub fn new(
        client: Arc<dyn ZkClient>,
        path: String,
        kind: Kind,
        config: Config,
        write_core: Option<Arc<LockCore>>,
    ) -> LockCore {
        LockCore {
            client,
            path,
            kind,
            config,
            held: StdMutex::new(None),
            acquiring: tokio::sync::Mutex::new(()),
            write_core,
        }
    }

    fn held(&self) -> Option<Arc<Holding>> {
        self.held.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Reentrant acquire: the handle already holds the lock.
    fn reenter(&self) -> Result<Option<Arc<Holding>>, Error> {
        let guard = self.held.lock().unwrap_or_else(|e| e.into_inner());
        match guard.as_ref() {
            Some(h) => {
                if let Some(reason) = h.lost_reason() {
                    return Err(Error::Lost(reason));
                }
                h.count.fetch_add(1, Ordering::SeqCst);
                Ok(Some(h.clone()))
            }
            None => Ok(None),
        }
    }

    /// Acquires (or re-enters). `deadline` None waits for ever; `wait` false never waits for
    /// another holder.
    pub async fn acquire(
        self: &Arc<Self>,
        deadline: Option<Instant>,
        wait: bool,
    ) -> Result<Option<Arc<Holding>>, Error> {
        if !crate::names::validate_path(&self.path) {
            return Err(Error::InvalidPath(self.path.clone()));
        }
        if let Some(h) = self.reenter()? {
            return Ok(Some(h));
        }
        // One acquire at a time per handle: a second one re-enters once the first holds.
        let _serial = if !wait {
            match self.acquiring.try_lock() {
                Ok(g) => g,
                Err(_) => return Ok(None),
            }
        } else {
            match deadline {
                Some(d) => match tokio::time::timeout_at(d, self.acquiring.lock()).await {
                    Ok(g) => g,
                    Err(_) => return Ok(None),
                },
                None => self.acquiring.lock().await,
            }
        };
        if let Some(h) = self.reenter()? {
            return Ok(Some(h));
        }
        let Some(node) = self.attempt(deadline, wait).await? else {
            return Ok(None);
        };
        let holding = self.start_holding(node);
        *self.held.lock().unwrap_or_else(|e| e.into_inner()) = Some(holding.clone());
        Ok(Some(holding))
    }

    fn start_holding(&self, node: NodeInfo) -> Arc<Holding> {
        let (lost_tx, lost_rx) = watch::channel(None);
        let (stop_tx, stop_rx) = oneshot::channel();
        let monitor = Monitor {
            client: self.client.clone(),
            path: node.path.clone(),
            epoch: node.epoch,
            suspend_fraction: self.config.suspend_fraction,
            lost: lost_tx,
        };
        tokio::spawn(monitor.run(stop_rx));
        Arc::new(Holding {
            token: FencingToken::from_czxid(node.stat.czxid),
            path: node.path,
            name: node.name,
            epoch: node.epoch,
            count: AtomicUsize::new(1),
            lost: lost_rx,
            stop: StdMutex::new(Some(stop_tx)),
        })
    }

    /// Gives back one acquisition. When the count reaches zero, the node is deleted
    /// (guaranteed, in the background) and the returned handle says when.
    pub fn release(
        &self,
        holding: &Arc<Holding>,
    ) -> Option<tokio::task::JoinHandle<DeleteOutcome>> {
        {
            let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
            let before = holding.count.fetch_sub(1, Ordering::SeqCst);
            if before > 1 {
                return None;
            }
            if held.as_ref().is_some_and(|h| Arc::ptr_eq(h, holding)) {
                *held = None;
            }
        }
        if let Some(stop) = holding
            .stop
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
        {
            let _ = stop.send(());
        }
        spawn_delete(
            self.client.clone(),
            Doomed::Path(holding.path.clone()),
            holding.epoch,
        )
    }

    /// The node to create for one attempt: its path and mode. A read lock taken while the
    /// same read-write handle holds the write lock gets a plain ephemeral node carrying the
    /// writer's sequence, so it keeps the writer's place in the queue after a downgrade.
    fn node_to_create(&self, prefix: &str) -> (String, CreateMode, bool) {
        if self.kind == Kind::Read {
            if let Some(w) = self.write_core.as_ref().and_then(|w| w.held()) {
                if let Some(seq) = sequence_of(&w.name, RW_MARKERS) {
                    let name = format!("{prefix}{READ_LOCK_NAME}{seq:010}");
                    return (join(&self.path, &name), CreateMode::Ephemeral, true);
                }
            }
        }
        let name = format!("{prefix}{}", self.kind.lock_name());
        (
            join(&self.path, &name),
            CreateMode::EphemeralSequential,
            false,
        )
    }

    /// Creates every missing ancestor of the lock path, and the path, as containers.
    async fn ensure_parents(&self) -> Result<(), ErrorCode> {
        for p in ancestors_and_self(&self.path) {
            match self.client.create(&p, &[], CreateMode::Container).await {
                Ok(_) | Err(ErrorCode::NodeExists) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Looks for the child of the lock path that carries `prefix`.
    async fn find_protected(&self, prefix: &str) -> Result<Option<(String, Stat)>, ErrorCode> {
        let children = match self.client.get_children(&self.path).await {
            Ok(c) => c,
            Err(ErrorCode::NoNode) => return Ok(None),
            Err(e) => return Err(e),
        };
        let Some(name) = children.into_iter().find(|c| c.starts_with(prefix)) else {
            return Ok(None);
        };
        match self.client.exists(&join(&self.path, &name)).await? {
            Some(stat) => Ok(Some((name, stat))),
            None => Ok(None),
        }
    }

    /// Creates our node with Curator's protection: a create whose reply was lost is found
    /// again by its `_c_<uuid>-` prefix, unless the session that made it is gone.
    /// `None` when the deadline passed first.
    async fn create_protected(
        &self,
        pending: &mut Pending,
        rx: &mut watch::Receiver<SessionState>,
        deadline: Option<Instant>,
    ) -> Result<Option<NodeInfo>, Error> {
        let data = self.config.owner.to_bytes();
        'fresh: loop {
            if !wait_connected(rx, None, deadline).await {
                if rx.borrow().connection == Connection::Closed {
                    return Err(Error::Closed);
                }
                return Ok(None);
            }
            let uuid = uuid::Uuid::new_v4();
            let prefix = protected_prefix(&uuid);
            let (create_path, mode, plain) = self.node_to_create(&prefix);
            let epoch = rx.borrow().epoch;
            let doomed = Doomed::Prefix {
                base: self.path.clone(),
                prefix: prefix.clone(),
            };
            let mut unknown = false;
            let mut parent_tries = 0;
            loop {
                if deadline_passed(deadline) {
                    if unknown {
                        pending.arm(doomed, epoch);
                    }
                    return Ok(None);
                }
                let state = rx.borrow_and_update().clone();
                if state.connection == Connection::Closed {
                    return Err(Error::Closed);
                }
                if session_gone(&state, epoch) {
                    // Whatever we may have created went with that session.
                    pending.disarm();
                    continue 'fresh;
                }
                if unknown {
                    match self.find_protected(&prefix).await {
                        Ok(Some((name, stat))) => {
                            let now = rx.borrow().clone();
                            let ours = stat.ephemeral_owner != 0
                                && now.epoch == epoch
                                && now.session_id.is_none_or(|s| s == stat.ephemeral_owner);
                            let path = join(&self.path, &name);
                            if !ours {
                                // Left by an earlier session of ours: not our node.
                                tracing::info!("protected node {path} belongs to an old session");
                                spawn_delete(self.client.clone(), Doomed::Path(path), epoch);
                                pending.disarm();
                                continue 'fresh;
                            }
                            tracing::info!("found protected node {path} after a lost reply");
                            pending.arm(Doomed::Path(path.clone()), epoch);
                            return Ok(Some(NodeInfo {
                                path,
                                name,
                                stat,
                                epoch,
                            }));
                        }
                        Ok(None) => unknown = false,
                        Err(e) if is_transient(e) => {
                            tokio::time::sleep(TRANSIENT_BACKOFF).await;
                            wait_connected(rx, Some(epoch), deadline).await;
                            continue;
                        }
                        Err(e) => return Err(e.into()),
                    }
                }
                // While the create is in flight, a drop must look for the node by prefix.
                pending.arm(doomed.clone(), epoch);
                match self.client.create(&create_path, &data, mode).await {
                    Ok((path, stat)) => {
                        let now = rx.borrow().clone();
                        if now.epoch != epoch {
                            spawn_delete(self.client.clone(), Doomed::Path(path), now.epoch);
                            pending.disarm();
                            continue 'fresh;
                        }
                        let name = node_name(&path).to_string();
                        pending.arm(Doomed::Path(path.clone()), epoch);
                        return Ok(Some(NodeInfo {
                            path,
                            name,
                            stat,
                            epoch,
                        }));
                    }
                    Err(ErrorCode::NoNode) => {
                        pending.disarm();
                        parent_tries += 1;
                        if parent_tries > 10 {
                            return Err(Error::Zk(ErrorCode::NoNode));
                        }
                        match self.ensure_parents().await {
                            Ok(()) => {}
                            Err(e) if is_transient(e) => {
                                tokio::time::sleep(TRANSIENT_BACKOFF).await;
                                wait_connected(rx, None, deadline).await;
                            }
                            Err(e) => return Err(e.into()),
                        }
                    }
                    Err(ErrorCode::NodeExists) if plain => {
                        // A plain node of ours may exist from an attempt whose reply was lost.
                        unknown = true;
                    }
                    Err(e) if is_transient(e) || e == ErrorCode::SessionExpired => {
                        unknown = true;
                        tokio::time::sleep(TRANSIENT_BACKOFF).await;
                        wait_connected(rx, Some(epoch), deadline).await;
                    }
                    Err(e) => {
                        pending.disarm();
                        return Err(e.into());
                    }
                }
            }
        }
    }

    /// One acquisition: create, then wait in line. `None` on timeout (or, without `wait`,
    /// when another holds the lock); the node is gone by then.
    async fn attempt(
        &self,
        deadline: Option<Instant>,
        wait: bool,
    ) -> Result<Option<NodeInfo>, Error> {
        let mut rx = self.client.session();
        let mut pending = Pending {
            client: self.client.clone(),
            doomed: None,
        };
        let markers = self.kind.markers();
        'create: loop {
            let Some(node) = self
                .create_protected(&mut pending, &mut rx, deadline)
                .await?
            else {
                pending.cleanup().await;
                return Ok(None);
            };
            let read_in_write = self.kind == Kind::Read
                && self.write_core.as_ref().is_some_and(|w| w.held().is_some());
            loop {
                rx.borrow_and_update();
                if session_gone(&rx.borrow(), node.epoch) {
                    if rx.borrow().connection == Connection::Closed {
                        return Err(Error::Closed);
                    }
                    pending.disarm();
                    continue 'create;
                }
                if read_in_write {
                    pending.disarm();
                    return Ok(Some(node));
                }
                let children = match self.client.get_children(&self.path).await {
                    Ok(c) => c,
                    Err(ErrorCode::NoNode) => Vec::new(),
                    Err(e) if is_transient(e) => {
                        tokio::time::sleep(TRANSIENT_BACKOFF).await;
                        if !wait_connected(&mut rx, None, deadline).await {
                            if rx.borrow().connection == Connection::Closed {
                                return Err(Error::Closed);
                            }
                            pending.cleanup().await;
                            return Ok(None);
                        }
                        continue;
                    }
                    Err(e) => {
                        pending.cleanup().await;
                        return Err(e.into());
                    }
                };
                // A create whose reply was lost, and that the protection search missed (the
                // member asked had not applied it yet), leaves a second node with our prefix
                // and our session: nobody else would ever delete it, and whoever queues
                // behind it would wait for as long as we live. It is ours: delete it.
                if let Some(prefix) = protection_of(&node.name) {
                    let twins: Vec<String> = children
                        .iter()
                        .filter(|c| **c != node.name && c.starts_with(prefix))
                        .cloned()
                        .collect();
                    if !twins.is_empty() {
                        for twin in twins {
                            let path = join(&self.path, &twin);
                            tracing::info!("deleting {path}: a second node of ours, from a create whose reply was lost");
                            if let Err(e) = self.client.delete(&path, -1).await {
                                if e != ErrorCode::NoNode {
                                    tokio::time::sleep(TRANSIENT_BACKOFF).await;
                                }
                            }
                        }
                        continue;
                    }
                }
                let sorted = sorted_contenders(children, markers);
                let Some(idx) = sorted.iter().position(|c| c.name == node.name) else {
                    // Our node is gone (deleted, or with an expired session): queue again.
                    tracing::info!("lock node {} vanished while waiting", node.path);
                    pending.disarm();
                    if deadline_passed(deadline) {
                        return Ok(None);
                    }
                    continue 'create;
                };
                let pred = match decide(self.kind, &sorted, idx) {
                    Decision::Granted => {
                        let mut node = node;
                        if node.stat.czxid == 0 {
                            // A client that does not return the create's Stat: read it.
                            if let Ok(Some(stat)) = self.client.exists(&node.path).await {
                                node.stat = stat;
                            }
                        }
                        pending.disarm();
                        return Ok(Some(node));
                    }
                    Decision::Watch(p) => p,
                };
                if !wait || deadline_passed(deadline) {
                    pending.cleanup().await;
                    return Ok(None);
                }
                let w = match self.client.get_data_watch(&join(&self.path, &pred)).await {
                    Ok((_, _, w)) => w,
                    Err(ErrorCode::NoNode) => continue,
                    Err(e) if is_transient(e) => {
                        tokio::time::sleep(TRANSIENT_BACKOFF).await;
                        continue;
                    }
                    Err(e) => {
                        pending.cleanup().await;
                        return Err(e.into());
                    }
                };
                tokio::select! {
                    _ = w => {}
                    changed = rx.changed() => {
                        if changed.is_err() {
                            return Err(Error::Closed);
                        }
                    }
                    _ = sleep_until_opt(deadline) => {
                        pending.cleanup().await;
                        return Ok(None);
                    }
                }
            }
        }
    }
}

use crate::client::SessionState;

#[cfg(test)]
mod tests {
    use super::*;

    fn c(name: &str, seq: i64) -> Contender {
        Contender {
            name: name.into(),
            sequence: seq,
        }
    }

    #[test]
    fn mutex_watches_its_predecessor() {
        let s = vec![c("a-lock-1", 1), c("b-lock-2", 2), c("c-lock-3", 3)];
        assert_eq!(decide(Kind::Mutex, &s, 0), Decision::Granted);
        assert_eq!(
            decide(Kind::Mutex, &s, 2),
            Decision::Watch("b-lock-2".into())
        );
    }

    #[test]
    fn readers_share_until_a_writer() {
        let s = vec![
            c("a-__READ__1", 1),
            c("b-__READ__2", 2),
            c("c-__WRIT__3", 3),
            c("d-__READ__4", 4),
            c("e-__WRIT__5", 5),
        ];
        assert_eq!(decide(Kind::Read, &s, 1), Decision::Granted);
        assert_eq!(
            decide(Kind::Read, &s, 3),
            Decision::Watch("c-__WRIT__3".into())
        );
        assert_eq!(
            decide(Kind::Write, &s, 2),
            Decision::Watch("b-__READ__2".into())
        );
        assert_eq!(
            decide(Kind::Write, &s, 4),
            Decision::Watch("d-__READ__4".into())
        );
        assert!(is_write_node("_c_x-__WRIT__0000000001"));
        assert!(!is_write_node("_c_x-__READ__0000000001"));
    }
}
