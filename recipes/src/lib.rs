//! Lock recipes for ZooKeeper-compatible servers (zooraft and Apache ZooKeeper alike), safe
//! to mix with Java services using Apache Curator on the same lock paths.
//!
//! - [`InterProcessMutex`]: a fair (FIFO), herd-free, reentrant lock with Curator's node
//!   layout (`<path>/_c_<uuid>-lock-<seq>`), Curator's protection mode (a create whose reply
//!   was lost is found again) and guaranteed deletes (no orphan lock nodes).
//! - [`LockGuard`]: the held lock, with a [`FencingToken`] (the lock node's czxid, strictly
//!   increasing from holder to holder), a [`lost`](LockGuard::lost) signal, and fenced writes
//!   to ZooKeeper itself ([`LockGuard::fenced`]: a multi that checks our lock node).
//! - [`Fence`]: the resource side of fencing (compare-and-advance of the highest token).
//! - [`InterProcessReadWriteLock`]: Curator's read-write lock.
//!
//! - [`InterProcessMutex::run`]: the critical section as a future, cancelled the moment the
//!   lock is lost.
//! - [`LeaderLatch`] and [`LeaderSelector`]: leader election compatible with Curator's on
//!   the same path, with the leader's fencing token and `lost()`.
//! - [`InterProcessSemaphoreV2`]: Curator's counting semaphore (leases, a fixed or shared
//!   maximum).
//! - [`SharedCount`] and [`DistributedAtomicLong`]: Curator's shared counters (one number in
//!   one znode, changed by compare-and-set on its version).
//! - [`InterProcessMultiLock`]: several mutexes taken as one (in order, all or nothing),
//!   released in reverse order, with one fencing token per lock.
//! - [`CuratorCache`]: a local mirror of a subtree with its events, on a persistent
//!   recursive watch where the server has one (one-shot watches otherwise), read again after
//!   every reconnection.
//! - [`DistributedBarrier`] and [`DistributedDoubleBarrier`]: Curator's (and kazoo's)
//!   barriers: a node that holds waiters back, and `qty` members meeting at the start and the
//!   end of a task.
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
//! use zooraft_recipes::{InterProcessMutex, ZookeeperClient};
//!
//! #[tokio::main]
//! async fn main() -> Result<(), zooraft_recipes::Error> {
//!     let client = ZookeeperClient::connect("127.0.0.1:2181", Duration::from_secs(10)).await?;
//!     let mutex = InterProcessMutex::new(client.clone(), "/locks/orders").with_label("billing");
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
mod error;
mod fence;
mod guard;
mod heartbeat;
mod leader;
mod lock;
mod metrics;
mod monitor;
mod multi_lock;
mod mutex;
pub mod names;
mod queue;
mod rwlock;
mod semaphore;
#[cfg(feature = "zookeeper-async")]
mod wire;
#[cfg(feature = "zookeeper-client")]
mod zk_client;

#[cfg(feature = "zookeeper-async")]
pub use async_zk::AsyncZkClient;
pub use barrier::{DistributedBarrier, DistributedDoubleBarrier};
pub use cache::{CacheEvent, ChildData, CuratorCache, WatchMode};
pub use client::{
    perms, Acl, Connection, CreateMode, ErrorCode, EventType, Id, NodeEvent, Op, OpResult,
    PersistentWatch, SessionState, Stat, WatchReceiver, ZkClient, ZkResult,
};
pub use counters::{AtomicOutcome, DistributedAtomicLong, SharedCount, VersionedCount};
pub use error::{Error, LostReason};
pub use fence::{Fence, FencingToken, StaleToken};
pub use guard::LockGuard;
pub use leader::{LeaderLatch, LeaderSelector, Leadership};
pub use metrics::{AcquireOutcome, LockMetrics};
pub use multi_lock::{InterProcessMultiLock, MultiLockGuard};
pub use mutex::{InterProcessMutex, Participant};
pub use names::Owner;
pub use rwlock::InterProcessReadWriteLock;
pub use semaphore::{InterProcessSemaphoreV2, Lease};
#[cfg(feature = "zookeeper-client")]
pub use zk_client::ZookeeperClient;

/// The README's examples, compiled as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
