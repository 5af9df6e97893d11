//! The FUSE side: a passthrough to the backing directory that tells the model about every
//! write, truncation, fsync and directory change before it happens.
//!
//! FUSE inode numbers are the backing inode numbers (the root is 1), each mapped to one
//! current path; open files are backing file handles. One thread serves the mount (fuser's
//! session loop), so the shared state's lock is only ever contended by the controller,
//! which takes it while the disk is unmounted.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, UNIX_EPOCH};

use fuser::{
    FileAttr, FileType, Filesystem, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory, ReplyEmpty,
    ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite, Request, TimeOrNow,
};

use super::model::Model;

/// How long the kernel may cache names and attributes (everything goes through us).
const TTL: Duration = Duration::from_secs(1);

/// What the mount and its controller share.
pub(crate) struct Shared {
    pub(crate) model: Model,
    /// The backing tree.
    pub(crate) root: PathBuf,
    /// Links to unlinked inodes a durable directory entry still names.
    pub(crate) grave: PathBuf,
    /// FUSE inode -> a current path under `root`.
    paths: HashMap<u64, PathBuf>,
    /// Open files: handle -> (backing inode, file).
    handles: HashMap<u64, (u64, File)>,
    next_fh: u64,
}

impl Shared {
    pub(crate) fn new(model: Model, root: PathBuf, grave: PathBuf) -> Shared {
        Shared {
            model,
            root,
            grave,
            paths: HashMap::new(),
            handles: HashMap::new(),
            next_fh: 1,
        }
    }

    /// Forgets the inodes and handles of an earlier mount.
    pub(crate) fn reset(&mut self) {
        self.paths.clear();
        self.paths.insert(fuser::FUSE_ROOT_ID, self.root.clone());
        self.handles.clear();
    }

    fn path(&self, ino: u64) -> Result<PathBuf, i32> {
        self.paths.get(&ino).cloned().ok_or(libc::ENOENT)
    }

    fn child(&self, parent: u64, name: &OsStr) -> Result<PathBuf, i32> {
        Ok(self.path(parent)?.join(name))
    }

    /// The backing inode of a FUSE inode (they differ for the root only).
    fn backing_ino(&self, ino: u64) -> Result<u64, i32> {
        if ino == fuser::FUSE_ROOT_ID {
            Ok(std::fs::metadata(&self.root).map_err(errno)?.ino())
        } else {
            Ok(ino)
        }
    }

    /// Attributes of `path`, registering it as the inode's current path.
    fn attr(&mut self, path: &Path) -> Result<FileAttr, i32> {
        let md = std::fs::symlink_metadata(path).map_err(errno)?;
        let ino = if path == self.root {
            fuser::FUSE_ROOT_ID
        } else {
            md.ino()
        };
        self.paths.insert(ino, path.to_path_buf());
        let kind = if md.is_dir() {
            FileType::Directory
        } else if md.file_type().is_symlink() {
            FileType::Symlink
        } else {
            FileType::RegularFile
        };
        let time = |s: i64, ns: i64| UNIX_EPOCH + Duration::new(s.max(0) as u64, ns as u32);
        Ok(FileAttr {
            ino,
            size: md.size(),
            blocks: md.blocks(),
            atime: time(md.atime(), md.atime_nsec()),
            mtime: time(md.mtime(), md.mtime_nsec()),
            ctime: time(md.ctime(), md.ctime_nsec()),
            crtime: time(md.ctime(), md.ctime_nsec()),
            kind,
            perm: (md.mode() & 0o7777) as u16,
            nlink: md.nlink() as u32,
            uid: md.uid(),
            gid: md.gid(),
            rdev: md.rdev() as u32,
            blksize: md.blksize() as u32,
            flags: 0,
        })
    }

    /// Keeps a link to a file about to lose a name, if a crash may need to bring it back.
    fn bury(&mut self, path: &Path) -> Result<(), i32> {
        let Ok(md) = std::fs::symlink_metadata(path) else {
            return Ok(());
        };
        if md.is_dir() || !self.model.durably_linked(md.ino()) {
            return Ok(());
        }
        let grave = self.grave.join(md.ino().to_string());
        if !grave.exists() {
            std::fs::hard_link(path, &grave).map_err(errno)?;
        }
        Ok(())
    }

