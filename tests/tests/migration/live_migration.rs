//! Live migration, first half: zooraft members join a running Apache ZooKeeper 3.8
//! ensemble as observers (`migrateFromZooKeeper=true`) and serve its clients. Three real
//! ZooKeeper voters are started here and loaded with every kind of data (kazoo and zkCli);
//! the observers sync from ZooKeeper's leader under a write load (kazoo and the Java
//! client), and their trees are
//! compared with ZooKeeper's node by node (data, ACL, every Stat field) at the same zxid.
//! Clients on the observers write, sync, watch and hold ephemerals; the ZooKeeper leader
//! expires a dead client's session and the observers apply it; ZooKeeper's leader is
//! killed and the observers follow the new one. Observers join over quorum TLS and quorum
//! SASL too (DIGEST-MD5, and Kerberos with a KDC of its own on loopback).

use std::time::Duration;

use bytes::Bytes;
use jute::{Acl, CreateMode, CreateRequest, Request};
use zookeeper_client as zc;
use zooraft_tests::kazoo_migrate::{load_every_kind, Background};
use zooraft_tests::kdc::Kdc;
use zooraft_tests::live_migration::{pairs, zxid_of, Extra, LiveMigration};
use zooraft_tests::pki::{quorum_keys, Ca};
use zooraft_tests::raw_client::{ConnectOptions, Handshake, RawClient, RawError};
use zooraft_tests::rt::{block_on, eventually, eventually_async, within};
use zooraft_tests::tree_dump::{assert_same, dump, Dump};
use zooraft_tests::zc::{connect, ephemeral, persistent};
use zooraft_tests::TestServer;

const WAIT: Duration = Duration::from_secs(60);

/// The highest zxid any running ZooKeeper member reports (the leader's `srvr` lags its
/// followers' by the last commit).
fn zookeeper_zxid(m: &LiveMigration) -> i64 {
    m.zookeeper
        .iter()
        .filter(|z| z.is_running())
        .filter_map(zxid_of)
        .max()
        .expect("a ZooKeeper member answers srvr")
}

/// Waits until `observer` has applied everything ZooKeeper committed (no writes running),
/// then compares the trees node by node.
fn assert_same_tree(m: &LiveMigration, observer: &TestServer, what: &str) {
    let target = eventually("ZooKeeper's zxid settles", WAIT, || {
        let a = zookeeper_zxid(m);
        std::thread::sleep(Duration::from_millis(300));
        (zookeeper_zxid(m) == a).then_some(a)
    });
    eventually("the observer reaches ZooKeeper's zxid", WAIT, || {
        (zxid_of(observer)? >= target).then_some(())
    });
    let expected = without_local_time(dump(&m.zookeeper_hosts()));
    let found = without_local_time(dump(&observer.connect_string()));
    assert_same(what, &expected, &found, 600);
}

/// `/zookeeper/config` is written by each server from its own configuration when it
/// starts or syncs, so its mtime differs between ZooKeeper's members too: it is left out
/// of the comparison (its data, ACL and every other field stay in).
fn without_local_time(mut d: Dump) -> Dump {
    if let Some(v) = d.get_mut("/zookeeper/config") {
        if let Some(at) = v.find("mtime: ") {
            let end = v[at..].find(", ").map_or(v.len(), |e| at + e + 2);
            v.replace_range(at..end, "");
        }
    }
    d
}

