//! zooraft: a ZooKeeper-compatible coordination service whose writes are ordered by Raft and
//! stored in RocksDB.
//!
//! The crate is organised by concern (see `shared/ARCHITECTURE.md`):
//! - [`path`], [`acl`], [`tree`], [`state`], [`txn`]: ZooKeeper's data model as a deterministic
//!   state machine, and the replicated command format that drives it.

pub mod acl;
pub mod config;
pub mod consensus;
pub mod critical;
pub mod delivery;
pub mod four_letter;
pub mod metrics;
pub mod net;
pub mod outbox;
pub mod path;
pub mod persist;
pub mod prometheus;
pub mod raft_log;
pub mod reads;
pub mod registry;
pub mod server;
pub mod session;
pub mod shared;
pub mod snapshot;
pub mod state;
pub mod storage;
pub mod transport;
pub mod tree;
pub mod txn;
pub mod watch;
