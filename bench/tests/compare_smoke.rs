//! `zooraft-bench compare` end to end, in seconds: it starts Apache ZooKeeper and zooraft,
//! loads both, prints its table and writes its JSON, and exits 0. This proves in CI that the
//! bench still runs; it asserts no figure (performance is read from real runs, as ratios).

use std::path::Path;
use std::process::Command;
use std::time::Instant;

/// `zooraft-bench compare` with what every smoke run shares: our zooraft, a small heap for
/// ZooKeeper, data and results under `dir`, no pauses.
fn compare(dir: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_zooraft-bench"));
    c.arg("compare")
        .args(["--pause", "0s", "--zk-heap", "256m", "--keys", "20"])
        .arg("--zooraft-bin")
        .arg(zooraft_kit::zooraft_binary())
        .arg("--data-root")
        .arg(dir)
        .arg("--json")
        .arg(dir.join("smoke.json"));
    c
}

#[test]
fn compare_runs_against_both_servers() {
    let dir = tempfile::tempdir().expect("temp dir");
    let json = dir.path().join("smoke.json");
    let started = Instant::now();
    let out = compare(dir.path())
        .args(["-w", "create,get", "--rounds", "1", "-c", "4", "-d", "2"])
        .args([
            "--duration",
            "500ms",
            "--warmup",
            "100ms",
            "--server-warmup",
            "200ms",
        ])
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

/// The rest of `compare`, briefly: 3-member ensembles, the TLS variants, every scenario
/// (failover, sessions, watches, scale with a snapshot under load) and the charts. Small
/// sizes; it proves they run and report, not how fast.
#[test]
fn compare_runs_ensembles_tls_scenarios_and_charts() {
    let dir = tempfile::tempdir().expect("temp dir");
    let json = dir.path().join("smoke.json");
    let charts = dir.path().join("charts");
    let started = Instant::now();
    let out = compare(dir.path())
        .args([
            "-w",
            "get",
            "--ensemble",
            "3",
            "--rounds",
            "1",
            "-c",
            "3",
            "-d",
            "2",
        ])
        .args([
            "--duration",
            "300ms",
            "--warmup",
            "100ms",
            "--server-warmup",
            "0s",
        ])
        .args([
            "--tls",
            "get,connect",
            "--scenarios",
            "all",
            "--failover-writers",
            "2",
        ])
        .args([
            "--sessions",
            "200",
            "--watches",
            "2000",
            "--watch-sessions",
            "10",
        ])
        .args(["--fire", "200", "--znodes", "1000,2000"])
        .args(["--snapshot-load", "1s", "--snap-count", "100"])
        .arg("--charts")
        .arg(&charts)
        .output()
        .expect("run zooraft-bench");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "compare failed:\n{stdout}\n{stderr}");
    println!(
        "compare smoke run (ensembles, TLS, scenarios): {:.1}s",
        started.elapsed().as_secs_f64()
    );
    for expected in [
        "3-member ensembles",
        "| get (TLS) 3×2 |",
        "## TLS",
        "| get (TLS) |",
        "| connect (TLS) |",
        "| connect (TLS, full handshakes) |",
        "- connect (TLS) zooraft: TLS 1.3: ",
        "- connect (TLS) ZooKeeper: TLS 1.2: ",
        "| failover | leader kill -9 to first acknowledged write |",
        "| sessions | memory per session |",
        "| watches | time to fire 200 watches on one change |",
        "| reads | getData on a follower, linearizableReads: throughput |",
        "| scale | restart to serving at 2k |",
        "| scale | write p99 outside snapshots |",
    ] {
        assert!(stdout.contains(expected), "no {expected:?} in:\n{stdout}");
    }
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("the JSON results"))
            .expect("JSON");
    assert_eq!(doc["ensemble"], 3);
    assert_eq!(doc["scenarios"].as_array().map(Vec::len), Some(5));
    // What the TLS connect rows negotiated: the resuming loops resumed on both servers,
    // the full-handshake ones never did.
    let tls_rows = doc["tls"].as_array().expect("tls rows");
    let handshakes = |variant: &str, server: &str, field: &str| {
        tls_rows
            .iter()
            .find(|r| r["tls"]["workload"] == "connect" && r["tls"]["variant"] == variant)
            .and_then(|r| r["tls"][server]["measured"]["tls_handshakes"][field].as_u64())
            .unwrap_or_else(|| panic!("no {variant} {server} {field} in {tls_rows:?}"))
    };
    assert!(handshakes("TLS", "zooraft", "tls13_resumed") > 0);
    assert!(handshakes("TLS", "zookeeper", "tls12_resumed") > 0);
    assert_eq!(
        handshakes("TLS, full handshakes", "zooraft", "tls13_resumed"),
        0
    );
    assert!(handshakes("TLS, full handshakes", "zooraft", "tls13_full") > 0);
    assert_eq!(
        handshakes("TLS, full handshakes", "zookeeper", "tls12_resumed"),
        0
    );
    for chart in [
        "smoke-throughput.svg",
        "smoke-latency-get.svg",
        "smoke-latency-get-TLS.svg",
        "smoke-memory-vs-znodes.svg",
        "smoke-restart-vs-znodes.svg",
    ] {
        let svg = std::fs::read_to_string(charts.join(chart)).expect(chart);
        assert!(svg.starts_with("<svg"), "{chart} is not an SVG");
    }
}
