//! `python/zk_migrate.py`, kazoo's part of the migration tests: its modes run to
//! completion ([`python_run`]) or in the background until dropped ([`Background`]).

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::zkcli::ZkCli;
use crate::{suite_dir, TestServer};

/// How long one mode may run.
const LIMIT: Duration = Duration::from_secs(120);

fn python(args: &[&str]) -> Command {
    let mut c = Command::new("python3");
    c.arg(suite_dir().join("python/zk_migrate.py")).args(args);
    c
}

/// Runs a kazoo mode to completion (bounded).
pub fn python_run(args: &[&str]) -> String {
    let mut child = python(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3");
    let deadline = Instant::now() + LIMIT;
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            let out = child.wait_with_output().expect("output");
            let text = format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            assert!(status.success(), "zk_migrate.py {args:?} failed:\n{text}");
            return text;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("zk_migrate.py {args:?} timed out");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A background kazoo process, killed when dropped.
pub struct Background(Child, PathBuf);

impl Background {
    pub fn spawn(args: &[&str], out: PathBuf) -> Background {
        Background::command(python(args), out)
    }

    /// Runs `command` in the background, its output (both streams) into `out`.
    pub fn command(mut command: Command, out: PathBuf) -> Background {
        let file = std::fs::File::create(&out).expect("output file");
        let child = command
            .stdout(file.try_clone().expect("clone"))
            .stderr(file)
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {:?}: {e}", command.get_program()));
        Background(child, out)
    }

    pub fn output(&self) -> String {
        std::fs::read_to_string(&self.1).unwrap_or_default()
    }

    /// Waits (bounded) for the process to exit by itself.
    pub fn wait(&mut self, limit: Duration) -> String {
        let deadline = Instant::now() + limit;
        while self.0.try_wait().expect("wait").is_none() {
            assert!(Instant::now() < deadline, "timed out:\n{}", self.output());
            std::thread::sleep(Duration::from_millis(50));
        }
        self.output()
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Containers and TTL nodes, which kazoo cannot make, through zkCli.sh.
fn zkcli_extras(server: &TestServer) {
    let mut cli = ZkCli::start("migrate", server);
    for cmd in [
        "create -c /container",
        "create /container/child x",
        "create -c /container-empty",
        "create -t 3600000 /ttl ttl-data",
        "create -s -t 3600000 /ttl-seq- s",
        "setquota -n 10 /app",
    ] {
        cli.run(cmd);
    }
    cli.quit();
}

/// Everything a real deployment has: kazoo's load (every node and ACL kind, deep and
/// wide trees, sequence counters advanced by deletes, multis), zkCli's extras.
pub fn load_every_kind(zk: &TestServer) {
    let out = python_run(&["load", &zk.connect_string()]);
    assert!(out.contains("loaded "), "{out}");
    zkcli_extras(zk);
}
