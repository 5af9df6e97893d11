//! Command-line arguments of `zooraft-bench` (`compare` and `run`), and their parsing.
//!
//! Defaults are chosen for the 2-core machine the comparison runs on (see the crate docs):
//! enough sessions and pipelining to saturate Apache ZooKeeper's write path (group commit
//! needs many writes in flight per fsync) without the single-threaded generator itself
//! becoming the bottleneck on reads.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use crate::load::LoadSpec;
use crate::scenario::{parse_scenarios, Scenario, ScenarioParams};
use crate::server::ServerKind;
use crate::session::Framing;
use crate::workload::{parse_workloads, Workload};

#[derive(Debug, Parser)]
#[command(
    name = "zooraft-bench",
    about = "Pipelined load generator: zooraft against Apache ZooKeeper 3.8, side by side"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Start Apache ZooKeeper and zooraft, run every workload against both, print a table.
    Compare(Box<CompareArgs>),
    /// Load one server that is already running (e.g. to profile it).
    Run(Box<RunArgs>),
    /// Lock services side by side: zooraft, ZooKeeper, Redis, Redlock, etcd; speed and
    /// safety under faults, counted by a resource that records every entry.
    Locks(Box<LocksArgs>),
}

/// The workload parameters both subcommands share.
#[derive(Debug, Clone, Args)]
pub struct LoadArgs {
    /// Comma-separated workloads: create,set,get,exists,mixed,lock,connect, all, or none
    /// (e.g. to run only --scenarios or --tls).
    #[arg(long, short = 'w', default_value = "all", value_parser = parse_workload_list)]
    pub workloads: WorkloadList,
    /// Measured time per workload and server (e.g. 10s, 500ms, 1m).
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    pub duration: Duration,
    /// Unmeasured load before the measured window (JIT, caches, group commit settle).
    #[arg(long, default_value = "2s", value_parser = parse_duration)]
    pub warmup: Duration,
    /// Sessions (TCP connections); a comma-separated list sweeps several levels. For
    /// `connect`: concurrent connect/close loops.
    #[arg(long, short = 'c', value_delimiter = ',', default_value = "32")]
    pub connections: Vec<usize>,
    /// Requests in flight per session (pipelining depth); `lock` counts whole cycles.
    #[arg(long, short = 'd', default_value_t = 8)]
    pub depth: usize,
    /// How each session writes its requests: `per-request` (one `write` per request, as
    /// ZooKeeper's clients send) or `batched` (the whole pipeline in one `write`).
    #[arg(long, value_enum, default_value_t = Framing::PerRequest)]
    pub framing: Framing,
    /// Bytes of data per created or set znode.
    #[arg(long, default_value_t = 100)]
    pub data_size: usize,
    /// Pre-created znodes that set/get/exists/mixed pick from (uniformly).
    #[arg(long, default_value_t = 1000)]
    pub keys: usize,
    /// Percentage of getData in `mixed` (the rest is setData).
    #[arg(long, default_value_t = 80, value_parser = clap::value_parser!(u32).range(0..=100))]
    pub read_pct: u32,
    /// Lock parents for `lock`; each cycle picks one, so about connections × depth / locks
    /// contenders share a lock (and each getChildren lists that many).
    #[arg(long, default_value_t = 32)]
    pub locks: usize,
    /// Session timeout asked for in every handshake.
    #[arg(long, default_value_t = 30_000)]
    pub session_timeout_ms: i32,
    /// Repetitions of every measurement; with more than one, `compare` pairs the servers
    /// round by round and reports the median ratio and its range.
    #[arg(long, default_value_t = 3)]
    pub rounds: usize,
    /// Worker threads of the load generator (1 = one core at most for the client).
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// Seed of the key and op choices.
    #[arg(long, default_value_t = 0x5eed)]
    pub seed: u64,
    /// Where to write the JSON results (default: `<target dir>/zooraft-bench/<cmd>-<time>.json`).
    #[arg(long)]
    pub json: Option<PathBuf>,
}

