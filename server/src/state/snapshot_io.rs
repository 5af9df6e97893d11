//! Streaming a snapshot in and out with bounded memory, for `snapshot.rs`.
//!
//! A snapshot of ten million znodes is gigabytes: encoding it into one buffer, or reading
//! it whole before decoding, doubles the memory of the member exactly when it holds a
//! captured tree too. Instead the encoder fills a buffer of [`FLUSH_AT`] bytes and hands
//! it to the writer ([`ChunkedOut`]), and the decoder parses records out of a window that
//! is refilled from the reader as it drains ([`Window`]), so the extra memory is a few MiB
//! whatever the size of the tree.
//!
//! The CRC-32 trailer of format 2 is computed as the chunks go out, and checked as they
//! come in: [`TrailerSplit`] hashes every byte it passes on and holds back the last four
//! bytes of the stream, which are the stored checksum. The decoder builds the tree while
//! reading, but returns it only after the checksum matched: nothing decoded from a
//! damaged stream is ever used.

use std::io::{self, Read, Write};

use bytes::{BufMut, Bytes, BytesMut};
use jute::{DecodeError, Reader};

/// The encoder's buffer is written out once it holds this much.
pub const FLUSH_AT: usize = 1 << 20;
/// The decoder reads the stream this much at a time.
const READ_CHUNK: usize = 1 << 20;

/// The encoder's output: a bounded buffer, written out and hashed as it fills.
pub struct ChunkedOut<'w, W: Write + ?Sized> {
    pub buf: BytesMut,
    out: &'w mut W,
    hasher: crc32fast::Hasher,
    written: u64,
}

impl<'w, W: Write + ?Sized> ChunkedOut<'w, W> {
    pub fn new(out: &'w mut W) -> Self {
        ChunkedOut {
            buf: BytesMut::with_capacity(FLUSH_AT + (64 << 10)),
            out,
            hasher: crc32fast::Hasher::new(),
            written: 0,
        }
    }

    /// Writes the buffer out if it is full enough (call between records).
    pub fn maybe_flush(&mut self) -> io::Result<()> {
        if self.buf.len() >= FLUSH_AT {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.hasher.update(&self.buf);
        self.out.write_all(&self.buf)?;
        self.written += self.buf.len() as u64;
        self.buf.clear();
        Ok(())
    }

    /// Writes what is left, then (if `checksum`) the CRC-32 of everything; the total size.
    pub fn finish(mut self, checksum: bool) -> io::Result<u64> {
        self.flush()?;
        if checksum {
            let crc = std::mem::take(&mut self.hasher).finalize();
            self.buf.put_u32(crc);
            self.flush()?;
        }
        self.out.flush()?;
        Ok(self.written)
    }
}

/// A reader that hashes what it passes on and, when `hold` is set, holds back the last four
/// bytes of the stream (the stored checksum), which [`Self::trailer`] gives at the end.
pub struct TrailerSplit<R> {
    inner: R,
    hold: bool,
    tail: [u8; 4],
    tail_len: usize,
    hasher: crc32fast::Hasher,
}

impl<R: Read> TrailerSplit<R> {
    /// `already`: bytes read from the stream before (they count in the checksum).
    pub fn new(inner: R, hold: bool, already: &[u8]) -> Self {
        let mut hasher = crc32fast::Hasher::new();
        hasher.update(already);
        TrailerSplit {
            inner,
            hold,
            tail: [0; 4],
            tail_len: 0,
            hasher,
        }
    }

    /// The held-back trailer (if the stream had four bytes for it) and the checksum of
    /// everything before it. Call after the stream was read to its end.
    pub fn trailer(&self) -> (Option<u32>, u32) {
        let stored = (self.tail_len == 4).then(|| u32::from_be_bytes(self.tail));
        (stored, self.hasher.clone().finalize())
    }

