//! Launching, pausing, killing and restarting servers: one zooraft or Apache ZooKeeper
//! process with its own port, zoo.cfg, data directory and log.
//!
//! Tests use the panicking calls ([`TestServerBuilder::start`], [`TestServer::restart`],
//! ...): a server that does not come up fails the test with its log. The bench uses the
//! `try_` calls, which return a [`LaunchError`] that names the cause, so a missing binary
//! or a server that dies is a clear message and not a panic.

mod kind;
mod launch;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use crate::four_letter::{figure_in, four_letter_word, mode_in};
use crate::lossyfs::{Crash, CrashReport, LossyDisk};
use crate::tmpfs::TmpfsMount;
pub use kind::ServerKind;
use launch::Launch;
pub use launch::{LaunchError, NETTY_TLS_JARS, ZOOKEEPER_JAR};

/// Options for a server to start; see [`TestServer::builder`].
#[derive(Debug, Clone)]
pub struct TestServerBuilder {
    launch: Launch,
    port: Option<u16>,
    wait: bool,
    lossy: bool,
    tmpfs_bytes: Option<u64>,
    data_root: Option<PathBuf>,
    keep_data: bool,
}

impl TestServerBuilder {
    /// Listen on this client port instead of a free one picked at start.
    pub fn port(mut self, port: u16) -> Self {
        self.port = Some(port);
        self
    }

    /// Write `myid` into the data directory (an ensemble member; Apache ZooKeeper then runs
    /// `QuorumPeerMain`).
    pub fn myid(mut self, id: u64) -> Self {
        self.launch.myid = Some(id);
        self
    }

    /// Return from `start` as soon as the process runs, without waiting for it to serve
    /// (ensemble members cannot serve until a quorum is up); see [`TestServer::wait_ready`].
    pub fn no_wait(mut self) -> Self {
        self.wait = false;
        self
    }

    /// Run Apache ZooKeeper as a quorum peer (`QuorumPeerMain`, for `server.N` lines,
    /// `standaloneEnabled=false`, reconfig) instead of `ZooKeeperServerMain`.
    pub fn quorum_peer(mut self) -> Self {
        self.launch.quorum_peer = true;
        self
    }

    /// Put the data directory on a [`LossyDisk`]: a filesystem that loses what was not
    /// fsynced when [`TestServer::power_loss`] cuts the power.
    pub fn lossy_disk(mut self) -> Self {
        self.lossy = true;
        self
    }

    /// ZooKeeper's tickTime (session timeouts are clamped to [2, 20] ticks by default).
    pub fn tick_time_ms(mut self, ms: u32) -> Self {
        self.launch.tick_time_ms = ms;
        self
    }

    /// An extra `key=value` line in the generated zoo.cfg (both kinds read zoo.cfg).
    pub fn config(mut self, key: &str, value: &str) -> Self {
        self.launch.extra_config.push((key.into(), value.into()));
        self
    }

    /// Several extra zoo.cfg lines, as [`config`](Self::config) adds one.
    pub fn configs(mut self, lines: Vec<(String, String)>) -> Self {
        self.launch.extra_config.extend(lines);
        self
    }

    /// An extra command-line argument (zooraft only).
    pub fn arg(mut self, arg: &str) -> Self {
        self.launch.extra_args.push(arg.into());
        self
    }

    /// Put the data directory on a tmpfs of this many bytes (needs root; unmounted when
    /// the server is dropped): a disk that fills up.
    pub fn tmpfs_data(mut self, bytes: u64) -> Self {
        self.tmpfs_bytes = Some(bytes);
        self
    }

    /// Have the kernel kill the server (SIGKILL) when the thread that starts it ends, for a
    /// process that may itself be killed before it can stop its servers (a bench killed
    /// by its user). Only for servers started, and restarted, by one thread that outlives
    /// them, such as a bench's main thread: the kernel ties this to the starting thread,
    /// not the process, and tests start servers from threads that end first.
    pub fn die_with_parent(mut self) -> Self {
        self.launch.die_with_parent = true;
        self
    }

    /// A Java system property (Apache ZooKeeper only), e.g. `znode.container.checkIntervalMs`.
    pub fn jvm_property(mut self, key: &str, value: &str) -> Self {
        self.launch.jvm_properties.push((key.into(), value.into()));
        self
    }

