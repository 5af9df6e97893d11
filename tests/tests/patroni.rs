//! PostgreSQL high availability with Patroni, with the coordination service as its DCS: two
//! PostgreSQL nodes, each managed by a Patroni process, elect a leader and stream to a
//! replica; then the primary's Patroni and PostgreSQL are killed (-9) and the replica must
//! be promoted within the bound Patroni's ttl and loop_wait give (and not before the dead
//! primary's session could have expired), and take writes.
//!
//! Four DCS set-ups, each run by its own test: a standalone zooraft and a standalone Apache
//! ZooKeeper, and 3-member ensembles of each whose leader is killed (-9) together with the
//! primary, so that the dead primary's session must expire, and the replica's session must
//! survive, across a leader change of the coordination service.
//!
//! Needs Debian's `patroni`, `python3-kazoo` and `postgresql` packages (`.ci/run` installs
//! them); a test fails naming the package when one is missing.

use std::time::{Duration, Instant};

use zooraft_tests::patroni::{PatroniNode, Role, Timings};
use zooraft_tests::{ServerKind, TestEnsemble, TestServer};

/// How long bootstrapping a cluster may take: initdb, the leader lock, pg_basebackup to the
/// replica and its start (a few seconds on an idle machine).
const BOOTSTRAP_LIMIT: Duration = Duration::from_secs(240);

/// The coordination service the Patroni cluster uses.
enum Dcs {
    Standalone(Box<TestServer>),
    Ensemble(TestEnsemble),
}

impl Dcs {
    /// `host:port` of every running server, as Patroni's `zookeeper: hosts:` takes them.
    fn hosts(&self) -> Vec<String> {
        match self {
            Dcs::Standalone(s) => vec![s.connect_string()],
            Dcs::Ensemble(e) => e.connect_string().split(',').map(String::from).collect(),
        }
    }

    fn kind(&self) -> ServerKind {
        match self {
            Dcs::Standalone(s) => s.kind(),
            Dcs::Ensemble(e) => e.kind(),
        }
    }

    /// Kills (-9) an ensemble's leader and says which member it was; a standalone server
    /// stays up.
    fn kill_leader(&mut self) -> Option<usize> {
        match self {
            Dcs::Standalone(_) => None,
            Dcs::Ensemble(e) => {
                let leader = e.leader();
                e.member_mut(leader).kill();
                Some(leader)
            }
        }
    }

    fn log_tails(&self) -> String {
        match self {
            Dcs::Standalone(s) => s.log_tail(),
            Dcs::Ensemble(e) => (0..e.len())
                .map(|i| format!("-- member {} --\n{}", i + 1, e.member(i).log_tail()))
                .collect::<Vec<_>>()
                .join("\n"),
        }
    }
}

/// Everything a failed wait shows: each node's role, the cluster as Patroni's API sees it,
/// and every log tail.
fn describe(nodes: &[PatroniNode], dcs: &Dcs) -> String {
    let mut out = String::new();
    for n in nodes {
        out.push_str(&format!(
            "== {} (running: {}, role: {:?}, /cluster: {:?})\n{}\n",
            n.name(),
            n.is_running(),
            n.role(),
            n.api_get("/cluster").map(|(_, body)| body),
            n.log_tail()
        ));
    }
    out.push_str(&format!(
        "== {} log\n{}\n",
        dcs.kind().name(),
        dcs.log_tails()
    ));
    out
}

