//! The store's shared state: the database, what it holds in memory (one lock), and the
//! flags the Raft loop reads. Every part of the store (`log.rs`, `snapshots.rs`,
//! `identity.rs`, `scrub.rs`, `open.rs`) works on a [`Store`] it is handed, so no part
//! depends on another through the type they serve, and [`RaftStorage`](super::RaftStorage)
//! only delegates. Also here: the column families and keys (the layout in `mod.rs`'s docs),
//! and the errors of opening.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use parking_lot::RwLock;
use raft::eraftpb::{ConfState, Entry, HardState, SnapshotMetadata};
use rocksdb::DB;

use super::identity::Identity;
use super::snapshot_files::SNAPSHOT_DIR;

/// Format 4 names snapshot files (`snapshot_file`); format 3 (snapshots in chunks only) is
/// still opened, and becomes 4 with the first snapshot file named, so that an earlier build
/// refuses the store as incompatible instead of finding its snapshot missing.
pub(super) const FORMAT_VERSION: u32 = 4;
pub(super) const FORMAT_CHUNK_SNAPSHOTS: u32 = 3;
pub(super) const CF_LOG: &str = "log";
pub(super) const CF_STATE: &str = "state";
pub(super) const CF_SNAPSHOT: &str = "snapshot";
/// The chunk number of an earlier-layout snapshot's end mark.
pub(super) const END_MARK: u32 = u32::MAX;
pub(super) const KEY_FORMAT: &[u8] = b"format";
pub(super) const KEY_HARD_STATE: &[u8] = b"hard_state";
pub(super) const KEY_CONF_STATE: &[u8] = b"conf_state";
pub(super) const KEY_SNAPSHOT_META: &[u8] = b"snapshot_meta";
pub(super) const KEY_SNAPSHOT_FILE: &[u8] = b"snapshot_file";
pub(super) const KEY_TRUNCATED: &[u8] = b"truncated";
pub(super) const KEY_APPLIED: &[u8] = b"applied";

/// Recent entries kept in memory. They are needed there only until they are applied and
/// sent to every follower (a few milliseconds under load): an entry dropped from the cache
/// is read back from RocksDB by a follower that lags further. A standalone member drops
/// each entry once applied. At 64 MiB the cache held a
/// sixth of the server's memory at 1M znodes (67 bytes per znode created by the bench's
/// fill), all of it entries long applied and replicated.
pub(super) const CACHE_MAX_ENTRIES: usize = 16_384;
pub(super) const CACHE_MAX_BYTES: usize = 8 * 1024 * 1024;

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

pub(super) fn corrupt(what: &'static str, detail: impl std::fmt::Display) -> StorageOpenError {
    StorageOpenError::Corrupt {
        what,
        detail: detail.to_string(),
    }
}

pub(super) fn key(index: u64) -> [u8; 8] {
    index.to_be_bytes()
}

/// What the store knows in memory, under one lock: the Raft state, the log's bounds, the
/// recent entries, the snapshot named and the identity.
pub(super) struct Meta {
    pub(super) hard_state: HardState,
    /// Entries up to here are on disk; the cache never drops one beyond it (raft-rs may
    /// read a staged entry before it is written).
    pub(super) durable_index: u64,
    pub(super) conf_state: ConfState,
    pub(super) snapshot_meta: SnapshotMetadata,
    /// The length of the named snapshot's file; `None`: no snapshot, or one of the earlier
    /// layout (chunks in the `snapshot` column family).
    pub(super) snapshot_file: Option<u64>,
    /// The entry just before the first stored one (its term is kept for raft-rs).
    pub(super) truncated_index: u64,
    pub(super) truncated_term: u64,
    pub(super) last_index: u64,
    /// The applied index the state machine reported, and the one last staged for writing.
    pub(super) applied: u64,
    pub(super) applied_staged: u64,
    /// Contiguous entries ending at `last_index`.
    pub(super) cache: VecDeque<Entry>,
    pub(super) cache_bytes: usize,
    /// This store's incarnation and whether it is trusted (`identity.rs`).
    pub(super) identity: Identity,
}

