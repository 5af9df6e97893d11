//! A member restarted on a wiped data directory (a replaced disk, a fresh container volume)
//! must not help a stale member lead: real zooraft processes, three members, 500 ms ticks.
//!
//! The scenario of the issue, with every member in every role over several runs: one
//! follower (the stale one) is killed, so it misses the next writes; 20 sequential creates
//! are acknowledged by the other two; both are killed; one of them (the old leader or the
//! other follower) comes back on a wiped directory, then the stale one. Apache ZooKeeper
//! 3.8 lost all 20 creates here, as did zooraft before its data directories had an
//! identity. Now the two stay unavailable, say why in `srvr` and `mntr`, and once the third
//! member returns every acknowledged create is on every member.

use std::time::{Duration, Instant};

use zookeeper_client as zc;
use zooraft_tests::rt::{block_on, eventually, within};
use zooraft_tests::zc::persistent;
use zooraft_tests::TestEnsemble;

const WAIT: Duration = Duration::from_secs(60);

async fn connect(hosts: &str) -> zc::Client {
    zooraft_tests::zc::connect(hosts, Duration::from_secs(6), WAIT).await
}

/// Creates `/{prefix}0..count` one after the other through `hosts`; each is acknowledged.
fn acknowledged_creates(hosts: &str, prefix: &str, count: usize) -> Vec<String> {
    block_on(async {
        let c = connect(hosts).await;
        let mut paths = Vec::new();
        for i in 0..count {
            let path = format!("/{prefix}{i}");
            within("create", WAIT, c.create(&path, b"x", &persistent()))
                .await
                .expect("an acknowledged create");
            paths.push(path);
        }
        paths
    })
}

/// The paths of `paths` that member `i` lacks, read through it after a sync.
fn missing(e: &TestEnsemble, i: usize, paths: &[String]) -> Vec<String> {
    block_on(async {
        let c = connect(&e.member(i).connect_string()).await;
        within("sync", WAIT, c.sync("/")).await.expect("sync");
        let mut lost = Vec::new();
        for p in paths {
            let found = within("exists", WAIT, c.check_stat(p))
                .await
                .expect("exists");
            if found.is_none() {
                lost.push(p.clone());
            }
        }
        lost
    })
}

fn wipe(e: &mut TestEnsemble, i: usize) {
    e.member_mut(i).kill();
    std::fs::remove_dir_all(e.member(i).data_dir()).expect("wipe the data directory");
}

/// `srvr` of member `i`, or the error's text.
fn srvr(e: &TestEnsemble, i: usize) -> String {
    e.member(i)
        .four_letter_word("srvr")
        .unwrap_or_else(|err| err.to_string())
}

fn run_scenario(wipe_the_leader: bool, swap_followers: bool, run: usize) {
    let mut e = TestEnsemble::start(3, 0, &[]);
    let leader = e.leader();
    let followers: Vec<usize> = (0..3).filter(|i| *i != leader).collect();
    // The runs give the roles to other members.
    let (stale, other) = if !swap_followers {
        (followers[0], followers[1])
    } else {
        (followers[1], followers[0])
    };
    e.member_mut(stale).kill();
    let hosts = format!(
        "{},{}",
        e.member(leader).connect_string(),
        e.member(other).connect_string()
    );
    let paths = acknowledged_creates(&hosts, "n", 20);
    e.member_mut(leader).kill();
    e.member_mut(other).kill();
    let (wiped, keeper) = if wipe_the_leader {
        (leader, other)
    } else {
        (other, leader)
    };
    wipe(&mut e, wiped);
    e.member_mut(wiped).respawn();
    e.member_mut(stale).respawn();
    let label = format!(
        "run {run}: member {} stale, member {} wiped, member {} down",
        stale + 1,
        wiped + 1,
        keeper + 1
    );
    // Both say why they do not serve: the stale one names the wiped one.
    let named = format!("[{}]", wiped + 1);
    let deadline = Instant::now() + WAIT;
    loop {
        let s = srvr(&e, stale);
        let w = srvr(&e, wiped);
        if s.contains("zooraft: no quorum without member(s)")
            && s.contains(&named)
            && w.contains("zooraft: this member's data directory is new")
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{label}: no reasons in srvr within {WAIT:?}: the stale member's {s:?}, the wiped \
             member's {w:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(
        e.member(wiped).figure("zk_data_trusted").as_deref(),
        None,
        "{label}: mntr is refused while not serving"
    );
    let mntr = e.member(stale).four_letter_word("mntr").unwrap_or_default();
    assert!(
        mntr.contains("zooraft: no quorum"),
        "{label}: mntr says why: {mntr}"
    );
    // For five election timeouts neither serves (no leader, or the stale one would).
    let until = Instant::now() + Duration::from_millis(5 * 2 * 500);
    while Instant::now() < until {
        for i in [stale, wiped] {
            assert!(
                !e.member(i).is_serving(),
                "{label}: member {} serves",
                i + 1
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    // The third member returns: nothing acknowledged is lost, and the wiped one is caught
    // up, trusted and serving with no operator step.
    e.member_mut(keeper).respawn();
    e.wait_all_serving();
    for i in 0..3 {
        assert_eq!(
            missing(&e, i, &paths),
            Vec::<String>::new(),
            "{label}: member {} lost acknowledged creates",
            i + 1
        );
    }
    eventually(&format!("{label}: the wiped member trusted"), WAIT, || {
        (e.member(wiped).figure("zk_data_trusted").as_deref() == Some("1")).then_some(())
    });
    e.converged();
}

#[test]
fn a_wiped_member_never_votes_a_stale_member_in() {
    let roles = [(false, false), (true, false), (false, true), (true, true)];
    for (run, (wipe_the_leader, swap_followers)) in roles.into_iter().enumerate() {
        run_scenario(wipe_the_leader, swap_followers, run);
    }
}

#[test]
fn a_wiped_member_catches_up_and_serves_while_the_leader_is_up() {
    let mut e = TestEnsemble::start(3, 0, &[]);
    let paths = acknowledged_creates(&e.connect_string(), "w", 50);
    let leader = e.leader();
    let f = (leader + 1) % 3;
    wipe(&mut e, f);
    e.member_mut(f).respawn();
    e.wait_all_serving();
    assert_eq!(missing(&e, f, &paths), Vec::<String>::new());
    assert_eq!(e.member(f).figure("zk_data_trusted").as_deref(), Some("1"));
    assert_eq!(
        e.member(leader).figure("zk_untrusted_peers").as_deref(),
        Some("0")
    );
    // It counts again: with the third member down, the leader and it still commit.
    let third = (0..3).find(|i| *i != leader && *i != f).unwrap_or(0);
    e.member_mut(third).kill();
    let hosts = e.member(f).connect_string();
    let more = acknowledged_creates(&hosts, "x", 5);
    assert_eq!(missing(&e, f, &more), Vec::<String>::new());
}
