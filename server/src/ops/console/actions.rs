//! The super user's actions: delete a node, close a session, take a snapshot, move the
//! leadership.
//!
//! A delete goes through the client port as any client's would, in a session of its own
//! that authenticates with the very credentials the browser sent (`digest super:<pw>`):
//! it is proposed, replicated, ACL-checked and fires its watches exactly like a client's,
//! and the answer is ZooKeeper's error code, not a guess. A session is closed by proposing
//! its expiry, as the leader does for a silent one, so its ephemerals go and its watchers
//! learn it as they would. Snapshot and leadership reuse the AdminServer's own paths.

use std::time::Duration;

use bytes::BytesMut;
use jute::{AuthPacket, ConnectRequest, ConnectResponse, DeleteRequest, OpCode, Reader, Record};
use jute::{ReplyHeader, RequestHeader};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::net::ClientPort;
use crate::raft::Input;
use crate::state::command::{CloseReason, Command};

/// How long the whole delete may take.
const DELETE_TIMEOUT: Duration = Duration::from_secs(10);
/// The largest reply read from the client port.
const MAX_REPLY: usize = 1 << 20;

/// Why an action did not happen.
#[derive(Debug, thiserror::Error)]
pub enum ActionError {
    #[error("cannot reach this member's client port: {0}")]
    Connect(std::io::Error),
    #[error("client port: {0}")]
    Io(#[from] std::io::Error),
    #[error("client port answered something unreadable: {0}")]
    Decode(String),
    #[error("the delete did not finish within 10 s")]
    Timeout,
    #[error("the server refused: {0}")]
    Refused(String),
    #[error("the session is unknown")]
    NoSuchSession,
    #[error("this member is stopping")]
    Stopping,
}

/// Reads one length-prefixed frame.
async fn frame(s: &mut TcpStream) -> Result<bytes::Bytes, ActionError> {
    let len = s.read_i32().await?;
    if len < 0 || len as usize > MAX_REPLY {
        return Err(ActionError::Decode(format!("frame of {len} bytes")));
    }
    let mut buf = vec![0u8; len as usize];
    s.read_exact(&mut buf).await?;
    Ok(buf.into())
}

async fn send(s: &mut TcpStream, body: impl FnOnce(&mut BytesMut)) -> Result<(), ActionError> {
    let mut out = BytesMut::new();
    jute::write_frame(&mut out, body);
    s.write_all(&out).await?;
    Ok(())
}

/// The reply header of the next reply to `xid` (notifications and others skipped).
async fn reply_to(s: &mut TcpStream, xid: i32) -> Result<ReplyHeader, ActionError> {
    loop {
        let f = frame(s).await?;
        let header = ReplyHeader::decode(&mut Reader::new(f))
            .map_err(|e| ActionError::Decode(e.to_string()))?;
        if header.xid == xid {
            return Ok(header);
        }
    }
}

/// Deletes `path` (any version) as the super user whose credentials are `credentials`
/// (`super:<password>`), through this member's client port.
pub async fn delete(shared: &ClientPort, path: &str, credentials: &str) -> Result<(), ActionError> {
    let config = shared.replica.config();
    let host = match config.client_address {
        a if a.is_unspecified() => std::net::IpAddr::from([127, 0, 0, 1]),
        a => a,
    };
    let port = config.client_port;
    let run = async {
        let mut s = TcpStream::connect((host, port))
            .await
            .map_err(ActionError::Connect)?;
        let connect = ConnectRequest {
            protocol_version: 0,
            last_zxid_seen: 0,
            timeout: 10_000,
            session_id: 0,
            passwd: vec![0u8; jute::HANDSHAKE_PASSWORD_LEN].into(),
            read_only: Some(false),
        };
        send(&mut s, |o| connect.encode(o)).await?;
        let answer = frame(&mut s).await?;
        let granted = ConnectResponse::decode(&mut Reader::new(answer))
            .map_err(|e| ActionError::Decode(e.to_string()))?;
        if granted.session_id == 0 {
            return Err(ActionError::Refused("no session granted".into()));
        }
        let auth = AuthPacket {
            auth_type: 0,
            scheme: "digest".into(),
            auth: Some(bytes::Bytes::copy_from_slice(credentials.as_bytes())),
        };
        send(&mut s, |o| {
            RequestHeader {
                xid: jute::xid::AUTH,
                op: OpCode::Auth.code(),
            }
            .encode(o);
            auth.encode(o);
        })
        .await?;
        let authed = reply_to(&mut s, jute::xid::AUTH).await?;
        if authed.err != 0 {
            return Err(ActionError::Refused(format!("auth error {}", authed.err)));
        }
        let request = DeleteRequest {
            path: path.to_string(),
            version: -1,
        };
        send(&mut s, |o| {
            RequestHeader {
                xid: 1,
                op: OpCode::Delete.code(),
            }
            .encode(o);
            request.encode(o);
        })
        .await?;
        let deleted = reply_to(&mut s, 1).await?;
        // Close the session so it leaves nothing behind.
        send(&mut s, |o| {
            RequestHeader {
                xid: 2,
                op: OpCode::CloseSession.code(),
            }
            .encode(o)
        })
        .await?;
        let _ = reply_to(&mut s, 2).await;
        match deleted.err {
            0 => Ok(()),
            e => Err(ActionError::Refused(
                jute::ErrorCode::from_code(e)
                    .map_or_else(|| format!("error {e}"), |c| format!("{c:?}")),
            )),
        }
    };
    tokio::time::timeout(DELETE_TIMEOUT, run)
        .await
        .map_err(|_| ActionError::Timeout)?
}

/// Proposes the expiry of `session` (forwarded to the leader by a follower).
pub fn close_session(shared: &ClientPort, session: i64) -> Result<(), ActionError> {
    if !shared.replica.state.read().sessions.contains_key(&session) {
        return Err(ActionError::NoSuchSession);
    }
    let command = Command::CloseSession {
        session,
        reason: CloseReason::Expired,
    };
    if shared.replica.submit(Input::Command(command)) {
        Ok(())
    } else {
        Err(ActionError::Stopping)
    }
}
