//! The lock core shared by every recipe (mutex, read-write lock, leader latch, semaphore
//! lease; Curator's `LockInternals`): which node kinds there are and who holds, a handle's
//! local turn, acquiring with distinct outcomes, holding (the monitor, the token) and
//! releasing (a guaranteed delete, and a node whose delete failed for good remembered).
//!
//! Creating the node and waiting in line is in [`queue`](crate::queue): create a protected
//! ephemeral-sequential node, list the contenders in sequence order, hold the lock if the
//! rules say so, otherwise watch the one node whose deletion can change that and wait.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex as StdMutex};

use tokio::sync::{oneshot, watch, OwnedMutexGuard};
use tokio::time::Instant;
use tracing::Instrument;

use crate::cleanup::{guaranteed_delete, session_gone, DeleteOutcome};
use crate::client::{Acl, Connection, ErrorCode, SessionState, Stat, ZkClient};
use crate::error::{Error, LostReason};
use crate::fence::FencingToken;
use crate::metrics::{AcquireOutcome, LockMetrics};
use crate::monitor::Monitor;
use crate::names::{
    Contender, Owner, LATCH_MARKERS, LATCH_NAME, LEASE_MARKERS, LEASE_NAME, MUTEX_LOCK_NAME,
    MUTEX_MARKERS, READ_LOCK_NAME, RW_MARKERS, WRITE_LOCK_NAME,
};

/// Which recipe a lock core implements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Mutex,
    Read,
    Write,
    /// A leader latch participant: granted like a mutex.
    Latch,
    /// A semaphore lease: granted while the leases number at most the maximum.
    Lease,
}

