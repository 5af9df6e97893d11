//! Clock jumps (issue 15, point 4): one member's wall clock stepped forward and back by ten
//! minutes while it runs (Debian's libfaketime, a timestamp file read on every call, the
//! monotonic clock left alone). Sessions, TTL nodes and containers are timed on monotonic
//! clocks, so no session expires and no TTL node is reaped early; ctime/mtime follow the
//! leader's wall clock, as ZooKeeper's do; nothing crashes. On a standalone server, and on
//! the leader and a follower of a three-member ensemble.
//!
//! zooraft only: ZooKeeper reaps TTL nodes by the leader's wall clock, so a forward step
//! there deletes them early — the one place zooraft differs on purpose (the book's operations page, "Disk
//! faults and clocks").

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use zookeeper_client as zc;
use zooraft_tests::faults::FakeClock;
use zooraft_tests::rt::{block_on, eventually_async, within};
use zooraft_tests::zc::{ephemeral, persistent};
use zooraft_tests::{ServerKind, TestEnsemble, TestServer, TestServerBuilder};

const WAIT: Duration = Duration::from_secs(60);
/// The step: ten minutes, far beyond every timeout and TTL here.
const STEP_SECS: i64 = 600;
const TTL: Duration = Duration::from_secs(8);
const EXTRA: [(&str, &str); 2] = [
    ("extendedTypesEnabled", "true"),
    ("znode.container.checkIntervalMs", "200"),
];

fn real_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970")
        .as_millis() as i64
}

fn with_clock(b: TestServerBuilder, clock: &FakeClock) -> TestServerBuilder {
    clock.env().into_iter().fold(b, |b, (k, v)| b.env(k, &v))
}

async fn exists(c: &zc::Client, path: &str) -> bool {
    within(path, WAIT, c.check_stat(path))
        .await
        .expect("stat")
        .is_some()
}

/// The ctime of a node created now through `c`.
async fn ctime_of_new(c: &zc::Client, path: &str) -> i64 {
    let (stat, _) = within(path, WAIT, c.create(path, b"", &persistent()))
        .await
        .expect("create");
    stat.ctime
}

/// Steps `clock` forward and back while a session (4 s timeout), an ephemeral, a TTL node
/// and a container are watched through `c` (connected to the stepped member);
/// `stamps_follow` says whether new nodes' ctime follows the stepped clock (it leads).
async fn jump_and_check(c: &zc::Client, clock: &FakeClock, stamps_follow: bool, tag: &str) {
    let ttl_path = format!("/ttl-{tag}");
    let ttl = zc::CreateMode::Persistent
        .with_acls(zc::Acls::anyone_all())
        .with_ttl(TTL);
    within("ttl", WAIT, c.create(&ttl_path, b"", &ttl))
        .await
        .expect("TTL node");
    let container = format!("/c-{tag}");
    let opts = zc::CreateMode::Container.with_acls(zc::Acls::anyone_all());
    within("container", WAIT, c.create(&container, b"", &opts))
        .await
        .expect("container");
    within(
        "child",
        WAIT,
        c.create(&format!("{container}/kid"), b"", &persistent()),
    )
    .await
    .expect("child");
    let eph = format!("/e-{tag}");
    within("ephemeral", WAIT, c.create(&eph, b"", &ephemeral()))
        .await
        .expect("ephemeral");

    for offset in [STEP_SECS, -STEP_SECS] {
        clock.step(offset);
        tokio::time::sleep(Duration::from_secs(3)).await;
        let ctime = ctime_of_new(c, &format!("/stamp-{tag}{offset}")).await;
        let expected = real_ms() + if stamps_follow { offset * 1000 } else { 0 };
        assert!(
            (ctime - expected).abs() < 120_000,
            "step {offset:+}s: ctime {ctime}, expected about {expected}"
        );
        assert!(
            exists(c, &ttl_path).await,
            "step {offset:+}s: TTL node reaped early"
        );
        assert!(
            exists(c, &container).await,
            "container with a child deleted"
        );
        assert!(
            exists(c, &eph).await,
            "step {offset:+}s: session expired early"
        );
    }
    clock.step(0);
    assert_eq!(c.state(), zc::SessionState::SyncConnected);
    // Normal time again: the TTL node and the emptied container go as they should.
    within("delete", WAIT, c.delete(&format!("{container}/kid"), None))
        .await
        .expect("delete child");
    eventually_async("TTL node and container reaped", WAIT, || async {
        (!exists(c, &ttl_path).await && !exists(c, &container).await).then_some(())
    })
    .await;
    assert!(exists(c, &eph).await, "session expired");
}

async fn connect(hosts: &str) -> zc::Client {
    zooraft_tests::zc::connect(hosts, Duration::from_secs(4), WAIT).await
}

#[test]
fn standalone_clock_jumps() {
    let clock = FakeClock::new();
    let mut b = TestServer::builder(ServerKind::Zooraft);
    for (k, v) in EXTRA {
        b = b.config(k, v);
    }
    let server = with_clock(b, &clock).start();
    block_on(async {
        let c = connect(&server.connect_string()).await;
        jump_and_check(&c, &clock, true, "standalone").await;
    });
    assert!(server.is_serving(), "{}", server.log_tail());
}

fn ensemble_member_jumps(leader_jumps: bool) {
    let clocks: Vec<FakeClock> = (0..3).map(|_| FakeClock::new()).collect();
    let e = TestEnsemble::start_with(3, &EXTRA, &|i, b| with_clock(b, &clocks[i]));
    let leader = e.leader();
    let victim = if leader_jumps {
        leader
    } else {
        (leader + 1) % 3
    };
    block_on(async {
        let c = connect(&e.member(victim).connect_string()).await;
        let tag = if leader_jumps { "leader" } else { "follower" };
        jump_and_check(&c, &clocks[victim], leader_jumps, tag).await;
    });
    assert_eq!(e.leader(), leader, "the jump changed the leader");
    e.converged();
}

#[test]
fn leader_clock_jumps() {
    ensemble_member_jumps(true);
}

#[test]
fn follower_clock_jumps() {
    ensemble_member_jumps(false);
}
