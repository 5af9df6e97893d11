//! Starting and stopping the two servers under comparison, on equal terms.
//!
//! Both get the same zoo.cfg keys (tickTime, dataDir, clientPort, clientPortAddress), a
//! data directory under the same root (so the same filesystem and disk), fsync as their
//! defaults have it (ZooKeeper's `forceSync=yes`), and the same log level. ZooKeeper runs
//! from Debian's jar with a fixed heap, admin server off and the 4lw whitelist open; it is
//! ready when `srvr` reports a Mode. zooraft runs as `zooraft --config zoo.cfg` and is
//! waited on the same way.
//!
//! The bench has its own launcher rather than the test harness's: a missing binary or a
//! server that dies must be a clear error message here, not a panic, and the bench needs a
//! choice of data root, heap and log level that tests do not.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Debian's ZooKeeper jar; its manifest names every dependency.
pub const ZOOKEEPER_JAR: &str = "/usr/share/java/zookeeper.jar";
/// The slf4j binding used for ZooKeeper's logs (to the server's log file).
const SLF4J_SIMPLE_JAR: &str = "/usr/share/java/slf4j-simple.jar";
/// How long a server may take to start serving.
/// How long a server may take to serve after its start (ZooKeeper at 10M znodes on a busy
/// machine took about a minute).
const START_TIMEOUT: Duration = Duration::from_secs(300);
/// How long a restart lets the server stop on its own: zooraft snapshots its log on the
/// way out, which at 10M znodes writes a few GB.
const STOP_GRACE: Duration = Duration::from_secs(120);

/// Which server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ServerKind {
    ZooKeeper,
    Zooraft,
}

impl ServerKind {
    pub fn name(self) -> &'static str {
        match self {
            ServerKind::ZooKeeper => "zookeeper",
            ServerKind::Zooraft => "zooraft",
        }
    }
}

impl std::str::FromStr for ServerKind {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "zookeeper" | "zk" | "apache" => Ok(ServerKind::ZooKeeper),
            "zooraft" | "zr" => Ok(ServerKind::Zooraft),
            other => Err(format!(
                "unknown server {other:?} (expected zookeeper or zooraft)"
            )),
        }
    }
}

/// Why a server could not be started.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    #[error(
        "zooraft binary not found (looked for: {}); build it with \
         `cargo build --release -p zooraft`, pass --zooraft-bin PATH, or run with --only zookeeper",
        looked.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
    )]
    ZooraftMissing { looked: Vec<PathBuf> },
    #[error("{0} is missing: install Debian's `zookeeper` package")]
    ZooKeeperMissing(PathBuf),
    #[error("cannot start {what}: {source}")]
    Spawn {
        what: String,
        source: std::io::Error,
    },
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("{kind} exited during start-up ({status}); log tail:\n{log}")]
    Exited {
        kind: &'static str,
        status: String,
        log: String,
    },
    #[error("{kind} did not serve on port {port} within {timeout:?}; log tail:\n{log}")]
    NotReady {
        kind: &'static str,
        port: u16,
        timeout: Duration,
        log: String,
    },
}

/// How to launch the servers.
#[derive(Debug, Clone)]
pub struct LaunchOptions {
    /// Both servers' data directories are created under this directory.
    pub data_root: PathBuf,
    /// ZooKeeper's JVM heap (`-Xms`/`-Xmx`), e.g. `2g`.
    pub zk_heap: String,
    /// Extra JVM arguments for ZooKeeper.
    pub zk_jvm_args: Vec<String>,
    /// Log level for both (`warn`, `info`, ...): slf4j-simple's level and `RUST_LOG`.
    pub log_level: String,
    /// The zooraft binary (already resolved).
    pub zooraft_bin: Option<PathBuf>,
    pub tick_time_ms: u32,
    /// Keep data directories and logs after the run (their paths are printed).
    pub keep_data: bool,
    /// zoo.cfg lines (`key=value`) for every server started with these options.
    pub extra_config: Vec<String>,
    /// Writes between snapshots: ZooKeeper's `snapCount`, zooraft's `snapshotEntries`
    /// (None: each server's default, 100,000 for both).
    pub snap_count: Option<u64>,
}

