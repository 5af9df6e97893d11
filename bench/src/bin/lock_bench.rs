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

use zooraft_bench::floor;
use zooraft_recipes::{AsyncZkClient, IntoClient, LockOptions, Mutex, ZkClient, ZookeeperClient};

struct Options {
    contenders: usize,
    seconds: f64,
    path: String,
    backend: String,
    data_dir: std::path::PathBuf,
    addrs: Vec<String>,
}

fn parse() -> Options {
    let mut o = Options {
        contenders: 16,
        seconds: 10.0,
        path: "/bench/lock".to_string(),
        backend: "zookeeper-client".to_string(),
        data_dir: ".".into(),
        addrs: Vec::new(),
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = |name: &str| {
            args.next().unwrap_or_else(|| {
                eprintln!("lock_bench: {name} needs a value");
                std::process::exit(2)
            })
        };
        match a.as_str() {
            "--contenders" => o.contenders = value("--contenders").parse().unwrap_or(16),
            "--seconds" => o.seconds = value("--seconds").parse().unwrap_or(10.0),
            "--path" => o.path = value("--path"),
            "--backend" => o.backend = value("--backend"),
            "--data-dir" => o.data_dir = value("--data-dir").into(),
            "-h" | "--help" => {
                println!(
                    "lock_bench [--contenders N] [--seconds S] [--path P] \
                     [--backend zookeeper-client|zookeeper-async] [--data-dir D] ADDR [ADDR...]"
                );
                std::process::exit(0)
            }
            _ => o.addrs.push(a),
        }
    }
    if !matches!(o.backend.as_str(), "zookeeper-client" | "zookeeper-async") {
        eprintln!("lock_bench: unknown backend {:?}", o.backend);
        std::process::exit(2)
    }
    if o.addrs.is_empty() {
        eprintln!("lock_bench: give at least one server address (host:port)");
        std::process::exit(2)
    }
    o
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
        let client: Arc<dyn ZkClient> = if o.backend == "zookeeper-async" {
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
    let o = parse();
    println!(
        "lock_bench: {} contenders ({}), {:.1} s per server, empty critical section",
        o.contenders, o.backend, o.seconds
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
