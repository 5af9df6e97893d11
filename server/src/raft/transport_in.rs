//! What arrives from the peers: connections they dialled to us (a hello first, then
//! frames) and, on the connections we dialled, what they send back (a hello-back first).
//! Every frame goes to the Raft thread's inbox.
//!
//! A peer that says in its hello that it reads back (`duplex`) gets our hello-back at once
//! and a writer on its connection: the way back (`transport_routes.rs`) that this member's
//! sender to that peer takes while it cannot dial the peer itself.

use std::sync::mpsc::Sender;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use protobuf::Message as _;
use raft::eraftpb::Message;
use tokio::io::{AsyncReadExt, AsyncWriteExt, ReadHalf, WriteHalf};
use tokio::net::TcpListener;
use tokio::sync::mpsc;

use super::input::{Input, PeerIdentity};
use super::transport_routes::Routes;
use super::transport_tls::{self, PeerStream, QuorumTls};
use super::transport_wire::{
    get_identity, hello, Announced, OutFrame, HELLO_BASE, KIND_FORWARD, KIND_HELLO, KIND_RAFT,
    KIND_STATUS, KIND_TOUCH, MAX_FRAME, PROTOCOL, QUEUE,
};
use crate::state::command::{AuthCache, Command};

pub type PeerRead = ReadHalf<PeerStream>;
pub type PeerWrite = WriteHalf<PeerStream>;

/// What the accepting side needs to know of this member.
pub struct Local {
    pub me: u64,
    pub announced: Arc<Announced>,
    pub inbox: Sender<Input>,
    pub tls: Option<Arc<QuorumTls>>,
    pub routes: Arc<Routes>,
}

pub async fn accept_loop(listener: TcpListener, local: Arc<Local>) {
    loop {
        match listener.accept().await {
            Ok((stream, addr)) => {
                let _ = stream.set_nodelay(true);
                let local = local.clone();
                tokio::spawn(async move {
                    let Ok(stream) = transport_tls::inbound(&local.tls, stream, addr).await else {
                        return;
                    };
                    if let Err(e) = receive(stream, &local).await {
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
pub enum ReceiveError {
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("bad frame: {0}")]
    Bad(String),
}

pub async fn read_frame(
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

/// A hello's sender, what it says of its data directory, and whether it reads back.
pub fn parse_hello(mut hello: Bytes) -> Result<(u64, PeerIdentity, bool), ReceiveError> {
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
    let (identity, duplex) = get_identity(&mut hello).unwrap_or((
        PeerIdentity {
            incarnation: 0,
            trusted: true,
            seed: false,
            last_index: u64::MAX,
        },
        false,
    ));
    Ok((from, identity, duplex))
}

/// A connection a peer dialled to us.
async fn receive(stream: PeerStream, local: &Local) -> Result<(), ReceiveError> {
    let (mut rd, wr) = tokio::io::split(stream);
    let mut buf = BytesMut::with_capacity(64 * 1024);
    let Some((KIND_HELLO, body)) = read_frame(&mut rd, &mut buf).await? else {
        return Err(ReceiveError::Bad("expected hello".into()));
    };
    let (from, identity, duplex) = parse_hello(body)?;
    if local
        .inbox
        .send(Input::PeerIdentity(from, identity))
        .is_err()
    {
        return Ok(());
    }
    let conn = local.routes.conn_id();
    let writer = duplex.then(|| {
        let (tx, rx) = mpsc::channel(QUEUE);
        let back = hello(local.me, &local.announced.get(), false);
        let _ = tx.try_send(OutFrame {
            bytes: back,
            snapshot_to: None,
        });
        local.routes.set_back(from, conn, tx);
        tokio::spawn(write_back(wr, rx, local.inbox.clone()))
    });
    let live = local.routes.up(from);
    let result = receive_frames(&mut rd, &mut buf, from, &local.inbox).await;
    local.routes.clear_back(from, conn);
    if let Some(w) = writer {
        w.abort();
    }
    drop(live);
    result
}

/// Writes what this member sends back to a peer on the connection the peer dialled.
async fn write_back(mut w: PeerWrite, mut rx: mpsc::Receiver<OutFrame>, inbox: Sender<Input>) {
    let mut buf = BytesMut::with_capacity(64 * 1024);
    while let Some(f) = rx.recv().await {
        if write_batch(&mut w, f, &mut rx, &mut buf, &inbox)
            .await
            .is_err()
        {
            return;
        }
    }
}

/// Writes `first` and whatever else is queued (up to 1 MiB) to a peer connection in one go,
/// and tells the Raft thread how the snapshots among them went.
pub async fn write_batch(
    w: &mut PeerWrite,
    first: OutFrame,
    rx: &mut mpsc::Receiver<OutFrame>,
    buf: &mut BytesMut,
    inbox: &Sender<Input>,
) -> std::io::Result<()> {
    let mut snapshots: Vec<u64> = first.snapshot_to.into_iter().collect();
    buf.put_slice(&first.bytes);
    while buf.len() < 1 << 20 {
        match rx.try_recv() {
            Ok(f) => {
                buf.put_slice(&f.bytes);
                snapshots.extend(f.snapshot_to);
            }
            Err(_) => break,
        }
    }
    let result = match w.write_all(buf).await {
        Ok(()) => w.flush().await,
        Err(e) => Err(e),
    };
    buf.clear();
    for s in snapshots {
        let _ = inbox.send(Input::SnapshotStatus {
            to: s,
            ok: result.is_ok(),
        });
    }
    result
}

/// What a peer sends back on a connection we dialled (its hello-back already read).
pub async fn read_dialled(
    mut rd: PeerRead,
    mut buf: BytesMut,
    from: u64,
    inbox: Sender<Input>,
    routes: Arc<Routes>,
) {
    let _live = routes.up(from);
    if let Err(e) = receive_frames(&mut rd, &mut buf, from, &inbox).await {
        tracing::debug!(peer = from, "dialled peer connection closed: {e}");
    }
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
                Some((identity, _)) => Input::PeerIdentity(from, identity),
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
