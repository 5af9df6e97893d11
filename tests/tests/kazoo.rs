//! kazoo (Python) against a real server: the programs under `tests/python/` use
//! `kazoo.client.KazooClient` directly (core API, watches, transactions, sessions, 4lw, and
//! the recipes with their guarantees checked). Each program prints `PASS`/`FAIL` per check
//! and `N passed, N failed` last; this driver runs it with a time bound, parses that line and
//! demands every check passed.
//!
//! Needs `python3` with kazoo 2.x (`pip install kazoo`).

use std::io::Read;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use harness::{ServerKind, TestServer};

/// The whole program's bound (each program also bounds itself, and each of its checks).
const PROGRAM_TIMEOUT: Duration = Duration::from_secs(300);

fn python_dir() -> PathBuf {
    harness::suite_dir().join("python")
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

/// Runs `python3 tests/python/<program> <host:port>`, killing it after [`PROGRAM_TIMEOUT`].
fn run_program(server: &TestServer, program: &str) -> Report {
    let script = python_dir().join(program);
    let out_dir = tempfile::tempdir().expect("temp dir for program output");
    let out_path = out_dir.path().join("output.txt");
    let out = std::fs::File::create(&out_path).expect("create output file");
    let err = out.try_clone().expect("clone output handle");
    let mut child = Command::new("python3")
        .arg("-u")
        .arg(&script)
        .arg(server.connect_string())
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .spawn()
        .expect("spawn python3 (is it installed?)");
    let deadline = Instant::now() + PROGRAM_TIMEOUT;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for python3") {
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
    let report = run_program(&server, program);
    println!("{}", report.output);
    assert!(
        report.success && report.failed == 0 && report.passed == expected,
        "{program} against {}: {} passed, {} failed (expected {expected} passed), success={}\n\
         --- output ---\n{}\n--- server log tail ---\n{}",
        kind.name(),
        report.passed,
        report.failed,
        report.success,
        report.output,
        server.log_tail()
    );
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

#[test]
fn summary_line_is_parsed() {
    assert_eq!(parse_summary("PASS a\n3 passed, 1 failed\n"), Some((3, 1)));
    assert_eq!(parse_summary("PASS a\n"), None);
}
