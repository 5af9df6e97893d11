//! The register workload, for the linearizability checker ([`crate::linear`]): clients read
//! (`sync`, then `getData`), write (`setData`) and compare-and-set (`setData` at the version
//! they last saw) znodes used as registers while the faults run, and every operation's call,
//! return and outcome is recorded. At the end each znode's history must be linearizable.
//!
//! Every `OPS_PER_KEY` (100) operations the clients move on to the next znode, so each znode's
//! history stays short, as Jepsen's independent keys do: the checker's search grows with
//! the operations in doubt (timed out, connection lost) that overlap, and a short history
//! bounds how many can.
//!
//! `sync` then `getData` is ZooKeeper's recipe for a read that is not stale; zooraft's
//! `sync` is a Raft ReadIndex round, so such a read must be linearizable, on any member,
//! through kills, pauses, partitions and lost data directories. Under `linearizableReads`
//! a plain `getData` must be too ([`Reads::Plain`]); without it plain reads can be stale,
//! as ZooKeeper's are, and the checker finds them.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use zookeeper_client as zc;

use crate::faults::Rng;
use crate::linear::{check, History, Op, Verdict, Znode, ZnodeOp, ZnodeOut};
use crate::zc::persistent;

/// Session timeout of the register clients.
const SESSION: Duration = Duration::from_secs(6);
/// Upper bound of the set-up's waits.
const WAIT: Duration = Duration::from_secs(30);

/// Operations on one znode before the clients move to the next.
const OPS_PER_KEY: u64 = 100;
/// Znodes made at the start; a run that uses them all stops its clients.
const KEYS: u64 = 300;
/// How long a client waits for one operation before it counts it as in doubt.
const OP_TIMEOUT: Duration = Duration::from_secs(4);
/// The pause between a client's operations, and after one in doubt (a client does not
/// hammer a member it cannot reach).
const PACE: Duration = Duration::from_millis(15);
const BACK_OFF: Duration = Duration::from_millis(250);
/// Search steps per znode before the checker gives up (which fails the run).
const BUDGET: u64 = 5_000_000;
/// Where the register znodes live.
const ROOT: &str = "/registers";

type RegisterHistory = History<ZnodeOp, ZnodeOut>;

/// How the clients read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reads {
    /// `sync`, then `getData`: ZooKeeper's recipe for a read that is not stale.
    AfterSync,
    /// `getData` alone: linearizable only under `linearizableReads=true`.
    Plain,
}

fn key_path(key: u64) -> String {
    format!("{ROOT}/r{key:04}")
}

/// The register clients of one scenario and what they recorded.
pub struct Registers {
    history: Arc<RegisterHistory>,
    tickets: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    tasks: Vec<tokio::task::JoinHandle<Vec<String>>>,
}

/// What the end check found.
pub struct RegisterReport {
    pub violations: Vec<String>,
    pub summary: String,
}

impl Registers {
    /// Makes the znodes (data `0`, version 0) and starts `clients` clients on `hosts`.
    pub fn start(
        rt: &tokio::runtime::Runtime,
        hosts: &str,
        clients: usize,
        reads: Reads,
        seed: u64,
    ) -> Registers {
        rt.block_on(make_keys(hosts));
        let history = Arc::new(RegisterHistory::default());
        let tickets = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let tasks = (0..clients)
            .map(|id| {
                rt.spawn(client(Client {
                    id,
                    hosts: hosts.to_string(),
                    history: history.clone(),
                    tickets: tickets.clone(),
                    stop: stop.clone(),
                    reads,
                    rng: Rng::new(seed ^ (id as u64 + 1).wrapping_mul(0x9E37_79B9)),
                }))
            })
            .collect();
        Registers {
            history,
            tickets,
            stop,
            tasks,
        }
    }

