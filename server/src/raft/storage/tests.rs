use super::snapshots::snapshot_key;
use super::store::*;
use super::*;
use protobuf::Message as _;
use raft::Storage;
use rocksdb::IteratorMode;

fn entry(index: u64, term: u64) -> Entry {
    Entry {
        index,
        term,
        data: bytes::Bytes::from(vec![index as u8; 10]),
        ..Default::default()
    }
}

/// A real snapshot (of an empty tree): what is sent to a follower is checked first.
fn tree_snapshot() -> Vec<u8> {
    use crate::state::{snapshot, tree::TreeOptions, StateMachine};
    let view = crate::state::snapshot::SnapshotView::of(&StateMachine::new(TreeOptions::default()));
    let mut out = Vec::new();
    snapshot::encode_into(&view, &mut out).unwrap();
    out
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
    let state = tree_snapshot();
    s.write_snapshot(3, 1, &state).unwrap();
    s.save_snapshot(3, 1, &conf(), 2);
    assert_eq!(s.first_index().unwrap(), 3);
    assert_eq!(s.term(2).unwrap(), 1);
    assert_eq!(s.term(3).unwrap(), 1);
    assert!(matches!(
        s.term(1),
        Err(raft::Error::Store(StorageError::Compacted))
    ));
    assert_eq!(s.snapshot(3, 1).unwrap().data.as_ref(), &state[..]);
    assert!(!s.take_snapshot_wanted());
    // Member 2 is not in the snapshot's membership (added since): it would refuse to
    // restore it, so a newer one is asked of the Raft loop instead.
    assert!(matches!(
        s.snapshot(3, 2),
        Err(raft::Error::Store(
            StorageError::SnapshotTemporarilyUnavailable
        ))
    ));
    assert!(s.take_snapshot_wanted());
    assert!(!s.take_snapshot_wanted(), "asking clears it");
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
        s.store
            .db
            .put_cf(s.store.cf(CF_STATE), KEY_FORMAT, 99u32.to_be_bytes())
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
        s.store.db.delete_cf(s.store.cf(CF_LOG), key(2)).unwrap();
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
        s.store.db.delete_cf(s.store.cf(CF_LOG), key(3)).unwrap();
    }
    let err = RaftStorage::open(dir.path(), conf()).err().unwrap();
    assert!(
        err.to_string().contains("acknowledged writes are missing"),
        "{err}"
    );
}

/// Chunk size of an earlier build's snapshots.
const SNAPSHOT_CHUNK: usize = 4 << 20;

/// Stores and names a snapshot as earlier builds did: chunks in the `snapshot` column
/// family, an end mark, `snapshot_meta` without a file record.
fn store_chunks(s: &RaftStorage, index: u64, term: u64, data: &[u8]) {
    let cf = s.store.cf(CF_SNAPSHOT);
    let mut count = 0u32;
    for chunk in data.chunks(SNAPSHOT_CHUNK) {
        s.store
            .db
            .put_cf(cf, snapshot_key(index, term, count), chunk)
            .unwrap();
        count += 1;
    }
    let mut end = count.to_be_bytes().to_vec();
    end.extend_from_slice(&(data.len() as u64).to_be_bytes());
    s.store
        .db
        .put_cf(cf, snapshot_key(index, term, END_MARK), end)
        .unwrap();
    let mut meta = SnapshotMetadata {
        index,
        term,
        ..Default::default()
    };
    meta.set_conf_state(conf());
    let state = s.store.cf(CF_STATE);
    s.store
        .db
        .put_cf(state, KEY_SNAPSHOT_META, meta.write_to_bytes().unwrap())
        .unwrap();
    let mut truncated = index.to_be_bytes().to_vec();
    truncated.extend_from_slice(&term.to_be_bytes());
    s.store.db.put_cf(state, KEY_TRUNCATED, truncated).unwrap();
}

/// Counts the stored chunks (end marks included) of every snapshot.
fn stored_chunks(s: &RaftStorage) -> Vec<(u64, u32)> {
    s.store
        .db
        .iterator_cf(s.store.cf(CF_SNAPSHOT), IteratorMode::Start)
        .map(|kv| {
            let (k, _) = kv.unwrap();
            let index = u64::from_be_bytes(k[..8].try_into().unwrap());
            let chunk = u32::from_be_bytes(k[16..].try_into().unwrap());
            (index, chunk)
        })
        .collect()
}

