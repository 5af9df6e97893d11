//! The end-to-end test harness: starts real servers on loopback and cleans up after them.
//!
//! Every end-to-end test (conformance, client interop, chaos, recipes) starts its servers
//! through [`TestServer`], so there is one place that knows how to launch Apache ZooKeeper
//! 3.8 (Debian's `zookeeper` package) and the `zooraft` binary, how to pick a free port,
//! how to tell that a server is ready (`srvr` reports a Mode), and how to stop it. A
//! `TestServer` kills its process and removes its data directory when dropped, so a failing
//! test leaves nothing behind.

pub mod conformance;
pub mod ensemble;
pub mod java;
pub mod proxy;
pub mod raw_client;
pub mod rt;
pub mod server;

pub use ensemble::TestEnsemble;
pub use server::{
    four_letter_word, free_port, zooraft_binary, ServerKind, TestServer, TestServerBuilder,
};
