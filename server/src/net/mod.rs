//! The network layer: the client port and everything a client connection needs.
//!
//! | file | concern |
//! |------|---------|
//! | `mod.rs` | the listener: accepts connections, enforces `maxClientCnxns` per address |
//! | `auth.rs` | SASL (opcode 102) and enforced authentication, per connection |
//! | `secure.rs` | TLS on the client port (`secureClientPort`, port unification), x509 ids |
//! | `connection.rs` | one connection: handshake, then requests in order |
//! | `handshake.rs`, `end.rs` | a connection's session handshake; why a connection ended |
//! | `stream.rs` | a connection's byte stream (TCP or TLS): frames in, the writer task out |
//! | `pipeline.rs` | a connection's requests in arrival order, answered in that order |
//! | `submit.rs` | a connection's writes to the Raft thread, one message per read |
//! | `outbox.rs` | a connection's outbound bytes, drained by its writer task |
//! | `reads.rs` | requests answered from the local tree |
//! | `read_only.rs` | read-only mode: who is accepted, what is refused |
//! | `watch.rs` | the watches of this member's connections, and their events |
//! | `reply.rs` | reply headers and write results on the wire |
//! | `registry.rs` | the connections by id and by session |
//! | `session_log.rs` | what this member saw of each session, for the console |
//! | `delivery.rs` | what the Raft thread's apply loop hands to connections |
//! | `client_port.rs` | `ClientPort`: what the client port's connections share, with each other and the Raft thread (and the lock order) |
//! | `conn_events.rs`, `conn_stats.rs` | what a connection's task is told; its counters |
//! | `metrics.rs`, `session_ids.rs` | request counters; session ids and passwords |

mod auth;
mod client_port;
mod conn_events;
mod conn_stats;
mod connection;
mod delivery;
mod end;
mod handshake;
mod metrics;
mod outbox;
mod pipeline;
mod read_only;
mod reads;
mod registry;
mod reply;
mod secure;
mod session_ids;
mod session_log;
mod stream;
mod submit;
mod watch;

pub use auth::Auth;
pub use client_port::ClientPort;
pub use metrics::{AuthFailure, BUCKETS_US};
pub use secure::{bind_client_ports, Listen};
pub use session_log::{
    Event as SessionEvent, What as SessionWhat, PER_SESSION as SESSION_LOG_PER_SESSION,
    RETAIN_MS as SESSION_LOG_RETAIN_MS,
};

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::net::TcpListener;

/// Releases a client address's connection slot when the connection ends.
struct Slot {
    counts: Arc<Mutex<HashMap<IpAddr, u32>>>,
    ip: IpAddr,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut counts = self.counts.lock();
        if let Some(n) = counts.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                counts.remove(&self.ip);
            }
        }
    }
}

/// Accepts client connections until `shutdown` turns true.
pub async fn accept_clients(
    shared: Arc<ClientPort>,
    listener: TcpListener,
    listen: Listen,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) {
    let counts: Arc<Mutex<HashMap<IpAddr, u32>>> = Arc::default();
    let max = shared.replica.config().max_client_cnxns;
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let (stream, peer) = match accepted {
                    Ok(a) => a,
                    Err(e) => {
                        // Out of file descriptors, typically: back off rather than spin.
                        tracing::warn!("accept failed: {e}");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let slot = {
                    let mut c = counts.lock();
                    let n = c.entry(peer.ip()).or_insert(0);
                    if max > 0 && *n >= max {
                        shared.metrics.connection_rejected.fetch_add(1, Ordering::Relaxed);
                        tracing::warn!("Too many connections from {} - max is {max}", peer.ip());
                        continue;
                    }
                    *n += 1;
                    Slot { counts: counts.clone(), ip: peer.ip() }
                };
                let shared = shared.clone();
                let listen = listen.clone();
                tokio::spawn(async move {
                    secure::serve(shared, stream, peer, &listen).await;
                    drop(slot);
                });
            }
            _ = shutdown.changed() => return,
        }
    }
}
