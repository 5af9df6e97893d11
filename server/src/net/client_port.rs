//! What the network layer shares between connections, and with the Raft thread through
//! [`crate::raft::Connections`]: the replica (state, status, the Raft inbox), this member's
//! watches and connections, the request counters, and the id generators.
//!
//! # Lock order
//!
//! Wherever more than one lock is held: the replica's `state` → `watches` → a connection's
//! pipeline → the registry's maps. The apply loop follows it to the letter: it holds the
//! state (write), then the watches for the whole round (so watch events are queued before
//! any later reply that shows the change), then each pipeline it hands a reply to.
//!
//! A local read (and a `sync` answered by the Raft thread) takes its pipeline *before* the
//! watches: it holds the state's read lock, then its pipeline, and takes the watches only if
//! the read sets a watch. That cannot deadlock with the apply loop, the one place that takes
//! the watches before a pipeline, because the apply loop holds the state's *write* lock for
//! the whole round and so never runs at the same time as a reader holding the read lock.
//! Everyone else takes the watches alone (a connection's cleanup, `wchs`). No lock is held
//! across an `.await` or any I/O.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use super::metrics::Metrics;
use super::registry::Registry;
use super::session_ids::SessionIds;
use super::session_log::SessionLog;
use super::watch::WatchManager;
use crate::raft::Replica;
use crate::state::command::ConnId;

/// Answers a four-letter word sent on the client port. The operator surface, a layer above
/// this one, provides it when the member starts.
pub type FourLetterWords = fn(&ClientPort, &[u8; 4], std::net::SocketAddr) -> String;

/// See the module docs.
pub struct ClientPort {
    pub replica: Arc<Replica>,
    /// The watches of this member's connections (lock order: after the state).
    pub watches: Mutex<WatchManager>,
    /// This member's connections, by id and by session.
    pub registry: Registry,
    /// Request counters and latencies.
    pub metrics: Metrics,
    pub session_ids: SessionIds,
    /// What this member saw of each session (`session_log.rs`).
    pub session_log: SessionLog,
    pub four_letter_words: FourLetterWords,
    /// The apply loop's reply buffer, kept between rounds (`delivery.rs`).
    pub reply_buf: Mutex<bytes::BytesMut>,
    next_conn: AtomicU64,
    conn_prefix: u64,
}

impl ClientPort {
    /// Before a client resumes `session`: `Some(true)` once this member has applied
    /// everything the leader had committed when asked (and, observing a ZooKeeper
    /// ensemble, the leader holds the session and has moved it here), `Some(false)` if the
    /// leader says the session is gone, `None` if no answer came within two election
    /// timeouts (no leader, or no quorum).
    pub async fn resume_with_leader(&self, session: i64, timeout: i32) -> Option<bool> {
        let (reply, rx) = tokio::sync::oneshot::channel();
        let waiter = crate::raft::SyncWaiter::Resume {
            session,
            timeout,
            reply,
        };
        if !self.replica.submit(crate::raft::Input::ReadIndex(waiter)) {
            return None;
        }
        let wait = self.replica.election_timeouts(2);
        tokio::time::timeout(wait, rx).await.ok()?.ok()
    }

    /// `Some(true)` if the session exists in the replicated table with this password,
    /// `Some(false)` for a wrong password, `None` if unknown here.
    pub fn lookup_session(&self, id: i64, passwd: &[u8]) -> Option<bool> {
        self.replica
            .state
            .read()
            .sessions
            .get(&id)
            .map(|s| s.passwd.as_slice() == passwd)
    }

    pub fn new(replica: Arc<Replica>, four_letter_words: FourLetterWords) -> ClientPort {
        ClientPort {
            four_letter_words,
            session_ids: SessionIds::new(replica.me),
            session_log: SessionLog::default(),
            replica,
            watches: Mutex::new(WatchManager::default()),
            registry: Registry::default(),
            metrics: Metrics::default(),
            reply_buf: Mutex::default(),
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
}
