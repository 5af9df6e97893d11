//! What every concern of the Raft loop works with: raft-rs's node over the store, the
//! layers around it (the replica, the connections, the peers, the clock), this member's
//! place in the group, who it believes leads, and how far it has applied.
//!
//! The driver (`driver.rs`) owns one [`Group`] beside each concern's own state (leader
//! duties in `leader.rs`, membership work in `membership.rs`, recovery in `recovery.rs`,
//! the snapshot schedule, transfers, ...) and hands the group to a concern with the call.
//! So each concern's fields have one owner and one file, and no concern file uses the
//! driver or another concern's internals: what two concerns share lives here, and what one
//! concern needs of another it is given as an argument.

use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use raft::eraftpb::{Message, MessageType};
use raft::{RawNode, ReadOnlyOption, StateRole};

use super::clock::Clock;
use super::connections::Connections;
use super::replica::Replica;
use super::storage::RaftStorage;
use super::test_hooks::TestHooks;
use super::timing::{election_timeout, ELECTION_TICKS, HEARTBEAT_TICKS};
use super::transport::Peers;

/// This member's place in the group.
pub(super) struct Member {
    pub me: u64,
    /// A one-voter group: campaigns at once, never talks to peers.
    pub standalone: bool,
    /// A learner: never campaigns, never votes (changes when a conf change names it).
    pub observer: bool,
}

/// Who leads, as this member last learned it from a `Ready`.
pub(super) struct Leadership {
    /// The leader's id; 0 while unknown.
    pub leader: u64,
    /// The role the last `Ready` reported. Becoming leader re-arms every session deadline
    /// at the same moment this changes; see [`Group::leads`].
    pub role: StateRole,
    /// When the leader was last heard from (an observer never campaigns, so this is what
    /// tells it the leader is gone).
    pub last_contact: Instant,
}

/// How far the state machine has applied the log.
pub(super) struct Applied {
    pub index: u64,
    pub term: u64,
}

/// See the module docs.
pub(super) struct Group {
    /// raft-rs's node, over the same RocksDB store as `storage`.
    pub node: RawNode<RaftStorage>,
    pub storage: RaftStorage,
    /// The state, status and inbox shared with the layers above.
    pub replica: Arc<Replica>,
    /// The connections of this member: the only way to them.
    pub connections: Arc<dyn Connections>,
    /// The other members (none when standalone).
    pub peers: Option<Arc<dyn Peers>>,
    pub clock: Arc<dyn Clock>,
    pub member: Member,
    pub leadership: Leadership,
    pub applied: Applied,
    /// One Raft tick (`raftTickMs`; raft-rs elects after `ELECTION_TICKS` of them), fixed
    /// while the member runs.
    pub tick: Duration,
    /// Test-only holds and faults (inert but with feature `test-hooks` and the variable).
    pub hooks: TestHooks,
}

impl Group {
    /// Builds raft-rs's node over `storage`, whose snapshot (if any) the replica's state was
    /// loaded from, and the test hooks from the environment (wrapping the peers).
    pub fn new(
        replica: Arc<Replica>,
        connections: Arc<dyn Connections>,
        storage: RaftStorage,
        peers: Option<Arc<dyn Peers>>,
        clock: Arc<dyn Clock>,
    ) -> Result<Group, raft::Error> {
        let me = replica.me;
        let snap = storage.snapshot_metadata();
        let config = raft::Config {
            id: me,
            election_tick: ELECTION_TICKS,
            heartbeat_tick: HEARTBEAT_TICKS,
            applied: snap.index,
            max_size_per_msg: 8 * 1024 * 1024,
            max_inflight_msgs: 512,
            check_quorum: true,
            pre_vote: true,
            read_only_option: ReadOnlyOption::Safe,
            max_uncommitted_size: 1 << 30,
            ..Default::default()
        };
        config.validate()?;
        let logger = super::slog_bridge::logger(me);
        let node = RawNode::new(&config, storage.clone(), &logger)?;
        // Raft's own view: a reconfig may have made this member one (or not) since zoo.cfg.
        let observer = node.raft.prs().conf().learners().contains(&me);
        let settings = replica.config();
        let hooks = TestHooks::from_env(&settings.data_dir);
        let peers = hooks.wrap(peers);
        let now = clock.now();
        Ok(Group {
            node,
            storage,
            member: Member {
                me,
                standalone: settings.is_standalone(),
                observer,
            },
            leadership: Leadership {
                leader: 0,
                role: StateRole::Follower,
                last_contact: now,
            },
            applied: Applied {
                index: snap.index,
                term: snap.term,
            },
            tick: settings.raft_tick,
            hooks,
            replica,
            connections,
            peers,
            clock,
        })
    }

    /// Whether this member leads, as far as deciding anything goes (expiring a session,
    /// proposing a cleanup). Both must hold:
    /// - raft-rs's own role: a message stepped in this turn may have deposed us before the
    ///   next `Ready` updates `leadership.role` (a leader paused past its term would
    ///   otherwise expire sessions that were alive on the other members);
    /// - `leadership.role`: it turns to leader together with the re-arming of every session
    ///   deadline, when the `Ready` reports our election. Until then this member's
    ///   deadlines are a follower's, never touched, long stale.
    pub fn leads(&self) -> bool {
        self.leadership.role == StateRole::Leader && self.node.raft.state == StateRole::Leader
    }

    /// Whether the leader is handing over (raft-rs drops proposals meanwhile).
    pub fn transferring(&self) -> bool {
        self.node.raft.state == StateRole::Leader && self.node.raft.lead_transferee.is_some()
    }

    /// The election timeout at this member's tick.
    pub fn election_timeout(&self) -> Duration {
        election_timeout(self.tick)
    }

    /// The index of the last entry in this member's log.
    pub fn last_index(&self) -> u64 {
        self.node.raft.raft_log.last_index()
    }

    /// The voters of this member's configuration (both sides of a joint one).
    pub fn voter_ids(&self) -> Vec<u64> {
        let cs = self.node.raft.prs().conf().to_conf_state();
        let mut v = cs.voters;
        v.extend(cs.voters_outgoing);
        v.sort_unstable();
        v.dedup();
        v
    }

    /// Sends raft-rs's messages to the peers (nothing when standalone).
    pub fn send(&self, msgs: Vec<Message>) {
        let Some(peers) = &self.peers else { return };
        for m in msgs {
            if m.get_msg_type() == MessageType::MsgSnapshot {
                self.replica
                    .counters
                    .snapshot_syncs
                    .fetch_add(1, Ordering::Relaxed);
            }
            peers.send_raft(&m);
        }
    }

    /// The leader's view of its followers, for `mntr`.
    pub fn publish_followers(&self) {
        let raft = &self.node.raft;
        let mut followers = 0;
        let mut synced = 0;
        let mut observers = 0;
        let last = raft.raft_log.last_index();
        let learners: HashSet<u64> = raft.prs().conf().learners().iter().copied().collect();
        for (id, pr) in raft.prs().iter() {
            if *id == self.member.me {
                continue;
            }
            if learners.contains(id) {
                observers += 1;
                continue;
            }
            if pr.recent_active {
                followers += 1;
                if pr.matched + 64 >= last {
                    synced += 1;
                }
            }
        }
        let status = &self.replica.status;
        status.followers.store(followers, Ordering::Relaxed);
        status.synced_followers.store(synced, Ordering::Relaxed);
        status.observers.store(observers, Ordering::Relaxed);
    }
}
