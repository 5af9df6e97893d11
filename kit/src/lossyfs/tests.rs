//! The filesystem's semantics, through a real mount: what survives a power loss.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::Path;

use super::*;

fn disk() -> (tempfile::TempDir, LossyDisk) {
    let dir = tempfile::tempdir().expect("temp dir");
    let mnt = dir.path().join("mnt");
    std::fs::create_dir(&mnt).expect("mount point");
    let disk = LossyDisk::mount(&dir.path().join("disk"), &mnt).expect("mount lossyfs");
    (dir, disk)
}

fn sync_dir(p: &Path) {
    File::open(p)
        .expect("open dir")
        .sync_all()
        .expect("fsync dir");
}

/// A file whose name and `content` are durable.
fn durable(dir: &Path, name: &str, content: &[u8]) {
    let mut f = File::create(dir.join(name)).expect("create");
    f.write_all(content).expect("write");
    f.sync_all().expect("fsync");
    sync_dir(dir);
}

fn read(p: &Path) -> Option<Vec<u8>> {
    std::fs::read(p).ok()
}

fn crash(d: &mut LossyDisk) -> CrashReport {
    d.power_loss(Crash::default()).expect("power loss")
}

#[test]
fn unsynced_write_is_read_back_then_lost() {
    let (_dir, mut d) = disk();
    let m = d.mountpoint().to_path_buf();
    durable(&m, "a", b"");
    let mut f = OpenOptions::new().append(true).open(m.join("a")).unwrap();
    f.write_all(b"hello").unwrap();
    drop(f);
    assert_eq!(read(&m.join("a")).as_deref(), Some(&b"hello"[..]));
    assert_eq!(d.unsynced(), (1, 5));
    let r = crash(&mut d);
    assert_eq!((r.dropped_ops, r.dropped_bytes), (1, 5));
    assert_eq!(read(&m.join("a")).as_deref(), Some(&b""[..]));
}

#[test]
fn fsynced_write_survives() {
    let (_dir, mut d) = disk();
    let m = d.mountpoint().to_path_buf();
    durable(&m, "a", b"one");
    let f = OpenOptions::new().write(true).open(m.join("a")).unwrap();
    f.write_all_at(b"two", 3).unwrap();
    f.sync_data().unwrap();
    f.write_all_at(b"three", 6).unwrap();
    drop(f);
    crash(&mut d);
    assert_eq!(read(&m.join("a")).as_deref(), Some(&b"onetwo"[..]));
}

#[test]
fn overwrites_and_truncations_roll_back() {
    let (_dir, mut d) = disk();
    let m = d.mountpoint().to_path_buf();
    let big: Vec<u8> = (0..10_000u32).map(|i| i as u8).collect();
    durable(&m, "a", &big);
    let f = OpenOptions::new().write(true).open(m.join("a")).unwrap();
    f.write_all_at(&[0xff; 5000], 3000).unwrap();
    f.set_len(100).unwrap();
    f.write_all_at(b"tail", 20_000).unwrap();
    drop(f);
    crash(&mut d);
    assert_eq!(read(&m.join("a")), Some(big));
}

#[test]
fn create_needs_a_directory_fsync() {
    let (_dir, mut d) = disk();
    let m = d.mountpoint().to_path_buf();
    std::fs::create_dir(m.join("sub")).unwrap();
    sync_dir(&m);
    for name in ["kept", "lost"] {
        let mut f = File::create(m.join("sub").join(name)).unwrap();
        f.write_all(name.as_bytes()).unwrap();
        f.sync_all().unwrap();
        if name == "kept" {
            sync_dir(&m.join("sub"));
        }
    }
    // Created after the directory's fsync: gone too.
    File::create(m.join("sub").join("later")).unwrap();
    // A directory made without its parent's fsync goes with everything in it.
    std::fs::create_dir(m.join("newdir")).unwrap();
    durable(&m.join("newdir"), "x", b"x");
    let r = crash(&mut d);
    assert!(r.entries_rolled_back >= 3, "{r:?}");
    assert_eq!(read(&m.join("sub/lost")), None);
    assert_eq!(read(&m.join("sub/later")), None);
    assert_eq!(read(&m.join("sub/kept")).as_deref(), Some(&b"kept"[..]));
    assert!(!m.join("newdir").exists());
}

#[test]
fn rename_is_durable_with_the_directory_fsync_only() {
    let (_dir, mut d) = disk();
    let m = d.mountpoint().to_path_buf();
    for sync in [false, true] {
        durable(&m, "CURRENT", b"old");
        let mut f = File::create(m.join("tmp")).unwrap();
        f.write_all(b"new").unwrap();
        f.sync_all().unwrap();
        drop(f);
        std::fs::rename(m.join("tmp"), m.join("CURRENT")).unwrap();
        assert_eq!(read(&m.join("CURRENT")).as_deref(), Some(&b"new"[..]));
        if sync {
            sync_dir(&m);
        }
        crash(&mut d);
        let want: &[u8] = if sync { b"new" } else { b"old" };
        assert_eq!(
            read(&m.join("CURRENT")).as_deref(),
            Some(want),
            "sync {sync}"
        );
        assert!(!m.join("tmp").exists(), "sync {sync}");
    }
}

#[test]
fn unlink_without_a_directory_fsync_comes_back() {
    let (_dir, mut d) = disk();
    let m = d.mountpoint().to_path_buf();
    durable(&m, "a", b"data");
    durable(&m, "b", b"gone");
    std::fs::remove_file(m.join("a")).unwrap();
    std::fs::remove_file(m.join("b")).unwrap();
    sync_dir(&m);
    // That fsync made both unlinks durable: neither comes back.
    durable(&m, "c", b"c");
    std::fs::remove_file(m.join("c")).unwrap();
    let grave = d.lock().grave.clone();
    let buried = std::fs::read_dir(&grave).unwrap().count();
    assert_eq!(buried, 1, "only c's inode is kept for a crash to restore");
    crash(&mut d);
    assert_eq!(read(&m.join("a")), None);
    assert_eq!(read(&m.join("b")), None);
    assert_eq!(read(&m.join("c")).as_deref(), Some(&b"c"[..]));
}

