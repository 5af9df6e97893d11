//! The async plumbing every end-to-end test needs, and the bounded waits: a small runtime
//! (the machines have two cores) and a bound on every wait, so a test that hangs fails with a
//! message instead of stalling CI.
//!
//! Three ways to wait, one each for the three shapes a test waits in:
//! - [`within`]: one future, which must finish within a bound (a request, an event);
//! - [`eventually`]: a synchronous check, polled until it yields a value (a four-letter word
//!   reports what the test expects, a member stops serving);
//! - [`eventually_async`]: the same with an async check (a client sees an ephemeral go).
//!
//! Each panics naming what it waited for and the bound it gave up after, in the same words:
//! `timed out after 30s waiting for <what>`.

use std::future::Future;
use std::time::{Duration, Instant};

/// How long [`eventually`] and [`eventually_async`] sleep between two checks.
pub const POLL_INTERVAL: Duration = Duration::from_millis(50);

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

#[track_caller]
fn timed_out(what: &str, limit: Duration) -> ! {
    panic!("timed out after {limit:?} waiting for {what}")
}

/// Awaits `f` for at most `limit`; panics naming `what` if it takes longer.
pub async fn within<T>(what: &str, limit: Duration, f: impl Future<Output = T>) -> T {
    match tokio::time::timeout(limit, f).await {
        Ok(v) => v,
        Err(_) => timed_out(what, limit),
    }
}

/// Calls `check` every [`POLL_INTERVAL`] until it returns `Some`, and returns that value;
/// panics naming `what` once `limit` has passed without one. `check` runs at least once, and
/// may itself panic to fail at once (a process that exited, a state that can never change).
///
/// For threads outside a runtime; an async test polls with [`eventually_async`], which does
/// not block a runtime thread between checks.
#[track_caller]
pub fn eventually<T>(what: &str, limit: Duration, mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(v) = check() {
            return v;
        }
        if Instant::now() >= deadline {
            timed_out(what, limit);
        }
        std::thread::sleep(POLL_INTERVAL);
    }
}

/// Awaits `check()` every [`POLL_INTERVAL`] until it yields `Some`, and returns that value;
/// panics naming `what` once `limit` has passed without one, also when a single check is
/// still pending then (a request the server never answers).
pub async fn eventually_async<T, F, Fut>(what: &str, limit: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    within(what, limit, async {
        loop {
            if let Some(v) = check().await {
                return v;
            }
            tokio::time::sleep(POLL_INTERVAL).await;
        }
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eventually_returns_the_first_value() {
        let mut calls = 0;
        let v = eventually("the third call", Duration::from_secs(5), || {
            calls += 1;
            (calls == 3).then_some(calls * 10)
        });
        assert_eq!((v, calls), (30, 3));
    }

    #[test]
    #[should_panic(expected = "timed out after 200ms waiting for nothing")]
    fn eventually_gives_up_after_its_bound() {
        eventually("nothing", Duration::from_millis(200), || None::<()>);
    }

    #[test]
    fn eventually_async_polls_an_async_check() {
        let mut calls = 0;
        let v = block_on(eventually_async(
            "the second call",
            Duration::from_secs(5),
            || {
                calls += 1;
                let n = calls;
                async move { (n == 2).then_some("done") }
            },
        ));
        assert_eq!((v, calls), ("done", 2));
    }

    #[test]
    #[should_panic(expected = "timed out after 200ms waiting for a hung check")]
    fn eventually_async_bounds_a_check_that_hangs() {
        block_on(eventually_async(
            "a hung check",
            Duration::from_millis(200),
            std::future::pending::<Option<()>>,
        ));
    }
}
