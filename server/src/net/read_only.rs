//! Read-only mode (ZooKeeper's `readonlymode.enabled`): a member of an ensemble cut off
//! from the quorum keeps answering reads to clients that asked for it (`canBeReadOnly` in
//! the handshake), from the tree it last applied; writes, `sync` and anything that needs the
//! log get NOTREADONLY. The handshake answers `readOnly = true`, so the client knows, and
//! clients that did not ask are refused as before. When the quorum is back the member
//! closes its read-only connections; the clients reconnect read-write (kazoo and the Java
//! client also look for a read-write member themselves, through `isro`).
//!
//! Sessions, as ZooKeeper 3.8 does them: nothing can be written, so a read-only member
//! makes no global session. With `localSessionsEnabled=true` a client without a session
//! gets a local one (an id of this member, never in the log); otherwise its handshake is
//! answered with a bare reply header carrying NOTREADONLY, and closed. A client resuming a
//! session is refused, so that it goes on looking for a read-write member where its
//! session, ephemerals and watches live: a global session without local sessions on is
//! closed without an answer, any other is answered as expired (what ZooKeeper 3.8 does in
//! each case). A client that has
//! only seen read-only members starts a new session when it reaches a read-write one (the
//! Java client sends session id 0 then).

use bytes::Bytes;
use jute::{ConnectRequest, ErrorCode};

use super::client_port::ClientPort;
use super::outbox::Outbox;
use super::reply;
use super::session_ids::new_password;
use crate::state::opcodes::OpClass;

/// A local session made by a read-only member, unknown to the replicated table.
#[derive(Debug, PartialEq, Eq)]
pub struct ReadOnlySession {
    pub id: i64,
    pub passwd: Bytes,
}

/// What a read-only member does with a read-only client's handshake.
#[derive(Debug, PartialEq, Eq)]
pub enum Admission {
    /// A local session.
    Accept(ReadOnlySession),
    /// No local sessions: answered with a reply header carrying NOTREADONLY, then closed.
    NoSession,
    /// A global session resumed without local sessions: closed without an answer.
    RefuseGlobal,
    /// Any other resume: answered as expired (ZooKeeper's read-only member does not
    /// revalidate global sessions when it has local ones, and this member keeps none of its
    /// local sessions across connections).
    Unknown,
}

/// Decides on a read-only client's handshake (see the module docs).
pub fn admit(shared: &ClientPort, req: &ConnectRequest) -> Admission {
    let local_sessions = shared.replica.config().local_sessions;
    if req.session_id != 0 {
        // This member keeps no table of the local sessions it made: a resume is of a global
        // session, or of one it cannot vouch for.
        let global = shared
            .replica
            .state
            .read()
            .sessions
            .contains_key(&req.session_id);
        return if global && !local_sessions {
            Admission::RefuseGlobal
        } else {
            Admission::Unknown
        };
    }
    if !local_sessions {
        return Admission::NoSession;
    }
    Admission::Accept(ReadOnlySession {
        id: shared.session_ids.next(),
        passwd: Bytes::copy_from_slice(&new_password()),
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

/// The answer to a handshake when no session can be made: a reply header (xid 0, the
/// member's last zxid, NOTREADONLY) where the client expects a ConnectResponse, as
/// ZooKeeper sends it.
pub fn refuse_session(shared: &ClientPort, outbox: &Outbox) {
    reply::push_error(
        outbox,
        0,
        shared.replica.last_zxid(),
        ErrorCode::NotReadOnly,
    );
}

/// Answers a refused request in place (nothing of a read-only session is ever queued behind
/// a write, so this keeps the replies in order).
pub fn answer(shared: &ClientPort, outbox: &Outbox, xid: i32, refusal: &Refusal) {
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
