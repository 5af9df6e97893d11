//! The data directory's free-space reserve: how a full disk stops a member cleanly.
//!
//! A RocksDB write that fails for want of space (ENOSPC) leaves the database in a
//! background-error state in which every later write fails too, and rust-rocksdb 0.22 has
//! no `DB::resume`: the only ways back are a restart or reopening the database under the
//! Raft loop's feet. So the member never lets the write fail: before every log write (and
//! before storing a snapshot) the log writer checks the free space of the data directory
//! (`statvfs`, one system call per group commit), and when it is below the reserve
//! (`diskReserveMB`, 64 MiB unless set) it does not write. It waits, checking again every
//! [`RECHECK`], until space returns, then writes what gathered meanwhile, in order.
//!
//! Waiting is safe for Raft: nothing counts as persisted until written, so the member
//! acknowledges no append, casts no vote and applies nothing past what it had durable —
//! it just lags, as a slow disk would make it. A leader whose disk is full hands its role
//! to a caught-up follower (`driver.rs`), so the others keep committing. A snapshot from
//! the leader is installed only with room for it on top of the reserve (the follower
//! waits likewise), and one of our own is not stored without. The state is visible as
//! `zk_disk_full` / `zk_disk_free_bytes` in `mntr`, `isro` answering `ro`, and an error
//! in the log. A write that fails anyway (space taken by something else between
//! the check and the write, beyond the reserve) is still fail-stop, as any storage error.

use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::status::Status;

/// How often a member waiting for space checks again.
pub const RECHECK: Duration = Duration::from_millis(200);

/// Free bytes for an unprivileged writer on the filesystem holding `dir`.
pub fn free_bytes(dir: &Path) -> std::io::Result<u64> {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(dir.as_os_str().as_bytes())
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    let mut st = std::mem::MaybeUninit::<libc::statvfs>::zeroed();
    // SAFETY: `path` is a valid NUL-terminated string and `st` a buffer of the right type,
    // which statvfs fills in when it returns 0.
    let rc = unsafe { libc::statvfs(path.as_ptr(), st.as_mut_ptr()) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: statvfs returned 0, so it initialised the structure.
    let st = unsafe { st.assume_init() };
    Ok(st.f_bavail.saturating_mul(st.f_frsize))
}

/// Whether `dir` has at least `reserve + extra` bytes free (also recorded in `status`). A
/// failed check counts as room: the write then reports the real error.
pub fn has_room(dir: &Path, reserve: u64, extra: u64, status: &Status) -> bool {
    if reserve == 0 {
        return true;
    }
    match free_bytes(dir) {
        Ok(free) => {
            status.disk_free_bytes.store(free, Ordering::Relaxed);
            free >= reserve.saturating_add(extra)
        }
        Err(e) => {
            tracing::warn!("cannot read the free space of {}: {e}", dir.display());
            true
        }
    }
}

/// Blocks until `dir` has its reserve and `extra` bytes free; logs and flags the wait.
/// Returns false if `stop` says to give up (the member is shutting down).
pub fn wait_for_room(
    dir: &Path,
    reserve: u64,
    extra: u64,
    status: &Status,
    stop: impl Fn() -> bool,
) -> bool {
    if has_room(dir, reserve, extra, status) {
        return true;
    }
    status.disk_full.store(true, Ordering::Release);
    tracing::error!(
        "data directory {} is full: {} bytes free, below the reserve of {reserve} \
         (diskReserveMB); this member writes nothing and acknowledges no write until \
         space returns",
        dir.display(),
        status.disk_free_bytes.load(Ordering::Relaxed)
    );
    while !has_room(dir, reserve, extra, status) {
        if stop() {
            return false;
        }
        std::thread::sleep(RECHECK);
    }
    status.disk_full.store(false, Ordering::Release);
    tracing::warn!(
        "data directory {} has room again ({} bytes free); writing the log again",
        dir.display(),
        status.disk_free_bytes.load(Ordering::Relaxed)
    );
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_space_of_a_real_directory_and_an_absent_one() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert!(free_bytes(dir.path()).expect("statvfs") > 0);
        assert!(free_bytes(&dir.path().join("absent")).is_err());
        let status = Status::default();
        assert!(has_room(dir.path(), 1, 0, &status));
        assert!(!has_room(dir.path(), u64::MAX / 2, 0, &status));
        assert!(
            has_room(dir.path(), 0, u64::MAX, &status),
            "0 turns the check off"
        );
        assert!(!wait_for_room(dir.path(), u64::MAX / 2, 0, &status, || {
            true
        }));
        assert!(status.disk_full.load(Ordering::Relaxed));
    }
}
