//! SubtreeCache: the initial load, events in order, convergence after a burst, the root
//! deleted and created again; on both servers and both backends, with the persistent
//! recursive watch and with one-shot watches; and resyncs after a cut connection, a session
//! expiry and a killed ensemble member.

use crate::common;

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc::UnboundedReceiver;
use zooraft_recipes::{
    CacheEvent, Connection, CreateMode, Error, ErrorCode, SubtreeCache, WatchMode, ZkClient,
};
use zooraft_tests::proxy::Proxy;
use zooraft_tests::{ServerKind, TestEnsemble};

use common::{client, connect, eventually, server, Backend};

const WAIT: Duration = Duration::from_secs(60);

/// The subtree as the server has it: path -> (data, mzxid).
async fn server_tree(c: &Arc<dyn ZkClient>, root: &str) -> BTreeMap<String, (Vec<u8>, i64)> {
    let mut tree = BTreeMap::new();
    let mut queue = VecDeque::from([root.to_string()]);
    while let Some(p) = queue.pop_front() {
        let (data, stat) = match c.get_data(&p).await {
            Ok(r) => r,
            Err(ErrorCode::NoNode) => continue,
            Err(e) => panic!("get_data {p}: {e}"),
        };
        tree.insert(p.clone(), (data, stat.mzxid));
        match c.get_children(&p).await {
            Ok(names) => queue.extend(names.iter().map(|n| format!("{p}/{n}"))),
            Err(ErrorCode::NoNode) => {}
            Err(e) => panic!("get_children {p}: {e}"),
        }
    }
    tree
}

fn cached_tree(cache: &SubtreeCache) -> BTreeMap<String, (Vec<u8>, i64)> {
    cache
        .snapshot()
        .into_iter()
        .map(|d| (d.path, (d.data, d.stat.mzxid)))
        .collect()
}

/// Waits until the cache equals the server's subtree.
async fn converges(cache: &Arc<SubtreeCache>, observer: &Arc<dyn ZkClient>, what: &str) {
    let (cache, observer) = (cache.clone(), observer.clone());
    let root = cache.path().to_string();
    eventually(WAIT, what, move || {
        let (cache, observer, root) = (cache.clone(), observer.clone(), root.clone());
        async move { server_tree(&observer, &root).await == cached_tree(&cache) }
    })
    .await;
}

async fn next(events: &mut UnboundedReceiver<CacheEvent>) -> CacheEvent {
    tokio::time::timeout(WAIT, events.recv())
        .await
        .expect("an event in time")
        .expect("events open")
}

/// The next event, which must be a creation of `path` with `data`.
async fn created(events: &mut UnboundedReceiver<CacheEvent>, path: &str, data: &[u8]) {
    match next(events).await {
        CacheEvent::Created(d) if d.path == path && d.data == data => {}
        other => panic!("expected {path} created, got {other:?}"),
    }
}

async fn changed(events: &mut UnboundedReceiver<CacheEvent>, path: &str, from: &[u8], to: &[u8]) {
    match next(events).await {
        CacheEvent::Changed { old, new }
            if new.path == path && old.data == from && new.data == to =>
        {
            assert!(new.stat.mzxid > old.stat.mzxid);
        }
        other => panic!("expected {path} changed, got {other:?}"),
    }
}

async fn deleted(events: &mut UnboundedReceiver<CacheEvent>, path: &str) {
    match next(events).await {
        CacheEvent::Deleted(d) if d.path == path => {}
        other => panic!("expected {path} deleted, got {other:?}"),
    }
}

async fn make(c: &Arc<dyn ZkClient>, path: &str, data: &[u8]) {
    c.create(path, data, CreateMode::Persistent)
        .await
        .expect("create");
}

/// Starts a cache of `root` and checks the initial load's events.
async fn started(
    c: Arc<dyn ZkClient>,
    root: &str,
    mode: WatchMode,
) -> (Arc<SubtreeCache>, UnboundedReceiver<CacheEvent>) {
    let cache = Arc::new(SubtreeCache::new(c, root).expect("cache").with_mode(mode));
    let mut events = cache.listen();
    cache.start();
    tokio::time::timeout(WAIT, cache.initialized())
        .await
        .expect("initialized in time")
        .expect("initialized");
    let mut loaded = Vec::new();
    loop {
        match next(&mut events).await {
            CacheEvent::Created(d) => loaded.push(d.path),
            CacheEvent::Initialized => break,
            other => panic!("unexpected during the load: {other:?}"),
        }
    }
    assert_eq!(loaded.len(), cache.len(), "one event per node loaded");
    (cache, events)
}

