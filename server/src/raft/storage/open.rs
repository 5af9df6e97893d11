//! Opening the store: creating it, or validating what an earlier run left (format version,
//! every stored entry, the log's continuity, the commit and applied indexes against it).
//! With a snapshot wanted (`open_loading`), RocksDB opens and the log is read
//! on one thread while the newest snapshot file decodes on the caller's: the two are the
//! start-up's critical paths, and neither needs the other.

use std::collections::VecDeque;
use std::path::Path;

use protobuf::Message as _;
use raft::eraftpb::{ConfState, Entry, HardState, SnapshotMetadata};
use rocksdb::{
    ColumnFamilyDescriptor, DBRecoveryMode, IteratorMode, Options, WriteBatch, WriteOptions, DB,
};

use super::identity::{self, Identity, KEY_IDENTITY};
use super::snapshot_files;
use super::snapshots::{read_snapshot, snapshot_key, SnapshotSource};
use super::store::{
    corrupt, decode, Meta, StorageOpenError, Store, CACHE_MAX_BYTES, CACHE_MAX_ENTRIES, CF_LOG,
    CF_SNAPSHOT, CF_STATE, FORMAT_CHUNK_SNAPSHOTS, FORMAT_VERSION, KEY_APPLIED, KEY_CONF_STATE,
    KEY_FORMAT, KEY_HARD_STATE, KEY_SNAPSHOT_FILE, KEY_SNAPSHOT_META, KEY_TRUNCATED,
};

/// Bytes of memtables all column families may hold together. The log's entries are all
/// that fill them in steady state; at 64 MiB (16 MiB per column family) they held 11 to 18
/// MiB during the bench's fill (flushed at 16), at 32 MiB 5 to 9 MiB. At 16 MiB (4 MiB per
/// column family) a server filled to a million znodes held 216-222 MiB against 224-225 at
/// 32, at the same fill rate (162-169k creates/s against 162-172k); flushes come twice as
/// often and write the same bytes.
const MEMTABLE_BUDGET: usize = 16 * 1024 * 1024;

/// Creates `dir` and its missing parents, each made durable by an fsync of the directory
/// that names it, and syncs `dir`'s parent even when `dir` was there (an earlier start may
/// have died before syncing it). RocksDB syncs its own directory, not the entry naming it:
/// without this, a power loss after the first start could take the whole store away, and
/// every write acknowledged since with it (the power-loss chaos tests found this).
fn create_dir_durably(dir: &Path) -> std::io::Result<()> {
    let mut missing = Vec::new();
    let mut d = dir;
    while !d.exists() {
        missing.push(d);
        match d.parent() {
            Some(p) if !p.as_os_str().is_empty() => d = p,
            _ => break,
        }
    }
    for m in missing.into_iter().rev() {
        match std::fs::create_dir(m) {
            Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => return Err(e),
            _ => sync_parent(m)?,
        }
    }
    sync_parent(dir)
}

fn sync_parent(path: &Path) -> std::io::Result<()> {
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    std::fs::File::open(parent)?.sync_all()
}

/// Opens (or creates) the store under `dir`. A new store starts with `initial_conf` (the
/// static membership from zoo.cfg), as every member of a new ensemble must.
pub(super) fn open(dir: &Path, initial_conf: ConfState) -> Result<Store, StorageOpenError> {
    let no_load: Option<fn(SnapshotSource)> = None;
    open_loading(dir, initial_conf, no_load).map(|(s, _)| s)
}

/// [`Self::open`], and the stored snapshot (if any) handed to `load` on the calling
/// thread while another opens RocksDB and reads and checks the log: at start-up each
/// takes about as long as the other, and neither needs the other.
///
/// Which snapshot the store names is known only once RocksDB is open, so the newest
/// snapshot file is guessed from the directory and decoded meanwhile; its result is
/// used only if the store names that file (index, term and length). Otherwise (a newer
/// file a crash left unnamed, a snapshot of the earlier layout) it is dropped and the
/// named snapshot loads then. `load`'s result is returned only if the store opened.
pub(super) fn open_loading<T: Send>(
    dir: &Path,
    initial_conf: ConfState,
    load: Option<impl FnMut(SnapshotSource) -> T + Send>,
) -> Result<(Store, Option<T>), StorageOpenError> {
    create_dir_durably(dir).map_err(|e| corrupt("data directory", e))?;
    let Some(mut load) = load else {
        return open_store(dir, initial_conf, None).map(|s| (s, None));
    };
    let guess = snapshot_files::newest(&dir.join(snapshot_files::SNAPSHOT_DIR));
    let (named_tx, named_rx) = std::sync::mpsc::channel();
    // The snapshot loads on this thread: the tree's memory comes from this thread's
    // allocator arena, as if nothing ran beside it (a tree built on a short-lived
    // thread's arena left its holes there: 20% more resident memory after a restart).
    let (storage, loaded) = std::thread::scope(|s| {
        let opening = s.spawn(move || open_store(dir, initial_conf, Some(named_tx)));
        let early = guess.map(|(i, t, len, file)| ((i, t, len), load(SnapshotSource::File(file))));
        let loaded = match (named_rx.recv(), early) {
            // The store did not open: its error comes from the join.
            (Err(_), _) => Ok(None),
            (
                Ok(Stored::File {
                    index, term, len, ..
                }),
                Some((guessed, t)),
            ) if guessed == (index, term, len) => Ok(Some(t)),
            (Ok(stored), early) => {
                drop(early);
                stored.source().map(|src| src.map(&mut load))
            }
        };
        let storage = opening
            .join()
            .unwrap_or_else(|p| std::panic::resume_unwind(p));
        (storage, loaded)
    });
    Ok((storage?, loaded?))
}

