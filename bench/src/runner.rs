//! The two subcommands: `compare` (start both servers, run every workload against each,
//! alternating which goes first) and `run` (load one server that is already up).
//!
//! Both servers stay up for the whole comparison, each workload uses its own fresh parent
//! znode, and the order alternates per row (ZooKeeper first, then zooraft first, ...), so
//! neither server systematically gets the warmer (or the noisier) slot.

use std::path::{Path, PathBuf};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context};

use crate::cli::{CompareArgs, LoadArgs, RunArgs};
use crate::load::run_workload;
use crate::report::{comparison_markdown, single_markdown, Outcome, Round, Row};
use crate::server::{filesystem_type, resolve_zooraft_bin, LaunchOptions, Server, ServerKind};
use crate::workload::Workload;

/// What a finished command reports back to `main`.
pub struct Finished {
    pub markdown: String,
    pub json_path: PathBuf,
    /// Failed workloads plus errors tallied inside measured ones.
    pub problems: u64,
}

fn runtime(threads: usize) -> anyhow::Result<tokio::runtime::Runtime> {
    let rt = if threads <= 1 {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads)
            .enable_all()
            .build()?
    };
    Ok(rt)
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

fn default_json_path(cmd: &str) -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("target"));
    target
        .join("zooraft-bench")
        .join(format!("{cmd}-{}.json", unix_now()))
}

fn write_json(path: &Path, doc: &serde_json::Value) -> anyhow::Result<()> {
    if let Some(dir) = path.parent() {
        if !dir.as_os_str().is_empty() {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        }
    }
    let text = serde_json::to_string_pretty(doc)?;
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

fn problems(rows: &[Row]) -> u64 {
    rows.iter().map(Row::problems).sum()
}

fn params_json(load: &LoadArgs) -> serde_json::Value {
    serde_json::json!({
        "workloads": load.workloads.0.iter().map(|w| w.name()).collect::<Vec<_>>(),
        "duration_s": load.duration.as_secs_f64(),
        "warmup_s": load.warmup.as_secs_f64(),
        "connections": load.connections,
        "depth": load.depth,
        "data_size": load.data_size,
        "keys": load.keys,
        "read_pct": load.read_pct,
        "locks": load.locks,
        "session_timeout_ms": load.session_timeout_ms,
        "generator_threads": load.threads,
        "rounds": load.rounds,
        "seed": load.seed,
    })
}

fn machine_json() -> serde_json::Value {
    serde_json::json!({
        "cores": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
        "loadavg_at_start": std::fs::read_to_string("/proc/loadavg").unwrap_or_default().trim(),
    })
}

/// The 1-minute load average, from `/proc/loadavg`.
fn load_average() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// Says so when other processes already keep the cores busy: the ratios will be noisy.
fn warn_if_busy(rounds: usize) {
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1) as f64;
    if let Some(load) = load_average() {
        if load > cores * 0.75 {
            tracing::warn!(
                "the machine is busy before we start (load average {load:.1} on {cores} cores): \
                 expect noisy ratios; watch the `machine busy` column, and consider more \
                 --rounds than {rounds}"
            );
        }
    }
}

