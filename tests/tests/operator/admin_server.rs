//! The AdminServer against Apache ZooKeeper 3.8's (Jetty, from Debian's jars): every 3.8
//! command, by its full and its short names, answers with the same field names and JSON
//! types on both servers after the same actions (a session holding an ephemeral znode and
//! watches), standalone and as members of a 3-member ensemble; HTTP misuse (an unknown
//! command, a bad method, an oversized or malformed request) gets the same kind of answer
//! and leaves the server serving.
//!
//! Values differ where the servers differ (the version, counters, Java's properties), so
//! what is compared is each answer's shape: its keys, recursively, and the JSON type of each
//! value. The differences that remain are listed here with their reason, and nowhere else.

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use serde_json::Value;
use zooraft_tests::pki::{quorum_keys, Ca};
use zooraft_tests::rt::{block_on, eventually};
use zooraft_tests::tls_probe::{held_tls_session, https_get, https_get_as};
use zooraft_tests::{free_port, ServerKind, TestEnsemble, TestServer};

use crate::{connect, ephemeral, persistent};

/// Every command of ZooKeeper 3.8's AdminServer: full name, then its short names.
const COMMANDS: &[&[&str]] = &[
    &["configuration", "conf", "config"],
    &["connection_stat_reset", "crst"],
    &["connections", "cons"],
    &["dirs"],
    &["dump"],
    &["environment", "env", "envi"],
    &["get_trace_mask", "gtmk"],
    &["hash"],
    &["initial_configuration", "icfg"],
    &["is_read_only", "isro"],
    &["last_snapshot", "lsnp"],
    &["leader", "lead"],
    &["monitor", "mntr"],
    &["observer_connection_stat_reset", "orst"],
    &["observers", "obsr"],
    &["ruok"],
    &["server_stats", "srvr"],
    &["set_trace_mask", "stmk"],
    &["stat_reset", "srst"],
    &["stats", "stat"],
    &["system_properties", "sysp"],
    &["voting_view"],
    &["watch_summary", "wchs"],
    &["watches", "wchc"],
    &["watches_by_path", "wchp"],
    &["zabstate"],
];

/// Answers whose keys are the process's properties, not a fixed set: Java's system
/// properties on ZooKeeper (`java.*`, `sun.*`, ...), the same meanings without the JVM here.
const PROPERTY_ANSWERS: &[&str] = &["environment", "system_properties"];

/// Sends `request` as is to 127.0.0.1:`port`; the status code and body.
fn raw(port: u16, request: &[u8]) -> (u16, String) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect to the admin port");
    s.set_read_timeout(Some(Duration::from_secs(15)))
        .expect("read timeout");
    // The server may answer and close before reading all of an oversized request.
    let _ = s.write_all(request);
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    let text = String::from_utf8_lossy(&out).into_owned();
    let code = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("no HTTP status in {text:?}"));
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or("");
    (code, body.to_string())
}

fn get(port: u16, method: &str, path: &str) -> (u16, String) {
    get_with(port, method, path, &[])
}

fn get_with(port: u16, method: &str, path: &str, headers: &[(&str, &str)]) -> (u16, String) {
    let extra: String = headers
        .iter()
        .map(|(k, v)| format!("{k}: {v}\r\n"))
        .collect();
    let request =
        format!("{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{extra}Connection: close\r\n\r\n");
    raw(port, request.as_bytes())
}

fn command(port: u16, name: &str) -> Value {
    let (code, body) = get(port, "GET", &format!("/commands/{name}"));
    assert_eq!(code, 200, "{name}: {body}");
    serde_json::from_str(&body).unwrap_or_else(|e| panic!("{name}: not JSON ({e}): {body}"))
}

/// A value's shape: keys and JSON types, recursively; arrays by their first element.
fn shape(v: &Value, at: &str, out: &mut BTreeSet<String>) {
    let kind = match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    };
    out.insert(format!("{at}: {kind}"));
    match v {
        Value::Object(m) => {
            for (k, v) in m {
                // Keys that are data (session ids, paths, member ids, times) are one shape.
                let data_key = k.starts_with('/')
                    || k.chars().all(|c| c.is_ascii_digit())
                    || k.starts_with("0x");
                let key = if data_key { "<key>" } else { k.as_str() };
                shape(v, &format!("{at}.{key}"), out);
            }
        }
        Value::Array(a) => {
            if let Some(first) = a.first() {
                shape(first, &format!("{at}[]"), out);
            }
        }
        _ => {}
    }
}

