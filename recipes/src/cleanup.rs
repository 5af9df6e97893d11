//! Guaranteed deletes: a lock node we stop using is deleted, retried until the delete
//! succeeds or the session that owns the node is gone (which deletes it too).
//!
//! Curator's `delete().guaranteed()` does the same from a background manager; its lock once
//! forgot its local state when the delete failed (CURATOR-486, CURATOR-678). Here a delete
//! is a spawned task that outlives whatever started it (a dropped guard, a cancelled or timed
//! out acquire), so no code path can leave a lock node behind while the session lives.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use crate::client::{is_transient, Connection, ErrorCode, SessionState, ZkClient};
use crate::names::join;

/// How a guaranteed delete ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DeleteOutcome {
    /// We deleted it, or it was already gone.
    Deleted,
    /// The session that owned it is gone (expired or closed), and the node with it.
    SessionGone,
    /// A non-transient error (e.g. `NoAuth`): retrying cannot help.
    Failed(ErrorCode),
}

impl DeleteOutcome {
    /// A short name, for logs and spans.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            DeleteOutcome::Deleted => "deleted",
            DeleteOutcome::SessionGone => "session_gone",
            DeleteOutcome::Failed(_) => "failed",
        }
    }
}

/// True when the session of `epoch` no longer exists, so its ephemeral nodes are gone.
pub(crate) fn session_gone(state: &SessionState, epoch: u64) -> bool {
    state.epoch != epoch || matches!(state.connection, Connection::Expired | Connection::Closed)
}

/// Waits until the session state changes (or `max` passes). Returns false if the client is
/// gone (the channel closed).
pub(crate) async fn wait_state_change(
    rx: &mut watch::Receiver<SessionState>,
    max: Duration,
) -> bool {
    match tokio::time::timeout(max, rx.changed()).await {
        Ok(Ok(())) => true,
        Ok(Err(_)) => false,
        Err(_) => true,
    }
}

/// Waits until connected (true), the session of `epoch` is gone, the client closes or
/// `deadline` passes (false).
pub(crate) async fn wait_connected(
    rx: &mut watch::Receiver<SessionState>,
    epoch: Option<u64>,
    deadline: Option<Instant>,
) -> bool {
    loop {
        {
            let s = rx.borrow_and_update();
            if s.connection == Connection::Connected && epoch.is_none_or(|e| e == s.epoch) {
                return true;
            }
            if s.connection == Connection::Closed {
                return false;
            }
            if let Some(e) = epoch {
                if session_gone(&s, e) {
                    return false;
                }
            }
        }
        let wait = match deadline {
            Some(d) => {
                let now = Instant::now();
                if now >= d {
                    return false;
                }
                (d - now).min(Duration::from_secs(1))
            }
            None => Duration::from_secs(1),
        };
        if !wait_state_change(rx, wait).await {
            return false;
        }
    }
}

/// Deletes `path` (an ephemeral node of session `epoch`), retrying through connection
/// problems until it is gone or its session is.
pub(crate) async fn guaranteed_delete(
    client: &Arc<dyn ZkClient>,
    path: &str,
    epoch: u64,
) -> DeleteOutcome {
    let mut rx = client.session();
    let mut backoff = Duration::from_millis(50);
    loop {
        if session_gone(&rx.borrow(), epoch) {
            return DeleteOutcome::SessionGone;
        }
        match client.delete(path, -1).await {
            Ok(()) | Err(ErrorCode::NoNode) => return DeleteOutcome::Deleted,
            Err(ErrorCode::SessionExpired) => return DeleteOutcome::SessionGone,
            Err(e) if is_transient(e) => {
                tracing::debug!("delete of {path} failed ({e}); retrying");
                wait_connected(&mut rx, Some(epoch), Some(Instant::now() + backoff)).await;
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(1));
            }
            Err(e) => {
                tracing::warn!("cannot delete lock node {path}: {e}");
                return DeleteOutcome::Failed(e);
            }
        }
    }
}

/// Finds the child of `base` whose name starts with `prefix` (a create whose outcome is
/// unknown) and deletes it; retried like [`guaranteed_delete`].
pub(crate) async fn find_and_delete(
    client: &Arc<dyn ZkClient>,
    base: &str,
    prefix: &str,
    epoch: u64,
) -> DeleteOutcome {
    let mut rx = client.session();
    let mut backoff = Duration::from_millis(50);
    loop {
        if session_gone(&rx.borrow(), epoch) {
            return DeleteOutcome::SessionGone;
        }
        // Read from a member that has applied every create of ours the leader has.
        let listed = match client.sync(base).await {
            Ok(()) | Err(ErrorCode::NoNode) => client.get_children(base).await,
            Err(e) => Err(e),
        };
        match listed {
            Ok(children) => {
                return match children.iter().find(|c| c.starts_with(prefix)) {
                    Some(name) => guaranteed_delete(client, &join(base, name), epoch).await,
                    None => DeleteOutcome::Deleted,
                };
            }
            Err(ErrorCode::NoNode) => return DeleteOutcome::Deleted,
            Err(e) if is_transient(e) => {
                wait_connected(&mut rx, Some(epoch), Some(Instant::now() + backoff)).await;
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(1));
            }
            Err(e) => return DeleteOutcome::Failed(e),
        }
    }
}

/// What a background cleanup must delete.
#[derive(Debug, Clone)]
pub(crate) enum Doomed {
    /// A node we know.
    Path(String),
    /// A node we may have created, known only by its protection prefix.
    Prefix { base: String, prefix: String },
}

/// Starts a guaranteed delete in the background, on the current runtime. Returns its handle,
/// or `None` when no runtime is running (then nothing can be done; the session's end will
/// remove the node).
pub(crate) fn spawn_delete(
    client: Arc<dyn ZkClient>,
    doomed: Doomed,
    epoch: u64,
) -> Option<tokio::task::JoinHandle<DeleteOutcome>> {
    let rt = match tokio::runtime::Handle::try_current() {
        Ok(rt) => rt,
        Err(_) => {
            tracing::warn!("no tokio runtime to delete {doomed:?}; the session end will");
            return None;
        }
    };
    Some(rt.spawn(async move {
        match &doomed {
            Doomed::Path(p) => guaranteed_delete(&client, p, epoch).await,
            Doomed::Prefix { base, prefix } => find_and_delete(&client, base, prefix, epoch).await,
        }
    }))
}
