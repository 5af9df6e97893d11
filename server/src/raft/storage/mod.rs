//! Durable Raft state in RocksDB, behind raft-rs's `Storage` trait.
//!
//! One database, so one write-ahead log makes every multi-key write atomic:
//!
//! | column family | key                     | value                                   |
//! |---------------|-------------------------|-----------------------------------------|
//! | `log`         | index, u64 big-endian   | `eraftpb::Entry` (protobuf)             |
//! | `state`       | `format`                | format version (u32 BE): 4, or 3 (no    |
//! |               |                         | snapshot file yet) — refuse others      |
//! | `state`       | `hard_state`            | `eraftpb::HardState`                    |
//! | `state`       | `conf_state`            | `eraftpb::ConfState`                    |
//! | `state`       | `snapshot_meta`         | `eraftpb::SnapshotMetadata`             |
//! | `state`       | `snapshot_file`         | index, term, length (u64 BE each) of    |
//! |               |                         | the snapshot file `snapshot_meta` names |
//! | `state`       | `truncated`             | index and term (u64 BE each) before the |
//! |               |                         | first stored entry                      |
//! | `state`       | `applied`               | applied index (u64 BE), a lower bound:  |
//! |               |                         | written with the next log write         |
//! | `state`       | `identity`              | incarnation and trust (`identity.rs`)   |
//! | `snapshot`    | index, term (u64 BE),   | earlier builds' snapshots, in chunks of |
//! |               | chunk number (u32 BE)   | up to 4 MiB, in order (read, not        |
//! | `snapshot`    | index, term, `u32::MAX` | written); end mark: chunk count (u32    |
//! |               |                         | BE), total length (u64 BE)              |
//!
//! Snapshots are files in `snapshots/` (see `snapshot_files.rs`), streamed by a background
//! thread while the Raft loop goes on, fsynced and renamed before `snapshot_meta` and
//! `snapshot_file` name them. Files (and chunks) nothing names — a crash between the two
//! steps — are deleted at open.
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
//!
//! Files: `open.rs` (opening and validation), `log.rs` (entries and hard state),
//! `identity.rs` (which incarnation of the member the store is, and whether it is trusted),
//! `snapshots.rs` and `snapshot_files.rs` (snapshots), `scrub.rs` (reading it all back to find damage), and here the shared records and raft-rs's `Storage`.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use parking_lot::RwLock;
use protobuf::Message as _;
use raft::eraftpb::{ConfState, Entry, HardState, Snapshot, SnapshotMetadata};
use raft::{GetEntriesContext, RaftState, StorageError};
use rocksdb::{
    ColumnFamilyDescriptor, DBRecoveryMode, IteratorMode, Options, WriteBatch, WriteOptions, DB,
};

mod identity;
mod log;
mod open;
mod scrub;
mod snapshot_files;
mod snapshots;

pub use identity::Identity;
pub use scrub::{SnapshotScrub, TableScrubError};
pub use snapshot_files::PACE as SNAPSHOT_PACE;
use snapshots::{read_snapshot, snapshot_key};

/// Format 4 names snapshot files (`snapshot_file`); format 3 (snapshots in chunks only) is
/// still opened, and becomes 4 with the first snapshot file named, so that an earlier build
/// refuses the store as incompatible instead of finding its snapshot missing.
const FORMAT_VERSION: u32 = 4;
const FORMAT_CHUNK_SNAPSHOTS: u32 = 3;
const CF_LOG: &str = "log";
const CF_STATE: &str = "state";
const CF_SNAPSHOT: &str = "snapshot";
/// The chunk number of an earlier-layout snapshot's end mark.
const END_MARK: u32 = u32::MAX;
const KEY_FORMAT: &[u8] = b"format";
const KEY_HARD_STATE: &[u8] = b"hard_state";
const KEY_CONF_STATE: &[u8] = b"conf_state";
const KEY_SNAPSHOT_META: &[u8] = b"snapshot_meta";
const KEY_SNAPSHOT_FILE: &[u8] = b"snapshot_file";
const KEY_TRUNCATED: &[u8] = b"truncated";
const KEY_APPLIED: &[u8] = b"applied";

