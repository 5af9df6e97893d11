//! Member-to-member TCP (TLS with `sslQuorum`, see `transport_tls.rs`): Raft messages,
//! writes forwarded from followers to the leader, and session touches.
//!
//! Each member listens on its peer port and keeps one outbound connection per peer, opened
//! at start and reopened with back-off after a failure (once there is something to send).
//! Frames are `u32 length | u8 kind | payload`; a connection starts with a hello naming the
//! sender and what it says of its data directory (its incarnation, whether it is trusted,
//! its last log index: see `trust.rs`), so the receiver knows it before any Raft message
//! from that connection; a status frame says it again when it changes. (An earlier build's
//! hello ends after the protocol number, and an earlier build ignores what follows it in
//! ours.) Outbound queues are
//! bounded: when one is full the message is dropped and the peer reported unreachable to
//! Raft, which retries on its own schedule. A snapshot message is reported delivered (or
//! failed) to Raft once written, as raft-rs requires.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::Sender;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use parking_lot::RwLock;
use protobuf::Message as _;
use raft::eraftpb::{Message, MessageType};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

use super::input::{Input, PeerIdentity};
use super::transport_tls::{self, PeerRead, QuorumTls};
use crate::state::command::{AuthCache, Command};

/// How the Raft layer reaches the other members: [`Transport`] in a running member, an
/// in-memory network in the Raft layer's test harness.
pub trait Peers: Send + Sync {
    /// Sends a Raft message. A message that cannot be queued is dropped and the peer
    /// reported unreachable (and a snapshot reported failed) to the Raft thread.
    fn send_raft(&self, msg: &Message);
    /// Forwards client commands to the leader; false if they could not be queued (they
    /// stay with the caller, to be forwarded again).
    fn forward(&self, to: u64, commands: &[Command]) -> bool;
    /// Reports sessions with traffic on this member to the leader.
    fn touch(&self, to: u64, sessions: &[i64]);
    /// The members of the committed configuration and their peer addresses (a reconfig
    /// changed them): new ones become reachable, moved ones are reached at their new
    /// address.
    fn set_members(&self, _members: &HashMap<u64, SocketAddr>) {}
    /// What this member says of its data directory from now on, in every hello; with
    /// `tell_now`, also to every peer at once (its trust or incarnation changed). No
    /// default: a wrapper that dropped it would leave the peers with a stale word.
    fn announce(&self, me: PeerIdentity, tell_now: bool);
}

impl Peers for Transport {
    fn send_raft(&self, msg: &Message) {
        self.send_raft_message(msg);
    }

    fn forward(&self, to: u64, commands: &[Command]) -> bool {
        self.forward_commands(to, commands)
    }

    fn touch(&self, to: u64, sessions: &[i64]) {
        self.touch_sessions(to, sessions);
    }

    fn announce(&self, me: PeerIdentity, tell_now: bool) {
        self.announced.set(me);
        if !tell_now {
            return;
        }
        let bytes = frame(KIND_STATUS, |b| put_identity(b, &me));
        for (_, tx) in self.peers.read().values() {
            let _ = tx.try_send(OutFrame {
                bytes: bytes.clone(),
                snapshot_to: None,
            });
        }
    }

    fn set_members(&self, members: &HashMap<u64, SocketAddr>) {
        let mut peers = self.peers.write();
        for (id, addr) in members {
            if *id == self.me || peers.get(id).is_some_and(|(a, _)| a == addr) {
                continue;
            }
            tracing::info!(peer = id, %addr, "peer address from the committed configuration");
            let (tx, rx) = mpsc::channel(QUEUE);
            // Replacing the sender ends the old sender task.
            peers.insert(*id, (*addr, tx));
            let link = Link {
                me: self.me,
                to: *id,
                addr: *addr,
                inbox: self.inbox.clone(),
                tls: self.tls.clone(),
                announced: self.announced.clone(),
            };
            self.runtime.spawn(sender_loop(link, rx));
        }
    }
}

