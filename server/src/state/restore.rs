//! Applying an operator's restore (the AdminServer's `restore`, ZooKeeper 3.9's command):
//! the tree and the sessions become those of a snapshot, on every member, at one entry of
//! the log.
//!
//! ZooKeeper 3.9 restores each server on its own, sets its zxid back to the snapshot's, and
//! asks the operator to block clients meanwhile: a client that saw a later zxid cannot
//! reconnect to a server behind it. Here the restore is one replicated command, so every
//! member switches at the same point, and zxids keep rising (the restore's zxid is the
//! entry's; the nodes keep the zxids the snapshot gave them). What follows from that:
//! - **Every session open when it applies expires.** Its client's view (its watches, its
//!   last zxid, its ephemerals) belongs to the replaced tree; an expiry is the one signal
//!   every client library answers by reading the state afresh. A session of the snapshot
//!   with the same id (a backup of this very ensemble) goes too, with its ephemerals.
//! - **The snapshot's other sessions come back** with their ephemerals, as in ZooKeeper;
//!   their clients are gone, so the leader expires them after their timeouts unless a
//!   client resumes one.
//! - **The membership stays this ensemble's**: `/zookeeper/config` is kept as it was, never
//!   taken from the snapshot (which may come from another ensemble).
//!
//! The bytes were checked when the restore was asked for; a member that still cannot
//! decode them (they do not change between members, so none can) leaves its state as it
//! was.

use bytes::Bytes;

use super::command::CloseReason;
use super::snapshot;
use super::tree::CONFIG;
use super::{ApplyObserver, StateMachine};

/// Applies [`Command::Restore`](super::command::Command::Restore) to `machine` at `zxid`.
pub(super) fn apply(
    machine: &mut StateMachine,
    nonce: u64,
    state: &Bytes,
    zxid: i64,
    obs: &mut impl ApplyObserver,
) {
    let restored = match snapshot::decode(state.clone(), machine.tree.options) {
        Ok(s) => s,
        Err(e) => {
            tracing::error!("a committed restore does not decode ({e}); state unchanged");
            return;
        }
    };
    let config = machine.tree.get(CONFIG).map(|n| {
        let data = Bytes::copy_from_slice(n.data().unwrap_or_default());
        (n.mzxid(), n.mtime(), data, n.version())
    });
    let open: Vec<i64> = machine.sessions.keys().copied().collect();
    machine.tree = restored.tree;
    machine.sessions = restored.sessions;
    // Nothing to trigger: every connection's session is about to end.
    let mut triggers = Vec::new();
    for session in &open {
        if machine.sessions.remove(session).is_some() {
            machine.tree.kill_session(zxid, *session, &mut triggers);
        }
    }
    if let Some((mzxid, mtime, data, version)) = config {
        machine
            .tree
            .replace_config(mzxid, mtime, data, version, &mut triggers);
    }
    tracing::warn!(
        zxid = format_args!("{zxid:#x}"),
        sessions_expired = open.len(),
        sessions_restored = machine.sessions.len(),
        nodes = machine.tree.node_count(),
        "restored the state from a snapshot"
    );
    for session in open {
        obs.session_closed(session, zxid, CloseReason::Expired);
    }
    obs.restored(nonce, zxid, &machine.sessions);
}
