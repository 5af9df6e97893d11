//! TLS between members (`sslQuorum=true`, `ssl.quorum.*`): a 3-member ensemble elects and
//! replicates over mutual TLS (zooraft and Apache ZooKeeper 3.8); a member whose certificate
//! comes from another CA, or names another host (`ssl.quorum.hostnameVerification`), stays
//! out, and both sides log why (both kinds); an ensemble of either kind rolls from plain to TLS
//! under load with quorum port unification (`portUnification`).

use std::time::Duration;

use zooraft_tests::pki::{quorum_keys, Ca, Issued};
use zooraft_tests::rt::{block_on, eventually, runtime};
use zooraft_tests::{load, zc, ServerKind, TestEnsemble};

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

/// Members 1 and 2 present `good` certificates, member 3 presents `bad`; all trust `ca`.
/// 1 and 2 form the quorum and serve; 3 never serves, and the logs of both sides say why
/// (`good_side` and `bad_side`: strings the members' logs must contain, `a|b` for either).
fn member_stays_out(
    kind: ServerKind,
    ca: &Ca,
    good: &Issued,
    bad: &Issued,
    good_side: &[&str],
    bad_side: &[&str],
) {
    let e = TestEnsemble::start_each(kind, 3, &[], &|i| {
        quorum_keys(if i == 2 { bad } else { good }, ca)
    });
    eventually("members 1 and 2 serving", Duration::from_secs(90), || {
        (e.member(0).is_serving() && e.member(1).is_serving()).then_some(())
    });
    replicates(&e.member(0).connect_string(), &e.member(1).connect_string());
    let log = |i: usize| std::fs::read_to_string(e.member(i).log_path()).unwrap_or_default();
    // Each side refuses the other: as a server (the client certificate) and as a client
    // (the server certificate), and logs it.
    let missing = || -> Vec<String> {
        let good_log = log(0) + &log(1);
        let bad_log = log(2);
        // A needle `a|b` is found when either is.
        let found = |log: &str, needle: &str| needle.split('|').any(|n| log.contains(n));
        let good = good_side.iter().filter(|s| !found(&good_log, s));
        let bad = bad_side.iter().filter(|s| !found(&bad_log, s));
        good.chain(bad).map(|s| s.to_string()).collect()
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !missing().is_empty() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(missing().is_empty(), "not logged: {:?}", missing());
    assert!(!e.member(2).is_serving(), "the refused member serves");
}

/// The log lines of a refused member connection, zooraft's and ZooKeeper's.
fn refusal_lines(kind: ServerKind) -> (Vec<&'static str>, Vec<&'static str>) {
    match kind {
        // 1 and 2 refuse 3's certificate (when they dial it, and when it dials them); 3
        // hears the refusal.
        ServerKind::Zooraft => (
            vec!["quorum TLS: member 3", "UnknownIssuer"],
            vec![
                "the member refused our certificate",
                "closed the connection right after the handshake",
            ],
        ),
        // ZooKeeper's refused member may only see its connections fail.
        ServerKind::Apache => (
            vec!["SSLHandshakeException"],
            vec!["SSLHandshakeException|Exception reading or writing challenge"],
        ),
    }
}

/// A member whose certificate comes from another CA stays out.
fn untrusted_member_stays_out(kind: ServerKind) {
    let dir = tempfile::tempdir().expect("temp dir");
    let ca = Ca::new(dir.path(), "quorum-ca");
    let stranger_ca = Ca::new(dir.path(), "stranger-ca");
    let good = ca.issue("member", "/CN=member");
    let bad = stranger_ca.issue("intruder", "/CN=member");
    let (good_side, bad_side) = refusal_lines(kind);
    member_stays_out(kind, &ca, &good, &bad, &good_side, &bad_side);
}

#[test]
fn untrusted_member_stays_out_zooraft() {
    untrusted_member_stays_out(ServerKind::Zooraft);
}

#[test]
fn untrusted_member_stays_out_apache() {
    untrusted_member_stays_out(ServerKind::Apache);
}

/// `ssl.quorum.hostnameVerification` (on by default): members 1 and 2 have certificates
/// that name only `DNS:localhost` (accepted: 127.0.0.1 reverse-resolves to localhost, as
/// ZooKeeper checks it); member 3's, from the same CA, names another host and stays out.
fn wrong_host_member_stays_out(kind: ServerKind) {
    let dir = tempfile::tempdir().expect("temp dir");
    let ca = Ca::new(dir.path(), "quorum-ca");
    let good = ca.issue_for_hosts("member", "/CN=member", "DNS:localhost");
    let bad = ca.issue_for_hosts(
        "elsewhere",
        "/CN=elsewhere",
        "DNS:zk.elsewhere.invalid,IP:10.9.9.9",
    );
    let (good_side, bad_side) = match kind {
        ServerKind::Zooraft => (
            vec!["hostname verification failed", "zk.elsewhere.invalid"],
            vec!["closed the connection right after the handshake"],
        ),
        // ZooKeeper's refused member only sees its connections fail.
        ServerKind::Apache => (
            vec!["doesn't match any of the subject alternative names"],
            vec!["Exception reading or writing challenge"],
        ),
    };
    member_stays_out(kind, &ca, &good, &bad, &good_side, &bad_side);
}

#[test]
fn wrong_host_member_stays_out_zooraft() {
    wrong_host_member_stays_out(ServerKind::Zooraft);
}

#[test]
fn wrong_host_member_stays_out_apache() {
    wrong_host_member_stays_out(ServerKind::Apache);
}

/// ZooKeeper's rolling upgrade from plain to TLS between members, under a write load: (1)
/// `portUnification=true` (and the `ssl.quorum.*` stores) on every member, one restart at
/// a time; (2) `sslQuorum=true` member by member (a member then dials TLS, and is still
/// accepted by the others, which take both); (3) `portUnification` off member by member.
/// No acknowledged write is lost, and at the end (zooraft) a plain member connection is
/// refused.
fn rolling_plain_to_tls(kind: ServerKind) {
    let dir = tempfile::tempdir().expect("temp dir");
    let ca = Ca::new(dir.path(), "quorum-ca");
    let member = ca.issue("member", "/CN=member");
    let mut e = TestEnsemble::start_kind(kind, 3, 0, &[]);
    let rt = runtime();
    let (load, writers) = load::start(&rt, &e.connect_string(), "/roll", 3);
    std::thread::sleep(Duration::from_secs(1));
    load.measure(true);
    let restart = |e: &mut TestEnsemble, i: usize, keys: &[(String, String)]| {
        assert!(e.member_mut(i).stop(), "member {} did not stop", i + 1);
        for (k, v) in keys {
            e.member_mut(i).set_config(k, v);
        }
        e.member_mut(i).restart();
        e.wait_all_serving();
        std::thread::sleep(Duration::from_millis(500));
    };
    let mut stores = quorum_keys(&member, &ca);
    stores.retain(|(k, _)| k != "sslQuorum");
    stores.push(("portUnification".into(), "true".into()));
    for i in 0..3 {
        restart(&mut e, i, &stores);
    }
    let tls_on = [("sslQuorum".to_string(), "true".to_string())];
    for i in 0..3 {
        restart(&mut e, i, &tls_on);
    }
    let unification_off = [("portUnification".to_string(), "false".to_string())];
    for i in 0..3 {
        restart(&mut e, i, &unification_off);
    }
    std::thread::sleep(Duration::from_secs(1));
    let report = load::finish(&rt, &load, writers);
    assert!(
        report.failed.is_empty(),
        "writes failed: {:?}",
        report.failed
    );
    assert_eq!(report.expired, 0, "sessions expired");
    assert!(!report.acked.is_empty(), "no write was acknowledged");
    for i in 0..3 {
        let missing = load::missing(&rt, &e.member(i).connect_string(), "/roll", &report.acked);
        assert!(
            missing.is_empty(),
            "acknowledged but missing on member {}: {missing:?}",
            i + 1
        );
    }
    if kind == ServerKind::Zooraft {
        e.converged();
    }
    // All TLS now. ZooKeeper says so when it opens its quorum port, and logs its handshakes.
    for i in (0..3).filter(|_| kind == ServerKind::Apache) {
        let log = std::fs::read_to_string(e.member(i).log_path()).unwrap_or_default();
        let last = log.rfind("Creating TLS-");
        assert!(
            last.is_some_and(|at| log[at..].starts_with("Creating TLS-only quorum server socket")),
            "member {}: its quorum port is not TLS-only at the end",
            i + 1
        );
        assert!(
            log.contains("SSL handshake complete"),
            "member {}: no TLS handshake",
            i + 1
        );
    }
    // zooraft: a plain hello is refused by every member.
    for i in (0..3).filter(|_| kind == ServerKind::Zooraft) {
        use std::io::Write;
        let mut s = std::net::TcpStream::connect(("127.0.0.1", e.peer_port(i))).expect("connect");
        let _ = s.write_all(&[0, 0, 0, 13, 0, 0, 0, 0, 0, 0, 0, 0, 9, 0, 0, 0, 1]);
        drop(s);
        eventually("the plain hello refused", Duration::from_secs(20), || {
            std::fs::read_to_string(e.member(i).log_path())
                .unwrap_or_default()
                .contains("quorum TLS: refused a member connection")
                .then_some(())
        });
    }
    eprintln!(
        "MEASURED {} rolling plain -> TLS: {} writes acknowledged, {} ConnectionLoss retries, longest stall {} ms",
        kind.name(),
        report.acked.len(),
        report.connection_losses,
        report.longest_stall.as_millis()
    );
}

#[test]
fn rolling_plain_to_tls_zooraft() {
    rolling_plain_to_tls(ServerKind::Zooraft);
}

#[test]
fn rolling_plain_to_tls_apache() {
    rolling_plain_to_tls(ServerKind::Apache);
}
