//! Launching, pausing, killing and restarting test servers.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::lossyfs::{Crash, CrashReport, LossyDisk};

/// Which implementation a [`TestServer`] runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerKind {
    /// Our server, the `zooraft` binary of this workspace.
    Zooraft,
    /// Apache ZooKeeper 3.8 from Debian's `zookeeper` package (`/usr/share/java/zookeeper.jar`).
    Apache,
}

impl ServerKind {
    pub fn name(self) -> &'static str {
        match self {
            ServerKind::Zooraft => "zooraft",
            ServerKind::Apache => "zookeeper",
        }
    }

    /// Both kinds, for tests that run the same scenario against each.
    pub fn both() -> [ServerKind; 2] {
        [ServerKind::Apache, ServerKind::Zooraft]
    }
}

/// How long a server may take to start serving.
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// Where Debian installs ZooKeeper's jar (its manifest names every dependency).
const ZOOKEEPER_JAR: &str = "/usr/share/java/zookeeper.jar";
/// What ZooKeeper's AdminServer loads (Jetty, the servlet API, Jackson), from Debian's
/// packages that `zookeeper` depends on.
const ADMIN_SERVER_JARS: &str = ":/usr/share/java/jetty9-server.jar:/usr/share/java/jetty9-servlet.jar:\
/usr/share/java/jetty9-http.jar:/usr/share/java/jetty9-io.jar:/usr/share/java/jetty9-util.jar:\
/usr/share/java/jetty9-security.jar:/usr/share/java/jetty9-util-ajax.jar:/usr/share/java/servlet-api.jar:\
/usr/share/java/jackson-core.jar:/usr/share/java/jackson-databind.jar:\
/usr/share/java/jackson-annotations.jar";
/// Netty jars that Debian's zookeeper.jar manifest leaves out but TLS needs (SslHandler
/// extends netty-codec's ByteToMessageDecoder; the Netty client socket uses the resolver).
pub const NETTY_TLS_JARS: &str =
    "/usr/share/java/netty-codec.jar:/usr/share/java/netty-resolver.jar";

/// A free TCP port on 127.0.0.1, for a server to take (it is checked, then released).
///
/// Ports come from below the kernel's ephemeral range when it leaves room there: a port
/// from inside it could meanwhile become the source port of any outgoing connection (the
/// tests open thousands), and the server would fail with "Address already in use". A
/// per-process counter never hands a port out twice, and the start is spread by process
/// id so that test binaries running side by side mostly stay apart.
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    const LOW: u32 = 10_000;
    let high = ephemeral_range_start().min(u32::from(u16::MAX));
    if high > LOW + 1_000 {
        let span = high - LOW;
        let offset = std::process::id().wrapping_mul(7_919);
        for _ in 0..span {
            let n = NEXT.fetch_add(1, Ordering::Relaxed);
            let port = (LOW + offset.wrapping_add(n) % span) as u16;
            if TcpListener::bind(("127.0.0.1", port)).is_ok() {
                return port;
            }
        }
    }
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral port on loopback");
    listener.local_addr().expect("local address").port()
}

/// The first port of the kernel's ephemeral range (Linux's default 32768 if unreadable).
fn ephemeral_range_start() -> u32 {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| s.split_whitespace().next().and_then(|p| p.parse().ok()))
        .unwrap_or(32_768)
}

/// The fault shim library (`libzooraft_faultshim.so`, built with the workspace) next to
/// the zooraft binary.
pub fn fault_shim() -> PathBuf {
    let bin = zooraft_binary();
    let lib = bin
        .parent()
        .expect("target directory")
        .join("libzooraft_faultshim.so");
    assert!(
        lib.exists(),
        "{} not found: build the workspace first (`cargo build --workspace`)",
        lib.display()
    );
    lib
}

/// The `zooraft` binary built by this workspace: `$ZOORAFT_BIN`, or the `zooraft` next to
/// the running test executable's `deps/` directory (same profile, same target directory).
pub fn zooraft_binary() -> PathBuf {
    if let Ok(p) = std::env::var("ZOORAFT_BIN") {
        return PathBuf::from(p);
    }
    workspace_binary("zooraft")
}

/// The `lock-contender` binary (package `zooraft-lock-contender`): the recipes' contender
/// process for tests that run many of them.
pub fn lock_contender_binary() -> PathBuf {
    workspace_binary("lock-contender")
}

