//! The options a recipe is made with: one struct per kind of recipe, given to its
//! `with_options` constructor and checked there, so a handle never changes after it is made
//! and a bad option fails before anything is sent.
//!
//! [`LockOptions`] serve the locks ([`Mutex`](crate::Mutex), [`RwLock`](crate::RwLock),
//! [`MultiLock`](crate::MultiLock)) and the [`Semaphore`](crate::Semaphore);
//! [`ElectionOptions`] the elections ([`LeaderLatch`](crate::LeaderLatch),
//! [`LeaderSelector`](crate::LeaderSelector)), whose node data is the participant's id.
//!
//! Either is checked into a `Config`, what a lock handle keeps (with, for a semaphore, its
//! [`MaxLeases`]).

use std::sync::Arc;

use crate::client::Acl;
use crate::error::Error;
use crate::metrics::LockMetrics;
use crate::names::Owner;

/// How a lock (or a semaphore's leases) is taken: what its nodes hold, who may touch them,
/// where its events are reported, and when a silent connection makes it lost.
///
/// Start from [`LockOptions::default()`] and set what differs; the recipe's `with_options`
/// checks the whole set.
///
/// ```no_run
/// # async fn f(client: zooraft_recipes::ZookeeperClient) -> Result<(), zooraft_recipes::Error> {
/// use zooraft_recipes::{LockOptions, Mutex};
/// let options = LockOptions::default().label("billing").suspend_fraction(0.3);
/// let mutex = Mutex::with_options(client, "/locks/orders", options)?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
#[non_exhaustive]
pub struct LockOptions {
    /// A label stored with the host and pid in each lock node, for operators (the console's
    /// Locks view shows it). Default: empty.
    pub label: String,
    /// Data stored in the lock nodes instead of the owner line (Curator's `lockNodeBytes`;
    /// Curator itself stores the client's IP address). [`Participant::owner`] is then `None`
    /// unless the data parses as an owner line. Default: `None` (the owner line).
    ///
    /// [`Participant::owner`]: crate::Participant::owner
    pub node_data: Option<Vec<u8>>,
    /// The ACL of the lock nodes and of the containers created above them. Default: empty,
    /// meaning open to everyone. The client must carry the matching auth (for
    /// zookeeper-client, `Connector::with_auth`; see
    /// [`ZookeeperClient::connect_with`](crate::ZookeeperClient::connect_with)).
    pub acl: Vec<Acl>,
    /// Where wait times, hold times and lost locks are reported. Default: nowhere.
    pub metrics: Option<Arc<dyn LockMetrics>>,
    /// After what fraction of the session timeout without an answer from the server a held
    /// lock counts as lost. Default 0.5; fractions outside 0.05..=0.8 are refused (past 0.8
    /// the holder may still trust its lock after the server expired its session).
    pub suspend_fraction: f64,
}

impl Default for LockOptions {
    fn default() -> LockOptions {
        LockOptions {
            label: String::new(),
            node_data: None,
            acl: Vec::new(),
            metrics: None,
            suspend_fraction: DEFAULT_SUSPEND_FRACTION,
        }
    }
}

impl std::fmt::Debug for LockOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LockOptions")
            .field("label", &self.label)
            .field("node_data", &self.node_data)
            .field("acl", &self.acl)
            .field("metrics", &self.metrics.is_some())
            .field("suspend_fraction", &self.suspend_fraction)
            .finish()
    }
}

impl LockOptions {
    /// Sets [`label`](Self::label).
    pub fn label(mut self, label: impl Into<String>) -> LockOptions {
        self.label = label.into();
        self
    }

    /// Sets [`node_data`](Self::node_data).
    pub fn node_data(mut self, data: impl Into<Vec<u8>>) -> LockOptions {
        self.node_data = Some(data.into());
        self
    }

    /// Sets [`acl`](Self::acl).
    ///
    /// ```
    /// use zooraft_recipes::{perms, Acl, Id, LockOptions};
    /// let creator_only = vec![Acl { perms: perms::ALL, id: Id { scheme: "auth".into(), id: "".into() } }];
    /// let options = LockOptions::default().acl(creator_only);
    /// assert_eq!(options.acl.len(), 1);
    /// ```
    pub fn acl(mut self, acl: Vec<Acl>) -> LockOptions {
        self.acl = acl;
        self
    }

