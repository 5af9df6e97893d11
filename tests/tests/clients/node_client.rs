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

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use zooraft_tests::{ServerKind, TestServer};

/// The whole program's bound (it bounds each of its checks itself, to 15 s).
const PROGRAM_TIMEOUT: Duration = Duration::from_secs(180);

/// The checks `zk_client.js` runs (its `PASS` lines when all pass).
const NODE_CHECKS: usize = 18;

/// `tests/node`, after checking that `node` and the npm package are there.
fn node_dir() -> PathBuf {
    let dir = zooraft_tests::suite_dir().join("node");
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

/// `zk_client.js` against a fresh server of `kind`: all [`NODE_CHECKS`] checks pass.
fn node_client(kind: ServerKind) {
    let dir = node_dir();
    let server = TestServer::start(kind);
    let mut node = Command::new("node");
    node.arg(dir.join("zk_client.js")).current_dir(&dir);
    zooraft_tests::checks::demand("zk_client.js", node, &server, PROGRAM_TIMEOUT, NODE_CHECKS);
}

zooraft_tests::against_both!(node_client_apache, node_client_zooraft, node_client);
