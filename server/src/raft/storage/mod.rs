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
//! Files: `store.rs` (the database and the in-memory state every part works on, the
//! layout's keys), `open.rs` (opening and validation), `log.rs` (entries and hard state),
//! `identity.rs` (which incarnation of the member the store is, and whether it is trusted),
//! `snapshots.rs` and `snapshot_files.rs` (snapshots), `scrub.rs` (reading it all back to
//! find damage). Each part is functions over the [`Store`](store::Store) it is handed;
//! here, [`RaftStorage`] (the handle the rest of the server holds) delegates to them, and
//! raft-rs's `Storage`.

use std::io;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use raft::eraftpb::{ConfState, Entry, HardState, Snapshot, SnapshotMetadata};
use raft::{GetEntriesContext, RaftState, StorageError};

mod identity;
mod log;
mod open;
mod scrub;
mod snapshot_files;
mod snapshots;
mod store;

pub use identity::Identity;
pub use log::PendingWrite;
pub use scrub::{SnapshotScrub, TableScrubError, TablesRead};
pub use snapshot_files::{SnapshotSink, PACE as SNAPSHOT_PACE};
pub use snapshots::SnapshotSource;
pub use store::StorageOpenError;
use store::{Store, CF_LOG, CF_SNAPSHOT, CF_STATE};

/// The Raft log and state; cheap to clone (shared).
#[derive(Clone)]
pub struct RaftStorage {
    store: Store,
}

impl RaftStorage {
    /// Opens (or creates) the store under `dir`. A new store starts with `initial_conf` (the
    /// static membership from zoo.cfg), as every member of a new ensemble must.
    pub fn open(dir: &Path, initial_conf: ConfState) -> Result<RaftStorage, StorageOpenError> {
        open::open(dir, initial_conf).map(|store| RaftStorage { store })
    }

    /// [`Self::open`], and the stored snapshot (if any) handed to `load` on the calling
    /// thread while another opens RocksDB and reads and checks the log (see `open.rs`).
    pub fn open_loading<T: Send>(
        dir: &Path,
        initial_conf: ConfState,
        load: Option<impl FnMut(SnapshotSource) -> T + Send>,
    ) -> Result<(RaftStorage, Option<T>), StorageOpenError> {
        open::open_loading(dir, initial_conf, load).map(|(store, t)| (RaftStorage { store }, t))
    }

    /// The data directory.
    pub fn dir(&self) -> &Path {
        self.store.dir()
    }

    pub fn hard_state(&self) -> HardState {
        self.store.hard_state()
    }

    pub fn conf_state(&self) -> ConfState {
        self.store.conf_state()
    }

    pub fn snapshot_metadata(&self) -> SnapshotMetadata {
        self.store.snapshot_metadata()
    }

    /// The state machine applied entries up to `index`; it is stored with the next write.
    pub fn set_applied(&self, index: u64) {
        let mut m = self.store.meta.write();
        m.applied = m.applied.max(index);
        m.trim_cache();
    }

    /// Asks the Raft loop for a snapshot soon (a store that starts without one).
    pub fn want_snapshot(&self) {
        self.store.snapshot_wanted.store(true, Ordering::Relaxed);
    }

    /// Whether raft-rs asked for a snapshot newer than the stored one (cleared by asking).
    pub fn take_snapshot_wanted(&self) -> bool {
        self.store.snapshot_wanted.swap(false, Ordering::Relaxed)
    }

    /// Entries applied since the last snapshot was taken (what a new snapshot would cover).
    pub fn entries_since_snapshot(&self, applied: u64) -> u64 {
        applied.saturating_sub(self.store.meta.read().snapshot_meta.index)
    }

    /// Persists new entries (replacing any conflicting suffix) and the hard state in one
    /// batch; `sync` makes it one fsync ([`Self::stage`] and [`Self::write`] at once).
    pub fn append(&self, entries: &[Entry], hard_state: Option<&HardState>, sync: bool) {
        log::append(&self.store, entries, hard_state, sync)
    }

    /// Makes new entries and the hard state visible to raft-rs at once, in memory, and
    /// returns the write that makes them durable (raft-rs's asynchronous ready: readable
    /// first, persisted later, in order).
    pub fn stage(&self, entries: &[Entry], hard_state: Option<&HardState>) -> Option<PendingWrite> {
        log::stage(&self.store, entries, hard_state)
    }

    /// Writes staged updates, in the order they were staged, as one batch with at most one
    /// fsync (group commit).
    pub fn write(&self, writes: Vec<PendingWrite>, sync: bool) {
        log::write(&self.store, writes, sync)
    }

    /// This store's incarnation and whether it is trusted.
    pub fn identity(&self) -> Identity {
        self.store.meta.read().identity
    }

    /// Records a new identity durably (synced) before returning: the caller acts on it
    /// (votes, acknowledges) only afterwards.
    pub fn set_identity(&self, identity: Identity) -> Result<(), rocksdb::Error> {
        let mut wo = rocksdb::WriteOptions::default();
        wo.set_sync(true);
        let state = self.store.cf(CF_STATE);
        let key = identity::KEY_IDENTITY;
        self.store
            .db
            .put_cf_opt(state, key, identity.encode(), &wo)?;
        self.store.meta.write().identity = identity;
        Ok(())
    }

