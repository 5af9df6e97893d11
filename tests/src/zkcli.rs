//! An interactive zkCli.sh (Debian's `zookeeper` package) driven over stdin, for tests.
//!
//! zkCli does not echo commands when stdin is not a terminal, and it prints some answers on
//! stdout ("[a, b]", stats) and others on stderr ("Created /x", "Node does not exist: /x"),
//! so both streams are merged (`2>&1`) and every command is followed by a marker command (a
//! `get` of a node that never exists) whose error line closes that command's output.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use crate::TestServer;

pub const ZKCLI: &str = "/usr/share/zookeeper/bin/zkCli.sh";
/// Bound for zkCli to start and connect (a JVM start).
pub const START_TIMEOUT: Duration = Duration::from_secs(60);
/// Bound for one command's output, or one watch event.
pub const COMMAND_TIMEOUT: Duration = Duration::from_secs(20);

/// The lines zkCli printed so far, and whether its output has ended.
#[derive(Default)]
struct Output {
    lines: Vec<String>,
    closed: bool,
}

/// One interactive zkCli process.
pub struct ZkCli {
    name: &'static str,
    child: Child,
    stdin: Option<ChildStdin>,
    output: Arc<(Mutex<Output>, Condvar)>,
    /// Index in `lines` where the next command's output starts.
    cursor: usize,
    markers: usize,
}

impl ZkCli {
    pub fn start(name: &'static str, server: &TestServer) -> ZkCli {
        ZkCli::start_with(name, &server.connect_string(), "")
    }

    /// zkCli.sh on `connect` with extra JVM flags (`CLIENT_JVMFLAGS`), e.g. TLS or JAAS
    /// settings.
    pub fn start_with(name: &'static str, connect: &str, jvm_flags: &str) -> ZkCli {
        assert!(
            std::path::Path::new(ZKCLI).exists(),
            "{ZKCLI} is missing: install Debian's `zookeeper` package"
        );
        let mut child = Command::new("bash")
            .arg("-c")
            .arg(format!("exec {ZKCLI} -server {connect} 2>&1"))
            .env("CLIENT_JVMFLAGS", jvm_flags)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn zkCli.sh");
        let stdout = child.stdout.take().expect("zkCli stdout");
        let output = Arc::new((Mutex::new(Output::default()), Condvar::new()));
        let sink = output.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let (lock, cv) = &*sink;
                lock.lock().expect("output lock").lines.push(line);
                cv.notify_all();
            }
            let (lock, cv) = &*sink;
            lock.lock().expect("output lock").closed = true;
            cv.notify_all();
        });
        let mut cli = ZkCli {
            name,
            stdin: child.stdin.take(),
            child,
            output,
            cursor: 0,
            markers: 0,
        };
        cli.wait_for_line(
            "WatchedEvent state:SyncConnected type:None path:null",
            START_TIMEOUT,
        );
        cli.cursor = cli.lines().len();
        cli
    }

    pub fn lines(&self) -> Vec<String> {
        self.output.0.lock().expect("output lock").lines.clone()
    }

    /// Waits until a line equal to `wanted` has been printed (anywhere in the output);
    /// returns its index.
    pub fn wait_for_line(&self, wanted: &str, timeout: Duration) -> usize {
        let deadline = Instant::now() + timeout;
        let (lock, cv) = &*self.output;
        let mut out = lock.lock().expect("output lock");
        loop {
            if let Some(i) = out.lines.iter().position(|l| l == wanted) {
                return i;
            }
            let now = Instant::now();
            if out.closed || now >= deadline {
                panic!(
                    "zkCli {}: no line {wanted:?} within {timeout:?} (output closed: {}); output:\n{}",
                    self.name,
                    out.closed,
                    out.lines.join("\n")
                );
            }
            out = cv.wait_timeout(out, deadline - now).expect("output lock").0;
        }
    }

    pub fn send(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("zkCli stdin open");
        writeln!(stdin, "{line}").expect("write to zkCli");
        stdin.flush().expect("flush zkCli stdin");
    }

    /// Runs one command and returns the lines it printed. Watch events that arrived in the
    /// meantime (a blank line, `WATCHER::`, a blank line, `WatchedEvent ...`) are left out
    /// here; [`wait_for_line`](Self::wait_for_line) sees them.
    pub fn run(&mut self, command: &str) -> Vec<String> {
        self.markers += 1;
        let marker = format!("/zkcli-end-of-output-{}", self.markers);
        self.send(command);
        self.send(&format!("get {marker}"));
        let end = self.wait_for_line(&format!("Node does not exist: {marker}"), COMMAND_TIMEOUT);
        let lines = self.lines();
        let out: Vec<String> = lines[self.cursor..end]
            .iter()
            .filter(|l| !l.is_empty() && *l != "WATCHER::" && !l.starts_with("WatchedEvent "))
            .cloned()
            .collect();
        self.cursor = end + 1;
        println!("[{}] {command}\n  {}", self.name, out.join("\n  "));
        out
    }

    /// Sends `quit` and waits (bounded) for the process to exit; returns all output.
    pub fn quit(mut self) -> Vec<String> {
        self.send("quit");
        drop(self.stdin.take());
        let deadline = Instant::now() + COMMAND_TIMEOUT;
        loop {
            if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
            if Instant::now() > deadline {
                panic!("zkCli {} did not exit after quit", self.name);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        // The reader thread drains what is left.
        let deadline = Instant::now() + COMMAND_TIMEOUT;
        while !self.output.0.lock().expect("output lock").closed && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        self.lines()
    }
}

impl Drop for ZkCli {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
