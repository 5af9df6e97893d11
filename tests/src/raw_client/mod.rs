//! A raw ZooKeeper protocol client for tests: it sends exactly what a test asks for,
//! including malformed input, and shows everything the server writes back, in order.
//!
//! Real client libraries hide the wire (they pick xids, send pings, re-send SetWatches,
//! refuse bad paths and reorder nothing the test could observe). Conformance and protocol
//! tests need the opposite: choose the handshake's protocolVersion, lastZxidSeen, timeout,
//! session id and password, with or without the trailing readOnly byte; send any
//! [`jute::Request`] with an automatic or a chosen xid; send raw frames and raw bytes;
//! pipeline many requests before reading any reply; and read replies and watch
//! notifications as one ordered stream, so a test can check that an event arrived before a
//! response. Every wait has a timeout, and the server closing the connection is an ordinary
//! observable [`Incoming::Closed`].
//!
//! Built on the `jute` codec only; one background task reads frames off the socket, the
//! decoding happens in [`RawClient::recv`], which knows which opcode each xid was sent with.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use jute::{ConnectResponse, OpCode, Reader, Record, ReplyHeader, Request, WatcherEvent};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

mod messages;

use messages::decode_body;
pub use messages::{Body, ConnectOptions, Event, Handshake, Incoming, RawError, Reply};

/// The largest frame this client accepts from a server (far above any jute.maxbuffer).
const MAX_INCOMING_FRAME: usize = 64 << 20;

/// How long a TCP connect may take on loopback.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// How long one write may block (a server that stops reading must not hang a test).
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);

/// What the reader task hands over.
enum Wire {
    Frame(Bytes),
    Closed(String),
}

/// A connection to a ZooKeeper-protocol server.
pub struct RawClient {
    writer: Option<OwnedWriteHalf>,
    frames: mpsc::UnboundedReceiver<Wire>,
    reader: JoinHandle<()>,
    /// (xid, opcode) of requests whose replies have not arrived, in send order.
    pending: VecDeque<(i32, i32)>,
    next_xid: i32,
    /// True after a handshake was sent and before its response was read.
    awaiting_handshake: bool,
    closed: bool,
    /// Events and replies read while [`RawClient::call`] waited for another reply.
    stash: VecDeque<Incoming>,
    local: SocketAddr,
}

impl std::fmt::Debug for RawClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RawClient")
            .field("local", &self.local)
            .field("next_xid", &self.next_xid)
            .field("closed", &self.closed)
            .finish()
    }
}

impl Drop for RawClient {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

async fn read_loop(mut rd: tokio::net::tcp::OwnedReadHalf, tx: mpsc::UnboundedSender<Wire>) {
    loop {
        let mut len = [0u8; 4];
        if let Err(e) = rd.read_exact(&mut len).await {
            let _ = tx.send(Wire::Closed(describe_io(&e)));
            return;
        }
        let n = i32::from_be_bytes(len);
        if n < 0 || n as usize > MAX_INCOMING_FRAME {
            let _ = tx.send(Wire::Closed(format!("server sent frame length {n}")));
            return;
        }
        let mut body = vec![0u8; n as usize];
        if let Err(e) = rd.read_exact(&mut body).await {
            let _ = tx.send(Wire::Closed(format!(
                "truncated frame of {n} bytes: {}",
                describe_io(&e)
            )));
            return;
        }
        if tx.send(Wire::Frame(Bytes::from(body))).is_err() {
            return;
        }
    }
}

fn describe_io(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::UnexpectedEof => "eof".into(),
        std::io::ErrorKind::ConnectionReset => "reset".into(),
        _ => e.to_string(),
    }
}

