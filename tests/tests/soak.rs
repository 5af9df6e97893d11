//! A soak: a 3-member ensemble under churn for a bounded time, with each member's resources
//! sampled, failing on growth after warm-up (a leak of memory, descriptors, threads or
//! store files shows as growth that does not level off).
//!
//! The churn: sessions opened and closed, others abandoned to expire, each with an
//! ephemeral and a data watch; the watched node changed every 100 ms (so watches fire); a
//! writer that creates and deletes nodes in a rolling window (snapshots every 1,000
//! entries; the scrub reads the store back every 20 s); lock-style sequential ephemerals
//! created and deleted; member 3 killed (-9) and restarted every [`restart_every`]. Members 1 and 2 are never restarted: their samples
//! are the ones judged. The run lasts `SOAK_SECS` seconds (180 unless set; 1800 for the
//! manual half hour) and prints every sample.
//!
//! The bound: the highest value of the last third of the run may exceed the highest of the
//! middle third by at most 25% plus a fixed slack per resource (the first third is warm-up:
//! caches, RocksDB's memtables and the first snapshots). Every member ends with the same
//! tree.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use zookeeper_client as zc;
use zooraft_tests::faults;
use zooraft_tests::zc::{ephemeral, persistent};
use zooraft_tests::TestEnsemble;

const SAMPLE_EVERY: Duration = Duration::from_secs(5);
const OP_TIMEOUT: Duration = Duration::from_secs(5);
/// Sessions the churn keeps open at once.
const OPEN_SESSIONS: usize = 12;