#[test]
fn observers_sync_serve_and_follow_like_zookeepers_own() {
    let mut m = LiveMigration::start(3, 2);
    load_every_kind(&m.zookeeper[0]);
    let dir = tempfile::tempdir().expect("temporary directory");
    // A write load on ZooKeeper from kazoo and the Java client while the first observer
    // joins: it syncs by SNAP and applies the transactions that follow it.
    let mut on_zookeeper = Background::spawn(
        &["write_at", "/load-zk", "8", &m.zookeeper_hosts()],
        dir.path().join("load-zk.out"),
    );
    let mut java = zooraft_tests::java::java_command("MigrationWriter");
    java.args(["/load-java", "8", &m.zookeeper_hosts()]);
    let mut java_on_zookeeper = Background::command(java, dir.path().join("load-java.out"));
    let observer = m.start_observer(0).connect_string();
    assert_eq!(
        m.observer(0).mode().as_deref(),
        Some("observer"),
        "srvr says what it is"
    );
    // Clients of the observer write while ZooKeeper's own clients do.
    let mut on_observer = Background::spawn(
        &["write_at", "/load-obs", "6", &observer],
        dir.path().join("load-obs.out"),
    );
    block_on(async {
        let c = connect(&observer, Duration::from_secs(10), WAIT).await;
        let zk = connect(&m.zookeeper_hosts(), Duration::from_secs(10), WAIT).await;
        // A write through the observer is answered with ZooKeeper's zxid and Stat.
        let (stat, _) = within(
            "create",
            WAIT,
            c.create("/via-observer", b"v0", &persistent()),
        )
        .await
        .expect("create through the observer");
        within("sync", WAIT, zk.sync("/via-observer"))
            .await
            .expect("sync");
        let (data, zk_stat) = zk
            .get_data("/via-observer")
            .await
            .expect("read on ZooKeeper");
        assert_eq!((data.as_slice(), zk_stat.czxid), (&b"v0"[..], stat.czxid));
        // Sequential, ephemeral, errors: as ZooKeeper answers them.
        let (_, seq) = c
            .create(
                "/via-observer/s-",
                b"",
                &zc::CreateMode::PersistentSequential.with_acls(zc::Acls::anyone_all()),
            )
            .await
            .expect("sequential");
        assert_eq!(format!("{seq}"), "0000000000");
        c.create("/via-observer/e", b"", &ephemeral())
            .await
            .expect("ephemeral");
        assert!(matches!(
            c.create("/via-observer", b"", &persistent()).await,
            Err(zc::Error::NodeExists)
        ));
        assert!(matches!(
            c.set_data("/via-observer", b"x", Some(7)).await,
            Err(zc::Error::BadVersion)
        ));
        // A watch set on the observer fires for a change made on ZooKeeper.
        let (_, _, watcher) = within("watch", WAIT, c.get_and_watch_data("/via-observer"))
            .await
            .expect("watch");
        zk.set_data("/via-observer", b"v1", None)
            .await
            .expect("set on ZooKeeper");
        let event = within("the watch fires", WAIT, watcher.changed()).await;
        assert_eq!(event.event_type, zc::EventType::NodeDataChanged);
        // sync on the observer: what ZooKeeper committed before it is readable after it.
        zk.set_data("/via-observer", b"v2", None)
            .await
            .expect("set");
        within("sync", WAIT, c.sync("/via-observer"))
            .await
            .expect("sync on the observer");
        let (data, _) = c.get_data("/via-observer").await.expect("read");
        assert_eq!(data, b"v2");
        // The session is global: ZooKeeper sees its ephemeral with the observer's session.
        let (_, e) = zk
            .get_data("/via-observer/e")
            .await
            .expect("ephemeral on ZooKeeper");
        assert_eq!(e.ephemeral_owner, c.session_id().0);
    });
    // `c` closed with the block above: the trees are compared once ZooKeeper and the observer
    // have applied its closeSession, not while it is on its way (its ephemeral would be in
    // one tree and not the other).
    block_on(async {
        let zk = connect(&m.zookeeper_hosts(), Duration::from_secs(10), WAIT).await;
        let obs = connect(&observer, Duration::from_secs(10), WAIT).await;
        eventually_async("the closed session's ephemeral to go", WAIT, || async {
            let on_zk = matches!(zk.check_stat("/via-observer/e").await, Ok(None));
            let on_obs = matches!(obs.check_stat("/via-observer/e").await, Ok(None));
            (on_zk && on_obs).then_some(())
        })
        .await
    });
    let zk_out = on_zookeeper.wait(WAIT);
    let java_out = java_on_zookeeper.wait(WAIT);
    let obs_out = on_observer.wait(WAIT);
    assert!(
        zk_out.contains("acked ") && obs_out.contains("acked ") && java_out.contains("acked "),
        "{zk_out}\n{java_out}\n{obs_out}"
    );
    // The Java client's writes are in the observer's tree, node for node (below).
    assert!(
        !java_out.contains("acked 0 "),
        "the Java client wrote nothing:\n{java_out}"
    );
    assert_same_tree(&m, m.observer(0), "the first observer after SNAP and load");
    assert!(m.observer(0).log_tail().contains("by SNAP"));

    // Killed and restarted, it resumes from its own copy: the leader sends a DIFF of
    // what it missed, not the whole tree.
    m.observer_mut(0).kill();
    block_on(async {
        let zk = connect(&m.zookeeper_hosts(), Duration::from_secs(10), WAIT).await;
        for i in 0..20 {
            zk.create(&format!("/while-down-{i}"), b"", &persistent())
                .await
                .expect("write while the observer is down");
        }
    });
    m.observer_mut(0).restart();
    zooraft_tests::live_migration::wait_serving(m.observer(0));
    eventually("the restarted observer syncs by DIFF", WAIT, || {
        m.observer(0).log_tail().contains("by DIFF").then_some(())
    });
    assert_same_tree(&m, m.observer(0), "the first observer after a restart");

    // A second observer joins the loaded ensemble.
    m.start_observer(1);
    assert_same_tree(&m, m.observer(1), "the second observer");

    // ZooKeeper's leader dies: the observers follow whichever member leads next.
    let leader = m.leader();
    m.zookeeper[leader].kill();
    let next = m.leader();
    assert_ne!(next, leader);
    for i in 0..2 {
        zooraft_tests::live_migration::wait_serving(m.observer(i));
    }
    block_on(async {
        let c = connect(
            &m.observer(1).connect_string(),
            Duration::from_secs(10),
            WAIT,
        )
        .await;
        within(
            "write after the leader change",
            WAIT,
            c.create("/after-failover", b"", &persistent()),
        )
        .await
        .expect("create through the observer after the leader changed");
    });
    assert_same_tree(
        &m,
        m.observer(0),
        "the first observer after the leader changed",
    );
    assert_same_tree(
        &m,
        m.observer(1),
        "the second observer after the leader changed",
    );
}

