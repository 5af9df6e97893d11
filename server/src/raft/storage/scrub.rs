//! Reading back what the store holds, to find damage while the member runs.
//!
//! RocksDB checks a block's checksum when it reads the block, and the snapshot's trailer is
//! checked when the snapshot is loaded: damage on disk (a flipped bit in a table file, a
//! torn snapshot file) is otherwise found only when the data is next needed, which may be a
//! restart months later or the moment a lagging follower needs that snapshot. The scrub
//! (`raft/scrub.rs` schedules it) reads both back on purpose:
//!
//! - [`RaftStorage::scrub_tables`] reads every key of every column family with checksums
//!   verified, range deletions ignored (so blocks of deleted log entries are read too) and
//!   the block cache left alone; a block held in the cache is served from it, and is read
//!   from the disk (and checked) at the next start at the latest.
//! - [`RaftStorage::scrub_snapshot`] streams the named snapshot file through its checksum.

use std::io::{self, Read};

use super::snapshot_files;
use super::store::{Store, CF_LOG, CF_SNAPSHOT, CF_STATE};
use crate::state::snapshot::{self, SnapshotError};

/// Keys read between two looks at whether the scrub should stop.
const STOP_CHECK_EVERY: u64 = 4096;

/// What a scrub of the tables read.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct TablesRead {
    pub keys: u64,
    pub bytes: u64,
}

/// Why a table scrub did not finish.
#[derive(Debug, thiserror::Error)]
pub enum TableScrubError {
    /// A checksum mismatch or another error reading the store: the store is damaged.
    #[error("{0}")]
    Damaged(rocksdb::Error),
    /// The member is stopping.
    #[error("stopped")]
    Stopped,
}

/// What the scrub of the snapshot file found.
#[derive(Debug)]
pub enum SnapshotScrub {
    /// The named file reads back whole, its checksum matching.
    Sound { bytes: u64 },
    /// No snapshot file to check (none yet, or one of the earlier layout, whose chunks the
    /// table scrub reads), or a newer snapshot was named while it was read.
    Nothing,
    /// The file that `snapshot_meta` still names is damaged.
    Damaged { index: u64, why: String },
}

/// Reads every key of every column family back from the store (see the module docs).
/// `stop` is asked every few thousand keys.
pub(super) fn scrub_tables(
    s: &Store,
    stop: &dyn Fn() -> bool,
) -> Result<TablesRead, TableScrubError> {
    let mut read = TablesRead::default();
    for name in [CF_LOG, CF_STATE, CF_SNAPSHOT] {
        let mut opts = rocksdb::ReadOptions::default();
        opts.fill_cache(false);
        opts.set_verify_checksums(true);
        opts.set_ignore_range_deletions(true);
        opts.set_readahead_size(2 << 20);
        let mut it = s.db.raw_iterator_cf_opt(s.cf(name), opts);
        it.seek_to_first();
        while it.valid() {
            read.keys += 1;
            read.bytes +=
                (it.key().map_or(0, <[u8]>::len) + it.value().map_or(0, <[u8]>::len)) as u64;
            if read.keys % STOP_CHECK_EVERY == 0 && stop() {
                return Err(TableScrubError::Stopped);
            }
            it.next();
        }
        it.status().map_err(TableScrubError::Damaged)?;
    }
    Ok(read)
}

/// Streams the named snapshot file through its checksum (see the module docs).
pub(super) fn scrub_snapshot(s: &Store) -> SnapshotScrub {
    let named = || {
        let m = s.meta.read();
        (m.snapshot_meta.index, m.snapshot_meta.term, m.snapshot_file)
    };
    let (index, term, Some(len)) = named() else {
        return SnapshotScrub::Nothing;
    };
    if index == 0 {
        return SnapshotScrub::Nothing;
    }
    let path = s
        .snapshots_dir()
        .join(snapshot_files::file_name(index, term));
    let found = std::fs::File::open(&path)
        .map_err(SnapshotError::Io)
        .and_then(|f| {
            let mut counted = Counted { inner: f, bytes: 0 };
            snapshot::verify(&mut counted)?;
            Ok(counted.bytes)
        });
    // A snapshot named meanwhile replaced (and deleted) the one read.
    if named() != (index, term, Some(len)) {
        return SnapshotScrub::Nothing;
    }
    match found {
        Ok(bytes) if bytes == len => SnapshotScrub::Sound { bytes },
        Ok(bytes) => SnapshotScrub::Damaged {
            index,
            why: format!(
                "{} holds {bytes} bytes, the store says {len}",
                path.display()
            ),
        },
        Err(e) => SnapshotScrub::Damaged {
            index,
            why: format!("{}: {e}", path.display()),
        },
    }
}

/// A reader that counts the bytes read through it.
struct Counted<R> {
    inner: R,
    bytes: u64,
}