fn soak_time() -> Duration {
    let secs = std::env::var("SOAK_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(180u64);
    Duration::from_secs(secs.max(30))
}

/// Member 3's restart period: three restarts in a run.
fn restart_every(run: Duration) -> Duration {
    run / 4
}

/// One reading of one member's process.
#[derive(Debug, Clone, Copy, Default)]
struct Sample {
    at_s: u64,
    rss_kib: u64,
    fds: u64,
    threads: u64,
    store_files: u64,
}

/// What a sample measures, its slack, and how to read it.
struct Resource {
    name: &'static str,
    slack: u64,
    of: fn(&Sample) -> u64,
}

const RESOURCES: [Resource; 4] = [
    // RocksDB's memtables (16 MiB in all) fill and flush as they please.
    Resource {
        name: "RSS KiB",
        slack: 16 << 10,
        of: |s| s.rss_kib,
    },
    Resource {
        name: "file descriptors",
        slack: 24,
        of: |s| s.fds,
    },
    Resource {
        name: "threads",
        slack: 4,
        of: |s| s.threads,
    },
    Resource {
        name: "store files",
        slack: 24,
        of: |s| s.store_files,
    },
];

fn status_field(status: &str, key: &str) -> u64 {
    status
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn sample(e: &TestEnsemble, i: usize, at_s: u64) -> Option<Sample> {
    let pid = e.member(i).pid()?;
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?.count() as u64;
    Some(Sample {
        at_s,
        rss_kib: status_field(&status, "VmRSS:"),
        fds,
        threads: status_field(&status, "Threads:"),
        store_files: faults::files_under(&e.member(i).data_dir()).len() as u64,
    })
}

/// Counts of what the churn did.
#[derive(Default)]
struct Churned {
    sessions_closed: AtomicU64,
    sessions_abandoned: AtomicU64,
    watches_fired: AtomicU64,
    writes: AtomicU64,
    locks: AtomicU64,
}

async fn connect(hosts: &str, timeout: Duration, detached: bool) -> Option<zc::Client> {
    let mut c = zc::Client::connector().with_session_timeout(timeout);
    if detached {
        c = c.with_detached();
    }
    tokio::time::timeout(OP_TIMEOUT, c.connect(hosts))
        .await
        .ok()
        .and_then(Result::ok)
}

/// Sessions opened and retired, half closed and half left to expire, each with an
/// ephemeral and a data watch on `/soak/watched`.
async fn session_churn(hosts: String, stop: Arc<AtomicBool>, n: Arc<Churned>) {
    let mut open: std::collections::VecDeque<(zc::Client, bool)> = Default::default();
    let mut k = 0u64;
    while !stop.load(Ordering::Relaxed) {
        k += 1;
        let abandon = k & 1 == 0;
        let Some(c) = connect(&hosts, Duration::from_secs(2), abandon).await else {
            tokio::time::sleep(Duration::from_millis(200)).await;
            continue;
        };
        let _ = tokio::time::timeout(
            OP_TIMEOUT,
            c.create(&format!("/soak/eph/s{k}"), b"e", &ephemeral()),
        )
        .await;
        if let Ok(Ok((_, _, watcher))) =
            tokio::time::timeout(OP_TIMEOUT, c.get_and_watch_data("/soak/watched")).await
        {
            let n = n.clone();
            tokio::spawn(async move {
                if tokio::time::timeout(Duration::from_secs(10), watcher.changed())
                    .await
                    .is_ok()
                {
                    n.watches_fired.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
        open.push_back((c, abandon));
        if open.len() > OPEN_SESSIONS {
            if let Some((old, abandoned)) = open.pop_front() {
                let counter = if abandoned {
                    &n.sessions_abandoned
                } else {
                    &n.sessions_closed
                };
                counter.fetch_add(1, Ordering::Relaxed);
                drop(old);
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Changes `/soak/watched` every 100 ms; creates and deletes nodes in a rolling window;
/// creates and deletes a sequential ephemeral, lock style.
async fn writer(hosts: String, stop: Arc<AtomicBool>, n: Arc<Churned>) {
    let mut k = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let Some(c) = connect(&hosts, Duration::from_secs(6), false).await else {
            tokio::time::sleep(Duration::from_millis(200)).await;
            continue;
        };
        while !stop.load(Ordering::Relaxed) {
            k += 1;
            let step = async {
                c.set_data("/soak/watched", k.to_string().as_bytes(), None)
                    .await?;
                c.create(&format!("/soak/n/{k}"), &[b'x'; 256], &persistent())
                    .await?;
                if k > 200 {
                    let _ = c.delete(&format!("/soak/n/{}", k - 200), None).await;
                }
                let seq = zc::CreateMode::EphemeralSequential.with_acls(zc::Acls::anyone_all());
                let (_, lock) = c.create("/soak/locks/l-", b"", &seq).await?;
                c.delete(&format!("/soak/locks/l-{lock}"), None).await?;
                Ok::<_, zc::Error>(())
            };
            match tokio::time::timeout(OP_TIMEOUT, step).await {
                Ok(Ok(())) => {
                    n.writes.fetch_add(1, Ordering::Relaxed);
                    n.locks.fetch_add(1, Ordering::Relaxed);
                }
                Ok(Err(zc::Error::SessionExpired)) => break,
                _ => tokio::time::sleep(Duration::from_millis(200)).await,
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

#[test]
fn resources_stay_flat_under_hours_of_churn_compressed() {
    let run = soak_time();
    let mut e = TestEnsemble::start(
        3,
        0,
        &[
            ("snapshotEntries", "1000"),
            ("minSessionTimeout", "1000"),
            ("scrubIntervalSeconds", "20"),
        ],
    );
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    let hosts = e.connect_string();
    rt.block_on(async {
        let c = connect(&hosts, Duration::from_secs(6), false)
            .await
            .expect("a set-up session");
        for p in [
            "/soak",
            "/soak/eph",
            "/soak/n",
            "/soak/locks",
            "/soak/watched",
        ] {
            let _ = c.create(p, b"", &persistent()).await;
        }
    });
    let stop = Arc::new(AtomicBool::new(false));
    let churned = Arc::new(Churned::default());
    let tasks = [
        rt.spawn(session_churn(hosts.clone(), stop.clone(), churned.clone())),
        rt.spawn(writer(hosts.clone(), stop.clone(), churned.clone())),
    ];
    let t0 = Instant::now();
    let mut samples: BTreeMap<usize, Vec<Sample>> = BTreeMap::new();
    let mut next_restart = t0 + restart_every(run);
    let mut restarts = 0;
    while t0.elapsed() < run {
        let at_s = t0.elapsed().as_secs();
        for i in 0..3 {
            if let Some(s) = sample(&e, i, at_s) {
                samples.entry(i).or_default().push(s);
            }
        }
        let figures: Vec<String> = [
            "zk_znode_count",
            "zk_watch_count",
            "zk_ephemerals_count",
            "zk_num_alive_connections",
        ]
        .iter()
        .map(|k| format!("{k} {}", e.member(0).figure(k).unwrap_or_default()))
        .collect();
        println!("{at_s:>5}s member 1: {}", figures.join(", "));
        if Instant::now() >= next_restart {
            e.member_mut(2).kill();
            e.member_mut(2).respawn();
            e.wait_all_serving();
            restarts += 1;
            next_restart += restart_every(run);
        }
        std::thread::sleep(SAMPLE_EVERY);
    }
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        let _ = rt.block_on(async { tokio::time::timeout(Duration::from_secs(15), t).await });
    }
    let (zxid, digest) = e.converged();
    let n = &churned;
    println!(
        "soak {run:?}: {} sessions closed, {} abandoned to expire, {} watches fired, {} write \
         rounds, {} lock cycles, member 3 restarted {restarts} times; converged at {zxid} \
         ({digest})",
        n.sessions_closed.load(Ordering::Relaxed),
        n.sessions_abandoned.load(Ordering::Relaxed),
        n.watches_fired.load(Ordering::Relaxed),
        n.writes.load(Ordering::Relaxed),
        n.locks.load(Ordering::Relaxed),
    );
    for (i, series) in &samples {
        println!("member {}:", i + 1);
        for s in series {
            println!(
                "  {:>5}s rss {:>7} KiB  fds {:>4}  threads {:>3}  store files {:>4}",
                s.at_s, s.rss_kib, s.fds, s.threads, s.store_files
            );
        }
    }
    assert!(
        n.sessions_abandoned.load(Ordering::Relaxed) > 10
            && n.watches_fired.load(Ordering::Relaxed) > 10,
        "the churn did not run"
    );
    let mut grew = Vec::new();
    for i in [0usize, 1] {
        let series = &samples[&i];
        let third = series.len() / 3;
        let (middle, last) = (&series[third..2 * third], &series[2 * third..]);
        for r in &RESOURCES {
            let base = middle.iter().map(r.of).max().unwrap_or(0);
            let end = last.iter().map(r.of).max().unwrap_or(0);
            let bound = base + base / 4 + r.slack;
            if end > bound {
                grew.push(format!(
                    "member {}: {} grew from {base} (middle third's highest) to {end} (last \
                     third's), over the bound {bound}",
                    i + 1,
                    r.name
                ));
            }
        }
    }
    assert!(grew.is_empty(), "{}", grew.join("\n"));
}
