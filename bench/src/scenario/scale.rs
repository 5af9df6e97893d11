//! The `scale` scenario: a big tree, and what it costs to hold, restart and snapshot.
//!
//! The tree is `/scale/dNNNN/nNNNNNNN`: 1000 znodes of 100 B per directory, created by 8
//! sessions with 256 creates in flight each. At every `--znodes` count it waits six quiet
//! seconds, reads the server's memory (and bytes per znode over the empty server's
//! reading), then restarts
//! the server (SIGTERM, start, first `srvr` with a Mode) and reads its memory again.
//! Last (after the snapshot load, if any), it kills the server with SIGKILL and times the
//! restart that has to replay the server's log: what a crash costs, where the SIGTERM
//! restart lets a server prepare (zooraft snapshots its log on the way out).
//!
//! At the last count, when `--snapshot-load` is not zero, 32 sessions × 8 in flight set
//! data on 1000 of the znodes for that long while a sampler reads `mntr` (both servers
//! publish `zk_cnt_snapshottime` and `zk_sum_snapshottime`) and the server's RSS every
//! 100 ms. A snapshot that finished between two samples spans the time `zk_sum_snapshottime`
//! grew by, ending at the later sample (plus one sampling interval of slack): the write
//! p99 of ops completed inside such spans is compared with the p99 outside them, and (for
//! zooraft; a JVM's RSS only shows its fixed heap filling up) the peak RSS inside them over
//! the RSS before the load is the snapshot's extra memory.
//! ZooKeeper's old snapshots and logs are purged while it runs, keeping its newest three
//! ([`super::zk_purge`]): it keeps them all by itself, more than a disk holds at 10M.
//! Both servers snapshot after about 100,000 writes by default (ZooKeeper's `snapCount`,
//! zooraft's `snapshotEntries`): the load must be long enough to write that many.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use bytes::Bytes;
use jute::{CreateMode, Request, SetDataRequest};
use tokio::task::JoinSet;

use super::{memory_of, KindOutcome, Measure, ScalePoint, ScenarioParams, QUIET_BEFORE_MEMORY};
use crate::load::{create, pipelined};
use crate::memory;
use crate::server::{four_letter_word, LaunchOptions, ServerKind};
use crate::session::{error_label, Session};
use crate::target::Target;

const IO_TIMEOUT: Duration = Duration::from_secs(120);
const FILL_SESSIONS: usize = 8;
const PER_DIR: usize = 1000;
const DATA: [u8; 100] = [b's'; 100];
const SAMPLE_EVERY: Duration = Duration::from_millis(100);
const LOAD_SESSIONS: usize = 32;
const LOAD_DEPTH: usize = 8;

fn leaf(i: usize) -> String {
    format!("/scale/d{:04}/n{i:08}", i / PER_DIR)
}

/// Creates leaves `from..to` (and the directories they need), over [`FILL_SESSIONS`] sessions.
async fn fill(addr: SocketAddr, from: usize, to: usize, timeout_ms: i32) -> anyhow::Result<()> {
    let mut s = Session::connect(addr, timeout_ms, IO_TIMEOUT).await?;
    let first_dir = if from == 0 { 0 } else { from.div_ceil(PER_DIR) };
    let mut dirs: Vec<String> = (first_dir..to.div_ceil(PER_DIR))
        .map(|d| format!("/scale/d{d:04}"))
        .collect();
    if from == 0 {
        dirs.insert(0, "/scale".into());
    }
    let reqs = dirs
        .into_iter()
        .map(|p| create(p, Bytes::new(), CreateMode::Persistent));
    let codes = pipelined(&mut s, reqs, Instant::now() + IO_TIMEOUT).await?;
    if let Some(&bad) = codes.iter().find(|&&c| c != 0) {
        bail!("creating directories: {}", error_label(bad));
    }
    s.close(Instant::now() + IO_TIMEOUT).await?;
    let mut set = JoinSet::new();
    for k in 0..FILL_SESSIONS {
        set.spawn(async move {
            let mut s = Session::connect(addr, timeout_ms, IO_TIMEOUT).await?;
            let reqs = (from..to)
                .filter(move |i| i % FILL_SESSIONS == k)
                .map(|i| create(leaf(i), Bytes::from_static(&DATA), CreateMode::Persistent));
            let codes = pipelined(&mut s, reqs, Instant::now() + IO_TIMEOUT * 10).await?;
            if let Some(&bad) = codes.iter().find(|&&c| c != 0) {
                bail!("creating znodes: {}", error_label(bad));
            }
            s.close(Instant::now() + IO_TIMEOUT).await?;
            anyhow::Ok(())
        });
    }
    while let Some(joined) = set.join_next().await {
        joined.context("a fill task failed")??;
    }
    Ok(())
}

