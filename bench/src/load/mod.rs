//! The load generator: N sessions, each keeping up to D requests in flight, for a warm-up
//! and then a measured window, against one server address.
//!
//! A run of one workload goes:
//! 1. setup, on its own session: a fresh parent znode `/zooraft-bench-<workload>-<nonce>`
//!    and, for the key-based workloads, `keys` children carrying `data_size` bytes (for
//!    `lock`, `locks` empty lock parents);
//! 2. all load sessions connect (before the clock starts);
//! 3. every session fills its pipeline to `depth`, and refills it as replies arrive, until
//!    the window ends; ops completing inside `[warm-up end, window end)` are counted and
//!    their latency (send to reply) recorded; ops in flight at the end are drained, not
//!    counted, and every session is closed with closeSession;
//! 4. optionally, the parent and everything under it is deleted again.
//!
//! Every non-zero reply code and every connection failure is tallied by kind and reported.
//! Every wait has a deadline, so a stalled server ends the run with a `timeout` error
//! instead of hanging it.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use jute::{
    CreateMode, DeleteRequest, ExistsRequest, GetChildrenRequest, GetDataRequest, OpCode, Request,
    Response, SetDataRequest,
};
use tokio::task::JoinSet;

use crate::cpu::{CpuSample, CpuUsage};
use crate::session::{error_label, Framing, Session, SessionError};
use crate::stats::{LatencySummary, Recorder};
use crate::tls::TlsClient;
use crate::workload::{Mix, Op, Workload};

mod setup;

use setup::{await_visible, cleanup, setup};
pub(crate) use setup::{create, pipelined};

/// How long any single wait on the server may take before the run counts a `timeout`.
const IO_TIMEOUT: Duration = Duration::from_secs(30);
/// How long the session that waited for a path to show may take to close.
const CLOSE_WAIT: Duration = Duration::from_secs(5);
/// How long ops still in flight at the end of the window may take to finish.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(30);
/// The data a lock node carries (Curator stores the client's address by default).
const LOCK_NODE_DATA: &[u8] = b"127.0.0.1";

/// What to run.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadSpec {
    pub workload: Workload,
    /// Sessions (TCP connections). For `connect`, concurrent connect/close loops.
    pub connections: usize,
    /// Requests (for `lock`: cycles) in flight per session. Ignored by `connect`.
    pub depth: usize,
    pub warmup: Duration,
    pub duration: Duration,
    /// Bytes of data per created or set znode.
    pub data_size: usize,
    /// Pre-created znodes for set/get/exists/mixed.
    pub keys: usize,
    /// Percentage of reads in `mixed`.
    pub read_pct: u32,
    /// Lock parents for `lock` (each cycle picks one at random), so that about
    /// `connections × depth / locks` contenders share a lock.
    pub locks: usize,
    /// Session timeout asked for in every handshake.
    pub session_timeout_ms: i32,
    /// Delete the workload's znodes afterwards.
    pub cleanup: bool,
    pub seed: u64,
    /// Connect over TLS with this client (to the servers' TLS ports).
    pub tls: Option<TlsClient>,
    /// How the measured sessions write their requests.
    pub framing: Framing,
}

impl Default for LoadSpec {
    fn default() -> Self {
        LoadSpec {
            workload: Workload::Get,
            connections: 16,
            depth: 16,
            warmup: Duration::from_secs(2),
            duration: Duration::from_secs(10),
            data_size: 100,
            keys: 1000,
            read_pct: 80,
            locks: 32,
            session_timeout_ms: 30_000,
            cleanup: false,
            seed: 0x5eed,
            tls: None,
            framing: Framing::PerRequest,
        }
    }
}

/// What one workload measured against one server.
#[derive(Debug, Clone, serde::Serialize)]
pub struct WorkloadResult {
    pub server: String,
    pub workload: Workload,
    pub unit: &'static str,
    pub connections: usize,
    pub depth: usize,
    pub data_size: usize,
    pub warmup_s: f64,
    pub measured_s: f64,
    /// Ops completed inside the measured window.
    pub ops: u64,
    pub ops_per_sec: f64,
    pub latency: LatencySummary,
    /// The latency distribution: (quantile, µs) points, for CDF charts.
    pub cdf: Vec<(f64, u64)>,
    /// Every error seen (warm-up and drain included), by kind.
    pub errors: std::collections::BTreeMap<String, u64>,
    pub cpu: CpuUsage,
    pub server_cpu_us_per_op: Option<f64>,
    /// Over TLS: what the run's handshakes (set-up and warm-up included) negotiated.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls_handshakes: Option<crate::tls::Handshakes>,
}

