//! The Node.js ZooKeeper client (`node-zookeeper-client`, pinned in `tests/node/package.json`)
//! against a real server, each test against a fresh Apache ZooKeeper 3.8 and a fresh zooraft.
//!
//! `tests/node/zk_client.js` is run with `node`: create in the four modes with the Stat
//! fields, getData/setData with versions and BAD_VERSION, exists, getChildren, remove with
//! NO_NODE/NOT_EMPTY/BAD_VERSION, data/child/exists watches with their event types,
//! transactions committing and rolling back, digest-auth ACLs (NO_AUTH for other sessions),
//! mkdirp, and ephemerals removed when their session closes. It prints `PASS`/`FAIL` per check
//! and `N passed, N failed` last; this driver parses that line and demands every check passed.
//!
//! Needs `node` and the package installed under `tests/node/node_modules`: `.ci/run` runs
//! `npm ci --prefix tests/node`.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use harness::{ServerKind, TestServer};

/// The whole program's bound (it bounds each of its checks itself, to 15 s).
const PROGRAM_TIMEOUT: Duration = Duration::from_secs(180);

/// The checks `zk_client.js` runs (its `PASS` lines when all pass).
const NODE_CHECKS: usize = 18;

/// `tests/node`, after checking that `node` and the npm package are there.
fn node_dir() -> PathBuf {
    let dir = harness::suite_dir().join("node");
    let package = dir.join("node_modules").join("node-zookeeper-client");
    assert!(
        package.join("package.json").exists(),
        "{} is missing: run `npm ci --prefix tests/node` (the Node.js ZooKeeper client)",
        package.display()
    );
    let version = Command::new("node").arg("--version").output();
    assert!(
        version.as_ref().is_ok_and(|o| o.status.success()),
        "cannot run `node --version` ({version:?}): install Node.js"
    );
    dir
}

/// What a finished program reported.
#[derive(Debug)]
struct Report {
    passed: usize,
    failed: usize,
    success: bool,
    output: String,
}

/// Parses the last `N passed, N failed` line.
fn parse_summary(output: &str) -> Option<(usize, usize)> {
    let line = output
        .lines()
        .rev()
        .find(|l| l.contains(" passed, ") && l.trim_end().ends_with(" failed"))?;
    let mut parts = line.split_whitespace();
    let passed = parts.next()?.parse().ok()?;
    let _ = parts.next()?;
    let failed = parts.next()?.parse().ok()?;
    Some((passed, failed))
}

/// Runs `node <script> <host:port>` in `dir`, killing it after [`PROGRAM_TIMEOUT`].
fn run_program(dir: &Path, script: &str, server: &TestServer, out_dir: &Path) -> Report {
    let out_path = out_dir.join("output.txt");
    let out = std::fs::File::create(&out_path).expect("create output file");
    let err = out.try_clone().expect("clone output handle");
    let mut child = Command::new("node")
        .arg(dir.join(script))
        .arg(server.connect_string())
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .spawn()
        .unwrap_or_else(|e| panic!("spawn node {script}: {e}"));
    let deadline = Instant::now() + PROGRAM_TIMEOUT;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for node") {
            break Some(status);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut output = String::new();
    std::fs::File::open(&out_path)
        .and_then(|mut f| f.read_to_string(&mut output))
        .expect("read program output");
    if status.is_none() {
        output.push_str(&format!("\n(killed after {PROGRAM_TIMEOUT:?})\n"));
    }
    let (passed, failed) = parse_summary(&output).unwrap_or((0, usize::MAX));
    Report {
        passed,
        failed,
        success: status.is_some_and(|s| s.success()),
        output,
    }
}

/// `zk_client.js` against a fresh server of `kind`: all [`NODE_CHECKS`] checks pass.
fn node_client(kind: ServerKind) {
    let dir = node_dir();
    let out_dir = tempfile::tempdir().expect("temp dir for the program's output");
    let server = TestServer::start(kind);
    let report = run_program(&dir, "zk_client.js", &server, out_dir.path());
    println!("{}", report.output);
    assert!(
        report.success && report.failed == 0 && report.passed == NODE_CHECKS,
        "zk_client.js against {}: {} passed, {} failed (expected {NODE_CHECKS} passed), \
         success={}\n--- output ---\n{}\n--- server log tail ---\n{}",
        kind.name(),
        report.passed,
        report.failed,
        report.success,
        report.output,
        server.log_tail()
    );
}

harness::against_both!(node_client_apache, node_client_zooraft, node_client);

#[test]
fn summary_line_is_parsed() {
    assert_eq!(parse_summary("PASS a\n3 passed, 1 failed\n"), Some((3, 1)));
    assert_eq!(parse_summary("PASS a\n"), None);
}
