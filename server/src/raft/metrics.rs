//! What the Raft layer measures for `mntr` and the Prometheus endpoint, under the names of
//! the ZooKeeper figures they stand for: log fsyncs (`fsynctime`, `sync_processor_batch_size`),
//! snapshots (`snapshottime`), start-up (`dbinittime`, `startup_*`), elections
//! (`election_time`, `looking_count`, `unavailable_time`), the leader's proposals
//! (`proposal_count`, `quorum_ack_latency`, `proposal_latency`, proposal sizes), followers'
//! catch-up (`snap_count`, `learner_*`), commits and session expiries.
//!
//! Written by the Raft thread and its workers, read by anyone, without locks.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::Instant;

use crate::stats::Summary;

/// See the module docs.
pub struct RaftCounters {
    /// Commands proposed (each a client write, session change or cleanup).
    pub proposals: AtomicU64,
    /// Raft entries proposed: one batch of commands each.
    pub batches: AtomicU64,
    /// Milliseconds per log write round that fsynced (its count: the fsyncs).
    pub fsync_time: Summary,
    /// Ready rounds written per log write (group commit).
    pub fsync_batch: Summary,
    /// Milliseconds to capture and write a snapshot (its count: the snapshots taken).
    pub snapshot_time: Summary,
    /// The last snapshot: its bytes, milliseconds to take it, and the resident set's peak
    /// above what it was before (the capture, copies on write, buffers).
    pub snapshot_last_bytes: AtomicU64,
    pub snapshot_last_ms: AtomicU64,
    pub snapshot_last_peak_extra_bytes: AtomicU64,
    /// Snapshot files found damaged and rewritten from the tree (`scrub.rs`).
    pub snapshot_repairs: AtomicU64,
    /// Scrubs of the store and the snapshot file completed, and the bytes the last read.
    pub scrubs: AtomicU64,
    pub scrub_last_bytes: AtomicU64,
    /// Start-up: loading the snapshot, replaying the log after it, both, and entries replayed.
    pub snap_load_time: Summary,
    pub txns_load_time: Summary,
    pub db_init_time: Summary,
    pub txns_loaded: Summary,
    /// Milliseconds from losing a leader to knowing the next one.
    pub election_time: Summary,
    /// Times this member started looking for a leader.
    pub looking: AtomicU64,
    /// Milliseconds without a known leader, per episode.
    pub leader_unavailable_time: Summary,
    /// Milliseconds not serving clients, per episode.
    pub unavailable_time: Summary,
    /// Entries applied (committed), and those of them received from a leader.
    pub commits: AtomicU64,
    pub learner_commits: AtomicU64,
    /// Entries received from a leader and written to this member's log.
    pub learner_proposals: AtomicU64,
    /// Snapshots the leader sent to members too far behind for its log.
    pub snapshot_syncs: AtomicU64,
    /// Leader: milliseconds from proposing an entry to a quorum having it (commit), and to
    /// having applied it.
    pub quorum_ack_latency: Summary,
    pub proposal_latency: Summary,
    /// Leader: bytes of the last, smallest and largest proposal (-1 before the first).
    pub proposal_size_last: AtomicI64,
    pub proposal_size_min: AtomicI64,
    pub proposal_size_max: AtomicI64,
    /// Sessions the leader expired.
    pub sessions_expired: AtomicU64,
    /// Since when this member leads, in milliseconds since the Unix epoch (0: it does not).
    pub leading_since_unix_ms: AtomicU64,
    /// The store's memory (RocksDB memtables, table readers), sampled by the
    /// Raft thread every session round.
    pub store_memtables: AtomicU64,
    pub store_table_readers: AtomicU64,
}

