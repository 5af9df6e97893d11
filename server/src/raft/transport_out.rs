//! The sender to one peer: its own dialled connection, reopened with back-off after a
//! failure, and the way back over the peer's connection to us while it cannot dial.
//!
//! A dialled connection is up once the peer's hello-back arrived on it (a connection a
//! proxy or firewall accepts and drops at once is not up); then this member also reads
//! what the peer sends back on it. An earlier build sends no hello-back: after
//! [`HELLO_BACK_WAIT`] the connection is taken as up all the same. While the dialled
//! connection is down, frames go back over the connection the peer dialled to us, if it
//! has one that reads back (`transport_routes.rs`); only frames with no way at all are
//! dropped and the peer reported unreachable to Raft.

use std::net::SocketAddr;
use std::sync::mpsc::Sender;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::sync::mpsc;

use super::input::Input;
use super::transport_in::{parse_hello, read_dialled, read_frame, write_batch, PeerWrite};
use super::transport_routes::Routes;
use super::transport_tls::{self, QuorumTls};
use super::transport_wire::{hello, Announced, OutFrame, KIND_HELLO};

/// How long a dialled peer has to send its hello-back before it is taken for an earlier
/// build (which sends none).
const HELLO_BACK_WAIT: Duration = Duration::from_secs(1);
const FIRST_BACKOFF: Duration = Duration::from_millis(50);
const MAX_BACKOFF: Duration = Duration::from_secs(1);

/// One outbound link to a peer: who we are, where it is, how to report to the Raft thread.
pub struct Link {
    pub me: u64,
    pub to: u64,
    pub addr: SocketAddr,
    pub inbox: Sender<Input>,
    pub tls: Option<Arc<QuorumTls>>,
    pub announced: Arc<Announced>,
    pub routes: Arc<Routes>,
}

impl Link {
    /// Dials the peer, says hello and waits for its hello-back: the connection's write side,
    /// with a reader of what the peer sends back running. `None` if the peer cannot be
    /// reached now.
    async fn dial(&self) -> Option<(PeerWrite, tokio::task::JoinHandle<()>)> {
        let (to, addr) = (self.to, self.addr);
        let stream =
            match tokio::time::timeout(Duration::from_secs(2), TcpStream::connect(addr)).await {
                Ok(Ok(s)) => s,
                Ok(Err(e)) => {
                    tracing::debug!(peer = to, %addr, "connect failed: {e}");
                    return None;
                }
                Err(_) => return None,
            };
        let _ = stream.set_nodelay(true);
        let stream = transport_tls::outbound(&self.tls, stream, to, addr)
            .await
            .ok()?;
        let (mut rd, mut w) = tokio::io::split(stream);
        let said = hello(self.me, &self.announced.get(), true);
        let sent = match w.write_all(&said).await {
            Ok(()) => w.flush().await,
            Err(e) => Err(e),
        };
        if let Err(e) = sent {
            self.closed_after_handshake(&e.to_string());
            return None;
        }
        let mut buf = BytesMut::with_capacity(4096);
        match tokio::time::timeout(HELLO_BACK_WAIT, read_frame(&mut rd, &mut buf)).await {
            Ok(Ok(Some((KIND_HELLO, body)))) => {
                let (from, identity, _) = parse_hello(body).ok()?;
                if from != to {
                    tracing::warn!(peer = to, %addr, "member {from} answered at member {to}'s address");
                    return None;
                }
                let _ = self.inbox.send(Input::PeerIdentity(to, identity));
            }
            // Closed at once: a refused connection.
            Ok(outcome) => {
                let why = match outcome {
                    Err(e) => e.to_string(),
                    _ => "closed".into(),
                };
                self.closed_after_handshake(&why);
                return None;
            }
            Err(_) => tracing::debug!(peer = to, "no hello-back: an earlier build"),
        }
        let reader = tokio::spawn(read_dialled(
            rd,
            buf,
            to,
            self.inbox.clone(),
            self.routes.clone(),
        ));
        Some((w, reader))
    }

