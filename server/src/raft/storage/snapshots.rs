//! Snapshots: written as files (`snapshot_files.rs`) and named by `snapshot_meta` once
//! durable, read back as a stream (or whole, for sending), replaced by newer ones, and
//! installed from the leader (which replaces the log). Snapshots of earlier builds, in
//! chunks in the `snapshot` column family, are still read; the first new snapshot
//! replaces them.

use std::io::{self, Read};

use protobuf::Message as _;
use raft::eraftpb::{ConfState, Snapshot, SnapshotMetadata};
use rocksdb::{IteratorMode, WriteBatch, WriteOptions, DB};

use super::snapshot_files::{self, SnapshotSink};
use super::store::{
    fatal, key, Store, CF_LOG, CF_SNAPSHOT, CF_STATE, END_MARK, FORMAT_VERSION, KEY_APPLIED,
    KEY_CONF_STATE, KEY_FORMAT, KEY_HARD_STATE, KEY_SNAPSHOT_FILE, KEY_SNAPSHOT_META,
    KEY_TRUNCATED,
};

/// A stored snapshot, read as a stream.
pub enum SnapshotSource {
    File(std::fs::File),
    /// A snapshot of the earlier layout, read whole from its chunks.
    Chunks(io::Cursor<bytes::Bytes>),
}

impl Read for SnapshotSource {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            SnapshotSource::File(f) => f.read(buf),
            SnapshotSource::Chunks(c) => c.read(buf),
        }
    }
}

/// The record naming a snapshot file: index, term and length (u64 BE each).
pub(super) fn file_record(index: u64, term: u64, len: u64) -> Vec<u8> {
    let mut v = Vec::with_capacity(24);
    for x in [index, term, len] {
        v.extend_from_slice(&x.to_be_bytes());
    }
    v
}

/// The index, term and length a file record holds.
pub(super) fn parse_file_record(b: &[u8]) -> Option<(u64, u64, u64)> {
    let field = |i: usize| {
        Some(u64::from_be_bytes(
            b.get(i * 8..i * 8 + 8)?.try_into().ok()?,
        ))
    };
    if b.len() != 24 {
        return None;
    }
    Some((field(0)?, field(1)?, field(2)?))
}

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

/// Stores the snapshot at (`index`, `term`) durably as `write` streams it into the
/// sink; its size. Safe to call from any thread; the snapshot counts only once
/// [`Self::save_snapshot`] (or `install_snapshot`) names it. A failed write leaves
/// nothing behind.
pub(super) fn write_snapshot_with(
    s: &Store,
    index: u64,
    term: u64,
    write: impl FnOnce(&mut SnapshotSink) -> io::Result<()>,
) -> io::Result<u64> {
    let mut sink = SnapshotSink::create(&s.snapshots_dir(), index, term)?;
    write(&mut sink)?;
    sink.finish()
}

/// Stores a snapshot held in memory (one received from the leader).
pub(super) fn write_snapshot(s: &Store, index: u64, term: u64, data: &[u8]) -> io::Result<u64> {
    write_snapshot_with(s, index, term, |sink| io::Write::write_all(sink, data))
}

/// The stored state machine snapshot, if any, as a stream: for loading it at start-up
/// without holding it whole on top of the tree it decodes into.
pub(super) fn snapshot_reader(s: &Store) -> Option<SnapshotSource> {
    let (meta, file) = {
        let m = s.meta.read();
        (m.snapshot_meta.clone(), m.snapshot_file)
    };
    if meta.index == 0 {
        return None;
    }
    if file.is_some() {
        let path = s
            .snapshots_dir()
            .join(snapshot_files::file_name(meta.index, meta.term));
        return match std::fs::File::open(&path) {
            Ok(f) => Some(SnapshotSource::File(f)),
            Err(e) => fatal(&format!("opening {}", path.display()), e),
        };
    }
    match read_snapshot(&s.db, meta.index, meta.term) {
        Ok(d) => Some(SnapshotSource::Chunks(io::Cursor::new(d))),
        Err(e) => fatal("reading the stored snapshot", e),
    }
}

/// The stored snapshot whole (raft-rs sends a snapshot in one message).
pub(super) fn snapshot_data(s: &Store) -> Option<bytes::Bytes> {
    let mut src = snapshot_reader(s)?;
    if let SnapshotSource::Chunks(c) = src {
        return Some(c.into_inner());
    }
    let mut data = Vec::new();
    if let Err(e) = src.read_to_end(&mut data) {
        fatal("reading the stored snapshot", e);
    }
    Some(bytes::Bytes::from(data))
}

/// The stored snapshot for sending to followers: kept after the first read, as a leader
/// often sends the same one to several members in a row (until the next snapshot).
/// Checked before it is kept or sent: a damaged file (found so here or by the scrub) is
/// None until the Raft loop wrote a fresh one, so that damage on one member's disk never
/// reaches another.
pub(super) fn snapshot_data_for_sending(s: &Store) -> Option<bytes::Bytes> {
    let index = s.snapshot_metadata().index;
    if let Some((cached, data)) = s.snapshot_cache.lock().as_ref() {
        if *cached == index {
            return Some(data.clone());
        }
    }
    let data = snapshot_data(s)?;
    if let Err(e) = crate::state::snapshot::verify(&data[..]) {
        s.snapshot_damaged(&format!("the snapshot at index {index}: {e}"));
        return None;
    }
    *s.snapshot_cache.lock() = Some((index, data.clone()));
    Some(data)
}

