//! Security against Apache ZooKeeper 3.8 and zooraft: TLS on the client port
//! (`secureClientPort`, `ssl.clientAuth`, port unification), x509 ids and ACLs, refusals
//! of bad TLS input; and, zooraft only, PKCS12 stores, JKS refused, certificates reloaded.
//!
//! Certificates are made by each test with `openssl` (`zooraft_tests::pki`). Apache ZooKeeper
//! serves TLS only with the Netty connection factory (`serverCnxnFactory` in zoo.cfg, which
//! zooraft ignores); Java clients use `ClientCnxnSocketNetty` (`pki::java_client_flags`).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use zooraft_tests::pki::{self, Ca, Issued};
use zooraft_tests::rt::eventually;
use zooraft_tests::server::NETTY_TLS_JARS;
use zooraft_tests::tls_probe::{resuming_sessions, tls_session};
use zooraft_tests::zkcli::ZkCli;
use zooraft_tests::{against_both, free_port, ServerKind, TestServer};

const NETTY_FACTORY: &str = "org.apache.zookeeper.server.NettyServerCnxnFactory";

/// A CA, a server certificate and client certificates `CN=client1`, `CN=client2`,
/// `CN=admin`, in a temporary folder.
struct Pki {
    _dir: tempfile::TempDir,
    ca: Ca,
    other_ca: Ca,
    server: Issued,
    client1: Issued,
    client2: Issued,
    admin: Issued,
}

fn pki() -> Pki {
    let dir = tempfile::tempdir().expect("temp dir");
    let ca = Ca::new(dir.path(), "test-ca");
    let other_ca = Ca::new(dir.path(), "other-ca");
    Pki {
        server: ca.issue("server", "/CN=localhost/O=zooraft tests"),
        client1: ca.issue("client1", "/CN=client1"),
        client2: ca.issue("client2", "/CN=client2"),
        admin: ca.issue("admin", "/CN=admin"),
        ca,
        other_ca,
        _dir: dir,
    }
}

/// A server of `kind` with a plain port and a secure port under `client_auth`.
fn tls_server(
    kind: ServerKind,
    p: &Pki,
    client_auth: &str,
    extra: &[(&str, &str)],
) -> (TestServer, u16) {
    let secure = free_port();
    let mut b = TestServer::builder(kind)
        .config("serverCnxnFactory", NETTY_FACTORY)
        .config("secureClientPortAddress", "127.0.0.1");
    for (k, v) in pki::server_tls_config(secure, &p.server, &p.ca.cert, client_auth) {
        b = b.config(&k, &v);
    }
    for (k, v) in extra {
        b = b.config(k, v);
    }
    let server = b.start();
    wait_for_tls_port(secure);
    (server, secure)
}

/// The server is up once its plain port answers; ZooKeeper opens its TLS port a moment
/// later, so every test here waits until that port accepts too.
fn wait_for_tls_port(secure: u16) {
    eventually("the TLS port accepting", Duration::from_secs(30), || {
        std::net::TcpStream::connect(("127.0.0.1", secure)).ok()
    });
}

fn tls_cli(name: &'static str, secure: u16, p: &Pki, id: Option<&Issued>) -> ZkCli {
    let flags = format!(
        "-cp /etc/zookeeper/conf:/usr/share/java/zookeeper.jar:{NETTY_TLS_JARS} {}",
        pki::java_client_flags(id, &p.ca.cert)
    );
    ZkCli::start_with(name, &format!("127.0.0.1:{secure}"), &flags)
}

fn mntr_value(server: &TestServer, key: &str) -> u64 {
    let text = server.four_letter_word("mntr").expect("mntr");
    text.lines()
        .find_map(|l| {
            let (k, v) = l.split_once('\t')?;
            (k == key).then(|| v.trim().parse().ok())?
        })
        .unwrap_or_else(|| panic!("{key} missing from mntr:\n{text}"))
}