const KIND_HELLO: u8 = 0;
const KIND_RAFT: u8 = 1;
const KIND_FORWARD: u8 = 2;
const KIND_TOUCH: u8 = 3;
/// What a peer says of its data directory, when it changes (the hello says it first).
const KIND_STATUS: u8 = 4;
const PROTOCOL: u32 = 1;
/// The hello's length up to the protocol number (an earlier build's whole hello).
const HELLO_BASE: usize = 12;
/// What follows it in ours: incarnation (u64), flags (u8: bit 0 trusted, bit 1 seed), last
/// index (u64).
const IDENTITY_LEN: usize = 17;
/// Frames up to 1 GiB (a snapshot travels as one frame).
const MAX_FRAME: usize = 1 << 30;
const QUEUE: usize = 4096;

struct OutFrame {
    bytes: Bytes,
    /// Set for a snapshot message: report the outcome to Raft.
    snapshot_to: Option<u64>,
}

fn frame(kind: u8, payload: impl FnOnce(&mut BytesMut)) -> Bytes {
    let mut b = BytesMut::with_capacity(64);
    b.put_u32(0);
    b.put_u8(kind);
    payload(&mut b);
    let len = (b.len() - 4) as u32;
    b[..4].copy_from_slice(&len.to_be_bytes());
    b.freeze()
}

/// A peer's address and the queue of its sender task.
type PeerQueue = (SocketAddr, mpsc::Sender<OutFrame>);

/// What this member says of itself in each hello (the Raft thread keeps it current).
#[derive(Default)]
struct Announced {
    incarnation: AtomicU64,
    trusted: AtomicBool,
    seed: AtomicBool,
    last_index: AtomicU64,
}

impl Announced {
    fn set(&self, me: PeerIdentity) {
        self.incarnation.store(me.incarnation, Ordering::Relaxed);
        self.trusted.store(me.trusted, Ordering::Relaxed);
        self.seed.store(me.seed, Ordering::Relaxed);
        self.last_index.store(me.last_index, Ordering::Relaxed);
    }

    fn get(&self) -> PeerIdentity {
        PeerIdentity {
            incarnation: self.incarnation.load(Ordering::Relaxed),
            trusted: self.trusted.load(Ordering::Relaxed),
            seed: self.seed.load(Ordering::Relaxed),
            last_index: self.last_index.load(Ordering::Relaxed),
        }
    }
}

fn put_identity(b: &mut BytesMut, me: &PeerIdentity) {
    b.put_u64(me.incarnation);
    b.put_u8(u8::from(me.trusted) | u8::from(me.seed) << 1);
    b.put_u64(me.last_index);
}

/// Reads what [`put_identity`] wrote; `None` if there are not enough bytes.
fn get_identity(b: &mut Bytes) -> Option<PeerIdentity> {
    if b.len() < IDENTITY_LEN {
        return None;
    }
    let incarnation = b.get_u64();
    let flags = b.get_u8();
    Some(PeerIdentity {
        incarnation,
        trusted: flags & 1 != 0,
        seed: flags & 2 != 0,
        last_index: b.get_u64(),
    })
}

/// One outbound link to a peer: who we are, where it is, how to report to the Raft thread.
struct Link {
    me: u64,
    to: u64,
    addr: SocketAddr,
    inbox: Sender<Input>,
    tls: Option<Arc<QuorumTls>>,
    announced: Arc<Announced>,
}

/// Handle for sending to peers; cheap to clone.
#[derive(Clone)]
pub struct Transport {
    me: u64,
    /// Each peer's address and the queue of its sender task.
    peers: Arc<RwLock<HashMap<u64, PeerQueue>>>,
    inbox: Sender<Input>,
    /// Where sender tasks for peers added later run (the Raft thread is no tokio thread).
    runtime: tokio::runtime::Handle,
    /// Quorum TLS (`sslQuorum`), for peers added later too.
    tls: Option<Arc<QuorumTls>>,
    announced: Arc<Announced>,
}

