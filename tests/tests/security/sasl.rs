//! SASL DIGEST-MD5, Kerberos (GSSAPI) and enforced authentication against Apache ZooKeeper
//! 3.8 and zooraft: zkCli.sh with a JAAS client file, kazoo with `sasl_options`, `sasl:`
//! ACLs, a wrong password and garbage tokens refused with AUTHFAILED and the connection
//! closed, and `enforce.auth.enabled` closing unauthenticated sessions. The Kerberos tests
//! run a KDC of their own on loopback (`zooraft_tests::kdc`).
//!
//! Apache ZooKeeper reads the server's JAAS file from the JVM property
//! `java.security.auth.login.config`; zooraft from the zoo.cfg key `jaasLoginConfig`. Each
//! test writes both files and gives each server its way.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use bytes::{BufMut, BytesMut};
use zooraft_tests::kdc::Kdc;
use zooraft_tests::zkcli::ZkCli;
use zooraft_tests::{against_both, ServerKind, TestServer, TestServerBuilder};

const SERVER_JAAS: &str =
    "Server {\n    org.apache.zookeeper.server.auth.DigestLoginModule required\n    \
    user_super=\"adminsecret\"\n    user_bob=\"bobsecret\";\n};\n";

fn client_jaas(dir: &Path, name: &str, user: &str, password: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(
        &path,
        format!(
            "Client {{\n    org.apache.zookeeper.server.auth.DigestLoginModule required\n    \
             username=\"{user}\"\n    password=\"{password}\";\n}};\n"
        ),
    )
    .expect("write client JAAS file");
    path
}

/// A server builder with SASL DIGEST-MD5 users super and bob.
fn sasl_server(kind: ServerKind, dir: &Path) -> TestServerBuilder {
    let jaas = dir.join("server-jaas.conf");
    std::fs::write(&jaas, SERVER_JAAS).expect("write server JAAS file");
    let jaas = jaas.display().to_string();
    TestServer::builder(kind)
        .jvm_property("java.security.auth.login.config", &jaas)
        .config("jaasLoginConfig", &jaas)
        .config(
            "authProvider.1",
            "org.apache.zookeeper.server.auth.SASLAuthenticationProvider",
        )
}

fn jaas_cli(name: &'static str, server: &TestServer, jaas: &Path) -> ZkCli {
    let flags = format!("-Djava.security.auth.login.config={}", jaas.display());
    ZkCli::start_with(name, &server.connect_string(), &flags)
}

/// zkCli.sh with a JAAS client file authenticates as `sasl:bob`, owns a `sasl:bob` node that
/// a client without SASL may not read; a wrong password ends in AuthFailed.
fn zkcli_digest_md5(kind: ServerKind) {
    let dir = tempfile::tempdir().expect("temp dir");
    let server = sasl_server(kind, dir.path()).start();
    let bob = client_jaas(dir.path(), "bob.conf", "bob", "bobsecret");
    let mut cli = jaas_cli("bob", &server, &bob);
    cli.wait_for_line(
        "WatchedEvent state:SaslAuthenticated type:None path:null",
        Duration::from_secs(30),
    );
    let who = cli.run("whoami");
    assert!(
        who.iter().any(|l| l == "sasl: bob"),
        "{}: {who:?}",
        kind.name()
    );
    assert_eq!(
        cli.run("create /sasl-only s sasl:bob:cdrwa"),
        ["Created /sasl-only"]
    );
    assert_eq!(cli.run("get /sasl-only"), ["s"]);
    cli.quit();
    let mut plain = ZkCli::start("plain", &server);
    let out = plain.run("get /sasl-only");
    assert!(
        out.iter().any(|l| l.contains("Insufficient permission")),
        "{}: a client without SASL read a sasl:bob node: {out:?}",
        kind.name()
    );
    plain.quit();
    let wrong = client_jaas(dir.path(), "wrong.conf", "bob", "not-bobs");
    let cli = jaas_cli("wrong", &server, &wrong);
    cli.wait_for_line(
        "WatchedEvent state:AuthFailed type:None path:null",
        Duration::from_secs(30),
    );
    drop(cli);
    assert!(
        server.is_serving(),
        "{}: the server stopped serving",
        kind.name()
    );
}

