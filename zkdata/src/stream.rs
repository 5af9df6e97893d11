//! Snapshot compression, as `zookeeper.snapshot.compression.method` chooses it: none,
//! `gz` (a gzip stream, file suffix `.gz`) or `snappy` (snappy-java's `SnappyOutputStream`
//! framing, suffix `.snappy`). ZooKeeper's checksums cover the uncompressed stream, so a
//! snapshot is decompressed whole and then parsed.
//!
//! snappy-java's framing is not the snappy "framing format": an 8-byte magic
//! (`\x82SNAPPY\0`), two big-endian ints (version 1, compatible version 1), then blocks of
//! a big-endian length and that many bytes of raw snappy; a writer may start a new header
//! at any block boundary (streams concatenate).

use std::io::{Read, Write};

/// How a snapshot file is compressed; the file name's suffix says which.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    None,
    Gzip,
    Snappy,
}

const SNAPPY_MAGIC: [u8; 8] = [0x82, b'S', b'N', b'A', b'P', b'P', b'Y', 0];
const SNAPPY_BLOCK: usize = 32 * 1024;

impl Compression {
    /// From a snapshot file name (`snapshot.1a2b`, `snapshot.1a2b.gz`, `snapshot.1a2b.snappy`).
    pub fn of_file_name(name: &str) -> Compression {
        if name.ends_with(".gz") {
            Compression::Gzip
        } else if name.ends_with(".snappy") {
            Compression::Snappy
        } else {
            Compression::None
        }
    }

    /// The suffix ZooKeeper gives such a file.
    pub fn suffix(self) -> &'static str {
        match self {
            Compression::None => "",
            Compression::Gzip => ".gz",
            Compression::Snappy => ".snappy",
        }
    }

    /// Parses the value of `zookeeper.snapshot.compression.method`.
    pub fn from_method(method: &str) -> Option<Compression> {
        match method.trim() {
            "" => Some(Compression::None),
            "gz" => Some(Compression::Gzip),
            "snappy" => Some(Compression::Snappy),
            _ => None,
        }
    }
}

/// Why a compressed stream could not be read; `offset` is in the compressed file.
#[derive(Debug, thiserror::Error)]
#[error("{what} at compressed offset {offset}")]
pub struct StreamError {
    pub what: String,
    pub offset: u64,
}

/// Decompresses a whole file's bytes.
pub fn decompress(kind: Compression, raw: Vec<u8>) -> Result<Vec<u8>, StreamError> {
    match decompress_prefix(kind, raw) {
        (out, None) => Ok(out),
        (_, Some(e)) => Err(e),
    }
}

/// Decompresses what can be read of a file: the bytes decoded, and why decoding stopped
/// early if it did. A gzip file cut short by a crash while it was written decodes to a
/// prefix of its stream before the error; a snappy one gives no prefix.
pub fn decompress_prefix(kind: Compression, raw: Vec<u8>) -> (Vec<u8>, Option<StreamError>) {
    match kind {
        Compression::None => (raw, None),
        Compression::Gzip => {
            let mut out = Vec::with_capacity(raw.len() * 4);
            let mut d = flate2::read::GzDecoder::new(&raw[..]);
            // `read_to_end` keeps what it decoded before an error.
            let error = d.read_to_end(&mut out).err().map(|e| StreamError {
                what: format!("gzip: {e}"),
                offset: raw.len() as u64,
            });
            (out, error)
        }
        Compression::Snappy => match snappy_decode(&raw) {
            Ok(out) => (out, None),
            Err(e) => (Vec::new(), Some(e)),
        },
    }
}

fn snappy_decode(raw: &[u8]) -> Result<Vec<u8>, StreamError> {
    let err = |what: String, offset: usize| StreamError {
        what,
        offset: offset as u64,
    };
    let mut out = Vec::with_capacity(raw.len() * 3);
    let mut pos = 0;
    let mut decoder = snap::raw::Decoder::new();
    let mut seen_header = false;
    while pos < raw.len() {
        if raw.len() - pos >= 16 && raw[pos..pos + 8] == SNAPPY_MAGIC {
            let version =
                i32::from_be_bytes([raw[pos + 8], raw[pos + 9], raw[pos + 10], raw[pos + 11]]);
            if version != 1 {
                return Err(err(
                    format!("snappy-java stream version {version}"),
                    pos + 8,
                ));
            }
            pos += 16;
            seen_header = true;
            continue;
        }
        if !seen_header {
            return Err(err("not a snappy-java stream (no header)".into(), pos));
        }
        if raw.len() - pos < 4 {
            return Err(err("truncated snappy block length".into(), pos));
        }
        let len = i32::from_be_bytes([raw[pos], raw[pos + 1], raw[pos + 2], raw[pos + 3]]);
        let start = pos + 4;
        if len < 0 || start + len as usize > raw.len() {
            return Err(err(
                format!("snappy block of {len} bytes runs past the end"),
                pos,
            ));
        }
        let block = &raw[start..start + len as usize];
        let n = snap::raw::decompress_len(block).map_err(|e| err(format!("snappy: {e}"), start))?;
        let at = out.len();
        out.resize(at + n, 0);
        decoder
            .decompress(block, &mut out[at..])
            .map_err(|e| err(format!("snappy: {e}"), start))?;
        pos = start + len as usize;
    }
    if !seen_header {
        return Err(err("empty snappy-java stream".into(), 0));
    }
    Ok(out)
}

/// Compresses a whole snapshot stream.
pub fn compress(kind: Compression, plain: &[u8]) -> Vec<u8> {
    match kind {
        Compression::None => plain.to_vec(),
        Compression::Gzip => {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            // Writing to a Vec cannot fail.
            let _ = e.write_all(plain);
            e.finish().unwrap_or_default()
        }
        Compression::Snappy => {
            let mut out = Vec::with_capacity(plain.len() / 2 + 16);
            out.extend_from_slice(&SNAPPY_MAGIC);
            out.extend_from_slice(&1i32.to_be_bytes());
            out.extend_from_slice(&1i32.to_be_bytes());
            let mut enc = snap::raw::Encoder::new();
            let mut buf = vec![0u8; snap::raw::max_compress_len(SNAPPY_BLOCK)];
            for block in plain.chunks(SNAPPY_BLOCK) {
                let n = enc.compress(block, &mut buf).unwrap_or(0);
                out.extend_from_slice(&(n as i32).to_be_bytes());
                out.extend_from_slice(&buf[..n]);
            }
            out
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_damage() {
        let plain: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        for kind in [Compression::None, Compression::Gzip, Compression::Snappy] {
            let c = compress(kind, &plain);
            assert_eq!(decompress(kind, c.clone()).unwrap(), plain, "{kind:?}");
            if kind != Compression::None {
                let cut = c[..c.len() / 2].to_vec();
                assert!(decompress(kind, cut).is_err(), "{kind:?} truncated");
            }
        }
        assert!(decompress(Compression::Snappy, b"garbage!".to_vec()).is_err());
        assert_eq!(
            Compression::of_file_name("snapshot.1f.snappy"),
            Compression::Snappy
        );
        assert_eq!(
            Compression::of_file_name("snapshot.1f.gz"),
            Compression::Gzip
        );
        assert_eq!(Compression::of_file_name("snapshot.1f"), Compression::None);
    }
}
