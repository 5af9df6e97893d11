//! Live migration from a running Apache ZooKeeper 3.8 ensemble, measured: how fast a zooraft
//! observer syncs a big tree next to ZooKeeper's own observer, how far behind it stays under
//! a write load, and how long writers are paused by `zooraft migrate cutover`.
//!
//! `migration_bench [--znodes N] [--zooraft PATH] [--writers W] [--seconds S]
//!  [--init-limit TICKS] [--data-root DIR] [--keep DIR]`
//!
//! One ensemble serves the whole run: ZooKeeper voters 1–3 (each started on a copy of one
//! snapshot of N znodes written with the `zkdata` crate, default 1,000,000: 1,000 parents of
//! 1,000 children of 32 bytes), and observer slots 4, 5, 6, whose `server.N` lines (marked
//! `:observer`) are in every member's zoo.cfg from the start (`tickTime=500`,
//! `syncLimit=4`, `initLimit` 20 or N/5,000 ticks if more: a leader must accept and sync a
//! learner within it, and a big SNAP on 2 busy cores takes longer than 10 s).
//!
//! 1. **Sync.** A zooraft observer (member 4, empty dataDir, `migrateFromZooKeeper=true`),
//!    then an Apache ZooKeeper observer (member 5, empty dataDir, `peerType=observer`), each
//!    timed from its spawn until `srvr` says `Mode: observer` with the leader's `Zxid`
//!    (polled every 25 ms), each with its peak RSS (`VmHWM`, read 2 s after it synced), and
//!    stopped. Before each, the voters are let settle (their CPU below 15% of a core). The
//!    zooraft observer goes first, so the ZooKeeper leader's SNAP code is cold (JIT) for it
//!    and warm for ZooKeeper's observer.
//! 2. **Lag.** The zooraft observer is restarted (it resumes from its copy, by DIFF) and W
//!    sessions (default 32) write through the ZooKeeper voters (round-robin) for S seconds
//!    (default 10): setData of 100 bytes on a node of their own, one request outstanding
//!    each. The observer's `mntr` `zk_migration_lag` (transactions the leader had proposed
//!    beyond the observer at its last ping) is sampled every 100 ms (p50/p99/max), and 10
//!    times, spaced across the load, a marker node is created through ZooKeeper's leader
//!    while a session on the observer waits with an `exists` watch on it: the time from the
//!    create's send (and from ZooKeeper's acknowledgement) to the watch firing on the
//!    observer is the lag in milliseconds.
//! 3. **Cut-over.** Two more zooraft observers (members 5 and 6, fresh) join; W sessions
//!    write through the zooraft members only (round-robin over 4, 5, 6), each recording the
//!    completion time of every write; after a third of S, `zooraft migrate cutover --server
//!    <member 4>` runs; the load goes on until S has passed and at least a third of S after
//!    the cut-over. Reported: the `pause_ms` the command printed, the longest gap between two
//!    consecutive completed writes of any session (p100) and the p99 of the per-session
//!    longest gaps, and every error (none is expected; a session that fails is counted and
//!    reconnected).
//!
//! Output: a markdown table per part and one summary line each (stdout); progress on
//! stderr. Everything waits with a deadline and fails with a message naming what did not
//! happen (with the log tail of the server concerned). The servers are started with the
//! kit's launcher (`zooraft_kit::TestServer`, as the tests and `zooraft-bench` start
//! theirs), each in a directory of its own under the run's directory; every one is killed
//! when the bench ends, however it ends (dropped, and `PR_SET_PDEATHSIG` should the bench
//! itself be killed). The run's directory is a temporary one under `--data-root` (default
//! `$TMPDIR`), or `--keep DIR`, which is kept with every member's directory.
//!
//! Use a release `zooraft` for figures worth quoting: the default is `$ZOORAFT_BIN`, then
//! next to this executable, `$CARGO_TARGET_DIR/release/zooraft`, `target/release/zooraft`.
//! ZooKeeper runs from Debian's jars with a fixed heap (`-Xms3g -Xmx3g`, the default
//! collector), as `zooraft-bench` runs it. The figures depend on the machine and its
//! load; nothing here asserts a threshold.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, ensure, Context, Result};
use bytes::Bytes;
use jute::{Acl, CreateMode, CreateRequest, ErrorCode, ExistsRequest, Request, SetDataRequest};
use zooraft_bench::server::{
    four_letter_word, resolve_zooraft_bin, try_free_port, ServerKind, TestServer,
};
use zooraft_bench::session::{error_label, Session};
use zooraft_bench::zk_snapshot;

