//! Disk and clock faults for the end-to-end tests (`tests/disk/disk_faults.rs`,
//! `tests/disk/clock_jumps.rs`).
//!
//! - [`fill`] takes a disk's free space away (a member's data directory on a small tmpfs,
//!   [`TestServerBuilder::tmpfs_data`](crate::TestServerBuilder::tmpfs_data)) and
//!   [`Filler::release`] gives it back.
//! - [`fault_shim`](crate::fault_shim) (beside the binary it goes with): the
//!   workspace's `zooraft-faultshim` library, for `LD_PRELOAD`: while a trigger file
//!   exists, `fsync`/`fdatasync` fail with EIO in that process.
//! - [`flip_bytes`]: seeded byte flips in a stopped member's store files; [`flip_live_table`]
//!   and [`tear_snapshot`]: damage under a running member.
//! - [`FakeClock`]: Debian's libfaketime on one process, its wall clock stepped at run time
//!   through a timestamp file (the monotonic clock left alone).

use std::path::{Path, PathBuf};
use std::process::Command;

/// Free bytes on the filesystem holding `dir` (`df`).
pub fn free_bytes(dir: &Path) -> u64 {
    let out = Command::new("df")
        .args(["--output=avail", "-B1"])
        .arg(dir)
        .output()
        .expect("run df");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .nth(1)
        .and_then(|l| l.trim().parse().ok())
        .expect("df prints the available bytes")
}

/// A file taking up space; see [`fill`].
pub struct Filler {
    path: PathBuf,
}

impl Filler {
    /// Deletes the file: the space returns.
    pub fn release(self) {
        std::fs::remove_file(&self.path).expect("remove filler");
    }
}

/// Writes a file into `dir` until about `leave` bytes stay free.
pub fn fill(dir: &Path, leave: u64) -> Filler {
    use std::io::Write;
    let path = dir.join("filler");
    let free = free_bytes(dir);
    let mut f = std::fs::File::create(&path).expect("create filler");
    let chunk = vec![0x5au8; 1 << 20];
    let mut left = free.saturating_sub(leave);
    while left > 0 {
        let n = left.min(chunk.len() as u64) as usize;
        f.write_all(&chunk[..n]).expect("write filler");
        left -= n as u64;
    }
    f.sync_all().expect("sync filler");
    Filler { path }
}

/// A small deterministic generator (splitmix64) for seeded fault positions.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
}

/// Every file under `dir`, recursively, sorted.
pub fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// The store files of a data directory that hold data (RocksDB's tables, write-ahead logs,
/// manifests, `CURRENT`, and snapshot files), sorted, recursively.
pub fn store_files(dir: &Path) -> Vec<PathBuf> {
    files_under(dir)
        .into_iter()
        .filter(|p| {
            let name = p
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let data = name.ends_with(".sst")
                || name.ends_with(".snap")
                || name.ends_with(".log")
                || name.starts_with("MANIFEST-")
                || name == "CURRENT";
            data && std::fs::metadata(p).is_ok_and(|m| m.len() > 0)
        })
        .collect()
}

/// Flips one bit in each of `count` bytes of one store file of `dir` chosen by `rng`;
/// returns the file and the positions.
pub fn flip_bytes(dir: &Path, rng: &mut Rng, count: usize) -> (PathBuf, Vec<u64>) {
    let files = store_files(dir);
    assert!(!files.is_empty(), "no store files under {}", dir.display());
    let file = files[rng.below(files.len() as u64) as usize].clone();
    let mut bytes = std::fs::read(&file).expect("read store file");
    let mut positions = Vec::with_capacity(count);
    for _ in 0..count {
        let pos = rng.below(bytes.len() as u64);
        bytes[pos as usize] ^= 1 << rng.below(8);
        positions.push(pos);
    }
    std::fs::write(&file, &bytes).expect("write store file");
    (file, positions)
}

