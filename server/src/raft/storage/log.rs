//! The log: staging entries and hard state (in memory, on the Raft thread), writing them
//! (encoded and written as one batch with one fsync, on the log writer's thread), and
//! reading entries back from the cache or the database.

use super::*;

impl RaftStorage {
    /// Persists new entries (replacing any conflicting suffix) and the hard state in one
    /// batch; `sync` makes it one fsync. (Staging and writing at once: see [`Self::stage`].)
    pub fn append(&self, entries: &[Entry], hard_state: Option<&HardState>, sync: bool) {
        if let Some(w) = self.stage(entries, hard_state) {
            self.write(vec![w], sync);
        }
    }

    /// Makes new entries (replacing any conflicting suffix) and the hard state visible to
    /// raft-rs at once, in memory, and returns the write that makes them durable. raft-rs's
    /// asynchronous ready allows exactly this: updates readable through `Storage` first,
    /// persisted later, in order ([`Self::write`]).
    pub fn stage(&self, entries: &[Entry], hard_state: Option<&HardState>) -> Option<PendingWrite> {
        if entries.is_empty() && hard_state.is_none() {
            return None;
        }
        let mut m = self.meta.write();
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
    pub fn write(&self, writes: Vec<PendingWrite>, sync: bool) {
        if writes.is_empty() {
            return;
        }
        let log = self.cf(CF_LOG);
        let state = self.cf(CF_STATE);
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
        if let Err(e) = self.db.write_opt(wb, &wo) {
            fatal("appending to the log", e);
        }
        if let Some(last) = last_entry {
            let mut m = self.meta.write();
            m.durable_index = m.durable_index.max(last).min(m.last_index);
            m.trim_cache();
        }
    }

    /// Appends the stored entries `low..high` to `out`, as many as `budget` lets through;
    /// `Unavailable` if one is missing.
    pub(super) fn read_entries(
        &self,
        low: u64,
        high: u64,
        budget: &mut SizeBudget,
        out: &mut Vec<Entry>,
    ) -> raft::Result<()> {
        let log = self.cf(CF_LOG);
        let iter = self.db.iterator_cf(
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
}
