//! What the recipes tell an operator: the `tracing` spans of an acquire, a release and a
//! lost lock, and the [`LockMetrics`] hooks (wait time, hold time, busy and lost reasons,
//! each labelled with its lock path), against Apache ZooKeeper and zooraft.
//!
//! The spans are captured by a subscriber installed for this test's thread only, so the
//! scenario runs on a current-thread runtime: every task the recipes spawn (the monitor,
//! the guaranteed delete) runs on that thread and reports to it.

use crate::common;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex as StdMutex};
use std::time::Duration;

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::Layer;
use zooraft_recipes::{AcquireOutcome, LockMetrics, LockOptions, LostReason, Mutex};
use zooraft_tests::ServerKind;

use common::{children, client, eventually, server};

/// One span as it was opened (and later recorded into).
#[derive(Debug, Clone)]
struct SeenSpan {
    id: u64,
    name: String,
    fields: BTreeMap<String, String>,
}

#[derive(Clone, Default)]
struct Spans(Arc<StdMutex<Vec<SeenSpan>>>);

struct Fields<'a>(&'a mut BTreeMap<String, String>);

impl Visit for Fields<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_string(), value.to_string());
    }
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0
            .insert(field.name().to_string(), format!("{value:?}"));
    }
}

impl<S: tracing::Subscriber> Layer<S> for Spans {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, _ctx: Context<'_, S>) {
        let mut fields = BTreeMap::new();
        attrs.record(&mut Fields(&mut fields));
        self.0.lock().unwrap().push(SeenSpan {
            id: id.into_u64(),
            name: attrs.metadata().name().to_string(),
            fields,
        });
    }
    fn on_record(&self, id: &Id, values: &Record<'_>, _ctx: Context<'_, S>) {
        let mut spans = self.0.lock().unwrap();
        if let Some(s) = spans.iter_mut().rev().find(|s| s.id == id.into_u64()) {
            values.record(&mut Fields(&mut s.fields));
        }
    }
}

impl Spans {
    /// The spans called `name` whose `path` field is `path`.
    fn named(&self, name: &str, path: &str) -> Vec<SeenSpan> {
        self.0
            .lock()
            .unwrap()
            .iter()
            .filter(|s| s.name == name && s.fields.get("path").map(String::as_str) == Some(path))
            .cloned()
            .collect()
    }
}

/// Every hook call, with its lock path.
#[derive(Default)]
struct Recorder {
    acquired: StdMutex<Vec<(String, Duration)>>,
    failed: StdMutex<Vec<(String, AcquireOutcome)>>,
    released: StdMutex<Vec<(String, Duration)>>,
    lost: StdMutex<Vec<(String, LostReason)>>,
}

impl LockMetrics for Recorder {
    fn acquired(&self, lock_path: &str, waited: Duration) {
        self.acquired
            .lock()
            .unwrap()
            .push((lock_path.to_string(), waited));
    }
    fn acquire_failed(&self, lock_path: &str, _waited: Duration, outcome: AcquireOutcome) {
        self.failed
            .lock()
            .unwrap()
            .push((lock_path.to_string(), outcome));
    }
    fn released(&self, lock_path: &str, held: Duration) {
        self.released
            .lock()
            .unwrap()
            .push((lock_path.to_string(), held));
    }
    fn lost(&self, lock_path: &str, reason: LostReason) {
        self.lost
            .lock()
            .unwrap()
            .push((lock_path.to_string(), reason));
    }
}

/// How long the waiter is kept waiting, and the holder holds: lower bounds the recorded
/// wait and hold times must reach (never upper bounds: the machine may be slow).
const BLOCKED: Duration = Duration::from_millis(400);

