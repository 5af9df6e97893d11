//! `zooraft-bench`: how we know whether zooraft beats Apache ZooKeeper 3.8, and by how much.
//!
//! Performance is only ever reported as a ratio between the two servers measured in one run
//! on the same machine: the machines are noisy, so absolute figures are context, never a
//! threshold.
//!
//! # The load generator
//!
//! [`load`] speaks the wire protocol directly through the `jute` codec (no ZooKeeper client
//! library, whose threads and queues would be measured too). N sessions each keep up to D
//! requests in flight (pipelining), for a warm-up and then a measured window, with a fixed
//! op mix. Workloads ([`workload::Workload`]):
//!
//! | name | one op is |
//! |---|---|
//! | `create` | a persistent create of a fresh znode with `--data-size` bytes |
//! | `set` | setData (version -1) on one of `--keys` pre-created znodes |
//! | `get` | getData on a pre-created znode |
//! | `exists` | exists on a pre-created znode |
//! | `mixed` | `--read-pct`% getData, the rest setData |
//! | `lock` | a lock recipe cycle: create ephemeral-sequential `_c_<uuid>-lock-` under a shared parent, getChildren, delete |
//! | `connect` | TCP connect + handshake (createSession) + closeSession; `--connections` concurrent loops |
//!
//! Throughput counts ops completed inside the measured window; latency (send to reply, or
//! the whole cycle) goes into an HDR histogram (p50, p90, p99, p99.9, max). Every non-zero
//! reply code and every connection failure is tallied by kind, shown in the tables and the
//! JSON, and makes the command exit with status 1. Every wait has a deadline.
//!
//! Each result also carries CPU figures for the measured window: the generator's own CPU
//! (all its threads), the server process's CPU (when its pid is known), server CPU µs per
//! op, and how busy the whole machine was. On a 2-core machine the generator competes with
//! the server, so read these before trusting a ratio.
//!
//! # Usage
//!
//! ```text
//! # Side by side (builds both; starts both servers itself):
//! cargo build --release -p zooraft -p zooraft-bench
//! cargo run --release -p zooraft-bench -- compare
//! cargo run --release -p zooraft-bench -- compare --duration 5s --connections 8,32 -w get,set
//! # Until zooraft runs: ZooKeeper only
//! cargo run --release -p zooraft-bench -- compare --only zookeeper
//! # Load a server that is already running (e.g. under a profiler):
//! cargo run --release -p zooraft-bench -- run --addr 127.0.0.1:2181 -w mixed --server-pid 1234
//! ```
//!
//! `compare` starts Apache ZooKeeper from Debian's jar (`java -Xms2g -Xmx2g -cp
//! /usr/share/java/zookeeper.jar:slf4j-simple.jar ...ZooKeeperServerMain zoo.cfg`, fsync on
//! as by default, admin server off) and zooraft (`--zooraft-bin`, default `$ZOORAFT_BIN`,
//! then next to this executable, `$CARGO_TARGET_DIR/release/zooraft`,
//! `target/release/zooraft`) with `--config zoo.cfg`; both get data directories under the
//! same `--data-root` (same filesystem) and the same log level (`--log-level warn`). Both
//! stay up for the whole run; each workload uses its own parent znode; which server goes
//! first alternates per workload. It prints two markdown tables (throughput and p50/p99
//! with the zooraft/ZooKeeper ratio; then tails, CPU and errors per server) and writes a
//! JSON file (`--json PATH`, default `$CARGO_TARGET_DIR/zooraft-bench/compare-<time>.json`).
//! A missing zooraft binary is an error message before anything starts, unless
//! `--only zookeeper`.
//!
//! Defaults (`--connections 32 --depth 8 --duration 10s --warmup 3s`, one generator thread)
//! are chosen so that on the 2-core machine the server, not the generator, is the
//! bottleneck for writes, and the generator stays well under one core for reads; the
//! generator's CPU column says whether that held. A full `compare` of the seven workloads
//! takes 7 × 2 × (warm-up + duration + setup + pause) ≈ 3.5 minutes with the defaults.
//!
//! Other binaries in `src/bin/` (e.g. `lock_bench`) may use this library.

pub mod cli;
pub mod cpu;
pub mod load;
pub mod report;
pub mod runner;
pub mod server;
pub mod session;
pub mod stats;
pub mod workload;
