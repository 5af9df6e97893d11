//! The recipes crate's `examples/`, run as a user would run them (`cargo run --example NAME --
//! CONNECT`), against both servers: each must exit 0 and print what it promises.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use zooraft_tests::scripts::run_bounded;
use zooraft_tests::{ServerKind, TestServer};

/// An example program of the recipes crate, built with the workspace
/// (`target/<profile>/examples/NAME`; `cargo build --workspace --all-targets` and
/// `cargo test --workspace` build it). Found the way the other packages' binaries are: a
/// test of this package cannot ask cargo for another package's examples.
fn example(name: &str) -> PathBuf {
    zooraft_tests::workspace_binary(&format!("examples/{name}"))
}

/// Runs example `name` against a fresh server of `kind`; its output.
fn run(kind: ServerKind, name: &str) -> String {
    let server = TestServer::builder(kind).start();
    let mut cmd = Command::new(example(name));
    cmd.arg(server.connect_string());
    let done = run_bounded(name, &mut cmd, Duration::from_secs(60)).expect_success(name);
    done.stdout
}

fn fenced_write(kind: ServerKind) {
    let out = run(kind, "fenced_write");
    assert!(
        out.contains("tokens increased: true; stale write refused: true"),
        "{out}"
    );
    assert_eq!(out.matches("store: accepted").count(), 2, "{out}");
    assert!(
        out.contains("zookeeper: worker-b set /examples-orders"),
        "{out}"
    );
}

zooraft_tests::against_both!(
    fenced_write_example_apache,
    fenced_write_example_zooraft,
    fenced_write
);

fn leader_worker(kind: ServerKind) {
    let out = run(kind, "leader_worker");
    assert_eq!(out.matches("stepped down").count(), 3, "{out}");
    assert!(out.contains("at most 1 leader at a time"), "{out}");
}

zooraft_tests::against_both!(
    leader_worker_example_apache,
    leader_worker_example_zooraft,
    leader_worker
);

fn job_pool(kind: ServerKind) {
    let out = run(kind, "job_pool");
    let most: usize = out
        .lines()
        .find_map(|l| l.strip_prefix("8 jobs done, at most "))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no summary line:\n{out}"));
    assert!((1..=2).contains(&most), "{most} jobs ran at once:\n{out}");
    assert_eq!(out.matches(" runs (").count(), 8, "{out}");
}

zooraft_tests::against_both!(job_pool_example_apache, job_pool_example_zooraft, job_pool);

fn cache(kind: ServerKind) {
    let out = run(kind, "cache");
    let events: Vec<&str> = out
        .lines()
        .filter(|l| {
            l.starts_with("changed ") || l.starts_with("created ") || l.starts_with("deleted ")
        })
        .collect();
    assert_eq!(
        events,
        [
            "changed /examples-config/db: \"primary\" -> \"replica\"",
            "created /examples-config/feature",
            "deleted /examples-config/feature",
        ],
        "{out}"
    );
    assert!(out.contains("initial /examples-config/db"), "{out}");
    assert!(out.contains("loaded 2 nodes"), "{out}");
    assert!(
        out.contains("cache holds 2 nodes; db = Some(\"replica\")"),
        "{out}"
    );
}

zooraft_tests::against_both!(cache_example_apache, cache_example_zooraft, cache);
