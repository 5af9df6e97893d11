//! The bench's load and what it measures: writer sessions with their completion times and
//! errors, the observer's lag (sampled from `mntr` and timed with watched markers), the
//! cut-over run and the pauses writers saw across it, and the tables they are reported in.

use super::*;

/// Nearest-rank percentile of sorted values.
pub(super) fn pct<T: Copy>(sorted: &[T], p: f64) -> Option<T> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

pub(super) fn fmt_opt<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map_or("–".into(), |v| v.to_string())
}

pub(super) fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

pub(super) fn deadline() -> Instant {
    Instant::now() + REQUEST_TIMEOUT
}

pub(super) fn create_req(path: &str, data: &[u8]) -> Request {
    Request::Create(CreateRequest {
        path: path.into(),
        data: Some(Bytes::copy_from_slice(data)),
        acl: vec![Acl::open_unsafe()],
        flags: CreateMode::Persistent.flags(),
    })
}

pub(super) async fn connect(addr: SocketAddr) -> Result<Session> {
    Session::connect(addr, SESSION_TIMEOUT_MS, CONNECT_TIMEOUT)
        .await
        .map_err(|e| anyhow!("cannot open a session on {addr}: {e}"))
}

/// Creates persistent `paths` (in order) through `s`; existing ones are fine.
pub(super) async fn create_all(s: &mut Session, paths: &[String]) -> Result<()> {
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
pub(super) struct Writer {
    /// When each successful write completed.
    pub(super) done: Vec<Instant>,
    pub(super) errors: BTreeMap<String, u64>,
    /// Why closing the session at the end failed, if it did.
    pub(super) close_failed: Option<String>,
}

/// setData of 100 bytes on `path`, one request outstanding, until `stop`; a session that
/// fails is counted and replaced by a new one on the same server.
pub(super) async fn write_loop(
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

pub(super) fn merge_errors(writers: &[Writer]) -> BTreeMap<String, u64> {
    let mut all = BTreeMap::new();
    for w in writers {
        for (k, n) in &w.errors {
            *all.entry(k.clone()).or_default() += n;
        }
    }
    all
}

pub(super) fn fmt_errors(e: &BTreeMap<String, u64>) -> String {
    let total: u64 = e.values().sum();
    if total == 0 {
        return "0".into();
    }
    let kinds: Vec<String> = e.iter().map(|(k, n)| format!("{k}: {n}")).collect();
    format!("{total} ({})", kinds.join(", "))
}

/// Samples `zk_migration_lag` of `addr` every 100 ms until `stop`: (samples, failed reads).
pub(super) fn sample_lag(
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<(Vec<u64>, u64)> {
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
pub(super) struct Marker {
    pub(super) from_send: f64,
    pub(super) from_ack: f64,
}

pub(super) struct LagResult {
    pub(super) lag: Vec<u64>,
    pub(super) lag_failed: u64,
    pub(super) markers: Vec<Marker>,
    pub(super) writes: u64,
    pub(super) window: Duration,
    pub(super) errors: BTreeMap<String, u64>,
    pub(super) close_failed: usize,
}

/// Part 2's load, on a runtime.
pub(super) async fn lag_load(
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
pub(super) struct CutoverRun {
    pub(super) started: Instant,
    pub(super) ended: Instant,
    pub(super) success: bool,
    pub(super) output: String,
    pub(super) line: Option<String>,
    pub(super) pause_ms: Option<u64>,
}

/// Runs `zooraft migrate cutover --server <server>` (output into `out`), bounded.
pub(super) fn run_cutover(zooraft: &Path, server: SocketAddr, out: &Path) -> Result<CutoverRun> {
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

pub(super) struct CutoverResult {
    pub(super) start: Instant,
    pub(super) end: Instant,
    pub(super) cutover: Result<CutoverRun>,
    pub(super) writers: Vec<Writer>,
}

/// Part 3's load and cut-over, on a runtime.
pub(super) async fn cutover_load(
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

pub(super) fn table_row(cells: &[String]) -> String {
    format!("| {} |", cells.join(" | "))
}
