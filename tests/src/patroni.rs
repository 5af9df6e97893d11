//! Patroni-managed PostgreSQL nodes on loopback, with a ZooKeeper-protocol service (zooraft
//! or Apache ZooKeeper) as their distributed configuration store.
//!
//! Patroni is the application most ZooKeeper users would try a coordination service with
//! for real: it holds its leader lock as an ephemeral znode with a session timeout of
//! `ttl`, so whether a failover happens, and when, depends on the server's session
//! expiry, ephemerals and watches. A [`PatroniNode`] runs one `patroni` process (Debian's
//! `patroni` package, with `python3-kazoo` for its ZooKeeper DCS) that bootstraps or clones
//! its own PostgreSQL (Debian's `postgresql`) in a temporary directory: REST API and
//! PostgreSQL on free loopback ports, Unix sockets in the same directory.
//!
//! PostgreSQL refuses to run as root, and CI runs as root: then Patroni (and so PostgreSQL)
//! runs as the `postgres` system user the postgresql package creates, owning the directory.
//! Patroni gets a process group of its own, so that `kill` reaches what it runs
//! (initdb, pg_basebackup); the postmaster runs in a session of its own (Patroni starts it
//! so), and is found through `postmaster.pid`. Dropping a node kills both, with the
//! postmaster's children, and removes the directory, so a failing test leaves nothing.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::free_port;

/// The PostgreSQL superuser's password (TCP connections from 127.0.0.1 use md5).
pub const SUPERUSER_PASSWORD: &str = "patroni-test-superuser";

/// Patroni's timing settings (seconds), written into the cluster's bootstrap DCS config.
#[derive(Debug, Clone, Copy)]
pub struct Timings {
    /// The leader lock's lifetime: the session timeout of Patroni's ZooKeeper session.
    pub ttl: u64,
    /// Seconds between two runs of Patroni's HA loop.
    pub loop_wait: u64,
    /// How long Patroni retries DCS and PostgreSQL operations before giving up on them.
    pub retry_timeout: u64,
}

impl Timings {
    /// Near the shortest settings Patroni's documentation allows (ttl 20, loop_wait 1 and
    /// retry_timeout 3 at the least, and loop_wait + 2 × retry_timeout <= ttl): a failover
    /// is due within about half a minute.
    pub const SHORT: Timings = Timings {
        ttl: 20,
        loop_wait: 2,
        retry_timeout: 5,
    };

    /// When a replica is promoted at the latest after its primary dies: the dead primary's
    /// session expires within `ttl`, the replica's HA loop runs within `loop_wait` (or at
    /// once, on the watch) and may spend `retry_timeout` on a DCS call, and PostgreSQL's
    /// promotion takes another loop; doubled, plus half a minute for a loaded machine.
    pub fn failover_bound(&self) -> Duration {
        let derived = self.ttl + 2 * self.loop_wait + self.retry_timeout;
        Duration::from_secs(2 * derived + 30)
    }
}

/// What Patroni's REST API says a node is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// `GET /leader` answers 200: it holds the leader lock and runs a primary.
    Leader,
    /// `GET /replica` answers 200: a running replica.
    Replica,
}

/// The `patroni` program on the PATH; panics naming the packages if it is not installed,
/// or if its Python cannot import kazoo (Patroni's ZooKeeper DCS).
pub fn patroni_program() -> PathBuf {
    let found = std::env::var_os("PATH")
        .map(|paths| {
            std::env::split_paths(&paths)
                .map(|d| d.join("patroni"))
                .find(|p| p.is_file())
        })
        .unwrap_or(None);
    let Some(program) = found else {
        panic!(
            "patroni is not installed (not on the PATH): install Debian's `patroni` package \
             and `python3-kazoo` (apt-get install patroni python3-kazoo postgresql)"
        );
    };
    // The interpreter the script runs with must have kazoo, or Patroni finds no DCS.
    let interpreter = std::fs::read_to_string(&program).ok().and_then(|text| {
        let first = text.lines().next()?.strip_prefix("#!")?.trim().to_string();
        (!first.contains(' ')).then_some(first)
    });
    if let Some(python) = interpreter {
        let ok = Command::new(&python)
            .args(["-c", "import kazoo"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        assert!(
            ok,
            "{python} (which runs {}) cannot import kazoo, Patroni's ZooKeeper client: \
             install Debian's `python3-kazoo` package",
            program.display()
        );
    }
    program
}

/// The newest installed PostgreSQL's binaries (`/usr/lib/postgresql/<version>/bin`); panics
/// naming the package if there is none.
pub fn postgres_bin_dir() -> PathBuf {
    let root = Path::new("/usr/lib/postgresql");
    let newest = std::fs::read_dir(root)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let version: u32 = e.file_name().to_str()?.parse().ok()?;
            let bin = e.path().join("bin");
            bin.join("postgres").is_file().then_some((version, bin))
        })
        .max_by_key(|(v, _)| *v);
    match newest {
        Some((_, bin)) => bin,
        None => panic!(
            "PostgreSQL is not installed (no /usr/lib/postgresql/<version>/bin/postgres): \
             install Debian's `postgresql` package"
        ),
    }
}