async fn events_in_order(kind: ServerKind, backend: Backend, mode: WatchMode) {
    let server = server(kind);
    let cs = server.connect_string();
    let writer = client(&cs).await;
    let c = connect(backend, &cs, Duration::from_secs(8)).await;
    let root = "/cache/app";
    make(&writer, "/cache", b"").await;
    make(&writer, root, b"r").await;
    make(&writer, "/cache/app/a", b"1").await;
    make(&writer, "/cache/app/b", b"2").await;
    make(&writer, "/cache/app/b/c", b"3").await;
    make(&writer, "/cache/elsewhere", b"not ours").await;

    let (cache, mut events) = started(c.clone(), root, mode).await;
    let expected_mode = match (mode, backend) {
        (WatchMode::OneShot, _) | (_, Backend::ZookeeperAsync) => WatchMode::OneShot,
        _ => WatchMode::Recursive,
    };
    assert_eq!(cache.mode(), Some(expected_mode));
    assert_eq!(cache.len(), 4);
    assert_eq!(cache.get("/cache/app/a").expect("a").data, b"1");
    assert_eq!(cache.children(root), vec!["a", "b"]);
    assert!(cache.get("/cache/elsewhere").is_none());

    // One change at a time: each is the next event, nothing in between.
    make(&writer, "/cache/app/x", b"x").await;
    created(&mut events, "/cache/app/x", b"x").await;
    writer
        .set_data("/cache/app/a", b"1b", -1)
        .await
        .expect("set");
    changed(&mut events, "/cache/app/a", b"1", b"1b").await;
    make(&writer, "/cache/app/b/c/d", b"d").await;
    created(&mut events, "/cache/app/b/c/d", b"d").await;
    writer.delete("/cache/app/b/c/d", -1).await.expect("delete");
    deleted(&mut events, "/cache/app/b/c/d").await;
    writer.delete("/cache/app/b/c", -1).await.expect("delete");
    deleted(&mut events, "/cache/app/b/c").await;
    writer.set_data(root, b"r2", -1).await.expect("set");
    changed(&mut events, root, b"r", b"r2").await;
    writer
        .set_data("/cache/elsewhere", b"x", -1)
        .await
        .expect("set");
    writer.delete("/cache/app/x", -1).await.expect("delete");
    deleted(&mut events, "/cache/app/x").await;

    // A burst without waiting: the cache ends equal to the server.
    make(&writer, "/cache/app/burst", b"").await;
    for i in 0..40 {
        let p = format!("/cache/app/burst/n{}", i % 10);
        match i % 4 {
            0 | 1 => match writer.create(&p, b"v", CreateMode::Persistent).await {
                Ok(_) | Err(ErrorCode::NodeExists) => {}
                Err(e) => panic!("{e}"),
            },
            2 => match writer.set_data(&p, format!("{i}").as_bytes(), -1).await {
                Ok(_) | Err(ErrorCode::NoNode) => {}
                Err(e) => panic!("{e}"),
            },
            _ => match writer.delete(&p, -1).await {
                Ok(()) | Err(ErrorCode::NoNode) => {}
                Err(e) => panic!("{e}"),
            },
        }
    }
    converges(
        &cache,
        &writer,
        "the cache matches the server after a burst",
    )
    .await;

    // The root goes, and comes back.
    for p in server_tree(&writer, root).await.keys().rev() {
        writer.delete(p, -1).await.expect("delete");
    }
    let cc = cache.clone();
    eventually(WAIT, "the cache is empty", move || {
        let cc = cc.clone();
        async move { cc.is_empty() }
    })
    .await;
    make(&writer, root, b"again").await;
    make(&writer, "/cache/app/z", b"z").await;
    converges(&cache, &writer, "the root is back").await;
    assert_eq!(cache.get(root).expect("root").data, b"again");
    // Gone and back at once: whatever the cache saw in between, it ends right.
    for p in server_tree(&writer, root).await.keys().rev() {
        writer.delete(p, -1).await.expect("delete");
    }
    make(&writer, root, b"third").await;
    converges(&cache, &writer, "the root is back at once").await;
    assert_eq!(cache.resyncs(), 0, "no reconnection, no resync");
    cache.close();
    c.close().await;
    writer.close().await;
}

