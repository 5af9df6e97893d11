//! Shared set-up for the recipes' end-to-end tests: servers, clients, bounded waits, and the
//! contenders' shared log.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use std::path::Path;

use tokio::process::Command;
use zooraft_recipes::{Connection, IntoClient, ZkClient, ZookeeperClient};
use zooraft_tests::{ServerKind, TestServer};

/// Every scenario must finish within this.
pub const SCENARIO_TIMEOUT: Duration = Duration::from_secs(180);

/// A server with a short tick (session timeouts from 1 s to 10 s) and a fast container
/// reaper.
pub fn server(kind: ServerKind) -> TestServer {
    TestServer::builder(kind)
        .tick_time_ms(500)
        .jvm_property("znode.container.checkIntervalMs", "200")
        .config("znode.container.checkIntervalMs", "200")
        .start()
}

/// Which [`ZkClient`] implementation a scenario's lock clients use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// zookeeper-client (`ZookeeperClient`), the primary backend.
    ZookeeperClient,
    /// zookeeper-async (`AsyncZkClient`, feature `zookeeper-async`).
    ZookeeperAsync,
}

/// A client of `backend`.
pub async fn connect(backend: Backend, connect: &str, timeout: Duration) -> Arc<dyn ZkClient> {
    match backend {
        Backend::ZookeeperClient => ZookeeperClient::connect(connect, timeout)
            .await
            .expect("connect zookeeper-client")
            .into_client(),
        Backend::ZookeeperAsync => zooraft_recipes::AsyncZkClient::connect(connect, timeout)
            .await
            .expect("connect zookeeper-async")
            .into_client(),
    }
}

/// Runs an async scenario on a fresh runtime, bounded in time.
pub fn run<F, Fut>(kind: ServerKind, scenario: F)
where
    F: FnOnce(ServerKind) -> Fut,
    Fut: Future<Output = ()>,
{
    run_with(kind, Backend::ZookeeperClient, move |k, _| scenario(k))
}

