//! Transaction log files (`FileTxnLog`): a 16-byte `FileHeader` (`ZKLG`, version 2,
//! dbid), then records: Adler-32 of the transaction bytes (a long), the bytes as a jute
//! buffer (length, then header, body and optional digest), and the end-of-record byte
//! `B`. Files are preallocated with zeros, so a zero length is the end of the log.
//!
//! As ZooKeeper's `FileTxnIterator` does, a record cut short (the file ends inside it, or
//! its `B` is missing) ends the file quietly: that is a write torn by a crash, never
//! acknowledged. A *complete* record whose checksum does not match is an error, and so is
//! one that does not decode.

use bytes::{BufMut, Bytes, BytesMut};

use crate::checksum::adler32;
use crate::txn::{LoggedTxn, TxnError};

pub const LOG_MAGIC: i32 = 0x5a4b_4c47; // "ZKLG"
pub const FORMAT_VERSION: i32 = 2;
const HEADER_LEN: usize = 16;

/// Why a log file could not be read.
#[derive(Debug, thiserror::Error)]
#[error("{what} (at offset {offset})")]
pub struct LogError {
    pub offset: u64,
    pub what: String,
}

/// How a log file ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogEnd {
    /// At the end of the file or at the zero padding.
    Clean,
    /// Inside a record cut short at this offset.
    Torn(u64),
}

/// Reads every record of a log file in order, handing each (with its offset) to `each`,
/// which may stop the read with its own error.
pub fn read<E: From<LogError>>(
    file: &[u8],
    mut each: impl FnMut(u64, LoggedTxn) -> Result<(), E>,
) -> Result<LogEnd, E> {
    let err = |offset: usize, what: String| LogError {
        offset: offset as u64,
        what,
    };
    if file.len() < HEADER_LEN {
        return Err(err(
            0,
            format!(
                "a log file needs a 16-byte header, it has {} bytes",
                file.len()
            ),
        )
        .into());
    }
    let magic = i32::from_be_bytes([file[0], file[1], file[2], file[3]]);
    if magic != LOG_MAGIC {
        return Err(err(
            0,
            format!("not a ZooKeeper transaction log (magic {magic:#x})"),
        )
        .into());
    }
    let version = i32::from_be_bytes([file[4], file[5], file[6], file[7]]);
    if version != FORMAT_VERSION {
        return Err(err(
            4,
            format!("log format version {version} is not supported (only {FORMAT_VERSION})"),
        )
        .into());
    }
    let mut pos = HEADER_LEN;
    loop {
        let start = pos;
        if file.len() - pos < 12 {
            // Not even a checksum and a length: the end (zeros or a torn tail).
            return Ok(if file[pos..].iter().all(|b| *b == 0) {
                LogEnd::Clean
            } else {
                LogEnd::Torn(start as u64)
            });
        }
        let crc = i64::from_be_bytes(file[pos..pos + 8].try_into().unwrap_or_default());
        let len = i32::from_be_bytes(file[pos + 8..pos + 12].try_into().unwrap_or_default());
        pos += 12;
        if len == 0 || len == -1 {
            return Ok(LogEnd::Clean);
        }
        if len < 0 {
            return Err(err(start + 8, format!("invalid record length {len}")).into());
        }
        let len = len as usize;
        if file.len() - pos < len + 1 || file[pos + len] != b'B' {
            return Ok(LogEnd::Torn(start as u64));
        }
        let bytes = &file[pos..pos + len];
        let computed = adler32(bytes);
        if computed != crc {
            return Err(err(
                start,
                format!("record checksum mismatch: stored {crc:#x}, computed {computed:#x}"),
            )
            .into());
        }
        let txn = LoggedTxn::decode(Bytes::copy_from_slice(bytes))
            .map_err(|e: TxnError| err(start, format!("record does not decode: {e}")))?;
        each(start as u64, txn)?;
        pos += len + 1;
    }
}

/// Writes a log file holding `txns` (no preallocation), as ZooKeeper would.
pub fn write(dbid: i64, txns: &[LoggedTxn]) -> Vec<u8> {
    let mut out = BytesMut::new();
    out.put_i32(LOG_MAGIC);
    out.put_i32(FORMAT_VERSION);
    out.put_i64(dbid);
    for t in txns {
        let bytes = t.encode();
        out.put_i64(adler32(&bytes));
        out.put_i32(bytes.len() as i32);
        out.put_slice(&bytes);
        out.put_u8(b'B');
    }
    out.to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::txn::{op, Txn, TxnHeader};

    fn txns(n: i64) -> Vec<LoggedTxn> {
        (1..=n)
            .map(|i| LoggedTxn {
                header: TxnHeader {
                    client_id: 5,
                    cxid: i as i32,
                    zxid: i,
                    time: 100 + i,
                    kind: op::CREATE_SESSION,
                },
                txn: Txn::CreateSession { timeout: 3000 },
                digest: None,
            })
            .collect()
    }

    fn collect(file: &[u8]) -> Result<(Vec<i64>, LogEnd), LogError> {
        let mut zxids = Vec::new();
        let end = read(file, |_, t| {
            zxids.push(t.header.zxid);
            Ok::<(), LogError>(())
        })?;
        Ok((zxids, end))
    }

    #[test]
    fn reads_padding_and_torn_tails_as_ends() {
        let mut file = write(0, &txns(3));
        assert_eq!(collect(&file).unwrap(), (vec![1, 2, 3], LogEnd::Clean));
        file.extend_from_slice(&[0u8; 4096]);
        assert_eq!(collect(&file).unwrap(), (vec![1, 2, 3], LogEnd::Clean));
        // Cut inside the last record, or its `B` missing: two records and a torn end.
        let whole = write(0, &txns(3));
        let record = (whole.len() - 16) / 3;
        for cut in [whole.len() - 1, whole.len() - 5, whole.len() - record + 10] {
            let (zxids, end) = collect(&whole[..cut]).unwrap();
            assert_eq!(zxids, vec![1, 2]);
            assert!(matches!(end, LogEnd::Torn(_)), "cut {cut}");
        }
    }

    #[test]
    fn damage_is_an_error_with_its_offset() {
        let whole = write(0, &txns(3));
        let record = (whole.len() - 16) / 3;
        let mut bad = whole.clone();
        bad[16 + record + 20] ^= 1; // inside the second record's bytes
        let e = collect(&bad).unwrap_err();
        assert_eq!(e.offset, (16 + record) as u64);
        assert!(e.what.contains("checksum"), "{e}");
        let mut future = whole.clone();
        future[7] = 3;
        assert!(collect(&future).unwrap_err().what.contains("version 3"));
        assert!(collect(b"ZKLG").is_err());
    }
}
