//! Every figure `mntr` and the Prometheus endpoint report, listed once: ZooKeeper 3.8's key
//! (so exporters, dashboards and alerts written for ZooKeeper read zooraft unchanged), its
//! kind, and where its value comes from here. `mntr` prints each as `zk_<key>` (a summary
//! as `zk_avg_<key>`, `zk_min_`, `zk_max_`, `zk_cnt_`, `zk_sum_`, and `zk_p50_` ... `zk_p999_`
//! when it keeps percentiles); Prometheus as `<key>` (a summary with `_sum`, `_count` and
//! `quantile` labels). Keys of ZooKeeper that measure something zooraft does not have (JVM,
//! its request-processor queues, throttling, response caches) are not invented here; the
//! book lists them and why (docs/src/differences.md).
//!
//! Units are ZooKeeper's: times in milliseconds, sizes in bytes.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

use super::view::View;
use crate::net::{AuthFailure, ClientPort};
use crate::raft::Role;
use crate::stats::{Summary, SummaryView};

/// How Prometheus types a plain figure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Gauge,
    Counter,
}

/// A figure's value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// Text (`mntr` only).
    Text(String),
    Int(i64, Kind),
    /// A float printed as Java prints a double (`zk_avg_latency`).
    Float(f64),
    /// A zxid: hexadecimal in `mntr`, a number for Prometheus.
    Zxid(i64),
    Summary(SummaryView),
}

/// One figure: ZooKeeper's key without its `zk_` prefix, and its value.
#[derive(Debug, Clone, PartialEq)]
pub struct Figure {
    pub key: &'static str,
    pub help: &'static str,
    pub value: Value,
}

fn gauge(key: &'static str, help: &'static str, v: impl TryInto<i64>) -> Figure {
    let v = v.try_into().unwrap_or(i64::MAX);
    Figure {
        key,
        help,
        value: Value::Int(v, Kind::Gauge),
    }
}

fn counter(key: &'static str, help: &'static str, v: &AtomicU64) -> Figure {
    let v = v.load(Ordering::Relaxed).try_into().unwrap_or(i64::MAX);
    Figure {
        key,
        help,
        value: Value::Int(v, Kind::Counter),
    }
}

/// A gauge kept in an unsigned atomic.
fn counter_gauge(key: &'static str, help: &'static str, v: &AtomicU64) -> Figure {
    gauge(key, help, v.load(Ordering::Relaxed))
}

fn signed(key: &'static str, help: &'static str, v: &AtomicI64) -> Figure {
    gauge(key, help, v.load(Ordering::Relaxed))
}

fn summary(key: &'static str, help: &'static str, s: &Summary) -> Figure {
    Figure {
        key,
        help,
        value: Value::Summary(s.view()),
    }
}

fn text(key: &'static str, help: &'static str, v: impl Into<String>) -> Figure {
    Figure {
        key,
        help,
        value: Value::Text(v.into()),
    }
}

