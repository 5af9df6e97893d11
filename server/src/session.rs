//! Session ids, passwords and deadlines.
//!
//! The session *table* is replicated state ([`crate::state::StateMachine::sessions`]);
//! this module holds what is local: the id generator (ZooKeeper's layout: member id in the
//! top byte, start time below, then a counter, so ids are unique across the ensemble and
//! across restarts) and the [`ExpiryTracker`] the leader uses to decide expiry. A new
//! leader re-arms every session with a full timeout, as ZooKeeper's `SessionTrackerImpl`
//! does, so a failover never expires sessions en masse.

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rand::RngCore;

/// Hands out session ids.
pub struct SessionIds {
    next: AtomicI64,
}

impl SessionIds {
    /// ZooKeeper's `initializeNextSessionId`: `(now_ms << 24) >>> 8 | member << 56`.
    pub fn new(member: u64) -> SessionIds {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0);
        let base = ((now << 24) >> 8) | ((member & 0xff) << 56);
        SessionIds {
            next: AtomicI64::new(base as i64),
        }
    }

    pub fn next(&self) -> i64 {
        self.next.fetch_add(1, Ordering::Relaxed)
    }
}

/// A fresh random session password.
pub fn new_password() -> [u8; 16] {
    let mut p = [0u8; 16];
    rand::thread_rng().fill_bytes(&mut p);
    p
}

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

    pub fn len(&self) -> usize {
        self.sessions.len()
    }

    pub fn is_empty(&self) -> bool {
        self.sessions.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_carry_the_member_and_increase() {
        let ids = SessionIds::new(3);
        let a = ids.next();
        let b = ids.next();
        assert_eq!(b, a + 1);
        assert_eq!((a as u64) >> 56, 3);
        assert_ne!(new_password(), new_password());
    }

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