async fn events_auto(kind: ServerKind, backend: Backend) {
    events_in_order(kind, backend, WatchMode::Auto).await
}

async fn events_one_shot(kind: ServerKind) {
    events_in_order(kind, Backend::ZookeeperClient, WatchMode::OneShot).await
}

every_backend!(cache_events, events_auto);
both_servers!(
    cache_events_one_shot_apache,
    cache_events_one_shot_zooraft,
    events_one_shot
);

/// Builds a small tree under `root` for the fault tests.
async fn seed(writer: &Arc<dyn ZkClient>, root: &str) {
    make(writer, root, b"root").await;
    for i in 0..5 {
        make(writer, &format!("{root}/n{i}"), b"0").await;
        make(writer, &format!("{root}/n{i}/leaf"), b"0").await;
    }
}

/// Retries `op` through connection losses (an ensemble electing a new leader); `done`
/// says which other outcomes mean it took (a create or delete whose reply was lost).
async fn retried<F, Fut>(what: &str, done: &[ErrorCode], mut op: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<(), ErrorCode>>,
{
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        match op().await {
            Ok(()) => return,
            Err(e) if done.contains(&e) => return,
            Err(ErrorCode::ConnectionLoss | ErrorCode::OperationTimeout)
                if tokio::time::Instant::now() < deadline =>
            {
                tokio::time::sleep(Duration::from_millis(200)).await
            }
            Err(e) => panic!("{what}: {e}"),
        }
    }
}

/// Changes made while the cache cannot hear of them.
async fn change_behind_its_back(w: &Arc<dyn ZkClient>, root: &str) {
    let (n0, leaf, n1) = (
        format!("{root}/n0"),
        format!("{root}/n1/leaf"),
        format!("{root}/n1"),
    );
    retried("set", &[], || async {
        w.set_data(&n0, b"1", -1).await.map(drop)
    })
    .await;
    for p in [&leaf, &n1] {
        retried("delete", &[ErrorCode::NoNode], || w.delete(p, -1)).await;
    }
    for (p, data) in [
        (format!("{root}/n9"), &b"new"[..]),
        (format!("{root}/n9/deep"), &b"deeper"[..]),
    ] {
        retried("create", &[ErrorCode::NodeExists], || async {
            w.create(&p, data, CreateMode::Persistent).await.map(drop)
        })
        .await;
    }
}

async fn state_is(c: &Arc<dyn ZkClient>, want: Connection) {
    let c = c.clone();
    eventually(WAIT, "the client's connection state", move || {
        let c = c.clone();
        async move { c.session().borrow().connection == want }
    })
    .await;
}

async fn connection_cut(kind: ServerKind, backend: Backend) {
    let server = server(kind);
    let proxy = Proxy::start(server.addr());
    let writer = client(&server.connect_string()).await;
    let c = connect(backend, &proxy.connect_string(), Duration::from_secs(8)).await;
    let root = "/cache/cut";
    make(&writer, "/cache", b"").await;
    seed(&writer, root).await;
    let (cache, mut events) = started(c.clone(), root, WatchMode::Auto).await;
    proxy.refuse_connections(true);
    proxy.cut_all();
    state_is(&c, Connection::Disconnected).await;
    change_behind_its_back(&writer, root).await;
    proxy.refuse_connections(false);
    let resynced = tokio::time::timeout(WAIT, async {
        loop {
            if next(&mut events).await == CacheEvent::Resynced {
                return;
            }
        }
    })
    .await;
    assert!(resynced.is_ok(), "a Resynced event after the reconnection");
    assert!(cache.resyncs() >= 1);
    converges(&cache, &writer, "the cache caught up after the cut").await;
    // And it follows again.
    writer
        .set_data(&format!("{root}/n9"), b"after", -1)
        .await
        .expect("set");
    converges(&cache, &writer, "the cache follows after the resync").await;
    c.close().await;
    writer.close().await;
}