impl Default for RaftCounters {
    fn default() -> Self {
        RaftCounters {
            proposals: AtomicU64::new(0),
            batches: AtomicU64::new(0),
            // Percentiles for the console's per-interval charts; mntr prints none (as
            // ZooKeeper's does not).
            fsync_time: Summary::with_quantiles(),
            fsync_batch: Summary::new(),
            snapshot_time: Summary::new(),
            snapshot_last_bytes: AtomicU64::new(0),
            snapshot_last_ms: AtomicU64::new(0),
            snapshot_last_peak_extra_bytes: AtomicU64::new(0),
            snapshot_repairs: AtomicU64::new(0),
            scrubs: AtomicU64::new(0),
            scrub_last_bytes: AtomicU64::new(0),
            snap_load_time: Summary::new(),
            txns_load_time: Summary::new(),
            db_init_time: Summary::new(),
            txns_loaded: Summary::new(),
            election_time: Summary::new(),
            looking: AtomicU64::new(0),
            leader_unavailable_time: Summary::new(),
            unavailable_time: Summary::new(),
            commits: AtomicU64::new(0),
            learner_commits: AtomicU64::new(0),
            learner_proposals: AtomicU64::new(0),
            snapshot_syncs: AtomicU64::new(0),
            quorum_ack_latency: Summary::with_quantiles(),
            proposal_latency: Summary::with_quantiles(),
            proposal_size_last: AtomicI64::new(-1),
            proposal_size_min: AtomicI64::new(-1),
            proposal_size_max: AtomicI64::new(-1),
            sessions_expired: AtomicU64::new(0),
            leading_since_unix_ms: AtomicU64::new(0),
            store_memtables: AtomicU64::new(0),
            store_table_readers: AtomicU64::new(0),
        }
    }
}

impl RaftCounters {
    /// The leader proposed an entry of `bytes`.
    pub fn proposed(&self, bytes: usize) {
        let bytes = bytes as i64;
        self.proposal_size_last.store(bytes, Ordering::Relaxed);
        let min = self.proposal_size_min.load(Ordering::Relaxed);
        if min < 0 || bytes < min {
            self.proposal_size_min.store(bytes, Ordering::Relaxed);
        }
        self.proposal_size_max.fetch_max(bytes, Ordering::Relaxed);
    }

    /// Publishes the figures of the snapshot just taken.
    pub fn snapshot_last(&self, bytes: u64, took: std::time::Duration, peak_extra: u64) {
        self.snapshot_last_bytes.store(bytes, Ordering::Relaxed);
        self.snapshot_last_ms
            .store(took.as_millis() as u64, Ordering::Relaxed);
        self.snapshot_last_peak_extra_bytes
            .store(peak_extra, Ordering::Relaxed);
    }

    /// Publishes the store's memory figures.
    pub fn store_memory(&self, m: super::storage::StoreMemory) {
        self.store_memtables.store(m.memtables, Ordering::Relaxed);
        self.store_table_readers
            .store(m.table_readers, Ordering::Relaxed);
    }

    /// `srst`: forgets the summaries and the counters of events (not the start-up figures,
    /// which happen once).
    pub fn reset(&self) {
        for s in [
            &self.fsync_time,
            &self.fsync_batch,
            &self.snapshot_time,
            &self.election_time,
            &self.leader_unavailable_time,
            &self.unavailable_time,
            &self.quorum_ack_latency,
            &self.proposal_latency,
        ] {
            s.reset();
        }
        for c in [
            &self.proposals,
            &self.batches,
            &self.looking,
            &self.commits,
            &self.learner_commits,
            &self.learner_proposals,
            &self.snapshot_syncs,
            &self.sessions_expired,
        ] {
            c.store(0, Ordering::Relaxed);
        }
        for s in [
            &self.proposal_size_last,
            &self.proposal_size_min,
            &self.proposal_size_max,
        ] {
            s.store(-1, Ordering::Relaxed);
        }
    }
}

/// The leader's proposals on their way to commit and apply, for `quorum_ack_latency` and
/// `proposal_latency`. Bounded: entries beyond [`ProposalClock::LIMIT`] are not timed.
#[derive(Default)]
pub struct ProposalClock {
    /// (log index, when proposed), oldest first, not yet committed.
    proposed: VecDeque<(u64, Instant)>,
    /// Committed, not yet applied.
    committed: VecDeque<(u64, Instant)>,
}

impl ProposalClock {
    const LIMIT: usize = 100_000;

