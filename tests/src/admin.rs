//! An operator's client for ZooKeeper's reconfig (op 16), over the raw client, for the
//! membership tests: reconfig requests as the Java client and kazoo send them (absent
//! strings null), `/zookeeper/config` read and watched, and an [`Admin`] that reconnects
//! when its connection is lost (members drop clients when the leader leaves) and retries a
//! reconfig while the previous one is being carried out.

use std::time::Duration;

use crate::raw_client::{ConnectOptions, RawClient, Reply};

pub const CALL: Duration = Duration::from_secs(30);

pub fn put_opt(b: &mut Vec<u8>, s: Option<&str>) {
    match s {
        None => b.extend_from_slice(&(-1i32).to_be_bytes()),
        Some(s) => {
            b.extend_from_slice(&(s.len() as i32).to_be_bytes());
            b.extend_from_slice(s.as_bytes());
        }
    }
}

/// One reconfig request: joining, leaving, newMembers (null when `None`), curConfigId.
pub async fn reconfig(
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
pub fn config_text(r: &Reply) -> String {
    let b = &r.raw_body;
    assert!(b.len() >= 4, "a getData reply");
    let len = i32::from_be_bytes([b[0], b[1], b[2], b[3]]).max(0) as usize;
    String::from_utf8_lossy(&b[4..4 + len]).into_owned()
}

pub fn get_config(watch: bool) -> jute::Request {
    jute::Request::GetData(jute::GetDataRequest {
        path: "/zookeeper/config".into(),
        watch,
    })
}

/// `/zookeeper/config` once there is one (zooraft's leader states the first one right
/// after it is elected).
pub async fn current_config(c: &mut RawClient) -> String {
    let deadline = std::time::Instant::now() + CALL;
    loop {
        let r = c.call(&get_config(false), CALL).await.expect("getData");
        assert_eq!(r.err, 0, "getData /zookeeper/config");
        let text = config_text(&r);
        if !text.is_empty() {
            return text;
        }
        assert!(std::time::Instant::now() < deadline, "no /zookeeper/config");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The server line of member `i` in a configuration text.
pub fn line_of(text: &str, i: usize) -> String {
    let prefix = format!("server.{}=", i + 1);
    text.lines()
        .find(|l| l.starts_with(&prefix))
        .unwrap_or_else(|| panic!("no server.{} in {text}", i + 1))
        .to_string()
}

/// The operator's client: one session at a time, a new one when the connection is lost
/// (ZooKeeper's members drop their clients when the leader leaves; zooraft's drop those with
/// a write in flight across a leader change), as a real client would.
pub struct Admin {
    pub c: RawClient,
    addr: std::net::SocketAddr,
    /// How many sessions this client has had (a watch lives as long as its session).
    sessions: u32,
}

impl Admin {
    pub async fn open(addr: std::net::SocketAddr) -> Admin {
        let deadline = std::time::Instant::now() + CALL;
        loop {
            match RawClient::connect(addr, &ConnectOptions::default(), CALL).await {
                Ok((c, _)) => {
                    return Admin {
                        c,
                        addr,
                        sessions: 1,
                    }
                }
                Err(e) => assert!(std::time::Instant::now() < deadline, "connect: {e:?}"),
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    pub async fn reconnect(&mut self) {
        let sessions = self.sessions;
        *self = Admin::open(self.addr).await;
        self.sessions = sessions + 1;
    }

    /// A request answered (reconnecting as needed).
    pub async fn call(&mut self, req: &jute::Request) -> Reply {
        for _ in 0..20 {
            match self.c.call(req, CALL).await {
                Ok(r) => return r,
                Err(_) => self.reconnect().await,
            }
        }
        panic!("no answer to {req:?}");
    }

    /// Waits until this member has applied everything the leader had committed.
    pub async fn sync(&mut self) {
        let sync = jute::Request::Sync(jute::SyncRequest {
            path: Some("/".into()),
        });
        assert_eq!(self.call(&sync).await.err, 0, "sync");
    }

    pub async fn config(&mut self) -> String {
        current_config(&mut self.c).await
    }

    pub async fn config_version(&mut self) -> i64 {
        let text = self.config().await;
        let v = text.lines().last().and_then(|l| l.strip_prefix("version="));
        i64::from_str_radix(v.expect("a version line"), 16).expect("a hex version")
    }

    /// Sets a data watch on `/zookeeper/config`; returns the session it lives in.
    pub async fn watch_config(&mut self) -> u32 {
        let r = self.call(&get_config(true)).await;
        assert_eq!(r.err, 0);
        self.sessions
    }

    /// The watch set in `session` fired (unless that session is gone).
    pub async fn expect_config_event(&mut self, session: u32) {
        if session == self.sessions {
            let event = wait_event(&mut self.c).await;
            assert_eq!(event.event.path, "/zookeeper/config");
            assert_eq!(event.event.event_type, 3, "NodeDataChanged");
        }
    }

    /// Whether `path` exists in this member's tree (NONODE: no; any other error fails).
    pub async fn exists(&mut self, path: &str) -> bool {
        let req = jute::Request::Exists(jute::ExistsRequest {
            path: path.into(),
            watch: false,
        });
        let r = self.call(&req).await;
        assert!(r.err == 0 || r.err == -101, "exists {path}: {}", r.err);
        r.err == 0
    }

    /// A create that must succeed (NodeExists after a lost connection means it did).
    pub async fn write(&mut self, path: &str) -> String {
        let req = jute::Request::Create(jute::CreateRequest {
            path: path.into(),
            data: Some(bytes::Bytes::from_static(b"x")),
            acl: vec![jute::Acl::open_unsafe()],
            flags: 0,
        });
        let first = self.sessions;
        let r = self.call(&req).await;
        let retried = self.sessions != first;
        assert!(
            r.err == 0 || (retried && r.err == -110),
            "create {path}: {}",
            r.err
        );
        path.to_string()
    }

    /// A reconfig that must succeed (RECONFIGINPROGRESS fails too: a reconfig is answered
    /// once it is in effect, so the next one may follow at once), asked again from a new
    /// session if the connection is lost
    /// (ZooKeeper may drop it when the leader leaves). Returns the new configuration and,
    /// when the first reply came, its zxid.
    pub async fn change(
        &mut self,
        joining: Option<&str>,
        leaving: Option<&str>,
        from: i64,
    ) -> (String, Option<i64>) {
        let deadline = std::time::Instant::now() + CALL;
        let mut lost = false;
        for xid in 600.. {
            assert!(
                std::time::Instant::now() < deadline,
                "reconfig never answered"
            );
            match reconfig_reply(&mut self.c, xid, joining, leaving, from).await {
                Some(r) if r.err == 0 => return (config_text(&r), (!lost).then_some(r.zxid)),
                // Asked again after a lost reply: the first attempt changed the version.
                Some(r) if r.err == -103 && lost => return (self.config().await, None),
                Some(r) => panic!("reconfig failed with {}", r.err),
                // The reply was lost: ask again (adding and removing the same members
                // twice changes nothing more).
                None => {
                    lost = true;
                    self.reconnect().await;
                }
            }
        }
        unreachable!()
    }
}

/// A reconfig's reply, or `None` if the connection was lost.
pub async fn reconfig_reply(
    c: &mut RawClient,
    xid: i32,
    joining: Option<&str>,
    leaving: Option<&str>,
    from: i64,
) -> Option<Reply> {
    let mut body = Vec::new();
    put_opt(&mut body, joining);
    put_opt(&mut body, leaving);
    put_opt(&mut body, None);
    body.extend_from_slice(&from.to_be_bytes());
    c.send_op(xid, 16, &body).await.ok()?;
    c.wait_reply(xid, CALL).await.ok()
}

pub async fn wait_event(c: &mut RawClient) -> crate::raw_client::Event {
    let deadline = std::time::Instant::now() + CALL;
    loop {
        assert!(std::time::Instant::now() < deadline, "no watch event");
        match c.recv(CALL).await.expect("receive") {
            crate::raw_client::Incoming::Event(ev) => return ev,
            _ => continue,
        }
    }
}
