//! Framing: every packet is a 4-byte big-endian length followed by that many bytes.
//!
//! [`split_frame`] takes one complete frame off a read buffer without copying, refusing a
//! length that is negative or above the configured `jute.maxbuffer`, as ZooKeeper's
//! `NIOServerCnxn` does ("Len error") before it allocates anything.

use bytes::{Buf, BufMut, Bytes, BytesMut};

/// ZooKeeper's default `jute.maxbuffer` (`BinaryInputArchive.maxBuffer`): 0xfffff bytes.
pub const DEFAULT_MAX_BUFFER: usize = 0xfffff;

/// A frame's length prefix was unacceptable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    #[error("frame length {len} is outside 0..={max} (jute.maxbuffer)")]
    Length { len: i64, max: usize },
}

/// What the first four bytes of a connection say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LengthPrefix {
    /// A plausible frame length.
    Frame(usize),
    /// Four ASCII letters (a four-letter word such as `ruok`), read as a big-endian i32.
    FourLetterWord([u8; 4]),
}

impl LengthPrefix {
    /// Classifies the first four bytes of a connection. A handshake starts with a small
    /// length (44 or 45); a four-letter word's first byte is an ASCII letter, so the i32 it
    /// forms is at least 2^24.
    pub fn classify(first: [u8; 4]) -> LengthPrefix {
        let n = i32::from_be_bytes(first);
        if !(0..(1 << 24)).contains(&n) {
            LengthPrefix::FourLetterWord(first)
        } else {
            LengthPrefix::Frame(n as usize)
        }
    }
}

/// Splits one whole frame (without its length prefix) off the front of `buf`, or returns
/// `Ok(None)` when more bytes are needed. The frame shares `buf`'s memory.
pub fn split_frame(buf: &mut BytesMut, max: usize) -> Result<Option<Bytes>, FrameError> {
    if buf.len() < 4 {
        return Ok(None);
    }
    let len = i32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]);
    if len < 0 || len as usize > max {
        return Err(FrameError::Length {
            len: len as i64,
            max,
        });
    }
    let len = len as usize;
    if buf.len() < 4 + len {
        buf.reserve(4 + len - buf.len());
        return Ok(None);
    }
    buf.advance(4);
    Ok(Some(buf.split_to(len).freeze()))
}

/// Appends one frame to `out`: a length prefix, then whatever `body` writes. The length is
/// patched in afterwards, so the body is encoded exactly once, in place.
pub fn write_frame(out: &mut BytesMut, body: impl FnOnce(&mut BytesMut)) {
    let start = out.len();
    out.put_i32(0);
    body(out);
    let len = (out.len() - start - 4) as i32;
    out[start..start + 4].copy_from_slice(&len.to_be_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_whole_frames_only() {
        let mut buf = BytesMut::new();
        write_frame(&mut buf, |b| b.put_slice(b"hello"));
        write_frame(&mut buf, |b| b.put_slice(b"!"));
        buf.truncate(buf.len() - 1);
        assert_eq!(split_frame(&mut buf, 100).unwrap().unwrap(), &b"hello"[..]);
        assert_eq!(split_frame(&mut buf, 100).unwrap(), None);
        buf.put_u8(b'!');
        assert_eq!(split_frame(&mut buf, 100).unwrap().unwrap(), &b"!"[..]);
        assert!(buf.is_empty());
    }

    #[test]
    fn refuses_oversized_and_negative_lengths() {
        let mut buf = BytesMut::from(&[0x00, 0x10, 0x00, 0x00][..]);
        assert!(split_frame(&mut buf, DEFAULT_MAX_BUFFER).is_err());
        let mut buf = BytesMut::from(&[0xff, 0xff, 0xff, 0xff][..]);
        assert!(split_frame(&mut buf, DEFAULT_MAX_BUFFER).is_err());
    }

    #[test]
    fn classifies_four_letter_words() {
        assert_eq!(
            LengthPrefix::classify(*b"ruok"),
            LengthPrefix::FourLetterWord(*b"ruok")
        );
        assert_eq!(
            LengthPrefix::classify([0, 0, 0, 45]),
            LengthPrefix::Frame(45)
        );
    }
}
