//! The Apache ZooKeeper C client against a real server, each test against a fresh Apache
//! ZooKeeper 3.8 and a fresh zooraft.
//!
//! - `tests/c/zk_client.c`, a program on the C API (`libzookeeper_mt`), is compiled here with
//!   `cc` into a temporary directory and run against the server: synchronous calls with
//!   versions, Stat fields and error codes, asynchronous calls with completions, exists/data/
//!   child watches, `zoo_multi` committing and failing, digest-auth ACLs, and `zoo_async`
//!   (sync). It prints `PASS`/`FAIL` per check and `N passed, N failed` last; this driver
//!   parses that line and demands every check passed.
//! - `cli_mt`, the C client's shell (Debian's `zookeeper-bin`), is driven non-interactively:
//!   one session fed commands on stdin (create, get, set, ls, delete, with the watch events
//!   its `get` and `ls` arm), each command sent once the previous one's answer is seen, and
//!   two one-shot `-c` (batch mode) invocations. Assertions are on cli_mt's output lines.
//!
//! Needs `cc`, `libzookeeper-mt-dev` and `zookeeper-bin` (`.ci/run` installs them).

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use zooraft_tests::{ServerKind, TestServer};

/// The whole program's bound (it bounds each of its waits itself, to a few seconds).
const PROGRAM_TIMEOUT: Duration = Duration::from_secs(120);

/// How long one cli_mt command may take to print its answer.
const CLI_TIMEOUT: Duration = Duration::from_secs(15);

/// The checks `zk_client.c` runs (its `PASS` lines when all pass).
const C_CHECKS: usize = 22;

const HEADER: &str = "/usr/include/zookeeper/zookeeper.h";
const CLI_MT: &str = "/usr/lib/zookeeper/bin/cli_mt";

