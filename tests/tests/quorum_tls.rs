//! TLS between members (`sslQuorum=true`, `ssl.quorum.*`): a 3-member ensemble elects and
//! replicates over mutual TLS (zooraft and Apache ZooKeeper 3.8); a zooraft member whose
//! certificate comes from another CA stays out, and both sides log why.

use std::time::Duration;

use harness::pki::{Ca, Issued};
use harness::rt::{block_on, eventually};
use harness::{free_port, zc, ServerKind, TestEnsemble, TestServer};

fn quorum_keys(store: &Issued, ca: &Ca) -> Vec<(String, String)> {
    [
        ("sslQuorum", "true".to_string()),
        (
            "ssl.quorum.keyStore.location",
            store.pem_store.display().to_string(),
        ),
        ("ssl.quorum.keyStore.type", "PEM".into()),
        (
            "ssl.quorum.trustStore.location",
            ca.cert.display().to_string(),
        ),
        ("ssl.quorum.trustStore.type", "PEM".into()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

/// Writes on one member and reads the write on another, through zookeeper-client.
fn replicates(write_to: &str, read_from: &str) {
    block_on(async {
        let wait = Duration::from_secs(30);
        let a = zc::connect(write_to, Duration::from_secs(10), wait).await;
        a.create("/over-tls", b"replicated", &zc::persistent())
            .await
            .expect("create");
        let b = zc::connect(read_from, Duration::from_secs(10), wait).await;
        b.sync("/").await.expect("sync");
        let (data, _) = b.get_data("/over-tls").await.expect("get");
        assert_eq!(data, b"replicated");
    });
}

fn ensemble_over_tls(kind: ServerKind) {
    let dir = tempfile::tempdir().expect("temp dir");
    let ca = Ca::new(dir.path(), "quorum-ca");
    let member = ca.issue("member", "/CN=member");
    let keys = quorum_keys(&member, &ca);
    let extra: Vec<(&str, &str)> = keys.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let e = TestEnsemble::start_kind(kind, 3, 0, &extra);
    let leader = e.leader();
    let other = (leader + 1) % 3;
    replicates(
        &e.member(leader).connect_string(),
        &e.member(other).connect_string(),
    );
    if kind == ServerKind::Zooraft {
        // The peer port speaks TLS only: a plain hello is refused, and logged.
        use std::io::Write;
        let mut s = std::net::TcpStream::connect(("127.0.0.1", e.peer_port(0))).expect("connect");
        let _ = s.write_all(&[0, 0, 0, 13, 0, 0, 0, 0, 0, 0, 0, 0, 9, 0, 0, 0, 1]);
        drop(s);
        eventually("the plain hello refused", Duration::from_secs(20), || {
            std::fs::read_to_string(e.member(0).log_path())
                .unwrap_or_default()
                .contains("quorum TLS: refused a member connection")
                .then_some(())
        });
    }
}

#[test]
fn ensemble_over_tls_zooraft() {
    ensemble_over_tls(ServerKind::Zooraft);
}

#[test]
fn ensemble_over_tls_apache() {
    ensemble_over_tls(ServerKind::Apache);
}

/// Members 1 and 2 trust the ensemble's CA and present its certificates; member 3 presents
/// one from another CA. 1 and 2 form the quorum and serve; 3 never serves, and the logs
/// say that its certificate was refused.
#[test]
fn untrusted_member_stays_out_zooraft() {
    let dir = tempfile::tempdir().expect("temp dir");
    let ca = Ca::new(dir.path(), "quorum-ca");
    let stranger_ca = Ca::new(dir.path(), "stranger-ca");
    let good = ca.issue("member", "/CN=member");
    let bad = stranger_ca.issue("intruder", "/CN=member");
    let peer_ports: Vec<u16> = (0..3).map(|_| free_port()).collect();
    let client_ports: Vec<u16> = (0..3).map(|_| free_port()).collect();
    let members: Vec<TestServer> = (0..3)
        .map(|i| {
            let store = if i == 2 { &bad } else { &good };
            let mut b = TestServer::builder(ServerKind::Zooraft)
                .port(client_ports[i])
                .myid(i as u64 + 1)
                .tick_time_ms(500)
                .config("raftTickMs", "100")
                .no_wait();
            for j in 0..3 {
                b = b.config(
                    &format!("server.{}", j + 1),
                    &format!(
                        "127.0.0.1:{}:0;127.0.0.1:{}",
                        peer_ports[j], client_ports[j]
                    ),
                );
            }
            for (k, v) in quorum_keys(store, &ca) {
                b = b.config(&k, &v);
            }
            b.start()
        })
        .collect();
    eventually("members 1 and 2 serving", Duration::from_secs(60), || {
        (members[0].is_serving() && members[1].is_serving()).then_some(())
    });
    replicates(&members[0].connect_string(), &members[1].connect_string());
    let log = |i: usize| std::fs::read_to_string(members[i].log_path()).unwrap_or_default();
    // Each side refuses the other: as a server (the client certificate) and as a client
    // (the server certificate), and logs it.
    eventually(
        "both sides log the refusal",
        Duration::from_secs(30),
        || {
            let good_side = log(0) + &log(1);
            (good_side.contains("quorum TLS: refused a member connection")
                && good_side.contains("quorum TLS: member 3")
                && log(2).contains("quorum TLS: refused a member connection"))
            .then_some(())
        },
    );
    assert!(!members[2].is_serving(), "the untrusted member serves");
}
