//! A TCP proxy between ZooKeeper clients and a server, for fault injection.
//!
//! Tests point a client at [`Proxy::connect_string`] instead of the server and then break
//! the path between them on command: drop the next N frames in one direction (ZooKeeper's
//! 4-byte length-prefixed frames, so a reply can vanish whole, as if the server crashed
//! after applying a request), blackhole all traffic (a partition: connections stay open but
//! nothing arrives), refuse new connections, cut every connection (a crash or a network
//! reset), or partition the clients (every connection cut and new ones held, unanswered,
//! until healed). Counters tell how many frames went each way, so a test can assert that a
//! call did not touch the server.
//!
//! It uses plain threads (two per connection), so it works under any async runtime or none.
//! Bytes that do not look like frames (four-letter words) are passed through raw.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// Frames larger than this are taken as "not a frame" and the connection goes raw.
const MAX_FRAME: usize = 64 << 20;

/// Which way bytes flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Direction {
    /// Requests: client to server.
    ClientToServer,
    /// Replies and notifications: server to client.
    ServerToClient,
}

impl Direction {
    fn index(self) -> usize {
        match self {
            Direction::ClientToServer => 0,
            Direction::ServerToClient => 1,
        }
    }
}

type FramePredicate = Box<dyn Fn(&[u8]) -> bool + Send>;

/// A pending "drop frames" command.
struct DropRule {
    direction: Direction,
    remaining: usize,
    matches: Option<FramePredicate>,
    then_cut: bool,
}

struct Conn {
    id: u64,
    client: TcpStream,
    server: TcpStream,
}

struct Shared {
    upstream: Mutex<SocketAddr>,
    stopping: AtomicBool,
    blackhole: AtomicBool,
    refuse: AtomicBool,
    partitioned: AtomicBool,
    /// Bytes pass through as they come, not parsed into frames.
    raw: AtomicBool,
    conns: Mutex<Vec<Conn>>,
    /// Client connections accepted during a partition: open, never forwarded.
    held: Mutex<Vec<TcpStream>>,
    rules: Mutex<Vec<DropRule>>,
    forwarded: [AtomicU64; 2],
    dropped: AtomicU64,
    accepted: AtomicU64,
    next_id: AtomicU64,
}

impl Shared {
    fn cut_all(&self) {
        let conns: Vec<Conn> = std::mem::take(&mut *self.conns.lock().expect("proxy lock"));
        for c in conns {
            let _ = c.client.shutdown(Shutdown::Both);
            let _ = c.server.shutdown(Shutdown::Both);
        }
    }

    fn release_held(&self) {
        let held: Vec<TcpStream> = std::mem::take(&mut *self.held.lock().expect("proxy lock"));
        for c in held {
            let _ = c.shutdown(Shutdown::Both);
        }
    }

    fn close(&self, id: u64) {
        let mut conns = self.conns.lock().expect("proxy lock");
        if let Some(i) = conns.iter().position(|c| c.id == id) {
            let c = conns.swap_remove(i);
            let _ = c.client.shutdown(Shutdown::Both);
            let _ = c.server.shutdown(Shutdown::Both);
        }
    }

    /// Whether to drop this frame; and whether to cut everything after dropping it.
    fn should_drop(&self, direction: Direction, frame: &[u8]) -> (bool, bool) {
        let mut rules = self.rules.lock().expect("proxy lock");
        let hit = rules.iter().position(|r| {
            r.direction == direction
                && r.remaining > 0
                && r.matches.as_ref().is_none_or(|m| m(frame))
        });
        let Some(i) = hit else {
            return (false, false);
        };
        rules[i].remaining -= 1;
        let cut = rules[i].then_cut;
        if rules[i].remaining == 0 {
            rules.remove(i);
        }
        (true, cut)
    }
}

/// A fault-injecting TCP proxy on 127.0.0.1; stops (and cuts its connections) when dropped.
pub struct Proxy {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept: Option<JoinHandle<()>>,
}

impl Proxy {
    /// Starts a proxy on a free loopback port that forwards to `upstream`.
    pub fn start(upstream: SocketAddr) -> Proxy {
        Proxy::launch(upstream, false)
    }

    /// A proxy that copies bytes as they come, for protocols that are not length-prefixed
    /// frames (Apache ZooKeeper's quorum and election connections): it cuts, refuses and
    /// blackholes, but cannot drop frames.
    pub fn start_raw(upstream: SocketAddr) -> Proxy {
        Proxy::launch(upstream, true)
    }

