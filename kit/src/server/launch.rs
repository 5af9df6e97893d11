//! What a server is started with: its zoo.cfg and its command line, for either kind.
//!
//! Both kinds read the same zoo.cfg keys (tickTime, dataDir, clientPort,
//! clientPortAddress); ZooKeeper also gets an open 4lw whitelist (readiness is `srvr`
//! naming a Mode) and no per-address connection limit (every test client comes from
//! 127.0.0.1). Neither runs its AdminServer (both default to port 8080) unless the caller
//! configures one. ZooKeeper runs from Debian's jar; zooraft as `zooraft --config zoo.cfg`.
//! This is kept apart from the process handling so that both can be read, and the text
//! checked, without starting anything.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use super::kind::ServerKind;

/// Where Debian installs ZooKeeper's jar (its manifest names every dependency).
pub const ZOOKEEPER_JAR: &str = "/usr/share/java/zookeeper.jar";
/// The slf4j binding ZooKeeper logs through (to the server's log file).
const SLF4J_SIMPLE_JAR: &str = "/usr/share/java/slf4j-simple.jar";
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

/// Why a server could not be started.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    #[error("the zooraft binary {0} does not exist (build it, or name another)")]
    ZooraftMissing(PathBuf),
    #[error("{0} is missing: install Debian's `zookeeper` package")]
    ZooKeeperMissing(PathBuf),
    #[error("cannot start {what}: {source}")]
    Spawn {
        what: &'static str,
        source: std::io::Error,
    },
    #[error("{what}: {source}")]
    Io {
        what: String,
        source: std::io::Error,
    },
    #[error("the data directory's disk: {0}")]
    Disk(String),
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

impl LaunchError {
    /// An I/O error while doing `what` (e.g. "write zoo.cfg"), for `map_err`.
    pub fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> LaunchError {
        let what = what.into();
        move |source| LaunchError::Io { what, source }
    }
}

/// Everything a start of one server is made from, kept for its restarts.
#[derive(Debug, Clone)]
pub(super) struct Launch {
    pub(super) kind: ServerKind,
    pub(super) tick_time_ms: u32,
    /// zoo.cfg lines after the generated ones (a later line of a key wins in both).
    pub(super) extra_config: Vec<(String, String)>,
    /// zooraft's extra command-line arguments.
    pub(super) extra_args: Vec<String>,
    /// ZooKeeper's `-Dkey=value` properties.
    pub(super) jvm_properties: Vec<(String, String)>,
    /// ZooKeeper's other JVM arguments.
    pub(super) jvm_args: Vec<String>,
    /// ZooKeeper's fixed heap (`-Xms` = `-Xmx`, default collector), as the bench measures
    /// it; without, a small heap and the serial collector (quick to start, for tests).
    pub(super) heap: Option<String>,
    /// Both kinds' log level (`RUST_LOG`, slf4j-simple's default level); without, zooraft
    /// logs at `$ZOORAFT_TEST_LOG` or `info` and ZooKeeper at its default.
    pub(super) log_level: Option<String>,
    pub(super) env: Vec<(String, String)>,
    pub(super) myid: Option<u64>,
    pub(super) quorum_peer: bool,
    /// The zooraft binary (default: [`zooraft_binary`](crate::zooraft_binary)).
    pub(super) binary: Option<PathBuf>,
    /// `ZOORAFT_TEST_HOOKS=1` for zooraft (the test-only hooks, inert without their files).
    pub(super) test_hooks: bool,
    pub(super) start_timeout: Duration,
    pub(super) stop_grace: Duration,
    /// SIGKILL when the starting thread ends (`PR_SET_PDEATHSIG`).
    pub(super) die_with_parent: bool,
}

impl Launch {
    pub(super) fn new(kind: ServerKind) -> Launch {
        Launch {
            kind,
            tick_time_ms: 2000,
            extra_config: Vec::new(),
            extra_args: Vec::new(),
            jvm_properties: Vec::new(),
            jvm_args: Vec::new(),
            heap: None,
            log_level: None,
            env: Vec::new(),
            myid: None,
            quorum_peer: false,
            binary: None,
            test_hooks: true,
            start_timeout: Duration::from_secs(60),
            stop_grace: Duration::from_secs(20),
            die_with_parent: false,
        }
    }

    /// Whether the caller configured the AdminServer (an `admin.*` key).
    fn wants_admin(&self) -> bool {
        self.extra_config
            .iter()
            .any(|(k, _)| k.starts_with("admin."))
    }

    /// The zoo.cfg text for a server on `port` with its data in `data`.
    pub(super) fn zoo_cfg(&self, data: &Path, port: u16) -> String {
        let mut cfg = format!(
            "tickTime={}\ndataDir={}\nclientPort={port}\nclientPortAddress=127.0.0.1\n",
            self.tick_time_ms,
            data.display(),
        );
        if !self.wants_admin() {
            cfg.push_str("admin.enableServer=false\n");
        }
        if self.kind == ServerKind::Apache {
            cfg.push_str("maxClientCnxns=0\n4lw.commands.whitelist=*\n");
        }
        for (k, v) in &self.extra_config {
            cfg.push_str(&format!("{k}={v}\n"));
        }
        cfg
    }