    /// The directory of snapshot files. (The store's tests' view.)
    #[cfg(test)]
    pub fn snapshots_dir(&self) -> std::path::PathBuf {
        self.store.snapshots_dir()
    }

    /// Stores the snapshot at (`index`, `term`) durably as `write` streams it into the
    /// sink; its size. It counts only once [`Self::save_snapshot`] (or
    /// [`Self::install_snapshot`]) names it. A failed write leaves nothing behind.
    pub fn write_snapshot_with(
        &self,
        index: u64,
        term: u64,
        write: impl FnOnce(&mut SnapshotSink) -> io::Result<()>,
    ) -> io::Result<u64> {
        snapshots::write_snapshot_with(&self.store, index, term, write)
    }

    /// Stores a snapshot held in memory (one received from the leader). (The store's tests' view.)
    #[cfg(test)]
    pub fn write_snapshot(&self, index: u64, term: u64, data: &[u8]) -> io::Result<u64> {
        snapshots::write_snapshot(&self.store, index, term, data)
    }

    /// The length of the named snapshot file (None for none, or one of the earlier layout).
    pub fn snapshot_len(&self) -> Option<u64> {
        self.store.meta.read().snapshot_file
    }

    /// The stored state machine snapshot, if any, as a stream.
    pub fn snapshot_reader(&self) -> Option<SnapshotSource> {
        snapshots::snapshot_reader(&self.store)
    }

    /// The stored snapshot whole (raft-rs sends a snapshot in one message). (The store's tests' view.)
    #[cfg(test)]
    pub fn snapshot_data(&self) -> Option<bytes::Bytes> {
        snapshots::snapshot_data(&self.store)
    }

    /// Names a durable snapshot of our own state machine taken at `index` and drops the log
    /// up to `compact_to` (at most `index`).
    pub fn save_snapshot(&self, index: u64, term: u64, conf: &ConfState, compact_to: u64) {
        snapshots::save_snapshot(&self.store, index, term, conf, compact_to)
    }

    /// Installs a snapshot received from the leader: replaces the log, the membership and
    /// the stored state machine.
    pub fn install_snapshot(&self, snap: &Snapshot) {
        snapshots::install_snapshot(&self.store, snap)
    }

    /// Reads every key of every column family back from the store (see `scrub.rs`);
    /// `stop` is asked every few thousand keys.
    pub fn scrub_tables(&self, stop: &dyn Fn() -> bool) -> Result<TablesRead, TableScrubError> {
        scrub::scrub_tables(&self.store, stop)
    }

    /// Streams the named snapshot file through its checksum (see `scrub.rs`).
    pub fn scrub_snapshot(&self) -> SnapshotScrub {
        scrub::scrub_snapshot(&self.store)
    }

    /// The stored snapshot was found damaged: the Raft loop writes a fresh one from the
    /// tree. Logged once per damage.
    pub fn snapshot_damaged(&self, why: &str) {
        self.store.snapshot_damaged(why)
    }

    /// Whether the stored snapshot was found damaged since last asked (cleared by asking).
    pub fn take_snapshot_damaged(&self) -> bool {
        self.store.snapshot_damaged.swap(false, Ordering::Relaxed)
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

impl raft::Storage for RaftStorage {
    fn initial_state(&self) -> raft::Result<RaftState> {
        let m = self.store.meta.read();
        Ok(RaftState::new(m.hard_state.clone(), m.conf_state.clone()))
    }

    fn entries(
        &self,
        low: u64,
        high: u64,
        max_size: impl Into<Option<u64>>,
        _context: GetEntriesContext,
    ) -> raft::Result<Vec<Entry>> {
        log::entries(&self.store, low, high, max_size)
    }

    fn term(&self, idx: u64) -> raft::Result<u64> {
        log::term(&self.store, idx)
    }

    fn first_index(&self) -> raft::Result<u64> {
        Ok(self.store.meta.read().first_index())
    }

    fn last_index(&self) -> raft::Result<u64> {
        Ok(self.store.meta.read().last_index)
    }

    fn snapshot(&self, request_index: u64, to: u64) -> raft::Result<Snapshot> {
        let meta = self.snapshot_metadata();
        // A member added after the snapshot was taken is not in its membership, and
        // raft-rs on the member refuses to restore it: a newer snapshot is needed.
        if meta.index < request_index || meta.index == 0 || !is_member(meta.get_conf_state(), to) {
            // The Raft loop takes a fresh snapshot soon after this is seen.
            self.want_snapshot();
            return Err(raft::Error::Store(
                StorageError::SnapshotTemporarilyUnavailable,
            ));
        }
        // A damaged file is never sent: the Raft loop writes a fresh one meanwhile.
        let Some(data) = snapshots::snapshot_data_for_sending(&self.store) else {
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
        let db = Arc::downgrade(&self.store.db);
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
            let cf = self.store.cf(name);
            let value = |property: &str| {
                self.store
                    .db
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