/// The user and group PostgreSQL runs as: `postgres` when this process is root (PostgreSQL
/// refuses root), this process's own otherwise.
fn service_user() -> Option<(u32, u32)> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return None;
    }
    let name = std::ffi::CString::new("postgres").expect("no NUL in a literal");
    // SAFETY: getpwnam with a valid C string; the record is read at once, before any other
    // getpw* call on this thread could overwrite it.
    let entry = unsafe { libc::getpwnam(name.as_ptr()) };
    assert!(
        !entry.is_null(),
        "running as root, and PostgreSQL refuses root: the `postgres` user (created by \
         Debian's `postgresql` package) is missing"
    );
    // SAFETY: checked non-null above.
    let (uid, gid) = unsafe { ((*entry).pw_uid, (*entry).pw_gid) };
    Some((uid, gid))
}

/// One Patroni process and the PostgreSQL it manages; see the module docs.
pub struct PatroniNode {
    name: String,
    dir: tempfile::TempDir,
    api_port: u16,
    pg_port: u16,
    bin_dir: PathBuf,
    child: Option<Child>,
}

impl PatroniNode {
    /// Starts node `name` of Patroni cluster `scope`, with `dcs_hosts` (`host:port` of each
    /// ZooKeeper-protocol server) as its DCS. Returns once the process runs: the first node
    /// of a cluster bootstraps it (initdb), the others clone the leader.
    pub fn start(scope: &str, name: &str, dcs_hosts: &[String], timings: Timings) -> Self {
        let program = patroni_program();
        let bin_dir = postgres_bin_dir();
        let user = service_user();
        // As root, the directory goes under /tmp, which the postgres user can always reach
        // (a root's TMPDIR may be private); PostgreSQL's socket path stays short there too.
        let parent = match user {
            Some(_) => PathBuf::from("/tmp"),
            None => std::env::temp_dir(),
        };
        let dir = tempfile::Builder::new()
            .prefix(&format!("patroni-{name}-"))
            .tempdir_in(parent)
            .expect("temporary directory");
        let mut node = PatroniNode {
            name: name.to_string(),
            dir,
            api_port: free_port(),
            pg_port: free_port(),
            bin_dir,
            child: None,
        };
        let config = node.dir.path().join("patroni.yml");
        std::fs::write(&config, node.config(scope, dcs_hosts, timings)).expect("write config");
        if let Some((uid, gid)) = user {
            for path in [node.dir.path(), config.as_path()] {
                std::os::unix::fs::chown(path, Some(uid), Some(gid))
                    .unwrap_or_else(|e| panic!("chown {} to postgres: {e}", path.display()));
            }
        }
        let log = std::fs::File::create(node.log_path()).expect("create Patroni log");
        let log_err = log.try_clone().expect("clone log handle");
        let mut cmd = Command::new(program);
        cmd.arg(&config)
            .env("HOME", node.dir.path())
            .env("LC_ALL", "C")
            .env_remove("PGPASSWORD")
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log_err);
        std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
        if let Some((uid, gid)) = user {
            std::os::unix::process::CommandExt::gid(&mut cmd, gid);
            std::os::unix::process::CommandExt::uid(&mut cmd, uid);
        }
        node.child = Some(cmd.spawn().expect("spawn patroni"));
        node
    }

    fn config(&self, scope: &str, dcs_hosts: &[String], t: Timings) -> String {
        let dir = self.dir.path().display();
        let hosts: Vec<String> = dcs_hosts.iter().map(|h| format!("'{h}'")).collect();
        format!(
            "scope: '{scope}'\n\
             namespace: /service/\n\
             name: '{name}'\n\
             log:\n  level: INFO\n\
             restapi:\n  listen: 127.0.0.1:{api}\n  connect_address: 127.0.0.1:{api}\n\
             zookeeper:\n  hosts: [{hosts}]\n\
             bootstrap:\n  dcs:\n    ttl: {ttl}\n    loop_wait: {loop_wait}\n    \
             retry_timeout: {retry}\n    maximum_lag_on_failover: 1048576\n    \
             postgresql:\n      use_pg_rewind: false\n      parameters:\n        \
             wal_level: replica\n        hot_standby: 'on'\n        max_wal_senders: 5\n        \
             max_replication_slots: 5\n  initdb:\n  - encoding: UTF8\n\
             postgresql:\n  listen: 127.0.0.1:{pg}\n  connect_address: 127.0.0.1:{pg}\n  \
             data_dir: '{dir}/data'\n  bin_dir: '{bin}'\n  pgpass: '{dir}/pgpass'\n  \
             authentication:\n    replication: {{username: replicator, password: \
             patroni-test-replicator}}\n    superuser: {{username: postgres, password: \
             {SUPERUSER_PASSWORD}}}\n  parameters:\n    unix_socket_directories: '{dir}'\n    \
             shared_buffers: 16MB\n  pg_hba:\n  - local all all trust\n  \
             - host replication replicator 127.0.0.1/32 md5\n  - host all all 127.0.0.1/32 md5\n",
            name = self.name,
            api = self.api_port,
            hosts = hosts.join(", "),
            ttl = t.ttl,
            loop_wait = t.loop_wait,
            retry = t.retry_timeout,
            pg = self.pg_port,
            bin = self.bin_dir.display(),
        )
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The port PostgreSQL listens on (127.0.0.1).
    pub fn pg_port(&self) -> u16 {
        self.pg_port
    }

    /// The port of Patroni's REST API (127.0.0.1).
    pub fn api_port(&self) -> u16 {
        self.api_port
    }

    /// Patroni's output, PostgreSQL's log included.
    pub fn log_path(&self) -> PathBuf {
        self.dir.path().join("patroni.log")
    }

    /// The last 40 lines of [`log_path`](Self::log_path).
    pub fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(self.log_path()).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    }

    /// Panics with the log if the Patroni process has exited by itself (a bad config, no
    /// DCS module): waiting on it would only time out.
    pub fn assert_running(&mut self) {
        if let Some(child) = self.child.as_mut() {
            if let Ok(Some(status)) = child.try_wait() {
                panic!(
                    "Patroni {} exited ({status}); log:\n{}",
                    self.name,
                    self.log_tail()
                );
            }
        }
    }

    /// The status code and body of `GET path` on the REST API, if it answers.
    pub fn api_get(&self, path: &str) -> Option<(u16, String)> {
        http_get(SocketAddr::from(([127, 0, 0, 1], self.api_port)), path)
    }

    /// What the REST API says this node is (`/leader`, then `/replica`), if either.
    pub fn role(&self) -> Option<Role> {
        if self.api_get("/leader").is_some_and(|(code, _)| code == 200) {
            Some(Role::Leader)
        } else if self
            .api_get("/replica")
            .is_some_and(|(code, _)| code == 200)
        {
            Some(Role::Replica)
        } else {
            None
        }
    }

    /// Runs `sql` with psql as the superuser over TCP and returns its unaligned, tuples-only
    /// output, or psql's error. Bounded: psql is killed after 30 s.
    pub fn psql(&self, sql: &str) -> Result<String, String> {
        let mut cmd = Command::new(self.bin_dir.join("psql"));
        cmd.args(["-h", "127.0.0.1", "-p", &self.pg_port.to_string()])
            .args(["-U", "postgres", "-d", "postgres", "-AtXq"])
            .args(["-v", "ON_ERROR_STOP=1", "-c", sql])
            .env("PGPASSWORD", SUPERUSER_PASSWORD)
            .env("PGCONNECT_TIMEOUT", "5")
            .env("PGOPTIONS", "-c statement_timeout=20000");
        run_bounded(cmd, Duration::from_secs(30))
    }

    /// The postmaster's process id, from `postmaster.pid`, if one runs on this data directory.
    pub fn postmaster_pid(&self) -> Option<u32> {
        let data = self.dir.path().join("data");
        let text = std::fs::read_to_string(data.join("postmaster.pid")).ok()?;
        let pid: u32 = text.lines().next()?.trim().parse().ok()?;
        // A stale file may name a pid the kernel has since given to another process.
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
        let cmdline = String::from_utf8_lossy(&cmdline);
        cmdline
            .contains(data.to_string_lossy().as_ref())
            .then_some(pid)
    }

    /// Whether the Patroni process still runs.
    pub fn is_running(&self) -> bool {
        self.child.is_some()
    }

    /// `kill -9` of Patroni (with its process group) and of PostgreSQL (the postmaster and
    /// its children), as a machine that dies would leave them.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            // SAFETY: signals to our own child's process group; no memory is touched.
            unsafe {
                libc::killpg(child.id() as libc::pid_t, libc::SIGKILL);
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        if let Some(postmaster) = self.postmaster_pid() {
            // Collected first: once the postmaster is gone its children are reparented.
            let children = children_of(postmaster);
            for pid in std::iter::once(postmaster).chain(children) {
                // SAFETY: kill(2) on PostgreSQL processes this node started.
                unsafe {
                    libc::kill(pid as libc::pid_t, libc::SIGKILL);
                }
            }
        }
    }
}

