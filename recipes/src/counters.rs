//! Shared counters compatible with Curator's `SharedCount` and `DistributedAtomicLong`.
//!
//! Both keep one number in one znode and change it with `setData` at the version they read:
//! ZooKeeper's compare-and-set, so two writers never both win from the same value.
//!
//! - [`SharedCount`]: Curator's layout, a 4-byte big-endian `i32`; created with a seed by
//!   [`SharedCount::start`] (parents as containers), read with its version, set
//!   unconditionally or only if unchanged since a read ([`SharedCount::try_set`]), and
//!   watched ([`SharedCount::changed_since`]). `Semaphore` reads its maximum
//!   from such a node.
//! - [`AtomicCounter`]: an 8-byte big-endian `i64`; a missing node reads as 0 and is
//!   created by the first write. Updates are optimistic (read, then `setData` at that
//!   version), retried up to a bound, and report Curator's `AtomicValue`
//!   ([`AtomicOutcome`]): whether it took, and the values before and after.
//!
//! A Curator client and this one on the same path read and change the same number.

use std::sync::Arc;

use crate::client::{CreateMode, ErrorCode, IntoClient, Stat, ZkClient};
use crate::error::Error;
use crate::names::{ancestors_and_self, checked_path};

/// Creates every missing ancestor of `path` as a container (Curator's
/// `creatingParentContainersIfNeeded`). The server reaps empty containers, so an ancestor
/// seen may be gone when its child is created (`NoNode`): then it starts over, a few times.
pub(crate) async fn ensure_parents(client: &dyn ZkClient, path: &str) -> Result<(), ErrorCode> {
    let all = ancestors_and_self(path);
    let mut tries = 0;
    'again: loop {
        for p in &all[..all.len().saturating_sub(1)] {
            match client.create_acl(p, &[], CreateMode::Container, &[]).await {
                Ok(_) | Err(ErrorCode::NodeExists) => {}
                Err(ErrorCode::NoNode) if tries < 5 => {
                    tries += 1;
                    continue 'again;
                }
                Err(e) => return Err(e),
            }
        }
        return Ok(());
    }
}

/// A counter node's `N` bytes (Curator writes the number big-endian, nothing else); `what`
/// names the recipe in the error.
fn counter_bytes<const N: usize>(data: &[u8], what: &str) -> Result<[u8; N], Error> {
    data.try_into().map_err(|_| {
        Error::InvalidOption(format!(
            "a {what} node holds {N} bytes, this one {}",
            data.len()
        ))
    })
}

fn decode_count(data: &[u8]) -> Result<i32, Error> {
    counter_bytes(data, "SharedCount").map(i32::from_be_bytes)
}

fn decode_long(data: &[u8]) -> Result<i64, Error> {
    counter_bytes(data, "AtomicCounter").map(i64::from_be_bytes)
}

/// A [`SharedCount`]'s value with the znode version it was read at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VersionedCount {
    /// The count.
    pub value: i32,
    /// The znode's data version it was read at.
    pub version: i32,
}

/// A counter shared by every client of the ensemble, compatible with Curator's `SharedCount`.
///
/// ```no_run
/// use std::time::Duration;
/// use zooraft_recipes::{SharedCount, ZookeeperClient};
///
/// #[tokio::main]
/// async fn main() -> Result<(), zooraft_recipes::Error> {
///     let client = ZookeeperClient::connect("127.0.0.1:2181", Duration::from_secs(10)).await?;
///     let workers = SharedCount::new(client, "/config/workers", 4)?;
///     workers.start().await?;
///     let seen = workers.get().await?;
///     if !workers.try_set(seen, seen.value + 1).await? {
///         // someone changed it since we read it
///     }
///     Ok(())
/// }
/// ```
#[derive(Clone)]
pub struct SharedCount {
    client: Arc<dyn ZkClient>,
    path: String,
    seed: i32,
}

impl std::fmt::Debug for SharedCount {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedCount")
            .field("path", &self.path)
            .field("seed", &self.seed)
            .finish()
    }
}

impl SharedCount {
    /// A count at `path`, created with `seed` by [`start`](Self::start) if it does not exist.
    pub fn new(client: impl IntoClient, path: &str, seed: i32) -> Result<SharedCount, Error> {
        let client = client.into_client();
        Ok(SharedCount {
            client,
            path: checked_path(path)?,
            seed,
        })
    }

