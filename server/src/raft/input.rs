//! The messages into the Raft thread, in one module of their own so that whoever talks to
//! the driver (connections, the peer transport, the log writer, the snapshot worker)
//! imports these types and never the driver itself.

use std::time::Duration;

use raft::eraftpb::{ConfState, Message};

use crate::state::command::{Command, ConnId};

/// Everything the Raft thread can be told.
pub enum Input {
    /// A command from a local connection.
    Command(Command),
    /// Commands of one connection, in arrival order (one read's worth), and their
    /// encoding (`Command::encode`, one after the other).
    Commands(Vec<Command>, bytes::Bytes),
    /// Commands a follower forwarded to us as leader.
    Forwarded(Vec<Command>),
    /// A `sync` or a read barrier (Raft's ReadIndex): the waiter is told once this member
    /// has applied everything the leader had committed when it was asked.
    ReadIndex(SyncWaiter),
    /// A Raft message from a peer.
    Raft(Box<Message>),
    /// Sessions a follower saw traffic on (the leader owns the deadlines).
    Touch(Vec<i64>),
    /// The transport delivered (or failed to deliver) a snapshot to a peer.
    SnapshotStatus { to: u64, ok: bool },
    /// The snapshot worker stored a snapshot durably (`None`: it failed to).
    SnapshotWritten(Option<SnapshotWritten>),
    /// A peer could not be reached; raft-rs slows down replication to it.
    Unreachable(u64),
    /// A peer's connection to this member ended (a killed process's sockets close at once):
    /// a follower whose leader it was stops waiting out the leader's lease.
    PeerGone(u64),
    /// What a peer says of its data directory: in the hello that opens each of its
    /// connections (before any Raft message on it), and again when that changes.
    PeerIdentity(u64, PeerIdentity),
    /// The log writer made everything up to this ready number durable.
    Persisted(u64),
    /// Hand leadership over, or ask for it (`ydld`, `rqld`, a leader's clean shutdown).
    TransferLeader(Transfer),
    /// Stop the thread (the member is shutting down).
    Shutdown,
}

/// What a leader-transfer request asks for (`transfer.rs` carries it out).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transfer {
    /// The leader yields to the voter that has most of its log (`ydld`, shutdown).
    Yield,
    /// This member asks to lead (`rqld`); a follower passes the request to the leader.
    Request,
    /// The leadership goes to this voter (the console's "make leader"); asked of any
    /// member, raft-rs passes it to the leader.
    To(u64),
}

/// Who waits for a ReadIndex round.
pub enum SyncWaiter {
    /// A client's `sync`, queued in its connection's pipeline.
    Pipeline { conn: ConnId, token: u64 },
    /// A client resuming `session` (with its `timeout`): the handshake makes sure this
    /// member knows the session before it accepts or refuses it. Under Raft a ReadIndex
    /// round, answered `true` (the table here then decides); a member observing a
    /// ZooKeeper ensemble asks its leader (`REVALIDATE`), which answers whether the session
    /// is alive and, if so, moves it to this member.
    Resume {
        session: i64,
        timeout: i32,
        reply: tokio::sync::oneshot::Sender<bool>,
    },
}

/// A member whose clients were served by something else until now (a cut-over from
/// observing ZooKeeper), starting Raft with them connected.
pub struct Takeover {
    /// What reached the member and is not done yet, oldest first: handled before the
    /// inbox.
    pub backlog: Vec<Input>,
    /// The clients stay connected at least this long while the ensemble forms.
    pub keep_clients_for: std::time::Duration,
    /// Campaign at once (one member of the new ensemble does, so that it forms without
    /// waiting out an election timeout).
    pub campaign: bool,
}

/// A snapshot the snapshot worker stored, for the Raft loop to name and compact behind.
pub struct SnapshotWritten {
    pub index: u64,
    pub term: u64,
    pub conf: ConfState,
    /// The snapshot's last zxid.
    pub zxid: i64,
    pub bytes: u64,
    /// Time the Raft loop spent capturing the state.
    pub captured_in: Duration,
    /// Time the snapshot worker spent encoding and writing.
    pub written_in: Duration,
    /// The resident set's peak while it was written, above what it was before the capture.
    pub peak_extra: u64,
}

/// What a member says of its data directory to its peers (`trust.rs` decides what follows).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PeerIdentity {
    /// The store's incarnation; 0 from an earlier build's member, which says nothing of
    /// itself (its store predates incarnations and is trusted).
    pub incarnation: u64,
    /// Whether its store holds everything it ever acknowledged.
    pub trusted: bool,
    /// Its store was written by an import or a restore and has not joined an ensemble yet.
    pub seed: bool,
    /// The last index of its log when it said so.
    pub last_index: u64,
}
