//! One client connection: handshake, then requests in order.
//!
//! Requests are taken off the socket as fast as they arrive (pipelining): the writes of a
//! read go to the Raft thread together (`submit.rs`) and the connection moves on. Replies leave in request order and a read
//! sees the session's earlier writes: requests that arrive behind an outstanding write or
//! sync wait in the connection's [`Pipeline`], which the apply loop flushes when the write
//! is applied (see [`super::pipeline`]).
//!
//! Back-pressure: the connection stops reading while its outbox holds too much unsent data
//! or too many requests are outstanding, so a client that does not read its replies cannot
//! make the server buffer without bound.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use bytes::{Bytes, BytesMut};
use jute::{ConnectRequest, ConnectResponse, Reader, Record, RequestHeader};
use parking_lot::Mutex;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc;

use super::auth::{Cx, Guard, Verdict};
use super::completion::Completion;
use super::conn_stats::ConnStats;
use super::outbox::Outbox;
use super::pipeline::{Env, Item, Pipeline};
use super::read_only::{self, Admission, Refusal};
use super::registry::ConnEntry;
use super::session_ids::new_password;
use super::shared::Shared;
use super::stream::{self, read_at_least, read_frame, write_loop, FrameError, ReadHalf, WriteHalf};
use super::submit::Submitter;
use super::watch::WatchSlot;
use crate::raft::{Input, SyncWaiter};
use crate::state::acl;
use crate::state::command::{ClientWrite, CloseReason, Command, ConnId, Origin};
use crate::state::ops::{self, OpClass};

/// Stop reading requests while this much is waiting to be written to the client.
const READ_PAUSE_BYTES: usize = 4 * 1024 * 1024;
/// Stop reading requests while this many are outstanding on the connection.
const MAX_OUTSTANDING: usize = 10_000;
/// How long a client may take to send its handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(30);
/// The read buffer a connection starts with: a handshake or a burst of small requests.
const READ_BUFFER: usize = 2 * 1024;

/// Why a connection ended (logged).
#[derive(Debug, thiserror::Error)]
enum End {
    #[error("client closed the connection")]
    ClientClosed,
    #[error("I/O error: {0}")]
    Io(std::io::Error),
    #[error("protocol error: {0}")]
    Protocol(String),
    #[error("session closed")]
    SessionClosed,
    #[error("session expired or unknown")]
    Expired,
    #[error("leader changed with writes in flight")]
    LeaderChanged,
    #[error("member is not serving clients")]
    NotServing,
    #[error("the session could not be confirmed with the leader")]
    NoLeader,
    #[error("a write went unanswered for too long")]
    WriteTimeout,
    #[error("authentication failed")]
    AuthFailed,
    #[error(
        "the quorum is back: a read-only connection closes for the client to reconnect read-write"
    )]
    ReadOnlyOver,
}

impl From<FrameError> for End {
    fn from(e: FrameError) -> End {
        match e {
            FrameError::Protocol(m) => End::Protocol(m),
            FrameError::Io(e) => End::Io(e),
        }
    }
}

