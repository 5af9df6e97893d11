//! MultiLock: in order, all or nothing, released in reverse order, one fencing
//! token per lock; beside Curator's InterProcessMutex and InterProcessMultiLock (Java
//! processes) on the same paths; and a set lost with its session.

use crate::common;

use std::sync::{Arc, Mutex as StdMutex};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdout};
use zooraft_recipes::{
    Acl, Connection, CreateMode, LostReason, MultiLock, Stat, ZkClient, ZkResult,
};
use zooraft_tests::proxy::Proxy;
use zooraft_tests::ServerKind;

use common::{children, client, connect, eventually, server, Backend, Forward, Forwarding};

const WAIT: Duration = Duration::from_secs(60);

/// A client that records the lock-node creates and deletes it sends, in order.
struct Recorder {
    inner: Arc<dyn ZkClient>,
    log: Arc<StdMutex<Vec<String>>>,
}

#[async_trait::async_trait]
impl Forward for Recorder {
    fn inner(&self) -> &Arc<dyn ZkClient> {
        &self.inner
    }
    async fn create_acl(
        &self,
        path: &str,
        data: &[u8],
        mode: CreateMode,
        acl: &[Acl],
    ) -> ZkResult<(String, Stat)> {
        if path.contains("-lock-") {
            self.log.lock().unwrap().push(format!("create {path}"));
        }
        self.inner.create_acl(path, data, mode, acl).await
    }
    async fn delete(&self, path: &str, version: i32) -> ZkResult<()> {
        if path.contains("-lock-") {
            self.log.lock().unwrap().push(format!("delete {path}"));
        }
        self.inner.delete(path, version).await
    }
}

/// The lock paths of the recorded lines of `kind`, in order (a create retried after its
/// parents were made counts once).
fn recorded(log: &StdMutex<Vec<String>>, kind: &str) -> Vec<String> {
    let mut paths: Vec<String> = log
        .lock()
        .unwrap()
        .iter()
        .filter_map(|l| l.strip_prefix(&format!("{kind} ")))
        .map(|p| p[..p.rfind('/').expect("a node path")].to_string())
        .collect();
    paths.dedup();
    paths
}

/// The czxid of the lock's only node.
async fn only_node_czxid(c: &Arc<dyn ZkClient>, path: &str) -> u64 {
    let nodes = children(c, path).await;
    assert_eq!(nodes.len(), 1, "{path}: {nodes:?}");
    let stat = c
        .exists(&format!("{path}/{}", nodes[0]))
        .await
        .expect("exists")
        .expect("node");
    stat.czxid as u64
}

async fn no_nodes(c: &Arc<dyn ZkClient>, path: &str) {
    let (c, p) = (c.clone(), path.to_string());
    eventually(WAIT, "no lock node left", move || {
        let (c, p) = (c.clone(), p.clone());
        async move { children(&c, &p).await.is_empty() }
    })
    .await;
}

async fn semantics(kind: ServerKind, backend: Backend) {
    let server = server(kind);
    let cs = server.connect_string();
    let observer = client(&cs).await;
    let log = Arc::new(StdMutex::new(Vec::new()));
    let inner = connect(backend, &cs, Duration::from_secs(8)).await;
    let recording: Arc<dyn ZkClient> = Forwarding::client(Recorder {
        inner: inner.clone(),
        log: log.clone(),
    });
    let other = connect(backend, &cs, Duration::from_secs(8)).await;
    let (a, b, c, d) = ("/locks/m/a", "/locks/m/b", "/locks/m/c", "/locks/m/d");

    assert!(MultiLock::new(other.clone(), &[]).is_err());
    assert!(MultiLock::new(other.clone(), &[a, a]).is_err());
    assert!(MultiLock::new(other.clone(), &[a, "b"]).is_err());

    let multi = MultiLock::new(recording.clone(), &[a, b, c]).expect("multi");
    assert_eq!(multi.paths(), vec![a, b, c]);
    let guard = multi
        .acquire_timeout(WAIT)
        .await
        .expect("acquire")
        .expect("free");
    assert!(guard.is_valid());
    assert_eq!(recorded(&log, "create"), vec![a, b, c], "taken in order");
    let tokens = guard.fencing_tokens();
    assert_eq!(tokens.len(), 3);
    for (path, token) in &tokens {
        assert_eq!(
            token.get(),
            only_node_czxid(&observer, path).await,
            "{path}"
        );
        assert_eq!(guard.fencing_token(path), Some(*token));
    }
    assert_eq!(guard.fencing_token(d), None);

    // All or nothing: c is busy, so d is not kept either.
    let overlapping = MultiLock::new(other.clone(), &[d, c]).expect("multi");
    let busy = overlapping
        .acquire_timeout(Duration::from_millis(500))
        .await
        .expect("acquire");
    assert!(busy.is_none(), "c is held");
    no_nodes(&observer, d).await;
    assert_eq!(children(&observer, c).await.len(), 1, "only our node on c");

    // Released last first; then the other set can be had.
    log.lock().unwrap().clear();
    guard.release().await.expect("release");
    assert_eq!(
        recorded(&log, "delete"),
        vec![c, b, a],
        "released in reverse"
    );
    let g = overlapping
        .acquire_timeout(WAIT)
        .await
        .expect("acquire")
        .expect("free now");
    let newer = g.fencing_token(c).expect("c");
    let older = tokens.iter().find(|t| t.0 == c).expect("c").1;
    assert!(newer > older, "tokens increase from holder to holder");
    drop(g);
    no_nodes(&observer, c).await;
    no_nodes(&observer, d).await;
    for cl in [inner, other, observer] {
        cl.close().await;
    }
}

every_backend!(multi_lock_semantics, semantics);

