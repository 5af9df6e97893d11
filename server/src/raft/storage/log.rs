//! The log: staging entries and hard state (in memory, on the Raft thread), writing them
//! (encoded and written as one batch with one fsync, on the log writer's thread), and
//! reading entries back from the cache or the database.

use protobuf::Message as _;
use raft::eraftpb::{Entry, HardState};
use raft::StorageError;
use rocksdb::{IteratorMode, WriteBatch, WriteOptions};

use super::store::{fatal, key, Store, CF_LOG, CF_STATE, KEY_APPLIED, KEY_HARD_STATE};

/// Updates staged in memory, to be written by [`write`]. Encoded only there
/// (on the log writer's thread, not the Raft thread's); the entries are clones whose data
/// is shared, not copied.
pub struct PendingWrite {
    /// Stored entries from this index on are replaced (deleted first).
    truncate_from: Option<u64>,
    entries: Vec<Entry>,
    hard_state: Option<HardState>,
    applied: Option<u64>,
}

/// raft-rs's `max_size` for a range of entries: at least one entry, then as many as fit.
pub(super) struct SizeBudget {
    max: Option<u64>,
    used: u64,
    taken: usize,
    spent: bool,
}

impl SizeBudget {
    fn new(max: Option<u64>) -> Self {
        SizeBudget {
            max,
            used: 0,
            taken: 0,
            spent: false,
        }
    }

    /// Whether `e` fits (the first entry always does); counts it if so.
    pub(super) fn take(&mut self, e: &Entry) -> bool {
        if self.spent {
            return false;
        }
        if let Some(max) = self.max {
            let size = self.used + u64::from(e.compute_size());
            if self.taken > 0 && size > max {
                self.spent = true;
                return false;
            }
            self.used = size;
        }
        self.taken += 1;
        true
    }

    /// Whether an entry no longer fitted.
    fn spent(&self) -> bool {
        self.spent
    }
}

/// Persists new entries (replacing any conflicting suffix) and the hard state in one
/// batch; `sync` makes it one fsync. (Staging and writing at once: see [`Self::stage`].)
pub(super) fn append(s: &Store, entries: &[Entry], hard_state: Option<&HardState>, sync: bool) {
    if let Some(w) = stage(s, entries, hard_state) {
        write(s, vec![w], sync);
    }
}

/// Makes new entries (replacing any conflicting suffix) and the hard state visible to
/// raft-rs at once, in memory, and returns the write that makes them durable. raft-rs's
/// asynchronous ready allows exactly this: updates readable through `Storage` first,
/// persisted later, in order ([`Self::write`]).
pub(super) fn stage(
    s: &Store,
    entries: &[Entry],
    hard_state: Option<&HardState>,
) -> Option<PendingWrite> {
    if entries.is_empty() && hard_state.is_none() {
        return None;
    }
    let mut m = s.meta.write();
    let applied = (m.applied > m.applied_staged).then_some(m.applied);
    if let Some(applied) = applied {
        m.applied_staged = applied;
    }
    if let Some(hs) = hard_state {
        m.hard_state = hs.clone();
    }
    let mut truncate_from = None;
    if let Some(first) = entries.first() {
        if first.index <= m.last_index {
            truncate_from = Some(first.index);
        }
        while m.cache.back().is_some_and(|e| e.index >= first.index) {
            if let Some(e) = m.cache.pop_back() {
                m.cache_bytes -= e.data.len() + 32;
            }
        }
        if m.cache.back().is_some_and(|e| e.index + 1 != first.index) {
            m.cache.clear();
            m.cache_bytes = 0;
        }
        for e in entries {
            m.cache_bytes += e.data.len() + 32;
            m.cache.push_back(e.clone());
        }
        m.last_index = entries[entries.len() - 1].index;
        // An entry replaced before it was written is no longer durable either.
        m.durable_index = m.durable_index.min(first.index - 1);
        m.trim_cache();
    }
    Some(PendingWrite {
        truncate_from,
        entries: entries.to_vec(),
        hard_state: hard_state.cloned(),
        applied,
    })
}