    /// An entry at `index` was proposed at `at`.
    pub fn proposed(&mut self, index: u64, at: Instant) {
        if self.proposed.len() < Self::LIMIT {
            self.proposed.push_back((index, at));
        }
    }

    /// The commit index reached `committed` at `now`.
    pub fn committed(&mut self, committed: u64, now: Instant, counters: &RaftCounters) {
        let done = &mut self.committed;
        take_upto(
            &mut self.proposed,
            committed,
            now,
            &counters.quorum_ack_latency,
            |e| done.push_back(e),
        );
    }

    /// Entries up to `applied` were applied at `now`.
    pub fn applied(&mut self, applied: u64, now: Instant, counters: &RaftCounters) {
        take_upto(
            &mut self.committed,
            applied,
            now,
            &counters.proposal_latency,
            |_| {},
        );
    }

    /// Leadership ended: what was proposed may commit under the next leader, or never.
    pub fn clear(&mut self) {
        self.proposed.clear();
        self.committed.clear();
    }
}

/// Takes the entries up to `index` off the front of `queue`, recording how long ago each was
/// proposed in `summary` and handing it to `then`.
fn take_upto(
    queue: &mut VecDeque<(u64, Instant)>,
    index: u64,
    now: Instant,
    summary: &Summary,
    mut then: impl FnMut((u64, Instant)),
) {
    while let Some(&(i, at)) = queue.front() {
        if i > index {
            break;
        }
        queue.pop_front();
        summary.record_ms(now.saturating_duration_since(at));
        then((i, at));
    }
}

/// The Raft thread's clocks behind the episode figures: how long an election, an
/// unavailability or the start-up replay took, and the leader's proposals in flight.
pub struct Measures {
    pub proposals: ProposalClock,
    /// Since when no leader is known (an election is on).
    leaderless_since: Option<Instant>,
    /// Since when this member does not serve clients.
    unavailable_since: Option<Instant>,
    /// Since when this member leads.
    pub leading_since: Option<Instant>,
    /// The start-up replay: when it began, from which index, up to which.
    replay: Option<(Instant, u64, u64)>,
}

impl Measures {
    /// At start-up, with the log applied up to `applied` and committed up to `committed`:
    /// everything in between is the replay.
    pub fn new(now: Instant, applied: u64, committed: u64) -> Measures {
        Measures {
            proposals: ProposalClock::default(),
            leaderless_since: Some(now),
            unavailable_since: Some(now),
            leading_since: None,
            replay: Some((now, applied, committed)),
        }
    }

    /// The leader this member knows changed to `leader` (0: none).
    pub fn leader_known(&mut self, leader: u64, now: Instant, counters: &RaftCounters) {
        match (leader, self.leaderless_since) {
            (0, None) => {
                self.leaderless_since = Some(now);
                counters.looking.fetch_add(1, Ordering::Relaxed);
            }
            (0, Some(_)) => {}
            (_, Some(since)) => {
                counters
                    .election_time
                    .record_ms(now.saturating_duration_since(since));
                self.leaderless_since = None;
            }
            (_, None) => {}
        }
    }

    /// Whether this member serves clients now, and whether it leads.
    pub fn serving(&mut self, serving: bool, leads: bool, now: Instant, counters: &RaftCounters) {
        match (serving, self.unavailable_since) {
            (false, None) => self.unavailable_since = Some(now),
            (true, Some(since)) => {
                let took = now.saturating_duration_since(since);
                counters.unavailable_time.record_ms(took);
                if leads {
                    counters.leader_unavailable_time.record_ms(took);
                }
                self.unavailable_since = None;
            }
            _ => {}
        }
        match (leads, self.leading_since) {
            (true, None) => {
                self.leading_since = Some(now);
                let unix_ms = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(1, |d| d.as_millis() as u64);
                counters
                    .leading_since_unix_ms
                    .store(unix_ms, Ordering::Relaxed);
            }
            (false, Some(_)) => {
                self.leading_since = None;
                self.proposals.clear();
                counters.leading_since_unix_ms.store(0, Ordering::Relaxed);
            }
            _ => {}
        }
    }

