//! The lost-lock signal: one task per held lock decides when the lock can no longer be
//! trusted, and says so once on a watch channel.
//!
//! The lock is lost when (whichever comes first):
//! - the connection has been down longer than a fraction of the session timeout (the server
//!   may have expired the session and granted the lock to the next waiter: Curator's
//!   SUSPENDED treated as an error, and its simulated expiry);
//! - the session expired or the client was closed;
//! - the lock node disappeared (an operator deleted it, or the session went with it). A
//!   data watch on our own node says so; it is re-armed after every reconnect because a
//!   client may lose watches across connections.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{oneshot, watch};
use tokio::time::Instant;

use crate::client::{is_transient, Connection, ErrorCode, EventType, WatchReceiver, ZkClient};
use crate::error::LostReason;

/// Everything the monitor of one held lock needs.
pub(crate) struct Monitor {
    pub client: Arc<dyn ZkClient>,
    pub path: String,
    pub epoch: u64,
    pub suspend_fraction: f64,
    pub lost: watch::Sender<Option<LostReason>>,
}

async fn next_event(w: &mut Option<WatchReceiver>) -> Result<EventType, ()> {
    match w.as_mut() {
        Some(rx) => rx.await.map_err(|_| ()),
        None => std::future::pending().await,
    }
}

async fn sleep_until_opt(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}

impl Monitor {
    /// Runs until the lock is lost (then publishes why) or `stop` fires (the lock was
    /// released; nothing is published).
    pub async fn run(self, mut stop: oneshot::Receiver<()>) {
        let reason = tokio::select! {
            r = self.watch() => r,
            _ = &mut stop => return,
        };
        tracing::info!("lock {} lost: {reason}", self.path);
        let _ = self.lost.send(Some(reason));
    }

    async fn watch(&self) -> LostReason {
        let mut rx = self.client.session();
        let mut node_watch: Option<WatchReceiver> = None;
        let mut need_arm = true;
        loop {
            let state = rx.borrow_and_update().clone();
            if state.epoch != self.epoch || state.connection == Connection::Expired {
                return LostReason::SessionExpired;
            }
            let suspend_deadline = match state.connection {
                Connection::Closed => return LostReason::ClientClosed,
                Connection::Disconnected => {
                    let grace = state.timeout.mul_f64(self.suspend_fraction.clamp(0.0, 1.0));
                    Some(Instant::from_std(state.since) + grace)
                }
                Connection::Connected => None,
                Connection::Expired => return LostReason::SessionExpired,
            };
            if let Some(d) = suspend_deadline {
                if Instant::now() >= d {
                    return LostReason::ConnectionSuspended;
                }
            }
            if state.connection == Connection::Connected && need_arm {
                match self.client.get_data_watch(&self.path).await {
                    Ok((_, stat, w)) => {
                        if state.session_id.is_some_and(|s| s != stat.ephemeral_owner) {
                            // A node of that name owned by another session is not our lock.
                            return LostReason::NodeDeleted;
                        }
                        node_watch = Some(w);
                        need_arm = false;
                    }
                    Err(ErrorCode::NoNode) => return LostReason::NodeDeleted,
                    Err(ErrorCode::SessionExpired) => return LostReason::SessionExpired,
                    Err(e) if is_transient(e) => {
                        // Wait for the connection to change, below.
                    }
                    Err(e) => {
                        tracing::warn!("cannot watch lock node {}: {e}", self.path);
                        tokio::time::sleep(Duration::from_millis(200)).await;
                    }
                }
                // The state may have changed while we were asking; look again first.
                if rx.has_changed().unwrap_or(true) {
                    if rx.has_changed().is_err() {
                        return LostReason::ClientClosed;
                    }
                    continue;
                }
            }
            tokio::select! {
                ev = next_event(&mut node_watch) => {
                    node_watch = None;
                    need_arm = true;
                    if ev == Ok(EventType::NodeDeleted) {
                        return LostReason::NodeDeleted;
                    }
                    if ev.is_err() {
                        // The client dropped the watch; give it a moment before re-arming.
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                }
                changed = rx.changed() => {
                    if changed.is_err() {
                        return LostReason::ClientClosed;
                    }
                    let now = rx.borrow().connection;
                    if now == Connection::Connected && state.connection != Connection::Connected {
                        // Back after a disconnect: the watch may not have survived.
                        need_arm = true;
                    }
                }
                _ = sleep_until_opt(suspend_deadline) => {
                    return LostReason::ConnectionSuspended;
                }
            }
        }
    }
}