against_both!(
    zkcli_digest_md5_apache,
    zkcli_digest_md5_zooraft,
    zkcli_digest_md5
);

/// kazoo with `sasl_options` (DIGEST-MD5): tests/python/kazoo_sasl.py.
fn kazoo_digest_md5(kind: ServerKind) {
    let dir = tempfile::tempdir().expect("temp dir");
    let server = sasl_server(kind, dir.path()).start();
    let mut python = Command::new("python3");
    python
        .arg("-u")
        .arg(zooraft_tests::suite_dir().join("python/kazoo_sasl.py"))
        .args(["bob", "bobsecret"])
        .env("PYTHONDONTWRITEBYTECODE", "1");
    zooraft_tests::checks::demand(
        "kazoo_sasl.py",
        python,
        &server,
        Duration::from_secs(180),
        3,
    );
}

against_both!(
    kazoo_digest_md5_apache,
    kazoo_digest_md5_zooraft,
    kazoo_digest_md5
);

/// Curator with a JAAS client file (Kafka's way): authenticates as `sasl:bob` (whoAmI), owns
/// a `sasl:bob` node, and a Curator client without SASL gets NoAuth on it.
fn curator_digest_md5(kind: ServerKind) {
    let dir = tempfile::tempdir().expect("temp dir");
    let server = sasl_server(kind, dir.path()).start();
    let jaas = client_jaas(dir.path(), "client-jaas.conf", "bob", "bobsecret");
    let mut java = zooraft_tests::java::java_command("CuratorSasl");
    java.arg(&jaas);
    zooraft_tests::checks::demand("CuratorSasl", java, &server, Duration::from_secs(120), 3);
}

against_both!(
    curator_digest_md5_apache,
    curator_digest_md5_zooraft,
    curator_digest_md5
);

/// Opens a session by hand and sends SASL requests with `tokens`; returns the last reply's
/// error code (None if the server closed without one) and whether it then closed.
fn raw_sasl(server: &TestServer, tokens: &[&[u8]]) -> (Option<i32>, bool) {
    let mut s = TcpStream::connect(server.addr()).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(15)))
        .expect("timeout");
    s.write_all(&zooraft_tests::tls_probe::new_session_frame())
        .expect("write handshake");
    let mut len = [0u8; 4];
    s.read_exact(&mut len).expect("handshake response");
    let mut resp = vec![0u8; i32::from_be_bytes(len) as usize];
    s.read_exact(&mut resp).expect("handshake response body");
    let mut err = None;
    for (xid, token) in tokens.iter().enumerate() {
        let mut frame = BytesMut::new();
        frame.put_i32(12 + token.len() as i32);
        frame.put_i32(xid as i32 + 1);
        frame.put_i32(102); // sasl
        frame.put_i32(token.len() as i32);
        frame.put_slice(token);
        let _ = s.write_all(&frame);
        let mut len = [0u8; 4];
        err = match s.read_exact(&mut len) {
            Ok(()) => {
                let mut reply = vec![0u8; i32::from_be_bytes(len).clamp(0, 1 << 16) as usize];
                s.read_exact(&mut reply).ok().and_then(|()| {
                    reply
                        .get(12..16)
                        .map(|e| i32::from_be_bytes([e[0], e[1], e[2], e[3]]))
                })
            }
            Err(_) => None,
        };
    }
    let mut rest = [0u8; 64];
    let closed = loop {
        match s.read(&mut rest) {
            Ok(0) => break true,
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break true,
            Err(_) => break false,
        }
    };
    (err, closed)
}

/// A SASL response of garbage (after the challenge) gets AUTHFAILED and the connection
/// closed; a token of 1 MiB (over jute.maxbuffer) closes the connection; the server keeps
/// serving.
fn garbage_tokens(kind: ServerKind) {
    let dir = tempfile::tempdir().expect("temp dir");
    let server = sasl_server(kind, dir.path()).start();
    let (err, closed) = raw_sasl(&server, &[b"", b"\x00\xffnot a digest response"]);
    assert_eq!(err, Some(-115), "{}: garbage token", kind.name());
    assert!(
        closed,
        "{}: connection left open after AUTHFAILED",
        kind.name()
    );
    let (_, closed) = raw_sasl(&server, &[&vec![b'x'; 1 << 20]]);
    assert!(
        closed,
        "{}: connection left open after a 1 MiB token",
        kind.name()
    );
    assert!(server.is_serving());
}

