//! The two subcommands: `compare` (start both servers, run every workload against each,
//! alternating which goes first; then the TLS variants on TLS-enabled servers and the
//! scenarios, each on fresh servers) and `run` (load one server that is already up).
//!
//! Both servers stay up for the whole comparison, each workload uses its own fresh parent
//! znode, and the order alternates per row (ZooKeeper first, then zooraft first, ...), so
//! neither server systematically gets the warmer (or the noisier) slot.

use std::path::{Path, PathBuf};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context};

use crate::cli::{CompareArgs, LoadArgs, RunArgs};
use crate::load::{run_workload, run_workload_on, LoadSpec};
use crate::report::{comparison_markdown, single_markdown, tls_markdown, Outcome, Round, Row};
use crate::scenario::ScenarioResult;
use crate::server::{filesystem_type, resolve_zooraft_bin, LaunchOptions, ServerKind};
use crate::session::Framing;
use crate::target::Target;
use crate::tls::{Pki, TlsClient};
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

/// Which framing the figures below were taken with: every published figure says so.
fn framing_line(framing: Framing) -> String {
    match framing {
        Framing::PerRequest => {
            "Requests written one per `write` (as ZooKeeper's clients send them).\n\n".into()
        }
        Framing::Batched => {
            "Requests written a pipeline per `write` (`--framing batched`), not as ZooKeeper's clients send them.\n\n"
                .into()
        }
    }
}

