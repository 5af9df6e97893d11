//! Live migration's first half: this member joins a running Apache ZooKeeper ensemble as an
//! **observer**, speaking ZooKeeper's own learner protocol on the leader's quorum port
//! (`migrateFromZooKeeper=true`, and this member's `server.N` line marked `:observer`). It
//! takes the leader's tree, applies every committed transaction as ZooKeeper's observers
//! do, and serves clients meanwhile: reads from its own tree, writes, session changes and
//! `sync` forwarded to the leader and answered when their transaction comes back.
//!
//! A layer of its own beside `raft`: it takes the connections' inputs in place of the Raft
//! thread, through the same `Replica` and
//! `Connections`, so the network layer serves clients the same
//! way whichever of the two orders the writes.
//!
//! | file | concern |
//! |------|---------|
//! | `wire.rs` | quorum packets over a blocking stream |
//! | `link.rs` | finding the leader, registering, the reader thread (SNAP included) |
//! | `tls_link.rs` | the link over TLS (`sslQuorum`): one thread reads and writes it |
//! | `quorum_auth.rs` | quorum SASL (`quorum.auth.*`): the mechanism, the learner's DIGEST-MD5 |
//! | `quorum_gssapi.rs` | quorum SASL with Kerberos, the learner's GSSAPI |
//! | `observer.rs` | the loop: sync, INFORMs, pings, syncs, link failures |
//! | `inbox.rs` | the connections' inputs into the loop, and back out to Raft |
//! | `pause.rs` | a cut-over's write pause and commit, as one member keeps them |
//! | `forward.rs` | this member's requests to the leader, waiting for their transactions |
//! | `apply.rs` | a ZooKeeper transaction applied to the state machine |
//! | `journal.rs` | `dataDir/zab`: what a restart resumes from |
//! | `cutover.rs` | the cut-over's steps as a member takes them, and forming Raft |
//! | `coordinator.rs`, `client.rs` | `zooraft migrate status` and `cutover`, and the small client they use |

mod apply;
mod client;
mod coordinator;
mod cutover;
mod forward;
mod inbox;
mod journal;
mod link;
mod observer;
mod pause;
mod quorum_auth;
mod quorum_gssapi;
mod tls_link;
mod wire;

use anyhow::Context;

use crate::config::Config;
use crate::state::tree::TreeOptions;
use crate::state::StateMachine;
pub use coordinator::{cutover, status, CutoverOptions};
pub use cutover::{cut_over_members, raft_config};

/// The state a member that cut over starts Raft from while its store holds no snapshot
/// yet: its copy of the ensemble at the cut-over's zxid, under the store's log. `None` if
/// it did not cut over, or joined empty.
pub fn base_state(config: &Config) -> anyhow::Result<Option<StateMachine>> {
    let Some(record) = cutover::read_record(config)? else {
        return Ok(None);
    };
    if record.late {
        return Ok(None);
    }
    let (state, _) = recover(config)?;
    if state.last_zxid != record.zxid {
        anyhow::bail!(
            "this member cut over at zxid {:#x}, but its copy of the ensemble in {} reaches {:#x}: \
             the state its Raft store starts from is missing",
            record.zxid,
            journal_dir(config).display(),
            state.last_zxid
        );
    }
    Ok(Some(state))
}
pub use observer::{start, Resume};

/// Where an observing member keeps its copy of the ensemble's state.
pub fn journal_dir(config: &Config) -> std::path::PathBuf {
    config.data_dir.join("zab")
}

/// Opens `dataDir/zab`: the state this member had applied when it stopped, and what the
/// observer resumes with.
pub fn recover(config: &Config) -> anyhow::Result<(StateMachine, Resume)> {
    let dir = journal_dir(config);
    let options = TreeOptions {
        extended_types: config.extended_types,
    };
    let (journal, r) = journal::Journal::open(&dir, options, |state, t| {
        apply::apply_txn(state, t, None, &mut apply::Quiet);
    })
    .with_context(|| {
        format!(
            "cannot read this member's copy of the ensemble in {}",
            dir.display()
        )
    })?;
    tracing::info!(
        zxid = format!("{:#x}", r.state.last_zxid),
        replayed = r.replayed,
        "resuming from this member's copy of the ZooKeeper ensemble"
    );
    Ok((
        r.state,
        Resume {
            journal,
            accepted_epoch: r.accepted_epoch,
            current_epoch: r.current_epoch,
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn create(zxid: i64, path: &str) -> Vec<u8> {
        journal::create_txn(zxid, path).encode().to_vec()
    }

    #[test]
    fn a_member_that_cut_over_starts_from_its_copy_at_the_recorded_zxid() {
        let dir = tempfile::tempdir().unwrap();
        let config = Config {
            data_dir: dir.path().to_path_buf(),
            ..Config::default()
        };
        assert!(
            base_state(&config).unwrap().is_none(),
            "no cut-over: nothing"
        );
        let (mut journal, _) = recover(&config).map(|(s, r)| (r.journal, s)).unwrap();
        journal.append(&create(0x1_0000_0001, "/a")).unwrap();
        journal.append(&create(0x1_0000_0002, "/b")).unwrap();
        journal.sync().unwrap();
        drop(journal);
        let record = cutover::journal_record_path(&config);
        std::fs::write(&record, "zxid=0x100000002 members=4,5 late=0\n").unwrap();
        let state = base_state(&config).unwrap().expect("the copy");
        assert_eq!(state.last_zxid, 0x1_0000_0002);
        assert!(state.tree.get("/b").is_some());
        // A copy that does not reach the cut-over's zxid is refused, not used.
        std::fs::write(&record, "zxid=0x100000003 members=4,5 late=0\n").unwrap();
        let e = base_state(&config).expect_err("refused");
        assert!(e.to_string().contains("reaches 0x100000002"), "{e}");
        // A member that joined empty starts empty.
        std::fs::write(&record, "zxid=0x100000003 members=4,5 late=1\n").unwrap();
        assert!(base_state(&config).unwrap().is_none());
        assert_eq!(cut_over_members(&config).unwrap(), Some(vec![4, 5]));
    }
}