/// zkCli.sh over TLS with a client certificate: reads and writes, `whoami` shows the
/// certificate's subject as the x509 id, an x509 ACL grants that subject and refuses
/// another certificate, and `X509AuthenticationProvider.superUser` bypasses it.
fn zkcli_over_tls(kind: ServerKind) {
    let p = pki();
    let (_server, secure) = tls_server(
        kind,
        &p,
        "need",
        &[("X509AuthenticationProvider.superUser", "CN=admin")],
    );
    let mut cli = tls_cli("client1", secure, &p, Some(&p.client1));
    assert_eq!(cli.run("create /tls hello"), ["Created /tls"]);
    assert_eq!(cli.run("get /tls"), ["hello"]);
    let who = cli.run("whoami");
    assert!(who.iter().any(|l| l == "x509: CN=client1"), "{who:?}");
    assert_eq!(
        cli.run("create /x509-only secret x509:CN=client1:cdrwa"),
        ["Created /x509-only"]
    );
    assert_eq!(cli.run("get /x509-only"), ["secret"]);
    cli.quit();
    let mut other = tls_cli("client2", secure, &p, Some(&p.client2));
    let out = other.run("get /x509-only");
    assert!(
        out.iter().any(|l| l.contains("Insufficient permission")),
        "{}: client2 read an x509:CN=client1 node: {out:?}",
        kind.name()
    );
    other.quit();
    let mut admin = tls_cli("admin", secure, &p, Some(&p.admin));
    let who = admin.run("whoami");
    assert!(who.iter().any(|l| l == "super: "), "{who:?}");
    assert_eq!(admin.run("get /x509-only"), ["secret"]);
    admin.quit();
}

against_both!(
    zkcli_over_tls_apache,
    zkcli_over_tls_zooraft,
    zkcli_over_tls
);

/// kazoo with use_ssl=True, its own CA, client certificate and key (tests/python/kazoo_tls.py).
fn kazoo_over_tls(kind: ServerKind) {
    let p = pki();
    let (server, secure) = tls_server(kind, &p, "need", &[]);
    let mut python = Command::new("python3");
    python
        .arg("-u")
        .arg(zooraft_tests::suite_dir().join("python/kazoo_tls.py"))
        .arg(format!("127.0.0.1:{secure}"))
        .arg(&p.ca.cert)
        .arg(&p.client1.cert)
        .arg(&p.client1.key)
        .arg("CN=client1")
        .arg(&p.client2.cert)
        .arg(&p.client2.key)
        .env("PYTHONDONTWRITEBYTECODE", "1");
    zooraft_tests::checks::demand("kazoo_tls.py", python, &server, Duration::from_secs(200), 4);
}

against_both!(
    kazoo_over_tls_apache,
    kazoo_over_tls_zooraft,
    kazoo_over_tls
);

/// `ssl.clientAuth`: `need` refuses a client without a certificate, `want` and `none`
/// accept it; a client with a certificate is accepted under each.
fn client_auth_modes(kind: ServerKind) {
    let p = pki();
    for (mode, without_cert_ok) in [("need", false), ("want", true), ("none", true)] {
        let (server, secure) = tls_server(kind, &p, mode, &[]);
        let addr = ([127, 0, 0, 1], secure).into();
        let with = tls_session(addr, &p.ca.cert, Some(&p.client1));
        assert!(
            with.is_ok(),
            "{} {mode}: with a certificate: {with:?}",
            kind.name()
        );
        let without = tls_session(addr, &p.ca.cert, None);
        assert_eq!(
            without.is_ok(),
            without_cert_ok,
            "{} {mode}: without a certificate: {without:?}",
            kind.name()
        );
        drop(server);
    }
}

against_both!(
    client_auth_modes_apache,
    client_auth_modes_zooraft,
    client_auth_modes
);

/// Reads until the server closes; returns what it sent (bounded in time).
fn drain_until_closed(mut s: TcpStream) -> Vec<u8> {
    s.set_read_timeout(Some(Duration::from_secs(15)))
        .expect("timeout");
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return got,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return got,
            Err(e) => panic!("the server neither answered nor closed: {e}"),
        }
    }
}

