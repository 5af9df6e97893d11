//! Starting the two servers under comparison, on equal terms.
//!
//! Both get the same zoo.cfg keys (tickTime, dataDir, clientPort, clientPortAddress, no
//! per-address connection limit, AdminServer off), a directory under the same data root
//! (so the same filesystem and disk), fsync as their defaults have it (ZooKeeper's
//! `forceSync=yes`), and the same log level. ZooKeeper runs from Debian's jar with a fixed
//! heap and the JVM's default collector; both are ready when `srvr` reports a Mode.
//!
//! The launching itself is the kit's ([`zooraft_kit::TestServer`], the one the end-to-end
//! tests start their servers with), through its `try_` calls: a missing binary or a server
//! that dies is an error message here, not a panic. This module holds what the bench
//! chooses that tests do not: the data root, the heap, the log level, the release binary,
//! the longer start and stop bounds of servers holding millions of znodes.

use std::path::{Path, PathBuf};
use std::time::Duration;

pub use zooraft_kit::{
    four_letter_word, try_free_port, LaunchError, ServerKind, TestServer, ZOOKEEPER_JAR,
};

/// How long a server may take to serve after its start (ZooKeeper at 10M znodes on a busy
/// machine took about a minute).
const START_TIMEOUT: Duration = Duration::from_secs(300);
/// How long a stop lets the server exit on its own: zooraft snapshots its log on the way
/// out, which at 10M znodes writes a few GB.
const STOP_GRACE: Duration = Duration::from_secs(120);
/// ZooKeeper's connection factory that can serve TLS.
const NETTY_FACTORY: &str = "org.apache.zookeeper.server.NettyServerCnxnFactory";

/// The zooraft binary was not found where the bench looks.
#[derive(Debug, thiserror::Error)]
#[error(
    "zooraft binary not found (looked for: {}); build it with \
     `cargo build --release -p zooraft`, pass --zooraft-bin PATH, or run with --only zookeeper",
    looked.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
)]
pub struct ZooraftMissing {
    pub looked: Vec<PathBuf>,
}

/// How to launch the servers.
#[derive(Debug, Clone)]
pub struct LaunchOptions {
    /// Both servers' directories are created under this directory.
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

/// What makes one server differ from a plain standalone one.
#[derive(Debug, Clone, Default)]
pub struct MemberSpec {
    /// Its client port (0: pick a free one).
    pub port: u16,
    /// Its `myid`, for an ensemble member (ZooKeeper then runs `QuorumPeerMain`).
    pub myid: Option<u64>,
    /// Extra zoo.cfg lines (`key=value`), e.g. `server.N` lines or TLS settings
    /// (`secureClientPort`, which ZooKeeper serves with its Netty connection factory).
    pub config: Vec<String>,
}

/// Starts a standalone server of `kind` on a free loopback port and waits until it serves.
pub fn start(kind: ServerKind, opts: &LaunchOptions) -> Result<TestServer, LaunchError> {
    start_member(kind, opts, MemberSpec::default(), true)
}

/// Starts a server of `kind` as `spec` describes; with `wait`, returns once it serves
/// (an ensemble member cannot serve before a quorum is up: start them all, then
/// [`TestServer::try_wait_ready`] on each).
pub fn start_member(
    kind: ServerKind,
    opts: &LaunchOptions,
    spec: MemberSpec,
    wait: bool,
) -> Result<TestServer, LaunchError> {
    let mut b = TestServer::builder(kind)
        .data_root(&opts.data_root)
        .tick_time_ms(opts.tick_time_ms)
        .heap(&opts.zk_heap)
        .log_level(&opts.log_level)
        .test_hooks(false)
        .start_timeout(START_TIMEOUT)
        .stop_grace(STOP_GRACE)
        // Every load session comes from 127.0.0.1, and ZooKeeper's default of 60 per
        // address would refuse a --connections 64 sweep (the kit gives ZooKeeper this;
        // zooraft gets it too, so both are configured alike).
        .config("maxClientCnxns", "0");
    for arg in &opts.zk_jvm_args {
        b = b.jvm_arg(arg);
    }
    if let Some(bin) = &opts.zooraft_bin {
        b = b.binary(bin);
    }
    if spec.port != 0 {
        b = b.port(spec.port);
    }
    if let Some(id) = spec.myid {
        b = b.myid(id);
    }
    if let Some(n) = opts.snap_count {
        b = match kind {
            ServerKind::Apache => b.config("snapCount", &n.to_string()),
            ServerKind::Zooraft => b.config("snapshotEntries", &n.to_string()),
        };
    }
    let lines = opts.extra_config.iter().chain(&spec.config);
    for line in lines {
        let (key, value) = line.split_once('=').unwrap_or((line.as_str(), ""));
        if kind == ServerKind::Apache && key == "secureClientPort" {
            b = b.config("serverCnxnFactory", NETTY_FACTORY);
        }
        b = b.config(key, value);
    }
    if opts.keep_data {
        b = b.keep_data();
    }
    if !wait {
        b = b.no_wait();
    }
    let server = b.try_start()?;
    if opts.keep_data {
        tracing::info!(
            "{} data and log kept in {}",
            kind.name(),
            server.dir().display()
        );
    }
    Ok(server)
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
pub fn resolve_zooraft_bin(explicit: Option<&Path>) -> Result<PathBuf, ZooraftMissing> {
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
        .ok_or(ZooraftMissing { looked })
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
            zooraft_bin: Some(missing.clone()),
            tick_time_ms: 2000,
            keep_data: false,
            extra_config: vec![],
            snap_count: None,
        };
        let err = start(ServerKind::Zooraft, &opts)
            .err()
            .expect("no binary, no server");
        assert!(
            matches!(err, LaunchError::ZooraftMissing(ref p) if p == &missing),
            "{err}"
        );

        std::fs::write(dir.path().join("zooraft"), b"").expect("touch");
        assert_eq!(
            resolve_zooraft_bin(Some(&dir.path().join("zooraft"))).expect("found"),
            dir.path().join("zooraft")
        );
    }

    #[test]
    fn filesystem_type_names_something() {
        let t = filesystem_type(Path::new("/"));
        assert!(!t.is_empty());
        assert_eq!(filesystem_type(Path::new("/no/such/dir")), "unknown");
    }
}
