//! Creating our node and waiting in line: the half of the lock algorithm between "acquire
//! was called" and "the node is first" (Curator's `LockInternals.attemptLock`), done by a
//! [`Queue`]: the lock's path, kind and configuration, and the client to wait with. The
//! lock core ([`lock`](crate::lock)) makes one per acquire and holds the node it returns.
//!
//! Every node created here is owned by a [`Pending`] until it becomes a held lock, so a
//! timeout, an error or a dropped future deletes it (in the background if need be). A create
//! whose reply was lost is found again by its protection prefix, after a `sync`; a session
//! that ends meanwhile ends the attempt with its error.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use crate::cleanup::{session_gone, spawn_delete, wait_connected, Doomed};
use crate::client::{
    is_transient, Connection, CreateMode, ErrorCode, SessionState, Stat, ZkClient,
};
use crate::error::Error;
use crate::holding::NodeInfo;
use crate::names::{
    ancestors_and_self, join, node_name, protected_prefix, protection_of, sequence_of,
    sorted_contenders, READ_LOCK_NAME, RW_MARKERS,
};
use crate::options::{Config, MaxLeases};
use crate::rules::{decide, Decision, Kind};

/// How long a timed-out or failed acquire waits for its node's delete before returning
/// (the delete goes on in the background after that).
const CLEANUP_GRACE: Duration = Duration::from_secs(5);

/// A pause after a call failed with a transient error, so that a client which fails fast
/// while it still believes it is connected is not spun on.
const TRANSIENT_BACKOFF: Duration = Duration::from_millis(20);

/// How often a semaphore waiting for a lease looks again when its client cannot watch
/// children.
const LEASE_POLL: Duration = Duration::from_millis(100);

/// Owns a node that is not (yet) a held lock: deletes it unless disarmed.
pub(crate) struct Pending {
    client: Arc<dyn ZkClient>,
    doomed: Option<(Doomed, u64)>,
}

impl Pending {
    fn arm(&mut self, doomed: Doomed, epoch: u64) {
        self.doomed = Some((doomed, epoch));
    }

    fn disarm(&mut self) {
        self.doomed = None;
    }

    /// The session changed: whatever we may have created is searched for, and deleted, under
    /// the session there is now (a no-op if there is none).
    fn rebase(&mut self, state: &SessionState) {
        if let Some((_, e)) = self.doomed.as_mut() {
            *e = state.epoch;
        }
    }

    /// Deletes the node now, waiting a little for the delete (it goes on in the background).
    async fn cleanup(&mut self) {
        if let Some((d, e)) = self.doomed.take() {
            if let Some(h) = spawn_delete(self.client.clone(), d, e) {
                let _ = tokio::time::timeout(CLEANUP_GRACE, h).await;
            }
        }
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        if let Some((d, e)) = self.doomed.take() {
            spawn_delete(self.client.clone(), d, e);
        }
    }
}

/// The error that ends an acquire because its session is gone (or the client closed).
pub(crate) fn session_error(state: &SessionState, epoch: u64) -> Option<Error> {
    if state.connection == Connection::Closed {
        Some(Error::Closed)
    } else if session_gone(state, epoch) {
        Some(Error::SessionExpired)
    } else {
        None
    }
}

fn deadline_passed(deadline: Option<Instant>) -> bool {
    deadline.is_some_and(|d| Instant::now() >= d)
}

async fn sleep_until_opt(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}

/// One lock's line, as one acquire waits in it: where the contenders queue, by which rule,
/// with what node data and ACL, through which client.
pub(crate) struct Queue<'a> {
    pub client: &'a Arc<dyn ZkClient>,
    pub path: &'a str,
    pub kind: Kind,
    pub config: &'a Config,
}