/// The shapes of every command's answer on one server (after the same actions).
fn shapes(port: u16) -> Vec<(String, BTreeSet<String>)> {
    COMMANDS
        .iter()
        .map(|names| {
            let full = names[0];
            let answer = command(port, full);
            assert_eq!(answer["command"], full, "{answer}");
            for alias in &names[1..] {
                let by_alias = command(port, alias);
                assert_eq!(by_alias["command"], full, "{alias}: {by_alias}");
            }
            let mut s = BTreeSet::new();
            if PROPERTY_ANSWERS.contains(&full) {
                for key in ["os.name", "os.arch", "os.version", "user.name", "user.dir"] {
                    assert!(answer[key].is_string(), "{full} has no {key}: {answer}");
                }
                shape(&answer["command"], "command", &mut s);
                shape(&answer["error"], "error", &mut s);
            } else {
                shape(&answer, "", &mut s);
            }
            (full.to_string(), s)
        })
        .collect()
}

/// Compares two servers' shapes; `monitor` compares the keys both have: it is `mntr` in
/// JSON, and zooraft's `mntr` leaves out ZooKeeper's JVM and request-processor figures and
/// adds its own (the book's monitoring page lists both; `monitor_is_mntr` below holds
/// zooraft's `monitor` to its `mntr`).
fn compare(zk: &[(String, BTreeSet<String>)], ours: &[(String, BTreeSet<String>)]) {
    let mut report = Vec::new();
    for ((name, a), (_, b)) in zk.iter().zip(ours) {
        if name == "monitor" {
            let keys = |s: &BTreeSet<String>| -> BTreeSet<String> {
                s.iter()
                    .filter_map(|l| l.split(':').next().map(str::to_string))
                    .collect()
            };
            let both: BTreeSet<_> = keys(a).intersection(&keys(b)).cloned().collect();
            for k in &both {
                let ka: Vec<_> = a
                    .iter()
                    .filter(|l| l.starts_with(&format!("{k}:")))
                    .collect();
                let kb: Vec<_> = b
                    .iter()
                    .filter(|l| l.starts_with(&format!("{k}:")))
                    .collect();
                if ka != kb {
                    report.push(format!("monitor {k}: ZooKeeper {ka:?}, zooraft {kb:?}"));
                }
            }
            println!(
                "MEASURED monitor: {} of ZooKeeper's {} keys, {} of zooraft's {} shared",
                both.len(),
                keys(a).len(),
                both.len(),
                keys(b).len()
            );
            continue;
        }
        for missing in a.difference(b) {
            report.push(format!("{name}: zooraft lacks {missing}"));
        }
        for extra in b.difference(a) {
            report.push(format!("{name}: zooraft adds {extra}"));
        }
    }
    assert!(report.is_empty(), "answers differ:\n{}", report.join("\n"));
}

/// A session with an ephemeral znode, a data watch and an exists watch, held while `f` runs,
/// after 130 writes.
fn with_session<T>(connect_string: &str, f: impl FnOnce() -> T) -> T {
    let held = block_on(async {
        let client = connect(connect_string).await;
        client
            .create("/app", b"x", &persistent())
            .await
            .expect("create /app");
        client
            .create("/app/eph", b"e", &ephemeral())
            .await
            .expect("create eph");
        // ZooKeeper logs a digest every 128 transactions: enough for `hash` to list one.
        for i in 0..130 {
            let path = format!("/app/n{i}");
            client
                .create(&path, b"", &persistent())
                .await
                .expect("create");
        }
        let watch = client.get_and_watch_data("/app").await.expect("watch /app");
        let exists = client
            .check_and_watch_stat("/nothere")
            .await
            .expect("watch");
        (client, watch.2, exists.1)
    });
    let out = f();
    drop(held);
    out
}

fn admin_server(kind: ServerKind) -> (TestServer, u16) {
    let port = free_port();
    let server = TestServer::builder(kind)
        .config("admin.serverPort", &port.to_string())
        .config("admin.serverAddress", "127.0.0.1")
        .start();
    eventually("the AdminServer answers", Duration::from_secs(60), || {
        TcpStream::connect(("127.0.0.1", port)).ok()
    });
    (server, port)
}

#[test]
fn every_command_answers_with_zookeepers_fields_standalone() {
    let (zk, zk_port) = admin_server(ServerKind::Apache);
    let (zr, zr_port) = admin_server(ServerKind::Zooraft);
    let a = with_session(&zk.connect_string(), || shapes(zk_port));
    let b = with_session(&zr.connect_string(), || shapes(zr_port));
    compare(&a, &b);
    println!("MEASURED standalone: {} commands compared", a.len());
}

