//! Servers that dial in to join before a reconfig names them.
//!
//! ZooKeeper's manual sets a joining server up with the current members and itself in its
//! configuration, started before the reconfig that adds it; ZooKeeper's leader syncs it
//! as a (non-voting) follower meanwhile, so `srvr` shows it ready before the operator adds
//! it. zooraft's leader does the same with Raft: a peer with a new (untrusted) store that
//! the committed configuration does not name is a joiner, kept as a Raft learner while it
//! stays connected (reached back over the connection it dialled: the leader has no address
//! for it yet) and trusted once caught up, as an observer would be (`recovery.rs`). The
//! reconfig that adds it then finds it caught up; one that never comes leaves it a learner,
//! given up [`GRACE`] after its last connection closed.
//!
//! This is the joiners' bookkeeping alone; `membership.rs` adds and removes the learners.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// How long a joiner may be gone (every connection with it closed) before its learner slot
/// is given up: long enough for a reconnect, short enough that a server that was stopped
/// instead of added does not stay in Raft's membership.
pub const GRACE: Duration = Duration::from_secs(10);

/// See the module docs.
#[derive(Debug, Default)]
pub struct Joiners {
    /// Each joiner, and since when it is gone (None while connected).
    seen: BTreeMap<u64, Option<Instant>>,
}

impl Joiners {
    /// A joiner said who it is (again): connected.
    pub fn heard(&mut self, id: u64) {
        self.seen.insert(id, None);
    }

    /// Every connection with `id` closed.
    pub fn gone(&mut self, id: u64, now: Instant) {
        if let Some(since) = self.seen.get_mut(&id) {
            since.get_or_insert(now);
        }
    }

    /// Forgets the joiners the configuration names now (they are members) and those gone
    /// for longer than [`GRACE`].
    pub fn prune(&mut self, named: impl Fn(u64) -> bool, now: Instant) {
        self.seen.retain(|id, since| {
            !named(*id) && since.is_none_or(|t| now.saturating_duration_since(t) < GRACE)
        });
    }

    pub fn contains(&self, id: u64) -> bool {
        self.seen.contains_key(&id)
    }

    /// The joiners, in id order.
    pub fn ids(&self) -> impl Iterator<Item = u64> + '_ {
        self.seen.keys().copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_joiner_is_kept_while_connected_and_for_a_grace_after() {
        let t0 = Instant::now();
        let mut j = Joiners::default();
        j.heard(4);
        j.heard(5);
        j.gone(4, t0);
        j.prune(|_| false, t0 + GRACE / 2);
        assert_eq!(j.ids().collect::<Vec<_>>(), vec![4, 5]);
        // Back before the grace ran out: connected again, the clock starts over.
        j.heard(4);
        j.prune(|_| false, t0 + GRACE * 2);
        assert!(j.contains(4));
        j.gone(4, t0 + GRACE * 2);
        j.gone(4, t0 + GRACE * 3); // the first time it went counts
        j.prune(|_| false, t0 + GRACE * 3);
        assert!(!j.contains(4));
        assert!(j.contains(5), "5 never left");
        // A reconfig named 5: a member now, no joiner.
        j.prune(|id| id == 5, t0);
        assert_eq!(j.ids().count(), 0);
        // A peer that was never a joiner going away changes nothing.
        j.gone(7, t0);
        assert!(!j.contains(7));
    }
}
