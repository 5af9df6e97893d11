//! Raft ensembles: 3 and 5 members (and observers) on loopback, real clients, members killed
//! with SIGKILL and restarted. After every scenario all members must hold identical trees
//! (same last zxid and tree digest).

use std::time::{Duration, Instant};

use zookeeper_client as zc;
use zooraft_tests::rt::{block_on, eventually, eventually_async, within};
use zooraft_tests::zc::{ephemeral, persistent};
use zooraft_tests::TestEnsemble;

/// Bound for any single client operation.
const WAIT: Duration = Duration::from_secs(60);

async fn connect(hosts: &str) -> zc::Client {
    zooraft_tests::zc::connect(hosts, Duration::from_secs(6), WAIT).await
}

#[test]
fn writes_through_any_member_reach_every_member() {
    let ensemble = TestEnsemble::start(3, 0, &[]);
    block_on(async {
        let clients: Vec<zc::Client> = {
            let mut v = Vec::new();
            for i in 0..3 {
                v.push(connect(&ensemble.member(i).connect_string()).await);
            }
            v
        };
        let mut zxids = Vec::new();
        for (i, c) in clients.iter().enumerate() {
            for k in 0..20 {
                let (stat, _) = within(
                    "create",
                    WAIT,
                    c.create(&format!("/m{i}-{k}"), b"x", &persistent()),
                )
                .await
                .expect("create through a member");
                zxids.push(stat.czxid);
            }
        }
        // Each member sees every write once it has synced.
        for c in &clients {
            within("sync", WAIT, c.sync("/")).await.expect("sync");
            let mut children = within("list", WAIT, c.list_children("/"))
                .await
                .expect("list");
            children.retain(|c| c != "zookeeper");
            assert_eq!(children.len(), 60);
        }
        let mut sorted = zxids.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), zxids.len(), "zxids are unique across members");
    });
    let (zxid, digest) = ensemble.converged();
    assert!(!digest.is_empty() && !zxid.is_empty());
}

/// How many times a member's log says it stopped serving new clients.
fn stopped_serving(ensemble: &TestEnsemble, member: usize) -> usize {
    std::fs::read_to_string(ensemble.member(member).log_path())
        .unwrap_or_default()
        .matches("not serving new clients")
        .count()
}

/// Under a steady write load a follower's applied index trails the commit index by a batch
/// at almost any instant; that must not read as "not caught up": followers keep serving.
#[test]
fn followers_keep_serving_under_write_load() {
    let ensemble = TestEnsemble::start(3, 0, &[]);
    let before: Vec<usize> = (0..3).map(|i| stopped_serving(&ensemble, i)).collect();
    block_on(async {
        let clients: Vec<zc::Client> = {
            let mut v = Vec::new();
            for i in 0..3 {
                v.push(connect(&ensemble.member(i).connect_string()).await);
            }
            v
        };
        for (i, c) in clients.iter().enumerate() {
            within(
                "create",
                WAIT,
                c.create(&format!("/load{i}"), b"", &persistent()),
            )
            .await
            .expect("create the load node");
        }
        // 30 rounds of 3 x 100 pipelined setData through every member (9,000 writes).
        for _ in 0..30 {
            let mut tasks = tokio::task::JoinSet::new();
            for (i, c) in clients.iter().enumerate() {
                for _ in 0..100 {
                    let c = c.clone();
                    let path = format!("/load{i}");
                    tasks.spawn(async move { c.set_data(&path, &[7u8; 256], None).await });
                }
            }
            while let Some(r) = within("setData", WAIT, tasks.join_next()).await {
                r.expect("task").expect("setData");
            }
        }
    });
    let after: Vec<usize> = (0..3).map(|i| stopped_serving(&ensemble, i)).collect();
    assert_eq!(
        before, after,
        "members stopped serving during the load (counts of 'not serving new clients')"
    );
    let (zxid, digest) = ensemble.converged();
    assert!(!digest.is_empty() && !zxid.is_empty());
}

/// The member a session is connected to, from each member's `cons` output.
fn member_of_session(ensemble: &TestEnsemble, session: i64) -> Option<usize> {
    let needle = format!("sid=0x{session:x},");
    (0..ensemble.len()).find(|i| {
        ensemble.member(*i).is_running()
            && ensemble
                .member(*i)
                .four_letter_word("cons")
                .is_ok_and(|c| c.contains(&needle))
    })
}

#[derive(Debug, Clone)]
struct Ack {
    path: String,
    czxid: i64,
    at: Instant,
    issued: Instant,
}

