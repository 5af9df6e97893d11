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

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use clap::Parser;
use zooraft_bench::server::{ServerKind, TestServer};
use zooraft_bench::zk_snapshot;

/// `zooraft import` of a big ZooKeeper snapshot beside ZooKeeper's own start-up on it.
#[derive(Debug, Parser)]
#[command(name = "import_bench")]
struct Options {
    /// Znodes in the snapshot (underscores allowed: 1_000_000).
    #[arg(long, default_value = "1000000", value_parser = positive_count)]
    znodes: u64,
    /// Bytes of data in each znode.
    #[arg(long, default_value_t = 32)]
    data_bytes: usize,
    /// The zooraft binary.
    #[arg(long, default_value = "target/release/zooraft")]
    zooraft: PathBuf,
    /// Keep the snapshot, both data directories and the logs in this directory.
    #[arg(long)]
    keep: Option<PathBuf>,
}

/// A count above zero, with `_` allowed between digits.
fn positive_count(s: &str) -> Result<u64, String> {
    match s.replace('_', "").parse::<u64>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(format!("{s:?} is not a positive whole number")),
    }
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

/// Starts Apache ZooKeeper (the kit's launcher, `-Xmx3g`, serial collector) on a copy of
/// the data directory `data`, its own directory under `work`; (seconds from its start until
/// it serves, peak RSS in MB). With `keep`, its directory stays.
fn zookeeper(data: &Path, work: &Path, keep: bool) -> anyhow::Result<(f64, f64)> {
    let mut b = TestServer::builder(ServerKind::Apache);
    if keep {
        b = b.keep_data();
    }
    let mut zk = b
        .data_root(work)
        // The kit's small test heap and serial collector, and then a heap limit that holds
        // the tree: the JVM takes the last -Xmx.
        .jvm_arg("-Xmx3g")
        .test_hooks(false)
        .start_timeout(Duration::from_secs(600))
        .try_prepare()?;
    zk_snapshot::copy_dir(data, &zk.data_dir())?;
    let serving = zk.try_restart()?;
    let rss = zk.pid().and_then(zk_snapshot::vm_hwm_mb).unwrap_or(0.0);
    zk.kill();
    Ok((serving.as_secs_f64(), rss))
}

fn main() -> anyhow::Result<()> {
    let o = Options::parse();
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
    let (zk_s, zk_rss) = zookeeper(&zk_data, &work, o.keep.is_some())?;
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
