//! The lock workload: the contender process (this test binary, re-executed) and the
//! external resource its critical sections write to through a `Fence`.
//!
//! Every critical section is one `CS` line in a shared log (O_APPEND); the resource records
//! every write it was asked for, accepted or not, in the order the fence decided.

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Child;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use zooraft_recipes::{
    AsyncZkClient, Connection, ErrorCode, Fence, FencingToken, IntoClient, LockOptions,
    Mutex as ZkMutex, ZkClient, ZookeeperClient,
};

use crate::links::ClientLink;
use crate::util::{bounded, lock, mono_ns, Rng};
use crate::ROLE_ENV;

/// One write the fenced resource was asked to apply, in arrival order.
#[derive(Debug, Clone)]
pub(crate) struct FenceRecord {
    pub(crate) token: u64,
    pub(crate) cs: String,
    pub(crate) accepted: bool,
}

/// A resource guarded by a [`Fence`]: `WRITE <token> <cs>` is answered `OK` or `REJ <highest>`.
pub(crate) struct FenceServer {
    pub(crate) addr: SocketAddr,
    pub(crate) records: Arc<Mutex<Vec<FenceRecord>>>,
    pub(crate) stopping: Arc<AtomicBool>,
}

impl FenceServer {
    pub(crate) fn start() -> FenceServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the fenced resource");
        let addr = listener.local_addr().expect("resource address");
        let records = Arc::new(Mutex::new(Vec::new()));
        let stopping = Arc::new(AtomicBool::new(false));
        let fence = Arc::new(Fence::new());
        let (r, s) = (records.clone(), stopping.clone());
        std::thread::Builder::new()
            .name("fence-accept".into())
            .spawn(move || {
                for stream in listener.incoming() {
                    if s.load(Ordering::SeqCst) {
                        return;
                    }
                    let Ok(stream) = stream else { continue };
                    let (fence, records) = (fence.clone(), r.clone());
                    let _ = std::thread::Builder::new()
                        .name("fence-conn".into())
                        .spawn(move || serve_fence(stream, &fence, &records));
                }
            })
            .expect("spawn resource thread");
        FenceServer {
            addr,
            records,
            stopping,
        }
    }

    pub(crate) fn records(&self) -> Vec<FenceRecord> {
        lock(&self.records).clone()
    }
}

impl Drop for FenceServer {
    fn drop(&mut self) {
        self.stopping.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
    }
}

pub(crate) fn serve_fence(stream: TcpStream, fence: &Fence, records: &Mutex<Vec<FenceRecord>>) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(300)));
    let Ok(mut out) = stream.try_clone() else {
        return;
    };
    for line in BufReader::new(stream).lines() {
        let Ok(line) = line else { return };
        let mut f = line.split_whitespace();
        let (Some("WRITE"), Some(token), Some(cs)) = (f.next(), f.next(), f.next()) else {
            let _ = out.write_all(b"BAD\n");
            continue;
        };
        let Ok(token) = token.parse::<u64>() else {
            let _ = out.write_all(b"BAD\n");
            continue;
        };
        // Check and record under one lock: the record order is the order the fence decided.
        let answer = {
            let mut recs = lock(records);
            let verdict = fence.check(FencingToken::new(token));
            recs.push(FenceRecord {
                token,
                cs: cs.to_string(),
                accepted: verdict.is_ok(),
            });
            match verdict {
                Ok(()) => "OK\n".to_string(),
                Err(e) => format!("REJ {}\n", e.highest.get()),
            }
        };
        if out.write_all(answer.as_bytes()).is_err() {
            return;
        }
    }
}

/// What a contender is told through its environment.
pub(crate) struct ContenderConfig {
    pub(crate) id: usize,
    pub(crate) connect: String,
    pub(crate) lock_path: String,
    pub(crate) counter: String,
    pub(crate) fence: String,
    pub(crate) log: PathBuf,
    pub(crate) state: PathBuf,
    pub(crate) stop: PathBuf,
    pub(crate) session: Duration,
    /// The recipes backend: `zookeeper-client` or `zookeeper-async`.
    pub(crate) backend: String,
}