#[test]
fn monitor_is_mntr() {
    let (server, port) = admin_server(ServerKind::Zooraft);
    let monitor = command(port, "monitor");
    let mntr = server.four_letter_word("mntr").expect("mntr");
    let from_mntr: BTreeSet<String> = mntr
        .lines()
        .filter_map(|l| {
            l.split('\t')
                .next()?
                .strip_prefix("zk_")
                .map(str::to_string)
        })
        .collect();
    let mut from_monitor: BTreeSet<String> = monitor
        .as_object()
        .expect("an object")
        .keys()
        .cloned()
        .collect();
    from_monitor.remove("command");
    from_monitor.remove("error");
    assert_eq!(from_monitor, from_mntr);
    assert_eq!(monitor["server_state"], "standalone");
    assert!(
        monitor["znode_count"].as_u64().is_some_and(|n| n >= 2),
        "{monitor}"
    );
}

#[test]
fn every_command_answers_with_zookeepers_fields_in_an_ensemble() {
    let mut by_role = Vec::new();
    for kind in [ServerKind::Apache, ServerKind::Zooraft] {
        let ports: Vec<u16> = (0..3).map(|_| free_port()).collect();
        let each = |i: usize| {
            vec![
                ("admin.serverPort".to_string(), ports[i].to_string()),
                ("admin.serverAddress".to_string(), "127.0.0.1".to_string()),
            ]
        };
        let e = TestEnsemble::start_each_serving(kind, 3, &[], &each);
        let leader = (0..3)
            .find(|i| command(ports[*i], "leader")["is_leader"] == true)
            .expect("a leader");
        let follower = (leader + 1) % 3;
        let got = with_session(&e.member(follower).connect_string(), || {
            (shapes(ports[leader]), shapes(ports[follower]))
        });
        by_role.push(got);
    }
    compare(&by_role[0].0, &by_role[1].0);
    compare(&by_role[0].1, &by_role[1].1);
}

#[test]
fn misuse_gets_a_4xx_and_the_server_keeps_serving() {
    for kind in [ServerKind::Apache, ServerKind::Zooraft] {
        let (server, port) = admin_server(kind);
        let name = kind.name();
        let unknown = command(port, "nope");
        assert_eq!(unknown["error"], "Unknown command: nope", "{name}");
        assert_eq!(unknown["command"], "nope", "{name}");
        assert_eq!(
            get(port, "DELETE", "/commands/ruok").0,
            405,
            "{name} DELETE"
        );
        assert_eq!(get(port, "POST", "/commands/ruok").0, 405, "{name} POST");
        assert_eq!(
            get(port, "GET", "/nowhere").0,
            404,
            "{name} outside the commands"
        );
        let big = format!(
            "GET /commands/ruok HTTP/1.1\r\nHost: x\r\nX-Big: {}\r\n\r\n",
            "a".repeat(64 * 1024)
        );
        assert_eq!(raw(port, big.as_bytes()).0, 431, "{name} oversized header");
        let garbage = raw(port, b"garbage\r\n\r\n").0;
        assert_eq!(garbage, 400, "{name} malformed request line");
        let long_uri = format!("GET /{} HTTP/1.1\r\nHost: x\r\n\r\n", "a".repeat(20 * 1024));
        let code = raw(port, long_uri.as_bytes()).0;
        assert!((400..500).contains(&code), "{name} long URI: {code}");
        // Unharmed: it answers, and its clients are served.
        assert_eq!(command(port, "ruok")["error"], Value::Null, "{name}");
        assert_eq!(server.four_letter_word("ruok").expect("ruok"), "imok");
    }
}

#[test]
fn ready_tells_serving_from_not_serving() {
    let (server, port) = admin_server(ServerKind::Zooraft);
    let (code, body) = get(port, "GET", "/ready");
    assert_eq!(code, 200, "{body}");
    let v: Value = serde_json::from_str(&body).expect("JSON");
    assert_eq!(v["status"], "ok");
    drop(server);
    // A member that lost its quorum is not ready, while ZooKeeper's ruok still says 200.
    let port = free_port();
    let each = |i: usize| match i {
        0 => vec![("admin.serverPort".to_string(), port.to_string())],
        _ => vec![("admin.enableServer".to_string(), "false".to_string())],
    };
    let mut e = TestEnsemble::start_each_serving(ServerKind::Zooraft, 3, &[], &each);
    e.member_mut(1).kill();
    e.member_mut(2).kill();
    eventually("member 0 stops serving", Duration::from_secs(60), || {
        (get(port, "GET", "/ready").0 == 503).then_some(())
    });
    let ruok = command(port, "ruok");
    assert_eq!(
        ruok["error"],
        "This ZooKeeper instance is not currently serving requests"
    );
}

