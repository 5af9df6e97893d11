//! What the Raft thread publishes about this member for everyone else to read without a
//! lock: its role, leader, whether it serves clients and its Raft indexes (the write
//! path's counters are in `metrics.rs`). Written only by the Raft thread.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};

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
    /// The name `srvr` prints after `Mode:`.
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

/// The member's status, written by the Raft thread, read by everyone.
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
    /// The newest snapshot's zxid and when it was named, in seconds since the epoch
    /// (`last_snapshot`); until one is taken, the state the member started from and when.
    pub last_snapshot: parking_lot::Mutex<(i64, u64)>,
    /// The data directory is below its free-space reserve: the log writer waits.
    pub disk_full: AtomicBool,
    /// Free bytes in the data directory at the last check.
    pub disk_free_bytes: AtomicU64,
    /// The Raft loop is shutting down: a log writer waiting for space gives up.
    pub stopping: AtomicBool,
    /// This member's data directory holds all it acknowledged (`trust.rs`).
    pub data_trusted: AtomicBool,
    /// Peers whose data directories are untrusted, as this member knows them.
    pub untrusted_peers: AtomicU64,
    /// Why this member is held back by untrusted data directories (its own or its
    /// peers'), for `srvr` and `mntr`; `None` when nothing is.
    pub held_back: parking_lot::Mutex<Option<String>>,
    /// A live migration from ZooKeeper (`zab`): zero everywhere else.
    pub migration: Migration,
}

/// Where a member that observed a ZooKeeper ensemble stands, written by the `zab` loop
/// (and read by `mntr` and `zooraft migrate`).
#[derive(Default)]
pub struct Migration {
    /// [`Migration::PHASES`]'s index: 0 = not migrating.
    pub phase: AtomicU8,
    /// Transactions the ZooKeeper leader had proposed beyond what this member applied,
    /// at its last ping.
    pub lag: AtomicU64,
    /// Writes forwarded to the ZooKeeper leader and not answered yet.
    pub pending: AtomicU64,
    /// Writes held during a cut-over (they go through Raft once it forms).
    pub held: AtomicU64,
    /// The zxid the cut-over happened at (0 before).
    pub cutover_zxid: std::sync::atomic::AtomicI64,
}

impl Migration {
    /// What `mntr` prints for each phase.
    pub const PHASES: [&'static str; 5] = ["", "syncing", "following", "prepared", "cut over"];
    pub const SYNCING: u8 = 1;
    pub const FOLLOWING: u8 = 2;
    pub const PREPARED: u8 = 3;
    pub const CUT_OVER: u8 = 4;

    pub fn phase_name(&self) -> &'static str {
        let i = self.phase.load(Ordering::Acquire) as usize;
        Self::PHASES.get(i).copied().unwrap_or("")
    }
}

impl Status {
    /// A snapshot up to `zxid` is the newest now (`last_snapshot`: its zxid and this time).
    pub fn snapshot_named(&self, zxid: i64) {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
        *self.last_snapshot.lock() = (zxid, now.map_or(0, |d| d.as_secs()));
    }

    pub fn role(&self) -> Role {
        Role::from_u8(self.role.load(Ordering::Relaxed))
    }

    pub fn set_role(&self, role: Role) {
        self.role.store(role as u8, Ordering::Relaxed);
    }
}
