//! Barrier and DoubleBarrier: their semantics on both servers and both
//! client backends, members of Curator (Java) and kazoo (Python) in the same barriers, and a
//! member whose session expires.

use crate::common;

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;
use tokio::task::JoinHandle;
use zooraft_recipes::{Barrier, DoubleBarrier, Error, ErrorCode, ZkClient};
use zooraft_tests::proxy::Proxy;
use zooraft_tests::ServerKind;

use common::{children, client, connect, eventually, run_all, server, Backend};

const WAIT: Duration = Duration::from_secs(60);

async fn barrier(kind: ServerKind, backend: Backend) {
    let server = server(kind);
    let a = connect(backend, &server.connect_string(), Duration::from_secs(8)).await;
    let b = connect(backend, &server.connect_string(), Duration::from_secs(8)).await;
    let path = "/barriers/app/deploy";
    let raised = Barrier::new(a.clone(), path).expect("barrier");
    assert!(
        raised.wait_on_barrier(None).await.expect("wait"),
        "no node: no barrier"
    );
    raised.set_barrier().await.expect("set");
    raised.set_barrier().await.expect("set again");
    assert!(a.exists(path).await.expect("exists").is_some(), "one node");
    let waiter = Barrier::new(b.clone(), path).expect("barrier");
    let short = waiter
        .wait_on_barrier(Some(Duration::from_millis(300)))
        .await
        .expect("short wait");
    assert!(!short, "the barrier is up: the wait times out");
    let waiting: JoinHandle<Result<bool, Error>> = {
        let waiter = waiter.clone();
        tokio::spawn(async move { waiter.wait_on_barrier(None).await })
    };
    let more = {
        let waiter = Barrier::new(a.clone(), path).expect("barrier");
        tokio::spawn(async move { waiter.wait_on_barrier(Some(WAIT)).await })
    };
    // Data changes are not removals.
    a.set_data(path, b"still up", -1).await.expect("set data");
    assert!(!waiting.is_finished() && !more.is_finished());
    raised.remove_barrier().await.expect("remove");
    raised.remove_barrier().await.expect("remove again");
    for w in [waiting, more] {
        let passed = tokio::time::timeout(WAIT, w)
            .await
            .expect("waiters wake")
            .expect("task")
            .expect("wait");
        assert!(passed);
    }
    assert!(Barrier::new(a.clone(), "no/slash").is_err());
    a.close().await;
    b.close().await;
}

every_backend!(barrier_semantics, barrier);

/// Spawns `member.enter(timeout)`.
fn enter(m: &DoubleBarrier, t: Option<Duration>) -> JoinHandle<Result<bool, Error>> {
    let m = m.clone();
    tokio::spawn(async move { m.enter(t).await })
}

/// Spawns `member.leave(timeout)`.
fn leave(m: &DoubleBarrier, t: Option<Duration>) -> JoinHandle<Result<bool, Error>> {
    let m = m.clone();
    tokio::spawn(async move { m.leave(t).await })
}

async fn finished(task: JoinHandle<Result<bool, Error>>) -> bool {
    tokio::time::timeout(WAIT, task)
        .await
        .expect("barrier call returns")
        .expect("task")
        .expect("barrier call")
}

async fn finished_result(task: JoinHandle<Result<bool, Error>>) -> Result<bool, Error> {
    tokio::time::timeout(WAIT, task)
        .await
        .expect("barrier call returns")
        .expect("task")
}

fn name(m: &DoubleBarrier) -> String {
    let node = m.node_path().expect("a member");
    node.rsplit('/').next().expect("name").to_string()
}

/// The member nodes that stay while `leaving` leave and `staying` does not: Curator's order
/// has the lowest member wait for the highest, every other member delete its node at once.
/// (When the one staying is the lowest, the leavers' nodes are all gone, but they are still
/// waiting: for the lowest to go.)
fn expected_while_leaving(all: &[&DoubleBarrier], staying: &DoubleBarrier) -> BTreeSet<String> {
    let names: BTreeSet<String> = all.iter().map(|m| name(m)).collect();
    let lowest = names.first().expect("members").clone();
    BTreeSet::from([lowest, name(staying)])
}

