//! A ZooKeeper data directory as a whole: which snapshot and which logs a restore uses, the
//! replay with its integrity checks, and writing a directory ZooKeeper starts from.
//!
//! Restore follows `FileTxnSnapLog.restore`, stricter where ZooKeeper only logs:
//! - the newest snapshot is used; one without its end marker (a crash while writing it,
//!   which ZooKeeper's `isValidSnapshot` skips), or a compressed one whose stream breaks
//!   off before it (ZooKeeper's `FileSnap` tries the next one on any read error), is
//!   skipped for the next older one, and any other damage is an error;
//! - the logs from the one holding the snapshot's zxid on are replayed; every zxid after
//!   the snapshot must follow the previous one (the next counter, or the first of a later
//!   epoch): a missing stretch is an error, not a silently older tree;
//! - the snapshot's digest is compared when the replay reaches its zxid, and every
//!   transaction's digest after that; a mismatch that later transactions do not settle
//!   (a fuzzy snapshot may run ahead of its digest) is an error;
//! - ephemerals of sessions missing from the session table are deleted, as ZooKeeper does
//!   at load.

use std::path::{Path, PathBuf};

use bytes::Bytes;

use crate::log::{self, LogEnd, LogError};
use crate::snapshot::{self, ZxidDigest};
use crate::stream::{self, Compression};
use crate::tree::{ZkTree, DIGEST_VERSION};
use crate::Error;

/// What the restore is doing, for progress reports.
#[derive(Debug, Clone, Copy)]
pub enum Progress {
    Snapshot { nodes: u64, bytes: u64 },
    Log { txns: u64, bytes: u64 },
}

/// How the digests checked out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DigestCheck {
    /// The tree matched ZooKeeper's digest this many times (snapshot and transactions).
    Verified(u64),
    /// No digest to compare with (digests off in ZooKeeper).
    NotAvailable,
}

/// A restored tree and how it was obtained.
#[derive(Debug)]
pub struct Restored {
    pub tree: ZkTree,
    pub snapshot: PathBuf,
    pub snapshot_zxid: i64,
    /// Snapshots skipped as incomplete, newest first.
    pub skipped: Vec<PathBuf>,
    pub logs: Vec<PathBuf>,
    pub txns: u64,
    /// NONODE/NODEEXISTS met while replaying over the fuzzy snapshot.
    pub replay_errors: u64,
    /// Where the last log ended inside a torn record.
    pub torn: Option<(PathBuf, u64)>,
    pub digest: DigestCheck,
    /// Sessions whose ephemerals were deleted because the session table lacks them.
    pub orphans: Vec<i64>,
    pub bytes: u64,
}

/// `dir/version-2` if it exists, else `dir` itself.
pub fn version_dir(dir: &Path) -> PathBuf {
    let v = dir.join("version-2");
    if v.is_dir() {
        v
    } else {
        dir.to_path_buf()
    }
}

/// Files named `<prefix>.<hex zxid>[suffix]`, sorted by zxid.
fn files(dir: &Path, prefix: &str) -> Result<Vec<(i64, PathBuf)>, Error> {
    let io = |e| Error::Io {
        file: dir.to_path_buf(),
        source: e,
    };
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(io)? {
        let entry = entry.map_err(io)?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(rest) = name.strip_prefix(prefix).and_then(|r| r.strip_prefix('.')) else {
            continue;
        };
        let hex = rest.split('.').next().unwrap_or("");
        if let Ok(z) = u64::from_str_radix(hex, 16) {
            out.push((z as i64, entry.path()));
        }
    }
    out.sort();
    Ok(out)
}

fn read_file(path: &Path) -> Result<Vec<u8>, Error> {
    std::fs::read(path).map_err(|e| Error::Io {
        file: path.to_path_buf(),
        source: e,
    })
}

fn damaged(file: &Path, offset: u64, what: impl Into<String>) -> Error {
    Error::Damaged {
        file: file.to_path_buf(),
        offset,
        what: what.into(),
    }
}

/// Whether `next` may follow `prev` in a log: the next counter, or the first of a later epoch.
fn follows(prev: i64, next: i64) -> bool {
    next == prev + 1 || ((next >> 32) > (prev >> 32) && (next & 0xffff_ffff) == 1)
}

