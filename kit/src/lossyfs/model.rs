//! What a power loss takes away, and the power loss itself.
//!
//! The backing directory always holds what the processes above the mount see (the page
//! cache view): every write goes straight through. Beside it the model remembers, per
//! backing inode, what the disk would hold if the power went now: the size at the last
//! fsync and the bytes that writes or truncations have since overwritten (saved a page at
//! a time, once per fsync epoch), plus the unsynced operations themselves, in order. Per
//! directory (by backing inode) it remembers the entries as of the last fsync of that
//! directory. A crash rolls every file back to its durable image (then re-applies a seeded
//! subset of the unsynced writes when asked to reorder, and a torn prefix of the last one
//! when asked to tear), and rebuilds the tree from the durable directory entries alone, so
//! a create, link, rename or unlink without a directory fsync is undone.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::ffi::OsString;
use std::fs::File;
use std::io;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};

/// The unit in which overwritten durable bytes are saved.
const PAGE: u64 = 4096;

/// One unsynced change to a file's contents.
#[derive(Debug, Clone)]
enum Op {
    Write { off: u64, data: Vec<u8> },
    Truncate { len: u64 },
}

/// A file with changes not yet covered by an fsync.
#[derive(Debug, Default)]
struct FileLoss {
    durable_len: u64,
    /// Page index -> the page's durable bytes (shorter than a page at the durable end).
    undo: BTreeMap<u64, Vec<u8>>,
    /// (global sequence number, change), oldest first.
    ops: Vec<(u64, Op)>,
}

impl FileLoss {
    /// Saves the durable bytes of `[from, to)` that are not saved yet, before they change.
    fn save(&mut self, file: &File, from: u64, to: u64) -> io::Result<()> {
        let to = to.min(self.durable_len);
        if from >= to {
            return Ok(());
        }
        for page in from / PAGE..=(to - 1) / PAGE {
            if self.undo.contains_key(&page) {
                continue;
            }
            let start = page * PAGE;
            let end = (start + PAGE).min(self.durable_len);
            let mut buf = vec![0; (end - start) as usize];
            file.read_exact_at(&mut buf, start)?;
            self.undo.insert(page, buf);
        }
        Ok(())
    }
}

/// What an entry of a directory is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    File,
    Dir,
}

/// How the power goes out.
#[derive(Debug, Clone, Copy, Default)]
pub struct Crash {
    /// Seeds the choices below.
    pub seed: u64,
    /// The last unsynced write reaches the disk in part: a random prefix of it.
    pub tear: bool,
    /// A random subset of the unsynced writes (across files) reaches the disk, as a disk
    /// that reorders writes would leave it.
    pub reorder: bool,
}

/// What a crash dropped and kept.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CrashReport {
    /// Unsynced writes (and truncations) that never reached the disk.
    pub dropped_ops: u64,
    pub dropped_bytes: u64,
    /// Unsynced writes that did (with `reorder`), whole.
    pub kept_ops: u64,
    /// The torn write: its length and how much of it reached the disk.
    pub torn: Option<(u64, u64)>,
    /// Directory entries that differed from their durable state and were rolled back.
    pub entries_rolled_back: u64,
}

/// Counters over the life of a mount (every crash included).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counts {
    pub writes: u64,
    pub fsyncs: u64,
    pub dir_fsyncs: u64,
    pub crashes: u64,
    pub dropped_ops: u64,
    pub dropped_bytes: u64,
}

/// See the module docs.
#[derive(Debug, Default)]
pub struct Model {
    files: HashMap<u64, FileLoss>,
    /// Directory inode -> its entries (name -> (inode, kind)) as of its last fsync.
    dirs: HashMap<u64, BTreeMap<OsString, (u64, Kind)>>,
    /// Directories whose entries changed since their last fsync.
    dirty_dirs: HashSet<u64>,
    seq: u64,
    pub counts: Counts,
}

