//! The four-letter words (`ruok`, `isro`, `srvr`, `stat`, `mntr`, `conf`, `envi`, `cons`,
//! `dump`, `wchs`, `wchc`, `wchp`) and the default whitelist, each scenario run against
//! Apache ZooKeeper 3.8 and against zooraft.
//!
//! Monitoring (Nagios checks, exporters, kazoo's `server_version()`) parses these answers,
//! so each word's line shapes and key order are pinned to ZooKeeper's, and the counts that
//! follow the tree (znodes, ephemerals, watches, the last zxid) must move by exactly what the
//! scripted writes, watches and session closes did.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

use zooraft_tests::rt::{eventually, eventually_async, runtime, within};
use zooraft_tests::{ServerKind, TestServer};

use crate::{connect, ephemeral, flw, mntr, mntr_u64, pairs, persistent, WAIT};

fn hex(v: &str) -> i64 {
    let digits = v
        .strip_prefix("0x")
        .unwrap_or_else(|| panic!("{v:?} is not 0x-prefixed"));
    i64::from_str_radix(digits, 16).unwrap_or_else(|_| panic!("{v:?} is not hex"))
}

/// The keys of `srvr`, in ZooKeeper's order (standalone).
const SRVR_KEYS: [&str; 9] = [
    "Zookeeper version",
    "Latency min/avg/max",
    "Received",
    "Sent",
    "Connections",
    "Outstanding",
    "Zxid",
    "Mode",
    "Node count",
];

/// The `mntr` keys every ZooKeeper monitoring check relies on.
const MNTR_KEYS: [&str; 15] = [
    "zk_version",
    "zk_server_state",
    "zk_avg_latency",
    "zk_max_latency",
    "zk_min_latency",
    "zk_packets_received",
    "zk_packets_sent",
    "zk_num_alive_connections",
    "zk_outstanding_requests",
    "zk_znode_count",
    "zk_watch_count",
    "zk_ephemerals_count",
    "zk_approximate_data_size",
    "zk_open_file_descriptor_count",
    "zk_max_file_descriptor_count",
];

/// `conf` keys of a standalone ZooKeeper 3.8, in its order.
const CONF_KEYS: [&str; 12] = [
    "clientPort",
    "secureClientPort",
    "dataDir",
    "dataDirSize",
    "dataLogDir",
    "dataLogSize",
    "tickTime",
    "maxClientCnxns",
    "minSessionTimeout",
    "maxSessionTimeout",
    "clientPortListenBacklog",
    "serverId",
];

/// `cons` per-connection keys of an established session in ZooKeeper 3.8, in its order.
const CONS_KEYS: [&str; 14] = [
    "queued", "recved", "sent", "sid", "lop", "est", "to", "lcxid", "lzxid", "lresp", "llat",
    "minlat", "avglat", "maxlat",
];

/// The version line ZooKeeper prints: `3.8.x-<something>, built on <date>`.
#[track_caller]
fn assert_version(v: &str) {
    assert!(
        v.starts_with("3.8.") && v.contains(", built on "),
        "version {v:?} is not `3.8.x-..., built on ...`"
    );
}

/// ZooKeeper prints the average latency as a Java double rounded to 4 decimals: `0.0`,
/// `1.5`, `3.5806`, `1.0E-4` (never `1.5000`).
#[track_caller]
fn assert_java_avg(v: &str) {
    let mantissa = v.split_once('E').map_or(v, |(m, _)| m);
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let ok = mantissa.split_once('.').is_some_and(|(int, frac)| {
        digits(int) && digits(frac) && frac.len() <= 4 && (frac.len() == 1 || !frac.ends_with('0'))
    });
    assert!(
        ok,
        "average latency {v:?} is not printed as ZooKeeper prints it"
    );
}

/// Parsed `srvr` (or the `srvr` part of `stat`).
#[derive(Debug)]
struct Srvr {
    received: u64,
    sent: u64,
    connections: u64,
    zxid: i64,
    node_count: u64,
}

