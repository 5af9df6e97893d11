//! One heartbeat per session, shared by every lock held through that client.
//!
//! The lost-lock signal needs to know when the server last answered, independently of when
//! the client library notices a dead socket. A small read proves it. Sending one per held
//! lock would multiply the load by the number of locks for no extra knowledge (the session is
//! what the server expires, not the lock), so the monitors of all locks held through one
//! client subscribe to one heartbeat task. "One client" is one session channel
//! ([`ZkClient::session`]), not one `Arc`: the clones of a client handle, each made into its
//! own `Arc<dyn ZkClient>` by a recipe constructor, share one heartbeat. The task runs while any subscriber holds it and
//! beats at the shortest interval any subscriber asked for.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex as StdMutex, Weak};
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use crate::client::{Connection, SessionState, ZkClient};

/// The shortest interval a heartbeat beats at, whatever a subscriber asks.
const MIN_INTERVAL: Duration = Duration::from_millis(20);

/// A running heartbeat: when the server last answered (the time the answered request was
/// sent, a lower bound).
pub(crate) struct Heartbeat {
    /// Which session: a receiver of the client's session channel.
    session: watch::Receiver<SessionState>,
    last_heard: watch::Receiver<Instant>,
    interval_ms: Arc<AtomicU64>,
    task: tokio::task::AbortHandle,
}

impl Heartbeat {
    /// The latest time the server was heard from.
    pub fn subscribe(&self) -> watch::Receiver<Instant> {
        self.last_heard.clone()
    }

    /// Asks for beats at least every `interval`.
    fn want(&self, interval: Duration) {
        let ms = (interval.max(MIN_INTERVAL).as_millis() as u64).max(1);
        self.interval_ms.fetch_min(ms, Ordering::SeqCst);
    }
}

impl Drop for Heartbeat {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The live heartbeats, one per session channel.
static REGISTRY: StdMutex<Vec<Weak<Heartbeat>>> = StdMutex::new(Vec::new());

/// The heartbeat of `client` (started if none runs), beating at least every `interval`.
pub(crate) fn heartbeat(client: &Arc<dyn ZkClient>, interval: Duration) -> Arc<Heartbeat> {
    let mut reg = REGISTRY.lock().unwrap_or_else(|e| e.into_inner());
    reg.retain(|w| w.strong_count() > 0);
    let session = client.session();
    for w in reg.iter() {
        if let Some(hb) = w.upgrade() {
            if hb.session.same_channel(&session) {
                hb.want(interval);
                return hb;
            }
        }
    }
    let interval_ms = Arc::new(AtomicU64::new(
        (interval.max(MIN_INTERVAL).as_millis() as u64).max(1),
    ));
    let (tx, rx) = watch::channel(Instant::now());
    let task = tokio::spawn(beat(client.clone(), tx, interval_ms.clone()));
    let hb = Arc::new(Heartbeat {
        session,
        last_heard: rx,
        interval_ms,
        task: task.abort_handle(),
    });
    reg.push(Arc::downgrade(&hb));
    hb
}

async fn beat(client: Arc<dyn ZkClient>, tx: watch::Sender<Instant>, interval_ms: Arc<AtomicU64>) {
    let mut session = client.session();
    loop {
        let interval = Duration::from_millis(interval_ms.load(Ordering::SeqCst));
        let connected = session.borrow_and_update().connection == Connection::Connected;
        if connected {
            let sent = Instant::now();
            // A reply that takes longer than a few intervals is as good as none.
            if let Ok(Ok(_)) = tokio::time::timeout(interval * 4, client.exists("/")).await {
                tx.send_modify(|t| *t = (*t).max(sent));
            }
        }
        let next = Instant::now() + interval;
        tokio::select! {
            _ = tokio::time::sleep_until(next) => {}
            changed = session.changed(), if !connected => {
                if changed.is_err() {
                    return;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use async_trait::async_trait;

    use super::*;
    use crate::client::{ErrorCode, IntoClient, Op, OpResult, Stat, WatchReceiver, ZkResult};

    /// A client that answers every read: a clone shares the session channel, like the real
    /// handles' clones.
    #[derive(Clone)]
    struct Fake(Arc<watch::Sender<SessionState>>);

    impl Fake {
        fn new() -> Fake {
            let state =
                SessionState::new(Connection::Connected, 0, Some(1), Duration::from_secs(10));
            Fake(Arc::new(watch::Sender::new(state)))
        }
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
            Err(ErrorCode::Unimplemented)
        }
        async fn get_children(&self, _: &str) -> ZkResult<Vec<String>> {
            Err(ErrorCode::Unimplemented)
        }
        async fn multi(&self, _: &[Op]) -> ZkResult<Vec<OpResult>> {
            Err(ErrorCode::Unimplemented)
        }
        fn session(&self) -> watch::Receiver<SessionState> {
            self.0.subscribe()
        }
    }

    /// Each recipe constructor wraps its clone of a handle in an `Arc` of its own: the clones
    /// still share one heartbeat, and another client gets its own.
    #[tokio::test]
    async fn clones_of_one_handle_share_a_heartbeat() {
        let handle = Fake::new();
        let a = handle.clone().into_client();
        let b = handle.clone().into_client();
        let c = Arc::new(handle).into_client();
        assert!(!Arc::ptr_eq(&a, &b));
        let hb = heartbeat(&a, Duration::from_secs(1));
        assert!(Arc::ptr_eq(&hb, &heartbeat(&b, Duration::from_secs(1))));
        assert!(Arc::ptr_eq(&hb, &heartbeat(&c, Duration::from_secs(1))));
        let other = Fake::new().into_client();
        assert!(!Arc::ptr_eq(
            &hb,
            &heartbeat(&other, Duration::from_secs(1))
        ));
    }
}