/// splitmix64, for the crash's choices.
fn next(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The entries of directory `dir` now, by name.
fn list(dir: &Path) -> io::Result<BTreeMap<OsString, (u64, Kind)>> {
    let mut out = BTreeMap::new();
    for e in std::fs::read_dir(dir)? {
        let e = e?;
        let md = e.metadata()?;
        let kind = if md.is_dir() { Kind::Dir } else { Kind::File };
        out.insert(e.file_name(), (md.ino(), kind));
    }
    Ok(out)
}

impl Model {
    /// A model in which everything under `root` is durable (a freshly mounted disk).
    pub fn scan(root: &Path) -> io::Result<Model> {
        let mut m = Model::default();
        m.rescan(root)?;
        Ok(m)
    }

    fn rescan(&mut self, root: &Path) -> io::Result<()> {
        self.files.clear();
        self.dirs.clear();
        self.dirty_dirs.clear();
        let mut todo = vec![root.to_path_buf()];
        while let Some(dir) = todo.pop() {
            let entries = list(&dir)?;
            for (name, (_, kind)) in &entries {
                if *kind == Kind::Dir {
                    todo.push(dir.join(name));
                }
            }
            self.dirs.insert(std::fs::metadata(&dir)?.ino(), entries);
        }
        Ok(())
    }

    fn file(&mut self, ino: u64, file: &File) -> io::Result<&mut FileLoss> {
        Ok(match self.files.entry(ino) {
            std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::hash_map::Entry::Vacant(e) => e.insert(FileLoss {
                durable_len: file.metadata()?.len(),
                ..FileLoss::default()
            }),
        })
    }

    /// Before `data` is written at `off` to `file` (inode `ino`): remembers the write.
    pub fn write(&mut self, ino: u64, file: &File, off: u64, data: &[u8]) -> io::Result<()> {
        self.seq += 1;
        let seq = self.seq;
        self.counts.writes += 1;
        let f = self.file(ino, file)?;
        f.save(file, off, off + data.len() as u64)?;
        f.ops.push((
            seq,
            Op::Write {
                off,
                data: data.to_vec(),
            },
        ));
        Ok(())
    }

    /// Before `file` (inode `ino`) is truncated or extended to `len`.
    pub fn truncate(&mut self, ino: u64, file: &File, len: u64) -> io::Result<()> {
        self.seq += 1;
        let seq = self.seq;
        let f = self.file(ino, file)?;
        f.save(file, len, u64::MAX)?;
        f.ops.push((seq, Op::Truncate { len }));
        Ok(())
    }

    /// fsync or fdatasync of a file: everything written to it is durable.
    pub fn sync_file(&mut self, ino: u64) {
        self.counts.fsyncs += 1;
        self.files.remove(&ino);
    }

    /// A new file (inode numbers are reused: forget whatever an old one left).
    pub fn created(&mut self, parent: u64, ino: u64) {
        self.files.remove(&ino);
        self.dirty_dirs.insert(parent);
    }

    /// A new directory: durably empty (once its parent's entry for it is durable).
    pub fn made_dir(&mut self, parent: u64, ino: u64) {
        self.dirs.insert(ino, BTreeMap::new());
        self.dirty_dirs.insert(parent);
    }

    /// An entry of `parent` was added, removed or replaced.
    pub fn entry_changed(&mut self, parent: u64) {
        self.dirty_dirs.insert(parent);
    }

    /// fsync of directory `dir` (inode `ino`): its entries as they are now are durable.
    pub fn sync_dir(&mut self, ino: u64, dir: &Path) -> io::Result<()> {
        self.counts.dir_fsyncs += 1;
        let entries = list(dir)?;
        self.dirs.insert(ino, entries);
        self.dirty_dirs.remove(&ino);
        Ok(())
    }

    /// Whether some directory's durable entries name inode `ino` (so the inode must be kept
    /// for a crash to restore, even when every current link to it is gone).
    pub fn durably_linked(&self, ino: u64) -> bool {
        self.dirs
            .values()
            .any(|d| d.values().any(|(i, k)| *i == ino && *k == Kind::File))
    }

    /// Unsynced bytes and operations (for reports).
    pub fn unsynced(&self) -> (u64, u64) {
        let ops = self.files.values().map(|f| f.ops.len() as u64).sum();
        let bytes = self
            .files
            .values()
            .flat_map(|f| &f.ops)
            .map(|(_, op)| match op {
                Op::Write { data, .. } => data.len() as u64,
                Op::Truncate { .. } => 0,
            })
            .sum();
        (ops, bytes)
    }

    /// The power loss, on an unmounted disk: `root` is the backing tree, `grave` holds a
    /// link to every unlinked inode a durable entry may still name, `scratch` is free space
    /// on the same filesystem. Afterwards everything under `root` is durable again.
    pub fn crash(
        &mut self,
        root: &Path,
        grave: &Path,
        scratch: &Path,
        how: Crash,
    ) -> io::Result<CrashReport> {
        let mut rng = how.seed;
        let mut report = CrashReport::default();
        // Where each file inode can be found now.
        let mut found: HashMap<u64, PathBuf> = HashMap::new();
        let mut todo = vec![root.to_path_buf(), grave.to_path_buf()];
        while let Some(dir) = todo.pop() {
            for e in std::fs::read_dir(&dir)? {
                let e = e?;
                let md = std::fs::symlink_metadata(e.path())?;
                if md.is_dir() {
                    todo.push(e.path());
                } else {
                    found.entry(md.ino()).or_insert_with(|| e.path());
                }
            }
        }
        // Contents: roll back, keep a subset when reordering, tear the last write.
        let last = self
            .files
            .values()
            .flat_map(|f| f.ops.iter())
            .filter(|(_, op)| matches!(op, Op::Write { .. }))
            .map(|(seq, _)| *seq)
            .max();
        let mut inos: Vec<u64> = self.files.keys().copied().collect();
        inos.sort_unstable();
        for ino in inos {
            let f = &self.files[&ino];
            let Some(path) = found.get(&ino) else {
                continue;
            };
            let file = std::fs::OpenOptions::new().write(true).open(path)?;
            file.set_len(f.durable_len)?;
            for (page, bytes) in &f.undo {
                file.write_all_at(bytes, page * PAGE)?;
            }
            for (seq, op) in &f.ops {
                let keep = how.reorder && next(&mut rng).is_multiple_of(2);
                match op {
                    Op::Write { off, data } if how.tear && Some(*seq) == last => {
                        let part = next(&mut rng) % (data.len() as u64).max(1);
                        file.write_all_at(&data[..part as usize], *off)?;
                        report.torn = Some((data.len() as u64, part));
                        report.dropped_bytes += data.len() as u64 - part;
                    }
                    Op::Write { off, data } if keep => {
                        file.write_all_at(data, *off)?;
                        report.kept_ops += 1;
                    }
                    Op::Truncate { len } if keep => {
                        file.set_len(*len)?;
                        report.kept_ops += 1;
                    }
                    Op::Write { data, .. } => {
                        report.dropped_ops += 1;
                        report.dropped_bytes += data.len() as u64;
                    }
                    Op::Truncate { .. } => report.dropped_ops += 1,
                }
            }
        }
        // Names: rebuild the tree from the durable entries alone, then swap it in.
        let new = scratch.join("new");
        let old = scratch.join("old");
        for d in [&new, &old] {
            if d.exists() {
                std::fs::remove_dir_all(d)?;
            }
        }
        std::fs::create_dir(&new)?;
        let root_ino = std::fs::metadata(root)?.ino();
        let mut todo = vec![(root_ino, root.to_path_buf(), new.clone())];
        while let Some((ino, was, to)) = todo.pop() {
            let durable = self.dirs.get(&ino).cloned().unwrap_or_default();
            let now = list(&was).unwrap_or_default();
            report.entries_rolled_back += durable
                .iter()
                .filter(|(n, e)| now.get(*n) != Some(e))
                .count() as u64
                + now.keys().filter(|n| !durable.contains_key(*n)).count() as u64;
            for (name, (child, kind)) in durable {
                let target = to.join(&name);
                match kind {
                    Kind::Dir => {
                        std::fs::create_dir(&target)?;
                        todo.push((child, was.join(&name), target));
                    }
                    Kind::File => {
                        let Some(src) = found.get(&child) else {
                            return Err(io::Error::other(format!(
                                "durable entry {} names inode {child}, which is gone",
                                target.display()
                            )));
                        };
                        std::fs::hard_link(src, &target)?;
                    }
                }
            }
        }
        std::fs::rename(root, &old)?;
        std::fs::rename(&new, root)?;
        std::fs::remove_dir_all(&old)?;
        for e in std::fs::read_dir(grave)? {
            std::fs::remove_file(e?.path())?;
        }
        self.counts.crashes += 1;
        self.counts.dropped_ops += report.dropped_ops;
        self.counts.dropped_bytes += report.dropped_bytes;
        self.rescan(root)?;
        Ok(report)
    }
}
