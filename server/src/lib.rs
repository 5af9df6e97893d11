//! zooraft: a ZooKeeper-compatible coordination service whose writes are ordered by Raft and
//! stored in RocksDB.
//!
//! # Layout
//!
//! Four layers, each a folder that uses only the ones below it, then the two files that
//! start a member:
//!
//! - `state/` — the replicated state machine alone: the tree (`tree/`), commands and
//!   batches (`command.rs`), sessions and `apply_one` (`mod.rs`), ACLs, paths, the opcode
//!   table (`opcodes.rs`), snapshot encoding, and ZooKeeper's dynamic configuration with the
//!   reconfig op's checks (`reconfig.rs`). Depends on `jute` and nothing of the server.
//! - `raft/` — raft-rs's driver and everything around it: the messages into the Raft thread
//!   (`input.rs`), the loop (`driver.rs`) and the concerns it owns, each on its own state
//!   and handed what they share (`group.rs`): proposals (`batching.rs`, `proposed.rs`),
//!   applying (`apply.rs`), the leader's duties (`leader.rs`), `read_index.rs`,
//!   `serving.rs`, `snapshot_schedule.rs`, `liveness.rs`; membership changes and leader transfer
//!   (`membership.rs`, `dynamic_file.rs`, `transfer.rs`), members whose data directory
//!   forgot what they acknowledged (`trust.rs`, `recovery.rs`), the log writer, RocksDB storage
//!   (`storage/`) and the peer transport. It reaches client connections only through the `raft::Connections`
//!   trait it declares and the network layer implements.
//! - `net/` — the client port: listener, connections and handshakes, each connection's
//!   in-order pipeline and outbox, local reads, watches, reply encoding, and the
//!   `Connections` implementation (`delivery.rs`).
//! - `ops/` — the operator surface: four-letter words, the AdminServer and the Prometheus
//!   endpoint, all from one gathered view of the metrics (`view.rs`), and the browser
//!   console on the admin port (`console/`).
//! - `migrate/` — moving state in and out: `import` from and `export` to Apache
//!   ZooKeeper's data directory (the format itself is the `zkdata` crate), online `backup`
//!   served on the admin port, and `restore`. Uses `state`, `raft` and `config`.
//! - `zab/` — live migration: the member observes a running ZooKeeper ensemble with
//!   ZooKeeper's learner protocol, in the Raft thread's place (the same `Replica` and
//!   `Connections`), until `zooraft migrate cutover` turns the zooraft members into a Raft
//!   ensemble in the same process. Uses `migrate`, `raft`, `state` and `config`.
//! - `config/` (zoo.cfg, `myid`, flags; `server.N` lines, the whitelist), `critical.rs`
//!   (critical threads, fatal exits), `allocator.rs` (the resident set, freed memory given
//!   back), `stats.rs` (the count/min/max/percentile summaries
//!   behind `mntr`), `tls/` (TLS settings, key and trust stores, rustls configurations that
//!   follow their files, certificate subjects) and `sasl/` (the JAAS file, DIGEST-MD5) are
//!   leaves every layer may use; `server.rs` starts and stops a member on top of all.
//!
//! # The path of a write (setData)
//!
//! 1. `net/connection.rs` reads the frame, classifies the opcode (`state/opcodes.rs`) and
//!    queues a write item in the connection's pipeline (`net/pipeline.rs`);
//!    `net/submit.rs` encodes the writes of one socket read and hands them to the Raft
//!    thread together, as one `raft::Input::Commands`.
//! 2. `raft/driver.rs` gathers the turn's commands (`raft/proposed.rs`, which keeps their
//!    encoding); `raft/batching.rs` proposes them as one batch (`state/command.rs`), or
//!    forwards them to the leader (`raft/transport.rs`).
//! 3. The Ready cycle in `raft/driver.rs` stages the entry; `raft/log_writer.rs` fsyncs it
//!    (`raft/storage/`) and raft-rs commits it once a quorum has it.
//! 4. `raft/apply.rs` applies the committed batch (the leader's own without decoding it,
//!    `raft/proposed.rs`): `state/mod.rs` (`apply_one`) changes
//!    the tree (`state/tree/write.rs`), reporting to the apply round of
//!    `net/delivery.rs`, which fires watches (`net/watch.rs`) and encodes the reply
//!    (`net/reply.rs`).
//! 5. `net/pipeline.rs` puts the reply, and every read queued behind it, into the
//!    connection's outbox (`net/outbox.rs`); the connection's writer task sends them.
//!
//! # The path of a read (getData)
//!
//! 1. `net/connection.rs` reads the frame and, under the state's read lock, hands it to the
//!    pipeline (`net/pipeline.rs`), which answers at once if nothing of the session is
//!    outstanding, or queues it behind the session's writes (answered in step 5 above).
//! 2. `net/reads.rs` answers from the tree (`state/tree/mod.rs`), with ACLs
//!    (`state/acl.rs`) and the watch it sets (`net/watch.rs`), into the outbox.
//!
//! The binary and the tests use [`config`] and [`server`]; everything else is internal.

mod allocator;
pub mod config;
mod critical;
pub mod migrate;
mod net;
mod ops;
mod raft;
mod sasl;
pub mod server;
mod state;
mod stats;
mod tls;
pub mod zab;

/// Counts what each thread allocates, for the memory-per-znode test.
#[cfg(test)]
#[global_allocator]
static ALLOCATOR: state::tree::memory::CountingAlloc = state::tree::memory::CountingAlloc;
