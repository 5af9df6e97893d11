//! This member's requests to the ZooKeeper leader, and what waits for their answers:
//! clients' writes and session changes forwarded as `REQUEST` packets (as
//! `ObserverRequestProcessor` forwards them), each remembered until the ensemble's
//! transaction for it comes back (a transaction answers the oldest pending command of its
//! session with the same xid; the leader commits one session's requests in the order they
//! came); `sync`s, answered in order by the leader's SYNC packets; and resumed sessions
//! waiting for the leader's REVALIDATE verdict.

use std::collections::{HashMap, VecDeque};

use bytes::{BufMut, BytesMut};
use jute::quorum::{packet, QuorumPacket};
use jute::{OpCode, WriteExt};

use crate::raft::{Input, SyncWaiter};
use crate::state::command::{CloseReason, Command};
use crate::state::StateMachine;

/// `createSession` and `closeSession` as ZooKeeper numbers them.
const CREATE_SESSION: i32 = -10;
const CLOSE_SESSION: i32 = -11;

/// Requests sent to the leader and not answered yet.
#[derive(Default)]
pub struct Pending {
    /// Commands, by session.
    by_session: HashMap<i64, VecDeque<(i32, Command)>>,
    count: usize,
    /// Clients' `sync`s.
    syncs: VecDeque<SyncWaiter>,
    /// Handshakes resuming a session, waiting for the leader's verdict.
    revalidating: HashMap<i64, Vec<tokio::sync::oneshot::Sender<bool>>>,
}

impl Pending {
    /// The request for a waiter (a `sync`, or a resumed session's REVALIDATE), remembered.
    pub fn wait(&mut self, w: SyncWaiter) -> QuorumPacket {
        match w {
            SyncWaiter::Resume {
                session,
                timeout,
                reply,
            } => {
                self.revalidating.entry(session).or_default().push(reply);
                revalidate_request(session, timeout)
            }
            w => {
                self.syncs.push_back(w);
                sync_request(0)
            }
        }
    }

    /// The leader's SYNC: the oldest `sync` is done.
    pub fn synced(&mut self) -> Option<SyncWaiter> {
        self.syncs.pop_front()
    }

    /// The leader's REVALIDATE answer; false if it does not decode.
    pub fn revalidated(&mut self, data: &[u8]) -> bool {
        let Some((session, alive)) = revalidated(data) else {
            return false;
        };
        for reply in self.revalidating.remove(&session).unwrap_or_default() {
            let _ = reply.send(alive);
        }
        true
    }

    /// Everything pending, as the Raft thread takes it over: the commands (each session's
    /// in order: the ensemble did not commit them by the last zxid zooraft applied), then
    /// the `sync`s. Resumed sessions are answered: the table here decides now.
    pub fn hand_over(&mut self) -> Vec<Input> {
        let mut out: Vec<Input> = self.drain().into_iter().map(Input::Command).collect();
        out.extend(self.syncs.drain(..).map(Input::ReadIndex));
        for (_, replies) in self.revalidating.drain() {
            for r in replies {
                let _ = r.send(true);
            }
        }
        out
    }

    /// The REQUEST for `command`, remembered; `None` for what is never forwarded.
    pub fn forward(&mut self, command: Command) -> Option<QuorumPacket> {
        let (session, xid, op, body, auth) = match &command {
            Command::Write(w) => (w.session, w.xid, w.op, Some(w.body.clone()), Some(&w.auth)),
            Command::Reconfig { write, .. } => (
                write.session,
                write.xid,
                write.op,
                Some(write.body.clone()),
                Some(&write.auth),
            ),
            Command::CreateSession {
                session, timeout, ..
            } => {
                let mut b = BytesMut::with_capacity(4);
                b.put_i32(*timeout);
                (*session, 0, CREATE_SESSION, Some(b.freeze()), None)
            }
            Command::CloseSession {
                session,
                reason: CloseReason::Client { xid, .. },
            } => (*session, *xid, CLOSE_SESSION, None, None),
            // The leader expires sessions and removes containers; a member that observes
            // never does, and the AdminServer refuses a restore while it observes.
            Command::CloseSession { .. }
            | Command::DeleteNode { .. }
            | Command::SetConfig { .. }
            | Command::Restore { .. } => return None,
        };
        let mut data = BytesMut::with_capacity(16 + body.as_ref().map_or(0, |b| b.len()));
        data.put_i64(session);
        data.put_i32(xid);
        data.put_i32(op);
        if let Some(b) = &body {
            data.put_slice(b);
        }
        let auth = auth.map(|a| a.to_vec());
        self.by_session
            .entry(session)
            .or_default()
            .push_back((xid, command));
        self.count += 1;
        Some(QuorumPacket {
            kind: packet::REQUEST,
            zxid: -1,
            data: Some(data.freeze()),
            auth,
        })
    }

    /// The pending command a transaction of `session` with `cxid` answers. Commands of the
    /// session older than it that got no transaction (never: the leader logs failures too)
    /// are dropped with it.
    pub fn take(&mut self, session: i64, cxid: i32) -> Option<Command> {
        let queue = self.by_session.get_mut(&session)?;
        let at = queue.iter().position(|(x, _)| *x == cxid)?;
        let found = queue.drain(..=at).last().map(|(_, c)| c);
        self.count -= at + 1;
        if queue.is_empty() {
            self.by_session.remove(&session);
        }
        found
    }

