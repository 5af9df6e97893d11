//! A connection's requests in arrival order, and the rule that answers them in that order.
//!
//! ZooKeeper answers a session's requests strictly in order, and a read that follows a
//! write of the same session sees that write and nothing the session wrote after it
//! (`CommitProcessor` runs a session's queued reads between its writes). Writes are
//! proposed as soon as they arrive, so several of a session's writes can be applied in one
//! round; the reads between them must therefore be answered *by the apply loop*, right after
//! the write they wait for and before the next command. That is why the pipeline is shared
//! (behind a mutex) between the connection's task, which queues requests and answers what
//! needs no waiting, and the apply loop, which completes writes and flushes what follows.
//!
//! Everyone who flushes a pipeline holds the tree lock (read or write), so reads answered
//! from here see a state consistent with the replies already sent.

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use jute::{ErrorCode, Id, Reader, Request};

use super::conn_events::{ConnEvent, ConnEvents};
use super::conn_stats::ConnStats;
use super::metrics::Metrics;
use super::outbox::Outbox;
use super::reads::{self, Caller};
use super::reply;
use super::watch::WatchSlot;
use crate::state::command::{AuthIds, ConnId};
use crate::state::{opcodes, StateMachine};

/// One request waiting for its turn.
pub enum Item {
    /// Proposed to the log; `reply` arrives when it is applied.
    Write {
        xid: i32,
        op: i32,
        started: Instant,
        reply: Option<Bytes>,
        closes_session: bool,
    },
    /// A sync: answered once this member has applied what the leader had committed when
    /// it was asked (ReadIndex). The connection holds back everything after it until then,
    /// so no later write of the session can overtake it.
    Sync {
        xid: i32,
        token: u64,
        /// Echoed as sent, null included.
        path: Option<String>,
        started: Instant,
        done: bool,
    },
    /// A read barrier (`linearizableReads`): like a sync, released once this member has
    /// applied what the leader had committed when it was asked, but answered with nothing;
    /// the reads queued behind it are answered then. Only reads follow it into the
    /// pipeline: the connection holds anything else back until it is released.
    Barrier {
        token: u64,
        started: Instant,
        done: bool,
    },
    /// Answered from the local tree when its turn comes.
    Local {
        xid: i32,
        op: i32,
        body: Bytes,
        started: Instant,
    },
}

/// What answering needs: the tree (already locked by the caller) and the watches.
pub struct Answering<'a> {
    pub state: &'a StateMachine,
    pub watches: WatchSlot<'a>,
    pub metrics: &'a Metrics,
}

/// See the module docs.
pub struct Pipeline {
    items: VecDeque<Item>,
    pub conn: ConnId,
    pub session: i64,
    /// The connection's auth ids (ip, then whatever `addauth` added).
    pub auth: AuthIds,
    outbox: Arc<Outbox>,
    stats: Arc<ConnStats>,
    notify: Arc<ConnEvents>,
    /// The connection holds a request back until the last barrier is released (and is
    /// told so with `Resume`).
    pub wake_after_barriers: bool,
}

impl Pipeline {
    pub fn new(
        conn: ConnId,
        session: i64,
        auth: AuthIds,
        outbox: Arc<Outbox>,
        stats: Arc<ConnStats>,
        notify: Arc<ConnEvents>,
    ) -> Pipeline {
        Pipeline {
            items: VecDeque::new(),
            conn,
            session,
            auth,
            outbox,
            stats,
            notify,
            wake_after_barriers: false,
        }
    }

    /// Adds an auth id the connection proved (`addauth`, SASL), unless it holds it already.
    /// Writes already proposed keep the ids they were sent with.
    pub fn add_auth(&mut self, id: Id) {
        if !self.auth.contains(&id) {
            let mut ids = self.auth.to_vec();
            ids.push(id);
            self.auth = ids.into();
        }
    }