    /// Sets [`metrics`](Self::metrics).
    ///
    /// ```
    /// struct Quiet;
    /// impl zooraft_recipes::LockMetrics for Quiet {}
    /// let options = zooraft_recipes::LockOptions::default().metrics(std::sync::Arc::new(Quiet));
    /// assert!(options.metrics.is_some());
    /// ```
    pub fn metrics(mut self, metrics: Arc<dyn LockMetrics>) -> LockOptions {
        self.metrics = Some(metrics);
        self
    }

    /// Sets [`suspend_fraction`](Self::suspend_fraction) (checked by the recipe's
    /// `with_options`).
    pub fn suspend_fraction(mut self, fraction: f64) -> LockOptions {
        self.suspend_fraction = fraction;
        self
    }

    /// The checked configuration of a lock handle.
    pub(crate) fn config(&self) -> Result<Config, Error> {
        Ok(Config {
            owner: Owner::current(&self.label),
            node_data: self.node_data.clone(),
            acl: self.acl.clone(),
            suspend_fraction: check_suspend_fraction(self.suspend_fraction)?,
            metrics: self.metrics.clone(),
            ..Config::default()
        })
    }
}

/// How a participant takes part in an election: who may touch its node, where its terms
/// are reported, and when a silent connection ends its leadership. Its node holds its id,
/// as Curator's participants' do.
///
/// ```no_run
/// # fn f(client: zooraft_recipes::ZookeeperClient) -> Result<(), zooraft_recipes::Error> {
/// use zooraft_recipes::{ElectionOptions, LeaderLatch};
/// let options = ElectionOptions::default().suspend_fraction(0.3);
/// let latch = LeaderLatch::with_options(client, "/election/billing", "rust-1", options)?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
#[non_exhaustive]
pub struct ElectionOptions {
    /// The ACL of the participant's node and of the containers above it (see
    /// [`LockOptions::acl`]). Default: open to everyone.
    pub acl: Vec<Acl>,
    /// Where waits for leadership, terms and lost leadership are reported. Default: nowhere.
    pub metrics: Option<Arc<dyn LockMetrics>>,
    /// As [`LockOptions::suspend_fraction`]: when a silent connection ends leadership.
    pub suspend_fraction: f64,
}

impl Default for ElectionOptions {
    fn default() -> ElectionOptions {
        ElectionOptions {
            acl: Vec::new(),
            metrics: None,
            suspend_fraction: DEFAULT_SUSPEND_FRACTION,
        }
    }
}

impl std::fmt::Debug for ElectionOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ElectionOptions")
            .field("acl", &self.acl)
            .field("metrics", &self.metrics.is_some())
            .field("suspend_fraction", &self.suspend_fraction)
            .finish()
    }
}

impl ElectionOptions {
    /// Sets [`acl`](Self::acl).
    pub fn acl(mut self, acl: Vec<Acl>) -> ElectionOptions {
        self.acl = acl;
        self
    }

    /// Sets [`metrics`](Self::metrics).
    pub fn metrics(mut self, metrics: Arc<dyn LockMetrics>) -> ElectionOptions {
        self.metrics = Some(metrics);
        self
    }

    /// Sets [`suspend_fraction`](Self::suspend_fraction) (checked by `with_options`).
    pub fn suspend_fraction(mut self, fraction: f64) -> ElectionOptions {
        self.suspend_fraction = fraction;
        self
    }

    /// The checked configuration of participant `id`'s node.
    pub(crate) fn config(&self, id: &str) -> Result<Config, Error> {
        Ok(Config {
            acl: self.acl.clone(),
            suspend_fraction: check_suspend_fraction(self.suspend_fraction)?,
            metrics: self.metrics.clone(),
            ..Config::participant(id)
        })
    }
}

/// Options of a lock handle.
#[derive(Clone)]
pub(crate) struct Config {
    pub owner: Owner,
    /// The lock node's data, instead of the owner line (Curator's `lockNodeBytes`).
    pub node_data: Option<Vec<u8>>,
    /// The ACL of the lock nodes and the containers above them (empty: open).
    pub acl: Vec<Acl>,
    pub suspend_fraction: f64,
    pub metrics: Option<Arc<dyn LockMetrics>>,
    /// For a lease: how many leases may be held at once.
    pub max_leases: MaxLeases,
}