    /// The peer closed a connection we dialled before its hello-back (or right after our
    /// first frames). Over TLS that is how a member that refuses our certificate after the
    /// handshake (its host name, say) answers, so it is logged.
    fn closed_after_handshake(&self, why: &str) {
        if transport_tls::dials_tls(&self.tls) {
            let (to, addr) = (self.to, self.addr);
            tracing::warn!(
                peer = to,
                %addr,
                "quorum TLS: member {to} at {addr} closed the connection right after the \
                 handshake ({why}): it may refuse our certificate (see its log)"
            );
        }
    }

    /// Sends `frame` back over the peer's connection to us, or reports it undeliverable.
    fn detour(&self, frame: OutFrame) {
        if let Err(frame) = self.routes.send_back(self.to, frame) {
            let _ = self.inbox.send(Input::Unreachable(self.to));
            if let Some(s) = frame.snapshot_to {
                let _ = self.inbox.send(Input::SnapshotStatus { to: s, ok: false });
            }
        }
    }

    /// While the dialled connection is down for `wait`: what is queued and what comes
    /// goes back over the peer's connection (or is reported undeliverable). False once
    /// the queue is closed (the peer left the configuration).
    async fn detour_for(
        &self,
        wait: Duration,
        first: Option<OutFrame>,
        rx: &mut mpsc::Receiver<OutFrame>,
    ) -> bool {
        if let Some(f) = first {
            self.detour(f);
        }
        let until = tokio::time::sleep(wait);
        tokio::pin!(until);
        loop {
            tokio::select! {
                _ = &mut until => return true,
                next = rx.recv() => match next {
                    Some(f) => self.detour(f),
                    None => return false,
                },
            }
        }
    }
}

pub async fn sender_loop(link: Link, mut rx: mpsc::Receiver<OutFrame>) {
    let (to, addr) = (link.to, link.addr);
    let mut backoff = FIRST_BACKOFF;
    // Until a hello has gone through once, the peer is dialled without waiting for
    // something to send (with back-off), so that it hears what this member says of its
    // data directory even when this member has nothing to tell it (an untrusted member
    // neither campaigns nor answers); later connections wait for something to send.
    let mut introduced = false;
    loop {
        let mut pending = None;
        if introduced {
            let Some(first) = rx.recv().await else { return };
            pending = Some(first);
        } else if rx.is_closed() && rx.is_empty() {
            return;
        }
        let Some((mut w, reader)) = link.dial().await else {
            if !link.detour_for(backoff, pending.take(), &mut rx).await {
                return;
            }
            backoff = (backoff * 2).min(MAX_BACKOFF);
            continue;
        };
        introduced = true;
        backoff = FIRST_BACKOFF;
        tracing::info!(peer = to, %addr, "connected to peer");
        let mut reader = reader;
        let lost = write_frames(&link, &mut w, &mut reader, pending.take(), &mut rx).await;
        reader.abort();
        match lost {
            None => return,
            Some(e) => {
                tracing::info!(peer = to, "peer connection lost: {e}");
                let _ = link.inbox.send(Input::Unreachable(to));
            }
        }
    }
}

/// Writes the queue to an established connection until a write fails or the peer closes
/// the connection (`Some`, why), or the queue closes (`None`). A closed connection is
/// noticed by its reader (`reader` ends) before anything more is written into it: a write
/// after the peer's FIN may still succeed, and what it carried would be lost unseen.
async fn write_frames(
    link: &Link,
    w: &mut PeerWrite,
    reader: &mut tokio::task::JoinHandle<()>,
    mut pending: Option<OutFrame>,
    rx: &mut mpsc::Receiver<OutFrame>,
) -> Option<std::io::Error> {
    // When this connection's first frames went out: a write that fails soon after them is
    // the mark of a peer that refused our certificate.
    let mut first_frames: Option<Instant> = None;
    let mut buf = BytesMut::with_capacity(64 * 1024);
    loop {
        let f = match pending.take() {
            Some(f) => f,
            None => tokio::select! {
                biased;
                _ = &mut *reader => {
                    return Some(std::io::Error::new(
                        std::io::ErrorKind::ConnectionAborted,
                        "the peer closed the connection",
                    ));
                }
                next = rx.recv() => next?,
            },
        };
        let first = *first_frames.get_or_insert_with(Instant::now);
        let result = write_batch(w, f, rx, &mut buf, &link.inbox).await;
        if let Err(e) = result {
            if first.elapsed() < Duration::from_secs(2) {
                link.closed_after_handshake(&e.to_string());
            }
            return Some(e);
        }
    }
}