async fn members_settle(observer: &Arc<dyn ZkClient>, path: &str, want: BTreeSet<String>) {
    let o = observer.clone();
    let p = path.to_string();
    eventually(WAIT, "leaving members settle", move || {
        let (o, p, want) = (o.clone(), p.clone(), want.clone());
        async move {
            let now: BTreeSet<String> = children(&o, &p)
                .await
                .into_iter()
                .filter(|c| c != "ready")
                .collect();
            now == want
        }
    })
    .await;
}

async fn double_barrier(kind: ServerKind, backend: Backend) {
    let server = server(kind);
    let cs = server.connect_string();
    let observer = client(&cs).await;
    let path = "/barriers/app/batch";
    let mut clients = Vec::new();
    for _ in 0..3 {
        clients.push(connect(backend, &cs, Duration::from_secs(8)).await);
    }
    let m: Vec<DoubleBarrier> = clients
        .iter()
        .map(|c| DoubleBarrier::new(c.clone(), path, 3).expect("member"))
        .collect();
    assert!(DoubleBarrier::new(observer.clone(), path, 0).is_err());
    assert!(m[0].leave(None).await.is_err(), "leave before enter");

    // Alone, the first member times out, and does not count any more.
    assert!(!m[0]
        .enter(Some(Duration::from_millis(300)))
        .await
        .expect("enter"));
    assert!(m[0].node_path().is_none());
    let o = observer.clone();
    eventually(WAIT, "a member that gave up is gone", move || {
        let o = o.clone();
        async move { children(&o, path).await.is_empty() }
    })
    .await;

    // A cancelled enter (its future dropped) does not count either.
    let o = observer.clone();
    let cancelled = tokio::time::timeout(Duration::from_millis(300), m[0].enter(None)).await;
    assert!(cancelled.is_err(), "alone, it was still waiting");
    assert!(m[0].node_path().is_none());
    eventually(WAIT, "a cancelled member is gone", move || {
        let o = o.clone();
        async move { children(&o, path).await.is_empty() }
    })
    .await;

    // Two members wait for the third.
    let first = enter(&m[0], None);
    let second = enter(&m[1], Some(WAIT));
    let o = observer.clone();
    eventually(WAIT, "two members in", move || {
        let o = o.clone();
        async move { children(&o, path).await.len() == 2 }
    })
    .await;
    assert!(
        !first.is_finished() && !second.is_finished(),
        "two of three: no one passes"
    );
    assert!(m[2].enter(Some(WAIT)).await.expect("third enters"));
    assert!(finished(first).await && finished(second).await);
    assert!(m[2].enter(None).await.is_err(), "entering twice");
    assert_eq!(m[0].members().await.expect("members").len(), 3);
    assert!(observer
        .exists(&format!("{path}/ready"))
        .await
        .expect("ready")
        .is_some());

    // Two leave; neither gets out while the third is still in.
    let all: Vec<&DoubleBarrier> = m.iter().collect();
    let want = expected_while_leaving(&all, &m[2]);
    let l0 = leave(&m[0], None);
    let l1 = leave(&m[1], Some(WAIT));
    members_settle(&observer, path, want).await;
    assert!(
        !l0.is_finished() && !l1.is_finished(),
        "the third has not left"
    );
    assert!(m[2].leave(Some(WAIT)).await.expect("third leaves"));
    assert!(finished(l0).await && finished(l1).await);
    assert!(
        children(&observer, path).await.is_empty(),
        "no member, no ready node"
    );
    assert!(m.iter().all(|m| m.node_path().is_none()));
    for c in clients {
        c.close().await;
    }
    observer.close().await;
}

every_backend!(double_barrier_semantics, double_barrier);

