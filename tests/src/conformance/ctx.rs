//! The scenario context: the small language scenarios are written in.
//!
//! A scenario opens labelled sessions (`s1`, `s2`, ...), sends requests, waits for replies,
//! events or a close, drops and resumes connections, and every action and every frame the
//! server writes goes into the [`Transcript`], per label, in the order the scenario read
//! it. Because each connection's stream is read only when the scenario asks, the order of
//! lines is decided by the scenario's code, not by thread timing, so two servers that
//! behave alike produce identical normalized transcripts.

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use jute::{OpCode, Request};

use super::describe;
use super::fail::raw_fail;
pub use super::fail::{Fail, Res};
use super::reading::Reading;
use super::recorder::Recorder;
use super::sessions::{Sess, Sessions};
use super::setup;
pub use super::setup::TEST_USERS;
use super::transcript::{LineBuf, Transcript};
use crate::raw_client::{ConnectOptions, Handshake, Incoming, RawClient, Reply};

/// How long a reply, an event or a close may take before the step fails.
pub const WAIT: Duration = Duration::from_secs(5);

/// A pause after every write so that writes land in distinct milliseconds (times are
/// compared by rank; two writes in one millisecond would tie on one server and not on the
/// other).
const AFTER_WRITE: Duration = Duration::from_millis(3);

/// The scenario context.
#[derive(Debug)]
pub struct Ctx {
    addr: SocketAddr,
    root: String,
    sessions: Sessions,
    rec: Recorder,
}

impl Ctx {
    pub fn new(addr: SocketAddr, root: String) -> Ctx {
        Ctx {
            addr,
            root,
            sessions: Sessions::default(),
            rec: Recorder::default(),
        }
    }

    /// The server under test.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The scenario's own root path.
    pub fn root(&self) -> &str {
        &self.root
    }

    /// A path under the scenario's root (`""` is the root itself). Scenarios without a
    /// root of their own (fresh servers) have `/` as root.
    pub fn p(&self, rel: &str) -> String {
        match (self.root.is_empty(), rel.is_empty()) {
            (true, true) => "/".into(),
            (true, false) => format!("/{rel}"),
            (false, true) => self.root.clone(),
            (false, false) => format!("{}/{}", self.root, rel),
        }
    }

    pub fn transcript(&self) -> &Transcript {
        self.rec.transcript()
    }

    pub fn into_transcript(self) -> Transcript {
        self.rec.into_transcript()
    }

    /// Replaces every time by `T`, for scenarios whose writes may share a millisecond.
    pub fn mask_times(&mut self) {
        self.rec.mask_times();
    }

    /// A compared free-form line (a derived fact the scenario checked).
    pub fn note(&mut self, text: impl Into<String>) {
        self.rec.note(text);
    }

    /// A line shown but never compared: an allowed difference, documented.
    pub fn allowed(&mut self, text: impl Into<String>) {
        self.rec.allowed(text);
    }

    /// A compared line built by the caller (zxid/time/session tokens allowed).
    pub fn record(&mut self, l: &LineBuf) {
        self.rec.line(l);
    }

    fn sess(&mut self, label: &str) -> Res<&mut Sess> {
        self.sessions
            .get_mut(label)
            .ok_or_else(|| Fail(format!("{label}: no such session in this scenario")))
    }

    fn client(&mut self, label: &str) -> Res<&mut RawClient> {
        self.sess(label)?
            .client
            .as_mut()
            .ok_or_else(|| Fail(format!("{label}: no open connection")))
    }

    /// `label`'s connection, to be read into the transcript.
    fn reading<'a>(&'a mut self, label: &'a str) -> Res<Reading<'a>> {
        let sess = self
            .sessions
            .get_mut(label)
            .ok_or_else(|| Fail(format!("{label}: no such session in this scenario")))?;
        Ok(Reading {
            label,
            sess,
            rec: &mut self.rec,
        })
    }

    /// The session id `label` was given (0 if none).
    pub fn session_id(&self, label: &str) -> i64 {
        self.sessions.id(label)
    }