impl Transport {
    /// Listens on `listen` and starts one sender task per peer, on the current runtime;
    /// each says `identity` in its hello until the Raft thread announces otherwise.
    pub async fn start(
        me: u64,
        listen: SocketAddr,
        peers: HashMap<u64, SocketAddr>,
        inbox: Sender<Input>,
        tls: Option<Arc<QuorumTls>>,
        identity: PeerIdentity,
    ) -> std::io::Result<Transport> {
        let listener = TcpListener::bind(listen).await?;
        tokio::spawn(accept_loop(listener, inbox.clone(), tls.clone()));
        let announced = Arc::new(Announced::default());
        announced.set(identity);
        let mut senders = HashMap::new();
        for (id, addr) in peers {
            if id == me {
                continue;
            }
            let (tx, rx) = mpsc::channel(QUEUE);
            senders.insert(id, (addr, tx));
            let link = Link {
                me,
                to: id,
                addr,
                inbox: inbox.clone(),
                tls: tls.clone(),
                announced: announced.clone(),
            };
            tokio::spawn(sender_loop(link, rx));
        }
        Ok(Transport {
            me,
            peers: Arc::new(RwLock::new(senders)),
            inbox,
            runtime: tokio::runtime::Handle::current(),
            tls,
            announced,
        })
    }

    fn push(&self, to: u64, out: OutFrame) -> bool {
        match self.peers.read().get(&to) {
            Some((_, tx)) => tx.try_send(out).is_ok(),
            None => false,
        }
    }

    /// Sends a Raft message; false if it had to be dropped (the Raft thread is told).
    fn send_raft_message(&self, msg: &Message) -> bool {
        let bytes = match msg.write_to_bytes() {
            Ok(b) => b,
            Err(e) => {
                tracing::error!("cannot encode a raft message: {e}");
                return false;
            }
        };
        let snapshot_to = (msg.get_msg_type() == MessageType::MsgSnapshot).then_some(msg.to);
        let ok = self.push(
            msg.to,
            OutFrame {
                bytes: frame(KIND_RAFT, |b| b.put_slice(&bytes)),
                snapshot_to,
            },
        );
        if !ok {
            let _ = self.inbox.send(Input::Unreachable(msg.to));
            if snapshot_to.is_some() {
                let _ = self.inbox.send(Input::SnapshotStatus {
                    to: msg.to,
                    ok: false,
                });
            }
        }
        ok
    }

    fn forward_commands(&self, to: u64, commands: &[Command]) -> bool {
        let bytes = frame(KIND_FORWARD, |b| {
            b.put_u32(commands.len() as u32);
            for c in commands {
                c.encode(b);
            }
        });
        self.push(
            to,
            OutFrame {
                bytes,
                snapshot_to: None,
            },
        )
    }

    fn touch_sessions(&self, to: u64, sessions: &[i64]) -> bool {
        let bytes = frame(KIND_TOUCH, |b| {
            b.put_u32(sessions.len() as u32);
            for s in sessions {
                b.put_i64(*s);
            }
        });
        self.push(
            to,
            OutFrame {
                bytes,
                snapshot_to: None,
            },
        )
    }
}

