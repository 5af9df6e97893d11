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

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use zooraft_tests::{ServerKind, TestServer};

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
    let src = zooraft_tests::suite_dir().join("go").join(source);
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

/// `zk_client.go` against a fresh server of `kind`: all [`GO_CHECKS`] checks pass.
fn go_client(kind: ServerKind) {
    let dir = tempfile::tempdir().expect("temp dir for the Go program");
    let bin = compile("zk_client.go", dir.path());
    let server = TestServer::start(kind);
    zooraft_tests::checks::demand(
        "zk_client.go",
        Command::new(&bin),
        &server,
        PROGRAM_TIMEOUT,
        GO_CHECKS,
    );
}

zooraft_tests::against_both!(go_client_apache, go_client_zooraft, go_client);