every_backend!(cache_resyncs_after_connection_cut, connection_cut);

/// The cache's session expires. zookeeper-async starts a new session and the cache catches
/// up in it; zookeeper-client's expiry is final, and the cache says so.
async fn session_expiry(kind: ServerKind, backend: Backend) {
    let server = server(kind);
    let proxy = Proxy::start(server.addr());
    let writer = client(&server.connect_string()).await;
    let c = connect(backend, &proxy.connect_string(), Duration::from_secs(2)).await;
    let root = "/cache/expiry";
    make(&writer, "/cache", b"").await;
    seed(&writer, root).await;
    let eph = format!("{root}/ephemeral");
    c.create(&eph, b"mine", CreateMode::Ephemeral)
        .await
        .expect("ephemeral");
    let (cache, _events) = started(c.clone(), root, WatchMode::Auto).await;
    assert!(cache.get(&eph).is_some());
    proxy.blackhole(true);
    change_behind_its_back(&writer, root).await;
    let (w, e) = (writer.clone(), eph.clone());
    eventually(WAIT, "the server expired the session", move || {
        let (w, e) = (w.clone(), e.clone());
        async move { w.exists(&e).await.expect("exists").is_none() }
    })
    .await;
    proxy.blackhole(false);
    proxy.cut_all();
    match backend {
        Backend::ZookeeperAsync => {
            converges(&cache, &writer, "the cache caught up in a new session").await;
            assert!(cache.get(&eph).is_none());
            assert!(cache.resyncs() >= 1);
        }
        Backend::ZookeeperClient => {
            let why = tokio::time::timeout(WAIT, cache.stopped())
                .await
                .expect("the cache stops");
            assert_eq!(why, Error::SessionExpired);
        }
    }
    c.close().await;
    writer.close().await;
}

every_backend!(cache_after_session_expiry, session_expiry);

/// The ensemble member the cache's client is connected to is killed; the client moves to
/// another member and the cache catches up there.
async fn member_kill(_kind: ServerKind, backend: Backend) {
    let mut ensemble = TestEnsemble::start(3, 0, &[]);
    let proxy = Proxy::start(ensemble.member(0).addr());
    let writer = client(&ensemble.member(2).connect_string()).await;
    let c = connect(backend, &proxy.connect_string(), Duration::from_secs(8)).await;
    let root = "/cache/kill";
    make(&writer, "/cache", b"").await;
    seed(&writer, root).await;
    let (cache, _events) = started(c.clone(), root, WatchMode::Auto).await;
    converges(&cache, &writer, "the cache has the tree").await;
    ensemble.member_mut(0).kill();
    proxy.set_upstream(ensemble.member(1).addr());
    proxy.cut_all();
    change_behind_its_back(&writer, root).await;
    converges(&cache, &writer, "the cache caught up on another member").await;
    // And it follows there.
    let n9 = format!("{root}/n9");
    retried("set", &[], || async {
        writer.set_data(&n9, b"after", -1).await.map(drop)
    })
    .await;
    converges(&cache, &writer, "the cache follows on another member").await;
    assert!(cache.resyncs() >= 1);
    c.close().await;
    writer.close().await;
}

mod member_kill {
    use super::*;

    #[test]
    fn zooraft_ensemble_zookeeper_client() {
        common::run_with(ServerKind::Zooraft, Backend::ZookeeperClient, member_kill)
    }

    #[test]
    fn zooraft_ensemble_zookeeper_async() {
        common::run_with(ServerKind::Zooraft, Backend::ZookeeperAsync, member_kill)
    }
}

/// A foreign cache process (Curator's CuratorCache, kazoo's TreeCache) answering `dump`.
struct Peer {
    name: &'static str,
    child: tokio::process::Child,
    stdin: tokio::process::ChildStdin,
    lines: tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
}

