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
    assert_eq!(s.snapshot(3, 1).unwrap().data.as_ref(), b"state");
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