/// `admin.forceHttps` serves HTTPS only; `admin.portUnification` both, on the one port; with
/// the `ssl.quorum.*` stores, as ZooKeeper's AdminServer.
#[test]
fn tls_on_the_admin_port() {
    let dir = tempfile::tempdir().expect("temp dir");
    let ca = Ca::new(dir.path(), "admin-ca");
    let store = ca.issue("admin", "/CN=admin");
    for (key, plain_too) in [("admin.forceHttps", false), ("admin.portUnification", true)] {
        let port = free_port();
        let mut b = TestServer::builder(ServerKind::Zooraft)
            .config("admin.serverPort", &port.to_string())
            .config(key, "true");
        // The ssl.quorum.* stores (a standalone server: without sslQuorum itself).
        for (k, v) in quorum_keys(&store, &ca)
            .iter()
            .filter(|(k, _)| k != "sslQuorum")
        {
            b = b.config(k, v);
        }
        let _server = b.start();
        let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
        let (code, body) = eventually("HTTPS answers", Duration::from_secs(60), || {
            https_get(addr, &ca.cert, "/commands/ruok").ok()
        });
        assert_eq!(code, 200, "{key}: {body}");
        let v: Value = serde_json::from_str(&body).expect("JSON");
        assert_eq!(v["command"], "ruok");
        // Plain HTTP: served beside TLS under portUnification; nothing under forceHttps.
        let mut s = TcpStream::connect(addr).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(15)))
            .expect("timeout");
        let _ = s.write_all(b"GET /commands/ruok HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        let mut out = String::new();
        let _ = s.read_to_string(&mut out);
        assert_eq!(
            out.starts_with("HTTP/1.1 200"),
            plain_too,
            "{key}: plain got {out:?}"
        );
    }
}

/// A client connected over TLS is listed under `secure_connections`, as in ZooKeeper.
#[test]
fn tls_clients_are_listed_apart() {
    let dir = tempfile::tempdir().expect("temp dir");
    let ca = Ca::new(dir.path(), "client-ca");
    let store = ca.issue("server", "/CN=server");
    let (secure_port, admin) = (free_port(), free_port());
    let mut b =
        TestServer::builder(ServerKind::Zooraft).config("admin.serverPort", &admin.to_string());
    for (k, v) in zooraft_tests::pki::server_tls_config(secure_port, &store, &ca.cert, "none") {
        b = b.config(&k, &v);
    }
    let _server = b.start();
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], secure_port));
    let session = eventually("a TLS session", Duration::from_secs(60), || {
        held_tls_session(addr, &ca.cert).ok()
    });
    let cons = command(admin, "connections");
    assert_eq!(
        cons["connections"].as_array().map(Vec::len),
        Some(0),
        "{cons}"
    );
    let secure = cons["secure_connections"].as_array().expect("an array");
    assert_eq!(secure.len(), 1, "{cons}");
    assert_eq!(secure[0]["session_id"], session.id, "{cons}");
}

#[test]
fn trace_mask_is_set_and_read_back() {
    let (_server, port) = admin_server(ServerKind::Zooraft);
    assert_eq!(command(port, "gtmk")["tracemask"], 306);
    let set = command(port, "stmk?traceMask=42");
    assert_eq!(set["tracemask"], 42);
    assert_eq!(command(port, "get_trace_mask")["tracemask"], 42);
    // POST only for the commands that change something.
    assert_eq!(get(port, "POST", "/commands/stmk?traceMask=7").0, 200);
    assert_eq!(get(port, "POST", "/commands/environment").0, 405);
    assert_eq!(get(port, "POST", "/commands/zabstate").0, 405);
    let bad = command(port, "stmk");
    assert_eq!(
        bad["error"],
        "setTraceMask requires long traceMask argument"
    );
}