/// See the module docs.
pub fn run(
    kind: ServerKind,
    launch: &LaunchOptions,
    params: &ScenarioParams,
    rt: &tokio::runtime::Runtime,
) -> anyhow::Result<KindOutcome> {
    let mut counts = params.znodes.clone();
    counts.sort_unstable();
    counts.dedup();
    counts.retain(|&n| n > 0);
    if counts.is_empty() {
        bail!("no znode count to fill to");
    }
    let mut target = Target::start(kind, 1, launch, None)?;
    // ZooKeeper keeps every snapshot it writes: keep its newest few, as an operator would.
    let purger = (kind == ServerKind::Apache)
        .then(|| super::zk_purge::Purger::start(&target.members[0].data_dir()));
    std::thread::sleep(Duration::from_secs(1));
    let empty = memory_of(kind, &target)?;
    let timeout = params.session_timeout_ms;
    let mut out = KindOutcome::default();
    let mut filled = 0;
    for &n in &counts {
        let addr = target.addrs()[0];
        let t = Instant::now();
        rt.block_on(fill(addr, filled, n, timeout))
            .with_context(|| format!("filling to {n} znodes"))?;
        let fill_s = t.elapsed().as_secs_f64();
        filled = n;
        // Read once the server has been quiet for a while, as an operator would see it:
        // zooraft gives what the fill freed back when writes stop, ZooKeeper is read after
        // a forced full GC.
        std::thread::sleep(QUIET_BEFORE_MEMORY);
        let mem = memory_of(kind, &target)?;
        // A graceful stop (zooraft snapshots on the way out), then the time to serving.
        target.members[0].stop();
        let restart = target.members[0].try_restart()?;
        std::thread::sleep(Duration::from_secs(1));
        let mem_restarted = memory_of(kind, &target)?;
        let label = fmt_count(n);
        out.measures.push(Measure::new(
            format!("memory at {label} znodes"),
            "MiB",
            mem.primary() as f64 / (1 << 20) as f64,
            true,
        ));
        out.measures.push(Measure::new(
            format!("bytes per znode at {label} (over the empty server)"),
            "bytes",
            mem.primary().saturating_sub(empty.primary()) as f64 / n as f64,
            true,
        ));
        out.measures.push(Measure::new(
            format!("memory after a restart at {label}"),
            "MiB",
            mem_restarted.primary() as f64 / (1 << 20) as f64,
            true,
        ));
        out.measures.push(Measure::new(
            format!("restart to serving at {label}"),
            "s",
            restart.as_secs_f64(),
            true,
        ));
        out.measures.push(Measure::new(
            format!("creates/s filling to {label}"),
            "1/s",
            (n - out.scale.last().map_or(0, |p| p.znodes)) as f64 / fill_s.max(1e-9),
            false,
        ));
        if kind == ServerKind::Apache {
            out.notes
                .push(format!("RSS at {label}: {} MiB", mem.rss >> 20));
        }
        out.scale.push(ScalePoint {
            znodes: n,
            memory: mem.primary(),
            restart_s: restart.as_secs_f64(),
        });
    }
    if !params.snapshot_load.is_zero() {
        snapshot_under_load(kind, &target, filled, params, rt, &mut out)?;
    }
    // kill -9: whatever was not written is lost and the restart replays the log.
    let crash = target.members[0].try_restart()?;
    out.measures.push(Measure::new(
        format!("restart to serving after kill -9 at {}", fmt_count(filled)),
        "s",
        crash.as_secs_f64(),
        true,
    ));
    target.stop();
    if let Some(purger) = purger {
        let freed = purger.finish();
        out.notes.push(format!(
            "old snapshots and logs purged while it ran (3 snapshots kept, as zkCleanup.sh \
             -n 3): {} MiB",
            freed >> 20
        ));
    }
    Ok(out)
}

fn fmt_count(n: usize) -> String {
    if n >= 1_000_000 && n.is_multiple_of(1_000_000) {
        format!("{}M", n / 1_000_000)
    } else if n >= 1000 && n.is_multiple_of(1000) {
        format!("{}k", n / 1000)
    } else {
        n.to_string()
    }
}

