//! Session ids and passwords, made by the member a client connects to.
//!
//! The session *table* is replicated state (`StateMachine::sessions`); the id generator is
//! local, with ZooKeeper's layout (member id in the top byte, start time below, then a
//! counter), so ids are unique across the ensemble and across restarts.

use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

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
}