/// Progress, on stderr, with the time since the bench started.
macro_rules! progress {
    ($t0:expr, $($arg:tt)*) => {
        eprintln!("[{:7.1} s] {}", $t0.elapsed().as_secs_f64(), format!($($arg)*))
    };
}

mod cluster;
mod load;

use cluster::*;
use load::*;

const TICK_MS: u32 = 500;
const SYNC_LIMIT: u32 = 4;
/// Bytes written by each setData.
const VALUE_BYTES: usize = 100;
/// Bytes of data in each znode of the generated tree.
const TREE_DATA_BYTES: usize = 32;
/// Asked for; ZooKeeper grants at most 20 ticks (10 s).
const SESSION_TIMEOUT_MS: i32 = 10_000;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// The longest one request may take (a cut-over holds writes for up to 10 s).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// How long the voters may take to serve on the tree.
const VOTERS_READY: Duration = Duration::from_secs(900);
/// How long an observer may take to sync the tree.
const SYNC_TIMEOUT: Duration = Duration::from_secs(1800);
/// How long a stopped member may take to exit by itself (zooraft snapshots on the way out).
const STOP_GRACE: Duration = Duration::from_secs(120);
/// How long `zooraft migrate cutover` may run.
const CUTOVER_TIMEOUT: Duration = Duration::from_secs(120);
/// Markers sampled across the lag load.
const MARKERS: usize = 10;

/// Live migration from a running Apache ZooKeeper ensemble, measured (see the crate docs).
#[derive(Debug, clap::Parser)]
#[command(name = "migration_bench")]
struct Options {
    /// Znodes in the ensemble's tree (underscores allowed: 1_000_000).
    #[arg(long, default_value = "1000000", value_parser = positive_count)]
    znodes: u64,
    /// The zooraft binary (default: `$ZOORAFT_BIN`, next to this executable, the release
    /// build of the target directory).
    #[arg(long)]
    zooraft: Option<PathBuf>,
    /// Writing sessions in the lag and cut-over parts.
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u16).range(1..))]
    writers: u16,
    /// Seconds of load in the lag and cut-over parts.
    #[arg(long, default_value_t = 10.0, value_parser = positive_seconds)]
    seconds: f64,
    /// The ensemble's initLimit in ticks (default 20, or N/5,000 if more).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    init_limit: Option<u32>,
    /// Where the temporary directory of data and logs is made (default `$TMPDIR`).
    #[arg(long)]
    data_root: Option<PathBuf>,
    /// Keep data and logs in this directory instead.
    #[arg(long)]
    keep: Option<PathBuf>,
}

/// A count above zero, with `_` allowed between digits.
fn positive_count(s: &str) -> std::result::Result<u64, String> {
    match s.replace('_', "").parse::<u64>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(format!("{s:?} is not a positive whole number")),
    }
}

/// A number of seconds above zero.
fn positive_seconds(s: &str) -> std::result::Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v > 0.0 && v.is_finite() => Ok(v),
        _ => Err(format!("{s:?} is not a positive number of seconds")),
    }
}

fn main() {
    if let Err(e) = run() {
        eprintln!("migration_bench: {e:#}");
        std::process::exit(1);
    }
}