impl WorkloadResult {
    pub fn error_count(&self) -> u64 {
        self.errors.values().sum()
    }
}

/// Why a workload could not run at all.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("connecting to {addr}: {source}")]
    Connect {
        addr: SocketAddr,
        source: SessionError,
    },
    #[error("setup failed: {0}")]
    Setup(String),
    #[error("a load task failed: {0}")]
    Task(String),
}

/// The measured window.
#[derive(Debug, Clone, Copy)]
struct Window {
    measure_start: Instant,
    end: Instant,
}

impl Window {
    fn measures(&self, t: Instant) -> bool {
        t >= self.measure_start && t < self.end
    }
}

/// Runs one workload against `addr` and returns what it measured. `server_pid`, when
/// known, lets the result include the server's CPU use.
pub async fn run_workload(
    addr: SocketAddr,
    server_label: &str,
    server_pid: Option<u32>,
    spec: &LoadSpec,
) -> Result<WorkloadResult, LoadError> {
    run_workload_on(&[addr], server_label, server_pid.as_slice(), spec).await
}

/// [`run_workload`] against the members of an ensemble: session `i` connects to
/// `addrs[i % len]`; setup runs on the first, and the load starts once every member
/// shows the setup's last znode (followers may lag behind). The server CPU figures are
/// the sum over `server_pids`.
pub async fn run_workload_on(
    addrs: &[SocketAddr],
    server_label: &str,
    server_pids: &[u32],
    spec: &LoadSpec,
) -> Result<WorkloadResult, LoadError> {
    let Some(&addr) = addrs.first() else {
        return Err(LoadError::Setup("no server address".into()));
    };
    let tls = spec.tls.as_ref();
    if let Some(t) = tls {
        t.take_handshakes(); // count this run's only
    }
    let connections = spec.connections.max(1);
    let depth = spec.depth.max(1);
    let nonce = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros())
        .unwrap_or(0);
    let base: Arc<str> = format!("/zooraft-bench-{}-{nonce:x}", spec.workload).into();
    let data = Bytes::from(vec![b'x'; spec.data_size]);

    let keys = setup(addr, spec, &base, &data).await?;
    let last = keys.last().cloned().unwrap_or_else(|| base.to_string());
    for &member in &addrs[1..] {
        await_visible(member, spec, &last).await?;
    }

    let mut sessions = Vec::new();
    if spec.workload != Workload::Connect {
        let mut set = JoinSet::new();
        for i in 0..connections {
            let timeout = spec.session_timeout_ms;
            let member = addrs[i % addrs.len()];
            let tls = tls.cloned();
            let framing = spec.framing;
            set.spawn(async move {
                let s = Session::connect_with(member, tls.as_ref(), timeout, IO_TIMEOUT).await;
                let s = s.map(|mut s| {
                    s.set_framing(framing);
                    s
                });
                (i, s)
            });
        }
        let mut opened: Vec<(usize, Session)> = Vec::with_capacity(connections);
        while let Some(joined) = set.join_next().await {
            let (i, res) = joined.map_err(|e| LoadError::Task(e.to_string()))?;
            let s = res.map_err(|source| LoadError::Connect { addr, source })?;
            opened.push((i, s));
        }
        opened.sort_by_key(|(i, _)| *i);
        sessions = opened.into_iter().map(|(_, s)| s).collect();
    }

    let start = Instant::now();
    let window = Window {
        measure_start: start + spec.warmup,
        end: start + spec.warmup + spec.duration,
    };
    let pids = server_pids.to_vec();
    let sampler = tokio::task::spawn_blocking(move || {
        sleep_until(window.measure_start);
        let a = CpuSample::take_all(&pids);
        sleep_until(window.end);
        let b = CpuSample::take_all(&pids);
        a.usage_until(&b)
    });

    let mut tasks = JoinSet::new();
    if spec.workload == Workload::Connect {
        for i in 0..connections {
            let timeout = spec.session_timeout_ms;
            let member = addrs[i % addrs.len()];
            let tls = tls.map(TlsClient::with_own_sessions);
            tasks.spawn(drive_connect(member, tls, timeout, window));
        }
    } else {
        for (id, session) in sessions.into_iter().enumerate() {
            let worker = Worker {
                id,
                mix: spec.workload.mix(spec.read_pct),
                rng: fastrand::Rng::with_seed(spec.seed ^ (id as u64).wrapping_mul(0x9e37_79b9)),
                keys: keys.clone(),
                data: data.clone(),
                base: base.clone(),
                seq: 0,
                // Curator's protected name: `_c_<uuid>-lock-`, one uuid per lock attempt
                // in Curator; one per session here (the server sees the same shape).
                lock_name: format!(
                    "_c_{:08x}-{:04x}-4{:03x}-8{:03x}-{:012x}-lock-",
                    fastrand::u32(..),
                    id & 0xffff,
                    fastrand::u16(..0x1000),
                    fastrand::u16(..0x1000),
                    fastrand::u64(..1 << 48)
                ),
            };
            tasks.spawn(drive(session, worker, depth, window));
        }
    }

    let mut total = Recorder::new();
    while let Some(joined) = tasks.join_next().await {
        match joined {
            Ok(rec) => total.merge(&rec),
            Err(e) => total.error(format!("load task panicked: {e}")),
        }
    }
    let cpu = sampler
        .await
        .map_err(|e| LoadError::Task(format!("cpu sampler: {e}")))?;

    if spec.cleanup {
        if let Err(e) = cleanup(addr, spec, &base).await {
            total.error(format!("cleanup: {e}"));
        }
    }

    let ops = total.count();
    let measured_s = spec.duration.as_secs_f64();
    Ok(WorkloadResult {
        server: server_label.to_string(),
        workload: spec.workload,
        unit: spec.workload.unit(),
        connections,
        depth: if spec.workload == Workload::Connect {
            1
        } else {
            depth
        },
        data_size: spec.data_size,
        warmup_s: spec.warmup.as_secs_f64(),
        measured_s,
        ops,
        ops_per_sec: if measured_s > 0.0 {
            ops as f64 / measured_s
        } else {
            0.0
        },
        latency: total.summary(),
        cdf: total.cdf(),
        errors: total.errors().clone(),
        server_cpu_us_per_op: cpu.server_us_per_op(ops),
        cpu,
        tls_handshakes: tls.map(TlsClient::take_handshakes),
    })
}