    /// The command that starts the server with the zoo.cfg at `cfg` (output not yet set).
    pub(super) fn command(&self, cfg: &Path) -> Result<Command, LaunchError> {
        let mut cmd = match self.kind {
            ServerKind::Zooraft => self.zooraft(cfg)?,
            ServerKind::Apache => {
                if !Path::new(ZOOKEEPER_JAR).exists() {
                    return Err(LaunchError::ZooKeeperMissing(ZOOKEEPER_JAR.into()));
                }
                self.zookeeper(cfg)
            }
        };
        cmd.envs(self.env.iter().map(|(k, v)| (k, v)));
        if self.die_with_parent {
            use std::os::unix::process::CommandExt;
            // SAFETY: the closure runs in the child between fork and exec, and only calls
            // prctl(2), which is async-signal-safe and touches no memory of the process.
            unsafe {
                cmd.pre_exec(|| {
                    if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        }
        Ok(cmd)
    }

    fn zooraft(&self, cfg: &Path) -> Result<Command, LaunchError> {
        let bin = self.binary.clone().unwrap_or_else(crate::zooraft_binary);
        if !bin.is_file() {
            return Err(LaunchError::ZooraftMissing(bin));
        }
        let mut c = Command::new(bin);
        c.arg("--config").arg(cfg).args(&self.extra_args);
        let level = match &self.log_level {
            Some(l) => l.clone(),
            None => std::env::var("ZOORAFT_TEST_LOG").unwrap_or_else(|_| "info".into()),
        };
        c.env("RUST_LOG", level);
        if self.test_hooks {
            // The server's test-only hooks (`raft/test_hooks.rs`): inert unless a test puts
            // a hook's file in the data directory.
            c.env("ZOORAFT_TEST_HOOKS", "1");
        }
        Ok(c)
    }

    fn zookeeper(&self, cfg: &Path) -> Command {
        let mut c = Command::new("java");
        match &self.heap {
            Some(heap) => {
                c.arg(format!("-Xms{heap}")).arg(format!("-Xmx{heap}"));
            }
            None => {
                c.args(["-Xmx512m", "-XX:+UseSerialGC", "-Xshare:auto"]);
            }
        }
        if !self.wants_admin() {
            c.arg("-Dzookeeper.admin.enableServer=false");
        }
        if let Some(level) = &self.log_level {
            c.arg(format!("-Dorg.slf4j.simpleLogger.defaultLogLevel={level}"));
        }
        for (k, v) in &self.jvm_properties {
            c.arg(format!("-D{k}={v}"));
        }
        c.args(&self.jvm_args);
        // An ensemble member (it has a myid) runs the quorum peer; a lone server the
        // standalone main, which ignores `server.N` lines.
        let main = if self.myid.is_some() || self.quorum_peer {
            "org.apache.zookeeper.server.quorum.QuorumPeerMain"
        } else {
            "org.apache.zookeeper.server.ZooKeeperServerMain"
        };
        let admin = if self.wants_admin() {
            ADMIN_SERVER_JARS
        } else {
            ""
        };
        c.arg("-cp")
            .arg(format!(
                "{ZOOKEEPER_JAR}:{SLF4J_SIMPLE_JAR}:{NETTY_TLS_JARS}{admin}"
            ))
            .arg(main)
            .arg(cfg);
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zookeeper_gets_its_whitelist_and_later_lines_follow() {
        let mut l = Launch::new(ServerKind::Apache);
        l.extra_config.push(("maxClientCnxns".into(), "5".into()));
        let cfg = l.zoo_cfg(Path::new("/d"), 2181);
        assert!(
            cfg.starts_with("tickTime=2000\ndataDir=/d\nclientPort=2181\n"),
            "{cfg}"
        );
        assert!(cfg.contains("4lw.commands.whitelist=*\n"), "{cfg}");
        assert!(cfg.contains("admin.enableServer=false\n"), "{cfg}");
        let first = cfg.find("maxClientCnxns=0").expect("the default");
        let last = cfg.find("maxClientCnxns=5").expect("the caller's");
        assert!(
            first < last,
            "the caller's line comes later and wins: {cfg}"
        );
    }

    #[test]
    fn an_admin_key_turns_the_admin_server_on() {
        let mut l = Launch::new(ServerKind::Zooraft);
        assert!(l
            .zoo_cfg(Path::new("/d"), 1)
            .contains("admin.enableServer=false"));
        assert!(!l.zoo_cfg(Path::new("/d"), 1).contains("4lw"));
        l.extra_config
            .push(("admin.serverPort".into(), "8081".into()));
        assert!(!l
            .zoo_cfg(Path::new("/d"), 1)
            .contains("admin.enableServer=false"));
    }

    #[test]
    fn a_missing_zooraft_binary_is_an_error_naming_it() {
        let mut l = Launch::new(ServerKind::Zooraft);
        l.binary = Some("/no/such/zooraft".into());
        let err = l.command(Path::new("/d/zoo.cfg")).expect_err("no binary");
        assert!(matches!(err, LaunchError::ZooraftMissing(_)), "{err}");
        assert!(err.to_string().contains("/no/such/zooraft"), "{err}");
    }

    #[test]
    fn a_fixed_heap_replaces_the_test_jvm_flags() {
        let args = |l: &Launch| -> Vec<String> {
            let c = l.zookeeper(Path::new("/d/zoo.cfg"));
            c.get_args()
                .map(|a| a.to_string_lossy().into_owned())
                .collect()
        };
        let mut l = Launch::new(ServerKind::Apache);
        assert!(args(&l).contains(&"-XX:+UseSerialGC".to_string()));
        l.heap = Some("2g".into());
        l.myid = Some(1);
        let a = args(&l);
        assert!(
            a.contains(&"-Xms2g".to_string()) && a.contains(&"-Xmx2g".to_string()),
            "{a:?}"
        );
        assert!(!a.contains(&"-XX:+UseSerialGC".to_string()), "{a:?}");
        assert!(a.contains(&"org.apache.zookeeper.server.quorum.QuorumPeerMain".to_string()));
    }
}