/// Checks `srvr`'s shape line by line and returns its values.
#[track_caller]
fn parse_srvr(lines: &[&str]) -> Srvr {
    let fields = pairs(lines.iter().copied(), ": ", "srvr");
    let keys: Vec<&str> = fields.iter().map(|(k, _)| *k).collect();
    assert_eq!(keys, SRVR_KEYS, "srvr keys");
    let value = |i: usize| fields[i].1;
    let num = |i: usize| -> u64 {
        value(i)
            .parse()
            .unwrap_or_else(|_| panic!("{} {:?} is not a number", SRVR_KEYS[i], value(i)))
    };
    assert_version(value(0));
    let latency: Vec<&str> = value(1).split('/').collect();
    assert_eq!(latency.len(), 3, "Latency min/avg/max: {}", value(1));
    let min: u64 = latency[0].parse().expect("min latency is a whole number");
    let avg: f64 = latency[1].parse().expect("avg latency is a number");
    let max: u64 = latency[2].parse().expect("max latency is a whole number");
    assert_java_avg(latency[1]);
    assert!(
        min as f64 <= avg + 1.0 && avg <= max as f64 + 1.0,
        "{min}/{avg}/{max}"
    );
    assert_eq!(num(5), 0, "Outstanding on an idle server");
    assert_eq!(value(7), "standalone");
    Srvr {
        received: num(2),
        sent: num(3),
        connections: num(4),
        zxid: hex(value(6)),
        node_count: num(8),
    }
}

/// `stat`: version, `Clients:` with one line per connection, a blank line, then srvr's
/// lines. Returns the clients' lines and the srvr part.
fn parse_stat(text: &str) -> (Vec<String>, Srvr) {
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines.len() > 3, "stat: {text:?}");
    assert_eq!(lines[1], "Clients:", "stat: {text:?}");
    let blank = lines
        .iter()
        .position(|l| l.is_empty())
        .unwrap_or_else(|| panic!("stat has no blank line after the clients: {text:?}"));
    let clients: Vec<String> = lines[2..blank].iter().map(|l| l.to_string()).collect();
    for c in &clients {
        // ` /127.0.0.1:41234[1](queued=0,recved=3,sent=3)`
        let (addr, rest) = c
            .strip_prefix(" /127.0.0.1:")
            .and_then(|r| r.split_once('['))
            .unwrap_or_else(|| panic!("stat client line {c:?}"));
        assert!(addr.parse::<u16>().is_ok(), "port in {c:?}");
        let (_, counters) = rest
            .split_once("](")
            .unwrap_or_else(|| panic!("stat client line {c:?}"));
        let keys: Vec<&str> = counters
            .trim_end_matches(')')
            .split(',')
            .map(|kv| kv.split_once('=').map(|(k, _)| k).unwrap_or(kv))
            .collect();
        assert_eq!(keys, ["queued", "recved", "sent"], "stat client line {c:?}");
    }
    let mut srvr_lines = vec![lines[0]];
    srvr_lines.extend(&lines[blank + 1..]);
    (clients, parse_srvr(&srvr_lines))
}

/// `cons`: one line per connection, then a blank line. Returns session → key/value pairs
/// (connections without a session, like the one asking, are left out).
fn parse_cons(text: &str) -> BTreeMap<i64, Vec<(String, String)>> {
    assert!(
        text.ends_with("\n\n"),
        "cons ends with a blank line: {text:?}"
    );
    let mut out = BTreeMap::new();
    for line in text.lines().filter(|l| !l.is_empty()) {
        let (_, counters) = line
            .strip_prefix(" /127.0.0.1:")
            .and_then(|r| r.split_once("]("))
            .unwrap_or_else(|| panic!("cons line {line:?}"));
        let kv: Vec<(String, String)> = counters
            .trim_end_matches(')')
            .split(',')
            .map(|kv| {
                let (k, v) = kv
                    .split_once('=')
                    .unwrap_or_else(|| panic!("cons field {kv:?} in {line:?}"));
                (k.to_string(), v.to_string())
            })
            .collect();
        if let Some((_, sid)) = kv.iter().find(|(k, _)| k == "sid") {
            out.insert(hex(sid), kv);
        }
    }
    out
}