impl ContenderConfig {
    pub(crate) fn env(&self) -> Vec<(String, String)> {
        let spec = [
            self.id.to_string(),
            self.connect.clone(),
            self.lock_path.clone(),
            self.counter.clone(),
            self.fence.clone(),
            self.log.display().to_string(),
            self.state.display().to_string(),
            self.stop.display().to_string(),
            self.session.as_millis().to_string(),
            self.backend.clone(),
        ]
        .join("\n");
        vec![(ROLE_ENV.to_string(), spec)]
    }

    pub(crate) fn from_env() -> Option<ContenderConfig> {
        let spec = std::env::var(ROLE_ENV).ok()?;
        let f: Vec<&str> = spec.split('\n').collect();
        if f.len() != 10 {
            return None;
        }
        Some(ContenderConfig {
            id: f[0].parse().ok()?,
            connect: f[1].to_string(),
            lock_path: f[2].to_string(),
            counter: f[3].to_string(),
            fence: f[4].to_string(),
            log: PathBuf::from(f[5]),
            state: PathBuf::from(f[6]),
            stop: PathBuf::from(f[7]),
            session: Duration::from_millis(f[8].parse().ok()?),
            backend: f[9].to_string(),
        })
    }
}

/// The contender's connection to the fenced resource.
pub(crate) struct FenceClient {
    pub(crate) addr: String,
    pub(crate) conn: Option<tokio::io::Lines<tokio::io::BufReader<tokio::net::tcp::OwnedReadHalf>>>,
    pub(crate) out: Option<tokio::net::tcp::OwnedWriteHalf>,
}

impl FenceClient {
    /// `OK`, `REJ` or `ERR` (the resource could not be reached: nothing was written).
    pub(crate) async fn write(&mut self, token: u64, cs: &str) -> &'static str {
        use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
        for _ in 0..2 {
            if self.out.is_none() {
                let Some(Ok(s)) = bounded(
                    Duration::from_secs(2),
                    tokio::net::TcpStream::connect(&self.addr),
                )
                .await
                else {
                    continue;
                };
                let (r, w) = s.into_split();
                self.conn = Some(tokio::io::BufReader::new(r).lines());
                self.out = Some(w);
            }
            let (Some(out), Some(lines)) = (self.out.as_mut(), self.conn.as_mut()) else {
                continue;
            };
            let line = format!("WRITE {token} {cs}\n");
            let answer = bounded(Duration::from_secs(5), async {
                out.write_all(line.as_bytes()).await.ok()?;
                lines.next_line().await.ok().flatten()
            })
            .await
            .flatten();
            match answer {
                Some(a) if a.starts_with("OK") => return "OK",
                Some(a) if a.starts_with("REJ") => return "REJ",
                _ => {
                    self.out = None;
                    self.conn = None;
                }
            }
        }
        "ERR"
    }
}

pub(crate) fn append(log: &Path, line: &str) {
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
    {
        let _ = f.write_all(line.as_bytes());
    }
}

