//! A loopback TCP proxy that can be frozen: how a ZooKeeper-protocol client is "paused".
//!
//! A ZooKeeper client library pings from its own task, so a holder task that merely sleeps
//! keeps its session alive; a stopped process would not. Putting the session's connection
//! through this proxy and freezing it stops every byte in both directions, on the current
//! connection and on any reconnect, which is what the server sees of a process stopped by
//! SIGSTOP: silence, then session expiry.
//!
//! With a delay it is also a lagging network link (a Redis replica's replication stream
//! held back by a fixed time); freezing it then cuts the link, and whatever it still holds
//! is lost, as the bytes in flight from a master whose machine dies are.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

/// A running proxy; it stops when dropped.
pub struct Proxy {
    addr: SocketAddr,
    frozen: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl Proxy {
    /// Listens on an ephemeral loopback port, forwarding to `upstream`.
    pub async fn start(upstream: SocketAddr) -> std::io::Result<Proxy> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        Ok(Self::serve(listener, upstream, Duration::ZERO))
    }

    /// A proxy that holds every byte back by `delay`, started from synchronous code inside
    /// a runtime context (`Runtime::enter`).
    pub fn start_delayed(upstream: SocketAddr, delay: Duration) -> std::io::Result<Proxy> {
        let std_listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        std_listener.set_nonblocking(true)?;
        let listener = TcpListener::from_std(std_listener)?;
        Ok(Self::serve(listener, upstream, delay))
    }

    fn serve(listener: TcpListener, upstream: SocketAddr, delay: Duration) -> Proxy {
        let addr = listener
            .local_addr()
            .unwrap_or_else(|_| SocketAddr::from(([127, 0, 0, 1], 0)));
        let (frozen, rx) = watch::channel(false);
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let rx = rx.clone();
                tokio::spawn(async move {
                    if let Ok(server) = TcpStream::connect(upstream).await {
                        let _ = client.set_nodelay(true);
                        let _ = server.set_nodelay(true);
                        let (cr, cw) = client.into_split();
                        let (sr, sw) = server.into_split();
                        tokio::select! {
                            _ = pump(cr, sw, rx.clone(), delay) => {}
                            _ = pump(sr, cw, rx, delay) => {}
                        }
                    }
                });
            }
        });
        Proxy { addr, frozen, task }
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops forwarding, now and on every later connection.
    pub fn freeze(&self) {
        let _ = self.frozen.send(true);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn wait_thawed(rx: &mut watch::Receiver<bool>) -> bool {
    rx.wait_for(|frozen| !*frozen).await.is_ok()
}

async fn pump(
    from: tokio::net::tcp::OwnedReadHalf,
    to: tokio::net::tcp::OwnedWriteHalf,
    rx: watch::Receiver<bool>,
    delay: Duration,
) {
    if delay.is_zero() {
        return pump_now(from, to, rx).await;
    }
    // Reader and writer apart, so that the delay does not slow the reads down.
    let (tx, mut queue) = mpsc::unbounded_channel::<(Instant, Vec<u8>)>();
    let mut read_rx = rx.clone();
    let reader = async move {
        let mut from = from;
        let mut buf = vec![0u8; 16 * 1024];
        loop {
            if !wait_thawed(&mut read_rx).await {
                return;
            }
            match from.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => {
                    if tx
                        .send((Instant::now() + delay, buf[..n].to_vec()))
                        .is_err()
                    {
                        return;
                    }
                }
            }
        }
    };
    let mut write_rx = rx;
    let writer = async move {
        let mut to = to;
        while let Some((due, bytes)) = queue.recv().await {
            tokio::time::sleep_until(due).await;
            // Frozen (the link cut) while held: these bytes are lost.
            if *write_rx.borrow_and_update() || to.write_all(&bytes).await.is_err() {
                return;
            }
        }
    };
    tokio::join!(reader, writer);
}

async fn pump_now(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    mut rx: watch::Receiver<bool>,
) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        if !wait_thawed(&mut rx).await {
            return;
        }
        let n = tokio::select! {
            r = from.read(&mut buf) => match r {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            },
            // Frozen while waiting to read: stop reading.
            _ = rx.wait_for(|frozen| *frozen) => continue,
        };
        if !wait_thawed(&mut rx).await {
            return;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}