/// A Curator process holding locks until told to release them.
struct Holder {
    child: Child,
    lines: Lines<BufReader<ChildStdout>>,
}

impl Holder {
    fn start(connect: &str, paths: &[&str]) -> Holder {
        let mut cmd: tokio::process::Command =
            zooraft_tests::java::java_command("MultiLockHolder").into();
        cmd.arg(connect)
            .arg(paths.join(","))
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true);
        let mut child = cmd.spawn().expect("spawn MultiLockHolder");
        let lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
        Holder { child, lines }
    }

    async fn expect(&mut self, want: &str) {
        let line = tokio::time::timeout(Duration::from_secs(150), self.lines.next_line())
            .await
            .expect("Curator answers in time")
            .expect("read");
        assert_eq!(line.as_deref(), Some(want), "Curator holder");
    }

    async fn release(mut self) {
        let mut stdin = self.child.stdin.take().expect("stdin");
        stdin.write_all(b"release\n").await.expect("write");
        stdin.flush().await.expect("flush");
        self.expect("curator-released").await;
        let status = tokio::time::timeout(WAIT, self.child.wait())
            .await
            .expect("exits")
            .expect("wait");
        assert!(status.success(), "{status}");
    }
}

async fn interop(kind: ServerKind, backend: Backend) {
    let server = server(kind);
    let cs = server.connect_string();
    let observer = client(&cs).await;
    let ours = connect(backend, &cs, Duration::from_secs(8)).await;
    let (a, b) = ("/locks/mixed/a", "/locks/mixed/b");
    let multi = MultiLock::new(ours.clone(), &[a, b]).expect("multi");

    // Curator's InterProcessMutex holds b: we cannot have the set, and keep nothing of it.
    let mut holder = Holder::start(&cs, &[b]);
    holder.expect("curator-acquired").await;
    let curators = only_node_czxid(&observer, b).await;
    let busy = multi
        .acquire_timeout(Duration::from_millis(500))
        .await
        .expect("acquire");
    assert!(busy.is_none());
    no_nodes(&observer, a).await;
    // A waiting acquire holds a and queues on b until Curator lets go.
    let waiting = {
        let multi = multi.clone();
        tokio::spawn(async move { multi.acquire_timeout(WAIT).await })
    };
    let o = observer.clone();
    eventually(WAIT, "we hold a and queue on b", move || {
        let o = o.clone();
        async move { children(&o, a).await.len() == 1 && children(&o, b).await.len() == 2 }
    })
    .await;
    assert!(!waiting.is_finished(), "Curator still holds b");
    holder.release().await;
    let guard = tokio::time::timeout(WAIT, waiting)
        .await
        .expect("acquired")
        .expect("task")
        .expect("acquire")
        .expect("not busy");
    assert!(guard.fencing_token(b).expect("b").get() > curators);

    // Curator's InterProcessMultiLock over the same paths waits for us, then we for it.
    let mut theirs = Holder::start(&cs, &[a, b]);
    let o = observer.clone();
    eventually(Duration::from_secs(150), "Curator queues on a", move || {
        let o = o.clone();
        async move { children(&o, a).await.len() == 2 }
    })
    .await;
    guard.release().await.expect("release");
    theirs.expect("curator-acquired").await;
    let busy = multi
        .acquire_timeout(Duration::from_millis(500))
        .await
        .expect("acquire");
    assert!(busy.is_none(), "Curator holds the set");
    assert_eq!(
        children(&observer, a).await.len(),
        1,
        "nothing of ours on a"
    );
    theirs.release().await;
    let g = multi
        .acquire_timeout(WAIT)
        .await
        .expect("acquire")
        .expect("free");
    g.release().await.expect("release");
    ours.close().await;
    observer.close().await;
}

every_backend!(multi_lock_interop_with_curator, interop);

/// The session of the holder expires: the set is lost, and another client gets it with
/// newer tokens.
async fn expiry(kind: ServerKind, backend: Backend) {
    let server = server(kind);
    let proxy = Proxy::start(server.addr());
    let observer = client(&server.connect_string()).await;
    let c = connect(backend, &proxy.connect_string(), Duration::from_secs(4)).await;
    let paths = ["/locks/expiry/a", "/locks/expiry/b"];
    let multi = MultiLock::new(c.clone(), &paths).expect("multi");
    let guard = multi.acquire().await.expect("acquire");
    assert!(guard.is_valid());
    proxy.blackhole(true);
    let reason = tokio::time::timeout(Duration::from_secs(20), guard.lost())
        .await
        .expect("lost() completes");
    assert!(
        matches!(
            reason,
            LostReason::ConnectionSuspended | LostReason::SessionExpired
        ),
        "{reason:?}"
    );
    assert!(!guard.is_valid());
    let next = MultiLock::new(observer.clone(), &paths).expect("multi");
    let g = tokio::time::timeout(Duration::from_secs(30), next.acquire())
        .await
        .expect("the set is free once the session expired")
        .expect("acquire");
    for (path, token) in guard.fencing_tokens() {
        assert!(g.fencing_token(&path).expect("same paths") > token);
    }
    proxy.blackhole(false);
    proxy.cut_all();
    let cc = c.clone();
    eventually(WAIT, "old client learns its fate", move || {
        let cc = cc.clone();
        async move {
            matches!(
                cc.session().borrow().connection,
                Connection::Connected | Connection::Expired
            )
        }
    })
    .await;
    assert!(guard.guards()[0]
        .fenced_set_data(paths[0], b"x", -1)
        .await
        .is_err());
    drop(guard);
    g.release().await.expect("release");
    c.close().await;
    observer.close().await;
}

every_backend!(multi_lock_lost_on_expiry, expiry);