impl Drop for PatroniNode {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The processes whose parent is `parent` (from `/proc/*/stat`).
fn children_of(parent: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| {
            let pid: u32 = e.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
            // `pid (comm) state ppid ...`; comm may hold spaces and parentheses.
            let after = &stat[stat.rfind(')')? + 1..];
            let ppid: u32 = after.split_whitespace().nth(1)?.parse().ok()?;
            (ppid == parent).then_some(pid)
        })
        .collect()
}

/// Runs `cmd`, killing it after `limit`; its stdout (trimmed) on success, else its stderr.
fn run_bounded(mut cmd: Command, limit: Duration) -> Result<String, String> {
    let out = tempfile::tempfile().map_err(|e| format!("temp file: {e}"))?;
    let err = tempfile::tempfile().map_err(|e| format!("temp file: {e}"))?;
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(out.try_clone().map_err(|e| e.to_string())?)
        .stderr(err.try_clone().map_err(|e| e.to_string())?)
        .spawn()
        .map_err(|e| format!("spawn {:?}: {e}", cmd.get_program()))?;
    let deadline = Instant::now() + limit;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("{:?} killed after {limit:?}", cmd.get_program()));
            }
        }
    };
    let read = |mut f: std::fs::File| {
        use std::io::Seek;
        let mut s = String::new();
        let _ = f.rewind().and_then(|_| f.read_to_string(&mut s));
        s
    };
    if status.success() {
        Ok(read(out).trim().to_string())
    } else {
        Err(format!("{status}: {}", read(err).trim()))
    }
}