/// Compiles `tests/c/<source>` against `libzookeeper_mt` into `dir`, returning the binary.
fn compile(source: &str, dir: &Path) -> PathBuf {
    assert!(
        Path::new(HEADER).exists(),
        "{HEADER} is missing: install `libzookeeper-mt-dev` (the ZooKeeper C client)"
    );
    let src = zooraft_tests::suite_dir().join("c").join(source);
    let bin = dir.join(source.trim_end_matches(".c"));
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let out = Command::new(&cc)
        // THREADED: the multi-threaded library, which declares the synchronous calls.
        .args(["-DTHREADED", "-Wall", "-Wextra", "-O1", "-o"])
        .arg(&bin)
        .arg(&src)
        .arg("-lzookeeper_mt")
        .output()
        .unwrap_or_else(|e| panic!("cannot run the C compiler `{cc}` ({e}): install gcc"));
    assert!(
        out.status.success(),
        "compiling {} with `{cc}` failed:\n{}{}",
        src.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    bin
}

/// `zk_client.c` against a fresh server of `kind`: all [`C_CHECKS`] checks pass.
fn c_api(kind: ServerKind) {
    let dir = tempfile::tempdir().expect("temp dir for the C program");
    let bin = compile("zk_client.c", dir.path());
    let server = TestServer::start(kind);
    zooraft_tests::checks::demand(
        "zk_client.c",
        Command::new(&bin),
        &server,
        PROGRAM_TIMEOUT,
        C_CHECKS,
    );
}

zooraft_tests::against_both!(c_api_apache, c_api_zooraft, c_api);

fn cli_mt_is_installed() {
    assert!(
        Path::new(CLI_MT).exists(),
        "{CLI_MT} is missing: install `zookeeper-bin` (the C client's cli_mt)"
    );
}

/// An interactive cli_mt session fed on stdin. cli_mt prints its answers (and watch events)
/// on stderr; both streams are read into one channel of lines.
struct CliMt {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    /// Everything printed so far, for failure messages.
    transcript: Vec<String>,
}

impl CliMt {
    /// Starts cli_mt and waits for its session.
    fn start(server: &TestServer) -> CliMt {
        cli_mt_is_installed();
        let mut child = Command::new(CLI_MT)
            .arg("-h")
            .arg(server.connect_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn cli_mt");
        let (tx, lines) = channel();
        let stdout = child.stdout.take().expect("cli_mt stdout");
        let stderr = child.stderr.take().expect("cli_mt stderr");
        let tx2 = tx.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let _ = tx2.send(line);
            }
        });
        let stdin = child.stdin.take();
        let mut cli = CliMt {
            child,
            stdin,
            lines,
            transcript: Vec::new(),
        };
        // Commands typed before the session exists fail, so wait for it first.
        cli.wait_for("(start)", &[], |l| {
            l.starts_with("Got a new session id: 0x")
        });
        cli
    }

    /// Reads lines until `done` accepts one, or panics after [`CLI_TIMEOUT`].
    fn wait_for(
        &mut self,
        command: &str,
        expected: &[&str],
        mut done: impl FnMut(&str) -> bool,
    ) -> Vec<String> {
        let deadline = Instant::now() + CLI_TIMEOUT;
        let mut out = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    self.transcript.push(line.clone());
                    let finished = done(&line);
                    out.push(line);
                    if finished {
                        return out;
                    }
                }
                Err(RecvTimeoutError::Timeout) | Err(RecvTimeoutError::Disconnected) => {
                    panic!(
                        "cli_mt `{command}`: expected the lines {expected:#?} within \
                         {CLI_TIMEOUT:?}; got {out:#?}\n--- whole session ---\n{}",
                        self.transcript.join("\n")
                    )
                }
            }
        }
    }

    /// Sends `command` and waits until every line of `expected` was printed (in any order:
    /// watch events and answers come from different threads of cli_mt). The last expected
    /// line should be the last the command prints, so that nothing of this command's answer
    /// is left for the next one.
    fn run(&mut self, command: &str, expected: &[&str]) -> Vec<String> {
        let stdin = self.stdin.as_mut().expect("cli_mt stdin open");
        writeln!(stdin, "{command}").expect("write a command to cli_mt");
        stdin.flush().expect("flush cli_mt stdin");
        let mut missing: Vec<&str> = expected.to_vec();
        self.wait_for(command, expected, |line| {
            if let Some(i) = missing.iter().position(|m| *m == line) {
                missing.remove(i);
            }
            missing.is_empty()
        })
    }

    /// `quit`: cli_mt closes its session and exits by itself.
    fn quit(mut self) {
        self.run("quit", &["Quitting..."]);
        drop(self.stdin.take());
        let deadline = Instant::now() + CLI_TIMEOUT;
        loop {
            if let Some(status) = self.child.try_wait().expect("wait for cli_mt") {
                assert!(status.success(), "cli_mt exited with {status}");
                return;
            }
            assert!(Instant::now() < deadline, "cli_mt did not exit after quit");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for CliMt {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One `cli_mt -c <command>` (batch mode): it connects, runs the command, prints the answer
/// and exits by itself. Returns its output lines (stdout then stderr).
fn cli_mt_batch(server: &TestServer, command: &str) -> Vec<String> {
    cli_mt_is_installed();
    let mut child = Command::new(CLI_MT)
        .arg("-h")
        .arg(server.connect_string())
        .arg("-c")
        .arg(command)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn cli_mt");
    let mut stdout = child.stdout.take().expect("stdout");
    let mut stderr = child.stderr.take().expect("stderr");
    let out_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stdout.read_to_string(&mut s);
        s
    });
    let err_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let deadline = Instant::now() + CLI_TIMEOUT;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for cli_mt") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("cli_mt -c {command:?} did not exit within {CLI_TIMEOUT:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let output = out_reader.join().unwrap() + &err_reader.join().unwrap();
    assert!(
        status.success(),
        "cli_mt -c {command:?} exited with {status}:\n{output}"
    );
    output.lines().map(str::to_string).collect()
}

#[track_caller]
fn assert_lines(out: &[String], expected: &[&str]) {
    for line in expected {
        assert!(
            out.iter().any(|l| l == line),
            "expected the line {line:?} in {out:#?}"
        );
    }
}

/// A cli_mt session and two batch invocations against a fresh server of `kind`.
fn cli_mt_session(kind: ServerKind) {
    let server = TestServer::start(kind);
    let mut cli = CliMt::start(&server);
    let session = cli
        .transcript
        .iter()
        .find_map(|l| l.strip_prefix("Got a new session id: 0x"))
        .expect("session id line")
        .to_string();

    // cli_mt's create always stores the 3 bytes "new"; `+s` sequential, `+e` ephemeral.
    cli.run("create /cli", &["[/cli]: rc = 0", "\tname = /cli"]);
    cli.run("create /cli", &["[/cli]: rc = -110"]); // NODEEXISTS
    cli.run(
        "create +s /cli/seq-",
        &["[/cli/seq-]: rc = 0", "\tname = /cli/seq-0000000000"],
    );
    cli.run(
        "create +e /cli/eph",
        &["[/cli/eph]: rc = 0", "\tname = /cli/eph"],
    );
    cli.run("create /missing/x", &["[/missing/x]: rc = -101"]); // NONODE

    // get prints the value and the Stat, and leaves a data watch on the node.
    cli.run(
        "get /cli",
        &[
            "/cli: rc = 0",
            " value_len = 3",
            "new",
            "\tversion=0\taversion=0",
            "\tephemeralOwner = 0",
        ],
    );
    let owner = format!("\tephemeralOwner = {session}");
    cli.run(
        "get /cli/eph",
        &["/cli/eph: rc = 0", "\tversion=0\taversion=0", &owner],
    );
    // set fires get's watch, then prints the new Stat.
    cli.run(
        "set /cli hello",
        &[
            "Watcher CHANGED_EVENT state = CONNECTED_STATE for path /cli",
            "/cli: rc = 0 Stat:",
            "\tversion=1\taversion=0",
            "\tephemeralOwner = 0",
        ],
    );
    cli.run(
        "get /cli",
        &[
            "/cli: rc = 0",
            " value_len = 5",
            "hello",
            "\tversion=1\taversion=0",
            "\tephemeralOwner = 0",
        ],
    );
    // ls lists the children (one a line) and leaves a child watch.
    cli.run("ls /cli", &["/cli: rc = 0", "\teph", "\tseq-0000000000"]);
    cli.run("delete /cli", &["/cli: rc = -111"]); // NOTEMPTY
    cli.run(
        "delete /cli/seq-0000000000",
        &[
            "Watcher CHILD_EVENT state = CONNECTED_STATE for path /cli",
            "/cli/seq-0000000000: rc = 0",
        ],
    );
    cli.run("delete /cli/eph", &["/cli/eph: rc = 0"]);
    // The second get's data watch reports the delete.
    cli.run(
        "delete /cli",
        &[
            "Watcher DELETED_EVENT state = CONNECTED_STATE for path /cli",
            "/cli: rc = 0",
        ],
    );
    cli.run("get /cli", &["/cli: rc = -101"]);
    cli.run("set /cli x", &["/cli: rc = -101 Stat:"]);
    cli.run("delete /cli", &["/cli: rc = -101"]);
    cli.quit();

    // Batch mode: one command a process.
    let out = cli_mt_batch(&server, "create /one-shot");
    assert_lines(&out, &["[/one-shot]: rc = 0", "\tname = /one-shot"]);
    let out = cli_mt_batch(&server, "get /one-shot");
    assert_lines(
        &out,
        &[
            "/one-shot: rc = 0",
            " value_len = 3",
            "new",
            "\tversion=0\taversion=0",
        ],
    );
}

zooraft_tests::against_both!(cli_mt_apache, cli_mt_zooraft, cli_mt_session);