    pub fn passwd(&self, label: &str) -> Bytes {
        self.sessions.passwd(label)
    }

    /// The last positive reply zxid `label` saw (what a client sends as lastZxidSeen).
    pub fn last_zxid(&self, label: &str) -> i64 {
        self.sessions.last_zxid(label)
    }

    /// Marks a session as gone, so cleanup does not try to close it.
    pub fn forget(&mut self, label: &str) {
        self.sessions.forget(label);
    }

    /// From now on, ACL lists in getACL replies are recorded sorted: an `auth` ACL expands
    /// to the session's identities in hash-set order in ZooKeeper.
    pub fn unordered_acls(&mut self) {
        self.rec.sort_acls();
    }

    // ---- sessions ----------------------------------------------------------------------

    /// Opens a new session with default options; the handshake must succeed.
    pub async fn open(&mut self, label: &str) -> Res<Handshake> {
        self.open_with(label, ConnectOptions::default())
            .await?
            .ok_or_else(|| Fail(format!("{label}: handshake refused")))
    }

    /// Opens a new session with a chosen timeout.
    pub async fn open_timeout(&mut self, label: &str, timeout_ms: i32) -> Res<Handshake> {
        let opts = ConnectOptions {
            timeout_ms,
            ..ConnectOptions::default()
        };
        self.open_with(label, opts)
            .await?
            .ok_or_else(|| Fail(format!("{label}: handshake refused")))
    }

    /// Opens a connection labelled `label` and sends `opts` as the handshake. Returns the
    /// handshake response, or `None` if the server closed the connection instead.
    pub async fn open_with(&mut self, label: &str, opts: ConnectOptions) -> Res<Option<Handshake>> {
        self.connect_only(label, opts).await?;
        match self.recv(label).await? {
            Incoming::Handshake(h) => Ok(Some(h)),
            _ => Ok(None),
        }
    }

    /// Opens a connection labelled `label` and sends the handshake without reading its
    /// response (which is then the first thing [`recv`](Self::recv) returns).
    pub async fn connect_only(&mut self, label: &str, opts: ConnectOptions) -> Res {
        self.rec.line(&describe::connect(label, &opts));
        let mut client = RawClient::open(self.addr)
            .await
            .map_err(|e| raw_fail(label, "tcp connect", e))?;
        client
            .send_connect(&opts)
            .await
            .map_err(|e| raw_fail(label, "send handshake", e))?;
        let sess = self.sessions.entry(label);
        sess.requested_timeout = opts.timeout_ms;
        sess.requested_session = opts.session_id;
        sess.client = Some(client);
        Ok(())
    }

    /// Opens a TCP connection labelled `label` and sends nothing (for hand-made handshakes).
    pub async fn connect_raw(&mut self, label: &str) -> Res {
        self.note(format!("{label} -> (tcp connect, no handshake yet)"));
        let client = RawClient::open(self.addr)
            .await
            .map_err(|e| raw_fail(label, "tcp connect", e))?;
        let sess = self.sessions.entry(label);
        sess.client = Some(client);
        Ok(())
    }

    /// The next frame on `label` is a handshake response (after a hand-made handshake).
    pub fn expect_handshake(&mut self, label: &str) -> Res {
        self.client(label)?.expect_handshake_response();
        Ok(())
    }

    /// Reads a handshake response, or `None` if the server closed instead.
    pub async fn recv_handshake_or_close(&mut self, label: &str) -> Res<Option<Handshake>> {
        match self.recv(label).await? {
            Incoming::Handshake(h) => Ok(Some(h)),
            Incoming::Closed { .. } => Ok(None),
            other => Err(Fail(format!(
                "{label}: expected a handshake, got {other:?}"
            ))),
        }
    }

