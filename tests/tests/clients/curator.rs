//! Apache Curator 5.4 (Debian's jars) against a live server: the recipes applications use
//! (InterProcessMutex, InterProcessReadWriteLock, InterProcessSemaphoreV2, LeaderLatch,
//! LeaderSelector, CuratorCache, DistributedAtomicLong) and Curator's connection-state
//! handling across server restarts must work unchanged on zooraft, exactly as on Apache
//! ZooKeeper.
//!
//! Each scenario runs one Java program from `tests/java/Curator*.java` (one JVM per recipe,
//! several CuratorFramework clients inside it, each its own session). The program checks the
//! recipe's semantics itself and prints `PASS <check> <detail>` / `FAIL <check> <detail>`
//! lines; this file asserts that every expected check passed, none failed, and the program
//! exited 0 within its bound. The connection-state program asks, on stdout, for the server to
//! be stopped and restarted, and is answered on stdin.
//!
//! Set `ZOORAFT_TEST_VERBOSE=1` (with `--nocapture`) to see every program's output, and
//! `ZOORAFT_JAVA_LOG=info` (or `debug`) for Curator's and the ZooKeeper client's logs.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ExitStatus, Stdio};
use std::sync::{mpsc, Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use zooraft_tests::java::java_command;
use zooraft_tests::{ServerKind, TestServer};

/// How long one Java program may run before it is killed (its own watchdog fires at 100 s).
const PROGRAM_BOUND: Duration = Duration::from_secs(120);

/// The bound for the connection-state program, which waits through two server restarts and
/// a session expiry (its watchdog fires at 160 s).
const RESTART_PROGRAM_BOUND: Duration = Duration::from_secs(180);

/// What a Java program printed and how it ended.
struct JavaRun {
    program: String,
    status: Option<ExitStatus>,
    timed_out: bool,
    stdout: Vec<String>,
    stderr: Vec<String>,
}

impl JavaRun {
    fn passed(&self) -> BTreeSet<String> {
        self.checks("PASS ")
    }

    fn failed(&self) -> BTreeSet<String> {
        self.checks("FAIL ")
    }

    fn checks(&self, prefix: &str) -> BTreeSet<String> {
        self.stdout
            .iter()
            .filter_map(|l| l.strip_prefix(prefix))
            .map(|rest| rest.split_whitespace().next().unwrap_or("").to_string())
            .collect()
    }

    /// The program's output, for a failure message: all of stdout, the end of stderr.
    fn transcript(&self) -> String {
        let tail = &self.stderr[self.stderr.len().saturating_sub(120)..];
        format!(
            "--- {} stdout ---\n{}\n--- stderr (last {} lines) ---\n{}",
            self.program,
            self.stdout.join("\n"),
            tail.len(),
            tail.join("\n")
        )
    }
}

/// A child process that is killed and reaped whenever it goes out of scope, so a failing
/// test (or a panicking driver callback) never leaves a JVM behind.
struct KillOnDrop(Child);

impl KillOnDrop {
    fn kill_and_wait(&mut self) -> Option<ExitStatus> {
        let _ = self.0.kill();
        self.0.wait().ok()
    }
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            self.kill_and_wait();
        }
    }
}

/// Runs `class` with `args` with no input, killing it after [`PROGRAM_BOUND`].
fn run_java(class: &str, args: &[String]) -> JavaRun {
    run_java_driven(class, args, PROGRAM_BOUND, |_| None)
}

