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
//! happen (with the log tail of the server concerned). Every server is killed when the
//! bench ends, however it ends (a guard, and `PR_SET_PDEATHSIG` should the bench itself be
//! killed). Data and logs live in a temporary directory under `--data-root` (default
//! `$TMPDIR`), or in `--keep DIR`, which is kept.
//!
//! Use a release `zooraft` for figures worth quoting: the default is `$ZOORAFT_BIN`, then
//! next to this executable, `$CARGO_TARGET_DIR/release/zooraft`, `target/release/zooraft`.
//! ZooKeeper runs as `java -Xmx3g -cp zookeeper.jar:slf4j-simple.jar:netty-codec.jar:
//! netty-resolver.jar ...QuorumPeerMain zoo.cfg` (Debian's jars, default collector). The
//! figures depend on the machine and its load; nothing here asserts a threshold.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, ensure, Context, Result};
use bytes::Bytes;
use jute::{Acl, CreateMode, CreateRequest, ErrorCode, ExistsRequest, Request, SetDataRequest};
use zooraft_bench::server::{four_letter_word, resolve_zooraft_bin, try_free_port};
use zooraft_bench::session::{error_label, Session};
use zooraft_bench::zk_snapshot;

const JAVA_CP: &str = "/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-simple.jar:\
                       /usr/share/java/netty-codec.jar:/usr/share/java/netty-resolver.jar";
const TICK_MS: u64 = 500;
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
/// How long `zooraft migrate cutover` may run.
const CUTOVER_TIMEOUT: Duration = Duration::from_secs(120);
/// Markers sampled across the lag load.
const MARKERS: usize = 10;

struct Options {
    znodes: u64,
    zooraft: Option<PathBuf>,
    writers: usize,
    seconds: f64,
    init_limit: Option<u32>,
    data_root: Option<PathBuf>,
    keep: Option<PathBuf>,
}

fn usage() -> ! {
    eprintln!(
        "usage: migration_bench [--znodes N] [--zooraft PATH] [--writers W] [--seconds S] \
         [--init-limit TICKS] [--data-root DIR] [--keep DIR]"
    );
    std::process::exit(2)
}

fn parse() -> Options {
    let mut o = Options {
        znodes: 1_000_000,
        zooraft: None,
        writers: 32,
        seconds: 10.0,
        init_limit: None,
        data_root: None,
        keep: None,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = |name: &str| {
            args.next().unwrap_or_else(|| {
                eprintln!("migration_bench: {name} needs a value");
                usage()
            })
        };
        fn number<T: std::str::FromStr>(v: String) -> T {
            v.replace('_', "").parse().unwrap_or_else(|_| {
                eprintln!("migration_bench: {v} is not a number");
                usage()
            })
        }
        match a.as_str() {
            "--znodes" => o.znodes = number(value("--znodes")),
            "--zooraft" => o.zooraft = Some(PathBuf::from(value("--zooraft"))),
            "--writers" => o.writers = number(value("--writers")),
            "--seconds" => o.seconds = number(value("--seconds")),
            "--init-limit" => o.init_limit = Some(number(value("--init-limit"))),
            "--data-root" => o.data_root = Some(PathBuf::from(value("--data-root"))),
            "--keep" => o.keep = Some(PathBuf::from(value("--keep"))),
            "-h" | "--help" => usage(),
            other => {
                eprintln!("migration_bench: unknown argument {other}");
                usage()
            }
        }
    }
    if o.writers == 0 || o.seconds <= 0.0 || o.znodes == 0 {
        eprintln!("migration_bench: --znodes, --writers and --seconds must be positive");
        usage()
    }
    o
}

/// Progress, on stderr, with the time since the bench started.
macro_rules! progress {
    ($t0:expr, $($arg:tt)*) => {
        eprintln!("[{:7.1} s] {}", $t0.elapsed().as_secs_f64(), format!($($arg)*))
    };
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    ZooKeeper,
    Zooraft,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::ZooKeeper => "ZooKeeper",
            Kind::Zooraft => "zooraft",
        }
    }
}

