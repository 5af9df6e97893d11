//! A held lock ([`Holding`]): its node, fencing token and session, how often it is held,
//! the monitor's lost signal, and the handle's local turn kept until the node is deleted;
//! and [`NodeInfo`], a lock node we created (what waiting in line ends with).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex as StdMutex;
use std::time::Duration;

use tokio::sync::{oneshot, watch, OwnedMutexGuard};
use tokio::time::Instant;

use crate::client::Stat;
use crate::error::LostReason;
use crate::fence::FencingToken;

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
    /// Holds `node` once, from now: `lost` is its monitor's verdict, `stop` stops the
    /// monitor, `permit` is the handle's turn.
    pub fn new(
        node: NodeInfo,
        token: FencingToken,
        lost: watch::Receiver<Option<LostReason>>,
        stop: oneshot::Sender<()>,
        permit: OwnedMutexGuard<()>,
    ) -> Holding {
        Holding {
            token,
            path: node.path,
            name: node.name,
            epoch: node.epoch,
            count: AtomicUsize::new(1),
            lost,
            stop: StdMutex::new(Some(stop)),
            permit: StdMutex::new(Some(permit)),
            released: AtomicBool::new(false),
            since: Instant::now(),
        }
    }

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

    /// Marks the lock released (its last acquisition given back) and stops the monitor;
    /// returns how long it was held. The node is still to be deleted.
    pub fn end(&self) -> Duration {
        self.released.store(true, Ordering::SeqCst);
        if let Some(stop) = self.stop.lock().unwrap_or_else(|e| e.into_inner()).take() {
            let _ = stop.send(());
        }
        self.since.elapsed()
    }

    /// Gives back the handle's turn (the node is deleted, or remembered as an orphan).
    pub fn give_back_turn(&self) {
        drop(self.permit.lock().unwrap_or_else(|e| e.into_inner()).take());
    }
}