#[test]
fn a_dead_clients_session_expires_on_zookeeper_and_its_ephemerals_go_everywhere() {
    let mut m = LiveMigration::start(3, 1);
    let addr = m.start_observer(0).addr();
    let observer = m.observer(0).connect_string();
    let hosts = m.zookeeper_hosts();
    block_on(async {
        // A client of the observer with a 4 s session.
        let opts = ConnectOptions {
            timeout_ms: 4000,
            ..ConnectOptions::default()
        };
        let (mut c, hs) = RawClient::connect(addr, &opts, WAIT)
            .await
            .expect("a session through the observer");
        let session = hs.response.session_id;
        let create = Request::Create(CreateRequest {
            path: "/lease".into(),
            data: Some(Bytes::from_static(b"held")),
            acl: vec![Acl::open_unsafe()],
            flags: CreateMode::Ephemeral.flags(),
        });
        let reply = c.call(&create, WAIT).await.expect("create the ephemeral");
        assert_eq!(reply.err, 0, "create /lease");
        let zk = connect(&hosts, Duration::from_secs(10), WAIT).await;
        let (_, stat) = zk.get_data("/lease").await.expect("on ZooKeeper");
        assert_eq!(stat.ephemeral_owner, session, "a global session");
        // Alive for twice its timeout while the client pings the observer, which reports
        // the session to ZooKeeper's leader in its answers to the leader's pings.
        for _ in 0..16 {
            tokio::time::sleep(Duration::from_millis(500)).await;
            c.ping().await.expect("ping");
        }
        assert!(
            zk.get_data("/lease").await.is_ok(),
            "the observer kept the session alive on ZooKeeper's leader"
        );
        // The client dies without closing its session: ZooKeeper's leader expires it.
        drop(c);
    });
    for hosts in [hosts, observer] {
        eventually("the expired session's ephemeral goes", WAIT, || {
            block_on(async {
                let c = connect(&hosts, Duration::from_secs(10), WAIT).await;
                matches!(c.get_data("/lease").await, Err(zc::Error::NoNode)).then_some(())
            })
        });
    }
}