impl LoadArgs {
    /// The spec of one workload at one connection level.
    pub fn spec(&self, workload: Workload, connections: usize, cleanup: bool) -> LoadSpec {
        LoadSpec {
            workload,
            connections,
            depth: self.depth,
            warmup: self.warmup,
            duration: self.duration,
            data_size: self.data_size,
            keys: self.keys,
            read_pct: self.read_pct,
            locks: self.locks,
            session_timeout_ms: self.session_timeout_ms,
            framing: self.framing,
            cleanup,
            seed: self.seed,
            tls: None,
        }
    }
}

#[derive(Debug, Clone, Args)]
pub struct CompareArgs {
    #[command(flatten)]
    pub load: LoadArgs,
    /// Run only one of the servers (e.g. `zookeeper` while zooraft does not exist yet).
    #[arg(long)]
    pub only: Option<ServerKind>,
    /// The zooraft release binary (default: $ZOORAFT_BIN, next to this executable,
    /// $CARGO_TARGET_DIR/release/zooraft, target/release/zooraft).
    #[arg(long)]
    pub zooraft_bin: Option<PathBuf>,
    /// ZooKeeper's JVM heap (-Xms and -Xmx).
    #[arg(long, default_value = "2g")]
    pub zk_heap: String,
    /// An extra JVM argument for ZooKeeper (repeatable), e.g. --zk-jvm-arg=-XX:+UseParallelGC.
    #[arg(long, allow_hyphen_values = true)]
    pub zk_jvm_arg: Vec<String>,
    /// Directory under which both servers' data directories are created (same filesystem
    /// for both). Default: the system temp directory.
    #[arg(long)]
    pub data_root: Option<PathBuf>,
    /// Server log level for both (slf4j-simple level for ZooKeeper, RUST_LOG for zooraft).
    #[arg(long, default_value = "warn")]
    pub log_level: String,
    /// ZooKeeper's tickTime, also written into zooraft's zoo.cfg.
    #[arg(long, default_value_t = 2000)]
    pub tick_time_ms: u32,
    /// Keep the servers' data directories and logs.
    #[arg(long)]
    pub keep_data: bool,
    /// Idle time between two measurements (lets the previous run's background work finish).
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    pub pause: Duration,
    /// Unmeasured mixed and create load on each server after it starts, so the JVM's JIT
    /// (and any server cache) is warm before the first measurement.
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    pub server_warmup: Duration,
    /// Delete each workload's znodes after it ran (slower; servers are discarded anyway).
    #[arg(long)]
    pub cleanup: bool,
    /// Members per server kind for the throughput workloads: 1 (standalone) or an
    /// ensemble (e.g. 3), load sessions spread over the members.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=9))]
    pub ensemble: u16,
    /// Workloads to run over TLS too (e.g. get,set,connect), on servers with a TLS port and
    /// the same certificates, each also measured on the same servers' plain port
    /// (`connect` twice over TLS: resuming sessions, and full handshakes only).
    #[arg(long, default_value = "none", value_parser = parse_workload_list)]
    pub tls: WorkloadList,
    /// Scenarios on fresh servers: failover, sessions, watches, scale, all, none.
    #[arg(long, default_value = "none", value_parser = parse_scenarios)]
    pub scenarios: ScenarioList,
    /// `sessions`: concurrent sessions to hold (capped by the open-file limit).
    #[arg(long, default_value_t = 20_000)]
    pub sessions: usize,
    /// `watches`: data watches to hold in all.
    #[arg(long, default_value_t = 1_000_000)]
    pub watches: usize,
    /// `watches`: sessions that hold them (each watches watches/watch-sessions znodes).
    #[arg(long, default_value_t = 100)]
    pub watch_sessions: usize,
    /// `watches`: notifications one change fires.
    #[arg(long, default_value_t = 100_000)]
    pub fire: usize,
    /// `scale`: znode counts to fill to, in order (memory and restart at each).
    #[arg(long, value_delimiter = ',', default_value = "1000000")]
    pub znodes: Vec<usize>,
    /// `scale`: length of the write load that should see a snapshot (0s: skip). zooraft
    /// snapshots after `snapshotEntries` Raft entries (each a batch of writes) or 64 MiB of
    /// entries, so it needs more writes than ZooKeeper to take one: see --snap-count.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    pub snapshot_load: Duration,
    /// Writes between two snapshots for both servers (ZooKeeper's snapCount, zooraft's
    /// snapshotEntries); default: theirs (100,000 each).
    #[arg(long)]
    pub snap_count: Option<u64>,
    /// `failover`: background writer sessions.
    #[arg(long, default_value_t = 8)]
    pub failover_writers: usize,
    /// Directory for the SVG charts (default: beside the JSON file).
    #[arg(long)]
    pub charts: Option<PathBuf>,
}