/// A binary `name` of this workspace, next to the running test executable's `deps/`
/// directory (same profile, same target directory). Tests of one package can only ask
/// cargo for their own package's binaries, so they find the others' here.
pub fn workspace_binary(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("current test executable");
    let mut dir = exe
        .parent()
        .expect("test executable directory")
        .to_path_buf();
    if dir.ends_with("deps") {
        dir.pop();
    }
    let bin = dir.join(name);
    assert!(
        bin.exists(),
        "{} not found: build it first with `cargo build --workspace --all-targets`",
        bin.display()
    );
    bin
}

/// Runs `zooraft <args>` to completion: (success, stdout then stderr).
pub fn zooraft_cmd(args: &[&str]) -> (bool, String) {
    let out = Command::new(zooraft_binary())
        .args(args)
        .output()
        .expect("run zooraft");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// Sends a four-letter word and returns the whole answer (the server closes after it).
pub fn four_letter_word(addr: SocketAddr, word: &str) -> std::io::Result<String> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2))?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    s.write_all(word.as_bytes())?;
    let mut out = String::new();
    s.read_to_string(&mut out)?;
    Ok(out)
}

/// Options for a server to start; see [`TestServer::builder`].
#[derive(Debug, Clone)]
pub struct TestServerBuilder {
    kind: ServerKind,
    tick_time_ms: u32,
    extra_config: Vec<(String, String)>,
    extra_args: Vec<String>,
    jvm_properties: Vec<(String, String)>,
    env: Vec<(String, String)>,
    port: Option<u16>,
    myid: Option<u64>,
    wait: bool,
    quorum_peer: bool,
    lossy: bool,
    tmpfs_bytes: Option<u64>,
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
        self.myid = Some(id);
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
        self.quorum_peer = true;
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
        self.tick_time_ms = ms;
        self
    }

    /// An extra `key=value` line in the generated zoo.cfg (both kinds read zoo.cfg).
    pub fn config(mut self, key: &str, value: &str) -> Self {
        self.extra_config.push((key.into(), value.into()));
        self
    }

    /// Several extra zoo.cfg lines, as [`config`](Self::config) adds one.
    pub fn configs(mut self, lines: Vec<(String, String)>) -> Self {
        self.extra_config.extend(lines);
        self
    }

    /// An extra command-line argument (zooraft only).
    pub fn arg(mut self, arg: &str) -> Self {
        self.extra_args.push(arg.into());
        self
    }

    /// Put the data directory on a tmpfs of this many bytes (needs root; unmounted when
    /// the server is dropped): a disk that fills up.
    pub fn tmpfs_data(mut self, bytes: u64) -> Self {
        self.tmpfs_bytes = Some(bytes);
        self
    }

    /// A Java system property (Apache ZooKeeper only), e.g. `znode.container.checkIntervalMs`.
    pub fn jvm_property(mut self, key: &str, value: &str) -> Self {
        self.jvm_properties.push((key.into(), value.into()));
        self
    }

    /// An environment variable of the server process (both kinds), e.g. `KRB5_CONFIG`, or
    /// `LD_PRELOAD` for a fault shim.
    pub fn env(mut self, key: &str, value: &str) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }

    /// Sets up the server's directory and zoo.cfg without starting it (to put data in
    /// place first, e.g. with `zooraft import`); start it with [`TestServer::restart`] or
    /// [`TestServer::respawn`].
    pub fn prepare(self) -> TestServer {
        let dir = tempfile::Builder::new()
            .prefix(&format!("{}-test-", self.kind.name()))
            .tempdir()
            .expect("temporary directory");
        let port = self.port.unwrap_or_else(free_port);
        let disk = self.lossy.then(|| {
            let mountpoint = dir.path().join("data");
            std::fs::create_dir(&mountpoint).expect("create the data directory");
            LossyDisk::mount(&dir.path().join("disk"), &mountpoint).expect("mount a lossy disk")
        });
        let mount = self.tmpfs_bytes.map(|bytes| {
            let data = dir.path().join("data");
            std::fs::create_dir_all(&data).expect("create data dir");
            crate::faults::TmpfsMount::mount(&data, bytes)
        });
        let server = TestServer {
            builder: self,
            disk,
            _mount: mount,
            dir,
            port,
            child: None,
        };
        server.write_config();
        server
    }

    /// Starts the server and waits until it serves (`srvr` reports a Mode).
    pub fn start(self) -> TestServer {
        let wait = self.wait;
        let mut server = self.prepare();
        server.spawn();
        if wait {
            server.wait_ready();
        }
        server
    }
}

