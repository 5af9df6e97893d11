//! The client port: accepts connections, enforces `maxClientCnxns` per client address, and
//! hands each connection to its own task ([`connection`]).

pub mod connection;
pub mod pipeline;

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::shared::Shared;

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
    shared: Arc<Shared>,
    listener: TcpListener,
    mut shutdown: watch::Receiver<bool>,
) {
    let counts: Arc<Mutex<HashMap<IpAddr, u32>>> = Arc::default();
    let max = shared.config.max_client_cnxns;
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
                        tracing::warn!("Too many connections from {} - max is {max}", peer.ip());
                        continue;
                    }
                    *n += 1;
                    Slot { counts: counts.clone(), ip: peer.ip() }
                };
                let shared = shared.clone();
                tokio::spawn(async move {
                    connection::serve(shared, stream, peer).await;
                    drop(slot);
                });
            }
            _ = shutdown.changed() => return,
        }
    }
}
