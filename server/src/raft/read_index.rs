//! ReadIndex bookkeeping for `sync`, for reads under `linearizableReads`, and for
//! handshakes that must know every session the leader knows: who waits, what raft-rs
//! answered, and when a waiter may go.
//!
//! Waiters that arrive in one turn of the loop share one request (a batch): each ReadIndex
//! request costs the leader a heartbeat round to a quorum, and a batch asked after all its
//! waiters arrived is as fresh for each of them. A request is identified by a sequence
//! number sent to raft-rs as the request context. raft-rs answers with a `ReadState` (the
//! leader's commit index when the request was confirmed by a quorum); the batch is released
//! once this member has applied up to that index. raft-rs drops requests silently (no
//! leader yet, or a leader that has not committed in its term), so unanswered ones are
//! asked again after a while.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use super::input::SyncWaiter;

struct Pending {
    waiters: Vec<SyncWaiter>,
    asked: Instant,
}

/// See the module docs.
#[derive(Default)]
pub struct ReadIndex {
    /// Arrived this turn, not asked yet.
    batch: Vec<SyncWaiter>,
    pending: HashMap<u64, Pending>,
    last_ctx: u64,
    /// Answered by raft-rs: (index to reach, request context).
    answered: Vec<(u64, u64)>,
}

impl ReadIndex {
    /// Registers a waiter; it is asked for with the others of this turn by [`ask`](Self::ask).
    pub fn request(&mut self, waiter: SyncWaiter) {
        self.batch.push(waiter);
    }

    /// The context to hand to `RawNode::read_index` for the waiters that arrived since the
    /// last call, if any.
    pub fn ask(&mut self, now: Instant) -> Option<Vec<u8>> {
        if self.batch.is_empty() {
            return None;
        }
        self.last_ctx += 1;
        let ctx = self.last_ctx;
        let waiters = std::mem::take(&mut self.batch);
        self.pending.insert(
            ctx,
            Pending {
                waiters,
                asked: now,
            },
        );
        Some(ctx.to_be_bytes().to_vec())
    }

    /// raft-rs answered a request: its waiters may go once `index` is applied. A context
    /// that is not ours is ignored.
    pub fn answered(&mut self, index: u64, ctx: &[u8]) {
        if let Ok(ctx) = <[u8; 8]>::try_from(ctx) {
            self.answered.push((index, u64::from_be_bytes(ctx)));
        }
    }

    /// The waiters whose index is applied, removed from the books.
    pub fn take_resolved(&mut self, applied: u64) -> Vec<SyncWaiter> {
        if self.answered.is_empty() {
            return Vec::new();
        }
        let mut done = Vec::new();
        let pending = &mut self.pending;
        self.answered.retain(|(index, ctx)| {
            if *index > applied {
                return true;
            }
            if let Some(p) = pending.remove(ctx) {
                done.extend(p.waiters);
            }
            false
        });
        done
    }

    /// Contexts asked at least `after` ago and not answered: to be asked again (now).
    pub fn due_for_retry(&mut self, now: Instant, after: Duration) -> Vec<Vec<u8>> {
        let mut again = Vec::new();
        for (ctx, p) in self.pending.iter_mut() {
            if now.duration_since(p.asked) >= after {
                p.asked = now;
                again.push(ctx.to_be_bytes().to_vec());
            }
        }
        again
    }

    /// Waiters not released yet.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.batch.len()
            + self
                .pending
                .values()
                .map(|p| p.waiters.len())
                .sum::<usize>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn waiter(conn: u64) -> SyncWaiter {
        SyncWaiter::Pipeline { conn, token: 1 }
    }

    fn conn_of(w: &SyncWaiter) -> u64 {
        match w {
            SyncWaiter::Pipeline { conn, .. } => *conn,
            SyncWaiter::Resume { .. } => 0,
        }
    }

    #[test]
    fn a_waiter_goes_once_its_index_is_applied() {
        let mut r = ReadIndex::default();
        let t = Instant::now();
        r.request(waiter(1));
        let a = r.ask(t).expect("a request");
        r.request(waiter(2));
        let b = r.ask(t).expect("a request");
        assert!(r.ask(t).is_none(), "nothing new to ask");
        r.answered(10, &a);
        r.answered(5, &b);
        assert!(r.take_resolved(4).is_empty());
        let first: Vec<u64> = r.take_resolved(7).iter().map(conn_of).collect();
        assert_eq!(first, vec![2]);
        let second: Vec<u64> = r.take_resolved(10).iter().map(conn_of).collect();
        assert_eq!(second, vec![1]);
        assert_eq!(r.len(), 0);
    }

    #[test]
    fn unanswered_requests_are_asked_again_and_foreign_contexts_ignored() {
        let mut r = ReadIndex::default();
        let t = Instant::now();
        r.request(waiter(1));
        let a = r.ask(t).expect("a request");
        r.answered(1, b"not-ours");
        r.answered(1, &[0, 0, 0, 0, 0, 0, 0, 99]);
        assert!(r.take_resolved(100).is_empty());
        let step = Duration::from_millis(400);
        assert!(r.due_for_retry(t + step / 2, step).is_empty());
        assert_eq!(r.due_for_retry(t + step, step), vec![a.clone()]);
        // Asked again just now: not due again until another interval has passed.
        assert!(r.due_for_retry(t + step + step / 2, step).is_empty());
        r.answered(3, &a);
        assert_eq!(r.take_resolved(3).len(), 1);
    }

    #[test]
    fn waiters_of_one_turn_share_one_request() {
        let mut r = ReadIndex::default();
        let t = Instant::now();
        for conn in 1..=3 {
            r.request(waiter(conn));
        }
        let a = r.ask(t).expect("one request for the batch");
        r.request(waiter(4));
        assert_eq!(r.len(), 4);
        r.answered(7, &a);
        let mut done: Vec<u64> = r.take_resolved(7).iter().map(conn_of).collect();
        done.sort_unstable();
        assert_eq!(done, vec![1, 2, 3]);
        // The late one was not asked for: it waits for its own request.
        assert_eq!(r.len(), 1);
        assert!(r
            .due_for_retry(t + Duration::from_secs(9), Duration::from_secs(1))
            .is_empty());
        assert!(r.ask(t).is_some());
    }
}
