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
    /// A null path in an op of a multi: ZooKeeper reads it and then fails the whole multi
    /// (MARSHALLINGERROR with an empty multi body), unlike other undecodable multis.
    #[error("null path in a multi op")]
    NullPathInMulti,
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

    /// The next i32 without consuming it, if four bytes remain.
    pub fn peek_i32(&self) -> Option<i32> {
        let b = self.buf.get(..4)?;
        Some(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
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

    /// The unread rest as a shared buffer (no copy), not consumed.
    pub fn peek_bytes(&self) -> Bytes {
        self.buf.clone()
    }

    /// Consumes `n` bytes unread.
    pub fn skip(&mut self, n: usize) -> Result<(), DecodeError> {
        self.need(n)?;
        bytes::Buf::advance(&mut self.buf, n);
        Ok(())
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

    /// A boolean as Java's `DataInput.readBoolean` reads it: any non-zero byte is true.
    pub fn read_bool(&mut self) -> Result<bool, DecodeError> {
        Ok(self.read_u8()? != 0)
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

    /// A jute `ustring`: `None` for null. Malformed UTF-8 is replaced with U+FFFD exactly
    /// where Java's `new String(bytes, UTF_8)` replaces it, so the server sees (and echoes)
    /// the same text ZooKeeper would, and path validation rejects it as ZooKeeper does.
    pub fn read_ustring_opt(&mut self) -> Result<Option<String>, DecodeError> {
        Ok(self.read_len()?.map(|len| {
            let raw = self.buf.split_to(len);
            match std::str::from_utf8(&raw) {
                Ok(s) => s.to_owned(),
                Err(_) => java_utf8_lossy(&raw),
            }
        }))
    }

    /// A `ustring` that must not be null: a null where ZooKeeper expects a string makes it
    /// throw, which a client sees as MARSHALLINGERROR.
    pub fn read_ustring(&mut self) -> Result<String, DecodeError> {
        self.read_ustring_opt()?
            .ok_or(DecodeError::UnexpectedNull("string"))
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

fn is_continuation(b: u8) -> bool {
    b & 0xc0 == 0x80
}

/// Java 17's `new String(bytes, UTF_8)` on malformed input (`String.decodeUTF8_UTF16`):
/// which bytes become one U+FFFD follows Java's rules, not Rust's, so that a server echoing
/// a malformed string sends what ZooKeeper sends.
pub fn java_utf8_lossy(b: &[u8]) -> String {
    const REPL: char = '\u{FFFD}';
    let mut out = String::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let b1 = b[i];
        i += 1;
        if b1 < 0x80 {
            out.push(b1 as char);
        } else if (0xc2..=0xdf).contains(&b1) {
            match b.get(i) {
                Some(&b2) if is_continuation(b2) => {
                    out.push(
                        char::from_u32(((b1 as u32 & 0x1f) << 6) | (b2 as u32 & 0x3f))
                            .unwrap_or(REPL),
                    );
                    i += 1;
                }
                Some(_) => out.push(REPL),
                None => {
                    out.push(REPL);
                    break;
                }
            }
        } else if (0xe0..=0xef).contains(&b1) {
            let overlong = |b2: u8| b1 == 0xe0 && b2 & 0xe0 == 0x80;
            if i + 1 < b.len() {
                let (b2, b3) = (b[i], b[i + 1]);
                if overlong(b2) || !is_continuation(b2) || !is_continuation(b3) {
                    out.push(REPL);
                    // Java's malformed3: one byte if b2 is already wrong, else two.
                    i += if overlong(b2) || !is_continuation(b2) {
                        0
                    } else {
                        1
                    };
                } else {
                    let c =
                        ((b1 as u32 & 0x0f) << 12) | ((b2 as u32 & 0x3f) << 6) | (b3 as u32 & 0x3f);
                    out.push(char::from_u32(c).unwrap_or(REPL));
                    i += 2;
                }
            } else if i < b.len() && (overlong(b[i]) || !is_continuation(b[i])) {
                out.push(REPL);
            } else {
                out.push(REPL);
                break;
            }
        } else if (0xf0..=0xf7).contains(&b1) {
            if i + 2 < b.len() {
                let (b2, b3, b4) = (b[i], b[i + 1], b[i + 2]);
                let uc = ((b1 as u32 & 0x07) << 18)
                    | ((b2 as u32 & 0x3f) << 12)
                    | ((b3 as u32 & 0x3f) << 6)
                    | (b4 as u32 & 0x3f);
                let well_formed = is_continuation(b2) && is_continuation(b3) && is_continuation(b4);
                match char::from_u32(uc) {
                    Some(c) if well_formed && (0x10000..=0x10ffff).contains(&uc) => {
                        out.push(c);
                        i += 3;
                    }
                    _ => {
                        out.push(REPL);
                        // Java's malformed4: 1, 2 or 3 bytes.
                        let bad2 = b1 > 0xf4
                            || (b1 == 0xf0 && !(0x90..=0xbf).contains(&b2))
                            || (b1 == 0xf4 && b2 & 0xf0 != 0x80)
                            || !is_continuation(b2);
                        i += if bad2 {
                            0
                        } else if !is_continuation(b3) {
                            1
                        } else {
                            2
                        };
                    }
                }
            } else {
                let bad2 = |b2: u8| {
                    (b1 == 0xf0 && !(0x90..=0xbf).contains(&b2))
                        || (b1 == 0xf4 && b2 & 0xf0 != 0x80)
                        || !is_continuation(b2)
                };
                out.push(REPL);
                if b1 > 0xf4 || (i < b.len() && bad2(b[i])) {
                    continue;
                }
                i += 1;
                if i < b.len() && !is_continuation(b[i]) {
                    continue;
                }
                break;
            }
        } else {
            out.push(REPL);
        }
    }
    out
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

    /// Java's jute writes a string one UTF-16 unit at a time, so a character outside the
    /// Basic Multilingual Plane becomes two 3-byte surrogate encodings (CESU-8), not the
    /// 4-byte UTF-8 form. Everything else is plain UTF-8.
    fn put_ustring(&mut self, v: &str) {
        if v.chars().all(|c| (c as u32) < 0x10000) {
            self.put_i32(v.len() as i32);
            self.put_slice(v.as_bytes());
            return;
        }
        let start = self.len();
        self.put_i32(0);
        for unit in v.encode_utf16() {
            let u = unit as u32;
            if u < 0x80 {
                self.put_u8(u as u8);
            } else if u < 0x800 {
                self.put_u8((0xc0 | (u >> 6)) as u8);
                self.put_u8((0x80 | (u & 0x3f)) as u8);
            } else {
                self.put_u8((0xe0 | (u >> 12)) as u8);
                self.put_u8((0x80 | ((u >> 6) & 0x3f)) as u8);
                self.put_u8((0x80 | (u & 0x3f)) as u8);
            }
        }
        let len = (self.len() - start - 4) as i32;
        self[start..start + 4].copy_from_slice(&len.to_be_bytes());
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
        let mut r = Reader::new(Bytes::from_static(&[2, 0]));
        assert_eq!(
            r.read_bool(),
            Ok(true),
            "Java reads any non-zero byte as true"
        );
        assert_eq!(r.read_bool(), Ok(false));
    }

    #[test]
    fn strings_outside_the_bmp_are_written_as_java_does() {
        let mut out = BytesMut::new();
        out.put_ustring("/\u{1F600}");
        assert_eq!(
            &out[..],
            &[0, 0, 0, 7, b'/', 0xed, 0xa0, 0xbd, 0xed, 0xb8, 0x80]
        );
        let mut out = BytesMut::new();
        out.put_ustring("/é");
        assert_eq!(&out[..], &[0, 0, 0, 3, b'/', 0xc3, 0xa9]);
    }

    #[test]
    fn invalid_utf8_is_replaced_like_java() {
        let mut r = Reader::new(Bytes::from_static(&[0, 0, 0, 2, b'/', 0xff]));
        assert_eq!(r.read_ustring().unwrap(), "/\u{fffd}");
        // A surrogate encoded on its own (as Java writes a character outside the BMP) is one
        // replacement per 3 bytes in Java, where Rust's lossy conversion gives three.
        assert_eq!(
            java_utf8_lossy(&[b'x', 0xed, 0xa0, 0xbd, 0xed, 0xb8, 0x80]),
            "x\u{fffd}\u{fffd}"
        );
        assert_eq!(java_utf8_lossy(b"bad\xff\xfe"), "bad\u{fffd}\u{fffd}");
        assert_eq!(java_utf8_lossy(&[0xe2, 0x28, 0xa1]), "\u{fffd}(\u{fffd}");
        assert_eq!(java_utf8_lossy(&[0xc3]), "\u{fffd}");
        assert_eq!(java_utf8_lossy("ok é 😀".as_bytes()), "ok é 😀");
    }

    #[test]
    fn null_strings_are_errors_where_a_string_is_required() {
        let mut r = Reader::new(Bytes::from_static(&[0xff, 0xff, 0xff, 0xff]));
        assert_eq!(r.clone().read_ustring_opt().unwrap(), None);
        assert!(r.read_ustring().is_err());
    }
}