impl Meta {
    pub(super) fn first_index(&self) -> u64 {
        self.truncated_index + 1
    }

    pub(super) fn cache_first(&self) -> Option<u64> {
        self.cache.front().map(|e| e.index)
    }

    /// A group of one voter and no learners: nobody ever reads an entry it has applied.
    pub(super) fn alone(&self) -> bool {
        let c = &self.conf_state;
        c.voters.len() == 1
            && c.learners.is_empty()
            && c.voters_outgoing.is_empty()
            && c.learners_next.is_empty()
    }

    pub(super) fn trim_cache(&mut self) {
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

/// The database and the in-memory state every part of the store works on; cheap to clone
/// (shared).
#[derive(Clone)]
pub(super) struct Store {
    pub(super) db: Arc<DB>,
    pub(super) meta: Arc<RwLock<Meta>>,
    /// The last snapshot read back, for sending to several followers in a row.
    pub(super) snapshot_cache: Arc<parking_lot::Mutex<Option<(u64, bytes::Bytes)>>>,
    /// raft-rs asked for a snapshot the stored one cannot serve (see `snapshot`): the Raft
    /// loop takes a fresh one.
    pub(super) snapshot_wanted: Arc<AtomicBool>,
    /// The stored snapshot file was found damaged (`scrub.rs`): the Raft loop writes a
    /// fresh one from the tree.
    pub(super) snapshot_damaged: Arc<AtomicBool>,
}

pub(super) fn decode<M: protobuf::Message>(
    what: &'static str,
    bytes: &[u8],
) -> Result<M, StorageOpenError> {
    let mut m = M::new();
    m.merge_from_bytes(bytes).map_err(|e| corrupt(what, e))?;
    Ok(m)
}

/// A failed write to the log is fatal: a member that cannot persist must not vote or ack.
pub(super) fn fatal(what: &str, e: impl std::fmt::Display) -> ! {
    crate::critical::fatal(format_args!("storage failure while {what}: {e}"))
}

impl Store {
    /// A store over an open database and what was read from it.
    pub(super) fn new(db: DB, meta: Meta) -> Store {
        Store {
            db: Arc::new(db),
            meta: Arc::new(RwLock::new(meta)),
            snapshot_cache: Arc::new(parking_lot::Mutex::new(None)),
            snapshot_wanted: Arc::default(),
            snapshot_damaged: Arc::default(),
        }
    }

    pub(super) fn cf(&self, name: &str) -> &rocksdb::ColumnFamily {
        match self.db.cf_handle(name) {
            Some(cf) => cf,
            None => fatal("looking up a column family", name),
        }
    }

    /// The data directory.
    pub(super) fn dir(&self) -> &Path {
        self.db.path()
    }

    /// The directory of snapshot files.
    pub(super) fn snapshots_dir(&self) -> PathBuf {
        self.dir().join(SNAPSHOT_DIR)
    }

    pub(super) fn hard_state(&self) -> HardState {
        self.meta.read().hard_state.clone()
    }

    pub(super) fn conf_state(&self) -> ConfState {
        self.meta.read().conf_state.clone()
    }

    pub(super) fn snapshot_metadata(&self) -> SnapshotMetadata {
        self.meta.read().snapshot_meta.clone()
    }

    /// The stored snapshot was found damaged (by the scrub, or before sending it to a
    /// follower): the Raft loop writes a fresh one from the tree. Logged once per damage.
    pub(super) fn snapshot_damaged(&self, why: &str) {
        *self.snapshot_cache.lock() = None;
        if !self.snapshot_damaged.swap(true, Ordering::Relaxed) {
            tracing::error!(
                "the stored snapshot is damaged ({why}); writing a fresh one from the tree"
            );
        }
    }
}