enum DigestState {
    /// The snapshot's digest, for a zxid the replay has not reached yet.
    Pending(ZxidDigest),
    /// Not matched yet; `mismatch` is a zxid where a digest did not match.
    Unsettled {
        mismatch: Option<i64>,
    },
    Verified(u64),
}

impl DigestState {
    fn observe(&mut self, zxid: i64, expected: i64, tree: &ZkTree) -> Result<(), i64> {
        let ok = expected == tree.digest();
        match self {
            DigestState::Verified(n) if ok => *n += 1,
            DigestState::Verified(_) => return Err(zxid),
            _ if ok => *self = DigestState::Verified(1),
            _ => {
                *self = DigestState::Unsettled {
                    mismatch: Some(zxid),
                }
            }
        }
        Ok(())
    }
}

/// Loads the tree ZooKeeper would load from `snap_dir` (snapshots) and `log_dir` (logs;
/// often the same directory).
pub fn restore(
    snap_dir: &Path,
    log_dir: &Path,
    progress: &mut dyn FnMut(Progress),
) -> Result<Restored, Error> {
    let snap_dir = version_dir(snap_dir);
    let log_dir = version_dir(log_dir);
    let snaps = files(&snap_dir, "snapshot")?;
    let mut skipped = Vec::new();
    let mut chosen = None;
    let mut bytes_read = 0u64;
    for (zxid, path) in snaps.iter().rev() {
        let raw = read_file(path)?;
        bytes_read += raw.len() as u64;
        let kind = Compression::of_file_name(&path.to_string_lossy());
        let (plain, stopped) = stream::decompress_prefix(kind, raw);
        if !snapshot::looks_complete(&plain) {
            // Cut short (or, compressed, undecodable past some point): ZooKeeper reads the
            // next older snapshot, and so does this; the replay's continuity checks still
            // demand every transaction since that snapshot.
            skipped.push(path.clone());
            continue;
        }
        if let Some(e) = stopped {
            return Err(damaged(path, e.offset, e.what));
        }
        chosen = Some((*zxid, path.clone(), plain));
        break;
    }
    let Some((name_zxid, snap_path, plain)) = chosen else {
        return Err(match skipped.first() {
            Some(p) => Error::Inconsistent(format!(
                "no usable snapshot in {}: {} is incomplete (it lacks the end marker a finished snapshot has)",
                snap_dir.display(),
                p.display()
            )),
            None => Error::Inconsistent(format!("no snapshot.* file in {}", snap_dir.display())),
        });
    };
    let (mut tree, info) = snapshot::read(Bytes::from(plain), &mut |nodes, bytes| {
        progress(Progress::Snapshot { nodes, bytes })
    })
    .map_err(|e| damaged(&snap_path, e.offset, e.what))?;
    let snap_zxid = info.last_processed_zxid.unwrap_or(name_zxid);
    tree.last_zxid = snap_zxid;
    let mut state = match info.digest {
        Some(d) if d.version == DIGEST_VERSION && d.zxid != 0 => DigestState::Pending(d),
        _ => DigestState::Unsettled { mismatch: None },
    };
    if let DigestState::Pending(d) = state {
        if d.zxid <= snap_zxid {
            state = DigestState::Unsettled { mismatch: None };
            if d.zxid == snap_zxid {
                // Cannot fail from Unsettled.
                let _ = state.observe(d.zxid, d.digest, &tree);
            }
        }
    }

    // Logs: the newest one starting at or before the snapshot, and every later one.
    let logs = files(&log_dir, "log")?;
    let first = logs.iter().rposition(|(z, _)| *z <= snap_zxid).unwrap_or(0);
    let mut used = Vec::new();
    let mut prev = snap_zxid;
    let (mut txns, mut replay_errors, mut torn) = (0u64, 0u64, None);
    for (_, path) in &logs[first..] {
        let file = read_file(path)?;
        bytes_read += file.len() as u64;
        used.push(path.clone());
        let end = log::read(&file, |offset, t| -> Result<(), Error> {
            let zxid = t.header.zxid;
            if zxid <= snap_zxid {
                return Ok(());
            }
            if zxid <= prev {
                return Err(damaged(path, offset, format!("zxid {zxid:#x} does not follow {prev:#x} (it goes backwards)")));
            }
            if !follows(prev, zxid) {
                return Err(Error::Inconsistent(format!(
                    "log gap: after zxid {prev:#x} the next logged transaction is {zxid:#x} ({}, offset {offset}); transactions in between are missing",
                    path.display()
                )));
            }
            prev = zxid;
            if tree.process(&t.header, &t.txn).is_some() {
                replay_errors += 1;
            }
            txns += 1;
            if let DigestState::Pending(d) = state {
                if zxid >= d.zxid {
                    state = DigestState::Unsettled { mismatch: None };
                    if zxid == d.zxid {
                        let _ = state.observe(zxid, d.digest, &tree);
                    }
                    return Ok(());
                }
            }
            if let Some(d) = t.digest.filter(|d| d.version == DIGEST_VERSION) {
                if !matches!(state, DigestState::Pending(_)) {
                    state.observe(zxid, d.tree_digest, &tree).map_err(|z| {
                        Error::Inconsistent(format!(
                            "digest mismatch after zxid {z:#x} ({}, offset {offset}): the replayed tree differs from the one ZooKeeper had",
                            path.display()
                        ))
                    })?;
                }
            }
            if txns.is_multiple_of(65_536) {
                progress(Progress::Log { txns, bytes: offset });
            }
            Ok(())
        })
        .map_err(|e| match e {
            Error::Log(LogError { offset, what }) => damaged(path, offset, what),
            other => other,
        })?;
        torn = match end {
            LogEnd::Torn(at) => Some((path.clone(), at)),
            LogEnd::Clean => None,
        };
    }
    progress(Progress::Log { txns, bytes: 0 });
    let digest = match state {
        DigestState::Verified(n) => DigestCheck::Verified(n),
        DigestState::Pending(d) => {
            return Err(Error::Inconsistent(format!(
                "the logs end at zxid {prev:#x}, before zxid {:#x} that {} was taken at: transactions are missing",
                d.zxid,
                snap_path.display()
            )))
        }
        DigestState::Unsettled { mismatch: Some(z) } => {
            return Err(Error::Inconsistent(format!(
                "digest mismatch at zxid {z:#x}, never settled by a later transaction: the replayed tree differs from ZooKeeper's"
            )))
        }
        DigestState::Unsettled { mismatch: None } => DigestCheck::NotAvailable,
    };
    let orphans = tree.remove_orphaned_ephemerals();
    tree.recompute_quota_stats();
    Ok(Restored {
        tree,
        snapshot: snap_path,
        snapshot_zxid: snap_zxid,
        skipped,
        logs: used,
        txns,
        replay_errors,
        torn,
        digest,
        orphans,
        bytes: bytes_read,
    })
}