fn sleep_until(t: Instant) {
    let now = Instant::now();
    if t > now {
        std::thread::sleep(t - now);
    }
}

/// Where an op in flight is.
#[derive(Debug)]
enum Step {
    /// A single request whose reply completes the op.
    Single(OpCode),
    /// Waiting for the create under lock parent `keys[i]`.
    LockCreate(usize),
    /// Waiting for getChildren of the lock parent; the created node's full path.
    LockChildren(String),
    LockDelete,
}

#[derive(Debug)]
struct InFlight {
    xid: i32,
    step: Step,
    /// When the op (for `lock`, the whole cycle) started.
    started: Instant,
}

/// What a reply did to its op.
enum Outcome {
    Done(Instant),
    Next(InFlight),
    Failed(String),
}

/// One session's op source.
struct Worker {
    id: usize,
    mix: Mix,
    rng: fastrand::Rng,
    keys: Arc<[String]>,
    data: Bytes,
    base: Arc<str>,
    seq: u64,
    /// `_c_<uuid>-lock-`: the lock node name (before the sequence suffix).
    lock_name: String,
}

impl Worker {
    fn key(&mut self) -> String {
        let i = self.rng.usize(..self.keys.len());
        self.keys[i].clone()
    }

    /// Queues the first request of a new op.
    fn start(&mut self, s: &mut Session, now: Instant) -> InFlight {
        let (req, step) = match self.mix.pick(&mut self.rng) {
            Op::Create => {
                self.seq += 1;
                let path = format!("{}/c{}-{}", self.base, self.id, self.seq);
                (
                    create(path, self.data.clone(), CreateMode::Persistent),
                    Step::Single(OpCode::Create),
                )
            }
            Op::SetData => (
                Request::SetData(SetDataRequest {
                    path: self.key(),
                    data: Some(self.data.clone()),
                    version: -1,
                }),
                Step::Single(OpCode::SetData),
            ),
            Op::GetData => (
                Request::GetData(GetDataRequest {
                    path: self.key(),
                    watch: false,
                }),
                Step::Single(OpCode::GetData),
            ),
            Op::Exists => (
                Request::Exists(ExistsRequest {
                    path: self.key(),
                    watch: false,
                }),
                Step::Single(OpCode::Exists),
            ),
            // `connect` has its own loop (drive_connect) and never reaches a Worker.
            Op::LockCycle | Op::ConnectCycle => {
                let i = self.rng.usize(..self.keys.len());
                (
                    create(
                        format!("{}/{}", self.keys[i], self.lock_name),
                        Bytes::from_static(LOCK_NODE_DATA),
                        CreateMode::EphemeralSequential,
                    ),
                    Step::LockCreate(i),
                )
            }
        };
        InFlight {
            xid: s.queue(&req),
            step,
            started: now,
        }
    }

