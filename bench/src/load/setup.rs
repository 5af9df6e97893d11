//! Before and after a workload's window, outside the measurement: its parent znode and
//! keys made on a session of their own, the wait until a follower shows them, and deleting
//! it all again, each with pipelined requests and a deadline.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use jute::{
    Acl, CreateMode, CreateRequest, DeleteRequest, ExistsRequest, GetChildrenRequest, OpCode,
    Request, Response,
};

use super::{LoadError, LoadSpec, CLOSE_WAIT, IO_TIMEOUT};
use crate::session::{error_label, Session, SessionError};
use crate::workload::Workload;

/// Requests in flight during setup and cleanup.
const SETUP_DEPTH: usize = 256;

/// Creates the workload's parent (and keys); returns the key paths.
pub(super) async fn setup(
    addr: SocketAddr,
    spec: &LoadSpec,
    base: &str,
    data: &Bytes,
) -> Result<Arc<[String]>, LoadError> {
    let mut s = Session::connect_with(addr, spec.tls.as_ref(), spec.session_timeout_ms, IO_TIMEOUT)
        .await
        .map_err(|source| LoadError::Connect { addr, source })?;
    let deadline = Instant::now() + IO_TIMEOUT;
    let reply = s
        .call(
            &create(base.to_string(), Bytes::new(), CreateMode::Persistent),
            deadline,
        )
        .await
        .map_err(|e| LoadError::Setup(format!("creating {base}: {e}")))?;
    if reply.header.err != 0 {
        return Err(LoadError::Setup(format!(
            "creating {base}: {}",
            error_label(reply.header.err)
        )));
    }
    // The key-based workloads' keys, or the lock workload's lock parents.
    let (keys, key_data): (Vec<String>, Bytes) = if spec.workload.needs_keys() {
        let keys = (0..spec.keys.max(1))
            .map(|i| format!("{base}/k{i:06}"))
            .collect();
        (keys, data.clone())
    } else if spec.workload == Workload::Lock {
        let parents = (0..spec.locks.max(1))
            .map(|i| format!("{base}/lock-{i:04}"))
            .collect();
        (parents, Bytes::new())
    } else {
        (Vec::new(), Bytes::new())
    };
    if !keys.is_empty() {
        let reqs = keys
            .iter()
            .map(|k| create(k.clone(), key_data.clone(), CreateMode::Persistent));
        let codes = pipelined(&mut s, reqs, Instant::now() + IO_TIMEOUT * 4)
            .await
            .map_err(|e| LoadError::Setup(format!("creating keys: {e}")))?;
        if let Some(&bad) = codes.iter().find(|&&c| c != 0) {
            return Err(LoadError::Setup(format!(
                "creating keys: {}",
                error_label(bad)
            )));
        }
    }
    s.close(Instant::now() + IO_TIMEOUT)
        .await
        .map_err(|e| LoadError::Setup(format!("closing the setup session: {e}")))?;
    Ok(keys.into())
}

