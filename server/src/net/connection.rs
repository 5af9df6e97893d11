//! One client connection: handshake, then requests in order.
//!
//! Requests are taken off the socket as fast as they arrive (pipelining): the writes of a
//! read go to the Raft thread together (`submit.rs`) and the connection moves on. Replies leave in request order and a read
//! sees the session's earlier writes: requests that arrive behind an outstanding write or
//! sync wait in the connection's [`Pipeline`], which the apply loop flushes when the write
//! is applied (see [`super::pipeline`]). Under `linearizableReads` each read of the tree
//! queues behind a read barrier (a ReadIndex round shared by the reads of one round of
//! frames), and a write that arrives behind an unreleased barrier is held until it is.
//!
//! Back-pressure: the connection stops reading while its outbox holds too much unsent data
//! or too many requests are outstanding, so a client that does not read its replies cannot
//! make the server buffer without bound.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use bytes::{Bytes, BytesMut};
use jute::{Reader, Record, RequestHeader};
use parking_lot::Mutex;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::auth::{ConnAuth, ConnParts, Verdict};
use super::client_port::ClientPort;
use super::conn_events::{ConnEvent, ConnEvents};
use super::conn_stats::ConnStats;
use super::end::End;
use super::handshake::{handshake, HANDSHAKE_TIMEOUT};
use super::outbox::Outbox;
use super::pipeline::{Answering, Item, Pipeline};
use super::read_only::{self, Refusal};
use super::registry::ConnEntry;
use super::session_log::What;
use super::stream::{self, read_at_least, write_loop, ReadHalf, ReadRoom, WriteHalf};
use super::submit::Submitter;
use super::watch::WatchSlot;
use crate::raft::{Input, SyncWaiter};
use crate::state::acl;
use crate::state::command::{ClientWrite, CloseReason, Command, ConnId, Origin};
use crate::state::opcodes::{self, OpClass};

/// Stop reading requests while this much is waiting to be written to the client.
const READ_PAUSE_BYTES: usize = 4 * 1024 * 1024;
/// Stop reading requests while this many are outstanding on the connection.
const MAX_OUTSTANDING: usize = 10_000;

/// Serves one accepted connection until it ends. `ids` are the auth ids the transport
/// already established (a TLS client certificate's `x509` id), beside the client's `ip`;
/// `secure`: the connection is TLS.
pub async fn serve(
    shared: Arc<ClientPort>,
    mut rd: ReadHalf,
    wr: WriteHalf,
    peer: SocketAddr,
    (ids, secure): (Vec<jute::Id>, bool),
    guard: ConnAuth,
) {
    // Small, for a handshake; `ReadRoom` sizes it for what follows, and a larger frame makes
    // it grow (`jute::split_frame` reserves what the frame needs).
    let mut buf = BytesMut::with_capacity(ReadRoom::MIN);
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
            // Boxed: awaited inline, `run`'s future and the arguments it was made from would
            // both be part of this one (a kilobyte more per connection).
            let end = Box::pin(run(
                &shared,
                conn,
                peer,
                (ids, guard, secure),
                &mut rd,
                buf,
                outbox.clone(),
            ))
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

async fn run(
    shared: &Arc<ClientPort>,
    conn: ConnId,
    peer: SocketAddr,
    (ids, guard, secure): (Vec<jute::Id>, ConnAuth, bool),
    rd: &mut ReadHalf,
    mut buf: BytesMut,
    outbox: Arc<Outbox>,
) -> End {
    // Boxed: the handshake's state (the request, its timers, the wait for the session)
    // would otherwise size every connection's task for as long as the connection lives.
    let session = match Box::pin(handshake(shared, conn, rd, &mut buf, &outbox)).await {
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
    let events = Arc::new(ConnEvents::default());
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
        events.clone(),
    )));
    shared.watches.lock().register(conn, outbox.clone());
    let previous = shared.registry.register(
        conn,
        ConnEntry {
            session: session.id,
            events: events.clone(),
            touched: touched.clone(),
            peer,
            connected_at: SystemTime::now(),
            secure,
            stats: stats.clone(),
            pipeline: pipeline.clone(),
        },
    );
    if let Some(old) = previous {
        // The client reconnected: its older connection goes (ZooKeeper's CLIENT_RECONNECT).
        shared.registry.send(old, ConnEvent::SessionClosed);
    }
    let connected = What::Connected {
        from: peer,
        resumed: session.resumed,
        secure,
    };
    shared.session_log.record(session.id, connected);
    // The session may have been closed between the check and the registration.
    if !session.read_only
        && !shared
            .replica
            .state
            .read()
            .sessions
            .contains_key(&session.id)
    {
        let end = End::Expired;
        shared.session_log.record(session.id, disconnected(&end));
        return end;
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
        linearizable: linearizable_reads(shared, session.read_only),
        unsent_barrier: None,
        held: None,
        write_timeout: Duration::from_millis(session.timeout_ms.max(0) as u64)
            .max(shared.replica.election_timeouts(3)),
    };
    let end = c.serve(rd, &mut buf, &events).await;
    shared.session_log.record(session.id, disconnected(&end));
    end
}

fn disconnected(end: &End) -> What {
    What::Disconnected {
        why: end.to_string().into(),
    }
}

struct Connection {
    shared: Arc<ClientPort>,
    conn: ConnId,
    session: i64,
    outbox: Arc<Outbox>,
    pipeline: Arc<Mutex<Pipeline>>,
    stats: Arc<ConnStats>,
    touched: Arc<AtomicBool>,
    /// Accepted in read-only mode: reads only, until the quorum is back.
    read_only: bool,
    /// SASL and enforced authentication (`auth.rs`).
    guard: ConnAuth,
    origin: Origin,
    writes: Submitter,
    sync_seq: u64,
    /// `linearizableReads` applies: each read of the tree waits behind a read barrier.
    linearizable: bool,
    /// A read barrier pushed this round whose ReadIndex is not asked for yet: the reads
    /// that arrive before it is share it.
    unsent_barrier: Option<u64>,
    /// A write that came in behind an unreleased read barrier: it waits for the barrier,
    /// so that it cannot change what the reads before it see.
    held: Option<Bytes>,
    write_timeout: Duration,
}

