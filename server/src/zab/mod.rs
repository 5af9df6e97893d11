//! Live migration's first half: this member joins a running Apache ZooKeeper ensemble as an
//! **observer**, speaking ZooKeeper's own learner protocol on the leader's quorum port
//! (`migrateFromZooKeeper=true`, and this member's `server.N` line marked `:observer`). It
//! takes the leader's tree, applies every committed transaction as ZooKeeper's observers
//! do, and serves clients meanwhile: reads from its own tree, writes, session changes and
//! `sync` forwarded to the leader and answered when their transaction comes back.
//!
//! A layer of its own beside `raft`: it takes the connections' inputs in place of the Raft
//! thread, through the same [`Replica`](crate::raft::Replica) and
//! [`Connections`](crate::raft::Connections), so the network layer serves clients the same
//! way whichever of the two orders the writes.
//!
//! | file | concern |
//! |------|---------|
//! | `wire.rs` | quorum packets over a blocking stream |
//! | `link.rs` | finding the leader, registering, the reader thread (SNAP included) |
//! | `observer.rs` | the loop: sync, INFORMs, pings, syncs, link failures |
//! | `forward.rs` | this member's requests to the leader, waiting for their transactions |
//! | `apply.rs` | a ZooKeeper transaction applied to the state machine |

mod apply;
mod forward;
mod link;
mod observer;
mod wire;

pub use observer::start;