/// Runs an async scenario for one server kind and one backend, bounded in time.
pub fn run_with<F, Fut>(kind: ServerKind, backend: Backend, scenario: F)
where
    F: FnOnce(ServerKind, Backend) -> Fut,
    Fut: Future<Output = ()>,
{
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("RECIPES_TEST_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_test_writer()
        .try_init();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    rt.block_on(async {
        tokio::time::timeout(SCENARIO_TIMEOUT, scenario(kind, backend))
            .await
            .expect("scenario timed out");
    });
    rt.shutdown_timeout(Duration::from_secs(5));
}

/// Declares two tests running `scenario(kind)`: one against Apache ZooKeeper, one against
/// zooraft.
#[macro_export]
macro_rules! both_servers {
    ($apache:ident, $zooraft:ident, $scenario:path) => {
        #[test]
        fn $apache() {
            $crate::common::run(zooraft_tests::ServerKind::Apache, $scenario)
        }
        #[test]
        fn $zooraft() {
            $crate::common::run(zooraft_tests::ServerKind::Zooraft, $scenario)
        }
    };
}

/// Declares four tests running `scenario(kind, backend)`: Apache ZooKeeper and zooraft,
/// each with the zookeeper-client and the zookeeper-async backend.
#[macro_export]
macro_rules! every_backend {
    ($name:ident, $scenario:path) => {
        mod $name {
            use super::*;
            $crate::every_backend!(@one apache_zookeeper_client, Apache, ZookeeperClient, $scenario);
            $crate::every_backend!(@one zooraft_zookeeper_client, Zooraft, ZookeeperClient, $scenario);
            $crate::every_backend!(@one apache_zookeeper_async, Apache, ZookeeperAsync, $scenario);
            $crate::every_backend!(@one zooraft_zookeeper_async, Zooraft, ZookeeperAsync, $scenario);
        }
    };
    (@one $test:ident, $kind:ident, $backend:ident, $scenario:path) => {
        #[test]
        fn $test() {
            $crate::common::run_with(
                zooraft_tests::ServerKind::$kind,
                $crate::common::Backend::$backend,
                $scenario,
            )
        }
    };
}

/// A client of the primary backend (zookeeper-client), 8 s sessions.
pub async fn client(connect: &str) -> Arc<dyn ZkClient> {
    client_with_timeout(connect, Duration::from_secs(8)).await
}

/// A client of the primary backend with the given session timeout.
pub async fn client_with_timeout(connect: &str, timeout: Duration) -> Arc<dyn ZkClient> {
    self::connect(Backend::ZookeeperClient, connect, timeout).await
}

/// Polls `check` every 50 ms until it is true; panics with `what` after `max`.
pub async fn eventually<F, Fut>(max: Duration, what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + max;
    loop {
        if check().await {
            return;
        }
        if tokio::time::Instant::now() > deadline {
            panic!("timed out waiting for: {what}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The children of `path` (empty if it does not exist).
pub async fn children(client: &Arc<dyn ZkClient>, path: &str) -> Vec<String> {
    match client.get_children(path).await {
        Ok(c) => c,
        Err(zooraft_recipes::ErrorCode::NoNode) => Vec::new(),
        Err(e) => panic!("get_children {path}: {e}"),
    }
}

/// Waits until the client is connected.
pub async fn connected(client: &Arc<dyn ZkClient>) {
    let c = client.clone();
    eventually(Duration::from_secs(30), "client connected", move || {
        let c = c.clone();
        async move { c.session().borrow().connection == Connection::Connected }
    })
    .await;
}

/// One critical section as a contender logged it. `task` and `node` are read only by the
/// failure messages (`Debug`), which name the contender task and the lock node.
#[derive(Debug, Clone)]
pub struct Entry {
    pub implementation: String,
    pub pid: u32,
    #[allow(dead_code)]
    pub task: String,
    pub token: u64,
    pub sequence: i64,
    pub start: u64,
    pub end: u64,
    #[allow(dead_code)]
    pub node: String,
}

/// Reads the shared log: one line per critical section.
pub fn read_log(path: &std::path::Path) -> Vec<Entry> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            assert!(f.len() >= 8, "bad log line {l:?}");
            Entry {
                implementation: f[0].to_string(),
                pid: f[1].parse().expect("pid"),
                task: f[2].to_string(),
                token: f[3].parse().expect("token"),
                sequence: f[4].parse().expect("sequence"),
                start: f[5].parse().expect("start"),
                end: f[6].parse().expect("end"),
                node: f[7].to_string(),
            }
        })
        .collect()
}

/// Checks the log: critical sections never overlap, and in acquisition order both the
/// sequence numbers and the fencing tokens (czxids: creation order) strictly increase. The
/// lock path must not be re-created meanwhile (that restarts the sequence numbers).
pub fn check_log(entries: &mut [Entry]) {
    entries.sort_by_key(|e| e.start);
    let dump = || {
        entries
            .iter()
            .map(|e| format!("{e:?}"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    for w in entries.windows(2) {
        let (a, b) = (&w[0], &w[1]);
        assert!(
            a.end < b.start,
            "critical sections overlap:\n  {a:?}\n  {b:?}\nlog:\n{}",
            dump()
        );
        assert!(
            a.sequence < b.sequence,
            "acquisition order is not creation order:\n  {a:?}\n  {b:?}\nlog:\n{}",
            dump()
        );
        assert!(
            a.token < b.token,
            "fencing tokens do not increase:\n  {a:?}\n  {b:?}\nlog:\n{}",
            dump()
        );
    }
}

/// A test client that forwards every call to another client: implement [`Forward`] and
/// override only the calls a scenario changes, then wrap it in [`Forwarding`].
#[async_trait::async_trait]
pub trait Forward: Send + Sync + 'static {
    /// The client calls go to.
    fn inner(&self) -> &Arc<dyn ZkClient>;

    async fn create_acl(
        &self,
        path: &str,
        data: &[u8],
        mode: zooraft_recipes::CreateMode,
        acl: &[zooraft_recipes::Acl],
    ) -> zooraft_recipes::ZkResult<(String, zooraft_recipes::Stat)> {
        self.inner().create_acl(path, data, mode, acl).await
    }
    async fn sync(&self, path: &str) -> zooraft_recipes::ZkResult<()> {
        self.inner().sync(path).await
    }
    async fn delete(&self, path: &str, version: i32) -> zooraft_recipes::ZkResult<()> {
        self.inner().delete(path, version).await
    }
    async fn set_data(
        &self,
        path: &str,
        data: &[u8],
        version: i32,
    ) -> zooraft_recipes::ZkResult<zooraft_recipes::Stat> {
        self.inner().set_data(path, data, version).await
    }
    async fn exists(&self, path: &str) -> zooraft_recipes::ZkResult<Option<zooraft_recipes::Stat>> {
        self.inner().exists(path).await
    }
    async fn get_data(
        &self,
        path: &str,
    ) -> zooraft_recipes::ZkResult<(Vec<u8>, zooraft_recipes::Stat)> {
        self.inner().get_data(path).await
    }
    async fn get_data_watch(
        &self,
        path: &str,
    ) -> zooraft_recipes::ZkResult<(
        Vec<u8>,
        zooraft_recipes::Stat,
        zooraft_recipes::WatchReceiver,
    )> {
        self.inner().get_data_watch(path).await
    }
    async fn get_children(&self, path: &str) -> zooraft_recipes::ZkResult<Vec<String>> {
        self.inner().get_children(path).await
    }
    async fn get_children_watch(
        &self,
        path: &str,
    ) -> zooraft_recipes::ZkResult<(Vec<String>, zooraft_recipes::WatchReceiver)> {
        self.inner().get_children_watch(path).await
    }
    async fn exists_watch(
        &self,
        path: &str,
    ) -> zooraft_recipes::ZkResult<(
        Option<zooraft_recipes::Stat>,
        zooraft_recipes::WatchReceiver,
    )> {
        self.inner().exists_watch(path).await
    }
    async fn multi(
        &self,
        ops: &[zooraft_recipes::Op],
    ) -> zooraft_recipes::ZkResult<Vec<zooraft_recipes::OpResult>> {
        self.inner().multi(ops).await
    }
    fn session(&self) -> tokio::sync::watch::Receiver<zooraft_recipes::SessionState> {
        self.inner().session()
    }
}

/// The [`ZkClient`] of a [`Forward`] implementation.
pub struct Forwarding<T>(pub T);

impl<T: Forward> Forwarding<T> {
    /// `forward` as a client the recipes take.
    pub fn client(forward: T) -> Arc<Forwarding<T>> {
        Arc::new(Forwarding(forward))
    }
}

#[async_trait::async_trait]
impl<T: Forward> ZkClient for Forwarding<T> {
    async fn create_acl(
        &self,
        path: &str,
        data: &[u8],
        mode: zooraft_recipes::CreateMode,
        acl: &[zooraft_recipes::Acl],
    ) -> zooraft_recipes::ZkResult<(String, zooraft_recipes::Stat)> {
        self.0.create_acl(path, data, mode, acl).await
    }
    async fn sync(&self, path: &str) -> zooraft_recipes::ZkResult<()> {
        self.0.sync(path).await
    }
    async fn delete(&self, path: &str, version: i32) -> zooraft_recipes::ZkResult<()> {
        self.0.delete(path, version).await
    }
    async fn set_data(
        &self,
        path: &str,
        data: &[u8],
        version: i32,
    ) -> zooraft_recipes::ZkResult<zooraft_recipes::Stat> {
        self.0.set_data(path, data, version).await
    }
    async fn exists(&self, path: &str) -> zooraft_recipes::ZkResult<Option<zooraft_recipes::Stat>> {
        self.0.exists(path).await
    }
    async fn get_data(
        &self,
        path: &str,
    ) -> zooraft_recipes::ZkResult<(Vec<u8>, zooraft_recipes::Stat)> {
        self.0.get_data(path).await
    }
    async fn get_data_watch(
        &self,
        path: &str,
    ) -> zooraft_recipes::ZkResult<(
        Vec<u8>,
        zooraft_recipes::Stat,
        zooraft_recipes::WatchReceiver,
    )> {
        self.0.get_data_watch(path).await
    }
    async fn get_children(&self, path: &str) -> zooraft_recipes::ZkResult<Vec<String>> {
        self.0.get_children(path).await
    }
    async fn get_children_watch(
        &self,
        path: &str,
    ) -> zooraft_recipes::ZkResult<(Vec<String>, zooraft_recipes::WatchReceiver)> {
        self.0.get_children_watch(path).await
    }
    async fn exists_watch(
        &self,
        path: &str,
    ) -> zooraft_recipes::ZkResult<(
        Option<zooraft_recipes::Stat>,
        zooraft_recipes::WatchReceiver,
    )> {
        self.0.exists_watch(path).await
    }
    async fn multi(
        &self,
        ops: &[zooraft_recipes::Op],
    ) -> zooraft_recipes::ZkResult<Vec<zooraft_recipes::OpResult>> {
        self.0.multi(ops).await
    }
    async fn close(&self) {
        self.0.inner().close().await
    }
    fn session(&self) -> tokio::sync::watch::Receiver<zooraft_recipes::SessionState> {
        self.0.session()
    }
}

/// Runs every command to completion (at most `max`), failing the test with its output if
/// one fails.
pub async fn run_all(cmds: Vec<tokio::process::Command>, max: Duration) {
    let mut waits = Vec::new();
    for mut c in cmds {
        c.stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true);
        let child = c.spawn().expect("spawn contender");
        waits.push(tokio::spawn(child.wait_with_output()));
    }
    let deadline = tokio::time::Instant::now() + max;
    for w in waits {
        let out = tokio::time::timeout_at(deadline, w)
            .await
            .expect("contenders finished in time")
            .expect("task")
            .expect("contender output");
        assert!(
            out.status.success(),
            "a contender failed ({}):\n{}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

// The contenders: processes that take a lock in a loop and log each critical section (see
// `read_log`): the recipes' own, Apache Curator's (Java) and kazoo's.

/// The recipes' own contender binary (the workspace's `lock-contender` package: a test
/// program is not part of the library crate).
pub fn contender() -> std::path::PathBuf {
    zooraft_tests::lock_contender_binary()
}

pub fn rust_contender(
    connect: &str,
    path: &str,
    tasks: usize,
    iterations: usize,
    log: &Path,
    counter: Option<&str>,
) -> Command {
    let mut c = Command::new(contender());
    c.arg("contend")
        .arg(connect)
        .arg(path)
        .arg(tasks.to_string())
        .arg(iterations.to_string())
        .arg(log);
    if let Some(counter) = counter {
        c.arg(counter);
    }
    c
}

pub fn curator_contender(
    connect: &str,
    path: &str,
    threads: usize,
    iterations: usize,
    log: &Path,
) -> Command {
    let mut c: Command = zooraft_tests::java::java_command("LockContender").into();
    c.arg(connect)
        .arg(path)
        .arg(threads.to_string())
        .arg(iterations.to_string())
        .arg(log);
    c
}

pub fn curator_rw_contender(
    connect: &str,
    path: &str,
    threads: usize,
    iterations: usize,
    log: &Path,
) -> Command {
    let mut c: Command = zooraft_tests::java::java_command("LockRwContender").into();
    c.arg(connect)
        .arg(path)
        .arg(threads.to_string())
        .arg(iterations.to_string())
        .arg(log);
    c
}

pub fn rust_rw_contender(
    connect: &str,
    path: &str,
    tasks: usize,
    iterations: usize,
    log: &Path,
) -> Command {
    let mut c = Command::new(contender());
    c.arg("rw")
        .arg(connect)
        .arg(path)
        .arg(tasks.to_string())
        .arg(iterations.to_string())
        .arg(log);
    c
}

pub fn kazoo_contender(
    connect: &str,
    path: &str,
    threads: usize,
    iterations: usize,
    log: &Path,
) -> Command {
    let script = zooraft_tests::suite_dir().join("python/lock_contender.py");
    let mut c = Command::new("python3");
    c.arg(script)
        .arg(connect)
        .arg(path)
        .arg(threads.to_string())
        .arg(iterations.to_string())
        .arg(log);
    c
}
