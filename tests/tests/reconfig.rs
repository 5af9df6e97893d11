//! ZooKeeper's reconfig (op 16) as a client sees it, pinned against Apache ZooKeeper 3.8
//! with `reconfigEnabled=true`: `/zookeeper/config`'s format and first version, and the
//! refusals (MARSHALLINGERROR for an empty `newMembers` or a non-numeric id, BADVERSION
//! for a stale `curConfigId`, BADARGUMENTS when no voter is left, NEWCONFIGNOQUORUM when
//! the new voters have no synced quorum, and NOAUTH, checked last, for a non-super client).
//! Requests are sent as the Java client and kazoo send them: absent strings are null.
//!
//! zooraft's side of reconfig is not built yet (issue 12, step 2: it still answers
//! RECONFIGDISABLED), so its variant is ignored until it is.

use std::time::Duration;

use harness::raw_client::{ConnectOptions, RawClient, Reply};
use harness::rt::block_on;
use harness::{ServerKind, TestEnsemble};

const CALL: Duration = Duration::from_secs(30);

fn put_opt(b: &mut Vec<u8>, s: Option<&str>) {
    match s {
        None => b.extend_from_slice(&(-1i32).to_be_bytes()),
        Some(s) => {
            b.extend_from_slice(&(s.len() as i32).to_be_bytes());
            b.extend_from_slice(s.as_bytes());
        }
    }
}

/// One reconfig request: joining, leaving, newMembers (null when `None`), curConfigId.
async fn reconfig(
    c: &mut RawClient,
    xid: i32,
    joining: Option<&str>,
    leaving: Option<&str>,
    members: Option<&str>,
    from: i64,
) -> Reply {
    let mut body = Vec::new();
    put_opt(&mut body, joining);
    put_opt(&mut body, leaving);
    put_opt(&mut body, members);
    body.extend_from_slice(&from.to_be_bytes());
    c.send_op(xid, 16, &body).await.expect("send reconfig");
    c.wait_reply(xid, CALL).await.expect("reconfig reply")
}

/// `/zookeeper/config`'s data, from a getData reply body (buffer, then Stat).
fn config_text(r: &Reply) -> String {
    let b = &r.raw_body;
    assert!(b.len() >= 4, "a getData reply");
    let len = i32::from_be_bytes([b[0], b[1], b[2], b[3]]).max(0) as usize;
    String::from_utf8_lossy(&b[4..4 + len]).into_owned()
}

#[test]
fn reconfig_refusals_apache() {
    reconfig_refusals(ServerKind::Apache);
}

#[test]
#[ignore = "reconfig on Raft is not built yet (issue 12, step 2)"]
fn reconfig_refusals_zooraft() {
    reconfig_refusals(ServerKind::Zooraft);
}

/// A refusal case: what, joining, leaving, newMembers, curConfigId, the error expected.
type Case = (
    &'static str,
    Option<&'static str>,
    Option<&'static str>,
    Option<&'static str>,
    i64,
    i32,
);

fn reconfig_refusals(kind: ServerKind) {
    let e = TestEnsemble::start_kind(
        kind,
        3,
        0,
        &[("reconfigEnabled", "true"), ("standaloneEnabled", "false")],
    );
    block_on(async {
        let (mut c, _) = RawClient::connect(e.member(0).addr(), &ConnectOptions::default(), CALL)
            .await
            .expect("a session");
        let get = jute::Request::GetData(jute::GetDataRequest {
            path: "/zookeeper/config".into(),
            watch: false,
        });
        let r = c.call(&get, CALL).await.expect("getData /zookeeper/config");
        assert_eq!(r.err, 0);
        let text = config_text(&r);
        let lines: Vec<&str> = text.split('\n').collect();
        assert_eq!(lines.len(), 4, "{text}");
        for (i, line) in lines[..3].iter().enumerate() {
            let client = e.member(i).port();
            let peer = e.peer_port(i);
            assert!(
                line.starts_with(&format!("server.{}=127.0.0.1:{peer}:", i + 1))
                    && line.ends_with(&format!(":participant;127.0.0.1:{client}")),
                "{line}"
            );
        }
        assert_eq!(lines[3], "version=100000000");
        let three_dead = "server.4=127.0.0.1:1:2;3,server.5=127.0.0.1:4:5;6,\
                          server.6=127.0.0.1:7:8;9";
        let cases: [Case; 6] = [
            ("empty newMembers", None, None, Some(""), -1, -5),
            ("a non-numeric leaving id", None, Some("x"), None, -1, -5),
            ("a stale curConfigId", None, Some("3"), None, 5, -103),
            ("removing every voter", None, Some("1,2,3"), None, -1, -8),
            (
                "three joiners that never started",
                Some(three_dead),
                None,
                None,
                -1,
                -13,
            ),
            (
                "a non-super client",
                None,
                Some("3"),
                None,
                0x1_0000_0000,
                -102,
            ),
        ];
        for (xid, (what, j, l, m, from, err)) in cases.into_iter().enumerate() {
            let r = reconfig(&mut c, 100 + xid as i32, j, l, m, from).await;
            assert_eq!(r.err, err, "{what}");
        }
        // Nothing changed.
        let r = c.call(&get, CALL).await.expect("getData /zookeeper/config");
        assert_eq!(config_text(&r), text);
    });
}