    /// The next thing on `label` within `ms` (recorded), or `None` (recorded as quiet).
    pub async fn recv_or_quiet(&mut self, label: &str, ms: u64) -> Res<Option<Incoming>> {
        let wait = Duration::from_millis(ms);
        self.reading(label)?.recv_or_quiet(wait).await
    }
    /// Half-closes `label`'s connection (FIN): the server reads EOF.
    pub async fn shutdown_write(&mut self, label: &str) -> Res {
        self.note(format!("{label} -> (FIN)"));
        self.client(label)?.shutdown_write().await;
        Ok(())
    }

    /// Drops `label`'s TCP connection without closing the session.
    pub async fn drop_conn(&mut self, label: &str) -> Res {
        self.note(format!("{label} drops its TCP connection"));
        let sess = self.sess(label)?;
        sess.client = None;
        // Let the server notice the close before the scenario goes on.
        tokio::time::sleep(Duration::from_millis(50)).await;
        Ok(())
    }

    /// Resumes `label`'s session on a new connection with its id and password, sending
    /// `last_zxid` (default: the last zxid the session saw) as lastZxidSeen.
    pub async fn reconnect(
        &mut self,
        label: &str,
        last_zxid: Option<i64>,
    ) -> Res<Option<Handshake>> {
        let sess = self.sess(label)?;
        sess.client = None;
        let opts = ConnectOptions {
            timeout_ms: sess.requested_timeout,
            ..ConnectOptions::resume(
                sess.id,
                sess.passwd.clone(),
                last_zxid.unwrap_or(sess.last_zxid),
            )
        };
        self.open_with(label, opts).await
    }

    /// Opens connection `new_label` onto `label`'s session (id + password), leaving
    /// `label`'s connection as it is.
    pub async fn attach(&mut self, new_label: &str, label: &str) -> Res<Option<Handshake>> {
        let sess = self.sess(label)?;
        let opts = ConnectOptions {
            timeout_ms: sess.requested_timeout,
            ..ConnectOptions::resume(sess.id, sess.passwd.clone(), sess.last_zxid)
        };
        self.open_with(new_label, opts).await
    }

    // ---- sending -----------------------------------------------------------------------

    /// Sends `req` with the next xid without waiting.
    pub async fn send(&mut self, label: &str, req: Request) -> Res<i32> {
        let xid = self.client(label)?.next_xid();
        self.rec.sent(label, xid, &req);
        let c = self.client(label)?;
        c.send(&req).await.map_err(|e| raw_fail(label, "send", e))
    }

    /// Sends `req` with a chosen xid without waiting.
    pub async fn send_xid(&mut self, label: &str, xid: i32, req: Request) -> Res {
        self.rec.sent(label, xid, &req);
        let c = self.client(label)?;
        c.send_xid(xid, &req)
            .await
            .map_err(|e| raw_fail(label, "send", e))
    }

    /// Sends several requests in one write (pipelining); returns their xids.
    pub async fn send_batch(&mut self, label: &str, reqs: Vec<Request>) -> Res<Vec<i32>> {
        let first = self.client(label)?.next_xid();
        for (i, r) in reqs.iter().enumerate() {
            self.rec.sent(label, first.wrapping_add(i as i32), r);
        }
        let c = self.client(label)?;
        c.send_batch(&reqs)
            .await
            .map_err(|e| raw_fail(label, "send", e))
    }

    /// Sends a header with any opcode and a raw body.
    pub async fn send_op(&mut self, label: &str, xid: i32, opcode: i32, body: &[u8]) -> Res {
        self.note(format!(
            "{label} -> xid={xid} opcode={opcode} body[{}]={}",
            body.len(),
            describe::short_hex(body)
        ));
        let c = self.client(label)?;
        c.send_op(xid, opcode, body)
            .await
            .map_err(|e| raw_fail(label, "send", e))
    }

    /// Sends one length-prefixed frame with raw contents. `what` describes it.
    pub async fn send_frame(&mut self, label: &str, what: &str, body: &[u8]) -> Res {
        self.note(format!("{label} -> frame[{}] {what}", body.len()));
        let c = self.client(label)?;
        c.send_frame(body)
            .await
            .map_err(|e| raw_fail(label, "send", e))
    }

