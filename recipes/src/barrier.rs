//! A barrier compatible with Curator's `DistributedBarrier` (and kazoo's `Barrier`) on the
//! same path: one persistent node whose existence holds everyone back; waiters watch it and
//! go on when it is deleted. The wait itself ([`Wait`]) serves the double barrier too
//! (`double_barrier.rs`).
//!
//! Waits use one-shot watches (a child watch on the barrier for `enter`, data watches for the
//! rest), re-read after every event and after every reconnection, so a missed or dropped
//! watch costs a re-read, never a hang.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use crate::cleanup::{session_gone, wait_connected};
use crate::client::{
    is_transient, Connection, CreateMode, ErrorCode, EventType, IntoClient, SessionState,
    WatchReceiver, ZkClient,
};
use crate::counters::ensure_parents;
use crate::error::Error;
use crate::names::checked_path;

/// How many times a create makes its missing parents again (the server reaps empty
/// containers, possibly between our making them and our create).
pub(crate) const PARENT_ATTEMPTS: u32 = 5;

/// How often a client without child watches looks again.
const POLL: Duration = Duration::from_millis(100);

/// What ended a wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Woken {
    /// The watched node was created.
    Created,
    /// Something else happened: look again.
    Other,
    /// The deadline passed.
    Deadline,
}

/// The wait of one barrier call: its deadline and the session it started in.
pub(crate) struct Wait {
    pub rx: watch::Receiver<SessionState>,
    /// The session whose ephemeral node the call depends on (none for a plain barrier).
    pub epoch: Option<u64>,
    pub deadline: Option<Instant>,
}

impl Wait {
    pub(crate) fn new(client: &dyn ZkClient, timeout: Option<Duration>, own_session: bool) -> Wait {
        let rx = client.session();
        let epoch = own_session.then(|| rx.borrow().epoch);
        Wait {
            rx,
            epoch,
            deadline: timeout.map(|t| Instant::now() + t),
        }
    }

    /// Why the call cannot go on, once the connection did not come back: the client closed,
    /// our session expired, or (the deadline passed) the connection is down.
    pub(crate) fn stopped(&self) -> Error {
        let state = self.rx.borrow();
        if state.connection == Connection::Closed {
            Error::Closed
        } else if self.epoch.is_some_and(|e| session_gone(&state, e)) {
            Error::SessionExpired
        } else {
            Error::Disconnected
        }
    }

    /// An error from a call: transient ones wait for the connection (then the caller reads
    /// again), others end the call.
    pub(crate) async fn recover(&mut self, e: ErrorCode) -> Result<(), Error> {
        if e == ErrorCode::SessionExpired {
            return Err(Error::SessionExpired);
        }
        if !is_transient(e) {
            return Err(e.into());
        }
        tracing::debug!("barrier call failed ({e}); waiting for the connection");
        if wait_connected(&mut self.rx, self.epoch, self.deadline).await {
            Ok(())
        } else {
            Err(self.stopped())
        }
    }

    /// Fails if the session our node belongs to is gone.
    pub(crate) fn check_session(&self) -> Result<(), Error> {
        let state = self.rx.borrow();
        match self.epoch {
            _ if state.connection == Connection::Closed => Err(Error::Closed),
            Some(e) if session_gone(&state, e) => Err(Error::SessionExpired),
            _ => Ok(()),
        }
    }

    /// Waits for the watch to fire (or be dropped), the session to change, or the deadline.
    /// False when the deadline passed.
    pub(crate) async fn until(&mut self, watch: Option<WatchReceiver>) -> bool {
        self.until_either(None, watch).await != Woken::Deadline
    }