    /// Another JVM argument (Apache ZooKeeper only), after the kit's own.
    pub fn jvm_arg(mut self, arg: &str) -> Self {
        self.launch.jvm_args.push(arg.into());
        self
    }

    /// A fixed JVM heap for ZooKeeper (`-Xms` and `-Xmx`, e.g. `2g`) with the JVM's default
    /// collector, as the bench measures it; without, ZooKeeper gets a small heap and the
    /// serial collector, which start fastest.
    pub fn heap(mut self, heap: &str) -> Self {
        self.launch.heap = Some(heap.into());
        self
    }

    /// The log level of either kind (`warn`, `info`, ...): zooraft's `RUST_LOG`,
    /// slf4j-simple's default level for ZooKeeper.
    pub fn log_level(mut self, level: &str) -> Self {
        self.launch.log_level = Some(level.into());
        self
    }

    /// An environment variable of the server process (both kinds), e.g. `KRB5_CONFIG`, or
    /// `LD_PRELOAD` for a fault shim.
    pub fn env(mut self, key: &str, value: &str) -> Self {
        self.launch.env.push((key.into(), value.into()));
        self
    }

    /// Run this zooraft binary instead of the workspace's (see [`crate::zooraft_binary`]).
    pub fn binary(mut self, path: &Path) -> Self {
        self.launch.binary = Some(path.to_path_buf());
        self
    }

    /// Whether zooraft's test-only hooks are switched on (`ZOORAFT_TEST_HOOKS=1`, the
    /// default; a build without the `test-hooks` feature only logs that it has none).
    pub fn test_hooks(mut self, on: bool) -> Self {
        self.launch.test_hooks = on;
        self
    }

    /// Make the server's directory (zoo.cfg, data, log) under `root` instead of the
    /// system's temporary directory: the disk the figures are about.
    pub fn data_root(mut self, root: &Path) -> Self {
        self.data_root = Some(root.to_path_buf());
        self
    }

    /// Keep the server's directory when it is dropped (its path is printed then); so does
    /// `ZOORAFT_TEST_KEEP` in the environment, for debugging a test.
    pub fn keep_data(mut self) -> Self {
        self.keep_data = true;
        self
    }

    /// How long a start may take to serve (default 60 s).
    pub fn start_timeout(mut self, timeout: Duration) -> Self {
        self.launch.start_timeout = timeout;
        self
    }

    /// How long [`TestServer::stop`] lets the process exit on its own before SIGKILL
    /// (default 20 s).
    pub fn stop_grace(mut self, grace: Duration) -> Self {
        self.launch.stop_grace = grace;
        self
    }

    /// Sets up the server's directory and zoo.cfg without starting it (to put data in
    /// place first, e.g. with `zooraft import`); start it with [`TestServer::restart`] or
    /// [`TestServer::respawn`].
    pub fn try_prepare(self) -> Result<TestServer, LaunchError> {
        let mut tmp = tempfile::Builder::new();
        let prefix = format!("{}-test-", self.launch.kind.name());
        tmp.prefix(&prefix);
        let dir = match &self.data_root {
            Some(root) => {
                std::fs::create_dir_all(root).map_err(LaunchError::io("create the data root"))?;
                tmp.tempdir_in(root)
            }
            None => tmp.tempdir(),
        }
        .map_err(LaunchError::io("create the server's directory"))?;
        let port = match self.port {
            Some(p) => p,
            None => crate::try_free_port().map_err(LaunchError::io("find a free port"))?,
        };
        let data = dir.path().join("data");
        std::fs::create_dir_all(&data).map_err(LaunchError::io("create the data directory"))?;
        let disk = match self.lossy {
            true => Some(
                LossyDisk::mount(&dir.path().join("disk"), &data)
                    .map_err(|e| LaunchError::Disk(format!("mount a lossy disk: {e}")))?,
            ),
            false => None,
        };
        let mount = match self.tmpfs_bytes {
            Some(bytes) => Some(
                TmpfsMount::try_mount(&data, bytes)
                    .map_err(|e| LaunchError::Disk(e.to_string()))?,
            ),
            None => None,
        };
        let server = TestServer {
            keep: self.keep_data || std::env::var_os("ZOORAFT_TEST_KEEP").is_some(),
            launch: self.launch,
            disk,
            _mount: mount,
            root: dir.path().to_path_buf(),
            dir: Some(dir),
            port,
            child: None,
        };
        server.write_config()?;
        Ok(server)
    }