/// A member whose session expires has left: the others' `leave` does not wait for it, and
/// its own `leave` reports the expiry.
async fn member_expiry(kind: ServerKind, backend: Backend) {
    let server = server(kind);
    let cs = server.connect_string();
    let proxy = Proxy::start(server.addr());
    let observer = client(&cs).await;
    let path = "/barriers/expiry";
    let a = connect(backend, &cs, Duration::from_secs(8)).await;
    let b = connect(backend, &cs, Duration::from_secs(8)).await;
    let c = connect(backend, &proxy.connect_string(), Duration::from_secs(2)).await;
    let m: Vec<DoubleBarrier> = [&a, &b, &c]
        .iter()
        .map(|cl| DoubleBarrier::new((*cl).clone(), path, 3).expect("member"))
        .collect();
    let entering: Vec<_> = m.iter().map(|m| enter(m, Some(WAIT))).collect();
    for e in entering {
        assert!(finished(e).await, "all three enter");
    }
    let all: Vec<&DoubleBarrier> = m.iter().collect();
    let want = expected_while_leaving(&all, &m[2]);
    let expired_node = m[2].node_path().expect("member");
    let l0 = leave(&m[0], Some(WAIT));
    let l1 = leave(&m[1], Some(WAIT));
    members_settle(&observer, path, want).await;
    assert!(
        !l0.is_finished() && !l1.is_finished(),
        "the third is still in"
    );
    // The third member's connection goes silent; the server expires its session.
    proxy.blackhole(true);
    assert!(
        finished(l0).await && finished(l1).await,
        "the expired member left"
    );
    assert!(observer
        .exists(&expired_node)
        .await
        .expect("exists")
        .is_none());
    proxy.blackhole(false);
    proxy.cut_all();
    let left = tokio::time::timeout(WAIT, m[2].leave(Some(WAIT)))
        .await
        .expect("leave returns");
    assert_eq!(left, Err(Error::SessionExpired));
    for cl in [a, b, c] {
        cl.close().await;
    }
    observer.close().await;
}

every_backend!(double_barrier_member_expiry, member_expiry);

fn curator(args: &[&str]) -> Command {
    let mut c: Command = zooraft_tests::java::java_command("BarrierContender").into();
    c.args(args);
    c
}

fn kazoo(args: &[&str]) -> Command {
    let script = zooraft_tests::suite_dir().join("python/barrier_member.py");
    let mut c = Command::new("python3");
    c.arg(script).args(args);
    c
}

/// Runs `cmd` until it prints `waiting`, then lowers the barrier through `barrier`; the
/// process must then print `passed`.
async fn foreign_waiter(mut cmd: Command, barrier: &Barrier) {
    cmd.stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    let mut child = cmd.spawn().expect("spawn waiter");
    let mut stderr = child.stderr.take().expect("stderr");
    let stderr = tokio::spawn(async move {
        let mut text = String::new();
        let _ = tokio::io::AsyncReadExt::read_to_string(&mut stderr, &mut text).await;
        text
    });
    let stdout = child.stdout.take().expect("stdout");
    let mut lines = BufReader::new(stdout).lines();
    let mut seen = Vec::new();
    let saw_waiting = tokio::time::timeout(Duration::from_secs(120), async {
        while let Ok(Some(line)) = lines.next_line().await {
            let waiting = line.ends_with("waiting");
            seen.push(line);
            if waiting {
                return true;
            }
        }
        false
    })
    .await
    .expect("the waiter starts");
    if !saw_waiting {
        let _ = child.wait().await;
        let err = stderr.await.unwrap_or_default();
        panic!("the waiter failed before waiting: {seen:?}\n{err}");
    }
    barrier.remove_barrier().await.expect("remove");
    let rest = tokio::time::timeout(Duration::from_secs(120), async {
        let mut out = Vec::new();
        while let Ok(Some(line)) = lines.next_line().await {
            out.push(line);
        }
        out
    })
    .await
    .expect("the waiter finishes");
    let status = child.wait().await.expect("wait");
    let err = stderr.await.unwrap_or_default();
    assert!(
        status.success() && rest.iter().any(|l| l.ends_with("passed")),
        "the waiter did not pass: {status} {rest:?}\n{err}"
    );
}