pub(crate) async fn wait_for_file(path: &Path) {
    while !path.exists() {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A client of the contender's backend, retried until it connects (`None`: stop first).
async fn connect(cfg: &ContenderConfig) -> Option<Arc<dyn ZkClient>> {
    loop {
        if cfg.stop.exists() {
            return None;
        }
        let client: Result<Arc<dyn ZkClient>, zooraft_recipes::Error> = match cfg.backend.as_str() {
            "zookeeper-async" => AsyncZkClient::connect(&cfg.connect, cfg.session)
                .await
                .map(IntoClient::into_client),
            _ => ZookeeperClient::connect(&cfg.connect, cfg.session)
                .await
                .map(IntoClient::into_client),
        };
        match client {
            Ok(c) => return Some(c),
            Err(e) => {
                append(&cfg.log, &format!("NOTE {} connect: {e}\n", cfg.id));
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }
}

/// The contender: acquire, critical section, release, until the stop file appears. Every
/// critical section is one `CS` line in the shared log (see [`CsEntry`]). zookeeper-async
/// starts a new session itself after an expiry; a zookeeper-client whose session expired is
/// replaced by a new client. The `EXIT` line counts the expiries either way.
pub(crate) async fn contend(cfg: ContenderConfig) {
    let pid = std::process::id();
    let Some(mut client) = connect(&cfg).await else {
        return;
    };
    let label = format!("chaos-{}-{}", cfg.id, cfg.backend);
    let options = LockOptions::default().label(label);
    let Ok(mut mutex) = ZkMutex::with_options(client.clone(), &cfg.lock_path, options.clone())
    else {
        append(&cfg.log, &format!("NOTE {} bad lock path\n", cfg.id));
        return;
    };
    // Expiries seen by the clients replaced so far.
    let mut replaced_epochs = 0u64;
    let mut fence = FenceClient {
        addr: cfg.fence.clone(),
        conn: None,
        out: None,
    };
    let mut rng = Rng::new(u64::from(pid) << 32 ^ mono_ns());
    let mut n = 0u64;
    loop {
        let acquired = tokio::select! {
            r = mutex.acquire() => Some(r),
            _ = wait_for_file(&cfg.stop) => None,
        };
        let Some(acquired) = acquired else { break };
        let guard = match acquired {
            Ok(g) => g,
            Err(e) => {
                append(&cfg.log, &format!("NOTE {} acquire: {e}\n", cfg.id));
                let terminal = matches!(
                    client.session().borrow().connection,
                    Connection::Expired | Connection::Closed
                );
                if cfg.backend != "zookeeper-async" && terminal {
                    replaced_epochs += client.session().borrow().epoch;
                    client.close().await;
                    let Some(c) = connect(&cfg).await else { break };
                    client = c;
                    let Ok(m) =
                        ZkMutex::with_options(client.clone(), &cfg.lock_path, options.clone())
                    else {
                        break;
                    };
                    mutex = m;
                    continue;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        n += 1;
        let cs = format!("{}.{n}", cfg.id);
        let line = critical_section(&cfg, &client, &guard, &cs, &mut fence, &mut rng).await;
        append(&cfg.log, &line);
        if let Some(Err(e)) = bounded(Duration::from_secs(10), guard.release()).await {
            append(&cfg.log, &format!("NOTE {} release {cs}: {e}\n", cfg.id));
        }
    }
    let epoch = replaced_epochs + client.session().borrow().epoch;
    append(&cfg.log, &format!("EXIT {} {pid} {epoch} {n}\n", cfg.id));
    client.close().await;
}

/// One critical section. Order matters for the invariants:
/// start, read the counter, fence write 1, work, fence write 2, end, fenced increment.
/// The state file says `W <cs>` during the work, so a test that stops the process and still
/// reads `W <cs>` knows fence write 2 and the increment are still to come.
pub(crate) async fn critical_section(
    cfg: &ContenderConfig,
    client: &Arc<dyn ZkClient>,
    guard: &zooraft_recipes::LockGuard,
    cs: &str,
    fence: &mut FenceClient,
    rng: &mut Rng,
) -> String {
    let pid = std::process::id();
    let token = guard.fencing_token().get();
    let node = guard
        .node_path()
        .rsplit('/')
        .next()
        .unwrap_or("?")
        .to_string();
    let start = mono_ns();
    let read = bounded(Duration::from_secs(5), client.get_data(&cfg.counter)).await;
    let Some(Ok((data, stat))) = read else {
        let end = mono_ns();
        return format!(
            "CS {} {cs} {pid} {token} {node} {start} {end} - - - SKIP SKIP skip 0 none\n",
            cfg.id
        );
    };
    let text = String::from_utf8_lossy(&data).to_string();
    let mut parts = text.split_whitespace();
    let read_n: u64 = parts.next().and_then(|p| p.parse().ok()).unwrap_or(0);
    let read_prev = parts.next().unwrap_or("?").to_string();
    let ext1 = fence.write(token, cs).await;
    let _ = std::fs::write(&cfg.state, format!("W {cs}"));
    tokio::time::sleep(rng.ms(20, 60)).await;
    let _ = std::fs::write(&cfg.state, "-");
    let ext2 = fence.write(token, cs).await;
    let end = mono_ns();
    let value = format!("{} {cs}", read_n + 1);
    let committed = bounded(
        Duration::from_secs(10),
        guard.fenced_set_data(&cfg.counter, value.as_bytes(), stat.version),
    )
    .await;
    let (commit, mzxid) = match committed {
        Some(Ok(s)) => ("ok", s.mzxid),
        Some(Err(zooraft_recipes::Error::Lost(_))) => ("lost", 0),
        Some(Err(zooraft_recipes::Error::OpFailed {
            code: ErrorCode::BadVersion,
            ..
        })) => ("badversion", 0),
        Some(Err(e)) => {
            append(&cfg.log, &format!("NOTE {} commit {cs}: {e}\n", cfg.id));
            ("unknown", 0)
        }
        None => ("unknown", 0),
    };
    let refused = commit == "lost" || ext1 == "REJ" || ext2 == "REJ";
    let lost = if refused {
        // Refused: the lock was lost, and lost() must say so.
        match bounded(Duration::from_secs(15), guard.lost()).await {
            Some(reason) => format!("{reason:?}"),
            None => "never".to_string(),
        }
    } else {
        guard
            .lost_reason()
            .map_or_else(|| "none".to_string(), |r| format!("{r:?}"))
    };
    format!(
        "CS {} {cs} {pid} {token} {node} {start} {end} {read_n} {read_prev} {} {ext1} {ext2} {commit} {mzxid} {lost}\n",
        cfg.id, stat.version
    )
}

/// A contender as the test sees it.
pub(crate) struct Contender {
    pub(crate) id: usize,
    pub(crate) child: Child,
    pub(crate) link: ClientLink,
    pub(crate) state: PathBuf,
}

impl Contender {
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The critical section it is in the middle of (its state file says `W <cs>`).
    pub(crate) fn working_on(&self) -> Option<String> {
        let s = std::fs::read_to_string(&self.state).ok()?;
        s.strip_prefix("W ").map(|cs| cs.trim().to_string())
    }
}

/// One logged critical section.
#[derive(Debug, Clone)]
pub(crate) struct CsEntry {
    pub(crate) cs: String,
    pub(crate) pid: u32,
    pub(crate) token: u64,
    pub(crate) node: String,
    pub(crate) start: u64,
    pub(crate) end: u64,
    /// `(n, writer of n, data version)` of the counter as read, if the read succeeded.
    pub(crate) read: Option<(u64, String, i32)>,
    pub(crate) ext1: String,
    pub(crate) ext2: String,
    pub(crate) commit: String,
    pub(crate) mzxid: i64,
    pub(crate) lost: String,
}

impl CsEntry {
    pub(crate) fn parse(line: &str) -> Option<CsEntry> {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() != 16 || f[0] != "CS" {
            return None;
        }
        let read = if f[8] == "-" {
            None
        } else {
            Some((f[8].parse().ok()?, f[9].to_string(), f[10].parse().ok()?))
        };
        Some(CsEntry {
            cs: f[2].to_string(),
            pid: f[3].parse().ok()?,
            token: f[4].parse().ok()?,
            node: f[5].to_string(),
            start: f[6].parse().ok()?,
            end: f[7].parse().ok()?,
            read,
            ext1: f[11].to_string(),
            ext2: f[12].to_string(),
            commit: f[13].to_string(),
            mzxid: f[14].parse().ok()?,
            lost: f[15].to_string(),
        })
    }

    pub(crate) fn rejected_by_fence(&self) -> bool {
        self.ext1 == "REJ" || self.ext2 == "REJ"
    }
}
