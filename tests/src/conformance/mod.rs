//! The differential conformance suite: the same scripted scenarios run against Apache
//! ZooKeeper 3.8 and against zooraft, and their normalized transcripts must be identical.
//!
//! - [`ctx`]: the scenario language (sessions, requests, events, reconnects, expiry).
//! - [`transcript`]: what a scenario observed, and the normalization (zxids, times and
//!   session ids compared by rank or label, children sorted, passwords dropped).
//! - [`describe`]: how requests and replies are written into transcript lines.
//! - [`req`]: short request constructors.
//! - [`scenarios`]: the scenarios, in two groups (issue 2 core, issue 3 extended).
//! - [`runner`]: starts the servers, runs, compares and reports.
//!
//! Run with `cargo test -p zooraft-tests --test conformance`; `CONFORMANCE_TARGET=zookeeper`
//! compares Apache ZooKeeper with a second Apache ZooKeeper (the normalization's own test),
//! `CONFORMANCE_FILTER=substring` runs a subset, `CONFORMANCE_SHOW=1` prints every
//! reference transcript, `CONFORMANCE_VERBOSE=1` prints allowed differences.

pub mod ctx;
pub mod describe;
mod fail;
mod reading;
mod recorder;
pub mod req;
pub mod runner;
pub mod scenarios;
mod sessions;
mod setup;
pub mod transcript;

pub use ctx::{Ctx, Fail, Res};
pub use runner::{run_group, Group, Scenario, ServerSpec, Summary};