/// Recent entries kept in memory. They are needed there only until they are applied and
/// sent to every follower (a few milliseconds under load): an entry dropped from the cache
/// is read back from RocksDB by a follower that lags further. A standalone member drops
/// each entry once applied. At 64 MiB the cache held a
/// sixth of the server's memory at 1M znodes (67 bytes per znode created by the bench's
/// fill), all of it entries long applied and replicated.
const CACHE_MAX_ENTRIES: usize = 16_384;
const CACHE_MAX_BYTES: usize = 8 * 1024 * 1024;

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
    /// The length of the named snapshot's file; `None`: no snapshot, or one of the earlier
    /// layout (chunks in the `snapshot` column family).
    snapshot_file: Option<u64>,
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
    /// This store's incarnation and whether it is trusted (`identity.rs`).
    identity: Identity,
}

impl Meta {
    fn first_index(&self) -> u64 {
        self.truncated_index + 1
    }

    fn cache_first(&self) -> Option<u64> {
        self.cache.front().map(|e| e.index)
    }

    /// A group of one voter and no learners: nobody ever reads an entry it has applied.
    fn alone(&self) -> bool {
        let c = &self.conf_state;
        c.voters.len() == 1
            && c.learners.is_empty()
            && c.voters_outgoing.is_empty()
            && c.learners_next.is_empty()
    }

    fn trim_cache(&mut self) {
        if self.alone() {
            // Standalone, an entry is needed only until it is applied (the last one stays:
            // raft-rs asks for its term on every append).
            let done = self.applied.min(self.durable_index);
            while self.cache.len() > 1 && self.cache.front().is_some_and(|e| e.index <= done) {
                if let Some(e) = self.cache.pop_front() {
                    self.cache_bytes -= e.data.len() + 32;
                }
            }
        }
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

/// Updates staged in memory, to be written by [`RaftStorage::write`]. Encoded only there
/// (on the log writer's thread, not the Raft thread's); the entries are clones whose data
/// is shared, not copied.
pub struct PendingWrite {
    /// Stored entries from this index on are replaced (deleted first).
    truncate_from: Option<u64>,
    entries: Vec<Entry>,
    hard_state: Option<HardState>,
    applied: Option<u64>,
}

/// The Raft log and state; cheap to clone (shared).
#[derive(Clone)]
pub struct RaftStorage {
    db: Arc<DB>,
    meta: Arc<RwLock<Meta>>,

    /// The last snapshot read back, for sending to several followers in a row.
    snapshot_cache: Arc<parking_lot::Mutex<Option<(u64, bytes::Bytes)>>>,
    /// raft-rs asked for a snapshot the stored one cannot serve (see `snapshot`): the Raft
    /// loop takes a fresh one.
    snapshot_wanted: Arc<AtomicBool>,
    /// The stored snapshot file was found damaged (`scrub.rs`): the Raft loop writes a
    /// fresh one from the tree.
    snapshot_damaged: Arc<AtomicBool>,
}

fn decode<M: protobuf::Message>(what: &'static str, bytes: &[u8]) -> Result<M, StorageOpenError> {
    let mut m = M::new();
    m.merge_from_bytes(bytes).map_err(|e| corrupt(what, e))?;
    Ok(m)
}

/// A failed write to the log is fatal: a member that cannot persist must not vote or ack.
fn fatal(what: &str, e: impl std::fmt::Display) -> ! {
    crate::critical::fatal(format_args!("storage failure while {what}: {e}"))
}

impl RaftStorage {
    fn cf(&self, name: &str) -> &rocksdb::ColumnFamily {
        match self.db.cf_handle(name) {
            Some(cf) => cf,
            None => fatal("looking up a column family", name),
        }
    }

    /// The data directory.
    pub fn dir(&self) -> &Path {
        self.db.path()
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
        m.trim_cache();
    }

    /// Asks the Raft loop for a snapshot soon (a store that starts without one).
    pub fn want_snapshot(&self) {
        self.snapshot_wanted.store(true, Ordering::Relaxed);
    }

    /// Whether raft-rs asked for a snapshot newer than the stored one (cleared by asking).
    pub fn take_snapshot_wanted(&self) -> bool {
        self.snapshot_wanted.swap(false, Ordering::Relaxed)
    }

    /// Entries applied since the last snapshot was taken (what a new snapshot would cover).
    pub fn entries_since_snapshot(&self, applied: u64) -> u64 {
        applied.saturating_sub(self.meta.read().snapshot_meta.index)
    }
}

/// Whether `id` is a voter or a learner of `cs` (either side of a joint configuration).
fn is_member(cs: &ConfState, id: u64) -> bool {
    [
        &cs.voters,
        &cs.learners,
        &cs.voters_outgoing,
        &cs.learners_next,
    ]
    .iter()
    .any(|ids| ids.contains(&id))
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
            let m = self.meta.read();
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
                    self.read_entries(next, upto, &mut budget, &mut out)?;
                    next = upto;
                }
            }
        }
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
        let mut one = Vec::with_capacity(1);
        self.read_entries(idx, idx + 1, &mut SizeBudget::new(None), &mut one)?;
        Ok(one[0].term)
    }

    fn first_index(&self) -> raft::Result<u64> {
        Ok(self.meta.read().first_index())
    }

    fn last_index(&self) -> raft::Result<u64> {
        Ok(self.meta.read().last_index)
    }

    fn snapshot(&self, request_index: u64, to: u64) -> raft::Result<Snapshot> {
        let meta = self.snapshot_metadata();
        // A member added after the snapshot was taken is not in its membership, and
        // raft-rs on the member refuses to restore it: a newer snapshot is needed.
        if meta.index < request_index || meta.index == 0 || !is_member(meta.get_conf_state(), to) {
            // The Raft loop takes a fresh snapshot soon after this is seen.
            self.snapshot_wanted.store(true, Ordering::Relaxed);
            return Err(raft::Error::Store(
                StorageError::SnapshotTemporarilyUnavailable,
            ));
        }
        // A damaged file is never sent: the Raft loop writes a fresh one meanwhile.
        let Some(data) = self.snapshot_data_for_sending() else {
            return Err(raft::Error::Store(
                StorageError::SnapshotTemporarilyUnavailable,
            ));
        };
        let mut snap = Snapshot {
            data,
            ..Default::default()
        };
        snap.set_metadata(meta);
        Ok(snap)
    }
}

