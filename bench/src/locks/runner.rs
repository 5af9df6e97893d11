//! `zooraft-bench locks`: start each system in turn, run the speed runs and its fault runs,
//! stop it, then print the tables and write the JSON (and the chart when asked).
//!
//! Systems run one after the other, never side by side, so none competes with another for
//! the two cores; each is stopped (its data removed) before the next starts.

use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::Context;

use super::contend::{measure, Measured, Plan};
use super::etcd::EtcdSystem;
use super::faults::FaultPlan;
use super::redis::RedisSystem;
use super::redlock::RedlockSystem;
use super::report;
use super::system::LockSystem;
use super::zk::ZkSystem;
use crate::cli::{LockFault, LockSystemKind, LocksArgs};
use crate::runner::Finished;
use crate::server::{resolve_zooraft_bin, LaunchOptions, ServerKind};
use crate::target::Target;

/// The lock path every ZooKeeper-protocol contender uses.
const ZK_LOCK_PATH: &str = "/bench/locks/mutex";

fn launch_options(args: &LocksArgs, root: &std::path::Path) -> anyhow::Result<LaunchOptions> {
    let zooraft_bin = if args
        .systems
        .iter()
        .any(|s| matches!(s, LockSystemKind::Zooraft | LockSystemKind::Zooraft3))
    {
        Some(resolve_zooraft_bin(args.zooraft_bin.as_deref())?)
    } else {
        None
    };
    Ok(LaunchOptions {
        data_root: root.to_path_buf(),
        zk_heap: args.zk_heap.clone(),
        zk_jvm_args: Vec::new(),
        log_level: args.log_level.clone(),
        zooraft_bin,
        tick_time_ms: args.tick_time_ms,
        keep_data: false,
        extra_config: Vec::new(),
        snap_count: None,
    })
}

/// A started system and the failover fault it offers, if any.
struct Started {
    system: Box<dyn LockSystem>,
    failover: Option<FaultPlan>,
}

fn start(
    kind: LockSystemKind,
    args: &LocksArgs,
    opts: &LaunchOptions,
    replica: Option<Duration>,
) -> anyhow::Result<Started> {
    let root = &opts.data_root;
    let zk = |server, members| -> anyhow::Result<Started> {
        let target = Target::start(server, members, opts, None)?;
        let sys = ZkSystem::new(target, args.ttl, ZK_LOCK_PATH);
        let failover = (members > 1).then(|| FaultPlan::Inject(sys.leader_kill()));
        Ok(Started {
            system: Box::new(sys),
            failover,
        })
    };
    match kind {
        LockSystemKind::Zooraft => zk(ServerKind::Zooraft, 1),
        LockSystemKind::Zooraft3 => zk(ServerKind::Zooraft, 3),
        LockSystemKind::Zookeeper => zk(ServerKind::Apache, 1),
        LockSystemKind::Redis => {
            let sys = RedisSystem::start(root, replica, args.ttl)?;
            let failover = sys.failover().map(FaultPlan::Inject);
            Ok(Started {
                system: Box::new(sys),
                failover,
            })
        }
        LockSystemKind::Redlock => Ok(Started {
            system: Box::new(RedlockSystem::start(root, args.ttl)?),
            failover: None,
        }),
        LockSystemKind::Etcd => Ok(Started {
            system: Box::new(EtcdSystem::start(root, args.ttl)?),
            failover: None,
        }),
    }
}