/// Opens the store; `tell` (when the snapshot is wanted) is told which snapshot the
/// store names as soon as that is known, before the log is read.
fn open_store(
    dir: &Path,
    initial_conf: ConfState,
    tell: Option<std::sync::mpsc::Sender<Stored>>,
) -> Result<Store, StorageOpenError> {
    let mut opts = Options::default();
    opts.create_if_missing(true);
    opts.create_missing_column_families(true);
    opts.set_wal_recovery_mode(DBRecoveryMode::TolerateCorruptedTailRecords);
    opts.set_paranoid_checks(true);
    opts.set_keep_log_file_num(4);
    // Memory: RocksDB's defaults let each column family hold up to 2 x 64 MiB of
    // memtables, and a restart replays up to the WAL cap into them. The log is written
    // once and read back rarely (by a lagging follower), the tree lives in our own
    // memory: bound the memtables of all column families together.
    opts.set_db_write_buffer_size(MEMTABLE_BUDGET);
    opts.set_max_total_wal_size(2 * MEMTABLE_BUDGET as u64);
    // No block cache: blocks are read back only at start-up (the log scan, once) and for
    // a follower that lags beyond the entry cache (sequentially, from the page cache),
    // and the scrub (`scrub.rs`) must read every data block from the disk, not a copy
    // cached before the disk changed under it. (RocksDB's default 32 MiB cache held
    // 28 MiB after a restart at 1M znodes.) Index and filter blocks are held by the open
    // table readers, checked when a table is opened.
    let mut tables = rocksdb::BlockBasedOptions::default();
    tables.disable_cache();
    let cfs = [CF_LOG, CF_STATE, CF_SNAPSHOT].into_iter().map(|name| {
        let mut cf = Options::default();
        cf.set_block_based_table_factory(&tables);
        cf.set_write_buffer_size(MEMTABLE_BUDGET / 4);
        cf.set_max_write_buffer_number(2);
        ColumnFamilyDescriptor::new(name, cf)
    });
    let started = std::time::Instant::now();
    let db = DB::open_cf_descriptors(&opts, dir, cfs)?;
    let db_opened = started.elapsed();
    let state = db
        .cf_handle(CF_STATE)
        .ok_or_else(|| corrupt("store", "state column family missing"))?;

    let created = match db.get_cf(state, KEY_FORMAT)? {
        None => {
            // A new store may be a wiped one: untrusted until the ensemble says otherwise.
            let identity = Identity::fresh(false);
            let mut wb = WriteBatch::default();
            wb.put_cf(state, KEY_FORMAT, FORMAT_VERSION.to_be_bytes());
            wb.put_cf(state, identity::KEY_IDENTITY, identity.encode());
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
            Some(identity)
        }
        Some(v)
            if v.as_slice() == FORMAT_VERSION.to_be_bytes()
                || v.as_slice() == FORMAT_CHUNK_SNAPSHOTS.to_be_bytes() =>
        {
            None
        }
        Some(v) => {
            return Err(StorageOpenError::IncompatibleFormat {
                found: format!("{v:?}"),
                expected: FORMAT_VERSION,
            })
        }
    };
    let identity = match (created, db.get_cf(state, KEY_IDENTITY)?) {
        (Some(identity), _) => identity,
        (None, Some(b)) => Identity::decode(&b).map_err(|e| corrupt("identity", e))?,
        (None, None) => {
            // A store of an earlier build: it has held this member's promises all along.
            let identity = Identity::fresh(true);
            let mut wo = WriteOptions::default();
            wo.set_sync(true);
            db.put_cf_opt(state, KEY_IDENTITY, identity.encode(), &wo)?;
            tracing::info!(
                incarnation = format!("{:016x}", identity.incarnation),
                "the store had no identity (an earlier build's): recorded as trusted"
            );
            identity
        }
    };

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

    let snapshot_file = match db.get_cf(state, KEY_SNAPSHOT_FILE)? {
        Some(b) => match super::snapshots::parse_file_record(&b) {
            Some((i, t, len)) if (i, t) == (snapshot_meta.index, snapshot_meta.term) => Some(len),
            // Both are written in one batch: anything else is damage.
            _ => {
                return Err(corrupt(
                    "snapshot file record",
                    "does not match snapshot_meta",
                ))
            }
        },
        None => None,
    };
    let files = dir.join(snapshot_files::SNAPSHOT_DIR);
    create_dir_durably(&files).map_err(|e| corrupt("snapshot directory", e))?;
    let mut chunks = None;
    let named = (snapshot_meta.index > 0 && snapshot_file.is_some())
        .then(|| snapshot_files::file_name(snapshot_meta.index, snapshot_meta.term));
    if let (Some(name), Some(len)) = (&named, snapshot_file) {
        // Whole, as far as its length tells (its checksum is verified as it loads).
        let found = std::fs::metadata(files.join(name)).map(|m| m.len());
        if found.as_ref().ok() != Some(&len) {
            let found = match found {
                Ok(n) => format!("{n} bytes"),
                Err(e) => e.to_string(),
            };
            return Err(corrupt(
                "snapshot",
                format!(
                    "{name}: {found}, {len} bytes were written (the log before it was compacted away)"
                ),
            ));
        }
    } else if snapshot_meta.index > 0 {
        // The earlier layout: read in full once, a snapshot the log was compacted
        // behind must be whole.
        match read_snapshot(&db, snapshot_meta.index, snapshot_meta.term) {
            Ok(data) => chunks = Some(data),
            Err(e) => {
                return Err(corrupt(
                    "snapshot",
                    format!("{e} (the log before it was compacted away)"),
                ))
            }
        }
    }
    // Snapshots whose naming never became durable (a crash in between), and chunks of
    // the earlier layout once a file replaced them.
    snapshot_files::remove_others(&files, named.as_deref());
    {
        let snapshots = db
            .cf_handle(CF_SNAPSHOT)
            .ok_or_else(|| corrupt("store", "snapshot column family missing"))?;
        let (index, term) = match named {
            Some(_) => (u64::MAX, u64::MAX),
            None => (snapshot_meta.index, snapshot_meta.term),
        };
        let mut wb = WriteBatch::default();
        wb.delete_range_cf(snapshots, &[][..], &snapshot_key(index, term, 0)[..]);
        wb.delete_range_cf(
            snapshots,
            &snapshot_key(index, term.saturating_add(1), 0)[..],
            &[0xffu8; 21][..],
        );
        db.write(wb)?;
    }
    if let Some(tx) = tell {
        let stored = match (&named, snapshot_file) {
            (Some(name), Some(len)) => Stored::File {
                index: snapshot_meta.index,
                term: snapshot_meta.term,
                len,
                path: files.join(name),
            },
            _ => Stored::Chunks(chunks),
        };
        // The receiver waits for it unless it panicked.
        let _ = tx.send(stored);
    }

    let scan = || -> Result<_, StorageOpenError> {
        // Looked up here: the handles cannot cross threads, the database can.
        let state = db
            .cf_handle(CF_STATE)
            .ok_or_else(|| corrupt("store", "state column family missing"))?;
        let log = db
            .cf_handle(CF_LOG)
            .ok_or_else(|| corrupt("store", "log column family missing"))?;
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
            // Only the latest entries stay (all of them durable): a long log is never
            // held whole.
            while cache.len() > CACHE_MAX_ENTRIES || cache_bytes > CACHE_MAX_BYTES {
                match cache.pop_front() {
                    Some(e) => cache_bytes -= e.data.len() + 32,
                    None => break,
                }
            }
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
        Ok((cache, cache_bytes, last_index, applied))
    };
    let scan_started = std::time::Instant::now();
    let scanned = scan();
    let scan_took = scan_started.elapsed();
    let (cache, cache_bytes, last_index, applied) = scanned?;
    let mut meta = Meta {
        durable_index: last_index,
        hard_state,
        conf_state,
        snapshot_meta,
        snapshot_file,
        truncated_index,
        truncated_term,
        last_index,
        applied,
        applied_staged: applied,
        cache,
        cache_bytes,
        identity,
    };
    meta.trim_cache();
    tracing::info!(
        rocksdb_open_ms = db_opened.as_millis() as u64,
        log_read_ms = scan_took.as_millis() as u64,
        total_ms = started.elapsed().as_millis() as u64,
        entries = meta.last_index - meta.truncated_index,
        "store opened"
    );
    Ok(Store::new(db, meta))
}

/// The snapshot a store names, as `open_store` reports it to the loading thread.
enum Stored {
    File {
        index: u64,
        term: u64,
        len: u64,
        path: std::path::PathBuf,
    },
    /// A snapshot of the earlier layout (read whole at open), or none.
    Chunks(Option<bytes::Bytes>),
}

impl Stored {
    fn source(self) -> Result<Option<SnapshotSource>, StorageOpenError> {
        Ok(match self {
            Stored::File { path, .. } => Some(SnapshotSource::File(
                std::fs::File::open(path).map_err(|e| corrupt("snapshot", e))?,
            )),
            Stored::Chunks(chunks) => {
                chunks.map(|d| SnapshotSource::Chunks(std::io::Cursor::new(d)))
            }
        })
    }
}
