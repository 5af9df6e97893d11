//! End-to-end tests across processes: mutual exclusion under contention, interop with
//! Apache Curator and kazoo on the same lock path, and the paused holder that fencing stops.
//!
//! Contenders append one line per critical section to a shared log (O_APPEND), with times
//! from CLOCK_MONOTONIC; the test then checks that no two sections overlap, and that
//! acquisition order is node creation order with strictly increasing fencing tokens.

use crate::common;

use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::Command;
use zooraft_recipes::{CreateMode, Fence, FencingToken, Mutex};
use zooraft_tests::ServerKind;

use common::{
    check_log, children, client, contender, curator_contender, curator_rw_contender,
    kazoo_contender, read_log, run_all, rust_contender, rust_rw_contender, server,
};

async fn persistent_lock_path(admin: &Arc<dyn zooraft_recipes::ZkClient>, path: &str) {
    for p in ["/locks", path] {
        match admin.create(p, b"", CreateMode::Persistent).await {
            Ok(_) | Err(zooraft_recipes::ErrorCode::NodeExists) => {}
            Err(e) => panic!("create {p}: {e}"),
        }
    }
}

async fn mutual_exclusion_under_contention(kind: ServerKind) {
    let server = server(kind);
    let admin = client(&server.connect_string()).await;
    admin
        .create("/counters", b"", CreateMode::Persistent)
        .await
        .expect("counters");
    admin
        .create("/counters/mx", b"0", CreateMode::Persistent)
        .await
        .expect("counter");
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("sections.log");
    let path = "/locks/contention";
    persistent_lock_path(&admin, path).await;
    // 16 tasks across 4 processes, 5 critical sections each.
    let cmds = (0..4)
        .map(|_| {
            rust_contender(
                &server.connect_string(),
                path,
                4,
                5,
                &log,
                Some("/counters/mx"),
            )
        })
        .collect();
    run_all(cmds, Duration::from_secs(150)).await;

    let mut entries = read_log(&log);
    assert_eq!(entries.len(), 80, "every critical section is logged");
    let pids: std::collections::HashSet<u32> = entries.iter().map(|e| e.pid).collect();
    assert_eq!(pids.len(), 4);
    check_log(&mut entries);
    // Fenced increments under the lock never conflicted and none was lost.
    let (data, _) = admin.get_data("/counters/mx").await.expect("counter");
    assert_eq!(String::from_utf8_lossy(&data), "80");
    assert!(
        children(&admin, path).await.is_empty(),
        "lock nodes left behind"
    );
    admin.close().await;
}

both_servers!(
    mutual_exclusion_under_contention_apache,
    mutual_exclusion_under_contention_zooraft,
    mutual_exclusion_under_contention
);

/// Another client library's contender: the command that runs `threads` of it on a lock path.
type ForeignContender = fn(&str, &str, usize, usize, &std::path::Path) -> Command;

/// Two processes of `implementation` (Curator or kazoo) and two of ours, 3 threads or tasks
/// each, 5 critical sections each, on one lock path: each side takes the lock its share of
/// times and the sections never overlap.
async fn interop_with(kind: ServerKind, implementation: &str, foreign: ForeignContender) {
    let server = server(kind);
    let admin = client(&server.connect_string()).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("sections.log");
    let path = format!("/locks/interop-{implementation}");
    persistent_lock_path(&admin, &path).await;
    let cs = server.connect_string();
    let cmds = vec![
        foreign(&cs, &path, 3, 5, &log),
        rust_contender(&cs, &path, 3, 5, &log, None),
        foreign(&cs, &path, 3, 5, &log),
        rust_contender(&cs, &path, 3, 5, &log, None),
    ];
    run_all(cmds, Duration::from_secs(170)).await;
    let mut entries = read_log(&log);
    assert_eq!(entries.len(), 60);
    let theirs = entries
        .iter()
        .filter(|e| e.implementation == implementation)
        .count();
    assert_eq!(theirs, 30, "both implementations took the lock");
    check_log(&mut entries);
    assert!(
        children(&admin, &path).await.is_empty(),
        "lock nodes left behind"
    );
    admin.close().await;
}

async fn interop_with_curator(kind: ServerKind) {
    interop_with(kind, "curator", curator_contender).await;
}

both_servers!(
    interop_with_curator_apache,
    interop_with_curator_zooraft,
    interop_with_curator
);

async fn interop_with_kazoo(kind: ServerKind) {
    interop_with(kind, "kazoo", kazoo_contender).await;
}

both_servers!(
    interop_with_kazoo_apache,
    interop_with_kazoo_zooraft,
    interop_with_kazoo
);