    /// [`try_prepare`](Self::try_prepare), panicking with the reason.
    pub fn prepare(self) -> TestServer {
        self.try_prepare().unwrap_or_else(|e| panic!("{e}"))
    }

    /// Starts the server and, unless [`no_wait`](Self::no_wait), waits until it serves
    /// (`srvr` reports a Mode).
    pub fn try_start(self) -> Result<TestServer, LaunchError> {
        let wait = self.wait;
        let mut server = self.try_prepare()?;
        server.spawn()?;
        if wait {
            server.try_wait_ready()?;
        }
        Ok(server)
    }

    /// [`try_start`](Self::try_start), panicking with the reason (and the server's log).
    pub fn start(self) -> TestServer {
        self.try_start().unwrap_or_else(|e| panic!("{e}"))
    }
}

/// A running server process with its own data directory, stopped when dropped.
pub struct TestServer {
    launch: Launch,
    /// Unmounted (on drop) before `dir` is removed.
    disk: Option<LossyDisk>,
    /// Unmounted (dropped) before `dir` is removed.
    _mount: Option<TmpfsMount>,
    /// The directory holding zoo.cfg, `data/` and the log.
    root: PathBuf,
    /// Removes `root` when dropped, unless `keep`.
    dir: Option<tempfile::TempDir>,
    keep: bool,
    port: u16,
    child: Option<Child>,
}

impl TestServer {
    /// Starts a server of `kind` with default options.
    pub fn start(kind: ServerKind) -> TestServer {
        TestServer::builder(kind).start()
    }

    pub fn builder(kind: ServerKind) -> TestServerBuilder {
        TestServerBuilder {
            launch: Launch::new(kind),
            port: None,
            wait: true,
            lossy: false,
            tmpfs_bytes: None,
            data_root: None,
            keep_data: false,
        }
    }

    pub fn kind(&self) -> ServerKind {
        self.launch.kind
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    /// `127.0.0.1:<port>`, the connect string clients take.
    pub fn connect_string(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// The TLS client address, when the configuration gives one (`secureClientPort`).
    pub fn secure_addr(&self) -> Option<SocketAddr> {
        let extra = &self.launch.extra_config;
        let port = extra
            .iter()
            .rev()
            .find(|(k, _)| k == "secureClientPort")
            .and_then(|(_, v)| v.trim().parse::<u16>().ok())?;
        Some(SocketAddr::from(([127, 0, 0, 1], port)))
    }

    /// The directory holding zoo.cfg, the data directory and the log.
    pub fn dir(&self) -> &Path {
        &self.root
    }

    /// The server's data directory.
    pub fn data_dir(&self) -> PathBuf {
        self.root.join("data")
    }

    /// The server's zoo.cfg (written when it is started or prepared).
    pub fn config_path(&self) -> PathBuf {
        self.root.join("zoo.cfg")
    }

    /// The file the server's stdout and stderr go to.
    pub fn log_path(&self) -> PathBuf {
        self.root.join("server.log")
    }

    /// The OS process id, while running.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(|c| c.id())
    }

    /// Sends a four-letter word to the server.
    pub fn four_letter_word(&self, word: &str) -> std::io::Result<String> {
        four_letter_word(self.addr(), word)
    }

    /// Sets zoo.cfg line `key=value` (replacing an earlier one) for the next start: a
    /// configuration change rolled out by restarting the member.
    pub fn set_config(&mut self, key: &str, value: &str) {
        let extra = &mut self.launch.extra_config;
        extra.retain(|(k, _)| k != key);
        extra.push((key.into(), value.into()));
    }

    /// Sets (or replaces) an environment variable for the next start.
    pub fn set_env(&mut self, key: &str, value: &str) {
        self.launch.env.retain(|(k, _)| k != key);
        self.launch.env.push((key.into(), value.into()));
    }

    fn write_config(&self) -> Result<PathBuf, LaunchError> {
        let data = self.data_dir();
        std::fs::create_dir_all(&data).map_err(LaunchError::io("create the data directory"))?;
        if let Some(id) = self.launch.myid {
            std::fs::write(data.join("myid"), format!("{id}\n"))
                .map_err(LaunchError::io("write myid"))?;
        }
        let path = self.config_path();
        std::fs::write(&path, self.launch.zoo_cfg(&data, self.port))
            .map_err(LaunchError::io("write zoo.cfg"))?;
        Ok(path)
    }

    fn spawn(&mut self) -> Result<(), LaunchError> {
        let cfg = self.write_config()?;
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log_path())
            .map_err(LaunchError::io("open the server log"))?;
        let log_err = log
            .try_clone()
            .map_err(LaunchError::io("open the server log"))?;
        let mut cmd = self.launch.command(&cfg)?;
        cmd.stdin(Stdio::null()).stdout(log).stderr(log_err);
        let child = cmd.spawn().map_err(|source| LaunchError::Spawn {
            what: self.launch.kind.name(),
            source,
        })?;
        self.child = Some(child);
        Ok(())
    }

