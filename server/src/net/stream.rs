//! A connection's byte stream, whatever carries it: the read and write halves of a plain
//! TCP socket or of a TLS stream (`secure.rs`), reading whole frames off it, and the
//! writer task that drains the connection's outbox into it.

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::outbox::Outbox;

/// A connection's inbound side: a TCP socket's read half, or a TLS stream's.
pub type ReadHalf = Box<dyn AsyncRead + Send + Unpin>;
/// A connection's outbound side.
pub type WriteHalf = Box<dyn AsyncWrite + Send + Unpin>;

/// Why a frame could not be read.
#[derive(Debug)]
pub enum FrameError {
    Protocol(String),
    Io(std::io::Error),
}

/// How much room a connection's next read gets. A session mostly idles, and what its buffer
/// holds meanwhile is memory per session (tens of thousands of sessions are common): it
/// starts at [`ReadRoom::MIN`]. A pipelining client fills whatever room it is given, so a
/// read that fills it doubles the next one's (up to [`ReadRoom::MAX`]: fewer reads, and
/// more writes per message to the Raft thread), and reads that use under a quarter halve
/// it again; an empty buffer much larger than wanted is let go. After a second without a
/// read ([`ReadRoom::rest`]) an empty buffer is let go whatever its size: the wait for the
/// next request then holds only the 64 bytes `BytesMut` gives a read into no room.
pub struct ReadRoom {
    want: usize,
    /// The room the last read was given.
    given: usize,
}

impl Default for ReadRoom {
    fn default() -> ReadRoom {
        ReadRoom {
            want: ReadRoom::MIN,
            given: 0,
        }
    }
}

impl ReadRoom {
    pub const MIN: usize = 512;
    pub const MAX: usize = 64 * 1024;

    /// Sizes `buf` for the next read.
    pub fn prepare(&mut self, buf: &mut BytesMut) {
        if buf.is_empty() && buf.capacity() > 4 * self.want {
            *buf = BytesMut::new();
        }
        if buf.capacity() - buf.len() < self.want {
            buf.reserve(self.want);
        }
        self.given = buf.capacity() - buf.len();
    }

    /// The connection read nothing for a while: an empty buffer is let go, and the next
    /// read gets no room of ours (the read after it gets [`Self::MIN`] again).
    pub fn rest(&mut self, buf: &mut BytesMut) {
        if buf.is_empty() {
            *buf = BytesMut::new();
            self.want = 0;
        }
    }

    /// A read after [`Self::prepare`] took `n` bytes.
    pub fn read(&mut self, n: usize) {
        if n >= self.given {
            self.want = (2 * self.want).clamp(Self::MIN, Self::MAX);
        } else if n < self.given / 4 {
            self.want = (self.want / 2).max(Self::MIN);
        }
    }
}

/// Reads until `buf` holds at least `n` bytes; false if the peer closed first.
pub async fn read_at_least(
    rd: &mut ReadHalf,
    buf: &mut BytesMut,
    n: usize,
) -> std::io::Result<bool> {
    while buf.len() < n {
        if rd.read_buf(buf).await? == 0 {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Sends what the outbox hands out until it closes, then shuts the stream down.
pub async fn write_loop(outbox: Arc<Outbox>, mut wr: WriteHalf) {
    let mut chunk = BytesMut::new();
    while outbox.refill(&mut chunk).await {
        if wr.write_all(&chunk).await.is_err() {
            outbox.close();
            return;
        }
    }
    let _ = wr.shutdown().await;
}

/// Reads one whole frame, refusing one longer than jute.maxbuffer; `None` if the peer
/// closed.
pub async fn read_frame(
    rd: &mut ReadHalf,
    buf: &mut BytesMut,
    max: usize,
) -> Result<Option<Bytes>, FrameError> {
    loop {
        match jute::split_frame(buf, max) {
            Ok(Some(f)) => return Ok(Some(f)),
            Ok(None) => {}
            Err(e) => return Err(FrameError::Protocol(e.to_string())),
        }
        match rd.read_buf(buf).await {
            Ok(0) => return Ok(None),
            Ok(_) => {}
            Err(e) => return Err(FrameError::Io(e)),
        }
    }
}

/// After the last reply went out: reads and discards what the client still sends, until it
/// closes or a second passes, so that the close is a FIN after the reply rather than a
/// reset that may destroy it.
pub async fn linger(rd: &mut ReadHalf) {
    // On the heap, not in the future: an array here would make every connection's task
    // 4 KiB larger for the whole life of the connection.
    let mut sink = vec![0u8; 4096];
    let _ = tokio::time::timeout(std::time::Duration::from_secs(1), async {
        while let Ok(n) = rd.read(&mut sink).await {
            if n == 0 {
                break;
            }
        }
    })
    .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_room_grows_while_reads_fill_it_and_shrinks_when_idle() {
        let mut room = ReadRoom::default();
        let mut buf = BytesMut::new();
        room.prepare(&mut buf);
        let first = buf.capacity();
        assert!((ReadRoom::MIN..2 * ReadRoom::MIN).contains(&first));
        // A pipelining client fills every read: the room doubles up to the cap.
        for _ in 0..20 {
            room.prepare(&mut buf);
            let given = buf.capacity() - buf.len();
            room.read(given);
            buf.clear();
        }
        assert_eq!(room.want, ReadRoom::MAX);
        room.prepare(&mut buf);
        assert!(buf.capacity() >= ReadRoom::MAX);
        // Small reads bring it back down, and the large empty buffer is let go.
        for _ in 0..20 {
            room.prepare(&mut buf);
            room.read(12);
            buf.clear();
        }
        assert_eq!(room.want, ReadRoom::MIN);
        room.prepare(&mut buf);
        assert!(buf.capacity() < 4 * ReadRoom::MIN, "{}", buf.capacity());
        // A buffer still holding part of a frame is kept whatever its size.
        let mut partial = BytesMut::with_capacity(ReadRoom::MAX);
        partial.extend_from_slice(&[0, 0, 1]);
        room.prepare(&mut partial);
        assert!(partial.capacity() >= ReadRoom::MAX);
        assert_eq!(&partial[..], &[0, 0, 1]);
    }

    #[test]
    fn a_resting_connection_holds_no_read_buffer() {
        let mut room = ReadRoom::default();
        let mut buf = BytesMut::new();
        room.prepare(&mut buf);
        assert!(buf.capacity() >= ReadRoom::MIN);
        room.rest(&mut buf);
        assert_eq!(buf.capacity(), 0);
        room.prepare(&mut buf);
        assert_eq!(buf.capacity(), 0, "no room is made while resting");
        // The first read after the rest (into BytesMut's own small room) brings `MIN` back.
        room.read(12);
        buf.clear();
        room.prepare(&mut buf);
        assert!(buf.capacity() >= ReadRoom::MIN);
        // A partial frame is never let go.
        buf.extend_from_slice(&[0, 0]);
        room.rest(&mut buf);
        assert_eq!(&buf[..], &[0, 0]);
        assert!(buf.capacity() >= ReadRoom::MIN);
    }
}