impl Kind {
    pub(crate) fn lock_name(self) -> &'static str {
        match self {
            Kind::Mutex => MUTEX_LOCK_NAME,
            Kind::Read => READ_LOCK_NAME,
            Kind::Write => WRITE_LOCK_NAME,
            Kind::Latch => LATCH_NAME,
            Kind::Lease => LEASE_NAME,
        }
    }

    pub(crate) fn markers(self) -> &'static [&'static str] {
        match self {
            Kind::Mutex => MUTEX_MARKERS,
            Kind::Read | Kind::Write => RW_MARKERS,
            Kind::Latch => LATCH_MARKERS,
            Kind::Lease => LEASE_MARKERS,
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
    /// Wait for the children to change (a semaphore with every lease taken).
    WatchChildren,
}

/// Curator's `getsTheLock`: a mutex or a writer holds when it is first; a reader holds when
/// no writer is before it, and otherwise watches the first writer.
pub(crate) fn decide(kind: Kind, sorted: &[Contender], idx: usize) -> Decision {
    match kind {
        // A lease is decided by counting (see `LockCore::decide_lease`), never by order.
        Kind::Lease => Decision::Granted,
        Kind::Mutex | Kind::Write | Kind::Latch => {
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
#[derive(Clone)]
pub(crate) struct Config {
    pub owner: Owner,
    /// The lock node's data, instead of the owner line (Curator's `lockNodeBytes`).
    pub node_data: Option<Vec<u8>>,
    /// The ACL of the lock nodes and the containers above them (empty: open).
    pub acl: Vec<Acl>,
    pub suspend_fraction: f64,
    pub metrics: Option<Arc<dyn LockMetrics>>,
    /// For a lease: how many leases may be held at once.
    pub max_leases: MaxLeases,
}

/// How many leases a [`Semaphore`](crate::Semaphore) grants at once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MaxLeases {
    /// A fixed number (at least one).
    Fixed(usize),
    /// The number stored in the node at this path (Curator's `SharedCount`: a 4-byte
    /// big-endian int), read again whenever an acquirer waits.
    Shared(String),
}

impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Config")
            .field("owner", &self.owner)
            .field("node_data", &self.node_data)
            .field("acl", &self.acl)
            .field("suspend_fraction", &self.suspend_fraction)
            .field("metrics", &self.metrics.is_some())
            .field("max_leases", &self.max_leases)
            .finish()
    }
}

impl Default for Config {
    fn default() -> Config {
        Config {
            owner: Owner::current(""),
            node_data: None,
            acl: Vec::new(),
            suspend_fraction: DEFAULT_SUSPEND_FRACTION,
            metrics: None,
            max_leases: MaxLeases::Fixed(1),
        }
    }
}

impl Config {
    /// The defaults for an election participant: its node holds its id, as Curator's do.
    pub(crate) fn participant(id: &str) -> Config {
        Config {
            node_data: Some(id.as_bytes().to_vec()),
            ..Config::default()
        }
    }

    pub(crate) fn data(&self) -> Vec<u8> {
        self.node_data
            .clone()
            .unwrap_or_else(|| self.owner.to_bytes())
    }
}

/// The default fraction of the session timeout without an answer after which a held lock
/// counts as lost.
pub(crate) const DEFAULT_SUSPEND_FRACTION: f64 = 0.5;
/// The largest fraction accepted: past it, the holder may still believe in its lock when the
/// server, whose clock started earlier, has already expired the session.
pub(crate) const MAX_SUSPEND_FRACTION: f64 = 0.8;
/// The smallest fraction accepted (below it, a lock is lost at the first slow reply).
pub(crate) const MIN_SUSPEND_FRACTION: f64 = 0.05;

/// A lock node we created.
#[derive(Debug, Clone)]
pub(crate) struct NodeInfo {
    pub path: String,
    pub name: String,
    pub stat: Stat,
    pub epoch: u64,
}

/// A held lock: one node, held once or more (explicit reentrancy through
/// [`LockGuard::reenter`](crate::LockGuard::reenter)).
pub(crate) struct Holding {
    pub path: String,
    pub name: String,
    pub token: FencingToken,
    pub epoch: u64,
    pub count: AtomicUsize,
    pub lost: watch::Receiver<Option<LostReason>>,
    stop: StdMutex<Option<oneshot::Sender<()>>>,
    /// The handle's local turn: kept until the node is deleted, so no other task of the
    /// handle (or of its clones) can hold the lock meanwhile.
    permit: StdMutex<Option<OwnedMutexGuard<()>>>,
    released: AtomicBool,
    since: Instant,
}

impl Holding {
    /// Why the lock can no longer be trusted, if it cannot. A monitor that ended without a
    /// verdict (its task panicked or was dropped) is a verdict too.
    pub fn lost_reason(&self) -> Option<LostReason> {
        if let Some(r) = *self.lost.borrow() {
            return Some(r);
        }
        if self.released.load(Ordering::SeqCst) {
            return Some(LostReason::Released);
        }
        if self.lost.has_changed().is_err() {
            return Some(LostReason::MonitorStopped);
        }
        None
    }
}

/// One lock handle's shared state (shared by the handle's clones).
pub(crate) struct LockCore {
    pub client: Arc<dyn ZkClient>,
    pub path: String,
    pub kind: Kind,
    pub config: Config,
    pub held: StdMutex<Option<Arc<Holding>>>,
    /// One holder at a time per handle: tasks sharing a handle exclude each other.
    local: Arc<tokio::sync::Mutex<()>>,
    /// A node of ours whose delete failed for good: the next acquire deletes it first.
    orphan: StdMutex<Option<(String, u64)>>,
    /// For the write lock of a read-write lock: its read lock (for a downgrade).
    pub read_sibling: Option<Arc<LockCore>>,
}

/// The error that ends an acquire because its session is gone (or the client closed).
pub(crate) fn session_error(state: &SessionState, epoch: u64) -> Option<Error> {
    if state.connection == Connection::Closed {
        Some(Error::Closed)
    } else if session_gone(state, epoch) {
        Some(Error::SessionExpired)
    } else {
        None
    }
}

/// What an acquire that stopped waiting reports: the session's fate, the connection being
/// down, or (connected) that the lock is busy.
fn stopped(state: &SessionState, epoch: u64) -> Result<(), Error> {
    match session_error(state, epoch) {
        Some(e) => Err(e),
        None if state.connection != Connection::Connected => Err(Error::Disconnected),
        None => Ok(()),
    }
}

fn outcome_of(result: &Result<Option<Arc<Holding>>, Error>) -> Option<AcquireOutcome> {
    match result {
        Ok(Some(_)) => None,
        Ok(None) => Some(AcquireOutcome::Busy),
        Err(Error::Disconnected) => Some(AcquireOutcome::Disconnected),
        Err(Error::SessionExpired) => Some(AcquireOutcome::SessionExpired),
        Err(Error::Closed) => Some(AcquireOutcome::Closed),
        Err(_) => Some(AcquireOutcome::Error),
    }
}

impl LockCore {
    pub fn new(
        client: Arc<dyn ZkClient>,
        path: String,
        kind: Kind,
        config: Config,
        read_sibling: Option<Arc<LockCore>>,
    ) -> LockCore {
        LockCore {
            client,
            path,
            kind,
            config,
            held: StdMutex::new(None),
            local: Arc::new(tokio::sync::Mutex::new(())),
            orphan: StdMutex::new(None),
            read_sibling,
        }
    }

    pub fn held(&self) -> Option<Arc<Holding>> {
        self.held.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Acquires. `deadline` None waits for ever; `wait` false never waits for another holder
    /// (nor for another task of this handle). `via_write`: the read lock taken by the holder
    /// of the same read-write lock's write lock (a downgrade).
    ///
    /// `Ok(None)`: busy (the deadline passed, connected, with another holder before us).
    pub async fn acquire(
        self: &Arc<Self>,
        deadline: Option<Instant>,
        wait: bool,
        via_write: Option<&Arc<Holding>>,
    ) -> Result<Option<Arc<Holding>>, Error> {
        let started = Instant::now();
        let span = tracing::debug_span!("lock_acquire", path = %self.path, kind = ?self.kind);
        let result = self
            .acquire_inner(deadline, wait, via_write)
            .instrument(span)
            .await;
        let waited = started.elapsed();
        match outcome_of(&result) {
            None => {
                tracing::debug!(path = %self.path, ?waited, "lock acquired");
                if let Some(m) = &self.config.metrics {
                    m.acquired(&self.path, waited);
                }
            }
            Some(outcome) => {
                tracing::debug!(path = %self.path, ?waited, outcome = outcome.as_str(), "lock not acquired");
                if let Some(m) = &self.config.metrics {
                    m.acquire_failed(&self.path, waited, outcome);
                }
            }
        }
        result
    }

    async fn acquire_inner(
        self: &Arc<Self>,
        deadline: Option<Instant>,
        wait: bool,
        via_write: Option<&Arc<Holding>>,
    ) -> Result<Option<Arc<Holding>>, Error> {
        if !crate::names::validate_path(&self.path) {
            return Err(Error::InvalidPath(self.path.clone()));
        }
        let mut rx = self.client.session();
        let (epoch, timeout) = {
            let state = rx.borrow_and_update();
            if let Some(e) = session_error(&state, state.epoch) {
                return Err(e);
            }
            if !wait && state.connection != Connection::Connected {
                return Err(Error::Disconnected);
            }
            (state.epoch, state.timeout)
        };
        // A try never waits for a holder, nor more than a session timeout for the connection.
        let deadline = match deadline {
            None if !wait => Some(Instant::now() + timeout),
            d => d,
        };
        // One holder at a time per handle: clones and tasks sharing the handle queue here.
        let local = self.local.clone();
        let permit = if !wait {
            match local.try_lock_owned() {
                Ok(p) => p,
                Err(_) => return stopped(&rx.borrow(), epoch).map(|()| None),
            }
        } else {
            match deadline {
                Some(d) => match tokio::time::timeout_at(d, local.lock_owned()).await {
                    Ok(p) => p,
                    Err(_) => return stopped(&rx.borrow(), epoch).map(|()| None),
                },
                None => local.lock_owned().await,
            }
        };
        if !self.finish_orphan(deadline).await? {
            return stopped(&rx.borrow(), epoch).map(|()| None);
        }
        let Some(node) = self
            .attempt(&mut rx, epoch, deadline, wait, via_write)
            .await?
        else {
            return stopped(&rx.borrow(), epoch).map(|()| None);
        };
        let token = match via_write {
            // A read lock taken by the writer carries the writer's token: its own node is
            // newer than the writers queued behind, and must not fence them out.
            Some(w) => w.token,
            None => FencingToken::from_czxid(node.stat.czxid),
        };
        let holding = self.start_holding(node, token, permit);
        *self.held.lock().unwrap_or_else(|e| e.into_inner()) = Some(holding.clone());
        Ok(Some(holding))
    }

    /// Deletes a node of ours whose earlier delete failed for good. False when the deadline
    /// passed first.
    async fn finish_orphan(&self, deadline: Option<Instant>) -> Result<bool, Error> {
        let orphan = self
            .orphan
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let Some((path, epoch)) = orphan else {
            return Ok(true);
        };
        let delete = guaranteed_delete(&self.client, &path, epoch);
        let outcome = match deadline {
            Some(d) => match tokio::time::timeout_at(d, delete).await {
                Ok(o) => o,
                Err(_) => return Ok(false),
            },
            None => delete.await,
        };
        match outcome {
            DeleteOutcome::Deleted | DeleteOutcome::SessionGone => {
                *self.orphan.lock().unwrap_or_else(|e| e.into_inner()) = None;
                Ok(true)
            }
            DeleteOutcome::Failed(code) => Err(Error::Zk(code)),
        }
    }

    fn start_holding(
        &self,
        node: NodeInfo,
        token: FencingToken,
        permit: OwnedMutexGuard<()>,
    ) -> Arc<Holding> {
        let (lost_tx, lost_rx) = watch::channel(None);
        let (stop_tx, stop_rx) = oneshot::channel();
        let monitor = Monitor {
            client: self.client.clone(),
            lock_path: self.path.clone(),
            path: node.path.clone(),
            epoch: node.epoch,
            suspend_fraction: self.config.suspend_fraction,
            lost: lost_tx,
            metrics: self.config.metrics.clone(),
        };
        tokio::spawn(monitor.run(stop_rx));
        Arc::new(Holding {
            token,
            path: node.path,
            name: node.name,
            epoch: node.epoch,
            count: AtomicUsize::new(1),
            lost: lost_rx,
            stop: StdMutex::new(Some(stop_tx)),
            permit: StdMutex::new(Some(permit)),
            released: AtomicBool::new(false),
            since: Instant::now(),
        })
    }

    /// Gives back one acquisition. When the count reaches zero, the monitor stops and the
    /// node is deleted (guaranteed, in the background); the returned handle says when. The
    /// handle's turn is given back only once the delete is done, or failed for good (then
    /// the node is remembered and the next acquire deletes it first).
    pub fn release(
        self: &Arc<Self>,
        holding: &Arc<Holding>,
    ) -> Option<tokio::task::JoinHandle<DeleteOutcome>> {
        let before = holding.count.fetch_sub(1, Ordering::SeqCst);
        if before > 1 {
            return None;
        }
        holding.released.store(true, Ordering::SeqCst);
        if let Some(stop) = holding
            .stop
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
        {
            let _ = stop.send(());
        }
        let held = holding.since.elapsed();
        if let Some(m) = &self.config.metrics {
            m.released(&self.path, held);
        }
        // The release's span covers the guaranteed delete, which outlives the caller.
        let span = tracing::debug_span!(
            "lock_release",
            path = %self.path,
            node = %holding.path,
            held_ms = held.as_millis() as u64,
            outcome = tracing::field::Empty,
        );
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            let _entered = span.enter();
            tracing::warn!(
                "no tokio runtime to delete {}; the session end will",
                holding.path
            );
            self.finish_release(holding, DeleteOutcome::Failed(ErrorCode::SystemError));
            return None;
        };
        let core = self.clone();
        let holding = holding.clone();
        Some(
            rt.spawn(
                async move {
                    tracing::debug!("releasing");
                    let outcome =
                        guaranteed_delete(&core.client, &holding.path, holding.epoch).await;
                    tracing::Span::current().record("outcome", outcome.as_str());
                    core.finish_release(&holding, outcome);
                    outcome
                }
                .instrument(span),
            ),
        )
    }

    fn finish_release(&self, holding: &Arc<Holding>, outcome: DeleteOutcome) {
        {
            let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
            if held.as_ref().is_some_and(|h| Arc::ptr_eq(h, holding)) {
                *held = None;
            }
        }
        if let DeleteOutcome::Failed(code) = outcome {
            tracing::warn!(
                "lock node {} stays ({code}); the next acquire deletes it first",
                holding.path
            );
            *self.orphan.lock().unwrap_or_else(|e| e.into_inner()) =
                Some((holding.path.clone(), holding.epoch));
        }
        drop(
            holding
                .permit
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .take(),
        );
    }
}

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