impl RawClient {
    /// Opens a TCP connection and sends nothing.
    pub async fn open(addr: SocketAddr) -> Result<RawClient, RawError> {
        let stream = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(addr))
            .await
            .map_err(|_| RawError::Timeout(CONNECT_TIMEOUT))??;
        stream.set_nodelay(true)?;
        let local = stream.local_addr()?;
        let (rd, wr) = stream.into_split();
        let (tx, rx) = mpsc::unbounded_channel();
        let reader = tokio::spawn(read_loop(rd, tx));
        Ok(RawClient {
            writer: Some(wr),
            frames: rx,
            reader,
            pending: VecDeque::new(),
            next_xid: 1,
            awaiting_handshake: false,
            closed: false,
            stash: VecDeque::new(),
            local,
        })
    }

    /// Opens a connection, sends the handshake and reads its response.
    /// `Err(RawError::Closed)` if the server closes instead of answering.
    pub async fn connect(
        addr: SocketAddr,
        opts: &ConnectOptions,
        timeout: Duration,
    ) -> Result<(RawClient, Handshake), RawError> {
        let mut client = RawClient::open(addr).await?;
        client.send_connect(opts).await?;
        let hs = client.recv_handshake(timeout).await?;
        Ok((client, hs))
    }

    /// The client side's address (the server sees this peer).
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// True once the server closed the connection (as seen by `recv`).
    pub fn is_closed(&self) -> bool {
        self.closed
    }

    /// Sends a handshake frame; its response is the next thing `recv` returns.
    pub async fn send_connect(&mut self, opts: &ConnectOptions) -> Result<(), RawError> {
        self.awaiting_handshake = true;
        let body = opts.to_request().to_bytes();
        self.send_frame(&body).await
    }

    /// Treats the next frame as a handshake response (after a hand-made handshake frame
    /// sent with [`send_frame`](Self::send_frame)).
    pub fn expect_handshake_response(&mut self) {
        self.awaiting_handshake = true;
    }

    /// Reads the handshake response, skipping nothing: anything else is an error.
    pub async fn recv_handshake(&mut self, timeout: Duration) -> Result<Handshake, RawError> {
        match self.recv(timeout).await? {
            Incoming::Handshake(h) => Ok(h),
            Incoming::Closed { .. } => Err(RawError::Closed),
            Incoming::Garbage { why, .. } => Err(RawError::Io(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                why,
            ))),
            other => Err(RawError::Io(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("expected a handshake response, got {other:?}"),
            ))),
        }
    }

    /// The xid the next [`send`](Self::send) will use.
    pub fn next_xid(&self) -> i32 {
        self.next_xid
    }

    /// Sets the xid counter (the next automatic xid).
    pub fn set_next_xid(&mut self, xid: i32) {
        self.next_xid = xid;
    }

    fn take_xid(&mut self) -> i32 {
        let xid = self.next_xid;
        self.next_xid = self.next_xid.wrapping_add(1);
        xid
    }

    /// Sends a request with the next automatic xid; returns that xid.
    pub async fn send(&mut self, req: &Request) -> Result<i32, RawError> {
        let xid = self.take_xid();
        self.send_xid(xid, req).await?;
        Ok(xid)
    }

    /// Sends a request with a chosen xid.
    pub async fn send_xid(&mut self, xid: i32, req: &Request) -> Result<(), RawError> {
        let mut out = BytesMut::new();
        jute::write_frame(&mut out, |b| req.encode(xid, b));
        self.pending.push_back((xid, req.opcode().code()));
        self.write(&out).await
    }

    /// Sends many requests in one write before reading anything; returns their xids.
    pub async fn send_batch(&mut self, reqs: &[Request]) -> Result<Vec<i32>, RawError> {
        let mut out = BytesMut::new();
        let mut xids = Vec::with_capacity(reqs.len());
        for req in reqs {
            let xid = self.take_xid();
            jute::write_frame(&mut out, |b| req.encode(xid, b));
            self.pending.push_back((xid, req.opcode().code()));
            xids.push(xid);
        }
        self.write(&out).await?;
        Ok(xids)
    }

    /// Sends a request header with any opcode (known or not) followed by `body` as is.
    /// The reply to `xid` is decoded as a reply to `opcode` if the codec knows it.
    pub async fn send_op(&mut self, xid: i32, opcode: i32, body: &[u8]) -> Result<(), RawError> {
        let mut out = BytesMut::new();
        jute::write_frame(&mut out, |b| {
            b.put_i32(xid);
            b.put_i32(opcode);
            b.put_slice(body);
        });
        self.pending.push_back((xid, opcode));
        self.write(&out).await
    }

    /// Tells the decoder which opcode a reply to `xid` answers (for hand-made frames).
    pub fn expect_reply(&mut self, xid: i32, opcode: i32) {
        self.pending.push_back((xid, opcode));
    }

    /// Sends one frame: a 4-byte length prefix, then `body` as is.
    pub async fn send_frame(&mut self, body: &[u8]) -> Result<(), RawError> {
        let mut out = BytesMut::with_capacity(body.len() + 4);
        out.put_i32(body.len() as i32);
        out.put_slice(body);
        self.write(&out).await
    }

    /// Sends bytes exactly as given (no framing).
    pub async fn send_bytes(&mut self, bytes: &[u8]) -> Result<(), RawError> {
        self.write(bytes).await
    }

    async fn write(&mut self, bytes: &[u8]) -> Result<(), RawError> {
        let Some(w) = self.writer.as_mut() else {
            return Err(RawError::Closed);
        };
        match tokio::time::timeout(WRITE_TIMEOUT, w.write_all(bytes)).await {
            Ok(r) => Ok(r?),
            Err(_) => Err(RawError::Timeout(WRITE_TIMEOUT)),
        }
    }

    /// Sends a ping (xid -2, opcode 11).
    pub async fn ping(&mut self) -> Result<(), RawError> {
        self.send_xid(jute::xid::PING, &Request::Ping).await
    }

    /// Sends closeSession (opcode -11) with the next automatic xid.
    pub async fn close_session(&mut self) -> Result<i32, RawError> {
        self.send(&Request::CloseSession).await
    }

    /// Sends SetWatches (opcode 101) with xid -8, as clients do on reconnect.
    pub async fn set_watches(&mut self, sw: jute::SetWatches) -> Result<(), RawError> {
        self.send_xid(jute::xid::SET_WATCHES, &Request::SetWatches(sw))
            .await
    }

    /// Sends an auth packet (opcode 100) with xid -4.
    pub async fn auth(&mut self, scheme: &str, auth: &[u8]) -> Result<(), RawError> {
        let pkt = jute::AuthPacket {
            auth_type: 0,
            scheme: scheme.into(),
            auth: Some(Bytes::copy_from_slice(auth)),
        };
        self.send_xid(jute::xid::AUTH, &Request::Auth(pkt)).await
    }

    /// Half-closes the connection (FIN) without dropping it: the server sees EOF.
    pub async fn shutdown_write(&mut self) {
        if let Some(mut w) = self.writer.take() {
            let _ = w.shutdown().await;
        }
    }

    /// The next thing the server wrote (stashed items first), or `Err(Timeout)`.
    /// After [`Incoming::Closed`] every call returns `Closed` again at once.
    pub async fn recv(&mut self, timeout: Duration) -> Result<Incoming, RawError> {
        if let Some(i) = self.stash.pop_front() {
            return Ok(i);
        }
        if self.closed {
            return Ok(Incoming::Closed {
                reason: "already closed".into(),
            });
        }
        let wire = match tokio::time::timeout(timeout, self.frames.recv()).await {
            Err(_) => return Err(RawError::Timeout(timeout)),
            Ok(None) => Wire::Closed("reader stopped".into()),
            Ok(Some(w)) => w,
        };
        Ok(match wire {
            Wire::Closed(reason) => {
                self.closed = true;
                Incoming::Closed { reason }
            }
            Wire::Frame(frame) => self.decode_frame(frame),
        })
    }

    /// Like [`recv`](Self::recv) but returns `None` on timeout.
    pub async fn try_recv(&mut self, timeout: Duration) -> Option<Incoming> {
        self.recv(timeout).await.ok()
    }

    /// Sends `req` and waits for the reply with its xid. Events and other replies read
    /// meanwhile are kept, in order, for [`recv`](Self::recv) / [`take_stash`](Self::take_stash).
    pub async fn call(&mut self, req: &Request, timeout: Duration) -> Result<Reply, RawError> {
        let xid = self.send(req).await?;
        self.wait_reply(xid, timeout).await
    }

    /// Waits for the reply with `xid`, keeping everything else read meanwhile.
    pub async fn wait_reply(&mut self, xid: i32, timeout: Duration) -> Result<Reply, RawError> {
        let deadline = tokio::time::Instant::now() + timeout;
        let mut kept = VecDeque::new();
        // Read from the stash first, then the socket.
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            let next = if let Some(i) = self.stash.pop_front() {
                i
            } else {
                match self.recv(left).await {
                    Ok(i) => i,
                    Err(e) => {
                        self.stash = kept;
                        return Err(e);
                    }
                }
            };
            match next {
                Incoming::Reply(r) if r.xid == xid => {
                    kept.append(&mut self.stash);
                    self.stash = kept;
                    return Ok(r);
                }
                Incoming::Closed { .. } => {
                    kept.push_back(next);
                    self.stash = kept;
                    return Err(RawError::Closed);
                }
                other => kept.push_back(other),
            }
        }
    }

    /// Everything read but not yet returned by `recv` (events seen during `call`).
    pub fn take_stash(&mut self) -> Vec<Incoming> {
        self.stash.drain(..).collect()
    }

    fn decode_frame(&mut self, frame: Bytes) -> Incoming {
        if self.awaiting_handshake {
            self.awaiting_handshake = false;
            let len = frame.len();
            let mut r = Reader::new(frame.clone());
            return match ConnectResponse::decode(&mut r) {
                Ok(response) => Incoming::Handshake(Handshake {
                    response,
                    len,
                    raw: frame,
                }),
                Err(e) => Incoming::Garbage {
                    bytes: frame,
                    why: format!("handshake response: {e}"),
                },
            };
        }
        let mut r = Reader::new(frame.clone());
        let header = match ReplyHeader::decode(&mut r) {
            Ok(h) => h,
            Err(e) => {
                return Incoming::Garbage {
                    bytes: frame,
                    why: format!("reply header: {e}"),
                }
            }
        };
        if header.xid == jute::xid::NOTIFICATION {
            return match WatcherEvent::decode(&mut r) {
                Ok(event) => Incoming::Event(Event {
                    zxid: header.zxid,
                    err: header.err,
                    event,
                    trailing: r.take_rest(),
                }),
                Err(e) => Incoming::Garbage {
                    bytes: frame,
                    why: format!("watcher event: {e}"),
                },
            };
        }
        let opcode = self.take_pending(header.xid);
        let raw_body = Bytes::copy_from_slice(r.peek_rest());
        let (body, trailing) = decode_body(opcode, header.err, &mut r);
        Incoming::Reply(Reply {
            xid: header.xid,
            zxid: header.zxid,
            err: header.err,
            opcode,
            body,
            trailing,
            raw_body,
        })
    }

    fn take_pending(&mut self, xid: i32) -> Option<i32> {
        if let Some(pos) = self.pending.iter().position(|(x, _)| *x == xid) {
            return self.pending.remove(pos).map(|(_, op)| op);
        }
        match xid {
            jute::xid::PING => Some(OpCode::Ping.code()),
            jute::xid::AUTH => Some(OpCode::Auth.code()),
            jute::xid::SET_WATCHES => Some(OpCode::SetWatches.code()),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use jute::{MultiResult, Response, Stat};

    fn reply_frame(xid: i32, zxid: i64, err: i32, body: &[u8]) -> Bytes {
        let mut b = BytesMut::new();
        ReplyHeader { xid, zxid, err }.encode(&mut b);
        b.put_slice(body);
        b.freeze()
    }

    /// A client with no socket behind it, for decoding only.
    async fn offline() -> RawClient {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        RawClient::open(addr).await.unwrap()
    }

    #[tokio::test]
    async fn replies_are_decoded_by_the_opcode_of_their_xid() {
        let mut c = offline().await;
        c.expect_reply(7, OpCode::Exists.code());
        c.expect_reply(8, OpCode::Multi.code());
        c.expect_reply(9, OpCode::GetData.code());
        let stat = Stat {
            czxid: 5,
            ..Stat::default()
        };
        let i = c.decode_frame(reply_frame(7, 5, 0, &stat.to_bytes()));
        let Incoming::Reply(r) = i else {
            panic!("not a reply: {i:?}")
        };
        assert_eq!(r.stat(), Some(&stat));
        // A failed multi: header err 0, the errors inside the body.
        let mut body = BytesMut::new();
        Response::Multi(vec![MultiResult::Error(0), MultiResult::Error(-110)]).encode(&mut body);
        let Incoming::Reply(r) = c.decode_frame(reply_frame(8, 6, 0, &body)) else {
            panic!("not a reply")
        };
        assert_eq!(
            r.response(),
            Some(&Response::Multi(vec![
                MultiResult::Error(0),
                MultiResult::Error(-110)
            ]))
        );
        // An error reply has no body.
        let Incoming::Reply(r) = c.decode_frame(reply_frame(9, 6, -101, &[])) else {
            panic!("not a reply")
        };
        assert_eq!((r.err, &r.body), (-101, &Body::None));
        // A ping reply needs no registration.
        let Incoming::Reply(r) = c.decode_frame(reply_frame(-2, 6, 0, &[])) else {
            panic!("not a reply")
        };
        assert_eq!(r.opcode, Some(OpCode::Ping.code()));
    }

    #[tokio::test]
    async fn events_handshakes_and_garbage() {
        let mut c = offline().await;
        let ev = WatcherEvent {
            event_type: 1,
            state: 3,
            path: "/a".into(),
        };
        let Incoming::Event(e) = c.decode_frame(reply_frame(-1, -1, 0, &ev.to_bytes())) else {
            panic!("not an event")
        };
        assert_eq!(e.event, ev);
        c.expect_handshake_response();
        let resp = ConnectResponse::expired(Some(false));
        let Incoming::Handshake(h) = c.decode_frame(resp.to_bytes()) else {
            panic!("not a handshake")
        };
        assert_eq!((h.len, h.response.timeout), (37, 0));
        assert!(matches!(
            c.decode_frame(Bytes::from_static(&[1, 2, 3])),
            Incoming::Garbage { .. }
        ));
        // A reply to an opcode this client never sent keeps its bytes.
        let Incoming::Reply(r) = c.decode_frame(reply_frame(42, 1, 0, &[9, 9])) else {
            panic!("not a reply")
        };
        assert!(matches!(r.body, Body::Raw { .. }));
    }
}