    /// Handles the reply to `f`, queueing the op's next request if it has one.
    fn on_reply(
        &mut self,
        f: InFlight,
        mut reply: crate::session::Reply,
        s: &mut Session,
    ) -> Outcome {
        if reply.header.err != 0 {
            return Outcome::Failed(error_label(reply.header.err));
        }
        let op = match &f.step {
            Step::Single(op) => *op,
            Step::LockCreate(_) => OpCode::Create,
            Step::LockChildren(_) => OpCode::GetChildren,
            Step::LockDelete => OpCode::Delete,
        };
        let body = match Response::decode(op, &mut reply.body) {
            Ok(b) => b,
            Err(_) => return Outcome::Failed("undecodable reply".into()),
        };
        match (f.step, body) {
            (Step::Single(_), _) | (Step::LockDelete, _) => Outcome::Done(f.started),
            (Step::LockCreate(i), Response::Create(path)) => {
                let xid = s.queue(&Request::GetChildren(GetChildrenRequest {
                    path: self.keys[i].clone(),
                    watch: false,
                }));
                Outcome::Next(InFlight {
                    xid,
                    step: Step::LockChildren(path),
                    started: f.started,
                })
            }
            (Step::LockChildren(path), Response::GetChildren(children)) => {
                let name = path.rsplit('/').next().unwrap_or_default();
                if !children.iter().any(|c| c == name) {
                    return Outcome::Failed("lock node missing from getChildren".into());
                }
                let xid = s.queue(&Request::Delete(DeleteRequest { path, version: -1 }));
                Outcome::Next(InFlight {
                    xid,
                    step: Step::LockDelete,
                    started: f.started,
                })
            }
            _ => Outcome::Failed("unexpected reply body".into()),
        }
    }
}

/// One session's load loop: keep `depth` ops in flight until the window ends, drain, close.
async fn drive(mut s: Session, mut w: Worker, depth: usize, window: Window) -> Recorder {
    let mut rec = Recorder::new();
    let mut inflight: VecDeque<InFlight> = VecDeque::with_capacity(depth);
    let drain_deadline = window.end + DRAIN_TIMEOUT;
    let result: Result<(), SessionError> = async {
        loop {
            let now = Instant::now();
            if now < window.end {
                while inflight.len() < depth {
                    let f = w.start(&mut s, now);
                    inflight.push_back(f);
                }
            }
            if inflight.is_empty() {
                return Ok(());
            }
            let deadline = (now + IO_TIMEOUT).min(drain_deadline);
            s.flush(deadline).await?;
            s.fill(deadline).await?;
            let t = Instant::now();
            while let Some(reply) = s.buffered_reply()? {
                let Some(f) = inflight.pop_front() else {
                    return Err(SessionError::OutOfOrder {
                        expected: 0,
                        got: reply.header.xid,
                    });
                };
                if reply.header.xid != f.xid {
                    return Err(SessionError::OutOfOrder {
                        expected: f.xid,
                        got: reply.header.xid,
                    });
                }
                match w.on_reply(f, reply, &mut s) {
                    Outcome::Done(started) => {
                        if window.measures(t) {
                            rec.record(t.saturating_duration_since(started));
                        }
                    }
                    Outcome::Next(next) => inflight.push_back(next),
                    Outcome::Failed(kind) => rec.error(kind),
                }
            }
        }
    }
    .await;
    match result {
        Ok(()) => {
            if let Err(e) = s.close(Instant::now() + IO_TIMEOUT).await {
                rec.error(format!("closeSession: {}", e.kind()));
            }
        }
        Err(e) => {
            tracing::warn!(session = w.id, "load session failed: {e}");
            rec.error(e.kind());
        }
    }
    rec
}

/// One loop of the `connect` workload: connect, handshake, closeSession, again.
async fn drive_connect(
    addr: SocketAddr,
    tls: Option<TlsClient>,
    session_timeout_ms: i32,
    window: Window,
) -> Recorder {
    let mut rec = Recorder::new();
    loop {
        let started = Instant::now();
        if started >= window.end {
            return rec;
        }
        let cycle = async {
            let s =
                Session::connect_with(addr, tls.as_ref(), session_timeout_ms, IO_TIMEOUT).await?;
            s.close(Instant::now() + IO_TIMEOUT).await
        };
        match cycle.await {
            Ok(()) => {
                let t = Instant::now();
                if window.measures(t) {
                    rec.record(t.saturating_duration_since(started));
                }
            }
            Err(e) => {
                rec.error(e.kind());
                // Do not spin on a server that refuses connections.
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    }
}
