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

use harness::{ServerKind, TestServer};

/// The whole program's bound (each program also bounds itself, and each of its checks).
const PROGRAM_TIMEOUT: Duration = Duration::from_secs(300);

fn python_dir() -> PathBuf {
    harness::suite_dir().join("python")
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
    harness::checks::demand(program, python, &server, PROGRAM_TIMEOUT, expected);
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
