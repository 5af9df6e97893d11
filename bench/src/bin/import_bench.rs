//! Import at scale: `zooraft import` of a large ZooKeeper snapshot, next to Apache
//! ZooKeeper's own start-up on the same data directory.
//!
//! `import_bench [--znodes N] [--data-bytes B] [--zooraft PATH] [--keep DIR]`
//!
//! Writes a ZooKeeper 3.8 data directory holding one snapshot of N znodes (default
//! 1,000,000: 1,000 parents of 1,000 children each, B bytes of data each, default 32, an
//! open ACL, increasing zxids) with the `zkdata` crate. Then, one after the other:
//! - `zooraft import` of it into a fresh store: wall time, znodes per second and the
//!   process's peak resident memory (from `wait4`);
//! - Apache ZooKeeper 3.8 (`/usr/share/java/zookeeper.jar`, `-Xmx3g`) started on a copy of
//!   it: the time until `srvr` reports a Mode (load, plus the snapshot ZooKeeper takes at
//!   start), and its peak resident memory (`VmHWM`).
//!
//! Prints both and their ratio. Use a release `zooraft` for figures worth quoting; the
//! numbers depend on the machine and its load, so no figure is asserted anywhere.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use bytes::Bytes;
use jute::Acl;
use zkdata::tree::{StatPersisted, ZkNode, ZkTree, OPEN_UNSAFE_ACL_ID};

struct Options {
    znodes: u64,
    data_bytes: usize,
    zooraft: PathBuf,
    keep: Option<PathBuf>,
}

fn parse() -> Options {
    let mut o = Options {
        znodes: 1_000_000,
        data_bytes: 32,
        zooraft: PathBuf::from("target/release/zooraft"),
        keep: None,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = |name: &str| {
            args.next().unwrap_or_else(|| {
                eprintln!("import_bench: {name} needs a value");
                std::process::exit(2)
            })
        };
        let number = |v: String| {
            v.replace('_', "").parse().unwrap_or_else(|_| {
                eprintln!("import_bench: {v} is not a number");
                std::process::exit(2)
            })
        };
        match a.as_str() {
            "--znodes" => o.znodes = number(value("--znodes")),
            "--data-bytes" => o.data_bytes = number(value("--data-bytes")) as usize,
            "--zooraft" => o.zooraft = PathBuf::from(value("--zooraft")),
            "--keep" => o.keep = Some(PathBuf::from(value("--keep"))),
            other => {
                eprintln!("import_bench: unknown argument {other}");
                std::process::exit(2)
            }
        }
    }
    o
}

fn node(data: Bytes, zxid: i64, time: i64, cversion: i32) -> ZkNode {
    ZkNode {
        data: Some(data),
        acl: 1,
        stat: StatPersisted {
            czxid: zxid,
            mzxid: zxid,
            ctime: time,
            mtime: time,
            cversion,
            pzxid: zxid,
            ..Default::default()
        },
        children: Default::default(),
    }
}

/// A tree as ZooKeeper would hold it after `n` creates.
fn tree(n: u64, data_bytes: usize) -> ZkTree {
    let mut t = ZkTree::new();
    let open = t.acl_key(&[Acl::open_unsafe()]);
    assert_eq!(open, 1);
    let system = |aversion| ZkNode {
        data: Some(Bytes::new()),
        acl: OPEN_UNSAFE_ACL_ID,
        stat: StatPersisted {
            aversion,
            ..Default::default()
        },
        children: Default::default(),
    };
    let parents = n.div_ceil(1000);
    for (p, av) in [
        ("/zookeeper", 0),
        ("/zookeeper/quota", 0),
        ("/zookeeper/config", -1),
    ] {
        t.insert(p.into(), system(av));
    }
    // The root's Stat is final before it goes in (the digest is kept as nodes go in).
    let mut root = system(0);
    root.stat.cversion = parents as i32;
    root.stat.pzxid = (parents + n) as i64;
    t.insert("/".into(), root);
    let data = Bytes::from(vec![b'x'; data_bytes]);
    let time = 1_700_000_000_000;
    let mut zxid = 0i64;
    for p in 0..parents {
        zxid += 1;
        let children = (n - p * 1000).min(1000);
        t.insert(
            format!("/b{p:04}"),
            node(Bytes::new(), zxid, time, children as i32),
        );
        for c in 0..children {
            zxid += 1;
            t.insert(
                format!("/b{p:04}/n{c:04}"),
                node(data.clone(), zxid, time + zxid, 0),
            );
        }
    }
    t.link_children().expect("every parent exists");
    t.last_zxid = zxid;
    t
}

/// Peak resident memory (MB) of a process that is still running.
fn vm_hwm_mb(pid: u32) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
        })
        .map_or(0.0, |kb| kb / 1024.0)
}