/// `snapshot` asks for ZooKeeper 3.9's auth: an `Authorization` scheme (digest, ip, x509)
/// whose ids hold ALL on the root znode's ACL, or super; 401 without one or for a scheme
/// that proves nobody, 403 for ids the root's ACL does not grant ALL.
#[test]
fn snapshot_takes_zookeeper_3_9_auth() {
    let port = free_port();
    let server = TestServer::builder(ServerKind::Zooraft)
        .config("admin.serverPort", &port.to_string())
        .config(
            "DigestAuthenticationProvider.superDigest",
            crate::acl::SUPER_DIGEST,
        )
        .start();
    let error = |headers: &[(&str, &str)]| {
        let (code, body) = get_with(port, "GET", "/commands/snapshot", headers);
        let v: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
        (code, v["error"].as_str().unwrap_or("").to_string())
    };
    let ok = |headers: &[(&str, &str)]| {
        let (code, _) = get_with(port, "GET", "/commands/snapshot", headers);
        code == 200
    };
    eventually("the AdminServer answers", Duration::from_secs(60), || {
        TcpStream::connect(("127.0.0.1", port)).ok()
    });
    let missing = (401, "Auth info is missing for the command".to_string());
    assert_eq!(error(&[]), missing);
    for bad in ["kerberos me", "digest", "digest a:b c"] {
        let refused = (401, "Not authenticated".to_string());
        assert_eq!(error(&[("Authorization", bad)]), refused, "{bad}");
    }
    // The root's ACL is world:anyone ALL: any authenticated id may.
    assert!(ok(&[("Authorization", "ip")]));
    assert!(ok(&[("Authorization", "digest eve:x")]));
    // Now ALL for user:pass only (and READ for anyone).
    block_on(async {
        let c = connect(&server.connect_string()).await;
        let acl = [
            zookeeper_client::Acl::new(
                zookeeper_client::Permission::ALL,
                zookeeper_client::AuthId::new("digest", crate::acl::USER_DIGEST),
            ),
            zookeeper_client::Acl::new(
                zookeeper_client::Permission::READ,
                zookeeper_client::AuthId::anyone(),
            ),
        ];
        c.set_acl("/", &acl, None).await.expect("setAcl /");
    });
    let forbidden = (403, "Not authorized".to_string());
    assert_eq!(error(&[("Authorization", "ip")]), forbidden);
    assert_eq!(error(&[("Authorization", "digest eve:x")]), forbidden);
    assert!(ok(&[("Authorization", "digest user:pass")]));
    assert!(ok(&[("Authorization", "digest super:test")]), "super");
    // The CLI sends what it is given.
    let file = tempfile::NamedTempFile::new().expect("temp file");
    let admin = format!("127.0.0.1:{port}");
    let out = file.path().to_str().expect("utf-8 path");
    let backup = |auth: &[&str]| {
        let mut args = vec!["backup", "--server", &admin, "--out", out];
        args.extend_from_slice(auth);
        zooraft_tests::zooraft_cmd(&args)
    };
    let (done, text) = backup(&["--auth", "ip"]);
    assert!(
        !done && text.contains("403") && text.contains("Not authorized"),
        "{text}"
    );
    let (done, text) = backup(&["--auth", "user:pass"]);
    assert!(done, "{text}");
}

/// On a TLS admin port, `Authorization: x509` is the client certificate's subject:
/// `X509AuthenticationProvider.superUser` may; no certificate proves nobody.
#[test]
fn snapshot_over_tls_takes_the_client_certificate() {
    let dir = tempfile::tempdir().expect("temp dir");
    let ca = Ca::new(dir.path(), "admin-ca");
    let store = ca.issue("admin", "/CN=admin");
    let operator = ca.issue("operator", "/O=ops/CN=operator");
    let port = free_port();
    let mut b = TestServer::builder(ServerKind::Zooraft)
        .config("admin.serverPort", &port.to_string())
        .config("admin.forceHttps", "true")
        .config("X509AuthenticationProvider.superUser", "CN=operator,O=ops")
        .config(
            "DigestAuthenticationProvider.superDigest",
            crate::acl::SUPER_DIGEST,
        );
    for (k, v) in quorum_keys(&store, &ca)
        .iter()
        .filter(|(k, _)| k != "sslQuorum")
    {
        b = b.config(k, v);
    }
    let server = b.start();
    block_on(async {
        let c = connect(&server.connect_string()).await;
        let only_bob = [zookeeper_client::Acl::new(
            zookeeper_client::Permission::ALL,
            zookeeper_client::AuthId::new("digest", "bob:nothing"),
        )];
        c.set_acl("/", &only_bob, None).await.expect("setAcl /");
    });
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let x509 = [("Authorization", "x509")];
    let (code, _) = eventually("HTTPS answers", Duration::from_secs(60), || {
        https_get_as(addr, &ca.cert, Some(&operator), "/commands/snapshot", &x509).ok()
    });
    assert_eq!(code, 200, "the x509 super user");
    let (code, body) =
        https_get_as(addr, &ca.cert, None, "/commands/snapshot", &x509).expect("answer");
    assert_eq!(code, 401, "no certificate: {body}");
    let (code, body) =
        https_get_as(addr, &ca.cert, Some(&store), "/commands/snapshot", &x509).expect("answer");
    assert_eq!(code, 403, "a subject without ALL on /: {body}");
}