/// How many leases a [`Semaphore`](crate::Semaphore) grants at once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MaxLeases {
    /// A fixed number (at least one).
    Fixed(usize),
    /// The number stored in the node at this path (Curator's `SharedCount`: a 4-byte
    /// big-endian int), read again whenever an acquirer waits.
    Shared(String),
}

impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Config")
            .field("owner", &self.owner)
            .field("node_data", &self.node_data)
            .field("acl", &self.acl)
            .field("suspend_fraction", &self.suspend_fraction)
            .field("metrics", &self.metrics.is_some())
            .field("max_leases", &self.max_leases)
            .finish()
    }
}

impl Default for Config {
    fn default() -> Config {
        Config {
            owner: Owner::current(""),
            node_data: None,
            acl: Vec::new(),
            suspend_fraction: DEFAULT_SUSPEND_FRACTION,
            metrics: None,
            max_leases: MaxLeases::Fixed(1),
        }
    }
}

impl Config {
    /// The defaults for an election participant: its node holds its id, as Curator's do.
    pub(crate) fn participant(id: &str) -> Config {
        Config {
            node_data: Some(id.as_bytes().to_vec()),
            ..Config::default()
        }
    }

    pub(crate) fn data(&self) -> Vec<u8> {
        self.node_data
            .clone()
            .unwrap_or_else(|| self.owner.to_bytes())
    }
}

/// The default fraction of the session timeout without an answer after which a held lock
/// counts as lost.
pub(crate) const DEFAULT_SUSPEND_FRACTION: f64 = 0.5;
/// The largest fraction accepted: past it, the holder may still believe in its lock when the
/// server, whose clock started earlier, has already expired the session.
pub(crate) const MAX_SUSPEND_FRACTION: f64 = 0.8;
/// The smallest fraction accepted (below it, a lock is lost at the first slow reply).
pub(crate) const MIN_SUSPEND_FRACTION: f64 = 0.05;

/// Checks a suspend fraction.
fn check_suspend_fraction(fraction: f64) -> Result<f64, Error> {
    if (MIN_SUSPEND_FRACTION..=MAX_SUSPEND_FRACTION).contains(&fraction) {
        Ok(fraction)
    } else {
        Err(Error::InvalidOption(format!(
            "suspend fraction {fraction} is outside {MIN_SUSPEND_FRACTION}..={MAX_SUSPEND_FRACTION}"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_checked_and_open() {
        let config = LockOptions::default().config().expect("defaults are valid");
        assert_eq!(config.suspend_fraction, DEFAULT_SUSPEND_FRACTION);
        assert!(config.acl.is_empty());
        assert_eq!(config.data(), Owner::current("").to_bytes());
    }

    #[test]
    fn suspend_fractions_outside_the_safe_range_are_refused() {
        for bad in [0.0, 0.01, 0.81, 1.0, f64::NAN, -0.5] {
            let e = LockOptions::default().suspend_fraction(bad).config();
            assert!(matches!(e, Err(Error::InvalidOption(_))), "{bad}: {e:?}");
            let e = ElectionOptions::default().suspend_fraction(bad).config("p");
            assert!(matches!(e, Err(Error::InvalidOption(_))), "{bad}: {e:?}");
        }
        for good in [MIN_SUSPEND_FRACTION, 0.3, MAX_SUSPEND_FRACTION] {
            assert!(LockOptions::default()
                .suspend_fraction(good)
                .config()
                .is_ok());
        }
    }

    #[test]
    fn node_data_replaces_the_owner_line_and_elections_store_the_id() {
        let lock = LockOptions::default()
            .label("billing")
            .node_data(&b"10.0.0.7"[..]);
        assert_eq!(lock.config().unwrap().data(), b"10.0.0.7");
        let labelled = LockOptions::default().label("billing").config().unwrap();
        assert_eq!(labelled.owner.label, "billing");
        let election = ElectionOptions::default().config("rust-1").unwrap();
        assert_eq!(election.data(), b"rust-1");
    }
}
