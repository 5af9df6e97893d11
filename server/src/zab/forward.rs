//! This member's clients' writes and session changes, forwarded to the ZooKeeper leader as
//! `REQUEST` packets (as `ObserverRequestProcessor` forwards them), and remembered until the
//! ensemble's transaction for each comes back: a transaction answers the oldest pending
//! command of its session with the same xid. Sessions' own order is kept by the leader,
//! which commits one session's requests in the order they came.

use std::collections::{HashMap, VecDeque};

use bytes::{BufMut, BytesMut};
use jute::quorum::{packet, QuorumPacket};
use jute::{OpCode, WriteExt};

use crate::state::command::{CloseReason, Command};

/// `createSession` and `closeSession` as ZooKeeper numbers them.
const CREATE_SESSION: i32 = -10;
const CLOSE_SESSION: i32 = -11;

/// Commands sent to the leader and not answered yet, by session.
#[derive(Default)]
pub struct Pending {
    by_session: HashMap<i64, VecDeque<(i32, Command)>>,
    count: usize,
}

impl Pending {
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
            // never does.
            Command::CloseSession { .. }
            | Command::DeleteNode { .. }
            | Command::SetConfig { .. } => return None,
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

    /// Everything pending (the link to the leader is gone: nothing will answer them here).
    pub fn clear(&mut self) -> usize {
        let n = self.count;
        self.by_session.clear();
        self.count = 0;
        n
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.count
    }
}

/// The REQUEST for a client's `sync`: the leader answers with a SYNC packet once every
/// transaction it committed before has been sent here.
pub fn sync_request(session: i64) -> QuorumPacket {
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
pub fn revalidate_request(session: i64, timeout: i32) -> QuorumPacket {
    let mut data = BytesMut::with_capacity(12);
    data.put_i64(session);
    data.put_i32(timeout);
    QuorumPacket::new(packet::REVALIDATE, -1, Some(data.freeze()))
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
