//! The `sessions` and `watches` scenarios: what a server holds per client session and per
//! watch, and how fast it delivers a burst of notifications.
//!
//! `sessions`: opens `--sessions` sessions (256 handshakes at a time), touching those open
//! every few seconds (an `exists /` on each, 256 sessions at a time, replies read) so none
//! nears its timeout. Memory is read before, and after a few quiet seconds (as in the scale
//! scenario): the difference over the count is the memory per session. The count is capped
//! by the open-file limit (both the bench and the server need a descriptor per session; the
//! bench raises its soft limit to the hard one, and the servers inherit it).
//!
//! `watches`: `--watch-sessions` sessions each set a data watch (exists with watch) on each
//! of `--watches / --watch-sessions` znodes; memory before, and after a few quiet seconds,
//! over the count is the memory per watch. Then one change fires `--fire` of them: a single
//! multi transaction setting the data of `--fire / --watch-sessions` znodes, each watched by
//! every session (a watch belongs to a connection, so `--fire` watches on a *single* znode
//! would need as many connections). The time is from sending the multi to the last
//! notification received.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use bytes::Bytes;
use jute::{CreateMode, ExistsRequest, MultiOp, Request, SetDataRequest};
use tokio::task::JoinSet;

use super::{memory_of, KindOutcome, Measure, ScenarioParams, QUIET_BEFORE_MEMORY};
use crate::load::{create, pipelined};
use crate::memory;
use crate::server::{LaunchOptions, ServerKind};
use crate::session::{error_label, Session};
use crate::target::Target;

const IO_TIMEOUT: Duration = Duration::from_secs(60);
/// Handshakes in flight while opening many sessions.
const OPEN_WAVE: usize = 256;
/// Descriptors kept free for everything else when sizing `sessions` to the file limit.
const FD_RESERVE: u64 = 1000;

/// Raises this process's soft open-file limit to the hard one (children inherit it);
/// returns the soft limit in force afterwards.
pub fn raise_fd_limit() -> u64 {
    // SAFETY: getrlimit/setrlimit with a valid, initialised struct.
    unsafe {
        let mut l = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut l) != 0 {
            return 1024;
        }
        if l.rlim_cur < l.rlim_max {
            let want = libc::rlimit {
                rlim_cur: l.rlim_max,
                rlim_max: l.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &want) == 0 {
                return want.rlim_cur;
            }
        }
        l.rlim_cur
    }
}

/// Opens `n` sessions to `addr`, [`OPEN_WAVE`] handshakes at a time, touching those already
/// open every few seconds so that none expires while the others are being opened.
async fn open_sessions(
    addr: SocketAddr,
    n: usize,
    timeout_ms: i32,
) -> anyhow::Result<Vec<Session>> {
    let mut out: Vec<Session> = Vec::with_capacity(n);
    let started = Instant::now();
    let mut touched = Instant::now();
    while out.len() < n {
        if touched.elapsed() > Duration::from_secs(5) {
            touch_all(&mut out).await.with_context(|| {
                format!(
                    "touching the {} sessions open after {:.1?} (the last round {:.1?} before)",
                    out.len(),
                    started.elapsed(),
                    touched.elapsed()
                )
            })?;
            touched = Instant::now();
        }
        let wave = OPEN_WAVE.min(n - out.len());
        let mut set = JoinSet::new();
        for _ in 0..wave {
            set.spawn(Session::connect(addr, timeout_ms, IO_TIMEOUT));
        }
        while let Some(joined) = set.join_next().await {
            let s = joined
                .context("a session task failed")?
                .with_context(|| format!("opening session {} of {n}", out.len() + 1))?;
            out.push(s);
        }
    }
    Ok(out)
}

