//! A double barrier compatible with Curator's `DistributedDoubleBarrier` (and kazoo's
//! `DoubleBarrier`) on the same path: `qty` members meet at the start and at the end of a
//! task. Each member is an ephemeral child `<path>/<uuid>`; the member that sees `qty`
//! children creates `<path>/ready`, which releases the others. Leaving follows Curator's
//! order: the lowest member (by name) waits for the highest to go, every other member
//! deletes its node and waits for the lowest, so nobody leaves before the last member has
//! arrived at `leave`. A member whose session expires has left (its node went with the
//! session).
//!
//! Waits are the plain barrier's ([`Wait`], `barrier.rs`): one-shot watches re-read after
//! every event and every reconnection.

use std::sync::{Arc, Mutex as StdMutex};
use std::time::Duration;

use tokio::time::Instant;

use crate::barrier::{Wait, Woken, PARENT_ATTEMPTS};
use crate::cleanup::{session_gone, spawn_delete, wait_connected, Doomed};
use crate::client::{CreateMode, ErrorCode, IntoClient, ZkClient};
use crate::counters::ensure_parents;
use crate::error::Error;
use crate::names::{checked_path, join};

/// The child that opens a double barrier (Curator's and kazoo's name).
const READY_NODE: &str = "ready";

/// Our node in a double barrier.
#[derive(Debug, Clone)]
struct Membership {
    /// `<path>/<uuid>`.
    node: String,
    /// The session that created it.
    epoch: u64,
}

/// An `enter` not (yet) through: dropping it deletes our member node (in the background,
/// retried while the session lives) and forgets the membership.
struct PendingMember<'a> {
    barrier: &'a DoubleBarrier,
    node: Option<Membership>,
}

impl Drop for PendingMember<'_> {
    fn drop(&mut self) {
        let Some(m) = self.node.take() else { return };
        self.barrier.set_membership(None);
        if !session_gone(&self.barrier.client.session().borrow(), m.epoch) {
            spawn_delete(self.barrier.client.clone(), Doomed::Path(m.node), m.epoch);
        }
    }
}

/// A double barrier: [`enter`](Self::enter) blocks until `member_qty` members have entered,
/// [`leave`](Self::leave) until every member has left. Compatible with Curator's
/// `DistributedDoubleBarrier` and kazoo's `DoubleBarrier` on the same path (members of all
/// three can meet in one barrier).
///
/// One value is one member; use one per task (a clone shares the membership).
///
/// ```no_run
/// use std::time::Duration;
/// use zooraft_recipes::{DoubleBarrier, ZookeeperClient};
///
/// #[tokio::main]
/// async fn main() -> Result<(), zooraft_recipes::Error> {
///     let client = ZookeeperClient::connect("127.0.0.1:2181", Duration::from_secs(10)).await?;
///     let barrier = DoubleBarrier::new(client, "/barriers/batch-7", 3)?;
///     if barrier.enter(Some(Duration::from_secs(60))).await? {
///         // all three workers are here: run the batch
///         barrier.leave(None).await?; // returns once all three are done
///     }
///     Ok(())
/// }
/// ```
#[doc(alias = "DistributedDoubleBarrier")]
#[derive(Clone)]
pub struct DoubleBarrier {
    client: Arc<dyn ZkClient>,
    path: String,
    member_qty: usize,
    /// Our node's name (a UUID, as Curator's).
    name: String,
    member: Arc<StdMutex<Option<Membership>>>,
}

impl std::fmt::Debug for DoubleBarrier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DoubleBarrier")
            .field("path", &self.path)
            .field("member_qty", &self.member_qty)
            .field("name", &self.name)
            .finish()
    }
}

/// The member names among a barrier's children, sorted (everyone sorts the same way).
fn members_of(mut children: Vec<String>) -> Vec<String> {
    children.retain(|c| c != READY_NODE);
    children.sort();
    children
}

impl DoubleBarrier {
    /// A member of the barrier at `path` that opens when `member_qty` (at least 1) members
    /// have entered.
    pub fn new(
        client: impl IntoClient,
        path: &str,
        member_qty: usize,
    ) -> Result<DoubleBarrier, Error> {
        let client = client.into_client();
        if member_qty == 0 {
            return Err(Error::InvalidOption(
                "a double barrier needs at least one member".into(),
            ));
        }
        Ok(DoubleBarrier {
            client,
            path: checked_path(path)?,
            member_qty,
            name: uuid::Uuid::new_v4().to_string(),
            member: Arc::new(StdMutex::new(None)),
        })
    }

    /// The barrier's path.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// How many members open the barrier.
    pub fn member_qty(&self) -> usize {
        self.member_qty
    }