/// Bad TLS input: plain bytes on the secure port, a truncated handshake, a certificate of
/// another CA, an expired certificate. Each is refused, the server keeps serving, and the
/// connection count comes back to where it was.
fn bad_tls_input(kind: ServerKind) {
    let p = pki();
    let stranger = p.other_ca.issue("stranger", "/CN=client1");
    let expired = p.ca.issue_expired("expired", "/CN=client1");
    let (server, secure) = tls_server(kind, &p, "need", &[]);
    let addr = ([127, 0, 0, 1], secure).into();
    let baseline = mntr_value(&server, "zk_num_alive_connections");
    let failed_before = mntr_value(&server, "zk_auth_failed_count");

    // A plain ZooKeeper handshake on the TLS port: closed, nothing sent back.
    let mut s = TcpStream::connect(addr).expect("connect");
    let mut frame = 45i32.to_be_bytes().to_vec();
    frame.extend_from_slice(&[0u8; 45]);
    s.write_all(&frame).expect("write");
    assert!(
        drain_until_closed(s).is_empty(),
        "{}: an answer to plain bytes",
        kind.name()
    );

    // A ClientHello cut short, then silence: the server gives up and closes.
    let mut s = TcpStream::connect(addr).expect("connect");
    s.write_all(&[
        0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03, 0x03,
    ])
    .expect("write");
    let _ = s.shutdown(std::net::Shutdown::Write);
    assert!(
        drain_until_closed(s).is_empty(),
        "{}: an answer to half a hello",
        kind.name()
    );

    for (what, id) in [("another CA's", &stranger), ("an expired", &expired)] {
        let r = tls_session(addr, &p.ca.cert, Some(id));
        assert!(
            r.is_err(),
            "{}: {what} certificate was accepted",
            kind.name()
        );
    }
    let ok = tls_session(addr, &p.ca.cert, Some(&p.client1));
    assert!(
        ok.is_ok(),
        "{}: a good client after the bad ones: {ok:?}",
        kind.name()
    );
    eventually(
        "the connection count back to where it was",
        Duration::from_secs(30),
        || (mntr_value(&server, "zk_num_alive_connections") <= baseline).then_some(()),
    );
    let failed = mntr_value(&server, "zk_auth_failed_count") - failed_before;
    assert!(
        failed >= 2,
        "{}: zk_auth_failed_count rose by {failed}",
        kind.name()
    );
    if kind == ServerKind::Zooraft {
        assert!(mntr_value(&server, "zk_tls_handshake_failed_count") >= 2);
        // Every one of them an x509 refusal in the per-scheme split of the total.
        assert_eq!(
            mntr_value(&server, "zk_auth_failed_count_x509"),
            mntr_value(&server, "zk_auth_failed_count")
        );
        let log = std::fs::read_to_string(server.log_path()).expect("server log");
        assert!(log.contains("TLS handshake refused"), "{log}");
    }
}

against_both!(bad_tls_input_apache, bad_tls_input_zooraft, bad_tls_input);

/// `client.portUnification=true`: the plain client port also accepts TLS. (Apache
/// ZooKeeper 3.8.0 registers the x509 provider only with a secure port, and refuses
/// unified-port TLS clients without this `authProvider` line; zooraft accepts the line.)
fn port_unification(kind: ServerKind) {
    let p = pki();
    let mut b = TestServer::builder(kind)
        .config("serverCnxnFactory", NETTY_FACTORY)
        .config("client.portUnification", "true")
        .config(
            "authProvider.x509",
            "org.apache.zookeeper.server.auth.X509AuthenticationProvider",
        );
    for (k, v) in pki::server_tls_config(free_port(), &p.server, &p.ca.cert, "need") {
        if k != "secureClientPort" {
            b = b.config(&k, &v);
        }
    }
    let server = b.start();
    let tls = tls_session(server.addr(), &p.ca.cert, Some(&p.client1));
    assert!(
        tls.is_ok(),
        "{}: TLS on the unified port: {tls:?}",
        kind.name()
    );
    let mut plain = ZkCli::start("plain", &server);
    assert_eq!(plain.run("create /plain x"), ["Created /plain"]);
    plain.quit();
}

against_both!(
    port_unification_apache,
    port_unification_zooraft,
    port_unification
);

/// zooraft reads PKCS12 key stores and a PKCS12 trust store without password or MAC.
#[test]
fn pkcs12_stores_zooraft() {
    let p = pki();
    let secure = free_port();
    let server = TestServer::builder(ServerKind::Zooraft)
        .config("secureClientPort", &secure.to_string())
        .config(
            "ssl.keyStore.location",
            &p.server.p12_store.display().to_string(),
        )
        .config("ssl.keyStore.password", pki::P12_PASSWORD)
        .config(
            "ssl.trustStore.location",
            &p.ca.p12_trust_store().display().to_string(),
        )
        .start();
    let addr = ([127, 0, 0, 1], secure).into();
    let r = tls_session(addr, &p.ca.cert, Some(&p.client1));
    assert!(r.is_ok(), "PKCS12 stores: {r:?}\n{}", server.log_tail());
}