/// Netty jars that Debian's zookeeper.jar manifest leaves out but ZooKeeper's TLS needs.
const NETTY_TLS_JARS: &str = "/usr/share/java/netty-codec.jar:/usr/share/java/netty-resolver.jar";
/// ZooKeeper's connection factory that can serve TLS.
const NETTY_FACTORY: &str = "org.apache.zookeeper.server.NettyServerCnxnFactory";

/// What makes one server differ from a plain standalone one.
#[derive(Debug, Clone, Default)]
pub struct MemberSpec {
    /// Its client port (0: pick a free one).
    pub port: u16,
    /// Its `myid`, for an ensemble member (ZooKeeper then runs `QuorumPeerMain`).
    pub myid: Option<u64>,
    /// Extra zoo.cfg lines (`key=value`), e.g. `server.N` lines or TLS settings.
    pub config: Vec<String>,
    /// A TLS client port (ZooKeeper then runs its Netty connection factory).
    pub secure_port: Option<u16>,
}

/// A running server, killed (and its data removed, unless kept) when dropped.
pub struct Server {
    kind: ServerKind,
    child: Option<Child>,
    /// Removed on drop (None when kept).
    _dir: Option<tempfile::TempDir>,
    /// The directory holding zoo.cfg, the data directory and the log.
    root: PathBuf,
    port: u16,
    secure_port: Option<u16>,
    quorum: bool,
    opts: LaunchOptions,
}

impl Server {
    /// Starts a standalone server of `kind` on a free loopback port and waits until it serves.
    pub fn start(kind: ServerKind, opts: &LaunchOptions) -> Result<Server, LaunchError> {
        Self::start_member(kind, opts, MemberSpec::default(), true)
    }

    /// Starts a server of `kind` as `spec` describes; with `wait`, returns once it serves
    /// (an ensemble member cannot serve before a quorum is up: start them all, then
    /// [`wait_ready`](Self::wait_ready) on each).
    pub fn start_member(
        kind: ServerKind,
        opts: &LaunchOptions,
        spec: MemberSpec,
        wait: bool,
    ) -> Result<Server, LaunchError> {
        std::fs::create_dir_all(&opts.data_root)?;
        let dir = tempfile::Builder::new()
            .prefix(&format!("zooraft-bench-{}-", kind.name()))
            .tempdir_in(&opts.data_root)?;
        let root = dir.path().to_path_buf();
        let data = root.join("data");
        std::fs::create_dir_all(&data)?;
        if let Some(id) = spec.myid {
            std::fs::write(data.join("myid"), format!("{id}\n"))?;
        }
        let port = if spec.port == 0 {
            free_port()?
        } else {
            spec.port
        };
        // maxClientCnxns=0 for both: every load session comes from 127.0.0.1, and
        // ZooKeeper's default of 60 per address would refuse a --connections 64 sweep.
        let mut cfg = format!(
            "tickTime={}\ndataDir={}\nclientPort={port}\nclientPortAddress=127.0.0.1\nmaxClientCnxns=0\n",
            opts.tick_time_ms,
            data.display()
        );
        // Neither runs its AdminServer (both would take port 8080).
        cfg.push_str("admin.enableServer=false\n");
        if kind == ServerKind::ZooKeeper {
            cfg.push_str("4lw.commands.whitelist=*\n");
            if spec.secure_port.is_some() {
                cfg.push_str(&format!("serverCnxnFactory={NETTY_FACTORY}\n"));
            }
        }
        if let Some(n) = opts.snap_count {
            cfg.push_str(&match kind {
                ServerKind::ZooKeeper => format!("snapCount={n}\n"),
                ServerKind::Zooraft => format!("snapshotEntries={n}\n"),
            });
        }
        for line in opts.extra_config.iter().chain(&spec.config) {
            cfg.push_str(line);
            cfg.push('\n');
        }
        std::fs::write(root.join("zoo.cfg"), cfg)?;
        let mut dir = Some(dir);
        if opts.keep_data {
            if let Some(d) = dir.take() {
                let kept = d.keep();
                tracing::info!("{} data and log kept in {}", kind.name(), kept.display());
            }
        }
        let mut server = Server {
            kind,
            child: None,
            _dir: dir,
            root,
            port,
            secure_port: spec.secure_port,
            quorum: spec.myid.is_some(),
            opts: opts.clone(),
        };
        server.spawn()?;
        if wait {
            server.wait_ready()?;
        }
        Ok(server)
    }