/// A create through `c` (err 0 expected by the caller).
async fn create_with(
    c: &mut RawClient,
    path: &str,
    flags: i32,
) -> zooraft_tests::raw_client::Reply {
    let req = Request::Create(CreateRequest {
        path: path.into(),
        data: Some(Bytes::from_static(b"x")),
        acl: vec![Acl::open_unsafe()],
        flags,
    });
    c.call(&req, WAIT).await.expect("create")
}

/// Resumes a session on `to`. A server that has not applied the client's last zxid yet
/// closes the connection instead of answering (ZooKeeper's rule, which zooraft keeps: the
/// client must not travel back in time), and a real client tries again; so does this one,
/// until the server has caught up.
async fn resume(to: std::net::SocketAddr, opts: &ConnectOptions) -> (RawClient, Handshake) {
    eventually_async(
        "the server catches up and resumes the session",
        WAIT,
        || async {
            match RawClient::connect(to, opts, WAIT).await {
                Ok(resumed) => Some(resumed),
                Err(RawError::Closed) => None,
                Err(e) => panic!("resume the session on {to}: {e:?}"),
            }
        },
    )
    .await
}

#[test]
fn sessions_move_between_zookeeper_and_observers_with_their_ephemerals() {
    let mut m = LiveMigration::start(3, 1);
    let observer = m.start_observer(0).addr();
    let zookeeper = m.zookeeper[0].addr();
    block_on(async {
        // From ZooKeeper to the observer, then back: each move keeps the session and its
        // ephemerals, and the writes that follow are the session's own (not SESSIONMOVED:
        // the observer revalidated the session with ZooKeeper's leader, which moved it).
        let (mut c, hs) = RawClient::connect(zookeeper, &ConnectOptions::default(), WAIT)
            .await
            .expect("a session on ZooKeeper");
        let (session, passwd) = (hs.response.session_id, hs.response.passwd.clone());
        let reply = create_with(&mut c, "/moving", CreateMode::Ephemeral.flags()).await;
        assert_eq!(reply.err, 0);
        let mut seen = reply.zxid;
        for (hop, to) in [observer, zookeeper, observer].into_iter().enumerate() {
            drop(c);
            let opts = ConnectOptions::resume(session, passwd.clone(), seen);
            let (mut next, hs) = resume(to, &opts).await;
            assert_eq!(hs.response.session_id, session, "hop {hop}: same session");
            let reply = create_with(
                &mut next,
                &format!("/moving-{hop}"),
                CreateMode::Ephemeral.flags(),
            )
            .await;
            assert_eq!(reply.err, 0, "hop {hop}: a write after the move");
            seen = reply.zxid;
            c = next;
        }
        // Every ephemeral is still the session's, on ZooKeeper and on the observer.
        for hosts in [m.zookeeper_hosts(), m.observer(0).connect_string()] {
            let z = connect(&hosts, Duration::from_secs(10), WAIT).await;
            within("sync", WAIT, z.sync("/")).await.expect("sync");
            for p in ["/moving", "/moving-0", "/moving-1", "/moving-2"] {
                let (_, stat) = z.get_data(p).await.expect("the ephemeral");
                assert_eq!(stat.ephemeral_owner, session, "{p} on {hosts}");
            }
        }
        // A session ZooKeeper has expired is refused by the observer too.
        drop(c);
        let bogus = ConnectOptions::resume(session ^ 0x5a5a, passwd.clone(), 0);
        let (_, hs) = RawClient::connect(observer, &bogus, WAIT)
            .await
            .expect("an answer");
        assert_eq!(hs.response.session_id, 0, "an unknown session is expired");
    });
}

