//! [`LockGuard`]: a held lock (or lease, or leadership) and everything its holder does with
//! it: the fencing token, the lost signal, fenced writes, explicit reentrancy, the
//! downgrade to a read lock, and the release.

use std::sync::Arc;

use crate::cleanup::DeleteOutcome;
use crate::client::{ErrorCode, Op, OpResult, Stat};
use crate::error::{Error, LostReason};
use crate::fence::FencingToken;
use crate::holding::Holding;
use crate::lock::LockCore;

/// A held lock. Release it with [`release`](LockGuard::release); dropping it releases in
/// the background (the delete is retried until it succeeds or the session is gone).
///
/// ```no_run
/// # async fn f(mutex: zooraft_recipes::Mutex) -> Result<(), zooraft_recipes::Error> {
/// let guard = mutex.acquire().await?;
/// tokio::select! {
///     reason = guard.lost() => eprintln!("lost the lock: {reason}"),
///     _ = tokio::time::sleep(std::time::Duration::from_secs(1)) => {
///         guard.fenced_set_data("/orders/last", b"42", -1).await?;
///     }
/// }
/// # Ok(()) }
/// ```
pub struct LockGuard {
    core: Arc<LockCore>,
    holding: Arc<Holding>,
    done: bool,
}

impl std::fmt::Debug for LockGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LockGuard")
            .field("node", &self.holding.path)
            .field("token", &self.holding.token)
            .field("lost", &self.holding.lost_reason())
            .finish()
    }
}

impl LockGuard {
    pub(crate) fn new(core: Arc<LockCore>, holding: Arc<Holding>) -> LockGuard {
        LockGuard {
            core,
            holding,
            done: false,
        }
    }

    /// This holder's fencing token (the lock node's czxid): larger than every earlier
    /// holder's. Pass it with every write to the protected resource (see [`Fence`](crate::Fence)).
    ///
    /// Only exclusive locks (a mutex, a write lock) give tokens fit for a `Fence`. A read
    /// lock's token is its own node's czxid, and readers hold together: do not write through
    /// a fence with it. A read lock taken with [`acquire_read`](Self::acquire_read) carries the
    /// write lock's token.
    ///
    /// ```no_run
    /// # async fn f(guard: zooraft_recipes::LockGuard, fence: zooraft_recipes::Fence) {
    /// fence.check(guard.fencing_token()).expect("a later holder wrote already");
    /// # }
    /// ```
    pub fn fencing_token(&self) -> FencingToken {
        self.holding.token
    }

    /// The full path of our lock node.
    ///
    /// ```no_run
    /// # fn f(guard: zooraft_recipes::LockGuard) {
    /// assert!(guard.node_path().contains("-lock-"));
    /// # }
    /// ```
    pub fn node_path(&self) -> &str {
        &self.holding.path
    }

