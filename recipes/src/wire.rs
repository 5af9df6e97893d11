//! A minimal ZooKeeper connection over this workspace's jute codec.
//!
//! zookeeper-async has no `multi` and sends `CreateMode::Container` as a plain create (which
//! makes a persistent node). The recipes need both: the fenced write is a multi, and lock
//! parents must be containers so that they disappear once unused. [`JuteConnection`] sends
//! exactly those requests on a session of its own. Neither needs the lock holder's session:
//! a `check` op in a multi only asks whether a node exists, whoever asks, and containers
//! belong to no session.
//!
//! The connection sends one request at a time and does not ping: it opens a fresh session
//! when the previous one has been idle for a third of its timeout (closing the old one), so
//! a request never lands on a session the server is about to expire.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex as StdMutex};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use jute::{
    split_frame, write_frame, AuthPacket, ConnectRequest, ConnectResponse, OpCode, Reader, Record,
    ReplyHeader, Request, Response, DEFAULT_MAX_BUFFER,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::client::{ErrorCode, ZkResult};

/// Identities (scheme, auth) shared by a client's sessions.
pub(crate) type AuthList = Arc<StdMutex<Vec<(String, Vec<u8>)>>>;

/// The xid of auth requests and their replies.
const AUTH_XID: i32 = -4;

/// A connect string split into its hosts and optional chroot (`"h1:p1,h2:p2/chroot"`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ConnectString {
    pub hosts: Vec<String>,
    pub chroot: Option<String>,
}

impl ConnectString {
    pub fn parse(s: &str) -> Option<ConnectString> {
        let (hosts, chroot) = match s.find('/') {
            Some(i) => (&s[..i], &s[i..]),
            None => (s, ""),
        };
        let chroot = match chroot {
            "" | "/" => None,
            c if c.ends_with('/') => return None,
            c => Some(c.to_string()),
        };
        let hosts: Vec<String> = hosts
            .split(',')
            .map(|h| h.trim().to_string())
            .filter(|h| !h.is_empty())
            .collect();
        if hosts.is_empty() {
            return None;
        }
        Some(ConnectString { hosts, chroot })
    }
}

struct Conn {
    stream: TcpStream,
    buf: BytesMut,
    next_xid: i32,
    negotiated: Duration,
    last_used: Instant,
}

/// One ZooKeeper session over the jute codec, for requests that zookeeper-async lacks.
pub(crate) struct JuteConnection {
    target: ConnectString,
    timeout: Duration,
    /// Identities added to the main session: sent on every session this opens.
    auth: AuthList,
    conn: tokio::sync::Mutex<Option<Conn>>,
}

impl JuteConnection {
    pub fn new(target: ConnectString, timeout: Duration, auth: AuthList) -> JuteConnection {
        JuteConnection {
            target,
            timeout,
            auth,
            conn: tokio::sync::Mutex::new(None),
        }
    }

    /// Closes the session, if one is open; the next request opens a new one.
    pub async fn close(&self) {
        if let Some(old) = self.conn.lock().await.take() {
            old.close().await;
        }
    }

    /// The server-side path for a client path (adds the chroot).
    pub fn server_path(&self, path: &str) -> String {
        match &self.target.chroot {
            Some(root) if path == "/" => root.clone(),
            Some(root) => format!("{root}{path}"),
            None => path.to_string(),
        }
    }

    /// The client path for a server-side path (removes the chroot).
    pub fn client_path(&self, path: String) -> String {
        match &self.target.chroot {
            Some(root) => match path.strip_prefix(root.as_str()) {
                Some("") => "/".to_string(),
                Some(rest) => rest.to_string(),
                None => path,
            },
            None => path,
        }
    }

    /// Opens the session (if needed) and returns the session timeout the server negotiated.
    /// The main client's session gets the same clamp, as it asked for the same timeout.
    pub async fn negotiated_timeout(&self) -> ZkResult<Duration> {
        let mut guard = self.conn.lock().await;
        if guard.is_none() {
            *guard = Some(self.open().await?);
        }
        guard
            .as_ref()
            .map(|c| c.negotiated)
            .ok_or(ErrorCode::ConnectionLoss)
    }

    /// Sends one request and waits for its reply. `ConnectionLoss` when the connection failed
    /// or the reply did not come within the session timeout (the outcome is then unknown).
    pub async fn call(&self, req: Request) -> ZkResult<Response> {
        let op = req.opcode();
        let mut guard = self.conn.lock().await;
        let stale = match guard.as_ref() {
            Some(c) => c.last_used.elapsed() > c.negotiated / 3,
            None => true,
        };
        if stale {
            if let Some(old) = guard.take() {
                old.close().await;
            }
            *guard = Some(self.open().await?);
        }
        let Some(conn) = guard.as_mut() else {
            return Err(ErrorCode::ConnectionLoss);
        };
        match tokio::time::timeout(self.timeout, conn.exchange(op, &req)).await {
            Ok(Ok(resp)) => {
                conn.last_used = Instant::now();
                resp
            }
            Ok(Err(e)) => {
                tracing::debug!("jute connection failed: {e}");
                *guard = None;
                Err(ErrorCode::ConnectionLoss)
            }
            Err(_) => {
                *guard = None;
                Err(ErrorCode::ConnectionLoss)
            }
        }
    }

