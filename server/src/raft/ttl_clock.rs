//! TTL nodes' ages on the leader's monotonic clock, so that a wall clock stepped forward
//! never reaps a TTL node early.
//!
//! A TTL node expires when it has gone unmodified for longer than its TTL. ZooKeeper
//! measures that on the wall clock (leader's now minus the node's mtime), and so would
//! delete every TTL node at once if the leader's clock jumped forward by more than their
//! TTLs. Here the leader deletes a node only when both clocks agree: the wall-clock age
//! (which keeps ZooKeeper's meaning across leaders and restarts) and the time this leader
//! has seen the node unmodified on its monotonic clock (which no clock step moves). A
//! backward step only delays reaping; a forward step cannot make it early. The monotonic
//! age starts when the leader first sees the node (at most one cleanup interval after it
//! is written, or when leadership starts), so a new leader may reap up to one TTL late —
//! never early.

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// Per TTL node: the mtime last seen and when this leader first saw the node with it.
#[derive(Default)]
pub struct TtlClock {
    seen: HashMap<String, (i64, Instant)>,
}

impl TtlClock {
    /// Forgets every age (a new leader, or a stalled loop: nothing was watched meanwhile).
    pub fn reset(&mut self) {
        self.seen.clear();
    }

    /// One cleanup round over every TTL node as `(path, mtime, ttl_ms)`: records new ones
    /// and returns whether each has stayed unmodified for its TTL on the monotonic clock.
    /// Nodes not passed (deleted) are forgotten.
    pub fn round<'a>(
        &mut self,
        nodes: impl Iterator<Item = (&'a str, i64, i64)>,
        now: Instant,
    ) -> Vec<String> {
        let mut old_enough = Vec::new();
        let mut next = HashMap::with_capacity(self.seen.len());
        for (path, mtime, ttl) in nodes {
            let since = match self.seen.remove(path) {
                Some((seen_mtime, since)) if seen_mtime == mtime => since,
                _ => now,
            };
            let ttl = Duration::from_millis(ttl.max(0) as u64);
            if now.saturating_duration_since(since) > ttl {
                old_enough.push(path.to_string());
            }
            next.insert(path.to_string(), (mtime, since));
        }
        self.seen = next;
        old_enough
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn age_counts_from_first_sight_and_restarts_on_modification() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        let mut c = TtlClock::default();
        assert!(c.round([("/a", 10, 100)].into_iter(), t0).is_empty());
        assert!(c
            .round([("/a", 10, 100)].into_iter(), t0 + ms(100))
            .is_empty());
        assert_eq!(
            c.round([("/a", 10, 100)].into_iter(), t0 + ms(101)),
            vec!["/a"]
        );
        // Modified: its age starts again.
        assert!(c
            .round([("/a", 11, 100)].into_iter(), t0 + ms(150))
            .is_empty());
        assert!(c
            .round([("/a", 11, 100)].into_iter(), t0 + ms(200))
            .is_empty());
        // Deleted and created again with the same mtime: a new node, a new age.
        assert!(c.round(std::iter::empty(), t0 + ms(300)).is_empty());
        assert!(c
            .round([("/a", 11, 100)].into_iter(), t0 + ms(301))
            .is_empty());
        c.reset();
        assert!(c
            .round([("/a", 11, 100)].into_iter(), t0 + ms(500))
            .is_empty());
    }
}