/// One sampler reading.
struct Sample {
    at: Instant,
    snapshots: u64,
    snapshot_ms: f64,
    rss: u64,
}

fn mntr_value(text: &str, key: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix('\t'))?
        .trim()
        .parse()
        .ok()
}

fn sampler(addr: SocketAddr, pid: u32, stop: Arc<AtomicBool>) -> Vec<Sample> {
    let mut out = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        let at = Instant::now();
        if let Ok(text) = four_letter_word(addr, "mntr") {
            out.push(Sample {
                at,
                snapshots: mntr_value(&text, "zk_cnt_snapshottime").unwrap_or(0.0) as u64,
                snapshot_ms: mntr_value(&text, "zk_sum_snapshottime").unwrap_or(0.0),
                rss: memory::rss_bytes(pid).unwrap_or(0),
            });
        }
        std::thread::sleep(SAMPLE_EVERY.saturating_sub(at.elapsed()));
    }
    out
}

/// setData load on `keys` for `duration`; every op's completion time and latency (µs).
async fn timed_set_load(
    addr: SocketAddr,
    keys: Arc<Vec<String>>,
    duration: Duration,
    timeout_ms: i32,
) -> anyhow::Result<Vec<(Instant, u64)>> {
    let end = Instant::now() + duration;
    let mut set = JoinSet::new();
    for k in 0..LOAD_SESSIONS {
        let keys = keys.clone();
        set.spawn(async move {
            let mut s = Session::connect(addr, timeout_ms, IO_TIMEOUT).await?;
            let mut rng = fastrand::Rng::with_seed(k as u64);
            let mut inflight: VecDeque<(i32, Instant)> = VecDeque::new();
            let mut done = Vec::new();
            loop {
                let now = Instant::now();
                while now < end && inflight.len() < LOAD_DEPTH {
                    let req = Request::SetData(SetDataRequest {
                        path: keys[rng.usize(..keys.len())].clone(),
                        data: Some(Bytes::from_static(&DATA)),
                        version: -1,
                    });
                    inflight.push_back((s.queue(&req), now));
                }
                if inflight.is_empty() {
                    break;
                }
                let deadline = now + IO_TIMEOUT;
                s.flush(deadline).await?;
                s.fill(deadline).await?;
                let t = Instant::now();
                while let Some(reply) = s.buffered_reply()? {
                    let Some((xid, started)) = inflight.pop_front() else {
                        bail!("a reply nobody asked for");
                    };
                    if reply.header.xid != xid || reply.header.err != 0 {
                        bail!("setData failed: {}", error_label(reply.header.err));
                    }
                    done.push((t, t.duration_since(started).as_micros() as u64));
                }
            }
            s.close(Instant::now() + IO_TIMEOUT).await?;
            anyhow::Ok(done)
        });
    }
    let mut all = Vec::new();
    while let Some(joined) = set.join_next().await {
        all.extend(joined.context("a load task failed")??);
    }
    Ok(all)
}

fn p99(mut v: Vec<u64>) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_unstable();
    Some(v[(v.len() * 99 / 100).min(v.len() - 1)] as f64 / 1e3)
}

/// The spans during which snapshots ran, from consecutive samples.
fn snapshot_spans(samples: &[Sample]) -> Vec<(Instant, Instant)> {
    samples
        .windows(2)
        .filter(|w| w[1].snapshots > w[0].snapshots)
        .map(|w| {
            let took =
                Duration::from_secs_f64((w[1].snapshot_ms - w[0].snapshot_ms).max(0.0) / 1e3);
            let start = w[1].at.checked_sub(took + SAMPLE_EVERY).unwrap_or(w[0].at);
            (start, w[1].at)
        })
        .collect()
}