impl Peer {
    async fn start(name: &'static str, mut cmd: tokio::process::Command, ready: &str) -> Peer {
        cmd.stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true);
        let mut child = cmd.spawn().expect("spawn peer cache");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = child.stdout.take().expect("stdout");
        let mut lines = tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(stdout));
        let first = tokio::time::timeout(Duration::from_secs(150), lines.next_line())
            .await
            .expect("the peer cache starts in time")
            .expect("read");
        assert_eq!(first.as_deref(), Some(ready), "{name}");
        Peer {
            name,
            child,
            stdin,
            lines,
        }
    }

    /// The peer's cache now: path -> data as `x<hex>`.
    async fn dump(&mut self) -> BTreeMap<String, String> {
        use tokio::io::AsyncWriteExt;
        self.stdin.write_all(b"dump\n").await.expect("write");
        self.stdin.flush().await.expect("flush");
        let mut nodes = BTreeMap::new();
        loop {
            let line = tokio::time::timeout(WAIT, self.lines.next_line())
                .await
                .expect("the peer answers")
                .expect("read")
                .unwrap_or_else(|| panic!("{} exited", self.name));
            if line == "end" {
                return nodes;
            }
            let mut f = line.split_whitespace();
            assert_eq!(f.next(), Some("node"), "{}: {line}", self.name);
            let (path, data) = (f.next().expect("path"), f.next().expect("data"));
            nodes.insert(path.to_string(), data.to_string());
        }
    }

    async fn finish(mut self) {
        drop(self.stdin);
        let status = tokio::time::timeout(WAIT, self.child.wait())
            .await
            .expect("the peer exits")
            .expect("wait");
        assert!(status.success(), "{}: {status}", self.name);
    }
}

fn as_hex(tree: &BTreeMap<String, (Vec<u8>, i64)>) -> BTreeMap<String, String> {
    tree.iter()
        .map(|(p, (data, _))| {
            let hex: String = data.iter().map(|b| format!("{b:02x}")).collect();
            (p.clone(), format!("x{hex}"))
        })
        .collect()
}

/// Our cache, Curator's CuratorCache and kazoo's TreeCache on one subtree while it changes:
/// all three end with what the server has.
async fn interop(kind: ServerKind, backend: Backend) {
    let server = server(kind);
    let cs = server.connect_string();
    let writer = client(&cs).await;
    let root = "/cache/shared";
    make(&writer, "/cache", b"").await;
    seed(&writer, root).await;
    let mut curator_cmd: tokio::process::Command =
        zooraft_tests::java::java_command("CuratorCacheDump").into();
    curator_cmd.args([&cs, root]);
    let mut kazoo_cmd = tokio::process::Command::new("python3");
    kazoo_cmd
        .arg(zooraft_tests::suite_dir().join("python/kazoo_tree_cache.py"))
        .args([&cs, root]);
    let mut peers = vec![
        Peer::start("curator", curator_cmd, "curator-cache-ready").await,
        Peer::start("kazoo", kazoo_cmd, "kazoo-cache-ready").await,
    ];
    let c = connect(backend, &cs, Duration::from_secs(8)).await;
    let (cache, _events) = started(c.clone(), root, WatchMode::Auto).await;
    change_behind_its_back(&writer, root).await;
    for i in 0..20 {
        writer
            .set_data(
                &format!("{root}/n{}", i % 5 + 2),
                format!("v{i}").as_bytes(),
                -1,
            )
            .await
            .map(drop)
            .or_else(|e| {
                if e == ErrorCode::NoNode {
                    Ok(())
                } else {
                    Err(e)
                }
            })
            .expect("set");
    }
    make(&writer, &format!("{root}/n9/deep/deeper"), b"").await;
    converges(&cache, &writer, "our cache matches the server").await;
    let want = as_hex(&server_tree(&writer, root).await);
    assert_eq!(as_hex(&cached_tree(&cache)), want);
    for peer in &mut peers {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let theirs = peer.dump().await;
            if theirs == want {
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "{} disagrees:\n{theirs:?}\nserver:\n{want:?}",
                peer.name
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    for peer in peers {
        peer.finish().await;
    }
    c.close().await;
    writer.close().await;
}

every_backend!(cache_interop_with_curator_and_kazoo, interop);
