//! The zooraft store a migration writes or reads: where it lives (`dataDir/raft`, as
//! `server::raft_dir` says), writing a new one that holds a state as its Raft snapshot, and
//! loading a stopped member's state (its snapshot plus the committed log after it).

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use raft::eraftpb::{ConfState, EntryType, Snapshot, SnapshotMetadata};
use raft::Storage as _;

use crate::config::Config;
use crate::raft::{self as zraft, RaftStorage};
use crate::state::command::{Batch, ClientWrite, CloseReason, Origin};
use crate::state::tree::{TreeOptions, Trigger};
use crate::state::{snapshot, ApplyObserver, SessionInfo, StateMachine, WriteResult};

/// `dataDir/raft` (the same place `server::raft_dir` names; a migration sits below the
/// server and cannot ask it).
pub fn store_dir(config: &Config) -> PathBuf {
    config.data_dir.join("raft")
}

fn is_empty_dir(dir: &Path) -> bool {
    match std::fs::read_dir(dir) {
        Ok(mut entries) => entries.next().is_none(),
        Err(_) => !dir.exists(),
    }
}

/// Refuses a target that already holds a store.
pub fn check_target_empty(config: &Config) -> anyhow::Result<PathBuf> {
    let dir = store_dir(config);
    if !is_empty_dir(&dir) {
        bail!(
            "{} already holds a zooraft store: import and restore only write a new one (move it away first)",
            dir.display()
        );
    }
    Ok(dir)
}

/// Builds a new store under the configured dataDir with `fill`: in a temporary directory
/// beside it, seeded (the ensemble's history starts here: empty members may vote it in),
/// and renamed into place only when complete, so a failure leaves the target as it was.
fn build_store(
    config: &Config,
    fill: impl FnOnce(&RaftStorage, ConfState),
) -> anyhow::Result<PathBuf> {
    let target = check_target_empty(config)?;
    let tmp = config.data_dir.join("raft.migrating");
    if tmp.exists() {
        std::fs::remove_dir_all(&tmp)
            .with_context(|| format!("cannot remove the leftover {}", tmp.display()))?;
    }
    let conf = zraft::initial_membership(config);
    {
        let storage = RaftStorage::open(&tmp, conf.clone())
            .with_context(|| format!("cannot create a store in {}", tmp.display()))?;
        fill(&storage, conf);
        storage
            .set_identity(zraft::Identity::seed())
            .with_context(|| format!("cannot write the store's identity in {}", tmp.display()))?;
    }
    if target.exists() {
        std::fs::remove_dir(&target)
            .with_context(|| format!("cannot replace the empty {}", target.display()))?;
    }
    std::fs::rename(&tmp, &target)
        .with_context(|| format!("cannot move the new store to {}", target.display()))?;
    if let Ok(d) = std::fs::File::open(&config.data_dir) {
        let _ = d.sync_all();
    }
    Ok(target)
}

/// Writes `state` as a new store (its snapshot at index 1) under the configured dataDir
/// ([`build_store`]). Returns the Raft term the store starts in.
pub fn write_new_store(config: &Config, state: &StateMachine) -> anyhow::Result<u64> {
    let term = ((state.last_zxid >> 32).max(1)) as u64;
    let data = snapshot::encode(&snapshot::SnapshotView::of(state));
    build_store(config, |storage, conf| {
        let mut meta = SnapshotMetadata {
            index: 1,
            term,
            ..Default::default()
        };
        meta.set_conf_state(conf);
        let mut snap = Snapshot {
            data,
            ..Default::default()
        };
        snap.set_metadata(meta);
        storage.install_snapshot(&snap);
    })?;
    Ok(term)
}

/// Writes a new store for a member that takes over from a ZooKeeper ensemble at a
/// cut-over, small whatever the tree's size (the cut-over's write pause must not grow with
/// it): no state (the state at the cut-over is the member's copy of the ensemble in
/// `dataDir/zab`, which a restart loads before the log, see `zab::base_state`), and one
/// committed entry at index 1 in `term`, `first` (the same bytes on every member), built by
/// [`build_store`]. Returns it, open.
pub fn write_takeover_store(
    config: &Config,
    term: u64,
    first: Vec<u8>,
) -> anyhow::Result<RaftStorage> {
    let target = build_store(config, |storage, _| {
        let mut entry = raft::eraftpb::Entry::default();
        entry.set_entry_type(EntryType::EntryNormal);
        entry.term = term;
        entry.index = 1;
        entry.data = first.into();
        let hs = raft::eraftpb::HardState {
            term,
            commit: 1,
            ..Default::default()
        };
        storage.append(&[entry], Some(&hs), true);
    })?;
    RaftStorage::open(&target, zraft::initial_membership(config))
        .with_context(|| format!("cannot open the new store in {}", target.display()))
}

/// Applies commands without anyone to tell.
struct Silent;

impl ApplyObserver for Silent {
    fn triggers(&mut self, _: i64, _: &[Trigger]) {}
    fn write_done(&mut self, _: &ClientWrite, _: i64, _: WriteResult) {}
    fn session_created(&mut self, _: i64, _: &SessionInfo, _: Origin, _: i64, _: bool) {}
    fn session_closed(&mut self, _: i64, _: i64, _: CloseReason) {}
}

/// The state of a stopped member: its snapshot, then every committed entry after it,
/// applied as the member would on start.
pub fn load_stopped(config: &Config) -> anyhow::Result<StateMachine> {
    let dir = store_dir(config);
    if is_empty_dir(&dir) {
        bail!("{} holds no zooraft store", dir.display());
    }
    let storage =
        RaftStorage::open(&dir, zraft::initial_membership(config)).with_context(|| {
            format!(
                "cannot open the store in {} (is the member still running?)",
                dir.display()
            )
        })?;
    let options = TreeOptions {
        extended_types: config.extended_types,
    };
    let mut state = match storage.snapshot_reader() {
        Some(src) => snapshot::decode_from(src, options)
            .with_context(|| format!("cannot load the snapshot in {}", dir.display()))?,
        None => StateMachine::new(options),
    };
    let first = storage.snapshot_metadata().index + 1;
    let commit = storage.hard_state().commit;
    if commit >= first {
        let entries = storage
            .entries(
                first,
                commit + 1,
                None,
                raft::GetEntriesContext::empty(false),
            )
            .with_context(|| format!("cannot read the log in {}", dir.display()))?;
        for e in entries {
            if e.get_entry_type() != EntryType::EntryNormal || e.data.is_empty() {
                continue;
            }
            let batch = Batch::decode(e.data.clone())
                .with_context(|| format!("log entry {} does not decode", e.index))?;
            for command in &batch.commands {
                state.apply_one(command, e.term, batch.time, &mut Silent);
            }
        }
    }
    Ok(state)
}
