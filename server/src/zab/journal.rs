//! What an observing member keeps of the ZooKeeper ensemble, in `dataDir/zab/`, so that a
//! restart resumes from its last zxid (the leader then sends a DIFF instead of the whole
//! tree), as ZooKeeper's own observers keep their log and snapshots:
//!
//! - `snapshot`: the state at some zxid, in zooraft's snapshot encoding (written to a
//!   temporary file, synced, renamed into place);
//! - `log`: every transaction applied after it, as the leader sent it, each record
//!   `u32 length | bytes | u32 CRC-32`; appended as they are applied and synced once per
//!   batch. A record cut short by a crash ends the log there;
//! - `epochs`: the accepted and current epochs of ZooKeeper's protocol.
//!
//! A SNAP from the leader replaces the snapshot and empties the log before anything after
//! it is logged, so the log always continues the snapshot it sits beside. Nothing here is
//! needed for safety (the ensemble's leader holds the history and can always send it
//! again); it saves the resync.

use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use bytes::Bytes;
use zkdata::txn::LoggedTxn;

use crate::state::snapshot::{self, SnapshotView};
use crate::state::tree::TreeOptions;
use crate::state::StateMachine;

/// A new snapshot once the log holds this many transactions.
const LOG_LIMIT: u64 = 100_000;

/// The files of `dataDir/zab`.
pub struct Journal {
    dir: PathBuf,
    log: BufWriter<File>,
    logged: u64,
    dirty: bool,
}

/// What a restart found.
pub struct Recovered {
    pub state: StateMachine,
    pub accepted_epoch: u32,
    pub current_epoch: u32,
    /// Transactions replayed from the log over the snapshot.
    pub replayed: u64,
}

fn write_durably(
    path: &Path,
    write: impl FnOnce(&mut BufWriter<File>) -> io::Result<()>,
) -> io::Result<()> {
    let tmp = path.with_extension("tmp");
    let mut w = BufWriter::new(File::create(&tmp)?);
    write(&mut w)?;
    let f = w.into_inner().map_err(|e| e.into_error())?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)?;
    if let Some(dir) = path.parent() {
        File::open(dir)?.sync_all()?;
    }
    Ok(())
}

impl Journal {
    /// Opens (or creates) the journal in `dir`, with what it holds.
    pub fn open(
        dir: &Path,
        options: TreeOptions,
        replay: impl Fn(&mut StateMachine, &LoggedTxn),
    ) -> io::Result<(Journal, Recovered)> {
        std::fs::create_dir_all(dir)?;
        let mut state = match File::open(dir.join("snapshot")) {
            Ok(f) => snapshot::decode_from(io::BufReader::new(f), options).map_err(|e| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("{}: {e}", dir.join("snapshot").display()),
                )
            })?,
            Err(e) if e.kind() == io::ErrorKind::NotFound => StateMachine::new(options),
            Err(e) => return Err(e),
        };
        let (records, valid_len) = read_log(&dir.join("log"))?;
        let mut replayed = 0;
        for bytes in records {
            let Ok(t) = LoggedTxn::decode(bytes) else {
                break;
            };
            if t.header.zxid > state.last_zxid {
                replay(&mut state, &t);
                replayed += 1;
            }
        }
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join("log"))?;
        // Whatever follows the last whole record was cut by a crash.
        file.set_len(valid_len)?;
        let (accepted_epoch, current_epoch) = read_epochs(&dir.join("epochs"))?;
        Ok((
            Journal {
                dir: dir.to_path_buf(),
                log: BufWriter::with_capacity(256 * 1024, file),
                logged: replayed,
                dirty: false,
            },
            Recovered {
                state,
                accepted_epoch,
                current_epoch,
                replayed,
            },
        ))
    }

    /// A transaction applied (synced by the next [`Journal::sync`]).
    pub fn append(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.log.write_all(&(bytes.len() as u32).to_be_bytes())?;
        self.log.write_all(bytes)?;
        self.log.write_all(&crc32fast::hash(bytes).to_be_bytes())?;
        self.logged += 1;
        self.dirty = true;
        Ok(())
    }

    /// Makes what was appended durable; true when the log is long enough for a snapshot.
    pub fn sync(&mut self) -> io::Result<bool> {
        if self.dirty {
            self.log.flush()?;
            self.log.get_ref().sync_data()?;
            self.dirty = false;
        }
        Ok(self.logged >= LOG_LIMIT)
    }

    /// Replaces the snapshot with `view` and empties the log (after a SNAP, or once the
    /// log is long).
    pub fn snapshot(&mut self, view: &SnapshotView) -> io::Result<()> {
        self.log.flush()?;
        write_durably(&self.dir.join("snapshot"), |w| {
            snapshot::encode_into(view, w).map(drop)
        })?;
        self.log.get_ref().set_len(0)?;
        self.log.get_ref().sync_all()?;
        self.logged = 0;
        self.dirty = false;
        Ok(())
    }

    /// Forgets everything (before a SNAP's tree replaces this member's).
    pub fn clear(&mut self) -> io::Result<()> {
        self.log.flush()?;
        match std::fs::remove_file(self.dir.join("snapshot")) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
        self.log.get_ref().set_len(0)?;
        self.log.get_ref().sync_all()?;
        self.logged = 0;
        Ok(())
    }

    pub fn set_epochs(&self, accepted: u32, current: u32) -> io::Result<()> {
        write_durably(&self.dir.join("epochs"), |w| {
            writeln!(w, "{accepted} {current}")
        })
    }
}