/// `compare`: both servers, every workload, one table.
pub fn compare(args: &CompareArgs) -> anyhow::Result<Finished> {
    let began = Instant::now();
    let kinds: Vec<ServerKind> = match args.only {
        Some(k) => vec![k],
        None => vec![ServerKind::ZooKeeper, ServerKind::Zooraft],
    };
    // Find zooraft before starting anything, so a missing binary is the first thing said.
    let zooraft_bin = if kinds.contains(&ServerKind::Zooraft) {
        Some(resolve_zooraft_bin(args.zooraft_bin.as_deref())?)
    } else {
        None
    };
    warn_if_busy(args.load.rounds);
    let data_root = args.data_root.clone().unwrap_or_else(std::env::temp_dir);
    let fs = filesystem_type(&data_root);
    if fs == "tmpfs" {
        tracing::warn!(
            "data root {} is on tmpfs: fsync costs nothing there, write figures will flatter both servers",
            data_root.display()
        );
    }
    let launch = LaunchOptions {
        data_root: data_root.clone(),
        zk_heap: args.zk_heap.clone(),
        zk_jvm_args: args.zk_jvm_arg.clone(),
        log_level: args.log_level.clone(),
        zooraft_bin: zooraft_bin.clone(),
        tick_time_ms: args.tick_time_ms,
        keep_data: args.keep_data,
    };
    let mut servers = Vec::new();
    for &k in &kinds {
        let t = Instant::now();
        let s = Server::start(k, &launch).with_context(|| format!("starting {}", k.name()))?;
        tracing::info!(
            "{} serving on {} (pid {:?}) after {:.1}s",
            k.name(),
            s.addr(),
            s.pid(),
            t.elapsed().as_secs_f64()
        );
        servers.push(s);
    }

    let rt = runtime(args.load.threads)?;
    if !args.server_warmup.is_zero() {
        for server in &servers {
            warm_up(&rt, server, args);
        }
    }
    let mut rows = Vec::new();
    let mut turn = 0usize;
    let rounds = args.load.rounds.max(1);
    for &workload in &args.load.workloads.0 {
        for &conns in &args.load.connections {
            let spec = args.load.spec(workload, conns, args.cleanup);
            let depth = if workload == Workload::Connect {
                1
            } else {
                spec.depth
            };
            let mut row = Row::new(workload, conns.max(1), depth.max(1));
            for round_no in 0..rounds {
                let mut round = Round::default();
                let mut order: Vec<usize> = (0..servers.len()).collect();
                if turn % 2 == 1 {
                    order.reverse();
                }
                turn += 1;
                for i in order {
                    let server = &servers[i];
                    std::thread::sleep(args.pause);
                    tracing::info!(
                        "{workload} {conns}×{depth} on {} (round {}/{rounds}: {:?} warm-up + {:?})",
                        server.kind().name(),
                        round_no + 1,
                        spec.warmup,
                        spec.duration
                    );
                    let outcome = measure(&rt, server, &spec);
                    round.set(server.kind(), outcome);
                }
                row.push(round);
            }
            rows.push(row);
        }
    }
    for s in &mut servers {
        s.stop();
    }
    drop(servers);

    let elapsed = began.elapsed().as_secs_f64();
    let mut markdown = comparison_markdown(&rows);
    markdown.push_str(&format!(
        "\n{} workload runs in {elapsed:.0}s; data root {} ({fs}); generator threads {}.\n",
        rows.len() * kinds.len() * rounds,
        data_root.display(),
        args.load.threads
    ));
    let json_path = args
        .load
        .json
        .clone()
        .unwrap_or_else(|| default_json_path("compare"));
    let doc = serde_json::json!({
        "command": "compare",
        "started_unix": unix_now().saturating_sub(elapsed as u64),
        "elapsed_s": elapsed,
        "machine": machine_json(),
        "params": params_json(&args.load),
        "servers": {
            "zookeeper": {
                "jar": crate::server::ZOOKEEPER_JAR,
                "heap": args.zk_heap,
                "jvm_args": args.zk_jvm_arg,
            },
            "zooraft": { "binary": zooraft_bin },
            "log_level": args.log_level,
            "server_warmup_s": args.server_warmup.as_secs_f64(),
            "tick_time_ms": args.tick_time_ms,
            "data_root": data_root,
            "data_root_fs": fs,
        },
        "rows": rows,
    });
    write_json(&json_path, &doc)?;
    Ok(Finished {
        markdown,
        json_path,
        problems: problems(&rows),
    })
}

