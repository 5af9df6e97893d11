//! Member-to-member TCP (TLS with `sslQuorum`, see `transport_tls.rs`): Raft messages,
//! writes forwarded from followers to the leader, and session touches.
//!
//! Each member listens on its peer port and keeps one outbound connection per peer, opened
//! at start and reopened with back-off after a failure (`transport_out.rs`). Frames are
//! `u32 length | u8 kind | payload`; a connection starts with a hello naming the sender
//! and what it says of its data directory (its incarnation, whether it is trusted, its last
//! log index: see `trust.rs`), so the receiver knows it before any Raft message from that
//! connection; a status frame says it again when it changes. (An earlier build's hello ends
//! after the protocol number, and an earlier build ignores what follows it in ours.)
//!
//! Connections carry frames both ways: the accepting member answers a hello that says it
//! reads back (`duplex`) with its own hello, and sends over that connection while it cannot
//! dial the other member itself (`transport_in.rs`, `transport_routes.rs`). So a pair of
//! members stays connected under a one-way cut, where only one of them can dial, as
//! ZooKeeper's learners do over their one connection to the leader. Outbound queues are
//! bounded: when one is full the message is dropped and the peer reported unreachable to
//! Raft, which retries on its own schedule. A snapshot message is reported delivered (or
//! failed) to Raft once written, as raft-rs requires.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::mpsc::Sender;
use std::sync::Arc;

use bytes::BufMut;
use parking_lot::RwLock;
use protobuf::Message as _;
use raft::eraftpb::{Message, MessageType};
use tokio::net::TcpListener;
use tokio::sync::mpsc;

use super::input::{Input, PeerIdentity};
use super::transport_in::{accept_loop, Local};
use super::transport_out::{sender_loop, Link};
use super::transport_routes::Routes;
use super::transport_tls::QuorumTls;
use super::transport_wire::{
    frame, put_identity, Announced, OutFrame, KIND_FORWARD, KIND_RAFT, KIND_STATUS, KIND_TOUCH,
    QUEUE,
};
use crate::state::command::Command;

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
        let bytes = frame(KIND_STATUS, |b| put_identity(b, &me, false));
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
            self.add_peer(&mut peers, *id, *addr);
        }
    }
}

/// A peer's address and the queue of its sender task.
type PeerQueue = (SocketAddr, mpsc::Sender<OutFrame>);

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
    routes: Arc<Routes>,
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
        let announced = Arc::new(Announced::default());
        announced.set(identity);
        let routes = Arc::new(Routes::new(inbox.clone()));
        let local = Local {
            me,
            announced: announced.clone(),
            inbox: inbox.clone(),
            tls: tls.clone(),
            routes: routes.clone(),
        };
        tokio::spawn(accept_loop(listener, Arc::new(local)));
        let transport = Transport {
            me,
            peers: Arc::new(RwLock::new(HashMap::new())),
            inbox,
            runtime: tokio::runtime::Handle::current(),
            tls,
            announced,
            routes,
        };
        {
            let mut senders = transport.peers.write();
            for (id, addr) in peers {
                if id != me {
                    transport.add_peer(&mut senders, id, addr);
                }
            }
        }
        Ok(transport)
    }

    /// Starts the sender to peer `id` at `addr` (replacing the sender ends the old one's
    /// task).
    fn add_peer(&self, peers: &mut HashMap<u64, PeerQueue>, id: u64, addr: SocketAddr) {
        let (tx, rx) = mpsc::channel(QUEUE);
        peers.insert(id, (addr, tx));
        let link = Link {
            me: self.me,
            to: id,
            addr,
            inbox: self.inbox.clone(),
            tls: self.tls.clone(),
            announced: self.announced.clone(),
            routes: self.routes.clone(),
        };
        self.runtime.spawn(sender_loop(link, rx));
    }

    /// Queues `out` for peer `to`: on its sender, or, for a peer the configuration does
    /// not name yet (a server that dialled us to join, `membership.rs`), back over the
    /// connection it dialled.
    fn push(&self, to: u64, out: OutFrame) -> bool {
        let sender = self.peers.read().get(&to).map(|(_, tx)| tx.clone());
        match sender {
            Some(tx) => tx.try_send(out).is_ok(),
            None => self.routes.send_back(to, out).is_ok(),
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