fn params_json(load: &LoadArgs) -> serde_json::Value {
    serde_json::json!({
        "workloads": load.workloads.0.iter().map(|w| w.name()).collect::<Vec<_>>(),
        "duration_s": load.duration.as_secs_f64(),
        "warmup_s": load.warmup.as_secs_f64(),
        "connections": load.connections,
        "depth": load.depth,
        "framing": load.framing.name(),
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

/// `compare`: both servers, every workload, then the TLS variants and the scenarios, each
/// part on its own servers; tables, JSON and charts.
pub fn compare(args: &CompareArgs) -> anyhow::Result<Finished> {
    let began = Instant::now();
    let kinds: Vec<ServerKind> = match args.only {
        Some(k) => vec![k],
        None => vec![ServerKind::Apache, ServerKind::Zooraft],
    };
    // Find zooraft before starting anything, so a missing binary is the first thing said.
    let zooraft_bin = if kinds.contains(&ServerKind::Zooraft) {
        Some(resolve_zooraft_bin(args.zooraft_bin.as_deref())?)
    } else {
        None
    };
    if args.load.workloads.0.is_empty() && args.tls.0.is_empty() && args.scenarios.is_empty() {
        bail!("nothing to run: no workload, no --tls workload and no --scenarios");
    }
    // Many sessions (and their servers, which inherit the limit) need many descriptors.
    let fd_limit = crate::scenario::clients::raise_fd_limit();
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
        extra_config: Vec::new(),
        snap_count: args.snap_count,
    };
    let rt = runtime(args.load.threads)?;
    let ensemble = usize::from(args.ensemble);

    let mut rows = Vec::new();
    if !args.load.workloads.0.is_empty() {
        let targets = start_targets(&kinds, ensemble, &launch, None)?;
        rows = measure_rows(
            &rt,
            args,
            &targets,
            &args.load.workloads.0,
            Transport::Plain,
        );
    }

    let mut tls_pairs: Vec<(Row, Row)> = Vec::new();
    if !args.tls.0.is_empty() {
        std::fs::create_dir_all(&data_root)?;
        let pki_dir = tempfile::Builder::new()
            .prefix("zooraft-bench-pki-")
            .tempdir_in(&data_root)?;
        let pki = Pki::make(pki_dir.path())?;
        let lines = |port: u16| pki.server_config(port);
        let targets = start_targets(&kinds, ensemble, &launch, Some(&lines))?;
        let plain = measure_rows(&rt, args, &targets, &args.tls.0, Transport::PlainBesideTls);
        let tls = measure_rows(
            &rt,
            args,
            &targets,
            &args.tls.0,
            Transport::Tls(pki.client(true)?),
        );
        // A client that resumes does a full handshake only now and then; `connect` is
        // measured once more with full handshakes only, the worst case and the one where
        // both servers do the same work whatever their session caches hold.
        let connect = [Workload::Connect];
        let full = if args.tls.0.contains(&Workload::Connect) {
            measure_rows(
                &rt,
                args,
                &targets,
                &connect,
                Transport::Tls(pki.client(false)?),
            )
        } else {
            Vec::new()
        };
        for (plain, tls) in plain.into_iter().zip(tls) {
            if plain.workload == Workload::Connect {
                for f in full.iter().filter(|f| f.connections == plain.connections) {
                    tls_pairs.push((plain.clone(), f.clone()));
                }
            }
            tls_pairs.push((plain, tls));
        }
    }

    let mut scenarios = Vec::new();
    let params = args.scenario_params();
    for &sc in &args.scenarios {
        let mut by_kind = [None, None];
        for &k in &kinds {
            let out = crate::scenario::run(sc, k, &launch, &params, &rt);
            by_kind[usize::from(k == ServerKind::Zooraft)] = Some(out);
        }
        let [zk, zr] = by_kind;
        scenarios.push(ScenarioResult::new(sc, zk, zr));
    }

    let elapsed = began.elapsed().as_secs_f64();
    let mut markdown = String::new();
    if !rows.is_empty() {
        markdown.push_str(&framing_line(args.load.framing));
        if ensemble > 1 {
            markdown.push_str(&format!(
                "{ensemble}-member ensembles of each server, load sessions spread over the members.\n\n"
            ));
        }
        markdown.push_str(&comparison_markdown(&rows));
    }
    if !tls_pairs.is_empty() {
        markdown.push_str("\n## TLS\n\n");
        markdown.push_str(&tls_markdown(&tls_pairs));
        let all: Vec<Row> = tls_pairs
            .iter()
            .flat_map(|(a, b)| [a.clone(), b.clone()])
            .collect();
        markdown.push('\n');
        markdown.push_str(&comparison_markdown(&all));
    }
    if !scenarios.is_empty() {
        markdown.push_str("\n## Scenarios\n\n");
        markdown.push_str(&crate::scenario::markdown(&scenarios));
    }
    markdown.push_str(&format!(
        "\nFinished in {elapsed:.0}s; data root {} ({fs}); generator threads {}; open-file limit {fd_limit}.\n",
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
        "ensemble": ensemble,
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
        "tls": tls_pairs.iter().map(|(plain, tls)| serde_json::json!({"plain": plain, "tls": tls})).collect::<Vec<_>>(),
        "scenarios": scenarios,
    });
    write_json(&json_path, &doc)?;
    let chart_dir = args.charts.clone().unwrap_or_else(|| {
        json_path
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default()
    });
    let stem = json_path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "compare".into());
    let mut chart_rows = rows.clone();
    chart_rows.extend(tls_pairs.iter().flat_map(|(a, b)| [a.clone(), b.clone()]));
    match crate::charts::write_all(&chart_dir, &stem, &chart_rows, &scenarios) {
        Ok(files) if !files.is_empty() => {
            markdown.push_str(&format!(
                "Charts: {}\n",
                files
                    .iter()
                    .map(|f| f.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        Ok(_) => {}
        Err(e) => tracing::warn!("charts not written: {e:#}"),
    }
    let problems = problems(&rows)
        + tls_pairs
            .iter()
            .map(|(a, b)| a.problems() + b.problems())
            .sum::<u64>()
        + scenarios.iter().map(ScenarioResult::problems).sum::<u64>();
    Ok(Finished {
        markdown,
        json_path,
        problems,
    })
}

/// How the load reaches the servers in a batch of rows.
#[derive(Clone)]
enum Transport {
    Plain,
    /// The plain port of servers that also serve TLS (the baseline of the TLS cost).
    PlainBesideTls,
    Tls(TlsClient),
}

/// One target per server kind, each warmed up later by [`measure_rows`].
fn start_targets(
    kinds: &[ServerKind],
    ensemble: usize,
    launch: &LaunchOptions,
    tls: Option<&dyn Fn(u16) -> Vec<String>>,
) -> anyhow::Result<Vec<Target>> {
    let mut targets = Vec::new();
    for &k in kinds {
        let t = Instant::now();
        let target = Target::start(k, ensemble, launch, tls)
            .with_context(|| format!("starting {}", k.name()))?;
        tracing::info!(
            "{} serving on {:?} after {:.1}s",
            k.name(),
            target.addrs(),
            t.elapsed().as_secs_f64()
        );
        targets.push(target);
    }
    Ok(targets)
}

/// Every workload at every connection level against every target, in rounds that
/// alternate which server goes first; the targets are stopped afterwards.
fn measure_rows(
    rt: &tokio::runtime::Runtime,
    args: &CompareArgs,
    targets: &[Target],
    workloads: &[Workload],
    transport: Transport,
) -> Vec<Row> {
    let tls = match &transport {
        Transport::Tls(c) => Some(c.clone()),
        _ => None,
    };
    let variant = match &transport {
        Transport::Plain => None,
        Transport::PlainBesideTls => Some("plain, TLS-enabled servers".to_string()),
        Transport::Tls(c) if c.resumes() => Some("TLS".to_string()),
        Transport::Tls(_) => Some("TLS, full handshakes".to_string()),
    };
    if !args.server_warmup.is_zero() {
        for target in targets {
            warm_up(rt, target, args, tls.clone());
        }
    }
    let mut rows = Vec::new();
    let mut turn = 0usize;
    let rounds = args.load.rounds.max(1);
    for &workload in workloads {
        for &conns in &args.load.connections {
            let mut spec = args.load.spec(workload, conns, args.cleanup);
            spec.tls = tls.clone();
            let depth = if workload == Workload::Connect {
                1
            } else {
                spec.depth
            };
            let mut row = Row::new(workload, conns.max(1), depth.max(1));
            row.variant = variant.clone();
            for round_no in 0..rounds {
                let mut round = Round::default();
                let mut order: Vec<usize> = (0..targets.len()).collect();
                if turn % 2 == 1 {
                    order.reverse();
                }
                turn += 1;
                for i in order {
                    let target = &targets[i];
                    std::thread::sleep(args.pause);
                    tracing::info!(
                        "{} {conns}×{depth} on {} (round {}/{rounds}: {:?} warm-up + {:?})",
                        row.label(),
                        target.kind().name(),
                        round_no + 1,
                        spec.warmup,
                        spec.duration
                    );
                    let outcome = measure(rt, target, &spec);
                    round.set(target.kind(), outcome);
                }
                row.push(round);
            }
            rows.push(row);
        }
    }
    rows
}

/// The addresses a spec's sessions connect to: the TLS ports for a TLS spec.
fn addrs_for(target: &Target, spec: &LoadSpec) -> Vec<std::net::SocketAddr> {
    if spec.tls.is_some() {
        target.secure_addrs()
    } else {
        target.addrs()
    }
}

/// Unmeasured load right after start-up: half `mixed`, half `create`, at the measured
/// concurrency. Errors are logged (the measured runs will report them again if they recur).
fn warm_up(
    rt: &tokio::runtime::Runtime,
    target: &Target,
    args: &CompareArgs,
    tls: Option<TlsClient>,
) {
    let conns = args.load.connections.iter().copied().max().unwrap_or(1);
    for workload in [Workload::Mixed, Workload::Create] {
        let mut spec = args.load.spec(workload, conns, false);
        spec.warmup = std::time::Duration::ZERO;
        spec.duration = args.server_warmup / 2;
        spec.tls = tls.clone();
        tracing::info!(
            "warming up {} with {workload} for {:?}",
            target.kind().name(),
            spec.duration
        );
        match rt.block_on(run_workload_on(
            &addrs_for(target, &spec),
            target.kind().name(),
            &target.pids(),
            &spec,
        )) {
            Ok(r) if r.error_count() == 0 => {}
            Ok(r) => tracing::warn!("  warm-up errors: {:?}", r.errors),
            Err(e) => tracing::warn!("  warm-up failed: {e}"),
        }
    }
}

/// One workload against one of the targets `compare` started.
fn measure(rt: &tokio::runtime::Runtime, target: &Target, spec: &LoadSpec) -> Outcome {
    match rt.block_on(run_workload_on(
        &addrs_for(target, spec),
        target.kind().name(),
        &target.pids(),
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
            if let Some(h) = &r.tls_handshakes {
                tracing::info!("  handshakes: {h}");
            }
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
    let mut markdown = framing_line(args.load.framing);
    markdown.push_str(&single_markdown(&outcomes, &shapes));
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