    /// Creates the node with the seed unless it exists (its parents as containers).
    pub async fn start(&self) -> Result<(), Error> {
        ensure_parents(self.client.as_ref(), &self.path).await?;
        let seed = self.seed.to_be_bytes();
        match self
            .client
            .create(&self.path, &seed, CreateMode::Persistent)
            .await
        {
            Ok(_) | Err(ErrorCode::NodeExists) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// The value now, with its version.
    pub async fn get(&self) -> Result<VersionedCount, Error> {
        let (data, stat) = self.client.get_data(&self.path).await?;
        Ok(VersionedCount {
            value: decode_count(&data)?,
            version: stat.version,
        })
    }

    /// Sets the value whatever it is now.
    pub async fn set(&self, value: i32) -> Result<(), Error> {
        self.client
            .set_data(&self.path, &value.to_be_bytes(), -1)
            .await?;
        Ok(())
    }

    /// Sets the value only if it has not changed since `seen` was read; whether it did.
    pub async fn try_set(&self, seen: VersionedCount, value: i32) -> Result<bool, Error> {
        let data = value.to_be_bytes();
        match self.client.set_data(&self.path, &data, seen.version).await {
            Ok(_) => Ok(true),
            Err(ErrorCode::BadVersion) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    /// Waits until the count differs from `seen` (a new version), and returns it: Curator's
    /// `SharedCountListener` as a future. Returns at once if it already changed.
    pub async fn changed_since(&self, seen: VersionedCount) -> Result<VersionedCount, Error> {
        loop {
            let (data, stat, watch) = self.client.get_data_watch(&self.path).await?;
            if stat.version != seen.version {
                return Ok(VersionedCount {
                    value: decode_count(&data)?,
                    version: stat.version,
                });
            }
            // A dropped watch (the session's connection lost) reads again.
            let _ = watch.await;
        }
    }
}

/// What an update of an [`AtomicCounter`] did: Curator's `AtomicValue`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AtomicOutcome {
    /// Whether the value was changed (an optimistic update may give up after its retries).
    pub succeeded: bool,
    /// The value it was computed from.
    pub pre_value: i64,
    /// The value written (when `succeeded`).
    pub post_value: i64,
}

/// A 64-bit counter shared by every client, compatible with Curator's
/// `DistributedAtomicLong` (optimistic mode).
///
/// ```no_run
/// use std::time::Duration;
/// use zooraft_recipes::{AtomicCounter, ZookeeperClient};
///
/// #[tokio::main]
/// async fn main() -> Result<(), zooraft_recipes::Error> {
///     let client = ZookeeperClient::connect("127.0.0.1:2181", Duration::from_secs(10)).await?;
///     let orders = AtomicCounter::new(client, "/counters/orders")?;
///     let next = orders.increment().await?;
///     assert!(next.succeeded);
///     println!("order number {}", next.post_value);
///     Ok(())
/// }
/// ```
#[doc(alias = "DistributedAtomicLong")]
#[derive(Clone)]
pub struct AtomicCounter {
    client: Arc<dyn ZkClient>,
    path: String,
    retries: u32,
}

impl std::fmt::Debug for AtomicCounter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AtomicCounter")
            .field("path", &self.path)
            .field("retries", &self.retries)
            .finish()
    }
}

/// The attempts an optimistic update makes by default before it reports no success.
const DEFAULT_RETRIES: u32 = 100;

impl AtomicCounter {
    /// A counter at `path` (read as 0 until first written).
    pub fn new(client: impl IntoClient, path: &str) -> Result<AtomicCounter, Error> {
        let client = client.into_client();
        Ok(AtomicCounter {
            client,
            path: checked_path(path)?,
            retries: DEFAULT_RETRIES,
        })
    }

    /// How many times an update retries after losing a race (Curator's retry policy).
    pub fn with_retries(mut self, retries: u32) -> AtomicCounter {
        self.retries = retries;
        self
    }

    /// The value and the version it was read at; `None` for the version of a missing node.
    async fn read(&self) -> Result<(i64, Option<Stat>), Error> {
        match self.client.get_data(&self.path).await {
            Ok((data, stat)) => Ok((decode_long(&data)?, Some(stat))),
            Err(ErrorCode::NoNode) => Ok((0, None)),
            Err(e) => Err(e.into()),
        }
    }