    fn drain(&mut self) -> Vec<Command> {
        self.count = 0;
        self.by_session
            .drain()
            .flat_map(|(_, q)| q.into_iter().map(|(_, c)| c))
            .collect()
    }

    /// Everything pending (the link to the leader is gone: nothing will answer them here);
    /// how many commands there were.
    pub fn clear(&mut self) -> usize {
        let n = self.count;
        self.by_session.clear();
        self.count = 0;
        self.syncs.clear();
        self.revalidating.clear();
        n
    }

    pub fn len(&self) -> usize {
        self.count
    }
}

/// The REQUEST for a client's `sync`: the leader answers with a SYNC packet once every
/// transaction it committed before has been sent here.
fn sync_request(session: i64) -> QuorumPacket {
    let mut data = BytesMut::with_capacity(24);
    data.put_i64(session);
    data.put_i32(0);
    data.put_i32(OpCode::Sync.code());
    data.put_ustring("/");
    QuorumPacket::new(packet::REQUEST, -1, Some(data.freeze()))
}

/// A REVALIDATE for a client resuming `session` here: the leader answers whether the
/// session is alive and, if it is, makes this member its owner (so that the writes
/// forwarded for it are not refused as SESSIONMOVED).
fn revalidate_request(session: i64, timeout: i32) -> QuorumPacket {
    let mut data = BytesMut::with_capacity(12);
    data.put_i64(session);
    data.put_i32(timeout);
    QuorumPacket::new(packet::REVALIDATE, -1, Some(data.freeze()))
}

/// The answer to the leader's PING: the sessions this member's clients used since the
/// last one, with their timeouts (the leader then keeps them alive).
pub fn ping_reply(ping: QuorumPacket, touched: &[i64], state: &StateMachine) -> QuorumPacket {
    let mut data = BytesMut::with_capacity(12 * touched.len());
    for s in touched {
        if let Some(info) = state.sessions.get(s) {
            data.put_i64(*s);
            data.put_i32(info.timeout);
        }
    }
    // An empty table is an empty buffer, never null: the leader reads it unchecked.
    QuorumPacket {
        kind: packet::PING,
        zxid: ping.zxid,
        data: Some(data.freeze()),
        auth: ping.auth,
    }
}

/// The leader's answer to a REVALIDATE: the session, and whether it is alive.
fn revalidated(data: &[u8]) -> Option<(i64, bool)> {
    let id: [u8; 8] = data.get(..8)?.try_into().ok()?;
    Some((i64::from_be_bytes(id), *data.get(8)? != 0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::command::{ClientWrite, Origin};
    use bytes::Bytes;
    use jute::{Id, Reader};

    fn write(session: i64, xid: i32) -> Command {
        Command::Write(ClientWrite {
            session,
            xid,
            op: OpCode::SetData.code(),
            origin: Origin { member: 4, conn: 1 },
            auth: std::sync::Arc::from(vec![Id {
                scheme: "ip".into(),
                id: "127.0.0.1".into(),
            }]),
            body: Bytes::from_static(b"BODY"),
        })
    }

    #[test]
    fn requests_carry_session_xid_op_body_and_ids() {
        let mut p = Pending::default();
        let q = p.forward(write(7, 3)).unwrap();
        assert_eq!((q.kind, q.zxid), (packet::REQUEST, -1));
        let mut r = Reader::new(q.data.unwrap());
        assert_eq!(r.read_i64().unwrap(), 7);
        assert_eq!(r.read_i32().unwrap(), 3);
        assert_eq!(r.read_i32().unwrap(), OpCode::SetData.code());
        assert_eq!(r.take_rest(), Bytes::from_static(b"BODY"));
        assert_eq!(q.auth.unwrap()[0].scheme, "ip");
        let s = Command::CreateSession {
            session: 9,
            timeout: 4000,
            passwd: [0; 16],
            origin: Origin { member: 4, conn: 2 },
        };
        let q = p.forward(s).unwrap();
        assert_eq!(
            &q.data.unwrap()[8..],
            &[0, 0, 0, 0, 0xff, 0xff, 0xff, 0xf6, 0, 0, 0x0f, 0xa0]
        );
        assert!(p
            .forward(Command::CloseSession {
                session: 9,
                reason: CloseReason::Expired
            })
            .is_none());
        assert_eq!(p.len(), 2);
    }

    #[test]
    fn a_transaction_answers_its_session_and_xid() {
        let mut p = Pending::default();
        for xid in 1..=3 {
            p.forward(write(7, xid));
        }
        p.forward(write(8, 1));
        assert!(p.take(7, 9).is_none());
        assert!(matches!(p.take(7, 2), Some(Command::Write(w)) if w.xid == 2));
        assert_eq!(p.len(), 2, "the older one of the session goes with it");
        assert!(matches!(p.take(8, 1), Some(Command::Write(w)) if w.session == 8));
        assert_eq!(p.clear(), 1);
        assert!(p.take(7, 3).is_none());
    }
}