    /// Entries up to `index` are applied: ends the start-up replay once it is done.
    pub fn applied(&mut self, index: u64, now: Instant, counters: &RaftCounters) {
        self.proposals.applied(index, now, counters);
        if let Some((started, from, to)) = self.replay {
            if index >= to {
                self.replay = None;
                let took = now.saturating_duration_since(started);
                counters.txns_load_time.record_ms(took);
                counters.txns_loaded.record(to.saturating_sub(from));
                tracing::info!(
                    entries = to.saturating_sub(from),
                    ms = took.as_millis() as u64,
                    "log after the snapshot replayed"
                );
                let snapshot_ms = counters.snap_load_time.view().sum;
                counters
                    .db_init_time
                    .record(snapshot_ms + took.as_millis() as u64);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn proposals_are_timed_to_commit_and_to_apply() {
        let counters = RaftCounters::default();
        let mut clock = ProposalClock::default();
        let t0 = Instant::now();
        clock.proposed(5, t0);
        clock.proposed(6, t0 + Duration::from_millis(10));
        clock.committed(5, t0 + Duration::from_millis(20), &counters);
        let acks = counters.quorum_ack_latency.view();
        assert_eq!((acks.count, acks.sum), (1, 20));
        clock.committed(6, t0 + Duration::from_millis(30), &counters);
        clock.applied(6, t0 + Duration::from_millis(40), &counters);
        let acks = counters.quorum_ack_latency.view();
        assert_eq!((acks.count, acks.sum), (2, 40));
        let applied = counters.proposal_latency.view();
        assert_eq!((applied.count, applied.sum, applied.max), (2, 70, 40));
        clock.proposed(7, t0);
        clock.clear();
        clock.committed(7, t0 + Duration::from_millis(50), &counters);
        assert_eq!(counters.quorum_ack_latency.view().count, 2);
    }

    #[test]
    fn episodes_are_timed() {
        let c = RaftCounters::default();
        let t0 = Instant::now();
        let ms = |n| t0 + Duration::from_millis(n);
        let mut m = Measures::new(t0, 10, 15);
        m.applied(12, ms(5), &c);
        assert_eq!(c.txns_loaded.view().count, 0, "replay not over yet");
        c.snap_load_time.record(7);
        m.applied(15, ms(20), &c);
        assert_eq!(c.txns_loaded.view().sum, 5);
        assert_eq!(c.txns_load_time.view().sum, 20);
        assert_eq!(c.db_init_time.view().sum, 27);
        // Started leaderless and unavailable; a leader after 30 ms, serving (leading) at 40.
        m.leader_known(1, ms(30), &c);
        m.serving(true, true, ms(40), &c);
        assert_eq!(c.election_time.view().sum, 30);
        assert_eq!(c.leader_unavailable_time.view().sum, 40);
        assert_eq!(m.leading_since, Some(ms(40)));
        // The leader is lost: one look, and a follower this time.
        m.leader_known(0, ms(100), &c);
        m.serving(false, false, ms(100), &c);
        m.leader_known(0, ms(110), &c);
        assert_eq!(c.looking.load(Ordering::Relaxed), 1);
        m.leader_known(2, ms(150), &c);
        m.serving(true, false, ms(160), &c);
        let e = c.election_time.view();
        assert_eq!((e.count, e.sum), (2, 80));
        let u = c.unavailable_time.view();
        assert_eq!((u.count, u.sum), (2, 100));
        assert_eq!(c.leader_unavailable_time.view().count, 1);
        assert_eq!(m.leading_since, None);
    }

    #[test]
    fn proposal_sizes_and_reset() {
        let c = RaftCounters::default();
        c.proposed(100);
        c.proposed(40);
        c.proposed(70);
        let load = |a: &AtomicI64| a.load(Ordering::Relaxed);
        assert_eq!(
            (
                load(&c.proposal_size_last),
                load(&c.proposal_size_min),
                load(&c.proposal_size_max)
            ),
            (70, 40, 100)
        );
        c.fsync_time.record(3);
        c.reset();
        assert_eq!(load(&c.proposal_size_last), -1);
        assert_eq!(c.fsync_time.view().count, 0);
    }
}