    /// Removes the grave's links to inodes no durable entry names any more.
    fn lay_to_rest(&mut self) {
        let Ok(entries) = std::fs::read_dir(&self.grave) else {
            return;
        };
        for e in entries.flatten() {
            let ino = e.file_name().to_str().and_then(|n| n.parse().ok());
            if ino.is_some_and(|ino| !self.model.durably_linked(ino)) {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }

    fn parent_ino(&self, parent: u64) -> Result<u64, i32> {
        self.backing_ino(parent)
    }

    /// Renames `from` to `to`: every path at or under `from` moves.
    fn moved(&mut self, from: &Path, to: &Path) {
        for p in self.paths.values_mut() {
            if let Ok(rest) = p.strip_prefix(from) {
                *p = if rest.as_os_str().is_empty() {
                    to.to_path_buf()
                } else {
                    to.join(rest)
                };
            }
        }
    }

    fn open_fh(&mut self, file: File) -> Result<u64, i32> {
        let ino = file.metadata().map_err(errno)?.ino();
        let fh = self.next_fh;
        self.next_fh += 1;
        self.handles.insert(fh, (ino, file));
        Ok(fh)
    }
}

/// Answers an operation that returns nothing but its success.
fn empty(reply: ReplyEmpty, r: Result<(), i32>) {
    match r {
        Ok(()) => reply.ok(),
        Err(e) => reply.error(e),
    }
}

/// Answers an operation that names an entry.
fn entry(reply: ReplyEntry, r: Result<FileAttr, i32>) {
    match r {
        Ok(a) => reply.entry(&TTL, &a, 0),
        Err(e) => reply.error(e),
    }
}

fn errno(e: io::Error) -> i32 {
    e.raw_os_error().unwrap_or(libc::EIO)
}

/// The filesystem fuser serves.
pub(crate) struct LossyFs(pub(crate) Arc<Mutex<Shared>>);

impl LossyFs {
    fn lock(&self) -> MutexGuard<'_, Shared> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Backing open options for FUSE open flags: read and write as asked (always readable, so
/// that overwritten bytes can be saved), never append (the kernel gives every write its
/// offset) and never truncate (the kernel truncates with a setattr first).
fn options(flags: i32) -> OpenOptions {
    let mut o = OpenOptions::new();
    o.read(true);
    if flags & libc::O_ACCMODE != libc::O_RDONLY {
        o.write(true);
    }
    o.custom_flags(
        flags
            & !(libc::O_ACCMODE
                | libc::O_APPEND
                | libc::O_TRUNC
                | libc::O_CREAT
                | libc::O_EXCL
                | libc::O_DIRECT),
    );
    o
}

impl Filesystem for LossyFs {
    fn lookup(&mut self, _req: &Request<'_>, parent: u64, name: &OsStr, reply: ReplyEntry) {
        let mut s = self.lock();
        match s.child(parent, name).and_then(|p| s.attr(&p)) {
            Ok(a) => reply.entry(&TTL, &a, 0),
            Err(e) => reply.error(e),
        }
    }

    fn getattr(&mut self, _req: &Request<'_>, ino: u64, _fh: Option<u64>, reply: ReplyAttr) {
        let mut s = self.lock();
        match s.path(ino).and_then(|p| s.attr(&p)) {
            Ok(a) => reply.attr(&TTL, &a),
            Err(e) => reply.error(e),
        }
    }

    fn setattr(
        &mut self,
        _req: &Request<'_>,
        ino: u64,
        mode: Option<u32>,
        _uid: Option<u32>,
        _gid: Option<u32>,
        size: Option<u64>,
        _atime: Option<TimeOrNow>,
        _mtime: Option<TimeOrNow>,
        _ctime: Option<std::time::SystemTime>,
        fh: Option<u64>,
        _crtime: Option<std::time::SystemTime>,
        _chgtime: Option<std::time::SystemTime>,
        _bkuptime: Option<std::time::SystemTime>,
        _flags: Option<u32>,
        reply: ReplyAttr,
    ) {
        let mut s = self.lock();
        let r = (|| {
            let path = s.path(ino)?;
            if let Some(mode) = mode {
                std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode))
                    .map_err(errno)?;
            }
            if let Some(len) = size {
                let file = match fh.and_then(|fh| s.handles.get(&fh)) {
                    Some((_, f)) => f.try_clone().map_err(errno)?,
                    None => OpenOptions::new()
                        .read(true)
                        .write(true)
                        .open(&path)
                        .map_err(errno)?,
                };
                let bino = file.metadata().map_err(errno)?.ino();
                s.model.truncate(bino, &file, len).map_err(errno)?;
                file.set_len(len).map_err(errno)?;
            }
            s.attr(&path)
        })();
        match r {
            Ok(a) => reply.attr(&TTL, &a),
            Err(e) => reply.error(e),
        }
    }

    fn mkdir(
        &mut self,
        _req: &Request<'_>,
        parent: u64,
        name: &OsStr,
        mode: u32,
        umask: u32,
        reply: ReplyEntry,
    ) {
        let mut s = self.lock();
        let r = (|| {
            let path = s.child(parent, name)?;
            std::fs::create_dir(&path).map_err(errno)?;
            let _ = std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode & !umask));
            let a = s.attr(&path)?;
            let p = s.parent_ino(parent)?;
            s.model.made_dir(p, a.ino);
            Ok(a)
        })();
        entry(reply, r)
    }

    fn unlink(&mut self, _req: &Request<'_>, parent: u64, name: &OsStr, reply: ReplyEmpty) {
        let mut s = self.lock();
        let r = (|| {
            let path = s.child(parent, name)?;
            s.bury(&path)?;
            std::fs::remove_file(&path).map_err(errno)?;
            s.paths.retain(|_, p| *p != path);
            let p = s.parent_ino(parent)?;
            s.model.entry_changed(p);
            Ok(())
        })();
        empty(reply, r)
    }

    fn rmdir(&mut self, _req: &Request<'_>, parent: u64, name: &OsStr, reply: ReplyEmpty) {
        let mut s = self.lock();
        let r = (|| {
            let path = s.child(parent, name)?;
            std::fs::remove_dir(&path).map_err(errno)?;
            s.paths.retain(|_, p| *p != path);
            let p = s.parent_ino(parent)?;
            s.model.entry_changed(p);
            Ok(())
        })();
        empty(reply, r)
    }

    fn rename(
        &mut self,
        _req: &Request<'_>,
        parent: u64,
        name: &OsStr,
        newparent: u64,
        newname: &OsStr,
        flags: u32,
        reply: ReplyEmpty,
    ) {
        if flags != 0 {
            return reply.error(libc::EINVAL);
        }
        let mut s = self.lock();
        let r = (|| {
            let from = s.child(parent, name)?;
            let to = s.child(newparent, newname)?;
            s.bury(&to)?;
            std::fs::rename(&from, &to).map_err(errno)?;
            s.paths.retain(|_, p| *p != to);
            s.moved(&from, &to);
            let (a, b) = (s.parent_ino(parent)?, s.parent_ino(newparent)?);
            s.model.entry_changed(a);
            s.model.entry_changed(b);
            Ok(())
        })();
        empty(reply, r)
    }

    fn link(
        &mut self,
        _req: &Request<'_>,
        ino: u64,
        newparent: u64,
        newname: &OsStr,
        reply: ReplyEntry,
    ) {
        let mut s = self.lock();
        let r = (|| {
            let from = s.path(ino)?;
            let to = s.child(newparent, newname)?;
            std::fs::hard_link(&from, &to).map_err(errno)?;
            let p = s.parent_ino(newparent)?;
            s.model.entry_changed(p);
            s.attr(&to)
        })();
        entry(reply, r)
    }

    fn open(&mut self, _req: &Request<'_>, ino: u64, flags: i32, reply: ReplyOpen) {
        let mut s = self.lock();
        let r = s
            .path(ino)
            .and_then(|p| options(flags).open(p).map_err(errno))
            .and_then(|f| s.open_fh(f));
        match r {
            Ok(fh) => reply.opened(fh, 0),
            Err(e) => reply.error(e),
        }
    }

    fn create(
        &mut self,
        _req: &Request<'_>,
        parent: u64,
        name: &OsStr,
        mode: u32,
        umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        let mut s = self.lock();
        let r = (|| {
            let path = s.child(parent, name)?;
            let mut o = options(flags);
            o.write(true).mode(mode & !umask);
            if flags & libc::O_EXCL != 0 {
                o.create_new(true);
            } else {
                o.create(true);
            }
            let existed = path.exists();
            let file = o.open(&path).map_err(errno)?;
            let a = s.attr(&path)?;
            if !existed {
                let p = s.parent_ino(parent)?;
                s.model.created(p, a.ino);
            }
            let fh = s.open_fh(file)?;
            Ok((a, fh))
        })();
        match r {
            Ok((a, fh)) => reply.created(&TTL, &a, 0, fh, 0),
            Err(e) => reply.error(e),
        }
    }

    fn read(
        &mut self,
        _req: &Request<'_>,
        _ino: u64,
        fh: u64,
        offset: i64,
        size: u32,
        _flags: i32,
        _lock_owner: Option<u64>,
        reply: ReplyData,
    ) {
        let s = self.lock();
        let Some((_, file)) = s.handles.get(&fh) else {
            return reply.error(libc::EBADF);
        };
        let mut buf = vec![0; size as usize];
        let mut done = 0;
        while done < buf.len() {
            match file.read_at(&mut buf[done..], offset as u64 + done as u64) {
                Ok(0) => break,
                Ok(n) => done += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return reply.error(errno(e)),
            }
        }
        reply.data(&buf[..done]);
    }

    fn write(
        &mut self,
        _req: &Request<'_>,
        _ino: u64,
        fh: u64,
        offset: i64,
        data: &[u8],
        _write_flags: u32,
        _flags: i32,
        _lock_owner: Option<u64>,
        reply: ReplyWrite,
    ) {
        let mut s = self.lock();
        let s = &mut *s;
        let Some((bino, file)) = s.handles.get(&fh) else {
            return reply.error(libc::EBADF);
        };
        let r = s
            .model
            .write(*bino, file, offset as u64, data)
            .and_then(|()| file.write_all_at(data, offset as u64));
        match r {
            Ok(()) => reply.written(data.len() as u32),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn release(
        &mut self,
        _req: &Request<'_>,
        _ino: u64,
        fh: u64,
        _flags: i32,
        _lock_owner: Option<u64>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        self.lock().handles.remove(&fh);
        reply.ok();
    }

    fn flush(&mut self, _req: &Request<'_>, _ino: u64, _fh: u64, _lo: u64, reply: ReplyEmpty) {
        // close(2) is not a sync.
        reply.ok();
    }

    fn fsync(&mut self, _req: &Request<'_>, _ino: u64, fh: u64, _data: bool, reply: ReplyEmpty) {
        let mut s = self.lock();
        let Some((bino, _)) = s.handles.get(&fh) else {
            return reply.error(libc::EBADF);
        };
        let bino = *bino;
        s.model.sync_file(bino);
        reply.ok();
    }

    fn readdir(
        &mut self,
        _req: &Request<'_>,
        ino: u64,
        _fh: u64,
        offset: i64,
        mut reply: ReplyDirectory,
    ) {
        let s = self.lock();
        let path = match s.path(ino) {
            Ok(p) => p,
            Err(e) => return reply.error(e),
        };
        let entries = match std::fs::read_dir(&path) {
            Ok(rd) => rd,
            Err(e) => return reply.error(errno(e)),
        };
        let mut all: Vec<(u64, FileType, std::ffi::OsString)> = vec![
            (ino, FileType::Directory, ".".into()),
            (ino, FileType::Directory, "..".into()),
        ];
        for e in entries.flatten() {
            let kind = match e.file_type() {
                Ok(t) if t.is_dir() => FileType::Directory,
                Ok(t) if t.is_symlink() => FileType::Symlink,
                _ => FileType::RegularFile,
            };
            let ino = e.metadata().map(|m| m.ino()).unwrap_or(0);
            all.push((ino, kind, e.file_name()));
        }
        for (i, (ino, kind, name)) in all.into_iter().enumerate().skip(offset.max(0) as usize) {
            if reply.add(ino, i as i64 + 1, kind, name) {
                break;
            }
        }
        reply.ok();
    }

    fn fsyncdir(&mut self, _req: &Request<'_>, ino: u64, _fh: u64, _d: bool, reply: ReplyEmpty) {
        let mut s = self.lock();
        let r = (|| {
            let path = s.path(ino)?;
            let bino = s.backing_ino(ino)?;
            s.model.sync_dir(bino, &path).map_err(errno)?;
            s.lay_to_rest();
            Ok(())
        })();
        empty(reply, r)
    }

    fn statfs(&mut self, _req: &Request<'_>, _ino: u64, reply: ReplyStatfs) {
        let root = self.lock().root.clone();
        let Ok(c) = std::ffi::CString::new(root.as_os_str().as_encoded_bytes()) else {
            return reply.error(libc::EINVAL);
        };
        // SAFETY: statvfs is plain integers, for which all zeroes is a valid value.
        let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
        // SAFETY: statvfs fills the struct we own from a NUL-terminated path.
        if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
            return reply.error(libc::EIO);
        }
        reply.statfs(
            st.f_blocks,
            st.f_bfree,
            st.f_bavail,
            st.f_files,
            st.f_ffree,
            st.f_bsize as u32,
            st.f_namemax as u32,
            st.f_frsize as u32,
        );
    }
}
