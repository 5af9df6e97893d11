//! What an operator sees, end to end: the four-letter words (compared with Apache ZooKeeper
//! 3.8 after the same scripted actions), the Prometheus endpoint, ACLs through zkCli.sh,
//! and the `zooraft` command line (config file, flags, signals, a data directory it cannot
//! use).
//!
//! Monitoring scripts, exporters and runbooks written for ZooKeeper parse these outputs, so
//! the checks pin line shapes, keys and the numbers that must move with the tree (znode,
//! ephemeral and watch counts), not values that differ by implementation (packet counts,
//! latencies, file descriptors). Scenarios that ZooKeeper also has run against both kinds.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use harness::rt::runtime;
use harness::{free_port, zooraft_binary, ServerKind, TestServer};
use zookeeper_client as zc;

/// Bound for any single client operation or condition to come true.
const WAIT: Duration = Duration::from_secs(30);

// ---------------------------------------------------------------------------------------
// Shared helpers
// ---------------------------------------------------------------------------------------

/// [`harness::rt::within`] with this file's bound.
async fn within<T>(what: &str, f: impl Future<Output = T>) -> T {
    harness::rt::within(what, WAIT, f).await
}

async fn connect(hosts: &str) -> zc::Client {
    within(
        "connect",
        zc::Client::connector()
            .with_session_timeout(Duration::from_secs(10))
            .connect(hosts),
    )
    .await
    .expect("client connects")
}

fn persistent() -> zc::CreateOptions<'static> {
    zc::CreateMode::Persistent.with_acls(zc::Acls::anyone_all())
}

fn ephemeral() -> zc::CreateOptions<'static> {
    zc::CreateMode::Ephemeral.with_acls(zc::Acls::anyone_all())
}

/// Polls `f` every 50 ms until it returns `Some`, panicking after [`WAIT`].
fn eventually<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + WAIT;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "{what}: not within {WAIT:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn flw(server: &TestServer, word: &str) -> String {
    server
        .four_letter_word(word)
        .unwrap_or_else(|e| panic!("{word} on {}: {e}", server.kind().name()))
}

/// `mntr` as key → value.
fn mntr(server: &TestServer) -> BTreeMap<String, String> {
    let text = flw(server, "mntr");
    text.lines()
        .map(|l| {
            let (k, v) = l
                .split_once('\t')
                .unwrap_or_else(|| panic!("mntr line without a tab: {l:?}"));
            (k.to_string(), v.to_string())
        })
        .collect()
}

fn mntr_u64(m: &BTreeMap<String, String>, key: &str) -> u64 {
    let v = m
        .get(key)
        .unwrap_or_else(|| panic!("mntr has no {key}: {m:#?}"));
    v.parse()
        .unwrap_or_else(|_| panic!("mntr {key}={v:?} is not a whole number"))
}

fn hex(v: &str) -> i64 {
    let digits = v
        .strip_prefix("0x")
        .unwrap_or_else(|| panic!("{v:?} is not 0x-prefixed"));
    i64::from_str_radix(digits, 16).unwrap_or_else(|_| panic!("{v:?} is not hex"))
}

// ---------------------------------------------------------------------------------------
// Four-letter words
// ---------------------------------------------------------------------------------------

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
    let fields: Vec<(&str, &str)> = lines
        .iter()
        .map(|l| {
            l.split_once(": ")
                .unwrap_or_else(|| panic!("srvr line without `: `: {l:?}"))
        })
        .collect();
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
    let conf_kv: Vec<(&str, &str)> = conf
        .lines()
        .map(|l| {
            l.split_once('=')
                .unwrap_or_else(|| panic!("conf line {l:?}"))
        })
        .collect();
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
    let envi_map: BTreeMap<&str, &str> = envi_lines
        .map(|l| {
            l.split_once('=')
                .unwrap_or_else(|| panic!("envi line {l:?}"))
        })
        .collect();
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
            within("create", a.create(path, data, &persistent()))
                .await
                .expect("create");
        }
        within("create", a.create("/op/e1", b"e", &ephemeral()))
            .await
            .expect("ephemeral of a");
        let (stat, _) = within("create", b.create("/op/e2", b"ee", &ephemeral()))
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
        let deadline = Instant::now() + WAIT;
        while within("exists", a.check_stat("/op/e2"))
            .await
            .expect("exists")
            .is_some()
        {
            assert!(
                Instant::now() < deadline,
                "b's ephemeral outlived its session"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });
    let m2 = mntr(&server);
    assert_eq!(mntr_u64(&m2, "zk_znode_count"), 10);
    assert_eq!(mntr_u64(&m2, "zk_ephemerals_count"), 1);
    drop(a);
}

