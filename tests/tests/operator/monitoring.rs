//! ZooKeeper's monitoring keys beyond the basics: the `mntr` figures exporters and
//! dashboards chart (request latency summaries with percentiles, auth failures, bytes,
//! watch fire counts, fsync and start-up times), checked for presence, for the shape of
//! every summary (`zk_avg_`, `zk_min_`, `zk_max_`, `zk_cnt_`, `zk_sum_`, percentiles in
//! order), and for moving by what a scripted client did; and the `envi` keys. Each scenario
//! runs against Apache ZooKeeper 3.8 and against zooraft.

use std::collections::BTreeMap;

use zooraft_tests::rt::{runtime, within};
use zooraft_tests::{ServerKind, TestServer};

use crate::{connect, flw, mntr, mntr_u64, pairs, persistent, WAIT};

/// Plain keys of ZooKeeper 3.8's standalone `mntr` that zooraft reports too.
const PLAIN_KEYS: [&str; 36] = [
    "zk_version",
    "zk_server_state",
    "zk_ephemerals_count",
    "zk_num_alive_connections",
    "zk_avg_latency",
    "zk_outstanding_requests",
    "zk_znode_count",
    "zk_global_sessions",
    "zk_last_client_response_size",
    "zk_packets_sent",
    "zk_packets_received",
    "zk_max_client_response_size",
    "zk_watch_count",
    "zk_auth_failed_count",
    "zk_min_latency",
    "zk_max_file_descriptor_count",
    "zk_approximate_data_size",
    "zk_open_file_descriptor_count",
    "zk_local_sessions",
    "zk_uptime",
    "zk_max_latency",
    "zk_min_client_response_size",
    "zk_proposal_count",
    "zk_watch_bytes",
    "zk_connection_rejected",
    "zk_cnxn_closed_without_zk_server_running",
    "zk_looking_count",
    "zk_bytes_received_count",
    "zk_learner_proposal_received_count",
    "zk_learner_commit_received_count",
    "zk_connection_request_count",
    "zk_response_bytes",
    "zk_snap_count",
    "zk_unsuccessful_handshake",
    "zk_commit_count",
    "zk_stale_sessions_expired",
];

/// Summaries (avg/min/max/cnt/sum) of ZooKeeper 3.8 that zooraft reports too.
const SUMMARIES: [&str; 12] = [
    "node_created_watch_count",
    "node_deleted_watch_count",
    "node_changed_watch_count",
    "node_children_watch_count",
    "leader_unavailable_time",
    "unavailable_time",
    "startup_txns_load_time",
    "startup_txns_loaded",
    "fsynctime",
    "snapshottime",
    "dbinittime",
    "election_time",
];

/// Summaries that also carry percentiles.
const PERCENTILE_SUMMARIES: [&str; 4] = [
    "updatelatency",
    "readlatency",
    "quorum_ack_latency",
    "proposal_latency",
];

/// A summary's five figures (and percentiles when it has them), checked for consistency.
#[derive(Debug, Clone, Copy)]
struct Figures {
    cnt: u64,
    sum: u64,
}

/// `racy`: the server reads a summary's figures one at a time while samples are added
/// (Apache ZooKeeper's `AvgMinMaxCounter` computes its average from its own reading of the
/// count and the sum), so the average may be one sample behind or ahead of `sum / cnt`.
fn summary(m: &BTreeMap<String, String>, name: &str, percentiles: bool, racy: bool) -> Figures {
    let get = |k: &str| mntr_u64(m, &format!("zk_{k}_{name}"));
    let avg: f64 = m[&format!("zk_avg_{name}")]
        .parse()
        .unwrap_or_else(|_| panic!("zk_avg_{name} is not a number"));
    let (min, max, cnt, sum) = (get("min"), get("max"), get("cnt"), get("sum"));
    assert!(min <= max, "{name}: min {min} > max {max}");
    if cnt == 0 {
        assert_eq!((sum, max, avg), (0, 0, 0.0), "{name}: empty summary");
    } else {
        let expected = sum as f64 / cnt as f64;
        // One sample (at most `max`) more or less moves the average by at most this.
        let one_sample = if racy && cnt > 1 {
            max as f64 / (cnt - 1) as f64
        } else {
            0.0
        };
        assert!(
            (avg - expected).abs() <= 0.001 + expected * 1e-4 + one_sample,
            "{name}: avg {avg} for sum {sum} / cnt {cnt}"
        );
        assert!(
            min as f64 <= avg + 1e-9 && avg <= max as f64 + 1e-9,
            "{name}: avg {avg} outside [{min}, {max}]"
        );
    }
    if percentiles {
        let q: Vec<u64> = ["p50", "p95", "p99", "p999"]
            .iter()
            .map(|p| get(p))
            .collect();
        assert!(
            q.windows(2).all(|w| w[0] <= w[1]),
            "{name}: percentiles out of order {q:?}"
        );
        assert!(q[3] <= max, "{name}: p999 {} above max {max}", q[3]);
    }
    Figures { cnt, sum }
}