impl Queue<'_> {
    /// How many leases the semaphore grants now.
    async fn max_leases(&self) -> Result<usize, Error> {
        match &self.config.max_leases {
            MaxLeases::Fixed(n) => Ok(*n),
            MaxLeases::Shared(path) => {
                let (data, _) = self.client.get_data(path).await?;
                let bytes: [u8; 4] = data.as_slice().try_into().map_err(|_| {
                    Error::InvalidOption(format!(
                        "{path} holds no shared count ({} bytes)",
                        data.len()
                    ))
                })?;
                Ok(i32::from_be_bytes(bytes).max(0) as usize)
            }
        }
    }

    /// The node to create for one attempt: its path and mode. The read lock taken by the
    /// holder of the write lock (`via_write`: the name of the writer's node) gets a plain
    /// ephemeral node carrying the writer's sequence, so it keeps the writer's place in the
    /// queue after a downgrade.
    fn node_to_create(&self, prefix: &str, via_write: Option<&str>) -> (String, CreateMode, bool) {
        if let Some(w) = via_write {
            if let Some(seq) = sequence_of(w, RW_MARKERS) {
                let name = format!("{prefix}{READ_LOCK_NAME}{seq:010}");
                return (join(self.path, &name), CreateMode::Ephemeral, true);
            }
        }
        let name = format!("{prefix}{}", self.kind.lock_name());
        (
            join(self.path, &name),
            CreateMode::EphemeralSequential,
            false,
        )
    }

    /// Creates every missing ancestor of the lock path, and the path, as containers.
    async fn ensure_parents(&self) -> Result<(), ErrorCode> {
        for p in ancestors_and_self(self.path) {
            match self
                .client
                .create_acl(&p, &[], CreateMode::Container, &self.config.acl)
                .await
            {
                Ok(_) | Err(ErrorCode::NodeExists) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Looks for the child of the lock path that carries `prefix`, after a `sync`: the
    /// member we read from must have applied every create of ours the leader has.
    async fn find_protected(&self, prefix: &str) -> Result<Option<(String, Stat)>, ErrorCode> {
        match self.client.sync(self.path).await {
            Ok(()) | Err(ErrorCode::NoNode) => {}
            Err(e) => return Err(e),
        }
        let children = match self.client.get_children(self.path).await {
            Ok(c) => c,
            Err(ErrorCode::NoNode) => return Ok(None),
            Err(e) => return Err(e),
        };
        let Some(name) = children.into_iter().find(|c| c.starts_with(prefix)) else {
            return Ok(None);
        };
        match self.client.exists(&join(self.path, &name)).await? {
            Some(stat) => Ok(Some((name, stat))),
            None => Ok(None),
        }
    }

    /// Creates our node with Curator's protection: a create whose reply was lost is found
    /// again by its `_c_<uuid>-` prefix. `None` when the deadline passed first; an error
    /// when the session of `epoch` is gone.
    async fn create_protected(
        &self,
        pending: &mut Pending,
        rx: &mut watch::Receiver<SessionState>,
        epoch: u64,
        deadline: Option<Instant>,
        via_write: Option<&str>,
    ) -> Result<Option<NodeInfo>, Error> {
        let data = self.config.data();
        'fresh: loop {
            if !wait_connected(rx, Some(epoch), deadline).await {
                if let Some(e) = session_error(&rx.borrow(), epoch) {
                    return Err(e);
                }
                return Ok(None);
            }
            let uuid = uuid::Uuid::new_v4();
            let prefix = protected_prefix(&uuid);
            let (create_path, mode, plain) = self.node_to_create(&prefix, via_write);
            let doomed = Doomed::Prefix {
                base: self.path.to_string(),
                prefix: prefix.clone(),
            };
            let mut unknown = false;
            let mut parent_tries = 0;
            loop {
                if deadline_passed(deadline) {
                    if unknown {
                        pending.arm(doomed, epoch);
                    }
                    return Ok(None);
                }
                let state = rx.borrow_and_update().clone();
                if let Some(e) = session_error(&state, epoch) {
                    if unknown {
                        pending.arm(doomed, epoch);
                    }
                    pending.rebase(&state);
                    return Err(e);
                }
                if unknown {
                    match self.find_protected(&prefix).await {
                        Ok(Some((name, stat))) => {
                            let now = rx.borrow().clone();
                            let ours = stat.ephemeral_owner != 0
                                && now.epoch == epoch
                                && now.session_id.is_none_or(|s| s == stat.ephemeral_owner);
                            let path = join(self.path, &name);
                            if !ours {
                                tracing::info!("protected node {path} belongs to another session");
                                spawn_delete(self.client.clone(), Doomed::Path(path), now.epoch);
                                pending.disarm();
                                continue 'fresh;
                            }
                            tracing::info!("found protected node {path} after a lost reply");
                            pending.arm(Doomed::Path(path.clone()), epoch);
                            return Ok(Some(NodeInfo {
                                path,
                                name,
                                stat,
                                epoch,
                            }));
                        }
                        Ok(None) => unknown = false,
                        Err(e) if is_transient(e) || e == ErrorCode::SessionExpired => {
                            pending.arm(doomed.clone(), epoch);
                            tokio::time::sleep(TRANSIENT_BACKOFF).await;
                            wait_connected(rx, Some(epoch), deadline).await;
                            continue;
                        }
                        Err(e) => {
                            pending.arm(doomed.clone(), epoch);
                            return Err(e.into());
                        }
                    }
                }
                // While the create is in flight, a drop must look for the node by prefix.
                pending.arm(doomed.clone(), epoch);
                match self
                    .client
                    .create_acl(&create_path, &data, mode, &self.config.acl)
                    .await
                {
                    Ok((path, stat)) => {
                        let now = rx.borrow().clone();
                        if let Some(e) = session_error(&now, epoch) {
                            pending.arm(Doomed::Path(path), epoch);
                            pending.rebase(&now);
                            return Err(e);
                        }
                        let name = node_name(&path).to_string();
                        pending.arm(Doomed::Path(path.clone()), epoch);
                        return Ok(Some(NodeInfo {
                            path,
                            name,
                            stat,
                            epoch,
                        }));
                    }
                    Err(ErrorCode::NoNode) => {
                        pending.disarm();
                        parent_tries += 1;
                        if parent_tries > 10 {
                            return Err(Error::Zk(ErrorCode::NoNode));
                        }
                        match self.ensure_parents().await {
                            // NoNode: a parent was reaped (an empty container) while we
                            // made its child; the next try makes it again.
                            Ok(()) | Err(ErrorCode::NoNode) => {}
                            Err(e) if is_transient(e) => {
                                tokio::time::sleep(TRANSIENT_BACKOFF).await;
                                wait_connected(rx, Some(epoch), deadline).await;
                            }
                            Err(e) => return Err(e.into()),
                        }
                    }
                    Err(ErrorCode::NodeExists) if plain => {
                        // A plain node of ours may exist from an attempt whose reply was lost.
                        unknown = true;
                    }
                    Err(e) if is_transient(e) || e == ErrorCode::SessionExpired => {
                        unknown = true;
                        tokio::time::sleep(TRANSIENT_BACKOFF).await;
                        wait_connected(rx, Some(epoch), deadline).await;
                    }
                    Err(e) => {
                        pending.disarm();
                        return Err(e.into());
                    }
                }
            }
        }
    }

    /// One acquisition: create, then wait in line. `None` when the deadline passed (or,
    /// without `wait`, when another holds the lock); the node is gone by then. `via_write`:
    /// the name of the write lock's node, for the read lock its holder takes.
    pub(crate) async fn attempt(
        &self,
        rx: &mut watch::Receiver<SessionState>,
        epoch: u64,
        deadline: Option<Instant>,
        wait: bool,
        via_write: Option<&str>,
    ) -> Result<Option<NodeInfo>, Error> {
        let mut pending = Pending {
            client: self.client.clone(),
            doomed: None,
        };
        let markers = self.kind.markers();
        'create: loop {
            let Some(node) = self
                .create_protected(&mut pending, rx, epoch, deadline, via_write)
                .await?
            else {
                pending.cleanup().await;
                return Ok(None);
            };
            if via_write.is_some() {
                pending.disarm();
                return Ok(Some(node));
            }
            loop {
                let state = rx.borrow_and_update().clone();
                if let Some(e) = session_error(&state, epoch) {
                    pending.rebase(&state);
                    return Err(e);
                }
                let children = match self.client.get_children(self.path).await {
                    Ok(c) => c,
                    Err(ErrorCode::NoNode) => Vec::new(),
                    Err(e) if is_transient(e) || e == ErrorCode::SessionExpired => {
                        tokio::time::sleep(TRANSIENT_BACKOFF).await;
                        if !wait_connected(rx, Some(epoch), deadline).await
                            && session_error(&rx.borrow(), epoch).is_none()
                        {
                            pending.cleanup().await;
                            return Ok(None);
                        }
                        continue;
                    }
                    Err(e) => {
                        pending.cleanup().await;
                        return Err(e.into());
                    }
                };
                // A create whose reply was lost, and that the protection search missed, leaves
                // a second node with our prefix and our session: nobody else would ever delete
                // it, and whoever queues behind it would wait for as long as we live. It is
                // ours: delete it (a delete that fails for good fails the acquire).
                if let Some(prefix) = protection_of(&node.name) {
                    let twins: Vec<String> = children
                        .iter()
                        .filter(|c| **c != node.name && c.starts_with(prefix))
                        .cloned()
                        .collect();
                    if !twins.is_empty() {
                        for twin in twins {
                            let path = join(self.path, &twin);
                            tracing::info!("deleting {path}: a second node of ours, from a create whose reply was lost");
                            match self.client.delete(&path, -1).await {
                                Ok(()) | Err(ErrorCode::NoNode) => {}
                                Err(e) if is_transient(e) || e == ErrorCode::SessionExpired => {
                                    tokio::time::sleep(TRANSIENT_BACKOFF).await;
                                    wait_connected(rx, Some(epoch), deadline).await;
                                }
                                Err(e) => {
                                    pending.cleanup().await;
                                    return Err(e.into());
                                }
                            }
                        }
                        if deadline_passed(deadline) {
                            pending.cleanup().await;
                            return Ok(None);
                        }
                        continue;
                    }
                }
                let listed = children.len();
                let sorted = sorted_contenders(children, markers);
                let Some(idx) = sorted.iter().position(|c| c.name == node.name) else {
                    // Our node is gone (deleted by someone): queue again.
                    tracing::info!("lock node {} vanished while waiting", node.path);
                    pending.disarm();
                    if deadline_passed(deadline) {
                        return Ok(None);
                    }
                    continue 'create;
                };
                let decision = if self.kind == Kind::Lease {
                    match self.max_leases().await {
                        Ok(max) if listed <= max => Decision::Granted,
                        Ok(_) => Decision::WatchChildren,
                        Err(e) => {
                            pending.cleanup().await;
                            return Err(e);
                        }
                    }
                } else {
                    decide(self.kind, &sorted, idx)
                };
                let pred = match decision {
                    Decision::Granted => {
                        let mut node = node;
                        if node.stat.czxid <= 0 {
                            // A client that does not return the create's Stat: read it.
                            match self.client.exists(&node.path).await {
                                Ok(Some(stat)) if stat.czxid > 0 => node.stat = stat,
                                Ok(Some(_)) => {
                                    pending.cleanup().await;
                                    return Err(Error::NoFencingToken(node.path));
                                }
                                Ok(None) => {
                                    pending.disarm();
                                    continue 'create;
                                }
                                Err(e) if is_transient(e) => {
                                    tokio::time::sleep(TRANSIENT_BACKOFF).await;
                                    wait_connected(rx, Some(epoch), deadline).await;
                                    if deadline_passed(deadline) {
                                        pending.cleanup().await;
                                        return Ok(None);
                                    }
                                    continue 'create;
                                }
                                Err(e) => {
                                    pending.cleanup().await;
                                    return Err(e.into());
                                }
                            }
                        }
                        pending.disarm();
                        return Ok(Some(node));
                    }
                    Decision::Watch(p) => Some(p),
                    Decision::WatchChildren => None,
                };
                if !wait || deadline_passed(deadline) {
                    pending.cleanup().await;
                    return Ok(None);
                }
                // Watch the node before ours or, for a lease with every lease taken, the leases
                // (polled with a client that cannot watch children).
                let armed = match &pred {
                    Some(p) => self
                        .client
                        .get_data_watch(&join(self.path, p))
                        .await
                        .map(|(_, _, w)| Some(w)),
                    None => match self.client.get_children_watch(self.path).await {
                        // A lease released between our listing and this watch fires no
                        // event for us: decide again on what the watch call saw.
                        Ok((now, _)) if now.len() != listed => continue,
                        Ok((_, w)) => Ok(Some(w)),
                        Err(ErrorCode::Unimplemented) => Ok(None),
                        Err(e) => Err(e),
                    },
                };
                let w = match armed {
                    Ok(w) => w,
                    Err(ErrorCode::NoNode) => continue,
                    Err(e) if is_transient(e) || e == ErrorCode::SessionExpired => {
                        tokio::time::sleep(TRANSIENT_BACKOFF).await;
                        continue;
                    }
                    Err(e) => {
                        pending.cleanup().await;
                        return Err(e.into());
                    }
                };
                let fired = async {
                    match w {
                        Some(w) => {
                            let _ = w.await;
                        }
                        None => tokio::time::sleep(LEASE_POLL).await,
                    }
                };
                tokio::select! {
                    _ = fired => {}
                    changed = rx.changed() => {
                        if changed.is_err() {
                            return Err(Error::Closed);
                        }
                    }
                    _ = sleep_until_opt(deadline) => {
                        pending.cleanup().await;
                        return Ok(None);
                    }
                }
            }
        }
    }
}
