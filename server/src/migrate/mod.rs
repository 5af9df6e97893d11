//! Moving state in and out of zooraft: `zooraft import` (an Apache ZooKeeper data
//! directory into a new zooraft store), `zooraft export` (a stopped member's state as a
//! ZooKeeper data directory: the way back), `zooraft backup` (a consistent snapshot of a
//! running member, over its admin port) and `zooraft restore` (a new store from a backup).
//!
//! The top layer of the crate but one: it uses `state` (the state machine and its
//! snapshot encoding), `raft` (the RocksDB store a member opens, and the replica a running
//! member serves backups from) and `config`; ZooKeeper's file format itself is the
//! `zkdata` crate, which needs no RocksDB.
//!
//! A new store is written the way a member that received a Raft snapshot holds it: the
//! state as the snapshot at index 1, whose Raft term is the imported last zxid's epoch.
//! A member started on it campaigns in a later term, and since a zxid is
//! `term << 32 | counter`, its zxids continue above every imported one with the epoch
//! bumped. Other members of an ensemble start empty and receive that snapshot from the
//! leader. Files: `store.rs` (opening and writing stores), `convert.rs` (trees both
//! ways), `import.rs`, `export.rs`, `backup.rs` (file format, client, restore, and the
//! snapshot stream the AdminServer's `snapshot` command sends).

mod backup;
mod convert;
mod export;
mod import;
mod store;

pub use backup::{backup, restore, restore_payload, snapshot_body};
pub use convert::to_state;
pub use export::export;
pub use import::{import, ImportOptions};
pub(crate) use store::{store_dir, write_takeover_store};

use std::io::Write;
use std::time::Instant;

/// Prints progress lines at most once a second, with a rate.
pub(crate) struct Reporter<'a> {
    out: &'a mut dyn Write,
    start: Instant,
    last: Instant,
}

impl<'a> Reporter<'a> {
    pub fn new(out: &'a mut dyn Write) -> Reporter<'a> {
        let now = Instant::now();
        Reporter {
            out,
            start: now,
            last: now,
        }
    }

    /// A progress line (skipped if one was printed less than a second ago).
    pub fn progress(&mut self, what: &str, count: u64, bytes: u64) {
        if self.last.elapsed().as_secs_f64() < 1.0 {
            return;
        }
        self.last = Instant::now();
        let secs = self.start.elapsed().as_secs_f64().max(1e-3);
        let _ = writeln!(
            self.out,
            "  {what}: {count} ({:.1} MB) at {:.0}/s",
            bytes as f64 / 1e6,
            count as f64 / secs
        );
    }

    pub fn line(&mut self, text: std::fmt::Arguments) {
        let _ = writeln!(self.out, "{text}");
    }

    pub fn elapsed(&self) -> f64 {
        self.start.elapsed().as_secs_f64()
    }
}