    /// Sends raw bytes, no framing. A write error is recorded, not fatal (the server may
    /// close while we write, which is what some scenarios provoke).
    pub async fn send_bytes(&mut self, label: &str, what: &str, bytes: &[u8]) -> Res {
        self.note(format!("{label} -> bytes[{}] {what}", bytes.len()));
        let c = self.client(label)?;
        if let Err(e) = c.send_bytes(bytes).await {
            self.allowed(format!("{label} write error (timing-dependent): {e}"));
        }
        Ok(())
    }

    /// Tells `label`'s decoder which opcode the reply to `xid` answers.
    pub fn expect_reply(&mut self, label: &str, xid: i32, opcode: OpCode) -> Res {
        self.client(label)?.expect_reply(xid, opcode.code());
        Ok(())
    }

    // ---- receiving ---------------------------------------------------------------------

    /// Reads and records the next thing `label`'s server wrote.
    pub async fn recv(&mut self, label: &str) -> Res<Incoming> {
        self.reading(label)?.recv(WAIT).await
    }

    /// Reads until the reply with `xid` (recording everything before it).
    pub async fn reply(&mut self, label: &str, xid: i32) -> Res<Reply> {
        let awaited = format!("xid {xid}");
        let step = |inc| match inc {
            Incoming::Reply(r) if r.xid == xid => Some(r),
            _ => None,
        };
        self.reading(label)?.until(WAIT, &awaited, step).await
    }

    /// Like [`reply`](Self::reply) but a close is an answer (`None`), not a failure.
    pub async fn reply_or_close(&mut self, label: &str, xid: i32) -> Res<Option<Reply>> {
        let awaited = format!("xid {xid}");
        let step = |inc| match inc {
            Incoming::Reply(r) if r.xid == xid => Some(Some(r)),
            Incoming::Closed { .. } => Some(None),
            _ => None,
        };
        self.reading(label)?.until(WAIT, &awaited, step).await
    }

    /// Reads until `n` replies arrived (recording events in between).
    pub async fn replies(&mut self, label: &str, n: usize) -> Res<Vec<Reply>> {
        let mut reading = self.reading(label)?;
        let mut out = Vec::with_capacity(n);
        while out.len() < n {
            let reply = |inc| match inc {
                Incoming::Reply(r) => Some(r),
                _ => None,
            };
            out.push(reading.until(WAIT, "replies", reply).await?);
        }
        Ok(out)
    }

    /// Reads until `n` watch events arrived (recording anything in between).
    pub async fn events(&mut self, label: &str, n: usize) -> Res {
        let mut reading = self.reading(label)?;
        for _ in 0..n {
            let event = |inc| matches!(inc, Incoming::Event(_)).then_some(());
            reading.until(WAIT, "events", event).await?;
        }
        Ok(())
    }

    /// Reads until `n` watch events arrived and records them sorted, for events whose
    /// relative order ZooKeeper leaves to hash-set iteration (several ephemerals deleted
    /// by one closeSession or expiry). Anything else is recorded as it comes.
    pub async fn events_unordered(&mut self, label: &str, n: usize) -> Res {
        self.reading(label)?.events_any_order(WAIT, n).await
    }

    /// The next thing on `label` within `ms`, NOT recorded (the scenario records what it
    /// can compare), or `None` on timeout.
    pub async fn take(&mut self, label: &str, ms: u64) -> Res<Option<Incoming>> {
        self.reading(label)?.take(Duration::from_millis(ms)).await
    }

    /// Records an incoming item as an uncompared line (a documented allowed difference).
    pub fn allowed_incoming(&mut self, label: &str, inc: &Incoming) {
        self.rec.not_compared(label, inc);
    }

    /// Records whatever arrives on `label` within `ms` (normally nothing: that is the point).
    pub async fn quiet(&mut self, label: &str, ms: u64) -> Res {
        self.reading(label)?.quiet(Duration::from_millis(ms)).await
    }