harness::against_both!(
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
        within("create", a.create("/s", b"", &persistent()))
            .await
            .expect("create");
        within("create", a.create("/s/a1", b"", &ephemeral()))
            .await
            .expect("create");
        within("create", a.create("/s/a2", b"", &ephemeral()))
            .await
            .expect("create");
        let (stat, _) = within("create", b.create("/s/b1", b"", &ephemeral()))
            .await
            .expect("create");
        for _ in 0..3 {
            within("get", b.get_data("/s")).await.expect("get");
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

harness::against_both!(
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
            within("create", a.create(p, b"x", &persistent()))
                .await
                .expect("create");
        }
        let (_, _, a_data) = within("watch", a.get_and_watch_data("/w/a"))
            .await
            .expect("getData watch");
        let (none, a_missing) = within("watch", a.check_and_watch_stat("/w/missing"))
            .await
            .expect("exists watch");
        assert!(none.is_none());
        let (_, _, a_children) = within("watch", a.get_and_watch_children("/w"))
            .await
            .expect("child watch");
        let (_, _, b_data_a) = within("watch", b.get_and_watch_data("/w/a"))
            .await
            .expect("getData watch");
        let (_, _, b_data_b) = within("watch", b.get_and_watch_data("/w/b"))
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
        within("set", b.set_data("/w/a", b"y", None))
            .await
            .expect("set");
        within("a's event", a_data.changed()).await;
        within("b's event", b_data_a.changed()).await;
    });
    let watch_count = |n: u64| {
        eventually("zk_watch_count", || {
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

harness::against_both!(
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

harness::against_both!(
    four_letter_whitelist_apache,
    four_letter_whitelist_zooraft,
    four_letter_whitelist
);

// ---------------------------------------------------------------------------------------
// Prometheus endpoint (zooraft)
// ---------------------------------------------------------------------------------------

/// GETs `path` from 127.0.0.1:`port`; returns (status line, headers, body).
fn http_get(port: u16, path: &str) -> (String, Vec<String>, String) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect to the metrics port");
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("read timeout");
    let request =
        format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n");
    s.write_all(request.as_bytes()).expect("send request");
    let mut raw = String::new();
    s.read_to_string(&mut raw).expect("read response");
    let (head, body) = raw
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("no header end in {raw:?}"));
    let mut lines = head.split("\r\n");
    let status = lines.next().unwrap_or_default().to_string();
    let headers: Vec<String> = lines.map(str::to_string).collect();
    if let Some(len) = headers.iter().find_map(|h| {
        h.to_ascii_lowercase()
            .strip_prefix("content-length:")
            .map(|v| v.trim().to_string())
    }) {
        assert_eq!(
            len.parse::<usize>().ok(),
            Some(body.len()),
            "Content-Length"
        );
    }
    (status, headers, body.to_string())
}

/// A request head sent in two segments is answered only once it is complete (an endpoint
/// that answers and closes after the first segment resets the client's connection).
fn partial_request_waits(port: u16) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect to the metrics port");
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        .expect("send the first segment");
    s.set_read_timeout(Some(Duration::from_millis(500)))
        .expect("read timeout");
    let mut first = [0u8; 64];
    match s.read(&mut first) {
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ) => {}
        other => panic!("answered before the request head ended: {other:?}"),
    }
    s.write_all(b"\r\n").expect("send the blank line");
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("read timeout");
    let mut answer = String::new();
    s.read_to_string(&mut answer).expect("read the answer");
    assert!(answer.starts_with("HTTP/1.1 200 "), "{answer:.200}");
    assert!(answer.contains("# TYPE znode_count gauge"), "{answer:.200}");
}

/// One sample line: name, labels, value.
#[derive(Debug, Clone)]
struct Sample {
    name: String,
    labels: BTreeMap<String, String>,
    value: f64,
}

