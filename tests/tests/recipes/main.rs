//! The recipes crate (`zooraft-recipes`) end to end: its locks, barriers, counters, caches
//! and elections on real servers, Apache ZooKeeper 3.8 and zooraft, over both client
//! backends (zookeeper-client and zookeeper-async), beside Apache Curator and kazoo on the
//! same paths, under injected faults, across processes and through a live migration.
//!
//! They live in the tests crate, not in `recipes/tests/`, so that the recipes crate does
//! not depend on the test kit that depends on it (a dev-dependency cycle): the recipes
//! crate keeps its unit and doc tests, and its examples, which [`examples`] runs.
//!
//! One module per recipe or concern; [`common`] holds the servers, clients, bounded waits,
//! the contenders and their shared log that the others use.

#[macro_use]
mod common;

mod barriers;
mod cache;
mod cache_memory;
mod counters;
mod election;
mod examples;
mod faults;
mod migration;
mod multi_lock;
mod mutex;
mod observability;
mod processes;
mod rwlock;
mod safety;
mod zookeeper_client;
