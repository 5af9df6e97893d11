//! kazoo (Python) against a real server: the programs under `tests/python/` use
//! `kazoo.client.KazooClient` directly (core API, watches, transactions, sessions, 4lw, and
//! the recipes with their guarantees checked). Each program prints `PASS`/`FAIL` per check
//! and `N passed, N failed` last; this driver runs it with a time bound, parses that line and
//! demands every check passed.
//!
//! Needs `python3` with kazoo 2.x (`pip install kazoo`).

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use zooraft_tests::{ServerKind, TestServer};

/// The whole program's bound (each program also bounds itself, and each of its checks).
const PROGRAM_TIMEOUT: Duration = Duration::from_secs(300);

fn python_dir() -> PathBuf {
    zooraft_tests::suite_dir().join("python")
}

fn kazoo_is_installed() {
    let ok = Command::new("python3")
        .args(["-c", "import kazoo.client"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    assert!(ok, "python3 with kazoo is required: `pip install kazoo`");
}

/// Runs a program against a fresh server of `kind` and demands `expected` passing checks.
fn scenario(kind: ServerKind, program: &str, expected: usize) {
    kazoo_is_installed();
    // server_version() sends `envi`, which zooraft's default whitelist does not allow.
    let server = TestServer::builder(kind)
        .config("4lw.commands.whitelist", "*")
        .start();
    let mut python = Command::new("python3");
    python
        .arg("-u")
        .arg(python_dir().join(program))
        .env("PYTHONDONTWRITEBYTECODE", "1");
    zooraft_tests::checks::demand(program, python, &server, PROGRAM_TIMEOUT, expected);
}

const API_CHECKS: usize = 12;
const RECIPE_CHECKS: usize = 11;

#[test]
fn kazoo_api_apache() {
    scenario(ServerKind::Apache, "kazoo_api.py", API_CHECKS);
}

#[test]
fn kazoo_api_zooraft() {
    scenario(ServerKind::Zooraft, "kazoo_api.py", API_CHECKS);
}

#[test]
fn kazoo_recipes_apache() {
    scenario(ServerKind::Apache, "kazoo_recipes.py", RECIPE_CHECKS);
}

#[test]
fn kazoo_recipes_zooraft() {
    scenario(ServerKind::Zooraft, "kazoo_recipes.py", RECIPE_CHECKS);
}

const RECONFIG_CHECKS: usize = 4;

/// kazoo's `client.reconfig` against a 3-member ensemble with `reconfigEnabled=true`.
fn reconfig_scenario(kind: ServerKind) {
    kazoo_is_installed();
    let e = zooraft_tests::TestEnsemble::start_kind(kind, 3, 0, zooraft_tests::ensemble::RECONFIG);
    let leader = e.leader();
    let connected = (leader + 1) % 3;
    let removed = (leader + 2) % 3;
    let mut python = Command::new("python3");
    python
        .arg("-u")
        .arg(python_dir().join("kazoo_reconfig.py"))
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("REMOVE_ID", (removed + 1).to_string());
    zooraft_tests::checks::demand(
        "kazoo_reconfig.py",
        python,
        e.member(connected),
        PROGRAM_TIMEOUT,
        RECONFIG_CHECKS,
    );
}

#[test]
fn kazoo_reconfig_apache() {
    reconfig_scenario(ServerKind::Apache);
}

#[test]
fn kazoo_reconfig_zooraft() {
    reconfig_scenario(ServerKind::Zooraft);
}