    fn launch(upstream: SocketAddr, raw: bool) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind proxy port");
        let addr = listener.local_addr().expect("proxy address");
        let shared = Arc::new(Shared {
            upstream: Mutex::new(upstream),
            stopping: AtomicBool::new(false),
            blackhole: AtomicBool::new(false),
            refuse: AtomicBool::new(false),
            partitioned: AtomicBool::new(false),
            raw: AtomicBool::new(raw),
            conns: Mutex::new(Vec::new()),
            held: Mutex::new(Vec::new()),
            rules: Mutex::new(Vec::new()),
            forwarded: [AtomicU64::new(0), AtomicU64::new(0)],
            dropped: AtomicU64::new(0),
            accepted: AtomicU64::new(0),
            next_id: AtomicU64::new(1),
        });
        let s = shared.clone();
        let accept = std::thread::Builder::new()
            .name("proxy-accept".into())
            .spawn(move || accept_loop(listener, s))
            .expect("spawn proxy thread");
        Proxy {
            addr,
            shared,
            accept: Some(accept),
        }
    }

    /// The proxy's address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `127.0.0.1:<port>` of the proxy, for clients.
    pub fn connect_string(&self) -> String {
        self.addr.to_string()
    }

    /// Forwards new connections to another server (existing ones stay where they are).
    pub fn set_upstream(&self, upstream: SocketAddr) {
        *self.shared.upstream.lock().expect("proxy lock") = upstream;
    }

    /// Drops the next `n` whole frames going `direction`.
    pub fn drop_next_frames(&self, direction: Direction, n: usize) {
        self.add_rule(direction, n, None, false);
    }

    /// Drops the next `n` frames going `direction` for which `matches(frame body)` is true
    /// (the body is the frame without its length prefix: for a reply, `xid`, `zxid`, `err`,
    /// then the response).
    pub fn drop_next_frames_where(
        &self,
        direction: Direction,
        n: usize,
        matches: impl Fn(&[u8]) -> bool + Send + 'static,
    ) {
        self.add_rule(direction, n, Some(Box::new(matches)), false);
    }

    /// Drops the next frame going `direction` that `matches`, then cuts every connection: the
    /// request was applied but its reply is lost with the connection, as when a server
    /// crashes right after committing.
    pub fn drop_next_frame_and_cut(
        &self,
        direction: Direction,
        matches: impl Fn(&[u8]) -> bool + Send + 'static,
    ) {
        self.add_rule(direction, 1, Some(Box::new(matches)), true);
    }

    fn add_rule(
        &self,
        direction: Direction,
        n: usize,
        matches: Option<FramePredicate>,
        then_cut: bool,
    ) {
        if n == 0 {
            return;
        }
        self.shared
            .rules
            .lock()
            .expect("proxy lock")
            .push(DropRule {
                direction,
                remaining: n,
                matches,
                then_cut,
            });
    }

    /// Forgets pending drop commands.
    pub fn clear_drops(&self) {
        self.shared.rules.lock().expect("proxy lock").clear();
    }

    /// How many drop commands still wait for frames.
    pub fn pending_drops(&self) -> usize {
        self.shared
            .rules
            .lock()
            .expect("proxy lock")
            .iter()
            .map(|r| r.remaining)
            .sum()
    }

    /// While on, every byte in both directions is discarded (connections stay open and new
    /// ones are accepted, but nothing gets through): a network partition.
    pub fn blackhole(&self, on: bool) {
        self.shared.blackhole.store(on, Ordering::SeqCst);
    }

    /// While on, new connections are closed as soon as they are accepted.
    pub fn refuse_connections(&self, on: bool) {
        self.shared.refuse.store(on, Ordering::SeqCst);
    }

    /// Closes every current connection (both sides see a reset/EOF).
    pub fn cut_all(&self) {
        self.shared.cut_all();
    }

    /// Turning it on partitions the clients from the server: every current connection is
    /// cut, and new ones are accepted and held open without a byte forwarded (nothing is
    /// opened upstream), so clients neither reach the server nor spin reconnecting. Turning
    /// it off heals: the held connections are closed and clients that reconnect get through.
    pub fn partition(&self, on: bool) {
        self.shared.partitioned.store(on, Ordering::SeqCst);
        if on {
            self.shared.cut_all();
        } else {
            self.shared.release_held();
        }
    }

    /// Frames forwarded so far going `direction`.
    pub fn frames_forwarded(&self, direction: Direction) -> u64 {
        self.shared.forwarded[direction.index()].load(Ordering::SeqCst)
    }

    /// Frames dropped by drop commands so far.
    pub fn frames_dropped(&self) -> u64 {
        self.shared.dropped.load(Ordering::SeqCst)
    }

    /// Connections accepted so far (refused ones included).
    pub fn connections_accepted(&self) -> u64 {
        self.shared.accepted.load(Ordering::SeqCst)
    }

    /// Connections open now.
    pub fn open_connections(&self) -> usize {
        self.shared.conns.lock().expect("proxy lock").len()
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.shared.stopping.store(true, Ordering::SeqCst);
        // Wake the blocking accept.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        if let Some(h) = self.accept.take() {
            let _ = h.join();
        }
        self.shared.cut_all();
        self.shared.release_held();
    }
}

fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    for stream in listener.incoming() {
        if shared.stopping.load(Ordering::SeqCst) {
            return;
        }
        let Ok(client) = stream else { continue };
        shared.accepted.fetch_add(1, Ordering::SeqCst);
        if shared.refuse.load(Ordering::SeqCst) {
            let _ = client.shutdown(Shutdown::Both);
            continue;
        }
        if shared.partitioned.load(Ordering::SeqCst) {
            shared.held.lock().expect("proxy lock").push(client);
            // A heal between the check and the push found nothing to release: release now.
            if !shared.partitioned.load(Ordering::SeqCst) {
                shared.release_held();
            }
            continue;
        }
        let upstream = *shared.upstream.lock().expect("proxy lock");
        let Ok(server) = TcpStream::connect_timeout(&upstream, Duration::from_secs(2)) else {
            let _ = client.shutdown(Shutdown::Both);
            continue;
        };
        let _ = client.set_nodelay(true);
        let _ = server.set_nodelay(true);
        let id = shared.next_id.fetch_add(1, Ordering::SeqCst);
        let (Ok(c2), Ok(s2), Ok(c3), Ok(s3)) = (
            client.try_clone(),
            server.try_clone(),
            client.try_clone(),
            server.try_clone(),
        ) else {
            continue;
        };
        shared
            .conns
            .lock()
            .expect("proxy lock")
            .push(Conn { id, client, server });
        // `refuse_connections` then `cut_all`, or `partition`, may have run between the checks
        // above and the push: checked again now that `cut_all` would see it, no connection
        // slips through.
        if shared.refuse.load(Ordering::SeqCst) || shared.partitioned.load(Ordering::SeqCst) {
            shared.close(id);
            continue;
        }
        let s = shared.clone();
        let _ = std::thread::Builder::new()
            .name("proxy-c2s".into())
            .spawn(move || pump(c2, s2, Direction::ClientToServer, id, s));
        let s = shared.clone();
        let _ = std::thread::Builder::new()
            .name("proxy-s2c".into())
            .spawn(move || pump(s3, c3, Direction::ServerToClient, id, s));
    }
}

