//! One heartbeat per session, shared by every lock held through that client.
//!
//! The lost-lock signal needs to know when the server last answered, independently of when
//! the client library notices a dead socket. A small read proves it. Sending one per held
//! lock would multiply the load by the number of locks for no extra knowledge (the session is
//! what the server expires, not the lock), so the monitors of all locks held through one
//! client subscribe to one heartbeat task. The task runs while any subscriber holds it and
//! beats at the shortest interval any subscriber asked for.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex as StdMutex, Weak};
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use crate::client::{Connection, ZkClient};

/// The shortest interval a heartbeat beats at, whatever a subscriber asks.
const MIN_INTERVAL: Duration = Duration::from_millis(20);

/// A running heartbeat: when the server last answered (the time the answered request was
/// sent, a lower bound).
pub(crate) struct Heartbeat {
    client: Weak<dyn ZkClient>,
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

/// The live heartbeats, one per client.
static REGISTRY: StdMutex<Vec<Weak<Heartbeat>>> = StdMutex::new(Vec::new());

/// The heartbeat of `client` (started if none runs), beating at least every `interval`.
pub(crate) fn heartbeat(client: &Arc<dyn ZkClient>, interval: Duration) -> Arc<Heartbeat> {
    let mut reg = REGISTRY.lock().unwrap_or_else(|e| e.into_inner());
    reg.retain(|w| w.strong_count() > 0);
    for w in reg.iter() {
        if let Some(hb) = w.upgrade() {
            if hb.client.upgrade().is_some_and(|c| Arc::ptr_eq(&c, client)) {
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
        client: Arc::downgrade(client),
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
