//! Read-only mode (ZooKeeper's `readonlymode.enabled`): a member of an ensemble cut off
//! from the quorum keeps answering reads to clients that asked for it (`canBeReadOnly` in
//! the handshake), from the tree it last applied; writes, `sync` and anything that needs the
//! log get NOTREADONLY. The handshake answers `readOnly = true`, so the client knows, and
//! clients that did not ask are refused as before. When the quorum is back the member
//! closes its read-only connections; the clients reconnect read-write (kazoo and the Java
//! client also look for a read-write member themselves, through `isro`).
//!
//! Sessions: a client resuming a session the tree knows keeps it (its password is checked
//! against the replicated session table). A client without a session gets a session id of
//! this member that is not written to the log (nothing can be written): ZooKeeper's
//! read-only sessions are local too, and a client that has only seen read-only members
//! starts a new session when it reaches a read-write one.

use bytes::Bytes;
use jute::{ConnectRequest, ErrorCode};

use super::outbox::Outbox;
use super::reply;
use super::session_ids::new_password;
use super::shared::Shared;
use crate::state::ops::OpClass;

/// A session accepted in read-only mode.
pub struct ReadOnlySession {
    pub id: i64,
    pub passwd: Bytes,
    /// Made by this member for this connection, unknown to the replicated table.
    pub local: bool,
}

/// The session for a read-only client, or `None` when it resumes a session that is gone
/// (or with the wrong password).
pub fn accept(shared: &Shared, req: &ConnectRequest) -> Option<ReadOnlySession> {
    if req.session_id == 0 {
        return Some(ReadOnlySession {
            id: shared.session_ids.next(),
            passwd: Bytes::copy_from_slice(&new_password()),
            local: true,
        });
    }
    let state = shared.replica.state.read();
    let known = state.sessions.get(&req.session_id)?;
    (known.passwd.as_slice() == req.passwd.as_ref()).then(|| ReadOnlySession {
        id: req.session_id,
        passwd: req.passwd.clone(),
        local: false,
    })
}

/// What a read-only connection does with a request of `class` instead of running it.
#[derive(Debug, PartialEq, Eq)]
pub enum Refusal {
    /// Run it: it reads the tree.
    None,
    /// Answered NOTREADONLY.
    NotReadOnly,
    /// closeSession: answered OK, then the connection closes (the session was never written).
    Close,
}

pub fn refusal(class: OpClass) -> Refusal {
    match class {
        OpClass::Write | OpClass::Sync => Refusal::NotReadOnly,
        OpClass::Close => Refusal::Close,
        _ => Refusal::None,
    }
}

/// Answers a refused request in place (nothing of a read-only session is ever queued behind
/// a write, so this keeps the replies in order).
pub fn answer(shared: &Shared, outbox: &Outbox, xid: i32, refusal: &Refusal) {
    let zxid = shared.replica.last_zxid();
    let code = match refusal {
        Refusal::Close => ErrorCode::Ok,
        _ => ErrorCode::NotReadOnly,
    };
    reply::push_error(outbox, xid, zxid, code);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_and_syncs_are_refused_reads_run() {
        assert_eq!(refusal(OpClass::Write), Refusal::NotReadOnly);
        assert_eq!(refusal(OpClass::Sync), Refusal::NotReadOnly);
        assert_eq!(refusal(OpClass::Close), Refusal::Close);
        assert_eq!(refusal(OpClass::Local), Refusal::None);
    }
}
