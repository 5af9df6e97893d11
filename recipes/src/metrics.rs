//! Metrics hooks: the recipes report what happened to a [`LockMetrics`] the application
//! supplies, and never depend on a metrics backend themselves.
//!
//! Every hook has an empty default, so an implementation forwards only what it records (to
//! `metrics`, `prometheus`, OpenTelemetry...). The lock path is passed as the label; the
//! hooks run on the recipe's task and must not block.

use std::time::Duration;

use crate::error::LostReason;

/// How an acquire that did not get the lock ended, as reported to
/// [`LockMetrics::acquire_failed`].
///
/// ```
/// assert_eq!(zooraft_recipes::AcquireOutcome::Busy.as_str(), "busy");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum AcquireOutcome {
    /// Another holder kept it until the deadline (or `try_acquire` found it taken).
    Busy,
    /// The deadline passed while the client was disconnected.
    Disconnected,
    /// The session expired during the acquire.
    SessionExpired,
    /// The client was closed.
    Closed,
    /// Any other error.
    Error,
}

impl AcquireOutcome {
    /// A short stable name, for metrics labels.
    pub fn as_str(self) -> &'static str {
        match self {
            AcquireOutcome::Busy => "busy",
            AcquireOutcome::Disconnected => "disconnected",
            AcquireOutcome::SessionExpired => "session_expired",
            AcquireOutcome::Closed => "closed",
            AcquireOutcome::Error => "error",
        }
    }
}

/// Receives the lock's events: wait time, hold time, and why locks were lost, by lock path.
///
/// ```
/// use std::sync::atomic::{AtomicU64, Ordering};
/// use std::time::Duration;
/// use zooraft_recipes::LockMetrics;
///
/// #[derive(Default)]
/// struct Counters { acquired: AtomicU64 }
/// impl LockMetrics for Counters {
///     fn acquired(&self, _lock_path: &str, _waited: Duration) {
///         self.acquired.fetch_add(1, Ordering::Relaxed);
///     }
/// }
/// let c = Counters::default();
/// c.acquired("/locks/a", Duration::from_millis(3));
/// assert_eq!(c.acquired.load(Ordering::Relaxed), 1);
/// ```
pub trait LockMetrics: Send + Sync + 'static {
    /// The lock at `lock_path` was acquired after waiting `waited` (local queueing included).
    fn acquired(&self, lock_path: &str, waited: Duration) {
        let _ = (lock_path, waited);
    }

    /// An acquire gave up without the lock, after `waited`.
    fn acquire_failed(&self, lock_path: &str, waited: Duration, outcome: AcquireOutcome) {
        let _ = (lock_path, waited, outcome);
    }

    /// The lock was released (its node deleted, or left to the session's end) after being
    /// held for `held`.
    fn released(&self, lock_path: &str, held: Duration) {
        let _ = (lock_path, held);
    }

    /// A held lock was lost.
    fn lost(&self, lock_path: &str, reason: LostReason) {
        let _ = (lock_path, reason);
    }
}
