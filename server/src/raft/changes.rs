//! The leader and membership changes this member saw, recorded by the Raft thread at the
//! moment it notices each one (a new leader in raft-rs's soft state, a conf change
//! applied), for the console's timeline. A poll of the status would miss a tenure shorter
//! than its interval; this misses none.
//!
//! A small ring owned by [`Changes`]: the Raft thread pushes under a mutex held for the
//! push alone (no I/O, no allocation beyond the entry's member lists), and readers copy
//! what they need out of it. At most [`KEPT`] changes are kept; the oldest goes first.

use std::collections::VecDeque;
use std::time::{SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;

/// Changes kept at most (a flapping ensemble's hour may hold more: the oldest go).
pub const KEPT: usize = 256;

/// One change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// The leader became `leader` (0: none known) in `term`; it was `previous` (0: none,
    /// `None` for the first one this member saw since it started).
    Leader {
        leader: u64,
        previous: Option<u64>,
        term: u64,
    },
    /// Raft's membership became these voters and learners (observers, and members that
    /// are catching up), at log index `index` (0: as the member started).
    Membership {
        voters: Vec<u64>,
        learners: Vec<u64>,
        index: u64,
    },
}

/// A change and when it was seen (milliseconds since the epoch).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    pub at_ms: i64,
    pub change: Change,
}

#[derive(Default)]
struct Inner {
    ring: VecDeque<Seen>,
    leader: Option<u64>,
    members: Option<(Vec<u64>, Vec<u64>)>,
}

/// See the module docs.
#[derive(Default)]
pub struct Changes {
    inner: Mutex<Inner>,
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

impl Changes {
    /// The leader is now `leader` (0: none) in `term`; noted if it differs from the last.
    pub fn leader(&self, leader: u64, term: u64) {
        self.leader_at(leader, term, now_ms());
    }

    fn leader_at(&self, leader: u64, term: u64, at_ms: i64) {
        let mut inner = self.inner.lock();
        if inner.leader == Some(leader) {
            return;
        }
        let previous = inner.leader.replace(leader);
        let change = Change::Leader {
            leader,
            previous,
            term,
        };
        push(&mut inner.ring, Seen { at_ms, change });
    }

    /// Raft's membership is now `voters` and `learners` (in any order) after the entry at
    /// `index`; noted if it differs from the last (a joint step that changes nothing
    /// visible is not).
    pub fn membership(&self, voters: &[u64], learners: &[u64], index: u64) {
        self.membership_at(voters, learners, index, now_ms());
    }

    fn membership_at(&self, voters: &[u64], learners: &[u64], index: u64, at_ms: i64) {
        let sorted = |ids: &[u64]| {
            let mut v = ids.to_vec();
            v.sort_unstable();
            v.dedup();
            v
        };
        let (voters, learners) = (sorted(voters), sorted(learners));
        let mut inner = self.inner.lock();
        if inner.members.as_ref() == Some(&(voters.clone(), learners.clone())) {
            return;
        }
        inner.members = Some((voters.clone(), learners.clone()));
        let change = Change::Membership {
            voters,
            learners,
            index,
        };
        push(&mut inner.ring, Seen { at_ms, change });
    }

    /// The changes seen since `since_ms` (milliseconds since the epoch), oldest first.
    pub fn since(&self, since_ms: i64) -> Vec<Seen> {
        let inner = self.inner.lock();
        inner
            .ring
            .iter()
            .filter(|s| s.at_ms >= since_ms)
            .cloned()
            .collect()
    }
}

fn push(ring: &mut VecDeque<Seen>, seen: Seen) {
    if ring.len() == KEPT {
        ring.pop_front();
    }
    ring.push_back(seen);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_change_is_kept_once_and_the_ring_is_bounded() {
        let c = Changes::default();
        c.leader_at(0, 1, 1);
        c.leader_at(2, 1, 2);
        c.leader_at(2, 1, 3);
        // A tenure of no time at all is still there.
        c.leader_at(3, 2, 4);
        c.leader_at(1, 3, 4);
        c.membership_at(&[3, 1, 2], &[], 0, 5);
        c.membership_at(&[1, 2, 3], &[], 9, 6);
        c.membership_at(&[1, 2, 3], &[4], 10, 7);
        let seen = c.since(0);
        assert_eq!(seen.len(), 6);
        assert_eq!(
            seen[2].change,
            Change::Leader {
                leader: 3,
                previous: Some(2),
                term: 2
            }
        );
        assert_eq!(
            seen[0].change,
            Change::Leader {
                leader: 0,
                previous: None,
                term: 1
            }
        );
        assert!(matches!(&seen[5].change, Change::Membership { learners, .. } if learners == &[4]));
        assert_eq!(c.since(5).len(), 2);
        for i in 0..(KEPT as u64 * 2) {
            c.leader_at(i + 10, i, 100 + i as i64);
        }
        let seen = c.since(0);
        assert_eq!(seen.len(), KEPT);
        assert_eq!(seen[KEPT - 1].at_ms, 100 + KEPT as i64 * 2 - 1);
    }
}
