//! Primitive jute encoding: big-endian ints and longs, one-byte booleans, length-prefixed
//! buffers and strings (length -1 = null), and vectors (count -1 = null).
//!
//! [`Reader`] is the only way bytes are read: every length is checked against what remains
//! before anything is allocated, so a hostile length can neither panic nor reserve memory
//! beyond the frame.

use bytes::{BufMut, Bytes, BytesMut};

/// Why a record could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// The record needs more bytes than the frame holds.
    #[error("truncated record: needed {needed} more bytes, {remaining} left")]
    Truncated { needed: usize, remaining: usize },
    /// A length or count field is negative (other than the null marker -1) or larger than the frame.
    #[error("invalid length {0}")]
    InvalidLength(i64),
    /// A boolean byte other than 0 or 1.
    #[error("invalid boolean byte {0}")]
    InvalidBool(u8),
    /// The request header names an operation this codec does not know.
    #[error("unknown opcode {0}")]
    UnknownOpcode(i32),
    /// A multi request or response is malformed (bad header, unknown op inside).
    #[error("malformed multi: {0}")]
    BadMulti(&'static str),
    /// A null where the protocol requires a value.
    #[error("unexpected null {0}")]
    UnexpectedNull(&'static str),
}

/// A record in jute's binary layout.
pub trait Record: Sized {
    /// Appends the record's bytes to `out`.
    fn encode(&self, out: &mut BytesMut);
    /// Reads one record from `r`.
    fn decode(r: &mut Reader) -> Result<Self, DecodeError>;

    /// Encodes into a fresh buffer (convenience for tests and clients).
    fn to_bytes(&self) -> Bytes {
        let mut out = BytesMut::new();
        self.encode(&mut out);
        out.freeze()
    }

    /// Decodes a whole buffer; trailing bytes are allowed, as ZooKeeper allows them.
    fn from_bytes(bytes: Bytes) -> Result<Self, DecodeError> {
        Self::decode(&mut Reader::new(bytes))
    }
}

/// A bounds-checked cursor over one frame.
#[derive(Debug, Clone)]
pub struct Reader {
    buf: Bytes,
}

impl Reader {
    pub fn new(buf: Bytes) -> Self {
        Reader { buf }
    }

    /// Bytes not read yet.
    pub fn remaining(&self) -> usize {
        self.buf.len()
    }

    /// The unread rest of the frame, consumed.
    pub fn take_rest(&mut self) -> Bytes {
        std::mem::take(&mut self.buf)
    }

    /// A view of the unread rest, not consumed.
    pub fn peek_rest(&self) -> &[u8] {
        &self.buf
    }

    fn need(&self, n: usize) -> Result<(), DecodeError> {
        if self.buf.len() < n {
            Err(DecodeError::Truncated {
                needed: n,
                remaining: self.buf.len(),
            })
        } else {
            Ok(())
        }
    }

    fn take<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        self.need(N)?;
        let mut out = [0u8; N];
        out.copy_from_slice(&self.buf[..N]);
        bytes::Buf::advance(&mut self.buf, N);
        Ok(out)
    }

    pub fn read_i32(&mut self) -> Result<i32, DecodeError> {
        Ok(i32::from_be_bytes(self.take::<4>()?))
    }

    pub fn read_i64(&mut self) -> Result<i64, DecodeError> {
        Ok(i64::from_be_bytes(self.take::<8>()?))
    }

    pub fn read_u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.take::<1>()?[0])
    }

    pub fn read_bool(&mut self) -> Result<bool, DecodeError> {
        match self.read_u8()? {
            0 => Ok(false),
            1 => Ok(true),
            b => Err(DecodeError::InvalidBool(b)),
        }
    }

    /// A length field: -1 (and, as Java reads it, any negative) is null; a length beyond the
    /// frame is an error before any allocation happens.
    fn read_len(&mut self) -> Result<Option<usize>, DecodeError> {
        let len = self.read_i32()?;
        if len < 0 {
            if len == -1 {
                return Ok(None);
            }
            return Err(DecodeError::InvalidLength(len as i64));
        }
        let len = len as usize;
        if len > self.buf.len() {
            return Err(DecodeError::Truncated {
                needed: len,
                remaining: self.buf.len(),
            });
        }
        Ok(Some(len))
    }

    /// A jute `buffer`: `None` for null. Zero-copy: the result shares the frame's memory.
    pub fn read_buffer(&mut self) -> Result<Option<Bytes>, DecodeError> {
        Ok(self.read_len()?.map(|len| self.buf.split_to(len)))
    }

    /// A jute `ustring`: `None` for null. Invalid UTF-8 is replaced with U+FFFD, as Java's
    /// `new String(bytes, UTF_8)` does, so path validation later rejects it as ZooKeeper would.
    pub fn read_ustring_opt(&mut self) -> Result<Option<String>, DecodeError> {
        Ok(self.read_len()?.map(|len| {
            let raw = self.buf.split_to(len);
            match std::str::from_utf8(&raw) {
                Ok(s) => s.to_owned(),
                Err(_) => String::from_utf8_lossy(&raw).into_owned(),
            }
        }))
    }

    /// A `ustring` where null and empty mean the same to the server (paths, schemes).
    pub fn read_ustring(&mut self) -> Result<String, DecodeError> {
        Ok(self.read_ustring_opt()?.unwrap_or_default())
    }

    /// A jute `vector`: null decodes as empty. `min_elem` is the smallest encoded size of one
    /// element; the count is checked against it so a hostile count cannot reserve memory.
    pub fn read_vec<T>(
        &mut self,
        min_elem: usize,
        mut elem: impl FnMut(&mut Self) -> Result<T, DecodeError>,
    ) -> Result<Vec<T>, DecodeError> {
        let count = self.read_i32()?;
        if count < 0 {
            if count == -1 {
                return Ok(Vec::new());
            }
            return Err(DecodeError::InvalidLength(count as i64));
        }
        let count = count as usize;
        if count.saturating_mul(min_elem.max(1)) > self.buf.len() {
            return Err(DecodeError::InvalidLength(count as i64));
        }
        // Reserve no more than the frame could hold of `T` itself; the vector grows as real
        // elements arrive.
        let cap = count.min(self.buf.len() / std::mem::size_of::<T>().max(1));
        let mut out = Vec::with_capacity(cap);
        for _ in 0..count {
            out.push(elem(self)?);
        }
        Ok(out)
    }

    pub fn read_string_vec(&mut self) -> Result<Vec<String>, DecodeError> {
        self.read_vec(4, |r| r.read_ustring())
    }
}

