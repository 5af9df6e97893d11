//! `linearizableReads=true` (zooraft's own key): every read of the tree waits for a Raft
//! ReadIndex round before it is answered, as if the client had sent `sync` first.
//!
//! What must hold: a session's requests are still answered in order and each read sees
//! exactly its own session's earlier writes, however the requests are pipelined (a write
//! behind a read waits for the read's round, so the read cannot see it); and a member cut
//! off from its peers never answers a read with a value older than an acknowledged write
//! (without the key it does, as ZooKeeper's members do). The chaos suite checks the same
//! with the linearizability checker under faults (`chaos_linearizable_plain_reads_three`).

use std::time::Duration;

use jute::{Request, Response, SyncRequest};
use zooraft_tests::conformance::req;
use zooraft_tests::raw_client::{Body, ConnectOptions, RawClient, RawError, Reply};
use zooraft_tests::rt::{block_on, eventually_async};
use zooraft_tests::TestEnsemble;

const WAIT: Duration = Duration::from_secs(60);
const CALL: Duration = Duration::from_secs(10);
const LINEARIZABLE: &[(&str, &str)] = &[("linearizableReads", "true")];

fn create(path: &str, data: &str) -> Request {
    req::create(path, data.as_bytes(), 0)
}

fn get(path: &str) -> Request {
    req::get_data(path, false)
}

fn set(path: &str, data: &str) -> Request {
    req::set_data(path, data.as_bytes(), -1)
}

fn exists(path: &str) -> Request {
    req::exists(path, false)
}

/// The data and version of a getData reply.
fn data_of(reply: &Reply) -> (String, i32) {
    match &reply.body {
        Body::Decoded(Response::GetData(data, stat)) => (
            String::from_utf8_lossy(data.as_deref().unwrap_or_default()).into_owned(),
            stat.version,
        ),
        other => panic!("not a getData reply: {other:?}"),
    }
}

/// A new session on member `i`.
async fn session(ensemble: &TestEnsemble, i: usize) -> RawClient {
    let addr = ensemble.member(i).addr();
    let (c, _) = RawClient::connect(addr, &ConnectOptions::default(), CALL)
        .await
        .unwrap_or_else(|e| panic!("a session on member {}: {e:?}", i + 1));
    c
}

/// A follower of `ensemble` (not the leader).
fn follower(ensemble: &TestEnsemble) -> usize {
    (ensemble.leader() + 1) % 3
}

#[test]
fn pipelined_reads_see_exactly_their_sessions_earlier_writes() {
    let ensemble = TestEnsemble::start(3, 0, LINEARIZABLE);
    block_on(async {
        let mut c = session(&ensemble, follower(&ensemble)).await;
        let reply = c.call(&create("/p", "0"), CALL).await.expect("create");
        assert_eq!(reply.err, 0);
        // Rounds of requests sent in one write: reads between writes, a sync, a read of a
        // missing node. Each read must see the writes before it in the batch, and none
        // after it.
        for round in 1..=30 {
            let (a, b) = (format!("a{round}"), format!("b{round}"));
            let batch = [
                get("/p"),
                set("/p", &a),
                get("/p"),
                exists("/p"),
                get("/p"),
                set("/p", &b),
                Request::Sync(SyncRequest {
                    path: Some("/p".into()),
                }),
                get("/p"),
                get("/missing"),
            ];
            let xids = c.send_batch(&batch).await.expect("send a batch");
            let mut replies = Vec::new();
            for _ in &xids {
                match c.recv(CALL).await.expect("a reply") {
                    zooraft_tests::raw_client::Incoming::Reply(r) => replies.push(r),
                    other => panic!("round {round}: expected a reply, got {other:?}"),
                }
            }
            let order: Vec<i32> = replies.iter().map(|r| r.xid).collect();
            assert_eq!(order, xids, "round {round}: replies in request order");
            let before = 2 * (round - 1);
            let previous = if round == 1 {
                "0".to_string()
            } else {
                format!("b{}", round - 1)
            };
            assert_eq!(data_of(&replies[0]), (previous, before), "round {round}");
            assert_eq!(
                data_of(&replies[2]),
                (a.clone(), before + 1),
                "round {round}"
            );
            match &replies[3].body {
                Body::Decoded(Response::Stat(s)) => assert_eq!(s.version, before + 1),
                other => panic!("round {round}: exists: {other:?}"),
            }
            assert_eq!(data_of(&replies[4]), (a, before + 1), "round {round}");
            assert_eq!(data_of(&replies[7]), (b, before + 2), "round {round}");
            assert_eq!(replies[8].err, -101, "round {round}: NONODE");
        }
    });
}

#[test]
fn a_cut_off_follower_never_answers_a_read_older_than_an_acknowledged_write() {
    let ensemble = TestEnsemble::start_partitionable(3, 0, LINEARIZABLE);
    let leader = ensemble.leader();
    let cut = follower(&ensemble);
    block_on(async {
        let mut writer = session(&ensemble, leader).await;
        let reply = writer
            .call(&create("/x", "old"), CALL)
            .await
            .expect("create");
        assert_eq!(reply.err, 0);
        let mut reader = session(&ensemble, cut).await;
        let reply = reader.call(&get("/x"), CALL).await.expect("read /x");
        assert_eq!(data_of(&reply).0, "old");

        // The follower is cut off; the other two acknowledge a new value.
        ensemble.isolate(cut);
        let reply = writer.call(&set("/x", "new"), CALL).await.expect("set");
        assert_eq!(reply.err, 0, "the two others still make a quorum");

        // A read on the cut-off follower: it may wait, or the follower may drop the client
        // once it knows it has no leader; it must never answer "old".
        let xid = reader.send(&get("/x")).await.expect("send the read");
        let early = reader.wait_reply(xid, Duration::from_secs(2)).await;
        if let Ok(r) = &early {
            panic!("the cut-off follower answered {:?}", data_of(r));
        }
        ensemble.heal(cut);
        match early {
            Err(RawError::Closed) => {}
            _ => match reader.wait_reply(xid, WAIT).await {
                Ok(r) => assert_eq!(data_of(&r).0, "new", "answered after the heal"),
                Err(e) => assert!(matches!(e, RawError::Closed), "{e:?}"),
            },
        }
        // Once healed, a new client of that member reads the new value at once.
        let member = ensemble.member(cut).addr();
        let value = read_on_new_session(member).await;
        assert_eq!(value, "new");
    });
}

/// A read on `member` from a new session, as soon as the member takes one.
async fn read_on_new_session(member: std::net::SocketAddr) -> String {
    let (mut c, _) = eventually_async("the member takes a session", WAIT, || async {
        RawClient::connect(member, &ConnectOptions::default(), CALL)
            .await
            .ok()
    })
    .await;
    let reply = c.call(&get("/x"), CALL).await.expect("read /x");
    data_of(&reply).0
}

#[test]
fn a_standalone_server_takes_the_key_and_answers_reads() {
    let ensemble = TestEnsemble::start(1, 0, LINEARIZABLE);
    block_on(async {
        let mut c = session(&ensemble, 0).await;
        assert_eq!(
            c.call(&create("/s", "v"), CALL).await.expect("create").err,
            0
        );
        let reply = c.call(&get("/s"), CALL).await.expect("read");
        assert_eq!(data_of(&reply), ("v".to_string(), 0));
    });
}