/// Keeps every session alive: an `exists /` on each, [`OPEN_WAVE`] sessions at a time, each
/// window's replies read before the next is sent. (Pings sent to every session at once and
/// never read left Apache ZooKeeper with thousands of requests outstanding; it expired
/// sessions pinged every 5 s.) A failure names the session (its place in the order of
/// opening, and its id).
async fn touch_all(sessions: &mut [Session]) -> anyhow::Result<()> {
    let deadline = Instant::now() + IO_TIMEOUT;
    for (w, window) in sessions.chunks_mut(OPEN_WAVE).enumerate() {
        let place = |k: usize, s: &Session| {
            format!(
                "session {} (id {:#x})",
                w * OPEN_WAVE + k + 1,
                s.session_id()
            )
        };
        for (k, s) in window.iter_mut().enumerate() {
            s.queue(&Request::Exists(ExistsRequest {
                path: "/".to_string(),
                watch: false,
            }));
            s.flush(deadline)
                .await
                .with_context(|| format!("touching {}", place(k, s)))?;
        }
        for (k, s) in window.iter_mut().enumerate() {
            let reply = s
                .next_reply(deadline)
                .await
                .with_context(|| format!("the touch of {}", place(k, s)))?;
            if reply.header.err != 0 {
                bail!(
                    "touching {}: {}",
                    place(k, s),
                    error_label(reply.header.err)
                );
            }
        }
    }
    Ok(())
}

/// Bytes per item between two readings (0 when memory went down).
fn per_item(before: &memory::MemoryReading, after: &memory::MemoryReading, n: usize) -> f64 {
    after.primary().saturating_sub(before.primary()) as f64 / n.max(1) as f64
}

/// See the module docs.
pub fn sessions(
    kind: ServerKind,
    launch: &LaunchOptions,
    params: &ScenarioParams,
    rt: &tokio::runtime::Runtime,
) -> anyhow::Result<KindOutcome> {
    let limit = raise_fd_limit();
    let n = params
        .sessions
        .min(limit.saturating_sub(FD_RESERVE) as usize)
        .max(1);
    let mut out = KindOutcome::default();
    if n < params.sessions {
        out.notes.push(format!(
            "{n} sessions instead of {}: the open-file limit is {limit} (raise `ulimit -Hn`)",
            params.sessions
        ));
    }
    let target = Target::start(kind, 1, launch, None)?;
    let addr = target.addrs()[0];
    std::thread::sleep(Duration::from_secs(1));
    let before = memory_of(kind, &target)?;
    let t = Instant::now();
    let mut sessions = rt.block_on(open_sessions(addr, n, params.session_timeout_ms))?;
    let open_s = t.elapsed().as_secs_f64();
    rt.block_on(touch_all(&mut sessions))
        .with_context(|| format!("touching all {n} sessions once open (after {open_s:.1} s)"))?;
    // (Well within the sessions' timeout: every session was just touched.)
    std::thread::sleep(QUIET_BEFORE_MEMORY);
    let after = memory_of(kind, &target)?;
    drop(sessions);
    out.measures
        .push(Measure::new("sessions held", "", n as f64, false));
    out.measures.push(Measure::new(
        "memory per session",
        "bytes",
        per_item(&before, &after, n),
        true,
    ));
    out.measures.push(Measure::new(
        "sessions opened per second",
        "1/s",
        n as f64 / open_s.max(1e-9),
        false,
    ));
    Ok(out)
}