#[test]
fn an_observer_added_by_reconfig_joins_and_cuts_over() {
    let mut m = LiveMigration::start_reconfigurable(3, 1);
    load_every_kind(&m.zookeeper[0]);
    // Started first (ZooKeeper's leader takes an observer its configuration does not
    // name yet), then added: the reconfig reaches it as INFORMANDACTIVATE.
    m.start_observer(0);
    let added = m.reconfig_add(0);
    println!("reconfig -add: {added:?}");
    assert_same_tree(&m, m.observer(0), "an observer added by reconfig");
    block_on(async {
        let z = connect(
            &m.observer(0).connect_string(),
            Duration::from_secs(10),
            WAIT,
        )
        .await;
        let (config, _) = z.get_data("/zookeeper/config").await.expect("config");
        let config = String::from_utf8_lossy(&config).to_string();
        assert!(
            config.contains("server.4=") && config.contains(":observer"),
            "{config}"
        );
    });
    let (ok, out) = zooraft_tests::zooraft_cmd(&[
        "migrate",
        "cutover",
        "--server",
        &m.observer(0).connect_string(),
    ]);
    assert!(ok, "{out}");
    assert!(out.contains("members=4"), "{out}");
    zooraft_tests::live_migration::wait_serving(m.observer(0));
    // One member: zooraft calls that standalone, as for any one-member configuration.
    let mode = m.observer(0).mode();
    assert!(
        matches!(mode.as_deref(), Some("standalone" | "leader")),
        "a one-member Raft ensemble: {mode:?}"
    );
}

#[test]
fn an_observer_follows_over_quorum_tls_and_cuts_over() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let ca = Ca::new(dir.path(), "quorum-ca");
    let member = ca.issue("member", "/CN=member");
    let keys = quorum_keys(&member, &ca);
    // ZooKeeper's members talk TLS only on their quorum ports; so does the observer.
    let extra = Extra {
        both: keys,
        ..Extra::default()
    };
    let mut m = LiveMigration::start_with(3, 2, extra);
    load_every_kind(&m.zookeeper[0]);
    m.start_observer(0);
    m.start_observer(1);
    let observer = m.observer(0).connect_string();
    block_on(async {
        let c = connect(&observer, Duration::from_secs(10), WAIT).await;
        c.create("/over-tls", b"", &persistent())
            .await
            .expect("a write forwarded over TLS");
        within("sync", WAIT, c.sync("/")).await.expect("sync");
    });
    assert_same_tree(&m, m.observer(0), "an observer over quorum TLS");
    // After the cut-over the zooraft members' own Raft traffic is TLS too (same keys).
    let (ok, out) = zooraft_tests::zooraft_cmd(&["migrate", "cutover", "--server", &observer]);
    assert!(ok, "{out}");
    block_on(async {
        let c = connect(&observer, Duration::from_secs(10), WAIT).await;
        c.create("/after-over-tls", b"", &persistent())
            .await
            .expect("a write through Raft over TLS");
    });
}