async fn barrier_interop(kind: ServerKind, backend: Backend) {
    let server = server(kind);
    let cs = server.connect_string();
    let c = connect(backend, &cs, Duration::from_secs(8)).await;
    let path = "/barriers/mixed/gate";
    let ours = Barrier::new(c.clone(), path).expect("barrier");

    // Curator raises, we wait, Curator lowers.
    run_all(
        vec![curator(&["barrier", &cs, path, "set"])],
        Duration::from_secs(120),
    )
    .await;
    assert!(!ours
        .wait_on_barrier(Some(Duration::from_millis(300)))
        .await
        .expect("wait"));
    let waiting = {
        let ours = ours.clone();
        tokio::spawn(async move { ours.wait_on_barrier(Some(WAIT)).await })
    };
    run_all(
        vec![curator(&["barrier", &cs, path, "remove"])],
        Duration::from_secs(120),
    )
    .await;
    assert!(finished(waiting).await, "we pass when Curator lowers it");

    // We raise, Curator and kazoo wait, we lower.
    ours.set_barrier().await.expect("set");
    foreign_waiter(curator(&["barrier", &cs, path, "wait"]), &ours).await;
    ours.set_barrier().await.expect("set");
    foreign_waiter(kazoo(&["wait", &cs, path]), &ours).await;
    c.close().await;
}

every_backend!(barrier_interop_with_curator_and_kazoo, barrier_interop);

fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn append(log: &Path, event: &str) {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .expect("log");
    // One write per line: the processes append to the same file at once.
    let line = format!("rust {event} {}\n", monotonic_ns());
    f.write_all(line.as_bytes()).expect("append");
}

/// Counts per implementation and the checks: nobody got past `enter` before every member
/// had started entering, nor out of `leave` before every member had started leaving.
fn check_barrier_log(log: &Path, members: usize) -> Vec<String> {
    let text = std::fs::read_to_string(log).expect("log");
    let mut events: Vec<(String, String, u64)> = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let f: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(f.len(), 3, "bad log line {line:?}");
        events.push((f[0].into(), f[1].into(), f[2].parse().expect("ns")));
    }
    let of = |event: &str| -> Vec<u64> {
        events
            .iter()
            .filter(|e| e.1 == event)
            .map(|e| e.2)
            .collect()
    };
    let (starts, entered, leaves, left) = (
        of("enter-start"),
        of("entered"),
        of("leave-start"),
        of("left"),
    );
    for v in [&starts, &entered, &leaves, &left] {
        assert_eq!(v.len(), members, "every member logs each moment:\n{text}");
    }
    let last_start = starts.iter().max().copied().unwrap_or_default();
    let first_in = entered.iter().min().copied().unwrap_or_default();
    assert!(
        first_in >= last_start,
        "a member passed enter early:\n{text}"
    );
    let last_leave = leaves.iter().max().copied().unwrap_or_default();
    let first_out = left.iter().min().copied().unwrap_or_default();
    assert!(first_out >= last_leave, "a member left early:\n{text}");
    events
        .iter()
        .filter(|e| e.1 == "left")
        .map(|e| e.0.clone())
        .collect()
}

/// Two of ours, two Curator members and one kazoo member in one double barrier.
async fn double_barrier_interop(kind: ServerKind, backend: Backend) {
    let server = server(kind);
    let cs = server.connect_string();
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("barrier.log");
    let log_s = log.to_str().expect("utf-8 path").to_string();
    let path = "/barriers/mixed/double";
    const QTY: usize = 5;
    let qty = QTY.to_string();
    let foreign = run_all(
        vec![
            curator(&["double", &cs, path, &qty, "2", &log_s]),
            kazoo(&["double", &cs, path, &qty, "1", &log_s]),
        ],
        Duration::from_secs(170),
    );
    let mut ours = Vec::new();
    for _ in 0..2 {
        let c = connect(backend, &cs, Duration::from_secs(8)).await;
        let log = log.clone();
        ours.push(tokio::spawn(async move {
            let m = DoubleBarrier::new(c.clone(), path, QTY).expect("member");
            append(&log, "enter-start");
            assert!(m
                .enter(Some(Duration::from_secs(150)))
                .await
                .expect("enter"));
            append(&log, "entered");
            append(&log, "leave-start");
            assert!(m
                .leave(Some(Duration::from_secs(150)))
                .await
                .expect("leave"));
            append(&log, "left");
            c.close().await;
        }));
    }
    foreign.await;
    for t in ours {
        t.await.expect("our member");
    }
    let who = check_barrier_log(&log, QTY);
    for (name, n) in [("rust", 2), ("curator", 2), ("kazoo", 1)] {
        assert_eq!(who.iter().filter(|w| *w == name).count(), n, "{who:?}");
    }
    let observer = client(&cs).await;
    let left = children(&observer, path).await;
    assert!(left.is_empty(), "nodes left behind: {left:?}");
    match observer.get_children(path).await {
        Ok(_) | Err(ErrorCode::NoNode) => {}
        Err(e) => panic!("{e}"),
    }
    observer.close().await;
}

