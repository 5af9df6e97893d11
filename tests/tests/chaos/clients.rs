//! In-process clients: owners of ephemerals (one per session, re-created after an expiry),
//! the writer whose acknowledged creates must all survive, and reads of one member alone.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use zookeeper_client as zc;
use zooraft_tests::TestEnsemble;

use crate::links::ClientLink;
use crate::util::{bounded, lock};
use crate::{TOOL_SESSION, WAIT};

/// One session of an ephemeral owner, with its node.
#[derive(Debug, Clone)]
pub(crate) struct SessionRecord {
    pub(crate) id: i64,
    pub(crate) node: String,
    /// The client reported `Expired` for this session.
    pub(crate) expired: bool,
    /// When it did.
    pub(crate) expired_at: Option<Instant>,
    /// When a write in this session last succeeded.
    pub(crate) last_ok: Instant,
}

#[derive(Default)]
pub(crate) struct OwnerState {
    pub(crate) sessions: Vec<SessionRecord>,
    pub(crate) writes: u64,
    /// Violations the owner saw itself (its own ephemeral gone while its session lived).
    pub(crate) violations: Vec<String>,
}

/// A client that owns one ephemeral per session and keeps writing to it.
pub(crate) struct Owner {
    pub(crate) name: String,
    pub(crate) timeout: Duration,
    pub(crate) link: ClientLink,
    pub(crate) state: Arc<Mutex<OwnerState>>,
}

impl Owner {
    pub(crate) fn current(&self) -> Option<SessionRecord> {
        lock(&self.state).sessions.last().cloned()
    }
}

pub(crate) use zooraft_tests::zc::{ephemeral, persistent};

pub(crate) async fn connect(hosts: &str, timeout: Duration) -> Option<zc::Client> {
    bounded(
        WAIT,
        zc::Client::connector()
            .with_session_timeout(timeout)
            .connect(hosts),
    )
    .await
    .and_then(Result::ok)
}

/// Creates our ephemeral, riding out a lost reply: `NodeExists` with our session as owner
/// means an earlier attempt went through.
pub(crate) async fn create_ephemeral(client: &zc::Client, node: &str) -> bool {
    let sid = client.session_id().0;
    for _ in 0..20 {
        match bounded(WAIT, client.create(node, b"0", &ephemeral())).await {
            Some(Ok(_)) => return true,
            Some(Err(zc::Error::NodeExists)) => {
                return matches!(
                    client.check_stat(node).await,
                    Ok(Some(s)) if s.ephemeral_owner == sid
                );
            }
            Some(Err(zc::Error::SessionExpired)) => return false,
            _ => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
    false
}

/// The owner's life: a session, an ephemeral named after it, a write every 250 ms; after an
/// expiry, a new session and a new ephemeral. `quiet` stops the writes (the session stays),
/// `close` ends the session.
pub(crate) async fn owner_task(
    name: String,
    hosts: String,
    timeout: Duration,
    state: Arc<Mutex<OwnerState>>,
    quiet: Arc<AtomicBool>,
    close: Arc<AtomicBool>,
) {
    let mut generation = 0u32;
    while !close.load(Ordering::SeqCst) {
        let Some(client) = connect(&hosts, timeout).await else {
            tokio::time::sleep(Duration::from_millis(200)).await;
            continue;
        };
        generation += 1;
        let node = format!("/chaos/eph/{name}-{generation}");
        if !create_ephemeral(&client, &node).await {
            continue;
        }
        let sid = client.session_id().0;
        lock(&state).sessions.push(SessionRecord {
            id: sid,
            node: node.clone(),
            expired: false,
            expired_at: None,
            last_ok: Instant::now(),
        });
        let mark_expired = |state: &Mutex<OwnerState>| {
            if let Some(r) = lock(state).sessions.iter_mut().find(|r| r.id == sid) {
                if !r.expired {
                    r.expired = true;
                    r.expired_at = Some(Instant::now());
                }
            }
        };
        let mut watcher = client.state_watcher();
        let mut n = 0u64;
        loop {
            tokio::select! {
                s = watcher.changed() => match s {
                    zc::SessionState::Expired => {
                        mark_expired(&state);
                        break;
                    }
                    zc::SessionState::Closed | zc::SessionState::AuthFailed => break,
                    _ => {}
                },
                _ = tokio::time::sleep(Duration::from_millis(250)) => {
                    if close.load(Ordering::SeqCst) {
                        drop(client);
                        return;
                    }
                    if quiet.load(Ordering::SeqCst) {
                        continue;
                    }
                    n += 1;
                    match bounded(timeout, client.set_data(&node, n.to_string().as_bytes(), None)).await {
                        Some(Ok(_)) => {
                            let mut s = lock(&state);
                            s.writes += 1;
                            if let Some(r) = s.sessions.iter_mut().find(|r| r.id == sid) {
                                r.last_ok = Instant::now();
                            }
                        }
                        Some(Err(zc::Error::SessionExpired)) => {
                            mark_expired(&state);
                            break;
                        }
                        Some(Err(zc::Error::NoNode)) => {
                            lock(&state).violations.push(format!(
                                "{node}: the ephemeral of live session {sid:#x} is gone (setData: NoNode)"
                            ));
                        }
                        _ => {}
                    }
                }
            }
        }
    }
}

/// Creates persistent nodes one after another and records each acknowledged one.
pub(crate) async fn writer_task(
    hosts: String,
    acked: Arc<Mutex<Vec<(String, i64)>>>,
    quiet: Arc<AtomicBool>,
) {
    let mut k = 0u64;
    'session: while !quiet.load(Ordering::SeqCst) {
        let Some(client) = connect(&hosts, TOOL_SESSION).await else {
            continue;
        };
        while !quiet.load(Ordering::SeqCst) {
            k += 1;
            let path = format!("/chaos/acks/w-{k:06}");
            match bounded(
                Duration::from_secs(10),
                client.create(&path, b"", &persistent()),
            )
            .await
            {
                Some(Ok((stat, _))) => lock(&acked).push((path, stat.czxid)),
                Some(Err(zc::Error::SessionExpired)) => continue 'session,
                _ => tokio::time::sleep(Duration::from_millis(100)).await,
            }
            tokio::time::sleep(Duration::from_millis(30)).await;
        }
    }
}

/// What the tree comparison looks at for one znode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NodeView {
    pub(crate) czxid: i64,
    pub(crate) mzxid: i64,
    pub(crate) pzxid: i64,
    pub(crate) version: i32,
    pub(crate) cversion: i32,
    pub(crate) ephemeral_owner: i64,
    pub(crate) data: Vec<u8>,
}