/// Reads every figure now, in `mntr`'s order.
pub fn gather(shared: &ClientPort, version: &str) -> Vec<Figure> {
    let v = View::gather(shared);
    let m = &shared.metrics;
    let t = &m.traffic;
    let r = &shared.replica.counters;
    let config = shared.replica.config();
    let security_on = |k: &str| config.security.get(k).is_some_and(|v| v.trim() == "true");
    let (min, avg, max) = v.latency_ms;
    let mut f =
        vec![
        text("version", "Server version", version),
        text(
            "server_state",
            "standalone, leader, follower, observer, read-only or looking",
            v.mode,
        ),
        gauge("ephemerals_count", "Ephemeral znodes", v.ephemerals),
        gauge(
            "num_alive_connections",
            "Client connections on this member",
            v.connections,
        ),
        Figure {
            key: "avg_latency",
            help: "Average request latency, milliseconds",
            value: Value::Float(avg),
        },
        gauge(
            "outstanding_requests",
            "Requests received and not answered yet",
            v.outstanding,
        ),
        gauge("znode_count", "Znodes", v.znodes),
        gauge("global_sessions", "Live sessions", v.sessions),
        signed(
            "last_client_response_size",
            "Bytes of the last frame sent to a client",
            &t.last_size,
        ),
        counter(
            "packets_sent",
            "Replies and notifications sent",
            &m.packets_sent,
        ),
        counter("packets_received", "Requests received", &m.packets_received),
        signed(
            "max_client_response_size",
            "Bytes of the largest frame sent to a client",
            &t.max_size,
        ),
        gauge(
            "watch_count",
            "Watches set by this member's clients",
            v.watches,
        ),
        counter(
            "auth_failed_count",
            "Authentications refused (certificate, SASL, enforced auth)",
            &m.auth_failed,
        ),
        counter(
            "auth_failed_count_x509",
            "Of auth_failed_count: client certificates and TLS handshakes refused (zooraft)",
            &m.auth_failed_by[AuthFailure::X509 as usize],
        ),
        counter(
            "auth_failed_count_sasl",
            "Of auth_failed_count: SASL exchanges failed, DIGEST-MD5 or GSSAPI (zooraft)",
            &m.auth_failed_by[AuthFailure::Sasl as usize],
        ),
        counter(
            "auth_failed_count_enforced",
            "Of auth_failed_count: requests refused by enforced authentication (zooraft)",
            &m.auth_failed_by[AuthFailure::Enforced as usize],
        ),
        counter(
            "tls_handshake_failed_count",
            "TLS handshakes refused on the client port",
            &m.tls_handshake_failed,
        ),
        gauge("min_latency", "Smallest request latency, milliseconds", min),
        gauge("max_file_descriptor_count", "Open file limit", super::environment::max_fds()),
        gauge(
            "approximate_data_size",
            "Bytes of paths and data",
            v.approximate_data_size,
        ),
        gauge("open_file_descriptor_count", "Open files", super::environment::open_fds()),
        gauge(
            "local_sessions",
            "Local sessions (zooraft has none: every session is global)",
            0,
        ),
        gauge("uptime", "Milliseconds since start", v.uptime_ms),
        gauge("max_latency", "Largest request latency, milliseconds", max),
        signed(
            "min_client_response_size",
            "Bytes of the smallest frame sent to a client",
            &t.min_size,
        ),
        counter(
            "proposal_count",
            "Commands this member proposed to Raft as leader",
            &r.proposals,
        ),
        counter(
            "watch_bytes",
            "Bytes of watch notifications sent",
            &t.watch_bytes,
        ),
        counter(
            "connection_rejected",
            "Connections refused by maxClientCnxns",
            &m.connection_rejected,
        ),
        counter(
            "cnxn_closed_without_zk_server_running",
            "Connections closed or refused while this member did not serve (no leader or quorum)",
            &m.closed_not_serving,
        ),
        counter(
            "looking_count",
            "Times this member lost its leader and looked for one",
            &r.looking,
        ),
        counter(
            "bytes_received_count",
            "Bytes of requests received",
            &m.bytes_received,
        ),
        counter(
            "learner_proposal_received_count",
            "Entries received from the leader",
            &r.learner_proposals,
        ),
        counter(
            "learner_commit_received_count",
            "Entries committed and applied as a follower or observer",
            &r.learner_commits,
        ),
        counter(
            "connection_request_count",
            "Handshakes received",
            &m.connection_requests,
        ),
        counter("response_bytes", "Bytes sent to clients", &t.response_bytes),
        counter(
            "snap_count",
            "Snapshots the leader sent to members behind its log",
            &r.snapshot_syncs,
        ),
        counter(
            "unsuccessful_handshake",
            "Handshakes refused",
            &m.unsuccessful_handshakes,
        ),
        counter("commit_count", "Entries committed and applied", &r.commits),
        counter(
            "stale_sessions_expired",
            "Sessions expired by this member as leader",
            &r.sessions_expired,
        ),
    ];
    let w = shared.watches.lock();
    let fired = &w.fired;
    f.extend([
        summary(
            "node_created_watch_count",
            "Watches fired per node-created event",
            &fired.created,
        ),
        summary(
            "node_deleted_watch_count",
            "Watches fired per node-deleted event",
            &fired.deleted,
        ),
        summary(
            "node_changed_watch_count",
            "Watches fired per data-changed event",
            &fired.changed,
        ),
        summary(
            "node_children_watch_count",
            "Watches fired per children-changed event",
            &fired.children,
        ),
    ]);
    drop(w);
    f.extend([
        summary(
            "leader_unavailable_time",
            "Milliseconds unavailable before serving as the new leader",
            &r.leader_unavailable_time,
        ),
        summary(
            "unavailable_time",
            "Milliseconds not serving clients, per episode",
            &r.unavailable_time,
        ),
        summary(
            "startup_txns_load_time",
            "Milliseconds replaying the log at start",
            &r.txns_load_time,
        ),
        summary(
            "startup_txns_loaded",
            "Log entries replayed at start",
            &r.txns_loaded,
        ),
        Figure {
            key: "fsynctime",
            help: "Milliseconds per log write with fsync",
            value: Value::Summary(r.fsync_time.view_basic()),
        },
        summary(
            "snapshottime",
            "Milliseconds to capture and write a snapshot",
            &r.snapshot_time,
        ),
        summary(
            "dbinittime",
            "Milliseconds loading the snapshot and replaying the log at start",
            &r.db_init_time,
        ),
        summary(
            "election_time",
            "Milliseconds from losing a leader to knowing the next",
            &r.election_time,
        ),
        summary(
            "sync_processor_batch_size",
            "Raft ready rounds written per fsync",
            &r.fsync_batch,
        ),
        summary(
            "startup_snap_load_time",
            "Milliseconds loading the snapshot at start",
            &r.snap_load_time,
        ),
        summary(
            "updatelatency",
            "Milliseconds per write request, received to answered",
            &m.update_latency,
        ),
        summary(
            "readlatency",
            "Milliseconds per read request, received to answered",
            &m.read_latency,
        ),
        summary(
            "quorum_ack_latency",
            "Leader: milliseconds from proposing an entry to its commit",
            &r.quorum_ack_latency,
        ),
        summary(
            "proposal_latency",
            "Leader: milliseconds from proposing an entry to applying it",
            &r.proposal_latency,
        ),
    ]);
    // zooraft's own figures: the Raft state behind the ZooKeeper ones.
    f.extend([
        Figure {
            key: "last_zxid",
            help: "Last applied zxid",
            value: Value::Zxid(v.last_zxid),
        },
        gauge("raft_term", "Current Raft term", v.raft_term),
        gauge("raft_commit_index", "Raft commit index", v.commit_index),
        gauge(
            "raft_applied_index",
            "Raft index applied to the tree",
            v.applied_index,
        ),
        gauge(
            "raft_leader_id",
            "Member id of the leader (0: none known)",
            v.leader_id,
        ),
        counter(
            "raft_batches",
            "Raft entries proposed (batches of commands)",
            &r.batches,
        ),
        // Counts of the fsync and snapshot summaries, under the names zooraft had first.
        Figure {
            key: "raft_fsyncs",
            help: "Log fsyncs",
            value: Value::Int(r.fsync_time.view().count as i64, Kind::Counter),
        },
        Figure {
            key: "snapshot_count",
            help: "Snapshots taken",
            value: Value::Int(r.snapshot_time.view().count as i64, Kind::Counter),
        },
        gauge(
            "serving",
            "1 if this member serves clients",
            v.serving as u8,
        ),
        gauge(
            "disk_full",
            "1 while the data directory is below its free-space reserve (no log writes)",
            v.disk_full as u8,
        ),
        gauge(
            "disk_free_bytes",
            "Free bytes in the data directory at the last check",
            v.disk_free_bytes,
        ),
        gauge(
            "disk_reserve_bytes",
            "Free bytes the data directory keeps in reserve (below them, no log writes)",
            config.disk_reserve_bytes,
        ),
        gauge(
            "tls_quorum",
            "1 if member-to-member traffic is TLS (sslQuorum)",
            security_on("sslQuorum") as u8,
        ),
        gauge(
            "tls_client_port",
            "1 if a TLS client port is configured (secureClientPort)",
            config.security.contains_key("secureClientPort") as u8,
        ),
        gauge(
            "tls_admin",
            "1 if the AdminServer speaks TLS (admin.forceHttps or admin.portUnification)",
            config.admin.tls() as u8,
        ),
        gauge(
            "admin_port",
            "The AdminServer's port (its console is under /console/); 0 when it is off",
            if config.admin.enabled { config.admin.port() } else { 0 },
        ),
        text(
            "admin_address",
            "The address the AdminServer listens on",
            config.admin.address.to_string(),
        ),
        gauge(
            "data_trusted",
            "1 if this member's data directory holds all it acknowledged; 0 while a new, wiped \
             or rolled-back one is caught up (it neither votes nor serves meanwhile)",
            v.data_trusted as u8,
        ),
        gauge(
            "untrusted_peers",
            "Peers whose data directories are new, wiped or rolled back (they count toward no \
             quorum until caught up)",
            v.untrusted_peers,
        ),
        gauge(
            "resident_memory_bytes",
            "Memory the process holds (resident set)",
            super::environment::proc_number("/proc/self/status", "VmRSS:", 0).unwrap_or(0) * 1024,
        ),
        counter_gauge(
            "rocksdb_memtable_bytes",
            "RocksDB memtables",
            &r.store_memtables,
        ),
        counter_gauge(
            "rocksdb_table_readers_bytes",
            "RocksDB index and filter blocks of open files",
            &r.store_table_readers,
        ),
        counter(
            "snapshot_repairs",
            "Stored snapshot files found damaged and written afresh from the tree",
            &r.snapshot_repairs,
        ),
        counter(
            "store_scrubs",
            "Scrubs completed: every table of the store and the snapshot file read back and checked",
            &r.scrubs,
        ),
        counter_gauge(
            "last_scrub_bytes",
            "Bytes the last scrub read back",
            &r.scrub_last_bytes,
        ),
        counter_gauge(
            "last_snapshot_bytes",
            "Size of the last snapshot taken",
            &r.snapshot_last_bytes,
        ),
        counter_gauge(
            "last_snapshot_ms",
            "Milliseconds to capture and write the last snapshot",
            &r.snapshot_last_ms,
        ),
        counter_gauge(
            "last_snapshot_peak_extra_bytes",
            "Peak resident memory above the level before the last snapshot, while it was written",
            &r.snapshot_last_peak_extra_bytes,
        ),
    ]);
    let migration = &shared.replica.status.migration;
    let phase = migration.phase_name();
    if !phase.is_empty() {
        let load = |a: &std::sync::atomic::AtomicU64| a.load(std::sync::atomic::Ordering::Relaxed);
        f.extend([
            text(
                "migration_phase",
                "Live migration from ZooKeeper: syncing, following, prepared (writes held for \
                 the cut-over) or cut over",
                phase,
            ),
            gauge(
                "migration_lag",
                "Transactions the ZooKeeper leader had proposed beyond this member, at its last ping",
                load(&migration.lag),
            ),
            gauge(
                "migration_pending",
                "Writes forwarded to the ZooKeeper leader and not answered yet",
                load(&migration.pending),
            ),
            gauge(
                "migration_held",
                "Writes held during the cut-over",
                load(&migration.held),
            ),
            text(
                "migration_cutover_zxid",
                "The last ZooKeeper zxid, once cut over",
                format!(
                    "0x{:x}",
                    migration.cutover_zxid.load(std::sync::atomic::Ordering::Relaxed)
                ),
            ),
        ]);
    }
    let in_quorum = v.role != Role::Standalone;
    if in_quorum {
        let state = match v.role {
            Role::Leader => "leading - broadcast",
            Role::Follower => "following - broadcast",
            Role::Observer => "observing - broadcast",
            _ => "looking",
        };
        f.push(text("peer_state", "Quorum role and phase", state));
        let voters = shared
            .replica
            .config()
            .members
            .values()
            .filter(|m| !m.observer)
            .count();
        f.push(gauge("quorum_size", "Voting members", voters));
    }
    if v.role == Role::Leader {
        f.extend([
            gauge(
                "learners",
                "Followers and observers connected",
                v.followers + v.observers,
            ),
            gauge(
                "synced_followers",
                "Followers caught up with the log",
                v.synced_followers,
            ),
            gauge(
                "synced_non_voting_followers",
                "Non-voting followers caught up",
                0,
            ),
            gauge(
                "synced_observers",
                "Observers caught up with the log",
                v.observers,
            ),
            gauge(
                "followers",
                "Followers connected (ZooKeeper before 3.6)",
                v.followers,
            ),
            gauge(
                "leader_uptime",
                "Milliseconds since this member became leader",
                super::environment::leader_uptime_ms(r),
            ),
            signed(
                "last_proposal_size",
                "Bytes of the last proposal",
                &r.proposal_size_last,
            ),
            signed(
                "max_proposal_size",
                "Bytes of the largest proposal",
                &r.proposal_size_max,
            ),
            signed(
                "min_proposal_size",
                "Bytes of the smallest proposal",
                &r.proposal_size_min,
            ),
        ]);
    }
    f
}