/// Deletes every snapshot but the named one (`index`, `term`), a file: the others'
/// files, and the chunks of the earlier layout (RocksDB reclaims their space as it
/// compacts).
fn remove_old_snapshots(s: &Store, index: u64, term: u64) {
    let mut wb = WriteBatch::default();
    wb.delete_range_cf(s.cf(CF_SNAPSHOT), &[][..], &[0xffu8; 21][..]);
    if let Err(e) = s.db.write(wb) {
        tracing::warn!("cannot delete old snapshots: {e}");
    }
    let keep = snapshot_files::file_name(index, term);
    snapshot_files::remove_others(&s.snapshots_dir(), Some(&keep));
}

/// The length of the durable file of the snapshot at (`index`, `term`), to name it.
fn snapshot_file_len(s: &Store, index: u64, term: u64) -> u64 {
    let path = s
        .snapshots_dir()
        .join(snapshot_files::file_name(index, term));
    match std::fs::metadata(&path) {
        Ok(m) => m.len(),
        Err(e) => fatal(&format!("naming snapshot {}", path.display()), e),
    }
}

/// Stores a snapshot of our own state machine taken at `index` (applied, so committed),
/// then drops the log up to `compact_to` (at most `index`), keeping the entries after it
/// so that a follower a little behind catches up from the log instead of a snapshot.
/// The snapshot must already be durable ([`Self::write_snapshot`]).
pub(super) fn save_snapshot(s: &Store, index: u64, term: u64, conf: &ConfState, compact_to: u64) {
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
        let m = s.meta.read();
        (m.truncated_index, m.truncated_term)
    };
    let compact_to = compact_to.min(index).max(old_truncated);
    let compact_term = if compact_to == index {
        term
    } else {
        match super::log::term(s, compact_to) {
            Ok(t) => t,
            Err(e) => fatal("reading the term at the compaction point", e),
        }
    };
    let mut truncated = Vec::with_capacity(16);
    truncated.extend_from_slice(&compact_to.to_be_bytes());
    truncated.extend_from_slice(&compact_term.to_be_bytes());
    let file_len = snapshot_file_len(s, index, term);
    let mut wb = WriteBatch::default();
    wb.put_cf(s.cf(CF_STATE), KEY_SNAPSHOT_META, meta_bytes);
    wb.put_cf(s.cf(CF_STATE), KEY_FORMAT, FORMAT_VERSION.to_be_bytes());
    wb.put_cf(
        s.cf(CF_STATE),
        KEY_SNAPSHOT_FILE,
        file_record(index, term, file_len),
    );
    wb.put_cf(s.cf(CF_STATE), KEY_TRUNCATED, truncated);
    wb.delete_range_cf(s.cf(CF_LOG), key(0), key(compact_to + 1));
    let mut wo = WriteOptions::default();
    wo.set_sync(true);
    if let Err(e) = s.db.write_opt(wb, &wo) {
        fatal("saving a snapshot", e);
    }
    let mut m = s.meta.write();
    m.snapshot_meta = meta;
    m.snapshot_file = Some(file_len);
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
    remove_old_snapshots(s, index, term);
    // A newer snapshot replaces the one kept for sending.
    *s.snapshot_cache.lock() = None;
}

/// Installs a snapshot received from the leader: replaces the log, the membership and
/// the stored state machine.
pub(super) fn install_snapshot(s: &Store, snap: &Snapshot) {
    let meta = snap.get_metadata();
    let mut hs = s.hard_state();
    hs.term = hs.term.max(meta.term);
    hs.commit = hs.commit.max(meta.index);
    let file_len = match write_snapshot(s, meta.index, meta.term, &snap.data) {
        Ok(len) => len,
        Err(e) => fatal("writing a snapshot received from the leader", e),
    };
    let mut wb = WriteBatch::default();
    wb.delete_range_cf(s.cf(CF_LOG), key(0), key(u64::MAX));
    let encode = |m: &dyn protobuf::Message| match m.write_to_bytes() {
        Ok(b) => b,
        Err(e) => fatal("encoding snapshot state", e),
    };
    wb.put_cf(s.cf(CF_STATE), KEY_SNAPSHOT_META, encode(meta));
    wb.put_cf(s.cf(CF_STATE), KEY_FORMAT, FORMAT_VERSION.to_be_bytes());
    wb.put_cf(
        s.cf(CF_STATE),
        KEY_SNAPSHOT_FILE,
        file_record(meta.index, meta.term, file_len),
    );
    wb.put_cf(
        s.cf(CF_STATE),
        KEY_CONF_STATE,
        encode(meta.get_conf_state()),
    );
    wb.put_cf(s.cf(CF_STATE), KEY_HARD_STATE, encode(&hs));
    // The state machine is replaced by the snapshot's.
    wb.put_cf(s.cf(CF_STATE), KEY_APPLIED, meta.index.to_be_bytes());
    let mut truncated = Vec::with_capacity(16);
    truncated.extend_from_slice(&meta.index.to_be_bytes());
    truncated.extend_from_slice(&meta.term.to_be_bytes());
    wb.put_cf(s.cf(CF_STATE), KEY_TRUNCATED, truncated);
    let mut wo = WriteOptions::default();
    wo.set_sync(true);
    if let Err(e) = s.db.write_opt(wb, &wo) {
        fatal("installing a snapshot", e);
    }
    let mut m = s.meta.write();
    m.snapshot_meta = meta.clone();
    m.snapshot_file = Some(file_len);
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
    remove_old_snapshots(s, meta.index, meta.term);
    *s.snapshot_cache.lock() = None;
}
