//! Session deadlines, which only the leader acts on.
//!
//! Every member tracks the deadline of every session as sessions are created and closed;
//! the leader touches them as traffic is reported (its own connections, and followers'
//! touches in batches) and expires a session past its deadline with a replicated close. A
//! new leader re-arms every session with a full timeout, as ZooKeeper's
//! `SessionTrackerImpl` does, so a failover never expires sessions en masse.

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// Deadlines of live sessions; only the leader acts on them.
#[derive(Default)]
pub struct ExpiryTracker {
    sessions: HashMap<i64, (Instant, Duration)>,
}

impl ExpiryTracker {
    /// A session was created (or is known at leadership start): full timeout from `now`.
    pub fn add(&mut self, session: i64, timeout_ms: i32, now: Instant) {
        let timeout = Duration::from_millis(timeout_ms.max(0) as u64);
        self.sessions.insert(session, (now + timeout, timeout));
    }

    pub fn remove(&mut self, session: i64) {
        self.sessions.remove(&session);
    }

    /// The session showed signs of life.
    pub fn touch(&mut self, session: i64, now: Instant) {
        if let Some((deadline, timeout)) = self.sessions.get_mut(&session) {
            *deadline = now + *timeout;
        }
    }

    /// Re-arms every session with a full timeout (a new leader).
    pub fn rearm(&mut self, sessions: impl Iterator<Item = (i64, i32)>, now: Instant) {
        self.sessions.clear();
        for (id, timeout) in sessions {
            self.add(id, timeout, now);
        }
    }

    /// Sessions past their deadline; they are removed (a close is being proposed for each).
    pub fn take_expired(&mut self, now: Instant) -> Vec<i64> {
        let expired: Vec<i64> = self
            .sessions
            .iter()
            .filter(|(_, (deadline, _))| *deadline <= now)
            .map(|(id, _)| *id)
            .collect();
        for id in &expired {
            self.sessions.remove(id);
        }
        expired
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.sessions.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn touches_postpone_expiry() {
        let t0 = Instant::now();
        let mut t = ExpiryTracker::default();
        t.add(1, 1000, t0);
        t.add(2, 1000, t0);
        t.touch(1, t0 + Duration::from_millis(800));
        assert_eq!(t.take_expired(t0 + Duration::from_millis(1001)), vec![2]);
        assert!(t.take_expired(t0 + Duration::from_millis(1700)).is_empty());
        assert_eq!(t.take_expired(t0 + Duration::from_millis(1801)), vec![1]);
        t.rearm([(5, 100)].into_iter(), t0);
        assert_eq!(t.len(), 1);
    }
}