fn all_summaries(m: &BTreeMap<String, String>, racy: bool) -> BTreeMap<&'static str, Figures> {
    let mut out = BTreeMap::new();
    for name in SUMMARIES {
        out.insert(name, summary(m, name, false, racy));
    }
    for name in PERCENTILE_SUMMARIES {
        out.insert(name, summary(m, name, true, racy));
    }
    out
}

fn mntr_figures(kind: ServerKind) {
    let server = TestServer::builder(kind)
        .config("4lw.commands.whitelist", "*")
        .start();
    let m0 = mntr(&server);
    for key in PLAIN_KEYS {
        assert!(m0.contains_key(key), "mntr lacks {key}");
    }
    // (A test of zooraft's figures; Apache ZooKeeper's are checked with room for its race.)
    let racy = kind == ServerKind::Apache;
    let s0 = all_summaries(&m0, racy);
    assert_eq!(s0["dbinittime"].cnt, 1, "the database was loaded once");
    const READS: u64 = 20;
    const WRITES: u64 = 5;
    let rt = runtime();
    let hosts = server.connect_string();
    rt.block_on(async {
        let c = connect(&hosts).await;
        within("create", WAIT, c.create("/m", b"v", &persistent()))
            .await
            .expect("create /m");
        for _ in 0..READS {
            within("get", WAIT, c.get_data("/m")).await.expect("get");
        }
        for i in 0..WRITES {
            within(
                "set",
                WAIT,
                c.set_data("/m", format!("{i}").as_bytes(), None),
            )
            .await
            .expect("set");
        }
        // One watch of each kind, each fired once by one event.
        let (_, _, changed) = within("watch", WAIT, c.get_and_watch_data("/m"))
            .await
            .expect("data watch");
        let (_, _, children) = within("watch", WAIT, c.get_and_watch_children("/m"))
            .await
            .expect("child watch");
        let (_, created) = within("watch", WAIT, c.check_and_watch_stat("/new"))
            .await
            .expect("exists watch");
        within("set", WAIT, c.set_data("/m", b"x", None))
            .await
            .expect("set");
        within("changed", WAIT, changed.changed()).await;
        within("create child", WAIT, c.create("/m/c", b"", &persistent()))
            .await
            .expect("create child");
        within("children", WAIT, children.changed()).await;
        within("create", WAIT, c.create("/new", b"", &persistent()))
            .await
            .expect("create /new");
        within("created", WAIT, created.changed()).await;
        let (_, _, deleted) = within("watch", WAIT, c.get_and_watch_data("/new"))
            .await
            .expect("data watch");
        within("delete", WAIT, c.delete("/new", None))
            .await
            .expect("delete");
        within("deleted", WAIT, deleted.changed()).await;
        // An auth packet of an unknown scheme: AUTHFAILED, and the connection closes.
        let bad = connect(&hosts).await;
        let refused = within("auth", WAIT, bad.auth("nosuchscheme", b"x")).await;
        assert!(refused.is_err(), "an unknown scheme is refused");
    });
    let m1 = mntr(&server);
    let s1 = all_summaries(&m1, racy);
    let grew = |k: &str| mntr_u64(&m1, k) - mntr_u64(&m0, k);
    // ZooKeeper counts refused certificates and SASL exchanges there, not an auth packet.
    assert_eq!(
        grew("zk_auth_failed_count"),
        0,
        "an auth packet is not counted"
    );
    assert!(grew("zk_connection_request_count") >= 2, "two handshakes");
    assert!(grew("zk_bytes_received_count") > 0);
    assert!(grew("zk_watch_bytes") > 0, "notifications were sent");
    assert!(mntr_u64(&m1, "zk_max_client_response_size") > 0);
    let delta = |name: &str| {
        let (a, b) = (s0[name], s1[name]);
        (b.cnt - a.cnt, b.sum - a.sum)
    };
    assert!(
        delta("readlatency").0 >= READS,
        "reads: {:?}",
        delta("readlatency")
    );
    assert!(
        delta("updatelatency").0 >= WRITES + 5,
        "writes: {:?}",
        delta("updatelatency")
    );
    assert!(delta("fsynctime").0 >= 1, "writes were fsynced");
    if kind == ServerKind::Zooraft {
        // zooraft's memory figures: the process, and RocksDB's memtables holding the writes
        // (sampled by the Raft thread about every second).
        assert!(mntr_u64(&m1, "zk_resident_memory_bytes") > 1 << 20);
        zooraft_tests::rt::eventually("RocksDB's memtables to be counted", WAIT, || {
            (mntr_u64(&mntr(&server), "zk_rocksdb_memtable_bytes") > 0).then_some(())
        });
    }
    // Exactly one watch fired by each event.
    assert_eq!(delta("node_changed_watch_count"), (1, 1));
    assert_eq!(delta("node_children_watch_count"), (1, 1));
    assert_eq!(delta("node_created_watch_count"), (1, 1));
    assert_eq!(delta("node_deleted_watch_count"), (1, 1));
}

