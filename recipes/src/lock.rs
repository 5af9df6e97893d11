//! The lock core shared by every recipe (mutex, read-write lock, leader latch, semaphore
//! lease; Curator's `LockInternals`): a handle's local turn, acquiring with distinct
//! outcomes, holding (the monitor, the token) and releasing (a guaranteed delete, and a
//! node whose delete failed for good remembered).
//!
//! The parts it puts together, each in its own file:
//! - [`rules`](crate::rules): the node kinds and who holds (`Kind`, `decide`);
//! - [`options`](crate::options): a handle's checked configuration (`Config`);
//! - [`queue`](crate::queue): creating the node and waiting in line (`Queue`): create a
//!   protected ephemeral-sequential node, list the contenders in sequence order, hold the
//!   lock if the rules say so, otherwise watch the one node whose deletion can change that
//!   and wait;
//! - [`holding`](crate::holding): the held lock (`Holding`) and the node it holds.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex as StdMutex};

use tokio::sync::{oneshot, watch, OwnedMutexGuard};
use tokio::time::Instant;
use tracing::Instrument;

use crate::cleanup::{guaranteed_delete, DeleteOutcome};
use crate::client::{Connection, ErrorCode, SessionState, ZkClient};
use crate::error::Error;
use crate::fence::FencingToken;
use crate::holding::{Holding, NodeInfo};
use crate::metrics::AcquireOutcome;
use crate::monitor::Monitor;
use crate::options::Config;
use crate::queue::{session_error, Queue};
use crate::rules::Kind;

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
        let queue = Queue {
            client: &self.client,
            path: &self.path,
            kind: self.kind,
            config: &self.config,
        };
        let Some(node) = queue
            .attempt(
                &mut rx,
                epoch,
                deadline,
                wait,
                via_write.map(|w| w.name.as_str()),
            )
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
        Arc::new(Holding::new(node, token, lost_rx, stop_tx, permit))
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
        let held = holding.end();
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
        holding.give_back_turn();
    }
}
