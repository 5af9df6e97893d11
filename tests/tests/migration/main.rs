//! Moving from Apache ZooKeeper without downtime: zooraft members observing a running
//! ZooKeeper ensemble ([`live_migration`]), then `zooraft migrate cutover` turning them into
//! a Raft ensemble with their clients connected ([`cutover`]).
//!
//! They are grouped because both run real ZooKeeper voters and zooraft observers of them
//! (`zooraft_tests::live_migration`), with kazoo and Java clients writing throughout, and
//! compare the trees node by node.

mod cutover;
mod live_migration;