#[test]
fn an_observer_authenticates_with_quorum_sasl_and_cuts_over() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let jaas = dir.path().join("jaas.conf");
    std::fs::write(
        &jaas,
        "QuorumServer {\n  org.apache.zookeeper.server.auth.DigestLoginModule required\n  \
         user_learner=\"learnersecret\";\n};\n\
         QuorumLearner {\n  org.apache.zookeeper.server.auth.DigestLoginModule required\n  \
         username=\"learner\"\n  password=\"learnersecret\";\n};\n\
         Server {\n  org.apache.zookeeper.server.auth.DigestLoginModule required\n  \
         user_super=\"secret\";\n};\n",
    )
    .expect("jaas file");
    // ZooKeeper's leader refuses learners that do not authenticate.
    let extra = Extra {
        both: pairs(&[
            ("quorum.auth.enableSasl", "true"),
            ("quorum.auth.learnerRequireSasl", "true"),
            ("quorum.auth.serverRequireSasl", "true"),
            ("quorum.auth.learner.saslLoginContext", "QuorumLearner"),
            ("quorum.auth.server.saslLoginContext", "QuorumServer"),
        ]),
        zookeeper_jvm: pairs(&[(
            "java.security.auth.login.config",
            jaas.to_str().expect("utf-8"),
        )]),
        zooraft: pairs(&[("jaasLoginConfig", jaas.to_str().expect("utf-8"))]),
        ..Extra::default()
    };
    let mut m = LiveMigration::start_with(3, 1, extra);
    load_every_kind(&m.zookeeper[0]);
    m.start_observer(0);
    assert_same_tree(&m, m.observer(0), "an observer with quorum SASL");
    let observer = m.observer(0).connect_string();
    block_on(async {
        let c = connect(&observer, Duration::from_secs(10), WAIT).await;
        c.create("/over-sasl", b"", &persistent())
            .await
            .expect("a write forwarded on an authenticated link");
    });
    let (ok, out) = zooraft_tests::zooraft_cmd(&["migrate", "cutover", "--server", &observer]);
    assert!(ok, "{out}");
}

// --- Quorum SASL with Kerberos (GSSAPI), against a KDC of its own (zooraft_tests::kdc) ---

/// ZooKeeper's quorum with Kerberos, as its documentation sets it up: the leader's service
/// `zkquorum/localhost` (`QuorumServer`), every learner `learner/127.0.0.1`
/// (`QuorumLearner`: ZooKeeper authorizes a learner principal whose host is one of its
/// server lines' hosts), with `quorum.auth.kerberos.servicePrincipal=zkquorum/localhost`.
/// ZooKeeper's JVMs read krb5.conf from `-Djava.security.krb5.conf`; zooraft from
/// `KRB5_CONFIG`, as MIT's library reads it.
fn quorum_kerberos(kdc: &Kdc) -> Extra {
    let service = kdc.add_principal("zkquorum/localhost");
    let learner = kdc.add_principal("learner/127.0.0.1");
    let jaas = kdc.dir().join("quorum-jaas.conf");
    std::fs::write(
        &jaas,
        [
            kdc.jaas_section("QuorumServer", &service, "zkquorum/localhost"),
            // No `Server` section, as ZooKeeper's own quorum set-up has none: zooraft then
            // offers clients no SASL, and starts, as ZooKeeper does.
            kdc.jaas_section("QuorumLearner", &learner, "learner/127.0.0.1"),
        ]
        .concat(),
    )
    .expect("jaas file");
    let jaas = jaas.to_str().expect("utf-8");
    let krb5 = kdc.krb5_conf();
    let krb5 = krb5.to_str().expect("utf-8");
    Extra {
        // ZooKeeper's leader refuses learners that do not authenticate.
        both: pairs(&[
            ("quorum.auth.enableSasl", "true"),
            ("quorum.auth.learnerRequireSasl", "true"),
            ("quorum.auth.serverRequireSasl", "true"),
            (
                "quorum.auth.kerberos.servicePrincipal",
                "zkquorum/localhost",
            ),
            ("quorum.auth.learner.saslLoginContext", "QuorumLearner"),
            ("quorum.auth.server.saslLoginContext", "QuorumServer"),
        ]),
        zookeeper_jvm: pairs(&[
            ("java.security.auth.login.config", jaas),
            ("java.security.krb5.conf", krb5),
        ]),
        zooraft: pairs(&[("jaasLoginConfig", jaas)]),
        zooraft_env: pairs(&[("KRB5_CONFIG", krb5)]),
    }
}

/// The ZooKeeper leader's log.
fn leader_log(m: &LiveMigration) -> String {
    std::fs::read_to_string(m.zookeeper[m.leader()].log_path()).unwrap_or_default()
}

