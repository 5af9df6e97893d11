//! The repository's scripts as a user runs them (`scripts/run`, `scripts/package`), and a
//! process the test owns: bounded runs, a child killed when dropped.
//!
//! The scripts build before they run; a test makes them build what it already has: the
//! running test's cargo profile (`dev` for `target/debug`) and the selection scripts/test
//! builds (`--workspace --all-targets`), so the build is a no-op in CI. Cargo resolves
//! dependency features per selection: `-p zooraft` alone, the scripts' default, would
//! compile the server again.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::Duration;

use crate::rt::eventually;

/// How long a script may take to build: nothing to do in CI (scripts/test built the
/// workspace); a changed server recompiles in a few minutes on two cores.
pub const BUILD_LIMIT: Duration = Duration::from_secs(20 * 60);

/// The repository's root (the harness crate's parent).
pub fn repo_root() -> PathBuf {
    let suite = crate::suite_dir();
    suite
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| panic!("{} has no parent", suite.display()))
}

/// The cargo profile the running test was built with: `dev` for `target/debug`, else the
/// profile directory's name.
pub fn cargo_profile() -> String {
    let bin = crate::zooraft_binary();
    let dir = bin
        .parent()
        .and_then(Path::file_name)
        .and_then(|n| n.to_str())
        .unwrap_or("debug");
    match dir {
        "debug" => "dev".to_string(),
        other => other.to_string(),
    }
}

/// `scripts/<name>`, set to build what the running tests were built from (see the module
/// docs), with `CARGO_TARGET_DIR` inherited.
pub fn script(name: &str) -> Command {
    let mut cmd = Command::new(repo_root().join("scripts").join(name));
    cmd.env("ZOORAFT_PROFILE", cargo_profile())
        .env("ZOORAFT_CARGO_ARGS", "--workspace --all-targets")
        .env_remove("ZOORAFT_PACKAGE_VERSION")
        .env_remove("ZOORAFT_PACKAGE_DIR")
        .stdin(Stdio::null());
    cmd
}

/// What a bounded run printed and how it ended.
pub struct Finished {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

impl Finished {
    /// Panics, showing the output, unless the command exited 0.
    #[track_caller]
    pub fn expect_success(self, what: &str) -> Finished {
        assert!(
            self.status.success(),
            "{what} failed ({}):\n{}\n{}",
            self.status,
            self.stdout,
            self.stderr
        );
        self
    }
}

/// Runs `cmd` to completion within `limit` (its output into files, read back), killing it
/// and panicking with what it printed if it takes longer.
#[track_caller]
pub fn run_bounded(what: &str, cmd: &mut Command, limit: Duration) -> Finished {
    let dir = tempfile::tempdir().expect("temporary directory");
    let (out_path, err_path) = (dir.path().join("stdout"), dir.path().join("stderr"));
    let out = std::fs::File::create(&out_path).expect("create stdout file");
    let err = std::fs::File::create(&err_path).expect("create stderr file");
    let child = cmd
        .stdout(out)
        .stderr(err)
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {what}: {e}"));
    let mut child = Owned::new(child);
    let read =
        |p: &Path| String::from_utf8_lossy(&std::fs::read(p).unwrap_or_default()).into_owned();
    let status = {
        let deadline = std::time::Instant::now() + limit;
        loop {
            if let Some(s) = child.try_wait() {
                break s;
            }
            if std::time::Instant::now() >= deadline {
                panic!(
                    "{what} did not finish within {limit:?}:\n{}\n{}",
                    read(&out_path),
                    read(&err_path)
                );
            }
            std::thread::sleep(crate::rt::POLL_INTERVAL);
        }
    };
    Finished {
        status,
        stdout: read(&out_path),
        stderr: read(&err_path),
    }
}

/// A child process killed (and reaped) when dropped, unless it has exited.
pub struct Owned {
    child: Option<Child>,
}

impl Owned {
    pub fn new(child: Child) -> Owned {
        Owned { child: Some(child) }
    }

    pub fn id(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    /// The exit status once it has exited (then it is reaped).
    pub fn try_wait(&mut self) -> Option<ExitStatus> {
        let status = self.child.as_mut()?.try_wait().ok().flatten();
        if status.is_some() {
            self.child = None;
        }
        status
    }

    /// True until it has been seen to exit.
    pub fn running(&mut self) -> bool {
        self.child.is_some() && self.try_wait().is_none()
    }

    /// SIGTERM, then its exit status within `limit` (panics naming `what` if it runs on).
    #[track_caller]
    pub fn terminate(&mut self, what: &str, limit: Duration) -> ExitStatus {
        if let Some(child) = &self.child {
            // SAFETY: a signal to our own child, which we have not reaped yet.
            unsafe {
                libc::kill(child.id() as libc::pid_t, libc::SIGTERM);
            }
        }
        eventually(&format!("{what} to exit after SIGTERM"), limit, || {
            self.try_wait()
        })
    }
}

impl Drop for Owned {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
