//! The `failover` scenario: a 3-member ensemble under a write load loses its leader to
//! kill -9; how long until a write is acknowledged again?
//!
//! Background writers (setData, one in flight each, spread over all members, reconnecting
//! after any failure) keep the ensemble busy. Right after the kill, probes start on each
//! survivor: every 100 ms a new probe connects, sends one setData and waits for its reply
//! (at most 5 s; a member without a leader may close the connection or hold the request).
//! The figure is the time from the kill to the first probe write acknowledged, so a write
//! committed before the kill cannot count.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use bytes::Bytes;
use jute::{CreateMode, Request, SetDataRequest};
use tokio::task::JoinSet;

use super::{KindOutcome, Measure, ScenarioParams};
use crate::load::create;
use crate::server::{LaunchOptions, ServerKind};
use crate::session::{error_label, Session};
use crate::target::Target;

const KEY: &str = "/zooraft-bench-failover";
/// How long the ensemble may take to write again before the scenario gives up.
const GIVE_UP: Duration = Duration::from_secs(60);
const PROBE_EVERY: Duration = Duration::from_millis(100);
const PROBE_TIMEOUT: Duration = Duration::from_secs(5);
/// Writes before the kill, so the load is established.
const LOAD_BEFORE_KILL: Duration = Duration::from_secs(2);

fn set_data() -> Request {
    Request::SetData(SetDataRequest {
        path: KEY.into(),
        data: Some(Bytes::from_static(&[b'f'; 100])),
        version: -1,
    })
}

/// One write on a fresh session; `Ok` when acknowledged.
async fn probe(addr: SocketAddr, timeout_ms: i32) -> anyhow::Result<()> {
    let deadline = Instant::now() + PROBE_TIMEOUT;
    let mut s = Session::connect(addr, timeout_ms, PROBE_TIMEOUT).await?;
    let reply = s.call(&set_data(), deadline).await?;
    if reply.header.err != 0 {
        bail!("{}", error_label(reply.header.err));
    }
    Ok(())
}

/// A background writer: setData in a loop on `addr`, reconnecting after failures, until `stop`.
async fn writer(addr: SocketAddr, timeout_ms: i32, stop: Arc<AtomicBool>, acked: Arc<AtomicU64>) {
    while !stop.load(Ordering::Relaxed) {
        let Ok(mut s) = Session::connect(addr, timeout_ms, PROBE_TIMEOUT).await else {
            tokio::time::sleep(PROBE_EVERY).await;
            continue;
        };
        while !stop.load(Ordering::Relaxed) {
            match s.call(&set_data(), Instant::now() + PROBE_TIMEOUT).await {
                Ok(r) if r.header.err == 0 => {
                    acked.fetch_add(1, Ordering::Relaxed);
                }
                _ => break,
            }
        }
    }
}

/// See the module docs.
pub fn run(
    kind: ServerKind,
    launch: &LaunchOptions,
    params: &ScenarioParams,
    rt: &tokio::runtime::Runtime,
) -> anyhow::Result<KindOutcome> {
    let mut target = Target::start(kind, 3, launch, None)?;
    let leader = target
        .leader(Duration::from_secs(30))
        .context("no member says it leads")?;
    let addrs = target.addrs();
    let timeout = params.session_timeout_ms;
    rt.block_on(async {
        let mut s = Session::connect(addrs[0], timeout, PROBE_TIMEOUT).await?;
        let r = s
            .call(
                &create(KEY.into(), Bytes::new(), CreateMode::Persistent),
                Instant::now() + PROBE_TIMEOUT,
            )
            .await?;
        if r.header.err != 0 {
            bail!("creating {KEY}: {}", error_label(r.header.err));
        }
        anyhow::Ok(())
    })?;
    let stop = Arc::new(AtomicBool::new(false));
    let acked = Arc::new(AtomicU64::new(0));
    let _guard = rt.enter();
    let mut writers = JoinSet::new();
    for i in 0..params.failover_writers.max(1) {
        writers.spawn(writer(
            addrs[i % addrs.len()],
            timeout,
            stop.clone(),
            acked.clone(),
        ));
    }
    // The writers run on the runtime's thread only while we block on it.
    rt.block_on(tokio::time::sleep(LOAD_BEFORE_KILL));
    let before = acked.load(Ordering::Relaxed);
    let survivors: Vec<SocketAddr> = addrs
        .iter()
        .enumerate()
        .filter(|&(i, _)| i != leader)
        .map(|(_, a)| *a)
        .collect();
    let killed_at = Instant::now();
    target.members[leader].kill();
    let first = rt.block_on(async {
        let mut probes = JoinSet::new();
        let mut next = Instant::now();
        loop {
            if Instant::now() >= next {
                for &a in &survivors {
                    probes.spawn(probe(a, timeout));
                }
                next += PROBE_EVERY;
            }
            let wait = next.saturating_duration_since(Instant::now());
            // A failed probe (refused, closed, timed out) just makes way for the next ones.
            if let Ok(Some(Ok(Ok(())))) = tokio::time::timeout(wait, probes.join_next()).await {
                return Ok(killed_at.elapsed());
            }
            if killed_at.elapsed() > GIVE_UP {
                bail!("no write acknowledged within {GIVE_UP:?} of the leader's death");
            }
        }
    });
    stop.store(true, Ordering::Relaxed);
    rt.block_on(async {
        let _ = tokio::time::timeout(PROBE_TIMEOUT * 2, async {
            while writers.join_next().await.is_some() {}
        })
        .await;
    });
    writers.abort_all();
    let first = first?;
    let mut out = KindOutcome::default();
    out.measures.push(Measure::new(
        "leader kill -9 to first acknowledged write",
        "ms",
        first.as_secs_f64() * 1e3,
        true,
    ));
    out.measures.push(Measure::new(
        "background writes/s before the kill",
        "1/s",
        before as f64 / LOAD_BEFORE_KILL.as_secs_f64(),
        false,
    ));
    out.notes.push(format!(
        "leader was member {} of 3; {} background writers",
        leader + 1,
        params.failover_writers.max(1)
    ));
    target.stop();
    Ok(out)
}
