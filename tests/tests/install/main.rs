//! Installing and packaging, as a user meets zooraft: `scripts/run` from a clone and the
//! binary's `--version` and `--help` ([`install`]); the Debian package installed, run,
//! upgraded and purged ([`package`]); the book's shell blocks marked as checked, run as
//! written ([`book_examples`]).
//!
//! They are grouped because they run the repository's scripts and the documented commands
//! rather than the test kit's launchers. The package and the book's examples need root;
//! the package test takes turns with any other run on the machine through a lock file
//! (flock, so also with another test of this binary), and the book's examples run in
//! network, mount and process namespaces of their own, so their fixed ports and /tmp paths
//! meet nothing else.

mod book_examples;
mod install;
mod package;
