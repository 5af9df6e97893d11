//! A filesystem that loses what was not fsynced: the power loss `kill -9` cannot show.
//!
//! A SIGKILL leaves the kernel's page cache alone, so a server that acknowledges a write
//! before its fsync passes every kill -9 test. [`LossyDisk`] mounts a FUSE passthrough
//! (the `fuser` crate, served by a thread of the test process) over a backing directory
//! and remembers every write, truncation and directory change not yet covered by an fsync
//! of the file (for contents) or of its directory (for creates, links, renames and
//! unlinks). [`LossyDisk::power_loss`] then drops all of it, as a disk whose power went
//! out would, optionally tearing the last unsynced write at a random byte and optionally
//! keeping a random subset of the unsynced writes (a disk that reorders them), seeded, and
//! mounts the disk again. Until then reads see everything written (the page cache view).
//!
//! The processes using the mount must be gone (kill -9 them) before a power loss: it
//! unmounts the disk. Dropping a `LossyDisk` unmounts it; a mount left by a test process
//! that died without unmounting (its FUSE connection broken) is swept away by the next
//! [`LossyDisk::mount`], so a stale mount point never breaks the next run. Mounting needs
//! root (the mount(2) call; without it fuser falls back to Debian's `fusermount3`).

mod fs;
mod model;

use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

pub use model::{Counts, Crash, CrashReport};

use fs::{LossyFs, Shared};
use model::Model;

/// The source name of our mounts in /proc/mounts.
const FS_NAME: &str = "lossyfs";

/// See the module docs.
pub struct LossyDisk {
    mountpoint: PathBuf,
    disk: PathBuf,
    shared: Arc<Mutex<Shared>>,
    server: Option<JoinHandle<io::Result<()>>>,
}

impl LossyDisk {
    /// Mounts a lossy disk at `mountpoint` (an existing, empty directory), backed by the
    /// directory `disk` (created if missing; its `root` holds the files). Whatever `root`
    /// already holds is durable.
    pub fn mount(disk: &Path, mountpoint: &Path) -> io::Result<LossyDisk> {
        sweep_stale_mounts();
        let root = disk.join("root");
        let grave = disk.join("grave");
        for d in [&root, &grave, &disk.join("scratch")] {
            std::fs::create_dir_all(d)?;
        }
        let model = Model::scan(&root)?;
        let mut d = LossyDisk {
            mountpoint: mountpoint.to_path_buf(),
            disk: disk.to_path_buf(),
            shared: Arc::new(Mutex::new(Shared::new(model, root, grave))),
            server: None,
        };
        d.serve()?;
        Ok(d)
    }

    fn serve(&mut self) -> io::Result<()> {
        self.lock().reset();
        let fs = LossyFs(self.shared.clone());
        let options = [
            fuser::MountOption::FSName(FS_NAME.into()),
            fuser::MountOption::RW,
            fuser::MountOption::Exec,
        ];
        let mut session = fuser::Session::new(fs, &self.mountpoint, &options)?;
        let server = std::thread::Builder::new()
            .name("lossyfs".into())
            .spawn(move || session.run())?;
        self.server = Some(server);
        Ok(())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Shared> {
        self.shared.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Where the disk is mounted.
    pub fn mountpoint(&self) -> &Path {
        &self.mountpoint
    }

    /// Counters since the disk was mounted.
    pub fn counts(&self) -> Counts {
        self.lock().model.counts.clone()
    }

    /// (operations, bytes) written and not yet synced: what a power loss now would drop.
    pub fn unsynced(&self) -> (u64, u64) {
        self.lock().model.unsynced()
    }

    /// The power goes out: unmounts the disk (every process using it must be gone), drops
    /// what was not synced (see [`Crash`]), and mounts it again.
    pub fn power_loss(&mut self, how: Crash) -> io::Result<CrashReport> {
        self.unmount()?;
        let report = {
            let mut s = self.lock();
            let (root, grave) = (s.root.clone(), s.grave.clone());
            s.model
                .crash(&root, &grave, &self.disk.join("scratch"), how)?
        };
        self.serve()?;
        Ok(report)
    }

    fn unmount(&mut self) -> io::Result<()> {
        let Some(server) = self.server.take() else {
            return Ok(());
        };
        // The kernel may still be releasing the files of a process just killed.
        let mut result = umount(&self.mountpoint, 0);
        for _ in 0..100 {
            match &result {
                Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
                    std::thread::sleep(Duration::from_millis(50));
                    result = umount(&self.mountpoint, 0);
                }
                _ => break,
            }
        }
        if result.is_err() {
            result = umount(&self.mountpoint, libc::MNT_DETACH);
        }
        result?;
        // The unmount aborts the FUSE connection. If it does so while the kernel hands our
        // thread a request, the thread's read of /dev/fuse fails with ECONNABORTED where it
        // would otherwise see ENODEV (fuser's clean end): both mean the disk is unmounted.
        match server.join() {
            Ok(Err(e)) if e.raw_os_error() == Some(libc::ECONNABORTED) => Ok(()),
            Ok(r) => r,
            Err(_) => Err(io::Error::other("the lossyfs thread panicked")),
        }
    }
}

impl Drop for LossyDisk {
    fn drop(&mut self) {
        if let Err(e) = self.unmount() {
            eprintln!("lossyfs: unmounting {}: {e}", self.mountpoint.display());
        }
    }
}

fn umount(path: &Path, flags: libc::c_int) -> io::Result<()> {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes())
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    // SAFETY: umount2 reads a NUL-terminated path we own.
    if unsafe { libc::umount2(c.as_ptr(), flags) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Held while stale mounts are swept, so that a test that leaves a stale mount on purpose
/// can look at it before another test's mount sweeps it away.
static SWEEPING: Mutex<()> = Mutex::new(());

/// Lazily unmounts every lossyfs mount whose server is gone (its FUSE connection answers
/// ENOTCONN): what a test process killed before its drops ran leaves behind.
pub fn sweep_stale_mounts() {
    let _sweeping = SWEEPING.lock().unwrap_or_else(|e| e.into_inner());
    sweep_unlocked();
}

fn sweep_unlocked() {
    let Ok(mounts) = std::fs::read_to_string("/proc/mounts") else {
        return;
    };
    for line in mounts.lines() {
        let mut f = line.split(' ');
        let (Some(source), Some(point)) = (f.next(), f.next()) else {
            continue;
        };
        if source != FS_NAME {
            continue;
        }
        let point = PathBuf::from(point.replace("\\040", " "));
        // Opening the directory reaches the daemon; a stat of the root may be answered from
        // the kernel's attribute cache even when the daemon is dead.
        if let Err(e) = std::fs::read_dir(&point) {
            if e.raw_os_error() == Some(libc::ENOTCONN) {
                let _ = umount(&point, libc::MNT_DETACH);
            }
        }
    }
}

#[cfg(test)]
mod tests;
