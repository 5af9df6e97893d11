//! A lock contender process for the recipes' end-to-end tests and for manual experiments.
//!
//! `lock-contender contend CONNECT PATH TASKS ITERATIONS LOG [COUNTER]`: TASKS tasks, each
//! with its own `Mutex` handle on PATH, acquire ITERATIONS times each. Every
//! critical section appends one line to LOG (opened with O_APPEND):
//! `rust <pid> <task> <token> <sequence> <start_ns> <end_ns> <node>`, times from
//! CLOCK_MONOTONIC (the clock Java's `System.nanoTime` and Python's `time.monotonic_ns` read).
//! With COUNTER, each critical section also increments the number stored in that node with
//! a fenced write.
//!
//! `lock-contender rw CONNECT PATH TASKS ITERATIONS LOG`: like `contend` with an
//! `RwLock`: even tasks write, odd tasks read; lines start with `rust-w`
//! or `rust-r`.
//!
//! `lock-contender latch CONNECT PATH TASKS TERMS LOG`: TASKS participants, each with its own
//! `LeaderLatch` on PATH, lead TERMS times each (a term is one log line `rust-latch ...`,
//! then the participant steps down and joins again).
//!
//! `lock-contender selector CONNECT PATH TASKS TERMS LOG`: the same with a `LeaderSelector`
//! per participant; a term is one `lead` (lines `rust-selector ...`).
//!
//! `lock-contender semaphore CONNECT PATH MAX TASKS ITERATIONS LOG`: TASKS tasks, each with
//! its own `Semaphore` (MAX leases) on PATH, take a lease ITERATIONS times and
//! hold it 20 ms (lines `rust-lease ...`, with token 0: a lease has no fencing token).
//!
//! `lock-contender hold CONNECT PATH SESSION_MS RESOURCE`: acquires once and prints
//! `ACQUIRED <token>`; on a line `WRITE` on stdin it sends `WRITE <token>` to the TCP
//! resource at RESOURCE (a fence) and prints its answer as `WRITE <answer>`; then it waits
//! (at most 60 s) for the lock to be lost and prints `LOST <reason>`.
//!
//! `lock-contender cache-memory CONNECT PATH MODE`: measures what a `SubtreeCache` of PATH
//! costs: the process's resident memory once connected, then once the cache (MODE `auto` or
//! `one-shot`) is initialized, and prints
//! `cache-memory mode=<mode> nodes=<n> rss_before=<bytes> rss_after=<bytes> bytes_per_node=<x>`.
//!
//! The client is zookeeper-client (`ZookeeperClient`); with `LOCK_CONTENDER_BACKEND=async`
//! (and the `zookeeper-async` feature built in) it is zookeeper-async (`AsyncZkClient`).

use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use zooraft_recipes::{
    IntoClient, LockGuard, LockOptions, Mutex, SubtreeCache, WatchMode, ZkClient, ZookeeperClient,
};

/// A client of the backend `LOCK_CONTENDER_BACKEND` names (zookeeper-client by default).
async fn connect_client(connect: &str, session: Duration) -> Result<Arc<dyn ZkClient>, String> {
    let backend = std::env::var("LOCK_CONTENDER_BACKEND").unwrap_or_default();
    match backend.as_str() {
        "" | "zookeeper-client" => Ok(ZookeeperClient::connect(connect, session)
            .await
            .map_err(|e| e.to_string())?
            .into_client()),
        "async" | "zookeeper-async" => {
            Ok(zooraft_recipes::AsyncZkClient::connect(connect, session)
                .await
                .map_err(|e| e.to_string())?
                .into_client())
        }
        other => Err(format!("unknown LOCK_CONTENDER_BACKEND {other:?}")),
    }
}

/// The server's sequence number of a lock, latch or lease node: the digits after its
/// last `-` or `_` (Curator's and kazoo's names end in a 10-digit sequence).
fn sequence_of(node_path: &str) -> Option<i64> {
    let name = node_path.rsplit('/').next()?;
    let digits = name.get(name.len().checked_sub(10)?..)?;
    digits.parse().ok()
}

fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn usage() -> ! {
    eprintln!(
        "usage: lock-contender contend CONNECT PATH TASKS ITERATIONS LOG [COUNTER]\n       \
         lock-contender rw CONNECT PATH TASKS ITERATIONS LOG\n       \
         lock-contender latch CONNECT PATH TASKS TERMS LOG\n       \
         lock-contender selector CONNECT PATH TASKS TERMS LOG\n       \
         lock-contender semaphore CONNECT PATH MAX TASKS ITERATIONS LOG\n       \
         lock-contender hold CONNECT PATH SESSION_MS RESOURCE\n       \
         lock-contender cache-memory CONNECT PATH auto|one-shot"
    );
    std::process::exit(2)
}

fn arg<T: std::str::FromStr>(args: &[String], i: usize) -> T {
    args.get(i)
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| usage())
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let result = match args.get(1).map(String::as_str) {
        Some("contend") => contend(&args).await,
        Some("rw") => read_write(&args).await,
        Some("hold") => hold(&args).await,
        Some("latch") => latch(&args, false).await,
        Some("selector") => latch(&args, true).await,
        Some("semaphore") => semaphore(&args).await,
        Some("cache-memory") => cache_memory(&args).await,
        _ => usage(),
    };
    if let Err(e) = result {
        eprintln!("lock-contender: {e}");
        std::process::exit(1);
    }
}

/// What a critical section's log line says of what is held: a lock's guard, a leadership
/// or a lease (which has no fencing token: its line says 0).
struct Held<'a> {
    token: u64,
    node_path: &'a str,
    /// The guard fenced writes go through (a lock's; only `contend` writes a counter).
    guard: Option<&'a LockGuard>,
}