    fn spawn(&mut self) -> Result<(), LaunchError> {
        let cfg_path = self.root.join("zoo.cfg");
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.root.join("server.log"))?;
        let log_err = log.try_clone()?;
        let opts = &self.opts;
        let mut cmd = match self.kind {
            ServerKind::ZooKeeper => {
                if !Path::new(ZOOKEEPER_JAR).exists() {
                    return Err(LaunchError::ZooKeeperMissing(ZOOKEEPER_JAR.into()));
                }
                let main = if self.quorum {
                    "org.apache.zookeeper.server.quorum.QuorumPeerMain"
                } else {
                    "org.apache.zookeeper.server.ZooKeeperServerMain"
                };
                let mut c = Command::new("java");
                c.arg(format!("-Xms{}", opts.zk_heap))
                    .arg(format!("-Xmx{}", opts.zk_heap))
                    .arg("-Dzookeeper.admin.enableServer=false")
                    .arg(format!(
                        "-Dorg.slf4j.simpleLogger.defaultLogLevel={}",
                        opts.log_level
                    ))
                    .args(&opts.zk_jvm_args)
                    .arg("-cp")
                    .arg(format!(
                        "{ZOOKEEPER_JAR}:{SLF4J_SIMPLE_JAR}:{NETTY_TLS_JARS}"
                    ))
                    .arg(main)
                    .arg(&cfg_path);
                c
            }
            ServerKind::Zooraft => {
                let bin = match &opts.zooraft_bin {
                    Some(b) if b.is_file() => b.clone(),
                    Some(b) => {
                        return Err(LaunchError::ZooraftMissing {
                            looked: vec![b.clone()],
                        })
                    }
                    None => resolve_zooraft_bin(None)?,
                };
                let mut c = Command::new(bin);
                c.arg("--config").arg(&cfg_path);
                c.env("RUST_LOG", &opts.log_level);
                c
            }
        };
        cmd.stdin(Stdio::null()).stdout(log).stderr(log_err);
        let child = cmd.spawn().map_err(|source| LaunchError::Spawn {
            what: self.kind.name().to_string(),
            source,
        })?;
        self.child = Some(child);
        Ok(())
    }

    /// Stops the server (SIGTERM, up to `STOP_GRACE` to finish what it does on the way
    /// out), starts it again on the same data, and returns the time from the new process's
    /// start to its first `srvr` with a Mode (it serves).
    pub fn restart(&mut self) -> Result<Duration, LaunchError> {
        self.stop_within(STOP_GRACE);
        self.start_timed()
    }

    /// Kills the server (SIGKILL: whatever it had not written is lost, and a restart has
    /// to replay its log), starts it again on the same data and returns the time to serving
    /// as [`Server::restart`] does.
    pub fn crash_restart(&mut self) -> Result<Duration, LaunchError> {
        self.kill9();
        self.start_timed()
    }

    fn start_timed(&mut self) -> Result<Duration, LaunchError> {
        let t = Instant::now();
        self.spawn()?;
        self.wait_ready()?;
        Ok(t.elapsed())
    }

    /// SIGKILL, no goodbye (for failover measurements). Returns when the process is gone.
    pub fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Whether the process is running (not killed or stopped by us).
    pub fn is_running(&self) -> bool {
        self.child.is_some()
    }

    /// The Mode `srvr` reports (`standalone`, `leader`, `follower`), if it serves.
    pub fn mode(&self) -> Option<String> {
        let answer = four_letter_word(self.addr(), "srvr").ok()?;
        answer
            .lines()
            .find_map(|l| l.strip_prefix("Mode: "))
            .map(|m| m.trim().to_string())
    }

    /// The TLS client port, if the server has one.
    pub fn secure_addr(&self) -> Option<SocketAddr> {
        self.secure_port
            .map(|p| SocketAddr::from(([127, 0, 0, 1], p)))
    }

    /// The server's data directory.
    pub fn data_dir(&self) -> PathBuf {
        self.root.join("data")
    }

    pub fn kind(&self) -> ServerKind {
        self.kind
    }

    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(self.root.join("server.log")).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    }

    /// Waits (bounded) until the server answers `srvr` with a Mode.
    pub fn wait_ready(&mut self) -> Result<(), LaunchError> {
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if let Ok(answer) = four_letter_word(self.addr(), "srvr") {
                if answer.contains("Mode: ") {
                    return Ok(());
                }
            }
            if let Some(child) = self.child.as_mut() {
                if let Ok(Some(status)) = child.try_wait() {
                    self.child = None;
                    return Err(LaunchError::Exited {
                        kind: self.kind.name(),
                        status: status.to_string(),
                        log: self.log_tail(),
                    });
                }
            }
            if Instant::now() > deadline {
                return Err(LaunchError::NotReady {
                    kind: self.kind.name(),
                    port: self.port,
                    timeout: START_TIMEOUT,
                    log: self.log_tail(),
                });
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// SIGTERM, then SIGKILL if the server is still there after 10 s.
    pub fn stop(&mut self) {
        self.stop_within(Duration::from_secs(10));
    }

    /// SIGTERM, then SIGKILL if the server is still there after `grace`.
    fn stop_within(&mut self, grace: Duration) {
        if let Some(child) = self.child.take() {
            terminate(child, grace);
        }
    }
}

/// Stops a child process: SIGTERM, then SIGKILL if it is still there after `grace`.
pub fn terminate(mut child: Child, grace: Duration) {
    // SAFETY: kill(2) on our own child's pid; no memory is involved.
    unsafe {
        libc::kill(child.id() as libc::pid_t, libc::SIGTERM);
    }
    let deadline = Instant::now() + grace;
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A free TCP port on 127.0.0.1 (bound, then released for the server to take).
///
/// Not from the kernel's ephemeral range while there is room below it: a port from there can
/// become the source port of one of the load's outgoing connections before the server binds
/// it ("Address already in use"). A per-process counter hands each port out once; the start
/// is spread by process id so that benches running side by side mostly stay apart.
pub fn free_port() -> std::io::Result<u16> {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    const FIRST: u32 = 10_000;
    let ephemeral = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| {
            s.split_whitespace()
                .next()
                .and_then(|p| p.parse::<u32>().ok())
        })
        .unwrap_or(32_768)
        .min(u32::from(u16::MAX));
    if ephemeral > FIRST + 1_000 {
        let span = ephemeral - FIRST;
        let start = std::process::id().wrapping_mul(104_729);
        for _ in 0..span {
            let n = NEXT.fetch_add(1, Ordering::Relaxed);
            let port = (FIRST + start.wrapping_add(n) % span) as u16;
            if TcpListener::bind(("127.0.0.1", port)).is_ok() {
                return Ok(port);
            }
        }
    }
    let l = TcpListener::bind("127.0.0.1:0")?;
    Ok(l.local_addr()?.port())
}

/// Sends a four-letter word and returns the whole answer.
pub fn four_letter_word(addr: SocketAddr, word: &str) -> std::io::Result<String> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2))?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    s.write_all(word.as_bytes())?;
    let mut out = String::new();
    s.read_to_string(&mut out)?;
    Ok(out)
}