fn valid_metric_name(n: &str) -> bool {
    let mut chars = n.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

/// Parses and checks Prometheus' text exposition format (0.0.4): HELP and TYPE at most once
/// per family and before its samples, valid names, labels and values. Returns the samples
/// and each family's type.
fn parse_prometheus(text: &str) -> (Vec<Sample>, BTreeMap<String, String>) {
    assert!(text.ends_with('\n'), "the exposition ends with a newline");
    let mut types: BTreeMap<String, String> = BTreeMap::new();
    let mut helps: BTreeSet<String> = BTreeSet::new();
    let mut seen_samples: BTreeSet<String> = BTreeSet::new();
    let mut samples = Vec::new();
    for line in text.lines() {
        if line.is_empty() {
            continue;
        }
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, help) = rest.split_once(' ').unwrap_or((rest, ""));
            assert!(valid_metric_name(name), "HELP name {name:?}");
            assert!(!help.is_empty(), "HELP text for {name}");
            assert!(helps.insert(name.to_string()), "second HELP for {name}");
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest
                .split_once(' ')
                .unwrap_or_else(|| panic!("TYPE line {line:?}"));
            assert!(valid_metric_name(name), "TYPE name {name:?}");
            assert!(
                ["counter", "gauge", "histogram", "summary", "untyped"].contains(&kind),
                "TYPE {kind:?} for {name}"
            );
            assert!(
                !seen_samples.contains(name),
                "TYPE for {name} after its samples"
            );
            assert!(
                types.insert(name.to_string(), kind.to_string()).is_none(),
                "second TYPE for {name}"
            );
            continue;
        }
        assert!(
            !line.starts_with('#') || line.starts_with("# "),
            "comment {line:?}"
        );
        if line.starts_with('#') {
            continue;
        }
        let (series, value) = line
            .rsplit_once(' ')
            .unwrap_or_else(|| panic!("sample line {line:?}"));
        let value: f64 = match value {
            "+Inf" => f64::INFINITY,
            "-Inf" => f64::NEG_INFINITY,
            "NaN" => f64::NAN,
            v => v
                .parse()
                .unwrap_or_else(|_| panic!("value {v:?} in {line:?}")),
        };
        let (name, labels) = match series.split_once('{') {
            None => (series, BTreeMap::new()),
            Some((name, rest)) => {
                let body = rest
                    .strip_suffix('}')
                    .unwrap_or_else(|| panic!("labels in {line:?}"));
                let mut labels = BTreeMap::new();
                for pair in body.split(',').filter(|p| !p.is_empty()) {
                    let (k, v) = pair
                        .split_once('=')
                        .unwrap_or_else(|| panic!("label {pair:?} in {line:?}"));
                    assert!(valid_metric_name(k) && !k.contains(':'), "label name {k:?}");
                    let v = v
                        .strip_prefix('"')
                        .and_then(|v| v.strip_suffix('"'))
                        .unwrap_or_else(|| panic!("label value {v:?} is not quoted"));
                    assert!(labels.insert(k.to_string(), v.to_string()).is_none());
                }
                (name, labels)
            }
        };
        assert!(valid_metric_name(name), "sample name {name:?}");
        let family = ["_bucket", "_sum", "_count"]
            .iter()
            .find_map(|s| {
                name.strip_suffix(s)
                    .filter(|f| types.get(*f).is_some_and(|t| t == "histogram"))
            })
            .unwrap_or(name);
        assert!(
            types.contains_key(family),
            "sample {name} has no TYPE line before it"
        );
        seen_samples.insert(family.to_string());
        samples.push(Sample {
            name: name.to_string(),
            labels,
            value,
        });
    }
    (samples, types)
}

fn sample<'a>(samples: &'a [Sample], name: &str, labels: &[(&str, &str)]) -> Option<&'a Sample> {
    samples.iter().find(|s| {
        s.name == name
            && labels.len() == s.labels.len()
            && labels
                .iter()
                .all(|(k, v)| s.labels.get(*k).is_some_and(|x| x == v))
    })
}

/// Checks each `op`'s histogram: cumulative buckets in increasing `le`, non-decreasing
/// counts, `+Inf` equal to `_count`. Returns op → count.
fn check_histograms(samples: &[Sample], family: &str) -> BTreeMap<String, f64> {
    let mut by_op: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
    for s in samples
        .iter()
        .filter(|s| s.name == format!("{family}_bucket"))
    {
        let op = s.labels.get("op").expect("op label").clone();
        let le = s.labels.get("le").expect("le label");
        let le: f64 = if le == "+Inf" {
            f64::INFINITY
        } else {
            le.parse().unwrap_or_else(|_| panic!("le {le:?}"))
        };
        by_op.entry(op).or_default().push((le, s.value));
    }
    assert!(!by_op.is_empty(), "no {family}_bucket samples");
    let mut counts = BTreeMap::new();
    for (op, buckets) in by_op {
        assert!(buckets.len() >= 2, "{op}: {buckets:?}");
        for w in buckets.windows(2) {
            assert!(w[0].0 < w[1].0, "{op}: le not increasing {buckets:?}");
            assert!(w[0].1 <= w[1].1, "{op}: bucket counts decrease {buckets:?}");
        }
        let (last_le, inf) = *buckets.last().expect("a bucket");
        assert!(last_le.is_infinite(), "{op}: last bucket is +Inf");
        let count = sample(samples, &format!("{family}_count"), &[("op", &op)])
            .unwrap_or_else(|| panic!("{family}_count for {op}"))
            .value;
        let sum = sample(samples, &format!("{family}_sum"), &[("op", &op)])
            .unwrap_or_else(|| panic!("{family}_sum for {op}"))
            .value;
        assert_eq!(inf, count, "{op}: +Inf bucket equals _count");
        assert!(sum >= 0.0 && (count > 0.0 || sum == 0.0), "{op}: sum {sum}");
        counts.insert(op, count);
    }
    counts
}

