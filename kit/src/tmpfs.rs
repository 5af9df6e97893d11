//! A small tmpfs as a server's data directory: a disk that fills up (the disk-full tests),
//! unmounted when dropped so that a failing test leaves no mount behind.

use std::path::{Path, PathBuf};
use std::process::Command;

/// A tmpfs mounted over a directory; unmounted on drop.
#[derive(Debug)]
pub struct TmpfsMount {
    path: PathBuf,
}

/// Why a tmpfs could not be mounted.
#[derive(Debug, thiserror::Error)]
#[error("mounting a tmpfs at {path} failed (it needs root): {message}")]
pub struct MountError {
    path: PathBuf,
    message: String,
}

impl TmpfsMount {
    /// Mounts a tmpfs of `bytes` at `path` (an existing, empty directory). Needs root.
    pub fn try_mount(path: &Path, bytes: u64) -> Result<TmpfsMount, MountError> {
        let failed = |message: String| MountError {
            path: path.to_path_buf(),
            message,
        };
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o"])
            .arg(format!("size={bytes}"))
            .arg("tmpfs")
            .arg(path)
            .output()
            .map_err(|e| failed(format!("cannot run mount: {e}")))?;
        if !out.status.success() {
            return Err(failed(
                String::from_utf8_lossy(&out.stderr).trim().to_string(),
            ));
        }
        Ok(TmpfsMount {
            path: path.to_path_buf(),
        })
    }

    /// [`try_mount`](Self::try_mount) for tests: panics with the reason.
    pub fn mount(path: &Path, bytes: u64) -> TmpfsMount {
        Self::try_mount(path, bytes).unwrap_or_else(|e| panic!("{e}"))
    }
}

impl Drop for TmpfsMount {
    fn drop(&mut self) {
        let ok = Command::new("umount")
            .arg(&self.path)
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            // Still busy (a process not reaped yet): detach it, the kernel frees it later.
            let _ = Command::new("umount").arg("-l").arg(&self.path).status();
        }
    }
}
