//! Keeps a ZooKeeper data directory to its newest snapshots while the scale scenario runs,
//! as an operator of a big tree must (ZooKeeper's `zkCleanup.sh` / `autopurge`).
//!
//! ZooKeeper writes a full snapshot every `snapCount` (randomized 50-100%) transactions
//! and never deletes one by itself; `autopurge.purgeInterval` runs at most once an hour.
//! Filling 10M znodes of 100 B writes over a hundred snapshots that grow to about 1.2 GB
//! each: about 50-90 GB, more than a test machine's disk (a run ended in ENOSPC). The
//! purger does what `PurgeTxnLog` does with a retain count: it keeps the newest snapshots
//! and the transaction logs a restart from the oldest kept one needs, and deletes older
//! files. ZooKeeper never reads an older snapshot while it runs, so this changes nothing
//! the bench measures; zooraft drops its own old snapshots and log.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// Snapshots kept (ZooKeeper's own minimum for `autopurge.snapRetainCount` is 3).
const KEEP_SNAPSHOTS: usize = 3;
const EVERY: Duration = Duration::from_secs(2);

/// `snapshot.<hex zxid>` or `log.<hex zxid>`: the kind and the zxid.
fn parse(name: &str) -> Option<(&str, u64)> {
    let (kind, zxid) = name.split_once('.')?;
    if kind != "snapshot" && kind != "log" {
        return None;
    }
    Some((kind, u64::from_str_radix(zxid, 16).ok()?))
}

/// Deletes all but the newest `KEEP_SNAPSHOTS` snapshots of `dir` (ZooKeeper's
/// `version-2` directory) and the logs that only precede the oldest kept one (the log
/// whose first zxid is the highest at or below that snapshot's stays: its later
/// transactions follow the snapshot). Returns the bytes freed.
pub fn purge(dir: &Path) -> std::io::Result<u64> {
    let mut snapshots: Vec<(u64, PathBuf)> = Vec::new();
    let mut logs: Vec<(u64, PathBuf)> = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name();
        let Some((kind, zxid)) = name.to_str().and_then(parse) else {
            continue;
        };
        let list = if kind == "snapshot" {
            &mut snapshots
        } else {
            &mut logs
        };
        list.push((zxid, entry.path()));
    }
    if snapshots.len() <= KEEP_SNAPSHOTS {
        return Ok(0);
    }
    snapshots.sort_unstable_by_key(|(zxid, _)| std::cmp::Reverse(*zxid));
    let oldest_kept = snapshots[KEEP_SNAPSHOTS - 1].0;
    // The newest log starting at or before the oldest kept snapshot is still needed.
    let needed_log = logs
        .iter()
        .map(|(zxid, _)| *zxid)
        .filter(|&z| z <= oldest_kept)
        .max();
    let old_logs = logs
        .into_iter()
        .filter(|(zxid, _)| needed_log.is_some_and(|n| *zxid < n));
    let mut freed = 0;
    for (_, path) in snapshots.into_iter().skip(KEEP_SNAPSHOTS).chain(old_logs) {
        let len = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
        match std::fs::remove_file(&path) {
            Ok(()) => freed += len,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
    }
    Ok(freed)
}

/// Runs [`purge`] on a ZooKeeper data directory every `EVERY` until dropped.
pub struct Purger {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<u64>>,
}

impl Purger {
    /// Purges `data_dir/version-2` (ZooKeeper's layout under `dataDir`).
    pub fn start(data_dir: &Path) -> Purger {
        let dir = data_dir.join("version-2");
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut freed = 0;
            while !flag.load(Ordering::Relaxed) {
                match purge(&dir) {
                    Ok(n) => freed += n,
                    // Not created yet, or a file went away meanwhile: try again later.
                    Err(e) => tracing::debug!("purging {}: {e}", dir.display()),
                }
                let mut slept = Duration::ZERO;
                while slept < EVERY && !flag.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(100));
                    slept += Duration::from_millis(100);
                }
            }
            freed
        });
        Purger {
            stop,
            thread: Some(thread),
        }
    }

    /// Stops purging; the bytes freed in all.
    pub fn finish(mut self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.take().and_then(|t| t.join().ok()).unwrap_or(0)
    }
}

impl Drop for Purger {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn keeps_the_newest_snapshots_and_the_logs_after_the_oldest_kept() {
        let dir = tempfile::tempdir().unwrap();
        let files = [
            "log.1",
            "snapshot.0",
            "log.186a1",
            "snapshot.186a0",
            "log.30d41",
            "snapshot.30d40",
            "snapshot.493e0",
            "log.493e1",
            "snapshot.61a80",
            "acceptedEpoch",
            "snapshot.notazxid",
        ];
        for f in files {
            std::fs::write(dir.path().join(f), b"0123456789").unwrap();
        }
        // Kept: snapshots 61a80, 493e0 and 30d40, and the logs from 186a1 on: the newest
        // log starting at or before 30d40 may hold transactions after it (here they are all
        // in log.30d41, but a log's name does not say where it ends).
        assert_eq!(purge(dir.path()).unwrap(), 30);
        assert_eq!(
            names(dir.path()),
            vec![
                "acceptedEpoch",
                "log.186a1",
                "log.30d41",
                "log.493e1",
                "snapshot.30d40",
                "snapshot.493e0",
                "snapshot.61a80",
                "snapshot.notazxid",
            ]
        );
        // Nothing more to do.
        assert_eq!(purge(dir.path()).unwrap(), 0);
    }

    #[test]
    fn a_missing_directory_is_an_error_not_a_panic() {
        let dir = tempfile::tempdir().unwrap();
        assert!(purge(&dir.path().join("version-2")).is_err());
    }
}