fn snapshot_under_load(
    kind: ServerKind,
    target: &Target,
    filled: usize,
    params: &ScenarioParams,
    rt: &tokio::runtime::Runtime,
    out: &mut KindOutcome,
) -> anyhow::Result<()> {
    let addr = target.addrs()[0];
    let pid = target.pid().context("the server has no pid")?;
    let keys: Arc<Vec<String>> = Arc::new((0..filled.min(1000)).map(leaf).collect());
    let rss_before = memory::rss_bytes(pid).unwrap_or(0);
    let stop = Arc::new(AtomicBool::new(false));
    let sampler_thread = {
        let stop = stop.clone();
        std::thread::spawn(move || sampler(addr, pid, stop))
    };
    let ops = rt.block_on(timed_set_load(
        addr,
        keys,
        params.snapshot_load,
        params.session_timeout_ms,
    ));
    stop.store(true, Ordering::Relaxed);
    let samples = sampler_thread.join().unwrap_or_default();
    let ops = ops?;
    let spans = snapshot_spans(&samples);
    let during = |t: Instant| spans.iter().any(|&(a, b)| t >= a && t <= b);
    let (inside, outside): (Vec<_>, Vec<_>) = ops.iter().partition(|(t, _)| during(*t));
    let writes_per_s = ops.len() as f64 / params.snapshot_load.as_secs_f64();
    out.measures.push(Measure::new(
        "setData/s during the snapshot load",
        "1/s",
        writes_per_s,
        false,
    ));
    out.measures.push(Measure::new(
        "write p99 outside snapshots",
        "ms",
        p99(outside.iter().map(|(_, l)| *l).collect()).unwrap_or(0.0),
        true,
    ));
    if spans.is_empty() {
        out.notes.push(format!(
            "no snapshot finished during the {:?} write load ({} writes); a longer --snapshot-load would see one",
            params.snapshot_load,
            ops.len()
        ));
        return Ok(());
    }
    let in_p99 = p99(inside.iter().map(|(_, l)| *l).collect()).unwrap_or(0.0);
    let out_p99 = p99(outside.iter().map(|(_, l)| *l).collect()).unwrap_or(0.0);
    out.measures.push(Measure::new(
        "write p99 during snapshots",
        "ms",
        in_p99,
        true,
    ));
    if out_p99 > 0.0 {
        out.measures.push(Measure::new(
            "write p99 during / outside snapshots",
            "×",
            in_p99 / out_p99,
            true,
        ));
    }
    if kind == ServerKind::Zooraft {
        let peak = samples
            .iter()
            .filter(|s| during(s.at))
            .map(|s| s.rss)
            .max()
            .unwrap_or(rss_before);
        out.measures.push(Measure::new(
            "snapshot peak extra RSS",
            "MiB",
            peak.saturating_sub(rss_before) as f64 / (1 << 20) as f64,
            true,
        ));
    }
    out.notes.push(format!(
        "{} snapshot(s) during the write load, {} of {} writes completed during one",
        spans.len(),
        inside.len(),
        ops.len()
    ));
    if kind == ServerKind::Apache {
        out.notes.push(
            "ZooKeeper's snapshot extra memory is not reported: its RSS grows into its fixed \
             heap (-Xms) whatever it does, and its live heap cannot be sampled during a snapshot \
             without a full GC"
                .into(),
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leaves_are_grouped_by_thousand() {
        assert_eq!(leaf(0), "/scale/d0000/n00000000");
        assert_eq!(leaf(1999), "/scale/d0001/n00001999");
        assert_eq!(fmt_count(1_000_000), "1M");
        assert_eq!(fmt_count(250_000), "250k");
        assert_eq!(fmt_count(1234), "1234");
    }

    #[test]
    fn mntr_values_and_spans() {
        let text = "zk_version\t3.8\nzk_cnt_snapshottime\t3\nzk_sum_snapshottime\t250\n";
        assert_eq!(mntr_value(text, "zk_cnt_snapshottime"), Some(3.0));
        assert_eq!(mntr_value(text, "zk_sum_snapshottime"), Some(250.0));
        assert_eq!(mntr_value(text, "zk_cnt"), None);
        let t0 = Instant::now();
        let s = |ms: u64, n: u64, sum: f64| Sample {
            at: t0 + Duration::from_millis(ms),
            snapshots: n,
            snapshot_ms: sum,
            rss: 0,
        };
        let spans = snapshot_spans(&[s(1000, 1, 100.0), s(1100, 1, 100.0), s(1200, 2, 400.0)]);
        assert_eq!(spans.len(), 1);
        assert_eq!(spans[0].1, t0 + Duration::from_millis(1200));
        assert_eq!(spans[0].0, t0 + Duration::from_millis(800));
        assert_eq!(p99(vec![]), None);
        assert_eq!(p99((1..=100).map(|v| v * 1000).collect()), Some(100.0));
    }
}
