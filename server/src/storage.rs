//! Durable Raft state in RocksDB, behind raft-rs's `Storage` trait.
//!
//! One database, so one write-ahead log makes every multi-key write atomic:
//!
//! | column family | key                     | value                                   |
//! |---------------|-------------------------|-----------------------------------------|
//! | `log`         | index, u64 big-endian   | `eraftpb::Entry` (protobuf)             |
//! | `state`       | `format`                | format version (u32 BE) — refuse others |
//! | `state`       | `hard_state`            | `eraftpb::HardState`                    |
//! | `state`       | `conf_state`            | `eraftpb::ConfState`                    |
//! | `state`       | `snapshot_meta`         | `eraftpb::SnapshotMetadata`             |
//! | `state`       | `truncated`             | index and term (u64 BE each) before the |
//! |               |                         | first stored entry                      |
//! | `state`       | `applied`               | applied index (u64 BE), a lower bound:  |
//! |               |                         | written with the next log write         |
//! | `snapshot`    | index, term (u64 BE),   | the state machine snapshot in chunks of |
//! |               | chunk number (u32 BE)   | up to 4 MiB, in order                   |
//! | `snapshot`    | index, term, `u32::MAX` | end mark: chunk count (u32 BE), total   |
//! |               |                         | length (u64 BE)                         |
//!
//! A snapshot's chunks are written without the WAL and then the `snapshot` column family is
//! flushed (RocksDB writes and fsyncs the SST files and its manifest), all before
//! `snapshot_meta` names the snapshot. Taking a snapshot therefore never pushes hundreds of
//! megabytes through the WAL, and a background thread writes it while the Raft loop goes on.
//! Chunks no `snapshot_meta` names (a crash between the two steps) are deleted at open.
//!
//! Appends write entries and the hard state in one batch with one fsync (raft-rs's ready
//! contract: persist before the entries count). The log behind a durable snapshot is deleted.
//! Recent entries are also kept in memory, so the leader's catch-up reads and raft-rs's
//! frequent `term()` calls do not touch the database.
//!
//! Opening validates what it finds: an unknown format version, an entry that does not
//! decode, a gap in the log, or a commit or applied index beyond the log is a clear error,
//! never a silently shorter history. (The tree itself lives in memory, rebuilt from the
//! snapshot and the log after it; the stored applied index is what an earlier run had
//! already served, so the log must still reach it.) A torn write at the very end of RocksDB's WAL (a crash during
//! an unacknowledged write) is tolerated; corruption anywhere else is an error.

use std::collections::VecDeque;
use std::path::Path;
use std::sync::Arc;

use parking_lot::RwLock;
use protobuf::Message as _;
use raft::eraftpb::{ConfState, Entry, HardState, Snapshot, SnapshotMetadata};
use raft::{GetEntriesContext, RaftState, StorageError};
use rocksdb::{
    ColumnFamilyDescriptor, DBRecoveryMode, IteratorMode, Options, WriteBatch, WriteOptions, DB,
};

const FORMAT_VERSION: u32 = 3;
const CF_LOG: &str = "log";
const CF_STATE: &str = "state";
const CF_SNAPSHOT: &str = "snapshot";
/// Chunk size of a stored snapshot, and how many bytes go to RocksDB per write batch.
const SNAPSHOT_CHUNK: usize = 4 << 20;
const SNAPSHOT_BATCH: usize = 32 << 20;
/// The chunk number of a snapshot's end mark.
const END_MARK: u32 = u32::MAX;
const KEY_FORMAT: &[u8] = b"format";
const KEY_HARD_STATE: &[u8] = b"hard_state";
const KEY_CONF_STATE: &[u8] = b"conf_state";
const KEY_SNAPSHOT_META: &[u8] = b"snapshot_meta";
const KEY_TRUNCATED: &[u8] = b"truncated";
const KEY_APPLIED: &[u8] = b"applied";