/// One `server.N` line.
#[derive(Debug, Clone)]
struct Member {
    id: u64,
    quorum: u16,
    election: u16,
    client: u16,
    observer: bool,
}

/// The ensemble's members and what every zoo.cfg holds.
struct Layout {
    members: Vec<Member>,
    init_limit: u32,
}

impl Layout {
    fn new(voters: u64, observers: u64, init_limit: u32) -> Result<Layout> {
        let mut members = Vec::new();
        for id in 1..=voters + observers {
            members.push(Member {
                id,
                quorum: try_free_port()?,
                election: try_free_port()?,
                client: try_free_port()?,
                observer: id > voters,
            });
        }
        Ok(Layout {
            members,
            init_limit,
        })
    }

    fn member(&self, id: u64) -> &Member {
        &self.members[id as usize - 1]
    }

    fn client(&self, id: u64) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.member(id).client))
    }

    /// `/zookeeper/config` as ZooKeeper writes it for these members.
    fn zookeeper_config(&self) -> String {
        let lines: Vec<zk_snapshot::ServerLine> = self
            .members
            .iter()
            .map(|m| zk_snapshot::ServerLine {
                id: m.id,
                host: "127.0.0.1".into(),
                quorum_port: m.quorum,
                election_port: m.election,
                observer: m.observer,
                client_port: m.client,
            })
            .collect();
        zk_snapshot::config_text(&lines)
    }

    fn config(&self, id: u64, kind: Kind, data: &Path) -> String {
        let me = self.member(id);
        let mut c = format!(
            "tickTime={TICK_MS}\ninitLimit={}\nsyncLimit={SYNC_LIMIT}\ndataDir={}\n\
             clientPort={}\nclientPortAddress=127.0.0.1\nmaxClientCnxns=0\n\
             4lw.commands.whitelist=*\n",
            self.init_limit,
            data.display(),
            me.client
        );
        match kind {
            Kind::ZooKeeper => {
                c.push_str("admin.enableServer=false\n");
                if me.observer {
                    c.push_str("peerType=observer\n");
                }
            }
            Kind::Zooraft => c.push_str("migrateFromZooKeeper=true\n"),
        }
        for m in &self.members {
            c.push_str(&format!(
                "server.{}=127.0.0.1:{}:{}{};127.0.0.1:{}\n",
                m.id,
                m.quorum,
                m.election,
                if m.observer { ":observer" } else { "" },
                m.client
            ));
        }
        c
    }
}

/// What `srvr` says.
#[derive(Debug, Clone, Default)]
struct Srvr {
    mode: Option<String>,
    zxid: Option<i64>,
    connections: Option<u64>,
}

fn srvr(addr: SocketAddr) -> Option<Srvr> {
    let text = four_letter_word(addr, "srvr").ok()?;
    let value = |key: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(key))
            .map(|v| v.trim().to_string())
    };
    Some(Srvr {
        mode: value("Mode:"),
        zxid: value("Zxid: 0x").and_then(|h| i64::from_str_radix(&h, 16).ok()),
        connections: value("Connections:").and_then(|c| c.parse().ok()),
    })
}

/// One `mntr` figure.
fn mntr_figure(addr: SocketAddr, key: &str) -> Option<String> {
    let text = four_letter_word(addr, "mntr").ok()?;
    text.lines().find_map(|l| {
        let (k, v) = l.split_once('\t')?;
        (k == key).then(|| v.trim().to_string())
    })
}

/// A server process, killed when dropped.
struct Proc {
    label: String,
    id: u64,
    dir: PathBuf,
    client: SocketAddr,
    child: Option<Child>,
    spawned: Instant,
}

