//! One gathered view of the member: the figures `srvr` and `stat` print and the catalogue
//! (`mntr`, Prometheus) starts from, read once from the replica, the network layer and the
//! process, so every report agrees on what a figure means and where it comes from.

use std::sync::atomic::Ordering;

use crate::net::ClientPort;
use crate::raft::Role;

/// See the module docs.
pub struct View {
    pub role: Role,
    /// What `srvr` prints after `Mode:` (`read-only` in read-only mode, as ZooKeeper).
    pub mode: &'static str,
    pub serving: bool,
    /// Request latency min/avg/max in milliseconds, as ZooKeeper reports it.
    pub latency_ms: (u64, f64, u64),
    pub packets_received: u64,
    pub packets_sent: u64,
    pub connections: usize,
    /// Requests received and not answered yet, over every connection.
    pub outstanding: u64,
    pub znodes: usize,
    pub ephemerals: usize,
    pub approximate_data_size: u64,
    pub sessions: usize,
    /// Data and child watches of this member's connections.
    pub watches: usize,
    pub uptime_ms: u128,
    pub last_zxid: i64,
    pub raft_term: u64,
    pub commit_index: u64,
    pub applied_index: u64,
    pub leader_id: u64,
    /// The leader's view of its followers (zero elsewhere).
    pub followers: u64,
    pub synced_followers: u64,
    pub observers: u64,
    /// The data directory is below its free-space reserve (`raft/disk_space.rs`).
    pub disk_full: bool,
    pub disk_free_bytes: u64,
    /// This member's data directory holds all it acknowledged (`raft/trust.rs`).
    pub data_trusted: bool,
    /// Peers this member knows to have untrusted data directories.
    pub untrusted_peers: u64,
}

impl View {
    /// Reads every figure now.
    pub fn gather(shared: &ClientPort) -> View {
        let replica = &shared.replica;
        let status = &replica.status;
        let m = &shared.metrics;
        let (znodes, ephemerals, approximate_data_size, sessions) = {
            let state = replica.state.read();
            (
                state.tree.node_count(),
                state.tree.ephemeral_count(),
                state.tree.approximate_data_size(),
                state.sessions.len(),
            )
        };
        let mut outstanding = 0;
        shared
            .registry
            .for_each(|_, e| outstanding += e.stats.outstanding.load(Ordering::Relaxed));
        let load = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
        View {
            role: status.role(),
            mode: if replica.is_read_only() {
                "read-only"
            } else {
                status.role().name()
            },
            serving: replica.is_serving(),
            latency_ms: m.latency_ms(),
            packets_received: load(&m.packets_received),
            packets_sent: load(&m.packets_sent),
            connections: shared.registry.len(),
            outstanding,
            znodes,
            ephemerals,
            approximate_data_size,
            sessions,
            watches: shared.watches.lock().watch_count(),
            uptime_ms: m.started.elapsed().as_millis(),
            last_zxid: replica.last_zxid(),
            raft_term: load(&status.term),
            commit_index: load(&status.commit_index),
            applied_index: load(&status.applied_index),
            leader_id: load(&status.leader),
            followers: load(&status.followers),
            synced_followers: load(&status.synced_followers),
            observers: load(&status.observers),
            disk_full: status.disk_full.load(Ordering::Acquire),
            disk_free_bytes: load(&status.disk_free_bytes),
            data_trusted: status.data_trusted.load(Ordering::Relaxed),
            untrusted_peers: load(&status.untrusted_peers),
        }
    }
}