    /// One `mntr` figure (e.g. `zk_disk_full`), if the server answers and has it.
    pub fn figure(&self, key: &str) -> Option<String> {
        figure_in(&self.four_letter_word("mntr").ok()?, key)
    }

    /// Whether the server answers `srvr` with a Mode (it serves clients).
    pub fn is_serving(&self) -> bool {
        self.mode().is_some()
    }

    /// The Mode `srvr` reports (`standalone`, `leader`, `follower`, `observer`), if serving.
    pub fn mode(&self) -> Option<String> {
        mode_in(&self.four_letter_word("srvr").ok()?)
    }

    /// Waits (bounded by the start timeout) until the server serves clients.
    pub fn try_wait_ready(&mut self) -> Result<(), LaunchError> {
        let timeout = self.launch.start_timeout;
        let deadline = Instant::now() + timeout;
        let kind = self.launch.kind.name();
        loop {
            // `ruok` answers `imok` before ZooKeeper serves; `srvr` names a Mode only once it does.
            if self.is_serving() {
                return Ok(());
            }
            if let Some(child) = self.child.as_mut() {
                if let Ok(Some(status)) = child.try_wait() {
                    let status = status.to_string();
                    let log = self.log_tail();
                    return Err(LaunchError::Exited { kind, status, log });
                }
            }
            if Instant::now() > deadline {
                let (port, log) = (self.port, self.log_tail());
                return Err(LaunchError::NotReady {
                    kind,
                    port,
                    timeout,
                    log,
                });
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits (bounded) until the server serves clients; panics with its log otherwise.
    pub fn wait_ready(&mut self) {
        self.try_wait_ready().unwrap_or_else(|e| panic!("{e}"))
    }

    /// Panics, saying how to build one that has them, unless this server's build has the
    /// test hooks (`raft/test_hooks.rs`, the `test-hooks` feature; the kit turns them
    /// on with `ZOORAFT_TEST_HOOKS=1`).
    pub fn require_test_hooks(&self) {
        let log = std::fs::read_to_string(self.log_path()).unwrap_or_default();
        assert!(
            !log.contains("this build has no test hooks"),
            "{} has no test hooks: build it with `cargo build --workspace --all-targets` \
             (or `cargo build -p zooraft --features test-hooks`)",
            crate::zooraft_binary().display()
        );
    }

    /// The last 60 lines of the server's log.
    pub fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(self.log_path()).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(60)..].join("\n")
    }

    fn signal(&self, sig: libc::c_int) {
        if let Some(pid) = self.pid() {
            // SAFETY: kill(2) on a child process id we own; no memory is touched.
            unsafe {
                libc::kill(pid as libc::pid_t, sig);
            }
        }
    }

    /// SIGSTOP: the process freezes (a long GC pause, as far as clients can tell).
    pub fn pause(&self) {
        self.signal(libc::SIGSTOP);
    }

    /// SIGCONT after [`pause`](Self::pause).
    pub fn resume(&self) {
        self.signal(libc::SIGCONT);
    }

    /// `kill -9`, then reap the process. The data directory stays for a restart.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// SIGTERM and wait (at most the stop grace, 20 s by default, then SIGKILL) for a
    /// graceful exit; returns whether the process exited by itself.
    pub fn stop(&mut self) -> bool {
        match self.child.take() {
            Some(child) => crate::process::terminate(child, self.launch.stop_grace),
            None => true,
        }
    }

    /// Kills the process if it runs, starts it again on the same port and data directory
    /// and waits until it serves; returns the time from the new process's start to serving.
    pub fn try_restart(&mut self) -> Result<Duration, LaunchError> {
        self.kill();
        let started = Instant::now();
        self.spawn()?;
        self.try_wait_ready()?;
        Ok(started.elapsed())
    }

    /// [`try_restart`](Self::try_restart), panicking with the reason (after `kill` or
    /// `stop`, or to crash-restart a running server).
    pub fn restart(&mut self) {
        self.try_restart().unwrap_or_else(|e| panic!("{e}"));
    }

    /// Kills the process if it runs and starts it again, on the same port and data
    /// directory, without waiting for it to serve.
    pub fn try_respawn(&mut self) -> Result<(), LaunchError> {
        self.kill();
        self.spawn()
    }

    /// [`try_respawn`](Self::try_respawn), panicking with the reason.
    pub fn respawn(&mut self) {
        self.try_respawn().unwrap_or_else(|e| panic!("{e}"));
    }

    /// A power loss: `kill -9`, then the lossy disk drops what was not synced (see
    /// [`Crash`]). Start the server again with [`respawn`](Self::respawn) or
    /// [`restart`](Self::restart). Needs [`TestServerBuilder::lossy_disk`].
    pub fn power_loss(&mut self, how: Crash) -> CrashReport {
        self.kill();
        let disk = self
            .disk
            .as_mut()
            .expect("power_loss needs a server started with lossy_disk");
        disk.power_loss(how).expect("power loss of the lossy disk")
    }

    /// The lossy disk under the data directory, if the server has one.
    pub fn disk(&self) -> Option<&LossyDisk> {
        self.disk.as_ref()
    }

    /// The exit status, once the process has exited by itself (it refused to start, or
    /// crashed); `None` while it runs or when it was never started.
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child
            .as_mut()
            .and_then(|c| c.try_wait().ok().flatten())
    }

