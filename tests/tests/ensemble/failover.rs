//! Failover as a client sees it: when the leader dies, a client that resumes its session on
//! a follower at once is either refused (and tries again) or accepted with writes that
//! commit; never accepted and then dropped with its write in flight (what Patroni logged as
//! "Failed to update /service/.../status"). A member confirms a resumed session with the
//! leader (a ReadIndex round) before it answers, so one that has lost its leader cannot
//! accept it until a new leader is up.
//!
//! The same scenario runs against a 3-member Apache ZooKeeper 3.8 ensemble, whose follower
//! notices the dead leader connection at once and refuses handshakes until a new leader is
//! up: the behaviour zooraft matches.

use std::time::{Duration, Instant};

use bytes::Bytes;
use jute::{Acl, CreateRequest, Request};
use zooraft_tests::raw_client::{ConnectOptions, RawClient};
use zooraft_tests::rt::block_on;
use zooraft_tests::{against_both, ServerKind, TestEnsemble};

fn create(path: &str) -> Request {
    Request::Create(CreateRequest {
        path: path.into(),
        data: Some(Bytes::from_static(b"x")),
        acl: vec![Acl::open_unsafe()],
        flags: 0,
    })
}

against_both!(
    resume_after_the_leader_dies_apache,
    resume_after_the_leader_dies_zooraft,
    a_resume_right_after_the_leader_dies_is_refused_or_its_writes_commit
);

fn a_resume_right_after_the_leader_dies_is_refused_or_its_writes_commit(kind: ServerKind) {
    let mut ensemble = TestEnsemble::start_kind(kind, 3, 0, &[]);
    let leader = ensemble.leader();
    let follower = (leader + 1) % 3;
    let addr = ensemble.member(follower).addr();
    block_on(async {
        // A session made through the follower, with a first write.
        let (mut c, hs) =
            RawClient::connect(addr, &ConnectOptions::default(), Duration::from_secs(10))
                .await
                .expect("a session through the follower");
        let reply = c
            .call(&create("/before"), Duration::from_secs(10))
            .await
            .expect("a write before the failover");
        assert_eq!(reply.err, 0, "create /before");
        let (session, passwd, seen) = (hs.response.session_id, hs.response.passwd, reply.zxid);
        drop(c);
        ensemble.member_mut(leader).kill();
        let killed = Instant::now();
        // Resume at once, again and again until a write commits.
        let mut refused = 0;
        loop {
            assert!(
                killed.elapsed() < Duration::from_secs(30),
                "no resume succeeded within 30 s of the kill ({refused} refused)"
            );
            let opts = ConnectOptions::resume(session, passwd.clone(), seen);
            let (mut c, hs) = match RawClient::connect(addr, &opts, Duration::from_secs(10)).await {
                Ok(accepted) => accepted,
                Err(_) => {
                    refused += 1;
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
            assert!(
                hs.response.timeout > 0,
                "the live session was declared expired"
            );
            match c.call(&create("/after"), Duration::from_secs(15)).await {
                Ok(r) => {
                    assert_eq!(r.err, 0, "create /after");
                    println!(
                        "{}: resume on a follower after the leader's kill: {refused} refused, \
                         then accepted and written {:?} after the kill",
                        kind.name(),
                        killed.elapsed()
                    );
                    return;
                }
                Err(e) => panic!(
                    "the follower accepted the resumed session ({:?} after the kill, {refused} \
                     refused before), then its write was dropped: {e}",
                    killed.elapsed()
                ),
            }
        }
    });
}