/// Jute writers on `BytesMut`.
pub trait WriteExt {
    fn put_bool_jute(&mut self, v: bool);
    fn put_buffer(&mut self, v: Option<&[u8]>);
    fn put_ustring(&mut self, v: &str);
    fn put_string_vec<S: AsRef<str>>(&mut self, v: &[S]);
}

impl WriteExt for BytesMut {
    fn put_bool_jute(&mut self, v: bool) {
        self.put_u8(v as u8);
    }

    fn put_buffer(&mut self, v: Option<&[u8]>) {
        match v {
            None => self.put_i32(-1),
            Some(b) => {
                self.put_i32(b.len() as i32);
                self.put_slice(b);
            }
        }
    }

    fn put_ustring(&mut self, v: &str) {
        self.put_i32(v.len() as i32);
        self.put_slice(v.as_bytes());
    }

    fn put_string_vec<S: AsRef<str>>(&mut self, v: &[S]) {
        self.put_i32(v.len() as i32);
        for s in v {
            self.put_ustring(s.as_ref());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn null_and_empty_buffers_differ() {
        let mut out = BytesMut::new();
        out.put_buffer(None);
        out.put_buffer(Some(b""));
        assert_eq!(&out[..], &[0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0]);
        let mut r = Reader::new(out.freeze());
        assert_eq!(r.read_buffer().unwrap(), None);
        assert_eq!(r.read_buffer().unwrap(), Some(Bytes::new()));
    }

    #[test]
    fn hostile_lengths_are_errors() {
        let mut r = Reader::new(Bytes::from_static(&[0x7f, 0xff, 0xff, 0xff, 1, 2]));
        assert!(matches!(
            r.read_buffer(),
            Err(DecodeError::Truncated { .. })
        ));
        let mut r = Reader::new(Bytes::from_static(&[0xff, 0xff, 0xff, 0xfe]));
        assert_eq!(r.read_buffer(), Err(DecodeError::InvalidLength(-2)));
        let mut r = Reader::new(Bytes::from_static(&[0x10, 0, 0, 0, 0, 0, 0, 0]));
        assert!(r.read_string_vec().is_err());
        let mut r = Reader::new(Bytes::from_static(&[2]));
        assert_eq!(r.read_bool(), Err(DecodeError::InvalidBool(2)));
    }

    #[test]
    fn invalid_utf8_is_replaced_like_java() {
        let mut r = Reader::new(Bytes::from_static(&[0, 0, 0, 2, b'/', 0xff]));
        assert_eq!(r.read_ustring().unwrap(), "/\u{fffd}");
    }
}