impl Proc {
    /// Writes `dir/zoo.cfg` (data in `dir/data`, which may already hold ZooKeeper's data)
    /// and starts member `id` as `kind`; its output goes to `dir/server.log`.
    fn spawn(layout: &Layout, id: u64, kind: Kind, dir: &Path, zooraft: &Path) -> Result<Proc> {
        let data = dir.join("data");
        std::fs::create_dir_all(&data)?;
        std::fs::write(data.join("myid"), format!("{id}\n"))?;
        let cfg = dir.join("zoo.cfg");
        std::fs::write(&cfg, layout.config(id, kind, &data))?;
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join("server.log"))?;
        let mut cmd = match kind {
            Kind::ZooKeeper => {
                let mut c = Command::new("java");
                c.args(["-Xmx3g", "-Dzookeeper.admin.enableServer=false", "-cp"])
                    .arg(JAVA_CP)
                    .arg("org.apache.zookeeper.server.quorum.QuorumPeerMain")
                    .arg(&cfg);
                c
            }
            Kind::Zooraft => {
                let mut c = Command::new(zooraft);
                c.arg("--config").arg(&cfg).env("RUST_LOG", "info");
                c
            }
        };
        cmd.stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log);
        // SAFETY: prctl(2) is async-signal-safe and touches no memory of this process. The
        // server is killed when the thread that spawned it (always the main thread) ends,
        // however the bench ends.
        unsafe {
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let spawned = Instant::now();
        let child = cmd
            .spawn()
            .with_context(|| format!("cannot start {} member {id}", kind.name()))?;
        Ok(Proc {
            label: format!("{} member {id}", kind.name()),
            id,
            dir: dir.to_path_buf(),
            client: layout.client(id),
            child: Some(child),
            spawned,
        })
    }

    fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    fn log_tail(&self, lines: usize) -> String {
        let text = std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    /// An error if the process has exited (it was not stopped by us).
    fn check(&mut self) -> Result<()> {
        if let Some(child) = self.child.as_mut() {
            if let Some(status) = child.try_wait()? {
                self.child = None;
                bail!(
                    "{} exited ({status}); {}/server.log ends:\n{}",
                    self.label,
                    self.dir.display(),
                    self.log_tail(30)
                );
            }
        }
        Ok(())
    }

    /// SIGTERM, then SIGKILL after `grace`.
    fn stop(&mut self, grace: Duration) {
        if let Some(child) = self.child.take() {
            zooraft_kit::terminate(child, grace);
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Every server of the run.
struct Cluster {
    layout: Layout,
    work: PathBuf,
    zooraft: PathBuf,
    voters: Vec<Proc>,
    observers: BTreeMap<u64, Proc>,
    t0: Instant,
}

impl Cluster {
    fn check(&mut self) -> Result<()> {
        for p in self.voters.iter_mut().chain(self.observers.values_mut()) {
            p.check()?;
        }
        Ok(())
    }

    fn voter_addrs(&self) -> Vec<SocketAddr> {
        self.voters.iter().map(|v| v.client).collect()
    }

    /// ZooKeeper's leader: its client address and `srvr`.
    fn leader(&self) -> Option<(SocketAddr, Srvr)> {
        self.voters.iter().find_map(|v| {
            let s = srvr(v.client)?;
            (s.mode.as_deref() == Some("leader")).then_some((v.client, s))
        })
    }

    /// Waits until every voter serves (one leader, the others following).
    fn wait_voters(&mut self, timeout: Duration) -> Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            self.check()?;
            let modes: Vec<Option<String>> = self
                .voters
                .iter()
                .map(|v| srvr(v.client).and_then(|s| s.mode))
                .collect();
            let leaders = modes
                .iter()
                .filter(|m| m.as_deref() == Some("leader"))
                .count();
            let followers = modes
                .iter()
                .filter(|m| m.as_deref() == Some("follower"))
                .count();
            if leaders == 1 && followers == self.voters.len() - 1 {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!(
                    "the ZooKeeper voters did not all serve within {timeout:?} (modes {modes:?}); \
                     member 1's log ends:\n{}",
                    self.voters[0].log_tail(30)
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Waits (at most 60 s) until the voters use less than 15% of a core together, so that
    /// a timed sync does not share the machine with their start-up work (snapshots, JIT, GC).
    fn settle(&self) {
        let pids: Vec<u32> = self.voters.iter().filter_map(Proc::pid).collect();
        let cpu = || -> Duration {
            pids.iter()
                .filter_map(|p| zooraft_bench::cpu::process_cpu(*p))
                .sum()
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let (a, t) = (cpu(), Instant::now());
            std::thread::sleep(Duration::from_millis(500));
            let busy = (cpu().saturating_sub(a)).as_secs_f64() / t.elapsed().as_secs_f64();
            if busy < 0.15 {
                return;
            }
            if Instant::now() > deadline {
                progress!(
                    self.t0,
                    "the voters are still busy ({:.0}% of a core); going on",
                    busy * 100.0
                );
                return;
            }
        }
    }

    /// Starts observer `id` as `kind` in `work/<name>` (fresh unless it ran there before).
    fn start_observer(&mut self, id: u64, kind: Kind, name: &str) -> Result<()> {
        let dir = self.work.join(name);
        let p = Proc::spawn(&self.layout, id, kind, &dir, &self.zooraft)?;
        progress!(
            self.t0,
            "started {} (pid {})",
            p.label,
            p.pid().unwrap_or(0)
        );
        self.observers.insert(id, p);
        Ok(())
    }

    /// Waits until observer `id` serves as an observer at the ZooKeeper leader's zxid;
    /// returns the time since its process was spawned.
    fn wait_synced(&mut self, id: u64, timeout: Duration) -> Result<Duration> {
        let deadline = Instant::now() + timeout;
        let mut last = Srvr::default();
        loop {
            self.check()?;
            let p = &self.observers[&id];
            if let Some(s) = srvr(p.client) {
                if s.mode.as_deref() == Some("observer") {
                    let target = self.leader().and_then(|(_, l)| l.zxid);
                    if let (Some(z), Some(t)) = (s.zxid, target) {
                        if z >= t {
                            return Ok(p.spawned.elapsed());
                        }
                    }
                }
                last = s;
            }
            if Instant::now() > deadline {
                bail!(
                    "{} did not sync within {timeout:?} (last srvr: mode {:?}, zxid {:?}; leader {:?}); \
                     its log ends:\n{}",
                    p.label,
                    last.mode,
                    last.zxid.map(|z| format!("{z:#x}")),
                    self.leader().and_then(|(_, l)| l.zxid).map(|z| format!("{z:#x}")),
                    p.log_tail(30)
                );
            }
            std::thread::sleep(Duration::from_millis(25));
        }
    }

    /// Stops observer `id` (SIGTERM, then SIGKILL after `grace`) and forgets it.
    fn stop_observer(&mut self, id: u64, grace: Duration) {
        if let Some(mut p) = self.observers.remove(&id) {
            p.stop(grace);
        }
    }
}

/// Nearest-rank percentile of sorted values.
fn pct<T: Copy>(sorted: &[T], p: f64) -> Option<T> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

fn fmt_opt<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map_or("–".into(), |v| v.to_string())
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn deadline() -> Instant {
    Instant::now() + REQUEST_TIMEOUT
}

fn create_req(path: &str, data: &[u8]) -> Request {
    Request::Create(CreateRequest {
        path: path.into(),
        data: Some(Bytes::copy_from_slice(data)),
        acl: vec![Acl::open_unsafe()],
        flags: CreateMode::Persistent.flags(),
    })
}

async fn connect(addr: SocketAddr) -> Result<Session> {
    Session::connect(addr, SESSION_TIMEOUT_MS, CONNECT_TIMEOUT)
        .await
        .map_err(|e| anyhow!("cannot open a session on {addr}: {e}"))
}

/// Creates persistent `paths` (in order) through `s`; existing ones are fine.
async fn create_all(s: &mut Session, paths: &[String]) -> Result<()> {
    for p in paths {
        let r = s
            .call(&create_req(p, b""), deadline())
            .await
            .map_err(|e| anyhow!("create {p}: {e}"))?;
        ensure!(
            r.header.err == 0 || r.header.err == ErrorCode::NodeExists.code(),
            "create {p}: {}",
            error_label(r.header.err)
        );
    }
    Ok(())
}

/// What one writing session did.
#[derive(Debug, Default)]
struct Writer {
    /// When each successful write completed.
    done: Vec<Instant>,
    errors: BTreeMap<String, u64>,
    /// Why closing the session at the end failed, if it did.
    close_failed: Option<String>,
}

/// setData of 100 bytes on `path`, one request outstanding, until `stop`; a session that
/// fails is counted and replaced by a new one on the same server.
async fn write_loop(
    mut s: Session,
    addr: SocketAddr,
    path: String,
    stop: Arc<AtomicBool>,
) -> Writer {
    let mut w = Writer::default();
    let req = Request::SetData(SetDataRequest {
        path,
        data: Some(Bytes::from(vec![b'v'; VALUE_BYTES])),
        version: -1,
    });
    while !stop.load(Ordering::Relaxed) {
        match s.call(&req, deadline()).await {
            Ok(r) if r.header.err == 0 => w.done.push(Instant::now()),
            Ok(r) => *w.errors.entry(error_label(r.header.err)).or_default() += 1,
            Err(e) => {
                *w.errors.entry(e.kind()).or_default() += 1;
                loop {
                    if stop.load(Ordering::Relaxed) {
                        return w;
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    match Session::connect(addr, SESSION_TIMEOUT_MS, CONNECT_TIMEOUT).await {
                        Ok(n) => {
                            s = n;
                            break;
                        }
                        Err(e) => {
                            *w.errors
                                .entry(format!("reconnect: {}", e.kind()))
                                .or_default() += 1
                        }
                    }
                }
            }
        }
    }
    if let Err(e) = s.close(deadline()).await {
        w.close_failed = Some(e.kind());
    }
    w
}

fn merge_errors(writers: &[Writer]) -> BTreeMap<String, u64> {
    let mut all = BTreeMap::new();
    for w in writers {
        for (k, n) in &w.errors {
            *all.entry(k.clone()).or_default() += n;
        }
    }
    all
}

fn fmt_errors(e: &BTreeMap<String, u64>) -> String {
    let total: u64 = e.values().sum();
    if total == 0 {
        return "0".into();
    }
    let kinds: Vec<String> = e.iter().map(|(k, n)| format!("{k}: {n}")).collect();
    format!("{total} ({})", kinds.join(", "))
}

/// Samples `zk_migration_lag` of `addr` every 100 ms until `stop`: (samples, failed reads).
fn sample_lag(addr: SocketAddr, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<(Vec<u64>, u64)> {
    std::thread::spawn(move || {
        let (mut samples, mut failed) = (Vec::new(), 0u64);
        while !stop.load(Ordering::Relaxed) {
            let t = Instant::now();
            match mntr_figure(addr, "zk_migration_lag").and_then(|v| v.parse().ok()) {
                Some(v) => samples.push(v),
                None => failed += 1,
            }
            std::thread::sleep(Duration::from_millis(100).saturating_sub(t.elapsed()));
        }
        (samples, failed)
    })
}

/// One marker: ms from the create's send, and from ZooKeeper's acknowledgement (negative:
/// the observer had it first), to the watch firing on the observer.
#[derive(Debug, Clone, Copy)]
struct Marker {
    from_send: f64,
    from_ack: f64,
}

struct LagResult {
    lag: Vec<u64>,
    lag_failed: u64,
    markers: Vec<Marker>,
    writes: u64,
    window: Duration,
    errors: BTreeMap<String, u64>,
    close_failed: usize,
}

/// Part 2's load, on a runtime.
async fn lag_load(
    voters: Vec<SocketAddr>,
    leader: SocketAddr,
    observer: SocketAddr,
    writers: usize,
    seconds: f64,
) -> Result<LagResult> {
    let mut zk = connect(leader).await?;
    let mut paths = vec!["/mb-load".to_string(), "/mb-marker".to_string()];
    paths.extend((0..writers).map(|i| format!("/mb-load/w{i}")));
    create_all(&mut zk, &paths).await?;
    let mut obs = connect(observer).await?;
    let mut sessions = Vec::with_capacity(writers);
    for i in 0..writers {
        let addr = voters[i % voters.len()];
        sessions.push((addr, connect(addr).await?));
    }
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = sample_lag(observer, stop.clone());
    let start = Instant::now();
    let tasks: Vec<_> = sessions
        .into_iter()
        .enumerate()
        .map(|(i, (addr, s))| {
            tokio::spawn(write_loop(s, addr, format!("/mb-load/w{i}"), stop.clone()))
        })
        .collect();
    let markers = async {
        let mut out = Vec::new();
        for k in 0..MARKERS {
            let at = start + Duration::from_secs_f64(seconds * (k as f64 + 0.5) / MARKERS as f64);
            tokio::time::sleep_until(at.into()).await;
            let path = format!("/mb-marker/m{k}");
            let r = obs
                .call(
                    &Request::Exists(ExistsRequest {
                        path: path.clone(),
                        watch: true,
                    }),
                    deadline(),
                )
                .await
                .map_err(|e| anyhow!("exists {path} on the observer: {e}"))?;
            ensure!(
                r.header.err == ErrorCode::NoNode.code(),
                "exists {path} on the observer: {} (expected NoNode)",
                error_label(r.header.err)
            );
            let before = obs.notifications();
            let sent = Instant::now();
            let create = async {
                let r = zk.call(&create_req(&path, b"marker"), deadline()).await;
                (r, Instant::now())
            };
            let seen = async {
                let r = obs.await_notifications(before + 1, deadline()).await;
                (r, Instant::now())
            };
            let ((created, acked), (fired, seen_at)) = tokio::join!(create, seen);
            let created = created.map_err(|e| anyhow!("create {path} on ZooKeeper: {e}"))?;
            ensure!(
                created.header.err == 0,
                "create {path} on ZooKeeper: {}",
                error_label(created.header.err)
            );
            fired.map_err(|e| anyhow!("the watch on {path} did not fire on the observer: {e}"))?;
            out.push(Marker {
                from_send: ms(seen_at - sent),
                from_ack: if seen_at >= acked {
                    ms(seen_at - acked)
                } else {
                    -ms(acked - seen_at)
                },
            });
        }
        anyhow::Ok(out)
    };
    let markers = markers.await;
    let end = start + Duration::from_secs_f64(seconds);
    tokio::time::sleep_until(end.into()).await;
    stop.store(true, Ordering::Relaxed);
    let window = start.elapsed();
    let mut done = Vec::new();
    for t in tasks {
        done.push(t.await?);
    }
    let (lag, lag_failed) = sampler
        .join()
        .map_err(|_| anyhow!("the mntr sampler panicked"))?;
    let _ = obs.close(deadline()).await;
    let _ = zk.close(deadline()).await;
    let markers = markers?;
    Ok(LagResult {
        lag,
        lag_failed,
        markers,
        writes: done
            .iter()
            .map(|w| w.done.iter().filter(|t| **t <= start + window).count() as u64)
            .sum(),
        window,
        errors: merge_errors(&done),
        close_failed: done.iter().filter(|w| w.close_failed.is_some()).count(),
    })
}

/// What `zooraft migrate cutover` did.
struct CutoverRun {
    started: Instant,
    ended: Instant,
    success: bool,
    output: String,
    line: Option<String>,
    pause_ms: Option<u64>,
}

/// Runs `zooraft migrate cutover --server <server>` (output into `out`), bounded.
fn run_cutover(zooraft: &Path, server: SocketAddr, out: &Path) -> Result<CutoverRun> {
    let file = std::fs::File::create(out)?;
    let started = Instant::now();
    let mut child = Command::new(zooraft)
        .args(["migrate", "cutover", "--server", &server.to_string()])
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(file.try_clone()?)
        .stderr(file)
        .spawn()
        .context("cannot run zooraft migrate cutover")?;
    let deadline = started + CUTOVER_TIMEOUT;
    let status = loop {
        if let Some(s) = child.try_wait()? {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            bail!(
                "zooraft migrate cutover did not finish within {CUTOVER_TIMEOUT:?}; its output:\n{}",
                std::fs::read_to_string(out).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let ended = Instant::now();
    let output = std::fs::read_to_string(out).unwrap_or_default();
    let line = output
        .lines()
        .rev()
        .find(|l| l.starts_with("cutover: "))
        .map(str::to_string);
    let pause_ms = line.as_deref().and_then(|l| {
        l.split("pause_ms=")
            .nth(1)?
            .split_whitespace()
            .next()?
            .parse()
            .ok()
    });
    Ok(CutoverRun {
        started,
        ended,
        success: status.success(),
        output,
        line,
        pause_ms,
    })
}

struct CutoverResult {
    start: Instant,
    end: Instant,
    cutover: Result<CutoverRun>,
    writers: Vec<Writer>,
}

/// Part 3's load and cut-over, on a runtime.
async fn cutover_load(
    members: Vec<SocketAddr>,
    zooraft: PathBuf,
    out: PathBuf,
    writers: usize,
    seconds: f64,
) -> Result<CutoverResult> {
    let mut setup = connect(members[0]).await?;
    let mut paths = vec!["/mb-cut".to_string()];
    paths.extend((0..writers).map(|i| format!("/mb-cut/w{i}")));
    create_all(&mut setup, &paths).await?;
    setup
        .close(deadline())
        .await
        .map_err(|e| anyhow!("closing the setup session: {e}"))?;
    let mut sessions = Vec::with_capacity(writers);
    for i in 0..writers {
        let addr = members[i % members.len()];
        sessions.push((addr, connect(addr).await?));
    }
    let stop = Arc::new(AtomicBool::new(false));
    let start = Instant::now();
    let tasks: Vec<_> = sessions
        .into_iter()
        .enumerate()
        .map(|(i, (addr, s))| {
            tokio::spawn(write_loop(s, addr, format!("/mb-cut/w{i}"), stop.clone()))
        })
        .collect();
    let third = Duration::from_secs_f64((seconds / 3.0).max(1.0));
    tokio::time::sleep_until((start + third).into()).await;
    let server = members[0];
    let cutover = tokio::task::spawn_blocking(move || run_cutover(&zooraft, server, &out))
        .await
        .map_err(|e| anyhow!("the cut-over runner panicked: {e}"))?;
    let after = match &cutover {
        Ok(c) => c.ended + third,
        Err(_) => Instant::now(),
    };
    let end = (start + Duration::from_secs_f64(seconds)).max(after);
    tokio::time::sleep_until(end.into()).await;
    stop.store(true, Ordering::Relaxed);
    let mut done = Vec::new();
    for t in tasks {
        done.push(t.await?);
    }
    Ok(CutoverResult {
        start,
        end,
        cutover,
        writers: done,
    })
}

fn table_row(cells: &[String]) -> String {
    format!("| {} |", cells.join(" | "))
}

fn main() {
    if let Err(e) = run() {
        eprintln!("migration_bench: {e:#}");
        std::process::exit(1);
    }
}

fn run() -> Result<()> {
    let o = parse();
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
        o.writers,
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
        voters: Vec::new(),
        observers: BTreeMap::new(),
        t0,
    };
    for id in 1..=3 {
        let dir = work.join(format!("zookeeper{id}"));
        zk_snapshot::copy_dir(&snap_dir, &dir.join("data"))?;
        c.voters
            .push(Proc::spawn(&c.layout, id, Kind::ZooKeeper, &dir, &zooraft)?);
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
    for (id, kind, name) in [
        (4, Kind::Zooraft, "zooraft4"),
        (5, Kind::ZooKeeper, "zookeeper5-observer"),
    ] {
        c.settle();
        c.start_observer(id, kind, name)?;
        let took = c.wait_synced(id, SYNC_TIMEOUT)?;
        progress!(
            t0,
            "{} member {id} synced in {:.2} s",
            kind.name(),
            took.as_secs_f64()
        );
        std::thread::sleep(Duration::from_secs(2));
        let p = &c.observers[&id];
        let rss = p.pid().and_then(zk_snapshot::vm_hwm_mb).unwrap_or(0.0);
        sync.push((kind, id, took.as_secs_f64(), rss));
        c.stop_observer(id, Duration::from_secs(120));
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
                format!("{} (member {id})", kind.name()),
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
    c.start_observer(4, Kind::Zooraft, "zooraft4")?;
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
        o.writers,
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
        o.writers,
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
    c.start_observer(5, Kind::Zooraft, "zooraft5")?;
    c.start_observer(6, Kind::Zooraft, "zooraft6")?;
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
        o.writers,
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
        o.writers,
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
