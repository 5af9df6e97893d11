//! The connections this member has with each peer, beside its own dialled one: the way
//! back over a connection the peer dialled (so that a one-way cut, where only the peer can
//! dial, still leaves a path both ways, as ZooKeeper's single learner connection does), and
//! how many connections with the peer are up (so that the Raft thread hears a peer is gone
//! only once every connection with it closed).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::Sender;
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::sync::mpsc;

use super::input::Input;
use super::transport_wire::OutFrame;

#[derive(Default)]
struct PeerRoutes {
    /// The queue of the writer on the latest connection the peer dialled to us and reads
    /// back from, with that connection's number.
    back: Option<(u64, mpsc::Sender<OutFrame>)>,
    /// Connections with the peer that are up, whoever dialled.
    live: usize,
}

/// A connection with a peer that is up; dropped when it closes.
pub struct Live {
    routes: Arc<Routes>,
    peer: u64,
}

impl Drop for Live {
    fn drop(&mut self) {
        self.routes.down(self.peer);
    }
}

/// See the module docs.
pub struct Routes {
    peers: Mutex<HashMap<u64, PeerRoutes>>,
    next_conn: AtomicU64,
    inbox: Sender<Input>,
}

impl Routes {
    pub fn new(inbox: Sender<Input>) -> Routes {
        Routes {
            peers: Mutex::new(HashMap::new()),
            next_conn: AtomicU64::new(1),
            inbox,
        }
    }

    /// A number for a new connection.
    pub fn conn_id(&self) -> u64 {
        self.next_conn.fetch_add(1, Ordering::Relaxed)
    }

    /// A connection with `peer` is up until the returned guard is dropped (a reader task
    /// aborted included).
    pub fn up(self: &Arc<Self>, peer: u64) -> Live {
        self.peers.lock().entry(peer).or_default().live += 1;
        Live {
            routes: self.clone(),
            peer,
        }
    }

    /// A connection with `peer` closed; once none is left the Raft thread is told the peer
    /// is gone (a killed process's sockets all close at once).
    fn down(&self, peer: u64) {
        let gone = {
            let mut peers = self.peers.lock();
            let p = peers.entry(peer).or_default();
            p.live = p.live.saturating_sub(1);
            p.live == 0
        };
        if gone {
            let _ = self.inbox.send(Input::PeerGone(peer));
        }
    }

    /// Connection `conn`, which `peer` dialled, takes what we send back to it.
    pub fn set_back(&self, peer: u64, conn: u64, tx: mpsc::Sender<OutFrame>) {
        self.peers.lock().entry(peer).or_default().back = Some((conn, tx));
    }

    /// Connection `conn` closed: it is no way back any more (unless a later one replaced it).
    pub fn clear_back(&self, peer: u64, conn: u64) {
        if let Some(p) = self.peers.lock().get_mut(&peer) {
            if p.back.as_ref().is_some_and(|(c, _)| *c == conn) {
                p.back = None;
            }
        }
    }

    /// Queues `frame` on the way back to `peer`; gives it back if there is none or its
    /// queue is full.
    pub fn send_back(&self, peer: u64, frame: OutFrame) -> Result<(), OutFrame> {
        let tx = match self.peers.lock().get(&peer).and_then(|p| p.back.as_ref()) {
            Some((_, tx)) => tx.clone(),
            None => return Err(frame),
        };
        tx.try_send(frame).map_err(|e| match e {
            mpsc::error::TrySendError::Full(f) | mpsc::error::TrySendError::Closed(f) => f,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn frame(b: &'static [u8]) -> OutFrame {
        OutFrame {
            bytes: Bytes::from_static(b),
            snapshot_to: None,
        }
    }

    #[test]
    fn a_peer_is_gone_once_its_last_connection_closes() {
        let (tx, rx) = std::sync::mpsc::channel();
        let r = Arc::new(Routes::new(tx));
        let first = r.up(2);
        let second = r.up(2);
        let other = r.up(3);
        drop(first);
        assert!(rx.try_recv().is_err(), "one connection with 2 is still up");
        drop(second);
        assert!(matches!(rx.try_recv(), Ok(Input::PeerGone(2))));
        assert!(rx.try_recv().is_err(), "3 is still up");
        drop(other);
        assert!(matches!(rx.try_recv(), Ok(Input::PeerGone(3))));
    }

    #[test]
    fn the_way_back_is_the_latest_connection_and_goes_with_it() {
        let (tx, _rx) = std::sync::mpsc::channel();
        let r = Routes::new(tx);
        assert!(r.send_back(3, frame(b"a")).is_err(), "no way back yet");
        let (first, mut first_rx) = mpsc::channel(1);
        let (second, mut second_rx) = mpsc::channel(1);
        let (c1, c2) = (r.conn_id(), r.conn_id());
        r.set_back(3, c1, first);
        r.set_back(3, c2, second);
        // The older connection closing does not take the newer one's way back.
        r.clear_back(3, c1);
        assert!(r.send_back(3, frame(b"b")).is_ok());
        assert_eq!(
            second_rx.try_recv().map(|f| f.bytes).ok(),
            Some(Bytes::from_static(b"b"))
        );
        assert!(first_rx.try_recv().is_err());
        // A full queue gives the frame back.
        assert!(r.send_back(3, frame(b"c")).is_ok());
        assert!(r.send_back(3, frame(b"d")).is_err());
        r.clear_back(3, c2);
        assert!(r.send_back(3, frame(b"e")).is_err());
    }
}