async fn sender_loop(link: Link, mut rx: mpsc::Receiver<OutFrame>) {
    let Link {
        me,
        to,
        addr,
        inbox,
        tls,
        announced,
    } = link;
    let mut backoff = Duration::from_millis(50);
    // Until a hello has gone through once, the peer is dialled without waiting for
    // something to send (with back-off), so that it hears what this member says of its
    // data directory even when this member has nothing to tell it (an untrusted member
    // neither campaigns nor answers); later connections wait for something to send.
    let mut introduced = false;
    'reconnect: loop {
        let mut pending = None;
        if introduced {
            let Some(first) = rx.recv().await else { return };
            pending = Some(first);
        } else if rx.is_closed() && rx.is_empty() {
            return;
        }
        let stream =
            match tokio::time::timeout(Duration::from_secs(2), TcpStream::connect(addr)).await {
                Ok(Ok(s)) => s,
                Ok(Err(e)) => {
                    tracing::debug!(peer = to, %addr, "connect failed: {e}");
                    fail(&inbox, to, pending.take(), &mut rx);
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_secs(1));
                    continue;
                }
                Err(_) => {
                    fail(&inbox, to, pending.take(), &mut rx);
                    if !introduced {
                        tokio::time::sleep(backoff).await;
                    }
                    continue;
                }
            };
        let _ = stream.set_nodelay(true);
        let mut w = match transport_tls::outbound(&tls, stream, to, addr).await {
            Ok(w) => w,
            Err(_) => {
                fail(&inbox, to, pending.take(), &mut rx);
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(1));
                continue;
            }
        };
        let hello = frame(KIND_HELLO, |b| {
            b.put_u64(me);
            b.put_u32(PROTOCOL);
            put_identity(b, &announced.get());
        });
        if w.write_all(&hello).await.is_err() || w.flush().await.is_err() {
            fail(&inbox, to, pending.take(), &mut rx);
            if !introduced {
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(1));
            }
            continue;
        }
        introduced = true;
        backoff = Duration::from_millis(50);
        tracing::info!(peer = to, %addr, "connected to peer");
        // When this connection's first frames went out: a write that fails soon after
        // them is the mark of a peer that refused our certificate.
        let mut first_frames: Option<std::time::Instant> = None;
        let mut buf = BytesMut::with_capacity(64 * 1024);
        loop {
            let mut snapshots = Vec::new();
            let mut next = pending.take();
            if next.is_none() {
                next = rx.recv().await;
            }
            let Some(f) = next else { return };
            buf.put_slice(&f.bytes);
            snapshots.extend(f.snapshot_to);
            while buf.len() < 1 << 20 {
                match rx.try_recv() {
                    Ok(f) => {
                        buf.put_slice(&f.bytes);
                        snapshots.extend(f.snapshot_to);
                    }
                    Err(_) => break,
                }
            }
            let first = *first_frames.get_or_insert_with(std::time::Instant::now);
            let result = match w.write_all(&buf).await {
                Ok(()) => w.flush().await,
                Err(e) => Err(e),
            };
            buf.clear();
            let ok = result.is_ok();
            for s in snapshots {
                let _ = inbox.send(Input::SnapshotStatus { to: s, ok });
            }
            if let Err(e) = result {
                if transport_tls::dials_tls(&tls) && first.elapsed() < Duration::from_secs(2) {
                    // A member that refuses our certificate after the handshake (its host
                    // name, say) just closes the connection.
                    tracing::warn!(
                        peer = to,
                        %addr,
                        "quorum TLS: member {to} at {addr} closed the connection right after \
                         the handshake ({e}): it may refuse our certificate (see its log)"
                    );
                }
                tracing::info!(peer = to, "peer connection lost: {e}");
                let _ = inbox.send(Input::Unreachable(to));
                continue 'reconnect;
            }
        }
    }
}

/// The peer cannot be reached: tell Raft, and drop what is queued for it (Raft resends
/// what still matters once the peer answers again).
fn fail(
    inbox: &Sender<Input>,
    to: u64,
    frame: Option<OutFrame>,
    rx: &mut mpsc::Receiver<OutFrame>,
) {
    let _ = inbox.send(Input::Unreachable(to));
    let mut dropped = frame.into_iter().collect::<Vec<_>>();
    while let Ok(f) = rx.try_recv() {
        dropped.push(f);
    }
    for f in dropped {
        if let Some(s) = f.snapshot_to {
            let _ = inbox.send(Input::SnapshotStatus { to: s, ok: false });
        }
    }
}