    /// Where this connection's replies go.
    pub fn outbox(&self) -> &Arc<Outbox> {
        &self.outbox
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn push(&mut self, item: Item) {
        self.items.push_back(item);
        self.stats
            .outstanding
            .store(self.items.len() as u64, Ordering::Relaxed);
    }

    /// When the oldest write or sync still waiting was received.
    pub fn oldest_outstanding(&self) -> Option<Instant> {
        self.items.iter().find_map(|i| match i {
            Item::Write {
                reply: None,
                started,
                ..
            }
            | Item::Sync {
                done: false,
                started,
                ..
            }
            | Item::Barrier {
                done: false,
                started,
                ..
            } => Some(*started),
            _ => None,
        })
    }

    /// True while a read barrier is not released and answered past.
    pub fn barrier_pending(&self) -> bool {
        self.items.iter().any(|i| matches!(i, Item::Barrier { .. }))
    }

    pub fn has_outstanding_write(&self) -> bool {
        self.oldest_outstanding().is_some()
    }

    /// True while a sync of this connection is unanswered.
    pub fn sync_pending(&self) -> bool {
        self.items.iter().any(|i| matches!(i, Item::Sync { .. }))
    }

    /// The oldest unanswered write was applied; `reply` is its encoded frame.
    pub fn write_applied(&mut self, reply: Bytes, env: &mut Answering) {
        match self
            .items
            .iter_mut()
            .find(|i| matches!(i, Item::Write { reply: None, .. }))
        {
            Some(Item::Write { reply: slot, .. }) => *slot = Some(reply),
            _ => {
                tracing::warn!(
                    conn = self.conn,
                    "a write reply arrived that no request waits for"
                );
                return;
            }
        }
        self.flush(env);
    }

    /// A sync or read barrier this connection issued is satisfied.
    pub fn sync_done(&mut self, token: u64, env: &mut Answering) {
        for i in self.items.iter_mut() {
            if let Item::Sync { token: t, done, .. } | Item::Barrier { token: t, done, .. } = i {
                if *t == token {
                    *done = true;
                }
            }
        }
        self.flush(env);
    }

    /// Answers a local request now (the pipeline must be empty), or queues it.
    pub fn local(&mut self, xid: i32, op: i32, body: Bytes, started: Instant, env: &mut Answering) {
        if self.items.is_empty() {
            self.answer_local(xid, op, body, env);
            self.finished(xid, op, started, env);
        } else {
            self.push(Item::Local {
                xid,
                op,
                body,
                started,
            });
        }
    }

    /// Answers, in order, everything at the head that can be answered.
    pub fn flush(&mut self, env: &mut Answering) {
        loop {
            match self.items.front() {
                None
                | Some(Item::Write { reply: None, .. })
                | Some(Item::Sync { done: false, .. })
                | Some(Item::Barrier { done: false, .. }) => break,
                _ => {}
            }
            let Some(item) = self.items.pop_front() else {
                break;
            };
            match item {
                Item::Write {
                    xid,
                    op,
                    started,
                    reply: Some(frame),
                    closes_session,
                } => {
                    self.outbox.push_raw(&frame);
                    self.finished(xid, op, started, env);
                    if closes_session {
                        // Nothing after a closeSession is answered.
                        self.items.clear();
                        self.notify.send(ConnEvent::SessionClosed);
                    }
                }
                Item::Sync {
                    xid, path, started, ..
                } => {
                    let zxid = env.state.last_zxid;
                    reply::push(&self.outbox, xid, zxid, ErrorCode::Ok, |b| {
                        jute::Record::encode(&jute::SyncResponse { path: path.clone() }, b);
                    });
                    self.finished(xid, jute::OpCode::Sync.code(), started, env);
                    // The connection may take the requests it held back.
                    self.notify.send(ConnEvent::Resume);
                }
                Item::Barrier { .. } => {
                    if self.wake_after_barriers && !self.barrier_pending() {
                        self.wake_after_barriers = false;
                        self.notify.send(ConnEvent::Resume);
                    }
                }
                Item::Local {
                    xid,
                    op,
                    body,
                    started,
                } => {
                    self.answer_local(xid, op, body, env);
                    self.finished(xid, op, started, env);
                }
                Item::Write { reply: None, .. } => break,
            }
        }
        self.stats
            .outstanding
            .store(self.items.len() as u64, Ordering::Relaxed);
    }

    fn answer_local(&mut self, xid: i32, op: i32, body: Bytes, env: &mut Answering) {
        let zxid = env.state.last_zxid;
        let request = match Request::decode(op, &mut Reader::new(body)) {
            Ok(r) => r,
            Err(jute::DecodeError::UnknownOpcode(_)) => {
                // Answered as ZooKeeper does (header zxid -1), but the connection stays open
                // (ZooKeeper would also close it).
                reply::push_error(&self.outbox, xid, -1, ErrorCode::Unimplemented);
                return;
            }
            Err(e) => {
                tracing::debug!(conn = self.conn, op, "undecodable request: {e}");
                reply::push_error(&self.outbox, xid, zxid, ErrorCode::MarshallingError);
                return;
            }
        };
        let caller = Caller {
            conn: self.conn,
            session: self.session,
            auth: &self.auth,
        };
        reads::execute(
            env.state,
            &mut env.watches,
            &caller,
            xid,
            &request,
            &self.outbox,
        );
    }

    fn finished(&self, xid: i32, op: i32, started: Instant, env: &Answering) {
        // One clock read for both (every reply comes through here).
        let now = Instant::now();
        let elapsed = now.saturating_duration_since(started);
        if xid >= 0 {
            self.stats.last_cxid.store(xid as i64, Ordering::Relaxed);
        }
        self.stats.last_response_ms.store(
            now.saturating_duration_since(env.metrics.started)
                .as_millis() as u64,
            Ordering::Relaxed,
        );
        self.stats
            .last_latency_ms
            .store(elapsed.as_millis() as u64, Ordering::Relaxed);
        env.metrics.record(op, elapsed);
        env.metrics.packets_sent.fetch_add(1, Ordering::Relaxed);
        let us = elapsed.as_micros() as u64;
        let s = &self.stats;
        s.sent.fetch_add(1, Ordering::Relaxed);
        s.latency_count.fetch_add(1, Ordering::Relaxed);
        s.total_latency_us.fetch_add(us, Ordering::Relaxed);
        s.max_latency_us.fetch_max(us, Ordering::Relaxed);
        let min = s.min_latency_us.load(Ordering::Relaxed);
        if min == 0 || us < min {
            s.min_latency_us.store(us.max(1), Ordering::Relaxed);
        }
        s.last_zxid
            .store(env.state.last_zxid as u64, Ordering::Relaxed);
        *s.last_op.lock() = opcodes::info(op).short_name;
    }
}
