//! The kit the end-to-end tests (`zooraft-tests`) and the bench (`zooraft-bench`) share:
//! everything that starts, damages or talks to a server process from outside it.
//!
//! One place knows how to launch Apache ZooKeeper 3.8 (Debian's `zookeeper` package) and
//! the `zooraft` binary, how to pick a free port, how to tell that a server is ready
//! (`srvr` reports a Mode) and how to stop it, so a figure in the bench and a behaviour in
//! a test are about servers started the same way. A [`TestServer`] kills its process and
//! removes its directory when dropped, so a failing test or bench leaves nothing behind.
//!
//! - [`server`]: [`TestServer`] and its builder, for either [`ServerKind`];
//! - [`ports`], [`binaries`], [`four_letter`], [`process`]: free loopback ports, the
//!   workspace's programs, the four-letter words the kit reads a server's state with, and
//!   stopping a process;
//! - [`pki`]: a CA and certificates in the store formats ZooKeeper reads, made with `openssl`;
//! - [`proxy`]: a TCP proxy that cuts, blackholes or one-way-cuts a link;
//! - [`kdc`]: a throwaway MIT Kerberos KDC;
//! - [`lossyfs`], [`tmpfs`]: data directories that lose unsynced writes at a power loss,
//!   or fill up.
//!
//! Calls that tests make in a line come in two forms: `try_x` returns the error (what the
//! bench uses, to report it), `x` panics with it (what a test wants).

pub mod binaries;
pub mod four_letter;
pub mod kdc;
pub mod lossyfs;
pub mod pki;
pub mod ports;
pub mod process;
pub mod proxy;
pub mod server;
pub mod tmpfs;

pub use binaries::{
    fault_shim, lock_contender_binary, workspace_binary, zooraft_binary, zooraft_cmd,
};
pub use four_letter::four_letter_word;
pub use ports::{free_port, try_free_port};
pub use process::terminate;
pub use server::{LaunchError, ServerKind, TestServer, TestServerBuilder, ZOOKEEPER_JAR};
