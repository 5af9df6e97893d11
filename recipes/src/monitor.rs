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
    ///
    /// `stop` is looked at first: a release sends it before it deletes the node, so when
    /// the delete's NodeDeleted is in as well the lock was released, not lost (picking one
    /// of the two at random told the metrics of a loss after one release in two).
    pub async fn run(self, mut stop: oneshot::Receiver<()>) {
        let reason = tokio::select! {
            biased;
            _ = &mut stop => return,
            r = self.watch() => r,
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

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Mutex as StdMutex;

    use async_trait::async_trait;
    use tokio::sync::Notify;

    use super::*;
    use crate::client::{IntoClient, Op, OpResult, SessionState, Stat, ZkResult};

    /// A client whose session 1 owns the lock node: it hands the node's data watch to the
    /// test (and says so), and answers the heartbeat's reads.
    #[derive(Clone)]
    struct Fake {
        session: Arc<watch::Sender<SessionState>>,
        watch: Arc<StdMutex<Option<oneshot::Sender<EventType>>>>,
        armed: Arc<Notify>,
    }

    #[async_trait]
    impl ZkClient for Fake {
        async fn create_acl(
            &self,
            _: &str,
            _: &[u8],
            _: crate::CreateMode,
            _: &[crate::Acl],
        ) -> ZkResult<(String, Stat)> {
            Err(ErrorCode::Unimplemented)
        }
        async fn sync(&self, _: &str) -> ZkResult<()> {
            Ok(())
        }
        async fn delete(&self, _: &str, _: i32) -> ZkResult<()> {
            Err(ErrorCode::Unimplemented)
        }
        async fn set_data(&self, _: &str, _: &[u8], _: i32) -> ZkResult<Stat> {
            Err(ErrorCode::Unimplemented)
        }
        async fn exists(&self, _: &str) -> ZkResult<Option<Stat>> {
            Ok(Some(Stat::default()))
        }
        async fn get_data(&self, _: &str) -> ZkResult<(Vec<u8>, Stat)> {
            Err(ErrorCode::Unimplemented)
        }
        async fn get_data_watch(&self, _: &str) -> ZkResult<(Vec<u8>, Stat, WatchReceiver)> {
            let (tx, rx) = oneshot::channel();
            *self.watch.lock().expect("watch slot") = Some(tx);
            self.armed.notify_one();
            let stat = Stat {
                ephemeral_owner: 1,
                ..Stat::default()
            };
            Ok((Vec::new(), stat, rx))
        }
        async fn get_children(&self, _: &str) -> ZkResult<Vec<String>> {
            Err(ErrorCode::Unimplemented)
        }
        async fn multi(&self, _: &[Op]) -> ZkResult<Vec<OpResult>> {
            Err(ErrorCode::Unimplemented)
        }
        fn session(&self) -> watch::Receiver<SessionState> {
            self.session.subscribe()
        }
    }

    #[derive(Default)]
    struct Losses(AtomicUsize);

    impl LockMetrics for Losses {
        fn lost(&self, _: &str, _: LostReason) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// A release stops the monitor, then deletes the node: when the monitor next runs, the
    /// stop and the NodeDeleted of that delete are both in, and the lock was released, not
    /// lost. (With the two chosen at random, one run in two told of a loss; 64 runs.)
    #[tokio::test]
    async fn a_release_is_no_loss_when_the_delete_is_seen_at_once() {
        let state = SessionState::new(Connection::Connected, 0, Some(1), Duration::from_secs(10));
        let fake = Fake {
            session: Arc::new(watch::Sender::new(state)),
            watch: Arc::default(),
            armed: Arc::new(Notify::new()),
        };
        let client = fake.clone().into_client();
        let losses = Arc::new(Losses::default());
        for _ in 0..64 {
            let (lost_tx, lost_rx) = watch::channel(None);
            let (stop_tx, stop_rx) = oneshot::channel();
            let monitor = Monitor {
                client: client.clone(),
                lock_path: "/locks/a".into(),
                path: "/locks/a/_c_x-lock-0000000000".into(),
                epoch: 0,
                suspend_fraction: 0.5,
                lost: lost_tx,
                metrics: Some(losses.clone()),
            };
            let task = tokio::spawn(monitor.run(stop_rx));
            fake.armed.notified().await;
            // Both before the monitor runs again (one thread: it runs when this task waits).
            stop_tx.send(()).expect("the monitor is running");
            let watch = fake.watch.lock().expect("watch slot").take();
            watch
                .expect("an armed watch")
                .send(EventType::NodeDeleted)
                .expect("the monitor holds the watch");
            task.await.expect("the monitor task");
            assert_eq!(*lost_rx.borrow(), None, "a released lock published as lost");
        }
        assert_eq!(
            losses.0.load(Ordering::SeqCst),
            0,
            "losses told to the metrics"
        );
    }
}
