//! The async plumbing every end-to-end test needs: a small runtime (the machines have two
//! cores) and a bound on every wait, so a test that hangs fails with a message instead of
//! stalling CI.

use std::future::Future;
use std::time::Duration;

/// A two-worker tokio runtime.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime")
}

/// Runs `f` to completion on a fresh [`runtime`].
pub fn block_on<F: Future>(f: F) -> F::Output {
    runtime().block_on(f)
}

/// Awaits `f` for at most `limit`; panics naming `what` if it takes longer.
pub async fn within<T>(what: &str, limit: Duration, f: impl Future<Output = T>) -> T {
    match tokio::time::timeout(limit, f).await {
        Ok(v) => v,
        Err(_) => panic!("timed out after {limit:?} waiting for {what}"),
    }
}
