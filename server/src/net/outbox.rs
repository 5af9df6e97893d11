//! A connection's outbound byte queue.
//!
//! Replies and watch events for one connection are encoded straight into one shared buffer,
//! in the order they are produced, by whoever produces them: the connection's own task
//! (reads, handshake) and the apply loop (watch events, which must precede any later reply
//! that reflects the change). A writer task drains the buffer in large chunks, so many
//! frames leave in one `write` call and no frame is allocated on its own.
//!
//! The buffered size is visible so the connection can stop reading requests from a client
//! that does not read its replies (back-pressure), and a hard cap closes a connection whose
//! backlog only grows (a watch storm into a dead reader), instead of growing without bound.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::{BufMut, Bytes, BytesMut};
use parking_lot::Mutex;
use tokio::sync::Notify;

use super::metrics::Traffic;

/// Past this many buffered bytes the connection is closed.
pub const HARD_LIMIT: usize = 256 * 1024 * 1024;

/// The allocation a burst of frames starts with. The buffer hands its whole allocation to
/// the writer with each chunk, so an idle connection holds no outbound buffer at all (tens
/// of thousands of mostly idle sessions are the common case).
const CHUNK: usize = 4096;

struct Inner {
    buf: BytesMut,
    closed: bool,
}

impl Inner {
    /// The buffer to append to, allocated on the first frame after a drain.
    fn buf(&mut self) -> &mut BytesMut {
        if self.buf.capacity() == 0 {
            self.buf.reserve(CHUNK);
        }
        &mut self.buf
    }
}

/// See the module docs.
pub struct Outbox {
    inner: Mutex<Inner>,
    notify: Notify,
    /// The member's count of bytes sent, which every frame queued here adds to.
    traffic: Arc<Traffic>,
}

impl Default for Outbox {
    fn default() -> Self {
        Outbox::new(Arc::default())
    }
}

impl Outbox {
    pub fn new(traffic: Arc<Traffic>) -> Outbox {
        Outbox {
            inner: Mutex::new(Inner {
                buf: BytesMut::new(),
                closed: false,
            }),
            notify: Notify::new(),
            traffic,
        }
    }

    /// Appends one length-prefixed frame whose body `body` writes. Returns false (and
    /// writes nothing) once the outbox is closed.
    pub fn push_frame(&self, body: impl FnOnce(&mut BytesMut)) -> bool {
        let mut inner = self.inner.lock();
        if inner.closed {
            return false;
        }
        let before = inner.buf.len();
        jute::write_frame(inner.buf(), body);
        self.traffic.sent(inner.buf.len() - before);
        let over = inner.buf.len() > HARD_LIMIT;
        if over {
            inner.closed = true;
        }
        drop(inner);
        self.notify.notify_one();
        !over
    }

    /// Appends bytes that are already framed (e.g. a reply encoded by the apply loop).
    pub fn push_raw(&self, frame: &[u8]) -> bool {
        let mut inner = self.inner.lock();
        if inner.closed {
            return false;
        }
        inner.buf().put_slice(frame);
        drop(inner);
        self.traffic.sent(frame.len());
        self.notify.notify_one();
        true
    }

    /// Appends a watch notification (counted in `watch_bytes` too).
    pub fn push_notification(&self, body: impl FnOnce(&mut BytesMut)) -> bool {
        let mut bytes = 0;
        let queued = self.push_frame(|b| {
            let before = b.len();
            body(b);
            bytes = b.len() - before + 4;
        });
        if queued {
            self.traffic
                .watch_bytes
                .fetch_add(bytes as u64, Ordering::Relaxed);
        }
        queued
    }

    /// Bytes waiting to be written.
    pub fn buffered(&self) -> usize {
        self.inner.lock().buf.len()
    }

    /// Stops accepting frames; the writer sends what is buffered, then finishes.
    pub fn close(&self) {
        self.inner.lock().closed = true;
        self.notify.notify_one();
    }

    pub fn is_closed(&self) -> bool {
        self.inner.lock().closed
    }

    /// Waits for bytes to write. `None` when closed and fully drained.
    pub async fn next_chunk(&self) -> Option<Bytes> {
        loop {
            {
                let mut inner = self.inner.lock();
                if !inner.buf.is_empty() {
                    return Some(std::mem::take(&mut inner.buf).freeze());
                }
                if inner.closed {
                    return None;
                }
            }
            self.notify.notified().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn frames_come_out_in_order_and_close_drains() {
        let outbox = Outbox::default();
        assert!(outbox.push_frame(|b| b.put_slice(b"ab")));
        assert!(outbox.push_raw(&[0, 0, 0, 1, b'c']));
        outbox.close();
        assert!(!outbox.push_frame(|b| b.put_slice(b"late")));
        let chunk = outbox.next_chunk().await.unwrap();
        assert_eq!(&chunk[..], &[0, 0, 0, 2, b'a', b'b', 0, 0, 0, 1, b'c']);
        assert_eq!(outbox.next_chunk().await, None);
    }
}