every_backend!(
    double_barrier_interop_with_curator_and_kazoo,
    double_barrier_interop
);

/// A waiting member's connection is cut and comes back (the session lives): its waits go on
/// (zookeeper-async sets no watch again after a reconnection: the barrier must look again).
async fn connection_loss(kind: ServerKind, backend: Backend) {
    let server = server(kind);
    let cs = server.connect_string();
    let proxy = Proxy::start(server.addr());
    let observer = client(&cs).await;
    let cut = connect(backend, &proxy.connect_string(), Duration::from_secs(8)).await;
    let others: Vec<Arc<dyn ZkClient>> = vec![
        connect(backend, &cs, Duration::from_secs(8)).await,
        connect(backend, &cs, Duration::from_secs(8)).await,
    ];
    let reconnect = || async {
        proxy.refuse_connections(true);
        proxy.cut_all();
        let c = cut.clone();
        eventually(WAIT, "the member is disconnected", move || {
            let c = c.clone();
            async move { c.session().borrow().connection != zooraft_recipes::Connection::Connected }
        })
        .await;
        proxy.refuse_connections(false);
        common::connected(&cut).await;
    };

    // A barrier wait.
    let path = "/barriers/cut/gate";
    let gate = Barrier::new(observer.clone(), path).expect("barrier");
    gate.set_barrier().await.expect("set");
    let waiting = {
        let b = Barrier::new(cut.clone(), path).expect("barrier");
        tokio::spawn(async move { b.wait_on_barrier(Some(WAIT)).await })
    };
    reconnect().await;
    assert!(!waiting.is_finished());
    gate.remove_barrier().await.expect("remove");
    assert!(
        finished(waiting).await,
        "the wait saw the removal after the reconnection"
    );

    // A double barrier: enter and leave.
    let path = "/barriers/cut/double";
    let member = DoubleBarrier::new(cut.clone(), path, 3).expect("member");
    let entering = enter(&member, Some(WAIT));
    let o = observer.clone();
    eventually(WAIT, "the member is in", move || {
        let o = o.clone();
        async move { children(&o, path).await.len() == 1 }
    })
    .await;
    reconnect().await;
    let rest: Vec<DoubleBarrier> = others
        .iter()
        .map(|c| DoubleBarrier::new(c.clone(), path, 3).expect("member"))
        .collect();
    let entered: Vec<_> = rest.iter().map(|m| enter(m, Some(WAIT))).collect();
    assert!(finished(entering).await, "entered after the reconnection");
    for e in entered {
        assert!(finished(e).await);
    }
    let all: Vec<&DoubleBarrier> = [&member].into_iter().chain(rest.iter()).collect();
    let want = expected_while_leaving(&all, &rest[1]);
    let leaving = leave(&member, Some(WAIT));
    let l0 = leave(&rest[0], Some(WAIT));
    members_settle(&observer, path, want).await;
    reconnect().await;
    if leaving.is_finished() || l0.is_finished() {
        let (a, b) = (finished_result(leaving).await, finished_result(l0).await);
        panic!("a member left early: {a:?} {b:?}");
    }
    assert!(rest[1].leave(Some(WAIT)).await.expect("leave"));
    assert!(
        finished(leaving).await && finished(l0).await,
        "left after the reconnection"
    );
    for c in others.into_iter().chain([cut, observer]) {
        c.close().await;
    }
}

every_backend!(barrier_waits_survive_connection_loss, connection_loss);
