//! Lock recipes for ZooKeeper-compatible servers (zooraft and Apache ZooKeeper alike), safe
//! to mix with Java services using Apache Curator on the same lock paths.
//!
//! - [`Mutex`]: a fair (FIFO), herd-free, reentrant lock with Curator's node
//!   layout (`<path>/_c_<uuid>-lock-<seq>`), Curator's protection mode (a create whose reply
//!   was lost is found again) and guaranteed deletes (no orphan lock nodes).
//! - [`LockGuard`]: the held lock, with a [`FencingToken`] (the lock node's czxid, strictly
//!   increasing from holder to holder), a [`lost`](LockGuard::lost) signal, and fenced writes
//!   to ZooKeeper itself ([`LockGuard::fenced`]: a multi that checks our lock node).
//! - [`Fence`]: the resource side of fencing (compare-and-advance of the highest token).
//! - [`RwLock`]: Curator's read-write lock.
//!
//! - [`Mutex::run`]: the critical section as a future, cancelled the moment the
//!   lock is lost.
//! - [`LeaderLatch`] and [`LeaderSelector`]: leader election compatible with Curator's on
//!   the same path, with the leader's fencing token and `lost()`.
//! - [`Semaphore`]: Curator's counting semaphore (leases, a fixed or shared
//!   maximum).
//! - [`SharedCount`] and [`AtomicCounter`]: Curator's shared counters (one number in
//!   one znode, changed by compare-and-set on its version).
//! - [`MultiLock`]: several mutexes taken as one (in order, all or nothing),
//!   released in reverse order, with one fencing token per lock.
//! - [`SubtreeCache`]: a local mirror of a subtree with its events, on a persistent
//!   recursive watch where the server has one (one-shot watches otherwise), read again after
//!   every reconnection.
//! - [`Barrier`] and [`DoubleBarrier`]: Curator's (and kazoo's)
//!   barriers: a node that holds waiters back, and `qty` members meeting at the start and the
//!   end of a task.
//!
//! The types have Rust names; each carries its Curator class name as a search alias
//! (`InterProcessMutex` finds [`Mutex`]). A recipe is made with `new` (defaults) or
//! `with_options` ([`LockOptions`], [`ElectionOptions`]), which checks every option before
//! anything is sent; a handle never changes afterwards.
//!
//! The recipes speak to ZooKeeper through the [`ZkClient`] trait. [`ZookeeperClient`]
//! implements it over the zookeeper-client crate (the primary backend, feature
//! `zookeeper-client`, on by default); `AsyncZkClient` implements it over zookeeper-async
//! (feature `zookeeper-async`, off by default: it adds `multi` and containers over this
//! workspace's jute codec on a second session).
//!
//! Locks held through one client share one heartbeat; lock events go to `tracing` (spans
//! `lock_acquire`, `lock_release` and `lock_lost`, each with the lock path) and to an
//! optional [`LockMetrics`].
//!
//! A fenced critical section:
//!
//! ```no_run
//! use std::time::Duration;
//! use zooraft_recipes::{LockOptions, Mutex, ZookeeperClient};
//!
//! #[tokio::main]
//! async fn main() -> Result<(), zooraft_recipes::Error> {
//!     let client = ZookeeperClient::connect("127.0.0.1:2181", Duration::from_secs(10)).await?;
//!     let options = LockOptions::default().label("billing");
//!     let mutex = Mutex::with_options(client.clone(), "/locks/orders", options)?;
//!     let guard = mutex.acquire().await?;
//!     // Writes to ZooKeeper: applied only while our lock node exists.
//!     guard.fenced_set_data("/orders/next", b"43", -1).await?;
//!     // Writes elsewhere: send the token; the resource keeps a `Fence` and rejects older ones.
//!     println!("writing with token {}", guard.fencing_token());
//!     guard.release().await?;
//!     Ok(())
//! }
//! ```

#![deny(missing_docs)]