impl<'a> Held<'a> {
    fn lock(guard: &'a LockGuard) -> Held<'a> {
        Held {
            token: guard.fencing_token().get(),
            node_path: guard.node_path(),
            guard: Some(guard),
        }
    }

    fn leadership(l: &'a zooraft_recipes::Leadership) -> Held<'a> {
        Held {
            token: l.fencing_token().get(),
            node_path: l.node_path(),
            guard: None,
        }
    }

    fn lease(l: &'a zooraft_recipes::Lease) -> Held<'a> {
        Held {
            token: 0,
            node_path: l.node_path(),
            guard: None,
        }
    }
}

async fn critical_section(
    kind: &str,
    held: Held<'_>,
    task: usize,
    log: &std::fs::File,
    counter: Option<&str>,
    client: &Arc<dyn ZkClient>,
) -> Result<(), String> {
    let start = monotonic_ns();
    if let (Some(counter), Some(guard)) = (counter, held.guard) {
        let (data, stat) = client
            .get_data(counter)
            .await
            .map_err(|e| format!("read counter: {e}"))?;
        let n: u64 = String::from_utf8_lossy(&data).trim().parse().unwrap_or(0);
        guard
            .fenced_set_data(counter, (n + 1).to_string().as_bytes(), stat.version)
            .await
            .map_err(|e| format!("fenced increment: {e}"))?;
    }
    let hold = if kind == "rust-lease" { 20 } else { 2 };
    tokio::time::sleep(Duration::from_millis(hold)).await;
    let end = monotonic_ns();
    let node = sequence_of(held.node_path);
    let line = format!(
        "{kind} {} {} {} {} {} {} {}\n",
        std::process::id(),
        task,
        held.token,
        node.unwrap_or(-1),
        start,
        end,
        held.node_path.rsplit('/').next().unwrap_or("")
    );
    let mut log = log;
    log.write_all(line.as_bytes())
        .map_err(|e| format!("log: {e}"))?;
    Ok(())
}

async fn contend(args: &[String]) -> Result<(), String> {
    let connect: String = arg(args, 2);
    let path: String = arg(args, 3);
    let tasks: usize = arg(args, 4);
    let iterations: usize = arg(args, 5);
    let log = open_log(&arg::<String>(args, 6))?;
    let counter: Option<String> = args.get(7).cloned();
    let client = connect_client(&connect, Duration::from_secs(10)).await?;
    run_tasks(tasks, |task| {
        let (client, log, path, counter) =
            (client.clone(), log.clone(), path.clone(), counter.clone());
        async move {
            let label = format!("contender-{}-{task}", std::process::id());
            let mutex =
                Mutex::with_options(client.clone(), &path, LockOptions::default().label(label))
                    .map_err(|e| e.to_string())?;
            for _ in 0..iterations {
                let guard = mutex.acquire().await.map_err(|e| e.to_string())?;
                critical_section(
                    "rust",
                    Held::lock(&guard),
                    task,
                    &log,
                    counter.as_deref(),
                    &client,
                )
                .await?;
                guard.release().await.map_err(|e| e.to_string())?;
            }
            Ok(())
        }
    })
    .await?;
    client.close().await;
    Ok(())
}

async fn read_write(args: &[String]) -> Result<(), String> {
    let connect: String = arg(args, 2);
    let path: String = arg(args, 3);
    let tasks: usize = arg(args, 4);
    let iterations: usize = arg(args, 5);
    let log = open_log(&arg::<String>(args, 6))?;
    let client = connect_client(&connect, Duration::from_secs(10)).await?;
    run_tasks(tasks, |task| {
        let (client, log, path) = (client.clone(), log.clone(), path.clone());
        async move {
            let rw = zooraft_recipes::RwLock::new(client.clone(), &path);
            let (kind, lock) = if task % 2 == 0 {
                ("rust-w", rw.write_lock())
            } else {
                ("rust-r", rw.read_lock())
            };
            for _ in 0..iterations {
                let guard = lock.acquire().await.map_err(|e| e.to_string())?;
                critical_section(kind, Held::lock(&guard), task, &log, None, &client).await?;
                guard.release().await.map_err(|e| e.to_string())?;
            }
            Ok(())
        }
    })
    .await?;
    client.close().await;
    Ok(())
}

/// Opens the shared log (appending) at `path`.
fn open_log(path: &str) -> Result<Arc<std::fs::File>, String> {
    Ok(Arc::new(
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|e| format!("open {path}: {e}"))?,
    ))
}

/// Runs `body(task)` for each of `tasks` tasks and waits for all; the first error wins.
async fn run_tasks<F, Fut>(tasks: usize, body: F) -> Result<(), String>
where
    F: Fn(usize) -> Fut,
    Fut: std::future::Future<Output = Result<(), String>> + Send + 'static,
{
    let handles: Vec<_> = (0..tasks).map(|t| tokio::spawn(body(t))).collect();
    for h in handles {
        h.await.map_err(|e| e.to_string())??;
    }
    Ok(())
}

/// The latch participants, or with `selector` the selector participants.
async fn latch(args: &[String], selector: bool) -> Result<(), String> {
    let connect: String = arg(args, 2);
    let path: String = arg(args, 3);
    let tasks: usize = arg(args, 4);
    let terms: usize = arg(args, 5);
    let log = open_log(&arg::<String>(args, 6))?;
    let client = connect_client(&connect, Duration::from_secs(10)).await?;
    run_tasks(tasks, |task| {
        let (client, log, path) = (client.clone(), log.clone(), path.clone());
        async move {
            let id = format!("rust-{}-{task}", std::process::id());
            if selector {
                let selector = zooraft_recipes::LeaderSelector::new(client.clone(), &path, &id);
                for _ in 0..terms {
                    let (client, log) = (client.clone(), log.clone());
                    selector
                        .lead(|l| async move {
                            critical_section(
                                "rust-selector",
                                Held::leadership(&l),
                                task,
                                &log,
                                None,
                                &client,
                            )
                            .await
                        })
                        .await
                        .map_err(|e| e.to_string())??;
                }
                return Ok(());
            }
            let latch = zooraft_recipes::LeaderLatch::new(client.clone(), &path, &id);
            for _ in 0..terms {
                let leadership = latch.await_leadership().await.map_err(|e| e.to_string())?;
                critical_section(
                    "rust-latch",
                    Held::leadership(&leadership),
                    task,
                    &log,
                    None,
                    &client,
                )
                .await?;
                leadership.release().await.map_err(|e| e.to_string())?;
            }
            Ok(())
        }
    })
    .await?;
    client.close().await;
    Ok(())
}

async fn semaphore(args: &[String]) -> Result<(), String> {
    let connect: String = arg(args, 2);
    let path: String = arg(args, 3);
    let max: usize = arg(args, 4);
    let tasks: usize = arg(args, 5);
    let iterations: usize = arg(args, 6);
    let log = open_log(&arg::<String>(args, 7))?;
    let client = connect_client(&connect, Duration::from_secs(10)).await?;
    run_tasks(tasks, |task| {
        let (client, log, path) = (client.clone(), log.clone(), path.clone());
        async move {
            let data = format!("rust-{}-{task}", std::process::id());
            let sem = zooraft_recipes::Semaphore::with_options(
                client.clone(),
                &path,
                zooraft_recipes::MaxLeases::Fixed(max),
                LockOptions::default().node_data(data),
            )
            .map_err(|e| e.to_string())?;
            for _ in 0..iterations {
                let lease = sem.acquire().await.map_err(|e| e.to_string())?;
                critical_section("rust-lease", Held::lease(&lease), task, &log, None, &client)
                    .await?;
                lease.release().await.map_err(|e| e.to_string())?;
            }
            Ok(())
        }
    })
    .await?;
    client.close().await;
    Ok(())
}

async fn hold(args: &[String]) -> Result<(), String> {
    let connect: String = arg(args, 2);
    let path: String = arg(args, 3);
    let session_ms: u64 = arg(args, 4);
    let resource: String = arg(args, 5);
    let client = connect_client(&connect, Duration::from_millis(session_ms)).await?;
    let options = LockOptions::default().label("paused-holder");
    let mutex = Mutex::with_options(client.clone(), &path, options).map_err(|e| e.to_string())?;
    let guard = mutex.acquire().await.map_err(|e| e.to_string())?;
    let token = guard.fencing_token().get();
    println!("ACQUIRED {token}");
    let _ = std::io::stdout().flush();
    let mut stdin = BufReader::new(tokio::io::stdin()).lines();
    while let Ok(Some(line)) = stdin.next_line().await {
        if line.trim() == "WRITE" {
            break;
        }
    }
    let answer = async {
        let mut s = tokio::net::TcpStream::connect(&resource).await?;
        s.write_all(format!("WRITE {token}\n").as_bytes()).await?;
        let mut lines = BufReader::new(s).lines();
        Ok::<_, std::io::Error>(lines.next_line().await?.unwrap_or_default())
    }
    .await
    .map_err(|e| format!("resource: {e}"))?;
    println!("WRITE {answer}");
    let _ = std::io::stdout().flush();
    match tokio::time::timeout(Duration::from_secs(60), guard.lost()).await {
        Ok(reason) => println!("LOST {reason:?}"),
        Err(_) => println!("NOT-LOST"),
    }
    let _ = std::io::stdout().flush();
    drop(guard);
    client.close().await;
    Ok(())
}

/// The process's resident set size in bytes (Linux `/proc/self/statm`).
fn rss_bytes() -> Result<u64, String> {
    let statm = std::fs::read_to_string("/proc/self/statm").map_err(|e| e.to_string())?;
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .ok_or("bad /proc/self/statm")?;
    // SAFETY: sysconf only reads a configuration value.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    Ok(pages * page.max(1) as u64)
}

async fn cache_memory(args: &[String]) -> Result<(), String> {
    let [_, _, connect, path, mode] = args else {
        usage()
    };
    let watch_mode = match mode.as_str() {
        "auto" => WatchMode::Auto,
        "one-shot" => WatchMode::OneShot,
        other => return Err(format!("unknown mode {other:?}")),
    };
    let client = connect_client(connect, Duration::from_secs(10)).await?;
    // Warm up the client (its buffers) before the baseline.
    client.exists(path).await.map_err(|e| e.to_string())?;
    let before = rss_bytes()?;
    let cache = SubtreeCache::new(client.clone(), path)
        .map_err(|e| e.to_string())?
        .with_mode(watch_mode);
    cache.start();
    tokio::time::timeout(Duration::from_secs(240), cache.initialized())
        .await
        .map_err(|_| "the cache did not load in time".to_string())?
        .map_err(|e| e.to_string())?;
    let after = rss_bytes()?;
    let nodes = cache.len();
    let per_node = after.saturating_sub(before) as f64 / nodes.max(1) as f64;
    println!(
        "cache-memory mode={} nodes={nodes} rss_before={before} rss_after={after} bytes_per_node={per_node:.0}",
        match cache.mode() {
            Some(WatchMode::Recursive) => "recursive",
            Some(WatchMode::OneShot) => "one-shot",
            _ => "unknown",
        }
    );
    cache.close();
    client.close().await;
    Ok(())
}
