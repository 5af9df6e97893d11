//! A bare ZooKeeper session over one TCP connection, spoken with the `jute` codec directly.
//!
//! No client library sits between the load generator and the server, so what is measured
//! is the server (plus loopback), not a client's threads and queues. The session only
//! frames, encodes and decodes: requests are queued into a write buffer (many per
//! `write`), replies are split off a read buffer (many per `read`), and the caller matches
//! replies to requests. ZooKeeper answers a session's requests in order, so a reply whose
//! xid is not the oldest outstanding one is a protocol violation and is reported as such.
//!
//! A session runs over plain TCP or over TLS ([`crate::tls::TlsClient`], rustls): the TLS
//! variants of the workloads measure what encryption costs each server. Watch notifications
//! are not replies; they are counted ([`Session::notifications`]) for the watch workloads.

use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use jute::{
    split_frame, write_frame, ConnectRequest, ConnectResponse, ErrorCode, Reader, Record,
    ReplyHeader, Request, HANDSHAKE_PASSWORD_LEN,
};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;

use crate::tls::TlsClient;

/// The largest reply accepted. Larger than the server's 1 MiB `jute.maxbuffer` on purpose:
/// servers do not limit what they send, and the cleanup lists big directories.
const MAX_REPLY_FRAME: usize = 64 << 20;