/// Writers create nodes in a loop until `until`, recording what was acknowledged.
async fn write_load(hosts: String, writer: usize, until: Instant) -> (Vec<Ack>, usize) {
    let client = connect(&hosts).await;
    let mut acks = Vec::new();
    let mut failures = 0;
    let mut n = 0;
    while Instant::now() < until {
        n += 1;
        let path = format!("/load/w{writer}-{n}");
        let issued = Instant::now();
        match tokio::time::timeout(
            Duration::from_secs(10),
            client.create(&path, b"v", &persistent()),
        )
        .await
        {
            Ok(Ok((stat, _))) => acks.push(Ack {
                path,
                czxid: stat.czxid,
                at: Instant::now(),
                issued,
            }),
            _ => {
                failures += 1;
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }
    (acks, failures)
}

#[test]
fn leader_killed_under_write_load_loses_no_acknowledged_write() {
    let mut ensemble = TestEnsemble::start(3, 0, &[]);
    let hosts = ensemble.connect_string();
    let old_leader = ensemble.leader();
    let (acks, killed_at) = block_on(async {
        let setup = connect(&hosts).await;
        within("mkdir", WAIT, setup.create("/load", b"", &persistent()))
            .await
            .expect("/load");
        let until = Instant::now() + Duration::from_secs(7);
        let writers: Vec<_> = (0..4)
            .map(|w| tokio::spawn(write_load(hosts.clone(), w, until)))
            .collect();
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let killed_at = Instant::now();
        ensemble.member_mut(old_leader).kill();
        let mut all = Vec::new();
        for w in writers {
            let (acks, failures) = within("writer", WAIT, w).await.expect("writer task");
            assert!(
                !acks.is_empty(),
                "a writer made no progress ({failures} failures)"
            );
            // zxids a client sees for its acknowledged writes strictly increase.
            for pair in acks.windows(2) {
                assert!(pair[1].czxid > pair[0].czxid, "zxid went back: {pair:?}");
            }
            all.push(acks);
        }
        (all, killed_at)
    });
    let new_leader = ensemble.leader();
    assert_ne!(new_leader, old_leader, "a new leader was elected");
    // Failover: from the kill to the first write issued after it that succeeded.
    let first_after = acks
        .iter()
        .flatten()
        .filter(|a| a.issued > killed_at)
        .map(|a| a.at)
        .min()
        .expect("writes resumed under the new leader");
    println!(
        "failover: leader killed -> first successful write in {:?}",
        first_after.duration_since(killed_at)
    );
    // Zxids issued after the failover carry the new term in their epoch (high 32 bits).
    let epochs: std::collections::BTreeSet<i64> =
        acks.iter().flatten().map(|a| a.czxid >> 32).collect();
    assert!(
        epochs.len() >= 2,
        "writes span two leader epochs: {epochs:?}"
    );
    // Every acknowledged write is there, on every surviving member.
    let total: usize = acks.iter().map(|a| a.len()).sum();
    block_on(async {
        for i in 0..ensemble.len() {
            if !ensemble.member(i).is_running() {
                continue;
            }
            let c = connect(&ensemble.member(i).connect_string()).await;
            within("sync", WAIT, c.sync("/load")).await.expect("sync");
            let children: std::collections::HashSet<String> =
                within("list", WAIT, c.list_children("/load"))
                    .await
                    .expect("list")
                    .into_iter()
                    .collect();
            for a in acks.iter().flatten() {
                let name = a.path.trim_start_matches("/load/");
                assert!(
                    children.contains(name),
                    "member {} lost acknowledged {}",
                    i + 1,
                    a.path
                );
            }
        }
    });
    println!("acknowledged writes checked: {total}");
    ensemble.member_mut(old_leader).respawn();
    ensemble.wait_all_serving();
    ensemble.converged();
}

#[test]
fn session_survives_the_death_of_its_member() {
    let mut ensemble = TestEnsemble::start(3, 0, &[]);
    let hosts = ensemble.connect_string();
    block_on(async {
        let a = connect(&hosts).await;
        let setup = connect(&hosts).await;
        within(
            "create",
            WAIT,
            setup.create("/watched", b"v0", &persistent()),
        )
        .await
        .expect("create");
        within("ephemeral", WAIT, a.create("/eph-a", b"", &ephemeral()))
            .await
            .expect("ephemeral");
        let (_, _, watcher) = within("watch", WAIT, a.get_and_watch_data("/watched"))
            .await
            .expect("watch");
        let session = a.session_id();
        let home = member_of_session(&ensemble, session.0).expect("the session's member");
        ensemble.member_mut(home).kill();
        // While `a` is cut off, another client (on a surviving member) changes the node.
        let other = (0..3).find(|i| *i != home).expect("another member");
        let b = connect(&ensemble.member(other).connect_string()).await;
        within("set", WAIT, b.set_data("/watched", b"v1", None))
            .await
            .expect("set while a is away");
        // `a` reconnects to a surviving member, re-arms its watch with SetWatches, and is
        // told what it missed.
        let event = within("missed event", WAIT, watcher.changed()).await;
        assert_eq!(event.event_type, zc::EventType::NodeDataChanged);
        assert_eq!(event.path, "/watched");
        assert_eq!(a.session_id(), session, "same session");
        let (_, stat) = within("ephemeral still there", WAIT, b.get_data("/eph-a"))
            .await
            .expect("ephemeral survives");
        assert_eq!(stat.ephemeral_owner, session.0);
        let now_on = member_of_session(&ensemble, session.0).expect("reconnected somewhere");
        assert_ne!(now_on, home);
    });
    ensemble.converged();
}

#[test]
fn member_behind_the_compacted_log_catches_up_by_snapshot() {
    let mut ensemble = TestEnsemble::start(
        3,
        0,
        &[("snapshotEntries", "100"), ("snapshotRetainEntries", "10")],
    );
    let hosts = ensemble.connect_string();
    let leader = ensemble.leader();
    let down = (leader + 1) % 3;
    ensemble.member_mut(down).kill();
    block_on(async {
        let c = connect(&hosts).await;
        within("mkdir", WAIT, c.create("/snap", b"", &persistent()))
            .await
            .expect("mkdir");
        for i in 0..400 {
            within(
                "create",
                WAIT,
                c.create(&format!("/snap/n{i}"), b"data", &persistent()),
            )
            .await
            .expect("create while a member is down");
        }
    });
    ensemble.member_mut(down).respawn();
    ensemble.wait_all_serving();
    ensemble.converged();
    let log = std::fs::read_to_string(ensemble.member(down).log_path()).unwrap_or_default();
    assert!(
        log.contains("installing snapshot from the leader"),
        "the member caught up from a snapshot; log:\n{}",
        ensemble.member(down).log_tail()
    );
    block_on(async {
        let c = connect(&ensemble.member(down).connect_string()).await;
        let n = within("count", WAIT, c.list_children("/snap"))
            .await
            .expect("list")
            .len();
        assert_eq!(n, 400);
    });
}

/// A write that must fail (or not be answered) within `within_ms`.
async fn write_fails(c: &zc::Client, path: &str, within_ms: u64) -> bool {
    !matches!(
        tokio::time::timeout(
            Duration::from_millis(within_ms),
            c.create(path, b"", &persistent())
        )
        .await,
        Ok(Ok(_))
    )
}

#[test]
fn five_members_survive_two_failures_and_stop_without_quorum() {
    let mut ensemble = TestEnsemble::start(5, 0, &[]);
    let leader = ensemble.leader();
    // Kill two followers: three of five remain, a quorum.
    let followers: Vec<usize> = (0..5).filter(|i| *i != leader).collect();
    ensemble.member_mut(followers[0]).kill();
    ensemble.member_mut(followers[1]).kill();
    let survivors = ensemble.connect_string();
    block_on(async {
        let c = connect(&survivors).await;
        for i in 0..20 {
            within(
                "create",
                WAIT,
                c.create(&format!("/five-{i}"), b"", &persistent()),
            )
            .await
            .expect("writes continue with 3 of 5");
        }
    });
    // A third failure leaves a minority: the rest stop serving rather than serve stale data
    // or let a session that should have expired hold on.
    ensemble.member_mut(followers[2]).kill();
    eventually(
        "the minority to stop serving",
        Duration::from_secs(15),
        || {
            (![leader, followers[3]]
                .iter()
                .any(|i| ensemble.member(*i).is_serving()))
            .then_some(())
        },
    );
    // Bring two back: a quorum again, and nothing acknowledged was lost.
    ensemble.member_mut(followers[0]).respawn();
    ensemble.member_mut(followers[1]).respawn();
    ensemble.wait_all_serving();
    block_on(async {
        let c = connect(&ensemble.connect_string()).await;
        within("sync", WAIT, c.sync("/")).await.expect("sync");
        let n = within("list", WAIT, c.list_children("/"))
            .await
            .expect("list")
            .iter()
            .filter(|n| n.starts_with("five-"))
            .count();
        assert_eq!(n, 20);
        within("create", WAIT, c.create("/five-after", b"", &persistent()))
            .await
            .expect("writes resume with a quorum");
    });
    ensemble.converged();
}

#[test]
fn observer_serves_reads_forwards_writes_and_never_votes() {
    let mut ensemble = TestEnsemble::start(3, 1, &[]);
    let observer = 3;
    assert_eq!(
        ensemble.member(observer).mode().as_deref(),
        Some("observer")
    );
    let leader = ensemble.leader();
    let mntr = ensemble
        .member(leader)
        .four_letter_word("mntr")
        .expect("mntr");
    assert!(mntr.contains("zk_server_state\tleader"), "{mntr}");
    assert!(mntr.contains("zk_followers\t2"), "{mntr}");
    assert!(mntr.contains("zk_synced_followers\t2"), "{mntr}");
    block_on(async {
        let c = connect(&ensemble.member(observer).connect_string()).await;
        within(
            "create",
            WAIT,
            c.create("/via-observer", b"o", &persistent()),
        )
        .await
        .expect("a write through the observer");
        let (data, _) = within("read", WAIT, c.get_data("/via-observer"))
            .await
            .expect("read");
        assert_eq!(data, b"o");
    });
    // Without two voters there is no quorum, whatever the observer does.
    let voters: Vec<usize> = (0..3).filter(|i| *i != leader).collect();
    block_on(async {
        let c = connect(&ensemble.member(leader).connect_string()).await;
        ensemble.member_mut(voters[0]).kill();
        ensemble.member_mut(voters[1]).kill();
        assert!(
            write_fails(&c, "/no-quorum", 3000).await,
            "a leader with only an observer must not commit"
        );
    });
    // It steps down and stops serving clients.
    eventually(
        "the old leader without a quorum to stop serving",
        Duration::from_secs(15),
        || (!ensemble.member(leader).is_serving()).then_some(()),
    );
    ensemble.member_mut(voters[0]).respawn();
    ensemble.member_mut(voters[1]).respawn();
    ensemble.wait_all_serving();
    ensemble.converged();
}

#[test]
fn acknowledged_writes_survive_kill_of_every_member() {
    let mut ensemble = TestEnsemble::start(3, 0, &[]);
    let acked = block_on(async {
        let c = connect(&ensemble.connect_string()).await;
        let mut acked = Vec::new();
        for i in 0..200 {
            let (stat, _) = within(
                "create",
                WAIT,
                c.create(&format!("/durable-{i}"), b"d", &persistent()),
            )
            .await
            .expect("create");
            acked.push((format!("/durable-{i}"), stat.czxid));
        }
        acked
    });
    let before = ensemble.converged();
    for i in 0..3 {
        ensemble.member_mut(i).kill();
    }
    for i in 0..3 {
        ensemble.member_mut(i).respawn();
    }
    ensemble.wait_all_serving();
    let after = ensemble.converged();
    assert_eq!(before.1, after.1, "the same tree after a full restart");
    block_on(async {
        let c = connect(&ensemble.connect_string()).await;
        for (path, czxid) in &acked {
            let (_, stat) = within("read", WAIT, c.get_data(path))
                .await
                .expect("acknowledged write present");
            assert_eq!(stat.czxid, *czxid, "{path} keeps its zxid");
        }
    });
}

#[test]
fn isolated_leader_is_replaced_and_serves_no_writes() {
    let ensemble = TestEnsemble::start_partitionable(3, 0, &[]);
    let old = ensemble.leader();
    let others: Vec<usize> = (0..3).filter(|i| *i != old).collect();
    let others_hosts = others
        .iter()
        .map(|i| ensemble.member(*i).connect_string())
        .collect::<Vec<_>>()
        .join(",");
    block_on(async {
        // A client of the old leader, connected before the partition.
        let stranded = connect(&ensemble.member(old).connect_string()).await;
        within(
            "create",
            WAIT,
            stranded.create("/before", b"", &persistent()),
        )
        .await
        .expect("write before the partition");
        ensemble.isolate(old);
        let cut_at = Instant::now();
        // The majority elects a new leader and keeps committing.
        let majority = connect(&others_hosts).await;
        within(
            "create",
            WAIT,
            majority.create("/during", b"", &persistent()),
        )
        .await
        .expect("the majority commits");
        println!("partition -> write on the majority: {:?}", cut_at.elapsed());
        assert!(
            others.contains(&ensemble.leader()),
            "a new leader among the majority"
        );
        // The old leader acknowledges no write: it cannot commit, then it steps down.
        assert!(
            write_fails(&stranded, "/stranded", 5000).await,
            "the isolated old leader acknowledged a write"
        );
        eventually_async(
            "the isolated old leader to stop serving",
            Duration::from_secs(15),
            || async { (!ensemble.member(old).is_serving()).then_some(()) },
        )
        .await;
    });
    ensemble.heal(old);
    eventually("the old leader to rejoin", Duration::from_secs(30), || {
        ensemble.member(old).is_serving().then_some(())
    });
    assert_eq!(ensemble.member(old).mode().as_deref(), Some("follower"));
    ensemble.converged();
    block_on(async {
        let c = connect(&ensemble.member(old).connect_string()).await;
        within("sync", WAIT, c.sync("/")).await.expect("sync");
        assert!(within("during", WAIT, c.check_stat("/during"))
            .await
            .expect("stat")
            .is_some());
        assert!(
            within("stranded", WAIT, c.check_stat("/stranded"))
                .await
                .expect("stat")
                .is_none(),
            "a write the isolated leader never acknowledged must not appear"
        );
    });
}

fn mntr_map(ensemble: &TestEnsemble, member: usize) -> std::collections::BTreeMap<String, String> {
    let text = ensemble
        .member(member)
        .four_letter_word("mntr")
        .expect("mntr");
    text.lines()
        .filter_map(|l| l.split_once('\t'))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn figure(m: &std::collections::BTreeMap<String, String>, key: &str) -> u64 {
    m.get(key)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("mntr has no whole number {key}: {m:#?}"))
}

/// `mntr` of an ensemble carries ZooKeeper's quorum figures, and they follow what happened:
/// the leader times its proposals to commit and apply, followers count what they received,
/// and an election after the leader's death is counted and timed on the new leader.
#[test]
fn mntr_reports_quorum_figures() {
    const WRITES: u64 = 10;
    let mut ensemble = TestEnsemble::start(3, 0, &[]);
    let leader = ensemble.leader();
    let follower = (leader + 1) % 3;
    block_on(async {
        let c = connect(&ensemble.member(follower).connect_string()).await;
        for i in 0..WRITES {
            within(
                "create",
                WAIT,
                c.create(&format!("/q{i}"), b"q", &persistent()),
            )
            .await
            .expect("create");
        }
    });
    let lead = mntr_map(&ensemble, leader);
    assert_eq!(lead["zk_server_state"], "leader");
    assert_eq!(lead["zk_peer_state"], "leading - broadcast");
    assert_eq!(figure(&lead, "zk_quorum_size"), 3);
    assert!(figure(&lead, "zk_cnt_quorum_ack_latency") >= WRITES);
    assert!(figure(&lead, "zk_cnt_proposal_latency") >= WRITES);
    assert!(figure(&lead, "zk_proposal_count") >= WRITES);
    assert!(figure(&lead, "zk_max_proposal_size") >= figure(&lead, "zk_min_proposal_size"));
    assert!(figure(&lead, "zk_min_proposal_size") > 0);
    assert!(figure(&lead, "zk_cnt_leader_unavailable_time") >= 1);
    assert!(figure(&lead, "zk_cnt_election_time") >= 1);
    assert!(figure(&lead, "zk_cnt_fsynctime") >= 1);
    eventually("the leader's uptime to count", WAIT, || {
        (figure(&mntr_map(&ensemble, leader), "zk_leader_uptime") > 0).then_some(())
    });
    let follow = mntr_map(&ensemble, follower);
    assert_eq!(follow["zk_peer_state"], "following - broadcast");
    assert!(
        !follow.contains_key("zk_leader_uptime"),
        "only the leader has an uptime"
    );
    assert!(figure(&follow, "zk_learner_proposal_received_count") >= WRITES);
    assert!(figure(&follow, "zk_learner_commit_received_count") >= WRITES);
    assert_eq!(
        figure(&follow, "zk_cnt_quorum_ack_latency"),
        0,
        "a follower proposes nothing"
    );
    assert!(figure(&follow, "zk_cnt_unavailable_time") >= 1);
    // The leader dies: the next one counts a look and times an election.
    let looks: Vec<u64> = (0..3)
        .map(|i| {
            if i == leader {
                0
            } else {
                figure(&mntr_map(&ensemble, i), "zk_looking_count")
            }
        })
        .collect();
    ensemble.member_mut(leader).kill();
    let next = eventually("a new leader", WAIT, || {
        (0..3)
            .filter(|i| *i != leader)
            .find(|i| ensemble.member(*i).mode().as_deref() == Some("leader"))
    });
    let after = mntr_map(&ensemble, next);
    assert_eq!(
        figure(&after, "zk_looking_count"),
        looks[next] + 1,
        "one look for the lost leader"
    );
    assert!(figure(&after, "zk_cnt_election_time") >= 2, "{after:#?}");
    assert!(figure(&after, "zk_cnt_leader_unavailable_time") >= 1);
}