    /// Reads until the server closes `label`'s connection; records "still open" if it
    /// does not within `ms`. Returns whether it closed.
    pub async fn wait_closed(&mut self, label: &str, ms: u64) -> Res<bool> {
        let wait = Duration::from_millis(ms);
        self.reading(label)?.wait_closed(wait).await
    }

    /// Like [`wait_closed`](Self::wait_closed) but records nothing comparable: for the
    /// documented allowed differences. Returns whether it closed.
    pub async fn probe_closed(&mut self, label: &str, ms: u64) -> Res<bool> {
        let wait = Duration::from_millis(ms);
        self.reading(label)?.probe_closed(wait).await
    }

    // ---- request/response ----------------------------------------------------------------

    /// Sends `req` and reads until its reply; fails if the connection closes first.
    pub async fn call(&mut self, label: &str, req: Request) -> Res<Reply> {
        let write = super::req::is_write(&req);
        let xid = self.send(label, req).await?;
        let r = self.reply(label, xid).await?;
        if write {
            tokio::time::sleep(AFTER_WRITE).await;
        }
        Ok(r)
    }

    /// Sends `req` and reads until its reply or a close (`None`).
    pub async fn try_call(&mut self, label: &str, req: Request) -> Res<Option<Reply>> {
        let write = super::req::is_write(&req);
        let xid = self.send(label, req).await?;
        let r = self.reply_or_close(label, xid).await?;
        if write {
            tokio::time::sleep(AFTER_WRITE).await;
        }
        Ok(r)
    }

    /// Sends `req` with a chosen xid and reads until its reply.
    pub async fn call_xid(&mut self, label: &str, xid: i32, req: Request) -> Res<Reply> {
        let write = super::req::is_write(&req);
        self.send_xid(label, xid, req).await?;
        let r = self.reply(label, xid).await?;
        if write {
            tokio::time::sleep(AFTER_WRITE).await;
        }
        Ok(r)
    }

    /// A ping (xid -2) and its reply.
    pub async fn ping(&mut self, label: &str) -> Res<Reply> {
        self.call_xid(label, jute::xid::PING, Request::Ping).await
    }

    /// SetWatches (xid -8) and its reply (events it fires are recorded as they come).
    pub async fn set_watches(&mut self, label: &str, sw: jute::SetWatches) -> Res<Reply> {
        self.call_xid(label, jute::xid::SET_WATCHES, Request::SetWatches(sw))
            .await
    }

    /// An auth packet (xid -4) and its reply, or `None` if the server closed instead.
    pub async fn auth(&mut self, label: &str, scheme: &str, auth: &[u8]) -> Res<Option<Reply>> {
        let pkt = jute::AuthPacket {
            auth_type: 0,
            scheme: scheme.into(),
            auth: Some(Bytes::copy_from_slice(auth)),
        };
        self.send_xid(label, jute::xid::AUTH, Request::Auth(pkt))
            .await?;
        self.reply_or_close(label, jute::xid::AUTH).await
    }

    /// closeSession and its reply; the session is then gone.
    pub async fn close_session(&mut self, label: &str) -> Res<Option<Reply>> {
        let r = self.try_call(label, Request::CloseSession).await?;
        if r.as_ref().map(|r| r.err == 0).unwrap_or(false) {
            self.forget(label);
        }
        Ok(r)
    }

    pub async fn sleep(&mut self, ms: u64) {
        tokio::time::sleep(Duration::from_millis(ms)).await;
    }

    // ---- set-up and clean-up (not recorded) ------------------------------------------------

    /// Creates the scenario's root with a throw-away session.
    pub async fn create_root(&self) -> Result<(), String> {
        setup::create_root(self.addr, &self.root, WAIT).await
    }

    /// Closes every session the scenario left open (so no expiry happens later, during
    /// another scenario) and deletes the scenario's subtree.
    pub async fn cleanup(&mut self) {
        let short = Duration::from_secs(3);
        self.sessions.close_all(self.addr, short).await;
        if !self.root.is_empty() {
            setup::delete_root(self.addr, &self.root, short).await;
        }
    }
}