    /// Waits (at most `timeout`) for the process to exit by itself; its status if it did
    /// (the process is then reaped and no longer counts as running).
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            let status = self.child.as_mut()?.try_wait().ok().flatten();
            if let Some(status) = status {
                self.child = None;
                return Some(status);
            }
            if Instant::now() > deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// True while the process runs (not killed or stopped).
    pub fn is_running(&self) -> bool {
        self.child.is_some()
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            // SIGCONT first, in case a test paused it and then failed.
            // SAFETY: signal to our own child process.
            unsafe {
                libc::kill(child.id() as libc::pid_t, libc::SIGCONT);
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        if self.keep {
            if let Some(dir) = self.dir.take() {
                eprintln!("kept {}", dir.keep().display());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::ExitStatusExt;

    /// A stand-in for the zooraft binary that only sleeps, so no real server is needed.
    fn sleeper(dir: &Path) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let path = dir.join("sleeper");
        std::fs::write(&path, "#!/bin/sh\nexec sleep 60\n").expect("write the script");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))
            .expect("make it executable");
        path
    }

    /// Starts the sleeper from a thread that then ends; the server, back on this thread.
    fn started_by_a_thread_that_ends(bin: PathBuf, die_with_parent: bool) -> TestServer {
        std::thread::spawn(move || {
            let mut b = TestServer::builder(ServerKind::Zooraft)
                .binary(&bin)
                .no_wait();
            if die_with_parent {
                b = b.die_with_parent();
            }
            b.start()
        })
        .join()
        .expect("the starting thread")
    }

    #[test]
    fn a_server_that_dies_with_its_parent_is_killed_when_the_starting_thread_ends() {
        let dir = tempfile::tempdir().expect("tempdir");
        let bin = sleeper(dir.path());
        let mut tied = started_by_a_thread_that_ends(bin.clone(), true);
        let status = tied.wait_exit(Duration::from_secs(30));
        assert_eq!(
            status.and_then(|s| s.signal()),
            Some(libc::SIGKILL),
            "{status:?}"
        );
        // Without the option the same start outlives its thread (until dropped here).
        let mut free = started_by_a_thread_that_ends(bin, false);
        assert_eq!(free.wait_exit(Duration::from_millis(300)), None);
        assert!(free.is_running());
    }
}
