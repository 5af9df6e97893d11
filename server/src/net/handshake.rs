//! The session handshake of a new connection: a new session created through the log, a
//! resumed one checked against the replicated session table, or a read-only session on a
//! member that cannot serve writes. Answers the client through the connection's outbox.

use bytes::{Bytes, BytesMut};
use jute::{ConnectRequest, ConnectResponse, Reader, Record};
use std::sync::atomic::Ordering;

use super::client_port::ClientPort;
use super::conn_events::ConnEvent;
use super::end::End;
use super::outbox::Outbox;
use super::read_only::{self, Admission};
use super::session_ids::new_password;
use super::session_log::What;
use super::stream::{read_frame, ReadHalf};
use crate::raft::Input;
use crate::state::command::{Command, ConnId, Origin};

/// How long a client may take to send its handshake.
pub(super) const HANDSHAKE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

pub(super) struct Session {
    pub id: i64,
    pub timeout_ms: i32,
    /// Accepted in read-only mode (see `read_only.rs`): a local session, unknown to the
    /// replicated table.
    pub read_only: bool,
    /// The client resumed a session it had (rather than starting one).
    pub resumed: bool,
}

/// The handshake: a new session through the log, or a resumed one checked against the
/// replicated session table. Answers the client; `Err` ends the connection.
pub(super) async fn handshake(
    shared: &ClientPort,
    conn: ConnId,
    rd: &mut ReadHalf,
    buf: &mut BytesMut,
    outbox: &Outbox,
) -> Result<Session, End> {
    let frame = tokio::time::timeout(
        HANDSHAKE_TIMEOUT,
        read_frame(rd, buf, shared.replica.config().max_buffer),
    )
    .await
    .map_err(|_| End::Protocol("no handshake".into()))??
    .ok_or(End::ClientClosed)?;
    let metrics = &shared.metrics;
    metrics.connection_requests.fetch_add(1, Ordering::Relaxed);
    metrics
        .bytes_received
        .fetch_add(frame.len() as u64 + 4, Ordering::Relaxed);
    let req = ConnectRequest::decode(&mut Reader::new(frame))
        .map_err(|e| End::Protocol(format!("bad handshake: {e}")))?;
    let timeout = shared.replica.config().negotiate_timeout(req.timeout);
    if !shared.replica.is_serving() {
        if req.read_only == Some(true) && shared.replica.is_read_only() {
            return read_only_handshake(shared, &req, timeout, outbox);
        }
        return Err(End::NotServing);
    }
    let our_zxid = shared.replica.last_zxid();
    if req.last_zxid_seen > our_zxid {
        return Err(End::Protocol(format!(
            "client has seen zxid 0x{:x}, our last zxid is 0x{our_zxid:x}: client must try another server",
            req.last_zxid_seen
        )));
    }
    let respond = |resp: &ConnectResponse| {
        outbox.push_frame(|b| resp.encode(b));
    };
    if req.session_id == 0 {
        let id = shared.session_ids.next();
        let passwd = new_password();
        let granted = shared.registry.await_session(id);
        shared
            .replica
            .submit(Input::Command(Command::CreateSession {
                session: id,
                timeout,
                passwd,
                origin: Origin {
                    member: shared.replica.me,
                    conn,
                },
            }));
        let wait = shared.replica.election_timeouts(3);
        let grant = match tokio::time::timeout(wait, granted).await {
            Ok(Ok(g)) if g.ok => g,
            _ => {
                shared.registry.forget_session(id);
                return Err(End::Protocol(
                    "session could not be created (no quorum?)".into(),
                ));
            }
        };
        respond(&ConnectResponse {
            protocol_version: 0,
            timeout,
            session_id: id,
            passwd: Bytes::copy_from_slice(&grant.passwd),
            read_only: req.read_only.map(|_| false),
        });
        return Ok(Session {
            id,
            timeout_ms: timeout,
            read_only: false,
            resumed: false,
        });
    }
    // ZooKeeper closes the session's current connection on any attempt to resume it, before
    // it checks the password (processConnectRequest's CLIENT_RECONNECT).
    if let Some(old) = shared.registry.conn_of_session(req.session_id) {
        shared.registry.send(old, ConnEvent::SessionClosed);
    }
    // In an ensemble the resume is confirmed with the leader (a ReadIndex round) before it
    // is answered, as ZooKeeper's follower revalidates a session with its leader: the
    // session table here is then at least the leader's, so an unknown session is really
    // gone (not merely not applied here yet), and a member whose leader is gone refuses the
    // client, which tries another member, instead of accepting a session whose writes it
    // cannot commit.
    let alive = if shared.replica.config().is_standalone() {
        true
    } else {
        match shared.resume_with_leader(req.session_id, timeout).await {
            Some(alive) => alive,
            None => return Err(End::NoLeader),
        }
    };
    match shared
        .lookup_session(req.session_id, &req.passwd)
        .filter(|_| alive)
    {
        Some(true) => {
            respond(&ConnectResponse {
                protocol_version: 0,
                timeout,
                session_id: req.session_id,
                passwd: req.passwd.clone(),
                read_only: req.read_only.map(|_| false),
            });
            Ok(Session {
                id: req.session_id,
                timeout_ms: timeout,
                read_only: false,
                resumed: true,
            })
        }
        known => {
            let why = match known {
                Some(false) => "wrong password",
                _ => "the session had expired or was closed",
            };
            shared
                .session_log
                .record(req.session_id, What::Refused { why });
            respond(&ConnectResponse::expired(req.read_only));
            Err(End::Expired)
        }
    }
}

/// The handshake of a client that asked for read-only mode, on a member that cannot serve
/// writes (see `read_only.rs`).
fn read_only_handshake(
    shared: &ClientPort,
    req: &ConnectRequest,
    timeout: i32,
    outbox: &Outbox,
) -> Result<Session, End> {
    let session = match read_only::admit(shared, req) {
        Admission::Accept(session) => session,
        Admission::NoSession => {
            read_only::refuse_session(shared, outbox);
            return Err(End::NotServing);
        }
        Admission::RefuseGlobal => return Err(End::NotServing),
        Admission::Unknown => {
            // ZooKeeper's read-only member says readOnly here, unlike a read-write one.
            let expired = ConnectResponse {
                read_only: req.read_only.map(|_| true),
                ..ConnectResponse::expired(req.read_only)
            };
            outbox.push_frame(|b| expired.encode(b));
            return Err(End::Expired);
        }
    };
    outbox.push_frame(|b| {
        ConnectResponse {
            protocol_version: 0,
            timeout,
            session_id: session.id,
            passwd: session.passwd.clone(),
            read_only: Some(true),
        }
        .encode(b)
    });
    Ok(Session {
        id: session.id,
        timeout_ms: timeout,
        read_only: true,
        resumed: req.session_id != 0,
    })
}
