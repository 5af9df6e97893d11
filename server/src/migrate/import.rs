//! `zooraft import`: an Apache ZooKeeper data directory (3.5 to 3.9, stopped) into a new
//! zooraft store. The whole restore (snapshot, log replay, digests) happens in memory
//! first; only a state that restored cleanly is written, so a damaged input leaves the
//! target untouched.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;
use zkdata::{DigestCheck, Progress};

use super::{convert, store, Reporter};
use crate::config::Config;
use crate::state::tree::TreeOptions;

/// What to import.
#[derive(Debug, Clone)]
pub struct ImportOptions {
    /// ZooKeeper's dataDir (holding `version-2/snapshot.*`).
    pub from: PathBuf,
    /// ZooKeeper's dataLogDir, when the logs are kept apart (`version-2/log.*`).
    pub log_dir: Option<PathBuf>,
}

/// Imports, printing progress and a summary to `out`.
pub fn import(config: &Config, opts: &ImportOptions, out: &mut dyn Write) -> anyhow::Result<()> {
    store::check_target_empty(config)?;
    let mut r = Reporter::new(out);
    let log_dir = opts.log_dir.clone().unwrap_or_else(|| opts.from.clone());
    r.line(format_args!(
        "importing ZooKeeper data from {} (logs from {})",
        opts.from.display(),
        log_dir.display()
    ));
    let restored = zkdata::restore(&opts.from, &log_dir, &mut |p| match p {
        Progress::Snapshot { nodes, bytes } => r.progress("snapshot nodes", nodes, bytes),
        Progress::Log { txns, bytes } => r.progress("log transactions", txns, bytes),
    })
    .with_context(|| format!("cannot import from {}", opts.from.display()))?;
    for s in &restored.skipped {
        r.line(format_args!(
            "  skipped {}: incomplete (a crash while ZooKeeper wrote it), as ZooKeeper skips it",
            s.display()
        ));
    }
    r.line(format_args!(
        "  snapshot {} (zxid {:#x}), {} transactions replayed from {} log file(s){}",
        restored.snapshot.display(),
        restored.snapshot_zxid,
        restored.txns,
        restored.logs.len(),
        if restored.replay_errors > 0 {
            format!(
                "; {} replay errors over the fuzzy snapshot ignored, as ZooKeeper ignores them",
                restored.replay_errors
            )
        } else {
            String::new()
        }
    ));
    if let Some((file, offset)) = &restored.torn {
        r.line(format_args!(
            "  {} ends in a torn record at offset {offset} (a write cut by a crash, never acknowledged): the log ends there",
            file.display()
        ));
    }
    if !restored.orphans.is_empty() {
        r.line(format_args!(
            "  deleted the ephemerals of {} session(s) missing from the session table, as ZooKeeper does at load",
            restored.orphans.len()
        ));
    }
    match restored.digest {
        DigestCheck::Verified(n) => r.line(format_args!(
            "  digest: the tree matches ZooKeeper's digest ({n} checks)"
        )),
        DigestCheck::NotAvailable => r.line(format_args!(
            "  digest: none in the files (zookeeper.digest.enabled=false), not checked"
        )),
    }
    let read_secs = r.elapsed();
    let bytes = restored.bytes;
    let options = TreeOptions {
        extended_types: config.extended_types,
    };
    let state = convert::to_state(restored.tree, options).context("cannot convert the tree")?;
    let nodes = state.tree.node_count() - 1;
    let sessions = state.sessions.len();
    let ephemerals = state.tree.ephemeral_count();
    let last = state.last_zxid;
    let convert_secs = r.elapsed() - read_secs;
    let term = store::write_new_store(config, &state)?;
    // Freeing millions of nodes one by one takes a good part of a second per million; the
    // command is done, so that happens on the side (and not at all if the process exits).
    std::thread::spawn(move || drop(state));
    let secs = r.elapsed();
    r.line(format_args!(
        "  {read_secs:.2} s reading and replaying, {convert_secs:.2} s converting, {:.2} s writing the store",
        secs - read_secs - convert_secs
    ));
    r.line(format_args!(
        "imported {nodes} znodes, {sessions} sessions ({ephemerals} ephemerals), last zxid {last:#x}, from {:.1} MB in {secs:.2} s ({:.0} znodes/s)",
        bytes as f64 / 1e6,
        nodes as f64 / secs.max(1e-3)
    ));
    r.line(format_args!(
        "wrote {} (Raft term {term}): new zxids start at epoch {} and above",
        store::store_dir(config).display(),
        term + 1
    ));
    Ok(())
}
