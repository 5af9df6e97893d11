//! The Raft thread's clocks, behind a trait so that the in-process test harness can drive
//! time by hand: every deadline of the driver (ticks, session expiry, ReadIndex retries,
//! the serving grace period) is measured on [`Clock::now`], and the time stamped on a
//! batch (ctime/mtime, TTLs) is [`Clock::wall_ms`].

use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// A monotonic clock for deadlines and a wall clock for timestamps.
pub trait Clock: Send + Sync {
    /// Now, on the monotonic clock.
    fn now(&self) -> Instant;
    /// Milliseconds since the Unix epoch: the time the leader stamps on a batch.
    fn wall_ms(&self) -> i64;
}

/// The operating system's clocks.
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Instant {
        Instant::now()
    }

    fn wall_ms(&self) -> i64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or(0)
    }
}