#[test]
fn an_observer_authenticates_with_quorum_kerberos_and_cuts_over() {
    let kdc = Kdc::start();
    // Observer 0 is ZooKeeper's own (what a learner must do), observer 1 zooraft.
    let mut m = LiveMigration::start_with(3, 2, quorum_kerberos(&kdc));
    // ZooKeeper's voters formed their ensemble over Kerberos (they serve), and its own
    // observer joins with it.
    let mut zookeeper_observer = m.start_zookeeper_observer(0);
    assert_eq!(zookeeper_observer.mode().as_deref(), Some("observer"));
    let accepted = "authenticationID=learner/127.0.0.1@ZOORAFT.TEST";
    assert!(leader_log(&m).contains(accepted), "{}", leader_log(&m));
    zookeeper_observer.kill();
    load_every_kind(&m.zookeeper[0]);
    m.start_observer(1);
    assert!(
        std::fs::read_to_string(m.observer(1).log_path())
            .unwrap_or_default()
            .contains("registered with the ZooKeeper leader as an observer"),
        "{}",
        m.observer(1).log_tail()
    );
    assert_same_tree(&m, m.observer(1), "an observer with quorum Kerberos");
    let observer = m.observer(1).connect_string();
    block_on(async {
        let c = connect(&observer, Duration::from_secs(10), WAIT).await;
        c.create("/over-kerberos", b"", &persistent())
            .await
            .expect("a write forwarded on a link authenticated with Kerberos");
        within("sync", WAIT, c.sync("/")).await.expect("sync");
    });
    assert_same_tree(&m, m.observer(1), "after a write through the observer");
    let (ok, out) = zooraft_tests::zooraft_cmd(&["migrate", "cutover", "--server", &observer]);
    assert!(ok, "{out}");
    block_on(async {
        let c = connect(&observer, Duration::from_secs(10), WAIT).await;
        c.create("/after-kerberos", b"", &persistent())
            .await
            .expect("a write through Raft after the cut-over");
    });
}

#[test]
fn an_observer_the_leader_does_not_accept_over_kerberos_does_not_join() {
    let kdc = Kdc::start();
    let mut m = LiveMigration::start_with(3, 1, quorum_kerberos(&kdc));
    // A principal of the realm whose host is not in ZooKeeper's server lines.
    let elsewhere = kdc.add_principal("learner/elsewhere");
    let learner = |name: &str, keytab: &std::path::Path, principal: &str| {
        let path = kdc.dir().join(name);
        std::fs::write(&path, kdc.jaas_section("QuorumLearner", keytab, principal))
            .expect("jaas file");
        path.to_str().expect("utf-8").to_string()
    };
    let cases = [
        (
            learner("elsewhere.conf", &elsewhere, "learner/elsewhere"),
            "the leader refused this learner",
        ),
        // A principal the keytab has no key for.
        (
            learner("wrong.conf", &elsewhere, "learner/127.0.0.1"),
            "no ticket for learner/127.0.0.1@ZOORAFT.TEST from keyTab",
        ),
        (
            learner(
                "none.conf",
                &kdc.dir().join("none.keytab"),
                "learner/127.0.0.1",
            ),
            "cannot read keyTab",
        ),
    ];
    for (jaas, why) in &cases {
        let observer = m.spawn_observer(0, &[("jaasLoginConfig", jaas)]);
        let log = observer.log_path();
        eventually(&format!("the observer's log says {why:?}"), WAIT, || {
            std::fs::read_to_string(&log)
                .ok()?
                .contains(why)
                .then_some(())
        });
        assert!(
            !observer.is_serving(),
            "an observer that did not join serves"
        );
        assert!(observer.is_running(), "the observer keeps trying");
    }
    // The leader refused the first for the reason it logs.
    assert!(
        leader_log(&m).contains("learner/elsewhere@ZOORAFT.TEST is not authorized to connect"),
        "{}",
        leader_log(&m)
    );
    // ZooKeeper keeps serving.
    block_on(async {
        let c = connect(&m.zookeeper_hosts(), Duration::from_secs(10), WAIT).await;
        c.create("/still-serving", b"", &persistent())
            .await
            .expect("ZooKeeper serves");
    });
}
