//! A connection's outbound byte queue.
//!
//! Replies and watch events for one connection are encoded straight into one shared buffer,
//! in the order they are produced, by whoever produces them: the connection's own task
//! (reads, handshake) and the apply loop (watch events, which must precede any later reply
//! that reflects the change). A writer task drains the buffer in large chunks, so many
//! frames leave in one `write` call and no frame is allocated on its own.
//!
//! The apply loop holds the wake-ups of the outboxes it writes to for the length of a round
//! ([`Outbox::hold`], [`Outbox::release`]): a connection's writer task then wakes once per
//! round and sends all of that round's replies in one `write`, instead of being woken (a
//! futex call from the Raft thread) and writing once per reply.
//!
//! The writer hands its emptied buffer back in exchange for the next chunk
//! ([`Outbox::refill`]), so a busy connection's frames are appended without an allocation
//! (one 4 KiB allocation per connection and round was a twentieth of the Raft thread's
//! time under writes); an idle writer lets its buffer go after a moment.
//!
//! The buffered size is visible so the connection can stop reading requests from a client
//! that does not read its replies (back-pressure), and a hard cap closes a connection whose
//! backlog only grows (a watch storm into a dead reader), instead of growing without bound.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::{BufMut, BytesMut};
use parking_lot::Mutex;
use tokio::sync::Notify;

use super::metrics::Traffic;

/// Past this many buffered bytes the connection is closed.
pub const HARD_LIMIT: usize = 256 * 1024 * 1024;

/// The allocation a burst of frames starts with. The buffer hands its whole allocation to
/// the writer with each chunk, so an idle connection holds no outbound buffer at all (tens
/// of thousands of mostly idle sessions are the common case).
const CHUNK: usize = 4096;

/// How long a writer with nothing to send keeps its emptied buffer for the next burst.
const KEEP_SPARE: std::time::Duration = std::time::Duration::from_millis(50);

/// A buffer that grew past this (a large reply, a watch storm) is not kept for reuse.
const SPARE_MAX: usize = 64 * 1024;

struct Inner {
    buf: BytesMut,
    closed: bool,
    /// Wake-ups are held until [`Outbox::release`].
    held: bool,
    /// Something was queued while held.
    wake_pending: bool,
}