#[test]
fn prometheus_endpoint_zooraft() {
    let metrics_port = free_port();
    let server = TestServer::builder(ServerKind::Zooraft)
        .config("metricsProvider.httpPort", &metrics_port.to_string())
        .start();
    let (status, headers, body) = http_get(metrics_port, "/metrics");
    assert!(status.starts_with("HTTP/1.1 200"), "{status}");
    assert!(
        headers.iter().any(|h| h
            .to_ascii_lowercase()
            .starts_with("content-type: text/plain")),
        "{headers:?}"
    );
    partial_request_waits(metrics_port);
    let (before, types) = parse_prometheus(&body);
    let counts_before = check_histograms(&before, "request_latency_seconds");
    assert_eq!(types["request_latency_seconds"], "histogram");
    assert_eq!(types["znode_count"], "gauge");
    assert_eq!(types["packets_received"], "counter");

    // Exactly these requests from one client.
    const GETS: usize = 25;
    const SETS: usize = 4;
    const EXISTS: usize = 3;
    let rt = runtime();
    let client = rt.block_on(connect(&server.connect_string()));
    rt.block_on(async {
        within("create", client.create("/prom", b"v", &persistent()))
            .await
            .expect("create");
        for _ in 0..GETS {
            within("get", client.get_data("/prom")).await.expect("get");
        }
        for i in 0..SETS {
            within(
                "set",
                client.set_data("/prom", format!("{i}").as_bytes(), None),
            )
            .await
            .expect("set");
        }
        for _ in 0..EXISTS {
            within("exists", client.check_stat("/prom"))
                .await
                .expect("exists");
        }
    });

    let (_, _, body) = http_get(metrics_port, "/");
    let (after, _) = parse_prometheus(&body);
    let counts = check_histograms(&after, "request_latency_seconds");
    let delta = |op: &str| {
        counts.get(op).copied().unwrap_or(0.0) - counts_before.get(op).copied().unwrap_or(0.0)
    };
    assert_eq!(
        delta("get_data"),
        GETS as f64,
        "get_data requests: {counts:?}"
    );
    assert_eq!(
        delta("set_data"),
        SETS as f64,
        "set_data requests: {counts:?}"
    );
    assert_eq!(
        delta("exists"),
        EXISTS as f64,
        "exists requests: {counts:?}"
    );
    assert_eq!(delta("create"), 1.0, "create requests: {counts:?}");
    // Every counter only grows.
    for s in &before {
        let family_type = types.get(s.name.as_str()).map(String::as_str);
        if family_type == Some("counter") {
            let now = sample(&after, &s.name, &[]).expect("the counter is still there");
            assert!(now.value >= s.value, "{} went down", s.name);
        }
    }
    let received = sample(&after, "packets_received", &[])
        .expect("packets_received")
        .value;
    let received_before = sample(&before, "packets_received", &[])
        .expect("packets_received")
        .value;
    assert!(received - received_before >= (1 + GETS + SETS + EXISTS) as f64);

    // The gauges agree with mntr.
    let m = mntr(&server);
    let gauge = |name: &str| {
        sample(&after, name, &[])
            .unwrap_or_else(|| panic!("{name}"))
            .value
    };
    assert_eq!(gauge("znode_count"), mntr_u64(&m, "zk_znode_count") as f64);
    assert_eq!(gauge("znode_count"), 6.0);
    assert_eq!(
        gauge("ephemerals_count"),
        mntr_u64(&m, "zk_ephemerals_count") as f64
    );
    assert_eq!(gauge("watch_count"), mntr_u64(&m, "zk_watch_count") as f64);
    assert_eq!(
        gauge("approximate_data_size"),
        mntr_u64(&m, "zk_approximate_data_size") as f64
    );
    assert_eq!(gauge("num_alive_connections"), 1.0);
    drop(client);
}

// ---------------------------------------------------------------------------------------
// ACLs through zkCli.sh
// ---------------------------------------------------------------------------------------

use harness::zkcli::ZkCli;

fn no_output() -> Vec<String> {
    Vec::new()
}

