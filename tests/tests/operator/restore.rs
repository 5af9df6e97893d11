//! The AdminServer's `restore` (ZooKeeper 3.9's command) on a 3-member ensemble: one POST
//! to any member restores every member at the same entry, from the `snapshot` command's
//! answer or a `zooraft backup` file; the sessions open at that moment expire, the
//! snapshot's tree and the ensemble's own membership remain; misuse (no auth, GET, a
//! damaged body, a second restore within the rate limit) changes nothing.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use serde_json::Value;
use zookeeper_client as zc;
use zooraft_tests::rt::eventually;
use zooraft_tests::{free_port, ServerKind, TestEnsemble};

use crate::{connect, ephemeral, persistent};

/// One HTTP/1.1 request to 127.0.0.1:`port`; the status and the body's bytes.
fn request(port: u16, method: &str, path: &str, auth: Option<&str>, body: &[u8]) -> (u16, Vec<u8>) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect to the admin port");
    s.set_read_timeout(Some(Duration::from_secs(150)))
        .expect("read timeout");
    let auth = auth
        .map(|a| format!("Authorization: {a}\r\n"))
        .unwrap_or_default();
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{auth}Content-Type: application/octet-stream\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).expect("send the head");
    let _ = s.write_all(body);
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    let split = out
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("no HTTP answer: {:?}", String::from_utf8_lossy(&out)));
    let status = String::from_utf8_lossy(&out[..split]);
    let code = status
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("no status in {status:?}"));
    (code, out[split + 4..].to_vec())
}

fn json(body: &[u8]) -> Value {
    serde_json::from_slice(body)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(body)))
}

async fn data(c: &zc::Client, path: &str) -> Option<Vec<u8>> {
    match c.get_data(path).await {
        Ok((d, _)) => Some(d),
        Err(zc::Error::NoNode) => None,
        Err(e) => panic!("get {path}: {e}"),
    }
}