/// Recent entries kept in memory.
const CACHE_MAX_ENTRIES: usize = 16_384;
const CACHE_MAX_BYTES: usize = 64 * 1024 * 1024;

/// Why the data directory cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum StorageOpenError {
    #[error("RocksDB error: {0}")]
    Rocks(#[from] rocksdb::Error),
    #[error("data directory was written by an incompatible zooraft (format {found}, this build reads {expected})")]
    IncompatibleFormat { found: String, expected: u32 },
    #[error("corrupt {what}: {detail}")]
    Corrupt { what: &'static str, detail: String },
}

fn corrupt(what: &'static str, detail: impl std::fmt::Display) -> StorageOpenError {
    StorageOpenError::Corrupt {
        what,
        detail: detail.to_string(),
    }
}

fn key(index: u64) -> [u8; 8] {
    index.to_be_bytes()
}

struct Meta {
    hard_state: HardState,
    /// Entries up to here are on disk; the cache never drops one beyond it (raft-rs may
    /// read a staged entry before it is written).
    durable_index: u64,
    conf_state: ConfState,
    snapshot_meta: SnapshotMetadata,
    /// The entry just before the first stored one (its term is kept for raft-rs).
    truncated_index: u64,
    truncated_term: u64,
    last_index: u64,
    /// The applied index the state machine reported, and the one last staged for writing.
    applied: u64,
    applied_staged: u64,
    /// Contiguous entries ending at `last_index`.
    cache: VecDeque<Entry>,
    cache_bytes: usize,
}

impl Meta {
    fn first_index(&self) -> u64 {
        self.truncated_index + 1
    }

    fn cache_first(&self) -> Option<u64> {
        self.cache.front().map(|e| e.index)
    }

    fn trim_cache(&mut self) {
        while self.cache.len() > CACHE_MAX_ENTRIES || self.cache_bytes > CACHE_MAX_BYTES {
            if self
                .cache
                .front()
                .is_some_and(|e| e.index > self.durable_index)
            {
                break;
            }
            match self.cache.pop_front() {
                Some(e) => self.cache_bytes -= e.data.len() + 32,
                None => break,
            }
        }
    }
}

/// Updates staged in memory, to be written by [`RaftStorage::write`].
pub struct PendingWrite {
    batch: WriteBatch,
    last_entry: Option<u64>,
}

/// The Raft log and state; cheap to clone (shared).
#[derive(Clone)]
pub struct RaftStorage {
    db: Arc<DB>,
    meta: Arc<RwLock<Meta>>,

    /// The last snapshot read back, for sending to several followers in a row.
    snapshot_cache: Arc<parking_lot::Mutex<Option<(u64, bytes::Bytes)>>>,
}

/// The key of chunk `chunk` of the snapshot at (`index`, `term`).
fn snapshot_key(index: u64, term: u64, chunk: u32) -> [u8; 20] {
    let mut k = [0u8; 20];
    k[..8].copy_from_slice(&index.to_be_bytes());
    k[8..16].copy_from_slice(&term.to_be_bytes());
    k[16..].copy_from_slice(&chunk.to_be_bytes());
    k
}

/// Why a stored snapshot cannot be read back.
fn read_snapshot(db: &DB, index: u64, term: u64) -> Result<bytes::Bytes, String> {
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

fn decode<M: protobuf::Message>(what: &'static str, bytes: &[u8]) -> Result<M, StorageOpenError> {
    let mut m = M::new();
    m.merge_from_bytes(bytes).map_err(|e| corrupt(what, e))?;
    Ok(m)
}

/// A failed write to the log is fatal: a member that cannot persist must not vote or ack.
fn fatal(what: &str, e: impl std::fmt::Display) -> ! {
    tracing::error!("storage failure while {what}: {e}; stopping");
    eprintln!("zooraft: fatal storage failure while {what}: {e}");
    std::process::exit(crate::critical::EXIT_FATAL)
}

impl RaftStorage {
    /// Opens (or creates) the store under `dir`. A new store starts with `initial_conf` (the
    /// static membership from zoo.cfg), as every member of a new ensemble must.
    pub fn open(dir: &Path, initial_conf: ConfState) -> Result<RaftStorage, StorageOpenError> {
        std::fs::create_dir_all(dir).map_err(|e| corrupt("data directory", e))?;
        let mut opts = Options::default();
        opts.create_if_missing(true);
        opts.create_missing_column_families(true);
        opts.set_wal_recovery_mode(DBRecoveryMode::TolerateCorruptedTailRecords);
        opts.set_paranoid_checks(true);
        opts.set_max_total_wal_size(256 * 1024 * 1024);
        opts.set_keep_log_file_num(4);
        let cfs = [CF_LOG, CF_STATE, CF_SNAPSHOT]
            .into_iter()
            .map(|name| ColumnFamilyDescriptor::new(name, Options::default()));
        let db = DB::open_cf_descriptors(&opts, dir, cfs)?;
        let state = db
            .cf_handle(CF_STATE)
            .ok_or_else(|| corrupt("store", "state column family missing"))?;
        let log = db
            .cf_handle(CF_LOG)
            .ok_or_else(|| corrupt("store", "log column family missing"))?;

        match db.get_cf(state, KEY_FORMAT)? {
            None => {
                let mut wb = WriteBatch::default();
                wb.put_cf(state, KEY_FORMAT, FORMAT_VERSION.to_be_bytes());
                wb.put_cf(
                    state,
                    KEY_CONF_STATE,
                    initial_conf
                        .write_to_bytes()
                        .map_err(|e| corrupt("conf state", e))?,
                );
                let mut wo = WriteOptions::default();
                wo.set_sync(true);
                db.write_opt(wb, &wo)?;
            }
            Some(v) if v.as_slice() == FORMAT_VERSION.to_be_bytes() => {}
            Some(v) => {
                return Err(StorageOpenError::IncompatibleFormat {
                    found: format!("{v:?}"),
                    expected: FORMAT_VERSION,
                })
            }
        }

        let hard_state: HardState = match db.get_cf(state, KEY_HARD_STATE)? {
            Some(b) => decode("hard state", &b)?,
            None => HardState::default(),
        };
        let conf_state: ConfState = match db.get_cf(state, KEY_CONF_STATE)? {
            Some(b) => decode("conf state", &b)?,
            None => return Err(corrupt("conf state", "missing")),
        };
        let snapshot_meta: SnapshotMetadata = match db.get_cf(state, KEY_SNAPSHOT_META)? {
            Some(b) => decode("snapshot metadata", &b)?,
            None => SnapshotMetadata::default(),
        };

        let (truncated_index, truncated_term) = match db.get_cf(state, KEY_TRUNCATED)? {
            Some(b) if b.len() == 16 => (
                u64::from_be_bytes(b[..8].try_into().unwrap_or_default()),
                u64::from_be_bytes(b[8..].try_into().unwrap_or_default()),
            ),
            Some(b) => return Err(corrupt("truncation point", format!("{} bytes", b.len()))),
            None => (0, 0),
        };

        // Read the log after the truncation point: it must be contiguous and decodable.
        let mut cache = VecDeque::new();
        let mut cache_bytes = 0usize;
        let mut expected = truncated_index + 1;
        let mut last_index = truncated_index.max(snapshot_meta.index);
        for item in db.iterator_cf(log, IteratorMode::Start) {
            let (k, v) = item?;
            let index = u64::from_be_bytes(
                k.as_ref()
                    .try_into()
                    .map_err(|_| corrupt("log", format!("key of {} bytes", k.len())))?,
            );
            if index < expected {
                // Left behind by a compaction that had not finished; harmless, skipped.
                continue;
            }
            if index != expected {
                return Err(corrupt(
                    "log",
                    format!("gap: expected entry {expected}, found {index}"),
                ));
            }
            let entry: Entry = decode("log entry", &v)?;
            if entry.index != index {
                return Err(corrupt(
                    "log",
                    format!("entry at key {index} says index {}", entry.index),
                ));
            }
            cache_bytes += entry.data.len() + 32;
            cache.push_back(entry);
            last_index = index;
            expected += 1;
        }
        let applied = match db.get_cf(state, KEY_APPLIED)? {
            Some(b) => u64::from_be_bytes(
                b.as_slice()
                    .try_into()
                    .map_err(|_| corrupt("applied index", format!("{} bytes", b.len())))?,
            ),
            None => 0,
        };
        if applied > last_index.max(snapshot_meta.index) {
            return Err(corrupt(
                "log",
                format!(
                    "entries up to {applied} were applied before, but the log ends at {last_index}: acknowledged writes are missing"
                ),
            ));
        }
        if hard_state.commit > last_index {
            return Err(corrupt(
                "log",
                format!(
                    "commit index {} is beyond the last stored entry {last_index}: acknowledged writes are missing",
                    hard_state.commit
                ),
            ));
        }
        if last_index < snapshot_meta.index {
            last_index = snapshot_meta.index;
        }
        if snapshot_meta.index > 0 {
            // Read in full once: a snapshot the log was compacted behind must be whole.
            if let Err(e) = read_snapshot(&db, snapshot_meta.index, snapshot_meta.term) {
                return Err(corrupt(
                    "snapshot",
                    format!("{e} (the log before it was compacted away)"),
                ));
            }
        }
        // Chunks of a snapshot whose naming never became durable (a crash in between).
        {
            let snapshots = db
                .cf_handle(CF_SNAPSHOT)
                .ok_or_else(|| corrupt("store", "snapshot column family missing"))?;
            let (index, term) = (snapshot_meta.index, snapshot_meta.term);
            let mut wb = WriteBatch::default();
            wb.delete_range_cf(snapshots, &[][..], &snapshot_key(index, term, 0)[..]);
            wb.delete_range_cf(
                snapshots,
                &snapshot_key(index, term.saturating_add(1), 0)[..],
                &[0xffu8; 21][..],
            );
            db.write(wb)?;
        }
        let mut meta = Meta {
            durable_index: last_index,
            hard_state,
            conf_state,
            snapshot_meta,
            truncated_index,
            truncated_term,
            last_index,
            applied,
            applied_staged: applied,
            cache,
            cache_bytes,
        };
        meta.trim_cache();
        Ok(RaftStorage {
            db: Arc::new(db),
            meta: Arc::new(RwLock::new(meta)),

            snapshot_cache: Arc::new(parking_lot::Mutex::new(None)),
        })
    }

    fn cf(&self, name: &str) -> &rocksdb::ColumnFamily {
        match self.db.cf_handle(name) {
            Some(cf) => cf,
            None => fatal("looking up a column family", name),
        }
    }

    pub fn hard_state(&self) -> HardState {
        self.meta.read().hard_state.clone()
    }

    pub fn conf_state(&self) -> ConfState {
        self.meta.read().conf_state.clone()
    }

    pub fn snapshot_metadata(&self) -> SnapshotMetadata {
        self.meta.read().snapshot_meta.clone()
    }

    /// The state machine applied entries up to `index`; it is stored with the next write.
    pub fn set_applied(&self, index: u64) {
        let mut m = self.meta.write();
        m.applied = m.applied.max(index);
    }

    /// Entries applied since the last snapshot was taken (what a new snapshot would cover).
    pub fn entries_since_snapshot(&self, applied: u64) -> u64 {
        applied.saturating_sub(self.meta.read().snapshot_meta.index)
    }

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

    /// The stored state machine snapshot, if any.
    pub fn snapshot_data(&self) -> Option<bytes::Bytes> {
        let meta = self.snapshot_metadata();
        if meta.index == 0 {
            return None;
        }
        if let Some((index, data)) = self.snapshot_cache.lock().as_ref() {
            if *index == meta.index {
                return Some(data.clone());
            }
        }
        let data = match read_snapshot(&self.db, meta.index, meta.term) {
            Ok(d) => d,
            Err(e) => fatal("reading the stored snapshot", e),
        };
        *self.snapshot_cache.lock() = Some((meta.index, data.clone()));
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
        let log = self.cf(CF_LOG);
        let mut wb = WriteBatch::default();
        let applied = {
            let m = self.meta.read();
            (m.applied > m.applied_staged).then_some(m.applied)
        };
        if let Some(applied) = applied {
            wb.put_cf(self.cf(CF_STATE), KEY_APPLIED, applied.to_be_bytes());
        }
        if let Some(first) = entries.first() {
            let last_staged = self.meta.read().last_index;
            if first.index <= last_staged {
                wb.delete_range_cf(log, key(first.index), key(u64::MAX));
            }
            for e in entries {
                match e.write_to_bytes() {
                    Ok(b) => wb.put_cf(log, key(e.index), b),
                    Err(err) => fatal("encoding an entry", err),
                }
            }
        }
        if let Some(hs) = hard_state {
            match hs.write_to_bytes() {
                Ok(b) => wb.put_cf(self.cf(CF_STATE), KEY_HARD_STATE, b),
                Err(err) => fatal("encoding the hard state", err),
            }
        }
        let mut m = self.meta.write();
        if let Some(hs) = hard_state {
            m.hard_state = hs.clone();
        }
        if let Some(applied) = applied {
            m.applied_staged = applied;
        }
        let last_entry = entries.last().map(|e| e.index);
        if let Some(first) = entries.first() {
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
            batch: wb,
            last_entry,
        })
    }

    /// Writes staged updates, in the order they were staged, with at most one fsync for all
    /// of them (group commit: only the last write syncs, and RocksDB's WAL is ordered).
    pub fn write(&self, writes: Vec<PendingWrite>, sync: bool) {
        let n = writes.len();
        let mut last_entry = None;
        for (i, w) in writes.into_iter().enumerate() {
            let mut wo = WriteOptions::default();
            wo.set_sync(sync && i + 1 == n);
            if let Err(e) = self.db.write_opt(w.batch, &wo) {
                fatal("appending to the log", e);
            }
            last_entry = w.last_entry.or(last_entry);
        }
        if let Some(last) = last_entry {
            let mut m = self.meta.write();
            m.durable_index = m.durable_index.max(last).min(m.last_index);
            m.trim_cache();
        }
    }

    /// Persists a new membership (after a conf change was applied).
    pub fn set_conf_state(&self, cs: &ConfState) {
        let bytes = match cs.write_to_bytes() {
            Ok(b) => b,
            Err(e) => fatal("encoding the conf state", e),
        };
        let mut wo = WriteOptions::default();
        wo.set_sync(true);
        if let Err(e) = self
            .db
            .put_cf_opt(self.cf(CF_STATE), KEY_CONF_STATE, bytes, &wo)
        {
            fatal("writing the conf state", e);
        }
        self.meta.write().conf_state = cs.clone();
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

    fn read_entries(&self, low: u64, high: u64) -> raft::Result<Vec<Entry>> {
        let log = self.cf(CF_LOG);
        let mut out = Vec::with_capacity((high - low) as usize);
        let iter = self.db.iterator_cf(
            log,
            IteratorMode::From(&key(low), rocksdb::Direction::Forward),
        );
        for item in iter {
            let (k, v) = item.map_err(|e| raft::Error::Store(StorageError::Other(Box::new(e))))?;
            let index = u64::from_be_bytes(k.as_ref().try_into().unwrap_or([0xff; 8]));
            if index >= high {
                break;
            }
            let mut e = Entry::default();
            e.merge_from_bytes(&v)
                .map_err(|err| raft::Error::Store(StorageError::Other(Box::new(err))))?;
            out.push(e);
        }
        if out.len() as u64 != high - low {
            return Err(raft::Error::Store(StorageError::Unavailable));
        }
        Ok(out)
    }
}

fn limit_size(entries: &mut Vec<Entry>, max: Option<u64>) {
    let Some(max) = max else { return };
    let mut size = 0u64;
    let mut keep = 0;
    for e in entries.iter() {
        size += e.compute_size() as u64;
        if keep > 0 && size > max {
            break;
        }
        keep += 1;
    }
    entries.truncate(keep.max(1));
}

impl raft::Storage for RaftStorage {
    fn initial_state(&self) -> raft::Result<RaftState> {
        let m = self.meta.read();
        Ok(RaftState::new(m.hard_state.clone(), m.conf_state.clone()))
    }

    fn entries(
        &self,
        low: u64,
        high: u64,
        max_size: impl Into<Option<u64>>,
        _context: GetEntriesContext,
    ) -> raft::Result<Vec<Entry>> {
        let max_size = max_size.into();
        let m = self.meta.read();
        if low < m.first_index() {
            return Err(raft::Error::Store(StorageError::Compacted));
        }
        if high > m.last_index + 1 {
            return Err(raft::Error::Store(StorageError::Unavailable));
        }
        if low >= high {
            return Ok(Vec::new());
        }
        let mut out = match m.cache_first() {
            Some(first) if low >= first => {
                let start = (low - first) as usize;
                let end = (high - first) as usize;
                m.cache.range(start..end).cloned().collect()
            }
            _ => {
                drop(m);
                self.read_entries(low, high)?
            }
        };
        limit_size(&mut out, max_size);
        Ok(out)
    }

    fn term(&self, idx: u64) -> raft::Result<u64> {
        let m = self.meta.read();
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
        Ok(self.read_entries(idx, idx + 1)?[0].term)
    }

    fn first_index(&self) -> raft::Result<u64> {
        Ok(self.meta.read().first_index())
    }

    fn last_index(&self) -> raft::Result<u64> {
        Ok(self.meta.read().last_index)
    }

    fn snapshot(&self, request_index: u64, _to: u64) -> raft::Result<Snapshot> {
        let meta = self.snapshot_metadata();
        if meta.index < request_index || meta.index == 0 {
            // The consensus loop takes a fresh snapshot soon after this is seen.
            return Err(raft::Error::Store(
                StorageError::SnapshotTemporarilyUnavailable,
            ));
        }
        let mut snap = Snapshot {
            data: self.snapshot_data().unwrap_or_default(),
            ..Default::default()
        };
        snap.set_metadata(meta);
        Ok(snap)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use raft::Storage;

    fn entry(index: u64, term: u64) -> Entry {
        Entry {
            index,
            term,
            data: bytes::Bytes::from(vec![index as u8; 10]),
            ..Default::default()
        }
    }

    fn conf() -> ConfState {
        ConfState {
            voters: vec![1],
            ..Default::default()
        }
    }

    #[test]
    fn append_restart_conflict_and_snapshot() {
        let dir = tempfile::tempdir().unwrap();
        {
            let s = RaftStorage::open(dir.path(), conf()).unwrap();
            assert_eq!((s.first_index().unwrap(), s.last_index().unwrap()), (1, 0));
            let hs = HardState {
                term: 1,
                commit: 3,
                ..Default::default()
            };
            s.append(
                &[entry(1, 1), entry(2, 1), entry(3, 1), entry(4, 1)],
                Some(&hs),
                true,
            );
            // A new leader overwrites the uncommitted tail.
            s.append(&[entry(4, 2), entry(5, 2)], None, true);
            assert_eq!(s.term(4).unwrap(), 2);
            assert_eq!(s.last_index().unwrap(), 5);
        }
        let s = RaftStorage::open(dir.path(), conf()).unwrap();
        assert_eq!(s.last_index().unwrap(), 5);
        assert_eq!(s.hard_state().commit, 3);
        let got = s
            .entries(2, 6, None, GetEntriesContext::empty(false))
            .unwrap();
        assert_eq!(
            got.iter().map(|e| (e.index, e.term)).collect::<Vec<_>>(),
            vec![(2, 1), (3, 1), (4, 2), (5, 2)]
        );
        // Snapshot at 3, keeping the log after 2 for followers slightly behind.
        s.write_snapshot(3, 1, b"state").unwrap();
        s.save_snapshot(3, 1, &conf(), 2);
        assert_eq!(s.first_index().unwrap(), 3);
        assert_eq!(s.term(2).unwrap(), 1);
        assert_eq!(s.term(3).unwrap(), 1);
        assert!(matches!(
            s.term(1),
            Err(raft::Error::Store(StorageError::Compacted))
        ));
        assert_eq!(s.snapshot(3, 2).unwrap().data.as_ref(), b"state");
        assert_eq!(
            s.entries(3, 6, None, GetEntriesContext::empty(false))
                .unwrap()
                .len(),
            3
        );
        drop(s);
        let s = RaftStorage::open(dir.path(), conf()).unwrap();
        assert_eq!((s.first_index().unwrap(), s.last_index().unwrap()), (3, 5));
        s.write_snapshot(5, 2, b"state2").unwrap();
        s.save_snapshot(5, 2, &conf(), 5);
        assert_eq!((s.first_index().unwrap(), s.last_index().unwrap()), (6, 5));
        assert_eq!(s.term(5).unwrap(), 2);
        assert_eq!(s.snapshot_data().unwrap().as_ref(), b"state2");
    }

    #[test]
    fn incompatible_format_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        {
            let s = RaftStorage::open(dir.path(), conf()).unwrap();
            s.db.put_cf(s.cf(CF_STATE), KEY_FORMAT, 99u32.to_be_bytes())
                .unwrap();
        }
        let err = RaftStorage::open(dir.path(), conf()).err().unwrap();
        assert!(
            matches!(err, StorageOpenError::IncompatibleFormat { .. }),
            "{err}"
        );
    }

    #[test]
    fn a_missing_committed_entry_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        {
            let s = RaftStorage::open(dir.path(), conf()).unwrap();
            let hs = HardState {
                commit: 3,
                ..Default::default()
            };
            s.append(&[entry(1, 1), entry(2, 1), entry(3, 1)], Some(&hs), true);
            s.db.delete_cf(s.cf(CF_LOG), key(2)).unwrap();
        }
        let err = RaftStorage::open(dir.path(), conf()).err().unwrap();
        assert!(err.to_string().contains("gap"), "{err}");
        let dir = tempfile::tempdir().unwrap();
        {
            let s = RaftStorage::open(dir.path(), conf()).unwrap();
            let hs = HardState {
                commit: 3,
                ..Default::default()
            };
            s.append(&[entry(1, 1), entry(2, 1), entry(3, 1)], Some(&hs), true);
            s.db.delete_cf(s.cf(CF_LOG), key(3)).unwrap();
        }
        let err = RaftStorage::open(dir.path(), conf()).err().unwrap();
        assert!(
            err.to_string().contains("acknowledged writes are missing"),
            "{err}"
        );
    }

    /// Counts the stored chunks (end marks included) of every snapshot.
    fn stored_chunks(s: &RaftStorage) -> Vec<(u64, u32)> {
        s.db.iterator_cf(s.cf(CF_SNAPSHOT), IteratorMode::Start)
            .map(|kv| {
                let (k, _) = kv.unwrap();
                let index = u64::from_be_bytes(k[..8].try_into().unwrap());
                let chunk = u32::from_be_bytes(k[16..].try_into().unwrap());
                (index, chunk)
            })
            .collect()
    }

    #[test]
    fn large_snapshots_are_chunked_survive_reopen_and_replace_older_ones() {
        let dir = tempfile::tempdir().unwrap();
        let big: Vec<u8> = (0..(2 * SNAPSHOT_CHUNK + 12345))
            .map(|i| (i % 251) as u8)
            .collect();
        {
            let s = RaftStorage::open(dir.path(), conf()).unwrap();
            let hs = HardState {
                commit: 4,
                term: 1,
                ..Default::default()
            };
            s.append(
                &[entry(1, 1), entry(2, 1), entry(3, 1), entry(4, 1)],
                Some(&hs),
                true,
            );
            s.write_snapshot(2, 1, b"older").unwrap();
            s.save_snapshot(2, 1, &conf(), 2);
            s.write_snapshot(4, 1, &big).unwrap();
            s.save_snapshot(4, 1, &conf(), 4);
            // The older snapshot's chunks are gone; the new one has three and an end mark.
            assert_eq!(
                stored_chunks(&s),
                vec![(4, 0), (4, 1), (4, 2), (4, END_MARK)]
            );
            // Written, never named (a crash before `save_snapshot`): dropped at open.
            s.write_snapshot(9, 1, b"orphan").unwrap();
        }
        let s = RaftStorage::open(dir.path(), conf()).unwrap();
        assert_eq!(s.snapshot_data().unwrap().as_ref(), big.as_slice());
        assert!(stored_chunks(&s).iter().all(|(index, _)| *index == 4));
    }

    /// A fresh store holding entries 1 and 2 (term 1), both committed.
    fn two_committed_entries(dir: &Path) -> RaftStorage {
        let s = RaftStorage::open(dir, conf()).unwrap();
        let hs = HardState {
            commit: 2,
            term: 1,
            ..Default::default()
        };
        s.append(&[entry(1, 1), entry(2, 1)], Some(&hs), true);
        s
    }

    #[test]
    fn a_damaged_snapshot_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        {
            let s = two_committed_entries(dir.path());
            let data = vec![7u8; SNAPSHOT_CHUNK + 1];
            s.write_snapshot(2, 1, &data).unwrap();
            s.save_snapshot(2, 1, &conf(), 2);
            s.db.delete_cf(s.cf(CF_SNAPSHOT), snapshot_key(2, 1, 1))
                .unwrap();
        }
        let err = RaftStorage::open(dir.path(), conf()).err().unwrap();
        assert!(
            err.to_string().contains("corrupt snapshot") && err.to_string().contains("chunks"),
            "{err}"
        );
    }

    #[test]
    fn the_applied_index_is_stored_and_a_log_short_of_it_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        {
            let s = two_committed_entries(dir.path());
            s.set_applied(2);
            // Stored with the next write, not on its own.
            s.append(&[entry(3, 1), entry(4, 1)], None, true);
        }
        {
            let s = RaftStorage::open(dir.path(), conf()).unwrap();
            assert_eq!(s.meta.read().applied, 2);
            // The tail that had been applied disappears (a damaged store).
            s.db.delete_range_cf(s.cf(CF_LOG), key(2), key(5)).unwrap();
        }
        let err = RaftStorage::open(dir.path(), conf()).err().unwrap();
        assert!(
            err.to_string()
                .contains("entries up to 2 were applied before"),
            "{err}"
        );
    }

    #[test]
    fn snapshot_install_replaces_the_log() {
        let dir = tempfile::tempdir().unwrap();
        let s = RaftStorage::open(dir.path(), conf()).unwrap();
        s.append(&[entry(1, 1), entry(2, 1)], None, true);
        let mut snap = Snapshot::default();
        snap.mut_metadata().index = 10;
        snap.mut_metadata().term = 3;
        snap.mut_metadata().set_conf_state(conf());
        snap.data = bytes::Bytes::from_static(b"tree");
        s.install_snapshot(&snap);
        assert_eq!(
            (s.first_index().unwrap(), s.last_index().unwrap()),
            (11, 10)
        );
        assert_eq!(s.term(10).unwrap(), 3);
        assert_eq!(s.hard_state().commit, 10);
        s.append(&[entry(11, 3)], None, true);
        assert_eq!(
            s.entries(11, 12, None, GetEntriesContext::empty(false))
                .unwrap()[0]
                .index,
            11
        );
    }
}
