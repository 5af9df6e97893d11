//! [`MultiLock`]: several locks taken as one, compatible with Curator's
//! `InterProcessMultiLock` over mutexes on the same paths.
//!
//! The locks are taken in the order given (everyone who takes the same set in the same order
//! cannot deadlock) and released in the reverse order. It is all or nothing: when one lock
//! cannot be had before the deadline (or the acquire fails), the locks already taken are
//! released before the call returns. The held set is a [`MultiLockGuard`]: one fencing token
//! per path, and one lost signal for the whole set (losing any lock loses the set).

use std::future::Future;
use std::pin::Pin;
use std::task::Poll;
use std::time::Duration;

use tokio::time::Instant;

use crate::client::IntoClient;
use crate::error::{Error, LostReason};
use crate::fence::FencingToken;
use crate::guard::LockGuard;
use crate::mutex::Mutex;
use crate::names::validate_path;
use crate::options::LockOptions;

/// Several locks taken together, each a [`Mutex`] (Curator's layout, so Curator
/// holders of any of the paths exclude us and we them).
///
/// ```no_run
/// use std::sync::Arc;
/// use std::time::Duration;
/// use zooraft_recipes::{MultiLock, ZookeeperClient};
///
/// #[tokio::main]
/// async fn main() -> Result<(), zooraft_recipes::Error> {
///     let client = ZookeeperClient::connect("127.0.0.1:2181", Duration::from_secs(10)).await?;
///     let both = MultiLock::new(client, &["/locks/account-1", "/locks/account-2"])?;
///     if let Some(guard) = both.acquire_timeout(Duration::from_secs(5)).await? {
///         for (path, token) in guard.fencing_tokens() {
///             println!("{path}: token {token}");
///         }
///         guard.release().await?; // account-2 first, then account-1
///     }
///     Ok(())
/// }
/// ```
#[doc(alias = "InterProcessMultiLock")]
#[derive(Clone)]
pub struct MultiLock {
    locks: Vec<Mutex>,
}

impl std::fmt::Debug for MultiLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MultiLock")
            .field("paths", &self.paths())
            .finish()
    }
}

impl MultiLock {
    /// A multi-lock over `paths`, taken in this order. Fails on an empty list, an invalid
    /// path, or a path given twice (it would wait for itself).
    pub fn new(client: impl IntoClient, paths: &[&str]) -> Result<Self, Error> {
        let client = client.into_client();
        MultiLock::with_options(client, paths, LockOptions::default())
    }

    /// Like [`new`](Self::new), every lock made with `options` (see
    /// [`Mutex::with_options`]).
    ///
    /// ```no_run
    /// # fn f(client: zooraft_recipes::ZookeeperClient) -> Result<(), zooraft_recipes::Error> {
    /// use zooraft_recipes::{LockOptions, MultiLock};
    /// let accounts = ["/locks/account-1", "/locks/account-2"];
    /// let both = MultiLock::with_options(client, &accounts, LockOptions::default().label("transfer"))?;
    /// # Ok(()) }
    /// ```
    pub fn with_options(
        client: impl IntoClient,
        paths: &[&str],
        options: LockOptions,
    ) -> Result<Self, Error> {
        let client = client.into_client();
        let mutexes = paths
            .iter()
            .map(|p| Mutex::with_options(client.clone(), p, options.clone()))
            .collect::<Result<Vec<_>, Error>>()?;
        MultiLock::from_mutexes(mutexes)
    }

    /// A multi-lock over mutexes configured by the caller (labels, node data, ACLs, metrics,
    /// clients), taken in this order.
    pub fn from_mutexes(locks: Vec<Mutex>) -> Result<Self, Error> {
        if locks.is_empty() {
            return Err(Error::InvalidOption("a multi-lock needs a lock".into()));
        }
        let mut seen = std::collections::HashSet::new();
        for l in &locks {
            if !validate_path(l.path()) {
                return Err(Error::InvalidPath(l.path().to_string()));
            }
            if !seen.insert(l.path()) {
                return Err(Error::InvalidOption(format!(
                    "{} is in the multi-lock twice",
                    l.path()
                )));
            }
        }
        Ok(MultiLock { locks })
    }

    /// The lock paths, in acquisition order.
    pub fn paths(&self) -> Vec<&str> {
        self.locks.iter().map(|l| l.path()).collect()
    }

    /// Waits until every lock is ours. On an error, the locks taken are released first.
    pub async fn acquire(&self) -> Result<MultiLockGuard, Error> {
        match self.acquire_until(None).await? {
            Some(g) => Ok(g),
            None => Err(Error::Closed),
        }
    }