async fn read_write_interop_with_curator(kind: ServerKind) {
    let server = server(kind);
    let admin = client(&server.connect_string()).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("sections.log");
    let path = "/locks/interop-rw";
    persistent_lock_path(&admin, path).await;
    let cs = server.connect_string();
    let cmds = vec![
        curator_rw_contender(&cs, path, 4, 4, &log),
        rust_rw_contender(&cs, path, 4, 4, &log),
        rust_rw_contender(&cs, path, 4, 4, &log),
    ];
    run_all(cmds, Duration::from_secs(170)).await;
    let mut entries = read_log(&log);
    assert_eq!(entries.len(), 48);
    entries.sort_by_key(|e| e.start);
    // A writer's section overlaps no other section; readers may overlap each other.
    for (i, w) in entries.iter().enumerate() {
        if !w.implementation.ends_with("-w") {
            continue;
        }
        for (j, o) in entries.iter().enumerate() {
            if i != j {
                assert!(
                    o.end < w.start || w.end < o.start,
                    "a writer overlaps another holder:\n  {w:?}\n  {o:?}"
                );
            }
        }
    }
    let curator_writes = entries
        .iter()
        .filter(|e| e.implementation == "curator-w")
        .count();
    assert_eq!(curator_writes, 8);
    assert!(
        children(&admin, path).await.is_empty(),
        "lock nodes left behind"
    );
    admin.close().await;
}

both_servers!(
    read_write_interop_with_curator_apache,
    read_write_interop_with_curator_zooraft,
    read_write_interop_with_curator
);

/// A resource guarded by a [`Fence`]: answers `WRITE <token>` with `OK` or `REJECTED`.
async fn fenced_resource(fence: Arc<Fence>) -> (String, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr").to_string();
    let task = tokio::spawn(async move {
        while let Ok((s, _)) = listener.accept().await {
            let fence = fence.clone();
            tokio::spawn(async move {
                let (r, mut w) = s.into_split();
                let mut lines = BufReader::new(r).lines();
                while let Ok(Some(line)) = lines.next_line().await {
                    let token = line
                        .strip_prefix("WRITE ")
                        .and_then(|t| t.trim().parse::<u64>().ok());
                    let answer = match token.map(|t| fence.check(FencingToken::new(t))) {
                        Some(Ok(())) => "OK".to_string(),
                        Some(Err(e)) => format!("REJECTED highest={}", e.highest.get()),
                        None => "BAD".to_string(),
                    };
                    if w.write_all(format!("{answer}\n").as_bytes()).await.is_err() {
                        break;
                    }
                }
            });
        }
    });
    (addr, task)
}

fn signal(pid: u32, sig: libc::c_int) {
    // SAFETY: kill(2) on a child process we spawned.
    unsafe {
        libc::kill(pid as libc::pid_t, sig);
    }
}

async fn paused_holder_is_fenced(kind: ServerKind) {
    let server = server(kind);
    let fence = Arc::new(Fence::new());
    let (resource, resource_task) = fenced_resource(fence.clone()).await;
    let path = "/locks/paused";
    let mut holder = Command::new(contender())
        .arg("hold")
        .arg(server.connect_string())
        .arg(path)
        .arg("2000")
        .arg(&resource)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn holder");
    let pid = holder.id().expect("holder pid");
    let mut out = BufReader::new(holder.stdout.take().expect("stdout")).lines();
    let mut stdin = holder.stdin.take().expect("stdin");
    let line = tokio::time::timeout(Duration::from_secs(30), out.next_line())
        .await
        .expect("holder acquired in time")
        .expect("read")
        .expect("a line");
    let old_token: u64 = line
        .strip_prefix("ACQUIRED ")
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| panic!("unexpected holder output {line:?}"));

    // The holder freezes past its session timeout (a long GC pause, as far as anyone knows).
    signal(pid, libc::SIGSTOP);
    let c = client(&server.connect_string()).await;
    let mutex = Mutex::new(c.clone(), path);
    let guard = tokio::time::timeout(Duration::from_secs(60), mutex.acquire())
        .await
        .expect("a new holder after the old session expired")
        .expect("acquire");
    assert!(guard.fencing_token().get() > old_token);
    fence
        .check(guard.fencing_token())
        .expect("the new holder writes");

    // The old holder wakes up and writes: the fence rejects it; its lost() completes.
    signal(pid, libc::SIGCONT);
    stdin
        .write_all(b"WRITE\n")
        .await
        .expect("tell the holder to write");
    stdin.flush().await.expect("flush");
    let write = tokio::time::timeout(Duration::from_secs(30), out.next_line())
        .await
        .expect("holder wrote")
        .expect("read")
        .expect("a line");
    assert!(
        write.starts_with("WRITE REJECTED"),
        "the stale write was accepted: {write}"
    );
    let lost = tokio::time::timeout(Duration::from_secs(70), out.next_line())
        .await
        .expect("holder reported")
        .expect("read")
        .expect("a line");
    assert!(lost.starts_with("LOST "), "lost() did not complete: {lost}");
    eprintln!("old holder: {write}; {lost}");
    assert_eq!(fence.highest(), Some(guard.fencing_token()));
    let status = tokio::time::timeout(Duration::from_secs(20), holder.wait())
        .await
        .expect("holder exits")
        .expect("wait");
    assert!(status.success());
    guard.release().await.expect("release");
    resource_task.abort();
    c.close().await;
}

both_servers!(
    paused_holder_is_fenced_apache,
    paused_holder_is_fenced_zooraft,
    paused_holder_is_fenced
);