/// `wchc` (session → paths) or `wchp` (path → sessions): a header line, then its items
/// each on a line starting with a tab; a blank line closes the report.
fn parse_watch_report(text: &str) -> BTreeMap<String, BTreeSet<String>> {
    assert!(
        text.ends_with('\n') && (text == "\n" || text.ends_with("\n\n")),
        "a watch report ends with a blank line: {text:?}"
    );
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut current: Option<String> = None;
    for line in text.lines().filter(|l| !l.is_empty()) {
        if let Some(item) = line.strip_prefix('\t') {
            let head = current
                .clone()
                .unwrap_or_else(|| panic!("item before any header: {text:?}"));
            out.entry(head).or_default().insert(item.to_string());
        } else {
            current = Some(line.to_string());
            out.entry(line.to_string()).or_default();
        }
    }
    out
}

fn sid(session: i64) -> String {
    format!("0x{session:x}")
}

fn set(items: &[&str]) -> BTreeSet<String> {
    items.iter().map(|s| s.to_string()).collect()
}

/// A server with every four-letter word enabled.
fn start_all_words(kind: ServerKind) -> TestServer {
    TestServer::builder(kind)
        .config("4lw.commands.whitelist", "*")
        .start()
}

/// kazoo's `server_version()` parses `envi`; returns what it printed.
fn kazoo_server_version(server: &TestServer) -> String {
    let out = Command::new("timeout")
        .arg("60")
        .arg("python3")
        .arg("-c")
        .arg(
            "import sys\nfrom kazoo.client import KazooClient\n\
             c = KazooClient(hosts=sys.argv[1])\nc.start(timeout=30)\n\
             print(c.server_version())\nc.stop()\nc.close()\n",
        )
        .arg(server.connect_string())
        .output()
        .expect("run python3 (with kazoo: `pip install kazoo`)");
    assert!(
        out.status.success(),
        "kazoo server_version failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// ruok, isro, srvr, stat, mntr, conf, envi on a fresh server, then after a scripted set
/// of writes: the counts ZooKeeper reports move by exactly what the writes did.
fn four_letter_words(kind: ServerKind) {
    let server = start_all_words(kind);
    assert_eq!(flw(&server, "ruok"), "imok");
    assert_eq!(flw(&server, "isro"), "rw");

    // A fresh server: /, /zookeeper, /zookeeper/quota, /zookeeper/config, as ZooKeeper counts.
    let srvr_text = flw(&server, "srvr");
    assert!(srvr_text.ends_with('\n'), "srvr: {srvr_text:?}");
    let fresh = parse_srvr(&srvr_text.lines().collect::<Vec<_>>());
    assert_eq!(fresh.node_count, 5, "Node count on a fresh server");
    assert!(
        srvr_text.contains("\nLatency min/avg/max: 0/0.0/0\n"),
        "no request yet: {srvr_text}"
    );

    let m0 = mntr(&server);
    for key in MNTR_KEYS {
        assert!(m0.contains_key(key), "mntr lacks {key}: {m0:#?}");
    }
    assert_version(&m0["zk_version"]);
    assert_eq!(m0["zk_server_state"], "standalone");
    assert_eq!(m0["zk_avg_latency"], "0.0");
    for key in [
        "zk_max_latency",
        "zk_min_latency",
        "zk_packets_received",
        "zk_packets_sent",
        "zk_num_alive_connections",
        "zk_outstanding_requests",
    ] {
        mntr_u64(&m0, key);
    }
    assert_eq!(mntr_u64(&m0, "zk_znode_count"), 5);
    assert_eq!(mntr_u64(&m0, "zk_watch_count"), 0);
    assert_eq!(mntr_u64(&m0, "zk_ephemerals_count"), 0);
    let open_fds = mntr_u64(&m0, "zk_open_file_descriptor_count");
    let max_fds = mntr_u64(&m0, "zk_max_file_descriptor_count");
    assert!(
        open_fds > 0 && open_fds <= max_fds,
        "fds {open_fds}/{max_fds}"
    );
    let size0 = mntr_u64(&m0, "zk_approximate_data_size");

    // conf: the same keys as a standalone ZooKeeper, with this server's settings.
    let conf = flw(&server, "conf");
    let conf_kv = pairs(conf.lines(), "=", "conf");
    let keys: Vec<&str> = conf_kv.iter().map(|(k, _)| *k).collect();
    assert_eq!(keys, CONF_KEYS, "conf keys: {conf}");
    let conf_map: BTreeMap<&str, &str> = conf_kv.into_iter().collect();
    assert_eq!(conf_map["clientPort"], server.port().to_string());
    assert_eq!(conf_map["tickTime"], "2000");
    assert_eq!(conf_map["minSessionTimeout"], "4000");
    assert_eq!(conf_map["maxSessionTimeout"], "40000");
    assert_eq!(conf_map["serverId"], "0");
    assert!(
        Path::new(conf_map["dataDir"]).starts_with(server.data_dir()),
        "conf dataDir {} is under {}",
        conf_map["dataDir"],
        server.data_dir().display()
    );

    // envi: `Environment:` then key=value lines; kazoo reads the version from it.
    let envi = flw(&server, "envi");
    let mut envi_lines = envi.lines();
    assert_eq!(envi_lines.next(), Some("Environment:"));
    let envi_map: BTreeMap<&str, &str> = pairs(envi_lines, "=", "envi").into_iter().collect();
    assert_version(envi_map["zookeeper.version"]);
    for key in ["host.name", "os.name", "os.arch", "user.dir"] {
        assert!(envi_map.contains_key(key), "envi lacks {key}: {envi}");
    }
    assert_eq!(kazoo_server_version(&server), "(3, 8, 0)");

    // Scripted writes: 4 persistent znodes (with data), 2 ephemerals from two sessions.
    let rt = runtime();
    let hosts = server.connect_string();
    let (a, b) = rt.block_on(async { (connect(&hosts).await, connect(&hosts).await) });
    let writes: [(&str, &[u8]); 4] = [
        ("/op", b"hello"),
        ("/op/a", b"alpha"),
        ("/op/b", b""),
        ("/op/c", b"0123456789"),
    ];
    let last_zxid = rt.block_on(async {
        for (path, data) in writes {
            within("create", WAIT, a.create(path, data, &persistent()))
                .await
                .expect("create");
        }
        within("create", WAIT, a.create("/op/e1", b"e", &ephemeral()))
            .await
            .expect("ephemeral of a");
        let (stat, _) = within("create", WAIT, b.create("/op/e2", b"ee", &ephemeral()))
            .await
            .expect("ephemeral of b");
        stat.czxid
    });
    let m1 = mntr(&server);
    assert_eq!(mntr_u64(&m1, "zk_znode_count"), 11);
    assert_eq!(mntr_u64(&m1, "zk_ephemerals_count"), 2);
    let added: u64 = writes
        .iter()
        .map(|(p, d)| (p.len() + d.len()) as u64)
        .sum::<u64>()
        + ("/op/e1".len() + 1 + "/op/e2".len() + 2) as u64;
    assert_eq!(
        mntr_u64(&m1, "zk_approximate_data_size") - size0,
        added,
        "zk_approximate_data_size grows by path and data lengths"
    );
    assert!(
        mntr_u64(&m1, "zk_packets_received") >= mntr_u64(&m0, "zk_packets_received") + 6,
        "zk_packets_received counts the creates"
    );
    assert!(mntr_u64(&m1, "zk_packets_sent") >= mntr_u64(&m0, "zk_packets_sent") + 6);
    assert!(mntr_u64(&m1, "zk_num_alive_connections") >= 2);
    assert_java_avg(&m1["zk_avg_latency"]);

    let after = parse_srvr(&flw(&server, "srvr").lines().collect::<Vec<_>>());
    assert_eq!(after.node_count, 11);
    assert_eq!(after.zxid, last_zxid, "srvr Zxid is the last write's zxid");
    assert!(after.received >= fresh.received + 6 && after.sent >= fresh.sent + 6);
    // The sessions' connections (ZooKeeper also counts the one asking).
    assert!(
        (2..=3).contains(&after.connections),
        "Connections: {}",
        after.connections
    );

    // stat: one Clients line per connection, then srvr's figures.
    let (clients, stat) = parse_stat(&flw(&server, "stat"));
    assert!(
        (2..=3).contains(&clients.len()),
        "stat lists the two sessions' connections: {clients:#?}"
    );
    assert_eq!(stat.node_count, 11);
    assert_eq!(stat.zxid, last_zxid);

    rt.block_on(async {
        drop(b);
        // b's ephemeral goes with its session.
        eventually_async("b's ephemeral to go with its session", WAIT, || async {
            a.check_stat("/op/e2")
                .await
                .expect("exists")
                .is_none()
                .then_some(())
        })
        .await;
    });
    let m2 = mntr(&server);
    assert_eq!(mntr_u64(&m2, "zk_znode_count"), 10);
    assert_eq!(mntr_u64(&m2, "zk_ephemerals_count"), 1);
    drop(a);
}

zooraft_tests::against_both!(
    four_letter_words_apache,
    four_letter_words_zooraft,
    four_letter_words
);

/// cons and dump list each session, its connection figures and its ephemerals.
fn four_letter_sessions(kind: ServerKind) {
    let server = start_all_words(kind);
    let rt = runtime();
    let hosts = server.connect_string();
    let (a, b) = rt.block_on(async { (connect(&hosts).await, connect(&hosts).await) });
    let (sa, sb) = (a.session_id().0, b.session_id().0);
    let last = rt.block_on(async {
        within("create", WAIT, a.create("/s", b"", &persistent()))
            .await
            .expect("create");
        within("create", WAIT, a.create("/s/a1", b"", &ephemeral()))
            .await
            .expect("create");
        within("create", WAIT, a.create("/s/a2", b"", &ephemeral()))
            .await
            .expect("create");
        let (stat, _) = within("create", WAIT, b.create("/s/b1", b"", &ephemeral()))
            .await
            .expect("create");
        for _ in 0..3 {
            within("get", WAIT, b.get_data("/s")).await.expect("get");
        }
        stat.czxid
    });

    // dump: sessions, then the ephemerals of each session, then the connections.
    let dump = flw(&server, "dump");
    let lines: Vec<&str> = dump.lines().collect();
    assert_eq!(lines[0], "SessionTracker dump:", "{dump}");
    let eph_at = lines
        .iter()
        .position(|l| *l == "ephemeral nodes dump:")
        .unwrap_or_else(|| panic!("no `ephemeral nodes dump:` in {dump}"));
    let conn_at = lines
        .iter()
        .position(|l| *l == "Connections dump:")
        .unwrap_or_else(|| panic!("no `Connections dump:` in {dump}"));
    assert!(eph_at < conn_at);
    let sessions_part = lines[1..eph_at].join("\n");
    for s in [sa, sb] {
        assert!(
            sessions_part.contains(&sid(s)),
            "dump's session section lists {}: {dump}",
            sid(s)
        );
    }
    assert_eq!(lines[eph_at + 1], "Sessions with Ephemerals (2):", "{dump}");
    let report = parse_watch_report(&format!("{}\n\n", lines[eph_at + 2..conn_at].join("\n")));
    let expected: BTreeMap<String, BTreeSet<String>> = BTreeMap::from([
        (format!("{}:", sid(sa)), set(&["/s/a1", "/s/a2"])),
        (format!("{}:", sid(sb)), set(&["/s/b1"])),
    ]);
    assert_eq!(report, expected, "ephemerals by session: {dump}");
    assert!(
        lines[conn_at + 1].starts_with("Connections Sets ("),
        "{dump}"
    );

    let cons = flw(&server, "cons");
    let conns = parse_cons(&cons);
    assert_eq!(
        conns.keys().copied().collect::<BTreeSet<_>>(),
        BTreeSet::from([sa, sb]),
        "cons lists both sessions: {cons}"
    );
    for (session, kv) in &conns {
        let get = |k: &str| kv.iter().find(|(key, _)| key == k).map(|(_, v)| v.as_str());
        assert_eq!(get("queued"), Some("0"));
        let recved: u64 = get("recved").and_then(|v| v.parse().ok()).expect("recved");
        let sent: u64 = get("sent").and_then(|v| v.parse().ok()).expect("sent");
        assert!(
            recved >= 2 && sent >= 2,
            "{} recved {recved} sent {sent}",
            sid(*session)
        );
        if *session == sb {
            assert_eq!(get("lop"), Some("GETD"), "b's last operation was a getData");
            assert_eq!(get("lzxid").map(hex), Some(last), "b's last zxid");
        }
    }
    // The figures above first, so a missing key does not hide them.
    for (session, kv) in &conns {
        let keys: Vec<&str> = kv.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, CONS_KEYS, "cons keys for {}: {cons}", sid(*session));
        assert!(
            kv.contains(&("to".to_string(), "10000".to_string())),
            "the negotiated session timeout"
        );
    }
    drop((a, b));
}

zooraft_tests::against_both!(
    four_letter_sessions_apache,
    four_letter_sessions_zooraft,
    four_letter_sessions
);

/// wchs, wchc, wchp and zk_watch_count after the same watches, and after they fire and
/// after a session with watches goes. As in ZooKeeper, the wch* words report the data
/// watches (getData and exists) and zk_watch_count counts child watches too.
fn four_letter_watches(kind: ServerKind) {
    let server = start_all_words(kind);
    assert_eq!(
        flw(&server, "wchs"),
        "0 connections watching 0 paths\nTotal watches:0\n"
    );
    assert_eq!(flw(&server, "wchc"), "\n");
    assert_eq!(flw(&server, "wchp"), "\n");

    let rt = runtime();
    let hosts = server.connect_string();
    let (a, b) = rt.block_on(async { (connect(&hosts).await, connect(&hosts).await) });
    let (sa, sb) = (sid(a.session_id().0), sid(b.session_id().0));
    let (a_data, a_missing, a_children, b_data_a, b_data_b) = rt.block_on(async {
        for p in ["/w", "/w/a", "/w/b"] {
            within("create", WAIT, a.create(p, b"x", &persistent()))
                .await
                .expect("create");
        }
        let (_, _, a_data) = within("watch", WAIT, a.get_and_watch_data("/w/a"))
            .await
            .expect("getData watch");
        let (none, a_missing) = within("watch", WAIT, a.check_and_watch_stat("/w/missing"))
            .await
            .expect("exists watch");
        assert!(none.is_none());
        let (_, _, a_children) = within("watch", WAIT, a.get_and_watch_children("/w"))
            .await
            .expect("child watch");
        let (_, _, b_data_a) = within("watch", WAIT, b.get_and_watch_data("/w/a"))
            .await
            .expect("getData watch");
        let (_, _, b_data_b) = within("watch", WAIT, b.get_and_watch_data("/w/b"))
            .await
            .expect("getData watch");
        (a_data, a_missing, a_children, b_data_a, b_data_b)
    });

    assert_eq!(mntr_u64(&mntr(&server), "zk_watch_count"), 5);
    assert_eq!(
        flw(&server, "wchs"),
        "2 connections watching 3 paths\nTotal watches:4\n"
    );
    let wchc = flw(&server, "wchc");
    assert_eq!(
        parse_watch_report(&wchc),
        BTreeMap::from([
            (sa.clone(), set(&["/w/a", "/w/missing"])),
            (sb.clone(), set(&["/w/a", "/w/b"])),
        ]),
        "wchc: {wchc}"
    );
    let wchp = flw(&server, "wchp");
    assert_eq!(
        parse_watch_report(&wchp),
        BTreeMap::from([
            ("/w/a".to_string(), set(&[&sa, &sb])),
            ("/w/b".to_string(), set(&[&sb])),
            ("/w/missing".to_string(), set(&[&sa])),
        ]),
        "wchp: {wchp}"
    );

    // Changing /w/a fires both sessions' data watches on it; they are gone after.
    rt.block_on(async {
        within("set", WAIT, b.set_data("/w/a", b"y", None))
            .await
            .expect("set");
        within("a's event", WAIT, a_data.changed()).await;
        within("b's event", WAIT, b_data_a.changed()).await;
    });
    let watch_count = |n: u64| {
        eventually(&format!("zk_watch_count to be {n}"), WAIT, || {
            (mntr_u64(&mntr(&server), "zk_watch_count") == n).then_some(())
        })
    };
    watch_count(3);
    assert_eq!(
        flw(&server, "wchs"),
        "2 connections watching 2 paths\nTotal watches:2\n"
    );
    assert_eq!(
        parse_watch_report(&flw(&server, "wchp")),
        BTreeMap::from([
            ("/w/b".to_string(), set(&[&sb])),
            ("/w/missing".to_string(), set(&[&sa])),
        ])
    );

    // b's session ends: its watches go with it.
    // (The client first: a watcher dropped while its client lives would remove its watch.)
    rt.block_on(async { drop(b) });
    drop(b_data_b);
    watch_count(2);
    assert_eq!(
        flw(&server, "wchs"),
        "1 connections watching 1 paths\nTotal watches:1\n"
    );
    assert_eq!(
        parse_watch_report(&flw(&server, "wchc")),
        BTreeMap::from([(sa.clone(), set(&["/w/missing"]))])
    );
    drop((a_missing, a_children, a));
}

zooraft_tests::against_both!(
    four_letter_watches_apache,
    four_letter_watches_zooraft,
    four_letter_watches
);

/// ZooKeeper 3.8's default whitelist (srvr, ruok, mntr) refuses the other words with a
/// fixed sentence; an unknown word gets no answer at all.
fn four_letter_whitelist(kind: ServerKind) {
    let mut builder = TestServer::builder(kind);
    if kind == ServerKind::Apache {
        // The harness enables every word for Apache; a later line wins.
        builder = builder.config("4lw.commands.whitelist", "srvr, ruok, mntr");
    }
    let server = builder.start();
    assert_eq!(flw(&server, "ruok"), "imok");
    assert!(flw(&server, "srvr").contains("Mode: standalone"));
    assert!(flw(&server, "mntr").contains("zk_server_state\tstandalone"));
    for word in [
        "stat", "conf", "cons", "envi", "wchs", "wchc", "wchp", "dump", "isro", "crst", "srst",
        "dirs",
    ] {
        assert_eq!(
            flw(&server, word),
            format!("{word} is not executed because it is not in the whitelist.\n"),
            "{word} with the default whitelist"
        );
    }
    assert_eq!(flw(&server, "abcd"), "", "an unknown word");
}

zooraft_tests::against_both!(
    four_letter_whitelist_apache,
    four_letter_whitelist_zooraft,
    four_letter_whitelist
);
