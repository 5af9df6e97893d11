//! `zooraft-bench locks`: lock services compared on one machine, for speed and for safety
//! under the faults that matter.
//!
//! zooraft exists because locks built on Redis (`SET NX PX`, Redlock) and on lease stores
//! (etcd) lose exclusivity on failover and pauses, and a lock is only as safe as its
//! fencing. This subcommand measures that side by side: the same N contender tasks, the
//! same critical section (enter, record the entry with the token at a shared
//! [`resource`], short work, leave) for every system behind one trait ([`system`]):
//!
//! | system | module | lock | token |
//! |---|---|---|---|
//! | zooraft, standalone and 3 members | [`zk`] | the recipes' `Mutex` | czxid |
//! | Apache ZooKeeper 3.8 | [`zk`] | the same | czxid |
//! | Redis | [`redis`] | `SET NX PX` + Lua compare-and-delete | random value |
//! | Redlock, 3 masters | [`redlock`] | majority of `SET NX PX` within the validity time | random value |
//! | etcd 3.4 | [`etcd`] | lease + create-revision queue (`concurrency.Mutex`) | create revision |
//!
//! Figures: acquisitions/s and handoff latency (p50, p99; from one holder leaving the
//! resource to the next entering) at each `--contenders` level; and under [`faults`]: a
//! holder paused past its lease (with and without the resource checking the token), the
//! Redis master killed with its replica promoted, a zooraft ensemble's leader killed.
//! Safety is counted by the resource: overlaps and stale writes accepted or refused.
//!
//! Every server (Debian's `redis-server` and `etcd`, ZooKeeper's jar, our zooraft) is
//! started by the bench on 127.0.0.1 ephemeral ports with data under a temporary
//! directory, one system at a time, and stopped after its runs. Every run stops by itself.
//!
//! ```text
//! zooraft-bench locks                               # everything, about two minutes
//! zooraft-bench locks --systems redis,etcd -c 4 --duration 1s --faults pause
//! zooraft-bench locks --json docs/bench/locks.json --charts docs/bench
//! ```

pub mod contend;
pub mod etcd;
pub mod etcd_http;
pub mod faults;
pub mod procs;
pub mod proxy;
pub mod redis;
pub mod redlock;
pub mod report;
pub mod resource;
pub mod resp;
pub mod runner;
pub mod system;
pub mod zk;

pub use runner::run;
