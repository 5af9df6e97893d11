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

use zooraft_bench::zk_snapshot;

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
    let port = zooraft_bench::server::try_free_port()?;
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
    let rss = zk_snapshot::vm_hwm_mb(child.id()).unwrap_or(0.0);
    let _ = child.kill();
    let _ = child.wait();
    Ok((result?, rss))
}

fn main() -> anyhow::Result<()> {
    let o = parse();
    let tmp = tempfile::tempdir()?;
    let work = o.keep.clone().unwrap_or_else(|| tmp.path().to_path_buf());
    std::fs::create_dir_all(&work)?;
    let zk_data = work.join("zookeeper-data");
    let t0 = Instant::now();
    let t = zk_snapshot::tree(o.znodes, o.data_bytes, "");
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
    zk_snapshot::copy_dir(&zk_data, &zk_copy)?;
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