fn run() -> Result<()> {
    let o = <Options as clap::Parser>::parse();
    let t0 = Instant::now();
    let zooraft = match &o.zooraft {
        Some(p) if p.is_file() => p.clone(),
        Some(p) => bail!("no zooraft binary at {}", p.display()),
        None => resolve_zooraft_bin(None).map_err(|e| {
            anyhow!("{e}")
                .context("no zooraft binary found: pass --zooraft PATH or set $ZOORAFT_BIN")
        })?,
    };
    ensure!(
        Path::new("/usr/share/java/zookeeper.jar").is_file(),
        "/usr/share/java/zookeeper.jar is missing: install Debian's `zookeeper` package"
    );
    // The temporary directory outlives the servers (it is declared before the cluster).
    let tmp = match &o.data_root {
        Some(root) => {
            std::fs::create_dir_all(root)?;
            tempfile::Builder::new()
                .prefix("migration-bench-")
                .tempdir_in(root)?
        }
        None => tempfile::Builder::new()
            .prefix("migration-bench-")
            .tempdir()?,
    };
    let work = o.keep.clone().unwrap_or_else(|| tmp.path().to_path_buf());
    std::fs::create_dir_all(&work)?;
    let init_limit = o
        .init_limit
        .unwrap_or_else(|| 20.max((o.znodes / 5_000) as u32));
    println!(
        "# migration_bench: {} znodes, {} writers, {} s, zooraft {}, tickTime {TICK_MS} initLimit {init_limit} syncLimit {SYNC_LIMIT}, data in {}",
        o.znodes,
        usize::from(o.writers),
        o.seconds,
        zooraft.display(),
        work.display()
    );

    let layout = Layout::new(3, 3, init_limit)?;
    let snap_dir = work.join("snapshot");
    let t = Instant::now();
    let snap = zk_snapshot::write(
        &snap_dir,
        o.znodes,
        TREE_DATA_BYTES,
        &layout.zookeeper_config(),
    )?;
    progress!(
        t0,
        "wrote {} znodes ({:.1} MB snapshot, zxid {:#x}) in {:.1} s",
        o.znodes,
        snap.bytes as f64 / 1e6,
        snap.zxid,
        t.elapsed().as_secs_f64()
    );

    let mut c = Cluster {
        layout,
        work: work.clone(),
        zooraft: zooraft.clone(),
        keep: o.keep.is_some(),
        voters: Vec::new(),
        observers: BTreeMap::new(),
        parked: Default::default(),
        t0,
    };
    for id in 1..=3 {
        c.start_voter(id, &snap_dir)?;
    }
    c.wait_voters(VOTERS_READY)?;
    let (leader, l) = c.leader().ok_or_else(|| anyhow!("no ZooKeeper leader"))?;
    progress!(
        t0,
        "ZooKeeper voters serve (leader {leader}, zxid {})",
        fmt_opt(l.zxid.map(|z| format!("{z:#x}")))
    );

    // 1. Sync.
    let mut sync = Vec::new();
    for (id, kind) in [(4, ServerKind::Zooraft), (5, ServerKind::Apache)] {
        c.settle();
        c.start_observer(id, kind)?;
        let took = c.wait_synced(id, SYNC_TIMEOUT)?;
        progress!(
            t0,
            "{} member {id} synced in {:.2} s",
            title(kind),
            took.as_secs_f64()
        );
        std::thread::sleep(Duration::from_secs(2));
        let p = &c.observers[&id];
        let rss = p.pid().and_then(zk_snapshot::vm_hwm_mb).unwrap_or(0.0);
        sync.push((kind, id, took.as_secs_f64(), rss));
        c.stop_observer(id);
    }
    let (zr, zk) = (sync[0], sync[1]);
    println!();
    println!(
        "## 1. Observer sync of a {}-znode tree ({:.1} MB snapshot)",
        o.znodes,
        snap.bytes as f64 / 1e6
    );
    println!();
    println!("| observer | spawn to synced (s) | peak RSS (MB) |");
    println!("|---|---:|---:|");
    for (kind, id, s, rss) in &sync {
        println!(
            "{}",
            table_row(&[
                format!("{} (member {id})", title(*kind)),
                format!("{s:.2}"),
                format!("{rss:.0}")
            ])
        );
    }
    println!(
        "| zooraft / ZooKeeper | {:.2} | {:.2} |",
        zr.2 / zk.2,
        zr.3 / zk.3
    );
    println!();
    println!(
        "sync: zooraft {:.2} s, ZooKeeper {:.2} s, zooraft/ZooKeeper {:.2}; peak RSS zooraft {:.0} MB, ZooKeeper {:.0} MB",
        zr.2,
        zk.2,
        zr.2 / zk.2,
        zr.3,
        zk.3
    );

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;

    // 2. Lag.
    c.settle();
    c.start_observer(4, ServerKind::Zooraft)?;
    let resync = c.wait_synced(4, SYNC_TIMEOUT)?;
    progress!(
        t0,
        "zooraft member 4 restarted and caught up in {:.2} s; write load for {} s",
        resync.as_secs_f64(),
        o.seconds
    );
    let (leader, _) = c.leader().ok_or_else(|| anyhow!("no ZooKeeper leader"))?;
    let lag = rt.block_on(lag_load(
        c.voter_addrs(),
        leader,
        c.layout.client(4),
        usize::from(o.writers),
        o.seconds,
    ))?;
    c.check()?;
    let mut samples = lag.lag.clone();
    samples.sort_unstable();
    let mut send: Vec<f64> = lag.markers.iter().map(|m| m.from_send).collect();
    let mut ack: Vec<f64> = lag.markers.iter().map(|m| m.from_ack).collect();
    send.sort_by(f64::total_cmp);
    ack.sort_by(f64::total_cmp);
    // (`+ 0.0`: no "-0.0" for a marker seen as ZooKeeper acknowledged it.)
    let f1 = |v: Option<f64>| fmt_opt(v.map(|v| format!("{:.1}", (v * 10.0).round() / 10.0 + 0.0)));
    println!();
    println!(
        "## 2. zooraft observer lag under a write load on ZooKeeper ({} writers, {:.1} s)",
        usize::from(o.writers),
        lag.window.as_secs_f64()
    );
    println!();
    println!("| measure | p50 | p99 | max | samples |");
    println!("|---|---:|---:|---:|---:|");
    println!(
        "| `zk_migration_lag` (transactions) | {} | {} | {} | {}{} |",
        fmt_opt(pct(&samples, 50.0)),
        fmt_opt(pct(&samples, 99.0)),
        fmt_opt(samples.last().copied()),
        samples.len(),
        if lag.lag_failed > 0 {
            format!(" ({} reads failed)", lag.lag_failed)
        } else {
            String::new()
        }
    );
    println!(
        "| marker create sent → watch fired on the observer (ms) | {} | – | {} | {} |",
        f1(pct(&send, 50.0)),
        f1(send.last().copied()),
        send.len()
    );
    println!(
        "| ZooKeeper's ack → watch fired on the observer (ms) | {} | – | {} | {} |",
        f1(pct(&ack, 50.0)),
        f1(ack.last().copied()),
        ack.len()
    );
    println!();
    println!(
        "lag: zk_migration_lag p50={} p99={} max={} txns ({} samples); marker visible p50={} ms max={} ms after send, p50={} ms max={} ms after ZooKeeper's ack; load {} writes ({:.0}/s), errors {}{}",
        fmt_opt(pct(&samples, 50.0)),
        fmt_opt(pct(&samples, 99.0)),
        fmt_opt(samples.last().copied()),
        samples.len(),
        f1(pct(&send, 50.0)),
        f1(send.last().copied()),
        f1(pct(&ack, 50.0)),
        f1(ack.last().copied()),
        lag.writes,
        lag.writes as f64 / lag.window.as_secs_f64(),
        fmt_errors(&lag.errors),
        if lag.close_failed > 0 {
            format!(", {} sessions failed to close", lag.close_failed)
        } else {
            String::new()
        }
    );

    // 3. Cut-over.
    c.start_observer(5, ServerKind::Zooraft)?;
    c.start_observer(6, ServerKind::Zooraft)?;
    for id in [5, 6] {
        let took = c.wait_synced(id, SYNC_TIMEOUT)?;
        progress!(
            t0,
            "zooraft member {id} synced {:.2} s after its start",
            took.as_secs_f64()
        );
    }
    // The cut-over refuses while ZooKeeper members have clients: part 2's must be gone
    // (ZooKeeper counts the connection that asks).
    let gone = Instant::now() + Duration::from_secs(30);
    loop {
        let busy: Vec<(u64, u64)> = c
            .voters
            .iter()
            .filter_map(|v| {
                let n = srvr(v.client)?.connections?;
                (n > 1).then_some((v.id, n - 1))
            })
            .collect();
        if busy.is_empty() {
            break;
        }
        ensure!(
            Instant::now() < gone,
            "ZooKeeper members still have client connections 30 s after part 2 (member, count): {busy:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    progress!(
        t0,
        "zooraft members 4,5,6 observe; write load through them for {} s with a cut-over",
        o.seconds
    );
    let members: Vec<SocketAddr> = [4, 5, 6].iter().map(|id| c.layout.client(*id)).collect();
    let cut = rt.block_on(cutover_load(
        members.clone(),
        zooraft.clone(),
        work.join("cutover.out"),
        usize::from(o.writers),
        o.seconds,
    ))?;
    let check = c.check();
    let modes: Vec<String> = [4u64, 5, 6]
        .iter()
        .map(|id| {
            format!(
                "{id}={}",
                srvr(c.layout.client(*id))
                    .and_then(|s| s.mode)
                    .unwrap_or_else(|| "not-serving".into())
            )
        })
        .collect();
    drop(rt);
    let mut session_max: Vec<Duration> = Vec::new();
    let mut longest: Option<(Duration, Instant)> = None;
    for w in &cut.writers {
        let mut max = Duration::ZERO;
        for pair in w.done.windows(2) {
            let gap = pair[1] - pair[0];
            if gap > max {
                max = gap;
            }
            if longest.is_none_or(|(g, _)| gap > g) {
                longest = Some((gap, pair[0]));
            }
        }
        // A session with fewer than two writes has no gap: it was stuck for the whole run.
        if w.done.len() < 2 {
            max = cut.end - cut.start;
        }
        session_max.push(max);
    }
    session_max.sort_unstable();
    let errors = merge_errors(&cut.writers);
    let writes: usize = cut.writers.iter().map(|w| w.done.len()).sum();
    let close_failed = cut
        .writers
        .iter()
        .filter(|w| w.close_failed.is_some())
        .count();
    let rel = |t: Instant| t.saturating_duration_since(cut.start).as_secs_f64();
    let (pause, line, rates, window) = match &cut.cutover {
        Ok(r) => {
            let before = cut
                .writers
                .iter()
                .flat_map(|w| &w.done)
                .filter(|t| **t < r.started)
                .count();
            let after = cut
                .writers
                .iter()
                .flat_map(|w| &w.done)
                .filter(|t| **t > r.ended)
                .count();
            (
                r.pause_ms,
                r.line.clone(),
                format!(
                    "{:.0}/s before the cut-over, {:.0}/s after",
                    before as f64 / (r.started - cut.start).as_secs_f64(),
                    after as f64 / cut.end.saturating_duration_since(r.ended).as_secs_f64()
                ),
                format!(
                    "command ran {:.2}–{:.2} s into the load",
                    rel(r.started),
                    rel(r.ended)
                ),
            )
        }
        Err(_) => (None, None, String::new(), String::new()),
    };
    let p100 = session_max.last().copied();
    let p99 = pct(&session_max, 99.0);
    let p50 = pct(&session_max, 50.0);
    let fms = |d: Option<Duration>| fmt_opt(d.map(|d| format!("{:.0}", ms(d))));
    println!();
    println!(
        "## 3. Write pause at the cut-over ({} writers through zooraft members 4,5,6, {:.1} s)",
        usize::from(o.writers),
        (cut.end - cut.start).as_secs_f64()
    );
    println!();
    println!("| measure | value |");
    println!("|---|---:|");
    println!(
        "| `pause_ms` printed by `zooraft migrate cutover` | {} |",
        fmt_opt(pause)
    );
    println!(
        "| longest gap between consecutive writes of any session, p100 (ms) | {} |",
        fms(p100)
    );
    println!("| p99 of per-session longest gaps (ms) | {} |", fms(p99));
    println!("| p50 of per-session longest gaps (ms) | {} |", fms(p50));
    println!("| writes completed | {writes} |");
    println!("| errors | {} |", fmt_errors(&errors));
    println!();
    println!(
        "cutover: pause_ms={} p100_gap_ms={} p99_session_max_gap_ms={} writes={writes} errors={}{} ({}; {}; longest gap began {:.2} s into the load; modes after: {})",
        fmt_opt(pause),
        fms(p100),
        fms(p99),
        fmt_errors(&errors),
        if close_failed > 0 {
            format!(" close_failed={close_failed}")
        } else {
            String::new()
        },
        window,
        rates,
        longest.map_or(0.0, |(_, at)| rel(at)),
        modes.join(" ")
    );
    if let Some(l) = &line {
        println!("command: {l}");
    }
    match cut.cutover {
        Ok(r) if r.success && r.pause_ms.is_some() => {}
        Ok(r) => bail!(
            "zooraft migrate cutover failed; its output:\n{}",
            r.output.trim_end()
        ),
        Err(e) => return Err(e),
    }
    check?;
    progress!(t0, "done");
    Ok(())
}