    /// Opens a session and authenticates it like the main one.
    async fn open(&self) -> ZkResult<Conn> {
        let mut conn = self.connect().await?;
        let auth = self.auth.lock().unwrap_or_else(|e| e.into_inner()).clone();
        for (scheme, auth) in auth {
            let req = Request::Auth(AuthPacket {
                auth_type: 0,
                scheme,
                auth: Some(Bytes::from(auth)),
            });
            match tokio::time::timeout(self.timeout, conn.exchange(OpCode::Auth, &req)).await {
                Ok(Ok(Ok(_))) => {}
                Ok(Ok(Err(e))) => return Err(e),
                _ => return Err(ErrorCode::ConnectionLoss),
            }
        }
        Ok(conn)
    }

    async fn connect(&self) -> ZkResult<Conn> {
        for host in &self.target.hosts {
            let addrs: Vec<SocketAddr> = match tokio::net::lookup_host(host.as_str()).await {
                Ok(a) => a.collect(),
                Err(_) => continue,
            };
            for addr in addrs {
                match tokio::time::timeout(self.timeout, Conn::handshake(addr, self.timeout)).await
                {
                    Ok(Ok(c)) => return Ok(c),
                    Ok(Err(e)) => tracing::debug!("jute connection to {addr} failed: {e}"),
                    Err(_) => tracing::debug!("jute connection to {addr} timed out"),
                }
            }
        }
        Err(ErrorCode::ConnectionLoss)
    }
}

impl Conn {
    async fn handshake(addr: SocketAddr, timeout: Duration) -> std::io::Result<Conn> {
        let mut stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        let req = ConnectRequest {
            protocol_version: 0,
            last_zxid_seen: 0,
            timeout: timeout.as_millis().min(i32::MAX as u128) as i32,
            session_id: 0,
            passwd: Bytes::from_static(&[0u8; jute::HANDSHAKE_PASSWORD_LEN]),
            read_only: Some(false),
        };
        let mut out = BytesMut::new();
        write_frame(&mut out, |b| req.encode(b));
        stream.write_all(&out).await?;
        let mut conn = Conn {
            stream,
            buf: BytesMut::with_capacity(4096),
            next_xid: 1,
            negotiated: timeout,
            last_used: Instant::now(),
        };
        let frame = conn.read_frame().await?;
        let resp = ConnectResponse::from_bytes(frame).map_err(invalid)?;
        if resp.timeout <= 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::ConnectionRefused,
                "server refused the session",
            ));
        }
        conn.negotiated = Duration::from_millis(resp.timeout as u64);
        Ok(conn)
    }

    async fn read_frame(&mut self) -> std::io::Result<Bytes> {
        loop {
            if let Some(frame) = split_frame(&mut self.buf, DEFAULT_MAX_BUFFER).map_err(invalid)? {
                return Ok(frame);
            }
            let n = self.stream.read_buf(&mut self.buf).await?;
            if n == 0 {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    "server closed the connection",
                ));
            }
        }
    }

    async fn exchange(&mut self, op: OpCode, req: &Request) -> std::io::Result<ZkResult<Response>> {
        let xid = if op == OpCode::Auth {
            // ZooKeeper answers auth packets with this xid.
            AUTH_XID
        } else {
            let x = self.next_xid;
            self.next_xid = self.next_xid.wrapping_add(1).max(1);
            x
        };
        let mut out = BytesMut::new();
        write_frame(&mut out, |b| req.encode(xid, b));
        self.stream.write_all(&out).await?;
        loop {
            let frame = self.read_frame().await?;
            let mut r = Reader::new(frame);
            let header = ReplyHeader::decode(&mut r).map_err(invalid)?;
            if header.xid != xid {
                // Notifications (-1) and anything else not ours.
                continue;
            }
            if header.err != 0 && !(op == OpCode::Multi && r.remaining() > 0) {
                return Ok(Err(ErrorCode::from_wire(header.err)));
            }
            if op == OpCode::Auth {
                return Ok(Ok(Response::Empty));
            }
            return Ok(Ok(Response::decode(op, &mut r).map_err(invalid)?));
        }
    }

    /// Ends the session politely, without waiting for the answer.
    async fn close(mut self) {
        let mut out = BytesMut::new();
        let xid = self.next_xid;
        write_frame(&mut out, |b| Request::CloseSession.encode(xid, b));
        let _ = tokio::time::timeout(Duration::from_millis(200), self.stream.write_all(&out)).await;
    }
}

fn invalid(e: impl std::fmt::Display) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_connect_strings() {
        let c = ConnectString::parse("127.0.0.1:2181,localhost:2182/app/a").unwrap();
        assert_eq!(c.hosts, vec!["127.0.0.1:2181", "localhost:2182"]);
        assert_eq!(c.chroot.as_deref(), Some("/app/a"));
        assert_eq!(ConnectString::parse("h:1/").unwrap().chroot, None);
        assert!(ConnectString::parse("h:1/a/").is_none());
        assert!(ConnectString::parse("").is_none());
    }

    #[test]
    fn chroot_is_added_and_removed() {
        let c = JuteConnection::new(
            ConnectString::parse("h:1/app").unwrap(),
            Duration::from_secs(1),
            Arc::default(),
        );
        assert_eq!(c.server_path("/x"), "/app/x");
        assert_eq!(c.server_path("/"), "/app");
        assert_eq!(c.client_path("/app/x".into()), "/x");
        assert_eq!(c.client_path("/app".into()), "/");
    }
}
