//! Lock throughput and handoff latency of the recipes' `Mutex`.
//!
//! `lock_bench [--contenders N] [--seconds S] [--path P] [--backend B] [--data-dir D] ADDR [ADDR...]`
//!
//! `--backend` picks the recipes' client: `zookeeper-client` (the default, the primary
//! backend) or `zookeeper-async`.
//!
//! Against each server in turn, N contenders (each with its own session and its own lock
//! handle, default 16) acquire and release one lock path for S seconds (default 10), with an
//! empty critical section. It reports acquisitions per second, and the handoff latency: the
//! time from a holder starting its release to the next holder's `acquire()` returning (the
//! release's delete, the server's watch notification, the waiter's getChildren). With more
//! than one address, figures are also given as ratios to the first (e.g. Apache ZooKeeper
//! first, zooraft second).
//!
//! First it measures the machine's floor (`zooraft_bench::floor`): a durable append on the
//! disk of `--data-dir` (the servers' data directory; `.` by default) and a loopback round
//! trip; each handoff p50 is then also given as a multiple of one append plus three round
//! trips, which no lock handoff can beat.

use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Parser;
use zooraft_bench::floor;
use zooraft_recipes::{AsyncZkClient, IntoClient, LockOptions, Mutex, ZkClient, ZookeeperClient};

/// The recipes' client a contender uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Backend {
    /// The `zookeeper-client` crate (the recipes' primary backend).
    ZookeeperClient,
    /// The `zookeeper-async` crate.
    ZookeeperAsync,
}

impl Backend {
    fn name(self) -> &'static str {
        match self {
            Backend::ZookeeperClient => "zookeeper-client",
            Backend::ZookeeperAsync => "zookeeper-async",
        }
    }
}

/// Lock throughput and handoff latency of the recipes' `Mutex`, server by server.
#[derive(Debug, Parser)]
#[command(name = "lock_bench")]
struct Options {
    /// Contenders, each with its own session and lock handle.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u16).range(1..))]
    contenders: u16,
    /// Seconds of contention per server.
    #[arg(long, default_value_t = 10.0, value_parser = positive_seconds)]
    seconds: f64,
    /// The lock's path (the process id is appended).
    #[arg(long, default_value = "/bench/lock")]
    path: String,
    #[arg(long, value_enum, default_value_t = Backend::ZookeeperClient)]
    backend: Backend,
    /// A directory on the servers' data disk, where the floor's durable append is measured.
    #[arg(long, default_value = ".")]
    data_dir: std::path::PathBuf,
    /// The servers (host:port), measured in turn; ratios are to the first.
    #[arg(required = true)]
    addrs: Vec<String>,
}

/// A number of seconds above zero.
fn positive_seconds(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v > 0.0 && v.is_finite() => Ok(v),
        _ => Err(format!("{s:?} is not a positive number of seconds")),
    }
}

/// What one run measured.
struct Figures {
    acquisitions: usize,
    elapsed: Duration,
    handoffs_us: Vec<u64>,
}

impl Figures {
    fn rate(&self) -> f64 {
        self.acquisitions as f64 / self.elapsed.as_secs_f64()
    }

    fn percentile_ms(&self, p: f64) -> f64 {
        if self.handoffs_us.is_empty() {
            return f64::NAN;
        }
        let i = ((self.handoffs_us.len() - 1) as f64 * p).round() as usize;
        self.handoffs_us[i] as f64 / 1000.0
    }

    fn mean_ms(&self) -> f64 {
        if self.handoffs_us.is_empty() {
            return f64::NAN;
        }
        self.handoffs_us.iter().sum::<u64>() as f64 / self.handoffs_us.len() as f64 / 1000.0
    }
}

/// The last release's start, shared by the contenders (the lock serializes them).
#[derive(Default)]
struct Handoff {
    last_release: std::sync::Mutex<Option<Instant>>,
    samples: std::sync::Mutex<Vec<u64>>,
    count: std::sync::atomic::AtomicUsize,
}

