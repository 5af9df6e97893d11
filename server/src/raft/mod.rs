//! The Raft layer: orders every write with raft-rs and keeps the log durable in RocksDB.
//!
//! One OS thread owns raft-rs's `RawNode` ([`driver`]); everything reaches it through its
//! inbox ([`input`]), and it reaches the connections of this member only through
//! [`Connections`], which the network layer implements. Around it:
//!
//! | file | concern |
//! |------|---------|
//! | `input.rs` | the messages into the Raft thread |
//! | `replica.rs`, `status.rs` | what the thread shares with the layers above |
//! | `changes.rs` | the leader and membership changes it saw, for the console's timeline |
//! | `metrics.rs` | what it measures for `mntr`: fsyncs, elections, proposals, start-up |
//! | `connections.rs` | the interface to this member's connections |
//! | `driver.rs` | the loop: inputs, timers, the Ready cycle and its ordering contract; owns every concern's state |
//! | `group.rs` | what every concern works with: raft-rs's node, the store, the layers around it, the leader |
//! | `batching.rs` | a turn's commands proposed as one entry, or forwarded to the leader |
//! | `apply.rs` | applying committed entries and snapshots from the leader |
//! | `leader.rs` | session expiry and cleanup, decided by the leader |
//! | `liveness.rs` | a leader whose connection closed is treated as gone at once |
//! | `proposed.rs` | commands gathered for the log; own batches applied without decoding |
//! | `read_index.rs` | `sync` through Raft's ReadIndex |
//! | `publish.rs` | the status published after each round: indexes, role, serving |
//! | `serving.rs` | when this member serves clients |
//! | `snapshot_schedule.rs`, `snapshot_worker.rs` | when to snapshot; the thread that writes one |
//! | `log_writer.rs` | the thread that fsyncs the log (group commit), and the Raft thread's side of it |
//! | `storage/` | raft-rs's `Storage` over RocksDB: log, hard and conf state, snapshots |
//! | `dynamic_file.rs` | `zoo.cfg.dynamic.<version>` and `dynamicConfigFile` |
//! | `membership.rs` | reconfig: Raft's membership follows `/zookeeper/config` |
//! | `transfer.rs` | leader transfer (rolling restarts, `ydld`/`rqld`) |
//! | `trust.rs` | members whose data directory forgot what they acknowledged: kept out of quorums, caught up, promoted |
//! | `recovery.rs` | the Raft loop's side of `trust.rs`: screening, announcing, demote / catch up / promote |
//! | `test_hooks.rs` | test-only holds in a membership change (feature `test-hooks`, `ZOORAFT_TEST_HOOKS=1`) |
//! | `transport.rs` | member-to-member TCP |
//! | `transport_in.rs` | what arrives from the peers (their connections, and what they send back on ours) |
//! | `transport_out.rs` | the sender to one peer: its dialled connection, or the way back |
//! | `transport_routes.rs` | the ways back to each peer, and which connections with it are up |
//! | `transport_tls.rs` | TLS between members (`sslQuorum`, `ssl.quorum.*`) |
//! | `transport_wire.rs` | the member-to-member frames and hello |
//! | `expiry.rs` | session deadlines |
//! | `clock.rs`, `timing.rs`, `slog_bridge.rs` | clocks; tick counts and the election timeout; raft-rs's logs into `tracing` |

mod apply;
mod batching;
mod changes;
mod clock;
mod connections;
mod disk_space;
mod driver;
mod dynamic_file;
mod expiry;
mod group;
mod input;
mod joiners;
mod leader;
mod liveness;
mod log_writer;
mod membership;
mod metrics;
mod proposed;
mod publish;
mod read_index;
mod recovery;
mod replica;
mod restores;
mod scrub;
mod serving;
mod slog_bridge;
mod snapshot_schedule;
mod snapshot_worker;
mod status;
mod storage;
mod test_hooks;
mod timing;
mod transfer;
mod transport;
mod transport_in;
mod transport_out;
mod transport_routes;
mod transport_tls;
mod transport_wire;
mod trust;
mod ttl_clock;

#[cfg(test)]
mod sim;

use std::sync::mpsc::Receiver;
use std::sync::Arc;
use std::thread::JoinHandle;

use raft::eraftpb::ConfState;

pub use changes::{Change, Seen};
pub use connections::{ApplyRound, Connections};
pub use input::{Input, PeerIdentity, SyncWaiter, Takeover, Transfer};
pub use membership::initial_config;
pub use metrics::RaftCounters;
pub use replica::Replica;
pub use restores::RestoreError;
pub use status::{Migration, Role};
pub use storage::{Identity, RaftStorage};
pub use transfer::{ask as ask_transfer, Asked};
pub use transport::{Peers, Transport};
pub use transport_tls::QuorumTls;

use crate::config::Config;
use crate::critical;
use driver::{Consensus, Parts, Workers};

