//! The connections on this member, by id and by session, so the apply loop can hand each
//! outcome to the connection that waits for it.
//!
//! A connection registers once its session is established. The apply loop sends it
//! [`Completion`]s; the connection marks itself `touched` whenever a packet arrives, and the
//! consensus loop collects those marks every tick to keep sessions alive (on the leader
//! directly, from followers in batches).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};
use tokio::sync::{mpsc, oneshot};

use super::pipeline::Pipeline;
use crate::state::command::ConnId;

/// What the consensus side tells a connection's task (replies themselves go through the
/// connection's [`Pipeline`]).
#[derive(Debug)]
pub enum Completion {
    /// The session ended (closed by the client, expired, or taken over by a reconnect).
    SessionClosed,
    /// The leader changed; writes in flight may never be answered.
    LeaderChanged,
    /// This member stopped serving clients (no quorum, or shutting down).
    StopServing,
    /// A sync was answered: the requests held back behind it may go on.
    Resume,
}

/// The outcome of a session creation, for the handshake that asked for it.
#[derive(Debug, Clone)]
pub struct SessionGrant {
    pub ok: bool,
    pub passwd: [u8; 16],
}

/// A registered connection.
pub struct ConnEntry {
    pub session: i64,
    pub completions: mpsc::UnboundedSender<Completion>,
    pub touched: Arc<AtomicBool>,
    pub peer: std::net::SocketAddr,
    pub connected_at: std::time::SystemTime,
    pub stats: Arc<ConnStats>,
    pub pipeline: Arc<Mutex<Pipeline>>,
}

/// Per-connection counters (for `cons`, with ZooKeeper's fields).
pub struct ConnStats {
    pub received: AtomicU64,
    pub sent: AtomicU64,
    pub outstanding: AtomicU64,
    pub last_zxid: AtomicU64,
    pub min_latency_us: AtomicU64,
    pub max_latency_us: AtomicU64,
    pub total_latency_us: AtomicU64,
    pub latency_count: AtomicU64,
    pub last_op: Mutex<&'static str>,
    /// The negotiated session timeout (ms).
    pub timeout_ms: AtomicI64,
    /// The xid of the last reply to a client request (-1 before the first).
    pub last_cxid: AtomicI64,
    /// When the last reply left (ms on a monotonic clock), and how long it took.
    pub last_response_ms: AtomicU64,
    pub last_latency_ms: AtomicU64,
}

impl Default for ConnStats {
    fn default() -> Self {
        ConnStats {
            received: AtomicU64::new(0),
            sent: AtomicU64::new(0),
            outstanding: AtomicU64::new(0),
            last_zxid: AtomicU64::new(0),
            min_latency_us: AtomicU64::new(0),
            max_latency_us: AtomicU64::new(0),
            total_latency_us: AtomicU64::new(0),
            latency_count: AtomicU64::new(0),
            last_op: Mutex::new("NA"),
            timeout_ms: AtomicI64::new(0),
            last_cxid: AtomicI64::new(-1),
            last_response_ms: AtomicU64::new(0),
            last_latency_ms: AtomicU64::new(0),
        }
    }
}

/// See the module docs.
#[derive(Default)]
pub struct Registry {
    conns: RwLock<HashMap<ConnId, ConnEntry>>,
    sessions: RwLock<HashMap<i64, ConnId>>,
    handshakes: Mutex<HashMap<i64, oneshot::Sender<SessionGrant>>>,
}

impl Registry {
    /// Registers a connection for `session`; returns the connection that held the session
    /// before (it must be closed: the client reconnected).
    pub fn register(&self, conn: ConnId, entry: ConnEntry) -> Option<ConnId> {
        let session = entry.session;
        self.conns.write().insert(conn, entry);
        let previous = self.sessions.write().insert(session, conn);
        previous.filter(|p| *p != conn)
    }

    pub fn unregister(&self, conn: ConnId) {
        if let Some(entry) = self.conns.write().remove(&conn) {
            let mut sessions = self.sessions.write();
            if sessions.get(&entry.session) == Some(&conn) {
                sessions.remove(&entry.session);
            }
        }
    }

    /// Sends a completion; false if the connection is gone.
    pub fn send(&self, conn: ConnId, completion: Completion) -> bool {
        match self.conns.read().get(&conn) {
            Some(e) => e.completions.send(completion).is_ok(),
            None => false,
        }
    }

    /// A connection's request pipeline.
    pub fn pipeline(&self, conn: ConnId) -> Option<Arc<Mutex<Pipeline>>> {
        self.conns.read().get(&conn).map(|e| e.pipeline.clone())
    }

    /// The connection currently holding a session on this member.
    pub fn conn_of_session(&self, session: i64) -> Option<ConnId> {
        self.sessions.read().get(&session).copied()
    }

    /// Tells every connection something (leader change, stop serving).
    pub fn broadcast(&self, make: impl Fn() -> Completion) {
        for e in self.conns.read().values() {
            let _ = e.completions.send(make());
        }
    }

    /// Sessions with traffic since the last call.
    pub fn drain_touched(&self) -> Vec<i64> {
        self.conns
            .read()
            .values()
            .filter(|e| e.touched.swap(false, Ordering::Relaxed))
            .map(|e| e.session)
            .collect()
    }

    pub fn len(&self) -> usize {
        self.conns.read().len()
    }

    /// Runs `f` over every connection (for `cons`, `crst`, metrics).
    pub fn for_each(&self, mut f: impl FnMut(ConnId, &ConnEntry)) {
        for (id, e) in self.conns.read().iter() {
            f(*id, e);
        }
    }

    /// A handshake waits for its session to be created.
    pub fn await_session(&self, session: i64) -> oneshot::Receiver<SessionGrant> {
        let (tx, rx) = oneshot::channel();
        self.handshakes.lock().insert(session, tx);
        rx
    }

    /// The apply loop created (or refused) a session a local handshake waits for.
    pub fn grant_session(&self, session: i64, grant: SessionGrant) {
        if let Some(tx) = self.handshakes.lock().remove(&session) {
            let _ = tx.send(grant);
        }
    }

    /// A handshake gave up waiting.
    pub fn forget_session(&self, session: i64) {
        self.handshakes.lock().remove(&session);
    }
}