#[test]
fn restore_replaces_the_state_on_every_member() {
    let admin: Vec<u16> = (0..3).map(|_| free_port()).collect();
    let ensemble = TestEnsemble::start_each_serving(ServerKind::Zooraft, 3, &[], &|i| {
        vec![("admin.serverPort".into(), admin[i].to_string())]
    });
    let hosts = ensemble.connect_string();
    // One runtime for the whole test: a client lives as long as the runtime it was made on.
    let rt = zooraft_tests::rt::runtime();
    let leader = ensemble.leader();
    let (f1, f2) = ((leader + 1) % 3, (leader + 2) % 3);
    // The state to come back to, and a session open when the backup is taken.
    let old = rt.block_on(async {
        let c = connect(&hosts).await;
        c.create("/app", b"v1", &persistent())
            .await
            .expect("create");
        for child in ["/app/a", "/app/b"] {
            c.create(child, b"", &persistent()).await.expect("create");
        }
        c.create("/app/eph-old", b"", &ephemeral())
            .await
            .expect("ephemeral");
        c
    });
    let (code, snapshot) = request(admin[leader], "GET", "/commands/snapshot", Some("ip"), b"");
    assert_eq!(code, 200, "{}", String::from_utf8_lossy(&snapshot));
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("app.zrbk");
    let server = format!("127.0.0.1:{}", admin[f2]);
    let out = file.to_str().expect("utf-8 path");
    let (ok, text) =
        zooraft_tests::zooraft_cmd(&["backup", "--server", &server, "--out", out, "--auth", "ip"]);
    assert!(ok, "{text}");
    // What the restore undoes; a second session, watching, with an ephemeral.
    let newer = rt.block_on(async {
        let c = connect(&hosts).await;
        c.set_data("/app", b"v2", None).await.expect("set");
        c.delete("/app/a", None).await.expect("delete");
        c.create("/app/c", b"", &persistent())
            .await
            .expect("create");
        c.create("/app/eph-new", b"", &ephemeral())
            .await
            .expect("ephemeral");
        let (_, _, watch) = c.get_and_watch_data("/app").await.expect("watch");
        (c, watch)
    });
    let (old_states, new_states) = (old.state_watcher(), newer.0.state_watcher());
    let membership = rt
        .block_on(old.get_data("/zookeeper/config"))
        .expect("config");
    let (_, before) = ensemble.converged();
    // Misuse first: nothing changes.
    let path = "/commands/restore";
    let (code, body) = request(admin[f1], "POST", path, None, &snapshot);
    assert_eq!(code, 401, "{}", String::from_utf8_lossy(&body));
    let (code, _) = request(admin[f1], "GET", path, Some("ip"), b"");
    assert_eq!(code, 405, "GET");
    let mut damaged = snapshot.clone();
    let middle = damaged.len() / 2;
    damaged[middle] ^= 0x40;
    let (code, body) = request(admin[f1], "POST", path, Some("ip"), &damaged);
    assert_eq!(code, 400, "{}", String::from_utf8_lossy(&body));
    assert!(json(&body)["error"].as_str().is_some_and(|e| !e.is_empty()));
    assert_eq!(
        ensemble.converged().1,
        before,
        "a refused restore changed the tree"
    );
    // The snapshot's answer, POSTed to a follower (another member's rate limit is free).
    let (code, body) = request(admin[f2], "POST", path, Some("ip"), &snapshot);
    assert_eq!(code, 200, "{}", String::from_utf8_lossy(&body));
    let answer = json(&body);
    assert_eq!(answer["command"], "restore");
    assert!(answer["error"].is_null(), "{answer}");
    let zxid = answer["last_zxid"].as_i64().expect("last_zxid");
    let (code, body) = request(admin[f2], "POST", path, Some("ip"), &snapshot);
    assert_eq!(
        code,
        429,
        "a second restore within the interval: {}",
        String::from_utf8_lossy(&body)
    );
    let (last, restored) = ensemble.converged();
    assert_ne!(restored, before);
    assert!(
        i64::from_str_radix(&last, 16).expect("hex zxid") >= zxid,
        "{last} < {zxid:#x}"
    );
    // Both sessions were open when it applied: they expired, their ephemerals with them.
    let (c, watch) = newer;
    for (client, mut states) in [(&old, old_states), (&c, new_states)] {
        let last = rt.block_on(async {
            tokio::time::timeout(Duration::from_secs(60), async {
                loop {
                    let s = states.changed().await;
                    if s.is_terminated() {
                        return s;
                    }
                }
            })
            .await
        });
        assert_eq!(last.ok(), Some(zc::SessionState::Expired));
        let r = rt.block_on(client.get_data("/app"));
        assert!(matches!(r, Err(zc::Error::SessionExpired)), "{r:?}");
    }
    drop(watch);
    rt.block_on(async {
        let fresh = connect(&hosts).await;
        assert_eq!(data(&fresh, "/app").await.as_deref(), Some(&b"v1"[..]));
        assert!(
            data(&fresh, "/app/a").await.is_some(),
            "deleted after the backup"
        );
        assert!(
            data(&fresh, "/app/c").await.is_none(),
            "created after the backup"
        );
        assert!(data(&fresh, "/app/eph-new").await.is_none());
        assert!(
            data(&fresh, "/app/eph-old").await.is_none(),
            "its session was open"
        );
        let config = fresh.get_data("/zookeeper/config").await.expect("config");
        assert_eq!(config, membership, "the ensemble's own membership stays");
        // Writes go on after it.
        fresh
            .create("/after", b"", &persistent())
            .await
            .expect("a write after the restore");
    });
    // The backup file, on the third member. The session of /app/eph-old was not open this
    // time: it comes back with its ephemeral, then expires (nobody resumes it).
    let bytes = std::fs::read(&file).expect("read the backup");
    let (code, body) = request(admin[leader], "POST", path, Some("ip"), &bytes);
    assert_eq!(code, 200, "{}", String::from_utf8_lossy(&body));
    rt.block_on(async {
        let fresh = connect(&hosts).await;
        assert!(
            data(&fresh, "/after").await.is_none(),
            "the backup predates it"
        );
        assert_eq!(data(&fresh, "/app").await.as_deref(), Some(&b"v1"[..]));
        assert!(
            data(&fresh, "/app/eph-old").await.is_some(),
            "its session was closed"
        );
    });
    eventually(
        "the restored session expires",
        Duration::from_secs(60),
        || {
            let fresh = rt.block_on(connect(&hosts));
            rt.block_on(data(&fresh, "/app/eph-old"))
                .is_none()
                .then_some(())
        },
    );
    ensemble.converged();
}
