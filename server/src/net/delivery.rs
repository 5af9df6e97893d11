//! The network layer's side of [`Connections`]: what the Raft thread's apply loop does
//! with outcomes.
//!
//! Watches fire into connection outboxes at once (still under the state lock, so events
//! precede any later reply that shows the change), and replies for writes that came through
//! this member are encoded into one buffer per apply round. After each command,
//! [`ApplyRound::settle`] hands those replies to their connections' pipelines, which answer
//! the reads queued behind them against the tree as it is right then: after this write,
//! before the next.
//!
//! The outboxes a round writes replies to hold their writers' wake-ups until the round
//! finishes (`outbox.rs`): one wake-up and one `write` per connection per round. The reply
//! buffer is kept from round to round ([`ClientPort::reply_buf`]), so a round allocates nothing
//! for its replies once the previous round's are sent.

use std::sync::Arc;

use bytes::BytesMut;
use parking_lot::{Mutex, MutexGuard};

use super::client_port::ClientPort;
use super::conn_events::ConnEvent;
use super::metrics::Metrics;
use super::outbox::Outbox;
use super::pipeline::{Answering, Pipeline};
use super::registry::{Registry, SessionGrant};
use super::reply;
use super::session_log::{SessionLog, What};
use super::watch::{WatchManager, WatchSlot};
use crate::raft::{ApplyRound, Connections};
use crate::state::command::{ClientWrite, CloseReason, ConnId, Origin};
use crate::state::tree::Trigger;
use crate::state::{ApplyObserver, SessionInfo, StateMachine, WriteResult};

/// The room a round's reply buffer starts with (it grows if a round needs more).
const REPLY_BUF: usize = 64 * 1024;

impl Connections for ClientPort {
    fn apply_round(&self) -> Box<dyn ApplyRound + '_> {
        Box::new(Delivery {
            me: self.replica.me,
            log: &self.session_log,
            watches: self.watches.lock(),
            registry: &self.registry,
            metrics: &self.metrics,
            buf: {
                let mut buf = std::mem::take(&mut *self.reply_buf.lock());
                buf.reserve(REPLY_BUF);
                buf
            },
            reply_buf: &self.reply_buf,
            held: Vec::new(),
            replies: Vec::new(),
            last: None,
            out: Vec::new(),
            grants: Vec::new(),
        })
    }

    fn sync_done(&self, state: &StateMachine, conn: ConnId, token: u64) {
        if let Some(p) = self.registry.pipeline(conn) {
            let mut env = Answering {
                state,
                watches: WatchSlot::Shared(&self.watches),
                metrics: &self.metrics,
            };
            p.lock().sync_done(token, &mut env);
        }
    }

    fn leader_changed(&self) {
        self.registry.broadcast(|| ConnEvent::LeaderChanged);
    }

    fn stop_serving(&self) {
        self.registry.broadcast(|| ConnEvent::StopServing);
    }

    fn take_touched(&self) -> Vec<i64> {
        self.registry.drain_touched()
    }
}

/// One apply round (see the module docs).
struct Delivery<'a> {
    me: u64,
    log: &'a SessionLog,
    /// Held for the whole round (lock order: after the state).
    watches: MutexGuard<'a, WatchManager>,
    registry: &'a Registry,
    metrics: &'a Metrics,
    buf: BytesMut,
    /// Where `buf` goes back when the round is over.
    reply_buf: &'a Mutex<BytesMut>,
    /// The outboxes whose wake-ups this round holds.
    held: Vec<Arc<Outbox>>,
    /// Replies of the command being applied, for [`ApplyRound::settle`].
    replies: Vec<(ConnId, bytes::Bytes)>,
    /// The pipeline the last reply went to.
    last: Option<(ConnId, Arc<Mutex<Pipeline>>)>,
    /// What goes to connections once the state lock is released.
    out: Vec<(ConnId, ConnEvent)>,
    grants: Vec<(i64, SessionGrant)>,
}

impl Delivery<'_> {
    fn mine(&self, origin: &Origin) -> bool {
        origin.member == self.me
    }
}

impl ApplyRound for Delivery<'_> {
    fn settle(&mut self, state: &StateMachine) {
        let Delivery {
            replies,
            last,
            registry,
            watches,
            metrics,
            held,
            ..
        } = self;
        for (conn, frame) in replies.drain(..) {
            // A connection's writes are applied one after the other (`net/submit.rs`): its
            // pipeline is looked up once for the run, and its writer held once.
            let fresh = !matches!(last, Some((c, _)) if *c == conn);
            if fresh {
                let Some(p) = registry.pipeline(conn) else {
                    continue;
                };
                *last = Some((conn, p));
            }
            let Some((_, p)) = last.as_ref() else {
                continue;
            };
            let mut env = Answering {
                state,
                watches: WatchSlot::Held(watches),
                metrics,
            };
            let mut p = p.lock();
            if fresh && p.outbox().hold() {
                held.push(p.outbox().clone());
            }
            p.write_applied(frame, &mut env);
        }
    }

    fn finish(self: Box<Self>) {
        let Delivery {
            watches,
            registry,
            out,
            grants,
            buf,
            reply_buf,
            held,
            ..
        } = *self;
        drop(watches);
        for outbox in held {
            outbox.release();
        }
        *reply_buf.lock() = buf;
        for (conn, c) in out {
            registry.send(conn, c);
        }
        for (session, grant) in grants {
            registry.grant_session(session, grant);
        }
    }
}

impl ApplyObserver for Delivery<'_> {
    fn triggers(&mut self, _zxid: i64, triggers: &[Trigger]) {
        self.watches.fire(triggers);
    }

    fn write_done(&mut self, write: &ClientWrite, zxid: i64, result: WriteResult) {
        if !self.mine(&write.origin) {
            return;
        }
        let frame = reply::encode_write(&mut self.buf, write.xid, zxid, &result);
        self.replies.push((write.origin.conn, frame));
    }

    fn session_created(
        &mut self,
        session: i64,
        info: &SessionInfo,
        origin: Origin,
        zxid: i64,
        ok: bool,
    ) {
        if ok {
            let timeout_ms = info.timeout;
            self.log.record(session, What::Created { zxid, timeout_ms });
        }
        if self.mine(&origin) {
            self.grants.push((
                session,
                SessionGrant {
                    ok,
                    passwd: info.passwd,
                },
            ));
        }
    }

    fn ephemerals_deleted(&mut self, session: i64, zxid: i64, triggers: &[Trigger]) {
        self.log.deleted(session, zxid, triggers);
    }

    fn session_closed(&mut self, session: i64, zxid: i64, reason: CloseReason) {
        let what = match reason {
            CloseReason::Client { origin, .. } => What::Closed {
                zxid,
                by: origin.member,
            },
            CloseReason::Expired => What::Expired { zxid },
        };
        self.log.record(session, what);
        let closer = match reason {
            CloseReason::Client { origin, xid } if self.mine(&origin) => {
                let frame = reply::encode(&mut self.buf, xid, zxid, 0, |_| {});
                self.replies.push((origin.conn, frame));
                Some(origin.conn)
            }
            _ => None,
        };
        if let Some(conn) = self.registry.conn_of_session(session) {
            if Some(conn) != closer {
                self.out.push((conn, ConnEvent::SessionClosed));
            }
        }
    }
}
