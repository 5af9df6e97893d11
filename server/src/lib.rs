//! zooraft: a ZooKeeper-compatible coordination service whose writes are ordered by Raft and
//! stored in RocksDB.
//!
//! The crate is organised by concern (see `shared/ARCHITECTURE.md`):
//! - [`path`], [`acl`], [`tree`], [`state`], [`txn`]: ZooKeeper's data model as a deterministic
//!   state machine, and the replicated command format that drives it.

pub mod acl;
pub mod path;
pub mod tree;
pub mod state;
pub mod txn;
pub mod outbox;
pub mod watch;
pub mod storage;
pub mod snapshot;