#[cfg(feature = "zookeeper-async")]
mod async_zk;
mod barrier;
mod cache;
mod cache_state;
mod cache_sync;
mod cleanup;
mod client;
mod codes;
mod counters;
mod double_barrier;
mod error;
mod fence;
mod guard;
mod heartbeat;
mod holding;
mod leader;
mod lock;
mod metrics;
mod monitor;
mod multi_lock;
mod mutex;
mod names;
mod options;
mod queue;
mod rules;
mod rwlock;
mod semaphore;
#[cfg(feature = "zookeeper-async")]
mod wire;
#[cfg(feature = "zookeeper-client")]
mod zk_client;

#[cfg(feature = "zookeeper-async")]
pub use async_zk::AsyncZkClient;
pub use barrier::Barrier;
pub use cache::{CacheEvent, ChildData, SubtreeCache, WatchMode};
pub use client::{
    perms, Acl, Connection, CreateMode, ErrorCode, EventType, Id, IntoClient, NodeEvent, Op,
    OpResult, PersistentWatch, SessionState, Stat, WatchReceiver, ZkClient, ZkResult,
};
pub use counters::{AtomicCounter, AtomicOutcome, SharedCount, VersionedCount};
pub use double_barrier::DoubleBarrier;
pub use error::{Cause, Error, LostReason};
pub use fence::{Fence, FencingToken, StaleToken};
pub use guard::LockGuard;
pub use leader::{LeaderLatch, LeaderSelector, Leadership};
pub use metrics::{AcquireOutcome, LockMetrics};
pub use multi_lock::{MultiLock, MultiLockGuard};
pub use mutex::{Mutex, Participant};
pub use names::Owner;
pub use options::{ElectionOptions, LockOptions};
pub use rwlock::RwLock;
pub use semaphore::{Lease, MaxLeases, Semaphore};
#[cfg(feature = "zookeeper-client")]
pub use zk_client::ZookeeperClient;

/// Curator's names of the renamed recipes, kept for one release to ease the move from 0.1.
mod renamed {
    /// Renamed to [`Mutex`](crate::Mutex).
    #[deprecated(since = "0.2.0", note = "renamed to `Mutex`")]
    pub type InterProcessMutex = crate::Mutex;
    /// Renamed to [`RwLock`](crate::RwLock).
    #[deprecated(since = "0.2.0", note = "renamed to `RwLock`")]
    pub type InterProcessReadWriteLock = crate::RwLock;
    /// Renamed to [`Semaphore`](crate::Semaphore).
    #[deprecated(since = "0.2.0", note = "renamed to `Semaphore`")]
    pub type InterProcessSemaphoreV2 = crate::Semaphore;
    /// Renamed to [`MultiLock`](crate::MultiLock).
    #[deprecated(since = "0.2.0", note = "renamed to `MultiLock`")]
    pub type InterProcessMultiLock = crate::MultiLock;
    /// Renamed to [`SubtreeCache`](crate::SubtreeCache).
    #[deprecated(since = "0.2.0", note = "renamed to `SubtreeCache`")]
    pub type CuratorCache = crate::SubtreeCache;
    /// Renamed to [`Barrier`](crate::Barrier).
    #[deprecated(since = "0.2.0", note = "renamed to `Barrier`")]
    pub type DistributedBarrier = crate::Barrier;
    /// Renamed to [`DoubleBarrier`](crate::DoubleBarrier).
    #[deprecated(since = "0.2.0", note = "renamed to `DoubleBarrier`")]
    pub type DistributedDoubleBarrier = crate::DoubleBarrier;
    /// Renamed to [`AtomicCounter`](crate::AtomicCounter).
    #[deprecated(since = "0.2.0", note = "renamed to `AtomicCounter`")]
    pub type DistributedAtomicLong = crate::AtomicCounter;
}
#[allow(deprecated)]
pub use renamed::*;

/// The README's examples, compiled as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