impl CompareArgs {
    /// The scenarios' sizes.
    pub fn scenario_params(&self) -> ScenarioParams {
        ScenarioParams {
            sessions: self.sessions,
            watches: self.watches,
            watch_sessions: self.watch_sessions,
            fire: self.fire,
            znodes: self.znodes.clone(),
            snapshot_load: self.snapshot_load,
            failover_writers: self.failover_writers,
            session_timeout_ms: self.load.session_timeout_ms,
            read_load: self.load.spec(
                crate::workload::Workload::Get,
                self.load.connections.first().copied().unwrap_or(32),
                true,
            ),
        }
    }
}

/// A parsed `--scenarios` list.
pub type ScenarioList = Vec<Scenario>;

#[derive(Debug, Clone, Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub load: LoadArgs,
    /// The server to load.
    #[arg(long, default_value = "127.0.0.1:2181")]
    pub addr: SocketAddr,
    /// The server's process id, to report its CPU use.
    #[arg(long)]
    pub server_pid: Option<u32>,
    /// A name for the server in the report.
    #[arg(long, default_value = "server")]
    pub label: String,
    /// Leave the workloads' znodes in the server.
    #[arg(long)]
    pub no_cleanup: bool,
}

/// A lock system `locks` can compare.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LockSystemKind {
    /// zooraft standalone, our `Mutex`.
    Zooraft,
    /// A 3-member zooraft ensemble (the leader-kill fault runs on it).
    Zooraft3,
    /// Apache ZooKeeper 3.8 standalone, the same recipe.
    Zookeeper,
    /// One redis-server: SET NX PX + Lua compare-and-delete.
    Redis,
    /// Redlock over three independent redis-server masters.
    Redlock,
    /// etcd 3.4: lease + create-revision queue, as `concurrency.Mutex`.
    Etcd,
}

/// A fault `locks` can inject.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LockFault {
    /// A holder paused past its TTL or session timeout (each system but zooraft3).
    Pause,
    /// The Redis master killed, its replica promoted (a master + replica pair).
    Failover,
    /// The zooraft ensemble's leader killed with SIGKILL (needs zooraft3).
    LeaderKill,
    /// No fault runs.
    None,
}

