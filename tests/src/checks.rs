//! Client programs that check a server (kazoo in Python, the C, Go and Node.js clients):
//! each prints `PASS name` / `FAIL name: reason` per check and `N passed, N failed` last.
//! [`demand`] runs one against a server with a time bound and asserts that exactly the
//! expected number of checks passed, none failed and the program exited cleanly, showing
//! the program's output and the server's log tail otherwise.

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::TestServer;

/// What a finished program reported.
#[derive(Debug)]
pub struct Report {
    pub passed: usize,
    pub failed: usize,
    /// The program exited by itself with status 0.
    pub success: bool,
    pub output: String,
}

/// Parses the last `N passed, N failed` line.
pub fn parse_summary(output: &str) -> Option<(usize, usize)> {
    let line = output
        .lines()
        .rev()
        .find(|l| l.contains(" passed, ") && l.trim_end().ends_with(" failed"))?;
    let mut parts = line.split_whitespace();
    let passed = parts.next()?.parse().ok()?;
    let _ = parts.next()?;
    let failed = parts.next()?.parse().ok()?;
    Some((passed, failed))
}

/// Runs `command` with the server's connect string as its last argument, killing it after
/// `limit`. Standard output and error are captured together, in order.
pub fn run(mut command: Command, server: &TestServer, limit: Duration) -> Report {
    let out_dir = tempfile::tempdir().expect("temp dir for program output");
    let out_path = out_dir.path().join("output.txt");
    let out = std::fs::File::create(&out_path).expect("create output file");
    let err = out.try_clone().expect("clone output handle");
    let program = format!("{:?}", command.get_program());
    let mut child = command
        .arg(server.connect_string())
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {program}: {e}"));
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for the program") {
            break Some(status);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut output = String::new();
    std::fs::File::open(&out_path)
        .and_then(|mut f| f.read_to_string(&mut output))
        .expect("read program output");
    if status.is_none() {
        output.push_str(&format!("\n(killed after {limit:?})\n"));
    }
    let (passed, failed) = parse_summary(&output).unwrap_or((0, usize::MAX));
    Report {
        passed,
        failed,
        success: status.is_some_and(|s| s.success()),
        output,
    }
}

/// Runs `command` against `server` (see [`run`]) and demands `expected` passed checks, none
/// failed and a clean exit. `what` names the program in the failure message.
pub fn demand(what: &str, command: Command, server: &TestServer, limit: Duration, expected: usize) {
    let report = run(command, server, limit);
    println!("{}", report.output);
    assert!(
        report.success && report.failed == 0 && report.passed == expected,
        "{what} against {}: {} passed, {} failed (expected {expected} passed), success={}\n\
         --- output ---\n{}\n--- server log tail ---\n{}",
        server.kind().name(),
        report.passed,
        report.failed,
        report.success,
        report.output,
        server.log_tail()
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_line_is_parsed() {
        assert_eq!(parse_summary("PASS a\n3 passed, 1 failed\n"), Some((3, 1)));
        assert_eq!(parse_summary("# log\nPASS a\n"), None);
        assert_eq!(
            parse_summary("1 passed, 0 failed\nPASS b\n2 passed, 0 failed\n"),
            Some((2, 0))
        );
    }
}