/// Whether a connection's reads wait for a ReadIndex round (`linearizableReads`): in a
/// Raft ensemble, for a read-write session. A standalone server is always current, and
/// an observer of ZooKeeper (`migrateFromZooKeeper`) serves ZooKeeper's semantics.
fn linearizable_reads(shared: &ClientPort, read_only: bool) -> bool {
    let config = shared.replica.config();
    config.linearizable_reads
        && !config.is_standalone()
        && !config.migrate_from_zookeeper
        && !read_only
}

impl Connection {
    async fn serve(&mut self, rd: &mut ReadHalf, buf: &mut BytesMut, events: &ConnEvents) -> End {
        let max = self.shared.replica.config().max_buffer;
        let mut room = ReadRoom::default();
        loop {
            // A request held behind a read barrier goes once the barrier is released.
            if self.held.is_some() && !self.pipeline.lock().barrier_pending() {
                if let Some(frame) = self.held.take() {
                    if let Err(end) = self.on_frame(frame) {
                        return end;
                    }
                }
            }
            // Take every complete frame already buffered, except behind an unanswered sync
            // or a held request: what follows waits for it.
            while self.held.is_none() && !self.pipeline.lock().sync_pending() {
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
            if !self.writes.submit(&self.shared.replica) || !self.submit_barrier() {
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
                    && self.held.is_none()
            };
            if can_read {
                room.prepare(buf);
            }
            tokio::select! {
                biased;
                pending = events.recv() => {
                    for c in pending {
                        if let Err(end) = self.on_event(c) {
                            return end;
                        }
                    }
                }
                r = rd.read_buf(buf), if can_read => match r {
                    Ok(0) => return End::ClientClosed,
                    Ok(n) => room.read(n),
                    Err(e) => return End::Io(e),
                },
                _ = tokio::time::sleep(Duration::from_millis(if can_read { 1000 } else { 5 })) => {
                    if can_read {
                        // A second without a request: an idle session keeps no read buffer.
                        room.rest(buf);
                    }
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
        if self.linearizable && self.hold_behind_barrier(&frame) {
            self.held = Some(frame);
            return Ok(());
        }
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
        let class = opcodes::info(header.op).class;
        let cx = ConnParts {
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
                    // The writes before it reach the Raft thread first, as sent.
                    if !self.writes.submit(&self.shared.replica)
                        || !self.shared.replica.submit(Input::ReadIndex(waiter))
                    {
                        return Err(End::NotServing);
                    }
                }
                // Undecodable: answered in turn with MARSHALLINGERROR.
                Err(_) => self.local(header.xid, header.op, body, started),
            },
            OpClass::Local if self.linearizable && opcodes::reads_tree(header.op) => {
                if self.unsent_barrier.is_none() {
                    self.sync_seq += 1;
                    let token = self.sync_seq;
                    self.pipeline.lock().push(Item::Barrier {
                        token,
                        started,
                        done: false,
                    });
                    self.unsent_barrier = Some(token);
                }
                self.local(header.xid, header.op, body, started);
            }
            // Answered by the guard above (auth.rs).
            OpClass::Auth => {}
            OpClass::Local | OpClass::Unknown => self.local(header.xid, header.op, body, started),
        }
        Ok(())
    }

    /// True if `frame` must wait for the read barriers before it: a write (or close) while
    /// one is unreleased, because it is proposed at once and the reads before it must not
    /// see it. Anything else queues in the pipeline behind the reads. The pipeline is told
    /// to wake the connection.
    fn hold_behind_barrier(&self, frame: &Bytes) -> bool {
        let Ok(header) = RequestHeader::decode(&mut Reader::new(frame.clone())) else {
            return false;
        };
        if !matches!(
            opcodes::info(header.op).class,
            OpClass::Write | OpClass::Close
        ) {
            return false;
        }
        let mut p = self.pipeline.lock();
        if !p.barrier_pending() {
            return false;
        }
        p.wake_after_barriers = true;
        true
    }

    /// Asks for the ReadIndex round of this round's read barrier, if there is one.
    fn submit_barrier(&mut self) -> bool {
        let Some(token) = self.unsent_barrier.take() else {
            return true;
        };
        let waiter = SyncWaiter::Pipeline {
            conn: self.conn,
            token,
        };
        self.shared.replica.submit(Input::ReadIndex(waiter))
    }

    fn local(&self, xid: i32, op: i32, body: Bytes, started: Instant) {
        let state = self.shared.replica.state.read();
        let mut env = Answering {
            state: &state,
            watches: WatchSlot::Shared(&self.shared.watches),
            metrics: &self.shared.metrics,
        };
        self.pipeline.lock().local(xid, op, body, started, &mut env);
    }

    fn on_event(&mut self, c: ConnEvent) -> Result<(), End> {
        match c {
            ConnEvent::SessionClosed => Err(End::SessionClosed),
            ConnEvent::LeaderChanged if self.pipeline.lock().has_outstanding_write() => {
                Err(End::LeaderChanged)
            }
            ConnEvent::LeaderChanged => Ok(()),
            // A read-only connection is what stays while the member does not serve.
            ConnEvent::StopServing if self.read_only => Ok(()),
            ConnEvent::StopServing => Err(End::NotServing),
            ConnEvent::Resume => Ok(()),
        }
    }
}