/// Serves one accepted connection until it ends. `ids` are the auth ids the transport
/// already established (a TLS client certificate's `x509` id), beside the client's `ip`.
pub async fn serve(
    shared: Arc<Shared>,
    mut rd: ReadHalf,
    wr: WriteHalf,
    peer: SocketAddr,
    ids: Vec<jute::Id>,
    guard: Guard,
) {
    // Small: an idle session keeps it for as long as it lives; a larger frame makes it grow
    // (`jute::split_frame` reserves what the frame needs).
    let mut buf = BytesMut::with_capacity(READ_BUFFER);
    let first =
        match tokio::time::timeout(HANDSHAKE_TIMEOUT, read_at_least(&mut rd, &mut buf, 4)).await {
            Ok(Ok(true)) => [buf[0], buf[1], buf[2], buf[3]],
            _ => return,
        };
    match jute::LengthPrefix::classify(first) {
        jute::LengthPrefix::FourLetterWord(word) => {
            let answer = (shared.four_letter_words)(&shared, &word, peer);
            let mut wr = wr;
            let _ = wr.write_all(answer.as_bytes()).await;
            let _ = wr.shutdown().await;
        }
        jute::LengthPrefix::Frame(_) => {
            let conn = shared.new_conn_id();
            let outbox = Arc::new(Outbox::new(shared.metrics.traffic.clone()));
            let writer = tokio::spawn(write_loop(outbox.clone(), wr));
            let end = run(
                &shared,
                conn,
                peer,
                (ids, guard),
                &mut rd,
                buf,
                outbox.clone(),
            )
            .await;
            match &end {
                End::ClientClosed | End::SessionClosed => {
                    tracing::debug!(conn, %peer, "connection ended: {end}")
                }
                _ => tracing::info!(conn, %peer, "connection closed: {end}"),
            }
            shared.registry.unregister(conn);
            shared.watches.lock().unregister(conn);
            outbox.close();
            let _ = tokio::time::timeout(Duration::from_secs(5), writer).await;
            if matches!(end, End::AuthFailed) {
                // Closing with the client's next request unread would reset the connection
                // and could discard the AUTHFAILED reply before the client reads it.
                stream::linger(&mut rd).await;
            }
        }
    }
}

struct Session {
    id: i64,
    timeout_ms: i32,
    /// Accepted in read-only mode (see `read_only.rs`): a local session, unknown to the
    /// replicated table.
    read_only: bool,
}

/// The handshake: a new session through the log, or a resumed one checked against the
/// replicated session table. Answers the client; `Err` ends the connection.
async fn handshake(
    shared: &Shared,
    conn: ConnId,
    rd: &mut ReadHalf,
    buf: &mut BytesMut,
    outbox: &Outbox,
) -> Result<Session, End> {
    let frame = tokio::time::timeout(
        HANDSHAKE_TIMEOUT,
        read_frame(rd, buf, shared.replica.config.max_buffer),
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
    let timeout = shared.replica.config.negotiate_timeout(req.timeout);
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
        });
    }
    // ZooKeeper closes the session's current connection on any attempt to resume it, before
    // it checks the password (processConnectRequest's CLIENT_RECONNECT).
    if let Some(old) = shared.registry.conn_of_session(req.session_id) {
        shared.registry.send(old, Completion::SessionClosed);
    }
    // In an ensemble the resume is confirmed with the leader (a ReadIndex round) before it
    // is answered, as ZooKeeper's follower revalidates a session with its leader: the
    // session table here is then at least the leader's, so an unknown session is really
    // gone (not merely not applied here yet), and a member whose leader is gone refuses the
    // client, which tries another member, instead of accepting a session whose writes it
    // cannot commit.
    if !shared.replica.config.is_standalone() && !shared.sync_with_leader().await {
        return Err(End::NoLeader);
    }
    match shared.lookup_session(req.session_id, &req.passwd) {
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
            })
        }
        _ => {
            respond(&ConnectResponse::expired(req.read_only));
            Err(End::Expired)
        }
    }
}

/// The handshake of a client that asked for read-only mode, on a member that cannot serve
/// writes (see `read_only.rs`).
fn read_only_handshake(
    shared: &Shared,
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
    })
}

