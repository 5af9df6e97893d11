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