/// A running server process with its own data directory, stopped when dropped.
pub struct TestServer {
    builder: TestServerBuilder,
    /// Unmounted (on drop) before `dir` is removed.
    disk: Option<LossyDisk>,
    /// Unmounted (dropped) before `dir` is removed.
    _mount: Option<crate::faults::TmpfsMount>,
    dir: tempfile::TempDir,
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
            kind,
            tick_time_ms: 2000,
            extra_config: Vec::new(),
            extra_args: Vec::new(),
            jvm_properties: Vec::new(),
            env: Vec::new(),
            port: None,
            myid: None,
            wait: true,
            quorum_peer: false,
            lossy: false,
            tmpfs_bytes: None,
        }
    }

    pub fn kind(&self) -> ServerKind {
        self.builder.kind
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

    /// The server's data directory.
    pub fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// The server's zoo.cfg (written when it is started or prepared).
    pub fn config_path(&self) -> PathBuf {
        self.dir.path().join("zoo.cfg")
    }

    /// The file the server's stdout and stderr go to.
    pub fn log_path(&self) -> PathBuf {
        self.dir.path().join("server.log")
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
        let extra = &mut self.builder.extra_config;
        extra.retain(|(k, _)| k != key);
        extra.push((key.into(), value.into()));
    }

    /// Whether the test configured the AdminServer (an `admin.*` key).
    fn wants_admin(&self) -> bool {
        let extra = &self.builder.extra_config;
        extra.iter().any(|(k, _)| k.starts_with("admin."))
    }

    fn write_config(&self) -> PathBuf {
        let data = self.data_dir();
        std::fs::create_dir_all(&data).expect("create data dir");
        if let Some(id) = self.builder.myid {
            std::fs::write(data.join("myid"), format!("{id}\n")).expect("write myid");
        }
        let mut cfg = format!(
            "tickTime={}\ndataDir={}\nclientPort={}\nclientPortAddress=127.0.0.1\n",
            self.builder.tick_time_ms,
            data.display(),
            self.port
        );
        // The AdminServer (8080 by default in both) only where a test configures it.
        if !self.wants_admin() {
            cfg.push_str("admin.enableServer=false\n");
        }
        if self.builder.kind == ServerKind::Apache {
            cfg.push_str("maxClientCnxns=0\n4lw.commands.whitelist=*\n");
        }
        for (k, v) in &self.builder.extra_config {
            cfg.push_str(&format!("{k}={v}\n"));
        }
        let path = self.dir.path().join("zoo.cfg");
        std::fs::write(&path, cfg).expect("write zoo.cfg");
        path
    }

    fn launch(&mut self) {
        self.spawn();
        self.wait_ready();
    }

    fn spawn(&mut self) {
        let cfg = self.write_config();
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log_path())
            .expect("open server log");
        let log_err = log.try_clone().expect("clone log handle");
        let mut cmd = match self.builder.kind {
            ServerKind::Zooraft => {
                let mut c = Command::new(zooraft_binary());
                c.arg("--config").arg(&cfg).args(&self.builder.extra_args);
                c.env(
                    "RUST_LOG",
                    std::env::var("ZOORAFT_TEST_LOG").unwrap_or_else(|_| "info".into()),
                );
                // The server's test-only hooks (`raft/test_hooks.rs`): inert unless a test
                // puts a hook's file in the data directory.
                c.env("ZOORAFT_TEST_HOOKS", "1");
                c
            }
            ServerKind::Apache => {
                assert!(
                    Path::new(ZOOKEEPER_JAR).exists(),
                    "{ZOOKEEPER_JAR} is missing: install Debian's `zookeeper` package"
                );
                let mut c = Command::new("java");
                c.arg("-Xmx512m")
                    .arg("-XX:+UseSerialGC")
                    .arg("-Xshare:auto");
                if !self.wants_admin() {
                    c.arg("-Dzookeeper.admin.enableServer=false");
                }
                for (k, v) in &self.builder.jvm_properties {
                    c.arg(format!("-D{k}={v}"));
                }
                // An ensemble member (it has a myid) runs the quorum peer; a lone server
                // the standalone main, which ignores `server.N` lines.
                let main = if self.builder.myid.is_some() || self.builder.quorum_peer {
                    "org.apache.zookeeper.server.quorum.QuorumPeerMain"
                } else {
                    "org.apache.zookeeper.server.ZooKeeperServerMain"
                };
                c.arg("-cp")
                    .arg(format!(
                        "{ZOOKEEPER_JAR}:/usr/share/java/slf4j-simple.jar:{NETTY_TLS_JARS}{}",
                        if self.wants_admin() {
                            ADMIN_SERVER_JARS
                        } else {
                            ""
                        }
                    ))
                    .arg(main)
                    .arg(&cfg);
                c
            }
        };
        cmd.envs(self.builder.env.iter().map(|(k, v)| (k, v)));
        cmd.stdin(Stdio::null()).stdout(log).stderr(log_err);
        let child = cmd.spawn().expect("spawn server process");
        self.child = Some(child);
    }

    /// One `mntr` figure (e.g. `zk_disk_full`), if the server answers and has it.
    pub fn figure(&self, key: &str) -> Option<String> {
        let answer = self.four_letter_word("mntr").ok()?;
        answer.lines().find_map(|l| {
            let (k, v) = l.split_once('\t')?;
            (k == key).then(|| v.trim().to_string())
        })
    }

    /// Whether the server answers `srvr` with a Mode (it serves clients).
    pub fn is_serving(&self) -> bool {
        self.four_letter_word("srvr")
            .is_ok_and(|a| a.contains("Mode: "))
    }

    /// The Mode `srvr` reports (`standalone`, `leader`, `follower`, `observer`), if serving.
    pub fn mode(&self) -> Option<String> {
        let answer = self.four_letter_word("srvr").ok()?;
        answer
            .lines()
            .find_map(|l| l.strip_prefix("Mode: "))
            .map(|m| m.trim().to_string())
    }

    /// Waits (bounded) until the server serves clients; panics with its log otherwise.
    pub fn wait_ready(&mut self) {
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            // `ruok` answers `imok` before ZooKeeper serves; `srvr` names a Mode only once it does.
            if let Ok(answer) = self.four_letter_word("srvr") {
                if answer.contains("Mode: ") {
                    return;
                }
            }
            if let Some(child) = self.child.as_mut() {
                if let Ok(Some(status)) = child.try_wait() {
                    panic!(
                        "{} exited during start-up ({status}); log:\n{}",
                        self.builder.kind.name(),
                        self.log_tail()
                    );
                }
            }
            if Instant::now() > deadline {
                panic!(
                    "{} did not start serving on port {} within {:?}; log:\n{}",
                    self.builder.kind.name(),
                    self.port,
                    START_TIMEOUT,
                    self.log_tail()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The last 60 lines of the server's log.
    /// Panics, saying how to build one that has them, unless this server's build has the
    /// test hooks (`raft/test_hooks.rs`, the `test-hooks` feature; the harness turns them
    /// on with `ZOORAFT_TEST_HOOKS=1`).
    pub fn require_test_hooks(&self) {
        let log = std::fs::read_to_string(self.log_path()).unwrap_or_default();
        assert!(
            !log.contains("this build has no test hooks"),
            "{} has no test hooks: build it with `cargo build --workspace --all-targets` \
             (or `cargo build -p zooraft --features test-hooks`)",
            zooraft_binary().display()
        );
    }

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

    /// SIGTERM and wait (at most 20 s, then SIGKILL) for a graceful exit; returns whether
    /// the process exited by itself.
    pub fn stop(&mut self) -> bool {
        self.signal(libc::SIGCONT);
        self.signal(libc::SIGTERM);
        let Some(mut child) = self.child.take() else {
            return true;
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = child.try_wait() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
        false
    }

    /// Starts the server again on the same port and data directory (after `kill` or `stop`).
    pub fn restart(&mut self) {
        self.kill();
        self.launch();
    }

    /// Starts the process again without waiting for it to serve.
    pub fn respawn(&mut self) {
        self.kill();
        self.spawn();
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

    /// Sets (or replaces) an environment variable for the next start.
    pub fn set_env(&mut self, key: &str, value: &str) {
        self.builder.env.retain(|(k, _)| k != key);
        self.builder.env.push((key.into(), value.into()));
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
        if std::env::var_os("ZOORAFT_TEST_KEEP").is_some() {
            // Debugging: keep the data directory and log (the path is printed).
            let dir = std::mem::replace(
                &mut self.dir,
                tempfile::tempdir().expect("temporary directory"),
            );
            eprintln!("kept {}", dir.keep().display());
        }
        if let Some(mut child) = self.child.take() {
            // SIGCONT first, in case a test paused it and then failed.
            // SAFETY: signal to our own child process.
            unsafe {
                libc::kill(child.id() as libc::pid_t, libc::SIGCONT);
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
