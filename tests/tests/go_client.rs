//! The Go ZooKeeper client (`github.com/samuel/go-zookeeper/zk`, Debian's
//! `golang-github-samuel-go-zookeeper-dev`) against a fresh Apache ZooKeeper 3.8 and a fresh
//! zooraft.
//!
//! `tests/go/zk_client.go` is compiled here with `go build` in GOPATH mode, offline (the
//! library's source comes from `/usr/share/gocode`; the build cache is a temporary
//! directory), and run against the server: creates of every mode with their Stat fields,
//! get/set with versions, exists, children, delete and the error codes, data/child/exists
//! watches, multi committing and rolling back, digest-auth ACLs, sync, ephemerals removed at
//! session close, and a dropped TCP connection after which the library resumes the same
//! session with its ephemeral and watch. It prints `PASS`/`FAIL` per check and
//! `N passed, N failed` last; this driver parses that line and demands every check passed.
//!
//! Needs `golang-go` and `golang-github-samuel-go-zookeeper-dev` (`.ci/run` installs them).

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use harness::{ServerKind, TestServer};

/// The whole program's bound (each of its checks has its own deadline of 20 s).
const PROGRAM_TIMEOUT: Duration = Duration::from_secs(240);

/// The checks `zk_client.go` runs (its `PASS` lines when all pass).
const GO_CHECKS: usize = 18;

/// Where Debian installs Go library sources (a GOPATH entry).
const GOCODE: &str = "/usr/share/gocode";

/// The library's package directory under [`GOCODE`].
const LIBRARY: &str = "/usr/share/gocode/src/github.com/samuel/go-zookeeper/zk";

/// Compiles `tests/go/<source>` into `dir`, returning the binary.
fn compile(source: &str, dir: &Path) -> PathBuf {
    assert!(
        Path::new(LIBRARY).is_dir(),
        "{LIBRARY} is missing: install `golang-github-samuel-go-zookeeper-dev` \
         (the Go ZooKeeper client)"
    );
    let src = harness::suite_dir().join("go").join(source);
    let bin = dir.join(source.trim_end_matches(".go"));
    let gopath = dir.join("gopath");
    let gocache = dir.join("gocache");
    std::fs::create_dir_all(&gopath).expect("create GOPATH dir");
    let gopath_env = std::env::join_paths([gopath.as_path(), Path::new(GOCODE)])
        .expect("GOPATH from plain paths");
    let out = Command::new("go")
        .args(["build", "-o"])
        .arg(&bin)
        .arg(&src)
        // GOPATH mode: the library is found in /usr/share/gocode, nothing is downloaded.
        .env("GO111MODULE", "off")
        .env("GOPATH", gopath_env)
        .env("GOCACHE", &gocache)
        .env("GOFLAGS", "")
        .env("GOPROXY", "off")
        .env("CGO_ENABLED", "0")
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| panic!("cannot run `go` ({e}): install `golang-go`"));
    assert!(
        out.status.success(),
        "compiling {} with `go build` failed:\n{}{}",
        src.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    bin
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

/// Runs `<bin> <host:port>`, killing it after [`PROGRAM_TIMEOUT`].
fn run_program(bin: &Path, server: &TestServer, out_dir: &Path) -> Report {
    let out_path = out_dir.join("output.txt");
    let out = std::fs::File::create(&out_path).expect("create output file");
    let err = out.try_clone().expect("clone output handle");
    let mut child = Command::new(bin)
        .arg(server.connect_string())
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {}: {e}", bin.display()));
    let deadline = Instant::now() + PROGRAM_TIMEOUT;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for the Go program") {
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

/// `zk_client.go` against a fresh server of `kind`: all [`GO_CHECKS`] checks pass.
fn go_client(kind: ServerKind) {
    let dir = tempfile::tempdir().expect("temp dir for the Go program");
    let bin = compile("zk_client.go", dir.path());
    let server = TestServer::start(kind);
    let report = run_program(&bin, &server, dir.path());
    println!("{}", report.output);
    assert!(
        report.success && report.failed == 0 && report.passed == GO_CHECKS,
        "zk_client.go against {}: {} passed, {} failed (expected {GO_CHECKS} passed), \
         success={}\n--- output ---\n{}\n--- server log tail ---\n{}",
        kind.name(),
        report.passed,
        report.failed,
        report.success,
        report.output,
        server.log_tail()
    );
}

harness::against_both!(go_client_apache, go_client_zooraft, go_client);

#[test]
fn summary_line_is_parsed() {
    assert_eq!(parse_summary("PASS a\n3 passed, 1 failed\n"), Some((3, 1)));
    assert_eq!(parse_summary("# log\nPASS a\n"), None);
}
