//! Stopping a child process the way an operator's service manager does: SIGTERM, a bounded
//! wait for it to exit on its own, then SIGKILL.

use std::process::Child;
use std::time::{Duration, Instant};

/// SIGTERM (after a SIGCONT, in case it was paused), then SIGKILL if `child` is still there
/// after `grace`; returns whether it exited by itself. The process is reaped either way.
pub fn terminate(mut child: Child, grace: Duration) -> bool {
    let pid = child.id() as libc::pid_t;
    // SAFETY: kill(2) on our own child's pid (not yet reaped, so not reused); no memory
    // is involved.
    unsafe {
        libc::kill(pid, libc::SIGCONT);
        libc::kill(pid, libc::SIGTERM);
    }
    let deadline = Instant::now() + grace;
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufRead, BufReader};
    use std::process::Command;

    #[test]
    fn a_process_that_ignores_sigterm_is_killed_after_the_grace() {
        let polite = Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("spawn sleep");
        assert!(
            terminate(polite, Duration::from_secs(10)),
            "sleep exits on SIGTERM"
        );
        // It says so once SIGTERM is ignored (a signal before that would end it at once).
        let mut stubborn = Command::new("sh")
            .args(["-c", "trap '' TERM; echo ready; exec sleep 30"])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("spawn sh");
        let mut ready = String::new();
        let out = stubborn.stdout.take().expect("piped stdout");
        BufReader::new(out)
            .read_line(&mut ready)
            .expect("read ready");
        assert_eq!(ready.trim(), "ready");
        let started = Instant::now();
        assert!(!terminate(stubborn, Duration::from_millis(300)));
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "killed, not waited out"
        );
    }
}
