//! The Redis and etcd server processes the bench starts for itself, from Debian's
//! `redis-server` and `etcd-server` packages: loopback only, ephemeral ports, data under a
//! temporary directory, killed (and the directory removed) when dropped.
//!
//! Redis runs with persistence off (`save ""`, `appendonly no`), as a lock store usually
//! does; etcd with its defaults (it fsyncs its WAL, like zooraft and ZooKeeper).

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};

use crate::server::try_free_port;

/// How long a server may take to serve after it starts.
const READY_TIMEOUT: Duration = Duration::from_secs(30);

/// A server process, killed when dropped.
pub struct Proc {
    name: String,
    child: Option<Child>,
    _dir: tempfile::TempDir,
    pub addr: SocketAddr,
}

impl Proc {
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// SIGKILL, and reap it.
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    fn check_alive(&mut self) -> anyhow::Result<()> {
        if let Some(c) = self.child.as_mut() {
            if let Some(status) = c.try_wait()? {
                let log = std::fs::read_to_string(self._dir.path().join("log")).unwrap_or_default();
                let tail: String = log.lines().rev().take(15).collect::<Vec<_>>().join("\n");
                bail!(
                    "{} exited ({status}) before serving; log tail:\n{tail}",
                    self.name
                );
            }
        }
        Ok(())
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill9();
    }
}

fn spawn(name: &str, program: &str, args: &[String], dir: &Path) -> anyhow::Result<Child> {
    let log = std::fs::File::create(dir.join("log"))?;
    Command::new(program)
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .spawn()
        .with_context(|| {
            format!("starting {name} ({program}; Debian: apt-get install redis-server etcd-server)")
        })
}

/// Starts `redis-server`; with `replica_of`, as a replica of that master.
pub fn start_redis(
    root: &Path,
    replica_of: Option<SocketAddr>,
    ready: impl Fn(SocketAddr) -> anyhow::Result<bool>,
) -> anyhow::Result<Proc> {
    let dir = tempfile::Builder::new().prefix("redis-").tempdir_in(root)?;
    let port = try_free_port()?;
    let mut args: Vec<String> = [
        "--port",
        &port.to_string(),
        "--bind",
        "127.0.0.1",
        "--save",
        "",
        "--appendonly",
        "no",
        "--protected-mode",
        "no",
        "--daemonize",
        "no",
        // A replica's first sync starts at once, not after the default 5 s.
        "--repl-diskless-sync-delay",
        "0",
        "--dir",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.push(dir.path().display().to_string());
    if let Some(m) = replica_of {
        args.extend([
            "--replicaof".into(),
            m.ip().to_string(),
            m.port().to_string(),
        ]);
    }
    let child = spawn("redis-server", "redis-server", &args, dir.path())?;
    let mut p = Proc {
        name: format!("redis-server on port {port}"),
        child: Some(child),
        _dir: dir,
        addr: SocketAddr::from(([127, 0, 0, 1], port)),
    };
    wait_ready(&mut p, ready)?;
    Ok(p)
}

/// Starts a one-member etcd cluster.
pub fn start_etcd(
    root: &Path,
    ready: impl Fn(SocketAddr) -> anyhow::Result<bool>,
) -> anyhow::Result<Proc> {
    let dir = tempfile::Builder::new().prefix("etcd-").tempdir_in(root)?;
    let client = try_free_port()?;
    let peer = try_free_port()?;
    let c = format!("http://127.0.0.1:{client}");
    let pu = format!("http://127.0.0.1:{peer}");
    let args: Vec<String> = vec![
        "--name".into(),
        "bench".into(),
        "--data-dir".into(),
        dir.path().join("data").display().to_string(),
        "--listen-client-urls".into(),
        c.clone(),
        "--advertise-client-urls".into(),
        c,
        "--listen-peer-urls".into(),
        pu.clone(),
        "--initial-advertise-peer-urls".into(),
        pu.clone(),
        "--initial-cluster".into(),
        format!("bench={pu}"),
        "--log-level".into(),
        "warn".into(),
    ];
    let child = spawn("etcd", "etcd", &args, dir.path())?;
    let mut p = Proc {
        name: format!("etcd on port {client}"),
        child: Some(child),
        _dir: dir,
        addr: SocketAddr::from(([127, 0, 0, 1], client)),
    };
    wait_ready(&mut p, ready)?;
    Ok(p)
}

fn wait_ready(
    p: &mut Proc,
    ready: impl Fn(SocketAddr) -> anyhow::Result<bool>,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + READY_TIMEOUT;
    let mut last = anyhow!("not asked yet");
    while Instant::now() < deadline {
        p.check_alive()?;
        match ready(p.addr) {
            Ok(true) => return Ok(()),
            Ok(false) => last = anyhow!("not ready"),
            Err(e) => last = e,
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    bail!(
        "{} did not serve within {READY_TIMEOUT:?}: {last:#}",
        p.name
    )
}