async fn run(
    shared: &Arc<Shared>,
    conn: ConnId,
    peer: SocketAddr,
    (ids, guard): (Vec<jute::Id>, Guard),
    rd: &mut ReadHalf,
    mut buf: BytesMut,
    outbox: Arc<Outbox>,
) -> End {
    let session = match handshake(shared, conn, rd, &mut buf, &outbox).await {
        Ok(s) => s,
        Err(End::ClientClosed) => return End::ClientClosed,
        Err(e) => {
            let m = &shared.metrics;
            m.unsuccessful_handshakes.fetch_add(1, Ordering::Relaxed);
            if matches!(e, End::NotServing | End::NoLeader) {
                m.closed_not_serving.fetch_add(1, Ordering::Relaxed);
            }
            return e;
        }
    };
    shared
        .metrics
        .connections_total
        .fetch_add(1, Ordering::Relaxed);
    let (tx, mut completions) = mpsc::unbounded_channel();
    let touched = Arc::new(AtomicBool::new(true));
    let stats = Arc::new(ConnStats::default());
    stats
        .timeout_ms
        .store(i64::from(session.timeout_ms), Ordering::Relaxed);
    let pipeline = Arc::new(Mutex::new(Pipeline::new(
        conn,
        session.id,
        std::iter::once(acl::ip_id(peer.ip())).chain(ids).collect(),
        outbox.clone(),
        stats.clone(),
        tx.clone(),
    )));
    shared.watches.lock().register(conn, outbox.clone());
    let previous = shared.registry.register(
        conn,
        ConnEntry {
            session: session.id,
            completions: tx,
            touched: touched.clone(),
            peer,
            connected_at: SystemTime::now(),
            stats: stats.clone(),
            pipeline: pipeline.clone(),
        },
    );
    if let Some(old) = previous {
        // The client reconnected: its older connection goes (ZooKeeper's CLIENT_RECONNECT).
        shared.registry.send(old, Completion::SessionClosed);
    }
    // The session may have been closed between the check and the registration.
    if !session.read_only
        && !shared
            .replica
            .state
            .read()
            .sessions
            .contains_key(&session.id)
    {
        return End::Expired;
    }
    let mut c = Connection {
        shared: shared.clone(),
        conn,
        session: session.id,
        outbox,
        pipeline,
        stats,
        touched,
        read_only: session.read_only,
        guard,
        origin: Origin {
            member: shared.replica.me,
            conn,
        },
        writes: Submitter::default(),
        sync_seq: 0,
        write_timeout: Duration::from_millis(session.timeout_ms.max(0) as u64)
            .max(shared.replica.election_timeouts(3)),
    };
    c.serve(rd, &mut buf, &mut completions).await
}

struct Connection {
    shared: Arc<Shared>,
    conn: ConnId,
    session: i64,
    outbox: Arc<Outbox>,
    pipeline: Arc<Mutex<Pipeline>>,
    stats: Arc<ConnStats>,
    touched: Arc<AtomicBool>,
    /// Accepted in read-only mode: reads only, until the quorum is back.
    read_only: bool,
    /// SASL and enforced authentication (`auth.rs`).
    guard: Guard,
    origin: Origin,
    writes: Submitter,
    sync_seq: u64,
    write_timeout: Duration,
}

impl Connection {
    async fn serve(
        &mut self,
        rd: &mut ReadHalf,
        buf: &mut BytesMut,
        completions: &mut mpsc::UnboundedReceiver<Completion>,
    ) -> End {
        let max = self.shared.replica.config.max_buffer;
        loop {
            // Take every complete frame already buffered, except behind an unanswered sync:
            // what follows a sync waits for it.
            while !self.pipeline.lock().sync_pending() {
                match jute::split_frame(buf, max) {
                    Ok(Some(frame)) => {
                        if let Err(end) = self.on_frame(frame) {
                            return end;
                        }
                    }
                    Ok(None) => break,
                    Err(e) => return End::Protocol(e.to_string()),
                }
            }
            if !self.writes.submit(&self.shared.replica) {
                return End::NotServing;
            }
            if self.outbox.is_closed() {
                return End::ClientClosed;
            }
            let can_read = {
                let p = self.pipeline.lock();
                self.outbox.buffered() < READ_PAUSE_BYTES
                    && p.len() < MAX_OUTSTANDING
                    && !p.sync_pending()
            };
            tokio::select! {
                biased;
                c = completions.recv() => {
                    let Some(c) = c else { return End::NotServing };
                    if let Err(end) = self.on_completion(c) {
                        return end;
                    }
                }
                r = rd.read_buf(buf), if can_read => match r {
                    Ok(0) => return End::ClientClosed,
                    Ok(_) => {}
                    Err(e) => return End::Io(e),
                },
                _ = tokio::time::sleep(Duration::from_millis(if can_read { 1000 } else { 5 })) => {
                    if self.read_only && self.shared.replica.is_serving() {
                        return End::ReadOnlyOver;
                    }
                    if let Some(started) = self.pipeline.lock().oldest_outstanding() {
                        if started.elapsed() > self.write_timeout {
                            return End::WriteTimeout;
                        }
                    }
                }
            }
        }
    }