/// Why the Raft thread could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("raft: {0}")]
    Raft(#[from] raft::Error),
    #[error("cannot start a thread: {0}")]
    Thread(#[from] std::io::Error),
}

/// Starts the log writer, the snapshot worker, the scrub and the Raft thread over `storage`, whose
/// snapshot (if any) the replica's state was loaded from.
pub fn start(
    replica: Arc<Replica>,
    connections: Arc<dyn Connections>,
    storage: RaftStorage,
    inbox: Receiver<Input>,
    takeover: Option<Takeover>,
    peers: Option<Arc<dyn Peers>>,
) -> Result<JoinHandle<()>, StartError> {
    let workers = spawn_workers(&storage, peers.clone(), &replica)?;
    let consensus = Consensus::new(Parts {
        replica,
        connections,
        storage,
        inbox,
        peers,
        clock: Arc::new(clock::SystemClock),
        workers,
    })?;
    Ok(critical::spawn("raft", move || consensus.run(takeover))?)
}

fn spawn_workers(
    storage: &RaftStorage,
    peers: Option<Arc<dyn Peers>>,
    replica: &Arc<Replica>,
) -> std::io::Result<Workers> {
    let (log_writer, log_jobs) = std::sync::mpsc::channel();
    let writer = {
        let (storage, replica) = (storage.clone(), replica.clone());
        critical::spawn("log-writer", move || {
            log_writer::run(log_jobs, storage, peers, replica)
        })?
    };
    let (snapshots, snapshot_jobs) = std::sync::mpsc::channel();
    let mut threads = vec![writer];
    let (store, rep) = (storage.clone(), replica.clone());
    match critical::spawn("snapshot", move || {
        snapshot_worker::run(snapshot_jobs, store, rep)
    }) {
        Ok(t) => threads.push(t),
        // Without the worker snapshots are never taken; the log just keeps growing.
        Err(e) => tracing::error!("cannot start the snapshot thread: {e}"),
    }
    let (scrub, scrub_stop) = std::sync::mpsc::channel();
    let every = replica.config().scrub_interval;
    if !every.is_zero() {
        let (storage, replica) = (storage.clone(), replica.clone());
        match critical::spawn("scrub", move || {
            scrub::run(scrub_stop, storage, replica, every)
        }) {
            Ok(t) => threads.push(t),
            // Damage is then found when the data is next read, as without a scrub.
            Err(e) => tracing::error!("cannot start the scrub thread: {e}"),
        }
    }
    Ok(Workers {
        log_writer,
        snapshots,
        scrub,
        threads,
    })
}

/// Why the peer transport could not start.
#[derive(Debug, thiserror::Error)]
pub enum TransportError {
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    #[error("this member (myid {0}) has no server line")]
    NoLine(u64),
    #[error("quorum TLS (sslQuorum): {0}")]
    Tls(#[from] crate::tls::TlsError),
    #[error("cannot listen for peers on {0}: {1}")]
    Listen(std::net::SocketAddr, std::io::Error),
}

/// Starts the transport to the peers of `config`'s server lines, saying what `storage`
/// holds (`None` for a standalone server).
pub async fn start_transport(
    config: &Config,
    storage: &RaftStorage,
    inbox: std::sync::mpsc::Sender<Input>,
) -> Result<Option<Transport>, TransportError> {
    if config.is_standalone() {
        return Ok(None);
    }
    let me = config.my_id;
    let mut peers = std::collections::HashMap::new();
    let mut listen = None;
    for m in config.members.values() {
        let addr = m.peer_addr()?;
        if m.id == me {
            listen = Some(addr);
        } else {
            peers.insert(m.id, addr);
        }
    }
    let listen = listen.ok_or(TransportError::NoLine(me))?;
    let tls = QuorumTls::from_config(config)?;
    let identity = storage.identity();
    let said = PeerIdentity {
        incarnation: identity.incarnation,
        trusted: identity.trusted,
        seed: identity.seed,
        last_index: ::raft::Storage::last_index(storage).unwrap_or(0),
    };
    if !identity.trusted {
        tracing::warn!(
            member = me,
            incarnation = format!("{:016x}", identity.incarnation),
            "this data directory is new: unless the other members are as new (a new \
             ensemble), this member does not vote or serve until a leader has caught \
             it up (it may be a wiped member that forgot what it acknowledged)"
        );
    }
    Transport::start(me, listen, peers, inbox, tls, said)
        .await
        .map(Some)
        .map_err(|e| TransportError::Listen(listen, e))
}

/// The initial membership for a new data directory: voters and observers (learners).
pub fn initial_membership(config: &Config) -> ConfState {
    let mut cs = ConfState::default();
    if config.members.is_empty() {
        cs.voters = vec![config.my_id];
    } else {
        for m in config.members.values() {
            if m.observer {
                cs.learners.push(m.id);
            } else {
                cs.voters.push(m.id);
            }
        }
    }
    cs
}

/// Whether a stored membership is the configured one: the same voters and observers,
/// except that a configured voter may be a learner while it recovers from a lost data
/// directory (`trust.rs` demotes it until it has caught up).
pub fn same_membership(stored: &ConfState, configured: &ConfState) -> bool {
    let sorted = |v: &[u64]| {
        let mut v = v.to_vec();
        v.sort_unstable();
        v
    };
    let recovering: Vec<u64> = stored
        .learners
        .iter()
        .copied()
        .filter(|id| configured.voters.contains(id))
        .collect();
    let mut voters = stored.voters.clone();
    voters.extend(&recovering);
    let learners: Vec<u64> = stored
        .learners
        .iter()
        .copied()
        .filter(|id| !recovering.contains(id))
        .collect();
    sorted(&voters) == sorted(&configured.voters)
        && sorted(&learners) == sorted(&configured.learners)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conf(voters: &[u64], learners: &[u64]) -> ConfState {
        ConfState {
            voters: voters.to_vec(),
            learners: learners.to_vec(),
            ..Default::default()
        }
    }

    #[test]
    fn a_stored_membership_matches_the_configured_one_but_for_recovering_voters() {
        let configured = conf(&[1, 2, 3], &[4]);
        assert!(same_membership(&conf(&[3, 1, 2], &[4]), &configured));
        // Member 2 recovers from a lost data directory as a learner.
        assert!(same_membership(&conf(&[1, 3], &[2, 4]), &configured));
        assert!(
            !same_membership(&conf(&[1, 3], &[4]), &configured),
            "2 is gone"
        );
        assert!(!same_membership(&conf(&[1, 2, 3, 4], &[]), &configured));
        assert!(!same_membership(&conf(&[1, 2, 3], &[4, 5]), &configured));
    }
}