    /// Our member node's path while we are in the barrier (between a successful
    /// [`enter`](Self::enter) and [`leave`](Self::leave)).
    pub fn node_path(&self) -> Option<String> {
        self.membership().map(|m| m.node)
    }

    fn membership(&self) -> Option<Membership> {
        self.member
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn set_membership(&self, m: Option<Membership>) {
        *self.member.lock().unwrap_or_else(|e| e.into_inner()) = m;
    }

    /// The members in the barrier now (their node names, sorted).
    pub async fn members(&self) -> Result<Vec<String>, Error> {
        match self.client.get_children(&self.path).await {
            Ok(c) => Ok(members_of(c)),
            Err(ErrorCode::NoNode) => Ok(Vec::new()),
            Err(e) => Err(e.into()),
        }
    }

    /// Enters: adds our member node and waits until `member_qty` members are in (or the
    /// barrier is already open). `Ok(false)` when `timeout` passed first: then our node is
    /// deleted again (Curator leaves it; a member that gave up should not count), unless the
    /// barrier opened meanwhile (then we are in: `Ok(true)`). `None` waits for ever. Entering
    /// twice without leaving is an error.
    ///
    /// ```no_run
    /// # async fn f(barrier: zooraft_recipes::DoubleBarrier) -> Result<(), zooraft_recipes::Error> {
    /// if !barrier.enter(Some(std::time::Duration::from_secs(30))).await? {
    ///     println!("not everyone came; we are not counted");
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn enter(&self, timeout: Option<Duration>) -> Result<bool, Error> {
        if self.membership().is_some() {
            return Err(Error::InvalidOption(format!(
                "already a member of the double barrier {}",
                self.path
            )));
        }
        let mut wait = Wait::new(self.client.as_ref(), timeout, true);
        if !wait_connected(&mut wait.rx, None, wait.deadline).await {
            return Err(wait.stopped());
        }
        // Our node will belong to the session we are connected in now.
        let epoch = wait.rx.borrow().epoch;
        wait.epoch = Some(epoch);
        let ready = join(&self.path, READY_NODE);
        let node = join(&self.path, &self.name);
        // From here until we are in, our node is deleted again if this call fails, times
        // out or is dropped (cancelled): a member that is not waiting must not count.
        let mut pending = PendingMember {
            barrier: self,
            node: Some(Membership {
                node: node.clone(),
                epoch,
            }),
        };
        let opened = loop {
            match self.client.exists(&ready).await {
                Ok(stat) => break stat.is_some(),
                Err(e) => wait.recover(e).await?,
            }
        };
        let mut attempts = 0;
        loop {
            wait.check_session()?;
            match self.client.create(&node, &[], CreateMode::Ephemeral).await {
                // NodeExists: our own create, whose reply was lost (the name is ours alone).
                Ok(_) | Err(ErrorCode::NodeExists) => break,
                // The barrier's parents are created (as containers) only when missing, as
                // Curator's `creatingParentContainersIfNeeded`.
                Err(ErrorCode::NoNode) if attempts < PARENT_ATTEMPTS => {
                    attempts += 1;
                    ensure_parents(self.client.as_ref(), &node).await?;
                }
                Err(e) => wait.recover(e).await?,
            }
        }
        self.set_membership(Some(Membership { node, epoch }));
        if opened {
            pending.node = None;
            return Ok(true);
        }
        let mut result = self.wait_for_members(&mut wait, &ready).await;
        if matches!(result, Ok(false)) {
            // The barrier may have opened just as we gave up, counting us: then we are in.
            if let Ok(Some(_)) = self.client.exists(&ready).await {
                result = Ok(true);
            }
        }
        if matches!(result, Ok(true)) {
            pending.node = None;
        }
        result
    }

    /// Waits until `ready` is created or `member_qty` children exist (then creates `ready`).
    ///
    /// The creation of `ready` is the signal, as for Curator's and kazoo's members: a member
    /// that is already leaving may delete it again (kazoo's `leave` does so first), so the
    /// wait watches for the creation rather than only listing the children.
    async fn wait_for_members(&self, wait: &mut Wait, ready: &str) -> Result<bool, Error> {
        loop {
            wait.check_session()?;
            let created = match self.client.exists_watch(ready).await {
                Ok((Some(_), _)) => return Ok(true),
                Ok((None, w)) => Some(w),
                Err(ErrorCode::Unimplemented) => None,
                Err(e) => {
                    wait.recover(e).await?;
                    continue;
                }
            };
            let listed = match self.client.get_children_watch(&self.path).await {
                Ok((children, watch)) => Ok((children, Some(watch))),
                Err(ErrorCode::Unimplemented) => self
                    .client
                    .get_children(&self.path)
                    .await
                    .map(|c| (c, None)),
                Err(e) => Err(e),
            };
            let (children, watch) = match listed {
                Ok(l) => l,
                Err(e) => {
                    wait.recover(e).await?;
                    continue;
                }
            };
            // Curator counts every child, `ready` included.
            if children.iter().any(|c| c == READY_NODE) {
                return Ok(true);
            }
            if children.len() >= self.member_qty {
                loop {
                    match self.client.create(ready, &[], CreateMode::Persistent).await {
                        Ok(_) | Err(ErrorCode::NodeExists) => return Ok(true),
                        Err(e) => wait.recover(e).await?,
                    }
                }
            }
            match wait.until_either(created, watch).await {
                Woken::Created => return Ok(true),
                Woken::Other => {}
                Woken::Deadline => return wait.timed_out(),
            }
        }
    }

    /// Leaves: returns once every member has left (`Ok(true)`), or `Ok(false)` when
    /// `timeout` passed first (as Curator, the `ready` node is deleted either way; call
    /// `leave` again to finish). `Err(SessionExpired)` when our session expired while we were
    /// in the barrier (we were counted out when it did).
    pub async fn leave(&self, timeout: Option<Duration>) -> Result<bool, Error> {
        let Some(member) = self.membership() else {
            return Err(Error::NotMember(format!("{} was not entered", self.path)));
        };
        let mut wait = Wait::new(self.client.as_ref(), timeout, true);
        wait.epoch = Some(member.epoch);
        let result = self.leave_inner(&mut wait, &member).await;
        if matches!(result, Ok(true) | Err(Error::SessionExpired)) {
            self.set_membership(None);
        }
        if !matches!(result, Err(Error::Closed)) {
            let ready = join(&self.path, READY_NODE);
            match self.client.delete(&ready, -1).await {
                Ok(()) | Err(ErrorCode::NoNode) => {}
                Err(e) => tracing::debug!("cannot delete {ready}: {e}"),
            }
        }
        result
    }

    async fn leave_inner(&self, wait: &mut Wait, member: &Membership) -> Result<bool, Error> {
        let mut ours_exists = true;
        loop {
            if ours_exists {
                wait.check_session()?;
            }
            let children = match self.members().await {
                Ok(c) => c,
                Err(Error::Zk(e)) => {
                    wait.recover(e).await?;
                    continue;
                }
                Err(e) => return Err(e),
            };
            let ours = children.iter().position(|c| *c == self.name);
            if ours.is_none() && ours_exists {
                return Err(self.member_gone(wait, member).await);
            }
            let Some(lowest) = children.first() else {
                return Ok(true);
            };
            // The last member (ours, checked above) deletes its node and is done. A member
            // whose node is already deleted is done only once no node is left: it must not
            // take a wake-up (a reconnection) while the lowest still waits for its own turn as
            // the end (Curator's and kazoo's loops return there).
            if children.len() == 1 && ours_exists {
                self.delete_ours(wait, member).await?;
                return Ok(true);
            }
            let watched = if ours == Some(0) {
                join(&self.path, &children[children.len() - 1])
            } else {
                join(&self.path, lowest)
            };
            let watch = match self.client.get_data_watch(&watched).await {
                Ok((_, _, w)) => Some(w),
                Err(ErrorCode::NoNode) => None,
                Err(e) => {
                    wait.recover(e).await?;
                    continue;
                }
            };
            if ours_exists && ours != Some(0) {
                self.delete_ours(wait, member).await?;
                ours_exists = false;
            }
            if let Some(watch) = watch {
                if !wait.until(Some(watch)).await {
                    return wait.timed_out();
                }
            }
        }
    }

    /// Our node is gone and we did not delete it: our session expired (a reply may come
    /// from the client's new session before it says so: give it a moment), or someone
    /// deleted the node.
    async fn member_gone(&self, wait: &mut Wait, member: &Membership) -> Error {
        let until = Instant::now() + Duration::from_secs(2);
        loop {
            if let Err(e) = wait.check_session() {
                return e;
            }
            let rx = &mut wait.rx;
            match tokio::time::timeout_at(until, rx.changed()).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) => return Error::Closed,
                Err(_) => return Error::NotMember(format!("{} was deleted", member.node)),
            }
        }
    }

    async fn delete_ours(&self, wait: &mut Wait, member: &Membership) -> Result<(), Error> {
        loop {
            wait.check_session()?;
            match self.client.delete(&member.node, -1).await {
                Ok(()) | Err(ErrorCode::NoNode) => return Ok(()),
                Err(e) => wait.recover(e).await?,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn members_skip_ready_and_sort_by_name() {
        let c = vec![
            "b1".to_string(),
            READY_NODE.to_string(),
            "a2".to_string(),
            "9f".to_string(),
        ];
        assert_eq!(members_of(c), vec!["9f", "a2", "b1"]);
    }
}