zooraft_tests::against_both!(mntr_figures_apache, mntr_figures_zooraft, mntr_figures);

/// `srst` resets the summaries and counters of events (ZooKeeper resets its metrics too).
fn srst_resets_figures(kind: ServerKind) {
    let server = TestServer::builder(kind)
        .config("4lw.commands.whitelist", "*")
        .start();
    let rt = runtime();
    rt.block_on(async {
        let c = connect(&server.connect_string()).await;
        for _ in 0..3 {
            within("exists", WAIT, c.check_stat("/"))
                .await
                .expect("exists");
        }
    });
    let racy = kind == ServerKind::Apache;
    assert!(summary(&mntr(&server), "readlatency", true, racy).cnt >= 3);
    assert_eq!(flw(&server, "srst"), "Server stats reset.\n");
    let m = mntr(&server);
    assert_eq!(summary(&m, "readlatency", true, racy).cnt, 0);
    // ZooKeeper counts the four-letter word that asks.
    assert!(mntr_u64(&m, "zk_packets_received") <= 1);
}

zooraft_tests::against_both!(srst_resets_apache, srst_resets_zooraft, srst_resets_figures);

fn envi_map(server: &TestServer) -> BTreeMap<String, String> {
    let text = flw(server, "envi");
    assert!(text.starts_with("Environment:\n"), "{text}");
    pairs(text.lines().skip(1), "=", "envi")
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// `envi` has ZooKeeper's process keys, with the same values for what the two processes
/// share (the machine, the user).
#[test]
fn envi_keys_match_zookeeper() {
    let zk = TestServer::builder(ServerKind::Apache)
        .config("4lw.commands.whitelist", "*")
        .start();
    let ours = TestServer::builder(ServerKind::Zooraft)
        .config("4lw.commands.whitelist", "*")
        .start();
    let (a, b) = (envi_map(&zk), envi_map(&ours));
    for key in [
        "zookeeper.version",
        "host.name",
        "os.name",
        "os.arch",
        "os.version",
        "user.name",
        "user.home",
        "user.dir",
        "os.memory.free",
        "os.memory.max",
        "os.memory.total",
    ] {
        assert!(a.contains_key(key), "ZooKeeper's envi lacks {key}: {a:#?}");
        assert!(b.contains_key(key), "zooraft's envi lacks {key}: {b:#?}");
    }
    for key in [
        "host.name",
        "os.name",
        "os.arch",
        "os.version",
        "user.name",
        "user.home",
    ] {
        assert_eq!(a[key], b[key], "{key}");
    }
    for key in ["os.memory.free", "os.memory.max", "os.memory.total"] {
        let mb = b[key]
            .strip_suffix("MB")
            .and_then(|v| v.parse::<u64>().ok());
        assert!(mb.is_some(), "{key}={} is not in MB", b[key]);
    }
}
