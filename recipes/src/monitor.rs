//! The lost-lock signal: one task per held lock decides when the lock can no longer be
//! trusted, and says so once on a watch channel.
//!
//! The lock is lost when (whichever comes first):
//! - the server has not been heard from for longer than a fraction of the session timeout
//!   (the server may be about to expire the session and grant the lock to the next waiter:
//!   Curator's SUSPENDED treated as an error, and its simulated expiry). The session's
//!   [`Heartbeat`](crate::heartbeat) sends a small read three times per such interval (one
//!   for all the locks of a client), and the time is measured from the moment the last
//!   answered one was sent, so it does not depend on when the client library notices a dead
//!   connection;
//! - the session expired or the client was closed;
//! - the lock node disappeared (an operator deleted it, or the session went with it). A
//!   data watch on our own node says so; it is re-armed after every reconnect because a
//!   client may lose watches across connections.
//!
//! If the monitor task itself ends without publishing (it panicked, or the runtime shut
//! down), the channel's sender is gone: the holder reads that as
//! [`LostReason::MonitorStopped`], never as "still valid".

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{oneshot, watch};
use tokio::time::Instant;

use crate::client::{is_transient, Connection, ErrorCode, EventType, WatchReceiver, ZkClient};
use crate::error::LostReason;
use crate::heartbeat::heartbeat;
use crate::metrics::LockMetrics;

/// Everything the monitor of one held lock needs.
pub(crate) struct Monitor {
    pub client: Arc<dyn ZkClient>,
    /// The lock's path (for metrics and logs).
    pub lock_path: String,
    /// Our lock node.
    pub path: String,
    pub epoch: u64,
    pub suspend_fraction: f64,
    pub lost: watch::Sender<Option<LostReason>>,
    pub metrics: Option<Arc<dyn LockMetrics>>,
}

async fn next_event(w: &mut Option<WatchReceiver>) -> Result<EventType, ()> {
    match w.as_mut() {
        Some(rx) => rx.await.map_err(|_| ()),
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
        let span = tracing::info_span!(
            "lock_lost",
            path = %self.lock_path,
            node = %self.path,
            reason = reason.as_str(),
        );
        let _entered = span.enter();
        tracing::info!(%reason, "lock lost");
        if let Some(m) = &self.metrics {
            m.lost(&self.lock_path, reason);
        }
        let _ = self.lost.send(Some(reason));
    }

    async fn watch(&self) -> LostReason {
        let mut rx = self.client.session();
        let mut node_watch: Option<WatchReceiver> = None;
        let mut need_arm = true;
        // The last time the server answered us (a lower bound: when that request was sent).
        let mut last_heard = Instant::now();
        let first = rx.borrow().timeout.mul_f64(self.suspend_fraction);
        let hb = heartbeat(&self.client, first / 3);
        let mut beats = hb.subscribe();
        loop {
            let state = rx.borrow_and_update().clone();
            match state.connection {
                Connection::Closed => return LostReason::ClientClosed,
                Connection::Expired => return LostReason::SessionExpired,
                Connection::Connected | Connection::Disconnected => {}
            }
            if state.epoch != self.epoch {
                return LostReason::SessionExpired;
            }
            let grace = state.timeout.mul_f64(self.suspend_fraction);
            let suspend_at = last_heard + grace;
            if Instant::now() >= suspend_at {
                return LostReason::ConnectionSuspended;
            }
            if state.connection == Connection::Connected && need_arm {
                let sent = Instant::now();
                match tokio::time::timeout_at(suspend_at, self.client.get_data_watch(&self.path))
                    .await
                {
                    Ok(Ok((_, stat, w))) => {
                        last_heard = last_heard.max(sent);
                        if state.session_id.is_some_and(|s| s != stat.ephemeral_owner) {
                            // A node of that name owned by another session is not our lock.
                            return LostReason::NodeDeleted;
                        }
                        node_watch = Some(w);
                        need_arm = false;
                    }
                    Ok(Err(ErrorCode::NoNode)) => return LostReason::NodeDeleted,
                    Ok(Err(ErrorCode::SessionExpired)) => return LostReason::SessionExpired,
                    Ok(Err(e)) if is_transient(e) => {}
                    Ok(Err(e)) => {
                        tracing::warn!("cannot watch lock node {}: {e}", self.path);
                    }
                    Err(_) => return LostReason::ConnectionSuspended,
                }
                continue;
            }
            tokio::select! {
                ev = next_event(&mut node_watch) => {
                    node_watch = None;
                    need_arm = true;
                    if ev == Ok(EventType::NodeDeleted) {
                        // A close deletes our node too: that is the client closing.
                        if rx.borrow().connection == Connection::Closed {
                            return LostReason::ClientClosed;
                        }
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
                changed = beats.changed() => {
                    if changed.is_err() {
                        return LostReason::MonitorStopped;
                    }
                    last_heard = last_heard.max(*beats.borrow_and_update());
                }
                _ = tokio::time::sleep_until(suspend_at) => {
                    return LostReason::ConnectionSuspended;
                }
            }
        }
    }
}