/// Why a session failed.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error("i/o error: {0}")]
    Io(#[from] std::io::Error),
    #[error("timed out after {0:?}")]
    Timeout(Duration),
    #[error("server closed the connection")]
    Closed,
    #[error("bad frame: {0}")]
    Frame(#[from] jute::FrameError),
    #[error("undecodable reply: {0}")]
    Decode(#[from] jute::DecodeError),
    #[error("session refused (negotiated timeout {0})")]
    Refused(i32),
    #[error("reply out of order: expected xid {expected}, got {got}")]
    OutOfOrder { expected: i32, got: i32 },
    #[error("request failed with {0}")]
    Server(String),
}

impl SessionError {
    /// A short, stable label for error tallies.
    pub fn kind(&self) -> String {
        match self {
            SessionError::Io(e) => format!("io: {:?}", e.kind()),
            SessionError::Timeout(_) => "timeout".into(),
            SessionError::Closed => "connection closed by server".into(),
            SessionError::Frame(_) => "bad frame".into(),
            SessionError::Decode(_) => "undecodable reply".into(),
            SessionError::Refused(_) => "session refused".into(),
            SessionError::OutOfOrder { .. } => "reply out of order".into(),
            SessionError::Server(s) => s.clone(),
        }
    }
}

/// The label for a ZooKeeper error code in tallies: `NoNode (-101)`.
pub fn error_label(code: i32) -> String {
    match ErrorCode::from_code(code) {
        Some(c) => c.to_string(),
        None => format!("unknown error ({code})"),
    }
}

/// One reply: its header and the undecoded body.
#[derive(Debug)]
pub struct Reply {
    pub header: ReplyHeader,
    pub body: Reader,
}

/// The connection under a session: plain TCP or TLS over TCP.
enum Stream {
    Plain(TcpStream),
    Tls(Box<tokio_rustls::client::TlsStream<TcpStream>>),
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_flush(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}

/// How a session's queued requests go onto the socket.
///
/// ZooKeeper's own clients (the Java client, Curator on it, kazoo, the C client) write one
/// request per `write` with `TCP_NODELAY`, so a server sees one request per segment; the
/// figures that matter to their users are taken that way. Writing a whole pipeline at once
/// lets a server decode and submit requests in batches, which flatters whichever server
/// batches best: a second row, never the only one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Framing {
    /// One request per `write` (one segment each), as real clients send.
    #[default]
    PerRequest,
    /// Every queued request in one `write`.
    Batched,
}

impl Framing {
    /// The name used in tables and JSON.
    pub fn name(self) -> &'static str {
        match self {
            Framing::PerRequest => "per-request",
            Framing::Batched => "batched",
        }
    }
}

/// A connected, established session.
pub struct Session {
    stream: Stream,
    /// How [`flush`](Self::flush) writes (batched until [`set_framing`](Self::set_framing)).
    framing: Framing,
    /// Watch notifications received so far (skipped by the reply readers).
    notifications: u64,
    rbuf: BytesMut,
    wbuf: BytesMut,
    next_xid: i32,
    session_id: i64,
    negotiated_timeout_ms: i32,
}

impl Session {
    /// Connects and performs the handshake (a 3.x handshake with the readOnly byte),
    /// asking for `session_timeout_ms`. Fails after `io_timeout`.
    pub async fn connect(
        addr: SocketAddr,
        session_timeout_ms: i32,
        io_timeout: Duration,
    ) -> Result<Session, SessionError> {
        Self::connect_with(addr, None, session_timeout_ms, io_timeout).await
    }

    /// Like [`connect`](Self::connect), over TLS when `tls` is given (the TLS handshake
    /// counts against the same `io_timeout`).
    pub async fn connect_with(
        addr: SocketAddr,
        tls: Option<&TlsClient>,
        session_timeout_ms: i32,
        io_timeout: Duration,
    ) -> Result<Session, SessionError> {
        let deadline = Instant::now() + io_timeout;
        let tcp = within(deadline, TcpStream::connect(addr)).await??;
        tcp.set_nodelay(true)?;
        let stream = match tls {
            None => Stream::Plain(tcp),
            Some(t) => Stream::Tls(Box::new(within(deadline, t.connect(addr, tcp)).await??)),
        };
        let mut s = Session {
            stream,
            framing: Framing::Batched,
            notifications: 0,
            rbuf: BytesMut::with_capacity(64 * 1024),
            wbuf: BytesMut::with_capacity(64 * 1024),
            next_xid: 1,
            session_id: 0,
            negotiated_timeout_ms: 0,
        };
        let req = ConnectRequest {
            protocol_version: 0,
            last_zxid_seen: 0,
            timeout: session_timeout_ms,
            session_id: 0,
            passwd: Bytes::from_static(&[0u8; HANDSHAKE_PASSWORD_LEN]),
            read_only: Some(false),
        };
        write_frame(&mut s.wbuf, |out| req.encode(out));
        s.flush(deadline).await?;
        let frame = s.next_frame(deadline).await?;
        let resp = ConnectResponse::from_bytes(frame)?;
        if resp.timeout <= 0 {
            return Err(SessionError::Refused(resp.timeout));
        }
        s.session_id = resp.session_id;
        s.negotiated_timeout_ms = resp.timeout;
        Ok(s)
    }

    pub fn session_id(&self) -> i64 {
        self.session_id
    }

    pub fn negotiated_timeout_ms(&self) -> i32 {
        self.negotiated_timeout_ms
    }

    /// Watch notifications received so far.
    pub fn notifications(&self) -> u64 {
        self.notifications
    }

    /// Reads (by `deadline`) until at least `n` watch notifications have arrived in all.
    pub async fn await_notifications(
        &mut self,
        n: u64,
        deadline: Instant,
    ) -> Result<(), SessionError> {
        loop {
            while self.buffered_reply()?.is_some() {}
            if self.notifications >= n {
                return Ok(());
            }
            self.fill(deadline).await?;
        }
    }

    /// Queues a request (not sent until [`flush`](Self::flush)); returns its xid.
    pub fn queue(&mut self, req: &Request) -> i32 {
        let xid = self.next_xid;
        // Positive xids only: the negative ones are reserved (pings, notifications, ...).
        self.next_xid = if self.next_xid == i32::MAX {
            1
        } else {
            self.next_xid + 1
        };
        write_frame(&mut self.wbuf, |out| req.encode(xid, out));
        xid
    }

    /// Whether queued bytes wait to be written.
    pub fn has_queued(&self) -> bool {
        !self.wbuf.is_empty()
    }

    /// Sets how [`flush`](Self::flush) writes from now on (the handshake and set-up are
    /// always batched: only the measured load is framed as asked).
    pub fn set_framing(&mut self, framing: Framing) {
        self.framing = framing;
    }

    /// Writes everything queued: in one `write`, or one `write` per request.
    pub async fn flush(&mut self, deadline: Instant) -> Result<(), SessionError> {
        if self.wbuf.is_empty() {
            return Ok(());
        }
        match self.framing {
            Framing::Batched => self.write_out(0, self.wbuf.len(), deadline).await?,
            Framing::PerRequest => {
                let mut at = 0;
                while at < self.wbuf.len() {
                    // Every queued frame is ours: a 4-byte length, then that many bytes.
                    let len = self.wbuf[at..]
                        .get(..4)
                        .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as usize)
                        .unwrap_or(self.wbuf.len() - at);
                    let end = (at + 4 + len).min(self.wbuf.len());
                    self.write_out(at, end, deadline).await?;
                    at = end;
                }
            }
        }
        self.wbuf.clear();
        Ok(())
    }

    /// Writes `wbuf[from..to]` as one write (over TLS: one record, flushed).
    async fn write_out(
        &mut self,
        from: usize,
        to: usize,
        deadline: Instant,
    ) -> Result<(), SessionError> {
        within(deadline, self.stream.write_all(&self.wbuf[from..to])).await??;
        if matches!(self.stream, Stream::Tls(_)) {
            // rustls may hold the last record until flushed; a TCP flush is a no-op.
            within(deadline, self.stream.flush()).await??;
        }
        Ok(())
    }

    /// A reply already in the read buffer, if a whole one is there. Pings are skipped; watch
    /// notifications are counted and skipped.
    pub fn buffered_reply(&mut self) -> Result<Option<Reply>, SessionError> {
        loop {
            let Some(frame) = split_frame(&mut self.rbuf, MAX_REPLY_FRAME)? else {
                return Ok(None);
            };
            let mut body = Reader::new(frame);
            let header = ReplyHeader::decode(&mut body)?;
            if header.xid == jute::xid::NOTIFICATION {
                self.notifications += 1;
                continue;
            }
            if header.xid == jute::xid::PING {
                continue;
            }
            return Ok(Some(Reply { header, body }));
        }
    }

    /// Reads once from the socket (at least one byte), by `deadline`.
    pub async fn fill(&mut self, deadline: Instant) -> Result<(), SessionError> {
        if self.rbuf.capacity() - self.rbuf.len() < 16 * 1024 {
            self.rbuf.reserve(64 * 1024);
        }
        let n = within(deadline, self.stream.read_buf(&mut self.rbuf)).await??;
        if n == 0 {
            return Err(SessionError::Closed);
        }
        Ok(())
    }

    /// The next reply, reading as needed, by `deadline`.
    pub async fn next_reply(&mut self, deadline: Instant) -> Result<Reply, SessionError> {
        loop {
            if let Some(r) = self.buffered_reply()? {
                return Ok(r);
            }
            self.fill(deadline).await?;
        }
    }

    async fn next_frame(&mut self, deadline: Instant) -> Result<Bytes, SessionError> {
        loop {
            if let Some(f) = split_frame(&mut self.rbuf, MAX_REPLY_FRAME)? {
                return Ok(f);
            }
            self.fill(deadline).await?;
        }
    }

    /// Sends one request and waits for its reply (for setup and cleanup, not the hot path).
    /// A reply with an error code is returned as is; the caller decides what it means.
    pub async fn call(&mut self, req: &Request, deadline: Instant) -> Result<Reply, SessionError> {
        let xid = self.queue(req);
        self.flush(deadline).await?;
        let reply = self.next_reply(deadline).await?;
        if reply.header.xid != xid {
            return Err(SessionError::OutOfOrder {
                expected: xid,
                got: reply.header.xid,
            });
        }
        Ok(reply)
    }

    /// Sends closeSession and waits for its reply, then drops the connection.
    pub async fn close(mut self, deadline: Instant) -> Result<(), SessionError> {
        let reply = self.call(&Request::CloseSession, deadline).await?;
        if reply.header.err != 0 {
            return Err(SessionError::Server(error_label(reply.header.err)));
        }
        Ok(())
    }
}

/// Runs `fut` until `deadline`.
async fn within<F: std::future::Future>(
    deadline: Instant,
    fut: F,
) -> Result<F::Output, SessionError> {
    let now = Instant::now();
    let left = deadline.saturating_duration_since(now);
    tokio::time::timeout(left, fut)
        .await
        .map_err(|_| SessionError::Timeout(left))
}
