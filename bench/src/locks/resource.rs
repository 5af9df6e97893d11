//! The shared resource every critical section writes to, and the judge of safety.
//!
//! A lock is only as safe as what the protected resource sees, so safety is counted there,
//! not by asking the lock service: every entry and every write arrives here with the
//! holder's id and token. The resource knows the ground truth (who entered last, who is
//! inside), so it counts
//!
//! - **overlaps**: an entry while another holder is still inside (exclusivity lost);
//! - **stale writes**: a write by a holder that is no longer the latest to have entered,
//!   split into those the resource *accepted* and those its token check *rejected*.
//!
//! With `check_tokens` the resource behaves like a fenced store: it keeps the highest
//! monotonic token seen and refuses any write with a lower one (what zooraft's `Fence`
//! does). A system without a monotonic token (Redis, Redlock: a random value) cannot be
//! checked that way, so its stale writes are always accepted.
//!
//! It also measures handoffs: the time from one holder leaving to the next one entering,
//! when nobody else was inside.

use std::sync::Mutex;
use std::time::Instant;

use crate::stats::{LatencySummary, Recorder};

/// What a holder presents to the resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Token {
    /// A token that grows with every acquisition (zxid, create revision).
    Monotonic(u64),
    /// A value that only identifies the holder (Redis' random lock value).
    Opaque(u64),
}

/// What the resource saw in one run.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Tally {
    pub entries: u64,
    pub writes: u64,
    /// Entries while another holder was inside.
    pub overlaps: u64,
    /// Writes by a holder that was no longer the latest entrant, accepted.
    pub stale_accepted: u64,
    /// Such writes the token check refused.
    pub stale_rejected: u64,
    /// Writes from the current holder that the token check refused (a token that went
    /// backwards although nobody else held the lock).
    pub fresh_rejected: u64,
    pub handoff: LatencySummary,
}

#[derive(Default)]
struct State {
    inside: Vec<usize>,
    seq: u64,
    latest: Option<(usize, u64)>,
    latest_token: Option<u64>,
    highest: Option<u64>,
    last_leave: Option<Instant>,
    tally: Tally,
    handoffs: Recorder,
}

/// The resource; shared by every contender of a run.
pub struct Resource {
    check_tokens: bool,
    state: Mutex<State>,
    /// The latest entry's number, for holders that wait for someone else to enter.
    entered: tokio::sync::watch::Sender<u64>,
}

/// One holder's entry, as the resource numbered it.
#[derive(Debug, Clone, Copy)]
pub struct Entry {
    pub who: usize,
    pub seq: u64,
    pub token: Token,
}

impl Resource {
    pub fn new(check_tokens: bool) -> Resource {
        Resource {
            check_tokens,
            state: Mutex::new(State::default()),
            entered: tokio::sync::watch::channel(0).0,
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        // A panicking contender cannot leave the counts half-updated: every update is a
        // few integer writes. Keep counting.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A holder enters its critical section and writes its first record.
    pub fn enter(&self, who: usize, token: Token) -> Entry {
        let now = Instant::now();
        let mut s = self.state();
        s.seq += 1;
        let seq = s.seq;
        s.tally.entries += 1;
        if s.inside.is_empty() {
            if let Some(left) = s.last_leave {
                s.handoffs.record(now.duration_since(left));
            }
        } else {
            s.tally.overlaps += 1;
        }
        s.inside.push(who);
        s.latest = Some((who, seq));
        s.latest_token = match token {
            Token::Monotonic(t) | Token::Opaque(t) => Some(t),
        };
        let entry = Entry { who, seq, token };
        Self::write_locked(&mut s, self.check_tokens, entry);
        drop(s);
        self.entered.send_replace(seq);
        entry
    }

    /// Waits until someone has entered after `entry`, at most `bound`; false if nobody did.
    pub async fn someone_entered_after(&self, entry: Entry, bound: std::time::Duration) -> bool {
        let mut rx = self.entered.subscribe();
        tokio::time::timeout(bound, rx.wait_for(|seq| *seq > entry.seq))
            .await
            .is_ok_and(|r| r.is_ok())
    }

    /// A later write of the critical section that `entry` opened; false if refused.
    pub fn write(&self, entry: Entry) -> bool {
        let mut s = self.state();
        Self::write_locked(&mut s, self.check_tokens, entry)
    }

    fn write_locked(s: &mut State, check: bool, entry: Entry) -> bool {
        s.tally.writes += 1;
        let stale = s.latest.map(|(_, seq)| seq) != Some(entry.seq);
        let refused = match entry.token {
            Token::Monotonic(t) if check => s.highest.is_some_and(|h| t < h),
            _ => false,
        };
        if let Token::Monotonic(t) = entry.token {
            if !refused {
                s.highest = Some(s.highest.map_or(t, |h| h.max(t)));
            }
        }
        match (stale, refused) {
            (true, true) => s.tally.stale_rejected += 1,
            (true, false) => s.tally.stale_accepted += 1,
            (false, true) => s.tally.fresh_rejected += 1,
            (false, false) => {}
        }
        !refused
    }

    /// The holder leaves its critical section (before it releases the lock).
    pub fn leave(&self, entry: Entry) {
        let mut s = self.state();
        if let Some(i) = s.inside.iter().position(|w| *w == entry.who) {
            s.inside.swap_remove(i);
        }
        s.last_leave = Some(Instant::now());
    }

    /// Entries by others since `entry`.
    pub fn entries_after(&self, entry: Entry) -> u64 {
        self.state().seq.saturating_sub(entry.seq)
    }

    /// The highest monotonic token seen (accepted), and the latest entry's token.
    pub fn tokens(&self) -> (Option<u64>, Option<u64>) {
        let s = self.state();
        (s.highest, s.latest_token)
    }

    pub fn tally(&self) -> Tally {
        let s = self.state();
        let mut t = s.tally.clone();
        t.handoff = s.handoffs.summary();
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_paused_holder_is_an_overlap_and_a_stale_write() {
        for check in [false, true] {
            let r = Resource::new(check);
            let old = r.enter(0, Token::Monotonic(5));
            let new = r.enter(1, Token::Monotonic(6));
            assert!(r.write(new));
            let accepted = r.write(old);
            r.leave(old);
            r.leave(new);
            let t = r.tally();
            assert_eq!(t.overlaps, 1);
            assert_eq!(accepted, !check);
            assert_eq!(t.stale_accepted, u64::from(!check));
            assert_eq!(t.stale_rejected, u64::from(check));
        }
    }

    #[test]
    fn opaque_tokens_cannot_be_checked() {
        let r = Resource::new(true);
        let old = r.enter(0, Token::Opaque(99));
        let _new = r.enter(1, Token::Opaque(1));
        assert!(r.write(old));
        assert_eq!(r.tally().stale_accepted, 1);
    }

    #[test]
    fn clean_handoffs_are_timed_not_counted() {
        let r = Resource::new(true);
        for (who, t) in [(0, 1), (1, 2), (0, 3)] {
            let e = r.enter(who, Token::Monotonic(t));
            r.leave(e);
        }
        let t = r.tally();
        assert_eq!((t.entries, t.overlaps, t.stale_accepted), (3, 0, 0));
        assert_eq!(t.handoff.count, 2);
    }
}
