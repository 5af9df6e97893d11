//! Snapshots in the `snapshot` column family: written in chunks without the WAL and
//! flushed before `snapshot_meta` names them, read back whole, replaced by newer ones, and
//! installed from the leader (which replaces the log).

use super::*;

/// The key of chunk `chunk` of the snapshot at (`index`, `term`).
pub(super) fn snapshot_key(index: u64, term: u64, chunk: u32) -> [u8; 20] {
    let mut k = [0u8; 20];
    k[..8].copy_from_slice(&index.to_be_bytes());
    k[8..16].copy_from_slice(&term.to_be_bytes());
    k[16..].copy_from_slice(&chunk.to_be_bytes());
    k
}

/// Why a stored snapshot cannot be read back.
pub(super) fn read_snapshot(db: &DB, index: u64, term: u64) -> Result<bytes::Bytes, String> {
    let cf = db
        .cf_handle(CF_SNAPSHOT)
        .ok_or("the snapshot column family is missing")?;
    let end = db
        .get_cf(cf, snapshot_key(index, term, END_MARK))
        .map_err(|e| e.to_string())?
        .ok_or_else(|| format!("snapshot {index} (term {term}) is missing"))?;
    if end.len() != 12 {
        return Err(format!("end mark of {} bytes", end.len()));
    }
    let count = u32::from_be_bytes([end[0], end[1], end[2], end[3]]);
    let mut len = [0u8; 8];
    len.copy_from_slice(&end[4..]);
    let len = u64::from_be_bytes(len);
    let mut data = Vec::with_capacity(usize::try_from(len).map_err(|e| e.to_string())?);
    let start = snapshot_key(index, term, 0);
    let mut expected = 0u32;
    for item in db.iterator_cf(cf, IteratorMode::From(&start, rocksdb::Direction::Forward)) {
        let (k, v) = item.map_err(|e| e.to_string())?;
        if k.len() != 20 || k[..16] != start[..16] {
            break;
        }
        let chunk = u32::from_be_bytes([k[16], k[17], k[18], k[19]]);
        if chunk == END_MARK {
            break;
        }
        if chunk != expected {
            return Err(format!("chunk {expected} missing (found {chunk})"));
        }
        data.extend_from_slice(&v);
        expected += 1;
    }
    if expected != count || data.len() as u64 != len {
        return Err(format!(
            "{expected} chunks of {} bytes, the end mark says {count} of {len}",
            data.len()
        ));
    }
    Ok(bytes::Bytes::from(data))
}

impl RaftStorage {
    /// Stores the snapshot at (`index`, `term`) durably: chunks without the WAL, then a
    /// flush of the `snapshot` column family. Safe to call from any thread; the snapshot
    /// counts only once [`Self::save_snapshot`] (or `install_snapshot`) names it.
    pub fn write_snapshot(&self, index: u64, term: u64, data: &[u8]) -> Result<(), rocksdb::Error> {
        let cf = self.cf(CF_SNAPSHOT);
        let mut wo = WriteOptions::default();
        wo.disable_wal(true);
        let mut wb = WriteBatch::default();
        let mut batched = 0;
        let mut count = 0u32;
        for chunk in data.chunks(SNAPSHOT_CHUNK) {
            wb.put_cf(cf, snapshot_key(index, term, count), chunk);
            count += 1;
            batched += chunk.len();
            if batched >= SNAPSHOT_BATCH {
                self.db.write_opt(std::mem::take(&mut wb), &wo)?;
                batched = 0;
            }
        }
        let mut end = Vec::with_capacity(12);
        end.extend_from_slice(&count.to_be_bytes());
        end.extend_from_slice(&(data.len() as u64).to_be_bytes());
        wb.put_cf(cf, snapshot_key(index, term, END_MARK), end);
        self.db.write_opt(wb, &wo)?;
        let mut fo = rocksdb::FlushOptions::default();
        fo.set_wait(true);
        self.db.flush_cf_opt(cf, &fo)
    }

    /// The stored state machine snapshot, if any, read for loading it at start-up: not
    /// kept (the state it decodes into holds copies of what it needs, and a cached copy
    /// would double the memory of a member that never sends a snapshot).
    pub fn snapshot_data(&self) -> Option<bytes::Bytes> {
        let meta = self.snapshot_metadata();
        if meta.index == 0 {
            return None;
        }
        match read_snapshot(&self.db, meta.index, meta.term) {
            Ok(d) => Some(d),
            Err(e) => fatal("reading the stored snapshot", e),
        }
    }

    /// The stored snapshot for sending to followers: kept after the first read, as a leader
    /// often sends the same one to several members in a row (until the next snapshot).
    pub(super) fn snapshot_data_for_sending(&self) -> Option<bytes::Bytes> {
        let index = self.snapshot_metadata().index;
        if let Some((cached, data)) = self.snapshot_cache.lock().as_ref() {
            if *cached == index {
                return Some(data.clone());
            }
        }
        let data = self.snapshot_data()?;
        *self.snapshot_cache.lock() = Some((index, data.clone()));
        Some(data)
    }

