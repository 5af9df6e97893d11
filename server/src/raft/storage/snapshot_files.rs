//! Snapshot files: `snapshots/<index>-<term>.snap` beside RocksDB's files, written as the
//! encoder streams, made durable, and only then named by `snapshot_meta`.
//!
//! Why files and not the `snapshot` column family (where earlier builds kept them, still
//! read): a snapshot written through RocksDB passes through memtables (a second copy of
//! it in memory) and is flushed in one burst whose fsync competes with the log writer's;
//! a file is written straight from the encoder's small buffer, and its writeback is paced
//! ([`PACE`]): every few MiB the kernel is asked to start writing the range just written
//! and to finish the one before (`sync_file_range`), whose pages are then dropped from the
//! page cache, so the final fsync has little left to flush and the log writer's fsyncs
//! never queue behind hundreds of MiB.
//!
//! Durability, step by step: the encoder writes `<name>.tmp`; it is fsynced, renamed to
//! `<name>` and the directory fsynced; only then does the Raft loop name it in
//! `snapshot_meta` (with its length, checked at open). A crash before the naming leaves a
//! file nothing names, deleted at the next open; a failed write (a full disk) deletes its
//! temporary file and names nothing. Older snapshots go only after the newer is named.
//! The content is covered by the snapshot's own CRC-32 trailer (`state/snapshot.rs`).

use std::fs::File;
use std::io::{self, Write};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

/// The directory of snapshot files, inside the store's directory.
pub(super) const SNAPSHOT_DIR: &str = "snapshots";

/// Bytes written between two steps of paced writeback.
pub const PACE: u64 = 8 << 20;

/// The file name of the snapshot at (`index`, `term`).
pub(super) fn file_name(index: u64, term: u64) -> String {
    format!("{index:020}-{term:020}.snap")
}

/// The index and term a snapshot file's name gives, if it is one (not a temporary file).
fn parse_name(name: &str) -> Option<(u64, u64)> {
    let (index, term) = name.strip_suffix(".snap")?.split_once('-')?;
    Some((index.parse().ok()?, term.parse().ok()?))
}

/// The snapshot file in `dir` with the highest index (then term), opened, with its index,
/// term and length; None when there is none (or it cannot be opened). A guess made before
/// the store says which file it names: start-up decodes it while RocksDB opens, and uses
/// the result only if the store names this very file with this length.
pub(super) fn newest(dir: &Path) -> Option<(u64, u64, u64, File)> {
    let (index, term, path) = std::fs::read_dir(dir)
        .ok()?
        .flatten()
        .filter_map(|e| {
            let (i, t) = parse_name(e.file_name().to_str()?)?;
            Some((i, t, e.path()))
        })
        .max_by_key(|&(i, t, _)| (i, t))?;
    let file = File::open(path).ok()?;
    let len = file.metadata().ok()?.len();
    Some((index, term, len, file))
}

/// Syncs a directory (its entries: a rename or a creation in it).
pub(super) fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// A snapshot being written. Dropped without [`Self::finish`], it deletes what it wrote.
pub struct SnapshotSink {
    file: File,
    tmp: PathBuf,
    path: PathBuf,
    written: u64,
    /// Where the bytes not yet handed to writeback begin.
    started: u64,
    /// The range whose writeback was started last, to wait for at the next step.
    in_flight: Option<(u64, u64)>,
    done: bool,
}

impl SnapshotSink {
    /// Creates the temporary file of the snapshot at (`index`, `term`) in `dir`.
    pub(super) fn create(dir: &Path, index: u64, term: u64) -> io::Result<SnapshotSink> {
        let name = file_name(index, term);
        let path = dir.join(&name);
        let tmp = dir.join(format!("{name}.tmp"));
        let file = File::create(&tmp)?;
        Ok(SnapshotSink {
            file,
            tmp,
            path,
            written: 0,
            started: 0,
            in_flight: None,
            done: false,
        })
    }

    /// One step of paced writeback: wait for the range started last time and drop its
    /// pages, start the one written since. Failures are left to the final fsync, which
    /// reports any error that matters (some filesystems lack `sync_file_range`).
    fn pace(&mut self) {
        let fd = self.file.as_raw_fd();
        if let Some((from, len)) = self.in_flight.take() {
            let flags = libc::SYNC_FILE_RANGE_WAIT_BEFORE
                | libc::SYNC_FILE_RANGE_WRITE
                | libc::SYNC_FILE_RANGE_WAIT_AFTER;
            // SAFETY: plain system calls on a file descriptor this sink owns.
            unsafe {
                libc::sync_file_range(fd, from as i64, len as i64, flags);
                libc::posix_fadvise(fd, from as i64, len as i64, libc::POSIX_FADV_DONTNEED);
            }
        }
        let (from, len) = (self.started, self.written - self.started);
        // SAFETY: as above.
        unsafe {
            libc::sync_file_range(fd, from as i64, len as i64, libc::SYNC_FILE_RANGE_WRITE);
        }
        self.in_flight = Some((from, len));
        self.started = self.written;
    }

    /// Makes the file durable under its final name; its size.
    pub(super) fn finish(mut self) -> io::Result<u64> {
        self.file.flush()?;
        self.file.sync_all()?;
        std::fs::rename(&self.tmp, &self.path)?;
        self.done = true;
        if let Some(dir) = self.path.parent() {
            sync_dir(dir)?;
        }
        Ok(self.written)
    }
}

impl Write for SnapshotSink {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.file.write(buf)?;
        self.written += n as u64;
        if self.written - self.started >= PACE {
            self.pace();
        }
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

impl Drop for SnapshotSink {
    fn drop(&mut self) {
        if !self.done {
            if let Err(e) = std::fs::remove_file(&self.tmp) {
                tracing::warn!("cannot remove {}: {e}", self.tmp.display());
            }
        }
    }
}

/// Deletes every file in `dir` but `keep` (older snapshots, temporary files of snapshots
/// never finished). Failures are logged: a leftover file costs space, not correctness.
pub(super) fn remove_others(dir: &Path, keep: Option<&str>) {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) => {
            tracing::warn!("cannot list {}: {e}", dir.display());
            return;
        }
    };
    for e in entries.flatten() {
        if keep.is_some_and(|k| e.file_name().to_str() == Some(k)) {
            continue;
        }
        if let Err(err) = std::fs::remove_file(e.path()) {
            tracing::warn!("cannot remove {}: {err}", e.path().display());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_newest_snapshot_file_is_found_by_its_name() {
        let dir = tempfile::tempdir().unwrap();
        assert!(newest(dir.path()).is_none(), "none in an empty directory");
        assert_eq!(parse_name(&file_name(12, 3)), Some((12, 3)));
        assert_eq!(parse_name(&format!("{}.tmp", file_name(12, 3))), None);
        assert_eq!(parse_name("x-1.snap"), None);
        std::fs::write(dir.path().join(file_name(9, 2)), b"nine").unwrap();
        std::fs::write(dir.path().join(file_name(10, 1)), b"ten!!").unwrap();
        // A temporary file (a snapshot still being written) is never the guess.
        std::fs::write(dir.path().join(format!("{}.tmp", file_name(11, 2))), b"t").unwrap();
        let (index, term, len, _) = newest(dir.path()).unwrap();
        assert_eq!((index, term, len), (10, 1, 5));
    }
}