    /// How many guards on this acquisition are outstanding (see [`reenter`](Self::reenter)).
    ///
    /// ```no_run
    /// # async fn f(mutex: zooraft_recipes::Mutex) -> Result<(), zooraft_recipes::Error> {
    /// let a = mutex.acquire().await?;
    /// let b = a.reenter();
    /// assert_eq!(b.hold_count(), 2);
    /// # Ok(()) }
    /// ```
    pub fn hold_count(&self) -> usize {
        self.holding.count.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Explicit reentrancy: another guard on the same acquisition (same node, same token),
    /// without any request. The node is deleted when the last guard is released.
    ///
    /// ```no_run
    /// # async fn f(mutex: zooraft_recipes::Mutex) -> Result<(), zooraft_recipes::Error> {
    /// let outer = mutex.acquire().await?;
    /// let inner = outer.reenter();
    /// inner.release().await?; // still held
    /// outer.release().await?; // deleted
    /// # Ok(()) }
    /// ```
    pub fn reenter(&self) -> LockGuard {
        self.holding
            .count
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        LockGuard {
            core: self.core.clone(),
            holding: self.holding.clone(),
            done: false,
        }
    }

    /// For a write lock of an [`RwLock`](crate::RwLock):
    /// takes its read lock without waiting, in this write lock's place in the queue, so that
    /// releasing the write lock afterwards downgrades to reading. The read guard carries this
    /// write lock's fencing token. Fails with [`Error::InvalidOption`] on any other guard.
    ///
    /// ```no_run
    /// # async fn f(rw: zooraft_recipes::RwLock) -> Result<(), zooraft_recipes::Error> {
    /// let write = rw.write_lock().acquire().await?;
    /// let read = write.acquire_read().await?;
    /// write.release().await?; // downgraded: still reading
    /// read.release().await?;
    /// # Ok(()) }
    /// ```
    pub async fn acquire_read(&self) -> Result<LockGuard, Error> {
        let Some(read) = self.core.read_sibling.as_ref() else {
            return Err(Error::InvalidOption(
                "acquire_read needs the write lock of a read-write lock".into(),
            ));
        };
        if let Some(reason) = self.holding.lost_reason() {
            return Err(Error::Lost(reason));
        }
        match read.acquire(None, true, Some(&self.holding)).await? {
            Some(holding) => Ok(LockGuard {
                core: read.clone(),
                holding,
                done: false,
            }),
            None => Err(Error::Closed),
        }
    }

    /// Completes when the lock can no longer be trusted, with the reason: the connection
    /// was down longer than the configured fraction of the session timeout, the session
    /// expired, the client closed, or the lock node vanished.
    ///
    /// ```no_run
    /// # async fn f(guard: zooraft_recipes::LockGuard) {
    /// let reason = guard.lost().await;
    /// eprintln!("stop writing: {reason}");
    /// # }
    /// ```
    pub async fn lost(&self) -> LostReason {
        let mut rx = self.holding.lost.clone();
        let seen = rx.wait_for(|v| v.is_some()).await.ok().and_then(|v| *v);
        seen.or_else(|| self.holding.lost_reason())
            .unwrap_or(LostReason::Released)
    }

    /// Why the lock was lost, if it was.
    ///
    /// ```no_run
    /// # fn f(guard: zooraft_recipes::LockGuard) {
    /// if let Some(reason) = guard.lost_reason() { eprintln!("{reason}"); }
    /// # }
    /// ```
    pub fn lost_reason(&self) -> Option<LostReason> {
        self.holding.lost_reason()
    }

    /// Whether the lock is still trusted (it has not been lost).
    ///
    /// ```no_run
    /// # fn f(guard: zooraft_recipes::LockGuard) {
    /// assert!(guard.is_valid());
    /// # }
    /// ```
    pub fn is_valid(&self) -> bool {
        self.holding.lost_reason().is_none()
    }

    /// A fenced write to ZooKeeper itself: runs `ops` in one multi after a check that our
    /// lock node still exists, so nothing is written once the lock is gone. Returns the
    /// results of `ops` (without the check's).
    ///
    /// Fails with [`Error::Lost`] when the lock node is gone (or the lock is already known
    /// lost), with [`Error::OpFailed`] when one of `ops` fails (nothing is applied).
    ///
    /// ```no_run
    /// # async fn f(guard: zooraft_recipes::LockGuard) -> Result<(), zooraft_recipes::Error> {
    /// use zooraft_recipes::Op;
    /// guard.fenced(vec![
    ///     Op::SetData { path: "/orders/last".into(), data: b"42".to_vec(), version: -1 },
    ///     Op::Delete { path: "/orders/pending-42".into(), version: -1 },
    /// ]).await?;
    /// # Ok(()) }
    /// ```
    pub async fn fenced(&self, ops: Vec<Op>) -> Result<Vec<OpResult>, Error> {
        if let Some(reason) = self.holding.lost_reason() {
            return Err(Error::Lost(reason));
        }
        let mut all = Vec::with_capacity(ops.len() + 1);
        all.push(Op::Check {
            path: self.holding.path.clone(),
            version: -1,
        });
        all.extend(ops);
        let mut results = self.core.client.multi(&all).await?;
        if let Some(OpResult::Error(code)) = results.first() {
            if *code == ErrorCode::NoNode {
                return Err(Error::Lost(LostReason::NodeDeleted));
            }
            if *code != ErrorCode::Ok {
                return Err(Error::OpFailed {
                    index: 0,
                    code: *code,
                });
            }
        }
        for (i, r) in results.iter().enumerate().skip(1) {
            if let OpResult::Error(code) = r {
                if *code != ErrorCode::Ok && *code != ErrorCode::RuntimeInconsistency {
                    return Err(Error::OpFailed {
                        index: i - 1,
                        code: *code,
                    });
                }
            }
        }
        if results.len() != all.len() {
            return Err(Error::Zk(ErrorCode::MarshallingError));
        }
        results.remove(0);
        Ok(results)
    }

    /// A fenced `setData`: see [`fenced`](LockGuard::fenced).
    ///
    /// ```no_run
    /// # async fn f(guard: zooraft_recipes::LockGuard) -> Result<(), zooraft_recipes::Error> {
    /// let stat = guard.fenced_set_data("/orders/last", b"42", -1).await?;
    /// # Ok(()) }
    /// ```
    pub async fn fenced_set_data(
        &self,
        path: &str,
        data: &[u8],
        version: i32,
    ) -> Result<Stat, Error> {
        let results = self
            .fenced(vec![Op::SetData {
                path: path.to_string(),
                data: data.to_vec(),
                version,
            }])
            .await?;
        match results.into_iter().next() {
            Some(OpResult::SetData(stat)) => Ok(stat),
            _ => Err(Error::Zk(ErrorCode::MarshallingError)),
        }
    }

    /// Releases this guard. When it is the last guard of the acquisition the lock node is
    /// deleted: the delete is retried until it succeeds or the session is gone, and this
    /// waits for it at most one session timeout. Then it fails with [`Error::Disconnected`]
    /// (the delete goes on in the background, and the handle is not free before it is done).
    /// A delete that fails for good (e.g. `NoAuth`) is reported; the handle remembers the
    /// node and its next acquire deletes it first (or fails with the same error).
    ///
    /// ```no_run
    /// # async fn f(mutex: zooraft_recipes::Mutex) -> Result<(), zooraft_recipes::Error> {
    /// let guard = mutex.acquire().await?;
    /// guard.release().await?;
    /// # Ok(()) }
    /// ```
    pub async fn release(mut self) -> Result<(), Error> {
        self.done = true;
        let Some(handle) = self.core.release(&self.holding) else {
            return Ok(());
        };
        let limit = self.core.client.session().borrow().timeout;
        match tokio::time::timeout(limit, handle).await {
            Ok(Ok(DeleteOutcome::Deleted)) | Ok(Ok(DeleteOutcome::SessionGone)) => Ok(()),
            Ok(Ok(DeleteOutcome::Failed(code))) => Err(Error::Zk(code)),
            Ok(Err(_)) => Err(Error::Closed),
            Err(_) => Err(Error::Disconnected),
        }
    }
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        if !self.done {
            self.done = true;
            // The delete runs in the background; its handle is not needed.
            drop(self.core.release(&self.holding));
        }
    }
}