    /// Deletes the chunks of snapshots older than the current one (RocksDB reclaims the
    /// space as it compacts).
    fn remove_old_snapshots(&self, keep_index: u64) {
        let mut wb = WriteBatch::default();
        wb.delete_range_cf(
            self.cf(CF_SNAPSHOT),
            &[][..],
            &snapshot_key(keep_index, 0, 0)[..],
        );
        if let Err(e) = self.db.write(wb) {
            tracing::warn!("cannot delete old snapshots: {e}");
        }
    }

    /// Stores a snapshot of our own state machine taken at `index` (applied, so committed),
    /// then drops the log up to `compact_to` (at most `index`), keeping the entries after it
    /// so that a follower a little behind catches up from the log instead of a snapshot.
    /// The snapshot must already be durable ([`Self::write_snapshot`]).
    pub fn save_snapshot(&self, index: u64, term: u64, conf: &ConfState, compact_to: u64) {
        use raft::Storage as _;
        let mut meta = SnapshotMetadata {
            index,
            term,
            ..Default::default()
        };
        meta.set_conf_state(conf.clone());
        let meta_bytes = match meta.write_to_bytes() {
            Ok(b) => b,
            Err(e) => fatal("encoding snapshot metadata", e),
        };
        let (old_truncated, _) = {
            let m = self.meta.read();
            (m.truncated_index, m.truncated_term)
        };
        let compact_to = compact_to.min(index).max(old_truncated);
        let compact_term = if compact_to == index {
            term
        } else {
            match self.term(compact_to) {
                Ok(t) => t,
                Err(e) => fatal("reading the term at the compaction point", e),
            }
        };
        let mut truncated = Vec::with_capacity(16);
        truncated.extend_from_slice(&compact_to.to_be_bytes());
        truncated.extend_from_slice(&compact_term.to_be_bytes());
        let mut wb = WriteBatch::default();
        wb.put_cf(self.cf(CF_STATE), KEY_SNAPSHOT_META, meta_bytes);
        wb.put_cf(self.cf(CF_STATE), KEY_TRUNCATED, truncated);
        wb.delete_range_cf(self.cf(CF_LOG), key(0), key(compact_to + 1));
        let mut wo = WriteOptions::default();
        wo.set_sync(true);
        if let Err(e) = self.db.write_opt(wb, &wo) {
            fatal("saving a snapshot", e);
        }
        let mut m = self.meta.write();
        m.snapshot_meta = meta;
        m.truncated_index = compact_to;
        m.truncated_term = compact_term;
        while m.cache.front().is_some_and(|e| e.index <= compact_to) {
            if let Some(e) = m.cache.pop_front() {
                m.cache_bytes -= e.data.len() + 32;
            }
        }
        if m.last_index < index {
            m.last_index = index;
        }
        drop(m);
        self.remove_old_snapshots(index);
        // A newer snapshot replaces the one kept for sending.
        *self.snapshot_cache.lock() = None;
    }

    /// Installs a snapshot received from the leader: replaces the log, the membership and
    /// the stored state machine.
    pub fn install_snapshot(&self, snap: &Snapshot) {
        let meta = snap.get_metadata();
        let mut hs = self.hard_state();
        hs.term = hs.term.max(meta.term);
        hs.commit = hs.commit.max(meta.index);
        if let Err(e) = self.write_snapshot(meta.index, meta.term, &snap.data) {
            fatal("writing a snapshot received from the leader", e);
        }
        let mut wb = WriteBatch::default();
        wb.delete_range_cf(self.cf(CF_LOG), key(0), key(u64::MAX));
        let encode = |m: &dyn protobuf::Message| match m.write_to_bytes() {
            Ok(b) => b,
            Err(e) => fatal("encoding snapshot state", e),
        };
        wb.put_cf(self.cf(CF_STATE), KEY_SNAPSHOT_META, encode(meta));
        wb.put_cf(
            self.cf(CF_STATE),
            KEY_CONF_STATE,
            encode(meta.get_conf_state()),
        );
        wb.put_cf(self.cf(CF_STATE), KEY_HARD_STATE, encode(&hs));
        // The state machine is replaced by the snapshot's.
        wb.put_cf(self.cf(CF_STATE), KEY_APPLIED, meta.index.to_be_bytes());
        let mut truncated = Vec::with_capacity(16);
        truncated.extend_from_slice(&meta.index.to_be_bytes());
        truncated.extend_from_slice(&meta.term.to_be_bytes());
        wb.put_cf(self.cf(CF_STATE), KEY_TRUNCATED, truncated);
        let mut wo = WriteOptions::default();
        wo.set_sync(true);
        if let Err(e) = self.db.write_opt(wb, &wo) {
            fatal("installing a snapshot", e);
        }
        let mut m = self.meta.write();
        m.snapshot_meta = meta.clone();
        m.conf_state = meta.get_conf_state().clone();
        m.hard_state = hs;
        m.truncated_index = meta.index;
        m.truncated_term = meta.term;
        m.last_index = meta.index;
        m.durable_index = meta.index;
        m.applied = meta.index;
        m.applied_staged = meta.index;
        m.cache.clear();
        m.cache_bytes = 0;
        drop(m);
        self.remove_old_snapshots(meta.index);
    }
}