#[derive(Debug, Clone, Args)]
pub struct LocksArgs {
    /// Comma-separated systems to compare.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "zooraft,zooraft3,zookeeper,redis,redlock,etcd"
    )]
    pub systems: Vec<LockSystemKind>,
    /// Contender counts for the speed runs (each its own connection or session).
    #[arg(long, short = 'c', value_delimiter = ',', default_value = "16,64")]
    pub contenders: Vec<usize>,
    /// Measured time of each speed run (fault runs last until their fault played out).
    #[arg(long, default_value = "3s", value_parser = parse_duration)]
    pub duration: Duration,
    /// Work inside the critical section (0s: a yield only).
    #[arg(long, default_value = "0s", value_parser = parse_duration)]
    pub work: Duration,
    /// Comma-separated faults.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "pause,failover,leader-kill"
    )]
    pub faults: Vec<LockFault>,
    /// The failover fault also runs with the replica's replication stream held back by
    /// this lag (0s: only the direct link).
    #[arg(long, default_value = "500ms", value_parser = parse_duration)]
    pub replica_lag: Duration,
    /// Contenders in the fault runs.
    #[arg(long, default_value_t = 8)]
    pub fault_contenders: usize,
    /// Redis' PX, etcd's lease TTL and the ZooKeeper session timeout.
    #[arg(long, default_value = "2s", value_parser = parse_duration)]
    pub ttl: Duration,
    /// Where to write the JSON results (default: `<target dir>/zooraft-bench/locks-<time>.json`).
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Directory for the SVG chart (`locks-compared.svg`); none unless given.
    #[arg(long)]
    pub charts: Option<PathBuf>,
    /// The zooraft release binary (default as for `compare`).
    #[arg(long)]
    pub zooraft_bin: Option<PathBuf>,
    /// Directory under which every server's data directory is created (default: the
    /// system temp directory).
    #[arg(long)]
    pub data_root: Option<PathBuf>,
    /// ZooKeeper's JVM heap.
    #[arg(long, default_value = "512m")]
    pub zk_heap: String,
    /// tickTime of zooraft and ZooKeeper (the session timeout must be at least twice it).
    #[arg(long, default_value_t = 500)]
    pub tick_time_ms: u32,
    /// Server log level (zooraft's RUST_LOG, ZooKeeper's slf4j-simple level).
    #[arg(long, default_value = "warn")]
    pub log_level: String,
}

/// A parsed `--workloads` list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkloadList(pub Vec<Workload>);

fn parse_workload_list(s: &str) -> Result<WorkloadList, String> {
    parse_workloads(s).map(WorkloadList)
}

