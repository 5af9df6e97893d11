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
//! | `lock` | a lock recipe cycle: create ephemeral-sequential `_c_<uuid>-lock-` under one of `--locks` parents, getChildren of it, delete |
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
//! /usr/share/java/zookeeper.jar:slf4j-simple.jar ...ZooKeeperServerMain zoo.cfg`, default
//! G1 collector, fsync on as by default, admin server off) and zooraft (`--zooraft-bin`,
//! default `$ZOORAFT_BIN`, then next to this executable, `$CARGO_TARGET_DIR/release/zooraft`,
//! `target/release/zooraft`) with `--config zoo.cfg`. Both get the same zoo.cfg keys
//! (tickTime, dataDir, clientPort, clientPortAddress, maxClientCnxns=0), data directories
//! under the same `--data-root` (same filesystem; tmpfs is warned about) and the same log
//! level (`--log-level warn`). Both stay up for the whole run and first get
//! `--server-warmup` of unmeasured load (JIT). Then each workload is measured in
//! `--rounds` rounds; a round runs both servers back to back, and which goes first
//! alternates from round to round. Each run uses its own fresh parent znode.
//!
//! Output: a markdown table with, per workload, each server's median-round ops/s, the
//! zooraft/ZooKeeper ratio (median of the per-round ratios, with their range), the ratio
//! of server CPU per op (ZooKeeper's over zooraft's: robust to a busy machine, unlike
//! throughput), and p50/p99; then a detail table per run (p99.9, max, generator CPU,
//! server CPU, µs of server CPU per op, machine busy %, errors by kind). A JSON file holds
//! everything (`--json PATH`, default `$CARGO_TARGET_DIR/zooraft-bench/compare-<time>.json`).
//! A missing zooraft binary is an error message before anything starts, unless
//! `--only zookeeper`.
//!
//! # Ensembles, TLS, scenarios and charts
//!
//! - `--ensemble 3` runs the throughput workloads against a 3-member ensemble of each
//!   server ([`target`]: same zoo.cfg `server.N` lines for both, data under `--data-root`),
//!   load sessions spread over the members round-robin; server CPU is the members' sum.
//! - `--tls get,set,connect` starts both servers again with a TLS client port and the same
//!   certificates ([`tls`]: made with openssl, mutual TLS, PEM stores) and measures each
//!   workload on the plain port and over TLS: the TLS cost (TLS / plain) of each server and
//!   zooraft/ZooKeeper over TLS. ZooKeeper serves TLS only with Netty, so its plain figures
//!   there are Netty's. `connect` over TLS is measured twice: `connect (TLS)`, each loop
//!   a client that resumes the session its previous connection got (its own session
//!   store, as a reconnecting client process has), and `connect (TLS, full handshakes)`,
//!   resumption off (new clients: certificate signatures and checks every time). Every
//!   TLS result records what its handshakes negotiated (version, cipher suite, full or
//!   resumed), listed under the TLS table and in the JSON (`tls_handshakes`).
//! - `--scenarios failover,sessions,watches,scale` (or `all`) runs the [`scenario`]s, each on
//!   fresh servers: leader kill -9 to first acknowledged write (3 members), memory per
//!   session and per watch, time to fire `--fire` watches on one change, and at each
//!   `--znodes` count memory, restart to serving, and a snapshot under a write load. Memory
//!   is zooraft's RSS against ZooKeeper's live heap after a full GC ([`memory`]).
//! - [`charts`] writes SVG charts beside the JSON (or into `--charts DIR`): throughput per
//!   workload, a latency CDF per workload, memory and restart time against znodes.
//!
//! ```text
//! # The runs behind the book's Performance page (docs/src/performance.md) (an hour or more on
//! # 2 cores), into a scratch directory; docs/bench/ is changed only to publish a run on purpose:
//! zooraft-bench compare --rounds 3 -w set,get,create,mixed --tls get,set,connect \
//!     --scenarios all --znodes 1000000 --json $OUT/standalone.json --charts $OUT
//! zooraft-bench compare --ensemble 3 --rounds 3 -w set,get,create,mixed \
//!     --json $OUT/ensemble.json --charts $OUT
//! # Only -w none: scenarios alone (e.g. 10M znodes; ZooKeeper then needs a bigger heap):
//! zooraft-bench compare -w none --scenarios scale --znodes 1000000,5000000,10000000 --zk-heap 8g
//! ```
//!
//! # Defaults and tuning (2 cores)
//!
//! `--connections 32 --depth 8` (256 requests in flight), `--warmup 2s --duration 5s
//! --rounds 3`, one generator thread: a full `compare` (7 workloads × 2 servers × 3
//! rounds) takes about 6 minutes; `--only zookeeper` about 3.
//!
//! - The generator is not the bottleneck: against ZooKeeper it uses 5–25% of one core
//!   (≈2 µs of CPU per op, most of it in the kernel's loopback TCP) while ZooKeeper uses
//!   ≈11 µs per read and ≈35 µs per write. `--threads 2` changes nothing measurable.
//! - ZooKeeper's writes scale with requests in flight (group commit: one fsync per batch)
//!   up to its `globalOutstandingLimit` of 1000; reads peak around 256 in flight and
//!   fall with many more connections. 32×8 is near saturation for reads and well into
//!   group commit for writes, with p99 in the tens of milliseconds.
//! - For latency at light load, run `--connections 1 --depth 1`.
//! - ZooKeeper's listen backlog is Java's default of 50: with 128 `connect` loops some SYNs
//!   are dropped and p99.9 shows the 1 s SYN retransmit.
//! - The machines are shared and noisy. Two A/A runs (ZooKeeper against itself, a script
//!   that starts ZooKeeper passed as `--zooraft-bin`) on a busy machine (load average
//!   10–16 on 2 cores) gave per-round throughput ratios from 0.3 to 2.0 and median
//!   ratios from 0.45 to 1.47; the CPU-per-op ratio stayed within 0.75–1.16. Trust a
//!   throughput ratio only well outside that band, check the `machine busy` column, and
//!   use more `--rounds` when other work is running (`compare` warns when it starts on a
//!   busy machine).
//!
//! # Locks compared
//!
//! `zooraft-bench locks` ([`locks`]) is the other kind of comparison: lock services side
//! by side (zooraft, Apache ZooKeeper, Redis, Redlock, etcd), for speed and for safety
//! under pauses and failovers, counted by a resource that records every entry. The book's
//! Locks page publishes its table (`docs/bench/locks-compared.*`).
//!
//! Other binaries in `src/bin/` (e.g. `lock_bench`) may use this library.

pub mod charts;
pub mod cli;
pub mod cpu;
pub mod floor;
pub mod load;
pub mod locks;
pub mod memory;
pub mod report;
pub mod runner;
pub mod scenario;
pub mod server;
pub mod session;
pub mod stats;
pub mod target;
pub mod tls;
pub mod workload;
pub mod zk_snapshot;
