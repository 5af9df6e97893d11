//! A write load from several clients (zookeeper-client sessions), for membership changes and
//! rolling restarts: each writer creates `<base>/w<i>-<k>` one after the other, retries an
//! attempt lost to ConnectionLoss (or a reset, or no answer within 10 s) with the same path
//! (NodeExists then means the lost one committed), and records what was acknowledged, any
//! other error, expired sessions, and the longest interval in which no write was
//! acknowledged by anyone while measuring (a stall: reported, never asserted on).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio::task::JoinHandle;
use zookeeper_client as zc;

use crate::zc::{connect, persistent};

const SESSION: Duration = Duration::from_secs(15);
/// A writer gives up on one attempt after this long and retries.
const ATTEMPT: Duration = Duration::from_secs(10);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// What the writers saw.
#[derive(Default)]
pub struct Load {
    acked: Mutex<Vec<String>>,
    last_ack: Mutex<Option<Instant>>,
    longest_stall: Mutex<Duration>,
    measuring: AtomicBool,
    expired: AtomicU64,
    connection_losses: AtomicU64,
    failed: Mutex<Vec<String>>,
    stop: AtomicBool,
}

/// What a finished load reports.
#[derive(Debug)]
pub struct LoadReport {
    /// Paths whose create was acknowledged.
    pub acked: Vec<String>,
    /// Errors other than ConnectionLoss (or a timed-out attempt).
    pub failed: Vec<String>,
    pub expired: u64,
    pub connection_losses: u64,
    /// The longest interval without an acknowledged write while measuring.
    pub longest_stall: Duration,
}

impl Load {
    fn ack(&self, path: String) {
        let now = Instant::now();
        let mut last = lock(&self.last_ack);
        if let Some(before) = *last {
            if self.measuring.load(Ordering::SeqCst) {
                let mut longest = lock(&self.longest_stall);
                *longest = (*longest).max(now - before);
            }
        }
        *last = Some(now);
        drop(last);
        lock(&self.acked).push(path);
    }

    /// Starts measuring stalls (or stops).
    pub fn measure(&self, on: bool) {
        self.measuring.store(on, Ordering::SeqCst);
    }
}

/// `writers` writers under `base` (created first) on `rt`, connected to `hosts`.
pub fn start(
    rt: &tokio::runtime::Runtime,
    hosts: &str,
    base: &str,
    writers: usize,
) -> (Arc<Load>, Vec<JoinHandle<()>>) {
    let load = Arc::new(Load::default());
    rt.block_on(async {
        let c = connect(hosts, SESSION, Duration::from_secs(30)).await;
        c.create(base, b"", &persistent())
            .await
            .unwrap_or_else(|e| panic!("create {base}: {e}"));
    });
    let handles = (0..writers)
        .map(|i| {
            let path = format!("{base}/w{i}-");
            rt.spawn(writer(path, hosts.to_string(), load.clone()))
        })
        .collect();
    (load, handles)
}

/// Stops the writers (bounded) and reports.
pub fn finish(
    rt: &tokio::runtime::Runtime,
    load: &Load,
    writers: Vec<JoinHandle<()>>,
) -> LoadReport {
    load.measure(false);
    load.stop.store(true, Ordering::SeqCst);
    rt.block_on(async {
        for w in writers {
            let _ = tokio::time::timeout(Duration::from_secs(30), w).await;
        }
    });
    LoadReport {
        acked: lock(&load.acked).clone(),
        failed: lock(&load.failed).clone(),
        expired: load.expired.load(Ordering::SeqCst),
        connection_losses: load.connection_losses.load(Ordering::SeqCst),
        longest_stall: *lock(&load.longest_stall),
    }
}

async fn writer(prefix: String, hosts: String, load: Arc<Load>) {
    let client = connect(&hosts, SESSION, Duration::from_secs(30)).await;
    let mut k = 0u64;
    while !load.stop.load(Ordering::SeqCst) {
        k += 1;
        let path = format!("{prefix}{k:06}");
        let mut retried = false;
        loop {
            let attempt =
                tokio::time::timeout(ATTEMPT, client.create(&path, b"x", &persistent())).await;
            match attempt {
                Ok(Ok(_)) => break load.ack(path),
                Ok(Err(zc::Error::NodeExists)) if retried => break load.ack(path),
                // zookeeper-client reports the connection's I/O error (a reset) as a custom
                // error: a connection loss all the same.
                Ok(Err(zc::Error::ConnectionLoss | zc::Error::Custom(_))) | Err(_) => {
                    load.connection_losses.fetch_add(1, Ordering::SeqCst);
                    retried = true;
                    if load.stop.load(Ordering::SeqCst) {
                        return;
                    }
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                Ok(Err(zc::Error::SessionExpired)) => {
                    load.expired.fetch_add(1, Ordering::SeqCst);
                    return;
                }
                Ok(Err(e)) => {
                    lock(&load.failed).push(format!("{path}: {e}"));
                    break;
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The acknowledged paths under `base` that the member at `hosts` does not have (after a
/// `sync`, so it has applied everything the leader had committed).
pub fn missing(
    rt: &tokio::runtime::Runtime,
    hosts: &str,
    base: &str,
    acked: &[String],
) -> Vec<String> {
    rt.block_on(async {
        let c = connect(hosts, SESSION, Duration::from_secs(30)).await;
        c.sync(base).await.expect("sync");
        let children = c.list_children(base).await.expect("children");
        let present: std::collections::HashSet<String> = children.into_iter().collect();
        let prefix = format!("{base}/");
        acked
            .iter()
            .filter(|p| !present.contains(p.trim_start_matches(&prefix)))
            .cloned()
            .collect()
    })
}
