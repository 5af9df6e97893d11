//! An operator's restore, from the member asked to the entry that carries it out: the
//! AdminServer hands the snapshot here, it goes to the leader as one command
//! ([`Command::Restore`]) and every member applies it at the same entry (`state::restore`).
//! The member that was asked answers once it has applied that entry itself, with its zxid
//! ([`Replica::restore`](super::Replica::restore) proposes and waits).

use std::collections::HashMap;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::oneshot;

/// The restores this member asked for and waits to see applied, by nonce.
#[derive(Default)]
pub struct Restores {
    waiting: Mutex<HashMap<u64, oneshot::Sender<i64>>>,
}

impl Restores {
    /// Registers a restore this member is about to propose.
    pub(super) fn expect(&self, nonce: u64) -> oneshot::Receiver<i64> {
        let (tx, rx) = oneshot::channel();
        self.waiting.lock().insert(nonce, tx);
        rx
    }

    /// Gives up waiting for `nonce`.
    pub(super) fn forget(&self, nonce: u64) {
        self.waiting.lock().remove(&nonce);
    }

    /// The restore `nonce` applied at `zxid` (a no-op on the members that did not ask).
    pub(super) fn applied(&self, nonce: u64, zxid: i64) {
        if let Some(tx) = self.waiting.lock().remove(&nonce) {
            let _ = tx.send(zxid);
        }
    }
}

/// Why a restore was not carried out, or not seen carried out.
#[derive(Debug, thiserror::Error)]
pub enum RestoreError {
    #[error("this member is stopping")]
    Stopping,
    #[error("the restore was not applied within {0:?} (no leader?); it may still be")]
    TimedOut(Duration),
}