    /// Waits for `created` to report a creation, `other` to fire (or either to be dropped),
    /// the session to change, or the deadline. Without watches, waits one poll interval.
    pub(crate) async fn until_either(
        &mut self,
        created: Option<WatchReceiver>,
        other: Option<WatchReceiver>,
    ) -> Woken {
        let sleep = async {
            match self.deadline {
                Some(d) => tokio::time::sleep_until(d).await,
                None => std::future::pending().await,
            }
        };
        let polling = created.is_none() && other.is_none();
        let created = async {
            match created {
                Some(w) => match w.await {
                    Ok(EventType::NodeCreated) => Woken::Created,
                    _ => Woken::Other,
                },
                None if polling => {
                    tokio::time::sleep(POLL).await;
                    Woken::Other
                }
                None => std::future::pending().await,
            }
        };
        let other = async {
            match other {
                Some(w) => drop(w.await),
                None => std::future::pending().await,
            }
        };
        let rx = &mut self.rx;
        let changed = async {
            // A dropped sender (the client is gone) wakes nobody; the calls will fail.
            if rx.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
        };
        tokio::select! {
            woken = created => woken,
            () = other => Woken::Other,
            () = changed => Woken::Other,
            () = sleep => Woken::Deadline,
        }
    }

    /// The deadline passed: `Ok(false)` while connected, otherwise why not.
    pub(crate) fn timed_out(&self) -> Result<bool, Error> {
        if self.rx.borrow().connection == Connection::Connected {
            self.check_session().map(|()| false)
        } else {
            Err(self.stopped())
        }
    }
}

/// A barrier: while its node exists, [`wait_on_barrier`](Self::wait_on_barrier) blocks.
/// Compatible with Curator's `DistributedBarrier` and kazoo's `Barrier` on the same path.
///
/// ```no_run
/// use std::time::Duration;
/// use zooraft_recipes::{Barrier, ZookeeperClient};
///
/// #[tokio::main]
/// async fn main() -> Result<(), zooraft_recipes::Error> {
///     let client = ZookeeperClient::connect("127.0.0.1:2181", Duration::from_secs(10)).await?;
///     let barrier = Barrier::new(client, "/barriers/deploy")?;
///     barrier.set_barrier().await?;
///     // ... elsewhere, workers call barrier.wait_on_barrier(None) ...
///     barrier.remove_barrier().await?;
///     let passed = barrier.wait_on_barrier(Some(Duration::from_secs(1))).await?;
///     assert!(passed);
///     Ok(())
/// }
/// ```
#[doc(alias = "DistributedBarrier")]
#[derive(Clone)]
pub struct Barrier {
    client: Arc<dyn ZkClient>,
    path: String,
}

impl std::fmt::Debug for Barrier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Barrier").field("path", &self.path).finish()
    }
}

impl Barrier {
    /// A barrier at `path`.
    pub fn new(client: impl IntoClient, path: &str) -> Result<Barrier, Error> {
        let client = client.into_client();
        Ok(Barrier {
            client,
            path: checked_path(path)?,
        })
    }

    /// The barrier's path.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// Raises the barrier: creates its node (parents as containers) unless it exists.
    pub async fn set_barrier(&self) -> Result<(), Error> {
        // An empty container parent may be reaped between its creation (or our look at it)
        // and our create: make it again, a few times.
        let mut attempts = 0;
        loop {
            match self
                .client
                .create(&self.path, &[], CreateMode::Persistent)
                .await
            {
                Ok(_) | Err(ErrorCode::NodeExists) => return Ok(()),
                Err(ErrorCode::NoNode) if attempts < PARENT_ATTEMPTS => {
                    attempts += 1;
                    ensure_parents(self.client.as_ref(), &self.path).await?;
                }
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// Lowers the barrier: deletes its node if it exists.
    pub async fn remove_barrier(&self) -> Result<(), Error> {
        match self.client.delete(&self.path, -1).await {
            Ok(()) | Err(ErrorCode::NoNode) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// Waits until the barrier is down (its node does not exist): `Ok(true)`, or `Ok(false)`
    /// when `timeout` passed first (connected, the barrier still up). `None` waits for ever.
    /// Connection losses are waited out; if the connection is still down at the deadline,
    /// `Err(Disconnected)`.
    pub async fn wait_on_barrier(&self, timeout: Option<Duration>) -> Result<bool, Error> {
        let mut wait = Wait::new(self.client.as_ref(), timeout, false);
        loop {
            match self.client.get_data_watch(&self.path).await {
                Err(ErrorCode::NoNode) => return Ok(true),
                Ok((_, _, watch)) => {
                    if !wait.until(Some(watch)).await {
                        return wait.timed_out();
                    }
                }
                Err(e) => wait.recover(e).await?,
            }
        }
    }
}
