//! `zooraft export`: a stopped member's state as an Apache ZooKeeper data directory (a
//! snapshot with its digest, and `acceptedEpoch`/`currentEpoch`), which ZooKeeper 3.8
//! starts from with the same tree, Stats, ACLs and sessions: the way back.
//!
//! The snapshot carries the session table, so ZooKeeper keeps the ephemerals (it deletes
//! those whose session it does not know) and expires them after their timeouts. The epoch
//! files hold the last zxid's epoch, so a quorum peer accepts the directory too.

use std::io::Write;
use std::path::Path;

use super::{convert, store, Reporter};
use crate::config::Config;

/// Exports to `to` (created if missing; refused if it already holds ZooKeeper data).
pub fn export(
    config: &Config,
    to: &Path,
    compression: zkdata::Compression,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    let mut r = Reporter::new(out);
    let state = store::load_stopped(config)?;
    let zk = convert::to_zookeeper(&state);
    let path = zkdata::write_datadir(&zk, to, compression)?;
    r.line(format_args!(
        "exported {} znodes and {} sessions at zxid {:#x} to {} in {:.2} s",
        zk.nodes.len(),
        zk.sessions.len(),
        zk.last_zxid,
        path.display(),
        r.elapsed()
    ));
    Ok(())
}