    /// Waits at most `timeout` for all the locks together (one deadline for the set).
    /// `Ok(None)` when one of them stayed busy: then none is held, nor any node of ours left.
    /// Errors as [`Mutex::acquire_timeout`], also with none held.
    pub async fn acquire_timeout(
        &self,
        timeout: Duration,
    ) -> Result<Option<MultiLockGuard>, Error> {
        self.acquire_until(Some(Instant::now() + timeout)).await
    }

    async fn acquire_until(
        &self,
        deadline: Option<Instant>,
    ) -> Result<Option<MultiLockGuard>, Error> {
        let mut held = Vec::with_capacity(self.locks.len());
        for lock in &self.locks {
            let got = match deadline {
                None => lock.acquire().await.map(Some),
                Some(d) => {
                    let left = d.saturating_duration_since(Instant::now());
                    lock.acquire_timeout(left).await
                }
            };
            match got {
                Ok(Some(guard)) => held.push(guard),
                other => {
                    tracing::debug!(
                        path = lock.path(),
                        "multi-lock: a lock could not be had; releasing the others"
                    );
                    // A release that fails here goes on in the background (guaranteed delete).
                    let _ = release_reversed(held).await;
                    return other.map(|_| None);
                }
            }
        }
        Ok(Some(MultiLockGuard { guards: held }))
    }
}

/// Releases the guards last first; the first error, after trying them all.
async fn release_reversed(mut guards: Vec<LockGuard>) -> Result<(), Error> {
    let mut first = Ok(());
    while let Some(g) = guards.pop() {
        let path = g.node_path().to_string();
        if let Err(e) = g.release().await {
            tracing::warn!("multi-lock: releasing {path} failed: {e}");
            if first.is_ok() {
                first = Err(e);
            }
        }
    }
    first
}

/// The locks of an [`MultiLock`], all held. Release it with
/// [`release`](Self::release) (last lock first); dropping it starts the releases in the same
/// order, in the background.
pub struct MultiLockGuard {
    guards: Vec<LockGuard>,
}

impl std::fmt::Debug for MultiLockGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MultiLockGuard")
            .field("locks", &self.guards)
            .finish()
    }
}

impl MultiLockGuard {
    /// Each lock's path (the lock path, not the node) with its fencing token, in acquisition
    /// order.
    pub fn fencing_tokens(&self) -> Vec<(String, FencingToken)> {
        self.guards
            .iter()
            .map(|g| (lock_path_of(g.node_path()), g.fencing_token()))
            .collect()
    }

    /// The fencing token of the lock at `path`, if it is one of ours.
    pub fn fencing_token(&self, path: &str) -> Option<FencingToken> {
        self.guards
            .iter()
            .find(|g| lock_path_of(g.node_path()) == path)
            .map(|g| g.fencing_token())
    }

    /// The guards of the single locks, in acquisition order (for fenced writes).
    pub fn guards(&self) -> &[LockGuard] {
        &self.guards
    }

    /// Completes when any of the locks is lost, with why: the set is no longer held.
    pub async fn lost(&self) -> LostReason {
        let mut waits: Vec<Pin<Box<dyn Future<Output = LostReason> + Send + '_>>> = self
            .guards
            .iter()
            .map(|g| Box::pin(g.lost()) as _)
            .collect();
        std::future::poll_fn(|cx| {
            for w in waits.iter_mut() {
                if let Poll::Ready(r) = w.as_mut().poll(cx) {
                    return Poll::Ready(r);
                }
            }
            Poll::Pending
        })
        .await
    }

    /// Why the set was lost (the first lost lock's reason), if it was.
    pub fn lost_reason(&self) -> Option<LostReason> {
        self.guards.iter().find_map(|g| g.lost_reason())
    }

    /// Whether every lock is still trusted.
    pub fn is_valid(&self) -> bool {
        self.lost_reason().is_none()
    }

    /// Releases the locks, last acquired first, each waited for before the next (as
    /// [`LockGuard::release`]); every lock is released even if one fails, and the first
    /// failure is returned.
    pub async fn release(mut self) -> Result<(), Error> {
        release_reversed(std::mem::take(&mut self.guards)).await
    }
}

impl Drop for MultiLockGuard {
    fn drop(&mut self) {
        // Vec drops front first; the background releases start last lock first.
        while let Some(g) = self.guards.pop() {
            drop(g);
        }
    }
}

/// The lock path of a lock node (`<lock path>/<node>`).
fn lock_path_of(node: &str) -> String {
    match node.rfind('/') {
        Some(0) => "/".to_string(),
        Some(i) => node[..i].to_string(),
        None => node.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lock_path_is_the_nodes_parent() {
        assert_eq!(lock_path_of("/locks/a/_c_x-lock-0000000001"), "/locks/a");
        assert_eq!(lock_path_of("/n"), "/");
    }
}
