//! What every part of a running server shares: configuration, the replicated state behind
//! its lock, this member's watches and connections, counters, the consensus inbox, and
//! the member's published status (role, leader, serving).
//!
//! Lock order, where more than one is held: `state` → `watches` → registry internals.
//! No lock is ever held across an `.await` or any I/O.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicU8, Ordering};
use std::sync::mpsc::Sender;

use parking_lot::{Mutex, RwLock};

use crate::config::Config;
use crate::consensus::Input;
use crate::metrics::Metrics;
use crate::registry::Registry;
use crate::session::SessionIds;
use crate::state::StateMachine;
use crate::watch::{ConnId, WatchManager};

/// This member's role, as `srvr` reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Role {
    Standalone = 0,
    Leader = 1,
    Follower = 2,
    Observer = 3,
    /// Electing, or cut off from the leader.
    Looking = 4,
}

impl Role {
    pub fn name(self) -> &'static str {
        match self {
            Role::Standalone => "standalone",
            Role::Leader => "leader",
            Role::Follower => "follower",
            Role::Observer => "observer",
            Role::Looking => "looking",
        }
    }

    fn from_u8(v: u8) -> Role {
        match v {
            0 => Role::Standalone,
            1 => Role::Leader,
            2 => Role::Follower,
            3 => Role::Observer,
            _ => Role::Looking,
        }
    }
}

/// The member's status, written by the consensus loop, read by everyone.
#[derive(Default)]
pub struct Status {
    role: AtomicU8,
    pub leader: AtomicU64,
    pub serving: AtomicBool,
    pub term: AtomicU64,
    pub applied_index: AtomicU64,
    pub commit_index: AtomicU64,
    /// Voting followers the leader currently hears from, and how many are caught up.
    pub followers: AtomicU64,
    pub synced_followers: AtomicU64,
    pub observers: AtomicU64,
    pub log_last_index: AtomicU64,
    pub snapshot_index: AtomicU64,
}

impl Status {
    pub fn role(&self) -> Role {
        Role::from_u8(self.role.load(Ordering::Relaxed))
    }

    pub fn set_role(&self, role: Role) {
        self.role.store(role as u8, Ordering::Relaxed);
    }
}

/// See the module docs.
pub struct Shared {
    pub config: Config,
    pub me: u64,
    pub state: RwLock<StateMachine>,
    pub watches: Mutex<WatchManager>,
    pub registry: Registry,
    pub metrics: Metrics,
    /// `Sender` is `Sync`: connections send without taking any lock.
    pub inbox: Sender<Input>,
    pub session_ids: SessionIds,
    pub status: Status,
    /// The last zxid applied (what reads and pings report).
    pub last_zxid: AtomicI64,
    next_conn: AtomicU64,
    conn_prefix: u64,
}

impl Shared {
    pub fn new(config: Config, state: StateMachine, inbox: Sender<Input>) -> Shared {
        let me = config.my_id;
        let last_zxid = state.last_zxid;
        Shared {
            me,
            session_ids: SessionIds::new(me),
            config,
            state: RwLock::new(state),
            watches: Mutex::new(WatchManager::default()),
            registry: Registry::default(),
            metrics: Metrics::default(),
            inbox,
            status: Status::default(),
            last_zxid: AtomicI64::new(last_zxid),
            next_conn: AtomicU64::new(1),
            // Connection ids outlive a restart inside the log (replies are addressed to
            // them), so each process run gets its own prefix.
            conn_prefix: (rand::random::<u32>() as u64) << 32,
        }
    }

    /// A connection id no earlier run of this member used.
    pub fn new_conn_id(&self) -> ConnId {
        self.conn_prefix | (self.next_conn.fetch_add(1, Ordering::Relaxed) & 0xffff_ffff)
    }

    /// Sends something to the consensus loop; false once it has stopped.
    pub fn submit(&self, input: Input) -> bool {
        self.inbox.send(input).is_ok()
    }

    pub fn is_serving(&self) -> bool {
        self.status.serving.load(Ordering::Acquire)
    }

    pub fn last_zxid(&self) -> i64 {
        self.last_zxid.load(Ordering::Acquire)
    }
}