/// See the module docs.
pub fn watches(
    kind: ServerKind,
    launch: &LaunchOptions,
    params: &ScenarioParams,
    rt: &tokio::runtime::Runtime,
) -> anyhow::Result<KindOutcome> {
    let sessions_n = params.watch_sessions.max(1);
    let per_session = (params.watches / sessions_n).max(1);
    let fire_nodes = (params.fire / sessions_n).clamp(1, per_session);
    let total = per_session * sessions_n;
    let target = Target::start(kind, 1, launch, None)?;
    let addr = target.addrs()[0];
    let paths: Vec<String> = (0..per_session).map(|i| format!("/w/n{i:07}")).collect();
    let timeout = params.session_timeout_ms;
    rt.block_on(async {
        let mut s = Session::connect(addr, timeout, IO_TIMEOUT).await?;
        let deadline = Instant::now() + IO_TIMEOUT * 4;
        let reqs = std::iter::once("/w".to_string())
            .chain(paths.iter().cloned())
            .map(|p| create(p, Bytes::from_static(b"0123456789"), CreateMode::Persistent));
        let codes = pipelined(&mut s, reqs, deadline).await?;
        if let Some(&bad) = codes.iter().find(|&&c| c != 0) {
            bail!("creating the watched znodes: {}", error_label(bad));
        }
        s.close(deadline).await?;
        anyhow::Ok(())
    })?;
    let mut sessions = rt.block_on(open_sessions(addr, sessions_n, timeout))?;
    std::thread::sleep(Duration::from_secs(1));
    let before = memory_of(kind, &target)?;
    let t = Instant::now();
    sessions = rt.block_on(async {
        let mut set = JoinSet::new();
        for mut s in sessions {
            let paths = paths.clone();
            set.spawn(async move {
                let reqs = paths
                    .into_iter()
                    .map(|path| Request::Exists(ExistsRequest { path, watch: true }));
                let codes = pipelined(&mut s, reqs, Instant::now() + IO_TIMEOUT * 4).await?;
                if let Some(&bad) = codes.iter().find(|&&c| c != 0) {
                    bail!("exists with a watch: {}", error_label(bad));
                }
                anyhow::Ok(s)
            });
        }
        let mut back = Vec::with_capacity(sessions_n);
        while let Some(joined) = set.join_next().await {
            back.push(joined.context("a watch task failed")??);
        }
        anyhow::Ok(back)
    })?;
    let set_s = t.elapsed().as_secs_f64();
    std::thread::sleep(QUIET_BEFORE_MEMORY);
    let after = memory_of(kind, &target)?;

    // One multi transaction changes `fire_nodes` znodes, each watched by every session.
    let fired = rt.block_on(async {
        let mut writer = Session::connect(addr, timeout, IO_TIMEOUT).await?;
        let ops: Vec<MultiOp> = paths[..fire_nodes]
            .iter()
            .map(|p| {
                MultiOp::SetData(SetDataRequest {
                    path: p.clone(),
                    data: Some(Bytes::from_static(b"changed")),
                    version: -1,
                })
            })
            .collect();
        let mut set = JoinSet::new();
        let deadline = Instant::now() + IO_TIMEOUT;
        let start = Instant::now();
        writer.queue(&Request::Multi(ops));
        writer.flush(deadline).await?;
        for mut s in sessions {
            set.spawn(async move {
                s.await_notifications(fire_nodes as u64, deadline).await?;
                anyhow::Ok(Instant::now())
            });
        }
        let mut last = start;
        while let Some(joined) = set.join_next().await {
            last = last.max(joined.context("a notification task failed")??);
        }
        let reply = writer.next_reply(deadline).await?;
        if reply.header.err != 0 {
            bail!("the multi failed: {}", error_label(reply.header.err));
        }
        anyhow::Ok(last - start)
    })?;
    let mut out = KindOutcome::default();
    out.measures
        .push(Measure::new("watches held", "", total as f64, false));
    out.measures.push(Measure::new(
        "memory per watch",
        "bytes",
        per_item(&before, &after, total),
        true,
    ));
    out.measures.push(Measure::new(
        "watches set per second",
        "1/s",
        total as f64 / set_s.max(1e-9),
        false,
    ));
    out.measures.push(Measure::new(
        format!(
            "time to fire {} watches on one change",
            fire_nodes * sessions_n
        ),
        "ms",
        fired.as_secs_f64() * 1e3,
        true,
    ));
    out.notes.push(format!(
        "{sessions_n} sessions × {per_session} watched znodes; the change is one multi of {fire_nodes} setData"
    ));
    Ok(out)
}