async fn spans_and_metrics(kind: ServerKind, spans: Spans) {
    let server = server(kind);
    let c = client(&server.connect_string()).await;
    let admin = client(&server.connect_string()).await;
    let (a, b) = ("/locks/observed-a", "/locks/observed-b");
    let metrics = Arc::new(Recorder::default());
    let options = LockOptions::default().metrics(metrics.clone());
    let mutex_a = Mutex::with_options(c.clone(), a, options.clone()).expect("options");
    let mutex_b = Mutex::with_options(c.clone(), b, options).expect("options");

    // Wait time: the acquire of `a` waits behind another holder for at least BLOCKED.
    let blocker = Mutex::new(admin.clone(), a)
        .acquire()
        .await
        .expect("blocker");
    let waiter = tokio::spawn({
        let m = mutex_a.clone();
        async move { m.acquire().await }
    });
    let o = admin.clone();
    eventually(Duration::from_secs(20), "waiter queued", move || {
        let o = o.clone();
        async move { children(&o, a).await.len() == 2 }
    })
    .await;
    tokio::time::sleep(BLOCKED).await;
    blocker.release().await.expect("release blocker");
    let guard = waiter.await.expect("task").expect("acquire a");
    // Hold time: held for at least BLOCKED.
    tokio::time::sleep(BLOCKED).await;
    let node_a = guard.node_path().to_string();
    guard.release().await.expect("release a");

    // Busy, then lost: `b` is taken by another, then ours is deleted by an operator.
    let other = Mutex::new(admin.clone(), b).acquire().await.expect("other");
    assert!(mutex_b.try_acquire().await.expect("try b").is_none());
    other.release().await.expect("release other");
    let guard = mutex_b.acquire().await.expect("acquire b");
    admin.delete(guard.node_path(), -1).await.expect("delete");
    let reason = tokio::time::timeout(Duration::from_secs(20), guard.lost())
        .await
        .expect("lost in time");
    assert_eq!(reason, LostReason::NodeDeleted);
    drop(guard);

    let acquired = metrics.acquired.lock().unwrap().clone();
    let paths: Vec<&str> = acquired.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(paths, [a, b], "acquired, by lock path");
    assert!(
        acquired[0].1 >= BLOCKED,
        "the wait time {:?} leaves out the time spent behind the holder",
        acquired[0].1
    );
    assert_eq!(
        *metrics.failed.lock().unwrap(),
        [(b.to_string(), AcquireOutcome::Busy)]
    );
    let o = metrics.clone();
    eventually(
        Duration::from_secs(10),
        "both releases reported",
        move || {
            let o = o.clone();
            async move { o.released.lock().unwrap().len() == 2 }
        },
    )
    .await;
    let released = metrics.released.lock().unwrap().clone();
    assert_eq!(released[0].0, a);
    assert!(
        released[0].1 >= BLOCKED,
        "the hold time {:?} is shorter than the lock was held",
        released[0].1
    );
    assert_eq!(released[1].0, b);
    assert_eq!(
        *metrics.lost.lock().unwrap(),
        [(b.to_string(), LostReason::NodeDeleted)]
    );

    // The spans: one per acquire (ours and the other client's), a release that records how
    // its delete ended, a lost lock with its reason.
    assert_eq!(spans.named("lock_acquire", a).len(), 2);
    assert_eq!(spans.named("lock_acquire", b).len(), 3);
    let ours = |s: &Spans| {
        s.named("lock_release", a)
            .into_iter()
            .find(|r| r.fields.get("node") == Some(&node_a))
    };
    let s = spans.clone();
    eventually(
        Duration::from_secs(10),
        "release outcome recorded",
        move || {
            let r = ours(&s);
            async move {
                r.is_some_and(|r| r.fields.get("outcome").map(String::as_str) == Some("deleted"))
            }
        },
    )
    .await;
    let release = ours(&spans).expect("our release span");
    let held_ms: u64 = release.fields["held_ms"].parse().expect("held_ms");
    assert!(held_ms >= BLOCKED.as_millis() as u64);
    let lost = spans.named("lock_lost", b);
    assert_eq!(lost.len(), 1, "one lost span: {lost:?}");
    assert_eq!(
        lost[0].fields.get("reason").map(String::as_str),
        Some("node_deleted")
    );
    assert!(spans.named("lock_lost", a).is_empty());
    assert!(children(&admin, a).await.is_empty());
    assert!(children(&admin, b).await.is_empty());
    c.close().await;
    admin.close().await;
}

/// Runs the scenario on a current-thread runtime under a span-capturing subscriber.
fn observed(kind: ServerKind) {
    let spans = Spans::default();
    let subscriber = tracing_subscriber::registry().with(spans.clone());
    let _default = tracing::subscriber::set_default(subscriber);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    rt.block_on(async {
        tokio::time::timeout(common::SCENARIO_TIMEOUT, spans_and_metrics(kind, spans))
            .await
            .expect("scenario timed out");
    });
    rt.shutdown_timeout(Duration::from_secs(5));
}

#[test]
fn spans_and_metrics_apache() {
    observed(ServerKind::Apache)
}

#[test]
fn spans_and_metrics_zooraft() {
    observed(ServerKind::Zooraft)
}