    /// Stops the clients (each finishes or abandons its operation in flight, which is then
    /// recorded) and checks every znode's history.
    pub fn finish(self, rt: &tokio::runtime::Runtime) -> RegisterReport {
        self.stop.store(true, Ordering::SeqCst);
        let mut violations = Vec::new();
        for (id, t) in self.tasks.into_iter().enumerate() {
            match rt.block_on(bounded(OP_TIMEOUT * 3, t)) {
                Some(Ok(seen)) => violations.extend(seen),
                Some(Err(e)) => violations.push(format!("register client {id} failed: {e}")),
                None => violations.push(format!("register client {id} did not stop")),
            }
        }
        let keys = (self.tickets.load(Ordering::SeqCst).div_ceil(OPS_PER_KEY)).min(KEYS);
        let (mut ops, mut doubt, mut reads, mut steps_ok) = (0usize, 0usize, 0usize, 0usize);
        for key in 0..keys {
            let history = self.history.of(key);
            ops += history.len();
            doubt += history.iter().filter(|o| o.ret.is_none()).count();
            reads += history
                .iter()
                .filter(|o| matches!(o.input, ZnodeOp::Read))
                .count();
            let init = Znode {
                data: 0,
                version: 0,
            };
            match check(&init, &history, BUDGET) {
                Verdict::Linearizable => steps_ok += 1,
                Verdict::NotLinearizable(report) => violations.push(format!(
                    "{} is not linearizable ({} operations):\n{report}",
                    key_path(key),
                    history.len()
                )),
                Verdict::Unknown { steps } => violations.push(format!(
                    "{}: the checker could not decide within {steps} steps ({} operations, \
                     {} in doubt)",
                    key_path(key),
                    history.len(),
                    history.iter().filter(|o| o.ret.is_none()).count()
                )),
            }
        }
        RegisterReport {
            violations,
            summary: format!(
                "registers: {ops} operations ({reads} reads, {doubt} writes in doubt) on {keys} \
                 znodes, {steps_ok} linearizable"
            ),
        }
    }
}

/// A session on `hosts`, or `None` if none comes within [`WAIT`].
async fn connect(hosts: &str) -> Option<zc::Client> {
    let connector = zc::Client::connector().with_session_timeout(SESSION);
    bounded(WAIT, connector.connect(hosts))
        .await
        .and_then(Result::ok)
}

async fn bounded<T>(max: Duration, f: impl std::future::Future<Output = T>) -> Option<T> {
    tokio::time::timeout(max, f).await.ok()
}

/// Creates the register znodes, many at a time.
async fn make_keys(hosts: &str) {
    let c = connect(hosts)
        .await
        .expect("a session to make the registers");
    let mut done = vec![false; KEYS as usize + 1];
    for _round in 0..10 {
        let paths: Vec<String> = std::iter::once(ROOT.to_string())
            .chain((0..KEYS).map(key_path))
            .enumerate()
            .filter(|(i, _)| !done[*i])
            .map(|(_, p)| p)
            .collect();
        if paths.is_empty() {
            return;
        }
        // The parent first, then the rest in flight together.
        let parent = bounded(WAIT, c.create(ROOT, b"", &persistent())).await;
        if matches!(parent, Some(Ok(_)) | Some(Err(zc::Error::NodeExists))) {
            done[0] = true;
        }
        let creates: Vec<_> = paths
            .iter()
            .filter(|p| p.as_str() != ROOT)
            .map(|p| c.create(p, b"0", &persistent()))
            .collect();
        for (p, f) in paths.iter().filter(|p| p.as_str() != ROOT).zip(creates) {
            if matches!(
                bounded(WAIT, f).await,
                Some(Ok(_)) | Some(Err(zc::Error::NodeExists))
            ) {
                let key: usize = p[ROOT.len() + 2..].parse().expect("our own key path");
                done[key + 1] = true;
            }
        }
    }
    panic!("could not create the register znodes under {ROOT}");
}

struct Client {
    id: usize,
    hosts: String,
    history: Arc<RegisterHistory>,
    tickets: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    reads: Reads,
    rng: Rng,
}

/// How one operation ended.
enum Outcome {
    Known(ZnodeOut),
    /// The client cannot tell whether it took effect; `expired` if its session is gone.
    Doubt {
        expired: bool,
    },
    /// An answer no register should give (the znode gone, its data not ours).
    Impossible(String),
}