/// A PEM key store whose PKCS#8 key is encrypted (AES-256, PBES2, openssl's default);
/// `ssl.keyStore.password` decrypts it. zooraft only: Apache ZooKeeper 3.8.0 on this JDK
/// starts with this store but aborts every handshake (checked here), so there is no
/// ZooKeeper behaviour to compare with.
#[test]
fn encrypted_pem_key_zooraft() {
    let kind = ServerKind::Zooraft;
    let p = pki();
    let enc_key = p.ca.dir.join("server-enc.key");
    let status = Command::new("openssl")
        .args(["pkcs8", "-topk8", "-v2", "aes-256-cbc", "-passout"])
        .arg(format!("pass:{}", pki::P12_PASSWORD))
        .arg("-in")
        .arg(&p.server.key)
        .arg("-out")
        .arg(&enc_key)
        .status()
        .expect("run openssl");
    assert!(status.success());
    let store = p.ca.dir.join("server-enc-store.pem");
    let mut text = std::fs::read_to_string(&enc_key).expect("read key");
    text.push_str(&std::fs::read_to_string(&p.server.cert).expect("read cert"));
    std::fs::write(&store, text).expect("write store");
    let secure = free_port();
    let server = TestServer::builder(kind)
        .config("serverCnxnFactory", NETTY_FACTORY)
        .config("secureClientPort", &secure.to_string())
        .config("secureClientPortAddress", "127.0.0.1")
        .config("ssl.keyStore.location", &store.display().to_string())
        .config("ssl.keyStore.type", "PEM")
        .config("ssl.keyStore.password", pki::P12_PASSWORD)
        .config("ssl.trustStore.location", &p.ca.cert.display().to_string())
        .config("ssl.trustStore.type", "PEM")
        .start();
    let addr = ([127, 0, 0, 1], secure).into();
    let r = tls_session(addr, &p.ca.cert, Some(&p.client1));
    assert!(r.is_ok(), "{}: {r:?}\n{}", kind.name(), server.log_tail());
}