/// The files in the store's snapshot directory.
fn files_in_dir(s: &RaftStorage) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(s.snapshots_dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// A snapshot loader for `open_loading`: the bytes.
fn read_all(mut src: snapshots::SnapshotSource) -> Vec<u8> {
    let mut v = Vec::new();
    std::io::Read::read_to_end(&mut src, &mut v).unwrap();
    v
}

fn big_data() -> Vec<u8> {
    (0..(2 * SNAPSHOT_CHUNK + 12345))
        .map(|i| (i % 251) as u8)
        .collect()
}

#[test]
fn snapshot_files_survive_reopen_and_replace_older_ones() {
    let dir = tempfile::tempdir().unwrap();
    let big = big_data();
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
        assert_eq!(s.write_snapshot(4, 1, &big).unwrap(), big.len() as u64);
        // Written, not yet named: the named one is still the older.
        assert_eq!(s.snapshot_data().unwrap().as_ref(), b"older");
        s.save_snapshot(4, 1, &conf(), 4);
        assert_eq!(files_in_dir(&s), vec![snapshot_files::file_name(4, 1)]);
        // Written, never named (a crash before `save_snapshot`), and a torn temporary
        // file (a crash while writing): dropped at open.
        s.write_snapshot(9, 1, b"orphan").unwrap();
        std::fs::write(s.snapshots_dir().join("x.snap.tmp"), b"torn").unwrap();
    }
    let (s, loaded) = RaftStorage::open_loading(dir.path(), conf(), Some(read_all)).unwrap();
    assert_eq!(loaded.unwrap(), big);
    assert_eq!(s.snapshot_data().unwrap().as_ref(), big.as_slice());
    let mut streamed = Vec::new();
    std::io::Read::read_to_end(&mut s.snapshot_reader().unwrap(), &mut streamed).unwrap();
    assert_eq!(streamed, big);
    assert_eq!(files_in_dir(&s), vec![snapshot_files::file_name(4, 1)]);
}

#[test]
fn a_snapshot_of_the_earlier_layout_is_read_then_replaced_by_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let big = big_data();
    {
        let s = two_committed_entries(dir.path());
        store_chunks(&s, 2, 1, &big);
        s.store
            .db
            .put_cf(
                s.store.cf(CF_STATE),
                KEY_FORMAT,
                FORMAT_CHUNK_SNAPSHOTS.to_be_bytes(),
            )
            .unwrap();
    }
    let (s, loaded) = RaftStorage::open_loading(dir.path(), conf(), Some(read_all)).unwrap();
    assert_eq!(loaded.unwrap(), big);
    assert_eq!(s.snapshot_metadata().index, 2);
    assert_eq!(s.snapshot_data().unwrap().as_ref(), big.as_slice());
    let mut streamed = Vec::new();
    std::io::Read::read_to_end(&mut s.snapshot_reader().unwrap(), &mut streamed).unwrap();
    assert_eq!(streamed, big);
    assert_eq!(stored_chunks(&s).len(), 4);
    s.append(&[entry(3, 1)], None, true);
    s.write_snapshot(3, 1, b"newer").unwrap();
    s.save_snapshot(3, 1, &conf(), 3);
    assert!(stored_chunks(&s).is_empty(), "{:?}", stored_chunks(&s));
    let format = s
        .store
        .db
        .get_cf(s.store.cf(CF_STATE), KEY_FORMAT)
        .unwrap()
        .unwrap();
    assert_eq!(
        format,
        FORMAT_VERSION.to_be_bytes(),
        "upgraded with the first file"
    );
    drop(s);
    let s = RaftStorage::open(dir.path(), conf()).unwrap();
    assert_eq!(s.snapshot_data().unwrap().as_ref(), b"newer");
}

#[test]
fn a_failed_snapshot_write_leaves_nothing_and_names_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let s = two_committed_entries(dir.path());
    // The disk fills up half way through (ENOSPC from the writer).
    let err = s
        .write_snapshot_with(2, 1, |sink| {
            std::io::Write::write_all(sink, &vec![1u8; 3 << 20])?;
            Err(std::io::Error::from_raw_os_error(libc::ENOSPC))
        })
        .unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::ENOSPC));
    assert!(files_in_dir(&s).is_empty(), "{:?}", files_in_dir(&s));
    assert_eq!(s.snapshot_metadata().index, 0);
    assert!(s.snapshot_reader().is_none());
    drop(s);
    // Nothing to load: the loader is not called.
    let (_, loaded) = RaftStorage::open_loading(dir.path(), conf(), Some(read_all)).unwrap();
    assert!(loaded.is_none());
}