/// The plans one started system runs, in order.
fn plans(
    kind: LockSystemKind,
    started: &Started,
    args: &LocksArgs,
    replica: Option<Duration>,
) -> Vec<Plan> {
    let plan = |contenders, check_tokens, fault| Plan {
        contenders,
        duration: args.duration,
        work: args.work,
        check_tokens,
        fault,
    };
    let monotonic = started.system.monotonic();
    let mut out = Vec::new();
    if replica.is_some() {
        // The master + replica pair exists only for its failover.
        if let Some(f) = &started.failover {
            out.push(plan(args.fault_contenders, false, f.clone()));
        }
        return out;
    }
    for &n in &args.contenders {
        out.push(plan(n, monotonic, FaultPlan::None));
    }
    if args.faults.contains(&LockFault::Pause) && kind != LockSystemKind::Zooraft3 {
        out.push(plan(args.fault_contenders, false, FaultPlan::Pause));
        if monotonic {
            out.push(plan(args.fault_contenders, true, FaultPlan::Pause));
        }
    }
    if args.faults.contains(&LockFault::LeaderKill) {
        if let Some(f) = &started.failover {
            out.push(plan(args.fault_contenders, true, f.clone()));
        }
    }
    out
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// `locks`.
pub fn run(args: &LocksArgs) -> anyhow::Result<Finished> {
    if args
        .contenders
        .iter()
        .chain([&args.fault_contenders])
        .any(|n| *n == 0)
    {
        anyhow::bail!("--contenders and --fault-contenders must be at least 1");
    }
    if args.ttl < Duration::from_secs(1) {
        anyhow::bail!("--ttl must be at least 1s (etcd leases are whole seconds)");
    }
    let base = match &args.data_root {
        Some(d) => d.clone(),
        None => std::env::temp_dir(),
    };
    std::fs::create_dir_all(&base).with_context(|| format!("creating {}", base.display()))?;
    let root = tempfile::Builder::new()
        .prefix("zooraft-bench-locks-")
        .tempdir_in(&base)?;
    let opts = launch_options(args, root.path())?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let mut runs: Vec<Measured> = Vec::new();
    let mut monotonic: Vec<(String, bool)> = Vec::new();
    let mut problems = 0u64;
    let mut order: Vec<(LockSystemKind, Option<Duration>)> =
        args.systems.iter().map(|k| (*k, None)).collect();
    if args.faults.contains(&LockFault::Failover) && args.systems.contains(&LockSystemKind::Redis) {
        order.push((LockSystemKind::Redis, Some(Duration::ZERO)));
        if !args.replica_lag.is_zero() {
            order.push((LockSystemKind::Redis, Some(args.replica_lag)));
        }
    }
    for (kind, replica) in order {
        tracing::info!(
            "starting {kind:?}{}",
            if replica.is_some() {
                " with a replica"
            } else {
                ""
            }
        );
        let started = {
            // The delaying proxy of a lagging replica runs on the runtime.
            let _entered = rt.enter();
            start(kind, args, &opts, replica)
        };
        let started = match started {
            Ok(s) => s,
            Err(e) => {
                tracing::error!("{kind:?}: {e:#}");
                eprintln!("zooraft-bench locks: {kind:?} did not start: {e:#}");
                problems += 1;
                continue;
            }
        };
        monotonic.push((started.system.name(), started.system.monotonic()));
        for plan in plans(kind, &started, args, replica) {
            tracing::info!(
                "{}: {} contenders, fault {}, token check {}",
                started.system.name(),
                plan.contenders,
                plan.fault.name(),
                plan.check_tokens
            );
            match rt.block_on(measure(started.system.as_ref(), &plan)) {
                Ok(m) => {
                    problems += u64::from(m.fault == "none" && m.tally.overlaps > 0);
                    runs.push(m);
                }
                Err(e) => {
                    eprintln!("zooraft-bench locks: {}: {e:#}", started.system.name());
                    problems += 1;
                }
            }
        }
        // Contenders' tasks end with their runs; the servers go with `started`.
        drop(started);
    }
    rt.shutdown_timeout(Duration::from_secs(5));
    let is_monotonic = |name: &str| monotonic.iter().any(|(n, m)| n == name && *m);
    let markdown = report::markdown(&runs, is_monotonic, args.ttl.as_secs_f64());
    let json_path = args.json.clone().unwrap_or_else(|| {
        std::env::var_os("CARGO_TARGET_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("target"))
            .join("zooraft-bench")
            .join(format!("locks-{}.json", unix_now()))
    });
    let doc = serde_json::json!({
        "command": "locks",
        "params": {
            "contenders": args.contenders,
            "fault_contenders": args.fault_contenders,
            "duration_s": args.duration.as_secs_f64(),
            "work_s": args.work.as_secs_f64(),
            "ttl_s": args.ttl.as_secs_f64(),
            "tick_time_ms": args.tick_time_ms,
            "pause": "in-process: the holder stops heartbeats/renewals (ZooKeeper protocol: its TCP connection frozen at a proxy) and sleeps",
            "redis_wait": "retry SET NX after a 2-6 ms jittered backoff (no pub/sub, no watchdog)",
        },
        "machine": {
            "cores": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
            "loadavg_at_end": std::fs::read_to_string("/proc/loadavg").unwrap_or_default().trim(),
        },
        "runs": runs,
    });
    if let Some(dir) = json_path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    std::fs::write(&json_path, serde_json::to_string_pretty(&doc)?)
        .with_context(|| format!("writing {}", json_path.display()))?;
    let mut markdown = markdown;
    if let Some(dir) = &args.charts {
        let chart = report::chart(dir, &runs)?;
        markdown.push_str(&format!("\nChart: {}\n", chart.display()));
    }
    Ok(Finished {
        markdown,
        json_path,
        problems,
    })
}