async fn accept_loop(listener: TcpListener, inbox: Sender<Input>, tls: Option<Arc<QuorumTls>>) {
    loop {
        match listener.accept().await {
            Ok((stream, addr)) => {
                let _ = stream.set_nodelay(true);
                let inbox = inbox.clone();
                let tls = tls.clone();
                tokio::spawn(async move {
                    let Ok(stream) = transport_tls::inbound(&tls, stream, addr).await else {
                        return;
                    };
                    if let Err(e) = receive(stream, inbox).await {
                        tracing::debug!(%addr, "peer connection closed: {e}");
                    }
                });
            }
            Err(e) => {
                tracing::warn!("peer accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

#[derive(Debug, thiserror::Error)]
enum ReceiveError {
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("bad frame: {0}")]
    Bad(String),
}

async fn read_frame(
    stream: &mut PeerRead,
    buf: &mut BytesMut,
) -> Result<Option<(u8, Bytes)>, ReceiveError> {
    loop {
        if buf.len() >= 4 {
            let len = u32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]) as usize;
            if len == 0 || len > MAX_FRAME {
                return Err(ReceiveError::Bad(format!("length {len}")));
            }
            if buf.len() >= 4 + len {
                buf.advance(4);
                let mut body = buf.split_to(len).freeze();
                let kind = body.get_u8();
                return Ok(Some((kind, body)));
            }
            buf.reserve(4 + len - buf.len());
        }
        if stream.read_buf(buf).await? == 0 {
            return Ok(None);
        }
    }
}

async fn receive(mut stream: PeerRead, inbox: Sender<Input>) -> Result<(), ReceiveError> {
    let mut buf = BytesMut::with_capacity(64 * 1024);
    let Some((KIND_HELLO, mut hello)) = read_frame(&mut stream, &mut buf).await? else {
        return Err(ReceiveError::Bad("expected hello".into()));
    };
    if hello.len() < HELLO_BASE {
        return Err(ReceiveError::Bad("short hello".into()));
    }
    let from = hello.get_u64();
    let protocol = hello.get_u32();
    if protocol != PROTOCOL {
        return Err(ReceiveError::Bad(format!(
            "peer {from} speaks protocol {protocol}"
        )));
    }
    // An earlier build's hello says nothing of its store, which predates incarnations.
    let identity = get_identity(&mut hello).unwrap_or(PeerIdentity {
        incarnation: 0,
        trusted: true,
        seed: false,
        last_index: u64::MAX,
    });
    if inbox.send(Input::PeerIdentity(from, identity)).is_err() {
        return Ok(());
    }
    let result = receive_frames(&mut stream, &mut buf, from, &inbox).await;
    let _ = inbox.send(Input::PeerGone(from));
    result
}

/// The frames of one peer connection, past its hello, into the inbox.
async fn receive_frames(
    stream: &mut PeerRead,
    buf: &mut BytesMut,
    from: u64,
    inbox: &Sender<Input>,
) -> Result<(), ReceiveError> {
    while let Some((kind, mut body)) = read_frame(stream, buf).await? {
        let input = match kind {
            KIND_RAFT => {
                let mut m = Message::default();
                m.merge_from_bytes(&body)
                    .map_err(|e| ReceiveError::Bad(format!("raft message from {from}: {e}")))?;
                Input::Raft(Box::new(m))
            }
            KIND_FORWARD => {
                let mut r = jute::Reader::new(body);
                let n = r.read_i32().map_err(|e| ReceiveError::Bad(e.to_string()))?;
                let mut commands = Vec::with_capacity(n.clamp(0, 1 << 16) as usize);
                let mut cache = AuthCache::default();
                for _ in 0..n.max(0) {
                    commands.push(
                        Command::decode_with(&mut r, &mut cache)
                            .map_err(|e| ReceiveError::Bad(e.to_string()))?,
                    );
                }
                Input::Forwarded(commands)
            }
            KIND_TOUCH => {
                if body.len() < 4 {
                    return Err(ReceiveError::Bad("short touch".into()));
                }
                let n = body.get_u32() as usize;
                if body.len() < n * 8 {
                    return Err(ReceiveError::Bad("short touch".into()));
                }
                Input::Touch((0..n).map(|_| body.get_i64()).collect())
            }
            KIND_STATUS => match get_identity(&mut body) {
                Some(identity) => Input::PeerIdentity(from, identity),
                None => return Err(ReceiveError::Bad("short status".into())),
            },
            other => return Err(ReceiveError::Bad(format!("kind {other}"))),
        };
        if inbox.send(input).is_err() {
            return Ok(());
        }
    }
    Ok(())
}
