//! What a test sees of the protocol, both ways: the handshake it sends and the answer,
//! every reply and watch notification as decoded (or why not), and the client's errors.
//! Kept apart from the connection ([`RawClient`](super::RawClient)) that reads and writes
//! them, so a reader of either finds one concern.

use std::time::Duration;

use bytes::Bytes;
use jute::{ConnectRequest, ConnectResponse, DecodeError, OpCode, Reader, Response, WatcherEvent};

/// Errors of the raw client.
#[derive(Debug, thiserror::Error)]
pub enum RawError {
    #[error("i/o error: {0}")]
    Io(#[from] std::io::Error),
    #[error("nothing received within {0:?}")]
    Timeout(Duration),
    #[error("the server closed the connection")]
    Closed,
    #[error("undecodable handshake response: {0}")]
    Decode(#[from] DecodeError),
}

/// What the first frame of a session says: the handshake.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectOptions {
    pub protocol_version: i32,
    pub last_zxid_seen: i64,
    /// Requested session timeout in milliseconds.
    pub timeout_ms: i32,
    /// 0 for a new session; an existing id (with its password) to resume one.
    pub session_id: i64,
    pub passwd: Bytes,
    /// `Some(flag)`: send the trailing readOnly byte (45-byte request, as 3.x clients do);
    /// `None`: omit it (44 bytes, as pre-3.4 clients do).
    pub read_only: Option<bool>,
}

impl Default for ConnectOptions {
    fn default() -> Self {
        ConnectOptions {
            protocol_version: 0,
            last_zxid_seen: 0,
            timeout_ms: 30_000,
            session_id: 0,
            passwd: Bytes::from_static(&[0u8; jute::HANDSHAKE_PASSWORD_LEN]),
            read_only: Some(false),
        }
    }
}

impl ConnectOptions {
    /// Options that resume session `session_id` with its password.
    pub fn resume(session_id: i64, passwd: Bytes, last_zxid_seen: i64) -> ConnectOptions {
        ConnectOptions {
            session_id,
            passwd,
            last_zxid_seen,
            ..ConnectOptions::default()
        }
    }

    pub fn to_request(&self) -> ConnectRequest {
        ConnectRequest {
            protocol_version: self.protocol_version,
            last_zxid_seen: self.last_zxid_seen,
            timeout: self.timeout_ms,
            session_id: self.session_id,
            passwd: self.passwd.clone(),
            read_only: self.read_only,
        }
    }
}

/// The server's answer to a handshake.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Handshake {
    pub response: ConnectResponse,
    /// The frame's length: 37 with the readOnly byte, 36 without.
    pub len: usize,
    /// The frame's bytes (after the length prefix).
    pub raw: Bytes,
}

/// How a reply body was understood.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Body {
    /// Nothing followed the reply header.
    None,
    /// Decoded with `Response::decode(opcode of the request)`.
    Decoded(Response),
    /// Bytes that could not be decoded (unknown opcode, or a decode error).
    Raw { bytes: Bytes, why: String },
}

/// One reply (any xid other than -1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    pub xid: i32,
    pub zxid: i64,
    pub err: i32,
    /// The opcode the request with this xid was sent with, if this client knows it.
    pub opcode: Option<i32>,
    pub body: Body,
    /// Bytes left over after the decoded body (normally empty).
    pub trailing: Bytes,
    /// Everything after the reply header, as received.
    pub raw_body: Bytes,
}

impl Reply {
    /// The decoded response, if any.
    pub fn response(&self) -> Option<&Response> {
        match &self.body {
            Body::Decoded(r) => Some(r),
            _ => None,
        }
    }

    /// The path of a create/create2 reply.
    pub fn created_path(&self) -> Option<&str> {
        match self.response()? {
            Response::Create(p) | Response::Create2(p, _) => Some(p),
            _ => None,
        }
    }

    /// The Stat carried by the reply, if its kind has one.
    pub fn stat(&self) -> Option<&jute::Stat> {
        match self.response()? {
            Response::Create2(_, s)
            | Response::Stat(s)
            | Response::GetData(_, s)
            | Response::GetChildren2(_, s)
            | Response::GetAcl(_, s) => Some(s),
            _ => None,
        }
    }
}

/// A watch notification (xid -1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// The reply header's zxid (-1 in ZooKeeper 3.8).
    pub zxid: i64,
    pub err: i32,
    pub event: WatcherEvent,
    pub trailing: Bytes,
}

/// Everything the server can write, in the order it wrote it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Incoming {
    /// The first frame after a handshake was sent.
    Handshake(Handshake),
    Reply(Reply),
    Event(Event),
    /// A frame this client could not even split into a header (shorter than 16 bytes, or a
    /// handshake response that does not decode).
    Garbage {
        bytes: Bytes,
        why: String,
    },
    /// The server closed the connection (EOF or reset). Nothing follows.
    Closed {
        reason: String,
    },
}

/// Decodes a reply body: for a success, or for any multi (whose failures travel inside).
pub(super) fn decode_body(opcode: Option<i32>, err: i32, r: &mut Reader) -> (Body, Bytes) {
    if r.remaining() == 0 {
        return (Body::None, Bytes::new());
    }
    let op = opcode.and_then(OpCode::from_code);
    let is_multi = matches!(op, Some(OpCode::Multi | OpCode::MultiRead));
    let Some(op) = op else {
        return (
            Body::Raw {
                bytes: r.take_rest(),
                why: format!("reply to unknown opcode {opcode:?}"),
            },
            Bytes::new(),
        );
    };
    if err != 0 && !is_multi {
        return (
            Body::Raw {
                bytes: r.take_rest(),
                why: "bytes after an error header".into(),
            },
            Bytes::new(),
        );
    }
    let before = r.clone();
    match Response::decode(op, r) {
        Ok(resp) => (Body::Decoded(resp), r.take_rest()),
        Err(e) => {
            let mut before = before;
            (
                Body::Raw {
                    bytes: before.take_rest(),
                    why: format!("decode as {op:?}: {e}"),
                },
                Bytes::new(),
            )
        }
    }
}
