//! What the apply loop does with outcomes: it fires watches into connection outboxes at
//! once (still under the tree lock, so events precede any later reply that shows the
//! change), and encodes replies for writes that came through this member into one buffer
//! per apply round. After each command, [`Delivery::settle`] hands those replies to their
//! connections' pipelines, which answer the reads queued behind them against the tree as it
//! is right then: after this write, before the next.

use std::time::Instant;

use bytes::{BufMut, BytesMut};
use jute::{ErrorCode, Record};

use crate::metrics::Metrics;
use crate::net::pipeline::Env;
use crate::registry::{Completion, Registry, SessionGrant};
use crate::session::ExpiryTracker;
use crate::state::{ApplyObserver, SessionInfo, StateMachine, WriteResult};
use crate::tree::Trigger;
use crate::txn::{ClientWrite, CloseReason, Origin};
use crate::watch::{ConnId, WatchManager, WatchSlot};

/// Encodes one reply frame (length, header, body) into `buf` and returns it as its own
/// `Bytes` (a slice of the shared buffer: no allocation per reply).
pub fn encode_reply(
    buf: &mut BytesMut,
    xid: i32,
    zxid: i64,
    err: i32,
    body: impl FnOnce(&mut BytesMut),
) -> bytes::Bytes {
    jute::write_frame(buf, |b| {
        b.put_i32(xid);
        b.put_i64(zxid);
        b.put_i32(err);
        body(b);
    });
    buf.split().freeze()
}

/// The error code a write's reply carries in its header.
pub fn result_code(result: &WriteResult) -> i32 {
    match result {
        WriteResult::Error(e) => e.code(),
        _ => ErrorCode::Ok.code(),
    }
}

/// Encodes the body of a successful write's reply (a failed write has none).
pub fn encode_write_result(result: &WriteResult, b: &mut BytesMut) {
    match result {
        WriteResult::Error(_) | WriteResult::Delete => {}
        WriteResult::Create(p) | WriteResult::Sync(p) => jute::WriteExt::put_ustring(b, p),
        WriteResult::Create2(p, s) => {
            jute::WriteExt::put_ustring(b, p);
            s.encode(b);
        }
        WriteResult::Stat(s) | WriteResult::Check(s) => s.encode(b),
        WriteResult::Multi(results) => {
            for r in results {
                r.encode(b);
            }
            jute::MULTI_END.encode(b);
        }
    }
}

/// The apply loop's [`ApplyObserver`].
pub struct Delivery<'a> {
    pub me: u64,
    pub watches: &'a mut WatchManager,
    pub registry: &'a Registry,
    pub expiry: &'a mut ExpiryTracker,
    pub metrics: &'a Metrics,
    pub now: Instant,
    buf: BytesMut,
    replies: Vec<(ConnId, bytes::Bytes)>,
    out: Vec<(ConnId, Completion)>,
    grants: Vec<(i64, SessionGrant)>,
}

impl<'a> Delivery<'a> {
    pub fn new(
        me: u64,
        watches: &'a mut WatchManager,
        registry: &'a Registry,
        expiry: &'a mut ExpiryTracker,
        metrics: &'a Metrics,
    ) -> Self {
        Delivery {
            me,
            watches,
            registry,
            expiry,
            metrics,
            now: Instant::now(),
            buf: BytesMut::with_capacity(64 * 1024),
            replies: Vec::new(),
            out: Vec::new(),
            grants: Vec::new(),
        }
    }

    /// Hands the replies of the command just applied to their pipelines.
    pub fn settle(&mut self, state: &StateMachine) {
        for (conn, frame) in self.replies.drain(..) {
            if let Some(p) = self.registry.pipeline(conn) {
                let mut env = Env {
                    state,
                    watches: WatchSlot::Held(self.watches),
                    metrics: self.metrics,
                };
                p.lock().write_applied(frame, &mut env);
            }
        }
    }

    fn mine(&self, origin: &Origin) -> bool {
        origin.member == self.me
    }

    /// Ends the apply round: what remains to hand to connections once the tree lock is
    /// released.
    pub fn finish(self) -> Outbound {
        Outbound {
            out: self.out,
            grants: self.grants,
        }
    }
}

/// Replies and session grants of one apply round, not yet handed over.
pub struct Outbound {
    out: Vec<(ConnId, Completion)>,
    grants: Vec<(i64, SessionGrant)>,
}

impl Outbound {
    /// Hands everything to its connection. Call after releasing the tree lock.
    pub fn dispatch(self, registry: &Registry) {
        for (conn, c) in self.out {
            registry.send(conn, c);
        }
        for (session, grant) in self.grants {
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
        let err = result_code(&result);
        let frame = encode_reply(&mut self.buf, write.xid, zxid, err, |b| {
            encode_write_result(&result, b)
        });
        self.replies.push((write.origin.conn, frame));
    }

    fn session_created(
        &mut self,
        session: i64,
        info: &SessionInfo,
        origin: Origin,
        _zxid: i64,
        ok: bool,
    ) {
        if ok {
            self.expiry.add(session, info.timeout, self.now);
        }
        if self.mine(&origin) {
            self.grants.push((
                session,
                SessionGrant {
                    ok,
                    timeout: info.timeout,
                    passwd: info.passwd,
                },
            ));
        }
    }

    fn session_closed(&mut self, session: i64, zxid: i64, reason: CloseReason) {
        self.expiry.remove(session);
        let closer = match reason {
            CloseReason::Client { origin, xid } if self.mine(&origin) => {
                let frame = encode_reply(&mut self.buf, xid, zxid, 0, |_| {});
                self.replies.push((origin.conn, frame));
                Some(origin.conn)
            }
            _ => None,
        };
        if let Some(conn) = self.registry.conn_of_session(session) {
            if Some(conn) != closer {
                self.out.push((conn, Completion::SessionClosed));
            }
        }
    }
}
