//! The replica: what the Raft thread shares with the layers above it. The replicated state
//! behind its lock, the last applied zxid, the member's published status and counters, and
//! the inbox of the Raft thread.
//!
//! Lock order, wherever more than one lock is held (the locks of the layers above are
//! declared with theirs): `state` → `net::ClientPort::watches` → a connection's pipeline →
//! the registry's maps. The apply loop holds `state` (write) and then the watches, so
//! that watch events are queued before any reply that shows the change; see
//! `net::shared` for why a local read may take its pipeline before the watches. No lock
//! is held across an `.await` or any I/O.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::mpsc::Sender;
use std::time::Duration;

use bytes::Bytes;
use parking_lot::RwLock;

use super::changes::Changes;
use super::input::Input;
use super::metrics::RaftCounters;
use super::restores::{RestoreError, Restores};
use super::status::Status;
use crate::config::Config;
use crate::state::command::Command;
use crate::state::StateMachine;

/// See the module docs.
pub struct Replica {
    /// The configuration it started with, and the one that replaces it once when a member
    /// that observed a ZooKeeper ensemble cuts over to Raft (its members then are only the
    /// zooraft ones). Set once, read without a lock: the write path reads it too.
    started_with: Config,
    cut_over_to: std::sync::OnceLock<Config>,
    /// This member's id (`myid`).
    pub me: u64,
    /// The replicated state. Written only by the Raft thread's apply loop.
    pub state: RwLock<StateMachine>,
    /// The last zxid applied (what reads and pings report), readable without the lock.
    last_zxid: AtomicI64,
    pub status: Status,
    pub counters: RaftCounters,
    /// The restores this member asked for (`restores.rs`).
    pub restores: Restores,
    /// The leader and membership changes this member saw (`changes.rs`).
    pub changes: Changes,
    /// `Sender` is `Sync`: connections send without taking any lock.
    inbox: Sender<Input>,
}

impl Replica {
    pub fn new(config: Config, state: StateMachine, inbox: Sender<Input>) -> Replica {
        let last_zxid = AtomicI64::new(state.last_zxid);
        Replica {
            me: config.my_id,
            started_with: config,
            cut_over_to: std::sync::OnceLock::new(),
            state: RwLock::new(state),
            last_zxid,
            status: Status::default(),
            counters: RaftCounters::default(),
            restores: Default::default(),
            changes: Changes::default(),
            inbox,
        }
    }

    /// The configuration in force.
    pub fn config(&self) -> &Config {
        self.cut_over_to.get().unwrap_or(&self.started_with)
    }

    /// Replaces the configuration, once (the cut-over from observing a ZooKeeper
    /// ensemble, before Raft starts); false if it was replaced already.
    pub(crate) fn replace_config(&self, config: Config) -> bool {
        self.cut_over_to.set(config).is_ok()
    }

    /// Sends something to the Raft thread; false once it has stopped.
    pub fn submit(&self, input: Input) -> bool {
        self.inbox.send(input).is_ok()
    }

    /// Proposes a restore to `state` (a snapshot encoding, already checked; see
    /// `restores.rs`) and waits up to `wait` for this member to apply it; the zxid it was
    /// applied at.
    pub async fn restore(&self, state: Bytes, wait: Duration) -> Result<i64, RestoreError> {
        let nonce = rand::random::<u64>();
        let applied = self.restores.expect(nonce);
        if !self.submit(Input::Command(Command::Restore { nonce, state })) {
            self.restores.forget(nonce);
            return Err(RestoreError::Stopping);
        }
        match tokio::time::timeout(wait, applied).await {
            Ok(Ok(zxid)) => Ok(zxid),
            Ok(Err(_)) => Err(RestoreError::Stopping),
            Err(_) => {
                self.restores.forget(nonce);
                Err(RestoreError::TimedOut(wait))
            }
        }
    }

    /// A sender into the Raft thread's inbox (for the workers and the peer transport).
    pub fn inbox(&self) -> Sender<Input> {
        self.inbox.clone()
    }

    /// Whether this member serves clients now (it has a leader and has caught up with it).
    pub fn is_serving(&self) -> bool {
        self.status.serving.load(Ordering::Acquire)
    }

    /// Whether this member answers read-only clients now: `readonlymode.enabled`, a member
    /// of an ensemble, and not serving (no leader or no quorum).
    pub fn is_read_only(&self) -> bool {
        self.config().read_only_mode && !self.config().is_standalone() && !self.is_serving()
    }

    pub fn last_zxid(&self) -> i64 {
        self.last_zxid.load(Ordering::Acquire)
    }

    pub(crate) fn set_last_zxid(&self, zxid: i64) {
        self.last_zxid.store(zxid, Ordering::Release);
    }

    /// `k` election timeouts (raft-rs's base election timeout: `ELECTION_TICKS` ticks).
    pub fn election_timeouts(&self, k: u32) -> Duration {
        super::timing::election_timeout(self.config().raft_tick) * k
    }
}
