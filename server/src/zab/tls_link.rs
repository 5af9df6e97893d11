//! The link to ZooKeeper's leader over TLS (`sslQuorum=true`, with the `ssl.quorum.*` keys
//! ZooKeeper's members use: mutual TLS, the leader's certificate checked against the quorum
//! trust store and its address). A rustls stream does not split into a read half and a
//! write half the way a socket does, so one thread (the link's reader) does both: it waits
//! on the socket and on a wake-up pipe at once, reads what the leader sent, and writes
//! what the observer loop queued (the loop's flush queues its buffer and wakes it).

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::ServerName;
use rustls::{ClientConfig, ClientConnection, StreamOwned};

/// A TLS stream to the leader, handshaken.
pub type TlsStream = StreamOwned<ClientConnection, TcpStream>;

/// Runs the TLS handshake on `tcp` (the leader at `addr`).
pub fn handshake(
    config: Arc<ClientConfig>,
    tcp: TcpStream,
    addr: SocketAddr,
) -> io::Result<TlsStream> {
    let name = ServerName::IpAddress(addr.ip().into());
    let conn = ClientConnection::new(config, name).map_err(io::Error::other)?;
    let mut s = StreamOwned::new(conn, tcp);
    while s.conn.is_handshaking() {
        s.conn.complete_io(&mut s.sock)?;
    }
    Ok(s)
}

/// The loop's side: bytes written are queued, and a flush hands them to the reader thread.
pub struct Queued {
    buf: Vec<u8>,
    to: Sender<Vec<u8>>,
    wake: UnixStream,
}

impl Write for Queued {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        self.buf.extend_from_slice(b);
        Ok(b.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        self.to.send(std::mem::take(&mut self.buf)).map_err(|_| {
            io::Error::new(
                io::ErrorKind::BrokenPipe,
                "the link to the leader is closed",
            )
        })?;
        // A full pipe already has a wake-up pending.
        match self.wake.write(&[1]) {
            Err(e) if e.kind() != io::ErrorKind::WouldBlock => Err(e),
            _ => Ok(()),
        }
    }
}

/// The reader thread's side: reads what the leader sent, and sends what was queued while
/// it waits. `idle` bounds the silence from the leader (ZooKeeper's `syncLimit` ticks).
pub struct Pump {
    tls: TlsStream,
    queued: Receiver<Vec<u8>>,
    wake: UnixStream,
    idle: Duration,
}

/// Splits a handshaken stream into the loop's writer and the reader thread's reader.
pub fn split(tls: TlsStream, idle: Duration) -> io::Result<(Queued, Pump)> {
    let (wake_tx, wake_rx) = UnixStream::pair()?;
    wake_tx.set_nonblocking(true)?;
    wake_rx.set_nonblocking(true)?;
    let (to, queued) = channel();
    Ok((
        Queued {
            buf: Vec::new(),
            to,
            wake: wake_tx,
        },
        Pump {
            tls,
            queued,
            wake: wake_rx,
            idle,
        },
    ))
}

impl Pump {
    /// Sends everything queued.
    fn send_queued(&mut self) -> io::Result<()> {
        let mut drained = [0u8; 64];
        while matches!(self.wake.read(&mut drained), Ok(n) if n > 0) {}
        while let Ok(bytes) = self.queued.try_recv() {
            self.tls.write_all(&bytes)?;
        }
        self.tls.flush()
    }

    /// Waits until the socket or the wake-up pipe is readable: (socket, pipe).
    fn wait(&self) -> io::Result<(bool, bool)> {
        let mut fds = [
            libc::pollfd {
                fd: self.tls.sock.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: self.wake.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        let ms = self.idle.as_millis().min(i32::MAX as u128) as i32;
        // SAFETY: `fds` is a valid array of two pollfd for the duration of the call, and
        // its length is passed with it.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, ms) };
        if n < 0 {
            let e = io::Error::last_os_error();
            return if e.kind() == io::ErrorKind::Interrupted {
                Ok((false, false))
            } else {
                Err(e)
            };
        }
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("nothing from the leader for {:?}", self.idle),
            ));
        }
        let ready =
            |f: &libc::pollfd| f.revents & (libc::POLLIN | libc::POLLHUP | libc::POLLERR) != 0;
        Ok((ready(&fds[0]), ready(&fds[1])))
    }
}

impl Read for Pump {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            // Plaintext rustls already decrypted first: the socket may have nothing more.
            match self.tls.conn.reader().read(buf) {
                Ok(n) => return Ok(n),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
            let (socket, pipe) = self.wait()?;
            if pipe {
                self.send_queued()?;
            }
            if socket {
                if self.tls.conn.read_tls(&mut self.tls.sock)? == 0 {
                    return Ok(0);
                }
                self.tls
                    .conn
                    .process_new_packets()
                    .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
                // (The leader may expect an answer to its TLS traffic, e.g. a key update.)
                if self.tls.conn.wants_write() {
                    self.tls.conn.write_tls(&mut self.tls.sock)?;
                }
            }
        }
    }
}