    /// Reads the rest of the stream (to compute the checksum over all of it).
    pub fn drain(&mut self) -> io::Result<()> {
        io::copy(self, &mut io::sink()).map(|_| ())
    }
}

impl<R: Read> Read for TrailerSplit<R> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        if !self.hold {
            let n = self.inner.read(out)?;
            self.hasher.update(&out[..n]);
            return Ok(n);
        }
        while self.tail_len < 4 {
            let n = self.inner.read(&mut self.tail[self.tail_len..])?;
            if n == 0 {
                return Ok(0);
            }
            self.tail_len += n;
        }
        if out.len() <= 4 {
            // Small reads: one byte at a time through the tail.
            let mut one = [0u8; 1];
            if out.is_empty() || self.inner.read(&mut one)? == 0 {
                return Ok(0);
            }
            out[0] = self.tail[0];
            self.tail.copy_within(1.., 0);
            self.tail[3] = one[0];
            self.hasher.update(&out[..1]);
            return Ok(1);
        }
        // The held bytes go first; the last four of what arrives are held next.
        out[..4].copy_from_slice(&self.tail);
        let n = self.inner.read(&mut out[4..])?;
        if n == 0 {
            return Ok(0);
        }
        self.tail.copy_from_slice(&out[n..n + 4]);
        self.hasher.update(&out[..n]);
        Ok(n)
    }
}

/// An error that may just mean the window ends too early (a record, or a length it
/// announces, reaching past it): the record is parsed again with more of the stream.
pub trait MaybeShort {
    fn is_short(&self) -> bool;
}

impl MaybeShort for DecodeError {
    fn is_short(&self) -> bool {
        match self {
            DecodeError::Truncated { .. } => true,
            DecodeError::InvalidLength(n) => *n >= 0,
            _ => false,
        }
    }
}

/// The decoder's window on the stream: records are parsed by jute's [`Reader`] from the
/// bytes at hand, and a record that reaches past them is parsed again once more arrived.
pub struct Window<R> {
    src: R,
    r: Reader,
    eof: bool,
}

impl<R: Read> Window<R> {
    pub fn new(src: R) -> Self {
        Window {
            src,
            r: Reader::new(Bytes::new()),
            eof: false,
        }
    }

    /// Parses one record with `f`, reading more of the stream as it needs.
    pub fn record<T, E: MaybeShort + From<io::Error>>(
        &mut self,
        mut f: impl FnMut(&mut Reader) -> Result<T, E>,
    ) -> Result<T, E> {
        loop {
            let saved = self.r.clone();
            match f(&mut self.r) {
                Err(e) if !self.eof && e.is_short() => {
                    self.r = saved;
                    self.refill()?;
                }
                result => return result,
            }
        }
    }

    /// Keeps the unread bytes and appends at least [`READ_CHUNK`] more (or as many as the
    /// unread ones, so a large record is reached in a few rounds), or up to the end.
    fn refill(&mut self) -> io::Result<()> {
        let rest = self.r.take_rest();
        let more = READ_CHUNK.max(rest.len());
        let mut buf = BytesMut::with_capacity(rest.len() + more);
        buf.extend_from_slice(&rest);
        drop(rest);
        let target = buf.len() + more;
        buf.resize(target, 0);
        let mut filled = target - more;
        while filled < target {
            match self.src.read(&mut buf[filled..]) {
                Ok(0) => {
                    self.eof = true;
                    break;
                }
                Ok(n) => filled += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        buf.truncate(filled);
        self.r = Reader::new(buf.freeze());
        Ok(())
    }

    /// Whether the stream is consumed to its end (after the last record): reads one more
    /// window if needed.
    pub fn at_end(&mut self) -> io::Result<bool> {
        if self.r.remaining() == 0 && !self.eof {
            self.refill()?;
        }
        Ok(self.r.remaining() == 0 && self.eof)
    }

    /// The source, to finish with it (its trailer, the rest of it).
    pub fn source(&mut self) -> &mut R {
        &mut self.src
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// A reader that gives at most `step` bytes per call.
    pub(crate) struct Trickle<'a> {
        pub data: &'a [u8],
        pub step: usize,
    }

    impl Read for Trickle<'_> {
        fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
            let n = out.len().min(self.step).min(self.data.len());
            out[..n].copy_from_slice(&self.data[..n]);
            self.data = &self.data[n..];
            Ok(n)
        }
    }

