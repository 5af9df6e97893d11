//! `zooraft-bench locks` end to end, briefly: every system (zooraft standalone and 3
//! members, Apache ZooKeeper, Redis, Redlock, etcd), few contenders, short runs, every
//! fault. It checks the output's shape, and the two things the comparison exists to show:
//! zooraft never lets two holders in outside a pause, and never has a stale write accepted
//! when the resource checks its token (leader killed included); a paused Redis holder,
//! whose random token cannot be checked, overlaps with the next holder and has its stale
//! write accepted; a Redis failover whose replica lags loses the holder's key and lets a
//! second holder in. Figures are printed, not asserted.
//!
//! Needs Debian's `redis-server`, `etcd-server` and `zookeeper` packages (.ci/run installs
//! them) and the workspace's zooraft binary.

use std::process::Command;
use std::time::Instant;

use serde_json::Value;

fn runs_of<'a>(doc: &'a Value, system: &str) -> Vec<&'a Value> {
    doc["runs"]
        .as_array()
        .expect("a runs array")
        .iter()
        .filter(|r| r["system"] == system)
        .collect()
}

fn count(run: &Value, field: &str) -> u64 {
    run["tally"][field]
        .as_u64()
        .unwrap_or_else(|| panic!("no tally.{field} in {run}"))
}

#[test]
fn locks_compares_every_system_and_counts_what_faults_break() {
    let dir = tempfile::tempdir().expect("temp dir");
    let json = dir.path().join("locks.json");
    let charts = dir.path().join("charts");
    let started = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_zooraft-bench"))
        .arg("locks")
        .args(["-c", "3", "--fault-contenders", "3", "--duration", "600ms"])
        .args(["--ttl", "1s", "--zk-heap", "256m"])
        .arg("--zooraft-bin")
        .arg(zooraft_kit::zooraft_binary())
        .arg("--data-root")
        .arg(dir.path())
        .arg("--json")
        .arg(&json)
        .arg("--charts")
        .arg(&charts)
        .output()
        .expect("run zooraft-bench locks");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{stdout}");
    println!("locks smoke run: {:.1}s", started.elapsed().as_secs_f64());
    assert!(out.status.success(), "locks failed:\n{stdout}\n{stderr}");
    for heading in ["safety under faults", "| system | token | contenders |"] {
        assert!(stdout.contains(heading), "no {heading:?} in:\n{stdout}");
    }
    assert!(
        charts.join("locks-compared.svg").exists(),
        "no chart written"
    );

    let doc: Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("the JSON results"))
            .expect("JSON");
    for system in [
        "zooraft",
        "zooraft (3 members)",
        "zookeeper 3.8",
        "redis",
        "redlock (3 masters)",
        "etcd 3.4",
        "redis (master + replica)",
        "redis (master + replica 500 ms behind)",
    ] {
        let runs = runs_of(&doc, system);
        assert!(!runs.is_empty(), "no run of {system} in the JSON");
        for r in runs.iter().filter(|r| r["fault"] == "none") {
            assert!(
                count(r, "entries") > 0,
                "{system} never granted the lock: {r}"
            );
            assert_eq!(
                count(r, "overlaps"),
                0,
                "{system} overlapped without a fault: {r}"
            );
        }
    }

    // zooraft: with its token checked, no stale write is ever accepted, paused or not;
    // with its leader killed, not even an overlap.
    for system in ["zooraft", "zooraft (3 members)"] {
        for r in runs_of(&doc, system)
            .iter()
            .filter(|r| r["check_tokens"] == true)
        {
            assert_eq!(count(r, "stale_accepted"), 0, "{system}: {r}");
        }
    }
    let kill: Vec<_> = runs_of(&doc, "zooraft (3 members)")
        .into_iter()
        .filter(|r| {
            r["fault"]
                .as_str()
                .is_some_and(|f| f.contains("leader killed"))
        })
        .collect();
    assert_eq!(kill.len(), 1, "no leader-kill run");
    assert_eq!(count(kill[0], "overlaps"), 0, "{}", kill[0]);
    assert!(
        kill[0]["notes"].to_string().contains("killed the leader"),
        "the leader was not killed: {}",
        kill[0]
    );

    // Redis: a paused holder loses the lock to the next one and its write still lands.
    let paused: Vec<_> = runs_of(&doc, "redis")
        .into_iter()
        .filter(|r| r["fault"].as_str().is_some_and(|f| f.contains("paused")))
        .collect();
    assert_eq!(
        paused.len(),
        1,
        "one Redis pause run (its token cannot be checked)"
    );
    assert!(count(paused[0], "overlaps") >= 1, "{}", paused[0]);
    assert!(count(paused[0], "stale_accepted") >= 1, "{}", paused[0]);

    // Redis failover with the replica 500 ms behind: the holder's key dies with the master
    // (the replica has none, or an older holder's that expires sooner), and another
    // contender gets the lock on the promoted replica while the holder still holds.
    let lagged = runs_of(&doc, "redis (master + replica 500 ms behind)");
    assert_eq!(lagged.len(), 1, "one lagged failover run");
    assert!(
        lagged[0]["notes"]
            .to_string()
            .contains("promoted the replica"),
        "no failover: {}",
        lagged[0]
    );
    assert!(count(lagged[0], "overlaps") >= 1, "{}", lagged[0]);
}