#[cfg(test)]
mod tests;

/// What the store holds in memory, in bytes (RocksDB's own accounting).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StoreMemory {
    /// Memtables of every column family (bounded by `MEMTABLE_BUDGET` in `open.rs`).
    pub memtables: u64,
    /// Index and filter blocks of the open table files.
    pub table_readers: u64,
}

impl RaftStorage {
    /// Something to call when the server goes quiet: it writes every column family's
    /// memtable out to a table file and waits, which frees the memtables' memory (up to
    /// `MEMTABLE_BUDGET`) for the quiet-time trim to give back. It holds the store only
    /// while it flushes, so it never keeps a closed store open; once the store is closed it
    /// does nothing.
    pub fn memtable_flusher(&self) -> impl Fn() + Send + 'static {
        let db = Arc::downgrade(&self.db);
        move || {
            let Some(db) = db.upgrade() else { return };
            for name in [CF_LOG, CF_STATE, CF_SNAPSHOT] {
                let Some(cf) = db.cf_handle(name) else {
                    continue;
                };
                if let Err(e) = db.flush_cf(cf) {
                    tracing::warn!("cannot flush the {name} memtable while quiet: {e}");
                }
            }
        }
    }

    /// Reads RocksDB's memory figures now.
    pub fn memory(&self) -> StoreMemory {
        let mut m = StoreMemory::default();
        for name in [CF_LOG, CF_STATE, CF_SNAPSHOT] {
            let cf = self.cf(name);
            let value = |property: &str| {
                self.db
                    .property_int_value_cf(cf, property)
                    .ok()
                    .flatten()
                    .unwrap_or(0)
            };
            m.memtables += value("rocksdb.cur-size-all-mem-tables");
            m.table_readers += value("rocksdb.estimate-table-readers-mem");
        }
        m
    }
}