fn serving(port: u16) -> bool {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
    let _ = s.write_all(b"srvr");
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out.contains("Mode: ")
}

/// Runs `zooraft import`; (seconds, peak RSS in MB).
fn import(zooraft: &Path, from: &Path, work: &Path) -> anyhow::Result<(f64, f64)> {
    let cfg = work.join("zooraft.cfg");
    std::fs::write(
        &cfg,
        format!("dataDir={}\n", work.join("zooraft-data").display()),
    )?;
    let started = Instant::now();
    let child = Command::new(zooraft)
        .arg("import")
        .arg("--from")
        .arg(from)
        .arg("--config")
        .arg(&cfg)
        .stdout(Stdio::inherit())
        .stderr(Stdio::inherit())
        .spawn()?;
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value for wait4 to fill in.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: waits for our own child; `status` and `usage` are valid for writes.
    let pid = unsafe { libc::wait4(child.id() as libc::pid_t, &mut status, 0, &mut usage) };
    let secs = started.elapsed().as_secs_f64();
    anyhow::ensure!(
        pid > 0 && status == 0,
        "zooraft import failed (status {status})"
    );
    Ok((secs, usage.ru_maxrss as f64 / 1024.0))
}

/// Starts Apache ZooKeeper on `data`; (seconds until it serves, peak RSS in MB).
fn zookeeper(data: &Path, work: &Path) -> anyhow::Result<(f64, f64)> {
    let port = zooraft_bench::server::free_port()?;
    let cfg = work.join("zoo.cfg");
    std::fs::write(
        &cfg,
        format!(
            "tickTime=2000\ndataDir={}\nclientPort={port}\nclientPortAddress=127.0.0.1\nadmin.enableServer=false\n4lw.commands.whitelist=*\n",
            data.display()
        ),
    )?;
    let log = std::fs::File::create(work.join("zookeeper.log"))?;
    let started = Instant::now();
    let mut child = Command::new("java")
        .args([
            "-Xmx3g",
            "-XX:+UseSerialGC",
            "-Dzookeeper.admin.enableServer=false",
            "-cp",
        ])
        .arg("/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-simple.jar")
        .arg("org.apache.zookeeper.server.ZooKeeperServerMain")
        .arg(&cfg)
        .stdout(log.try_clone()?)
        .stderr(log)
        .spawn()?;
    let deadline = started + Duration::from_secs(600);
    let result = loop {
        if serving(port) {
            break Ok(started.elapsed().as_secs_f64());
        }
        if let Ok(Some(s)) = child.try_wait() {
            break Err(anyhow::anyhow!(
                "ZooKeeper exited ({s}); see {}",
                work.join("zookeeper.log").display()
            ));
        }
        if Instant::now() > deadline {
            break Err(anyhow::anyhow!("ZooKeeper did not serve within 600 s"));
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let rss = vm_hwm_mb(child.id());
    let _ = child.kill();
    let _ = child.wait();
    Ok((result?, rss))
}

fn copy_dir(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for e in std::fs::read_dir(from)?.flatten() {
        if e.path().is_dir() {
            copy_dir(&e.path(), &to.join(e.file_name()))?;
        } else {
            std::fs::copy(e.path(), to.join(e.file_name()))?;
        }
    }
    Ok(())
}

fn main() -> anyhow::Result<()> {
    let o = parse();
    let tmp = tempfile::tempdir()?;
    let work = o.keep.clone().unwrap_or_else(|| tmp.path().to_path_buf());
    std::fs::create_dir_all(&work)?;
    let zk_data = work.join("zookeeper-data");
    let t0 = Instant::now();
    let t = tree(o.znodes, o.data_bytes);
    let snapshot = zkdata::write_datadir(&t, &zk_data, zkdata::Compression::None)?;
    let size = std::fs::metadata(&snapshot)?.len();
    drop(t);
    println!(
        "generated {} znodes ({:.1} MB snapshot) in {:.1} s",
        o.znodes,
        size as f64 / 1e6,
        t0.elapsed().as_secs_f64()
    );
    let (import_s, import_rss) = import(&o.zooraft, &zk_data, &work)?;
    let zk_copy = work.join("zookeeper-run");
    copy_dir(&zk_data, &zk_copy)?;
    let (zk_s, zk_rss) = zookeeper(&zk_copy, &work)?;
    println!(
        "zooraft import:      {import_s:7.2} s  {:>9.0} znodes/s  peak RSS {import_rss:7.0} MB",
        o.znodes as f64 / import_s
    );
    println!(
        "ZooKeeper start-up:  {zk_s:7.2} s  {:>9.0} znodes/s  peak RSS {zk_rss:7.0} MB",
        o.znodes as f64 / zk_s
    );
    println!(
        "import time / ZooKeeper start-up time: {:.2}",
        import_s / zk_s
    );
    Ok(())
}