async fn run(addr: &str, o: &Options) -> Result<Figures, String> {
    let mut clients = Vec::new();
    for _ in 0..o.contenders {
        let session = Duration::from_secs(10);
        let client: Arc<dyn ZkClient> = if o.backend == Backend::ZookeeperAsync {
            AsyncZkClient::connect(addr, session)
                .await
                .map_err(|e| format!("{addr}: {e}"))?
                .into_client()
        } else {
            ZookeeperClient::connect(addr, session)
                .await
                .map_err(|e| format!("{addr}: {e}"))?
                .into_client()
        };
        clients.push(client);
    }
    let path = format!("{}-{}", o.path, std::process::id());
    let shared = Arc::new(Handoff::default());
    let start = Instant::now();
    let end = start + Duration::from_secs_f64(o.seconds);
    let mut tasks = Vec::new();
    for c in &clients {
        let mutex =
            Mutex::with_options(c.clone(), &path, LockOptions::default().label("lock_bench"))
                .expect("a valid lock path");
        let shared = shared.clone();
        tasks.push(tokio::spawn(async move {
            while Instant::now() < end {
                let guard = mutex.acquire().await.map_err(|e| e.to_string())?;
                let now = Instant::now();
                if let Some(prev) = shared
                    .last_release
                    .lock()
                    .map_err(|e| e.to_string())?
                    .take()
                {
                    shared
                        .samples
                        .lock()
                        .map_err(|e| e.to_string())?
                        .push(now.duration_since(prev).as_micros() as u64);
                }
                shared
                    .count
                    .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                *shared.last_release.lock().map_err(|e| e.to_string())? = Some(Instant::now());
                guard.release().await.map_err(|e| e.to_string())?;
            }
            Ok::<(), String>(())
        }));
    }
    for t in tasks {
        t.await.map_err(|e| e.to_string())??;
    }
    let elapsed = start.elapsed();
    for c in &clients {
        c.close().await;
    }
    let mut handoffs_us = std::mem::take(&mut *shared.samples.lock().map_err(|e| e.to_string())?);
    handoffs_us.sort_unstable();
    Ok(Figures {
        acquisitions: shared.count.load(std::sync::atomic::Ordering::SeqCst),
        elapsed,
        handoffs_us,
    })
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let o = Options::parse();
    println!(
        "lock_bench: {} contenders ({}), {:.1} s per server, empty critical section",
        o.contenders,
        o.backend.name(),
        o.seconds
    );
    let floor = match (
        floor::durable_append(&o.data_dir, 200, 100),
        floor::loopback_round_trip(2000),
    ) {
        (Ok(append), Ok(rtt)) => {
            let handoff = floor::handoff_floor_us(&append, &rtt);
            println!(
                "floor: durable append (100 B + fdatasync) in {} p50 {:.0} us, p99 {:.0} us; \
                 loopback round trip p50 {:.1} us, p99 {:.1} us; a handoff's floor \
                 (one append + 3 round trips) {:.3} ms",
                o.data_dir.display(),
                append.p50_us,
                append.p99_us,
                rtt.p50_us,
                rtt.p99_us,
                handoff / 1000.0
            );
            Some(handoff / 1000.0)
        }
        (a, r) => {
            eprintln!(
                "lock_bench: cannot measure the floor: {:?} {:?}",
                a.err(),
                r.err()
            );
            None
        }
    };
    let mut all = Vec::new();
    for addr in &o.addrs {
        match run(addr, &o).await {
            Ok(f) => {
                println!(
                    "{addr}: {} acquisitions in {:.2} s = {:.1} acquisitions/s; handoff (release -> next holder) \
                     mean {:.2} ms, p50 {:.2} ms, p90 {:.2} ms, p99 {:.2} ms",
                    f.acquisitions,
                    f.elapsed.as_secs_f64(),
                    f.rate(),
                    f.mean_ms(),
                    f.percentile_ms(0.5),
                    f.percentile_ms(0.9),
                    f.percentile_ms(0.99)
                );
                if let Some(floor_ms) = floor {
                    println!(
                        "{addr}: handoff p50 is {:.2}x the floor ({floor_ms:.3} ms)",
                        f.percentile_ms(0.5) / floor_ms
                    );
                }
                all.push((addr.clone(), f));
            }
            Err(e) => {
                eprintln!("lock_bench: {e}");
                std::process::exit(1);
            }
        }
    }
    if let Some((base_addr, base)) = all.first() {
        for (addr, f) in all.iter().skip(1) {
            println!(
                "{addr} vs {base_addr}: throughput ratio {:.2}, handoff p50 ratio {:.2}",
                f.rate() / base.rate(),
                f.percentile_ms(0.5) / base.percentile_ms(0.5)
            );
        }
    }
}