impl Inner {
    /// Whether the writer is to be woken now; otherwise a wake-up is owed at release.
    fn wake_now(&mut self) -> bool {
        self.wake_pending |= self.held;
        !self.held
    }

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
                held: false,
                wake_pending: false,
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
        // A closed outbox's writer is woken at once, held or not: it has to finish.
        let wake = inner.wake_now() || over;
        drop(inner);
        if wake {
            self.notify.notify_one();
        }
        !over
    }

    /// Appends bytes that are already framed (e.g. a reply encoded by the apply loop).
    pub fn push_raw(&self, frame: &[u8]) -> bool {
        let mut inner = self.inner.lock();
        if inner.closed {
            return false;
        }
        inner.buf().put_slice(frame);
        let wake = inner.wake_now();
        drop(inner);
        self.traffic.sent(frame.len());
        if wake {
            self.notify.notify_one();
        }
        true
    }

    /// Holds wake-ups of the writer until [`Self::release`]. False if they were already
    /// held (the caller that holds them releases them).
    pub fn hold(&self) -> bool {
        let mut inner = self.inner.lock();
        !std::mem::replace(&mut inner.held, true)
    }

    /// Ends [`Self::hold`], waking the writer if anything was queued meanwhile.
    pub fn release(&self) {
        let mut inner = self.inner.lock();
        inner.held = false;
        let wake = std::mem::take(&mut inner.wake_pending);
        drop(inner);
        if wake {
            self.notify.notify_one();
        }
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
    #[cfg(test)]
    pub async fn next_chunk(&self) -> Option<bytes::Bytes> {
        let mut chunk = BytesMut::new();
        self.refill(&mut chunk).await.then(|| chunk.freeze())
    }

    /// Waits for bytes to write and swaps them into `chunk` (the writer's buffer, already
    /// written out), which the outbox keeps as the buffer the next frames go to: under a
    /// steady load the same two buffers go back and forth and nobody allocates. A writer
    /// idle for [`KEEP_SPARE`] lets both go, so an idle connection holds no buffer. False
    /// when closed and fully drained.
    pub async fn refill(&self, chunk: &mut BytesMut) -> bool {
        chunk.clear();
        if chunk.capacity() > SPARE_MAX {
            *chunk = BytesMut::new();
        }
        let mut keep = true;
        loop {
            {
                let mut inner = self.inner.lock();
                if !inner.buf.is_empty() {
                    std::mem::swap(&mut inner.buf, chunk);
                    return true;
                }
                if inner.closed {
                    return false;
                }
                if !keep {
                    inner.buf = BytesMut::new();
                    *chunk = BytesMut::new();
                }
            }
            if keep {
                let wait = tokio::time::timeout(KEEP_SPARE, self.notify.notified());
                keep = wait.await.is_ok();
            } else {
                self.notify.notified().await;
            }
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

    #[tokio::test]
    async fn held_frames_wake_the_writer_once_at_release() {
        let outbox = Arc::new(Outbox::default());
        assert!(outbox.hold());
        assert!(!outbox.hold());
        let writer = {
            let outbox = outbox.clone();
            tokio::spawn(async move { outbox.next_chunk().await })
        };
        tokio::task::yield_now().await;
        assert!(outbox.push_raw(&[0, 0, 0, 1, b'a']));
        assert!(outbox.push_frame(|b| b.put_slice(b"b")));
        // Held: the writer is not woken, so it has not taken anything yet.
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        assert!(!writer.is_finished());
        assert_eq!(outbox.buffered(), 10);
        outbox.release();
        let chunk = writer.await.unwrap().unwrap();
        assert_eq!(&chunk[..], &[0, 0, 0, 1, b'a', 0, 0, 0, 1, b'b']);
        // Released: the next frame wakes the writer by itself.
        assert!(outbox.push_raw(&[0, 0, 0, 1, b'c']));
        let next = tokio::time::timeout(std::time::Duration::from_secs(5), outbox.next_chunk());
        assert_eq!(&next.await.unwrap().unwrap()[..], &[0, 0, 0, 1, b'c']);
    }

    #[tokio::test]
    async fn refill_trades_buffers_and_an_idle_writer_lets_them_go() {
        let outbox = Arc::new(Outbox::default());
        let mut chunk = BytesMut::new();
        assert!(outbox.push_raw(&[0, 0, 0, 1, b'a']));
        assert!(outbox.refill(&mut chunk).await);
        assert_eq!(&chunk[..], &[0, 0, 0, 1, b'a']);
        let cap = chunk.capacity();
        assert!(cap >= CHUNK);
        assert!(outbox.push_raw(&[0, 0, 0, 1, b'b']));
        assert!(outbox.refill(&mut chunk).await);
        assert_eq!(&chunk[..], &[0, 0, 0, 1, b'b']);
        // The written buffer went back to the outbox, emptied, for the next frames.
        assert_eq!(outbox.inner.lock().buf.capacity(), cap);
        assert_eq!(outbox.buffered(), 0);
        let writer = {
            let outbox = outbox.clone();
            tokio::spawn(async move {
                let ok = outbox.refill(&mut chunk).await;
                (ok, chunk)
            })
        };
        // Idle past KEEP_SPARE: neither side keeps a buffer.
        tokio::time::sleep(KEEP_SPARE * 4).await;
        assert_eq!(outbox.inner.lock().buf.capacity(), 0);
        assert!(outbox.push_raw(&[0, 0, 0, 1, b'c']));
        let (ok, chunk) = writer.await.unwrap();
        assert!(ok);
        assert_eq!(&chunk[..], &[0, 0, 0, 1, b'c']);
        outbox.close();
        let mut chunk = chunk;
        assert!(!outbox.refill(&mut chunk).await);
    }
}
