//! Commands on their way into the log ([`Proposals`]), and the leader's own batches
//! between proposal and apply, so that applying them does not decode what was encoded a
//! moment before.
//!
//! A leader proposes a batch as the entry at (index, term) of its current term; Raft's Log
//! Matching property makes that pair name exactly one entry, the one raft-rs appended for
//! that proposal. When an entry with the same index and term comes to be applied, its bytes
//! are therefore the encoding of the kept batch, and the batch itself is applied instead of
//! the decoded bytes (decoding was a twentieth of the Raft thread's time under a write
//! load). Any other entry (a follower's, a new leader's empty entry, a conf change, an entry
//! of an older term that replaced ours) finds no match and is decoded as always.
//!
//! What is kept is bounded: a leader that cannot commit (no quorum) stops keeping batches
//! past [`MAX_KEPT`] rather than holding a second copy of everything it proposed. The
//! command vectors of applied batches go back to the proposals, so a steady write load
//! allocates no vector per turn.

use std::collections::VecDeque;
use std::time::Instant;

use bytes::Bytes;

use crate::state::command::{Batch, Command, EncodedBatch};

/// Commands waiting to be proposed (leader) or forwarded (follower) at the end of the turn,
/// and their encoding so far: connections send their writes encoded (`net/submit.rs`), and
/// the rest are encoded as they arrive, so a turn's entry is mostly bytes copied.
#[derive(Default)]
pub(super) struct Proposals {
    pub pending: Vec<Command>,
    /// `pending` encoded, in the same order.
    encoded: EncodedBatch,
    /// When the oldest pending command arrived (commands wait at most a few election
    /// timeouts for a leader).
    pub since: Option<Instant>,
    /// The batches proposed and not yet applied.
    pub proposed: Proposed,
    /// The room the next turn's encoding starts with (twice the last turn's size).
    last_bytes: usize,
}

impl Proposals {
    pub fn push(&mut self, command: Command, now: Instant) {
        self.since.get_or_insert(now);
        self.encoded.start(self.last_bytes);
        self.encoded.push(&command);
        self.pending.push(command);
    }

    pub fn extend(&mut self, commands: Vec<Command>, now: Instant) {
        for c in commands {
            self.push(c, now);
        }
    }

    /// Commands of one connection with their encoding (`Command::encode`, one after the
    /// other).
    pub fn extend_encoded(&mut self, commands: Vec<Command>, encoded: Bytes, now: Instant) {
        if !commands.is_empty() {
            self.since.get_or_insert(now);
            self.encoded.start(self.last_bytes.max(encoded.len()));
            self.encoded.push_encoded(&encoded, commands.len());
            self.pending.extend(commands);
        }
    }

    pub fn take(&mut self) -> Vec<Command> {
        self.take_encoded().0
    }

    /// The pending commands and their encoding.
    pub fn take_encoded(&mut self) -> (Vec<Command>, EncodedBatch) {
        self.since = None;
        debug_assert_eq!(self.encoded.count(), self.pending.len());
        let fresh = self.proposed.fresh();
        let encoded = std::mem::take(&mut self.encoded);
        // Twice the last turn's: turns vary, and growing copies the whole entry.
        self.last_bytes = (2 * encoded.len()).min(MAX_ROOM);
        (std::mem::replace(&mut self.pending, fresh), encoded)
    }
}

/// Most room a turn's encoding starts with (a burst of large writes does not size every
/// later turn's buffer).
const MAX_ROOM: usize = 1024 * 1024;

/// Most batches kept (a few turns' worth of proposals in flight is typical).
const MAX_KEPT: usize = 1024;

/// See the module docs.
#[derive(Default)]
pub(super) struct Proposed {
    kept: VecDeque<(u64, u64, Batch)>,
    /// An emptied command vector, for the next turn's proposals.
    spare: Option<Vec<Command>>,
}

impl Proposed {
    /// Remembers the batch just proposed as the entry at `index` in `term`.
    pub fn keep(&mut self, index: u64, term: u64, batch: Batch) {
        if self.kept.len() < MAX_KEPT {
            self.kept.push_back((index, term, batch));
        }
    }

    /// The batch proposed as the entry at (`index`, `term`), if this member proposed it;
    /// forgets the batches of earlier indexes (applied otherwise, or replaced).
    pub fn take(&mut self, index: u64, term: u64) -> Option<Batch> {
        while let Some((i, _, _)) = self.kept.front() {
            if *i >= index {
                break;
            }
            self.kept.pop_front();
        }
        match self.kept.front() {
            Some((i, t, _)) if *i == index && *t == term => self.kept.pop_front().map(|k| k.2),
            _ => None,
        }
    }

    /// Forgets every kept batch (the log was replaced by a snapshot).
    pub fn clear(&mut self) {
        self.kept.clear();
    }

    /// Gives back an applied batch's command vector for reuse.
    pub fn recycle(&mut self, mut commands: Vec<Command>) {
        if self.spare.is_none() {
            commands.clear();
            self.spare = Some(commands);
        }
    }

    /// An empty command vector, reused when one was given back.
    pub fn fresh(&mut self) -> Vec<Command> {
        self.spare.take().unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::command::Command;

    fn batch(time: i64) -> Batch {
        Batch {
            time,
            commands: vec![Command::SetConfig {
                text: format!("t{time}"),
            }],
        }
    }

    #[test]
    fn only_the_same_index_and_term_match() {
        let mut p = Proposed::default();
        p.keep(5, 2, batch(5));
        p.keep(6, 2, batch(6));
        p.keep(8, 2, batch(8));
        // Another term at index 5 (our entry was replaced): decoded, and ours forgotten.
        assert_eq!(p.take(5, 3), None);
        assert_eq!(p.take(6, 2), Some(batch(6)));
        // Index 7 is not ours; 8 still is.
        assert_eq!(p.take(7, 2), None);
        assert_eq!(p.take(8, 2), Some(batch(8)));
        assert_eq!(p.take(8, 2), None);
        p.keep(9, 2, batch(9));
        p.clear();
        assert_eq!(p.take(9, 2), None);
    }

    #[test]
    fn kept_batches_are_bounded_and_vectors_reused() {
        let mut p = Proposed::default();
        for i in 0..(MAX_KEPT as u64 + 10) {
            p.keep(i + 1, 1, batch(i as i64));
        }
        assert_eq!(p.kept.len(), MAX_KEPT);
        // Past the bound nothing matches: those entries are decoded.
        assert_eq!(p.take(MAX_KEPT as u64 + 5, 1), None);
        let mut v = Vec::with_capacity(100);
        v.push(Command::SetConfig { text: "x".into() });
        p.recycle(v);
        let fresh = p.fresh();
        assert!(fresh.is_empty() && fresh.capacity() >= 100);
        assert_eq!(p.fresh().capacity(), 0);
    }
}