/// A client of member `i` alone, synced with the leader.
pub(crate) async fn member_client(ensemble: &TestEnsemble, i: usize) -> Result<zc::Client, String> {
    let client = connect(&ensemble.member(i).connect_string(), TOOL_SESSION)
        .await
        .ok_or_else(|| format!("member {} does not take a session", i + 1))?;
    match bounded(WAIT, client.sync("/")).await {
        Some(Ok(())) => Ok(client),
        other => Err(format!("sync on member {}: {other:?}", i + 1)),
    }
}

/// Every node under `root` on member `i`, with what must match across members.
pub(crate) async fn dump_tree(
    ensemble: &TestEnsemble,
    i: usize,
    root: &str,
) -> Result<BTreeMap<String, NodeView>, String> {
    let client = member_client(ensemble, i).await?;
    let mut out = BTreeMap::new();
    let mut todo = vec![root.to_string()];
    while let Some(path) = todo.pop() {
        let (data, stat) = match bounded(WAIT, client.get_data(&path)).await {
            Some(Ok(d)) => d,
            Some(Err(zc::Error::NoNode)) => continue,
            other => return Err(format!("member {} get_data {path}: {other:?}", i + 1)),
        };
        let children = match bounded(WAIT, client.list_children(&path)).await {
            Some(Ok(c)) => c,
            Some(Err(zc::Error::NoNode)) => continue,
            other => return Err(format!("member {} list {path}: {other:?}", i + 1)),
        };
        for c in children {
            todo.push(format!("{}/{c}", if path == "/" { "" } else { &path }));
        }
        out.insert(
            path,
            NodeView {
                czxid: stat.czxid,
                mzxid: stat.mzxid,
                pzxid: stat.pzxid,
                version: stat.version,
                cversion: stat.cversion,
                ephemeral_owner: stat.ephemeral_owner,
                data,
            },
        );
    }
    Ok(out)
}

/// The node's owner on member `i` after a sync (`None`: no such node).
pub(crate) async fn owner_on_member(
    ensemble: &TestEnsemble,
    i: usize,
    node: &str,
) -> Result<Option<i64>, String> {
    let client = member_client(ensemble, i).await?;
    match bounded(WAIT, client.check_stat(node)).await {
        Some(Ok(s)) => Ok(s.map(|s| s.ephemeral_owner)),
        other => Err(format!("member {} stat {node}: {other:?}", i + 1)),
    }
}