/// A journal that stops at its first failure: what it failed to write is cleared (so a
/// restart takes the whole tree from the leader again rather than a gap), and nothing
/// more is written. The ensemble's leader still has everything.
pub struct Kept(Option<Journal>);

impl Kept {
    pub fn new(j: Journal) -> Kept {
        Kept(Some(j))
    }

    /// Runs `f` on the journal, if it still works.
    pub fn with<T>(&mut self, f: impl FnOnce(&mut Journal) -> io::Result<T>) -> Option<T> {
        let j = self.0.as_mut()?;
        match f(j) {
            Ok(v) => Some(v),
            Err(e) => {
                tracing::error!(
                    error = %e,
                    "cannot write this member's copy of the ensemble in dataDir/zab; a restart \
                     will take the whole tree from the leader again"
                );
                if let Some(mut j) = self.0.take() {
                    let _ = j.clear();
                }
                None
            }
        }
    }
}

fn read_epochs(path: &Path) -> io::Result<(u32, u32)> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok((0, 0)),
        Err(e) => return Err(e),
    };
    let mut it = text.split_whitespace().map(str::parse::<u32>);
    match (it.next(), it.next()) {
        (Some(Ok(a)), Some(Ok(c))) => Ok((a, c)),
        _ => Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{}: expected two epochs, found {text:?}", path.display()),
        )),
    }
}

/// The log's whole records, and the length they take (the rest is a torn tail).
fn read_log(path: &Path) -> io::Result<(Vec<Bytes>, u64)> {
    let mut raw = Vec::new();
    match File::open(path) {
        Ok(mut f) => {
            f.read_to_end(&mut raw)?;
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok((Vec::new(), 0)),
        Err(e) => return Err(e),
    }
    let raw = Bytes::from(raw);
    let mut records = Vec::new();
    let mut at = 0usize;
    while raw.len() >= at + 4 {
        let len = u32::from_be_bytes([raw[at], raw[at + 1], raw[at + 2], raw[at + 3]]) as usize;
        let end = at + 4 + len + 4;
        if raw.len() < end {
            break;
        }
        let bytes = raw.slice(at + 4..at + 4 + len);
        let crc = u32::from_be_bytes([raw[end - 4], raw[end - 3], raw[end - 2], raw[end - 1]]);
        if crc32fast::hash(&bytes) != crc {
            break;
        }
        records.push(bytes);
        at = end;
    }
    Ok((records, at as u64))
}

/// A plain create at `zxid`, for tests here and in the layer.
#[cfg(test)]
pub fn create_txn(zxid: i64, path: &str) -> LoggedTxn {
    use zkdata::txn::{op, Txn, TxnHeader};
    LoggedTxn {
        header: TxnHeader {
            client_id: 1,
            cxid: 1,
            zxid,
            time: 5,
            kind: op::CREATE,
        },
        txn: Txn::Create {
            path: path.into(),
            data: None,
            acl: vec![jute::Acl::open_unsafe()],
            ephemeral: false,
            parent_cversion: -1,
        },
        digest: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use zkdata::txn::Txn;

    fn txn(zxid: i64, path: &str) -> LoggedTxn {
        create_txn(zxid, path)
    }

    fn replay(s: &mut StateMachine, t: &LoggedTxn) {
        s.last_zxid = t.header.zxid;
        if let Txn::Create { path, .. } = &t.txn {
            s.sessions.insert(
                t.header.zxid,
                crate::state::SessionInfo {
                    timeout: 1,
                    passwd: [0; 16],
                },
            );
            let _ = path;
        }
    }

    #[test]
    fn a_restart_finds_the_snapshot_the_log_and_the_epochs() {
        let dir = tempfile::tempdir().unwrap();
        let opts = TreeOptions::default();
        let (mut j, r) = Journal::open(dir.path(), opts, replay).unwrap();
        assert_eq!((r.state.last_zxid, r.accepted_epoch, r.replayed), (0, 0, 0));
        let mut s = StateMachine::new(opts);
        s.last_zxid = 0x1_0000_0005;
        j.snapshot(&crate::state::snapshot::SnapshotView::of(&s))
            .unwrap();
        for z in 4..9 {
            j.append(&txn(0x1_0000_0000 + z, "/a").encode()).unwrap();
        }
        j.sync().unwrap();
        j.set_epochs(2, 1).unwrap();
        // A torn record at the end (a crash in the middle of a write).
        j.append(&txn(0x1_0000_0009, "/b").encode()).unwrap();
        j.log.flush().unwrap();
        let len = std::fs::metadata(dir.path().join("log")).unwrap().len();
        j.log.get_ref().set_len(len - 3).unwrap();
        drop(j);
        let (mut j, r) = Journal::open(dir.path(), opts, replay).unwrap();
        // Records at or below the snapshot's zxid are skipped; the torn one is gone.
        assert_eq!(r.replayed, 3);
        assert_eq!(r.state.last_zxid, 0x1_0000_0008);
        assert_eq!((r.accepted_epoch, r.current_epoch), (2, 1));
        j.append(&txn(0x1_0000_0009, "/c").encode()).unwrap();
        j.sync().unwrap();
        drop(j);
        let (mut j, r) = Journal::open(dir.path(), opts, replay).unwrap();
        assert_eq!(
            r.state.last_zxid, 0x1_0000_0009,
            "appends after the cut are kept"
        );
        // Cleared before a SNAP: nothing is left to replay.
        j.clear().unwrap();
        drop(j);
        let (_, r) = Journal::open(dir.path(), opts, replay).unwrap();
        assert_eq!((r.state.last_zxid, r.replayed), (0, 0));
    }
}
