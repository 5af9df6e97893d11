//! What a user types first: `scripts/run` from a clone (checks the build's system packages
//! and cargo, builds, and becomes the server in the caller's directory), and the binary's
//! `--version` and `--help`.
//!
//! The scripts build with the running test's profile and the workspace selection (see
//! `zooraft_tests::scripts`), so in CI the build is the one scripts/test already made.

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use zooraft_tests::rt::eventually;
use zooraft_tests::scripts::{run_bounded, script, Owned, BUILD_LIMIT};
use zooraft_tests::{four_letter_word, free_port, zooraft_binary};

/// How long a started server may take to exit after SIGTERM.
const STOP_LIMIT: Duration = Duration::from_secs(30);

#[test]
fn scripts_run_builds_then_serves_from_the_callers_directory() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let (port, admin) = (free_port(), free_port());
    // A zoo.cfg without dataDir (so ./data, as with no arguments) that moves the AdminServer
    // off its default port; the client port comes as a flag: both pass through the script.
    std::fs::write(
        dir.path().join("zoo.cfg"),
        format!("admin.serverPort={admin}\n"),
    )
    .expect("write zoo.cfg");
    let log = dir.path().join("run.log");
    let out = std::fs::File::create(&log).expect("create the log");
    let err = out.try_clone().expect("clone the log handle");
    let child = script("run")
        .args(["--port", &port.to_string(), "zoo.cfg"])
        .current_dir(dir.path())
        .stdout(out)
        .stderr(err)
        .spawn()
        .expect("start scripts/run");
    let mut server = Owned::new(child);
    let pid = server.id();
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    eventually("scripts/run to build and serve ruok", BUILD_LIMIT, || {
        if !server.running() {
            panic!(
                "scripts/run exited before serving:\n{}",
                std::fs::read_to_string(&log).unwrap_or_default()
            );
        }
        four_letter_word(addr, "ruok").ok().filter(|a| a == "imok")
    });
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        text.contains("takes about 30 minutes on 2 cores"),
        "no word about the first build's time:\n{text}"
    );
    // The script exec'd the server: the process it started is zooraft now, so SIGTERM
    // reaches the server itself.
    let exe = std::fs::read_link(format!("/proc/{pid}/exe")).expect("the process's executable");
    assert_eq!(
        exe.file_name().and_then(|n| n.to_str()),
        Some("zooraft"),
        "scripts/run did not exec the server ({})",
        exe.display()
    );
    let status = server.terminate("the server scripts/run started", STOP_LIMIT);
    assert!(
        status.success(),
        "the server exited with {status} after SIGTERM:\n{}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    let data = dir.path().join("data");
    let entries = std::fs::read_dir(&data)
        .unwrap_or_else(|e| panic!("{} (the caller's ./data): {e}", data.display()))
        .count();
    assert!(entries > 0, "{} is empty", data.display());
}

#[test]
fn scripts_run_without_cargo_points_at_rustup() {
    // A PATH with just what the script needs before it looks for cargo, and a HOME without
    // ~/.cargo/bin: as on a machine where Rust was never installed.
    let home = tempfile::tempdir().expect("temporary directory");
    let bin = home.path().join("bin");
    std::fs::create_dir(&bin).expect("create bin");
    for tool in ["bash", "dirname", "dpkg-query"] {
        let Some(found) = which(tool) else {
            panic!("{tool} is not on PATH");
        };
        std::os::unix::fs::symlink(&found, bin.join(tool)).expect("link a tool");
    }
    let done = run_bounded(
        "scripts/run without cargo",
        script("run")
            .current_dir(home.path())
            .env("PATH", &bin)
            .env("HOME", home.path()),
        Duration::from_secs(60),
    );
    assert!(
        !done.status.success(),
        "scripts/run succeeded without cargo"
    );
    assert!(
        done.stderr.contains("cargo not found") && done.stderr.contains("rustup"),
        "no word about installing Rust:\n{}",
        done.stderr
    );
    assert!(!home.path().join("data").exists());
}

#[test]
fn the_binary_prints_its_version_and_documented_help() {
    let out = Command::new(zooraft_binary())
        .arg("--version")
        .stdin(Stdio::null())
        .output()
        .expect("run zooraft --version");
    assert!(out.status.success(), "zooraft --version: {}", out.status);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("zooraft {}\n", env!("CARGO_PKG_VERSION"))
    );
    let commands: [&[&str]; 8] = [
        &[],
        &["import"],
        &["export"],
        &["backup"],
        &["restore"],
        &["migrate"],
        &["migrate", "status"],
        &["migrate", "cutover"],
    ];
    for command in commands {
        let out = Command::new(zooraft_binary())
            .args(command)
            .arg("--help")
            .stdin(Stdio::null())
            .output()
            .expect("run zooraft --help");
        let help = String::from_utf8_lossy(&out.stdout);
        let name = format!("zooraft {} --help", command.join(" "));
        assert!(out.status.success(), "{name}: {}", out.status);
        assert!(
            help.contains("Examples:") && help.contains("Usage: zooraft"),
            "{name}:\n{help}"
        );
    }
    // The same text as man pages, one per command (the package installs them).
    let dir = tempfile::tempdir().expect("temp dir");
    let status = Command::new(zooraft_binary())
        .arg("manpages")
        .arg(dir.path())
        .stdin(Stdio::null())
        .status()
        .expect("run zooraft manpages");
    assert!(status.success(), "zooraft manpages: {status}");
    for command in commands {
        let page = std::iter::once("zooraft").chain(command.iter().copied());
        let page = page.collect::<Vec<_>>().join("-");
        let text = std::fs::read_to_string(dir.path().join(format!("{page}.1")))
            .unwrap_or_else(|e| panic!("{page}.1: {e}"));
        let title = format!(".TH {page} 1 ");
        assert!(
            text.starts_with(".ie") && text.contains(&title),
            "{page}.1:\n{text}"
        );
        assert!(
            text.contains(".SH SYNOPSIS") && text.contains("Examples:"),
            "{page}.1"
        );
    }
    let pages = std::fs::read_dir(dir.path())
        .expect("list the pages")
        .count();
    assert_eq!(
        pages,
        commands.len(),
        "one page per command, no `help` pages"
    );
}

/// The first `name` on PATH.
fn which(name: &str) -> Option<std::path::PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| Path::new(p).is_file())
}