/// Waits (bounded) until `path` exists on the member at `addr`.
pub(super) async fn await_visible(
    addr: SocketAddr,
    spec: &LoadSpec,
    path: &str,
) -> Result<(), LoadError> {
    let mut s = Session::connect_with(addr, spec.tls.as_ref(), spec.session_timeout_ms, IO_TIMEOUT)
        .await
        .map_err(|source| LoadError::Connect { addr, source })?;
    let deadline = Instant::now() + IO_TIMEOUT;
    loop {
        let req = Request::Exists(ExistsRequest {
            path: path.to_string(),
            watch: false,
        });
        let reply = s
            .call(&req, deadline)
            .await
            .map_err(|e| LoadError::Setup(format!("waiting for {path} on {addr}: {e}")))?;
        if reply.header.err == 0 {
            break;
        }
        if Instant::now() > deadline {
            return Err(LoadError::Setup(format!("{path} never showed on {addr}")));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The wait is over once the path shows; a close the server does not answer in time (an
    // Apache ZooKeeper ensemble under TLS once took over 30 s on a loaded machine) leaves
    // the session to expire, and fails nothing: what is measured next reports the server's
    // state on its own.
    if let Err(e) = s.close(Instant::now() + CLOSE_WAIT).await {
        tracing::warn!("closing the wait session on {addr}: {e} (left to expire)");
    }
    Ok(())
}

/// Deletes `base` and everything under it, on a fresh session.
pub(super) async fn cleanup(
    addr: SocketAddr,
    spec: &LoadSpec,
    base: &str,
) -> Result<(), SessionError> {
    let mut s =
        Session::connect_with(addr, spec.tls.as_ref(), spec.session_timeout_ms, IO_TIMEOUT).await?;
    let deadline = Instant::now() + IO_TIMEOUT * 4;
    delete_tree(&mut s, base.to_string(), deadline).await?;
    s.close(Instant::now() + IO_TIMEOUT).await
}

/// Deletes `path` and its descendants: the children in one pipelined batch, recursing
/// into those that turn out to have children of their own.
fn delete_tree(
    s: &mut Session,
    path: String,
    deadline: Instant,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), SessionError>> + Send + '_>> {
    Box::pin(async move {
        let mut reply = s
            .call(
                &Request::GetChildren(GetChildrenRequest {
                    path: path.clone(),
                    watch: false,
                }),
                deadline,
            )
            .await?;
        if reply.header.err != 0 {
            return Err(SessionError::Server(error_label(reply.header.err)));
        }
        let children = match Response::decode(OpCode::GetChildren, &mut reply.body)? {
            Response::GetChildren(c) => c,
            _ => Vec::new(),
        };
        let paths: Vec<String> = children.iter().map(|c| format!("{path}/{c}")).collect();
        let reqs: Vec<Request> = paths
            .iter()
            .map(|p| {
                Request::Delete(DeleteRequest {
                    path: p.clone(),
                    version: -1,
                })
            })
            .collect();
        let codes = pipelined(s, reqs.into_iter(), deadline).await?;
        // NoNode is fine: an ephemeral lock node may vanish with its session meanwhile.
        let no_node = jute::ErrorCode::NoNode.code();
        let not_empty = jute::ErrorCode::NotEmpty.code();
        for (p, code) in paths.into_iter().zip(codes) {
            if code == not_empty {
                delete_tree(s, p, deadline).await?;
            } else if code != 0 && code != no_node {
                return Err(SessionError::Server(format!(
                    "deleting {p}: {}",
                    error_label(code)
                )));
            }
        }
        let reply = s
            .call(
                &Request::Delete(DeleteRequest { path, version: -1 }),
                deadline,
            )
            .await?;
        if reply.header.err != 0 {
            return Err(SessionError::Server(error_label(reply.header.err)));
        }
        Ok(())
    })
}

/// Sends `reqs` with up to [`SETUP_DEPTH`] in flight; returns each reply's error code, in order.
pub(crate) async fn pipelined(
    s: &mut Session,
    reqs: impl Iterator<Item = Request>,
    deadline: Instant,
) -> Result<Vec<i32>, SessionError> {
    let mut reqs = reqs.peekable();
    let mut inflight: VecDeque<i32> = VecDeque::new();
    let mut codes = Vec::new();
    loop {
        while inflight.len() < SETUP_DEPTH {
            let Some(r) = reqs.next() else { break };
            inflight.push_back(s.queue(&r));
        }
        if inflight.is_empty() {
            return Ok(codes);
        }
        s.flush(deadline).await?;
        let reply = s.next_reply(deadline).await?;
        let expected = inflight.pop_front().unwrap_or_default();
        if reply.header.xid != expected {
            return Err(SessionError::OutOfOrder {
                expected,
                got: reply.header.xid,
            });
        }
        codes.push(reply.header.err);
    }
}

/// A create request with the open ACL.
pub(crate) fn create(path: String, data: Bytes, mode: CreateMode) -> Request {
    Request::Create(CreateRequest {
        path,
        data: Some(data),
        acl: vec![Acl::open_unsafe()],
        flags: mode.flags(),
    })
}