    fn on_frame(&mut self, frame: Bytes) -> Result<(), End> {
        self.touched.store(true, Ordering::Relaxed);
        let metrics = &self.shared.metrics;
        metrics.packets_received.fetch_add(1, Ordering::Relaxed);
        metrics
            .bytes_received
            .fetch_add(frame.len() as u64 + 4, Ordering::Relaxed);
        self.stats.received.fetch_add(1, Ordering::Relaxed);
        let mut r = Reader::new(frame);
        let header = RequestHeader::decode(&mut r)
            .map_err(|e| End::Protocol(format!("bad request header: {e}")))?;
        let body = r.take_rest();
        let started = Instant::now();
        let class = ops::info(header.op).class;
        let cx = Cx {
            pipeline: &self.pipeline,
            out: &self.outbox,
            metrics,
        };
        match self.guard.check(header.op, header.xid, &body, &cx) {
            Verdict::Pass => {}
            Verdict::Answered => return Ok(()),
            Verdict::Close => return Err(End::AuthFailed),
        }
        if self.read_only {
            let refusal = read_only::refusal(class);
            if refusal != Refusal::None {
                read_only::answer(&self.shared, &self.outbox, header.xid, &refusal);
                return match refusal {
                    Refusal::Close => Err(End::SessionClosed),
                    _ => Ok(()),
                };
            }
        }
        match class {
            OpClass::Write | OpClass::Close => {
                let closes_session = class == OpClass::Close;
                // Queue first: the reply may come back before `submit` returns.
                let auth = {
                    let mut p = self.pipeline.lock();
                    p.push(Item::Write {
                        xid: header.xid,
                        op: header.op,
                        started,
                        reply: None,
                        closes_session,
                    });
                    p.auth.clone()
                };
                let command = if closes_session {
                    Command::CloseSession {
                        session: self.session,
                        reason: CloseReason::Client {
                            origin: self.origin,
                            xid: header.xid,
                        },
                    }
                } else {
                    Command::Write(ClientWrite {
                        session: self.session,
                        xid: header.xid,
                        op: header.op,
                        origin: self.origin,
                        auth,
                        body,
                    })
                };
                self.writes.push(command);
            }
            OpClass::Sync => match jute::SyncRequest::decode(&mut Reader::new(body.clone())) {
                Ok(req) => {
                    self.sync_seq += 1;
                    let token = self.sync_seq;
                    self.pipeline.lock().push(Item::Sync {
                        xid: header.xid,
                        token,
                        path: req.path,
                        started,
                        done: false,
                    });
                    let waiter = SyncWaiter::Pipeline {
                        conn: self.conn,
                        token,
                    };
                    if !self.shared.replica.submit(Input::ReadIndex(waiter)) {
                        return Err(End::NotServing);
                    }
                }
                // Undecodable: answered in turn with MARSHALLINGERROR.
                Err(_) => self.local(header.xid, header.op, body, started),
            },
            // Answered by the guard above (auth.rs).
            OpClass::Auth => {}
            OpClass::Local | OpClass::Unknown => self.local(header.xid, header.op, body, started),
        }
        Ok(())
    }

    fn local(&self, xid: i32, op: i32, body: Bytes, started: Instant) {
        let state = self.shared.replica.state.read();
        let mut env = Env {
            state: &state,
            watches: WatchSlot::Shared(&self.shared.watches),
            metrics: &self.shared.metrics,
        };
        self.pipeline.lock().local(xid, op, body, started, &mut env);
    }

    fn on_completion(&mut self, c: Completion) -> Result<(), End> {
        match c {
            Completion::SessionClosed => Err(End::SessionClosed),
            Completion::LeaderChanged if self.pipeline.lock().has_outstanding_write() => {
                Err(End::LeaderChanged)
            }
            Completion::LeaderChanged => Ok(()),
            // A read-only connection is what stays while the member does not serve.
            Completion::StopServing if self.read_only => Ok(()),
            Completion::StopServing => Err(End::NotServing),
            Completion::Resume => Ok(()),
        }
    }
}