#[test]
fn tear_keeps_a_prefix_of_the_last_write_only() {
    let (_dir, mut d) = disk();
    let m = d.mountpoint().to_path_buf();
    durable(&m, "log", b"base");
    let f = OpenOptions::new().write(true).open(m.join("log")).unwrap();
    f.write_all_at(b"first", 4).unwrap();
    f.write_all_at(b"second-write", 9).unwrap();
    drop(f);
    let mut torn = 0;
    for seed in 0..20 {
        let r = d
            .power_loss(Crash {
                seed,
                tear: true,
                reorder: false,
            })
            .unwrap();
        let (len, part) = r.torn.expect("a torn write");
        assert_eq!(len, 12);
        let got = read(&m.join("log")).unwrap();
        assert_eq!(&got[..4], b"base");
        if part == 0 {
            assert_eq!(got, b"base");
        } else {
            assert_eq!(&got[4..9], &[0; 5], "the first write was dropped");
            assert_eq!(&got[9..], &b"second-write"[..part as usize]);
            torn += 1;
        }
        // Every round starts from the same unsynced writes.
        let f = OpenOptions::new().write(true).open(m.join("log")).unwrap();
        f.set_len(4).unwrap();
        f.sync_all().unwrap();
        f.write_all_at(b"first", 4).unwrap();
        f.write_all_at(b"second-write", 9).unwrap();
    }
    assert!(torn > 0);
}

#[test]
fn reorder_keeps_a_seeded_subset_across_files() {
    let (_dir, mut d) = disk();
    let m = d.mountpoint().to_path_buf();
    let names = ["a", "b", "c"];
    for n in names {
        durable(&m, n, &[0; 64]);
    }
    let mut outcomes = Vec::new();
    for seed in [1, 2] {
        let mut results = Vec::new();
        for _run in 0..2 {
            for (k, n) in names.iter().enumerate() {
                let f = OpenOptions::new().write(true).open(m.join(n)).unwrap();
                for w in 0..8u8 {
                    f.write_all_at(&[k as u8 * 10 + w + 1; 8], w as u64 * 8)
                        .unwrap();
                }
            }
            let r = d
                .power_loss(Crash {
                    seed,
                    tear: false,
                    reorder: true,
                })
                .unwrap();
            assert_eq!(r.kept_ops + r.dropped_ops, 24, "{r:?}");
            assert!(r.kept_ops > 0 && r.dropped_ops > 0, "{r:?}");
            let now: Vec<Vec<u8>> = names.iter().map(|n| read(&m.join(n)).unwrap()).collect();
            for (k, content) in now.iter().enumerate() {
                for w in 0..8 {
                    let chunk = &content[w * 8..w * 8 + 8];
                    assert!(
                        chunk == [0; 8] || chunk == [k as u8 * 10 + w as u8 + 1; 8],
                        "each write is kept whole or dropped"
                    );
                }
            }
            results.push(now);
            // Back to zeros, durably, for the next run.
            for n in names {
                let f = OpenOptions::new().write(true).open(m.join(n)).unwrap();
                f.write_all_at(&[0; 64], 0).unwrap();
                f.sync_all().unwrap();
            }
        }
        assert_eq!(
            results[0], results[1],
            "the same seed keeps the same writes"
        );
        outcomes.push(results.remove(0));
    }
    assert_ne!(outcomes[0], outcomes[1], "another seed keeps other writes");
}

/// The environment variable that turns this test binary into a process that mounts a
/// lossy disk there and waits to be killed.
const STALE_ENV: &str = "LOSSYFS_TEST_STALE_MOUNT";

#[test]
fn a_stale_mount_is_swept() {
    let dir = tempfile::tempdir().unwrap();
    let mnt = dir.path().join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    // A test process killed while its disk is mounted leaves the mount behind, broken.
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["lossyfs::tests::mount_and_wait", "--exact", "--ignored"])
        .env(STALE_ENV, &mnt)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !std::fs::read_to_string("/proc/mounts")
        .unwrap()
        .contains(mnt.to_str().unwrap())
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the child did not mount"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // Every mount sweeps stale mounts first: hold the sweep until this one was seen stale.
    let sweeping = super::SWEEPING.lock().unwrap_or_else(|e| e.into_inner());
    child.kill().unwrap();
    child.wait().unwrap();
    // Opening the directory needs the dead daemon (a stat of the root may still be answered
    // from the kernel's attribute cache).
    let err = std::fs::read_dir(&mnt).map(|_| ()).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::ENOTCONN));
    super::sweep_unlocked();
    drop(sweeping);
    assert!(
        std::fs::read_dir(&mnt).is_ok(),
        "the mount point works again"
    );
    assert!(
        !std::fs::read_to_string("/proc/mounts")
            .unwrap()
            .contains(mnt.to_str().unwrap()),
        "the stale mount is gone"
    );
}

#[test]
#[ignore = "started by a_stale_mount_is_swept"]
fn mount_and_wait() {
    let Some(mnt) = std::env::var_os(STALE_ENV) else {
        return;
    };
    let mnt = std::path::PathBuf::from(mnt);
    let _d = LossyDisk::mount(&mnt.with_file_name("disk"), &mnt).unwrap();
    std::thread::sleep(std::time::Duration::from_secs(60));
}