    /// Writes `value` if the node is still as read (`stat`, or missing); whether it was.
    async fn write_if_unchanged(&self, stat: Option<Stat>, value: i64) -> Result<bool, Error> {
        let data = value.to_be_bytes();
        let written = match stat {
            Some(stat) => self
                .client
                .set_data(&self.path, &data, stat.version)
                .await
                .map(drop),
            None => {
                ensure_parents(self.client.as_ref(), &self.path).await?;
                let created = self
                    .client
                    .create(&self.path, &data, CreateMode::Persistent);
                created.await.map(drop)
            }
        };
        match written {
            Ok(()) => Ok(true),
            Err(ErrorCode::BadVersion | ErrorCode::NodeExists | ErrorCode::NoNode) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    /// The value now (0 if never written).
    pub async fn get(&self) -> Result<i64, Error> {
        Ok(self.read().await?.0)
    }

    /// Sets the value to `f(current)`, retrying lost races up to the retry bound.
    async fn update(&self, f: impl Fn(i64) -> i64) -> Result<AtomicOutcome, Error> {
        let mut last = 0;
        for _ in 0..=self.retries {
            let (current, stat) = self.read().await?;
            last = current;
            let next = f(current);
            if self.write_if_unchanged(stat, next).await? {
                return Ok(AtomicOutcome {
                    succeeded: true,
                    pre_value: current,
                    post_value: next,
                });
            }
        }
        Ok(AtomicOutcome {
            succeeded: false,
            pre_value: last,
            post_value: last,
        })
    }

    /// Adds `delta` (wrapping, as Java's long arithmetic).
    pub async fn add(&self, delta: i64) -> Result<AtomicOutcome, Error> {
        self.update(|v| v.wrapping_add(delta)).await
    }

    /// Adds 1.
    pub async fn increment(&self) -> Result<AtomicOutcome, Error> {
        self.add(1).await
    }

    /// Subtracts 1.
    pub async fn decrement(&self) -> Result<AtomicOutcome, Error> {
        self.add(-1).await
    }

    /// Sets `value` whatever the current value is, if no other writer gets in between within
    /// the retry bound.
    pub async fn try_set(&self, value: i64) -> Result<AtomicOutcome, Error> {
        self.update(|_| value).await
    }

    /// Sets `value` if the current value is `expected`, in one attempt (as Curator: a node
    /// never written does not match, whatever `expected` is).
    pub async fn compare_and_set(&self, expected: i64, value: i64) -> Result<AtomicOutcome, Error> {
        let (current, stat) = self.read().await?;
        let took = match stat {
            Some(_) if current == expected => self.write_if_unchanged(stat, value).await?,
            _ => false,
        };
        Ok(AtomicOutcome {
            succeeded: took,
            pre_value: current,
            post_value: if took { value } else { current },
        })
    }

    /// Writes `value` if the node does not exist yet; whether it did.
    pub async fn initialize(&self, value: i64) -> Result<bool, Error> {
        ensure_parents(self.client.as_ref(), &self.path).await?;
        match self
            .client
            .create(&self.path, &value.to_be_bytes(), CreateMode::Persistent)
            .await
        {
            Ok(_) => Ok(true),
            Err(ErrorCode::NodeExists) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    /// Sets `value` unconditionally (Curator's `forceSet`).
    pub async fn force_set(&self, value: i64) -> Result<(), Error> {
        let data = value.to_be_bytes();
        match self.client.set_data(&self.path, &data, -1).await {
            Ok(_) => Ok(()),
            Err(ErrorCode::NoNode) => {
                if !self.initialize(value).await? {
                    self.client.set_data(&self.path, &data, -1).await?;
                }
                Ok(())
            }
            Err(e) => Err(e.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_curators_big_endian_bytes() {
        assert_eq!(decode_count(&[0, 0, 1, 2]).unwrap(), 258);
        assert_eq!(decode_count(&(-5i32).to_be_bytes()).unwrap(), -5);
        assert!(decode_count(&[1, 2, 3]).is_err());
        assert_eq!(decode_long(&7i64.to_be_bytes()).unwrap(), 7);
        assert!(decode_long(b"12345678x").is_err());
    }
}