/// One register client: sessions one after another (a new one when one expires), random
/// operations on the current znode. Returns what it saw that no history can explain.
async fn client(mut c: Client) -> Vec<String> {
    let mut impossible = Vec::new();
    // The version this client last saw of each znode: what its compare-and-set expects.
    let mut versions: HashMap<u64, i32> = HashMap::new();
    'session: while !c.stop.load(Ordering::SeqCst) {
        let Some(session) = connect(&c.hosts).await else {
            tokio::time::sleep(BACK_OFF).await;
            continue;
        };
        while !c.stop.load(Ordering::SeqCst) {
            let ticket = c.tickets.fetch_add(1, Ordering::SeqCst);
            let key = ticket / OPS_PER_KEY;
            if key >= KEYS {
                return impossible;
            }
            let unique = ((c.id as u64 + 1) << 40) | ticket;
            let input = match c.rng.below(10) {
                0..=3 => ZnodeOp::Read,
                4..=6 => ZnodeOp::Write(unique),
                _ => ZnodeOp::Cas {
                    version: versions.get(&key).copied().unwrap_or(0),
                    data: unique,
                },
            };
            let call = c.history.now();
            let outcome = run(&session, &key_path(key), &input, c.reads).await;
            let ret = c.history.now();
            let op = |ret, output| Op {
                client: c.id,
                call,
                ret,
                input: input.clone(),
                output,
            };
            match outcome {
                Outcome::Known(out) => {
                    if let ZnodeOut::Read { version, .. } | ZnodeOut::Written { version } = out {
                        versions.insert(key, version);
                    }
                    c.history.record(key, op(Some(ret), Some(out)));
                    tokio::time::sleep(PACE).await;
                }
                Outcome::Doubt { expired } => {
                    // A read in doubt changed nothing: it is left out.
                    if !matches!(input, ZnodeOp::Read) {
                        c.history.record(key, op(None, None));
                    }
                    tokio::time::sleep(BACK_OFF).await;
                    if expired {
                        continue 'session;
                    }
                }
                Outcome::Impossible(what) => {
                    impossible.push(format!(
                        "register client {} on {}: {what}",
                        c.id,
                        key_path(key)
                    ));
                    if !matches!(input, ZnodeOp::Read) {
                        c.history.record(key, op(None, None));
                    }
                }
            }
        }
    }
    impossible
}

async fn run(session: &zc::Client, path: &str, input: &ZnodeOp, reads: Reads) -> Outcome {
    let doubt = |e: &zc::Error| Outcome::Doubt {
        expired: matches!(e, zc::Error::SessionExpired),
    };
    match input {
        ZnodeOp::Read => {
            let read = bounded(OP_TIMEOUT, async {
                if reads == Reads::AfterSync {
                    session.sync(path).await?;
                }
                session.get_data(path).await
            })
            .await;
            match read {
                Some(Ok((data, stat))) => match std::str::from_utf8(&data)
                    .ok()
                    .and_then(|s| s.parse::<u64>().ok())
                {
                    Some(data) => Outcome::Known(ZnodeOut::Read {
                        data,
                        version: stat.version,
                    }),
                    None => Outcome::Impossible(format!("read data {data:?}")),
                },
                Some(Err(zc::Error::NoNode)) => Outcome::Impossible("read: no node".into()),
                Some(Err(e)) => doubt(&e),
                None => Outcome::Doubt { expired: false },
            }
        }
        ZnodeOp::Write(data) | ZnodeOp::Cas { data, .. } => {
            let expected = match input {
                ZnodeOp::Cas { version, .. } => Some(*version),
                _ => None,
            };
            let write = bounded(
                OP_TIMEOUT,
                session.set_data(path, data.to_string().as_bytes(), expected),
            )
            .await;
            match write {
                Some(Ok(stat)) => Outcome::Known(ZnodeOut::Written {
                    version: stat.version,
                }),
                Some(Err(zc::Error::BadVersion)) if expected.is_some() => {
                    Outcome::Known(ZnodeOut::BadVersion)
                }
                Some(Err(zc::Error::NoNode)) => Outcome::Impossible("write: no node".into()),
                Some(Err(e)) => doubt(&e),
                None => Outcome::Doubt { expired: false },
            }
        }
    }
}