/// Parses `10s`, `500ms`, `2m`, `1.5s`, `250us`, or a bare number of seconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let value: f64 = num
        .parse()
        .map_err(|_| format!("invalid duration {s:?} (e.g. 10s, 500ms, 2m)"))?;
    let secs = match unit.trim() {
        "" | "s" | "sec" | "secs" => value,
        "ms" => value / 1e3,
        "us" | "µs" => value / 1e6,
        "m" | "min" => value * 60.0,
        "h" => value * 3600.0,
        other => return Err(format!("invalid duration unit {other:?} in {s:?}")),
    };
    if !secs.is_finite() || !(0.0..=1e7).contains(&secs) {
        return Err(format!("duration {s:?} out of range"));
    }
    Ok(Duration::from_secs_f64(secs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse() {
        assert_eq!(parse_duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("7"), Ok(Duration::from_secs(7)));
        assert_eq!(parse_duration("250us"), Ok(Duration::from_micros(250)));
        assert!(parse_duration("").is_err());
        assert!(parse_duration("ten seconds").is_err());
        assert!(parse_duration("5 parsecs").is_err());
        assert!(parse_duration("-1s").is_err());
    }

    #[test]
    fn compare_defaults() {
        let cli = Cli::try_parse_from(["zooraft-bench", "compare"]).expect("parses");
        let Command::Compare(a) = cli.command else {
            panic!("not compare")
        };
        assert_eq!(a.load.workloads.0, Workload::ALL.to_vec());
        assert_eq!(a.load.duration, Duration::from_secs(5));
        assert_eq!(a.load.warmup, Duration::from_secs(2));
        assert_eq!(a.load.rounds, 3);
        assert_eq!(a.server_warmup, Duration::from_secs(5));
        assert_eq!(a.load.connections, vec![32]);
        assert_eq!(a.load.threads, 1);
        assert_eq!(a.only, None);
        assert_eq!(a.zk_heap, "2g");
        assert_eq!(a.log_level, "warn");
        assert!(!a.cleanup);
    }

    #[test]
    fn compare_with_everything_set() {
        let cli = Cli::try_parse_from([
            "zooraft-bench",
            "compare",
            "--duration",
            "5s",
            "--warmup=500ms",
            "--connections",
            "1,8,64",
            "-d",
            "4",
            "--workloads",
            "get,lock",
            "--only",
            "zookeeper",
            "--zooraft-bin",
            "/tmp/zr",
            "--zk-jvm-arg=-XX:+UseParallelGC",
            "--zk-jvm-arg",
            "-Xss1m",
            "--read-pct",
            "95",
            "--json",
            "out.json",
        ])
        .expect("parses");
        let Command::Compare(a) = cli.command else {
            panic!("not compare")
        };
        assert_eq!(a.load.duration, Duration::from_secs(5));
        assert_eq!(a.load.warmup, Duration::from_millis(500));
        assert_eq!(a.load.connections, vec![1, 8, 64]);
        assert_eq!(a.load.depth, 4);
        assert_eq!(a.load.workloads.0, vec![Workload::Get, Workload::Lock]);
        assert_eq!(a.only, Some(ServerKind::Apache));
        assert_eq!(a.zooraft_bin, Some(PathBuf::from("/tmp/zr")));
        assert_eq!(a.zk_jvm_arg, vec!["-XX:+UseParallelGC", "-Xss1m"]);
        assert_eq!(a.load.read_pct, 95);
        assert_eq!(a.load.json, Some(PathBuf::from("out.json")));
        let spec = a.load.spec(Workload::Get, 8, false);
        assert_eq!(spec.connections, 8);
        assert_eq!(spec.depth, 4);
    }

    #[test]
    fn run_takes_an_address() {
        let cli = Cli::try_parse_from([
            "zooraft-bench",
            "run",
            "--addr",
            "127.0.0.1:2181",
            "-w",
            "mixed",
            "--server-pid",
            "42",
        ])
        .expect("parses");
        let Command::Run(a) = cli.command else {
            panic!("not run")
        };
        assert_eq!(a.addr, "127.0.0.1:2181".parse().unwrap());
        assert_eq!(a.server_pid, Some(42));
        assert_eq!(a.load.workloads.0, vec![Workload::Mixed]);
        assert!(!a.no_cleanup);
    }

    #[test]
    fn locks_defaults_and_lists() {
        let cli = Cli::try_parse_from(["zooraft-bench", "locks"]).expect("parses");
        let Command::Locks(a) = cli.command else {
            panic!("not locks")
        };
        assert_eq!(a.systems.len(), 6);
        assert_eq!(a.contenders, vec![16, 64]);
        assert_eq!(a.ttl, Duration::from_secs(2));
        let cli = Cli::try_parse_from([
            "zooraft-bench",
            "locks",
            "--systems",
            "redis,etcd",
            "--faults",
            "none",
            "-c",
            "4",
        ])
        .expect("parses");
        let Command::Locks(a) = cli.command else {
            panic!("not locks")
        };
        assert_eq!(a.systems, vec![LockSystemKind::Redis, LockSystemKind::Etcd]);
        assert_eq!(a.faults, vec![LockFault::None]);
        assert!(Cli::try_parse_from(["zooraft-bench", "locks", "--systems", "consul"]).is_err());
    }

    #[test]
    fn bad_arguments_are_refused() {
        for args in [
            vec!["zooraft-bench", "compare", "--read-pct", "101"],
            vec!["zooraft-bench", "compare", "--workloads", "scan"],
            vec!["zooraft-bench", "compare", "--only", "etcd"],
            vec!["zooraft-bench", "compare", "--duration", "soon"],
            vec!["zooraft-bench", "run", "--addr", "not-an-address"],
            vec!["zooraft-bench"],
        ] {
            assert!(Cli::try_parse_from(&args).is_err(), "{args:?} was accepted");
        }
    }
}