/// Copies `from` to `to` frame by frame, applying the proxy's faults, until either side
/// closes; then closes the connection.
fn pump(
    mut from: TcpStream,
    mut to: TcpStream,
    direction: Direction,
    id: u64,
    shared: Arc<Shared>,
) {
    let mut buf: Vec<u8> = Vec::with_capacity(64 * 1024);
    let mut chunk = vec![0u8; 64 * 1024];
    let mut raw = shared.raw.load(Ordering::SeqCst);
    'outer: loop {
        let n = match from.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if shared.blackhole.load(Ordering::SeqCst) {
            continue;
        }
        buf.extend_from_slice(&chunk[..n]);
        loop {
            if raw {
                if to.write_all(&buf).is_err() {
                    break 'outer;
                }
                buf.clear();
                break;
            }
            if buf.len() < 4 {
                break;
            }
            let len = i32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]);
            if len < 0 || len as usize > MAX_FRAME {
                raw = true;
                continue;
            }
            let total = 4 + len as usize;
            if buf.len() < total {
                break;
            }
            let frame: Vec<u8> = buf.drain(..total).collect();
            let (drop_it, cut) = shared.should_drop(direction, &frame[4..]);
            if drop_it {
                shared.dropped.fetch_add(1, Ordering::SeqCst);
                if cut {
                    shared.cut_all();
                    break 'outer;
                }
                continue;
            }
            shared.forwarded[direction.index()].fetch_add(1, Ordering::SeqCst);
            if to.write_all(&frame).is_err() {
                break 'outer;
            }
        }
    }
    if !buf.is_empty() && !shared.blackhole.load(Ordering::SeqCst) {
        let _ = to.write_all(&buf);
    }
    shared.close(id);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Echoes `connections` connections, one after the other.
    fn echo_server(connections: usize) -> (SocketAddr, JoinHandle<()>) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let h = std::thread::spawn(move || {
            for _ in 0..connections {
                let Ok((mut s, _)) = l.accept() else { return };
                let mut b = [0u8; 1024];
                while let Ok(n) = s.read(&mut b) {
                    if n == 0 || s.write_all(&b[..n]).is_err() {
                        break;
                    }
                }
            }
        });
        (addr, h)
    }

    fn frame(body: &[u8]) -> Vec<u8> {
        let mut f = (body.len() as i32).to_be_bytes().to_vec();
        f.extend_from_slice(body);
        f
    }

    fn read_exact(s: &mut TcpStream, n: usize) -> Vec<u8> {
        let mut out = vec![0u8; n];
        s.read_exact(&mut out).unwrap();
        out
    }

    #[test]
    fn forwards_and_drops_whole_frames() {
        let (up, server) = echo_server(1);
        let proxy = Proxy::start(up);
        let mut c = TcpStream::connect(proxy.addr()).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        c.write_all(&frame(b"one")).unwrap();
        assert_eq!(read_exact(&mut c, 7), frame(b"one"));
        proxy.drop_next_frames_where(Direction::ServerToClient, 1, |f| f == b"two");
        c.write_all(&frame(b"two")).unwrap();
        c.write_all(&frame(b"three")).unwrap();
        assert_eq!(read_exact(&mut c, 9), frame(b"three"));
        assert_eq!(proxy.frames_dropped(), 1);
        assert_eq!(proxy.frames_forwarded(Direction::ClientToServer), 3);
        assert_eq!(proxy.frames_forwarded(Direction::ServerToClient), 2);
        proxy.cut_all();
        let mut b = [0u8; 1];
        assert!(matches!(c.read(&mut b), Ok(0) | Err(_)));
        drop(proxy);
        server.join().unwrap();
    }

    #[test]
    fn blackhole_and_refuse() {
        let (up, _server) = echo_server(1);
        let proxy = Proxy::start(up);
        let mut c = TcpStream::connect(proxy.addr()).unwrap();
        c.set_read_timeout(Some(Duration::from_millis(300)))
            .unwrap();
        proxy.blackhole(true);
        c.write_all(&frame(b"lost")).unwrap();
        let mut b = [0u8; 8];
        assert!(c.read(&mut b).is_err(), "nothing gets through a blackhole");
        proxy.blackhole(false);
        proxy.refuse_connections(true);
        let mut d = TcpStream::connect(proxy.addr()).unwrap();
        d.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        assert!(matches!(d.read(&mut b), Ok(0) | Err(_)));
        assert_eq!(proxy.connections_accepted(), 2);
    }

    #[test]
    fn partition_cuts_holds_and_heals() {
        let (up, server) = echo_server(2);
        let proxy = Proxy::start(up);
        let mut c = TcpStream::connect(proxy.addr()).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        c.write_all(&frame(b"one")).unwrap();
        assert_eq!(read_exact(&mut c, 7), frame(b"one"));

        proxy.partition(true);
        let mut b = [0u8; 8];
        assert!(
            matches!(c.read(&mut b), Ok(0) | Err(_)),
            "a forwarded connection is cut"
        );
        // A new connection is held open, and nothing it sends gets through.
        let mut held = TcpStream::connect(proxy.addr()).unwrap();
        held.set_read_timeout(Some(Duration::from_millis(300)))
            .unwrap();
        held.write_all(&frame(b"held")).unwrap();
        let err = held
            .read(&mut b)
            .expect_err("a held connection is neither answered nor closed");
        assert!(
            matches!(
                err.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ),
            "{err:?}"
        );
        assert_eq!(proxy.frames_forwarded(Direction::ClientToServer), 1);

        proxy.partition(false);
        held.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        assert!(
            matches!(held.read(&mut b), Ok(0) | Err(_)),
            "healing closes the held connection"
        );
        let mut d = TcpStream::connect(proxy.addr()).unwrap();
        d.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        d.write_all(&frame(b"two")).unwrap();
        assert_eq!(
            read_exact(&mut d, 7),
            frame(b"two"),
            "healed: forwarded again"
        );
        drop(d);
        drop(proxy);
        server.join().unwrap();
    }
}