/// Runs zooraft on `zoo_cfg` expecting it to refuse to start; returns its output.
fn refused_start(dir: &Path, zoo_cfg: &str) -> String {
    let cfg = dir.join("zoo.cfg");
    std::fs::write(&cfg, zoo_cfg).expect("write zoo.cfg");
    let mut child = Command::new(zooraft_tests::zooraft_binary())
        .arg("--config")
        .arg(&cfg)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn zooraft");
    let deadline = Instant::now() + Duration::from_secs(30);
    while child.try_wait().expect("wait").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("zooraft started with a configuration it should refuse:\n{zoo_cfg}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().expect("output");
    assert!(!out.status.success());
    String::from_utf8_lossy(&out.stderr).into_owned() + &String::from_utf8_lossy(&out.stdout)
}

/// A JKS key store is refused at start-up with the keytool conversion; so is a missing one.
#[test]
fn jks_refused_at_start_zooraft() {
    let p = pki();
    let dir = tempfile::tempdir().expect("temp dir");
    let jks = dir.path().join("server.jks");
    let status = Command::new("keytool")
        .args(["-importkeystore", "-srckeystore"])
        .arg(&p.server.p12_store)
        .args([
            "-srcstoretype",
            "PKCS12",
            "-srcstorepass",
            pki::P12_PASSWORD,
        ])
        .arg("-destkeystore")
        .arg(&jks)
        .args([
            "-deststoretype",
            "JKS",
            "-deststorepass",
            pki::P12_PASSWORD,
            "-noprompt",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("run keytool");
    assert!(status.success(), "keytool could not make a JKS store");
    let base = format!(
        "dataDir={}\nclientPort={}\nsecureClientPort={}\nssl.clientAuth=none\n",
        dir.path().join("data").display(),
        free_port(),
        free_port()
    );
    let out = refused_start(
        dir.path(),
        &format!(
            "{base}ssl.keyStore.location={}\nssl.keyStore.password=secret\n",
            jks.display()
        ),
    );
    assert!(out.contains("keytool -importkeystore"), "{out}");
    let out = refused_start(
        dir.path(),
        &format!("{base}ssl.keyStore.location=/nonexistent.pem\n"),
    );
    assert!(out.contains("/nonexistent.pem"), "{out}");
}

/// A renewed certificate is picked up without a restart: the server's key store is
/// replaced by one from another CA, and a client trusting only that CA gets in.
#[test]
fn certificates_reload_zooraft() {
    let p = pki();
    let secure = free_port();
    let store = p.ca.dir.join("live-store.pem");
    std::fs::copy(&p.server.pem_store, &store).expect("copy store");
    let server = TestServer::builder(ServerKind::Zooraft)
        .config("secureClientPort", &secure.to_string())
        .config("ssl.keyStore.location", &store.display().to_string())
        .config("ssl.clientAuth", "none")
        .start();
    let addr = ([127, 0, 0, 1], secure).into();
    assert!(tls_session(addr, &p.ca.cert, None).is_ok());
    assert!(tls_session(addr, &p.other_ca.cert, None).is_err());
    let renewed = p.other_ca.issue("renewed", "/CN=localhost");
    let tmp = p.ca.dir.join("live-store.tmp");
    std::fs::copy(&renewed.pem_store, &tmp).expect("copy renewed store");
    std::fs::rename(&tmp, &store).expect("replace store");
    eventually(
        "the renewed certificate served",
        Duration::from_secs(30),
        || tls_session(addr, &p.other_ca.cert, None).ok(),
    );
    let log = std::fs::read_to_string(server.log_path()).expect("server log");
    assert!(log.contains("certificates reloaded"), "{log}");
}

/// `secureClientPort` alone: zooraft serves TLS only (no plain port is opened).
#[test]
fn secure_port_alone_zooraft() {
    let p = pki();
    let dir = tempfile::tempdir().expect("temp dir");
    let secure = free_port();
    let cfg = dir.path().join("zoo.cfg");
    std::fs::write(
        &cfg,
        format!(
            "dataDir={}\nclientPortAddress=127.0.0.1\nsecureClientPort={secure}\n\
             ssl.keyStore.location={}\nssl.trustStore.location={}\n",
            dir.path().join("data").display(),
            p.server.pem_store.display(),
            p.ca.cert.display()
        ),
    )
    .expect("write zoo.cfg");
    let log = std::fs::File::create(dir.path().join("server.log")).expect("log");
    let mut child = Command::new(zooraft_tests::zooraft_binary())
        .arg("--config")
        .arg(&cfg)
        .stdout(log.try_clone().expect("log"))
        .stderr(log)
        .spawn()
        .expect("spawn zooraft");
    let addr = ([127, 0, 0, 1], secure).into();
    let served = (0..200).any(|_| {
        std::thread::sleep(Duration::from_millis(100));
        tls_session(addr, &p.ca.cert, Some(&p.client1)).is_ok()
    });
    let _ = child.kill();
    let _ = child.wait();
    let log = std::fs::read_to_string(dir.path().join("server.log")).unwrap_or_default();
    assert!(served, "no TLS session on the secure port alone:\n{log}");
    assert!(!log.contains(":2181"), "a plain port was opened:\n{log}");
}

/// A client that reconnects resumes its TLS session (no certificate signatures again),
/// and the resumed connection keeps the x509 id of the certificate it was made with.
/// Under `need`, with rustls's client (TLS 1.3 against zooraft, 1.2 against ZooKeeper 3.8).
fn tls_sessions_resume(kind: ServerKind) {
    let p = pki();
    let (server, secure) = tls_server(kind, &p, "need", &[]);
    let addr = ([127, 0, 0, 1], secure).into();
    // ZooKeeper may open its secure port a moment after the plain one.
    eventually("the TLS port serving", Duration::from_secs(30), || {
        tls_session(addr, &p.ca.cert, Some(&p.client1)).ok()
    });
    let seen = resuming_sessions(addr, &p.ca.cert, Some(&p.client1), 3)
        .unwrap_or_else(|e| panic!("{}: {e}\n{}", kind.name(), server.log_tail()));
    for (i, s) in seen.iter().enumerate() {
        assert_eq!(
            s.resumed,
            i > 0,
            "{}: connection {i}: {seen:?}",
            kind.name()
        );
        assert!(
            s.ids.iter().any(|id| id == "x509:CN=client1"),
            "{}: connection {i}: {seen:?}",
            kind.name()
        );
    }
    let expected = match kind {
        ServerKind::Zooraft => "Some(TLSv1_3)",
        ServerKind::Apache => "Some(TLSv1_2)",
    };
    assert!(seen.iter().all(|s| s.version == expected), "{seen:?}");
}

against_both!(
    tls_sessions_resume_apache,
    tls_sessions_resume_zooraft,
    tls_sessions_resume
);

/// zookeeper-client (Rust) over TLS (`tcp+tls://`), with its CA and a client certificate:
/// reads and writes, and its x509 ACL holds.
fn rust_client_over_tls(kind: ServerKind) {
    use zookeeper_client as zkc;
    // Two rustls providers are compiled in (ring for the server, aws-lc for this client):
    // name the one to use.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let p = pki();
    let (server, secure) = tls_server(kind, &p, "need", &[]);
    let read = |path: &std::path::Path| std::fs::read_to_string(path).expect("read PEM");
    let options = zkc::TlsOptions::new()
        .with_pem_ca(&read(&p.ca.cert))
        .expect("CA")
        .with_pem_identity(&read(&p.client1.cert), &read(&p.client1.key))
        .expect("identity");
    zooraft_tests::rt::block_on(async {
        let client = zooraft_tests::rt::within(
            "zookeeper-client TLS connect",
            Duration::from_secs(30),
            zkc::Client::connector()
                .with_tls(options)
                .connect(&format!("tcp+tls://127.0.0.1:{secure}")),
        )
        .await
        .unwrap_or_else(|e| panic!("{}: TLS connect: {e}\n{}", kind.name(), server.log_tail()));
        let acl = [zkc::Acl::new(
            zkc::Permission::ALL,
            zkc::AuthId::new("x509", "CN=client1"),
        )];
        let options = zkc::CreateMode::Persistent.with_acls(zkc::Acls::new(&acl));
        client
            .create("/rust-tls", b"x", &options)
            .await
            .expect("create");
        let (data, _) = client.get_data("/rust-tls").await.expect("get");
        assert_eq!(data, b"x");
        let (acls, _) = client.get_acl("/rust-tls").await.expect("getAcl");
        assert_eq!(acls, acl);
    });
}

against_both!(
    rust_client_over_tls_apache,
    rust_client_over_tls_zooraft,
    rust_client_over_tls
);

/// `ssl.hostnameVerification` (true, ZooKeeper's default) on the client port: ZooKeeper
/// 3.8 does not check a client certificate against the client's host (its ClientX509Util
/// turns that check off; members check each other, see `ensemble/quorum_tls.rs`), and
/// neither does zooraft: a client certificate for another host is accepted under `need`,
/// one from another CA is not.
fn client_host_not_checked(kind: ServerKind) {
    let p = pki();
    let elsewhere = p.ca.issue_for_hosts(
        "elsewhere",
        "/CN=elsewhere",
        "DNS:zk.elsewhere.invalid,IP:10.9.9.9",
    );
    let stranger = p.other_ca.issue("stranger", "/CN=client1");
    let (server, secure) = tls_server(kind, &p, "need", &[("ssl.hostnameVerification", "true")]);
    let addr = ([127, 0, 0, 1], secure).into();
    let other_host = tls_session(addr, &p.ca.cert, Some(&elsewhere));
    assert!(
        other_host.is_ok(),
        "{}: a certificate for another host: {other_host:?}\n{}",
        kind.name(),
        server.log_tail()
    );
    let untrusted = tls_session(addr, &p.ca.cert, Some(&stranger));
    assert!(
        untrusted.is_err(),
        "{}: another CA's certificate accepted",
        kind.name()
    );
}

against_both!(
    client_host_not_checked_apache,
    client_host_not_checked_zooraft,
    client_host_not_checked
);

/// `ssl.clientAuth` want or need without a trust store: client certificates are checked
/// against the system's CAs (ZooKeeper: the JDK's default CAs; zooraft: the system store,
/// /etc/ssl/certs). The test CA is in neither: under `need` its client certificate is
/// refused; under `want` the server starts and serves TLS to a client without one.
fn no_trust_store(kind: ServerKind) {
    let p = pki();
    for (mode, with_cert_ok, without_cert_ok) in [("need", false, false), ("want", false, true)] {
        let secure = free_port();
        let mut b = TestServer::builder(kind)
            .config("serverCnxnFactory", NETTY_FACTORY)
            .config("secureClientPortAddress", "127.0.0.1");
        for (k, v) in pki::server_tls_config(secure, &p.server, &p.ca.cert, mode) {
            if !k.starts_with("ssl.trustStore") {
                b = b.config(&k, &v);
            }
        }
        let server = b.start();
        wait_for_tls_port(secure);
        let addr = ([127, 0, 0, 1], secure).into();
        let with = tls_session(addr, &p.ca.cert, Some(&p.client1));
        assert_eq!(
            with.is_ok(),
            with_cert_ok,
            "{} {mode}: a certificate from a CA the system does not know: {with:?}\n{}",
            kind.name(),
            server.log_tail()
        );
        let without = tls_session(addr, &p.ca.cert, None);
        assert_eq!(
            without.is_ok(),
            without_cert_ok,
            "{} {mode}: without a certificate: {without:?}\n{}",
            kind.name(),
            server.log_tail()
        );
    }
}

against_both!(
    no_trust_store_apache,
    no_trust_store_zooraft,
    no_trust_store
);