/// Polls `check` every 200 ms until it yields a value; after `limit`, panics naming `what`
/// with [`describe`]'s report. A Patroni process that exits by itself fails at once.
fn wait_for<T>(
    what: &str,
    limit: Duration,
    nodes: &mut [PatroniNode],
    dcs: &Dcs,
    mut check: impl FnMut(&[PatroniNode]) -> Option<T>,
) -> T {
    let deadline = Instant::now() + limit;
    loop {
        for n in nodes.iter_mut().filter(|n| n.is_running()) {
            n.assert_running();
        }
        if let Some(v) = check(nodes) {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {limit:?} waiting for {what}\n{}",
            describe(nodes, dcs)
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The scenario of the module docs, on `dcs`.
fn patroni_fails_over(mut dcs: Dcs) {
    let timings = Timings::SHORT;
    let hosts = dcs.hosts();
    let label = match &dcs {
        Dcs::Standalone(_) => format!("standalone {}", dcs.kind().name()),
        Dcs::Ensemble(e) => format!("{}-member {} ensemble", e.len(), dcs.kind().name()),
    };
    let mut nodes = vec![
        PatroniNode::start("zooraft-test", "node1", &hosts, timings),
        PatroniNode::start("zooraft-test", "node2", &hosts, timings),
    ];
    let started = Instant::now();
    let (primary, replica) = wait_for(
        "a Patroni leader and a running replica",
        BOOTSTRAP_LIMIT,
        &mut nodes,
        &dcs,
        |nodes| match (nodes[0].role(), nodes[1].role()) {
            (Some(Role::Leader), Some(Role::Replica)) => Some((0, 1)),
            (Some(Role::Replica), Some(Role::Leader)) => Some((1, 0)),
            _ => None,
        },
    );
    println!(
        "{label}: {} leads, {} replicates, {:?} after start",
        nodes[primary].name(),
        nodes[replica].name(),
        started.elapsed()
    );

    // The replica streams: a row written on the primary shows up there.
    nodes[primary]
        .psql(
            "CREATE TABLE failover_check (id int PRIMARY KEY, note text); \
             INSERT INTO failover_check VALUES (1, 'before the failover')",
        )
        .unwrap_or_else(|e| panic!("write on the primary: {e}\n{}", describe(&nodes, &dcs)));
    wait_for(
        "the primary's row on the replica",
        Duration::from_secs(60),
        &mut nodes,
        &dcs,
        |nodes| {
            nodes[replica]
                .psql("SELECT note FROM failover_check WHERE id = 1")
                .ok()
                .filter(|note| note == "before the failover")
        },
    );
    assert_eq!(
        nodes[replica].psql("SELECT pg_is_in_recovery()").as_deref(),
        Ok("t"),
        "the replica is a standby before the failover"
    );

    // The primary dies (and with an ensemble, the coordination service's leader with it).
    nodes[primary].kill();
    let killed = Instant::now();
    if let Some(member) = dcs.kill_leader() {
        println!(
            "{label}: killed the primary and the ensemble's leader, member {}",
            member + 1
        );
    }
    let bound = timings.failover_bound();
    wait_for(
        "the replica's promotion",
        bound,
        &mut nodes,
        &dcs,
        |nodes| {
            (nodes[replica].role() == Some(Role::Leader)
                && nodes[replica].psql("SELECT pg_is_in_recovery()").as_deref() == Ok("f"))
            .then_some(())
        },
    );
    let took = killed.elapsed();
    // Not a speed check: the dead primary's lock is an ephemeral of a session with a ttl
    // timeout, last renewed a few seconds before the kill at most; a replica promoted much
    // sooner means the server dropped the ephemeral with the connection, and a primary that
    // is merely paused would find itself with a rival (split brain).
    let earliest = Duration::from_secs(timings.ttl / 2);
    assert!(
        took >= earliest,
        "promoted {took:?} after the kill, before the primary's session (timeout {} s) could \
         have expired\n{}",
        timings.ttl,
        describe(&nodes, &dcs)
    );
    println!(
        "{label}: {} promoted {took:?} after the kill (ttl {} s, loop_wait {} s, bound {bound:?})",
        nodes[replica].name(),
        timings.ttl,
        timings.loop_wait
    );

    // The promoted primary takes writes and kept what was written before.
    let count = nodes[replica]
        .psql(
            "INSERT INTO failover_check VALUES (2, 'after the failover'); \
             SELECT count(*) FROM failover_check",
        )
        .unwrap_or_else(|e| {
            panic!(
                "write on the promoted primary: {e}\n{}",
                describe(&nodes, &dcs)
            )
        });
    assert_eq!(count, "2", "both rows on the promoted primary");
}

#[test]
fn patroni_fails_over_on_standalone_zooraft() {
    patroni_fails_over(Dcs::Standalone(Box::new(TestServer::start(
        ServerKind::Zooraft,
    ))));
}

#[test]
fn patroni_fails_over_on_standalone_apache_zookeeper() {
    patroni_fails_over(Dcs::Standalone(Box::new(TestServer::start(
        ServerKind::Apache,
    ))));
}

/// Sessions as long as Patroni's ttl asks for (the ensembles' 500 ms tick would cap them at
/// 10 s).
const LONG_SESSIONS: &[(&str, &str)] = &[("maxSessionTimeout", "60000")];

#[test]
fn patroni_fails_over_on_a_zooraft_ensemble_whose_leader_dies_too() {
    patroni_fails_over(Dcs::Ensemble(TestEnsemble::start_kind(
        ServerKind::Zooraft,
        3,
        0,
        LONG_SESSIONS,
    )));
}

#[test]
fn patroni_fails_over_on_an_apache_zookeeper_ensemble_whose_leader_dies_too() {
    patroni_fails_over(Dcs::Ensemble(TestEnsemble::start_kind(
        ServerKind::Apache,
        3,
        0,
        LONG_SESSIONS,
    )));
}
