//! `zooraft-bench compare` end to end, in seconds: it starts Apache ZooKeeper and zooraft,
//! loads both, prints its table and writes its JSON, and exits 0. This proves in CI that the
//! bench still runs; it asserts no figure (performance is read from real runs, as ratios).

use std::process::Command;
use std::time::Instant;

#[test]
fn compare_runs_against_both_servers() {
    let dir = tempfile::tempdir().expect("temp dir");
    let json = dir.path().join("smoke.json");
    let started = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_zooraft-bench"))
        .args(["compare", "-w", "create,get", "--rounds", "1"])
        .args([
            "--duration",
            "500ms",
            "--warmup",
            "100ms",
            "--server-warmup",
            "200ms",
        ])
        .args([
            "--pause",
            "0s",
            "-c",
            "4",
            "-d",
            "2",
            "--keys",
            "20",
            "--zk-heap",
            "256m",
        ])
        .arg("--zooraft-bin")
        .arg(harness::server::zooraft_binary())
        .arg("--data-root")
        .arg(dir.path())
        .arg("--json")
        .arg(&json)
        .output()
        .expect("run zooraft-bench");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "compare failed:\n{stdout}\n{stderr}");
    println!("compare smoke run: {:.1}s", started.elapsed().as_secs_f64());
    for row in ["| create |", "| get |"] {
        assert!(stdout.contains(row), "no {row} row in:\n{stdout}");
    }
    let text = std::fs::read_to_string(&json).expect("the JSON results");
    for server in ["zookeeper", "zooraft"] {
        assert!(text.contains(server), "no {server} in the JSON results");
    }
}