/// Writes staged updates, in the order they were staged, as one RocksDB write batch
/// with at most one fsync (group commit).
pub(super) fn write(s: &Store, writes: Vec<PendingWrite>, sync: bool) {
    if writes.is_empty() {
        return;
    }
    let log = s.cf(CF_LOG);
    let state = s.cf(CF_STATE);
    let mut wb = WriteBatch::default();
    let mut last_entry = None;
    for w in writes {
        // In staging order: a later write's truncation and entries replace an
        // earlier one's, and its hard state is the newer.
        if let Some(applied) = w.applied {
            wb.put_cf(state, KEY_APPLIED, applied.to_be_bytes());
        }
        if let Some(from) = w.truncate_from {
            wb.delete_range_cf(log, key(from), key(u64::MAX));
        }
        for e in &w.entries {
            match e.write_to_bytes() {
                Ok(b) => wb.put_cf(log, key(e.index), b),
                Err(err) => fatal("encoding an entry", err),
            }
        }
        if let Some(hs) = &w.hard_state {
            match hs.write_to_bytes() {
                Ok(b) => wb.put_cf(state, KEY_HARD_STATE, b),
                Err(err) => fatal("encoding the hard state", err),
            }
        }
        last_entry = w.entries.last().map(|e| e.index).or(last_entry);
    }
    let mut wo = WriteOptions::default();
    wo.set_sync(sync);
    if let Err(e) = s.db.write_opt(wb, &wo) {
        fatal("appending to the log", e);
    }
    if let Some(last) = last_entry {
        let mut m = s.meta.write();
        m.durable_index = m.durable_index.max(last).min(m.last_index);
        m.trim_cache();
    }
}

/// Appends the stored entries `low..high` to `out`, as many as `budget` lets through;
/// `Unavailable` if one is missing.
pub(super) fn read_entries(
    s: &Store,
    low: u64,
    high: u64,
    budget: &mut SizeBudget,
    out: &mut Vec<Entry>,
) -> raft::Result<()> {
    let log = s.cf(CF_LOG);
    let iter = s.db.iterator_cf(
        log,
        IteratorMode::From(&key(low), rocksdb::Direction::Forward),
    );
    let mut expected = low;
    for item in iter {
        if expected >= high {
            break;
        }
        let (k, v) = item.map_err(|e| raft::Error::Store(StorageError::Other(Box::new(e))))?;
        let index = u64::from_be_bytes(k.as_ref().try_into().unwrap_or([0xff; 8]));
        if index != expected {
            break;
        }
        let mut e = Entry::default();
        e.merge_from_bytes(&v)
            .map_err(|err| raft::Error::Store(StorageError::Other(Box::new(err))))?;
        if !budget.take(&e) {
            return Ok(());
        }
        out.push(e);
        expected += 1;
    }
    if expected != high {
        return Err(raft::Error::Store(StorageError::Unavailable));
    }
    Ok(())
}

/// raft-rs's `Storage::entries`: the entries `low..high`, from the cache or the database.
pub(super) fn entries(
    s: &Store,
    low: u64,
    high: u64,
    max_size: impl Into<Option<u64>>,
) -> raft::Result<Vec<Entry>> {
    let max_size = max_size.into();
    let m = s.meta.read();
    if low < m.first_index() {
        return Err(raft::Error::Store(StorageError::Compacted));
    }
    if high > m.last_index + 1 {
        return Err(raft::Error::Store(StorageError::Unavailable));
    }
    if low >= high {
        return Ok(Vec::new());
    }
    drop(m);
    // The entries before the cache are in the database (the cache drops only durable
    // ones); from the cache's first on, they are in the cache, the newest perhaps not
    // yet written. A range may span both (a new leader catching up a member that lags
    // by more than the cache holds). The log writer trims the cache meanwhile, so the
    // split is looked up again after each read from the database.
    let mut budget = SizeBudget::new(max_size);
    let mut out = Vec::new();
    let mut next = low;
    while next < high && !budget.spent() {
        let m = s.meta.read();
        match m.cache_first() {
            Some(first) if next >= first => {
                let start = (next - first) as usize;
                let end = (high - first) as usize;
                if end > m.cache.len() {
                    return Err(raft::Error::Store(StorageError::Unavailable));
                }
                for e in m.cache.range(start..end) {
                    if !budget.take(e) {
                        break;
                    }
                    out.push(e.clone());
                }
                next = high;
            }
            first => {
                let upto = first.map_or(high, |f| f.min(high));
                drop(m);
                read_entries(s, next, upto, &mut budget, &mut out)?;
                next = upto;
            }
        }
    }
    Ok(out)
}

/// raft-rs's `Storage::term`: the term of the entry at `idx`.
pub(super) fn term(s: &Store, idx: u64) -> raft::Result<u64> {
    let m = s.meta.read();
    if idx == m.truncated_index {
        return Ok(m.truncated_term);
    }
    if idx == m.snapshot_meta.index && idx > m.truncated_index && idx > m.last_index {
        return Ok(m.snapshot_meta.term);
    }
    if idx < m.first_index() {
        return Err(raft::Error::Store(StorageError::Compacted));
    }
    if idx > m.last_index {
        return Err(raft::Error::Store(StorageError::Unavailable));
    }
    if let Some(first) = m.cache_first() {
        if idx >= first {
            return Ok(m.cache[(idx - first) as usize].term);
        }
    }
    drop(m);
    let mut one = Vec::with_capacity(1);
    read_entries(s, idx, idx + 1, &mut SizeBudget::new(None), &mut one)?;
    Ok(one[0].term)
}
