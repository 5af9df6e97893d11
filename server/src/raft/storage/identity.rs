//! What a store knows of its own history: which incarnation of this member it is, and
//! whether it may be trusted to hold everything the member ever acknowledged.
//!
//! A member's promises (its votes, the entries it acknowledged as durable) live in its data
//! directory. A directory that was wiped, replaced by a new disk or restored from an older
//! copy has forgotten some of them, and a member that votes or acknowledges with it can let
//! a stale member lead and lose acknowledged writes (`raft/trust.rs` says how the ensemble
//! keeps such a member out until it has caught up). The store itself cannot tell an empty
//! directory of a new ensemble from a wiped one; what it records is:
//!
//! - an **incarnation**: a random number drawn when the store is created (and drawn again
//!   whenever this member learns its store forgot something), so the ensemble can tell
//!   this life of the member from an earlier one under the same `myid`;
//! - whether the store is **trusted**: created by an earlier build (it held the member's
//!   promises all along), founded with the ensemble (its first vote went to a candidate as
//!   empty as itself), or caught up and promoted by a leader under this incarnation.
//!
//! A store that `zooraft import` or `zooraft restore` wrote is trusted and a **seed**: the
//! ensemble's history starts from it, so empty members may vote it in (`trust.rs`) until
//! it has committed an entry with them.
//!
//! Written synced (`state` column family, key `identity`) before the member acts on it:
//! a store is created untrusted in the same batch that creates it.

pub(super) const KEY_IDENTITY: &[u8] = b"identity";
/// Layout: version (u8) = 1, incarnation (u64 BE), flags (u8: bit 0 trusted, bit 1 seed).
const IDENTITY_VERSION: u8 = 1;
const IDENTITY_LEN: usize = 10;
const TRUSTED: u8 = 1;
const SEED: u8 = 2;

/// See the module docs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Identity {
    /// Never 0 (0 stands for "unknown" in what peers report).
    pub incarnation: u64,
    pub trusted: bool,
    /// Written by an import or a restore, and not yet part of a formed ensemble.
    pub seed: bool,
}

impl Identity {
    /// A new incarnation, trusted or not.
    pub fn fresh(trusted: bool) -> Identity {
        Identity {
            incarnation: rand::random::<u64>().max(1),
            trusted,
            seed: false,
        }
    }

    /// The identity of a store an import or a restore wrote.
    pub fn seed() -> Identity {
        Identity {
            seed: true,
            ..Identity::fresh(true)
        }
    }

    pub(super) fn encode(&self) -> [u8; IDENTITY_LEN] {
        let mut b = [0u8; IDENTITY_LEN];
        b[0] = IDENTITY_VERSION;
        b[1..9].copy_from_slice(&self.incarnation.to_be_bytes());
        b[9] = if self.trusted { TRUSTED } else { 0 } | if self.seed { SEED } else { 0 };
        b
    }

    /// The identity `encode` wrote, or what is wrong with the bytes.
    pub(super) fn decode(b: &[u8]) -> Result<Identity, String> {
        if b.len() != IDENTITY_LEN || b[0] != IDENTITY_VERSION {
            return Err(format!("{} bytes, version {:?}", b.len(), b.first()));
        }
        let mut n = [0u8; 8];
        n.copy_from_slice(&b[1..9]);
        let incarnation = u64::from_be_bytes(n);
        if incarnation == 0 {
            return Err("incarnation 0".into());
        }
        Ok(Identity {
            incarnation,
            trusted: b[9] & TRUSTED != 0,
            seed: b[9] & SEED != 0,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::raft::storage::{store::CF_STATE, RaftStorage};
    use raft::eraftpb::ConfState;

    #[test]
    fn an_identity_reads_back_as_written_and_bad_bytes_are_refused() {
        for id in [
            Identity::fresh(false),
            Identity::fresh(true),
            Identity::seed(),
        ] {
            assert_eq!(Identity::decode(&id.encode()).ok(), Some(id));
        }
        let mut b = Identity::fresh(true).encode();
        b[0] = 9;
        assert!(Identity::decode(&b).is_err());
        assert!(Identity::decode(&b[..5]).is_err());
        let zero = Identity {
            incarnation: 0,
            ..Identity::seed()
        };
        assert!(Identity::decode(&zero.encode()).is_err());
    }

    #[test]
    fn a_new_store_is_untrusted_an_identity_survives_a_reopen_and_a_new_dir_gets_another() {
        let dir = tempfile::tempdir().expect("temporary directory");
        let conf = ConfState {
            voters: vec![1, 2, 3],
            ..Default::default()
        };
        let first = {
            let s = RaftStorage::open(dir.path(), conf.clone()).expect("open");
            let id = s.identity();
            assert!(!id.trusted, "a new store may be a wiped one");
            let trusted = Identity {
                trusted: true,
                ..id
            };
            s.set_identity(trusted).expect("set");
            trusted
        };
        let s = RaftStorage::open(dir.path(), conf.clone()).expect("reopen");
        assert_eq!(s.identity(), first);
        drop(s);
        std::fs::remove_dir_all(dir.path()).expect("wipe");
        let s = RaftStorage::open(dir.path(), conf).expect("open the wiped directory");
        assert!(!s.identity().trusted);
        assert_ne!(s.identity().incarnation, first.incarnation);
        // A store of an earlier build has no identity: it is trusted.
        s.store
            .db
            .delete_cf(s.store.cf(CF_STATE), KEY_IDENTITY)
            .expect("delete");
        drop(s);
        let conf = ConfState {
            voters: vec![1, 2, 3],
            ..Default::default()
        };
        let s = RaftStorage::open(dir.path(), conf).expect("reopen");
        assert!(s.identity().trusted && !s.identity().seed);
    }
}