against_both!(
    garbage_tokens_apache,
    garbage_tokens_zooraft,
    garbage_tokens
);

/// `enforce.auth.enabled=true` with `enforce.auth.schemes=sasl`: a client without SASL is
/// answered "Session closed because client failed to authenticate"; bob works.
fn enforced_sasl(kind: ServerKind) {
    let dir = tempfile::tempdir().expect("temp dir");
    let server = sasl_server(kind, dir.path())
        .config("enforce.auth.enabled", "true")
        .config("enforce.auth.schemes", "sasl")
        .start();
    let mut plain = ZkCli::start("plain", &server);
    plain.send("ls /");
    plain.wait_for_line(
        "KeeperErrorCode = Session closed because client failed to authenticate for /",
        Duration::from_secs(30),
    );
    drop(plain);
    let bob = client_jaas(dir.path(), "bob.conf", "bob", "bobsecret");
    let mut cli = jaas_cli("bob", &server, &bob);
    cli.wait_for_line(
        "WatchedEvent state:SaslAuthenticated type:None path:null",
        Duration::from_secs(30),
    );
    assert_eq!(cli.run("create /enforced x"), ["Created /enforced"]);
    cli.quit();
    if kind == ServerKind::Zooraft {
        let mntr = server.four_letter_word("mntr").expect("mntr");
        assert!(
            !mntr.contains("zk_auth_failed_count\t0\n")
                && mntr.contains("zk_auth_failed_count_enforced\t1\n"),
            "an enforced refusal was not counted:\n{mntr}"
        );
    }
}

against_both!(enforced_sasl_apache, enforced_sasl_zooraft, enforced_sasl);

// --- Kerberos (GSSAPI) against a KDC of its own on loopback (zooraft_tests::kdc) ---

/// A KDC with the server's principal `zookeeper/localhost` and two clients, `zkclient` and
/// `app/localhost` (a principal with a host part); the keytabs of the clients.
struct Realm {
    kdc: Kdc,
    server_keytab: PathBuf,
    client: PathBuf,
    app: PathBuf,
}

fn realm() -> Realm {
    let kdc = Kdc::start();
    Realm {
        server_keytab: kdc.add_principal("zookeeper/localhost"),
        client: kdc.add_principal("zkclient"),
        app: kdc.add_principal("app/localhost"),
        kdc,
    }
}

fn krb5_jaas(path: &Path, kdc: &Kdc, section: &str, keytab: &Path, name: &str) {
    std::fs::write(path, kdc.jaas_section(section, keytab, name)).expect("write JAAS file");
}

/// A server whose JAAS `Server` section logs in as `zookeeper/localhost` from its keytab.
fn kerberos_server(kind: ServerKind, realm: &Realm) -> TestServerBuilder {
    let jaas = realm.kdc.dir().join("server-jaas.conf");
    krb5_jaas(
        &jaas,
        &realm.kdc,
        "Server",
        &realm.server_keytab,
        "zookeeper/localhost",
    );
    let jaas = jaas.display().to_string();
    let krb5 = realm.kdc.krb5_conf().display().to_string();
    TestServer::builder(kind)
        .jvm_property("java.security.auth.login.config", &jaas)
        .jvm_property("java.security.krb5.conf", &krb5)
        .env("KRB5_CONFIG", &krb5)
        .config("4lw.commands.whitelist", "*")
        .config("jaasLoginConfig", &jaas)
        .config(
            "authProvider.1",
            "org.apache.zookeeper.server.auth.SASLAuthenticationProvider",
        )
}