/// Where the zooraft binary may be, in order: `explicit` (if given, the only candidate),
/// `$ZOORAFT_BIN`, next to the running executable (`cargo run --release` puts both in
/// `target/release/`), `$CARGO_TARGET_DIR/release/zooraft`, `target/release/zooraft`.
pub fn zooraft_candidates(
    explicit: Option<&Path>,
    env_bin: Option<PathBuf>,
    exe_dir: Option<PathBuf>,
    target_dir: Option<PathBuf>,
) -> Vec<PathBuf> {
    if let Some(p) = explicit {
        return vec![p.to_path_buf()];
    }
    let mut out = Vec::new();
    out.extend(env_bin);
    if let Some(d) = exe_dir {
        out.push(d.join("zooraft"));
    }
    if let Some(t) = target_dir {
        out.push(t.join("release").join("zooraft"));
    }
    out.push(PathBuf::from("target/release/zooraft"));
    out.dedup();
    out
}

/// The first existing candidate of [`zooraft_candidates`] for this process.
pub fn resolve_zooraft_bin(explicit: Option<&Path>) -> Result<PathBuf, LaunchError> {
    let exe_dir = std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(Path::to_path_buf));
    let looked = zooraft_candidates(
        explicit,
        std::env::var_os("ZOORAFT_BIN").map(PathBuf::from),
        exe_dir,
        std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from),
    );
    looked
        .iter()
        .find(|p| p.is_file())
        .cloned()
        .ok_or(LaunchError::ZooraftMissing { looked })
}