/// Unmeasured load right after start-up: half `mixed`, half `create`, at the measured
/// concurrency. Errors are logged (the measured runs will report them again if they recur).
fn warm_up(rt: &tokio::runtime::Runtime, server: &Server, args: &CompareArgs) {
    let conns = args.load.connections.iter().copied().max().unwrap_or(1);
    for workload in [Workload::Mixed, Workload::Create] {
        let mut spec = args.load.spec(workload, conns, false);
        spec.warmup = std::time::Duration::ZERO;
        spec.duration = args.server_warmup / 2;
        tracing::info!(
            "warming up {} with {workload} for {:?}",
            server.kind().name(),
            spec.duration
        );
        match rt.block_on(run_workload(
            server.addr(),
            server.kind().name(),
            server.pid(),
            &spec,
        )) {
            Ok(r) if r.error_count() == 0 => {}
            Ok(r) => tracing::warn!("  warm-up errors: {:?}", r.errors),
            Err(e) => tracing::warn!("  warm-up failed: {e}"),
        }
    }
}

/// One workload against one of the servers `compare` started.
fn measure(rt: &tokio::runtime::Runtime, server: &Server, spec: &crate::load::LoadSpec) -> Outcome {
    match rt.block_on(run_workload(
        server.addr(),
        server.kind().name(),
        server.pid(),
        spec,
    )) {
        Ok(r) => {
            tracing::info!(
                "  {:.0} ops/s, p50 {}µs, p99 {}µs, errors {}, generator CPU {:.0}%, server CPU {}",
                r.ops_per_sec,
                r.latency.p50_us,
                r.latency.p99_us,
                r.error_count(),
                r.cpu.generator_pct,
                r.cpu
                    .server_pct
                    .map(|p| format!("{p:.0}%"))
                    .unwrap_or_else(|| "?".into())
            );
            Outcome::Measured(Box::new(r))
        }
        Err(e) => {
            tracing::error!("  failed: {e}");
            Outcome::Failed(e.to_string())
        }
    }
}

/// `run`: every workload against one running server.
pub fn run(args: &RunArgs) -> anyhow::Result<Finished> {
    let began = Instant::now();
    let rt = runtime(args.load.threads)?;
    let mut outcomes = Vec::new();
    let mut shapes = Vec::new();
    for &workload in &args.load.workloads.0 {
        for &conns in &args.load.connections {
            let spec = args.load.spec(workload, conns, !args.no_cleanup);
            tracing::info!(
                "{workload} {conns}×{} on {} ({:?} warm-up + {:?})",
                spec.depth,
                args.addr,
                spec.warmup,
                spec.duration
            );
            let outcome =
                match rt.block_on(run_workload(args.addr, &args.label, args.server_pid, &spec)) {
                    Ok(r) => Outcome::Measured(Box::new(r)),
                    Err(e) => Outcome::Failed(e.to_string()),
                };
            let depth = if workload == Workload::Connect {
                1
            } else {
                spec.depth
            };
            shapes.push((workload, conns.max(1), depth.max(1)));
            outcomes.push(outcome);
        }
    }
    if outcomes.is_empty() {
        bail!("nothing to run");
    }
    let elapsed = began.elapsed().as_secs_f64();
    let mut markdown = single_markdown(&outcomes, &shapes);
    markdown.push_str(&format!(
        "\n{} workload runs in {elapsed:.0}s.\n",
        outcomes.len()
    ));
    let json_path = args
        .load
        .json
        .clone()
        .unwrap_or_else(|| default_json_path("run"));
    let problems = outcomes
        .iter()
        .map(|o| match o {
            Outcome::Failed(_) => 1,
            Outcome::Measured(w) => w.error_count(),
        })
        .sum();
    let doc = serde_json::json!({
        "command": "run",
        "elapsed_s": elapsed,
        "machine": machine_json(),
        "params": params_json(&args.load),
        "server": { "addr": args.addr.to_string(), "label": args.label, "pid": args.server_pid },
        "results": outcomes,
    });
    write_json(&json_path, &doc)?;
    Ok(Finished {
        markdown,
        json_path,
        problems,
    })
}
