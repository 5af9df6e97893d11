//! The connections on this member, by id and by session, so the apply loop can hand each
//! outcome to the connection that waits for it.
//!
//! A connection registers once its session is established. The apply loop sends it
//! [`ConnEvent`]s; the connection marks itself `touched` whenever a packet arrives, and the
//! Raft thread collects those marks every tick to keep sessions alive (on the leader
//! directly, from followers in batches).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};
use tokio::sync::oneshot;

use super::conn_events::{ConnEvent, ConnEvents};
use super::conn_stats::ConnStats;
use super::pipeline::Pipeline;
use crate::state::command::ConnId;

/// The outcome of a session creation, for the handshake that asked for it.
#[derive(Debug, Clone)]
pub struct SessionGrant {
    pub ok: bool,
    pub passwd: [u8; 16],
}

/// A registered connection.
pub struct ConnEntry {
    pub session: i64,
    pub events: Arc<ConnEvents>,
    pub touched: Arc<AtomicBool>,
    pub peer: std::net::SocketAddr,
    pub connected_at: std::time::SystemTime,
    /// The connection is TLS (the AdminServer lists such connections apart).
    pub secure: bool,
    pub stats: Arc<ConnStats>,
    pub pipeline: Arc<Mutex<Pipeline>>,
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

    /// Sends a event; false if the connection is gone.
    pub fn send(&self, conn: ConnId, event: ConnEvent) -> bool {
        match self.conns.read().get(&conn) {
            Some(e) => {
                e.events.send(event);
                true
            }
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
    pub fn broadcast(&self, make: impl Fn() -> ConnEvent) {
        for e in self.conns.read().values() {
            e.events.send(make());
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