/// Flips one bit of a table file of a running member's store, in place, in its data
/// blocks: the first half of the file, and not its last 4 KiB (a table keeps its index,
/// properties and footer at the end, about 1 KiB in a small table; RocksDB checks those
/// when it opens the table, and a running member holds them in memory). The table is one
/// of the largest under `dir`, chosen by `rng`; None when the store has no table file of
/// at least 6 KiB.
pub fn flip_live_table(dir: &Path, rng: &mut Rng) -> Option<(PathBuf, u64)> {
    use std::os::unix::fs::FileExt;
    let mut tables: Vec<(u64, PathBuf)> = files_under(dir)
        .into_iter()
        .filter(|p| p.extension().is_some_and(|x| x == "sst"))
        .filter_map(|p| Some((std::fs::metadata(&p).ok()?.len(), p)))
        .filter(|(len, _)| *len >= 6 << 10)
        .collect();
    if tables.is_empty() {
        return None;
    }
    tables.sort();
    let keep = tables.len().div_ceil(2);
    let (len, file) = tables
        .split_off(tables.len() - keep)
        .into_iter()
        .nth(rng.below(keep as u64) as usize)?;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&file)
        .ok()?;
    let pos = rng.below((len / 2).min(len - (4 << 10)));
    let mut b = [0u8; 1];
    f.read_exact_at(&mut b, pos).ok()?;
    b[0] ^= 1 << rng.below(8);
    f.write_all_at(&b, pos).ok()?;
    Some((file, pos))
}

/// Tears the newest snapshot file under `dir` (`*.snap`): cut at a random length, as a
/// torn write leaves it. The file and its new length; None when there is none.
pub fn tear_snapshot(dir: &Path, rng: &mut Rng) -> Option<(PathBuf, u64)> {
    let snap = files_under(dir)
        .into_iter()
        .filter(|p| p.extension().is_some_and(|x| x == "snap"))
        .max_by_key(|p| p.file_name().map(|n| n.to_os_string()))?;
    let len = std::fs::metadata(&snap).ok()?.len();
    let cut = rng.below(len.max(1));
    let f = std::fs::OpenOptions::new().write(true).open(&snap).ok()?;
    f.set_len(cut).ok()?;
    Some((snap, cut))
}

/// Copies a directory tree (files and directories only): a stopped member's store, a
/// ZooKeeper data directory to import while ZooKeeper goes on with the original.
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("create directory");
    for e in std::fs::read_dir(from).expect("read directory").flatten() {
        let target = to.join(e.file_name());
        if e.path().is_dir() {
            copy_dir(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), &target).expect("copy file");
        }
    }
}

/// Debian's libfaketime (multi-threaded build).
pub const LIBFAKETIME: &str = "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1";

/// One process's wall clock, offset at run time: pass [`env`](Self::env) to the process,
/// then [`step`](Self::step) it. Monotonic clocks stay real.
pub struct FakeClock {
    dir: tempfile::TempDir,
}

impl Default for FakeClock {
    fn default() -> Self {
        Self::new()
    }
}

impl FakeClock {
    pub fn new() -> FakeClock {
        assert!(
            Path::new(LIBFAKETIME).exists(),
            "{LIBFAKETIME} is missing: install Debian's `faketime` package"
        );
        let clock = FakeClock {
            dir: tempfile::tempdir().expect("temporary directory"),
        };
        clock.step(0);
        clock
    }

    fn file(&self) -> PathBuf {
        self.dir.path().join("faketime")
    }

    /// The environment a process needs to run on this clock.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("LD_PRELOAD", LIBFAKETIME.to_string()),
            ("FAKETIME_TIMESTAMP_FILE", self.file().display().to_string()),
            ("FAKETIME_NO_CACHE", "1".to_string()),
            ("FAKETIME_DONT_FAKE_MONOTONIC", "1".to_string()),
        ]
    }

    /// Sets the wall clock to real time plus `offset_secs` (negative: behind).
    pub fn step(&self, offset_secs: i64) {
        let tmp = self.dir.path().join("faketime.tmp");
        std::fs::write(&tmp, format!("{offset_secs:+}\n")).expect("write faketime file");
        std::fs::rename(&tmp, self.file()).expect("rename faketime file");
    }
}