    #[test]
    fn trailer_split_holds_back_the_last_four_bytes() {
        let data: Vec<u8> = (0..1000u32).map(|i| (i * 7) as u8).collect();
        for step in [1, 3, 4, 5, 64, 2000] {
            for out_len in [1, 4, 5, 100, 4096] {
                let mut t = TrailerSplit::new(Trickle { data: &data, step }, true, &[]);
                let mut got = Vec::new();
                let mut buf = vec![0u8; out_len];
                loop {
                    let n = t.read(&mut buf).unwrap();
                    if n == 0 {
                        break;
                    }
                    got.extend_from_slice(&buf[..n]);
                }
                assert_eq!(got, data[..996], "step {step}, reads of {out_len}");
                let (stored, crc) = t.trailer();
                let tail: [u8; 4] = data[996..].try_into().unwrap();
                assert_eq!(stored, Some(u32::from_be_bytes(tail)));
                assert_eq!(crc, crc32fast::hash(&data[..996]));
            }
        }
        let mut short = TrailerSplit::new(&b"abc"[..], true, &[]);
        short.drain().unwrap();
        assert_eq!(short.trailer().0, None);
    }

    /// A decode error or a read error, as the window's records need.
    #[derive(Debug)]
    enum TestError {
        Decode(DecodeError),
        Io,
    }

    impl From<io::Error> for TestError {
        fn from(_: io::Error) -> Self {
            TestError::Io
        }
    }

    impl From<DecodeError> for TestError {
        fn from(e: DecodeError) -> Self {
            TestError::Decode(e)
        }
    }

    impl MaybeShort for TestError {
        fn is_short(&self) -> bool {
            matches!(self, TestError::Decode(e) if e.is_short())
        }
    }

    fn buffer(r: &mut Reader) -> Result<Option<Bytes>, TestError> {
        Ok(r.read_buffer()?)
    }

    #[test]
    fn window_parses_records_across_refills() {
        // Records: an i32 length and that many bytes, some larger than a read chunk.
        let mut data = BytesMut::new();
        let sizes = [0usize, 5, READ_CHUNK + 17, 3, 3 * READ_CHUNK, 1];
        for (i, s) in sizes.iter().enumerate() {
            data.put_i32(*s as i32);
            data.put_bytes(i as u8, *s);
        }
        let mut w = Window::new(Trickle {
            data: &data,
            step: 100_000,
        });
        for (i, s) in sizes.iter().enumerate() {
            let got = w.record(buffer).unwrap().unwrap();
            assert_eq!(got.len(), *s);
            assert!(got.iter().all(|b| *b == i as u8));
        }
        assert!(w.at_end().unwrap());
        // Past the end: the record's own error, not a hang.
        assert!(matches!(
            w.record(buffer),
            Err(TestError::Decode(DecodeError::Truncated { .. }))
        ));
    }

    #[test]
    fn chunked_out_appends_the_checksum() {
        let mut sink = Vec::new();
        let mut out = ChunkedOut::new(&mut sink);
        for i in 0..(3 * FLUSH_AT / 1000) {
            out.buf.put_bytes(i as u8, 1000);
            out.maybe_flush().unwrap();
        }
        let total = out.finish(true).unwrap();
        assert_eq!(total as usize, sink.len());
        let body = &sink[..sink.len() - 4];
        let tail: [u8; 4] = sink[sink.len() - 4..].try_into().unwrap();
        assert_eq!(u32::from_be_bytes(tail), crc32fast::hash(body));
    }
}