/// Runs `class` with `args`. Every stdout line is passed to `on_line`; a `Some(reply)` is
/// written back on the program's stdin. The program is killed after `bound`.
fn run_java_driven(
    class: &str,
    args: &[String],
    bound: Duration,
    mut on_line: impl FnMut(&str) -> Option<String>,
) -> JavaRun {
    let mut child = KillOnDrop(
        java_command(class)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn java"),
    );
    let mut stdin = child.0.stdin.take().expect("child stdin");
    let stdout = child.0.stdout.take().expect("child stdout");
    let stderr = child.0.stderr.take().expect("child stderr");
    let (tx, rx) = mpsc::channel::<String>();
    let out_reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let err_lines = Arc::new(Mutex::new(Vec::new()));
    let err_sink = Arc::clone(&err_lines);
    let err_reader = std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            err_sink.lock().expect("stderr buffer").push(line);
        }
    });

    let deadline = Instant::now() + bound;
    let mut lines = Vec::new();
    let mut timed_out = false;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            timed_out = true;
            break;
        }
        match rx.recv_timeout(left) {
            Ok(line) => {
                if let Some(reply) = on_line(&line) {
                    // The program may already be gone; its exit status tells the story.
                    let _ = writeln!(stdin, "{reply}").and_then(|_| stdin.flush());
                }
                lines.push(line);
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {
                timed_out = true;
                break;
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    drop(stdin);
    let mut status = None;
    while !timed_out {
        match child.0.try_wait() {
            Ok(Some(s)) => {
                status = Some(s);
                break;
            }
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            _ => timed_out = true,
        }
    }
    if timed_out {
        status = child.kill_and_wait();
    }
    let _ = out_reader.join();
    let _ = err_reader.join();
    // Lines that arrived after a timeout still belong in the transcript.
    lines.extend(rx.try_iter());
    let stderr = std::mem::take(&mut *err_lines.lock().expect("stderr buffer"));
    JavaRun {
        program: format!("{class} {}", args.join(" ")),
        status,
        timed_out,
        stdout: lines,
        stderr,
    }
}

/// Asserts that the program finished in time with exit 0, that no check failed and that
/// every check in `expected` passed.
fn assert_all_passed(run: &JavaRun, expected: &[&str], server: &TestServer) {
    let passed = run.passed();
    let failed = run.failed();
    let missing: Vec<&str> = expected
        .iter()
        .copied()
        .filter(|name| !passed.contains(*name))
        .collect();
    if std::env::var_os("ZOORAFT_TEST_VERBOSE").is_some() {
        eprintln!("{}", run.transcript());
    }
    let ok = !run.timed_out
        && run.status.is_some_and(|s| s.success())
        && failed.is_empty()
        && missing.is_empty();
    assert!(
        ok,
        "{} against {}: timed_out={} status={:?} failed={:?} missing={:?}\n{}\n--- server log tail ---\n{}",
        run.program,
        server.kind().name(),
        run.timed_out,
        run.status,
        failed,
        missing,
        run.transcript(),
        server.log_tail()
    );
}

/// A server for Curator: Apache ZooKeeper checks for empty containers every second (its
/// default is a minute), so the container-parent check finishes quickly.
fn server(kind: ServerKind) -> TestServer {
    TestServer::builder(kind)
        .jvm_property("znode.container.checkIntervalMs", "1000")
        .start()
}

fn args(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

/// One Curator program against a standalone server: its class, its arguments after the
/// connect string, and the checks it must pass.
struct Program {
    class: &'static str,
    args: &'static [&'static str],
    checks: &'static [&'static str],
}

fn run_program(kind: ServerKind, program: &Program) {
    let zk = server(kind);
    let mut argv = vec![zk.connect_string()];
    argv.extend(program.args.iter().map(|a| a.to_string()));
    let run = run_java(program.class, &argv);
    assert_all_passed(&run, program.checks, &zk);
}

/// `program_tests!(x_apache, x_zooraft, PROGRAM)`: the program against each server.
macro_rules! program_tests {
    ($apache:ident, $zooraft:ident, $program:expr) => {
        #[test]
        fn $apache() {
            run_program(ServerKind::Apache, &$program);
        }

        #[test]
        fn $zooraft() {
            run_program(ServerKind::Zooraft, &$program);
        }
    };
}

// ------------------------------------------------------------------------------------------

/// InterProcessMutex: 4 clients x 50 non-atomic increments under the lock, reentrancy,
/// acquire timeouts, wake-up on release, release by session close, container cleanup.
const MUTEX: Program = Program {
    class: "CuratorMutex",
    args: &["4", "50", "--containers"],
    checks: &[
        "mutex_all_acquired",
        "mutex_no_overlap",
        "mutex_exact_count",
        "mutex_nodes_cleaned",
        "mutex_reentrant_acquire",
        "mutex_node_name",
        "mutex_reentrant_still_held",
        "mutex_reentrant_released",
        "mutex_release_unowned",
        "mutex_timeout_while_held",
        "mutex_acquire_after_release",
        "mutex_waiter_wakes",
        "mutex_session_close_releases",
        "mutex_container_parent_removed",
    ],
};

program_tests!(curator_mutex_apache, curator_mutex_zooraft, MUTEX);

/// InterProcessMutex across 3 JVMs (2 clients each): every holder increments a counter file,
/// with an O_EXCL marker file catching overlaps; the final count must be exact.
fn mutex_across_processes(kind: ServerKind) {
    const PROCESSES: usize = 3;
    const CLIENTS: usize = 2;
    const ITERATIONS: usize = 25;
    let zk = server(kind);
    let dir = tempfile::tempdir().expect("shared directory");
    let ready = Arc::new((Mutex::new(0usize), Condvar::new()));
    let connect = zk.connect_string();
    let shared = dir.path().display().to_string();
    let runs: Vec<JavaRun> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..PROCESSES)
            .map(|_| {
                let ready = Arc::clone(&ready);
                let argv = args(&[
                    &connect,
                    "--shared",
                    &shared,
                    &CLIENTS.to_string(),
                    &ITERATIONS.to_string(),
                ]);
                scope.spawn(move || {
                    run_java_driven("CuratorMutex", &argv, PROGRAM_BOUND, |line| {
                        if line != "READY" {
                            return None;
                        }
                        // Start all processes together, so their clients contend.
                        let (count, cv) = &*ready;
                        let mut n = count.lock().expect("ready count");
                        *n += 1;
                        cv.notify_all();
                        let _ = cv
                            .wait_timeout_while(n, Duration::from_secs(60), |n| *n < PROCESSES)
                            .expect("ready wait");
                        Some("GO".to_string())
                    })
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("driver thread"))
            .collect()
    });
    for run in &runs {
        assert_all_passed(
            run,
            &["mutex_process_all_acquired", "mutex_process_no_overlap"],
            &zk,
        );
    }
    let text = std::fs::read_to_string(dir.path().join("counter")).unwrap_or_default();
    let expected = PROCESSES * CLIENTS * ITERATIONS;
    assert_eq!(
        text.trim().parse::<usize>().ok(),
        Some(expected),
        "shared counter after {PROCESSES} processes x {CLIENTS} clients x {ITERATIONS} increments"
    );
    assert!(
        !dir.path().join("in-section").exists(),
        "a holder left the in-section marker behind"
    );
}

zooraft_tests::against_both!(
    curator_mutex_across_processes_apache,
    curator_mutex_across_processes_zooraft,
    mutex_across_processes
);

/// InterProcessReadWriteLock: readers share, writers exclude, downgrade works, upgrade does not.
const RWLOCK: Program = Program {
    class: "CuratorReadWriteLock",
    args: &["4", "30"],
    checks: &[
        "rwlock_readers_concurrent",
        "rwlock_writer_excludes",
        "rwlock_reader_excludes_writer",
        "rwlock_writer_after_readers",
        "rwlock_downgrade",
        "rwlock_downgraded_is_reader",
        "rwlock_writer_after_downgrade",
        "rwlock_no_upgrade",
        "rwlock_nodes_cleaned",
        "rwlock_mixed_all_acquired",
        "rwlock_mixed_exclusion",
        "rwlock_mixed_exact_count",
    ],
};

program_tests!(
    curator_read_write_lock_apache,
    curator_read_write_lock_zooraft,
    RWLOCK
);

/// InterProcessSemaphoreV2 with 3 leases among 5 clients.
const SEMAPHORE: Program = Program {
    class: "CuratorSemaphore",
    args: &["5", "3", "15"],
    checks: &[
        "semaphore_k_holders_at_once",
        "semaphore_full_denies",
        "semaphore_served_after_return",
        "semaphore_leases_cleaned",
        "semaphore_never_over_max",
        "semaphore_everyone_served",
        "semaphore_multi_lease",
    ],
};

program_tests!(
    curator_semaphore_apache,
    curator_semaphore_zooraft,
    SEMAPHORE
);

/// LeaderLatch among 5 participants, closed one by one.
const LATCH: Program = Program {
    class: "CuratorLeaderLatch",
    args: &["5"],
    checks: &[
        "latch_first_leader",
        "latch_late_joiner_queued_last",
        "latch_one_leader_each_round",
        "latch_never_two_leaders",
        "latch_leader_owns_lowest_node",
        "latch_participants_agree",
        "latch_await",
        "latch_handover_in_order",
        "latch_listener_once_each",
        "latch_nodes_cleaned",
    ],
};

program_tests!(
    curator_leader_latch_apache,
    curator_leader_latch_zooraft,
    LATCH
);

/// LeaderSelector with autoRequeue among 4 participants, 16 turns.
const SELECTOR: Program = Program {
    class: "CuratorLeaderSelector",
    args: &["4", "16"],
    checks: &[
        "selector_all_queued",
        "selector_rounds_completed",
        "selector_rotates",
        "selector_close_hands_over",
        "selector_never_two_leaders",
        "selector_has_leadership_consistent",
        "selector_nodes_cleaned",
    ],
};

program_tests!(
    curator_leader_selector_apache,
    curator_leader_selector_zooraft,
    SELECTOR
);

/// CuratorCache (addWatch PERSISTENT_RECURSIVE) and plain persistent watches.
const CACHE: Program = Program {
    class: "CuratorCacheEvents",
    args: &[],
    checks: &[
        "cache_initial_build",
        "cache_sees_create",
        "cache_sees_deep_create",
        "cache_sees_change",
        "cache_sees_delete",
        "cache_sees_session_close_delete",
        "cache_burst_matches_server",
        "cache_sees_recursive_delete",
        "cache_final_equals_server",
        "persistent_watch_events",
        "persistent_watch_removed",
        "recursive_watch_events",
    ],
};

program_tests!(curator_cache_apache, curator_cache_zooraft, CACHE);

/// DistributedAtomicLong: 3 clients x 2 threads x 25 increments, optimistic and promoted.
const ATOMIC: Program = Program {
    class: "CuratorAtomicLong",
    args: &["3", "2", "25"],
    checks: &[
        "atomic_initialize",
        "atomic_compare_and_set",
        "atomic_set_add_subtract",
        "atomic_optimistic_exact_total",
        "atomic_optimistic_linearizable",
        "atomic_promoted_exact_total",
        "atomic_promoted_linearizable",
    ],
};

program_tests!(
    curator_atomic_long_apache,
    curator_atomic_long_zooraft,
    ATOMIC
);

const CONNECTION_STATE_CHECKS: &[&str] = &[
    "cs_setup",
    "cs_suspended_on_stop",
    "cs_latch_suspends_leadership",
    "cs_suspended_then_reconnected",
    "cs_same_session_after_restart",
    "cs_ephemeral_survives_restart",
    "cs_latch_leads_again",
    "cs_lock_survives_restart",
    "cs_watches_survive_restart",
    "cs_cache_after_restart",
    "cs_short_session_setup",
    "cs_lost_after_session_timeout",
    "cs_latch_lost_leadership",
    "cs_new_session_after_lost",
    "cs_old_session_expired",
    "cs_new_session_usable",
    "cs_long_session_survives_second_restart",
];

/// Connection states across two server restarts (SIGTERM, then the same port and data):
/// one within a 60 s session timeout (SUSPENDED, RECONNECTED, same session), one past a 4 s
/// session timeout (LOST, new session, the old one expired by the server).
fn connection_state(kind: ServerKind) {
    // tickTime 2000 ms: sessions from 4 s (the short one) up to 60 s (the long ones).
    let mut zk = TestServer::builder(kind)
        .tick_time_ms(2000)
        .config("maxSessionTimeout", "60000")
        .start();
    let connect = zk.connect_string();
    let mut restarts = 0;
    let run = run_java_driven(
        "CuratorConnectionState",
        &args(&[&connect]),
        RESTART_PROGRAM_BOUND,
        |line| match line {
            "READY_FOR_STOP" => {
                zk.stop();
                Some("STOPPED".to_string())
            }
            "READY_FOR_START" => {
                zk.restart();
                restarts += 1;
                Some("STARTED".to_string())
            }
            _ => None,
        },
    );
    assert_all_passed(&run, CONNECTION_STATE_CHECKS, &zk);
    assert_eq!(restarts, 2, "{}", run.transcript());
}

zooraft_tests::against_both!(
    curator_connection_state_apache,
    curator_connection_state_zooraft,
    connection_state
);

// ------------------------------------------------------------------------------------------

const RECONFIG_CHECKS: &[&str] = &[
    "reconfig_get_config",
    "reconfig_stale_version",
    "reconfig_remove",
    "reconfig_watch_fires",
    "reconfig_add_back",
];

/// reconfig() and getConfig() against a 3-member ensemble with `reconfigEnabled=true`.
fn reconfig(kind: ServerKind) {
    let e = zooraft_tests::TestEnsemble::start_kind(kind, 3, 0, zooraft_tests::ensemble::RECONFIG);
    let leader = e.leader();
    let connected = e.member((leader + 1) % 3);
    let removed = (leader + 2) % 3 + 1;
    let run = run_java(
        "CuratorReconfig",
        &args(&[&connected.connect_string(), &removed.to_string()]),
    );
    assert_all_passed(&run, RECONFIG_CHECKS, connected);
}

zooraft_tests::against_both!(curator_reconfig_apache, curator_reconfig_zooraft, reconfig);