/// The filesystem type under `path` (`ext4`, `tmpfs`, ...), for the report: fsync on
/// tmpfs costs nothing and would flatter the write figures.
pub fn filesystem_type(path: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = std::ffi::CString::new(path.as_os_str().as_bytes()) else {
        return "unknown".into();
    };
    // SAFETY: statfs is plain integers, for which all zeroes is a valid value.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: statfs writes into the struct we own; `c` is a valid NUL-terminated path.
    if unsafe { libc::statfs(c.as_ptr(), &mut st) } != 0 {
        return "unknown".into();
    }
    match st.f_type as i64 {
        0xEF53 => "ext4".into(),
        0x0102_1994 => "tmpfs".into(),
        0x5846_5342 => "xfs".into(),
        0x9123_683E => "btrfs".into(),
        0x794C_7630 => "overlayfs".into(),
        0x6969 => "nfs".into(),
        0x2FC1_2FC1 => "zfs".into(),
        other => format!("0x{other:x}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_explicit_binary_is_the_only_candidate() {
        let c = zooraft_candidates(
            Some(Path::new("/x/zooraft")),
            Some("/env/zooraft".into()),
            Some("/exe".into()),
            None,
        );
        assert_eq!(c, vec![PathBuf::from("/x/zooraft")]);
    }

    #[test]
    fn candidates_come_in_documented_order() {
        let c = zooraft_candidates(
            None,
            Some("/env/zooraft".into()),
            Some("/t/release".into()),
            Some("/t".into()),
        );
        assert_eq!(
            c,
            vec![
                PathBuf::from("/env/zooraft"),
                PathBuf::from("/t/release/zooraft"),
                PathBuf::from("target/release/zooraft"),
            ],
            "the exe dir and the target dir name the same file once"
        );
    }

    #[test]
    fn a_missing_binary_is_an_error_that_says_what_to_do() {
        let dir = tempfile::tempdir().expect("temp dir");
        let missing = dir.path().join("zooraft");
        let err = resolve_zooraft_bin(Some(&missing)).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("zooraft binary not found"), "{msg}");
        assert!(msg.contains(&missing.display().to_string()), "{msg}");
        assert!(msg.contains("--only zookeeper"), "{msg}");

        let opts = LaunchOptions {
            data_root: dir.path().to_path_buf(),
            zk_heap: "64m".into(),
            zk_jvm_args: vec![],
            log_level: "warn".into(),
            zooraft_bin: Some(missing),
            tick_time_ms: 2000,
            keep_data: false,
            extra_config: vec![],
            snap_count: None,
        };
        let err = Server::start(ServerKind::Zooraft, &opts)
            .err()
            .expect("no binary, no server");
        assert!(matches!(err, LaunchError::ZooraftMissing { .. }), "{err}");

        std::fs::write(dir.path().join("zooraft"), b"").expect("touch");
        assert_eq!(
            resolve_zooraft_bin(Some(&dir.path().join("zooraft"))).expect("found"),
            dir.path().join("zooraft")
        );
    }

    #[test]
    fn server_names_parse() {
        assert_eq!("ZooKeeper".parse::<ServerKind>(), Ok(ServerKind::ZooKeeper));
        assert_eq!("zk".parse::<ServerKind>(), Ok(ServerKind::ZooKeeper));
        assert_eq!("zooraft".parse::<ServerKind>(), Ok(ServerKind::Zooraft));
        assert!("etcd".parse::<ServerKind>().is_err());
    }

    #[test]
    fn filesystem_type_names_something() {
        let t = filesystem_type(Path::new("/"));
        assert!(!t.is_empty());
        assert_eq!(filesystem_type(Path::new("/no/such/dir")), "unknown");
    }
}