fn lines(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// `user:pass` as ZooKeeper's digest provider hashes it (base64 of SHA-1 of `user:pass`).
const USER_DIGEST: &str = "user:smGaoVKd/cQkjm7b88GyorAUz20=";
/// `super:test`, the example from ZooKeeper's administrator guide.
const SUPER_DIGEST: &str = "super:D/InIHSb7yEEbrWz8b9l71RjZJU=";

fn noauth(path: &str) -> Vec<String> {
    vec![format!("Insufficient permission : {path}")]
}

fn invalid_acl_on_create(path: &str) -> Vec<String> {
    vec![
        format!("KeeperErrorCode = InvalidACL for {path}"),
        format!("Acl is not valid : {path}"),
    ]
}

fn acl_scenario(kind: ServerKind) {
    let server = match kind {
        ServerKind::Apache => TestServer::builder(kind).jvm_property(
            "zookeeper.DigestAuthenticationProvider.superDigest",
            SUPER_DIGEST,
        ),
        ServerKind::Zooraft => TestServer::builder(kind)
            .config("DigestAuthenticationProvider.superDigest", SUPER_DIGEST),
    }
    .start();
    let mut owner = ZkCli::start("owner", &server);

    // auth: expands to the session's digest id.
    assert_eq!(owner.run("addauth digest user:pass"), no_output());
    assert_eq!(
        owner.run("create /secret data auth:user:pass:cdrwa"),
        lines(&["Created /secret"])
    );
    let full_acl = lines(&[&format!("'digest,'{USER_DIGEST}"), ": cdrwa"]);
    assert_eq!(owner.run("getAcl /secret"), full_acl);
    assert_eq!(owner.run("get /secret"), lines(&["data"]));
    // A digest ACL written out in full is the same id.
    assert_eq!(
        owner.run(&format!("create /dig x digest:{USER_DIGEST}:cdrwa")),
        lines(&["Created /dig"])
    );
    assert_eq!(owner.run("getAcl /dig"), full_acl);

    // ip ACLs: an exact address, a CIDR range, an address that is not ours.
    assert_eq!(
        owner.run("create /ip x ip:127.0.0.1:r"),
        lines(&["Created /ip"])
    );
    assert_eq!(owner.run("getAcl /ip"), lines(&["'ip,'127.0.0.1", ": r"]));
    assert_eq!(owner.run("get /ip"), lines(&["x"]));
    assert_eq!(owner.run("set /ip y"), noauth("/ip"));
    assert_eq!(
        owner.run("create /cidr x ip:127.0.0.0/8:r"),
        lines(&["Created /cidr"])
    );
    assert_eq!(owner.run("get /cidr"), lines(&["x"]));
    assert_eq!(
        owner.run("create /elsewhere x ip:10.1.2.3:cdrwa"),
        lines(&["Created /elsewhere"])
    );
    assert_eq!(owner.run("get /elsewhere"), noauth("/elsewhere"));

    // world read-only: reads pass, writes and creates beneath fail.
    assert_eq!(
        owner.run("create /ro x world:anyone:r"),
        lines(&["Created /ro"])
    );
    assert_eq!(owner.run("get /ro"), lines(&["x"]));
    assert_eq!(owner.run("set /ro y"), noauth("/ro"));
    assert_eq!(owner.run("create /ro/child c"), noauth("/ro/child"));

    // Several entries; without ADMIN permission getAcl masks digest hashes.
    assert_eq!(
        owner.run(&format!(
            "create /mixed x world:anyone:r,digest:{USER_DIGEST}:cdrwa"
        )),
        lines(&["Created /mixed"])
    );

    // Malformed ACLs: INVALIDACL.
    assert_eq!(
        owner.run("create /bad1 x digest:nocolon:r"),
        invalid_acl_on_create("/bad1")
    );
    assert_eq!(
        owner.run("create /bad2 x ip:999.1.1.1:r"),
        invalid_acl_on_create("/bad2")
    );
    assert_eq!(
        owner.run("create /bad3 x ip:127.0.0.1/33:r"),
        invalid_acl_on_create("/bad3")
    );
    assert_eq!(
        owner.run("create /bad4 x foo:bar:r"),
        invalid_acl_on_create("/bad4")
    );
    assert_eq!(
        owner.run("create /bad5 x world:someone:r"),
        invalid_acl_on_create("/bad5")
    );
    assert_eq!(
        owner.run("setAcl /dig digest:nocolon:r"),
        lines(&["Acl is not valid : /dig"])
    );

    // setAcl with an expected ACL version; a stale one is BADVERSION.
    assert_eq!(owner.run("create /ver v"), lines(&["Created /ver"]));
    assert_eq!(
        owner.run("setAcl -v 0 /ver auth:user:pass:cdrwa"),
        no_output()
    );
    let stat = owner.run("getAcl -s /ver");
    assert!(stat.contains(&"aclVersion = 1".to_string()), "{stat:#?}");
    assert!(stat.contains(&"dataVersion = 0".to_string()), "{stat:#?}");
    assert_eq!(
        owner.run("setAcl -v 0 /ver world:anyone:r"),
        lines(&["version No is not valid : /ver"])
    );
    assert_eq!(owner.run("getAcl /ver"), full_acl);
    assert_eq!(owner.run("setAcl -v 1 /ver world:anyone:r"), no_output());
    assert_eq!(owner.run("getAcl /ver"), lines(&["'world,'anyone", ": r"]));
    let whoami = owner.run("whoami");
    assert_eq!(
        whoami.iter().map(|l| l.trim_end()).collect::<BTreeSet<_>>(),
        BTreeSet::from(["Auth scheme: User", "ip: 127.0.0.1", "digest: user"]),
        "{whoami:#?}"
    );

    // A session without auth.
    let mut stranger = ZkCli::start("stranger", &server);
    assert_eq!(stranger.run("get /secret"), noauth("/secret"));
    assert_eq!(stranger.run("getAcl /secret"), noauth("/secret"));
    assert_eq!(stranger.run("ls /secret"), noauth("/secret"));
    assert_eq!(stranger.run("set /secret x"), noauth("/secret"));
    assert_eq!(stranger.run("delete /secret/none"), noauth("/secret/none"));
    // exists needs no permission.
    let stat = stranger.run("stat /secret");
    assert!(stat.contains(&"dataLength = 4".to_string()), "{stat:#?}");
    assert_eq!(stranger.run("get /ip"), lines(&["x"]));
    assert_eq!(stranger.run("get /ro"), lines(&["x"]));
    assert_eq!(
        stranger.run("getAcl /mixed"),
        lines(&["'world,'anyone", ": r", "'digest,'user:x", ": cdrwa"])
    );
    // `auth` with no authenticated id to expand to.
    assert_eq!(
        stranger.run("create /bad6 x auth::cdrwa"),
        invalid_acl_on_create("/bad6")
    );
    // A wrong password is a different digest.
    assert_eq!(stranger.run("addauth digest user:wrong"), no_output());
    assert_eq!(stranger.run("get /secret"), noauth("/secret"));

    // The super user reads and writes anything, and sees digests unmasked.
    let mut admin = ZkCli::start("super", &server);
    assert_eq!(admin.run("addauth digest super:test"), no_output());
    assert_eq!(admin.run("get /secret"), lines(&["data"]));
    assert_eq!(admin.run("getAcl /secret"), full_acl);
    assert_eq!(admin.run("get /elsewhere"), lines(&["x"]));
    assert_eq!(admin.run("set /secret changed"), no_output());
    assert_eq!(admin.run("set /ro changed"), no_output());
    assert_eq!(
        admin.run("create /ro/child c"),
        lines(&["Created /ro/child"])
    );
    let whoami = admin.run("whoami");
    assert_eq!(
        whoami.iter().map(|l| l.trim_end()).collect::<BTreeSet<_>>(),
        BTreeSet::from([
            "Auth scheme: User",
            "super:",
            "ip: 127.0.0.1",
            "digest: super"
        ]),
        "{whoami:#?}"
    );
    assert_eq!(owner.run("get /secret"), lines(&["changed"]));
}

harness::against_both!(acl_zkcli_apache, acl_zkcli_zooraft, acl_scenario);

// ---------------------------------------------------------------------------------------
// The zooraft command line
// ---------------------------------------------------------------------------------------

/// A `zooraft` process started by hand (not through the harness), so a test controls its
/// arguments, working directory and signals and sees its exit status.
struct Zooraft {
    child: Option<Child>,
    log: PathBuf,
}

impl Zooraft {
    fn spawn(args: &[&str], cwd: &Path, log: &Path) -> Zooraft {
        let out = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .expect("open log");
        let err = out.try_clone().expect("clone log handle");
        let child = Command::new(zooraft_binary())
            .args(args)
            .current_dir(cwd)
            .env("RUST_LOG", "info")
            .env_remove("RUST_BACKTRACE")
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .expect("spawn zooraft");
        Zooraft {
            child: Some(child),
            log: log.to_path_buf(),
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits until `port` answers `srvr` with a Mode; panics if the process exits first.
    fn wait_serving(&mut self, port: u16) {
        let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if harness::four_letter_word(addr, "srvr").is_ok_and(|a| a.contains("Mode: ")) {
                return;
            }
            if let Some(status) = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                panic!(
                    "zooraft exited ({status}) before serving; log:\n{}",
                    self.log()
                );
            }
            assert!(
                Instant::now() < deadline,
                "zooraft did not serve on {port}; log:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits (bounded) for the process to exit by itself.
    fn wait_exit(&mut self, bound: Duration) -> ExitStatus {
        let child = self.child.as_mut().expect("running");
        let deadline = Instant::now() + bound;
        loop {
            if let Some(status) = child.try_wait().expect("wait") {
                self.child = None;
                return status;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                self.child = None;
                panic!(
                    "zooraft did not exit within {bound:?}; log:\n{}",
                    self.log()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn signal(&self, sig: libc::c_int) {
        let pid = self.child.as_ref().expect("running").id();
        // SAFETY: kill(2) on our own child's pid; no memory is involved.
        unsafe {
            libc::kill(pid as libc::pid_t, sig);
        }
    }
}

impl Drop for Zooraft {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Bound for a graceful stop or a refused start.
const EXIT_BOUND: Duration = Duration::from_secs(15);

/// A temp dir with a zoo.cfg of `lines` (plus dataDir in it and a free clientPort unless
/// given); returns (dir, cfg path, client port).
fn config_dir(extra: &[&str]) -> (tempfile::TempDir, PathBuf, u16) {
    let dir = tempfile::Builder::new()
        .prefix("zooraft-cli-")
        .tempdir()
        .expect("temp dir");
    let port = free_port();
    let mut cfg = format!(
        "tickTime=2000\ndataDir={}\nclientPort={port}\nclientPortAddress=127.0.0.1\n",
        dir.path().join("data").display()
    );
    for l in extra {
        cfg.push_str(l);
        cfg.push('\n');
    }
    let path = dir.path().join("zoo.cfg");
    std::fs::write(&path, cfg).expect("write zoo.cfg");
    (dir, path, port)
}

#[track_caller]
fn assert_no_panic(log: &str) {
    assert!(
        !log.contains("panicked at") && !log.contains("stack backtrace"),
        "zooraft panicked:\n{log}"
    );
}

#[test]
fn cli_config_positional_flag_and_override_zooraft() {
    let (dir, cfg, port) = config_dir(&[]);
    let cfg_s = cfg.to_str().expect("utf-8 path");
    let log = dir.path().join("server.log");

    // zkServer.sh style: the file as the only argument.
    let mut z = Zooraft::spawn(&[cfg_s], dir.path(), &log);
    z.wait_serving(port);
    z.signal(libc::SIGTERM);
    assert!(z.wait_exit(EXIT_BOUND).success(), "{}", z.log());

    // --config.
    let mut z = Zooraft::spawn(&["--config", cfg_s], dir.path(), &log);
    z.wait_serving(port);
    z.signal(libc::SIGTERM);
    assert!(z.wait_exit(EXIT_BOUND).success(), "{}", z.log());

    // A flag overrides the file's clientPort.
    let other = free_port();
    let other_s = other.to_string();
    let mut z = Zooraft::spawn(&["--config", cfg_s, "--port", &other_s], dir.path(), &log);
    z.wait_serving(other);
    assert!(
        TcpStream::connect(("127.0.0.1", port)).is_err(),
        "the file's clientPort {port} is not used when --port says {other}"
    );
    z.signal(libc::SIGTERM);
    assert!(z.wait_exit(EXIT_BOUND).success(), "{}", z.log());
    assert_no_panic(&z.log());
}

#[test]
fn cli_malformed_value_names_file_and_line_zooraft() {
    let (dir, cfg, _) = config_dir(&["# a comment", "maxClientCnxns=abc"]);
    let log = dir.path().join("server.log");
    let mut z = Zooraft::spawn(&[cfg.to_str().expect("utf-8")], dir.path(), &log);
    let status = z.wait_exit(EXIT_BOUND);
    let out = z.log();
    assert!(!status.success(), "a malformed value is refused: {out}");
    assert!(
        out.contains(&format!(
            "{}:6: maxClientCnxns: 'abc' is not a valid number",
            cfg.display()
        )),
        "the message names the file and line:\n{out}"
    );
    assert_no_panic(&out);

    // The same for clientPort, through --config.
    let (dir, cfg, _) = config_dir(&[]);
    let text = std::fs::read_to_string(&cfg).expect("read zoo.cfg");
    let text = text.replace(
        &text
            .lines()
            .find(|l| l.starts_with("clientPort="))
            .expect("clientPort line")
            .to_string(),
        "clientPort=abc",
    );
    std::fs::write(&cfg, text).expect("write zoo.cfg");
    let log = dir.path().join("server.log");
    let mut z = Zooraft::spawn(
        &["--config", cfg.to_str().expect("utf-8")],
        dir.path(),
        &log,
    );
    let status = z.wait_exit(EXIT_BOUND);
    let out = z.log();
    assert!(!status.success());
    assert!(
        out.contains(&format!(
            "{}:3: clientPort: 'abc' is not a valid number",
            cfg.display()
        )),
        "{out}"
    );
    assert_no_panic(&out);

    // A config file that is not there.
    let missing = dir.path().join("missing.cfg");
    let mut z = Zooraft::spawn(&[missing.to_str().expect("utf-8")], dir.path(), &log);
    let status = z.wait_exit(EXIT_BOUND);
    let out = z.log();
    assert!(!status.success());
    assert!(
        out.contains(&format!("cannot read {}", missing.display())),
        "{out}"
    );
    assert_no_panic(&out);
}

#[test]
fn cli_unknown_key_is_a_warning_zooraft() {
    let (dir, cfg, port) = config_dir(&["someUnknownKey=42", "initLimit=5"]);
    let log = dir.path().join("server.log");
    let mut z = Zooraft::spawn(&[cfg.to_str().expect("utf-8")], dir.path(), &log);
    z.wait_serving(port);
    let out = z.log();
    let warning = out
        .lines()
        .find(|l| l.contains("someUnknownKey"))
        .unwrap_or_else(|| panic!("no warning about the unknown key:\n{out}"));
    assert!(warning.contains("WARN"), "{warning}");
    assert!(
        warning.contains(&format!("{}:5", cfg.display())),
        "the warning names the file and line: {warning}"
    );
    assert!(
        !out.lines()
            .any(|l| l.contains("initLimit") && l.contains("WARN")),
        "a known ZooKeeper key is not warned about:\n{out}"
    );
    z.signal(libc::SIGTERM);
    assert!(z.wait_exit(EXIT_BOUND).success());
}

#[test]
fn cli_no_config_uses_data_in_working_directory_zooraft() {
    let cwd = tempfile::Builder::new()
        .prefix("zooraft-cwd-")
        .tempdir()
        .expect("temp dir");
    let log_dir = tempfile::tempdir().expect("temp dir");
    let log = log_dir.path().join("server.log");
    let port = free_port();
    let mut z = Zooraft::spawn(&["--port", &port.to_string()], cwd.path(), &log);
    z.wait_serving(port);
    let data = cwd.path().join("data");
    assert!(data.is_dir(), "./data is created in the working directory");
    assert!(
        std::fs::read_dir(&data)
            .expect("read ./data")
            .next()
            .is_some(),
        "./data holds the store"
    );
    z.signal(libc::SIGTERM);
    assert!(z.wait_exit(EXIT_BOUND).success(), "{}", z.log());
}

/// Starts from `cfg`, writes one znode (acknowledged), stops the server with `sig`, and
/// checks the exit status and that the znode is there after a restart.
fn graceful_stop(sig: libc::c_int) {
    let (dir, cfg, port) = config_dir(&[]);
    let cfg_s = cfg.to_str().expect("utf-8");
    let log = dir.path().join("server.log");
    let mut z = Zooraft::spawn(&[cfg_s], dir.path(), &log);
    z.wait_serving(port);
    let hosts = format!("127.0.0.1:{port}");
    let rt = runtime();
    let client = rt.block_on(connect(&hosts));
    rt.block_on(async {
        within(
            "create",
            client.create("/kept", b"acknowledged", &persistent()),
        )
        .await
        .expect("create acknowledged");
    });
    z.signal(sig);
    let status = z.wait_exit(EXIT_BOUND);
    assert!(status.success(), "exit status {status}; log:\n{}", z.log());
    assert!(z.log().contains("shutting down"), "{}", z.log());
    drop(client);

    let mut z = Zooraft::spawn(&[cfg_s], dir.path(), &log);
    z.wait_serving(port);
    let data = rt.block_on(async {
        let c = connect(&hosts).await;
        within("get", c.get_data("/kept")).await.expect("get").0
    });
    assert_eq!(data, b"acknowledged");
    z.signal(libc::SIGTERM);
    assert!(z.wait_exit(EXIT_BOUND).success());
    assert_no_panic(&z.log());
}

#[test]
fn cli_sigterm_is_graceful_zooraft() {
    graceful_stop(libc::SIGTERM);
}

#[test]
fn cli_sigint_is_graceful_zooraft() {
    graceful_stop(libc::SIGINT);
}

/// A refused start: non-zero exit, a message naming the problem, no panic.
fn assert_refused(z: &mut Zooraft, needle: &str) {
    let status = z.wait_exit(EXIT_BOUND);
    let out = z.log();
    assert!(!status.success(), "start-up is refused:\n{out}");
    assert!(out.contains(needle), "the message says {needle:?}:\n{out}");
    assert_no_panic(&out);
}

#[test]
fn cli_incompatible_data_directory_zooraft() {
    let (dir, cfg, port) = config_dir(&[]);
    let cfg_s = cfg.to_str().expect("utf-8");
    let log = dir.path().join("server.log");
    let mut z = Zooraft::spawn(&[cfg_s], dir.path(), &log);
    z.wait_serving(port);
    z.signal(libc::SIGTERM);
    assert!(z.wait_exit(EXIT_BOUND).success());

    // As if a future zooraft had written it: another `format` in the `state` column family.
    let raft = dir.path().join("data").join("raft");
    {
        let opts = rocksdb::Options::default();
        let families = rocksdb::DB::list_cf(&opts, &raft).expect("list column families");
        let db =
            rocksdb::DB::open_cf(&opts, &raft, &families).expect("open the store zooraft wrote");
        let state = db.cf_handle("state").expect("state column family");
        db.put_cf(state, b"format", 99u32.to_be_bytes())
            .expect("write format");
        db.flush_cf(state).expect("flush");
    }
    let mut z = Zooraft::spawn(&[cfg_s], dir.path(), &log);
    assert_refused(&mut z, "incompatible");
}

#[test]
fn cli_garbage_data_directory_zooraft() {
    let (dir, cfg, _) = config_dir(&[]);
    let raft = dir.path().join("data").join("raft");
    std::fs::create_dir_all(&raft).expect("mkdir");
    std::fs::write(raft.join("CURRENT"), "MANIFEST-000042\n").expect("write");
    std::fs::write(raft.join("MANIFEST-000042"), [0x5au8; 4096]).expect("write");
    let log = dir.path().join("server.log");
    let mut z = Zooraft::spawn(&[cfg.to_str().expect("utf-8")], dir.path(), &log);
    assert_refused(&mut z, &raft.display().to_string());

    // dataDir/raft is a file, not a directory.
    let (dir, cfg, _) = config_dir(&[]);
    std::fs::create_dir_all(dir.path().join("data")).expect("mkdir");
    std::fs::write(dir.path().join("data").join("raft"), "not a directory").expect("write");
    let log = dir.path().join("server.log");
    let mut z = Zooraft::spawn(&[cfg.to_str().expect("utf-8")], dir.path(), &log);
    assert_refused(&mut z, "raft");
}