/// zkCli.sh logging in from a keytab (JAAS `Client` section with Krb5LoginModule).
fn kerberos_cli(name: &'static str, server: &TestServer, realm: &Realm, who: &str) -> ZkCli {
    let keytab = if who == "zkclient" {
        &realm.client
    } else {
        &realm.app
    };
    let jaas = realm
        .kdc
        .dir()
        .join(format!("{}-jaas.conf", who.replace('/', "_")));
    krb5_jaas(&jaas, &realm.kdc, "Client", keytab, who);
    let flags = format!(
        "-Djava.security.auth.login.config={} -Djava.security.krb5.conf={} \
         -Dzookeeper.server.principal={}",
        jaas.display(),
        realm.kdc.krb5_conf().display(),
        realm.kdc.principal("zookeeper/localhost")
    );
    let cli = ZkCli::start_with(name, &server.connect_string(), &flags);
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let lines = cli.lines();
        if lines.iter().any(|l| l.contains("state:SaslAuthenticated")) {
            return cli;
        }
        assert!(
            !lines.iter().any(|l| l.contains("state:AuthFailed"))
                && std::time::Instant::now() < deadline,
            "{}: zkCli {who} did not authenticate: {lines:?}\n--- server log ---\n{}\n--- KDC log ---\n{}",
            server.kind().name(),
            server.log_tail(),
            realm.kdc.log()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// zkCli.sh authenticates by Kerberos as `sasl:zkclient@ZOORAFT.TEST` (the full principal),
/// owns a node only that principal may read; `app/localhost`, another principal of the
/// realm, is `sasl:app@ZOORAFT.TEST` under `kerberos.removeHostFromPrincipal=true` and is
/// refused the node. zooraft's `cons` shows the id.
fn zkcli_gssapi(kind: ServerKind) {
    let realm = realm();
    let server = kerberos_server(kind, &realm)
        .config("kerberos.removeHostFromPrincipal", "true")
        .start();
    let owner = realm.kdc.principal("zkclient");
    let mut cli = kerberos_cli("zkclient", &server, &realm, "zkclient");
    let who = cli.run("whoami");
    assert!(
        who.iter().any(|l| *l == format!("sasl: {owner}")),
        "{}: {who:?}",
        kind.name()
    );
    assert_eq!(
        cli.run(&format!("create /krb-only k sasl:{owner}:cdrwa")),
        ["Created /krb-only"]
    );
    assert_eq!(cli.run("get /krb-only"), ["k"]);
    if kind == ServerKind::Zooraft {
        let cons = server.four_letter_word("cons").expect("cons");
        assert!(
            cons.contains(&format!(",auth=sasl:{owner})")),
            "cons does not show the SASL id:\n{cons}"
        );
    }
    cli.quit();
    let mut app = kerberos_cli("app", &server, &realm, "app/localhost");
    let who = app.run("whoami");
    assert!(
        who.iter().any(|l| l == "sasl: app@ZOORAFT.TEST"),
        "{}: the host stays in the id: {who:?}",
        kind.name()
    );
    let out = app.run("get /krb-only");
    assert!(
        out.iter().any(|l| l.contains("Insufficient permission")),
        "{}: app read zkclient's node: {out:?}",
        kind.name()
    );
    app.quit();
    assert!(server.is_serving(), "{}: not serving", kind.name());
}

against_both!(zkcli_gssapi_apache, zkcli_gssapi_zooraft, zkcli_gssapi);

/// kazoo with `sasl_options={'mechanism': 'GSSAPI'}` (pure-sasl over pykerberos) and a
/// ticket from `kinit -kt`, on a server with `kerberos.removeRealmFromPrincipal=true`: the id
/// is `sasl:zkclient` (tests/python/kazoo_gssapi.py).
fn kazoo_gssapi(kind: ServerKind) {
    let realm = realm();
    let server = kerberos_server(kind, &realm)
        .config("kerberos.removeRealmFromPrincipal", "true")
        .start();
    let cache = realm.kdc.kinit("zkclient", &realm.client);
    let mut python = Command::new("python3");
    python
        .arg("-u")
        .arg(zooraft_tests::suite_dir().join("python/kazoo_gssapi.py"))
        .arg("zkclient")
        .env("KRB5_CONFIG", realm.kdc.krb5_conf())
        .env("KRB5CCNAME", cache)
        .env("PYTHONDONTWRITEBYTECODE", "1");
    zooraft_tests::checks::demand(
        "kazoo_gssapi.py",
        python,
        &server,
        Duration::from_secs(180),
        2,
    );
}

against_both!(kazoo_gssapi_apache, kazoo_gssapi_zooraft, kazoo_gssapi);

/// GSSAPI tokens of garbage (one that looks like a Kerberos token, one that does not, an
/// empty one) get AUTHFAILED and the connection closed; a 1 MiB token closes it; the server
/// keeps serving, and zooraft counts the refusals as SASL failures.
fn gssapi_garbage(kind: ServerKind) {
    let realm = realm();
    let server = kerberos_server(kind, &realm).start();
    // The empty first token of a DIGEST-MD5 client, too: this server only speaks GSSAPI.
    for token in [
        &b"\x60\x82\x01\x00\x06\x09garbage"[..],
        b"not kerberos at all",
        b"",
    ] {
        let (err, closed) = raw_sasl(&server, &[token]);
        assert_eq!(err, Some(-115), "{}: garbage GSSAPI token", kind.name());
        assert!(closed, "{}: left open after AUTHFAILED", kind.name());
    }
    let (_, closed) = raw_sasl(&server, &[&vec![0x60; 1 << 20]]);
    assert!(closed, "{}: left open after a 1 MiB token", kind.name());
    assert!(server.is_serving(), "{}: not serving", kind.name());
    if kind == ServerKind::Zooraft {
        let mntr = server.four_letter_word("mntr").expect("mntr");
        assert!(
            mntr.contains("zk_auth_failed_count_sasl\t3\n"),
            "SASL failures not counted by scheme:\n{mntr}"
        );
    }
}

against_both!(
    gssapi_garbage_apache,
    gssapi_garbage_zooraft,
    gssapi_garbage
);

/// zookeeper-client (Rust, feature `sasl-digest-md5`) authenticates as bob by DIGEST-MD5,
/// owns a `sasl:bob` node a client without SASL may not read, and a wrong password gets no
/// session.
fn rust_client_digest_md5(kind: ServerKind) {
    use zookeeper_client as zkc;
    let dir = tempfile::tempdir().expect("temp dir");
    let server = sasl_server(kind, dir.path()).start();
    let connect = server.connect_string();
    let sasl = |password: &'static str| {
        zkc::Client::connector()
            .with_session_timeout(Duration::from_secs(10))
            .with_sasl(zkc::SaslOptions::digest_md5("bob", password))
            .connect(&connect)
    };
    let limit = Duration::from_secs(30);
    zooraft_tests::rt::block_on(async {
        let bob = zooraft_tests::rt::within("SASL connect", limit, sasl("bobsecret"))
            .await
            .unwrap_or_else(|e| {
                panic!("{}: SASL connect: {e}\n{}", kind.name(), server.log_tail())
            });
        let acl = [zkc::Acl::new(
            zkc::Permission::ALL,
            zkc::AuthId::new("sasl", "bob"),
        )];
        let options = zkc::CreateMode::Persistent.with_acls(zkc::Acls::new(&acl));
        bob.create("/rust-sasl", b"b", &options)
            .await
            .expect("create");
        let (data, _) = bob.get_data("/rust-sasl").await.expect("get");
        assert_eq!(data, b"b");
        let plain = zooraft_tests::zc::connect(&connect, Duration::from_secs(10), limit).await;
        let refused = plain.get_data("/rust-sasl").await;
        assert_eq!(
            refused.err(),
            Some(zkc::Error::NoAuth),
            "{}: a client without SASL read a sasl:bob node",
            kind.name()
        );
        let wrong = zooraft_tests::rt::within("wrong password", limit, sasl("not-bobs")).await;
        assert!(
            wrong.is_err(),
            "{}: a wrong password got a session",
            kind.name()
        );
    });
    assert!(server.is_serving());
}

against_both!(
    rust_client_digest_md5_apache,
    rust_client_digest_md5_zooraft,
    rust_client_digest_md5
);
