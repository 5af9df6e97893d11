//! Data on disk: what a member keeps across restarts and what it does when its disk or its
//! clock misbehaves. Restarts after kill -9 ([`durability`]), a stopped member's disk full,
//! failing or flipped ([`disk_faults`]), damage appearing under a running member
//! ([`live_corruption`]), a member restarted on a wiped directory ([`wiped_member`]), the
//! data moved in and out (`zooraft import`, `export`, backup and restore: [`migrate`]), and
//! wall-clock steps ([`clock_jumps`]).
//!
//! They are grouped because they all act on a member's data directory or its clock, and
//! mostly on zooraft alone (ZooKeeper has no free-space reserve, scrub or data-directory
//! identity to compare with). Several need root (tmpfs mounts); every mount is undone when
//! its server is dropped.

mod clock_jumps;
mod disk_faults;
mod durability;
mod live_corruption;
mod migrate;
mod wiped_member;
