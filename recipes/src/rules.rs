//! The lock's rules, shared by every recipe and by the participants listing: which node
//! kinds there are (their names and markers), and who holds given the contenders in
//! sequence order (Curator's `getsTheLock`). Pure functions of names: no I/O.

use crate::names::{
    Contender, LATCH_MARKERS, LATCH_NAME, LEASE_MARKERS, LEASE_NAME, MUTEX_LOCK_NAME,
    MUTEX_MARKERS, READ_LOCK_NAME, RW_MARKERS, WRITE_LOCK_NAME,
};

/// Which recipe a lock core implements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Mutex,
    Read,
    Write,
    /// A leader latch participant: granted like a mutex.
    Latch,
    /// A semaphore lease: granted while the leases number at most the maximum.
    Lease,
}

impl Kind {
    pub(crate) fn lock_name(self) -> &'static str {
        match self {
            Kind::Mutex => MUTEX_LOCK_NAME,
            Kind::Read => READ_LOCK_NAME,
            Kind::Write => WRITE_LOCK_NAME,
            Kind::Latch => LATCH_NAME,
            Kind::Lease => LEASE_NAME,
        }
    }

    pub(crate) fn markers(self) -> &'static [&'static str] {
        match self {
            Kind::Mutex => MUTEX_MARKERS,
            Kind::Read | Kind::Write => RW_MARKERS,
            Kind::Latch => LATCH_MARKERS,
            Kind::Lease => LEASE_MARKERS,
        }
    }
}

/// True for a read-write lock node written by a writer (its last marker is `__WRIT__`).
pub(crate) fn is_write_node(name: &str) -> bool {
    match (name.rfind(WRITE_LOCK_NAME), name.rfind(READ_LOCK_NAME)) {
        (Some(w), Some(r)) => w > r,
        (Some(_), None) => true,
        _ => false,
    }
}

/// What a contender at `idx` does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Decision {
    Granted,
    /// Wait for this node to go.
    Watch(String),
    /// Wait for the children to change (a semaphore with every lease taken).
    WatchChildren,
}

/// Curator's `getsTheLock`: a mutex or a writer holds when it is first; a reader holds when
/// no writer is before it, and otherwise watches the first writer.
pub(crate) fn decide(kind: Kind, sorted: &[Contender], idx: usize) -> Decision {
    match kind {
        // A lease is decided by counting (see `Queue::attempt`), never by order.
        Kind::Lease => Decision::Granted,
        Kind::Mutex | Kind::Write | Kind::Latch => {
            if idx == 0 {
                Decision::Granted
            } else {
                Decision::Watch(sorted[idx - 1].name.clone())
            }
        }
        Kind::Read => match sorted[..idx].iter().find(|c| is_write_node(&c.name)) {
            None => Decision::Granted,
            Some(w) => Decision::Watch(w.name.clone()),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(name: &str, seq: i64) -> Contender {
        Contender {
            name: name.into(),
            sequence: seq,
        }
    }

    #[test]
    fn mutex_watches_its_predecessor() {
        let s = vec![c("a-lock-1", 1), c("b-lock-2", 2), c("c-lock-3", 3)];
        assert_eq!(decide(Kind::Mutex, &s, 0), Decision::Granted);
        assert_eq!(
            decide(Kind::Mutex, &s, 2),
            Decision::Watch("b-lock-2".into())
        );
    }

    #[test]
    fn readers_share_until_a_writer() {
        let s = vec![
            c("a-__READ__1", 1),
            c("b-__READ__2", 2),
            c("c-__WRIT__3", 3),
            c("d-__READ__4", 4),
            c("e-__WRIT__5", 5),
        ];
        assert_eq!(decide(Kind::Read, &s, 1), Decision::Granted);
        assert_eq!(
            decide(Kind::Read, &s, 3),
            Decision::Watch("c-__WRIT__3".into())
        );
        assert_eq!(
            decide(Kind::Write, &s, 2),
            Decision::Watch("b-__READ__2".into())
        );
        assert_eq!(
            decide(Kind::Write, &s, 4),
            Decision::Watch("d-__READ__4".into())
        );
        assert!(is_write_node("_c_x-__WRIT__0000000001"));
        assert!(!is_write_node("_c_x-__READ__0000000001"));
    }
}