/// A plain HTTP/1.0 GET (Patroni's REST API closes the connection after its answer).
pub fn http_get(addr: SocketAddr, path: &str) -> Option<(u16, String)> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    s.set_write_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").ok()?;
    let mut answer = String::new();
    s.read_to_string(&mut answer).ok()?;
    parse_http_answer(&answer)
}

/// The status code and body of an HTTP answer.
fn parse_http_answer(answer: &str) -> Option<(u16, String)> {
    let status_line = answer.lines().next()?;
    let mut parts = status_line.split_whitespace();
    if !parts.next()?.starts_with("HTTP/") {
        return None;
    }
    let code = parts.next()?.parse().ok()?;
    let body = answer
        .split_once("\r\n\r\n")
        .map_or("", |(_, body)| body)
        .to_string();
    Some((code, body))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn http_answers_are_parsed() {
        let answer = "HTTP/1.0 503 Service Unavailable\r\nServer: x\r\n\r\n{\"role\": \"replica\"}";
        assert_eq!(
            parse_http_answer(answer),
            Some((503, "{\"role\": \"replica\"}".to_string()))
        );
        assert_eq!(
            parse_http_answer("HTTP/1.1 200 OK\r\n\r\n"),
            Some((200, String::new()))
        );
        assert_eq!(parse_http_answer("garbage"), None);
        assert_eq!(parse_http_answer(""), None);
    }

    #[test]
    fn the_failover_bound_follows_the_timings() {
        let t = Timings::SHORT;
        assert!(t.ttl >= 20 && t.loop_wait >= 1 && t.retry_timeout >= 3);
        assert!(t.loop_wait + 2 * t.retry_timeout <= t.ttl);
        assert!(t.failover_bound() > Duration::from_secs(t.ttl + t.loop_wait));
    }

    #[test]
    fn bounded_commands_report_output_errors_and_overruns() {
        let mut ok = Command::new("sh");
        ok.args(["-c", "echo ' hi '"]);
        assert_eq!(run_bounded(ok, Duration::from_secs(10)), Ok("hi".into()));
        let mut fail = Command::new("sh");
        fail.args(["-c", "echo oops >&2; exit 3"]);
        let e = run_bounded(fail, Duration::from_secs(10)).unwrap_err();
        assert!(e.contains("oops"), "{e}");
        let mut slow = Command::new("sleep");
        slow.arg("30");
        let e = run_bounded(slow, Duration::from_millis(200)).unwrap_err();
        assert!(e.contains("killed after"), "{e}");
    }

    #[test]
    fn children_of_finds_a_child_process() {
        let mut child = Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("spawn sleep");
        let found = children_of(std::process::id());
        let _ = child.kill();
        let _ = child.wait();
        assert!(found.contains(&child.id()), "{found:?}");
    }
}