impl<R: Read> Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.bytes += n as u64;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::raft::storage::{snapshots, RaftStorage};
    use crate::state::tree::TreeOptions;
    use crate::state::StateMachine;
    use raft::eraftpb::{ConfState, Entry, HardState};
    use std::os::unix::fs::FileExt;

    fn store(dir: &std::path::Path, entries: u64) -> RaftStorage {
        let conf = ConfState {
            voters: vec![1],
            ..Default::default()
        };
        let s = RaftStorage::open(dir, conf).unwrap();
        let log: Vec<Entry> = (1..=entries)
            .map(|index| Entry {
                index,
                term: 1,
                data: bytes::Bytes::from(vec![index as u8; 200]),
                ..Default::default()
            })
            .collect();
        let hs = HardState {
            commit: entries,
            term: 1,
            ..Default::default()
        };
        s.append(&log, Some(&hs), true);
        s
    }

    fn tables(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
        let mut v: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "sst"))
            .collect();
        v.sort();
        v
    }

    /// Flips the bits of `mask` in the byte at `pos` of `file`, in place.
    fn flip(file: &std::path::Path, pos: u64, mask: u8) {
        let f = std::fs::OpenOptions::new()
            .write(true)
            .read(true)
            .open(file)
            .unwrap();
        let mut b = [0u8; 1];
        f.read_exact_at(&mut b, pos).unwrap();
        f.write_all_at(&[b[0] ^ mask], pos).unwrap();
    }

    #[test]
    fn a_flipped_byte_in_a_table_is_found_by_the_scrub() {
        let dir = tempfile::tempdir().unwrap();
        let s = store(dir.path(), 500);
        let never = || false;
        // In the memtable only: read back, nothing to find.
        let before = s.scrub_tables(&never).unwrap();
        assert!(before.keys >= 500, "{before:?}");
        s.store.db.flush_cf(s.store.cf(CF_LOG)).unwrap();
        let after = s.scrub_tables(&never).unwrap();
        assert_eq!(after.keys, before.keys);
        let sst = tables(dir.path()).pop().expect("a table after the flush");
        // A byte of the first data block (blocks start at the file's beginning).
        flip(&sst, 100, 0x20);
        match s.scrub_tables(&never) {
            Err(TableScrubError::Damaged(e)) => {
                assert_eq!(e.kind(), rocksdb::ErrorKind::Corruption, "{e}")
            }
            other => panic!("the flip was not found: {other:?}"),
        }
    }

    #[test]
    fn the_table_scrub_reads_deleted_log_entries_too() {
        let dir = tempfile::tempdir().unwrap();
        let s = store(dir.path(), 300);
        s.store.db.flush_cf(s.store.cf(CF_LOG)).unwrap();
        // The log behind a snapshot is deleted by a range deletion; its blocks stay in
        // the table until a compaction, and a flip in them is found all the same.
        s.write_snapshot(300, 1, b"tree").unwrap();
        s.save_snapshot(300, 1, &s.conf_state(), 300);
        let sst = tables(dir.path()).remove(0);
        flip(&sst, 50, 0x01);
        assert!(matches!(
            s.scrub_tables(&|| false),
            Err(TableScrubError::Damaged(_))
        ));
        // Asked to stop, it stops.
        let s2dir = tempfile::tempdir().unwrap();
        let s2 = store(s2dir.path(), 5000);
        assert!(matches!(
            s2.scrub_tables(&|| true),
            Err(TableScrubError::Stopped)
        ));
    }

    #[test]
    fn a_damaged_snapshot_file_is_found_and_never_sent() {
        let dir = tempfile::tempdir().unwrap();
        let s = store(dir.path(), 2);
        assert!(matches!(s.scrub_snapshot(), SnapshotScrub::Nothing));
        let view =
            crate::state::snapshot::SnapshotView::of(&StateMachine::new(TreeOptions::default()));
        let len = s
            .write_snapshot_with(2, 1, |sink| snapshot::encode_into(&view, sink).map(|_| ()))
            .unwrap();
        s.save_snapshot(2, 1, &s.conf_state(), 2);
        match s.scrub_snapshot() {
            SnapshotScrub::Sound { bytes } => assert_eq!(bytes, len),
            other => panic!("{other:?}"),
        }
        let path = s.snapshots_dir().join(snapshot_files::file_name(2, 1));
        let good = std::fs::read(&path).unwrap();
        // Torn: shorter than named.
        std::fs::write(&path, &good[..good.len() / 2]).unwrap();
        assert!(matches!(
            s.scrub_snapshot(),
            SnapshotScrub::Damaged { index: 2, .. }
        ));
        // Flipped, the same length: the checksum. Not sent; the loop is asked to repair.
        let mut flipped = good.clone();
        flipped[good.len() / 3] ^= 0x08;
        std::fs::write(&path, &flipped).unwrap();
        assert!(matches!(
            s.scrub_snapshot(),
            SnapshotScrub::Damaged { index: 2, .. }
        ));
        assert!(!s.take_snapshot_damaged());
        assert!(snapshots::snapshot_data_for_sending(&s.store).is_none());
        assert!(s.take_snapshot_damaged(), "the repair is asked for");
        assert!(!s.take_snapshot_damaged(), "asking clears it");
        use raft::Storage;
        assert!(matches!(
            s.snapshot(2, 1),
            Err(raft::Error::Store(
                raft::StorageError::SnapshotTemporarilyUnavailable
            ))
        ));
        // The repair: a fresh file at the same index, named again.
        s.write_snapshot_with(2, 1, |sink| snapshot::encode_into(&view, sink).map(|_| ()))
            .unwrap();
        s.save_snapshot(2, 1, &s.conf_state(), 2);
        assert!(matches!(s.scrub_snapshot(), SnapshotScrub::Sound { .. }));
        assert_eq!(s.snapshot(2, 1).unwrap().data.as_ref(), &good[..]);
    }
}
