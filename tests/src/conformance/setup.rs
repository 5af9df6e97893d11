//! Setting a scenario up and cleaning up after it, outside its transcript: its own root
//! node made with a throw-away session, and the subtree deleted afterwards (as each test
//! user, so that nodes whose ACLs name one can go too).

use std::net::SocketAddr;
use std::time::Duration;

use jute::Request;

use crate::raw_client::{ConnectOptions, RawClient};

/// Digest users the scenarios may use; cleanup authenticates as all of them so it can
/// delete nodes whose ACLs name them (`cleaner` is only ever used as an escape hatch in
/// restrictive ACLs, so cleanup can remove what scenarios leave behind).
pub const TEST_USERS: &[&str] = &["alice:secret", "bob:secret", "cleaner:secret"];

/// Creates `root` with a throw-away session.
pub(super) async fn create_root(
    addr: SocketAddr,
    root: &str,
    wait: Duration,
) -> Result<(), String> {
    let (mut c, _) = RawClient::connect(addr, &ConnectOptions::default(), wait)
        .await
        .map_err(|e| format!("setup connect: {e}"))?;
    let r = c
        .call(&super::req::create(root, b"", 0), wait)
        .await
        .map_err(|e| format!("setup create {root}: {e}"))?;
    if r.err != 0 {
        return Err(format!("setup create {root}: err {}", r.err));
    }
    let _ = c.call(&Request::CloseSession, wait).await;
    Ok(())
}

/// Deletes `root` and everything under it (best effort), authenticated as every test user.
pub(super) async fn delete_root(addr: SocketAddr, root: &str, wait: Duration) {
    let Ok((mut c, _)) = RawClient::connect(addr, &ConnectOptions::default(), wait).await else {
        return;
    };
    for user in TEST_USERS {
        if c.auth("digest", user.as_bytes()).await.is_ok() {
            let _ = c.wait_reply(jute::xid::AUTH, wait).await;
        }
    }
    delete_tree(&mut c, root, wait).await;
    let _ = c.call(&Request::CloseSession, wait).await;
}

/// Deletes `path` and everything below it (best effort, depth first).
async fn delete_tree(c: &mut RawClient, path: &str, wait: Duration) {
    let mut stack = vec![(path.to_string(), false)];
    let mut guard = 0;
    while let Some((p, expanded)) = stack.pop() {
        guard += 1;
        if guard > 10_000 {
            return;
        }
        if !expanded {
            stack.push((p.clone(), true));
            if let Ok(r) = c.call(&super::req::get_children(&p, false), wait).await {
                if let Some(jute::Response::GetChildren(children)) = r.response() {
                    for ch in children {
                        let child = if p == "/" {
                            format!("/{ch}")
                        } else {
                            format!("{p}/{ch}")
                        };
                        stack.push((child, false));
                    }
                }
            }
        } else {
            let _ = c.call(&super::req::delete(&p, -1), wait).await;
        }
    }
}
