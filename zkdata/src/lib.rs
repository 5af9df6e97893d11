//! Apache ZooKeeper's on-disk format, read and written without ZooKeeper: snapshot files
//! (optionally gz or snappy compressed) and transaction logs, with their checksums and
//! digests, and a replay of the log over the snapshot that reproduces ZooKeeper's own
//! restore. zooraft's `import`, `export` and backup commands are built on this.
//!
//! Pure code on byte buffers and files: no RocksDB, no server. Modules: `checksum`
//! (Adler-32, CRC-32), `stream` (compression), `txn` (transaction records), `log` (log
//! files), `snapshot` (snapshot files), `tree` (the data tree and the replay rules),
//! `datadir` (choosing files, restoring, writing a data directory).

use std::path::PathBuf;

pub mod checksum;
pub mod datadir;
pub mod log;
pub mod snapshot;
pub mod stream;
pub mod tree;
pub mod txn;

pub use datadir::{restore, write_datadir, DigestCheck, Progress, Restored};
pub use stream::Compression;
pub use tree::{OwnerKind, StatPersisted, ZkNode, ZkTree};

/// Why a data directory could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{file}: {source}")]
    Io {
        file: PathBuf,
        source: std::io::Error,
    },
    #[error("{file}: {what} (at offset {offset})")]
    Damaged {
        file: PathBuf,
        offset: u64,
        what: String,
    },
    #[error("{0}")]
    Inconsistent(String),
    /// A log read error before the file is known (converted to `Damaged` by the caller).
    #[error("{0}")]
    Log(#[from] log::LogError),
}

/// ZooKeeper's session password for `session` (`ZooKeeperServer.generatePasswd`: sixteen
/// bytes of `java.util.Random` seeded with the id XOR `0xB3415C00`), so that a client
/// holding a session from ZooKeeper can resume it after a migration.
pub fn zookeeper_session_password(session: i64) -> [u8; 16] {
    const MULT: i64 = 0x5_DEEC_E66D;
    const MASK: i64 = (1 << 48) - 1;
    let mut seed = (session ^ 0xB341_5C00) ^ MULT;
    seed &= MASK;
    let mut next_int = || {
        seed = (seed.wrapping_mul(MULT).wrapping_add(0xB)) & MASK;
        (seed >> 16) as i32
    };
    let mut out = [0u8; 16];
    let mut i = 0;
    while i < 16 {
        let mut rnd = next_int();
        for _ in 0..4.min(16 - i) {
            out[i] = rnd as u8;
            rnd >>= 8;
            i += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn java_random_bytes() {
        // `new java.util.Random(id ^ 0xB3415C00L).nextBytes(b)`, printed by a JVM.
        assert_eq!(
            super::zookeeper_session_password(42),
            [200, 19, 238, 73, 86, 32, 195, 166, 135, 148, 239, 39, 162, 57, 232, 169]
        );
        assert_eq!(
            super::zookeeper_session_password(0x1000a2b3c4d0001),
            [188, 71, 58, 244, 34, 201, 76, 229, 36, 75, 161, 240, 111, 135, 26, 205]
        );
    }
}