#[test]
fn a_torn_or_flipped_snapshot_file_is_refused() {
    use crate::state::snapshot::{self, SnapshotError};
    use crate::state::tree::TreeOptions;
    use crate::state::StateMachine;

    let dir = tempfile::tempdir().unwrap();
    let s = two_committed_entries(dir.path());
    let view = crate::state::snapshot::SnapshotView::of(&StateMachine::new(TreeOptions::default()));
    let len = s
        .write_snapshot_with(2, 1, |sink| snapshot::encode_into(&view, sink).map(|_| ()))
        .unwrap();
    s.save_snapshot(2, 1, &conf(), 2);
    let path = s.snapshots_dir().join(snapshot_files::file_name(2, 1));
    let good = std::fs::read(&path).unwrap();
    assert_eq!(good.len() as u64, len);
    let load = |s: &RaftStorage| {
        snapshot::decode_from(s.snapshot_reader().unwrap(), TreeOptions::default())
    };
    assert!(load(&s).is_ok());
    // A flipped byte: the checksum.
    let mut flipped = good.clone();
    flipped[good.len() / 2] ^= 0x04;
    std::fs::write(&path, &flipped).unwrap();
    assert!(matches!(load(&s), Err(SnapshotError::Checksum { .. })));
    drop(s);
    // A torn file (shorter than named): refused at open.
    std::fs::write(&path, &good[..good.len() - 1]).unwrap();
    let err = RaftStorage::open(dir.path(), conf()).err().unwrap();
    assert!(err.to_string().contains("corrupt snapshot"), "{err}");
    // A missing one too.
    std::fs::remove_file(&path).unwrap();
    let err = RaftStorage::open(dir.path(), conf()).err().unwrap();
    assert!(err.to_string().contains("corrupt snapshot"), "{err}");
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
        store_chunks(&s, 2, 1, &data);
        s.store
            .db
            .delete_cf(s.store.cf(CF_SNAPSHOT), snapshot_key(2, 1, 1))
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
        assert_eq!(s.store.meta.read().applied, 2);
        // The tail that had been applied disappears (a damaged store).
        s.store
            .db
            .delete_range_cf(s.store.cf(CF_LOG), key(2), key(5))
            .unwrap();
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
    assert_eq!(s.snapshot_data().unwrap().as_ref(), b"tree");
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

#[test]
fn staged_writes_written_together_keep_their_order() {
    let dir = tempfile::tempdir().unwrap();
    {
        let s = RaftStorage::open(dir.path(), conf()).unwrap();
        let hs = |term, commit| HardState {
            term,
            commit,
            ..Default::default()
        };
        let first = s.stage(&[entry(1, 1), entry(2, 1), entry(3, 1)], Some(&hs(1, 1)));
        // Replaces 3 before anything is written, then extends the log.
        let second = s.stage(&[entry(3, 2), entry(4, 2)], Some(&hs(2, 2)));
        let third = s.stage(&[entry(5, 2)], None);
        s.write(first.into_iter().chain(second).chain(third).collect(), true);
    }
    let s = RaftStorage::open(dir.path(), conf()).unwrap();
    assert_eq!(s.last_index().unwrap(), 5);
    assert_eq!((s.hard_state().term, s.hard_state().commit), (2, 2));
    let got = s
        .entries(1, 6, None, GetEntriesContext::empty(false))
        .unwrap();
    assert_eq!(
        got.iter().map(|e| (e.index, e.term)).collect::<Vec<_>>(),
        vec![(1, 1), (2, 1), (3, 2), (4, 2), (5, 2)]
    );
}

#[test]
fn a_standalone_member_drops_applied_entries_from_the_cache() {
    let three = ConfState {
        voters: vec![1, 2, 3],
        ..Default::default()
    };
    for (conf, kept) in [(conf(), vec![4, 5]), (three, vec![1, 2, 3, 4, 5])] {
        let dir = tempfile::tempdir().unwrap();
        let s = RaftStorage::open(dir.path(), conf).unwrap();
        let all: Vec<Entry> = (1..=5).map(|i| entry(i, 1)).collect();
        s.append(&all, None, true);
        s.set_applied(3);
        let cached: Vec<u64> = s.store.meta.read().cache.iter().map(|e| e.index).collect();
        assert_eq!(cached, kept);
        // Dropped from memory, still in the log.
        let got = s
            .entries(1, 6, None, GetEntriesContext::empty(false))
            .unwrap();
        assert_eq!(got.len(), 5);
        // The last entry stays cached even once applied.
        s.set_applied(5);
        assert!(s
            .store
            .meta
            .read()
            .cache
            .back()
            .is_some_and(|e| e.index == 5));
    }
}

/// A new leader catching up a member that lags by more than the cache holds reads a range
/// whose start is only in the database and whose end is only in the cache (staged, not
/// yet written): raft-rs panics if that read says `Unavailable`.
#[test]
fn a_range_spans_the_database_and_the_unwritten_cache() {
    let three = ConfState {
        voters: vec![1, 2, 3],
        ..Default::default()
    };
    let dir = tempfile::tempdir().unwrap();
    let s = RaftStorage::open(dir.path(), three).unwrap();
    let big = |index: u64| Entry {
        index,
        term: 1,
        data: bytes::Bytes::from(vec![index as u8; 1 << 20]),
        ..Default::default()
    };
    // 12 MiB written: the cache (8 MiB) keeps only the newest.
    let written: Vec<Entry> = (1..=12).map(big).collect();
    s.append(&written, None, true);
    let first_cached = s.store.meta.read().cache_first().unwrap();
    assert!(first_cached > 1, "the cache dropped the oldest entries");
    // Staged only: in the cache, not in the database.
    let pending = s.stage(&[entry(13, 2), entry(14, 2)], None);
    assert!(pending.is_some());
    let got = s
        .entries(1, 15, None, GetEntriesContext::empty(false))
        .unwrap();
    assert_eq!(
        got.iter().map(|e| e.index).collect::<Vec<_>>(),
        (1..=14).collect::<Vec<_>>()
    );
    assert_eq!(got[0].data.len(), 1 << 20);
    assert_eq!(s.term(14).unwrap(), 2);
    // A size limit stops in the database part, at least one entry through.
    let limited = s
        .entries(1, 15, Some(1), GetEntriesContext::empty(false))
        .unwrap();
    assert_eq!(limited.len(), 1);
    let three_mib = s
        .entries(2, 15, Some(3 << 20), GetEntriesContext::empty(false))
        .unwrap();
    assert_eq!(
        three_mib.iter().map(|e| e.index).collect::<Vec<_>>(),
        vec![2, 3]
    );
    // Reads starting in the cache and crossing nothing stay as they were.
    let tail = s
        .entries(first_cached, 15, None, GetEntriesContext::empty(false))
        .unwrap();
    assert_eq!(tail.len() as u64, 15 - first_cached);
    // Once written, the same range still reads whole.
    s.write(vec![pending.unwrap()], true);
    assert_eq!(
        s.entries(1, 15, None, GetEntriesContext::empty(false))
            .unwrap()
            .len(),
        14
    );
}

#[test]
fn the_quiet_flush_empties_the_memtables_and_keeps_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let s = RaftStorage::open(dir.path(), conf()).unwrap();
    let entries: Vec<Entry> = (1..=200).map(|i| entry(i, 1)).collect();
    let hs = HardState {
        term: 1,
        commit: 200,
        ..Default::default()
    };
    s.append(&entries, Some(&hs), true);
    let before = s.memory().memtables;
    let flush = s.memtable_flusher();
    flush();
    let after = s.memory().memtables;
    // An empty memtable still counts its first arena block: compare with the written one.
    assert!(
        after < before,
        "memtables {before} bytes before the flush, {after} after"
    );
    assert_eq!(
        s.entries(1, 201, None, GetEntriesContext::empty(false))
            .unwrap()
            .len(),
        200
    );
    // Once the store is gone, the flusher does nothing (and does not keep it open).
    drop(s);
    flush();
    let s = RaftStorage::open(dir.path(), conf()).unwrap();
    assert_eq!(s.last_index().unwrap(), 200);
}
