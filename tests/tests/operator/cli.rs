//! The `zooraft` command line: a zkServer.sh-style config file (positional or `--config`),
//! flags that override it, malformed values and unknown keys, `./data` without a config,
//! graceful SIGTERM/SIGINT that keep acknowledged writes, and a data directory it must
//! refuse (written by an incompatible version, garbage, or not a directory).
//!
//! These start the binary by hand, not through the harness, so each test controls the
//! arguments, the working directory and the signals, and sees the exit status and the log.

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use zooraft_tests::rt::{runtime, within};
use zooraft_tests::{free_port, zooraft_binary};

use crate::{connect, persistent, WAIT};

/// A `zooraft` process started by hand (not through the harness), so a test controls its
/// arguments, working directory and signals and sees its exit status.
struct Zooraft {
    child: Option<Child>,
    log: PathBuf,
}

impl Zooraft {
    fn spawn(args: &[&str], cwd: &Path, log: &Path) -> Zooraft {
        let out = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .expect("open log");
        let err = out.try_clone().expect("clone log handle");
        let child = Command::new(zooraft_binary())
            .args(args)
            .current_dir(cwd)
            .env("RUST_LOG", "info")
            .env_remove("RUST_BACKTRACE")
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .expect("spawn zooraft");
        Zooraft {
            child: Some(child),
            log: log.to_path_buf(),
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits until `port` answers `srvr` with a Mode; panics if the process exits first.
    fn wait_serving(&mut self, port: u16) {
        let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if zooraft_tests::four_letter_word(addr, "srvr").is_ok_and(|a| a.contains("Mode: ")) {
                return;
            }
            if let Some(status) = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                panic!(
                    "zooraft exited ({status}) before serving; log:\n{}",
                    self.log()
                );
            }
            assert!(
                Instant::now() < deadline,
                "zooraft did not serve on {port}; log:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits (bounded) for the process to exit by itself.
    fn wait_exit(&mut self, bound: Duration) -> ExitStatus {
        let child = self.child.as_mut().expect("running");
        let deadline = Instant::now() + bound;
        loop {
            if let Some(status) = child.try_wait().expect("wait") {
                self.child = None;
                return status;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                self.child = None;
                panic!(
                    "zooraft did not exit within {bound:?}; log:\n{}",
                    self.log()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn signal(&self, sig: libc::c_int) {
        let pid = self.child.as_ref().expect("running").id();
        // SAFETY: kill(2) on our own child's pid; no memory is involved.
        unsafe {
            libc::kill(pid as libc::pid_t, sig);
        }
    }
}

impl Drop for Zooraft {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Bound for a graceful stop or a refused start.
const EXIT_BOUND: Duration = Duration::from_secs(15);

/// A temp dir with a zoo.cfg of `lines` (plus dataDir in it and a free clientPort unless
/// given); returns (dir, cfg path, client port).
fn config_dir(extra: &[&str]) -> (tempfile::TempDir, PathBuf, u16) {
    let dir = tempfile::Builder::new()
        .prefix("zooraft-cli-")
        .tempdir()
        .expect("temp dir");
    let port = free_port();
    let mut cfg = format!(
        "tickTime=2000\ndataDir={}\nclientPort={port}\nclientPortAddress=127.0.0.1\n",
        dir.path().join("data").display()
    );
    for l in extra {
        cfg.push_str(l);
        cfg.push('\n');
    }
    let path = dir.path().join("zoo.cfg");
    std::fs::write(&path, cfg).expect("write zoo.cfg");
    (dir, path, port)
}

#[track_caller]
fn assert_no_panic(log: &str) {
    assert!(
        !log.contains("panicked at") && !log.contains("stack backtrace"),
        "zooraft panicked:\n{log}"
    );
}

#[test]
fn cli_config_positional_flag_and_override_zooraft() {
    let (dir, cfg, port) = config_dir(&[]);
    let cfg_s = cfg.to_str().expect("utf-8 path");
    let log = dir.path().join("server.log");

    // zkServer.sh style: the file as the only argument.
    let mut z = Zooraft::spawn(&[cfg_s], dir.path(), &log);
    z.wait_serving(port);
    z.signal(libc::SIGTERM);
    assert!(z.wait_exit(EXIT_BOUND).success(), "{}", z.log());

    // --config.
    let mut z = Zooraft::spawn(&["--config", cfg_s], dir.path(), &log);
    z.wait_serving(port);
    z.signal(libc::SIGTERM);
    assert!(z.wait_exit(EXIT_BOUND).success(), "{}", z.log());

    // A flag overrides the file's clientPort.
    let other = free_port();
    let other_s = other.to_string();
    let mut z = Zooraft::spawn(&["--config", cfg_s, "--port", &other_s], dir.path(), &log);
    z.wait_serving(other);
    assert!(
        TcpStream::connect(("127.0.0.1", port)).is_err(),
        "the file's clientPort {port} is not used when --port says {other}"
    );
    z.signal(libc::SIGTERM);
    assert!(z.wait_exit(EXIT_BOUND).success(), "{}", z.log());
    assert_no_panic(&z.log());
}

#[test]
fn cli_malformed_value_names_file_and_line_zooraft() {
    let (dir, cfg, _) = config_dir(&["# a comment", "maxClientCnxns=abc"]);
    let log = dir.path().join("server.log");
    let mut z = Zooraft::spawn(&[cfg.to_str().expect("utf-8")], dir.path(), &log);
    let status = z.wait_exit(EXIT_BOUND);
    let out = z.log();
    assert!(!status.success(), "a malformed value is refused: {out}");
    assert!(
        out.contains(&format!(
            "{}:6: maxClientCnxns: 'abc' is not a valid number",
            cfg.display()
        )),
        "the message names the file and line:\n{out}"
    );
    assert_no_panic(&out);

    // The same for clientPort, through --config.
    let (dir, cfg, _) = config_dir(&[]);
    let text = std::fs::read_to_string(&cfg).expect("read zoo.cfg");
    let text = text.replace(
        &text
            .lines()
            .find(|l| l.starts_with("clientPort="))
            .expect("clientPort line")
            .to_string(),
        "clientPort=abc",
    );
    std::fs::write(&cfg, text).expect("write zoo.cfg");
    let log = dir.path().join("server.log");
    let mut z = Zooraft::spawn(
        &["--config", cfg.to_str().expect("utf-8")],
        dir.path(),
        &log,
    );
    let status = z.wait_exit(EXIT_BOUND);
    let out = z.log();
    assert!(!status.success());
    assert!(
        out.contains(&format!(
            "{}:3: clientPort: 'abc' is not a valid number",
            cfg.display()
        )),
        "{out}"
    );
    assert_no_panic(&out);

    // A config file that is not there.
    let missing = dir.path().join("missing.cfg");
    let mut z = Zooraft::spawn(&[missing.to_str().expect("utf-8")], dir.path(), &log);
    let status = z.wait_exit(EXIT_BOUND);
    let out = z.log();
    assert!(!status.success());
    assert!(
        out.contains(&format!("cannot read {}", missing.display())),
        "{out}"
    );
    assert_no_panic(&out);
}

#[test]
fn cli_unknown_key_is_a_warning_zooraft() {
    let (dir, cfg, port) = config_dir(&["someUnknownKey=42", "initLimit=5"]);
    let log = dir.path().join("server.log");
    let mut z = Zooraft::spawn(&[cfg.to_str().expect("utf-8")], dir.path(), &log);
    z.wait_serving(port);
    let out = z.log();
    let warning = out
        .lines()
        .find(|l| l.contains("someUnknownKey"))
        .unwrap_or_else(|| panic!("no warning about the unknown key:\n{out}"));
    assert!(warning.contains("WARN"), "{warning}");
    assert!(
        warning.contains(&format!("{}:5", cfg.display())),
        "the warning names the file and line: {warning}"
    );
    assert!(
        !out.lines()
            .any(|l| l.contains("initLimit") && l.contains("WARN")),
        "a known ZooKeeper key is not warned about:\n{out}"
    );
    z.signal(libc::SIGTERM);
    assert!(z.wait_exit(EXIT_BOUND).success());
}

#[test]
fn cli_no_config_uses_data_in_working_directory_zooraft() {
    let cwd = tempfile::Builder::new()
        .prefix("zooraft-cwd-")
        .tempdir()
        .expect("temp dir");
    let log_dir = tempfile::tempdir().expect("temp dir");
    let log = log_dir.path().join("server.log");
    let port = free_port();
    let mut z = Zooraft::spawn(&["--port", &port.to_string()], cwd.path(), &log);
    z.wait_serving(port);
    let data = cwd.path().join("data");
    assert!(data.is_dir(), "./data is created in the working directory");
    assert!(
        std::fs::read_dir(&data)
            .expect("read ./data")
            .next()
            .is_some(),
        "./data holds the store"
    );
    z.signal(libc::SIGTERM);
    assert!(z.wait_exit(EXIT_BOUND).success(), "{}", z.log());
}

/// Starts from `cfg`, writes one znode (acknowledged), stops the server with `sig`, and
/// checks the exit status and that the znode is there after a restart.
fn graceful_stop(sig: libc::c_int) {
    let (dir, cfg, port) = config_dir(&[]);
    let cfg_s = cfg.to_str().expect("utf-8");
    let log = dir.path().join("server.log");
    let mut z = Zooraft::spawn(&[cfg_s], dir.path(), &log);
    z.wait_serving(port);
    let hosts = format!("127.0.0.1:{port}");
    let rt = runtime();
    let client = rt.block_on(connect(&hosts));
    rt.block_on(async {
        within(
            "create",
            WAIT,
            client.create("/kept", b"acknowledged", &persistent()),
        )
        .await
        .expect("create acknowledged");
    });
    z.signal(sig);
    let status = z.wait_exit(EXIT_BOUND);
    assert!(status.success(), "exit status {status}; log:\n{}", z.log());
    assert!(z.log().contains("shutting down"), "{}", z.log());
    drop(client);

    let mut z = Zooraft::spawn(&[cfg_s], dir.path(), &log);
    z.wait_serving(port);
    let data = rt.block_on(async {
        let c = connect(&hosts).await;
        within("get", WAIT, c.get_data("/kept"))
            .await
            .expect("get")
            .0
    });
    assert_eq!(data, b"acknowledged");
    z.signal(libc::SIGTERM);
    assert!(z.wait_exit(EXIT_BOUND).success());
    assert_no_panic(&z.log());
}

#[test]
fn cli_sigterm_is_graceful_zooraft() {
    graceful_stop(libc::SIGTERM);
}

#[test]
fn cli_sigint_is_graceful_zooraft() {
    graceful_stop(libc::SIGINT);
}

/// A refused start: non-zero exit, a message naming the problem, no panic.
fn assert_refused(z: &mut Zooraft, needle: &str) {
    let status = z.wait_exit(EXIT_BOUND);
    let out = z.log();
    assert!(!status.success(), "start-up is refused:\n{out}");
    assert!(out.contains(needle), "the message says {needle:?}:\n{out}");
    assert_no_panic(&out);
}

#[test]
fn cli_incompatible_data_directory_zooraft() {
    let (dir, cfg, port) = config_dir(&[]);
    let cfg_s = cfg.to_str().expect("utf-8");
    let log = dir.path().join("server.log");
    let mut z = Zooraft::spawn(&[cfg_s], dir.path(), &log);
    z.wait_serving(port);
    z.signal(libc::SIGTERM);
    assert!(z.wait_exit(EXIT_BOUND).success());

    // As if a future zooraft had written it: another `format` in the `state` column family.
    let raft = dir.path().join("data").join("raft");
    {
        let opts = rocksdb::Options::default();
        let families = rocksdb::DB::list_cf(&opts, &raft).expect("list column families");
        let db =
            rocksdb::DB::open_cf(&opts, &raft, &families).expect("open the store zooraft wrote");
        let state = db.cf_handle("state").expect("state column family");
        db.put_cf(state, b"format", 99u32.to_be_bytes())
            .expect("write format");
        db.flush_cf(state).expect("flush");
    }
    let mut z = Zooraft::spawn(&[cfg_s], dir.path(), &log);
    assert_refused(&mut z, "incompatible");
}

#[test]
fn cli_garbage_data_directory_zooraft() {
    let (dir, cfg, _) = config_dir(&[]);
    let raft = dir.path().join("data").join("raft");
    std::fs::create_dir_all(&raft).expect("mkdir");
    std::fs::write(raft.join("CURRENT"), "MANIFEST-000042\n").expect("write");
    std::fs::write(raft.join("MANIFEST-000042"), [0x5au8; 4096]).expect("write");
    let log = dir.path().join("server.log");
    let mut z = Zooraft::spawn(&[cfg.to_str().expect("utf-8")], dir.path(), &log);
    assert_refused(&mut z, &raft.display().to_string());

    // dataDir/raft is a file, not a directory.
    let (dir, cfg, _) = config_dir(&[]);
    std::fs::create_dir_all(dir.path().join("data")).expect("mkdir");
    std::fs::write(dir.path().join("data").join("raft"), "not a directory").expect("write");
    let log = dir.path().join("server.log");
    let mut z = Zooraft::spawn(&[cfg.to_str().expect("utf-8")], dir.path(), &log);
    assert_refused(&mut z, "raft");
}