/// Writes `tree` as a ZooKeeper data directory under `dir` (`version-2/snapshot.<zxid>`
/// plus `acceptedEpoch` and `currentEpoch`), refusing a directory that already holds
/// ZooKeeper data. Returns the snapshot's path.
pub fn write_datadir(
    tree: &ZkTree,
    dir: &Path,
    compression: Compression,
) -> Result<PathBuf, Error> {
    let v = dir.join("version-2");
    let io = |file: &Path| {
        let file = file.to_path_buf();
        move |e| Error::Io { file, source: e }
    };
    std::fs::create_dir_all(&v).map_err(io(&v))?;
    if !files(&v, "snapshot")?.is_empty() || !files(&v, "log")?.is_empty() {
        return Err(Error::Inconsistent(format!(
            "{} already holds ZooKeeper data; export into an empty directory",
            v.display()
        )));
    }
    let plain = snapshot::write(tree);
    let bytes = stream::compress(compression, &plain);
    let name = format!("snapshot.{:x}{}", tree.last_zxid, compression.suffix());
    let path = v.join(name);
    write_durably(&path, &bytes)?;
    let epoch = (tree.last_zxid >> 32).to_string();
    for f in ["acceptedEpoch", "currentEpoch"] {
        write_durably(&v.join(f), epoch.as_bytes())?;
    }
    Ok(path)
}

/// Writes a file through a temporary name, fsyncs it and renames it into place.
pub fn write_durably(path: &Path, bytes: &[u8]) -> Result<(), Error> {
    use std::io::Write;
    let tmp = path.with_extension("tmp");
    let io = |e| Error::Io {
        file: path.to_path_buf(),
        source: e,
    };
    let mut f = std::fs::File::create(&tmp).map_err(io)?;
    f.write_all(bytes).map_err(io)?;
    f.sync_all().map_err(io)?;
    std::fs::rename(&tmp, path).map_err(io)?;
    Ok(())
}

#[cfg(test)]
mod tests;
