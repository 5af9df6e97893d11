//! The load generator against real servers: every workload completes ops without a single
//! error and cleans up after itself, and a server that dies mid-run ends the run with
//! reported errors instead of hanging it. No figures are asserted (performance is measured
//! by `compare`, as ratios); only that the generator really works.

use std::time::{Duration, Instant};

use jute::{GetChildrenRequest, OpCode, Request, Response};
use zooraft_bench::load::{run_workload, LoadSpec};
use zooraft_bench::session::{Framing, Session};
use zooraft_bench::workload::Workload;
use zooraft_kit::{ServerKind, TestServer};

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime")
}

fn short(workload: Workload) -> LoadSpec {
    LoadSpec {
        workload,
        connections: 3,
        depth: 4,
        warmup: Duration::from_millis(100),
        duration: Duration::from_millis(600),
        data_size: 100,
        keys: 50,
        read_pct: 80,
        locks: 2,
        session_timeout_ms: 30_000,
        cleanup: true,
        seed: 1,
        tls: None,
        framing: Framing::PerRequest,
    }
}

async fn root_children(server: &TestServer) -> Vec<String> {
    let mut s = Session::connect(server.addr(), 30_000, Duration::from_secs(10))
        .await
        .expect("connect");
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut reply = s
        .call(
            &Request::GetChildren(GetChildrenRequest {
                path: "/".into(),
                watch: false,
            }),
            deadline,
        )
        .await
        .expect("getChildren /");
    assert_eq!(reply.header.err, 0);
    let Response::GetChildren(mut children) =
        Response::decode(OpCode::GetChildren, &mut reply.body).expect("decode")
    else {
        panic!("not a getChildren body")
    };
    s.close(deadline).await.expect("close");
    children.sort();
    children
}

fn every_workload_runs_cleanly(kind: ServerKind) {
    let server = TestServer::start(kind);
    let rt = runtime();
    // Every workload as real clients send (one request per write), and the pipelined ones
    // also batched (a pipeline per write): the replies must match either way.
    let batched = [Workload::Set, Workload::Create, Workload::Lock]
        .into_iter()
        .map(|w| (w, Framing::Batched));
    let runs = Workload::ALL
        .into_iter()
        .map(|w| (w, Framing::PerRequest))
        .chain(batched);
    for (workload, framing) in runs {
        let spec = LoadSpec {
            framing,
            ..short(workload)
        };
        let r = rt
            .block_on(run_workload(
                server.addr(),
                kind.name(),
                server.pid(),
                &spec,
            ))
            .unwrap_or_else(|e| panic!("{workload} {framing:?}: {e}\n{}", server.log_tail()));
        assert!(r.ops > 0, "{workload}: no op completed in the window");
        assert!(
            r.errors.is_empty(),
            "{workload}: errors {:?}\n{}",
            r.errors,
            server.log_tail()
        );
        assert_eq!(r.latency.count, r.ops);
        assert!(r.latency.p50_us <= r.latency.p99_us && r.latency.p99_us <= r.latency.max_us);
        assert!(r.cpu.server_cpu_s.is_some(), "server pid was given");
    }
    // Cleanup removed every workload's parent; closed sessions took their ephemerals along.
    let left = rt.block_on(root_children(&server));
    assert_eq!(left, vec!["zookeeper".to_string()], "left behind: {left:?}");
}

#[test]
fn every_workload_runs_cleanly_apache() {
    every_workload_runs_cleanly(ServerKind::Apache);
}

#[test]
fn every_workload_runs_cleanly_zooraft() {
    every_workload_runs_cleanly(ServerKind::Zooraft);
}

fn a_dying_server_is_reported_not_waited_for(kind: ServerKind) {
    let mut server = TestServer::start(kind);
    let rt = runtime();
    let addr = server.addr();
    let pid = server.pid();
    let spec = LoadSpec {
        warmup: Duration::from_millis(200),
        duration: Duration::from_secs(3),
        cleanup: false,
        ..short(Workload::Mixed)
    };
    let started = Instant::now();
    let load =
        std::thread::spawn(move || runtime().block_on(run_workload(addr, "dying", pid, &spec)));
    std::thread::sleep(Duration::from_millis(800));
    server.kill();
    let r = load
        .join()
        .expect("load thread")
        .expect("the run itself completes; the failures are in its error tally");
    assert!(r.error_count() > 0, "a killed server produced no errors");
    assert!(
        r.errors
            .keys()
            .any(|k| k.starts_with("io:") || k.contains("closed")),
        "errors: {:?}",
        r.errors
    );
    // Bounded: window (3.2 s) plus nothing else to wait for; far below the 30 s timeouts.
    assert!(
        started.elapsed() < Duration::from_secs(25),
        "the run waited {:?} on a dead server",
        started.elapsed()
    );
    drop(rt);
}

#[test]
fn a_dying_server_is_reported_not_waited_for_apache() {
    a_dying_server_is_reported_not_waited_for(ServerKind::Apache);
}

#[test]
fn a_dying_server_is_reported_not_waited_for_zooraft() {
    a_dying_server_is_reported_not_waited_for(ServerKind::Zooraft);
}
